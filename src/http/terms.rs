//! The free-text lexicon: readable by readers, editable by admins. Like a rule edit, every term
//! edit commits a new catalog version and starts the background rebuild of the failures under it.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, put};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::ApiContext;
use super::caller::Caller;
use super::extract::{AppJson, AppPath, AppQuery};
use crate::classify::text::{Term, TermKind};
use crate::domain::auth::Permission;
use crate::domain::taxonomy::{Category, Component};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::ingest::catalog::RuleEdit;
use crate::storage;

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/classification-terms", get(list_terms))
        .route("/v1/classification-terms/{term}", put(put_term).delete(delete_term))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TermQuery {
    /// Only terms of this kind.
    pub kind: Option<TermKind>,
    /// Only terms of this component.
    pub component: Option<Component>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TermList {
    pub catalog_version: i64,
    pub terms: Vec<Term>,
}

/// The free-text lexicon.
///
/// Used for every signal whose kind and code rules do not decide (no rule, a fallback of unknown
/// category, or a keyword rule the text evidence outweighs two to one). A message is normalised
/// (case, camelCase, punctuation, plurals, misspellings, abbreviations: PSU, DBE, SBE, IB, OOM, FS,
/// ...), the longest term at each position is taken, and `component` / `fault` terms in clauses with
/// a `failure` term (a `fault` term is one) add their weight to their component. A `healthy` term
/// ("passed", "recovered", "deasserted") or a negated failure ("no errors") silences its clause;
/// `symptom` terms (NCCL, watchdog) name no cause. The answer is unknown without a failure term,
/// without a component, or when another category scores at least 75% of the best.
#[utoipa::path(
    get, path = "/v1/classification-terms", tag = "classification", params(TermQuery),
    responses(
        (status = 200, description = "The terms, by term, with the catalog version", body = TermList),
        (status = 400, description = "Unknown kind or component filter", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_terms(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(q): AppQuery<TermQuery>,
) -> ApiResult<Json<TermList>> {
    caller.require(Permission::Query)?;
    let mut conn = ctx.db.acquire().await?;
    let catalog_version = storage::catalog::version(&mut conn).await?;
    let terms = crate::ingest::catalog::load_terms(&mut conn)
        .await?
        .into_iter()
        .filter(|t| q.kind.is_none_or(|k| t.kind == k) && q.component.is_none_or(|c| t.component == c))
        .collect();
    Ok(Json(TermList { catalog_version, terms }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"kind": "component", "component": "storage", "weight": 4, "source": "site: our VAST cluster"}))]
pub struct TermInput {
    pub kind: TermKind,
    /// Required for component and fault terms; omit (or unknown) for the others.
    pub component: Option<Component>,
    /// Evidence weight: 1 a generic part, 3 a specific part, 4-5 a specific fault.
    #[schema(exclusive_minimum = 0.0, maximum = 10.0)]
    pub weight: f64,
    /// Where the term comes from.
    pub source: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TermChange {
    /// The catalog's new version: signals ingested from now on fold with it.
    pub catalog_version: i64,
    /// The rebuild of the existing failures under the new version, started in the background
    /// (follow it at `GET /v1/catalog/rebuilds/{version}`).
    pub rebuild: crate::queries::rebuilds::RebuildStatus,
    pub term: Option<Term>,
}

/// Create or replace a term (admin); the answer comes once the edit is committed; the failures are rebuilt under the new version in the background.
#[utoipa::path(
    put, path = "/v1/classification-terms/{term}", tag = "classification", request_body = TermInput,
    params(("term" = String, Path, description = "The phrase, e.g. `vast` or `power supply` (URL-encoded)")),
    responses(
        (status = 202, description = "Term stored under a new catalog version; the failures are rebuilt under it in the background (`rebuild`)", body = TermChange),
        (status = 400, description = "Malformed JSON, a term without words, a weight outside (0, 10], or a component missing or outside the kind", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins change the catalog", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn put_term(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(term): AppPath<String>,
    AppJson(input): AppJson<TermInput>,
) -> ApiResult<(StatusCode, Json<TermChange>)> {
    caller.require(Permission::Admin)?;
    let component = input.component.unwrap_or(Component::Unknown);
    let term = Term {
        term: term.trim().to_string(),
        kind: input.kind,
        category: if input.kind.has_component() {
            component.category()
        } else {
            Category::Unknown
        },
        component,
        weight: input.weight,
        source: input.source,
        builtin: false,
    };
    term.validate().map_err(|m| ApiError::bad_request("invalid_term", m))?;
    let edit = RuleEdit::UpsertTerm {
        term: term.clone(),
        by: caller.name.clone(),
    };
    let done = crate::ingest::catalog::edit(&ctx.db, &ctx.catalog, &caller.actor(), edit)
        .await?
        .ok_or_else(|| ApiError::Conflict("nothing to change".into()))?;
    let version = done.catalog_version;
    let rebuild = crate::http::rebuilds::started(&ctx, version).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(TermChange {
            catalog_version: version,
            rebuild,
            term: Some(term),
        }),
    ))
}

/// Delete a term (admin); the answer comes once the edit is committed; the failures are rebuilt under the new version in the background.
#[utoipa::path(
    delete, path = "/v1/classification-terms/{term}", tag = "classification",
    params(("term" = String, Path, description = "The phrase as stored")),
    responses(
        (status = 202, description = "Term deleted under a new catalog version; the failures are rebuilt under it in the background (`rebuild`)", body = TermChange),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins change the catalog", body = ErrorBody),
        (status = 404, description = "No such term", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn delete_term(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(term): AppPath<String>,
) -> ApiResult<(StatusCode, Json<TermChange>)> {
    caller.require(Permission::Admin)?;
    let edit = RuleEdit::DeleteTerm { term: term.clone() };
    let done = crate::ingest::catalog::edit(&ctx.db, &ctx.catalog, &caller.actor(), edit)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no term '{term}'")))?;
    let version = done.catalog_version;
    let rebuild = crate::http::rebuilds::started(&ctx, version).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(TermChange {
            catalog_version: version,
            rebuild,
            term: None,
        }),
    ))
}
