//! `faultline gpud sync`: reads a node's gpud (`GET /machine-info`, `GET /v1/events`) and sends
//! what it says to Faultline (`PUT /v1/gpus/inventory`, `POST /v1/integrations/gpud/events`).
//! Both sides go through [`Client::send`]: 429 and 503 are retried after their `Retry-After`, and
//! a sync that cannot finish fails loudly with the last answer.

use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::cli::GpudSyncArgs;
use crate::devtools::client::Client;
use crate::ingest::gpud::machine_gpus;

pub async fn run(args: GpudSyncArgs) -> anyhow::Result<()> {
    if !args.url.starts_with("http://") {
        bail!(
            "--url {}: gpud is read over plain HTTP only; gpud serves HTTPS with a \
             self-signed certificate, so forward it first, e.g. \
             `socat TCP-LISTEN:15133,bind=127.0.0.1,fork,reuseaddr OPENSSL:127.0.0.1:15132,verify=0` \
             and pass --url http://127.0.0.1:15133",
            args.url
        );
    }
    let gpud = Client::new(&args.url, "")?;
    let faultline = Client::connect(&args.server, &args.token, args.ca_file.as_deref())?;
    loop {
        sync_once(&gpud, &faultline, &args).await?;
        match args.every {
            Some(secs) => tokio::time::sleep(Duration::from_secs(secs.max(1))).await,
            None => return Ok(()),
        }
    }
}

async fn sync_once(gpud: &Client, faultline: &Client, args: &GpudSyncArgs) -> anyhow::Result<()> {
    let (res, _) = gpud.send(reqwest::Method::GET, "/machine-info", |r| r).await?;
    let info: Value = res.json().await.context("decoding gpud's machine info")?;
    let set = machine_gpus(&info, &args.cluster, args.node.as_deref()).map_err(anyhow::Error::msg)?;
    let node = set["hostname"].as_str().unwrap_or_default().to_string();
    let gpus = set["gpus"].as_array().map_or(0, Vec::len);
    let (inventory, _) = faultline
        .send_with_retry(reqwest::Method::PUT, "/v1/gpus/inventory", &json!({"nodes": [set]}))
        .await?;
    if let Some(r) = inventory["rejected"].as_array().filter(|r| !r.is_empty()) {
        bail!("the GPU set of {node} was refused: {}", Value::Array(r.clone()));
    }
    let now = chrono::Utc::now();
    let start = now - chrono::Duration::hours(i64::from(args.since_hours));
    let window = [("startTime", start.timestamp()), ("endTime", now.timestamp())];
    let (res, _) = gpud
        .send(reqwest::Method::GET, "/v1/events", |r| r.query(&window))
        .await?;
    let events: Value = res.json().await.context("decoding gpud's events")?;
    let query = [("cluster", args.cluster.as_str()), ("node", node.as_str())];
    let (res, _) = faultline
        .send(reqwest::Method::POST, "/v1/integrations/gpud/events", |r| {
            r.query(&query).json(&events)
        })
        .await?;
    let answer: Value = res.json().await.context("decoding Faultline's answer")?;
    for r in answer["rejected"].as_array().into_iter().flatten() {
        eprintln!("gpud event refused: {r}");
    }
    println!(
        "{node}: {gpus} GPUs; {} events: {} new signals, {} duplicates, {} refused",
        answer["received"],
        answer["accepted"].as_u64().unwrap_or(0),
        answer["duplicates"].as_u64().unwrap_or(0),
        answer["rejected"].as_array().map_or(0, Vec::len)
    );
    Ok(())
}
