//! `POST /v1/integrations/kubernetes/events` end to end, on the fixtures of tests/fixtures/kubernetes.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, spawn_app, status_json};

fn fixture(name: &str) -> Value {
    let text = match name {
        "events" => include_str!("../fixtures/kubernetes/events.json"),
        "node" => include_str!("../fixtures/kubernetes/node.json"),
        "node-gke-xid" => include_str!("../fixtures/kubernetes/node-gke-xid.json"),
        "events-aks" => include_str!("../fixtures/kubernetes/events-aks-scale-down.json"),
        "events-k3s" => include_str!("../fixtures/kubernetes/events-k3s-node.json"),
        _ => include_str!("../fixtures/kubernetes/pods.json"),
    };
    serde_json::from_str(text).unwrap()
}

async fn post(app: &TestApp, body: &Value) -> (u16, Value) {
    let res = app
        .client
        .post(app.url("/v1/integrations/kubernetes/events?cluster=c1"))
        .bearer_auth(ADMIN_TOKEN)
        .json(body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

/// The root cause of the failure that holds the signal of `kind`.
async fn root_of(app: &TestApp, kind: &str) -> String {
    sqlx::query_scalar::<_, String>(
        "SELECT f.category || '/' || f.component FROM failures f JOIN events e ON e.id = ANY(f.signal_ids) WHERE e.kind = $1",
    )
        .bind(kind)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn kubernetes_events_are_classified_signals_and_idempotent() {
    let app = spawn_app().await;
    let (status, r) = post(&app, &fixture("events")).await;
    assert_eq!(status, 200, "{r}");
    // NodeNotReady, OOMKilling, BackOff; Scheduled is ignored.
    assert_eq!(
        (r["received"].as_u64(), r["signals"].as_u64(), r["ignored"].as_u64()),
        (Some(4), Some(3), Some(1))
    );
    assert_eq!(r["accepted"], 3);
    assert_eq!(root_of(&app, "host_oom").await, "user/oom");
    assert_eq!(
        app.count(
            "SELECT count(*) FROM events WHERE job_id = 'train-llm' AND kind = 'job_exit' AND node = 'gpu-node-07'"
        )
        .await,
        1
    );
    let (status, again) = post(&app, &fixture("events")).await;
    assert_eq!(
        (status, again["duplicates"].as_u64(), again["accepted"].as_u64()),
        (200, Some(3), Some(0))
    );
    assert_eq!(app.count("SELECT count(*) FROM events").await, 3);
}

#[tokio::test]
async fn node_conditions_drain_the_node_and_pod_failures_hit_their_job() {
    let app = spawn_app().await;
    let (status, _) = app
        .put_nodes(ADMIN_TOKEN, &json!({"nodes": [{"hostname": "gpu-node-07", "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8}]}))
        .await;
    assert_eq!(status, 200);
    let (status, r) = post(&app, &fixture("node")).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        r["signals_by_kind"],
        json!({"node_drain": 1, "storage_error": 1, "xid": 1})
    );
    assert_eq!(root_of(&app, "xid").await, "hardware/gpu");
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'xid' AND code = 79 AND gpu_index = 3")
            .await,
        1
    );
    let (status, state) = app
        .get(
            ADMIN_TOKEN,
            "/v1/nodes/c1/gpu-node-07/state?from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z",
        )
        .await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["state"], "drained");
    assert_eq!(state["transitions"][0]["at"], "2026-11-30T10:04:30Z");
    // 10:04:30 to 2026-12-01T00:00 = 13 h 55 min 30 s
    assert_eq!(state["out_of_service_hours"], 13.925);

    let (status, r) = post(&app, &fixture("pods")).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        r["signals_by_kind"],
        json!({"host_oom": 1, "job_exit": 1, "scheduler_error": 1})
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE job_id = 'train-llm' AND code = 1")
            .await,
        1
    );
}

#[tokio::test]
async fn a_malformed_object_is_refused_by_its_field_and_the_others_stored() {
    let app = spawn_app().await;
    let mut body = fixture("events");
    body["items"][1]["involvedObject"]
        .as_object_mut()
        .unwrap()
        .remove("name");
    let (status, r) = post(&app, &body).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["rejected"][0]["index"], 1);
    assert_eq!(r["rejected"][0]["field"], "involvedObject.name");
    assert_eq!(r["accepted"], 2);
    let (status, r) = post(&app, &json!({"kind": "Service", "metadata": {"name": "x"}})).await;
    assert_eq!(
        (status, r["details"]["rejected"][0]["field"].as_str()),
        (422, Some("kind"))
    );
}

#[tokio::test]
async fn a_gke_xid_condition_stores_each_xid_with_its_code() {
    let app = spawn_app().await;
    // GKE's GPU device plugin: XidCriticalError True with reason {"123":true,"79":true}.
    let (status, r) = post(&app, &fixture("node-gke-xid")).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["signals_by_kind"], json!({"node_drain": 1, "xid": 2}));
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'xid' AND code IN (79, 123) AND node = 'gke-a3-pool-1-7c2f9d41-zq5m'")
            .await,
        2
    );
    // Both are hardware/gpu; XID 79 (critical) is the root over 123 (high).
    let (code, rule, cause): (Option<i64>, Option<String>, String) =
        sqlx::query_as("SELECT root_code, rule_id, category || '/' || component FROM failures WHERE root_kind = 'xid'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(
        (code, rule.as_deref(), cause.as_str()),
        (Some(79), Some("xid-79"), "hardware/gpu")
    );
    let (_, again) = post(&app, &fixture("node-gke-xid")).await;
    assert_eq!(
        (again["duplicates"].as_u64(), again["accepted"].as_u64()),
        (Some(3), Some(0))
    );
}

#[tokio::test]
async fn real_event_lists_of_a_cordon_and_a_lost_node_and_of_oom_kills_are_stored_as_mapped() {
    let app = spawn_app().await;
    let (status, _) = app
        .put_nodes(ADMIN_TOKEN, &json!({"nodes": [{"hostname": "aks-user-25795745-vmss000002", "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8}]}))
        .await;
    assert_eq!(status, 200);
    // AKS scale-down: ScaleDown, NodeNotSchedulable (the cordon), NodeNotReady, DeletingNode,
    // RemovingNode, then TriggeredScaleUp on a pod; only the cordon and the loss are signals.
    let (status, r) = post(&app, &fixture("events-aks")).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!((r["received"].as_u64(), r["ignored"].as_u64()), (Some(6), Some(4)));
    assert_eq!(r["signals_by_kind"], json!({"node_drain": 1, "node_unreachable": 1}));
    let (status, state) = app
        .get(
            ADMIN_TOKEN,
            "/v1/nodes/c1/aks-user-25795745-vmss000002/state?from=2026-10-01T00:00:00Z&to=2026-10-03T00:00:00Z",
        )
        .await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["transitions"][0]["at"], "2026-10-02T15:34:58Z");
    // k3s node: NodeNotReady on the node (its echo on the pod ignored), three SystemOOM, Rebooted,
    // an image pull failure and a crash back-off; the cancelled taint eviction and Scheduled ignored.
    let (status, r) = post(&app, &fixture("events-k3s")).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!((r["received"].as_u64(), r["ignored"].as_u64()), (Some(10), Some(3)));
    assert_eq!(
        r["signals_by_kind"],
        json!({"health_check": 1, "host_oom": 3, "job_exit": 1, "node_unreachable": 1, "submission_error": 1})
    );
    // The three OOM kills of the same second killed three processes (nginx, coredns, chrome): three
    // signals (a signal without a code is identified by its text), folded into one failure of the node.
    assert_eq!((r["accepted"].as_u64(), r["folded"].as_u64()), (Some(7), Some(0)));
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE node = 'hans-laptop' AND kind = 'host_oom' AND repeat_count = 1")
            .await,
        3
    );
}
