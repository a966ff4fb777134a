//! Writing what people record after a failure: the failure lifecycle (`PATCH /v1/failures/{id}`:
//! the new state, its history entry, its audit row and the rollups' move in one transaction, under
//! the failure's lock) and node drains and returns (`POST /v1/nodes/{cluster}/{hostname}/state`).
//! Shared by the HTTP handlers and `serve --demo`.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::audit;
use crate::domain::audit::{Actor, AuditAction};
use crate::domain::event::{FieldError, optional_text};
use crate::domain::lifecycle::{self, FieldChange, LifecyclePatch};
use crate::ingest::rollups;
use crate::storage::lifecycle::{self as store, FailureAnchor, LifecycleRow, NewTransition};

#[derive(Debug)]
pub enum PatchError {
    NotFound,
    /// The failure's cluster is outside the caller's write scope.
    OutOfScope(String),
    Invalid(FieldError),
    Database(sqlx::Error),
}

impl From<sqlx::Error> for PatchError {
    fn from(e: sqlx::Error) -> Self {
        PatchError::Database(e)
    }
}

pub struct Patched {
    pub failure: FailureAnchor,
    pub lifecycle: Option<LifecycleRow>,
}

/// Applies `patch` to failure `id` for `actor`, who may write the clusters `may_write` allows.
pub async fn patch(
    db: &PgPool,
    actor: &Actor,
    may_write: impl Fn(&str) -> bool,
    id: Uuid,
    patch: &LifecyclePatch,
    now: DateTime<Utc>,
) -> Result<Patched, PatchError> {
    let mut tx = db.begin().await?;
    let f = store::failure_anchor(&mut tx, id).await?.ok_or(PatchError::NotFound)?;
    if !may_write(&f.cluster) {
        return Err(PatchError::OutOfScope(f.cluster));
    }
    store::lock(&mut tx, &f).await?;
    let rows = store::for_failure(&mut tx, &f).await?;
    let current = rows.first();
    let before = current.map(LifecycleRow::lifecycle).unwrap_or_default();
    let (after, changes) = lifecycle::apply(&before, patch, f.first_at, now).map_err(PatchError::Invalid)?;
    let lifecycle_id = current.map_or(f.id, |r| r.failure_id);
    if !changes.is_empty() || current.is_none() {
        // A post-mortem cause changes what the failure counts under: the rollups move with it.
        let counted = rollups::before_lifecycle_write(&mut tx, &f.cluster, &f.correlation_key).await?;
        store::save(&mut tx, lifecycle_id, &f, &after, &changes, &actor.name).await?;
        rollups::after_lifecycle_write(&mut tx, &f.cluster, &f.correlation_key, &counted).await?;
        let details = audit_details(&f, lifecycle_id, &changes);
        audit::record(&mut tx, actor, AuditAction::FailureLifecycle, &id.to_string(), details).await?;
    }
    let saved = store::by_lifecycle_id(&mut tx, lifecycle_id).await?;
    tx.commit().await?;
    Ok(Patched {
        failure: f,
        lifecycle: saved,
    })
}

/// The audit row of a patch: the failure's cluster, its lifecycle id and each field's
/// `{"from", "to"}` (the same as its history entry).
fn audit_details(f: &FailureAnchor, lifecycle_id: Uuid, changes: &[FieldChange]) -> serde_json::Value {
    let changes: serde_json::Map<String, serde_json::Value> = changes
        .iter()
        .map(|c| (c.field.to_string(), serde_json::json!({"from": c.from, "to": c.to})))
        .collect();
    serde_json::json!({"cluster": f.cluster, "lifecycle_id": lifecycle_id, "changes": changes})
}

#[derive(Debug)]
pub enum WriteError {
    /// No failure with the id, or no node with the name in the inventory.
    NotFound,
    /// The caller may not write this cluster (named).
    Forbidden(String),
    Invalid(FieldError),
    Db(sqlx::Error),
}

impl From<sqlx::Error> for WriteError {
    fn from(e: sqlx::Error) -> Self {
        WriteError::Db(e)
    }
}

/// A drain (`drained`) or return to service of a node, as received.
pub struct Transition<'a> {
    pub cluster: &'a str,
    pub hostname: &'a str,
    pub drained: bool,
    /// Default: now.
    pub at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    pub failure_id: Option<Uuid>,
    pub by: &'a str,
}

/// Records a node's transition after checking it (the node is in the inventory, the time at most
/// 24 h ahead, the reason valid). Returns the node's GPUs and the time recorded.
pub async fn record_transition(db: &PgPool, t: Transition<'_>) -> Result<(i32, DateTime<Utc>), WriteError> {
    let gpus = store::node_gpus(db, t.cluster, t.hostname)
        .await?
        .ok_or(WriteError::NotFound)?;
    let now = Utc::now();
    let at = t.at.unwrap_or(now);
    if at > now + chrono::Duration::hours(24) {
        return Err(WriteError::Invalid(FieldError::new(
            "at",
            format!("{at} is more than 24 h in the future"),
        )));
    }
    let reason = optional_text("reason", t.reason).map_err(WriteError::Invalid)?;
    store::insert_transition(
        db,
        &NewTransition {
            cluster: t.cluster,
            hostname: t.hostname,
            drained: t.drained,
            at,
            reason: reason.as_deref(),
            failure_id: t.failure_id,
            by: t.by,
        },
    )
    .await?;
    Ok((gpus, at))
}
