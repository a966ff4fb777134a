//! What failures cost (reader role): recovery, top errors, node concentration, job size, stragglers,
//! efficiency, timeline and the published baselines. JSON by default; CSV (RFC 4180, header row)
//! with `Accept: text/csv`.

use std::collections::{BTreeMap, HashMap};

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::ApiContext;
use super::analytics::{Window, WindowQuery, resolve_window};
use super::csv::{Csv, o, respond, s};
use super::extract::{AppQuery, Caller};
use crate::analytics::cost::{
    self as c, CauseShare, ConcentrationTier, ErrorRow, FleetEttr, JobEttr, JobOutcome, LargestJobs, MttfProjection,
    Period, RecoveryFailure, RecoverySummary, SizeBucket, StragglerEpisode, TimelinePoint,
};
use crate::analytics::headline::{NodeService, ratio, round6};
use crate::domain::auth::Permission;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::storage;
use crate::storage::analytics as q;
use crate::storage::cost as cq;

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/analytics/recovery", get(recovery))
        .route("/v1/analytics/top-errors", get(top_errors))
        .route("/v1/analytics/node-concentration", get(node_concentration))
        .route("/v1/analytics/job-size", get(job_size))
        .route("/v1/analytics/stragglers", get(stragglers))
        .route("/v1/analytics/efficiency", get(efficiency))
        .route("/v1/analytics/timeline", get(timeline))
        .route("/v1/analytics/baselines", get(baselines))
}

async fn window(ctx: &ApiContext, wq: &WindowQuery) -> ApiResult<Window> {
    let (from, to) = resolve_window(wq)?;
    Ok(Window {
        from,
        to,
        cluster: wq.cluster.clone(),
        catalog_version: q::catalog_version(&ctx.db).await?,
    })
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_query", message)
}

/// Nodes of the inventory in service at some time in the window.
fn in_service(nodes: &[NodeService], from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<&NodeService> {
    nodes.iter().filter(|n| n.exposure_hours(from, to) > 0.0).collect()
}

/// Node transitions of the window grouped per node, as (time, drained) marks.
async fn node_marks(ctx: &ApiContext, w: &Window) -> ApiResult<BTreeMap<(String, String), Vec<(DateTime<Utc>, bool)>>> {
    let mut marks: BTreeMap<(String, String), Vec<(DateTime<Utc>, bool)>> = BTreeMap::new();
    for t in storage::lifecycle::transitions(&ctx.db, w.from, w.to, w.cluster.as_deref(), None).await? {
        marks
            .entry((t.cluster, t.hostname))
            .or_default()
            .push((t.at, t.state == "drained"));
    }
    Ok(marks)
}

// ---------------------------------------------------------------------------
// Recovery
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RecoveryQuery {
    /// A failure without a recorded resolution counts as drained when its root node was drained within
    /// this many hours of its first signal (default 24).
    pub drain_horizon_hours: Option<f64>,
    /// How many jobs to list, worst ETTR first (default 100, at most 10,000).
    pub jobs_limit: Option<usize>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OutOfService {
    /// Nodes drained at some time in the window.
    pub nodes_drained: u64,
    pub node_hours: f64,
    /// node_hours x the nodes' GPUs (inventory).
    pub gpu_hours: f64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EttrReport {
    pub fleet: FleetEttr,
    /// Worst ETTR first, at most jobs_limit.
    pub jobs: Vec<JobEttr>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RecoveryResponse {
    pub window: Window,
    pub summary: RecoverySummary,
    pub out_of_service: OutOfService,
    pub ettr: EttrReport,
    pub definitions: String,
}

const RECOVERY_DEFINITIONS: &str = "Failures are those whose first signal is in [from, to), with their lifecycle (PATCH \
/v1/failures/{id}). Downtime of a failure: the sum of its recorded recovery phases (detection/hang, resubmission, set-up, \
recomputation; Unicron's GPT-3 example 30 + 9 + 14 + 15 = 68 min), else resolved_at - first signal, else unknown (not in the \
statistics; counted in failures_without_downtime). p90 interpolates linearly between ranks. Phase statistics are over the failures \
that recorded the phase; share_of_phase_minutes = phase minutes / all phase minutes. Transient: resolved by a plain restart \
(resolution transient_restart), else, without a recorded resolution, the catalog's transient flag of the root signal (Unicron: 73%). \
Hardware failures needing a drain: hardware by the effective root cause (post-mortem over automatic) whose resolution is drained, \
else, without one, whose root node was drained (POST /v1/nodes/{cluster}/{hostname}/state or a node_drain signal) within \
drain_horizon_hours of the first signal (Unicron: 37%). GPU-hours lost: downtime hours x GPUs of the job (jobs table, else the \
inventory GPUs of the failure's nodes). Out of service: drained-to-returned time of nodes inside the window. ETTR (effective \
training time ratio, Meta 2024): productive time / available wall-clock time of a job, i.e. (wall-clock - downtime) / wall-clock, \
with wall-clock from the scheduler's start (queueing excluded) to its end, clipped to the window, and downtime that of the failures \
naming the job (capped at its wall-clock). Fleet ETTR weights jobs by GPUs: sum(GPUs x productive) / sum(GPUs x wall-clock). Failures \
of unknown downtime count 0, so an ETTR with failures_without_downtime > 0 is an upper bound.";

struct RecoveryData {
    failures: Vec<RecoveryFailure>,
    summary: RecoverySummary,
    jobs: Vec<JobEttr>,
    fleet: FleetEttr,
    out: OutOfService,
}

async fn recovery_data(ctx: &ApiContext, w: &Window, horizon: Duration) -> ApiResult<RecoveryData> {
    let failures = cq::recovery_failures(&ctx.db, w.from, w.to, w.cluster.as_deref(), horizon).await?;
    let summary = c::recovery(&failures);
    let jobs = cq::jobs_in_window(&ctx.db, w.from, w.to, w.cluster.as_deref()).await?;
    let (rows, fleet) = c::ettr(&jobs, &failures, w.from, w.to);
    let nodes = q::node_service(&ctx.db, w.cluster.as_deref()).await?;
    let gpus: HashMap<(&str, &str), u32> = nodes
        .iter()
        .map(|n| ((n.cluster.as_str(), n.hostname.as_str()), n.gpu_count))
        .collect();
    let (mut drained, mut node_hours, mut gpu_hours) = (0, 0.0, 0.0);
    for ((cl, host), marks) in node_marks(ctx, w).await? {
        let h = c::out_of_service_hours(&marks, w.from, w.to);
        if h > 0.0 {
            drained += 1;
            node_hours += h;
            gpu_hours += h * f64::from(gpus.get(&(cl.as_str(), host.as_str())).copied().unwrap_or(0));
        }
    }
    let out = OutOfService {
        nodes_drained: drained,
        node_hours: round6(node_hours),
        gpu_hours: round6(gpu_hours),
    };
    Ok(RecoveryData {
        failures,
        summary,
        jobs: rows,
        fleet,
        out,
    })
}

fn horizon(hours: Option<f64>) -> ApiResult<Duration> {
    let h = hours.unwrap_or(24.0);
    if !(h.is_finite() && (0.0..=24.0 * 365.0).contains(&h)) {
        return Err(bad("drain_horizon_hours must be between 0 and 8760"));
    }
    Ok(Duration::milliseconds((h * 3_600_000.0) as i64))
}

/// Downtime per failure and by recovery phase, transient share, drains, GPU-hours lost and ETTR.
///
/// CSV (`Accept: text/csv`): one row per failure of the window with its lifecycle and cost.
#[utoipa::path(
    get, path = "/v1/analytics/recovery", tag = "analytics", params(WindowQuery, RecoveryQuery),
    responses(
        (status = 200, description = "Downtime statistics (mean, median, p90) overall and by phase, transient share, share of hardware failures that needed a drain, GPU-hours lost, out-of-service time and ETTR per job and fleet-wide. CSV: one row per failure.",
         content((RecoveryResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window or parameter", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn recovery(
    State(ctx): State<ApiContext>,
    caller: Caller,
    headers: HeaderMap,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(rq): AppQuery<RecoveryQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let limit = rq.jobs_limit.unwrap_or(100);
    if limit > 10_000 {
        return Err(bad("jobs_limit must be at most 10,000"));
    }
    let h = horizon(rq.drain_horizon_hours)?;
    let w = window(&ctx, &wq).await?;
    let mut d = recovery_data(&ctx, &w, h).await?;
    d.jobs.truncate(limit);
    let failures = d.failures;
    let body = RecoveryResponse {
        window: w,
        summary: d.summary,
        out_of_service: d.out,
        ettr: EttrReport {
            fleet: d.fleet,
            jobs: d.jobs,
        },
        definitions: RECOVERY_DEFINITIONS.into(),
    };
    Ok(respond(&headers, "recovery", body, |_| {
        let mut csv = Csv::new(&[
            "failure_id",
            "cluster",
            "job_id",
            "first_at",
            "category",
            "transient",
            "resolution",
            "drained",
            "downtime_minutes",
            "detection_minutes",
            "resubmission_minutes",
            "setup_minutes",
            "recomputation_minutes",
            "gpus",
            "gpu_hours_lost",
        ]);
        for f in &failures {
            let down = f.downtime_minutes();
            let lost = down.zip(f.gpus).map(|(d, g)| round6(d / 60.0 * f64::from(g)));
            csv.row([
                s(f.id),
                f.cluster.clone(),
                o(f.job_id.as_ref()),
                f.first_at.to_rfc3339(),
                f.category.clone(),
                s(f.transient()),
                o(f.resolution.as_ref()),
                s(f.drained()),
                o(down.map(round6)),
                o(f.phases.detection),
                o(f.phases.resubmission),
                o(f.phases.setup),
                o(f.phases.recomputation),
                o(f.gpus),
                o(lost),
            ]);
        }
        csv.finish()
    }))
}

// ---------------------------------------------------------------------------
// Top errors
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TopErrorsQuery {
    /// Rows per view (default 20, 1 to 1000).
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TopErrorsResponse {
    pub window: Window,
    pub failures: u64,
    /// Signals of those failures.
    pub signals: u64,
    /// What the failures were attributed to: their root signal's kind and code.
    pub root_signals: Vec<ErrorRow>,
    /// Everything the failures showed: every signal's kind and code (an NCCL timeout is mostly here).
    pub all_signals: Vec<ErrorRow>,
    pub definitions: String,
}

const TOP_ERRORS_DEFINITIONS: &str = "Over the failures whose first signal is in [from, to). root_signals: failures per kind and \
code of their root signal; share = failures / all failures; severity = the most common severity of those failures. all_signals: \
per kind and code among all the signals folded into the failures; failures = failures holding at least one such signal, share = \
that / all failures (Unicron reports failure types this way: NCCL timeout 10.1%, ECC 5%, NVLink 4.5%, link flapping 3.9%), \
signals and signal_share = signals / all signals; severity from the current classification catalog. The two views differ most for \
symptoms such as NCCL timeouts that surface far from their cause.";

#[derive(Clone, Copy)]
struct ErrorViews<'a> {
    root: &'a [ErrorRow],
    all: &'a [ErrorRow],
}

async fn error_views(
    ctx: &ApiContext,
    w: &Window,
    limit: usize,
) -> ApiResult<(u64, u64, Vec<ErrorRow>, Vec<ErrorRow>)> {
    let (failures, signals) = cq::failure_totals(&ctx.db, w.from, w.to, w.cluster.as_deref()).await?;
    let root = cq::root_errors(&ctx.db, w.from, w.to, w.cluster.as_deref()).await?;
    let root = c::top_errors(
        root.into_iter().map(|(k, code, n, sev)| (k, code, n, n, sev)).collect(),
        failures,
        failures,
        limit,
    );
    let all = cq::signal_errors(&ctx.db, w.from, w.to, w.cluster.as_deref()).await?;
    let catalog = {
        let mut conn = ctx.db.acquire().await?;
        storage::catalog::lock_shared(&mut conn, &ctx.catalog).await?
    };
    let all = c::top_errors(
        all.into_iter()
            .map(|(k, code, f, n)| {
                let sev = catalog.classify(&k, code, None, None).severity.as_str().to_string();
                (k, code, f, n, sev)
            })
            .collect(),
        failures,
        signals,
        limit,
    );
    Ok((failures, signals, root, all))
}

/// The most frequent kinds and codes among failures, by root signal and by all signals.
///
/// CSV: one row per (view, kind, code), `view` = root or all.
#[utoipa::path(
    get, path = "/v1/analytics/top-errors", tag = "analytics", params(WindowQuery, TopErrorsQuery),
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
    headers: HeaderMap,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(tq): AppQuery<TopErrorsQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let limit = tq.limit.unwrap_or(20);
    if !(1..=1000).contains(&limit) {
        return Err(bad(format!("limit {limit} is not in 1..=1000")));
    }
    let w = window(&ctx, &wq).await?;
    let (failures, signals, root, all) = error_views(&ctx, &w, limit).await?;
    let body = TopErrorsResponse {
        window: w,
        failures,
        signals,
        root_signals: root,
        all_signals: all,
        definitions: TOP_ERRORS_DEFINITIONS.into(),
    };
    Ok(respond(&headers, "top-errors", body, |b| {
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

// ---------------------------------------------------------------------------
// Node concentration
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ConcentrationQuery {
    /// Repeat offenders: nodes with at least k failures in the window (default 3).
    pub k: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OffenderFailure {
    pub id: Uuid,
    pub first_at: DateTime<Utc>,
    /// Effective root cause (post-mortem over automatic).
    pub category: String,
    pub component: String,
    pub root_kind: String,
    pub root_code: Option<i64>,
    pub job_id: Option<String>,
    pub resolution: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RepeatOffender {
    pub cluster: String,
    pub hostname: String,
    pub failures: u64,
    /// Drained at the end of the window.
    pub drained: bool,
    /// Its failures in the window, oldest first.
    pub history: Vec<OffenderFailure>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConcentrationResponse {
    pub window: Window,
    /// Inventory nodes in service in the window (plus failing nodes outside the inventory).
    pub nodes: u64,
    pub nodes_with_failures: u64,
    pub failures: u64,
    pub failures_with_root_node: u64,
    /// failures_with_root_node / failures: failures confined to one node or device (Alibaba C4: ~82.5%).
    pub node_attributed_share: f64,
    /// Share of failures on the worst 1%, 5% and 10% of nodes.
    pub tiers: Vec<ConcentrationTier>,
    pub k: u64,
    /// Nodes with k or more failures, worst first: candidates to drain.
    pub repeat_offenders: Vec<RepeatOffender>,
    pub definitions: String,
}

const CONCENTRATION_DEFINITIONS: &str = "A failure belongs to its root-cause node. nodes = inventory nodes in service at some \
time in [from, to), plus failing nodes absent from the inventory. Nodes are ranked by failures (ties by name); the worst p of nodes \
are the first ceil(p x nodes) (at least one) and their share is their failures / failures with a root node. node_attributed_share = \
failures with a root node / all failures (Alibaba C4 reports ~82.5% of errors confined to specific nodes or devices). Repeat \
offenders have k or more failures in the window, with their failures (effective root cause) and whether they are drained at `to`.";

struct ConcentrationData {
    nodes: u64,
    failures: u64,
    with_node: u64,
    ranked: Vec<c::NodeFailureCount>,
    tiers: Vec<ConcentrationTier>,
}

async fn concentration_data(ctx: &ApiContext, w: &Window) -> ApiResult<ConcentrationData> {
    let inventory = q::node_service(&ctx.db, w.cluster.as_deref()).await?;
    let population = in_service(&inventory, w.from, w.to).len() as u64;
    let (per_node, without_node) = q::failures_per_node(&ctx.db, w.from, w.to, w.cluster.as_deref()).await?;
    let per_node: Vec<((String, String), u64)> = per_node.into_iter().collect();
    let with_node: u64 = per_node.iter().map(|(_, n)| n).sum();
    let (ranked, tiers) = c::concentration(&per_node, population, &[0.01, 0.05, 0.10]);
    Ok(ConcentrationData {
        nodes: population.max(ranked.len() as u64),
        failures: with_node + without_node,
        with_node,
        ranked,
        tiers,
    })
}

/// How concentrated failures are on few nodes, and the repeat offenders ("lemon nodes").
///
/// CSV: one row per failing node, worst first, with its cumulative share.
#[utoipa::path(
    get, path = "/v1/analytics/node-concentration", tag = "analytics", params(WindowQuery, ConcentrationQuery),
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
    headers: HeaderMap,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(cq_): AppQuery<ConcentrationQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let k = cq_.k.unwrap_or(3);
    if k == 0 {
        return Err(bad("k must be at least 1"));
    }
    let w = window(&ctx, &wq).await?;
    let d = concentration_data(&ctx, &w).await?;
    let offenders: Vec<(String, String)> = d
        .ranked
        .iter()
        .filter(|r| r.failures >= k)
        .map(|r| (r.cluster.clone(), r.hostname.clone()))
        .collect();
    let mut history: BTreeMap<(String, String), Vec<OffenderFailure>> = BTreeMap::new();
    for f in cq::failures_of_nodes(&ctx.db, w.from, w.to, &offenders).await? {
        history
            .entry((f.cluster, f.root_node))
            .or_default()
            .push(OffenderFailure {
                id: f.id,
                first_at: f.first_at,
                category: f.category,
                component: f.component,
                root_kind: f.root_kind,
                root_code: f.root_code,
                job_id: f.job_id,
                resolution: f.resolution,
            });
    }
    let marks = node_marks(&ctx, &w).await?;
    let repeat_offenders = d
        .ranked
        .iter()
        .filter(|r| r.failures >= k)
        .map(|r| {
            let key = (r.cluster.clone(), r.hostname.clone());
            RepeatOffender {
                cluster: r.cluster.clone(),
                hostname: r.hostname.clone(),
                failures: r.failures,
                drained: marks.get(&key).and_then(|m| m.last()).is_some_and(|m| m.1),
                history: history.remove(&key).unwrap_or_default(),
            }
        })
        .collect();
    let ranked = d.ranked;
    let body = ConcentrationResponse {
        window: w,
        nodes: d.nodes,
        nodes_with_failures: ranked.len() as u64,
        failures: d.failures,
        failures_with_root_node: d.with_node,
        node_attributed_share: round6(ratio(d.with_node, d.failures)),
        tiers: d.tiers,
        k,
        repeat_offenders,
        definitions: CONCENTRATION_DEFINITIONS.into(),
    };
    Ok(respond(&headers, "node-concentration", body, |_| {
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

// ---------------------------------------------------------------------------
// Job size
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobSizeQuery {
    /// The fraction of largest jobs (by GPUs) whose failure rate is reported (default 0.05).
    pub largest_fraction: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Projection {
    /// Failures whose root node is in the inventory.
    pub node_failures: u64,
    /// Node-days in service in the window.
    pub node_days: f64,
    /// node_failures / node_days.
    pub failures_per_node_day: Option<f64>,
    /// GPUs of the in-service nodes / their number.
    pub gpus_per_node: Option<f64>,
    pub sizes: Vec<MttfProjection>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobSizeResponse {
    pub window: Window,
    pub jobs: u64,
    pub buckets: Vec<SizeBucket>,
    pub largest: LargestJobs,
    pub projection: Projection,
    pub definitions: String,
}

const JOB_SIZE_DEFINITIONS: &str = "Jobs are those of the jobs table (PUT /v1/jobs) running at some time in [from, to); wall-clock \
is clipped to the window. Buckets by GPUs: 1-8, 9-64, 65-128, 129-512, 513-1023, 1024+. failures = failures of the window naming \
the job; a job failed when the scheduler says so or at least one failure names it; failure_rate = failed_jobs / jobs; mttf_hours = \
job wall-clock hours / failures. largest: the ceil(fraction x jobs) jobs with the most GPUs (ties: longer first) and the share of \
them that failed (Unicron: 43.4% of the 5% most resource-hungry tasks). Projection (Meta 2024): failures per node-day r = failures \
whose root node is in the inventory / node-days in service; a job of N nodes (GPUs / fleet GPUs per node, rounded up) has \
MTTF = 1 / (N x r) days, given in hours.";

const PROJECTED_SIZES: [u64; 8] = [8, 64, 128, 512, 1024, 4096, 16384, 100_000];

struct JobSizeData {
    jobs: u64,
    buckets: Vec<SizeBucket>,
    largest: LargestJobs,
    projection: Projection,
}

async fn job_size_data(ctx: &ApiContext, w: &Window, fraction: f64) -> ApiResult<JobSizeData> {
    let jobs = cq::jobs_in_window(&ctx.db, w.from, w.to, w.cluster.as_deref()).await?;
    let failures = cq::recovery_failures(&ctx.db, w.from, w.to, w.cluster.as_deref(), Duration::zero()).await?;
    let mut per_job: HashMap<(&str, &str), u64> = HashMap::new();
    for f in &failures {
        if let Some(j) = &f.job_id {
            *per_job.entry((f.cluster.as_str(), j.as_str())).or_default() += 1;
        }
    }
    let outcomes: Vec<JobOutcome> = jobs
        .iter()
        .map(|j| JobOutcome {
            failures: per_job
                .get(&(j.cluster.as_str(), j.job_id.as_str()))
                .copied()
                .unwrap_or(0),
            job: j.clone(),
        })
        .collect();
    let (buckets, largest) = c::job_size(&outcomes, w.from, w.to, fraction);
    let inventory = q::node_service(&ctx.db, w.cluster.as_deref()).await?;
    let serving = in_service(&inventory, w.from, w.to);
    let node_days: f64 = serving.iter().map(|n| n.exposure_hours(w.from, w.to) / 24.0).sum();
    let gpus: u64 = serving.iter().map(|n| u64::from(n.gpu_count)).sum();
    let known: std::collections::HashSet<(&str, &str)> = inventory
        .iter()
        .map(|n| (n.cluster.as_str(), n.hostname.as_str()))
        .collect();
    let (per_node, _) = q::failures_per_node(&ctx.db, w.from, w.to, w.cluster.as_deref()).await?;
    let node_failures: u64 = per_node
        .iter()
        .filter(|((c_, h), _)| known.contains(&(c_.as_str(), h.as_str())))
        .map(|(_, n)| n)
        .sum();
    let rate = (node_days > 0.0).then(|| node_failures as f64 / node_days);
    let gpus_per_node = (!serving.is_empty()).then(|| gpus as f64 / serving.len() as f64);
    let projection = Projection {
        node_failures,
        node_days: round6(node_days),
        failures_per_node_day: rate.map(round6),
        gpus_per_node: gpus_per_node.map(round6),
        sizes: match (rate, gpus_per_node) {
            (Some(r), Some(g)) => c::project_mttf(r, g, &PROJECTED_SIZES),
            _ => Vec::new(),
        },
    };
    Ok(JobSizeData {
        jobs: outcomes.len() as u64,
        buckets,
        largest,
        projection,
    })
}

/// Failure rate and MTTF by job size, the largest jobs' failure rate, and Meta's MTTF projection.
///
/// CSV: one row per size bucket.
#[utoipa::path(
    get, path = "/v1/analytics/job-size", tag = "analytics", params(WindowQuery, JobSizeQuery),
    responses(
        (status = 200, description = "Per size bucket: jobs, failed jobs, failure rate, failures, hours and MTTF; the failure rate of the largest jobs; the projected MTTF by job size. CSV: one row per bucket.",
         content((JobSizeResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window or largest_fraction", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn job_size(
    State(ctx): State<ApiContext>,
    caller: Caller,
    headers: HeaderMap,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(jq): AppQuery<JobSizeQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let fraction = jq.largest_fraction.unwrap_or(0.05);
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(bad("largest_fraction must be in (0, 1]"));
    }
    let w = window(&ctx, &wq).await?;
    let d = job_size_data(&ctx, &w, fraction).await?;
    let body = JobSizeResponse {
        window: w,
        jobs: d.jobs,
        buckets: d.buckets,
        largest: d.largest,
        projection: d.projection,
        definitions: JOB_SIZE_DEFINITIONS.into(),
    };
    Ok(respond(&headers, "job-size", body, |b| {
        let mut csv = Csv::new(&[
            "bucket",
            "jobs",
            "failed_jobs",
            "failure_rate",
            "failures",
            "job_hours",
            "gpu_hours",
            "mttf_hours",
        ]);
        for r in &b.buckets {
            csv.row([
                r.bucket.clone(),
                s(r.jobs),
                s(r.failed_jobs),
                s(r.failure_rate),
                s(r.failures),
                s(r.job_hours),
                s(r.gpu_hours),
                o(r.mttf_hours),
            ]);
        }
        csv.finish()
    }))
}

// ---------------------------------------------------------------------------
// Stragglers
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StragglerQuery {
    /// Slowdown ratio from which a node straggles (default 1.1: 10% slower than the job median).
    pub min_ratio: Option<f64>,
    /// Minutes a signal covers when it sends no duration_seconds (default 10).
    pub sample_minutes: Option<f64>,
    /// Signals of a node closer than this many minutes form one episode (default 30).
    pub gap_minutes: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StragglersResponse {
    pub window: Window,
    pub nodes_in_service: u64,
    pub straggler_nodes: u64,
    /// straggler_nodes / nodes_in_service (MegaScale: ~0.5% of machines).
    pub straggler_node_share: f64,
    pub gpu_hours_wasted: f64,
    pub slowdown_signals: u64,
    /// Slowdown signals with neither step_time_ratio nor throughput_ratio (ignored).
    pub signals_without_ratio: u64,
    pub episodes: Vec<StragglerEpisode>,
    pub definitions: String,
}

const STRAGGLER_DEFINITIONS: &str = "Slowdown signals (kind `slowdown`, sent by the framework per node) in [from, to) carry \
attributes.step_time_ratio (this node's step time / the job median) or attributes.throughput_ratio (inverted), and optionally \
attributes.duration_seconds (the time measured, ending at occurred_at; default sample_minutes). Signals with ratio >= min_ratio form \
episodes per node: intervals less than gap_minutes apart merge. A node straggles when it has an episode; straggler_node_share = \
such nodes / inventory nodes in service in the window (MegaScale, NSDI 2024: ~0.5% of machines). GPU-hours wasted: the whole job \
runs at the straggler's pace, so per signal job GPUs (jobs table, else the signal's job_gpus, else the node's GPUs) x hours covered x \
(1 - 1/ratio).";

struct StragglerData {
    nodes: u64,
    straggling: u64,
    signals: u64,
    without_ratio: u64,
    episodes: Vec<StragglerEpisode>,
}

async fn straggler_data(
    ctx: &ApiContext,
    w: &Window,
    min_ratio: f64,
    sample: f64,
    gap: f64,
) -> ApiResult<StragglerData> {
    let (signals, without_ratio) = cq::slowdowns(&ctx.db, w.from, w.to, w.cluster.as_deref()).await?;
    let episodes = c::straggler_episodes(
        &signals,
        min_ratio,
        sample,
        Duration::milliseconds((gap * 60_000.0) as i64),
    );
    let straggling: std::collections::BTreeSet<(&str, &str)> =
        episodes.iter().map(|e| (e.cluster.as_str(), e.node.as_str())).collect();
    let inventory = q::node_service(&ctx.db, w.cluster.as_deref()).await?;
    let nodes = (in_service(&inventory, w.from, w.to).len() as u64).max(straggling.len() as u64);
    Ok(StragglerData {
        nodes,
        straggling: straggling.len() as u64,
        signals: signals.len() as u64 + without_ratio,
        without_ratio,
        episodes,
    })
}

/// Straggler episodes from slowdown signals: share of nodes that straggle and GPU-hours wasted.
///
/// CSV: one row per episode.
#[utoipa::path(
    get, path = "/v1/analytics/stragglers", tag = "analytics", params(WindowQuery, StragglerQuery),
    responses(
        (status = 200, description = "Straggler episodes per node, the share of nodes that straggle and the GPU-hours wasted. CSV: one row per episode.",
         content((StragglersResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window or parameter", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn stragglers(
    State(ctx): State<ApiContext>,
    caller: Caller,
    headers: HeaderMap,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(sq): AppQuery<StragglerQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let min_ratio = sq.min_ratio.unwrap_or(1.1);
    let sample = sq.sample_minutes.unwrap_or(10.0);
    let gap = sq.gap_minutes.unwrap_or(30.0);
    if !(min_ratio.is_finite() && min_ratio >= 1.0) {
        return Err(bad("min_ratio must be at least 1"));
    }
    if !(sample.is_finite() && sample > 0.0 && sample <= 1440.0)
        || !(gap.is_finite() && (0.0..=10_080.0).contains(&gap))
    {
        return Err(bad("sample_minutes must be in (0, 1440] and gap_minutes in [0, 10080]"));
    }
    let w = window(&ctx, &wq).await?;
    let d = straggler_data(&ctx, &w, min_ratio, sample, gap).await?;
    let wasted: f64 = d.episodes.iter().map(|e| e.gpu_hours_wasted).sum();
    let body = StragglersResponse {
        window: w,
        nodes_in_service: d.nodes,
        straggler_nodes: d.straggling,
        straggler_node_share: round6(ratio(d.straggling, d.nodes)),
        gpu_hours_wasted: round6(wasted),
        slowdown_signals: d.signals,
        signals_without_ratio: d.without_ratio,
        episodes: d.episodes,
        definitions: STRAGGLER_DEFINITIONS.into(),
    };
    Ok(respond(&headers, "stragglers", body, |b| {
        let mut csv = Csv::new(&[
            "cluster",
            "node",
            "start",
            "end",
            "signals",
            "max_ratio",
            "mean_ratio",
            "jobs",
            "gpu_hours_wasted",
        ]);
        for e in &b.episodes {
            csv.row([
                e.cluster.clone(),
                e.node.clone(),
                e.start.to_rfc3339(),
                e.end.to_rfc3339(),
                s(e.signals),
                s(e.max_ratio),
                s(e.mean_ratio),
                e.jobs.join(" "),
                s(e.gpu_hours_wasted),
            ]);
        }
        csv.finish()
    }))
}

// ---------------------------------------------------------------------------
// Efficiency
// ---------------------------------------------------------------------------

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EfficiencyResponse {
    pub window: Window,
    pub incidents: u64,
    /// batch_size, host_to_device_transfer, checkpointing, data_exchange, model, data, other, unspecified.
    pub fine: Vec<CauseShare>,
    /// model-related, data-related, other.
    pub coarse: Vec<CauseShare>,
    pub definitions: String,
}

const EFFICIENCY_DEFINITIONS: &str = "Low-GPU-utilisation incidents: signals of kind `low_utilization` in [from, to) with \
attributes.cause, the ICSE 2024 study's taxonomy: batch_size (improper batch size, 25% in the study), host_to_device_transfer \
(inefficient host-to-GPU data transfer, 28%), checkpointing (model checkpointing, 16%), data_exchange (7%), or the coarse model / \
data. Coarse classes (study: model-related 45%, data-related 46%): model = batch_size, checkpointing, model; data = \
host_to_device_transfer, data_exchange, data; any other cause is `other`, a missing one `unspecified` (both in coarse `other`). \
share = incidents / all incidents; hours = sum of attributes.duration_seconds when sent.";

async fn efficiency_data(ctx: &ApiContext, w: &Window) -> ApiResult<(u64, Vec<CauseShare>, Vec<CauseShare>)> {
    let rows = cq::low_utilization(&ctx.db, w.from, w.to, w.cluster.as_deref()).await?;
    let total = rows.iter().map(|r| r.1).sum();
    let (fine, coarse) = c::efficiency_mix(&rows);
    Ok((total, fine, coarse))
}

/// Low-utilisation incidents by cause (ICSE 2024 taxonomy) and their mix.
///
/// CSV: one row per cause, `level` = fine or coarse.
#[utoipa::path(
    get, path = "/v1/analytics/efficiency", tag = "analytics", params(WindowQuery),
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
    headers: HeaderMap,
    AppQuery(wq): AppQuery<WindowQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let w = window(&ctx, &wq).await?;
    let (incidents, fine, coarse) = efficiency_data(&ctx, &w).await?;
    let body = EfficiencyResponse {
        window: w,
        incidents,
        fine,
        coarse,
        definitions: EFFICIENCY_DEFINITIONS.into(),
    };
    Ok(respond(&headers, "efficiency", body, |b| {
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

// ---------------------------------------------------------------------------
// Timeline
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TimelineQuery {
    /// day (default) or week (ISO weeks, from Monday).
    pub period: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TimelineResponse {
    pub window: Window,
    pub period: String,
    pub points: Vec<TimelinePoint>,
    pub definitions: String,
}

const TIMELINE_DEFINITIONS: &str = "Failures counted at their first signal (UTC), per day or ISO week (Monday to Sunday), by \
effective root-cause category (the post-mortem's when recorded, else the automatic one). Every period touching [from, to) is listed, \
empty ones with zeros; the first and last may be partial.";

/// Failures per day or week by root-cause category.
///
/// CSV: one row per period.
#[utoipa::path(
    get, path = "/v1/analytics/timeline", tag = "analytics", params(WindowQuery, TimelineQuery),
    responses(
        (status = 200, description = "Failures per period and category, empty periods included. CSV: one row per period.",
         content((TimelineResponse = "application/json"), (String = "text/csv"))),
        (status = 400, description = "Invalid window or period", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn timeline(
    State(ctx): State<ApiContext>,
    caller: Caller,
    headers: HeaderMap,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(tq): AppQuery<TimelineQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let name = tq.period.unwrap_or_else(|| "day".into());
    let period = match name.as_str() {
        "day" => Period::Day,
        "week" => Period::Week,
        other => return Err(bad(format!("period '{other}' is not one of day, week"))),
    };
    let w = window(&ctx, &wq).await?;
    if period == Period::Day && w.to - w.from > Duration::days(3660) {
        return Err(bad("a daily timeline covers at most 10 years; use period=week"));
    }
    let counts = cq::daily_categories(&ctx.db, w.from, w.to, w.cluster.as_deref()).await?;
    let points = c::timeline(&counts, period, w.from, w.to);
    let body = TimelineResponse {
        window: w,
        period: name,
        points,
        definitions: TIMELINE_DEFINITIONS.into(),
    };
    Ok(respond(&headers, "timeline", body, |b| {
        let mut csv = Csv::new(&["period", "hardware", "platform", "user", "unknown", "total"]);
        for p in &b.points {
            csv.row([
                s(p.period),
                s(p.hardware),
                s(p.platform),
                s(p.user),
                s(p.unknown),
                s(p.total),
            ]);
        }
        csv.finish()
    }))
}

// ---------------------------------------------------------------------------
// Baselines
// ---------------------------------------------------------------------------

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Baseline {
    pub measure: String,
    /// The published value (a fraction, or in `unit`), when the source gives one number.
    pub published: Option<f64>,
    /// Lower bound when the source gives a range or a bound.
    pub published_low: Option<f64>,
    /// Upper bound when the source gives a range.
    pub published_high: Option<f64>,
    /// fraction, minutes, hours or per_week.
    pub unit: String,
    pub source: String,
    /// This fleet's value for the same measure and window (null: no data to compute it).
    pub fleet: Option<f64>,
    /// What the fleet value was computed from, e.g. "61 of 100 failures".
    pub basis: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BaselinesResponse {
    pub window: Window,
    pub baselines: Vec<Baseline>,
    pub definitions: String,
}

const BASELINE_DEFINITIONS: &str = "Each row is a figure from the literature (shared domain brief) next to this fleet's value for \
the same measure over [from, to), computed as the analysis named in the basis defines it (see /v1/analytics/recovery, top-errors, \
node-concentration, job-size, stragglers, efficiency). Root-cause shares use the effective root cause (post-mortem over automatic). \
Component mapping for ICSE 2023: node = host, power, cooling; GPU = gpu, gpu_memory, nvlink; network = network. Unicron's failure \
types are shares of failures holding a signal of that kind (nvlink also counts XID 74). A published value is a reference from \
other fleets and workloads, not a target.";

const LLAMA3: &str = "Llama 3 pre-training (Meta, 2024)";
const ICSE23: &str = "Quality issues of a deep-learning platform (ICSE 2023)";
const ICSE24: &str = "Low GPU utilisation of deep-learning jobs (ICSE 2024)";
const UNICRON: &str = "Unicron (2023)";

fn row(
    measure: &str,
    published: Option<f64>,
    low: Option<f64>,
    high: Option<f64>,
    unit: &str,
    source: &str,
    fleet: Option<f64>,
    basis: String,
) -> Baseline {
    Baseline {
        measure: measure.into(),
        published,
        published_low: low,
        published_high: high,
        unit: unit.into(),
        source: source.into(),
        fleet: fleet.map(round6),
        basis,
    }
}

fn share(part: u64, total: u64) -> Option<f64> {
    (total > 0).then(|| part as f64 / total as f64)
}

/// Published figures with their source next to this fleet's value for the same measure and window.
///
/// CSV: one row per figure.
#[utoipa::path(
    get, path = "/v1/analytics/baselines", tag = "analytics", params(WindowQuery),
    responses(
        (status = 200, description = "Published figures (Llama 3, ICSE 2023, ICSE 2024, Unicron, Alibaba C4, MegaScale) with their source and the fleet's value. CSV: one row per figure.",
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
    headers: HeaderMap,
    AppQuery(wq): AppQuery<WindowQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let w = window(&ctx, &wq).await?;
    let cl = w.cluster.as_deref();
    let causes = crate::storage::analytics::cause_counts(&ctx.db, w.from, w.to, cl).await?;
    let total: u64 = causes.iter().map(|c_| c_.2).sum();
    let cat = |name: &str| causes.iter().filter(|c_| c_.0 == name).map(|c_| c_.2).sum::<u64>();
    let comp = |names: &[&str]| {
        causes
            .iter()
            .filter(|c_| names.contains(&c_.1.as_str()))
            .map(|c_| c_.2)
            .sum::<u64>()
    };
    let of = |n: u64, d: u64, what: &str| format!("{n} of {d} {what}");
    let mut rows = Vec::new();
    let hw = cat("hardware");
    rows.push(row(
        "hardware share of failures",
        Some(0.78),
        None,
        None,
        "fraction",
        LLAMA3,
        share(hw, total),
        of(hw, total, "failures"),
    ));
    rows.push(row(
        "hardware share of failures",
        Some(0.28),
        None,
        None,
        "fraction",
        ICSE23,
        share(hw, total),
        of(hw, total, "failures"),
    ));
    for (name, p) in [("platform", 2.0 / 7.0), ("user", 3.0 / 7.0)] {
        let n = cat(name);
        rows.push(row(
            &format!("{name} share of failures (hardware : platform : user = 2 : 2 : 3)"),
            Some(round6(p)),
            None,
            None,
            "fraction",
            ICSE23,
            share(n, total),
            of(n, total, "failures"),
        ));
    }
    for (name, p, comps) in [
        ("node (host) share of failures", 0.16, &["host", "power", "cooling"][..]),
        ("GPU share of failures", 0.055, &["gpu", "gpu_memory", "nvlink"][..]),
        ("network share of failures", 0.07, &["network"][..]),
    ] {
        let n = comp(comps);
        rows.push(row(
            name,
            Some(p),
            None,
            None,
            "fraction",
            ICSE23,
            share(n, total),
            of(n, total, "failures"),
        ));
    }
    let symptoms = q::symptom_counts(&ctx.db, w.from, w.to, cl).await?;
    let sym_total: u64 = symptoms.iter().map(|s_| s_.1).sum();
    for (name, p, key) in [
        ("job crash share of failures", 0.55, "job_crash"),
        ("job submission failure share of failures", 0.14, "submission_failure"),
        ("abnormal job behaviour share of failures", 0.13, "abnormal_behavior"),
    ] {
        let n = symptoms.iter().filter(|s_| s_.0 == key).map(|s_| s_.1).sum();
        rows.push(row(
            name,
            Some(p),
            None,
            None,
            "fraction",
            ICSE23,
            share(n, sym_total),
            of(n, sym_total, "failures"),
        ));
    }
    // Unicron's failure types: failures holding at least one signal of the kind.
    let (failures, _) = cq::failure_totals(&ctx.db, w.from, w.to, cl).await?;
    let kinds = cq::failures_by_signal_kind(&ctx.db, w.from, w.to, cl).await?;
    for (name, p, kind) in [
        ("NCCL timeout share of failures", 0.101, "nccl_timeout"),
        ("ECC error share of failures", 0.05, "ecc"),
        ("NVLink error share of failures", 0.045, "nvlink"),
        ("link flapping share of failures", 0.039, "link_flap"),
    ] {
        let n = kinds.iter().find(|k| k.0 == kind).map_or(0, |k| k.1);
        rows.push(row(
            name,
            Some(p),
            None,
            None,
            "fraction",
            UNICRON,
            share(n, failures),
            of(n, failures, "failures"),
        ));
    }
    let rec = recovery_data(&ctx, &w, Duration::hours(24)).await?;
    let sm = &rec.summary;
    rows.push(row(
        "transient share of failures (cleared by a restart)",
        Some(0.73),
        None,
        None,
        "fraction",
        UNICRON,
        share(sm.transient_failures, sm.failures),
        of(sm.transient_failures, sm.failures, "failures"),
    ));
    rows.push(row(
        "share of hardware failures that needed a drain",
        Some(0.37),
        None,
        None,
        "fraction",
        UNICRON,
        share(sm.hardware_failures_drained, sm.hardware_failures),
        of(sm.hardware_failures_drained, sm.hardware_failures, "hardware failures"),
    ));
    rows.push(row(
        "mean downtime per failure",
        Some(68.0),
        None,
        None,
        "minutes",
        "Unicron (2023), one GPT-3 recovery: 30 + 9 + 14 + 15 min",
        sm.downtime_minutes.mean,
        format!("{} failures with a known downtime", sm.downtime_minutes.count),
    ));
    let js = job_size_data(&ctx, &w, 0.05).await?;
    rows.push(row(
        "failure rate of the 5% largest jobs",
        Some(0.434),
        None,
        None,
        "fraction",
        UNICRON,
        (js.largest.jobs > 0).then_some(js.largest.failure_rate),
        of(js.largest.failed_jobs, js.largest.jobs, "jobs"),
    ));
    // A 128-GPU group: failures on inventory nodes per 128 GPUs of exposure.
    let inventory = q::node_service(&ctx.db, cl).await?;
    let gpu_hours: f64 = inventory
        .iter()
        .map(|n| n.exposure_hours(w.from, w.to) * f64::from(n.gpu_count))
        .sum();
    let group_hours = gpu_hours / 128.0;
    let nf = js.projection.node_failures;
    rows.push(row(
        "failures per week of a 128-GPU group",
        None,
        Some(1.0),
        Some(7.0),
        "per_week",
        UNICRON,
        (group_hours > 0.0).then(|| nf as f64 / group_hours * 168.0),
        format!("{nf} failures over {} 128-GPU group-hours", round6(group_hours)),
    ));
    rows.push(row(
        "MTBF of a 128-GPU group",
        None,
        Some(24.0),
        None,
        "hours",
        UNICRON,
        (nf > 0).then(|| group_hours / nf as f64),
        format!("{} group-hours / {nf} failures", round6(group_hours)),
    ));
    let conc = concentration_data(&ctx, &w).await?;
    rows.push(row(
        "share of failures confined to one node or device",
        Some(0.825),
        None,
        None,
        "fraction",
        "Alibaba C4 (2024)",
        share(conc.with_node, conc.failures),
        of(conc.with_node, conc.failures, "failures"),
    ));
    let st = straggler_data(&ctx, &w, 1.1, 10.0, 30.0).await?;
    rows.push(row(
        "share of machines that straggle",
        Some(0.005),
        None,
        None,
        "fraction",
        "MegaScale (NSDI 2024)",
        share(st.straggling, st.nodes),
        of(st.straggling, st.nodes, "nodes"),
    ));
    let (incidents, fine, coarse) = efficiency_data(&ctx, &w).await?;
    let get = |v: &[CauseShare], k: &str| v.iter().find(|r| r.cause == k).map_or(0, |r| r.incidents);
    for (name, p, v, k) in [
        ("model-related share of low-utilisation causes", 0.45, &coarse, "model"),
        ("data-related share of low-utilisation causes", 0.46, &coarse, "data"),
        ("improper batch size share", 0.25, &fine, "batch_size"),
        (
            "host-to-GPU data transfer share",
            0.28,
            &fine,
            "host_to_device_transfer",
        ),
        ("model checkpointing share", 0.16, &fine, "checkpointing"),
        ("data exchange share", 0.07, &fine, "data_exchange"),
    ] {
        let n = get(v, k);
        rows.push(row(
            name,
            Some(p),
            None,
            None,
            "fraction",
            ICSE24,
            share(n, incidents),
            of(n, incidents, "incidents"),
        ));
    }
    let body = BaselinesResponse {
        window: w,
        baselines: rows,
        definitions: BASELINE_DEFINITIONS.into(),
    };
    Ok(respond(&headers, "baselines", body, |b| {
        let mut csv = Csv::new(&[
            "measure",
            "published",
            "published_low",
            "published_high",
            "unit",
            "source",
            "fleet",
            "basis",
        ]);
        for r in &b.baselines {
            csv.row([
                r.measure.clone(),
                o(r.published),
                o(r.published_low),
                o(r.published_high),
                r.unit.clone(),
                r.source.clone(),
                o(r.fleet),
                r.basis.clone(),
            ]);
        }
        csv.finish()
    }))
}
