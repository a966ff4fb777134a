//! The audit log of admin actions: inserted in the acting transaction, read newest first.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

pub struct NewAuditRow<'a> {
    pub actor_token_id: Option<Uuid>,
    pub actor_name: &'a str,
    pub action: &'a str,
    pub target: &'a str,
    pub details: serde_json::Value,
}

pub async fn insert(conn: &mut PgConnection, row: &NewAuditRow<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO audit_log (actor_token_id, actor_name, action, target, details) VALUES ($1, $2, $3, $4, $5)
         RETURNING id",
        row.actor_token_id,
        row.actor_name,
        row.action,
        row.target,
        &row.details,
    )
    .fetch_one(conn)
    .await
}

/// Rows of one actor and action, one per (target, details), in the given order (one statement).
pub async fn insert_many(
    conn: &mut PgConnection,
    actor_token_id: Option<Uuid>,
    actor_name: &str,
    action: &str,
    targets: &[String],
    details: &[serde_json::Value],
) -> Result<(), sqlx::Error> {
    if targets.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO audit_log (actor_token_id, actor_name, action, target, details)
         SELECT $1, $2, $3, u.target, u.details FROM UNNEST($4::text[], $5::jsonb[]) WITH ORDINALITY AS u(target, details, n)
         ORDER BY u.n",
        actor_token_id,
        actor_name,
        action,
        targets,
        details,
    )
    .execute(conn)
    .await?;
    Ok(())
}

#[derive(Debug, sqlx::FromRow)]
pub struct AuditRow {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub actor_token_id: Option<Uuid>,
    pub actor_name: String,
    pub action: String,
    pub target: String,
    pub details: serde_json::Value,
}

/// Which rows to read: `[from, to)`, one action, one actor (token name or id), ids below `before`.
pub struct AuditFilter<'a> {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub action: Option<&'a str>,
    pub actor: Option<&'a str>,
    pub before: Option<i64>,
    pub limit: i64,
}

/// Newest first (by id: the order the actions were recorded in).
pub async fn list(db: &PgPool, f: &AuditFilter<'_>) -> Result<Vec<AuditRow>, sqlx::Error> {
    sqlx::query_as!(
        AuditRow,
        "SELECT id, at, actor_token_id, actor_name, action, target, details FROM audit_log
         WHERE ($1::timestamptz IS NULL OR at >= $1)
           AND ($2::timestamptz IS NULL OR at < $2)
           AND ($3::text IS NULL OR action = $3)
           AND ($4::text IS NULL OR actor_name = $4 OR actor_token_id::text = $4)
           AND ($5::bigint IS NULL OR id < $5)
         ORDER BY id DESC
         LIMIT $6",
        f.from,
        f.to,
        f.action,
        f.actor,
        f.before,
        f.limit,
    )
    .fetch_all(db)
    .await
}
