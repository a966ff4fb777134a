//! Node concentration: how many failures the worst nodes hold. Pure: storage hands in rows; unit-tested in `analytics::cost`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::headline::{ratio, round6};

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct ConcentrationTier {
    /// The worst fraction of nodes (0.01, 0.05, 0.10).
    pub worst_fraction: f64,
    /// ceil(worst_fraction x population), at least 1.
    pub nodes: u64,
    pub failures: u64,
    /// failures of these nodes / failures with a root node.
    pub share: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct NodeFailureCount {
    pub cluster: String,
    pub hostname: String,
    pub failures: u64,
    /// Failures of this node and every worse one / failures with a root node.
    pub cumulative_share: f64,
}

/// Nodes sorted worst first (ties by name) and the tiers. `population`: nodes that could fail (in
/// service in the window); nodes with failures but outside the inventory are added to it.
pub fn concentration(
    per_node: &[((String, String), u64)],
    population: u64,
    fractions: &[f64],
) -> (Vec<NodeFailureCount>, Vec<ConcentrationTier>) {
    let mut nodes: Vec<&((String, String), u64)> = per_node.iter().filter(|(_, n)| *n > 0).collect();
    nodes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let total: u64 = nodes.iter().map(|(_, n)| n).sum();
    let population = population.max(nodes.len() as u64);
    let mut cumulative = 0;
    let ranked: Vec<NodeFailureCount> = nodes
        .iter()
        .map(|((c, h), n)| {
            cumulative += n;
            NodeFailureCount {
                cluster: c.clone(),
                hostname: h.clone(),
                failures: *n,
                cumulative_share: round6(ratio(cumulative, total)),
            }
        })
        .collect();
    let tiers = fractions
        .iter()
        .map(|&p| {
            let k = ((p * population as f64).ceil() as u64).max(1);
            let failures: u64 = ranked.iter().take(k as usize).map(|r| r.failures).sum();
            ConcentrationTier {
                worst_fraction: p,
                nodes: k,
                failures,
                share: round6(ratio(failures, total)),
            }
        })
        .collect();
    (ranked, tiers)
}
