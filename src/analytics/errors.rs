//! Top errors: failures by root signal and by all signals (kind and code). Pure: storage hands in rows; unit-tested in `analytics::cost`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::headline::{ratio, round6};

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct ErrorRow {
    pub kind: String,
    pub code: Option<i64>,
    /// `kind` or `kind code`, e.g. `xid 79`.
    pub label: String,
    /// Failures (root view: whose root signal is this; all-signal view: with at least one such signal).
    pub failures: u64,
    /// failures / all failures in the window.
    pub share: f64,
    /// Signals of this kind and code (all-signal view; equals failures in the root view).
    pub signals: u64,
    /// signals / all signals of the window's failures.
    pub signal_share: f64,
    pub severity: String,
}

/// (kind, code, failures, signals, severity) rows into shares, most frequent first, at most `limit`.
pub fn top_errors(
    rows: Vec<(String, Option<i64>, u64, u64, String)>,
    total_failures: u64,
    total_signals: u64,
    limit: usize,
) -> Vec<ErrorRow> {
    let mut out: Vec<ErrorRow> = rows
        .into_iter()
        .map(|(kind, code, failures, signals, severity)| ErrorRow {
            label: code.map_or_else(|| kind.clone(), |c| format!("{kind} {c}")),
            share: round6(ratio(failures, total_failures)),
            signal_share: round6(ratio(signals, total_signals)),
            kind,
            code,
            failures,
            signals,
            severity,
        })
        .collect();
    out.sort_by(|a, b| {
        b.failures
            .cmp(&a.failures)
            .then(b.signals.cmp(&a.signals))
            .then_with(|| a.label.cmp(&b.label))
    });
    out.truncate(limit);
    out
}
