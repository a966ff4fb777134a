//! U+0000 in a JSON body: Postgres text and jsonb cannot hold it, so every text field that would
//! reach the database refuses it with a 400 naming the field (never a 500), and in a batch whose
//! items are validated one by one only the item holding it is rejected.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, spawn_app, status_json};

const NUL: &str = "a\u{0}b";

async fn send(app: &TestApp, method: reqwest::Method, path: &str, body: String) -> (u16, Value) {
    let res = app
        .client
        .request(method, app.url(path))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

fn assert_refused(what: &str, (status, body): (u16, Value), path: &str) {
    assert_eq!(status, 400, "{what}: {body}");
    assert_eq!(body["error"], "invalid_text", "{what}: {body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("at `{path}`")) && message.contains("U+0000"),
        "{what}: {message}"
    );
}

fn rule() -> Value {
    json!({"kind": "xid", "code": 999, "pattern": "row remap", "priority": 500, "category": "hardware",
        "component": "gpu_memory", "severity": "high", "transient": false, "secondary": false,
        "action": "reset_gpu", "description": "site rule", "source": "site"})
}

#[tokio::test]
async fn a_classification_rule_with_a_nul_in_any_text_field_is_refused_naming_it() {
    let app = spawn_app().await;
    let rules_before = app.count("SELECT count(*) FROM classification_rules").await;
    for field in ["pattern", "description", "source", "kind", "action"] {
        let mut body = rule();
        body[field] = json!(NUL);
        let answer = send(
            &app,
            reqwest::Method::PUT,
            "/v1/classification-rules/site-1",
            body.to_string(),
        )
        .await;
        assert_refused(field, answer, field);
    }
    // A key holding one, too.
    let mut body = rule();
    body["extra\u{0}"] = json!(1);
    assert_refused(
        "a key",
        send(
            &app,
            reqwest::Method::PUT,
            "/v1/classification-rules/site-1",
            body.to_string(),
        )
        .await,
        "extra",
    );
    // A lone surrogate is not text at all: refused by the JSON reader, naming where.
    let body = rule().to_string().replace("row remap", "\\ud800");
    let (status, answer) = send(&app, reqwest::Method::PUT, "/v1/classification-rules/site-1", body).await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("at `pattern`"), "{answer}");
    assert_eq!(
        app.count("SELECT count(*) FROM classification_rules").await,
        rules_before
    );
    // The same rule without them is stored.
    let (status, answer) = send(
        &app,
        reqwest::Method::PUT,
        "/v1/classification-rules/site-1",
        rule().to_string(),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
}

#[tokio::test]
async fn every_other_single_body_refuses_a_nul_naming_where() {
    let app = spawn_app().await;
    let nodes = json!({"nodes": [{"hostname": "n1", "cluster": "c1", "gpu_model": "H100", "gpu_count": 8}]});
    assert_eq!(app.put_nodes(ADMIN_TOKEN, &nodes).await.0, 200);
    let cases: Vec<(reqwest::Method, &str, Value, &str)> = vec![
        (
            reqwest::Method::PUT,
            "/v1/classification-terms/vastdata",
            json!({"kind": "component", "component": "storage", "weight": 4, "source": NUL}),
            "source",
        ),
        (
            reqwest::Method::PUT,
            "/v1/alert-rules/r1",
            json!({"condition": {"kind": "silence", "minutes": 5}, "labels": {"team": NUL}}),
            "labels.team",
        ),
        (
            reqwest::Method::POST,
            "/v1/tokens",
            json!({"name": NUL, "role": "reader"}),
            "name",
        ),
        (
            reqwest::Method::POST,
            "/v1/nodes/c1/n1/state",
            json!({"state": "drained", "at": "2026-11-08T00:00:00Z", "reason": NUL}),
            "reason",
        ),
        (
            reqwest::Method::POST,
            "/v1/heartbeats",
            json!({"cluster": "c1", "nodes": ["n1", NUL]}),
            "nodes[1]",
        ),
        (
            reqwest::Method::POST,
            "/v1/gpus/SN1/removals",
            json!({"cluster": "c1", "at": "2026-11-08T00:00:00Z", "reason": "rma", "note": NUL}),
            "note",
        ),
    ];
    for (method, path, body, field) in cases {
        let answer = send(&app, method, path, body.to_string()).await;
        assert_refused(path, answer, field);
    }
    assert_eq!(app.count("SELECT count(*) FROM alert_rules").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM node_state_changes").await, 0);
}

#[tokio::test]
async fn in_a_batch_only_the_item_with_a_nul_is_rejected() {
    let app = spawn_app().await;
    let nodes = json!({"nodes": [
        {"hostname": "n1", "cluster": "c1", "gpu_model": "H100", "gpu_count": 8},
        {"hostname": NUL, "cluster": "c1", "gpu_model": "H100", "gpu_count": 8},
    ]});
    let (status, answer) = app.put_nodes(ADMIN_TOKEN, &nodes).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["upserted"], 1, "{answer}");
    assert_eq!(answer["rejected"][0]["index"], 1, "{answer}");
    assert_eq!(answer["rejected"][0]["field"], "hostname", "{answer}");
    assert_eq!(app.count("SELECT count(*) FROM nodes").await, 1);

    let jobs = json!({"jobs": [
        {"id": "j1", "cluster": "c1", "gpus": 8, "start": "2026-11-01T00:00:00Z", "state": "running"},
        {"id": "j2", "cluster": "c1", "gpus": 8, "start": "2026-11-01T00:00:00Z", "state": "running", "name": NUL},
    ]});
    let (status, answer) = send(&app, reqwest::Method::PUT, "/v1/jobs", jobs.to_string()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["upserted"], 1, "{answer}");
    assert_eq!(answer["rejected"][0]["index"], 1, "{answer}");
    assert_eq!(answer["rejected"][0]["field"], "name", "{answer}");
}
