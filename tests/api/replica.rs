//! Read replicas: a private primary and a streaming standby of it (pg_basebackup -R), the app on
//! both. Analytics must answer from the standby (proved by pausing its replay: they keep the old
//! answer while the primary has moved on), writes and token checks from the primary.

use std::time::Duration;

use faultline::app::configuration::{AppConfig, Limits};
use faultline::app::edge::EdgeSettings;
use faultline::app::startup::Application;
use faultline::db::database::{ensure_database, with_database};
use faultline::db::embedded_pg::PrivateCluster;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::helpers::{ADMIN_TOKEN, event, status_json, uuid_n};

/// Test data is disposable: no fsync on either cluster. Commits stay synchronous, so a commit's WAL
/// is written (and streamed) when the API answers, as in production.
const FAST: &str = "-c fsync=off -c full_page_writes=off";
const WINDOW: &str = "from=2026-11-01T00:00:00Z&to=2026-11-08T00:00:00Z";

#[tokio::test]
async fn analytics_answer_from_a_streaming_replica() {
    let root = std::env::temp_dir().join(format!("faultline-replica-{}", uuid::Uuid::new_v4().simple()));
    let primary = PrivateCluster::start_with(&root.join("primary"), FAST)
        .await
        .expect("start the primary");
    let standby = match primary.start_standby(&root.join("standby"), FAST).await {
        Ok(standby) => standby,
        Err(e) => {
            let _ = primary.stop().await;
            panic!("start the standby: {e:#}");
        }
    };
    // On its own task, so a failed assertion still lets both clusters be stopped below.
    let outcome = tokio::spawn(scenario(primary.url().to_string(), standby.url().to_string())).await;
    let stopped = (standby.stop().await, primary.stop().await);
    let _ = std::fs::remove_dir_all(&root);
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
    stopped.0.expect("stop the standby");
    stopped.1.expect("stop the primary");
}

async fn scenario(primary_url: String, standby_url: String) {
    ensure_database(&primary_url, "faultline").await.unwrap();
    let edge = EdgeSettings::default();
    let db = faultline::db::pool::connect(&with_database(&primary_url, "faultline"), &edge.pool)
        .await
        .unwrap();
    // The database reaches the standby by replication.
    caught_up(&db, &standby_url).await;
    let replica = faultline::db::pool::connect(&with_database(&standby_url, "faultline"), &edge.pool)
        .await
        .unwrap();
    let in_recovery = |pool: PgPool| async move {
        sqlx::query_scalar::<_, bool>("SELECT pg_is_in_recovery()")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert!(!in_recovery(db.clone()).await);
    assert!(in_recovery(replica.clone()).await, "the read pool is a standby");

    let config = AppConfig {
        admin_token: ADMIN_TOKEN.to_string(),
        limits: Limits::default(),
        correlation_window: Duration::from_secs(600),
        edge,
        retention: Default::default(),
        alerts: Default::default(),
    };
    let app = Application::build_with_replica(
        config,
        db.clone(),
        Some(replica.clone()),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .expect("build the app");
    let api = Api {
        base: format!("http://{}", app.local_addr().unwrap()),
        client: reqwest::Client::new(),
    };
    tokio::spawn(app.run_until(std::future::pending()));

    let (status, ready) = api.send(reqwest::Method::GET, "/readyz", ADMIN_TOKEN, None).await;
    assert_eq!(
        (status, ready),
        (200, json!({"status": "ready", "primary": "ok", "read_replica": "ok"}))
    );

    let metrics = api
        .client
        .get(format!("{}/metrics", api.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == "faultline_db_read_pool_max_connections 16"),
        "the read pool has its gauges: {metrics}"
    );

    // 16 H100 nodes (128 GPUs) in group su1, in service all week; three XID 79 failures.
    let nodes: Vec<Value> = (0..16)
        .map(|i| {
            json!({"hostname": format!("n{i:02}"), "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3",
                   "gpu_count": 8, "group": "su1", "in_service_since": "2026-10-01T00:00:00Z"})
        })
        .collect();
    let (status, body) = api
        .send(
            reqwest::Method::PUT,
            "/v1/nodes",
            ADMIN_TOKEN,
            Some(json!({"nodes": nodes})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let first = json!({"events": [
        event(&uuid_n(1), json!({"node": "n01", "occurred_at": "2026-11-02T00:00:00Z"})),
        event(&uuid_n(2), json!({"node": "n01", "occurred_at": "2026-11-03T00:00:00Z"})),
        event(&uuid_n(3), json!({"node": "n02", "occurred_at": "2026-11-04T00:00:00Z"})),
    ]});
    let (status, body) = api
        .send(reqwest::Method::POST, "/v1/events", ADMIN_TOKEN, Some(first))
        .await;
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(3)), "{body}");
    caught_up(&db, &standby_url).await;
    // 128 GPUs x 7 d = 896 GPU-days; 3 failures -> 3.348214 per 1,000; MTBF 168 h / 3 = 56 h.
    assert_eq!(api.headline(ADMIN_TOKEN).await, (3, 3.348214, 56.0));

    // Replay paused: the standby stays where it is while the primary moves on.
    sqlx::query("SELECT pg_wal_replay_pause()")
        .execute(&replica)
        .await
        .unwrap();
    for _ in 0..100 {
        let state: String = sqlx::query_scalar("SELECT pg_get_wal_replay_pause_state()")
            .fetch_one(&replica)
            .await
            .unwrap();
        if state == "paused" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = json!({"events": [event(&uuid_n(4), json!({"node": "n03", "occurred_at": "2026-11-05T00:00:00Z"}))]});
    let (status, body) = api
        .send(reqwest::Method::POST, "/v1/events", ADMIN_TOKEN, Some(second))
        .await;
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(1)), "{body}");
    let on_primary: i64 = sqlx::query_scalar("SELECT count(*) FROM failures")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(on_primary, 4);
    // A token created now is not on the standby yet, and works at once: tokens are checked on the
    // primary. The analytics it reads still come from the (paused) standby.
    let (status, created) = api
        .send(
            reqwest::Method::POST,
            "/v1/tokens",
            ADMIN_TOKEN,
            Some(json!({"name": "dashboard", "role": "reader"})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let reader = created["token"].as_str().unwrap().to_string();
    assert_eq!(api.headline(&reader).await, (3, 3.348214, 56.0));
    let (status, list) = api.send(reqwest::Method::GET, "/v1/failures", &reader, None).await;
    assert_eq!(
        (status, list["failures"].as_array().map(Vec::len)),
        (200, Some(3)),
        "{list}"
    );

    sqlx::query("SELECT pg_wal_replay_resume()")
        .execute(&replica)
        .await
        .unwrap();
    caught_up(&db, &standby_url).await;
    // 4 failures -> 4.464286 per 1,000 GPU-days; MTBF 168 h / 4 = 42 h.
    assert_eq!(api.headline(&reader).await, (4, 4.464286, 42.0));
}

/// Waits (up to 30 s) until the standby has replayed everything the primary has written so far,
/// and prints how long that took (the replication lag after a write, measured).
async fn caught_up(primary: &PgPool, standby_url: &str) {
    let started = std::time::Instant::now();
    use sqlx::Connection;
    // The insert position: it includes every record inserted so far, whether written yet or not.
    let target: String = sqlx::query_scalar("SELECT pg_current_wal_insert_lsn()::text")
        .fetch_one(primary)
        .await
        .unwrap();
    let mut standby = sqlx::PgConnection::connect(&with_database(standby_url, "postgres"))
        .await
        .unwrap();
    for _ in 0..6000 {
        let replayed: bool = sqlx::query_scalar("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn")
            .bind(&target)
            .fetch_one(&mut standby)
            .await
            .unwrap();
        if replayed {
            eprintln!("standby replayed up to {target} after {:?}", started.elapsed());
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the standby did not replay up to {target} within 30 s");
}

struct Api {
    base: String,
    client: reqwest::Client,
}

impl Api {
    async fn send(&self, method: reqwest::Method, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        status_json(req.send().await.unwrap()).await
    }

    /// (hopper failures, hopper failures per 1,000 GPU-days, su1 MTBF hours) over the week.
    async fn headline(&self, token: &str) -> (u64, f64, f64) {
        let (status, mix) = self
            .send(
                reqwest::Method::GET,
                &format!("/v1/analytics/failure-mix?by=gpu_generation&{WINDOW}"),
                token,
                None,
            )
            .await;
        assert_eq!(status, 200, "{mix}");
        let hopper = mix["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == "hopper")
            .unwrap()
            .clone();
        let (status, mtbf) = self
            .send(
                reqwest::Method::GET,
                &format!("/v1/analytics/mtbf?group_size=128&{WINDOW}"),
                token,
                None,
            )
            .await;
        assert_eq!(status, 200, "{mtbf}");
        let su1 = mtbf["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group"] == "c1/su1")
            .unwrap()
            .clone();
        (
            hopper["failures"].as_u64().unwrap(),
            hopper["failures_per_1000_gpu_days"].as_f64().unwrap(),
            su1["mtbf_hours"].as_f64().unwrap(),
        )
    }
}
