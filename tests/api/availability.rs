//! Availability and the fleet now on a fleet whose state intervals are known by construction; the
//! figures are computed by hand in the comments.

use serde_json::{Value, json};

use crate::cost::csv;
use crate::helpers::{ADMIN_TOKEN, TestApp, event, spawn_app, status_json, uuid_n};

const WINDOW: &str = "from=2026-11-01T00:00:00Z&to=2026-11-04T00:00:00Z&cluster=c1";

async fn post(app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    let res = app
        .client
        .post(app.url(path))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

/// n1, n2, n5: 8 GPUs since October; n3: 4 GPUs from Nov 2; n4: 8 GPUs retired Nov 3.
/// - n1: XID 79 (hardware/gpu) Nov 1 10:00; drained by a node_drain signal 12:00-18:00 (48 GPU-h,
///   cause the XID); GPU 0 sent for RMA Nov 2 12:00, its slot refilled Nov 3 12:00 (12 + 12 GPU-h
///   in repair, cause the XID, 26 h earlier, within the repair's week).
/// - n2: drained through the API Nov 2 06:00 to Nov 3 06:00 (144 + 48 GPU-h, no failure: unattributed),
///   and again from Nov 20 (still drained now).
/// - n5: GPU 2 removed failed Nov 3 18:00, never replaced (6 GPU-h on Nov 3; open now).
async fn fleet(app: &TestApp) {
    let node = |h: &str, gpus: u32, since: &str, retired: Option<&str>| {
        json!({"hostname": h, "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": gpus,
               "in_service_since": since, "retired_at": retired})
    };
    let (status, body) = app
        .put_nodes(
            ADMIN_TOKEN,
            &json!({"nodes": [
                node("n1", 8, "2026-10-01T00:00:00Z", None),
                node("n2", 8, "2026-10-01T00:00:00Z", None),
                node("n3", 4, "2026-11-02T00:00:00Z", None),
                node("n4", 8, "2026-10-01T00:00:00Z", Some("2026-11-03T00:00:00Z")),
                node("n5", 8, "2026-10-01T00:00:00Z", None),
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = app
        .post_events(
            ADMIN_TOKEN,
            &json!({"events": [
                event(&uuid_n(1), json!({"node": "n1", "occurred_at": "2026-11-01T10:00:00Z"})),
                event(&uuid_n(2), json!({"node": "n1", "kind": "node_drain", "code": null, "occurred_at": "2026-11-01T12:00:00Z", "message": "xid 79"})),
                event(&uuid_n(3), json!({"node": "n1", "kind": "node_resume", "code": null, "occurred_at": "2026-11-01T18:00:00Z", "message": "reset"})),
            ]}),
        )
        .await;
    assert!(status < 300, "{body}");
    for (state, at) in [
        ("drained", "2026-11-02T06:00:00Z"),
        ("returned", "2026-11-03T06:00:00Z"),
        ("drained", "2026-11-20T00:00:00Z"),
    ] {
        let (status, body) = post(app, "/v1/nodes/c1/n2/state", json!({"state": state, "at": at})).await;
        assert_eq!(status, 201, "{body}");
    }
    let placement = |serial: &str, host: &str, index: i32, from: &str, to: Option<(&str, &str)>| {
        let mut p = json!({"cluster": "c1", "serial": serial, "node": host, "gpu_index": index, "installed_at": from});
        if let Some((at, why)) = to {
            p["removed_at"] = json!(at);
            p["end_reason"] = json!(why);
        }
        p
    };
    let parts: Vec<Value> = ["P1", "P2", "P3"]
        .iter()
        .map(|s| json!({"cluster": "c1", "serial": s, "model": "NVIDIA H100 80GB HBM3"}))
        .collect();
    let (status, body) = post(
        app,
        "/v1/gpus/history",
        json!({
            "parts": parts,
            "placements": [
                placement("P1", "n1", 0, "2026-10-01T00:00:00Z", Some(("2026-11-02T12:00:00Z", "rma"))),
                placement("P2", "n1", 0, "2026-11-03T12:00:00Z", None),
                placement("P3", "n5", 2, "2026-10-01T00:00:00Z", Some(("2026-11-03T18:00:00Z", "failed"))),
            ],
            "removals": [
                {"cluster": "c1", "serial": "P1", "removed_at": "2026-11-02T12:00:00Z", "reason": "rma", "ticket": "RMA-1"},
                {"cluster": "c1", "serial": "P3", "removed_at": "2026-11-03T18:00:00Z", "reason": "failed"},
            ],
        }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rejected"], json!([]), "{body}");
}

fn lost(point: &Value, state: &str) -> f64 {
    point["lost_by_state"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["state"] == state)
        .unwrap()["gpu_hours"]
        .as_f64()
        .unwrap()
}

fn causes(point: &Value) -> Vec<(String, String, f64)> {
    point["lost_by_cause"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["category"].as_str().unwrap().to_string(),
                c["component"].as_str().unwrap().to_string(),
                c["gpu_hours"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn availability_per_day_and_cause_by_hand() {
    let app = spawn_app().await;
    fleet(&app).await;
    let (status, v) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/availability?{WINDOW}"))
        .await;
    assert_eq!(status, 200, "{v}");
    let p = v["points"].as_array().unwrap();
    assert_eq!(p.len(), 3, "{v}");
    let figures = |x: &Value| {
        (
            x["installed_gpu_hours"].as_f64().unwrap(),
            x["available_gpu_hours"].as_f64().unwrap(),
            x["lost_gpu_hours"].as_f64().unwrap(),
        )
    };
    let c = |cat: &str, comp: &str, h: f64| (cat.to_string(), comp.to_string(), h);
    // Nov 1: n1, n2, n4, n5 = 32 GPUs x 24 h = 768; n1 drained 6 h x 8 = 48 lost.
    assert_eq!(p[0]["period"], "2026-11-01");
    assert_eq!(figures(&p[0]), (768.0, 720.0, 48.0));
    assert_eq!(p[0]["availability"].as_f64(), Some(0.9375));
    assert_eq!(lost(&p[0], "drained"), 48.0);
    assert_eq!(causes(&p[0]), vec![c("hardware", "gpu", 48.0)]);
    // Nov 2: 768 + n3 4 x 24 = 864; n2 drained 18 h x 8 = 144, n1 one GPU in repair 12 h = 12.
    assert_eq!(figures(&p[1]), (864.0, 708.0, 156.0));
    assert_eq!((lost(&p[1], "drained"), lost(&p[1], "in_repair")), (144.0, 12.0));
    assert_eq!(
        causes(&p[1]),
        vec![c("unattributed", "unknown", 144.0), c("hardware", "gpu", 12.0)]
    );
    // Nov 3: n4 retired: 28 GPUs x 24 = 672; n2 drained 6 h x 8 = 48, n1 repair 12, n5 repair 6.
    assert_eq!(figures(&p[2]), (672.0, 606.0, 66.0));
    assert_eq!((lost(&p[2], "drained"), lost(&p[2], "in_repair")), (48.0, 18.0));
    assert_eq!(
        causes(&p[2]),
        vec![c("unattributed", "unknown", 54.0), c("hardware", "gpu", 12.0)]
    );

    // The week (Monday Oct 26 to Sunday Nov 1, then from Nov 2) and generation, summed.
    let (status, v) = app
        .get(
            ADMIN_TOKEN,
            &format!("/v1/analytics/availability?{WINDOW}&period=week&by=generation"),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let p = v["points"].as_array().unwrap();
    assert_eq!(
        (p.len(), p[1]["period"].as_str(), p[1]["key"].as_str()),
        (2, Some("2026-11-02"), Some("hopper"))
    );
    assert_eq!(figures(&p[1]), (1536.0, 1314.0, 222.0));

    // CSV: the day's totals row, then one row per cause.
    let (ct, text) = csv(&app, &format!("/v1/analytics/availability?{WINDOW}")).await;
    assert!(ct.starts_with("text/csv"), "{ct}");
    let lines: Vec<&str> = text.split("\r\n").collect();
    assert_eq!(
        lines[0],
        "period,key,installed_gpu_hours,available_gpu_hours,availability,degraded_gpu_hours,drained_gpu_hours,down_gpu_hours,in_repair_gpu_hours,category,component,lost_gpu_hours"
    );
    assert_eq!(lines[1], "2026-11-01,c1,768,720,0.9375,0,48,0,0,,,48");
    assert_eq!(lines[2], "2026-11-01,c1,,,,,,,,hardware,gpu,48");

    // Bad input: 400 naming the parameter.
    let (status, v) = app.get(ADMIN_TOKEN, "/v1/analytics/availability?period=year").await;
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains("period"), "{v}");
}

#[tokio::test]
async fn fleet_now_lists_states_causes_and_open_repairs() {
    let app = spawn_app().await;
    fleet(&app).await;
    let (status, v) = app
        .get(ADMIN_TOKEN, "/v1/fleet/now?cluster=c1&as_of=2026-11-25T00:00:00Z")
        .await;
    assert_eq!(status, 200, "{v}");
    // Installed now: n1 8 + n2 8 + n3 4 + n5 8 = 28 (n4 retired). Out: n2 drained (8), n5 one GPU
    // in repair (1).
    assert_eq!(
        (v["installed_gpus"].as_u64(), v["out_of_service_gpus"].as_u64()),
        (Some(28), Some(9)),
        "{v}"
    );
    let state = |s: &str| {
        let x = v["by_state"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["state"] == s)
            .unwrap()
            .clone();
        (x["nodes"].as_u64().unwrap(), x["gpus"].as_u64().unwrap())
    };
    assert_eq!(
        (state("drained"), state("in_repair"), state("down")),
        ((1, 8), (1, 1), (0, 0))
    );
    let nodes: Vec<(&str, &str)> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["hostname"].as_str().unwrap(), n["state"].as_str().unwrap()))
        .collect();
    assert_eq!(nodes.len(), 2, "{v}");
    assert!(
        nodes.contains(&("n2", "drained")) && nodes.contains(&("n5", "in_repair")),
        "{v}"
    );
    let n2 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["hostname"] == "n2")
        .unwrap();
    assert_eq!(n2["since"], "2026-11-20T00:00:00Z");
    let repairs = v["oldest_repairs"].as_array().unwrap();
    assert_eq!(repairs.len(), 1, "{v}");
    assert_eq!(
        (
            repairs[0]["hostname"].as_str(),
            repairs[0]["gpu_index"].as_i64(),
            repairs[0]["part"].as_str(),
            repairs[0]["reason"].as_str()
        ),
        (Some("n5"), Some(2), Some("P3"), Some("failed"))
    );
    assert_eq!(repairs[0]["removed_at"], "2026-11-03T18:00:00Z");
    // Nov 3 18:00 to Nov 25 00:00: 21 days and 6 hours.
    assert_eq!(repairs[0]["age_hours"].as_f64(), Some(510.0));
    assert_eq!(v["at"], "2026-11-25T00:00:00Z");
    let n5 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["hostname"] == "n5")
        .unwrap();
    assert_eq!(
        (n5["since"].as_str(), n5["gpus_out"].as_u64()),
        (Some("2026-11-03T18:00:00Z"), Some(1))
    );
    // On Nov 2 at 15:00: n1 has GPU 0 out for RMA (cause: its XID of Nov 1), n2 is drained.
    let (status, v) = app
        .get(ADMIN_TOKEN, "/v1/fleet/now?cluster=c1&as_of=2026-11-02T15:00:00Z")
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["out_of_service_gpus"].as_u64(), Some(9), "{v}");
    let repairs = v["oldest_repairs"].as_array().unwrap();
    assert_eq!(
        (
            repairs[0]["hostname"].as_str(),
            repairs[0]["ticket"].as_str(),
            repairs[0]["cause"]["category"].as_str(),
            repairs[0]["age_hours"].as_f64()
        ),
        (Some("n1"), Some("RMA-1"), Some("hardware"), Some(3.0)),
        "{v}"
    );
    // n4 is not retired yet: 8 + 8 + 4 + 8 + 8.
    assert_eq!(v["installed_gpus"].as_u64(), Some(36));
    // A token scoped to another cluster may not ask for c1.
    let other = app.token("reader", Some("c2")).await;
    assert_eq!(app.get(&other, "/v1/fleet/now?cluster=c1").await.0, 403);
}

#[tokio::test]
async fn repair_pipeline_stages_by_hand() {
    let app = spawn_app().await;
    fleet(&app).await;
    // One incident: n1's XID (first signal Nov 1 10:00) drained it 12:00-18:00 and sent GPU 0 for
    // RMA Nov 2 12:00 to Nov 3 12:00. n2's drains and n5's removal follow no failure: no incident.
    let (status, v) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/repair-pipeline?{WINDOW}"))
        .await;
    assert_eq!(status, 200, "{v}");
    let inc = v["incidents"].as_array().unwrap();
    assert_eq!(inc.len(), 1, "{v}");
    let i = &inc[0];
    assert_eq!(
        (
            i["hostname"].as_str(),
            i["cause"]["category"].as_str(),
            i["cause"]["component"].as_str()
        ),
        (Some("n1"), Some("hardware"), Some("gpu"))
    );
    // detect 10:00 -> 12:00 = 2 h; drain the same; repair 24 h; return Nov 1 12:00 -> Nov 3 12:00 = 48 h.
    let h = |k: &str| i[k].as_f64();
    assert_eq!(
        (
            h("detect_hours"),
            h("drain_hours"),
            h("repair_hours"),
            h("return_hours"),
            h("open_hours")
        ),
        (Some(2.0), Some(2.0), Some(24.0), Some(48.0), None)
    );
    let c = &v["by_cause"][0];
    assert_eq!(
        (c["key"].as_str(), c["incidents"].as_u64(), c["open"].as_u64()),
        (Some("hardware/gpu"), Some(1), Some(0))
    );
    assert_eq!(c["return_hours"]["p90"].as_f64(), Some(48.0));
    assert_eq!(v["by_cluster"][0]["key"], "c1");
    assert_eq!(v["stuck"], json!([]));

    // Ending Nov 3 00:00, the repair is still open: 36 h out, no repair nor return time yet.
    let (status, v) = app
        .get(
            ADMIN_TOKEN,
            "/v1/analytics/repair-pipeline?from=2026-11-01T00:00:00Z&to=2026-11-03T00:00:00Z&cluster=c1",
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let i = &v["incidents"][0];
    assert_eq!(
        (
            i["repair_hours"].as_f64(),
            i["return_hours"].as_f64(),
            i["open_hours"].as_f64(),
            i["stuck"].as_bool()
        ),
        (None, None, Some(36.0), Some(false))
    );

    let (_, text) = csv(&app, &format!("/v1/analytics/repair-pipeline?{WINDOW}")).await;
    let lines: Vec<&str> = text.split("\r\n").collect();
    assert_eq!(
        lines[0],
        "cluster,hostname,failure_id,category,component,first_at,out_at,returned_at,detect_hours,drain_hours,repair_hours,return_hours,open_hours,stuck"
    );
    assert!(
        lines[1].starts_with("c1,n1,") && lines[1].ends_with(",hardware,gpu,2026-11-01T10:00:00+00:00,2026-11-01T12:00:00+00:00,2026-11-03T12:00:00+00:00,2,2,24,48,,false"),
        "{text}"
    );
}

/// Overlapping sources through the real alert loop: a node drained while a silence alert fires on it
/// is down (down > drained); once it speaks again it is drained until returned.
#[tokio::test]
async fn a_drain_during_a_silence_is_down_until_the_node_speaks() {
    use crate::alerts::{alerting_app, heartbeat, put_rule, wait_state};
    let app = alerting_app().await;
    let (status, body) = app
        .put_nodes(
            ADMIN_TOKEN,
            &json!({"nodes": [{"hostname": "n7", "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
                                "in_service_since": "2026-01-01T00:00:00Z"}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, v) = put_rule(
        &app,
        "quiet",
        &json!({"condition": {"kind": "silence", "minutes": 0.05, "scope": "node"}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    // Silent for 3 s after this heartbeat: the rule fires.
    heartbeat(&app, "n7").await;
    wait_state(&app, "quiet", "firing", 10).await;
    let (status, v) = post(&app, "/v1/nodes/c1/n7/state", json!({"state": "drained"})).await;
    assert_eq!(status, 201, "{v}");
    let now = |v: &Value| {
        let n = &v["nodes"][0];
        (
            n["state"].as_str().map(String::from),
            n["gpus_out"].as_u64(),
            v["out_of_service_gpus"].as_u64(),
        )
    };
    let (status, v) = app.get(ADMIN_TOKEN, "/v1/fleet/now?cluster=c1").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(now(&v), (Some("down".into()), Some(8), Some(8)), "{v}");
    heartbeat(&app, "n7").await;
    wait_state(&app, "quiet", "resolved", 10).await;
    let (_, v) = app.get(ADMIN_TOKEN, "/v1/fleet/now?cluster=c1").await;
    assert_eq!(now(&v), (Some("drained".into()), Some(8), Some(8)), "{v}");
    // Speaking again keeps the silence off while the return is read.
    heartbeat(&app, "n7").await;
    let (status, v) = post(&app, "/v1/nodes/c1/n7/state", json!({"state": "returned"})).await;
    assert_eq!(status, 201, "{v}");
    let (_, v) = app.get(ADMIN_TOKEN, "/v1/fleet/now?cluster=c1").await;
    assert_eq!(
        (v["nodes"].as_array().map(Vec::len), v["out_of_service_gpus"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
}

/// The alert kinds on the ledger: availability below a share, and a repair stuck past its cause's
/// p90, through the real alert loop.
#[tokio::test]
async fn availability_below_and_stuck_repair_alerts_fire() {
    use crate::alerts::{alerting_app, put_rule, wait_state};
    let app = alerting_app().await;
    fleet(&app).await;
    // n3 (4 GPUs): an XID 200 h ago, drained 199 h ago and returned 197 h ago (return: 2 h); another
    // XID 50 h ago, drained 49 h ago and still out: open 49 h > p90 of 2 h, stuck.
    let now = chrono::Utc::now();
    let ago = |h: i64| (now - chrono::Duration::hours(h)).to_rfc3339();
    let (status, body) = app
        .post_events(
            ADMIN_TOKEN,
            &json!({"events": [
                event(&uuid_n(50), json!({"node": "n3", "occurred_at": ago(200)})),
                event(&uuid_n(51), json!({"node": "n3", "occurred_at": ago(50)})),
            ]}),
        )
        .await;
    assert!(status < 300, "{body}");
    for (state, h) in [("drained", 199), ("returned", 197), ("drained", 49)] {
        let (status, body) = post(&app, "/v1/nodes/c1/n3/state", json!({"state": state, "at": ago(h)})).await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, v) = put_rule(
        &app,
        "avail",
        &json!({"condition": {"kind": "availability_below", "share": 0.9, "window_hours": 24}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = put_rule(&app, "stuck", &json!({"condition": {"kind": "stuck_repair"}})).await;
    assert_eq!(status, 200, "{v}");
    // Over the last 24 h: 28 GPUs installed (n1 8, n2 8, n3 4, n5 8); out: n2 drained (8), n3
    // drained (4), n5 one GPU in repair (1): 15 / 28 available.
    let a = wait_state(&app, "avail", "firing", 10).await;
    assert_eq!(a["value"].as_f64(), Some(((15.0f64 / 28.0) * 1e6).round() / 1e6), "{a}");
    let s = wait_state(&app, "stuck", "firing", 10).await;
    assert!(s["subject"].as_str().unwrap().starts_with("n3/"), "{s}");
    let (status, v) = put_rule(
        &app,
        "bad",
        &json!({"condition": {"kind": "availability_below", "share": 1.5}}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains("condition.share"), "{v}");
}

/// A drain recorded with its failure takes that failure as its cause, even when the failure's root
/// was another node and a later failure of the drained node is within the attribution window; a
/// pending row remap (the logs' `status: pending` and the agent's counter) degrades its node until
/// the node is next drained.
#[tokio::test]
async fn a_drain_names_its_cause_and_a_pending_remap_degrades_until_the_next_drain() {
    let app = spawn_app().await;
    let node = |h: &str| {
        json!({"hostname": h, "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
               "in_service_since": "2026-10-01T00:00:00Z"})
    };
    let (status, body) = app
        .put_nodes(ADMIN_TOKEN, &json!({"nodes": [node("m1"), node("m2")]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let remap = |id: u32, host: &str, at: &str, attributes: Value| {
        event(
            &uuid_n(id),
            json!({"node": host, "kind": "row_remap", "code": null, "gpu_index": 3, "occurred_at": at,
                   "message": "row remapping pending", "attributes": attributes}),
        )
    };
    let (status, body) = app
        .post_events(
            ADMIN_TOKEN,
            &json!({"events": [
                event(&uuid_n(21), json!({"node": "m2", "occurred_at": "2026-11-01T08:00:00Z"})),
                event(&uuid_n(22), json!({"node": "m1", "occurred_at": "2026-11-01T11:00:00Z"})),
                remap(23, "m1", "2026-11-02T00:00:00Z", json!({"status": "pending"})),
                remap(24, "m2", "2026-11-02T20:00:00Z", json!({"counter": "remapped_rows_pending", "value": true})),
            ]}),
        )
        .await;
    assert!(status < 300, "{body}");
    let (status, v) = app
        .get(
            ADMIN_TOKEN,
            "/v1/failures?cluster=c1&from=2026-11-01T00:00:00Z&to=2026-11-01T12:00:00Z",
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let of_m2 = v["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["root_node"] == "m2")
        .unwrap_or_else(|| panic!("{v}"))["id"]
        .clone();
    for (state, at, failure) in [
        ("drained", "2026-11-01T12:00:00Z", of_m2.clone()),
        ("returned", "2026-11-01T18:00:00Z", Value::Null),
        ("drained", "2026-11-02T06:00:00Z", Value::Null),
        ("returned", "2026-11-02T12:00:00Z", Value::Null),
    ] {
        let (status, body) = post(
            &app,
            "/v1/nodes/c1/m1/state",
            json!({"state": state, "at": at, "failure_id": failure}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let window = "from=2026-11-01T00:00:00Z&to=2026-11-03T00:00:00Z&cluster=c1";
    // The first drain's incident is m2's failure (first signal 08:00): detect and drain 4 h, back 6 h
    // after it went out.
    let (status, v) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/repair-pipeline?{window}"))
        .await;
    assert_eq!(status, 200, "{v}");
    let incident = v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["cause"]["failure_id"] == of_m2)
        .unwrap_or_else(|| panic!("no incident of the named failure: {v}"));
    assert_eq!(
        (
            incident["hostname"].as_str(),
            incident["detect_hours"].as_f64(),
            incident["drain_hours"].as_f64(),
            incident["return_hours"].as_f64()
        ),
        (Some("m1"), Some(4.0), Some(4.0), Some(6.0)),
        "{v}"
    );
    // Nov 2: 2 nodes x 8 GPUs x 24 h = 384 installed; m1 drained 06:00-12:00 = 48 lost; degraded:
    // m1 pending 00:00 until its drain at 06:00 (8 x 6 = 48), m2 pending from 20:00 to the window's
    // end (8 x 4 = 32): 80.
    let (status, v) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/availability?{window}"))
        .await;
    assert_eq!(status, 200, "{v}");
    let p = &v["points"][1];
    assert_eq!(p["period"], "2026-11-02", "{v}");
    assert_eq!(
        (
            p["installed_gpu_hours"].as_f64(),
            p["lost_gpu_hours"].as_f64(),
            p["degraded_gpu_hours"].as_f64()
        ),
        (Some(384.0), Some(48.0), Some(80.0)),
        "{v}"
    );
    // Nov 1: only the named drain, 12:00-18:00 = 48 lost, degraded nothing.
    let p = &v["points"][0];
    assert_eq!(
        (p["lost_gpu_hours"].as_f64(), p["degraded_gpu_hours"].as_f64()),
        (Some(48.0), Some(0.0)),
        "{v}"
    );
}
