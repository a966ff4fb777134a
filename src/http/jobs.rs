//! `PUT /v1/jobs`: jobs from the scheduler, so failure rates can be given per job and per GPU-hour.

use std::collections::HashSet;

use axum::extract::State;
use axum::routing::put;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiContext;
use super::events::RejectedItem;
use super::extract::{AppJson, Caller};
use crate::domain::auth::Permission;
use crate::domain::event::FieldError;
use crate::domain::job::{JobInput, parse_job};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::storage;

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/jobs", put(upsert_jobs))
}

#[derive(Deserialize, ToSchema)]
pub struct JobBatch {
    #[schema(value_type = Vec<JobInput>)]
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
    AppJson(batch): AppJson<JobBatch>,
) -> ApiResult<Json<JobUpsertResponse>> {
    caller.require(Permission::Ingest)?;
    let received = batch.jobs.len();
    if received == 0 {
        return Err(ApiError::bad_request("empty_batch", "the batch holds no jobs"));
    }
    if received > ctx.config.limits.max_batch_items {
        return Err(ApiError::PayloadTooLarge(format!(
            "the batch holds {received} jobs; the limit is {}",
            ctx.config.limits.max_batch_items
        )));
    }
    let mut seen = HashSet::new();
    let mut valid = Vec::with_capacity(received);
    let mut rejected = Vec::new();
    for (index, value) in batch.jobs.into_iter().enumerate() {
        let reject = |reason: &str, e: FieldError| RejectedItem {
            index,
            reason: reason.into(),
            field: e.field,
            message: e.message,
        };
        match parse_job(value) {
            Err(e) => rejected.push(reject("invalid_field", e)),
            Ok(j) if !caller.may_write(&j.cluster) => rejected.push(reject(
                "forbidden_cluster",
                FieldError::new("cluster", format!("this token may not write cluster '{}'", j.cluster)),
            )),
            Ok(j) if !seen.insert((j.cluster.clone(), j.id.clone())) => rejected.push(reject(
                "duplicate_in_batch",
                FieldError::new("id", format!("{}/{} appears earlier in this batch", j.cluster, j.id)),
            )),
            Ok(j) => valid.push(j),
        }
    }
    if valid.is_empty() {
        if rejected.iter().all(|r| r.reason == "forbidden_cluster") {
            return Err(ApiError::Forbidden(
                "every job is outside this token's cluster scope".into(),
            ));
        }
        return Err(ApiError::Unprocessable {
            message: format!("all {received} jobs were invalid"),
            details: Some(serde_json::json!({ "rejected": rejected })),
        });
    }
    // Job records decide which job a node-only signal folds under: in one transaction, re-fold
    // what the jobs attributed before and attribute now (their keys and their nodes' keys over
    // their runs). The catalog row held FOR UPDATE keeps ingest from folding against a half-written
    // job table, so the failures do not depend on whether jobs or signals came first.
    let mut tx = ctx.db.begin().await?;
    let catalog = storage::catalog::lock_exclusive(&mut tx, &ctx.catalog).await?;
    let mut touched = storage::failures::Touched::new();
    for old in storage::jobs::stored_runs(&mut tx, &valid).await? {
        storage::failures::touch_job(
            &mut touched,
            &old.cluster,
            &old.job_id,
            &old.nodes,
            old.started_at,
            old.ended_at,
        );
    }
    for j in &valid {
        storage::failures::touch_job(&mut touched, &j.cluster, &j.id, &j.nodes, j.start, j.end);
    }
    let upserted = storage::jobs::upsert(&mut tx, &valid).await? as usize;
    let window = chrono::Duration::from_std(ctx.config.correlation_window).unwrap_or(chrono::Duration::minutes(10));
    storage::failures::refold(&mut tx, &catalog, window, &touched).await?;
    tx.commit().await?;
    Ok(Json(JobUpsertResponse {
        received,
        upserted,
        rejected,
    }))
}
