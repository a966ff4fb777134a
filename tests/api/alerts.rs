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

/// How often firing alerts go to Alertmanager again in these tests.
const RESEND_SECS: f64 = 1.0;
/// How long a receiver may take to answer in these tests.
const SEND_TIMEOUT_SECS: f64 = 1.0;
/// The evaluation lease in these tests: a request starts only while it has the send timeout left.
const LEASE_SECS: f64 = 2.5;

/// Evaluation and delivery in fractions of a second, so a test sees several cycles.
fn fast_alerts() -> AlertSettings {
    AlertSettings {
        alert_evaluation_interval_secs: 0.2,
        alert_lease_secs: LEASE_SECS,
        alert_delivery_poll_secs: 0.1,
        alert_retry_base_secs: 0.1,
        alert_retry_cap_secs: 0.4,
        alert_give_up_hours: 1.0,
        alert_resend_interval_secs: RESEND_SECS,
        alert_send_timeout_secs: SEND_TIMEOUT_SECS,
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
    /// Requests that arrived (counted before any delay).
    arrived: Arc<std::sync::atomic::AtomicUsize>,
}

impl Receiver {
    async fn start() -> Receiver {
        Receiver::start_slow(Duration::ZERO).await
    }

    /// A receiver that answers (and records) each request `delay` after it arrived.
    async fn start_slow(delay: Duration) -> Receiver {
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let down: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let arrived: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
        let (g, d, n) = (got.clone(), down.clone(), arrived.clone());
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
            let (g, d, n) = (g.clone(), d.clone(), n.clone());
            async move {
                n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
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
        Receiver {
            url,
            got,
            down,
            arrived,
        }
    }

    fn arrived(&self) -> usize {
        self.arrived.load(std::sync::atomic::Ordering::SeqCst)
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
/// dropped. It keeps its storage directory (notification log, silences) across restarts, as a
/// site's does; alerts it keeps in memory only.
struct Alertmanager {
    url: String,
    bin: &'static str,
    port: u16,
    child: tokio::process::Child,
    dir: TempDir,
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
                     (apt-get install prometheus-alertmanager; scripts/test does) to run the alerting tests"
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
        let child = Self::spawn(bin, &dir, port);
        let am = Alertmanager {
            url: format!("http://127.0.0.1:{port}"),
            bin,
            port,
            child,
            dir: TempDir(dir),
        };
        am.wait_ready().await;
        am
    }

    fn spawn(bin: &str, dir: &std::path::Path, port: u16) -> tokio::process::Child {
        tokio::process::Command::new(bin)
            .arg(format!("--config.file={}", dir.join("alertmanager.yml").display()))
            .arg(format!("--storage.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start prometheus-alertmanager")
    }

    async fn wait_ready(&self) {
        let client = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(res) = client.get(format!("{}/-/ready", self.url)).send().await
                && res.status() == 200
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "prometheus-alertmanager did not become ready on port {} within 10 s",
            self.port
        );
    }

    /// Stops it (SIGKILL: nothing is saved on the way out) and starts it again on the same port
    /// and storage.
    async fn restart(&mut self) {
        self.child.kill().await.unwrap();
        self.child = Self::spawn(self.bin, &self.dir.0, self.port);
        self.wait_ready().await;
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) it: frozen, it accepts connections and never answers.
    fn freeze(&self, frozen: bool) {
        let pid = self.child.id().unwrap().to_string();
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let status = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The alerts it holds (`GET /api/v2/alerts`, active ones).
    async fn alerts(&self) -> Vec<Value> {
        let res = reqwest::get(format!("{}/api/v2/alerts", self.url)).await.unwrap();
        assert_eq!(res.status(), 200);
        res.json::<Vec<Value>>().await.unwrap()
    }

    /// Waits (up to `secs`) until it holds an alert whose labels include `labels`; that alert.
    async fn wait_alert(&self, secs: u64, labels: &Value) -> Value {
        let want = labels.as_object().unwrap();
        for _ in 0..secs * 20 {
            let found = self
                .alerts()
                .await
                .into_iter()
                .find(|a| want.iter().all(|(k, v)| a["labels"][k] == *v));
            if let Some(a) = found {
                return a;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "Alertmanager did not hold an alert labelled {labels} within {secs} s: {:#?}",
            self.alerts().await
        );
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

/// `nodes` of c1 in the inventory, in service since 2021 (`retired`: retired then).
async fn inventory(app: &TestApp, nodes: &[(&str, Option<&str>)]) {
    let nodes: Vec<Value> = nodes
        .iter()
        .map(|(host, retired)| {
            json!({"cluster": "c1", "hostname": host, "gpu_model": "H100 80GB HBM3", "gpu_count": 8,
                   "in_service_since": "2021-01-01T00:00:00Z", "retired_at": retired})
        })
        .collect();
    let (status, v) = app.put_nodes(ADMIN_TOKEN, &json!({ "nodes": nodes })).await;
    assert_eq!(status, 200, "{v}");
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
    assert_eq!(alert["labels"]["node"], "n001");
    assert_eq!(alert["labels"]["team"], "infra");
    assert_eq!(alert["labels"]["condition"], "lemon_node");
    assert_eq!(alert["annotations"]["runbook"], "https://wiki.example/lemons");
    let summary = alert["annotations"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("n001 had 3 failures in the last 1 h where 0.30 were expected"),
        "{summary}"
    );
    // The notification points at the node's failures; the answer that shows the figure beside.
    let link = alert["generatorURL"].as_str().unwrap();
    assert!(
        link.starts_with("http://faultline.example/v1/failures?cluster=c1&node=n001&from=")
            && link.ends_with("&category=hardware"),
        "{alert}"
    );
    assert_eq!(alert["annotations"]["link"], link);
    assert!(
        alert["annotations"]["answer"]
            .as_str()
            .unwrap()
            .starts_with("http://faultline.example/v1/analytics/lemon-nodes?cluster=c1&from="),
        "{alert}"
    );
    let (status, failures) = app.get(ADMIN_TOKEN, &link["http://faultline.example".len()..]).await;
    assert_eq!(status, 200, "{failures}");

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
    inventory(&app, &[("n7", None)]).await;
    // A heartbeat, then 1.2 s of silence: firing. A signal: resolved. Silence again: firing.
    heartbeat(&app, "n7").await;
    wait_state(&app, "quiet-nodes", "firing", 10).await;
    let (status, v) = app
        .post_events(
            ADMIN_TOKEN,
            &json!({"events": [event(&uuid_n(1), json!({"node": "n7", "occurred_at": Utc::now().to_rfc3339()}))]}),
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
async fn an_alertmanager_that_restarts_has_the_firing_alerts_back_within_the_resend_interval() {
    let from_am = Receiver::start().await;
    let hook = Receiver::start().await;
    let mut am = Alertmanager::start(&from_am.url).await;
    let app = alerting_app().await;
    inventory(&app, &[("n1", None)]).await;
    let (status, v) = put_rule(
        &app,
        "quiet",
        &json!({"condition": {"kind": "silence", "minutes": 0.02}, "repeat_interval_minutes": 60,
                "receivers": [{"kind": "alertmanager", "url": am.url}, {"kind": "webhook", "url": hook.url}]}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    heartbeat(&app, "n1").await;
    wait_state(&app, "quiet", "firing", 10).await;
    let labels = json!({"alertname": "quiet", "subject": "n1"});
    let held = am.wait_alert(10, &labels).await;
    // Alertmanager holds it four re-send intervals (4 s) past the latest re-send.
    let ends_at = chrono::DateTime::parse_from_rfc3339(held["endsAt"].as_str().unwrap()).unwrap();
    let ahead = (ends_at.with_timezone(&Utc) - Utc::now()).as_seconds_f64();
    assert!((2.0..=4.2).contains(&ahead), "endsAt {ahead} s ahead: {held}");

    am.restart().await;
    let restarted = tokio::time::Instant::now();
    am.wait_alert(10, &labels).await;
    let back_after = restarted.elapsed().as_secs_f64();
    assert!(
        back_after <= RESEND_SECS + 1.0,
        "back in Alertmanager {back_after:.2} s after its restart, re-send interval {RESEND_SECS} s"
    );
    // Several re-sends later, the webhook has heard of the transition once, and each receiver has
    // one delivery record: re-sends are neither notifications nor deliveries.
    tokio::time::sleep(Duration::from_secs_f64(RESEND_SECS * 2.5)).await;
    let events: Vec<String> = hook
        .received()
        .iter()
        .map(|r| r.json()["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(events, vec!["firing"]);
    let fp = wait_state(&app, "quiet", "firing", 1).await["fingerprint"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, d) = app.get(ADMIN_TOKEN, &format!("/v1/alerts/{fp}/deliveries")).await;
    let mut records: Vec<(&str, &str)> = d
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["receiver_kind"].as_str().unwrap(), x["outcome"].as_str().unwrap()))
        .collect();
    records.sort();
    assert_eq!(records, vec![("alertmanager", "delivered"), ("webhook", "delivered")]);
    am.wait_alert(1, &labels).await;
}

#[tokio::test]
async fn relabelling_a_firing_rule_ends_the_old_alert_in_alertmanager_and_fires_the_new_one() {
    let from_am = Receiver::start().await;
    let hook = Receiver::start().await;
    let am = Alertmanager::start(&from_am.url).await;
    let app = alerting_app().await;
    inventory(&app, &[("n1", None)]).await;
    let rule = |team: &str| {
        json!({"condition": {"kind": "silence", "minutes": 0.02}, "repeat_interval_minutes": 60,
               "labels": {"team": team},
               "receivers": [{"kind": "alertmanager", "url": am.url}, {"kind": "webhook", "url": hook.url}]})
    };
    let (status, v) = put_rule(&app, "quiet", &rule("infra")).await;
    assert_eq!(status, 200, "{v}");
    heartbeat(&app, "n1").await;
    wait_state(&app, "quiet", "firing", 10).await;
    let old = am.wait_alert(10, &json!({"alertname": "quiet", "team": "infra"})).await;
    let old_ends_at = chrono::DateTime::parse_from_rfc3339(old["endsAt"].as_str().unwrap()).unwrap();

    let (status, v) = put_rule(&app, "quiet", &rule("gpu")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["version"], 2);
    am.wait_alert(10, &json!({"alertname": "quiet", "team": "gpu"})).await;
    // Alertmanager ended the old label set when the rule changed, not when it would have lapsed.
    let got = from_am
        .wait_for(10, "the old label set resolved", |g| {
            g.iter().any(|r| {
                r.json()["alerts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a["status"] == "resolved" && a["labels"]["team"] == "infra")
            })
        })
        .await;
    let ended = got
        .iter()
        .flat_map(|r| r.json()["alerts"].as_array().unwrap().clone())
        .find(|a| a["status"] == "resolved" && a["labels"]["team"] == "infra")
        .unwrap();
    let ended_at = chrono::DateTime::parse_from_rfc3339(ended["endsAt"].as_str().unwrap()).unwrap();
    assert!(
        ended_at < old_ends_at - chrono::Duration::seconds(1),
        "ended {ended_at}, would have lapsed {old_ends_at}"
    );
    let active: Vec<Value> = am
        .alerts()
        .await
        .into_iter()
        .filter(|a| a["labels"]["alertname"] == "quiet")
        .collect();
    assert_eq!(active.len(), 1, "{active:#?}");
    assert_eq!(active[0]["labels"]["team"], "gpu");
    // The webhook knows the alert by its fingerprint: it heard of the firing only. Alertmanager's
    // notifications: the firing, then the relabel.
    let fp = wait_state(&app, "quiet", "firing", 1).await["fingerprint"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, d) = app.get(ADMIN_TOKEN, &format!("/v1/alerts/{fp}/deliveries")).await;
    let records: Vec<(i64, &str, &str, &str)> = d
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["seq"].as_i64().unwrap(),
                x["receiver_kind"].as_str().unwrap(),
                x["event"].as_str().unwrap(),
                x["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    let mut records = records;
    records.sort();
    assert_eq!(
        records,
        vec![
            (1, "alertmanager", "firing", "delivered"),
            (1, "webhook", "firing", "delivered"),
            (2, "alertmanager", "relabel", "delivered")
        ]
    );
    let events: Vec<String> = hook
        .received()
        .iter()
        .map(|r| r.json()["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(events, vec!["firing"]);
}

#[tokio::test]
async fn alerts_name_their_node_and_a_failed_delivery_names_its_cause() {
    let from_am = Receiver::start().await;
    let am = Alertmanager::start(&from_am.url).await;
    let app = alerting_app().await;
    // A port nobody listens on, a receiver that accepts and never answers, one that answers 503.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let hung = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hung_url = format!("http://{}", hung.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = hung.accept().await {
            held.push(stream);
        }
    });
    let down = Receiver::start().await;
    down.set_down(true);
    inventory(&app, &[("n1", None)]).await;
    let (status, v) = put_rule(
        &app,
        "quiet",
        &json!({"condition": {"kind": "silence", "minutes": 0.02},
                "receivers": [{"kind": "alertmanager", "url": am.url}, {"kind": "webhook", "url": closed},
                              {"kind": "webhook", "url": hung_url}, {"kind": "slack", "url": down.url}]}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    heartbeat(&app, "n1").await;
    let fired = wait_state(&app, "quiet", "firing", 10).await;
    assert_eq!(fired["labels"]["node"], "n1");
    assert_eq!(
        fired["annotations"]["link"],
        "http://faultline.example/v1/nodes/c1/n1/state"
    );
    let (status, state) = app.get(ADMIN_TOKEN, "/v1/nodes/c1/n1/state").await;
    assert_eq!(status, 200, "{state}");
    let held = am.wait_alert(10, &json!({"alertname": "quiet", "node": "n1"})).await;
    assert_eq!(held["labels"]["subject"], "n1");

    let fp = fired["fingerprint"].as_str().unwrap().to_string();
    let mut errors = std::collections::BTreeMap::new();
    for _ in 0..300 {
        let (_, d) = app.get(ADMIN_TOKEN, &format!("/v1/alerts/{fp}/deliveries")).await;
        for x in d.as_array().unwrap() {
            errors.insert(x["receiver"].as_i64().unwrap(), x["error"].clone());
        }
        if errors.len() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        errors,
        std::collections::BTreeMap::from([
            (0, Value::Null),
            (1, json!("connection refused")),
            (2, json!(format!("timed out after {SEND_TIMEOUT_SECS} s"))),
            (3, json!("HTTP 503 Service Unavailable")),
        ])
    );
    // Each receiver kind's answer times are a histogram.
    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("faultline_alert_delivery_seconds_bucket{receiver=\"webhook\",le=\"2.5\"}"),
        "{metrics}"
    );

    // A lemon rule counts hardware failures unless told otherwise, as /v1/analytics/lemon-nodes.
    let (status, v) = put_rule(&app, "lemons", &json!({"condition": {"kind": "lemon_node"}})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["condition"]["category"], "hardware");
    let (status, v) = put_rule(
        &app,
        "odd",
        &json!({"condition": {"kind": "silence", "minutes": 5}, "labels": {"node": "x"}}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(v["message"].as_str().unwrap().starts_with("labels.node"), "{v}");
}

#[tokio::test]
async fn a_frozen_alertmanager_delays_neither_evaluation_nor_the_other_receivers() {
    let from_am = Receiver::start().await;
    let hook = Receiver::start().await;
    let slack = Receiver::start().await;
    let am = Alertmanager::start(&from_am.url).await;
    let app = alerting_app().await;
    inventory(&app, &[("n1", None), ("n2", None), ("n3", None)]).await;
    let (status, v) = put_rule(
        &app,
        "quiet",
        &json!({"condition": {"kind": "silence", "minutes": 0.02}, "repeat_interval_minutes": 60,
                "receivers": [{"kind": "alertmanager", "url": am.url},
                              {"kind": "webhook", "url": hook.url, "secret": "s3cret"},
                              {"kind": "slack", "url": slack.url}]}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    // Alertmanager accepts connections and never answers: each request to it waits the whole
    // send timeout (1 s), and there is one per alert and transition, and the re-sends.
    am.freeze(true);
    for n in ["n1", "n2", "n3"] {
        heartbeat(&app, n).await;
    }
    let silent_from = tokio::time::Instant::now();
    wait_states(
        &app,
        "quiet",
        &[("n1", "firing"), ("n2", "firing"), ("n3", "firing")],
        10,
    )
    .await;
    let fired_after = silent_from.elapsed().as_secs_f64();
    let got = hook.wait_for(10, "three firing notifications", |g| g.len() >= 3).await;
    let hook_after = silent_from.elapsed().as_secs_f64();
    slack.wait_for(10, "three firing notifications", |g| g.len() >= 3).await;
    let slack_after = silent_from.elapsed().as_secs_f64();
    let mut subjects: Vec<(String, String)> = verified(&got, "s3cret");
    subjects.sort();
    assert_eq!(
        subjects,
        vec![
            ("firing".to_string(), "n1".to_string()),
            ("firing".into(), "n2".into()),
            ("firing".into(), "n3".into())
        ]
    );
    // Silent for 1.2 s, evaluated every 0.2 s, sent every 0.1 s: on time, while three requests to
    // Alertmanager (3 s of timeouts one after another) are still pending.
    assert!(fired_after < 3.0, "fired {fired_after:.2} s after the last heartbeat");
    assert!(
        hook_after < fired_after + 0.9,
        "webhook {hook_after:.2} s, fired {fired_after:.2} s"
    );
    assert!(
        slack_after < fired_after + 0.9,
        "slack {slack_after:.2} s, fired {fired_after:.2} s"
    );
    // The resolutions too.
    for n in ["n1", "n2", "n3"] {
        heartbeat(&app, n).await;
    }
    let back = tokio::time::Instant::now();
    hook.wait_for(10, "three resolutions", |g| g.len() >= 6).await;
    slack.wait_for(10, "three resolutions", |g| g.len() >= 6).await;
    assert!(
        back.elapsed().as_secs_f64() < 0.95,
        "resolutions after {:.2} s",
        back.elapsed().as_secs_f64()
    );
    // Alertmanager's attempts fail by timeout, and are tried again.
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/alerts?rule_id=quiet").await;
    let mut am_errors: Vec<String> = Vec::new();
    for _ in 0..100 {
        for a in list.as_array().unwrap() {
            let fp = a["fingerprint"].as_str().unwrap();
            let (_, d) = app.get(ADMIN_TOKEN, &format!("/v1/alerts/{fp}/deliveries")).await;
            am_errors.extend(
                d.as_array()
                    .unwrap()
                    .iter()
                    .filter(|x| x["receiver_kind"] == "alertmanager")
                    .map(|x| x["error"].as_str().unwrap_or("").to_string()),
            );
        }
        if !am_errors.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !am_errors.is_empty() && am_errors.iter().all(|e| e == "timed out after 1 s"),
        "{am_errors:?}"
    );
    // Thawed, it gets them.
    am.freeze(false);
    am.wait_alert(10, &json!({"alertname": "quiet", "subject": "n1"})).await;
}

#[tokio::test]
async fn evaluations_and_attempts_are_recorded_only_under_the_lease_epoch_they_ran_under() {
    use faultline::storage::alerts::{Attempt, Fence, OutboxColumns, due, insert_outbox, record_attempt, take_lease};
    let app = alerting_app().await;
    // A lease of its own (the app's alerting task holds "alerting") and a notification due only in
    // 2100, which the app's task leaves alone.
    sqlx::query("INSERT INTO alert_lease (name, holder, expires_at) VALUES ('fence-test', NULL, '-infinity')")
        .execute(&app.db)
        .await
        .unwrap();
    let t0 = Utc::now();
    let s = chrono::Duration::seconds;
    let a = take_lease(&app.db, "fence-test", "a", t0, t0 + s(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        take_lease(&app.db, "fence-test", "a", t0, t0 + s(1)).await.unwrap(),
        Some(a)
    );
    assert_eq!(
        take_lease(&app.db, "fence-test", "b", t0, t0 + s(1)).await.unwrap(),
        None
    );
    // a stops renewing; b takes over once it expired, under the next epoch.
    let b = take_lease(&app.db, "fence-test", "b", t0 + s(2), t0 + s(3))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b, a + 1);
    let later = chrono::DateTime::parse_from_rfc3339("2100-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let outbox = OutboxColumns {
        id: vec![uuid::Uuid::new_v4()],
        fingerprint: vec!["f".into()],
        seq: vec![1],
        receiver: vec![0],
        receiver_kind: vec!["webhook".into()],
        url: vec!["http://127.0.0.1:9/".into()],
        secret: vec![None],
        event: vec!["firing".into()],
        payload: vec![json!({})],
    };
    let mut conn = app.db.acquire().await.unwrap();
    assert_eq!(insert_outbox(&mut conn, "c1", &outbox, later).await.unwrap(), 1);
    drop(conn);
    let rows = due(&app.db, later, 10, &[]).await.unwrap();
    assert_eq!(rows.len(), 1);
    let attempt = |outcome| Attempt {
        row: &rows[0],
        attempt: 1,
        at: later,
        status_code: Some(200),
        outcome,
        error: None,
        next_attempt_at: later,
    };
    let fence = |holder, epoch| Fence {
        lease: "fence-test",
        holder,
        epoch,
    };
    // a woke up after its pause and answers for a delivery it made: not recorded, still pending.
    assert!(
        !record_attempt(&app.db, &attempt("delivered"), &fence("a", a))
            .await
            .unwrap()
    );
    assert!(
        !record_attempt(&app.db, &attempt("delivered"), &fence("b", a))
            .await
            .unwrap()
    );
    assert_eq!(app.count("SELECT count(*) FROM alert_deliveries").await, 0);
    assert_eq!(due(&app.db, later, 10, &[]).await.unwrap().len(), 1);
    // b's is recorded, once.
    assert!(
        record_attempt(&app.db, &attempt("delivered"), &fence("b", b))
            .await
            .unwrap()
    );
    assert!(
        !record_attempt(&app.db, &attempt("delivered"), &fence("b", b))
            .await
            .unwrap()
    );
    assert_eq!(app.count("SELECT count(*) FROM alert_deliveries").await, 1);
    assert!(due(&app.db, later, 10, &[]).await.unwrap().is_empty());

    // An evaluation as of 2100, when n1 has been silent for decades: under a's stale epoch it
    // changes nothing, under b's the alert fires.
    inventory(&app, &[("n1", None)]).await;
    heartbeat(&app, "n1").await;
    let (status, v) = put_rule(&app, "quiet", &json!({"condition": {"kind": "silence", "minutes": 60}})).await;
    assert_eq!(status, 200, "{v}");
    let db = &app.db;
    let evaluate = |fence| async move {
        faultline::alerting::evaluation::evaluate_fenced(
            db,
            "http://faultline.example",
            chrono::Duration::minutes(4),
            later,
            Some(&fence),
        )
        .await
        .unwrap()
    };
    assert_eq!(evaluate(fence("a", a)).await.fired, 0);
    assert_eq!(app.count("SELECT count(*) FROM alerts").await, 0);
    assert_eq!(evaluate(fence("b", b)).await.fired, 1);
    assert_eq!(app.count("SELECT count(*) FROM alerts").await, 1);
}

/// The events (firing, resolved, ...) a webhook receiver got, in order.
fn events_of(r: &Receiver) -> Vec<String> {
    r.received()
        .iter()
        .map(|x| x.json()["event"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_lease_handed_over_mid_delivery_records_each_transition_once_per_receiver() {
    use faultline::app::startup::Application;
    let slow = Receiver::start_slow(Duration::from_millis(600)).await;
    let fast = Receiver::start().await;
    // The test's own instance takes the lease once at its start and never renews it (it polls once
    // a day): instances b, then c, are the ones that work.
    let mut idle = config();
    idle.alerts.alert_delivery_poll_secs = 86_400.0;
    idle.alerts.alert_evaluation_interval_secs = 86_400.0;
    let server_url = test_server_url().await.expect("a PostgreSQL server for tests");
    let app = spawn_app_configured(TestDatabase::create(&server_url).await, idle).await;
    let instance = || async {
        let pool = faultline::db::pool::connect(&app.database_url(), &EdgeSettings::default().pool)
            .await
            .unwrap();
        let built = Application::build(config(), pool, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let alerting = built.alerting_task();
        tokio::spawn(built.run_until(std::future::pending()));
        alerting
    };
    let epoch = || async {
        sqlx::query_scalar::<_, i64>("SELECT epoch FROM alert_lease WHERE name = 'alerting'")
            .fetch_one(&app.db)
            .await
            .unwrap()
    };
    let b = instance().await;
    for _ in 0..200 {
        if epoch().await == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(epoch().await, 2, "b took the lease over from the idle instance");
    let _c = instance().await;
    inventory(&app, &[("n1", None)]).await;
    let (status, v) = put_rule(
        &app,
        "quiet",
        &json!({"condition": {"kind": "silence", "minutes": 0.02}, "repeat_interval_minutes": 60,
                "receivers": [{"kind": "webhook", "url": slow.url}, {"kind": "webhook", "url": fast.url}]}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    heartbeat(&app, "n1").await;
    // b sends the firing; once the fast receiver's delivery is recorded, and while the slow
    // receiver holds its request, b stops (as a crash).
    let fast_recorded = || async {
        app.count("SELECT count(*) FROM alert_deliveries WHERE receiver = 1 AND outcome = 'delivered'")
            .await
    };
    for _ in 0..500 {
        if slow.arrived() >= 1 && fast_recorded().await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!((slow.arrived(), fast_recorded().await), (1, 1));
    b.abort();
    // c takes over once b's lease expires and sends what b left unrecorded.
    slow.wait_for(10, "the firing", |g| !g.is_empty()).await;
    fast.wait_for(10, "the firing", |g| !g.is_empty()).await;
    assert_eq!(epoch().await, 3, "c holds the lease");
    heartbeat(&app, "n1").await;
    slow.wait_for(10, "the resolution", |g| g.len() >= 2).await;
    fast.wait_for(10, "the resolution", |g| g.len() >= 2).await;
    keep_alive_for(&app, "n1", 1500).await;
    // The request b had sent in full before it stopped may have reached the slow receiver too
    // (delivery is at least once: nothing can tell a receiver that its sender died); everything
    // else arrives once, in order, and each notification has one delivered record per receiver.
    let slow_events = events_of(&slow);
    assert!(
        slow_events == ["firing", "resolved"] || slow_events == ["firing", "firing", "resolved"],
        "{slow_events:?}"
    );
    assert_eq!(events_of(&fast), vec!["firing", "resolved"]);
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/alerts?rule_id=quiet").await;
    let fp = list[0]["fingerprint"].as_str().unwrap().to_string();
    let (_, d) = app.get(ADMIN_TOKEN, &format!("/v1/alerts/{fp}/deliveries")).await;
    let mut delivered: Vec<(i64, i64)> = d
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["outcome"] == "delivered")
        .map(|x| (x["seq"].as_i64().unwrap(), x["receiver"].as_i64().unwrap()))
        .collect();
    delivered.sort();
    assert_eq!(delivered, vec![(1, 0), (1, 1), (2, 0), (2, 1)]);
}

/// The alerts of `rule` as (subject, state), sorted.
async fn alert_states(app: &TestApp, rule: &str) -> Vec<(String, String)> {
    let (status, v) = app.get(ADMIN_TOKEN, &format!("/v1/alerts?rule_id={rule}")).await;
    assert_eq!(status, 200, "{v}");
    let mut out: Vec<(String, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["subject"].as_str().unwrap().into(),
                a["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    out.sort();
    out
}

async fn wait_states(app: &TestApp, rule: &str, want: &[(&str, &str)], secs: u64) {
    let want: Vec<(String, String)> = want.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    for _ in 0..secs * 20 {
        if alert_states(app, rule).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the alerts of {rule} were not {want:?} within {secs} s: {:?}",
        alert_states(app, rule).await
    );
}

#[tokio::test]
async fn the_silence_rule_watches_the_active_inventory_by_signal_time() {
    let app = alerting_app().await;
    let now = Utc::now();
    let at = |t: chrono::DateTime<Utc>| t.to_rfc3339();
    // old: retired in 2023, its history imported now. gone: heartbeats, then retired and quiet.
    // firing: heartbeats, then quiet until it is retired. late: its last signal 2 h ago.
    // ahead: a signal from a clock 1 h fast. ghost: sends but is in no inventory.
    inventory(
        &app,
        &[
            ("old", Some("2023-06-01T00:00:00Z")),
            ("gone", None),
            ("firing", None),
            ("late", None),
            ("ahead", None),
        ],
    )
    .await;
    heartbeat(&app, "gone").await;
    heartbeat(&app, "firing").await;
    heartbeat(&app, "ghost").await;
    inventory(&app, &[("gone", Some(&at(Utc::now())))]).await;
    let events = json!({"events": [
        event(&uuid_n(1), json!({"node": "old", "occurred_at": "2023-05-01T10:00:00Z"})),
        event(&uuid_n(2), json!({"node": "old", "occurred_at": "2023-05-20T10:00:00Z"})),
        event(&uuid_n(3), json!({"node": "late", "occurred_at": at(now - chrono::Duration::hours(2))})),
        event(&uuid_n(4), json!({"node": "ahead", "occurred_at": at(now + chrono::Duration::hours(1))})),
        event(&uuid_n(5), json!({"node": "ghost", "occurred_at": at(now - chrono::Duration::hours(3))})),
    ]});
    let (status, v) = app.post_events(ADMIN_TOKEN, &events).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = put_rule(
        &app,
        "quiet",
        &json!({"condition": {"kind": "silence", "minutes": 0.02}, "receivers": []}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    // 1.2 s after the last heartbeat: the active nodes are silent, the clock that ran ahead
    // counts as now (not an hour of grace); the retired and the unknown never are.
    wait_states(
        &app,
        "quiet",
        &[("ahead", "firing"), ("firing", "firing"), ("late", "firing")],
        10,
    )
    .await;
    // "late" is silent since its signal's time, 2 h ago, not since the import.
    let (_, v) = app.get(ADMIN_TOKEN, "/v1/alerts?rule_id=quiet").await;
    let late = v.as_array().unwrap().iter().find(|a| a["subject"] == "late").unwrap();
    let minutes = late["value"].as_f64().unwrap();
    assert!((120.0..121.0).contains(&minutes), "{late}");
    // Retiring a silent node resolves its alert; the others fire on.
    inventory(&app, &[("firing", Some(&at(Utc::now())))]).await;
    wait_states(
        &app,
        "quiet",
        &[("ahead", "firing"), ("firing", "resolved"), ("late", "firing")],
        10,
    )
    .await;
    // Several evaluations later, still nothing for the retired nor the unknown nodes.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        alert_states(&app, "quiet").await,
        vec![
            ("ahead".to_string(), "firing".to_string()),
            ("firing".into(), "resolved".into()),
            ("late".into(), "firing".into())
        ]
    );
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
    inventory(&app, &[("n1", None)]).await;
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
    // evaluation goes on within the lease's 2.5 s.
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
