//! `GET /v1/analytics/baselines`: the published figures beside this fleet's values.

use axum::extract::State;
use axum::response::Response;

use super::WindowQuery;
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, o, respond};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::baselines::{self as queries, BaselinesResponse};

/// Published figures with their source next to this fleet's value for the same measure and window.
///
/// CSV: one row per figure.
#[utoipa::path(
    get, path = "/v1/analytics/baselines", tag = "analytics", params(WindowQuery, FormatQuery),
    responses(
        (status = 200, description = "Published figures (Llama 3, ICSE 2023, ICSE 2024, Unicron, Alibaba C4, MegaScale) with their source, the fleet's value and how it is measured. CSV: one row per figure.",
         content((BaselinesResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn baselines(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let body = queries::baselines(&ctx.read_db, &wq.window(&caller)?).await?;
    Ok(respond(format, "baselines", body, |b| {
        let mut csv = Csv::new(&[
            "measure",
            "published",
            "published_low",
            "published_high",
            "unit",
            "source",
            "fleet",
            "basis",
            "definition",
        ]);
        for r in &b.baselines {
            csv.row([
                r.measure.clone(),
                o(r.published),
                o(r.published_low),
                o(r.published_high),
                r.unit.as_str().into(),
                r.source.clone(),
                o(r.fleet),
                r.basis.clone(),
                r.definition.clone(),
            ]);
        }
        csv.finish()
    }))
}
