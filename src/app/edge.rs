//! Settings of the HTTP edge: connection pool, admission, in-flight body bytes, shutdown deadline.

use std::time::Duration;

/// The database connection pool. Admission follows it: ingest requests beyond what the pool can
/// serve soon are answered 503 + Retry-After at once, and a request that still cannot get a
/// connection within `db_acquire_timeout_ms` gets the same 503, never a 500 after a long wait.
#[derive(clap::Args, Clone, Debug)]
pub struct PoolSettings {
    /// Connections to Postgres.
    #[arg(long, env = "FAULTLINE_DB_MAX_CONNECTIONS", default_value_t = 16)]
    pub db_max_connections: u32,
    /// Longest wait for a pooled connection (or for an unreachable database) before 503.
    #[arg(long, env = "FAULTLINE_DB_ACQUIRE_TIMEOUT_MS", default_value_t = 1500)]
    pub db_acquire_timeout_ms: u64,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            db_max_connections: 16,
            db_acquire_timeout_ms: 1500,
        }
    }
}

impl PoolSettings {
    pub fn acquire_timeout(&self) -> Duration {
        Duration::from_millis(self.db_acquire_timeout_ms.max(1))
    }

    /// Ingest requests that may hold a connection at once: the pool less a quarter (at least
    /// one) kept for reads, token checks and readiness probes.
    pub fn ingest_slots(&self) -> usize {
        ingest_slots(self.db_max_connections)
    }
}

/// Ingest requests that may run at once with a pool of `max_connections`: the pool less a quarter
/// (at least one), kept for reads, token checks and readiness probes; at least one.
/// 16 connections: 12 ingest slots; 2: 1; 1: 1.
pub fn ingest_slots(max_connections: u32) -> usize {
    let n = max_connections.max(1) as usize;
    n.saturating_sub((n / 4).max(1)).max(1)
}

/// Bounds of the edge that are not per-request limits.
#[derive(clap::Args, Clone, Debug)]
pub struct EdgeSettings {
    #[command(flatten)]
    pub pool: PoolSettings,
    /// Request body bytes held in memory at once, over all requests; beyond it 503 + Retry-After
    /// before the body is read (by Content-Length when sent, else as the bytes arrive).
    #[arg(long, env = "FAULTLINE_MAX_INFLIGHT_BODY_BYTES", default_value_t = DEFAULT_INFLIGHT_BODY_BYTES)]
    pub max_inflight_body_bytes: usize,
    /// On SIGTERM/Ctrl-C, how long in-flight requests may still run before the process exits.
    #[arg(long, env = "FAULTLINE_SHUTDOWN_TIMEOUT_SECS", default_value_t = 30)]
    pub shutdown_timeout_secs: u64,
    #[command(flatten)]
    pub rate_limit: crate::http::rate_limit::RateLimitSettings,
}

pub const DEFAULT_INFLIGHT_BODY_BYTES: usize = 64 * 1024 * 1024;

impl Default for EdgeSettings {
    fn default() -> Self {
        EdgeSettings {
            pool: PoolSettings::default(),
            max_inflight_body_bytes: DEFAULT_INFLIGHT_BODY_BYTES,
            shutdown_timeout_secs: 30,
            rate_limit: Default::default(),
        }
    }
}

impl EdgeSettings {
    pub fn shutdown_timeout(&self) -> Duration {
        Duration::from_secs(self.shutdown_timeout_secs)
    }
}
