//! `POST /v1/failures/lifecycles`: post-mortems in bulk give exactly what the same patches give one
//! `PATCH /v1/failures/{id}` at a time; bad items are rejected alone; a re-sent import changes
//! nothing; and the write path's statements read one failure and the lifecycles of its span,
//! whatever the planner knew when it planned them.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, Backend, TestApp, event, spawn_app, spawn_app_on_backend, status_json, uuid_n};

const WINDOW: &str = "from=2026-10-01T00:00:00Z&to=2026-12-01T00:00:00Z";

async fn register_fleet(app: &TestApp) {
    let mut nodes = Vec::new();
    for cluster in ["c1", "c2"] {
        for i in 0..6 {
            nodes.push(
                json!({"hostname": format!("n{i:02}"), "cluster": cluster, "gpu_model": "NVIDIA H100 80GB HBM3",
                              "gpu_count": 8, "in_service_since": "2026-10-01T00:00:00Z"}),
            );
        }
    }
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await;
    assert_eq!(status, 200, "{body}");
}

/// Five XID 79 failures a day apart on c1/n01 (one key), a job failure on c1 (XID 79 on n02, then
/// NCCL timeouts on n03 and n04), and three on c2/n00 (ECC, an unknown signal, XID 79).
fn history() -> Vec<Value> {
    let mut events = Vec::new();
    for d in 0..5u32 {
        events.push(event(
            &uuid_n(1 + d),
            json!({"node": "n01", "occurred_at": format!("2026-11-0{}T10:00:00Z", 2 + d)}),
        ));
    }
    events.push(event(
        &uuid_n(20),
        json!({"node": "n02", "job_id": "j1", "occurred_at": "2026-11-03T12:00:00Z"}),
    ));
    for (i, node) in ["n03", "n04"].iter().enumerate() {
        events.push(event(
            &uuid_n(21 + i as u32),
            json!({"node": node, "job_id": "j1", "kind": "nccl_timeout", "code": null, "symptom": "job_hang",
                   "occurred_at": "2026-11-03T12:01:00Z", "message": "Watchdog caught collective operation timeout"}),
        ));
    }
    let c2 = [
        ("ecc", json!(2), "2026-11-04T08:00:00Z", "DBE"),
        ("other", Value::Null, "2026-11-05T08:00:00Z", "something odd happened"),
        ("xid", json!(79), "2026-11-06T08:00:00Z", "GPU has fallen off the bus"),
    ];
    for (i, (kind, code, at, message)) in c2.into_iter().enumerate() {
        events.push(event(
            &uuid_n(30 + i as u32),
            json!({"cluster": "c2", "node": "n00", "kind": kind, "code": code, "occurred_at": at, "message": message}),
        ));
    }
    events
}

/// The failures, oldest first: (id, cluster, first_at, job_id, first node).
async fn failures(app: &TestApp) -> Vec<(String, String, String, Option<String>, String)> {
    let (status, body) = app.get(ADMIN_TOKEN, &format!("/v1/failures?limit=1000&{WINDOW}")).await;
    assert_eq!(status, 200, "{body}");
    let mut out: Vec<_> = body["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().to_string(),
                f["cluster"].as_str().unwrap().to_string(),
                f["first_at"].as_str().unwrap().to_string(),
                f["job_id"].as_str().map(str::to_string),
                f["root_node"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort_by(|a, b| (&a.2, &a.0).cmp(&(&b.2, &b.0)));
    out
}

async fn loaded(backend: Backend) -> TestApp {
    let app = spawn_app_on_backend(backend).await;
    register_fleet(&app).await;
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": history()})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(failures(&app).await.len(), 9);
    app
}

/// The patches of the comparison, in order: (failure position, patch). Some failures get two, the
/// second revising the first (a cause cleared, a phase cleared, a cause changed).
fn patches() -> Vec<(usize, Value)> {
    let mut out = Vec::new();
    for i in 0..9 {
        let mut p = json!({"resolution": if i % 3 == 0 { "drained" } else { "transient_restart" },
                           "recovery_minutes": {"detection": 1.5 + i as f64, "setup": 10.0}});
        if i % 2 == 0 {
            p["root_cause"] = json!({"category": "platform", "component": "driver"});
            p["note"] = json!(format!("post-mortem {i}"));
        }
        out.push((i, p));
    }
    out.push((
        0,
        json!({"root_cause": null, "note": "revised: the automatic cause stands"}),
    ));
    out.push((1, json!({"recovery_minutes": {"setup": null}})));
    out.push((2, json!({"root_cause": {"category": "user", "component": "code"}})));
    // A patch that changes nothing (already drained): no history entry, no audit row.
    out.push((3, json!({"resolution": "drained"})));
    out
}

async fn patch(app: &TestApp, id: &str, body: &Value) -> (u16, Value) {
    let res = app
        .client
        .patch(app.url(&format!("/v1/failures/{id}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

async fn import(app: &TestApp, token: &str, body: &Value) -> (u16, Value) {
    let res = app
        .client
        .post(app.url("/v1/failures/lifecycles"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

/// Drops the fields that say when (the two runs happen at different times).
fn timeless(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for k in ["changed_at", "updated_at", "generated_at", "as_of"] {
                m.remove(k);
            }
            m.values_mut().for_each(timeless);
        }
        Value::Array(a) => a.iter_mut().for_each(timeless),
        _ => {}
    }
}

/// Everything a post-mortem shows in: the failures list, each failure's lifecycle and history,
/// the stored lifecycle, history and audit rows, the rollups, and the analytics that read them.
async fn observed(app: &TestApp) -> Value {
    let mut out = serde_json::Map::new();
    let (_, list) = app.get(ADMIN_TOKEN, &format!("/v1/failures?limit=1000&{WINDOW}")).await;
    out.insert("failures".into(), list);
    for (id, ..) in failures(app).await {
        let (status, h) = app.get(ADMIN_TOKEN, &format!("/v1/failures/{id}/history")).await;
        assert_eq!(status, 200, "{h}");
        out.insert(format!("history {id}"), h);
    }
    let tables = [
        (
            "failure_lifecycle",
            "SELECT failure_id, cluster, correlation_key, anchor_at, resolved_at, resolution, detection_minutes,
                    resubmission_minutes, setup_minutes, recomputation_minutes, pm_category, pm_component, note, updated_by
             FROM failure_lifecycle ORDER BY failure_id",
        ),
        (
            "failure_lifecycle_changes",
            "SELECT cluster, failure_id, changed_by, changes FROM failure_lifecycle_changes ORDER BY cluster, id",
        ),
        (
            "audit_log",
            "SELECT actor_name, action, target, details FROM audit_log WHERE action = 'failure.lifecycle' ORDER BY id",
        ),
        (
            "rollup_causes",
            "SELECT period, bucket, cluster, generation, model, category, component, symptom, failures, signals
             FROM rollup_causes WHERE failures <> 0 OR signals <> 0
             ORDER BY period, bucket, cluster, generation, model, category, component, symptom",
        ),
    ];
    for (name, sql) in tables {
        let rows: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT COALESCE(json_agg(row_to_json(t)), '[]'::json)::jsonb FROM ({sql}) t"
        )))
        .fetch_one(&app.db)
        .await
        .unwrap();
        out.insert(name.into(), rows);
    }
    for route in ["root-causes", "recovery", "failure-mix"] {
        for cluster in ["", "&cluster=c1", "&cluster=c2"] {
            let (status, body) = app
                .get(ADMIN_TOKEN, &format!("/v1/analytics/{route}?{WINDOW}{cluster}"))
                .await;
            assert_eq!(status, 200, "{route}: {body}");
            out.insert(format!("{route}{cluster}"), body);
        }
    }
    let mut v = Value::Object(out);
    timeless(&mut v);
    v
}

/// The same post-mortems, one PATCH at a time on one fleet and as one import on an identical one
/// (failures named by id, by job and by node), leave every answer and stored row the same.
#[tokio::test]
async fn a_bulk_import_gives_what_the_same_patches_give_one_by_one() {
    a_bulk_import_gives_what_the_same_patches_give_one_by_one_on(Backend::Postgres).await;
}

#[tokio::test]
async fn a_bulk_import_gives_what_the_same_patches_give_one_by_one_on_citus() {
    a_bulk_import_gives_what_the_same_patches_give_one_by_one_on(Backend::Citus).await;
}

async fn a_bulk_import_gives_what_the_same_patches_give_one_by_one_on(backend: Backend) {
    let one_by_one = loaded(backend).await;
    let fs = failures(&one_by_one).await;
    for (i, p) in patches() {
        let (status, body) = patch(&one_by_one, &fs[i].0, &p).await;
        assert_eq!(status, 200, "{body}");
    }

    let bulk = loaded(backend).await;
    assert_eq!(failures(&bulk).await, fs, "the same history folds to the same failures");
    let items: Vec<Value> = patches()
        .into_iter()
        .enumerate()
        .map(|(n, (i, p))| {
            let (id, cluster, first_at, job, node) = &fs[i];
            // By id, by job or by node, in turn.
            match (n % 3, job) {
                (0, _) => json!({"id": id, "patch": p}),
                (1, Some(j)) => json!({"cluster": cluster, "first_at": first_at, "job_id": j, "patch": p}),
                _ => json!({"cluster": cluster, "first_at": first_at, "node": node, "patch": p}),
            }
        })
        .collect();
    let (status, body) = import(&bulk, ADMIN_TOKEN, &json!({"lifecycles": items})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rejected"], json!([]), "{body}");
    assert_eq!(
        (body["received"].as_u64(), body["changed"].as_u64()),
        (Some(13), Some(12)),
        "{body}"
    );
    assert_eq!(body["lifecycles"][12]["changed"], json!(false), "{body}");
    assert_eq!(body["lifecycles"][4]["failure_id"], json!(fs[4].0), "{body}");

    let (a, b) = (observed(&one_by_one).await, observed(&bulk).await);
    for (k, v) in a.as_object().unwrap() {
        assert_eq!(Some(v), b.get(k), "{k} differs");
    }
    assert_eq!(a, b);
    // The post-mortems moved the counts: platform/driver shows in the root causes.
    assert!(a["root-causes"].to_string().contains("driver"), "{}", a["root-causes"]);
}

/// Bad items (no failure, a bad value, no way to find the failure, an empty patch, not an object,
/// both an id and a description) are listed with their index and reason; the good ones
/// beside them are applied; a re-sent import changes nothing.
#[tokio::test]
async fn bad_items_are_rejected_alone_and_a_resent_import_changes_nothing() {
    let app = loaded(Backend::Postgres).await;
    let fs = failures(&app).await;
    let c2 = fs.iter().find(|f| f.1 == "c2").unwrap();
    let good = json!({"resolution": "drained", "root_cause": {"category": "platform", "component": "driver"}});
    let body = json!({"lifecycles": [
        {"id": fs[0].0, "patch": good},
        {"id": uuid_n(999), "patch": good},
        {"id": fs[1].0, "patch": {"root_cause": {"category": "user", "component": "nvlink"}}},
        {"cluster": "c1", "first_at": fs[2].2, "patch": good},
        {"id": fs[2].0, "patch": {}},
        {"id": fs[2].0, "patch": {"resolution": "fixed"}},
        "not an item",
        {"id": c2.0, "patch": {"recovery_minutes": {"setup": -5}}},
        {"cluster": "c1", "first_at": "2020-01-01T00:00:00Z", "node": "n01", "patch": good},
        {"cluster": fs[3].1, "first_at": fs[3].2, "node": fs[3].4, "patch": {"note": "found by node"}},
        {"id": fs[4].0, "cluster": "c1", "patch": good},
    ]});
    let (status, res) = import(&app, ADMIN_TOKEN, &body).await;
    assert_eq!(status, 200, "{res}");
    let rejected: Vec<(u64, &str, Option<&str>)> = res["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().unwrap(),
                r["reason"].as_str().unwrap(),
                r["field"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        rejected,
        [
            (1, "not_found", Some("id")),
            (2, "invalid_field", Some("root_cause.component")),
            (3, "missing_field", Some("id")),
            (4, "invalid_field", Some("patch")),
            (5, "invalid_field", Some("patch.resolution")),
            (6, "invalid_json", None),
            (7, "invalid_field", Some("recovery_minutes.setup")),
            (8, "not_found", Some("first_at")),
            (10, "invalid_field", Some("id")),
        ],
        "{res}"
    );
    let applied: Vec<u64> = res["lifecycles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["index"].as_u64().unwrap())
        .collect();
    assert_eq!(applied, [0, 9]);
    assert_eq!(res["lifecycles"][1]["failure_id"], json!(fs[3].0));
    let (_, h) = app.get(ADMIN_TOKEN, &format!("/v1/failures/{}/history", fs[0].0)).await;
    assert_eq!(h["lifecycle"]["effective_root_cause"]["component"], "driver", "{h}");
    let (_, h) = app.get(ADMIN_TOKEN, &format!("/v1/failures/{}/history", fs[3].0)).await;
    assert_eq!(h["lifecycle"]["note"], "found by node", "{h}");

    // Re-sent: the same items applied, nothing changed, no history entry or audit row added.
    let counts = |app: &TestApp| {
        let db = app.db.clone();
        async move {
            let n: (i64, i64) = sqlx::query_as(
                "SELECT (SELECT count(*) FROM failure_lifecycle_changes), (SELECT count(*) FROM audit_log WHERE action = 'failure.lifecycle')",
            )
            .fetch_one(&db)
            .await
            .unwrap();
            n
        }
    };
    let before = counts(&app).await;
    assert_eq!(before, (2, 2));
    let (status, again) = import(&app, ADMIN_TOKEN, &body).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (again["changed"].as_u64(), again["unchanged"].as_u64()),
        (Some(0), Some(2)),
        "{again}"
    );
    assert_eq!(again["rejected"], res["rejected"]);
    assert_eq!(counts(&app).await, before);

    // Whole-request errors: nothing valid, not admin, too many, empty.
    let (status, all_bad) = import(
        &app,
        ADMIN_TOKEN,
        &json!({"lifecycles": [{"id": uuid_n(999), "patch": good}]}),
    )
    .await;
    assert_eq!(status, 422, "{all_bad}");
    assert_eq!(all_bad["details"]["rejected"][0]["reason"], "not_found");
    let agent = app.token("agent", None).await;
    assert_eq!(import(&app, &agent, &body).await.0, 403);
    let many: Vec<Value> = (0..1001).map(|_| json!({"id": fs[0].0, "patch": good})).collect();
    assert_eq!(import(&app, ADMIN_TOKEN, &json!({"lifecycles": many})).await.0, 413);
    assert_eq!(import(&app, ADMIN_TOKEN, &json!({"lifecycles": []})).await.0, 400);
    assert_eq!(import(&app, ADMIN_TOKEN, &json!({"items": []})).await.0, 400);
}

/// The write path's statements, as in src/storage (checked below to be the source's text).
const IN_FORCE_FOR_SPANS: &str = r#"SELECT k.n AS "n!", l.failure_id, l.resolved_at, l.resolution, l.detection_minutes, l.resubmission_minutes,
                  l.setup_minutes, l.recomputation_minutes, l.pm_category, l.pm_component, l.note, l.updated_at, l.updated_by
           FROM UNNEST($2::text[], $3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS k(key, s, e, n)
           CROSS JOIN LATERAL (
               SELECT * FROM failure_lifecycle l
               WHERE l.cluster = $1 AND l.correlation_key = k.key AND l.anchor_at BETWEEN k.s AND k.e
               ORDER BY l.updated_at DESC, l.failure_id
               LIMIT 1
           ) l"#;

const FACTS_OF_FAILURES: &str = r#"SELECT (f.first_at AT TIME ZONE 'UTC')::date AS "day!", f.cluster AS "cluster!",
                  COALESCE(n.gpu_generation, f.signal_generation) AS "generation!", COALESCE(n.gpu_model, 'unknown') AS "model!",
                  COALESCE(l.pm_category, f.category) AS "category!", COALESCE(l.pm_component, f.component) AS "component!",
                  COALESCE(f.symptom, 'unspecified') AS "symptom!", COALESCE(n.group_label, '') AS "node_group!",
                  CASE WHEN n.group_label IS NULL THEN COALESCE(f.root_node, '') ELSE '' END AS "root_node!",
                  count(*) AS "failures!", sum(f.signal_count)::bigint AS "signals!"
           FROM failures f
           LEFT JOIN LATERAL (
               SELECT l.pm_category, l.pm_component FROM failure_lifecycle l
               WHERE l.cluster = $1 AND l.correlation_key = f.correlation_key AND l.anchor_at BETWEEN f.first_at AND f.last_at
               ORDER BY l.updated_at DESC, l.failure_id
               LIMIT 1
           ) l ON true
           LEFT JOIN nodes n ON n.cluster = f.cluster AND n.hostname = f.root_node
           WHERE f.cluster = $1 AND f.id = ANY($2)
           GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9"#;

/// What every lifecycle write runs first (`storage::lifecycle::plan_by_index`).
const PROLOGUE: &str = "SELECT set_config('enable_seqscan', 'off', true) AS seqscan, set_config('plan_cache_mode', 'force_custom_plan', true) AS plans";

const ANCHOR: &str =
    "SELECT id, cluster, correlation_key, first_at, last_at, category, component FROM failures WHERE id = $1";

fn squeezed(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every plan node of an EXPLAIN (FORMAT JSON) answer.
fn plan_nodes(plan: &Value, out: &mut Vec<Value>) {
    out.push(plan.clone());
    for p in plan["Plans"].as_array().into_iter().flatten() {
        plan_nodes(p, out);
    }
}

/// (buffers touched, failure_lifecycle rows read, sequential scans of failures or failure_lifecycle)
/// of one execution.
fn cost_of(explained: &Value) -> (i64, i64, usize) {
    let top = &explained[0]["Plan"];
    let mut nodes = Vec::new();
    plan_nodes(top, &mut nodes);
    let buffers = top["Shared Hit Blocks"].as_i64().unwrap() + top["Shared Read Blocks"].as_i64().unwrap();
    let on = |n: &Value, t: &str| n["Relation Name"] == t || n["Index Name"].as_str().is_some_and(|i| i.starts_with(t));
    let lifecycle_rows = nodes
        .iter()
        .filter(|n| on(n, "failure_lifecycle"))
        .map(|n| {
            let loops = n["Actual Loops"].as_i64().unwrap_or(1);
            (n["Actual Rows"].as_i64().unwrap_or(0) + n["Rows Removed by Filter"].as_i64().unwrap_or(0)) * loops
        })
        .sum();
    let seq = nodes
        .iter()
        .filter(|n| n["Node Type"] == "Seq Scan" && (on(n, "failure_lifecycle") || on(n, "failures")))
        .count();
    (buffers, lifecycle_rows, seq)
}

/// A node with 1,500 failures (one correlation key), all post-mortemed, `failure_lifecycle`
/// analysed only while empty and never since: the statements each write runs, planned once while
/// the table was empty (a connection's cached generic plan, the case that made PATCH slow), read
/// the failure by its key and the lifecycles of its span by `failure_lifecycle_anchor_idx`, and
/// touch as many buffers for the node's last failure as for its first.
#[tokio::test]
async fn a_lifecycle_write_reads_one_span_whatever_the_statistics() {
    let source = squeezed(concat!(
        include_str!("../../src/storage/lifecycle.rs"),
        include_str!("../../src/storage/rollups.rs")
    ));
    for sql in [PROLOGUE, IN_FORCE_FOR_SPANS, FACTS_OF_FAILURES, ANCHOR] {
        assert!(
            source.contains(&squeezed(sql)),
            "not the source's statement any more: {sql}"
        );
    }
    let app = spawn_app().await;
    sqlx::query("ALTER TABLE failure_lifecycle SET (autovacuum_enabled = false)")
        .execute(&app.db)
        .await
        .unwrap();
    sqlx::query("ANALYZE failure_lifecycle").execute(&app.db).await.unwrap();
    const N: u32 = 1_500;
    let base = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap();
    let events: Vec<Value> = (0..N)
        .map(|i| {
            let at = base + chrono::Duration::hours(2 * i64::from(i));
            event(&uuid_n(1 + i), json!({"node": "n01", "occurred_at": at.to_rfc3339()}))
        })
        .collect();
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": events})).await;
    assert_eq!(status, 200, "{body}");
    let fs: Vec<(
        uuid::Uuid,
        String,
        chrono::DateTime<chrono::Utc>,
        chrono::DateTime<chrono::Utc>,
    )> = sqlx::query_as("SELECT id, correlation_key, first_at, last_at FROM failures ORDER BY first_at")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(fs.len(), N as usize);
    assert_eq!(fs[0].1, fs[fs.len() - 1].1, "one key");

    // One connection prepares the statements now, while failure_lifecycle is empty, and is told
    // to keep their generic plans (the worst case: what a pooled connection kept and reused).
    let mut conn = app.db.acquire().await.unwrap();
    let conn = &mut *conn;
    sqlx::query("SET plan_cache_mode = force_generic_plan")
        .execute(&mut *conn)
        .await
        .unwrap();
    let statements = [
        ("spans", IN_FORCE_FOR_SPANS),
        ("facts", FACTS_OF_FAILURES),
        ("anchor", ANCHOR),
    ];
    let args = |i: usize| {
        let (id, key, s, e) = &fs[i];
        [
            format!(
                "'c1', ARRAY['{key}'], ARRAY['{}'::timestamptz], ARRAY['{}'::timestamptz]",
                s.to_rfc3339(),
                e.to_rfc3339()
            ),
            format!("'c1', ARRAY['{id}'::uuid]"),
            format!("'{id}'"),
        ]
    };
    for ((name, sql), a) in statements.iter().zip(args(0)) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("PREPARE {name} AS {sql}")))
            .execute(&mut *conn)
            .await
            .unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("EXECUTE {name}({a})")))
            .execute(&mut *conn)
            .await
            .unwrap();
    }

    // Every failure gets its post-mortem (1,500 lifecycles on the key); no ANALYZE follows.
    for chunk in fs.chunks(1000) {
        let items: Vec<Value> = chunk
            .iter()
            .map(|(id, ..)| json!({"id": id, "patch": {"resolution": "drained", "root_cause": {"category": "platform", "component": "driver"}}}))
            .collect();
        let (status, body) = import(&app, ADMIN_TOKEN, &json!({"lifecycles": items})).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["changed"].as_u64(), Some(chunk.len() as u64));
    }
    let analyzed: Option<i64> =
        sqlx::query_scalar("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'failure_lifecycle'")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    assert!(analyzed.unwrap_or(0) <= 1, "analysed once, while empty");

    let explain = |name: &str, a: &str| format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE {name}({a})");
    // The problem, reproduced: the plan kept from the empty table reads every lifecycle of the
    // key (or of the cluster) for the node's last failure.
    let kept: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain("spans", &args(fs.len() - 1)[0])))
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    let (_, kept_rows, _) = cost_of(&kept);
    assert!(kept_rows >= 1000, "the kept plan reads {kept_rows} lifecycles: {kept}");

    // Under the write path's settings, each statement is planned for the table as it is.
    let mut costs = Vec::new();
    for i in [0, fs.len() - 1] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("BEGIN; {PROLOGUE}")))
            .execute(&mut *conn)
            .await
            .unwrap();
        for ((name, _), a) in statements.iter().zip(args(i)) {
            let explained: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain(name, &a)))
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            let (buffers, lifecycle_rows, seq) = cost_of(&explained);
            assert_eq!(seq, 0, "{name} of failure {i} scans a table: {explained}");
            assert!(
                lifecycle_rows <= 2,
                "{name} of failure {i} reads {lifecycle_rows} lifecycles: {explained}"
            );
            assert!(
                buffers <= 40,
                "{name} of failure {i} touches {buffers} buffers: {explained}"
            );
            costs.push((name, i, buffers));
        }
        sqlx::raw_sql("COMMIT").execute(&mut *conn).await.unwrap();
    }
    for k in 0..statements.len() {
        let (first, last) = (costs[k].2, costs[k + statements.len()].2);
        assert!(last <= 2 * first + 4 && first <= 2 * last + 4, "{costs:?}");
    }
}
