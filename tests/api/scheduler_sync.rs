//! What scheduler syncs rely on: jobs keep the scheduler's own account of them, and a per-cluster
//! cursor per source that only moves forward.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, spawn_app};

async fn send(app: &TestApp, method: reqwest::Method, token: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = app.client.request(method, app.url(path)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn jobs_keep_the_schedulers_state_exit_codes_and_restarts() {
    let app = spawn_app().await;
    let job = |id: &str, extra: Value| {
        let mut j = json!({"id": id, "cluster": "c1", "gpus": 8, "nodes": ["gpu-0001"], "start": "2026-11-01T00:00:00Z",
                           "end": "2026-11-01T02:00:00Z", "state": "failed"});
        j.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        j
    };
    let body = json!({"jobs": [
        job("41", json!({"name": "pretrain", "scheduler_state": "TIMEOUT", "exit_code": 0, "exit_signal": 15,
                         "derived_exit_code": 0, "restarts": 2})),
        job("42", json!({"exit_code": 300})),
        job("43", json!({"restarts": -1})),
    ]});
    let (status, r) = send(&app, reqwest::Method::PUT, ADMIN_TOKEN, "/v1/jobs", Some(body)).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["upserted"], 1);
    let rejected: Vec<(u64, &str)> = r["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["index"].as_u64().unwrap(), x["field"].as_str().unwrap()))
        .collect();
    assert_eq!(rejected, [(1, "exit_code"), (2, "restarts")]);

    let (status, j) = app.get(ADMIN_TOKEN, "/v1/jobs/c1/41").await;
    assert_eq!(status, 200, "{j}");
    assert_eq!(
        (j["name"].as_str(), j["scheduler_state"].as_str(), j["state"].as_str()),
        (Some("pretrain"), Some("TIMEOUT"), Some("failed"))
    );
    assert_eq!((j["exit_signal"].as_i64(), j["restarts"].as_i64()), (Some(15), Some(2)));
    assert_eq!(j["failure_ids"], json!([]));
    let (status, _) = app.get(ADMIN_TOKEN, "/v1/jobs/c1/42").await;
    assert_eq!(status, 404);
    let reader = app.token("reader", Some("c2")).await;
    let (status, _) = app.get(&reader, "/v1/jobs/c1/41").await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn a_sync_cursor_only_moves_forward_and_stays_in_its_cluster() {
    let app = spawn_app().await;
    let agent = app.token("agent", Some("c1")).await;
    let path = "/v1/sync-cursors/c1/slurm-jobs";
    let (status, c) = send(&app, reqwest::Method::GET, &agent, path, None).await;
    assert_eq!(status, 200, "{c}");
    assert!(c["position"].is_null());
    let put = |at: &str| Some(json!({ "position": at }));
    let (status, c) = send(&app, reqwest::Method::PUT, &agent, path, put("2026-12-01T10:00:00Z")).await;
    assert_eq!(status, 200, "{c}");
    assert_eq!(c["position"], "2026-12-01T10:00:00Z");
    // A syncer that read an older window does not move it back.
    let (_, c) = send(&app, reqwest::Method::PUT, &agent, path, put("2026-12-01T09:00:00Z")).await;
    assert_eq!(c["position"], "2026-12-01T10:00:00Z");
    let (_, c) = send(&app, reqwest::Method::GET, &agent, path, None).await;
    assert_eq!(
        (c["position"].as_str(), c["updated_by"].as_str()),
        (Some("2026-12-01T10:00:00Z"), Some("agent-token"))
    );
    // Another source of the cluster is its own cursor.
    let (_, c) = send(
        &app,
        reqwest::Method::GET,
        &agent,
        "/v1/sync-cursors/c1/slurm-events",
        None,
    )
    .await;
    assert!(c["position"].is_null());

    let (status, _) = send(
        &app,
        reqwest::Method::GET,
        &agent,
        "/v1/sync-cursors/c2/slurm-jobs",
        None,
    )
    .await;
    assert_eq!(status, 403);
    let (status, e) = send(
        &app,
        reqwest::Method::GET,
        &agent,
        "/v1/sync-cursors/c1/Slurm%20Jobs",
        None,
    )
    .await;
    assert_eq!(status, 400, "{e}");
    let (status, _) = send(&app, reqwest::Method::PUT, &agent, path, put("2126-12-01T09:00:00Z")).await;
    assert_eq!(status, 422);
    // Readers see where a sync stands; only agents and admins move it.
    let reader = app.token("reader", None).await;
    let (status, _) = send(&app, reqwest::Method::GET, &reader, path, None).await;
    assert_eq!(status, 200);
    let (status, _) = send(&app, reqwest::Method::PUT, &reader, path, put("2026-12-01T11:00:00Z")).await;
    assert_eq!(status, 403);
}
