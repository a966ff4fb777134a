//! Small, dependency-free statistics used by the analytics layer: chi-square
//! quantiles, MTBF / Poisson-rate confidence intervals, order statistics and
//! the hostname ordering used to pack unlabelled nodes into GPU groups.

use std::cmp::Ordering;

// ---------------------------------------------------------------------------
// Special functions
// ---------------------------------------------------------------------------

/// Lanczos coefficients (g = 7, n = 9); relative error ~1e-15 for x > 0.
const LANCZOS_G: f64 = 7.0;
// Published coefficients, kept verbatim.
#[allow(clippy::excessive_precision)]
const LANCZOS_COEF: [f64; 9] = [
    0.999_999_999_999_809_93,
    676.520_368_121_885_1,
    -1_259.139_216_722_402_8,
    771.323_428_777_653_13,
    -176.615_029_162_140_59,
    12.507_343_278_686_905,
    -0.138_571_095_265_720_12,
    9.984_369_578_019_571_6e-6,
    1.505_632_735_149_311_6e-7,
];

/// `x`, with a negative zero made positive. Rust's empty f64 sum is -0.0 (and so are products like
/// -1 x 0), which JSON and text would show as "-0.0"; every rounded figure goes through this.
pub fn positive_zero(x: f64) -> f64 {
    if x == 0.0 { 0.0 } else { x }
}

/// Natural log of the gamma function for `x > 0` (Lanczos approximation).
pub fn ln_gamma(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return f64::NAN;
    }
    if x < 0.5 {
        // Reflection keeps accuracy for small arguments.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = LANCZOS_COEF[0];
    let t = x + LANCZOS_G + 0.5;
    for (i, c) in LANCZOS_COEF.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

// Large enough for a ~ 1e6 (series needs O(sqrt(a)) terms near the mode).
const GAMMA_MAX_ITER: usize = 100_000;
const GAMMA_EPS: f64 = 1e-16;

/// `ln(x^a e^-x / Gamma(a))`, the common prefactor of P and Q.
fn gamma_prefactor_ln(a: f64, x: f64) -> f64 {
    a * x.ln() - x - ln_gamma(a)
}

/// Series for P(a, x); converges quickly for x < a + 1.
fn gamma_p_series(a: f64, x: f64) -> f64 {
    let mut ap = a;
    let mut del = 1.0 / a;
    let mut sum = del;
    for _ in 0..GAMMA_MAX_ITER {
        ap += 1.0;
        del *= x / ap;
        sum += del;
        if del.abs() < sum.abs() * GAMMA_EPS {
            break;
        }
    }
    sum * gamma_prefactor_ln(a, x).exp()
}

/// Continued fraction for Q(a, x) (modified Lentz); converges for x >= a + 1.
fn gamma_q_cf(a: f64, x: f64) -> f64 {
    const FPMIN: f64 = f64::MIN_POSITIVE / f64::EPSILON;
    let mut b = x + 1.0 - a;
    let mut c = 1.0 / FPMIN;
    let mut d = 1.0 / b;
    let mut h = d;
    for i in 1..GAMMA_MAX_ITER {
        let an = -(i as f64) * (i as f64 - a);
        b += 2.0;
        d = an * d + b;
        if d.abs() < FPMIN {
            d = FPMIN;
        }
        c = b + an / c;
        if c.abs() < FPMIN {
            c = FPMIN;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < GAMMA_EPS {
            break;
        }
    }
    gamma_prefactor_ln(a, x).exp() * h
}

/// Regularized lower incomplete gamma P(a, x), `a > 0`, `x >= 0`.
pub fn gamma_p(a: f64, x: f64) -> f64 {
    if a.is_nan() || x.is_nan() || a <= 0.0 || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return 0.0;
    }
    if x == f64::INFINITY {
        return 1.0;
    }
    if x < a + 1.0 {
        gamma_p_series(a, x)
    } else {
        1.0 - gamma_q_cf(a, x)
    }
}

/// Regularized upper incomplete gamma Q(a, x) = 1 - P(a, x), computed
/// directly in the tail so it keeps relative accuracy when tiny.
pub fn gamma_q(a: f64, x: f64) -> f64 {
    if a.is_nan() || x.is_nan() || a <= 0.0 || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return 1.0;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    if x < a + 1.0 {
        1.0 - gamma_p_series(a, x)
    } else {
        gamma_q_cf(a, x)
    }
}

/// Chi-square CDF with `dof` degrees of freedom.
pub fn chi_square_cdf(x: f64, dof: f64) -> f64 {
    if x <= 0.0 {
        return if dof > 0.0 { 0.0 } else { f64::NAN };
    }
    gamma_p(dof / 2.0, x / 2.0)
}

/// Standard normal quantile (Acklam, ~1e-9 relative); only a starting point.
#[allow(clippy::excessive_precision)]
fn normal_quantile_approx(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383577518672690e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    const P_LOW: f64 = 0.02425;
    if p < P_LOW {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    }
}

/// Inverse CDF of the chi-square distribution.
///
/// Returns 0 for `p == 0`, `+inf` for `p == 1`, NaN for `p` outside [0, 1]
/// or non-positive `dof`. Relative accuracy ~1e-12 in the bulk.
pub fn chi_square_quantile(p: f64, dof: f64) -> f64 {
    if p.is_nan() || dof.is_nan() || !(0.0..=1.0).contains(&p) || dof <= 0.0 {
        return f64::NAN;
    }
    if p == 0.0 {
        return 0.0;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let a = dof / 2.0;
    // Work in whichever tail is smaller so that the residual keeps relative
    // precision (1 - p is exact for p >= 0.5 by Sterbenz).
    let upper = p > 0.5;
    let target = if upper { 1.0 - p } else { p };
    // Residual is increasing in x in both cases.
    let resid = |x: f64| -> f64 {
        if upper {
            target - gamma_q(a, x / 2.0)
        } else {
            gamma_p(a, x / 2.0) - target
        }
    };
    let pdf = |x: f64| -> f64 { ((a - 1.0) * x.ln() - x / 2.0 - a * std::f64::consts::LN_2 - ln_gamma(a)).exp() };

    // Initial guess: Wilson–Hilferty, or the small-x expansion
    // P(a, x/2) ~ (x/2)^a / Gamma(a+1) when that is negative/too small.
    let z = normal_quantile_approx(p);
    let h = 2.0 / (9.0 * dof);
    let wh = dof * (1.0 - h + z * h.sqrt()).powi(3);
    let small = 2.0 * ((p.ln() + ln_gamma(a + 1.0)) / a).exp();
    let mut x = if wh > 0.0 && !(wh < small && p < 0.5) {
        wh
    } else {
        small
    };
    if !(x.is_finite() && x > 0.0) {
        x = dof;
    }

    // Bracket the root so Newton can always fall back to bisection.
    let mut lo = 0.0_f64;
    let mut hi = x.max(dof).max(1.0);
    while resid(hi) < 0.0 {
        lo = hi;
        hi *= 2.0;
        if !hi.is_finite() {
            return f64::INFINITY;
        }
    }

    for _ in 0..500 {
        let f = resid(x);
        if f == 0.0 {
            return x;
        }
        if f < 0.0 {
            lo = lo.max(x);
        } else {
            hi = hi.min(x);
        }
        let d = pdf(x);
        let mut next = if d > 0.0 && d.is_finite() { x - f / d } else { f64::NAN };
        if !(next > lo && next < hi) {
            // Newton left the bracket (or pdf degenerate): bisect instead.
            next = 0.5 * (lo + hi);
        }
        if (next - x).abs() <= 1e-15 * x.abs() || hi - lo <= 1e-15 * hi {
            return next;
        }
        x = next;
    }
    x
}

// ---------------------------------------------------------------------------
// MTBF and Poisson rate intervals
// ---------------------------------------------------------------------------

/// MTBF point estimate with a two-sided confidence interval, in hours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MtbfEstimate {
    /// `T / r`; `None` when there were no failures (or no exposure).
    pub mtbf_hours: Option<f64>,
    /// Lower confidence bound (always finite, >= 0).
    pub lower_hours: f64,
    /// Upper confidence bound; `None` means unbounded (r = 0 or no exposure).
    pub upper_hours: Option<f64>,
}

/// Normalise the confidence level: NaN or >= 1 means "no information" (1.0),
/// negative is treated as 0.
fn clamp_confidence(c: f64) -> f64 {
    if c.is_nan() || c >= 1.0 { 1.0 } else { c.max(0.0) }
}

/// MTBF with a two-sided interval for a time-truncated test (failure count
/// is Poisson):
/// lower = 2T / chi2((1+c)/2, 2r+2), upper = 2T / chi2((1-c)/2, 2r).
///
/// With r = 0 the point estimate and upper bound are `None` (unbounded).
/// With no usable exposure (T <= 0 or non-finite) nothing can be said:
/// `mtbf_hours = None`, `lower_hours = 0`, `upper_hours = None`. A confidence
/// >= 1 (or NaN) likewise yields the trivial interval [0, inf).
pub fn mtbf_with_ci(exposure_hours: f64, failures: u64, confidence: f64) -> MtbfEstimate {
    MtbfIntervals::new(confidence).estimate(exposure_hours, failures)
}

/// [`mtbf_with_ci`] for many estimates at one confidence: the chi-square quantiles depend only on
/// the failure count, so each count's pair is computed once (a fleet has thousands of groups and
/// a few hundred distinct counts; the quantiles were most of an MTBF answer's time).
pub struct MtbfIntervals {
    confidence: f64,
    /// failures -> (chi2((1+c)/2, 2r+2), chi2((1-c)/2, 2r)).
    quantiles: std::collections::HashMap<u64, (f64, f64)>,
}

impl MtbfIntervals {
    pub fn new(confidence: f64) -> Self {
        MtbfIntervals {
            confidence: clamp_confidence(confidence),
            quantiles: std::collections::HashMap::new(),
        }
    }

    pub fn estimate(&mut self, exposure_hours: f64, failures: u64) -> MtbfEstimate {
        let trivial = MtbfEstimate {
            mtbf_hours: None,
            lower_hours: 0.0,
            upper_hours: None,
        };
        if !(exposure_hours.is_finite() && exposure_hours > 0.0) {
            return trivial;
        }
        let t = exposure_hours;
        let mtbf_hours = (failures > 0).then(|| t / failures as f64);
        let c = self.confidence;
        if c >= 1.0 {
            return MtbfEstimate { mtbf_hours, ..trivial };
        }
        let (lower_q, upper_q) = *self
            .quantiles
            .entry(failures)
            .or_insert_with(|| memo_quantiles(c, failures));
        MtbfEstimate {
            mtbf_hours,
            lower_hours: 2.0 * t / lower_q,
            upper_hours: (failures > 0).then(|| 2.0 * t / upper_q).filter(|u| u.is_finite()),
        }
    }
}

/// Quantile pairs already computed, process-wide: every MTBF answer asks for the same few hundred
/// counts again, and each pair costs two root searches over the incomplete gamma function (a
/// tenth of an answer's CPU at 12,500 nodes when computed per request). Bounded: emptied when full.
type QuantileMemo = std::sync::Mutex<foldhash::HashMap<(u64, u64), (f64, f64)>>;
static QUANTILE_MEMO: std::sync::LazyLock<QuantileMemo> = std::sync::LazyLock::new(Default::default);
const QUANTILE_MEMO_ENTRIES: usize = 1 << 16;

/// (chi2((1+c)/2, 2r+2), chi2((1-c)/2, 2r)), NaN for the second when r = 0.
fn memo_quantiles(c: f64, failures: u64) -> (f64, f64) {
    let key = (c.to_bits(), failures);
    if let Some(q) = QUANTILE_MEMO.lock().ok().and_then(|m| m.get(&key).copied()) {
        return q;
    }
    let r = failures as f64;
    let upper = if failures > 0 {
        chi_square_quantile((1.0 - c) / 2.0, 2.0 * r)
    } else {
        f64::NAN
    };
    let q = (chi_square_quantile((1.0 + c) / 2.0, 2.0 * r + 2.0), upper);
    if let Ok(mut m) = QUANTILE_MEMO.lock() {
        if m.len() >= QUANTILE_MEMO_ENTRIES {
            m.clear();
        }
        m.insert(key, q);
    }
    q
}

/// Exact (Garwood) two-sided interval for a Poisson rate `count / exposure`:
/// (chi2((1-c)/2, 2k) / 2T, chi2((1+c)/2, 2k+2) / 2T), with lower = 0 for
/// k = 0. These are the reciprocals of the [`mtbf_with_ci`] bounds.
/// No usable exposure (<= 0 or non-finite) gives (0, inf).
pub fn poisson_rate_ci(count: u64, exposure: f64, confidence: f64) -> (f64, f64) {
    if !(exposure.is_finite() && exposure > 0.0) {
        return (0.0, f64::INFINITY);
    }
    let c = clamp_confidence(confidence);
    if c >= 1.0 {
        return (0.0, f64::INFINITY);
    }
    let (high_q, low_q) = memo_quantiles(c, count);
    let lower = if count == 0 { 0.0 } else { low_q / (2.0 * exposure) };
    (lower, high_q / (2.0 * exposure))
}

// ---------------------------------------------------------------------------
// Descriptive statistics
// ---------------------------------------------------------------------------

/// Percentile of ascending-sorted data, `p` as a fraction in [0, 1] (not
/// 0–100), linear interpolation between closest ranks (numpy's default).
/// `None` for empty input or `p` outside [0, 1] / NaN.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&p) {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * p;
    let i = h.floor() as usize;
    let frac = h - i as f64;
    let lo = sorted[i];
    if frac == 0.0 || i + 1 >= sorted.len() {
        return Some(lo);
    }
    let hi = sorted[i + 1];
    Some(lo + (hi - lo) * frac)
}

/// Median of ascending-sorted data; `None` when empty.
pub fn median(sorted: &[f64]) -> Option<f64> {
    percentile(sorted, 0.5)
}

/// Arithmetic mean; `None` when empty.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

// ---------------------------------------------------------------------------
// Hostname ordering and GPU-group packing
// ---------------------------------------------------------------------------

/// Natural ("human") order for hostnames: digit runs compare by numeric value
/// ("node2" < "node10"), everything else byte-wise.
///
/// Ties in value are broken afterwards by the first digit run whose length
/// differs, fewer leading zeros first ("gpu-a1" < "gpu-a01"), and finally
/// byte-wise, so the order is total and only equal strings compare equal.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    // First run-length difference seen, applied only if all values tie.
    let mut zero_tiebreak = Ordering::Equal;
    while i < ab.len() && j < bb.len() {
        if ab[i].is_ascii_digit() && bb[j].is_ascii_digit() {
            let si = i;
            while i < ab.len() && ab[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < bb.len() && bb[j].is_ascii_digit() {
                j += 1;
            }
            let (ra, rb) = (&ab[si..i], &bb[sj..j]);
            // Compare by value without parsing, so runs of any length work.
            let strip = |r: &[u8]| -> usize { r.iter().take_while(|&&c| c == b'0').count() };
            let (va, vb) = (&ra[strip(ra)..], &rb[strip(rb)..]);
            let ord = va.len().cmp(&vb.len()).then_with(|| va.cmp(vb));
            if ord != Ordering::Equal {
                return ord;
            }
            if zero_tiebreak == Ordering::Equal {
                zero_tiebreak = ra.len().cmp(&rb.len());
            }
        } else {
            let ord = ab[i].cmp(&bb[j]);
            if ord != Ordering::Equal {
                return ord;
            }
            i += 1;
            j += 1;
        }
    }
    // Shorter remainder first ("node" < "node1"), then leading-zero tiebreak.
    (ab.len() - i)
        .cmp(&(bb.len() - j))
        .then(zero_tiebreak)
        .then_with(|| ab.cmp(bb))
}

/// Assign consecutive nodes (already in hostname order) to groups of at most
/// `group_size` GPUs, greedily: a node joins the current group unless that
/// would exceed `group_size`, in which case a new group starts. A node larger
/// than `group_size` occupies a group on its own. Returns each node's group
/// index.
pub fn pack_into_groups(gpu_counts: &[u32], group_size: u32) -> Vec<usize> {
    let cap = u64::from(group_size);
    let mut group = 0usize;
    let mut used = 0u64;
    let mut out = Vec::with_capacity(gpu_counts.len());
    for &n in gpu_counts {
        let n = u64::from(n);
        // `used > 0` so an empty group always accepts the node (oversized or
        // not) and we never emit empty groups.
        if used > 0 && used + n > cap {
            group += 1;
            used = 0;
        }
        used += n;
        out.push(group);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_zero_becomes_zero_and_nothing_else_changes() {
        let empty: f64 = std::iter::empty::<f64>().sum();
        assert!(empty.is_sign_negative(), "the case this guards against");
        assert!(positive_zero(empty).is_sign_positive());
        assert_eq!(serde_json::to_string(&positive_zero(-0.0)).unwrap(), "0.0");
        assert_eq!(positive_zero(-1.5), -1.5);
        assert_eq!(positive_zero(2.0), 2.0);
        assert!(positive_zero(f64::NAN).is_nan());
        assert_eq!(
            serde_json::to_string(&crate::analytics::headline::round6(-0.0000001)).unwrap(),
            "0.0"
        );
    }

    fn assert_rel(got: f64, want: f64, tol: f64) {
        let err = if want == 0.0 {
            got.abs()
        } else {
            ((got - want) / want).abs()
        };
        assert!(err <= tol, "got {got:e}, want {want:e}, rel err {err:e}");
    }

    #[test]
    fn ln_gamma_matches_scipy() {
        // scipy.special.gammaln
        let cases = [
            (0.5, 0.5723649429247),
            (1.0, 0.0),
            (1.5, -0.12078223763524526),
            (2.5, 0.2846828704729192),
            (10.0, 12.801827480081469),
            (100.5, 361.43554046777757),
            (1000.0, 5905.220423209181),
        ];
        for (x, want) in cases {
            let got = ln_gamma(x);
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "x={x}: {got} vs {want}"
            );
        }
        assert!(ln_gamma(0.0).is_nan());
        assert!(ln_gamma(-1.0).is_nan());
    }

    #[test]
    fn incomplete_gamma_matches_scipy() {
        // scipy.special.gammainc / gammaincc
        let cases = [
            (0.5, 0.1, 0.34527915398142317, 0.6547208460185768),
            (1.0, 1.0, 0.6321205588285577, 0.36787944117144245),
            (3.0, 2.5, 0.45618688411667035, 0.5438131158833297),
            (10.0, 20.0, 0.9950045876916924, 0.0049954123083075785),
            (50.0, 40.0, 0.07033506665939494, 0.9296649333406051),
            (1000.0, 1020.0, 0.7385271844801109, 0.26147281551988905),
        ];
        for (a, x, p, q) in cases {
            assert_rel(gamma_p(a, x), p, 1e-11);
            assert_rel(gamma_q(a, x), q, 1e-11);
        }
        // Far tail keeps relative precision in Q.
        assert_rel(gamma_q(0.5, 30.0), 9.485737571073857e-15, 1e-9);
        assert_eq!(gamma_p(2.0, 0.0), 0.0);
        assert_eq!(gamma_q(2.0, 0.0), 1.0);
        assert!(gamma_p(0.0, 1.0).is_nan());
        assert!(gamma_p(1.0, -1.0).is_nan());
    }

    #[test]
    fn chi_square_cdf_basic() {
        // dof 2 is exponential with mean 2: F(x) = 1 - exp(-x/2).
        for x in [0.1, 1.0, 2.0, 7.5, 30.0] {
            assert_rel(chi_square_cdf(x, 2.0), 1.0 - (-x / 2.0_f64).exp(), 1e-13);
        }
        assert_eq!(chi_square_cdf(0.0, 3.0), 0.0);
        assert_eq!(chi_square_cdf(-1.0, 3.0), 0.0);
    }

    #[test]
    fn chi_square_quantile_matches_scipy() {
        // scipy.stats.chi2.ppf(p, dof)
        let cases: &[(f64, f64, f64)] = &[
            (2.0, 0.025, 0.05063561596857975),
            (2.0, 0.5, 1.386294361119891),
            (2.0, 0.975, 7.377758908227871),
            (4.0, 0.025, 0.4844185570879299),
            (4.0, 0.5, 3.3566939800333224),
            (4.0, 0.975, 11.143286781877796),
            (6.0, 0.025, 1.2373442457912027),
            (6.0, 0.5, 5.348120627447118),
            (6.0, 0.975, 14.44937533544792),
            (10.0, 0.025, 3.2469727802368413),
            (10.0, 0.5, 9.34181776559197),
            (10.0, 0.975, 20.483177350807388),
            (12.0, 0.025, 4.4037885069817015),
            (12.0, 0.5, 11.34032237742414),
            (12.0, 0.975, 23.33666415864534),
            (20.0, 0.025, 9.590777392264867),
            (20.0, 0.5, 19.337429229428256),
            (20.0, 0.975, 34.16960690283833),
            (200.0, 0.025, 162.72798250184627),
            (200.0, 0.5, 199.33372983863097),
            (200.0, 0.975, 241.05789550631093),
            (2000.0, 0.025, 1877.9460368153905),
            (2000.0, 0.5, 1999.3333728539303),
            (2000.0, 0.975, 2125.8423024497756),
        ];
        for &(dof, p, want) in cases {
            let got = chi_square_quantile(p, dof);
            assert!(
                ((got - want) / want).abs() <= 1e-9,
                "dof={dof} p={p}: got {got}, want {want}"
            );
        }
    }

    #[test]
    fn chi_square_quantile_tails_and_odd_dof() {
        // scipy.stats.chi2.ppf
        let cases: &[(f64, f64, f64)] = &[
            (1.0, 0.025, 0.0009820691171752555),
            (1.0, 0.5, 0.454936423119572),
            (1.0, 0.975, 5.023886187314888),
            (1.0, 1e-6, 1.5707963267957187e-12),
            (1.0, 0.999999, 23.92812697687947),
            (0.5, 0.025, 5.273202591259991e-07),
            (0.5, 0.5, 0.0873476047057468),
            (0.5, 0.975, 3.433235299960771),
            (3.0, 0.025, 0.21579528262389785),
            (3.0, 0.5, 2.3659738843753377),
            (3.0, 0.975, 9.348403604496148),
            (7.5, 0.025, 1.9305886206109992),
            (7.5, 0.5, 6.844905469601071),
            (7.5, 0.975, 16.77828611380784),
            (2.0, 1e-6, 2.0000010000006676e-06),
            (2.0, 0.999999, 27.631021115871036),
            (10.0, 1e-6, 0.3381260032429545),
            (10.0, 0.999999, 46.86304684671568),
            (200.0, 1e-6, 118.87264139624578),
            (200.0, 0.999999, 309.83809198992293),
            (2000.0, 1e-6, 1713.6293025587838),
            (2000.0, 0.999999, 2315.155822017448),
            (2.0, 1e-12, 2.000000000001e-12),
            (2.0, 1.0 - 1e-12, 55.26208647578672),
        ];
        for &(dof, p, want) in cases {
            let got = chi_square_quantile(p, dof);
            assert!(
                ((got - want) / want).abs() <= 1e-9,
                "dof={dof} p={p}: got {got}, want {want}"
            );
        }
    }

    #[test]
    fn chi_square_quantile_round_trips_and_edges() {
        for dof in [0.3, 1.0, 2.0, 5.0, 17.0, 64.0, 999.0, 20000.0] {
            for p in [1e-9, 0.001, 0.1, 0.3, 0.5, 0.7, 0.9, 0.999] {
                let x = chi_square_quantile(p, dof);
                assert_rel(chi_square_cdf(x, dof), p, 1e-9);
            }
        }
        // Exact closed form for dof 2: x = -2 ln(1 - p).
        assert_rel(chi_square_quantile(0.95, 2.0), -2.0 * 0.05_f64.ln(), 1e-12);
        assert_eq!(chi_square_quantile(0.0, 4.0), 0.0);
        assert_eq!(chi_square_quantile(1.0, 4.0), f64::INFINITY);
        assert!(chi_square_quantile(-0.1, 4.0).is_nan());
        assert!(chi_square_quantile(1.1, 4.0).is_nan());
        assert!(chi_square_quantile(f64::NAN, 4.0).is_nan());
        assert!(chi_square_quantile(0.5, 0.0).is_nan());
        assert!(chi_square_quantile(0.5, -2.0).is_nan());
        // Monotone in p.
        let mut prev = 0.0;
        for i in 1..100 {
            let x = chi_square_quantile(i as f64 / 100.0, 7.0);
            assert!(x > prev);
            prev = x;
        }
    }

    #[test]
    fn mtbf_five_failures_in_1000h() {
        // lower = 2000 / chi2.ppf(0.975, 12) = 2000 / 23.33666415864534
        // upper = 2000 / chi2.ppf(0.025, 10) = 2000 / 3.2469727802368413
        let e = mtbf_with_ci(1000.0, 5, 0.95);
        assert_eq!(e.mtbf_hours, Some(200.0));
        assert_rel(e.lower_hours, 85.7020517758566, 1e-9);
        assert_rel(e.upper_hours.unwrap(), 615.9583511673649, 1e-9);
        assert!(e.lower_hours < 200.0 && 200.0 < e.upper_hours.unwrap());
    }

    #[test]
    fn mtbf_zero_failures() {
        // lower = 336 / chi2.ppf(0.975, 2) = 336 / 7.377758908227871
        let e = mtbf_with_ci(168.0, 0, 0.95);
        assert_eq!(e.mtbf_hours, None);
        assert_eq!(e.upper_hours, None);
        assert_rel(e.lower_hours, 45.54228515454523, 1e-9);
        // dof 2 closed form: chi2.ppf(q, 2) = -2 ln(1 - q).
        assert_rel(e.lower_hours, 168.0 / -(0.025_f64.ln()), 1e-12);
    }

    #[test]
    fn mtbf_other_cases() {
        // scipy: 2T/chi2.ppf((1+c)/2, 2r+2), 2T/chi2.ppf((1-c)/2, 2r)
        let e = mtbf_with_ci(5000.0, 1, 0.9);
        assert_eq!(e.mtbf_hours, Some(5000.0));
        assert_rel(e.lower_hours, 1053.9930009839995, 1e-9);
        assert_rel(e.upper_hours.unwrap(), 97478.62873111846, 1e-9);

        let e = mtbf_with_ci(24.0, 100, 0.99);
        assert_eq!(e.mtbf_hours, Some(0.24));
        assert_rel(e.lower_hours, 0.18639245006207497, 1e-9);
        assert_rel(e.upper_hours.unwrap(), 0.31528959098326387, 1e-9);

        // Interval widens with confidence.
        let a = mtbf_with_ci(1000.0, 5, 0.8);
        let b = mtbf_with_ci(1000.0, 5, 0.99);
        assert!(b.lower_hours < a.lower_hours);
        assert!(b.upper_hours.unwrap() > a.upper_hours.unwrap());
    }

    #[test]
    fn mtbf_degenerate_inputs() {
        let trivial = MtbfEstimate {
            mtbf_hours: None,
            lower_hours: 0.0,
            upper_hours: None,
        };
        assert_eq!(mtbf_with_ci(0.0, 0, 0.95), trivial);
        assert_eq!(mtbf_with_ci(0.0, 3, 0.95), trivial);
        assert_eq!(mtbf_with_ci(-5.0, 3, 0.95), trivial);
        assert_eq!(mtbf_with_ci(f64::NAN, 3, 0.95), trivial);
        assert_eq!(mtbf_with_ci(f64::INFINITY, 3, 0.95), trivial);
        // Confidence 1 (or NaN): point estimate kept, interval [0, inf).
        let e = mtbf_with_ci(100.0, 4, 1.0);
        assert_eq!(e.mtbf_hours, Some(25.0));
        assert_eq!(e.lower_hours, 0.0);
        assert_eq!(e.upper_hours, None);
        assert_eq!(mtbf_with_ci(100.0, 4, f64::NAN).upper_hours, None);
    }

    #[test]
    fn poisson_rate_ci_matches_scipy_and_mtbf() {
        // scipy: chi2.ppf(a/2, 2k)/2T, chi2.ppf(1-a/2, 2k+2)/2T
        let (lo, hi) = poisson_rate_ci(5, 1000.0, 0.95);
        assert_rel(lo, 0.001623486390118421, 1e-9);
        assert_rel(hi, 0.01166833207932267, 1e-9);
        let (lo, hi) = poisson_rate_ci(0, 168.0, 0.95);
        assert_eq!(lo, 0.0);
        assert_rel(hi, 0.021957615798297234, 1e-9);
        let (lo, hi) = poisson_rate_ci(10, 1.0, 0.9);
        assert_rel(lo, 5.425405697091292, 1e-9);
        assert_rel(hi, 16.962219235721903, 1e-9);

        // Rate bounds are reciprocals of the MTBF bounds.
        for (t, r, c) in [(1000.0, 5, 0.95), (168.0, 0, 0.95), (7.5, 42, 0.8)] {
            let (lo, hi) = poisson_rate_ci(r, t, c);
            let m = mtbf_with_ci(t, r, c);
            assert_rel(hi, 1.0 / m.lower_hours, 1e-12);
            match m.upper_hours {
                Some(u) => assert_rel(lo, 1.0 / u, 1e-12),
                None => assert_eq!(lo, 0.0),
            }
        }
        assert_eq!(poisson_rate_ci(3, 0.0, 0.95), (0.0, f64::INFINITY));
        assert_eq!(poisson_rate_ci(3, 10.0, 1.0), (0.0, f64::INFINITY));
    }

    #[test]
    fn percentile_matches_numpy_linear() {
        // numpy.percentile([1, 2, 3, 4, 10], 100 * p)
        let v = [1.0, 2.0, 3.0, 4.0, 10.0];
        let cases = [
            (0.0, 1.0),
            (0.1, 1.4),
            (0.25, 2.0),
            (0.5, 3.0),
            (0.9, 7.6000000000000005),
            (0.99, 9.76),
            (1.0, 10.0),
        ];
        for (p, want) in cases {
            let got = percentile(&v, p).unwrap();
            assert!((got - want).abs() < 1e-12, "p={p}: {got} vs {want}");
        }
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&v, -0.01), None);
        assert_eq!(percentile(&v, 1.01), None);
        assert_eq!(percentile(&v, f64::NAN), None);
        assert_eq!(percentile(&[7.0], 0.0), Some(7.0));
        assert_eq!(percentile(&[7.0], 0.73), Some(7.0));
        assert_eq!(percentile(&[7.0], 1.0), Some(7.0));
        assert_eq!(percentile(&[2.0, 4.0], 0.25), Some(2.5));
    }

    #[test]
    fn median_and_mean() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[1.0, 3.0]), Some(2.0));
        assert_eq!(median(&[1.0, 2.0, 100.0]), Some(2.0));
        assert_eq!(median(&[1.0, 2.0, 3.0, 100.0]), Some(2.5));
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[4.0]), Some(4.0));
        assert_eq!(mean(&[1.0, 2.0, 3.0, 10.0]), Some(4.0));
        assert_eq!(mean(&[-1.0, 1.0]), Some(0.0));
    }

    #[test]
    fn natural_cmp_numeric_runs() {
        use Ordering::*;
        assert_eq!(natural_cmp("node2", "node10"), Less);
        assert_eq!(natural_cmp("node10", "node2"), Greater);
        assert_eq!(natural_cmp("node10", "node10"), Equal);
        assert_eq!(natural_cmp("node9", "node10"), Less);
        assert_eq!(natural_cmp("rack2-node10", "rack10-node1"), Less);
        assert_eq!(natural_cmp("rack1-node10", "rack1-node9"), Greater);
        assert_eq!(natural_cmp("gpu-a2", "gpu-b1"), Less);
        assert_eq!(natural_cmp("node", "node1"), Less);
        assert_eq!(natural_cmp("", "a"), Less);
        assert_eq!(natural_cmp("", ""), Equal);
        // Digit runs longer than u64 still compare numerically.
        assert_eq!(
            natural_cmp("n99999999999999999999999", "n100000000000000000000000"),
            Less
        );
    }

    #[test]
    fn natural_cmp_leading_zeros_are_a_late_tiebreak() {
        use Ordering::*;
        // Same value: fewer leading zeros first.
        assert_eq!(natural_cmp("gpu-a1", "gpu-a01"), Less);
        assert_eq!(natural_cmp("gpu-a01", "gpu-a1"), Greater);
        assert_eq!(natural_cmp("node007", "node07"), Greater);
        // Values decide before any leading-zero difference.
        assert_eq!(natural_cmp("a01b1", "a1b2"), Less);
        assert_eq!(natural_cmp("a01b2", "a1b1"), Greater);
        assert_eq!(natural_cmp("node01", "node2"), Less);
        assert_eq!(natural_cmp("node0", "node00"), Less);
    }

    #[test]
    fn natural_cmp_is_a_total_order_on_a_sample() {
        let names = [
            "", "a", "a0", "a00", "a1", "a01", "a001", "a2", "a10", "a-1", "a_1", "a.1", "a1b", "a1-2", "a01b1",
            "a1b01", "node1", "node01", "node2", "node10", "node-10", "Node1", "gpu-a01", "gpu-a1", "gpu-a10", "x9y",
            "x10y", "9", "10", "010", "-",
        ];
        for a in names {
            assert_eq!(natural_cmp(a, a), Ordering::Equal);
            for b in names {
                let ab = natural_cmp(a, b);
                assert_eq!(ab, natural_cmp(b, a).reverse(), "{a:?} {b:?}");
                if a != b {
                    assert_ne!(ab, Ordering::Equal, "{a:?} {b:?}");
                }
                for c in names {
                    if ab == Ordering::Less && natural_cmp(b, c) == Ordering::Less {
                        assert_eq!(natural_cmp(a, c), Ordering::Less, "{a:?} {b:?} {c:?}");
                    }
                }
            }
        }
        let mut v = vec!["node10", "node2", "node1", "node01", "node20", "node3"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["node1", "node01", "node2", "node3", "node10", "node20"]);
    }

    #[test]
    fn pack_into_groups_greedy() {
        assert_eq!(pack_into_groups(&[8; 16], 128), vec![0; 16]);
        let mut want = vec![0; 16];
        want.push(1);
        assert_eq!(pack_into_groups(&[8; 17], 128), want);
        assert_eq!(pack_into_groups(&[8, 8, 4, 8], 16), vec![0, 0, 1, 1]);
        assert_eq!(pack_into_groups(&[8; 40], 128).last(), Some(&2));
        assert_eq!(pack_into_groups(&[], 128), Vec::<usize>::new());
        // Exactly full groups.
        assert_eq!(pack_into_groups(&[4, 4, 4, 4], 8), vec![0, 0, 1, 1]);
        // Greedy, no look-ahead or back-filling.
        assert_eq!(pack_into_groups(&[6, 4, 2, 8], 8), vec![0, 1, 1, 2]);
    }

    #[test]
    fn pack_into_groups_oversized_and_zero() {
        // Oversized nodes sit alone.
        assert_eq!(pack_into_groups(&[200], 128), vec![0]);
        assert_eq!(pack_into_groups(&[8, 200, 8], 128), vec![0, 1, 2]);
        assert_eq!(pack_into_groups(&[200, 300], 128), vec![0, 1]);
        // Zero-GPU nodes never force a new group.
        assert_eq!(pack_into_groups(&[0, 0, 8, 0, 8], 8), vec![0, 0, 0, 0, 1]);
        // group_size 0: every GPU-bearing node gets its own group.
        assert_eq!(pack_into_groups(&[1, 1, 1], 0), vec![0, 1, 2]);
        // No overflow near u32::MAX.
        assert_eq!(pack_into_groups(&[u32::MAX, u32::MAX], u32::MAX), vec![0, 1]);
    }

    #[test]
    fn mtbf_intervals_reuse_quantiles_across_exposures() {
        // One instance, counts repeated with different exposures: each answer is the Garwood
        // interval of its own (T, r), e.g. r = 5, T = 1000 h at 95%: 2T / chi2(0.975; 12) and
        // 2T / chi2(0.025; 10) (chi2 = 23.3367, 3.24697).
        let mut iv = MtbfIntervals::new(0.95);
        let a = iv.estimate(1000.0, 5);
        let b = iv.estimate(500.0, 5);
        assert!((a.lower_hours - 2000.0 / 23.336_664).abs() < 1e-3, "{a:?}");
        assert!((a.upper_hours.unwrap() - 2000.0 / 3.246_973).abs() < 1e-2, "{a:?}");
        assert!((b.lower_hours - a.lower_hours / 2.0).abs() < 1e-9);
        assert!((b.upper_hours.unwrap() - a.upper_hours.unwrap() / 2.0).abs() < 1e-9);
        assert_eq!(b.mtbf_hours, Some(100.0));
        for (t, r) in [(1000.0, 5), (24.0, 100), (168.0, 0), (24.0, 100), (0.0, 3)] {
            assert_eq!(iv.estimate(t, r), mtbf_with_ci(t, r, 0.95), "T = {t}, r = {r}");
        }
        assert_eq!(iv.quantiles.len(), 3, "one pair per distinct count");
    }
}
