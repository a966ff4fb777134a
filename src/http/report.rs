//! The reliability report (reader role): HTML with inline SVG, an HTML fragment for the dashboard,
//! or Markdown, chosen by `format` or the Accept header.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::Duration;
use serde::Deserialize;
use utoipa::IntoParams;

use super::ApiContext;
use super::analytics::WindowQuery;
use super::caller::Caller;
use super::extract::AppQuery;
use crate::domain::auth::Permission;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::report;

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/reports/reliability", get(reliability))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// `html` (a whole document), `fragment` (the report's `<article>`, for embedding) or `markdown`.
    /// Without it the Accept header decides: `text/markdown` gives Markdown, anything else HTML.
    #[param(value_type = Option<ReportFormatName>)]
    pub format: Option<String>,
    /// GPUs of the job in the fleet-health job-plan card (default 16,384).
    #[param(minimum = 1, maximum = 1000000, example = 16384)]
    pub job_gpus: Option<u64>,
}

/// The schema of the report's `format` parameter.
pub struct ReportFormatName;

impl utoipa::PartialSchema for ReportFormatName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(["html", "fragment", "markdown"]))
            .into()
    }
}
impl utoipa::ToSchema for ReportFormatName {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    Html,
    Fragment,
    Markdown,
}

/// The format asked for: the `format` parameter wins; else the first of text/markdown or text/html
/// in Accept (HTML when neither is named).
pub fn negotiate(format: Option<&str>, accept: Option<&str>) -> ApiResult<ReportFormat> {
    match format {
        Some("html") => return Ok(ReportFormat::Html),
        Some("fragment") => return Ok(ReportFormat::Fragment),
        Some("markdown" | "md") => return Ok(ReportFormat::Markdown),
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_query",
                format!("format '{other}' is not one of html, fragment, markdown"),
            ));
        }
        None => {}
    }
    let first = accept
        .unwrap_or_default()
        .split(',')
        .map(|m| m.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .find(|m| m == "text/markdown" || m == "text/html");
    Ok(if first.as_deref() == Some("text/markdown") {
        ReportFormat::Markdown
    } else {
        ReportFormat::Html
    })
}

/// Longest window a report covers (the timeline stays at most ~130 monthly points).
const MAX_WINDOW_DAYS: i64 = 3660;

/// The reliability report: summary figures with their definitions, failure mix by GPU generation,
/// MTBF per 128-GPU group, root causes and the hardware split, failures over time, downtime by
/// recovery phase, worst nodes, fleet health (this window against the previous one, lemon nodes,
/// a job plan for `job_gpus` GPUs) and this fleet beside the published baselines. Self-contained: no
/// scripts, fonts or external requests. A token scoped to a cluster sees only that cluster.
#[utoipa::path(
    get, path = "/v1/reports/reliability", tag = "reports", params(WindowQuery, ReportQuery),
    responses(
        (status = 200, description = "The report: a self-contained HTML document (default), an HTML fragment (`format=fragment`) or Markdown tables (`Accept: text/markdown` or `format=markdown`)",
            content((String = "text/html"), (String = "text/markdown"))),
        (status = 400, description = "Invalid window (from after to, longer than 10 years), format or job_gpus", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query, or the cluster is outside the token's scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn reliability(
    State(ctx): State<ApiContext>,
    caller: Caller,
    headers: HeaderMap,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(rq): AppQuery<ReportQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let format = negotiate(
        rq.format.as_deref(),
        headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()),
    )?;
    let job_gpus = rq.job_gpus.unwrap_or(report::health::DEFAULT_JOB_GPUS);
    if !(1..=1_000_000).contains(&job_gpus) {
        return Err(ApiError::bad_request(
            "invalid_query",
            "job_gpus must be between 1 and 1,000,000",
        ));
    }
    let w = wq.window(&caller)?;
    if w.to - w.from > Duration::days(MAX_WINDOW_DAYS) {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("the window is longer than {MAX_WINDOW_DAYS} days"),
        ));
    }
    let data = report::health::gather_with_health(&ctx.read_db, &w, job_gpus).await?;
    let (body, content_type) = match format {
        ReportFormat::Html => (report::html::document(&data), "text/html; charset=utf-8"),
        ReportFormat::Fragment => (report::html::fragment(&data), "text/html; charset=utf-8"),
        ReportFormat::Markdown => (report::markdown::render(&data), "text/markdown; charset=utf-8"),
    };
    let mut res = body.into_response();
    res.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    res.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_parameter_wins_then_the_first_named_type() {
        assert_eq!(negotiate(None, None).unwrap(), ReportFormat::Html);
        assert_eq!(negotiate(None, Some("text/markdown")).unwrap(), ReportFormat::Markdown);
        assert_eq!(
            negotiate(None, Some("text/html, text/markdown;q=0.9")).unwrap(),
            ReportFormat::Html
        );
        assert_eq!(
            negotiate(None, Some("text/markdown; charset=utf-8, text/html")).unwrap(),
            ReportFormat::Markdown
        );
        assert_eq!(negotiate(None, Some("*/*")).unwrap(), ReportFormat::Html);
        assert_eq!(
            negotiate(Some("fragment"), Some("text/markdown")).unwrap(),
            ReportFormat::Fragment
        );
        assert!(negotiate(Some("pdf"), None).is_err());
    }
}
