//! The headline analytics: failure mix, MTBF per group, root-cause ratios.

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::inputs::{self, MixDimension};
use super::{Computed, computed};
use crate::analytics::headline::{
    self, CategoryShare, FleetMtbf, JobProjection, MixKey, MixRow, MtbfGroup, Share, ratio, round6,
};
use crate::domain::window::Window;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MixTotals {
    pub gpus_in_service: u64,
    pub gpu_days: f64,
    pub failures: u64,
    pub failures_per_1000_gpu_days: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FailureMixResponse {
    pub window: Computed,
    pub by: String,
    pub rows: Vec<MixRow>,
    pub totals: MixTotals,
    pub definitions: String,
}

const MIX_DEFINITIONS: &str = "A failure is an interruption: signals of the same job (else node) within the correlation window fold \
into one, counted once at its first signal, in the window [from, to). Its group is that of its root-cause node in the inventory \
(else the GPU model named by its root signal; else 'unknown'). GPU-days: sum over nodes of GPUs x days in service inside the window \
(in_service_since to retired_at). Rate: failures / GPU-days x 1,000. Shares are fractions of the row's failures.";

pub async fn failure_mix(db: &PgPool, w: &Window, key: MixKey) -> Result<FailureMixResponse, sqlx::Error> {
    let (by, dim) = match key {
        MixKey::Generation => ("gpu_generation", MixDimension::Generation),
        MixKey::Model => ("gpu_model", MixDimension::Model),
        MixKey::Cluster => ("cluster", MixDimension::Cluster),
    };
    let (nodes, counts, window) = tokio::try_join!(
        inputs::node_service(db, w),
        inputs::failure_counts(db, dim, w),
        computed(db, w)
    )?;
    let rows = headline::failure_mix(&nodes, &counts, key, w.from, w.to);
    let gpu_days: f64 = rows.iter().map(|r| r.gpu_days).sum();
    let failures: u64 = rows.iter().map(|r| r.failures).sum();
    let totals = MixTotals {
        gpus_in_service: rows.iter().map(|r| r.gpus_in_service).sum(),
        gpu_days: round6(gpu_days),
        failures,
        failures_per_1000_gpu_days: (gpu_days > 0.0).then(|| round6(failures as f64 / gpu_days * 1000.0)),
    };
    Ok(FailureMixResponse {
        window,
        by: by.into(),
        rows,
        totals,
        definitions: MIX_DEFINITIONS.into(),
    })
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MtbfResponse {
    pub window: Computed,
    pub group_size: u32,
    pub confidence: f64,
    pub groups: Vec<MtbfGroup>,
    pub fleet: FleetMtbf,
    pub job_projection: Option<JobProjection>,
    /// Failures in the window whose root cause has no node of the inventory (not in any group).
    pub unattributed_failures: u64,
    pub definitions: String,
}

const MTBF_DEFINITIONS: &str = "Groups: nodes with a group label form `cluster/label`; unlabelled nodes are packed greedily in natural \
hostname order within their cluster into `cluster/auto-N` groups (from auto-000) of at most group_size GPUs. A group's exposure_hours are its \
GPU-weighted hours in service inside the window (sum of GPUs x hours / GPUs). MTBF = exposure_hours / failures whose root-cause node \
is in the group; failures_per_week = failures / exposure_hours x 168. The 95% interval is the exact chi-square interval for a \
Poisson count over a fixed time: lower = 2T / chi2(0.975; 2r+2), upper = 2T / chi2(0.025; 2r), infinite (null) when r = 0. \
Fleet MTBF per GPU = GPU-hours / failures; a job of N GPUs is projected at MTBF per GPU / N (independent failures, as Meta and \
Unicron report it).";

/// The confidence of every MTBF interval.
pub const MTBF_CONFIDENCE: f64 = 0.95;

pub async fn mtbf(
    db: &PgPool,
    w: &Window,
    group_size: u32,
    job_gpus: Option<u64>,
) -> Result<MtbfResponse, sqlx::Error> {
    // The catalog version beside the inventory and the failure counts (which need the inventory:
    // the rollup's buckets are kept resolved against it).
    let counts = async {
        let inventory = inputs::node_service(db, w).await?;
        let failures = inputs::group_failures(db, w, &inventory).await?;
        Ok::<_, sqlx::Error>((inventory, failures))
    };
    let ((inventory, failures), window) = tokio::try_join!(counts, computed(db, w))?;
    let (groups, fleet) = headline::mtbf(&inventory, &failures, group_size, w.from, w.to, MTBF_CONFIDENCE);
    let job_projection = job_gpus.map(|n| headline::project_job(&fleet, n));
    Ok(MtbfResponse {
        window,
        group_size,
        confidence: MTBF_CONFIDENCE,
        groups,
        fleet,
        job_projection,
        unattributed_failures: failures.unattributed,
        definitions: MTBF_DEFINITIONS.into(),
    })
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RootCausesResponse {
    pub window: Computed,
    pub failures: u64,
    /// hardware, platform, user, unknown (always all four), each with its components.
    pub categories: Vec<CategoryShare>,
    /// What the failures looked like (job_crash, job_hang, ...; `unspecified` when no signal said).
    pub symptoms: Vec<Share>,
    pub definitions: String,
}

const ROOT_CAUSE_DEFINITIONS: &str = "Each failure counts once, with the root cause of its most specific signal: an explicit root \
cause from the sender, else the classification catalog; non-secondary before secondary, hardware over platform over user over \
unknown, any specific cause over an NCCL timeout. share = failures of the category / all failures; share_of_category and \
share_of_all for each component (the literature quotes both).";

pub async fn root_causes(db: &PgPool, w: &Window) -> Result<RootCausesResponse, sqlx::Error> {
    // The counts and the catalog version are independent reads: at once, on two connections.
    let (counts, window) = tokio::try_join!(inputs::cause_counts(db, w), computed(db, w))?;
    let (total, categories) = headline::root_causes(&counts.causes);
    let mut symptoms: Vec<Share> = counts
        .symptoms
        .into_iter()
        .map(|(name, failures)| Share {
            share: round6(ratio(failures, total)),
            name,
            failures,
        })
        .collect();
    symptoms.sort_by(|a, b| b.failures.cmp(&a.failures).then_with(|| a.name.cmp(&b.name)));
    Ok(RootCausesResponse {
        window,
        failures: total,
        categories,
        symptoms,
        definitions: ROOT_CAUSE_DEFINITIONS.into(),
    })
}
