//! The one write path for signals: shared by the HTTP handlers, `serve --demo` and the benchmark.

pub mod alerts;
pub mod audit;
pub mod batch;
pub mod catalog;
pub mod dcgm;
pub mod dcgm_codes;
pub mod gpud;
pub mod gpus;
pub mod inventory;
pub mod jobs;
pub mod kubernetes;
pub mod lifecycle;
pub mod locks;
pub mod nvsentinel;
pub mod rebuild;
pub mod refold;
pub mod rollups;
pub mod sync_cursors;
pub mod timing;
pub mod tokens;

use std::collections::HashSet;

use sqlx::PgPool;

use crate::domain::event::Event;
use crate::ingest::catalog::CatalogCache;
use crate::storage;
use locks::LockSpace;

/// What storing a batch of validated signals did (part of every ingest answer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct StoreOutcome {
    /// Signals whose id was new: each is counted once, as a row of its own or in a burst.
    pub accepted: usize,
    /// Signals whose id was already accepted (now, earlier in the request, or before): retries,
    /// counted and not stored twice. Before the retention horizon, where the ids left the ledger
    /// with their month, a signal its failure (or the archive) already holds is one.
    pub duplicates: usize,
    /// New rows of signals: accepted minus those folded into a burst.
    pub stored: usize,
    /// Accepted signals that repeated an identical one (same cluster, node, GPU, job, kind, code)
    /// within 60 s, in this request or already stored: they raise its `repeat_count`.
    pub folded: usize,
    /// Of the accepted signals, those older than signal retention keeps
    /// (`FAULTLINE_SIGNAL_RETENTION_DAYS`: their month ends more than that many days ago). They are
    /// folded into their failures like any other (the failures, their facts, rollups and
    /// lifecycles stay), and also counted in `stored` or `folded`; their raw rows are kept only
    /// until the next retention pass drops their month. 0 when retention is off.
    #[serde(default)]
    pub folded_not_retained: usize,
}

/// The one write path for signals (`/v1/events`, `/v1/logs`, integrations): in one transaction,
/// claim the ids (idempotency), collapse identical signals into bursts, extend stored bursts of
/// the same identity, insert the rest and re-fold the failures they touch. A 2xx afterwards
/// means all of it is durable. Signals of any age are folded; those older than
/// `retention_days` (0: none) are counted in `folded_not_retained`, their rows going with the next
/// retention pass.
pub async fn store_events(
    db: &PgPool,
    catalog_cache: &CatalogCache,
    window: chrono::Duration,
    retention_days: u32,
    route: batch::Route,
    mut events: Vec<Event>,
) -> Result<StoreOutcome, sqlx::Error> {
    for e in &mut events {
        scrub_nul(e);
    }
    let received = events.len();
    let mut seen = HashSet::with_capacity(events.len());
    events.retain(|e| seen.insert(e.id));
    // Before the retention horizon the ledger's ids are gone with their month: the failures (and
    // the archive) say which of those signals were folded before.
    if let Some(horizon) = storage::partitions::horizon(db).await? {
        let folded = folded_before_horizon(db, horizon, &events).await?;
        if !folded.is_empty() {
            events.retain(|e| !folded.contains(&e.id));
        }
    }
    // Partitions for the batch's months, before the transaction (creating one waits for no
    // writer); a month retention dropped gets its partition again until the next pass.
    let mut months: Vec<_> = events.iter().map(|e| month_of(e.occurred_at)).collect();
    months.sort();
    months.dedup();
    storage::partitions::ensure_months(db, &months).await?;
    // Every sender counts as alive as of its latest signal's time, retries included (the silence
    // rule's input): a history import is not a sign of life now, and a clock ahead is read as now.
    let now = chrono::Utc::now();
    let mut senders: std::collections::BTreeMap<(String, String), chrono::DateTime<chrono::Utc>> =
        std::collections::BTreeMap::new();
    for e in &events {
        if let Some(n) = &e.node {
            let at = e.occurred_at.min(now);
            let last = senders.entry((e.cluster.clone(), n.clone())).or_insert(at);
            *last = (*last).max(at);
        }
    }
    let mut sender_clusters = Vec::with_capacity(senders.len());
    let mut sender_nodes = Vec::with_capacity(senders.len());
    let mut sender_times = Vec::with_capacity(senders.len());
    for ((c, n), at) in senders {
        sender_clusters.push(c);
        sender_nodes.push(n);
        sender_times.push(at);
    }
    let mut tx = db.begin().await?;
    let catalog = crate::ingest::catalog::lock_shared(&mut tx, catalog_cache).await?;
    let keys: Vec<(&str, chrono::DateTime<chrono::Utc>, uuid::Uuid)> = events
        .iter()
        .map(|e| (e.cluster.as_str(), e.occurred_at, e.id))
        .collect();
    let new_ids: HashSet<uuid::Uuid> = storage::events::claim_ids(&mut tx, &keys).await?.into_iter().collect();
    events.retain(|e| new_ids.contains(&e.id));
    let accepted = events.len();
    let folded_not_retained = match retention_cutoff(chrono::Utc::now(), retention_days) {
        Some(cutoff) => events.iter().filter(|e| month_end(e.occurred_at) <= cutoff).count(),
        None => 0,
    };
    // Two batches extending the same burst must not both insert it: serialise per node.
    let mut sources: Vec<String> = events
        .iter()
        .filter_map(|e| e.node.as_ref().map(|n| format!("{}\n{n}", e.cluster)))
        .collect();
    sources.sort();
    sources.dedup();
    locks::lock(&mut tx, LockSpace::BurstSources, &sources).await?;
    storage::alerts::seen(&mut tx, &sender_clusters, &sender_nodes, &sender_times).await?;
    let bursts = crate::fold::burst::collapse(events, crate::fold::burst::burst_gap());
    // Each burst's identity as its key, once: it finds the stored signal a burst extends, and is
    // stored with a new one.
    let keys: Vec<Option<uuid::Uuid>> = bursts
        .iter()
        .map(|b| crate::fold::burst::identity(&b.event).map(|i| i.key()))
        .collect();
    let targets = storage::events::extend_stored(
        &mut tx,
        &bursts,
        &keys,
        crate::fold::burst::burst_gap(),
        crate::fold::burst::max_burst_span(),
    )
    .await?;
    let fresh: Vec<(&crate::fold::burst::Burst, Option<uuid::Uuid>)> = bursts
        .iter()
        .zip(&keys)
        .zip(&targets)
        .filter(|(_, t)| t.is_none())
        .map(|((b, k), _)| (b, *k))
        .collect();
    let stored = storage::events::insert_bursts(&mut tx, &fresh).await?.len();
    refold::after_bursts(&mut tx, &catalog, window, &bursts).await?;
    tx.commit().await?;
    batch::count_stored(route, accepted, received - accepted);
    Ok(StoreOutcome {
        accepted,
        duplicates: received - accepted,
        stored,
        folded: accepted - stored,
        folded_not_retained,
    })
}

/// Of the signals before the retention horizon, the ids already folded into a failure of their
/// key or archived: re-sent, they are duplicates. A burst (signals `collapse` would merge) counts
/// as folded when any of its signals is, since the failure lists the signal that stood for it.
async fn folded_before_horizon(
    db: &PgPool,
    horizon: chrono::DateTime<chrono::Utc>,
    events: &[Event],
) -> Result<HashSet<uuid::Uuid>, sqlx::Error> {
    let old: Vec<Event> = events.iter().filter(|e| e.occurred_at < horizon).cloned().collect();
    if old.is_empty() {
        return Ok(HashSet::new());
    }
    let mut conn = db.acquire().await?;
    let mut found: HashSet<uuid::Uuid> = HashSet::new();
    let mut by_cluster: std::collections::BTreeMap<&str, Vec<&Event>> = std::collections::BTreeMap::new();
    for e in &old {
        by_cluster.entry(e.cluster.as_str()).or_default().push(e);
    }
    for (cluster, events) in by_cluster {
        // The key each would fold under: its job, else the job that ran on its node, else the node.
        let node_only: Vec<&&Event> = events
            .iter()
            .filter(|e| e.job_id.is_none() && e.node.is_some())
            .collect();
        let ids: Vec<uuid::Uuid> = node_only.iter().map(|e| e.id).collect();
        let nodes: Vec<&str> = node_only.iter().filter_map(|e| e.node.as_deref()).collect();
        let times: Vec<chrono::DateTime<chrono::Utc>> = node_only.iter().map(|e| e.occurred_at).collect();
        let attributed: std::collections::HashMap<uuid::Uuid, String> =
            storage::failures::attributed_jobs(&mut conn, cluster, &ids, &nodes, &times)
                .await?
                .into_iter()
                .map(|a| (a.id, a.job_id))
                .collect();
        let ids: Vec<uuid::Uuid> = events.iter().map(|e| e.id).collect();
        let keys: Vec<String> = events
            .iter()
            .map(|e| {
                let job = e.job_id.as_deref().or(attributed.get(&e.id).map(String::as_str));
                crate::fold::CorrelationKey::of(job, e.node.as_deref(), e.id).as_string()
            })
            .collect();
        let times: Vec<chrono::DateTime<chrono::Utc>> = events.iter().map(|e| e.occurred_at).collect();
        found.extend(storage::failures::already_folded(&mut conn, cluster, &ids, &keys, &times).await?);
    }
    if found.is_empty() {
        return Ok(found);
    }
    for group in crate::fold::burst::groups(&old, crate::fold::burst::burst_gap()) {
        if group.iter().any(|&i| found.contains(&old[i].id)) {
            found.extend(group.iter().map(|&i| old[i].id));
        }
    }
    Ok(found)
}

/// Months that end at or before this are dropped by the next retention pass (None: retention off).
fn retention_cutoff(now: chrono::DateTime<chrono::Utc>, retention_days: u32) -> Option<chrono::DateTime<chrono::Utc>> {
    (retention_days > 0).then(|| now - chrono::Duration::days(retention_days.into()))
}

/// The end of the UTC month of `t` (the upper bound of its partition).
fn month_end(t: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    let start = month_of(t);
    start.checked_add_months(chrono::Months::new(1)).unwrap_or(start)
}

/// The first instant of the UTC month of `t` (the partition it belongs to).
fn month_of(t: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    use chrono::{Datelike, TimeZone};
    chrono::Utc
        .with_ymd_and_hms(t.year(), t.month(), 1, 0, 0, 0)
        .single()
        .unwrap_or(t)
}

/// PostgreSQL text and jsonb cannot hold U+0000; a NUL from a sender must not turn a valid
/// signal into a 500.
fn scrub_nul(e: &mut Event) {
    fn scrub(s: &mut String) {
        if s.contains('\0') {
            *s = s.replace('\0', "\u{FFFD}");
        }
    }
    fn scrub_value(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) => scrub(s),
            serde_json::Value::Array(a) => a.iter_mut().for_each(scrub_value),
            serde_json::Value::Object(o) => {
                if o.keys().any(|k| k.contains('\0')) {
                    let old = std::mem::take(o);
                    o.extend(old.into_iter().map(|(k, v)| (k.replace('\0', "\u{FFFD}"), v)));
                }
                o.values_mut().for_each(scrub_value)
            }
            _ => {}
        }
    }
    if let Some(m) = &mut e.message {
        scrub(m);
    }
    e.attributes.values_mut().for_each(scrub_value);
    if e.attributes.keys().any(|k| k.contains('\0')) {
        let old = std::mem::take(&mut e.attributes);
        e.attributes
            .extend(old.into_iter().map(|(k, v)| (k.replace('\0', "\u{FFFD}"), v)));
    }
}
