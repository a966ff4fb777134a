//! `GET /v1/analytics/failure-forecast` on an imported history, against values computed by hand.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, spawn_app, status_json};

/// Ten H100s installed on 2025-01-01 (h0..h9); h0's and h1's fail on 2025-08-01 and 2025-09-15.
/// At 2025-10-01 (day 273) with a 91-day horizon:
/// - naive: failures in (2025-07-02, 2025-10-01]: 2, so 2.0 expected;
/// - afr: the window is the 365.25 days before, which holds all the installed time: 8 parts x 273
///   days + 212 days (h0, to 08-01) + 257 days (h1, to 09-15) = 2,653 part-days with 2 failures:
///   2 / 2,653 per part-day, times 91 days x the 8 parts in service = 0.548436... expected.
#[tokio::test]
async fn naive_and_afr_forecasts_match_hand_computed_counts_and_the_backtest_uses_only_the_past() {
    let app = spawn_app().await;
    let nodes: Vec<Value> = (0..10)
        .map(|i| json!({"hostname": format!("h{i}"), "cluster": "c1", "gpu_model": "H100", "gpu_count": 1}))
        .collect();
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await;
    assert_eq!(status, 200, "{body}");
    let failed = |i: usize| match i {
        0 => Some("2025-08-01"),
        1 => Some("2025-09-15"),
        _ => None,
    };
    let import = json!({
        "parts": (0..10).map(|i| json!({"cluster": "c1", "serial": format!("S{i}"), "model": "NVIDIA H100 80GB HBM3"})).collect::<Vec<_>>(),
        "placements": (0..10).map(|i| {
            let mut p = json!({"cluster": "c1", "serial": format!("S{i}"), "node": format!("h{i}"), "gpu_index": 0,
                               "installed_at": "2025-01-01T00:00:00Z"});
            if let Some(at) = failed(i) {
                p["removed_at"] = json!(format!("{at}T00:00:00Z"));
                p["end_reason"] = json!("failed");
            }
            p
        }).collect::<Vec<_>>(),
        "removals": (0..2).map(|i| json!({"cluster": "c1", "serial": format!("S{i}"), "removed_at": format!("{}T00:00:00Z", failed(i).unwrap()), "reason": "failed"})).collect::<Vec<_>>(),
    });
    let res = app
        .client
        .post(app.url("/v1/gpus/history"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&import)
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(res).await;
    assert_eq!(status, 200, "{body}");

    let (status, f) = app
        .get(
            ADMIN_TOKEN,
            "/v1/analytics/failure-forecast?to=2025-10-01T00:00:00Z&horizon_days=91&backtest=true",
        )
        .await;
    assert_eq!(status, 200, "{f}");
    let g = &f["groups"][0];
    assert_eq!(
        (g["group"].as_str(), g["parts_in_service"].as_u64()),
        (Some("NVIDIA H100 80GB HBM3"), Some(8))
    );
    let method = |m: &str| {
        g["methods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["method"] == m)
            .cloned()
            .unwrap()
    };
    assert!((method("naive")["expected"].as_f64().unwrap() - 2.0).abs() < 1e-9);
    let afr = 2.0 / (8.0 * 273.0 + 212.0 + 257.0) * 91.0 * 8.0;
    assert!(
        (method("afr")["expected"].as_f64().unwrap() - afr).abs() < 1e-9,
        "{afr} vs {}",
        method("afr")
    );
    // Poisson(2): P(<= 4) = 0.947, P(<= 5) = 0.983: 95 % spares 5; the 90 % interval [0, 5].
    assert_eq!(
        (
            method("naive")["lower"].as_u64(),
            method("naive")["upper"].as_u64(),
            method("naive")["spares"].as_u64()
        ),
        (Some(0), Some(5), Some(5))
    );
    // The backtest's origins: the quarter starts from 2023-10 whose 91 days ended by 2025-10-01.
    let origins: Vec<&str> = f["backtest_origins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert_eq!(origins.last(), Some(&"2025-07-01T00:00:00Z"));
    // At 2025-07-01 nothing had failed yet: naive forecast 0, and both failures happened after.
    let at_july = g["backtest"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["origin"] == "2025-07-01T00:00:00Z")
        .unwrap();
    assert_eq!(at_july["actual"], 2);
    let naive_july = at_july["forecasts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["method"] == "naive")
        .unwrap();
    assert_eq!(naive_july["expected"], 0.0);
    assert!(g["reason"].as_str().unwrap().contains("backtest origins"), "{g}");

    // CSV: one row per group.
    let res = app
        .client
        .get(app.url("/v1/analytics/failure-forecast?to=2025-10-01T00:00:00Z&format=csv"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let text = res.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "group,method,parts_in_service,expected,lower,upper,spares");
    assert_eq!(lines.len(), 2, "{text}");

    // The CLI prints the same backtest from the database.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args([
            "forecast-backtest",
            "--to",
            "2025-10-01T00:00:00Z",
            "--horizon-days",
            "91",
        ])
        .env("DATABASE_URL", app.database_url())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("NVIDIA H100 80GB HBM3 (8 parts in service)"), "{text}");
    assert!(text.contains("2025-07-01       2       0.0       0.0"), "{text}");
    assert!(
        !text.contains("2024-10-01"),
        "no origin before the fleet existed: {text}"
    );
    assert!(text.contains(&format!("{} spares", g["spares"])), "{text}");

    // Out of bounds: a 400 naming the parameter.
    let (status, body) = app
        .get(ADMIN_TOKEN, "/v1/analytics/failure-forecast?horizon_days=0")
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("horizon_days"), "{body}");
}
