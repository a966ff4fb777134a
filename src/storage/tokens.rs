use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

pub struct StoredToken {
    pub secret_hash: Vec<u8>,
    pub role: String,
    pub cluster: Option<String>,
    pub name: String,
}

#[derive(sqlx::FromRow)]
pub struct TokenRow {
    pub id: Uuid,
    pub name: String,
    pub role: String,
    pub cluster: Option<String>,
    pub created_at: DateTime<Utc>,
}

pub async fn find_active(db: &PgPool, id: Uuid) -> Result<Option<StoredToken>, sqlx::Error> {
    sqlx::query_as!(
        StoredToken,
        "SELECT secret_hash, role, cluster, name FROM api_tokens WHERE id = $1 AND revoked_at IS NULL",
        id,
    )
    .fetch_optional(db)
    .await
}

pub async fn insert(
    db: &PgPool,
    id: Uuid,
    name: &str,
    role: &str,
    cluster: Option<&str>,
    secret_hash: &[u8],
) -> Result<TokenRow, sqlx::Error> {
    sqlx::query_as!(
        TokenRow,
        "INSERT INTO api_tokens (id, name, role, cluster, secret_hash) VALUES ($1, $2, $3, $4, $5)
         RETURNING id, name, role, cluster, created_at",
        id,
        name,
        role,
        cluster,
        secret_hash,
    )
    .fetch_one(db)
    .await
}

pub async fn list_active(db: &PgPool) -> Result<Vec<TokenRow>, sqlx::Error> {
    sqlx::query_as!(
        TokenRow,
        "SELECT id, name, role, cluster, created_at FROM api_tokens WHERE revoked_at IS NULL ORDER BY created_at, id",
    )
    .fetch_all(db)
    .await
}

/// Returns false when there was no active token with that id.
pub async fn revoke(db: &PgPool, id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
        id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}
