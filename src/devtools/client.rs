//! A small API client used by `faultline simulate`, `report`, `slurm sync` and `gpud sync` (and the
//! benchmark): batched sends with a progress line, as an agent would do it. It speaks HTTP and
//! HTTPS (rustls, trusting the host's certificate store plus a `--ca-file`). Every request goes
//! through one retry loop ([`Client::send`]) that waits as long as the server's `Retry-After` asks
//! on 429 and 503, for reads as for writes, and says so when it finally gives up. A server never
//! reached (refused, unresolvable, a certificate not trusted) fails the first request at once
//! with its cause: waiting would not change the answer.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    retry: RetryPolicy,
    /// Whether any request got an answer: from then on a connection error is a server restarting
    /// or overloaded and is retried; before, it is a wrong URL or certificate and fails at once.
    reached: AtomicBool,
}

/// How long a client keeps trying one request.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts of one request, the first included; then it fails with the last answer.
    pub attempts: u32,
    /// The longest single wait: a larger `Retry-After` is cut to this (a misconfigured proxy must
    /// not park a client for an hour).
    pub max_wait: Duration,
    /// First wait when the answer names no `Retry-After` (connection refused, timeout, 502, 504),
    /// doubled each time up to `max_backoff`.
    pub first_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        // A per-token rate limit answers 429 with Retry-After: 1 while its bucket refills; several
        // senders sharing one token may each be turned away a few times in a row, so 20 attempts.
        RetryPolicy {
            attempts: 20,
            max_wait: Duration::from_secs(60),
            first_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(10),
        }
    }
}

/// Answers worth retrying: the server asked to come back later (429, 503) or a proxy in front of it
/// could not reach it (502, 504). Other errors would answer the same again.
fn retryable(status: reqwest::StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 502 | 503 | 504)
}

/// `Retry-After` in its seconds form (the form our server sends); None for an HTTP date or junk.
fn retry_after(res: &reqwest::Response) -> Option<Duration> {
    let secs: u64 = res
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs))
}

/// A path segment with the characters a URL path may not carry percent-encoded (serials are
/// digits, UUIDs `GPU-` and hex, but a site's identity could hold anything).
pub fn urlencoding_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An error and its causes on one line (reqwest's own message names only the URL).
fn error_chain(e: &dyn std::error::Error) -> String {
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

/// An error body shortened for a one-line message.
fn shortened(mut text: String) -> String {
    if text.len() > 600 {
        text.truncate(text.floor_char_boundary(600));
        text.push_str(" ...");
    }
    text
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SendTotals {
    pub accepted: u64,
    pub duplicates: u64,
    pub rejected: u64,
    pub retries: u64,
}

/// What [`Client::send_fleet`] sent, step by step.
#[derive(Debug, Default, Clone, Copy)]
pub struct FleetSent {
    pub nodes: SendTotals,
    /// GPU parts: node reports and removals (`accepted`: requests), then the lots' import.
    pub gpus: SendTotals,
    pub jobs: SendTotals,
    pub events: SendTotals,
    pub node_states: SendTotals,
    pub lifecycles: SendTotals,
}

impl FleetSent {
    /// Retries over every step (each a wait the server asked for, or a connection retried).
    pub fn retries(&self) -> u64 {
        [
            self.nodes,
            self.gpus,
            self.jobs,
            self.events,
            self.node_states,
            self.lifecycles,
        ]
        .iter()
        .map(|t| t.retries)
        .sum()
    }
}

/// The certificates of a PEM file (one or a bundle): a site's own certificate authority.
pub fn read_ca_file(path: &Path) -> anyhow::Result<Vec<reqwest::Certificate>> {
    let pem = std::fs::read(path).with_context(|| format!("reading --ca-file {}", path.display()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).with_context(|| format!("--ca-file {}", path.display()))?;
    if certs.is_empty() {
        bail!("--ca-file {}: no PEM certificate in it", path.display());
    }
    Ok(certs)
}

impl Client {
    /// A client of `base` (http:// or https://) trusting the host's certificate store.
    pub fn new(base: &str, token: &str) -> anyhow::Result<Self> {
        Self::with_retry(base, token, RetryPolicy::default())
    }

    /// A client of `base` trusting the host's certificate store and, for https://, the
    /// certificates in `ca_file`.
    pub fn connect(base: &str, token: &str, ca_file: Option<&Path>) -> anyhow::Result<Self> {
        let ca_certs = ca_file.map(read_ca_file).transpose()?.unwrap_or_default();
        Self::build(base, token, RetryPolicy::default(), &ca_certs)
    }

    pub fn with_retry(base: &str, token: &str, retry: RetryPolicy) -> anyhow::Result<Self> {
        Self::build(base, token, retry, &[])
    }

    fn build(base: &str, token: &str, retry: RetryPolicy, ca_certs: &[reqwest::Certificate]) -> anyhow::Result<Self> {
        let https = base.starts_with("https://");
        if !(https || base.starts_with("http://")) {
            bail!("{base}: an http:// or https:// URL is needed");
        }
        // The host's certificate store is read only for an https:// server.
        let mut http = reqwest::Client::builder()
            .tls_built_in_root_certs(https)
            .timeout(Duration::from_secs(120))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("faultline/", env!("CARGO_PKG_VERSION")));
        for cert in ca_certs {
            http = http.add_root_certificate(cert.clone());
        }
        Ok(Client {
            http: http.build().context("building the HTTP client")?,
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
            retry,
            reached: AtomicBool::new(false),
        })
    }

    /// PUT /v1/nodes in batches.
    pub async fn put_nodes(&self, nodes: &[Value], batch: usize) -> anyhow::Result<SendTotals> {
        let mut totals = SendTotals::default();
        for chunk in nodes.chunks(batch.max(1)) {
            let body = json!({ "nodes": chunk });
            let (res, retries) = self.send_with_retry(reqwest::Method::PUT, "/v1/nodes", &body).await?;
            totals.accepted += res["upserted"].as_u64().unwrap_or(0);
            totals.rejected += res["rejected"].as_array().map_or(0, |r| r.len() as u64);
            totals.retries += retries;
        }
        Ok(totals)
    }

    /// Sends the simulated GPU parts' changes in time order: node reports through
    /// `PUT /v1/gpus/inventory` (consecutive reports of distinct nodes in one request, up to
    /// `batch`), removals through `POST /v1/gpus/{part}/removals`, then the parts' lots through
    /// `POST /v1/gpus/history` (admin). `accepted` counts requests answered, `rejected` refused items.
    pub async fn send_gpu_steps(&self, steps: &[Value], history: &[Value], batch: usize) -> anyhow::Result<SendTotals> {
        let mut totals = SendTotals::default();
        let mut pending: Vec<&Value> = Vec::new();
        let flush = |pending: &mut Vec<&Value>| {
            let body = json!({ "nodes": std::mem::take(pending) });
            async move {
                self.send_with_retry(reqwest::Method::PUT, "/v1/gpus/inventory", &body)
                    .await
            }
        };
        for step in steps {
            if let Some(report) = step.get("inventory") {
                // Two reports of one node in one request would be diffed against the same stored state.
                let again = pending
                    .iter()
                    .any(|r| r["hostname"] == report["hostname"] && r["cluster"] == report["cluster"]);
                if again || pending.len() >= batch.max(1) {
                    let (res, retries) = flush(&mut pending).await?;
                    totals.accepted += 1;
                    totals.rejected += res["rejected"].as_array().map_or(0, |r| r.len() as u64);
                    totals.retries += retries;
                }
                pending.push(report);
            } else if let Some(r) = step.get("removal") {
                if !pending.is_empty() {
                    let (res, retries) = flush(&mut pending).await?;
                    totals.accepted += 1;
                    totals.rejected += res["rejected"].as_array().map_or(0, |r| r.len() as u64);
                    totals.retries += retries;
                }
                let part = r["part"].as_str().unwrap_or_default();
                let path = format!("/v1/gpus/{}/removals", urlencoding_path(part));
                let body = json!({"cluster": r["cluster"], "at": r["at"], "reason": r["reason"],
                                  "ticket": r["ticket"], "note": r["note"]});
                let (_, retries) = self.send_with_retry(reqwest::Method::POST, &path, &body).await?;
                totals.accepted += 1;
                totals.retries += retries;
            }
        }
        if !pending.is_empty() {
            let (res, retries) = flush(&mut pending).await?;
            totals.accepted += 1;
            totals.rejected += res["rejected"].as_array().map_or(0, |r| r.len() as u64);
            totals.retries += retries;
        }
        for chunk in history.chunks(10_000) {
            let (res, retries) = self
                .send_with_retry(reqwest::Method::POST, "/v1/gpus/history", &json!({ "parts": chunk }))
                .await?;
            totals.accepted += 1;
            totals.rejected += res["rejected"].as_array().map_or(0, |r| r.len() as u64);
            totals.retries += retries;
        }
        Ok(totals)
    }

    /// PUT /v1/jobs in batches.
    pub async fn put_jobs(&self, jobs: &[Value], batch: usize) -> anyhow::Result<SendTotals> {
        let mut totals = SendTotals::default();
        for chunk in jobs.chunks(batch.max(1)) {
            let body = json!({ "jobs": chunk });
            let (res, retries) = self.send_with_retry(reqwest::Method::PUT, "/v1/jobs", &body).await?;
            totals.accepted += res["upserted"].as_u64().unwrap_or(0);
            totals.rejected += res["rejected"].as_array().map_or(0, |r| r.len() as u64);
            totals.retries += retries;
        }
        Ok(totals)
    }

    /// POST /v1/nodes/{cluster}/{hostname}/state for each drain or return (`cluster`, `hostname`,
    /// `state`, `at`, `reason`, and the drain's `failure_id` when it names one), in order.
    pub async fn post_node_states(&self, states: &[Value]) -> anyhow::Result<SendTotals> {
        let mut totals = SendTotals::default();
        for s in states {
            let path = format!(
                "/v1/nodes/{}/{}/state",
                s["cluster"].as_str().unwrap_or_default(),
                s["hostname"].as_str().unwrap_or_default()
            );
            let body =
                json!({"state": s["state"], "at": s["at"], "reason": s["reason"], "failure_id": s["failure_id"]});
            let (_, retries) = self.send_with_retry(reqwest::Method::POST, &path, &body).await?;
            totals.accepted += 1;
            totals.retries += retries;
        }
        Ok(totals)
    }

    /// PATCH /v1/failures/{id} for each simulated lifecycle, finding the failure by its cluster,
    /// first signal and job (else node) through GET /v1/failures. `rejected` counts those not found.
    pub async fn patch_lifecycles(&self, lifecycles: &[Value]) -> anyhow::Result<SendTotals> {
        let mut totals = SendTotals::default();
        for l in lifecycles {
            let first_at: chrono::DateTime<chrono::Utc> = l["first_at"].as_str().unwrap_or_default().parse()?;
            let mut query: Vec<(&str, String)> = vec![
                ("cluster", l["cluster"].as_str().unwrap_or_default().to_string()),
                ("from", first_at.to_rfc3339()),
                ("to", (first_at + chrono::Duration::seconds(1)).to_rfc3339()),
                ("limit", "2".into()),
            ];
            match (l["job_id"].as_str(), l["node"].as_str()) {
                (Some(j), _) => query.push(("job", j.to_string())),
                (None, Some(n)) => query.push(("node", n.to_string())),
                (None, None) => continue,
            }
            let (res, retries) = self
                .send(reqwest::Method::GET, "/v1/failures", |r| r.query(&query))
                .await?;
            totals.retries += retries;
            let page: Value = res.json().await.context("decoding GET /v1/failures")?;
            let Some(id) = page["failures"][0]["id"].as_str() else {
                totals.rejected += 1;
                continue;
            };
            let path = format!("/v1/failures/{id}");
            let (_, retries) = self.send_with_retry(reqwest::Method::PATCH, &path, &l["patch"]).await?;
            totals.accepted += 1;
            totals.retries += retries;
        }
        Ok(totals)
    }

    /// Sends a simulated fleet as a site's agents and engineers would, in order: inventory, jobs,
    /// signals (`batch` per request), drains and returns, then the failures' lifecycles (which need a
    /// token that may read failures, to find them: an admin token). With `progress`, a line per step
    /// on stderr. Any step that fails after its retries ends the run with an error.
    pub async fn send_fleet(
        &self,
        fleet: &crate::devtools::simulate::SimulatedFleet,
        batch: usize,
        progress: bool,
    ) -> anyhow::Result<FleetSent> {
        let say = |line: String| {
            if progress {
                eprintln!("{line}");
            }
        };
        let nodes = self.put_nodes(&fleet.nodes, 1000).await?;
        say(format!("  nodes upserted: {}", nodes.accepted));
        let gpus = self
            .send_gpu_steps(&fleet.gpu_steps, &fleet.gpu_history, 1000)
            .await
            .context("GPU parts not recorded (removals and the lots' import need an admin token)")?;
        say(format!(
            "  GPU parts: {} parts, {} removals, {} back from repair (requests {}, rejected items {})",
            fleet.truth.parts.parts,
            fleet.truth.parts.removals,
            fleet.truth.parts.returned.len(),
            gpus.accepted,
            gpus.rejected
        ));
        let jobs = self.put_jobs(&fleet.jobs, 1000).await?;
        say(format!(
            "  jobs upserted: {}, rejected {}",
            jobs.accepted, jobs.rejected
        ));
        let events = self.post_events(&fleet.events, batch, 1, progress).await?;
        say(format!(
            "  accepted {}, duplicates {}, rejected {}, retries {}",
            events.accepted, events.duplicates, events.rejected, events.retries
        ));
        let node_states = self.post_node_states(&fleet.node_states).await?;
        say(format!("  node drains and returns recorded: {}", node_states.accepted));
        let lifecycles = self.patch_lifecycles(&fleet.lifecycles).await.context(
            "failure lifecycles not recorded (finding the failures needs a token that may read them: an admin token)",
        )?;
        say(format!(
            "  failure lifecycles recorded: {} (failure not found: {})",
            lifecycles.accepted, lifecycles.rejected
        ));
        Ok(FleetSent {
            nodes,
            gpus,
            jobs,
            events,
            node_states,
            lifecycles,
        })
    }

    /// POST /v1/events in batches of `batch`, `senders` at a time, optionally printing progress to stderr.
    pub async fn post_events(
        &self,
        events: &[Value],
        batch: usize,
        senders: usize,
        progress: bool,
    ) -> anyhow::Result<SendTotals> {
        use futures_util::StreamExt;
        let batch = batch.max(1);
        let total = events.len();
        // `senders` requests in flight at once, as several agents of a fleet would send; answers
        // are taken in batch order, so progress lines stay in order.
        // Boxed: a stream of unboxed borrowing futures is not `Send` for `tokio::spawn` (rustc's
        // higher-ranked lifetime inference).
        type Sending<'a> =
            std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<(Value, u64)>> + Send + 'a>>;
        let sends: Vec<Sending<'_>> = events
            .chunks(batch)
            .map(|c| Box::pin(self.send_events(c)) as Sending<'_>)
            .collect();
        let mut answers = futures_util::stream::iter(sends).buffered(senders.max(1)).enumerate();
        let mut totals = SendTotals::default();
        while let Some((i, answer)) = answers.next().await {
            let (res, retries) = answer?;
            totals.accepted += res["accepted"].as_u64().unwrap_or(0);
            totals.duplicates += res["duplicates"].as_u64().unwrap_or(0);
            totals.rejected += res["rejected"].as_array().map_or(0, |r| r.len() as u64);
            totals.retries += retries;
            if progress {
                let done = ((i + 1) * batch).min(total);
                // One line per 5%, so logs stay readable when stderr is not a terminal.
                let step = (total / 20).max(1);
                if done % step < batch || done == total {
                    eprintln!("  events {done:>9}/{total} ({:>3}%)", done * 100 / total.max(1));
                }
            }
        }
        Ok(totals)
    }

    async fn send_events(&self, chunk: &[Value]) -> anyhow::Result<(Value, u64)> {
        // Serialised from the borrowed events: `json!` would deep-copy every event of the batch.
        #[derive(serde::Serialize)]
        struct Batch<'a> {
            events: &'a [Value],
        }
        self.send_with_retry(reqwest::Method::POST, "/v1/events", &Batch { events: chunk })
            .await
    }

    /// GET /v1/reports/reliability in `format` (html or markdown) for [from, to) and a cluster.
    pub async fn report(
        &self,
        from: Option<chrono::DateTime<chrono::Utc>>,
        to: Option<chrono::DateTime<chrono::Utc>>,
        cluster: Option<&str>,
        format: &str,
    ) -> anyhow::Result<String> {
        let mut query: Vec<(&str, String)> = vec![("format", format.to_string())];
        query.extend(from.map(|f| ("from", f.to_rfc3339())));
        query.extend(to.map(|t| ("to", t.to_rfc3339())));
        query.extend(cluster.map(|c| ("cluster", c.to_string())));
        let (res, _) = self
            .send(reqwest::Method::GET, "/v1/reports/reliability", |r| r.query(&query))
            .await?;
        res.text().await.context("reading the report")
    }

    /// A request with an optional JSON body and its decoded JSON answer (and retries), through
    /// [`send`](Self::send).
    pub async fn send_json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(Value, u64)> {
        match body {
            Some(b) => self.send_with_retry(method, path, b).await,
            None => {
                let (res, retries) = self.send(method.clone(), path, |r| r).await?;
                let answer = res
                    .json()
                    .await
                    .with_context(|| format!("decoding the answer to {method} {path}"))?;
                Ok((answer, retries))
            }
        }
    }

    /// A JSON request and its decoded JSON answer, through [`send`](Self::send).
    pub async fn send_with_retry(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &(impl serde::Serialize + Sync),
    ) -> anyhow::Result<(Value, u64)> {
        let (res, retries) = self.send(method.clone(), path, |r| r.json(body)).await?;
        let answer = res
            .json()
            .await
            .with_context(|| format!("decoding the answer to {method} {path}"))?;
        Ok((answer, retries))
    }

    /// Sends `method path` (with the token, and whatever `build` adds: query, body) until it gets
    /// a success, and returns it with the number of retries. A 429 or 503 is retried after its
    /// `Retry-After` (seconds, at most `max_wait`), a timeout, 502 or 504 after an exponential
    /// backoff, and so is a connection error once the server has answered this client before;
    /// a connection or TLS error before any answer fails at once with its cause, and any other
    /// error answer with its status and body. After `attempts` attempts it fails with the last
    /// answer: never silently.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        build: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> anyhow::Result<(reqwest::Response, u64)> {
        let url = format!("{}{path}", self.base);
        let policy = self.retry;
        let started = Instant::now();
        let mut backoff = policy.first_backoff;
        let mut last = String::new();
        for attempt in 0..policy.attempts.max(1) {
            let sent = build(self.http.request(method.clone(), &url).bearer_auth(&self.token))
                .send()
                .await;
            if sent.is_ok() {
                self.reached.store(true, Ordering::Relaxed);
            }
            let wait = match sent {
                Ok(res) if res.status().is_success() => return Ok((res, attempt.into())),
                Ok(res) if retryable(res.status()) => {
                    let status = res.status();
                    let asked = retry_after(&res);
                    last = format!("{status}: {}", shortened(res.text().await.unwrap_or_default()));
                    asked.map(|w| w.min(policy.max_wait))
                }
                Ok(res) => {
                    let status = res.status();
                    let text = shortened(res.text().await.unwrap_or_default());
                    bail!("{method} {path}: {status}: {text}");
                }
                Err(e) if e.is_connect() && !self.reached.load(Ordering::Relaxed) => {
                    let hint = if error_chain(&e).contains("certificate") {
                        " (a certificate of a site's own authority: trust it with --ca-file)"
                    } else {
                        ""
                    };
                    return Err(
                        anyhow::Error::new(e).context(format!("{method} {path}: cannot reach {}{hint}", self.base))
                    );
                }
                Err(e) if e.is_connect() || e.is_timeout() => {
                    last = error_chain(&e);
                    None
                }
                Err(e) => return Err(anyhow::Error::new(e).context(format!("{method} {path}"))),
            };
            // No wait after the last attempt: its answer is the error.
            if attempt + 1 == policy.attempts.max(1) {
                break;
            }
            let wait = wait.unwrap_or_else(|| {
                let w = backoff;
                backoff = (backoff * 2).min(policy.max_backoff);
                w
            });
            tokio::time::sleep(wait).await;
        }
        bail!(
            "{method} {path}: gave up after {} attempts over {:.0} s; last answer: {last}",
            policy.attempts.max(1),
            started.elapsed().as_secs_f64()
        )
    }
}
