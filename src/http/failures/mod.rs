//! `GET /v1/failures` and `GET /v1/failures/{id}`; the lifecycle routes (PATCH, history) in [`lifecycle`].

pub mod import;
pub mod lifecycle;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::ApiContext;
use super::caller::Caller;
use super::extract::{AppPath, AppQuery};
use crate::domain::auth::{Permission, hex};
use crate::domain::taxonomy::{Category, Component, RootCause};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::storage;
use crate::storage::failure_queries::{FailureFilter, FailureRow};

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/failures", get(list_failures))
        .route("/v1/failures/{id}", get(get_failure))
        .merge(lifecycle::router())
        .merge(import::router())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FailureQuery {
    /// Failures whose first signal is at or after this time.
    pub from: Option<DateTime<Utc>>,
    /// ... and before this time.
    pub to: Option<DateTime<Utc>>,
    pub cluster: Option<String>,
    pub category: Option<Category>,
    pub component: Option<Component>,
    /// GPU generation of the root-cause node.
    pub generation: Option<String>,
    /// Any node involved.
    pub node: Option<String>,
    pub job: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FailureView {
    pub id: Uuid,
    pub cluster: String,
    pub job_id: Option<String>,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
    pub nodes: Vec<String>,
    pub root_node: Option<String>,
    /// Generation of the root-cause node (inventory, else the root signal's GPU model).
    #[schema(value_type = crate::domain::gpu::GpuGeneration)]
    pub gpu_generation: String,
    pub root_cause: RootCause,
    #[schema(value_type = crate::classify::Severity)]
    pub severity: String,
    /// Usually cleared by restarting the job.
    pub transient: bool,
    #[schema(value_type = crate::classify::Action)]
    pub action: String,
    /// Catalog rule that classified the root signal (null: no rule matched, or the text decided).
    pub rule_id: Option<String>,
    /// Why the root signal got its root cause: "rule xid-79", "terms: power supply(power) + redundancy lost(failure)".
    pub explanation: String,
    /// The root cause was given by the sender.
    pub explicit_cause: bool,
    #[schema(value_type = Option<crate::domain::taxonomy::Symptom>)]
    pub symptom: Option<String>,
    pub signal_count: i32,
    pub root_signal: Uuid,
    pub root_kind: String,
    pub root_code: Option<i64>,
    pub catalog_version: i64,
}

impl From<FailureRow> for FailureView {
    fn from(r: FailureRow) -> Self {
        FailureView {
            id: r.id,
            cluster: r.cluster,
            job_id: r.job_id,
            first_at: r.first_at,
            last_at: r.last_at,
            nodes: r.nodes,
            root_node: r.root_node,
            gpu_generation: r.gpu_generation,
            root_cause: RootCause {
                category: Category::parse(&r.category).unwrap_or(Category::Unknown),
                component: Component::parse(&r.component).unwrap_or(Component::Unknown),
            },
            severity: r.severity,
            transient: r.transient,
            action: r.action,
            rule_id: r.rule_id,
            explanation: r.explanation,
            explicit_cause: r.explicit_cause,
            symptom: r.symptom,
            signal_count: r.signal_count,
            root_signal: r.root_signal,
            root_kind: r.root_kind,
            root_code: r.root_code,
            catalog_version: r.catalog_version,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FailurePage {
    pub failures: Vec<FailureView>,
    pub next_cursor: Option<String>,
}

/// List failures, newest first.
#[utoipa::path(
    get, path = "/v1/failures", tag = "failures", params(FailureQuery),
    responses(
        (status = 200, description = "One page of failures, newest first", body = FailurePage,
         example = json!({"failures": [{
             "id": "2ff5cc70-0db0-5d6b-88f3-b9119f34429f", "cluster": "train-a", "job_id": "job-000966",
             "first_at": "2026-11-02T10:15:00Z", "last_at": "2026-11-02T10:15:00Z",
             "nodes": ["h100-a-0138"], "root_node": "h100-a-0138", "gpu_generation": "hopper",
             "root_cause": {"category": "hardware", "component": "gpu"}, "severity": "critical", "transient": false,
             "action": "reboot_node", "rule_id": "xid-79", "explanation": "rule xid-79", "explicit_cause": false,
             "symptom": null, "signal_count": 1, "root_signal": "0d9e4c1a-6f3b-4a53-9b8e-3c2f1d7a5e10",
             "root_kind": "xid", "root_code": 79, "catalog_version": 1}],
             "next_cursor": null})),
        (status = 400, description = "Invalid filter, limit or cursor", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_failures(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(q): AppQuery<FailureQuery>,
) -> ApiResult<Json<FailurePage>> {
    caller.require(Permission::Query)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("limit {limit} is not in 1..=1000"),
        ));
    }
    let before = q.cursor.as_deref().map(decode_cursor).transpose()?;
    let filter = FailureFilter {
        from: q.from,
        to: q.to,
        cluster: caller.read_cluster(q.cluster)?,
        category: q.category.map(|c| c.as_str().to_string()),
        component: q.component.map(|c| c.as_str().to_string()),
        generation: q.generation,
        node: q.node,
        job: q.job,
        before,
        limit: limit + 1,
    };
    let mut rows = storage::failure_queries::list(&ctx.read_db, &filter).await?;
    let next_cursor = if rows.len() as i64 > limit {
        rows.truncate(limit as usize);
        rows.last()
            .map(|r| hex(format!("{}\0{}", r.first_at.to_rfc3339(), r.id).as_bytes()))
    } else {
        None
    };
    Ok(Json(FailurePage {
        failures: rows.into_iter().map(Into::into).collect(),
        next_cursor,
    }))
}

fn decode_cursor(cursor: &str) -> ApiResult<(DateTime<Utc>, Uuid)> {
    let bad = || ApiError::bad_request("invalid_query", "cursor is not one this server issued");
    let bytes = crate::domain::auth::unhex(cursor).ok_or_else(bad)?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (t, id) = text.split_once('\0').ok_or_else(bad)?;
    Ok((
        DateTime::parse_from_rfc3339(t).map_err(|_| bad())?.with_timezone(&Utc),
        Uuid::try_parse(id).map_err(|_| bad())?,
    ))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SignalView {
    pub id: Uuid,
    pub occurred_at: DateTime<Utc>,
    pub node: Option<String>,
    pub gpu_index: Option<i32>,
    pub job_id: Option<String>,
    pub kind: String,
    pub code: Option<i64>,
    #[schema(value_type = Option<crate::domain::taxonomy::Symptom>)]
    pub symptom: Option<String>,
    pub message: Option<String>,
    /// How the current catalog classifies this signal.
    pub root_cause: RootCause,
    pub secondary: bool,
    pub severity: String,
    pub rule_id: Option<String>,
    /// Why this signal got its root cause (rule id or the lexicon terms that decided).
    pub explanation: String,
    #[schema(value_type = Object)]
    pub attributes: serde_json::Value,
    /// Identical signals folded into this one (a burst), and when the last of them occurred.
    pub repeat_count: i32,
    pub last_occurred_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FailureDetail {
    pub failure: FailureView,
    /// The GPU the root signal named and the part placed there at the failure's time (absent when
    /// the root signal named no GPU; `part` absent when no placement covers it).
    pub root_gpu: Option<RootGpuView>,
    /// The failure's signals in time order (at most 1,000).
    pub signals: Vec<SignalView>,
    pub signals_truncated: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RootGpuView {
    pub gpu_index: Option<i32>,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    /// The part's serial (else UUID): see `GET /v1/gpus/{part}`.
    pub part: Option<String>,
}

/// One failure with its signals.
#[utoipa::path(
    get, path = "/v1/failures/{id}", tag = "failures",
    params(("id" = Uuid, Path, description = "Failure id")),
    responses(
        (status = 200, description = "The failure and its signals, each with its classification", body = FailureDetail),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
        (status = 404, description = "No failure with this id (failure ids change when late signals re-fold it), or it is of a cluster outside the token's scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_failure(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(id): AppPath<String>,
) -> ApiResult<Json<FailureDetail>> {
    caller.require(Permission::Query)?;
    let id = Uuid::try_parse(&id)
        .map_err(|e| ApiError::bad_request("invalid_path", format!("failure id '{id}' is not a UUID: {e}")))?;
    // A failure of another cluster is "not found" for a scoped token: its id reveals nothing.
    let row = storage::failure_queries::get(&ctx.db, id)
        .await?
        .filter(|r| caller.may_read(&r.cluster))
        .ok_or_else(|| ApiError::NotFound(format!("no failure {id}")))?;
    let mut conn = ctx.db.acquire().await?;
    let catalog = crate::ingest::catalog::lock_shared(&mut conn, &ctx.catalog).await?;
    drop(conn);
    let signals =
        storage::failure_queries::signals(&ctx.db, &row.cluster, row.first_at, row.last_at, &row.signal_ids, 1000)
            .await?;
    let truncated = row.signal_ids.len() > signals.len();
    let signals = signals
        .into_iter()
        .map(|s| {
            let explicit = match (
                s.rc_category.as_deref().and_then(Category::parse),
                s.rc_component.as_deref().and_then(Component::parse),
            ) {
                (Some(a), Some(b)) => RootCause::new(a, b).ok(),
                _ => None,
            };
            let c = catalog.classify(&s.kind, s.code, s.message.as_deref(), explicit);
            SignalView {
                id: s.id,
                occurred_at: s.occurred_at,
                node: s.node,
                gpu_index: s.gpu_index,
                job_id: s.job_id,
                kind: s.kind,
                code: s.code,
                symptom: s.symptom,
                message: s.message,
                root_cause: c.root_cause,
                secondary: c.secondary,
                severity: c.severity.as_str().to_string(),
                rule_id: c.rule_id,
                explanation: c.explanation,
                attributes: s.attributes,
                repeat_count: s.repeat_count,
                last_occurred_at: s.last_occurred_at,
            }
        })
        .collect();
    let root_gpu = storage::gpus::root_gpu(&ctx.db, &row.cluster, row.id)
        .await?
        .map(|g| RootGpuView {
            gpu_index: g.gpu_index,
            uuid: g.uuid,
            pci_bus_id: g.pci_bus_id,
            part: g.part,
        });
    Ok(Json(FailureDetail {
        root_gpu,
        failure: row.into(),
        signals,
        signals_truncated: truncated,
    }))
}
