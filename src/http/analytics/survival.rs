//! `survival`: Kaplan-Meier lifetimes of GPU parts by group, at chosen ages, with the log-rank
//! test between the groups.

use axum::extract::State;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;
use utoipa::IntoParams;

use super::bad;
use super::parts::PartsQuery;
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::parts::{self as qp, Age, LifeDefinition, SurvivalOptions};

/// What only the survival answer reads.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SurvivalQuery {
    /// Ages of installed time to read the curves at: a comma-separated list of numbers of days
    /// (`d`) or years (`y`, 365.25 days), at most 20 (default `1y,2y,3y,5y`); an age no part of a
    /// group reached reads no survival.
    #[param(
        max_length = 400,
        pattern = r"^ *[0-9]+(\.[0-9]+)?[dy] *(, *[0-9]+(\.[0-9]+)?[dy] *){0,19}$",
        example = "90d,1y,2.5y"
    )]
    pub at: Option<String>,
    /// How a part's lifetime is counted: `first_failure` (default: installed time until its first
    /// event) or `final_failure` (installed time until the event after which it never served
    /// again: a part repaired and reinstalled keeps ageing; one that served after its last event
    /// is censored at its age).
    #[param(example = "final_failure")]
    pub life: Option<LifeDefinition>,
}

impl SurvivalQuery {
    fn parse(&self) -> ApiResult<SurvivalOptions> {
        Ok(SurvivalOptions {
            ages: match &self.at {
                Some(at) => Age::parse_list(at).map_err(|e| bad(format!("at: {e}")))?,
                None => Age::defaults(),
            },
            life: self.life.unwrap_or_default(),
        })
    }
}

const SURVIVAL_CSV: [&str; 9] = [
    "group",
    "time_days",
    "at_risk",
    "events",
    "censored",
    "survival",
    "lower",
    "upper",
    "variance",
];

/// Kaplan-Meier survival of GPU parts by group, with Greenwood bands, medians, survival at the
/// ages asked for (`at`; default 1, 2, 3 and 5 years) and a log-rank test between the groups.
///
/// A part's age is its cumulative installed time (its placements summed; time on a shelf or at
/// the vendor does not age it). The event is its first removal as failed or RMA (or, with
/// `event=hardware_failure`, its first hard failure resolved to it: a hardware root cause, not
/// transient, of critical or high severity); parts still installed or
/// removed for other reasons are censored at their age. With `life=final_failure` a part's life
/// runs until the event after which it never served again (a repaired part keeps ageing). A part
/// enters when first installed. Bands: Greenwood's variance on the
/// log(-log) scale; the median's interval is where the bands cross 0.5. CSV: one row per step.
#[utoipa::path(
    get, path = "/v1/analytics/survival", tag = "analytics", params(PartsQuery, SurvivalQuery, FormatQuery),
    responses(
        (status = 200, description = "One curve per group, each with its median, survival at the ages asked for and the parts at risk; the log-rank test between groups. CSV: group, time_days, at_risk, events, censored, survival, lower, upper, variance per step.",
         content((qp::SurvivalAnswer = "application/json", example = json!({
             "cluster": null, "by": "generation", "event": "removal", "life": "first_failure", "confidence": 0.95,
             "as_of": "2026-12-02T00:00:00Z",
             "groups": [{"group": "hopper", "parts": 4, "events": 2, "median_days": 100.0, "median_lower_days": 100.0,
                         "median_upper_days": null,
                         "at_ages": [{"age": "90d", "days": 90.0, "survival": 0.333333, "lower": 0.008962, "upper": 0.774149, "at_risk": 3},
                                     {"age": "1y", "days": 365.25, "survival": null, "lower": null, "upper": null, "at_risk": 0}],
                         "curve": {"subjects": 4, "events": 2, "confidence": 0.95, "median": 100.0, "median_lower": 100.0,
                                   "median_upper": null,
                                   "steps": [{"time": 50.0, "at_risk": 4, "events": 0, "censored": 1, "survival": 1.0,
                                              "variance": 0.0, "lower": 1.0, "upper": 1.0},
                                             {"time": 100.0, "at_risk": 3, "events": 2, "censored": 0,
                                              "survival": 0.333333, "variance": 0.074074, "lower": 0.008962, "upper": 0.774149}]}}],
             "log_rank": {"statistic": 0.374046, "degrees_of_freedom": 1, "p_value": 0.540807}})),
                 (String = "text/csv"))),
        (status = 400, description = "Invalid grouping, event, confidence, ages or life definition", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query, or the cluster is outside its scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn survival(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(q): AppQuery<PartsQuery>,
    AppQuery(sq): AppQuery<SurvivalQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let (cluster, by, event, confidence) = q.parse(&caller)?;
    let options = sq.parse()?;
    let answer = qp::survival(
        &ctx.read_db,
        cluster.as_deref(),
        &by,
        event,
        confidence,
        &options,
        q.to.unwrap_or_else(Utc::now),
    )
    .await?;
    Ok(respond(format, "survival", answer, |a| {
        let mut csv = Csv::new(&SURVIVAL_CSV);
        for g in &a.groups {
            for st in &g.curve.steps {
                csv.row([
                    g.group.clone(),
                    s(st.time),
                    s(st.at_risk),
                    s(st.events),
                    s(st.censored),
                    s(st.survival),
                    s(st.lower),
                    s(st.upper),
                    s(st.variance),
                ]);
            }
        }
        csv.finish()
    }))
}
