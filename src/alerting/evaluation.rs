//! One evaluation pass: per rule and cluster, the findings (read through `queries`) turned into
//! state changes, written with their outbox rows in one transaction, so a notification exists
//! exactly when its state change does.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::alert::{
    AlertState, Current, Finding, NotifyEvent, ReceiverKind, RuleSpec, Step, fingerprint, step,
};
use crate::domain::alert_delivery::{Notification, alertmanager_relabel, payload};
use crate::storage;
use crate::storage::alerts::{AlertColumns, Fence, OutboxColumns, RuleRow};

/// What one evaluation pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    pub rules: usize,
    pub fired: usize,
    pub resolved: usize,
    pub notifications: usize,
    /// Rule and cluster pairs whose evaluation failed (logged; tried again next pass).
    pub errors: usize,
}

/// Evaluates every rule over every cluster it covers as of `now`. `public_url` prefixes the
/// links in the notifications; `am_validity` is how far ahead a firing alert's `endsAt` is in
/// Alertmanager notifications.
pub async fn evaluate(
    db: &PgPool,
    public_url: &str,
    am_validity: Duration,
    now: DateTime<Utc>,
) -> Result<Pass, sqlx::Error> {
    evaluate_fenced(db, public_url, am_validity, now, None).await
}

/// [`evaluate`], writing each state change only while `fence` still holds the lease (checked in
/// the transaction that writes it): an instance that lost the lease mid-pass changes nothing.
pub async fn evaluate_fenced(
    db: &PgPool,
    public_url: &str,
    am_validity: Duration,
    now: DateTime<Utc>,
    fence: Option<&Fence<'_>>,
) -> Result<Pass, sqlx::Error> {
    let clusters = storage::alerts::clusters(db).await?;
    let mut pass = Pass::default();
    for (row, deleted) in storage::alerts::rules_to_evaluate(db).await? {
        let spec: Option<RuleSpec> = serde_json::from_value(row.spec.clone()).ok();
        let live = spec.as_ref().filter(|s| s.enabled && !deleted);
        // A deleted or disabled rule, or one no longer covering a cluster, resolves what it had
        // firing there.
        let mut targets: Vec<String> = match live {
            Some(s) => clusters.iter().filter(|c| s.covers(c)).cloned().collect(),
            None => Vec::new(),
        };
        for c in storage::alerts::firing_clusters(db, &row.id).await? {
            if !targets.contains(&c) {
                targets.push(c);
            }
        }
        if live.is_some() {
            pass.rules += 1;
        }
        for cluster in targets {
            let found = match live.filter(|s| s.covers(&cluster)) {
                Some(s) => crate::queries::alerts::findings(db, &s.condition, &cluster, now).await,
                None => Ok(Vec::new()),
            };
            let outcome = match found {
                Ok(found) => {
                    let at = Stamp {
                        public_url,
                        am_validity,
                        now,
                        fence,
                    };
                    apply(db, &row, spec.as_ref(), &cluster, found, &at).await
                }
                Err(e) => Err(e),
            };
            match outcome {
                Ok(done) => {
                    metrics::counter!("faultline_alert_evaluations_total", "outcome" => "ok").increment(1);
                    pass.fired += done.fired;
                    pass.resolved += done.resolved;
                    pass.notifications += done.notifications;
                }
                Err(e) => {
                    metrics::counter!("faultline_alert_evaluations_total", "outcome" => "error").increment(1);
                    tracing::warn!(rule = %row.id, cluster = %cluster, error = %e, "alert rule evaluation failed");
                    pass.errors += 1;
                }
            }
        }
    }
    Ok(pass)
}

/// The labels of an alert: the rule's, then Faultline's own (those naming the subject's node,
/// GPU, part or slot among them).
fn labels(rule_id: &str, spec: Option<&RuleSpec>, cluster: &str, f: &Finding) -> BTreeMap<String, String> {
    let subject = f.subject.as_str();
    let mut l = spec.map(|s| s.labels.clone()).unwrap_or_default();
    l.extend(f.labels.clone());
    l.insert("alertname".into(), rule_id.into());
    l.insert("cluster".into(), cluster.into());
    l.insert("subject".into(), subject.into());
    if let Some(s) = spec {
        l.insert("condition".into(), s.condition.kind().into());
    }
    l
}

fn annotations(spec: Option<&RuleSpec>, f: &Finding, public_url: &str) -> BTreeMap<String, String> {
    let mut a = spec.map(|s| s.annotations.clone()).unwrap_or_default();
    a.insert("summary".into(), f.summary.clone());
    a.insert("value".into(), f.value.to_string());
    a.insert("link".into(), format!("{public_url}{}", f.link));
    a.insert("answer".into(), format!("{public_url}{}", f.answer));
    a
}

fn json_map(v: &serde_json::Value) -> BTreeMap<String, String> {
    serde_json::from_value(v.clone()).unwrap_or_default()
}

/// One notification of one alert, before it is written for each receiver.
struct Note {
    fingerprint: String,
    event: NotifyEvent,
    value: Option<f64>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    starts_at: DateTime<Utc>,
    ends_at: Option<DateTime<Utc>>,
    /// A firing alert's earlier labels, when they changed: Alertmanager receivers get that label
    /// set resolved and the new one firing (`event` is then `Relabel`, or `Repeat` when a repeat
    /// was due as well, for the other receivers).
    relabel_from: Option<BTreeMap<String, String>>,
}

/// When and how an evaluation writes its notifications.
struct Stamp<'a> {
    public_url: &'a str,
    am_validity: Duration,
    now: DateTime<Utc>,
    fence: Option<&'a Fence<'a>>,
}

/// The state changes of one rule in one cluster and their notifications, in one transaction.
async fn apply(
    db: &PgPool,
    rule: &RuleRow,
    spec: Option<&RuleSpec>,
    cluster: &str,
    found: Vec<Finding>,
    at: &Stamp<'_>,
) -> Result<Pass, sqlx::Error> {
    let (public_url, now) = (at.public_url, at.now);
    let existing = storage::alerts::alerts_of_rule(db, cluster, &rule.id).await?;
    let mut by_fp: HashMap<String, storage::alerts::AlertRow> =
        existing.into_iter().map(|a| (a.fingerprint.clone(), a)).collect();
    let repeat = spec.map(RuleSpec::repeat_interval).unwrap_or_default();
    let mut cols = AlertColumns {
        fingerprint: vec![],
        rule_id: vec![],
        rule_version: vec![],
        subject: vec![],
        state: vec![],
        value: vec![],
        labels: vec![],
        annotations: vec![],
        starts_at: vec![],
        ends_at: vec![],
        notified: vec![],
    };
    let mut notes: Vec<Note> = Vec::new();
    let mut pass = Pass::default();
    let push = |cols: &mut AlertColumns,
                fp: &str,
                subject: &str,
                state: AlertState,
                value: Option<f64>,
                l: &BTreeMap<String, String>,
                a: &BTreeMap<String, String>,
                starts: DateTime<Utc>,
                ends: Option<DateTime<Utc>>,
                notified: bool| {
        cols.fingerprint.push(fp.to_string());
        cols.rule_id.push(rule.id.clone());
        cols.rule_version.push(rule.version);
        cols.subject.push(subject.to_string());
        cols.state.push(state.as_str().to_string());
        cols.value.push(value);
        cols.labels.push(serde_json::to_value(l).unwrap_or_default());
        cols.annotations.push(serde_json::to_value(a).unwrap_or_default());
        cols.starts_at.push(starts);
        cols.ends_at.push(ends);
        cols.notified.push(notified);
    };
    let current = |a: &storage::alerts::AlertRow| Current {
        state: AlertState::parse(&a.state).unwrap_or(AlertState::Resolved),
        starts_at: a.starts_at,
        last_notified_at: a.last_notified_at,
    };
    for f in &found {
        let fp = fingerprint(&rule.id, cluster, &f.subject);
        let before = by_fp.remove(&fp);
        let l = labels(&rule.id, spec, cluster, f);
        let a = annotations(spec, f, public_url);
        // Alertmanager knows a firing alert by its labels: when a rule edit changed them, the set
        // it holds must end, or it stays active there until its endsAt.
        let relabel_from = before
            .as_ref()
            .filter(|b| b.state == AlertState::Firing.as_str())
            .map(|b| json_map(&b.labels))
            .filter(|old| *old != l);
        // What this finding writes: its row (state, times), and the notification it owes, if any.
        let (event, starts_at, ends_at) = match step(before.as_ref().map(current).as_ref(), true, now, repeat) {
            Step::Nothing => continue,
            Step::Refresh => {
                let starts_at = before.as_ref().map_or(now, |b| b.starts_at);
                (relabel_from.is_some().then_some(NotifyEvent::Relabel), starts_at, None)
            }
            Step::Notify {
                event,
                starts_at,
                ends_at,
            } => (Some(event), starts_at, ends_at),
        };
        if event == Some(NotifyEvent::Firing) {
            pass.fired += 1;
        }
        push(
            &mut cols,
            &fp,
            &f.subject,
            AlertState::Firing,
            Some(f.value),
            &l,
            &a,
            starts_at,
            ends_at,
            event.is_some(),
        );
        if let Some(event) = event {
            notes.push(Note {
                fingerprint: fp,
                event,
                value: Some(f.value),
                labels: l,
                annotations: a,
                starts_at,
                ends_at,
                relabel_from,
            });
        }
    }
    // What was firing and is no longer found resolves, with its last labels and annotations.
    for (fp, before) in by_fp {
        if let Step::Notify {
            event,
            starts_at,
            ends_at,
        } = step(Some(&current(&before)), false, now, repeat)
        {
            pass.resolved += 1;
            let (l, a) = (json_map(&before.labels), json_map(&before.annotations));
            push(
                &mut cols,
                &fp,
                &before.subject,
                AlertState::Resolved,
                before.value,
                &l,
                &a,
                starts_at,
                ends_at,
                true,
            );
            notes.push(Note {
                fingerprint: fp,
                event,
                value: before.value,
                labels: l,
                annotations: a,
                starts_at,
                ends_at,
                relabel_from: None,
            });
        }
    }
    if cols.fingerprint.is_empty() {
        return Ok(pass);
    }
    let mut tx = db.begin().await?;
    if let Some(fence) = at.fence
        && !storage::alerts::lease_held(&mut tx, fence).await?
    {
        return Ok(Pass::default());
    }
    let seqs: HashMap<String, i64> = storage::alerts::upsert_alerts(&mut tx, cluster, &cols, now)
        .await?
        .into_iter()
        .collect();
    let mut outbox = OutboxColumns::default();
    let receivers = spec.map(|s| s.receivers.as_slice()).unwrap_or_default();
    for note in &notes {
        let link = note.annotations.get("link").cloned().unwrap_or_default();
        let n = Notification {
            fingerprint: &note.fingerprint,
            event: note.event,
            labels: &note.labels,
            annotations: &note.annotations,
            starts_at: note.starts_at,
            ends_at: note.ends_at,
            valid_until: now + at.am_validity,
            value: note.value,
            generator_url: &link,
        };
        for (i, r) in receivers.iter().enumerate() {
            let (event, body) = match (&note.relabel_from, r.kind) {
                (Some(old), ReceiverKind::Alertmanager) => (NotifyEvent::Relabel, alertmanager_relabel(old, &n, now)),
                // Other receivers know the alert by its fingerprint, which did not change.
                (Some(_), _) if note.event == NotifyEvent::Relabel => continue,
                _ => (note.event, payload(r.kind, &n)),
            };
            outbox.id.push(Uuid::new_v4());
            outbox.fingerprint.push(note.fingerprint.clone());
            outbox.seq.push(seqs.get(&note.fingerprint).copied().unwrap_or(0));
            outbox.receiver.push(i as i32);
            outbox.receiver_kind.push(r.kind.as_str().to_string());
            outbox.url.push(r.url.clone());
            outbox.secret.push(r.secret.clone());
            outbox.event.push(event.as_str().to_string());
            outbox.payload.push(body);
        }
    }
    pass.notifications = storage::alerts::insert_outbox(&mut tx, cluster, &outbox, now).await? as usize;
    tx.commit().await?;
    metrics::counter!("faultline_alert_transitions_total", "to" => "firing").increment(pass.fired as u64);
    metrics::counter!("faultline_alert_transitions_total", "to" => "resolved").increment(pass.resolved as u64);
    Ok(pass)
}
