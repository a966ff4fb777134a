//! Rebuilding the failures after a catalog edit, in the background and in chunks, so that an edit
//! never stops ingest: the edit commits a new catalog version at once (new signals fold with it
//! from then on) and records a rebuild; a worker in every instance then re-folds the failures
//! still classified under an older version, a chunk of one cluster's correlation keys per
//! transaction, under the same catalog lock (shared) and fold-key lock stripes as an ingest batch.
//! A chunk and a batch therefore wait for each other for at most one chunk's keys.
//!
//! One instance works at a time: the one holding the rebuild lease, a session advisory lock on the
//! connection every chunk runs on (a crash or a lost connection hands it over). Progress (the last
//! key done, in (cluster, key) order) commits with each chunk, so a restart resumes there. A newer
//! edit supersedes a running rebuild: the worker sees the version move at its next chunk and
//! continues with the newer one, which covers every failure still classified under an older
//! version (those the older rebuild had done included: their classification is stale again).

use std::collections::HashSet;
use std::time::Duration as StdDuration;

use chrono::Duration;
use sqlx::{PgConnection, PgPool};

use super::catalog::{self, CatalogCache};
use super::refold::{self, Touched};
use crate::fold::CorrelationKey;
use crate::storage::rebuilds::{self as store, RebuildRow};

/// The advisory lock that is the rebuild lease (namespace, id).
const LEASE: (i32, i32) = (0x464c_0004, 0);

/// How often an idle worker looks for a rebuild to run.
const IDLE_POLL: StdDuration = StdDuration::from_millis(500);

/// Rebuild settings of an instance.
#[derive(Debug, Clone, Copy)]
pub struct RebuildWorker {
    /// Correlation keys per chunk (one transaction).
    pub chunk_keys: usize,
    /// The fold's correlation window.
    pub window: Duration,
}

/// Runs the worker until the process ends: looks for a running rebuild, takes the lease, and
/// runs it to the end (or until it is superseded, then the newer one). Errors are logged and the
/// work is retried at the next poll, from the stored progress.
pub fn spawn(db: PgPool, cache: CatalogCache, worker: RebuildWorker) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(IDLE_POLL).await;
            if let Err(e) = run_pending(&db, &cache, worker).await {
                tracing::warn!(error = %e, "catalog rebuild interrupted; resuming at the next poll");
            }
        }
    })
}

/// Runs the pending rebuilds if this instance gets the lease; the versions it finished.
pub async fn run_pending(db: &PgPool, cache: &CatalogCache, worker: RebuildWorker) -> Result<Vec<i64>, sqlx::Error> {
    if store::running(db).await?.is_none() {
        return Ok(Vec::new());
    }
    let mut conn = db.acquire().await?;
    let leased: bool = sqlx::query_scalar!(r#"SELECT pg_try_advisory_lock($1, $2) AS "leased!""#, LEASE.0, LEASE.1)
        .fetch_one(&mut *conn)
        .await?;
    if !leased {
        return Ok(Vec::new());
    }
    let result = drive(&mut conn, cache, worker).await;
    // A connection that failed mid-way is closed with its lock; otherwise release it for reuse.
    let _ = sqlx::query!("SELECT pg_advisory_unlock($1, $2)", LEASE.0, LEASE.1)
        .fetch_one(&mut *conn)
        .await;
    result
}

async fn drive(conn: &mut PgConnection, cache: &CatalogCache, worker: RebuildWorker) -> Result<Vec<i64>, sqlx::Error> {
    let mut finished = Vec::new();
    while let Some(rebuild) = store::running(&mut *conn).await? {
        let version = rebuild.version;
        if rebuild.total_failures.is_none() {
            let total = store::count_stale(conn, version).await?;
            store::set_total(conn, version, total).await?;
        }
        match run(conn, cache, worker, &rebuild).await? {
            Outcome::Done => {
                store::finish(conn, version, "done").await?;
                metrics::gauge!("faultline_rebuild_failures_remaining").set(0.0);
                tracing::info!(version, "catalog rebuild done");
                finished.push(version);
            }
            Outcome::Superseded => {
                store::finish(conn, version, "superseded").await?;
                tracing::info!(version, "catalog rebuild superseded by a newer edit");
            }
        }
    }
    Ok(finished)
}

enum Outcome {
    Done,
    Superseded,
}

/// Runs one rebuild from its stored progress to the end, a chunk per transaction.
async fn run(
    conn: &mut PgConnection,
    cache: &CatalogCache,
    worker: RebuildWorker,
    rebuild: &RebuildRow,
) -> Result<Outcome, sqlx::Error> {
    let version = rebuild.version;
    let mut cursor = (rebuild.cursor_cluster.clone(), rebuild.cursor_key.clone());
    let clusters = store::stale_clusters(conn, version, cursor.0.as_deref()).await?;
    let total = rebuild.total_failures.unwrap_or(0);
    let mut done = rebuild.done_failures;
    for cluster in clusters {
        loop {
            let after = if cursor.0.as_deref() == Some(cluster.as_str()) {
                cursor.1.clone()
            } else {
                None
            };
            match chunk(conn, cache, worker, version, &cluster, after.as_deref()).await? {
                Chunk::Superseded => return Ok(Outcome::Superseded),
                Chunk::ClusterDone => break,
                Chunk::Progress { last_key, failures } => {
                    done += failures;
                    metrics::gauge!("faultline_rebuild_failures_remaining").set((total - done).max(0) as f64);
                    cursor = (Some(cluster.clone()), Some(last_key));
                }
            }
        }
    }
    Ok(Outcome::Done)
}

enum Chunk {
    Superseded,
    ClusterDone,
    Progress { last_key: String, failures: i64 },
}

/// One chunk: the next keys of `cluster` after `after` with failures older than `version`,
/// re-folded under the catalog of `version` in one transaction with the progress.
async fn chunk(
    conn: &mut PgConnection,
    cache: &CatalogCache,
    worker: RebuildWorker,
    version: i64,
    cluster: &str,
    after: Option<&str>,
) -> Result<Chunk, sqlx::Error> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    // The catalog lock, shared, as an ingest batch takes it: an edit waits for this chunk.
    let current = catalog::lock_shared(&mut tx, cache).await?;
    if current.version != version {
        return Ok(Chunk::Superseded);
    }
    let keys = store::stale_keys(&mut tx, cluster, after, version, worker.chunk_keys as i64).await?;
    let Some(last) = keys.last() else {
        return Ok(Chunk::ClusterDone);
    };
    let last_key = last.key.clone();
    let stored: Vec<String> = keys.iter().map(|k| k.key.clone()).collect();
    let before: HashSet<_> = store::classifications(&mut tx, cluster, &stored)
        .await?
        .into_iter()
        .collect();
    let mut touched = Touched::new();
    for k in &keys {
        if let Some(key) = CorrelationKey::parse(&k.key) {
            refold::touch(&mut touched, cluster, key, k.first_at, k.last_at);
        }
    }
    refold::refold(&mut tx, &current, worker.window, &touched).await?;
    let after_rows = store::classifications(&mut tx, cluster, &stored).await?;
    let changed = after_rows.iter().filter(|c| !before.contains(*c)).count() as i64;
    let failures: i64 = keys.iter().map(|k| k.failures).sum();
    store::advance(&mut tx, version, failures, changed, cluster, &last_key).await?;
    tx.commit().await?;
    metrics::counter!("faultline_rebuild_chunks_total").increment(1);
    metrics::counter!("faultline_rebuild_failures_total").increment(failures as u64);
    metrics::counter!("faultline_rebuild_failures_changed_total").increment(changed as u64);
    Ok(Chunk::Progress { last_key, failures })
}
