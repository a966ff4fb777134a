//! Alert rules (admin, audited, versioned), the alerts they raised, and each alert's delivery
//! attempts.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::ApiContext;
use super::caller::Caller;
use super::extract::{AppJson, AppPath, AppQuery};
use crate::domain::alert::{AlertState, Receiver, ReceiverKind, RuleSpec, validate_rule_id};
use crate::domain::auth::Permission;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::storage;
use crate::storage::alerts::{AlertRow, DeliveryRow, RuleRow};

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/v1/alert-rules", get(list_alert_rules))
        .route(
            "/v1/alert-rules/{rule_id}",
            get(get_alert_rule).put(put_alert_rule).delete(delete_alert_rule),
        )
        .route("/v1/alerts", get(list_alerts))
        .route("/v1/alerts/{fingerprint}/deliveries", get(deliveries))
}

/// A receiver as read back: the secret is never shown.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReceiverView {
    pub kind: ReceiverKind,
    pub url: String,
    /// Whether webhook bodies are signed.
    pub secret_set: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RuleView {
    #[schema(example = "lemon-nodes")]
    pub rule_id: String,
    /// Grows by one with every change.
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub condition: crate::domain::alert::Condition,
    pub clusters: Vec<String>,
    pub labels: std::collections::BTreeMap<String, String>,
    pub annotations: std::collections::BTreeMap<String, String>,
    pub repeat_interval_minutes: f64,
    pub receivers: Vec<ReceiverView>,
    pub enabled: bool,
}

fn rule_view(row: RuleRow) -> Result<RuleView, ApiError> {
    let spec: RuleSpec = serde_json::from_value(row.spec)
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("stored alert rule {} does not parse: {e}", row.id)))?;
    Ok(RuleView {
        rule_id: row.id,
        version: row.version,
        created_at: row.created_at,
        updated_at: row.updated_at,
        condition: spec.condition,
        clusters: spec.clusters,
        labels: spec.labels,
        annotations: spec.annotations,
        repeat_interval_minutes: spec.repeat_interval_minutes,
        receivers: spec
            .receivers
            .into_iter()
            .map(|Receiver { kind, url, secret }| ReceiverView {
                kind,
                url,
                secret_set: secret.is_some(),
            })
            .collect(),
        enabled: spec.enabled,
    })
}

/// The alert rules (admin).
#[utoipa::path(
    get, path = "/v1/alert-rules", tag = "alerts",
    responses(
        (status = 200, description = "Every rule, by id, without receiver secrets", body = Vec<RuleView>),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins manage alert rules", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_alert_rules(State(ctx): State<ApiContext>, caller: Caller) -> ApiResult<Json<Vec<RuleView>>> {
    caller.require(Permission::Admin)?;
    let rows = storage::alerts::rules(&ctx.db).await?;
    Ok(Json(rows.into_iter().map(rule_view).collect::<Result<_, _>>()?))
}

/// One alert rule (admin).
#[utoipa::path(
    get, path = "/v1/alert-rules/{rule_id}", tag = "alerts",
    params(("rule_id" = String, Path, description = "Rule id", example = "lemon-nodes")),
    responses(
        (status = 200, description = "The rule, without receiver secrets", body = RuleView),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins manage alert rules", body = ErrorBody),
        (status = 404, description = "No such rule", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_alert_rule(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(rule_id): AppPath<String>,
) -> ApiResult<Json<RuleView>> {
    caller.require(Permission::Admin)?;
    let row = storage::alerts::rule(&ctx.db, &rule_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no alert rule '{rule_id}'")))?;
    Ok(Json(rule_view(row)?))
}

/// Create or replace an alert rule (admin). Audited (`alert_rule.upsert`, with the version).
///
/// Evaluated per cluster at every evaluation interval; an alert is notified when it starts
/// firing, again every `repeat_interval_minutes` while it fires, and when it resolves.
#[utoipa::path(
    put, path = "/v1/alert-rules/{rule_id}", tag = "alerts", request_body(content = RuleSpec, example = json!({
        "condition": {"kind": "lemon_node", "alpha": 0.05, "window_hours": 720},
        "labels": {"team": "infra", "severity": "ticket"},
        "annotations": {"runbook": "https://wiki.example/lemons"},
        "repeat_interval_minutes": 240,
        "receivers": [{"kind": "alertmanager", "url": "http://alertmanager:9093"},
                      {"kind": "webhook", "url": "http://hooks.internal/faultline", "secret": "s3cret"}]
    })),
    params(("rule_id" = String, Path, description = "Rule id: 1 to 100 of letters, digits, '_', '-', '.'", example = "lemon-nodes")),
    responses(
        (status = 200, description = "Rule stored (a new version when it changed)", body = RuleView),
        (status = 400, description = "Malformed JSON, or a field out of bounds (the message names it)", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins manage alert rules", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn put_alert_rule(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(rule_id): AppPath<String>,
    AppJson(spec): AppJson<RuleSpec>,
) -> ApiResult<Json<RuleView>> {
    caller.require(Permission::Admin)?;
    validate_rule_id(&rule_id).map_err(|m| ApiError::bad_request("invalid_path", m))?;
    spec.validate().map_err(|m| ApiError::bad_request("invalid_field", m))?;
    let row = match crate::ingest::alerts::put_alert_rule(&ctx.db, &caller.actor(), &rule_id, &spec).await? {
        Some(row) => row,
        None => storage::alerts::rule(&ctx.db, &rule_id)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("no alert rule '{rule_id}'")))?,
    };
    Ok(Json(rule_view(row)?))
}

/// Delete an alert rule (admin); its firing alerts resolve at the next evaluation. Audited (`alert_rule.delete`).
#[utoipa::path(
    delete, path = "/v1/alert-rules/{rule_id}", tag = "alerts",
    params(("rule_id" = String, Path, description = "Rule id", example = "lemon-nodes")),
    responses(
        (status = 204, description = "Rule deleted"),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Only admins manage alert rules", body = ErrorBody),
        (status = 404, description = "No such rule", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn delete_alert_rule(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(rule_id): AppPath<String>,
) -> ApiResult<StatusCode> {
    caller.require(Permission::Admin)?;
    crate::ingest::alerts::delete_alert_rule(&ctx.db, &caller.actor(), &rule_id)
        .await?
        .map(|_| StatusCode::NO_CONTENT)
        .ok_or_else(|| ApiError::NotFound(format!("no alert rule '{rule_id}'")))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AlertQuery {
    /// Only alerts of this cluster.
    pub cluster: Option<String>,
    /// Only firing or only resolved alerts.
    pub state: Option<AlertState>,
    /// Only alerts of this rule.
    pub rule_id: Option<String>,
    /// Resolved alerts are listed when they ended within this many hours (default 24).
    #[param(minimum = 0, maximum = 8784, example = 24)]
    pub resolved_within_hours: Option<f64>,
    /// At most this many alerts (default 200).
    #[param(minimum = 1, maximum = 1000, example = 200)]
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AlertView {
    /// Hex hash of rule, cluster and subject: the alert's identity.
    #[schema(example = "3f1c0e5d2b7a4c9e8f6d1a2b3c4d5e6f")]
    pub fingerprint: String,
    pub cluster: String,
    pub rule_id: String,
    pub rule_version: i64,
    /// What fires: a node, a group, a part or slot, a failure kind, or the cluster.
    pub subject: String,
    pub state: AlertState,
    /// The figure the rule tested, at the last evaluation.
    pub value: Option<f64>,
    pub labels: serde_json::Value,
    /// summary, value, link (the subject: the node's failures or state, the part; the answer for
    /// a cluster), answer (the analytics answer that shows the figure) and the rule's own.
    pub annotations: serde_json::Value,
    pub starts_at: DateTime<Utc>,
    /// When it resolved; null while firing.
    pub ends_at: Option<DateTime<Utc>>,
    pub last_notified_at: DateTime<Utc>,
    pub evaluated_at: DateTime<Utc>,
    /// Notifications written for it so far.
    pub notifications: i64,
}

fn alert_view(a: AlertRow) -> AlertView {
    AlertView {
        state: AlertState::parse(&a.state).unwrap_or(AlertState::Resolved),
        fingerprint: a.fingerprint,
        cluster: a.cluster,
        rule_id: a.rule_id,
        rule_version: a.rule_version,
        subject: a.subject,
        value: a.value,
        labels: a.labels,
        annotations: a.annotations,
        starts_at: a.starts_at,
        ends_at: a.ends_at,
        last_notified_at: a.last_notified_at,
        evaluated_at: a.evaluated_at,
        notifications: a.notifications,
    }
}

/// Firing alerts and those resolved recently, firing first, newest first.
#[utoipa::path(
    get, path = "/v1/alerts", tag = "alerts", params(AlertQuery),
    responses(
        (status = 200, description = "The alerts", body = Vec<AlertView>),
        (status = 400, description = "Invalid state, resolved_within_hours or limit", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query, or the cluster is outside its scope", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_alerts(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(q): AppQuery<AlertQuery>,
) -> ApiResult<Json<Vec<AlertView>>> {
    caller.require(Permission::Query)?;
    let cluster = caller.read_cluster(q.cluster)?;
    let hours = q.resolved_within_hours.unwrap_or(24.0);
    if !(hours.is_finite() && (0.0..=8784.0).contains(&hours)) {
        return Err(ApiError::bad_request(
            "invalid_query",
            "resolved_within_hours: between 0 and 8784",
        ));
    }
    let limit = q.limit.unwrap_or(200);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request("invalid_query", "limit: between 1 and 1000"));
    }
    let rows = storage::alerts::list(
        &ctx.read_db,
        &storage::alerts::AlertFilter {
            cluster: cluster.as_deref(),
            state: q.state.map(AlertState::as_str),
            rule_id: q.rule_id.as_deref(),
            resolved_since: Utc::now() - Duration::milliseconds((hours * 3_600_000.0) as i64),
            limit,
        },
    )
    .await?;
    Ok(Json(rows.into_iter().map(alert_view).collect()))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryView {
    /// The notification (one per state change or repeat and receiver).
    pub notification: uuid::Uuid,
    /// Its place in the alert's order of notifications (1 = the first).
    pub seq: i64,
    /// The receiver's index in the rule.
    pub receiver: i32,
    pub receiver_kind: String,
    /// firing, repeat, resolved, or relabel (Alertmanager receivers only: the old label set
    /// resolved and the new one firing).
    pub event: String,
    /// 1 = the first attempt of this notification.
    pub attempt: i32,
    pub attempted_at: DateTime<Utc>,
    /// The receiver's HTTP status; null when it did not answer.
    pub status_code: Option<i32>,
    /// delivered; retry (tried again later); rejected (a 4xx other than 408 and 429: not tried
    /// again); expired (given up after FAULTLINE_ALERT_GIVE_UP_HOURS).
    pub outcome: String,
    pub error: Option<String>,
}

fn delivery_view(d: DeliveryRow) -> DeliveryView {
    DeliveryView {
        notification: d.outbox_id,
        seq: d.seq,
        receiver: d.receiver,
        receiver_kind: d.receiver_kind,
        event: d.event,
        attempt: d.attempt,
        attempted_at: d.attempted_at,
        status_code: d.status_code,
        outcome: d.outcome,
        error: d.error,
    }
}

/// Every delivery attempt of one alert's notifications, in time order.
#[utoipa::path(
    get, path = "/v1/alerts/{fingerprint}/deliveries", tag = "alerts",
    params(("fingerprint" = String, Path, description = "The alert's fingerprint", example = "3f1c0e5d2b7a4c9e8f6d1a2b3c4d5e6f")),
    responses(
        (status = 200, description = "One record per attempt (at most 10,000, oldest first)", body = Vec<DeliveryView>),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not query", body = ErrorBody),
        (status = 404, description = "No such alert (in the token's cluster)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn deliveries(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppPath(fingerprint): AppPath<String>,
) -> ApiResult<Json<Vec<DeliveryView>>> {
    caller.require(Permission::Query)?;
    let alert = storage::alerts::find(&ctx.read_db, caller.cluster.as_deref(), &fingerprint)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no alert '{fingerprint}'")))?;
    let rows = storage::alerts::deliveries(&ctx.read_db, &alert.cluster, &fingerprint, 10_000).await?;
    Ok(Json(rows.into_iter().map(delivery_view).collect()))
}
