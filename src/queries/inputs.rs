//! The storage reads behind the analyses, turned into the analytics' input types (unsigned
//! counts, parsed ratios). Shared by every read use case, so no two read the same figure twice.
//! Counts of failures come from the rollups for the window's whole UTC days and months and from
//! the failures themselves for the partial days at its ends (`rollups::Coverage`): the same
//! numbers as counting every failure, without reading them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};

use chrono::{Duration, Months, NaiveDate};
use sqlx::PgPool;

use super::kept::{self, BucketCache, BucketKey, Source, Weigh};
use crate::analytics::cost::{ErrorTally, JobRun, Phases, RecoveryFailure, SlowdownSignal, slowdown_ratio};
use crate::analytics::headline::{FailureCount, FleetFailures, Inventory, NodeFailures, NodeService, SparseFailures};
use crate::domain::window::Window;
use crate::storage::failure_stats::{self as fs, NodeFailure};
use crate::storage::rollups::{self, Coverage};
use crate::storage::{jobs, nodes, signal_stats};

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Nodes of the inventory (of the window's cluster) with their service intervals, from memory
/// while the inventory's version has not moved (see [`InventoryCache`]).
pub async fn node_service(db: &PgPool, w: &Window) -> Result<Arc<Inventory>, sqlx::Error> {
    let key = Source::of(db, w.cluster());
    // The version is read before the rows: a cached list is never older than the version it is
    // filed under (a write between the two reads only makes it newer, and the next request sees
    // the moved version and reloads).
    let version = nodes::inventory_version(db).await?;
    if let Some(rows) = INVENTORY.get(&key, version) {
        return Ok(rows);
    }
    let list: Vec<NodeService> = nodes::service_periods(db, w.cluster())
        .await?
        .into_iter()
        .map(|r| NodeService {
            cluster: r.cluster,
            hostname: r.hostname,
            gpu_model: r.gpu_model,
            gpu_generation: r.gpu_generation,
            gpu_count: r.gpu_count.max(0) as u32,
            group: r.group_label,
            in_service_since: r.in_service_since,
            retired_at: r.retired_at,
        })
        .collect();
    // Sorted into packing order and indexed once per inventory version: sorting 70,000 hostnames
    // naturally on every request cost tens of ms, and hashing 12,500 a few.
    let rows = Arc::new(Inventory::new(list));
    INVENTORY.put(key, version, rows.clone());
    Ok(rows)
}

/// The inventory lists last read, each with the version it was read at. Process-wide rather than
/// per `ApiContext` so every analytic, the report and the decision tables share it without
/// threading it through a dozen signatures; correct across instances and replicas because every
/// use first reads the version from the same database.
struct InventoryCache(Mutex<HashMap<Source, (i64, Arc<Inventory>)>>);

/// Lists kept at most (databases x cluster filters); beyond it the cache starts afresh.
const INVENTORY_LISTS: usize = 64;

static INVENTORY: LazyLock<InventoryCache> = LazyLock::new(|| InventoryCache(Mutex::new(HashMap::new())));

impl InventoryCache {
    fn get(&self, key: &Source, version: i64) -> Option<Arc<Inventory>> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(key)
            .filter(|(v, _)| *v == version)
            .map(|(_, rows)| rows.clone())
    }

    fn put(&self, key: Source, version: i64, rows: Arc<Inventory>) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= INVENTORY_LISTS && !map.contains_key(&key) {
            map.clear();
        }
        map.insert(key, (version, rows));
    }
}

/// What the failure mix groups by.
#[derive(Debug, Clone, Copy)]
pub enum MixDimension {
    Generation,
    Model,
    Cluster,
}

pub async fn failure_counts(db: &PgPool, by: MixDimension, w: &Window) -> Result<Vec<FailureCount>, sqlx::Error> {
    let dim = match by {
        MixDimension::Generation => "generation",
        MixDimension::Model => "model",
        MixDimension::Cluster => "cluster",
    };
    let cov = Coverage::of(w.from, w.to);
    let mut acc: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for r in rollups::cause_totals(db, &cov, w.cluster()).await? {
        let grp = match by {
            MixDimension::Generation => r.generation,
            MixDimension::Model => r.model,
            MixDimension::Cluster => r.cluster,
        };
        *acc.entry((grp, r.category, r.component)).or_default() += count(r.failures);
    }
    for (from, to) in &cov.raw {
        for r in fs::group_cause_counts(db, dim, *from, *to, w.cluster()).await? {
            *acc.entry((r.grp, r.category, r.component)).or_default() += count(r.failures);
        }
    }
    Ok(acc
        .into_iter()
        .map(|((group, category, component), failures)| FailureCount {
            group,
            category,
            component,
            failures,
        })
        .collect())
}

/// Failures per root-cause node, and the count of failures with no node.
pub async fn failures_per_node(db: &PgPool, w: &Window) -> Result<(NodeFailures, u64), sqlx::Error> {
    let mut per_node = NodeFailures::new();
    let mut without_node = 0;
    for r in fs::per_root_node(db, w.from, w.to, w.cluster()).await? {
        match r.root_node {
            Some(h) => {
                per_node.insert((r.cluster, h), count(r.failures));
            }
            None => without_node += count(r.failures),
        }
    }
    Ok((per_node, without_node))
}

/// mtbf's failure counts for the window, resolved against the inventory: each whole day, month
/// and quarter of the group rollup as it keys them (labelled nodes by group, others by node),
/// the partial days counted the same way, less the failures of labelled nodes out of service in
/// the window (the rollup counts them with their group; mtbf leaves such nodes out). The same
/// figures as counting each node's failures (the recount test in tests/api/rollups.rs holds them
/// to it).
pub async fn group_failures(db: &PgPool, w: &Window, inventory: &Arc<Inventory>) -> Result<FleetFailures, sqlx::Error> {
    let (buckets, corrections) =
        tokio::try_join!(rollup_buckets(db, w, inventory), group_corrections(db, w, inventory))?;
    let mut f = FleetFailures::new(inventory);
    for b in &buckets {
        f.add(&b.counts);
    }
    for r in corrections.partial_days {
        let n = count(r.failures);
        match r.root_node {
            Some(h) => f.count(inventory.as_rollup(&r.cluster, &h), n),
            None => f.unattributed += n,
        }
    }
    for r in corrections.idle_labelled {
        f.uncount_from_group(inventory, &r.cluster, &r.root_node);
    }
    Ok(f)
}

/// The window's whole buckets of `rollup_groups`, each resolved against `inventory`: from memory
/// while the bucket's versions have not moved and the inventory is the same, else read (all the
/// stale ones in one query) and kept.
async fn rollup_buckets(
    db: &PgPool,
    w: &Window,
    inventory: &Arc<Inventory>,
) -> Result<Vec<Arc<ResolvedBucket>>, sqlx::Error> {
    let cov = Coverage::of(w.from, w.to);
    // The versions are read before the rows: a bucket kept is never older than the versions it
    // is filed under (a writer between the two reads only makes it newer, and the next request
    // sees the moved version and reads it again).
    let buckets = kept::by_bucket(rollups::group_versions(db, &cov, w.cluster()).await?);
    let source = Source::of(db, w.cluster());
    let mut out = Vec::with_capacity(buckets.len());
    let mut stale = Vec::new();
    for (key, versions) in buckets {
        match GROUP_BUCKETS.get(&source, &key, &versions, |b| Arc::ptr_eq(&b.inventory, inventory)) {
            Some(b) => out.push(b),
            None => stale.push((key, versions)),
        }
    }
    if stale.is_empty() {
        return Ok(out);
    }
    let (periods, dates): (Vec<String>, Vec<NaiveDate>) = stale.iter().map(|((p, b), _)| (p.clone(), *b)).unzip();
    let mut read: HashMap<BucketKey, SparseFailures> = HashMap::new();
    for r in rollups::group_rows(db, &periods, &dates, w.cluster()).await? {
        let at = inventory.rollup_row(&r.cluster, &r.node_group, &r.root_node);
        read.entry((r.period, r.bucket))
            .or_default()
            .count(at, count(r.failures));
    }
    for (key, versions) in stale {
        let b = Arc::new(ResolvedBucket {
            inventory: inventory.clone(),
            counts: read.remove(&key).unwrap_or_default(),
        });
        GROUP_BUCKETS.put(source.clone(), key, versions, b.clone());
        out.push(b);
    }
    Ok(out)
}

/// A bucket of `rollup_groups` resolved against an inventory.
struct ResolvedBucket {
    inventory: Arc<Inventory>,
    counts: SparseFailures,
}

impl Weigh for ResolvedBucket {
    fn weight(&self) -> usize {
        self.counts.len()
    }
}

/// At most ~4 M counts (~24 bytes each: ~100 MB) in at most 16,384 buckets (each may hold an
/// inventory no longer current). A year at 100,000 GPUs keeps ~13,000 counts in ~10 buckets;
/// every day, month and quarter of ten years is ~4,000 buckets.
static GROUP_BUCKETS: LazyLock<BucketCache<ResolvedBucket>> = LazyLock::new(|| BucketCache::new(4_000_000, 16_384));

/// What mtbf needs besides the rollup buckets: the failures of the window's partial days per
/// root node, and the window's failures of labelled nodes out of service in it.
struct GroupCorrections {
    partial_days: Vec<fs::NodeCount>,
    idle_labelled: Vec<NodeFailure>,
}

async fn group_corrections(db: &PgPool, w: &Window, inventory: &Inventory) -> Result<GroupCorrections, sqlx::Error> {
    let mut partial_days = Vec::new();
    for (from, to) in &Coverage::of(w.from, w.to).raw {
        partial_days.extend(fs::per_root_node(db, *from, *to, w.cluster()).await?);
    }
    let idle: Vec<(String, String)> = inventory
        .iter()
        .zip(inventory.exposure_hours(w.from, w.to))
        .filter(|(n, h)| n.group.is_some() && *h <= 0.0)
        .map(|(n, _)| (n.cluster.clone(), n.hostname.clone()))
        .collect();
    let idle_labelled = if idle.is_empty() {
        Vec::new()
    } else {
        failures_of_nodes(db, w, &idle).await?
    };
    Ok(GroupCorrections {
        partial_days,
        idle_labelled,
    })
}

/// Failures per (category, component) and per symptom over the window: the root-cause ratios and
/// the symptom mix, from one read of the cause rollup and one of each partial day.
pub struct CauseCounts {
    pub causes: Vec<(String, String, u64)>,
    pub symptoms: Vec<(String, u64)>,
}

pub async fn cause_counts(db: &PgPool, w: &Window) -> Result<CauseCounts, sqlx::Error> {
    let cov = Coverage::of(w.from, w.to);
    let mut causes: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut symptoms: BTreeMap<String, u64> = BTreeMap::new();
    let mut add = |category: String, component: String, symptom: String, n: i64| {
        let n = count(n);
        *causes.entry((category, component)).or_default() += n;
        *symptoms.entry(symptom).or_default() += n;
    };
    for r in rollups::cause_totals(db, &cov, w.cluster()).await? {
        add(r.category, r.component, r.symptom, r.failures);
    }
    for (from, to) in &cov.raw {
        for r in fs::cause_counts(db, *from, *to, w.cluster()).await? {
            add(r.category, r.component, r.symptom, r.failures);
        }
    }
    Ok(CauseCounts {
        causes: causes.into_iter().map(|((c, k), n)| (c, k, n)).collect(),
        symptoms: symptoms.into_iter().collect(),
    })
}

pub async fn error_tally(db: &PgPool, w: &Window) -> Result<ErrorTally, sqlx::Error> {
    fn code(c: &str) -> Option<i64> {
        c.parse().ok()
    }
    let cov = Coverage::of(w.from, w.to);
    let mut rows = rollups::error_totals(db, &cov, w.cluster()).await?;
    for (from, to) in &cov.raw {
        let facts = rollups::error_facts_between(db, *from, *to, w.cluster()).await?;
        rows.extend(facts.into_iter().map(rollups::ErrorTotal::from));
    }
    let mut tally = ErrorTally::default();
    for r in rows {
        let c = code(&r.code);
        tally.add(
            r.kind,
            c,
            r.severity,
            count(r.root_failures),
            count(r.holding_failures),
            count(r.signals),
        );
    }
    Ok(tally)
}

/// Failures per (root kind, root code) with their most common severity.
pub async fn root_errors(db: &PgPool, w: &Window) -> Result<Vec<(String, Option<i64>, u64, String)>, sqlx::Error> {
    Ok(error_tally(db, w).await?.roots())
}

/// (failures, signals) of the window.
pub async fn failure_totals(db: &PgPool, w: &Window) -> Result<(u64, u64), sqlx::Error> {
    let cov = Coverage::of(w.from, w.to);
    let (mut failures, mut signals) = (0, 0);
    for r in rollups::cause_totals(db, &cov, w.cluster()).await? {
        failures += count(r.failures);
        signals += count(r.signals);
    }
    for (from, to) in &cov.raw {
        let (f, s) = fs::totals(db, *from, *to, w.cluster()).await?;
        failures += f;
        signals += s;
    }
    Ok((failures, signals))
}

/// The window's failures of the given (cluster, root node)s, oldest first.
pub async fn failures_of_nodes(
    db: &PgPool,
    w: &Window,
    nodes: &[(String, String)],
) -> Result<Vec<NodeFailure>, sqlx::Error> {
    let (clusters, hosts): (Vec<&str>, Vec<&str>) = nodes.iter().map(|(c, h)| (c.as_str(), h.as_str())).unzip();
    fs::of_nodes(db, w.from, w.to, &clusters, &hosts).await
}

/// Failures per UTC day and effective category.
pub async fn daily_categories(db: &PgPool, w: &Window) -> Result<Vec<(NaiveDate, String, u64)>, sqlx::Error> {
    let cov = Coverage::of(w.from, w.to);
    // Every whole day of the window, months included: the day rows.
    let (first, end) = (cov.days[0].0, cov.days[1].1);
    let mut out = if first < end {
        kept_days(db, w, first, end).await?
    } else {
        Vec::new()
    };
    for (from, to) in &cov.raw {
        out.extend(
            fs::daily_categories(db, *from, *to, w.cluster())
                .await?
                .into_iter()
                .map(|r| (r.day, r.category, count(r.failures))),
        );
    }
    Ok(out)
}

/// The `rollup_causes` day rows of `[first, end)` summed per (day, category), a month at a time:
/// from memory while the month's versions (which move with any of its days) have not moved,
/// else read (the stale months in one query) and kept.
async fn kept_days(
    db: &PgPool,
    w: &Window,
    first: NaiveDate,
    end: NaiveDate,
) -> Result<Vec<(NaiveDate, String, u64)>, sqlx::Error> {
    let next_month = |m: NaiveDate| m.checked_add_months(Months::new(1)).unwrap_or(NaiveDate::MAX);
    let last_month = rollups::month_start(end.pred_opt().unwrap_or(end));
    let months = kept::by_bucket(
        rollups::cause_month_versions(db, rollups::month_start(first), next_month(last_month), w.cluster()).await?,
    );
    let source = Source::of(db, w.cluster());
    let mut kept_months = Vec::with_capacity(months.len());
    let mut stale = Vec::new();
    for (key, versions) in months {
        match DAY_MONTHS.get(&source, &key, &versions, |_| true) {
            Some(m) => kept_months.push(m),
            None => stale.push((key, versions)),
        }
    }
    if let (Some(((_, lo), _)), Some(((_, hi), _))) = (stale.first(), stale.last()) {
        let mut read: HashMap<NaiveDate, Vec<(NaiveDate, String, u64)>> = HashMap::new();
        for r in rollups::daily_categories(db, *lo, next_month(*hi), w.cluster()).await? {
            read.entry(rollups::month_start(r.day))
                .or_default()
                .push((r.day, r.category, count(r.failures)));
        }
        for (key, versions) in stale {
            let m = Arc::new(DayCounts(read.remove(&key.1).unwrap_or_default()));
            DAY_MONTHS.put(source.clone(), key, versions, m.clone());
            kept_months.push(m);
        }
    }
    Ok(kept_months
        .iter()
        .flat_map(|m| m.0.iter().filter(|(day, ..)| *day >= first && *day < end).cloned())
        .collect())
}

/// A month of (day, category, failures).
struct DayCounts(Vec<(NaiveDate, String, u64)>);

impl Weigh for DayCounts {
    fn weight(&self) -> usize {
        self.0.len()
    }
}

/// A month is ~120 (day, category) counts: 100 years of months fit.
static DAY_MONTHS: LazyLock<BucketCache<DayCounts>> = LazyLock::new(|| BucketCache::new(1_000_000, 16_384));

/// The window's failures with their lifecycle, job GPUs and whether their root node was drained
/// within `drain_horizon`.
pub async fn recovery_failures(
    db: &PgPool,
    w: &Window,
    drain_horizon: Duration,
) -> Result<Vec<RecoveryFailure>, sqlx::Error> {
    Ok(fs::with_recovery(db, w.from, w.to, w.cluster(), drain_horizon)
        .await?
        .into_iter()
        .map(|r| RecoveryFailure {
            id: r.id,
            cluster: r.cluster,
            job_id: r.job_id,
            first_at: r.first_at,
            category: r.category,
            component: r.component,
            catalog_transient: r.transient,
            resolution: r.resolution,
            resolved_at: r.resolved_at,
            phases: Phases {
                detection: r.detection_minutes,
                resubmission: r.resubmission_minutes,
                setup: r.setup_minutes,
                recomputation: r.recomputation_minutes,
            },
            gpus: r.gpus.and_then(|g| u32::try_from(g).ok()),
            root_node_drained: r.drained,
        })
        .collect())
}

/// Jobs running at some time in the window.
pub async fn jobs_in_window(db: &PgPool, w: &Window) -> Result<Vec<JobRun>, sqlx::Error> {
    Ok(jobs::running_in(db, w.from, w.to, w.cluster())
        .await?
        .into_iter()
        .map(|r| JobRun {
            cluster: r.cluster,
            job_id: r.job_id,
            gpus: r.gpus.max(0) as u32,
            nodes: r.nodes,
            started_at: r.started_at,
            ended_at: r.ended_at,
            state: r.state,
        })
        .collect())
}

/// Slowdown signals with a usable ratio, and the count of those without one.
pub async fn slowdowns(db: &PgPool, w: &Window) -> Result<(Vec<SlowdownSignal>, u64), sqlx::Error> {
    let mut without_ratio = 0;
    let mut out = Vec::new();
    for r in signal_stats::slowdowns(db, w.from, w.to, w.cluster()).await? {
        match slowdown_ratio(r.step_time_ratio, r.throughput_ratio) {
            Some(ratio) => out.push(SlowdownSignal {
                cluster: r.cluster,
                node: r.node,
                job_id: r.job_id,
                at: r.at,
                ratio,
                duration_seconds: r.duration_seconds,
                job_gpus: r.gpus.and_then(|g| u32::try_from(g).ok()),
            }),
            None => without_ratio += 1,
        }
    }
    Ok((out, without_ratio))
}

/// Low-utilisation incidents per cause: (cause, incidents, hours).
pub async fn low_utilization(db: &PgPool, w: &Window) -> Result<Vec<(Option<String>, u64, f64)>, sqlx::Error> {
    Ok(signal_stats::low_utilization(db, w.from, w.to, w.cluster())
        .await?
        .into_iter()
        .map(|r| (r.cause, count(r.incidents), r.hours.unwrap_or(0.0)))
        .collect())
}
