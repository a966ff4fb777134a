//! The storage reads behind the analyses, turned into the analytics' input types (unsigned
//! counts, parsed ratios). Shared by every read use case, so no two read the same figure twice.
//! Counts of failures come from the rollups for the window's whole UTC days and months and from
//! the failures themselves for the partial days at its ends (`rollups::Coverage`): the same
//! numbers as counting every failure, without reading them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};

use chrono::{Duration, NaiveDate};
use sqlx::PgPool;

use crate::analytics::cost::{ErrorTally, JobRun, Phases, RecoveryFailure, SlowdownSignal, slowdown_ratio};
use crate::analytics::headline::{FailureCount, NodeFailures, NodeService};
use crate::analytics::stats::natural_cmp;
use crate::domain::window::Window;
use crate::storage::failure_stats::{self as fs, NodeFailure};
use crate::storage::rollups::{self, Coverage};
use crate::storage::{jobs, nodes, signal_stats};

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Nodes of the inventory (of the window's cluster) with their service intervals, from memory
/// while the inventory's version has not moved (see [`InventoryCache`]).
pub async fn node_service(db: &PgPool, w: &Window) -> Result<Arc<Vec<NodeService>>, sqlx::Error> {
    let key = InventoryKey::of(db, w.cluster());
    // The version is read before the rows: a cached list is never older than the version it is
    // filed under (a write between the two reads only makes it newer, and the next request sees
    // the moved version and reloads).
    let version = nodes::inventory_version(db).await?;
    if let Some(rows) = INVENTORY.get(&key, version) {
        return Ok(rows);
    }
    let mut list: Vec<NodeService> = nodes::service_periods(db, w.cluster())
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
    // In the order MTBF packs unlabelled nodes (cluster, then natural hostname order), sorted once
    // per inventory version: sorting 70,000 hostnames naturally on every request cost tens of ms.
    list.sort_by(|a, b| {
        a.cluster
            .cmp(&b.cluster)
            .then_with(|| natural_cmp(&a.hostname, &b.hostname))
    });
    let rows = Arc::new(list);
    INVENTORY.put(key, version, rows.clone());
    Ok(rows)
}

/// Which inventory list: the database (server, port, name: tests and benchmarks run several in one
/// process) and the cluster filter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct InventoryKey(String, u16, String, Option<String>);

impl InventoryKey {
    fn of(db: &PgPool, cluster: Option<&str>) -> Self {
        let o = db.connect_options();
        InventoryKey(
            o.get_host().to_string(),
            o.get_port(),
            o.get_database().unwrap_or_default().to_string(),
            cluster.map(str::to_string),
        )
    }
}

/// The inventory lists last read, each with the version it was read at. Process-wide rather than
/// per `ApiContext` so every analytic, the report and the decision tables share it without
/// threading it through a dozen signatures; correct across instances and replicas because every
/// use first reads the version from the same database.
struct InventoryCache(Mutex<HashMap<InventoryKey, (i64, Arc<Vec<NodeService>>)>>);

/// Lists kept at most (databases x cluster filters); beyond it the cache starts afresh.
const INVENTORY_LISTS: usize = 64;

static INVENTORY: LazyLock<InventoryCache> = LazyLock::new(|| InventoryCache(Mutex::new(HashMap::new())));

impl InventoryCache {
    fn get(&self, key: &InventoryKey, version: i64) -> Option<Arc<Vec<NodeService>>> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(key)
            .filter(|(v, _)| *v == version)
            .map(|(_, rows)| rows.clone())
    }

    fn put(&self, key: InventoryKey, version: i64, rows: Arc<Vec<NodeService>>) {
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

/// `rollup_groups` over the window's whole days and months: the input of `failures_per_group`,
/// read apart so it can run beside the inventory read (it does not need it).
pub async fn group_rollup(db: &PgPool, w: &Window) -> Result<Vec<rollups::GroupTotal>, sqlx::Error> {
    rollups::group_totals(db, &Coverage::of(w.from, w.to), w.cluster()).await
}

/// Failures per MTBF group, for `mtbf` only, from `rollup` (`group_rollup`) and the failures of
/// the window's partial days: the failures of a labelled group are credited to its
/// first node in service in the window (mtbf sums them per group, so the figures are those of
/// per-node counts); unlabelled and unknown nodes count per node, as do labelled nodes out of
/// service in the window (counted from the failures: mtbf leaves them out). Also the count of
/// failures with no node.
pub async fn failures_per_group(
    db: &PgPool,
    w: &Window,
    inventory: &[NodeService],
    rollup: Vec<rollups::GroupTotal>,
) -> Result<(NodeFailures, u64), sqlx::Error> {
    // Labelled groups' totals, by cluster then label, so lookups borrow instead of allocating a
    // key per node (a fleet has tens of thousands of labelled nodes).
    let mut groups: foldhash::HashMap<String, foldhash::HashMap<String, u64>> = foldhash::HashMap::default();
    let mut per_node = NodeFailures::new();
    let mut without_node = 0;
    for r in rollup {
        let n = count(r.failures);
        if !r.node_group.is_empty() {
            *groups.entry(r.cluster).or_default().entry(r.node_group).or_default() += n;
        } else if !r.root_node.is_empty() {
            *per_node.entry((r.cluster, r.root_node)).or_default() += n;
        } else {
            without_node += n;
        }
    }
    let cov = Coverage::of(w.from, w.to);
    let idle: Vec<(String, String)> = inventory
        .iter()
        .filter(|n| n.group.is_some() && n.exposure_hours(w.from, w.to) <= 0.0)
        .map(|n| (n.cluster.clone(), n.hostname.clone()))
        .collect();
    // A node's label is needed only for the partial days' failures and for idle labelled nodes.
    let label: foldhash::HashMap<(&str, &str), &str> = if cov.raw.is_empty() && idle.is_empty() {
        foldhash::HashMap::default()
    } else {
        inventory
            .iter()
            .filter_map(|n| {
                n.group
                    .as_deref()
                    .map(|g| ((n.cluster.as_str(), n.hostname.as_str()), g))
            })
            .collect()
    };
    for (from, to) in &cov.raw {
        for r in fs::per_root_node(db, *from, *to, w.cluster()).await? {
            let n = count(r.failures);
            match r.root_node {
                None => without_node += n,
                Some(h) => match label.get(&(r.cluster.as_str(), h.as_str())).map(|g| g.to_string()) {
                    Some(g) => *groups.entry(r.cluster).or_default().entry(g).or_default() += n,
                    None => *per_node.entry((r.cluster, h)).or_default() += n,
                },
            }
        }
    }
    if !idle.is_empty() {
        for f in failures_of_nodes(db, w, &idle).await? {
            if let Some(g) = label.get(&(f.cluster.as_str(), f.root_node.as_str())) {
                if let Some(t) = groups.get_mut(&f.cluster).and_then(|c| c.get_mut(*g)) {
                    *t = t.saturating_sub(1);
                }
            }
            *per_node.entry((f.cluster, f.root_node)).or_default() += 1;
        }
    }
    // Each group's total goes on its first node in service: the pure MTBF sums its nodes.
    for n in inventory {
        let Some(g) = &n.group else { continue };
        if n.exposure_hours(w.from, w.to) <= 0.0 {
            continue;
        }
        if let Some(t) = groups.get_mut(&n.cluster).and_then(|c| c.remove(g)) {
            per_node.insert((n.cluster.clone(), n.hostname.clone()), t);
        }
    }
    Ok((per_node, without_node))
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
    let mut out: Vec<(NaiveDate, String, u64)> =
        rollups::daily_categories(db, cov.days[0].0, cov.days[1].1, w.cluster())
            .await?
            .into_iter()
            .map(|r| (r.day, r.category, count(r.failures)))
            .collect();
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
