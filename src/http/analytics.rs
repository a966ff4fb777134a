//! The headline analytics: failure mix, MTBF per group, root-cause ratios (reader role).

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::ApiContext;
use super::extract::{AppQuery, Caller};
use crate::analytics::headline::{
    self, CategoryShare, FleetMtbf, JobProjection, MixKey, MixRow, MtbfGroup, Share, ratio, round6,
};
use crate::domain::auth::Permission;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::storage::analytics::{self as q, MixDimension};

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/analytics/failure-mix", get(failure_mix))
        .route("/v1/analytics/mtbf", get(mtbf))
        .route("/v1/analytics/root-causes", get(root_causes))
}

/// The window every analysis takes. Defaults: `to` = now, `from` = `to` - 30 days.
#[derive(Debug, Deserialize, IntoParams, Clone)]
#[into_params(parameter_in = Query)]
pub struct WindowQuery {
    /// Start of the window (inclusive), RFC 3339.
    pub from: Option<DateTime<Utc>>,
    /// End of the window (exclusive), RFC 3339.
    pub to: Option<DateTime<Utc>>,
    /// Restrict to one cluster.
    pub cluster: Option<String>,
}

/// What a figure was computed over.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Window {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub cluster: Option<String>,
    /// Version of the classification catalog the failures were classified with.
    pub catalog_version: i64,
}

pub fn resolve_window(q: &WindowQuery) -> ApiResult<(DateTime<Utc>, DateTime<Utc>)> {
    let to = q.to.unwrap_or_else(Utc::now);
    let from = q.from.unwrap_or(to - Duration::days(30));
    if from > to {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("from ({from}) is after to ({to})"),
        ));
    }
    Ok((from, to))
}

async fn window(ctx: &ApiContext, q: &WindowQuery) -> ApiResult<Window> {
    let (from, to) = resolve_window(q)?;
    Ok(Window {
        from,
        to,
        cluster: q.cluster.clone(),
        catalog_version: q::catalog_version(&ctx.db).await?,
    })
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MixQuery {
    /// gpu_generation (default), gpu_model or cluster.
    pub by: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MixTotals {
    pub gpus_in_service: u64,
    pub gpu_days: f64,
    pub failures: u64,
    pub failures_per_1000_gpu_days: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FailureMixResponse {
    pub window: Window,
    pub by: String,
    pub rows: Vec<MixRow>,
    pub totals: MixTotals,
    pub definitions: String,
}

const MIX_DEFINITIONS: &str = "A failure is an interruption: signals of the same job (else node) within the correlation window fold \
into one, counted once at its first signal, in the window [from, to). Its group is that of its root-cause node in the inventory \
(else the GPU model named by its root signal; else 'unknown'). GPU-days: sum over nodes of GPUs x days in service inside the window \
(in_service_since to retired_at). Rate: failures / GPU-days x 1,000. Shares are fractions of the row's failures.";

/// Failure mix by GPU generation, GPU model or cluster, normalised per 1,000 GPU-days.
#[utoipa::path(
    get, path = "/v1/analytics/failure-mix", tag = "analytics", params(WindowQuery, MixQuery),
    responses(
        (status = 200, description = "Per group: GPUs in service, GPU-days of exposure, failures, failures per 1,000 GPU-days, and the breakdown by category and component", body = FailureMixResponse),
        (status = 400, description = "Invalid window or `by`", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn failure_mix(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(mq): AppQuery<MixQuery>,
) -> ApiResult<Json<FailureMixResponse>> {
    caller.require(Permission::Query)?;
    let by = mq.by.unwrap_or_else(|| "gpu_generation".into());
    let (key, dim) = match by.as_str() {
        "gpu_generation" | "generation" => (MixKey::Generation, MixDimension::Generation),
        "gpu_model" | "model" => (MixKey::Model, MixDimension::Model),
        "cluster" => (MixKey::Cluster, MixDimension::Cluster),
        other => {
            return Err(ApiError::bad_request(
                "invalid_query",
                format!("by '{other}' is not one of gpu_generation, gpu_model, cluster"),
            ));
        }
    };
    let w = window(&ctx, &wq).await?;
    let nodes = q::node_service(&ctx.db, wq.cluster.as_deref()).await?;
    let counts = q::failure_counts(&ctx.db, dim, w.from, w.to, wq.cluster.as_deref()).await?;
    let rows = headline::failure_mix(&nodes, &counts, key, w.from, w.to);
    let gpu_days: f64 = rows.iter().map(|r| r.gpu_days).sum();
    let failures: u64 = rows.iter().map(|r| r.failures).sum();
    let totals = MixTotals {
        gpus_in_service: rows.iter().map(|r| r.gpus_in_service).sum(),
        gpu_days: round6(gpu_days),
        failures,
        failures_per_1000_gpu_days: (gpu_days > 0.0).then(|| round6(failures as f64 / gpu_days * 1000.0)),
    };
    Ok(Json(FailureMixResponse {
        window: w,
        by,
        rows,
        totals,
        definitions: MIX_DEFINITIONS.into(),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MtbfQuery {
    /// GPUs per group for nodes without a group label (default 128).
    #[param(minimum = 1, maximum = 1000000)]
    pub group_size: Option<u32>,
    /// Also project the MTBF of a job spanning this many GPUs.
    #[param(minimum = 1)]
    pub job_gpus: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MtbfResponse {
    pub window: Window,
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
hostname order within their cluster into `cluster/auto-N` groups of at most group_size GPUs. A group's exposure_hours are its \
GPU-weighted hours in service inside the window (sum of GPUs x hours / GPUs). MTBF = exposure_hours / failures whose root-cause node \
is in the group; failures_per_week = failures / exposure_hours x 168. The 95% interval is the exact chi-square interval for a \
Poisson count over a fixed time: lower = 2T / chi2(0.975; 2r+2), upper = 2T / chi2(0.025; 2r), infinite (null) when r = 0. \
Fleet MTBF per GPU = GPU-hours / failures; a job of N GPUs is projected at MTBF per GPU / N (independent failures, as Meta and \
Unicron report it).";

/// MTBF per 128-GPU group (or any group size), fleet-wide per-GPU MTBF and the projection for a job of N GPUs.
#[utoipa::path(
    get, path = "/v1/analytics/mtbf", tag = "analytics", params(WindowQuery, MtbfQuery),
    responses(
        (status = 200, description = "MTBF per group with 95% chi-square intervals, fleet-wide MTBF per GPU and the job projection", body = MtbfResponse),
        (status = 400, description = "Invalid window, group_size or job_gpus", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn mtbf(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(mq): AppQuery<MtbfQuery>,
) -> ApiResult<Json<MtbfResponse>> {
    caller.require(Permission::Query)?;
    let group_size = mq.group_size.unwrap_or(128);
    if !(1..=1_000_000).contains(&group_size) {
        return Err(ApiError::bad_request(
            "invalid_query",
            "group_size must be between 1 and 1,000,000",
        ));
    }
    if mq.job_gpus == Some(0) {
        return Err(ApiError::bad_request("invalid_query", "job_gpus must be positive"));
    }
    let w = window(&ctx, &wq).await?;
    let nodes = q::node_service(&ctx.db, wq.cluster.as_deref()).await?;
    let (per_node, without_node) = q::failures_per_node(&ctx.db, w.from, w.to, wq.cluster.as_deref()).await?;
    let known: std::collections::HashSet<(&str, &str)> = nodes
        .iter()
        .map(|n| (n.cluster.as_str(), n.hostname.as_str()))
        .collect();
    let unknown_nodes: u64 = per_node
        .iter()
        .filter(|((c, h), _)| !known.contains(&(c.as_str(), h.as_str())))
        .map(|(_, n)| n)
        .sum();
    let (groups, fleet) = headline::mtbf(&nodes, &per_node, group_size, w.from, w.to, 0.95);
    let job_projection = mq.job_gpus.map(|n| headline::project_job(&fleet, n));
    Ok(Json(MtbfResponse {
        window: w,
        group_size,
        confidence: 0.95,
        groups,
        fleet,
        job_projection,
        unattributed_failures: without_node + unknown_nodes,
        definitions: MTBF_DEFINITIONS.into(),
    }))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RootCausesResponse {
    pub window: Window,
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

/// Root-cause ratios: failures per category and component, and the symptom mix.
#[utoipa::path(
    get, path = "/v1/analytics/root-causes", tag = "analytics", params(WindowQuery),
    responses(
        (status = 200, description = "Failures and shares per category and component, and the symptom mix", body = RootCausesResponse),
        (status = 400, description = "Invalid window", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn root_causes(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(wq): AppQuery<WindowQuery>,
) -> ApiResult<Json<RootCausesResponse>> {
    caller.require(Permission::Query)?;
    let w = window(&ctx, &wq).await?;
    let counts = q::cause_counts(&ctx.db, w.from, w.to, wq.cluster.as_deref()).await?;
    let (total, categories) = headline::root_causes(&counts);
    let symptom_counts = q::symptom_counts(&ctx.db, w.from, w.to, wq.cluster.as_deref()).await?;
    let mut symptoms: Vec<Share> = symptom_counts
        .into_iter()
        .map(|(name, failures)| Share {
            share: round6(ratio(failures, total)),
            name,
            failures,
        })
        .collect();
    symptoms.sort_by(|a, b| b.failures.cmp(&a.failures).then_with(|| a.name.cmp(&b.name)));
    Ok(Json(RootCausesResponse {
        window: w,
        failures: total,
        categories,
        symptoms,
        definitions: ROOT_CAUSE_DEFINITIONS.into(),
    }))
}
