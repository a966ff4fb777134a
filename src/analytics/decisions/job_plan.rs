//! Planning a job of N GPUs from the fleet's measured per-GPU failure rate: its MTBF (per-GPU MTBF
//! / N, independent failures), the checkpoint interval that wastes least (Young 1974; Daly 2006)
//! and the expected effective training time ratio under it (Daly's complete model for exponential
//! failures). Every figure is a monotone function of the job's MTBF, so the exact Poisson interval of
//! the rate is carried through by evaluating the figure at the MTBF's bounds.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::analytics::headline::round6;
use crate::analytics::stats::poisson_rate_ci;

/// A figure with its two-sided interval. `value` is null when undefined (e.g. an MTBF with no
/// failures); a null bound is unbounded (0 below, infinity above).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct Bounded {
    pub value: Option<f64>,
    pub lower: Option<f64>,
    pub upper: Option<f64>,
}

impl Bounded {
    /// `f` (increasing) at the point and at the bounds of an MTBF; `at_infinity` for an unbounded MTBF.
    fn through(m: &Bounded, at_infinity: Option<f64>, f: impl Fn(f64) -> f64) -> Bounded {
        let g = |x: Option<f64>| x.map(&f).or(at_infinity).map(round6);
        Bounded {
            value: m.value.map(&f).map(round6),
            lower: m.lower.map(&f).map(round6),
            upper: g(m.upper),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanInput {
    /// Fleet GPU-hours of exposure the rate is measured over.
    pub gpu_hours: f64,
    /// Failures over that exposure.
    pub failures: u64,
    /// GPUs of the job.
    pub gpus: u64,
    /// Time to write one checkpoint (the job is paused), minutes.
    pub checkpoint_minutes: f64,
    /// Time from an interruption to computing again (detection, resubmission, set-up), minutes.
    pub restart_minutes: f64,
    pub confidence: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct JobPlan {
    pub gpus: u64,
    pub checkpoint_minutes: f64,
    pub restart_minutes: f64,
    pub confidence: f64,
    /// Measured per-GPU failure rate, failures per 1,000 GPU-days (exact Poisson interval).
    pub failures_per_1000_gpu_days: Bounded,
    /// Per-GPU MTBF, hours.
    pub mtbf_per_gpu_hours: Bounded,
    /// The job's expected hours between interruptions: per-GPU MTBF / gpus.
    pub job_mtbf_hours: Bounded,
    /// Expected interruptions per day of the job: 24 / job MTBF.
    pub interruptions_per_day: Bounded,
    /// Young: sqrt(2 C M), minutes of compute between checkpoints.
    pub young_interval_minutes: Bounded,
    /// Daly: sqrt(2 C M) (1 + sqrt(C / 2M) / 3 + (C / 2M) / 9) - C for C < 2M, else M; minutes.
    pub daly_interval_minutes: Bounded,
    /// Expected effective training time ratio (productive / wall-clock) at the Daly interval.
    pub effective_training_time_ratio: Bounded,
}

/// Daly's (2006) higher-order optimum, all in one unit; M itself when C >= 2M.
pub fn daly_interval(c: f64, m: f64) -> f64 {
    if c >= 2.0 * m {
        return m;
    }
    let x = c / (2.0 * m);
    (2.0 * c * m).sqrt() * (1.0 + x.sqrt() / 3.0 + x / 9.0) - c
}

/// Young's (1974) first-order optimum sqrt(2 C M).
pub fn young_interval(c: f64, m: f64) -> f64 {
    (2.0 * c * m).sqrt()
}

/// Productive fraction of wall-clock time with compute interval tau, checkpoint cost c, restart r
/// and exponential failures of mean m (Daly 2006, complete model, failures also during checkpoints
/// and restarts): tau / (m e^(r/m) (e^((tau + c)/m) - 1)). 0 when the job cannot make progress.
pub fn effective_ratio(tau: f64, c: f64, r: f64, m: f64) -> f64 {
    let wall = m * (r / m).exp() * ((tau + c) / m).exp_m1();
    if !(wall.is_finite() && wall > 0.0) {
        return 0.0;
    }
    (tau / wall).clamp(0.0, 1.0)
}

pub fn plan(input: PlanInput) -> JobPlan {
    let n = input.gpus.max(1) as f64;
    let (c, r) = (input.checkpoint_minutes, input.restart_minutes);
    let rate = (input.gpu_hours > 0.0).then(|| input.failures as f64 / input.gpu_hours);
    let (lo, hi) = poisson_rate_ci(input.failures, input.gpu_hours, input.confidence);
    let finite = |x: f64| x.is_finite().then_some(x);
    // Per-GPU failures per GPU-hour; nothing measured without exposure.
    let per_gpu_rate = Bounded {
        value: rate,
        lower: rate.map(|_| lo),
        upper: rate.and_then(|_| finite(hi)),
    };
    let inv = |x: Option<f64>| x.filter(|v| *v > 0.0).map(|v| 1.0 / v);
    // MTBF bounds are the reciprocals of the rate bounds (swapped).
    let mtbf_gpu = Bounded {
        value: inv(per_gpu_rate.value),
        lower: inv(per_gpu_rate.upper),
        upper: inv(per_gpu_rate.lower),
    };
    let job_mtbf = Bounded {
        value: mtbf_gpu.value.map(|m| m / n),
        lower: mtbf_gpu.lower.map(|m| m / n),
        upper: mtbf_gpu.upper.map(|m| m / n),
    };
    let minutes = |m_hours: f64| m_hours * 60.0;
    let daly = |m: f64| daly_interval(c, minutes(m));
    JobPlan {
        gpus: input.gpus,
        checkpoint_minutes: c,
        restart_minutes: r,
        confidence: input.confidence,
        failures_per_1000_gpu_days: Bounded {
            value: per_gpu_rate.value.map(|x| round6(x * 24_000.0)),
            lower: per_gpu_rate.lower.map(|x| round6(x * 24_000.0)),
            upper: per_gpu_rate.upper.map(|x| round6(x * 24_000.0)),
        },
        mtbf_per_gpu_hours: Bounded::through(&mtbf_gpu, None, |m| m),
        job_mtbf_hours: Bounded::through(&job_mtbf, None, |m| m),
        // Decreasing in M: the bounds swap.
        interruptions_per_day: Bounded {
            value: rate.map(|x| round6(x * n * 24.0)),
            lower: per_gpu_rate.lower.map(|x| round6(x * n * 24.0)),
            upper: per_gpu_rate.upper.map(|x| round6(x * n * 24.0)),
        },
        young_interval_minutes: Bounded::through(&job_mtbf, None, |m| young_interval(c, minutes(m))),
        daly_interval_minutes: Bounded::through(&job_mtbf, None, daly),
        effective_training_time_ratio: Bounded::through(&job_mtbf, Some(1.0), |m| {
            effective_ratio(daly(m), c, r, minutes(m))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: Option<f64>, want: f64, tol: f64) {
        let got = got.expect("a value");
        assert!((got - want).abs() <= tol * want.abs(), "got {got}, want {want}");
    }

    #[test]
    fn young_and_daly_by_hand() {
        // M = 600 min, C = 6 min: Young sqrt(7200) = 84.852814.
        // Daly: x = 6 / 1200 = 0.005, sqrt(x) = 0.0707107; 84.852814 x (1 + 0.0235702 + 0.0005556) - 6
        //   = 84.852814 x 1.0241258 - 6 = 86.899954 - 6 = 80.899954.
        assert!((young_interval(6.0, 600.0) - 84.852814).abs() < 1e-6);
        assert!((daly_interval(6.0, 600.0) - 80.899954).abs() < 1e-6);
        // ETTR with R = 30: 80.899954 / (600 e^0.05 (e^(86.899954/600) - 1))
        //   = 80.899954 / (600 x 1.0512711 x 0.1558479) = 80.899954 / 98.302... = 0.822971.
        // (First-order check: tau/(tau+C) x (1 - (R + (tau+C)/2)/M) = 0.930985 x 0.877583 = 0.816991.)
        let e = effective_ratio(80.899954, 6.0, 30.0, 600.0);
        assert!((e - 0.822971).abs() < 1e-6, "{e}");
        // Large cost: C >= 2M gives tau = M (Daly); here 60 min of compute with a 150-min checkpoint.
        assert_eq!(daly_interval(150.0, 60.0), 60.0);
        // A job that cannot progress has ratio ~0, never NaN.
        assert!(effective_ratio(60.0, 150.0, 10.0, 60.0) < 0.03);
        assert_eq!(effective_ratio(1.0, 1.0, 1e6, 1e-3), 0.0);
    }

    #[test]
    fn llama3_sanity() {
        // Llama 3 pre-training: 419 unexpected interruptions in 54 days on 16,384 GPUs.
        // GPU-hours = 54 x 24 x 16,384 = 21,233,664; per-GPU MTBF = 21,233,664 / 419 = 50,676.99 h;
        // job MTBF = 1,296 h / 419 = 3.093079 h = 185.585 min; 419 / 54 = 7.759259 interruptions a day.
        // 95% interval on the count 419 (exact Poisson, bisection on the Poisson CDF in Python):
        // (379.835925, 461.105913) -> job MTBF (1296/461.105913, 1296/379.835925) = (2.810634, 3.412000) h,
        // interruptions a day (7.033999, 8.538998).
        // With a 30-second checkpoint and a 3-minute restart: Daly tau = 13.291654 min, ETTR = 0.913493
        // (0.908649 at the lower MTBF, 0.918174 at the upper): over 90%, as Meta reports.
        let p = plan(PlanInput {
            gpu_hours: 54.0 * 24.0 * 16_384.0,
            failures: 419,
            gpus: 16_384,
            checkpoint_minutes: 0.5,
            restart_minutes: 3.0,
            confidence: 0.95,
        });
        close(p.mtbf_per_gpu_hours.value, 50_676.99, 1e-6);
        close(p.job_mtbf_hours.value, 3.093079, 1e-6);
        close(p.job_mtbf_hours.lower, 2.810634, 1e-6);
        close(p.job_mtbf_hours.upper, 3.412000, 1e-6);
        close(p.interruptions_per_day.value, 7.759259, 1e-6);
        close(p.interruptions_per_day.lower, 7.033999, 1e-6);
        close(p.interruptions_per_day.upper, 8.538998, 1e-6);
        close(
            p.young_interval_minutes.value,
            (2.0_f64 * 0.5 * 185.584726).sqrt(),
            1e-6,
        );
        close(p.daly_interval_minutes.value, 13.291654, 1e-6);
        close(p.effective_training_time_ratio.value, 0.913493, 1e-6);
        close(p.effective_training_time_ratio.lower, 0.908649, 1e-6);
        close(p.effective_training_time_ratio.upper, 0.918174, 1e-6);
        // 419 / (21,233,664 / 24) x 1000 = 0.473590 failures per 1,000 GPU-days.
        close(p.failures_per_1000_gpu_days.value, 0.473590, 1e-5);
        // With 5-minute checkpoints and 10-minute restarts the same fleet gets only 0.744270.
        let slow = plan(PlanInput {
            checkpoint_minutes: 5.0,
            restart_minutes: 10.0,
            gpus: 16_384,
            failures: 419,
            gpu_hours: 54.0 * 24.0 * 16_384.0,
            confidence: 0.95,
        });
        close(slow.effective_training_time_ratio.value, 0.744270, 1e-5);
    }

    #[test]
    fn no_failures_bounds_only_from_below() {
        // 0 failures in 1,000 GPU-hours: rate upper = chi2(0.975; 2) / 2000 = 7.377759 / 2000
        // = 0.003688879 per GPU-hour; per-GPU MTBF >= 271.085 h; an 8-GPU job >= 33.886 h.
        let p = plan(PlanInput {
            gpu_hours: 1000.0,
            failures: 0,
            gpus: 8,
            checkpoint_minutes: 5.0,
            restart_minutes: 10.0,
            confidence: 0.95,
        });
        assert_eq!(p.job_mtbf_hours.value, None);
        assert_eq!(p.job_mtbf_hours.upper, None);
        close(p.job_mtbf_hours.lower, 1000.0 / -(0.025_f64.ln()) / 8.0, 1e-6);
        assert_eq!(p.interruptions_per_day.value, Some(0.0));
        assert_eq!(p.interruptions_per_day.lower, Some(0.0));
        assert_eq!(p.effective_training_time_ratio.value, None);
        assert_eq!(p.effective_training_time_ratio.upper, Some(1.0));
        assert!(p.effective_training_time_ratio.lower.unwrap() > 0.9);
        // No exposure: nothing at all.
        let p = plan(PlanInput {
            gpu_hours: 0.0,
            ..PlanInput {
                gpu_hours: 1.0,
                failures: 3,
                gpus: 8,
                checkpoint_minutes: 5.0,
                restart_minutes: 10.0,
                confidence: 0.95,
            }
        });
        assert_eq!(
            p.job_mtbf_hours,
            Bounded {
                value: None,
                lower: None,
                upper: None
            }
        );
    }
}
