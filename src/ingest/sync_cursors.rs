//! A syncer's position in its source, per cluster: read before a window, advanced after the
//! window's records were stored (never before: a crash in between re-reads the window, and the
//! records' ids make the second sending duplicates).

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::storage::sync_cursors::{self, SyncCursor};

pub async fn cursor(db: &PgPool, cluster: &str, source: &str) -> Result<Option<SyncCursor>, sqlx::Error> {
    sync_cursors::get(db, cluster, source).await
}

pub async fn advance(
    db: &PgPool,
    cluster: &str,
    source: &str,
    position: DateTime<Utc>,
    by: &str,
) -> Result<SyncCursor, sqlx::Error> {
    sync_cursors::advance(db, cluster, source, position, by).await
}
