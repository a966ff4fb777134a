//! The parser benchmark behind `faultline bench-parse`: single-threaded, so lines/s is per core.

use std::time::Instant;

use serde::Serialize;

use super::{LineContext, bench_lines, parse_line};

#[derive(Debug, Clone, Serialize)]
pub struct ParseBenchReport {
    pub lines: usize,
    /// Lines that became signals (1 % of `bench_lines`).
    pub signals: usize,
    /// Timed passes over the same lines; the figures are of the fastest (least disturbed) one.
    pub passes: usize,
    pub best_seconds: f64,
    pub lines_per_second: f64,
    pub bytes_per_second: f64,
}

/// Parses `bench_lines(lines)` (99 % noise, 1 % signals in every supported format) several
/// times on the calling thread and reports the fastest pass.
pub fn bench_parse(lines: usize) -> ParseBenchReport {
    let input = bench_lines(lines);
    let bytes: usize = input.iter().map(|l| l.len() + 1).sum();
    let ctx = LineContext { year: 2021 };
    let passes = 5;
    let mut best = f64::INFINITY;
    let mut signals = 0;
    for _ in 0..passes {
        let start = Instant::now();
        let mut hits = 0;
        for l in &input {
            if std::hint::black_box(parse_line(std::hint::black_box(l), &ctx)).is_some() {
                hits += 1;
            }
        }
        best = best.min(start.elapsed().as_secs_f64());
        signals = hits;
    }
    let best = best.max(1e-9);
    ParseBenchReport {
        lines,
        signals,
        passes,
        best_seconds: best,
        lines_per_second: lines as f64 / best,
        bytes_per_second: bytes as f64 / best,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_benchmark_counts_the_signals() {
        let r = super::bench_parse(1_000);
        // one signal line every 100 lines
        assert_eq!((r.lines, r.signals), (1_000, 10));
        assert!(r.lines_per_second > 0.0);
    }
}
