//! Catalog rebuilds (`catalog_rebuilds`, migration 0023): one row per target catalog version, its
//! state and stored progress; and the reads that walk the failures still classified under an
//! older version, one cluster and a range of correlation keys at a time.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RebuildRow {
    pub version: i64,
    pub state: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub total_failures: Option<i64>,
    pub done_failures: i64,
    pub changed_failures: i64,
    pub chunks: i64,
    pub cursor_cluster: Option<String>,
    pub cursor_key: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// Records the rebuild of `version` (running) and marks every older running one superseded: the
/// newest version's rebuild covers what theirs had left. In the edit's transaction.
pub async fn start(conn: &mut PgConnection, version: i64) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE catalog_rebuilds SET state = 'superseded', finished_at = $2, updated_at = $2
         WHERE state = 'running' AND version < $1",
        version,
        Utc::now(),
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO catalog_rebuilds (version, started_at, updated_at) VALUES ($1, $2, $2)
         ON CONFLICT (version) DO NOTHING",
        version,
        Utc::now(),
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub async fn get(conn: &mut PgConnection, version: i64) -> Result<Option<RebuildRow>, sqlx::Error> {
    sqlx::query_as!(RebuildRow, "SELECT * FROM catalog_rebuilds WHERE version = $1", version)
        .fetch_optional(conn)
        .await
}

/// The running rebuild (the newest, should an older one still say running).
pub async fn running<'e>(db: impl sqlx::PgExecutor<'e>) -> Result<Option<RebuildRow>, sqlx::Error> {
    sqlx::query_as!(
        RebuildRow,
        "SELECT * FROM catalog_rebuilds WHERE state = 'running' ORDER BY version DESC LIMIT 1"
    )
    .fetch_optional(db)
    .await
}

/// Failures a rebuild to `version` has to rebuild: those classified under an older version,
/// frozen ones (before the retention horizon) aside.
pub async fn count_stale(conn: &mut PgConnection, version: i64) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM failures
           WHERE catalog_version < $1 AND first_at >= (SELECT retained_from FROM signal_retention)"#,
        version,
    )
    .fetch_one(conn)
    .await
}

/// The clusters that hold failures classified under an older version than `version`, from
/// `after` on (inclusive), in order.
pub async fn stale_clusters(
    conn: &mut PgConnection,
    version: i64,
    after: Option<&str>,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT DISTINCT cluster AS "cluster!" FROM failures
           WHERE catalog_version < $1 AND ($2::text IS NULL OR cluster >= $2)
             AND first_at >= (SELECT retained_from FROM signal_retention)
           ORDER BY 1"#,
        version,
        after,
    )
    .fetch_all(conn)
    .await
}

/// A chunk's keys: up to `limit` correlation keys of `cluster` after `after`, in order, that hold
/// a failure classified under an older version than `version`, each with the span of its
/// failures (frozen ones aside). One walk of the (cluster, key, version) index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleKey {
    pub key: String,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
    pub failures: i64,
}

pub async fn stale_keys(
    conn: &mut PgConnection,
    cluster: &str,
    after: Option<&str>,
    version: i64,
    limit: i64,
) -> Result<Vec<StaleKey>, sqlx::Error> {
    sqlx::query_as!(
        StaleKey,
        r#"SELECT correlation_key AS "key!", min(first_at) AS "first_at!", max(last_at) AS "last_at!",
                  count(*) AS "failures!"
           FROM failures
           WHERE cluster = $1 AND ($2::text IS NULL OR correlation_key > $2) AND catalog_version < $3
             AND first_at >= (SELECT retained_from FROM signal_retention)
           GROUP BY correlation_key
           ORDER BY correlation_key
           LIMIT $4"#,
        cluster,
        after,
        version,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// Each failure's classification (id, category, component, severity) of `cluster`'s `keys`:
/// read before and after a chunk, to count the failures it changed.
pub async fn classifications(
    conn: &mut PgConnection,
    cluster: &str,
    keys: &[String],
) -> Result<Vec<(uuid::Uuid, String, String, String)>, sqlx::Error> {
    Ok(sqlx::query!(
        "SELECT f.id, f.category, f.component, f.severity FROM failures f
         WHERE f.cluster = $1 AND f.correlation_key = ANY($2::text[])",
        cluster,
        keys,
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(|r| (r.id, r.category, r.component, r.severity))
    .collect())
}

/// Stores a chunk's progress, in the chunk's transaction.
pub async fn advance(
    conn: &mut PgConnection,
    version: i64,
    done: i64,
    changed: i64,
    cluster: &str,
    key: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE catalog_rebuilds
         SET done_failures = done_failures + $2, changed_failures = changed_failures + $3,
             chunks = chunks + 1, cursor_cluster = $4, cursor_key = $5, updated_at = $6
         WHERE version = $1",
        version,
        done,
        changed,
        cluster,
        key,
        Utc::now(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Sets the number of failures to rebuild, when the work begins.
pub async fn set_total(conn: &mut PgConnection, version: i64, total: i64) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE catalog_rebuilds SET total_failures = $2, updated_at = $3 WHERE version = $1 AND total_failures IS NULL",
        version,
        total,
        Utc::now(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Ends a rebuild: `done`, or `superseded` by a newer version.
pub async fn finish(conn: &mut PgConnection, version: i64, state: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE catalog_rebuilds SET state = $2, finished_at = $3, updated_at = $3 WHERE version = $1 AND state = 'running'",
        version,
        state,
        Utc::now(),
    )
    .execute(conn)
    .await?;
    Ok(())
}
