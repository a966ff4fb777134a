//! Recording an admin action in the audit log, inside the transaction that performs it: the
//! action and its row commit (or roll back) together.

use sqlx::PgConnection;

use crate::domain::audit::{Actor, AuditAction};
use crate::storage;

pub async fn record(
    conn: &mut PgConnection,
    actor: &Actor,
    action: AuditAction,
    target: &str,
    details: serde_json::Value,
) -> Result<(), sqlx::Error> {
    storage::audit::insert(
        conn,
        &storage::audit::NewAuditRow {
            actor_token_id: actor.token_id,
            actor_name: &actor.name,
            action: action.as_str(),
            target,
            details,
        },
    )
    .await?;
    Ok(())
}

/// One row per (target, details) of the same action, in order (one statement).
pub async fn record_many(
    conn: &mut PgConnection,
    actor: &Actor,
    action: AuditAction,
    targets: &[String],
    details: &[serde_json::Value],
) -> Result<(), sqlx::Error> {
    storage::audit::insert_many(conn, actor.token_id, &actor.name, action.as_str(), targets, details).await
}
