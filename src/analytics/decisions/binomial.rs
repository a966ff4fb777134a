//! Regularized incomplete beta, its inverse, binomial tails and the Clopper-Pearson interval: what
//! the exact comparison of two Poisson rates (conditional on their total) is built on.

use crate::analytics::stats::ln_gamma;

const BETA_MAX_ITER: usize = 10_000;
const BETA_EPS: f64 = 1e-15;

/// Continued fraction for I_x(a, b) (modified Lentz, Numerical Recipes `betacf`).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const FPMIN: f64 = f64::MIN_POSITIVE / f64::EPSILON;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < FPMIN {
        d = FPMIN;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..BETA_MAX_ITER {
        let m = m as f64;
        let m2 = 2.0 * m;
        for aa in [
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ] {
            d = 1.0 + aa * d;
            if d.abs() < FPMIN {
                d = FPMIN;
            }
            c = 1.0 + aa / c;
            if c.abs() < FPMIN {
                c = FPMIN;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        // The last factor of the pair decides convergence.
        if (d * c - 1.0).abs() < BETA_EPS {
            break;
        }
    }
    h
}

/// Regularized incomplete beta I_x(a, b) for a, b > 0 and x in [0, 1]; NaN outside.
pub fn beta_inc(a: f64, b: f64, x: f64) -> f64 {
    if a.is_nan() || b.is_nan() || x.is_nan() || a <= 0.0 || b <= 0.0 || !(0.0..=1.0).contains(&x) {
        return f64::NAN;
    }
    if x == 0.0 || x == 1.0 {
        return x;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// The x with I_x(a, b) = p (bisection: I is increasing in x), p in [0, 1].
pub fn beta_inc_inv(a: f64, b: f64, p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) || a <= 0.0 || b <= 0.0 {
        return f64::NAN;
    }
    if p == 0.0 || p == 1.0 {
        return p;
    }
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    for _ in 0..2000 {
        let mid = 0.5 * (lo + hi);
        if beta_inc(a, b, mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-15 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// P(X >= k) for X ~ Binomial(n, p) = I_p(k, n - k + 1).
pub fn binomial_sf(k: u64, n: u64, p: f64) -> f64 {
    if k == 0 {
        1.0
    } else if k > n {
        0.0
    } else {
        beta_inc(k as f64, (n - k + 1) as f64, p)
    }
}

/// P(X <= k) for X ~ Binomial(n, p) = I_(1-p)(n - k, k + 1).
pub fn binomial_cdf(k: u64, n: u64, p: f64) -> f64 {
    if k >= n {
        1.0
    } else {
        beta_inc((n - k) as f64, (k + 1) as f64, 1.0 - p)
    }
}

/// Clopper-Pearson two-sided interval for a binomial proportion k / n: lower = Beta((1-c)/2; k, n-k+1)
/// (0 for k = 0), upper = Beta((1+c)/2; k+1, n-k) (1 for k = n). n = 0 gives (0, 1).
pub fn clopper_pearson(k: u64, n: u64, confidence: f64) -> (f64, f64) {
    if n == 0 || k > n {
        return (0.0, 1.0);
    }
    let alpha = 1.0 - confidence;
    let lower = if k == 0 {
        0.0
    } else {
        beta_inc_inv(k as f64, (n - k + 1) as f64, alpha / 2.0)
    };
    let upper = if k == n {
        1.0
    } else {
        beta_inc_inv((k + 1) as f64, (n - k) as f64, 1.0 - alpha / 2.0)
    };
    (lower, upper)
}

/// Exact two-sided binomial p-value by doubling the smaller tail, capped at 1. This is the test
/// whose acceptance region is the Clopper-Pearson interval: p < 1 - c exactly when the interval
/// excludes `p0`.
pub fn binomial_two_sided_p(k: u64, n: u64, p0: f64) -> f64 {
    if n == 0 {
        return 1.0;
    }
    let tail = binomial_cdf(k, n, p0).min(binomial_sf(k, n, p0));
    (2.0 * tail).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, tol: f64) {
        assert!(
            (got - want).abs() <= tol * want.abs().max(1e-300),
            "got {got}, want {want}"
        );
    }

    #[test]
    fn incomplete_beta_closed_forms() {
        // I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b.
        close(beta_inc(1.0, 1.0, 0.3), 0.3, 1e-13);
        close(beta_inc(4.0, 1.0, 0.6), 0.6_f64.powi(4), 1e-13);
        close(beta_inc(1.0, 5.0, 0.2), 1.0 - 0.8_f64.powi(5), 1e-13);
        // I_x(2, 2) = 3x^2 - 2x^3: at 0.25, 0.1875 - 0.03125 = 0.15625.
        close(beta_inc(2.0, 2.0, 0.25), 0.15625, 1e-13);
        // Symmetry I_x(a, b) = 1 - I_(1-x)(b, a).
        close(beta_inc(3.5, 7.0, 0.4), 1.0 - beta_inc(7.0, 3.5, 0.6), 1e-13);
        assert_eq!(beta_inc(2.0, 3.0, 0.0), 0.0);
        assert_eq!(beta_inc(2.0, 3.0, 1.0), 1.0);
        assert!(beta_inc(0.0, 3.0, 0.5).is_nan());
        assert!(beta_inc(2.0, 3.0, 1.5).is_nan());
    }

    #[test]
    fn binomial_tails_by_hand() {
        // n = 12, p = 1/2: P(X <= 2) = (1 + 12 + 66) / 4096 = 79 / 4096.
        close(binomial_cdf(2, 12, 0.5), 79.0 / 4096.0, 1e-12);
        close(binomial_sf(10, 12, 0.5), 79.0 / 4096.0, 1e-12);
        // n = 5, p = 0.3: P(X >= 4) = 5 x 0.3^4 x 0.7 + 0.3^5 = 0.02835 + 0.00243 = 0.03078.
        close(binomial_sf(4, 5, 0.3), 0.03078, 1e-12);
        assert_eq!(binomial_sf(0, 5, 0.3), 1.0);
        assert_eq!(binomial_sf(6, 5, 0.3), 0.0);
        assert_eq!(binomial_cdf(5, 5, 0.3), 1.0);
        // Large n stays a probability and the tails add up: P(X <= k) + P(X >= k + 1) = 1.
        let (k, n, p) = (480, 1000, 0.5);
        close(binomial_cdf(k, n, p) + binomial_sf(k + 1, n, p), 1.0, 1e-12);
    }

    #[test]
    fn clopper_pearson_closed_forms() {
        // k = 0, n = 5: upper solves (1 - u)^5 = 0.025, u = 1 - 0.025^(1/5) = 0.521824
        let (lo, hi) = clopper_pearson(0, 5, 0.95);
        assert_eq!(lo, 0.0);
        close(hi, 1.0 - 0.025_f64.powf(0.2), 1e-12);
        // k = n = 4: lower solves l^4 = 0.025, l = 0.025^(1/4) = 0.397635...
        let (lo, hi) = clopper_pearson(4, 4, 0.95);
        close(lo, 0.025_f64.powf(0.25), 1e-12);
        assert_eq!(hi, 1.0);
        // k = 1, n = 1: lower solves l = 0.025, upper is 1; k = 0, n = 1: (0, 0.975).
        let (lo, hi) = clopper_pearson(1, 1, 0.95);
        close(lo, 0.025, 1e-12);
        assert_eq!(hi, 1.0);
        let (lo, hi) = clopper_pearson(0, 1, 0.95);
        assert_eq!(lo, 0.0);
        close(hi, 0.975, 1e-12);
        // The bounds are where the tails equal 2.5%: P(X >= 2 | 12, lo) = P(X <= 2 | 12, hi) = 0.025.
        let (lo, hi) = clopper_pearson(2, 12, 0.95);
        close(binomial_sf(2, 12, lo), 0.025, 1e-10);
        close(binomial_cdf(2, 12, hi), 0.025, 1e-10);
        assert_eq!(clopper_pearson(0, 0, 0.95), (0.0, 1.0));
    }

    #[test]
    fn two_sided_p_doubles_the_smaller_tail() {
        // 79 / 4096 x 2 = 0.0385742...
        close(binomial_two_sided_p(2, 12, 0.5), 79.0 / 2048.0, 1e-12);
        // n = 5, k = 0, p0 = 1/2: 2 x 1/32 = 0.0625.
        close(binomial_two_sided_p(0, 5, 0.5), 0.0625, 1e-12);
        // The middle of a symmetric distribution: both tails > 1/2, capped at 1.
        assert_eq!(binomial_two_sided_p(6, 12, 0.5), 1.0);
        assert_eq!(binomial_two_sided_p(0, 0, 0.5), 1.0);
    }
}
