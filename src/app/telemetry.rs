//! Logging and metrics set-up: the one Prometheus recorder, every metric described (`# HELP`,
//! unit), latency histograms with fixed buckets, build info; process metrics come from
//! [`crate::app::process_metrics`] and the pool gauges are refreshed on each scrape.

use std::sync::OnceLock;

use metrics::Unit;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use sqlx::PgPool;
use tracing_subscriber::EnvFilter;

pub fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Buckets of `faultline_http_request_seconds`: 1 ms .. 10 s, roughly x2.5 per step (reads answer
/// in milliseconds, reports and large exports in seconds).
pub const REQUEST_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Buckets of `faultline_ingest_seconds`: 1 ms .. 30 s (a full batch of 10,000 signals with its
/// fold takes about a second; a stalled database shows up in the upper buckets).
pub const INGEST_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Buckets of `faultline_alert_delivery_seconds`: 5 ms .. 30 s (a receiver on the same network
/// answers in milliseconds; one that hangs shows up at the send timeout, 10 s by default).
pub const ALERT_DELIVERY_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// The `metrics` facade needs one process-wide recorder; tests start several apps in one process,
/// so it is installed once and its handle shared.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let handle = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full("faultline_http_request_seconds".into()), REQUEST_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full("faultline_ingest_seconds".into()), INGEST_BUCKETS)
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("faultline_alert_delivery_seconds".into()),
                        ALERT_DELIVERY_BUCKETS,
                    )
                })
                .expect("bucket lists are not empty")
                .install_recorder()
                .expect("no other metrics recorder is installed");
            describe_metrics();
            metrics::gauge!("faultline_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
            handle
        })
        .clone()
}

/// `# HELP` text and unit of every metric the service records. A metric recorded anywhere must be
/// described here (docs/operations.md's "Metrics" table lists the same set).
fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "faultline_http_requests_total",
        Unit::Count,
        "HTTP requests answered, by method, matched route template (or `unmatched`) and status code"
    );
    describe_histogram!(
        "faultline_http_request_seconds",
        Unit::Seconds,
        "Time from receiving a request to its response head, by method and route template"
    );
    describe_counter!(
        "faultline_ingest_items_total",
        Unit::Count,
        "Items of ingest batches, by route (events, logs, nvsentinel, nodes, jobs), outcome (accepted, duplicate, rejected) and rejection reason (`none` unless rejected)"
    );
    describe_histogram!(
        "faultline_ingest_seconds",
        Unit::Seconds,
        "Time an admitted ingest request takes, body read, validation and storage included, by route; failed requests are counted too"
    );
    describe_counter!(
        "faultline_alert_evaluations_total",
        Unit::Count,
        "Alert rule evaluations (one per rule and cluster), by outcome (ok, error)"
    );
    describe_counter!(
        "faultline_alert_transitions_total",
        Unit::Count,
        "Alerts that started firing or resolved, by `to` (firing, resolved)"
    );
    describe_counter!(
        "faultline_alert_deliveries_total",
        Unit::Count,
        "Notification delivery attempts, by receiver kind (alertmanager, webhook, slack) and outcome (delivered, retry, rejected, expired)"
    );
    describe_histogram!(
        "faultline_alert_delivery_seconds",
        Unit::Seconds,
        "Time a receiver took to answer a notification (or to fail), by receiver kind"
    );
    describe_counter!(
        "faultline_alert_resends_total",
        Unit::Count,
        "Firing alerts re-sent to Alertmanager (one per alert and receiver), by outcome (ok, error)"
    );
    describe_counter!(
        "faultline_rate_limited_total",
        Unit::Count,
        "Requests refused with 429 because their token's per-token rate limit was used up, by role (agent, reader, admin)"
    );
    describe_counter!(
        "faultline_ingest_shed_total",
        Unit::Count,
        "Ingest requests refused with 503 before their body was read because every ingest slot was taken, by endpoint"
    );
    describe_counter!(
        "faultline_body_budget_shed_total",
        Unit::Count,
        "Requests refused with 503 because the in-flight request body budget was exhausted"
    );
    describe_counter!(
        "faultline_db_unavailable_total",
        Unit::Count,
        "Requests answered 503 because the database did not answer or no pool connection was free in time"
    );
    describe_counter!(
        "faultline_log_lines_total",
        Unit::Count,
        "Log lines ingested, by outcome: `signal` (matched a pattern and became a signal) or `unmatched`"
    );
    describe_counter!(
        "faultline_rebuild_chunks_total",
        Unit::Count,
        "Chunks of a catalog rebuild committed by this instance (one transaction of correlation keys each)"
    );
    describe_counter!(
        "faultline_rebuild_failures_total",
        Unit::Count,
        "Failures a catalog rebuild re-folded under the new catalog version, on this instance"
    );
    describe_counter!(
        "faultline_rebuild_failures_changed_total",
        Unit::Count,
        "Of the rebuilt failures, those whose category, component or severity changed"
    );
    describe_gauge!(
        "faultline_rebuild_failures_remaining",
        Unit::Count,
        "Failures the running catalog rebuild still has to rebuild (the lag; 0 when none runs), as seen by the instance doing it"
    );
    describe_gauge!(
        "faultline_db_pool_connections",
        Unit::Count,
        "Database pool connections at the last scrape, by state: `open` (all), `idle`, `in_use`"
    );
    describe_gauge!(
        "faultline_db_pool_max_connections",
        Unit::Count,
        "Configured maximum size of the database pool"
    );
    describe_gauge!(
        "faultline_db_read_pool_connections",
        Unit::Count,
        "Read-replica pool connections at the last scrape, by state (only with FAULTLINE_READ_DATABASE_URL)"
    );
    describe_gauge!(
        "faultline_db_read_pool_max_connections",
        Unit::Count,
        "Configured maximum size of the read-replica pool (only with FAULTLINE_READ_DATABASE_URL)"
    );
    describe_gauge!(
        "faultline_build_info",
        Unit::Count,
        "Always 1; the `version` label is the running release"
    );
}

/// Sets the pool gauges from `db` (called on each scrape of `/metrics`). With several apps in one
/// process (tests) the last scraped pool wins; a real process has one pool.
pub fn record_pool(db: &PgPool) {
    set_pool_gauges(db, "faultline_db_pool_connections", "faultline_db_pool_max_connections");
}

fn set_pool_gauges(db: &PgPool, connections: &'static str, max_connections: &'static str) {
    let open = db.size() as f64;
    let idle = db.num_idle() as f64;
    metrics::gauge!(connections, "state" => "open").set(open);
    metrics::gauge!(connections, "state" => "idle").set(idle);
    metrics::gauge!(connections, "state" => "in_use").set((open - idle).max(0.0));
    metrics::gauge!(max_connections).set(f64::from(db.options().get_max_connections()));
}

/// The whole `/metrics` answer: the recorder's metrics (pool gauges refreshed first, the read
/// replica's too when there is one) followed by the process metrics.
pub fn render(handle: &PrometheusHandle, db: &PgPool, replica: Option<&PgPool>) -> String {
    record_pool(db);
    if let Some(replica) = replica {
        set_pool_gauges(
            replica,
            "faultline_db_read_pool_connections",
            "faultline_db_read_pool_max_connections",
        );
    }
    let mut text = handle.render();
    text.push_str(&crate::app::process_metrics::render());
    text
}
