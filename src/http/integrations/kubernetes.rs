//! `POST /v1/integrations/kubernetes/events`: Kubernetes Events, Nodes (their conditions) and
//! Pods as signals, node drains and returns, and job signals.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use chrono::Utc;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::{IntegrationResponse, json_body, query_text, store};
use crate::http::ApiContext;
use crate::http::caller::Caller;
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::AppQuery;
use crate::ingest::batch::{Batch, RejectReason, Route};
use crate::ingest::kubernetes::{map_object, split_body};

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/integrations/kubernetes/events", post(ingest_kubernetes))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ClusterQuery {
    /// Cluster the objects belong to (Kubernetes objects do not name one).
    #[param(value_type = crate::domain::event::Text)]
    pub cluster: String,
}

/// A Kubernetes list (`EventList`, `NodeList`, `PodList`, `List`); a bare array or one object
/// is also accepted.
#[derive(ToSchema)]
#[schema(example = json!({"kind": "EventList", "apiVersion": "v1", "items": [{"kind": "Event", "apiVersion": "v1",
    "metadata": {"name": "train-llm-0-x7k2p.17e3a0d4f1e2c3b5", "namespace": "research", "uid": "9b2d4f6a-3c5e-4a7b-8c9d-0e1f2a3b4c5d"},
    "involvedObject": {"kind": "Pod", "namespace": "research", "name": "train-llm-0-x7k2p",
                       "labels": {"batch.kubernetes.io/job-name": "train-llm"}},
    "reason": "BackOff", "message": "Back-off restarting failed container trainer in pod train-llm-0-x7k2p_research",
    "source": {"component": "kubelet", "host": "gpu-node-07"}, "lastTimestamp": "2026-11-30T10:02:40Z", "count": 4, "type": "Warning"}]}))]
#[allow(dead_code)] // the schema of a body read as JSON values
pub struct KubernetesList {
    /// 1 to `FAULTLINE_MAX_BATCH_ITEMS` (10,000 by default) objects: core/v1 Events (or
    /// events.k8s.io/v1), Nodes, Pods, or `{"node", "conditions"}`.
    #[schema(value_type = Vec<HashMap<String, serde_json::Value>>, min_items = 1, max_items = 10000)]
    pub items: Vec<serde_json::Value>,
}

/// Ingest Kubernetes Events, Nodes and Pods.
///
/// Events (what `kubectl get events -o json` prints, or an event exporter's webhook): node
/// events (`NodeNotReady`, node-problem-detector's `OOMKilling`, `KernelOops`, XID events such
/// as GKE's GPU device plugin's `XIDError` with their XID as code, any Warning) are node signals;
/// pod events (`BackOff`, `Evicted`, `Failed`, image pull errors, any Warning) are signals of the
/// pod's Job (`batch.kubernetes.io/job-name` / `job-name` label or Job owner reference of the
/// involved object); Normal events other than cordons are ignored. Nodes: each bad condition is
/// a signal (`Ready` not True; EKS's other `...Ready` conditions False; any other, such as
/// NVSentinel's, node-problem-detector's, AKS's GPU checks or GKE's `XidCriticalError`, True;
/// a condition listing XIDs gives one `xid` signal per XID), and the node is drained from its
/// earliest bad condition or cordon, or returned at its latest transition when all are good.
/// Pods: a container terminated non-zero (`Error`, `OOMKilled`) and an eviction are job
/// signals. Ids follow the Event's uid and count, the condition's transition, the termination's
/// time: re-sending is idempotent.
#[utoipa::path(
    post, path = "/v1/integrations/kubernetes/events", tag = "ingest",
    params(ClusterQuery),
    request_body(content((KubernetesList = "application/json"))),
    responses(
        (status = 200, description = "Objects processed: their signals stored durably; see `rejected` for the others", body = IntegrationResponse),
        (status = 400, description = "Empty body, body not JSON, or `cluster` missing or not 1 to 256 characters of printable text", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not ingest, or the cluster is outside the token's scope", body = ErrorBody),
        (status = 413, description = "Body or batch larger than the documented limits", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "Every object was invalid; `details.rejected` lists why. An object must be an Event (`kind` Event, or with `involvedObject` or `regarding` naming the object), a Node or a Pod (with `metadata.name`), or a node's `conditions` with its `node`: no schema can say so of free-form objects", body = ErrorBody),
        (status = 503, description = "Not admitted: too many ingest requests or request body bytes in flight, or the database does not answer. Nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
    ),
    security(("bearer" = []))
)]
pub async fn ingest_kubernetes(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(query): AppQuery<ClusterQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<IntegrationResponse>> {
    let _permit = ctx.ingest_permit("kubernetes")?;
    let _timer = crate::ingest::timing::IngestTimer::start(Route::Kubernetes);
    let cluster = query_text("cluster", &query.cluster)?;
    let value = json_body(&ctx, &caller, &cluster, &headers, body).await?;
    let now = Utc::now();
    let batch = Batch::new(Route::Kubernetes, split_body(value), ctx.config.limits.max_batch_items)?
        .parse(|item| map_object(&item, &cluster, now).map_err(|e| (RejectReason::InvalidField, e)))
        .finish(caller.cluster.as_deref())?;
    Ok(Json(store(&ctx, Route::Kubernetes, batch).await?))
}
