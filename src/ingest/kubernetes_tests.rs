use super::*;
use serde_json::json;

fn now() -> DateTime<Utc> {
    "2026-11-30T12:00:00Z".parse().unwrap()
}

fn fixture(name: &str) -> Value {
    let text = match name {
        "events" => include_str!("../../tests/fixtures/kubernetes/events.json"),
        "node" => include_str!("../../tests/fixtures/kubernetes/node.json"),
        _ => include_str!("../../tests/fixtures/kubernetes/pods.json"),
    };
    serde_json::from_str(text).unwrap()
}

fn all(name: &str) -> Vec<Vec<Event>> {
    split_body(fixture(name))
        .iter()
        .map(|v| map_object(v, "c1", now()).unwrap())
        .collect()
}

#[test]
fn events_become_node_and_job_signals() {
    let mapped = all("events");
    let kinds: Vec<Vec<&str>> = mapped
        .iter()
        .map(|e| e.iter().map(|e| e.kind.as_str()).collect())
        .collect();
    // NodeNotReady, OOMKilling on the node, BackOff of a Job's pod; Scheduled says nothing.
    assert_eq!(
        kinds,
        vec![vec!["node_unreachable"], vec!["host_oom"], vec!["job_exit"], vec![]]
    );
    let backoff = &mapped[2][0];
    assert_eq!(
        (backoff.node.as_deref(), backoff.job_id.as_deref()),
        (Some("gpu-node-07"), Some("train-llm"))
    );
    assert_eq!(backoff.occurred_at.to_rfc3339(), "2026-11-30T10:02:40+00:00");
    assert_eq!(backoff.attributes["count"], 4);
    assert_eq!(mapped[0][0].node.as_deref(), Some("gpu-node-07"));
}

#[test]
fn an_event_is_the_same_signal_until_its_count_changes() {
    let items = split_body(fixture("events"));
    let first = map_object(&items[2], "c1", now()).unwrap()[0].id;
    assert_eq!(map_object(&items[2], "c1", now()).unwrap()[0].id, first);
    let mut again = items[2].clone();
    again["count"] = json!(5);
    again["lastTimestamp"] = json!("2026-11-30T10:04:10Z");
    assert_ne!(map_object(&again, "c1", now()).unwrap()[0].id, first);
    assert_ne!(map_object(&items[2], "c2", now()).unwrap()[0].id, first);
}

#[test]
fn bad_node_conditions_are_signals_and_a_drain() {
    let e = &all("node")[0];
    let kinds: Vec<(&str, Option<i64>)> = e.iter().map(|e| (e.kind.as_str(), e.code)).collect();
    assert_eq!(
        kinds,
        vec![("storage_error", None), ("xid", Some(79)), ("node_drain", None)]
    );
    let xid = &e[1];
    assert_eq!(
        (xid.gpu_index, xid.attributes["pci_bus_id"].as_str()),
        (Some(3), Some("0000:3b:00"))
    );
    // The drain starts with the earliest bad condition (10:04:30), before the cordon (10:07).
    assert_eq!(e[2].occurred_at.to_rfc3339(), "2026-11-30T10:04:30+00:00");
    assert!(e[2].message.as_deref().unwrap().contains("cordoned"));
}

#[test]
fn a_healthy_node_returns_at_its_latest_transition() {
    let mut node = fixture("node");
    node["spec"] = json!({});
    for c in node["status"]["conditions"].as_array_mut().unwrap() {
        if c["type"] != "Ready" {
            c["status"] = json!("False");
        }
    }
    let e = map_object(&node, "c1", now()).unwrap();
    assert_eq!(e.len(), 1);
    assert_eq!(
        (e[0].kind.as_str(), e[0].occurred_at.to_rfc3339()),
        ("node_resume", "2026-11-30T10:05:00+00:00".to_string())
    );
    // Bare conditions read the same.
    let bare = json!({"node": "gpu-node-07", "conditions": node["status"]["conditions"]});
    assert_eq!(map_object(&bare, "c1", now()).unwrap()[0].id, e[0].id);
}

#[test]
fn pod_terminations_and_evictions_are_job_signals() {
    let mapped = all("pods");
    let oom = &mapped[0][0];
    assert_eq!(
        (oom.kind.as_str(), oom.code, oom.job_id.as_deref()),
        ("host_oom", Some(137), None)
    );
    let error = &mapped[1][0];
    assert_eq!(
        (
            error.kind.as_str(),
            error.code,
            error.job_id.as_deref(),
            error.node.as_deref()
        ),
        ("job_exit", Some(1), Some("train-llm"), Some("gpu-node-07"))
    );
    assert_eq!(error.occurred_at.to_rfc3339(), "2026-11-30T10:02:35+00:00");
    let evicted = &mapped[2][0];
    assert_eq!(
        (evicted.kind.as_str(), evicted.job_id.as_deref()),
        ("scheduler_error", Some("eval-5"))
    );
    assert_eq!(evicted.occurred_at.to_rfc3339(), "2026-11-30T10:21:00+00:00");
}

#[test]
fn malformed_objects_name_their_field() {
    let field = |v: Value| map_object(&v, "c1", now()).unwrap_err().field;
    let mut node = fixture("node");
    node["status"]["conditions"][1]["lastTransitionTime"] = json!("yesterday");
    assert_eq!(field(node).as_deref(), Some("status.conditions[1].lastTransitionTime"));
    let mut event = split_body(fixture("events"))[1].clone();
    event["involvedObject"].as_object_mut().unwrap().remove("name");
    assert_eq!(field(event).as_deref(), Some("involvedObject.name"));
    assert_eq!(field(json!({"kind": "Service"})).as_deref(), Some("kind"));
    let mut pods = split_body(fixture("pods"));
    pods[1]["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] = json!("one");
    assert_eq!(
        field(pods.remove(1)).as_deref(),
        Some("status.containerStatuses[0].lastState.terminated.exitCode")
    );
}
