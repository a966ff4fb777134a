//! The parts analytics: `afr` (annualised failure rates), `parts-or-slots` (does a repeat failure
//! follow the part or stay with the slot) and `precursors` (which signals are followed by a
//! hardware failure of the same part); their shared query. Survival: `survival.rs`.

use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use utoipa::IntoParams;

use super::{WindowQuery, bad};
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, o, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::parts::{self as qp, PartEvent, PartGrouping};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PartsQuery {
    /// Restrict to one cluster (a scoped token always reads its own).
    pub cluster: Option<String>,
    /// generation (default), model, cluster, all, `attribute:KEY` (a site attribute, e.g. `attribute:lot`),
    /// or where the part served at the time: `node`, `rack`, `node_group` (the node's group label) or
    /// `slot` (GPU index); a part that moved counts its installed time and its event in the group of
    /// the placement where each happened (survival and AFR).
    #[param(
        max_length = 266,
        pattern = r"^(?:generation|model|cluster|all|node|rack|node_group|slot|attribute:.*\S.*)$"
    )]
    pub by: Option<String>,
    /// What ends a part's life: `removal` (its first removal as failed or RMA; default) or
    /// `hardware_failure` (its first hard failure: hardware root cause, not transient, critical or high severity).
    pub event: Option<PartEvent>,
    /// Confidence of the intervals (default 0.95).
    #[param(minimum = 0.5, maximum = 0.999, example = 0.95)]
    pub confidence: Option<f64>,
    /// The instant ages are computed at (RFC 3339; default now): installed parts are censored then.
    pub to: Option<DateTime<Utc>>,
}

impl PartsQuery {
    pub(super) fn parse(&self, caller: &Caller) -> ApiResult<(Option<String>, PartGrouping, PartEvent, f64)> {
        let by = self.by.as_deref().unwrap_or("generation");
        let grouping = PartGrouping::parse(by).map_err(bad)?;
        let confidence = self.confidence.unwrap_or(0.95);
        if !(confidence.is_finite() && (0.5..=0.999).contains(&confidence)) {
            return Err(bad("confidence must be between 0.5 and 0.999"));
        }
        Ok((
            caller.read_cluster(self.cluster.clone())?,
            grouping,
            self.event.unwrap_or(PartEvent::Removal),
            confidence,
        ))
    }
}

/// Annualised failure rate of GPU parts by group: failures per installed part-year, with the exact
/// Poisson interval.
///
/// Failures: every removal as failed or RMA (or, with `event=hardware_failure`, every hard failure
/// resolved to a part: hardware, not transient, critical or high severity). Part-years: the parts' installed time. CSV: one row per group.
#[utoipa::path(
    get, path = "/v1/analytics/afr", tag = "analytics", params(PartsQuery, FormatQuery),
    responses(
        (status = 200, description = "One rate per group with its interval. CSV: group, parts, failures, part_years, rate_per_year, lower, upper.",
         content((qp::AfrAnswer = "application/json", example = json!({
             "cluster": null, "by": "model", "event": "removal", "confidence": 0.95, "as_of": "2026-12-02T00:00:00Z",
             "groups": [{"group": "NVIDIA H100 80GB HBM3", "parts": 4, "failures": 2, "part_years": 1.505818,
                         "rate_per_year": 1.328182, "lower": 0.160848, "upper": 4.797905}]})),
                 (String = "text/csv"))),
        (status = 400, description = "Invalid grouping, event or confidence", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query, or the cluster is outside its scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn afr(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(q): AppQuery<PartsQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let (cluster, by, event, confidence) = q.parse(&caller)?;
    let answer = qp::afr(
        &ctx.read_db,
        cluster.as_deref(),
        &by,
        event,
        confidence,
        q.to.unwrap_or_else(Utc::now),
    )
    .await?;
    Ok(respond(format, "afr", answer, |a| {
        let mut csv = Csv::new(&[
            "group",
            "parts",
            "failures",
            "part_years",
            "rate_per_year",
            "lower",
            "upper",
        ]);
        for g in &a.groups {
            csv.row([
                g.group.clone(),
                s(g.parts),
                s(g.afr.failures),
                s(g.afr.part_years),
                o(g.afr.rate_per_year),
                s(g.afr.lower),
                o(g.afr.upper),
            ]);
        }
        csv.finish()
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SuspectQuery {
    pub cluster: Option<String>,
    /// The instant exposures end at (RFC 3339; default now).
    pub to: Option<DateTime<Utc>>,
    /// Family-wise significance level after Holm's correction (default 0.05).
    #[param(minimum = 0.000001, maximum = 0.5, example = 0.05)]
    pub alpha: Option<f64>,
}

/// Repeat hard failures (hardware, not transient, critical or high severity): those that follow a part across slots (replace the part) and those
/// that stay with a slot across parts (inspect the node: baseboard, riser, cooling, power).
///
/// Each part and each slot with installed time is one test: under the fleet's rate per installed
/// day, P(X >= its failures) for X ~ Poisson(expected), Holm-corrected over every test. Listed:
/// parts and slots with two or more failures. CSV: one row per part or slot listed.
#[utoipa::path(
    get, path = "/v1/analytics/parts-or-slots", tag = "analytics", params(SuspectQuery, FormatQuery),
    responses(
        (status = 200, description = "Parts and slots with repeat failures, most improbable first, with the recommendation. CSV: kind, id, failures, distinct, exposure_days, expected, p_value, adjusted_p, significant, recommendation.",
         content((qp::PartsOrSlotsAnswer = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid alpha", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query, or the cluster is outside its scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn parts_or_slots(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(q): AppQuery<SuspectQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let alpha = q.alpha.unwrap_or(0.05);
    if !(alpha.is_finite() && (0.000_001..=0.5).contains(&alpha)) {
        return Err(bad("alpha must be between 0.000001 and 0.5"));
    }
    let cluster = caller.read_cluster(q.cluster)?;
    let answer = qp::parts_or_slots(&ctx.read_db, cluster.as_deref(), alpha, q.to.unwrap_or_else(Utc::now)).await?;
    Ok(respond(format, "parts-or-slots", answer, |a| {
        let mut csv = Csv::new(&[
            "kind",
            "id",
            "failures",
            "distinct",
            "exposure_days",
            "expected",
            "p_value",
            "adjusted_p",
            "significant",
            "recommendation",
        ]);
        for x in a.result.parts.iter().chain(&a.result.slots) {
            csv.row([
                serde_json::to_value(x.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                x.id.clone(),
                s(x.failures),
                s(x.distinct),
                s(x.exposure_days),
                s(x.expected),
                s(x.p_value),
                s(x.adjusted_p),
                s(x.significant),
                serde_json::to_value(x.recommendation)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            ]);
        }
        csv.finish()
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PrecursorQuery {
    /// Days after a signal in which a failure counts as following it (default 7).
    #[param(minimum = 0.01, maximum = 365, example = 7)]
    pub window_days: Option<f64>,
    /// Confidence of the ratio's interval (default 0.95).
    #[param(minimum = 0.5, maximum = 0.999, example = 0.95)]
    pub confidence: Option<f64>,
}

/// Early signals of a part's hard failure (hardware, not transient, critical or high severity): for each signal kind and code that named a part, the
/// rate of a hardware failure of the same part within `window_days` after it against the rate
/// without it, as a ratio with its exact interval.
///
/// The window of the query (default: the 365 days before `to`) bounds the signals, the failures and
/// the installed time compared. Exposed time: installed time within `window_days` after an
/// occurrence; a failure counts as exposed only if the signal came strictly before it. The ratio's
/// interval is the exact conditional (binomial) one. CSV: one row per kind and code.
#[utoipa::path(
    get, path = "/v1/analytics/precursors", tag = "analytics", params(WindowQuery, PrecursorQuery, FormatQuery),
    responses(
        (status = 200, description = "One row per kind and code, highest lower bound of the rate ratio first. CSV: kind, code, occurrences, parts_with_signal, exposed_days, exposed_failures, unexposed_days, unexposed_failures, rate_ratio, ratio_lower, ratio_upper, p_value, significant.",
         content((qp::PrecursorAnswer = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window, window_days or confidence", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query, or the cluster is outside its scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn precursors(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(mut wq): AppQuery<WindowQuery>,
    AppQuery(q): AppQuery<PrecursorQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let window_days = q.window_days.unwrap_or(7.0);
    if !(window_days.is_finite() && (0.01..=365.0).contains(&window_days)) {
        return Err(bad("window_days must be between 0.01 and 365"));
    }
    let confidence = q.confidence.unwrap_or(0.95);
    if !(confidence.is_finite() && (0.5..=0.999).contains(&confidence)) {
        return Err(bad("confidence must be between 0.5 and 0.999"));
    }
    if wq.from.is_none() {
        wq.from = Some(wq.to.unwrap_or_else(Utc::now) - Duration::days(365));
    }
    let w = wq.window(&caller)?;
    let answer = qp::precursors(
        &ctx.read_db,
        w.cluster.as_deref(),
        w.from,
        w.to,
        window_days,
        confidence,
    )
    .await?;
    Ok(respond(format, "precursors", answer, |a| {
        let mut csv = Csv::new(&[
            "kind",
            "code",
            "occurrences",
            "parts_with_signal",
            "exposed_days",
            "exposed_failures",
            "unexposed_days",
            "unexposed_failures",
            "rate_ratio",
            "ratio_lower",
            "ratio_upper",
            "p_value",
            "significant",
        ]);
        for p in &a.precursors {
            csv.row([
                p.kind.clone(),
                o(p.code),
                s(p.occurrences),
                s(p.parts_with_signal),
                s(p.exposed_days),
                s(p.exposed_failures),
                s(p.unexposed_days),
                s(p.unexposed_failures),
                o(p.rate_ratio),
                o(p.ratio_lower),
                o(p.ratio_upper),
                o(p.p_value),
                s(p.significant),
            ]);
        }
        csv.finish()
    }))
}
