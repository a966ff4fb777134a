//! Job size: failure rate and MTTF by job size, the largest jobs, and the MTTF projection. Pure: storage hands in rows; unit-tested in `analytics::cost`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ettr::JobRun;
use super::headline::{ratio, round6};

/// Size buckets by GPUs, named by their range: the literature's 8, 64, 128, 512, 1024+ marks.
pub const SIZE_BUCKETS: [(&str, u32, u32); 6] = [
    ("1-8", 1, 8),
    ("9-64", 9, 64),
    ("65-128", 65, 128),
    ("129-512", 129, 512),
    ("513-1023", 513, 1023),
    ("1024+", 1024, u32::MAX),
];

pub fn bucket_of(gpus: u32) -> &'static str {
    SIZE_BUCKETS
        .iter()
        .find(|(_, lo, hi)| (*lo..=*hi).contains(&gpus))
        .map_or("1-8", |b| b.0)
}

/// A job with the failures attributed to it in the window.
#[derive(Debug, Clone)]
pub struct JobOutcome {
    pub job: JobRun,
    pub failures: u64,
}

impl JobOutcome {
    /// Failed: the scheduler says so, or at least one failure names the job.
    pub fn failed(&self) -> bool {
        self.job.state == "failed" || self.failures > 0
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct SizeBucket {
    pub bucket: String,
    pub jobs: u64,
    pub failed_jobs: u64,
    /// failed_jobs / jobs.
    pub failure_rate: f64,
    pub failures: u64,
    pub job_hours: f64,
    pub gpu_hours: f64,
    /// job_hours / failures: mean wall-clock time of a job of this size between failures.
    pub mttf_hours: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct LargestJobs {
    /// The fraction of jobs taken, by GPUs (0.05).
    pub fraction: f64,
    pub jobs: u64,
    /// GPUs of the smallest job among them.
    pub min_gpus: u32,
    pub failed_jobs: u64,
    /// failed_jobs / jobs (Unicron: 0.434).
    pub failure_rate: f64,
}

pub fn job_size(
    outcomes: &[JobOutcome],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    largest_fraction: f64,
) -> (Vec<SizeBucket>, LargestJobs) {
    let buckets = SIZE_BUCKETS
        .iter()
        .map(|(name, _, _)| {
            let mine: Vec<&JobOutcome> = outcomes.iter().filter(|o| bucket_of(o.job.gpus) == *name).collect();
            let failed = mine.iter().filter(|o| o.failed()).count() as u64;
            let failures: u64 = mine.iter().map(|o| o.failures).sum();
            let job_hours: f64 = mine.iter().map(|o| o.job.wall_hours(from, to)).sum();
            let gpu_hours: f64 = mine
                .iter()
                .map(|o| o.job.wall_hours(from, to) * f64::from(o.job.gpus))
                .sum();
            SizeBucket {
                bucket: name.to_string(),
                jobs: mine.len() as u64,
                failed_jobs: failed,
                failure_rate: round6(ratio(failed, mine.len() as u64)),
                failures,
                job_hours: round6(job_hours),
                gpu_hours: round6(gpu_hours),
                mttf_hours: (failures > 0).then(|| round6(job_hours / failures as f64)),
            }
        })
        .collect();
    let mut sorted: Vec<&JobOutcome> = outcomes.iter().collect();
    sorted.sort_by(|a, b| {
        b.job
            .gpus
            .cmp(&a.job.gpus)
            .then(b.job.wall_hours(from, to).total_cmp(&a.job.wall_hours(from, to)))
            .then_with(|| a.job.job_id.cmp(&b.job.job_id))
    });
    let k = if sorted.is_empty() {
        0
    } else {
        ((largest_fraction * sorted.len() as f64).ceil() as usize).max(1)
    };
    let top = &sorted[..k];
    let failed = top.iter().filter(|o| o.failed()).count() as u64;
    let largest = LargestJobs {
        fraction: largest_fraction,
        jobs: k as u64,
        min_gpus: top.last().map_or(0, |o| o.job.gpus),
        failed_jobs: failed,
        failure_rate: round6(ratio(failed, k as u64)),
    };
    (buckets, largest)
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct MttfProjection {
    pub gpus: u64,
    /// ceil(gpus / GPUs per node).
    pub nodes: u64,
    /// 1 / (nodes x failures per node-day), in hours.
    pub mttf_hours: Option<f64>,
}

/// Meta's projection: MTTF = 1 / (nodes x failure rate per node-day), for each job size.
pub fn project_mttf(failures_per_node_day: f64, gpus_per_node: f64, sizes: &[u64]) -> Vec<MttfProjection> {
    sizes
        .iter()
        .map(|&gpus| {
            let nodes = if gpus_per_node > 0.0 {
                (gpus as f64 / gpus_per_node).ceil() as u64
            } else {
                0
            };
            let rate = nodes as f64 * failures_per_node_day;
            MttfProjection {
                gpus,
                nodes,
                mttf_hours: (rate > 0.0).then(|| round6(24.0 / rate)),
            }
        })
        .collect()
}
