//! What a notification looks like to each kind of receiver, how a webhook body is signed, when a
//! failed delivery is tried again and which answers end it. Pure; the sender is `app::alerting`.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};

use crate::domain::alert::{NotifyEvent, ReceiverKind};

/// One notification of one alert, as stored in the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification<'a> {
    pub fingerprint: &'a str,
    pub event: NotifyEvent,
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
    pub starts_at: DateTime<Utc>,
    pub ends_at: Option<DateTime<Utc>>,
    /// Until when Alertmanager should hold a firing alert without hearing of it again (renewed
    /// when the notification is sent, and by each re-send).
    pub valid_until: DateTime<Utc>,
    pub value: Option<f64>,
    /// Absolute URL of the answer that shows the figure.
    pub generator_url: &'a str,
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// One alert as Alertmanager's v2 API (`POST /api/v2/alerts`) takes it. A firing alert carries an
/// `endsAt` in the future (it lapses there unless renewed by the next re-send), a resolved one its
/// end.
pub fn alertmanager_alert(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    starts_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    generator_url: &str,
) -> Value {
    json!({
        "labels": labels,
        "annotations": annotations,
        "startsAt": ts(starts_at),
        "endsAt": ts(ends_at),
        "generatorURL": generator_url,
    })
}

/// The Alertmanager body of a relabelled firing alert: the label set it was notified under ends
/// now (`endsAt` `now`) and the new one fires, in one request so that Alertmanager never holds
/// both or neither.
pub fn alertmanager_relabel(old_labels: &BTreeMap<String, String>, n: &Notification<'_>, now: DateTime<Utc>) -> Value {
    json!([
        alertmanager_alert(old_labels, n.annotations, n.starts_at, now, n.generator_url),
        alertmanager_alert(n.labels, n.annotations, n.starts_at, n.valid_until, n.generator_url),
    ])
}

/// Moves the `endsAt` of the firing alerts of an Alertmanager body written at `written_at` to
/// `until`: a notification sent late (the receiver was down) must not reach Alertmanager already
/// lapsed. Firing alerts are those written with an `endsAt` after `written_at`; a resolved one
/// keeps its end.
pub fn renew_firing(body: &mut Value, written_at: DateTime<Utc>, until: DateTime<Utc>) {
    let Some(alerts) = body.as_array_mut() else {
        return;
    };
    for a in alerts {
        let firing = a["endsAt"]
            .as_str()
            .and_then(|e| DateTime::parse_from_rfc3339(e).ok())
            .is_some_and(|e| e > written_at);
        if firing {
            a["endsAt"] = Value::String(ts(until));
        }
    }
}

/// The request body for `kind`.
pub fn payload(kind: ReceiverKind, n: &Notification<'_>) -> Value {
    match kind {
        // Alertmanager's v2 API takes a list of alerts.
        ReceiverKind::Alertmanager => json!([alertmanager_alert(
            n.labels,
            n.annotations,
            n.starts_at,
            n.ends_at.unwrap_or(n.valid_until),
            n.generator_url
        )]),
        ReceiverKind::Webhook => json!({
            "version": "1",
            "fingerprint": n.fingerprint,
            "status": if n.event == NotifyEvent::Resolved { "resolved" } else { "firing" },
            "event": n.event.as_str(),
            "labels": n.labels,
            "annotations": n.annotations,
            "starts_at": ts(n.starts_at),
            "ends_at": n.ends_at.map(ts),
            "value": n.value,
            "url": n.generator_url,
        }),
        ReceiverKind::Slack => {
            let status = match n.event {
                NotifyEvent::Firing => "FIRING",
                NotifyEvent::Repeat | NotifyEvent::Relabel => "STILL FIRING",
                NotifyEvent::Resolved => "RESOLVED",
            };
            let get = |k: &str| n.labels.get(k).map(String::as_str).unwrap_or("");
            let summary = n.annotations.get("summary").map(String::as_str).unwrap_or("");
            json!({"text": format!(
                "[{status}] {} on {} ({}): {summary} <{}|details>",
                get("alertname"), get("cluster"), get("subject"), n.generator_url
            )})
        }
    }
}

/// The header carrying the signing time (Unix seconds).
pub const TIMESTAMP_HEADER: &str = "x-faultline-timestamp";
/// The header carrying `v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`.
pub const SIGNATURE_HEADER: &str = "x-faultline-signature";

/// `v1=` and the hex HMAC-SHA256 of `"<timestamp>.<body>"` under `secret`. Signing the timestamp
/// with the body lets a receiver refuse replays of an old request.
pub fn signature(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<sha2_hmac::Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    format!("v1={hex}")
}

/// Checks a signature as a receiver would (constant time).
pub fn verify(secret: &[u8], timestamp: i64, body: &[u8], header: &str) -> bool {
    use subtle::ConstantTimeEq;
    let expected = signature(secret, timestamp, body);
    expected.len() == header.len() && bool::from(expected.as_bytes().ct_eq(header.as_bytes()))
}

/// The delay before retry `attempt` (1 = after the first failure): exponential from `base`,
/// capped at `cap`, with "full jitter" (uniform in [half, all] of the step, `jitter` in [0, 1]),
/// so receivers coming back are not hit by every sender at once.
pub fn backoff(attempt: u32, base: Duration, cap: Duration, jitter: f64) -> Duration {
    let exp = attempt.saturating_sub(1).min(30);
    let step = (base.num_milliseconds() as f64 * 2f64.powi(exp as i32)).min(cap.num_milliseconds() as f64);
    Duration::milliseconds((step * (0.5 + 0.5 * jitter.clamp(0.0, 1.0))) as i64)
}

/// What an answer means for a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    /// Try again later (5xx, 408, 429, no answer).
    Retry,
    /// The receiver refused this payload (4xx but 408 and 429): sending it again cannot help.
    Rejected,
}

impl Outcome {
    pub fn of_status(status: u16) -> Outcome {
        match status {
            200..=299 => Outcome::Delivered,
            408 | 429 => Outcome::Retry,
            400..=499 => Outcome::Rejected,
            _ => Outcome::Retry,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn signatures_match_a_published_hmac_vector_and_verify() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let mut mac = Hmac::<sha2_hmac::Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        let s = signature(b"k", 1_700_000_000, b"{}");
        assert!(s.starts_with("v1=") && s.len() == 67);
        assert!(verify(b"k", 1_700_000_000, b"{}", &s));
        assert!(!verify(b"k", 1_700_000_001, b"{}", &s));
        assert!(!verify(b"other", 1_700_000_000, b"{}", &s));
    }

    #[test]
    fn backoff_doubles_to_its_cap_within_its_jitter() {
        let (base, cap) = (Duration::seconds(1), Duration::seconds(60));
        let full: Vec<i64> = (1..=8).map(|a| backoff(a, base, cap, 1.0).num_seconds()).collect();
        assert_eq!(full, vec![1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff(3, base, cap, 0.0), Duration::seconds(2));
        assert_eq!(backoff(1000, base, cap, 0.5).num_milliseconds(), 45_000);
    }

    #[test]
    fn only_a_plain_refusal_ends_the_retries() {
        assert_eq!(Outcome::of_status(200), Outcome::Delivered);
        assert_eq!(Outcome::of_status(400), Outcome::Rejected);
        assert_eq!(Outcome::of_status(422), Outcome::Rejected);
        assert_eq!(Outcome::of_status(408), Outcome::Retry);
        assert_eq!(Outcome::of_status(429), Outcome::Retry);
        assert_eq!(Outcome::of_status(503), Outcome::Retry);
    }

    #[test]
    fn payloads_follow_each_receivers_format() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 2, 10, 0, 0).unwrap();
        let labels: BTreeMap<String, String> = [("alertname", "lemons"), ("cluster", "c1"), ("subject", "n001")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let annotations = BTreeMap::from([("summary".to_string(), "3 failures".to_string())]);
        let n = Notification {
            fingerprint: "ab",
            event: NotifyEvent::Firing,
            labels: &labels,
            annotations: &annotations,
            starts_at: t0,
            ends_at: None,
            valid_until: t0 + Duration::hours(1),
            value: Some(3.0),
            generator_url: "http://f/x",
        };
        let am = payload(ReceiverKind::Alertmanager, &n);
        assert_eq!(am[0]["startsAt"], "2026-11-02T10:00:00.000Z");
        assert_eq!(am[0]["endsAt"], "2026-11-02T11:00:00.000Z");
        assert_eq!(am[0]["labels"]["subject"], "n001");
        assert_eq!(am[0]["generatorURL"], "http://f/x");
        // Sent late, a firing alert's end moves ahead; a resolved one keeps its end.
        let mut late = am.clone();
        renew_firing(&mut late, t0, t0 + Duration::hours(5));
        assert_eq!(late[0]["endsAt"], "2026-11-02T15:00:00.000Z");
        let resolved = Notification {
            event: NotifyEvent::Resolved,
            ends_at: Some(t0),
            ..n.clone()
        };
        let mut body = payload(ReceiverKind::Alertmanager, &resolved);
        renew_firing(&mut body, t0, t0 + Duration::hours(5));
        assert_eq!(body[0]["endsAt"], "2026-11-02T10:00:00.000Z");
        // A relabel ends the old label set now and fires the new one; sent late, only the new
        // one's end moves.
        let old = BTreeMap::from([("alertname".to_string(), "lemons".to_string())]);
        let mut relabel = alertmanager_relabel(&old, &n, t0);
        assert_eq!(relabel[0]["labels"], json!({"alertname": "lemons"}));
        assert_eq!(relabel[0]["endsAt"], "2026-11-02T10:00:00.000Z");
        assert_eq!(relabel[1]["labels"]["subject"], "n001");
        assert_eq!(relabel[1]["endsAt"], "2026-11-02T11:00:00.000Z");
        renew_firing(&mut relabel, t0, t0 + Duration::hours(5));
        assert_eq!(relabel[0]["endsAt"], "2026-11-02T10:00:00.000Z");
        assert_eq!(relabel[1]["endsAt"], "2026-11-02T15:00:00.000Z");
        let wh = payload(ReceiverKind::Webhook, &n);
        assert_eq!((wh["status"].as_str(), wh["ends_at"].is_null()), (Some("firing"), true));
        let slack = payload(ReceiverKind::Slack, &n);
        assert_eq!(
            slack["text"],
            "[FIRING] lemons on c1 (n001): 3 failures <http://f/x|details>"
        );
    }
}
