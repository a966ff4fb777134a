//! `GET /v1/analytics/compare`: two windows or two deployments, the exact rate ratio B/A.

use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::bad;
use crate::analytics::decisions::compare::RateComparison;
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, o, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::decisions::{self as qd, CompareBy, Comparison, Span};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CompareQuery {
    /// Start of window A (inclusive, RFC 3339). Default: a_to minus the length of B.
    pub a_from: Option<DateTime<Utc>>,
    /// End of window A (exclusive). Default: b_from (A is the window before B).
    pub a_to: Option<DateTime<Utc>>,
    /// Start of window B (inclusive). Default: b_to minus 30 days.
    pub b_from: Option<DateTime<Utc>>,
    /// End of window B (exclusive). Default: now.
    pub b_to: Option<DateTime<Utc>>,
    /// Restrict both sides to one cluster.
    pub cluster: Option<String>,
    /// Cluster of side A (overrides `cluster`): compare two deployments.
    pub a_cluster: Option<String>,
    /// Cluster of side B (overrides `cluster`).
    pub b_cluster: Option<String>,
    /// Also compare per GPU generation, cluster, inventory group or root-cause category.
    pub by: Option<CompareBy>,
}

const COMPARE_DEFINITIONS: &str = "Failures (effective root cause: post-mortem over automatic) whose first signal is in each \
window, over the GPU-days of the window's inventory (sum of GPUs x days in service). rate = failures / GPU-days x 1,000. \
rate_ratio = rate_B / rate_A. Interval: conditional binomial method for two Poisson rates: given n = a + b, b ~ Binomial(n, \
p); Clopper-Pearson 95% interval on p = b / n, mapped to p / (1 - p) x GPU-days_A / GPU-days_B. p_value: exact two-sided \
binomial test of p0 = GPU-days_B / (GPU-days_A + GPU-days_B), the smaller tail doubled (consistent with the interval: \
significant exactly when it excludes 1). No failures in A: lower bound only (rate_ratio and ratio_upper null); none in B: \
ratio 0 with an upper bound. Assumes independent failures at a constant rate within each window; see docs/decisions.md.";

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CompareResponse {
    #[serde(flatten)]
    pub comparison: Comparison,
    pub definitions: String,
}

fn span(from: DateTime<Utc>, to: DateTime<Utc>, cluster: Option<String>, side: &str) -> ApiResult<Span> {
    if from > to {
        return Err(bad(format!("{side}_from ({from}) is after {side}_to ({to})")));
    }
    Ok(Span { from, to, cluster })
}

/// Resolves the two windows: B defaults to the last 30 days, A to the window of the same length
/// before B. Each side's cluster is scoped like every window ([`Caller::read_cluster`]).
pub fn compare_spans(q: &CompareQuery, caller: &Caller) -> ApiResult<(Span, Span)> {
    let b_to = q.b_to.unwrap_or_else(Utc::now);
    let b_from = q
        .b_from
        .unwrap_or(b_to - Duration::days(crate::domain::window::DEFAULT_WINDOW_DAYS));
    let b_cluster = caller.read_cluster(q.b_cluster.clone().or_else(|| q.cluster.clone()))?;
    let b = span(b_from, b_to, b_cluster, "b")?;
    let a_to = q.a_to.unwrap_or(b.from);
    let a_from = q.a_from.unwrap_or(a_to - (b.to - b.from));
    let a_cluster = caller.read_cluster(q.a_cluster.clone().or_else(|| q.cluster.clone()))?;
    let a = span(a_from, a_to, a_cluster, "a")?;
    Ok((a, b))
}

const COMPARISON_CSV: [&str; 14] = [
    "scope",
    "key",
    "a_failures",
    "a_gpu_days",
    "a_rate_per_1000_gpu_days",
    "b_failures",
    "b_gpu_days",
    "b_rate_per_1000_gpu_days",
    "rate_ratio",
    "ratio_lower",
    "ratio_upper",
    "p_value",
    "significant",
    "verdict",
];

fn comparison_row(csv: &mut Csv, scope: &str, key: &str, c: &RateComparison) {
    csv.row([
        scope.to_string(),
        key.to_string(),
        s(c.a_failures),
        s(c.a_gpu_days),
        o(c.a_rate_per_1000_gpu_days),
        s(c.b_failures),
        s(c.b_gpu_days),
        o(c.b_rate_per_1000_gpu_days),
        o(c.rate_ratio),
        o(c.ratio_lower),
        o(c.ratio_upper),
        o(c.p_value),
        s(c.significant),
        c.verdict.clone(),
    ]);
}

/// Compares the failure rate of window (or deployment) B with A: rate ratio B / A, exact 95% interval,
/// p-value and a verdict, overall, per category and per group of `by`.
///
/// CSV: one row per comparison (scope overall, category or the `by` dimension).
#[utoipa::path(
    get, path = "/v1/analytics/compare", tag = "analytics", params(CompareQuery, FormatQuery),
    responses(
        (status = 200, description = "Failures, GPU-days and failures per 1,000 GPU-days of each side, the rate ratio B / A with its exact 95% interval (conditional binomial), the two-sided p-value and a plain-language verdict: overall, per root-cause category, and per group of `by`. CSV: one row per comparison.",
         content(
             (CompareResponse = "application/json", example = json!({
                 "a": {"from": "2026-10-02T00:00:00Z", "to": "2026-11-01T00:00:00Z", "cluster": null},
                 "b": {"from": "2026-11-01T00:00:00Z", "to": "2026-12-01T00:00:00Z", "cluster": null},
                 "by": null, "confidence": 0.95,
                 "overall": {"a_failures": 10, "a_gpu_days": 100.0, "a_rate_per_1000_gpu_days": 100.0,
                             "b_failures": 2, "b_gpu_days": 100.0, "b_rate_per_1000_gpu_days": 20.0,
                             "rate_ratio": 0.2, "ratio_lower": 0.021307, "ratio_upper": 0.938502, "p_value": 0.038574,
                             "significant": true,
                             "verdict": "B fails 80% less often than A (rate ratio 0.20, 95% CI 0.02 to 0.94); the difference is unlikely to be chance, p = 0.039."},
                 "groups": [], "by_category": [], "a_failures_without_node": 0, "b_failures_without_node": 0,
                 "definitions": "..."})),
             (String = "text/csv", example = json!("scope,key,a_failures,a_gpu_days,a_rate_per_1000_gpu_days,b_failures,b_gpu_days,b_rate_per_1000_gpu_days,rate_ratio,ratio_lower,ratio_upper,p_value,significant,verdict\r\noverall,,10,100,100,2,100,20,0.2,0.021307,0.938502,0.03857421875,true,\"B fails 80% less often than A (rate ratio 0.20, 95% CI 0.02 to 0.94); the difference is unlikely to be chance, p = 0.039.\"\r\n"))
         )),
        (status = 400, description = "Invalid window (from after to) or `by`", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn compare(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(q): AppQuery<CompareQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let (a, b) = compare_spans(&q, &caller)?;
    let comparison = qd::compare(&ctx.read_db, a, b, q.by, ("A", "B")).await?;
    let body = CompareResponse {
        comparison,
        definitions: COMPARE_DEFINITIONS.into(),
    };
    Ok(respond(format, "compare", body, |b| {
        let c = &b.comparison;
        let mut csv = Csv::new(&COMPARISON_CSV);
        comparison_row(&mut csv, "overall", "", &c.overall);
        for k in &c.by_category {
            comparison_row(&mut csv, "category", &k.key, &k.comparison);
        }
        if let Some(by) = c.by.filter(|b| *b != CompareBy::Category) {
            for k in &c.groups {
                comparison_row(&mut csv, by.as_str(), &k.key, &k.comparison);
            }
        }
        csv.finish()
    }))
}
