//! `POST /v1/integrations/dcgm/diag` (`dcgmi diag -j`) and `POST /v1/integrations/dcgm/health`
//! (`dcgmi health -c -j`): DCGM findings as signals on their GPUs.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::{IntegrationResponse, body_bytes, document_error, query_text, store};
use crate::domain::event::MAX_FUTURE_SKEW_HOURS;
use crate::domain::event::{Event, FieldError};
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::ingest::batch::{Batch, RejectReason, Route};
use crate::ingest::dcgm::{
    HealthIncident, Run, diag_results, health_incidents, map_diag_result, map_health_incident, report_json,
};

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/integrations/dcgm/diag", post(ingest_dcgm_diag))
        .route("/v1/integrations/dcgm/health", post(ingest_dcgm_health))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DcgmQuery {
    #[param(value_type = crate::domain::event::Text)]
    pub cluster: String,
    /// The node the report was taken on (DCGM's JSON does not name it).
    #[param(value_type = crate::domain::event::Text)]
    pub node: String,
    /// When the report was taken, RFC 3339 (default: now). With it, ids are exact; without it
    /// they hold the UTC day, so a report re-sent the same day is a duplicate.
    pub at: Option<DateTime<Utc>>,
}

impl DcgmQuery {
    /// The query checked (400 naming a bad `cluster` or `node`; 422 for an `at` in the future):
    /// `cluster` and `node` trimmed.
    fn checked(self) -> ApiResult<Self> {
        Ok(DcgmQuery {
            cluster: query_text("cluster", &self.cluster)?,
            node: query_text("node", &self.node)?,
            at: self.at,
        })
    }

    fn run(&self) -> ApiResult<Run<'_>> {
        let now = Utc::now();
        if let Some(at) = self.at
            && at > now + chrono::Duration::hours(MAX_FUTURE_SKEW_HOURS)
        {
            return Err(ApiError::Unprocessable {
                message: format!("at: {at} is more than {MAX_FUTURE_SKEW_HOURS} h in the future"),
                details: None,
            });
        }
        Ok(Run {
            cluster: &self.cluster,
            node: &self.node,
            at: self.at.unwrap_or(now),
            id_time: self
                .at
                .map_or_else(|| now.format("%Y-%m-%d").to_string(), |t| t.to_rfc3339()),
        })
    }
}

/// `dcgmi diag -j` output: "DCGM Diagnostic" (DCGM 4) or "DCGM GPU Diagnostic" (older).
#[derive(ToSchema)]
#[schema(example = json!({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory",
    "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Fail",
                 "warnings": [{"error_category": 10, "error_id": 4, "error_severity": 2,
                               "warning": "Detected 2 volatile double-bit ECC error(s) in GPU 1."}]}],
    "test_summary": {"status": "Fail"}}]}]},
    "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [{"entity_id": 1, "device_id": "2330", "serial_num": "1654922000242"}]}],
    "metadata": {"version": "4.2.3"}}))]
#[allow(dead_code)] // the schema of a body read as JSON values
pub struct DcgmDiagReport {
    /// DCGM 4's results (or, from older releases, the same under "DCGM GPU Diagnostic").
    #[serde(rename = "DCGM Diagnostic")]
    #[schema(value_type = Option<HashMap<String, serde_json::Value>>)]
    pub diagnostic: Option<serde_json::Value>,
    /// Each GPU's `entity_id`, `serial_num` and `device_id`.
    #[schema(value_type = Option<Vec<HashMap<String, serde_json::Value>>>)]
    pub entity_groups: Option<serde_json::Value>,
}

/// `dcgmi health -c -j` output.
#[derive(ToSchema)]
#[schema(example = json!({"body": {"Overall Health": {"value": "Failure"}, "GPU": {"children": {"1": {"value": "Failure",
    "children": {"Errors": {"children": {"Memory system": {"value": "Failure",
    "overflow": ["Detected 2 volatile double-bit ECC error(s) in GPU 1."]}}}}}}}}, "header": ["Health Monitor Report"]}))]
#[allow(dead_code)] // the schema of a body read as JSON values
pub struct DcgmHealthReport {
    /// `Overall Health` and, per entity group, each entity's incidents by watch system.
    #[schema(value_type = HashMap<String, serde_json::Value>)]
    pub body: serde_json::Value,
}

/// Ingest a `dcgmi diag -j` report.
///
/// The body is the report as dcgmi printed it (DCGM 2 to 4); lines dcgmi printed before the JSON
/// (a "WARNING: ..." line) are skipped, and `null` entries DCGM 3.1 leaves in its lists are
/// ignored. Each test result with status Fail is a failure signal per GPU (`entity_id`, or each
/// of `gpu_ids` / `gpu_id`) and warning, whatever the severity DCGM gives its code: kind `dcgm`,
/// code = the DCGM error id (`xid`/`sxid` for DCGM's Xid and SXid codes), root cause from the
/// code's DCGM category (HARDWARE_MEMORY -> hardware/gpu_memory, ...), the code's severity in
/// `attributes.dcgm_severity`. A Warn result is stored with symptom `none`. The GPU's serial
/// (`entity_groups`) is kept in `attributes.gpu_serial`. Pass, Skip and Not Run make no signal.
#[utoipa::path(
    post, path = "/v1/integrations/dcgm/diag", tag = "ingest",
    params(DcgmQuery),
    request_body(content((DcgmDiagReport = "application/json"))),
    responses(
        (status = 200, description = "Report processed: its signals stored durably; see `rejected` for malformed results", body = IntegrationResponse),
        (status = 400, description = "Empty body, body not JSON (after any lines printed before it, the first of which is quoted), or `cluster` or `node` missing or not 1 to 256 characters of printable text (the parameter is named)", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not ingest, or the cluster is outside the token's scope", body = ErrorBody),
        (status = 413, description = "Body or batch larger than the documented limits", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "Not a diag report (the missing part is named), `at` in the future, or every result invalid", body = ErrorBody),
        (status = 503, description = "Not admitted: too many ingest requests or request body bytes in flight, or the database does not answer. Nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
    ),
    security(("bearer" = []))
)]
pub async fn ingest_dcgm_diag(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(query): AppQuery<DcgmQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<IntegrationResponse>> {
    ingest_report(&ctx, &caller, query, &headers, body, diag_results, map_diag_result).await
}

/// Ingest a `dcgmi health -c -j` report.
///
/// Each incident (an entity's watch system with its value and messages) is a signal on its GPU:
/// the DCGM code is found by matching the message against DCGM's message formats, and classifies
/// it as for diag results; without one, the system names the part (Memory -> gpu_memory, PCIe,
/// NVLink, Thermal -> cooling, Power, ...). `Failure` is a failure whatever the code's severity,
/// `Warning` is stored with symptom `none`. A healthy report stores nothing. Lines printed before
/// the JSON are skipped.
#[utoipa::path(
    post, path = "/v1/integrations/dcgm/health", tag = "ingest",
    params(DcgmQuery),
    request_body(content((DcgmHealthReport = "application/json"))),
    responses(
        (status = 200, description = "Report processed: its signals stored durably; see `rejected` for malformed incidents", body = IntegrationResponse),
        (status = 400, description = "Empty body, body not JSON (after any lines printed before it, the first of which is quoted), or `cluster` or `node` missing or not 1 to 256 characters of printable text (the parameter is named)", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not ingest, or the cluster is outside the token's scope", body = ErrorBody),
        (status = 413, description = "Body or batch larger than the documented limits", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "Not a health report (the missing part is named), `at` in the future, or every incident invalid", body = ErrorBody),
        (status = 503, description = "Not admitted: too many ingest requests or request body bytes in flight, or the database does not answer. Nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
    ),
    security(("bearer" = []))
)]
pub async fn ingest_dcgm_health(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(query): AppQuery<DcgmQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<IntegrationResponse>> {
    let incidents = |doc: &Value| health_incidents(doc).map(|(_, incidents)| incidents);
    let map = |i: &HealthIncident, run: &Run| map_health_incident(i, run).map(|e| vec![e]);
    ingest_report(&ctx, &caller, query, &headers, body, incidents, map).await
}

/// Both reports alike: admission, the query, the body read as JSON, its items (a report that is
/// not one is a 422 naming what is missing), each mapped to signals alone and stored.
async fn ingest_report<T>(
    ctx: &ApiContext,
    caller: &Caller,
    query: DcgmQuery,
    headers: &HeaderMap,
    body: Body,
    items: impl FnOnce(&Value) -> Result<Vec<T>, FieldError>,
    map: impl Fn(&T, &Run) -> Result<Vec<Event>, FieldError>,
) -> ApiResult<Json<IntegrationResponse>> {
    let _permit = ctx.ingest_permit("dcgm")?;
    let _timer = crate::ingest::timing::IngestTimer::start(Route::Dcgm);
    let query = query.checked()?;
    let bytes = body_bytes(ctx, caller, &query.cluster, headers, body).await?;
    let (value, _preamble) = report_json(&bytes).map_err(|m| ApiError::bad_request("invalid_json", m))?;
    let run = query.run()?;
    let items = items(&value).map_err(document_error)?;
    if items.is_empty() {
        return Ok(Json(IntegrationResponse::default()));
    }
    let batch = Batch::new(Route::Dcgm, items, ctx.config.limits.max_batch_items)?
        .parse(|item| map(&item, &run).map_err(|e| (RejectReason::InvalidField, e)))
        .finish(caller.cluster.as_deref())?;
    Ok(Json(store(ctx, Route::Dcgm, batch).await?))
}
