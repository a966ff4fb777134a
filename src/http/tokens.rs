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
use super::extract::{AppJson, AppPath, Caller};
use crate::domain::auth::{Permission, Role, mint_token};
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
    /// Restrict writes to this cluster (agents). Absent: all clusters.
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub cluster: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenView {
    pub id: Uuid,
    pub name: String,
    pub role: Role,
    pub cluster: Option<String>,
    pub created_at: DateTime<Utc>,
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
    }
}

/// Create a token (admin). The secret is returned once.
#[utoipa::path(
    post, path = "/v1/tokens", tag = "tokens", request_body = CreateToken,
    responses(
        (status = 201, description = "Token created; `token` holds the secret, shown only this once", body = CreatedToken),
        (status = 400, description = "Malformed JSON, unknown role or empty name", body = ErrorBody),
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
    let minted = mint_token();
    let row = storage::tokens::insert(
        &ctx.db,
        minted.id,
        &name,
        req.role.as_str(),
        cluster.as_deref(),
        &minted.secret_hash,
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedToken {
            info: view(row),
            token: minted.token,
        }),
    ))
}

/// List active tokens (admin), without secrets.
#[utoipa::path(
    get, path = "/v1/tokens", tag = "tokens",
    responses(
        (status = 200, description = "Active tokens, oldest first, without secrets", body = Vec<TokenView>),
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

/// Revoke a token (admin). It stops working at once.
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
    if storage::tokens::revoke(&ctx.db, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!("no active token {id}")))
    }
}
