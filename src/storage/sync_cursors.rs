//! Sync cursors: how far a cluster's syncer has read a source.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

#[derive(Debug, Clone, PartialEq)]
pub struct SyncCursor {
    pub cluster: String,
    pub source: String,
    pub position: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub updated_by: Option<String>,
}

pub async fn get(db: &PgPool, cluster: &str, source: &str) -> Result<Option<SyncCursor>, sqlx::Error> {
    sqlx::query_as!(
        SyncCursor,
        "SELECT cluster, source, position, updated_at, updated_by FROM sync_cursors WHERE cluster = $1 AND source = $2",
        cluster,
        source,
    )
    .fetch_optional(db)
    .await
}

/// Moves the cursor to `position` unless it is already further; returns where it stands.
pub async fn advance(
    db: &PgPool,
    cluster: &str,
    source: &str,
    position: DateTime<Utc>,
    by: &str,
) -> Result<SyncCursor, sqlx::Error> {
    sqlx::query_as!(
        SyncCursor,
        "INSERT INTO sync_cursors AS c (cluster, source, position, updated_at, updated_by)
         VALUES ($1, $2, $3, now(), $4)
         ON CONFLICT (cluster, source) DO UPDATE SET
             position = GREATEST(c.position, EXCLUDED.position),
             updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by
         RETURNING cluster, source, position, updated_at, updated_by",
        cluster,
        source,
        position,
        by,
    )
    .fetch_one(db)
    .await
}
