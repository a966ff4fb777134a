//! The `reporting` schema as Grafana uses it: a small fleet loaded through the API, then every
//! panel's SQL of `grafana/dashboards/faultline.json` run as `faultline_reader`, the views' column
//! contract and comments, and the reader's lack of any right on the internal tables.

use serde_json::{Value, json};
use sqlx::{Column, Row};

use crate::helpers::{ADMIN_TOKEN, TestApp, event, join_all, spawn_app, status_json, uuid_n};

/// The dashboard's time range in the test: all of November 2026 (the fleet's signals lie in it).
/// Grafana's `$__timeFilter` is BETWEEN, inclusive at both ends: the range ends a second before
/// December, so the day starting 2026-12-01 00:00 is not in it.
const FROM: &str = "2026-11-01T00:00:00Z";
const TO: &str = "2026-11-30T23:59:59Z";

/// 12 nodes of 8 GPUs in cluster c1: 8 H100 (group su-1) in service from 2026-11-01, 4 A100
/// (group su-2) from 2026-11-15; and 2 H100 in cluster c2 (no group), which `$cluster = 'c1'` hides.
async fn load_fleet(app: &TestApp) {
    let mut nodes: Vec<Value> = (0..8)
        .map(|i| json!({"hostname": format!("h{i:02}"), "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
                        "group": "su-1", "in_service_since": "2026-11-01T00:00:00Z"}))
        .collect();
    nodes.extend((0..4).map(|i| {
        json!({"hostname": format!("a{i:02}"), "cluster": "c1", "gpu_model": "A100-SXM4-80GB", "gpu_count": 8,
                        "group": "su-2", "in_service_since": "2026-11-15T00:00:00Z"})
    }));
    nodes.extend((0..2).map(|i| {
        json!({"hostname": format!("x{i:02}"), "cluster": "c2", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
                        "in_service_since": "2026-11-01T00:00:00Z"})
    }));
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await;
    assert_eq!(status, 200, "{body}");
    let e = |n: u32, o: Value| event(&uuid_n(n), o);
    let events = vec![
        // XID 79 on h03 in job j1, NCCL timeouts from two other nodes of the job.
        e(
            1,
            json!({"node": "h03", "job_id": "j1", "occurred_at": "2026-11-02T10:00:00Z"}),
        ),
        e(
            2,
            json!({"node": "h01", "job_id": "j1", "kind": "nccl_timeout", "code": null, "symptom": "job_hang",
                    "occurred_at": "2026-11-02T10:02:00Z", "message": "Watchdog caught collective operation timeout"}),
        ),
        e(
            3,
            json!({"node": "h02", "job_id": "j1", "kind": "nccl_timeout", "code": null, "symptom": "job_hang",
                    "occurred_at": "2026-11-02T10:03:00Z", "message": "Watchdog caught collective operation timeout"}),
        ),
        // Two uncorrectable ECC errors on h03 a day apart, one on a01.
        e(
            4,
            json!({"node": "h03", "kind": "ecc", "code": 2, "occurred_at": "2026-11-03T10:00:00Z", "message": "DBE"}),
        ),
        e(
            5,
            json!({"node": "h03", "kind": "ecc", "code": 2, "occurred_at": "2026-11-04T10:00:00Z", "message": "DBE"}),
        ),
        e(
            6,
            json!({"node": "a01", "kind": "ecc", "code": 2, "occurred_at": "2026-11-20T10:00:00Z", "message": "DBE"}),
        ),
        // A GPU OOM on h05, an XID 79 on a02, an XID on c2.
        e(
            7,
            json!({"node": "h05", "kind": "gpu_oom", "code": null, "occurred_at": "2026-11-05T10:00:00Z", "message": "CUDA out of memory"}),
        ),
        e(8, json!({"node": "a02", "occurred_at": "2026-11-21T10:00:00Z"})),
        e(
            9,
            json!({"cluster": "c2", "node": "x01", "occurred_at": "2026-11-22T10:00:00Z"}),
        ),
    ];
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": events})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["accepted"], 9, "{body}");
}

/// A panel's SQL with Grafana's macros and the `$cluster` variable replaced as Grafana would
/// expand them for the test's range and cluster c1.
fn expand(sql: &str) -> String {
    let mut out = sql.replace("$cluster", "'c1'");
    while let Some(start) = out.find("$__timeFilter(") {
        let args = start + "$__timeFilter(".len();
        let end = args + out[args..].find(')').expect("closed macro");
        let column = out[args..end].trim().to_string();
        out.replace_range(
            start..=end,
            &format!("{column} BETWEEN '{FROM}'::timestamptz AND '{TO}'::timestamptz"),
        );
    }
    out = out.replace("$__timeFrom()", &format!("'{FROM}'::timestamptz"));
    out = out.replace("$__timeTo()", &format!("'{TO}'::timestamptz"));
    assert!(!out.contains('$'), "unexpanded macro or variable in {out}");
    out
}

/// The relations a query reads: the word after each FROM and JOIN (EXTRACT(x FROM y) and
/// subqueries aside, which the dashboard does not use).
fn read_relations(sql: &str) -> Vec<String> {
    let words: Vec<&str> = sql.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0].eq_ignore_ascii_case("from") || w[0].eq_ignore_ascii_case("join"))
        .map(|w| w[1].trim_end_matches([',', ')']).to_string())
        .collect()
}

fn dashboard() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/grafana/dashboards/faultline.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Runs `sql` as faultline_reader in a transaction that is rolled back; answers the column names
/// and the rows.
async fn as_reader(app: &TestApp, sql: &str) -> Result<(Vec<String>, Vec<sqlx::postgres::PgRow>), sqlx::Error> {
    let mut tx = app.db.begin().await.unwrap();
    sqlx::query("SET LOCAL ROLE faultline_reader")
        .execute(&mut *tx)
        .await
        .unwrap();
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_all(&mut *tx)
        .await;
    let _ = tx.rollback().await;
    let rows = rows?;
    let columns = rows
        .first()
        .map(|r| r.columns().iter().map(|c| c.name().to_string()).collect())
        .unwrap_or_default();
    Ok((columns, rows))
}

#[tokio::test]
async fn every_dashboard_panel_runs_as_the_reader_and_returns_its_columns() {
    let app = spawn_app().await;
    load_fleet(&app).await;
    // A post-mortem on the GPU OOM moves it to hardware/nvlink: the views show the effective cause.
    let oom: uuid::Uuid = sqlx::query_scalar("SELECT failure_id FROM reporting.failures WHERE root_kind = 'gpu_oom'")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let res = app
        .client
        .patch(app.url(&format!("/v1/failures/{oom}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"root_cause": {"category": "hardware", "component": "nvlink"}}))
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(res).await;
    assert_eq!(status, 200, "{body}");

    let expected: &[(u64, &[&str])] = &[
        (1, &["time", "category", "failures"]),
        (
            2,
            &["generation", "hardware", "platform", "user", "unknown", "gpu_days"],
        ),
        (
            3,
            &[
                "cluster",
                "node_group",
                "gpus",
                "group_hours",
                "failures",
                "hardware_failures",
                "mtbf_hours",
                "hardware_mtbf_hours",
            ],
        ),
        (4, &["root_kind", "failures"]),
        (
            5,
            &[
                "cluster",
                "node",
                "generation",
                "node_group",
                "failures",
                "hardware_failures",
                "root_kinds",
                "last_failure",
            ],
        ),
        (6, &["time", "kind", "signals"]),
    ];
    let dash = dashboard();
    let panels = dash["panels"].as_array().unwrap();
    assert_eq!(panels.len(), expected.len());
    for panel in panels {
        let id = panel["id"].as_u64().unwrap();
        let title = panel["title"].as_str().unwrap();
        let want = expected.iter().find(|(i, _)| *i == id).map(|(_, c)| *c).unwrap();
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}");
        for target in targets {
            assert_eq!(target["datasource"]["uid"], "faultline-pg", "{title}");
            let raw = target["rawSql"].as_str().unwrap();
            // Only the reporting schema: every FROM / JOIN names a reporting view or a CTE.
            let relations = read_relations(raw);
            assert!(!relations.is_empty(), "{title}");
            for r in &relations {
                assert!(
                    r.starts_with("reporting.") || ["exposure", "failures"].contains(&r.as_str()),
                    "{title} reads {r}"
                );
            }
            let sql = expand(raw);
            let (columns, rows) = as_reader(&app, &sql)
                .await
                .unwrap_or_else(|e| panic!("{title}: {e}\n{sql}"));
            assert!(!rows.is_empty(), "{title}: no rows\n{sql}");
            assert_eq!(columns, want, "{title}");
        }
    }

    // The figures behind two panels, by hand. Exposure of c1 in November (to 12-01 00:00):
    // H100 8 nodes x 8 GPUs x 30 days = 1,920 GPU-days; A100 4 x 8 x 16 days (11-15..11-30) = 512.
    // (numeric columns read as float8 through a wrapping query: the tests decode no NUMERIC)
    let panel_sql = expand(panels[1]["targets"][0]["rawSql"].as_str().unwrap());
    let (_, rows) = as_reader(
        &app,
        &format!("SELECT generation, gpu_days::float8 AS gpu_days FROM ({panel_sql}) p"),
    )
    .await
    .unwrap();
    let gpu_days: Vec<(String, f64)> = rows.iter().map(|r| (r.get("generation"), r.get("gpu_days"))).collect();
    assert_eq!(gpu_days.len(), 2, "{gpu_days:?}");
    let total: f64 = gpu_days.iter().map(|(_, d)| d).sum();
    assert!((total - 2432.0).abs() < 0.05, "{gpu_days:?}");
    // MTBF per group. su-1: 64 GPUs x 720 h / 64 GPUs = 720 h; failures rooted in it: the XID
    // cascade and two ECC on h03, the GPU OOM on h05 = 4 -> 180 h. su-2: 32 GPUs x 384 h (16 days)
    // / 32 = 384 h; the ECC on a01 and the XID on a02 = 2 -> 192 h. Sorted by MTBF.
    let panel_sql = expand(panels[2]["targets"][0]["rawSql"].as_str().unwrap());
    let (_, rows) = as_reader(
        &app,
        &format!(
            "SELECT node_group, group_hours::float8 AS h, failures, mtbf_hours::float8 AS mtbf FROM ({panel_sql}) p"
        ),
    )
    .await
    .unwrap();
    let groups: Vec<(String, f64, i64, f64)> = rows
        .iter()
        .map(|r| (r.get("node_group"), r.get("h"), r.get("failures"), r.get("mtbf")))
        .collect();
    assert_eq!(
        groups,
        [
            ("su-1".to_string(), 720.0, 4, 180.0),
            ("su-2".to_string(), 384.0, 2, 192.0)
        ]
    );
    // The API says the same for the same month.
    let (status, mtbf) = app
        .get(
            ADMIN_TOKEN,
            "/v1/analytics/mtbf?from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z&cluster=c1",
        )
        .await;
    assert_eq!(status, 200, "{mtbf}");
    let api: Vec<(String, f64, u64, f64)> = mtbf["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let f = |k: &str| g[k].as_f64().unwrap();
            (
                g["group"].as_str().unwrap().to_string(),
                f("exposure_hours"),
                g["failures"].as_u64().unwrap(),
                f("mtbf_hours"),
            )
        })
        .collect();
    let mut api_sorted = api.clone();
    api_sorted.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        api_sorted,
        [
            ("c1/su-1".to_string(), 720.0, 4, 180.0),
            ("c1/su-2".to_string(), 384.0, 2, 192.0)
        ],
        "{mtbf}"
    );
    // Worst node: h03 is the root of the XID cascade and both ECC failures (3 failures, all
    // hardware); the GPU OOM on h05 counts as hardware after the post-mortem.
    let (_, rows) = as_reader(&app, &expand(panels[4]["targets"][0]["rawSql"].as_str().unwrap()))
        .await
        .unwrap();
    let first: (String, i64, i64) = (
        rows[0].get("node"),
        rows[0].get("failures"),
        rows[0].get("hardware_failures"),
    );
    assert_eq!(first, ("h03".to_string(), 3, 3));
    let h05: i64 = rows
        .iter()
        .find(|r| r.get::<String, _>("node") == "h05")
        .map(|r| r.get("hardware_failures"))
        .unwrap();
    assert_eq!(h05, 1);
    assert!(rows.iter().all(|r| r.get::<String, _>("cluster") == "c1"));

    // The template variable's query lists both clusters.
    let var = &dash["templating"]["list"][0];
    let (_, rows) = as_reader(&app, var["query"].as_str().unwrap()).await.unwrap();
    let clusters: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(clusters, ["c1", "c2"]);
}

/// The views' columns are a contract: exactly these, in this order, each with a comment.
#[tokio::test]
async fn reporting_views_keep_their_columns_and_document_them() {
    let app = spawn_app().await;
    let contract: &[(&str, &[&str])] = &[
        (
            "failures",
            &[
                "failure_id",
                "cluster",
                "job_id",
                "first_at",
                "last_at",
                "duration_seconds",
                "nodes",
                "node_count",
                "signal_count",
                "root_node",
                "root_kind",
                "root_code",
                "generation",
                "node_group",
                "category",
                "component",
                "auto_category",
                "auto_component",
                "has_postmortem",
                "severity",
                "transient",
                "action",
                "symptom",
                "rule_id",
                "resolved_at",
                "resolution",
                "detection_minutes",
                "resubmission_minutes",
                "setup_minutes",
                "recomputation_minutes",
            ],
        ),
        (
            "daily_exposure",
            &[
                "day",
                "day_start",
                "cluster",
                "node_group",
                "generation",
                "nodes",
                "gpus",
                "node_hours",
                "gpu_hours",
            ],
        ),
        (
            "signals",
            &[
                "signal_id",
                "occurred_at",
                "last_occurred_at",
                "repeat_count",
                "received_at",
                "cluster",
                "node",
                "node_generation",
                "gpu_index",
                "gpu_uuid",
                "gpu_model",
                "job_id",
                "kind",
                "code",
                "symptom",
                "reported_category",
                "reported_component",
                "message",
            ],
        ),
    ];
    #[derive(sqlx::FromRow)]
    struct ColumnDoc {
        column_name: String,
        comment: Option<String>,
    }
    for (view, columns) in contract {
        let docs: Vec<ColumnDoc> = sqlx::query_as(
            "SELECT a.attname::text AS column_name, col_description(a.attrelid, a.attnum) AS comment
             FROM pg_attribute a
             WHERE a.attrelid = ('reporting.' || $1)::regclass AND a.attnum > 0 AND NOT a.attisdropped
             ORDER BY a.attnum",
        )
        .bind(view)
        .fetch_all(&app.db)
        .await
        .unwrap();
        let names: Vec<&str> = docs.iter().map(|d| d.column_name.as_str()).collect();
        assert_eq!(&names, columns, "reporting.{view}");
        for d in &docs {
            assert!(
                d.comment.as_deref().is_some_and(|c| c.len() > 5),
                "reporting.{view}.{} has no comment",
                d.column_name
            );
        }
        let view_comment: Option<String> =
            sqlx::query_scalar("SELECT obj_description(('reporting.' || $1)::regclass, 'pg_class')")
                .bind(view)
                .fetch_one(&app.db)
                .await
                .unwrap();
        assert!(view_comment.is_some(), "reporting.{view}");
    }
    // Nothing in the schema but these three views.
    let objects: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'reporting'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(objects, 3);
}

/// faultline_reader: NOLOGIN, reads reporting.*, and is refused every internal table.
#[tokio::test]
async fn the_reader_role_reads_reporting_only() {
    let app = spawn_app().await;
    load_fleet(&app).await;
    let login: bool = sqlx::query_scalar("SELECT rolcanlogin FROM pg_roles WHERE rolname = 'faultline_reader'")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(!login);
    for view in ["reporting.failures", "reporting.daily_exposure", "reporting.signals"] {
        let sql = format!("SELECT count(*) FROM {view}");
        let (_, rows) = as_reader(&app, &sql).await.unwrap_or_else(|e| panic!("{view}: {e}"));
        assert!(rows[0].get::<i64, _>(0) > 0, "{view}");
    }
    for table in [
        "public.api_tokens",
        "public.failures",
        "public.events",
        "public.nodes",
        "public.failures_effective",
    ] {
        let err = as_reader(&app, &format!("SELECT count(*) FROM {table}"))
            .await
            .unwrap_err();
        let code = err.as_database_error().and_then(|e| e.code()).map(|c| c.to_string());
        assert_eq!(code.as_deref(), Some("42501"), "{table}: {err}");
        assert!(err.to_string().contains("permission denied"), "{err}");
    }
    // Nor can it write through a view (refused as not updatable, or for want of the right).
    let err = as_reader(&app, "DELETE FROM reporting.signals RETURNING 1")
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("permission denied") || msg.contains("cannot delete from view"),
        "{err}"
    );
}

/// The migration's role block, as several databases of one server run it at once (roles are
/// server-wide): under a fresh role name, the block runs in four databases while the first, which
/// created the role, has not committed; the others wait on the role name and then succeed (the
/// concurrent creation is caught), and each grants in its own database. (Two runs in one database
/// never overlap: sqlx holds a per-database lock while migrating.)
#[tokio::test]
async fn the_role_block_is_idempotent_and_safe_when_run_concurrently() {
    let apps = join_all((0..4).map(|_| spawn_app()).collect()).await;
    let migration = include_str!("../../migrations/0011_reporting.sql");
    let start = migration.find("DO $$").unwrap();
    let role = format!("faultline_reader_race_{}", uuid::Uuid::new_v4().simple());
    let block = migration[start..].replace("faultline_reader", &role);
    let run = |db: sqlx::PgPool, block: String| async move {
        let mut tx = db.begin().await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(block)).execute(&mut *tx).await?;
        tx.commit().await
    };
    let mut first = apps[0].db.begin().await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(block.clone()))
        .execute(&mut *first)
        .await
        .unwrap();
    let others: Vec<_> = apps[1..]
        .iter()
        .map(|a| tokio::spawn(run(a.db.clone(), block.clone())))
        .collect();
    // Let the others reach CREATE ROLE and wait on the uncommitted one.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        others.iter().all(|h| !h.is_finished()),
        "the others should wait on the first"
    );
    first.commit().await.unwrap();
    for h in others {
        h.await
            .unwrap()
            .unwrap_or_else(|e| panic!("a concurrent run failed: {e}"));
    }
    // Once more, now that the role exists: a no-op that still grants.
    run(apps[0].db.clone(), block.clone()).await.unwrap();
    for app in &apps {
        let readable: bool = sqlx::query_scalar("SELECT has_table_privilege($1, 'reporting.failures', 'SELECT')")
            .bind(&role)
            .fetch_one(&app.db)
            .await
            .unwrap();
        assert!(readable);
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP OWNED BY {role}")))
            .execute(&app.db)
            .await
            .unwrap();
    }
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP ROLE {role}")))
        .execute(&apps[0].db)
        .await
        .unwrap();
}
