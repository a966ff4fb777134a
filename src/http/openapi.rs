//! The OpenAPI document, generated from the handlers and committed as api/openapi.json.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::classify::text::TermKind;
use crate::domain::auth::Role;
use crate::domain::taxonomy::{Category, Component};
use crate::http;
use crate::http::rebuilds::CatalogPin;

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
        http::failures::lifecycle::import_lifecycles,
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
        crate::http::analytics::lemon::LemonCategory,
        crate::http::csv::Format,
        crate::http::analytics::timeline::TimelinePeriod,
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
        (name = "classification", description = "The rule catalog and the free-text lexicon that give signals a root cause, and a dry run of both"),
        (name = "failures", description = "Signals folded into failures (interruptions) with a root cause"),
        (name = "analytics", description = "Failure mix by GPU generation, MTBF per 128-GPU group, root-cause ratios; what failures cost: recovery and ETTR, top errors, node concentration, job size, stragglers, efficiency, timeline and published baselines (JSON, or CSV with `format=csv` or `Accept: text/csv`)"),
        (name = "reports", description = "The reliability report: HTML with charts, or Markdown tables"),
        (name = "tokens", description = "API tokens and roles (admin)"),
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

/// Rules the server enforces that JSON Schema 2020-12 (OpenAPI 3.1) can state but the derives do
/// not write, so a generator (or a reader) knows them from the document alone:
/// - an RFC 3339 timestamp is never shorter than `2026-11-02T10:15:00Z` (20 characters: `format`
///   alone is an annotation, an empty string would pass it);
/// - a lifecycle patch changes something: a field other than `recovery_minutes`, or a
///   `recovery_minutes` object naming a phase (`{}` and null change nothing: 400 `empty_patch`);
/// - a job that is `running` has no `end`; any other state needs one;
/// - a signal's integer `code` fits an i64;
/// - a root cause's component belongs to its category (from the taxonomy);
/// - component and fault lexicon terms name a component, the other kinds none;
/// - a new token has `expires_at` or `ttl_seconds`, not both, and an admin token no cluster;
/// - an NVSentinel event names a check or a component; a rule names a kind;
/// - a text/plain log body is not blank; a lexicon term has a word.
///
/// What no schema can state stays in the operations' 400/422 descriptions (a window's order, an
/// `end` before `start`, a signal more than 24 h ahead, an expiry in the past).
fn schema_rules(doc: &mut serde_json::Value) {
    use serde_json::json;
    fn timestamps(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                let is_string = match map.get("type") {
                    Some(serde_json::Value::String(t)) => t == "string",
                    Some(serde_json::Value::Array(ts)) => ts.iter().any(|t| t == "string"),
                    _ => false,
                };
                if is_string && map.get("format").is_some_and(|f| f == "date-time") {
                    map.entry("minLength").or_insert(json!(20));
                }
                // A signal's `code` is read as an i64: beyond it the answer is 400.
                if let Some(code) = map.get_mut("code")
                    && code.get("format").is_some_and(|f| f == "int64")
                {
                    code["minimum"] = json!(i64::MIN);
                    code["maximum"] = json!(i64::MAX);
                }
                map.values_mut().for_each(timestamps);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(timestamps),
            _ => {}
        }
    }
    timestamps(doc);
    let schemas = &mut doc["components"]["schemas"];
    let patch = &mut schemas["LifecyclePatch"];
    patch["anyOf"] = json!([
        {"required": ["resolved_at"]},
        {"required": ["resolution"]},
        {"required": ["root_cause"]},
        {"required": ["note"]},
        {"required": ["recovery_minutes"], "properties": {"recovery_minutes": {"type": "object", "minProperties": 1}}}
    ]);
    let job = &mut schemas["JobInput"];
    job["if"] = json!({"properties": {"state": {"const": "running"}}, "required": ["state"]});
    job["then"] = json!({"properties": {"end": {"type": "null"}}});
    job["else"] = json!({"properties": {"end": {"type": "string"}}, "required": ["end"]});
    root_cause_rules(schemas);
    term_rules(schemas);
    let token = &mut schemas["CreateToken"];
    // `expires_at` or `ttl_seconds`, not both (null is absent); an admin token names no cluster
    // (a blank one is absent, as `optional_text` reads it).
    token["not"] = json!({
        "required": ["expires_at", "ttl_seconds"],
        "properties": {"expires_at": {"not": {"type": "null"}}, "ttl_seconds": {"not": {"type": "null"}}}
    });
    token["if"] = json!({"properties": {"role": {"const": Role::Admin.as_str()}}, "required": ["role"]});
    token["then"] = json!({"properties": {"cluster": {"anyOf": [
        {"type": "null"},
        {"type": "string", "pattern": format!("^[{}]*$", white_space_class())}
    ]}}});
    // An NVSentinel event names a check or a component: a string with something other than white
    // space (the mapping trims it; another type reads as absent).
    let named = json!({"type": "string", "pattern": format!("[^{}]", white_space_class())});
    schemas["HealthEvent"]["anyOf"] = json!([
        {"required": ["checkName"], "properties": {"checkName": named}},
        {"required": ["componentClass"], "properties": {"componentClass": named}}
    ]);
    // A rule's kind is not blank (`*` matches any kind).
    schemas["RuleInput"]["properties"]["kind"]["pattern"] = json!(format!("[^{}]", white_space_class()));
    // A lexicon term has a word: a run of ASCII letters and digits, as `normalise` reads words
    // (400 `invalid_term` otherwise).
    let put_term = &mut doc["paths"]["/v1/classification-terms/{term}"]["put"]["parameters"];
    for p in put_term.as_array_mut().into_iter().flatten() {
        if p["name"] == "term" {
            p["schema"]["pattern"] = json!("[A-Za-z0-9]");
        }
    }
    // A text/plain log body is not only white space (`u8::is_ascii_whitespace`: 400 `empty_body`).
    let logs = &mut doc["paths"]["/v1/logs"]["post"]["requestBody"]["content"]["text/plain"]["schema"];
    logs["pattern"] = json!("[^\\t\\n\\f\\r ]");
}

/// The characters `str::trim` removes (Unicode White_Space), inclusive ranges: what blank means to
/// the server. Patterns spell them out because `\s` differs between regex engines (ECMA-262 has
/// U+FEFF and not U+0085; Python has U+001C-U+001F).
const WHITE_SPACE: [(char, char); 10] = [
    ('\u{9}', '\u{D}'),
    (' ', ' '),
    ('\u{85}', '\u{85}'),
    ('\u{A0}', '\u{A0}'),
    ('\u{1680}', '\u{1680}'),
    ('\u{2000}', '\u{200A}'),
    ('\u{2028}', '\u{2029}'),
    ('\u{202F}', '\u{202F}'),
    ('\u{205F}', '\u{205F}'),
    ('\u{3000}', '\u{3000}'),
];

/// [`WHITE_SPACE`] as the inside of a regex character class, in `\uXXXX` escapes (which ECMA-262
/// and Python read alike).
fn white_space_class() -> String {
    WHITE_SPACE
        .iter()
        .map(|&(a, b)| {
            if a == b {
                format!("\\u{:04X}", a as u32)
            } else {
                format!("\\u{:04X}-\\u{:04X}", a as u32, b as u32)
            }
        })
        .collect()
}

/// A root cause's component belongs to its category: for each category, if `category` is it then
/// `component` is one of its components (built from the taxonomy), on every schema whose `category`
/// and `component` are the taxonomy's enums (the inputs, which the server checks with
/// `RootCause::new`, and the outputs built the same way).
///
/// `allOf` of `if`/`then` rather than `oneOf` of branches: client generators (openapi-python-client)
/// read `oneOf` branches with a `const` as a union type and lose the enums; they ignore `if`/`then`.
fn root_cause_rules(schemas: &mut serde_json::Value) {
    use serde_json::json;
    let rules: Vec<serde_json::Value> = Category::ALL
        .into_iter()
        .map(|category| {
            let components: Vec<&str> = Component::ALL
                .into_iter()
                .filter(|c| c.category() == category)
                .map(Component::as_str)
                .collect();
            // A category without components (none today) takes no root cause at all.
            let then = if components.is_empty() {
                json!(false)
            } else {
                json!({"properties": {"component": {"enum": components}}})
            };
            json!({
                "if": {"properties": {"category": {"const": category.as_str()}}, "required": ["category"]},
                "then": then
            })
        })
        .collect();
    for schema in schemas.as_object_mut().into_iter().flat_map(|s| s.values_mut()) {
        let refers = |name: &str, to: &str| {
            schema["properties"][name]["$ref"].as_str() == Some(&format!("#/components/schemas/{to}"))
        };
        let required = |name: &str| {
            schema["required"]
                .as_array()
                .is_some_and(|r| r.iter().any(|n| n == name))
        };
        if refers("category", "Category") && refers("component", "Component") {
            assert!(
                required("category") && required("component") && schema.get("allOf").is_none(),
                "a root cause whose category and component may be absent needs another rule"
            );
            schema["allOf"] = json!(rules);
        }
    }
}

/// Component and fault terms name a component (not `unknown`); the other kinds name none (absent,
/// null or `unknown`), as `Term::validate` reads them.
fn term_rules(schemas: &mut serde_json::Value) {
    use serde_json::json;
    let kinds: Vec<&str> = TermKind::ALL
        .into_iter()
        .filter(|k| k.has_component())
        .map(TermKind::as_str)
        .collect();
    let named: Vec<&str> = Component::ALL
        .into_iter()
        .filter(|c| *c != Component::Unknown)
        .map(Component::as_str)
        .collect();
    for name in ["TermInput", "Term"] {
        let term = &mut schemas[name];
        term["if"] = json!({"properties": {"kind": {"enum": kinds}}, "required": ["kind"]});
        term["then"] = json!({"properties": {"component": {"enum": named}}, "required": ["component"]});
        term["else"] = json!({"properties": {"component": {"enum": [null, Component::Unknown.as_str()]}}});
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::text::Term;
    use crate::domain::taxonomy::RootCause;

    #[test]
    fn white_space_is_what_trim_removes() {
        let listed = |c: char| WHITE_SPACE.iter().any(|&(a, b)| (a..=b).contains(&c));
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            assert_eq!(listed(c), c.is_whitespace(), "{c:?}");
        }
    }

    /// The `if`/`then` pairs accept exactly the pairs `RootCause::new` accepts.
    #[test]
    fn root_cause_branches_are_the_taxonomy() {
        let doc = document();
        for name in [
            "RootCause",
            "RootCauseInput",
            "PostMortemInput",
            "RuleInput",
            "Rule",
            "Term",
            "ClassifyResult",
        ] {
            let rules = doc["components"]["schemas"][name]["allOf"]
                .as_array()
                .unwrap_or_else(|| panic!("{name} has no root-cause rule"));
            for category in Category::ALL {
                for component in Component::ALL {
                    let valid = rules.iter().all(|r| {
                        r["if"]["properties"]["category"]["const"] != category.as_str()
                            || r["then"]["properties"]["component"]["enum"]
                                .as_array()
                                .is_some_and(|e| e.iter().any(|c| c == component.as_str()))
                    });
                    assert_eq!(
                        valid,
                        RootCause::new(category, component).is_ok(),
                        "{name}: {category:?} {component:?}"
                    );
                }
            }
        }
    }

    /// The term rule accepts exactly the kind and component pairs `put_term` stores.
    #[test]
    fn term_rule_is_what_validate_checks() {
        let doc = document();
        let input = &doc["components"]["schemas"]["TermInput"];
        let listed = |at: &serde_json::Value, v: &serde_json::Value| at.as_array().unwrap().contains(v);
        for kind in TermKind::ALL {
            for given in std::iter::once(None).chain(Component::ALL.map(Some)) {
                let component = given.unwrap_or(Component::Unknown);
                let term = Term {
                    term: "psu".into(),
                    kind,
                    category: if kind.has_component() {
                        component.category()
                    } else {
                        Category::Unknown
                    },
                    component,
                    weight: 1.0,
                    source: "test".into(),
                    builtin: false,
                };
                let value = serde_json::json!(given.map(Component::as_str));
                let schema_ok = if listed(&input["if"]["properties"]["kind"]["enum"], &kind.as_str().into()) {
                    given.is_some() && listed(&input["then"]["properties"]["component"]["enum"], &value)
                } else {
                    listed(&input["else"]["properties"]["component"]["enum"], &value)
                };
                assert_eq!(schema_ok, term.validate().is_ok(), "{kind:?} {given:?}");
            }
        }
    }
}
