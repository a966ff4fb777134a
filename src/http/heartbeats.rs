//! `POST /v1/heartbeats`: nodes that are alive but have nothing else to say, so the alert rule
//! that watches for silent nodes does not fire on a quiet, healthy one.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiContext;
use super::caller::Caller;
use super::extract::AppJson;
use crate::domain::auth::Permission;
use crate::domain::event::required_text;
use crate::http::error::{ApiError, ApiResult, ErrorBody};

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/heartbeats", post(heartbeats))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Heartbeats {
    #[schema(value_type = crate::domain::event::Text, example = "train-a")]
    pub cluster: String,
    /// The nodes that are alive (their agents answer).
    #[schema(value_type = Vec<crate::domain::event::Text>, max_items = 10000, example = json!(["h100-a-0138"]))]
    pub nodes: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatsStored {
    pub nodes: usize,
}

/// Record that nodes are alive (agent): the silence rule watches signals and heartbeats.
#[utoipa::path(
    post, path = "/v1/heartbeats", tag = "alerts", request_body = Heartbeats,
    responses(
        (status = 200, description = "Heartbeats recorded", body = HeartbeatsStored),
        (status = 400, description = "Malformed JSON, an empty cluster or node name", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not ingest, or the cluster is outside its scope", body = ErrorBody),
        (status = 413, description = "More nodes than a batch may hold", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn heartbeats(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppJson(h): AppJson<Heartbeats>,
) -> ApiResult<Json<HeartbeatsStored>> {
    caller.require(Permission::Ingest)?;
    let bad = |e: crate::domain::event::FieldError| {
        ApiError::bad_request(
            "invalid_field",
            format!("{}: {}", e.field.unwrap_or_default(), e.message),
        )
    };
    let cluster = required_text("cluster", h.cluster).map_err(bad)?;
    if !caller.may_write(&cluster) {
        return Err(ApiError::Forbidden(format!(
            "this token may not write cluster '{cluster}'"
        )));
    }
    if h.nodes.len() > ctx.config.limits.max_batch_items {
        return Err(ApiError::PayloadTooLarge(format!(
            "nodes: at most {} per request",
            ctx.config.limits.max_batch_items
        )));
    }
    let nodes = h
        .nodes
        .into_iter()
        .enumerate()
        .map(|(i, n)| required_text(&format!("nodes[{i}]"), n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    let nodes = crate::ingest::alerts::heartbeats(&ctx.db, &cluster, nodes).await?;
    Ok(Json(HeartbeatsStored { nodes }))
}
