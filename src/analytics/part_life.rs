//! A GPU part's life from its placements and removals: its age (cumulative installed time: time
//! on a shelf or at the vendor does not age a part), its state, and its age at any instant (what
//! survival analysis measures lifetimes in).

use chrono::{DateTime, Utc};

/// One installed interval; `to` None while installed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub from: DateTime<Utc>,
    pub to: Option<DateTime<Utc>>,
}

/// A part's state now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PartState {
    /// In a slot.
    Installed,
    /// Out of every slot without a recorded removal (on a shelf, between nodes).
    Spare,
    /// Removed because it failed.
    Failed,
    /// At the vendor (returned for repair or replacement).
    Rma,
    Decommissioned,
    Upgraded,
}

impl PartState {
    pub const ALL: [PartState; 6] = [
        PartState::Installed,
        PartState::Spare,
        PartState::Failed,
        PartState::Rma,
        PartState::Decommissioned,
        PartState::Upgraded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PartState::Installed => "installed",
            PartState::Spare => "spare",
            PartState::Failed => "failed",
            PartState::Rma => "rma",
            PartState::Decommissioned => "decommissioned",
            PartState::Upgraded => "upgraded",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// Seconds per day, for ages in days.
const DAY: f64 = 86_400.0;

/// The part's age in days at `at`: its installed time before `at`, intervals overlapping
/// counted once (an import may overlap them).
pub fn age_days_at(intervals: &[Interval], at: DateTime<Utc>) -> f64 {
    let mut spans: Vec<(DateTime<Utc>, DateTime<Utc>)> = intervals
        .iter()
        .filter(|i| i.from < at)
        .map(|i| (i.from, i.to.map_or(at, |t| t.min(at))))
        .filter(|(a, b)| b > a)
        .collect();
    spans.sort();
    let mut total = 0.0;
    let mut reach: Option<DateTime<Utc>> = None;
    for (a, b) in spans {
        let start = reach.map_or(a, |r| r.max(a));
        if b > start {
            total += (b - start).num_milliseconds() as f64 / 1000.0 / DAY;
        }
        reach = Some(reach.map_or(b, |r| r.max(b)));
    }
    total
}

/// The state now: installed while an interval is open; else the reason of a removal at or after
/// the last interval's end; else spare.
pub fn state(intervals: &[Interval], removals: &[(DateTime<Utc>, &str)]) -> PartState {
    if intervals.iter().any(|i| i.to.is_none()) {
        return PartState::Installed;
    }
    let last_end = intervals.iter().filter_map(|i| i.to).max();
    removals
        .iter()
        .filter(|(t, _)| last_end.is_none_or(|e| *t >= e))
        .max_by_key(|(t, _)| *t)
        .and_then(|(_, reason)| PartState::parse(reason))
        .unwrap_or(PartState::Spare)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(day: i64) -> DateTime<Utc> {
        "2025-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap() + chrono::Duration::days(day)
    }

    #[test]
    fn age_sums_installed_time_only_and_counts_overlaps_once() {
        // Installed days 0-10, on a shelf 10-30, installed again 30-open.
        let life = [
            Interval {
                from: d(0),
                to: Some(d(10)),
            },
            Interval { from: d(30), to: None },
        ];
        assert_eq!(age_days_at(&life, d(5)), 5.0);
        assert_eq!(age_days_at(&life, d(20)), 10.0);
        assert_eq!(age_days_at(&life, d(40)), 20.0);
        let overlapping = [
            Interval {
                from: d(0),
                to: Some(d(10)),
            },
            Interval {
                from: d(5),
                to: Some(d(12)),
            },
        ];
        assert_eq!(age_days_at(&overlapping, d(100)), 12.0);
    }

    #[test]
    fn state_follows_the_last_interval_and_removal() {
        let open = [Interval { from: d(0), to: None }];
        assert_eq!(state(&open, &[(d(-5), "rma")]), PartState::Installed);
        let closed = [Interval {
            from: d(0),
            to: Some(d(10)),
        }];
        assert_eq!(state(&closed, &[]), PartState::Spare);
        assert_eq!(state(&closed, &[(d(10), "rma")]), PartState::Rma);
        // A removal before the last placement ended is history (the part came back since).
        let back = [
            Interval {
                from: d(0),
                to: Some(d(10)),
            },
            Interval {
                from: d(40),
                to: Some(d(50)),
            },
        ];
        assert_eq!(state(&back, &[(d(10), "rma")]), PartState::Spare);
        assert_eq!(state(&back, &[(d(10), "rma"), (d(50), "failed")]), PartState::Failed);
    }
}
