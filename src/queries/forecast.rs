//! Failure forecasts per group of parts (`analytics::forecast`), each with the backtest that chose
//! its method: the fleet's parts loaded once, grouped as the parts analytics group them.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::gpus::fleet_lives;
use super::parts::{NodeLabels, PartEvent, PartGrouping, event_times};
use crate::analytics::forecast::{self, BacktestOrigin, Method, MethodForecast, MethodScore, PartHistory, Request};

/// Backtest origins: the quarter starts of this many years before the forecast's origin.
pub const BACKTEST_YEARS: i64 = 2;

/// One group's forecast.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ForecastGroup {
    pub group: String,
    /// Parts in service at the origin (the parts forecast).
    pub parts_in_service: u64,
    /// The method answered, chosen by the backtest.
    pub method: Method,
    /// Why that method.
    pub reason: String,
    /// Expected failures in (to, to + horizon].
    pub expected: f64,
    /// The prediction interval of the count.
    pub lower: u64,
    pub upper: u64,
    /// Spares to hold for the service level: the smallest k with P(failures <= k) >= it.
    pub spares: u64,
    /// Every method's forecast at the origin.
    pub methods: Vec<MethodForecast>,
    /// Each method's record over the backtest's origins.
    pub scores: Vec<MethodScore>,
    /// The backtest's origins, each method's forecast and what happened (with `backtest=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backtest: Option<Vec<BacktestOrigin>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ForecastAnswer {
    pub cluster: Option<String>,
    pub by: String,
    pub event: PartEvent,
    /// The origin: failures are forecast for (as_of, as_of + horizon_days].
    pub as_of: DateTime<Utc>,
    pub horizon_days: f64,
    pub interval: f64,
    pub service_level: f64,
    /// The backtest's origins (quarter starts whose horizon ended by `as_of`).
    pub backtest_origins: Vec<DateTime<Utc>>,
    pub groups: Vec<ForecastGroup>,
}

/// What a forecast is asked.
#[derive(Debug, Clone)]
pub struct ForecastRequest {
    pub by: PartGrouping,
    pub event: PartEvent,
    pub to: DateTime<Utc>,
    pub request: Request,
    /// List the backtest's origins in the answer.
    pub backtest: bool,
}

pub async fn failure_forecast(
    db: &PgPool,
    cluster: Option<&str>,
    q: &ForecastRequest,
) -> Result<ForecastAnswer, sqlx::Error> {
    let (lives, labels) = tokio::try_join!(
        fleet_lives(db, cluster, q.to, q.event == PartEvent::HardwareFailure),
        NodeLabels::for_grouping(db, &q.by),
    )?;
    let mut grouped: BTreeMap<String, Vec<PartHistory>> = BTreeMap::new();
    for life in &lives {
        grouped
            .entry(q.by.group_of(life, &labels))
            .or_default()
            .push(PartHistory {
                intervals: life.intervals.clone(),
                events: event_times(life, q.event, q.to).collect(),
                age_at_first_sight: 0.0,
            });
    }
    let origins = forecast::quarter_origins(
        q.to - Duration::days(366 * BACKTEST_YEARS),
        q.to,
        q.request.horizon_days,
        (4 * BACKTEST_YEARS) as usize,
    );
    let groups = grouped
        .into_iter()
        .map(|(group, parts)| forecast_group(group, &parts, &origins, q))
        .collect();
    Ok(ForecastAnswer {
        cluster: cluster.map(str::to_string),
        by: q.by.name(),
        event: q.event,
        as_of: q.to,
        horizon_days: q.request.horizon_days,
        interval: q.request.interval,
        service_level: q.request.service_level,
        backtest_origins: origins,
        groups,
    })
}

fn forecast_group(
    group: String,
    parts: &[PartHistory],
    origins: &[DateTime<Utc>],
    q: &ForecastRequest,
) -> ForecastGroup {
    let rows = forecast::backtest(parts, origins, &q.request);
    let scores = forecast::scores(&rows);
    let methods = forecast::forecast_at(parts, q.to, &q.request);
    let available: Vec<Method> = methods.iter().map(|m| m.method).collect();
    let (method, reason) = forecast::choose(&scores, rows.len() as u64, &available);
    let chosen = methods
        .iter()
        .find(|m| m.method == method)
        .expect("the chosen method answered");
    ForecastGroup {
        parts_in_service: parts
            .iter()
            .filter(|p| {
                p.intervals
                    .iter()
                    .any(|i| i.from <= q.to && i.to.is_none_or(|t| t > q.to))
            })
            .count() as u64,
        method,
        reason,
        expected: chosen.expected,
        lower: chosen.lower,
        upper: chosen.upper,
        spares: chosen.spares,
        group,
        methods: methods.clone(),
        scores,
        backtest: q.backtest.then_some(rows),
    }
}
