//! The OpenAPI document, generated from the handlers and committed as api/openapi.json.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::http;
use crate::http::rebuilds::CatalogPin;

mod integrations;
mod rules;

use rules::schema_rules;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Faultline",
        description = "Failure-telemetry warehouse for GPU clusters that train large models: ingest signals \
(XIDs, ECC, NVLink, NCCL timeouts, job exits), keep the fleet inventory, classify root causes, fold cascades \
into failures and answer reliability questions.\n\nEvery `/v1` route needs `Authorization: Bearer <token>`. \
Roles: `agent` (ingest, inventory), `reader` (queries, inventory), `admin` (everything, tokens). Errors are JSON \
`ErrorBody` objects: `{\"error\": code, \"message\": text, \"details\": optional}`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    servers((url = "http://127.0.0.1:8080", description = "`faultline serve` on its default address (FAULTLINE_ADDR)")),
    paths(
        http::rebuilds::rebuild_status,
        http::events::ingest_events,
        http::logs::ingest_logs,
        http::nvsentinel::ingest_health_events,
        http::integrations::kubernetes::ingest_kubernetes,
        http::integrations::dcgm::ingest_dcgm_diag,
        http::integrations::dcgm::ingest_dcgm_health,
        http::integrations::gpud::ingest_gpud_events,
        http::nodes::upsert_nodes,
        http::nodes::list_nodes,
        http::tokens::create_token,
        http::tokens::list_tokens,
        http::tokens::revoke_token,
        http::rules::list_rules,
        http::rules::put_rule,
        http::rules::delete_rule,
        http::terms::list_terms,
        http::terms::put_term,
        http::terms::delete_term,
        http::classify::classify,
        http::failures::list_failures,
        http::failures::get_failure,
        http::analytics::headline::failure_mix,
        http::analytics::headline::mtbf,
        http::analytics::headline::root_causes,
        http::failures::lifecycle::patch_failure,
        http::failures::import::import_lifecycles,
        http::failures::lifecycle::failure_history,
        http::nodes::state::record_node_state,
        http::nodes::state::node_state,
        http::analytics::survival::survival,
        http::analytics::parts::afr,
        http::analytics::forecast::failure_forecast,
        http::analytics::parts::parts_or_slots,
        http::analytics::parts::precursors,
        http::gpus::list_gpus,
        http::gpus::gpu_timeline,
        http::gpus::node_gpus,
        http::gpus::inventory::put_inventory,
        http::gpus::inventory::put_node_gpus,
        http::gpus::history::import_history,
        http::gpus::history::remove_part,
        http::jobs::upsert_jobs,
        http::jobs::get_job,
        http::sync_cursors::get_cursor,
        http::sync_cursors::advance_cursor,
        http::analytics::recovery::recovery,
        http::analytics::errors::top_errors,
        http::analytics::concentration::node_concentration,
        http::analytics::job_size::job_size,
        http::analytics::stragglers::stragglers,
        http::analytics::efficiency::efficiency,
        http::analytics::timeline::timeline,
        http::analytics::baselines::baselines,
        http::analytics::compare::compare,
        http::analytics::job_plan::job_plan,
        http::analytics::lemon::lemon_nodes,
        http::analytics::availability::availability,
        http::analytics::availability::repair_pipeline,
        http::analytics::availability::fleet_now,
        http::report::reliability,
        http::alerts::list_alert_rules,
        http::alerts::get_alert_rule,
        http::alerts::put_alert_rule,
        http::alerts::delete_alert_rule,
        http::alerts::list_alerts,
        http::alerts::deliveries,
        http::heartbeats::heartbeats,
        http::audit::list_audit,
        http::health::healthz,
        http::health::readyz,
        http::health::metrics_text,
    ),
    components(schemas(
        crate::queries::rebuilds::RebuildStatus,
        crate::queries::rebuilds::RebuildProgress,
        crate::http::error::ErrorBody,
        crate::http::error::ErrorDetails,
        crate::ingest::batch::RejectedItem,
        crate::domain::taxonomy::Category,
        crate::domain::taxonomy::Component,
        crate::domain::taxonomy::Symptom,
        crate::domain::gpu::GpuGeneration,
        crate::domain::taxonomy::LemonCategory,
        crate::http::csv::Format,
        crate::http::analytics::timeline::TimelinePeriod,
        crate::analytics::availability::AvailabilityPeriod,
        crate::queries::availability::AvailabilityBy,
        crate::http::analytics::headline::MixBy,
        crate::domain::event::Text,
        crate::classify::Action,
        crate::http::report::ReportFormatName,
        crate::domain::event::OptionalText,
    )),
    modifiers(&BearerAuth, &AccessResponses, &OpenRoutes, &CatalogPin),
    tags(
        (name = "ingest", description = "Signals from node agents, schedulers and frameworks"),
        (name = "inventory", description = "The fleet: nodes, GPU models and generations, 128-GPU groups"),
        (name = "parts", description = "GPU parts by serial: placements in node slots over time, moves, removals and repairs"),
        (name = "classification", description = "The rule catalog and the free-text lexicon that give signals a root cause, and a dry run of both"),
        (name = "failures", description = "Signals folded into failures (interruptions) with a root cause"),
        (name = "analytics", description = "Failure mix by GPU generation, MTBF per 128-GPU group, root-cause ratios; what failures cost: recovery and ETTR, top errors, node concentration, job size, stragglers, efficiency, timeline and published baselines (JSON, or CSV with `format=csv` or `Accept: text/csv`)"),
        (name = "reports", description = "The reliability report: HTML with charts, or Markdown tables"),
        (name = "tokens", description = "API tokens and roles (admin)"),
        (name = "alerts", description = "Alert rules on the fleet's figures (admin), the alerts they raise, their deliveries to Alertmanager, webhooks and Slack; heartbeats"),
        (name = "audit", description = "The audit log of admin actions (admin)"),
        (name = "operations", description = "Health, readiness and metrics (no token needed)"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("Faultline API token"))
                    .build(),
            ),
        );
    }
}

/// What every authenticated route answers alike, written once here rather than on each handler:
/// 401 also for an expired token, 429 when the token's rate limit is used up, and 403 on reads
/// that name a cluster when the token is scoped to another one.
struct AccessResponses;

impl Modify for AccessResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        for item in openapi.paths.paths.values_mut() {
            let ops = [
                (true, &mut item.get),
                (false, &mut item.put),
                (false, &mut item.post),
                (false, &mut item.delete),
                (false, &mut item.patch),
            ];
            for (is_read, op) in ops {
                let Some(op) = op.as_mut() else { continue };
                let responses = &mut op.responses.responses;
                let Some(RefOr::T(unauthorized)) = responses.get_mut("401") else {
                    continue;
                };
                unauthorized.description =
                    "Missing, invalid or revoked bearer token (`unauthorized`), or an expired one \
                    (`token_expired`, the message says when it expired)"
                        .into();
                let mut limited = unauthorized.clone();
                limited.description = "This token's rate limit is used up (`rate_limited`): retry after the \
                    `Retry-After` seconds (see FAULTLINE_RATE_LIMIT_PER_TOKEN_RPS / _BURST)"
                    .into();
                let seconds = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).build();
                let mut retry_after = utoipa::openapi::header::Header::new(seconds);
                retry_after.description = Some("Seconds until the token's bucket has a request again".into());
                limited.headers.insert("Retry-After".into(), RefOr::T(retry_after));
                responses.insert("429".into(), RefOr::T(limited));
                let names_cluster = op.parameters.iter().flatten().any(|p| match p {
                    RefOr::T(p) => p.name.ends_with("cluster"),
                    RefOr::Ref(_) => false,
                });
                if is_read && names_cluster {
                    let mut scope = unauthorized_clone(responses);
                    match responses.get_mut("403") {
                        Some(RefOr::T(forbidden)) if !forbidden.description.contains("scope") => forbidden
                            .description
                            .push_str(", or a cluster is named that is outside the token's cluster scope"),
                        Some(_) => {}
                        None => {
                            if let Some(scope) = scope.take() {
                                responses.insert("403".into(), RefOr::T(scope));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Operations without a security requirement are open: say so with `security: []`, so that
/// linters and generators do not assume a global default.
struct OpenRoutes;

impl Modify for OpenRoutes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                op.security.get_or_insert_with(Vec::new);
            }
        }
    }
}

/// The 401 response (whose body is an `ErrorBody`) reworded for a scoped token naming another
/// cluster, for routes that did not document a 403 of their own.
fn unauthorized_clone(
    responses: &std::collections::BTreeMap<String, utoipa::openapi::RefOr<utoipa::openapi::Response>>,
) -> Option<utoipa::openapi::Response> {
    match responses.get("401") {
        Some(utoipa::openapi::RefOr::T(r)) => {
            let mut r = r.clone();
            r.description = "A cluster is named that is outside the token's cluster scope".into();
            r.headers.clear();
            Some(r)
        }
        _ => None,
    }
}

/// The document as served at /openapi.json and committed in api/openapi.json: the generated one,
/// plus what utoipa cannot say about query strings (see [`query_contract`]).
pub fn document() -> serde_json::Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serialises");
    query_contract(&mut doc);
    schema_rules(&mut doc);
    doc
}

/// What `AppQuery` does to every query string, stated on every operation that takes one: an empty
/// value (`?cluster=`, as HTML forms send them) means the parameter is absent (`allowEmptyValue`),
/// and a malformed or undocumented parameter is a 400.
fn query_contract(doc: &mut serde_json::Value) {
    for item in doc["paths"].as_object_mut().into_iter().flat_map(|p| p.values_mut()) {
        for op in item.as_object_mut().into_iter().flat_map(|i| i.values_mut()) {
            let mut has_query = false;
            let parameters = op.get_mut("parameters").and_then(|p| p.as_array_mut());
            for p in parameters.into_iter().flatten() {
                if p["in"] == "query" {
                    has_query = true;
                    if p["required"] != true {
                        p["allowEmptyValue"] = true.into();
                    }
                }
            }
            if let Some(responses) = op.get_mut("responses").and_then(|r| r.as_object_mut())
                && has_query
                && !responses.contains_key("400")
            {
                responses.insert(
                    "400".into(),
                    serde_json::json!({
                        "description": "A query parameter is malformed, out of its documented range, or not one this operation takes",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
                    }),
                );
            }
        }
    }
}

/// The document as committed in api/openapi.json (pretty, trailing newline).
pub fn openapi_json() -> String {
    let mut s = serde_json::to_string_pretty(&document()).expect("the OpenAPI document serialises");
    s.push('\n');
    s
}
