//! `POST /v1/integrations/nvsentinel/health-events`: NVIDIA NVSentinel HealthEvents as signals.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::ApiContext;
use super::caller::Caller;
use super::extract::split_ndjson;
use super::extract::{AppQuery, content_type, read_body_limited};
use crate::domain::auth::Permission;
use crate::domain::event::FieldError;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::ingest::StoreOutcome;
use crate::ingest::batch::RejectedItem;
use crate::ingest::batch::{Batch, RejectReason, Route};
use crate::ingest::nvsentinel::{map_health_event, split_body};

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/integrations/nvsentinel/health-events", post(ingest_health_events))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HealthEventsQuery {
    /// Cluster the events belong to (NVSentinel records do not carry one).
    #[param(value_type = crate::domain::event::Text)]
    pub cluster: String,
}

/// The HealthEvents message (one HealthEvent object, or an array of them, is also accepted).
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of a body read as JSON values
pub struct HealthEvents {
    /// The message's version (1 today); not read, so any value is accepted.
    #[schema(value_type = Option<serde_json::Value>)]
    pub version: Option<serde_json::Value>,
    /// 1 to `FAULTLINE_MAX_BATCH_ITEMS` (10,000 by default) events.
    #[schema(min_items = 1, max_items = 10000)]
    pub events: Vec<HealthEvent>,
}

/// One NVSentinel HealthEvent (protojson keys; lower-case or snake_case also accepted). Only the
/// node is required; the mapping reads `checkName`, `componentClass`, `isHealthy`, `isFatal`,
/// `errorCode`, `entitiesImpacted`, `message` and `generatedTimestamp` when present.
#[derive(ToSchema)]
#[allow(dead_code, non_snake_case)] // protojson's key
pub struct HealthEvent {
    #[schema(value_type = crate::domain::event::Text)]
    pub nodeName: String,
}

#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct HealthEventsResponse {
    pub received: usize,
    /// Signals by kind (`xid`, `sxid`, `ecc`, `link_down`, `health_check`, ...).
    pub signals_by_kind: BTreeMap<String, usize>,
    /// Healthy events (`isHealthy: true`): stored with symptom `none`, they make no failure.
    pub healthy: usize,
    #[serde(flatten)]
    pub outcome: StoreOutcome,
    pub rejected: Vec<RejectedItem>,
}

/// Ingest NVSentinel HealthEvents.
///
/// Body: one HealthEvent object, an array of them, `{"version": 1, "events": [...]}` (the
/// HealthEvents message) as `application/json`, or one per line as `application/x-ndjson`. Keys
/// as protojson (`componentClass`) or lower-case/snake_case. Mapping: Xid checks and GPU numeric
/// error codes -> `xid` N; NVSwitch / SXid -> `sxid` N; GPU fallen off the bus -> `xid` 79;
/// ECC (DBE/SBE) -> `ecc` 2/1; row remap, NVLink, thermal, power, InfoROM, GSP by name; NIC,
/// InfiniBand, Ethernet -> `link_down`; otherwise `health_check`. `gpu_index` / `gpu_uuid` from
/// `entitiesImpacted`; time from `generatedTimestamp` (else the request time); id = uuid v5 of
/// the record, so resending is idempotent. Healthy events get symptom `none`.
#[utoipa::path(
    post, path = "/v1/integrations/nvsentinel/health-events", tag = "ingest",
    params(HealthEventsQuery),
    request_body(content((HealthEvents = "application/json"), (HealthEvent = "application/x-ndjson"))),
    responses(
        (status = 200, description = "Events processed: mapped signals stored durably; see `rejected` for the others", body = HealthEventsResponse),
        (status = 400, description = "Empty body, body not JSON, or missing `cluster`", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not ingest, or the cluster is outside the token's scope", body = ErrorBody),
        (status = 413, description = "Body or batch larger than the documented limits", body = ErrorBody),
        (status = 415, description = "Content-Type is neither application/json nor application/x-ndjson", body = ErrorBody),
        (status = 422, description = "Every event was invalid; `details.rejected` lists why", body = ErrorBody),
        (status = 503, description = "Not admitted: too many ingest requests or request body bytes in flight, no database connection free within the acquire timeout, or the database does not answer. Nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
    ),
    security(("bearer" = []))
)]
pub async fn ingest_health_events(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(query): AppQuery<HealthEventsQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<HealthEventsResponse>> {
    caller.require(Permission::Ingest)?;
    let _permit = ctx.ingest_permit("nvsentinel")?;
    let _timer = crate::ingest::timing::IngestTimer::start(Route::Nvsentinel);
    if !caller.may_write(&query.cluster) {
        return Err(ApiError::Forbidden(format!(
            "this token may not write cluster '{}'",
            query.cluster
        )));
    }
    let limits = &ctx.config.limits;
    let is_json = match content_type(&headers).as_deref() {
        Some("application/json") => true,
        Some("application/x-ndjson" | "application/ndjson" | "application/jsonlines") => false,
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "Content-Type {} is not accepted: send application/json or application/x-ndjson",
                other.unwrap_or("(none)")
            )));
        }
    };
    let bytes = read_body_limited(&headers, body, limits.max_body_bytes).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("empty_body", "the request body is empty"));
    }
    let items: Vec<Result<serde_json::Value, String>> = if is_json {
        match serde_json::from_slice(&bytes) {
            Ok(v) => split_body(v).into_iter().map(Ok).collect(),
            // Some senders label NDJSON as JSON.
            Err(_) => split_ndjson(&bytes),
        }
    } else {
        split_ndjson(&bytes)
    };
    let now = Utc::now();
    let batch = Batch::new(Route::Nvsentinel, items, limits.max_batch_items)?
        .parse(|item| {
            let value = item.map_err(|message| (RejectReason::InvalidJson, FieldError { field: None, message }))?;
            map_health_event(&value, &query.cluster, now).map_err(|e| (RejectReason::InvalidField, e))
        })
        .finish(caller.cluster.as_deref())?;
    let mut out = HealthEventsResponse {
        received: batch.received,
        rejected: batch.rejected,
        ..Default::default()
    };
    for e in &batch.items {
        *out.signals_by_kind.entry(e.kind.clone()).or_default() += 1;
        out.healthy += usize::from(e.symptom == Some(crate::domain::taxonomy::Symptom::None));
    }
    let events = batch.items;
    out.outcome = crate::ingest::store_events(
        &ctx.db,
        &ctx.catalog,
        ctx.config.fold_window(),
        ctx.config.retention.signal_retention_days,
        Route::Nvsentinel,
        events,
    )
    .await?;
    Ok(Json(out))
}
