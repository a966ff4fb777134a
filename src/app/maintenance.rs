//! The storage maintenance task: monthly partitions of `events` created ahead, and
//! signal retention applied by dropping whole partitions. Runs at start-up (partitions only) and
//! then every `maintenance_interval_secs`; every instance runs it, the SQL functions serialise
//! them with one advisory lock and bound their waits with lock_timeout.

use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};
use sqlx::PgPool;

use crate::app::configuration::RetentionSettings;
use crate::storage;

/// Months created ahead of the current one, so ingest of live signals never creates one.
const MONTHS_AHEAD: u32 = 3;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    pub created: i32,
    pub dropped: i32,
}

/// Creates the partitions of this month and the next [`MONTHS_AHEAD`] (as of `now`).
pub async fn create_ahead(db: &PgPool, now: DateTime<Utc>) -> Result<i32, sqlx::Error> {
    let this_month = Utc
        .with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0)
        .single()
        .unwrap_or(now);
    let ahead = this_month
        .checked_add_months(chrono::Months::new(MONTHS_AHEAD + 1))
        .unwrap_or(this_month);
    storage::partitions::ensure_range(db, this_month, ahead).await
}

/// One pass as of `now`: partitions ahead, then the partitions whose end is older than the
/// retention (none when it is 0).
pub async fn run_once(db: &PgPool, now: DateTime<Utc>, settings: &RetentionSettings) -> Result<Pass, sqlx::Error> {
    let created = create_ahead(db, now).await?;
    let dropped = if settings.signal_retention_days > 0 {
        storage::partitions::drop_before(db, now - Duration::days(settings.signal_retention_days.into())).await?
    } else {
        0
    };
    Ok(Pass { created, dropped })
}

/// Runs [`run_once`] every interval (the first one interval after start, so a restart does not
/// race the requests of a fresh instance); a failed pass (e.g. lock_timeout behind a long
/// transaction) is logged and retried at the next.
pub fn spawn(db: PgPool, settings: RetentionSettings) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let every = std::time::Duration::from_secs(settings.maintenance_interval_secs.max(1));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            match run_once(&db, Utc::now(), &settings).await {
                Ok(p) if p.created > 0 || p.dropped > 0 => {
                    tracing::info!(created = p.created, dropped = p.dropped, "partition maintenance")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "partition maintenance failed; retrying at the next pass"),
            }
        }
    })
}
