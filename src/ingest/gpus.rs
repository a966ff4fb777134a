//! Writing GPU parts: a node's reported GPU set diffed against the open placements, a bulk import
//! of history, and an admin's removal of a part. Each call is one transaction; concurrent writers
//! of the same parts or nodes serialise on lock stripes.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use super::locks::{self, LockSpace};
use crate::domain::audit::{Actor, AuditAction};
use crate::domain::part::{
    Closing, EndReason, NodeGpus, RemovalConflict, RemovalFit, RemovalReason, Span, fit_removal, plan_inventory,
};
use crate::storage;
use crate::storage::gpus::{PartRow, Placement, PlacementRow, Removal as StoredRemoval, RemovalRow};

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

/// A validated history import; each placement and removal with its index in the request's list.
#[derive(Debug, Default, Clone)]
pub struct History {
    pub parts: Vec<PartRow>,
    pub placements: Vec<(usize, PlacementRow)>,
    pub removals: Vec<(usize, RemovalRow)>,
}

/// What an import wrote (rows inserted or changed; rows sent again unchanged are not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct HistoryOutcome {
    /// Parts inserted or changed.
    pub parts: usize,
    /// Placements inserted or changed, with stored ones a removal closed.
    pub placements: usize,
    /// Removals inserted or changed, with those a placement's ending implied.
    pub removals: usize,
}

/// The list of an import a record is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryList {
    Placements,
    Removals,
}

impl HistoryList {
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryList::Placements => "placements",
            HistoryList::Removals => "removals",
        }
    }
}

/// A record refused because it contradicts another (in the import or stored).
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryRefusal {
    pub list: HistoryList,
    /// Index in its list.
    pub index: usize,
    pub field: &'static str,
    pub message: String,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryResult {
    pub written: HistoryOutcome,
    /// Records refused for contradicting others; the rest were written.
    pub refused: Vec<HistoryRefusal>,
    /// (index in `placements`, cluster, node) of placements written on nodes the cluster's node
    /// inventory does not hold.
    pub unknown_nodes: Vec<(usize, String, String)>,
}

/// The import's placements and removals made consistent with each other and with what is stored.
#[derive(Debug, Default, PartialEq)]
struct Reconciled {
    /// The import's placements to write, a removal's closing applied.
    placements: Vec<(usize, PlacementRow)>,
    removals: Vec<RemovalRow>,
    /// Removals the placements' endings are, where the import sends none at that time.
    implied: Vec<RemovalRow>,
    /// Stored placements a removal ends (closed at its time, or its reason given to their ending).
    close: Vec<Closing>,
    refused: Vec<HistoryRefusal>,
}

fn ending(p: &PlacementRow) -> Option<(DateTime<Utc>, RemovalReason)> {
    let reason = EndReason::parse(p.end_reason.as_deref()?)?.removal()?;
    Some((p.removed_at?, reason))
}

fn where_placed(p: &PlacementRow, list_index: Option<usize>) -> String {
    let what = match list_index {
        Some(i) => format!("placements[{i}]"),
        None => "the stored placement".into(),
    };
    format!("{what} ({} from {})", p.hostname, p.installed_at.to_rfc3339())
}

/// Applies the removal rule ([`fit_removal`]) to an import: a placement ending for a removal
/// reason is that removal (implied where the import sends none at its time); a removal closes the
/// placement it ends; a removal and an ending that contradict each other are both refused (only
/// the import's record when the other is stored), each naming the other.
fn reconcile(
    stored_placements: &[Placement],
    stored_removals: &[StoredRemoval],
    placements: Vec<(usize, PlacementRow)>,
    removals: Vec<(usize, RemovalRow)>,
    by: &str,
) -> Reconciled {
    type Key = (String, String);
    let key = |c: &str, p: &str| (c.to_string(), p.to_string());
    let mut refused = Vec::new();
    let mut placement_ok = vec![true; placements.len()];
    let mut removal_ok = vec![true; removals.len()];
    let refuse = |refused: &mut Vec<HistoryRefusal>, list, index, field, message: String| {
        refused.push(HistoryRefusal {
            list,
            index,
            field,
            message,
        })
    };

    // An ending and a removal at the same time must say the same.
    let explicit: HashMap<(Key, DateTime<Utc>), usize> = removals
        .iter()
        .enumerate()
        .map(|(pos, (_, r))| ((key(&r.cluster, &r.part), r.removed_at), pos))
        .collect();
    let stored_reason: HashMap<(Key, DateTime<Utc>), &str> = stored_removals
        .iter()
        .map(|r| ((key(&r.cluster, &r.part), r.removed_at), r.reason.as_str()))
        .collect();
    for (pos, (i, p)) in placements.iter().enumerate() {
        let Some((at, reason)) = ending(p) else { continue };
        let k = (key(&p.cluster, &p.part), at);
        if let Some(&rpos) = explicit.get(&k) {
            let (ri, r) = &removals[rpos];
            if r.reason != reason.as_str() {
                placement_ok[pos] = false;
                removal_ok[rpos] = false;
                refuse(
                    &mut refused,
                    HistoryList::Placements,
                    *i,
                    "end_reason",
                    format!(
                        "ends as {} at {} but removals[{ri}] says {}: a removal and an ending at the same time must agree",
                        reason.as_str(),
                        at.to_rfc3339(),
                        r.reason
                    ),
                );
                refuse(
                    &mut refused,
                    HistoryList::Removals,
                    *ri,
                    "reason",
                    format!(
                        "is {} but placements[{i}] ends as {} at the same time",
                        r.reason,
                        reason.as_str()
                    ),
                );
            }
        } else if let Some(stored) = stored_reason.get(&k)
            && *stored != reason.as_str()
        {
            placement_ok[pos] = false;
            refuse(
                &mut refused,
                HistoryList::Placements,
                *i,
                "end_reason",
                format!(
                    "ends as {} at {} but the stored removal at that time says {stored}",
                    reason.as_str(),
                    at.to_rfc3339()
                ),
            );
        }
    }

    // Each part's placements as the rule sees them: stored, replaced by the import's.
    #[derive(Clone, Copy)]
    enum Origin {
        Stored(usize),
        Import(usize),
    }
    let mut spans: BTreeMap<Key, Vec<(Span, Origin)>> = BTreeMap::new();
    let span_of = |p: &PlacementRow| Span::stored(p.installed_at, p.removed_at, p.end_reason.as_deref());
    let stored_rows: Vec<PlacementRow> = stored_placements
        .iter()
        .map(|p| PlacementRow {
            cluster: p.cluster.clone(),
            part: p.part.clone(),
            installed_at: p.installed_at,
            removed_at: p.removed_at,
            hostname: p.hostname.clone(),
            gpu_index: p.gpu_index,
            pci_bus_id: p.pci_bus_id.clone(),
            uuid: p.uuid.clone(),
            end_reason: p.end_reason.clone(),
        })
        .collect();
    let mut placements = placements;
    for (idx, p) in stored_rows.iter().enumerate() {
        spans
            .entry(key(&p.cluster, &p.part))
            .or_default()
            .push((span_of(p), Origin::Stored(idx)));
    }
    for (pos, (_, p)) in placements.iter().enumerate() {
        if !placement_ok[pos] {
            continue;
        }
        let list = spans.entry(key(&p.cluster, &p.part)).or_default();
        list.retain(|(s, _)| s.installed_at != p.installed_at);
        list.push((span_of(p), Origin::Import(pos)));
    }

    // Removals in time order (one that closes a placement changes what a later one finds): the
    // import's, and the stored ones of the parts it places (so that a placement sent again open
    // does not reopen what a stored removal closed).
    struct Due<'a> {
        at: DateTime<Utc>,
        reason: &'a str,
        cluster: &'a str,
        part: &'a str,
        /// (position, index in the list) of an import's removal; None for a stored one.
        sent: Option<(usize, usize)>,
    }
    let placed: std::collections::HashSet<Key> = placements.iter().map(|(_, p)| key(&p.cluster, &p.part)).collect();
    let mut due: Vec<Due> = removals
        .iter()
        .enumerate()
        .filter(|(pos, _)| removal_ok[*pos])
        .map(|(pos, (i, r))| Due {
            at: r.removed_at,
            reason: &r.reason,
            cluster: &r.cluster,
            part: &r.part,
            sent: Some((pos, *i)),
        })
        .chain(
            stored_removals
                .iter()
                .filter(|r| {
                    let k = key(&r.cluster, &r.part);
                    placed.contains(&k) && !explicit.contains_key(&(k, r.removed_at))
                })
                .map(|r| Due {
                    at: r.removed_at,
                    reason: &r.reason,
                    cluster: &r.cluster,
                    part: &r.part,
                    sent: None,
                }),
        )
        .collect();
    due.sort_by_key(|d| d.at);
    let mut close = Vec::new();
    for d in due {
        let Some(reason) = RemovalReason::parse(d.reason) else {
            continue;
        };
        let list = spans.entry(key(d.cluster, d.part)).or_default();
        let bare: Vec<Span> = list.iter().map(|(s, _)| *s).collect();
        match fit_removal(&bare, d.at, reason) {
            Ok(RemovalFit::Alone) | Ok(RemovalFit::Ends { relabel: false, .. }) => {}
            Ok(RemovalFit::Closes(k)) | Ok(RemovalFit::Ends { span: k, relabel: true }) => {
                list[k].0.removed_at = Some(d.at);
                list[k].0.end_reason = Some(reason.end_reason());
                match list[k].1 {
                    Origin::Import(pos) => {
                        placements[pos].1.removed_at = Some(d.at);
                        placements[pos].1.end_reason = Some(reason.as_str().to_string());
                    }
                    // A stored removal and a stored placement were made consistent when written.
                    Origin::Stored(_) if d.sent.is_none() => {}
                    Origin::Stored(idx) => close.push(Closing {
                        cluster: d.cluster.to_string(),
                        part: d.part.to_string(),
                        installed_at: stored_rows[idx].installed_at,
                        at: d.at,
                        reason: reason.end_reason(),
                    }),
                }
            }
            // A stored removal of a part out of every slot stands before a placement sent now (a
            // spare sent to the vendor and back): only one that cuts into a placement contradicts it.
            Err(RemovalConflict::BeforePlacement(_)) if d.sent.is_none() => {}
            Err(conflict) => {
                let (k, field, why) = match conflict {
                    RemovalConflict::Disagrees { span, end_reason } => (
                        span,
                        "reason",
                        format!("ends as {} at the same time", end_reason.as_str()),
                    ),
                    RemovalConflict::Inside(span) => (
                        span,
                        "removed_at",
                        format!(
                            "was still in service until {}",
                            list[span].0.removed_at.map(|t| t.to_rfc3339()).unwrap_or_default()
                        ),
                    ),
                    RemovalConflict::BeforePlacement(span) => (
                        span,
                        "removed_at",
                        "began after it and no placement ended at it".to_string(),
                    ),
                };
                let origin = list[k].1;
                if let Some((rpos, ri)) = d.sent {
                    removal_ok[rpos] = false;
                    let what = match origin {
                        Origin::Stored(idx) => where_placed(&stored_rows[idx], None),
                        Origin::Import(pos) => where_placed(&placements[pos].1, Some(placements[pos].0)),
                    };
                    refuse(
                        &mut refused,
                        HistoryList::Removals,
                        ri,
                        field,
                        format!("a removal at {} contradicts {what}, which {why}", d.at.to_rfc3339()),
                    );
                }
                if let Origin::Import(pos) = origin {
                    let other = match d.sent {
                        Some((_, ri)) => format!("removals[{ri}]"),
                        None => "the stored removal".to_string(),
                    };
                    placement_ok[pos] = false;
                    refuse(
                        &mut refused,
                        HistoryList::Placements,
                        placements[pos].0,
                        "removed_at",
                        format!(
                            "contradicts {other} ({} at {}): the placement {why}",
                            d.reason,
                            d.at.to_rfc3339()
                        ),
                    );
                    list.remove(k);
                }
            }
        }
    }

    let kept_removals: Vec<RemovalRow> = removals
        .into_iter()
        .zip(&removal_ok)
        .filter(|(_, ok)| **ok)
        .map(|((_, r), _)| r)
        .collect();
    let sent: std::collections::HashSet<(Key, DateTime<Utc>)> = kept_removals
        .iter()
        .map(|r| (key(&r.cluster, &r.part), r.removed_at))
        .collect();
    let placements: Vec<(usize, PlacementRow)> = placements
        .into_iter()
        .zip(&placement_ok)
        .filter(|(_, ok)| **ok)
        .map(|(p, _)| p)
        .collect();
    let mut implied: Vec<RemovalRow> = placements
        .iter()
        .filter_map(|(_, p)| {
            let (at, reason) = ending(p)?;
            (!sent.contains(&(key(&p.cluster, &p.part), at))).then(|| RemovalRow {
                cluster: p.cluster.clone(),
                part: p.part.clone(),
                removed_at: at,
                reason: reason.as_str().to_string(),
                ticket: None,
                note: None,
                removed_by: Some(by.to_string()),
            })
        })
        .collect();
    implied.sort_by(|a, b| (&a.cluster, &a.part, a.removed_at).cmp(&(&b.cluster, &b.part, b.removed_at)));
    implied.dedup_by(|a, b| (&a.cluster, &a.part, a.removed_at) == (&b.cluster, &b.part, b.removed_at));
    refused.sort_by_key(|r| (r.list == HistoryList::Removals, r.index));
    Reconciled {
        placements,
        removals: kept_removals,
        implied,
        close,
        refused,
    }
}

/// Imports history in one transaction. Idempotent: parts by (cluster, part), placements by
/// (cluster, part, installed_at), removals by (cluster, part, removed_at). A part a placement or
/// removal names without a part entry is created (its first sighting the earliest time given).
/// Placements and removals follow the removal rule ([`reconcile`]): what contradicts is refused,
/// the rest written; placements on nodes the inventory does not hold are written and listed.
pub async fn import_history(db: &PgPool, actor: &Actor, mut h: History) -> Result<HistoryResult, sqlx::Error> {
    // The parts the placements and removals name, by cluster: the rule reads their stored history.
    let mut named: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (c, p) in h
        .placements
        .iter()
        .map(|(_, p)| (&p.cluster, &p.part))
        .chain(h.removals.iter().map(|(_, r)| (&r.cluster, &r.part)))
    {
        named.entry(c.clone()).or_default().push(p.clone());
    }
    for parts in named.values_mut() {
        parts.sort();
        parts.dedup();
    }
    let mut keys: Vec<String> = h
        .parts
        .iter()
        .map(|p| p.part.clone())
        .chain(named.values().flatten().cloned())
        .collect();
    keys.sort();
    keys.dedup();
    let mut tx = db.begin().await?;
    locks::lock(&mut tx, LockSpace::GpuParts, &keys).await?;
    let (mut stored_placements, mut stored_removals) = (Vec::new(), Vec::new());
    for (cluster, parts) in &named {
        stored_placements.extend(storage::gpus::placements_of_parts(&mut tx, cluster, parts).await?);
        stored_removals.extend(storage::gpus::removals_of_parts(&mut tx, cluster, parts).await?);
    }
    let plan = reconcile(
        &stored_placements,
        &stored_removals,
        std::mem::take(&mut h.placements),
        std::mem::take(&mut h.removals),
        &actor.name,
    );
    // A part a written placement or removal names without a part entry is created, its first
    // sighting the earliest time given (a refused record creates nothing).
    let mut firsts: BTreeMap<(String, String), DateTime<Utc>> = BTreeMap::new();
    let times = plan
        .placements
        .iter()
        .map(|(_, p)| (&p.cluster, &p.part, p.installed_at))
        .chain(plan.removals.iter().map(|r| (&r.cluster, &r.part, r.removed_at)));
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
    let mut hosts: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (_, p) in &plan.placements {
        hosts.entry(&p.cluster).or_default().push(p.hostname.clone());
    }
    let mut known: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    for (cluster, hosts) in &mut hosts {
        hosts.sort();
        hosts.dedup();
        for host in storage::gpus::inventoried_nodes(&mut tx, cluster, hosts).await? {
            known.insert((cluster.to_string(), host));
        }
    }
    let unknown_nodes: Vec<(usize, String, String)> = plan
        .placements
        .iter()
        .filter(|(_, p)| !known.contains(&(p.cluster.clone(), p.hostname.clone())))
        .map(|(i, p)| (*i, p.cluster.clone(), p.hostname.clone()))
        .collect();

    let rows: Vec<PlacementRow> = plan.placements.iter().map(|(_, p)| p.clone()).collect();
    let parts = storage::gpus::upsert_parts(&mut tx, &h.parts, Utc::now()).await? as usize;
    let placements = storage::gpus::upsert_placements(&mut tx, &rows).await? as usize
        + close_by_cluster(&mut tx, &plan.close).await?;
    let removals = storage::gpus::upsert_removals(&mut tx, &plan.removals).await? as usize
        + storage::gpus::insert_missing_removals(&mut tx, &plan.implied).await? as usize;
    if parts + placements + removals > 0 {
        let clusters = h
            .parts
            .iter()
            .map(|p| p.cluster.clone())
            .chain(rows.iter().map(|p| p.cluster.clone()))
            .chain(plan.removals.iter().map(|r| r.cluster.clone()));
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
            "parts": h.parts.len(), "placements": rows.len(), "removals": plan.removals.len(),
            "implied_removals": plan.implied.len(), "refused": plan.refused.len(),
            "written": {"parts": parts, "placements": placements, "removals": removals},
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(HistoryResult {
        written: HistoryOutcome {
            parts,
            placements,
            removals,
        },
        refused: plan.refused,
        unknown_nodes,
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
    /// The removal contradicts the part's placements (the rule of [`fit_removal`]).
    #[error("{0}")]
    Contradicts(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Retires a part by the removal rule ([`fit_removal`]): closes the placement it ends at the
/// removal time for the reason, records the removal, and audits it, in one transaction. Returns
/// whether an open placement was closed.
pub async fn remove_part(db: &PgPool, actor: &Actor, r: Removal) -> Result<bool, RemovalError> {
    let mut tx = db.begin().await?;
    locks::lock(&mut tx, LockSpace::GpuParts, std::slice::from_ref(&r.part)).await?;
    if !storage::gpus::part_exists(&mut tx, &r.cluster, &r.part).await? {
        return Err(RemovalError::NotFound {
            cluster: r.cluster,
            part: r.part,
        });
    }
    let placed = storage::gpus::placements_of_parts(&mut tx, &r.cluster, std::slice::from_ref(&r.part)).await?;
    let spans: Vec<Span> = placed
        .iter()
        .map(|p| Span::stored(p.installed_at, p.removed_at, p.end_reason.as_deref()))
        .collect();
    let at = |k: usize| {
        format!(
            "its placement on {} from {}",
            placed[k].hostname,
            placed[k].installed_at.to_rfc3339()
        )
    };
    let (closing, closed) = match fit_removal(&spans, r.at, r.reason) {
        Ok(RemovalFit::Closes(k)) => (Some(k), true),
        Ok(RemovalFit::Ends { span, relabel: true }) => (Some(span), false),
        Ok(RemovalFit::Ends { relabel: false, .. } | RemovalFit::Alone) => (None, false),
        Err(RemovalConflict::Disagrees { span, end_reason }) => {
            return Err(RemovalError::Contradicts(format!(
                "{} ended as {} at this time",
                at(span),
                end_reason.as_str()
            )));
        }
        Err(RemovalConflict::Inside(span)) => {
            return Err(RemovalError::Contradicts(format!(
                "{} went on until {}, after the removal time",
                at(span),
                placed[span].removed_at.map(|t| t.to_rfc3339()).unwrap_or_default()
            )));
        }
        Err(RemovalConflict::BeforePlacement(span)) => {
            return Err(RemovalError::Contradicts(format!(
                "{} began after the removal time",
                at(span)
            )));
        }
    };
    let close: Vec<Closing> = closing
        .map(|k| Closing {
            cluster: r.cluster.clone(),
            part: r.part.clone(),
            installed_at: placed[k].installed_at,
            at: r.at,
            reason: r.reason.end_reason(),
        })
        .into_iter()
        .collect();
    close_by_cluster(&mut tx, &close).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn t(day: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(day * 86_400, 0).unwrap()
    }

    fn row(from: i64, to: Option<i64>, end: Option<&str>) -> PlacementRow {
        PlacementRow {
            cluster: "c1".into(),
            part: "P".into(),
            installed_at: t(from),
            removed_at: to.map(t),
            hostname: "n1".into(),
            gpu_index: Some(0),
            pci_bus_id: None,
            uuid: None,
            end_reason: end.map(str::to_string),
        }
    }

    fn stored_removal(at: i64, reason: &str) -> StoredRemoval {
        StoredRemoval {
            cluster: "c1".into(),
            part: "P".into(),
            removed_at: t(at),
            reason: reason.into(),
            ticket: Some("T-1".into()),
            note: None,
            removed_by: None,
        }
    }

    #[test]
    fn stored_removals_close_a_placement_sent_again_open_and_a_spare_may_come_back() {
        // Stored: P placed days 0-10, failed on day 10 (the removal closed it).
        let stored = [Placement {
            cluster: "c1".into(),
            part: "P".into(),
            hostname: "n1".into(),
            gpu_index: Some(0),
            pci_bus_id: None,
            uuid: None,
            installed_at: t(0),
            removed_at: Some(t(10)),
            end_reason: Some("failed".into()),
        }];
        let removals = [stored_removal(10, "failed")];
        // Sent again open: the stored removal closes it again; nothing refused, nothing implied
        // beyond what is stored.
        let plan = reconcile(&stored, &removals, vec![(0, row(0, None, None))], vec![], "admin");
        assert!(plan.refused.is_empty(), "{:?}", plan.refused);
        assert_eq!(plan.placements[0].1, row(0, Some(10), Some("failed")));
        assert_eq!(plan.implied.len(), 1, "inserted only where none is stored");
        // Back from repair on day 20: a new placement, accepted.
        let plan = reconcile(&stored, &removals, vec![(0, row(20, None, None))], vec![], "admin");
        assert!(plan.refused.is_empty());
        // A spare sent to the vendor on day 5 (stored alone), installed on day 20: accepted.
        let plan = reconcile(
            &[],
            &[stored_removal(5, "rma")],
            vec![(0, row(20, None, None))],
            vec![],
            "admin",
        );
        assert!(plan.refused.is_empty(), "{:?}", plan.refused);
        // But a placement that runs through a stored removal contradicts it.
        let plan = reconcile(
            &[],
            &[stored_removal(5, "rma")],
            vec![(3, row(0, Some(9), Some("absent")))],
            vec![],
            "admin",
        );
        assert_eq!(
            plan.refused
                .iter()
                .map(|r| (r.list, r.index, r.field))
                .collect::<Vec<_>>(),
            [(HistoryList::Placements, 3, "removed_at")]
        );
        assert!(plan.placements.is_empty());
    }
}
