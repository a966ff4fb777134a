//! Catalog rebuilds: `GET /v1/catalog/rebuilds/{version}` (admin), and `catalog_version` on every
//! read of failures (analytics, the report, the failure list): a reader that must not see a mix of
//! catalog versions asks for the version it expects, and gets 409 with the rebuild's progress
//! until every failure is classified under it.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use super::ApiContext;
use super::caller::Caller;
use super::extract::AppPath;
use crate::domain::auth::Permission;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::queries::rebuilds::{self, RebuildStatus};
use crate::storage;

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/catalog/rebuilds/{version}", get(rebuild_status))
}

/// A catalog rebuild: state, failures done and changed, rate and the time it still needs.
#[utoipa::path(
    get, path = "/v1/catalog/rebuilds/{version}", tag = "classification",
    params(("version" = i64, Path, description = "The catalog version the rebuild rebuilds to (an edit answers it)", minimum = 1)),
    responses(
        (status = 200, description = "The rebuild's state and progress", body = RebuildStatus),
        (status = 400, description = "The version is not an integer", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins read rebuilds", body = ErrorBody),
        (status = 404, description = "No rebuild of this version (the catalog never had it)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn rebuild_status(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(version): AppPath<i64>,
) -> ApiResult<Json<RebuildStatus>> {
    caller.require(Permission::Admin)?;
    rebuilds::status(&ctx.db, version)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("no rebuild of catalog version {version}")))
}

/// The rebuild an edit of the catalog started (recorded in the edit's transaction).
pub async fn started(ctx: &ApiContext, version: i64) -> ApiResult<RebuildStatus> {
    rebuilds::status(&ctx.db, version)
        .await?
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the edit's rebuild {version} is not recorded")))
}

/// The reads that take `catalog_version`: everything computed from failures.
fn pins_catalog(method: &axum::http::Method, path: &str) -> bool {
    method == axum::http::Method::GET
        && (path.starts_with("/v1/analytics/") || path == "/v1/reports/reliability" || path == "/v1/failures")
}

/// Answers 409 (`catalog_version_pending`, with the rebuild's progress in `details`) to a read
/// that names a `catalog_version` its failures are not all classified under: a newer or older
/// version than the current one, or the current one while its rebuild runs. Checked before the
/// read; the answer then says which version it was computed with (`window.catalog_version`,
/// `window.rebuild`), should an edit land meanwhile.
pub async fn pin_catalog(State(ctx): State<ApiContext>, request: Request, next: Next) -> Response {
    let pinned = request
        .uri()
        .query()
        .filter(|_| pins_catalog(request.method(), request.uri().path()))
        .and_then(|q| form_urlencoded::parse(q.as_bytes()).find(|(k, v)| k == "catalog_version" && !v.is_empty()))
        .map(|(_, v)| v.into_owned());
    let Some(pinned) = pinned else {
        return next.run(request).await;
    };
    // Who asks comes first: an unauthenticated or unauthorised read learns nothing of the catalog.
    let (mut parts, body) = request.into_parts();
    let caller =
        match <Caller as axum::extract::FromRequestParts<ApiContext>>::from_request_parts(&mut parts, &ctx).await {
            Ok(caller) => caller,
            Err(e) => return e.into_response(),
        };
    if let Err(e) = caller.require(Permission::Query) {
        return e.into_response();
    }
    match check(&ctx, &pinned).await {
        Ok(()) => next.run(Request::from_parts(parts, body)).await,
        Err(e) => e.into_response(),
    }
}

async fn check(ctx: &ApiContext, pinned: &str) -> ApiResult<()> {
    let pinned: i64 = pinned.parse().map_err(|_| {
        ApiError::bad_request(
            "invalid_query",
            format!("`catalog_version` must be an integer, got `{pinned}`"),
        )
    })?;
    let current = {
        let mut conn = ctx.read_db.acquire().await?;
        storage::catalog::version(&mut conn).await?
    };
    let running = rebuilds::progress(&ctx.read_db).await?;
    let pending = |message: String| ApiError::CatalogPending {
        message,
        details: serde_json::json!({ "catalog_version": current, "rebuild": running }),
    };
    if pinned != current {
        return Err(pending(format!(
            "the catalog is at version {current}, not {pinned}: ask for version {current}"
        )));
    }
    if let Some(r) = &running {
        return Err(pending(format!(
            "failures are being rebuilt under catalog version {} ({} of {} done); ask again once it is done",
            r.version,
            r.done,
            r.total.map_or("?".to_string(), |t| t.to_string())
        )));
    }
    Ok(())
}

/// Documents `catalog_version` and its 409 on every read that takes it.
pub struct CatalogPin;

impl utoipa::Modify for CatalogPin {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        use utoipa::openapi::{RefOr, Required};
        for (path, item) in openapi.paths.paths.iter_mut() {
            if !pins_catalog(&axum::http::Method::GET, path) {
                continue;
            }
            let Some(op) = item.get.as_mut() else { continue };
            let parameter = ParameterBuilder::new()
                .name("catalog_version")
                .parameter_in(ParameterIn::Query)
                .required(Required::False)
                .description(Some(
                    "Answer only if every failure is classified under this catalog version: 409 \
                     (`catalog_version_pending`, with the running rebuild's progress) while a rebuild \
                     to it runs or when the catalog is at another version.",
                ))
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::Integer)
                        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                            utoipa::openapi::KnownFormat::Int64,
                        )))
                        .minimum(Some(1)),
                ))
                .build();
            op.parameters.get_or_insert_with(Vec::new).push(RefOr::T(parameter));
            let conflict = utoipa::openapi::ResponseBuilder::new()
                .description(
                    "`catalog_version` names a version the failures are not all classified under yet (or \
                     no longer): `details` holds the current version and the running rebuild",
                )
                .content(
                    "application/json",
                    utoipa::openapi::ContentBuilder::new()
                        .schema(Some(utoipa::openapi::Ref::from_schema_name("ErrorBody")))
                        .build(),
                )
                .build();
            op.responses.responses.insert("409".into(), RefOr::T(conflict));
        }
    }
}
