//! Writing what people record after a failure: the failure lifecycle (`PATCH /v1/failures/{id}`)
//! and node drains and returns (`POST /v1/nodes/{cluster}/{hostname}/state`). Shared by the HTTP
//! handlers and `serve --demo`.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::event::{FieldError, optional_text};
use crate::domain::lifecycle::{self, LifecyclePatch};
use crate::storage::lifecycle::{self as store, FailureAnchor, LifecycleRow, NewTransition};
use crate::ingest::rollups;

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

/// The failure patched and its lifecycle as saved.
pub struct Patched {
    pub failure: FailureAnchor,
    pub saved: Option<LifecycleRow>,
}

/// Applies `patch` (merge-patch semantics) to failure `id` in one transaction, auditing each change
/// under `by`. `may_write` says whether the caller may write the failure's cluster.
pub async fn patch_failure(
    db: &PgPool,
    id: Uuid,
    patch: &LifecyclePatch,
    by: &str,
    may_write: impl Fn(&str) -> bool,
) -> Result<Patched, WriteError> {
    let mut tx = db.begin().await?;
    let f = store::failure_anchor(&mut tx, id).await?.ok_or(WriteError::NotFound)?;
    if !may_write(&f.cluster) {
        return Err(WriteError::Forbidden(f.cluster));
    }
    store::lock(&mut tx, &f).await?;
    let rows = store::for_failure(&mut tx, &f).await?;
    let current = rows.first();
    let before = current.map(LifecycleRow::lifecycle).unwrap_or_default();
    let (after, changes) = lifecycle::apply(&before, patch, f.first_at, Utc::now()).map_err(WriteError::Invalid)?;
    let lifecycle_id = current.map_or(f.id, |r| r.failure_id);
    if !changes.is_empty() || current.is_none() {
        // A post-mortem cause changes what the failure counts under: the rollups move with it.
        let counted = rollups::before_lifecycle_write(&mut tx, &f.cluster, &f.correlation_key).await?;
        store::save(&mut tx, lifecycle_id, &f, &after, &changes, by).await?;
        rollups::after_lifecycle_write(&mut tx, &f.cluster, &f.correlation_key, &counted).await?;
    }
    let saved = store::by_lifecycle_id(&mut tx, lifecycle_id).await?;
    tx.commit().await?;
    Ok(Patched { failure: f, saved })
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
