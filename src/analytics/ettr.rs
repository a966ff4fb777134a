//! ETTR (Meta 2024): productive time / wall-clock time of a job, per job and GPU-weighted for the fleet. Pure: storage hands in rows; unit-tested in `analytics::cost`.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::cost::{overlap_hours, r6};
use super::headline::round6;
use super::recovery::RecoveryFailure;
use super::stats::mean;

#[derive(Debug, Clone)]
pub struct JobRun {
    pub cluster: String,
    pub job_id: String,
    pub gpus: u32,
    pub nodes: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    /// completed | failed | cancelled | running.
    pub state: String,
}

impl JobRun {
    /// Wall-clock hours inside [from, to) (a job without an end runs until `to`).
    pub fn wall_hours(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
        overlap_hours(self.started_at, self.ended_at.unwrap_or(to), from, to)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct JobEttr {
    pub cluster: String,
    pub job_id: String,
    pub gpus: u32,
    pub wall_clock_hours: f64,
    pub downtime_hours: f64,
    pub failures: u64,
    /// Failures of the job whose downtime is unknown (counted as 0: the ETTR is then an upper bound).
    pub failures_without_downtime: u64,
    /// (wall_clock_hours - downtime_hours) / wall_clock_hours.
    pub ettr: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct FleetEttr {
    pub jobs: u64,
    pub gpu_hours: f64,
    pub gpu_hours_lost: f64,
    /// GPU-hour weighted: sum(gpus x productive hours) / sum(gpus x wall-clock hours).
    pub ettr: Option<f64>,
    /// Unweighted mean of the per-job ETTRs.
    pub mean_job_ettr: Option<f64>,
}

/// Per-job and fleet ETTR over the jobs running in [from, to). `failures` are the window's failures;
/// those naming a job of `jobs` count against it, their downtime capped at the job's wall clock.
pub fn ettr(
    jobs: &[JobRun],
    failures: &[RecoveryFailure],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> (Vec<JobEttr>, FleetEttr) {
    let mut by_job: HashMap<(&str, &str), (f64, u64, u64)> = HashMap::new();
    for f in failures {
        if let Some(j) = &f.job_id {
            let e = by_job.entry((f.cluster.as_str(), j.as_str())).or_default();
            e.1 += 1;
            match f.downtime_minutes() {
                Some(d) => e.0 += d / 60.0,
                None => e.2 += 1,
            }
        }
    }
    let mut rows = Vec::new();
    let mut per_job = Vec::new();
    let (mut gpu_wall, mut gpu_lost) = (0.0, 0.0);
    for j in jobs {
        let wall = j.wall_hours(from, to);
        if wall <= 0.0 {
            continue;
        }
        let (down, n, unknown) = by_job
            .get(&(j.cluster.as_str(), j.job_id.as_str()))
            .copied()
            .unwrap_or_default();
        let down = down.min(wall);
        gpu_wall += wall * f64::from(j.gpus);
        gpu_lost += down * f64::from(j.gpus);
        per_job.push((wall - down) / wall);
        rows.push(JobEttr {
            cluster: j.cluster.clone(),
            job_id: j.job_id.clone(),
            gpus: j.gpus,
            wall_clock_hours: round6(wall),
            downtime_hours: round6(down),
            failures: n,
            failures_without_downtime: unknown,
            ettr: Some(round6((wall - down) / wall)),
        });
    }
    let fleet = FleetEttr {
        jobs: rows.len() as u64,
        gpu_hours: round6(gpu_wall),
        gpu_hours_lost: round6(gpu_lost),
        ettr: (gpu_wall > 0.0).then(|| round6((gpu_wall - gpu_lost) / gpu_wall)),
        mean_job_ettr: r6(mean(&per_job)),
    };
    rows.sort_by(|a, b| {
        a.ettr
            .unwrap_or(1.0)
            .total_cmp(&b.ettr.unwrap_or(1.0))
            .then_with(|| a.job_id.cmp(&b.job_id))
    });
    (rows, fleet)
}
