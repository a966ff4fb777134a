//! GPU parts over HTTP: nodes' GPU sets diffed into placements (moves, swaps, returns, a new UUID on
//! the same serial), nvidia-smi XML, history imports, removals, attribution of failures to the
//! part in the slot at the time, and cluster scope; on Postgres and on Citus.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, Backend, TestApp, event, spawn_app, spawn_app_on_backend, uuid_n};

async fn put(app: &TestApp, token: &str, path: &str, body: &Value) -> (u16, Value) {
    let res = app
        .client
        .put(app.url(path))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    crate::helpers::status_json(res).await
}

async fn post(app: &TestApp, token: &str, path: &str, body: &Value) -> (u16, Value) {
    let res = app
        .client
        .post(app.url(path))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    crate::helpers::status_json(res).await
}

fn gpu(index: i32, serial: &str) -> Value {
    json!({"index": index, "serial": serial, "uuid": format!("GPU-{serial}"), "model": "NVIDIA H100 80GB HBM3",
           "pci_bus_id": format!("00000000:{:02X}:00.0", 0x10 + index)})
}

fn node(cluster: &str, host: &str, at: &str, gpus: Vec<Value>) -> Value {
    json!({"cluster": cluster, "hostname": host, "observed_at": at, "gpus": gpus})
}

/// The placements of a part as (node, index, installed_at, removed_at, end_reason).
async fn placements(app: &TestApp, part: &str) -> Vec<(String, i64, String, Value, Value)> {
    let (status, t) = app.get(ADMIN_TOKEN, &format!("/v1/gpus/{part}")).await;
    assert_eq!(status, 200, "{t}");
    t["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["node"].as_str().unwrap().to_string(),
                p["gpu_index"].as_i64().unwrap(),
                p["installed_at"].as_str().unwrap().to_string(),
                p["removed_at"].clone(),
                p["end_reason"].clone(),
            )
        })
        .collect()
}

async fn swaps_moves_and_attribution(app: &TestApp) {
    let agent = app.token("agent", None).await;
    // Day 1: n1 holds A and B.
    let (status, body) = put(
        app,
        &agent,
        "/v1/gpus/inventory",
        &json!({"nodes": [node("c1", "n1", "2026-11-01T00:00:00Z", vec![gpu(0, "A"), gpu(1, "B")])]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["opened"].as_i64(),
            body["closed"].as_i64(),
            body["parts_written"].as_i64()
        ),
        (Some(2), Some(0), Some(2))
    );
    // The same set again changes nothing and writes nothing.
    let (_, body) = put(
        app,
        &agent,
        "/v1/gpus/inventory",
        &json!({"nodes": [node("c1", "n1", "2026-11-02T00:00:00Z", vec![gpu(0, "A"), gpu(1, "B")])]}),
    )
    .await;
    assert_eq!(
        (
            body["opened"].as_i64(),
            body["closed"].as_i64(),
            body["parts_written"].as_i64()
        ),
        (Some(0), Some(0), Some(0))
    );

    // A signal on slot 1 before the swap: it is B's.
    let (s, b) = app
        .post_events(
            &agent,
            &json!({"events": [event(&uuid_n(1), json!({"cluster": "c1", "node": "n1", "gpu_index": 1,
                                                                        "occurred_at": "2026-11-03T00:00:00Z"}))]}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    // Day 5: B swapped out for C; day 6: B shows up in n2 slot 3 (back from repair).
    put(
        app,
        &agent,
        "/v1/gpus/inventory",
        &json!({"nodes": [node("c1", "n1", "2026-11-05T00:00:00Z", vec![gpu(0, "A"), gpu(1, "C")])]}),
    )
    .await;
    put(
        app,
        &agent,
        "/v1/gpus/inventory",
        &json!({"nodes": [node("c1", "n2", "2026-11-06T00:00:00Z", vec![gpu(3, "B")])]}),
    )
    .await;
    // A signal on n1 slot 1 after the swap: C's.
    app.post_events(
        &agent,
        &json!({"events": [event(&uuid_n(2), json!({"cluster": "c1", "node": "n1", "gpu_index": 1,
                                                                       "occurred_at": "2026-11-07T00:00:00Z"}))]}),
    )
    .await;

    let b = placements(app, "B").await;
    assert_eq!(b.len(), 2);
    assert_eq!(
        (b[0].0.as_str(), b[0].1, b[0].3.as_str(), b[0].4.as_str()),
        ("n1", 1, Some("2026-11-05T00:00:00Z"), Some("absent"))
    );
    assert_eq!(
        (b[1].0.as_str(), b[1].1, b[1].3.clone(), b[1].4.clone()),
        ("n2", 3, Value::Null, Value::Null)
    );
    let (_, tb) = app.get(ADMIN_TOKEN, "/v1/gpus/B").await;
    assert_eq!(tb["failures"].as_array().unwrap().len(), 1, "{tb}");
    assert_eq!(tb["failures"][0]["first_at"], "2026-11-03T00:00:00Z");
    // The failure names its root GPU and the part there at the time.
    let id = tb["failures"][0]["failure_id"].as_str().unwrap();
    let (_, f) = app.get(ADMIN_TOKEN, &format!("/v1/failures/{id}")).await;
    assert_eq!(
        (f["root_gpu"]["gpu_index"].as_i64(), f["root_gpu"]["part"].as_str()),
        (Some(1), Some("B")),
        "{f}"
    );
    assert_eq!(
        (tb["state"].as_str(), tb["node"].as_str()),
        (Some("installed"), Some("n2"))
    );
    // Installed 2026-11-01..05 and since 2026-11-06: 4 days plus the time since.
    let (_, tc) = app.get(ADMIN_TOKEN, "/v1/gpus/C").await;
    assert_eq!(tc["failures"].as_array().unwrap().len(), 1, "{tc}");
    assert_eq!(tc["failures"][0]["first_at"], "2026-11-07T00:00:00Z");
    // The UUID finds the part too.
    let (status, by_uuid) = app.get(ADMIN_TOKEN, "/v1/gpus/GPU-C").await;
    assert_eq!((status, by_uuid["part"].as_str()), (200, Some("C")));

    // The same serial with a new UUID in the same slot: reidentified, history kept.
    let mut a2 = gpu(0, "A");
    a2["uuid"] = json!("GPU-A-after-repair");
    put(
        app,
        &agent,
        "/v1/gpus/inventory",
        &json!({"nodes": [node("c1", "n1", "2026-11-08T00:00:00Z", vec![a2, gpu(1, "C")])]}),
    )
    .await;
    let a = placements(app, "A").await;
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].4.as_str(), Some("reidentified"));
    let (_, ta) = app.get(ADMIN_TOKEN, "/v1/gpus/A").await;
    assert_eq!(ta["uuid"], "GPU-A-after-repair");

    // A's move to another cluster closes it in c1.
    put(
        app,
        &agent,
        "/v1/gpus/inventory",
        &json!({"nodes": [node("c2", "m1", "2026-11-09T00:00:00Z", vec![gpu(0, "A")])]}),
    )
    .await;
    let a = placements(app, "A").await;
    assert_eq!(a.len(), 3);
    assert_eq!(
        (a[1].3.as_str(), a[1].4.as_str()),
        (Some("2026-11-09T00:00:00Z"), Some("moved"))
    );
    assert_eq!(a[2].0, "m1");

    // A node's slots over time.
    let (_, slots) = app.get(ADMIN_TOKEN, "/v1/nodes/c1/n1/gpus").await;
    let parts: Vec<&str> = slots["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["part"].as_str().unwrap())
        .collect();
    assert_eq!(parts, ["A", "B", "C", "A"]);

    // The list: states and filters.
    let (_, all) = app.get(ADMIN_TOKEN, "/v1/gpus").await;
    let listed: Vec<(&str, &str, &str)> = all["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["part"].as_str().unwrap(),
                g["cluster"].as_str().unwrap(),
                g["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("A", "c2", "installed"),
            ("B", "c1", "installed"),
            ("C", "c1", "installed")
        ]
    );
    let (_, on_n2) = app.get(ADMIN_TOKEN, "/v1/gpus?node=n2").await;
    assert_eq!(on_n2["gpus"].as_array().unwrap().len(), 1);
    let (_, page) = app.get(ADMIN_TOKEN, "/v1/gpus?limit=2").await;
    let cursor = page["next_cursor"].as_str().unwrap();
    let (_, rest) = app.get(ADMIN_TOKEN, &format!("/v1/gpus?limit=2&cursor={cursor}")).await;
    assert_eq!(rest["gpus"][0]["part"], "C");
    assert!(rest["next_cursor"].is_null());

    // Scope: a reader of c2 sees A only, and only its c2 placement.
    let reader = app.token("reader", Some("c2")).await;
    let (_, scoped) = app.get(&reader, "/v1/gpus").await;
    assert_eq!(scoped["gpus"].as_array().unwrap().len(), 1);
    let (_, ta) = app.get(&reader, "/v1/gpus/A").await;
    assert_eq!(ta["placements"].as_array().unwrap().len(), 1);
    let (status, _) = app.get(&reader, "/v1/gpus/B").await;
    assert_eq!(status, 404);
    let (status, _) = app.get(&reader, "/v1/gpus?cluster=c1").await;
    assert_eq!(status, 403);

    // Removal: admin only, audited, closes the placement.
    let (status, _) = post(
        app,
        &agent,
        "/v1/gpus/C/removals",
        &json!({"cluster": "c1", "reason": "rma"}),
    )
    .await;
    assert_eq!(status, 403);
    let (status, r) = post(
        app,
        ADMIN_TOKEN,
        "/v1/gpus/C/removals",
        &json!({"cluster": "c1", "reason": "rma", "at": "2026-11-10T00:00:00Z", "ticket": "RMA-4411", "note": "XID 79 twice"}),
    )
    .await;
    assert_eq!(status, 201, "{r}");
    assert_eq!(r["closed_placement"], true);
    let (_, tc) = app.get(ADMIN_TOKEN, "/v1/gpus/C").await;
    assert_eq!(tc["state"], "rma");
    assert_eq!(tc["removals"][0]["ticket"], "RMA-4411");
    assert_eq!(tc["placements"][0]["end_reason"], "rma");
    let (_, audit) = app.get(ADMIN_TOKEN, "/v1/audit?action=gpu.removal").await;
    assert_eq!(audit["entries"][0]["target"], "c1/C", "{audit}");
    let (status, _) = post(
        app,
        ADMIN_TOKEN,
        "/v1/gpus/nope/removals",
        &json!({"cluster": "c1", "reason": "failed"}),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = post(
        app,
        ADMIN_TOKEN,
        "/v1/gpus/B/removals",
        &json!({"cluster": "c1", "reason": "failed",
                                                                             "at": "2026-11-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(status, 409, "a removal before the part's placement");
}

#[tokio::test]
async fn placements_follow_parts_across_swaps_moves_and_new_uuids() {
    swaps_moves_and_attribution(&spawn_app().await).await;
}

#[tokio::test]
async fn placements_follow_parts_on_citus() {
    swaps_moves_and_attribution(&spawn_app_on_backend(Backend::Citus).await).await;
}

#[tokio::test]
async fn nvidia_smi_xml_registers_the_node_and_an_unchanged_report_writes_nothing() {
    let app = spawn_app().await;
    let agent = app.token("agent", None).await;
    let xml = include_str!("../fixtures/nvidia-smi/p100-two-gpus.xml");
    let send = |body: &'static str, ct: &'static str| {
        app.client
            .put(app.url("/v1/nodes/c1/gpu-07/gpus"))
            .bearer_auth(&agent)
            .header("content-type", ct)
            .body(body)
            .send()
    };
    let (status, body) = crate::helpers::status_json(send(xml, "application/xml").await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["opened"].as_i64(), body["parts_written"].as_i64()),
        (Some(2), Some(2))
    );
    let versions = || async {
        sqlx::query_scalar::<_, String>("SELECT string_agg(xmin::text, ',' ORDER BY part) FROM gpu_parts")
            .fetch_one(&app.db)
            .await
            .unwrap()
    };
    let before = versions().await;
    let (_, body) = crate::helpers::status_json(send(xml, "text/xml").await.unwrap()).await;
    assert_eq!(
        (
            body["opened"].as_i64(),
            body["closed"].as_i64(),
            body["parts_written"].as_i64()
        ),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!(versions().await, before, "an unchanged report rewrites no part");
    let (_, g) = app.get(ADMIN_TOKEN, "/v1/gpus/0320717031755").await;
    assert_eq!((g["node"].as_str(), g["gpu_index"].as_i64()), (Some("gpu-07"), Some(1)));
    assert_eq!(g["placements"][0]["pci_bus_id"], "0000:82:00.0");
    assert_eq!(
        (g["vbios"].as_str(), g["driver"].as_str()),
        (Some("86.00.3A.00.02"), Some("375.66"))
    );
    assert_eq!(g["generation"], "pascal");
    // Not a report; not a type we read.
    let (status, body) = crate::helpers::status_json(send("<html></html>", "application/xml").await.unwrap()).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_xml")), "{body}");
    let (status, _) = crate::helpers::status_json(send("x", "text/plain").await.unwrap()).await;
    assert_eq!(status, 415);
    // A GPU without serial or UUID is refused, saying which.
    let (status, body) = put(
        &app,
        &agent,
        "/v1/nodes/c1/gpu-08/gpus",
        &json!({"gpus": [gpu(0, "X"), {"index": 1}]}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["details"]["rejected"][0]["field"], "gpus[1].serial");
}

#[tokio::test]
async fn history_imports_are_idempotent_and_late_inventory_attributes_earlier_failures() {
    let app = spawn_app().await;
    let agent = app.token("agent", None).await;
    // A failure on n5 slot 2 before any inventory.
    app.post_events(
        &agent,
        &json!({"events": [event(&uuid_n(9), json!({"cluster": "c1", "node": "n5", "gpu_index": 2,
                                                                       "occurred_at": "2026-10-15T00:00:00Z"}))]}),
    )
    .await;
    let import = json!({
        "parts": [{"cluster": "c1", "serial": "S1", "model": "NVIDIA A100-SXM4-80GB", "attributes": {"lot": "L7"}},
                  {"cluster": "c1", "serial": "S2", "attributes": {"lot": "L8", "bad": {"nested": 1}}}],
        "placements": [{"cluster": "c1", "serial": "S1", "node": "n5", "gpu_index": 2,
                        "installed_at": "2026-01-01T00:00:00Z", "removed_at": "2026-10-20T00:00:00Z", "end_reason": "failed"},
                       {"cluster": "c1", "serial": "S3", "node": "n5", "gpu_index": 2, "installed_at": "2026-10-21T00:00:00Z"},
                       {"cluster": "c1", "serial": "S4", "node": "n6", "installed_at": "2026-10-21T00:00:00Z",
                        "removed_at": "2026-10-01T00:00:00Z"}],
        "removals": [{"cluster": "c1", "serial": "S1", "removed_at": "2026-10-20T00:00:00Z", "reason": "failed", "ticket": "T-1"}]
    });
    let (status, body) = post(&app, &agent, "/v1/gpus/history", &import).await;
    assert_eq!(status, 403, "importing history is an admin's act");
    let (status, body2) = post(&app, ADMIN_TOKEN, "/v1/gpus/history", &import).await;
    assert_eq!(status, 200, "{body} {body2}");
    let rejected: Vec<(i64, &str)> = body2["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["index"].as_i64().unwrap(), r["field"].as_str().unwrap()))
        .collect();
    assert_eq!(
        rejected,
        [(1, "parts[1].attributes.bad"), (4, "placements[2].removed_at")]
    );
    assert_eq!(body2["written"], json!({"parts": 2, "placements": 2, "removals": 1}));
    let (_, again) = post(&app, ADMIN_TOKEN, "/v1/gpus/history", &import).await;
    assert_eq!(
        again["written"],
        json!({"parts": 0, "placements": 0, "removals": 0}),
        "{again}"
    );
    let (_, s1) = app.get(ADMIN_TOKEN, "/v1/gpus/S1").await;
    assert_eq!(s1["state"], "failed");
    assert_eq!(
        s1["failures"].as_array().unwrap().len(),
        1,
        "late inventory attributes the earlier failure: {s1}"
    );
    assert_eq!(s1["attributes"]["lot"], "L7");
    assert_eq!(s1["generation"], "ampere");
    // 2026-01-01 to 2026-10-20: 292 days installed.
    assert_eq!(s1["installed_days"], 292.0);
    let (_, s3) = app.get(ADMIN_TOKEN, "/v1/gpus/S3").await;
    assert_eq!(s3["failures"].as_array().unwrap().len(), 0);
    let (_, audit) = app.get(ADMIN_TOKEN, "/v1/audit?action=gpu.import").await;
    assert_eq!(audit["entries"].as_array().unwrap().len(), 2, "{audit}");
}

/// Four H100 parts and two A100 parts with lives computed by hand (ages in installed days):
/// hopper: P1 failed at 100, P2 out of its slot (spare) at 300, P3 RMA at 60 + 40 = 100 (a shelf
/// between two placements does not age it), P4 decommissioned at 50; ampere: Q1 failed at 200, Q2
/// spare at 400.
#[tokio::test]
async fn survival_and_afr_match_hand_computed_lifetimes() {
    let app = spawn_app().await;
    let pl = |serial: &str, model_node: &str, from: &str, to: &str, reason: &str| {
        json!({"cluster": "c1", "serial": serial, "node": model_node, "gpu_index": 0,
               "installed_at": format!("{from}T00:00:00Z"), "removed_at": format!("{to}T00:00:00Z"), "end_reason": reason})
    };
    let part = |serial: &str, model: &str, lot: &str| json!({"cluster": "c1", "serial": serial, "model": model, "attributes": {"lot": lot}});
    let rm = |serial: &str, at: &str, reason: &str| json!({"cluster": "c1", "serial": serial, "removed_at": format!("{at}T00:00:00Z"), "reason": reason});
    let import = json!({
        "parts": [part("P1", "NVIDIA H100 80GB HBM3", "L1"), part("P2", "NVIDIA H100 80GB HBM3", "L1"),
                  part("P3", "NVIDIA H100 80GB HBM3", "L2"), part("P4", "NVIDIA H100 80GB HBM3", "L2"),
                  part("Q1", "NVIDIA A100-SXM4-80GB", "L3"), part("Q2", "NVIDIA A100-SXM4-80GB", "L3")],
        "placements": [pl("P1", "h1", "2025-01-01", "2025-04-11", "failed"),
                       pl("P2", "h2", "2025-01-01", "2025-10-28", "absent"),
                       pl("P3", "h3", "2025-01-01", "2025-03-02", "other"),
                       pl("P3", "h4", "2025-05-01", "2025-06-10", "rma"),
                       pl("P4", "h5", "2025-01-01", "2025-02-20", "decommissioned"),
                       pl("Q1", "a1", "2025-01-01", "2025-07-20", "failed"),
                       pl("Q2", "a2", "2025-01-01", "2026-02-05", "absent")],
        "removals": [rm("P1", "2025-04-11", "failed"), rm("P3", "2025-06-10", "rma"), rm("P4", "2025-02-20", "decommissioned"),
                     rm("Q1", "2025-07-20", "failed")]
    });
    let (status, body) = post(&app, ADMIN_TOKEN, "/v1/gpus/history", &import).await;
    assert_eq!(status, 200, "{body}");
    let (status, s) = app.get(ADMIN_TOKEN, "/v1/analytics/survival?by=generation").await;
    assert_eq!(status, 200, "{s}");
    let groups = s["groups"].as_array().unwrap();
    assert_eq!(
        groups.iter().map(|g| g["group"].as_str().unwrap()).collect::<Vec<_>>(),
        ["ampere", "hopper"]
    );
    let hopper = &groups[1];
    assert_eq!(
        (hopper["parts"].as_u64(), hopper["events"].as_u64()),
        (Some(4), Some(2))
    );
    let steps: Vec<(f64, u64, u64, u64, f64)> = hopper["curve"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| {
            (
                st["time"].as_f64().unwrap(),
                st["at_risk"].as_u64().unwrap(),
                st["events"].as_u64().unwrap(),
                st["censored"].as_u64().unwrap(),
                st["survival"].as_f64().unwrap(),
            )
        })
        .collect();
    // 50: P4 censored (4 at risk); 100: P1 and P3 fail (3 at risk), S = 1/3; 300: P2 censored.
    assert_eq!(steps.len(), 3);
    assert_eq!(
        (steps[0].0, steps[0].1, steps[0].2, steps[0].3, steps[0].4),
        (50.0, 4, 0, 1, 1.0)
    );
    assert_eq!((steps[1].0, steps[1].1, steps[1].2, steps[1].3), (100.0, 3, 2, 0));
    assert!((steps[1].4 - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!((steps[2].0, steps[2].3), (300.0, 1));
    // Greenwood on the log(-log) scale, as lifelines computes it: [0.008962, 0.774149] at 100.
    let step = &hopper["curve"]["steps"][1];
    assert!((step["lower"].as_f64().unwrap() - 0.008962).abs() < 1e-6, "{step}");
    assert!((step["upper"].as_f64().unwrap() - 0.774149).abs() < 1e-6, "{step}");
    assert_eq!(hopper["median_days"], 100.0);
    // Nobody reached a year of installed time: the curve says nothing there.
    assert!(hopper["at_ages"][0]["survival"].is_null());
    assert_eq!(hopper["at_ages"][0]["at_risk"], 0);
    // Log-rank by hand: at 100, E(hopper) = 2 x 3/5, V = 2 x 0.6 x 0.4 x 3/4; at 200, E = 1/3,
    // V = 2/9; (2 - 1.5333)^2 / 0.58222 = 0.374046 on 1 df (lifelines: 0.37404580152671746).
    let lr = &s["log_rank"];
    assert!(
        (lr["statistic"].as_f64().unwrap() - 0.374_045_801_526_717_46).abs() < 1e-9,
        "{lr}"
    );
    assert_eq!(lr["degrees_of_freedom"], 1);

    // AFR: hopper 2 failure removals over 100 + 300 + 100 + 50 = 550 part-days = 1.505818 part-years.
    let (status, a) = app.get(ADMIN_TOKEN, "/v1/analytics/afr?by=model").await;
    assert_eq!(status, 200, "{a}");
    let h100 = a["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "NVIDIA H100 80GB HBM3")
        .unwrap();
    assert_eq!(h100["failures"], 2);
    assert!((h100["part_years"].as_f64().unwrap() - 550.0 / 365.25).abs() < 1e-9);
    assert!((h100["rate_per_year"].as_f64().unwrap() - 2.0 / (550.0 / 365.25)).abs() < 1e-9);
    // By a site attribute; the event can be the first hardware failure instead (none resolved here).
    let (_, lots) = app
        .get(
            ADMIN_TOKEN,
            "/v1/analytics/survival?by=attribute:lot&event=hardware_failure",
        )
        .await;
    assert_eq!(lots["groups"].as_array().unwrap().len(), 3);
    assert_eq!(lots["groups"][0]["events"], 0);
    let res = app
        .client
        .get(app.url("/v1/analytics/survival?format=csv"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let csv = res.text().await.unwrap();
    assert!(
        csv.starts_with(
            "group,time_days,at_risk,events,censored,survival,lower,upper,variance\r\nampere,200,2,1,0,0.5,"
        ),
        "{csv}"
    );
    let (status, _) = app.get(ADMIN_TOKEN, "/v1/analytics/survival?by=vendor").await;
    assert_eq!(status, 400);

    // A removal written after the answers above is in the next one (the lives kept between reads
    // are read again once a write moved the parts' version): Q2, out of its slot since 400 days,
    // is recorded as failed then, so ampere has 2 events of 2 and its curve reaches 0 at 400.
    let (status, r) = post(
        &app,
        ADMIN_TOKEN,
        "/v1/gpus/Q2/removals",
        &json!({"cluster": "c1", "reason": "failed", "at": "2026-02-05T00:00:00Z"}),
    )
    .await;
    assert_eq!(status, 201, "{r}");
    let (_, s) = app.get(ADMIN_TOKEN, "/v1/analytics/survival?by=generation").await;
    let ampere = &s["groups"][0];
    assert_eq!(
        (ampere["group"].as_str(), ampere["events"].as_u64()),
        (Some("ampere"), Some(2))
    );
    assert_eq!(ampere["curve"]["steps"][1]["time"], 400.0);
    assert_eq!(ampere["curve"]["steps"][1]["survival"], 0.0);
    // As of a time before that removal, it has not happened: one event.
    let (_, s) = app
        .get(
            ADMIN_TOKEN,
            "/v1/analytics/survival?by=generation&to=2026-01-01T00:00:00Z",
        )
        .await;
    assert_eq!(s["groups"][0]["events"], 1);
    let (status, _) = app.get(ADMIN_TOKEN, "/v1/analytics/afr?confidence=2").await;
    assert_eq!(status, 400);
}

/// Part X (n1 slot 0) shows corrected ECC errors on 09-01 and fails (XID 79) on 09-03 and 10-03;
/// part Y (slot 1) is quiet. Both installed 2026-06-01, window to 2026-11-30: 182 days each.
#[tokio::test]
async fn precursors_and_parts_or_slots_read_failures_resolved_to_parts() {
    let app = spawn_app().await;
    let agent = app.token("agent", None).await;
    put(
        &app,
        &agent,
        "/v1/gpus/inventory",
        &json!({"nodes": [node("c1", "n1", "2026-06-01T00:00:00Z", vec![gpu(0, "X"), gpu(1, "Y")])]}),
    )
    .await;
    let ev = |n: u32, at: &str, kind: &str, code: i64| {
        event(
            &uuid_n(n),
            json!({"cluster": "c1", "node": "n1", "gpu_index": 0, "occurred_at": at, "kind": kind, "code": code,
                                 "message": null}),
        )
    };
    let (status, body) = app
        .post_events(
            &agent,
            &json!({"events": [ev(1, "2026-09-01T00:00:00Z", "ecc", 1),
                                                ev(2, "2026-09-03T00:00:00Z", "xid", 79),
                                                ev(3, "2026-10-03T00:00:00Z", "xid", 79)]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, p) = app
        .get(
            ADMIN_TOKEN,
            "/v1/analytics/precursors?to=2026-11-30T00:00:00Z&window_days=7",
        )
        .await;
    assert_eq!(status, 200, "{p}");
    assert_eq!((p["parts"].as_u64(), p["failures"].as_u64()), (Some(2), Some(2)));
    let ecc = p["precursors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "ecc")
        .expect("ecc is a precursor");
    assert_eq!(
        (ecc["exposed_failures"].as_u64(), ecc["unexposed_failures"].as_u64()),
        (Some(1), Some(1))
    );
    assert!((ecc["exposed_days"].as_f64().unwrap() - 7.0).abs() < 1e-9, "{ecc}");
    assert!((ecc["unexposed_days"].as_f64().unwrap() - 357.0).abs() < 1e-9, "{ecc}");
    // (1 / 7) / (1 / 357) = 51.
    assert!((ecc["rate_ratio"].as_f64().unwrap() - 51.0).abs() < 1e-9, "{ecc}");

    let (status, ps) = app.get(ADMIN_TOKEN, "/v1/analytics/parts-or-slots").await;
    assert_eq!(status, 200, "{ps}");
    assert_eq!(ps["failures"], 2);
    assert_eq!(ps["parts"][0]["id"], "X");
    assert_eq!(
        (ps["parts"][0]["failures"].as_u64(), ps["parts"][0]["distinct"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(ps["slots"][0]["id"], "c1/n1/gpu0");
    // The timeline lists every failure resolved to X, the corrected ECC one (low, transient) too.
    let (_, x) = app.get(ADMIN_TOKEN, "/v1/gpus/X").await;
    assert_eq!(x["failures"].as_array().unwrap().len(), 3);
}

/// One removal rule for an import and for `POST /v1/gpus/{part}/removals`: a removal closes the
/// placement it ends; a placement ending as `failed` is the removal; a removal and an ending that
/// contradict each other are both refused, each with its path; a placement on a node the inventory
/// does not hold is kept with a warning.
#[tokio::test]
async fn history_import_removals_close_placements_and_endings_are_removals() {
    let app = spawn_app().await;
    let (status, body) = app
        .put_nodes(
            ADMIN_TOKEN,
            &json!({"nodes": [{"hostname": "n1", "cluster": "c1", "gpu_model": "H100", "gpu_count": 8}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let h100 = "NVIDIA H100 80GB HBM3";
    let pl = |serial: &str, node: &str, index: i32, from: &str, to: Option<&str>, reason: Option<&str>| {
        let mut p = json!({"cluster": "c1", "serial": serial, "node": node, "gpu_index": index,
                           "installed_at": format!("{from}T00:00:00Z")});
        if let Some(to) = to {
            p["removed_at"] = json!(format!("{to}T00:00:00Z"));
        }
        if let Some(r) = reason {
            p["end_reason"] = json!(r);
        }
        p
    };
    let rm = |serial: &str, at: &str, reason: &str| json!({"cluster": "c1", "serial": serial, "removed_at": format!("{at}T00:00:00Z"), "reason": reason});
    let import = json!({
        "parts": [{"cluster": "c1", "serial": "A", "model": h100}, {"cluster": "c1", "serial": "B", "model": h100}],
        "placements": [
            // A: open since 2020; its failure removal on 2021-01-01 closes it (366 days).
            pl("A", "n1", 0, "2020-01-01", None, None),
            // B: ends as failed on 2021-06-01, no separate removal (366 + 151 = 517 days).
            pl("B", "n1", 1, "2020-01-01", Some("2021-06-01"), Some("failed")),
            // C: ends as rma, but a removal at the same time says failed.
            pl("C", "n1", 2, "2020-01-01", Some("2021-03-01"), Some("rma")),
            // D: in its slot until 2022, but a removal says it failed in 2021.
            pl("D", "n1", 3, "2020-01-01", Some("2022-01-01"), Some("absent")),
            // E: on a node the inventory does not hold.
            pl("E", "ghost", 0, "2020-01-01", None, None)],
        "removals": [rm("A", "2021-01-01", "failed"), rm("C", "2021-03-01", "failed"), rm("D", "2021-01-01", "failed")]
    });
    let (status, body) = post(&app, ADMIN_TOKEN, "/v1/gpus/history", &import).await;
    assert_eq!(status, 200, "{body}");
    let rejected = |body: &Value| -> Vec<(i64, String, String)> {
        body["rejected"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["index"].as_i64().unwrap(),
                    r["field"].as_str().unwrap().to_string(),
                    r["reason"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let want: Vec<(i64, String, String)> = [
        (4, "placements[2].end_reason"),
        (5, "placements[3].removed_at"),
        (8, "removals[1].reason"),
        (9, "removals[2].removed_at"),
    ]
    .into_iter()
    .map(|(i, f)| (i, f.to_string(), "contradicts".to_string()))
    .collect();
    assert_eq!(rejected(&body), want, "{body}");
    assert!(
        body["rejected"][0]["message"].as_str().unwrap().contains("removals[1]"),
        "each names the other: {body}"
    );
    // Written: parts A, B, E (C and D, refused, create nothing); placements A, B, E; removals A
    // and B's (its ending).
    assert_eq!(
        body["written"],
        json!({"parts": 3, "placements": 3, "removals": 2}),
        "{body}"
    );
    assert_eq!(
        body["warnings"],
        json!([{"index": 6, "field": "placements[4].node",
                "message": "node 'ghost' is not in cluster 'c1''s node inventory (PUT /v1/nodes); the placement is kept"}])
    );
    let (_, a) = app.get(ADMIN_TOKEN, "/v1/gpus/A").await;
    assert_eq!(a["state"], "failed", "{a}");
    assert_eq!(
        placements(&app, "A").await,
        [(
            "n1".to_string(),
            0,
            "2020-01-01T00:00:00Z".to_string(),
            json!("2021-01-01T00:00:00Z"),
            json!("failed")
        )]
    );
    let (_, b) = app.get(ADMIN_TOKEN, "/v1/gpus/B").await;
    assert_eq!(b["state"], "failed", "{b}");
    assert_eq!(b["removals"][0]["reason"], "failed", "{b}");
    assert_eq!(b["removals"][0]["removed_at"], "2021-06-01T00:00:00Z", "{b}");
    let (status, _) = app.get(ADMIN_TOKEN, "/v1/gpus/C").await;
    assert_eq!(status, 404, "a refused record creates no part");
    // AFR: 2 failures over 366 + 517 installed days; exposure stops at the failures.
    let (_, afr) = app.get(ADMIN_TOKEN, "/v1/analytics/afr?by=model").await;
    let g = afr["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == h100)
        .unwrap();
    assert_eq!(
        (g["parts"].as_u64(), g["failures"].as_u64()),
        (Some(2), Some(2)),
        "{afr}"
    );
    assert!((g["part_years"].as_f64().unwrap() - 883.0 / 365.25).abs() < 1e-9, "{g}");

    // Sent again: nothing changes, the same refusals.
    let (_, again) = post(&app, ADMIN_TOKEN, "/v1/gpus/history", &import).await;
    assert_eq!(
        again["written"],
        json!({"parts": 0, "placements": 0, "removals": 0}),
        "{again}"
    );
    assert_eq!(rejected(&again), want);
    // A's placement sent again open, without its removal: the stored removal still closes it.
    let (_, reopen) = post(
        &app,
        ADMIN_TOKEN,
        "/v1/gpus/history",
        &json!({"placements": [pl("A", "n1", 0, "2020-01-01", None, None)]}),
    )
    .await;
    assert_eq!(reopen["written"]["placements"], 0, "{reopen}");
    assert_eq!(placements(&app, "A").await[0].3, json!("2021-01-01T00:00:00Z"));

    // The same rule for a removal posted alone: B ended as failed on 2021-06-01.
    let (status, r) = post(
        &app,
        ADMIN_TOKEN,
        "/v1/gpus/B/removals",
        &json!({"cluster": "c1", "reason": "rma", "at": "2021-06-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(status, 409, "an RMA where the placement ended as failed: {r}");
    let (status, r) = post(
        &app,
        ADMIN_TOKEN,
        "/v1/gpus/B/removals",
        &json!({"cluster": "c1", "reason": "failed", "at": "2020-06-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(status, 409, "a removal while the part was still in its slot: {r}");
    let (status, r) = post(
        &app,
        ADMIN_TOKEN,
        "/v1/gpus/B/removals",
        &json!({"cluster": "c1", "reason": "failed", "at": "2021-06-01T00:00:00Z", "ticket": "T-9"}),
    )
    .await;
    assert_eq!(status, 201, "{r}");
    assert_eq!(r["closed_placement"], false);
    let (_, b) = app.get(ADMIN_TOKEN, "/v1/gpus/B").await;
    assert_eq!(b["removals"].as_array().unwrap().len(), 1, "{b}");
    assert_eq!(b["removals"][0]["ticket"], "T-9");
}

/// A part enters the survival curves and the AFR when first installed: as of a `to` before it
/// was installed, its group did not exist yet.
#[tokio::test]
async fn parts_installed_after_to_are_left_out_of_survival_and_afr() {
    let app = spawn_app().await;
    let import = json!({
        "parts": [{"cluster": "c1", "serial": "P1", "model": "NVIDIA H100 80GB HBM3"},
                  {"cluster": "c1", "serial": "P2", "model": "NVIDIA H100 80GB HBM3"},
                  {"cluster": "c1", "serial": "Q1", "model": "NVIDIA A100-SXM4-80GB"}],
        "placements": [
            {"cluster": "c1", "serial": "P1", "node": "h1", "gpu_index": 0, "installed_at": "2025-01-01T00:00:00Z",
             "removed_at": "2025-04-11T00:00:00Z", "end_reason": "failed"},
            {"cluster": "c1", "serial": "P2", "node": "h1", "gpu_index": 1, "installed_at": "2025-01-01T00:00:00Z"},
            {"cluster": "c1", "serial": "Q1", "node": "a1", "gpu_index": 0, "installed_at": "2026-01-01T00:00:00Z"}]
    });
    let (status, body) = post(&app, ADMIN_TOKEN, "/v1/gpus/history", &import).await;
    assert_eq!(status, 200, "{body}");
    // As of 2025-06-01 (151 days after 2025-01-01): P1 failed at 100 days, P2 censored at 151; the
    // A100, installed in 2026, is in no group and there is nothing to compare.
    let (status, s) = app
        .get(
            ADMIN_TOKEN,
            "/v1/analytics/survival?by=generation&to=2025-06-01T00:00:00Z",
        )
        .await;
    assert_eq!(status, 200, "{s}");
    let groups: Vec<&str> = s["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["hopper"], "{s}");
    assert_eq!(
        (s["groups"][0]["parts"].as_u64(), s["groups"][0]["events"].as_u64()),
        (Some(2), Some(1))
    );
    assert!(s["log_rank"].is_null(), "{s}");
    let (_, afr) = app
        .get(ADMIN_TOKEN, "/v1/analytics/afr?by=generation&to=2025-06-01T00:00:00Z")
        .await;
    let groups: Vec<&str> = afr["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["hopper"], "{afr}");
    assert!(
        (afr["groups"][0]["part_years"].as_f64().unwrap() - 251.0 / 365.25).abs() < 1e-9,
        "{afr}"
    );
    // Once installed it counts.
    let (_, s) = app
        .get(
            ADMIN_TOKEN,
            "/v1/analytics/survival?by=generation&to=2026-02-01T00:00:00Z",
        )
        .await;
    assert_eq!(s["groups"].as_array().unwrap().len(), 2, "{s}");
    assert_eq!(s["groups"][0]["curve"]["steps"][0]["time"], 31.0);
}

/// Survival read at any ages, and lifetimes by either definition, computed by hand. Four H100
/// parts as of 2026-01-01 (ages in installed days):
/// R1 fails at 100, is repaired, serves 100 more and fails for good at 200;
/// R2 fails at 50, is repaired and serves on: 50 + 306 = 356 at `to`;
/// R3 never fails: 365; R4 fails at 130 and never serves again.
#[tokio::test]
async fn survival_reads_any_ages_by_first_or_final_failure() {
    let app = spawn_app().await;
    let pl = |serial: &str, index: i32, from: &str, to: Option<&str>| {
        let mut p = json!({"cluster": "c1", "serial": serial, "node": "h1", "gpu_index": index,
                           "installed_at": format!("{from}T00:00:00Z")});
        if let Some(to) = to {
            p["removed_at"] = json!(format!("{to}T00:00:00Z"));
            p["end_reason"] = json!("failed");
        }
        p
    };
    let h100 = |serial: &str| json!({"cluster": "c1", "serial": serial, "model": "NVIDIA H100 80GB HBM3"});
    let import = json!({
        "parts": [h100("R1"), h100("R2"), h100("R3"), h100("R4")],
        "placements": [pl("R1", 0, "2025-01-01", Some("2025-04-11")), pl("R1", 1, "2025-06-01", Some("2025-09-09")),
                       pl("R2", 2, "2025-01-01", Some("2025-02-20")), pl("R2", 3, "2025-03-01", None),
                       pl("R3", 4, "2025-01-01", None),
                       pl("R4", 5, "2025-01-01", Some("2025-05-11"))]
    });
    let (status, body) = post(&app, ADMIN_TOKEN, "/v1/gpus/history", &import).await;
    assert_eq!(status, 200, "{body}");
    let read = |life: &str| format!("/v1/analytics/survival?by=all&to=2026-01-01T00:00:00Z&at=90d,0.5y,1y{life}");
    let at = |g: &Value| -> Vec<(String, f64, Value, u64)> {
        g["at_ages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["age"].as_str().unwrap().to_string(),
                    a["days"].as_f64().unwrap(),
                    a["survival"].clone(),
                    a["at_risk"].as_u64().unwrap(),
                )
            })
            .collect()
    };

    // First failure (the default): events at 50 (R2), 100 (R1), 130 (R4); R3 censored at 365.
    // S = 3/4, 3/4 x 2/3 = 1/2, 1/2 x 1/2 = 1/4; median 100.
    let (status, s) = app.get(ADMIN_TOKEN, &read("")).await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["life"], "first_failure");
    let g = &s["groups"][0];
    assert_eq!(
        km_steps(g),
        [
            (50.0, 4, 1, 0, 0.75),
            (100.0, 3, 1, 0, 0.5),
            (130.0, 2, 1, 0, 0.25),
            (365.0, 1, 0, 1, 0.25)
        ]
    );
    assert_eq!(g["median_days"], 100.0);
    // At 90 days S = 3/4 with R1, R4, R3 at risk; at half a year (182.625 days) 1/4 with R3; a
    // year (365.25 days) nobody reached.
    assert_eq!(
        at(g),
        [
            ("90d".to_string(), 90.0, json!(0.75), 3),
            ("0.5y".to_string(), 182.625, json!(0.25), 1),
            ("1y".to_string(), 365.25, Value::Null, 0)
        ]
    );

    // Final failure: R1's life ends at 200 (it never served after), R4's at 130; R2 served after
    // its failure (censored at 356), R3 at 365. S = 3/4 at 130, 3/4 x 2/3 = 1/2 at 200; median 200.
    let (status, s) = app.get(ADMIN_TOKEN, &read("&life=final_failure")).await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["life"], "final_failure");
    let g = &s["groups"][0];
    assert_eq!(
        km_steps(g),
        [
            (130.0, 4, 1, 0, 0.75),
            (200.0, 3, 1, 0, 0.5),
            (356.0, 2, 0, 1, 0.5),
            (365.0, 1, 0, 1, 0.5)
        ]
    );
    assert_eq!(
        (g["events"].as_u64(), g["median_days"].as_f64()),
        (Some(2), Some(200.0))
    );
    assert_eq!(
        at(g),
        [
            ("90d".to_string(), 90.0, json!(1.0), 4),
            ("0.5y".to_string(), 182.625, json!(0.75), 3),
            ("1y".to_string(), 365.25, Value::Null, 0)
        ]
    );

    // Without `at`: 1, 2, 3 and 5 years.
    let (_, s) = app.get(ADMIN_TOKEN, "/v1/analytics/survival?by=all").await;
    let ages: Vec<&str> = s["groups"][0]["at_ages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["age"].as_str().unwrap())
        .collect();
    assert_eq!(ages, ["1y", "2y", "3y", "5y"]);
    let many = vec!["1d"; 21].join(",");
    for bad in ["5x", "-1y", "1 y", "1y,", many.as_str()] {
        let (status, e) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/survival?at={bad}")).await;
        assert_eq!(status, 400, "at={bad}: {e}");
    }
    // Age 0 reads survival 1; an age no part reached (101 years) reads none.
    let (status, s) = app.get(ADMIN_TOKEN, "/v1/analytics/survival?by=all&at=0d,101y").await;
    assert_eq!(status, 200, "{s}");
    let at = &s["groups"][0]["at_ages"];
    assert_eq!(
        (at[0]["survival"].as_f64(), at[1]["survival"].is_null()),
        (Some(1.0), true),
        "{at}"
    );
    let (status, _) = app.get(ADMIN_TOKEN, "/v1/analytics/survival?life=median").await;
    assert_eq!(status, 400);
    let (status, _) = app.get(ADMIN_TOKEN, "/v1/analytics/afr?life=final_failure").await;
    assert_eq!(status, 400, "the AFR counts every failure: no life definition");
}

/// Survival and AFR by where a part served: a part that moved from rack A to rack B counts its
/// installed time in each and its failure in B, entering B's risk set only from its move.
#[tokio::test]
async fn survival_and_afr_by_rack_count_each_placement_where_it_happened() {
    let app = spawn_app().await;
    let node = |h: &str, rack: &str| {
        json!({"hostname": h, "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "rack": rack,
               "in_service_since": "2024-01-01T00:00:00Z"})
    };
    let (status, body) = app
        .put_nodes(
            ADMIN_TOKEN,
            &json!({"nodes": [node("ra1", "A"), node("ra2", "A"), node("rb1", "B")]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let pl = |serial: &str, host: &str, index: i32, from: &str, to: Option<(&str, Option<&str>)>| {
        let mut p = json!({"cluster": "c1", "serial": serial, "node": host, "gpu_index": index,
                           "installed_at": format!("{from}T00:00:00Z")});
        if let Some((to, why)) = to {
            p["removed_at"] = json!(format!("{to}T00:00:00Z"));
            if let Some(why) = why {
                p["end_reason"] = json!(why);
            }
        }
        p
    };
    let h100 = |serial: &str| json!({"cluster": "c1", "serial": serial, "model": "NVIDIA H100 80GB HBM3"});
    // M1: rack A for 100 days, then rack B until it failed 50 days later (age 150). M2: rack B,
    // failed at 60. M3 (rack A) and M4 (rack B): a year in service, censored at 365.
    let import = json!({
        "parts": [h100("M1"), h100("M2"), h100("M3"), h100("M4")],
        "placements": [
            pl("M1", "ra1", 0, "2025-01-01", Some(("2025-04-11", Some("moved")))),
            pl("M1", "rb1", 1, "2025-04-11", Some(("2025-05-31", Some("failed")))),
            pl("M2", "rb1", 2, "2025-01-01", Some(("2025-03-02", Some("failed")))),
            pl("M3", "ra2", 0, "2025-01-01", None),
            pl("M4", "rb1", 3, "2025-01-01", None),
        ]
    });
    let (status, body) = post(&app, ADMIN_TOKEN, "/v1/gpus/history", &import).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rejected"], json!([]), "{body}");
    let (status, s) = app
        .get(ADMIN_TOKEN, "/v1/analytics/survival?by=rack&to=2026-01-01T00:00:00Z")
        .await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["by"], "rack");
    let (a, b) = (&s["groups"][0], &s["groups"][1]);
    assert_eq!((a["group"].as_str(), b["group"].as_str()), (Some("A"), Some("B")));
    // A: M1 (0, 100] censored by its move, M3 (0, 365]: no event.
    assert_eq!((a["parts"].as_u64(), a["events"].as_u64()), (Some(2), Some(0)));
    assert_eq!(km_steps(a), [(100.0, 2, 0, 1, 1.0), (365.0, 1, 0, 1, 1.0)]);
    // B: M2 (0, 60] event, M1 (100, 150] event, M4 (0, 365]. At 60: M2 and M4 at risk (M1 not yet
    // in B): S = 1/2. At 100 M1 enters (a step with nobody leaving, M4 alone at risk just then);
    // at 150: M1 and M4: S = 1/2 x 1/2 = 1/4.
    assert_eq!((b["parts"].as_u64(), b["events"].as_u64()), (Some(3), Some(2)));
    assert_eq!(
        km_steps(b),
        [
            (60.0, 2, 1, 0, 0.5),
            (100.0, 1, 0, 0, 0.5),
            (150.0, 2, 1, 0, 0.25),
            (365.0, 1, 0, 1, 0.25)
        ]
    );
    // Log-rank A vs B: t=60 n_A 2, n_B 2, d 1: O-E_A = -1/2, V = 1/16 x 2 x 2 = 1/4; t=150 n_A 1,
    // n_B 2: O-E_A -= 1/3, V += 1/9 x 1 x 2 = 2/9. Statistic (5/6)^2 / (17/36) = 25/17.
    let lr = &s["log_rank"];
    assert!((lr["statistic"].as_f64().unwrap() - 25.0 / 17.0).abs() < 1e-12, "{lr}");
    assert!(
        (lr["p_value"].as_f64().unwrap() - 0.225_252_906_360_653_15).abs() < 1e-12,
        "{lr}"
    );

    // AFR: A 465 part-days, no failure; B 50 + 60 + 365 = 475 part-days, 2 failures.
    let (status, v) = app
        .get(ADMIN_TOKEN, "/v1/analytics/afr?by=rack&to=2026-01-01T00:00:00Z")
        .await;
    assert_eq!(status, 200, "{v}");
    let g = &v["groups"];
    assert_eq!(
        (
            g[0]["parts"].as_u64(),
            g[0]["failures"].as_u64(),
            g[0]["part_years"].as_f64()
        ),
        (Some(2), Some(0), Some(465.0 / 365.25)),
        "{v}"
    );
    assert_eq!(
        (
            g[1]["parts"].as_u64(),
            g[1]["failures"].as_u64(),
            g[1]["part_years"].as_f64()
        ),
        (Some(3), Some(2), Some(475.0 / 365.25)),
        "{v}"
    );
    assert!(
        (g[1]["rate_per_year"].as_f64().unwrap() - 2.0 * 365.25 / 475.0).abs() < 1e-12,
        "{v}"
    );

    // By slot: M1's failure is slot 1's (rb1/1), its first 100 days slot 0's.
    let (status, s) = app
        .get(ADMIN_TOKEN, "/v1/analytics/survival?by=slot&to=2026-01-01T00:00:00Z")
        .await;
    assert_eq!(status, 200, "{s}");
    let slots: Vec<(&str, u64, u64)> = s["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["group"].as_str().unwrap(),
                g["parts"].as_u64().unwrap(),
                g["events"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(slots, [("0", 2, 0), ("1", 1, 1), ("2", 1, 1), ("3", 1, 0)]);
    let (status, e) = app.get(ADMIN_TOKEN, "/v1/analytics/survival?by=shelf").await;
    assert_eq!(status, 400, "{e}");
}

/// A survival group's curve as (time, at risk, events, censored, survival) per step.
fn km_steps(g: &Value) -> Vec<(f64, u64, u64, u64, f64)> {
    g["curve"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| {
            (
                st["time"].as_f64().unwrap(),
                st["at_risk"].as_u64().unwrap(),
                st["events"].as_u64().unwrap(),
                st["censored"].as_u64().unwrap(),
                st["survival"].as_f64().unwrap(),
            )
        })
        .collect()
}
