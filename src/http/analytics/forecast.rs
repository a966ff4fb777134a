//! `failure-forecast`: expected hard failures per group in the next horizon, the prediction
//! interval, the spares to hold, and the backtest that chose the method.

use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::IntoParams;

use super::bad;
use crate::analytics::forecast::Request;
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::forecast::{self as qf, ForecastRequest};
use crate::queries::parts::{PartEvent, PartGrouping};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ForecastQuery {
    /// Restrict to one cluster (a scoped token always reads its own).
    pub cluster: Option<String>,
    /// model (default), generation, cluster, all, `attribute:KEY` (a site attribute, e.g. `attribute:lot`),
    /// or where the part serves now: `node`, `rack`, `node_group` or `slot`.
    #[param(
        max_length = 266,
        pattern = r"^(?:generation|model|cluster|all|node|rack|node_group|slot|attribute:.*\S.*)$"
    )]
    pub by: Option<String>,
    /// What counts as a failure: `removal` (a removal as failed or RMA; default) or
    /// `hardware_failure` (a hard failure resolved to the part).
    pub event: Option<PartEvent>,
    /// Days forecast after `to` (default 91, a quarter).
    #[param(minimum = 1, maximum = 730, example = 91)]
    pub horizon_days: Option<f64>,
    /// The origin (RFC 3339; default now): only what happened by then is used.
    pub to: Option<DateTime<Utc>>,
    /// Central probability of the prediction interval (default 0.9).
    #[param(minimum = 0.5, maximum = 0.99, example = 0.9)]
    pub interval: Option<f64>,
    /// Service level of the spares (default 0.95): the smallest k with P(failures <= k) >= it.
    #[param(minimum = 0.5, maximum = 0.999, example = 0.95)]
    pub service_level: Option<f64>,
    /// List the backtest's origins, each method's forecast and what happened (default false; the
    /// methods' scores are always given).
    pub backtest: Option<bool>,
}

impl ForecastQuery {
    fn parse(&self, caller: &Caller) -> ApiResult<(Option<String>, ForecastRequest)> {
        let by = self.by.as_deref().unwrap_or("model");
        let grouping = PartGrouping::parse(by).map_err(bad)?;
        let horizon_days = self.horizon_days.unwrap_or(91.0);
        if !(horizon_days.is_finite() && (1.0..=730.0).contains(&horizon_days)) {
            return Err(bad("horizon_days must be between 1 and 730"));
        }
        let interval = self.interval.unwrap_or(0.9);
        if !(interval.is_finite() && (0.5..=0.99).contains(&interval)) {
            return Err(bad("interval must be between 0.5 and 0.99"));
        }
        let service_level = self.service_level.unwrap_or(0.95);
        if !(service_level.is_finite() && (0.5..=0.999).contains(&service_level)) {
            return Err(bad("service_level must be between 0.5 and 0.999"));
        }
        Ok((
            caller.read_cluster(self.cluster.clone())?,
            ForecastRequest {
                by: grouping,
                event: self.event.unwrap_or(PartEvent::Removal),
                to: self.to.unwrap_or_else(Utc::now),
                request: Request {
                    horizon_days,
                    interval,
                    service_level,
                    afr_window_days: 365.25,
                },
                backtest: self.backtest.unwrap_or(false),
            },
        ))
    }
}

/// Expected failures of GPU parts per group in the next horizon, with a prediction interval and
/// the spares to hold for a service level, each group's method chosen by its own backtest.
///
/// Methods: `naive` (the last horizon's count), `afr` (failures per part-year of the last year
/// times the part-years of the parts in service), `weibull` (each part in service at its age a
/// fails with 1 - S(a + h) / S(a) under a Weibull fitted by maximum likelihood to the group's
/// lives, right-censored and left-truncated; the count's distribution is the sum of those trials,
/// averaged over the fit's uncertainty). Intervals and spares are quantiles of the predictive
/// distribution. The backtest forecasts from each quarter start of the last two years, from the
/// history before it only, and compares with what happened to the parts then in service: mean
/// absolute error, mean absolute scaled error against `naive`, bias, coverage of the interval.
/// The group's answer is the method with the lowest mean absolute error. Parts installed during
/// the horizon are not forecast. CSV: one row per group.
#[utoipa::path(
    get, path = "/v1/analytics/failure-forecast", tag = "analytics", params(ForecastQuery, FormatQuery),
    responses(
        (status = 200, description = "One forecast per group with its method, why, every method's forecast and scores. CSV: group, method, parts_in_service, expected, lower, upper, spares.",
         content((qf::ForecastAnswer = "application/json", example = json!({
             "cluster": null, "by": "model", "event": "removal", "as_of": "2026-10-01T00:00:00Z", "horizon_days": 91.0,
             "interval": 0.9, "service_level": 0.95,
             "backtest_origins": ["2026-01-01T00:00:00Z", "2026-04-01T00:00:00Z", "2026-07-01T00:00:00Z"],
             "groups": [{"group": "NVIDIA H100 80GB HBM3", "parts_in_service": 4096, "method": "weibull",
                         "reason": "lowest mean absolute error over 3 backtest origins: 2.10 (against naive 6.33, afr 3.40)",
                         "expected": 21.7, "lower": 14, "upper": 30, "spares": 30,
                         "methods": [{"method": "naive", "expected": 28.0, "lower": 20, "upper": 37, "spares": 37},
                                     {"method": "afr", "expected": 18.9, "lower": 12, "upper": 26, "spares": 26},
                                     {"method": "weibull", "expected": 21.7, "lower": 14, "upper": 30, "spares": 30,
                                      "weibull": {"shape": 1.42, "scale": 5210.0, "shape_lower": 1.21, "shape_upper": 1.66,
                                                  "scale_lower": 4180.0, "scale_upper": 6490.0, "events": 188, "subjects": 4300}}],
                         "scores": [{"method": "naive", "origins": 3, "mae": 6.33, "mase": 1.0, "bias": 4.0, "coverage": 0.67},
                                    {"method": "afr", "origins": 3, "mae": 3.4, "mase": 0.54, "bias": -3.1, "coverage": 1.0},
                                    {"method": "weibull", "origins": 3, "mae": 2.1, "mase": 0.33, "bias": 0.4, "coverage": 1.0}]}]})),
                 (String = "text/csv"))),
        (status = 400, description = "Invalid grouping, event, horizon, interval or service level", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query, or the cluster is outside its scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn failure_forecast(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(q): AppQuery<ForecastQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let (cluster, request) = q.parse(&caller)?;
    let answer = qf::failure_forecast(&ctx.read_db, cluster.as_deref(), &request).await?;
    Ok(respond(format, "failure-forecast", answer, |a| {
        let mut csv = Csv::new(&[
            "group",
            "method",
            "parts_in_service",
            "expected",
            "lower",
            "upper",
            "spares",
        ]);
        for g in &a.groups {
            csv.row([
                g.group.clone(),
                g.method.as_str().to_string(),
                s(g.parts_in_service),
                s(g.expected),
                s(g.lower),
                s(g.upper),
                s(g.spares),
            ]);
        }
        csv.finish()
    }))
}
