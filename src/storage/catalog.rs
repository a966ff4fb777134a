//! The classification rule catalog (`classification_rules`) and its version (`catalog_state`), as
//! rows; `crate::ingest::catalog` turns them into the classification engine's catalog.

use sqlx::PgConnection;

/// A rule as stored.
#[derive(Debug, Clone)]
pub struct RuleRow {
    pub rule_id: String,
    pub kind: String,
    pub code: Option<i64>,
    pub pattern: Option<String>,
    pub priority: i32,
    pub category: String,
    pub component: String,
    pub severity: String,
    pub transient: bool,
    pub secondary: bool,
    pub action: String,
    pub description: String,
    pub source: String,
    pub builtin: bool,
}

pub async fn rules(conn: &mut PgConnection) -> Result<Vec<RuleRow>, sqlx::Error> {
    sqlx::query_as!(
        RuleRow,
        "SELECT rule_id, kind, code, pattern, priority, category, component, severity, transient, secondary,
                action, description, source, builtin
         FROM classification_rules ORDER BY kind, priority DESC, rule_id",
    )
    .fetch_all(&mut *conn)
    .await
}

/// The advisory lock that orders catalog changes with the transactions that fold under a catalog
/// version. An advisory lock lives on the server the app talks to (the coordinator, on Citus),
/// where a row lock on `catalog_state` (a Citus reference table) is taken on every node's replica
/// of it, and concurrent ingest deadlocked on those.
const CATALOG_LOCK: (i32, i32) = (0x464c_0003, 0);

/// The catalog version, with the catalog lock held shared until the transaction ends (a
/// concurrent catalog change waits for it, and it for the change).
pub async fn version_for_share(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock_shared($1, $2)",
        CATALOG_LOCK.0,
        CATALOG_LOCK.1
    )
    .fetch_one(&mut *conn)
    .await?;
    version(conn).await
}

/// The catalog version, with the catalog lock held exclusively until the transaction ends,
/// without changing it.
pub async fn version_for_update(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query!("SELECT pg_advisory_xact_lock($1, $2)", CATALOG_LOCK.0, CATALOG_LOCK.1)
        .fetch_one(&mut *conn)
        .await?;
    version(conn).await
}

/// Bumps the version under the exclusive catalog lock, held until commit: ingest waits, then sees
/// the new rules.
pub async fn bump_version(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query!("SELECT pg_advisory_xact_lock($1, $2)", CATALOG_LOCK.0, CATALOG_LOCK.1)
        .fetch_one(&mut *conn)
        .await?;
    sqlx::query_scalar!("UPDATE catalog_state SET version = version + 1 RETURNING version")
        .fetch_one(&mut *conn)
        .await
}

pub async fn version(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!("SELECT version FROM catalog_state")
        .fetch_one(&mut *conn)
        .await
}

/// Inserts or replaces a rule. Returns true when it replaced an existing one.
pub async fn upsert_rule(conn: &mut PgConnection, r: &RuleRow, by: &str) -> Result<bool, sqlx::Error> {
    let existed = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM classification_rules WHERE rule_id = $1) AS "existed!""#,
        &r.rule_id,
    )
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO classification_rules (rule_id, kind, code, pattern, priority, category, component, severity,
                                           transient, secondary, action, description, source, builtin, updated_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, false, $14)
         ON CONFLICT (rule_id) DO UPDATE SET kind = EXCLUDED.kind, code = EXCLUDED.code, pattern = EXCLUDED.pattern,
             priority = EXCLUDED.priority, category = EXCLUDED.category, component = EXCLUDED.component,
             severity = EXCLUDED.severity, transient = EXCLUDED.transient, secondary = EXCLUDED.secondary,
             action = EXCLUDED.action, description = EXCLUDED.description, source = EXCLUDED.source,
             builtin = false, updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by",
        &r.rule_id,
        &r.kind,
        r.code,
        r.pattern.as_deref(),
        r.priority,
        &r.category,
        &r.component,
        &r.severity,
        r.transient,
        r.secondary,
        &r.action,
        &r.description,
        &r.source,
        by,
    )
    .execute(&mut *conn)
    .await?;
    Ok(existed)
}

pub async fn delete_rule(conn: &mut PgConnection, rule_id: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM classification_rules WHERE rule_id = $1", rule_id,)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}
