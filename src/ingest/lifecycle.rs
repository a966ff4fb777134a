//! Patching a failure's lifecycle: the new state, its history entry and its audit row in one
//! transaction, under the failure's lock.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::audit;
use crate::domain::audit::{Actor, AuditAction};
use crate::domain::event::FieldError;
use crate::domain::lifecycle::{self, FieldChange, LifecyclePatch};
use crate::storage::lifecycle::{self as store, FailureAnchor, LifecycleRow};

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
        store::save(&mut tx, lifecycle_id, &f, &after, &changes, &actor.name).await?;
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
