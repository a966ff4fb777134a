//! `POST /v1/failures/lifecycles`: post-mortems for many failures at once (a site's ticketing
//! system by the thousand), each item as one `PATCH /v1/failures/{id}` would apply it.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::auth::Permission;
use crate::domain::lifecycle::LifecyclePatch;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::AppJsonItems;
use crate::ingest::batch::{BatchError, RejectReason, RejectedItem};
use crate::ingest::lifecycle::{FailureRef, ImportItem, ImportedItem};

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/failures/lifecycles", post(import_lifecycles))
}

/// Post-mortems per `POST /v1/failures/lifecycles` request.
pub const MAX_IMPORT_ITEMS: usize = 1_000;

/// `POST /v1/failures/lifecycles`: post-mortems for many failures, applied in order.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LifecycleImport {
    /// 1 to 1,000 items.
    #[schema(min_items = 1, max_items = 1000)]
    pub lifecycles: Vec<LifecycleImportItem>,
}

/// One post-mortem: its failure, by `id` or described by `cluster`, `first_at` and `job_id` or
/// `node` (as a ticketing system knows it), and the same fields as `PATCH /v1/failures/{id}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LifecycleImportItem {
    /// The failure's id. Without it, `cluster`, `first_at` and `job_id` or `node` describe it.
    pub id: Option<Uuid>,
    #[schema(max_length = 256)]
    pub cluster: Option<String>,
    /// The failure's first signal, to the second: the failure whose first signal is in
    /// `[first_at, first_at + 1 s)` (the latest, when several are).
    pub first_at: Option<DateTime<Utc>>,
    /// The failure's job.
    #[schema(max_length = 256)]
    pub job_id: Option<String>,
    /// A node of the failure (when no job is named).
    #[schema(max_length = 256)]
    pub node: Option<String>,
    /// Merge-patch of the lifecycle, as the body of `PATCH /v1/failures/{id}` (at least one field).
    pub patch: LifecyclePatch,
}

/// What an import did, item by item.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LifecycleImportResponse {
    pub received: usize,
    /// Items that changed their failure's lifecycle (or created it).
    pub changed: usize,
    /// Items applied that changed nothing: the lifecycle already said so (a re-sent import).
    pub unchanged: usize,
    /// Every applied item, in request order.
    pub lifecycles: Vec<ImportedItem>,
    /// Items not applied, with their index and why.
    pub rejected: Vec<RejectedItem>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawImport {
    lifecycles: Vec<serde_json::Value>,
}

/// Reads one item; a wrong field rejects the item alone.
fn import_item(index: usize, v: serde_json::Value) -> Result<ImportItem, RejectedItem> {
    let reject = |reason, field: Option<String>, message: String| RejectedItem {
        index,
        reason,
        field,
        message,
    };
    if !v.is_object() {
        return Err(reject(
            RejectReason::InvalidJson,
            None,
            "an item is a JSON object".to_string(),
        ));
    }
    let item: LifecycleImportItem = serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        let reason = if message.starts_with("missing field") {
            RejectReason::MissingField
        } else {
            RejectReason::InvalidField
        };
        reject(reason, (path != ".").then_some(path), message)
    })?;
    if item.patch.is_empty() {
        return Err(reject(
            RejectReason::InvalidField,
            Some("patch".into()),
            "the patch changes nothing: send at least one field".into(),
        ));
    }
    let failure = match item {
        LifecycleImportItem {
            id: Some(id),
            cluster: None,
            first_at: None,
            job_id: None,
            node: None,
            ..
        } => FailureRef::Id(id),
        LifecycleImportItem {
            id: None,
            cluster: Some(ref cluster),
            first_at: Some(first_at),
            ref job_id,
            ref node,
            ..
        } if job_id.is_some() || node.is_some() => FailureRef::Described {
            cluster: cluster.clone(),
            first_at,
            job_id: job_id.clone(),
            node: node.clone(),
        },
        LifecycleImportItem { id: Some(_), .. } => {
            return Err(reject(
                RejectReason::InvalidField,
                Some("id".into()),
                "name the failure either by id or by cluster, first_at and job_id or node, not both".into(),
            ));
        }
        _ => {
            return Err(reject(
                RejectReason::MissingField,
                Some("id".into()),
                "name the failure by id, or by cluster, first_at and job_id or node".into(),
            ));
        }
    };
    Ok(ImportItem {
        index,
        failure,
        patch: item.patch,
    })
}

/// Record post-mortems in bulk: resolutions, recovery phases, post-mortem root causes and notes of
/// many failures, as a ticketing system exports them.
///
/// Each item names its failure by `id`, or by `cluster`, `first_at` (to the second) and `job_id`
/// or `node`, and carries the body of a `PATCH /v1/failures/{id}`, with the same merge-patch
/// semantics, checks, history entries, audit rows and analytics as one PATCH per item in order;
/// items naming the same failure apply in order. Each item is checked alone: one that names no
/// failure, a cluster outside the token's scope, or an invalid value is listed in `rejected` with
/// its index and reason, and the others are applied. Re-sending an import changes nothing
/// (`unchanged` counts those items; no history entry is added). At most 1,000 items per request
/// (larger gets 413). A 200 means every applied item is committed.
#[utoipa::path(
    post, path = "/v1/failures/lifecycles", tag = "failures", request_body = LifecycleImport,
    responses(
        (status = 200, description = "Import processed: applied items are committed; see `rejected` for the others", body = LifecycleImportResponse),
        (status = 400, description = "The body is not JSON of this shape, or holds no item", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role is not admin", body = ErrorBody),
        (status = 413, description = "More than 1,000 items, or a body over the size limit", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "Every item was rejected; `details.rejected` lists why", body = ErrorBody),
        (status = 503, description = "Not admitted: too many ingest requests in flight, or the database is unavailable. Nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
    ),
    security(("bearer" = []))
)]
pub async fn import_lifecycles(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppJsonItems(raw): AppJsonItems<serde_json::Map<String, serde_json::Value>>,
) -> ApiResult<Json<LifecycleImportResponse>> {
    caller.require(Permission::Admin)?;
    let _permit = ctx.ingest_permit("lifecycles")?;
    let raw: RawImport = serde_path_to_error::deserialize(serde_json::Value::Object(raw))
        .map_err(|e| ApiError::bad_request("invalid_json", format!("at `{}`: {}", e.path(), e.inner())))?;
    let received = raw.lifecycles.len();
    if received == 0 {
        return Err(BatchError::Empty("lifecycles").into());
    }
    if received > MAX_IMPORT_ITEMS {
        return Err(BatchError::TooLarge {
            count: received,
            limit: MAX_IMPORT_ITEMS,
            items: "lifecycles",
        }
        .into());
    }
    let (mut items, mut rejected) = (Vec::new(), Vec::new());
    for (index, v) in raw.lifecycles.into_iter().enumerate() {
        match import_item(index, v) {
            Ok(item) => items.push(item),
            Err(r) => rejected.push(r),
        }
    }
    let may_write = |cluster: &str| caller.may_write(cluster);
    let done = if items.is_empty() {
        crate::ingest::lifecycle::ImportOutcome::default()
    } else {
        crate::ingest::lifecycle::import(&ctx.db, &caller.actor(), may_write, &items, Utc::now()).await?
    };
    rejected.extend(done.rejected);
    rejected.sort_by_key(|r| r.index);
    if done.imported.is_empty() {
        return Err(BatchError::AllInvalid {
            received,
            items: "lifecycles",
            rejected,
        }
        .into());
    }
    let changed = done.imported.iter().filter(|i| i.changed).count();
    Ok(Json(LifecycleImportResponse {
        received,
        changed,
        unchanged: done.imported.len() - changed,
        lifecycles: done.imported,
        rejected,
    }))
}
