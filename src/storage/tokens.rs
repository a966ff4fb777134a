use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

pub struct StoredToken {
    pub secret_hash: Vec<u8>,
    pub role: String,
    pub cluster: Option<String>,
    pub name: String,
    pub expires_at: Option<DateTime<Utc>>,
}

#[derive(sqlx::FromRow)]
pub struct TokenRow {
    pub id: Uuid,
    pub name: String,
    pub role: String,
    pub cluster: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// The token with this id unless revoked (an expired one is returned: the caller says why it fails).
pub async fn find_active(db: &PgPool, id: Uuid) -> Result<Option<StoredToken>, sqlx::Error> {
    sqlx::query_as!(
        StoredToken,
        "SELECT secret_hash, role, cluster, name, expires_at FROM api_tokens WHERE id = $1 AND revoked_at IS NULL",
        id,
    )
    .fetch_optional(db)
    .await
}

pub struct NewToken<'a> {
    pub id: Uuid,
    pub name: &'a str,
    pub role: &'a str,
    pub cluster: Option<&'a str>,
    pub secret_hash: &'a [u8],
    pub expires_at: Option<DateTime<Utc>>,
}

pub async fn insert(conn: &mut PgConnection, t: &NewToken<'_>) -> Result<TokenRow, sqlx::Error> {
    sqlx::query_as!(
        TokenRow,
        "INSERT INTO api_tokens (id, name, role, cluster, secret_hash, expires_at) VALUES ($1, $2, $3, $4, $5, $6)
         RETURNING id, name, role, cluster, created_at, expires_at",
        t.id,
        t.name,
        t.role,
        t.cluster,
        t.secret_hash,
        t.expires_at,
    )
    .fetch_one(conn)
    .await
}

/// Tokens not revoked (expired ones included, with their expiry), oldest first.
pub async fn list_active(db: &PgPool) -> Result<Vec<TokenRow>, sqlx::Error> {
    sqlx::query_as!(
        TokenRow,
        "SELECT id, name, role, cluster, created_at, expires_at FROM api_tokens WHERE revoked_at IS NULL ORDER BY created_at, id",
    )
    .fetch_all(db)
    .await
}

/// The revoked token, or None when there was no active token with that id.
pub async fn revoke(conn: &mut PgConnection, id: Uuid) -> Result<Option<TokenRow>, sqlx::Error> {
    sqlx::query_as!(
        TokenRow,
        "UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL
         RETURNING id, name, role, cluster, created_at, expires_at",
        id,
    )
    .fetch_optional(conn)
    .await
}
