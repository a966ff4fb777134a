//! The one write path for signals: shared by the HTTP handlers, `serve --demo` and the benchmark.

pub mod audit;
pub mod batch;
pub mod catalog;
pub mod inventory;
pub mod gpus;
pub mod jobs;
pub mod lifecycle;
pub mod locks;
pub mod nvsentinel;
pub mod rebuild;
pub mod refold;
pub mod rollups;
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
    /// counted and not stored twice.
    pub duplicates: usize,
    /// New rows of signals: accepted minus those folded into a burst.
    pub stored: usize,
    /// Accepted signals that repeated an identical one (same cluster, node, GPU, job, kind, code)
    /// within 60 s, in this request or already stored: they raise its `repeat_count`.
    pub folded: usize,
    /// Signals older than the retention horizon (`FAULTLINE_SIGNAL_RETENTION_DAYS`): their month
    /// was dropped, with its idempotency ledger, so they are not stored (nor counted as accepted).
    #[serde(default)]
    pub expired: usize,
}

/// The one write path for signals (`/v1/events`, `/v1/logs`, integrations): in one transaction,
/// claim the ids (idempotency), collapse identical signals into bursts, extend stored bursts of
/// the same identity, insert the rest and re-fold the failures they touch. A 2xx afterwards
/// means all of it is durable.
pub async fn store_events(
    db: &PgPool,
    catalog_cache: &CatalogCache,
    window: chrono::Duration,
    route: batch::Route,
    mut events: Vec<Event>,
) -> Result<StoreOutcome, sqlx::Error> {
    for e in &mut events {
        scrub_nul(e);
    }
    let received = events.len();
    let mut seen = HashSet::with_capacity(events.len());
    events.retain(|e| seen.insert(e.id));
    // Partitions for the batch's months, before the transaction (creating one waits for no writer).
    let mut months: Vec<_> = events.iter().map(|e| month_of(e.occurred_at)).collect();
    months.sort();
    months.dedup();
    let horizon = storage::partitions::ensure_months(db, &months).await?;
    let before = events.len();
    if let Some(h) = horizon {
        events.retain(|e| e.occurred_at >= h);
    }
    let expired = before - events.len();
    let mut tx = db.begin().await?;
    let catalog = crate::ingest::catalog::lock_shared(&mut tx, catalog_cache).await?;
    let keys: Vec<(&str, chrono::DateTime<chrono::Utc>, uuid::Uuid)> = events
        .iter()
        .map(|e| (e.cluster.as_str(), e.occurred_at, e.id))
        .collect();
    let new_ids: HashSet<uuid::Uuid> = storage::events::claim_ids(&mut tx, &keys).await?.into_iter().collect();
    events.retain(|e| new_ids.contains(&e.id));
    let accepted = events.len();
    // Two batches extending the same burst must not both insert it: serialise per node.
    let mut sources: Vec<String> = events
        .iter()
        .filter_map(|e| e.node.as_ref().map(|n| format!("{}\n{n}", e.cluster)))
        .collect();
    sources.sort();
    sources.dedup();
    locks::lock(&mut tx, LockSpace::BurstSources, &sources).await?;
    let bursts = crate::fold::burst::collapse(events, crate::fold::burst::burst_gap());
    let targets = storage::events::extend_stored(
        &mut tx,
        &bursts,
        crate::fold::burst::burst_gap(),
        crate::fold::burst::max_burst_span(),
    )
    .await?;
    let fresh: Vec<&crate::fold::burst::Burst> = bursts
        .iter()
        .zip(&targets)
        .filter(|(_, t)| t.is_none())
        .map(|(b, _)| b)
        .collect();
    let stored = storage::events::insert_bursts(&mut tx, &fresh).await?.len();
    refold::after_bursts(&mut tx, &catalog, window, &bursts).await?;
    tx.commit().await?;
    batch::count_stored(route, accepted, received - accepted - expired);
    Ok(StoreOutcome {
        accepted,
        duplicates: received - accepted - expired,
        stored,
        folded: accepted - stored,
        expired,
    })
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
