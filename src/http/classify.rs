//! `POST /v1/classify`: a dry run of the catalog (rules and lexicon) on messages a site sends,
//! so it can check its own vocabulary before pointing agents at the service. Stores nothing.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::ApiContext;
use super::caller::Caller;
use super::extract::AppJsonItems;
use crate::classify::Severity;
use crate::domain::auth::Permission;
use crate::domain::taxonomy::{Category, Component};
use crate::http::error::{ApiError, ApiResult, ErrorBody};

pub const MAX_ITEMS: usize = 1000;
/// The kind used when an item has none: how most sites send text causes.
pub const DEFAULT_KIND: &str = "health_check";

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/classify", post(classify))
}

/// One message to classify.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ClassifyItem {
    /// The free text (empty, binary-looking or non-Latin text classifies as unknown; text beyond
    /// 4 KiB is not scored).
    pub message: String,
    /// Signal kind (default `health_check`); any string, known or not, but not blank.
    #[schema(min_length = 1, pattern = "\\S")]
    pub kind: Option<String>,
    /// Xid / SXid / ECC code, when the signal has one.
    pub code: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"items": [
    {"message": "PSU redundancy lost"},
    {"message": "IB port 1 link down", "kind": "health_check"},
    {"message": "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "kind": "xid", "code": 79},
    {"message": "Watchdog caught collective operation timeout", "kind": "nccl_timeout"}
]}))]
pub struct ClassifyRequest {
    /// 0 to 1,000 items.
    #[schema(max_items = 1000)]
    pub items: Vec<ClassifyItem>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClassifyResult {
    /// Position of the item in the request.
    pub index: usize,
    pub category: Category,
    pub component: Component,
    pub severity: Severity,
    #[schema(value_type = crate::classify::Action)]
    pub action: String,
    /// Usually follows another error; not a root cause by itself.
    pub secondary: bool,
    /// The rule that decided (null when the text decided or nothing matched).
    pub rule_id: Option<String>,
    /// Why: "rule xid-79", "terms: power supply(power) + redundancy lost(failure)", "text: symptom without a cause: ...".
    pub explanation: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"catalog_version": 1, "results": [
    {"index": 0, "category": "hardware", "component": "power", "severity": "high", "action": "check_hardware", "secondary": false,
     "rule_id": null, "explanation": "terms: power supply(power) + redundancy lost(failure) (over rule hc-power-supply)"}
]}))]
pub struct ClassifyResponse {
    /// The catalog version (rules and lexicon) that answered.
    pub catalog_version: i64,
    pub results: Vec<ClassifyResult>,
}

/// Classify up to 1,000 messages without storing anything (dry run).
///
/// Each item goes through the same catalog as ingested signals: an Xid/SXid rule for its code, an
/// Xid code named in the text, the free-text lexicon (`/v1/classification-terms`), then the
/// keyword rules. A malformed item (not an object, `message` missing or not a string, `kind` not a
/// string, `code` not an integer) is refused with its index; odd text never is.
#[utoipa::path(
    post, path = "/v1/classify", tag = "classification", request_body = ClassifyRequest,
    responses(
        (status = 200, description = "One result per item, in request order", body = ClassifyResponse),
        (status = 400, description = "Malformed JSON, or more than 1,000 items", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "An item is malformed; `details.index` is its position and `details.field` the field", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn classify(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppJsonItems(body): AppJsonItems<Value>,
) -> ApiResult<Json<ClassifyResponse>> {
    caller.require(Permission::Query)?;
    let items = parse_items(&body)?;
    let mut conn = ctx.db.acquire().await?;
    let catalog = crate::ingest::catalog::lock_shared(&mut conn, &ctx.catalog).await?;
    drop(conn);
    let results = items
        .iter()
        .enumerate()
        .map(|(index, it)| {
            let c = catalog.classify(
                it.kind.as_deref().unwrap_or(DEFAULT_KIND),
                it.code,
                Some(&it.message),
                None,
            );
            ClassifyResult {
                index,
                category: c.root_cause.category,
                component: c.root_cause.component,
                severity: c.severity,
                action: c.action,
                secondary: c.secondary,
                rule_id: c.rule_id,
                explanation: c.explanation,
            }
        })
        .collect();
    Ok(Json(ClassifyResponse {
        catalog_version: catalog.version,
        results,
    }))
}

/// Reads the items one by one so a malformed one is named by its index.
fn parse_items(body: &Value) -> ApiResult<Vec<ClassifyItem>> {
    let items = body
        .get("items")
        .and_then(Value::as_array)
        .ok_or_else(|| ApiError::bad_request("invalid_body", "the body must be an object with an `items` array"))?;
    if items.len() > MAX_ITEMS {
        return Err(ApiError::bad_request(
            "too_many_items",
            format!("{} items; at most {MAX_ITEMS} per request", items.len()),
        ));
    }
    let bad = |index: usize, field: &str, what: &str| ApiError::Unprocessable {
        message: format!("items[{index}].{field}: {what}"),
        details: Some(serde_json::json!({ "index": index, "field": field })),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let o = v.as_object().ok_or_else(|| bad(i, "", "an item must be an object"))?;
            let message = match o.get("message") {
                Some(Value::String(s)) => s.clone(),
                Some(_) => return Err(bad(i, "message", "must be a string")),
                None => return Err(bad(i, "message", "is required")),
            };
            let kind = match o.get("kind") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_ascii_lowercase()),
                Some(_) => return Err(bad(i, "kind", "must be a non-empty string")),
            };
            let code = match o.get("code") {
                None | Some(Value::Null) => None,
                Some(n) => Some(n.as_i64().ok_or_else(|| bad(i, "code", "must be an integer"))?),
            };
            Ok(ClassifyItem { message, kind, code })
        })
        .collect()
}
