//! `GET /v1/analytics/job-plan`: MTBF, checkpoint interval and ETTR for a job of N GPUs.

use axum::extract::State;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{WindowQuery, bad};
use crate::analytics::decisions::job_plan::Bounded;
use crate::domain::auth::Permission;
use crate::domain::gpu::GpuGeneration;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, o, respond, s};
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::decisions::{self as qd, JobPlanFigures, JobPlanRequest, Span};

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
    get, path = "/v1/analytics/job-plan", tag = "analytics", params(WindowQuery, JobPlanQuery, FormatQuery),
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
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(q): AppQuery<JobPlanQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    if !(1..=1_000_000).contains(&q.gpus) {
        return Err(bad("gpus must be between 1 and 1,000,000"));
    }
    let checkpoint = minutes(q.checkpoint_minutes, "checkpoint_minutes", 1440.0)?;
    let restart = minutes(q.restart_minutes, "restart_minutes", 10_080.0)?;
    let window = Span::from(wq.window(&caller)?);
    let generation = q.generation.map(|g| g.as_str());
    let figures = qd::job_plan(
        &ctx.read_db,
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
    Ok(respond(format, "job-plan", body, |b| {
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
