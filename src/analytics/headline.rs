//! The three headline analytics, computed from plain inputs (node service intervals and failure
//! counts) so they can be unit-tested against hand-computed numbers. SQL lives in storage.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::stats::{MtbfIntervals, natural_cmp, pack_into_groups};

/// A node's service interval and size.
#[derive(Debug, Clone)]
pub struct NodeService {
    pub cluster: String,
    pub hostname: String,
    pub gpu_model: String,
    pub gpu_generation: String,
    pub gpu_count: u32,
    pub group: Option<String>,
    pub in_service_since: DateTime<Utc>,
    pub retired_at: Option<DateTime<Utc>>,
}

impl NodeService {
    /// Hours of service inside [from, to): the overlap of the service interval with the window.
    pub fn exposure_hours(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
        let (since, until) = self.service_nanos();
        hours_between(since.max(epoch_nanos(from)), until.min(epoch_nanos(to)))
    }

    /// The service interval in nanoseconds since the epoch (`i128::MAX` while not retired).
    fn service_nanos(&self) -> (i128, i128) {
        (
            epoch_nanos(self.in_service_since),
            self.retired_at.map_or(i128::MAX, epoch_nanos),
        )
    }
}

/// Nanoseconds since the epoch, wide enough for any `DateTime`.
fn epoch_nanos(t: DateTime<Utc>) -> i128 {
    i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos())
}

/// Whole milliseconds from `start` to `end` in hours, 0 when `end <= start`: the one definition
/// of exposure, on plain integers so a request can take it for 12,500 nodes at once.
fn hours_between(start_ns: i128, end_ns: i128) -> f64 {
    if end_ns <= start_ns {
        0.0
    } else {
        ((end_ns - start_ns) / 1_000_000) as f64 / 3_600_000.0
    }
}

/// The inventory as the analytics read it: the nodes in MTBF's packing order (cluster, then
/// natural hostname order) with the lookups that resolve failure counts to nodes and labelled
/// groups. Built once per inventory version (the read use cases cache it), so a request over a
/// fleet of 100,000 GPUs neither sorts nor hashes its 12,500 nodes.
#[derive(Debug)]
pub struct Inventory {
    nodes: Vec<NodeService>,
    /// Each node's service interval in nanoseconds (see [`NodeService::service_nanos`]).
    service: Vec<(i128, i128)>,
    /// Each node's labelled group, an index into `labels`.
    label_of: Vec<Option<usize>>,
    /// The labelled groups: (cluster, label), in order of their first node.
    labels: Vec<(String, String)>,
    /// Per cluster, its nodes and labels by name (nested so lookups borrow `&str`s).
    by_cluster: foldhash::HashMap<String, ClusterIndex>,
}

#[derive(Debug, Default)]
struct ClusterIndex {
    hosts: foldhash::HashMap<String, usize>,
    labels: foldhash::HashMap<String, usize>,
}

impl Inventory {
    /// Sorts the nodes into packing order. A (cluster, hostname) listed twice resolves to its
    /// first entry (the inventory's key makes the pair unique).
    pub fn new(mut nodes: Vec<NodeService>) -> Inventory {
        nodes.sort_by(|a, b| {
            a.cluster
                .cmp(&b.cluster)
                .then_with(|| natural_cmp(&a.hostname, &b.hostname))
        });
        let mut by_cluster: foldhash::HashMap<String, ClusterIndex> = foldhash::HashMap::default();
        let mut labels = Vec::new();
        let mut label_of = Vec::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            let c = by_cluster.entry(n.cluster.clone()).or_default();
            c.hosts.entry(n.hostname.clone()).or_insert(i);
            label_of.push(n.group.as_ref().map(|g| {
                *c.labels.entry(g.clone()).or_insert_with(|| {
                    labels.push((n.cluster.clone(), g.clone()));
                    labels.len() - 1
                })
            }));
        }
        Inventory {
            service: nodes.iter().map(NodeService::service_nanos).collect(),
            nodes,
            label_of,
            labels,
            by_cluster,
        }
    }

    /// The index of a node in packing order.
    pub fn node(&self, cluster: &str, hostname: &str) -> Option<usize> {
        self.by_cluster.get(cluster)?.hosts.get(hostname).copied()
    }

    fn label(&self, cluster: &str, label: &str) -> Option<usize> {
        self.by_cluster.get(cluster)?.labels.get(label).copied()
    }

    /// Each node's [`NodeService::exposure_hours`] in [from, to), in inventory order.
    pub fn exposure_hours(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<f64> {
        let (from, to) = (epoch_nanos(from), epoch_nanos(to));
        self.service
            .iter()
            .map(|&(since, until)| hours_between(since.max(from), until.min(to)))
            .collect()
    }
}

impl std::ops::Deref for Inventory {
    type Target = [NodeService];

    fn deref(&self) -> &[NodeService] {
        &self.nodes
    }
}

/// Where a failure count lands in an [`Inventory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// On a node (its index in packing order).
    Node(usize),
    /// On a labelled group as a whole.
    Label(usize),
    /// On no node of the inventory, or on no node at all.
    Unattributed,
}

impl Inventory {
    /// A failure of this node, on the node itself.
    pub fn on_node(&self, cluster: &str, hostname: &str) -> Counted {
        self.node(cluster, hostname)
            .map_or(Counted::Unattributed, Counted::Node)
    }

    /// A failure of this node as the group rollup keys it: on its labelled group if it has one.
    pub fn as_rollup(&self, cluster: &str, hostname: &str) -> Counted {
        match self.node(cluster, hostname) {
            Some(i) => self.label_of[i].map_or(Counted::Node(i), Counted::Label),
            None => Counted::Unattributed,
        }
    }

    /// A row of the group rollup: a labelled group (`root_node` ''), a node (`node_group` ''), or
    /// neither (failures with no node). A label no node has is in no group.
    pub fn rollup_row(&self, cluster: &str, node_group: &str, root_node: &str) -> Counted {
        if !node_group.is_empty() {
            self.label(cluster, node_group)
                .map_or(Counted::Unattributed, Counted::Label)
        } else if !root_node.is_empty() {
            self.on_node(cluster, root_node)
        } else {
            Counted::Unattributed
        }
    }
}

/// Failure counts resolved against an [`Inventory`]: per node, and per labelled group where a
/// count says only the group (the group rollup keys a labelled node's failures by its label).
#[derive(Debug, Clone)]
pub struct FleetFailures {
    per_node: Vec<u64>,
    per_label: Vec<u64>,
    /// Failures whose root cause is on no node of the inventory (or on no node at all).
    pub unattributed: u64,
}

/// Counts that land somewhere, without the zeros: what memory keeps of one rollup bucket.
#[derive(Debug, Clone, Default)]
pub struct SparseFailures(Vec<(Counted, u64)>);

impl SparseFailures {
    pub fn count(&mut self, at: Counted, n: u64) {
        if n > 0 {
            self.0.push((at, n));
        }
    }

    /// Entries kept (a measure of the memory it holds).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FleetFailures {
    pub fn new(inventory: &Inventory) -> FleetFailures {
        FleetFailures {
            per_node: vec![0; inventory.nodes.len()],
            per_label: vec![0; inventory.labels.len()],
            unattributed: 0,
        }
    }

    /// Per-node counts, each on its node (the reference the rollup path is tested against).
    pub fn of_nodes(inventory: &Inventory, counts: &NodeFailures) -> FleetFailures {
        let mut f = FleetFailures::new(inventory);
        for ((cluster, hostname), n) in counts {
            f.count(inventory.on_node(cluster, hostname), *n);
        }
        f
    }

    pub fn count(&mut self, at: Counted, n: u64) {
        match at {
            Counted::Node(i) => self.per_node[i] += n,
            Counted::Label(l) => self.per_label[l] += n,
            Counted::Unattributed => self.unattributed += n,
        }
    }

    /// Adds counts resolved against the same inventory.
    pub fn add(&mut self, counts: &SparseFailures) {
        for &(at, n) in &counts.0 {
            self.count(at, n);
        }
    }

    /// Takes one failure of this labelled node off its group: a node out of service in the
    /// window is in no group, but the rollup counted its failures with its label.
    pub fn uncount_from_group(&mut self, inventory: &Inventory, cluster: &str, hostname: &str) {
        if let Counted::Label(l) = inventory.as_rollup(cluster, hostname) {
            self.per_label[l] = self.per_label[l].saturating_sub(1);
        }
    }
}

/// Failures of one group value (generation, model or cluster) by (category, component).
#[derive(Debug, Clone)]
pub struct FailureCount {
    pub group: String,
    pub category: String,
    pub component: String,
    pub failures: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct Share {
    pub name: String,
    pub failures: u64,
    /// Fraction of the failures of the row (0..1).
    pub share: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct MixRow {
    /// The generation, model or cluster.
    pub key: String,
    /// GPUs of nodes in service at some time in the window.
    pub gpus_in_service: u64,
    /// GPU-days of exposure in the window: sum over nodes of GPUs x days in service.
    pub gpu_days: f64,
    pub failures: u64,
    /// failures / gpu_days x 1,000; null without exposure.
    pub failures_per_1000_gpu_days: Option<f64>,
    pub by_category: Vec<Share>,
    pub by_component: Vec<Share>,
}

pub enum MixKey {
    Generation,
    Model,
    Cluster,
}

fn shares(counts: BTreeMap<String, u64>, total: u64) -> Vec<Share> {
    let mut v: Vec<Share> = counts
        .into_iter()
        .map(|(name, failures)| Share {
            share: ratio(failures, total),
            name,
            failures,
        })
        .collect();
    v.sort_by(|a, b| b.failures.cmp(&a.failures).then_with(|| a.name.cmp(&b.name)));
    v
}

pub fn ratio(part: u64, total: u64) -> f64 {
    if total == 0 { 0.0 } else { part as f64 / total as f64 }
}

/// Failure mix per generation / model / cluster, normalised by GPU-days of exposure.
pub fn failure_mix(
    nodes: &[NodeService],
    failures: &[FailureCount],
    by: MixKey,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<MixRow> {
    #[derive(Default)]
    struct Acc {
        gpus: u64,
        gpu_hours: f64,
        failures: u64,
        cat: BTreeMap<String, u64>,
        comp: BTreeMap<String, u64>,
    }
    let mut acc: BTreeMap<String, Acc> = BTreeMap::new();
    for n in nodes {
        let h = n.exposure_hours(from, to);
        if h <= 0.0 {
            continue;
        }
        let key = match by {
            MixKey::Generation => n.gpu_generation.clone(),
            MixKey::Model => n.gpu_model.clone(),
            MixKey::Cluster => n.cluster.clone(),
        };
        let a = acc.entry(key).or_default();
        a.gpus += u64::from(n.gpu_count);
        a.gpu_hours += f64::from(n.gpu_count) * h;
    }
    for f in failures {
        let a = acc.entry(f.group.clone()).or_default();
        a.failures += f.failures;
        *a.cat.entry(f.category.clone()).or_default() += f.failures;
        *a.comp.entry(format!("{}/{}", f.category, f.component)).or_default() += f.failures;
    }
    let mut acc: Vec<(String, Acc)> = acc.into_iter().collect();
    if matches!(by, MixKey::Generation) {
        acc.sort_by(|a, b| crate::domain::gpu::GpuGeneration::age_order(&a.0, &b.0));
    }
    acc.into_iter()
        .map(|(key, a)| {
            let gpu_days = a.gpu_hours / 24.0;
            MixRow {
                key,
                gpus_in_service: a.gpus,
                gpu_days: round6(gpu_days),
                failures: a.failures,
                failures_per_1000_gpu_days: (gpu_days > 0.0).then(|| round6(a.failures as f64 / gpu_days * 1000.0)),
                by_category: shares(a.cat, a.failures),
                by_component: shares(a.comp, a.failures),
            }
        })
        .collect()
}

pub fn round6(x: f64) -> f64 {
    crate::analytics::stats::positive_zero((x * 1e6).round() / 1e6)
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct MtbfGroup {
    /// `cluster/label` for inventory groups, `cluster/auto-N` for packed unlabelled nodes.
    pub group: String,
    pub cluster: String,
    /// Whether the group was packed by Faultline (unlabelled nodes in hostname order).
    pub packed: bool,
    pub nodes: u64,
    pub gpus: u64,
    /// GPU-weighted hours in service in the window: sum(GPUs x hours) / GPUs of the group.
    pub exposure_hours: f64,
    pub gpu_hours: f64,
    pub failures: u64,
    /// exposure_hours / failures; null without failures.
    pub mtbf_hours: Option<f64>,
    /// 95% chi-square interval (exact for a Poisson count); upper is null (infinite) with no failures.
    pub mtbf_lower_hours: f64,
    pub mtbf_upper_hours: Option<f64>,
    pub failures_per_week: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct FleetMtbf {
    pub gpus: u64,
    pub gpu_hours: f64,
    /// Failures in the window attributed to a node of the inventory.
    pub failures: u64,
    /// Mean time between failures of one GPU: gpu_hours / failures.
    pub mtbf_per_gpu_hours: Option<f64>,
    pub mtbf_per_gpu_lower_hours: f64,
    pub mtbf_per_gpu_upper_hours: Option<f64>,
    /// Median MTBF of the groups that had failures.
    pub median_group_mtbf_hours: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct JobProjection {
    pub job_gpus: u64,
    /// Per-GPU MTBF / job_gpus: expected hours between interruptions of a job spanning that many
    /// GPUs, assuming independent failures (the Meta / Unicron projection).
    pub mtbf_hours: Option<f64>,
    pub mtbf_lower_hours: f64,
    pub mtbf_upper_hours: Option<f64>,
    pub failures_per_day: Option<f64>,
}

/// Per-node failure counts keyed by (cluster, hostname).
pub type NodeFailures = BTreeMap<(String, String), u64>;

/// Partitions the fleet into groups and computes MTBF per group and for the fleet. Only nodes in
/// service in the window take part, and only their failures count: a labelled group's count is
/// credited when at least one of its nodes is.
pub fn mtbf(
    inventory: &Inventory,
    failures: &FleetFailures,
    group_size: u32,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    confidence: f64,
) -> (Vec<MtbfGroup>, FleetMtbf) {
    let nodes = &inventory.nodes;
    // (inventory index, hours in service), in packing order.
    let active: Vec<(usize, f64)> = inventory
        .exposure_hours(from, to)
        .into_iter()
        .enumerate()
        .filter(|(_, h)| *h > 0.0)
        .collect();
    #[derive(Default)]
    struct Acc {
        /// The last node of the group (a position in `active`): its cluster and packing name
        /// the group.
        last: usize,
        nodes: u64,
        gpus: u64,
        gpu_hours: f64,
        failures: u64,
    }
    // Each node's group slot; a group's name is formatted once, and nodes whose names coincide
    // (a label that reads like `auto-001`) share the slot, as they share the name.
    let mut slot_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut accs: Vec<Acc> = Vec::new();
    let mut slot = |name: String, accs: &mut Vec<Acc>| -> usize {
        *slot_of.entry(name).or_insert_with(|| {
            accs.push(Acc::default());
            accs.len() - 1
        })
    };
    // Per position in `active`: (slot, packed).
    let mut node_slot: Vec<(usize, bool)> = vec![(0, false); active.len()];
    let mut label_slot: Vec<Option<usize>> = vec![None; inventory.labels.len()];
    let mut unlabelled: Vec<usize> = Vec::new();
    let mut start = 0;
    // A cluster's nodes are contiguous in packing order: one run per cluster.
    while start < active.len() {
        let cluster = nodes[active[start].0].cluster.as_str();
        let mut end = start;
        unlabelled.clear();
        while end < active.len() && nodes[active[end].0].cluster == cluster {
            match inventory.label_of[active[end].0] {
                Some(l) => {
                    let s = match label_slot[l] {
                        Some(s) => s,
                        None => {
                            let s = slot(format!("{cluster}/{}", inventory.labels[l].1), &mut accs);
                            label_slot[l] = Some(s);
                            s
                        }
                    };
                    node_slot[end] = (s, false);
                }
                None => unlabelled.push(end),
            }
            end += 1;
        }
        let counts: Vec<u32> = unlabelled.iter().map(|&k| nodes[active[k].0].gpu_count).collect();
        let mut current: Option<(usize, usize)> = None;
        for (k, g) in pack_into_groups(&counts, group_size).into_iter().enumerate() {
            let s = match current {
                Some((cg, s)) if cg == g => s,
                _ => slot(format!("{cluster}/auto-{g:03}"), &mut accs),
            };
            current = Some((g, s));
            node_slot[unlabelled[k]] = (s, true);
        }
        start = end;
    }
    let mut fleet = FleetMtbf {
        gpus: 0,
        gpu_hours: 0.0,
        failures: 0,
        mtbf_per_gpu_hours: None,
        mtbf_per_gpu_lower_hours: 0.0,
        mtbf_per_gpu_upper_hours: None,
        median_group_mtbf_hours: None,
    };
    for (k, &(i, h)) in active.iter().enumerate() {
        let n = &nodes[i];
        let a = &mut accs[node_slot[k].0];
        a.last = k;
        a.nodes += 1;
        a.gpus += u64::from(n.gpu_count);
        a.gpu_hours += f64::from(n.gpu_count) * h;
        a.failures += failures.per_node[i];
        fleet.gpus += u64::from(n.gpu_count);
        fleet.gpu_hours += f64::from(n.gpu_count) * h;
        fleet.failures += failures.per_node[i];
    }
    // A labelled group's own count, once, on the group of its nodes in service.
    for (l, s) in label_slot.iter().enumerate() {
        if let Some(s) = *s {
            accs[s].failures += failures.per_label[l];
            fleet.failures += failures.per_label[l];
        }
    }
    let mut intervals = MtbfIntervals::new(confidence);
    let rows: Vec<MtbfGroup> = slot_of
        .into_iter()
        .map(|(group, s)| {
            let a = &accs[s];
            let exposure = if a.gpus == 0 { 0.0 } else { a.gpu_hours / a.gpus as f64 };
            let est = intervals.estimate(exposure, a.failures);
            MtbfGroup {
                group,
                cluster: nodes[active[a.last].0].cluster.clone(),
                packed: node_slot[a.last].1,
                nodes: a.nodes,
                gpus: a.gpus,
                exposure_hours: round6(exposure),
                gpu_hours: round6(a.gpu_hours),
                failures: a.failures,
                mtbf_hours: est.mtbf_hours.map(round6),
                mtbf_lower_hours: round6(est.lower_hours),
                mtbf_upper_hours: est.upper_hours.map(round6),
                failures_per_week: (exposure > 0.0).then(|| round6(a.failures as f64 / exposure * 168.0)),
            }
        })
        .collect();
    let est = intervals.estimate(fleet.gpu_hours, fleet.failures);
    fleet.mtbf_per_gpu_hours = est.mtbf_hours.map(round6);
    fleet.mtbf_per_gpu_lower_hours = round6(est.lower_hours);
    fleet.mtbf_per_gpu_upper_hours = est.upper_hours.map(round6);
    fleet.gpu_hours = round6(fleet.gpu_hours);
    let mut with_failures: Vec<f64> = rows.iter().filter_map(|g| g.mtbf_hours).collect();
    with_failures.sort_by(f64::total_cmp);
    fleet.median_group_mtbf_hours = super::stats::median(&with_failures).map(round6);
    (rows, fleet)
}

pub fn project_job(fleet: &FleetMtbf, job_gpus: u64) -> JobProjection {
    let n = job_gpus.max(1) as f64;
    let mtbf = fleet.mtbf_per_gpu_hours.map(|m| round6(m / n));
    JobProjection {
        job_gpus,
        mtbf_hours: mtbf,
        mtbf_lower_hours: round6(fleet.mtbf_per_gpu_lower_hours / n),
        mtbf_upper_hours: fleet.mtbf_per_gpu_upper_hours.map(|u| round6(u / n)),
        failures_per_day: mtbf.map(|m| round6(24.0 / m)),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct CategoryShare {
    #[schema(value_type = crate::domain::taxonomy::Category)]
    pub category: String,
    pub failures: u64,
    /// Fraction of all failures.
    pub share: f64,
    pub components: Vec<ComponentShare>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct ComponentShare {
    pub component: String,
    pub failures: u64,
    /// Fraction of the failures of its category.
    pub share_of_category: f64,
    /// Fraction of all failures (e.g. "GPU 5.5% of all").
    pub share_of_all: f64,
}

/// Root-cause ratios: every category is listed (zero included) so shares are comparable.
pub fn root_causes(counts: &[(String, String, u64)]) -> (u64, Vec<CategoryShare>) {
    let total: u64 = counts.iter().map(|c| c.2).sum();
    let mut out = Vec::new();
    for cat in crate::domain::taxonomy::Category::ALL {
        let of_cat: Vec<&(String, String, u64)> = counts.iter().filter(|c| c.0 == cat.as_str()).collect();
        let n: u64 = of_cat.iter().map(|c| c.2).sum();
        let mut components: Vec<ComponentShare> = of_cat
            .iter()
            .map(|c| ComponentShare {
                component: c.1.clone(),
                failures: c.2,
                share_of_category: round6(ratio(c.2, n)),
                share_of_all: round6(ratio(c.2, total)),
            })
            .collect();
        components.sort_by(|a, b| b.failures.cmp(&a.failures).then_with(|| a.component.cmp(&b.component)));
        out.push(CategoryShare {
            category: cat.as_str().to_string(),
            failures: n,
            share: round6(ratio(n, total)),
            components,
        });
    }
    (total, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn node(
        cluster: &str,
        host: &str,
        generation: &str,
        gpus: u32,
        group: Option<&str>,
        since: &str,
        retired: Option<&str>,
    ) -> NodeService {
        NodeService {
            cluster: cluster.into(),
            hostname: host.into(),
            gpu_model: format!("{generation}-model"),
            gpu_generation: generation.into(),
            gpu_count: gpus,
            group: group.map(Into::into),
            in_service_since: t(since),
            retired_at: retired.map(t),
        }
    }

    const FROM: &str = "2026-11-01T00:00:00Z";
    const TO: &str = "2026-11-08T00:00:00Z"; // 7 days = 168 h

    #[test]
    fn exposure_clips_to_the_window_and_to_service() {
        let n = node(
            "c",
            "a",
            "hopper",
            8,
            None,
            "2026-11-03T00:00:00Z",
            Some("2026-11-05T12:00:00Z"),
        );
        assert_eq!(n.exposure_hours(t(FROM), t(TO)), 60.0);
        let before = node(
            "c",
            "a",
            "hopper",
            8,
            None,
            "2026-01-01T00:00:00Z",
            Some("2026-02-01T00:00:00Z"),
        );
        assert_eq!(before.exposure_hours(t(FROM), t(TO)), 0.0);
        let empty_window = node("c", "a", "hopper", 8, None, "2026-01-01T00:00:00Z", None);
        assert_eq!(empty_window.exposure_hours(t(TO), t(TO)), 0.0);
    }

    #[test]
    fn failure_mix_normalises_by_gpu_days() {
        // Hopper: 2 nodes x 8 GPUs x 7 days = 112 GPU-days, 4 failures -> 35.714286 per 1,000.
        // Ampere: 4 nodes x 8 GPUs x 7 days = 224 GPU-days, 4 failures -> 17.857143 per 1,000:
        // the same count, half the rate.
        let mut nodes: Vec<NodeService> = (0..2)
            .map(|i| node("c", &format!("h{i}"), "hopper", 8, None, "2026-10-01T00:00:00Z", None))
            .collect();
        nodes.extend((0..4).map(|i| node("c", &format!("a{i}"), "ampere", 8, None, "2026-10-01T00:00:00Z", None)));
        let failures = vec![
            FailureCount {
                group: "hopper".into(),
                category: "hardware".into(),
                component: "gpu".into(),
                failures: 3,
            },
            FailureCount {
                group: "hopper".into(),
                category: "user".into(),
                component: "oom".into(),
                failures: 1,
            },
            FailureCount {
                group: "ampere".into(),
                category: "platform".into(),
                component: "storage".into(),
                failures: 4,
            },
            FailureCount {
                group: "unknown".into(),
                category: "unknown".into(),
                component: "unknown".into(),
                failures: 2,
            },
        ];
        let rows = failure_mix(&nodes, &failures, MixKey::Generation, t(FROM), t(TO));
        let hopper = rows.iter().find(|r| r.key == "hopper").unwrap();
        assert_eq!(
            (hopper.gpus_in_service, hopper.gpu_days, hopper.failures),
            (16, 112.0, 4)
        );
        assert_eq!(hopper.failures_per_1000_gpu_days, Some(35.714286));
        assert_eq!(
            hopper.by_category[0],
            Share {
                name: "hardware".into(),
                failures: 3,
                share: 0.75
            }
        );
        assert_eq!(hopper.by_component[1].name, "user/oom");
        let ampere = rows.iter().find(|r| r.key == "ampere").unwrap();
        assert_eq!(ampere.failures_per_1000_gpu_days, Some(17.857143));
        // Failures with no inventory node: counted, but no exposure, so no rate.
        let unknown = rows.iter().find(|r| r.key == "unknown").unwrap();
        assert_eq!((unknown.failures, unknown.failures_per_1000_gpu_days), (2, None));
    }

    #[test]
    fn mtbf_groups_labelled_and_packed_nodes_with_exact_intervals() {
        // Group su1: 16 nodes x 8 GPUs, all week: 168 h exposure, 4 failures -> MTBF 42 h.
        // Unlabelled: 20 nodes x 8 GPUs pack into auto-000 (16 nodes) and auto-001 (4 nodes).
        // n-17 enters service mid-window (84 h): auto-001's exposure = (3x168 + 84) / 4 = 147 h.
        let mut nodes: Vec<NodeService> = (0..16)
            .map(|i| {
                node(
                    "c",
                    &format!("su1-{i}"),
                    "hopper",
                    8,
                    Some("su1"),
                    "2026-10-01T00:00:00Z",
                    None,
                )
            })
            .collect();
        for i in 0..20 {
            let since = if i == 17 {
                "2026-11-04T12:00:00Z"
            } else {
                "2026-10-01T00:00:00Z"
            };
            nodes.push(node("c", &format!("n-{i}"), "ampere", 8, None, since, None));
        }
        let mut failures = NodeFailures::new();
        failures.insert(("c".into(), "su1-3".into()), 3);
        failures.insert(("c".into(), "su1-9".into()), 1);
        failures.insert(("c".into(), "n-18".into()), 2);
        let inventory = Inventory::new(nodes);
        let failures = FleetFailures::of_nodes(&inventory, &failures);
        let (groups, fleet) = mtbf(&inventory, &failures, 128, t(FROM), t(TO), 0.95);
        assert_eq!(
            groups.iter().map(|g| g.group.as_str()).collect::<Vec<_>>(),
            ["c/auto-000", "c/auto-001", "c/su1"]
        );
        let su1 = &groups[2];
        assert_eq!(
            (su1.nodes, su1.gpus, su1.exposure_hours, su1.failures),
            (16, 128, 168.0, 4)
        );
        assert_eq!(su1.mtbf_hours, Some(42.0));
        assert_eq!(su1.failures_per_week, Some(4.0));
        // 2T / chi2(0.975, 10) = 336 / 20.483177 = 16.403705; 2T / chi2(0.025, 8) = 336 / 2.179731 = 154.147479 (scipy)
        assert!(
            (su1.mtbf_lower_hours - 16.403705).abs() < 1e-5,
            "{}",
            su1.mtbf_lower_hours
        );
        assert!(
            (su1.mtbf_upper_hours.unwrap() - 154.147479).abs() < 1e-4,
            "{:?}",
            su1.mtbf_upper_hours
        );
        let auto0 = &groups[0];
        assert_eq!((auto0.nodes, auto0.failures, auto0.mtbf_hours), (16, 0, None));
        // No failures: lower bound 2T / chi2(0.975, 2) = 336 / 7.377759 = 45.542285; upper infinite.
        assert!((auto0.mtbf_lower_hours - 45.542285).abs() < 1e-5);
        assert_eq!(auto0.mtbf_upper_hours, None);
        let auto1 = &groups[1];
        assert_eq!((auto1.nodes, auto1.gpus, auto1.exposure_hours), (4, 32, 147.0));
        assert_eq!(auto1.mtbf_hours, Some(73.5));
        // Fleet: GPU-hours = 32 nodes x 8 x 168 + 3 x 8 x 168 + 8 x 84 = 47,712; 6 failures.
        assert_eq!((fleet.gpus, fleet.gpu_hours, fleet.failures), (288, 47712.0, 6));
        assert_eq!(fleet.mtbf_per_gpu_hours, Some(7952.0));
        assert_eq!(fleet.median_group_mtbf_hours, Some(57.75));
        let job = project_job(&fleet, 1024);
        assert_eq!(job.mtbf_hours, Some(7.765625));
        assert_eq!(job.failures_per_day, Some(3.090543));
    }

    #[test]
    fn mtbf_of_an_empty_window_is_empty() {
        let nodes = vec![node("c", "a", "hopper", 8, None, "2026-10-01T00:00:00Z", None)];
        let inventory = Inventory::new(nodes);
        let none = FleetFailures::new(&inventory);
        let (groups, fleet) = mtbf(&inventory, &none, 128, t(TO), t(TO), 0.95);
        assert!(groups.is_empty());
        assert_eq!((fleet.gpus, fleet.failures, fleet.mtbf_per_gpu_hours), (0, 0, None));
    }

    #[test]
    fn exposure_is_chronos_whole_milliseconds_for_every_node_at_once() {
        // Sub-millisecond service bounds, a retired node, one not yet in service, one retired
        // before the window: each against chrono's own arithmetic on the same instants.
        let at = |s: &str| -> DateTime<Utc> { s.parse().unwrap() };
        let mut nodes = vec![
            node("c", "a", "hopper", 8, None, "2026-10-01T00:00:00Z", None),
            node(
                "c",
                "b",
                "hopper",
                8,
                None,
                "2026-11-02T03:04:05.123456789Z",
                Some("2026-11-06T07:08:09.987654321Z"),
            ),
            node("c", "c", "hopper", 8, None, "2026-11-09T00:00:00Z", None),
            node(
                "c",
                "d",
                "hopper",
                8,
                None,
                "2026-01-01T00:00:00Z",
                Some("2026-02-01T00:00:00Z"),
            ),
        ];
        nodes[0].in_service_since = at("2026-11-01T00:00:00.000999Z");
        let (from, to) = (at("2026-11-01T00:00:00.0005Z"), at("2026-11-07T23:59:59.9999Z"));
        let chrono_hours = |n: &NodeService| {
            let start = n.in_service_since.max(from);
            let end = n.retired_at.map_or(to, |r| r.min(to));
            if end <= start {
                0.0
            } else {
                (end - start).num_milliseconds() as f64 / 3_600_000.0
            }
        };
        let want: Vec<f64> = nodes.iter().map(chrono_hours).collect();
        assert_eq!(
            nodes.iter().map(|n| n.exposure_hours(from, to)).collect::<Vec<_>>(),
            want
        );
        assert_eq!(Inventory::new(nodes).exposure_hours(from, to), want);
        // 2026-11-02T03:04:05.123 to 2026-11-06T07:08:09.987: 100 h 4 min 4.864 s.
        assert_eq!(want[1], 360_244_864.0 / 3_600_000.0);
        assert_eq!((want[2], want[3]), (0.0, 0.0));
    }

    #[test]
    fn inventory_sorts_into_packing_order_whatever_the_input_order() {
        let mk = |host: &str, group: Option<&str>| node("c", host, "hopper", 8, group, "2026-10-01T00:00:00Z", None);
        let inventory = Inventory::new(vec![
            mk("n-10", None),
            node("b", "n-1", "hopper", 8, Some("su1"), "2026-10-01T00:00:00Z", None),
            mk("n-9", Some("su1")),
            mk("n-2", None),
        ]);
        let order: Vec<(&str, &str)> = inventory
            .iter()
            .map(|n| (n.cluster.as_str(), n.hostname.as_str()))
            .collect();
        assert_eq!(order, [("b", "n-1"), ("c", "n-2"), ("c", "n-9"), ("c", "n-10")]);
        assert_eq!(
            (inventory.node("c", "n-10"), inventory.node("c", "n-1")),
            (Some(3), None)
        );
        // su1 of cluster b and su1 of cluster c are two groups.
        assert_eq!(inventory.labels.len(), 2);
    }

    #[test]
    fn group_counts_are_credited_once_and_only_while_a_node_of_the_group_serves() {
        // su1: a, b in service all week, c retired before it. su2: d retired before it.
        // e unlabelled in service.
        let since = "2026-10-01T00:00:00Z";
        let gone = Some("2026-10-15T00:00:00Z");
        let inventory = Inventory::new(vec![
            node("c", "a", "hopper", 8, Some("su1"), since, None),
            node("c", "b", "hopper", 8, Some("su1"), since, None),
            node("c", "c", "hopper", 8, Some("su1"), since, gone),
            node("c", "d", "hopper", 8, Some("su2"), since, gone),
            node("c", "e", "hopper", 8, None, since, None),
        ]);
        let mut f = FleetFailures::new(&inventory);
        // The rollup: 5 failures of su1 (one of them on c, out of service), 2 of su2 (on d), 1 of
        // e, 2 without a node, and 4 of a label nobody has.
        for (group, node, n) in [
            ("su1", "", 5),
            ("su2", "", 2),
            ("", "e", 1),
            ("", "", 2),
            ("su9", "", 4),
        ] {
            f.count(inventory.rollup_row("c", group, node), n);
        }
        // A partial day: 1 on b (counted with su1, as the rollup keys it), 1 on an unknown node.
        assert_eq!(inventory.as_rollup("c", "b"), inventory.rollup_row("c", "su1", ""));
        f.count(inventory.as_rollup("c", "b"), 1);
        f.count(inventory.as_rollup("c", "zz"), 1);
        // The failures of labelled nodes out of service come off their groups.
        f.uncount_from_group(&inventory, "c", "c");
        for _ in 0..2 {
            f.uncount_from_group(&inventory, "c", "d");
        }
        assert_eq!(f.unattributed, 1 + 2 + 4);
        let (groups, fleet) = mtbf(&inventory, &f, 128, t(FROM), t(TO), 0.95);
        let got: Vec<(&str, u64, u64, bool)> = groups
            .iter()
            .map(|g| (g.group.as_str(), g.nodes, g.failures, g.packed))
            .collect();
        // su2 has no node in service: no row, and its failures are in no group.
        assert_eq!(got, [("c/auto-000", 1, 1, true), ("c/su1", 2, 5, false)]);
        assert_eq!((fleet.gpus, fleet.failures), (24, 6));
        // Per-node counts of the same failures give the same groups.
        let mut per_node = NodeFailures::new();
        per_node.insert(("c".into(), "a".into()), 3);
        per_node.insert(("c".into(), "b".into()), 2);
        per_node.insert(("c".into(), "c".into()), 1);
        per_node.insert(("c".into(), "d".into()), 2);
        per_node.insert(("c".into(), "e".into()), 1);
        let reference = FleetFailures::of_nodes(&inventory, &per_node);
        assert_eq!(mtbf(&inventory, &reference, 128, t(FROM), t(TO), 0.95), (groups, fleet));
        // The same rollup rows kept as two sparse buckets and added: the same counts.
        let (mut first, mut second) = (SparseFailures::default(), SparseFailures::default());
        first.count(inventory.rollup_row("c", "su1", ""), 3);
        first.count(inventory.rollup_row("c", "", "e"), 0);
        second.count(inventory.rollup_row("c", "su1", ""), 2);
        second.count(inventory.rollup_row("c", "", "e"), 1);
        assert_eq!((first.len(), second.len()), (1, 2));
        let mut kept = FleetFailures::new(&inventory);
        kept.add(&first);
        kept.add(&second);
        let mut direct = FleetFailures::new(&inventory);
        direct.count(inventory.rollup_row("c", "su1", ""), 5);
        direct.count(inventory.rollup_row("c", "", "e"), 1);
        assert_eq!((kept.per_node, kept.per_label), (direct.per_node, direct.per_label));
    }

    #[test]
    fn root_cause_shares_within_category_and_of_all() {
        // The ICSE 2023 shape: hardware 28 of 100 = node 16 + GPU 5.5 + network 7 (x2 for integers).
        let counts = vec![
            ("hardware".to_string(), "host".to_string(), 32),
            ("hardware".to_string(), "gpu".to_string(), 11),
            ("hardware".to_string(), "network".to_string(), 13),
            ("platform".to_string(), "scheduler".to_string(), 64),
            ("user".to_string(), "code".to_string(), 80),
        ];
        let (total, cats) = root_causes(&counts);
        assert_eq!(total, 200);
        assert_eq!(cats[0].category, "hardware");
        assert_eq!((cats[0].failures, cats[0].share), (56, 0.28));
        assert_eq!(
            cats[0].components[0],
            ComponentShare {
                component: "host".into(),
                failures: 32,
                share_of_category: 0.571429,
                share_of_all: 0.16
            }
        );
        assert_eq!(cats[0].components[2].share_of_all, 0.055);
        assert_eq!(cats[3].category, "unknown");
        assert_eq!((cats[3].failures, cats[3].share), (0, 0.0));
        let (total, cats) = root_causes(&[]);
        assert_eq!((total, cats.len(), cats[0].share), (0, 4, 0.0));
    }
}
