//! Stragglers: slowdown episodes per node, the share of nodes that straggle, GPU-hours wasted.

use std::collections::BTreeSet;

use chrono::Duration;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::{Computed, computed, inputs};
use crate::analytics::cost::{self as c, StragglerEpisode};
use crate::analytics::headline::NodeService;
use crate::analytics::headline::{ratio, round6};
use crate::domain::window::Window;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StragglersResponse {
    pub window: Computed,
    pub nodes_in_service: u64,
    pub straggler_nodes: u64,
    /// straggler_nodes / nodes_in_service (MegaScale: ~0.5% of machines).
    pub straggler_node_share: f64,
    pub gpu_hours_wasted: f64,
    pub slowdown_signals: u64,
    /// Slowdown signals with neither step_time_ratio nor throughput_ratio (ignored).
    pub signals_without_ratio: u64,
    pub episodes: Vec<StragglerEpisode>,
    pub definitions: String,
}

const STRAGGLER_DEFINITIONS: &str = "Slowdown signals (kind `slowdown`, sent by the framework per node) in [from, to) carry \
attributes.step_time_ratio (this node's step time / the job median) or attributes.throughput_ratio (inverted), and optionally \
attributes.duration_seconds (the time measured, ending at occurred_at; default sample_minutes). Signals with ratio >= min_ratio form \
episodes per node: intervals less than gap_minutes apart merge. A node straggles when it has an episode; straggler_node_share = \
such nodes / inventory nodes in service in the window (MegaScale, NSDI 2024: ~0.5% of machines). GPU-hours wasted: the whole job \
runs at the straggler's pace, so per signal job GPUs (jobs table, else the signal's job_gpus, else the node's GPUs) x hours covered x \
(1 - 1/ratio).";

pub struct StragglerData {
    pub nodes: u64,
    pub straggling: u64,
    pub signals: u64,
    pub without_ratio: u64,
    pub episodes: Vec<StragglerEpisode>,
}

pub async fn straggler_data(
    db: &PgPool,
    w: &Window,
    inventory: &[NodeService],
    min_ratio: f64,
    sample: f64,
    gap: f64,
) -> Result<StragglerData, sqlx::Error> {
    let (signals, without_ratio) = inputs::slowdowns(db, w).await?;
    let episodes = c::straggler_episodes(
        &signals,
        min_ratio,
        sample,
        Duration::milliseconds((gap * 60_000.0) as i64),
    );
    let straggling: BTreeSet<(&str, &str)> = episodes.iter().map(|e| (e.cluster.as_str(), e.node.as_str())).collect();
    let nodes = (super::in_service(inventory, w).len() as u64).max(straggling.len() as u64);
    Ok(StragglerData {
        nodes,
        straggling: straggling.len() as u64,
        signals: signals.len() as u64 + without_ratio,
        without_ratio,
        episodes,
    })
}

/// Straggler thresholds: the slowdown ratio from which a node straggles, the minutes a signal
/// covers when it says nothing, and the gap that splits episodes.
pub struct StragglerParams {
    pub min_ratio: f64,
    pub sample_minutes: f64,
    pub gap_minutes: f64,
}

impl Default for StragglerParams {
    fn default() -> Self {
        StragglerParams {
            min_ratio: 1.1,
            sample_minutes: 10.0,
            gap_minutes: 30.0,
        }
    }
}

pub async fn stragglers(db: &PgPool, w: &Window, p: &StragglerParams) -> Result<StragglersResponse, sqlx::Error> {
    let inventory = inputs::node_service(db, w).await?;
    let d = straggler_data(db, w, &inventory, p.min_ratio, p.sample_minutes, p.gap_minutes).await?;
    let wasted: f64 = d.episodes.iter().map(|e| e.gpu_hours_wasted).sum();
    let body = StragglersResponse {
        window: computed(db, w).await?,
        nodes_in_service: d.nodes,
        straggler_nodes: d.straggling,
        straggler_node_share: round6(ratio(d.straggling, d.nodes)),
        gpu_hours_wasted: round6(wasted),
        slowdown_signals: d.signals,
        signals_without_ratio: d.without_ratio,
        episodes: d.episodes,
        definitions: STRAGGLER_DEFINITIONS.into(),
    };
    Ok(body)
}
