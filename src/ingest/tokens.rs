//! Token creation and revocation, each with its audit row in the same transaction.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::audit;
use crate::domain::audit::{Actor, AuditAction};
use crate::domain::auth::{MintedToken, Role};
use crate::storage;
use crate::storage::tokens::TokenRow;

pub struct TokenSpec<'a> {
    pub name: &'a str,
    pub role: Role,
    pub cluster: Option<&'a str>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// Stores `minted` (its hash only) and records who created it; the secret is never audited.
pub async fn create(
    db: &PgPool,
    actor: &Actor,
    minted: &MintedToken,
    spec: &TokenSpec<'_>,
) -> Result<TokenRow, sqlx::Error> {
    let mut tx = db.begin().await?;
    let row = storage::tokens::insert(
        &mut tx,
        &storage::tokens::NewToken {
            id: minted.id,
            name: spec.name,
            role: spec.role.as_str(),
            cluster: spec.cluster,
            secret_hash: &minted.secret_hash,
            expires_at: spec.expires_at,
        },
    )
    .await?;
    audit::record(
        &mut tx,
        actor,
        AuditAction::TokenCreate,
        &row.id.to_string(),
        serde_json::json!({
            "name": row.name, "role": row.role, "cluster": row.cluster, "expires_at": row.expires_at,
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(row)
}

/// Revokes token `id`; None (and nothing audited) when there was no active token with that id.
pub async fn revoke(db: &PgPool, actor: &Actor, id: Uuid) -> Result<Option<TokenRow>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let Some(row) = storage::tokens::revoke(&mut tx, id).await? else {
        return Ok(None);
    };
    audit::record(
        &mut tx,
        actor,
        AuditAction::TokenRevoke,
        &row.id.to_string(),
        serde_json::json!({"name": row.name, "role": row.role, "cluster": row.cluster}),
    )
    .await?;
    tx.commit().await?;
    Ok(Some(row))
}
