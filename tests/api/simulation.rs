use std::collections::BTreeMap;

use faultline::devtools::client::Client;
use faultline::devtools::simulate::{SimConfig, simulate};

use crate::helpers::{ADMIN_TOKEN, TestApp, spawn_app};

async fn failures_by_id(app: &TestApp) -> Vec<(uuid::Uuid, String, String, i32)> {
    sqlx::query_as("SELECT id, category, component, signal_count FROM failures ORDER BY id")
        .fetch_all(&app.db)
        .await
        .unwrap()
}

/// The simulator knows how many failures it injected and their root categories; the server must
/// find exactly those, whatever the order and batching of arrival.
#[tokio::test]
async fn a_simulated_fleet_forms_exactly_the_injected_failures_in_any_order() {
    let fleet = simulate(&SimConfig::default());
    let app = spawn_app().await;
    let client = Client::new(&app.address, ADMIN_TOKEN).unwrap();
    client.put_nodes(&fleet.nodes, 1000).await.unwrap();
    let sent = client.post_events(&fleet.events, 5000, 1, false).await.unwrap();
    assert_eq!(sent.accepted as usize, fleet.events.len());
    let formed = failures_by_id(&app).await;
    assert_eq!(formed.len(), fleet.truth.failures);

    let (status, rc) = app
        .get(
            ADMIN_TOKEN,
            "/v1/analytics/root-causes?from=2026-09-01T00:00:00Z&to=2026-12-01T00:00:00Z",
        )
        .await;
    assert_eq!(status, 200);
    let by_category: BTreeMap<String, usize> = rc["categories"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["failures"].as_u64().unwrap() > 0)
        .map(|c| {
            (
                c["category"].as_str().unwrap().to_string(),
                c["failures"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    assert_eq!(by_category, fleet.truth.by_category);

    // Same signals, reversed and in small batches, into another database: same failures.
    let other = spawn_app().await;
    let client = Client::new(&other.address, ADMIN_TOKEN).unwrap();
    client.put_nodes(&fleet.nodes, 1000).await.unwrap();
    let mut reversed = fleet.events.clone();
    reversed.reverse();
    client.post_events(&reversed, 700, 1, false).await.unwrap();
    assert_eq!(failures_by_id(&other).await, formed);
    // Re-sending everything is idempotent.
    let again = client.post_events(&fleet.events, 5000, 1, false).await.unwrap();
    assert_eq!((again.accepted, again.duplicates as usize), (0, fleet.events.len()));
    assert_eq!(failures_by_id(&other).await, formed);
}

fn rate_limited(rps: f64, burst: u32) -> faultline::app::edge::EdgeSettings {
    faultline::app::edge::EdgeSettings {
        rate_limit: faultline::http::rate_limit::RateLimitSettings {
            rate_limit_per_token_rps: rps,
            rate_limit_per_token_burst: burst,
        },
        ..Default::default()
    }
}

pub async fn rate_limited_app(rps: f64, burst: u32) -> TestApp {
    let server_url = crate::helpers::test_server_url().await.unwrap();
    crate::helpers::spawn_app_on(
        &server_url,
        faultline::app::configuration::Limits::default(),
        rate_limited(rps, burst),
    )
    .await
}

async fn lifecycles(app: &TestApp) -> Vec<(uuid::Uuid, Option<String>)> {
    sqlx::query_as("SELECT failure_id, resolution FROM failure_lifecycle ORDER BY failure_id")
        .fetch_all(&app.db)
        .await
        .unwrap()
}

/// `faultline simulate`'s sends into a server with a per-token limit of a few requests a second:
/// every 429 (on the GETs that find failures as on the writes) is waited out as its Retry-After
/// asks, and the server ends up with the same lifecycles as an unlimited one given the same fleet.
#[tokio::test]
async fn simulate_waits_out_a_rate_limit_and_records_every_lifecycle() {
    let fleet = simulate(&SimConfig {
        days: 7,
        nodes: 48,
        ..SimConfig::default()
    });
    assert!(fleet.lifecycles.len() >= 20, "{} lifecycles", fleet.lifecycles.len());

    let unlimited = spawn_app().await;
    let free = Client::new(&unlimited.address, ADMIN_TOKEN)
        .unwrap()
        .send_fleet(&fleet, 2000, false)
        .await
        .unwrap();
    assert_eq!(free.retries(), 0);

    let limited = rate_limited_app(20.0, 10).await;
    let sent = Client::new(&limited.address, ADMIN_TOKEN)
        .unwrap()
        .send_fleet(&fleet, 2000, false)
        .await
        .unwrap();
    assert!(
        sent.lifecycles.retries > 0,
        "the limit was reached while finding failures: {sent:?}"
    );
    assert_eq!(
        (sent.lifecycles.accepted, sent.lifecycles.rejected),
        (free.lifecycles.accepted, free.lifecycles.rejected)
    );
    assert_eq!(
        (sent.lifecycles.accepted + sent.lifecycles.rejected) as usize,
        fleet.lifecycles.len()
    );
    assert_eq!(sent.events.accepted, free.events.accepted);
    assert_eq!(sent.node_states.accepted, free.node_states.accepted);
    let recorded = lifecycles(&limited).await;
    assert_eq!(recorded.len() as u64, free.lifecycles.accepted);
    assert_eq!(recorded, lifecycles(&unlimited).await);
}

/// A client that keeps being turned away stops after its attempts and says why, with the last answer.
#[tokio::test]
async fn a_client_that_gives_up_says_so() {
    let app = rate_limited_app(0.01, 1).await;
    let client = Client::with_retry(
        &app.address,
        ADMIN_TOKEN,
        faultline::devtools::client::RetryPolicy {
            attempts: 3,
            max_wait: std::time::Duration::from_millis(100),
            ..Default::default()
        },
    )
    .unwrap();
    // The bucket's one request.
    let (_, retries) = client.send(reqwest::Method::GET, "/v1/failures", |r| r).await.unwrap();
    assert_eq!(retries, 0);
    let err = client
        .report(None, None, None, "markdown")
        .await
        .expect_err("the limit outlasts three attempts");
    let message = format!("{err:#}");
    assert!(
        message.contains("GET /v1/reports/reliability: gave up after 3 attempts") && message.contains("429"),
        "{message}"
    );
}

/// A GET turned away once is retried after the Retry-After and then answered.
#[tokio::test]
async fn a_rate_limited_read_is_retried_after_the_wait_asked_for() {
    let app = rate_limited_app(1.0, 1).await;
    let client = Client::new(&app.address, ADMIN_TOKEN).unwrap();
    client.send(reqwest::Method::GET, "/v1/failures", |r| r).await.unwrap();
    let started = std::time::Instant::now();
    let (res, retries) = client
        .send(reqwest::Method::GET, "/v1/failures", |r| r.query(&[("limit", "1")]))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(retries >= 1, "{retries}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
    let report = client.report(None, None, None, "markdown").await.unwrap();
    assert!(report.starts_with('#'), "{report}");
}
