//! Sends the spool to `POST /v1/events`, oldest first, in gzip'd batches; removes a batch from the
//! spool only once the server answered 2xx (a 2xx means committed). 503 and 429 wait for their
//! Retry-After; network errors and other 5xx back off exponentially with jitter, up to
//! `--max-backoff`; it never gives up, and says so each time it fails. Items the server refuses
//! (`rejected` of a 200, or a 422 for the whole batch) are counted and logged, not resent.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flate2::Compression;
use flate2::write::GzEncoder;
use serde::Deserialize;

use crate::spool::{Pending, Spool};
use crate::state::{Shared, now_rfc3339};

#[derive(Debug, Clone)]
pub struct SenderConfig {
    pub server: String,
    pub token: String,
    pub batch_records: usize,
    pub batch_bytes: usize,
    pub max_backoff: Duration,
    pub timeout: Duration,
    /// Certificates trusted for an https:// server besides the host's store.
    pub ca_certs: Vec<reqwest::Certificate>,
}

#[derive(Debug, Deserialize)]
struct IngestResponse {
    #[serde(default)]
    accepted: u64,
    #[serde(default)]
    duplicates: u64,
    #[serde(default)]
    rejected: Vec<Rejected>,
}

#[derive(Debug, Deserialize)]
struct Rejected {
    index: usize,
    #[serde(default)]
    reason: serde_json::Value,
    #[serde(default)]
    field: Option<String>,
    #[serde(default)]
    message: String,
}

/// What to do after one attempt.
#[derive(Debug, PartialEq)]
pub enum Next {
    /// The batch is done with (stored, or refused for good): acknowledge it.
    Ack,
    /// Send it again after this long.
    Retry(Duration),
    /// The server refused the size: send half as many.
    Smaller,
}

/// A random fraction in [0.5, 1): "equal jitter", so that nodes that failed together do not
/// retry together, yet none retries at once.
pub fn jitter(d: Duration) -> Duration {
    let mut b = [0u8; 4];
    let r = if getrandom::fill(&mut b).is_ok() {
        u32::from_le_bytes(b) as f64 / u32::MAX as f64
    } else {
        0.75
    };
    d.mul_f64(0.5 + r / 2.0)
}

/// Exponential backoff: 0.5 s doubled per consecutive failure, capped, jittered.
pub fn backoff(failures: u32, cap: Duration) -> Duration {
    let base = Duration::from_millis(500).saturating_mul(1u32 << failures.min(16));
    jitter(base.min(cap))
}

/// The server's Retry-After (seconds; an HTTP date is not sent by Faultline), bounded.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let secs: u64 = v.trim().parse().ok()?;
    Some(Duration::from_secs(secs.min(3600)))
}

pub fn gzip_batch(batch: &[Pending]) -> Vec<u8> {
    let mut body = Vec::with_capacity(batch.iter().map(|p| p.payload.len() + 1).sum::<usize>() + 16);
    body.extend_from_slice(b"{\"events\":[");
    for (i, p) in batch.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&p.payload);
    }
    body.extend_from_slice(b"]}");
    let mut gz = GzEncoder::new(Vec::with_capacity(body.len() / 4), Compression::fast());
    gz.write_all(&body).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

/// An error with its causes: reqwest's own text ("error sending request") hides what an operator
/// needs (refused, timed out, an untrusted certificate).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

pub struct Sender {
    pub config: SenderConfig,
    pub client: reqwest::Client,
    pub spool: Arc<Mutex<Spool>>,
    pub shared: Arc<Shared>,
    pub wake: Arc<tokio::sync::Notify>,
}

impl Sender {
    pub fn new(
        config: SenderConfig,
        spool: Arc<Mutex<Spool>>,
        shared: Arc<Shared>,
        wake: Arc<tokio::sync::Notify>,
    ) -> reqwest::Result<Sender> {
        // The host's certificate store is read only for an https:// server: an agent on plain
        // HTTP need not parse it.
        let mut client = reqwest::Client::builder().tls_built_in_root_certs(config.server.starts_with("https://"));
        for cert in &config.ca_certs {
            client = client.add_root_certificate(cert.clone());
        }
        let client = client
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("faultline-agent/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Sender {
            config,
            client,
            spool,
            shared,
            wake,
        })
    }

    /// Sends until the spool is empty, then waits to be woken (or a second). With `until_empty`,
    /// returns once the spool is empty instead.
    pub async fn run(&self, until_empty: bool) {
        let mut failures: u32 = 0;
        let mut batch_records = self.config.batch_records.max(1);
        loop {
            let batch = {
                let spool = self.spool.lock().expect("spool lock");
                spool.peek(batch_records, self.config.batch_bytes)
            };
            let batch = match batch {
                Ok(b) => b,
                Err(e) => {
                    self.shared.error(format!("reading the spool: {e}"));
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    continue;
                }
            };
            if batch.is_empty() {
                if until_empty {
                    return;
                }
                tokio::select! {
                    _ = self.wake.notified() => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                continue;
            }
            match self.send(&batch).await {
                Next::Ack => {
                    failures = 0;
                    let last = batch.last().expect("a batch is not empty").seq;
                    let res = self.spool.lock().expect("spool lock").ack(last);
                    if let Err(e) = res {
                        self.shared.error(format!("acknowledging in the spool: {e}"));
                    }
                    batch_records = (batch_records * 2).min(self.config.batch_records.max(1));
                }
                Next::Smaller => {
                    if batch_records == 1 {
                        // One signal larger than the server's body limit cannot be sent.
                        self.shared.add(&self.shared.counters.rejected, 1);
                        self.shared
                            .error("a single signal is larger than the server accepts; dropped".to_string());
                        let _ = self.spool.lock().expect("spool lock").ack(batch[0].seq);
                    }
                    batch_records = (batch_records / 2).max(1);
                }
                Next::Retry(wait) => {
                    failures = failures.saturating_add(1);
                    self.shared.add(&self.shared.counters.send_failures, 1);
                    let wait = if wait.is_zero() {
                        backoff(failures, self.config.max_backoff)
                    } else {
                        wait
                    };
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// One attempt.
    async fn send(&self, batch: &[Pending]) -> Next {
        let body = gzip_batch(batch);
        let url = format!("{}/v1/events", self.config.server.trim_end_matches('/'));
        let res = self
            .client
            .post(&url)
            .bearer_auth(&self.config.token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::CONTENT_ENCODING, "gzip")
            .body(body)
            .send()
            .await;
        let res = match res {
            Ok(r) => r,
            Err(e) => {
                self.shared.error(format!(
                    "sending {} signals to {url}: {}; will retry",
                    batch.len(),
                    error_chain(&e)
                ));
                return Next::Retry(Duration::ZERO);
            }
        };
        let status = res.status();
        let after = retry_after(res.headers());
        let text = res.text().await.unwrap_or_default();
        match status.as_u16() {
            200..=299 => {
                match serde_json::from_str::<IngestResponse>(&text) {
                    Ok(r) => {
                        let c = &self.shared.counters;
                        self.shared.add(&c.sent_accepted, r.accepted);
                        self.shared.add(&c.sent_duplicates, r.duplicates);
                        self.shared.add(&c.rejected, r.rejected.len() as u64);
                        for rj in r.rejected.iter().take(20) {
                            let seq = batch.get(rj.index).map(|p| p.seq).unwrap_or_default();
                            self.shared.error(format!(
                                "the server refused signal {seq} of the spool ({} {}): {}",
                                rj.reason,
                                rj.field.as_deref().unwrap_or(""),
                                rj.message
                            ));
                        }
                    }
                    Err(e) => self.shared.error(format!("reading the server's answer: {e}")),
                }
                self.shared.add(&self.shared.counters.send_batches, 1);
                self.shared.status.lock().expect("status lock").last_send_at = Some(now_rfc3339());
                Next::Ack
            }
            413 => {
                self.shared
                    .error(format!("the server found a batch of {} signals too large", batch.len()));
                Next::Smaller
            }
            400 | 422 => {
                // Every item refused (422), or a body the server cannot read: resending the same
                // bytes cannot succeed.
                self.shared.add(&self.shared.counters.rejected, batch.len() as u64);
                self.shared.error(format!(
                    "the server refused a batch of {} signals ({status}): {}",
                    batch.len(),
                    shorten(&text)
                ));
                Next::Ack
            }
            429 | 503 => {
                self.shared.error(format!(
                    "the server is busy ({status}); retrying after {}",
                    after
                        .map(|d| format!("{} s", d.as_secs()))
                        .unwrap_or_else(|| "a backoff".into())
                ));
                Next::Retry(after.map(jitter_up).unwrap_or(Duration::ZERO))
            }
            _ => {
                // 401/403 (a token to fix), 5xx, anything else: keep the signals, keep trying.
                self.shared.error(format!(
                    "sending to {url} failed ({status}): {}; will retry",
                    shorten(&text)
                ));
                Next::Retry(Duration::ZERO)
            }
        }
    }
}

/// Retry-After plus up to a second of jitter, so that nodes told the same do not return together.
fn jitter_up(d: Duration) -> Duration {
    d + jitter(Duration::from_millis(1000)) - Duration::from_millis(500)
}

fn shorten(s: &str) -> String {
    let s = s.trim();
    if s.len() <= 300 {
        return s.to_string();
    }
    let mut end = 300;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spool::Severity;
    use std::io::Read;

    #[test]
    fn an_error_is_told_with_its_causes_once_each() {
        #[derive(Debug)]
        struct Layer(&'static str, Option<Box<Layer>>);
        impl std::fmt::Display for Layer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Layer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|l| l as _)
            }
        }
        let e = Layer(
            "error sending request",
            Some(Box::new(Layer(
                "client error (Connect)",
                Some(Box::new(Layer(
                    "invalid peer certificate: UnknownIssuer",
                    Some(Box::new(Layer("UnknownIssuer", None))),
                ))),
            ))),
        );
        // A cause already in the text above it is not repeated.
        assert_eq!(
            error_chain(&e),
            "error sending request: client error (Connect): invalid peer certificate: UnknownIssuer"
        );
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let cap = Duration::from_secs(60);
        for f in 0..40 {
            let d = backoff(f, cap);
            let base = Duration::from_millis(500).saturating_mul(1u32 << f.min(16)).min(cap);
            assert!(d >= base / 2 && d <= base, "{f}: {d:?} vs {base:?}");
        }
        assert!(backoff(30, cap) <= cap);
        let j = jitter_up(Duration::from_secs(2));
        assert!(j >= Duration::from_secs(2) && j <= Duration::from_millis(2500), "{j:?}");
    }

    #[test]
    fn a_batch_is_the_events_object_gzipped() {
        let batch = vec![
            Pending {
                seq: 1,
                severity: Severity::High,
                payload: br#"{"a":1}"#.to_vec(),
            },
            Pending {
                seq: 2,
                severity: Severity::Low,
                payload: br#"{"b":2}"#.to_vec(),
            },
        ];
        let mut text = String::new();
        flate2::read::GzDecoder::new(&gzip_batch(&batch)[..])
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, r#"{"events":[{"a":1},{"b":2}]}"#);
    }

    #[test]
    fn retry_after_is_read_in_seconds() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(reqwest::header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert(
            reqwest::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), None);
    }
}
