//! A small API client used by `faultline simulate` (and reports): batched, retried sends with a
//! progress line, as an agent would do it.

use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SendTotals {
    pub accepted: u64,
    pub duplicates: u64,
    pub rejected: u64,
    pub retries: u64,
}

impl Client {
    pub fn new(base: &str, token: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(120)).build()?;
        Ok(Client {
            http,
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
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
    /// `state`, `at`, `reason`), in order.
    pub async fn post_node_states(&self, states: &[Value]) -> anyhow::Result<SendTotals> {
        let mut totals = SendTotals::default();
        for s in states {
            let path = format!(
                "/v1/nodes/{}/{}/state",
                s["cluster"].as_str().unwrap_or_default(),
                s["hostname"].as_str().unwrap_or_default()
            );
            let body = json!({"state": s["state"], "at": s["at"], "reason": s["reason"]});
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
            let res = self
                .http
                .get(format!("{}/v1/failures", self.base))
                .bearer_auth(&self.token)
                .query(&query)
                .send()
                .await?;
            let status = res.status();
            let page: Value = res.json().await.context("decoding GET /v1/failures")?;
            if !status.is_success() {
                bail!("GET /v1/failures: {status}: {page}");
            }
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
        let res = self
            .http
            .get(format!("{}/v1/reports/reliability", self.base))
            .bearer_auth(&self.token)
            .query(&query)
            .send()
            .await?;
        let status = res.status();
        let body = res.text().await.context("reading the report")?;
        if !status.is_success() {
            bail!("GET /v1/reports/reliability: {status}: {body}");
        }
        Ok(body)
    }

    /// Retries on connection errors, 429 and 5xx (honouring Retry-After), with exponential backoff.
    async fn send_with_retry(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &(impl serde::Serialize + Sync),
    ) -> anyhow::Result<(Value, u64)> {
        let url = format!("{}{path}", self.base);
        let mut delay = Duration::from_millis(200);
        for attempt in 0..8u64 {
            let sent = self
                .http
                .request(method.clone(), &url)
                .bearer_auth(&self.token)
                .json(body)
                .send()
                .await;
            match sent {
                Ok(res) if res.status().is_success() => {
                    return Ok((res.json().await.context("decoding the answer")?, attempt));
                }
                Ok(res) if res.status().as_u16() == 429 || res.status().is_server_error() => {
                    if let Some(secs) = res
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                    {
                        delay = Duration::from_secs(secs);
                    }
                }
                Ok(res) => {
                    let status = res.status();
                    let mut text = res.text().await.unwrap_or_default();
                    if text.len() > 600 {
                        text.truncate(text.floor_char_boundary(600));
                        text.push_str(" ...");
                    }
                    bail!("{method} {path}: {status}: {text}");
                }
                Err(e) if e.is_connect() || e.is_timeout() => {}
                Err(e) => return Err(e.into()),
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(10));
        }
        bail!("{method} {path}: giving up after 8 attempts")
    }
}
