//! `faultline bench-parts`: GPU parts at fleet scale, against a real Postgres, each part on its own
//! database (dropped and recreated) served by the same app as `faultline serve`.
//!
//! (a) Inventory: 12,500 nodes x 8 GPUs posted through `PUT /v1/gpus/inventory` in batches, timed;
//!     then posted again unchanged, which must write nothing (the answers' counts, and the rows whose
//!     `xmin` is newer than the re-post).
//! (b) History: a Titan-sized record imported through `POST /v1/gpus/history` (30,000 parts, 40,000
//!     placements, 6,000 removals) with 6,000 hard failures sent as XID 79 signals through
//!     `/v1/events` naming node and GPU index inside the placements; then
//!     `GET /v1/analytics/survival` by generation, model, cluster and `attribute:lot`, timed, with
//!     the time of each read `Fleet::load` makes beside it (the SQL against the Rust part); the
//!     first answer after a write; and the first answer after a start, straight away and a second
//!     later (each start with nothing kept, as a new process).

use std::time::Instant;

use chrono::{DateTime, Duration, SecondsFormat, TimeZone, Utc};
use serde_json::{Value, json};

use crate::app::configuration::Limits;

pub struct PartsBenchOptions {
    pub server_url: String,
    pub nodes: u32,
    /// Nodes per inventory request.
    pub batch: usize,
    /// Survival requests per grouping.
    pub samples: usize,
    /// Prefix of the two databases (`_inventory`, `_history`).
    pub db_name: String,
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    token: &str,
    body: &Value,
) -> anyhow::Result<Value> {
    let res = http.request(method, &url).bearer_auth(token).json(body).send().await?;
    let status = res.status();
    let text = res.text().await?;
    anyhow::ensure!(status.is_success(), "{url}: {status}: {}", &text[..text.len().min(600)]);
    Ok(serde_json::from_str(&text)?)
}

/// A small deterministic generator (splitmix64), enough for a benchmark's layout.
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const PCI: [&str; 8] = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"];

/// Milliseconds to a successful answer of a GET, its body read.
async fn timed_get(http: &reqwest::Client, url: &str, token: &str) -> anyhow::Result<f64> {
    let t = Instant::now();
    let res = http.get(url).bearer_auth(token).send().await?;
    anyhow::ensure!(res.status().is_success(), "{url}: {}", res.status());
    res.bytes().await?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// A table row of a measure's p50 and p95 over `times` (milliseconds), `n` of `what`.
fn timing_row(measure: &str, what: &str, times: &mut [f64]) -> String {
    times.sort_by(f64::total_cmp);
    format!(
        "| {measure}, {} {what} | p50 {:.0} ms, p95 {:.0} ms |",
        times.len(),
        percentile(times, 0.5),
        percentile(times, 0.95)
    )
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// (a) The inventory of `nodes` x 8 GPUs, then the same again.
async fn inventory(opts: &PartsBenchOptions, rows: &mut Vec<String>) -> anyhow::Result<()> {
    let db_name = format!("{}_inventory", opts.db_name);
    crate::devtools::bench::recreate_database(&opts.server_url, &db_name).await?;
    let app = crate::devtools::bench::serve(&opts.server_url, &db_name, Limits::default()).await?;
    let http = reqwest::Client::new();
    let at = ts(Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap());
    let reports: Vec<Value> = (0..opts.nodes)
        .map(|n| {
            let gpus: Vec<Value> = (0..8u32)
                .map(|g| {
                    let serial = format!("{}", 1_320_000_000_000u64 + u64::from(n) * 8 + u64::from(g));
                    json!({"index": g, "pci_bus_id": format!("00000000:{}:00.0", PCI[g as usize]),
                           "uuid": format!("GPU-{}", uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, serial.as_bytes())),
                           "serial": serial, "model": "NVIDIA H100 80GB HBM3", "vbios": "96.00.89.00.01",
                           "driver": "550.54.15"})
                })
                .collect();
            json!({"cluster": format!("c{}", n % 4), "hostname": format!("node{n:05}"), "observed_at": at, "gpus": gpus})
        })
        .collect();
    let url = format!("{}/v1/gpus/inventory", app.base);
    let pass = |label: &'static str| {
        let (http, url, token, reports) = (&http, &url, &app.token, &reports);
        async move {
            let t = Instant::now();
            let mut sum = [0u64; 3];
            for chunk in reports.chunks(opts.batch.max(1)) {
                let a = send(http, reqwest::Method::PUT, url.clone(), token, &json!({"nodes": chunk})).await?;
                anyhow::ensure!(a["rejected"].as_array().is_none_or(|r| r.is_empty()), "{label}: {a}");
                for (i, k) in ["opened", "closed", "parts_written"].iter().enumerate() {
                    sum[i] += a[k].as_u64().unwrap_or(0);
                }
            }
            anyhow::Ok((t.elapsed().as_secs_f64(), sum))
        }
    };
    let (secs, first) = pass("first").await?;
    let gpus = opts.nodes as usize * 8;
    rows.push(format!(
        "| inventory of {} nodes x 8 GPUs ({gpus} GPUs), {} nodes per request | {secs:.1} s ({:.0} GPUs/s); opened {}, parts written {} |",
        opts.nodes,
        opts.batch,
        gpus as f64 / secs,
        first[0],
        first[2]
    ));
    // Rows written by the re-post: those whose xmin is at or after a transaction id taken before it
    // (a fresh database: no xid wraparound to mind).
    let before: i64 = sqlx::query_scalar!(r#"SELECT (pg_current_xact_id()::text::bigint % 4294967296) AS "xid!""#)
        .fetch_one(&app.db)
        .await?;
    let (secs, again) = pass("again").await?;
    let touched: i64 = sqlx::query_scalar!(
        r#"SELECT (SELECT count(*) FROM gpu_parts WHERE xmin::text::bigint >= $1)
              + (SELECT count(*) FROM gpu_placements WHERE xmin::text::bigint >= $1) AS "touched!""#,
        before,
    )
    .fetch_one(&app.db)
    .await?;
    rows.push(format!(
        "| the same inventory again, unchanged | {secs:.1} s ({:.0} GPUs/s); opened {}, closed {}, parts written {}; rows with a newer xmin: {touched} |",
        gpus as f64 / secs,
        again[0],
        again[1],
        again[2]
    ));
    app.server.abort();
    Ok(())
}

/// (b) A Titan-sized history and the survival analysis over it.
async fn history(opts: &PartsBenchOptions, rows: &mut Vec<String>) -> anyhow::Result<()> {
    let db_name = format!("{}_history", opts.db_name);
    crate::devtools::bench::recreate_database(&opts.server_url, &db_name).await?;
    let app = crate::devtools::bench::serve(&opts.server_url, &db_name, Limits::default()).await?;
    let http = reqwest::Client::new();
    let mut rng = Mix(7);
    const NODES: usize = 3_000;
    const SLOTS: usize = NODES * 8;
    const FAILURES: usize = 6_000;
    const SWAPS: usize = 5_000;
    const MODELS: [&str; 3] = ["Tesla V100-SXM2-32GB", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"];
    let t0 = Utc.with_ymd_and_hms(2021, 6, 1, 0, 0, 0).unwrap();
    let span = 5 * 365 * 86_400i64;
    let cluster = |node: usize| format!("titan-{}", node % 4);
    let host = |node: usize| format!("t{node:05}");
    let model_of = |node: usize| MODELS[(node / 7) % 3];

    // Parts: (serial, node of first install, lot). Placements: (part, slot, from, to, reason).
    type Span = (DateTime<Utc>, Option<DateTime<Utc>>);
    let mut parts: Vec<(String, usize, String)> = Vec::new();
    let mut placements: Vec<(usize, usize, Span, Option<&str>)> = Vec::new();
    let mut removals: Vec<(usize, DateTime<Utc>, &str)> = Vec::new();
    let mut current: Vec<usize> = Vec::with_capacity(SLOTS); // open placement per slot
    for s in 0..SLOTS {
        let lot = format!("LOT-{:02}", rng.below(12));
        parts.push((format!("T{:08}", parts.len()), s / 8, lot));
        placements.push((s, s, (t0, None), None));
        current.push(s);
    }
    // Failures and swaps in time order; a failure removes its part an hour later and a new part
    // takes the slot at once; a swap exchanges two parts of one node.
    let mut happenings: Vec<(i64, usize, bool)> = Vec::new();
    let mut last_on_node = vec![-86_400i64; NODES];
    while happenings.iter().filter(|h| h.2).count() < FAILURES {
        let (t, s) = (
            86_400 + rng.below(span as u64 - 2 * 86_400) as i64,
            rng.below(SLOTS as u64) as usize,
        );
        // Failures of one node are hours apart: each is its own failure.
        if (t - last_on_node[s / 8]).abs() < 6 * 3_600 {
            continue;
        }
        last_on_node[s / 8] = t;
        happenings.push((t, s, true));
    }
    for _ in 0..SWAPS {
        let (t, node) = (
            86_400 + rng.below(span as u64 - 2 * 86_400) as i64,
            rng.below(NODES as u64) as usize,
        );
        happenings.push((t, node * 8 + rng.below(8) as usize, false));
    }
    happenings.sort_unstable();
    let mut events = Vec::new();
    for (t, s, failure) in happenings {
        let at = t0 + Duration::seconds(t);
        if failure {
            let pl = current[s];
            let out = at + Duration::hours(1);
            let reason = if rng.below(10) < 6 { "rma" } else { "failed" };
            placements[pl].2.1 = Some(out);
            placements[pl].3 = Some(reason);
            removals.push((placements[pl].0, out, reason));
            parts.push((
                format!("T{:08}", parts.len()),
                s / 8,
                format!("LOT-{:02}", 12 + rng.below(4)),
            ));
            placements.push((parts.len() - 1, s, (out, None), None));
            current[s] = placements.len() - 1;
            let id = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, format!("bench-parts/{s}/{t}").as_bytes());
            events.push(
                json!({"id": id, "occurred_at": ts(at), "cluster": cluster(s / 8), "node": host(s / 8),
                               "gpu_index": s % 8, "kind": "xid", "code": 79,
                               "message": "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus."}),
            );
        } else {
            let other = (s / 8) * 8 + (s % 8 + 1 + rng.below(7) as usize) % 8;
            let (a, b) = (current[s], current[other]);
            for (pl, slot) in [(a, other), (b, s)] {
                placements[pl].2.1 = Some(at);
                placements[pl].3 = Some("moved");
                placements.push((placements[pl].0, slot, (at, None), None));
                current[slot] = placements.len() - 1;
            }
        }
    }
    let nodes: Vec<Value> = (0..NODES)
        .map(|n| {
            json!({"hostname": host(n), "cluster": cluster(n), "gpu_model": model_of(n), "gpu_count": 8,
                        "in_service_since": ts(t0 - Duration::days(30))})
        })
        .collect();
    for chunk in nodes.chunks(1_000) {
        send(
            &http,
            reqwest::Method::PUT,
            format!("{}/v1/nodes", app.base),
            &app.token,
            &json!({"nodes": chunk}),
        )
        .await?;
    }
    let part_json: Vec<Value> = parts
        .iter()
        .map(|(serial, node, lot)| {
            json!({"cluster": cluster(*node), "serial": serial, "model": model_of(*node),
                                          "attributes": {"lot": lot}})
        })
        .collect();
    let placement_json: Vec<Value> = placements
        .iter()
        .map(|(p, s, (from, to), reason)| {
            let mut v = json!({"cluster": cluster(s / 8), "serial": parts[*p].0, "node": host(s / 8), "gpu_index": s % 8,
                               "installed_at": ts(*from)});
            if let Some(to) = to {
                v["removed_at"] = json!(ts(*to));
                v["end_reason"] = json!(reason);
            }
            v
        })
        .collect();
    let removal_json: Vec<Value> = removals
        .iter()
        .map(|(p, at, reason)| {
            json!({"cluster": cluster(parts[*p].1), "serial": parts[*p].0, "removed_at": ts(*at),
                                      "reason": reason, "ticket": format!("RMA-{p}")})
        })
        .collect();
    let url = format!("{}/v1/gpus/history", app.base);
    let t = Instant::now();
    for (list, items) in [
        ("parts", &part_json),
        ("placements", &placement_json),
        ("removals", &removal_json),
    ] {
        for chunk in items.chunks(10_000) {
            let a = send(
                &http,
                reqwest::Method::POST,
                url.clone(),
                &app.token,
                &json!({ list: chunk }),
            )
            .await?;
            anyhow::ensure!(a["rejected"].as_array().is_none_or(|r| r.is_empty()), "{list}: {a}");
        }
    }
    let import_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    // In time order, 500 a request: each request's re-fold reads the few months it spans.
    for chunk in events.chunks(500) {
        send(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/events", app.base),
            &app.token,
            &json!({"events": chunk}),
        )
        .await?;
    }
    let events_secs = t.elapsed().as_secs_f64();
    sqlx::raw_sql("VACUUM (ANALYZE)").execute(&app.db).await?;
    let resolved: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "resolved!" FROM failures f WHERE EXISTS (
             SELECT 1 FROM gpu_placements pl WHERE pl.cluster = f.cluster AND pl.hostname = f.root_node
               AND pl.gpu_index = f.root_gpu_index AND pl.installed_at <= f.first_at
               AND (pl.removed_at IS NULL OR pl.removed_at > f.first_at))"#,
    )
    .fetch_one(&app.db)
    .await?;
    rows.push(format!(
        "| history import: {} parts, {} placements, {} removals (lists of 10,000) | {import_secs:.1} s |",
        parts.len(),
        placements.len(),
        removals.len()
    ));
    rows.push(format!(
        "| {} XID 79 signals through `/v1/events` (500 per request, in time order) | {events_secs:.1} s; {resolved} failures resolved to a part |",
        events.len()
    ));

    // The reads `Fleet::load` makes, each timed alone (median of 5), then the route.
    let mut loads = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let pl = crate::storage::gpus::placements(&app.db, None, None, None).await?;
        let a = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let p = crate::storage::gpus::parts(&app.db, None, None).await?;
        let b = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let r = crate::storage::gpus::removals(&app.db, None, None).await?;
        let c = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let f = crate::storage::gpus::part_failures(&app.db, None, None).await?;
        let d = t.elapsed().as_secs_f64();
        let fleet = crate::queries::gpus::Fleet {
            parts: p,
            placements: pl,
            removals: r,
            failures: f,
        };
        let t = Instant::now();
        let lives = fleet.lives(Utc::now());
        let e = t.elapsed().as_secs_f64();
        anyhow::ensure!(
            lives.len() == parts.len(),
            "{} lives for {} parts",
            lives.len(),
            parts.len()
        );
        loads.push([a, b, c, d, e]);
    }
    let med = |i: usize| {
        let mut v: Vec<f64> = loads.iter().map(|l| l[i] * 1e3).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    rows.push(format!(
        "| `Fleet::load`, each read alone (median of 5) | placements {:.0} ms, parts {:.0} ms, removals {:.0} ms, failures resolved to parts {:.0} ms; lives built in Rust {:.0} ms |",
        med(0),
        med(1),
        med(2),
        med(3),
        med(4)
    ));
    // The parts' lives are kept between requests while no write moves their version: the first
    // (warm-up) request of each grouping reads the history, the timed ones do not; the hard-failure
    // event reads the failures resolved to parts on every request.
    let queries = [
        "by=generation",
        "by=model",
        "by=cluster",
        "by=attribute:lot",
        "by=generation&event=hardware_failure",
    ];
    for by in queries {
        let url = format!("{}/v1/analytics/survival?{by}", app.base);
        let warm = http.get(&url).bearer_auth(&app.token).send().await?;
        anyhow::ensure!(warm.status().is_success(), "{url}: {}", warm.status());
        let answer: Value = warm.json().await?;
        let mut times = Vec::new();
        for _ in 0..opts.samples.max(1) {
            times.push(timed_get(&http, &url, &app.token).await?);
        }
        times.sort_by(f64::total_cmp);
        let groups = answer["groups"].as_array().map_or(0, Vec::len);
        let events: u64 = answer["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["events"].as_u64())
            .sum();
        rows.push(format!(
            "| `GET /v1/analytics/survival?{by}` ({groups} groups, {events} events), {} requests | p50 {:.0} ms, p95 {:.0} ms |",
            times.len(),
            percentile(&times, 0.5),
            percentile(&times, 0.95)
        ));
    }
    // After every write the next answer reads the whole history again: each sample follows a
    // version bump (what a write of the parts does).
    let url = format!("{}/v1/analytics/survival?by=generation", app.base);
    let mut times = Vec::new();
    for _ in 0..opts.samples.clamp(1, 10) {
        let mut conn = app.db.acquire().await?;
        crate::storage::gpus::bump_part_versions(&mut conn, &["titan-0".to_string()]).await?;
        drop(conn);
        times.push(timed_get(&http, &url, &app.token).await?);
    }
    rows.push(timing_row(
        "`GET /v1/analytics/survival?by=generation` right after a write of the parts",
        "requests",
        &mut times,
    ));
    app.server.abort();
    app.db.close().await;
    // A new process: nothing kept. The server builds the lives at start, in the background; a read
    // right after the start waits for that build, one a second later finds them built.
    for (label, pause) in [("straight after a start", 0u64), ("1 s after a start", 1_000)] {
        let mut times = Vec::new();
        for _ in 0..opts.samples.clamp(1, 10) {
            crate::queries::gpus::forget_kept_lives();
            let app = crate::devtools::bench::serve(&opts.server_url, &db_name, Limits::default()).await?;
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            let url = format!("{}/v1/analytics/survival?by=generation", app.base);
            times.push(timed_get(&http, &url, &app.token).await?);
            app.server.abort();
            app.db.close().await;
        }
        rows.push(timing_row(
            &format!("the first `GET /v1/analytics/survival?by=generation` {label}"),
            "starts",
            &mut times,
        ));
    }
    Ok(())
}

pub async fn run(opts: PartsBenchOptions) -> anyhow::Result<String> {
    let db_name = opts.db_name.as_str();
    anyhow::ensure!(
        !db_name.is_empty()
            && db_name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "--db-name must be lower-case letters, digits and underscores: {db_name}"
    );
    let mut rows = Vec::new();
    inventory(&opts, &mut rows).await?;
    eprintln!("{}", rows.join("\n"));
    history(&opts, &mut rows).await?;
    Ok(format!("| measure | value |\n|---|---|\n{}\n", rows.join("\n")))
}
