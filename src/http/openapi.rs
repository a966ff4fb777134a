//! The OpenAPI document, generated from the handlers and committed as api/openapi.json.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::http;

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
        http::events::ingest_events,
        http::logs::ingest_logs,
        http::nvsentinel::ingest_health_events,
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
        http::failures::lifecycle::failure_history,
        http::nodes::state::record_node_state,
        http::nodes::state::node_state,
        http::jobs::upsert_jobs,
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
        http::report::reliability,
        http::health::healthz,
        http::health::readyz,
        http::health::metrics_text,
    ),
    components(schemas(
        crate::http::error::ErrorBody,
        crate::http::error::ErrorDetails,
        crate::ingest::batch::RejectedItem,
        crate::domain::taxonomy::Category,
        crate::domain::taxonomy::Component,
        crate::domain::taxonomy::Symptom,
        crate::domain::gpu::GpuGeneration,
        crate::http::analytics::lemon::LemonCategory,
        crate::http::csv::Format,
        crate::http::analytics::timeline::TimelinePeriod,
        crate::http::analytics::headline::MixBy,
        crate::domain::event::Text,
        crate::classify::Action,
        crate::http::report::ReportFormatName,
        crate::domain::event::OptionalText,
    )),
    modifiers(&BearerAuth, &OpenRoutes),
    tags(
        (name = "ingest", description = "Signals from node agents, schedulers and frameworks"),
        (name = "inventory", description = "The fleet: nodes, GPU models and generations, 128-GPU groups"),
        (name = "classification", description = "The rule catalog and the free-text lexicon that give signals a root cause, and a dry run of both"),
        (name = "failures", description = "Signals folded into failures (interruptions) with a root cause"),
        (name = "analytics", description = "Failure mix by GPU generation, MTBF per 128-GPU group, root-cause ratios; what failures cost: recovery and ETTR, top errors, node concentration, job size, stragglers, efficiency, timeline and published baselines (JSON, or CSV with `format=csv` or `Accept: text/csv`)"),
        (name = "reports", description = "The reliability report: HTML with charts, or Markdown tables"),
        (name = "tokens", description = "API tokens and roles (admin)"),
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

/// The document as served at /openapi.json and committed in api/openapi.json: the generated one,
/// plus what utoipa cannot say about query strings (see [`query_contract`]).
pub fn document() -> serde_json::Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serialises");
    query_contract(&mut doc);
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
