//! What failures cost: recovery and downtime, ETTR, top errors, node concentration, job size,
//! stragglers, low-utilisation causes and the timeline. Pure: storage hands in rows, these functions
//! compute the figures the literature reports (see `analytics::baselines`), unit-tested by hand.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::headline::{ratio, round6};
use super::stats::{mean, median, percentile};

fn hours(d: Duration) -> f64 {
    d.num_milliseconds() as f64 / 3_600_000.0
}

fn r6(x: Option<f64>) -> Option<f64> {
    x.map(round6)
}

/// Overlap of [start, end) with [from, to) in hours (0 when disjoint).
pub fn overlap_hours(start: DateTime<Utc>, end: DateTime<Utc>, from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    let (s, e) = (start.max(from), end.min(to));
    if e <= s { 0.0 } else { hours(e - s) }
}

// ---------------------------------------------------------------------------
// Recovery: downtime, phases, transient share, drains, GPU-hours lost
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Node service state: drained / returned transitions into out-of-service intervals
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// ETTR (Meta): productive time / wall-clock time of a job
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct JobRun {
    pub cluster: String,
    pub job_id: String,
    pub gpus: u32,
    pub nodes: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    /// completed | failed | cancelled | running.
    pub state: String,
}

impl JobRun {
    /// Wall-clock hours inside [from, to) (a job without an end runs until `to`).
    pub fn wall_hours(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
        overlap_hours(self.started_at, self.ended_at.unwrap_or(to), from, to)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct JobEttr {
    pub cluster: String,
    pub job_id: String,
    pub gpus: u32,
    pub wall_clock_hours: f64,
    pub downtime_hours: f64,
    pub failures: u64,
    /// Failures of the job whose downtime is unknown (counted as 0: the ETTR is then an upper bound).
    pub failures_without_downtime: u64,
    /// (wall_clock_hours - downtime_hours) / wall_clock_hours.
    pub ettr: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct FleetEttr {
    pub jobs: u64,
    pub gpu_hours: f64,
    pub gpu_hours_lost: f64,
    /// GPU-hour weighted: sum(gpus x productive hours) / sum(gpus x wall-clock hours).
    pub ettr: Option<f64>,
    /// Unweighted mean of the per-job ETTRs.
    pub mean_job_ettr: Option<f64>,
}

/// Per-job and fleet ETTR over the jobs running in [from, to). `failures` are the window's failures;
/// those naming a job of `jobs` count against it, their downtime capped at the job's wall clock.
pub fn ettr(
    jobs: &[JobRun],
    failures: &[RecoveryFailure],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> (Vec<JobEttr>, FleetEttr) {
    let mut by_job: HashMap<(&str, &str), (f64, u64, u64)> = HashMap::new();
    for f in failures {
        if let Some(j) = &f.job_id {
            let e = by_job.entry((f.cluster.as_str(), j.as_str())).or_default();
            e.1 += 1;
            match f.downtime_minutes() {
                Some(d) => e.0 += d / 60.0,
                None => e.2 += 1,
            }
        }
    }
    let mut rows = Vec::new();
    let mut per_job = Vec::new();
    let (mut gpu_wall, mut gpu_lost) = (0.0, 0.0);
    for j in jobs {
        let wall = j.wall_hours(from, to);
        if wall <= 0.0 {
            continue;
        }
        let (down, n, unknown) = by_job
            .get(&(j.cluster.as_str(), j.job_id.as_str()))
            .copied()
            .unwrap_or_default();
        let down = down.min(wall);
        gpu_wall += wall * f64::from(j.gpus);
        gpu_lost += down * f64::from(j.gpus);
        per_job.push((wall - down) / wall);
        rows.push(JobEttr {
            cluster: j.cluster.clone(),
            job_id: j.job_id.clone(),
            gpus: j.gpus,
            wall_clock_hours: round6(wall),
            downtime_hours: round6(down),
            failures: n,
            failures_without_downtime: unknown,
            ettr: Some(round6((wall - down) / wall)),
        });
    }
    let fleet = FleetEttr {
        jobs: rows.len() as u64,
        gpu_hours: round6(gpu_wall),
        gpu_hours_lost: round6(gpu_lost),
        ettr: (gpu_wall > 0.0).then(|| round6((gpu_wall - gpu_lost) / gpu_wall)),
        mean_job_ettr: r6(mean(&per_job)),
    };
    rows.sort_by(|a, b| {
        a.ettr
            .unwrap_or(1.0)
            .total_cmp(&b.ettr.unwrap_or(1.0))
            .then_with(|| a.job_id.cmp(&b.job_id))
    });
    (rows, fleet)
}

// ---------------------------------------------------------------------------
// Top errors
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct ErrorRow {
    pub kind: String,
    pub code: Option<i64>,
    /// `kind` or `kind code`, e.g. `xid 79`.
    pub label: String,
    /// Failures (root view: whose root signal is this; all-signal view: with at least one such signal).
    pub failures: u64,
    /// failures / all failures in the window.
    pub share: f64,
    /// Signals of this kind and code (all-signal view; equals failures in the root view).
    pub signals: u64,
    /// signals / all signals of the window's failures.
    pub signal_share: f64,
    pub severity: String,
}

/// (kind, code, failures, signals, severity) rows into shares, most frequent first, at most `limit`.
pub fn top_errors(
    rows: Vec<(String, Option<i64>, u64, u64, String)>,
    total_failures: u64,
    total_signals: u64,
    limit: usize,
) -> Vec<ErrorRow> {
    let mut out: Vec<ErrorRow> = rows
        .into_iter()
        .map(|(kind, code, failures, signals, severity)| ErrorRow {
            label: code.map_or_else(|| kind.clone(), |c| format!("{kind} {c}")),
            share: round6(ratio(failures, total_failures)),
            signal_share: round6(ratio(signals, total_signals)),
            kind,
            code,
            failures,
            signals,
            severity,
        })
        .collect();
    out.sort_by(|a, b| {
        b.failures
            .cmp(&a.failures)
            .then(b.signals.cmp(&a.signals))
            .then_with(|| a.label.cmp(&b.label))
    });
    out.truncate(limit);
    out
}

// ---------------------------------------------------------------------------
// Node concentration
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct ConcentrationTier {
    /// The worst fraction of nodes (0.01, 0.05, 0.10).
    pub worst_fraction: f64,
    /// ceil(worst_fraction x population), at least 1.
    pub nodes: u64,
    pub failures: u64,
    /// failures of these nodes / failures with a root node.
    pub share: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct NodeFailureCount {
    pub cluster: String,
    pub hostname: String,
    pub failures: u64,
    /// Failures of this node and every worse one / failures with a root node.
    pub cumulative_share: f64,
}

/// Nodes sorted worst first (ties by name) and the tiers. `population`: nodes that could fail (in
/// service in the window); nodes with failures but outside the inventory are added to it.
pub fn concentration(
    per_node: &[((String, String), u64)],
    population: u64,
    fractions: &[f64],
) -> (Vec<NodeFailureCount>, Vec<ConcentrationTier>) {
    let mut nodes: Vec<&((String, String), u64)> = per_node.iter().filter(|(_, n)| *n > 0).collect();
    nodes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let total: u64 = nodes.iter().map(|(_, n)| n).sum();
    let population = population.max(nodes.len() as u64);
    let mut cumulative = 0;
    let ranked: Vec<NodeFailureCount> = nodes
        .iter()
        .map(|((c, h), n)| {
            cumulative += n;
            NodeFailureCount {
                cluster: c.clone(),
                hostname: h.clone(),
                failures: *n,
                cumulative_share: round6(ratio(cumulative, total)),
            }
        })
        .collect();
    let tiers = fractions
        .iter()
        .map(|&p| {
            let k = ((p * population as f64).ceil() as u64).max(1);
            let failures: u64 = ranked.iter().take(k as usize).map(|r| r.failures).sum();
            ConcentrationTier {
                worst_fraction: p,
                nodes: k,
                failures,
                share: round6(ratio(failures, total)),
            }
        })
        .collect();
    (ranked, tiers)
}

// ---------------------------------------------------------------------------
// Job size
// ---------------------------------------------------------------------------

/// Size buckets by GPUs, named by their range: the literature's 8, 64, 128, 512, 1024+ marks.
pub const SIZE_BUCKETS: [(&str, u32, u32); 6] = [
    ("1-8", 1, 8),
    ("9-64", 9, 64),
    ("65-128", 65, 128),
    ("129-512", 129, 512),
    ("513-1023", 513, 1023),
    ("1024+", 1024, u32::MAX),
];

pub fn bucket_of(gpus: u32) -> &'static str {
    SIZE_BUCKETS
        .iter()
        .find(|(_, lo, hi)| (*lo..=*hi).contains(&gpus))
        .map_or("1-8", |b| b.0)
}

/// A job with the failures attributed to it in the window.
#[derive(Debug, Clone)]
pub struct JobOutcome {
    pub job: JobRun,
    pub failures: u64,
}

impl JobOutcome {
    /// Failed: the scheduler says so, or at least one failure names the job.
    pub fn failed(&self) -> bool {
        self.job.state == "failed" || self.failures > 0
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct SizeBucket {
    pub bucket: String,
    pub jobs: u64,
    pub failed_jobs: u64,
    /// failed_jobs / jobs.
    pub failure_rate: f64,
    pub failures: u64,
    pub job_hours: f64,
    pub gpu_hours: f64,
    /// job_hours / failures: mean wall-clock time of a job of this size between failures.
    pub mttf_hours: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct LargestJobs {
    /// The fraction of jobs taken, by GPUs (0.05).
    pub fraction: f64,
    pub jobs: u64,
    /// GPUs of the smallest job among them.
    pub min_gpus: u32,
    pub failed_jobs: u64,
    /// failed_jobs / jobs (Unicron: 0.434).
    pub failure_rate: f64,
}

pub fn job_size(
    outcomes: &[JobOutcome],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    largest_fraction: f64,
) -> (Vec<SizeBucket>, LargestJobs) {
    let buckets = SIZE_BUCKETS
        .iter()
        .map(|(name, _, _)| {
            let mine: Vec<&JobOutcome> = outcomes.iter().filter(|o| bucket_of(o.job.gpus) == *name).collect();
            let failed = mine.iter().filter(|o| o.failed()).count() as u64;
            let failures: u64 = mine.iter().map(|o| o.failures).sum();
            let job_hours: f64 = mine.iter().map(|o| o.job.wall_hours(from, to)).sum();
            let gpu_hours: f64 = mine
                .iter()
                .map(|o| o.job.wall_hours(from, to) * f64::from(o.job.gpus))
                .sum();
            SizeBucket {
                bucket: name.to_string(),
                jobs: mine.len() as u64,
                failed_jobs: failed,
                failure_rate: round6(ratio(failed, mine.len() as u64)),
                failures,
                job_hours: round6(job_hours),
                gpu_hours: round6(gpu_hours),
                mttf_hours: (failures > 0).then(|| round6(job_hours / failures as f64)),
            }
        })
        .collect();
    let mut sorted: Vec<&JobOutcome> = outcomes.iter().collect();
    sorted.sort_by(|a, b| {
        b.job
            .gpus
            .cmp(&a.job.gpus)
            .then(b.job.wall_hours(from, to).total_cmp(&a.job.wall_hours(from, to)))
            .then_with(|| a.job.job_id.cmp(&b.job.job_id))
    });
    let k = if sorted.is_empty() {
        0
    } else {
        ((largest_fraction * sorted.len() as f64).ceil() as usize).max(1)
    };
    let top = &sorted[..k];
    let failed = top.iter().filter(|o| o.failed()).count() as u64;
    let largest = LargestJobs {
        fraction: largest_fraction,
        jobs: k as u64,
        min_gpus: top.last().map_or(0, |o| o.job.gpus),
        failed_jobs: failed,
        failure_rate: round6(ratio(failed, k as u64)),
    };
    (buckets, largest)
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct MttfProjection {
    pub gpus: u64,
    /// ceil(gpus / GPUs per node).
    pub nodes: u64,
    /// 1 / (nodes x failures per node-day), in hours.
    pub mttf_hours: Option<f64>,
}

/// Meta's projection: MTTF = 1 / (nodes x failure rate per node-day), for each job size.
pub fn project_mttf(failures_per_node_day: f64, gpus_per_node: f64, sizes: &[u64]) -> Vec<MttfProjection> {
    sizes
        .iter()
        .map(|&gpus| {
            let nodes = if gpus_per_node > 0.0 {
                (gpus as f64 / gpus_per_node).ceil() as u64
            } else {
                0
            };
            let rate = nodes as f64 * failures_per_node_day;
            MttfProjection {
                gpus,
                nodes,
                mttf_hours: (rate > 0.0).then(|| round6(24.0 / rate)),
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Stragglers
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct SlowdownSignal {
    pub cluster: String,
    pub node: String,
    pub job_id: Option<String>,
    pub at: DateTime<Utc>,
    /// Step time of this node / the job median (>= 1 is slower).
    pub ratio: f64,
    /// Seconds the measurement covers (ending at `at`), when the sender says.
    pub duration_seconds: Option<f64>,
    /// GPUs of the job (jobs table, else the signal's job_gpus, else the node's GPUs).
    pub job_gpus: Option<u32>,
}

/// A slowdown ratio from the attributes: step_time_ratio as is, throughput_ratio inverted.
pub fn slowdown_ratio(step_time_ratio: Option<f64>, throughput_ratio: Option<f64>) -> Option<f64> {
    match (step_time_ratio, throughput_ratio) {
        (Some(r), _) if r.is_finite() && r > 0.0 => Some(r),
        (_, Some(t)) if t.is_finite() && t > 0.0 => Some(1.0 / t),
        _ => None,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct StragglerEpisode {
    pub cluster: String,
    pub node: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub signals: u64,
    pub max_ratio: f64,
    pub mean_ratio: f64,
    pub jobs: Vec<String>,
    /// Sum over its signals of job GPUs x hours covered x (1 - 1/ratio): the whole job runs at the
    /// straggler's pace, so that fraction of its GPU time is lost.
    pub gpu_hours_wasted: f64,
}

/// Episodes per node: signals with ratio >= min_ratio, each covering [at - duration, at] (duration
/// `default_minutes` when not sent); intervals closer than `gap` merge into one episode.
pub fn straggler_episodes(
    signals: &[SlowdownSignal],
    min_ratio: f64,
    default_minutes: f64,
    gap: Duration,
) -> Vec<StragglerEpisode> {
    let mut by_node: BTreeMap<(&str, &str), Vec<&SlowdownSignal>> = BTreeMap::new();
    for s in signals.iter().filter(|s| s.ratio >= min_ratio) {
        by_node
            .entry((s.cluster.as_str(), s.node.as_str()))
            .or_default()
            .push(s);
    }
    let mut episodes = Vec::new();
    for ((cluster, node), mut sigs) in by_node {
        sigs.sort_by_key(|s| s.at);
        let mut current: Option<(StragglerEpisode, f64)> = None;
        for s in sigs {
            let secs = s
                .duration_seconds
                .filter(|d| d.is_finite() && *d > 0.0)
                .unwrap_or(default_minutes * 60.0);
            let start = s.at - Duration::milliseconds((secs * 1000.0) as i64);
            let wasted = f64::from(s.job_gpus.unwrap_or(0)) * secs / 3600.0 * (1.0 - 1.0 / s.ratio);
            if let Some((ep, sum)) = current.as_mut()
                && start - ep.end <= gap
            {
                ep.end = ep.end.max(s.at);
                ep.signals += 1;
                ep.max_ratio = ep.max_ratio.max(s.ratio);
                *sum += s.ratio;
                ep.gpu_hours_wasted += wasted;
                if let Some(j) = &s.job_id
                    && !ep.jobs.contains(j)
                {
                    ep.jobs.push(j.clone());
                }
                continue;
            }
            if let Some(done) = current.take() {
                episodes.push(finish(done));
            }
            let ep = StragglerEpisode {
                cluster: cluster.to_string(),
                node: node.to_string(),
                start,
                end: s.at,
                signals: 1,
                max_ratio: s.ratio,
                mean_ratio: s.ratio,
                jobs: s.job_id.iter().cloned().collect(),
                gpu_hours_wasted: wasted,
            };
            current = Some((ep, s.ratio));
        }
        if let Some(done) = current.take() {
            episodes.push(finish(done));
        }
    }
    episodes
}

fn finish((mut ep, sum): (StragglerEpisode, f64)) -> StragglerEpisode {
    ep.mean_ratio = round6(sum / ep.signals as f64);
    ep.max_ratio = round6(ep.max_ratio);
    ep.gpu_hours_wasted = round6(ep.gpu_hours_wasted);
    ep
}

// ---------------------------------------------------------------------------
// Efficiency: low-utilisation causes (ICSE 2024 taxonomy)
// ---------------------------------------------------------------------------

/// Fine causes and their coarse class. The ICSE 2024 study groups causes as model-related and
/// data-related; batch size and checkpointing are properties of the model's training loop, transfer
/// and exchange of its data.
pub const EFFICIENCY_CAUSES: [(&str, &str); 6] = [
    ("batch_size", "model"),
    ("checkpointing", "model"),
    ("model", "model"),
    ("host_to_device_transfer", "data"),
    ("data_exchange", "data"),
    ("data", "data"),
];

pub fn coarse_cause(fine: &str) -> &'static str {
    EFFICIENCY_CAUSES
        .iter()
        .find(|(f, _)| *f == fine)
        .map_or("other", |(_, c)| c)
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct CauseShare {
    pub cause: String,
    /// model, data or other (coarse rows: the same as cause).
    pub coarse: String,
    pub incidents: u64,
    /// incidents / all incidents.
    pub share: f64,
    /// Sum of the incidents' duration_seconds attributes in hours (0 when not sent).
    pub hours: f64,
}

/// Incidents by cause (None = the sender named none: `unspecified`) into fine and coarse mixes.
pub fn efficiency_mix(incidents: &[(Option<String>, u64, f64)]) -> (Vec<CauseShare>, Vec<CauseShare>) {
    let total: u64 = incidents.iter().map(|i| i.1).sum();
    let mut fine: BTreeMap<String, (u64, f64)> = EFFICIENCY_CAUSES
        .iter()
        .map(|(c, _)| (c.to_string(), (0, 0.0)))
        .collect();
    for (cause, n, h) in incidents {
        let name = match cause.as_deref() {
            None | Some("") => "unspecified".to_string(),
            Some(c) if EFFICIENCY_CAUSES.iter().any(|(f, _)| f == &c) => c.to_string(),
            Some(_) => "other".to_string(),
        };
        let e = fine.entry(name).or_default();
        e.0 += n;
        e.1 += h;
    }
    let mut coarse: BTreeMap<&str, (u64, f64)> = [("model", (0, 0.0)), ("data", (0, 0.0)), ("other", (0, 0.0))]
        .into_iter()
        .collect();
    for (c, (n, h)) in &fine {
        let e = coarse.entry(coarse_cause(c)).or_default();
        e.0 += n;
        e.1 += h;
    }
    let to_rows = |m: Vec<(String, String, u64, f64)>| {
        let mut v: Vec<CauseShare> = m
            .into_iter()
            .map(|(cause, coarse, incidents, h)| CauseShare {
                cause,
                coarse,
                incidents,
                share: round6(ratio(incidents, total)),
                hours: round6(h),
            })
            .collect();
        v.sort_by(|a, b| b.incidents.cmp(&a.incidents).then_with(|| a.cause.cmp(&b.cause)));
        v
    };
    let fine_rows = to_rows(
        fine.into_iter()
            .map(|(c, (n, h))| (c.clone(), coarse_cause(&c).to_string(), n, h))
            .collect(),
    );
    let coarse_rows = to_rows(
        coarse
            .into_iter()
            .map(|(c, (n, h))| (c.to_string(), c.to_string(), n, h))
            .collect(),
    );
    (fine_rows, coarse_rows)
}

// ---------------------------------------------------------------------------
// Timeline
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Day,
    Week,
}

impl Period {
    /// Start of the period holding `t` (UTC days; ISO weeks starting Monday, as Postgres date_trunc).
    pub fn start_of(self, t: DateTime<Utc>) -> NaiveDate {
        let d = t.date_naive();
        match self {
            Period::Day => d,
            Period::Week => d - Duration::days(i64::from(chrono::Datelike::weekday(&d).num_days_from_monday())),
        }
    }

    fn step(self) -> Duration {
        match self {
            Period::Day => Duration::days(1),
            Period::Week => Duration::days(7),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct TimelinePoint {
    /// First day of the period (UTC).
    pub period: NaiveDate,
    pub hardware: u64,
    pub platform: u64,
    pub user: u64,
    pub unknown: u64,
    pub total: u64,
}

/// Every period touching [from, to), in order, with its failures per category (zeros included).
pub fn timeline(
    counts: &[(NaiveDate, String, u64)],
    period: Period,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<TimelinePoint> {
    let mut points: BTreeMap<NaiveDate, TimelinePoint> = BTreeMap::new();
    let mut p = period.start_of(from);
    let last = if to > from {
        period.start_of(to - Duration::milliseconds(1))
    } else {
        p
    };
    while p <= last {
        points.insert(
            p,
            TimelinePoint {
                period: p,
                hardware: 0,
                platform: 0,
                user: 0,
                unknown: 0,
                total: 0,
            },
        );
        p += period.step();
    }
    for (day, category, n) in counts {
        let key = period.start_of(day.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
        let point = points.entry(key).or_insert(TimelinePoint {
            period: key,
            hardware: 0,
            platform: 0,
            user: 0,
            unknown: 0,
            total: 0,
        });
        match category.as_str() {
            "hardware" => point.hardware += n,
            "platform" => point.platform += n,
            "user" => point.user += n,
            _ => point.unknown += n,
        }
        point.total += n;
    }
    points.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn failure(
        category: &str,
        transient: bool,
        resolution: Option<&str>,
        phases: Phases,
        gpus: Option<u32>,
    ) -> RecoveryFailure {
        RecoveryFailure {
            id: uuid::Uuid::nil(),
            cluster: "c1".into(),
            job_id: None,
            first_at: t("2026-11-02T10:00:00Z"),
            category: category.into(),
            catalog_transient: transient,
            resolution: resolution.map(Into::into),
            resolved_at: None,
            phases,
            gpus,
            root_node_drained: false,
        }
    }

    fn ph(d: f64, r: f64, s: f64, c: f64) -> Phases {
        Phases {
            detection: Some(d),
            resubmission: Some(r),
            setup: Some(s),
            recomputation: Some(c),
        }
    }

    #[test]
    fn downtime_is_the_sum_of_phases_else_the_resolution_time() {
        // Unicron's GPT-3 recovery: 30 + 9 + 14 + 15 = 68 minutes.
        assert_eq!(
            downtime_minutes(&ph(30.0, 9.0, 14.0, 15.0), t("2026-11-02T10:00:00Z"), None),
            Some(68.0)
        );
        // No phases: resolved 1 h 30 min after the first signal = 90 minutes.
        assert_eq!(
            downtime_minutes(
                &Phases::default(),
                t("2026-11-02T10:00:00Z"),
                Some(t("2026-11-02T11:30:00Z"))
            ),
            Some(90.0)
        );
        assert_eq!(
            downtime_minutes(&Phases::default(), t("2026-11-02T10:00:00Z"), None),
            None
        );
        // Only some phases recorded: their sum (30 + 15).
        let partial = Phases {
            detection: Some(30.0),
            recomputation: Some(15.0),
            ..Default::default()
        };
        assert_eq!(downtime_minutes(&partial, t("2026-11-02T10:00:00Z"), None), Some(45.0));
    }

    #[test]
    fn recovery_summary_by_hand() {
        let fs = vec![
            // 68 min on 128 GPUs: 68/60 x 128 = 145.066667 GPU-hours.
            failure("hardware", true, Some("drained"), ph(30.0, 9.0, 14.0, 15.0), Some(128)),
            // 20 min on 8 GPUs: 20/60 x 8 = 2.666667.
            failure("hardware", false, None, ph(10.0, 5.0, 5.0, 0.0), Some(8)),
            // 120 min, no GPU count.
            failure(
                "user",
                false,
                Some("transient_restart"),
                Phases {
                    detection: Some(120.0),
                    ..Default::default()
                },
                None,
            ),
            // Unknown downtime; catalog says transient.
            failure("platform", true, None, Phases::default(), Some(16)),
        ];
        let s = recovery(&fs);
        assert_eq!(s.failures, 4);
        assert_eq!(s.failures_without_downtime, 1);
        // Downtimes 20, 68, 120: mean 208/3 = 69.333333; median 68; p90 at rank 0.9 x 2 = 1.8:
        // 68 + 0.8 x (120 - 68) = 109.6.
        assert_eq!(s.downtime_minutes.mean, Some(69.333333));
        assert_eq!(s.downtime_minutes.median, Some(68.0));
        assert_eq!(s.downtime_minutes.p90, Some(109.6));
        assert_eq!(s.downtime_minutes.total, 208.0);
        // Phases: detection 30 + 10 + 120 = 160 over 208 phase minutes = 0.769231.
        assert_eq!(s.phases[0].phase, "detection");
        assert_eq!(s.phases[0].minutes.count, 3);
        assert_eq!(s.phases[0].share_of_phase_minutes, 0.769231);
        // Recomputation 15 + 0 = 15 over two failures: mean 7.5.
        assert_eq!(s.phases[3].minutes.mean, Some(7.5));
        // Transient: #1 resolved as drained (not transient despite the catalog), #3 restart, #4 catalog: 2 / 4.
        assert_eq!((s.transient_failures, s.transient_share), (2, 0.5));
        // Hardware: 2, of which #1 drained: 0.5.
        assert_eq!(
            (s.hardware_failures, s.hardware_failures_drained, s.hardware_drain_share),
            (2, 1, 0.5)
        );
        assert_eq!(s.gpu_hours_lost, 147.733333);
        assert_eq!(s.failures_without_gpus, 1);
    }

    #[test]
    fn out_of_service_time_is_clipped_to_the_window() {
        let (from, to) = (t("2026-11-01T00:00:00Z"), t("2026-11-03T00:00:00Z"));
        // Drained the day before the window, returned 6 h in: 6 h. Drained again at 2nd 20:00, never
        // returned: 4 h to the end. A second drain while drained is ignored.
        let tr = vec![
            (t("2026-10-31T00:00:00Z"), true),
            (t("2026-11-01T06:00:00Z"), false),
            (t("2026-11-02T20:00:00Z"), true),
            (t("2026-11-02T21:00:00Z"), true),
        ];
        assert_eq!(out_of_service_hours(&tr, from, to), 10.0);
        assert_eq!(out_of_service_hours(&[], from, to), 0.0);
    }

    #[test]
    fn ettr_per_job_and_fleet() {
        let (from, to) = (t("2026-11-01T00:00:00Z"), t("2026-11-02T00:00:00Z"));
        let job = |id: &str, gpus, s: &str, e: Option<&str>| JobRun {
            cluster: "c1".into(),
            job_id: id.into(),
            gpus,
            nodes: vec![],
            started_at: t(s),
            ended_at: e.map(t),
            state: "completed".into(),
        };
        // j1: 128 GPUs, 10 h, one 68-minute failure and one of unknown downtime.
        // j2: 8 GPUs, started before the window, runs to its end: 12 h inside the window, no failure.
        let jobs = vec![
            job("j1", 128, "2026-11-01T00:00:00Z", Some("2026-11-01T10:00:00Z")),
            job("j2", 8, "2026-10-31T00:00:00Z", None),
        ];
        let mut f1 = failure("hardware", false, None, ph(30.0, 9.0, 14.0, 15.0), Some(128));
        f1.job_id = Some("j1".into());
        let mut f2 = failure("user", false, None, Phases::default(), Some(128));
        f2.job_id = Some("j1".into());
        let (rows, fleet) = ettr(&jobs, &[f1, f2], from, to);
        // j1: (10 - 68/60) / 10 = 8.866667 / 10 = 0.886667.
        let j1 = rows.iter().find(|r| r.job_id == "j1").unwrap();
        assert_eq!(
            (j1.wall_clock_hours, j1.downtime_hours, j1.ettr),
            (10.0, 1.133333, Some(0.886667))
        );
        assert_eq!((j1.failures, j1.failures_without_downtime), (2, 1));
        let j2 = rows.iter().find(|r| r.job_id == "j2").unwrap();
        assert_eq!((j2.wall_clock_hours, j2.ettr), (24.0, Some(1.0)));
        // Fleet: GPU-hours 128 x 10 + 8 x 24 = 1472; lost 128 x 68/60 = 145.066667;
        // ETTR = (1472 - 145.066667) / 1472 = 0.901449; mean of per-job (0.886667 + 1) / 2 = 0.943333.
        assert_eq!(fleet.gpu_hours, 1472.0);
        assert_eq!(fleet.gpu_hours_lost, 145.066667);
        assert_eq!(fleet.ettr, Some(0.901449));
        assert_eq!(fleet.mean_job_ettr, Some(0.943333));
        assert_eq!(rows[0].job_id, "j1", "worst ETTR first");
    }

    #[test]
    fn top_errors_share_and_order() {
        let rows = vec![
            ("ecc".to_string(), Some(2), 5, 5, "critical".to_string()),
            ("nccl_timeout".to_string(), None, 10, 40, "medium".to_string()),
            ("nvlink".to_string(), None, 5, 9, "high".to_string()),
        ];
        // 100 failures, 200 signals: NCCL 10 / 100 = 0.1 of failures, 40 / 200 = 0.2 of signals.
        let out = top_errors(rows, 100, 200, 2);
        assert_eq!(out.len(), 2);
        assert_eq!(
            (out[0].label.as_str(), out[0].share, out[0].signal_share),
            ("nccl_timeout", 0.1, 0.2)
        );
        // ECC and NVLink tie on failures; NVLink has more signals.
        assert_eq!((out[1].label.as_str(), out[1].share), ("nvlink", 0.05));
        assert_eq!(
            top_errors(vec![("xid".into(), Some(79), 1, 1, "critical".into())], 1, 1, 5)[0].label,
            "xid 79"
        );
    }

    #[test]
    fn concentration_tiers_by_hand() {
        // 200 nodes in service; 4 failing nodes: n1 with 10, n2 with 5, n3 and n4 with 1: 17 failures.
        let per_node: Vec<((String, String), u64)> = [("n1", 10), ("n2", 5), ("n3", 1), ("n4", 1)]
            .iter()
            .map(|(h, n)| (("c1".to_string(), h.to_string()), *n))
            .collect();
        let (ranked, tiers) = concentration(&per_node, 200, &[0.01, 0.05, 0.10]);
        // 1% of 200 = 2 nodes: n1 + n2 = 15 / 17 = 0.882353; 5% = 10 nodes and 10% = 20: all 17.
        assert_eq!((tiers[0].nodes, tiers[0].failures, tiers[0].share), (2, 15, 0.882353));
        assert_eq!((tiers[1].nodes, tiers[1].share), (10, 1.0));
        assert_eq!(tiers[2].nodes, 20);
        assert_eq!(
            (ranked[0].hostname.as_str(), ranked[0].cumulative_share),
            ("n1", 0.588235)
        );
        assert_eq!(ranked[3].hostname, "n4");
        // A tiny fleet still takes at least one node: 1% of 10 = 0.1 -> 1 node, 10 / 17.
        let (_, tiers) = concentration(&per_node, 10, &[0.01]);
        assert_eq!((tiers[0].nodes, tiers[0].share), (1, 0.588235));
    }

    #[test]
    fn buckets_and_job_size_by_hand() {
        assert_eq!(
            (
                bucket_of(8),
                bucket_of(9),
                bucket_of(128),
                bucket_of(1023),
                bucket_of(1024),
                bucket_of(4096)
            ),
            ("1-8", "9-64", "65-128", "513-1023", "1024+", "1024+")
        );
        let (from, to) = (t("2026-11-01T00:00:00Z"), t("2026-11-11T00:00:00Z"));
        let job = |id: &str, gpus, hours: i64, state: &str, failures| JobOutcome {
            job: JobRun {
                cluster: "c1".into(),
                job_id: id.into(),
                gpus,
                nodes: vec![],
                started_at: from,
                ended_at: Some(from + Duration::hours(hours)),
                state: state.into(),
            },
            failures,
        };
        // 20 jobs: 18 of 8 GPUs x 10 h (2 failed by scheduler state only), one 128-GPU job of 100 h
        // with 4 failures, one 1024-GPU job of 50 h with 1 failure, cancelled.
        let mut jobs: Vec<JobOutcome> = (0..18)
            .map(|i| {
                job(
                    &format!("s{i:02}"),
                    8,
                    10,
                    if i < 2 { "failed" } else { "completed" },
                    0,
                )
            })
            .collect();
        jobs.push(job("big", 128, 100, "completed", 4));
        jobs.push(job("huge", 1024, 50, "cancelled", 1));
        let (buckets, largest) = job_size(&jobs, from, to, 0.05);
        let small = &buckets[0];
        // 2 / 18 = 0.111111 failed; no interruptions recorded: no MTTF.
        assert_eq!(
            (small.jobs, small.failed_jobs, small.failure_rate, small.mttf_hours),
            (18, 2, 0.111111, None)
        );
        assert_eq!((small.job_hours, small.gpu_hours), (180.0, 1440.0));
        // 128-GPU bucket: 100 h / 4 failures = 25 h MTTF.
        assert_eq!(
            (buckets[2].failures, buckets[2].mttf_hours, buckets[2].gpu_hours),
            (4, Some(25.0), 12800.0)
        );
        assert_eq!((buckets[5].bucket.as_str(), buckets[5].failure_rate), ("1024+", 1.0));
        // Largest 5% of 20 jobs = 1 job: "huge", failed (one failure names it).
        assert_eq!(
            (
                largest.jobs,
                largest.min_gpus,
                largest.failed_jobs,
                largest.failure_rate
            ),
            (1, 1024, 1, 1.0)
        );
    }

    #[test]
    fn projection_follows_meta() {
        // 0.01 failures per node-day, 8 GPUs per node: a 1024-GPU job spans 128 nodes,
        // MTTF = 1 / (128 x 0.01) days = 0.78125 d = 18.75 h.
        let p = project_mttf(0.01, 8.0, &[8, 1024, 1000]);
        assert_eq!((p[0].nodes, p[0].mttf_hours), (1, Some(2400.0)));
        assert_eq!((p[1].nodes, p[1].mttf_hours), (128, Some(18.75)));
        assert_eq!(p[2].nodes, 125);
        assert_eq!(project_mttf(0.0, 8.0, &[8])[0].mttf_hours, None);
    }

    #[test]
    fn straggler_episodes_by_hand() {
        let s = |node: &str, at: &str, ratio: f64, gpus| SlowdownSignal {
            cluster: "c1".into(),
            node: node.into(),
            job_id: Some("j1".into()),
            at: t(at),
            ratio,
            duration_seconds: None,
            job_gpus: Some(gpus),
        };
        let sigs = vec![
            // n1: 10:00 and 10:20 (each covers the 10 minutes before it; gap 10 min <= 30): one episode.
            s("n1", "2026-11-02T10:00:00Z", 2.0, 64),
            s("n1", "2026-11-02T10:20:00Z", 1.5, 64),
            // n1 again at 13:00: a second episode.
            s("n1", "2026-11-02T13:00:00Z", 1.25, 64),
            // n2 below the threshold: ignored.
            s("n2", "2026-11-02T10:00:00Z", 1.05, 64),
        ];
        let eps = straggler_episodes(&sigs, 1.1, 10.0, Duration::minutes(30));
        assert_eq!(eps.len(), 2);
        let e = &eps[0];
        assert_eq!(
            (e.start, e.end, e.signals),
            (t("2026-11-02T09:50:00Z"), t("2026-11-02T10:20:00Z"), 2)
        );
        // Wasted: 64 GPUs x 1/6 h x (1 - 1/2) = 5.333333, + 64 x 1/6 x (1 - 1/1.5) = 3.555556: 8.888889.
        assert_eq!((e.max_ratio, e.mean_ratio, e.gpu_hours_wasted), (2.0, 1.75, 8.888889));
        // 64 x 1/6 x (1 - 0.8) = 2.133333.
        assert_eq!(eps[1].gpu_hours_wasted, 2.133333);
        assert_eq!(slowdown_ratio(None, Some(0.5)), Some(2.0));
        assert_eq!(slowdown_ratio(Some(1.3), Some(0.5)), Some(1.3));
        assert_eq!(slowdown_ratio(Some(-1.0), None), None);
    }

    #[test]
    fn efficiency_mix_by_hand() {
        // 100 incidents: 25 batch size, 28 host-to-GPU, 16 checkpointing, 7 data exchange, 20 other, 4 unnamed.
        let incidents = vec![
            (Some("batch_size".to_string()), 25, 0.0),
            (Some("host_to_device_transfer".to_string()), 28, 14.0),
            (Some("checkpointing".to_string()), 16, 0.0),
            (Some("data_exchange".to_string()), 7, 0.0),
            (Some("cosmic_rays".to_string()), 20, 0.0),
            (None, 4, 0.0),
        ];
        let (fine, coarse) = efficiency_mix(&incidents);
        let get = |v: &[CauseShare], c: &str| v.iter().find(|r| r.cause == c).unwrap().clone();
        assert_eq!(get(&fine, "host_to_device_transfer").share, 0.28);
        assert_eq!(get(&fine, "host_to_device_transfer").hours, 14.0);
        assert_eq!(fine[0].cause, "host_to_device_transfer");
        assert_eq!(get(&fine, "unspecified").incidents, 4);
        assert_eq!(get(&fine, "model").incidents, 0);
        // Model-related: 25 + 16 = 41; data-related: 28 + 7 = 35; other: 20 + 4 = 24.
        assert_eq!(
            (
                get(&coarse, "model").share,
                get(&coarse, "data").share,
                get(&coarse, "other").share
            ),
            (0.41, 0.35, 0.24)
        );
    }

    #[test]
    fn timeline_fills_empty_periods() {
        let d = |s: &str| s.parse::<NaiveDate>().unwrap();
        let counts = vec![
            (d("2026-11-02"), "hardware".to_string(), 3),
            (d("2026-11-04"), "user".to_string(), 1),
            (d("2026-11-04"), "hardware".to_string(), 1),
        ];
        let days = timeline(
            &counts,
            Period::Day,
            t("2026-11-02T00:00:00Z"),
            t("2026-11-05T00:00:00Z"),
        );
        assert_eq!(days.len(), 3);
        assert_eq!(
            (days[0].hardware, days[1].total, days[2].user, days[2].total),
            (3, 0, 1, 2)
        );
        // 2026-11-02 is a Monday: the week from 2 to 8 November holds everything; 11-09 starts the next.
        let weeks = timeline(
            &counts,
            Period::Week,
            t("2026-11-02T00:00:00Z"),
            t("2026-11-10T00:00:00Z"),
        );
        assert_eq!(weeks.len(), 2);
        assert_eq!(
            (weeks[0].period, weeks[0].total, weeks[1].total),
            (d("2026-11-02"), 5, 0)
        );
        assert_eq!(Period::Week.start_of(t("2026-11-08T23:00:00Z")), d("2026-11-02"));
    }
}
