//! The cost analytics on the deterministic simulated fleet.
//! Measured with the default fleet (seed 42, 256 nodes, 28 days): 395 failures, hardware 32.7%
//! (= injected), 84.8% confined to one node, 0.39% of machines straggle, a 128-GPU group fails 5.5
//! times a week (MTBF 30.6 h).

use serde_json::json;

use crate::helpers::{ADMIN_TOKEN, spawn_app};

/// The deterministic simulated fleet (default: seed 42, 256 nodes, 28 days) gives figures of the published
/// order: the simulator is calibrated on the same literature (`analytics::baselines`).
#[tokio::test]
async fn a_simulated_fleet_shows_figures_of_the_published_order() {
    use faultline::devtools::simulate::{SimConfig, simulate};
    let cfg = SimConfig::default();
    let fleet = simulate(&cfg);
    let app = spawn_app().await;
    for chunk in fleet.nodes.chunks(5000) {
        assert_eq!(app.put_nodes(ADMIN_TOKEN, &json!({"nodes": chunk})).await.0, 200);
    }
    for chunk in fleet.events.chunks(5000) {
        let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": chunk})).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["rejected"].as_array().unwrap().len(), 0, "{}", body["rejected"][0]);
    }
    println!("truth: {:?}", fleet.truth);
    let to = cfg.start + chrono::Duration::days(i64::from(cfg.days));
    let window = format!(
        "from={}&to={}",
        cfg.start.to_rfc3339().replace('+', "%2B"),
        to.to_rfc3339().replace('+', "%2B")
    );
    let (status, b) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/baselines?{window}")).await;
    assert_eq!(status, 200, "{b}");
    let fleet_value = |measure: &str| {
        b["baselines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["measure"] == measure)
            .and_then(|r| r["fleet"].as_f64())
            .unwrap_or(f64::NAN)
    };
    let report: Vec<String> = b["baselines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} [{}]: published {} fleet {}",
                r["measure"], r["source"], r["published"], r["fleet"]
            )
        })
        .collect();
    println!("{}", report.join("\n"));
    let within = |measure: &str, lo: f64, hi: f64| {
        let v = fleet_value(measure);
        assert!(
            (lo..=hi).contains(&v),
            "{measure}: {v} not in [{lo}, {hi}]\n{}",
            report.join("\n")
        );
    };
    // The analytics agree with what the simulator injected (its calibration is its own concern: at
    // this scale it injects few hardware failures, far from Llama 3's 78%).
    let injected_hw =
        fleet.truth.by_category.get("hardware").copied().unwrap_or(0) as f64 / fleet.truth.failures as f64;
    within("hardware share of failures", injected_hw - 0.03, injected_hw + 0.03);
    // Figures of the published order.
    within("share of failures confined to one node or device", 0.5, 1.0);
    within("share of machines that straggle", 0.0, 0.02);
    // The default fleet has only 9 low-utilisation incidents: each is 11% of the mix, hence wide bounds.
    within("improper batch size share", 0.1, 0.45);
    within("host-to-GPU data transfer share", 0.1, 0.6);
    within("model checkpointing share", 0.05, 0.35);
    // The simulator always pairs an NCCL timeout with its cause, so it is never a root signal.
    within("NCCL timeout share of failures", 0.0, 0.0);
    the_report_renders_the_same_baseline_rows(&app, &window, &b).await;
    let (_, c) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/node-concentration?{window}"))
        .await;
    // Lemon nodes: the worst 10% of nodes hold more than 10% of the failures.
    assert!(c["tiers"][2]["share"].as_f64().unwrap() > 0.1, "{}", c["tiers"]);
}

/// The report's baseline table and `GET /v1/analytics/baselines` are two renderings of the same rows:
/// same measures, sources and bases in the same order, and the same values (as the report prints them).
async fn the_report_renders_the_same_baseline_rows(
    app: &crate::helpers::TestApp,
    window: &str,
    api: &serde_json::Value,
) {
    let res = app
        .client
        .get(app.url(&format!("/v1/reports/reliability?{window}&format=markdown")))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let markdown = res.text().await.unwrap();
    let table: Vec<Vec<String>> = markdown
        .lines()
        .skip_while(|l| !l.starts_with("| Measure | Source | Published | This fleet | Basis |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect())
        .collect();
    let rows = api["baselines"].as_array().unwrap();
    assert_eq!(table.len(), rows.len(), "{markdown}");
    for (md, r) in table.iter().zip(rows) {
        let fleet = match (r["unit"].as_str().unwrap(), r["fleet"].as_f64()) {
            (_, None) => "n/a".to_string(),
            ("fraction", Some(v)) => format!("{:.1}%", v * 100.0),
            ("minutes", Some(v)) => format!("{v:.1} min"),
            ("hours", Some(v)) => format!("{v:.1} h"),
            ("per_week", Some(v)) => format!("{v:.1} per week"),
            (unit, _) => panic!("unit {unit}"),
        };
        assert_eq!(
            [md[0].as_str(), md[1].as_str(), md[3].as_str(), md[4].as_str()],
            [
                r["measure"].as_str().unwrap(),
                r["source"].as_str().unwrap(),
                fleet.as_str(),
                r["basis"].as_str().unwrap()
            ],
            "report row {md:?} vs API row {r}"
        );
    }
}
