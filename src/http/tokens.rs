//! Token management (admin only): create, list, revoke.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::ApiContext;
use super::caller::Caller;
use super::extract::{AppJson, AppPath};
use crate::domain::auth::{Permission, Role, is_expired, mint_token, token_expiry};
use crate::domain::event::{optional_text, required_text};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::storage;

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/tokens", post(create_token).get(list_tokens))
        .route("/v1/tokens/{id}", delete(revoke_token))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateToken {
    #[schema(value_type = crate::domain::event::Text)]
    pub name: String,
    pub role: Role,
    /// Scope the token to this cluster: an agent writes only it, a reader (and an agent reading
    /// inventory) reads only it, on every read route. Absent: all clusters. Not for admin tokens.
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub cluster: Option<String>,
    /// When the token stops working (RFC 3339, in the future, at most ten years away). Absent,
    /// with no `ttl_seconds`: never.
    pub expires_at: Option<DateTime<Utc>>,
    /// Lifetime in seconds from now, instead of `expires_at` (not both).
    #[schema(minimum = 1, maximum = 316224000)]
    pub ttl_seconds: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenView {
    pub id: Uuid,
    pub name: String,
    pub role: Role,
    pub cluster: Option<String>,
    pub created_at: DateTime<Utc>,
    /// When the token stops working; null: never.
    pub expires_at: Option<DateTime<Utc>>,
    /// Whether `expires_at` has passed (the token then answers 401 `token_expired`).
    pub expired: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreatedToken {
    #[serde(flatten)]
    pub info: TokenView,
    /// The secret bearer token. Shown once: only its hash is stored.
    pub token: String,
}

fn view(row: storage::tokens::TokenRow) -> TokenView {
    TokenView {
        id: row.id,
        name: row.name,
        role: Role::parse(&row.role).unwrap_or(Role::Reader),
        cluster: row.cluster,
        created_at: row.created_at,
        expires_at: row.expires_at,
        expired: is_expired(row.expires_at, Utc::now()),
    }
}

/// Create a token (admin). The secret is returned once. Audited (`token.create`).
#[utoipa::path(
    post, path = "/v1/tokens", tag = "tokens", request_body = CreateToken,
    responses(
        (status = 201, description = "Token created; `token` holds the secret, shown only this once", body = CreatedToken),
        (status = 400, description = "Malformed JSON, unknown role, empty name, an admin token with a cluster, or an expiry that is past, too far or given twice", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins manage tokens", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn create_token(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppJson(req): AppJson<CreateToken>,
) -> ApiResult<(StatusCode, Json<CreatedToken>)> {
    caller.require(Permission::Admin)?;
    let bad = |e: crate::domain::event::FieldError| {
        ApiError::bad_request(
            "invalid_field",
            format!("{}: {}", e.field.unwrap_or_default(), e.message),
        )
    };
    let name = required_text("name", req.name).map_err(bad)?;
    let cluster = optional_text("cluster", req.cluster).map_err(bad)?;
    if req.role == Role::Admin && cluster.is_some() {
        return Err(ApiError::bad_request(
            "invalid_field",
            "cluster: an admin token cannot be scoped to a cluster (admins manage every cluster)",
        ));
    }
    let expires_at = token_expiry(req.expires_at, req.ttl_seconds, Utc::now())
        .map_err(|m| ApiError::bad_request("invalid_field", m))?;
    let minted = mint_token();
    let spec = crate::ingest::tokens::TokenSpec {
        name: &name,
        role: req.role,
        cluster: cluster.as_deref(),
        expires_at,
    };
    let row = crate::ingest::tokens::create(&ctx.db, &caller.actor(), &minted, &spec).await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedToken {
            info: view(row),
            token: minted.token,
        }),
    ))
}

/// List tokens not revoked (admin), without secrets; expired ones are listed with their expiry.
#[utoipa::path(
    get, path = "/v1/tokens", tag = "tokens",
    responses(
        (status = 200, description = "Tokens not revoked, oldest first, without secrets, each with its scope and expiry", body = Vec<TokenView>),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins manage tokens", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_tokens(State(ctx): State<ApiContext>, caller: Caller) -> ApiResult<Json<Vec<TokenView>>> {
    caller.require(Permission::Admin)?;
    Ok(Json(
        storage::tokens::list_active(&ctx.db)
            .await?
            .into_iter()
            .map(view)
            .collect(),
    ))
}

/// Revoke a token (admin). It stops working at once. Audited (`token.revoke`).
#[utoipa::path(
    delete, path = "/v1/tokens/{id}", tag = "tokens",
    params(("id" = Uuid, Path, description = "Token id")),
    responses(
        (status = 204, description = "Token revoked"),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins manage tokens", body = ErrorBody),
        (status = 404, description = "No active token with this id", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn revoke_token(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(id): AppPath<String>,
) -> ApiResult<StatusCode> {
    caller.require(Permission::Admin)?;
    let id = Uuid::try_parse(&id)
        .map_err(|e| ApiError::bad_request("invalid_path", format!("token id '{id}' is not a UUID: {e}")))?;
    if crate::ingest::tokens::revoke(&ctx.db, &caller.actor(), id)
        .await?
        .is_some()
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!("no active token {id}")))
    }
}
