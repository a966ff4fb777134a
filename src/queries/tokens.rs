//! Which token a bearer secret is: the configured admin token, or a stored token that is active
//! and not expired. The read behind every authenticated request (`http::caller`).

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::auth::{Role, is_expired, secret_matches, split_token};
use crate::storage;

/// Who a token is.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenIdentity {
    pub role: Role,
    /// Cluster scope; None = all clusters.
    pub cluster: Option<String>,
    /// None for the configured admin token.
    pub token_id: Option<Uuid>,
    pub name: String,
}

/// What checking a token found.
#[derive(Debug, Clone, PartialEq)]
pub enum Authentication {
    Valid(TokenIdentity),
    /// Unknown, revoked, malformed or a wrong secret: callers are not told which.
    Invalid,
    Expired {
        name: String,
        at: DateTime<Utc>,
    },
}

pub async fn authenticate(
    db: &PgPool,
    admin_token_hash: &[u8],
    token: &str,
    now: DateTime<Utc>,
) -> Result<Authentication, sqlx::Error> {
    if secret_matches(token, admin_token_hash) {
        return Ok(Authentication::Valid(TokenIdentity {
            role: Role::Admin,
            cluster: None,
            token_id: None,
            name: "admin".into(),
        }));
    }
    let Some((id, secret)) = split_token(token) else {
        return Ok(Authentication::Invalid);
    };
    let Some(stored) = storage::tokens::find_active(db, id).await? else {
        return Ok(Authentication::Invalid);
    };
    if !secret_matches(secret, &stored.secret_hash) {
        return Ok(Authentication::Invalid);
    }
    if is_expired(stored.expires_at, now) {
        return Ok(Authentication::Expired {
            name: stored.name,
            at: stored.expires_at.unwrap_or(now),
        });
    }
    Ok(match Role::parse(&stored.role) {
        Some(role) => Authentication::Valid(TokenIdentity {
            role,
            cluster: stored.cluster,
            token_id: Some(id),
            name: stored.name,
        }),
        None => Authentication::Invalid,
    })
}
