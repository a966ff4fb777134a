//! `GET /v1/analytics/timeline`.

use axum::extract::State;
use axum::response::Response;
use chrono::Duration;
use serde::Deserialize;
use utoipa::IntoParams;

use super::{WindowQuery, bad};
use crate::analytics::cost::Period;
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::timeline::{self as queries, TimelineResponse};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TimelineQuery {
    /// day (default) or week (ISO weeks, from Monday). A daily timeline covers at most 3,660 days.
    pub period: Option<TimelinePeriod>,
}

/// The bucket of a timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TimelinePeriod {
    Day,
    Week,
}

/// Failures per day or week by root-cause category.
///
/// CSV: one row per period.
#[utoipa::path(
    get, path = "/v1/analytics/timeline", tag = "analytics", params(WindowQuery, TimelineQuery, FormatQuery),
    responses(
        (status = 200, description = "Failures per period and category, empty periods included. CSV: one row per period.",
         content((TimelineResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window or period", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn timeline(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(tq): AppQuery<TimelineQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let period = match tq.period.unwrap_or(TimelinePeriod::Day) {
        TimelinePeriod::Day => Period::Day,
        TimelinePeriod::Week => Period::Week,
    };
    let w = wq.window(&caller)?;
    if period == Period::Day && w.to - w.from > Duration::days(3660) {
        return Err(bad("a daily timeline covers at most 10 years; use period=week"));
    }
    let body = queries::timeline(&ctx.read_db, &w, period).await?;
    Ok(respond(format, "timeline", body, |b| {
        let mut csv = Csv::new(&["period", "hardware", "platform", "user", "unknown", "total"]);
        for p in &b.points {
            csv.row([
                s(p.period),
                s(p.hardware),
                s(p.platform),
                s(p.user),
                s(p.unknown),
                s(p.total),
            ]);
        }
        csv.finish()
    }))
}
