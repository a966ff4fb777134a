//! Storage layout: monthly partitions and retention, keys ready for a distributed
//! Postgres, and ingest that leaves other databases of the server alone.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, event, join_all, spawn_app, spawn_app_on, test_server_url, uuid_n};
use faultline::app::configuration::{Limits, RetentionSettings};
use faultline::app::edge::EdgeSettings;
use faultline::storage::distribution::{LOCAL_TABLES, REFERENCE_TABLES};

/// Every primary key and unique index of a per-cluster table includes `cluster`, and every such
/// table has a primary key (Citus requires the distribution column in each unique constraint).
#[tokio::test]
async fn every_unique_key_of_a_per_cluster_table_includes_cluster() {
    let app = spawn_app().await;
    // Top-level tables of the schema (partitions follow their parent).
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c
         WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
         ORDER BY 1",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert!(tables.iter().any(|t| t == "events") && tables.iter().any(|t| t == "failures"));
    let unique: Vec<(String, String, bool, bool)> = sqlx::query_as(
        "SELECT t.relname::text, i.relname::text, x.indisprimary,
                EXISTS (SELECT 1 FROM unnest(x.indkey) AS k(attnum)
                        JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
                        WHERE a.attname = 'cluster')
         FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
         WHERE x.indisunique AND t.relnamespace = current_schema()::regnamespace AND NOT t.relispartition
         ORDER BY 1, 2",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    let mut problems = Vec::new();
    // Tables that are the same for every cluster (Citus reference tables, or local bookkeeping):
    // everything else is per-cluster and distributed by `cluster`.
    let fleet_wide = |t: &str| REFERENCE_TABLES.contains(&t) || LOCAL_TABLES.contains(&t);
    for table in tables.iter().filter(|t| !fleet_wide(t.as_str())) {
        let keys: Vec<_> = unique.iter().filter(|u| &u.0 == table).collect();
        if !keys.iter().any(|u| u.2) {
            problems.push(format!("{table}: no primary key"));
        }
        for (_, index, _, has_cluster) in keys {
            if !has_cluster {
                problems.push(format!("{table}: unique index {index} does not include cluster"));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    // The constraint the migration relies on: the listed reference tables exist.
    for t in REFERENCE_TABLES {
        assert!(
            tables.iter().any(|x| x == t),
            "reference table {t} is gone: update the list"
        );
    }
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Signals of March 2024 (well past 400 days) and of November 2026: failures, a drain, a slowdown.
fn signals(old: DateTime<Utc>, recent: DateTime<Utc>) -> Vec<Value> {
    let at = |base: DateTime<Utc>, mins: i64| ts(base + Duration::minutes(mins));
    let mut out = Vec::new();
    for (i, base) in [(0, old), (100, recent)] {
        out.extend([
            event(
                &uuid_n(i + 1),
                json!({"node": "n01", "code": 48, "occurred_at": at(base, 0)}),
            ),
            event(
                &uuid_n(i + 2),
                json!({"node": "n01", "code": 48, "occurred_at": at(base, 5)}),
            ),
            event(
                &uuid_n(i + 3),
                json!({"node": "n02", "code": 79, "occurred_at": at(base, 60 * 24)}),
            ),
            event(
                &uuid_n(i + 4),
                json!({"node": "n03", "kind": "nccl_timeout", "code": null, "job_id": "j1",
                                        "occurred_at": at(base, 60 * 48)}),
            ),
            event(
                &uuid_n(i + 5),
                json!({"node": "n04", "code": 79, "job_id": "j1", "occurred_at": at(base, 60 * 48 + 1)}),
            ),
            event(
                &uuid_n(i + 6),
                json!({"node": "n01", "kind": "node_drain", "code": null, "message": "drained for RMA",
                                        "occurred_at": at(base, 30)}),
            ),
            event(
                &uuid_n(i + 7),
                json!({"node": "n05", "kind": "slowdown", "code": null, "job_id": "j2",
                                        "attributes": {"step_time_ratio": 1.8, "duration_seconds": 3600},
                                        "occurred_at": at(base, 60 * 72)}),
            ),
        ]);
    }
    out
}

async fn analyses(app: &TestApp, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<(String, Value)> {
    let w = format!("from={}&to={}", ts(from), ts(to));
    let mut out = Vec::new();
    for path in [
        "/v1/analytics/failure-mix?by=gpu_generation&",
        "/v1/analytics/failure-mix?by=cluster&",
        "/v1/analytics/mtbf?group_size=8&job_gpus=64&",
        "/v1/analytics/root-causes?",
        "/v1/analytics/top-errors?",
        "/v1/analytics/recovery?",
        "/v1/analytics/efficiency?",
        "/v1/analytics/timeline?",
        "/v1/analytics/node-concentration?",
        "/v1/failures?limit=100&",
    ] {
        let (status, body) = app.get(ADMIN_TOKEN, &format!("{path}{w}")).await;
        assert_eq!(status, 200, "{path}: {body}");
        out.push((path.to_string(), body));
    }
    out
}

/// Retention drops whole monthly partitions past FAULTLINE_SIGNAL_RETENTION_DAYS; failures, their
/// signals' (kind, code), drains and slowdowns stay, so every analysis of the old window answers
/// the same, also after a catalog edit rebuilds the failures; a retried old signal is a
/// duplicate, not stored twice.
#[tokio::test]
async fn an_old_partition_is_dropped_and_the_analyses_of_its_window_are_unchanged() {
    let app = spawn_app().await;
    let nodes: Vec<Value> = (1..=5)
        .map(|i| {
            json!({"hostname": format!("n{i:02}"), "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3",
                        "gpu_count": 8, "group": "su1", "in_service_since": "2024-01-01T00:00:00Z"})
        })
        .collect();
    assert_eq!(app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await.0, 200);
    let old: DateTime<Utc> = "2024-03-04T10:00:00Z".parse().unwrap();
    let recent: DateTime<Utc> = "2026-11-04T10:00:00Z".parse().unwrap();
    let events = signals(old, recent);
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({ "events": events })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["accepted"], 14, "{body}");
    let (from, to) = (
        "2024-03-01T00:00:00Z".parse().unwrap(),
        "2024-04-01T00:00:00Z".parse().unwrap(),
    );
    let before = analyses(&app, from, to).await;
    let failures_before = app
        .count("SELECT count(*) FROM failures WHERE first_at < '2024-04-01'")
        .await;
    assert_eq!(
        failures_before, 3,
        "two node failures and one job failure in March 2024"
    );

    let pass = faultline::app::maintenance::run_once(&app.db, Utc::now(), &RetentionSettings::default())
        .await
        .unwrap();
    assert_eq!(pass.dropped, 1, "events_2024_03");
    let gone: bool = sqlx::query_scalar("SELECT to_regclass('events_2024_03') IS NULL")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(gone);
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE occurred_at < '2024-04-01'")
            .await,
        0
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events").await,
        7,
        "November 2026 is kept"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM event_ids WHERE occurred_at < '2024-04-01'")
            .await,
        0,
        "the dropped month's ids left the ledger"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events_archive").await,
        2,
        "the old drain and slowdown are archived"
    );
    let after = analyses(&app, from, to).await;
    for ((path, a), (_, b)) in before.iter().zip(&after) {
        assert_eq!(a, b, "{path} changed when its window's partition was dropped");
    }

    // A retry of the old signals: their ids left the ledger with the month, but their failures
    // and the archive hold them, so they are duplicates and their month is not created again.
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({ "events": events })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["accepted"].as_u64(),
            body["duplicates"].as_u64(),
            body["folded_not_retained"].as_u64()
        ),
        (Some(0), Some(14), Some(0)),
        "{body}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM to_regclass('events_2024_03') AS r WHERE r IS NOT NULL")
            .await,
        0
    );
    assert_eq!(app.count("SELECT count(*) FROM failures").await, 6);

    // A catalog edit rebuilds the failures of the retained signals and keeps the old ones.
    let rule = json!({"kind": "xid", "code": 79, "priority": 200, "category": "platform", "component": "driver", "severity": "high",
                      "transient": true, "secondary": false, "action": "reset_gpu", "description": "site override", "source": "test"});
    let res = app
        .client
        .put(app.url("/v1/classification-rules/xid-79"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&rule)
        .send()
        .await
        .unwrap();
    let (status, change) = crate::helpers::catalog_edit(&app.address, res).await;
    assert_eq!(
        (status, change["rebuild"]["state"].as_str()),
        (202, Some("done")),
        "{change}"
    );
    // The same answers; only what is defined by the current catalog follows it: the version
    // reported and top-errors' severity of each signal kind.
    let without_version = |mut v: Value| {
        if let Some(w) = v.get_mut("window").and_then(Value::as_object_mut) {
            w.remove("catalog_version");
        }
        for row in v
            .get_mut("all_signals")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            row.as_object_mut().unwrap().remove("severity");
        }
        v
    };
    let rebuilt = analyses(&app, from, to).await;
    for ((path, a), (_, b)) in before.iter().zip(&rebuilt) {
        assert_eq!(
            without_version(a.clone()),
            without_version(b.clone()),
            "{path} changed for the old window after a catalog rebuild"
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM failures").await, 6);
    assert_eq!(
        app.count("SELECT count(*) FROM failures WHERE first_at < '2024-04-01' AND component = 'driver'")
            .await,
        0,
        "the failures past retention keep their classification"
    );
    assert!(
        app.count("SELECT count(*) FROM failures WHERE first_at > '2026-01-01' AND component = 'driver'")
            .await
            >= 1,
        "the retained failures were reclassified"
    );
}

/// Batches of 10,000 distinct nodes, four at once, while another database on the same server is
/// used (reads, writes, a transaction over many relations): nothing there fails. Postgres's lock
/// table is shared by all databases; one lock per node ran it out for everyone.
#[tokio::test]
async fn another_database_is_unaffected_by_wide_batches() {
    let server = test_server_url().await.unwrap();
    let busy = spawn_app().await;
    let other = spawn_app_on(&server, Limits::default(), EdgeSettings::default()).await;
    let t0: DateTime<Utc> = "2026-11-02T18:00:00Z".parse().unwrap();
    let batch = |g: usize| -> Value {
        let events: Vec<Value> = (0..10_000)
            .map(|i| {
                event(
                    &uuid::Uuid::new_v4().to_string(),
                    json!({"node": format!("wide-{g}-{i:05}"), "code": 48, "occurred_at": ts(t0 + Duration::seconds(i as i64 % 3600))}),
                )
            })
            .collect();
        json!({ "events": events })
    };
    let batches: Vec<Value> = (0..4).map(batch).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probe = {
        let stop = stop.clone();
        let db = other.db.clone();
        let address = other.address.clone();
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut rounds = 0u32;
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds < 3 {
                let c: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_class")
                    .fetch_one(&db)
                    .await
                    .unwrap();
                assert!(c > 0);
                // A transaction that takes many relation locks (every partition and index).
                let mut tx = db.begin().await.unwrap();
                sqlx::query("SELECT count(*) FROM events")
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                sqlx::query("SELECT count(*) FROM failures")
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
                n += 1;
                let ev = event(
                    &uuid::Uuid::new_v4().to_string(),
                    json!({"node": format!("o{n}"), "occurred_at": ts(t0)}),
                );
                let res = client
                    .post(format!("{address}/v1/events"))
                    .bearer_auth(ADMIN_TOKEN)
                    .json(&json!({"events": [ev]}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
                rounds += 1;
            }
            rounds
        })
    };
    let answers = join_all(batches.iter().map(|b| busy.post_events(ADMIN_TOKEN, b)).collect()).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["accepted"], 10_000, "{body}");
    }
    let rounds = probe.await.expect("the other database answered every probe");
    assert!(rounds >= 3);
    assert_eq!(other.count("SELECT count(*) FROM events").await, i64::from(rounds));
    assert_eq!(busy.count("SELECT count(*) FROM events").await, 40_000);
}

/// Maintenance under a long read: an analytics-sized transaction holds `events` open while a
/// batch needs a new month's partition and while retention drops an old month. Ingest goes on:
/// creating a partition (CREATE + ATTACH) never waits for readers, and the drop, which must wait
/// for the reader, gives up after its lock_timeout instead of queueing every insert behind it
/// until the reader ends; the next pass drops the month.
#[tokio::test]
async fn ingest_goes_on_while_a_long_read_holds_events_open_during_maintenance() {
    let app = spawn_app().await;
    let old = |id: u32| {
        event(
            &uuid_n(id),
            json!({"occurred_at": "2024-03-10T00:00:00Z", "node": format!("o{id}")}),
        )
    };
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": [old(1)]})).await;
    assert_eq!(status, 200, "{body}");

    // The long read: a transaction that has read every partition of `events`.
    let mut reader = app.db.begin().await.unwrap();
    let _: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&mut *reader)
        .await
        .unwrap();

    // A late batch in a month that has no partition yet: created while the read is open.
    let started = std::time::Instant::now();
    let fresh = event(
        &uuid_n(2),
        json!({"occurred_at": "2025-02-10T00:00:00Z", "node": "n-late"}),
    );
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": [fresh]})).await;
    assert_eq!(status, 200, "{body}");
    let creation = started.elapsed();

    // Retention drops March 2024 while the read is open, and batches keep coming meanwhile.
    let cutoff: DateTime<Utc> = "2024-05-01T00:00:00Z".parse().unwrap();
    let db = app.db.clone();
    let drop = tokio::spawn(async move { faultline::storage::partitions::drop_before(&db, cutoff).await });
    let mut slowest = std::time::Duration::ZERO;
    for i in 0..10u32 {
        let t = std::time::Instant::now();
        let e = event(
            &uuid_n(100 + i),
            json!({"occurred_at": "2026-11-02T10:00:00Z", "node": format!("n{i}")}),
        );
        let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": [e]})).await;
        assert_eq!(status, 200, "{body}");
        slowest = slowest.max(t.elapsed());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let first_try = drop.await.unwrap();
    assert!(
        first_try.is_err(),
        "the drop cannot have its lock while the read is open: {first_try:?}"
    );
    reader.rollback().await.unwrap();
    // The next pass, with the reader gone, drops the month.
    assert_eq!(
        faultline::storage::partitions::drop_before(&app.db, cutoff)
            .await
            .unwrap(),
        1
    );
    // Bounds far above the drop's lock_timeout (2 s), far below "until the reader ends".
    assert!(
        creation < std::time::Duration::from_secs(5),
        "creating a partition took {creation:?}"
    );
    assert!(
        slowest < std::time::Duration::from_secs(5),
        "a batch waited {slowest:?} behind the drop"
    );
}
