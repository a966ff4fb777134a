//! `/metrics` as Prometheus reads it: HELP and TYPE on every metric, histograms (not summaries)
//! with buckets, process, pool and build-info metrics, ingest latency on every ingest route.

use serde_json::json;

use crate::helpers::{ADMIN_TOKEN, TestApp, event, spawn_app, uuid_n};

async fn scrape(app: &TestApp) -> String {
    let res = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    res.text().await.unwrap()
}

/// The value of the first sample line that starts with `series`.
fn value(text: &str, series: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(series))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

#[tokio::test]
async fn metrics_are_described_bucketed_and_cover_process_pool_and_build() {
    let app = spawn_app().await;
    // One request on each ingest route that takes a JSON body.
    let (status, body) = app
        .put_nodes(ADMIN_TOKEN, &json!({"nodes": [{"hostname": "n001", "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8}]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = app
        .post_events(ADMIN_TOKEN, &json!({"events": [event(&uuid_n(1), json!({}))]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let res = app
        .client
        .post(app.url("/v1/logs?cluster=c1&node=n001"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "text/plain")
        .body("2026-11-02T10:00:00Z kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus\n")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let text = scrape(&app).await;

    // Every metric family has HELP and TYPE, and none is a summary.
    let typed: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split_once(' ').unwrap())
        .collect();
    assert!(typed.len() >= 10, "{text}");
    for (name, kind) in &typed {
        assert_ne!(*kind, "summary", "{name} is a summary");
        let help = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# HELP {name} ")))
            .unwrap_or_else(|| panic!("no HELP for {name}"));
        assert!(help.len() > 10, "{name}: {help:?}");
    }
    for (name, kind) in [
        ("faultline_http_requests_total", "counter"),
        ("faultline_http_request_seconds", "histogram"),
        ("faultline_ingest_items_total", "counter"),
        ("faultline_ingest_seconds", "histogram"),
        ("faultline_db_pool_connections", "gauge"),
        ("faultline_build_info", "gauge"),
        ("process_cpu_seconds_total", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
    ] {
        assert!(typed.contains(&(name, kind)), "{name} {kind} missing from {typed:?}");
    }

    // Histograms with the configured buckets, cumulative up to +Inf.
    assert!(
        text.contains("faultline_http_request_seconds_bucket{method=\"PUT\",route=\"/v1/nodes\",le=\"0.005\"}"),
        "{text}"
    );
    for route in ["events", "nodes", "logs"] {
        let inf = value(
            &text,
            &format!("faultline_ingest_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}}"),
        );
        assert!(inf >= 1.0, "{route}: {inf}");
        assert!(value(&text, &format!("faultline_ingest_seconds_count{{route=\"{route}\"}}")) >= 1.0);
    }
    assert!(
        text.contains("faultline_ingest_seconds_bucket{route=\"events\",le=\"30\"}"),
        "{text}"
    );

    // Process figures are plausible: some memory, at least stdin/out/err and a socket open, started
    // in the last day, not in the future.
    assert!(value(&text, "process_resident_memory_bytes ") > 1e6);
    assert!(value(&text, "process_open_fds ") >= 4.0);
    assert!(value(&text, "process_cpu_seconds_total ") >= 0.0);
    let now = chrono::Utc::now().timestamp() as f64;
    let started = value(&text, "process_start_time_seconds ");
    assert!(started <= now + 1.0 && started > now - 86_400.0, "{started} vs {now}");

    // Pool: open = idle + in use, at most the maximum, and at least one connection open.
    let open = value(&text, "faultline_db_pool_connections{state=\"open\"}");
    let idle = value(&text, "faultline_db_pool_connections{state=\"idle\"}");
    let in_use = value(&text, "faultline_db_pool_connections{state=\"in_use\"}");
    assert!(open >= 1.0 && open == idle + in_use, "{open} {idle} {in_use}");
    assert!(open <= value(&text, "faultline_db_pool_max_connections "));

    let build = format!("faultline_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
    assert!(text.contains(&build), "{text}");
}
