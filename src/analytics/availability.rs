//! The node state ledger and the fleet's availability. Pure: storage hands in each node's state
//! sources (drains, silences, alerts, repairs, retirement) and its failures; this module resolves
//! them into one state per instant (by [`NodeState`] precedence), attributes each interval's cause,
//! and sums GPU-hours per period. docs/analytics.md defines the states and the figures.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::cost::overlap_hours;
use super::headline::round6;

/// A node's state, in increasing precedence: where sources overlap the highest one holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    InService,
    /// Serving, but a part or lemon alert fires on it.
    Degraded,
    /// Taken out by the scheduler (Slurm drain, Kubernetes cordon) or the API.
    Drained,
    /// Silent: no signal nor heartbeat (a firing silence alert).
    Down,
    /// A GPU removed failed or for RMA and its slot not yet refilled.
    InRepair,
    /// Retired from the inventory.
    Retired,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::InService => "in_service",
            NodeState::Degraded => "degraded",
            NodeState::Drained => "drained",
            NodeState::Down => "down",
            NodeState::InRepair => "in_repair",
            NodeState::Retired => "retired",
        }
    }

    /// States whose GPUs count as unavailable (retired ones are no longer installed at all).
    pub fn is_lost(self) -> bool {
        matches!(self, NodeState::Drained | NodeState::Down | NodeState::InRepair)
    }
}

/// The failure that opened an interval.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
pub struct Cause {
    pub failure_id: Uuid,
    pub category: String,
    pub component: String,
}

/// One fact about a node's state: `state` from `start` until `end` (open while None).
#[derive(Debug, Clone, PartialEq)]
pub struct StateSource {
    pub state: NodeState,
    pub start: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
    /// For [`NodeState::InRepair`]: the GPUs out of the node (one per removed part). Ignored otherwise.
    pub gpus: u32,
    /// The failure named explicitly (a drain recorded with its failure); else attributed by [`attribute`].
    pub cause: Option<Cause>,
}

/// A failure of a node, as the cause attribution reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFailureMark {
    pub first_at: DateTime<Utc>,
    pub cause: Cause,
}

/// How far before an interval's start a failure of the node may be to be its cause.
pub const CAUSE_LOOKBACK_HOURS: i64 = 24;
/// The same for a repair: a part is often pulled days after the failure that condemned it.
pub const REPAIR_CAUSE_LOOKBACK_HOURS: i64 = 7 * 24;

/// The cause of an interval of `state` starting at `start`: the node's latest failure whose first
/// signal is at or before `start` and at most [`CAUSE_LOOKBACK_HOURS`] earlier
/// ([`REPAIR_CAUSE_LOOKBACK_HOURS`] for a repair).
pub fn attribute(state: NodeState, start: DateTime<Utc>, failures: &[NodeFailureMark]) -> Option<Cause> {
    let lookback = if state == NodeState::InRepair {
        REPAIR_CAUSE_LOOKBACK_HOURS
    } else {
        CAUSE_LOOKBACK_HOURS
    };
    let earliest = start - Duration::hours(lookback);
    failures
        .iter()
        .filter(|f| f.first_at <= start && f.first_at >= earliest)
        .max_by_key(|f| f.first_at)
        .map(|f| f.cause.clone())
}

/// One resolved interval of a node's ledger: [start, end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Segment {
    pub state: NodeState,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// GPUs of the node out of service: all of them while drained, down or retired (whatever else
    /// holds); while only in repair, the removed ones; none in service or degraded.
    pub gpus_out: u32,
    pub cause: Option<Cause>,
}

/// One drain or return of a node, in time order: `failure` is the failure a drain was recorded
/// with (`POST /v1/nodes/{cluster}/{hostname}/state` with `failure_id`), if any.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DrainMark {
    pub at: DateTime<Utc>,
    pub drained: bool,
    pub failure: Option<Uuid>,
}

/// A drained interval, open while `end` is None, with the failure its opening drain named.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DrainedInterval {
    pub start: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
    pub failure: Option<Uuid>,
}

/// Drain marks in time order as drained intervals: a drain opens one (a second drain while
/// drained keeps the first, and its failure when the first named none), a return closes it.
pub fn drained_intervals(marks: &[DrainMark]) -> Vec<DrainedInterval> {
    let mut out = Vec::new();
    let mut open: Option<DrainedInterval> = None;
    for m in marks {
        match (&mut open, m.drained) {
            (None, true) => {
                open = Some(DrainedInterval {
                    start: m.at,
                    end: None,
                    failure: m.failure,
                })
            }
            (Some(o), true) => o.failure = o.failure.or(m.failure),
            (Some(o), false) => {
                out.push(DrainedInterval { end: Some(m.at), ..*o });
                open = None;
            }
            (None, false) => {}
        }
    }
    out.extend(open);
    out
}

/// How long a pending row remap degrades its node: from the signal until the node is next taken
/// out (a drain, during which sites reset the GPU and the remap takes effect) or a part of it is
/// removed, whichever comes first; open otherwise. Overlapping periods merge.
pub fn pending_remap_intervals(
    pending: &[DateTime<Utc>],
    taken_out: &[DateTime<Utc>],
) -> Vec<(DateTime<Utc>, Option<DateTime<Utc>>)> {
    let mut pending = pending.to_vec();
    pending.sort();
    let mut out: Vec<(DateTime<Utc>, Option<DateTime<Utc>>)> = Vec::new();
    for p in pending {
        let end = taken_out.iter().filter(|t| **t > p).min().copied();
        match out.last_mut() {
            // Still pending from an earlier signal: the same period.
            Some((_, last_end)) if last_end.is_none_or(|e| e > p) => {}
            _ => out.push((p, end)),
        }
    }
    out
}

/// The node's ledger over [since, until): one state per instant, adjacent equal intervals merged.
/// Each source without an explicit cause gets the one [`attribute`] finds at its start; an
/// interval's cause is the one of the winning source that started first.
pub fn ledger(
    gpu_count: u32,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    sources: &[StateSource],
    failures: &[NodeFailureMark],
) -> Vec<Segment> {
    if until <= since {
        return Vec::new();
    }
    let sources: Vec<StateSource> = sources
        .iter()
        .filter(|s| s.end.is_none_or(|e| e > s.start))
        .map(|s| StateSource {
            cause: s.cause.clone().or_else(|| attribute(s.state, s.start, failures)),
            ..s.clone()
        })
        .collect();
    let mut cuts = vec![since, until];
    for s in &sources {
        for t in [Some(s.start), s.end].into_iter().flatten() {
            if t > since && t < until {
                cuts.push(t);
            }
        }
    }
    cuts.sort();
    cuts.dedup();
    let mut out: Vec<Segment> = Vec::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let active: Vec<&StateSource> = sources
            .iter()
            .filter(|s| s.start <= a && s.end.is_none_or(|e| e >= b))
            .collect();
        let top = active.iter().map(|s| s.state).max().unwrap_or(NodeState::InService);
        let cause = active
            .iter()
            .filter(|s| s.state == top)
            .min_by_key(|s| s.start)
            .and_then(|s| s.cause.clone());
        let whole = active
            .iter()
            .any(|s| matches!(s.state, NodeState::Drained | NodeState::Down | NodeState::Retired));
        let gpus_out = if whole {
            gpu_count
        } else if top == NodeState::InRepair {
            active
                .iter()
                .filter(|s| s.state == NodeState::InRepair)
                .map(|s| s.gpus)
                .sum::<u32>()
                .min(gpu_count)
        } else {
            0
        };
        let seg = Segment {
            state: top,
            start: a,
            end: b,
            gpus_out,
            cause,
        };
        match out.last_mut() {
            Some(last)
                if last.end == a
                    && last.state == seg.state
                    && last.gpus_out == seg.gpus_out
                    && last.cause == seg.cause =>
            {
                last.end = b
            }
            _ => out.push(seg),
        }
    }
    out
}

/// The bucket of an availability series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AvailabilityPeriod {
    Day,
    /// ISO weeks, from Monday.
    Week,
    /// Calendar months (UTC).
    Month,
}

impl AvailabilityPeriod {
    pub fn as_str(self) -> &'static str {
        match self {
            AvailabilityPeriod::Day => "day",
            AvailabilityPeriod::Week => "week",
            AvailabilityPeriod::Month => "month",
        }
    }

    /// Days up to a quarter, weeks up to three years, months beyond: at most ~160 points.
    pub fn for_window(from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        let days = (to - from).num_days();
        if days <= 92 {
            AvailabilityPeriod::Day
        } else if days <= 3 * 366 {
            AvailabilityPeriod::Week
        } else {
            AvailabilityPeriod::Month
        }
    }

    /// The start of the period holding `t` (UTC; weeks start on Monday, as Postgres' date_trunc).
    pub fn start_of(self, t: DateTime<Utc>) -> NaiveDate {
        let d = t.date_naive();
        match self {
            AvailabilityPeriod::Day => d,
            AvailabilityPeriod::Week => d - Duration::days(i64::from(d.weekday().num_days_from_monday())),
            AvailabilityPeriod::Month => d.with_day(1).unwrap_or(d),
        }
    }

    pub fn next(self, d: NaiveDate) -> NaiveDate {
        match self {
            AvailabilityPeriod::Day => d + Duration::days(1),
            AvailabilityPeriod::Week => d + Duration::days(7),
            AvailabilityPeriod::Month => d.checked_add_months(chrono::Months::new(1)).unwrap_or(d),
        }
    }

    /// The periods touching [from, to), each as [start, end) clipped to the window.
    pub fn spans(self, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<(NaiveDate, DateTime<Utc>, DateTime<Utc>)> {
        let mut out = Vec::new();
        let mut d = self.start_of(from);
        while let Some(start) = d.and_hms_opt(0, 0, 0).map(|x| x.and_utc()) {
            let n = self.next(d);
            if start >= to || n <= d {
                break;
            }
            let end = n.and_hms_opt(0, 0, 0).map_or(to, |x| x.and_utc());
            out.push((d, start.max(from), end.min(to)));
            d = n;
        }
        out
    }
}

/// A node with its ledger, as the availability sums read it.
#[derive(Debug, Clone)]
pub struct NodeLedger {
    /// The value grouped by (cluster, generation or group).
    pub key: String,
    pub gpu_count: u32,
    /// Installed from `since` until `retired_at`.
    pub since: DateTime<Utc>,
    pub retired_at: Option<DateTime<Utc>>,
    pub segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StateHours {
    pub state: NodeState,
    pub gpu_hours: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CauseHours {
    /// Root-cause category of the failure that opened the intervals; `unattributed` when none.
    pub category: String,
    pub component: String,
    pub gpu_hours: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AvailabilityPoint {
    /// First day of the period (UTC).
    pub period: NaiveDate,
    /// The cluster, generation or group.
    pub key: String,
    /// GPUs installed x hours installed inside the period and window.
    pub installed_gpu_hours: f64,
    /// installed_gpu_hours - lost_gpu_hours.
    pub available_gpu_hours: f64,
    pub lost_gpu_hours: f64,
    /// available / installed; null when nothing was installed.
    pub availability: Option<f64>,
    /// GPU-hours of degraded nodes (counted available).
    pub degraded_gpu_hours: f64,
    /// Lost GPU-hours by state (drained, down, in_repair), each listed.
    pub lost_by_state: Vec<StateHours>,
    /// Lost GPU-hours by cause, largest first.
    pub lost_by_cause: Vec<CauseHours>,
}

const LOST_STATES: [NodeState; 3] = [NodeState::Drained, NodeState::Down, NodeState::InRepair];

/// Installed, available and lost GPU-hours per period of [from, to) and key: one point per
/// (period, key) of every key with a node installed in the window.
pub fn availability(
    nodes: &[NodeLedger],
    period: AvailabilityPeriod,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<AvailabilityPoint> {
    #[derive(Default)]
    struct Acc {
        installed: f64,
        degraded: f64,
        by_state: BTreeMap<NodeState, f64>,
        by_cause: BTreeMap<(String, String), f64>,
    }
    let spans = period.spans(from, to);
    let mut acc: BTreeMap<(NaiveDate, String), Acc> = BTreeMap::new();
    let far = DateTime::<Utc>::MAX_UTC;
    for n in nodes {
        let end = n.retired_at.unwrap_or(far);
        if overlap_hours(n.since, end, from, to) <= 0.0 {
            continue;
        }
        for &(d, a, b) in &spans {
            let e = acc.entry((d, n.key.clone())).or_default();
            e.installed += f64::from(n.gpu_count) * overlap_hours(n.since, end, a, b);
            for s in &n.segments {
                // Segments never outlast the installed interval: clip them to it all the same.
                let h = overlap_hours(s.start.max(n.since), s.end.min(end), a, b);
                if h <= 0.0 {
                    continue;
                }
                if s.state == NodeState::Degraded {
                    e.degraded += f64::from(n.gpu_count) * h;
                } else if s.state.is_lost() && s.gpus_out > 0 {
                    let gh = f64::from(s.gpus_out) * h;
                    *e.by_state.entry(s.state).or_default() += gh;
                    let key = s
                        .cause
                        .as_ref()
                        .map_or(("unattributed".to_string(), "unknown".to_string()), |c| {
                            (c.category.clone(), c.component.clone())
                        });
                    *e.by_cause.entry(key).or_default() += gh;
                }
            }
        }
    }
    acc.into_iter()
        .map(|((period, key), e)| {
            let lost: f64 = e.by_state.values().sum();
            let mut by_cause: Vec<CauseHours> = e
                .by_cause
                .into_iter()
                .map(|((category, component), h)| CauseHours {
                    category,
                    component,
                    gpu_hours: round6(h),
                })
                .collect();
            by_cause.sort_by(|a, b| b.gpu_hours.total_cmp(&a.gpu_hours));
            AvailabilityPoint {
                period,
                key,
                installed_gpu_hours: round6(e.installed),
                available_gpu_hours: round6(e.installed - lost),
                lost_gpu_hours: round6(lost),
                availability: (e.installed > 0.0).then(|| round6((e.installed - lost) / e.installed)),
                degraded_gpu_hours: round6(e.degraded),
                lost_by_state: LOST_STATES
                    .iter()
                    .map(|s| StateHours {
                        state: *s,
                        gpu_hours: round6(e.by_state.get(s).copied().unwrap_or(0.0)),
                    })
                    .collect(),
                lost_by_cause: by_cause,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The repair pipeline
// ---------------------------------------------------------------------------

/// A failure that took a node out: the node's out-of-service intervals (drained, down, in repair)
/// whose cause it is, as stages. Hours; None where the stage did not happen or is still open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Incident {
    pub cluster: String,
    pub hostname: String,
    pub cause: Cause,
    /// The failure's first signal.
    pub first_at: DateTime<Utc>,
    /// The start of its first out-of-service interval.
    pub out_at: DateTime<Utc>,
    /// The end of its last one; None while it lasts.
    pub returned_at: Option<DateTime<Utc>>,
    /// First signal -> out of service.
    pub detect_hours: f64,
    /// First signal -> drained (None when never drained).
    pub drain_hours: Option<f64>,
    /// Time in repair (a GPU removed and its slot empty); None without a repair or while open.
    pub repair_hours: Option<f64>,
    /// Out of service -> back (None while open).
    pub return_hours: Option<f64>,
    /// Hours since out of service, at the end of the window, while open.
    pub open_hours: Option<f64>,
    /// Open longer than the p90 of the return time of its cause.
    pub stuck: bool,
}

fn hours_between(a: DateTime<Utc>, b: DateTime<Utc>) -> f64 {
    round6((b - a).num_milliseconds() as f64 / 3_600_000.0)
}

/// The incidents of one node's ledger, for the failures (id -> first signal) given. An interval
/// reaching `until` is open.
pub fn incidents(
    cluster: &str,
    hostname: &str,
    segments: &[Segment],
    first_signals: &BTreeMap<Uuid, DateTime<Utc>>,
    until: DateTime<Utc>,
) -> Vec<Incident> {
    let mut by_failure: BTreeMap<Uuid, Vec<&Segment>> = BTreeMap::new();
    for s in segments {
        if let Some(c) = s.cause.as_ref().filter(|_| s.state.is_lost()) {
            by_failure.entry(c.failure_id).or_default().push(s);
        }
    }
    let mut out = Vec::new();
    for (id, segs) in by_failure {
        let Some(&first_at) = first_signals.get(&id) else {
            continue;
        };
        let (Some(first), Some(last)) = (segs.first(), segs.last()) else {
            continue;
        };
        let Some(cause) = first.cause.clone() else {
            continue;
        };
        let open = last.end >= until;
        let drained = segs.iter().find(|s| s.state == NodeState::Drained).map(|s| s.start);
        let repairs: Vec<&&Segment> = segs.iter().filter(|s| s.state == NodeState::InRepair).collect();
        let repair_open = repairs.last().is_some_and(|s| s.end >= until);
        out.push(Incident {
            cluster: cluster.into(),
            hostname: hostname.into(),
            cause,
            first_at,
            out_at: first.start,
            returned_at: (!open).then_some(last.end),
            detect_hours: hours_between(first_at, first.start),
            drain_hours: drained.map(|d| hours_between(first_at, d)),
            repair_hours: match (repairs.first(), repairs.last()) {
                (Some(a), Some(b)) if !repair_open => Some(hours_between(a.start, b.end)),
                _ => None,
            },
            return_hours: (!open).then(|| hours_between(first.start, last.end)),
            open_hours: open.then(|| hours_between(first.start, until)),
            stuck: false,
        });
    }
    out
}

/// count, median, p90 and max of one stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StageStats {
    pub count: u64,
    pub median: Option<f64>,
    pub p90: Option<f64>,
    pub max: Option<f64>,
}

impl StageStats {
    fn of(mut xs: Vec<f64>) -> Self {
        xs.sort_by(f64::total_cmp);
        let p = |q| super::stats::percentile(&xs, q).map(round6);
        StageStats {
            count: xs.len() as u64,
            median: p(0.5),
            p90: p(0.9),
            max: xs.last().copied(),
        }
    }
}

/// The stages of a set of incidents (closed ones for repair and return).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PipelineStats {
    /// The cause (`category/component`) or the cluster.
    pub key: String,
    pub incidents: u64,
    pub open: u64,
    pub detect_hours: StageStats,
    pub drain_hours: StageStats,
    pub repair_hours: StageStats,
    pub return_hours: StageStats,
}

pub fn pipeline_stats<'a>(key: String, incidents: impl Iterator<Item = &'a Incident> + Clone) -> PipelineStats {
    PipelineStats {
        key,
        incidents: incidents.clone().count() as u64,
        open: incidents.clone().filter(|i| i.returned_at.is_none()).count() as u64,
        detect_hours: StageStats::of(incidents.clone().map(|i| i.detect_hours).collect()),
        drain_hours: StageStats::of(incidents.clone().filter_map(|i| i.drain_hours).collect()),
        repair_hours: StageStats::of(incidents.clone().filter_map(|i| i.repair_hours).collect()),
        return_hours: StageStats::of(incidents.filter_map(|i| i.return_hours).collect()),
    }
}

/// Per cause, the stage statistics; each open incident is marked stuck when open longer than the
/// p90 return time of its cause's closed incidents.
pub fn pipeline(incidents: &mut [Incident]) -> Vec<PipelineStats> {
    let key = |i: &Incident| format!("{}/{}", i.cause.category, i.cause.component);
    let mut keys: Vec<String> = incidents.iter().map(key).collect();
    keys.sort();
    keys.dedup();
    let stats: Vec<PipelineStats> = keys
        .into_iter()
        .map(|k| pipeline_stats(k.clone(), incidents.iter().filter(move |i| key(i) == k)))
        .collect();
    for i in incidents.iter_mut() {
        let p90 = stats.iter().find(|s| s.key == key(i)).and_then(|s| s.return_hours.p90);
        i.stuck = matches!((i.open_hours, p90), (Some(o), Some(p)) if o > p);
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn cause(cat: &str, comp: &str) -> Cause {
        Cause {
            failure_id: Uuid::nil(),
            category: cat.into(),
            component: comp.into(),
        }
    }

    fn src(state: NodeState, start: &str, end: Option<&str>, gpus: u32) -> StateSource {
        StateSource {
            state,
            start: t(start),
            end: end.map(t),
            gpus,
            cause: None,
        }
    }

    fn seg(state: NodeState, start: &str, end: &str, gpus_out: u32, c: Option<Cause>) -> Segment {
        Segment {
            state,
            start: t(start),
            end: t(end),
            gpus_out,
            cause: c,
        }
    }

    #[test]
    fn drain_marks_pair_into_intervals() {
        let f = Uuid::from_u128(7);
        let mark = |at: &str, drained: bool, failure: Option<Uuid>| DrainMark {
            at: t(at),
            drained,
            failure,
        };
        let m = [
            mark("2026-11-01T00:00:00Z", false, None),
            mark("2026-11-01T02:00:00Z", true, None),
            mark("2026-11-01T03:00:00Z", true, Some(f)),
            mark("2026-11-01T05:00:00Z", false, None),
            mark("2026-11-01T07:00:00Z", true, None),
        ];
        assert_eq!(
            drained_intervals(&m),
            vec![
                DrainedInterval {
                    start: t("2026-11-01T02:00:00Z"),
                    end: Some(t("2026-11-01T05:00:00Z")),
                    failure: Some(f)
                },
                DrainedInterval {
                    start: t("2026-11-01T07:00:00Z"),
                    end: None,
                    failure: None
                }
            ]
        );
    }

    #[test]
    fn a_pending_remap_lasts_until_the_node_is_next_taken_out() {
        let p = |s: &str| t(s);
        // Pending at 01:00 and again at 02:00 (one period), drained at 04:00; pending again at
        // 06:00 with nothing after: open.
        assert_eq!(
            pending_remap_intervals(
                &[
                    p("2026-11-01T02:00:00Z"),
                    p("2026-11-01T01:00:00Z"),
                    p("2026-11-01T06:00:00Z")
                ],
                &[p("2026-11-01T00:30:00Z"), p("2026-11-01T04:00:00Z")],
            ),
            vec![
                (p("2026-11-01T01:00:00Z"), Some(p("2026-11-01T04:00:00Z"))),
                (p("2026-11-01T06:00:00Z"), None)
            ]
        );
    }

    #[test]
    fn a_drain_during_a_silence_is_down_then_drained() {
        // Silent 02:00-06:00; drained 04:00-08:00 after an XID failure at 03:30 (inside the
        // lookback); a failure at 01:00 opened the silence. Down outranks drained.
        let failures = [
            NodeFailureMark {
                first_at: t("2026-11-01T01:00:00Z"),
                cause: cause("hardware", "gpu"),
            },
            NodeFailureMark {
                first_at: t("2026-11-01T03:30:00Z"),
                cause: cause("platform", "network"),
            },
        ];
        let sources = [
            src(NodeState::Down, "2026-11-01T02:00:00Z", Some("2026-11-01T06:00:00Z"), 0),
            src(
                NodeState::Drained,
                "2026-11-01T04:00:00Z",
                Some("2026-11-01T08:00:00Z"),
                0,
            ),
        ];
        let l = ledger(
            8,
            t("2026-11-01T00:00:00Z"),
            t("2026-11-01T10:00:00Z"),
            &sources,
            &failures,
        );
        assert_eq!(
            l,
            vec![
                seg(
                    NodeState::InService,
                    "2026-11-01T00:00:00Z",
                    "2026-11-01T02:00:00Z",
                    0,
                    None
                ),
                seg(
                    NodeState::Down,
                    "2026-11-01T02:00:00Z",
                    "2026-11-01T06:00:00Z",
                    8,
                    Some(cause("hardware", "gpu"))
                ),
                seg(
                    NodeState::Drained,
                    "2026-11-01T06:00:00Z",
                    "2026-11-01T08:00:00Z",
                    8,
                    Some(cause("platform", "network"))
                ),
                seg(
                    NodeState::InService,
                    "2026-11-01T08:00:00Z",
                    "2026-11-01T10:00:00Z",
                    0,
                    None
                ),
            ]
        );
    }

    #[test]
    fn repair_counts_removed_gpus_unless_the_node_is_out() {
        // One GPU removed 00:00-10:00, a second 02:00-04:00; drained 06:00-07:00 (whole node out,
        // state in repair by precedence); degraded 09:00-12:00; retired at 11:00.
        let sources = [
            src(
                NodeState::InRepair,
                "2026-11-01T00:00:00Z",
                Some("2026-11-01T10:00:00Z"),
                1,
            ),
            src(
                NodeState::InRepair,
                "2026-11-01T02:00:00Z",
                Some("2026-11-01T04:00:00Z"),
                1,
            ),
            src(
                NodeState::Drained,
                "2026-11-01T06:00:00Z",
                Some("2026-11-01T07:00:00Z"),
                0,
            ),
            src(NodeState::Degraded, "2026-11-01T09:00:00Z", None, 0),
            src(NodeState::Retired, "2026-11-01T11:00:00Z", None, 0),
        ];
        let l = ledger(4, t("2026-11-01T00:00:00Z"), t("2026-11-01T12:00:00Z"), &sources, &[]);
        assert_eq!(
            l,
            vec![
                seg(
                    NodeState::InRepair,
                    "2026-11-01T00:00:00Z",
                    "2026-11-01T02:00:00Z",
                    1,
                    None
                ),
                seg(
                    NodeState::InRepair,
                    "2026-11-01T02:00:00Z",
                    "2026-11-01T04:00:00Z",
                    2,
                    None
                ),
                seg(
                    NodeState::InRepair,
                    "2026-11-01T04:00:00Z",
                    "2026-11-01T06:00:00Z",
                    1,
                    None
                ),
                seg(
                    NodeState::InRepair,
                    "2026-11-01T06:00:00Z",
                    "2026-11-01T07:00:00Z",
                    4,
                    None
                ),
                seg(
                    NodeState::InRepair,
                    "2026-11-01T07:00:00Z",
                    "2026-11-01T09:00:00Z",
                    1,
                    None
                ),
                seg(
                    NodeState::InRepair,
                    "2026-11-01T09:00:00Z",
                    "2026-11-01T10:00:00Z",
                    1,
                    None
                ),
                seg(
                    NodeState::Degraded,
                    "2026-11-01T10:00:00Z",
                    "2026-11-01T11:00:00Z",
                    0,
                    None
                ),
                seg(
                    NodeState::Retired,
                    "2026-11-01T11:00:00Z",
                    "2026-11-01T12:00:00Z",
                    4,
                    None
                ),
            ]
            .into_iter()
            .fold(Vec::<Segment>::new(), |mut v, s| {
                // 07:00-09:00 and 09:00-10:00 are one interval: nothing changed at 09:00 for the
                // winning state (degraded is below in repair).
                match v.last_mut() {
                    Some(l) if l.state == s.state && l.gpus_out == s.gpus_out && l.end == s.start => l.end = s.end,
                    _ => v.push(s),
                }
                v
            })
        );
    }

    #[test]
    fn cause_is_the_latest_failure_within_the_lookback() {
        let f = |at: &str, cat: &str| NodeFailureMark {
            first_at: t(at),
            cause: cause(cat, "x"),
        };
        let failures = [f("2026-11-01T00:00:00Z", "hardware"), f("2026-11-02T00:30:00Z", "user")];
        let d = NodeState::Drained;
        assert_eq!(
            attribute(d, t("2026-11-02T00:00:00Z"), &failures),
            Some(cause("hardware", "x"))
        );
        assert_eq!(attribute(d, t("2026-11-02T00:29:59Z"), &failures), None);
        assert_eq!(
            attribute(d, t("2026-11-02T00:30:00Z"), &failures),
            Some(cause("user", "x"))
        );
        // A repair looks back a week.
        assert_eq!(
            attribute(NodeState::InRepair, t("2026-11-07T23:00:00Z"), &failures[..1]),
            Some(cause("hardware", "x"))
        );
    }

    #[test]
    fn availability_per_day_and_cause() {
        // 8 GPUs installed from Nov 1 12:00; drained Nov 2 06:00-18:00 (hardware/gpu); one GPU in
        // repair from Nov 2 12:00 to Nov 3 12:00 (unattributed); degraded Nov 3 00:00-06:00.
        let hw = cause("hardware", "gpu");
        let segments = ledger(
            8,
            t("2026-11-01T12:00:00Z"),
            t("2026-11-04T00:00:00Z"),
            &[
                StateSource {
                    cause: Some(hw.clone()),
                    ..src(
                        NodeState::Drained,
                        "2026-11-02T06:00:00Z",
                        Some("2026-11-02T18:00:00Z"),
                        0,
                    )
                },
                src(
                    NodeState::InRepair,
                    "2026-11-02T12:00:00Z",
                    Some("2026-11-03T12:00:00Z"),
                    1,
                ),
                src(
                    NodeState::Degraded,
                    "2026-11-03T00:00:00Z",
                    Some("2026-11-03T06:00:00Z"),
                    0,
                ),
            ],
            &[],
        );
        let n = NodeLedger {
            key: "c1".into(),
            gpu_count: 8,
            since: t("2026-11-01T12:00:00Z"),
            retired_at: None,
            segments,
        };
        let p = availability(
            &[n],
            AvailabilityPeriod::Day,
            t("2026-11-01T00:00:00Z"),
            t("2026-11-04T00:00:00Z"),
        );
        assert_eq!(p.len(), 3);
        // Nov 1: 12 h x 8 installed, nothing lost.
        assert_eq!(
            (p[0].installed_gpu_hours, p[0].lost_gpu_hours, p[0].availability),
            (96.0, 0.0, Some(1.0))
        );
        // Nov 2: 192 installed; drained 06-12 (8 GPUs, drained wins) and 12-18 (in repair wins
        // by precedence but the whole node is out: 8 GPUs, cause of the repair: none); 18-24 one
        // GPU in repair. Lost: 48 drained + 48 + 6 in repair = 102.
        assert_eq!(p[1].installed_gpu_hours, 192.0);
        assert_eq!(p[1].lost_gpu_hours, 102.0);
        assert_eq!(p[1].lost_by_state[0].gpu_hours, 48.0);
        assert_eq!(p[1].lost_by_state[2].gpu_hours, 54.0);
        assert_eq!(p[1].availability, Some(round6(90.0 / 192.0)));
        assert_eq!(
            p[1].lost_by_cause,
            vec![
                CauseHours {
                    category: "unattributed".into(),
                    component: "unknown".into(),
                    gpu_hours: 54.0
                },
                CauseHours {
                    category: "hardware".into(),
                    component: "gpu".into(),
                    gpu_hours: 48.0
                },
            ]
        );
        // Nov 3: one GPU in repair 00-12 (in repair outranks degraded), degraded never wins.
        assert_eq!((p[2].lost_gpu_hours, p[2].degraded_gpu_hours), (12.0, 0.0));
    }

    #[test]
    fn months_and_weeks_cut_at_their_starts() {
        let s = AvailabilityPeriod::Month.spans(t("2026-10-15T00:00:00Z"), t("2026-12-02T00:00:00Z"));
        assert_eq!(
            s.iter().map(|x| (x.0, x.1, x.2)).collect::<Vec<_>>(),
            vec![
                (
                    NaiveDate::from_ymd_opt(2026, 10, 1).unwrap(),
                    t("2026-10-15T00:00:00Z"),
                    t("2026-11-01T00:00:00Z")
                ),
                (
                    NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
                    t("2026-11-01T00:00:00Z"),
                    t("2026-12-01T00:00:00Z")
                ),
                (
                    NaiveDate::from_ymd_opt(2026, 12, 1).unwrap(),
                    t("2026-12-01T00:00:00Z"),
                    t("2026-12-02T00:00:00Z")
                ),
            ]
        );
        // 2026-11-04 is a Wednesday.
        assert_eq!(
            AvailabilityPeriod::Week.start_of(t("2026-11-04T10:00:00Z")),
            NaiveDate::from_ymd_opt(2026, 11, 2).unwrap()
        );
    }

    #[test]
    fn incidents_and_their_stages() {
        let f1 = Cause {
            failure_id: Uuid::from_u128(1),
            category: "hardware".into(),
            component: "gpu".into(),
        };
        let f2 = Cause {
            failure_id: Uuid::from_u128(2),
            ..f1.clone()
        };
        // F1 (first signal 10:00): drained 12:00-18:00, a GPU in repair Nov 2 12:00 to Nov 3 12:00.
        // F2 (first signal Nov 4 00:00): down from 01:00, still at the end (Nov 10).
        let segs = vec![
            seg(
                NodeState::Drained,
                "2026-11-01T12:00:00Z",
                "2026-11-01T18:00:00Z",
                8,
                Some(f1.clone()),
            ),
            seg(
                NodeState::InService,
                "2026-11-01T18:00:00Z",
                "2026-11-02T12:00:00Z",
                0,
                None,
            ),
            seg(
                NodeState::InRepair,
                "2026-11-02T12:00:00Z",
                "2026-11-03T12:00:00Z",
                1,
                Some(f1.clone()),
            ),
            seg(
                NodeState::InService,
                "2026-11-03T12:00:00Z",
                "2026-11-04T01:00:00Z",
                0,
                None,
            ),
            seg(
                NodeState::Down,
                "2026-11-04T01:00:00Z",
                "2026-11-10T00:00:00Z",
                8,
                Some(f2.clone()),
            ),
        ];
        let firsts = BTreeMap::from([
            (f1.failure_id, t("2026-11-01T10:00:00Z")),
            (f2.failure_id, t("2026-11-04T00:00:00Z")),
        ]);
        let mut inc = incidents("c1", "n1", &segs, &firsts, t("2026-11-10T00:00:00Z"));
        assert_eq!(inc.len(), 2);
        assert_eq!(
            (
                inc[0].detect_hours,
                inc[0].drain_hours,
                inc[0].repair_hours,
                inc[0].return_hours,
                inc[0].open_hours
            ),
            (2.0, Some(2.0), Some(24.0), Some(48.0), None)
        );
        assert_eq!(
            (
                inc[1].detect_hours,
                inc[1].drain_hours,
                inc[1].return_hours,
                inc[1].open_hours
            ),
            (1.0, None, None, Some(143.0))
        );
        let stats = pipeline(&mut inc);
        // One cause: return p90 = 48 h (one closed incident); the open one (143 h) is stuck.
        assert_eq!(
            (
                stats.len(),
                stats[0].incidents,
                stats[0].open,
                stats[0].return_hours.p90
            ),
            (1, 2, 1, Some(48.0))
        );
        assert_eq!(stats[0].detect_hours.median, Some(1.5));
        assert!(inc[1].stuck && !inc[0].stuck);
    }
}
