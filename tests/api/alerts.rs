//! Alerting end to end: rules through the API, evaluation in the service, notifications through a
//! real Prometheus Alertmanager (Debian's `prometheus-alertmanager`, started here on a free port)
//! and straight to a signed webhook, both received by a small HTTP server run by the test.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use chrono::Utc;
use faultline::app::configuration::{AlertSettings, AppConfig, Limits};
use faultline::app::edge::EdgeSettings;
use faultline::domain::alert_delivery::{SIGNATURE_HEADER, TIMESTAMP_HEADER, verify};
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, TestDatabase, event, spawn_app_configured, test_server_url, uuid_n};

/// Evaluation and delivery in fractions of a second, so a test sees several cycles.
fn fast_alerts() -> AlertSettings {
    AlertSettings {
        alert_evaluation_interval_secs: 0.2,
        alert_lease_secs: 1.5,
        alert_delivery_poll_secs: 0.1,
        alert_retry_base_secs: 0.1,
        alert_retry_cap_secs: 0.4,
        alert_give_up_hours: 1.0,
        public_url: Some("http://faultline.example".into()),
    }
}

fn config() -> AppConfig {
    AppConfig {
        admin_token: ADMIN_TOKEN.to_string(),
        limits: Limits::default(),
        correlation_window: Duration::from_secs(600),
        edge: EdgeSettings::default(),
        retention: Default::default(),
        alerts: fast_alerts(),
    }
}

pub(crate) async fn alerting_app() -> TestApp {
    let server_url = test_server_url().await.expect("a PostgreSQL server for tests");
    spawn_app_configured(TestDatabase::create(&server_url).await, config()).await
}

/// One request as the receiver got it.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// A webhook receiver on a free port: records every request it accepts; while `down`, answers
/// 503 and records nothing.
#[derive(Clone)]
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Received>>>,
    down: Arc<std::sync::atomic::AtomicBool>,
}

impl Receiver {
    async fn start() -> Receiver {
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let down: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let (g, d) = (got.clone(), down.clone());
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
            let (g, d) = (g.clone(), d.clone());
            async move {
                if d.load(std::sync::atomic::Ordering::SeqCst) {
                    return StatusCode::SERVICE_UNAVAILABLE;
                }
                g.lock().unwrap().push(Received {
                    path: uri.path().to_string(),
                    headers,
                    body,
                });
                StatusCode::OK
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { url, got, down }
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, std::sync::atomic::Ordering::SeqCst);
    }

    fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits (up to `secs`) until `done` holds for what was received.
    async fn wait_for(&self, secs: u64, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        for _ in 0..secs * 20 {
            let got = self.received();
            if done(&got) {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let bodies: Vec<String> = self
            .received()
            .iter()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect();
        panic!("the receiver did not get {what} within {secs} s; it got {bodies:#?}");
    }
}

/// Debian's Alertmanager on a free port, routing every alert to `receiver` at once; killed when
/// dropped.
struct Alertmanager {
    url: String,
    _child: tokio::process::Child,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const ALERTMANAGER_BIN: &str = "/usr/bin/prometheus-alertmanager";

impl Alertmanager {
    async fn start(receiver: &str) -> Alertmanager {
        let bin = [ALERTMANAGER_BIN, "/usr/local/bin/alertmanager", "/usr/bin/alertmanager"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap_or_else(|| {
                panic!(
                    "Prometheus Alertmanager is not installed: install Debian's package prometheus-alertmanager \
                     (apt-get install prometheus-alertmanager; .ci/run does) to run the alerting tests"
                )
            });
        let dir = std::env::temp_dir().join(format!("faultline-am-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let config = format!(
            "route:\n  receiver: test\n  group_by: ['alertname', 'cluster', 'subject']\n  group_wait: 0s\n  \
             group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: test\n    webhook_configs:\n      \
             - url: {receiver}/from-alertmanager\n        send_resolved: true\n"
        );
        std::fs::write(dir.join("alertmanager.yml"), config).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = tokio::process::Command::new(bin)
            .arg(format!("--config.file={}", dir.join("alertmanager.yml").display()))
            .arg(format!("--storage.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start prometheus-alertmanager");
        let url = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(res) = client.get(format!("{url}/-/ready")).send().await
                && res.status() == 200
            {
                return Alertmanager {
                    url,
                    _child: child,
                    _dir: TempDir(dir),
                };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("prometheus-alertmanager did not become ready on port {port} within 10 s");
    }
}

pub(crate) async fn put_rule(app: &TestApp, id: &str, body: &Value) -> (u16, Value) {
    let res = app
        .client
        .put(app.url(&format!("/v1/alert-rules/{id}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(body)
        .send()
        .await
        .unwrap();
    crate::helpers::status_json(res).await
}

pub(crate) async fn heartbeat(app: &TestApp, node: &str) {
    let res = app
        .client
        .post(app.url("/v1/heartbeats"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"cluster": "c1", "nodes": [node]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

/// Heartbeats `node` every 200 ms for `ms` (a node that keeps talking).
async fn keep_alive_for(app: &TestApp, node: &str, ms: u64) {
    let until = tokio::time::Instant::now() + Duration::from_millis(ms);
    while tokio::time::Instant::now() < until {
        heartbeat(app, node).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the alerts of `rule` in the API are in `state` (firing or resolved).
pub(crate) async fn wait_state(app: &TestApp, rule: &str, state: &str, secs: u64) -> Value {
    for _ in 0..secs * 20 {
        let (status, v) = app.get(ADMIN_TOKEN, &format!("/v1/alerts?rule_id={rule}")).await;
        assert_eq!(status, 200, "{v}");
        if v.as_array().unwrap().first().is_some_and(|a| a["state"] == state) {
            return v[0].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the alert of {rule} was not {state} within {secs} s");
}

#[tokio::test]
async fn a_lemon_node_alert_goes_through_alertmanager_and_resolves_when_its_failures_age_out() {
    let receiver = Receiver::start().await;
    let am = Alertmanager::start(&receiver.url).await;
    let app = alerting_app().await;
    // Ten 8-GPU nodes all window long. n001 gets 3 hardware failures 11 minutes apart (more than
    // the 10-minute correlation window: 3 failures). Over a 1-hour window mu = 3/10 = 0.3 per
    // node: P(X >= 3 | 0.3) = 1 - e^-0.3 (1 + 0.3 + 0.045) = 3.6e-3, Holm x 10 = 0.036 <= 0.05: a
    // lemon. The oldest leaves the window 15 s from now; then P(X >= 2 | 0.2) x 10 = 0.175: not.
    let nodes: Vec<Value> = (1..=10)
        .map(|i| {
            json!({"cluster": "c1", "hostname": format!("n{i:03}"), "gpu_model": "H100 80GB HBM3",
                        "gpu_count": 8, "in_service_since": "2026-01-01T00:00:00Z"})
        })
        .collect();
    assert_eq!(app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await.0, 200);
    let now = Utc::now();
    let first = now - chrono::Duration::seconds(3600 - 15);
    let events: Vec<Value> = (0..3)
        .map(|k| {
            let at = first + chrono::Duration::minutes(11 * k);
            event(
                &uuid_n(k as u32 + 1),
                json!({"node": "n001", "occurred_at": at.to_rfc3339()}),
            )
        })
        .collect();
    let (status, v) = app.post_events(ADMIN_TOKEN, &json!({"events": events})).await;
    assert_eq!(status, 200, "{v}");
    let (status, rule) = put_rule(
        &app,
        "lemons",
        &json!({"condition": {"kind": "lemon_node", "alpha": 0.05, "window_hours": 1},
                "labels": {"team": "infra"}, "annotations": {"runbook": "https://wiki.example/lemons"},
                "repeat_interval_minutes": 60,
                "receivers": [{"kind": "alertmanager", "url": am.url}]}),
    )
    .await;
    assert_eq!(status, 200, "{rule}");
    assert_eq!(rule["version"], 1);

    let fired = wait_state(&app, "lemons", "firing", 10).await;
    assert_eq!(fired["subject"], "n001");
    assert_eq!(fired["value"], 3.0);
    let got = receiver
        .wait_for(10, "the firing alert from Alertmanager", |g| {
            g.iter().any(|r| r.json()["status"] == "firing")
        })
        .await;
    let note = got.iter().find(|r| r.json()["status"] == "firing").unwrap();
    assert_eq!(note.path, "/from-alertmanager");
    let alert = &note.json()["alerts"][0];
    assert_eq!(alert["labels"]["alertname"], "lemons");
    assert_eq!(alert["labels"]["cluster"], "c1");
    assert_eq!(alert["labels"]["subject"], "n001");
    assert_eq!(alert["labels"]["team"], "infra");
    assert_eq!(alert["labels"]["condition"], "lemon_node");
    assert_eq!(alert["annotations"]["runbook"], "https://wiki.example/lemons");
    let summary = alert["annotations"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("n001 had 3 failures in the last 1 h where 0.30 were expected"),
        "{summary}"
    );
    assert!(
        alert["generatorURL"]
            .as_str()
            .unwrap()
            .starts_with("http://faultline.example/v1/analytics/lemon-nodes?cluster=c1&from="),
        "{alert}"
    );

    // The oldest failure ages out: resolved in Faultline, then through Alertmanager.
    let resolved = wait_state(&app, "lemons", "resolved", 30).await;
    assert!(resolved["ends_at"].is_string());
    receiver
        .wait_for(10, "the resolved alert from Alertmanager", |g| {
            g.iter().any(|r| r.json()["status"] == "resolved")
        })
        .await;
    let fp = resolved["fingerprint"].as_str().unwrap();
    let (status, d) = app.get(ADMIN_TOKEN, &format!("/v1/alerts/{fp}/deliveries")).await;
    assert_eq!(status, 200, "{d}");
    let events: Vec<(&str, &str)> = d
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["event"].as_str().unwrap(), x["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(events, vec![("firing", "delivered"), ("resolved", "delivered")]);

    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("faultline_alert_transitions_total"), "{metrics}");
    assert!(metrics.contains("faultline_alert_deliveries_total"), "{metrics}");
    assert!(metrics.contains("faultline_alert_evaluations_total"), "{metrics}");
}

/// The webhook notifications the receiver got, as (event, subject, seq-order) after checking each
/// signature with `secret`.
fn verified(got: &[Received], secret: &str) -> Vec<(String, String)> {
    got.iter()
        .map(|r| {
            let ts: i64 = r.headers[TIMESTAMP_HEADER].to_str().unwrap().parse().unwrap();
            let sig = r.headers[SIGNATURE_HEADER].to_str().unwrap();
            assert!(verify(secret.as_bytes(), ts, &r.body, sig), "bad signature {sig}");
            assert!(!verify(b"wrong", ts, &r.body, sig));
            assert!((Utc::now().timestamp() - ts).abs() < 120);
            let v = r.json();
            (
                v["event"].as_str().unwrap().to_string(),
                v["labels"]["subject"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_silent_node_fires_and_every_signed_notification_arrives_once_in_order_after_the_receiver_comes_back() {
    let receiver = Receiver::start().await;
    receiver.set_down(true);
    let app = alerting_app().await;
    let (status, v) = put_rule(
        &app,
        "quiet-nodes",
        &json!({"condition": {"kind": "silence", "minutes": 0.02, "scope": "node"},
                "repeat_interval_minutes": 60,
                "receivers": [{"kind": "webhook", "url": format!("{}/hook", receiver.url), "secret": "s3cret"}]}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["receivers"][0]["secret_set"], true);
    assert!(v["receivers"][0].get("secret").is_none(), "{v}");
    // A heartbeat, then 1.2 s of silence: firing. A signal: resolved. Silence again: firing.
    heartbeat(&app, "n7").await;
    wait_state(&app, "quiet-nodes", "firing", 10).await;
    let (status, v) = app
        .post_events(
            ADMIN_TOKEN,
            &json!({"events": [event(&uuid_n(1), json!({"node": "n7"}))]}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    wait_state(&app, "quiet-nodes", "resolved", 10).await;
    let again = wait_state(&app, "quiet-nodes", "firing", 10).await;
    // The receiver was down all along: nothing arrived, every attempt is recorded.
    assert!(receiver.received().is_empty());
    let fp = again["fingerprint"].as_str().unwrap().to_string();
    let (_, d) = app.get(ADMIN_TOKEN, &format!("/v1/alerts/{fp}/deliveries")).await;
    let d = d.as_array().unwrap().clone();
    assert!(d.len() >= 2, "{d:?}");
    assert!(
        d.iter().all(|x| x["outcome"] == "retry" && x["status_code"] == 503),
        "{d:?}"
    );
    // Only the first notification is tried while it is pending: order is kept per alert.
    assert!(d.iter().all(|x| x["seq"] == 1), "{d:?}");

    receiver.set_down(false);
    let got = receiver.wait_for(10, "three notifications", |g| g.len() >= 3).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let got = if receiver.received().len() > got.len() {
        receiver.received()
    } else {
        got
    };
    let n7 = || "n7".to_string();
    assert_eq!(
        verified(&got, "s3cret"),
        vec![
            ("firing".into(), n7()),
            ("resolved".into(), n7()),
            ("firing".into(), n7())
        ]
    );
    assert!(got.iter().all(|r| r.path == "/hook"));
    let (_, d) = app.get(ADMIN_TOKEN, &format!("/v1/alerts/{fp}/deliveries")).await;
    let delivered: Vec<i64> = d
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["outcome"] == "delivered")
        .map(|x| x["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(delivered, vec![1, 2, 3]);
}

#[tokio::test]
async fn two_instances_send_one_notification_per_transition_and_a_crash_hands_over() {
    use faultline::app::startup::Application;
    let receiver = Receiver::start().await;
    let app = alerting_app().await;
    // A second instance on the same database, as another `faultline serve` would be.
    let pool = faultline::db::pool::connect(&app.database_url(), &EdgeSettings::default().pool)
        .await
        .unwrap();
    let second = Application::build(config(), pool, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let second_alerting = second.alerting_task();
    tokio::spawn(second.run_until(std::future::pending()));
    let (status, v) = put_rule(
        &app,
        "quiet",
        &json!({"condition": {"kind": "silence", "minutes": 0.02},
                "receivers": [{"kind": "webhook", "url": receiver.url}]}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    heartbeat(&app, "n1").await;
    wait_state(&app, "quiet", "firing", 10).await;
    heartbeat(&app, "n1").await;
    wait_state(&app, "quiet", "resolved", 10).await;
    // Several evaluations of both instances later, still one notification per transition.
    keep_alive_for(&app, "n1", 1500).await;
    let events: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.json()["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(events, vec!["firing", "resolved"]);

    // The second instance stops without giving the lease back (as a crash): whichever held it,
    // evaluation goes on within the lease's 1.5 s.
    second_alerting.abort();
    heartbeat(&app, "n1").await;
    wait_state(&app, "quiet", "firing", 10).await;
    heartbeat(&app, "n1").await;
    wait_state(&app, "quiet", "resolved", 10).await;
    keep_alive_for(&app, "n1", 1500).await;
    let events: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.json()["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(events, vec!["firing", "resolved", "firing", "resolved"]);
}

#[tokio::test]
async fn bad_rule_bodies_are_refused_naming_the_field_and_edits_are_versioned_and_audited() {
    let app = alerting_app().await;
    let cases = [
        (
            json!({"condition": {"kind": "lemon_node", "alpha": 0.9}}),
            "condition.alpha",
        ),
        (json!({"condition": {"kind": "mtbf_below"}}), "hours"),
        (json!({"condition": {"kind": "no_such_rule"}}), "condition"),
        (
            json!({"condition": {"kind": "silence", "minutes": -1}}),
            "condition.minutes",
        ),
        (json!({"labels": {}}), "condition"),
        (
            json!({"condition": {"kind": "silence", "minutes": 5}, "receivers": [{"kind": "webhook", "url": "nope"}]}),
            "receivers[0].url",
        ),
        (
            json!({"condition": {"kind": "silence", "minutes": 5}, "labels": {"alertname": "x"}}),
            "labels.alertname",
        ),
        (
            json!({"condition": {"kind": "silence", "minutes": 5}, "repeat_interval_minutes": 0}),
            "repeat_interval_minutes",
        ),
        (
            json!({"condition": {"kind": "silence", "minutes": 5}, "colour": "red"}),
            "colour",
        ),
        (
            json!({"condition": {"kind": "silence", "minutes": 5},
                   "receivers": [{"kind": "slack", "url": "https://hooks.slack.com/x"}]}),
            "receivers[0].url",
        ),
    ];
    for (body, field) in cases {
        let (status, v) = put_rule(&app, "r1", &body).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert!(v["message"].as_str().unwrap().contains(field), "{body}: {v}");
    }
    let (status, v) = put_rule(&app, "bad id", &json!({"condition": {"kind": "silence", "minutes": 5}})).await;
    assert_eq!(status, 400, "{v}");
    let reader = app.token("reader", None).await;
    let res = app
        .client
        .put(app.url("/v1/alert-rules/r1"))
        .bearer_auth(&reader)
        .json(&json!({"condition": {"kind": "silence", "minutes": 5}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);

    let body = json!({"condition": {"kind": "new_failure_kind", "days": 30}});
    assert_eq!(put_rule(&app, "r1", &body).await.1["version"], 1);
    assert_eq!(
        put_rule(&app, "r1", &body).await.1["version"],
        1,
        "unchanged: no new version"
    );
    let (_, v) = put_rule(&app, "r1", &json!({"condition": {"kind": "new_failure_kind"}})).await;
    assert_eq!(v["version"], 2);
    assert_eq!(v["condition"], json!({"kind": "new_failure_kind", "days": null}));
    let res = app
        .client
        .delete(app.url("/v1/alert-rules/r1"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(app.get(ADMIN_TOKEN, "/v1/alert-rules/r1").await.0, 404);
    assert_eq!(
        app.count("SELECT count(*) FROM audit_log WHERE action LIKE 'alert_rule.%'")
            .await,
        3
    );
    // The dashboard carries the firing-alerts panel and its script.
    let page = app.client.get(app.url("/")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains(r#"id="alerts-panel""#) && page.contains("/assets/alerts.js"));
    let script = app.client.get(app.url("/assets/alerts.js")).send().await.unwrap();
    assert_eq!(script.status(), 200);
    assert!(script.text().await.unwrap().contains("/v1/alerts?"));
}
