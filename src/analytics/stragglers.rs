//! Stragglers: slowdown episodes per node and the GPU-hours they waste. Pure: storage hands in rows; unit-tested in `analytics::cost`.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::headline::round6;

#[derive(Debug, Clone)]
pub struct SlowdownSignal {
    pub cluster: String,
    pub node: String,
    pub job_id: Option<String>,
    pub at: DateTime<Utc>,
    /// Step time of this node / the job median (>= 1 is slower).
    pub ratio: f64,
    /// Seconds the measurement covers (ending at `at`), when the sender says.
    pub duration_seconds: Option<f64>,
    /// GPUs of the job (jobs table, else the signal's job_gpus, else the node's GPUs).
    pub job_gpus: Option<u32>,
}

/// A slowdown ratio from the attributes: step_time_ratio as is, throughput_ratio inverted.
pub fn slowdown_ratio(step_time_ratio: Option<f64>, throughput_ratio: Option<f64>) -> Option<f64> {
    match (step_time_ratio, throughput_ratio) {
        (Some(r), _) if r.is_finite() && r > 0.0 => Some(r),
        (_, Some(t)) if t.is_finite() && t > 0.0 => Some(1.0 / t),
        _ => None,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct StragglerEpisode {
    pub cluster: String,
    pub node: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub signals: u64,
    pub max_ratio: f64,
    pub mean_ratio: f64,
    pub jobs: Vec<String>,
    /// Sum over its signals of job GPUs x hours covered x (1 - 1/ratio): the whole job runs at the
    /// straggler's pace, so that fraction of its GPU time is lost.
    pub gpu_hours_wasted: f64,
}

/// Episodes per node: signals with ratio >= min_ratio, each covering [at - duration, at] (duration
/// `default_minutes` when not sent); intervals closer than `gap` merge into one episode.
pub fn straggler_episodes(
    signals: &[SlowdownSignal],
    min_ratio: f64,
    default_minutes: f64,
    gap: Duration,
) -> Vec<StragglerEpisode> {
    let mut by_node: BTreeMap<(&str, &str), Vec<&SlowdownSignal>> = BTreeMap::new();
    for s in signals.iter().filter(|s| s.ratio >= min_ratio) {
        by_node
            .entry((s.cluster.as_str(), s.node.as_str()))
            .or_default()
            .push(s);
    }
    let mut episodes = Vec::new();
    for ((cluster, node), mut sigs) in by_node {
        sigs.sort_by_key(|s| s.at);
        let mut current: Option<(StragglerEpisode, f64)> = None;
        for s in sigs {
            let secs = s
                .duration_seconds
                .filter(|d| d.is_finite() && *d > 0.0)
                .unwrap_or(default_minutes * 60.0);
            let start = s.at - Duration::milliseconds((secs * 1000.0) as i64);
            let wasted = f64::from(s.job_gpus.unwrap_or(0)) * secs / 3600.0 * (1.0 - 1.0 / s.ratio);
            if let Some((ep, sum)) = current.as_mut()
                && start - ep.end <= gap
            {
                ep.end = ep.end.max(s.at);
                ep.signals += 1;
                ep.max_ratio = ep.max_ratio.max(s.ratio);
                *sum += s.ratio;
                ep.gpu_hours_wasted += wasted;
                if let Some(j) = &s.job_id
                    && !ep.jobs.contains(j)
                {
                    ep.jobs.push(j.clone());
                }
                continue;
            }
            if let Some(done) = current.take() {
                episodes.push(finish(done));
            }
            let ep = StragglerEpisode {
                cluster: cluster.to_string(),
                node: node.to_string(),
                start,
                end: s.at,
                signals: 1,
                max_ratio: s.ratio,
                mean_ratio: s.ratio,
                jobs: s.job_id.iter().cloned().collect(),
                gpu_hours_wasted: wasted,
            };
            current = Some((ep, s.ratio));
        }
        if let Some(done) = current.take() {
            episodes.push(finish(done));
        }
    }
    episodes
}

fn finish((mut ep, sum): (StragglerEpisode, f64)) -> StragglerEpisode {
    ep.mean_ratio = round6(sum / ep.signals as f64);
    ep.max_ratio = round6(ep.max_ratio);
    ep.gpu_hours_wasted = round6(ep.gpu_hours_wasted);
    ep
}
