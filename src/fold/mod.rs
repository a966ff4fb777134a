//! Folding signals into failures. Pure: storage hands in the signals of one correlation key and
//! stores the drafts. The result depends only on the set of signals, never on arrival order.

pub mod burst;

use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use crate::classify::{Classification, Severity};
use crate::domain::taxonomy::Symptom;

/// Signals of one key closer than the window belong to the same failure.
/// Key: the job when the signal names one, else the node, else the signal stands alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CorrelationKey {
    Job(String),
    Node(String),
    Alone(Uuid),
}

impl CorrelationKey {
    pub fn of(job_id: Option<&str>, node: Option<&str>, id: Uuid) -> Self {
        match (job_id, node) {
            (Some(j), _) => CorrelationKey::Job(j.to_string()),
            (None, Some(n)) => CorrelationKey::Node(n.to_string()),
            (None, None) => CorrelationKey::Alone(id),
        }
    }

    pub fn job(&self) -> Option<&str> {
        match self {
            CorrelationKey::Job(j) => Some(j),
            _ => None,
        }
    }

    pub fn node(&self) -> Option<&str> {
        match self {
            CorrelationKey::Node(n) => Some(n),
            _ => None,
        }
    }

    pub fn alone(&self) -> Option<Uuid> {
        match self {
            CorrelationKey::Alone(id) => Some(*id),
            _ => None,
        }
    }

    /// The key of its stored form ([`as_string`](Self::as_string)).
    pub fn parse(stored: &str) -> Option<CorrelationKey> {
        let (kind, rest) = stored.split_once(':')?;
        match kind {
            "job" => Some(CorrelationKey::Job(rest.to_string())),
            "node" => Some(CorrelationKey::Node(rest.to_string())),
            "alone" => rest.parse().ok().map(CorrelationKey::Alone),
            _ => None,
        }
    }

    /// Stored form, e.g. `job:job-17`, `node:gpu-007`, `alone:<uuid>`.
    pub fn as_string(&self) -> String {
        match self {
            CorrelationKey::Job(j) => format!("job:{j}"),
            CorrelationKey::Node(n) => format!("node:{n}"),
            CorrelationKey::Alone(id) => format!("alone:{id}"),
        }
    }
}

/// Kinds that describe performance, not interruptions: they never open or join a failure.
pub const NON_FAILURE_KINDS: &[&str] = &["slowdown", "low_utilization", "node_drain", "node_resume", "job_start"];

/// Whether a signal takes part in failures: not a performance kind, and not explicitly harmless
/// (symptom `none`, e.g. a passing health check or a healthy NVSentinel event).
pub fn participates(kind: &str, symptom: Option<Symptom>) -> bool {
    !NON_FAILURE_KINDS.contains(&kind) && symptom != Some(Symptom::None)
}

#[derive(Debug, Clone)]
pub struct Signal {
    pub id: Uuid,
    pub occurred_at: DateTime<Utc>,
    /// The last occurrence of a burst of identical signals (the same as `occurred_at` for one).
    pub last_at: DateTime<Utc>,
    pub node: Option<String>,
    pub gpu_model: Option<String>,
    /// The GPU the signal names, if any.
    pub gpu: GpuRef,
    pub kind: String,
    pub code: Option<i64>,
    pub symptom: Option<Symptom>,
    pub classification: Classification,
    /// Set when this stands for a stored failure whose signals' rows retention dropped: it then
    /// spans the failure (`occurred_at` .. `last_at`) and carries the signals it stands for.
    pub summary: Option<Box<Summary>>,
}

/// A stored failure as the fold sees it once some of its signals' rows are gone (retention drops
/// whole months, and the failure keeps their ids, nodes and (kind, code)). A later or re-sent old
/// signal re-folds its key with the failure in place of those signals, so it joins the failure
/// instead of forming a second one. The signal fields hold the failure's root and its
/// classification; they are the root's only when [`holds_root`](Self::holds_root).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The failure's signals whose rows are gone, in the failure's order.
    pub signal_ids: Vec<Uuid>,
    /// Each one's kind, U+001F and code ('' when none), as the failure kept it.
    pub signal_kinds: Vec<String>,
    /// The failure's nodes.
    pub nodes: Vec<String>,
    /// The failure's GPU generation (of its root signal's GPU model).
    pub generation: String,
    /// Whether the failure's root is among the signals whose rows are gone; when it is not, the
    /// root's row is folded as a signal of its own and the summary offers no root.
    pub holds_root: bool,
}

/// How a signal names a GPU: its index on the node, its UUID, the PCI bus id of a log line. The
/// part placed there at the signal's time is resolved when read (see `storage::gpus`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuRef {
    pub index: Option<i32>,
    pub uuid: Option<String>,
    pub bus: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FailureDraft {
    /// Deterministic: derived from the cluster, key and first occurrence, so the same signals give
    /// the same id whatever their arrival order, batching or burst compaction.
    pub id: Uuid,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
    pub signal_ids: Vec<Uuid>,
    pub nodes: Vec<String>,
    pub root_signal: Uuid,
    pub root_node: Option<String>,
    pub root_gpu_model: Option<String>,
    /// The generation kept by a failure whose root's row is gone (None: from `root_gpu_model`).
    pub root_generation: Option<String>,
    pub root_gpu: GpuRef,
    pub root_kind: String,
    pub root_code: Option<i64>,
    pub classification: Classification,
    pub symptom: Option<Symptom>,
}

/// Orders candidate root signals, most specific first: non-secondary before secondary, then
/// hardware > platform > user > unknown, then an NCCL timeout last among equals, then severity,
/// then the earliest. The final tie-break on id keeps the choice independent of input order.
fn root_rank(s: &Signal) -> (bool, u8, bool, Severity, DateTime<Utc>, Uuid) {
    let c = &s.classification;
    (
        c.secondary,
        c.root_cause.category.specificity_rank(),
        s.kind == "nccl_timeout",
        c.severity,
        s.occurred_at,
        s.id,
    )
}

fn symptom_rank(s: Symptom) -> u8 {
    match s {
        Symptom::JobCrash => 0,
        Symptom::JobHang => 1,
        Symptom::NodeDown => 2,
        Symptom::SubmissionFailure => 3,
        Symptom::AbnormalBehavior => 4,
        Symptom::Slowdown => 5,
        Symptom::None => 6,
    }
}

/// Namespace for failure ids (uuid v5).
const FAILURE_NAMESPACE: Uuid = Uuid::from_u128(0x6b1f_3c2a_9d4e_4f10_8a7b_5c6d_7e8f_9012);

/// Folds the signals of one (cluster, key) into failures: sessions of signals whose gaps are at
/// most `window`, a gap measured from the latest occurrence so far (a burst's last, not its first)
/// to the next signal's first. Non-participating signals are ignored.
pub fn fold(cluster: &str, key: &CorrelationKey, mut signals: Vec<Signal>, window: Duration) -> Vec<FailureDraft> {
    signals.retain(|s| s.summary.is_some() || participates(&s.kind, s.symptom));
    signals.sort_by(|a, b| a.occurred_at.cmp(&b.occurred_at).then(a.id.cmp(&b.id)));
    let mut drafts = Vec::new();
    let mut start = 0;
    let mut reach = signals.first().map(|s| s.last_at.max(s.occurred_at));
    for i in 1..=signals.len() {
        let boundary = i == signals.len() || reach.is_some_and(|r| signals[i].occurred_at - r > window);
        if boundary {
            drafts.push(draft(cluster, key, &signals[start..i]));
            start = i;
            reach = None;
        }
        if let Some(s) = signals.get(i) {
            let end = s.last_at.max(s.occurred_at);
            reach = Some(reach.map_or(end, |r| r.max(end)));
        }
    }
    drafts
}

fn draft(cluster: &str, key: &CorrelationKey, session: &[Signal]) -> FailureDraft {
    // A summary whose root's row is still stored competes through that row instead.
    let root = session
        .iter()
        .min_by_key(|s| (s.summary.as_ref().is_some_and(|m| !m.holds_root), root_rank(s)))
        .expect("a session holds at least one signal");
    let mut nodes: Vec<String> = session
        .iter()
        .flat_map(|s| match &s.summary {
            Some(m) => m.nodes.clone(),
            None => s.node.clone().into_iter().collect(),
        })
        .collect();
    nodes.sort();
    nodes.dedup();
    let first = &session[0];
    let id = Uuid::new_v5(
        &FAILURE_NAMESPACE,
        format!(
            "{cluster}\n{}\n{}",
            key.as_string(),
            first.occurred_at.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
        )
        .as_bytes(),
    );
    FailureDraft {
        id,
        first_at: first.occurred_at,
        last_at: session
            .iter()
            .map(|s| s.last_at.max(s.occurred_at))
            .max()
            .expect("a session holds at least one signal"),
        signal_ids: session
            .iter()
            .flat_map(|s| match &s.summary {
                Some(m) => m.signal_ids.clone(),
                None => vec![s.id],
            })
            .collect(),
        nodes,
        root_signal: root.id,
        root_node: root.node.clone(),
        root_gpu_model: root.gpu_model.clone(),
        root_generation: root.summary.as_ref().map(|m| m.generation.clone()),
        root_gpu: root.gpu.clone(),
        root_kind: root.kind.clone(),
        root_code: root.code,
        classification: root.classification.clone(),
        symptom: session
            .iter()
            .filter_map(|s| s.symptom)
            .min_by_key(|s| symptom_rank(*s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::taxonomy::Category;

    fn category_of(d: &FailureDraft) -> Category {
        d.classification.root_cause.category
    }
    use crate::classify::tests::small_catalog;

    #[test]
    fn a_key_parses_from_its_stored_form() {
        for key in [
            CorrelationKey::Job("job:with:colons".into()),
            CorrelationKey::Node("gpu-007".into()),
            CorrelationKey::Alone(Uuid::from_u128(7)),
        ] {
            assert_eq!(CorrelationKey::parse(&key.as_string()), Some(key));
        }
        assert_eq!(CorrelationKey::parse("rack:r1"), None);
        assert_eq!(CorrelationKey::parse("alone:not-a-uuid"), None);
        assert_eq!(CorrelationKey::parse("job"), None);
    }

    fn at(min: i64) -> DateTime<Utc> {
        "2026-11-02T00:00:00Z".parse::<DateTime<Utc>>().unwrap() + Duration::minutes(min)
    }

    fn sig(n: u128, min: i64, node: &str, kind: &str, code: Option<i64>) -> Signal {
        let catalog = small_catalog();
        Signal {
            id: Uuid::from_u128(n),
            occurred_at: at(min),
            last_at: at(min),
            node: Some(node.into()),
            gpu_model: Some("H100".into()),
            gpu: GpuRef::default(),
            kind: kind.into(),
            code,
            symptom: (kind == "nccl_timeout").then_some(Symptom::JobHang),
            classification: catalog.classify(kind, code, None, None),
            summary: None,
        }
    }

    fn cascade() -> Vec<Signal> {
        // One XID 79 on n07, then NCCL timeouts from 100 other ranks' nodes, and an XID 45 echo.
        let mut s = vec![sig(1, 0, "n07", "xid", Some(79)), sig(2, 0, "n07", "xid", Some(45))];
        s.extend((0..100).map(|i| {
            sig(
                100 + i as u128,
                3 + (i % 5),
                &format!("n{:02}", i % 16),
                "nccl_timeout",
                None,
            )
        }));
        s
    }

    #[test]
    fn a_cascade_is_one_hardware_failure_rooted_at_the_xid() {
        let key = CorrelationKey::Job("j1".into());
        let drafts = fold("c1", &key, cascade(), Duration::minutes(10));
        assert_eq!(drafts.len(), 1);
        let d = &drafts[0];
        assert_eq!(d.signal_ids.len(), 102);
        assert_eq!(d.root_signal, Uuid::from_u128(1));
        assert_eq!(category_of(d), Category::Hardware);
        assert_eq!(d.root_node.as_deref(), Some("n07"));
        assert_eq!(d.nodes.len(), 16);
        assert_eq!(d.symptom, Some(Symptom::JobHang));
        assert_eq!((d.first_at, d.last_at), (at(0), at(7)));
    }

    #[test]
    fn order_of_arrival_does_not_change_the_result() {
        let key = CorrelationKey::Job("j1".into());
        let mut shuffled = cascade();
        shuffled.reverse();
        shuffled.swap(3, 50);
        assert_eq!(
            fold("c1", &key, cascade(), Duration::minutes(10)),
            fold("c1", &key, shuffled, Duration::minutes(10))
        );
    }

    #[test]
    fn gaps_longer_than_the_window_split_failures_and_chains_join() {
        let key = CorrelationKey::Node("n1".into());
        // 0, 9, 18 chain (gaps of 9 min) into one; 40 is alone (gap 22 min).
        let s = vec![
            sig(1, 0, "n1", "xid", Some(13)),
            sig(2, 9, "n1", "xid", Some(13)),
            sig(3, 18, "n1", "xid", Some(13)),
            sig(4, 40, "n1", "xid", Some(79)),
        ];
        let drafts = fold("c1", &key, s, Duration::minutes(10));
        assert_eq!(
            drafts.iter().map(|d| d.signal_ids.len()).collect::<Vec<_>>(),
            vec![3, 1]
        );
        assert_eq!(category_of(&drafts[0]), Category::User);
        assert_eq!(category_of(&drafts[1]), Category::Hardware);
        assert_ne!(drafts[0].id, drafts[1].id);
    }

    #[test]
    fn an_nccl_timeout_alone_is_an_unknown_failure_and_performance_signals_are_ignored() {
        let key = CorrelationKey::Job("j2".into());
        let mut slow = sig(2, 1, "n1", "slowdown", None);
        slow.symptom = Some(Symptom::Slowdown);
        let drafts = fold(
            "c1",
            &key,
            vec![sig(1, 0, "n1", "nccl_timeout", None), slow.clone()],
            Duration::minutes(10),
        );
        assert_eq!(drafts.len(), 1);
        assert_eq!(drafts[0].signal_ids, vec![Uuid::from_u128(1)]);
        assert_eq!(category_of(&drafts[0]), Category::Unknown);
        assert!(fold("c1", &key, vec![slow], Duration::minutes(10)).is_empty());
    }

    #[test]
    fn keys_follow_job_then_node_then_alone() {
        let id = Uuid::from_u128(9);
        assert_eq!(CorrelationKey::of(Some("j"), Some("n"), id).as_string(), "job:j");
        assert_eq!(CorrelationKey::of(None, Some("n"), id).as_string(), "node:n");
        assert_eq!(CorrelationKey::of(None, None, id).as_string(), format!("alone:{id}"));
    }
}
