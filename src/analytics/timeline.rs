//! Failures per day or ISO week by effective category. Pure: storage hands in rows; unit-tested in `analytics::cost`.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Day,
    Week,
}

impl Period {
    /// Start of the period holding `t` (UTC days; ISO weeks starting Monday, as Postgres date_trunc).
    pub fn start_of(self, t: DateTime<Utc>) -> NaiveDate {
        let d = t.date_naive();
        match self {
            Period::Day => d,
            Period::Week => d - Duration::days(i64::from(chrono::Datelike::weekday(&d).num_days_from_monday())),
        }
    }

    fn step(self) -> Duration {
        match self {
            Period::Day => Duration::days(1),
            Period::Week => Duration::days(7),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct TimelinePoint {
    /// First day of the period (UTC).
    pub period: NaiveDate,
    pub hardware: u64,
    pub platform: u64,
    pub user: u64,
    pub unknown: u64,
    pub total: u64,
}

/// Every period touching [from, to), in order, with its failures per category (zeros included).
pub fn timeline(
    counts: &[(NaiveDate, String, u64)],
    period: Period,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<TimelinePoint> {
    let mut points: BTreeMap<NaiveDate, TimelinePoint> = BTreeMap::new();
    let mut p = period.start_of(from);
    let last = if to > from {
        period.start_of(to - Duration::milliseconds(1))
    } else {
        p
    };
    while p <= last {
        points.insert(
            p,
            TimelinePoint {
                period: p,
                hardware: 0,
                platform: 0,
                user: 0,
                unknown: 0,
                total: 0,
            },
        );
        p += period.step();
    }
    for (day, category, n) in counts {
        let key = period.start_of(day.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
        let point = points.entry(key).or_insert(TimelinePoint {
            period: key,
            hardware: 0,
            platform: 0,
            user: 0,
            unknown: 0,
            total: 0,
        });
        match category.as_str() {
            "hardware" => point.hardware += n,
            "platform" => point.platform += n,
            "user" => point.user += n,
            _ => point.unknown += n,
        }
        point.total += n;
    }
    points.into_values().collect()
}
