//! `GET /v1/analytics/stragglers`.

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;

use super::{WindowQuery, bad};
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::stragglers::{self as queries, StragglerParams, StragglersResponse};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StragglerQuery {
    /// Slowdown ratio from which a node straggles (default 1.1: 10% slower than the job median).
    #[param(minimum = 1, example = 1.1)]
    pub min_ratio: Option<f64>,
    /// Minutes a signal covers when it sends no duration_seconds (default 10).
    #[param(exclusive_minimum = 0, maximum = 1440, example = 10)]
    pub sample_minutes: Option<f64>,
    /// Signals of a node closer than this many minutes form one episode (default 30).
    #[param(minimum = 0, maximum = 10080, example = 30)]
    pub gap_minutes: Option<f64>,
}

/// Straggler episodes from slowdown signals: share of nodes that straggle and GPU-hours wasted.
///
/// CSV: one row per episode.
#[utoipa::path(
    get, path = "/v1/analytics/stragglers", tag = "analytics", params(WindowQuery, StragglerQuery, FormatQuery),
    responses(
        (status = 200, description = "Straggler episodes per node, the share of nodes that straggle and the GPU-hours wasted. CSV: one row per episode.",
         content((StragglersResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window or parameter", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn stragglers(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(sq): AppQuery<StragglerQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let min_ratio = sq.min_ratio.unwrap_or(1.1);
    let sample = sq.sample_minutes.unwrap_or(10.0);
    let gap = sq.gap_minutes.unwrap_or(30.0);
    if !(min_ratio.is_finite() && min_ratio >= 1.0) {
        return Err(bad("min_ratio must be at least 1"));
    }
    let sample_ok = sample.is_finite() && sample > 0.0 && sample <= 1440.0;
    if !(sample_ok && gap.is_finite() && (0.0..=10_080.0).contains(&gap)) {
        return Err(bad("sample_minutes must be in (0, 1440] and gap_minutes in [0, 10080]"));
    }
    let params = StragglerParams {
        min_ratio,
        sample_minutes: sample,
        gap_minutes: gap,
    };
    let body = queries::stragglers(&ctx.read_db, &wq.window(&caller)?, &params).await?;
    Ok(respond(format, "stragglers", body, |b| {
        let mut csv = Csv::new(&[
            "cluster",
            "node",
            "start",
            "end",
            "signals",
            "max_ratio",
            "mean_ratio",
            "jobs",
            "gpu_hours_wasted",
        ]);
        for e in &b.episodes {
            csv.row([
                e.cluster.clone(),
                e.node.clone(),
                e.start.to_rfc3339(),
                e.end.to_rfc3339(),
                s(e.signals),
                s(e.max_ratio),
                s(e.mean_ratio),
                e.jobs.join(" "),
                s(e.gpu_hours_wasted),
            ]);
        }
        csv.finish()
    }))
}
