//! Availability and the fleet now: each node's state ledger (`analytics::availability`) from the
//! drains, silence and degradation alerts, repairs, retirements and failures storage holds.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::{Computed, computed};
use crate::analytics::availability::{
    self as a, AvailabilityPeriod, AvailabilityPoint, Cause, Incident, NodeFailureMark, NodeLedger, NodeState,
    PipelineStats, Segment, StateSource,
};
use crate::analytics::headline::round6;
use crate::domain::window::Window;
use crate::storage::availability::{self as store, Repair};
use crate::storage::{failure_stats, lifecycle, nodes};

/// What the availability is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AvailabilityBy {
    Cluster,
    Generation,
    Group,
}

impl AvailabilityBy {
    fn as_str(self) -> &'static str {
        match self {
            AvailabilityBy::Cluster => "cluster",
            AvailabilityBy::Generation => "generation",
            AvailabilityBy::Group => "group",
        }
    }
}

/// A node of the inventory with its ledger over a window.
pub struct LedgerNode {
    pub row: nodes::ServiceRow,
    pub segments: Vec<Segment>,
}

type NodeKey = (String, String);

/// The ledgers, the repairs read and each node's failures (for causes).
pub type Ledgers = (Vec<LedgerNode>, Vec<Repair>, HashMap<NodeKey, Vec<NodeFailureMark>>);

/// Every node's ledger over [from, to) (from its installation when later).
pub async fn ledgers(
    db: &PgPool,
    cluster: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Ledgers, sqlx::Error> {
    let (inventory, transitions, alerts, repairs, remaps) = tokio::try_join!(
        nodes::service_periods(db, cluster),
        lifecycle::transitions(db, from, to, cluster, None),
        store::state_alerts(db, cluster, from, to),
        store::repairs(db, cluster, from, to),
        store::pending_remaps(db, cluster, to),
    )?;
    let mut sources: HashMap<NodeKey, Vec<StateSource>> = HashMap::new();
    let mut push = |cluster: &str, host: &str, s: StateSource| {
        sources
            .entry((cluster.to_string(), host.to_string()))
            .or_default()
            .push(s)
    };
    let source = |state, start, end, gpus| StateSource {
        state,
        start,
        end,
        gpus,
        cause: None,
    };
    let mut marks: BTreeMap<NodeKey, Vec<a::DrainMark>> = BTreeMap::new();
    for t in transitions {
        marks.entry((t.cluster, t.hostname)).or_default().push(a::DrainMark {
            at: t.at,
            drained: t.state == "drained",
            failure: t.failure_id,
        });
    }
    // When a node was taken out: what ends a pending row remap.
    let mut taken_out: HashMap<NodeKey, Vec<DateTime<Utc>>> = HashMap::new();
    let mut named: Vec<(NodeKey, a::DrainedInterval)> = Vec::new();
    for (key, m) in &marks {
        for d in a::drained_intervals(m) {
            taken_out.entry(key.clone()).or_default().push(d.start);
            if d.failure.is_some() {
                named.push((key.clone(), d));
            } else {
                push(&key.0, &key.1, source(NodeState::Drained, d.start, d.end, 0));
            }
        }
    }
    for al in &alerts {
        let (state, host) = match al.kind.as_str() {
            "silence" => (NodeState::Down, al.subject.as_str()),
            "lemon_node" => (NodeState::Degraded, al.subject.as_str()),
            // A slot names its node; a part alone does not.
            _ => match al.subject.strip_prefix("slot:").and_then(|s| s.rsplit_once('/')) {
                Some((host, _)) => (NodeState::Degraded, host),
                None => continue,
            },
        };
        push(&al.cluster, host, source(state, al.starts_at, al.ends_at, 0));
    }
    for r in &repairs {
        taken_out
            .entry((r.cluster.clone(), r.hostname.clone()))
            .or_default()
            .push(r.removed_at);
        push(
            &r.cluster,
            &r.hostname,
            source(NodeState::InRepair, r.removed_at, r.refilled_at, 1),
        );
    }
    let mut pending: BTreeMap<NodeKey, Vec<DateTime<Utc>>> = BTreeMap::new();
    for r in remaps {
        pending.entry((r.cluster, r.hostname)).or_default().push(r.at);
    }
    for (key, at) in &pending {
        let out = taken_out.get(key).map_or(&[][..], |v| v.as_slice());
        for (start, end) in a::pending_remap_intervals(at, out) {
            // Ended before the window: nothing to say about it.
            if end.is_none_or(|e| e > from) {
                push(&key.0, &key.1, source(NodeState::Degraded, start, end, 0));
            }
        }
    }
    for n in &inventory {
        if let Some(at) = n.retired_at {
            push(&n.cluster, &n.hostname, source(NodeState::Retired, at, None, 0));
        }
    }
    // Each source's cause candidate: its node's latest failure within the lookback before it
    // began. These are all `attribute` can pick (a failure later than a source's candidate and
    // inside its lookback would have been its candidate), so the ledger reads one failure per
    // source instead of every failure of the nodes.
    let mut keys: Vec<(&str, &str, DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    for ((c, h), list) in &sources {
        for s in list {
            let lookback = if s.state == NodeState::InRepair {
                a::REPAIR_CAUSE_LOOKBACK_HOURS
            } else {
                a::CAUSE_LOOKBACK_HOURS
            };
            keys.push((c.as_str(), h.as_str(), s.start - Duration::hours(lookback), s.start));
        }
    }
    keys.sort();
    keys.dedup();
    let clusters: Vec<&str> = keys.iter().map(|k| k.0).collect();
    let hosts: Vec<&str> = keys.iter().map(|k| k.1).collect();
    let earliest: Vec<DateTime<Utc>> = keys.iter().map(|k| k.2).collect();
    let starts: Vec<DateTime<Utc>> = keys.iter().map(|k| k.3).collect();
    let (named_clusters, named_ids): (Vec<&str>, Vec<uuid::Uuid>) = named
        .iter()
        .filter_map(|((c, _), d)| Some((c.as_str(), d.failure?)))
        .unzip();
    let (candidates, of_drains) = tokio::try_join!(
        failure_stats::latest_before(db, &clusters, &hosts, &earliest, &starts),
        failure_stats::by_ids(db, &named_clusters, &named_ids),
    )?;
    let mark = |f: &failure_stats::NodeFailure| NodeFailureMark {
        first_at: f.first_at,
        cause: Cause {
            failure_id: f.id,
            category: f.category.clone(),
            component: f.component.clone(),
        },
    };
    let mut failures: HashMap<NodeKey, Vec<NodeFailureMark>> = HashMap::new();
    for f in &candidates {
        let of_node = failures.entry((f.cluster.clone(), f.root_node.clone())).or_default();
        if !of_node.iter().any(|x| x.cause.failure_id == f.id) {
            of_node.push(mark(f));
        }
    }
    // A drain recorded with its failure takes that failure as its cause, and the failure counts
    // as one of the drained node's (for its incident) wherever its root node was.
    let by_id: HashMap<uuid::Uuid, NodeFailureMark> = of_drains.iter().map(|f| (f.id, mark(f))).collect();
    for (key, d) in named {
        let found = d.failure.and_then(|id| by_id.get(&id));
        if let Some(m) = found {
            let of_node = failures.entry(key.clone()).or_default();
            if !of_node.iter().any(|x| x.cause.failure_id == m.cause.failure_id) {
                of_node.push(m.clone());
            }
        }
        let mut s = source(NodeState::Drained, d.start, d.end, 0);
        s.cause = found.map(|m| m.cause.clone());
        sources.entry(key).or_default().push(s);
    }
    let out = inventory
        .into_iter()
        .filter(|n| n.in_service_since < to)
        .map(|row| {
            let key = (row.cluster.clone(), row.hostname.clone());
            let segments = a::ledger(
                row.gpu_count.max(0) as u32,
                row.in_service_since.max(from),
                to,
                sources.get(&key).map_or(&[][..], |v| v.as_slice()),
                failures.get(&key).map_or(&[][..], |v| v.as_slice()),
            );
            LedgerNode { row, segments }
        })
        .collect();
    Ok((out, repairs, failures))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AvailabilityResponse {
    pub window: Computed,
    /// cluster | generation | group
    pub by: String,
    /// day | week | month
    pub period: String,
    /// One point per period and key, periods in order.
    pub points: Vec<AvailabilityPoint>,
    pub definitions: String,
}

const AVAILABILITY_DEFINITIONS: &str = "Installed GPU-hours: GPUs x hours between a node's service start and its retirement, inside \
the period and window. Lost GPU-hours: GPUs x hours of drained, down (silent) and in-repair intervals of each node's state ledger \
(all the node's GPUs while drained or down; the removed GPUs only while just in repair). Available = installed - lost; availability = \
available / installed. Degraded GPU-hours (a part or lemon alert firing, a row remap pending until the node is next drained or a part removed) count as \
available and are listed apart. Overlapping sources \
resolve by precedence retired > in_repair > down > drained > degraded > in_service; the cause of an interval is the failure its drain was \
recorded with, else the latest failure of the node within 24 h before it opened (7 days for a repair), else unattributed. Periods are UTC days, ISO weeks from Monday or \
calendar months; the first and last may be partial. Figures are exact sums over the ledger, not estimates.";

pub async fn availability(
    db: &PgPool,
    w: &Window,
    by: AvailabilityBy,
    period: AvailabilityPeriod,
) -> Result<AvailabilityResponse, sqlx::Error> {
    let ((nodes, _, _), window) = tokio::try_join!(ledgers(db, w.cluster(), w.from, w.to), computed(db, w))?;
    Ok(availability_of(nodes, window, w, by, period))
}

fn availability_of(
    nodes: Vec<LedgerNode>,
    window: Computed,
    w: &Window,
    by: AvailabilityBy,
    period: AvailabilityPeriod,
) -> AvailabilityResponse {
    let ledgers: Vec<NodeLedger> = nodes
        .into_iter()
        .map(|n| NodeLedger {
            key: match by {
                AvailabilityBy::Cluster => n.row.cluster,
                AvailabilityBy::Generation => n.row.gpu_generation,
                AvailabilityBy::Group => n.row.group_label.unwrap_or_else(|| "unlabelled".into()),
            },
            gpu_count: n.row.gpu_count.max(0) as u32,
            since: n.row.in_service_since,
            retired_at: n.row.retired_at,
            segments: n.segments,
        })
        .collect();
    AvailabilityResponse {
        window,
        by: by.as_str().into(),
        period: period.as_str().into(),
        points: a::availability(&ledgers, period, w.from, w.to),
        definitions: AVAILABILITY_DEFINITIONS.into(),
    }
}

/// Availability by cluster and the repair pipeline over one window, from one read of the ledgers
/// (the report shows both).
pub async fn availability_and_pipeline(
    db: &PgPool,
    w: &Window,
    period: AvailabilityPeriod,
) -> Result<(AvailabilityResponse, RepairPipelineResponse), sqlx::Error> {
    let ((nodes, _, failures), window) = tokio::try_join!(ledgers(db, w.cluster(), w.from, w.to), computed(db, w))?;
    let pipeline = pipeline_of(&nodes, &failures, window.clone(), w);
    Ok((
        availability_of(nodes, window, w, AvailabilityBy::Cluster, period),
        pipeline,
    ))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StateNow {
    pub state: NodeState,
    pub nodes: u64,
    /// GPUs out of service (0 for degraded: they serve).
    pub gpus: u64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CauseNow {
    pub state: NodeState,
    /// Category of the failure that opened the state; `unattributed` when none.
    pub category: String,
    pub component: String,
    pub gpus: u64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NodeNow {
    pub cluster: String,
    pub hostname: String,
    pub state: NodeState,
    /// Since when the node has been in this state (within the 30 days before `as_of`).
    pub since: DateTime<Utc>,
    pub gpus_out: u32,
    pub cause: Option<Cause>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OpenRepair {
    pub cluster: String,
    pub hostname: String,
    pub gpu_index: Option<i32>,
    pub part: String,
    /// failed | rma
    pub reason: String,
    pub ticket: Option<String>,
    pub removed_at: DateTime<Utc>,
    pub age_hours: f64,
    /// The node's failure the removal is attributed to (7 days back).
    pub cause: Option<Cause>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FleetNowResponse {
    pub at: DateTime<Utc>,
    pub cluster: Option<String>,
    /// GPUs of the nodes installed and not retired.
    pub installed_gpus: u64,
    pub out_of_service_gpus: u64,
    /// Every state but in service, each listed.
    pub by_state: Vec<StateNow>,
    /// Out-of-service GPUs by state and cause, most first.
    pub by_cause: Vec<CauseNow>,
    /// Nodes not in service, longest in their state first.
    pub nodes: Vec<NodeNow>,
    /// Slots empty at that moment after a failed or RMA removal, oldest first (at most `limit`).
    pub oldest_repairs: Vec<OpenRepair>,
    pub definitions: String,
}

const FLEET_NOW_DEFINITIONS: &str = "Each node's state now by its ledger (see /v1/analytics/availability): drained and down nodes \
have all their GPUs out, a node only in repair its removed GPUs, a degraded node none. Causes as in the availability. The ledger \
reads the 30 days before `as_of` (default now): a state older than that shows since 30 days before. Open repairs: GPUs removed failed or for RMA whose slot \
no part has filled since.";

pub async fn fleet_now(
    db: &PgPool,
    cluster: Option<&str>,
    now: DateTime<Utc>,
    limit: usize,
) -> Result<FleetNowResponse, sqlx::Error> {
    let from = now - Duration::days(30);
    // The ledger ends at `to`, exclusive: one millisecond past now holds the state at now.
    let (nodes, repairs, failures) = ledgers(db, cluster, from, now + Duration::milliseconds(1)).await?;
    let mut by_state: BTreeMap<NodeState, (u64, u64)> = BTreeMap::new();
    let mut by_cause: BTreeMap<(NodeState, String, String), u64> = BTreeMap::new();
    let mut installed = 0u64;
    let mut out_nodes = Vec::new();
    for n in &nodes {
        let Some(last) = n.segments.last() else { continue };
        if last.state == NodeState::Retired {
            continue;
        }
        installed += n.row.gpu_count.max(0) as u64;
        if last.state == NodeState::InService {
            continue;
        }
        let e = by_state.entry(last.state).or_default();
        e.0 += 1;
        e.1 += u64::from(last.gpus_out);
        if last.gpus_out > 0 {
            let (cat, comp) = last
                .cause
                .as_ref()
                .map_or(("unattributed".into(), "unknown".into()), |c| {
                    (c.category.clone(), c.component.clone())
                });
            *by_cause.entry((last.state, cat, comp)).or_default() += u64::from(last.gpus_out);
        }
        let since = n
            .segments
            .iter()
            .rev()
            .take_while(|s| s.state == last.state)
            .last()
            .map_or(last.start, |s| s.start);
        out_nodes.push(NodeNow {
            cluster: n.row.cluster.clone(),
            hostname: n.row.hostname.clone(),
            state: last.state,
            since,
            gpus_out: last.gpus_out,
            cause: last.cause.clone(),
        });
    }
    out_nodes.sort_by(|a, b| a.since.cmp(&b.since).then(a.hostname.cmp(&b.hostname)));
    let mut by_cause: Vec<CauseNow> = by_cause
        .into_iter()
        .map(|((state, category, component), gpus)| CauseNow {
            state,
            category,
            component,
            gpus,
        })
        .collect();
    by_cause.sort_by_key(|c| std::cmp::Reverse(c.gpus));
    let mut open: Vec<&Repair> = repairs
        .iter()
        .filter(|r| r.refilled_at.is_none_or(|t| t > now) && r.removed_at <= now)
        .collect();
    open.sort_by(|a, b| a.removed_at.cmp(&b.removed_at).then(a.hostname.cmp(&b.hostname)));
    let oldest_repairs = open
        .into_iter()
        .take(limit)
        .map(|r| OpenRepair {
            cluster: r.cluster.clone(),
            hostname: r.hostname.clone(),
            gpu_index: r.gpu_index,
            part: r.part.clone(),
            reason: r.reason.clone(),
            ticket: r.ticket.clone(),
            removed_at: r.removed_at,
            age_hours: round6((now - r.removed_at).num_milliseconds() as f64 / 3_600_000.0),
            cause: a::attribute(
                NodeState::InRepair,
                r.removed_at,
                failures
                    .get(&(r.cluster.clone(), r.hostname.clone()))
                    .map_or(&[][..], |v| v.as_slice()),
            ),
        })
        .collect();
    Ok(FleetNowResponse {
        at: now,
        cluster: cluster.map(Into::into),
        installed_gpus: installed,
        out_of_service_gpus: by_state.values().map(|v| v.1).sum(),
        by_state: [
            NodeState::Degraded,
            NodeState::Drained,
            NodeState::Down,
            NodeState::InRepair,
        ]
        .into_iter()
        .map(|s| {
            let (nodes, gpus) = by_state.get(&s).copied().unwrap_or((0, 0));
            StateNow { state: s, nodes, gpus }
        })
        .collect(),
        by_cause,
        nodes: out_nodes,
        oldest_repairs,
        definitions: FLEET_NOW_DEFINITIONS.into(),
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RepairPipelineResponse {
    pub window: Computed,
    /// Stage statistics per cause (`category/component`).
    pub by_cause: Vec<PipelineStats>,
    /// Stage statistics per cluster.
    pub by_cluster: Vec<PipelineStats>,
    /// Every incident of the window (failure first signal inside it), oldest first.
    pub incidents: Vec<Incident>,
    /// The open incidents open longer than the p90 return time of their cause, oldest first.
    pub stuck: Vec<Incident>,
    pub definitions: String,
}

const PIPELINE_DEFINITIONS: &str = "An incident is a failure (first signal inside the window) that is the cause of at least one \
drained, down or in-repair interval of its node's ledger (see /v1/analytics/availability). Stages in hours: detect = first signal \
-> first such interval; drain = first signal -> drained (null if never drained); repair = first repair interval start -> last \
repair interval end (null without one or while open); return = first interval start -> last interval end (null while open). \
An incident still out at the window's end is open; stuck = open longer than the p90 return time of its cause's closed incidents. \
Statistics: count, median, p90 (linear interpolation between ranks) and max.";

pub async fn repair_pipeline(db: &PgPool, w: &Window) -> Result<RepairPipelineResponse, sqlx::Error> {
    let ((nodes, _, failures), window) = tokio::try_join!(ledgers(db, w.cluster(), w.from, w.to), computed(db, w))?;
    Ok(pipeline_of(&nodes, &failures, window, w))
}

fn pipeline_of(
    nodes: &[LedgerNode],
    failures: &HashMap<NodeKey, Vec<NodeFailureMark>>,
    window: Computed,
    w: &Window,
) -> RepairPipelineResponse {
    let mut incidents = Vec::new();
    for n in nodes {
        let firsts: BTreeMap<uuid::Uuid, DateTime<Utc>> = failures
            .get(&(n.row.cluster.clone(), n.row.hostname.clone()))
            .into_iter()
            .flatten()
            .filter(|f| f.first_at >= w.from && f.first_at < w.to)
            .map(|f| (f.cause.failure_id, f.first_at))
            .collect();
        incidents.extend(a::incidents(
            &n.row.cluster,
            &n.row.hostname,
            &n.segments,
            &firsts,
            w.to,
        ));
    }
    incidents.sort_by(|x, y| x.first_at.cmp(&y.first_at).then(x.hostname.cmp(&y.hostname)));
    let by_cause = a::pipeline(&mut incidents);
    let mut clusters: Vec<String> = incidents.iter().map(|i| i.cluster.clone()).collect();
    clusters.sort();
    clusters.dedup();
    let by_cluster = clusters
        .into_iter()
        .map(|c| a::pipeline_stats(c.clone(), incidents.iter().filter(move |i| i.cluster == c)))
        .collect();
    let stuck = incidents.iter().filter(|i| i.stuck).cloned().collect();
    RepairPipelineResponse {
        window,
        by_cause,
        by_cluster,
        incidents,
        stuck,
        definitions: PIPELINE_DEFINITIONS.into(),
    }
}
