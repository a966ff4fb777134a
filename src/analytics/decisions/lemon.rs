//! Lemon nodes (Meta's research-cluster reliability study): nodes whose failure count is improbable
//! under the fleet's rate for their own exposure. Node i with exposure E_i GPU-hours expects
//! mu_i = (K / E) E_i of the fleet's K failures over E GPU-hours; its tail probability is
//! P(X >= k_i | mu_i) = P(k_i, mu_i) (regularized lower incomplete gamma). Testing every node is m
//! tests, so the probabilities are adjusted by Holm's step-down method (controls the family-wise error
//! rate like Bonferroni, never less powerful). The fleet rate includes the node itself: conservative.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::analytics::headline::round6;
use crate::analytics::stats::gamma_p;

/// One node's exposure and failures in the window.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeObservation {
    pub cluster: String,
    pub hostname: String,
    pub gpu_hours: f64,
    /// Failures by effective component.
    pub components: BTreeMap<String, u64>,
    pub drained: bool,
}

impl NodeObservation {
    pub fn failures(&self) -> u64 {
        self.components.values().sum()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct LemonNode {
    pub cluster: String,
    pub hostname: String,
    pub failures: u64,
    /// Fleet rate x the node's GPU-hours.
    pub expected_failures: f64,
    /// P(X >= failures) for X ~ Poisson(expected_failures).
    pub tail_probability: f64,
    /// Holm-adjusted probability; a lemon when at most alpha.
    pub adjusted_probability: f64,
    /// The component of most of its failures (ties by name).
    #[schema(example = "gpu_memory")]
    pub dominant_component: Option<String>,
    pub dominant_component_failures: u64,
    /// Drained at the end of the window.
    pub drained: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct LemonResult {
    /// Nodes with exposure in the window (the number of tests).
    pub nodes_tested: u64,
    pub failures: u64,
    pub gpu_hours: f64,
    /// Fleet rate the expectation uses, failures per 1,000 GPU-days; null without exposure.
    pub fleet_failures_per_1000_gpu_days: Option<f64>,
    pub alpha: f64,
    #[schema(example = "holm")]
    pub correction: String,
    /// Nodes whose adjusted probability is at most alpha, most improbable first.
    pub lemons: Vec<LemonNode>,
}

/// Poisson upper tail P(X >= k | mu).
pub fn poisson_sf(k: u64, mu: f64) -> f64 {
    if k == 0 {
        1.0
    } else if mu <= 0.0 {
        0.0
    } else {
        gamma_p(k as f64, mu)
    }
}

/// Holm step-down adjusted p-values, in the input order: sorted ascending, the j-th (0-based) of m
/// becomes max over i <= j of min(1, (m - i) p_(i)).
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]).then(a.cmp(&b)));
    let mut out = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (j, &i) in order.iter().enumerate() {
        running = running.max(((m - j) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

pub fn lemon_nodes(nodes: &[NodeObservation], alpha: f64) -> LemonResult {
    let tested: Vec<&NodeObservation> = nodes.iter().filter(|n| n.gpu_hours > 0.0).collect();
    let failures: u64 = tested.iter().map(|n| n.failures()).sum();
    let gpu_hours: f64 = tested.iter().map(|n| n.gpu_hours).sum();
    let rate = if gpu_hours > 0.0 {
        failures as f64 / gpu_hours
    } else {
        0.0
    };
    let expected: Vec<f64> = tested.iter().map(|n| rate * n.gpu_hours).collect();
    let tails: Vec<f64> = tested
        .iter()
        .zip(&expected)
        .map(|(n, mu)| poisson_sf(n.failures(), *mu))
        .collect();
    let adjusted = holm(&tails);
    let mut lemons: Vec<LemonNode> = tested
        .iter()
        .enumerate()
        .filter(|(i, n)| adjusted[*i] <= alpha && n.failures() > 0)
        .map(|(i, n)| {
            let dominant = n
                .components
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)));
            LemonNode {
                cluster: n.cluster.clone(),
                hostname: n.hostname.clone(),
                failures: n.failures(),
                expected_failures: round6(expected[i]),
                tail_probability: tails[i],
                adjusted_probability: adjusted[i],
                dominant_component: dominant.map(|d| d.0.clone()),
                dominant_component_failures: dominant.map_or(0, |d| *d.1),
                drained: n.drained,
            }
        })
        .collect();
    lemons.sort_by(|a, b| {
        a.tail_probability
            .total_cmp(&b.tail_probability)
            .then_with(|| (&a.cluster, &a.hostname).cmp(&(&b.cluster, &b.hostname)))
    });
    LemonResult {
        nodes_tested: tested.len() as u64,
        failures,
        gpu_hours: round6(gpu_hours),
        fleet_failures_per_1000_gpu_days: (gpu_hours > 0.0).then(|| round6(rate * 24_000.0)),
        alpha,
        correction: "holm".into(),
        lemons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, gpu_hours: f64, comps: &[(&str, u64)], drained: bool) -> NodeObservation {
        NodeObservation {
            cluster: "c1".into(),
            hostname: host.into(),
            gpu_hours,
            components: comps.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
            drained,
        }
    }

    #[test]
    fn poisson_tail_by_hand() {
        // P(X >= 1 | 0.7) = 1 - e^-0.7 = 0.503415.
        assert!((poisson_sf(1, 0.7) - (1.0 - (-0.7_f64).exp())).abs() < 1e-12);
        // P(X >= 6 | 0.7) = 1 - e^-0.7 (1 + 0.7 + 0.245 + 0.0571667 + 0.0100042 + 0.0014006)
        //   = 1 - 0.4965853 x 2.0135715 = 1 - 0.9999100 = 9.0026e-5.
        let want = 1.0
            - (-0.7_f64).exp()
                * (0..6)
                    .map(|k| 0.7_f64.powi(k) / (1..=k).product::<i32>().max(1) as f64)
                    .sum::<f64>();
        assert!((poisson_sf(6, 0.7) - want).abs() < 1e-15);
        assert!((poisson_sf(6, 0.7) - 9.0026e-5).abs() < 1e-8);
        assert_eq!(poisson_sf(0, 0.7), 1.0);
        assert_eq!(poisson_sf(2, 0.0), 0.0);
    }

    #[test]
    fn holm_by_hand() {
        // m = 4, sorted 0.01, 0.02, 0.03, 0.5 -> 0.04, max(0.04, 0.06), max(0.06, 0.06), max(0.06, 0.5).
        let adj = holm(&[0.03, 0.01, 0.5, 0.02]);
        let want = [0.06, 0.04, 0.5, 0.06];
        for (g, w) in adj.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{adj:?}");
        }
        // 2 x 0.8 = 1.6, capped at 1; the larger cannot fall below it.
        assert_eq!(holm(&[0.9, 0.8]), vec![1.0, 1.0]);
        assert_eq!(holm(&[0.01]), vec![0.01]);
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn one_lemon_in_ten_nodes() {
        // Ten nodes of 8 GPUs x 240 h = 1,920 GPU-hours each, 19,200 in all. n00 has 6 failures
        // (4 gpu_memory, 2 gpu), n01 has 1, the rest none: K = 7, rate = 7 / 19,200, mu = 0.7 each.
        // n00: tail 9.0026e-5, Holm x 10 = 9.0026e-4 <= 0.05: a lemon.
        // n01: tail 0.503415, adjusted max(9.00e-4, 9 x 0.503) capped at 1: not a lemon.
        let mut nodes = vec![
            node("n00", 1920.0, &[("gpu_memory", 4), ("gpu", 2)], true),
            node("n01", 1920.0, &[("network", 1)], false),
        ];
        for i in 2..10 {
            nodes.push(node(&format!("n{i:02}"), 1920.0, &[], false));
        }
        // A node with no exposure (retired before the window) is not tested.
        nodes.push(node("old", 0.0, &[], false));
        let r = lemon_nodes(&nodes, 0.05);
        assert_eq!(r.nodes_tested, 10);
        assert_eq!(r.failures, 7);
        // 7 / (19,200 / 24) x 1000 = 8.75 per 1,000 GPU-days.
        assert_eq!(r.fleet_failures_per_1000_gpu_days, Some(8.75));
        assert_eq!(r.lemons.len(), 1);
        let l = &r.lemons[0];
        assert_eq!(l.hostname, "n00");
        assert_eq!(l.expected_failures, 0.7);
        assert!((l.tail_probability - 9.0026e-5).abs() < 1e-8);
        assert!((l.adjusted_probability - 9.0026e-4).abs() < 1e-7);
        assert_eq!(l.dominant_component.as_deref(), Some("gpu_memory"));
        assert_eq!(l.dominant_component_failures, 4);
        assert!(l.drained);
    }

    #[test]
    fn uniform_failures_have_no_lemons() {
        // Every node with one failure: mu = 1 each, tail 1 - e^-1 = 0.632: nothing is improbable.
        let nodes: Vec<NodeObservation> = (0..20)
            .map(|i| node(&format!("n{i}"), 100.0, &[("gpu", 1)], false))
            .collect();
        assert!(lemon_nodes(&nodes, 0.05).lemons.is_empty());
        // No failures at all and no nodes: nothing.
        assert!(lemon_nodes(&[node("a", 10.0, &[], false)], 0.05).lemons.is_empty());
        let r = lemon_nodes(&[], 0.05);
        assert_eq!((r.nodes_tested, r.fleet_failures_per_1000_gpu_days), (0, None));
    }
}
