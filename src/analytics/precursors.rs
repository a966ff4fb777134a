//! Precursor signals: does a part fail more often in the N days after a given signal (an ECC
//! error, a row remap, an XID code) than the rest of its installed time?
//!
//! For one signal kind and code and a window of N days, a part's exposed time is the union over the
//! signal's occurrences t of (t, t + N], intersected with the part's installed time; the rest of
//! its installed time is unexposed. Summed over parts: k1 failures in T1 exposed days, k0 in T0
//! unexposed. The rate ratio R = (k1 / T1) / (k0 / T0) is compared exactly, conditional on
//! k1 + k0: under the null k1 ~ Binomial(k1 + k0, T1 / (T1 + T0)), and in general with
//! p = R T1 / (R T1 + T0), so a Clopper-Pearson interval on p maps to R = p / (1 - p) x T0 / T1
//! (the same construction as `decisions::compare`).
//!
//! Assumptions: a failure counts as exposed only if a signal came strictly before it (at most N
//! days before); a signal logged at the failure's own time is part of the failure, not a warning.
//! Failures outside the part's installed time are ignored (a part on a shelf does not fail in
//! service). Failures are taken as independent events in part-time, so a part that fails, is
//! repaired and fails again contributes both failures.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::analytics::decisions::binomial::{binomial_two_sided_p, clopper_pearson};
use crate::analytics::survival::DAYS_PER_YEAR;

/// One occurrence of a precursor signal on a part, e.g. ("ecc", Some(1)), ("row_remap", None),
/// ("xid", Some(94)), at `at` days (the clock of the installed intervals).
#[derive(Debug, Clone, PartialEq)]
pub struct PrecursorSignal {
    pub kind: String,
    pub code: Option<i64>,
    pub at: f64,
}

/// One part's installed intervals (from, to) in days, its precursor signals and its hardware
/// failures' times.
#[derive(Debug, Clone, PartialEq)]
pub struct PartHistory {
    pub part: String,
    pub installed: Vec<(f64, f64)>,
    pub signals: Vec<PrecursorSignal>,
    pub failures: Vec<f64>,
}

/// How much more often parts fail in the window after one kind of signal.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct PrecursorLift {
    pub kind: String,
    pub code: Option<i64>,
    pub window_days: f64,
    /// Occurrences of the signal (all of them, installed or not).
    pub occurrences: u64,
    /// Parts with at least one occurrence.
    pub parts_with_signal: u64,
    /// Installed part-days within the window after a signal (T1).
    pub exposed_days: f64,
    /// Failures within it (k1).
    pub exposed_failures: u64,
    /// The rest of the installed part-days (T0), over every part given.
    pub unexposed_days: f64,
    pub unexposed_failures: u64,
    /// k1 / T1 x 365.25; None without exposed time.
    pub exposed_rate_per_year: Option<f64>,
    /// k0 / T0 x 365.25; None without unexposed time.
    pub unexposed_rate_per_year: Option<f64>,
    /// Exposed rate / unexposed rate; None when undefined (no unexposed failures, or no time on a side).
    pub rate_ratio: Option<f64>,
    /// Lower bound of the exact conditional interval (0 without exposed failures); None when a
    /// side has no time.
    pub ratio_lower: Option<f64>,
    /// Upper bound; None when unbounded (no unexposed failures) or a side has no time.
    pub ratio_upper: Option<f64>,
    /// Exact two-sided p-value of "same rate" (doubled smaller binomial tail); None when a side has no time.
    pub p_value: Option<f64>,
    /// Whether the interval excludes 1 (p_value < 1 - confidence).
    pub significant: bool,
}

/// Sorted, merged closed intervals (touching ones joined); empty and non-finite ones dropped.
fn union(mut intervals: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    intervals.retain(|(a, b)| a.is_finite() && b.is_finite() && b > a);
    intervals.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(intervals.len());
    for (a, b) in intervals {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Total length of the intersection of two unions (each sorted and disjoint).
fn overlap(x: &[(f64, f64)], y: &[(f64, f64)]) -> f64 {
    let (mut i, mut j, mut total) = (0, 0, 0.0);
    while i < x.len() && j < y.len() {
        let lo = x[i].0.max(y[j].0);
        let hi = x[i].1.min(y[j].1);
        if hi > lo {
            total += hi - lo;
        }
        if x[i].1 < y[j].1 { i += 1 } else { j += 1 }
    }
    total
}

fn contains(union: &[(f64, f64)], t: f64) -> bool {
    let i = union.partition_point(|iv| iv.1 < t);
    union.get(i).is_some_and(|iv| iv.0 <= t)
}

/// One result per (kind, code) seen among the parts' signals, sorted by the ratio's lower bound,
/// highest first (the strongest evidence of a warning first; None last), then by p-value and key.
/// A window that is not a positive finite number of days gives no results. See the module
/// documentation for the method and its assumptions.
pub fn precursor_lift(parts: &[PartHistory], window_days: f64, confidence: f64) -> Vec<PrecursorLift> {
    if !(window_days.is_finite() && window_days > 0.0) {
        return Vec::new();
    }
    struct Part {
        installed: Vec<(f64, f64)>,
        installed_days: f64,
        /// Failures within installed time, ascending.
        failures: Vec<f64>,
        /// Signal times by key, ascending.
        signals: BTreeMap<(String, Option<i64>), Vec<f64>>,
    }
    let prepared: Vec<Part> = parts
        .iter()
        .map(|p| {
            let installed = union(p.installed.clone());
            let installed_days = installed.iter().map(|(a, b)| b - a).sum();
            let mut failures: Vec<f64> = p
                .failures
                .iter()
                .copied()
                .filter(|&f| contains(&installed, f))
                .collect();
            failures.sort_by(f64::total_cmp);
            let mut signals: BTreeMap<(String, Option<i64>), Vec<f64>> = BTreeMap::new();
            for s in p.signals.iter().filter(|s| s.at.is_finite()) {
                signals.entry((s.kind.clone(), s.code)).or_default().push(s.at);
            }
            signals.values_mut().for_each(|v| v.sort_by(f64::total_cmp));
            Part {
                installed,
                installed_days,
                failures,
                signals,
            }
        })
        .collect();
    let total_days: f64 = prepared.iter().map(|p| p.installed_days).sum();
    let total_failures: u64 = prepared.iter().map(|p| p.failures.len() as u64).sum();
    let keys: BTreeSet<&(String, Option<i64>)> = prepared.iter().flat_map(|p| p.signals.keys()).collect();

    let mut out: Vec<PrecursorLift> = keys
        .into_iter()
        .map(|key| {
            let (mut t1, mut k1, mut occurrences, mut with_signal) = (0.0, 0_u64, 0_u64, 0_u64);
            for part in &prepared {
                let Some(times) = part.signals.get(key) else {
                    continue;
                };
                occurrences += times.len() as u64;
                with_signal += 1;
                let windows = union(times.iter().map(|&t| (t, t + window_days)).collect());
                t1 += overlap(&windows, &part.installed);
                k1 += part
                    .failures
                    .iter()
                    .filter(|&&f| {
                        // The latest signal strictly before the failure decides.
                        let before = times.partition_point(|&t| t < f);
                        before > 0 && f <= times[before - 1] + window_days
                    })
                    .count() as u64;
            }
            // Rounding can leave T1 a hair above the installed total.
            let t0 = (total_days - t1).max(0.0);
            let k0 = total_failures - k1;
            lift(
                key,
                window_days,
                occurrences,
                with_signal,
                (k1, t1),
                (k0, t0),
                confidence,
            )
        })
        .collect();
    out.sort_by(|a, b| {
        let lower = |x: &PrecursorLift| x.ratio_lower.unwrap_or(f64::NEG_INFINITY);
        lower(b)
            .total_cmp(&lower(a))
            .then(a.p_value.unwrap_or(2.0).total_cmp(&b.p_value.unwrap_or(2.0)))
            .then_with(|| (&a.kind, a.code).cmp(&(&b.kind, b.code)))
    });
    out
}

fn lift(
    key: &(String, Option<i64>),
    window_days: f64,
    occurrences: u64,
    parts_with_signal: u64,
    (k1, t1): (u64, f64),
    (k0, t0): (u64, f64),
    confidence: f64,
) -> PrecursorLift {
    let mut r = PrecursorLift {
        kind: key.0.clone(),
        code: key.1,
        window_days,
        occurrences,
        parts_with_signal,
        exposed_days: crate::analytics::stats::positive_zero(t1),
        exposed_failures: k1,
        unexposed_days: crate::analytics::stats::positive_zero(t0),
        unexposed_failures: k0,
        exposed_rate_per_year: (t1 > 0.0).then(|| k1 as f64 / t1 * DAYS_PER_YEAR),
        unexposed_rate_per_year: (t0 > 0.0).then(|| k0 as f64 / t0 * DAYS_PER_YEAR),
        rate_ratio: None,
        ratio_lower: None,
        ratio_upper: None,
        p_value: None,
        significant: false,
    };
    if t1 > 0.0 && t0 > 0.0 {
        let n = k1 + k0;
        let to_ratio = |p: f64| p / (1.0 - p) * t0 / t1;
        let (lo, hi) = clopper_pearson(k1, n, confidence);
        r.rate_ratio = (k0 > 0).then(|| k1 as f64 / t1 / (k0 as f64 / t0));
        r.ratio_lower = Some(if k1 == 0 { 0.0 } else { to_ratio(lo) });
        r.ratio_upper = (k0 > 0).then(|| to_ratio(hi));
        let p = binomial_two_sided_p(k1, n, t1 / (t1 + t0));
        r.p_value = Some(p);
        r.significant = n > 0 && p < 1.0 - confidence;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytics::decisions::binomial::clopper_pearson;

    fn signal(kind: &str, code: Option<i64>, at: f64) -> PrecursorSignal {
        PrecursorSignal {
            kind: kind.into(),
            code,
            at,
        }
    }

    /// Window 10 days.
    /// A: installed 0-100; ECC 1 at 10 and 15, XID 94 at 50; failures at 18 and 80.
    /// B: installed 0-50 and 60-100 (on a shelf between); ECC 1 at 45, row remap at 52 (on the
    ///    shelf); failures at 48, 58 (on the shelf: ignored) and 62.
    /// C: installed 0-100; XID 79 at 30, logged with the failure at 30.
    /// Installed: 100 + 90 + 100 = 290 part-days; failures counted: 18, 80, 48, 62, 30 = 5.
    fn fleet() -> Vec<PartHistory> {
        vec![
            PartHistory {
                part: "A".into(),
                installed: vec![(0.0, 100.0)],
                signals: vec![
                    signal("ecc", Some(1), 15.0),
                    signal("ecc", Some(1), 10.0),
                    signal("xid", Some(94), 50.0),
                ],
                failures: vec![80.0, 18.0],
            },
            PartHistory {
                part: "B".into(),
                installed: vec![(60.0, 100.0), (0.0, 50.0)],
                signals: vec![signal("ecc", Some(1), 45.0), signal("row_remap", None, 52.0)],
                failures: vec![48.0, 58.0, 62.0],
            },
            PartHistory {
                part: "C".into(),
                installed: vec![(0.0, 100.0)],
                signals: vec![signal("xid", Some(79), 30.0)],
                failures: vec![30.0],
            },
        ]
    }

    #[test]
    fn precursor_windows_by_hand() {
        let r = precursor_lift(&fleet(), 10.0, 0.95);
        let by_key = |kind: &str, code: Option<i64>| r.iter().find(|x| x.kind == kind && x.code == code).unwrap();

        // ECC 1: A's windows 10-20 and 15-25 merge to 10-25 (15 days); B's 45-55 is installed only
        // to 50 (5 days): T1 = 20, T0 = 270. Failures 18 (after 15) and 48 (after 45) are exposed:
        // k1 = 2, k0 = 3. Ratio (2 / 20) / (3 / 270) = 9. The interval maps Clopper-Pearson on 2 of 5
        // through p / (1 - p) x 270 / 20.
        let ecc = by_key("ecc", Some(1));
        assert_eq!((ecc.occurrences, ecc.parts_with_signal), (3, 2));
        assert_eq!((ecc.exposed_days, ecc.exposed_failures), (20.0, 2));
        assert_eq!((ecc.unexposed_days, ecc.unexposed_failures), (270.0, 3));
        assert!((ecc.rate_ratio.unwrap() - 9.0).abs() < 1e-12);
        assert!((ecc.exposed_rate_per_year.unwrap() - 0.1 * 365.25).abs() < 1e-9);
        let (lo, hi) = clopper_pearson(2, 5, 0.95);
        let ratio = |p: f64| p / (1.0 - p) * 13.5;
        assert!((ecc.ratio_lower.unwrap() - ratio(lo)).abs() < 1e-12);
        assert!((ecc.ratio_upper.unwrap() - ratio(hi)).abs() < 1e-9);
        // p-value: 2 x P(X >= 2 | 5, 20/290) = 2 x (1 - (27/29)^5 - 5 (2/29) (27/29)^4) = 0.0859.
        let q: f64 = 20.0 / 290.0;
        let tail = 1.0 - (1.0 - q).powi(5) - 5.0 * q * (1.0 - q).powi(4);
        assert!((ecc.p_value.unwrap() - 2.0 * tail).abs() < 1e-12);
        assert!(!ecc.significant);

        // XID 94: A's window 50-60 (10 days), no failure in it: ratio 0, lower 0, upper from
        // 1 - 0.025^(1/5) mapped with 280 / 10; the p-value is capped at 1.
        let xid = by_key("xid", Some(94));
        assert_eq!(
            (xid.exposed_days, xid.exposed_failures, xid.unexposed_failures),
            (10.0, 0, 5)
        );
        assert_eq!(
            (xid.rate_ratio, xid.ratio_lower, xid.p_value),
            (Some(0.0), Some(0.0), Some(1.0))
        );
        let u = 1.0 - 0.025_f64.powf(0.2);
        assert!((xid.ratio_upper.unwrap() - u / (1.0 - u) * 28.0).abs() < 1e-9);

        // XID 79 logged at the failure's own time is not a warning of it: k1 = 0 over 30-40.
        let coincident = by_key("xid", Some(79));
        assert_eq!((coincident.exposed_days, coincident.exposed_failures), (10.0, 0));

        // Row remap on the shelf at 52: only 60-62 of its window is installed (2 days), and the
        // failure at 62 is in it: (1 / 2) / (4 / 288) = 36.
        let remap = by_key("row_remap", None);
        assert_eq!((remap.exposed_days, remap.exposed_failures), (2.0, 1));
        assert!((remap.rate_ratio.unwrap() - 36.0).abs() < 1e-9);

        // Sorted by the ratio's lower bound, highest first.
        assert_eq!(r.len(), 4);
        for w in r.windows(2) {
            assert!(w[0].ratio_lower >= w[1].ratio_lower, "{r:?}");
        }
        assert_eq!((r[2].kind.as_str(), r[2].code), ("xid", Some(79)));
        assert_eq!((r[3].kind.as_str(), r[3].code), ("xid", Some(94)));
    }

    #[test]
    fn no_window_no_unexposed_time_or_no_failures() {
        assert!(precursor_lift(&fleet(), 0.0, 0.95).is_empty());
        assert!(precursor_lift(&fleet(), f64::NAN, 0.95).is_empty());
        assert!(precursor_lift(&[], 10.0, 0.95).is_empty());
        // A signal whose window covers all installed time: nothing to compare with.
        let all = PartHistory {
            part: "A".into(),
            installed: vec![(0.0, 5.0)],
            signals: vec![signal("ecc", Some(2), 0.0)],
            failures: vec![3.0],
        };
        let r = precursor_lift(&[all], 10.0, 0.95);
        assert_eq!(
            (r[0].exposed_days, r[0].unexposed_days, r[0].exposed_failures),
            (5.0, 0.0, 1)
        );
        assert_eq!((r[0].rate_ratio, r[0].ratio_lower, r[0].p_value), (None, None, None));
        assert!(!r[0].significant);
    }
}
