//! `GET /v1/analytics/efficiency`.

use axum::extract::State;
use axum::response::Response;

use super::WindowQuery;
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::efficiency::{self as queries, EfficiencyResponse};

/// Low-utilisation incidents by cause (ICSE 2024 taxonomy) and their mix.
///
/// CSV: one row per cause, `level` = fine or coarse.
#[utoipa::path(
    get, path = "/v1/analytics/efficiency", tag = "analytics", params(WindowQuery, FormatQuery),
    responses(
        (status = 200, description = "Incidents, fine and coarse cause mix with shares and hours. CSV: one row per level and cause.",
         content((EfficiencyResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn efficiency(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let body = queries::efficiency(&ctx.read_db, &wq.window(&caller)?).await?;
    Ok(respond(format, "efficiency", body, |b| {
        let mut csv = Csv::new(&["level", "cause", "coarse", "incidents", "share", "hours"]);
        for (level, rows) in [("fine", &b.fine), ("coarse", &b.coarse)] {
            for r in rows {
                csv.row([
                    s(level),
                    r.cause.clone(),
                    r.coarse.clone(),
                    s(r.incidents),
                    s(r.share),
                    s(r.hours),
                ]);
            }
        }
        csv.finish()
    }))
}
