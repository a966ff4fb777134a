//! Survival of GPU parts: how long a part lasts in service, whether groups of parts (a vendor, a
//! firmware, a batch) last differently, and how often parts fail per year of service.
//!
//! A part's age is its cumulative installed time, in days: a subject is one part's installed time
//! until its hardware failure (`event`) or until the observation stopped without one (censored:
//! still in service, retired healthy, or on a shelf since). Time on a shelf or at the vendor does
//! not age a part, so it never enters a duration.
//!
//! The estimators follow Python lifelines' defaults so that figures can be checked against it
//! (`tests/reference/survival_lifelines.py` regenerates the reference figures the tests bake in):
//! Kaplan-Meier with Greenwood's variance and the log(-log) ("exponential Greenwood") band as
//! `KaplanMeierFitter.confidence_interval_`, the median as `median_survival_time_` with its interval
//! as `median_survival_times(confidence_interval_)`, and the k-group log-rank test as
//! `multivariate_logrank_test`. Pure functions; part placements and failures are turned into
//! subjects elsewhere. Part-or-slot attribution is in `analytics::parts`, precursor signals in
//! `analytics::precursors`.

use serde::Serialize;

use crate::analytics::stats::{chi_square_quantile, gamma_q, poisson_rate_ci};

/// Days in a (Julian) year: the year of annualised failure rates (8,766 hours, as drive and GPU
/// AFR reports use), so leap years do not move a rate.
pub const DAYS_PER_YEAR: f64 = 365.25;

/// One part's time in service: `duration` days installed (>= 0) until a hardware failure
/// (`event = true`) or until observation stopped without one (`event = false`, right-censored).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Subject {
    pub duration: f64,
    pub event: bool,
}

/// A stretch of one subject's time at risk in one group, for covariates that change over a
/// subject's life (a part moved between racks): at risk at ages t with `entry` < t <= `exit`
/// (from age 0 inclusive when `entry` is 0), ending at `exit` in the event or censored. A subject
/// that changes group has consecutive spells, the event (if any) on its last one; [`Subject`] is
/// the spell (0, duration].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spell {
    pub entry: f64,
    pub exit: f64,
    pub event: bool,
}

impl From<&Subject> for Spell {
    fn from(s: &Subject) -> Self {
        Spell {
            entry: 0.0,
            exit: s.duration,
            event: s.event,
        }
    }
}

impl Spell {
    fn usable(&self) -> bool {
        self.exit.is_finite() && self.exit >= 0.0 && self.entry.is_finite() && self.entry >= 0.0 && {
            // A later spell of no length has no time at risk.
            self.entry < self.exit || self.entry == 0.0
        }
    }
}

/// Spells at risk at t: exits >= t minus later entries >= t (both sorted).
fn at_risk(exits: &[f64], entries: &[f64], t: f64) -> u64 {
    let leaving = exits.len() - exits.partition_point(|e| *e < t);
    let entering = entries.len() - entries.partition_point(|e| *e < t);
    (leaving - entering) as u64
}

/// The Kaplan-Meier estimate at one distinct time with an event or a censoring; it holds from
/// `time` until the next step's time.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct KmStep {
    /// Days of service.
    pub time: f64,
    /// Subjects whose duration is >= `time` (a subject censored at an event time is still at risk
    /// at that time: events are taken to happen before censorings at the same time).
    pub at_risk: u64,
    /// Failures at `time`.
    pub events: u64,
    /// Censorings at `time`.
    pub censored: u64,
    /// Estimated probability of lasting beyond `time`: the product of (1 - events / at_risk) up to it.
    pub survival: f64,
    /// Greenwood's variance of `survival`: S^2 x sum of events / (at_risk (at_risk - events)) up
    /// to `time` (a step where every subject at risk fails adds nothing, as in lifelines: the
    /// estimate is then 0 with a degenerate band).
    pub variance: f64,
    /// Lower bound of the pointwise band: exp(-exp(ln(-ln S) + z sigma / |ln S|)) with sigma^2 the
    /// Greenwood sum, the log(-log) transform lifelines uses; it stays within [0, 1]. 1 while
    /// nothing has failed yet, 0 once the estimate is 0.
    pub lower: f64,
    /// Upper bound: exp(-exp(ln(-ln S) - z sigma / |ln S|)).
    pub upper: f64,
}

/// A Kaplan-Meier survival curve with its pointwise band and median.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct KaplanMeier {
    /// One step per distinct time with events or censorings, in time order.
    pub steps: Vec<KmStep>,
    /// Subjects used (those with a finite duration >= 0).
    pub subjects: u64,
    /// Failures among them.
    pub events: u64,
    /// Confidence of the band and of the median's interval (0.95 for 95%).
    pub confidence: f64,
    /// Median time to failure: the first time the estimate is <= 0.5; None while it stays above
    /// (fewer than half the parts have failed, as far as can be told).
    pub median: Option<f64>,
    /// Lower end of the median's interval: the first time the band's lower bound is <= 0.5 (the
    /// earliest the median could plausibly be).
    pub median_lower: Option<f64>,
    /// Upper end: the first time the band's upper bound is <= 0.5; None when it never is
    /// (the median could be later than anything observed).
    pub median_upper: Option<f64>,
}

/// The standard normal quantile z with P(|Z| <= z) = confidence, from the chi-square quantile with
/// one degree of freedom (Z^2 is chi-square(1)), which is accurate to ~1e-12. NaN or a confidence
/// outside (0, 1) gives 0 (a band of zero width) below and infinity above.
fn two_sided_z(confidence: f64) -> f64 {
    if confidence.is_nan() || confidence <= 0.0 {
        0.0
    } else if confidence >= 1.0 {
        f64::INFINITY
    } else {
        chi_square_quantile(confidence, 1.0).sqrt()
    }
}

/// The log(-log) band around `s` given the Greenwood sum: (lower, upper).
fn log_log_band(s: f64, greenwood_sum: f64, z: f64) -> (f64, f64) {
    if s >= 1.0 {
        // ln(-ln 1) is undefined; lifelines fills these rows (before the first failure) with 1.
        return (1.0, 1.0);
    }
    if s <= 0.0 {
        return (0.0, 0.0);
    }
    let v = s.ln();
    let spread = z * greenwood_sum.sqrt() / v;
    let centre = (-v).ln();
    ((-(centre - spread).exp()).exp(), (-(centre + spread).exp()).exp())
}

/// Kaplan-Meier estimate of the survival function with Greenwood's variance and a log(-log)
/// pointwise band at `confidence`, matching lifelines' `KaplanMeierFitter` with its defaults.
///
/// Subjects with a negative or non-finite duration are left out (not counted in `subjects`). The
/// estimate is computed as a running product (lifelines sums logarithms; the two agree to rounding).
pub fn kaplan_meier(subjects: &[Subject], confidence: f64) -> KaplanMeier {
    let spells: Vec<Spell> = subjects.iter().map(Spell::from).collect();
    kaplan_meier_spells(&spells, confidence)
}

/// [`kaplan_meier`] over spells (left-truncated at their entry): the risk set at t holds the
/// spells with entry < t <= exit, so a subject that moved into the group counts from its move.
/// A step is kept at every distinct exit and every later entry (entries change who is at risk,
/// not the estimate). `subjects` counts the usable spells.
pub fn kaplan_meier_spells(spells: &[Spell], confidence: f64) -> KaplanMeier {
    // + 0.0 turns -0.0 into 0.0, so the sort and the tie test agree on time zero.
    let mut obs: Vec<(f64, bool)> = spells
        .iter()
        .filter(|s| s.usable())
        .map(|s| (s.exit + 0.0, s.event))
        .collect();
    obs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let exits: Vec<f64> = obs.iter().map(|o| o.0).collect();
    let mut entries: Vec<f64> = spells
        .iter()
        .filter(|s| s.usable() && s.entry > 0.0)
        .map(|s| s.entry)
        .collect();
    entries.sort_by(f64::total_cmp);
    let mut times: Vec<f64> = exits.iter().chain(&entries).copied().collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    let z = two_sided_z(confidence);
    let mut steps = Vec::new();
    let (mut s, mut greenwood) = (1.0_f64, 0.0_f64);
    let mut i = 0;
    for time in times {
        let at_risk = at_risk(&exits, &entries, time);
        let (mut events, mut censored) = (0_u64, 0_u64);
        while i < obs.len() && obs[i].0 == time {
            if obs[i].1 {
                events += 1;
            } else {
                censored += 1;
            }
            i += 1;
        }
        if events > 0 {
            let (n, d) = (at_risk as f64, events as f64);
            s *= 1.0 - d / n;
            if events < at_risk {
                greenwood += d / (n * (n - d));
            }
        }
        let (lower, upper) = log_log_band(s, greenwood, z);
        steps.push(KmStep {
            time,
            at_risk,
            events,
            censored,
            survival: s,
            variance: s * s * greenwood,
            lower,
            upper,
        });
    }
    let first_at_or_below_half = |value: fn(&KmStep) -> f64| steps.iter().find(|st| value(st) <= 0.5).map(|st| st.time);
    KaplanMeier {
        subjects: obs.len() as u64,
        events: steps.iter().map(|st| st.events).sum(),
        confidence,
        median: first_at_or_below_half(|st| st.survival),
        median_lower: first_at_or_below_half(|st| st.lower),
        median_upper: first_at_or_below_half(|st| st.upper),
        steps,
    }
}

impl KaplanMeier {
    /// The step in force at `t`: the last one at or before it; None before the first.
    fn step_at(&self, t: f64) -> Option<&KmStep> {
        let after = self.steps.partition_point(|st| st.time <= t);
        after.checked_sub(1).map(|i| &self.steps[i])
    }

    /// (estimate, lower, upper) at `t` days: the step function is right-continuous, so a failure
    /// at exactly `t` is already counted. Before the first step it is (1, 1, 1). Beyond the last
    /// observed time the last step is carried forward, as lifelines' `survival_function_at_times`
    /// and `confidence_interval_` do; check [`KaplanMeier::at_risk_at`] (0 there) before reading
    /// anything into such a value. None without subjects, or for a negative or NaN `t`.
    pub fn survival_at(&self, t: f64) -> Option<(f64, f64, f64)> {
        if self.steps.is_empty() || t.is_nan() || t < 0.0 {
            return None;
        }
        Some(
            self.step_at(t)
                .map_or((1.0, 1.0, 1.0), |st| (st.survival, st.lower, st.upper)),
        )
    }

    /// Subjects at risk at `t` days: those whose duration is >= `t` (0 beyond the last observed
    /// time, all subjects at or before the first).
    pub fn at_risk_at(&self, t: f64) -> u64 {
        if t.is_nan() {
            return 0;
        }
        let first_not_before = self.steps.partition_point(|st| st.time < t);
        self.steps.get(first_not_before).map_or(0, |st| st.at_risk)
    }
}

/// The k-group log-rank test of "every group has the same hazard".
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct LogRank {
    /// (O - E)' V^- (O - E) over the first k - 1 non-empty groups (V^- a generalised inverse).
    pub statistic: f64,
    /// Non-empty groups - 1; 0 when fewer than two groups have subjects.
    pub degrees_of_freedom: u64,
    /// Upper tail of chi-square with `degrees_of_freedom`; 1 when there is nothing to compare.
    pub p_value: f64,
}

/// The k-group log-rank test (lifelines' `multivariate_logrank_test`): at each failure time t with
/// n at risk and d failures, group j with n_j at risk expects n_j d / n of them; O - E sums
/// observed minus expected per group, with the hypergeometric covariance
/// V_jl = sum d (n - d) / (n^2 (n - 1)) n_j (delta_jl n - n_l). The statistic is chi-square with
/// k - 1 degrees of freedom under the null.
///
/// Groups without subjects (or whose subjects all have unusable durations) are dropped, as
/// lifelines never sees them; groups with subjects but no failures still count (they are at risk).
/// With fewer than two non-empty groups there is nothing to compare: statistic 0, 0 degrees of
/// freedom, p-value 1. When V is singular (e.g. a group has nobody at risk at any failure time) the
/// statistic uses a generalised inverse, as lifelines' pseudo-inverse does.
pub fn log_rank(groups: &[&[Subject]]) -> LogRank {
    let spells: Vec<Vec<Spell>> = groups.iter().map(|g| g.iter().map(Spell::from).collect()).collect();
    let sets: Vec<&[Spell]> = spells.iter().map(Vec::as_slice).collect();
    log_rank_spells(&sets)
}

/// [`log_rank`] over spells: at each failure time each group's risk set is its spells with
/// entry < t <= exit.
pub fn log_rank_spells(groups: &[&[Spell]]) -> LogRank {
    // Per non-empty group: sorted exits, sorted later entries, and the failure times.
    let mut sets: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    let mut failures: Vec<(f64, usize)> = Vec::new();
    for group in groups {
        let usable: Vec<&Spell> = group.iter().filter(|s| s.usable()).collect();
        if usable.is_empty() {
            continue;
        }
        let g = sets.len();
        let mut exits: Vec<f64> = usable.iter().map(|s| s.exit + 0.0).collect();
        let mut entries: Vec<f64> = usable.iter().filter(|s| s.entry > 0.0).map(|s| s.entry).collect();
        exits.sort_by(f64::total_cmp);
        entries.sort_by(f64::total_cmp);
        failures.extend(usable.iter().filter(|s| s.event).map(|s| (s.exit + 0.0, g)));
        sets.push((exits, entries));
    }
    let k = sets.len();
    if k < 2 {
        return LogRank {
            statistic: 0.0,
            degrees_of_freedom: 0,
            p_value: 1.0,
        };
    }
    failures.sort_by(|a, b| a.0.total_cmp(&b.0));
    let m = k - 1;
    let mut o_minus_e = vec![0.0_f64; m];
    let mut cov = vec![vec![0.0_f64; m]; m];
    let mut deaths = vec![0_u64; k];
    let mut i = 0;
    while i < failures.len() {
        let time = failures[i].0;
        deaths.iter_mut().for_each(|x| *x = 0);
        while i < failures.len() && failures[i].0 == time {
            deaths[failures[i].1] += 1;
            i += 1;
        }
        let at: Vec<u64> = sets.iter().map(|(x, e)| at_risk(x, e, time)).collect();
        let d = deaths.iter().sum::<u64>() as f64;
        let n = at.iter().sum::<u64>() as f64;
        let factor = if n > 1.0 {
            d * (n - d) / (n * n * (n - 1.0))
        } else {
            0.0
        };
        for j in 0..m {
            let nj = at[j] as f64;
            o_minus_e[j] += deaths[j] as f64 - nj * d / n;
            for l in 0..m {
                let nl = at[l] as f64;
                let delta = if j == l { n } else { 0.0 };
                cov[j][l] += factor * nj * (delta - nl);
            }
        }
    }
    let statistic = quadratic_form_psd(cov, o_minus_e).max(0.0);
    LogRank {
        statistic,
        degrees_of_freedom: m as u64,
        p_value: gamma_q(m as f64 / 2.0, statistic / 2.0),
    }
}

/// z' A^- z for a symmetric positive semi-definite A, by symmetric elimination with diagonal
/// pivoting that stops at the first (relatively) zero pivot. Equals z' A^+ z (pseudo-inverse)
/// whenever z lies in A's column space, which holds for the log-rank O - E and its covariance.
fn quadratic_form_psd(mut a: Vec<Vec<f64>>, mut z: Vec<f64>) -> f64 {
    let n = z.len();
    let scale = (0..n).map(|i| a[i][i]).fold(0.0_f64, f64::max);
    let mut remaining: Vec<usize> = (0..n).collect();
    let mut total = 0.0;
    while !remaining.is_empty() {
        let (pos, &p) = remaining
            .iter()
            .enumerate()
            .max_by(|x, y| a[*x.1][*x.1].total_cmp(&a[*y.1][*y.1]))
            .expect("non-empty");
        let pivot = a[p][p];
        if pivot.is_nan() || pivot <= 1e-12 * scale {
            break;
        }
        remaining.swap_remove(pos);
        total += z[p] * z[p] / pivot;
        for &i in &remaining {
            let f = a[i][p] / pivot;
            z[i] -= f * z[p];
            for &j in &remaining {
                a[i][j] -= f * a[p][j];
            }
        }
    }
    total
}

/// Annualised failure rate: failures per part-year of service, with an exact interval.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Afr {
    pub failures: u64,
    /// Installed part-days / 365.25.
    pub part_years: f64,
    /// Failures per part-year (0.02 = 2% of parts fail per year); None without exposure.
    pub rate_per_year: Option<f64>,
    /// Lower bound of the exact (Garwood) Poisson interval; 0 without failures or exposure.
    pub lower: f64,
    /// Upper bound; None when unbounded (no exposure).
    pub upper: Option<f64>,
}

/// `failures` over `part_days` of installed time as failures per part-year, with the exact
/// Poisson interval of [`poisson_rate_ci`] at `confidence`. Assumes a constant rate over the
/// exposure (the AFR of a mixed-age fleet is its average; use [`kaplan_meier`] for the age shape).
pub fn annualised_failure_rate(failures: u64, part_days: f64, confidence: f64) -> Afr {
    let part_years = if part_days.is_finite() && part_days > 0.0 {
        part_days / DAYS_PER_YEAR
    } else {
        0.0
    };
    let (lower, upper) = poisson_rate_ci(failures, part_years, confidence);
    Afr {
        failures,
        part_years,
        rate_per_year: (part_years > 0.0).then(|| failures as f64 / part_years),
        lower,
        upper: upper.is_finite().then_some(upper),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, rel: f64) {
        assert!(
            (got - want).abs() <= rel * want.abs().max(1e-300),
            "got {got}, want {want}"
        );
    }

    fn subjects(data: &[(f64, bool)]) -> Vec<Subject> {
        data.iter()
            .map(|&(duration, event)| Subject { duration, event })
            .collect()
    }

    /// 8 parts: failures at 1, 2, 2, 4, 5; censored at 2 (tied with two failures), 3 and 6.
    fn textbook() -> Vec<Subject> {
        subjects(&[
            (1.0, true),
            (2.0, true),
            (2.0, true),
            (2.0, false),
            (3.0, false),
            (4.0, true),
            (5.0, true),
            (6.0, false),
        ])
    }

    #[test]
    fn kaplan_meier_by_hand_with_ties_and_censoring_at_an_event_time() {
        // t  n  d  c  S                        Greenwood sum d / (n (n - d))
        // 1  8  1  0  7/8 = 0.875              1/56
        // 2  7  2  1  7/8 x 5/7 = 0.625        1/56 + 2/35 = 21/280 = 0.075
        //    (the part censored at 2 is at risk at 2: n = 7, not 6)
        // 3  4  0  1  0.625                    0.075
        // 4  3  1  0  0.625 x 2/3 = 5/12       0.075 + 1/6 = 29/120
        // 5  2  1  0  5/12 x 1/2 = 5/24        29/120 + 1/2 = 89/120
        // 6  1  0  1  5/24                     89/120
        let km = kaplan_meier(&textbook(), 0.95);
        assert_eq!((km.subjects, km.events, km.steps.len()), (8, 5, 6));
        let want = [
            (1.0, 8, 1, 0, 0.875, 1.0 / 56.0),
            (2.0, 7, 2, 1, 0.625, 0.075),
            (3.0, 4, 0, 1, 0.625, 0.075),
            (4.0, 3, 1, 0, 5.0 / 12.0, 29.0 / 120.0),
            (5.0, 2, 1, 0, 5.0 / 24.0, 89.0 / 120.0),
            (6.0, 1, 0, 1, 5.0 / 24.0, 89.0 / 120.0),
        ];
        for (st, (t, n, d, c, s, gw)) in km.steps.iter().zip(want) {
            assert_eq!((st.time, st.at_risk, st.events, st.censored), (t, n, d, c), "{st:?}");
            close(st.survival, s, 1e-15);
            // Greenwood: Var S = S^2 x sum; at 2, 0.390625 x 0.075 = 0.029296875.
            close(st.variance, s * s * gw, 1e-13);
        }
        close(km.steps[1].variance, 0.029296875, 1e-13);
        // log(-log) band, z = 1.959964: at 1, ln(-ln 0.875) = -2.013300, z sqrt(1/56) / |ln 0.875| =
        // 1.961420, so lower = exp(-exp(-2.013300 + 1.961420)) = 0.387000 and
        // upper = exp(-exp(-2.013300 - 1.961420)) = 0.981393. The rest from the same formula;
        // lifelines' confidence_interval_ prints the same (0.387000, 0.981393), (0.229333, 0.860698),
        // (0.071967, 0.747326), (0.010043, 0.585787).
        let bands = [
            (0.38700001403202505, 0.981392965878966),
            (0.22933332242913165, 0.8606982769135387),
            (0.22933332242913165, 0.8606982769135387),
            (0.07196749750078908, 0.7473261854988591),
        ];
        for (st, (lo, hi)) in km.steps.iter().zip(bands) {
            close(st.lower, lo, 1e-9);
            close(st.upper, hi, 1e-9);
        }
        close(km.steps[4].lower, 0.010043, 1e-4);
        close(km.steps[4].upper, 0.585787, 1e-5);
        // Median: S first <= 0.5 at 4. Its interval: the lower band is first <= 0.5 at 1, the
        // upper band never is (0.5858 at the end): lifelines says (1, inf).
        assert_eq!(
            (km.median, km.median_lower, km.median_upper),
            (Some(4.0), Some(1.0), None)
        );
    }

    #[test]
    fn survival_and_at_risk_between_and_beyond_steps() {
        let km = kaplan_meier(&textbook(), 0.95);
        assert_eq!(km.survival_at(0.0), Some((1.0, 1.0, 1.0)));
        assert_eq!(km.survival_at(0.999), Some((1.0, 1.0, 1.0)));
        // Right-continuous: the failure at 1 counts at 1.
        let (s, lo, hi) = km.survival_at(1.0).unwrap();
        assert_eq!((s, lo, hi), (0.875, km.steps[0].lower, km.steps[0].upper));
        assert_eq!(km.survival_at(3.5).unwrap().0, 0.625);
        // Beyond the last time (6) the last step is carried forward, as lifelines does.
        close(km.survival_at(100.0).unwrap().0, 5.0 / 24.0, 1e-15);
        assert_eq!(km.survival_at(-1.0), None);
        assert_eq!(km.survival_at(f64::NAN), None);
        // At risk: durations >= t.
        assert_eq!(km.at_risk_at(0.0), 8);
        assert_eq!(km.at_risk_at(1.0), 8);
        assert_eq!(km.at_risk_at(1.5), 7);
        assert_eq!(km.at_risk_at(2.0), 7);
        assert_eq!(km.at_risk_at(2.5), 4);
        assert_eq!(km.at_risk_at(6.0), 1);
        assert_eq!(km.at_risk_at(6.5), 0);
        let empty = kaplan_meier(&[], 0.95);
        assert_eq!((empty.subjects, empty.median), (0, None));
        assert_eq!(empty.survival_at(1.0), None);
        assert_eq!(empty.at_risk_at(1.0), 0);
    }

    #[test]
    fn kaplan_meier_all_censored_all_failed_and_unusable_durations() {
        // All censored: S stays 1 with a degenerate band; no median.
        let km = kaplan_meier(&subjects(&[(3.0, false), (1.0, false), (3.0, false)]), 0.95);
        assert_eq!(km.events, 0);
        assert_eq!(km.steps.len(), 2);
        assert_eq!(km.steps[1].at_risk, 2);
        assert!(
            km.steps
                .iter()
                .all(|st| (st.survival, st.lower, st.upper, st.variance) == (1.0, 1.0, 1.0, 0.0))
        );
        assert_eq!((km.median, km.median_lower, km.median_upper), (None, None, None));
        // Everyone at risk fails at once: S = 0, the step adds nothing to Greenwood's sum (lifelines
        // replaces its infinite term by 0), band (0, 0); median and both ends at that time.
        let km = kaplan_meier(&subjects(&[(1.0, true), (1.0, true)]), 0.95);
        let st = &km.steps[0];
        assert_eq!((st.survival, st.variance, st.lower, st.upper), (0.0, 0.0, 0.0, 0.0));
        assert_eq!(
            (km.median, km.median_lower, km.median_upper),
            (Some(1.0), Some(1.0), Some(1.0))
        );
        // Negative, NaN and infinite durations are left out; -0.0 and 0.0 are one time.
        let km = kaplan_meier(
            &subjects(&[
                (-1.0, true),
                (f64::NAN, true),
                (f64::INFINITY, false),
                (-0.0, true),
                (0.0, false),
                (2.0, true),
            ]),
            0.95,
        );
        assert_eq!((km.subjects, km.events, km.steps.len()), (3, 2, 2));
        assert_eq!(
            (km.steps[0].time, km.steps[0].events, km.steps[0].censored),
            (0.0, 1, 1)
        );
        close(km.steps[0].survival, 2.0 / 3.0, 1e-15);
    }

    #[test]
    fn band_narrows_with_confidence() {
        let (a, b) = (kaplan_meier(&textbook(), 0.8), kaplan_meier(&textbook(), 0.99));
        for (x, y) in a.steps.iter().zip(&b.steps).take(4) {
            assert!(y.lower < x.lower && x.lower < x.survival && x.survival < x.upper && x.upper < y.upper);
        }
    }

    #[test]
    fn log_rank_two_groups_by_hand() {
        // A: failures at 1, 3, censored at 3, 5. B: failures at 2, 3, 4, 6.
        // t  n  nA  d  E_A = nA d / n   V = nA nB d (n - d) / (n^2 (n - 1))
        // 1  8  4   1  1/2              4 x 4 x 7 / (64 x 7)      = 1/4
        // 2  7  3   1  3/7              3 x 4 x 6 / (49 x 6)      = 12/49
        // 3  6  3   2  1                3 x 3 x 2 x 4 / (36 x 5)  = 2/5  (A's censored part at risk)
        // 4  3  1   1  1/3              1 x 2 x 2 / (9 x 2)       = 2/9
        // 6  1  0   1  0                0
        // O_A = 2, E_A = 95/42, O - E = -11/42; V = 9853/8820; statistic = (121/1764) / (9853/8820)
        // = 605/9853 = 0.0614026; lifelines: 0.06140261849182986, p 0.8042926233115748.
        let a = subjects(&[(1.0, true), (3.0, true), (3.0, false), (5.0, false)]);
        let b = subjects(&[(2.0, true), (3.0, true), (4.0, true), (6.0, true)]);
        let r = log_rank(&[&a, &b]);
        close(r.statistic, 605.0 / 9853.0, 1e-12);
        close(r.statistic, 0.06140261849182986, 1e-12);
        close(r.p_value, 0.8042926233115748, 1e-9);
        assert_eq!(r.degrees_of_freedom, 1);
        // Symmetric in the groups.
        let swapped = log_rank(&[&b, &a]);
        close(swapped.statistic, r.statistic, 1e-12);
    }

    #[test]
    fn log_rank_group_without_events_and_degenerate_groups() {
        let a = subjects(&[(1.0, true), (3.0, true), (3.0, false), (5.0, false)]);
        let b = subjects(&[(2.0, true), (3.0, true), (4.0, true), (6.0, true)]);
        // A third group with no failures still counts (it is at risk); lifelines:
        // multivariate_logrank_test -> 3.302493467101422, p 0.19181062275012162, 2 df.
        let c = subjects(&[(2.5, false), (4.0, false), (7.0, false)]);
        let r = log_rank(&[&a, &b, &c]);
        assert_eq!(r.degrees_of_freedom, 2);
        close(r.statistic, 3.302493467101422, 1e-12);
        close(r.p_value, 0.19181062275012162, 1e-9);
        // A third group censored before the first failure is never at risk: V is singular and the
        // generalised inverse gives the two-group statistic, on 2 df (lifelines: 0.06140261849182999,
        // p 0.9697651897167682).
        let gone = subjects(&[(0.5, false), (0.5, false)]);
        let r = log_rank(&[&a, &b, &gone]);
        assert_eq!(r.degrees_of_freedom, 2);
        close(r.statistic, 0.06140261849182999, 1e-12);
        close(r.p_value, 0.9697651897167682, 1e-9);
        // Empty groups are dropped; fewer than two non-empty groups: nothing to compare.
        let r = log_rank(&[&a, &[], &b]);
        close(r.statistic, 605.0 / 9853.0, 1e-12);
        assert_eq!(r.degrees_of_freedom, 1);
        let nothing = LogRank {
            statistic: 0.0,
            degrees_of_freedom: 0,
            p_value: 1.0,
        };
        assert_eq!(log_rank(&[&a]), nothing);
        assert_eq!(log_rank(&[&a, &[]]), nothing);
        assert_eq!(log_rank(&[]), nothing);
        // No failures anywhere: O - E = 0, statistic 0, p 1.
        let r = log_rank(&[&c, &gone]);
        assert_eq!((r.statistic, r.degrees_of_freedom, r.p_value), (0.0, 1, 1.0));
    }

    #[test]
    fn afr_by_hand() {
        // 5 failures over 1,000 part-years (365,250 part-days): 0.005 per part-year; the exact 95%
        // interval is chi2(0.025; 10) / 2000 and chi2(0.975; 12) / 2000 = (0.00162349, 0.01166833)
        // (the Poisson-rate figures in stats.rs, scaled to 1,000 units).
        let a = annualised_failure_rate(5, 365_250.0, 0.95);
        assert_eq!(a.failures, 5);
        close(a.part_years, 1000.0, 1e-15);
        close(a.rate_per_year.unwrap(), 0.005, 1e-15);
        close(a.lower, 0.001623486390118421, 1e-9);
        close(a.upper.unwrap(), 0.01166833207932267, 1e-9);
        // No failures: lower 0, upper -ln(0.025) / part-years = 3.688879 / 2 = 1.844440 per year.
        let a = annualised_failure_rate(0, 2.0 * DAYS_PER_YEAR, 0.95);
        assert_eq!((a.rate_per_year, a.lower), (Some(0.0), 0.0));
        close(a.upper.unwrap(), -(0.025_f64.ln()) / 2.0, 1e-12);
        // No exposure: no rate, unbounded.
        let a = annualised_failure_rate(3, 0.0, 0.95);
        assert_eq!(
            (a.part_years, a.rate_per_year, a.lower, a.upper),
            (0.0, None, 0.0, None)
        );
        assert_eq!(annualised_failure_rate(3, f64::NAN, 0.95).rate_per_year, None);
    }
    /// The data set of tests/reference/survival_subjects.csv: (group, duration, event).
    fn reference_subjects() -> Vec<(u8, Subject)> {
        include_str!("../../tests/reference/survival_subjects.csv")
            .lines()
            .skip(1)
            .map(|line| {
                let f: Vec<&str> = line.split(',').collect();
                let subject = Subject {
                    duration: f[1].parse().expect("duration"),
                    event: f[2] == "1",
                };
                (f[0].parse().expect("group"), subject)
            })
            .collect()
    }

    struct Case {
        label: &'static str,
        /// None: every group pooled.
        group: Option<u8>,
        /// Observation stopped at this many days: later durations are censored there.
        censor_at: Option<f64>,
        confidence: f64,
        /// (t, survival, lower, upper) from survival_function_at_times and confidence_interval_.asof.
        at: &'static [(f64, f64, f64, f64)],
        /// median_survival_time_, median_survival_times(confidence_interval_) (inf as None).
        median: (Option<f64>, Option<f64>, Option<f64>),
    }

    /// Agreement with Python lifelines 0.30.3 on 2,000 subjects in 3 groups (974 failures, 277 tied
    /// durations). The figures are printed by tests/reference/survival_lifelines.py, which also wrote
    /// the CSV fixture. Tolerance 1e-9 relative: lifelines sums logarithms where this module
    /// multiplies, and the band's z comes from a chi-square quantile (~1e-12) rather than scipy's
    /// norm.ppf; both differences are far below it.
    #[test]
    fn matches_lifelines_reference() {
        let data = reference_subjects();
        assert_eq!(data.len(), 2000);
        let cases = [
            Case {
                label: "all",
                group: None,
                censor_at: None,
                confidence: 0.95,
                at: &[
                    (0.0, 1.0, 1.0, 1.0),
                    (30.0, 0.9775851910796283, 0.9699953942766487, 0.983271673829409),
                    (100.0, 0.8853806930672696, 0.8700652192967083, 0.8989969567944105),
                    (182.5, 0.7726522578837921, 0.7524064349033566, 0.7914788788537375),
                    (365.0, 0.5565982691298409, 0.5312338005099946, 0.5811716339135122),
                    (500.0, 0.43594849981485134, 0.4089522856019949, 0.4626077641443534),
                    (730.0, 0.2813319655318135, 0.2509514276144201, 0.31242527818161137),
                    (904.0, 0.16898069535461036, 0.1189522072085591, 0.2265485775995903),
                ],
                median: (Some(419.2), Some(389.4), Some(446.5)),
            },
            Case {
                label: "group 0",
                group: Some(0),
                censor_at: None,
                confidence: 0.95,
                at: &[
                    (0.0, 1.0, 1.0, 1.0),
                    (30.0, 0.975362744112519, 0.9606656123720841, 0.9846122253923125),
                    (100.0, 0.8566408590584011, 0.8273535290302199, 0.8813196625966767),
                    (182.5, 0.6936490263838512, 0.6553943735266436, 0.7285661382335992),
                    (365.0, 0.4038702753547379, 0.3612111873364417, 0.4460749776057476),
                    (500.0, 0.3187864042399251, 0.276775166039761, 0.3615103506319872),
                    (730.0, 0.14075114845372014, 0.09955567237300673, 0.18891463733531186),
                    (904.0, 0.09746617169202924, 0.05633626389696315, 0.15189759114023818),
                ],
                median: (Some(306.7), Some(276.9), Some(330.4)),
            },
            Case {
                label: "group 1",
                group: Some(1),
                censor_at: None,
                confidence: 0.95,
                at: &[
                    (0.0, 1.0, 1.0, 1.0),
                    (30.0, 0.9685317972795946, 0.9516441230054369, 0.979584774492181),
                    (100.0, 0.8576750024671307, 0.827346736749614, 0.8830556056151091),
                    (182.5, 0.7519615079745329, 0.714787295934794, 0.7850361144705132),
                    (365.0, 0.5219732240348167, 0.47753930369965364, 0.5644638941845191),
                    (500.0, 0.3602971296182126, 0.31464782452148893, 0.40607242120201),
                    (730.0, 0.2163338484872075, 0.16747534223063795, 0.26938400543491536),
                    (904.0, 0.1029315722705337, 0.034654367764524574, 0.21491226432588031),
                ],
                median: (Some(379.3), Some(344.8), Some(420.4)),
            },
            Case {
                label: "group 2",
                group: Some(2),
                censor_at: None,
                confidence: 0.95,
                at: &[
                    (0.0, 1.0, 1.0, 1.0),
                    (30.0, 0.9889743729269801, 0.9770108596384117, 0.9947288336521141),
                    (100.0, 0.943968972390443, 0.9224452390673318, 0.9596497750982017),
                    (182.5, 0.8773121495722096, 0.8476173681098279, 0.9015582863609041),
                    (365.0, 0.7564092722013638, 0.7163867253317303, 0.7916224586787802),
                    (500.0, 0.6410142878225832, 0.5929934896437425, 0.6849301960003886),
                    (730.0, 0.4861240963938652, 0.4270348176563353, 0.5425733499634247),
                    (904.0, 0.31683635867351656, 0.22065844096399384, 0.417192025557514),
                ],
                median: (Some(687.3), Some(612.4), Some(766.5)),
            },
            Case {
                label: "group 0 at 90%",
                group: Some(0),
                censor_at: None,
                confidence: 0.9,
                at: &[
                    (0.0, 1.0, 1.0, 1.0),
                    (30.0, 0.975362744112519, 0.9635064357135829, 0.983400223445796),
                    (100.0, 0.8566408590584011, 0.8323986306718573, 0.8776375013557324),
                    (182.5, 0.6936490263838512, 0.661770156572942, 0.7231757250777614),
                    (365.0, 0.4038702753547379, 0.36807837069814403, 0.4393408230056084),
                    (500.0, 0.3187864042399251, 0.28345430265933474, 0.354619711393785),
                    (730.0, 0.14075114845372014, 0.10566323217862361, 0.18075598231369447),
                    (904.0, 0.09746617169202924, 0.06202086059280663, 0.14231537749873124),
                ],
                median: (Some(306.7), Some(282.1), Some(327.6)),
            },
            Case {
                label: "group 1 censored at 380 days",
                group: Some(1),
                censor_at: Some(380.0),
                confidence: 0.95,
                at: &[
                    (0.0, 1.0, 1.0, 1.0),
                    (30.0, 0.9685317972795946, 0.9516441230054369, 0.979584774492181),
                    (100.0, 0.8576750024671307, 0.827346736749614, 0.8830556056151091),
                    (182.5, 0.7519615079745329, 0.714787295934794, 0.7850361144705132),
                    (365.0, 0.5219732240348167, 0.47753930369965364, 0.5644638941845191),
                    (500.0, 0.49946776038185575, 0.45462514422571504, 0.5426079422975246),
                    (730.0, 0.49946776038185575, 0.45462514422571504, 0.5426079422975246),
                    (904.0, 0.49946776038185575, 0.45462514422571504, 0.5426079422975246),
                ],
                median: (Some(379.3), Some(344.8), None),
            },
        ];
        for case in &cases {
            let subjects: Vec<Subject> = data
                .iter()
                .filter(|(g, _)| case.group.is_none_or(|want| *g == want))
                .map(|(_, s)| match case.censor_at {
                    Some(c) if s.duration > c => Subject {
                        duration: c,
                        event: false,
                    },
                    _ => *s,
                })
                .collect();
            let km = kaplan_meier(&subjects, case.confidence);
            for &(t, s, lo, hi) in case.at {
                let (gs, glo, ghi) = km.survival_at(t).expect("t >= 0");
                for (got, want) in [(gs, s), (glo, lo), (ghi, hi)] {
                    assert!(
                        (got - want).abs() <= 1e-9 * want,
                        "{} at {t}: got {got}, want {want}",
                        case.label
                    );
                }
            }
            assert_eq!(
                (km.median, km.median_lower, km.median_upper),
                case.median,
                "{}",
                case.label
            );
        }
        let all = kaplan_meier(&data.iter().map(|(_, s)| *s).collect::<Vec<_>>(), 0.95);
        assert_eq!((all.subjects, all.events), (2000, 974));

        // multivariate_logrank_test over the three groups, and logrank_test of group 0 against 1.
        let groups: Vec<Vec<Subject>> = (0..3)
            .map(|g| data.iter().filter(|(x, _)| *x == g).map(|(_, s)| *s).collect())
            .collect();
        let r = log_rank(&[&groups[0], &groups[1], &groups[2]]);
        let (stat, p) = (143.6934073127908, 6.271523574182999e-32);
        assert_eq!(r.degrees_of_freedom, 2);
        close(r.statistic, stat, 1e-9);
        close(r.p_value, p, 1e-9);
        let r = log_rank(&[&groups[0], &groups[1]]);
        let (stat, p) = (8.05413014967287, 0.004540003555350988);
        assert_eq!(r.degrees_of_freedom, 1);
        close(r.statistic, stat, 1e-9);
        close(r.p_value, p, 1e-9);
    }

    fn spell(entry: f64, exit: f64, event: bool) -> Spell {
        Spell { entry, exit, event }
    }

    #[test]
    fn a_spell_is_at_risk_only_after_it_entered() {
        // A part failing at 2 and one censored at 5 were in the group from age 0; a third moved
        // in at 3 and out at 4. At 2 two are at risk (the third had not entered): S(2) = 1/2,
        // where counting the third from 0 would give 2/3. At 3 the mover is not yet at risk
        // (entry < t), at 3.5 it is.
        let km = kaplan_meier_spells(
            &[spell(0.0, 2.0, true), spell(0.0, 5.0, false), spell(3.0, 4.0, false)],
            0.95,
        );
        let at: Vec<(f64, u64, u64, u64)> = km
            .steps
            .iter()
            .map(|s| (s.time, s.at_risk, s.events, s.censored))
            .collect();
        assert_eq!(at, [(2.0, 2, 1, 0), (3.0, 1, 0, 0), (4.0, 2, 0, 1), (5.0, 1, 0, 1)]);
        assert_eq!(km.survival_at(2.0).unwrap().0, 0.5);
        assert_eq!(km.steps[0].variance, 0.25 * 0.5);
        assert_eq!((km.at_risk_at(3.0), km.at_risk_at(3.5)), (1, 2));
        // Spells from 0 are subjects: the same curve as kaplan_meier.
        let subjects = [
            Subject {
                duration: 1.0,
                event: true,
            },
            Subject {
                duration: 2.0,
                event: false,
            },
            Subject {
                duration: 2.0,
                event: true,
            },
        ];
        let spells: Vec<Spell> = subjects.iter().map(Spell::from).collect();
        assert_eq!(kaplan_meier(&subjects, 0.95), kaplan_meier_spells(&spells, 0.95));
    }

    #[test]
    fn log_rank_over_spells_by_hand() {
        // A: fails at 2. B: censored at 5, and a part that moved in at 1 failing at 3.
        // t=2: n_A 1, n_B 2, d 1: O-E = 1 - 1/3, V = 1*2/(9*2) * 1*(3-1) = 2/9.
        // t=3: n_A 0, n_B 2, d 1 (B): O-E += 0, V += 0. Statistic (2/3)^2 / (2/9) = 2,
        // p = P(chi2_1 > 2) = erfc(1).
        let a = [spell(0.0, 2.0, true)];
        let b = [spell(0.0, 5.0, false), spell(1.0, 3.0, true)];
        let r = log_rank_spells(&[&a, &b]);
        close(r.statistic, 2.0, 1e-12);
        assert_eq!(r.degrees_of_freedom, 1);
        close(r.p_value, 0.157_299_207_050_285_13, 1e-12);
    }
}
