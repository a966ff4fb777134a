//! `PUT /v1/jobs`: jobs from the scheduler, so failure rates can be given per job and per GPU-hour.

use axum::extract::State;
use axum::routing::{get, put};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiContext;
use super::caller::Caller;
use super::extract::{AppJsonItems, AppPath};
use crate::domain::auth::Permission;
use crate::domain::job::{JobInput, parse_job};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::ingest::batch::{Batch, RejectReason, RejectedItem, Route, count_stored};

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/jobs", put(upsert_jobs))
        .route("/v1/jobs/{cluster}/{job_id}", get(get_job))
}

#[derive(Deserialize, ToSchema)]
pub struct JobBatch {
    /// 1 to `FAULTLINE_MAX_BATCH_ITEMS` (10,000 by default) jobs.
    #[schema(value_type = Vec<JobInput>, min_items = 1, max_items = 10000)]
    pub jobs: Vec<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobUpsertResponse {
    pub received: usize,
    /// Jobs inserted or updated.
    pub upserted: usize,
    pub rejected: Vec<RejectedItem>,
}

/// Record jobs from the scheduler in bulk.
///
/// Upsert key: (cluster, id); a job sent again (e.g. when it ends) replaces the earlier record.
/// `start` is when the job started running, `end` when it ended (absent while `running`), `state` the
/// final state: completed, failed, cancelled or running. At most `FAULTLINE_MAX_BATCH_ITEMS` jobs per
/// call; invalid items are rejected alone, with their index. Signals with a node but no job_id that
/// occurred on a job's node during its run fold into that job's failures: a new or changed job re-folds
/// them in the same transaction.
#[utoipa::path(
    put, path = "/v1/jobs", tag = "ingest", request_body = JobBatch,
    responses(
        (status = 200, description = "Valid jobs stored; invalid ones listed in `rejected`", body = JobUpsertResponse),
        (status = 400, description = "Body is not valid JSON or the batch is empty", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not ingest, or every job is outside the token's cluster scope", body = ErrorBody),
        (status = 413, description = "More jobs or bytes than the limits", body = ErrorBody),
        (status = 503, description = "Not admitted: too many request body bytes in flight, no database connection free within the acquire timeout, or the database does not answer. Nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "Every job of the batch was invalid; `details.rejected` says why", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn upsert_jobs(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppJsonItems(batch): AppJsonItems<JobBatch>,
) -> ApiResult<Json<JobUpsertResponse>> {
    caller.require(Permission::Ingest)?;
    let _timer = crate::ingest::timing::IngestTimer::start(Route::Jobs);
    let batch = Batch::new(Route::Jobs, batch.jobs, ctx.config.limits.max_batch_items)?
        .parse(|value| parse_job(value).map_err(|e| (RejectReason::InvalidField, e)))
        .scoped(|n| n.cluster.as_str(), |c| caller.may_write(c))
        .dedup_by(
            "id",
            |n| (n.cluster.clone(), n.id.clone()),
            |n| format!("{}/{}", n.cluster, n.id),
        )
        .finish(caller.cluster.as_deref())?;
    let upserted =
        crate::ingest::jobs::upsert_jobs(&ctx.db, &ctx.catalog, ctx.config.fold_window(), &batch.items).await?;
    count_stored(Route::Jobs, upserted, 0);
    let (received, rejected) = (batch.received, batch.rejected);
    Ok(Json(JobUpsertResponse {
        received,
        upserted,
        rejected,
    }))
}

/// One job: its run, what the scheduler said of it (name, own state, exit codes, restarts) and
/// the failures folded under it.
#[utoipa::path(
    get, path = "/v1/jobs/{cluster}/{job_id}", tag = "failures",
    params(("cluster" = String, Path, description = "Cluster", example = "c1"), ("job_id" = String, Path, description = "The scheduler's job id")),
    responses(
        (status = 200, description = "The job", body = crate::queries::jobs::JobView),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query, or the cluster is outside its scope", body = ErrorBody),
        (status = 404, description = "No such job in the cluster", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_job(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath((cluster, id)): AppPath<(String, String)>,
) -> ApiResult<Json<crate::queries::jobs::JobView>> {
    caller.require(Permission::Query)?;
    if !caller.may_read(&cluster) {
        return Err(ApiError::Forbidden(format!(
            "this token may not read cluster '{cluster}'"
        )));
    }
    crate::queries::jobs::job(&ctx.read_db, &cluster, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("no job '{id}' in cluster '{cluster}'")))
}
