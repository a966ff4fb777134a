//! Faultline on a Citus cluster (a coordinator and two workers, see `citus.rs`): the tables are
//! distributed as the plan in `storage::distribution` says, every write route answers 2xx, and a
//! simulated fleet gives the same answers as on one Postgres, byte for byte.

use faultline::devtools::client::Client;
use faultline::devtools::simulate::{SimConfig, simulate};
use faultline::storage::distribution::{DISTRIBUTED_TABLES, DISTRIBUTION_COLUMN, LOCAL_TABLES, REFERENCE_TABLES};

use chrono::{DateTime, TimeZone, Utc};
use faultline::app::configuration::{AppConfig, Limits};
use faultline::app::edge::EdgeSettings;
use faultline::app::startup::Application;
use faultline::http::rate_limit::RateLimitSettings;

use crate::helpers::{
    ADMIN_TOKEN, Backend, TestApp, join_all, spawn_app, spawn_app_in, spawn_app_on_backend, spawn_app_on_backend_with,
};

/// Without the per-token rate limit: the loads below send as fast as the server answers.
fn unlimited_edge() -> EdgeSettings {
    EdgeSettings {
        rate_limit: RateLimitSettings {
            rate_limit_per_token_rps: 0.0,
            rate_limit_per_token_burst: 0,
        },
        ..EdgeSettings::default()
    }
}

async fn unlimited_app(backend: Backend) -> TestApp {
    spawn_app_on_backend_with(backend, Limits::default(), unlimited_edge()).await
}

/// Top-level tables of the app's schema (partitions follow their parent).
async fn schema_tables(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c
         WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
           AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e')
         ORDER BY 1",
    )
    .fetch_all(&app.db)
    .await
    .unwrap()
}

/// A migration that adds a table must say how it distributes: checked on plain Postgres, so it
/// fails without a Citus cluster too.
#[tokio::test]
async fn every_table_of_the_schema_has_a_place_in_the_distribution_plan() {
    let app = spawn_app().await;
    let mut planned: Vec<&str> = REFERENCE_TABLES
        .iter()
        .chain(DISTRIBUTED_TABLES)
        .chain(LOCAL_TABLES)
        .copied()
        .collect();
    planned.sort_unstable();
    assert_eq!(schema_tables(&app).await, planned);
}

#[tokio::test]
async fn on_citus_every_table_is_distributed_by_cluster_or_a_reference_table() {
    let app = spawn_app_on_backend(Backend::Citus).await;
    let placed: Vec<(String, String, Option<String>, i32)> = sqlx::query_as(
        "SELECT p.logicalrelid::regclass::text, p.partmethod::text,
                column_to_column_name(p.logicalrelid, p.partkey), p.colocationid
         FROM pg_dist_partition p ORDER BY 1",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    let colocation = placed
        .iter()
        .find(|p| p.0 == "events")
        .expect("events is distributed")
        .3;
    for table in DISTRIBUTED_TABLES {
        let p = placed
            .iter()
            .find(|p| p.0 == *table)
            .unwrap_or_else(|| panic!("{table} is not distributed"));
        assert_eq!(
            (p.1.as_str(), p.2.as_deref(), p.3),
            ("h", Some(DISTRIBUTION_COLUMN), colocation),
            "{table}"
        );
    }
    for table in REFERENCE_TABLES {
        let p = placed
            .iter()
            .find(|p| p.0 == *table)
            .unwrap_or_else(|| panic!("{table} is not a reference table"));
        assert_eq!(p.1, "n", "{table}");
    }
    // The shards of events are spread over both workers.
    let workers: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = 'events'::regclass")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(workers, 2);
    // A second migrate (a restart) finds nothing to do.
    let again = faultline::storage::migrate(&app.db).await.unwrap();
    assert!(again.citus && again.changed.is_empty(), "{again:?}");
}

/// A second instance of the app on `app`'s database (its own pool), as a site runs several
/// behind a load balancer; returns its base URL.
async fn second_instance(app: &TestApp) -> String {
    let edge = unlimited_edge();
    let pool = faultline::db::pool::connect(&app.database_url(), &edge.pool)
        .await
        .unwrap();
    let config = AppConfig {
        admin_token: ADMIN_TOKEN.to_string(),
        limits: Limits::default(),
        correlation_window: std::time::Duration::from_secs(600),
        edge,
        retention: Default::default(),
        alerts: Default::default(),
    };
    let other = Application::build(config, pool, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let address = format!("http://{}", other.local_addr().unwrap());
    tokio::spawn(other.run_until(std::future::pending()));
    address
}

/// The simulated fleet's first day: the retention drop below removes its month.
fn fleet_start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 9, 16, 0, 0, 0).unwrap()
}

/// The simulator's fleet (several clusters; cascades, jobs, drains, post-mortems) as a site sends
/// it: half the inventory late, after the signals; the signals dealt batch by batch over two
/// instances at once, so a cascade arrives at both; then a retention pass drops September and a
/// catalog edit rebuilds the failures.
async fn load_fleet(app: &TestApp) {
    let fleet = simulate(&SimConfig {
        start: fleet_start(),
        days: 44,
        ..SimConfig::default()
    });
    let instances = [app.address.clone(), second_instance(app).await];
    let clients: Vec<Client> = instances.iter().map(|a| Client::new(a, ADMIN_TOKEN).unwrap()).collect();
    let (early, late) = fleet.nodes.split_at(fleet.nodes.len() / 2);
    clients[0].put_nodes(early, 1000).await.unwrap();
    let jobs = clients[1].put_jobs(&fleet.jobs, 1000).await.unwrap();
    assert_eq!(jobs.rejected, 0);
    let batches: Vec<&[serde_json::Value]> = fleet.events.chunks(1500).collect();
    let sends = batches
        .iter()
        .enumerate()
        .map(|(i, batch)| clients[i % 2].post_events(batch, 1500, 1, false));
    let mut accepted = 0;
    for sent in join_all(sends.collect()).await {
        accepted += sent.unwrap().accepted;
    }
    assert_eq!(accepted as usize, fleet.events.len());
    clients[1].put_nodes(late, 1000).await.unwrap();
    let states = clients[0].post_node_states(&fleet.node_states).await.unwrap();
    assert_eq!(states.accepted as usize, fleet.node_states.len());
    let patched = clients[1].patch_lifecycles(&fleet.lifecycles).await.unwrap();
    assert_eq!(patched.rejected, 0);

    let dropped =
        faultline::storage::partitions::drop_before(&app.db, Utc.with_ymd_and_hms(2026, 10, 1, 0, 0, 0).unwrap())
            .await
            .unwrap();
    assert!(dropped >= 1, "September's partition is dropped");
    // A site term: "vastdata" names the storage component, so free-text signals that say it move.
    let term = serde_json::json!({"kind": "component", "component": "storage", "weight": 4, "source": "site"});
    let res = app
        .client
        .put(format!("{}/v1/classification-terms/vastdata", instances[1]))
        .bearer_auth(ADMIN_TOKEN)
        .json(&term)
        .send()
        .await
        .unwrap();
    let (status, change) = crate::helpers::catalog_edit(&instances[1], res).await;
    assert_eq!(
        (status, change["rebuild"]["state"].as_str()),
        (202, Some("done")),
        "{change}"
    );
}

/// Every read a user makes of the fleet, as (path, body) pairs.
async fn answers(app: &TestApp) -> Vec<(String, u16, String)> {
    let w = "from=2026-09-16T00:00:00Z&to=2026-10-30T00:00:00Z";
    let mut paths: Vec<String> = [
        "failure-mix?by=gpu_generation",
        "failure-mix?by=cluster",
        "mtbf?group_size=128",
        "root-causes",
        "recovery",
        "top-errors",
        "node-concentration",
        "job-size",
        "stragglers",
        "efficiency",
        "timeline",
        "baselines",
        "lemon-nodes",
        "job-plan?gpus=1024",
    ]
    .iter()
    .map(|a| {
        let sep = if a.contains('?') { '&' } else { '?' };
        format!("/v1/analytics/{a}{sep}{w}")
    })
    .collect();
    paths.push("/v1/analytics/compare?a_from=2026-09-16T00:00:00Z&a_to=2026-10-08T00:00:00Z&b_from=2026-10-08T00:00:00Z&b_to=2026-10-30T00:00:00Z".to_string());
    paths.push(format!("/v1/reports/reliability?{w}&format=markdown"));
    paths.push("/v1/nodes".into());
    let mut out = Vec::new();
    // Every failure, page by page (the cursor continues where the last page ended).
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/failures?limit=1000&cursor={c}"),
            None => "/v1/failures?limit=1000".to_string(),
        };
        let res = app
            .client
            .get(app.url(&path))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body = res.text().await.unwrap();
        let page: serde_json::Value = serde_json::from_str(&body).unwrap();
        cursor = page["next_cursor"].as_str().map(str::to_string);
        out.push(("/v1/failures (page)".to_string(), status, body));
        if cursor.is_none() {
            break;
        }
    }
    for path in paths {
        let res = app
            .client
            .get(app.url(&path))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        out.push((path, status, res.text().await.unwrap()));
    }
    out
}

#[tokio::test]
async fn a_simulated_fleet_answers_the_same_on_citus_as_on_one_postgres() {
    let plain = unlimited_app(Backend::Postgres).await;
    let citus = unlimited_app(Backend::Citus).await;
    load_fleet(&plain).await;
    load_fleet(&citus).await;
    // Every write answered 2xx (or 503 + Retry-After under load, which the client waits out): no
    // request of either load ended in a 500.
    let metrics = citus
        .client
        .get(citus.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let errors: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("faultline_http_requests_total") && l.contains("status=\"500\""))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(
        metrics.contains("faultline_http_requests_total"),
        "requests are counted"
    );
    let (expected, got) = (answers(&plain).await, answers(&citus).await);
    assert_eq!(expected.len(), got.len());
    for ((path, status, body), (_, citus_status, citus_body)) in expected.iter().zip(&got) {
        // When each database stored a node is the one thing that differs.
        let (body, citus_body) = (without_volatile(body), without_volatile(citus_body));
        assert_eq!(*status, 200, "{path}: {body}");
        assert_eq!((citus_status, &citus_body), (status, &body), "{path}");
    }
}

/// An answer without what differs between two databases holding the same data: when each stored
/// a node, and when the report was generated (to the minute).
fn without_volatile(body: &str) -> String {
    let mut value: serde_json::Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(_) => {
            return match body.find("; generated ") {
                Some(i) => {
                    let end = (i + "; generated 2026-12-02 09:26 UTC".len()).min(body.len());
                    format!("{}{}", &body[..i], &body[end..])
                }
                None => body.to_string(),
            };
        }
    };
    if let Some(nodes) = value.get_mut("nodes").and_then(|n| n.as_array_mut()) {
        for node in nodes {
            node.as_object_mut().map(|o| o.remove("updated_at"));
        }
    }
    value.to_string()
}

/// A site moving an existing single-node database onto Citus: the database holds a fleet, gets
/// the extension and its workers, and `faultline migrate --distributed`'s step distributes it in
/// place. Every answer is the same afterwards, and ingest goes on.
#[tokio::test]
async fn a_database_holding_data_distributes_in_place_and_answers_the_same() {
    let database = crate::citus::database_on_every_node().await;
    let app = spawn_app_in(database, Limits::default(), unlimited_edge()).await;
    load_fleet(&app).await;
    let before = answers(&app).await;
    let (signals, failures) = (
        app.count("SELECT count(*) FROM events").await,
        app.count("SELECT count(*) FROM failures").await,
    );

    crate::citus::add_citus(app.test_database()).await;
    let done = faultline::storage::migrate(&app.db).await.unwrap();
    assert!(done.citus);
    assert_eq!(
        done.changed.len(),
        REFERENCE_TABLES.len() + DISTRIBUTED_TABLES.len(),
        "{done:?}"
    );
    assert_eq!(
        (
            app.count("SELECT count(*) FROM events").await,
            app.count("SELECT count(*) FROM failures").await
        ),
        (signals, failures)
    );
    let after = answers(&app).await;
    assert_eq!(before.len(), after.len());
    for ((path, status, body), (_, s, b)) in before.iter().zip(&after) {
        assert_eq!(*status, 200, "{path}: {body}");
        assert_eq!((s, &without_volatile(b)), (status, &without_volatile(body)), "{path}");
    }
    let (status, body) = app
        .post_events(
            ADMIN_TOKEN,
            &serde_json::json!({"events": [crate::helpers::event(&crate::helpers::uuid_n(1), serde_json::json!({"occurred_at": "2026-10-20T00:00:00Z"}))]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(app.count("SELECT count(*) FROM failures").await, failures + 1);
}
