//! Integrations that take a tool's own output as is: Kubernetes objects, DCGM diagnostics and
//! health reports, gpud events. Each route maps its items to signals (`src/ingest/<tool>.rs`) and
//! stores them through the one write path; the answer and its checks are shared here.

pub mod dcgm;
pub mod gpud;
pub mod kubernetes;

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Body;
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiContext;
use super::caller::Caller;
use super::extract::{content_type, read_body_limited};
use crate::domain::event::{Event, FieldError};
use crate::domain::taxonomy::Symptom;
use crate::http::error::{ApiError, ApiResult};
use crate::ingest::StoreOutcome;
use crate::ingest::batch::{Accepted, RejectedItem, Route};

pub fn router() -> Router<ApiContext> {
    Router::new()
        .merge(kubernetes::router())
        .merge(dcgm::router())
        .merge(gpud::router())
}

/// What an integration route did with a body.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"received": 4, "ignored": 1, "signals": 3, "signals_by_kind": {"host_oom": 1, "job_exit": 1, "node_unreachable": 1},
    "no_failure": 0, "accepted": 3, "duplicates": 0, "stored": 3, "folded": 0, "folded_not_retained": 0, "rejected": []}))]
pub struct IntegrationResponse {
    /// Items read: Kubernetes objects, DCGM test results or health incidents, gpud events.
    pub received: usize,
    /// Valid items that say nothing about a failure (a `Normal` event, a passed test): no signal.
    pub ignored: usize,
    /// Signals the accepted items gave.
    pub signals: usize,
    /// Signals by kind (`xid`, `dcgm`, `host_oom`, `job_exit`, `node_drain`, ...).
    pub signals_by_kind: BTreeMap<String, usize>,
    /// Signals stored with symptom `none` (a DCGM Warn result or health Warning, a gpud Info
    /// event): they make no failure.
    pub no_failure: usize,
    #[serde(flatten)]
    pub outcome: StoreOutcome,
    /// Refused items: `index`, `reason` and `field` (its path in the body).
    pub rejected: Vec<RejectedItem>,
}

/// The caller may ingest into `cluster`; the body is JSON and not empty. Returns it parsed.
pub(crate) async fn json_body(
    ctx: &ApiContext,
    caller: &Caller,
    cluster: &str,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<serde_json::Value> {
    let bytes = body_bytes(ctx, caller, cluster, headers, body).await?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request("invalid_json", format!("the body is not JSON: {e}")))
}

/// The caller may ingest into `cluster`; the body is declared JSON, within the size limit and
/// not empty. Returns its bytes.
pub(crate) async fn body_bytes(
    ctx: &ApiContext,
    caller: &Caller,
    cluster: &str,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<axum::body::Bytes> {
    caller.require(crate::domain::auth::Permission::Ingest)?;
    if !caller.may_write(cluster) {
        return Err(ApiError::Forbidden(format!(
            "this token may not write cluster '{cluster}'"
        )));
    }
    match content_type(headers).as_deref() {
        Some("application/json") => {}
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "Content-Type {} is not accepted: send application/json",
                other.unwrap_or("(none)")
            )));
        }
    }
    let bytes = read_body_limited(headers, body, ctx.config.limits.max_body_bytes).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("empty_body", "the request body is empty"));
    }
    Ok(bytes)
}

/// A `cluster` or `node` query parameter as the signals will carry it (`required_text`: 1 to 256
/// characters, not blank, no control character; trimmed): else 400 naming the parameter, before
/// anything is read or stored.
pub(crate) fn query_text(name: &str, value: &str) -> ApiResult<String> {
    crate::domain::event::required_text(name, value.to_string())
        .map_err(|e| ApiError::bad_request("invalid_query", format!("query parameter `{name}`: {}", e.message)))
}

/// A document whose whole shape is wrong (not a diag report, say): 422 naming the field.
pub(crate) fn document_error(e: FieldError) -> ApiError {
    ApiError::Unprocessable {
        message: format!("{}: {}", e.field.as_deref().unwrap_or("body"), e.message),
        details: Some(serde_json::json!({"field": e.field})),
    }
}

/// Stores the signals of the accepted items and answers.
pub(crate) async fn store(
    ctx: &ApiContext,
    route: Route,
    batch: Accepted<Vec<Event>>,
) -> ApiResult<IntegrationResponse> {
    let mut out = IntegrationResponse {
        received: batch.received,
        rejected: batch.rejected,
        ..Default::default()
    };
    out.ignored = batch.items.iter().filter(|s| s.is_empty()).count();
    let events: Vec<Event> = batch.items.into_iter().flatten().collect();
    out.signals = events.len();
    for e in &events {
        *out.signals_by_kind.entry(e.kind.clone()).or_default() += 1;
        out.no_failure += usize::from(e.symptom == Some(Symptom::None));
    }
    if !events.is_empty() {
        out.outcome = crate::ingest::store_events(
            &ctx.db,
            &ctx.catalog,
            ctx.config.fold_window(),
            ctx.config.retention.signal_retention_days,
            route,
            events,
        )
        .await?;
    }
    Ok(out)
}
