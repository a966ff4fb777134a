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
