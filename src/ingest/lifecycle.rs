//! Writing what people record after a failure: the failure lifecycle (`PATCH /v1/failures/{id}`:
//! the new state, its history entry, its audit row and the rollups' move in one transaction, under
//! the failure's lock) and node drains and returns (`POST /v1/nodes/{cluster}/{hostname}/state`).
//! Shared by the HTTP handlers and `serve --demo`.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};
use utoipa::ToSchema;
use uuid::Uuid;

use super::audit;
use crate::domain::audit::{Actor, AuditAction};
use crate::domain::event::{FieldError, optional_text};
use crate::domain::lifecycle::{self, FieldChange, Lifecycle, LifecyclePatch};
use crate::ingest::batch::{RejectReason, RejectedItem};
use crate::ingest::rollups;
use crate::storage::lifecycle::{self as store, FailureAnchor, LifecycleColumns, LifecycleRow, NewTransition};

#[derive(Debug)]
pub enum PatchError {
    NotFound,
    /// The failure's cluster is outside the caller's write scope.
    OutOfScope(String),
    Invalid(FieldError),
    Database(sqlx::Error),
}

impl From<sqlx::Error> for PatchError {
    fn from(e: sqlx::Error) -> Self {
        PatchError::Database(e)
    }
}

pub struct Patched {
    pub failure: FailureAnchor,
    pub lifecycle: Option<LifecycleRow>,
}

/// A re-fold can replace a failure (new id, wider span) between reading it and locking its key:
/// the write starts over with what is stored then, at most this many times.
const ATTEMPTS: usize = 3;

/// Applies `patch` to failure `id` for `actor`, who may write the clusters `may_write` allows.
/// The same path as [`import`] with one item.
pub async fn patch(
    db: &PgPool,
    actor: &Actor,
    may_write: impl Fn(&str) -> bool,
    id: Uuid,
    patch: &LifecyclePatch,
    now: DateTime<Utc>,
) -> Result<Patched, PatchError> {
    for attempt in 1..=ATTEMPTS {
        let mut tx = db.begin().await?;
        store::plan_by_index(&mut tx).await?;
        let f = store::failure_anchor(&mut tx, id).await?.ok_or(PatchError::NotFound)?;
        if !may_write(&f.cluster) {
            return Err(PatchError::OutOfScope(f.cluster));
        }
        rollups::lock_for_lifecycle_write(&mut tx, &[session_key(&f)]).await?;
        let now_stored = store::failure_anchor(&mut tx, id).await?;
        if now_stored.as_ref() != Some(&f) && attempt < ATTEMPTS {
            continue;
        }
        let f = now_stored.ok_or(PatchError::NotFound)?;
        let target = Target {
            index: 0,
            anchor: f.clone(),
            patch,
        };
        let (mut outcomes, audits) = write_cluster(&mut tx, &actor.name, &f.cluster, &[&target], now).await?;
        record_audits(&mut tx, actor, audits).await?;
        let done = match outcomes.pop().expect("one outcome per item") {
            Ok(done) => done,
            Err((_, e)) => return Err(PatchError::Invalid(e)),
        };
        let saved = store::by_lifecycle_id(&mut tx, &f.cluster, done.lifecycle_id).await?;
        tx.commit().await?;
        return Ok(Patched {
            failure: f,
            lifecycle: saved,
        });
    }
    unreachable!("the last attempt returns")
}

/// How an imported post-mortem names its failure.
#[derive(Debug, Clone)]
pub enum FailureRef {
    Id(Uuid),
    /// The failure of `cluster` whose first signal is in `[first_at, first_at + 1 s)`, of the job
    /// when one is named, else involving the node (as a ticket or the simulator describes it).
    Described {
        cluster: String,
        first_at: DateTime<Utc>,
        job_id: Option<String>,
        node: Option<String>,
    },
}

/// One post-mortem of an import: its position in the request, its failure and its patch.
#[derive(Debug, Clone)]
pub struct ImportItem {
    pub index: usize,
    pub failure: FailureRef,
    pub patch: LifecyclePatch,
}

/// An item applied: the failure it named, its lifecycle, and whether anything was written
/// (`false`: the lifecycle already said so, as for a re-sent import).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ImportedItem {
    /// Zero-based position in the request.
    pub index: usize,
    pub failure_id: Uuid,
    pub lifecycle_id: Uuid,
    pub changed: bool,
}

#[derive(Debug, Default)]
pub struct ImportOutcome {
    pub imported: Vec<ImportedItem>,
    pub rejected: Vec<RejectedItem>,
}

/// Applies post-mortems in bulk, in one transaction: the same checks, lifecycle rows, history
/// entries, audit rows and rollup moves as one `patch` per item in order, in a bounded number of
/// statements (two to find the failures, then per cluster: one read of the lifecycles in force, and
/// when anything changes two reads of the failures' facts, one upsert of the lifecycles, one insert
/// of history entries and the rollup upserts; then one insert of the audit rows, in item order). An item that names no failure,
/// a cluster the caller may not write, or an invalid value is rejected with its index and reason;
/// the others are applied. Items naming the same failure apply in order.
pub async fn import(
    db: &PgPool,
    actor: &Actor,
    may_write: impl Fn(&str) -> bool,
    items: &[ImportItem],
    now: DateTime<Utc>,
) -> Result<ImportOutcome, sqlx::Error> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut tx = db.begin().await?;
        store::plan_by_index(&mut tx).await?;
        let (targets, mut rejected) = resolve(&mut tx, &may_write, items).await?;
        let mut keys: Vec<String> = targets.iter().map(|t| session_key(&t.anchor)).collect();
        keys.sort();
        keys.dedup();
        rollups::lock_for_lifecycle_write(&mut tx, &keys).await?;
        // Under the locks, the failures are as read unless a re-fold replaced one meanwhile.
        let mut ids: Vec<Uuid> = targets.iter().map(|t| t.anchor.id).collect();
        ids.sort();
        ids.dedup();
        let stored: HashMap<Uuid, FailureAnchor> = store::anchors_by_id(&mut tx, &ids)
            .await?
            .into_iter()
            .map(|f| (f.id, f))
            .collect();
        if targets.iter().any(|t| stored.get(&t.anchor.id) != Some(&t.anchor)) && attempt < ATTEMPTS {
            continue;
        }
        // The last attempt goes on with the failures as stored now (their keys, hence the locks,
        // are the same); one that a re-fold replaced again meanwhile is not found.
        let targets: Vec<Target> = targets
            .into_iter()
            .filter_map(|t| match stored.get(&t.anchor.id) {
                Some(f) => Some(Target { anchor: f.clone(), ..t }),
                None => {
                    rejected.push(RejectedItem {
                        index: t.index,
                        reason: RejectReason::NotFound,
                        field: None,
                        message: format!("failure {} was replaced by a re-fold; send the item again", t.anchor.id),
                    });
                    None
                }
            })
            .collect();
        let mut by_cluster: BTreeMap<&str, Vec<&Target>> = BTreeMap::new();
        for t in &targets {
            by_cluster.entry(t.anchor.cluster.as_str()).or_default().push(t);
        }
        let (mut imported, mut audits) = (Vec::new(), Vec::new());
        for (cluster, targets) in by_cluster {
            let (outcomes, cluster_audits) = write_cluster(&mut tx, &actor.name, cluster, &targets, now).await?;
            audits.extend(cluster_audits);
            for outcome in outcomes {
                match outcome {
                    Ok(item) => imported.push(item),
                    Err((index, e)) => rejected.push(RejectedItem {
                        index,
                        reason: RejectReason::InvalidField,
                        field: e.field,
                        message: e.message,
                    }),
                }
            }
        }
        record_audits(&mut tx, actor, audits).await?;
        tx.commit().await?;
        imported.sort_by_key(|i| i.index);
        rejected.sort_by_key(|r| r.index);
        return Ok(ImportOutcome { imported, rejected });
    }
}

/// A post-mortem with the failure it applies to.
struct Target<'a> {
    index: usize,
    anchor: FailureAnchor,
    patch: &'a LifecyclePatch,
}

fn session_key(f: &FailureAnchor) -> String {
    format!("{}\n{}", f.cluster, f.correlation_key)
}

/// Finds each item's failure (one statement for the ids, one per cluster for the descriptions);
/// rejects those that name none or one of a cluster the caller may not write.
async fn resolve<'a>(
    conn: &mut PgConnection,
    may_write: &impl Fn(&str) -> bool,
    items: &'a [ImportItem],
) -> Result<(Vec<Target<'a>>, Vec<RejectedItem>), sqlx::Error> {
    let mut ids: Vec<Uuid> = items
        .iter()
        .filter_map(|i| match i.failure {
            FailureRef::Id(id) => Some(id),
            FailureRef::Described { .. } => None,
        })
        .collect();
    ids.sort();
    ids.dedup();
    let by_id: HashMap<Uuid, FailureAnchor> = if ids.is_empty() {
        HashMap::new()
    } else {
        store::anchors_by_id(conn, &ids)
            .await?
            .into_iter()
            .map(|f| (f.id, f))
            .collect()
    };
    // Descriptions per cluster: (item position, first_at, job, node).
    let mut described: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (pos, item) in items.iter().enumerate() {
        if let FailureRef::Described { cluster, .. } = &item.failure {
            described.entry(cluster.as_str()).or_default().push(pos);
        }
    }
    let mut found: HashMap<usize, FailureAnchor> = HashMap::new();
    for (cluster, positions) in described {
        if !may_write(cluster) {
            continue;
        }
        let (mut first_ats, mut jobs, mut nodes) = (Vec::new(), Vec::new(), Vec::new());
        for &pos in &positions {
            if let FailureRef::Described {
                first_at, job_id, node, ..
            } = &items[pos].failure
            {
                first_ats.push(*first_at);
                jobs.push(job_id.clone());
                nodes.push(node.clone());
            }
        }
        for f in store::anchors_found(conn, cluster, &first_ats, &jobs, &nodes).await? {
            found.insert(positions[(f.n - 1) as usize], f.anchor());
        }
    }
    let mut targets = Vec::new();
    let mut rejected = Vec::new();
    for (pos, item) in items.iter().enumerate() {
        let reject = |reason, field: Option<&str>, message: String| RejectedItem {
            index: item.index,
            reason,
            field: field.map(str::to_string),
            message,
        };
        let anchor = match &item.failure {
            FailureRef::Id(id) => by_id
                .get(id)
                .cloned()
                .ok_or_else(|| (Some("id"), format!("no failure {id}"))),
            FailureRef::Described {
                cluster,
                first_at,
                job_id,
                node,
            } => found.remove(&pos).ok_or_else(|| {
                let on = match (job_id, node) {
                    (Some(j), _) => format!("of job '{j}'"),
                    (None, Some(n)) => format!("on node '{n}'"),
                    (None, None) => String::new(),
                };
                (
                    Some("first_at"),
                    format!("no failure of cluster '{cluster}' {on} first seen at {first_at}"),
                )
            }),
        };
        match anchor {
            Ok(f) if !may_write(&f.cluster) => rejected.push(reject(
                RejectReason::ForbiddenCluster,
                None,
                format!("this token may not write cluster '{}'", f.cluster),
            )),
            Ok(f) => targets.push(Target {
                index: item.index,
                anchor: f,
                patch: &item.patch,
            }),
            Err((field, message)) => {
                let forbidden = matches!(&item.failure, FailureRef::Described { cluster, .. } if !may_write(cluster));
                rejected.push(if forbidden {
                    reject(
                        RejectReason::ForbiddenCluster,
                        Some("cluster"),
                        "this token may not write this cluster".to_string(),
                    )
                } else {
                    reject(RejectReason::NotFound, field, message)
                });
            }
        }
    }
    Ok((targets, rejected))
}

/// What one lifecycle becomes in a write.
struct State {
    lifecycle_id: Uuid,
    lifecycle: Lifecycle,
    exists: bool,
    dirty: bool,
}

/// An audit row to write: (item index, target, details).
type AuditEntry = (usize, String, serde_json::Value);

/// Writes the audit rows of a request in item order, whatever their clusters (one statement).
async fn record_audits(conn: &mut PgConnection, actor: &Actor, mut rows: Vec<AuditEntry>) -> Result<(), sqlx::Error> {
    rows.sort_by_key(|r| r.0);
    let (targets, details): (Vec<String>, Vec<serde_json::Value>) = rows.into_iter().map(|(_, t, d)| (t, d)).unzip();
    audit::record_many(conn, actor, AuditAction::FailureLifecycle, &targets, &details).await
}

/// Applies the post-mortems of failures of `cluster` (their sessions locked), in order: each is
/// applied to the lifecycle as the ones before left it. Returns each item's outcome (or its index
/// and the invalid field), and the audit rows to write.
#[allow(clippy::type_complexity)]
async fn write_cluster(
    conn: &mut PgConnection,
    by: &str,
    cluster: &str,
    targets: &[&Target<'_>],
    now: DateTime<Utc>,
) -> Result<(Vec<Result<ImportedItem, (usize, FieldError)>>, Vec<AuditEntry>), sqlx::Error> {
    // The distinct failures, and the lifecycle in force in each one's span.
    let mut failures: Vec<&FailureAnchor> = Vec::new();
    let mut pos: HashMap<Uuid, usize> = HashMap::new();
    for t in targets {
        pos.entry(t.anchor.id).or_insert_with(|| {
            failures.push(&t.anchor);
            failures.len() - 1
        });
    }
    let keys: Vec<String> = failures.iter().map(|f| f.correlation_key.clone()).collect();
    let starts: Vec<DateTime<Utc>> = failures.iter().map(|f| f.first_at).collect();
    let ends: Vec<DateTime<Utc>> = failures.iter().map(|f| f.last_at).collect();
    let mut states: Vec<State> = failures
        .iter()
        .map(|f| State {
            lifecycle_id: f.id,
            lifecycle: Lifecycle::default(),
            exists: false,
            dirty: false,
        })
        .collect();
    for r in store::in_force_for_spans(conn, cluster, &keys, &starts, &ends).await? {
        let s = &mut states[(r.n - 1) as usize];
        let row = r.row();
        s.lifecycle_id = row.failure_id;
        s.lifecycle = row.lifecycle();
        s.exists = true;
    }
    let mut out = Vec::with_capacity(targets.len());
    let (mut history_ids, mut history) = (Vec::new(), Vec::new());
    let mut audits = Vec::new();
    for t in targets {
        let s = &mut states[pos[&t.anchor.id]];
        let (after, changes) = match lifecycle::apply(&s.lifecycle, t.patch, t.anchor.first_at, now) {
            Ok(v) => v,
            Err(e) => {
                out.push(Err((t.index, e)));
                continue;
            }
        };
        // As one PATCH: a change, or the first patch of the failure (even one that sets nothing),
        // is written and audited; a patch that changes nothing writes nothing.
        let write = !changes.is_empty() || !s.exists;
        if write {
            history_ids.push(s.lifecycle_id);
            history.push(changes_json(&changes));
            audits.push((
                t.index,
                t.anchor.id.to_string(),
                audit_details(&t.anchor, s.lifecycle_id, &changes),
            ));
            s.lifecycle = after;
            s.exists = true;
            s.dirty = true;
        }
        out.push(Ok(ImportedItem {
            index: t.index,
            failure_id: t.anchor.id,
            lifecycle_id: s.lifecycle_id,
            changed: write,
        }));
    }
    let mut dirty: Vec<(Uuid, usize)> = states
        .iter()
        .enumerate()
        .filter(|(_, s)| s.dirty)
        .map(|(i, s)| (s.lifecycle_id, i))
        .collect();
    if dirty.is_empty() {
        return Ok((out, audits));
    }
    dirty.sort();
    let mut ids: Vec<Uuid> = dirty.iter().map(|&(_, i)| failures[i].id).collect();
    ids.sort();
    // A post-mortem cause changes what the failure counts under: the rollups move with it.
    let before = rollups::facts_of_failures(conn, cluster, &ids).await?;
    let mut columns = LifecycleColumns::default();
    for &(id, i) in &dirty {
        columns.push(id, failures[i], &states[i].lifecycle);
    }
    store::save_many(conn, cluster, &columns, by).await?;
    store::insert_changes(conn, cluster, &history_ids, &history, by).await?;
    let after = rollups::facts_of_failures(conn, cluster, &ids).await?;
    rollups::Delta::between(&before, &after).apply(conn).await?;
    Ok((out, audits))
}

/// A history entry: each field's `{"from", "to"}`.
fn changes_json(changes: &[FieldChange]) -> serde_json::Value {
    serde_json::Value::Object(
        changes
            .iter()
            .map(|c| (c.field.to_string(), serde_json::json!({"from": c.from, "to": c.to})))
            .collect(),
    )
}

/// The audit row of a patch: the failure's cluster, its lifecycle id and each field's
/// `{"from", "to"}` (the same as its history entry).
fn audit_details(f: &FailureAnchor, lifecycle_id: Uuid, changes: &[FieldChange]) -> serde_json::Value {
    serde_json::json!({"cluster": f.cluster, "lifecycle_id": lifecycle_id, "changes": changes_json(changes)})
}

#[derive(Debug)]
pub enum WriteError {
    /// No failure with the id, or no node with the name in the inventory.
    NotFound,
    /// The caller may not write this cluster (named).
    Forbidden(String),
    Invalid(FieldError),
    Db(sqlx::Error),
}

impl From<sqlx::Error> for WriteError {
    fn from(e: sqlx::Error) -> Self {
        WriteError::Db(e)
    }
}

/// A drain (`drained`) or return to service of a node, as received.
pub struct Transition<'a> {
    pub cluster: &'a str,
    pub hostname: &'a str,
    pub drained: bool,
    /// Default: now.
    pub at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    pub failure_id: Option<Uuid>,
    pub by: &'a str,
}

/// Records a node's transition after checking it (the node is in the inventory, the time at most
/// 24 h ahead, the reason valid). Returns the node's GPUs and the time recorded.
pub async fn record_transition(db: &PgPool, t: Transition<'_>) -> Result<(i32, DateTime<Utc>), WriteError> {
    let gpus = store::node_gpus(db, t.cluster, t.hostname)
        .await?
        .ok_or(WriteError::NotFound)?;
    let now = Utc::now();
    let at = t.at.unwrap_or(now);
    if at > now + chrono::Duration::hours(24) {
        return Err(WriteError::Invalid(FieldError::new(
            "at",
            format!("{at} is more than 24 h in the future"),
        )));
    }
    let reason = optional_text("reason", t.reason).map_err(WriteError::Invalid)?;
    store::insert_transition(
        db,
        &NewTransition {
            cluster: t.cluster,
            hostname: t.hostname,
            drained: t.drained,
            at,
            reason: reason.as_deref(),
            failure_id: t.failure_id,
            by: t.by,
        },
    )
    .await?;
    Ok((gpus, at))
}
