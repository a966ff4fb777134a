//! The authenticated caller: the bearer token checked (the configured admin token, or a stored
//! token that is active and not expired), its role, cluster scope and rate limit.

use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts};
use uuid::Uuid;

use super::ApiContext;
use crate::domain::auth::{Permission, Role};
use crate::http::error::ApiError;
use crate::queries;
use crate::queries::tokens::Authentication;

/// The authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller {
    pub role: Role,
    /// Cluster scope of the token; None = all clusters.
    pub cluster: Option<String>,
    pub token_id: Option<Uuid>,
    pub name: String,
}

impl Caller {
    pub fn require(&self, p: Permission) -> Result<(), ApiError> {
        if self.role.allows(p) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "a {} token may not make this call",
                self.role.as_str()
            )))
        }
    }

    /// Whether this caller may write data of `cluster`.
    pub fn may_write(&self, cluster: &str) -> bool {
        self.cluster.as_deref().is_none_or(|c| c == cluster)
    }

    /// Whether this caller may read data of `cluster` (a scoped token reads only its own).
    pub fn may_read(&self, cluster: &str) -> bool {
        self.cluster.as_deref().is_none_or(|c| c == cluster)
    }

    /// The cluster a read is answered for ([`crate::domain::window::scoped_cluster`]): a scoped
    /// token's own when it names none, 403 when it names another.
    pub fn read_cluster(&self, asked: Option<String>) -> Result<Option<String>, ApiError> {
        crate::domain::window::scoped_cluster(self.cluster.as_deref(), asked)
            .map_err(|e| ApiError::Forbidden(e.to_string()))
    }

    /// Who the audit log records for this call.
    pub fn actor(&self) -> crate::domain::audit::Actor {
        crate::domain::audit::Actor {
            token_id: self.token_id,
            name: self.name.clone(),
        }
    }

    /// Takes one request from this token's budget (the configured admin token shares one bucket).
    fn rate_limit(&self, ctx: &ApiContext) -> Result<(), ApiError> {
        ctx.rate_limiter
            .check(self.token_id.unwrap_or(Uuid::nil()))
            .map_err(|retry_after_secs| {
                metrics::counter!("faultline_rate_limited_total", "role" => self.role.as_str()).increment(1);
                let settings = &ctx.config.edge.rate_limit;
                ApiError::RateLimited {
                    retry_after_secs,
                    rps: settings.rate_limit_per_token_rps,
                    burst: settings.rate_limit_per_token_burst,
                }
            })
    }
}

impl FromRequestParts<ApiContext> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, ctx: &ApiContext) -> Result<Self, Self::Rejection> {
        // Authenticated (and counted against the rate limit) once per request, should a
        // middleware have needed the caller before the handler.
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| ApiError::Unauthorized("missing Authorization: Bearer <token> header".into()))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
            .map(str::trim)
            .ok_or_else(|| ApiError::Unauthorized("Authorization header must be `Bearer <token>`".into()))?;
        let caller =
            match queries::tokens::authenticate(&ctx.db, &ctx.admin_token_hash, token, chrono::Utc::now()).await? {
                Authentication::Valid(t) => Caller {
                    role: t.role,
                    cluster: t.cluster,
                    token_id: t.token_id,
                    name: t.name,
                },
                Authentication::Invalid => return Err(ApiError::Unauthorized("invalid or revoked token".into())),
                Authentication::Expired { name, at } => {
                    return Err(ApiError::TokenExpired(format!(
                        "token '{name}' expired at {}; ask an admin for a new one",
                        at.to_rfc3339()
                    )));
                }
            };
        caller.rate_limit(ctx)?;
        parts.extensions.insert(caller.clone());
        Ok(caller)
    }
}
