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
    db_name: String,
    server_url: String,
}

/// The PostgreSQL server the tests use: `DATABASE_URL`, else one on localhost:5432, else a private
/// cluster in the temp directory that later runs reuse (fsync off: test data is disposable).
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
    let _lock = lock_file(&dir.with_extension("lock")).await?;
    let cluster =
        PrivateCluster::start_with(&dir, "-c fsync=off -c synchronous_commit=off -c full_page_writes=off").await?;
    Ok(cluster.url().to_string())
}

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
    let server_url = server_url.to_string();
    let db_name = format!("faultline_test_{}", uuid::Uuid::new_v4().simple());
    ensure_database(&server_url, &db_name)
        .await
        .expect("create the test database");
    let db = faultline::db::pool::connect(&with_database(&server_url, &db_name), &edge.pool)
        .await
        .expect("connect");
    let config = AppConfig {
        admin_token: ADMIN_TOKEN.to_string(),
        limits,
        correlation_window: Duration::from_secs(600),
        edge,
        retention: Default::default(),
    };
    let app = startup::Application::build(config, db.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("build the app");
    let address = format!("http://{}", app.local_addr().unwrap());
    tokio::spawn(app.run_until(std::future::pending()));
    TestApp {
        address,
        client: reqwest::Client::new(),
        db,
        db_name,
        server_url,
    }
}

impl TestApp {
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

    pub async fn post_events(&self, token: &str, body: &Value) -> (u16, Value) {
        let res = self
            .client
            .post(self.url("/v1/events"))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap();
        status_json(res).await
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

impl Drop for TestApp {
    /// Drops the test database so runs don't pile them up.
    fn drop(&mut self) {
        let server_url = self.server_url.clone();
        let db_name = self.db_name.clone();
        // The pool's sockets belong to the test's runtime, which is blocked here: don't await them.
        // WITH (FORCE) terminates those connections server-side.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                use sqlx::Connection;
                if let Ok(mut conn) = sqlx::PgConnection::connect(&with_database(&server_url, "postgres")).await {
                    let sql = format!("DROP DATABASE IF EXISTS \"{db_name}\" WITH (FORCE)");
                    let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
                }
            });
        })
        .join()
        .ok();
    }
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
