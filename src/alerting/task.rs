//! The alerting task every instance runs. Three loops, none waiting on another:
//!
//! - the lease: takes (or renews) the lease in Postgres every poll; one instance holds it at a
//!   time, and when it stops renewing (a crash, a pause), the lease expires and another takes it
//!   under a new epoch;
//! - evaluation: the holder evaluates the rules every evaluation interval;
//! - delivery: the holder sends the outbox, each receiver (URL) in its own job with at most
//!   `PER_RECEIVER` requests in flight, so a receiver that hangs delays only itself; and every
//!   re-send interval it re-sends the firing alerts to each Alertmanager receiver, in that
//!   receiver's job (a re-send never overtakes a resolve sent to the same receiver).
//!
//! A request starts only while the lease has at least the send timeout left, so it ends before
//! another instance can take over; its attempt is recorded only if the lease is still held under
//! the epoch it was sent under (checked in the recording transaction). A notification is marked
//! delivered only after its receiver answered 2xx, so a crash between sending and marking sends it
//! again (at least once); otherwise each goes once, in order per alert and receiver.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{Duration, Utc};
use sqlx::PgPool;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::app::configuration::{AlertSettings, secs};
use crate::domain::alert::{ReceiverKind, RuleSpec};
use crate::domain::alert_delivery::{
    Outcome, SIGNATURE_HEADER, TIMESTAMP_HEADER, alertmanager_alert, backoff, renew_firing, signature,
};
use crate::storage;
use crate::storage::alerts::{Attempt, Fence, OutboxRow};

/// The lease's row name.
pub const LEASE: &str = "alerting";
/// Notifications taken per poll at most (the rest wait for the next).
const BATCH: i64 = 200;
/// Alerts per request of a re-send to Alertmanager.
const RESEND_CHUNK: usize = 500;
/// Requests in flight to one receiver at most.
const PER_RECEIVER: usize = 4;

/// The lease as this instance holds it: the epoch it was taken under, and until when (by this
/// instance's clock, measured from before the renewal) it is surely still held.
#[derive(Debug, Clone, Copy)]
struct Held {
    epoch: i64,
    until: Instant,
}

/// The epoch of the lease when this instance holds it with at least `room` left.
fn held(view: &watch::Receiver<Option<Held>>, room: StdDuration) -> Option<i64> {
    view.borrow()
        .filter(|h| h.until.saturating_duration_since(Instant::now()) >= room)
        .map(|h| h.epoch)
}

/// What every delivery job shares.
struct Sender {
    db: PgPool,
    client: reqwest::Client,
    settings: AlertSettings,
    holder: String,
    view: watch::Receiver<Option<Held>>,
}

impl Sender {
    fn send_timeout(&self) -> StdDuration {
        self.settings.send_timeout()
    }

    /// Whether a request sent now under `epoch` ends before the lease could pass to another.
    fn may_send(&self, epoch: i64) -> bool {
        held(&self.view, self.send_timeout()) == Some(epoch)
    }
}

/// Starts the task; it runs until the runtime stops (or the handle is aborted, which stops its
/// evaluation and delivery too).
pub fn spawn(db: PgPool, settings: AlertSettings, public_url: String) -> tokio::task::JoinHandle<()> {
    let holder = uuid::Uuid::new_v4().to_string();
    tokio::spawn(async move {
        let (tx, view) = watch::channel(None);
        let client = reqwest::Client::builder()
            .timeout(settings.send_timeout())
            .build()
            .unwrap_or_default();
        // Dropped (and so aborted) with this task.
        let mut loops = JoinSet::new();
        loops.spawn(evaluate_loop(
            db.clone(),
            settings.clone(),
            public_url,
            holder.clone(),
            view.clone(),
        ));
        let sender = Arc::new(Sender {
            db: db.clone(),
            client,
            settings: settings.clone(),
            holder: holder.clone(),
            view,
        });
        loops.spawn(deliver_loop(sender));
        lease_loop(&db, &settings, &holder, &tx).await;
    })
}

fn poll_interval(settings: &AlertSettings) -> tokio::time::Interval {
    let poll = secs(
        settings
            .alert_delivery_poll_secs
            .min(settings.alert_evaluation_interval_secs),
    );
    let mut ticks = tokio::time::interval(poll);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks
}

async fn lease_loop(db: &PgPool, settings: &AlertSettings, holder: &str, tx: &watch::Sender<Option<Held>>) {
    let lease = secs(settings.alert_lease_secs);
    let mut ticks = poll_interval(settings);
    loop {
        ticks.tick().await;
        let started = Instant::now();
        let now = Utc::now();
        let until = now + Duration::from_std(lease).unwrap_or(Duration::seconds(30));
        match storage::alerts::take_lease(db, LEASE, holder, now, until).await {
            Ok(Some(epoch)) => {
                tx.send_replace(Some(Held {
                    epoch,
                    until: started + lease,
                }));
            }
            Ok(None) => {
                tx.send_replace(None);
            }
            // What was held stays held until it expires.
            Err(e) => tracing::warn!(error = %e, "alerting lease not renewed; retrying"),
        }
    }
}

async fn evaluate_loop(
    db: PgPool,
    settings: AlertSettings,
    public_url: String,
    holder: String,
    view: watch::Receiver<Option<Held>>,
) {
    let every = secs(settings.alert_evaluation_interval_secs);
    let validity = settings.alertmanager_validity();
    let mut ticks = poll_interval(&settings);
    let mut last: Option<(i64, Instant)> = None;
    loop {
        ticks.tick().await;
        let Some(epoch) = held(&view, StdDuration::ZERO) else {
            continue;
        };
        // Evaluate at once on taking the lease over.
        if last.is_some_and(|(e, t)| e == epoch && t.elapsed() < every) {
            continue;
        }
        last = Some((epoch, Instant::now()));
        let fence = Fence {
            lease: LEASE,
            holder: &holder,
            epoch,
        };
        match crate::alerting::evaluation::evaluate_fenced(&db, &public_url, validity, Utc::now(), Some(&fence)).await {
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
}

/// Every poll: the due notifications of the receivers not already busy, one job per receiver,
/// with the re-send to each Alertmanager receiver whose turn it is.
async fn deliver_loop(sender: Arc<Sender>) {
    let resend_every = secs(sender.settings.alert_resend_interval_secs);
    let mut ticks = poll_interval(&sender.settings);
    // Dropped (and so aborted) with this loop.
    let mut jobs: JoinSet<()> = JoinSet::new();
    let mut busy: HashMap<tokio::task::Id, String> = HashMap::new();
    let mut last_resend: HashMap<String, (i64, Instant)> = HashMap::new();
    loop {
        ticks.tick().await;
        while let Some(done) = jobs.try_join_next_with_id() {
            let id = match done {
                Ok((id, ())) => id,
                Err(e) => {
                    tracing::warn!(error = %e, "alert delivery job failed");
                    e.id()
                }
            };
            busy.remove(&id);
        }
        let Some(epoch) = held(&sender.view, sender.send_timeout()) else {
            continue;
        };
        let busy_urls: Vec<String> = busy.values().cloned().collect();
        let rows = match storage::alerts::due(&sender.db, Utc::now(), BATCH, &busy_urls).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "alert delivery pass failed; retrying at the next");
                continue;
            }
        };
        let mut work: BTreeMap<String, (Vec<OutboxRow>, bool)> = BTreeMap::new();
        for row in rows {
            work.entry(row.url.clone()).or_default().0.push(row);
        }
        match alertmanager_urls(&sender.db).await {
            Ok(urls) => {
                for url in urls.into_values().flatten().collect::<HashSet<_>>() {
                    let due = last_resend
                        .get(&url)
                        .is_none_or(|(e, t)| *e != epoch || t.elapsed() >= resend_every);
                    if due && !busy_urls.contains(&url) {
                        last_resend.insert(url.clone(), (epoch, Instant::now()));
                        work.entry(url).or_default().1 = true;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "alert re-send: rules not read; retrying at the next"),
        }
        for (url, (rows, resend)) in work {
            let job = jobs.spawn(receiver_job(sender.clone(), epoch, url.clone(), rows, resend));
            busy.insert(job.id(), url);
        }
    }
}

/// One receiver's work of one poll: its due notifications (at most `PER_RECEIVER` at once; they
/// are of distinct alerts), then its re-send when `resend`.
async fn receiver_job(sender: Arc<Sender>, epoch: i64, url: String, rows: Vec<OutboxRow>, resend: bool) {
    let mut inflight = JoinSet::new();
    for row in rows {
        while inflight.len() >= PER_RECEIVER {
            inflight.join_next().await;
        }
        if !sender.may_send(epoch) {
            break;
        }
        let sender = sender.clone();
        inflight.spawn(async move {
            if let Err(e) = deliver(&sender, epoch, &row).await {
                tracing::warn!(error = %e, fingerprint = %row.fingerprint, "alert delivery not recorded; retrying");
            }
        });
    }
    while inflight.join_next().await.is_some() {}
    if resend && sender.may_send(epoch) {
        let urls = HashSet::from([url.clone()]);
        if let Err(e) = resend_firing(&sender.db, &sender.client, &sender.settings, Some(&urls)).await {
            tracing::warn!(error = %e, url = %url, "alert re-send failed; retrying at the next");
        }
    }
}

/// The Alertmanager receiver URLs of every enabled rule, by rule.
async fn alertmanager_urls(db: &PgPool) -> Result<HashMap<String, Vec<String>>, sqlx::Error> {
    let mut urls = HashMap::new();
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
    Ok(urls)
}

/// Sends every firing alert of a live rule to the rule's Alertmanager receivers, valid for
/// `validity` from now; how many alerts it sent (counting each receiver). Alertmanager keeps alerts
/// in memory only: this is how one that restarted gets them back. Re-sends are not notifications
/// (webhook and Slack receivers hear of transitions only) and leave no delivery record; a failed
/// one is simply made again at the next interval. `only`: to these receiver URLs only.
pub async fn resend_firing(
    db: &PgPool,
    client: &reqwest::Client,
    settings: &AlertSettings,
    only: Option<&HashSet<String>>,
) -> Result<usize, sqlx::Error> {
    let validity = settings.alertmanager_validity();
    let mut urls = alertmanager_urls(db).await?;
    if let Some(only) = only {
        for am in urls.values_mut() {
            am.retain(|u| only.contains(u));
        }
        urls.retain(|_, am| !am.is_empty());
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
                Err(e) => Some(send_error(&e, settings.send_timeout().as_secs_f64())),
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

fn target(row: &OutboxRow) -> String {
    match row.receiver_kind.as_str() {
        "alertmanager" => format!("{}/api/v2/alerts", row.url.trim_end_matches('/')),
        _ => row.url.clone(),
    }
}

/// Sends one notification and records the attempt (unless the lease moved on meanwhile).
async fn deliver(sender: &Sender, epoch: i64, row: &OutboxRow) -> Result<(), sqlx::Error> {
    let (db, client, settings) = (&sender.db, &sender.client, &sender.settings);
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
            Some(send_error(&e, settings.send_timeout().as_secs_f64())),
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
    let fence = Fence {
        lease: LEASE,
        holder: &sender.holder,
        epoch,
    };
    let attempt = Attempt {
        row,
        attempt,
        at,
        status_code: status,
        outcome,
        error: error.as_deref(),
        next_attempt_at: at + delay,
    };
    if !storage::alerts::record_attempt(db, &attempt, &fence).await? {
        tracing::warn!(fingerprint = %row.fingerprint, receiver = %row.receiver_kind,
            "alert notification sent, not recorded: the lease passed to another instance, which sends it again (or it was settled meanwhile)");
    }
    Ok(())
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
