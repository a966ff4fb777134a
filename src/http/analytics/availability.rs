//! `GET /v1/analytics/availability`, `GET /v1/analytics/repair-pipeline` and `GET /v1/fleet/now`.

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use chrono::{Duration, Utc};
use serde::Deserialize;
use utoipa::IntoParams;

use super::{WindowQuery, bad};
use crate::analytics::availability::AvailabilityPeriod;
use crate::domain::auth::Permission;
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::csv::{Csv, FormatQuery, Negotiated, o, respond, s};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::queries::availability::{
    self as queries, AvailabilityBy, AvailabilityResponse, FleetNowResponse, RepairPipelineResponse,
};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AvailabilityQuery {
    /// cluster (default), generation or group (the node's group label; `unlabelled` without one).
    pub by: Option<AvailabilityBy>,
    /// day (default), week (ISO, from Monday) or month (calendar, UTC). Daily: at most 3,660 days.
    pub period: Option<AvailabilityPeriod>,
}

/// The fleet's GPU-hours per period: installed, available, the availability share, and the
/// GPU-hours lost by state (drained, down, in repair) and by cause (the failure's category and
/// component).
///
/// CSV: one row per period, key and cause (a row with empty cause columns holds the period's
/// totals; lost_gpu_hours is then the period's, else the cause's).
#[utoipa::path(
    get, path = "/v1/analytics/availability", tag = "analytics", params(WindowQuery, AvailabilityQuery, FormatQuery),
    responses(
        (status = 200, description = "One point per period and key, periods in order. CSV: per period and key, a totals row then one row per cause.",
         content(
             (AvailabilityResponse = "application/json", example = json!({
                 "window": {"from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z", "cluster": "train-a", "catalog_version": 1, "rebuild": null},
                 "by": "cluster", "period": "day",
                 "points": [{"period": "2026-11-01", "key": "train-a", "installed_gpu_hours": 384.0, "available_gpu_hours": 336.0,
                             "lost_gpu_hours": 48.0, "availability": 0.875, "degraded_gpu_hours": 0.0,
                             "lost_by_state": [{"state": "drained", "gpu_hours": 48.0}, {"state": "down", "gpu_hours": 0.0}, {"state": "in_repair", "gpu_hours": 0.0}],
                             "lost_by_cause": [{"category": "hardware", "component": "gpu", "gpu_hours": 48.0}]}],
                 "definitions": "..."})),
             (String = "text/csv", example = json!("period,key,installed_gpu_hours,available_gpu_hours,availability,degraded_gpu_hours,drained_gpu_hours,down_gpu_hours,in_repair_gpu_hours,category,component,lost_gpu_hours\r\n2026-11-01,train-a,384,336,0.875,0,48,0,0,,,48\r\n2026-11-01,train-a,,,,,,,,hardware,gpu,48\r\n"))
         )),
        (status = 400, description = "Invalid window, `by` or `period`", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn availability(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
    AppQuery(aq): AppQuery<AvailabilityQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let period = aq.period.unwrap_or(AvailabilityPeriod::Day);
    let w = wq.window(&caller)?;
    if period == AvailabilityPeriod::Day && w.to - w.from > Duration::days(3660) {
        return Err(bad(
            "a daily availability covers at most 10 years; use period=week or month",
        ));
    }
    let body = queries::availability(&ctx.read_db, &w, aq.by.unwrap_or(AvailabilityBy::Cluster), period).await?;
    Ok(respond(format, "availability", body, |b| {
        let mut csv = Csv::new(&[
            "period",
            "key",
            "installed_gpu_hours",
            "available_gpu_hours",
            "availability",
            "degraded_gpu_hours",
            "drained_gpu_hours",
            "down_gpu_hours",
            "in_repair_gpu_hours",
            "category",
            "component",
            "lost_gpu_hours",
        ]);
        for p in &b.points {
            let mut row = vec![
                s(p.period),
                s(&p.key),
                s(p.installed_gpu_hours),
                s(p.available_gpu_hours),
                o(p.availability),
                s(p.degraded_gpu_hours),
            ];
            row.extend(p.lost_by_state.iter().map(|x| s(x.gpu_hours)));
            row.extend([String::new(), String::new(), s(p.lost_gpu_hours)]);
            csv.row(row);
            for c in &p.lost_by_cause {
                let mut row = vec![s(p.period), s(&p.key)];
                row.extend(std::iter::repeat_n(String::new(), 7));
                row.extend([s(&c.category), s(&c.component), s(c.gpu_hours)]);
                csv.row(row);
            }
        }
        csv.finish()
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FleetNowQuery {
    /// Restrict to one cluster.
    pub cluster: Option<String>,
    /// The moment to state, RFC 3339 (default: now).
    pub as_of: Option<chrono::DateTime<Utc>>,
    /// The most open repairs listed (default 20).
    #[param(minimum = 0, maximum = 1000, example = 20)]
    pub limit: Option<u32>,
}

/// GPUs out of service now (or at `as_of`), by state and cause, the nodes not in service and the
/// oldest open repairs: what an on-call engineer opens first.
#[utoipa::path(
    get, path = "/v1/fleet/now", tag = "analytics", params(FleetNowQuery),
    responses(
        (status = 200, description = "The fleet's state now", body = FleetNowResponse,
         example = json!({
             "at": "2026-11-10T12:00:00Z", "cluster": "train-a", "installed_gpus": 64, "out_of_service_gpus": 9,
             "by_state": [{"state": "degraded", "nodes": 0, "gpus": 0}, {"state": "drained", "nodes": 1, "gpus": 8},
                          {"state": "down", "nodes": 0, "gpus": 0}, {"state": "in_repair", "nodes": 1, "gpus": 1}],
             "by_cause": [{"state": "drained", "category": "hardware", "component": "gpu", "gpus": 8},
                          {"state": "in_repair", "category": "hardware", "component": "memory", "gpus": 1}],
             "nodes": [{"cluster": "train-a", "hostname": "h100-a-0007", "state": "in_repair", "since": "2026-11-03T09:00:00Z", "gpus_out": 1,
                        "cause": {"failure_id": "6f1c2d3e-0000-4000-8000-000000000001", "category": "hardware", "component": "memory"}}],
             "oldest_repairs": [{"cluster": "train-a", "hostname": "h100-a-0007", "gpu_index": 3, "part": "1650723000123", "reason": "rma",
                                 "ticket": "RMA-4411", "removed_at": "2026-11-03T09:00:00Z", "age_hours": 171.0,
                                 "cause": {"failure_id": "6f1c2d3e-0000-4000-8000-000000000001", "category": "hardware", "component": "memory"}}],
             "definitions": "..."})),
        (status = 400, description = "Invalid `limit` or `as_of`", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query, or the cluster is outside its scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn fleet_now(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(q): AppQuery<FleetNowQuery>,
) -> ApiResult<Json<FleetNowResponse>> {
    caller.require(Permission::Query)?;
    let limit = q.limit.unwrap_or(20);
    if limit > 1000 {
        return Err(bad("limit: at most 1000"));
    }
    let cluster = crate::domain::window::scoped_cluster(caller.cluster.as_deref(), q.cluster)
        .map_err(|e| ApiError::Forbidden(e.to_string()))?;
    Ok(Json(
        queries::fleet_now(
            &ctx.read_db,
            cluster.as_deref(),
            q.as_of.unwrap_or_else(Utc::now),
            limit as usize,
        )
        .await?,
    ))
}

/// The repair pipeline: per incident (a failure that took a node out) the time to detect, to drain,
/// in repair and to return; their median, p90 and max by cause and by cluster; the stuck incidents.
///
/// CSV: one row per incident.
#[utoipa::path(
    get, path = "/v1/analytics/repair-pipeline", tag = "analytics", params(WindowQuery, FormatQuery),
    responses(
        (status = 200, description = "Stage statistics by cause and cluster, the incidents and the stuck ones. CSV: one row per incident.",
         content(
             (RepairPipelineResponse = "application/json", example = json!({
                 "window": {"from": "2026-11-01T00:00:00Z", "to": "2026-11-10T00:00:00Z", "cluster": "train-a", "catalog_version": 1, "rebuild": null},
                 "by_cause": [{"key": "hardware/gpu", "incidents": 1, "open": 0,
                               "detect_hours": {"count": 1, "median": 2.0, "p90": 2.0, "max": 2.0},
                               "drain_hours": {"count": 1, "median": 2.0, "p90": 2.0, "max": 2.0},
                               "repair_hours": {"count": 1, "median": 24.0, "p90": 24.0, "max": 24.0},
                               "return_hours": {"count": 1, "median": 48.0, "p90": 48.0, "max": 48.0}}],
                 "by_cluster": [],
                 "incidents": [{"cluster": "train-a", "hostname": "h100-a-0007",
                                "cause": {"failure_id": "6f1c2d3e-0000-4000-8000-000000000001", "category": "hardware", "component": "gpu"},
                                "first_at": "2026-11-01T10:00:00Z", "out_at": "2026-11-01T12:00:00Z", "returned_at": "2026-11-03T12:00:00Z",
                                "detect_hours": 2.0, "drain_hours": 2.0, "repair_hours": 24.0, "return_hours": 48.0, "open_hours": null, "stuck": false}],
                 "stuck": [], "definitions": "..."})),
             (String = "text/csv", example = json!("cluster,hostname,failure_id,category,component,first_at,out_at,returned_at,detect_hours,drain_hours,repair_hours,return_hours,open_hours,stuck\r\ntrain-a,h100-a-0007,6f1c2d3e-0000-4000-8000-000000000001,hardware,gpu,2026-11-01T10:00:00+00:00,2026-11-01T12:00:00+00:00,2026-11-03T12:00:00+00:00,2,2,24,48,,false\r\n"))
         )),
        (status = 400, description = "Invalid window", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn repair_pipeline(
    State(ctx): State<ApiContext>,
    caller: Caller,
    format: Negotiated,
    AppQuery(wq): AppQuery<WindowQuery>,
) -> ApiResult<Response> {
    caller.require(Permission::Query)?;
    let w = wq.window(&caller)?;
    let body = queries::repair_pipeline(&ctx.read_db, &w).await?;
    Ok(respond(format, "repair-pipeline", body, |b| {
        let mut csv = Csv::new(&[
            "cluster",
            "hostname",
            "failure_id",
            "category",
            "component",
            "first_at",
            "out_at",
            "returned_at",
            "detect_hours",
            "drain_hours",
            "repair_hours",
            "return_hours",
            "open_hours",
            "stuck",
        ]);
        for i in &b.incidents {
            csv.row([
                s(&i.cluster),
                s(&i.hostname),
                s(i.cause.failure_id),
                s(&i.cause.category),
                s(&i.cause.component),
                s(i.first_at.to_rfc3339()),
                s(i.out_at.to_rfc3339()),
                o(i.returned_at.map(|t| t.to_rfc3339())),
                s(i.detect_hours),
                o(i.drain_hours),
                o(i.repair_hours),
                o(i.return_hours),
                o(i.open_hours),
                s(i.stuck),
            ]);
        }
        csv.finish()
    }))
}
