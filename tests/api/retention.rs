//! Signals older than retention (an imported incident history, an agent catching up after a long
//! outage) form and join their failures with the default retention, after a retention pass has
//! run; only their raw rows go with the next pass. Sent again, they are duplicates.

use chrono::{DateTime, Duration, DurationRound, Utc};
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, Backend, TestApp, event, spawn_app_on_backend, uuid_n};
use faultline::app::configuration::RetentionSettings;

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

async fn pass(app: &TestApp) -> faultline::app::maintenance::Pass {
    faultline::app::maintenance::run_once(&app.db, Utc::now(), &RetentionSettings::default())
        .await
        .unwrap()
}

/// The failures of the window, as (first_at, category, root kind, signal count, nodes).
async fn failures_of(app: &TestApp, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Value> {
    let (status, body) = app
        .get(
            ADMIN_TOKEN,
            &format!("/v1/failures?limit=100&from={}&to={}", ts(from), ts(to)),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut list = body["failures"].as_array().unwrap().clone();
    list.sort_by_key(|f| f["first_at"].as_str().unwrap().to_string());
    list
}

fn facts(list: &[Value]) -> Vec<(String, String, String, u64)> {
    list.iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().to_string(),
                f["root_cause"]["category"].as_str().unwrap_or_default().to_string(),
                f["root_kind"].as_str().unwrap_or_default().to_string(),
                f["signal_count"].as_u64().unwrap(),
            )
        })
        .collect()
}

async fn mix_failures(app: &TestApp, from: DateTime<Utc>, to: DateTime<Utc>) -> u64 {
    let (status, body) = app
        .get(
            ADMIN_TOKEN,
            &format!("/v1/analytics/failure-mix?by=cluster&from={}&to={}", ts(from), ts(to)),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["failures"].as_u64().unwrap())
        .sum()
}

fn counts(body: &Value) -> (u64, u64, u64) {
    (
        body["accepted"].as_u64().unwrap(),
        body["duplicates"].as_u64().unwrap(),
        body["folded_not_retained"].as_u64().unwrap(),
    )
}

#[tokio::test]
async fn history_older_than_retention_forms_its_failures_after_a_retention_pass() {
    history_older_than_retention_forms_its_failures(Backend::Postgres).await;
}

#[tokio::test]
async fn history_older_than_retention_forms_its_failures_after_a_retention_pass_on_citus() {
    history_older_than_retention_forms_its_failures(Backend::Citus).await;
}

async fn history_older_than_retention_forms_its_failures(backend: Backend) {
    let app = spawn_app_on_backend(backend).await;
    let now = Utc::now();
    let nodes: Vec<Value> = (1..=9)
        .map(|i| {
            json!({"hostname": format!("n{i:02}"), "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3",
                   "gpu_count": 8, "group": "su1", "in_service_since": ts(now - Duration::days(1500))})
        })
        .collect();
    assert_eq!(app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await.0, 200);

    // A retention pass drops a month 15 months old: the horizon is then past everything older.
    let (status, body) = app
        .post_events(
            ADMIN_TOKEN,
            &json!({"events": [event(&uuid_n(900), json!({"node": "n09", "occurred_at": ts(now - Duration::days(450))}))]}),
        )
        .await;
    assert_eq!((status, counts(&body)), (200, (1, 0, 1)), "{body}");
    assert!(pass(&app).await.dropped >= 1);
    let horizon: DateTime<Utc> = sqlx::query_scalar("SELECT retained_from FROM signal_retention")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(horizon > now - Duration::days(450), "{horizon}");

    // Two years of history: a job's GPU falls off the bus and its NCCL peers time out; a node's
    // GPU falls off the bus twice within minutes.
    let t0 = (now - Duration::days(730)).duration_trunc(Duration::days(1)).unwrap() + Duration::hours(10);
    let at = |mins: i64| ts(t0 + Duration::minutes(mins));
    let history = json!({"events": [
        event(&uuid_n(1), json!({"node": "n01", "job_id": "old-1", "occurred_at": at(0)})),
        event(&uuid_n(2), json!({"node": "n02", "job_id": "old-1", "kind": "nccl_timeout", "code": null,
                                 "message": "watchdog timeout", "occurred_at": at(2)})),
        event(&uuid_n(3), json!({"node": "n03", "occurred_at": at(600)})),
        event(&uuid_n(4), json!({"node": "n03", "occurred_at": at(605)})),
    ]});
    let (status, body) = app.post_events(ADMIN_TOKEN, &history).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(counts(&body), (4, 0, 4), "folded, and not retained: {body}");
    let (from, to) = (t0 - Duration::days(1), t0 + Duration::days(1));
    let formed = failures_of(&app, from, to).await;
    let expected_kinds = vec![("hardware", "xid", 2), ("hardware", "xid", 2)];
    let got: Vec<(&str, &str, u64)> = formed
        .iter()
        .map(|f| {
            (
                f["root_cause"]["category"].as_str().unwrap(),
                f["root_kind"].as_str().unwrap(),
                f["signal_count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, expected_kinds, "{formed:?}");
    assert_eq!(mix_failures(&app, from, to).await, 2);
    crate::rollups::assert_rollups_recount_from(&app, "an import past the horizon", true).await;

    // A post-mortem of the old job failure.
    let job_failure = formed[0]["id"].as_str().unwrap().to_string();
    let res = app
        .client
        .patch(app.url(&format!("/v1/failures/{job_failure}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"resolution": "drained", "note": "PM-7"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);

    // Sent again before the next pass (the ledger) and after it (the failures): duplicates.
    let (_, body) = app.post_events(ADMIN_TOKEN, &history).await;
    assert_eq!(counts(&body), (0, 4, 0), "{body}");
    let dropped = pass(&app).await.dropped;
    assert!(dropped >= 1, "the imported month's rows go with the next pass");
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE occurred_at < now() - interval '700 days'")
            .await,
        0,
        "no raw row kept"
    );
    assert_eq!(facts(&failures_of(&app, from, to).await), facts(&formed));
    assert_eq!(mix_failures(&app, from, to).await, 2);
    let (status, body) = app.post_events(ADMIN_TOKEN, &history).await;
    assert_eq!((status, counts(&body)), (200, (0, 4, 0)), "{body}");
    assert_eq!(facts(&failures_of(&app, from, to).await), facts(&formed));
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE occurred_at < now() - interval '700 days'")
            .await,
        0,
        "a re-sent history stores nothing"
    );

    // A late signal of the same job joins its failure (same id: same first signal), with its
    // post-mortem; sent again after a pass, it is a duplicate.
    let late = json!({"events": [event(&uuid_n(5), json!({"node": "n04", "job_id": "old-1", "kind": "nccl_timeout",
                                                            "code": null, "occurred_at": at(5)}))]});
    let (_, body) = app.post_events(ADMIN_TOKEN, &late).await;
    assert_eq!(counts(&body), (1, 0, 1), "{body}");
    let joined = failures_of(&app, from, to).await;
    assert_eq!(joined.len(), 2, "{joined:?}");
    assert_eq!(joined[0]["id"], formed[0]["id"]);
    assert_eq!(joined[0]["signal_count"], 3);
    assert_eq!(joined[0]["root_kind"], "xid");
    assert_eq!(joined[0]["root_cause"]["category"], "hardware");
    assert_eq!(joined[0]["nodes"], json!(["n01", "n02", "n04"]));
    assert_eq!(facts(&joined[1..]), facts(&formed[1..]));
    let resolution: Option<String> =
        sqlx::query_scalar("SELECT resolution FROM failures_effective WHERE cluster = 'c1' AND id = $1::uuid")
            .bind(&job_failure)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(
        resolution.as_deref(),
        Some("drained"),
        "the post-mortem follows its failure"
    );
    crate::rollups::assert_rollups_recount_from(&app, "a late signal joined an old failure", true).await;
    pass(&app).await;
    let (_, body) = app.post_events(ADMIN_TOKEN, &late).await;
    assert_eq!(counts(&body), (0, 1, 0), "{body}");
    let (_, body) = app.post_events(ADMIN_TOKEN, &history).await;
    assert_eq!(counts(&body), (0, 4, 0), "{body}");
    assert_eq!(facts(&failures_of(&app, from, to).await), facts(&joined));
    assert_eq!(mix_failures(&app, from, to).await, 2);
    crate::rollups::assert_rollups_recount_from(&app, "re-sent old signals", true).await;
}
