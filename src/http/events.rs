//! `POST /v1/events`: batches of signals as JSON or NDJSON, optionally gzip-encoded.

use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiContext;
use super::extract::{Caller, content_type, read_body_limited};
use crate::domain::auth::Permission;
use crate::domain::event::{Event, EventInput, FieldError, parse_event};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::ingest::batch::{Batch, RejectReason, Route, count_stored};

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/events", post(ingest_events))
}

/// A JSON batch. NDJSON bodies carry the same items, one per line.
#[derive(Deserialize, ToSchema)]
pub struct EventBatch {
    #[schema(value_type = Vec<EventInput>)]
    pub events: Vec<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct IngestResponse {
    /// Items of the batch (JSON array elements or NDJSON lines).
    pub received: usize,
    #[serde(flatten)]
    pub outcome: StoreOutcome,
    pub rejected: Vec<RejectedItem>,
}

pub use crate::ingest::batch::RejectedItem;

/// Ingest a batch of signals.
///
/// Body: `{"events": [...]}` as `application/json`, or one event per line as `application/x-ndjson`;
/// `Content-Encoding: gzip` accepted. Limits: body at most `FAULTLINE_MAX_BODY_BYTES` (16 MiB by
/// default) after decompression, at most `FAULTLINE_MAX_BATCH_ITEMS` (10,000) items: larger gets 413.
/// Each item is validated alone: invalid items are listed in `rejected` with their index and reason,
/// and the valid ones are stored. The `id` is an idempotency key: an id already accepted counts as a
/// duplicate. Identical signals (same cluster, node, GPU, job, kind, code, symptom and root cause)
/// less than 60 s apart are stored as one row with `repeat_count` and `last_occurred_at`, in the
/// batch and across batches (`folded` counts them). A 200 means every accepted item is committed to the database.
#[utoipa::path(
    post, path = "/v1/events", tag = "ingest",
    request_body(content(
        (EventBatch = "application/json"),
        (EventInput = "application/x-ndjson")
    )),
    responses(
        (status = 200, description = "Batch processed: accepted items are durably stored; see `rejected` for the others", body = IngestResponse),
        (status = 400, description = "Body is not valid JSON, is empty, or could not be decompressed", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not ingest, or every item targets a cluster outside the token's scope", body = ErrorBody),
        (status = 413, description = "Body or batch larger than the documented limits", body = ErrorBody),
        (status = 415, description = "Content-Type is neither application/json nor application/x-ndjson, or the encoding is not gzip/identity", body = ErrorBody),
        (status = 422, description = "Every item of the batch was invalid; `details.rejected` lists why", body = ErrorBody),
        (status = 503, description = "Too many ingest requests in flight; retry after the Retry-After header", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn ingest_events(
    State(ctx): State<ApiContext>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<IngestResponse>> {
    caller.require(Permission::Ingest)?;
    let _permit = ctx.ingest_permit("events")?;
    let started = Instant::now();
    let limits = &ctx.config.limits;
    let items = match content_type(&headers).as_deref() {
        Some("application/json") => {
            let bytes = read_body_limited(&headers, body, limits.max_body_bytes).await?;
            parse_json_batch(&bytes)?
        }
        Some("application/x-ndjson" | "application/ndjson" | "application/jsonlines") => {
            let bytes = read_body_limited(&headers, body, limits.max_body_bytes).await?;
            split_ndjson(&bytes)
        }
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "Content-Type {} is not accepted: send application/json or application/x-ndjson",
                other.unwrap_or("(none)")
            )));
        }
    };
    let now = Utc::now();
    let batch = Batch::new(Route::Events, items, limits.max_batch_items)?
        .parse(|item| match item {
            Err(message) => Err((RejectReason::InvalidJson, FieldError { field: None, message })),
            Ok(value) => parse_event(value, now).map_err(|e| (RejectReason::InvalidField, e)),
        })
        .scoped(|e| e.cluster.as_str(), |c| caller.may_write(c))
        // The same id twice in a batch is left to the store, which counts the second as a
        // duplicate like any retry.
        .finish(caller.cluster.as_deref())?;
    let (received, rejected) = (batch.received, batch.rejected);
    let outcome = store_events(&ctx, Route::Events, batch.items).await?;
    metrics::histogram!("faultline_ingest_seconds", "endpoint" => "events").record(started.elapsed().as_secs_f64());
    Ok(Json(IngestResponse {
        received,
        outcome,
        rejected,
    }))
}

/// The one write path for signals, as the handlers call it (see [`crate::ingest::store_events`]):
/// stores and counts the accepted and duplicate items of `route`.
pub async fn store_events(ctx: &ApiContext, route: Route, events: Vec<Event>) -> ApiResult<StoreOutcome> {
    let outcome = crate::ingest::store_events(&ctx.db, &ctx.catalog, ctx.config.fold_window(), events).await?;
    count_stored(route, outcome.accepted, outcome.duplicates);
    Ok(outcome)
}

pub use crate::ingest::StoreOutcome;

/// One batch item before validation: a parsed JSON value, or why its line was not JSON.
pub type RawItem = Result<serde_json::Value, String>;

fn parse_json_batch(bytes: &[u8]) -> ApiResult<Vec<RawItem>> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("empty_body", "the request body is empty"));
    }
    let batch: EventBatch = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(
            "invalid_json",
            format!("body is not a JSON object {{\"events\": [...]}}: {e}"),
        )
    })?;
    Ok(batch.events.into_iter().map(Ok).collect())
}

/// NDJSON: every non-blank line is one item; a malformed line is rejected alone.
pub fn split_ndjson(bytes: &[u8]) -> Vec<RawItem> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .map(|line| serde_json::from_slice(line).map_err(|e| format!("line is not JSON: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ndjson_lines_fail_alone() {
        let items = split_ndjson(b"{\"a\":1}\n\n  \nnot json\n{\"b\":2}");
        assert_eq!(items.len(), 3);
        assert!(items[0].is_ok() && items[1].is_err() && items[2].is_ok());
    }
}
