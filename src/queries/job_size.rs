//! Job size: failure rate and MTTF by job size, the largest jobs, and the MTTF projection.

use std::collections::{HashMap, HashSet};

use chrono::Duration;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::{Computed, computed, inputs};
use crate::analytics::cost::{self as c, JobOutcome, LargestJobs, MttfProjection, SizeBucket};
use crate::analytics::headline::NodeService;
use crate::analytics::headline::round6;
use crate::domain::window::Window;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Projection {
    /// Failures whose root node is in the inventory.
    pub node_failures: u64,
    /// Node-days in service in the window.
    pub node_days: f64,
    /// node_failures / node_days.
    pub failures_per_node_day: Option<f64>,
    /// GPUs of the in-service nodes / their number.
    pub gpus_per_node: Option<f64>,
    pub sizes: Vec<MttfProjection>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobSizeResponse {
    pub window: Computed,
    pub jobs: u64,
    pub buckets: Vec<SizeBucket>,
    pub largest: LargestJobs,
    pub projection: Projection,
    pub definitions: String,
}

const JOB_SIZE_DEFINITIONS: &str = "Jobs are those of the jobs table (PUT /v1/jobs) running at some time in [from, to); wall-clock \
is clipped to the window. Buckets by GPUs: 1-8, 9-64, 65-128, 129-512, 513-1023, 1024+. failures = failures of the window naming \
the job; a job failed when the scheduler says so or at least one failure names it; failure_rate = failed_jobs / jobs; mttf_hours = \
job wall-clock hours / failures. largest: the ceil(fraction x jobs) jobs with the most GPUs (ties: longer first) and the share of \
them that failed (Unicron: 43.4% of the 5% most resource-hungry tasks). Projection (Meta 2024): failures per node-day r = failures \
whose root node is in the inventory / node-days in service; a job of N nodes (GPUs / fleet GPUs per node, rounded up) has \
MTTF = 1 / (N x r) days, given in hours.";

const PROJECTED_SIZES: [u64; 8] = [8, 64, 128, 512, 1024, 4096, 16384, 100_000];

pub struct JobSizeData {
    pub jobs: u64,
    pub buckets: Vec<SizeBucket>,
    pub largest: LargestJobs,
    pub projection: Projection,
}

/// `inventory`: the inventory of the window's cluster (read once by the caller).
pub async fn job_size_data(
    db: &PgPool,
    w: &Window,
    inventory: &[NodeService],
    fraction: f64,
) -> Result<JobSizeData, sqlx::Error> {
    let jobs = inputs::jobs_in_window(db, w).await?;
    let failures = inputs::recovery_failures(db, w, Duration::zero()).await?;
    let mut per_job: HashMap<(&str, &str), u64> = HashMap::new();
    for f in &failures {
        if let Some(j) = &f.job_id {
            *per_job.entry((f.cluster.as_str(), j.as_str())).or_default() += 1;
        }
    }
    let outcomes: Vec<JobOutcome> = jobs
        .iter()
        .map(|j| JobOutcome {
            failures: per_job
                .get(&(j.cluster.as_str(), j.job_id.as_str()))
                .copied()
                .unwrap_or(0),
            job: j.clone(),
        })
        .collect();
    let (buckets, largest) = c::job_size(&outcomes, w.from, w.to, fraction);
    let serving = super::in_service(inventory, w);
    let node_days: f64 = serving.iter().map(|n| n.exposure_hours(w.from, w.to) / 24.0).sum();
    let gpus: u64 = serving.iter().map(|n| u64::from(n.gpu_count)).sum();
    let known: HashSet<(&str, &str)> = inventory
        .iter()
        .map(|n| (n.cluster.as_str(), n.hostname.as_str()))
        .collect();
    let (per_node, _) = inputs::failures_per_node(db, w).await?;
    let node_failures: u64 = per_node
        .iter()
        .filter(|((c_, h), _)| known.contains(&(c_.as_str(), h.as_str())))
        .map(|(_, n)| n)
        .sum();
    let rate = (node_days > 0.0).then(|| node_failures as f64 / node_days);
    let gpus_per_node = (!serving.is_empty()).then(|| gpus as f64 / serving.len() as f64);
    let projection = Projection {
        node_failures,
        node_days: round6(node_days),
        failures_per_node_day: rate.map(round6),
        gpus_per_node: gpus_per_node.map(round6),
        sizes: match (rate, gpus_per_node) {
            (Some(r), Some(g)) => c::project_mttf(r, g, &PROJECTED_SIZES),
            _ => Vec::new(),
        },
    };
    Ok(JobSizeData {
        jobs: outcomes.len() as u64,
        buckets,
        largest,
        projection,
    })
}

pub async fn job_size(db: &PgPool, w: &Window, fraction: f64) -> Result<JobSizeResponse, sqlx::Error> {
    let d = job_size_data(db, w, &inputs::node_service(db, w).await?, fraction).await?;
    Ok(JobSizeResponse {
        window: computed(db, w).await?,
        jobs: d.jobs,
        buckets: d.buckets,
        largest: d.largest,
        projection: d.projection,
        definitions: JOB_SIZE_DEFINITIONS.into(),
    })
}
