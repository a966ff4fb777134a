//! `POST /v1/integrations/dcgm/{diag,health}` and `faultline gpud sync` (against a stand-in
//! serving gpud's fixture answers) end to end.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, spawn_app, status_json};

async fn post(app: &TestApp, path: &str, body: &str) -> (u16, Value) {
    let res = app
        .client
        .post(app.url(path))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    status_json(res).await
}

const DIAG: &str = "/v1/integrations/dcgm/diag?cluster=c1&node=gpu-node-07&at=2026-11-30T10:00:00Z";
const GPUD_EVENTS: &str = "/v1/integrations/gpud/events?cluster=c1&node=gpu-node-07";

#[tokio::test]
async fn dcgm_diag_and_health_reports_are_classified_by_their_codes() {
    let app = spawn_app().await;
    let (status, r) = post(&app, DIAG, include_str!("../fixtures/dcgm/diag-dcgm4-layout.json")).await;
    assert_eq!(status, 200, "{r}");
    // Persistence mode on GPU 0 (status Fail, though DCGM rates the code CONFIG), a double-bit
    // ECC error (ISOLATE) on GPU 1: both failures.
    assert_eq!(
        (r["signals"].as_u64(), r["no_failure"].as_u64(), r["ignored"].as_u64()),
        (Some(2), Some(0), Some(3))
    );
    let root: String = sqlx::query_scalar(
        "SELECT rc_category || '/' || rc_component || ' ' || (attributes->>'gpu_serial') FROM events WHERE kind = 'dcgm' AND code = 4 AND gpu_index = 1",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(root, "hardware/gpu_memory 1654922000242");
    assert_eq!(
        app.count("SELECT count(*) FROM failures WHERE category = 'hardware'")
            .await,
        1
    );
    let (_, again) = post(&app, DIAG, include_str!("../fixtures/dcgm/diag-dcgm4-layout.json")).await;
    assert_eq!(
        (again["duplicates"].as_u64(), again["accepted"].as_u64()),
        (Some(2), Some(0))
    );

    let (status, r) = post(
        &app,
        DIAG,
        include_str!("../fixtures/dcgm/diag-gpu-diagnostic-layout.json"),
    )
    .await;
    assert_eq!((status, r["signals"].as_u64()), (200, Some(3)), "{r}");

    let health = "/v1/integrations/dcgm/health?cluster=c1&node=gpu-node-08&at=2026-11-30T11:00:00Z";
    let (status, r) = post(&app, health, include_str!("../fixtures/dcgm/health-failure.json")).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!((r["signals"].as_u64(), r["no_failure"].as_u64()), (Some(2), Some(1)));
    assert_eq!(
        app.count(
            "SELECT count(*) FROM events WHERE node = 'gpu-node-08' AND code = 4 AND rc_component = 'gpu_memory'"
        )
        .await,
        1
    );
    let (status, r) = post(&app, health, include_str!("../fixtures/dcgm/health-healthy.json")).await;
    assert_eq!((status, r["signals"].as_u64()), (200, Some(0)));
}

#[tokio::test]
async fn a_malformed_dcgm_result_is_refused_by_its_path() {
    let app = spawn_app().await;
    let mut doc: Value = serde_json::from_str(include_str!("../fixtures/dcgm/diag-dcgm4-layout.json")).unwrap();
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["status"] = json!(7);
    let (status, r) = post(&app, DIAG, &doc.to_string()).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        r["rejected"][0]["field"],
        "DCGM Diagnostic.test_categories[0].tests[0].results[0].status"
    );
    assert_eq!(r["accepted"], 1);
    let (status, r) = post(&app, DIAG, include_str!("../fixtures/dcgm/health-failure.json")).await;
    assert_eq!(status, 422, "{r}");
    assert_eq!(r["details"]["field"], "DCGM Diagnostic");
}

#[tokio::test]
async fn integration_routes_refuse_what_their_schemas_refuse() {
    let app = spawn_app().await;
    let long = "c".repeat(257);
    // A bad `cluster` or `node` is a 400 naming the parameter, before the body is read.
    let (status, r) = post(
        &app,
        &format!("/v1/integrations/gpud/events?cluster={long}&node=n1"),
        "[]",
    )
    .await;
    assert_eq!(status, 400, "{r}");
    assert!(r["message"].as_str().unwrap().contains("`cluster`"), "{r}");
    let (status, r) = post(&app, "/v1/integrations/dcgm/health?cluster=c1&node=%20", "{}").await;
    assert_eq!(status, 400, "{r}");
    assert!(r["message"].as_str().unwrap().contains("`node`"), "{r}");
    let (status, r) = post(&app, "/v1/integrations/kubernetes/events?cluster=%09", "[]").await;
    assert_eq!(status, 400, "{r}");
    // `entity_groups` is a list (of objects) or null.
    let mut doc: Value = serde_json::from_str(include_str!("../fixtures/dcgm/diag-dcgm4-layout.json")).unwrap();
    doc["entity_groups"] = json!({});
    let (status, r) = post(&app, DIAG, &doc.to_string()).await;
    assert_eq!(status, 422, "{r}");
    assert_eq!(r["details"]["field"], "entity_groups");
    // A gpud component's name is text (control characters refused), an event's `name` a string.
    let events = json!([{"component": "x\u{9b}", "events": []}]);
    let (status, r) = post(&app, GPUD_EVENTS, &events.to_string()).await;
    assert_eq!(status, 422, "{r}");
    let events = json!([{"component": "xid", "events": [
        {"time": "2025-06-01T16:59:04Z", "name": 7}, {"time": "2025-06-01T16:59:05Z", "type": "Fatal"}]}]);
    let (status, r) = post(&app, GPUD_EVENTS, &events.to_string()).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["rejected"][0]["field"], "[0].events[0].name");
}

/// A stand-in for gpud's local API serving the fixtures (gpud itself needs NVML and root).
pub async fn fake_gpud() -> String {
    use axum::routing::get;
    let events: Value = serde_json::from_str(include_str!("../fixtures/gpud/events.json")).unwrap();
    let info: Value = serde_json::from_str(include_str!("../fixtures/gpud/machine-info.json")).unwrap();
    let router = axum::Router::new()
        .route("/v1/events", get(move || async move { axum::Json(events) }))
        .route("/machine-info", get(move || async move { axum::Json(info) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    url
}

#[tokio::test]
async fn gpud_sync_sends_events_and_gpus() {
    let app = spawn_app().await;
    let gpud = fake_gpud().await;
    let sync = || {
        let (gpud, server) = (gpud.clone(), app.address.clone());
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
                .args([
                    "gpud",
                    "sync",
                    "--url",
                    &gpud,
                    "--server",
                    &server,
                    "--token",
                    ADMIN_TOKEN,
                    "--cluster",
                    "c1",
                ])
                .output()
                .unwrap()
        })
    };
    let out = sync().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        stdout.contains("gpu-node-07: 2 GPUs; 2 events: 2 new signals"),
        "{stdout}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'xid' AND code IN (74, 79) AND node = 'gpu-node-07'")
            .await,
        2
    );
    assert_eq!(
        app.count("SELECT count(*) FROM gpu_placements WHERE hostname = 'gpu-node-07' AND removed_at IS NULL")
            .await,
        2
    );
    let again = sync().await.unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("0 new signals, 2 duplicates"));
    let https = std::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args([
            "gpud",
            "sync",
            "--url",
            "https://127.0.0.1:15132",
            "--token",
            "t",
            "--cluster",
            "c1",
        ])
        .output()
        .unwrap();
    assert!(!https.status.success() && String::from_utf8_lossy(&https.stderr).contains("socat"));
}

#[tokio::test]
async fn a_dcgm31_report_with_nulls_after_a_warning_line_is_read() {
    let app = spawn_app().await;
    // DCGM 3.1's report without the line dcgmi printed before it: the nulls between its
    // Deployment tests are skipped.
    let report = include_str!("../fixtures/dcgm/diag-dcgm31-nulls-after-warning.txt");
    let json_only = &report[report.find("\t{").unwrap()..];
    let (status, r) = post(
        &app,
        "/v1/integrations/dcgm/diag?cluster=c1&node=gpu-node-08",
        json_only,
    )
    .await;
    assert_eq!((status, r["received"].as_u64()), (200, Some(17)), "{r}");
    // With the WARNING line dcgmi printed first (NVIDIA's own DCGM 3.1 output, nvvs
    // JsonResultTests): every result PASS, so no signal.
    let (status, r) = post(
        &app,
        DIAG,
        include_str!("../fixtures/dcgm/diag-dcgm31-nulls-after-warning.txt"),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (r["received"].as_u64(), r["signals"].as_u64(), r["ignored"].as_u64()),
        (Some(17), Some(0), Some(17))
    );
    // What follows the line must still be JSON; the 400 quotes the line.
    let (status, r) = post(
        &app,
        DIAG,
        "WARNING: THIS SHOULD NOT HAPPEN\n{\"DCGM GPU Diagnostic\": ",
    )
    .await;
    assert_eq!(status, 400, "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("the first: 'WARNING: THIS SHOULD NOT HAPPEN'"),
        "{r}"
    );
}

#[tokio::test]
async fn a_coded_dcgm_fail_is_a_failure_of_its_gpu_that_keeps_the_code() {
    let app = spawn_app().await;
    // DCGM 3.3.1 (go-dcgm#52): GPU 0 fails GPU Memory with DCGM_FR_CUDA_API (51, rated MONITOR)
    // and Diagnostic with DCGM_FR_API_FAIL (64, TRIAGE); GPU 1 passes GPU Memory and fails
    // Diagnostic without a warning. Three failure signals, none stored as no failure.
    let (status, r) = post(&app, DIAG, include_str!("../fixtures/dcgm/diag-dcgm33-coded-fail.json")).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (r["signals"].as_u64(), r["no_failure"].as_u64(), r["ignored"].as_u64()),
        (Some(3), Some(0), Some(1))
    );
    // One failure on the node; the code-51 signal of GPU 0 is in it.
    assert_eq!(app.count("SELECT count(*) FROM failures").await, 1);
    assert_eq!(
        app.count(
            "SELECT count(*) FROM failures f JOIN events e ON e.id = ANY(f.signal_ids) WHERE e.kind = 'dcgm' AND e.code = 51 AND e.gpu_index = 0"
        )
        .await,
        1
    );
    // The failure's root is one of GPU 0's coded signals (both platform: SOFTWARE_CUDA -> driver,
    // SOFTWARE_OTHER -> runtime; the bare Fail of GPU 1 has no code to classify it), and
    // the failure keeps that signal's DCGM error code.
    let (kind, code, gpu, signal_code): (String, Option<i64>, Option<i32>, Option<i64>) = sqlx::query_as(
        "SELECT f.root_kind, f.root_code, f.root_gpu_index, e.code FROM failures f JOIN events e ON e.id = f.root_signal",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!((kind.as_str(), gpu), ("dcgm", Some(0)));
    assert!(matches!(code, Some(51 | 64)), "{code:?}");
    assert_eq!(code, signal_code);
}
