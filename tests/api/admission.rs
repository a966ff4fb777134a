//! Admission that matches the pool: overload and a database outage answer
//! 503 + Retry-After quickly, never 500 and never a long hang; the service recovers by itself.

use std::time::{Duration, Instant};

use faultline::app::configuration::Limits;
use faultline::app::edge::{EdgeSettings, PoolSettings};
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, event, join_all, spawn_app_on};

fn small_pool(connections: u32) -> EdgeSettings {
    EdgeSettings {
        pool: PoolSettings {
            db_max_connections: connections,
            db_acquire_timeout_ms: 1000,
        },
        ..EdgeSettings::default()
    }
}

fn batch(client: u32, events: u32) -> Value {
    let items: Vec<Value> = (0..events)
        .map(|i| {
            event(
                &format!("00000000-0000-4000-8000-{:06}{:06}", client, i),
                json!({"node": format!("n{:04}", i % 50), "occurred_at": format!("2026-11-02T10:{:02}:{:02}Z", (client % 60), i % 60)}),
            )
        })
        .collect();
    json!({ "events": items })
}

/// One answer: status, Retry-After, error code, and how long it took.
struct Answer {
    status: u16,
    retry_after: Option<String>,
    error: Option<String>,
    accepted: i64,
    elapsed: Duration,
}

async fn send(app: &TestApp, req: reqwest::RequestBuilder) -> Answer {
    let started = Instant::now();
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let retry_after = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let text = res.text().await.unwrap();
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let _ = app;
    Answer {
        status,
        retry_after,
        error: body["error"].as_str().map(str::to_string),
        accepted: body["accepted"].as_i64().unwrap_or(0),
        elapsed: started.elapsed(),
    }
}

fn assert_ok_or_503(a: &Answer, what: &str) {
    match a.status {
        200..=299 => {}
        503 => {
            assert!(a.retry_after.is_some(), "{what}: 503 without Retry-After");
            assert_eq!(
                a.error.as_deref(),
                Some("unavailable"),
                "{what}: 503 without a JSON error body"
            );
        }
        other => panic!("{what}: status {other} ({:?})", a.error),
    }
}

fn summary(label: &str, answers: &[Answer]) -> (usize, usize, Duration) {
    let ok = answers.iter().filter(|a| a.status < 300).count();
    let shed = answers.iter().filter(|a| a.status == 503).count();
    let max = answers.iter().map(|a| a.elapsed).max().unwrap_or_default();
    let mut sorted: Vec<Duration> = answers.iter().map(|a| a.elapsed).collect();
    sorted.sort();
    let p50 = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    eprintln!("{label}: {ok} ok, {shed} x 503, p50 {p50:?}, max {max:?}");
    (ok, shed, max)
}

/// 64 ingest clients and 32 readers against a pool of 2 connections: every answer is a 2xx or a
/// 503 with Retry-After and a JSON body, none waits long, and what was acknowledged is stored.
#[tokio::test]
async fn overload_answers_only_2xx_or_503_with_retry_after() {
    let server_url = crate::helpers::test_server_url().await.unwrap();
    let app = spawn_app_on(&server_url, Limits::default(), small_pool(2)).await;
    let agent = app.token("agent", None).await;
    let reader = app.token("reader", None).await;
    let writes = (0..64u32).map(|c| {
        let req = app
            .client
            .post(app.url("/v1/events"))
            .bearer_auth(&agent)
            .json(&batch(c, 300));
        send(&app, req)
    });
    let reads = (0..32u32).map(|_| {
        let req = app.client.get(app.url("/v1/failures?limit=50")).bearer_auth(&reader);
        send(&app, req)
    });
    let (writes, reads) = tokio::join!(join_all(writes.collect()), join_all(reads.collect()));
    for a in writes.iter().chain(reads.iter()) {
        assert_ok_or_503(a, "under overload");
    }
    let (ok, shed, max) = summary("ingest", &writes);
    summary("reads", &reads);
    assert!(ok >= 1, "no ingest request was admitted");
    assert!(shed >= 1, "64 concurrent batches on a pool of 2 shed none");
    // Admitted work finishes, shed work is told at once; nothing waits the old 10-21 s.
    assert!(max < Duration::from_secs(8), "slowest ingest answer took {max:?}");
    let accepted: i64 = writes.iter().map(|a| a.accepted).sum();
    let stored = app
        .count("SELECT COALESCE(SUM(repeat_count), 0)::bigint FROM events")
        .await;
    assert_eq!(stored, accepted, "acknowledged events and stored events differ");
}

/// The database stops (a private cluster this test runs) and comes back: meanwhile every answer
/// is a 503 with Retry-After within ~2 s (`/readyz` within 1 s), and afterwards the same service
/// instance works again, without a restart.
#[tokio::test]
async fn database_outage_is_503_with_retry_after_and_the_service_recovers() {
    let dir = std::env::temp_dir().join(format!("faultline-outage-{}", uuid::Uuid::new_v4().simple()));
    let mut cluster = faultline::db::embedded_pg::PrivateCluster::start(&dir).await.unwrap();
    let app = spawn_app_on(cluster.url(), Limits::default(), small_pool(4)).await;
    let agent = app.token("agent", None).await;
    let reader = app.token("reader", None).await;
    let post = |app: &TestApp, token: &str, n: u32| {
        app.client
            .post(app.url("/v1/events"))
            .bearer_auth(token)
            .json(&batch(n, 5))
    };
    let a = send(&app, post(&app, &agent, 1)).await;
    assert_eq!(a.status, 200);
    let a = send(&app, app.client.get(app.url("/readyz"))).await;
    assert_eq!(a.status, 200);

    cluster.stop().await.unwrap();
    let mut down = Vec::new();
    for round in 0..3u32 {
        down.push((
            "POST /v1/events (agent)",
            send(&app, post(&app, &agent, 100 + round)).await,
        ));
        down.push((
            "POST /v1/events (admin)",
            send(&app, post(&app, ADMIN_TOKEN, 200 + round)).await,
        ));
        down.push((
            "GET /v1/failures",
            send(&app, app.client.get(app.url("/v1/failures")).bearer_auth(ADMIN_TOKEN)).await,
        ));
        down.push((
            "GET /v1/nodes",
            send(&app, app.client.get(app.url("/v1/nodes")).bearer_auth(&reader)).await,
        ));
        let ready = send(&app, app.client.get(app.url("/readyz"))).await;
        assert!(
            ready.elapsed < Duration::from_secs(1),
            "/readyz took {:?}",
            ready.elapsed
        );
        down.push(("GET /readyz", ready));
    }
    for (what, a) in &down {
        assert_eq!(a.status, 503, "{what} while the database is down: {:?}", a.error);
        assert_ok_or_503(a, what);
        assert!(a.elapsed < Duration::from_millis(2500), "{what} took {:?}", a.elapsed);
    }
    let answers: Vec<Answer> = down.into_iter().map(|(_, a)| a).collect();
    summary("while down", &answers);

    cluster.start_again().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let recovered = loop {
        let a = send(&app, post(&app, &agent, 300)).await;
        assert_ok_or_503(&a, "while recovering");
        if a.status == 200 {
            break a;
        }
        assert!(
            Instant::now() < deadline,
            "no recovery 20 s after the database came back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(recovered.accepted, 5);
    assert_eq!(send(&app, app.client.get(app.url("/readyz"))).await.status, 200);
    assert_eq!(
        app.count("SELECT COALESCE(SUM(repeat_count), 0)::bigint FROM events")
            .await,
        10
    );
    drop(app);
    cluster.stop().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
