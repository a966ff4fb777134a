//! HTTP layer: one module per resource, each exposing `router()`.

pub mod alerts;
pub mod analytics;
pub mod audit;
pub mod body_budget;
pub mod caller;
pub mod classify;
pub mod csv;
pub mod dashboard;
pub mod error;
pub mod events;
pub mod extract;
pub mod failures;
pub mod gpus;
pub mod health;
pub mod heartbeats;
pub mod integrations;
pub mod jobs;
pub mod logs;
pub mod nodes;
pub mod nvsentinel;
pub mod openapi;
pub mod rate_limit;
pub mod rebuilds;
pub mod report;
pub mod rules;
pub mod sync_cursors;
pub mod terms;
pub mod tokens;

use std::sync::Arc;

use axum::Router;
use sqlx::PgPool;
use tokio::sync::Semaphore;

use crate::app::configuration::AppConfig;

/// Shared state, passed explicitly to every handler.
#[derive(Clone)]
pub struct ApiContext {
    pub config: Arc<AppConfig>,
    /// The primary: writes, and every read that must see the caller's own writes (tokens, the
    /// catalog, single resources after a change).
    pub db: PgPool,
    /// Analytics, the report and the lists: the read replica when one is configured, else a clone
    /// of `db`. May lag the primary (see docs/operations.md, "Read replicas").
    pub read_db: PgPool,
    /// Whether `read_db` is a replica (and not the primary again).
    pub read_replica: bool,
    /// Bounds concurrent ingest work (relay-style backpressure: 503 + Retry-After beyond it).
    pub ingest_permits: Arc<Semaphore>,
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    pub catalog: crate::ingest::catalog::CatalogCache,
    /// SHA-256 of the configured admin token, computed once at start-up.
    pub admin_token_hash: Arc<[u8]>,
    /// Per-token request budget (in-process; see `rate_limit`).
    pub rate_limiter: Arc<rate_limit::RateLimiter>,
}

impl ApiContext {
    /// A slot for one ingest request, or 503 + Retry-After when all are taken (the request is
    /// shed before its body is read, and counted by endpoint).
    pub fn ingest_permit(
        &self,
        endpoint: &'static str,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, crate::http::error::ApiError> {
        self.ingest_permits.clone().try_acquire_owned().map_err(|_| {
            metrics::counter!("faultline_ingest_shed_total", "endpoint" => endpoint).increment(1);
            crate::http::error::ApiError::Unavailable { retry_after_secs: 1 }
        })
    }
}

pub fn api_router() -> Router<ApiContext> {
    Router::new()
        .merge(events::router())
        .merge(logs::router())
        .merge(nvsentinel::router())
        .merge(integrations::router())
        .merge(nodes::router())
        .merge(gpus::router())
        .merge(tokens::router())
        .merge(rules::router())
        .merge(terms::router())
        .merge(rebuilds::router())
        .merge(classify::router())
        .merge(failures::router())
        .merge(analytics::router())
        .merge(jobs::router())
        .merge(sync_cursors::router())
        .merge(heartbeats::router())
        .merge(report::router())
        .merge(audit::router())
        .merge(alerts::router())
}
