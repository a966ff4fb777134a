//! Recovery: downtime per failure and by recovery phase, transient share, drains, GPU-hours lost, and out-of-service time from node transitions. Pure: storage hands in rows; unit-tested in `analytics::cost`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::cost::{hours, overlap_hours, r6};
use super::headline::{ratio, round6};
use super::stats::{mean, median, percentile};

/// Recovery phases in minutes, as Unicron splits a recovery (detection/hang, resubmission,
/// environment and CUDA set-up, recomputation from the last checkpoint).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Phases {
    pub detection: Option<f64>,
    pub resubmission: Option<f64>,
    pub setup: Option<f64>,
    pub recomputation: Option<f64>,
}

impl Phases {
    pub const NAMES: [&'static str; 4] = ["detection", "resubmission", "setup", "recomputation"];

    pub fn get(&self, i: usize) -> Option<f64> {
        [self.detection, self.resubmission, self.setup, self.recomputation][i]
    }

    pub fn any(&self) -> bool {
        (0..4).any(|i| self.get(i).is_some())
    }
}

/// Downtime of one failure in minutes: the sum of its recorded phases when any is recorded, else
/// resolved_at - first_at, else unknown.
pub fn downtime_minutes(phases: &Phases, first_at: DateTime<Utc>, resolved_at: Option<DateTime<Utc>>) -> Option<f64> {
    if phases.any() {
        return Some((0..4).filter_map(|i| phases.get(i)).sum());
    }
    resolved_at.map(|r| (hours(r - first_at) * 60.0).max(0.0))
}

/// One failure with what its lifecycle says.
#[derive(Debug, Clone)]
pub struct RecoveryFailure {
    pub id: uuid::Uuid,
    pub cluster: String,
    pub job_id: Option<String>,
    pub first_at: DateTime<Utc>,
    /// Effective category (post-mortem, else automatic).
    pub category: String,
    /// Effective component (post-mortem, else automatic).
    pub component: String,
    /// The catalog's transient flag for the root signal.
    pub catalog_transient: bool,
    /// transient_restart | drained | other, from the lifecycle.
    pub resolution: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub phases: Phases,
    /// GPUs of the job (jobs table), else of the failure's nodes in the inventory.
    pub gpus: Option<u32>,
    /// A drain of the root node was recorded between first_at and first_at + the drain horizon.
    pub root_node_drained: bool,
}

impl RecoveryFailure {
    pub fn downtime_minutes(&self) -> Option<f64> {
        downtime_minutes(&self.phases, self.first_at, self.resolved_at)
    }

    /// Cleared by a plain restart: the recorded resolution says so, else the catalog does.
    pub fn transient(&self) -> bool {
        match self.resolution.as_deref() {
            Some(r) => r == "transient_restart",
            None => self.catalog_transient,
        }
    }

    /// Needed its node drained: the recorded resolution says so, else a drain of the root node was seen.
    pub fn drained(&self) -> bool {
        match self.resolution.as_deref() {
            Some(r) => r == "drained",
            None => self.root_node_drained,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct Distribution {
    /// Values the statistics are over.
    pub count: u64,
    pub mean: Option<f64>,
    pub median: Option<f64>,
    pub p90: Option<f64>,
    pub total: f64,
}

pub fn distribution(values: &[f64]) -> Distribution {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Distribution {
        count: v.len() as u64,
        mean: r6(mean(&v)),
        median: r6(median(&v)),
        p90: r6(percentile(&v, 0.9)),
        total: round6(v.iter().sum()),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct PhaseStat {
    /// detection, resubmission, setup or recomputation.
    pub phase: String,
    /// Minutes over the failures that recorded this phase.
    pub minutes: Distribution,
    /// This phase's minutes / the minutes of all phases.
    pub share_of_phase_minutes: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct RecoverySummary {
    pub failures: u64,
    /// Downtime per failure in minutes, over the failures whose downtime is known.
    pub downtime_minutes: Distribution,
    pub failures_without_downtime: u64,
    pub phases: Vec<PhaseStat>,
    pub transient_failures: u64,
    /// transient_failures / failures (Unicron: 0.73).
    pub transient_share: f64,
    pub hardware_failures: u64,
    pub hardware_failures_drained: u64,
    /// hardware_failures_drained / hardware_failures (Unicron: 0.37).
    pub hardware_drain_share: f64,
    /// Sum over failures of downtime hours x GPUs of the job.
    pub gpu_hours_lost: f64,
    /// Failures with a known downtime but no GPU count (not in gpu_hours_lost).
    pub failures_without_gpus: u64,
}

pub fn recovery(failures: &[RecoveryFailure]) -> RecoverySummary {
    let downtimes: Vec<f64> = failures.iter().filter_map(RecoveryFailure::downtime_minutes).collect();
    let phase_values: Vec<Vec<f64>> = (0..4)
        .map(|i| failures.iter().filter_map(|f| f.phases.get(i)).collect())
        .collect();
    let all_phase_minutes: f64 = phase_values.iter().flatten().sum();
    let phases = Phases::NAMES
        .iter()
        .zip(&phase_values)
        .map(|(name, v)| PhaseStat {
            phase: name.to_string(),
            minutes: distribution(v),
            share_of_phase_minutes: if all_phase_minutes > 0.0 {
                round6(v.iter().sum::<f64>() / all_phase_minutes)
            } else {
                0.0
            },
        })
        .collect();
    let n = failures.len() as u64;
    let transient = failures.iter().filter(|f| f.transient()).count() as u64;
    let hardware: Vec<&RecoveryFailure> = failures.iter().filter(|f| f.category == "hardware").collect();
    let drained = hardware.iter().filter(|f| f.drained()).count() as u64;
    let mut gpu_hours_lost = 0.0;
    let mut without_gpus = 0;
    for f in failures {
        if let Some(d) = f.downtime_minutes() {
            match f.gpus {
                Some(g) => gpu_hours_lost += d / 60.0 * f64::from(g),
                None => without_gpus += 1,
            }
        }
    }
    RecoverySummary {
        failures: n,
        downtime_minutes: distribution(&downtimes),
        failures_without_downtime: n - downtimes.len() as u64,
        phases,
        transient_failures: transient,
        transient_share: round6(ratio(transient, n)),
        hardware_failures: hardware.len() as u64,
        hardware_failures_drained: drained,
        hardware_drain_share: round6(ratio(drained, hardware.len() as u64)),
        gpu_hours_lost: round6(gpu_hours_lost),
        failures_without_gpus: without_gpus,
    }
}

/// Repair time by effective root cause: one row per (category, component) and, before its
/// components, one subtotal row per category with `component` null.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct CauseRecovery {
    /// Effective root-cause category (post-mortem, else automatic).
    #[schema(value_type = crate::domain::taxonomy::Category)]
    pub category: String,
    /// Effective component; null on the category's subtotal row.
    #[schema(value_type = Option<crate::domain::taxonomy::Component>)]
    pub component: Option<String>,
    /// Failures of this cause in the window.
    pub failures: u64,
    /// Downtime (repair time) per failure in minutes, over the failures of this cause whose
    /// downtime is known (the same definition as `summary.downtime_minutes`).
    pub downtime_minutes: Distribution,
    /// failures - downtime_minutes.count.
    pub failures_without_downtime: u64,
}

/// The position of a name in a vocabulary order (unknown names last, then by name).
fn rank(order: &[&str], name: &str) -> usize {
    order.iter().position(|o| *o == name).unwrap_or(order.len())
}

/// Downtime per effective root cause: a subtotal row per category (component None) followed by
/// its components, in the taxonomy's order; only causes with failures appear.
pub fn by_cause(failures: &[RecoveryFailure]) -> Vec<CauseRecovery> {
    use crate::domain::taxonomy::{Category, Component};
    use std::collections::BTreeMap;
    let cats: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
    let comps: Vec<&str> = Component::ALL.iter().map(|c| c.as_str()).collect();
    // (category rank, category, component rank or None for the subtotal, component)
    type Key = (usize, String, Option<(usize, String)>);
    let mut groups: BTreeMap<Key, (u64, Vec<f64>)> = BTreeMap::new();
    for f in failures {
        let c = rank(&cats, &f.category);
        let keys = [
            (c, f.category.clone(), None),
            (
                c,
                f.category.clone(),
                Some((rank(&comps, &f.component), f.component.clone())),
            ),
        ];
        for k in keys {
            let g = groups.entry(k).or_default();
            g.0 += 1;
            g.1.extend(f.downtime_minutes());
        }
    }
    groups
        .into_iter()
        .map(|((_, category, component), (n, minutes))| CauseRecovery {
            category,
            component: component.map(|(_, c)| c),
            failures: n,
            failures_without_downtime: n - minutes.len() as u64,
            downtime_minutes: distribution(&minutes),
        })
        .collect()
}

/// Failures of a root cause: `category` and/or `component` (effective), None = any.
pub fn of_cause(
    failures: Vec<RecoveryFailure>,
    category: Option<&str>,
    component: Option<&str>,
) -> Vec<RecoveryFailure> {
    failures
        .into_iter()
        .filter(|f| category.is_none_or(|c| f.category == c) && component.is_none_or(|c| f.component == c))
        .collect()
}

// Node service state: drained / returned transitions into out-of-service intervals

/// Out-of-service hours inside [from, to) from a node's transitions (sorted by time, `true` =
/// drained, `false` = returned). A node drained before the window and not returned is out from
/// `from`; one still drained at `to` is out until `to`. Repeated drains keep the first.
pub fn out_of_service_hours(transitions: &[(DateTime<Utc>, bool)], from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    let mut total = 0.0;
    let mut drained_since: Option<DateTime<Utc>> = None;
    for &(at, drained) in transitions {
        match (drained, drained_since) {
            (true, None) => drained_since = Some(at),
            (false, Some(s)) => {
                total += overlap_hours(s, at, from, to);
                drained_since = None;
            }
            _ => {}
        }
    }
    if let Some(s) = drained_since {
        total += overlap_hours(s, to, from, to);
    }
    total
}
