//! `faultline bench`: ingest throughput over HTTP and analytics latency over a large simulated
//! fleet, against a real Postgres. Prints a Markdown table (docs/benchmarks.md's figures come from it).
//!
//! Besides the HTTP figure it measures, from the same run: throughput of each time slice of the
//! signals (ingest must not slow down as history grows), the p95 and median of each analytic while
//! the last slice is being ingested and again idle, the raw write limit (`COPY` of the rows ingest
//! stored into a scratch copy of `events` with the same indexes), the HTTP/COPY ratio, and the
//! storage each signal and each failure costs.

use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use futures_util::TryStreamExt;

use crate::app::configuration::{AppConfig, Limits};
use crate::app::startup;
use crate::db::database::{ensure_database, with_database};
use crate::devtools::client::Client;
use crate::devtools::simulate::{SimConfig, simulate};

pub struct BenchOptions {
    pub server_url: String,
    /// Rough number of signals to generate.
    pub signals: usize,
    pub batch: usize,
    /// Requests in flight at once.
    pub senders: usize,
    pub seed: u64,
    /// A fixed fleet of this many nodes, simulated over as many years as the signals need (None:
    /// one year, the fleet sized to the signals).
    pub nodes: Option<u32>,
    /// Database dropped and recreated for the run.
    pub db_name: String,
    /// Citus workers (server URLs): the database is created on each, with the extension, and the
    /// server becomes their coordinator. Empty: one PostgreSQL.
    pub citus_workers: Vec<String>,
    /// Correlation keys per transaction of the catalog rebuild.
    pub rebuild_chunk_keys: usize,
}

/// The fleet is generated in time slices (one `simulate` per slice, each with its own seed and
/// start) and each slice is dropped once sent, so memory stays that of one slice at any size.
/// Slices: 10, or as many as keep one under this many signals.
const SLICE_SIGNALS: usize = 500_000;

/// What autovacuum does in production, after each slice: statistics for the planner and the
/// visibility map for index-only scans. Servers with autovacuum off (this project's CI machines)
/// would otherwise plan every statement of a long run with no statistics at all, and a run that
/// analyzes only at the end measures plans production never chooses. Not counted as ingest time.
async fn maintain(db: &sqlx::PgPool) -> anyhow::Result<()> {
    // Simple protocol: VACUUM cannot run inside the implicit transaction of a prepared statement.
    sqlx::raw_sql("VACUUM (ANALYZE)").execute(db).await?;
    Ok(())
}

/// Samples of each analytic taken after ingest, with nothing else running.
const IDLE_RUNS: usize = 7;

pub async fn run(opts: BenchOptions) -> anyhow::Result<String> {
    let db_name = opts.db_name.as_str();
    anyhow::ensure!(
        !db_name.is_empty()
            && db_name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "--db-name must be lower-case letters, digits and underscores: {db_name}"
    );
    for server in std::iter::once(&opts.server_url).chain(&opts.citus_workers) {
        recreate_database(server, db_name).await?;
    }
    if !opts.citus_workers.is_empty() {
        make_coordinator(&opts.server_url, &opts.citus_workers, db_name).await?;
    }
    let BenchServer {
        base,
        token,
        db,
        server,
    } = serve(
        &opts.server_url,
        db_name,
        Limits {
            rebuild_chunk_keys: opts.rebuild_chunk_keys.max(1),
            ..Limits::default()
        },
    )
    .await?;

    // Scale the simulated fleet (or, for a fixed fleet, the years of history) to the requested
    // number of signals: measure a small year first. The history ends at the same instant either
    // way, and the analytics' year is its last.
    let end = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
    let year = chrono::Duration::days(365);
    let probe = simulate(&SimConfig {
        seed: opts.seed,
        start: end - year,
        days: 365,
        nodes: 256,
    });
    let per_node = probe.events.len() as f64 / 256.0;
    drop(probe);
    let (nodes, days) = match opts.nodes {
        None => (((opts.signals as f64 / per_node).ceil() as u32).max(64), 365),
        Some(n) => {
            let n = n.max(1);
            let years = opts.signals as f64 / (per_node * f64::from(n));
            (n, ((years * 365.0).ceil() as u32).max(365))
        }
    };
    let start = end - chrono::Duration::days(days.into());
    let slices = opts.signals.div_ceil(SLICE_SIGNALS).max(10) as u32;
    let slice = |i: u32| -> SimConfig {
        // Whole days per slice, the remainder spread over the first ones.
        let offset = i * (days / slices) + i.min(days % slices);
        SimConfig {
            seed: opts.seed.wrapping_add(u64::from(i) * 1_000_003),
            start: start + chrono::Duration::days(offset.into()),
            days: days / slices + u32::from(i < days % slices),
            nodes,
        }
    };

    let client = Client::new(&base, &token)?;
    // The history's monthly partitions first, as a site loading years of history would: created
    // on demand instead, each month's DDL waits for the open ingest transactions (on Citus, on
    // every shard), and ingest queues behind it.
    crate::storage::partitions::ensure_range(&db, start, end + chrono::Duration::days(1)).await?;

    // Slices are sent in time order, each in batches, one after the other; the last one while the
    // analytics are measured. The inventory is the first slice's, in service all year (hostnames
    // and groups depend on the fleet size only, so every slice names the same nodes).
    let batch = opts.batch.max(1);
    let senders = opts.senders.max(1);
    let mut sent = crate::devtools::client::SendTotals::default();
    let mut rates: Vec<(usize, f64)> = Vec::new();
    let mut signals = 0usize;
    let mut sim_secs = 0.0;
    let mut maintenance_secs = 0.0;
    let t_ingest = Instant::now();
    let mut last: Option<Vec<serde_json::Value>> = None;
    for i in 0..slices {
        let t = Instant::now();
        let fleet = simulate(&slice(i));
        sim_secs += t.elapsed().as_secs_f64();
        if i == 0 {
            let inventory: Vec<serde_json::Value> = fleet
                .nodes
                .iter()
                .cloned()
                .map(|mut n| {
                    if let Some(o) = n.as_object_mut() {
                        o.remove("retired_at");
                    }
                    n
                })
                .collect();
            client.put_nodes(&inventory, 1000).await?;
        }
        signals += fleet.events.len();
        if i + 1 == slices {
            last = Some(fleet.events);
            break;
        }
        let t = Instant::now();
        let s = client.post_events(&fleet.events, batch, senders, false).await?;
        let secs = t.elapsed().as_secs_f64();
        add(&mut sent, s);
        eprintln!(
            "  slice {:>2}/{slices}: {:>8} signals in {secs:>6.1} s = {:>6.0} signals/s",
            i + 1,
            fleet.events.len(),
            fleet.events.len() as f64 / secs
        );
        rates.push((fleet.events.len(), secs));
        let t = Instant::now();
        maintain(&db).await?;
        maintenance_secs += t.elapsed().as_secs_f64();
    }
    let ingest_before_last = t_ingest.elapsed().as_secs_f64() - sim_secs - maintenance_secs;

    let full = format!("from={}&to={}", (end - year).to_rfc3339(), end.to_rfc3339()).replace('+', "%2B");
    let week = format!(
        "from={}&to={}",
        (end - chrono::Duration::days(7)).to_rfc3339(),
        end.to_rfc3339()
    )
    .replace('+', "%2B");
    let queries = [
        (
            "failure-mix by generation, 365 days",
            format!("/v1/analytics/failure-mix?by=gpu_generation&{full}"),
        ),
        (
            "failure-mix by generation, 7 days",
            format!("/v1/analytics/failure-mix?by=gpu_generation&{week}"),
        ),
        (
            "mtbf per 128-GPU group, 365 days",
            format!("/v1/analytics/mtbf?group_size=128&job_gpus=1024&{full}"),
        ),
        ("root-causes, 365 days", format!("/v1/analytics/root-causes?{full}")),
        ("timeline per day, 365 days", format!("/v1/analytics/timeline?{full}")),
        ("top-errors, 365 days", format!("/v1/analytics/top-errors?{full}")),
        ("failures list, first page", "/v1/failures?limit=100".to_string()),
        (
            "availability per week by generation, 365 days",
            format!("/v1/analytics/availability?by=generation&period=week&{full}"),
        ),
        (
            "repair pipeline, 365 days",
            format!("/v1/analytics/repair-pipeline?{full}"),
        ),
        ("fleet now", "/v1/fleet/now".to_string()),
    ];
    let drains = drain_after_hardware_failures(&db, &base, &token, end - year).await?;
    let http = reqwest::Client::new();
    let sample = |path: String| {
        let (http, url, token) = (http.clone(), format!("{base}{path}"), token.clone());
        async move {
            let t = Instant::now();
            let res = http.get(&url).bearer_auth(&token).send().await?;
            anyhow::ensure!(res.status().is_success(), "{url}: {}", res.status());
            res.bytes().await?;
            Ok::<f64, anyhow::Error>(t.elapsed().as_secs_f64() * 1000.0)
        }
    };

    // The last slice goes in on its own task while the analytics are sampled in turn, for as long
    // as it runs.
    let last = last.expect("at least one slice");
    let last_len = last.len();
    let ingest = {
        let client = Client::new(&base, &token)?;
        tokio::spawn(async move {
            let t = Instant::now();
            let s = client.post_events(&last, batch, senders, false).await;
            (s, t.elapsed().as_secs_f64())
        })
    };
    let mut busy: Vec<Vec<f64>> = vec![Vec::new(); queries.len()];
    while !ingest.is_finished() {
        for (q, (_, path)) in queries.iter().enumerate() {
            busy[q].push(sample(path.clone()).await?);
        }
    }
    let (s, last_secs) = ingest.await?;
    add(&mut sent, s?);
    rates.push((last_len, last_secs));
    eprintln!("  slice {slices:>2}/{slices}: {last_len:>8} signals in {last_secs:>6.1} s, analytics sampled meanwhile");
    let mut idle: Vec<Vec<f64>> = vec![Vec::new(); queries.len()];
    for (q, (_, path)) in queries.iter().enumerate() {
        for _ in 0..IDLE_RUNS {
            idle[q].push(sample(path.clone()).await?);
        }
    }
    // A catalog edit under ingest: more signals of the last weeks (a slice of its own seed), half
    // sent quietly, half while the edit's rebuild runs.
    let extra = simulate(&SimConfig {
        seed: opts.seed.wrapping_add(999_983),
        start: end - chrono::Duration::days(21),
        days: 20,
        nodes,
    });
    let edit = catalog_edit_under_ingest(&base, &token, &extra.events).await?;
    server.abort();
    let alerting = alert_evaluation(&db, end).await?;

    let failures: i64 = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM failures"#)
        .fetch_one(&db)
        .await?;
    let rate = |(n, secs): (usize, f64)| n as f64 / secs;
    let first_rate = rate(rates[0]);
    let steady = &rates[..rates.len() - 1];
    let last_steady = rate(*steady.last().unwrap_or(&rates[0]));
    let steady_signals: usize = steady.iter().map(|r| r.0).sum();
    let mut out = String::new();
    out.push_str(&format!(
        "Fleet: {nodes} nodes, {signals} signals, {failures} failures over {days} days (seed {}, {slices} slices \
         simulated in {sim_secs:.0} s; `VACUUM (ANALYZE)` after each slice, as autovacuum would, {maintenance_secs:.0} s \
         in all, not counted as ingest).\n\n",
        opts.seed,
    ));
    out.push_str(&format!(
        "| measure | value |\n|---|---|\n| ingest over HTTP (batches of {batch}, {senders} in flight, with failure folding and rollups), all but the last slice | {:.0} signals/s ({steady_signals} signals, {ingest_before_last:.1} s; {} accepted in all, {} retries) |\n\
         | ingest, first slice | {first_rate:.0} signals/s |\n\
         | ingest, last slice before the analytics ran | {last_steady:.0} signals/s |\n\
         | last / first (goal: 0.80 or more) | {:.2} |\n\
         | ingest of the last slice while the analytics were sampled | {:.0} signals/s ({last_len} signals) |\n\
         | ingest, each slice in order | {} signals/s |\n",
        steady_signals as f64 / ingest_before_last.max(1e-9),
        sent.accepted,
        sent.retries,
        last_steady / first_rate,
        rate(rates[rates.len() - 1]),
        rates
            .iter()
            .map(|&t| format!("{:.0}", rate(t)))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    for (q, (name, _)) in queries.iter().enumerate() {
        let b = summary(&mut busy[q]);
        let i = summary(&mut idle[q]);
        out.push_str(&format!(
            "| {name} | during ingest: p95 {:.1} ms, median {:.1} ms ({} runs); idle: p95 {:.1} ms, median {:.1} ms ({} runs) |\n",
            b.p95, b.median, b.runs, i.p95, i.median, i.runs
        ));
    }

    out.push_str(&format!(
        "| drains recorded through `POST /v1/nodes/{{cluster}}/{{hostname}}/state` before the analytics (the latest hardware failures of the year: drained 30 min after the first signal with the failure, returned 4 h after it; 8 in flight) | {} drains and returns in {:.1} s |\n",
        drains.0, drains.1
    ));
    out.push_str(&edit.table_rows());
    out.push_str(&alerting);
    let citus = !opts.citus_workers.is_empty();
    if citus {
        let shards = crate::storage::distribution::distribute(&db)
            .await?
            .shard_count
            .unwrap_or(0);
        out.push_str(&format!(
            "| Citus | a coordinator and {} workers; every per-cluster table in {shards} shards by cluster |\n",
            opts.citus_workers.len()
        ));
        db.close().await;
        return Ok(out);
    }
    let storage = storage_per_signal(&db, sent.accepted).await?;
    out.push_str(&format!(
        "| storage, `events` with its {} indexes (primary key included) | {:.0} bytes/signal, {:.0} bytes/row ({} rows, {:.1} MiB) |\n\
         | storage, `events` + `event_ids` ledger | {:.0} bytes/signal ({:.1} MiB) |\n\
         | storage, `failures` with its indexes | {:.0} bytes/failure ({:.1} MiB) |\n\
         | storage, rollups (`rollup_causes`, `rollup_groups`, `rollup_errors`, indexes included) | {} rows, {:.1} MiB ({:.0} bytes/failure) |\n",
        storage.indexes,
        storage.events_bytes as f64 / storage.signals.max(1) as f64,
        storage.events_bytes as f64 / storage.rows.max(1) as f64,
        storage.rows,
        storage.events_bytes as f64 / 1048576.0,
        (storage.events_bytes + storage.ledger_bytes) as f64 / storage.signals.max(1) as f64,
        (storage.events_bytes + storage.ledger_bytes) as f64 / 1048576.0,
        storage.failures_bytes as f64 / failures.max(1) as f64,
        storage.failures_bytes as f64 / 1048576.0,
        storage.rollup_rows,
        storage.rollup_bytes as f64 / 1048576.0,
        storage.rollup_bytes as f64 / failures.max(1) as f64,
    ));

    let copy = copy_limit(&db).await?;
    let http_rate = steady_signals as f64 / ingest_before_last.max(1e-9);
    let copy_rate = copy.rows as f64 / copy.secs;
    out.push_str(&format!(
        "| COPY of {} stored rows (at most {COPY_ROWS}) into a copy of `events` (same indexes) | {copy_rate:.0} rows/s ({:.1} s) |\n\
         | HTTP ingest / COPY (signals/s over rows/s; goal 0.8 or more) | {:.2}x |\n",
        copy.rows,
        copy.secs,
        http_rate / copy_rate,
    ));
    db.close().await;
    Ok(out)
}

/// Most drains the bench records for the availability figures.
const BENCH_DRAINS: i64 = 2_000;

/// Drains the root node of each of the latest hardware failures since `since` (at most
/// [`BENCH_DRAINS`]) through the API, as an operator or a scheduler hook would, so that the
/// availability and repair-pipeline figures have a ledger to read. Returns (drains, seconds).
async fn drain_after_hardware_failures(
    db: &sqlx::PgPool,
    base: &str,
    token: &str,
    since: DateTime<Utc>,
) -> anyhow::Result<(usize, f64)> {
    let failures = sqlx::query!(
        r#"SELECT id, cluster, root_node AS "root_node!", first_at FROM failures
           WHERE category = 'hardware' AND root_node IS NOT NULL AND first_at >= $1
           ORDER BY first_at DESC LIMIT $2"#,
        since,
        BENCH_DRAINS,
    )
    .fetch_all(db)
    .await?;
    // Each node's drain and return in order, through the client the simulator sends with; the
    // failures split among 8 senders.
    let states: Vec<[serde_json::Value; 2]> = failures
        .iter()
        .map(|f| {
            let node = |state: &str, at: DateTime<Utc>| {
                serde_json::json!({"cluster": f.cluster, "hostname": f.root_node, "state": state, "at": at})
            };
            let mut drained = node("drained", f.first_at + chrono::Duration::minutes(30));
            drained["failure_id"] = serde_json::json!(f.id);
            [drained, node("returned", f.first_at + chrono::Duration::hours(4))]
        })
        .collect();
    let client = Client::new(base, token)?;
    let t = Instant::now();
    let senders = states
        .chunks(states.len().div_ceil(8).max(1))
        .map(|chunk| client.post_node_states(chunk.as_flattened()));
    for sent in futures_util::future::join_all(senders).await {
        sent?;
    }
    Ok((failures.len(), t.elapsed().as_secs_f64()))
}

/// Drops database `db_name` of `server_url` if it exists and creates it empty.
pub(crate) async fn recreate_database(server_url: &str, db_name: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&with_database(server_url, "postgres")).await?;
    // Runtime SQL: a database name is an identifier, which cannot be a bound parameter.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {db_name} WITH (FORCE)"
    )))
    .execute(&mut conn)
    .await?;
    drop(conn);
    ensure_database(server_url, db_name).await?;
    Ok(())
}

/// The app a benchmark measures, serving on a free port.
pub(crate) struct BenchServer {
    pub base: String,
    pub token: String,
    pub db: sqlx::PgPool,
    pub server: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// The same app as `faultline serve` (it migrates the database) on `db_name`, with a generated
/// admin token. Without the per-token rate limit: a benchmark measures what the server can serve
/// (its sampler, one token asking as fast as answers come, passed 100 requests/s once the analytics
/// answered from memory). Signals are kept forever: simulated histories lie partly beyond the
/// default retention.
pub(crate) async fn serve(server_url: &str, db_name: &str, limits: Limits) -> anyhow::Result<BenchServer> {
    let edge = crate::app::edge::EdgeSettings {
        rate_limit: crate::http::rate_limit::RateLimitSettings {
            rate_limit_per_token_rps: 0.0,
            ..Default::default()
        },
        ..Default::default()
    };
    let db = crate::db::pool::connect(&with_database(server_url, db_name), &edge.pool).await?;
    let token = crate::domain::auth::generate_admin_token();
    let config = AppConfig {
        admin_token: token.clone(),
        limits,
        correlation_window: Duration::from_secs(600),
        edge,
        retention: crate::app::configuration::RetentionSettings {
            signal_retention_days: 0,
            ..Default::default()
        },
        alerts: Default::default(),
    };
    let app = startup::Application::build(config, db.clone(), "127.0.0.1:0".parse()?).await?;
    let base = format!("http://{}", app.local_addr()?);
    let server = tokio::spawn(app.run_until(std::future::pending()));
    Ok(BenchServer {
        base,
        token,
        db,
        server,
    })
}

/// Signals per batch of the catalog-edit probe: an agent's batch, not the bulk loader's.
const PROBE_BATCH: usize = 500;

/// Ingest latency and rate without and with a catalog rebuild running, and the rebuild's rate.
struct EditProbe {
    quiet: Vec<f64>,
    quiet_signals: usize,
    quiet_secs: f64,
    during: Vec<f64>,
    during_signals: usize,
    during_secs: f64,
    edit_ms: f64,
    rebuild: serde_json::Value,
    rebuild_ran_throughout: bool,
}

impl EditProbe {
    fn table_rows(&self) -> String {
        let line = |lat: &[f64], signals: usize, secs: f64| {
            let mut lat = lat.to_vec();
            lat.sort_by(f64::total_cmp);
            let at = |q: f64| lat[((q * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1];
            format!(
                "{:.0} signals/s; batch p50 {:.0} ms, p99 {:.0} ms ({} batches)",
                signals as f64 / secs.max(1e-9),
                at(0.5),
                at(0.99),
                lat.len()
            )
        };
        let r = &self.rebuild;
        format!(
            "| ingest, batches of {PROBE_BATCH} one after the other, no edit | {} |\n\
             | catalog edit (a lexicon term) answered | {:.0} ms (202; the rebuild runs in the background) |\n\
             | ingest, the same batches while the rebuild runs{} | {} |\n\
             | catalog rebuild | {} failures ({} changed) in {} chunks, {:.0} failures/s |\n",
            line(&self.quiet, self.quiet_signals, self.quiet_secs),
            self.edit_ms,
            if self.rebuild_ran_throughout {
                ""
            } else {
                " (it ended before the last batch)"
            },
            line(&self.during, self.during_signals, self.during_secs),
            r["done"],
            r["changed"],
            r["chunks"],
            r["failures_per_second"].as_f64().unwrap_or(f64::NAN),
        )
    }
}

/// Sends `events` in [`PROBE_BATCH`]es one after the other; each batch's latency in ms.
async fn timed_batches(client: &Client, events: &[serde_json::Value]) -> anyhow::Result<(Vec<f64>, f64)> {
    let t = Instant::now();
    let mut latencies = Vec::new();
    for batch in events.chunks(PROBE_BATCH) {
        let b = Instant::now();
        client.post_events(batch, PROBE_BATCH, 1, false).await?;
        latencies.push(b.elapsed().as_secs_f64() * 1000.0);
    }
    Ok((latencies, t.elapsed().as_secs_f64()))
}

async fn catalog_edit_under_ingest(base: &str, token: &str, events: &[serde_json::Value]) -> anyhow::Result<EditProbe> {
    let client = Client::new(base, token)?;
    let (quiet_events, during_events) = events.split_at(events.len() / 2);
    let (quiet, quiet_secs) = timed_batches(&client, quiet_events).await?;
    let http = reqwest::Client::new();
    let t = Instant::now();
    let res = http
        .put(format!("{base}/v1/classification-terms/benchfs"))
        .bearer_auth(token)
        .json(&serde_json::json!({"kind": "component", "component": "storage", "weight": 4, "source": "bench"}))
        .send()
        .await?;
    let edit_ms = t.elapsed().as_secs_f64() * 1000.0;
    anyhow::ensure!(
        res.status().as_u16() == 202,
        "the catalog edit answered {}",
        res.status()
    );
    let version = res.json::<serde_json::Value>().await?["catalog_version"]
        .as_i64()
        .unwrap_or_default();
    let status = |http: reqwest::Client| async move {
        let res = http
            .get(format!("{base}/v1/catalog/rebuilds/{version}"))
            .bearer_auth(token)
            .send()
            .await?;
        Ok::<serde_json::Value, anyhow::Error>(res.json::<serde_json::Value>().await?)
    };
    let (during, during_secs) = timed_batches(&client, during_events).await?;
    let rebuild_ran_throughout = status(http.clone()).await?["state"] == "running";
    let rebuild = loop {
        let s = status(http.clone()).await?;
        if s["state"] != "running" {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    Ok(EditProbe {
        quiet,
        quiet_signals: quiet_events.len(),
        quiet_secs,
        during,
        during_signals: during_events.len(),
        during_secs,
        edit_ms,
        rebuild,
        rebuild_ran_throughout,
    })
}

/// Makes the server's `db_name` the coordinator of the same database on `workers`: the `citus`
/// extension in each, the coordinator's own address, and the workers (as the coordinator reaches
/// them). The app's migrate then distributes the tables.
async fn make_coordinator(server_url: &str, workers: &[String], db_name: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let host_port = |url: &str| -> anyhow::Result<(String, i32)> {
        let parsed = reqwest::Url::parse(url)?;
        Ok((
            parsed.host_str().unwrap_or("127.0.0.1").to_string(),
            i32::from(parsed.port().unwrap_or(5432)),
        ))
    };
    for server in std::iter::once(server_url).chain(workers.iter().map(String::as_str)) {
        let pool = crate::db::pool::connect(&with_database(server, db_name), &Default::default()).await?;
        crate::storage::distribution::create_citus_extension(&pool).await?;
        pool.close().await;
    }
    let mut coordinator = sqlx::PgConnection::connect(&with_database(server_url, db_name)).await?;
    let (host, port) = host_port(server_url)?;
    let workers = workers
        .iter()
        .map(|w| host_port(w))
        .collect::<anyhow::Result<Vec<_>>>()?;
    crate::storage::distribution::add_workers(&mut coordinator, (&host, port), &workers).await?;
    Ok(())
}

fn add(total: &mut crate::devtools::client::SendTotals, s: crate::devtools::client::SendTotals) {
    total.accepted += s.accepted;
    total.duplicates += s.duplicates;
    total.rejected += s.rejected;
    total.retries += s.retries;
}

/// One rule of each kind (no receivers), evaluated over every cluster as of the history's end:
/// the first pass writes the alerts, the next ones are what each evaluation interval costs.
async fn alert_evaluation(db: &sqlx::PgPool, end: chrono::DateTime<Utc>) -> anyhow::Result<String> {
    use crate::domain::alert::{Condition, RuleSpec, SilenceScope};
    let actor = crate::domain::audit::Actor {
        token_id: None,
        name: "bench".into(),
    };
    let conditions = [
        Condition::LemonNode {
            alpha: 0.05,
            window_hours: 720.0,
            category: crate::domain::taxonomy::LemonCategory::All,
        },
        Condition::BadPartOrSlot { alpha: 0.05 },
        Condition::MtbfBelow {
            hours: 24.0,
            window_hours: 720.0,
            group_size: 128,
        },
        Condition::FailureRateUp { window_hours: 168.0 },
        Condition::NewFailureKind { days: Some(30) },
        Condition::Silence {
            minutes: 15.0,
            scope: SilenceScope::Node,
        },
        Condition::RecoverySlow {
            minutes: 60.0,
            window_hours: 168.0,
        },
        Condition::AvailabilityBelow {
            share: 0.95,
            window_hours: 168.0,
        },
        Condition::StuckRepair { window_hours: 720.0 },
    ];
    let kinds = conditions.len();
    for c in conditions {
        let spec: RuleSpec = serde_json::from_value(serde_json::json!({"condition": c}))?;
        crate::ingest::alerts::put_alert_rule(db, &actor, &format!("bench-{}", c.kind()), &spec).await?;
    }
    let mut samples = Vec::new();
    let mut first = None;
    for _ in 0..IDLE_RUNS {
        let t = Instant::now();
        let pass = crate::alerting::evaluation::evaluate(db, "http://bench", chrono::Duration::minutes(4), end).await?;
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
        first.get_or_insert(pass);
    }
    let first = first.unwrap_or_default();
    let s = summary(&mut samples[1..]);
    Ok(format!(
        "| alert evaluation: one rule of each of the {kinds} kinds over every cluster (as of the history's end) | first pass {:.0} ms ({} alerts fired, {} evaluation errors); then p95 {:.1} ms, median {:.1} ms ({} runs) |\n",
        samples[0], first.fired, first.errors, s.p95, s.median, s.runs
    ))
}

struct Summary {
    runs: usize,
    median: f64,
    p95: f64,
}

/// Median and 95th percentile (nearest rank) of the samples.
fn summary(samples: &mut [f64]) -> Summary {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if samples.is_empty() {
            f64::NAN
        } else {
            samples[((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1]
        }
    };
    Summary {
        runs: samples.len(),
        median: at(0.5),
        p95: at(0.95),
    }
}

/// Storage cost of what ingest stored: `events` (heap, TOAST and all its indexes) and the
/// `event_ids` idempotency ledger, per accepted signal and per stored row (bursts fold several
/// signals into one row).
struct Storage {
    signals: u64,
    rows: i64,
    indexes: i64,
    events_bytes: i64,
    ledger_bytes: i64,
    failures_bytes: i64,
    rollup_rows: i64,
    rollup_bytes: i64,
}

async fn storage_per_signal(db: &sqlx::PgPool, signals: u64) -> anyhow::Result<Storage> {
    let row = sqlx::query!(
        r#"SELECT (SELECT count(*) FROM events) AS "rows!",
                  (SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'events') AS "indexes!",
                  (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('events'))::bigint AS "events_bytes!",
                  pg_total_relation_size('event_ids') AS "ledger_bytes!",
                  pg_total_relation_size('failures') AS "failures_bytes!",
                  (SELECT count(*) FROM rollup_causes) + (SELECT count(*) FROM rollup_groups)
                      + (SELECT count(*) FROM rollup_errors) AS "rollup_rows!",
                  pg_total_relation_size('rollup_causes') + pg_total_relation_size('rollup_groups')
                      + pg_total_relation_size('rollup_errors') AS "rollup_bytes!""#
    )
    .fetch_one(db)
    .await?;
    Ok(Storage {
        signals,
        rows: row.rows,
        indexes: row.indexes,
        events_bytes: row.events_bytes,
        ledger_bytes: row.ledger_bytes,
        failures_bytes: row.failures_bytes,
        rollup_rows: row.rollup_rows,
        rollup_bytes: row.rollup_bytes,
    })
}

/// One stored event, every column of `events`, in the order of [`COPY_EVENTS`].
struct StoredEvent {
    id: uuid::Uuid,
    occurred_at: DateTime<Utc>,
    received_at: DateTime<Utc>,
    cluster: String,
    node: Option<String>,
    gpu_index: Option<i32>,
    gpu_uuid: Option<String>,
    gpu_model: Option<String>,
    job_id: Option<String>,
    job_gpus: Option<i32>,
    kind: String,
    code: Option<i64>,
    symptom: Option<String>,
    rc_category: Option<String>,
    rc_component: Option<String>,
    message: Option<String>,
    attributes: serde_json::Value,
    repeat_count: i32,
    last_occurred_at: Option<DateTime<Utc>>,
}

// Runtime SQL: DDL and COPY cannot go through the compile-checked macros (COPY is not a
// preparable statement; the scratch table does not exist when the macros check queries).
// Both are static strings without any input in them.
const CREATE_SCRATCH: &str = "DROP TABLE IF EXISTS bench_copy; CREATE TABLE bench_copy (LIKE events INCLUDING ALL)";
const DROP_SCRATCH: &str = "DROP TABLE bench_copy";
const COPY_EVENTS: &str = "COPY bench_copy (id, occurred_at, received_at, cluster, node, gpu_index, gpu_uuid, \
     gpu_model, job_id, job_gpus, kind, code, symptom, rc_category, rc_component, message, attributes, \
     repeat_count, last_occurred_at) FROM STDIN (FORMAT text)";

/// Rows the COPY measure encodes in memory at most (the rest of a 10 M run would need gigabytes).
const COPY_ROWS: u64 = 1_000_000;

struct CopyRun {
    rows: u64,
    secs: f64,
}

/// The raw write limit: the rows ingest stored, encoded by hand in COPY text format (not timed),
/// then sent with one `COPY ... FROM STDIN` into `bench_copy`, which has the columns, defaults,
/// constraints and all the indexes of `events` (timed: from COPY to its completion).
async fn copy_limit(db: &sqlx::PgPool) -> anyhow::Result<CopyRun> {
    let mut data: Vec<u8> = Vec::new();
    let mut rows = sqlx::query_as!(
        StoredEvent,
        "SELECT id, occurred_at, received_at, cluster, node, gpu_index, gpu_uuid, gpu_model, job_id, \
         job_gpus, kind, code, symptom, rc_category, rc_component, message, attributes, repeat_count, \
         last_occurred_at FROM events"
    )
    .fetch(db);
    let mut encoded = 0u64;
    while encoded < COPY_ROWS
        && let Some(e) = rows.try_next().await?
    {
        encode_row(&mut data, &e);
        encoded += 1;
    }
    drop(rows);

    let mut conn = db.acquire().await?;
    sqlx::raw_sql(CREATE_SCRATCH).execute(&mut *conn).await?;
    let t = Instant::now();
    let mut copy = conn.copy_in_raw(COPY_EVENTS).await?;
    for chunk in data.chunks(1 << 20) {
        copy.send(chunk).await?;
    }
    let copied = copy.finish().await?;
    let secs = t.elapsed().as_secs_f64();
    anyhow::ensure!(copied == encoded, "COPY stored {copied} rows of {encoded}");
    sqlx::raw_sql(DROP_SCRATCH).execute(&mut *conn).await?;
    Ok(CopyRun { rows: copied, secs })
}

/// One line of COPY text format: tab-separated, `\N` for NULL, backslash escapes in text.
fn encode_row(out: &mut Vec<u8>, e: &StoredEvent) {
    let ts = |t: &DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::AutoSi, true);
    let fields: [Option<String>; 19] = [
        Some(e.id.to_string()),
        Some(ts(&e.occurred_at)),
        Some(ts(&e.received_at)),
        Some(e.cluster.clone()),
        e.node.clone(),
        e.gpu_index.map(|v| v.to_string()),
        e.gpu_uuid.clone(),
        e.gpu_model.clone(),
        e.job_id.clone(),
        e.job_gpus.map(|v| v.to_string()),
        Some(e.kind.clone()),
        e.code.map(|v| v.to_string()),
        e.symptom.clone(),
        e.rc_category.clone(),
        e.rc_component.clone(),
        e.message.clone(),
        Some(e.attributes.to_string()),
        Some(e.repeat_count.to_string()),
        e.last_occurred_at.as_ref().map(ts),
    ];
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b'\t');
        }
        match f {
            None => out.extend_from_slice(b"\\N"),
            Some(text) => escape_copy_text(out, text),
        }
    }
    out.push(b'\n');
}

fn escape_copy_text(out: &mut Vec<u8>, text: &str) {
    for &b in text.as_bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_text_escapes_separators_and_backslashes() {
        let mut out = Vec::new();
        escape_copy_text(&mut out, "a\tb\nc\\d\re");
        // Each special byte becomes a backslash and a letter; a backslash is doubled.
        assert_eq!(out, b"a\\tb\\nc\\\\d\\re");
    }
}
