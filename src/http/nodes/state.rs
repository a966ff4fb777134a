//! A node's service state: drained and returned to service (POST), and its transitions and
//! out-of-service time in a window (GET).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::analytics::cost::out_of_service_hours;
use crate::analytics::headline::round6;
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::analytics::WindowQuery;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath, AppQuery};
use crate::ingest::lifecycle::{Transition, WriteError};
use crate::storage::lifecycle as store;

pub fn router() -> Router<ApiContext> {
    Router::new().route(
        "/v1/nodes/{cluster}/{hostname}/state",
        get(node_state).post(record_node_state),
    )
}

/// drained: out of service; returned: back in service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeServiceState {
    Drained,
    Returned,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeStateInput {
    pub state: NodeServiceState,
    /// When it happened (default: now).
    pub at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    /// The failure that caused a drain, if known.
    pub failure_id: Option<Uuid>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NodeTransitionView {
    pub state: NodeServiceState,
    pub at: DateTime<Utc>,
    pub reason: Option<String>,
    /// `api` (this endpoint) or `event` (node_drain / node_resume signals).
    pub source: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NodeStateView {
    pub cluster: String,
    pub hostname: String,
    /// State at the end of the window (`returned` when never drained).
    pub state: NodeServiceState,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Hours drained inside [from, to).
    pub out_of_service_hours: f64,
    /// out_of_service_hours x the node's GPUs.
    pub out_of_service_gpu_hours: f64,
    /// The state entering the window (its last earlier transition) and every transition in it.
    pub transitions: Vec<NodeTransitionView>,
}

async fn node_state_view(
    ctx: &ApiContext,
    cluster: &str,
    hostname: &str,
    gpus: i32,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> ApiResult<NodeStateView> {
    let rows = store::transitions(&ctx.db, from, to, Some(cluster), Some(hostname)).await?;
    let marks: Vec<(DateTime<Utc>, bool)> = rows.iter().map(|r| (r.at, r.state == "drained")).collect();
    let hours = out_of_service_hours(&marks, from, to);
    let drained = marks.last().is_some_and(|m| m.1);
    Ok(NodeStateView {
        cluster: cluster.to_string(),
        hostname: hostname.to_string(),
        state: if drained {
            NodeServiceState::Drained
        } else {
            NodeServiceState::Returned
        },
        from,
        to,
        out_of_service_hours: round6(hours),
        out_of_service_gpu_hours: round6(hours * f64::from(gpus)),
        transitions: rows
            .into_iter()
            .map(|r| NodeTransitionView {
                state: if r.state == "drained" {
                    NodeServiceState::Drained
                } else {
                    NodeServiceState::Returned
                },
                at: r.at,
                reason: r.reason,
                source: r.source,
            })
            .collect(),
    })
}

/// Record that a node was drained (taken out of service) or returned to service.
///
/// Agents may also send the same fact as signals of kind `node_drain` / `node_resume` on the node;
/// both are read together. A node's out-of-service time is the time between a drain and the next
/// return. The answer is the node's state over the 30 days before the transition.
#[utoipa::path(
    post, path = "/v1/nodes/{cluster}/{hostname}/state", tag = "inventory", request_body = NodeStateInput,
    params(("cluster" = String, Path, description = "Cluster", example = "c1"), ("hostname" = String, Path, description = "Hostname in the inventory", example = "gpu-node-001")),
    responses(
        (status = 201, description = "Transition recorded; the node's state and out-of-service time", body = NodeStateView),
        (status = 400, description = "Body is not a valid transition", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not write inventory, or the cluster is outside its scope", body = ErrorBody),
        (status = 404, description = "The node is not in the inventory", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "The time is more than 24 h in the future, or the reason too long", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn record_node_state(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath((cluster, hostname)): AppPath<(String, String)>,
    AppJson(input): AppJson<NodeStateInput>,
) -> ApiResult<(StatusCode, Json<NodeStateView>)> {
    caller.require(Permission::Ingest)?;
    if !caller.may_write(&cluster) {
        return Err(ApiError::Forbidden(format!(
            "this token may not write cluster '{cluster}'"
        )));
    }
    let (gpus, at) = crate::ingest::lifecycle::record_transition(
        &ctx.db,
        Transition {
            cluster: &cluster,
            hostname: &hostname,
            drained: input.state == NodeServiceState::Drained,
            at: input.at,
            reason: input.reason,
            failure_id: input.failure_id,
            by: &caller.name,
        },
    )
    .await
    .map_err(|e| match e {
        WriteError::NotFound => ApiError::NotFound(format!("no node {cluster}/{hostname} in the inventory")),
        WriteError::Forbidden(c) => ApiError::Forbidden(format!("this token may not write cluster '{c}'")),
        WriteError::Invalid(e) => ApiError::Unprocessable {
            message: format!("{}: {}", e.field.as_deref().unwrap_or("body"), e.message),
            details: None,
        },
        WriteError::Db(e) => e.into(),
    })?;
    let now = Utc::now();
    let to = at.max(now) + chrono::Duration::milliseconds(1);
    let v = node_state_view(
        &ctx,
        &cluster,
        &hostname,
        gpus,
        to - chrono::Duration::days(crate::domain::window::DEFAULT_WINDOW_DAYS),
        to,
    )
    .await?;
    Ok((StatusCode::CREATED, Json(v)))
}

/// A node's service state, its transitions and out-of-service time in the window.
#[utoipa::path(
    get, path = "/v1/nodes/{cluster}/{hostname}/state", tag = "inventory",
    params(("cluster" = String, Path, description = "Cluster", example = "c1"), ("hostname" = String, Path, description = "Hostname in the inventory", example = "gpu-node-001"), WindowQuery),
    responses(
        (status = 200, description = "State at the end of the window, transitions and out-of-service hours in it", body = NodeStateView),
        (status = 400, description = "Invalid window", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not read inventory", body = ErrorBody),
        (status = 404, description = "The node is not in the inventory", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn node_state(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath((cluster, hostname)): AppPath<(String, String)>,
    AppQuery(wq): AppQuery<WindowQuery>,
) -> ApiResult<Json<NodeStateView>> {
    caller.require(Permission::ReadInventory)?;
    caller.read_cluster(Some(cluster.clone()))?;
    let w = wq.window(&caller)?;
    let (from, to) = (w.from, w.to);
    let gpus = store::node_gpus(&ctx.db, &cluster, &hostname)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no node {cluster}/{hostname} in the inventory")))?;
    Ok(Json(node_state_view(&ctx, &cluster, &hostname, gpus, from, to).await?))
}
