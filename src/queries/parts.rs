//! The parts analytics as read use cases: survival of parts (Kaplan-Meier by group, log-rank),
//! annualised failure rates, parts-or-slots, precursors. Each loads the fleet's parts once and
//! hands plain numbers (days) to the pure code in `analytics`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::gpus::{Fleet, PartLife, Place, fleet_lives};
use crate::analytics::part_life::age_days_at;
use crate::analytics::parts::{self, PartsOrSlots};
use crate::analytics::precursors::{self, PartHistory, PrecursorLift, PrecursorSignal};
use crate::analytics::survival::{self, Afr, DAYS_PER_YEAR, KaplanMeier, LogRank, Spell, Subject};
use crate::domain::part::RemovalReason;
use crate::storage;

/// How parts are grouped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartGrouping {
    /// One group: every part.
    All,
    Generation,
    Model,
    /// The cluster of the part's current (else first recorded) placement.
    Cluster,
    /// A site attribute (`attribute:lot`); parts without it form the group `(none)`.
    Attribute(String),
    /// Where the part served at the time: a time-varying grouping (see [`Location`]).
    Where(Location),
}

/// Where a part served: the node of each placement, that node's rack or group label (as the
/// inventory holds them), or the slot (the placement's GPU index). A part that moved counts its
/// installed time, and its event, in the group of the placement where each happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Node,
    Rack,
    NodeGroup,
    Slot,
}

impl Location {
    const ALL: [(Location, &'static str); 4] = [
        (Location::Node, "node"),
        (Location::Rack, "rack"),
        (Location::NodeGroup, "node_group"),
        (Location::Slot, "slot"),
    ];

    fn name(self) -> &'static str {
        Self::ALL.iter().find(|(l, _)| *l == self).map_or("node", |(_, n)| n)
    }
}

/// Rack and group label of each inventory node, by (cluster, hostname).
#[derive(Debug, Default)]
pub struct NodeLabels(HashMap<(String, String), (Option<String>, Option<String>)>);

impl NodeLabels {
    /// Loaded only for a grouping by where parts served.
    /// Every cluster's nodes: a part may have served in another cluster than the one asked for.
    pub async fn for_grouping(db: &PgPool, by: &PartGrouping) -> Result<Self, sqlx::Error> {
        if !matches!(by, PartGrouping::Where(Location::Rack | Location::NodeGroup)) {
            return Ok(Self::default());
        }
        Ok(NodeLabels(
            storage::nodes::labels(db)
                .await?
                .into_iter()
                .map(|n| ((n.cluster, n.hostname), (n.rack, n.group_label)))
                .collect(),
        ))
    }

    /// The group of a placement.
    pub fn key(&self, location: Location, place: &Place) -> String {
        let labels = || self.0.get(&(place.cluster.clone(), place.hostname.clone()));
        let none = || "(none)".to_string();
        match location {
            Location::Node => format!("{}/{}", place.cluster, place.hostname),
            Location::Rack => labels().and_then(|l| l.0.clone()).unwrap_or_else(none),
            Location::NodeGroup => labels().and_then(|l| l.1.clone()).unwrap_or_else(none),
            Location::Slot => place.gpu_index.map_or_else(none, |i| i.to_string()),
        }
    }
}

impl PartGrouping {
    /// The grouping a `by` value names; else what the values are.
    pub fn parse(s: &str) -> Result<Self, String> {
        let known = match s {
            "all" => Some(PartGrouping::All),
            "generation" => Some(PartGrouping::Generation),
            "model" => Some(PartGrouping::Model),
            "cluster" => Some(PartGrouping::Cluster),
            _ => match Location::ALL.iter().find(|(_, n)| *n == s) {
                Some((l, _)) => Some(PartGrouping::Where(*l)),
                None => s
                    .strip_prefix("attribute:")
                    .filter(|k| !k.trim().is_empty() && k.len() <= 256)
                    .map(|k| PartGrouping::Attribute(k.to_string())),
            },
        };
        known.ok_or_else(|| {
            format!("by '{s}' is not generation, model, cluster, all, attribute:KEY, node, rack, node_group or slot")
        })
    }

    pub fn name(&self) -> String {
        match self {
            PartGrouping::All => "all".into(),
            PartGrouping::Generation => "generation".into(),
            PartGrouping::Model => "model".into(),
            PartGrouping::Cluster => "cluster".into(),
            PartGrouping::Attribute(k) => format!("attribute:{k}"),
            PartGrouping::Where(l) => l.name().into(),
        }
    }

    /// The part's group; for a grouping by where it served, the place it serves now (else its last).
    pub(crate) fn group_of(&self, life: &PartLife, labels: &NodeLabels) -> String {
        match self {
            PartGrouping::All => "all".into(),
            PartGrouping::Generation => life.generation.clone(),
            PartGrouping::Model => life.model.clone().unwrap_or_else(|| "unknown".into()),
            PartGrouping::Cluster => life.cluster.clone(),
            PartGrouping::Attribute(k) => match life.attributes.get(k) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(v) if !v.is_null() => v.to_string(),
                _ => "(none)".into(),
            },
            PartGrouping::Where(l) => life
                .places
                .last()
                .map_or_else(|| "(none)".into(), |p| labels.key(*l, p)),
        }
    }
}

/// What ends a part's life in the survival analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PartEvent {
    /// Its first removal for failure (reason `failed` or `rma`).
    Removal,
    /// Its first hard failure: a failure resolved to the part with a hardware root cause, not
    /// transient, of critical or high severity (a GPU off the bus, an uncorrectable ECC error).
    HardwareFailure,
}

/// Times of the part's events up to `now` (every failure removal, or every hard failure).
pub(crate) fn event_times(
    life: &PartLife,
    event: PartEvent,
    now: DateTime<Utc>,
) -> impl Iterator<Item = DateTime<Utc>> + '_ {
    let times: Box<dyn Iterator<Item = DateTime<Utc>> + '_> = match event {
        PartEvent::Removal => Box::new(
            life.removals
                .iter()
                .filter(|(_, reason)| RemovalReason::is_failure(reason))
                .map(|(t, _)| *t),
        ),
        PartEvent::HardwareFailure => Box::new(life.hardware_failures.iter().copied()),
    };
    times.filter(move |t| *t <= now)
}

/// How a part's lifetime is counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LifeDefinition {
    /// Installed time until its first event; a part without one is censored at its age.
    #[default]
    FirstFailure,
    /// Installed time until its final event: a part that failed, was repaired and served again
    /// keeps ageing (as Ostrouchov et al. count a Titan GPU's life). Its life ends at an event
    /// after which it never served again; a part that served after its last event, or had none,
    /// is censored at its age.
    FinalFailure,
}

/// Installed time within which two ages are one (milliseconds of rounding).
const SAME_AGE_DAYS: f64 = 1e-9;

/// The part's subject as of `now`, with A(t) its installed days before t and t_1 <= ... <= t_k its
/// events up to `now` (an event after `now` has not happened yet as of then):
/// - first failure: (A(t_1), event), else (A(now), censored);
/// - final failure: (A(t_k), event) when A(now) = A(t_k) (no installed time after it), else
///   (A(now), censored).
fn subject(life: &PartLife, event: PartEvent, definition: LifeDefinition, now: DateTime<Utc>) -> Subject {
    let censored = Subject {
        duration: life.installed_days,
        event: false,
    };
    let ended = |t: DateTime<Utc>| Subject {
        duration: age_days_at(&life.intervals, t),
        event: true,
    };
    match definition {
        LifeDefinition::FirstFailure => event_times(life, event, now).min().map_or(censored, ended),
        LifeDefinition::FinalFailure => match event_times(life, event, now).max().map(ended) {
            Some(last) if life.installed_days - last.duration <= SAME_AGE_DAYS => last,
            _ => censored,
        },
    }
}

/// An age at which survival is read: as written (`90d`, `2.5y`) and in days (a year is 365.25).
#[derive(Debug, Clone, PartialEq)]
pub struct Age {
    pub label: String,
    pub days: f64,
}

/// At most this many ages per answer.
pub const MAX_AGES: usize = 20;

impl Age {
    /// A comma-separated list of ages, each a number of days (`d`) or years (`y`): `90d,1y,2.5y`.
    /// At most [`MAX_AGES`]. Age 0 reads survival 1; an age no part reached reads none.
    pub fn parse_list(s: &str) -> Result<Vec<Age>, String> {
        let ages = s
            .split(',')
            .map(|a| {
                let a = a.trim();
                let (number, per) = match (a.strip_suffix('d'), a.strip_suffix('y')) {
                    (Some(n), _) => (n, 1.0),
                    (_, Some(n)) => (n, DAYS_PER_YEAR),
                    _ => return Err(format!("age '{a}' is not a number of days or years (90d, 2.5y)")),
                };
                let n: f64 = number
                    .parse()
                    .ok()
                    .filter(|n: &f64| n.is_finite() && *n >= 0.0 && !number.starts_with(['+', '-']))
                    .filter(|n| (n * per).is_finite())
                    .ok_or_else(|| format!("age '{a}' is not a number of days or years (90d, 2.5y)"))?;
                let days = n * per;
                Ok(Age {
                    label: a.to_string(),
                    days,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if ages.len() > MAX_AGES {
            return Err(format!("{} ages; at most {MAX_AGES}", ages.len()));
        }
        Ok(ages)
    }

    /// 1, 2, 3 and 5 years.
    pub fn defaults() -> Vec<Age> {
        Self::parse_list(DEFAULT_AGES).expect("valid")
    }
}

/// The ages read when none are asked for.
pub const DEFAULT_AGES: &str = "1y,2y,3y,5y";

/// What a survival answer reads beyond the grouping and the event.
#[derive(Debug, Clone, PartialEq)]
pub struct SurvivalOptions {
    pub ages: Vec<Age>,
    pub life: LifeDefinition,
}

impl Default for SurvivalOptions {
    fn default() -> Self {
        SurvivalOptions {
            ages: Age::defaults(),
            life: LifeDefinition::FirstFailure,
        }
    }
}

/// Whether the part was in a slot by `now`: a part enters the analyses when first installed (one
/// installed later, or never, did not exist yet as far as its lifetime goes).
fn installed_by(life: &PartLife, now: DateTime<Utc>) -> bool {
    life.intervals.iter().any(|i| i.from <= now)
}

/// Events of the part over its life up to `now`.
fn events(life: &PartLife, event: PartEvent, now: DateTime<Utc>) -> u64 {
    event_times(life, event, now).count() as u64
}

/// Survival at an age of installed time.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SurvivalAt {
    /// The age as asked (`90d`, `1y`, `2.5y`).
    pub age: String,
    /// The age in days (a year is 365.25).
    pub days: f64,
    /// Absent where no part of the group has reached that age (the curve says nothing there).
    pub survival: Option<f64>,
    pub lower: Option<f64>,
    pub upper: Option<f64>,
    /// Parts still at risk at that age.
    pub at_risk: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SurvivalGroup {
    pub group: String,
    pub parts: u64,
    pub events: u64,
    /// Median lifetime in installed days, with its interval; absent where the curve does not reach 0.5.
    pub median_days: Option<f64>,
    pub median_lower_days: Option<f64>,
    pub median_upper_days: Option<f64>,
    /// Survival at the ages asked for (`at`; default 1, 2, 3 and 5 years of installed time).
    pub at_ages: Vec<SurvivalAt>,
    /// The Kaplan-Meier curve: one step per distinct age with events or censorings.
    pub curve: KaplanMeier,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SurvivalAnswer {
    pub cluster: Option<String>,
    pub by: String,
    pub event: PartEvent,
    pub life: LifeDefinition,
    pub confidence: f64,
    pub as_of: DateTime<Utc>,
    pub groups: Vec<SurvivalGroup>,
    /// Whether the groups' curves differ (k-group log-rank); absent with fewer than two groups.
    pub log_rank: Option<LogRank>,
}

/// The part's spells by where it served, cut at its subject's end (see [`subject`]): one spell
/// per run of consecutive placements in one group, from its age entering to its age leaving; the
/// spell in which the subject ends carries the event. Installed time is counted once where
/// placements overlap ([`age_days_at`]).
fn spells(
    life: &PartLife,
    event: PartEvent,
    definition: LifeDefinition,
    now: DateTime<Utc>,
    key: impl Fn(&Place) -> String,
) -> Vec<(String, Spell)> {
    let end = subject(life, event, definition, now);
    let mut out: Vec<(String, Spell)> = Vec::new();
    for p in life.places.iter().filter(|p| p.interval.from <= now) {
        let entry = age_days_at(&life.intervals, p.interval.from);
        if entry > end.duration || (entry == end.duration && !out.is_empty()) {
            break;
        }
        let exit = age_days_at(&life.intervals, p.interval.to.map_or(now, |t| t.min(now))).min(end.duration);
        let k = key(p);
        match out.last_mut() {
            Some((last, s)) if *last == k && s.exit >= entry => s.exit = s.exit.max(exit),
            _ => out.push((
                k,
                Spell {
                    entry,
                    exit,
                    event: false,
                },
            )),
        }
    }
    if end.event
        && let Some((_, s)) = out.iter_mut().rev().find(|(_, s)| s.exit == end.duration)
    {
        s.event = true;
    }
    out
}

pub async fn survival(
    db: &PgPool,
    cluster: Option<&str>,
    by: &PartGrouping,
    event: PartEvent,
    confidence: f64,
    options: &SurvivalOptions,
    now: DateTime<Utc>,
) -> Result<SurvivalAnswer, sqlx::Error> {
    let (lives, labels) = tokio::try_join!(
        fleet_lives(db, cluster, now, event == PartEvent::HardwareFailure),
        NodeLabels::for_grouping(db, by),
    )?;
    let mut grouped: BTreeMap<String, Vec<Spell>> = BTreeMap::new();
    let mut parts_of: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for life in lives.iter().filter(|l| installed_by(l, now)) {
        let of_life: Vec<(String, Spell)> = match by {
            PartGrouping::Where(l) => spells(life, event, options.life, now, |p| labels.key(*l, p)),
            _ => vec![(
                by.group_of(life, &labels),
                Spell::from(&subject(life, event, options.life, now)),
            )],
        };
        for (group, spell) in of_life {
            parts_of.entry(group.clone()).or_default().insert(&life.part);
            grouped.entry(group).or_default().push(spell);
        }
    }
    let groups: Vec<SurvivalGroup> = grouped
        .iter()
        .map(|(group, spells)| {
            let curve = survival::kaplan_meier_spells(spells, confidence);
            let at_ages = options
                .ages
                .iter()
                .map(|age| {
                    let t = age.days;
                    let reached = spells.iter().any(|s| s.exit >= t);
                    let at = reached.then(|| curve.survival_at(t)).flatten();
                    SurvivalAt {
                        age: age.label.clone(),
                        days: t,
                        survival: at.map(|a| a.0),
                        lower: at.map(|a| a.1),
                        upper: at.map(|a| a.2),
                        at_risk: curve.at_risk_at(t),
                    }
                })
                .collect();
            SurvivalGroup {
                group: group.clone(),
                parts: parts_of.get(group).map_or(0, |p| p.len() as u64),
                events: curve.events,
                median_days: curve.median,
                median_lower_days: curve.median_lower,
                median_upper_days: curve.median_upper,
                at_ages,
                curve,
            }
        })
        .collect();
    let log_rank = (grouped.len() >= 2).then(|| {
        let sets: Vec<&[Spell]> = grouped.values().map(Vec::as_slice).collect();
        survival::log_rank_spells(&sets)
    });
    Ok(SurvivalAnswer {
        cluster: cluster.map(str::to_string),
        by: by.name(),
        event,
        life: options.life,
        confidence,
        as_of: now,
        groups,
        log_rank,
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AfrGroup {
    pub group: String,
    pub parts: u64,
    #[serde(flatten)]
    pub afr: Afr,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AfrAnswer {
    pub cluster: Option<String>,
    pub by: String,
    pub event: PartEvent,
    pub confidence: f64,
    pub as_of: DateTime<Utc>,
    pub groups: Vec<AfrGroup>,
}

/// Failures per installed part-year per group, with the exact Poisson interval.
pub async fn afr(
    db: &PgPool,
    cluster: Option<&str>,
    by: &PartGrouping,
    event: PartEvent,
    confidence: f64,
    now: DateTime<Utc>,
) -> Result<AfrAnswer, sqlx::Error> {
    let (lives, labels) = tokio::try_join!(
        fleet_lives(db, cluster, now, event == PartEvent::HardwareFailure),
        NodeLabels::for_grouping(db, by),
    )?;
    // (parts, failures, installed days) per group.
    let mut grouped: BTreeMap<String, (BTreeSet<&str>, u64, f64)> = BTreeMap::new();
    for life in lives.iter().filter(|l| installed_by(l, now)) {
        match by {
            // Each placement's installed time and the events inside it (from < t <= to) go to
            // the group of that placement.
            PartGrouping::Where(l) => {
                for p in life.places.iter().filter(|p| p.interval.from < now) {
                    let to = p.interval.to.map_or(now, |t| t.min(now));
                    let g = grouped.entry(labels.key(*l, p)).or_default();
                    g.0.insert(&life.part);
                    g.1 += event_times(life, event, now)
                        .filter(|t| *t > p.interval.from && *t <= to)
                        .count() as u64;
                    g.2 += (to - p.interval.from).num_milliseconds().max(0) as f64 / 86_400_000.0;
                }
            }
            _ => {
                let g = grouped.entry(by.group_of(life, &labels)).or_default();
                g.0.insert(&life.part);
                g.1 += events(life, event, now);
                g.2 += life.installed_days;
            }
        }
    }
    Ok(AfrAnswer {
        cluster: cluster.map(str::to_string),
        by: by.name(),
        event,
        confidence,
        as_of: now,
        groups: grouped
            .into_iter()
            .map(|(group, (parts, failures, days))| AfrGroup {
                group,
                parts: parts.len() as u64,
                afr: survival::annualised_failure_rate(failures, days, confidence),
            })
            .collect(),
    })
}

/// Days since the Unix epoch: the common clock of the pure parts analyses.
fn days(t: DateTime<Utc>) -> f64 {
    t.timestamp_millis() as f64 / 86_400_000.0
}

fn slot_name(cluster: &str, host: &str, index: Option<i32>) -> String {
    match index {
        Some(i) => format!("{cluster}/{host}/gpu{i}"),
        None => format!("{cluster}/{host}"),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PartsOrSlotsAnswer {
    pub cluster: Option<String>,
    pub as_of: DateTime<Utc>,
    #[serde(flatten)]
    pub result: PartsOrSlots,
}

/// Among repeat hardware failures, those that follow a part across slots and those that stay
/// with a slot across parts.
pub async fn parts_or_slots(
    db: &PgPool,
    cluster: Option<&str>,
    alpha: f64,
    now: DateTime<Utc>,
) -> Result<PartsOrSlotsAnswer, sqlx::Error> {
    let fleet = Fleet::load(db, cluster, None).await?;
    let placements: Vec<parts::Placement> = fleet
        .placements
        .iter()
        .map(|p| parts::Placement {
            part: p.part.clone(),
            slot: slot_name(&p.cluster, &p.hostname, p.gpu_index),
            from: days(p.installed_at),
            to: days(p.removed_at.unwrap_or(now).min(now)),
        })
        .collect();
    let failures: Vec<parts::PartFailure> = fleet
        .failures
        .iter()
        .filter(|f| f.is_hard())
        .filter_map(|f| {
            Some(parts::PartFailure {
                part: f.part.clone()?,
                slot: slot_name(&f.cluster, f.slot_hostname.as_deref()?, f.slot_index),
                at: days(f.first_at),
            })
        })
        .collect();
    Ok(PartsOrSlotsAnswer {
        cluster: cluster.map(str::to_string),
        as_of: now,
        result: parts::parts_or_slots(&placements, &failures, alpha),
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PrecursorAnswer {
    pub cluster: Option<String>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub window_days: f64,
    pub confidence: f64,
    /// Parts with installed time in [from, to).
    pub parts: u64,
    /// Hardware failures of those parts in [from, to).
    pub failures: u64,
    /// One row per signal kind and code, strongest (highest lower bound of the ratio) first.
    pub precursors: Vec<PrecursorLift>,
}

/// For each kind and code of signal that named a part in [from, to): the rate of a hardware
/// failure of the same part within `window_days` after it, against the rate without it.
pub async fn precursors(
    db: &PgPool,
    cluster: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    window_days: f64,
    confidence: f64,
) -> Result<PrecursorAnswer, sqlx::Error> {
    let lives = fleet_lives(db, cluster, to, true).await?;
    let signals = storage::gpus::part_signals(db, cluster, from, to).await?;
    let mut by_part: HashMap<&str, Vec<PrecursorSignal>> = HashMap::new();
    for s in &signals {
        by_part.entry(&s.part).or_default().push(PrecursorSignal {
            kind: s.kind.clone(),
            code: s.code,
            at: days(s.occurred_at),
        });
    }
    let (lo, hi) = (days(from), days(to));
    let histories: Vec<PartHistory> = lives
        .iter()
        .map(|l| PartHistory {
            part: l.part.clone(),
            installed: l
                .intervals
                .iter()
                .map(|i| (days(i.from).max(lo), i.to.map_or(hi, days).min(hi)))
                .filter(|(a, b)| b > a)
                .collect(),
            signals: by_part.remove(l.part.as_str()).unwrap_or_default(),
            failures: l
                .hardware_failures
                .iter()
                .map(|t| days(*t))
                .filter(|t| (lo..hi).contains(t))
                .collect(),
        })
        .filter(|h| !h.installed.is_empty())
        .collect();
    Ok(PrecursorAnswer {
        cluster: cluster.map(str::to_string),
        from,
        to,
        window_days,
        confidence,
        parts: histories.len() as u64,
        failures: histories.iter().map(|h| h.failures.len() as u64).sum(),
        precursors: precursors::precursor_lift(&histories, window_days, confidence),
    })
}
