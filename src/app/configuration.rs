//! Settings from flags and environment.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Clone, Debug)]
pub struct DatabaseSettings {
    /// Postgres URL [default: a server on localhost:5432 if one answers, else a private one run in
    /// the data directory].
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Where the private Postgres cluster and the generated admin token live.
    #[arg(long, env = "FAULTLINE_DATA_DIR", default_value = ".faultline")]
    pub data_dir: PathBuf,
}

#[derive(clap::Args, Clone, Debug)]
pub struct ServeSettings {
    #[command(flatten)]
    pub database: DatabaseSettings,
    /// Postgres URL of a read replica (a streaming standby of the database): analytics, the report
    /// and the lists read from it, a few hundred milliseconds behind the primary at most under normal
    /// replication [default: none, every read goes to the primary].
    #[arg(long, env = "FAULTLINE_READ_DATABASE_URL", hide_env_values = true)]
    pub read_database_url: Option<String>,
    /// Address and port to listen on (0.0.0.0:8080 for every interface; port 0 picks a free one).
    #[arg(long, env = "FAULTLINE_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Admin bearer token [default: the one stored in the data directory; at the first start one is
    /// generated there and printed once].
    #[arg(long, env = "FAULTLINE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    #[command(flatten)]
    pub limits: Limits,
    #[command(flatten)]
    pub edge: crate::app::edge::EdgeSettings,
    #[command(flatten)]
    pub retention: RetentionSettings,
    #[command(flatten)]
    pub alerts: AlertSettings,
    /// Signals of the same job (or node) closer than this fold into one failure.
    #[arg(long, env = "FAULTLINE_CORRELATION_WINDOW_SECS", default_value_t = 600)]
    pub correlation_window_secs: u32,
    /// Load a simulated fleet into an empty database at start (a database holding events is left
    /// alone), and print the dashboard URL signed in with the admin token.
    #[arg(long, env = "FAULTLINE_DEMO")]
    pub demo: bool,
}

/// Correlation keys a catalog rebuild re-folds per transaction: small enough that an ingest batch
/// waiting for a chunk's fold-key stripes waits tens of milliseconds, not the whole chunk of a
/// node with a thousand failures.
pub const DEFAULT_REBUILD_CHUNK_KEYS: usize = 32;

/// Bounds on what one request may cost. Documented in the OpenAPI description and docs/operations.md.
#[derive(clap::Args, Clone, Debug)]
pub struct Limits {
    /// Largest request body, after gzip decompression (so gzip bombs stop here too).
    #[arg(long, env = "FAULTLINE_MAX_BODY_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Most items in one batch.
    #[arg(long, env = "FAULTLINE_MAX_BATCH_ITEMS", default_value_t = 10_000)]
    pub max_batch_items: usize,
    /// Ingest requests processed at once (never more than the database pool less a quarter, which
    /// is kept for reads); beyond that the answer is 503 with Retry-After.
    #[arg(long, env = "FAULTLINE_MAX_INFLIGHT_INGEST", default_value_t = 32)]
    pub max_inflight_ingest: usize,
    /// Correlation keys a catalog rebuild re-folds per transaction: an ingest batch waits for at
    /// most one such chunk.
    #[arg(long, env = "FAULTLINE_REBUILD_CHUNK_KEYS", default_value_t = DEFAULT_REBUILD_CHUNK_KEYS)]
    pub rebuild_chunk_keys: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 16 * 1024 * 1024,
            max_batch_items: 10_000,
            max_inflight_ingest: 32,
            rebuild_chunk_keys: DEFAULT_REBUILD_CHUNK_KEYS,
        }
    }
}

/// Signal retention and the maintenance task that applies it (`crate::app::maintenance`).
#[derive(clap::Args, Clone, Debug)]
pub struct RetentionSettings {
    /// Signals (raw rows and their idempotency ledger) are kept this many days, in whole monthly
    /// partitions: a month is dropped once its end is older than this. Failures, lifecycles and
    /// node transitions stay. 0 keeps signals forever.
    #[arg(long, env = "FAULTLINE_SIGNAL_RETENTION_DAYS", default_value_t = 400)]
    pub signal_retention_days: u32,
    /// How often the maintenance task creates partitions ahead and applies retention.
    #[arg(long, env = "FAULTLINE_MAINTENANCE_INTERVAL_SECS", default_value_t = 3600)]
    pub maintenance_interval_secs: u64,
}

impl Default for RetentionSettings {
    fn default() -> Self {
        RetentionSettings {
            signal_retention_days: 400,
            maintenance_interval_secs: 3600,
        }
    }
}

/// Alert evaluation and delivery (`crate::alerting::task`).
#[derive(clap::Args, Clone, Debug)]
pub struct AlertSettings {
    /// How often the alert rules are evaluated (seconds; fractions allowed).
    #[arg(long, env = "FAULTLINE_ALERT_EVALUATION_INTERVAL_SECS", default_value_t = 60.0)]
    pub alert_evaluation_interval_secs: f64,
    /// How long the evaluation lease lasts unless renewed: after a crash of the instance that held
    /// it, another takes over within this long (seconds).
    #[arg(long, env = "FAULTLINE_ALERT_LEASE_SECS", default_value_t = 30.0)]
    pub alert_lease_secs: f64,
    /// How often the lease holder looks for notifications to send (seconds).
    #[arg(long, env = "FAULTLINE_ALERT_DELIVERY_POLL_SECS", default_value_t = 1.0)]
    pub alert_delivery_poll_secs: f64,
    /// First retry delay of a failed delivery; it doubles per attempt (with jitter) up to the cap.
    #[arg(long, env = "FAULTLINE_ALERT_RETRY_BASE_SECS", default_value_t = 5.0)]
    pub alert_retry_base_secs: f64,
    /// Longest delay between two attempts of one delivery.
    #[arg(long, env = "FAULTLINE_ALERT_RETRY_CAP_SECS", default_value_t = 300.0)]
    pub alert_retry_cap_secs: f64,
    /// A notification not delivered this long after it was written is given up (`expired`).
    #[arg(long, env = "FAULTLINE_ALERT_GIVE_UP_HOURS", default_value_t = 24.0)]
    pub alert_give_up_hours: f64,
    /// How long one receiver may take to answer a notification before the attempt counts as
    /// failed (seconds; at most half the lease).
    #[arg(long, env = "FAULTLINE_ALERT_SEND_TIMEOUT_SECS", default_value_t = 10.0)]
    pub alert_send_timeout_secs: f64,
    /// How often every firing alert is sent again to its Alertmanager receivers (seconds), each
    /// with an `endsAt` four of these ahead: an Alertmanager that restarts or fails over has them
    /// back within this long, and they lapse there if Faultline stops sending.
    #[arg(long, env = "FAULTLINE_ALERT_RESEND_INTERVAL_SECS", default_value_t = 60.0)]
    pub alert_resend_interval_secs: f64,
    /// Base URL of this service as receivers should reach it (the links in notifications)
    /// [default: http:// and the listen address].
    #[arg(long, env = "FAULTLINE_PUBLIC_URL")]
    pub public_url: Option<String>,
}

impl Default for AlertSettings {
    fn default() -> Self {
        AlertSettings {
            alert_evaluation_interval_secs: 60.0,
            alert_lease_secs: 30.0,
            alert_delivery_poll_secs: 1.0,
            alert_retry_base_secs: 5.0,
            alert_retry_cap_secs: 300.0,
            alert_give_up_hours: 24.0,
            alert_resend_interval_secs: 60.0,
            alert_send_timeout_secs: 10.0,
            public_url: None,
        }
    }
}

impl AlertSettings {
    /// How long a receiver may take to answer: the setting, at most half the lease (a request
    /// starts only while the lease has this long left, so that it ends before the lease can pass
    /// to another instance).
    pub fn send_timeout(&self) -> Duration {
        secs(self.alert_send_timeout_secs).min(secs(self.alert_lease_secs) / 2)
    }

    /// How long Alertmanager holds a firing alert without hearing of it again: four re-send
    /// intervals (as Prometheus does), so one or two lost re-sends do not resolve it.
    pub fn alertmanager_validity(&self) -> chrono::Duration {
        chrono::Duration::milliseconds((secs(self.alert_resend_interval_secs).as_millis() * 4) as i64)
    }
}

/// Seconds as a Duration (at least a millisecond; a non-finite value is a millisecond).
pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(if s.is_finite() { s.clamp(0.001, 1e9) } else { 0.001 })
}

/// What the running app needs to know; held in `ApiContext`.
#[derive(Clone, Debug)]
pub struct AppConfig {
    pub admin_token: String,
    pub limits: Limits,
    pub correlation_window: Duration,
    /// Pool, body-byte budget and shutdown deadline (`FAULTLINE_DB_*`, `FAULTLINE_MAX_INFLIGHT_BODY_BYTES`, ...).
    pub edge: crate::app::edge::EdgeSettings,
    /// Signal retention and partition maintenance.
    pub retention: RetentionSettings,
    /// Alert evaluation and delivery.
    pub alerts: AlertSettings,
}

impl AppConfig {
    /// The correlation window as the folding code measures time (whole seconds, as configured: at
    /// most u32::MAX, so the conversion cannot overflow).
    pub fn fold_window(&self) -> chrono::Duration {
        chrono::Duration::seconds(self.correlation_window.as_secs() as i64)
    }
}
