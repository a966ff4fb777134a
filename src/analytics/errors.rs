//! Top errors: failures by root signal and by all signals (kind and code). Pure: storage hands in rows; unit-tested in `analytics::cost`.

use std::collections::BTreeMap;

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

/// (kind, code, severity) -> counts.
type ErrorCounts = BTreeMap<(String, Option<i64>, String), (u64, u64, u64)>;

/// What the failures of a window hold per (kind, code, severity of the failure): (failures rooted
/// at this kind and code, failures holding a signal of it, those signals). Summed from the rollups
/// and the partial days; the two views of top errors are read from it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ErrorTally(ErrorCounts);

impl ErrorTally {
    pub fn add(&mut self, kind: String, code: Option<i64>, severity: String, root: u64, holding: u64, signals: u64) {
        let t = self.0.entry((kind, code, severity)).or_default();
        t.0 += root;
        t.1 += holding;
        t.2 += signals;
    }

    /// Per (kind, code) of the root signals: (failures, their most common severity). Among
    /// equally common severities the first in sort order, as `mode() WITHIN GROUP (ORDER BY
    /// severity)` picks.
    pub fn roots(&self) -> Vec<(String, Option<i64>, u64, String)> {
        let mut out: Vec<(String, Option<i64>, u64, String)> = Vec::new();
        let mut best = 0;
        // Severities of one (kind, code) come in sort order.
        for ((kind, code, severity), &(root, _, _)) in &self.0 {
            if root == 0 {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.0 == *kind && last.1 == *code => {
                    last.2 += root;
                    if root > best {
                        best = root;
                        last.3 = severity.clone();
                    }
                }
                _ => {
                    best = root;
                    out.push((kind.clone(), *code, root, severity.clone()));
                }
            }
        }
        out
    }

    /// Per (kind, code) among all signals: (failures holding one, signals).
    pub fn signals(&self) -> Vec<(String, Option<i64>, u64, u64)> {
        let mut acc: BTreeMap<(&str, Option<i64>), (u64, u64)> = BTreeMap::new();
        for ((kind, code, _), &(_, holding, signals)) in &self.0 {
            if holding > 0 {
                let a = acc.entry((kind.as_str(), *code)).or_default();
                a.0 += holding;
                a.1 += signals;
            }
        }
        acc.into_iter()
            .map(|((k, c), (f, n))| (k.to_string(), c, f, n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_severity_is_the_mode_first_in_sort_order_on_ties() {
        let mut t = ErrorTally::default();
        // xid 79: 2 critical, 2 high, 1 low roots: critical and high tie, critical sorts first.
        t.add("xid".into(), Some(79), "high".into(), 2, 2, 4);
        t.add("xid".into(), Some(79), "low".into(), 1, 1, 1);
        t.add("xid".into(), Some(79), "critical".into(), 2, 3, 6);
        // nccl_timeout: 1 medium root, 3 high; held by 5 failures (9 signals) in all.
        t.add("nccl_timeout".into(), None, "medium".into(), 1, 2, 3);
        t.add("nccl_timeout".into(), None, "high".into(), 3, 3, 6);
        // ecc 2 only ever held, never a root.
        t.add("ecc".into(), Some(2), "critical".into(), 0, 1, 1);
        assert_eq!(
            t.roots(),
            vec![
                ("nccl_timeout".to_string(), None, 4, "high".to_string()),
                ("xid".to_string(), Some(79), 5, "critical".to_string()),
            ]
        );
        assert_eq!(
            t.signals(),
            vec![
                ("ecc".to_string(), Some(2), 1, 1),
                ("nccl_timeout".to_string(), None, 5, 9),
                ("xid".to_string(), Some(79), 6, 11),
            ]
        );
    }
}
