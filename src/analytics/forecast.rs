//! Failure forecasts: how many parts of a group fail in the next horizon, with a prediction
//! interval and the spares to hold, by three methods whose own backtest on the group's history
//! picks the one answered. Pure: parts come as their installed intervals and event times.
//!
//! Methods, for an origin T and a horizon of H days, over the parts in service at T:
//!
//! - `naive`: the count of the last H days before T, as a Poisson mean;
//! - `afr`: the failures per part-year of the window before T (`AFR window`), times the part-years
//!   the parts in service at T would serve in H; Poisson;
//! - `weibull`: a Weibull fitted by maximum likelihood to the group's lives before T (first
//!   failure, right-censored at T, left-truncated at the age a part was first seen); each part of
//!   age a at T fails in the horizon with probability 1 - S(a + H) / S(a); the count is the sum of
//!   those independent trials (Poisson-binomial, computed exactly).
//!
//! Intervals and the spares quantile come from the predictive distribution itself: the 90 %
//! interval is [q(0.05), q(0.95)], the spares for service level s the smallest k with
//! P(count <= k) >= s.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::part_life::{Interval, age_days_at};

/// Seconds per day.
const DAY: f64 = 86_400.0;

/// Failure ages are at least this (days): a part that fails the day it is installed still has a
/// positive lifetime for the logarithm of the Weibull density.
const MIN_AGE_DAYS: f64 = 1e-3;

/// A forecasting method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    Naive,
    Afr,
    Weibull,
}

impl Method {
    pub const ALL: [Method; 3] = [Method::Naive, Method::Afr, Method::Weibull];

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Naive => "naive",
            Method::Afr => "afr",
            Method::Weibull => "weibull",
        }
    }
}

/// One part's history: when it was installed, and when its events (failures) happened.
#[derive(Debug, Clone, PartialEq)]
pub struct PartHistory {
    pub intervals: Vec<Interval>,
    /// Event times, in any order.
    pub events: Vec<DateTime<Utc>>,
    /// Age in days the part already had when its first interval began (a part first seen at a
    /// later age: its life is left-truncated there).
    pub age_at_first_sight: f64,
}

impl PartHistory {
    fn in_service_at(&self, t: DateTime<Utc>) -> bool {
        self.intervals
            .iter()
            .any(|i| i.from <= t && i.to.is_none_or(|to| to > t))
    }

    fn age_at(&self, t: DateTime<Utc>) -> f64 {
        self.age_at_first_sight + age_days_at(&self.intervals, t)
    }

    fn events_in(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> usize {
        self.events.iter().filter(|e| **e > from && **e <= to).count()
    }

    /// Installed days within (from, to].
    fn days_in(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
        (age_days_at(&self.intervals, to) - age_days_at(&self.intervals, from)).max(0.0)
    }
}

/// A lifetime as survival analysis reads it: observed from age `entry` to age `exit` (days), ending
/// in an event or censored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lifetime {
    pub entry: f64,
    pub exit: f64,
    pub event: bool,
}

/// A fitted Weibull: S(t) = exp(-(t / scale)^shape), t in days.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WeibullFit {
    pub shape: f64,
    /// Days.
    pub scale: f64,
    /// 95 % Wald interval of the shape, from the observed information on the log scale.
    pub shape_lower: f64,
    pub shape_upper: f64,
    pub scale_lower: f64,
    pub scale_upper: f64,
    pub events: u64,
    pub subjects: u64,
    /// Covariance of (ln shape, ln scale): variances and their covariance.
    #[serde(skip)]
    pub covariance: [f64; 3],
}

impl WeibullFit {
    /// The count of failures in the next `horizon` days of parts of ages `ages`: the sum of their
    /// independent trials under the fitted Weibull, averaged over the fit's own uncertainty (a
    /// 3 x 3 Gauss-Hermite rule over the normal of (ln shape, ln scale)); without it a fit from a
    /// few hundred failures gives intervals too narrow to cover what happens.
    pub fn predictive(&self, ages: &[f64], horizon: f64) -> Predictive {
        let [vx, vy, cxy] = self.covariance;
        if !(vx.is_finite() && vy.is_finite() && cxy.is_finite()) || vx <= 0.0 || vy <= 0.0 {
            let ps: Vec<f64> = ages.iter().map(|a| self.conditional_failure(*a, horizon)).collect();
            return Predictive::bernoulli_sum(&ps);
        }
        // Cholesky of the covariance: x = sx z1, y = r z1 + q z2.
        let sx = vx.sqrt();
        let r = cxy / sx;
        let q = (vy - r * r).max(0.0).sqrt();
        let nodes = [(-(3f64.sqrt()), 1.0 / 6.0), (0.0, 2.0 / 3.0), (3f64.sqrt(), 1.0 / 6.0)];
        let mut mixed: Vec<f64> = Vec::new();
        for (z1, w1) in nodes {
            for (z2, w2) in nodes {
                let fit = WeibullFit {
                    shape: (self.shape.ln() + sx * z1).exp(),
                    scale: (self.scale.ln() + r * z1 + q * z2).exp(),
                    ..*self
                };
                let ps: Vec<f64> = ages.iter().map(|a| fit.conditional_failure(*a, horizon)).collect();
                let p = Predictive::bernoulli_sum(&ps);
                if mixed.len() < p.pmf.len() {
                    mixed.resize(p.pmf.len(), 0.0);
                }
                for (k, v) in p.pmf.iter().enumerate() {
                    mixed[k] += w1 * w2 * v;
                }
            }
        }
        Predictive { pmf: mixed }
    }

    /// P(failure within `horizon` days | in service at age `age`) = 1 - S(age + horizon) / S(age).
    pub fn conditional_failure(&self, age: f64, horizon: f64) -> f64 {
        let h = |t: f64| (t.max(0.0) / self.scale).powf(self.shape);
        -(-(h(age + horizon) - h(age))).exp_m1()
    }
}

/// Log-likelihood of a Weibull (shape `k`, scale `lambda`) for left-truncated, right-censored
/// lifetimes: sum over events of ln f(t), minus the cumulative hazards H(t) - H(entry) of all.
fn log_likelihood(lives: &[Lifetime], k: f64, lambda: f64) -> f64 {
    let mut ll = 0.0;
    for l in lives {
        let t = l.exit.max(MIN_AGE_DAYS);
        if l.event {
            ll += k.ln() - lambda.ln() + (k - 1.0) * (t / lambda).ln();
        }
        ll -= (t / lambda).powf(k) - (l.entry.max(0.0) / lambda).powf(k);
    }
    ll
}

/// For a shape `k`, the scale that maximises the likelihood: lambda^k = sum(t^k - e^k) / events.
fn profile_scale(lives: &[Lifetime], k: f64, events: f64) -> f64 {
    let s: f64 = lives
        .iter()
        .map(|l| l.exit.max(MIN_AGE_DAYS).powf(k) - l.entry.max(0.0).powf(k))
        .sum();
    (s / events).powf(1.0 / k)
}

/// Maximum-likelihood Weibull of left-truncated, right-censored lifetimes (None without an event
/// or when the likelihood has no maximum in shape 0.02-50). The shape maximises the profile
/// likelihood (the scale has a closed form for each shape); intervals from the inverse of the
/// observed information of (ln shape, ln scale).
pub fn fit_weibull(lives: &[Lifetime]) -> Option<WeibullFit> {
    let events = lives.iter().filter(|l| l.event).count();
    if events == 0 {
        return None;
    }
    let d = events as f64;
    let profile = |ln_k: f64| {
        let k = ln_k.exp();
        log_likelihood(lives, k, profile_scale(lives, k, d))
    };
    // A coarse grid over ln k, then golden-section search around the best point.
    let (lo, hi) = (0.02f64.ln(), 50f64.ln());
    let steps = 60;
    let grid: Vec<(f64, f64)> = (0..=steps)
        .map(|i| lo + (hi - lo) * i as f64 / steps as f64)
        .map(|x| (x, profile(x)))
        .collect();
    let best = grid
        .iter()
        .enumerate()
        .filter(|(_, (_, v))| v.is_finite())
        .max_by(|a, b| a.1.1.total_cmp(&b.1.1))?
        .0;
    if best == 0 || best == steps {
        return None;
    }
    let (mut a, mut b) = (grid[best - 1].0, grid[best + 1].0);
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..100 {
        let c = b - phi * (b - a);
        let e = a + phi * (b - a);
        if profile(c) >= profile(e) {
            b = e;
        } else {
            a = c;
        }
    }
    let ln_k = (a + b) / 2.0;
    let k = ln_k.exp();
    let lambda = profile_scale(lives, k, d);
    // Observed information of the full likelihood in (ln k, ln lambda), by central differences.
    let ll = |x: f64, y: f64| log_likelihood(lives, x.exp(), y.exp());
    let (x, y, h) = (ln_k, lambda.ln(), 1e-4);
    let f0 = ll(x, y);
    let fxx = (ll(x + h, y) - 2.0 * f0 + ll(x - h, y)) / (h * h);
    let fyy = (ll(x, y + h) - 2.0 * f0 + ll(x, y - h)) / (h * h);
    let fxy = (ll(x + h, y + h) - ll(x + h, y - h) - ll(x - h, y + h) + ll(x - h, y - h)) / (4.0 * h * h);
    let det = fxx * fyy - fxy * fxy;
    let (var_x, var_y, cov_xy) = if det > 0.0 && fxx < 0.0 {
        (-fyy / det, -fxx / det, fxy / det)
    } else {
        (f64::NAN, f64::NAN, f64::NAN)
    };
    let z = 1.959_963_984_540_054;
    let band = |center: f64, var: f64| {
        let se = var.max(0.0).sqrt();
        ((center - z * se).exp(), (center + z * se).exp())
    };
    let (shape_lower, shape_upper) = band(x, var_x);
    let (scale_lower, scale_upper) = band(y, var_y);
    Some(WeibullFit {
        shape: k,
        scale: lambda,
        shape_lower,
        shape_upper,
        scale_lower,
        scale_upper,
        events: events as u64,
        subjects: lives.len() as u64,
        covariance: [var_x, var_y, cov_xy],
    })
}

/// The distribution of a count: P(count = k) for k = 0, 1, ... (the tail beyond the last entry
/// below 1e-15).
#[derive(Debug, Clone, PartialEq)]
pub struct Predictive {
    pub pmf: Vec<f64>,
}

impl Predictive {
    /// Poisson with mean `mean`.
    pub fn poisson(mean: f64) -> Predictive {
        let mean = mean.max(0.0);
        let len = (mean + 12.0 * mean.sqrt() + 20.0).ceil() as usize;
        // From the mode outwards in log space, so a large mean neither underflows nor overflows.
        let ln_p = |k: usize| {
            if mean == 0.0 {
                return if k == 0 { 0.0 } else { f64::NEG_INFINITY };
            }
            k as f64 * mean.ln() - mean - ln_factorial(k)
        };
        Predictive {
            pmf: (0..len).map(|k| ln_p(k).exp()).collect(),
        }
    }

    /// The sum of independent Bernoulli trials of probabilities `ps` (Poisson-binomial), exactly.
    pub fn bernoulli_sum(ps: &[f64]) -> Predictive {
        let mean: f64 = ps.iter().sum();
        let var: f64 = ps.iter().map(|p| p * (1.0 - p)).sum();
        let cap = ((mean + 12.0 * var.sqrt() + 20.0).ceil() as usize).min(ps.len()) + 1;
        let mut pmf = vec![0.0; cap];
        pmf[0] = 1.0;
        let mut top = 0;
        for &p in ps {
            let p = p.clamp(0.0, 1.0);
            top = (top + 1).min(cap - 1);
            for k in (1..=top).rev() {
                pmf[k] = pmf[k] * (1.0 - p) + pmf[k - 1] * p;
            }
            pmf[0] *= 1.0 - p;
        }
        Predictive { pmf }
    }

    pub fn mean(&self) -> f64 {
        self.pmf.iter().enumerate().map(|(k, p)| k as f64 * p).sum()
    }

    /// The smallest k with P(count <= k) >= q.
    pub fn quantile(&self, q: f64) -> u64 {
        let mut cdf = 0.0;
        for (k, p) in self.pmf.iter().enumerate() {
            cdf += p;
            // Rounding of a long sum: 1e-12 below the level still reaches it.
            if cdf >= q - 1e-12 {
                return k as u64;
            }
        }
        self.pmf.len().saturating_sub(1) as u64
    }
}

fn ln_factorial(k: usize) -> f64 {
    (1..=k).map(|i| (i as f64).ln()).sum()
}

/// What a forecast is asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub horizon_days: f64,
    /// Central prediction interval, e.g. 0.9.
    pub interval: f64,
    /// Service level of the spares, e.g. 0.95.
    pub service_level: f64,
    /// Days before the origin the `afr` method measures its rate over.
    pub afr_window_days: f64,
}

/// One method's forecast at one origin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MethodForecast {
    pub method: Method,
    /// Expected failures in the horizon.
    pub expected: f64,
    /// The prediction interval's bounds (counts).
    pub lower: u64,
    pub upper: u64,
    /// The smallest k with P(failures <= k) >= the service level.
    pub spares: u64,
    /// The fitted Weibull (method `weibull`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weibull: Option<WeibullFit>,
}

fn summarise(method: Method, p: &Predictive, r: &Request, weibull: Option<WeibullFit>) -> MethodForecast {
    let tail = (1.0 - r.interval) / 2.0;
    MethodForecast {
        method,
        expected: p.mean(),
        lower: p.quantile(tail),
        upper: p.quantile(1.0 - tail),
        spares: p.quantile(r.service_level),
        weibull,
    }
}

/// The forecasts of every method that can answer at `origin`, from the parts' history up to
/// `origin` only.
pub fn forecast_at(parts: &[PartHistory], origin: DateTime<Utc>, r: &Request) -> Vec<MethodForecast> {
    let horizon = Duration::milliseconds((r.horizon_days * DAY * 1000.0) as i64);
    let in_service: Vec<&PartHistory> = parts.iter().filter(|p| p.in_service_at(origin)).collect();
    let mut out = Vec::new();
    // Naive: the last horizon's count.
    let last: usize = parts.iter().map(|p| p.events_in(origin - horizon, origin)).sum();
    out.push(summarise(Method::Naive, &Predictive::poisson(last as f64), r, None));
    // AFR of the window before the origin.
    let window_from = origin - Duration::milliseconds((r.afr_window_days * DAY * 1000.0) as i64);
    let failures: usize = parts.iter().map(|p| p.events_in(window_from, origin)).sum();
    let part_days: f64 = parts.iter().map(|p| p.days_in(window_from, origin)).sum();
    if part_days > 0.0 {
        let rate_per_day = failures as f64 / part_days;
        let mean = rate_per_day * r.horizon_days * in_service.len() as f64;
        out.push(summarise(Method::Afr, &Predictive::poisson(mean), r, None));
    }
    // Weibull of the lives before the origin.
    let lives: Vec<Lifetime> = parts
        .iter()
        .filter(|p| p.intervals.iter().any(|i| i.from < origin))
        .map(|p| {
            let first = p.events.iter().filter(|e| **e <= origin).min();
            Lifetime {
                entry: p.age_at_first_sight,
                exit: match first {
                    Some(t) => p.age_at(*t),
                    None => p.age_at(origin),
                },
                event: first.is_some(),
            }
        })
        .filter(|l| l.exit > l.entry || l.event)
        .collect();
    if let Some(fit) = fit_weibull(&lives) {
        let ages: Vec<f64> = in_service.iter().map(|p| p.age_at(origin)).collect();
        out.push(summarise(
            Method::Weibull,
            &fit.predictive(&ages, r.horizon_days),
            r,
            Some(fit),
        ));
    }
    out
}

/// What happened after an origin: failures within the horizon of the parts in service at it
/// (parts installed later are outside every forecast).
pub fn realised(parts: &[PartHistory], origin: DateTime<Utc>, horizon_days: f64) -> u64 {
    let end = origin + Duration::milliseconds((horizon_days * DAY * 1000.0) as i64);
    parts
        .iter()
        .filter(|p| p.in_service_at(origin))
        .map(|p| p.events_in(origin, end) as u64)
        .sum()
}

/// One origin of a backtest: each method's forecast and what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BacktestOrigin {
    pub origin: DateTime<Utc>,
    pub actual: u64,
    pub forecasts: Vec<MethodForecast>,
}

/// A method's record over a backtest's origins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MethodScore {
    pub method: Method,
    /// Origins the method could forecast.
    pub origins: u64,
    /// Mean absolute error: mean of |expected - actual|.
    pub mae: f64,
    /// Mean absolute scaled error: this method's MAE over the naive method's on the same origins
    /// (None when the naive method made no error).
    pub mase: Option<f64>,
    /// Mean of expected - actual (positive: too many failures forecast).
    pub bias: f64,
    /// Share of origins whose actual count lay within the prediction interval.
    pub coverage: f64,
}

/// Rolling origins: forecasts from the history before each origin, against what followed. Origins
/// with no part in service (before the group existed) are skipped: there was nothing to forecast.
pub fn backtest(parts: &[PartHistory], origins: &[DateTime<Utc>], r: &Request) -> Vec<BacktestOrigin> {
    origins
        .iter()
        .filter(|&&origin| parts.iter().any(|p| p.in_service_at(origin)))
        .map(|&origin| BacktestOrigin {
            origin,
            actual: realised(parts, origin, r.horizon_days),
            forecasts: forecast_at(parts, origin, r),
        })
        .collect()
}

/// Each method's scores over the origins it answered. MASE compares with the naive method on
/// those same origins.
pub fn scores(rows: &[BacktestOrigin]) -> Vec<MethodScore> {
    Method::ALL
        .iter()
        .filter_map(|&m| {
            let pairs: Vec<(&MethodForecast, u64, Option<&MethodForecast>)> = rows
                .iter()
                .filter_map(|o| {
                    let f = o.forecasts.iter().find(|f| f.method == m)?;
                    let naive = o.forecasts.iter().find(|f| f.method == Method::Naive);
                    Some((f, o.actual, naive))
                })
                .collect();
            if pairs.is_empty() {
                return None;
            }
            let n = pairs.len() as f64;
            let mae = pairs
                .iter()
                .map(|(f, a, _)| (f.expected - *a as f64).abs())
                .sum::<f64>()
                / n;
            let naive_mae = pairs
                .iter()
                .filter_map(|(_, a, nf)| nf.map(|nf| (nf.expected - *a as f64).abs()))
                .sum::<f64>()
                / n;
            Some(MethodScore {
                method: m,
                origins: pairs.len() as u64,
                mae,
                mase: (naive_mae > 0.0).then(|| mae / naive_mae),
                bias: pairs.iter().map(|(f, a, _)| f.expected - *a as f64).sum::<f64>() / n,
                coverage: pairs.iter().filter(|(f, a, _)| f.lower <= *a && *a <= f.upper).count() as f64 / n,
            })
        })
        .collect()
}

/// Fewer backtest origins than this and the choice is not the backtest's.
pub const MIN_BACKTEST_ORIGINS: u64 = 2;

/// The method answered for a group, and why: the lowest mean absolute error among the methods
/// that answered every origin (ties go to the simpler method: naive, then afr, then weibull);
/// with too short a history, the age-dependent method when it could be fitted, else the rate.
pub fn choose(scores: &[MethodScore], origins: u64, available: &[Method]) -> (Method, String) {
    let complete: Vec<&MethodScore> = scores
        .iter()
        .filter(|s| s.origins == origins && available.contains(&s.method))
        .collect();
    if origins >= MIN_BACKTEST_ORIGINS
        && let Some(best) = complete
            .iter()
            .min_by(|a, b| a.mae.total_cmp(&b.mae).then(a.method.cmp(&b.method)))
    {
        let others: Vec<String> = complete
            .iter()
            .filter(|s| s.method != best.method)
            .map(|s| format!("{} {:.2}", s.method.as_str(), s.mae))
            .collect();
        return (
            best.method,
            format!(
                "lowest mean absolute error over {origins} backtest origins: {:.2} (against {})",
                best.mae,
                if others.is_empty() {
                    "no other method".into()
                } else {
                    others.join(", ")
                }
            ),
        );
    }
    let fallback = if available.contains(&Method::Weibull) {
        Method::Weibull
    } else if available.contains(&Method::Afr) {
        Method::Afr
    } else {
        Method::Naive
    };
    (
        fallback,
        format!(
            "{origins} backtest origins (fewer than {MIN_BACKTEST_ORIGINS}): the {} method by default",
            fallback.as_str()
        ),
    )
}

/// Quarter starts (UTC) after `from` whose horizon ends by `to`, the last `max` of them.
pub fn quarter_origins(from: DateTime<Utc>, to: DateTime<Utc>, horizon_days: f64, max: usize) -> Vec<DateTime<Utc>> {
    use chrono::{Datelike, TimeZone};
    let horizon = Duration::milliseconds((horizon_days * DAY * 1000.0) as i64);
    let mut out = Vec::new();
    let mut y = from.year();
    let mut q = (from.month0() / 3) as i32;
    while let Some(t) = Utc.with_ymd_and_hms(y, (q * 3 + 1) as u32, 1, 0, 0, 0).single() {
        if t + horizon > to {
            break;
        }
        if t > from {
            out.push(t);
        }
        q += 1;
        if q == 4 {
            q = 0;
            y += 1;
        }
    }
    let skip = out.len().saturating_sub(max);
    out.split_off(skip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> DateTime<Utc> {
        "2024-01-01T00:00:00Z".parse().unwrap()
    }

    fn days(d: f64) -> Duration {
        Duration::milliseconds((d * DAY * 1000.0) as i64)
    }

    #[test]
    fn conditional_failure_by_hand() {
        // Exponential (shape 1, scale 1000 d): memoryless, 1 - exp(-90/1000) at any age.
        let f = WeibullFit {
            shape: 1.0,
            scale: 1000.0,
            shape_lower: 1.0,
            shape_upper: 1.0,
            scale_lower: 1000.0,
            scale_upper: 1000.0,
            events: 1,
            subjects: 1,
            covariance: [0.0; 3],
        };
        assert!((f.conditional_failure(0.0, 90.0) - (1.0 - (-0.09f64).exp())).abs() < 1e-12);
        assert!((f.conditional_failure(500.0, 90.0) - (1.0 - (-0.09f64).exp())).abs() < 1e-12);
        // Wear-out (shape 2, scale 1000 d) at age 500: 1 - exp(0.25 - 0.3481) = 0.093485...
        let g = WeibullFit { shape: 2.0, ..f };
        assert!((g.conditional_failure(500.0, 90.0) - (1.0 - (0.25f64 - 0.3481).exp())).abs() < 1e-12);
    }

    #[test]
    fn spares_quantile_and_interval_by_hand() {
        // Two parts failing with p = 0.5 each: P(0) = 0.25, P(1) = 0.5, P(2) = 0.25.
        let p = Predictive::bernoulli_sum(&[0.5, 0.5]);
        assert!(p.pmf.len() >= 3, "{:?}", p.pmf);
        assert!((p.pmf[0] - 0.25).abs() < 1e-15 && (p.pmf[1] - 0.5).abs() < 1e-15 && (p.pmf[2] - 0.25).abs() < 1e-15);
        assert_eq!(
            (p.quantile(0.05), p.quantile(0.25), p.quantile(0.26), p.quantile(0.95)),
            (0, 0, 1, 2)
        );
        // Poisson(2): P(<= 4) = 0.947347, P(<= 5) = 0.983436: 95 % spares = 5.
        let q = Predictive::poisson(2.0);
        assert_eq!(q.quantile(0.95), 5);
        assert_eq!(q.quantile(0.94), 4);
        assert!((q.mean() - 2.0).abs() < 1e-9);
        // Poisson(0): nothing fails, no spares.
        assert_eq!(Predictive::poisson(0.0).quantile(0.99), 0);
    }

    #[test]
    fn mase_by_hand() {
        let f = |m: Method, e: f64| MethodForecast {
            method: m,
            expected: e,
            lower: 0,
            upper: 10,
            spares: 0,
            weibull: None,
        };
        // Actuals 4 and 6; naive said 2 and 2 (MAE 3), afr 5 and 5 (MAE 1): MASE 1/3.
        let rows = vec![
            BacktestOrigin {
                origin: t0(),
                actual: 4,
                forecasts: vec![f(Method::Naive, 2.0), f(Method::Afr, 5.0)],
            },
            BacktestOrigin {
                origin: t0() + days(90.0),
                actual: 6,
                forecasts: vec![f(Method::Naive, 2.0), f(Method::Afr, 5.0)],
            },
        ];
        let s = scores(&rows);
        let afr = s.iter().find(|s| s.method == Method::Afr).unwrap();
        assert_eq!((afr.mae, afr.bias, afr.coverage), (1.0, 0.0, 1.0));
        assert!((afr.mase.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        let (m, why) = choose(&s, 2, &[Method::Naive, Method::Afr]);
        assert_eq!(m, Method::Afr, "{why}");
    }

    /// A small deterministic generator (SplitMix64) for simulated fleets.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
        /// A Weibull lifetime by inversion.
        fn weibull(&mut self, shape: f64, scale: f64) -> f64 {
            scale * (-(1.0 - self.next()).ln()).powf(1.0 / shape)
        }
    }

    /// `n` parts installed over the first `spread` days from t0, each failing at a Weibull age
    /// and then out of service.
    fn fleet(rng: &mut Rng, n: usize, shape: f64, scale: f64, spread: f64) -> Vec<PartHistory> {
        (0..n)
            .map(|_| {
                let from = t0() + days(rng.next() * spread);
                let life = rng.weibull(shape, scale);
                let end = from + days(life);
                PartHistory {
                    intervals: vec![Interval { from, to: Some(end) }],
                    events: vec![end],
                    age_at_first_sight: 0.0,
                }
            })
            .collect()
    }

    #[test]
    fn a_fitted_weibull_covers_the_truth_for_constant_and_wearing_hazards() {
        for (seed, shape, scale) in [(1u64, 1.0, 2_000.0), (2, 2.5, 1_500.0)] {
            let mut rng = Rng(seed);
            let parts = fleet(&mut rng, 4_000, shape, scale, 365.0);
            let origin = t0() + days(900.0);
            let lives: Vec<Lifetime> = parts
                .iter()
                .filter(|p| p.intervals[0].from < origin)
                .map(|p| {
                    let failed = p.events[0] <= origin;
                    Lifetime {
                        entry: 0.0,
                        exit: p.age_at(if failed { p.events[0] } else { origin }),
                        event: failed,
                    }
                })
                .collect();
            let fit = fit_weibull(&lives).unwrap();
            assert!(fit.shape_lower <= shape && shape <= fit.shape_upper, "{fit:?}");
            assert!(fit.scale_lower <= scale && scale <= fit.scale_upper, "{fit:?}");
        }
    }

    #[test]
    fn left_truncation_removes_the_bias_of_parts_first_seen_old() {
        // Wear-out parts first seen at age 300 d (those that had failed before were never seen):
        // fitted from 0 they would look longer lived; with their entry age the fit finds the truth.
        let mut rng = Rng(7);
        let (shape, scale) = (2.0, 800.0);
        let mut lives = Vec::new();
        while lives.len() < 3_000 {
            let life = rng.weibull(shape, scale);
            if life <= 300.0 {
                continue;
            }
            let exit = life.min(1_100.0);
            lives.push(Lifetime {
                entry: 300.0,
                exit,
                event: life <= 1_100.0,
            });
        }
        let fit = fit_weibull(&lives).unwrap();
        assert!(fit.shape_lower <= shape && shape <= fit.shape_upper, "{fit:?}");
        assert!(fit.scale_lower <= scale && scale <= fit.scale_upper, "{fit:?}");
    }

    #[test]
    fn the_weibull_forecast_is_within_five_percent_of_the_analytic_expectation_and_covers_ninety_percent() {
        // Wear-out parts (shape 2, scale 1,200 d) installed over a year; origin at day 700. The
        // analytic expectation of failures in the next 90 days: the sum over the parts in service
        // of their true conditional probabilities.
        let r = Request {
            horizon_days: 90.0,
            interval: 0.9,
            service_level: 0.95,
            afr_window_days: 365.0,
        };
        let truth = WeibullFit {
            shape: 2.0,
            scale: 1_200.0,
            shape_lower: 2.0,
            shape_upper: 2.0,
            scale_lower: 1_200.0,
            scale_upper: 1_200.0,
            events: 0,
            subjects: 0,
            covariance: [0.0; 3],
        };
        let origin = t0() + days(700.0);
        let weibull = |parts: &[PartHistory]| {
            forecast_at(parts, origin, &r)
                .into_iter()
                .find(|f| f.method == Method::Weibull)
                .unwrap()
        };
        let analytic = |parts: &[PartHistory]| -> f64 {
            parts
                .iter()
                .filter(|p| p.in_service_at(origin))
                .map(|p| truth.conditional_failure(p.age_at(origin), 90.0))
                .sum()
        };
        // A fleet of 20,000 (about 1,100 failures expected): within 5 %.
        for seed in 0..3 {
            let parts = fleet(&mut Rng(500 + seed), 20_000, 2.0, 1_200.0, 365.0);
            let (w, a) = (weibull(&parts), analytic(&parts));
            assert!((w.expected - a).abs() <= 0.05 * a, "seed {seed}: {} vs {a}", w.expected);
        }
        // Fleets of 2,000 over 200 seeds: the 90 % interval covers the realised count in 85-95 %.
        let seeds = 200;
        let mut covered = 0;
        for seed in 0..seeds {
            let parts = fleet(&mut Rng(1_000 + seed), 2_000, 2.0, 1_200.0, 365.0);
            let w = weibull(&parts);
            let actual = realised(&parts, origin, 90.0);
            if w.lower <= actual && actual <= w.upper {
                covered += 1;
            }
        }
        let share = covered as f64 / seeds as f64;
        assert!((0.85..=0.95).contains(&share), "coverage {share}");
    }

    #[test]
    fn a_bad_lot_is_forecast_by_its_own_wear_out_and_a_good_lot_by_its_constant_hazard() {
        // Two lots of 10,000 parts installed over a year: lot A with a constant hazard (shape 1,
        // scale 4,000 d), lot B a bad lot wearing out early (shape 3, scale 700 d). Each lot is a
        // group of its own: its fit recovers its shape, and its forecast for the 91 days after day
        // 600 is within 5 % of the analytic expectation of its parts in service.
        let r = Request {
            horizon_days: 91.0,
            interval: 0.9,
            service_level: 0.95,
            afr_window_days: 365.25,
        };
        let origin = t0() + days(600.0);
        for (seed, shape, scale) in [(11u64, 1.0, 4_000.0), (12, 3.0, 700.0)] {
            let parts = fleet(&mut Rng(seed), 10_000, shape, scale, 365.0);
            let truth = WeibullFit {
                shape,
                scale,
                shape_lower: shape,
                shape_upper: shape,
                scale_lower: scale,
                scale_upper: scale,
                events: 0,
                subjects: 0,
                covariance: [0.0; 3],
            };
            let analytic: f64 = parts
                .iter()
                .filter(|p| p.in_service_at(origin))
                .map(|p| truth.conditional_failure(p.age_at(origin), 91.0))
                .sum();
            let w = forecast_at(&parts, origin, &r)
                .into_iter()
                .find(|f| f.method == Method::Weibull)
                .unwrap();
            let fit = w.weibull.unwrap();
            assert!(
                fit.shape_lower <= shape && shape <= fit.shape_upper,
                "lot of shape {shape}: {fit:?}"
            );
            assert!(
                (w.expected - analytic).abs() <= 0.05 * analytic,
                "shape {shape}: {} vs {analytic}",
                w.expected
            );
        }
    }

    #[test]
    fn the_backtest_uses_no_data_after_its_origin() {
        let mut rng = Rng(3);
        let mut parts = fleet(&mut rng, 500, 1.5, 900.0, 365.0);
        let r = Request {
            horizon_days: 90.0,
            interval: 0.9,
            service_level: 0.95,
            afr_window_days: 365.0,
        };
        let origin = t0() + days(540.0);
        let before = forecast_at(&parts, origin, &r);
        // A failure planted an hour after the origin changes what happened, not what was forecast.
        let planted = parts.iter_mut().find(|p| p.in_service_at(origin + days(1.0))).unwrap();
        planted.events = vec![origin + Duration::hours(1)];
        planted.intervals[0].to = Some(origin + Duration::hours(1));
        assert_eq!(forecast_at(&parts, origin, &r), before);
    }

    #[test]
    fn quarter_origins_end_a_horizon_before_the_end() {
        let from: DateTime<Utc> = "2023-11-15T00:00:00Z".parse().unwrap();
        let to: DateTime<Utc> = "2024-10-01T00:00:00Z".parse().unwrap();
        let got = quarter_origins(from, to, 90.0, 8);
        let want: Vec<DateTime<Utc>> = ["2024-01-01T00:00:00Z", "2024-04-01T00:00:00Z", "2024-07-01T00:00:00Z"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(got, want);
        assert_eq!(quarter_origins(from, to, 90.0, 2), want[1..]);
    }
}
