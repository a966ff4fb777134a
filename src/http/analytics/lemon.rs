//! `GET /v1/analytics/lemon-nodes`: nodes whose failure count is improbable under the fleet rate.

use axum::extract::State;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{WindowQuery, bad};
use crate::domain::auth::Permission;
use crate::domain::taxonomy::LemonCategory;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, o, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::decisions::{self as qd, LemonFigures, Span};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LemonQuery {
    /// Effective root-cause category to count (default hardware), or all.
    pub category: Option<LemonCategory>,
    /// Family-wise significance level after Holm's correction (default 0.05).
    #[param(minimum = 0.000001, maximum = 0.5, example = 0.05)]
    pub alpha: Option<f64>,
}

const LEMON_DEFINITIONS: &str = "Each inventory node in service in [from, to) is one test. Fleet rate = failures of the \
category (effective root cause, post-mortem over automatic; hardware by default) with a root node in the inventory / all \
tested GPU-hours. expected_failures = fleet rate x the node's GPU-hours; tail_probability = P(X >= failures) for X ~ \
Poisson(expected_failures); adjusted_probability: Holm's step-down correction over the nodes tested (controls the chance of \
any false lemon at alpha). A lemon has adjusted_probability <= alpha. The fleet rate includes the lemons themselves \
(conservative). dominant_component: the component of most of its failures. drained: its last node transition by `to` \
is a drain. Assumes independent failures at a constant rate per GPU; see docs/decisions.md.";

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LemonResponse {
    #[serde(flatten)]
    pub figures: LemonFigures,
    pub definitions: String,
}

/// Nodes whose failure count is improbably high for their exposure under the fleet's rate (Poisson
/// tail, Holm-corrected for testing every node), with the dominant component and drain state.
///
/// CSV: one row per lemon node.
#[utoipa::path(
    get, path = "/v1/analytics/lemon-nodes", tag = "analytics", params(WindowQuery, LemonQuery, FormatQuery),
    responses(
        (status = 200, description = "The nodes tested, the fleet rate, and the lemon nodes, most improbable first, each with its failures, expected failures, tail probability, Holm-adjusted probability, dominant component and whether it is drained. CSV: one row per lemon node.",
         content(
             (LemonResponse = "application/json", example = json!({
                 "window": {"from": "2026-11-01T00:00:00Z", "to": "2026-11-11T00:00:00Z", "cluster": "c1"},
                 "category": "hardware", "failures_without_node": 0,
                 "nodes_tested": 10, "failures": 7, "gpu_hours": 19200.0, "fleet_failures_per_1000_gpu_days": 8.75,
                 "alpha": 0.05, "correction": "holm",
                 "lemons": [{"cluster": "c1", "hostname": "n00", "failures": 6, "expected_failures": 0.7,
                             "tail_probability": 0.0000900263, "adjusted_probability": 0.000900263,
                             "dominant_component": "gpu_memory", "dominant_component_failures": 4, "drained": true}],
                 "definitions": "..."})),
             (String = "text/csv", example = json!("cluster,hostname,failures,expected_failures,tail_probability,adjusted_probability,dominant_component,dominant_component_failures,drained\r\nc1,n00,6,0.7,0.0000900263,0.000900263,gpu_memory,4,true\r\n"))
         )),
        (status = 400, description = "Invalid window, category or alpha", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn lemon_nodes(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(q): AppQuery<LemonQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let alpha = q.alpha.unwrap_or(0.05);
    if !(alpha.is_finite() && (0.000_001..=0.5).contains(&alpha)) {
        return Err(bad("alpha must be between 0.000001 and 0.5"));
    }
    let category = q.category.unwrap_or_default().category();
    let window = Span::from(wq.window(&caller)?);
    let figures = qd::lemons(&ctx.read_db, window, category, alpha).await?;
    let body = LemonResponse {
        figures,
        definitions: LEMON_DEFINITIONS.into(),
    };
    Ok(respond(format, "lemon-nodes", body, |b| {
        let mut csv = Csv::new(&[
            "cluster",
            "hostname",
            "failures",
            "expected_failures",
            "tail_probability",
            "adjusted_probability",
            "dominant_component",
            "dominant_component_failures",
            "drained",
        ]);
        for l in &b.figures.result.lemons {
            csv.row([
                l.cluster.clone(),
                l.hostname.clone(),
                s(l.failures),
                s(l.expected_failures),
                s(l.tail_probability),
                s(l.adjusted_probability),
                o(l.dominant_component.as_ref()),
                s(l.dominant_component_failures),
                s(l.drained),
            ]);
        }
        csv.finish()
    }))
}
