//! `faultline bench`: ingest throughput over HTTP and analytics latency over a large simulated
//! fleet, against a real Postgres. Prints a Markdown table (the README's figures come from it).
//!
//! Besides the HTTP figure it measures, from the same run: throughput of the first and the last
//! tenth of the signals (ingest must not slow down as history grows), the raw write limit (`COPY`
//! of the very rows ingest stored into a scratch copy of `events` with the same indexes), the
//! HTTP/COPY ratio, and the storage each signal costs.

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
    pub seed: u64,
}

pub async fn run(opts: BenchOptions) -> anyhow::Result<String> {
    // FAULTLINE_BENCH_DATABASE lets runs on one server not drop each other's database.
    let db_name = std::env::var("FAULTLINE_BENCH_DATABASE").unwrap_or_else(|_| "faultline_bench".into());
    anyhow::ensure!(
        !db_name.is_empty() && db_name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "FAULTLINE_BENCH_DATABASE must be lower-case letters, digits and underscores"
    );
    let db_name = db_name.as_str();
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
    let edge = crate::app::edge::EdgeSettings::default();
    let db = crate::db::pool::connect(&with_database(&opts.server_url, db_name), &edge.pool).await?;

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
        edge,
        // The simulated year lies partly beyond the default retention: keep all of it.
        retention: crate::app::configuration::RetentionSettings {
            signal_retention_days: 0,
            ..Default::default()
        },
    };
    // The same app as `faultline serve` (it migrates the database), on a free port.
    let app = startup::Application::build(config, db.clone(), "127.0.0.1:0".parse()?).await?;
    let base = format!("http://{}", app.local_addr()?);
    let server = tokio::spawn(app.run_until(std::future::pending()));
    let client = Client::new(&base, &token)?;

    client.put_nodes(&fleet.nodes, 1000).await?;
    // The signals are sorted by time, so the tenths are the history in order: the last tenth is
    // ingested on top of nine tenths of stored events and failures. A tenth is a run of whole
    // batches: the batches are split into ten runs as evenly as they go.
    let batch = opts.batch.max(1);
    let batches = fleet.events.len().div_ceil(batch);
    let mut sent = crate::devtools::client::SendTotals::default();
    let mut tenths: Vec<(usize, f64)> = Vec::new();
    let t = Instant::now();
    let parts = batches.clamp(1, 10);
    for i in 0..parts {
        let (from, to) = (
            i * batches / parts * batch,
            ((i + 1) * batches / parts * batch).min(fleet.events.len()),
        );
        let part = &fleet.events[from..to];
        let tt = Instant::now();
        let s = client.post_events(part, batch, false).await?;
        let secs = tt.elapsed().as_secs_f64();
        sent.accepted += s.accepted;
        sent.duplicates += s.duplicates;
        sent.rejected += s.rejected;
        sent.retries += s.retries;
        eprintln!(
            "  tenth {:>2}: {:>8} signals in {secs:>6.1} s = {:>6.0} signals/s",
            i + 1,
            part.len(),
            part.len() as f64 / secs
        );
        tenths.push((part.len(), secs));
    }
    let ingest_secs = t.elapsed().as_secs_f64();
    let rate = |(n, secs): (usize, f64)| n as f64 / secs;
    let first_rate = rate(tenths[0]);
    let last_rate = rate(*tenths.last().expect("at least one tenth"));
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
    out.push_str(&format!(
        "| ingest, first tenth of the history ({} signals) | {first_rate:.0} signals/s |\n\
         | ingest, last tenth of the history ({} signals) | {last_rate:.0} signals/s |\n\
         | last tenth / first tenth (goal: 0.80 or more) | {:.2} |\n\
         | ingest, each tenth in order | {} signals/s |\n",
        tenths[0].0,
        tenths.last().expect("at least one tenth").0,
        last_rate / first_rate,
        tenths
            .iter()
            .map(|&t| format!("{:.0}", rate(t)))
            .collect::<Vec<_>>()
            .join(", ")
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

    let storage = storage_per_signal(&db, sent.accepted).await?;
    out.push_str(&format!(
        "| storage, `events` with its {} indexes (primary key included) | {:.0} bytes/signal, {:.0} bytes/row ({} rows, {:.1} MiB) |\n\
         | storage, `events` + `event_ids` ledger | {:.0} bytes/signal ({:.1} MiB) |\n",
        storage.indexes,
        storage.events_bytes as f64 / storage.signals.max(1) as f64,
        storage.events_bytes as f64 / storage.rows.max(1) as f64,
        storage.rows,
        storage.events_bytes as f64 / 1048576.0,
        (storage.events_bytes + storage.ledger_bytes) as f64 / storage.signals.max(1) as f64,
        (storage.events_bytes + storage.ledger_bytes) as f64 / 1048576.0,
    ));

    let copy = copy_limit(&db).await?;
    let http_rate = fleet.events.len() as f64 / ingest_secs;
    let copy_rate = copy.rows as f64 / copy.secs;
    out.push_str(&format!(
        "| COPY of the same {} stored rows into a copy of `events` (same indexes) | {copy_rate:.0} rows/s ({:.1} s) |\n\
         | HTTP ingest / COPY (signals/s over rows/s; goal 0.8 or more) | {:.2}x |\n",
        copy.rows,
        copy.secs,
        http_rate / copy_rate,
    ));
    db.close().await;
    Ok(out)
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
}

async fn storage_per_signal(db: &sqlx::PgPool, signals: u64) -> anyhow::Result<Storage> {
    let row = sqlx::query!(
        r#"SELECT (SELECT count(*) FROM events) AS "rows!",
                  (SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'events') AS "indexes!",
                  (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('events'))::bigint AS "events_bytes!",
                  pg_total_relation_size('event_ids') AS "ledger_bytes!""#
    )
    .fetch_one(db)
    .await?;
    Ok(Storage {
        signals,
        rows: row.rows,
        indexes: row.indexes,
        events_bytes: row.events_bytes,
        ledger_bytes: row.ledger_bytes,
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
    while let Some(e) = rows.try_next().await? {
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
