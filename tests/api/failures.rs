use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, event, join_all, spawn_app, uuid_n};

async fn register_fleet(app: &TestApp) {
    let mut nodes: Vec<Value> = (0..16)
        .map(|i| json!({"hostname": format!("n{i:02}"), "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
                        "in_service_since": "2026-10-01T00:00:00Z"}))
        .collect();
    nodes.extend((0..4).map(|i| {
        json!({"hostname": format!("a{i:02}"), "cluster": "c1", "gpu_model": "A100-SXM4-80GB", "gpu_count": 8,
                                        "in_service_since": "2026-10-01T00:00:00Z"})
    }));
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await;
    assert_eq!(status, 200, "{body}");
}

/// XID 79 on n07 at 10:00, then NCCL timeouts from 15 other nodes of job j1 within 3 minutes.
fn cascade(first_id: u32) -> Vec<Value> {
    let mut events = vec![event(
        &uuid_n(first_id),
        json!({"node": "n07", "job_id": "j1", "occurred_at": "2026-11-02T10:00:00Z", "gpu_index": 3}),
    )];
    for i in 0..15u32 {
        let node = format!("n{:02}", if i >= 7 { i + 1 } else { i });
        events.push(event(
            &uuid_n(first_id + 1 + i),
            json!({"node": node, "job_id": "j1", "kind": "nccl_timeout", "code": null, "symptom": "job_hang",
                   "occurred_at": format!("2026-11-02T10:0{}:00Z", 1 + i % 3), "message": "Watchdog caught collective operation timeout"}),
        ));
    }
    events
}

async fn failures(app: &TestApp, query: &str) -> Vec<Value> {
    let (status, body) = app.get(ADMIN_TOKEN, &format!("/v1/failures{query}")).await;
    assert_eq!(status, 200, "{body}");
    body["failures"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_cascade_is_one_hardware_failure_with_its_signals() {
    let app = spawn_app().await;
    register_fleet(&app).await;
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": cascade(1)})).await;
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(16)));
    let list = failures(&app, "").await;
    assert_eq!(list.len(), 1);
    let f = &list[0];
    assert_eq!(f["root_cause"], json!({"category": "hardware", "component": "gpu"}));
    assert_eq!(
        (f["root_node"].as_str(), f["gpu_generation"].as_str()),
        (Some("n07"), Some("hopper"))
    );
    assert_eq!(
        (f["signal_count"].as_i64(), f["nodes"].as_array().unwrap().len()),
        (Some(16), 16)
    );
    assert_eq!(
        (f["root_kind"].as_str(), f["root_code"].as_i64(), f["rule_id"].as_str()),
        (Some("xid"), Some(79), Some("xid-79"))
    );
    assert_eq!(
        (f["symptom"].as_str(), f["job_id"].as_str()),
        (Some("job_hang"), Some("j1"))
    );
    assert_eq!(
        (f["first_at"].as_str(), f["last_at"].as_str()),
        (Some("2026-11-02T10:00:00Z"), Some("2026-11-02T10:03:00Z"))
    );
    let (status, detail) = app
        .get(ADMIN_TOKEN, &format!("/v1/failures/{}", f["id"].as_str().unwrap()))
        .await;
    assert_eq!(status, 200);
    let signals = detail["signals"].as_array().unwrap();
    assert_eq!(signals.len(), 16);
    assert_eq!(signals[0]["kind"], "xid");
    assert_eq!(signals[1]["secondary"], true);
    assert_eq!(signals[1]["root_cause"]["category"], "unknown");
    // Filters.
    assert_eq!(
        failures(&app, "?category=hardware&generation=hopper&node=n03&job=j1")
            .await
            .len(),
        1
    );
    assert_eq!(failures(&app, "?category=user").await.len(), 0);
    assert_eq!(failures(&app, "?from=2026-11-03T00:00:00Z").await.len(), 0);
    let (status, _) = app.get(ADMIN_TOKEN, "/v1/failures?category=cosmic").await;
    assert_eq!(status, 400);
    let (status, body) = app.get(ADMIN_TOKEN, &format!("/v1/failures/{}", uuid_n(999))).await;
    assert_eq!((status, body["error"].as_str()), (404, Some("not_found")));
}

#[tokio::test]
async fn arrival_order_does_not_change_failures_and_late_signals_join() {
    let in_order = spawn_app().await;
    in_order.post_events(ADMIN_TOKEN, &json!({"events": cascade(1)})).await;
    let reordered = spawn_app().await;
    let mut events = cascade(1);
    let root = events.remove(0);
    events.reverse();
    // The timeouts arrive first: the failure is unknown until the XID arrives late.
    let (status, _) = reordered
        .post_events(ADMIN_TOKEN, &json!({"events": events[..7]}))
        .await;
    assert_eq!(status, 200);
    reordered
        .post_events(ADMIN_TOKEN, &json!({"events": events[7..]}))
        .await;
    let early = failures(&reordered, "").await;
    assert_eq!(early.len(), 1);
    assert_eq!(early[0]["root_cause"]["category"], "unknown");
    reordered.post_events(ADMIN_TOKEN, &json!({"events": [root]})).await;
    let a = failures(&in_order, "").await;
    let b = failures(&reordered, "").await;
    assert_eq!(b.len(), 1);
    for field in [
        "id",
        "root_cause",
        "root_signal",
        "first_at",
        "last_at",
        "signal_count",
        "nodes",
    ] {
        assert_eq!(a[0][field], b[0][field], "{field}");
    }
    // A later failure of the same job, more than 10 minutes on, is a second failure.
    in_order
        .post_events(ADMIN_TOKEN, &json!({"events": [event(&uuid_n(500), json!({"node": "n01", "job_id": "j1", "kind": "gpu_oom", "code": null,
            "occurred_at": "2026-11-02T10:30:00Z", "message": "CUDA out of memory"}))]}))
        .await;
    let both = failures(&in_order, "").await;
    assert_eq!(both.len(), 2);
    assert_eq!(both[0]["root_cause"], json!({"category": "user", "component": "oom"}));
}

#[tokio::test]
async fn explicit_root_cause_wins_and_a_catalog_edit_reclassifies() {
    let app = spawn_app().await;
    register_fleet(&app).await;
    app.post_events(ADMIN_TOKEN, &json!({"events": cascade(1)})).await;
    app.post_events(
        ADMIN_TOKEN,
        &json!({"events": [event(&uuid_n(100), json!({"node": "a01", "kind": "nccl_timeout", "code": null,
        "occurred_at": "2026-11-03T00:00:00Z", "root_cause": {"category": "platform", "component": "storage"}}))]}),
    )
    .await;
    let list = failures(&app, "").await;
    assert_eq!(
        list[0]["root_cause"],
        json!({"category": "platform", "component": "storage"})
    );
    assert_eq!(list[0]["explicit_cause"], true);
    assert_eq!(list[0]["catalog_version"], 1);

    let (status, rules) = app.get(ADMIN_TOKEN, "/v1/classification-rules?kind=xid").await;
    assert_eq!(status, 200);
    assert!(rules["rules"].as_array().unwrap().len() > 30);
    let reader = app.token("reader", None).await;
    let rule = json!({"kind": "xid", "code": 79, "priority": 200, "category": "platform", "component": "driver", "severity": "high",
                      "transient": true, "secondary": false, "action": "reset_gpu", "description": "site override", "source": "post-mortem 42"});
    let res = app
        .client
        .put(app.url("/v1/classification-rules/xid-79"))
        .bearer_auth(&reader)
        .json(&rule)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = app
        .client
        .put(app.url("/v1/classification-rules/xid-79"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&rule)
        .send()
        .await
        .unwrap();
    let (status, change) = crate::helpers::catalog_edit(&app.address, res).await;
    assert_eq!(status, 202, "{change}");
    assert_eq!(
        (change["catalog_version"].as_i64(), change["rebuild"]["done"].as_u64()),
        (Some(2), Some(2))
    );
    let list = failures(&app, "").await;
    let cascade_failure = list.iter().find(|f| f["job_id"] == "j1").unwrap();
    assert_eq!(
        cascade_failure["root_cause"],
        json!({"category": "platform", "component": "driver"})
    );
    assert!(list.iter().all(|f| f["catalog_version"] == 2));
    // The explicit cause is untouched by the catalog.
    assert!(list.iter().any(|f| f["root_cause"]["component"] == "storage"));
    let mut bad = rule.clone();
    bad["component"] = json!("gpu");
    let res = app
        .client
        .put(app.url("/v1/classification-rules/xid-79"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&bad)
        .send()
        .await
        .unwrap();
    let (status, body) = crate::helpers::status_json(res).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_rule")));
    let res = app
        .client
        .delete(app.url("/v1/classification-rules/nope"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
}

/// Fixture with hand-computed answers. Window: 2026-11-01 to 2026-11-08 (7 days, 168 h).
/// Fleet: 16 H100 nodes (128 GPUs, group "su1") and 4 A100 nodes (32 GPUs, unlabelled), all in
/// service since October. Failures (each a lone signal on a node, > 10 min apart):
///   hopper: 3 x XID 79 (hardware/gpu) on n01, n01, n02; 1 gpu_oom (user/oom) on n03
///   ampere: 2 x storage_error with explicit platform/storage on a00
///   no node: 1 scheduler_error (platform/scheduler)
#[tokio::test]
async fn headline_analytics_match_hand_computed_numbers() {
    let app = spawn_app().await;
    let mut nodes: Vec<Value> = (0..16)
        .map(|i| json!({"hostname": format!("n{i:02}"), "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
                        "group": "su1", "in_service_since": "2026-10-01T00:00:00Z"}))
        .collect();
    nodes.extend((0..4).map(|i| {
        json!({"hostname": format!("a{i:02}"), "cluster": "c1", "gpu_model": "A100-SXM4-80GB", "gpu_count": 8,
                                        "in_service_since": "2026-10-01T00:00:00Z"})
    }));
    app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await;
    let events = json!({"events": [
        event(&uuid_n(1), json!({"node": "n01", "occurred_at": "2026-11-02T00:00:00Z"})),
        event(&uuid_n(2), json!({"node": "n01", "occurred_at": "2026-11-03T00:00:00Z"})),
        event(&uuid_n(3), json!({"node": "n02", "occurred_at": "2026-11-04T00:00:00Z"})),
        event(&uuid_n(4), json!({"node": "n03", "occurred_at": "2026-11-05T00:00:00Z", "kind": "gpu_oom", "code": null, "symptom": "job_crash"})),
        event(&uuid_n(5), json!({"node": "a00", "occurred_at": "2026-11-02T00:00:00Z", "kind": "storage_error", "code": null,
                                  "root_cause": {"category": "platform", "component": "storage"}})),
        event(&uuid_n(6), json!({"node": "a00", "occurred_at": "2026-11-06T00:00:00Z", "kind": "storage_error", "code": null,
                                  "root_cause": {"category": "platform", "component": "storage"}})),
        event(&uuid_n(7), json!({"node": null, "occurred_at": "2026-11-06T00:00:00Z", "kind": "scheduler_error", "code": null, "symptom": "submission_failure"})),
        // Outside the window: not counted.
        event(&uuid_n(8), json!({"node": "n05", "occurred_at": "2026-11-09T00:00:00Z"})),
    ]});
    let (status, body) = app.post_events(ADMIN_TOKEN, &events).await;
    assert_eq!(status, 200, "{body}");
    let w = "from=2026-11-01T00:00:00Z&to=2026-11-08T00:00:00Z";

    let (status, mix) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/failure-mix?by=gpu_generation&{w}"))
        .await;
    assert_eq!(status, 200, "{mix}");
    let row = |k: &str| {
        mix["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == k)
            .unwrap()
            .clone()
    };
    // hopper: 128 GPUs x 7 d = 896 GPU-days; 4 failures -> 4.464286 per 1,000 GPU-days
    let hopper = row("hopper");
    assert_eq!(
        (
            hopper["gpus_in_service"].as_u64(),
            hopper["gpu_days"].as_f64(),
            hopper["failures"].as_u64()
        ),
        (Some(128), Some(896.0), Some(4))
    );
    assert_eq!(hopper["failures_per_1000_gpu_days"].as_f64(), Some(4.464286));
    assert_eq!(
        hopper["by_category"][0],
        json!({"name": "hardware", "failures": 3, "share": 0.75})
    );
    assert_eq!(
        hopper["by_component"][1],
        json!({"name": "user/oom", "failures": 1, "share": 0.25})
    );
    // ampere: 32 GPUs x 7 d = 224 GPU-days; 2 failures -> 8.928571
    let ampere = row("ampere");
    assert_eq!(
        (
            ampere["gpu_days"].as_f64(),
            ampere["failures_per_1000_gpu_days"].as_f64()
        ),
        (Some(224.0), Some(8.928571))
    );
    // The node-less failure has no generation: counted, not normalised.
    let unknown = row("unknown");
    assert_eq!(
        (
            unknown["failures"].as_u64(),
            unknown["failures_per_1000_gpu_days"].as_f64()
        ),
        (Some(1), None)
    );
    // totals: 7 failures over 1,120 GPU-days = 6.25 per 1,000
    assert_eq!(
        mix["totals"],
        json!({"gpus_in_service": 160, "gpu_days": 1120.0, "failures": 7, "failures_per_1000_gpu_days": 6.25})
    );
    let (_, by_model) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/failure-mix?by=gpu_model&{w}"))
        .await;
    assert!(
        by_model["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["key"] == "A100-SXM4-80GB" && r["failures"] == 2)
    );

    let (status, mtbf) = app
        .get(
            ADMIN_TOKEN,
            &format!("/v1/analytics/mtbf?group_size=128&job_gpus=1024&{w}"),
        )
        .await;
    assert_eq!(status, 200, "{mtbf}");
    let groups = mtbf["groups"].as_array().unwrap();
    assert_eq!(
        groups.iter().map(|g| g["group"].as_str().unwrap()).collect::<Vec<_>>(),
        ["c1/auto-000", "c1/su1"]
    );
    // su1: 168 h, 4 failures -> MTBF 42 h, 4 per week; auto-000 (4 A100 nodes): 168 h / 2 = 84 h
    assert_eq!(
        (
            groups[1]["exposure_hours"].as_f64(),
            groups[1]["failures"].as_u64(),
            groups[1]["mtbf_hours"].as_f64()
        ),
        (Some(168.0), Some(4), Some(42.0))
    );
    assert_eq!(groups[1]["failures_per_week"].as_f64(), Some(4.0));
    assert_eq!(
        (groups[0]["gpus"].as_u64(), groups[0]["mtbf_hours"].as_f64()),
        (Some(32), Some(84.0))
    );
    // fleet: 160 GPUs x 168 h = 26,880 GPU-hours / 6 attributed failures = 4,480 h per GPU;
    // a 1,024-GPU job: 4,480 / 1,024 = 4.375 h
    assert_eq!(
        (mtbf["fleet"]["gpu_hours"].as_f64(), mtbf["fleet"]["failures"].as_u64()),
        (Some(26880.0), Some(6))
    );
    assert_eq!(mtbf["fleet"]["mtbf_per_gpu_hours"].as_f64(), Some(4480.0));
    assert_eq!(mtbf["job_projection"]["mtbf_hours"].as_f64(), Some(4.375));
    assert_eq!(mtbf["unattributed_failures"], 1);

    let (status, rc) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/root-causes?{w}")).await;
    assert_eq!(status, 200, "{rc}");
    assert_eq!(rc["failures"], 7);
    // hardware 3/7 = 0.428571; platform 3/7 (storage 2, scheduler 1); user 1/7
    assert_eq!(
        (
            rc["categories"][0]["category"].as_str(),
            rc["categories"][0]["share"].as_f64()
        ),
        (Some("hardware"), Some(0.428571))
    );
    let platform = &rc["categories"][1];
    assert_eq!(
        platform["components"][0],
        json!({"component": "storage", "failures": 2, "share_of_category": 0.666667, "share_of_all": 0.285714})
    );
    assert_eq!(rc["categories"][2]["failures"], 1);
    assert_eq!(rc["categories"][3]["failures"], 0);
    let symptoms: Vec<(String, u64)> = rc["symptoms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s["failures"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        symptoms,
        [
            ("unspecified".to_string(), 5),
            ("job_crash".to_string(), 1),
            ("submission_failure".to_string(), 1)
        ]
    );

    // Bad input and roles.
    assert_eq!(app.get(ADMIN_TOKEN, "/v1/analytics/failure-mix?by=color").await.0, 400);
    assert_eq!(
        app.get(
            ADMIN_TOKEN,
            "/v1/analytics/mtbf?from=2026-11-08T00:00:00Z&to=2026-11-01T00:00:00Z"
        )
        .await
        .0,
        400
    );
    assert_eq!(app.get(ADMIN_TOKEN, "/v1/analytics/mtbf?group_size=0").await.0, 400);
    let agent = app.token("agent", None).await;
    assert_eq!(app.get(&agent, "/v1/analytics/root-causes").await.0, 403);
    let reader = app.token("reader", None).await;
    assert_eq!(app.get(&reader, "/v1/analytics/root-causes").await.0, 200);
}

/// The analytics keep the inventory in memory until its version moves: a node registered, then
/// retired, after an answer is in the next answer. 8-GPU nodes in service all of a 7-day window:
/// 56 GPU-days each.
#[tokio::test]
async fn an_inventory_change_reaches_the_next_analytics_answer() {
    let app = spawn_app().await;
    let w = "from=2026-11-01T00:00:00Z&to=2026-11-08T00:00:00Z";
    let node = |host: &str, retired: Option<&str>| {
        json!({"hostname": host, "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
               "group": host, "in_service_since": "2026-10-01T00:00:00Z", "retired_at": retired})
    };
    async fn totals(app: &TestApp, w: &str) -> (Option<u64>, Option<f64>) {
        let (status, mix) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/failure-mix?{w}")).await;
        assert_eq!(status, 200, "{mix}");
        (
            mix["totals"]["gpus_in_service"].as_u64(),
            mix["totals"]["gpu_days"].as_f64(),
        )
    }
    async fn groups(app: &TestApp, w: &str) -> Option<usize> {
        let (_, mtbf) = app
            .get(ADMIN_TOKEN, &format!("/v1/analytics/mtbf?group_size=8&{w}"))
            .await;
        mtbf["groups"].as_array().map(Vec::len)
    }
    assert_eq!(
        app.put_nodes(ADMIN_TOKEN, &json!({"nodes": [node("n01", None)]}))
            .await
            .0,
        200
    );
    assert_eq!(totals(&app, w).await, (Some(8), Some(56.0)));
    assert_eq!(groups(&app, w).await, Some(1));
    assert_eq!(
        app.put_nodes(ADMIN_TOKEN, &json!({"nodes": [node("n02", None)]}))
            .await
            .0,
        200
    );
    assert_eq!(totals(&app, w).await, (Some(16), Some(112.0)));
    assert_eq!(groups(&app, w).await, Some(2));
    // n02 retired half-way through the window: 28 GPU-days.
    let retired = node("n02", Some("2026-11-04T12:00:00Z"));
    assert_eq!(app.put_nodes(ADMIN_TOKEN, &json!({"nodes": [retired]})).await.0, 200);
    assert_eq!(totals(&app, w).await.1, Some(84.0));
}

#[tokio::test]
async fn empty_windows_answer_zeros_not_errors() {
    let app = spawn_app().await;
    let (status, mix) = app.get(ADMIN_TOKEN, "/v1/analytics/failure-mix").await;
    assert_eq!(status, 200);
    assert_eq!(mix["totals"]["failures"], 0);
    let (_, mtbf) = app.get(ADMIN_TOKEN, "/v1/analytics/mtbf?job_gpus=8").await;
    assert_eq!(mtbf["groups"], json!([]));
    assert_eq!(mtbf["fleet"]["mtbf_per_gpu_hours"], Value::Null);
    let (_, rc) = app.get(ADMIN_TOKEN, "/v1/analytics/root-causes").await;
    assert_eq!(rc["categories"].as_array().unwrap().len(), 4);
}

/// Eight batches of one job arrive at once (distinct GPUs, so no burst folding): the advisory locks serialise the re-folds, so the
/// result is one failure holding every signal (no lost update, no deadlock).
#[tokio::test]
async fn concurrent_batches_of_one_job_fold_into_one_failure() {
    let app = spawn_app().await;
    let events = cascade(1);
    let mut more: Vec<Value> = (0..64u32)
        .map(|i| event(&uuid_n(100 + i), json!({"node": format!("n{:02}", i % 16), "gpu_index": i, "job_id": "j1", "kind": "nccl_timeout", "code": null,
                                                  "occurred_at": format!("2026-11-02T10:0{}:{:02}Z", i % 4, i % 60)})))
        .collect();
    more.extend(events);
    let chunks: Vec<Value> = more.chunks(10).map(|c| json!({"events": c})).collect();
    let results = join_all(chunks.iter().map(|b| app.post_events(ADMIN_TOKEN, b)).collect()).await;
    assert!(results.iter().all(|(s, _)| *s == 200), "{results:?}");
    let list = failures(&app, "").await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["signal_count"], 80);
    assert_eq!(list[0]["root_cause"]["component"], "gpu");
}

/// A post-mortem root cause (PATCH) overrides the automatic one in the headline analytics, and the
/// automatic one stays on the failure.
#[tokio::test]
async fn a_post_mortem_cause_overrides_the_automatic_one_in_root_causes() {
    let app = spawn_app().await;
    app.post_events(ADMIN_TOKEN, &json!({"events": cascade(1)})).await;
    let id = failures(&app, "").await[0]["id"].as_str().unwrap().to_string();
    let w = "from=2026-11-01T00:00:00Z&to=2026-11-08T00:00:00Z";
    let (_, rc) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/root-causes?{w}")).await;
    assert_eq!(rc["categories"][0]["failures"], 1);
    let res = app
        .client
        .patch(app.url(&format!("/v1/failures/{id}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"root_cause": {"category": "platform", "component": "driver"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let (_, rc) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/root-causes?{w}")).await;
    assert_eq!(
        (
            rc["categories"][0]["failures"].as_u64(),
            rc["categories"][1]["failures"].as_u64()
        ),
        (Some(0), Some(1))
    );
    assert_eq!(rc["categories"][1]["components"][0]["component"], "driver");
    let (_, mix) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/failure-mix?{w}")).await;
    assert_eq!(mix["rows"][0]["by_category"][0]["name"], "platform");
    // The evidence is kept: the failure still carries the automatic cause.
    assert_eq!(failures(&app, "").await[0]["root_cause"]["category"], "hardware");
}

async fn put_jobs(app: &TestApp, body: Value) {
    let res = app
        .client
        .put(app.url("/v1/jobs"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    let (status, body) = crate::helpers::status_json(res).await;
    assert_eq!(status, 200, "{body}");
}

/// Job j1 ran on n00..n15 from 09:00 to 19:00.
fn job_j1(end: &str) -> Value {
    let nodes: Vec<String> = (0..16).map(|i| format!("n{i:02}")).collect();
    json!({"jobs": [{"id": "j1", "cluster": "c1", "gpus": 128, "nodes": nodes, "start": "2026-11-02T09:00:00Z", "end": end, "state": "failed"}]})
}

/// The cascade as the kernel log tells it: the XID on n07 carries no job_id; the timeouts do.
fn cascade_without_job_on_the_xid() -> Vec<Value> {
    let mut events = cascade(1);
    events[0].as_object_mut().unwrap().remove("job_id");
    events
}

const FIELDS: [&str; 9] = [
    "id",
    "job_id",
    "root_cause",
    "root_signal",
    "root_node",
    "first_at",
    "last_at",
    "signal_count",
    "nodes",
];

#[tokio::test]
async fn a_node_only_xid_folds_into_the_job_on_its_node_whether_the_job_comes_first_or_last() {
    let job_first = spawn_app().await;
    put_jobs(&job_first, job_j1("2026-11-02T19:00:00Z")).await;
    job_first
        .post_events(ADMIN_TOKEN, &json!({"events": cascade_without_job_on_the_xid()}))
        .await;
    let signals_first = spawn_app().await;
    signals_first
        .post_events(ADMIN_TOKEN, &json!({"events": cascade_without_job_on_the_xid()}))
        .await;
    // Without the job record: a hardware failure of n07 and an unknown failure of j1.
    let split = failures(&signals_first, "").await;
    assert_eq!(split.len(), 2);
    assert!(
        split
            .iter()
            .any(|f| f["job_id"].is_null() && f["root_node"] == "n07" && f["signal_count"] == 1)
    );
    put_jobs(&signals_first, job_j1("2026-11-02T19:00:00Z")).await;
    let a = failures(&job_first, "").await;
    let b = failures(&signals_first, "").await;
    // One failure: the XID (10:00, inside j1's run, n07 among its nodes) + 15 timeouts = 16 signals.
    assert_eq!((a.len(), b.len()), (1, 1));
    assert_eq!(a[0]["root_cause"], json!({"category": "hardware", "component": "gpu"}));
    assert_eq!(
        (
            a[0]["root_node"].as_str(),
            a[0]["job_id"].as_str(),
            a[0]["signal_count"].as_i64()
        ),
        (Some("n07"), Some("j1"), Some(16))
    );
    for field in FIELDS {
        assert_eq!(a[0][field], b[0][field], "{field}");
    }
    // The evidence is kept as sent: the stored XID still has no job_id.
    assert_eq!(
        job_first
            .count("SELECT count(*) FROM events WHERE job_id IS NULL")
            .await,
        1
    );
    // The job's record is corrected to end at 09:30, before the XID: the XID is n07's again.
    put_jobs(&signals_first, job_j1("2026-11-02T09:30:00Z")).await;
    let again = failures(&signals_first, "").await;
    assert_eq!(again.len(), 2);
    assert!(
        again
            .iter()
            .any(|f| f["job_id"].is_null() && f["root_node"] == "n07" && f["signal_count"] == 1)
    );
    assert!(again.iter().any(|f| f["job_id"] == "j1" && f["signal_count"] == 15));
}

/// Attribution reads one row per job and node (`job_node_runs`, migration 0017): of two runs
/// covering an instant the later started wins, a running job covers every later instant, and a
/// node dropped from a job's record is no longer attributed to it.
#[tokio::test]
async fn attribution_prefers_the_later_run_and_follows_a_changed_node_list() {
    let app = spawn_app().await;
    let j2 = json!({"id": "j2", "cluster": "c1", "gpus": 8, "nodes": ["n07"], "start": "2026-11-02T09:30:00Z", "state": "running"});
    let mut jobs = job_j1("2026-11-02T19:00:00Z");
    jobs["jobs"].as_array_mut().unwrap().push(j2);
    put_jobs(&app, jobs).await;
    assert_eq!(app.count("SELECT count(*) FROM job_node_runs").await, 17);
    let (status, _) = app
        .post_events(
            ADMIN_TOKEN,
            &json!({"events": [
                // Inside both runs (j1 from 09:00, j2 from 09:30): j2's.
                event(&uuid_n(1), json!({"node": "n07", "occurred_at": "2026-11-02T10:00:00Z"})),
                // After j1 ended, and j2 has no end: j2's.
                event(&uuid_n(2), json!({"node": "n07", "occurred_at": "2026-11-03T08:00:00Z"})),
                // Only j1 ran on n03.
                event(&uuid_n(3), json!({"node": "n03", "occurred_at": "2026-11-02T10:00:00Z"})),
            ]}),
        )
        .await;
    assert_eq!(status, 200);
    let by_root = |list: &[Value]| -> Vec<(String, Option<String>, i64)> {
        let mut v: Vec<_> = list
            .iter()
            .map(|f| {
                (
                    f["root_signal"].as_str().unwrap_or_default().to_string(),
                    f["job_id"].as_str().map(str::to_string),
                    f["signal_count"].as_i64().unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let list = failures(&app, "").await;
    // j2's two signals are 22 hours apart: two failures of j2.
    assert_eq!(
        by_root(&list),
        vec![
            (uuid_n(1), Some("j2".to_string()), 1),
            (uuid_n(2), Some("j2".to_string()), 1),
            (uuid_n(3), Some("j1".to_string()), 1),
        ]
    );
    // j1's record is corrected: it never ran on n03.
    let mut corrected = job_j1("2026-11-02T19:00:00Z");
    corrected["jobs"][0]["nodes"] = json!(
        (0..16)
            .filter(|i| *i != 3)
            .map(|i| format!("n{i:02}"))
            .collect::<Vec<_>>()
    );
    corrected["jobs"][0]["gpus"] = json!(120);
    put_jobs(&app, corrected).await;
    assert_eq!(app.count("SELECT count(*) FROM job_node_runs").await, 16);
    assert_eq!(
        app.count("SELECT count(*) FROM job_node_runs WHERE node = 'n03'").await,
        0
    );
    let list = failures(&app, "").await;
    assert_eq!(
        by_root(&list),
        vec![
            (uuid_n(1), Some("j2".to_string()), 1),
            (uuid_n(2), Some("j2".to_string()), 1),
            (uuid_n(3), None, 1),
        ]
    );
}

#[tokio::test]
async fn a_node_only_signal_outside_every_run_still_folds_by_node() {
    let app = spawn_app().await;
    put_jobs(&app, job_j1("2026-11-02T19:00:00Z")).await;
    let (status, _) = app
        .post_events(
            ADMIN_TOKEN,
            &json!({"events": [
                // After j1 ended (19:00), on one of its nodes.
                event(&uuid_n(1), json!({"node": "n07", "occurred_at": "2026-11-02T20:00:00Z"})),
                // During j1's run, on a node it did not use.
                event(&uuid_n(2), json!({"node": "a01", "occurred_at": "2026-11-02T10:00:00Z"})),
            ]}),
        )
        .await;
    assert_eq!(status, 200);
    let list = failures(&app, "").await;
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|f| f["job_id"].is_null() && f["signal_count"] == 1));
    let mut roots: Vec<&str> = list.iter().map(|f| f["root_node"].as_str().unwrap()).collect();
    roots.sort();
    assert_eq!(roots, ["a01", "n07"]);
}

#[tokio::test]
async fn a_catalog_rebuild_attributes_like_incremental_folding() {
    let app = spawn_app().await;
    put_jobs(&app, job_j1("2026-11-02T19:00:00Z")).await;
    let mut events = cascade_without_job_on_the_xid();
    events.push(event(
        &uuid_n(100),
        json!({"node": "n07", "occurred_at": "2026-11-02T20:00:00Z"}),
    ));
    app.post_events(ADMIN_TOKEN, &json!({"events": events})).await;
    let before = failures(&app, "").await;
    // The cascade of j1 (16 signals) and the XID on n07 after j1 ended (1).
    assert_eq!(before.len(), 2);
    let rule = json!({"kind": "xid", "code": 79, "priority": 200, "category": "platform", "component": "driver", "severity": "high",
                      "transient": true, "secondary": false, "action": "reset_gpu", "description": "site override", "source": "post-mortem 42"});
    let res = app
        .client
        .put(app.url("/v1/classification-rules/xid-79"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&rule)
        .send()
        .await
        .unwrap();
    let (status, change) = crate::helpers::catalog_edit(&app.address, res).await;
    assert_eq!((status, change["rebuild"]["done"].as_u64()), (202, Some(2)), "{change}");
    let after = failures(&app, "").await;
    assert_eq!(after.len(), 2);
    for (a, b) in before.iter().zip(&after) {
        for field in FIELDS.iter().filter(|f| **f != "root_cause") {
            assert_eq!(a[*field], b[*field], "{field}");
        }
        assert_eq!(b["root_cause"], json!({"category": "platform", "component": "driver"}));
    }
    let cascade_failure = after.iter().find(|f| f["job_id"] == "j1").unwrap();
    assert_eq!(
        (
            cascade_failure["root_node"].as_str(),
            cascade_failure["signal_count"].as_i64()
        ),
        (Some("n07"), Some(16))
    );
}

/// A signal's attributes come back as they were sent, extreme numbers included: jsonb prints a
/// number in plain decimal notation (309 digits for the largest double), which must parse back
/// to the same number.
#[tokio::test]
async fn extreme_numbers_in_attributes_come_back_in_the_failure_detail() {
    let app = spawn_app().await;
    let attributes =
        json!({"largest": f64::MAX, "smallest": f64::MIN_POSITIVE, "tiny": 5e-324, "big_int": 18446744073709551615u64});
    let (status, body) = app
        .post_events(
            ADMIN_TOKEN,
            &json!({"events": [event(&uuid_n(1), json!({"attributes": attributes}))]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let id = failures(&app, "").await[0]["id"].as_str().unwrap().to_string();
    let (status, detail) = app.get(ADMIN_TOKEN, &format!("/v1/failures/{id}")).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["signals"][0]["attributes"], attributes);
}
