//! `/v1/sync-cursors/{cluster}/{source}`: how far a cluster's syncer (`faultline slurm sync`) has
//! read its source, kept by the server so a restarted syncer, or a second one, goes on from there.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiContext;
use super::caller::Caller;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{AppJson, AppPath};
use crate::domain::auth::Permission;

pub fn router() -> Router<ApiContext> {
    Router::new().route(
        "/v1/sync-cursors/{cluster}/{source}",
        get(get_cursor).put(advance_cursor),
    )
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"cluster": "c1", "source": "slurm-jobs", "position": "2026-12-02T10:00:00Z",
    "updated_at": "2026-12-02T10:00:03Z", "updated_by": "slurm-sync"}))]
pub struct SyncCursorView {
    pub cluster: String,
    pub source: String,
    /// The end of the last window whose records were all stored; absent before the first sync.
    pub position: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
    /// The token that moved it last.
    pub updated_by: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncCursorInput {
    /// The end of the window just stored. A position behind the stored one leaves it where it is.
    pub position: DateTime<Utc>,
}

/// A source name: lower-case letters, digits, `.`, `_` and `-`, up to 64.
fn source_name(source: &str) -> Result<(), ApiError> {
    let ok = (1..=64).contains(&source.len())
        && source
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::BadRequest {
            code: "invalid_path",
            message: format!("source '{source}': 1 to 64 lower-case letters, digits, '.', '_' or '-'"),
        })
    }
}

fn view(cluster: String, source: String, c: Option<crate::storage::sync_cursors::SyncCursor>) -> SyncCursorView {
    SyncCursorView {
        cluster,
        source,
        position: c.as_ref().map(|c| c.position),
        updated_at: c.as_ref().map(|c| c.updated_at),
        updated_by: c.and_then(|c| c.updated_by),
    }
}

/// Where a cluster's sync of a source stands.
#[utoipa::path(
    get, path = "/v1/sync-cursors/{cluster}/{source}", tag = "ingest",
    params(("cluster" = String, Path, description = "Cluster"),
           ("source" = String, Path, description = "Sync source, e.g. `slurm-jobs`, `slurm-events`", pattern = "^[a-z0-9._-]{1,64}$")),
    responses(
        (status = 200, description = "The cursor (`position` absent before the first sync)", body = SyncCursorView),
        (status = 400, description = "The source name is not valid", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not read inventory, or the cluster is outside its scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_cursor(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath((cluster, source)): AppPath<(String, String)>,
) -> ApiResult<Json<SyncCursorView>> {
    caller.require(Permission::ReadInventory)?;
    if !caller.may_read(&cluster) {
        return Err(ApiError::Forbidden(format!(
            "this token may not read cluster '{cluster}'"
        )));
    }
    source_name(&source)?;
    let c = crate::ingest::sync_cursors::cursor(&ctx.db, &cluster, &source).await?;
    Ok(Json(view(cluster, source, c)))
}

/// Record that a window of a source was stored: the cursor moves to `position` unless it is
/// already further (two syncers of one cluster leave it at the furthest).
#[utoipa::path(
    put, path = "/v1/sync-cursors/{cluster}/{source}", tag = "ingest", request_body = SyncCursorInput,
    params(("cluster" = String, Path, description = "Cluster"),
           ("source" = String, Path, description = "Sync source, e.g. `slurm-jobs`, `slurm-events`", pattern = "^[a-z0-9._-]{1,64}$")),
    responses(
        (status = 200, description = "Where the cursor stands now", body = SyncCursorView),
        (status = 400, description = "The source name or the body is not valid", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not ingest, or the cluster is outside its scope", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "The position is more than 24 h in the future", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn advance_cursor(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath((cluster, source)): AppPath<(String, String)>,
    AppJson(input): AppJson<SyncCursorInput>,
) -> ApiResult<Json<SyncCursorView>> {
    caller.require(Permission::Ingest)?;
    if !caller.may_write(&cluster) {
        return Err(ApiError::Forbidden(format!(
            "this token may not sync cluster '{cluster}'"
        )));
    }
    source_name(&source)?;
    if input.position > Utc::now() + chrono::Duration::hours(24) {
        return Err(ApiError::Unprocessable {
            message: "position: more than 24 h in the future".into(),
            details: None,
        });
    }
    let c = crate::ingest::sync_cursors::advance(&ctx.db, &cluster, &source, input.position, &caller.name).await?;
    Ok(Json(view(cluster, source, Some(c))))
}
