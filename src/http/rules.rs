//! The classification catalog: readable by readers, editable by admins. Every edit commits a new
//! catalog version at once and starts the background rebuild of the failures under it
//! (`ingest::rebuild`); answers say which version they were computed with.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, put};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::ApiContext;
use super::caller::Caller;
use super::extract::{AppJson, AppPath, AppQuery};
use crate::classify::{Rule, Severity};
use crate::domain::auth::Permission;
use crate::domain::taxonomy::{Category, Component};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::ingest::catalog::RuleEdit;
use crate::storage;

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/classification-rules", get(list_rules))
        .route("/v1/classification-rules/{rule_id}", put(put_rule).delete(delete_rule))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RuleQuery {
    /// Only rules of this signal kind ('*' for the any-kind keyword rules).
    pub kind: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RuleList {
    pub catalog_version: i64,
    pub rules: Vec<Rule>,
}

/// The classification catalog.
///
/// Matching: a rule applies to a signal when its `kind` equals the signal's (or is '*'), its `code`
/// is null or equal, and its `pattern` is null or one of its '|'-separated keywords occurs in the
/// message (case-insensitive). The highest `priority` wins (ties: smallest rule_id). An explicit
/// `root_cause` from the sender always wins over the catalog.
#[utoipa::path(
    get, path = "/v1/classification-rules", tag = "classification", params(RuleQuery),
    responses(
        (status = 200, description = "The rules, by kind and priority, with the catalog version", body = RuleList),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_rules(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(q): AppQuery<RuleQuery>,
) -> ApiResult<Json<RuleList>> {
    caller.require(Permission::Query)?;
    let mut conn = ctx.db.acquire().await?;
    let catalog_version = storage::catalog::version(&mut conn).await?;
    let rules = crate::ingest::catalog::load_rules(&mut conn)
        .await?
        .into_iter()
        .filter(|r| q.kind.as_ref().is_none_or(|k| &r.kind == k))
        .collect();
    Ok(Json(RuleList { catalog_version, rules }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct RuleInput {
    pub kind: String,
    pub code: Option<i64>,
    pub pattern: Option<String>,
    pub priority: i32,
    pub category: Category,
    pub component: Component,
    pub severity: Severity,
    pub transient: bool,
    pub secondary: bool,
    #[schema(value_type = crate::classify::Action)]
    pub action: String,
    pub description: String,
    pub source: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CatalogChange {
    /// The catalog's new version: signals ingested from now on fold with it.
    pub catalog_version: i64,
    /// The rebuild of the existing failures under the new version, started in the background
    /// (follow it at `GET /v1/catalog/rebuilds/{version}`).
    pub rebuild: crate::queries::rebuilds::RebuildStatus,
    pub rule: Option<Rule>,
}

/// Create or replace a rule (admin); the answer comes once the edit is committed; the failures are rebuilt under the new version in the background.
#[utoipa::path(
    put, path = "/v1/classification-rules/{rule_id}", tag = "classification", request_body = RuleInput,
    params(("rule_id" = String, Path, description = "Rule id, e.g. xid-79")),
    responses(
        (status = 202, description = "Rule stored under a new catalog version; the failures are rebuilt under it in the background (`rebuild`)", body = CatalogChange),
        (status = 409, description = "The rule is already stored exactly so: nothing to change", body = ErrorBody),
        (status = 400, description = "Malformed JSON or a component outside its category, or an unknown action", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins change the catalog", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn put_rule(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(rule_id): AppPath<String>,
    AppJson(input): AppJson<RuleInput>,
) -> ApiResult<(StatusCode, Json<CatalogChange>)> {
    caller.require(Permission::Admin)?;
    let rule = Rule {
        rule_id,
        kind: input.kind.trim().to_ascii_lowercase(),
        code: input.code,
        pattern: input.pattern.filter(|p| !p.trim().is_empty()),
        priority: input.priority,
        category: input.category,
        component: input.component,
        severity: input.severity,
        transient: input.transient,
        secondary: input.secondary,
        action: input.action,
        description: input.description,
        source: input.source,
        builtin: false,
    };
    rule.validate().map_err(|m| ApiError::bad_request("invalid_rule", m))?;
    let edit = RuleEdit::Upsert {
        rule: rule.clone(),
        by: caller.name.clone(),
    };
    let done = crate::ingest::catalog::edit(&ctx.db, &ctx.catalog, &caller.actor(), edit)
        .await?
        .ok_or_else(|| ApiError::Conflict("nothing to change".into()))?;
    let version = done.catalog_version;
    let rebuild = crate::http::rebuilds::started(&ctx, version).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(CatalogChange {
            catalog_version: version,
            rebuild,
            rule: Some(rule),
        }),
    ))
}

/// Delete a rule (admin); the answer comes once the edit is committed; the failures are rebuilt under the new version in the background.
#[utoipa::path(
    delete, path = "/v1/classification-rules/{rule_id}", tag = "classification",
    params(("rule_id" = String, Path, description = "Rule id")),
    responses(
        (status = 202, description = "Rule deleted under a new catalog version; the failures are rebuilt under it in the background (`rebuild`)", body = CatalogChange),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins change the catalog", body = ErrorBody),
        (status = 404, description = "No such rule", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn delete_rule(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(rule_id): AppPath<String>,
) -> ApiResult<(StatusCode, Json<CatalogChange>)> {
    caller.require(Permission::Admin)?;
    let edit = RuleEdit::Delete {
        rule_id: rule_id.clone(),
    };
    let done = crate::ingest::catalog::edit(&ctx.db, &ctx.catalog, &caller.actor(), edit)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no rule '{rule_id}'")))?;
    let version = done.catalog_version;
    let rebuild = crate::http::rebuilds::started(&ctx, version).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(CatalogChange {
            catalog_version: version,
            rebuild,
            rule: None,
        }),
    ))
}
