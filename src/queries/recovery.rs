//! Recovery: downtime per failure and by phase, transient share, drains, GPU-hours lost, ETTR.

use std::collections::HashMap;

use chrono::Duration;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::{Computed, computed, inputs};
use crate::analytics::cost::{self as c, CauseRecovery, FleetEttr, JobEttr, RecoveryFailure, RecoverySummary};
use crate::analytics::headline::NodeService;
use crate::analytics::headline::round6;
use crate::domain::taxonomy::{Category, Component};
use crate::domain::window::Window;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OutOfService {
    /// Nodes drained at some time in the window.
    pub nodes_drained: u64,
    pub node_hours: f64,
    /// node_hours x the nodes' GPUs (inventory).
    pub gpu_hours: f64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EttrReport {
    pub fleet: FleetEttr,
    /// Worst ETTR first, at most jobs_limit.
    pub jobs: Vec<JobEttr>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RecoveryResponse {
    pub window: Computed,
    /// The root cause the figures are restricted to (the `category` / `component` filters); null: all.
    pub cause: CauseFilter,
    pub summary: RecoverySummary,
    /// Downtime per effective root cause: per category a subtotal row (component null) followed by
    /// one row per component of that category with failures.
    pub by_cause: Vec<CauseRecovery>,
    /// Null when a cause filter is set: node drains are not attributed to a root cause.
    pub out_of_service: Option<OutOfService>,
    pub ettr: EttrReport,
    pub definitions: String,
}

/// A restriction to the failures of one effective root cause.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, ToSchema)]
pub struct CauseFilter {
    pub category: Option<Category>,
    pub component: Option<Component>,
}

impl CauseFilter {
    pub fn is_any(&self) -> bool {
        self.category.is_none() && self.component.is_none()
    }
}

const RECOVERY_DEFINITIONS: &str = "Failures are those whose first signal is in [from, to), with their lifecycle (PATCH \
/v1/failures/{id}). Downtime of a failure: the sum of its recorded recovery phases (detection/hang, resubmission, set-up, \
recomputation; Unicron's GPT-3 example 30 + 9 + 14 + 15 = 68 min), else resolved_at - first signal, else unknown (not in the \
statistics; counted in failures_without_downtime). p90 interpolates linearly between ranks. Phase statistics are over the failures \
that recorded the phase; share_of_phase_minutes = phase minutes / all phase minutes. Transient: resolved by a plain restart \
(resolution transient_restart), else, without a recorded resolution, the catalog's transient flag of the root signal (Unicron: 73%). \
Hardware failures needing a drain: hardware by the effective root cause (post-mortem over automatic) whose resolution is drained, \
else, without one, whose root node was drained (POST /v1/nodes/{cluster}/{hostname}/state or a node_drain signal) within \
drain_horizon_hours of the first signal (Unicron: 37%). GPU-hours lost: downtime hours x GPUs of the job (jobs table, else the \
inventory GPUs of the failure's nodes). Out of service: drained-to-returned time of nodes inside the window. ETTR (effective \
training time ratio, Meta 2024): productive time / available wall-clock time of a job, i.e. (wall-clock - downtime) / wall-clock, \
with wall-clock from the scheduler's start (queueing excluded) to its end, clipped to the window, and downtime that of the failures \
naming the job (capped at its wall-clock). Fleet ETTR weights jobs by GPUs: sum(GPUs x productive) / sum(GPUs x wall-clock). Failures \
of unknown downtime count 0, so an ETTR with failures_without_downtime > 0 is an upper bound. by_cause: the same downtime per \
effective root cause (post-mortem over automatic), one subtotal row per category (component null) then a row per component; \
count is the failures of the cause with a known downtime. category / component restrict every failure figure (summary, by_cause, \
ETTR's downtime) to the failures of that effective cause; out_of_service is then null (drains are not attributed to a cause).";

pub struct RecoveryData {
    pub failures: Vec<RecoveryFailure>,
    pub summary: RecoverySummary,
    pub by_cause: Vec<CauseRecovery>,
    pub jobs: Vec<JobEttr>,
    pub fleet: FleetEttr,
    pub out: OutOfService,
}

/// `nodes`: the inventory of the window's cluster (read once by the caller).
pub async fn recovery_data(
    db: &PgPool,
    w: &Window,
    nodes: &[NodeService],
    horizon: Duration,
) -> Result<RecoveryData, sqlx::Error> {
    recovery_data_of(db, w, nodes, horizon, CauseFilter::default()).await
}

/// [`recovery_data`] over the failures of one effective root cause.
pub async fn recovery_data_of(
    db: &PgPool,
    w: &Window,
    nodes: &[NodeService],
    horizon: Duration,
    cause: CauseFilter,
) -> Result<RecoveryData, sqlx::Error> {
    let failures = c::of_cause(
        inputs::recovery_failures(db, w, horizon).await?,
        cause.category.map(Category::as_str),
        cause.component.map(Component::as_str),
    );
    let summary = c::recovery(&failures);
    let by_cause = c::by_cause(&failures);
    let jobs = inputs::jobs_in_window(db, w).await?;
    let (rows, fleet) = c::ettr(&jobs, &failures, w.from, w.to);
    let gpus: HashMap<(&str, &str), u32> = nodes
        .iter()
        .map(|n| ((n.cluster.as_str(), n.hostname.as_str()), n.gpu_count))
        .collect();
    let (mut drained, mut node_hours, mut gpu_hours) = (0, 0.0, 0.0);
    for ((cl, host), marks) in super::node_marks(db, w).await? {
        let h = c::out_of_service_hours(&marks, w.from, w.to);
        if h > 0.0 {
            drained += 1;
            node_hours += h;
            gpu_hours += h * f64::from(gpus.get(&(cl.as_str(), host.as_str())).copied().unwrap_or(0));
        }
    }
    let out = OutOfService {
        nodes_drained: drained,
        node_hours: round6(node_hours),
        gpu_hours: round6(gpu_hours),
    };
    Ok(RecoveryData {
        failures,
        summary,
        by_cause,
        jobs: rows,
        fleet,
        out,
    })
}

/// The recovery figures of the window, the `jobs_limit` worst jobs by ETTR, and the failures (for CSV).
pub async fn recovery(
    db: &PgPool,
    w: &Window,
    horizon: Duration,
    jobs_limit: usize,
    cause: CauseFilter,
) -> Result<(RecoveryResponse, Vec<RecoveryFailure>), sqlx::Error> {
    let mut d = recovery_data_of(db, w, &inputs::node_service(db, w).await?, horizon, cause).await?;
    d.jobs.truncate(jobs_limit);
    let body = RecoveryResponse {
        window: computed(db, w).await?,
        cause,
        summary: d.summary,
        by_cause: d.by_cause,
        out_of_service: cause.is_any().then_some(d.out),
        ettr: EttrReport {
            fleet: d.fleet,
            jobs: d.jobs,
        },
        definitions: RECOVERY_DEFINITIONS.into(),
    };
    Ok((body, d.failures))
}
