//! The failure lifecycle: `PATCH /v1/failures/{id}` (resolution, recovery phases, post-mortem
//! cause) and `GET /v1/failures/{id}/history` (who changed what, when); the same for many
//! failures at once in [`super::import`].

use axum::extract::State;
use axum::routing::{get, patch};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::analytics::cost::{Phases, downtime_minutes};
use crate::analytics::headline::round6;
use crate::domain::auth::Permission;
use crate::domain::lifecycle::{LifecyclePatch, Resolution};
use crate::domain::taxonomy::{Category, Component, RootCause};
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::ingest::lifecycle::PatchError;
use crate::storage::lifecycle::{self as store, FailureAnchor, LifecycleRow};

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/failures/{id}", patch(patch_failure))
        .route("/v1/failures/{id}/history", get(failure_history))
}

/// Recovery phases in minutes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RecoveryMinutes {
    pub detection: Option<f64>,
    pub resubmission: Option<f64>,
    pub setup: Option<f64>,
    pub recomputation: Option<f64>,
}

/// A failure's lifecycle beside its automatic classification.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LifecycleView {
    /// The failure it belongs to now.
    pub failure_id: Uuid,
    /// Id of the lifecycle record: the failure's id when it was first patched. It differs from
    /// failure_id when a late, earlier signal re-keyed the failure; the lifecycle followed it.
    pub lifecycle_id: Uuid,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolution: Option<Resolution>,
    pub recovery_minutes: RecoveryMinutes,
    /// Sum of the recorded phases, else resolved_at - first_at, else null.
    pub downtime_minutes: Option<f64>,
    /// The classification from the signals (never changed by a patch).
    pub automatic_root_cause: RootCause,
    /// The post-mortem's root cause, when one was recorded.
    pub post_mortem_root_cause: Option<RootCause>,
    /// What the analytics use: the post-mortem's root cause, else the automatic one.
    pub effective_root_cause: RootCause,
    pub note: Option<String>,
    pub updated_at: Option<DateTime<Utc>>,
    pub updated_by: Option<String>,
}

fn automatic(f: &FailureAnchor) -> RootCause {
    RootCause {
        category: Category::parse(&f.category).unwrap_or(Category::Unknown),
        component: Component::parse(&f.component).unwrap_or(Component::Unknown),
    }
}

fn view(f: &FailureAnchor, row: Option<&LifecycleRow>) -> LifecycleView {
    let l = row.map(LifecycleRow::lifecycle).unwrap_or_default();
    let phases = Phases {
        detection: l.detection_minutes,
        resubmission: l.resubmission_minutes,
        setup: l.setup_minutes,
        recomputation: l.recomputation_minutes,
    };
    let auto = automatic(f);
    LifecycleView {
        failure_id: f.id,
        lifecycle_id: row.map_or(f.id, |r| r.failure_id),
        resolved_at: l.resolved_at,
        resolution: l.resolution,
        recovery_minutes: RecoveryMinutes {
            detection: phases.detection,
            resubmission: phases.resubmission,
            setup: phases.setup,
            recomputation: phases.recomputation,
        },
        downtime_minutes: downtime_minutes(&phases, f.first_at, l.resolved_at).map(round6),
        automatic_root_cause: auto,
        post_mortem_root_cause: l.post_mortem,
        effective_root_cause: l.post_mortem.unwrap_or(auto),
        note: l.note,
        updated_at: row.map(|r| r.updated_at),
        updated_by: row.map(|r| r.updated_by.clone()),
    }
}

fn parse_id(id: &str) -> ApiResult<Uuid> {
    Uuid::try_parse(id)
        .map_err(|e| ApiError::bad_request("invalid_path", format!("failure id '{id}' is not a UUID: {e}")))
}

/// Record a failure's resolution, recovery phases, post-mortem root cause or note.
///
/// Merge-patch semantics: an absent field is left as it is, `null` clears it. The lifecycle is stored
/// beside the failure (failures are rebuilt when signals arrive late or the catalog changes) and
/// anchored to its signals: when a late, earlier signal gives the failure a new id, the lifecycle
/// follows it. The post-mortem root cause overrides the automatic one in the analytics; the automatic
/// one and its evidence are kept. Every change is recorded with the caller's token name and the time
/// (`GET /v1/failures/{id}/history`).
#[utoipa::path(
    patch, path = "/v1/failures/{id}", tag = "failures", request_body = LifecyclePatch,
    params(("id" = Uuid, Path, description = "Failure id")),
    responses(
        (status = 200, description = "The lifecycle after the patch", body = LifecycleView),
        (status = 400, description = "The id is not a UUID, the body is not a valid patch or is empty", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role is not agent or admin, or the failure is outside the token's cluster", body = ErrorBody),
        (status = 404, description = "No failure with this id", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "A value is invalid (component outside its category, negative minutes, resolution before the failure)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn patch_failure(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(id): AppPath<String>,
    AppJson(raw): AppJson<serde_json::Map<String, serde_json::Value>>,
) -> ApiResult<Json<LifecycleView>> {
    caller.require(Permission::Ingest)?;
    // Through a JSON object: serde would also read a struct from an array (`[null, null]`).
    let p: LifecyclePatch = serde_path_to_error::deserialize(serde_json::Value::Object(raw))
        .map_err(|e| ApiError::bad_request("invalid_json", format!("at `{}`: {}", e.path(), e.inner())))?;
    let id = parse_id(&id)?;
    if p.is_empty() {
        return Err(ApiError::bad_request(
            "empty_patch",
            "the patch changes nothing: send at least one field",
        ));
    }
    let may_write = |cluster: &str| caller.may_write(cluster);
    let done = crate::ingest::lifecycle::patch(&ctx.db, &caller.actor(), may_write, id, &p, Utc::now())
        .await
        .map_err(|e| match e {
            PatchError::NotFound => ApiError::NotFound(format!("no failure {id}")),
            PatchError::OutOfScope(cluster) => {
                ApiError::Forbidden(format!("this token may not write cluster '{cluster}'"))
            }
            PatchError::Invalid(e) => ApiError::Unprocessable {
                message: format!("{}: {}", e.field.as_deref().unwrap_or("body"), e.message),
                details: Some(serde_json::json!({ "field": e.field })),
            },
            PatchError::Database(e) => e.into(),
        })?;
    Ok(Json(view(&done.failure, done.lifecycle.as_ref())))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LifecycleChange {
    pub lifecycle_id: Uuid,
    pub changed_at: DateTime<Utc>,
    /// Name of the token that made the change.
    pub changed_by: String,
    /// Per field: `{"from": old, "to": new}`.
    #[schema(value_type = HashMap<String, serde_json::Value>)]
    pub changes: serde_json::Value,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FailureHistory {
    /// The failure's lifecycle now (all nulls when never patched).
    pub lifecycle: LifecycleView,
    /// Every change, oldest first.
    pub changes: Vec<LifecycleChange>,
}

/// The lifecycle of a failure and every change made to it, with who and when.
#[utoipa::path(
    get, path = "/v1/failures/{id}/history", tag = "failures",
    params(("id" = Uuid, Path, description = "Failure id")),
    responses(
        (status = 200, description = "The current lifecycle and its audit trail, oldest change first", body = FailureHistory),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may neither query nor ingest", body = ErrorBody),
        (status = 404, description = "No failure with this id, or it is of a cluster outside the token's scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn failure_history(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(id): AppPath<String>,
) -> ApiResult<Json<FailureHistory>> {
    if caller.require(Permission::Query).is_err() {
        caller.require(Permission::Ingest)?;
    }
    let id = parse_id(&id)?;
    let mut conn = ctx.db.acquire().await?;
    let f = store::failure_anchor(&mut conn, id)
        .await?
        .filter(|f| caller.may_read(&f.cluster))
        .ok_or_else(|| ApiError::NotFound(format!("no failure {id}")))?;
    let rows = store::for_failure(&mut conn, &f).await?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.failure_id).collect();
    let changes = store::changes(&mut conn, &ids)
        .await?
        .into_iter()
        .map(|c| LifecycleChange {
            lifecycle_id: c.failure_id,
            changed_at: c.changed_at,
            changed_by: c.changed_by,
            changes: c.changes,
        })
        .collect();
    Ok(Json(FailureHistory {
        lifecycle: view(&f, rows.first()),
        changes,
    }))
}
