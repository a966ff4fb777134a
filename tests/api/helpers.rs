//! `spawn_app()`: the real app on port 0, with its own freshly migrated database.

use std::time::Duration;

use faultline::app::configuration::{AppConfig, Limits};
use faultline::app::edge::EdgeSettings;
use faultline::app::startup;
use faultline::db::database::{ensure_database, with_database};
use serde_json::Value;
use sqlx::PgPool;

pub const ADMIN_TOKEN: &str = "test-admin-token";

pub struct TestApp {
    pub address: String,
    pub client: reqwest::Client,
    pub db: PgPool,
    /// The app's classification catalog cache, for loading data through the ingest use cases.
    pub catalog: faultline::ingest::catalog::CatalogCache,
    /// Dropped with the app (last, after the pool), also when the test panics.
    _database: TestDatabase,
}

/// A fresh database on the test server, dropped when this is dropped: at the end of the test, and
/// also when it fails (panics unwind through it). Named `faultline_test_<unix seconds>_<uuid>`, so
/// the first test of a process also drops those older than [`STALE_AFTER_SECS`] that a killed test
/// run (timeout, SIGKILL: no unwinding) left behind.
pub struct TestDatabase {
    pub name: String,
    pub server_url: String,
    /// Other servers holding a database of the same name (a Citus cluster's workers), dropped
    /// with it.
    pub worker_urls: Vec<String>,
}

/// No test runs this long: an older test database is a leftover.
const STALE_AFTER_SECS: u64 = 6 * 3600;

impl TestDatabase {
    pub async fn create(server_url: &str) -> TestDatabase {
        static SWEPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        if !SWEPT.swap(true, std::sync::atomic::Ordering::SeqCst) {
            drop_stale(server_url, now).await;
        }
        let name = format!("faultline_test_{now}_{}", uuid::Uuid::new_v4().simple());
        // The guard exists before the database does: a failure from here on still drops it.
        let db = TestDatabase {
            name,
            server_url: server_url.to_string(),
            worker_urls: Vec::new(),
        };
        ensure_database(server_url, &db.name)
            .await
            .expect("create the test database");
        db
    }

    pub fn url(&self) -> String {
        with_database(&self.server_url, &self.name)
    }
}

pub async fn drop_stale(server_url: &str, now: u64) {
    use sqlx::Connection;
    let Ok(mut conn) = sqlx::PgConnection::connect(&with_database(server_url, "postgres")).await else {
        return;
    };
    let names: Vec<String> =
        sqlx::query_scalar("SELECT datname::text FROM pg_database WHERE datname LIKE 'faultline\\_test\\_%'")
            .fetch_all(&mut conn)
            .await
            .unwrap_or_default();
    for name in names {
        let created = name
            .strip_prefix("faultline_test_")
            .and_then(|rest| rest.split_once('_'))
            .and_then(|(secs, _)| secs.parse::<u64>().ok());
        if created.is_some_and(|t| t + STALE_AFTER_SECS < now) {
            let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
            let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let servers: Vec<String> = std::iter::once(self.server_url.clone())
            .chain(self.worker_urls.iter().cloned())
            .collect();
        let db_name = self.name.clone();
        // The pool's sockets belong to the test's runtime, which is blocked here (or unwinding):
        // don't await them, use a runtime of our own. WITH (FORCE) ends those connections.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                use sqlx::Connection;
                for server_url in servers {
                    if let Ok(mut conn) = sqlx::PgConnection::connect(&with_database(&server_url, "postgres")).await {
                        let sql = format!("DROP DATABASE IF EXISTS \"{db_name}\" WITH (FORCE)");
                        let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
                    }
                }
            });
        })
        .join()
        .ok();
    }
}

/// The PostgreSQL server the tests use: `DATABASE_URL`, else one on localhost:5432, else a private
/// cluster in the temp directory (fsync off: test data is disposable) that stops by itself once no
/// test process has used it for a few seconds, i.e. when the run ends (see [`PG_WATCHDOG`]).
pub async fn test_server_url() -> anyhow::Result<String> {
    use faultline::db::embedded_pg::{PrivateCluster, local_server, lock_file};
    if let Ok(url) = std::env::var("DATABASE_URL")
        && !url.is_empty()
    {
        return Ok(url);
    }
    if let Some(url) = local_server().await {
        return Ok(url);
    }
    let dir = std::env::temp_dir().join("faultline-test-pg");
    // A shared lock for the life of this process marks the cluster in use; the kernel releases it
    // when the process ends, however it ends.
    let users = dir.with_extension("users");
    use_clusters(&users, &CLUSTER_USER).await?;
    let _lock = lock_file(&dir.with_extension("lock")).await?;
    let cluster =
        PrivateCluster::start_with(&dir, "-c fsync=off -c synchronous_commit=off -c full_page_writes=off").await?;
    spawn_watchdog(&users, cluster.pgdata());
    Ok(cluster.url().to_string())
}

/// This process's shared lock on the private cluster's users file.
static CLUSTER_USER: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();

/// Marks private clusters in use by this process for its whole life: a shared lock on `users`,
/// kept in `slot`, which the kernel releases when the process ends, however it ends.
pub async fn use_clusters(
    users: &std::path::Path,
    slot: &'static std::sync::OnceLock<std::fs::File>,
) -> anyhow::Result<()> {
    if slot.get().is_none() {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(users)?;
        let file = tokio::task::spawn_blocking(move || file.lock_shared().map(|()| file)).await??;
        let _ = slot.set(file);
    }
    Ok(())
}

/// Starts the watchdog ([`PG_WATCHDOG`]) that stops the private cluster in `pgdata` once nobody
/// holds `users`. Detached (own process group, no stdio): it outlives this test process; a second
/// one for the same cluster exits.
pub fn spawn_watchdog(users: &std::path::Path, pgdata: &std::path::Path) {
    use faultline::db::embedded_pg::find_pg_bin;
    use std::os::unix::process::CommandExt;
    if let Some(pg_ctl) = find_pg_bin("pg_ctl") {
        let _ = std::process::Command::new("sh")
            .arg("-c")
            .arg(PG_WATCHDOG)
            .arg("faultline-test-pg-watchdog")
            .arg(users)
            .arg(pgdata)
            .arg(std::fs::canonicalize(&pg_ctl).unwrap_or(pg_ctl))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn();
    }
}

/// Stops the private test cluster ($2, with pg_ctl $3) once nobody holds a shared lock on the users
/// file ($1) for 10 s; it stops under an exclusive lock, so a test process starting meanwhile waits
/// and then starts the cluster again (with a watchdog of its own). One watchdog per cluster.
const PG_WATCHDOG: &str = r#"
users="$1"; pgdata="$2"; pg_ctl="$3"
exec 9>"$users.watchdog"
flock -n 9 || exit 0
idle=0
while sleep 2; do
  [ -f "$pgdata/postmaster.pid" ] || exit 0
  if flock -n -x "$users" true; then idle=$((idle + 2)); else idle=0; fi
  if [ "$idle" -ge 10 ]; then
    if [ "$(id -u)" = 0 ]; then
      flock -n -x "$users" runuser -u "$(stat -c %U "$pgdata")" -- "$pg_ctl" -D "$pgdata" stop -m fast && exit 0
    else
      flock -n -x "$users" "$pg_ctl" -D "$pgdata" stop -m fast && exit 0
    fi
    idle=0
  fi
done
"#;

pub async fn spawn_app() -> TestApp {
    spawn_app_with(Limits::default()).await
}

pub async fn spawn_app_with(limits: Limits) -> TestApp {
    let server_url = test_server_url().await.expect("a PostgreSQL server for tests");
    spawn_app_on(&server_url, limits, EdgeSettings::default()).await
}

/// The app on the Postgres server at `server_url` (no database path), with `edge` settings (pool
/// size and timeout, body budget).
pub async fn spawn_app_on(server_url: &str, limits: Limits, edge: EdgeSettings) -> TestApp {
    let database = TestDatabase::create(server_url).await;
    spawn_app_in(database, limits, edge).await
}

/// Where a test's database lives: one Postgres, or a Citus cluster (a coordinator and two workers,
/// see [`crate::citus`]), where the app distributes its tables when it migrates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Citus,
}

/// The app with default limits on a fresh database of `backend`.
pub async fn spawn_app_on_backend(backend: Backend) -> TestApp {
    spawn_app_on_backend_with(backend, Limits::default(), EdgeSettings::default()).await
}

pub async fn spawn_app_on_backend_with(backend: Backend, limits: Limits, edge: EdgeSettings) -> TestApp {
    let database = match backend {
        Backend::Postgres => {
            let server_url = test_server_url().await.expect("a PostgreSQL server for tests");
            TestDatabase::create(&server_url).await
        }
        Backend::Citus => crate::citus::distributed_database().await,
    };
    spawn_app_in(database, limits, edge).await
}

/// The app on an existing (empty) test database, which it migrates.
pub async fn spawn_app_in(database: TestDatabase, limits: Limits, edge: EdgeSettings) -> TestApp {
    let config = AppConfig {
        admin_token: ADMIN_TOKEN.to_string(),
        limits,
        correlation_window: Duration::from_secs(600),
        edge,
        retention: Default::default(),
        alerts: Default::default(),
    };
    spawn_app_configured(database, config).await
}

/// The app with `config` on an existing (empty) test database, which it migrates.
pub async fn spawn_app_configured(database: TestDatabase, config: AppConfig) -> TestApp {
    let db = faultline::db::pool::connect(&database.url(), &config.edge.pool)
        .await
        .expect("connect");
    let app = startup::Application::build(config, db.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("build the app");
    let address = format!("http://{}", app.local_addr().unwrap());
    let catalog = app.context().catalog.clone();
    tokio::spawn(app.run_until(std::future::pending()));
    TestApp {
        address,
        client: reqwest::Client::new(),
        db,
        catalog,
        _database: database,
    }
}

impl TestApp {
    pub fn test_database(&self) -> &TestDatabase {
        &self._database
    }

    /// The URL of the app's database (for a second instance or a direct connection).
    pub fn database_url(&self) -> String {
        self._database.url()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    /// Creates a token of `role` (optionally scoped to `cluster`) through the API.
    pub async fn token(&self, role: &str, cluster: Option<&str>) -> String {
        let res = self
            .client
            .post(self.url("/v1/tokens"))
            .bearer_auth(ADMIN_TOKEN)
            .json(&serde_json::json!({"name": format!("{role}-token"), "role": role, "cluster": cluster}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
        res.json::<Value>().await.unwrap()["token"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// POST a JSON body to `path`: the status and the JSON answer.
    pub async fn post_json(&self, token: &str, path: &str, body: &Value) -> (u16, Value) {
        let res = self
            .client
            .post(self.url(path))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap();
        status_json(res).await
    }

    pub async fn post_events(&self, token: &str, body: &Value) -> (u16, Value) {
        self.post_json(token, "/v1/events", body).await
    }

    pub async fn put_nodes(&self, token: &str, body: &Value) -> (u16, Value) {
        let res = self
            .client
            .put(self.url("/v1/nodes"))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap();
        status_json(res).await
    }

    pub async fn get(&self, token: &str, path: &str) -> (u16, Value) {
        let res = self.client.get(self.url(path)).bearer_auth(token).send().await.unwrap();
        status_json(res).await
    }

    pub async fn count(&self, sql: &'static str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&self.db).await.unwrap()
    }
}

/// The answer to a catalog edit once its rebuild is done: a 202 waits for the rebuild (at
/// `base`) and carries its final status in `rebuild`; any other answer as it came.
pub async fn catalog_edit(base: &str, res: reqwest::Response) -> (u16, Value) {
    let (status, mut change) = status_json(res).await;
    if status == 202 {
        let version = change["catalog_version"]
            .as_i64()
            .expect("a catalog edit answers its version");
        change["rebuild"] = rebuilt(base, version).await;
    }
    (status, change)
}

/// Waits until the catalog rebuild of `version` (at `base`) is no longer running; its status.
pub async fn rebuilt(base: &str, version: i64) -> Value {
    let client = reqwest::Client::new();
    for _ in 0..1200 {
        let res = client
            .get(format!("{base}/v1/catalog/rebuilds/{version}"))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        let (status, body) = status_json(res).await;
        assert_eq!(status, 200, "{body}");
        if body["state"] != "running" {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the rebuild of catalog version {version} did not end within a minute");
}

/// Status and JSON body; panics when an error answer is not JSON (the contract says it must be).
pub async fn status_json(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let ct = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = res.text().await.unwrap();
    if text.is_empty() {
        return (status, Value::Null);
    }
    assert!(
        ct.starts_with("application/json"),
        "status {status}: content-type {ct:?}, body {text}"
    );
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")),
    )
}

/// A valid event with the given id and overrides.
pub fn event(id: &str, overrides: Value) -> Value {
    let mut e = serde_json::json!({
        "id": id,
        "occurred_at": "2026-11-02T10:00:00Z",
        "cluster": "c1",
        "node": "n001",
        "kind": "xid",
        "code": 79,
        "message": "GPU has fallen off the bus"
    });
    if let (Some(obj), Some(o)) = (e.as_object_mut(), overrides.as_object()) {
        for (k, v) in o {
            obj.insert(k.clone(), v.clone());
        }
    }
    e
}

pub fn uuid_n(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

/// Polls all futures concurrently on the test's task (like futures::join_all, without the crate).
pub async fn join_all<F: std::future::Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futs.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut out: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, slot) in pinned.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        out[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(Option::unwrap).collect()
}
