//! `GET /v1/audit` (admin): who created or revoked tokens, edited the catalog or changed a
//! failure's lifecycle, and when.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::IntoParams;

use super::ApiContext;
use super::caller::Caller;
use super::extract::AppQuery;
use crate::domain::audit::AuditAction;
use crate::domain::auth::Permission;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::queries::audit::{AuditPage, AuditSelection};

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/audit", get(list_audit))
}

pub const MAX_AUDIT_LIMIT: i64 = 1000;
/// Longest `actor` filter: a token name (at most 256 characters) or id.
const MAX_ACTOR_CHARS: usize = 256;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Entries at or after this time (RFC 3339).
    pub from: Option<DateTime<Utc>>,
    /// Entries before this time (RFC 3339).
    pub to: Option<DateTime<Utc>>,
    /// Only this action.
    pub action: Option<AuditAction>,
    /// Only this actor: a token's name or id (`admin` for the configured admin token).
    #[param(min_length = 1, max_length = 256)]
    pub actor: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The audit log, newest first. Each entry was written in the transaction of its action: an
/// action answered 2xx has its entry, one that failed has none.
#[utoipa::path(
    get, path = "/v1/audit", tag = "audit", params(AuditQuery),
    responses(
        (status = 200, description = "One page of audit entries, newest first", body = AuditPage),
        (status = 400, description = "Invalid time, action, limit or cursor, or from after to", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins read the audit log", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_audit(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(q): AppQuery<AuditQuery>,
) -> ApiResult<Json<AuditPage>> {
    caller.require(Permission::Admin)?;
    let bad = |m: String| ApiError::bad_request("invalid_query", m);
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_AUDIT_LIMIT).contains(&limit) {
        return Err(bad(format!("limit {limit} is not in 1..={MAX_AUDIT_LIMIT}")));
    }
    if let (Some(from), Some(to)) = (q.from, q.to)
        && from > to
    {
        return Err(bad(format!("from ({from}) is after to ({to})")));
    }
    if let Some(actor) = &q.actor
        && actor.chars().count() > MAX_ACTOR_CHARS
    {
        return Err(bad(format!("actor is longer than {MAX_ACTOR_CHARS} characters")));
    }
    let before = q
        .cursor
        .as_deref()
        .map(|c| {
            c.parse::<i64>()
                .ok()
                .filter(|id| *id > 0)
                .ok_or_else(|| bad("cursor is not one this server issued".into()))
        })
        .transpose()?;
    let selection = AuditSelection {
        from: q.from,
        to: q.to,
        action: q.action,
        actor: q.actor.as_deref(),
        before,
        limit,
    };
    Ok(Json(crate::queries::audit::page(&ctx.db, &selection).await?))
}
