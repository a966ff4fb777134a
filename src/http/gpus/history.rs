//! Admin writes of GPU history: `POST /v1/gpus/history` (a bulk, idempotent import from a CMDB or
//! a spreadsheet) and `POST /v1/gpus/{part}/removals` (retire a part). Both audited.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::records::{PartInput, PlacementInput, RemovalInput, not_future, parse_part, parse_placement, parse_removal};
use crate::domain::auth::Permission;
use crate::domain::event::{FieldError, optional_text, required_text};
use crate::domain::part::RemovalReason;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppJsonItems, AppPath};
use crate::ingest::batch::{RejectReason, RejectedItem};
use crate::ingest::gpus::{History, HistoryList, HistoryOutcome, Removal, RemovalError};

/// Records per list of an import: five batches' worth (50,000 by default).
const RECORDS_PER_BATCH_ITEM: usize = 5;

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/gpus/history", post(import_history))
        .route("/v1/gpus/{part}/removals", post(remove_part))
}

#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({
    "parts": [{"cluster": "train-a", "serial": "1654922000137", "model": "NVIDIA H100 80GB HBM3",
               "attributes": {"lot": "2023-W41", "firmware": "96.00.74.00.0D"}}],
    "placements": [{"cluster": "train-a", "serial": "1654922000137", "node": "h100-a-0138", "gpu_index": 3,
                    "installed_at": "2024-02-01T00:00:00Z", "removed_at": "2025-06-12T09:30:00Z", "end_reason": "rma"}],
    "removals": [{"cluster": "train-a", "serial": "1654922000137", "removed_at": "2025-06-12T09:30:00Z",
                  "reason": "rma", "ticket": "RMA-4411", "note": "XID 79 twice in a week"}]}))]
pub struct HistoryImport {
    #[schema(value_type = Vec<PartInput>, max_items = 50000)]
    #[serde(default)]
    pub parts: Vec<serde_json::Value>,
    #[schema(value_type = Vec<PlacementInput>, max_items = 50000)]
    #[serde(default)]
    pub placements: Vec<serde_json::Value>,
    #[schema(value_type = Vec<RemovalInput>, max_items = 50000)]
    #[serde(default)]
    pub removals: Vec<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryImportResponse {
    pub received: usize,
    /// Rows inserted or changed (rows sent again unchanged are not counted).
    pub written: HistoryOutcome,
    /// Refused records; `index` counts parts, then placements, then removals, and `field` names
    /// the list (e.g. `placements[3].installed_at`). A removal and a placement's ending that
    /// contradict each other are both refused (`contradicts`), each naming the other.
    pub rejected: Vec<RejectedItem>,
    /// Records written with a caveat: a placement on a node the cluster's node inventory does not
    /// hold (`placements[i].node`); indices as in `rejected`.
    pub warnings: Vec<HistoryWarning>,
}

/// A record written with a caveat.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryWarning {
    pub index: usize,
    pub field: String,
    pub message: String,
}

/// Import GPU history: parts with their attributes, placements with explicit intervals, removals.
///
/// For sites moving from a CMDB or a spreadsheet. Idempotent: parts by (cluster, serial or UUID),
/// placements by (cluster, part, installed_at), removals by (cluster, part, removed_at); sent again,
/// a record replaces what it said before. A part's attributes merge (a key sent again replaces its
/// value). Invalid records are refused alone. Up to 5 x `FAULTLINE_MAX_BATCH_ITEMS` records per list.
///
/// A removal closes the placement it ends; a placement ending as `failed`, `rma`, `decommissioned`
/// or `upgraded` is that removal; a removal and an ending that contradict each other are both
/// refused (`contradicts`), each naming the other. A placement on a node the cluster's node
/// inventory does not hold is written and listed in `warnings`.
#[utoipa::path(
    post, path = "/v1/gpus/history", tag = "parts", request_body = HistoryImport,
    responses(
        (status = 200, description = "Valid records stored; invalid ones listed in `rejected`", body = HistoryImportResponse),
        (status = 400, description = "Body is not valid JSON", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a record's cluster is outside its scope", body = ErrorBody),
        (status = 413, description = "More records or bytes than the limits", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "Every record was invalid; `details.rejected` says why", body = ErrorBody),
        (status = 503, description = "Not admitted; nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
    ),
    security(("bearer" = []))
)]
pub async fn import_history(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppJsonItems(body): AppJsonItems<HistoryImport>,
) -> ApiResult<Json<HistoryImportResponse>> {
    caller.require(Permission::Admin)?;
    let limit = ctx.config.limits.max_batch_items.saturating_mul(RECORDS_PER_BATCH_ITEM);
    let received = body.parts.len() + body.placements.len() + body.removals.len();
    for (name, n) in [
        ("parts", body.parts.len()),
        ("placements", body.placements.len()),
        ("removals", body.removals.len()),
    ] {
        if n > limit {
            return Err(ApiError::PayloadTooLarge(format!(
                "{n} {name}; the limit is {limit} per list"
            )));
        }
    }
    let now = Utc::now();
    let base = |list: HistoryList| match list {
        HistoryList::Placements => body.parts.len(),
        HistoryList::Removals => body.parts.len() + body.placements.len(),
    };
    let (placements_base, removals_base) = (base(HistoryList::Placements), base(HistoryList::Removals));
    let mut rejected = Vec::new();
    let mut index = 0;
    let mut take = |list: &str, e: FieldError, i: usize, index: usize| {
        rejected.push(RejectedItem {
            index,
            reason: RejectReason::InvalidField,
            field: Some(match e.field {
                Some(f) => format!("{list}[{i}].{f}"),
                None => format!("{list}[{i}]"),
            }),
            message: e.message,
        })
    };
    let scope = |c: &str| caller.may_write(c);
    let forbidden = |c: &str| FieldError::new("cluster", format!("this token may not write cluster '{c}'"));
    let mut h = History::default();
    for (i, v) in body.parts.into_iter().enumerate() {
        match parse_part(v, now).and_then(|p| {
            if scope(&p.cluster) {
                Ok(p)
            } else {
                Err(forbidden(&p.cluster))
            }
        }) {
            Ok(p) => h.parts.push(p),
            Err(e) => take("parts", e, i, index),
        }
        index += 1;
    }
    for (i, v) in body.placements.into_iter().enumerate() {
        match parse_placement(v, now).and_then(|p| {
            if scope(&p.cluster) {
                Ok(p)
            } else {
                Err(forbidden(&p.cluster))
            }
        }) {
            Ok(p) => h.placements.push((i, p)),
            Err(e) => take("placements", e, i, index),
        }
        index += 1;
    }
    for (i, v) in body.removals.into_iter().enumerate() {
        match parse_removal(v, now, &caller.name).and_then(|r| {
            if scope(&r.cluster) {
                Ok(r)
            } else {
                Err(forbidden(&r.cluster))
            }
        }) {
            Ok(r) => h.removals.push((i, r)),
            Err(e) => take("removals", e, i, index),
        }
        index += 1;
    }
    if received > 0 && rejected.len() == received {
        return Err(ApiError::Unprocessable {
            message: format!("all {received} records were invalid"),
            details: Some(serde_json::json!({ "rejected": rejected })),
        });
    }
    let done = crate::ingest::gpus::import_history(&ctx.db, &caller.actor(), h).await?;
    let list_base = |list: HistoryList| match list {
        HistoryList::Placements => placements_base,
        HistoryList::Removals => removals_base,
    };
    rejected.extend(done.refused.into_iter().map(|r| RejectedItem {
        index: list_base(r.list) + r.index,
        reason: RejectReason::Contradicts,
        field: Some(format!("{}[{}].{}", r.list.as_str(), r.index, r.field)),
        message: r.message,
    }));
    rejected.sort_by_key(|r| r.index);
    let warnings = done
        .unknown_nodes
        .into_iter()
        .map(|(i, cluster, node)| HistoryWarning {
            index: placements_base + i,
            field: format!("placements[{i}].node"),
            message: format!(
                "node '{node}' is not in cluster '{cluster}''s node inventory (PUT /v1/nodes); the placement is kept"
            ),
        })
        .collect();
    Ok(Json(HistoryImportResponse {
        received,
        written: done.written,
        rejected,
        warnings,
    }))
}

/// A part's removal.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"cluster": "train-a", "at": "2026-11-02T10:00:00Z", "reason": "rma", "ticket": "RMA-4411",
                          "note": "XID 79 twice in a week"}))]
pub struct RemovalRequest {
    /// The cluster the part is in.
    #[schema(value_type = crate::domain::event::Text)]
    pub cluster: String,
    /// When it was removed (default: now).
    pub at: Option<DateTime<Utc>>,
    pub reason: RemovalReason,
    /// The vendor's RMA or support ticket.
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub ticket: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub note: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RemovalResponse {
    pub cluster: String,
    pub part: String,
    pub removed_at: DateTime<Utc>,
    pub reason: RemovalReason,
    /// Whether the part was installed (its placement closed at `removed_at`).
    pub closed_placement: bool,
}

/// Retire a part: failed, sent to the vendor (RMA), decommissioned or upgraded.
///
/// Closes the placement the removal ends at `at` (the rule of `POST /v1/gpus/history`) and
/// records the removal with its ticket and note, audited. A repaired part that comes back is reported by its new node as usual: a new placement
/// opens and its history is kept.
#[utoipa::path(
    post, path = "/v1/gpus/{part}/removals", tag = "parts", request_body = RemovalRequest,
    params(("part" = crate::domain::event::Text, Path, description = "The part's serial, else its UUID", example = "1650123456789")),
    responses(
        (status = 201, description = "Removal recorded", body = RemovalResponse),
        (status = 400, description = "Body is not a valid removal", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or the cluster is outside its scope", body = ErrorBody),
        (status = 404, description = "No such part in the cluster", body = ErrorBody),
        (status = 409, description = "The removal contradicts the part's placements: one ended at that time for another reason, one went on after it, or the part's current placement began after it", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "The time is more than 24 h in the future, or a text too long", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn remove_part(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(part): AppPath<String>,
    AppJson(req): AppJson<RemovalRequest>,
) -> ApiResult<(StatusCode, Json<RemovalResponse>)> {
    caller.require(Permission::Admin)?;
    if !caller.may_write(&req.cluster) {
        return Err(ApiError::Forbidden(format!(
            "this token may not write cluster '{}'",
            req.cluster
        )));
    }
    let now = Utc::now();
    let at = req.at.unwrap_or(now);
    let invalid = |e: FieldError| ApiError::Unprocessable {
        message: format!("{}: {}", e.field.as_deref().unwrap_or("body"), e.message),
        details: None,
    };
    not_future("at", at, now).map_err(invalid)?;
    let removal = Removal {
        cluster: required_text("cluster", req.cluster).map_err(invalid)?,
        part,
        at,
        reason: req.reason,
        ticket: optional_text("ticket", req.ticket).map_err(invalid)?,
        note: optional_text("note", req.note).map_err(invalid)?,
    };
    let (cluster, part) = (removal.cluster.clone(), removal.part.clone());
    let closed = crate::ingest::gpus::remove_part(&ctx.db, &caller.actor(), removal)
        .await
        .map_err(|e| match e {
            RemovalError::NotFound { .. } => ApiError::NotFound(e.to_string()),
            RemovalError::Contradicts(_) => ApiError::Conflict(e.to_string()),
            RemovalError::Db(e) => e.into(),
        })?;
    Ok((
        StatusCode::CREATED,
        Json(RemovalResponse {
            cluster,
            part,
            removed_at: at,
            reason: req.reason,
            closed_placement: closed,
        }),
    ))
}
