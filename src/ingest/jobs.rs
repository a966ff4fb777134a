//! Writing scheduler jobs. A job record decides which job a node-only signal folds under, so an
//! upsert re-folds, in the same transaction, what the jobs attributed before and attribute now
//! (their keys and their nodes' keys over their runs). The catalog lock held exclusively keeps
//! ingest from folding against a half-written job table, so the failures do not depend on whether
//! jobs or signals came first.

use chrono::Duration;
use sqlx::PgPool;

use super::refold::{self, Touched, touch_job};
use crate::domain::job::Job;
use crate::ingest::catalog::CatalogCache;
use crate::storage;

/// Upserts validated jobs and re-folds what they change; returns how many were upserted.
pub async fn upsert_jobs(
    db: &PgPool,
    cache: &CatalogCache,
    window: Duration,
    jobs: &[Job],
) -> Result<usize, sqlx::Error> {
    let mut tx = db.begin().await?;
    let catalog = crate::ingest::catalog::lock_exclusive(&mut tx, cache).await?;
    let mut touched = Touched::new();
    for old in storage::jobs::stored_runs(&mut tx, jobs).await? {
        touch_job(
            &mut touched,
            &old.cluster,
            &old.job_id,
            &old.nodes,
            old.started_at,
            old.ended_at,
        );
    }
    for j in jobs {
        touch_job(&mut touched, &j.cluster, &j.id, &j.nodes, j.start, j.end);
    }
    let upserted = storage::jobs::upsert(&mut tx, jobs).await? as usize;
    refold::refold(&mut tx, &catalog, window, &touched).await?;
    tx.commit().await?;
    Ok(upserted)
}
