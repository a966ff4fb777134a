use super::*;
use serde_json::json;

fn now() -> DateTime<Utc> {
    "2026-11-30T12:00:00Z".parse().unwrap()
}

fn fixture(name: &str) -> Value {
    let text = match name {
        "events" => include_str!("../../tests/fixtures/kubernetes/events.json"),
        "node" => include_str!("../../tests/fixtures/kubernetes/node.json"),
        "node-gke-xid" => include_str!("../../tests/fixtures/kubernetes/node-gke-xid.json"),
        "events-k3s" => include_str!("../../tests/fixtures/kubernetes/events-k3s-node.json"),
        "events-aks" => include_str!("../../tests/fixtures/kubernetes/events-aks-scale-down.json"),
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

#[test]
fn gkes_xid_condition_is_one_xid_signal_per_xid_it_lists() {
    // GKE's GPU device plugin: XidCriticalError True, reason {"123":true,"79":true}, message the
    // boot id. Expected: xid 79 and xid 123 (numeric order) at the transition, then the drain.
    let e = &all("node-gke-xid")[0];
    let got: Vec<(&str, Option<i64>, String)> = e
        .iter()
        .map(|e| (e.kind.as_str(), e.code, e.occurred_at.to_rfc3339()))
        .collect();
    let at = "2026-11-30T10:03:12+00:00".to_string();
    assert_eq!(
        got,
        vec![
            ("xid", Some(79), at.clone()),
            ("xid", Some(123), at.clone()),
            ("node_drain", None, at)
        ]
    );
    assert_ne!(e[0].id, e[1].id);
    assert_eq!(e[0].node.as_deref(), Some("gke-a3-pool-1-7c2f9d41-zq5m"));
    assert_eq!(e[0].attributes["reason"], "{\"123\":true,\"79\":true}");
    // An XID set false, or a reason that is not the plugin's JSON, names no code.
    assert_eq!(gke_xids(r#"{"31":true,"13":false}"#), vec![31]);
    assert_eq!(gke_xids("XID"), Vec::<i64>::new());
    let bare = |reason: &str| {
        let v = json!({"node": "n1", "conditions": [{"type": "XidCriticalError", "status": "True",
            "lastTransitionTime": "2026-11-30T10:00:00Z", "reason": reason, "message": "0"}]});
        map_object(&v, "c1", now())
            .unwrap()
            .iter()
            .map(|e| (e.kind.clone(), e.code))
            .collect::<Vec<_>>()
    };
    assert_eq!(bare(r#"{"31":true}"#)[0], ("xid".to_string(), Some(31)));
    assert_eq!(bare("XID")[0], ("xid".to_string(), None));
    // Adding an XID later (same transition time) keeps the first one's id.
    let first = map_object(
        &json!({"node": "n1", "conditions": [{"type": "XidCriticalError", "status": "True",
        "lastTransitionTime": "2026-11-30T10:00:00Z", "reason": "{\"48\":true}"}]}),
        "c1",
        now(),
    )
    .unwrap();
    let later = map_object(
        &json!({"node": "n1", "conditions": [{"type": "XidCriticalError", "status": "True",
        "lastTransitionTime": "2026-11-30T10:00:00Z", "reason": "{\"48\":true,\"79\":true}"}]}),
        "c1",
        now(),
    )
    .unwrap();
    assert_eq!(later[0].id, first[0].id);
    assert_eq!((later[1].code, later.len()), (Some(79), 3));
}

#[test]
fn eks_and_aks_gpu_conditions_map_to_their_codes() {
    let signals = |conditions: Value| -> Vec<(String, Option<i64>)> {
        map_object(&json!({"node": "n1", "conditions": conditions}), "c1", now())
            .unwrap()
            .iter()
            .map(|e| (e.kind.clone(), e.code))
            .collect()
    };
    let s = |k: &str, c: Option<i64>| (k.to_string(), c);
    // EKS node monitoring agent: AcceleratedHardwareReady False, the reason names the issue
    // (`NvidiaXID%dError`, `NvidiaDoubleBitError`, ...), the message as its DCGM policy writes it.
    assert_eq!(
        signals(
            json!([{"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID79Error",
            "lastTransitionTime": "2026-11-30T10:00:00Z",
            "message": "detected XID-79 on the instance, review kernel logs for additional information."}])
        ),
        vec![s("xid", Some(79)), s("node_drain", None)]
    );
    assert_eq!(
        signals(
            json!([{"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaDoubleBitError",
            "lastTransitionTime": "2026-11-30T10:00:00Z", "message": "detected 2 Nvidia Double Bit error(s) on location 0"}])
        )[0],
        s("ecc", Some(2))
    );
    assert_eq!(
        signals(
            json!([{"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaNVLinkError",
            "lastTransitionTime": "2026-11-30T10:00:00Z"}])
        )[0],
        s("nvlink", None)
    );
    // Its `...Ready` conditions True are healthy, Unknown not evaluated.
    assert_eq!(
        signals(
            json!([{"type": "AcceleratedHardwareReady", "status": "True", "reason": "NvidiaReady",
            "lastTransitionTime": "2026-11-30T10:00:00Z"},
            {"type": "KernelReady", "status": "Unknown", "lastTransitionTime": "2026-11-30T10:00:00Z"}])
        ),
        vec![s("node_resume", None)]
    );
    assert_eq!(
        signals(
            json!([{"type": "KernelReady", "status": "False", "reason": "SoftLockup",
            "lastTransitionTime": "2026-11-30T10:00:00Z"}])
        )[0],
        s("health_check", None)
    );
    // AKS node-problem-detector GPU conditions: XIDErrors names its XIDs in the text.
    assert_eq!(
        signals(json!([{"type": "XIDErrors", "status": "True", "reason": "XIDErrors",
            "lastTransitionTime": "2026-11-30T10:00:00Z", "message": "Xid 48 and XID: 79 found in the kernel log"}])),
        vec![s("xid", Some(48)), s("xid", Some(79)), s("node_drain", None)]
    );
    assert_eq!(
        signals(
            json!([{"type": "NVLinkStatusInactive", "status": "True", "lastTransitionTime": "2026-11-30T10:00:00Z"},
            {"type": "IBLinkFlapping", "status": "True", "lastTransitionTime": "2026-11-30T10:00:00Z"}])
        ),
        vec![s("nvlink", None), s("link_flap", None), s("node_drain", None)]
    );
}

#[test]
fn xid_events_on_a_node_keep_their_xid() {
    let event = |reason: &str, message: &str| {
        json!({"kind": "Event", "metadata": {"uid": format!("u-{reason}")}, "type": "Warning", "reason": reason,
            "message": message, "involvedObject": {"kind": "Node", "name": "gke-a3-pool-1-7c2f9d41-zq5m"},
            "source": {"component": "nvidia-gpu-device-plugin"}, "lastTimestamp": "2026-11-30T10:03:12Z"})
    };
    // GKE's GPU device plugin records `XIDError` "Caught XID error, XID=%d" on the node.
    let e = map_object(&event("XIDError", "Caught XID error, XID=79"), "c1", now()).unwrap();
    assert_eq!((e[0].kind.as_str(), e[0].code), ("xid", Some(79)));
    // EKS's agent names the XID in the reason.
    let e = map_object(
        &event("NvidiaXID13Warning", "detected unknown XID-13 on the instance"),
        "c1",
        now(),
    )
    .unwrap();
    assert_eq!((e[0].kind.as_str(), e[0].code), ("xid", Some(13)));
    assert_eq!(xids_in_text("XID=31, Xid 79; xid-48 and XID 79"), vec![31, 79, 48]);
}

#[test]
fn a_k3s_nodes_events_map_as_listed() {
    // `kubectl get events` of a k3s node (hans-laptop): the node controller's NodeNotReady on the
    // node and on its pod, kubelet's SystemOOM (three victims), Rebooted, the pod's image pull
    // failure and crash back-off, a cancelled taint eviction and a Scheduled.
    let mapped = all("events-k3s");
    let got: Vec<Vec<(&str, Option<&str>)>> = mapped
        .iter()
        .map(|e| e.iter().map(|e| (e.kind.as_str(), e.node.as_deref())).collect())
        .collect();
    let node = Some("hans-laptop");
    assert_eq!(
        got,
        vec![
            vec![("node_unreachable", node)],
            vec![("host_oom", node)],
            vec![("host_oom", node)],
            vec![("host_oom", node)],
            vec![("health_check", node)],
            vec![],
            vec![],
            vec![("submission_error", node)],
            vec![("job_exit", node)],
            vec![],
        ]
    );
    assert_eq!(mapped[0][0].occurred_at.to_rfc3339(), "2026-11-30T03:00:00+00:00");
    assert_eq!(
        mapped[1][0].message.as_deref(),
        Some("SystemOOM: System OOM encountered, victim process: nginx, pid: 9295")
    );
    // A ReplicaSet's pod names no job.
    assert_eq!(mapped[8][0].job_id, None);
}

#[test]
fn an_aks_scale_downs_events_cordon_then_lose_the_node() {
    // The cluster autoscaler marks the node (Normal ScaleDown: ignored), kubelet reports the
    // cordon (NodeNotSchedulable -> node_drain at 15:34:58), the node controller loses it
    // (NodeNotReady -> node_unreachable at 15:37:07); the node's deletion and removal and the next
    // scale-up are Normal and ignored.
    let mapped = all("events-aks");
    let got: Vec<Vec<(&str, String)>> = mapped
        .iter()
        .map(|e| {
            e.iter()
                .map(|e| (e.kind.as_str(), e.occurred_at.to_rfc3339()))
                .collect()
        })
        .collect();
    assert_eq!(
        got,
        vec![
            vec![],
            vec![("node_drain", "2026-10-02T15:34:58+00:00".to_string())],
            vec![("node_unreachable", "2026-10-02T15:37:07+00:00".to_string())],
            vec![],
            vec![],
            vec![],
        ]
    );
    assert!(
        mapped[1..3]
            .iter()
            .all(|e| e[0].node.as_deref() == Some("aks-user-25795745-vmss000002"))
    );
}
