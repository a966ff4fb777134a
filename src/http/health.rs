//! Open endpoints: liveness, readiness (checks the database) and Prometheus metrics.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiContext;
use crate::http::error::{ApiError, ErrorBody};

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process is alive", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok".into() })
}

/// Longest a readiness probe waits for the database: probes time out after 1 s by default.
pub const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(800);

/// Readiness, per database.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct Readiness {
    /// `ready`.
    pub status: String,
    /// The primary answered: `ok`.
    pub primary: String,
    /// `ok` when the read replica (`FAULTLINE_READ_DATABASE_URL`) answered; `not_configured` when
    /// there is none and reads go to the primary.
    pub read_replica: String,
}

/// Readiness: the primary, and the read replica when one is configured, answer within 0.8 s.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready: the primary (and the read replica, if configured) answer", body = Readiness),
        (status = 503, description = "The primary or the read replica does not answer within 0.8 s (or its pool has no connection free); the log says which; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
    ))]
pub async fn readyz(State(ctx): State<ApiContext>) -> Result<Json<Readiness>, ApiError> {
    let replica = async {
        if ctx.read_replica {
            answers(&ctx.read_db, "read replica").await.map(|()| "ok")
        } else {
            Ok("not_configured")
        }
    };
    let (primary, replica) = tokio::join!(answers(&ctx.db, "primary"), replica);
    primary?;
    Ok(Json(Readiness {
        status: "ready".into(),
        primary: "ok".into(),
        read_replica: replica?.into(),
    }))
}

/// Whether `db` answers `SELECT 1` within [`READY_TIMEOUT`]; else 503, logged with `which`.
async fn answers(db: &sqlx::PgPool, which: &'static str) -> Result<(), ApiError> {
    let probe = sqlx::query_scalar!(r#"SELECT 1 AS "one!""#).fetch_one(db);
    match tokio::time::timeout(READY_TIMEOUT, probe).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => {
            tracing::warn!(database = which, error = %e, "readiness check failed");
            Err(ApiError::Unavailable {
                retry_after_secs: crate::http::error::RETRY_AFTER_OUTAGE_SECS,
            })
        }
        Err(_) => {
            tracing::warn!(database = which, "readiness check timed out");
            Err(ApiError::Unavailable {
                retry_after_secs: crate::http::error::RETRY_AFTER_OUTAGE_SECS,
            })
        }
    }
}

/// Prometheus metrics: requests and their latency, ingest items by route, outcome and reason, ingest
/// latency, shed requests, database pool, process and build info (docs/operations.md, "Metrics").
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Metrics in the Prometheus text exposition format", body = String, content_type = "text/plain")))]
pub async fn metrics_text(State(ctx): State<ApiContext>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::app::telemetry::render(&ctx.metrics, &ctx.db, ctx.read_replica.then_some(&ctx.read_db)),
    )
}
