//! Admin writes of GPU history: `POST /v1/gpus/history` (a bulk, idempotent import from a CMDB or
//! a spreadsheet) and `POST /v1/gpus/{part}/removals` (retire a part). Both audited.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::auth::Permission;
use crate::domain::event::{FieldError, MAX_FUTURE_SKEW_HOURS, optional_text, required_text};
use crate::domain::gpu::{GpuGeneration, generation_of};
use crate::domain::part::{EndReason, RemovalReason, identity};
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::ingest::batch::{RejectReason, RejectedItem};
use crate::ingest::gpus::{History, HistoryOutcome, Removal, RemovalError};
use crate::storage::gpus::{PartRow, PlacementRow, RemovalRow};

/// Records per list of an import: five batches' worth (50,000 by default).
const RECORDS_PER_BATCH_ITEM: usize = 5;

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/gpus/history", post(import_history))
        .route("/v1/gpus/{part}/removals", post(remove_part))
}

/// A part's facts.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PartInput {
    #[schema(value_type = crate::domain::event::Text)]
    pub cluster: String,
    /// The part's serial; without one, its UUID identifies it.
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub serial: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub uuid: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub model: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub board_part_number: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub vbios: Option<String>,
    /// Site attributes the analytics group by (`attribute:KEY`): strings, numbers or booleans.
    #[schema(value_type = Option<HashMap<String, String>>)]
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A part in a slot for an interval.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlacementInput {
    #[schema(value_type = crate::domain::event::Text)]
    pub cluster: String,
    /// The part: its serial, else its UUID.
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub serial: Option<String>,
    /// The UUID the part had in this slot.
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub uuid: Option<String>,
    #[schema(value_type = crate::domain::event::Text)]
    pub node: String,
    #[schema(minimum = 0, maximum = 1023)]
    pub gpu_index: Option<i32>,
    #[schema(max_length = 256, pattern = r"^[ \t\n\r]*(?:(?:PCI:)?(?:[0-9A-Fa-f]{1,8}:)?[0-9A-Fa-f]{1,2}:(?:[01]?[0-9A-Fa-f])(?:\.[0-7])?)?[ \t\n\r]*$")]
    pub pci_bus_id: Option<String>,
    pub installed_at: DateTime<Utc>,
    /// Absent while still installed.
    pub removed_at: Option<DateTime<Utc>>,
    /// Why it ended (`other` when not given and `removed_at` is).
    pub end_reason: Option<EndReason>,
}

/// A removal with its reason.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RemovalInput {
    #[schema(value_type = crate::domain::event::Text)]
    pub cluster: String,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub serial: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub uuid: Option<String>,
    pub removed_at: DateTime<Utc>,
    pub reason: RemovalReason,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub ticket: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub note: Option<String>,
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
    /// the list (e.g. `placements[3].installed_at`).
    pub rejected: Vec<RejectedItem>,
}

fn de<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        FieldError {
            field: (path != "." && !path.is_empty()).then_some(path),
            message: e.into_inner().to_string(),
        }
    })
}

fn part_of(serial: Option<String>, uuid: Option<String>) -> Result<(Option<String>, Option<String>, String), FieldError> {
    let serial = optional_text("serial", serial)?;
    let uuid = optional_text("uuid", uuid)?;
    let part = identity(serial.as_deref(), uuid.as_deref())
        .ok_or_else(|| FieldError::new("serial", "a part needs a serial or a UUID"))?;
    Ok((serial, uuid, part))
}

fn not_future(field: &str, t: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), FieldError> {
    if t > now + chrono::Duration::hours(MAX_FUTURE_SKEW_HOURS) {
        return Err(FieldError::new(field, format!("{t} is more than {MAX_FUTURE_SKEW_HOURS} h in the future")));
    }
    Ok(())
}

fn parse_part(v: serde_json::Value, now: DateTime<Utc>) -> Result<PartRow, FieldError> {
    let p: PartInput = de(v)?;
    let (serial, uuid, part) = part_of(p.serial, p.uuid)?;
    let model = optional_text("model", p.model)?;
    let attributes = p.attributes.unwrap_or_default();
    if let Some((k, _)) = attributes.iter().find(|(_, v)| !(v.is_string() || v.is_number() || v.is_boolean())) {
        return Err(FieldError::new(format!("attributes.{k}"), "an attribute is a string, a number or a boolean"));
    }
    // Postgres text and jsonb cannot hold U+0000.
    if let Some((k, _)) = attributes.iter().find(|(k, v)| k.contains('\0') || v.as_str().is_some_and(|v| v.contains('\0'))) {
        return Err(FieldError::new(format!("attributes.{k}"), "an attribute may not contain U+0000"));
    }
    Ok(PartRow {
        cluster: required_text("cluster", p.cluster)?,
        part,
        serial,
        uuid,
        generation: model.as_deref().map_or(GpuGeneration::Unknown, generation_of).as_str().to_string(),
        model,
        board_part_number: optional_text("board_part_number", p.board_part_number)?,
        vbios: optional_text("vbios", p.vbios)?,
        driver: None,
        attributes: serde_json::Value::Object(attributes),
        first_seen_at: now,
    })
}

fn parse_placement(v: serde_json::Value, now: DateTime<Utc>) -> Result<PlacementRow, FieldError> {
    let p: PlacementInput = de(v)?;
    let (_, uuid, part) = part_of(p.serial, p.uuid)?;
    not_future("installed_at", p.installed_at, now)?;
    if let Some(r) = p.removed_at {
        not_future("removed_at", r, now)?;
        if r < p.installed_at {
            return Err(FieldError::new("removed_at", "is before installed_at"));
        }
    }
    if let Some(i) = p.gpu_index
        && !(0..=1023).contains(&i)
    {
        return Err(FieldError::new("gpu_index", format!("{i} is not a GPU index (0..=1023)")));
    }
    let pci_bus_id = match optional_text("pci_bus_id", p.pci_bus_id)? {
        Some(raw) => Some(
            crate::logparse::normalise_pci_bus_id(&raw)
                .ok_or_else(|| FieldError::new("pci_bus_id", format!("'{raw}' is not a PCI bus id")))?,
        ),
        None => None,
    };
    let end_reason = match (p.removed_at, p.end_reason) {
        (None, Some(_)) => return Err(FieldError::new("end_reason", "is given without removed_at")),
        (Some(_), r) => Some(r.unwrap_or(EndReason::Other).as_str().to_string()),
        (None, None) => None,
    };
    Ok(PlacementRow {
        cluster: required_text("cluster", p.cluster)?,
        part,
        installed_at: p.installed_at,
        removed_at: p.removed_at,
        hostname: required_text("node", p.node)?,
        gpu_index: p.gpu_index,
        pci_bus_id,
        uuid,
        end_reason,
    })
}

fn parse_removal(v: serde_json::Value, now: DateTime<Utc>, by: &str) -> Result<RemovalRow, FieldError> {
    let r: RemovalInput = de(v)?;
    let (_, _, part) = part_of(r.serial, r.uuid)?;
    not_future("removed_at", r.removed_at, now)?;
    Ok(RemovalRow {
        cluster: required_text("cluster", r.cluster)?,
        part,
        removed_at: r.removed_at,
        reason: r.reason.as_str().to_string(),
        ticket: optional_text("ticket", r.ticket)?,
        note: optional_text("note", r.note)?,
        removed_by: Some(by.to_string()),
    })
}

/// Import GPU history: parts with their attributes, placements with explicit intervals, removals.
///
/// For sites moving from a CMDB or a spreadsheet. Idempotent: parts by (cluster, serial or UUID),
/// placements by (cluster, part, installed_at), removals by (cluster, part, removed_at); sent again,
/// a record replaces what it said before. A part's attributes merge (a key sent again replaces its
/// value). Invalid records are refused alone. Up to 5 x `FAULTLINE_MAX_BATCH_ITEMS` records per list.
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
    AppJson(body): AppJson<HistoryImport>,
) -> ApiResult<Json<HistoryImportResponse>> {
    caller.require(Permission::Admin)?;
    let limit = ctx.config.limits.max_batch_items.saturating_mul(RECORDS_PER_BATCH_ITEM);
    let received = body.parts.len() + body.placements.len() + body.removals.len();
    for (name, n) in [("parts", body.parts.len()), ("placements", body.placements.len()), ("removals", body.removals.len())] {
        if n > limit {
            return Err(ApiError::PayloadTooLarge(format!("{n} {name}; the limit is {limit} per list")));
        }
    }
    let now = Utc::now();
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
        match parse_part(v, now).and_then(|p| if scope(&p.cluster) { Ok(p) } else { Err(forbidden(&p.cluster)) }) {
            Ok(p) => h.parts.push(p),
            Err(e) => take("parts", e, i, index),
        }
        index += 1;
    }
    for (i, v) in body.placements.into_iter().enumerate() {
        match parse_placement(v, now).and_then(|p| if scope(&p.cluster) { Ok(p) } else { Err(forbidden(&p.cluster)) }) {
            Ok(p) => h.placements.push(p),
            Err(e) => take("placements", e, i, index),
        }
        index += 1;
    }
    for (i, v) in body.removals.into_iter().enumerate() {
        match parse_removal(v, now, &caller.name)
            .and_then(|r| if scope(&r.cluster) { Ok(r) } else { Err(forbidden(&r.cluster)) })
        {
            Ok(r) => h.removals.push(r),
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
    let written = crate::ingest::gpus::import_history(&ctx.db, &caller.actor(), h).await?;
    Ok(Json(HistoryImportResponse {
        received,
        written,
        rejected,
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
/// Closes the part's open placement at `at` and records the removal with its ticket and note,
/// audited. A repaired part that comes back is reported by its new node as usual: a new placement
/// opens and its history is kept.
#[utoipa::path(
    post, path = "/v1/gpus/{part}/removals", tag = "parts", request_body = RemovalRequest,
    params(("part" = crate::domain::event::Text, Path, description = "The part's serial, else its UUID")),
    responses(
        (status = 201, description = "Removal recorded", body = RemovalResponse),
        (status = 400, description = "Body is not a valid removal", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or the cluster is outside its scope", body = ErrorBody),
        (status = 404, description = "No such part in the cluster", body = ErrorBody),
        (status = 409, description = "The part was placed after the removal time", body = ErrorBody),
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
        return Err(ApiError::Forbidden(format!("this token may not write cluster '{}'", req.cluster)));
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
            RemovalError::BeforePlacement { .. } => ApiError::Conflict(e.to_string()),
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
