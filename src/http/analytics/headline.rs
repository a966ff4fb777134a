//! The headline analytics: failure mix, MTBF per group, root-cause ratios (reader role).

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;

use super::{WindowQuery, bad};
use crate::analytics::headline::MixKey;
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::headline::{self as queries, FailureMixResponse, MtbfResponse, RootCausesResponse};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MixQuery {
    /// gpu_generation (default), gpu_model or cluster.
    pub by: Option<MixBy>,
}

/// What the failure mix groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MixBy {
    #[serde(alias = "generation")]
    GpuGeneration,
    #[serde(alias = "model")]
    GpuModel,
    Cluster,
}

/// Failure mix by GPU generation, GPU model or cluster, normalised per 1,000 GPU-days.
#[utoipa::path(
    get, path = "/v1/analytics/failure-mix", tag = "analytics", params(WindowQuery, MixQuery),
    responses(
        (status = 200, description = "Per group: GPUs in service, GPU-days of exposure, failures, failures per 1,000 GPU-days, and the breakdown by category and component", body = FailureMixResponse,
         example = json!({
             "window": {"from": "2026-11-01T00:00:00Z", "to": "2026-12-01T00:00:00Z", "cluster": null, "catalog_version": 1},
             "by": "gpu_generation",
             "rows": [{"key": "ampere", "gpus_in_service": 296, "gpu_days": 8880.0, "failures": 75,
                       "failures_per_1000_gpu_days": 8.445946,
                       "by_category": [{"name": "user", "failures": 39, "share": 0.52},
                                       {"name": "hardware", "failures": 19, "share": 0.253333},
                                       {"name": "platform", "failures": 17, "share": 0.226667}],
                       "by_component": [{"name": "user/code", "failures": 13, "share": 0.173333}]}],
             "definitions": "..."})),
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
    let key = match mq.by.unwrap_or(MixBy::GpuGeneration) {
        MixBy::GpuGeneration => MixKey::Generation,
        MixBy::GpuModel => MixKey::Model,
        MixBy::Cluster => MixKey::Cluster,
    };
    Ok(Json(
        queries::failure_mix(&ctx.read_db, &wq.window(&caller)?, key).await?,
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MtbfQuery {
    /// GPUs per group for nodes without a group label (default 128).
    #[param(minimum = 1, maximum = 1000000)]
    pub group_size: Option<u32>,
    /// Also project the MTBF of a job spanning this many GPUs.
    #[param(minimum = 1, maximum = 1000000)]
    pub job_gpus: Option<u64>,
}

/// MTBF per 128-GPU group (or any group size), fleet-wide per-GPU MTBF and the projection for a job of N GPUs.
#[utoipa::path(
    get, path = "/v1/analytics/mtbf", tag = "analytics", params(WindowQuery, MtbfQuery),
    responses(
        (status = 200, description = "MTBF per group with 95% chi-square intervals, fleet-wide MTBF per GPU and the job projection", body = MtbfResponse,
         example = json!({
             "window": {"from": "2026-11-01T00:00:00Z", "to": "2026-12-01T00:00:00Z", "cluster": null, "catalog_version": 1},
             "group_size": 128, "confidence": 0.95,
             "groups": [{"group": "train-a/a100-a-g00", "cluster": "train-a", "packed": false, "nodes": 15, "gpus": 120,
                         "exposure_hours": 720.0, "gpu_hours": 86400.0, "failures": 27, "mtbf_hours": 26.666667,
                         "mtbf_lower_hours": 18.328267, "mtbf_upper_hours": 40.464965, "failures_per_week": 6.3}],
             "fleet": {"gpus": 1968, "gpu_hours": 1409596.355316, "failures": 323, "mtbf_per_gpu_hours": 4364.075403,
                       "mtbf_per_gpu_lower_hours": 3913.189401, "mtbf_per_gpu_upper_hours": 4882.029435,
                       "median_group_mtbf_hours": 40.0},
             "job_projection": null, "unattributed_failures": 75, "definitions": "..."})),
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
        return Err(bad("group_size must be between 1 and 1,000,000"));
    }
    if mq.job_gpus.is_some_and(|n| !(1..=1_000_000).contains(&n)) {
        return Err(bad("job_gpus must be between 1 and 1,000,000"));
    }
    Ok(Json(
        queries::mtbf(&ctx.read_db, &wq.window(&caller)?, group_size, mq.job_gpus).await?,
    ))
}

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
    Ok(Json(queries::root_causes(&ctx.read_db, &wq.window(&caller)?).await?))
}
