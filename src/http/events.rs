//! `POST /v1/events`: batches of signals as JSON or NDJSON, optionally gzip-encoded.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiContext;
use super::caller::Caller;
use super::extract::{content_type, read_body_limited};
use crate::domain::auth::Permission;
use crate::domain::event::{EventInput, FieldError, validate_event};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::ingest::StoreOutcome;
use crate::ingest::batch::{Batch, RejectReason, RejectedItem, Rejection, Route};

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/events", post(ingest_events))
}

/// A JSON batch. NDJSON bodies carry the same items, one per line.
#[derive(Deserialize, ToSchema)]
pub struct EventBatch {
    /// 1 to `FAULTLINE_MAX_BATCH_ITEMS` (10,000 by default) events.
    #[schema(value_type = Vec<EventInput>, min_items = 1, max_items = 10000)]
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
        (EventBatch = "application/json", example = json!({"events": [{
            "id": "0d9e4c1a-6f3b-4a53-9b8e-3c2f1d7a5e10", "occurred_at": "2026-11-02T10:15:00Z",
            "cluster": "train-a", "node": "h100-a-0138", "gpu_index": 3, "kind": "xid", "code": 79,
            "message": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."}]})),
        (EventInput = "application/x-ndjson")
    )),
    responses(
        (status = 200, description = "Batch processed: accepted items are durably stored; see `rejected` for the others", body = IngestResponse,
         example = json!({"received": 1, "accepted": 1, "duplicates": 0, "stored": 1, "folded": 0, "folded_not_retained": 0, "rejected": []})),
        (status = 400, description = "Body is not valid JSON, is empty, or could not be decompressed", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not ingest, or every item targets a cluster outside the token's scope", body = ErrorBody),
        (status = 413, description = "Body or batch larger than the documented limits", body = ErrorBody),
        (status = 415, description = "Content-Type is neither application/json nor application/x-ndjson, or the encoding is not gzip/identity", body = ErrorBody),
        (status = 422, description = "Every item of the batch was invalid; `details.rejected` lists why", body = ErrorBody),
        (status = 503, description = "Not admitted: too many ingest requests or request body bytes in flight, no database connection free within the acquire timeout, or the database does not answer. Nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
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
    let _timer = crate::ingest::timing::IngestTimer::start(Route::Events);
    let limits = &ctx.config.limits;
    let bytes;
    let items = match content_type(&headers).as_deref() {
        Some("application/json") => {
            bytes = read_body_limited(&headers, body, limits.max_body_bytes).await?;
            json_batch_items(&bytes)?
        }
        Some("application/x-ndjson" | "application/ndjson" | "application/jsonlines") => {
            bytes = read_body_limited(&headers, body, limits.max_body_bytes).await?;
            ndjson_items(&bytes)
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
        .parse(|item| {
            parse_item(item).and_then(|input| validate_event(input, now).map_err(|e| (RejectReason::InvalidField, e)))
        })
        .scoped(|e| e.cluster.as_str(), |c| caller.may_write(c))
        // The same id twice in a batch is left to the store, which counts the second as a
        // duplicate like any retry.
        .finish(caller.cluster.as_deref())?;
    let (received, rejected) = (batch.received, batch.rejected);
    // The body is no longer needed once its items are typed events: free it before storing.
    drop(bytes);
    let outcome = crate::ingest::store_events(
        &ctx.db,
        &ctx.catalog,
        ctx.config.fold_window(),
        ctx.config.retention.signal_retention_days,
        Route::Events,
        batch.items,
    )
    .await?;
    Ok(Json(IngestResponse {
        received,
        outcome,
        rejected,
    }))
}

/// A JSON batch as slices of the body: the items are parsed one at a time straight into
/// [`EventInput`], so the batch never exists as a `serde_json::Value` tree (which took several
/// times the body's size) and an item's memory is its typed fields only.
#[derive(Deserialize)]
struct BorrowedBatch<'a> {
    #[serde(borrow)]
    events: Vec<&'a serde_json::value::RawValue>,
}

fn json_batch_items(bytes: &[u8]) -> ApiResult<Vec<&[u8]>> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("empty_body", "the request body is empty"));
    }
    let batch: BorrowedBatch<'_> = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(
            "invalid_json",
            format!("body is not a JSON object {{\"events\": [...]}}: {e}"),
        )
    })?;
    Ok(batch.events.into_iter().map(|raw| raw.get().as_bytes()).collect())
}

/// NDJSON lines (non-blank), each parsed later on its own.
fn ndjson_items(bytes: &[u8]) -> Vec<&[u8]> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .collect()
}

/// One item into an [`EventInput`]: `invalid_json` when it is not JSON, else `invalid_field`
/// with the path of the field that does not fit.
fn parse_item(text: &[u8]) -> Result<EventInput, Rejection> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let result = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| (e.path().to_string(), e.into_inner()))
        .and_then(|v: EventInput| de.end().map(|()| v).map_err(|e| (String::new(), e)));
    result.map_err(|(path, inner)| {
        // Messages as a parsed value gives them: without the position inside the item.
        let mut message = inner.to_string();
        if inner.line() > 0
            && let Some(m) = message.strip_suffix(&format!(" at line {} column {}", inner.line(), inner.column()))
        {
            message = m.to_string();
        }
        if inner.is_syntax() || inner.is_eof() {
            (
                RejectReason::InvalidJson,
                FieldError {
                    field: None,
                    message: format!("line is not JSON: {message}"),
                },
            )
        } else {
            (
                RejectReason::InvalidField,
                FieldError {
                    field: (path != "." && !path.is_empty()).then_some(path),
                    message,
                },
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_parse_typed_with_the_reason_and_field_of_a_failure() {
        let ok = br#"{"id":"00000000-0000-4000-8000-000000000001","occurred_at":"2026-11-02T10:00:00Z","cluster":"c1","kind":"xid","code":79}"#;
        assert_eq!(parse_item(ok).unwrap().code, Some(79));
        let (reason, e) = parse_item(b"not json").unwrap_err();
        assert_eq!((reason, e.field), (RejectReason::InvalidJson, None));
        let bad_field = br#"{"id":"00000000-0000-4000-8000-000000000001","occurred_at":"x","cluster":"c1","kind":"xid","code":"seven"}"#;
        let (reason, e) = parse_item(bad_field).unwrap_err();
        assert_eq!((reason, e.field.as_deref()), (RejectReason::InvalidField, Some("code")));
        assert!(!e.message.contains("column"), "{}", e.message);
        let (reason, _) = parse_item(&[&ok[..], b" {}"].concat()).unwrap_err();
        assert_eq!(reason, RejectReason::InvalidJson);
        // A JSON batch is cut into items without parsing them.
        let body = [&b"{\"events\": ["[..], ok, b", 5]}"].concat();
        let items = json_batch_items(&body).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1], b"5");
    }

    #[test]
    fn ndjson_lines_fail_alone() {
        let items = crate::http::extract::split_ndjson(b"{\"a\":1}\n\n  \nnot json\n{\"b\":2}");
        assert_eq!(items.len(), 3);
        assert!(items[0].is_ok() && items[1].is_err() && items[2].is_ok());
    }
}
