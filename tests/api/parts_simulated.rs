//! The simulated fleet's GPU parts, sent through the client as `faultline simulate` sends them, and
//! read back through the API against what the simulator injected.

use std::collections::{BTreeMap, BTreeSet};

use chrono::SubsecRound;
use faultline::devtools::client::Client;
use faultline::devtools::simulate::{BAD_LOT, SimConfig, simulate};

use crate::helpers::{ADMIN_TOKEN, spawn_app};

#[tokio::test]
async fn simulated_parts_removals_returns_bad_lot_and_precursors_are_found() {
    // Ending now, so the parts' installed time ends with the simulation's.
    let days = 28;
    let cfg = SimConfig {
        start: chrono::Utc::now().trunc_subsecs(0) - chrono::Duration::days(days),
        ..SimConfig::default()
    };
    let fleet = simulate(&cfg);
    let truth = &fleet.truth.parts;
    let app = spawn_app().await;
    let sent = Client::new(&app.address, ADMIN_TOKEN)
        .unwrap()
        .send_fleet(&fleet, 5000, false)
        .await
        .unwrap();
    assert_eq!(sent.gpus.rejected, 0, "{sent:?}");
    assert_eq!(
        app.count("SELECT count(*) FROM failures").await as usize,
        fleet.truth.failures
    );

    // Parts, removals and moves (a part placed in more than one node: back from repair elsewhere).
    let parts = app.count("SELECT count(DISTINCT part) FROM gpu_parts").await as usize;
    assert_eq!(parts, truth.parts, "{truth:?}");
    let removals = app.count("SELECT count(*) FROM gpu_removals").await as usize;
    assert_eq!(removals, truth.removals);
    let rma = app
        .count("SELECT count(*) FROM gpu_removals WHERE reason = 'rma' AND ticket LIKE 'RMA-%'")
        .await;
    assert_eq!(rma as usize, truth.rma);
    let moved: Vec<(String,)> = sqlx::query_as(
        "SELECT part FROM gpu_placements GROUP BY part HAVING count(DISTINCT hostname) > 1 ORDER BY part",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    let moved: BTreeSet<String> = moved.into_iter().map(|(p,)| p).collect();
    assert_eq!(moved, truth.returned.iter().cloned().collect::<BTreeSet<_>>());
    assert!(!moved.is_empty());

    // A part back from RMA keeps its earlier placement, closed for the RMA, and has a new one elsewhere.
    let back = &truth.returned[0];
    let (status, g) = app.get(ADMIN_TOKEN, &format!("/v1/gpus/{back}")).await;
    assert_eq!(status, 200, "{g}");
    let placements = g["placements"].as_array().unwrap();
    assert!(placements.len() >= 2, "{g}");
    assert_eq!(placements[0]["end_reason"], "rma", "{g}");
    let last = placements.last().unwrap();
    assert!(last["removed_at"].is_null() || last["end_reason"] != "rma", "{g}");
    assert_ne!(placements[0]["node"], last["node"], "{g}");
    assert!(
        g["removals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["reason"] == "rma" && r["ticket"].is_string())
    );

    // The bad lot's AFR interval lies above every other group's that has the exposure to say
    // anything (the replacements' lot holds a few part-years: its interval spans the others').
    let (status, afr) = app.get(ADMIN_TOKEN, "/v1/analytics/afr?by=attribute:lot").await;
    assert_eq!(status, 200, "{afr}");
    let groups: BTreeMap<String, &serde_json::Value> = afr["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["group"].as_str().unwrap().to_string(), g))
        .collect();
    let lots: BTreeSet<String> = truth.lots.keys().cloned().collect();
    assert!(lots.iter().all(|l| groups.contains_key(l)), "{afr}");
    let bad = groups[BAD_LOT];
    for (name, g) in &groups {
        if name != BAD_LOT && g["part_years"].as_f64().unwrap() >= 10.0 {
            assert!(
                bad["lower"].as_f64().unwrap() > g["upper"].as_f64().unwrap(),
                "{name}: {afr}"
            );
        }
    }

    // The strongest precursor is one the simulator injected, and its ratio's interval excludes 1.
    let (status, p) = app.get(ADMIN_TOKEN, "/v1/analytics/precursors?window_days=7").await;
    assert_eq!(status, 200, "{p}");
    let top = &p["precursors"][0];
    assert!(
        (top["kind"] == "ecc" && top["code"] == 1) || top["kind"] == "row_remap",
        "{p}"
    );
    assert!(
        top["ratio_lower"].as_f64().unwrap() > 1.0 && top["significant"] == true,
        "{top}"
    );
    assert!(p["failures"].as_u64().unwrap() as usize >= truth.preceded, "{p}");
}
