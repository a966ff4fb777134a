//! `faultline bench`: ingest throughput over HTTP and analytics latency over a large simulated
//! fleet, against a real Postgres. Prints a Markdown table (the README's figures come from it).

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};

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
    pub seed: u64,
}

pub async fn run(opts: BenchOptions) -> anyhow::Result<String> {
    let db_name = "faultline_bench";
    {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&with_database(&opts.server_url, "postgres")).await?;
        // Runtime SQL: a database name is an identifier, which cannot be a bound parameter.
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {db_name} WITH (FORCE)"
        )))
        .execute(&mut conn)
        .await?;
    }
    ensure_database(&opts.server_url, db_name).await?;
    let db = crate::storage::connect(&with_database(&opts.server_url, db_name)).await?;
    crate::storage::migrate(&db).await?;

    // Scale the simulated fleet to the requested number of signals: measure a small run first.
    let start = Utc.with_ymd_and_hms(2025, 6, 1, 0, 0, 0).unwrap();
    let days = 365;
    let probe = simulate(&SimConfig {
        seed: opts.seed,
        start,
        days,
        nodes: 256,
    });
    let per_node = probe.events.len() as f64 / 256.0;
    let nodes = ((opts.signals as f64 / per_node).ceil() as u32).max(64);
    let t = Instant::now();
    let fleet = simulate(&SimConfig {
        seed: opts.seed,
        start,
        days,
        nodes,
    });
    let sim_secs = t.elapsed().as_secs_f64();
    eprintln!(
        "simulated {} nodes, {} signals, {} failures in {sim_secs:.1} s",
        fleet.nodes.len(),
        fleet.events.len(),
        fleet.truth.failures
    );

    let token = crate::domain::auth::generate_admin_token();
    let config = AppConfig {
        admin_token: token.clone(),
        limits: Limits::default(),
        correlation_window: Duration::from_secs(600),
        edge: Default::default(),
    };
    let ctx = startup::api_context(config, db.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn(startup::serve(
        listener,
        startup::build_router(ctx),
        std::future::pending(),
    ));
    let client = Client::new(&base, &token)?;

    client.put_nodes(&fleet.nodes, 1000).await?;
    let t = Instant::now();
    let sent = client.post_events(&fleet.events, opts.batch, true).await?;
    let ingest_secs = t.elapsed().as_secs_f64();
    let failures: i64 = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM failures"#)
        .fetch_one(&db)
        .await?;
    sqlx::query!("ANALYZE").execute(&db).await?;

    let http = reqwest::Client::new();
    let end = start + chrono::Duration::days(days.into());
    let full = format!("from={}&to={}", start.to_rfc3339(), end.to_rfc3339()).replace('+', "%2B");
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
        ("failures list, first page", "/v1/failures?limit=100".to_string()),
    ];
    let mut out = String::new();
    out.push_str(&format!(
        "Fleet: {} nodes, {} signals, {} failures over {days} days (seed {}).\n\n",
        fleet.nodes.len(),
        fleet.events.len(),
        failures,
        opts.seed
    ));
    out.push_str(&format!(
        "| measure | value |\n|---|---|\n| ingest over HTTP (batches of {}, with failure folding) | {:.0} signals/s ({:.1} s; {} accepted, {} retries) |\n",
        opts.batch,
        fleet.events.len() as f64 / ingest_secs,
        ingest_secs,
        sent.accepted,
        sent.retries
    ));
    for (name, path) in queries {
        let mut times = Vec::new();
        for _ in 0..7 {
            let t = Instant::now();
            let res = http.get(format!("{base}{path}")).bearer_auth(&token).send().await?;
            anyhow::ensure!(res.status().is_success(), "{path}: {}", res.status());
            res.bytes().await?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        out.push_str(&format!(
            "| {name} | median {:.1} ms, max {:.1} ms (7 runs) |\n",
            times[3], times[6]
        ));
    }
    server.abort();
    db.close().await;
    Ok(out)
}
