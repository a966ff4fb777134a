//! Keeping the failures equal to the fold of the stored signals: after a batch (the keys it
//! touched), after a job record changed (its job and nodes over its runs) and after a catalog edit
//! (everything). Runs inside the caller's transaction, so signals and failures commit together.
//! A fixed number of statements per call, whatever the number of keys.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::locks::{self, LockSpace};
use super::rollups;
use crate::classify::Catalog;
use crate::domain::event::Event;
use crate::domain::gpu::generation_of;
use crate::domain::taxonomy::{Category, Component, RootCause, Symptom};
use crate::fold::burst::Burst;
use crate::fold::{CorrelationKey, FailureDraft, Signal, fold, participates};
use crate::storage::failures::{self as store, FailureColumns, SignalRow};
use crate::storage::rollups as rollups_store;

/// Stands in for "still running" in ranges (chrono has no infinity); far from overflow when widened.
fn open_end() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("9999-01-01T00:00:00Z")
        .expect("valid timestamp")
        .with_timezone(&Utc)
}

/// The time range of each (cluster, key) to re-fold.
pub type Touched = BTreeMap<(String, CorrelationKey), (DateTime<Utc>, DateTime<Utc>)>;

/// Adds `[start, end]` to the range of (cluster, key).
pub fn touch(touched: &mut Touched, cluster: &str, key: CorrelationKey, start: DateTime<Utc>, end: DateTime<Utc>) {
    let span = touched.entry((cluster.to_string(), key)).or_insert((start, end));
    span.0 = span.0.min(start);
    span.1 = span.1.max(end);
}

/// What a job record changes in the fold, for a job as it was and as it is now: its key over its
/// run, and the node keys of its nodes over its run (their node-only signals move between the node
/// and the job).
pub fn touch_job(
    touched: &mut Touched,
    cluster: &str,
    job_id: &str,
    nodes: &[String],
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
) {
    let end = end.unwrap_or_else(open_end);
    touch(touched, cluster, CorrelationKey::Job(job_id.to_string()), start, end);
    for n in nodes {
        touch(touched, cluster, CorrelationKey::Node(n.clone()), start, end);
    }
}

/// Re-folds the keys that newly stored bursts touch, each over the burst's whole span.
pub async fn after_bursts(
    conn: &mut PgConnection,
    catalog: &Catalog,
    window: Duration,
    bursts: &[Burst],
) -> Result<usize, sqlx::Error> {
    let bursts: Vec<&Burst> = bursts
        .iter()
        .filter(|b| participates(&b.event.kind, b.event.symptom))
        .collect();
    // Node-only signals fold under the job that ran on their node: one statement for the batch.
    let node_only: Vec<&Event> = bursts
        .iter()
        .map(|b| &b.event)
        .filter(|e| e.job_id.is_none() && e.node.is_some())
        .collect();
    let mut attributed: BTreeMap<Uuid, String> = BTreeMap::new();
    let mut by_cluster: BTreeMap<&str, Vec<&Event>> = BTreeMap::new();
    for e in node_only {
        by_cluster.entry(e.cluster.as_str()).or_default().push(e);
    }
    for (cluster, events) in by_cluster {
        let ids: Vec<Uuid> = events.iter().map(|e| e.id).collect();
        let nodes: Vec<&str> = events.iter().filter_map(|e| e.node.as_deref()).collect();
        let times: Vec<DateTime<Utc>> = events.iter().map(|e| e.occurred_at).collect();
        for a in store::attributed_jobs(conn, cluster, &ids, &nodes, &times).await? {
            attributed.insert(a.id, a.job_id);
        }
    }
    let mut touched = Touched::new();
    for b in &bursts {
        let e = &b.event;
        let job = e.job_id.as_deref().or(attributed.get(&e.id).map(String::as_str));
        touch(
            &mut touched,
            &e.cluster,
            CorrelationKey::of(job, e.node.as_deref(), e.id),
            e.occurred_at,
            b.last_at.max(e.occurred_at),
        );
    }
    refold(conn, catalog, window, &touched).await
}

/// Re-folds the failures of each (cluster, key) whose sessions come within the window of its range.
pub async fn refold(
    conn: &mut PgConnection,
    catalog: &Catalog,
    window: Duration,
    touched: &Touched,
) -> Result<usize, sqlx::Error> {
    if touched.is_empty() {
        return Ok(0);
    }
    // Two batches re-folding the same key take turns: a bounded set of lock stripes, in order.
    let lock_keys: Vec<String> = touched
        .keys()
        .filter(|(_, k)| k.alone().is_none())
        .map(|(c, k)| format!("{c}\n{}", k.as_string()))
        .collect();
    locks::lock(conn, LockSpace::FoldKeys, &lock_keys).await?;
    // One cluster at a time: each statement then reads and writes one cluster's rows (on Citus,
    // one shard group). `touched` is ordered by cluster, so each cluster's keys are adjacent.
    let mut formed = 0;
    let entries: Vec<TouchedKey<'_>> = touched.iter().collect();
    for group in entries.chunk_by(|a, b| a.0.0 == b.0.0) {
        formed += refold_cluster(conn, catalog, window, &group[0].0.0, group).await?;
    }
    Ok(formed)
}

/// A (cluster, key) a batch touched, with the span its signals reach.
type TouchedKey<'a> = (&'a (String, CorrelationKey), &'a (DateTime<Utc>, DateTime<Utc>));

/// [`refold`] of the keys of one cluster.
async fn refold_cluster(
    conn: &mut PgConnection,
    catalog: &Catalog,
    window: Duration,
    cluster: &str,
    touched: &[TouchedKey<'_>],
) -> Result<usize, sqlx::Error> {
    let keys: Vec<String> = touched.iter().map(|((_, k), _)| k.as_string()).collect();
    let probe_start: Vec<DateTime<Utc>> = touched.iter().map(|(_, (min, _))| *min - window).collect();
    let probe_end: Vec<DateTime<Utc>> = touched.iter().map(|(_, (_, max))| *max + window).collect();
    // Stored failures within a window of the new signals are re-folded with them: widen each key's
    // range to cover them, then delete them.
    let mut ranges: Vec<(DateTime<Utc>, DateTime<Utc>)> = touched.iter().map(|(_, r)| **r).collect();
    for span in store::failure_spans(conn, cluster, &keys, &probe_start, &probe_end).await? {
        let r = &mut ranges[(span.idx - 1) as usize];
        r.0 = r.0.min(span.first_at);
        r.1 = r.1.max(span.last_at);
    }
    let starts: Vec<DateTime<Utc>> = ranges.iter().map(|r| r.0).collect();
    let ends: Vec<DateTime<Utc>> = ranges.iter().map(|r| r.1).collect();
    // What the re-folded failures counted in the rollups, so the rollups move by the difference.
    let counted = rollups_store::facts_in_ranges(conn, cluster, &keys, &starts, &ends).await?;
    // Failures older than the retention horizon may have lost signals' rows: they are folded
    // again in place of those signals, so a late or re-sent old signal joins them.
    let frozen = store::frozen_in_ranges(
        conn,
        cluster,
        &keys,
        &starts,
        &ends,
        crate::fold::burst::max_burst_span(),
    )
    .await?;
    store::delete_in_ranges(conn, cluster, &keys, &starts, &ends).await?;
    let jobs: Vec<Option<&str>> = touched.iter().map(|((_, k), _)| k.job()).collect();
    let nodes: Vec<Option<&str>> = touched.iter().map(|((_, k), _)| k.node()).collect();
    let alone: Vec<Option<Uuid>> = touched.iter().map(|((_, k), _)| k.alone()).collect();
    let rows = store::signals_of_keys(
        conn,
        cluster,
        &jobs,
        &nodes,
        &starts,
        &ends,
        &alone,
        crate::fold::burst::max_burst_span(),
    )
    .await?;
    let mut grouped: BTreeMap<(String, CorrelationKey), Vec<Signal>> = BTreeMap::new();
    for row in rows {
        let key = (row.cluster.clone(), key_of(&row));
        grouped.entry(key).or_default().push(signal(row, catalog));
    }
    for f in frozen {
        if f.absent_ids.is_empty() {
            continue;
        }
        let key = touched[(f.idx - 1) as usize].0.1.clone();
        grouped
            .entry((cluster.to_string(), key))
            .or_default()
            .push(summary(f, catalog));
    }
    let drafts: Vec<Folded> = grouped
        .into_iter()
        .flat_map(|((cluster, key), signals)| fold_key(cluster, key, signals, window))
        .collect();
    for chunk in drafts.chunks(5_000) {
        store::insert(conn, columns(chunk), catalog.version).await?;
    }
    // The same selection now holds exactly the new failures (the old ones overlapping it are gone).
    let counts = rollups_store::facts_in_ranges(conn, cluster, &keys, &starts, &ends).await?;
    rollups::Delta::between(&counted, &counts).apply(conn).await?;
    Ok(drafts.len())
}

/// A failure to store: its cluster, key, draft and its signals' (kind, code) column.
type Folded = (String, CorrelationKey, FailureDraft, String);

/// Folds one key's signals, keeping each signal's (kind, code) for its failure: the failure
/// answers the signal-kind analysis after retention dropped the signal rows.
fn fold_key(cluster: String, key: CorrelationKey, signals: Vec<Signal>, window: Duration) -> Vec<Folded> {
    let kinds: std::collections::HashMap<Uuid, String> = signals
        .iter()
        .flat_map(|s| match &s.summary {
            Some(m) => m
                .signal_ids
                .iter()
                .copied()
                .zip(m.signal_kinds.iter().cloned())
                .collect(),
            None => vec![(
                s.id,
                format!("{}\u{1f}{}", s.kind, s.code.map(|c| c.to_string()).unwrap_or_default()),
            )],
        })
        .collect();
    fold(&cluster, &key, signals, window)
        .into_iter()
        .map(|d| {
            let k = d
                .signal_ids
                .iter()
                .filter_map(|id| kinds.get(id).map(String::as_str))
                .collect::<Vec<_>>()
                .join("\u{1e}");
            (cluster.clone(), key.clone(), d, k)
        })
        .collect()
}

fn key_of(row: &SignalRow) -> CorrelationKey {
    CorrelationKey::of(
        row.job_id.as_deref().or(row.attributed_job.as_deref()),
        row.node.as_deref(),
        row.id,
    )
}

/// A stored signal, classified with `catalog` (an explicit root cause from the sender wins).
fn signal(row: SignalRow, catalog: &Catalog) -> Signal {
    let explicit = match (
        row.rc_category.as_deref().and_then(Category::parse),
        row.rc_component.as_deref().and_then(Component::parse),
    ) {
        (Some(category), Some(component)) => RootCause::new(category, component).ok(),
        _ => None,
    };
    let classification = catalog.classify(&row.kind, row.code, row.message.as_deref(), explicit);
    Signal {
        id: row.id,
        occurred_at: row.occurred_at,
        last_at: row.last_at,
        node: row.node,
        gpu_model: row.gpu_model,
        gpu: crate::fold::GpuRef {
            index: row.gpu_index,
            uuid: row.gpu_uuid,
            bus: row.gpu_bus,
        },
        kind: row.kind,
        code: row.code,
        symptom: row.symptom.as_deref().and_then(Symptom::parse),
        classification,
        summary: None,
    }
}

/// A failure past the retention horizon as the fold's stand-in for its signals whose rows are gone:
/// its span, its root and the classification it was given (it is not classified again: the
/// messages are gone). Only whether the root kind is secondary is read from `catalog`, as the
/// failure does not keep it.
fn summary(f: store::FrozenFailure, catalog: &Catalog) -> Signal {
    let holds_root = f.absent_ids.contains(&f.root_signal);
    let root_cause = match (Category::parse(&f.category), Component::parse(&f.component)) {
        (Some(category), Some(component)) => RootCause::new(category, component).ok(),
        _ => None,
    };
    let mut classification = catalog.classify(&f.root_kind, f.root_code, None, None);
    if let Some(rc) = root_cause {
        classification.root_cause = rc;
    }
    classification.severity = crate::classify::Severity::parse(&f.severity).unwrap_or(classification.severity);
    classification.transient = f.transient;
    classification.action = f.action;
    classification.rule_id = f.rule_id;
    classification.explanation = f.explanation;
    classification.explicit = f.explicit_cause;
    Signal {
        id: if holds_root { f.root_signal } else { f.id },
        occurred_at: f.first_at,
        last_at: f.last_at,
        node: f.root_node,
        gpu_model: None,
        gpu: crate::fold::GpuRef {
            index: f.root_gpu_index,
            uuid: f.root_gpu_uuid,
            bus: f.root_gpu_bus,
        },
        kind: f.root_kind,
        code: f.root_code,
        symptom: f.symptom.as_deref().and_then(Symptom::parse),
        classification,
        summary: Some(Box::new(crate::fold::Summary {
            signal_ids: f.absent_ids,
            signal_kinds: f.absent_kinds,
            nodes: f.nodes,
            generation: f.generation,
            holds_root,
        })),
    }
}

fn columns(drafts: &[Folded]) -> FailureColumns {
    let mut c = FailureColumns::default();
    for (cluster, key, d, kinds) in drafts {
        c.signal_kinds.push(kinds.clone());
        c.id.push(d.id);
        c.cluster.push(cluster.clone());
        c.key.push(key.as_string());
        c.job.push(key.job().map(str::to_string));
        c.first.push(d.first_at);
        c.last.push(d.last_at);
        c.nodes.push(d.nodes.join("\u{1f}"));
        c.signals
            .push(d.signal_ids.iter().map(Uuid::to_string).collect::<Vec<_>>().join(","));
        c.count.push(d.signal_ids.len() as i32);
        c.root.push(d.root_signal);
        c.root_node.push(d.root_node.clone());
        c.root_gpu_index.push(d.root_gpu.index);
        c.root_gpu_uuid.push(d.root_gpu.uuid.clone());
        c.root_gpu_bus.push(d.root_gpu.bus.clone());
        c.root_kind.push(d.root_kind.clone());
        c.root_code.push(d.root_code);
        c.generation.push(d.root_generation.clone().unwrap_or_else(|| {
            d.root_gpu_model
                .as_deref()
                .map_or("unknown", |m| generation_of(m).as_str())
                .to_string()
        }));
        c.category.push(d.classification.root_cause.category.as_str());
        c.component.push(d.classification.root_cause.component.as_str());
        c.severity.push(d.classification.severity.as_str());
        c.transient.push(d.classification.transient);
        c.action.push(d.classification.action.clone());
        c.rule.push(d.classification.rule_id.clone());
        c.explanation.push(d.classification.explanation.clone());
        c.explicit.push(d.classification.explicit);
        c.symptom.push(d.symptom.map(|s| s.as_str()));
    }
    c
}
