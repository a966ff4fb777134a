//! `GET /v1/analytics/node-concentration`.

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
use crate::queries::concentration::{self as queries, ConcentrationResponse};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ConcentrationQuery {
    /// Repeat offenders: nodes with at least k failures in the window (default 3).
    #[param(minimum = 1, maximum = 1000000, example = 3)]
    pub k: Option<u64>,
}

/// How concentrated failures are on few nodes, and the repeat offenders ("lemon nodes").
///
/// CSV: one row per failing node, worst first, with its cumulative share.
#[utoipa::path(
    get, path = "/v1/analytics/node-concentration", tag = "analytics", params(WindowQuery, ConcentrationQuery, FormatQuery),
    responses(
        (status = 200, description = "Share of failures on the worst 1%, 5% and 10% of nodes, share attributed to a node, and nodes with k or more failures with their history. CSV: one row per failing node.",
         content((ConcentrationResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window or k", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn node_concentration(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(cq_): AppQuery<ConcentrationQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let k = cq_.k.unwrap_or(3);
    if !(1..=1_000_000).contains(&k) {
        return Err(bad("k must be between 1 and 1,000,000"));
    }
    let (body, ranked) = queries::node_concentration(&ctx.read_db, &wq.window(&caller)?, k).await?;
    Ok(respond(format, "node-concentration", body, |_| {
        let mut csv = Csv::new(&[
            "rank",
            "cluster",
            "hostname",
            "failures",
            "cumulative_share",
            "repeat_offender",
        ]);
        for (i, r) in ranked.iter().enumerate() {
            csv.row([
                s(i + 1),
                r.cluster.clone(),
                r.hostname.clone(),
                s(r.failures),
                s(r.cumulative_share),
                s(r.failures >= k),
            ]);
        }
        csv.finish()
    }))
}
