//! Alert rules, their validation, alert fingerprints and the state machine of one alert. Pure:
//! evaluation (`queries::alerts`) computes the findings, `ingest::alerts` stores what this decides.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::domain::taxonomy::LemonCategory;

/// What a rule tests, evaluated per cluster over the figures the analytics answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Condition {
    /// A node has improbably many failures (the lemon-nodes test, Holm-corrected at `alpha`) over
    /// the last `window_hours`. Subject: the node.
    LemonNode {
        #[serde(default = "default_alpha")]
        #[schema(minimum = 0.000001, maximum = 0.5, example = 0.05)]
        alpha: f64,
        #[serde(default = "default_window_hours")]
        #[schema(minimum = 0.01, maximum = 8784, example = 720)]
        window_hours: f64,
        /// The failures counted: this effective root-cause category, or all; hardware by default
        /// (null too), as `/v1/analytics/lemon-nodes`.
        #[serde(default, deserialize_with = "lemon_category_or_default")]
        #[schema(value_type = Option<LemonCategory>)]
        category: LemonCategory,
    },
    /// A GPU part or a slot fails more than chance (the parts-or-slots test at `alpha`, over all
    /// installed time). Subject: `part:<serial>` or `slot:<node>/<index>`.
    BadPartOrSlot {
        #[serde(default = "default_alpha")]
        #[schema(minimum = 0.000001, maximum = 0.5, example = 0.05)]
        alpha: f64,
    },
    /// A group's MTBF is below `hours` with confidence: the upper bound of its 95% interval is
    /// below `hours`. Subject: the group.
    MtbfBelow {
        #[schema(minimum = 0.01, maximum = 1000000, example = 24)]
        hours: f64,
        #[serde(default = "default_window_hours")]
        #[schema(minimum = 0.01, maximum = 8784, example = 720)]
        window_hours: f64,
        /// Unlabelled nodes are packed into groups of this many GPUs (as `/v1/analytics/mtbf`).
        #[serde(default = "default_group_size")]
        #[schema(minimum = 1, maximum = 1000000, example = 128)]
        group_size: u32,
    },
    /// The failure rate of the last `window_hours` is significantly above the one of the window
    /// before (`/v1/analytics/compare`, 95%). Subject: the cluster.
    FailureRateUp {
        #[serde(default = "default_compare_hours")]
        #[schema(minimum = 0.01, maximum = 8784, example = 168)]
        window_hours: f64,
    },
    /// A failure kind (signal kind and code) seen in the cluster today or yesterday (UTC) and not
    /// in the `days` days before; absent: never before. Subject: `kind:code`.
    NewFailureKind {
        #[schema(minimum = 1, maximum = 3660, example = 30)]
        days: Option<u32>,
    },
    /// No signal nor heartbeat for `minutes`: from one node (`scope` node, subject the node) or
    /// from the whole cluster (`scope` cluster). Watched: the inventory's nodes not retired that
    /// have sent once, last seen at their latest signal's time or heartbeat.
    Silence {
        #[schema(minimum = 0.01, maximum = 527040, example = 15)]
        minutes: f64,
        #[serde(default)]
        scope: SilenceScope,
    },
    /// The share of the cluster's installed GPU-hours available over the last `window_hours` (the
    /// node state ledger, `/v1/analytics/availability`) is below `share`. Subject: the cluster.
    AvailabilityBelow {
        #[schema(minimum = 0.000001, maximum = 1, example = 0.95)]
        share: f64,
        #[serde(default = "default_compare_hours")]
        #[schema(minimum = 0.01, maximum = 8784, example = 168)]
        window_hours: f64,
    },
    /// A repair incident of the last `window_hours` still open longer than the p90 return time of
    /// its cause (`stuck` in `/v1/analytics/repair-pipeline`). Subject: `<node>/<failure id>`.
    StuckRepair {
        #[serde(default = "default_window_hours")]
        #[schema(minimum = 0.01, maximum = 8784, example = 720)]
        window_hours: f64,
    },
    /// The median downtime of the failures of the last `window_hours` (those with a recorded
    /// recovery) is above `minutes`. Subject: the cluster.
    RecoverySlow {
        #[schema(minimum = 0.01, maximum = 527040, example = 60)]
        minutes: f64,
        #[serde(default = "default_compare_hours")]
        #[schema(minimum = 0.01, maximum = 8784, example = 168)]
        window_hours: f64,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SilenceScope {
    #[default]
    Node,
    Cluster,
}

/// A lemon rule's category; null is the default (hardware), as an absent one.
fn lemon_category_or_default<'de, D: serde::Deserializer<'de>>(d: D) -> Result<LemonCategory, D::Error> {
    Ok(Option::<LemonCategory>::deserialize(d)?.unwrap_or_default())
}

fn default_alpha() -> f64 {
    0.05
}
fn default_window_hours() -> f64 {
    720.0
}
fn default_compare_hours() -> f64 {
    168.0
}
fn default_group_size() -> u32 {
    128
}
fn default_repeat_minutes() -> f64 {
    240.0
}
fn default_enabled() -> bool {
    true
}

impl Condition {
    pub fn kind(&self) -> &'static str {
        match self {
            Condition::LemonNode { .. } => "lemon_node",
            Condition::BadPartOrSlot { .. } => "bad_part_or_slot",
            Condition::MtbfBelow { .. } => "mtbf_below",
            Condition::FailureRateUp { .. } => "failure_rate_up",
            Condition::NewFailureKind { .. } => "new_failure_kind",
            Condition::Silence { .. } => "silence",
            Condition::RecoverySlow { .. } => "recovery_slow",
            Condition::AvailabilityBelow { .. } => "availability_below",
            Condition::StuckRepair { .. } => "stuck_repair",
        }
    }
}

/// Where notifications go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReceiverKind {
    /// Prometheus Alertmanager: `url` is its base URL; alerts are posted to `/api/v2/alerts`.
    Alertmanager,
    /// A generic JSON webhook, signed with HMAC-SHA256 when a `secret` is set.
    Webhook,
    /// A Slack-compatible incoming webhook (`{"text": ...}`).
    Slack,
}

impl ReceiverKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiverKind::Alertmanager => "alertmanager",
            ReceiverKind::Webhook => "webhook",
            ReceiverKind::Slack => "slack",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Receiver {
    pub kind: ReceiverKind,
    /// An http:// URL (no TLS client is built in: reach https receivers through a local proxy).
    #[schema(example = "http://alertmanager:9093", max_length = 2000, pattern = "^http://\\S+$")]
    pub url: String,
    /// Webhook only: the HMAC-SHA256 key. Never shown back (reads say `secret_set`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 1000, write_only)]
    pub secret: Option<String>,
}

/// A rule as an admin writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    pub condition: Condition,
    /// Evaluate only these clusters; absent or empty: every cluster.
    #[serde(default)]
    #[schema(value_type = Vec<crate::domain::event::Text>)]
    pub clusters: Vec<String>,
    /// Added to every alert's labels (routing in Alertmanager: team, severity, ...).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Added to every alert's annotations (runbook, description, ...).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// A firing alert is notified again after this long.
    #[serde(default = "default_repeat_minutes")]
    #[schema(minimum = 0.01, maximum = 527040, example = 240)]
    pub repeat_interval_minutes: f64,
    #[serde(default)]
    #[schema(max_items = 16)]
    pub receivers: Vec<Receiver>,
    #[serde(default = "default_enabled")]
    pub enabled: bool,
}

/// Labels a rule may not set: Faultline sets them, the first four on every alert, the others on
/// the alerts whose subject is a node, a GPU, a part or a slot.
pub const RESERVED_LABELS: [&str; 8] = [
    "alertname",
    "cluster",
    "subject",
    "condition",
    "node",
    "gpu",
    "part",
    "slot",
];

fn in_range(field: &str, v: f64, lo: f64, hi: f64) -> Result<(), String> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(format!("{field}: {v} is not between {lo} and {hi}"))
    }
}

fn label_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A rule id: 1 to 100 of `[A-Za-z0-9_.-]`.
pub fn validate_rule_id(id: &str) -> Result<(), String> {
    if (1..=100).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        Ok(())
    } else {
        Err(format!(
            "rule_id: '{id}' must be 1 to 100 of letters, digits, '_', '-', '.'"
        ))
    }
}

impl RuleSpec {
    /// Checks the bounds the schema states; the message starts with the field's path.
    pub fn validate(&self) -> Result<(), String> {
        match &self.condition {
            Condition::LemonNode {
                alpha, window_hours, ..
            } => {
                in_range("condition.alpha", *alpha, 0.000001, 0.5)?;
                in_range("condition.window_hours", *window_hours, 0.01, 8784.0)?;
            }
            Condition::BadPartOrSlot { alpha } => in_range("condition.alpha", *alpha, 0.000001, 0.5)?,
            Condition::MtbfBelow {
                hours,
                window_hours,
                group_size,
            } => {
                in_range("condition.hours", *hours, 0.01, 1e6)?;
                in_range("condition.window_hours", *window_hours, 0.01, 8784.0)?;
                in_range("condition.group_size", f64::from(*group_size), 1.0, 1e6)?;
            }
            Condition::FailureRateUp { window_hours } => {
                in_range("condition.window_hours", *window_hours, 0.01, 8784.0)?
            }
            Condition::NewFailureKind { days } => {
                if let Some(d) = days {
                    in_range("condition.days", f64::from(*d), 1.0, 3660.0)?;
                }
            }
            Condition::Silence { minutes, .. } => in_range("condition.minutes", *minutes, 0.01, 527040.0)?,
            Condition::RecoverySlow { minutes, window_hours } => {
                in_range("condition.minutes", *minutes, 0.01, 527040.0)?;
                in_range("condition.window_hours", *window_hours, 0.01, 8784.0)?;
            }
            Condition::AvailabilityBelow { share, window_hours } => {
                in_range("condition.share", *share, 0.000001, 1.0)?;
                in_range("condition.window_hours", *window_hours, 0.01, 8784.0)?;
            }
            Condition::StuckRepair { window_hours } => in_range("condition.window_hours", *window_hours, 0.01, 8784.0)?,
        }
        in_range("repeat_interval_minutes", self.repeat_interval_minutes, 0.01, 527040.0)?;
        for (i, c) in self.clusters.iter().enumerate() {
            if let Err(e) = crate::domain::event::required_text(&format!("clusters[{i}]"), c.clone()) {
                return Err(format!("{}: {}", e.field.unwrap_or_default(), e.message));
            }
        }
        for (field, map) in [("labels", &self.labels), ("annotations", &self.annotations)] {
            if map.len() > 32 {
                return Err(format!("{field}: at most 32 entries"));
            }
            for (k, v) in map {
                if !label_name_ok(k) || k.len() > 100 {
                    return Err(format!("{field}.{k}: a name is [A-Za-z_][A-Za-z0-9_]*, at most 100"));
                }
                if field == "labels" && RESERVED_LABELS.contains(&k.as_str()) {
                    return Err(format!("{field}.{k}: set by Faultline"));
                }
                if v.len() > 2000 {
                    return Err(format!("{field}.{k}: at most 2000 characters"));
                }
            }
        }
        if self.receivers.len() > 16 {
            return Err("receivers: at most 16".into());
        }
        for (i, r) in self.receivers.iter().enumerate() {
            // No TLS client is built in: an https:// receiver would only ever fail, so it is refused.
            let scheme_ok = r.url.starts_with("http://") && r.url.len() > "http://".len();
            if !scheme_ok || r.url.len() > 2000 || r.url.chars().any(char::is_whitespace) {
                return Err(format!(
                    "receivers[{i}].url: an http:// URL, at most 2000 characters (https: through a local proxy)"
                ));
            }
            match (&r.secret, r.kind) {
                (Some(_), ReceiverKind::Alertmanager | ReceiverKind::Slack) => {
                    return Err(format!("receivers[{i}].secret: only a webhook receiver signs"));
                }
                (Some(s), ReceiverKind::Webhook) if s.is_empty() || s.len() > 1000 => {
                    return Err(format!("receivers[{i}].secret: 1 to 1000 characters"));
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub fn repeat_interval(&self) -> Duration {
        Duration::milliseconds((self.repeat_interval_minutes * 60_000.0) as i64)
    }

    /// Whether the rule evaluates `cluster`.
    pub fn covers(&self, cluster: &str) -> bool {
        self.clusters.is_empty() || self.clusters.iter().any(|c| c == cluster)
    }
}

/// One alert's identity: a hex SHA-256 (first 16 bytes) of rule, cluster and subject.
pub fn fingerprint(rule_id: &str, cluster: &str, subject: &str) -> String {
    let mut h = Sha256::new();
    for part in [rule_id, cluster, subject] {
        h.update(part.as_bytes());
        h.update([0x1f]);
    }
    h.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// What a rule found for one subject of one cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub subject: String,
    /// The figure tested (failures, MTBF upper bound, rate ratio, minutes...).
    pub value: f64,
    pub summary: String,
    /// The API path (with query) of the subject itself: the node's failures or state, the part's
    /// timeline, the node's GPUs for a slot; for a cluster, kind or group, the answer.
    pub link: String,
    /// The API path (with query) of the analytics answer that shows the figure.
    pub answer: String,
    /// Labels that name the subject's parts of the fleet (`node`, `gpu`, `part`, `slot`), so that
    /// Alertmanager can match them against node_exporter or DCGM alerts.
    pub labels: BTreeMap<String, String>,
}

/// The labels of a subject that is a node.
pub fn node_labels(hostname: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("node".to_string(), hostname.to_string())])
}

/// The labels of a slot named `<cluster>/<node>/gpu<index>` (or `<cluster>/<node>`): `slot`, and
/// `node` and `gpu` read from the name.
pub fn slot_labels(cluster: &str, slot: &str) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([("slot".to_string(), slot.to_string())]);
    if let Some(rest) = slot.strip_prefix(cluster).and_then(|r| r.strip_prefix('/')) {
        let (node, gpu) = match rest.rsplit_once('/') {
            Some((node, last)) => match last.strip_prefix("gpu").filter(|i| i.parse::<u32>().is_ok()) {
                Some(i) => (node, Some(i)),
                None => (rest, None),
            },
            None => (rest, None),
        };
        l.insert("node".into(), node.to_string());
        if let Some(i) = gpu {
            l.insert("gpu".into(), i.to_string());
        }
    }
    l
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    Firing,
    Resolved,
}

impl AlertState {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertState::Firing => "firing",
            AlertState::Resolved => "resolved",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [AlertState::Firing, AlertState::Resolved]
            .into_iter()
            .find(|a| a.as_str() == s)
    }
}

/// An alert's stored state, as the transition needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Current {
    pub state: AlertState,
    pub starts_at: DateTime<Utc>,
    pub last_notified_at: DateTime<Utc>,
}

/// Why a notification is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NotifyEvent {
    /// The alert started firing.
    Firing,
    /// Still firing after the repeat interval.
    Repeat,
    Resolved,
    /// Still firing under new labels (the rule's labels were edited). Only Alertmanager hears of
    /// it, as the old label set resolved and the new one firing: there the labels are the alert.
    Relabel,
}

impl NotifyEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::Firing => "firing",
            NotifyEvent::Repeat => "repeat",
            NotifyEvent::Resolved => "resolved",
            NotifyEvent::Relabel => "relabel",
        }
    }
}

/// What one evaluation does to one alert.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing to store (not firing before, not now).
    Nothing,
    /// Still firing, no notification due: refresh the figure.
    Refresh,
    /// A notification: the new state with its times.
    Notify {
        event: NotifyEvent,
        starts_at: DateTime<Utc>,
        ends_at: Option<DateTime<Utc>>,
    },
}

/// The state machine: notified when it starts firing, again every `repeat` while it fires, and
/// once when it resolves; never on an evaluation that changes nothing.
pub fn step(current: Option<&Current>, found: bool, now: DateTime<Utc>, repeat: Duration) -> Step {
    match (current, found) {
        (Some(c), true) if c.state == AlertState::Firing => {
            if now - c.last_notified_at >= repeat {
                Step::Notify {
                    event: NotifyEvent::Repeat,
                    starts_at: c.starts_at,
                    ends_at: None,
                }
            } else {
                Step::Refresh
            }
        }
        (_, true) => Step::Notify {
            event: NotifyEvent::Firing,
            starts_at: now,
            ends_at: None,
        },
        (Some(c), false) if c.state == AlertState::Firing => Step::Notify {
            event: NotifyEvent::Resolved,
            starts_at: c.starts_at,
            ends_at: Some(now),
        },
        (_, false) => Step::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn spec(v: serde_json::Value) -> Result<RuleSpec, String> {
        let s: RuleSpec = serde_json::from_value(v).map_err(|e| e.to_string())?;
        s.validate().map(|()| s)
    }

    #[test]
    fn rules_take_defaults_and_refuse_out_of_bounds_fields_by_name() {
        let s = spec(serde_json::json!({"condition": {"kind": "lemon_node"}})).unwrap();
        assert_eq!(
            s.condition,
            Condition::LemonNode {
                alpha: 0.05,
                window_hours: 720.0,
                category: LemonCategory::Hardware
            }
        );
        // The analytics' default, null too; every category only when asked.
        let s = spec(serde_json::json!({"condition": {"kind": "lemon_node", "category": null}})).unwrap();
        assert!(matches!(
            s.condition,
            Condition::LemonNode {
                category: LemonCategory::Hardware,
                ..
            }
        ));
        let s = spec(serde_json::json!({"condition": {"kind": "lemon_node", "category": "all"}})).unwrap();
        assert!(matches!(
            s.condition,
            Condition::LemonNode {
                category: LemonCategory::All,
                ..
            }
        ));
        assert_eq!(LemonCategory::All.category(), None);
        assert_eq!(LemonCategory::default().as_str(), "hardware");
        assert_eq!(s.repeat_interval_minutes, 240.0);
        assert!(s.enabled && s.covers("any"));
        let e = spec(serde_json::json!({"condition": {"kind": "lemon_node", "alpha": 0.9}})).unwrap_err();
        assert!(e.starts_with("condition.alpha:"), "{e}");
        let e = spec(serde_json::json!({"condition": {"kind": "silence", "minutes": 0}})).unwrap_err();
        assert!(e.starts_with("condition.minutes:"), "{e}");
        let e = spec(serde_json::json!({"condition": {"kind": "silence", "minutes": 5},
            "labels": {"cluster": "x"}}))
        .unwrap_err();
        assert!(e.starts_with("labels.cluster:"), "{e}");
        let e = spec(serde_json::json!({"condition": {"kind": "silence", "minutes": 5},
            "receivers": [{"kind": "slack", "url": "ftp://x"}]}))
        .unwrap_err();
        assert!(e.starts_with("receivers[0].url:"), "{e}");
        let e = spec(serde_json::json!({"condition": {"kind": "silence", "minutes": 5},
            "receivers": [{"kind": "alertmanager", "url": "http://am", "secret": "k"}]}))
        .unwrap_err();
        assert!(e.starts_with("receivers[0].secret:"), "{e}");
        assert!(spec(serde_json::json!({"condition": {"kind": "mtbf_below"}})).is_err());
        assert!(validate_rule_id("lemons-a.1").is_ok() && validate_rule_id("a b").is_err());
    }

    #[test]
    fn slot_names_give_their_node_and_gpu_labels() {
        let l = slot_labels("c1", "c1/n001/gpu3");
        let got: Vec<(&str, &str)> = l.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, vec![("gpu", "3"), ("node", "n001"), ("slot", "c1/n001/gpu3")]);
        let l = slot_labels("c1", "c1/n001");
        assert_eq!((l["node"].as_str(), l.get("gpu")), ("n001", None));
        let l = slot_labels("c1", "c1/rack/n9/gpux");
        assert_eq!((l["node"].as_str(), l.get("gpu")), ("rack/n9/gpux", None));
        assert_eq!(node_labels("n7")["node"], "n7");
    }

    #[test]
    fn fingerprints_are_stable_and_separate_their_parts() {
        let f = fingerprint("r", "c1", "n001");
        assert_eq!(f.len(), 32);
        assert_eq!(f, fingerprint("r", "c1", "n001"));
        assert_ne!(f, fingerprint("r", "c1n", "001"));
        assert_ne!(f, fingerprint("r", "c2", "n001"));
    }

    #[test]
    fn alerts_notify_on_transitions_and_at_the_repeat_interval_only() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 2, 10, 0, 0).unwrap();
        let repeat = Duration::minutes(60);
        assert_eq!(step(None, false, t0, repeat), Step::Nothing);
        let fire = step(None, true, t0, repeat);
        assert_eq!(
            fire,
            Step::Notify {
                event: NotifyEvent::Firing,
                starts_at: t0,
                ends_at: None
            }
        );
        let firing = Current {
            state: AlertState::Firing,
            starts_at: t0,
            last_notified_at: t0,
        };
        assert_eq!(
            step(Some(&firing), true, t0 + Duration::minutes(59), repeat),
            Step::Refresh
        );
        assert_eq!(
            step(Some(&firing), true, t0 + Duration::minutes(60), repeat),
            Step::Notify {
                event: NotifyEvent::Repeat,
                starts_at: t0,
                ends_at: None
            }
        );
        let t1 = t0 + Duration::minutes(5);
        assert_eq!(
            step(Some(&firing), false, t1, repeat),
            Step::Notify {
                event: NotifyEvent::Resolved,
                starts_at: t0,
                ends_at: Some(t1)
            }
        );
        let resolved = Current {
            state: AlertState::Resolved,
            starts_at: t0,
            last_notified_at: t1,
        };
        assert_eq!(step(Some(&resolved), false, t1, repeat), Step::Nothing);
        // Firing again starts a new episode.
        assert_eq!(
            step(Some(&resolved), true, t1 + Duration::minutes(1), repeat),
            Step::Notify {
                event: NotifyEvent::Firing,
                starts_at: t1 + Duration::minutes(1),
                ends_at: None
            }
        );
    }
}
