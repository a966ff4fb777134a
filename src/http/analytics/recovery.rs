//! `GET /v1/analytics/recovery`: what failures cost in downtime, drains and ETTR.

use axum::extract::State;
use axum::response::Response;
use chrono::Duration;
use serde::Deserialize;
use utoipa::IntoParams;

use super::{WindowQuery, bad};
use crate::analytics::headline::round6;
use crate::domain::auth::Permission;
use crate::domain::taxonomy::{Category, Component, RootCause};
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, o, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::recovery::{self as queries, CauseFilter, RecoveryResponse};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RecoveryQuery {
    /// A failure without a recorded resolution counts as drained when its root node was drained within
    /// this many hours of its first signal (default 24).
    #[param(minimum = 0, maximum = 8760, example = 24)]
    pub drain_horizon_hours: Option<f64>,
    /// How many jobs to list, worst ETTR first (default 100, at most 10,000).
    #[param(minimum = 0, maximum = 10000, example = 100)]
    pub jobs_limit: Option<usize>,
    /// Only failures of this effective root-cause category (post-mortem, else automatic); applies to
    /// every failure figure (summary, by_cause, ETTR's downtime).
    pub category: Option<Category>,
    /// Only failures of this effective component; it must belong to `category` when both are given.
    pub component: Option<Component>,
}

/// The cause filter, refusing a component of another category (naming the parameter).
fn cause(q: &RecoveryQuery) -> ApiResult<CauseFilter> {
    if let (Some(cat), Some(comp)) = (q.category, q.component) {
        RootCause::new(cat, comp).map_err(|e| bad(format!("query parameter `component`: {e}")))?;
    }
    Ok(CauseFilter {
        category: q.category,
        component: q.component,
    })
}

fn horizon(hours: Option<f64>) -> ApiResult<Duration> {
    let h = hours.unwrap_or(24.0);
    if !(h.is_finite() && (0.0..=24.0 * 365.0).contains(&h)) {
        return Err(bad("drain_horizon_hours must be between 0 and 8760"));
    }
    Ok(Duration::milliseconds((h * 3_600_000.0) as i64))
}

/// Downtime per failure, by recovery phase and by root cause, transient share, drains, GPU-hours lost and ETTR.
///
/// `category` / `component` restrict the failure figures to one effective root cause.
/// CSV (`Accept: text/csv`): one row per failure of the window (of the cause, when filtered) with its lifecycle and cost.
#[utoipa::path(
    get, path = "/v1/analytics/recovery", tag = "analytics", params(WindowQuery, RecoveryQuery, FormatQuery),
    responses(
        (status = 200, description = "Downtime statistics (mean, median, p90) overall, by phase and by effective root cause (category subtotals and components), transient share, share of hardware failures that needed a drain, GPU-hours lost, out-of-service time and ETTR per job and fleet-wide. CSV: one row per failure.",
         content((RecoveryResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window or parameter (a category or component outside the taxonomy, a component of another category)", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn recovery(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(rq): AppQuery<RecoveryQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let limit = rq.jobs_limit.unwrap_or(100);
    if limit > 10_000 {
        return Err(bad("jobs_limit must be at most 10,000"));
    }
    let h = horizon(rq.drain_horizon_hours)?;
    let cause = cause(&rq)?;
    let (body, failures) = queries::recovery(&ctx.read_db, &wq.window(&caller)?, h, limit, cause).await?;
    Ok(respond(format, "recovery", body, |_| {
        let mut csv = Csv::new(&[
            "failure_id",
            "cluster",
            "job_id",
            "first_at",
            "category",
            "transient",
            "resolution",
            "drained",
            "downtime_minutes",
            "detection_minutes",
            "resubmission_minutes",
            "setup_minutes",
            "recomputation_minutes",
            "gpus",
            "gpu_hours_lost",
            "component",
        ]);
        for f in &failures {
            let down = f.downtime_minutes();
            let lost = down.zip(f.gpus).map(|(d, g)| round6(d / 60.0 * f64::from(g)));
            csv.row([
                s(f.id),
                f.cluster.clone(),
                o(f.job_id.as_ref()),
                f.first_at.to_rfc3339(),
                f.category.clone(),
                s(f.transient()),
                o(f.resolution.as_ref()),
                s(f.drained()),
                o(down.map(round6)),
                o(f.phases.detection),
                o(f.phases.resubmission),
                o(f.phases.setup),
                o(f.phases.recomputation),
                o(f.gpus),
                o(lost),
                f.component.clone(),
            ]);
        }
        csv.finish()
    }))
}
