//! Catalog edits never stop ingest: the edit commits at once, the failures are rebuilt in the
//! background in chunks, and the result equals a fold from scratch under the new catalog. Readers
//! see which version they read and the rebuild's progress; a restart resumes the rebuild.

use std::process::Stdio;
use std::time::{Duration, Instant};

use faultline::app::configuration::Limits;
use faultline::app::edge::EdgeSettings;
use faultline::devtools::client::Client;
use faultline::devtools::simulate::{SimConfig, SimulatedFleet, simulate};
use faultline::http::rate_limit::RateLimitSettings;
use serde_json::{Value, json};

use crate::helpers::{
    ADMIN_TOKEN, Backend, TestApp, TestDatabase, catalog_edit, join_all, rebuilt, spawn_app_on_backend_with,
    status_json, test_server_url,
};

/// The rebuild lease: while a test holds it, no worker rebuilds (see `ingest::rebuild`).
const LEASE: (i32, i32) = (0x464c_0004, 0);

fn fleet() -> SimulatedFleet {
    simulate(&SimConfig {
        days: 10,
        nodes: 96,
        ..SimConfig::default()
    })
}

fn limits(chunk_keys: usize) -> Limits {
    Limits {
        rebuild_chunk_keys: chunk_keys,
        ..Limits::default()
    }
}

fn unlimited_edge() -> EdgeSettings {
    EdgeSettings {
        rate_limit: RateLimitSettings {
            rate_limit_per_token_rps: 0.0,
            rate_limit_per_token_burst: 0,
        },
        ..EdgeSettings::default()
    }
}

async fn app_with_chunks(backend: Backend, chunk_keys: usize) -> TestApp {
    spawn_app_on_backend_with(backend, limits(chunk_keys), unlimited_edge()).await
}

/// Site edits: XID 79 is the driver's fault here, and "vastdata" names the storage.
fn edits() -> Vec<(&'static str, Value)> {
    vec![
        (
            "/v1/classification-rules/xid-79",
            json!({"kind": "xid", "code": 79, "priority": 200, "category": "platform", "component": "driver",
                   "severity": "high", "transient": true, "secondary": false, "action": "reset_gpu",
                   "description": "site override", "source": "post-mortem 42"}),
        ),
        (
            "/v1/classification-terms/vastdata",
            json!({"kind": "component", "component": "storage", "weight": 4, "source": "site"}),
        ),
    ]
}

async fn put(base: &str, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .put(format!("{base}{path}"))
        .bearer_auth(ADMIN_TOKEN)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Every failure, page by page, and a few analytics over the fleet's window.
async fn answers(base: &str) -> Vec<Value> {
    let client = reqwest::Client::new();
    let get = |path: String| {
        let req = client.get(format!("{base}{path}")).bearer_auth(ADMIN_TOKEN);
        async move { status_json(req.send().await.unwrap()).await }
    };
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/failures?limit=1000&cursor={c}"),
            None => "/v1/failures?limit=1000".to_string(),
        };
        let (status, page) = get(path).await;
        assert_eq!(status, 200, "{page}");
        cursor = page["next_cursor"].as_str().map(str::to_string);
        out.push(page);
        if cursor.is_none() {
            break;
        }
    }
    let w = "from=2026-10-01T00:00:00Z&to=2026-10-12T00:00:00Z";
    for a in ["root-causes", "failure-mix?by=gpu_generation", "top-errors", "recovery"] {
        let sep = if a.contains('?') { '&' } else { '?' };
        let (status, body) = get(format!("/v1/analytics/{a}{sep}{w}")).await;
        assert_eq!(status, 200, "{body}");
        out.push(body);
    }
    out
}

async fn load(client: &Client, fleet: &SimulatedFleet, events: &[Value]) {
    client.put_nodes(&fleet.nodes, 1000).await.unwrap();
    client.put_jobs(&fleet.jobs, 1000).await.unwrap();
    let sent = client.post_events(events, 500, 1, false).await.unwrap();
    assert_eq!(sent.accepted as usize + sent.duplicates as usize, events.len());
}

/// The reference: the edits first, then every signal, on a fresh database.
async fn reference(backend: Backend, fleet: &SimulatedFleet, edits: &[(&str, Value)]) -> Vec<Value> {
    let app = app_with_chunks(backend, 200).await;
    for (path, body) in edits {
        let (status, change) = catalog_edit(&app.address, put(&app.address, path, body).await).await;
        assert_eq!(status, 202, "{change}");
    }
    let client = Client::new(&app.address, ADMIN_TOKEN).unwrap();
    load(&client, fleet, &fleet.events).await;
    answers(&app.address).await
}

/// An edit lands while a fleet's signals stream in: the edit answers at once, every batch is
/// answered 2xx while the rebuild runs (one key per chunk, so chunks and batches interleave),
/// and once the rebuild is done the failures and analytics are those of a fold from scratch
/// with the edit in place from the start.
async fn an_edit_during_ingest_on(backend: Backend) {
    let fleet = fleet();
    let app = app_with_chunks(backend, 1).await;
    let client = Client::new(&app.address, ADMIN_TOKEN).unwrap();
    let (first, rest) = fleet.events.split_at(fleet.events.len() / 2);
    load(&client, &fleet, first).await;

    let edit = edits().remove(0);
    let started = Instant::now();
    let res = put(&app.address, edit.0, &edit.1).await;
    let edit_took = started.elapsed();
    let (status, change) = status_json(res).await;
    assert_eq!(status, 202, "{change}");
    assert_eq!(change["rebuild"]["state"], "running");
    let version = change["catalog_version"].as_i64().unwrap();

    // The rest of the signals, in small batches from two senders, while the rebuild runs.
    let batches: Vec<&[Value]> = rest.chunks(200).collect();
    let sends = batches.iter().map(|b| {
        let client = &client;
        async move {
            let t = Instant::now();
            let sent = client.post_events(b, 200, 1, false).await.unwrap();
            (sent, t.elapsed())
        }
    });
    let mut slowest = Duration::ZERO;
    for (sent, took) in join_all(sends.collect()).await {
        assert_eq!(sent.rejected, 0);
        slowest = slowest.max(took);
    }
    let done = rebuilt(&app.address, version).await;
    assert_eq!(done["state"], "done", "{done}");
    // Ingest re-folds the stale failures of the keys it touches under the new version itself, so
    // the rebuild has at most the failures it counted at its start left to do.
    assert!(done["done"].as_i64() <= done["total"].as_i64(), "{done}");
    assert!(done["chunks"].as_i64().unwrap() > 1, "{done}");
    // Generous bounds (a shared CI machine): a blocking rebuild holds ingest for its whole length.
    assert!(edit_took < Duration::from_secs(5), "the edit took {edit_took:?}");
    assert!(slowest < Duration::from_secs(20), "a batch took {slowest:?}");

    assert_eq!(
        answers(&app.address).await,
        reference(backend, &fleet, &edits()[..1]).await
    );
}

#[tokio::test]
async fn an_edit_during_ingest_answers_at_once_and_the_rebuild_equals_a_fold_from_scratch() {
    an_edit_during_ingest_on(Backend::Postgres).await;
}

#[tokio::test]
async fn an_edit_during_ingest_answers_at_once_and_the_rebuild_equals_a_fold_from_scratch_on_citus() {
    an_edit_during_ingest_on(Backend::Citus).await;
}

/// Two edits in a row: the second supersedes the first's rebuild, which ends `superseded` (or
/// `done`, had it finished first); the second's rebuild leaves every failure under its version,
/// equal to a fold from scratch with both edits.
#[tokio::test]
async fn a_second_edit_supersedes_the_first_rebuild() {
    let fleet = fleet();
    let app = app_with_chunks(Backend::Postgres, 2).await;
    let client = Client::new(&app.address, ADMIN_TOKEN).unwrap();
    load(&client, &fleet, &fleet.events).await;
    let mut versions = Vec::new();
    for (path, body) in edits() {
        let (status, change) = status_json(put(&app.address, path, &body).await).await;
        assert_eq!(status, 202, "{change}");
        versions.push(change["catalog_version"].as_i64().unwrap());
    }
    let last = rebuilt(&app.address, versions[1]).await;
    assert_eq!(last["state"], "done", "{last}");
    let first = rebuilt(&app.address, versions[0]).await;
    assert!(first["state"] == "superseded" || first["state"] == "done", "{first}");
    let answers_now = answers(&app.address).await;
    for page in answers_now.iter().filter(|a| a["failures"].is_array()) {
        for f in page["failures"].as_array().unwrap() {
            assert_eq!(f["catalog_version"].as_i64(), Some(versions[1]), "{f}");
        }
    }
    assert_eq!(answers_now, reference(Backend::Postgres, &fleet, &edits()).await);
}

/// While a rebuild runs (held here by taking its lease), every answer says so: the catalog
/// version, the rebuild's version and progress; a read pinned to the new version is 409 with
/// that progress, and answers once the rebuild is done; a read pinned to an old version is 409.
#[tokio::test]
async fn answers_state_the_catalog_version_and_the_rebuild_while_it_runs() {
    let fleet = fleet();
    let app = app_with_chunks(Backend::Postgres, 50).await;
    let client = Client::new(&app.address, ADMIN_TOKEN).unwrap();
    load(&client, &fleet, &fleet.events).await;
    let mut lease = app.db.acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock($1, $2)")
        .bind(LEASE.0)
        .bind(LEASE.1)
        .execute(&mut *lease)
        .await
        .unwrap();

    let (path, body) = edits().remove(0);
    let (status, change) = status_json(put(&app.address, path, &body).await).await;
    assert_eq!(status, 202, "{change}");
    let version = change["catalog_version"].as_i64().unwrap();
    let w = "from=2026-10-01T00:00:00Z&to=2026-10-12T00:00:00Z";
    let (status, mix) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/root-causes?{w}")).await;
    assert_eq!(status, 200);
    assert_eq!(mix["window"]["catalog_version"].as_i64(), Some(version));
    assert_eq!(mix["window"]["rebuild"]["version"].as_i64(), Some(version));
    assert_eq!(mix["window"]["rebuild"]["done"], 0);
    let (status, pinned) = app
        .get(
            ADMIN_TOKEN,
            &format!("/v1/analytics/root-causes?{w}&catalog_version={version}"),
        )
        .await;
    assert_eq!(status, 409, "{pinned}");
    assert_eq!(pinned["error"], "catalog_version_pending");
    assert_eq!(pinned["details"]["rebuild"]["version"].as_i64(), Some(version));
    let (status, _) = app
        .get(ADMIN_TOKEN, &format!("/v1/failures?catalog_version={version}"))
        .await;
    assert_eq!(status, 409);
    // Without a token the pin tells nothing.
    let res = app
        .client
        .get(app.url(&format!("/v1/analytics/root-causes?catalog_version={version}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);

    sqlx::query("SELECT pg_advisory_unlock($1, $2)")
        .bind(LEASE.0)
        .bind(LEASE.1)
        .execute(&mut *lease)
        .await
        .unwrap();
    drop(lease);
    assert_eq!(rebuilt(&app.address, version).await["state"], "done");
    let (status, mix) = app
        .get(
            ADMIN_TOKEN,
            &format!("/v1/analytics/root-causes?{w}&catalog_version={version}"),
        )
        .await;
    assert_eq!(status, 200, "{mix}");
    assert!(mix["window"].get("rebuild").is_none(), "{mix}");
    let (status, old) = app
        .get(
            ADMIN_TOKEN,
            &format!("/v1/analytics/root-causes?{w}&catalog_version={}", version - 1),
        )
        .await;
    assert_eq!(
        (status, old["details"]["catalog_version"].as_i64()),
        (409, Some(version))
    );
}

/// A `faultline serve` started on `database` with rebuild chunks of one key; its base URL.
async fn serve(database: &TestDatabase, data_dir: &std::path::Path) -> (tokio::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
        .arg("serve")
        .env("DATABASE_URL", database.url())
        .env("FAULTLINE_ADDR", format!("127.0.0.1:{port}"))
        .env("FAULTLINE_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("FAULTLINE_DATA_DIR", data_dir)
        .env("FAULTLINE_REBUILD_CHUNK_KEYS", "1")
        .env("FAULTLINE_RATE_LIMIT_PER_TOKEN_RPS", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while reqwest::get(format!("{base}/healthz")).await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "the server did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (child, base)
}

/// The instance running a rebuild is killed (SIGKILL) after a few chunks; another instance
/// takes the lease over and resumes from the stored progress: every failure is counted once, and
/// the result equals a fold from scratch.
#[tokio::test]
async fn a_rebuild_killed_mid_way_is_finished_by_another_instance() {
    let fleet = fleet();
    let server_url = test_server_url().await.unwrap();
    let database = TestDatabase::create(&server_url).await;
    let data_dir = std::env::temp_dir().join(format!("faultline-rebuild-{}", database.name));
    let (mut first, base) = serve(&database, &data_dir).await;
    let client = Client::new(&base, ADMIN_TOKEN).unwrap();
    load(&client, &fleet, &fleet.events).await;
    let (path, body) = edits().remove(0);
    let (status, change) = status_json(put(&base, path, &body).await).await;
    assert_eq!(status, 202, "{change}");
    let version = change["catalog_version"].as_i64().unwrap();
    let status_of = |base: String| async move {
        let res = reqwest::Client::new()
            .get(format!("{base}/v1/catalog/rebuilds/{version}"))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        status_json(res).await.1
    };
    let started = Instant::now();
    loop {
        let s = status_of(base.clone()).await;
        if s["chunks"].as_i64().unwrap_or(0) >= 3 {
            assert_eq!(s["state"], "running", "the rebuild ended before the kill: {s}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no progress: {s}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.start_kill().unwrap();
    first.wait().await.unwrap();

    let (_second, base) = serve(&database, &data_dir).await;
    let done = rebuilt(&base, version).await;
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["done"], done["total"], "no chunk counted twice: {done}");
    let mut got = answers(&base).await;
    let mut expected = reference(Backend::Postgres, &fleet, &edits()[..1]).await;
    // The two databases stored their nodes at different times: nothing else may differ.
    for a in got.iter_mut().chain(expected.iter_mut()) {
        a.as_object_mut().map(|o| o.remove("updated_at"));
    }
    assert_eq!(got, expected);
    let _ = std::fs::remove_dir_all(&data_dir);
}
