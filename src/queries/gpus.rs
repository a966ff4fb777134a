//! GPU parts as readers see them: the parts with their state, installed time and failures; one
//! part's timeline; a node's slots over time. Also the per-part lives the parts analytics use.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::kept::Source;
use crate::analytics::part_life::{self, Interval, PartState};
use crate::domain::gpu::GpuGeneration;
use crate::storage;
use crate::storage::gpus::{Part, PartFailure, Placement, Removal};

/// Everything stored about the parts of a cluster (or all clusters).
#[derive(Debug, Default)]
pub struct Fleet {
    pub parts: Vec<Part>,
    pub placements: Vec<Placement>,
    pub removals: Vec<Removal>,
    pub failures: Vec<PartFailure>,
}

impl Fleet {
    pub async fn load(db: &PgPool, cluster: Option<&str>, part: Option<&str>) -> Result<Self, sqlx::Error> {
        if part.is_none() {
            // The whole fleet: the four reads are independent, so they run at once on four of the
            // pool's connections (the survival and AFR answers wait for the slowest, not the sum).
            let (placements, parts, removals, failures) = tokio::try_join!(
                storage::gpus::placements(db, cluster, None, None),
                storage::gpus::parts(db, cluster, None),
                storage::gpus::removals(db, cluster, None),
                storage::gpus::part_failures(db, cluster, None),
            )?;
            return Ok(Fleet {
                parts,
                placements,
                removals,
                failures,
            });
        }
        let placements = storage::gpus::placements(db, cluster, part, None).await?;
        // A part named by a UUID it had: the rest by its identity.
        let identity = part.map(|p| placements.first().map_or(p.to_string(), |pl| pl.part.clone()));
        Ok(Fleet {
            parts: storage::gpus::parts(db, cluster, identity.as_deref()).await?,
            removals: storage::gpus::removals(db, cluster, identity.as_deref()).await?,
            failures: storage::gpus::part_failures(db, cluster, identity.as_deref()).await?,
            placements,
        })
    }

    /// One life per part identity (across the clusters it served in), aged at `now`.
    pub fn lives(&self, now: DateTime<Utc>) -> Vec<PartLife> {
        let mut lives = lives_of(&self.parts, &self.placements, &self.removals);
        attach_failures(&mut lives, &self.failures);
        age_at(&mut lives, now);
        lives
    }
}

/// The lives of the parts, in identity order, without their failures and not yet aged.
fn lives_of(parts: &[Part], placements: &[Placement], removals: &[Removal]) -> Vec<PartLife> {
    let mut lives: BTreeMap<&str, PartLife> = BTreeMap::new();
    for p in parts {
        let life = lives.entry(&p.part).or_insert_with(|| PartLife::new(p));
        // The latest-updated row's facts describe the part; attributes merge.
        if p.updated_at >= life.updated_at {
            life.model = p.model.clone().or(life.model.take());
            if p.model.is_some() {
                life.generation = p.generation.clone();
            }
            life.updated_at = p.updated_at;
        }
        if let (Some(into), Some(from)) = (life.attributes.as_object_mut(), p.attributes.as_object()) {
            into.extend(from.clone());
        }
    }
    for pl in placements {
        if let Some(life) = lives.get_mut(pl.part.as_str()) {
            let interval = Interval {
                from: pl.installed_at,
                to: pl.removed_at,
            };
            life.intervals.push(interval);
            life.places.push(Place {
                interval,
                cluster: pl.cluster.clone(),
                hostname: pl.hostname.clone(),
                gpu_index: pl.gpu_index,
            });
            if pl.removed_at.is_none() {
                life.node = Some(pl.hostname.clone());
                life.cluster = pl.cluster.clone();
            }
        }
    }
    for r in removals {
        if let Some(life) = lives.get_mut(r.part.as_str()) {
            life.removals.push((r.removed_at, r.reason.clone()));
        }
    }
    lives
        .into_values()
        .map(|mut l| {
            l.intervals.sort_by_key(|i| i.from);
            l.places.sort_by_key(|p| p.interval.from);
            l.removals.sort();
            let removals: Vec<(DateTime<Utc>, &str)> = l.removals.iter().map(|(t, r)| (*t, r.as_str())).collect();
            l.state = part_life::state(&l.intervals, &removals);
            l
        })
        .collect()
}

/// Counts each failure against its part (lives in identity order).
fn attach_failures(lives: &mut [PartLife], failures: &[PartFailure]) {
    for f in failures {
        let Some(part) = f.part.as_deref() else { continue };
        if let Ok(i) = lives.binary_search_by(|l| l.part.as_str().cmp(part)) {
            let life = &mut lives[i];
            life.failures += 1;
            if f.is_hard() {
                life.hardware_failures.push(f.first_at);
            }
        }
    }
    for l in lives.iter_mut() {
        l.hardware_failures.sort();
    }
}

fn age_at(lives: &mut [PartLife], now: DateTime<Utc>) {
    for l in lives.iter_mut() {
        l.installed_days = part_life::age_days_at(&l.intervals, now);
    }
}

/// Lives built from a database's parts history, kept with the parts versions they were read at.
type KeptLives = (Vec<(String, i64)>, Arc<Vec<PartLife>>);

/// Process-wide, like the rollup caches (`kept.rs`): correct across instances because each use
/// first reads the versions from the database it answers from. Bounded in entries (one per
/// database and cluster filter); past the bound it starts afresh.
static KEPT_LIVES: LazyLock<Mutex<HashMap<Source, KeptLives>>> = LazyLock::new(Default::default);
const KEPT_LIVES_MAX: usize = 8;
/// One build of lives at a time: a request that finds none kept while another request (or the
/// warm-up at start) builds them waits for that build instead of reading the history twice.
static BUILDING_LIVES: LazyLock<tokio::sync::Mutex<()>> = LazyLock::new(Default::default);

fn kept_lives(source: &Source, versions: &[(String, i64)]) -> Option<Arc<Vec<PartLife>>> {
    let kept = KEPT_LIVES.lock().unwrap_or_else(|e| e.into_inner());
    kept.get(source).filter(|(v, _)| v == versions).map(|(_, l)| l.clone())
}

/// The lives of the parts history as of `versions`, kept or built (and then kept).
async fn base_lives(
    db: &PgPool,
    cluster: Option<&str>,
    versions: Vec<(String, i64)>,
) -> Result<Arc<Vec<PartLife>>, sqlx::Error> {
    let source = Source::of(db, cluster);
    if let Some(lives) = kept_lives(&source, &versions) {
        return Ok(lives);
    }
    let _building = BUILDING_LIVES.lock().await;
    if let Some(lives) = kept_lives(&source, &versions) {
        return Ok(lives);
    }
    // Read after the versions: what is read is at least as new as what it is filed under.
    let (placements, parts, removals) = tokio::try_join!(
        storage::gpus::placements(db, cluster, None, None),
        storage::gpus::parts(db, cluster, None),
        storage::gpus::removals(db, cluster, None),
    )?;
    let lives = Arc::new(lives_of(&parts, &placements, &removals));
    let mut kept = KEPT_LIVES.lock().unwrap_or_else(|e| e.into_inner());
    if kept.len() >= KEPT_LIVES_MAX && !kept.contains_key(&source) {
        kept.clear();
    }
    kept.insert(source, (versions, lives.clone()));
    Ok(lives)
}

/// Builds the lives of every cluster's parts in the background, so that the first parts answer
/// after a start does not read and build the whole history (about half a second at 30,000 parts).
pub fn spawn_warm_lives(db: PgPool) {
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        let warmed = async {
            let versions = storage::gpus::part_versions(&db, None).await?;
            base_lives(&db, None, versions).await
        };
        match warmed.await {
            Ok(lives) => tracing::info!(
                parts = lives.len(),
                ms = started.elapsed().as_millis() as u64,
                "parts' lives built"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "building the parts' lives at start failed; the first parts answer builds them")
            }
        }
    });
}

/// Forgets the kept lives, as a new process starts (for benchmarks of the first answer).
pub fn forget_kept_lives() {
    KEPT_LIVES.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// The lives of every part of a cluster (every cluster when None), aged at `now`, with their
/// failures when `with_failures`. The parts history (parts, placements, removals) is read again
/// only after a write moved its version; the failures, which change with every ingest, are read
/// each time they are asked for.
pub async fn fleet_lives(
    db: &PgPool,
    cluster: Option<&str>,
    now: DateTime<Utc>,
    with_failures: bool,
) -> Result<Vec<PartLife>, sqlx::Error> {
    let failures = async {
        match with_failures {
            true => storage::gpus::part_failures(db, cluster, None).await,
            false => Ok(Vec::new()),
        }
    };
    let (versions, failures) = tokio::try_join!(storage::gpus::part_versions(db, cluster), failures)?;
    let base = base_lives(db, cluster, versions).await?;
    let mut lives = (*base).clone();
    attach_failures(&mut lives, &failures);
    age_at(&mut lives, now);
    Ok(lives)
}

/// One placement of a part: where it served, and when.
#[derive(Debug, Clone)]
pub struct Place {
    pub interval: Interval,
    pub cluster: String,
    pub hostname: String,
    pub gpu_index: Option<i32>,
}

/// A part's life, across clusters.
#[derive(Debug, Clone)]
pub struct PartLife {
    pub part: String,
    /// The cluster of its current placement, else where it was first recorded.
    pub cluster: String,
    pub node: Option<String>,
    pub model: Option<String>,
    pub generation: String,
    pub attributes: serde_json::Value,
    pub updated_at: DateTime<Utc>,
    pub intervals: Vec<Interval>,
    /// Where it served: each placement's interval with its node and slot, in time order.
    pub places: Vec<Place>,
    pub removals: Vec<(DateTime<Utc>, String)>,
    pub failures: usize,
    /// Times of its hard failures ([`PartFailure::is_hard`]).
    pub hardware_failures: Vec<DateTime<Utc>>,
    pub state: PartState,
    pub installed_days: f64,
}

impl PartLife {
    fn new(p: &Part) -> Self {
        PartLife {
            part: p.part.clone(),
            cluster: p.cluster.clone(),
            node: None,
            model: p.model.clone(),
            generation: p.generation.clone(),
            attributes: serde_json::json!({}),
            updated_at: p.updated_at,
            intervals: Vec::new(),
            places: Vec::new(),
            removals: Vec::new(),
            failures: 0,
            hardware_failures: Vec::new(),
            state: PartState::Spare,
            installed_days: 0.0,
        }
    }
}

/// Filters of the parts list.
#[derive(Debug, Default, Clone)]
pub struct GpuFilter {
    pub cluster: Option<String>,
    pub model: Option<String>,
    pub generation: Option<GpuGeneration>,
    /// Parts installed in this node now.
    pub node: Option<String>,
    pub state: Option<PartState>,
    /// Parts after this identity (keyset).
    pub after: Option<String>,
    pub limit: usize,
}

/// One part in the list.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GpuSummary {
    /// The part's identity: its serial, else its UUID.
    pub part: String,
    pub serial: Option<String>,
    /// Its current (else last known) UUID.
    pub uuid: Option<String>,
    pub cluster: String,
    /// The node it is installed in now.
    pub node: Option<String>,
    pub gpu_index: Option<i32>,
    pub model: Option<String>,
    #[schema(value_type = GpuGeneration)]
    pub generation: String,
    pub state: PartState,
    /// Cumulative installed time, in days (time out of every slot does not count).
    pub installed_days: f64,
    /// Failures whose root signal resolved to this part.
    pub failure_count: usize,
    /// Site attributes (vendor lot, firmware, purchase batch).
    #[schema(value_type = Object)]
    pub attributes: serde_json::Value,
}

/// The parts matching the filter, in identity order, one page (`limit`, then whether more follow).
pub async fn list(db: &PgPool, f: &GpuFilter, now: DateTime<Utc>) -> Result<(Vec<GpuSummary>, bool), sqlx::Error> {
    let fleet = Fleet::load(db, f.cluster.as_deref(), None).await?;
    let facts: HashMap<&str, &Part> = fleet.parts.iter().map(|p| (p.part.as_str(), p)).collect();
    let open: HashMap<&str, &Placement> = fleet
        .placements
        .iter()
        .filter(|p| p.removed_at.is_none())
        .map(|p| (p.part.as_str(), p))
        .collect();
    let mut out = Vec::new();
    let mut more = false;
    for life in fleet.lives(now) {
        if f.after.as_deref().is_some_and(|a| life.part.as_str() <= a)
            || f.model.as_deref().is_some_and(|m| life.model.as_deref() != Some(m))
            || f.generation.is_some_and(|g| life.generation != g.as_str())
            || f.node.as_deref().is_some_and(|n| life.node.as_deref() != Some(n))
            || f.state.is_some_and(|s| life.state != s)
        {
            continue;
        }
        if out.len() == f.limit {
            more = true;
            break;
        }
        let fact = facts.get(life.part.as_str());
        let slot = open.get(life.part.as_str());
        out.push(GpuSummary {
            serial: fact.and_then(|p| p.serial.clone()),
            uuid: slot
                .and_then(|s| s.uuid.clone())
                .or_else(|| fact.and_then(|p| p.uuid.clone())),
            cluster: life.cluster.clone(),
            node: life.node.clone(),
            gpu_index: slot.and_then(|s| s.gpu_index),
            model: life.model.clone(),
            generation: life.generation.clone(),
            state: life.state,
            installed_days: crate::analytics::headline::round6(life.installed_days),
            failure_count: life.failures,
            attributes: life.attributes.clone(),
            part: life.part,
        });
    }
    Ok((out, more))
}

/// One placement in a timeline.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PlacementView {
    pub cluster: String,
    pub part: String,
    pub node: String,
    pub gpu_index: Option<i32>,
    pub pci_bus_id: Option<String>,
    pub uuid: Option<String>,
    pub installed_at: DateTime<Utc>,
    /// Absent while installed.
    pub removed_at: Option<DateTime<Utc>>,
    /// absent, moved, reidentified, failed, rma, decommissioned, upgraded or other.
    pub end_reason: Option<String>,
}

impl From<&Placement> for PlacementView {
    fn from(p: &Placement) -> Self {
        PlacementView {
            cluster: p.cluster.clone(),
            part: p.part.clone(),
            node: p.hostname.clone(),
            gpu_index: p.gpu_index,
            pci_bus_id: p.pci_bus_id.clone(),
            uuid: p.uuid.clone(),
            installed_at: p.installed_at,
            removed_at: p.removed_at,
            end_reason: p.end_reason.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RemovalView {
    pub cluster: String,
    pub removed_at: DateTime<Utc>,
    /// failed, rma, decommissioned or upgraded.
    pub reason: String,
    pub ticket: Option<String>,
    pub note: Option<String>,
    pub removed_by: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PartFailureView {
    pub failure_id: uuid::Uuid,
    pub cluster: String,
    pub first_at: DateTime<Utc>,
    pub category: String,
    pub component: String,
    pub root_kind: String,
    pub root_code: Option<i64>,
    pub node: Option<String>,
    pub gpu_index: Option<i32>,
}

/// A part's timeline.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GpuTimeline {
    #[serde(flatten)]
    pub summary: GpuSummary,
    pub board_part_number: Option<String>,
    pub vbios: Option<String>,
    pub driver: Option<String>,
    pub first_seen_at: DateTime<Utc>,
    pub placements: Vec<PlacementView>,
    pub removals: Vec<RemovalView>,
    pub failures: Vec<PartFailureView>,
}

/// A part by identity or by any UUID it had; None when unknown (in the caller's cluster).
pub async fn timeline(
    db: &PgPool,
    cluster: Option<&str>,
    part: &str,
    now: DateTime<Utc>,
) -> Result<Option<GpuTimeline>, sqlx::Error> {
    let fleet = Fleet::load(db, cluster, Some(part)).await?;
    let Some(life) = fleet.lives(now).into_iter().next() else {
        return Ok(None);
    };
    let fact = fleet
        .parts
        .iter()
        .max_by_key(|p| p.updated_at)
        .expect("a life has a part row");
    let open = fleet.placements.iter().find(|p| p.removed_at.is_none());
    Ok(Some(GpuTimeline {
        board_part_number: fact.board_part_number.clone(),
        vbios: fact.vbios.clone(),
        driver: fact.driver.clone(),
        first_seen_at: fleet
            .parts
            .iter()
            .map(|p| p.first_seen_at)
            .min()
            .unwrap_or(fact.first_seen_at),
        placements: fleet.placements.iter().map(PlacementView::from).collect(),
        removals: fleet
            .removals
            .iter()
            .map(|r| RemovalView {
                cluster: r.cluster.clone(),
                removed_at: r.removed_at,
                reason: r.reason.clone(),
                ticket: r.ticket.clone(),
                note: r.note.clone(),
                removed_by: r.removed_by.clone(),
            })
            .collect(),
        failures: fleet
            .failures
            .iter()
            .map(|f| PartFailureView {
                failure_id: f.id,
                cluster: f.cluster.clone(),
                first_at: f.first_at,
                category: f.category.clone(),
                component: f.component.clone(),
                root_kind: f.root_kind.clone(),
                root_code: f.root_code,
                node: f.slot_hostname.clone(),
                gpu_index: f.slot_index,
            })
            .collect(),
        summary: GpuSummary {
            serial: fact.serial.clone(),
            uuid: open.and_then(|s| s.uuid.clone()).or_else(|| fact.uuid.clone()),
            cluster: life.cluster.clone(),
            node: life.node.clone(),
            gpu_index: open.and_then(|s| s.gpu_index),
            model: life.model.clone(),
            generation: life.generation.clone(),
            state: life.state,
            installed_days: crate::analytics::headline::round6(life.installed_days),
            failure_count: life.failures,
            attributes: life.attributes.clone(),
            part: life.part,
        },
    }))
}

/// A node's slots over time: every placement on it, in (installed_at, index) order.
pub async fn node_slots(db: &PgPool, cluster: &str, hostname: &str) -> Result<Vec<PlacementView>, sqlx::Error> {
    let mut rows = storage::gpus::placements(db, Some(cluster), None, Some(hostname)).await?;
    rows.sort_by_key(|r| (r.installed_at, r.gpu_index));
    Ok(rows.iter().map(PlacementView::from).collect())
}
