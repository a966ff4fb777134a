//! `GET /v1/analytics/job-size`.

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;

use super::{WindowQuery, bad};
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, o, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::job_size::{self as queries, JobSizeResponse};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobSizeQuery {
    /// The fraction of largest jobs (by GPUs) whose failure rate is reported (default 0.05).
    #[param(exclusive_minimum = 0, maximum = 1, example = 0.05)]
    pub largest_fraction: Option<f64>,
}

/// Failure rate and MTTF by job size, the largest jobs' failure rate, and Meta's MTTF projection.
///
/// CSV: one row per size bucket.
#[utoipa::path(
    get, path = "/v1/analytics/job-size", tag = "analytics", params(WindowQuery, JobSizeQuery, FormatQuery),
    responses(
        (status = 200, description = "Per size bucket: jobs, failed jobs, failure rate, failures, hours and MTTF; the failure rate of the largest jobs; the projected MTTF by job size. CSV: one row per bucket.",
         content((JobSizeResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window or largest_fraction", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn job_size(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(jq): AppQuery<JobSizeQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let fraction = jq.largest_fraction.unwrap_or(0.05);
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(bad("largest_fraction must be in (0, 1]"));
    }
    let body = queries::job_size(&ctx.read_db, &wq.window(&caller)?, fraction).await?;
    Ok(respond(format, "job-size", body, |b| {
        let mut csv = Csv::new(&[
            "bucket",
            "jobs",
            "failed_jobs",
            "failure_rate",
            "failures",
            "job_hours",
            "gpu_hours",
            "mttf_hours",
        ]);
        for r in &b.buckets {
            csv.row([
                r.bucket.clone(),
                s(r.jobs),
                s(r.failed_jobs),
                s(r.failure_rate),
                s(r.failures),
                s(r.job_hours),
                s(r.gpu_hours),
                o(r.mttf_hours),
            ]);
        }
        csv.finish()
    }))
}
