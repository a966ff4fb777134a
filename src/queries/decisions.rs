//! Read use cases of the decision analytics: compare two windows (or two deployments), plan a job of
//! N GPUs, find lemon nodes. Each reads the inventory and the failures of its windows through
//! `storage`, then calls the pure statistics in `analytics::decisions`; the HTTP handlers and the
//! report's fleet-health section call these same functions, so they show the same numbers.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use crate::analytics::decisions::compare::{RateComparison, Side, compare_rates, verdict};
use crate::analytics::decisions::job_plan::{JobPlan, PlanInput, plan};
use crate::analytics::decisions::lemon::{LemonResult, NodeObservation, lemon_nodes};
use crate::analytics::headline::NodeService;
use crate::domain::taxonomy::Category;
use crate::domain::window::Window;
use crate::queries::inputs;
use crate::storage::decisions::{NodeCauseCount, failures_by_node_and_cause};

/// Confidence of every interval here.
pub const CONFIDENCE: f64 = 0.95;
/// Checkpoint cost when the caller gives none: a synchronous checkpoint of a large model to shared
/// storage takes minutes (docs/decisions.md).
pub const DEFAULT_CHECKPOINT_MINUTES: f64 = 5.0;
/// Restart cost when the caller gives none and no failure of the window has a recorded downtime:
/// Unicron's measured recovery path without its recomputation (which the model counts as lost work
/// itself): 30 min hang detection + 9 min resubmission + 14 min set-up.
pub const DEFAULT_RESTART_MINUTES: f64 = 53.0;

/// A window over one cluster (or all), as the answers show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Span {
    /// Inclusive start.
    pub from: DateTime<Utc>,
    /// Exclusive end.
    pub to: DateTime<Utc>,
    /// Cluster, or null for the whole fleet.
    pub cluster: Option<String>,
}

impl Span {
    pub fn window(&self) -> Window {
        Window {
            from: self.from,
            to: self.to,
            cluster: self.cluster.clone(),
        }
    }
}

impl From<Window> for Span {
    fn from(w: Window) -> Span {
        Span {
            from: w.from,
            to: w.to,
            cluster: w.cluster,
        }
    }
}

/// What a comparison is broken down by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompareBy {
    GpuGeneration,
    Cluster,
    Group,
    Category,
}

impl CompareBy {
    pub fn as_str(self) -> &'static str {
        match self {
            CompareBy::GpuGeneration => "gpu_generation",
            CompareBy::Cluster => "cluster",
            CompareBy::Group => "group",
            CompareBy::Category => "category",
        }
    }
}

/// One group (or category) compared across the two windows.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct KeyedComparison {
    #[schema(example = "hopper")]
    pub key: String,
    #[serde(flatten)]
    pub comparison: RateComparison,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct Comparison {
    pub a: Span,
    pub b: Span,
    pub by: Option<CompareBy>,
    pub confidence: f64,
    /// All failures of each window over all GPU-days of its inventory.
    pub overall: RateComparison,
    /// Per value of `by` (gpu_generation, cluster, group); the categories when by = category; empty
    /// without `by`. Failures without an inventory node count only in overall, cluster and category.
    pub groups: Vec<KeyedComparison>,
    /// Per effective root-cause category (hardware, platform, user, unknown), over all GPU-days.
    pub by_category: Vec<KeyedComparison>,
    /// Failures of A and B whose root cause has no node of the inventory.
    pub a_failures_without_node: u64,
    pub b_failures_without_node: u64,
}

/// One window's exposure and failures, keyed by the dimension.
struct Tally {
    overall: Side,
    groups: BTreeMap<String, Side>,
    categories: BTreeMap<String, Side>,
    without_node: u64,
}

fn add(side: &mut Side, failures: u64, gpu_days: f64) {
    side.failures += failures;
    side.gpu_days += gpu_days;
}

fn zero() -> Side {
    Side {
        failures: 0,
        gpu_days: 0.0,
    }
}

fn node_key(n: &NodeService, by: Option<CompareBy>) -> Option<String> {
    match by? {
        CompareBy::GpuGeneration => Some(n.gpu_generation.clone()),
        CompareBy::Cluster => Some(n.cluster.clone()),
        CompareBy::Group => Some(format!("{}/{}", n.cluster, n.group.as_deref().unwrap_or("unlabelled"))),
        CompareBy::Category => None,
    }
}

/// Exposure and failures of one window: a pure fold over the inventory and the failure counts.
fn tally(nodes: &[NodeService], counts: &[NodeCauseCount], span: &Span, by: Option<CompareBy>) -> Tally {
    let mut t = Tally {
        overall: zero(),
        groups: BTreeMap::new(),
        categories: Category::ALL.iter().map(|c| (c.as_str().to_string(), zero())).collect(),
        without_node: 0,
    };
    let mut index: HashMap<(&str, &str), &NodeService> = HashMap::new();
    for n in nodes {
        index.insert((n.cluster.as_str(), n.hostname.as_str()), n);
        let gpu_days = f64::from(n.gpu_count) * n.exposure_hours(span.from, span.to) / 24.0;
        if gpu_days <= 0.0 {
            continue;
        }
        t.overall.gpu_days += gpu_days;
        if let Some(k) = node_key(n, by) {
            add(t.groups.entry(k).or_insert_with(zero), 0, gpu_days);
        }
    }
    let all_days = t.overall.gpu_days;
    for c in t.categories.values_mut() {
        c.gpu_days = all_days;
    }
    for row in counts {
        let f = row.failures.max(0) as u64;
        t.overall.failures += f;
        add(t.categories.entry(row.category.clone()).or_insert_with(zero), f, 0.0);
        let node = row
            .root_node
            .as_deref()
            .and_then(|h| index.get(&(row.cluster.as_str(), h)));
        if node.is_none() {
            t.without_node += f;
        }
        let key = match (by, node) {
            (Some(CompareBy::Cluster), _) => Some(row.cluster.clone()),
            (_, Some(n)) => node_key(n, by),
            _ => None,
        };
        if let Some(k) = key {
            add(t.groups.entry(k).or_insert_with(zero), f, 0.0);
        }
    }
    if by == Some(CompareBy::Category) {
        t.groups = t.categories.clone();
    }
    t
}

fn keyed(a: &BTreeMap<String, Side>, b: &BTreeMap<String, Side>, names: (&str, &str)) -> Vec<KeyedComparison> {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .map(|k| {
            let sa = a.get(k).copied().unwrap_or_else(zero);
            let sb = b.get(k).copied().unwrap_or_else(zero);
            KeyedComparison {
                key: k.clone(),
                comparison: named(compare_rates(sa, sb, CONFIDENCE), names),
            }
        })
        .collect()
}

fn named(mut c: RateComparison, (a, b): (&str, &str)) -> RateComparison {
    c.verdict = verdict(&c, a, b, CONFIDENCE);
    c
}

/// B against A. `names` label the sides in the verdicts ("A", "B" for the API; "the previous
/// window", "this window" for the report).
pub async fn compare(
    db: &PgPool,
    a: Span,
    b: Span,
    by: Option<CompareBy>,
    names: (&str, &str),
) -> Result<Comparison, sqlx::Error> {
    let nodes_a = inputs::node_service(db, &a.window()).await?;
    let nodes_b = if b.cluster == a.cluster {
        nodes_a.clone()
    } else {
        inputs::node_service(db, &b.window()).await?
    };
    let counts_a = failures_by_node_and_cause(db, a.from, a.to, a.cluster.as_deref()).await?;
    let counts_b = failures_by_node_and_cause(db, b.from, b.to, b.cluster.as_deref()).await?;
    let ta = tally(&nodes_a, &counts_a, &a, by);
    let tb = tally(&nodes_b, &counts_b, &b, by);
    Ok(Comparison {
        overall: named(compare_rates(ta.overall, tb.overall, CONFIDENCE), names),
        groups: if by.is_some() {
            let mut groups = keyed(&ta.groups, &tb.groups, names);
            if by == Some(CompareBy::GpuGeneration) {
                groups.sort_by(|x, y| crate::domain::gpu::GpuGeneration::age_order(&x.key, &y.key));
            }
            groups
        } else {
            Vec::new()
        },
        by_category: keyed(&ta.categories, &tb.categories, names),
        a_failures_without_node: ta.without_node,
        b_failures_without_node: tb.without_node,
        a,
        b,
        by,
        confidence: CONFIDENCE,
    })
}

/// Where the restart cost of a plan came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CostSource {
    /// Given in the request.
    Given,
    /// The median downtime of the window's failures with a recorded lifecycle.
    MeasuredMedian,
    /// The documented default.
    Default,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct JobPlanFigures {
    pub window: Span,
    /// GPU generation the rate is measured on; null for the whole fleet.
    #[schema(example = "hopper")]
    pub generation: Option<String>,
    /// Inventory nodes (of the generation) in service in the window.
    pub nodes: u64,
    pub gpu_hours: f64,
    /// Failures (all causes: any interruption stops the job) whose root node is one of those nodes.
    pub failures: u64,
    pub checkpoint_source: CostSource,
    pub restart_source: CostSource,
    /// Failures of the window whose recorded downtime gave the measured median (0 when not measured).
    pub restart_measured_over: u64,
    pub plan: JobPlan,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobPlanRequest<'a> {
    pub gpus: u64,
    /// Lowercase generation identifier (`GpuGeneration::as_str`).
    pub generation: Option<&'a str>,
    pub checkpoint_minutes: Option<f64>,
    pub restart_minutes: Option<f64>,
}

pub async fn job_plan(db: &PgPool, window: Span, req: JobPlanRequest<'_>) -> Result<JobPlanFigures, sqlx::Error> {
    let cluster = window.cluster.as_deref();
    let inventory = inputs::node_service(db, &window.window()).await?;
    let nodes: Vec<&NodeService> = inventory
        .iter()
        .filter(|n| req.generation.is_none_or(|g| n.gpu_generation == g))
        .filter(|n| n.exposure_hours(window.from, window.to) > 0.0)
        .collect();
    let members: HashSet<(&str, &str)> = nodes
        .iter()
        .map(|n| (n.cluster.as_str(), n.hostname.as_str()))
        .collect();
    let gpu_hours: f64 = nodes
        .iter()
        .map(|n| f64::from(n.gpu_count) * n.exposure_hours(window.from, window.to))
        .sum();
    let failures: u64 = failures_by_node_and_cause(db, window.from, window.to, cluster)
        .await?
        .iter()
        .filter(|r| {
            r.root_node
                .as_deref()
                .is_some_and(|h| members.contains(&(r.cluster.as_str(), h)))
        })
        .map(|r| r.failures.max(0) as u64)
        .sum();
    let (restart_minutes, restart_source, measured_over) = match req.restart_minutes {
        Some(r) => (r, CostSource::Given, 0),
        None => {
            let lifecycles = inputs::recovery_failures(db, &window.window(), chrono::Duration::hours(24)).await?;
            let d = crate::analytics::cost::recovery(&lifecycles).downtime_minutes;
            match d.median {
                Some(m) if d.count > 0 => (m, CostSource::MeasuredMedian, d.count),
                _ => (DEFAULT_RESTART_MINUTES, CostSource::Default, 0),
            }
        }
    };
    let (checkpoint_minutes, checkpoint_source) = match req.checkpoint_minutes {
        Some(c) => (c, CostSource::Given),
        None => (DEFAULT_CHECKPOINT_MINUTES, CostSource::Default),
    };
    let plan = plan(PlanInput {
        gpu_hours,
        failures,
        gpus: req.gpus,
        checkpoint_minutes,
        restart_minutes,
        confidence: CONFIDENCE,
    });
    Ok(JobPlanFigures {
        window,
        generation: req.generation.map(str::to_string),
        nodes: nodes.len() as u64,
        gpu_hours: crate::analytics::headline::round6(gpu_hours),
        failures,
        checkpoint_source,
        restart_source,
        restart_measured_over: measured_over,
        plan,
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct LemonFigures {
    pub window: Span,
    /// The effective root-cause category counted (hardware by default); null for all failures.
    #[schema(example = "hardware")]
    pub category: Option<String>,
    /// Failures of that category whose root node is not in the inventory (not tested).
    pub failures_without_node: u64,
    #[serde(flatten)]
    pub result: LemonResult,
}

/// Nodes whose failures of `category` (None: all) are improbably many, at family-wise level alpha.
pub async fn lemons(
    db: &PgPool,
    window: Span,
    category: Option<Category>,
    alpha: f64,
) -> Result<LemonFigures, sqlx::Error> {
    let cluster = window.cluster.as_deref();
    let nodes = inputs::node_service(db, &window.window()).await?;
    let counts = failures_by_node_and_cause(db, window.from, window.to, cluster).await?;
    let mut drained: HashMap<(String, String), bool> = HashMap::new();
    for t in crate::storage::lifecycle::transitions(db, window.from, window.to, cluster, None).await? {
        // In time order per node: the last one wins.
        drained.insert((t.cluster, t.hostname), t.state == "drained");
    }
    let mut components: HashMap<(&str, &str), BTreeMap<String, u64>> = HashMap::new();
    let mut without_node = 0;
    let known: HashSet<(&str, &str)> = nodes
        .iter()
        .map(|n| (n.cluster.as_str(), n.hostname.as_str()))
        .collect();
    for r in counts
        .iter()
        .filter(|r| category.is_none_or(|c| r.category == c.as_str()))
    {
        match r.root_node.as_deref() {
            Some(h) if known.contains(&(r.cluster.as_str(), h)) => {
                *components
                    .entry((r.cluster.as_str(), h))
                    .or_default()
                    .entry(r.component.clone())
                    .or_default() += r.failures.max(0) as u64;
            }
            _ => without_node += r.failures.max(0) as u64,
        }
    }
    let observations: Vec<NodeObservation> = nodes
        .iter()
        .map(|n| NodeObservation {
            cluster: n.cluster.clone(),
            hostname: n.hostname.clone(),
            gpu_hours: f64::from(n.gpu_count) * n.exposure_hours(window.from, window.to),
            components: components
                .remove(&(n.cluster.as_str(), n.hostname.as_str()))
                .unwrap_or_default(),
            drained: drained
                .get(&(n.cluster.clone(), n.hostname.clone()))
                .copied()
                .unwrap_or(false),
        })
        .collect();
    Ok(LemonFigures {
        window,
        category: category.map(|c| c.as_str().to_string()),
        failures_without_node: without_node,
        result: lemon_nodes(&observations, alpha),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn node(host: &str, gen_: &str, group: Option<&str>, gpus: u32) -> NodeService {
        NodeService {
            cluster: "c1".into(),
            hostname: host.into(),
            gpu_model: "x".into(),
            gpu_generation: gen_.into(),
            gpu_count: gpus,
            group: group.map(str::to_string),
            in_service_since: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            retired_at: None,
        }
    }

    fn count(host: Option<&str>, category: &str, failures: i64) -> NodeCauseCount {
        NodeCauseCount {
            cluster: "c1".into(),
            root_node: host.map(str::to_string),
            category: category.into(),
            component: "gpu".into(),
            failures,
        }
    }

    #[test]
    fn tally_splits_exposure_and_failures_by_key() {
        // Two 8-GPU nodes for 10 days: 80 GPU-days each, 160 in all.
        let span = Span {
            from: Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap(),
            to: Utc.with_ymd_and_hms(2026, 3, 11, 0, 0, 0).unwrap(),
            cluster: None,
        };
        let nodes = [node("a", "hopper", Some("g1"), 8), node("b", "ampere", None, 8)];
        let counts = [
            count(Some("a"), "hardware", 3),
            count(Some("b"), "user", 1),
            count(None, "platform", 2),
            count(Some("ghost"), "hardware", 1),
        ];
        let t = tally(&nodes, &counts, &span, Some(CompareBy::GpuGeneration));
        assert_eq!(
            t.overall,
            Side {
                failures: 7,
                gpu_days: 160.0
            }
        );
        assert_eq!(
            t.groups["hopper"],
            Side {
                failures: 3,
                gpu_days: 80.0
            }
        );
        assert_eq!(
            t.groups["ampere"],
            Side {
                failures: 1,
                gpu_days: 80.0
            }
        );
        assert_eq!(t.without_node, 3);
        assert_eq!(
            t.categories["hardware"],
            Side {
                failures: 4,
                gpu_days: 160.0
            }
        );
        assert_eq!(
            t.categories["unknown"],
            Side {
                failures: 0,
                gpu_days: 160.0
            }
        );
        let t = tally(&nodes, &counts, &span, Some(CompareBy::Group));
        assert_eq!(t.groups["c1/g1"].failures, 3);
        assert_eq!(t.groups["c1/unlabelled"].failures, 1);
        // By cluster, failures without a node still belong to their cluster.
        let t = tally(&nodes, &counts, &span, Some(CompareBy::Cluster));
        assert_eq!(
            t.groups["c1"],
            Side {
                failures: 7,
                gpu_days: 160.0
            }
        );
        let t = tally(&nodes, &counts, &span, Some(CompareBy::Category));
        assert_eq!(t.groups.len(), 4);
    }
}
