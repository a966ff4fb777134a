//! Node concentration: how concentrated failures are on few nodes, and the repeat offenders.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::{Computed, computed, inputs};
use uuid::Uuid;

use crate::analytics::cost::{self as c, ConcentrationTier, NodeFailureCount};
use crate::analytics::headline::NodeService;
use crate::analytics::headline::{ratio, round6};
use crate::domain::window::Window;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OffenderFailure {
    pub id: Uuid,
    pub first_at: DateTime<Utc>,
    /// Effective root cause (post-mortem over automatic).
    pub category: String,
    pub component: String,
    pub root_kind: String,
    pub root_code: Option<i64>,
    pub job_id: Option<String>,
    pub resolution: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RepeatOffender {
    pub cluster: String,
    pub hostname: String,
    pub failures: u64,
    /// Drained at the end of the window.
    pub drained: bool,
    /// Its failures in the window, oldest first.
    pub history: Vec<OffenderFailure>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConcentrationResponse {
    pub window: Computed,
    /// Inventory nodes in service in the window (plus failing nodes outside the inventory).
    pub nodes: u64,
    pub nodes_with_failures: u64,
    pub failures: u64,
    pub failures_with_root_node: u64,
    /// failures_with_root_node / failures: failures confined to one node or device (Alibaba C4: ~82.5%).
    pub node_attributed_share: f64,
    /// Share of failures on the worst 1%, 5% and 10% of nodes.
    pub tiers: Vec<ConcentrationTier>,
    pub k: u64,
    /// Nodes with k or more failures, worst first: candidates to drain.
    pub repeat_offenders: Vec<RepeatOffender>,
    pub definitions: String,
}

const CONCENTRATION_DEFINITIONS: &str = "A failure belongs to its root-cause node. nodes = inventory nodes in service at some \
time in [from, to), plus failing nodes absent from the inventory. Nodes are ranked by failures (ties by name); the worst p of nodes \
are the first ceil(p x nodes) (at least one) and their share is their failures / failures with a root node. node_attributed_share = \
failures with a root node / all failures (Alibaba C4 reports ~82.5% of errors confined to specific nodes or devices). Repeat \
offenders have k or more failures in the window, with their failures (effective root cause) and whether they are drained at `to`.";

pub struct ConcentrationData {
    /// Inventory nodes in service in the window, plus failing nodes outside the inventory.
    pub nodes: u64,
    pub failures: u64,
    pub with_node: u64,
    /// Failing nodes, worst first.
    pub ranked: Vec<NodeFailureCount>,
    pub tiers: Vec<ConcentrationTier>,
}

/// `inventory`: the inventory of the window's cluster (read once by the caller).
pub async fn concentration_data(
    db: &PgPool,
    w: &Window,
    inventory: &[NodeService],
) -> Result<ConcentrationData, sqlx::Error> {
    let population = super::in_service(inventory, w).len() as u64;
    let (per_node, without_node) = inputs::failures_per_node(db, w).await?;
    let per_node: Vec<((String, String), u64)> = per_node.into_iter().collect();
    let with_node: u64 = per_node.iter().map(|(_, n)| n).sum();
    let (ranked, tiers) = c::concentration(&per_node, population, &[0.01, 0.05, 0.10]);
    Ok(ConcentrationData {
        nodes: population.max(ranked.len() as u64),
        failures: with_node + without_node,
        with_node,
        ranked,
        tiers,
    })
}

/// The concentration figures with the nodes of `k` or more failures, and every failing node ranked
/// (for CSV).
pub async fn node_concentration(
    db: &PgPool,
    w: &Window,
    k: u64,
) -> Result<(ConcentrationResponse, Vec<NodeFailureCount>), sqlx::Error> {
    let d = concentration_data(db, w, &inputs::node_service(db, w).await?).await?;
    let offenders: Vec<(String, String)> = d
        .ranked
        .iter()
        .filter(|r| r.failures >= k)
        .map(|r| (r.cluster.clone(), r.hostname.clone()))
        .collect();
    let mut history: BTreeMap<(String, String), Vec<OffenderFailure>> = BTreeMap::new();
    for f in inputs::failures_of_nodes(db, w, &offenders).await? {
        history
            .entry((f.cluster, f.root_node))
            .or_default()
            .push(OffenderFailure {
                id: f.id,
                first_at: f.first_at,
                category: f.category,
                component: f.component,
                root_kind: f.root_kind,
                root_code: f.root_code,
                job_id: f.job_id,
                resolution: f.resolution,
            });
    }
    let marks = super::node_marks(db, w).await?;
    let repeat_offenders = d
        .ranked
        .iter()
        .filter(|r| r.failures >= k)
        .map(|r| {
            let key = (r.cluster.clone(), r.hostname.clone());
            RepeatOffender {
                cluster: r.cluster.clone(),
                hostname: r.hostname.clone(),
                failures: r.failures,
                drained: marks.get(&key).and_then(|m| m.last()).is_some_and(|m| m.1),
                history: history.remove(&key).unwrap_or_default(),
            }
        })
        .collect();
    let ranked = d.ranked;
    let body = ConcentrationResponse {
        window: computed(db, w).await?,
        nodes: d.nodes,
        nodes_with_failures: ranked.len() as u64,
        failures: d.failures,
        failures_with_root_node: d.with_node,
        node_attributed_share: round6(ratio(d.with_node, d.failures)),
        tiers: d.tiers,
        k,
        repeat_offenders,
        definitions: CONCENTRATION_DEFINITIONS.into(),
    };
    Ok((body, ranked))
}
