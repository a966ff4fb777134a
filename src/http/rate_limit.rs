//! Per-token rate limit: an in-process token bucket per token id. Each instance counts only the
//! requests it serves (N instances behind a balancer allow up to N times the rate).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use uuid::Uuid;

/// `FAULTLINE_RATE_LIMIT_PER_TOKEN_RPS` / `_BURST`. Defaults: 100 requests/s sustained, bursts of
/// 200: far above what an agent or a dashboard sends, low enough that one runaway script cannot
/// take the pool from every other team.
#[derive(clap::Args, Clone, Debug)]
pub struct RateLimitSettings {
    /// Sustained requests per second allowed per token (0 turns the limit off).
    #[arg(long, env = "FAULTLINE_RATE_LIMIT_PER_TOKEN_RPS", default_value_t = DEFAULT_RPS)]
    pub rate_limit_per_token_rps: f64,
    /// Requests a token may send at once before the sustained rate applies (at least 1).
    #[arg(long, env = "FAULTLINE_RATE_LIMIT_PER_TOKEN_BURST", default_value_t = DEFAULT_BURST)]
    pub rate_limit_per_token_burst: u32,
}

pub const DEFAULT_RPS: f64 = 100.0;
pub const DEFAULT_BURST: u32 = 200;

/// Buckets kept at most. Only authenticated token ids get one, so this is only reached with
/// that many tokens active within one refill time; then idle (full) buckets are dropped first.
pub const MAX_TRACKED_TOKENS: usize = 10_000;

impl Default for RateLimitSettings {
    fn default() -> Self {
        RateLimitSettings {
            rate_limit_per_token_rps: DEFAULT_RPS,
            rate_limit_per_token_burst: DEFAULT_BURST,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl Bucket {
    fn refilled(self, now: Instant, rps: f64, burst: f64) -> Bucket {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        Bucket {
            tokens: (self.tokens + elapsed * rps).min(burst),
            updated: now,
        }
    }
}

pub struct RateLimiter {
    rps: f64,
    burst: f64,
    buckets: Mutex<HashMap<Uuid, Bucket>>,
}

impl RateLimiter {
    pub fn new(settings: &RateLimitSettings) -> Self {
        RateLimiter {
            rps: settings.rate_limit_per_token_rps.max(0.0),
            burst: f64::from(settings.rate_limit_per_token_burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request from `key`'s bucket; Err(seconds to wait, at least 1) when it is empty.
    pub fn check(&self, key: Uuid) -> Result<(), u32> {
        self.check_at(key, Instant::now())
    }

    pub fn check_at(&self, key: Uuid, now: Instant) -> Result<(), u32> {
        if self.rps <= 0.0 || !self.rps.is_finite() {
            return Ok(());
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if !buckets.contains_key(&key) && buckets.len() >= MAX_TRACKED_TOKENS {
            self.evict(&mut buckets, now);
        }
        let fresh = Bucket {
            tokens: self.burst,
            updated: now,
        };
        let bucket = buckets.entry(key).or_insert(fresh);
        *bucket = bucket.refilled(now, self.rps, self.burst);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - bucket.tokens) / self.rps;
            Err(wait.ceil().clamp(1.0, f64::from(u32::MAX)) as u32)
        }
    }

    /// Drops the buckets that have refilled (the same as absent); if none has, the stalest one.
    fn evict(&self, buckets: &mut HashMap<Uuid, Bucket>, now: Instant) {
        let full_after = Duration::from_secs_f64((self.burst / self.rps).min(86_400.0));
        buckets.retain(|_, b| now.saturating_duration_since(b.updated) < full_after);
        if buckets.len() >= MAX_TRACKED_TOKENS
            && let Some(stalest) = buckets.iter().min_by_key(|(_, b)| b.updated).map(|(k, _)| *k)
        {
            buckets.remove(&stalest);
        }
    }

    pub fn tracked(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(rps: f64, burst: u32) -> RateLimiter {
        RateLimiter::new(&RateLimitSettings {
            rate_limit_per_token_rps: rps,
            rate_limit_per_token_burst: burst,
        })
    }

    #[test]
    fn a_burst_then_the_sustained_rate() {
        let l = limiter(2.0, 3);
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.check_at(a, t0), Ok(()));
        }
        // Empty: one token takes 1/2 s at 2 rps, so Retry-After rounds up to 1 s.
        assert_eq!(l.check_at(a, t0), Err(1));
        // Another token has its own bucket.
        assert_eq!(l.check_at(b, t0), Ok(()));
        // Half a second later one token has come back, and only one.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(l.check_at(a, t1), Ok(()));
        assert_eq!(l.check_at(a, t1), Err(1));
        // Refills stop at the burst.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(l.check_at(a, t2), Ok(()));
        }
        assert!(l.check_at(a, t2).is_err());
    }

    #[test]
    fn retry_after_is_the_whole_seconds_until_the_next_token() {
        let l = limiter(0.25, 1);
        let key = Uuid::from_u128(7);
        let t0 = Instant::now();
        assert_eq!(l.check_at(key, t0), Ok(()));
        assert_eq!(l.check_at(key, t0), Err(4));
        assert_eq!(l.check_at(key, t0 + Duration::from_millis(1500)), Err(3));
    }

    #[test]
    fn zero_rate_is_off_and_memory_is_bounded() {
        let off = limiter(0.0, 1);
        for _ in 0..1000 {
            assert_eq!(off.check(Uuid::nil()), Ok(()));
        }
        assert_eq!(off.tracked(), 0);
        let l = limiter(1.0, 5);
        let t0 = Instant::now();
        for i in 0..(MAX_TRACKED_TOKENS as u128 + 10) {
            l.check_at(Uuid::from_u128(i), t0).unwrap();
        }
        assert_eq!(l.tracked(), MAX_TRACKED_TOKENS);
        // Once the buckets have refilled, they are dropped together.
        l.check_at(Uuid::from_u128(u128::MAX), t0 + Duration::from_secs(6))
            .unwrap();
        assert_eq!(l.tracked(), 1);
    }
}
