//! More than one instance on one database, as behind a load balancer: every instance is the real
//! app (`Application::build`, port 0) with its own pool, as separate `faultline serve` processes
//! would be. They must migrate a fresh database together, fold the same cascades split over them
//! into exactly the expected failures, and see each other's catalog edits.

use std::collections::BTreeMap;
use std::time::Duration;

use faultline::app::configuration::{AppConfig, Limits};
use faultline::app::edge::EdgeSettings;
use faultline::app::startup::Application;
use faultline::db::database::{ensure_database, with_database};
use faultline::devtools::client::Client;
use faultline::devtools::simulate::{SimConfig, simulate};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::helpers::{ADMIN_TOKEN, event, join_all, status_json, test_server_url, uuid_n};

/// A database of its own, dropped when the test ends (as `spawn_app`'s is).
struct SharedDatabase {
    server_url: String,
    name: String,
    url: String,
}

impl SharedDatabase {
    async fn create() -> SharedDatabase {
        let server_url = test_server_url().await.expect("a PostgreSQL server for tests");
        let name = format!("faultline_test_{}", uuid::Uuid::new_v4().simple());
        ensure_database(&server_url, &name)
            .await
            .expect("create the test database");
        let url = with_database(&server_url, &name);
        SharedDatabase { server_url, name, url }
    }

    async fn pool(&self) -> PgPool {
        faultline::db::pool::connect(&self.url, &EdgeSettings::default().pool)
            .await
            .expect("connect")
    }
}

impl Drop for SharedDatabase {
    fn drop(&mut self) {
        let admin = with_database(&self.server_url, "postgres");
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        // The test's runtime is blocked here: drop on a runtime of its own.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                use sqlx::Connection;
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
                }
            });
        })
        .join()
        .ok();
    }
}

/// One instance on `db` with a pool of its own; its base URL once it serves.
async fn start_instance(db: &SharedDatabase) -> anyhow::Result<String> {
    let pool = db.pool().await;
    let config = AppConfig {
        admin_token: ADMIN_TOKEN.to_string(),
        limits: Limits::default(),
        correlation_window: Duration::from_secs(600),
        edge: EdgeSettings::default(),
        retention: Default::default(),
        alerts: Default::default(),
    };
    let app = Application::build(config, pool, "127.0.0.1:0".parse().unwrap()).await?;
    let address = format!("http://{}", app.local_addr()?);
    tokio::spawn(app.run_until(std::future::pending()));
    Ok(address)
}

async fn start_instances(db: &SharedDatabase, n: usize) -> Vec<String> {
    join_all((0..n).map(|_| start_instance(db)).collect())
        .await
        .into_iter()
        .map(|started| started.expect("every instance starts"))
        .collect()
}

/// Instances starting together on an empty database all migrate it, and each migration is applied
/// once: sqlx's migrator holds a Postgres advisory lock (per database) while it checks and applies,
/// so the others wait and then find nothing left to do.
#[tokio::test]
async fn instances_starting_at_once_on_a_fresh_database_migrate_it_once() {
    let db = SharedDatabase::create().await;
    let addresses = start_instances(&db, 4).await;
    let pool = db.pool().await;
    let applied: Vec<(i64, bool)> = sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
        .fetch_all(&pool)
        .await
        .unwrap();
    let expected: Vec<(i64, bool)> = faultline::storage::MIGRATOR.iter().map(|m| (m.version, true)).collect();
    assert_eq!(applied, expected);
    for address in &addresses {
        let res = reqwest::get(format!("{address}/readyz")).await.unwrap();
        assert_eq!(res.status(), 200);
    }
    pool.close().await;
}

async fn failures_by_id(pool: &PgPool) -> Vec<(uuid::Uuid, String, String, i32)> {
    sqlx::query_as("SELECT id, category, component, signal_count FROM failures ORDER BY id")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// The simulated fleet's signals dealt round-robin to three instances, which ingest them
/// concurrently: a cascade's signals arrive at different instances at once, and the failures are
/// exactly those the simulator injected, the same as one instance forms from the same signals.
#[tokio::test]
async fn three_instances_fold_the_same_cascades_into_exactly_the_expected_failures() {
    let fleet = simulate(&SimConfig::default());
    let db = SharedDatabase::create().await;
    let addresses = start_instances(&db, 3).await;
    let clients: Vec<Client> = addresses.iter().map(|a| Client::new(a, ADMIN_TOKEN).unwrap()).collect();
    clients[0].put_nodes(&fleet.nodes, 1000).await.unwrap();
    let mut shares: Vec<Vec<Value>> = vec![Vec::new(); clients.len()];
    for (i, e) in fleet.events.iter().enumerate() {
        shares[i % clients.len()].push(e.clone());
    }
    let sent = join_all(
        clients
            .iter()
            .zip(&shares)
            .map(|(client, share)| client.post_events(share, 500, 1, false))
            .collect(),
    )
    .await;
    let accepted: u64 = sent.into_iter().map(|s| s.expect("ingest").accepted).sum();
    assert_eq!(accepted as usize, fleet.events.len());

    let pool = db.pool().await;
    let formed = failures_by_id(&pool).await;
    assert_eq!(formed.len(), fleet.truth.failures);
    let mut by_category: BTreeMap<String, usize> = BTreeMap::new();
    for (_, category, _, _) in &formed {
        *by_category.entry(category.clone()).or_default() += 1;
    }
    assert_eq!(by_category, fleet.truth.by_category);

    // The same signals through one instance into another database: the same failures.
    let single = SharedDatabase::create().await;
    let client = Client::new(&start_instance(&single).await.unwrap(), ADMIN_TOKEN).unwrap();
    client.put_nodes(&fleet.nodes, 1000).await.unwrap();
    client.post_events(&fleet.events, 5000, 1, false).await.unwrap();
    let single_pool = single.pool().await;
    assert_eq!(failures_by_id(&single_pool).await, formed);
    pool.close().await;
    single_pool.close().await;
}

/// Each instance caches the catalog, but ingest reads the stored catalog version in its
/// transaction and reloads when it moved: a rule edited through one instance classifies the next
/// signal another instance folds, and that instance's classify preview.
#[tokio::test]
async fn a_rule_edit_on_one_instance_reaches_the_others() {
    let db = SharedDatabase::create().await;
    let addresses = start_instances(&db, 2).await;
    let (editor, other) = (&addresses[0], &addresses[1]);
    let client = reqwest::Client::new();
    let post_events = |base: &str, events: Value| {
        client
            .post(format!("{base}/v1/events"))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({ "events": events }))
            .send()
    };
    // The other instance folds once with the built-in catalog (version 1), so it has it cached.
    let res = post_events(other, json!([event(&uuid_n(1), json!({"node": "n01"}))]))
        .await
        .unwrap();
    assert_eq!(status_json(res).await.0, 200);

    let rule = json!({"kind": "xid", "code": 79, "priority": 200, "category": "platform", "component": "driver",
                      "severity": "high", "transient": true, "secondary": false, "action": "reset_gpu",
                      "description": "site override", "source": "post-mortem 42"});
    let res = client
        .put(format!("{editor}/v1/classification-rules/xid-79"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&rule)
        .send()
        .await
        .unwrap();
    let (status, change) = crate::helpers::catalog_edit(editor, res).await;
    assert_eq!((status, change["catalog_version"].as_i64()), (202, Some(2)), "{change}");

    let res = post_events(
        other,
        json!([event(
            &uuid_n(2),
            json!({"node": "n02", "occurred_at": "2026-11-04T00:00:00Z"})
        )]),
    )
    .await
    .unwrap();
    assert_eq!(status_json(res).await.0, 200);
    let res = client
        .get(format!("{other}/v1/failures"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let (status, list) = status_json(res).await;
    assert_eq!(status, 200, "{list}");
    let failures = list["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 2);
    for f in failures {
        assert_eq!(
            (&f["catalog_version"], &f["root_cause"]),
            (&json!(2), &json!({"category": "platform", "component": "driver"})),
            "{f}"
        );
    }
    let res = client
        .post(format!("{other}/v1/classify"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"items": [{"message": "GPU has fallen off the bus", "kind": "xid", "code": 79}]}))
        .send()
        .await
        .unwrap();
    let (status, preview) = status_json(res).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(
        (&preview["catalog_version"], &preview["results"][0]["component"]),
        (&json!(2), &json!("driver")),
        "{preview}"
    );
}
