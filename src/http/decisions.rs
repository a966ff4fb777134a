//! From figures to decisions (reader role): compare two windows or deployments, plan a job of N
//! GPUs, list the lemon nodes. JSON by default; CSV with `Accept: text/csv`. The statistics are in
//! `analytics::decisions`, the use cases in `queries::decisions`; methods in docs/decisions.md.

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::ApiContext;
use super::analytics::WindowQuery;
use super::csv::{Csv, o, respond, s};
use super::extract::{AppQuery, Caller};
use crate::analytics::decisions::compare::RateComparison;
use crate::analytics::decisions::job_plan::Bounded;
use crate::domain::auth::Permission;
use crate::domain::gpu::GpuGeneration;
use crate::domain::taxonomy::Category;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::queries::decisions::{
    self as qd, CompareBy, Comparison, JobPlanFigures, JobPlanRequest, LemonFigures, Span,
};

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/analytics/compare", get(compare))
        .route("/v1/analytics/job-plan", get(job_plan))
        .route("/v1/analytics/lemon-nodes", get(lemon_nodes))
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_query", message)
}

// ---------------------------------------------------------------------------
// Compare
// ---------------------------------------------------------------------------

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

/// Resolves the two windows: B defaults to the last 30 days, A to the window of the same length before B.
pub fn compare_spans(q: &CompareQuery) -> ApiResult<(Span, Span)> {
    let b_to = q.b_to.unwrap_or_else(Utc::now);
    let b_from = q.b_from.unwrap_or(b_to - Duration::days(30));
    let b = span(b_from, b_to, q.b_cluster.clone().or_else(|| q.cluster.clone()), "b")?;
    let a_to = q.a_to.unwrap_or(b.from);
    let a_from = q.a_from.unwrap_or(a_to - (b.to - b.from));
    let a = span(a_from, a_to, q.a_cluster.clone().or_else(|| q.cluster.clone()), "a")?;
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
    get, path = "/v1/analytics/compare", tag = "analytics", params(CompareQuery),
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
    headers: HeaderMap,
    AppQuery(q): AppQuery<CompareQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let (a, b) = compare_spans(&q)?;
    let comparison = qd::compare(&ctx.db, a, b, q.by, ("A", "B")).await?;
    let body = CompareResponse {
        comparison,
        definitions: COMPARE_DEFINITIONS.into(),
    };
    Ok(respond(&headers, "compare", body, |b| {
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

// ---------------------------------------------------------------------------
// Job plan
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobPlanQuery {
    /// GPUs of the job.
    #[param(minimum = 1, maximum = 1000000, example = 16384)]
    pub gpus: u64,
    /// Measure the per-GPU rate on this generation only (default: the whole fleet).
    pub generation: Option<GpuGeneration>,
    /// Minutes to write one checkpoint (default 5).
    #[param(minimum = 0, maximum = 1440, example = 5)]
    pub checkpoint_minutes: Option<f64>,
    /// Minutes from an interruption to computing again (default: the median recorded downtime of the
    /// window's failures, else 53).
    #[param(minimum = 0, maximum = 10080, example = 30)]
    pub restart_minutes: Option<f64>,
}

const JOB_PLAN_DEFINITIONS: &str = "Per-GPU rate: failures of any cause whose root node is an inventory node (of the \
generation) in service in [from, to), over those nodes' GPU-hours, with the exact 95% Poisson (chi-square) interval. Job MTBF \
= per-GPU MTBF / gpus (independent failures); interruptions_per_day = 24 / job MTBF. Checkpoint interval (minutes of compute \
between checkpoints), C = checkpoint_minutes, M = job MTBF: Young sqrt(2 C M); Daly sqrt(2 C M) (1 + sqrt(C / 2M) / 3 + (C / \
2M) / 9) - C for C < 2M, else M. Effective training time ratio at the Daly interval tau, restart R: tau / (M e^(R/M) \
(e^((tau + C)/M) - 1)) (Daly's complete model, exponential failures). Each figure's interval is the figure at the bounds of \
the MTBF interval (all are monotone in M); a null upper bound is unbounded (no failures). Defaults: checkpoint 5 min; \
restart the median recorded downtime of the window's failures (PATCH /v1/failures/{id}), else 53 min (Unicron: 30 + 9 + 14). \
The measured median includes any recomputation phase, which the model also counts as lost work: conservative.";

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobPlanResponse {
    #[serde(flatten)]
    pub figures: JobPlanFigures,
    pub definitions: String,
}

fn minutes(v: Option<f64>, name: &str, max: f64) -> ApiResult<Option<f64>> {
    match v {
        Some(x) if !(x.is_finite() && (0.0..=max).contains(&x)) => {
            Err(bad(format!("{name} must be between 0 and {max}")))
        }
        _ => Ok(v),
    }
}

fn bounded_row(csv: &mut Csv, figure: &str, b: &Bounded) {
    csv.row([figure.to_string(), o(b.value), o(b.lower), o(b.upper)]);
}

/// Plans a job of N GPUs from the fleet's measured failure rate: MTBF, interruptions a day, the
/// optimal checkpoint interval (Young, Daly) and the expected effective training time ratio.
///
/// CSV: one row per figure with its value and 95% bounds.
#[utoipa::path(
    get, path = "/v1/analytics/job-plan", tag = "analytics", params(WindowQuery, JobPlanQuery),
    responses(
        (status = 200, description = "The measured per-GPU failure rate (with its exact 95% interval), the job's MTBF and interruptions per day, the Young and Daly checkpoint intervals and the expected effective training time ratio, each with the interval carried through, and where the checkpoint and restart costs came from. CSV: figure, value, lower, upper.",
         content(
             (JobPlanResponse = "application/json", example = json!({
                 "window": {"from": "2026-10-01T00:00:00Z", "to": "2026-11-24T00:00:00Z", "cluster": null},
                 "generation": "hopper", "nodes": 2048, "gpu_hours": 21233664.0, "failures": 419,
                 "checkpoint_source": "given", "restart_source": "given", "restart_measured_over": 0,
                 "plan": {"gpus": 16384, "checkpoint_minutes": 0.5, "restart_minutes": 3.0, "confidence": 0.95,
                          "failures_per_1000_gpu_days": {"value": 0.47359, "lower": 0.429318, "upper": 0.521179},
                          "mtbf_per_gpu_hours": {"value": 50676.99, "lower": 46049.43, "upper": 55902.21},
                          "job_mtbf_hours": {"value": 3.093079, "lower": 2.810634, "upper": 3.412},
                          "interruptions_per_day": {"value": 7.759259, "lower": 7.033999, "upper": 8.538998},
                          "young_interval_minutes": {"value": 13.622948, "lower": 12.986071, "upper": 14.308039},
                          "daly_interval_minutes": {"value": 13.291654, "lower": 12.654877, "upper": 13.976647},
                          "effective_training_time_ratio": {"value": 0.913493, "lower": 0.908649, "upper": 0.918174}},
                 "definitions": "..."})),
             (String = "text/csv", example = json!("figure,value,lower,upper\r\nfailures_per_1000_gpu_days,0.47359,0.429318,0.521179\r\njob_mtbf_hours,3.093079,2.810634,3.412\r\n"))
         )),
        (status = 400, description = "gpus missing or out of 1..1,000,000, a cost out of range, an unknown generation or an invalid window", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn job_plan(
    State(ctx): State<ApiContext>,
    caller: Caller,
    headers: HeaderMap,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(q): AppQuery<JobPlanQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    if !(1..=1_000_000).contains(&q.gpus) {
        return Err(bad("gpus must be between 1 and 1,000,000"));
    }
    let checkpoint = minutes(q.checkpoint_minutes, "checkpoint_minutes", 1440.0)?;
    let restart = minutes(q.restart_minutes, "restart_minutes", 10_080.0)?;
    let window = Span::from(wq.window()?);
    let generation = q.generation.map(|g| g.as_str());
    let figures = qd::job_plan(
        &ctx.db,
        window,
        JobPlanRequest {
            gpus: q.gpus,
            generation,
            checkpoint_minutes: checkpoint,
            restart_minutes: restart,
        },
    )
    .await?;
    let body = JobPlanResponse {
        figures,
        definitions: JOB_PLAN_DEFINITIONS.into(),
    };
    Ok(respond(&headers, "job-plan", body, |b| {
        let p = &b.figures.plan;
        let mut csv = Csv::new(&["figure", "value", "lower", "upper"]);
        bounded_row(&mut csv, "failures_per_1000_gpu_days", &p.failures_per_1000_gpu_days);
        bounded_row(&mut csv, "mtbf_per_gpu_hours", &p.mtbf_per_gpu_hours);
        bounded_row(&mut csv, "job_mtbf_hours", &p.job_mtbf_hours);
        bounded_row(&mut csv, "interruptions_per_day", &p.interruptions_per_day);
        bounded_row(&mut csv, "young_interval_minutes", &p.young_interval_minutes);
        bounded_row(&mut csv, "daly_interval_minutes", &p.daly_interval_minutes);
        bounded_row(
            &mut csv,
            "effective_training_time_ratio",
            &p.effective_training_time_ratio,
        );
        csv.row([s("gpus"), s(p.gpus), String::new(), String::new()]);
        csv.row([
            s("checkpoint_minutes"),
            s(p.checkpoint_minutes),
            String::new(),
            String::new(),
        ]);
        csv.row([s("restart_minutes"), s(p.restart_minutes), String::new(), String::new()]);
        csv.finish()
    }))
}

// ---------------------------------------------------------------------------
// Lemon nodes
// ---------------------------------------------------------------------------

/// Which failures a lemon-node test counts.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LemonCategory {
    Hardware,
    Platform,
    User,
    Unknown,
    All,
}

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
    get, path = "/v1/analytics/lemon-nodes", tag = "analytics", params(WindowQuery, LemonQuery),
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
    headers: HeaderMap,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(q): AppQuery<LemonQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let alpha = q.alpha.unwrap_or(0.05);
    if !(alpha.is_finite() && (0.000_001..=0.5).contains(&alpha)) {
        return Err(bad("alpha must be between 0.000001 and 0.5"));
    }
    let category = match q.category.unwrap_or(LemonCategory::Hardware) {
        LemonCategory::Hardware => Some(Category::Hardware),
        LemonCategory::Platform => Some(Category::Platform),
        LemonCategory::User => Some(Category::User),
        LemonCategory::Unknown => Some(Category::Unknown),
        LemonCategory::All => None,
    };
    let window = Span::from(wq.window()?);
    let figures = qd::lemons(&ctx.db, window, category, alpha).await?;
    let body = LemonResponse {
        figures,
        definitions: LEMON_DEFINITIONS.into(),
    };
    Ok(respond(&headers, "lemon-nodes", body, |b| {
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
