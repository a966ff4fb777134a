//! The alerting task every instance runs: it takes (or renews) the lease in Postgres; the holder
//! evaluates the rules every evaluation interval, re-sends the firing alerts to Alertmanager every
//! re-send interval and sends the outbox every poll. One instance
//! holds the lease at a time; when it stops renewing (a crash), the lease expires and another
//! takes it. A notification is marked delivered only after its receiver answered 2xx, so a crash
//! between sending and marking sends it again (at least once); otherwise each goes once, in order
//! per alert and receiver.

use std::collections::{BTreeMap, HashMap};

use chrono::{Duration, Utc};
use sqlx::PgPool;

use crate::app::configuration::{AlertSettings, secs};
use crate::domain::alert::{ReceiverKind, RuleSpec};
use crate::domain::alert_delivery::{
    Outcome, SIGNATURE_HEADER, TIMESTAMP_HEADER, alertmanager_alert, backoff, renew_firing, signature,
};
use crate::storage;
use crate::storage::alerts::{Attempt, OutboxRow};

/// The lease's row name.
pub const LEASE: &str = "alerting";
/// Notifications sent per poll at most (the rest wait for the next).
const BATCH: i64 = 200;
/// Alerts per request of a re-send to Alertmanager.
const RESEND_CHUNK: usize = 500;

/// Starts the task; it runs until the runtime stops (or the handle is aborted).
pub fn spawn(db: PgPool, settings: AlertSettings, public_url: String) -> tokio::task::JoinHandle<()> {
    let holder = uuid::Uuid::new_v4().to_string();
    tokio::spawn(async move {
        let client = reqwest::Client::builder()
            .timeout(secs(settings.alert_send_timeout_secs))
            .build()
            .unwrap_or_default();
        let poll = secs(
            settings
                .alert_delivery_poll_secs
                .min(settings.alert_evaluation_interval_secs),
        );
        let every = secs(settings.alert_evaluation_interval_secs);
        let resend_every = secs(settings.alert_resend_interval_secs);
        let validity = settings.alertmanager_validity();
        let lease = secs(settings.alert_lease_secs);
        let mut ticks = tokio::time::interval(poll);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_evaluation: Option<tokio::time::Instant> = None;
        let mut last_resend: Option<tokio::time::Instant> = None;
        loop {
            ticks.tick().await;
            let now = Utc::now();
            let until = now + Duration::from_std(lease).unwrap_or(Duration::seconds(30));
            match storage::alerts::take_lease(&db, LEASE, &holder, now, until).await {
                Ok(true) => {}
                Ok(false) => {
                    // Another instance evaluates; evaluate and re-send at once should this one
                    // take over.
                    last_evaluation = None;
                    last_resend = None;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "alerting lease not renewed; retrying");
                    continue;
                }
            }
            if last_evaluation.is_none_or(|t| t.elapsed() >= every) {
                last_evaluation = Some(tokio::time::Instant::now());
                match crate::ingest::alerts::evaluate(&db, &public_url, validity, Utc::now()).await {
                    Ok(p) if p.fired + p.resolved > 0 => tracing::info!(
                        rules = p.rules,
                        fired = p.fired,
                        resolved = p.resolved,
                        notifications = p.notifications,
                        "alert evaluation"
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "alert evaluation failed; retrying at the next"),
                }
            }
            if last_resend.is_none_or(|t| t.elapsed() >= resend_every) {
                last_resend = Some(tokio::time::Instant::now());
                if let Err(e) = resend_firing(&db, &client, &settings).await {
                    tracing::warn!(error = %e, "alert re-send failed; retrying at the next");
                }
            }
            if let Err(e) = deliver_due(&db, &client, &settings).await {
                tracing::warn!(error = %e, "alert delivery pass failed; retrying at the next");
            }
        }
    })
}

/// Sends every firing alert of a live rule to the rule's Alertmanager receivers, valid for
/// `validity` from now; how many alerts it sent (counting each receiver). Alertmanager keeps alerts
/// in memory only: this is how one that restarted gets them back. Re-sends are not notifications
/// (webhook and Slack receivers hear of transitions only) and leave no delivery record; a failed
/// one is simply made again at the next interval.
pub async fn resend_firing(
    db: &PgPool,
    client: &reqwest::Client,
    settings: &AlertSettings,
) -> Result<usize, sqlx::Error> {
    let validity = settings.alertmanager_validity();
    let mut urls: HashMap<String, Vec<String>> = HashMap::new();
    for rule in storage::alerts::rules(db).await? {
        let Ok(spec) = serde_json::from_value::<RuleSpec>(rule.spec) else {
            continue;
        };
        let mut am: Vec<String> = spec
            .receivers
            .iter()
            .filter(|r| r.kind == ReceiverKind::Alertmanager)
            .map(|r| r.url.clone())
            .collect();
        am.sort();
        am.dedup();
        if spec.enabled && !am.is_empty() {
            urls.insert(rule.id, am);
        }
    }
    if urls.is_empty() {
        return Ok(0);
    }
    let until = Utc::now() + validity;
    let mut by_url: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for a in storage::alerts::firing(db).await? {
        let Some(targets) = urls.get(&a.rule_id) else {
            continue;
        };
        let labels: BTreeMap<String, String> = serde_json::from_value(a.labels).unwrap_or_default();
        let annotations: BTreeMap<String, String> = serde_json::from_value(a.annotations).unwrap_or_default();
        let link = annotations.get("link").cloned().unwrap_or_default();
        let alert = alertmanager_alert(&labels, &annotations, a.starts_at, until, &link);
        for url in targets {
            by_url.entry(url.clone()).or_default().push(alert.clone());
        }
    }
    let mut sent = 0;
    for (url, alerts) in by_url {
        let target = format!("{}/api/v2/alerts", url.trim_end_matches('/'));
        for chunk in alerts.chunks(RESEND_CHUNK) {
            let answer = client.post(&target).json(chunk).send().await;
            let error = match answer {
                Ok(res) if res.status().is_success() => None,
                Ok(res) => Some(format!("HTTP {}", res.status())),
                Err(e) => Some(send_error(&e, settings.alert_send_timeout_secs)),
            };
            let outcome = if error.is_none() { "ok" } else { "error" };
            metrics::counter!("faultline_alert_resends_total", "outcome" => outcome).increment(chunk.len() as u64);
            match error {
                None => sent += chunk.len(),
                Some(e) => {
                    tracing::warn!(url = %url, alerts = chunk.len(), error = %e, "alert re-send to Alertmanager failed")
                }
            }
        }
    }
    Ok(sent)
}

/// Sends every due notification once; records each attempt.
pub async fn deliver_due(
    db: &PgPool,
    client: &reqwest::Client,
    settings: &AlertSettings,
) -> Result<usize, sqlx::Error> {
    let rows = storage::alerts::due(db, Utc::now(), BATCH).await?;
    let n = rows.len();
    for row in &rows {
        deliver(db, client, settings, row).await?;
    }
    Ok(n)
}

fn target(row: &OutboxRow) -> String {
    match row.receiver_kind.as_str() {
        "alertmanager" => format!("{}/api/v2/alerts", row.url.trim_end_matches('/')),
        _ => row.url.clone(),
    }
}

async fn deliver(
    db: &PgPool,
    client: &reqwest::Client,
    settings: &AlertSettings,
    row: &OutboxRow,
) -> Result<(), sqlx::Error> {
    let mut payload = row.payload.clone();
    if row.receiver_kind == ReceiverKind::Alertmanager.as_str() {
        renew_firing(
            &mut payload,
            row.created_at,
            Utc::now() + settings.alertmanager_validity(),
        );
    }
    let body = serde_json::to_vec(&payload).unwrap_or_default();
    let mut req = client
        .post(target(row))
        .header(reqwest::header::CONTENT_TYPE, "application/json");
    if row.receiver_kind == ReceiverKind::Webhook.as_str()
        && let Some(secret) = &row.secret
    {
        let ts = Utc::now().timestamp();
        req = req
            .header(TIMESTAMP_HEADER, ts.to_string())
            .header(SIGNATURE_HEADER, signature(secret.as_bytes(), ts, &body));
    }
    let started = tokio::time::Instant::now();
    let answer = req.body(body).send().await;
    metrics::histogram!("faultline_alert_delivery_seconds", "receiver" => row.receiver_kind.clone())
        .record(started.elapsed().as_secs_f64());
    let at = Utc::now();
    let attempt = row.attempts + 1;
    let (status, error, outcome) = match answer {
        Ok(res) => {
            let status = res.status().as_u16();
            let outcome = Outcome::of_status(status);
            let error = (outcome != Outcome::Delivered).then(|| format!("HTTP {}", res.status()));
            (Some(i32::from(status)), error, outcome)
        }
        Err(e) => (
            None,
            Some(send_error(&e, settings.alert_send_timeout_secs)),
            Outcome::Retry,
        ),
    };
    let give_up = row.created_at + Duration::milliseconds((settings.alert_give_up_hours * 3_600_000.0) as i64);
    let outcome = match outcome {
        Outcome::Delivered => "delivered",
        Outcome::Rejected => "rejected",
        Outcome::Retry if at >= give_up => "expired",
        Outcome::Retry => "retry",
    };
    metrics::counter!("faultline_alert_deliveries_total", "receiver" => row.receiver_kind.clone(), "outcome" => outcome)
        .increment(1);
    let delay = backoff(
        attempt as u32,
        Duration::milliseconds((settings.alert_retry_base_secs * 1000.0) as i64),
        Duration::milliseconds((settings.alert_retry_cap_secs * 1000.0) as i64),
        jitter(),
    );
    if outcome != "delivered" {
        tracing::warn!(fingerprint = %row.fingerprint, receiver = %row.receiver_kind, attempt, outcome,
            error = error.as_deref().unwrap_or(""), "alert notification not delivered");
    }
    storage::alerts::record_attempt(
        db,
        &Attempt {
            row,
            attempt,
            at,
            status_code: status,
            outcome,
            error: error.as_deref(),
            next_attempt_at: at + delay,
        },
    )
    .await
}

/// Why a request got no answer, in the words an operator looks for: `connection refused`,
/// `timed out after N s`, `TLS: ...`, `DNS: ...`, else the innermost cause.
pub fn send_error(e: &reqwest::Error, timeout_secs: f64) -> String {
    use std::error::Error as _;
    if e.is_timeout() {
        return format!("timed out after {timeout_secs} s");
    }
    let mut innermost = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return "connection refused".into(),
                std::io::ErrorKind::ConnectionReset => return "connection reset by the receiver".into(),
                std::io::ErrorKind::TimedOut => return format!("timed out after {timeout_secs} s"),
                _ => {}
            }
        }
        let text = c.to_string();
        let lower = text.to_ascii_lowercase();
        if lower.contains("tls") || lower.contains("certificate") || lower.contains("handshake") {
            return format!("TLS: {text}");
        }
        if lower.contains("dns") || lower.contains("lookup address") {
            return format!("DNS: {text}");
        }
        innermost = text;
        cause = c.source();
    }
    if e.is_connect() {
        format!("could not connect: {innermost}")
    } else {
        innermost
    }
}

/// A uniform number in [0, 1) from the OS's randomness.
fn jitter() -> f64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}
