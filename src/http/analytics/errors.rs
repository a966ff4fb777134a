//! `GET /v1/analytics/top-errors`.

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;

use super::{WindowQuery, bad};
use crate::analytics::cost::ErrorRow;
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, o, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::errors::{self as queries, TopErrorsResponse};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TopErrorsQuery {
    /// Rows per view (default 20, 1 to 1000).
    #[param(minimum = 1, maximum = 1000, example = 20)]
    pub limit: Option<usize>,
}

#[derive(Clone, Copy)]
struct ErrorViews<'a> {
    root: &'a [ErrorRow],
    all: &'a [ErrorRow],
}

/// The most frequent kinds and codes among failures, by root signal and by all signals.
///
/// CSV: one row per (view, kind, code), `view` = root or all.
#[utoipa::path(
    get, path = "/v1/analytics/top-errors", tag = "analytics", params(WindowQuery, TopErrorsQuery, FormatQuery),
    responses(
        (status = 200, description = "Most frequent root-signal and all-signal kinds and codes with their share of failures and severity. CSV: one row per view and kind/code.",
         content((TopErrorsResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window or limit", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn top_errors(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(tq): AppQuery<TopErrorsQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let limit = tq.limit.unwrap_or(20);
    if !(1..=1000).contains(&limit) {
        return Err(bad(format!("limit {limit} is not in 1..=1000")));
    }
    let body = queries::top_errors(&ctx.read_db, &ctx.db, &ctx.catalog, &wq.window(&caller)?, limit).await?;
    Ok(respond(format, "top-errors", body, |b| {
        let mut csv = Csv::new(&[
            "view",
            "kind",
            "code",
            "label",
            "failures",
            "share",
            "signals",
            "signal_share",
            "severity",
        ]);
        let views = ErrorViews {
            root: &b.root_signals,
            all: &b.all_signals,
        };
        for (view, rows) in [("root", views.root), ("all", views.all)] {
            for r in rows {
                csv.row([
                    s(view),
                    r.kind.clone(),
                    o(r.code),
                    r.label.clone(),
                    s(r.failures),
                    s(r.share),
                    s(r.signals),
                    s(r.signal_share),
                    r.severity.clone(),
                ]);
            }
        }
        csv.finish()
    }))
}
