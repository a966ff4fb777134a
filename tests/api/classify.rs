//! The free-text classifier through the API: the dry run, the editable lexicon (which
//! re-classifies every failure), and the explanation on failures and their signals.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, event, spawn_app, status_json, uuid_n};

async fn classify(app: &TestApp, token: &str, body: &Value) -> (u16, Value) {
    let res = app
        .client
        .post(app.url("/v1/classify"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

async fn put_term(app: &TestApp, term: &str, body: &Value) -> (u16, Value) {
    let res = app
        .client
        .put(app.url(&format!("/v1/classification-terms/{term}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(body)
        .send()
        .await
        .unwrap();
    crate::helpers::catalog_edit(&app.address, res).await
}

#[tokio::test]
async fn the_dry_run_classifies_text_causes_and_stores_nothing() {
    let app = spawn_app().await;
    let reader = app.token("reader", None).await;
    let body = json!({"items": [
        {"message": "PSU redundancy lost"},
        {"message": "IB port 1 link down", "kind": "health_check"},
        {"message": "kubelet not ready", "kind": "k8s_node_condition"},
        {"message": "GPU has fallen off the bus", "kind": "xid", "code": 79},
        {"message": "Watchdog caught collective operation timeout", "kind": "nccl_timeout"},
        {"message": "node1:1234:5678 [0] NCCL WARN Cuda failure 'out of memory'", "kind": "nccl_error"},
        {"message": ""},
        {"message": "電源故障"},
        {"message": "x".repeat(2_000_000)},
    ]});
    let (status, out) = classify(&app, &reader, &body).await;
    assert_eq!(status, 200, "{out}");
    let r = out["results"].as_array().unwrap();
    let got: Vec<(String, String)> = r
        .iter()
        .map(|x| {
            (
                x["category"].as_str().unwrap().into(),
                x["component"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want = [
        ("hardware", "power"),
        ("hardware", "network"),
        ("platform", "scheduler"),
        ("hardware", "gpu"),
        ("unknown", "unknown"),
        ("user", "oom"),
        ("unknown", "unknown"),
        ("unknown", "unknown"),
        ("unknown", "unknown"),
    ];
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!((g.0.as_str(), g.1.as_str()), w, "item {i}: {}", r[i]);
    }
    assert_eq!(r[3]["explanation"], "rule xid-79");
    assert_eq!(r[3]["action"], "reboot_node");
    assert!(
        r[0]["explanation"]
            .as_str()
            .unwrap()
            .starts_with("terms: power supply(power)"),
        "{}",
        r[0]
    );
    assert_eq!(r[2]["index"], 2);
    assert_eq!(app.count("SELECT count(*) FROM events").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM failures").await, 0);
}

#[tokio::test]
async fn malformed_items_are_refused_with_their_index() {
    let app = spawn_app().await;
    let reader = app.token("reader", None).await;
    let (status, out) = classify(
        &app,
        &reader,
        &json!({"items": [{"message": "ok"}, {"message": "PSU lost", "code": "79"}]}),
    )
    .await;
    assert_eq!(status, 422, "{out}");
    assert_eq!(out["details"], json!({"index": 1, "field": "code"}));
    let (status, out) = classify(&app, &reader, &json!({"items": [{"message": "a"}, 7]})).await;
    assert_eq!((status, out["details"]["index"].as_u64()), (422, Some(1)), "{out}");
    let (status, out) = classify(&app, &reader, &json!({"items": [{"kind": "xid"}]})).await;
    assert_eq!(
        (status, out["details"]["field"].as_str()),
        (422, Some("message")),
        "{out}"
    );
    let many: Vec<Value> = (0..1001).map(|_| json!({"message": "x"})).collect();
    let (status, _) = classify(&app, &reader, &json!({"items": many})).await;
    assert_eq!(status, 400);
    let (status, _) = classify(&app, &reader, &json!({"messages": []})).await;
    assert_eq!(status, 400);
    let (status, out) = classify(&app, &reader, &json!({"items": []})).await;
    assert_eq!((status, out["results"].as_array().map(Vec::len)), (200, Some(0)));
    let agent = app.token("agent", None).await;
    let (status, _) = classify(&app, &agent, &json!({"items": []})).await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn a_lexicon_edit_reclassifies_every_failure_and_failures_say_why() {
    let app = spawn_app().await;
    let e = event(
        &uuid_n(1),
        json!({"kind": "health_check", "code": null, "message": "vastdata mount unreachable on n001"}),
    );
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": [e]})).await;
    assert_eq!(status, 200, "{body}");
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/failures").await;
    let f = &list["failures"][0];
    // "mount" is a storage term already; a site's own product name makes it certain.
    assert_eq!(f["root_cause"]["component"], "storage", "{f}");
    let before_version = f["catalog_version"].as_i64().unwrap();

    // An admin teaches the lexicon that "vastdata" is a file system; the failure is rebuilt.
    let (status, change) = put_term(
        &app,
        "vastdata",
        &json!({"kind": "component", "component": "storage", "weight": 4, "source": "site: our VAST cluster"}),
    )
    .await;
    assert_eq!(status, 202, "{change}");
    assert_eq!(
        (change["rebuild"]["state"].as_str(), change["rebuild"]["done"].as_i64()),
        (Some("done"), Some(1)),
        "{change}"
    );
    assert_eq!(change["catalog_version"].as_i64(), Some(before_version + 1));
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/failures").await;
    let f = &list["failures"][0];
    assert_eq!(f["catalog_version"].as_i64(), Some(before_version + 1));
    let why = f["explanation"].as_str().unwrap();
    assert!(
        why.contains("vastdata(storage)") && why.contains("mount(storage)"),
        "{why}"
    );
    let (status, detail) = app
        .get(ADMIN_TOKEN, &format!("/v1/failures/{}", f["id"].as_str().unwrap()))
        .await;
    assert_eq!(status, 200);
    assert_eq!(detail["signals"][0]["explanation"].as_str(), Some(why));

    // Now make "unreachable" name the network instead: a site's edit changes the answer.
    let (status, _) = put_term(
        &app,
        "unreachable",
        &json!({"kind": "fault", "component": "network", "weight": 10, "source": "site"}),
    )
    .await;
    assert_eq!(status, 202);
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/failures").await;
    assert_eq!(list["failures"][0]["root_cause"]["component"], "network");

    // Putting the built-in row back restores the built-in reading.
    let (status, _) = put_term(
        &app,
        "unreachable",
        &json!({"kind": "failure", "weight": 1, "source": "faultline: domain vocabulary"}),
    )
    .await;
    assert_eq!(status, 202);
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/failures").await;
    assert_eq!(list["failures"][0]["root_cause"]["component"], "storage");

    // Deleting a term re-classifies too; deleting twice is 404.
    let del = |t: &'static str| {
        app.client
            .delete(app.url(&format!("/v1/classification-terms/{t}")))
            .bearer_auth(ADMIN_TOKEN)
            .send()
    };
    let res = del("vastdata").await.unwrap();
    let (status, change) = crate::helpers::catalog_edit(&app.address, res).await;
    assert_eq!(status, 202);
    assert_eq!(change["rebuild"]["done"], 1);
    assert_eq!(del("vastdata").await.unwrap().status(), 404);
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/failures").await;
    let why = list["failures"][0]["explanation"].as_str().unwrap();
    assert!(!why.contains("vastdata"), "{why}");

    // Bad terms are refused; readers list terms but may not edit them.
    let (status, _) = put_term(&app, "x", &json!({"kind": "component", "weight": 1, "source": "s"})).await;
    assert_eq!(status, 400, "a component term needs its component");
    let (status, _) = put_term(
        &app,
        "y",
        &json!({"kind": "failure", "component": "gpu", "weight": 1, "source": "s"}),
    )
    .await;
    assert_eq!(status, 400, "a failure term has no component");
    let (status, _) = put_term(&app, "z", &json!({"kind": "healthy", "weight": 11, "source": "s"})).await;
    assert_eq!(status, 400, "weight above 10");
    let reader = app.token("reader", None).await;
    let (status, terms) = app
        .get(&reader, "/v1/classification-terms?kind=component&component=storage")
        .await;
    assert_eq!(status, 200);
    let names: Vec<&str> = terms["terms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["term"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"lustre") && !names.contains(&"vastdata"), "{names:?}");
    let res = app
        .client
        .put(app.url("/v1/classification-terms/q"))
        .bearer_auth(&reader)
        .json(&json!({"kind": "healthy", "weight": 1, "source": "s"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
}

#[tokio::test]
async fn xid_rules_still_decide_and_explain_themselves() {
    let app = spawn_app().await;
    let e = event(
        &uuid_n(2),
        json!({"message": "GPU has fallen off the bus; PSU redundancy lost"}),
    );
    let (status, _) = app.post_events(ADMIN_TOKEN, &json!({"events": [e]})).await;
    assert_eq!(status, 200);
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/failures").await;
    let f = &list["failures"][0];
    assert_eq!(f["root_cause"], json!({"category": "hardware", "component": "gpu"}));
    assert_eq!(
        (f["rule_id"].as_str(), f["explanation"].as_str()),
        (Some("xid-79"), Some("rule xid-79"))
    );
}
