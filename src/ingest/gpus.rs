//! Writing GPU parts: a node's reported GPU set diffed against the open placements, a bulk import
//! of history, and an admin's removal of a part. Each call is one transaction; concurrent writers
//! of the same parts or nodes serialise on lock stripes.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use super::locks::{self, LockSpace};
use crate::domain::audit::{Actor, AuditAction};
use crate::domain::part::{Closing, NodeGpus, RemovalReason, plan_inventory};
use crate::storage;
use crate::storage::gpus::{PartRow, PlacementRow, RemovalRow};

/// What applying node reports did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct InventoryOutcome {
    /// Placements opened (a part appeared in a slot).
    pub opened: usize,
    /// Placements closed (a part left its slot: absent, moved or reidentified).
    pub closed: usize,
    /// Parts whose facts (model, VBIOS, driver...) were written because they are new or changed.
    pub parts_written: usize,
    /// GPUs ignored because their part was placed after the report's time (a stale report).
    pub stale: usize,
}

/// Applies node reports: closes what left, opens what appeared, records the parts' facts. A
/// report that changes nothing writes nothing.
pub async fn apply_inventory(db: &PgPool, reports: &[NodeGpus]) -> Result<InventoryOutcome, sqlx::Error> {
    let mut tx = db.begin().await?;
    let mut keys: Vec<String> = reports
        .iter()
        .map(|r| format!("{}\n{}", r.cluster, r.hostname))
        .collect();
    keys.extend(reports.iter().flat_map(|r| r.gpus.iter().map(|g| g.part.clone())));
    locks::lock(&mut tx, LockSpace::GpuParts, &keys).await?;

    let mut hosts_by_cluster: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for r in reports {
        hosts_by_cluster.entry(&r.cluster).or_default().push(r.hostname.clone());
    }
    let mut open = Vec::new();
    for (cluster, hosts) in &hosts_by_cluster {
        open.extend(storage::gpus::open_on_nodes(&mut tx, cluster, hosts).await?);
    }
    let parts: Vec<String> = reports
        .iter()
        .flat_map(|r| r.gpus.iter().map(|g| g.part.clone()))
        .collect();
    for o in storage::gpus::open_of_parts(&mut tx, &parts).await? {
        if !open.contains(&o) {
            open.push(o);
        }
    }
    let plan = plan_inventory(reports, &open);
    let closed = close_by_cluster(&mut tx, &plan.close).await?;
    let opened = storage::gpus::upsert_placements(
        &mut tx,
        &plan
            .open
            .iter()
            .map(|o| PlacementRow {
                cluster: o.cluster.clone(),
                part: o.part.clone(),
                installed_at: o.installed_at,
                removed_at: None,
                hostname: o.hostname.clone(),
                gpu_index: o.gpu_index,
                pci_bus_id: o.pci_bus_id.clone(),
                uuid: o.uuid.clone(),
                end_reason: None,
            })
            .collect::<Vec<_>>(),
    )
    .await? as usize;

    // Parts' facts: only the new or changed are written.
    let mut latest: HashMap<(&str, &str), (DateTime<Utc>, &crate::domain::part::ReportedGpu)> = HashMap::new();
    for r in reports {
        for g in &r.gpus {
            let e = latest.entry((&r.cluster, &g.part)).or_insert((r.observed_at, g));
            if r.observed_at > e.0 {
                *e = (r.observed_at, g);
            }
        }
    }
    let mut stored: HashMap<(String, String), storage::gpus::Part> = HashMap::new();
    let mut parts_by_cluster: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (cluster, part) in latest.keys() {
        parts_by_cluster.entry(cluster).or_default().push(part.to_string());
    }
    for (cluster, parts) in &parts_by_cluster {
        for p in storage::gpus::parts_of_cluster(&mut tx, cluster, parts).await? {
            stored.insert((p.cluster.clone(), p.part.clone()), p);
        }
    }
    let mut rows: Vec<PartRow> = latest
        .iter()
        .filter(
            |((cluster, part), (seen, g))| match stored.get(&(cluster.to_string(), part.to_string())) {
                None => true,
                Some(s) => {
                    let newer = |new: &Option<String>, old: &Option<String>| new.is_some() && new != old;
                    newer(&g.serial, &s.serial)
                        || newer(&g.uuid, &s.uuid)
                        || newer(&g.model, &s.model)
                        || newer(&g.board_part_number, &s.board_part_number)
                        || newer(&g.vbios, &s.vbios)
                        || newer(&g.driver, &s.driver)
                        || *seen < s.first_seen_at
                }
            },
        )
        .map(|((cluster, _), (seen, g))| PartRow {
            cluster: cluster.to_string(),
            part: g.part.clone(),
            serial: g.serial.clone(),
            uuid: g.uuid.clone(),
            model: g.model.clone(),
            generation: g.generation.as_str().to_string(),
            board_part_number: g.board_part_number.clone(),
            vbios: g.vbios.clone(),
            driver: g.driver.clone(),
            attributes: serde_json::json!({}),
            first_seen_at: *seen,
        })
        .collect();
    rows.sort_by(|a, b| (&a.cluster, &a.part).cmp(&(&b.cluster, &b.part)));
    let parts_written = storage::gpus::upsert_parts(&mut tx, &rows, Utc::now()).await? as usize;
    if opened + closed + parts_written > 0 {
        let clusters = reports
            .iter()
            .map(|r| r.cluster.clone())
            .chain(plan.close.iter().map(|c| c.cluster.clone()));
        storage::gpus::bump_part_versions(&mut tx, &sorted_distinct(clusters)).await?;
    }
    tx.commit().await?;
    Ok(InventoryOutcome {
        opened,
        closed,
        parts_written,
        stale: plan.stale,
    })
}

async fn close_by_cluster(conn: &mut PgConnection, close: &[Closing]) -> Result<usize, sqlx::Error> {
    let mut by_cluster: BTreeMap<&str, Vec<&Closing>> = BTreeMap::new();
    for c in close {
        by_cluster.entry(&c.cluster).or_default().push(c);
    }
    let mut n = 0;
    for (cluster, rows) in by_cluster {
        n += storage::gpus::close_placements(conn, cluster, &rows).await? as usize;
    }
    Ok(n)
}

/// A validated history import.
#[derive(Debug, Default, Clone)]
pub struct History {
    pub parts: Vec<PartRow>,
    pub placements: Vec<PlacementRow>,
    pub removals: Vec<RemovalRow>,
}

/// What an import wrote (rows inserted or changed; rows sent again unchanged are not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct HistoryOutcome {
    pub parts: usize,
    pub placements: usize,
    pub removals: usize,
}

/// Imports history in one transaction. Idempotent: parts by (cluster, part), placements by
/// (cluster, part, installed_at), removals by (cluster, part, removed_at). A part a placement or
/// removal names without a part entry is created (its first sighting the earliest time given).
pub async fn import_history(db: &PgPool, actor: &Actor, mut h: History) -> Result<HistoryOutcome, sqlx::Error> {
    let mut firsts: BTreeMap<(String, String), DateTime<Utc>> = BTreeMap::new();
    let times = h
        .placements
        .iter()
        .map(|p| (&p.cluster, &p.part, p.installed_at))
        .chain(h.removals.iter().map(|r| (&r.cluster, &r.part, r.removed_at)));
    for (c, p, t) in times {
        let e = firsts.entry((c.clone(), p.clone())).or_insert(t);
        *e = (*e).min(t);
    }
    for part in &mut h.parts {
        if let Some(t) = firsts.remove(&(part.cluster.clone(), part.part.clone())) {
            part.first_seen_at = part.first_seen_at.min(t);
        }
    }
    h.parts.extend(firsts.into_iter().map(|((cluster, part), t)| PartRow {
        cluster,
        part,
        generation: "unknown".into(),
        attributes: serde_json::json!({}),
        first_seen_at: t,
        ..Default::default()
    }));
    h.parts
        .sort_by(|a, b| (&a.cluster, &a.part).cmp(&(&b.cluster, &b.part)));
    let mut tx = db.begin().await?;
    let keys: Vec<String> = h.parts.iter().map(|p| p.part.clone()).collect();
    locks::lock(&mut tx, LockSpace::GpuParts, &keys).await?;
    let parts = storage::gpus::upsert_parts(&mut tx, &h.parts, Utc::now()).await? as usize;
    let placements = storage::gpus::upsert_placements(&mut tx, &h.placements).await? as usize;
    let removals = storage::gpus::upsert_removals(&mut tx, &h.removals).await? as usize;
    if parts + placements + removals > 0 {
        let clusters = h
            .parts
            .iter()
            .map(|p| p.cluster.clone())
            .chain(h.placements.iter().map(|p| p.cluster.clone()))
            .chain(h.removals.iter().map(|r| r.cluster.clone()));
        storage::gpus::bump_part_versions(&mut tx, &sorted_distinct(clusters)).await?;
    }
    let mut clusters: Vec<&str> = h.parts.iter().map(|p| p.cluster.as_str()).collect();
    clusters.dedup();
    super::audit::record(
        &mut tx,
        actor,
        AuditAction::GpuImport,
        &clusters.join(","),
        serde_json::json!({
            "parts": h.parts.len(), "placements": h.placements.len(), "removals": h.removals.len(),
            "written": {"parts": parts, "placements": placements, "removals": removals},
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(HistoryOutcome {
        parts,
        placements,
        removals,
    })
}

/// An admin's removal of a part.
#[derive(Debug, Clone)]
pub struct Removal {
    pub cluster: String,
    pub part: String,
    pub at: DateTime<Utc>,
    pub reason: RemovalReason,
    pub ticket: Option<String>,
    pub note: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RemovalError {
    #[error("no GPU part '{part}' in cluster '{cluster}'")]
    NotFound { cluster: String, part: String },
    #[error("the part's placement began at {installed_at}, after the removal time")]
    BeforePlacement { installed_at: DateTime<Utc> },
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Retires a part: closes its open placement at the removal time for the reason, records the
/// removal, and audits it, in one transaction. Returns whether a placement was closed.
pub async fn remove_part(db: &PgPool, actor: &Actor, r: Removal) -> Result<bool, RemovalError> {
    let mut tx = db.begin().await?;
    locks::lock(&mut tx, LockSpace::GpuParts, std::slice::from_ref(&r.part)).await?;
    if !storage::gpus::part_exists(&mut tx, &r.cluster, &r.part).await? {
        return Err(RemovalError::NotFound {
            cluster: r.cluster,
            part: r.part,
        });
    }
    let open: Vec<_> = storage::gpus::open_of_parts(&mut tx, std::slice::from_ref(&r.part))
        .await?
        .into_iter()
        .filter(|o| o.cluster == r.cluster)
        .collect();
    if let Some(o) = open.iter().find(|o| o.installed_at > r.at) {
        return Err(RemovalError::BeforePlacement {
            installed_at: o.installed_at,
        });
    }
    let close: Vec<Closing> = open
        .iter()
        .map(|o| Closing {
            cluster: o.cluster.clone(),
            part: o.part.clone(),
            installed_at: o.installed_at,
            at: r.at,
            reason: r.reason.end_reason(),
        })
        .collect();
    let closed = close_by_cluster(&mut tx, &close).await? > 0;
    storage::gpus::upsert_removals(
        &mut tx,
        &[RemovalRow {
            cluster: r.cluster.clone(),
            part: r.part.clone(),
            removed_at: r.at,
            reason: r.reason.as_str().to_string(),
            ticket: r.ticket.clone(),
            note: r.note.clone(),
            removed_by: Some(actor.name.clone()),
        }],
    )
    .await?;
    storage::gpus::bump_part_versions(&mut tx, std::slice::from_ref(&r.cluster)).await?;
    super::audit::record(
        &mut tx,
        actor,
        AuditAction::GpuRemoval,
        &format!("{}/{}", r.cluster, r.part),
        serde_json::json!({
            "reason": r.reason.as_str(), "at": r.at, "ticket": r.ticket, "note": r.note,
            "closed_placement": closed,
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(closed)
}

/// The clusters a write touched, each once, in the order their version rows are locked.
fn sorted_distinct(clusters: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = clusters.collect();
    out.sort();
    out.dedup();
    out
}
