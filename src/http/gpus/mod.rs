//! GPU parts: the parts list (`GET /v1/gpus`), one part's timeline (`GET /v1/gpus/{part}`) and a
//! node's slots over time (`GET /v1/nodes/{cluster}/{hostname}/gpus`); the writes live in
//! `inventory` (nodes' GPU sets) and `history` (imports and removals).

pub mod history;
pub mod inventory;
mod records;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::analytics::part_life::PartState;
use crate::domain::auth::{Permission, hex, unhex};
use crate::domain::gpu::GpuGeneration;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppPath, AppQuery};
use crate::queries::gpus::{GpuFilter, GpuSummary, GpuTimeline, PlacementView};

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/gpus", get(list_gpus))
        .route("/v1/gpus/{part}", get(gpu_timeline))
        .route(
            "/v1/nodes/{cluster}/{hostname}/gpus",
            get(node_gpus).put(inventory::put_node_gpus),
        )
        .merge(inventory::router())
        .merge(history::router())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GpuQuery {
    pub cluster: Option<String>,
    /// The model as reported, e.g. "NVIDIA H100 80GB HBM3".
    pub model: Option<String>,
    pub generation: Option<GpuGeneration>,
    /// Parts installed in this node now.
    pub node: Option<String>,
    pub state: Option<PartState>,
    /// The instant installed time is counted to (RFC 3339; default now).
    pub to: Option<DateTime<Utc>>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GpuPage {
    pub gpus: Vec<GpuSummary>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// List GPU parts, in identity order, with their state, installed time and failures.
///
/// A part is its serial, else its UUID. `installed_days` sums its placements (time on a shelf or
/// at the vendor does not count); `failure_count` counts failures whose root signal resolved to it. A
/// part that served in several clusters is listed once, under the cluster it is in now; a token
/// scoped to a cluster sees that cluster's placements only.
#[utoipa::path(
    get, path = "/v1/gpus", tag = "parts", params(GpuQuery),
    responses(
        (status = 200, description = "One page of parts", body = GpuPage),
        (status = 400, description = "Invalid filter, limit or cursor", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not read inventory, or the cluster is outside its scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_gpus(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(q): AppQuery<GpuQuery>,
) -> ApiResult<Json<GpuPage>> {
    caller.require(Permission::ReadInventory)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("limit {limit} is not in 1..=1000"),
        ));
    }
    let after = match q.cursor.as_deref() {
        Some(c) => Some(
            unhex(c)
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| ApiError::bad_request("invalid_query", "cursor is not one this server issued"))?,
        ),
        None => None,
    };
    let filter = GpuFilter {
        cluster: caller.read_cluster(q.cluster)?,
        model: q.model,
        generation: q.generation,
        node: q.node,
        state: q.state,
        after,
        limit,
    };
    let (gpus, more) = crate::queries::gpus::list(&ctx.read_db, &filter, q.to.unwrap_or_else(Utc::now)).await?;
    let next_cursor = more.then(|| gpus.last().map(|g| hex(g.part.as_bytes()))).flatten();
    Ok(Json(GpuPage { gpus, next_cursor }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ScopeQuery {
    /// Only this cluster's placements, removals and failures (a scoped token always reads its own).
    pub cluster: Option<String>,
    /// The instant installed time is counted to (RFC 3339; default now).
    pub to: Option<DateTime<Utc>>,
}

/// One part's timeline: its placements (slots and intervals), removals and failures, in time order.
///
/// `part` is its serial, or any UUID it had (a GPU's UUID changes after some repairs; its serial
/// does not).
#[utoipa::path(
    get, path = "/v1/gpus/{part}", tag = "parts",
    params(("part" = String, Path, description = "The part's serial, or a UUID it had", example = "1650123456789"), ScopeQuery),
    responses(
        (status = 200, description = "The part's timeline", body = GpuTimeline),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not read inventory, or the cluster is outside its scope", body = ErrorBody),
        (status = 404, description = "No such part (in the caller's cluster)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn gpu_timeline(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(part): AppPath<String>,
    AppQuery(q): AppQuery<ScopeQuery>,
) -> ApiResult<Json<GpuTimeline>> {
    caller.require(Permission::ReadInventory)?;
    let cluster = caller.read_cluster(q.cluster)?;
    crate::queries::gpus::timeline(&ctx.read_db, cluster.as_deref(), &part, q.to.unwrap_or_else(Utc::now))
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("no GPU part '{part}'")))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NodeSlots {
    pub cluster: String,
    pub hostname: String,
    /// Every part placed in the node, in (installed_at, gpu_index) order; open ones have no `removed_at`.
    pub placements: Vec<PlacementView>,
}

/// A node's GPU slots over time: which part sat in which slot, when, and why it left.
#[utoipa::path(
    get, path = "/v1/nodes/{cluster}/{hostname}/gpus", tag = "parts",
    params(("cluster" = String, Path, description = "Cluster", example = "c1"), ("hostname" = String, Path, description = "Hostname", example = "gpu-node-001")),
    responses(
        (status = 200, description = "The node's placements (empty when none were reported)", body = NodeSlots),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not read inventory, or the cluster is outside its scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn node_gpus(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath((cluster, hostname)): AppPath<(String, String)>,
) -> ApiResult<Json<NodeSlots>> {
    caller.require(Permission::ReadInventory)?;
    if !caller.may_read(&cluster) {
        return Err(ApiError::Forbidden(format!(
            "this token may not read cluster '{cluster}'"
        )));
    }
    let placements = crate::queries::gpus::node_slots(&ctx.read_db, &cluster, &hostname).await?;
    Ok(Json(NodeSlots {
        cluster,
        hostname,
        placements,
    }))
}
