//! Nodes' GPU sets: `PUT /v1/gpus/inventory` (many nodes) and `PUT /v1/nodes/{cluster}/{hostname}/gpus`
//! (one node, as JSON or as the node's raw `nvidia-smi -q -x` XML). Each set is diffed against the
//! open placements: a part that appears opens a placement, one that is gone closes it, a part
//! reported elsewhere moved.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::put;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::auth::Permission;
use crate::domain::event::{FieldError, MAX_FUTURE_SKEW_HOURS, required_text};
use crate::domain::part::{GpuReport, NodeGpus, validate_node_gpus};
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJsonItems, AppPath, content_type, read_body_limited};
use crate::ingest::batch::{Batch, RejectReason, RejectedItem, Route, count_stored};
use crate::ingest::gpus::InventoryOutcome;

/// `PUT /v1/nodes/{cluster}/{hostname}/gpus` is routed with its GET in the parent module.
pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/gpus/inventory", put(put_inventory))
}

/// One node's GPU set.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeGpusInput {
    #[schema(value_type = crate::domain::event::Text)]
    pub cluster: String,
    #[schema(value_type = crate::domain::event::Text)]
    pub hostname: String,
    /// When the set was read (default: now). Changes take effect at this time.
    pub observed_at: Option<DateTime<Utc>>,
    /// Every GPU in the node now (an empty list: the node has none).
    #[schema(max_items = 1024)]
    pub gpus: Vec<GpuReport>,
}

#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"nodes": [{"cluster": "train-a", "hostname": "h100-a-0138", "observed_at": "2026-11-02T10:00:00Z",
    "gpus": [{"index": 0, "pci_bus_id": "00000000:18:00.0", "serial": "1654922000137",
              "uuid": "GPU-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", "model": "NVIDIA H100 80GB HBM3",
              "board_part_number": "692-2G520-0200-000", "vbios": "96.00.74.00.0D", "driver": "550.54.14"}]}]}))]
pub struct GpuInventoryBatch {
    /// 1 to `FAULTLINE_MAX_BATCH_ITEMS` (10,000 by default) nodes.
    #[schema(value_type = Vec<NodeGpusInput>, min_items = 1, max_items = 10000)]
    pub nodes: Vec<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"received": 1, "applied": 1, "opened": 1, "closed": 1, "parts_written": 1, "stale": 0, "rejected": []}))]
pub struct GpuInventoryResponse {
    pub received: usize,
    /// Node sets applied.
    pub applied: usize,
    #[serde(flatten)]
    pub outcome: InventoryOutcome,
    pub rejected: Vec<RejectedItem>,
}

fn parse_node_gpus(value: serde_json::Value, now: DateTime<Utc>) -> Result<NodeGpus, FieldError> {
    let input: NodeGpusInput = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        FieldError {
            field: (path != "." && !path.is_empty()).then_some(path),
            message: e.into_inner().to_string(),
        }
    })?;
    validate_input(input, now)
}

fn validate_input(input: NodeGpusInput, now: DateTime<Utc>) -> Result<NodeGpus, FieldError> {
    let observed_at = input.observed_at.unwrap_or(now);
    if observed_at > now + chrono::Duration::hours(MAX_FUTURE_SKEW_HOURS) {
        return Err(FieldError::new(
            "observed_at",
            format!("{observed_at} is more than {MAX_FUTURE_SKEW_HOURS} h in the future"),
        ));
    }
    if input.gpus.len() > 1024 {
        return Err(FieldError::new(
            "gpus",
            format!("{} GPUs; a node has at most 1024", input.gpus.len()),
        ));
    }
    validate_node_gpus(
        required_text("cluster", input.cluster)?,
        required_text("hostname", input.hostname)?,
        observed_at,
        input.gpus,
    )
}

/// Report the GPU sets of many nodes.
///
/// For each node, its GPUs now: each part (its serial, else its UUID) in the same slot with the
/// same UUID changes nothing; a part not placed before opens a placement at `observed_at`; a part
/// placed elsewhere (another slot, node or cluster) is closed there as `moved`; the same serial
/// with a new UUID is `reidentified`; a part the node no longer reports is closed as `absent`. A
/// re-post that changes nothing writes nothing. Invalid nodes are rejected alone, with their index.
#[utoipa::path(
    put, path = "/v1/gpus/inventory", tag = "parts", request_body = GpuInventoryBatch,
    responses(
        (status = 200, description = "Valid node sets applied; invalid ones listed in `rejected`", body = GpuInventoryResponse),
        (status = 400, description = "Body is not valid JSON or the batch is empty", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not write inventory, or every node is outside the token's cluster scope", body = ErrorBody),
        (status = 413, description = "More nodes or bytes than the limits", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "Every node of the batch was invalid; `details.rejected` says why", body = ErrorBody),
        (status = 503, description = "Not admitted: too many request body bytes in flight, no database connection free within the acquire timeout, or the database does not answer. Nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
    ),
    security(("bearer" = []))
)]
pub async fn put_inventory(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppJsonItems(batch): AppJsonItems<GpuInventoryBatch>,
) -> ApiResult<Json<GpuInventoryResponse>> {
    caller.require(Permission::Ingest)?;
    let _timer = crate::ingest::timing::IngestTimer::start(Route::GpuInventory);
    let now = Utc::now();
    let batch = Batch::new(Route::GpuInventory, batch.nodes, ctx.config.limits.max_batch_items)?
        .parse(|value| parse_node_gpus(value, now).map_err(|e| (RejectReason::InvalidField, e)))
        .scoped(|n| n.cluster.as_str(), |c| caller.may_write(c))
        .dedup_by(
            "hostname",
            |n| (n.cluster.clone(), n.hostname.clone()),
            |n| format!("{}/{}", n.cluster, n.hostname),
        )
        .finish(caller.cluster.as_deref())?;
    let outcome = crate::ingest::gpus::apply_inventory(&ctx.db, &batch.items).await?;
    count_stored(Route::GpuInventory, batch.items.len(), 0);
    Ok(Json(GpuInventoryResponse {
        received: batch.received,
        applied: batch.items.len(),
        outcome,
        rejected: batch.rejected,
    }))
}

/// A node's GPU set as JSON (`{"observed_at": ..., "gpus": [...]}`), when not sent as XML.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"observed_at": "2026-11-02T10:00:00Z",
    "gpus": [{"index": 0, "serial": "1654922000137", "uuid": "GPU-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
              "model": "NVIDIA H100 80GB HBM3"}]}))]
pub struct OneNodeGpus {
    /// When the set was read (default: now).
    pub observed_at: Option<DateTime<Utc>>,
    #[schema(max_items = 1024)]
    pub gpus: Vec<GpuReport>,
}

/// Report one node's GPU set, as JSON or as the node's raw `nvidia-smi -q -x` output.
///
/// `application/xml` (or `text/xml`): the XML report `nvidia-smi -q -x` prints; each GPU's index is
/// its position in the report (nvidia-smi's PCI bus order), and serial, UUID, PCI bus id, product
/// name, board part number, VBIOS and driver version are read from it; the time is the request's.
/// `application/json`: `{"observed_at": ..., "gpus": [...]}`. Diffed as in `PUT /v1/gpus/inventory`.
#[utoipa::path(
    put, path = "/v1/nodes/{cluster}/{hostname}/gpus", tag = "parts",
    params(("cluster" = crate::domain::event::Text, Path, description = "Cluster", example = "c1"), ("hostname" = crate::domain::event::Text, Path, description = "Hostname", example = "gpu-node-001")),
    request_body(content(
        (OneNodeGpus = "application/json"),
        (String = "application/xml")
    )),
    responses(
        (status = 200, description = "The set was applied", body = GpuInventoryResponse),
        (status = 400, description = "Body is empty, not JSON, or not an nvidia-smi -q -x report", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not write inventory, or the cluster is outside its scope", body = ErrorBody),
        (status = 413, description = "Body larger than the limit", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json, application/xml or text/xml", body = ErrorBody),
        (status = 422, description = "A GPU is invalid (no serial nor UUID, a bad bus id, one part twice); `details.rejected` says which", body = ErrorBody),
        (status = 503, description = "Not admitted; nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
    ),
    security(("bearer" = []))
)]
pub async fn put_node_gpus(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath((cluster, hostname)): AppPath<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<GpuInventoryResponse>> {
    caller.require(Permission::Ingest)?;
    if !caller.may_write(&cluster) {
        return Err(ApiError::Forbidden(format!(
            "this token may not write cluster '{cluster}'"
        )));
    }
    let is_xml = match content_type(&headers).as_deref() {
        Some("application/xml" | "text/xml") => true,
        Some("application/json") => false,
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "Content-Type {} is not accepted: send application/json or the application/xml of nvidia-smi -q -x",
                other.unwrap_or("(none)")
            )));
        }
    };
    let bytes = read_body_limited(&headers, body, ctx.config.limits.max_body_bytes).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("empty_body", "the request body is empty"));
    }
    let now = Utc::now();
    let (observed_at, gpus) = if is_xml {
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| ApiError::bad_request("invalid_xml", format!("the body is not UTF-8: {e}")))?;
        let gpus =
            crate::logparse::nvidia_smi::parse_gpus(text).map_err(|e| ApiError::bad_request("invalid_xml", e))?;
        (None, gpus)
    } else {
        let one: OneNodeGpus = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::bad_request("invalid_json", format!("the body is not a node's GPU set: {e}")))?;
        (one.observed_at, one.gpus)
    };
    let input = NodeGpusInput {
        cluster,
        hostname,
        observed_at,
        gpus,
    };
    let node = validate_input(input, now).map_err(|e| ApiError::Unprocessable {
        message: format!("{}: {}", e.field.as_deref().unwrap_or("body"), e.message),
        details: Some(serde_json::json!({ "rejected": [RejectedItem {
            index: 0, reason: RejectReason::InvalidField, field: e.field.clone(), message: e.message.clone(),
        }] })),
    })?;
    let outcome = crate::ingest::gpus::apply_inventory(&ctx.db, std::slice::from_ref(&node)).await?;
    count_stored(Route::GpuInventory, 1, 0);
    Ok(Json(GpuInventoryResponse {
        received: 1,
        applied: 1,
        outcome,
        rejected: Vec::new(),
    }))
}
