//! A real Citus cluster for the tests: a coordinator and two workers, private PostgreSQL 15 clusters
//! on free ports with `shared_preload_libraries = 'citus'`, shared by the test processes of a run
//! (started by the first, reused by the others, stopped by a watchdog once no test has used them for
//! 10 s). Each test gets its own database on all three, with the extension and the workers added;
//! the app distributes its tables when it migrates.

use std::path::PathBuf;

use faultline::db::database::{ensure_database, with_database};
use faultline::db::embedded_pg::{PrivateCluster, find_pg_bin, lock_file};
use sqlx::Connection;

use crate::helpers::{TestDatabase, spawn_watchdog, use_clusters};

/// Shards per distributed table in the test databases: few, so that creating a database's tables
/// (and each month's partition) stays quick, and more than the two workers, so that every query
/// crosses shards and workers.
const TEST_SHARD_COUNT: u32 = 4;

pub struct CitusCluster {
    pub coordinator: String,
    pub workers: Vec<String>,
}

/// Where Citus' library must be for `shared_preload_libraries = 'citus'` to work.
fn citus_library() -> Option<PathBuf> {
    let postgres = std::fs::canonicalize(find_pg_bin("postgres")?).ok()?;
    Some(postgres.parent()?.parent()?.join("lib").join("citus.so"))
}

/// The run's Citus cluster, started if it is not running.
pub async fn citus_cluster() -> CitusCluster {
    let library = citus_library();
    assert!(
        library.as_ref().is_some_and(|l| l.exists()),
        "Citus is not installed into this PostgreSQL ({}): run scripts/install-citus (as root; \
         scripts/test does) to build and install it",
        library.map_or("no PostgreSQL server binaries found".into(), |l| l
            .display()
            .to_string())
    );
    let base = std::env::temp_dir().join("faultline-test-citus");
    std::fs::create_dir_all(&base).unwrap();
    let users = base.join("users");
    static CITUS_USER: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();
    use_clusters(&users, &CITUS_USER).await.unwrap();
    let _lock = lock_file(&base.join("start.lock")).await.unwrap();
    let options = format!(
        "-c shared_preload_libraries=citus -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
         -c max_connections=300 -c max_worker_processes=128 -c citus.shard_count={TEST_SHARD_COUNT}"
    );
    let mut urls = Vec::new();
    for node in ["coordinator", "worker1", "worker2"] {
        let cluster = PrivateCluster::start_with(&base.join(node), &options)
            .await
            .unwrap_or_else(|e| panic!("starting the Citus {node}: {e:#}"));
        spawn_watchdog(&users, cluster.pgdata());
        urls.push(cluster.url().to_string());
    }
    let coordinator = urls.remove(0);
    CitusCluster {
        coordinator,
        workers: urls,
    }
}

/// A fresh database on the coordinator and both workers, with the `citus` extension in each and
/// the workers added to the coordinator's metadata; dropped on all three with the guard.
pub async fn distributed_database() -> TestDatabase {
    let db = database_on_every_node().await;
    // Distributing tables updates catalogs that the cluster's databases share: two test databases
    // distributed at once fail with "tuple concurrently updated". One at a time, here (the app's
    // own migrate then finds everything distributed).
    let _lock = lock_file(
        &std::env::temp_dir()
            .join("faultline-test-citus")
            .join("distribute.lock"),
    )
    .await
    .unwrap();
    add_citus(&db).await;
    let pool = sqlx::PgPool::connect(&db.url()).await.unwrap();
    faultline::storage::migrate(&pool)
        .await
        .expect("migrate and distribute");
    pool.close().await;
    db
}

/// A fresh database on the coordinator and both workers, with the `citus` extension on the
/// workers only: to the app, until [`add_citus`], a plain Postgres database.
pub async fn database_on_every_node() -> TestDatabase {
    let cluster = citus_cluster().await;
    let mut db = TestDatabase::create(&cluster.coordinator).await;
    db.worker_urls = cluster.workers.clone();
    for worker in &cluster.workers {
        ensure_database(worker, &db.name)
            .await
            .expect("create the database on a worker");
        let mut conn = sqlx::PgConnection::connect(&with_database(worker, &db.name))
            .await
            .unwrap();
        sqlx::query("CREATE EXTENSION IF NOT EXISTS citus")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    db
}

/// Makes the coordinator's database a Citus coordinator: the extension, its own address, and the
/// two workers.
pub async fn add_citus(db: &TestDatabase) {
    let mut coordinator = sqlx::PgConnection::connect(&db.url()).await.unwrap();
    sqlx::query("CREATE EXTENSION IF NOT EXISTS citus")
        .execute(&mut coordinator)
        .await
        .unwrap();
    let port = |url: &str| {
        url.rsplit(':')
            .next()
            .unwrap()
            .trim_end_matches('/')
            .parse::<i32>()
            .unwrap()
    };
    let workers: Vec<(String, i32)> = db
        .worker_urls
        .iter()
        .map(|w| ("127.0.0.1".to_string(), port(w)))
        .collect();
    faultline::storage::distribution::add_workers(&mut coordinator, ("127.0.0.1", port(&db.server_url)), &workers)
        .await
        .unwrap();
}
