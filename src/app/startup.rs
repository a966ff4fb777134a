//! Builds the application: router, layers, state; and runs it on a listener. One
//! [`Application::build`] serves `faultline serve`, the benchmark and the integration tests, so they
//! all run the same app.

use std::sync::Arc;
use std::time::Instant;

use std::future::IntoFuture;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::decompression::RequestDecompressionLayer;
use tower_http::trace::TraceLayer;
use utoipa_swagger_ui::SwaggerUi;

use crate::app::configuration::AppConfig;
use crate::http::error::ApiError;
use crate::http::{self, ApiContext, extract::json_errors};

/// The app bound to its listener, ready to serve.
pub struct Application {
    listener: TcpListener,
    context: ApiContext,
    alerting: tokio::task::AbortHandle,
}

impl Application {
    /// Migrates `db` (idempotent, and safe when several instances start at once: sqlx's migrator
    /// holds a Postgres advisory lock while it applies), builds the state and binds `addr` (port 0:
    /// any free port). Every read goes to `db`.
    pub async fn build(config: AppConfig, db: PgPool, addr: std::net::SocketAddr) -> anyhow::Result<Application> {
        Self::build_with_replica(config, db, None, addr).await
    }

    /// [`build`](Self::build) with a read replica of `db`: analytics, the report and the lists read
    /// `replica` (see `ApiContext::read_db`); `None` is `build`.
    pub async fn build_with_replica(
        config: AppConfig,
        db: PgPool,
        replica: Option<PgPool>,
        addr: std::net::SocketAddr,
    ) -> anyhow::Result<Application> {
        crate::storage::migrate(&db).await?;
        // Partitions for this month and the next ones before serving; then the periodic pass.
        crate::app::maintenance::create_ahead(&db, chrono::Utc::now()).await?;
        crate::app::maintenance::spawn(db.clone(), config.retention.clone());
        let listener = TcpListener::bind(addr).await?;
        let context = api_context(config, db, replica);
        crate::queries::gpus::spawn_warm_lives(context.read_db.clone());
        crate::ingest::rebuild::spawn(
            context.db.clone(),
            context.catalog.clone(),
            crate::ingest::rebuild::RebuildWorker {
                chunk_keys: context.config.limits.rebuild_chunk_keys.max(1),
                window: context.config.fold_window(),
            },
        );
        let public_url = context.config.alerts.public_url.clone().unwrap_or_else(|| {
            format!(
                "http://{}",
                listener.local_addr().map(|a| a.to_string()).unwrap_or_default()
            )
        });
        let alerting = crate::alerting::task::spawn(
            context.db.clone(),
            context.config.alerts.clone(),
            public_url.trim_end_matches('/').to_string(),
        );
        Ok(Application {
            listener,
            context,
            alerting: alerting.abort_handle(),
        })
    }

    /// The alerting task (aborting it stops this instance evaluating without giving the lease
    /// back, as a crash would).
    pub fn alerting_task(&self) -> tokio::task::AbortHandle {
        self.alerting.clone()
    }

    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// The shared state (its catalog cache, for loading the demo fleet before serving).
    pub fn context(&self) -> &ApiContext {
        &self.context
    }

    /// Serves until `shutdown` resolves, then drains in-flight requests for at most the
    /// configured shutdown deadline.
    pub async fn run_until(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let deadline = self.context.config.edge.shutdown_timeout();
        serve_with_deadline(self.listener, build_router(self.context), shutdown, deadline).await
    }
}

fn api_context(config: AppConfig, db: PgPool, replica: Option<PgPool>) -> ApiContext {
    let read_replica = replica.is_some();
    ApiContext {
        // Admission matches the pool: no more ingest requests run than can hold a connection.
        ingest_permits: Arc::new(Semaphore::new(
            config
                .limits
                .max_inflight_ingest
                .min(crate::app::edge::ingest_slots(db.options().get_max_connections())),
        )),
        admin_token_hash: crate::domain::auth::hash_secret(&config.admin_token).into(),
        rate_limiter: Arc::new(crate::http::rate_limit::RateLimiter::new(&config.edge.rate_limit)),
        config: Arc::new(config),
        read_db: replica.unwrap_or_else(|| db.clone()),
        read_replica,
        db,
        metrics: crate::app::telemetry::metrics_handle(),
        catalog: Default::default(),
    }
}

fn build_router(ctx: ApiContext) -> Router {
    let body_limit = ctx.config.limits.max_body_bytes;
    let budget = http::body_budget::BodyBudget::new(ctx.config.edge.max_inflight_body_bytes, body_limit);
    let api = http::api_router()
        .layer(middleware::from_fn_with_state(ctx.clone(), http::rebuilds::pin_catalog))
        // Inside decompression, so gzip bodies are counted decompressed, as they arrive.
        .layer(middleware::from_fn_with_state(
            budget,
            http::body_budget::limit_inflight_bodies,
        ))
        // Decompression sits inside the body limit, so the limit counts decompressed bytes.
        .layer(RequestDecompressionLayer::new())
        .layer(DefaultBodyLimit::max(body_limit));
    Router::new()
        .merge(api)
        .merge(http::health::router())
        .merge(http::dashboard::router())
        .merge(SwaggerUi::new("/docs").external_url_unchecked("/openapi.json", crate::http::openapi::document()))
        .fallback(not_found)
        .layer(middleware::map_response(json_errors))
        .layer(middleware::from_fn(track_requests))
        .layer(TraceLayer::new_for_http())
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::Internal(anyhow::anyhow!("handler panicked")).into_response()
        }))
        .with_state(ctx)
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(format!("no route for {}", uri.path()))
}

async fn track_requests(req: Request, next: Next) -> Response {
    let started = Instant::now();
    // Labels from closed sets only, so no client can mint new series: the route template the
    // router matched (or `unmatched`), and a known method (or `other`).
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".into());
    let method = method_label(req.method());
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("faultline_http_requests_total", "method" => method, "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("faultline_http_request_seconds", "method" => method, "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}

/// The `method` label of the request metrics: one of the standard methods, else `other`.
pub fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Serves until `shutdown` resolves; then stops accepting, lets in-flight requests finish for at
/// most `deadline`, and returns even if some have not (a client that sent half a body and stalls
/// would otherwise keep the process alive as long as it likes). Connections still open then are
/// dropped when the runtime ends.
async fn serve_with_deadline(
    listener: TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    deadline: std::time::Duration,
) -> std::io::Result<()> {
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let server = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            let _ = started_tx.send(());
        })
        .into_future();
    let expired = async move {
        match started_rx.await {
            Ok(()) => tokio::time::sleep(deadline).await,
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        served = server => served,
        () = expired => {
            tracing::warn!(deadline_secs = deadline.as_secs_f64(), "shutdown deadline reached with requests still in flight; exiting anyway");
            Ok(())
        }
    }
}
