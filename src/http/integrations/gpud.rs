//! `POST /v1/integrations/gpud/events`: a node's gpud events (`GET /v1/events` of leptonai/gpud,
//! as `faultline gpud sync` relays them) as signals.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::{IntegrationResponse, document_error, json_body, query_text, store};
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::ingest::batch::{Batch, RejectReason, Route};
use crate::ingest::gpud::{map_event, split_body};

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/integrations/gpud/events", post(ingest_gpud_events))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NodeQuery {
    #[param(value_type = crate::domain::event::Text)]
    pub cluster: String,
    /// The node gpud runs on (its events do not name it).
    #[param(value_type = crate::domain::event::Text)]
    pub node: String,
}

/// One component's events in gpud's `GPUdComponentEvents` (the body is a list of them).
#[derive(ToSchema)]
#[schema(example = json!({"component": "accelerator-nvidia-error-xid", "startTime": "2025-06-01T14:15:35Z",
    "endTime": "2025-06-01T17:14:30.690962187Z", "events": [{"time": "2025-06-01T16:59:04Z", "name": "error_xid",
    "type": "Fatal", "message": "XID 79(GPU has fallen off the bus) detected on PCI:0000:04:00"}]}))]
#[allow(dead_code)] // the schema of a body read as JSON values
pub struct GpudComponentEvents {
    #[schema(value_type = crate::domain::event::Text)]
    pub component: String,
    /// The component's events (none: null or absent).
    pub events: Option<Vec<GpudEvent>>,
}

/// One gpud event (`apiv1.Event`). Only `time` is required; `name`, `type` and `message` are
/// strings when given.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of a body read as JSON values
pub struct GpudEvent {
    /// When it happened, RFC 3339.
    pub time: chrono::DateTime<chrono::Utc>,
    /// The event's name (`error_xid`, ...).
    pub name: Option<String>,
    /// gpud's event type (default: Unknown); `Info` is stored with symptom `none`.
    #[schema(rename = "type")]
    pub event_type: Option<GpudEventType>,
    /// The event's text: an Xid's number, `PCI:` bus id and `GPU-` UUID are read from it.
    pub message: Option<String>,
}

/// gpud's `EventType`.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of a body read as JSON values
pub enum GpudEventType {
    Info,
    Warning,
    Critical,
    Fatal,
    Unknown,
}

/// Ingest gpud events of one node.
///
/// Body: what gpud's `GET /v1/events` answers (`[{component, startTime, endTime, events: [{time,
/// name, type, message}]}]`). `accelerator-nvidia-error-xid` / `-sxid` events are `xid` / `sxid`
/// signals with the number in their message and `PCI:` bus id; other components by name
/// (NVLink, ECC, row remapping, thermal, power, InfiniBand, OOM), else `health_check`. Type
/// `Info` is stored with symptom `none`. Ids are of the node, component, time, name and message:
/// re-syncing an overlapping window is idempotent.
#[utoipa::path(
    post, path = "/v1/integrations/gpud/events", tag = "ingest",
    params(NodeQuery),
    request_body(content((Vec<GpudComponentEvents> = "application/json"))),
    responses(
        (status = 200, description = "Events processed: their signals stored durably; see `rejected` for the others", body = IntegrationResponse),
        (status = 400, description = "Empty body, body not JSON, or `cluster` or `node` missing or not 1 to 256 characters of printable text (the parameter is named)", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not ingest, or the cluster is outside the token's scope", body = ErrorBody),
        (status = 413, description = "Body or batch larger than the documented limits", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "Not gpud's events (a component without a name), or every event was invalid; `details` says why", body = ErrorBody),
        (status = 503, description = "Not admitted: too many ingest requests or request body bytes in flight, or the database does not answer. Nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
    ),
    security(("bearer" = []))
)]
pub async fn ingest_gpud_events(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(query): AppQuery<NodeQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<IntegrationResponse>> {
    let _permit = ctx.ingest_permit("gpud")?;
    let _timer = crate::ingest::timing::IngestTimer::start(Route::Gpud);
    let (cluster, node) = (query_text("cluster", &query.cluster)?, query_text("node", &query.node)?);
    let value = json_body(&ctx, &caller, &cluster, &headers, body).await?;
    let items = split_body(value).map_err(document_error)?;
    if items.is_empty() {
        return Ok(Json(IntegrationResponse::default()));
    }
    let batch = Batch::new(Route::Gpud, items, ctx.config.limits.max_batch_items)?
        .parse(|e| {
            map_event(&e, &cluster, &node)
                .map(|e| vec![e])
                .map_err(|e| (RejectReason::InvalidField, e))
        })
        .finish(caller.cluster.as_deref())?;
    Ok(Json(store(&ctx, Route::Gpud, batch).await?))
}
