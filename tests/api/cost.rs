//! Failure lifecycle, node state, jobs and the cost analytics, on hand-built fixtures whose answers
//! are computed by hand in the comments.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, event, spawn_app, status_json, uuid_n};

const WINDOW: &str = "from=2026-11-01T00:00:00Z&to=2026-11-08T00:00:00Z&cluster=c1";

async fn register_fleet(app: &TestApp) {
    // 20 H100 nodes of 8 GPUs, in service for the whole window.
    let nodes: Vec<Value> = (0..20)
        .map(|i| json!({"hostname": format!("n{i:02}"), "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
                        "in_service_since": "2026-10-01T00:00:00Z"}))
        .collect();
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await;
    assert_eq!(status, 200, "{body}");
}

/// F1: XID 79 on n07 in job j1 at 2026-11-02 10:00, then NCCL timeouts from the 15 other nodes of j1.
fn cascade() -> Vec<Value> {
    let mut events = vec![event(
        &uuid_n(1),
        json!({"node": "n07", "job_id": "j1", "occurred_at": "2026-11-02T10:00:00Z"}),
    )];
    for i in 0..15u32 {
        let node = format!("n{:02}", if i >= 7 { i + 1 } else { i });
        events.push(event(
            &uuid_n(2 + i),
            json!({"node": node, "job_id": "j1", "kind": "nccl_timeout", "code": null, "symptom": "job_hang",
                   "occurred_at": format!("2026-11-02T10:0{}:00Z", 1 + i % 3), "message": "Watchdog caught collective operation timeout"}),
        ));
    }
    events
}

/// F2..F5 and the node transitions (see the test for the arithmetic).
fn others() -> Vec<Value> {
    vec![
        // F2, F3: uncorrectable ECC on n07 (no job).
        event(
            &uuid_n(101),
            json!({"node": "n07", "kind": "ecc", "code": 2, "occurred_at": "2026-11-03T10:00:00Z", "message": "DBE"}),
        ),
        event(
            &uuid_n(102),
            json!({"node": "n07", "kind": "ecc", "code": 2, "occurred_at": "2026-11-04T10:00:00Z", "message": "DBE"}),
        ),
        // F4: GPU OOM on n03.
        event(
            &uuid_n(103),
            json!({"node": "n03", "kind": "gpu_oom", "code": null, "occurred_at": "2026-11-05T10:00:00Z", "message": "CUDA out of memory"}),
        ),
        // F5: link flap on n05, drained 1 h later, returned 4 h after that (node signals, not failures).
        event(
            &uuid_n(104),
            json!({"node": "n05", "kind": "link_flap", "code": null, "occurred_at": "2026-11-06T10:00:00Z", "message": "mlx5_0 port 1 down/up"}),
        ),
        event(
            &uuid_n(105),
            json!({"node": "n05", "kind": "node_drain", "code": null, "occurred_at": "2026-11-06T11:00:00Z", "message": "link flapping"}),
        ),
        event(
            &uuid_n(106),
            json!({"node": "n05", "kind": "node_resume", "code": null, "occurred_at": "2026-11-06T15:00:00Z", "message": "cable replaced"}),
        ),
    ]
}

async fn patch(app: &TestApp, token: &str, id: &str, body: Value) -> (u16, Value) {
    let res = app
        .client
        .patch(app.url(&format!("/v1/failures/{id}")))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

async fn put_jobs(app: &TestApp, token: &str, body: Value) -> (u16, Value) {
    let res = app
        .client
        .put(app.url("/v1/jobs"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

async fn failure_ids(app: &TestApp) -> Vec<(String, String)> {
    let (status, body) = app.get(ADMIN_TOKEN, "/v1/failures?limit=1000").await;
    assert_eq!(status, 200);
    body["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["first_at"].as_str().unwrap().to_string(),
                f["id"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn id_at(app: &TestApp, first_at: &str) -> String {
    failure_ids(app)
        .await
        .into_iter()
        .find(|(t, _)| t == first_at)
        .unwrap_or_else(|| panic!("no failure at {first_at}"))
        .1
}

pub async fn csv(app: &TestApp, path: &str) -> (String, String) {
    let res = app
        .client
        .get(app.url(path))
        .bearer_auth(ADMIN_TOKEN)
        .header("accept", "text/csv")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let ct = res.headers()["content-type"].to_str().unwrap().to_string();
    (ct, res.text().await.unwrap())
}

/// Minimal RFC 4180 reader for the tests: quoted fields, doubled quotes, CRLF records.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = vec![];
    let mut row = vec![];
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        match (quoted, ch) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    rows
}

#[tokio::test]
async fn lifecycle_is_audited_validated_and_follows_a_rekeyed_failure() {
    let app = spawn_app().await;
    register_fleet(&app).await;
    let agent = app.token("agent", Some("c1")).await;
    let reader = app.token("reader", None).await;
    let mut events = cascade();
    let root = events.remove(0);
    // The timeouts arrive first; the failure's id is that of its earliest signal (10:01).
    app.post_events(ADMIN_TOKEN, &json!({"events": events})).await;
    let early = id_at(&app, "2026-11-02T10:01:00Z").await;

    let (status, v) = patch(&app, &agent, &early, json!({"resolution": "drained", "recovery_minutes": {"detection": 30, "resubmission": 9, "setup": 14, "recomputation": 15},
        "root_cause": {"category": "hardware", "component": "nvlink"}})).await;
    assert_eq!(status, 200, "{v}");
    // Unicron's GPT-3 example: 30 + 9 + 14 + 15 = 68 minutes.
    assert_eq!(v["downtime_minutes"], 68.0);
    assert_eq!(
        v["automatic_root_cause"],
        json!({"category": "unknown", "component": "unknown"})
    );
    assert_eq!(
        v["effective_root_cause"],
        json!({"category": "hardware", "component": "nvlink"})
    );
    assert_eq!(v["updated_by"], "agent-token");

    // Refusals: reader role, a component of another category, an empty patch, an unknown failure.
    assert_eq!(patch(&app, &reader, &early, json!({"note": "x"})).await.0, 403);
    let (status, body) = patch(
        &app,
        &agent,
        &early,
        json!({"root_cause": {"category": "user", "component": "nvlink"}}),
    )
    .await;
    assert_eq!((status, body["error"].as_str()), (422, Some("validation_failed")));
    assert_eq!(patch(&app, &agent, &early, json!({})).await.0, 400);
    assert_eq!(patch(&app, &agent, &early, json!({"resolution": "fixed"})).await.0, 400);
    assert_eq!(patch(&app, &agent, &uuid_n(999), json!({"note": "x"})).await.0, 404);
    let other = app.token("agent", Some("c2")).await;
    assert_eq!(patch(&app, &other, &early, json!({"note": "x"})).await.0, 403);

    let (status, v) = patch(
        &app,
        ADMIN_TOKEN,
        &early,
        json!({"note": "NVLink bridge reseated", "recovery_minutes": {"setup": null}}),
    )
    .await;
    assert_eq!(status, 200);
    // setup cleared: 30 + 9 + 15 = 54.
    assert_eq!(v["downtime_minutes"], 54.0);

    // The XID arrives late and earlier (10:00): the failure is re-keyed, the lifecycle follows it.
    app.post_events(ADMIN_TOKEN, &json!({"events": [root]})).await;
    let now_id = id_at(&app, "2026-11-02T10:00:00Z").await;
    assert_ne!(now_id, early);
    let (status, h) = app.get(&reader, &format!("/v1/failures/{now_id}/history")).await;
    assert_eq!(status, 200, "{h}");
    assert_eq!(h["lifecycle"]["lifecycle_id"], early.as_str());
    assert_eq!(
        h["lifecycle"]["automatic_root_cause"],
        json!({"category": "hardware", "component": "gpu"})
    );
    assert_eq!(h["lifecycle"]["effective_root_cause"]["component"], "nvlink");
    let changes = h["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[0]["changed_by"], "agent-token");
    assert_eq!(
        changes[0]["changes"]["recovery_minutes.detection"],
        json!({"from": null, "to": 30.0})
    );
    assert_eq!(changes[1]["changed_by"], "admin");
    assert_eq!(
        changes[1]["changes"]["recovery_minutes.setup"],
        json!({"from": 14.0, "to": null})
    );
    // A patch on the new id updates the same lifecycle; the evidence (the failure) is untouched.
    let (_, v) = patch(&app, &agent, &now_id, json!({"resolution": "other"})).await;
    assert_eq!(
        (v["lifecycle_id"].as_str(), v["resolution"].as_str()),
        (Some(early.as_str()), Some("other"))
    );
    let (_, f) = app.get(ADMIN_TOKEN, &format!("/v1/failures/{now_id}")).await;
    assert_eq!(
        f["failure"]["root_cause"],
        json!({"category": "hardware", "component": "gpu"})
    );
    assert_eq!(app.get(&reader, &format!("/v1/failures/{early}/history")).await.0, 404);
}

#[tokio::test]
async fn jobs_are_upserted_in_bulk_and_bad_items_rejected_alone() {
    let app = spawn_app().await;
    let agent = app.token("agent", Some("c1")).await;
    let jobs = json!({"jobs": [
        {"id": "j1", "cluster": "c1", "gpus": 128, "nodes": ["n00", "n01"], "start": "2026-11-02T09:00:00Z", "end": "2026-11-02T19:00:00Z", "state": "failed"},
        {"id": "j2", "cluster": "c1", "gpus": 0, "start": "2026-11-02T09:00:00Z", "end": "2026-11-02T19:00:00Z", "state": "completed"},
        {"id": "j3", "cluster": "c2", "gpus": 8, "start": "2026-11-02T09:00:00Z", "state": "running"},
        {"id": "j4", "cluster": "c1", "gpus": 8, "start": "2026-11-02T09:00:00Z", "state": "running"},
        {"id": "j1", "cluster": "c1", "gpus": 8, "start": "2026-11-02T09:00:00Z", "state": "running"}
    ]});
    let (status, body) = put_jobs(&app, &agent, jobs).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["upserted"], 2);
    let reasons: Vec<(u64, &str)> = body["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["index"].as_u64().unwrap(), r["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        reasons,
        [
            (1, "invalid_field"),
            (2, "forbidden_cluster"),
            (4, "duplicate_in_batch")
        ]
    );
    // Sent again when it ends: replaced.
    let (status, _) = put_jobs(&app, &agent, json!({"jobs": [{"id": "j4", "cluster": "c1", "gpus": 8, "start": "2026-11-02T09:00:00Z", "end": "2026-11-02T10:00:00Z", "state": "completed"}]})).await;
    assert_eq!(status, 200);
    assert_eq!(
        app.count("SELECT count(*) FROM jobs WHERE state = 'completed' AND array_length(nodes, 1) IS NULL")
            .await,
        1
    );
    assert_eq!(
        app.count("SELECT count(*) FROM jobs WHERE job_id = 'j1' AND nodes = ARRAY['n00', 'n01']")
            .await,
        1
    );
    let reader = app.token("reader", None).await;
    assert_eq!(put_jobs(&app, &reader, json!({"jobs": [{"id": "x"}]})).await.0, 403);
    assert_eq!(put_jobs(&app, &agent, json!({"jobs": []})).await.0, 400);
    assert_eq!(put_jobs(&app, &agent, json!({"jobs": [{"id": "x"}]})).await.0, 422);
}

#[tokio::test]
async fn node_state_gives_out_of_service_time() {
    let app = spawn_app().await;
    register_fleet(&app).await;
    let agent = app.token("agent", Some("c1")).await;
    let post = |body: Value, host: &'static str| {
        let app = &app;
        let agent = agent.clone();
        async move {
            let res = app
                .client
                .post(app.url(&format!("/v1/nodes/c1/{host}/state")))
                .bearer_auth(&agent)
                .json(&body)
                .send()
                .await
                .unwrap();
            status_json(res).await
        }
    };
    let (status, v) = post(
        json!({"state": "drained", "at": "2026-11-07T00:00:00Z", "reason": "ECC storm"}),
        "n07",
    )
    .await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["state"], "drained");
    assert_eq!(post(json!({"state": "drained"}), "n99").await.0, 404);
    assert_eq!(post(json!({"state": "asleep"}), "n07").await.0, 400);
    post(json!({"state": "returned", "at": "2026-11-07T06:00:00Z"}), "n07").await;
    let (status, v) = app.get(ADMIN_TOKEN, &format!("/v1/nodes/c1/n07/state?{WINDOW}")).await;
    assert_eq!(status, 200, "{v}");
    // Drained 00:00 to 06:00: 6 h, x 8 GPUs = 48 GPU-hours.
    assert_eq!(
        (
            v["out_of_service_hours"].as_f64(),
            v["out_of_service_gpu_hours"].as_f64(),
            v["state"].as_str()
        ),
        (Some(6.0), Some(48.0), Some("returned"))
    );
    assert_eq!(v["transitions"].as_array().unwrap().len(), 2);
}

/// The five failures of the window 2026-11-01 .. 11-08 with lifecycles, jobs and drains.
async fn fixture(app: &TestApp) {
    register_fleet(app).await;
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": cascade()})).await;
    assert_eq!(status, 200, "{body}");
    app.post_events(ADMIN_TOKEN, &json!({"events": others()})).await;
    // Jobs: j1 128 GPUs 10 h (failed), j2 8 GPUs 24 h.
    let (status, _) = put_jobs(app, ADMIN_TOKEN, json!({"jobs": [
        {"id": "j1", "cluster": "c1", "gpus": 128, "start": "2026-11-02T09:00:00Z", "end": "2026-11-02T19:00:00Z", "state": "failed"},
        {"id": "j2", "cluster": "c1", "gpus": 8, "start": "2026-11-03T00:00:00Z", "end": "2026-11-04T00:00:00Z", "state": "completed"}
    ]})).await;
    assert_eq!(status, 200);
    let f1 = id_at(app, "2026-11-02T10:00:00Z").await;
    patch(app, ADMIN_TOKEN, &f1, json!({"resolution": "drained", "recovery_minutes": {"detection": 30, "resubmission": 9, "setup": 14, "recomputation": 15}})).await;
    // F4: restarted 20 minutes later; the post-mortem blames the framework, not the user.
    let f4 = id_at(app, "2026-11-05T10:00:00Z").await;
    let (status, body) = patch(
        app,
        ADMIN_TOKEN,
        &f4,
        json!({"resolution": "transient_restart", "resolved_at": "2026-11-05T10:20:00Z",
        "root_cause": {"category": "platform", "component": "framework"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // n07 drained by the API on the 7th and never returned inside the window.
    let res = app
        .client
        .post(app.url("/v1/nodes/c1/n07/state"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"state": "drained", "at": "2026-11-07T00:00:00Z"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
}

#[tokio::test]
async fn recovery_by_hand_and_as_csv() {
    let app = spawn_app().await;
    fixture(&app).await;
    let (status, r) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/recovery?{WINDOW}")).await;
    assert_eq!(status, 200, "{r}");
    let s = &r["summary"];
    assert_eq!(s["failures"], 5);
    // Known downtimes: F1 68 (phases), F4 20 (resolved_at - first signal). Mean 44, median 44,
    // p90 = 20 + 0.9 x (68 - 20) = 63.2.
    assert_eq!(
        s["downtime_minutes"],
        json!({"count": 2, "mean": 44.0, "median": 44.0, "p90": 63.2, "total": 88.0})
    );
    assert_eq!(s["failures_without_downtime"], 3);
    assert_eq!(
        s["phases"][0],
        json!({"phase": "detection", "minutes": {"count": 1, "mean": 30.0, "median": 30.0, "p90": 30.0, "total": 30.0},
        "share_of_phase_minutes": 0.441176})
    );
    // Transient: F4 (restart) and F5 (link flap, catalog transient); F1 drained, F2/F3 ECC not: 2 / 5.
    assert_eq!(
        (s["transient_failures"].as_u64(), s["transient_share"].as_f64()),
        (Some(2), Some(0.4))
    );
    // Hardware (effective): F1, F2, F3, F5 (F4 is platform after its post-mortem). Drained: F1 by its
    // resolution, F5 by the node_drain 1 h after its first signal: 2 / 4.
    assert_eq!(
        (
            s["hardware_failures"].as_u64(),
            s["hardware_failures_drained"].as_u64(),
            s["hardware_drain_share"].as_f64()
        ),
        (Some(4), Some(2), Some(0.5))
    );
    // GPU-hours lost: F1 68/60 x 128 (job j1) = 145.066667; F4 20/60 x 8 (its node n03) = 2.666667.
    assert_eq!(s["gpu_hours_lost"], 147.733333);
    // Out of service: n05 11:00-15:00 (4 h) + n07 from the 7th to the window end (24 h) = 28 h x 8 GPUs.
    assert_eq!(
        r["out_of_service"],
        json!({"nodes_drained": 2, "node_hours": 28.0, "gpu_hours": 224.0})
    );
    // ETTR: j1 (10 - 68/60) / 10 = 0.886667; j2 1. Fleet (1280 - 145.066667 + 192) / 1472 = 0.901449.
    let e = &r["ettr"];
    assert_eq!(
        (e["fleet"]["ettr"].as_f64(), e["fleet"]["gpu_hours"].as_f64()),
        (Some(0.901449), Some(1472.0))
    );
    assert_eq!(
        (e["jobs"][0]["job_id"].as_str(), e["jobs"][0]["ettr"].as_f64()),
        (Some("j1"), Some(0.886667))
    );

    let (ct, text) = csv(&app, &format!("/v1/analytics/recovery?{WINDOW}")).await;
    assert!(ct.starts_with("text/csv"), "{ct}");
    let rows = parse_csv(&text);
    assert_eq!(rows[0][..3], ["failure_id", "cluster", "job_id"]);
    assert_eq!(rows.len(), 1 + 5);
    let f1 = rows.iter().find(|r| r[2] == "j1").unwrap();
    assert_eq!(
        (f1[8].as_str(), f1[13].as_str(), f1[14].as_str()),
        ("68", "128", "145.066667")
    );
    // Readers may query; agents may not.
    let agent = app.token("agent", None).await;
    assert_eq!(app.get(&agent, "/v1/analytics/recovery").await.0, 403);
    assert_eq!(
        app.get(ADMIN_TOKEN, "/v1/analytics/recovery?drain_horizon_hours=-1")
            .await
            .0,
        400
    );
}

#[tokio::test]
async fn top_errors_concentration_timeline_and_baselines_by_hand() {
    let app = spawn_app().await;
    fixture(&app).await;
    let (status, t) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/top-errors?{WINDOW}"))
        .await;
    assert_eq!(status, 200, "{t}");
    // 5 failures, 16 + 4 = 20 signals. Root: ECC 2 on F2 and F3: 2 / 5 = 0.4.
    assert_eq!((t["failures"].as_u64(), t["signals"].as_u64()), (Some(5), Some(20)));
    assert_eq!(t["root_signals"][0]["label"], "ecc 2");
    assert_eq!(
        (
            t["root_signals"][0]["share"].as_f64(),
            t["root_signals"][0]["severity"].as_str()
        ),
        (Some(0.4), Some("critical"))
    );
    // All signals: the NCCL timeout is in 1 of 5 failures (0.2) but 15 of 20 signals (0.75); it is no root.
    let nccl = t["all_signals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "nccl_timeout")
        .unwrap();
    assert_eq!(
        (nccl["share"].as_f64(), nccl["signal_share"].as_f64()),
        (Some(0.2), Some(0.75))
    );
    assert!(
        t["root_signals"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["kind"] != "nccl_timeout")
    );

    let (status, c) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/node-concentration?{WINDOW}"))
        .await;
    assert_eq!(status, 200, "{c}");
    // 20 nodes; root nodes n07 x3, n03, n05. Worst 1% and 5% = 1 node: 3 / 5 = 0.6; 10% = 2 nodes: 4 / 5.
    let tiers: Vec<(u64, f64)> = c["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["nodes"].as_u64().unwrap(), t["share"].as_f64().unwrap()))
        .collect();
    assert_eq!(tiers, [(1, 0.6), (1, 0.6), (2, 0.8)]);
    assert_eq!(
        (c["nodes"].as_u64(), c["node_attributed_share"].as_f64()),
        (Some(20), Some(1.0))
    );
    let offenders = c["repeat_offenders"].as_array().unwrap();
    assert_eq!(offenders.len(), 1);
    assert_eq!(
        (offenders[0]["hostname"].as_str(), offenders[0]["drained"].as_bool()),
        (Some("n07"), Some(true))
    );
    let history: Vec<&str> = offenders[0]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["root_kind"].as_str().unwrap())
        .collect();
    assert_eq!(history, ["xid", "ecc", "ecc"]);
    assert_eq!(
        app.get(ADMIN_TOKEN, &format!("/v1/analytics/node-concentration?{WINDOW}&k=1"))
            .await
            .1["repeat_offenders"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // Timeline: F1 2nd, F2 3rd, F3 4th, F5 6th hardware; F4 5th platform by its post-mortem.
    let (_, tl) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/timeline?{WINDOW}")).await;
    let points = tl["points"].as_array().unwrap();
    assert_eq!(points.len(), 7);
    let hw: Vec<u64> = points.iter().map(|p| p["hardware"].as_u64().unwrap()).collect();
    assert_eq!(hw, [0, 1, 1, 1, 0, 1, 0]);
    assert_eq!(
        (points[4]["platform"].as_u64(), points[4]["user"].as_u64()),
        (Some(1), Some(0))
    );
    let (_, text) = csv(&app, &format!("/v1/analytics/timeline?{WINDOW}&period=week")).await;
    // 2026-10-26 (Monday) holds the 1st; 2026-11-02 the rest.
    assert_eq!(
        parse_csv(&text),
        [
            vec!["period", "hardware", "platform", "user", "unknown", "total"],
            vec!["2026-10-26", "0", "0", "0", "0", "0"],
            vec!["2026-11-02", "4", "1", "0", "0", "5"],
        ]
    );

    let (status, b) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/baselines?{WINDOW}")).await;
    assert_eq!(status, 200, "{b}");
    let find = |measure: &str, source: &str| {
        b["baselines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["measure"] == measure && r["source"].as_str().unwrap().contains(source))
            .cloned()
            .unwrap()
    };
    // Hardware share 4 / 5 = 0.8 against Llama 3's 0.78.
    let hw = find("hardware share of failures", "Llama 3");
    assert_eq!(
        (hw["published"].as_f64(), hw["fleet"].as_f64(), hw["basis"].as_str()),
        (Some(0.78), Some(0.8), Some("4 of 5 failures"))
    );
    // Unicron's failure types are matched on the root signal: the NCCL timeout is in 1 of the 5
    // failures but the root of none; ECC is the root of F2 and F3: 2 / 5.
    assert_eq!(find("NCCL timeout share of failures", "Unicron")["fleet"], 0.0);
    assert_eq!(find("ECC error share of failures", "Unicron")["fleet"], 0.4);
    assert_eq!(find("mean downtime per failure", "Unicron")["fleet"], 44.0);
    // Largest 5% of 2 jobs = 1 job (j1, 128 GPUs), failed: 1.0.
    assert_eq!(find("failure rate of the 5% largest jobs", "Unicron")["fleet"], 1.0);
    // 160 GPUs x 168 h = 26,880 GPU-hours = 210 group-hours; 5 failures: 5 / 210 x 168 = 4 per week.
    assert_eq!(find("failures per week of a 128-GPU group", "Unicron")["fleet"], 4.0);
    let (_, text) = csv(&app, &format!("/v1/analytics/baselines?{WINDOW}")).await;
    let rows = parse_csv(&text);
    assert_eq!(
        rows[0],
        [
            "measure",
            "published",
            "published_low",
            "published_high",
            "unit",
            "source",
            "fleet",
            "basis",
            "definition"
        ]
    );
    assert!(rows.iter().all(|r| r.len() == 9));
    // A source with a comma is quoted and still parses into one field.
    assert!(
        rows.iter()
            .any(|r| r[5] == "Unicron (2023), one GPT-3 recovery: 30 + 9 + 14 + 15 min")
    );
}

#[tokio::test]
async fn job_size_stragglers_and_efficiency_by_hand() {
    let app = spawn_app().await;
    fixture(&app).await;
    let (status, j) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/job-size?{WINDOW}")).await;
    assert_eq!(status, 200, "{j}");
    // j2 (8 GPUs, 24 h, completed, no failure) in 1-8; j1 (128 GPUs, 10 h, failed, F1) in 65-128: MTTF 10 h.
    assert_eq!(
        (
            j["buckets"][0]["jobs"].as_u64(),
            j["buckets"][0]["failure_rate"].as_f64()
        ),
        (Some(1), Some(0.0))
    );
    assert_eq!(
        (
            j["buckets"][2]["failures"].as_u64(),
            j["buckets"][2]["mttf_hours"].as_f64()
        ),
        (Some(1), Some(10.0))
    );
    // Projection: 5 node failures / (20 nodes x 7 days) = 0.035714 per node-day; 8 GPUs per node;
    // 1024 GPUs = 128 nodes: MTTF = 24 / (128 x 5/140) = 5.25 h.
    let p = &j["projection"];
    assert_eq!(
        (p["failures_per_node_day"].as_f64(), p["gpus_per_node"].as_f64()),
        (Some(0.035714), Some(8.0))
    );
    let p1024 = p["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["gpus"] == 1024)
        .unwrap();
    assert_eq!(
        (p1024["nodes"].as_u64(), p1024["mttf_hours"].as_f64()),
        (Some(128), Some(5.25))
    );

    // Stragglers: n02 in j2 slows to 2x at 3rd 10:00 and 1.5x at 10:20 (one episode, 10-minute samples),
    // n04 at 1.05x (below the 1.1 threshold), and a signal without a ratio.
    let slow = |n: u32, node: &str, at: &str, attrs: Value| {
        event(
            &uuid_n(n),
            json!({"node": node, "job_id": "j2", "kind": "slowdown", "code": null, "symptom": "slowdown", "occurred_at": at, "attributes": attrs}),
        )
    };
    let mut events = vec![
        slow(201, "n02", "2026-11-03T10:00:00Z", json!({"step_time_ratio": 2.0})),
        slow(
            202,
            "n02",
            "2026-11-03T10:20:00Z",
            json!({"throughput_ratio": 0.666666667}),
        ),
        slow(203, "n04", "2026-11-03T10:00:00Z", json!({"step_time_ratio": 1.05})),
        slow(204, "n04", "2026-11-03T11:00:00Z", json!({})),
    ];
    // Low utilisation: 2 batch_size, 1 host_to_device_transfer (30 min), 1 without a cause.
    for (i, cause) in [
        Some("batch_size"),
        Some("batch_size"),
        Some("host_to_device_transfer"),
        None,
    ]
    .iter()
    .enumerate()
    {
        let mut attrs = json!({});
        if let Some(c) = cause {
            attrs["cause"] = json!(c);
        }
        if *cause == Some("host_to_device_transfer") {
            attrs["duration_seconds"] = json!(1800);
        }
        events.push(event(
            &uuid_n(300 + i as u32),
            json!({"node": "n09", "kind": "low_utilization", "code": null, "symptom": "none",
            "occurred_at": format!("2026-11-04T0{i}:00:00Z"), "attributes": attrs}),
        ));
    }
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": events})).await;
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(8)), "{body}");
    // None of these is a failure.
    assert_eq!(
        app.get(ADMIN_TOKEN, &format!("/v1/analytics/top-errors?{WINDOW}"))
            .await
            .1["failures"],
        5
    );

    let (status, s) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/stragglers?{WINDOW}"))
        .await;
    assert_eq!(status, 200, "{s}");
    // 1 of 20 nodes straggles: 0.05. Wasted (job j2, 8 GPUs, 1/6 h each): 8/6 x (1 - 1/2) = 0.666667,
    // + 8/6 x (1 - 0.666666667) = 0.444444: 1.111111.
    assert_eq!(
        (s["straggler_nodes"].as_u64(), s["straggler_node_share"].as_f64()),
        (Some(1), Some(0.05))
    );
    assert_eq!(
        (s["slowdown_signals"].as_u64(), s["signals_without_ratio"].as_u64()),
        (Some(4), Some(1))
    );
    assert_eq!(s["episodes"].as_array().unwrap().len(), 1);
    assert_eq!(s["episodes"][0]["start"], "2026-11-03T09:50:00Z");
    assert_eq!(s["gpu_hours_wasted"], 1.111111);

    let (status, e) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/efficiency?{WINDOW}"))
        .await;
    assert_eq!(status, 200, "{e}");
    // 4 incidents: batch size 2 / 4 = 0.5; host-to-GPU 0.25 with 0.5 h; model-related 0.5, data 0.25, other 0.25.
    let get = |v: &Value, c: &str| v.as_array().unwrap().iter().find(|r| r["cause"] == c).cloned().unwrap();
    assert_eq!(e["incidents"], 4);
    assert_eq!(get(&e["fine"], "batch_size")["share"], 0.5);
    assert_eq!(
        (
            get(&e["fine"], "host_to_device_transfer")["share"].as_f64(),
            get(&e["fine"], "host_to_device_transfer")["hours"].as_f64()
        ),
        (Some(0.25), Some(0.5))
    );
    assert_eq!(
        (
            get(&e["coarse"], "model")["share"].as_f64(),
            get(&e["coarse"], "data")["share"].as_f64(),
            get(&e["coarse"], "other")["share"].as_f64()
        ),
        (Some(0.5), Some(0.25), Some(0.25))
    );
    let (_, text) = csv(&app, &format!("/v1/analytics/efficiency?{WINDOW}")).await;
    let rows = parse_csv(&text);
    assert_eq!(rows[0], ["level", "cause", "coarse", "incidents", "share", "hours"]);
    // The six causes of the taxonomy always, `unspecified` because one incident named none; 3 coarse rows.
    assert_eq!(rows.len(), 1 + 7 + 3);
}

#[tokio::test]
async fn recovery_by_cause_by_hand_and_filtered() {
    let app = spawn_app().await;
    fixture(&app).await;
    // F2 (ECC) repaired in 40 min; F3 (ECC) in 10 min, its post-mortem moving it to hardware/gpu.
    let f2 = id_at(&app, "2026-11-03T10:00:00Z").await;
    let (status, body) = patch(&app, ADMIN_TOKEN, &f2, json!({"resolved_at": "2026-11-03T10:40:00Z"})).await;
    assert_eq!(status, 200, "{body}");
    let f3 = id_at(&app, "2026-11-04T10:00:00Z").await;
    let (status, body) = patch(
        &app,
        ADMIN_TOKEN,
        &f3,
        json!({"resolved_at": "2026-11-04T10:10:00Z", "root_cause": {"category": "hardware", "component": "gpu"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, r) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/recovery?{WINDOW}")).await;
    assert_eq!(status, 200, "{r}");
    let row = |cat: &str, comp: Option<&str>| -> Value {
        r["by_cause"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["category"] == cat && x["component"].as_str() == comp)
            .cloned()
            .unwrap_or_else(|| panic!("no row {cat}/{comp:?} in {}", r["by_cause"]))
    };
    // hardware/gpu: F1 68 (phases) and F3 10 (moved by its post-mortem from gpu_memory): mean and
    // median 39, p90 = 10 + 0.9 x (68 - 10) = 62.2.
    assert_eq!(
        row("hardware", Some("gpu")),
        json!({"category": "hardware", "component": "gpu", "failures": 2, "failures_without_downtime": 0,
               "downtime_minutes": {"count": 2, "mean": 39.0, "median": 39.0, "p90": 62.2, "total": 78.0}})
    );
    // hardware/gpu_memory: F2 alone, 40.
    assert_eq!(
        row("hardware", Some("gpu_memory"))["downtime_minutes"],
        json!({"count": 1, "mean": 40.0, "median": 40.0, "p90": 40.0, "total": 40.0})
    );
    // hardware subtotal: F1, F2, F3, F5 (F5 unresolved): 10, 40, 68: mean 118/3 = 39.333333,
    // median 40, p90 at rank 1.8 = 40 + 0.8 x (68 - 40) = 62.4.
    assert_eq!(
        row("hardware", None),
        json!({"category": "hardware", "component": null, "failures": 4, "failures_without_downtime": 1,
               "downtime_minutes": {"count": 3, "mean": 39.333333, "median": 40.0, "p90": 62.4, "total": 118.0}})
    );
    // F4: the GPU OOM the post-mortem moved to platform/framework, 20 min; no user row is left.
    assert_eq!(row("platform", Some("framework"))["downtime_minutes"]["median"], 20.0);
    assert_eq!(row("platform", None)["failures"], 1);
    assert!(
        r["by_cause"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["category"] != "user")
    );
    // Subtotals first, categories in the taxonomy's order.
    assert_eq!(r["by_cause"][0]["component"], Value::Null);
    assert_eq!(r["by_cause"][0]["category"], "hardware");

    // Filters restrict every failure figure.
    let (status, h) = app
        .get(
            ADMIN_TOKEN,
            &format!("/v1/analytics/recovery?{WINDOW}&category=hardware"),
        )
        .await;
    assert_eq!(status, 200, "{h}");
    assert_eq!(h["cause"], json!({"category": "hardware", "component": null}));
    assert_eq!(h["summary"]["failures"], 4);
    assert_eq!(
        h["summary"]["downtime_minutes"],
        row("hardware", None)["downtime_minutes"]
    );
    assert_eq!(h["by_cause"].as_array().unwrap().len(), 4);
    assert_eq!(h["out_of_service"], Value::Null);
    // j1's downtime is F1's (hardware): (10 - 68/60) / 10.
    assert_eq!(h["ettr"]["jobs"][0]["ettr"], 0.886667);
    let (status, p) = app
        .get(
            ADMIN_TOKEN,
            &format!("/v1/analytics/recovery?{WINDOW}&category=platform&component=framework"),
        )
        .await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["summary"]["failures"], 1);
    assert_eq!(p["summary"]["downtime_minutes"]["total"], 20.0);
    // No platform failure names a job: every job's ETTR is 1.
    assert_eq!(p["ettr"]["jobs"][0]["ettr"], 1.0);
    let (status, g) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/recovery?{WINDOW}&component=gpu"))
        .await;
    assert_eq!(status, 200, "{g}");
    assert_eq!(
        g["summary"]["downtime_minutes"],
        row("hardware", Some("gpu"))["downtime_minutes"]
    );
    // CSV: the failures of the cause, their component in the last column.
    let (_, text) = csv(&app, &format!("/v1/analytics/recovery?{WINDOW}&component=gpu")).await;
    let rows = parse_csv(&text);
    assert_eq!(rows.len(), 1 + 2, "{text}");
    assert_eq!(rows[0].last().map(String::as_str), Some("component"));
    assert!(rows[1..].iter().all(|x| x.last().map(String::as_str) == Some("gpu")));

    // Bad filters: 400 naming the parameter.
    for (q, name) in [
        ("category=hardware&component=oom", "component"),
        ("category=bogus", "category"),
        ("component=bogus", "component"),
    ] {
        let (status, e) = app
            .get(ADMIN_TOKEN, &format!("/v1/analytics/recovery?{WINDOW}&{q}"))
            .await;
        assert_eq!(status, 400, "{q}: {e}");
        assert!(e.to_string().contains(&format!("`{name}`")), "{q}: {e}");
    }
}
