//! The analytics routes (reader role), one module per analysis. Each handler checks its
//! parameters, calls its read use case in `crate::queries` and renders JSON (or CSV).

pub mod availability;
pub mod baselines;
pub mod compare;
pub mod concentration;
pub mod efficiency;
pub mod errors;
pub mod forecast;
pub mod headline;
pub mod job_plan;
pub mod job_size;
pub mod lemon;
pub mod parts;
pub mod recovery;
pub mod stragglers;
pub mod survival;
pub mod timeline;

use axum::Router;
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::IntoParams;

use super::ApiContext;
use crate::domain::window::{Window, WindowError};
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiResult};

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/analytics/failure-mix", get(headline::failure_mix))
        .route("/v1/analytics/mtbf", get(headline::mtbf))
        .route("/v1/analytics/root-causes", get(headline::root_causes))
        .route("/v1/analytics/recovery", get(recovery::recovery))
        .route("/v1/analytics/top-errors", get(errors::top_errors))
        .route(
            "/v1/analytics/node-concentration",
            get(concentration::node_concentration),
        )
        .route("/v1/analytics/job-size", get(job_size::job_size))
        .route("/v1/analytics/stragglers", get(stragglers::stragglers))
        .route("/v1/analytics/efficiency", get(efficiency::efficiency))
        .route("/v1/analytics/timeline", get(timeline::timeline))
        .route("/v1/analytics/baselines", get(baselines::baselines))
        .route("/v1/analytics/compare", get(compare::compare))
        .route("/v1/analytics/job-plan", get(job_plan::job_plan))
        .route("/v1/analytics/lemon-nodes", get(lemon::lemon_nodes))
        .route("/v1/analytics/survival", get(survival::survival))
        .route("/v1/analytics/afr", get(parts::afr))
        .route("/v1/analytics/failure-forecast", get(forecast::failure_forecast))
        .route("/v1/analytics/parts-or-slots", get(parts::parts_or_slots))
        .route("/v1/analytics/precursors", get(parts::precursors))
        .route("/v1/analytics/availability", get(availability::availability))
        .route("/v1/analytics/repair-pipeline", get(availability::repair_pipeline))
        .route("/v1/fleet/now", get(availability::fleet_now))
}

/// The window every analysis takes. Defaults: `to` = now, `from` = `to` - 30 days.
#[derive(Debug, Deserialize, IntoParams, Clone)]
#[into_params(parameter_in = Query)]
pub struct WindowQuery {
    /// Start of the window (inclusive), RFC 3339; default: `to` - 30 days. Never after `to` (400).
    /// The reliability report and a daily timeline cover at most 3,660 days (400 beyond).
    pub from: Option<DateTime<Utc>>,
    /// End of the window (exclusive), RFC 3339; default: now. Never before `from` (400).
    pub to: Option<DateTime<Utc>>,
    /// Restrict to one cluster.
    pub cluster: Option<String>,
}

impl WindowQuery {
    /// The window this query names for `caller`, parsed once at the edge: a token scoped to a
    /// cluster gets its cluster's window (403 for another cluster), see [`Window::resolve`].
    pub fn window(&self, caller: &Caller) -> ApiResult<Window> {
        Window::resolve(
            self.from,
            self.to,
            self.cluster.clone(),
            caller.cluster.as_deref(),
            Utc::now(),
        )
        .map_err(|e| match e {
            WindowError::Invalid(m) => bad(m),
            WindowError::OutOfScope(e) => ApiError::Forbidden(e.to_string()),
        })
    }
}

pub(crate) fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_query", message)
}
