//! Fleet inventory: `PUT /v1/nodes` (bulk upsert) and `GET /v1/nodes`.

pub mod state;

use axum::extract::State;
use axum::routing::put;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::ApiContext;
use super::caller::Caller;
use super::extract::{AppJsonItems, AppQuery};
use crate::domain::auth::{Permission, hex};
use crate::domain::gpu::GpuGeneration;
use crate::domain::node::{NodeInput, parse_node};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::ingest::batch::{Batch, RejectReason, RejectedItem, Route, count_stored};
use crate::storage;
use crate::storage::nodes::NodeFilter;

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/nodes", put(upsert_nodes).get(list_nodes))
        .merge(state::router())
}

#[derive(Deserialize, ToSchema)]
pub struct NodeBatch {
    /// 1 to `FAULTLINE_MAX_BATCH_ITEMS` (10,000 by default) nodes.
    #[schema(value_type = Vec<NodeInput>, min_items = 1, max_items = 10000)]
    pub nodes: Vec<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NodeUpsertResponse {
    pub received: usize,
    /// Nodes inserted or updated.
    pub upserted: usize,
    pub rejected: Vec<RejectedItem>,
}

/// Register or update nodes in bulk.
///
/// Upsert key: (cluster, hostname). The GPU generation is derived from `gpu_model`. An absent
/// `in_service_since` keeps the earlier value (first registration time for a new node); `retired_at`
/// is replaced by what is sent. At most `FAULTLINE_MAX_BATCH_ITEMS` nodes per call. Invalid items are
/// rejected alone, with their index.
#[utoipa::path(
    put, path = "/v1/nodes", tag = "inventory", request_body = NodeBatch,
    responses(
        (status = 200, description = "Valid nodes stored; invalid ones listed in `rejected`", body = NodeUpsertResponse),
        (status = 400, description = "Body is not valid JSON or the batch is empty", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not write inventory, or every node is outside the token's cluster scope", body = ErrorBody),
        (status = 413, description = "More nodes or bytes than the limits", body = ErrorBody),
        (status = 503, description = "Not admitted: too many request body bytes in flight, no database connection free within the acquire timeout, or the database does not answer. Nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "Every node of the batch was invalid; `details.rejected` says why", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn upsert_nodes(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppJsonItems(batch): AppJsonItems<NodeBatch>,
) -> ApiResult<Json<NodeUpsertResponse>> {
    caller.require(Permission::Ingest)?;
    let _timer = crate::ingest::timing::IngestTimer::start(Route::Nodes);
    let batch = Batch::new(Route::Nodes, batch.nodes, ctx.config.limits.max_batch_items)?
        .parse(|value| parse_node(value).map_err(|e| (RejectReason::InvalidField, e)))
        .scoped(|n| n.cluster.as_str(), |c| caller.may_write(c))
        .dedup_by(
            "hostname",
            |n| (n.cluster.clone(), n.hostname.clone()),
            |n| format!("{}/{}", n.cluster, n.hostname),
        )
        .finish(caller.cluster.as_deref())?;
    let upserted = crate::ingest::inventory::upsert_nodes(&ctx.db, &batch.items).await?;
    count_stored(Route::Nodes, upserted, 0);
    let (received, rejected) = (batch.received, batch.rejected);
    Ok(Json(NodeUpsertResponse {
        received,
        upserted,
        rejected,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NodeQuery {
    pub cluster: Option<String>,
    /// kepler, maxwell, pascal, volta, turing, ampere, ada, hopper, blackwell or unknown.
    #[param(value_type = Option<crate::domain::gpu::GpuGeneration>)]
    pub generation: Option<String>,
    pub group: Option<String>,
    pub rack: Option<String>,
    pub gpu_model: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NodeView {
    pub cluster: String,
    pub hostname: String,
    pub gpu_model: String,
    /// Derived from gpu_model.
    #[schema(value_type = crate::domain::gpu::GpuGeneration)]
    pub gpu_generation: String,
    pub gpu_count: i32,
    pub group: Option<String>,
    pub rack: Option<String>,
    pub in_service_since: DateTime<Utc>,
    pub retired_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NodePage {
    pub nodes: Vec<NodeView>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// List nodes, ordered by (cluster, hostname), with keyset pagination.
#[utoipa::path(
    get, path = "/v1/nodes", tag = "inventory", params(NodeQuery),
    responses(
        (status = 200, description = "One page of nodes", body = NodePage),
        (status = 400, description = "Invalid filter, limit or cursor", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_nodes(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(q): AppQuery<NodeQuery>,
) -> ApiResult<Json<NodePage>> {
    caller.require(Permission::ReadInventory)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("limit {limit} is not in 1..=1000"),
        ));
    }
    if let Some(g) = &q.generation
        && GpuGeneration::parse(g).is_none()
    {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!(
                "generation '{g}' is not one of kepler, maxwell, pascal, volta, turing, ampere, ada, hopper, blackwell, unknown"
            ),
        ));
    }
    let after = q.cursor.as_deref().map(decode_cursor).transpose()?;
    let filter = NodeFilter {
        cluster: caller.read_cluster(q.cluster)?,
        generation: q.generation,
        group: q.group,
        rack: q.rack,
        gpu_model: q.gpu_model,
        after,
        limit: limit + 1,
    };
    let mut rows = storage::nodes::list(&ctx.read_db, &filter).await?;
    let next_cursor = if rows.len() as i64 > limit {
        rows.truncate(limit as usize);
        rows.last().map(|r| encode_cursor(&r.cluster, &r.hostname))
    } else {
        None
    };
    let nodes = rows
        .into_iter()
        .map(|r| NodeView {
            cluster: r.cluster,
            hostname: r.hostname,
            gpu_model: r.gpu_model,
            gpu_generation: r.gpu_generation,
            gpu_count: r.gpu_count,
            group: r.group_label,
            rack: r.rack,
            in_service_since: r.in_service_since,
            retired_at: r.retired_at,
            updated_at: r.updated_at,
        })
        .collect();
    Ok(Json(NodePage { nodes, next_cursor }))
}

/// Cursor: hex of "cluster\0hostname" (opaque to clients, safe in a URL).
fn encode_cursor(cluster: &str, hostname: &str) -> String {
    hex(format!("{cluster}\0{hostname}").as_bytes())
}

fn decode_cursor(cursor: &str) -> ApiResult<(String, String)> {
    let bad = || ApiError::bad_request("invalid_query", "cursor is not one this server issued");
    let bytes = crate::domain::auth::unhex(cursor).ok_or_else(bad)?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (c, h) = text.split_once('\0').ok_or_else(bad)?;
    Ok((c.to_string(), h.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_garbage_is_refused() {
        let c = encode_cursor("c1", "node-07");
        assert_eq!(decode_cursor(&c).unwrap(), ("c1".to_string(), "node-07".to_string()));
        assert!(decode_cursor("zz").is_err());
        assert!(decode_cursor("abc").is_err());
        assert!(decode_cursor(&hex(b"no-separator")).is_err());
    }
}
