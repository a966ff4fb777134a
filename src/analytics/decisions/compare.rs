//! Two failure rates compared exactly: failures are Poisson counts a, b over exposures Ea, Eb.
//! Given n = a + b, b is Binomial(n, p) with p = R Eb / (Ea + R Eb), R = rate_B / rate_A; so a
//! Clopper-Pearson interval on p = b / n maps to R = p / (1 - p) x Ea / Eb, and the exact binomial
//! test of p0 = Eb / (Ea + Eb) tests R = 1 (Przyborowski & Wilenski 1940; Ulm 1990).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::binomial::{binomial_two_sided_p, clopper_pearson};
use crate::analytics::headline::round6;

/// One side of a comparison: failures over GPU-days of exposure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Side {
    pub failures: u64,
    pub gpu_days: f64,
}

impl Side {
    /// failures / GPU-days x 1,000; None without exposure.
    pub fn rate_per_1000(&self) -> Option<f64> {
        (self.gpu_days > 0.0).then(|| self.failures as f64 / self.gpu_days * 1000.0)
    }
}

/// B against A: the rate ratio B / A with its exact interval and p-value.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct RateComparison {
    pub a_failures: u64,
    pub a_gpu_days: f64,
    /// Failures per 1,000 GPU-days in A; null without exposure.
    pub a_rate_per_1000_gpu_days: Option<f64>,
    pub b_failures: u64,
    pub b_gpu_days: f64,
    pub b_rate_per_1000_gpu_days: Option<f64>,
    /// rate_B / rate_A; null when undefined (no failures in A, or no exposure on a side).
    #[schema(example = 0.62)]
    pub rate_ratio: Option<f64>,
    /// Lower bound of the exact interval for the ratio (0 when B had no failures); null without exposure.
    pub ratio_lower: Option<f64>,
    /// Upper bound; null when unbounded (A had no failures) or without exposure.
    pub ratio_upper: Option<f64>,
    /// Exact two-sided p-value of "same rate" (doubled smaller binomial tail); null without exposure.
    #[schema(example = 0.004)]
    pub p_value: Option<f64>,
    /// Whether the interval excludes 1 (equivalently p_value < 1 - confidence).
    pub significant: bool,
    /// The result in one sentence.
    #[schema(
        example = "B fails 38% less often than A (rate ratio 0.62, 95% CI 0.45 to 0.85); the difference is unlikely to be chance, p = 0.004."
    )]
    pub verdict: String,
}

/// Compares B with A at the given confidence (0.95 for a 95% interval).
pub fn compare_rates(a: Side, b: Side, confidence: f64) -> RateComparison {
    let mut c = RateComparison {
        a_failures: a.failures,
        a_gpu_days: round6(a.gpu_days),
        a_rate_per_1000_gpu_days: a.rate_per_1000().map(round6),
        b_failures: b.failures,
        b_gpu_days: round6(b.gpu_days),
        b_rate_per_1000_gpu_days: b.rate_per_1000().map(round6),
        rate_ratio: None,
        ratio_lower: None,
        ratio_upper: None,
        p_value: None,
        significant: false,
        verdict: String::new(),
    };
    if a.gpu_days > 0.0 && b.gpu_days > 0.0 {
        let n = a.failures + b.failures;
        let scale = a.gpu_days / b.gpu_days;
        let odds = |p: f64| p / (1.0 - p) * scale;
        let (lo, hi) = clopper_pearson(b.failures, n, confidence);
        c.rate_ratio = (a.failures > 0).then(|| round6(b.failures as f64 / a.failures as f64 * scale));
        c.ratio_lower = Some(round6(if n == 0 { 0.0 } else { odds(lo) }));
        c.ratio_upper = (a.failures > 0).then(|| round6(odds(hi)));
        let p = binomial_two_sided_p(b.failures, n, b.gpu_days / (a.gpu_days + b.gpu_days));
        c.p_value = Some(p);
        c.significant = n > 0 && p < 1.0 - confidence;
    }
    c.verdict = verdict(&c, "A", "B", confidence);
    c
}

/// A p-value as the verdicts write it: "p < 0.001" or "p = 0.039".
pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".into()
    } else {
        format!("p = {p:.3}")
    }
}

/// The comparison in one sentence, naming the sides (e.g. "the previous window", "this window").
pub fn verdict(c: &RateComparison, a: &str, b: &str, confidence: f64) -> String {
    let mut text = sentence(c, a, b, confidence);
    if let Some(first) = text.get(..1).filter(|f| f.is_ascii()) {
        let upper = first.to_ascii_uppercase();
        text.replace_range(..1, &upper);
    }
    text
}

fn sentence(c: &RateComparison, a: &str, b: &str, confidence: f64) -> String {
    let level = format!("{:.0}%", confidence * 100.0);
    let (Some(p), Some(lower)) = (c.p_value, c.ratio_lower) else {
        let which = if c.a_gpu_days <= 0.0 { a } else { b };
        return format!("{which} has no GPU-days of exposure: nothing to compare.");
    };
    let chance = if c.significant {
        format!("the difference is unlikely to be chance, {}.", p_text(p))
    } else {
        format!("the difference could be chance, {}.", p_text(p))
    };
    match (c.a_failures, c.b_failures, c.rate_ratio, c.ratio_upper) {
        (0, 0, _, _) => format!("No failures in {a} or {b}: no evidence of a difference yet."),
        (0, nb, _, _) => format!(
            "{a} had no failures and {b} had {nb}: {b}'s rate is at least {lower:.2} times {a}'s ({level} lower bound); {chance}"
        ),
        (na, 0, _, Some(hi)) => format!(
            "{b} had no failures and {a} had {na}: {b}'s rate is at most {hi:.2} times {a}'s ({level} upper bound); {chance}"
        ),
        (_, _, Some(r), Some(hi)) => {
            let how = if (r - 1.0).abs() < 0.005 {
                format!("{b} fails as often as {a}")
            } else if r < 1.0 {
                format!("{b} fails {:.0}% less often than {a}", (1.0 - r) * 100.0)
            } else if r < 2.0 {
                format!("{b} fails {:.0}% more often than {a}", (r - 1.0) * 100.0)
            } else {
                format!("{b} fails {r:.1} times as often as {a}")
            };
            format!("{how} (rate ratio {r:.2}, {level} CI {lower:.2} to {hi:.2}); {chance}")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, tol: f64) {
        assert!(
            (got - want).abs() <= tol * want.abs().max(1e-9),
            "got {got}, want {want}"
        );
    }

    fn side(failures: u64, gpu_days: f64) -> Side {
        Side { failures, gpu_days }
    }

    #[test]
    fn interval_excluding_one() {
        // A: 10 failures in 100 GPU-days, B: 2 in 100. Ratio 2/10 = 0.2, p0 = 1/2, n = 12.
        // p-value = 2 x P(X <= 2 | 12, 1/2) = 2 x 79/4096 = 0.038574.
        // CI on p (Clopper-Pearson, k = 2, n = 12): (0.020863, 0.484138) (solved by bisection on the
        // binomial sums in a 20-line Python script, independent of this code); ratio = p / (1 - p):
        // 0.020863 / 0.979137 = 0.021307, 0.484138 / 0.515862 = 0.938502.
        let c = compare_rates(side(10, 100.0), side(2, 100.0), 0.95);
        assert_eq!(c.rate_ratio, Some(0.2));
        close(c.p_value.unwrap(), 0.038574, 1e-5);
        close(c.ratio_lower.unwrap(), 0.021307, 1e-4);
        close(c.ratio_upper.unwrap(), 0.938502, 1e-5);
        assert!(c.significant);
        assert_eq!(c.a_rate_per_1000_gpu_days, Some(100.0));
        assert_eq!(c.b_rate_per_1000_gpu_days, Some(20.0));
        assert_eq!(
            c.verdict,
            "B fails 80% less often than A (rate ratio 0.20, 95% CI 0.02 to 0.94); the difference is unlikely to be chance, p = 0.039."
        );
    }

    #[test]
    fn unequal_exposures_scale_the_ratio() {
        // Same counts, A twice the exposure: ratio 2/10 x 200/100 = 0.4; p0 = 100/300 = 1/3.
        // P(X <= 2 | 12, 1/3) = (2/3)^12 + 12 (1/3)(2/3)^11 + 66 (1/3)^2 (2/3)^10
        //   = 0.0077073 + 0.0462441 + 0.1271712 = 0.1811226; p = 0.362245.
        let c = compare_rates(side(10, 200.0), side(2, 100.0), 0.95);
        assert_eq!(c.rate_ratio, Some(0.4));
        close(c.p_value.unwrap(), 0.362245, 1e-5);
        // The interval scales with Ea / Eb = 2.
        close(c.ratio_upper.unwrap(), 2.0 * 0.938502, 1e-5);
        assert!(!c.significant);
        assert!(
            c.verdict
                .starts_with("B fails 60% less often than A (rate ratio 0.40, 95% CI 0.04 to 1.88)")
        );
        assert!(c.verdict.ends_with("the difference could be chance, p = 0.362."));
    }

    #[test]
    fn zero_failures_in_b_gives_an_upper_bound() {
        // A: 5, B: 0, equal exposure. Upper p = 1 - 0.025^(1/5) = 0.521824, ratio <= 0.521824 / 0.478176
        // = 1.091279. p-value = 2 x (1/2)^5 = 0.0625.
        let c = compare_rates(side(5, 50.0), side(0, 50.0), 0.95);
        assert_eq!(c.rate_ratio, Some(0.0));
        assert_eq!(c.ratio_lower, Some(0.0));
        let u = 1.0 - 0.025_f64.powf(0.2);
        close(c.ratio_upper.unwrap(), u / (1.0 - u), 1e-6);
        close(c.ratio_upper.unwrap(), 1.091279, 1e-6);
        close(c.p_value.unwrap(), 0.0625, 1e-9);
        assert!(!c.significant);
        assert_eq!(
            c.verdict,
            "B had no failures and A had 5: B's rate is at most 1.09 times A's (95% upper bound); the difference could be chance, p = 0.063."
        );
    }

    #[test]
    fn zero_failures_in_a_gives_a_lower_bound() {
        // A: 0, B: 4, equal exposure. Lower p = 0.025^(1/4) = 0.397635, ratio >= 0.397635 / 0.602365
        // = 0.660124; upper unbounded. p = 2 x (1/2)^4 = 0.125.
        let c = compare_rates(side(0, 10.0), side(4, 10.0), 0.95);
        assert_eq!(c.rate_ratio, None);
        assert_eq!(c.ratio_upper, None);
        let l = 0.025_f64.powf(0.25);
        close(c.ratio_lower.unwrap(), l / (1.0 - l), 1e-6);
        close(c.p_value.unwrap(), 0.125, 1e-9);
        assert!(
            c.verdict
                .starts_with("A had no failures and B had 4: B's rate is at least 0.66 times A's")
        );
        // Eight failures in B against none: P = 2 x 2^-8 = 0.0078125, and the bound is above 1.
        // Lower p = 0.025^(1/8) = 0.630945, ratio >= 0.630945 / 0.369055 = 1.706971 > 1.
        let c = compare_rates(side(0, 10.0), side(8, 10.0), 0.95);
        close(c.p_value.unwrap(), 0.0078125, 1e-9);
        assert!(c.significant);
        assert!((c.ratio_lower.unwrap() - 1.706971).abs() < 1e-5);
    }

    #[test]
    fn zero_failures_on_both_sides_and_no_exposure() {
        let c = compare_rates(side(0, 10.0), side(0, 20.0), 0.95);
        assert_eq!((c.rate_ratio, c.ratio_lower, c.ratio_upper), (None, Some(0.0), None));
        assert_eq!(c.p_value, Some(1.0));
        assert!(!c.significant);
        assert_eq!(c.verdict, "No failures in A or B: no evidence of a difference yet.");
        let c = compare_rates(side(3, 0.0), side(1, 20.0), 0.95);
        assert_eq!((c.rate_ratio, c.p_value), (None, None));
        assert_eq!(c.verdict, "A has no GPU-days of exposure: nothing to compare.");
    }

    #[test]
    fn verdict_names_the_sides() {
        // 1.5 times: "50% more often"; from twice on, "times as often".
        let c = compare_rates(side(10, 100.0), side(15, 100.0), 0.95);
        assert!(
            c.verdict.starts_with("B fails 50% more often than A (rate ratio 1.50"),
            "{}",
            c.verdict
        );
        let c = compare_rates(side(10, 100.0), side(20, 100.0), 0.95);
        // Ratio 2; p = 2 x P(X >= 20 | 30, 1/2) = 0.098737 (sum of C(30, k) for k >= 20 over 2^30).
        close(c.p_value.unwrap(), 0.098737, 1e-5);
        assert!(
            verdict(&c, "the previous window", "this window", 0.95)
                .starts_with("This window fails 2.0 times as often as the previous window (rate ratio 2.00")
        );
    }
}
