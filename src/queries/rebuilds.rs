//! Catalog rebuilds as readers see them: the state and progress of one, with its rate and the
//! time it still needs; and the running one's progress, which every answer carries while it runs.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use crate::storage::rebuilds::{self as store, RebuildRow};

/// A rebuild of the failures after a catalog edit (`GET /v1/catalog/rebuilds/{version}`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[schema(example = json!({"version": 7, "state": "running", "started_at": "2026-12-02T10:00:00Z",
    "finished_at": null, "total": 81446, "done": 20000, "changed": 312, "chunks": 100,
    "failures_per_second": 2600.0, "eta_seconds": 23.6}))]
pub struct RebuildStatus {
    /// The catalog version the failures are rebuilt under (the edit's version).
    pub version: i64,
    /// `running`, `done`, or `superseded` (a newer edit's rebuild took over its remaining work).
    pub state: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Failures classified under an older version when the work began (null until then).
    pub total: Option<i64>,
    /// Failures rebuilt so far.
    pub done: i64,
    /// Of those, failures whose category, component or severity changed.
    pub changed: i64,
    /// Chunks committed (one transaction each).
    pub chunks: i64,
    /// Failures rebuilt per second since the start.
    pub failures_per_second: Option<f64>,
    /// Seconds still needed at that rate (0 once done; null before a rate is known).
    pub eta_seconds: Option<f64>,
}

impl RebuildStatus {
    pub fn of(r: RebuildRow, now: DateTime<Utc>) -> RebuildStatus {
        let end = r.finished_at.unwrap_or(now);
        let secs = (end - r.started_at).num_milliseconds() as f64 / 1000.0;
        let rate = (secs > 0.0 && r.done_failures > 0).then(|| r.done_failures as f64 / secs);
        let eta = match (r.state.as_str(), r.total_failures, rate) {
            ("running", Some(total), Some(rate)) => Some(((total - r.done_failures).max(0) as f64) / rate),
            ("running", _, _) => None,
            _ => Some(0.0),
        };
        RebuildStatus {
            version: r.version,
            state: r.state,
            started_at: r.started_at,
            finished_at: r.finished_at,
            total: r.total_failures,
            done: r.done_failures,
            changed: r.changed_failures,
            chunks: r.chunks,
            failures_per_second: rate,
            eta_seconds: eta,
        }
    }
}

/// What every answer says while a rebuild runs: until it is done, failures of the window may be
/// classified under an older catalog version than the answer's `catalog_version`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct RebuildProgress {
    /// The catalog version being rebuilt to.
    pub version: i64,
    pub done: i64,
    /// Null until the work began.
    pub total: Option<i64>,
    pub started_at: DateTime<Utc>,
}

pub async fn status(db: &PgPool, version: i64) -> Result<Option<RebuildStatus>, sqlx::Error> {
    let mut conn = db.acquire().await?;
    Ok(store::get(&mut conn, version)
        .await?
        .map(|r| RebuildStatus::of(r, Utc::now())))
}

/// The running rebuild's progress, if one runs.
pub async fn progress(db: &PgPool) -> Result<Option<RebuildProgress>, sqlx::Error> {
    Ok(store::running(db).await?.map(|r| RebuildProgress {
        version: r.version,
        done: r.done_failures,
        total: r.total_failures,
        started_at: r.started_at,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: &str, total: Option<i64>, done: i64, finished: bool) -> RebuildRow {
        let start: DateTime<Utc> = "2026-12-02T10:00:00Z".parse().unwrap();
        RebuildRow {
            version: 3,
            state: state.into(),
            started_at: start,
            finished_at: finished.then(|| start + chrono::Duration::seconds(40)),
            total_failures: total,
            done_failures: done,
            changed_failures: 0,
            chunks: 1,
            cursor_cluster: None,
            cursor_key: None,
            updated_at: start,
        }
    }

    #[test]
    fn rate_and_eta_from_the_progress() {
        let now: DateTime<Utc> = "2026-12-02T10:00:10Z".parse().unwrap();
        // 1,000 of 4,000 in 10 s: 100/s, 30 s to go.
        let s = RebuildStatus::of(row("running", Some(4000), 1000, false), now);
        assert_eq!((s.failures_per_second, s.eta_seconds), (Some(100.0), Some(30.0)));
        // Nothing done yet: no rate, no estimate.
        let s = RebuildStatus::of(row("running", None, 0, false), now);
        assert_eq!((s.failures_per_second, s.eta_seconds), (None, None));
        // Done in 40 s: the rate over its whole run, nothing left.
        let s = RebuildStatus::of(row("done", Some(4000), 4000, true), now);
        assert_eq!((s.failures_per_second, s.eta_seconds), (Some(100.0), Some(0.0)));
    }
}
