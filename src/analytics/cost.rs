//! What failures cost: recovery and downtime, ETTR, top errors, node concentration, job size,
//! stragglers, low-utilisation causes and the timeline, one file each (re-exported here), and the
//! time helpers they share. Pure: storage hands in rows, these functions compute the figures the
//! literature reports (see `analytics::baselines`); their hand-computed tests are below.

use chrono::{DateTime, Duration, Utc};

use super::headline::round6;

pub(crate) fn hours(d: Duration) -> f64 {
    d.num_milliseconds() as f64 / 3_600_000.0
}

pub(crate) fn r6(x: Option<f64>) -> Option<f64> {
    x.map(round6)
}

/// Overlap of [start, end) with [from, to) in hours (0 when disjoint).
pub fn overlap_hours(start: DateTime<Utc>, end: DateTime<Utc>, from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    let (s, e) = (start.max(from), end.min(to));
    if e <= s { 0.0 } else { hours(e - s) }
}

// ---------------------------------------------------------------------------

pub use super::concentration::*;
pub use super::efficiency::*;
pub use super::errors::*;
pub use super::ettr::*;
pub use super::job_size::*;
pub use super::recovery::*;
pub use super::stragglers::*;
pub use super::timeline::*;

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn failure(
        category: &str,
        transient: bool,
        resolution: Option<&str>,
        phases: Phases,
        gpus: Option<u32>,
    ) -> RecoveryFailure {
        RecoveryFailure {
            id: uuid::Uuid::nil(),
            cluster: "c1".into(),
            job_id: None,
            first_at: t("2026-11-02T10:00:00Z"),
            category: category.into(),
            component: "unknown".into(),
            catalog_transient: transient,
            resolution: resolution.map(Into::into),
            resolved_at: None,
            phases,
            gpus,
            root_node_drained: false,
        }
    }

    fn ph(d: f64, r: f64, s: f64, c: f64) -> Phases {
        Phases {
            detection: Some(d),
            resubmission: Some(r),
            setup: Some(s),
            recomputation: Some(c),
        }
    }

    #[test]
    fn downtime_is_the_sum_of_phases_else_the_resolution_time() {
        // Unicron's GPT-3 recovery: 30 + 9 + 14 + 15 = 68 minutes.
        assert_eq!(
            downtime_minutes(&ph(30.0, 9.0, 14.0, 15.0), t("2026-11-02T10:00:00Z"), None),
            Some(68.0)
        );
        // No phases: resolved 1 h 30 min after the first signal = 90 minutes.
        assert_eq!(
            downtime_minutes(
                &Phases::default(),
                t("2026-11-02T10:00:00Z"),
                Some(t("2026-11-02T11:30:00Z"))
            ),
            Some(90.0)
        );
        assert_eq!(
            downtime_minutes(&Phases::default(), t("2026-11-02T10:00:00Z"), None),
            None
        );
        // Only some phases recorded: their sum (30 + 15).
        let partial = Phases {
            detection: Some(30.0),
            recomputation: Some(15.0),
            ..Default::default()
        };
        assert_eq!(downtime_minutes(&partial, t("2026-11-02T10:00:00Z"), None), Some(45.0));
    }

    /// A failure of `category`/`component` whose downtime is `minutes` (None: unknown).
    fn of(category: &str, component: &str, minutes: Option<f64>) -> RecoveryFailure {
        RecoveryFailure {
            component: component.into(),
            ..failure(
                category,
                false,
                None,
                Phases {
                    detection: minutes,
                    ..Default::default()
                },
                None,
            )
        }
    }

    #[test]
    fn downtime_by_cause_by_hand() {
        let mut fs = vec![
            of("user", "oom", Some(60.0)),
            of("hardware", "gpu", Some(20.0)),
            of("hardware", "network", Some(30.0)),
            of("hardware", "gpu", Some(10.0)),
            of("hardware", "gpu", None),
            of("hardware", "gpu", Some(50.0)),
        ];
        // A resolution time instead of phases (the same downtime definition): 20 minutes, a tie.
        let mut resolved = of("hardware", "gpu", None);
        resolved.resolved_at = Some(t("2026-11-02T10:20:00Z"));
        fs.push(resolved);
        let rows = by_cause(&fs);
        let keys: Vec<(&str, Option<&str>)> = rows
            .iter()
            .map(|r| (r.category.as_str(), r.component.as_deref()))
            .collect();
        // Subtotal first, then components in the taxonomy's order; categories in theirs.
        assert_eq!(
            keys,
            vec![
                ("hardware", None),
                ("hardware", Some("gpu")),
                ("hardware", Some("network")),
                ("user", None),
                ("user", Some("oom")),
            ]
        );
        // hardware: 10, 20, 20, 30, 50 (one unknown): mean 130/5 = 26, median 20, p90 at rank
        // 0.9 x 4 = 3.6: 30 + 0.6 x (50 - 30) = 42.
        let hw = &rows[0];
        assert_eq!((hw.failures, hw.failures_without_downtime), (6, 1));
        assert_eq!(hw.downtime_minutes.count, 5);
        assert_eq!(hw.downtime_minutes.mean, Some(26.0));
        assert_eq!(hw.downtime_minutes.median, Some(20.0));
        assert_eq!(hw.downtime_minutes.p90, Some(42.0));
        assert_eq!(hw.downtime_minutes.total, 130.0);
        // hardware/gpu: 10, 20, 20, 50: mean 25, median (20 + 20) / 2 = 20, p90 at rank 2.7:
        // 20 + 0.7 x (50 - 20) = 41.
        let gpu = &rows[1];
        assert_eq!((gpu.failures, gpu.failures_without_downtime), (5, 1));
        assert_eq!(gpu.downtime_minutes.count, 4);
        assert_eq!(gpu.downtime_minutes.mean, Some(25.0));
        assert_eq!(gpu.downtime_minutes.median, Some(20.0));
        assert_eq!(gpu.downtime_minutes.p90, Some(41.0));
        // One failure: every statistic is its value.
        let net = &rows[2];
        assert_eq!((net.failures, net.downtime_minutes.count), (1, 1));
        assert_eq!(net.downtime_minutes.mean, Some(30.0));
        assert_eq!(net.downtime_minutes.median, Some(30.0));
        assert_eq!(net.downtime_minutes.p90, Some(30.0));
        assert_eq!(rows[3].downtime_minutes, rows[4].downtime_minutes);
        assert_eq!(rows[4].downtime_minutes.median, Some(60.0));
        // The subtotals add up to the whole window's figure.
        let all = recovery(&fs).downtime_minutes;
        assert_eq!(
            all.count,
            rows[0].downtime_minutes.count + rows[3].downtime_minutes.count
        );
        // A cause without a known downtime still has its row, statistics null.
        let none = by_cause(&[of("platform", "storage", None)]);
        assert_eq!(none.len(), 2);
        assert_eq!((none[1].failures, none[1].downtime_minutes.count), (1, 0));
        assert_eq!(none[1].downtime_minutes.median, None);
        // The filters keep the failures of the cause.
        assert_eq!(of_cause(fs.clone(), Some("hardware"), None).len(), 6);
        assert_eq!(of_cause(fs.clone(), Some("hardware"), Some("network")).len(), 1);
        assert_eq!(of_cause(fs, None, Some("oom")).len(), 1);
    }

    #[test]
    fn recovery_summary_by_hand() {
        let fs = vec![
            // 68 min on 128 GPUs: 68/60 x 128 = 145.066667 GPU-hours.
            failure("hardware", true, Some("drained"), ph(30.0, 9.0, 14.0, 15.0), Some(128)),
            // 20 min on 8 GPUs: 20/60 x 8 = 2.666667.
            failure("hardware", false, None, ph(10.0, 5.0, 5.0, 0.0), Some(8)),
            // 120 min, no GPU count.
            failure(
                "user",
                false,
                Some("transient_restart"),
                Phases {
                    detection: Some(120.0),
                    ..Default::default()
                },
                None,
            ),
            // Unknown downtime; catalog says transient.
            failure("platform", true, None, Phases::default(), Some(16)),
        ];
        let s = recovery(&fs);
        assert_eq!(s.failures, 4);
        assert_eq!(s.failures_without_downtime, 1);
        // Downtimes 20, 68, 120: mean 208/3 = 69.333333; median 68; p90 at rank 0.9 x 2 = 1.8:
        // 68 + 0.8 x (120 - 68) = 109.6.
        assert_eq!(s.downtime_minutes.mean, Some(69.333333));
        assert_eq!(s.downtime_minutes.median, Some(68.0));
        assert_eq!(s.downtime_minutes.p90, Some(109.6));
        assert_eq!(s.downtime_minutes.total, 208.0);
        // Phases: detection 30 + 10 + 120 = 160 over 208 phase minutes = 0.769231.
        assert_eq!(s.phases[0].phase, "detection");
        assert_eq!(s.phases[0].minutes.count, 3);
        assert_eq!(s.phases[0].share_of_phase_minutes, 0.769231);
        // Recomputation 15 + 0 = 15 over two failures: mean 7.5.
        assert_eq!(s.phases[3].minutes.mean, Some(7.5));
        // Transient: #1 resolved as drained (not transient despite the catalog), #3 restart, #4 catalog: 2 / 4.
        assert_eq!((s.transient_failures, s.transient_share), (2, 0.5));
        // Hardware: 2, of which #1 drained: 0.5.
        assert_eq!(
            (s.hardware_failures, s.hardware_failures_drained, s.hardware_drain_share),
            (2, 1, 0.5)
        );
        assert_eq!(s.gpu_hours_lost, 147.733333);
        assert_eq!(s.failures_without_gpus, 1);
    }

    #[test]
    fn out_of_service_time_is_clipped_to_the_window() {
        let (from, to) = (t("2026-11-01T00:00:00Z"), t("2026-11-03T00:00:00Z"));
        // Drained the day before the window, returned 6 h in: 6 h. Drained again at 2nd 20:00, never
        // returned: 4 h to the end. A second drain while drained is ignored.
        let tr = vec![
            (t("2026-10-31T00:00:00Z"), true),
            (t("2026-11-01T06:00:00Z"), false),
            (t("2026-11-02T20:00:00Z"), true),
            (t("2026-11-02T21:00:00Z"), true),
        ];
        assert_eq!(out_of_service_hours(&tr, from, to), 10.0);
        assert_eq!(out_of_service_hours(&[], from, to), 0.0);
    }

    #[test]
    fn ettr_per_job_and_fleet() {
        let (from, to) = (t("2026-11-01T00:00:00Z"), t("2026-11-02T00:00:00Z"));
        let job = |id: &str, gpus, s: &str, e: Option<&str>| JobRun {
            cluster: "c1".into(),
            job_id: id.into(),
            gpus,
            nodes: vec![],
            started_at: t(s),
            ended_at: e.map(t),
            state: "completed".into(),
        };
        // j1: 128 GPUs, 10 h, one 68-minute failure and one of unknown downtime.
        // j2: 8 GPUs, started before the window, runs to its end: 12 h inside the window, no failure.
        let jobs = vec![
            job("j1", 128, "2026-11-01T00:00:00Z", Some("2026-11-01T10:00:00Z")),
            job("j2", 8, "2026-10-31T00:00:00Z", None),
        ];
        let mut f1 = failure("hardware", false, None, ph(30.0, 9.0, 14.0, 15.0), Some(128));
        f1.job_id = Some("j1".into());
        let mut f2 = failure("user", false, None, Phases::default(), Some(128));
        f2.job_id = Some("j1".into());
        let (rows, fleet) = ettr(&jobs, &[f1, f2], from, to);
        // j1: (10 - 68/60) / 10 = 8.866667 / 10 = 0.886667.
        let j1 = rows.iter().find(|r| r.job_id == "j1").unwrap();
        assert_eq!(
            (j1.wall_clock_hours, j1.downtime_hours, j1.ettr),
            (10.0, 1.133333, Some(0.886667))
        );
        assert_eq!((j1.failures, j1.failures_without_downtime), (2, 1));
        let j2 = rows.iter().find(|r| r.job_id == "j2").unwrap();
        assert_eq!((j2.wall_clock_hours, j2.ettr), (24.0, Some(1.0)));
        // Fleet: GPU-hours 128 x 10 + 8 x 24 = 1472; lost 128 x 68/60 = 145.066667;
        // ETTR = (1472 - 145.066667) / 1472 = 0.901449; mean of per-job (0.886667 + 1) / 2 = 0.943333.
        assert_eq!(fleet.gpu_hours, 1472.0);
        assert_eq!(fleet.gpu_hours_lost, 145.066667);
        assert_eq!(fleet.ettr, Some(0.901449));
        assert_eq!(fleet.mean_job_ettr, Some(0.943333));
        assert_eq!(rows[0].job_id, "j1", "worst ETTR first");
    }

    #[test]
    fn top_errors_share_and_order() {
        let rows = vec![
            ("ecc".to_string(), Some(2), 5, 5, "critical".to_string()),
            ("nccl_timeout".to_string(), None, 10, 40, "medium".to_string()),
            ("nvlink".to_string(), None, 5, 9, "high".to_string()),
        ];
        // 100 failures, 200 signals: NCCL 10 / 100 = 0.1 of failures, 40 / 200 = 0.2 of signals.
        let out = top_errors(rows, 100, 200, 2);
        assert_eq!(out.len(), 2);
        assert_eq!(
            (out[0].label.as_str(), out[0].share, out[0].signal_share),
            ("nccl_timeout", 0.1, 0.2)
        );
        // ECC and NVLink tie on failures; NVLink has more signals.
        assert_eq!((out[1].label.as_str(), out[1].share), ("nvlink", 0.05));
        assert_eq!(
            top_errors(vec![("xid".into(), Some(79), 1, 1, "critical".into())], 1, 1, 5)[0].label,
            "xid 79"
        );
    }

    #[test]
    fn concentration_tiers_by_hand() {
        // 200 nodes in service; 4 failing nodes: n1 with 10, n2 with 5, n3 and n4 with 1: 17 failures.
        let per_node: Vec<((String, String), u64)> = [("n1", 10), ("n2", 5), ("n3", 1), ("n4", 1)]
            .iter()
            .map(|(h, n)| (("c1".to_string(), h.to_string()), *n))
            .collect();
        let (ranked, tiers) = concentration(&per_node, 200, &[0.01, 0.05, 0.10]);
        // 1% of 200 = 2 nodes: n1 + n2 = 15 / 17 = 0.882353; 5% = 10 nodes and 10% = 20: all 17.
        assert_eq!((tiers[0].nodes, tiers[0].failures, tiers[0].share), (2, 15, 0.882353));
        assert_eq!((tiers[1].nodes, tiers[1].share), (10, 1.0));
        assert_eq!(tiers[2].nodes, 20);
        assert_eq!(
            (ranked[0].hostname.as_str(), ranked[0].cumulative_share),
            ("n1", 0.588235)
        );
        assert_eq!(ranked[3].hostname, "n4");
        // A tiny fleet still takes at least one node: 1% of 10 = 0.1 -> 1 node, 10 / 17.
        let (_, tiers) = concentration(&per_node, 10, &[0.01]);
        assert_eq!((tiers[0].nodes, tiers[0].share), (1, 0.588235));
    }

    #[test]
    fn buckets_and_job_size_by_hand() {
        assert_eq!(
            (
                bucket_of(8),
                bucket_of(9),
                bucket_of(128),
                bucket_of(1023),
                bucket_of(1024),
                bucket_of(4096)
            ),
            ("1-8", "9-64", "65-128", "513-1023", "1024+", "1024+")
        );
        let (from, to) = (t("2026-11-01T00:00:00Z"), t("2026-11-11T00:00:00Z"));
        let job = |id: &str, gpus, hours: i64, state: &str, failures| JobOutcome {
            job: JobRun {
                cluster: "c1".into(),
                job_id: id.into(),
                gpus,
                nodes: vec![],
                started_at: from,
                ended_at: Some(from + Duration::hours(hours)),
                state: state.into(),
            },
            failures,
        };
        // 20 jobs: 18 of 8 GPUs x 10 h (2 failed by scheduler state only), one 128-GPU job of 100 h
        // with 4 failures, one 1024-GPU job of 50 h with 1 failure, cancelled.
        let mut jobs: Vec<JobOutcome> = (0..18)
            .map(|i| {
                job(
                    &format!("s{i:02}"),
                    8,
                    10,
                    if i < 2 { "failed" } else { "completed" },
                    0,
                )
            })
            .collect();
        jobs.push(job("big", 128, 100, "completed", 4));
        jobs.push(job("huge", 1024, 50, "cancelled", 1));
        let (buckets, largest) = job_size(&jobs, from, to, 0.05);
        let small = &buckets[0];
        // 2 / 18 = 0.111111 failed; no interruptions recorded: no MTTF.
        assert_eq!(
            (small.jobs, small.failed_jobs, small.failure_rate, small.mttf_hours),
            (18, 2, 0.111111, None)
        );
        assert_eq!((small.job_hours, small.gpu_hours), (180.0, 1440.0));
        // 128-GPU bucket: 100 h / 4 failures = 25 h MTTF.
        assert_eq!(
            (buckets[2].failures, buckets[2].mttf_hours, buckets[2].gpu_hours),
            (4, Some(25.0), 12800.0)
        );
        assert_eq!((buckets[5].bucket.as_str(), buckets[5].failure_rate), ("1024+", 1.0));
        // Largest 5% of 20 jobs = 1 job: "huge", failed (one failure names it).
        assert_eq!(
            (
                largest.jobs,
                largest.min_gpus,
                largest.failed_jobs,
                largest.failure_rate
            ),
            (1, 1024, 1, 1.0)
        );
    }

    #[test]
    fn projection_follows_meta() {
        // 0.01 failures per node-day, 8 GPUs per node: a 1024-GPU job spans 128 nodes,
        // MTTF = 1 / (128 x 0.01) days = 0.78125 d = 18.75 h.
        let p = project_mttf(0.01, 8.0, &[8, 1024, 1000]);
        assert_eq!((p[0].nodes, p[0].mttf_hours), (1, Some(2400.0)));
        assert_eq!((p[1].nodes, p[1].mttf_hours), (128, Some(18.75)));
        assert_eq!(p[2].nodes, 125);
        assert_eq!(project_mttf(0.0, 8.0, &[8])[0].mttf_hours, None);
    }

    #[test]
    fn straggler_episodes_by_hand() {
        let s = |node: &str, at: &str, ratio: f64, gpus| SlowdownSignal {
            cluster: "c1".into(),
            node: node.into(),
            job_id: Some("j1".into()),
            at: t(at),
            ratio,
            duration_seconds: None,
            job_gpus: Some(gpus),
        };
        let sigs = vec![
            // n1: 10:00 and 10:20 (each covers the 10 minutes before it; gap 10 min <= 30): one episode.
            s("n1", "2026-11-02T10:00:00Z", 2.0, 64),
            s("n1", "2026-11-02T10:20:00Z", 1.5, 64),
            // n1 again at 13:00: a second episode.
            s("n1", "2026-11-02T13:00:00Z", 1.25, 64),
            // n2 below the threshold: ignored.
            s("n2", "2026-11-02T10:00:00Z", 1.05, 64),
        ];
        let eps = straggler_episodes(&sigs, 1.1, 10.0, Duration::minutes(30));
        assert_eq!(eps.len(), 2);
        let e = &eps[0];
        assert_eq!(
            (e.start, e.end, e.signals),
            (t("2026-11-02T09:50:00Z"), t("2026-11-02T10:20:00Z"), 2)
        );
        // Wasted: 64 GPUs x 1/6 h x (1 - 1/2) = 5.333333, + 64 x 1/6 x (1 - 1/1.5) = 3.555556: 8.888889.
        assert_eq!((e.max_ratio, e.mean_ratio, e.gpu_hours_wasted), (2.0, 1.75, 8.888889));
        // 64 x 1/6 x (1 - 0.8) = 2.133333.
        assert_eq!(eps[1].gpu_hours_wasted, 2.133333);
        assert_eq!(slowdown_ratio(None, Some(0.5)), Some(2.0));
        assert_eq!(slowdown_ratio(Some(1.3), Some(0.5)), Some(1.3));
        assert_eq!(slowdown_ratio(Some(-1.0), None), None);
    }

    #[test]
    fn efficiency_mix_by_hand() {
        // 100 incidents: 25 batch size, 28 host-to-GPU, 16 checkpointing, 7 data exchange, 20 other, 4 unnamed.
        let incidents = vec![
            (Some("batch_size".to_string()), 25, 0.0),
            (Some("host_to_device_transfer".to_string()), 28, 14.0),
            (Some("checkpointing".to_string()), 16, 0.0),
            (Some("data_exchange".to_string()), 7, 0.0),
            (Some("cosmic_rays".to_string()), 20, 0.0),
            (None, 4, 0.0),
        ];
        let (fine, coarse) = efficiency_mix(&incidents);
        let get = |v: &[CauseShare], c: &str| v.iter().find(|r| r.cause == c).unwrap().clone();
        assert_eq!(get(&fine, "host_to_device_transfer").share, 0.28);
        assert_eq!(get(&fine, "host_to_device_transfer").hours, 14.0);
        assert_eq!(fine[0].cause, "host_to_device_transfer");
        assert_eq!(get(&fine, "unspecified").incidents, 4);
        assert_eq!(get(&fine, "model").incidents, 0);
        // Model-related: 25 + 16 = 41; data-related: 28 + 7 = 35; other: 20 + 4 = 24.
        assert_eq!(
            (
                get(&coarse, "model").share,
                get(&coarse, "data").share,
                get(&coarse, "other").share
            ),
            (0.41, 0.35, 0.24)
        );
    }

    #[test]
    fn timeline_fills_empty_periods() {
        let d = |s: &str| s.parse::<NaiveDate>().unwrap();
        let counts = vec![
            (d("2026-11-02"), "hardware".to_string(), 3),
            (d("2026-11-04"), "user".to_string(), 1),
            (d("2026-11-04"), "hardware".to_string(), 1),
        ];
        let days = timeline(
            &counts,
            Period::Day,
            t("2026-11-02T00:00:00Z"),
            t("2026-11-05T00:00:00Z"),
        );
        assert_eq!(days.len(), 3);
        assert_eq!(
            (days[0].hardware, days[1].total, days[2].user, days[2].total),
            (3, 0, 1, 2)
        );
        // 2026-11-02 is a Monday: the week from 2 to 8 November holds everything; 11-09 starts the next.
        let weeks = timeline(
            &counts,
            Period::Week,
            t("2026-11-02T00:00:00Z"),
            t("2026-11-10T00:00:00Z"),
        );
        assert_eq!(weeks.len(), 2);
        assert_eq!(
            (weeks[0].period, weeks[0].total, weeks[1].total),
            (d("2026-11-02"), 5, 0)
        );
        assert_eq!(Period::Week.start_of(t("2026-11-08T23:00:00Z")), d("2026-11-02"));
    }
}
