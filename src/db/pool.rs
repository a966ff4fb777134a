//! The connection pool, sized and timed by [`PoolSettings`].

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::app::edge::PoolSettings;

/// Connects a pool. A short acquire timeout is the point: a request waits at most that long for a
/// connection (or for a database that does not answer), then is answered 503 + Retry-After.
pub async fn connect(url: &str, settings: &PoolSettings) -> Result<PgPool, sqlx::Error> {
    options(settings).connect(url).await
}

pub fn options(settings: &PoolSettings) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(settings.db_max_connections.max(1))
        .acquire_timeout(settings.acquire_timeout())
}
