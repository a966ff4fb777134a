//! The report's Parts section over HTTP: a small hand-made parts history (the lives of
//! `gpus::survival_and_afr_match_hand_computed_lifetimes`) gives the same figures in HTML and
//! Markdown as the parts analytics; a fleet without parts says so.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, spawn_app};
use crate::report::{html_table, md_table, report};

/// Ages in installed days: hopper P1 failed at 100, P2 spare at 300, P3 RMA at 60 + 40 = 100, P4
/// decommissioned at 50; ampere Q1 failed at 200, Q2 spare at 400.
pub async fn load_parts_history(app: &TestApp, cluster: &str) {
    let pl = |serial: &str, node: &str, from: &str, to: &str, reason: &str| {
        json!({"cluster": cluster, "serial": serial, "node": node, "gpu_index": 0,
               "installed_at": format!("{from}T00:00:00Z"), "removed_at": format!("{to}T00:00:00Z"), "end_reason": reason})
    };
    let part = |serial: &str, model: &str| json!({"cluster": cluster, "serial": serial, "model": model});
    let rm = |serial: &str, at: &str, reason: &str| json!({"cluster": cluster, "serial": serial, "removed_at": format!("{at}T00:00:00Z"), "reason": reason});
    let (h100, a100) = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB");
    let import = json!({
        "parts": [part("P1", h100), part("P2", h100), part("P3", h100), part("P4", h100), part("Q1", a100), part("Q2", a100)],
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
    let res = app
        .client
        .post(app.url("/v1/gpus/history"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&import)
        .send()
        .await
        .unwrap();
    let (status, body): (u16, Value) = crate::helpers::status_json(res).await;
    assert_eq!(status, 200, "{body}");
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn the_parts_section_carries_the_parts_analytics() {
    let app = spawn_app().await;
    load_parts_history(&app, "c1").await;
    let reader = app.token("reader", None).await;
    let (status, _, html) = report(&app, &reader, "", "text/html").await;
    assert_eq!(status, 200, "{html}");
    let (status, _, md) = report(&app, &reader, "", "text/markdown").await;
    assert_eq!(status, 200, "{md}");

    // Log-rank of hopper against ampere: 0.374046 on 1 df, p = 0.541.
    let lead = "6 GPU parts; median installed age at a failure removal: ampere 200.0 days, hopper 100.0 days; log-rank across generations p = 0.541.";
    assert!(html.contains(lead), "{html}");
    assert!(md.contains(&format!("**{lead}**")), "{md}");

    let survival = html_table(&html, "Survival by GPU generation");
    // hopper: S = 1/3 at 100 days, band [0.009, 0.774] never below 0.5 at its top: the median's
    // interval is open above. Nobody of hopper reached a year; ampere's Q2 (400 days) did, at S = 0.5.
    assert_eq!(
        survival,
        [
            strings(&[
                "ampere",
                "2",
                "1",
                "200.0 days",
                "200.0 to unbounded",
                "50.0% (1 at risk)",
                "n/a",
                "n/a",
                "n/a"
            ]),
            strings(&[
                "hopper",
                "4",
                "2",
                "100.0 days",
                "100.0 to unbounded",
                "n/a",
                "n/a",
                "n/a",
                "n/a"
            ]),
        ]
    );
    // AFR: H100 2 removals over 550 part-days = 1.5058 part-years = 1.33 per part-year; A100 1 over
    // 600 days = 1.6427 part-years = 0.61.
    let afr = html_table(&html, "Failures per part-year by model");
    assert_eq!(afr.len(), 2);
    assert_eq!(
        afr[0][..5],
        strings(&["NVIDIA A100-SXM4-80GB", "2", "1", "1.64", "0.61"])
    );
    assert_eq!(
        afr[1][..5],
        strings(&["NVIDIA H100 80GB HBM3", "4", "2", "1.51", "1.33"])
    );
    for caption in ["Survival by GPU generation", "Failures per part-year by model"] {
        assert_eq!(html_table(&html, caption), md_table(&md, caption), "{caption}");
    }
    // The same numbers as the API.
    let (_, a) = app.get(&reader, "/v1/analytics/afr?by=model").await;
    let h100 = a["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "NVIDIA H100 80GB HBM3")
        .unwrap();
    assert_eq!(format!("{:.2}", h100["rate_per_year"].as_f64().unwrap()), "1.33");
    assert!(
        afr[1][5].starts_with(&format!("{:.2} to ", h100["lower"].as_f64().unwrap())),
        "{:?}",
        afr[1]
    );

    // The curves: a band and a step line per generation, at risk under the ticks 0..400 days.
    let chart = &html[html.find("data-chart=\"part-survival\"").expect("survival chart")..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert_eq!(chart.matches("class=\"band\"").count(), 2);
    assert_eq!(chart.matches("class=\"step\"").count(), 2);
    let at_risk: Vec<&str> = chart
        .split("class=\"at-risk-count\"")
        .skip(1)
        .map(|c| &c[c.find('>').unwrap() + 1..c.find('<').unwrap()])
        .collect();
    // ampere at 0, 100, 200, 300, 400 days: 2 2 2 1 1; hopper: 4 3 1 1 0.
    assert_eq!(at_risk, ["2", "2", "2", "1", "1", "4", "3", "1", "1", "0"]);
    assert!(html.contains("data-chart=\"part-afr\""));
    // No hard failure resolved to a part, no signal: the lists say so.
    assert!(md.contains("No part or slot had two or more hard failures."));
    assert!(md.contains("No signal named a part in this window."));
}

#[tokio::test]
async fn the_parts_section_forecasts_the_next_quarter_with_its_backtest() {
    let app = spawn_app().await;
    load_parts_history(&app, "c1").await;
    let reader = app.token("reader", None).await;
    // As of 2025-08-01: H100 P2 in service (P1 failed, P3 at the vendor, P4 decommissioned), A100
    // Q2 (Q1 failed on 07-20).
    let window = "from=2025-07-01T00:00:00Z&to=2025-08-01T00:00:00Z";
    let (status, _, html) = report(&app, &reader, window, "text/html").await;
    assert_eq!(status, 200, "{html}");
    let (_, _, md) = report(&app, &reader, window, "text/markdown").await;
    let next = html_table(&html, "Expected failures next quarter by model");
    let (_, api) = app
        .get(
            &reader,
            "/v1/analytics/failure-forecast?by=model&to=2025-08-01T00:00:00Z&horizon_days=91",
        )
        .await;
    let want: Vec<Vec<String>> = api["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            vec![
                g["group"].as_str().unwrap().to_string(),
                g["parts_in_service"].to_string(),
                format!("{:.1}", g["expected"].as_f64().unwrap()),
                format!("{} to {}", g["lower"], g["upper"]),
                g["spares"].to_string(),
                g["method"].as_str().unwrap().to_string(),
            ]
        })
        .collect();
    assert_eq!(next, want, "the same numbers as the API");
    assert_eq!(
        next.iter().map(|r| (r[0].as_str(), r[1].as_str())).collect::<Vec<_>>(),
        [("NVIDIA A100-SXM4-80GB", "1"), ("NVIDIA H100 80GB HBM3", "1")]
    );
    // The backtest at 2025-04-01 for the H100s: P1 and P2 in service, P1 failed on 04-11 (1);
    // nothing had failed in the quarter before (naive 0) nor the year before (afr 0), and no
    // life had ended in a failure to fit a Weibull to.
    let backtest = html_table(&html, "Forecast backtest by model");
    assert!(
        backtest.contains(&strings(&[
            "NVIDIA H100 80GB HBM3",
            "2025-04-01",
            "1",
            "0.0",
            "0.0",
            "n/a"
        ])),
        "{backtest:?}"
    );
    for caption in ["Expected failures next quarter by model", "Forecast backtest by model"] {
        assert_eq!(html_table(&html, caption), md_table(&md, caption), "{caption}");
    }
}

#[tokio::test]
async fn a_fleet_without_parts_says_so() {
    let app = spawn_app().await;
    let (status, _, html) = report(&app, ADMIN_TOKEN, "", "text/html").await;
    assert_eq!(status, 200);
    let (_, _, md) = report(&app, ADMIN_TOKEN, "", "text/markdown").await;
    assert!(html.contains(
        "<section id=\"parts\"><h2>Parts</h2><p class=\"lead\">No GPU parts are recorded for this fleet.</p></section>"
    ));
    assert!(
        md.contains("## Parts\n\n**No GPU parts are recorded for this fleet.**"),
        "{md}"
    );
    assert!(!html.contains("data-chart=\"part-survival\""));
}
