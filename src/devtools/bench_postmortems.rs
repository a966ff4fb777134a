//! `faultline bench-postmortems`: recording post-mortems on a history where single nodes hold over a
//! thousand failures, in bulk (`POST /v1/failures/lifecycles`) and one `PATCH /v1/failures/{id}`
//! at a time from several clients, against a real Postgres. Each way runs on its own database with
//! the same history, analysed while `failure_lifecycle` is still empty (the statistics a replay
//! leaves). Prints a Markdown table: the import's time and rate, and the PATCH rate over the first
//! and the last thousand (equal when a write's cost does not grow with the node's history).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde_json::{Value, json};

use crate::app::configuration::Limits;

pub struct PostmortemBenchOptions {
    pub server_url: String,
    pub nodes: u32,
    pub failures_per_node: u32,
    /// Concurrent PATCH clients.
    pub clients: usize,
    /// Post-mortems per import request.
    pub batch: usize,
    /// Prefix of the two databases dropped and recreated for the run.
    pub db_name: String,
}

const CLUSTER: &str = "bench";

struct Running {
    base: String,
    token: String,
    http: reqwest::Client,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    /// (failure id, first_at), oldest first: each node's history grows through the run.
    failures: Vec<(uuid::Uuid, DateTime<Utc>)>,
    ingest_secs: f64,
}

/// A fresh database with the history: `nodes` nodes of one cluster, each with
/// `failures_per_node` XID 79 failures 6 h apart; then VACUUM ANALYZE (no lifecycle yet).
async fn start(opts: &PostmortemBenchOptions, db_name: &str) -> anyhow::Result<Running> {
    crate::devtools::bench::recreate_database(&opts.server_url, db_name).await?;
    let crate::devtools::bench::BenchServer {
        base,
        token,
        db,
        server,
    } = crate::devtools::bench::serve(&opts.server_url, db_name, Limits::default()).await?;
    let http = reqwest::Client::new();

    let nodes: Vec<Value> = (0..opts.nodes)
        .map(|n| {
            json!({"hostname": format!("node{n:04}"), "cluster": CLUSTER, "gpu_model": "NVIDIA H100 80GB HBM3",
                        "gpu_count": 8, "in_service_since": "2015-01-01T00:00:00Z"})
        })
        .collect();
    let res = http
        .put(format!("{base}/v1/nodes"))
        .bearer_auth(&token)
        .json(&json!({"nodes": nodes}))
        .send()
        .await?;
    anyhow::ensure!(res.status().is_success(), "PUT /v1/nodes: {}", res.text().await?);
    let t0 = Utc.with_ymd_and_hms(2016, 1, 1, 0, 0, 0).unwrap();
    let mut events = Vec::new();
    for j in 0..opts.failures_per_node {
        for n in 0..opts.nodes {
            let at = t0 + chrono::Duration::hours(6 * i64::from(j)) + chrono::Duration::minutes(i64::from(n % 300));
            let id = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, format!("pm-bench/{n}/{j}").as_bytes());
            events.push(json!({"id": id, "occurred_at": at.to_rfc3339_opts(SecondsFormat::Secs, true), "cluster": CLUSTER,
                               "node": format!("node{n:04}"), "kind": "xid", "code": 79, "message": "GPU has fallen off the bus"}));
        }
    }
    let t = Instant::now();
    for chunk in events.chunks(5000) {
        let res = http
            .post(format!("{base}/v1/events"))
            .bearer_auth(&token)
            .json(&json!({"events": chunk}))
            .send()
            .await?;
        anyhow::ensure!(res.status().is_success(), "POST /v1/events: {}", res.text().await?);
    }
    let ingest_secs = t.elapsed().as_secs_f64();
    sqlx::raw_sql("VACUUM (ANALYZE)").execute(&db).await?;
    let failures: Vec<(uuid::Uuid, DateTime<Utc>)> =
        sqlx::query!("SELECT id, first_at FROM failures ORDER BY first_at, id")
            .fetch_all(&db)
            .await?
            .into_iter()
            .map(|r| (r.id, r.first_at))
            .collect();
    Ok(Running {
        base,
        token,
        http,
        server,
        failures,
        ingest_secs,
    })
}

/// The post-mortem of the `i`th failure: repair time and phases, and for every other one a cause.
fn post_mortem(i: usize, first_at: DateTime<Utc>) -> Value {
    let mut p = json!({
        "resolution": if i.is_multiple_of(3) { "drained" } else { "transient_restart" },
        "resolved_at": (first_at + chrono::Duration::minutes(45)).to_rfc3339_opts(SecondsFormat::Secs, true),
        "recovery_minutes": {"detection": 2.0 + (i % 7) as f64, "setup": 12.5},
    });
    if i.is_multiple_of(2) {
        p["root_cause"] = json!({"category": "platform", "component": "driver"});
        p["note"] = json!(format!("ticket PM-{i}: driver reset"));
    }
    p
}

pub async fn run(opts: PostmortemBenchOptions) -> anyhow::Result<String> {
    let db_name = opts.db_name.as_str();
    anyhow::ensure!(
        !db_name.is_empty()
            && db_name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "--db-name must be lower-case letters, digits and underscores: {db_name}"
    );
    let total = opts.nodes as usize * opts.failures_per_node as usize;
    let mut rows = Vec::new();

    // In bulk.
    let app = start(&opts, &format!("{db_name}_bulk")).await?;
    eprintln!(
        "  history: {} failures ingested in {:.1} s",
        app.failures.len(),
        app.ingest_secs
    );
    let t = Instant::now();
    let mut changed = 0;
    for (c, chunk) in app.failures.chunks(opts.batch.max(1)).enumerate() {
        let items: Vec<Value> = chunk
            .iter()
            .enumerate()
            .map(|(k, (id, first_at))| json!({"id": id, "patch": post_mortem(c * opts.batch + k, *first_at)}))
            .collect();
        let res = app
            .http
            .post(format!("{}/v1/failures/lifecycles", app.base))
            .bearer_auth(&app.token)
            .json(&json!({"lifecycles": items}))
            .send()
            .await?;
        anyhow::ensure!(res.status().is_success(), "import: {}", res.text().await?);
        let body: Value = res.json().await?;
        changed += body["changed"].as_u64().unwrap_or(0);
    }
    let bulk_secs = t.elapsed().as_secs_f64();
    anyhow::ensure!(
        changed as usize == app.failures.len(),
        "{changed} of {} imported",
        app.failures.len()
    );
    rows.push(format!(
        "| bulk import, {} per request, 1 client | {} | {:.1} s | {:.0} /s | | |",
        opts.batch,
        app.failures.len(),
        bulk_secs,
        app.failures.len() as f64 / bulk_secs
    ));
    app.server.abort();

    // One PATCH at a time, from `clients` clients, oldest failure first.
    let app = Arc::new(start(&opts, &format!("{db_name}_patch")).await?);
    let next = Arc::new(AtomicUsize::new(0));
    let done: Arc<std::sync::Mutex<Vec<Instant>>> = Arc::default();
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..opts.clients.max(1) {
        let (app, next, done) = (app.clone(), next.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((id, first_at)) = app.failures.get(i) else {
                    return anyhow::Ok(());
                };
                let res = app
                    .http
                    .patch(format!("{}/v1/failures/{id}", app.base))
                    .bearer_auth(&app.token)
                    .json(&post_mortem(i, *first_at))
                    .send()
                    .await?;
                anyhow::ensure!(res.status().is_success(), "PATCH: {}", res.text().await?);
                done.lock().unwrap().push(Instant::now());
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    let patch_secs = t.elapsed().as_secs_f64();
    let mut times = done.lock().unwrap().clone();
    times.sort();
    let n = times.len();
    let k = 1000.min(n / 2).max(1);
    let first_rate = k as f64 / (times[k - 1] - t).as_secs_f64();
    let last_rate = k as f64 / (times[n - 1] - times[n - 1 - k]).as_secs_f64();
    rows.push(format!(
        "| PATCH one at a time, {} clients | {n} | {patch_secs:.1} s | {:.0} /s | {first_rate:.0} /s | {last_rate:.0} /s |",
        opts.clients,
        n as f64 / patch_secs
    ));
    app.server.abort();

    Ok(format!(
        "{total} post-mortems ({} nodes x {} failures, one correlation key each), `failure_lifecycle` analysed while empty\n\n\
         | way | post-mortems | time | rate | rate, first {k} | rate, last {k} |\n|---|---:|---:|---:|---:|---:|\n{}\n",
        opts.nodes,
        opts.failures_per_node,
        rows.join("\n")
    ))
}
