//! Rules the server enforces that JSON Schema 2020-12 can state and the derives do not write,
//! added to the generated document ([`schema_rules`]).

use crate::classify::text::TermKind;
use crate::domain::auth::Role;
use crate::domain::taxonomy::{Category, Component};

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
/// - a text/plain log body is not blank; a lexicon term has a word;
/// - an alert rule's condition takes only its kind's parameters, its label and annotation names
///   are at most 32 of `[A-Za-z_][A-Za-z0-9_]*` (no label Faultline sets), values at most 2,000
///   characters, and only a webhook receiver has a secret.
///
/// What no schema can state stays in the operations' 400/422 descriptions (a window's order, an
/// `end` before `start`, a signal more than 24 h ahead, an expiry in the past).
pub(super) fn schema_rules(doc: &mut serde_json::Value) {
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
    alert_rule_rules(schemas);
    super::integrations::integration_rules(schemas);
    term_rules(schemas);
    import_item_rule(schemas);
    part_identity_rule(schemas);
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

/// [`WHITE_SPACE`] as the inside of a regex character class, in `\u` escapes of four hex digits (which ECMA-262
/// and Python read alike).
pub(super) fn white_space_class() -> String {
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
/// A post-mortem of an import names its failure one way: by `id` (and nothing else), or by
/// `cluster`, `first_at` and `job_id` or `node` (and no `id`), as `import_item` checks. A field
/// set to null counts as absent.
fn import_item_rule(schemas: &mut serde_json::Value) {
    use serde_json::json;
    let given = |f: &str| json!({"required": [f], "properties": {f: {"not": {"type": "null"}}}});
    let absent = |f: &str| json!({"anyOf": [{"not": {"required": [f]}}, {"properties": {f: {"type": "null"}}}]});
    let by_id =
        json!({"allOf": [given("id"), absent("cluster"), absent("first_at"), absent("job_id"), absent("node")]});
    let described = json!({"allOf": [absent("id"), given("cluster"), given("first_at"),
                                     {"anyOf": [given("job_id"), given("node")]}]});
    if let Some(item) = schemas.get_mut("LifecycleImportItem").and_then(|s| s.as_object_mut()) {
        item.insert("anyOf".into(), json!([by_id, described]));
    }
}

/// A GPU part is told apart by its serial or its UUID: a reported GPU, and a part, placement or
/// removal of a history import, names at least one (non-blank), as `domain::part` checks.
fn part_identity_rule(schemas: &mut serde_json::Value) {
    use serde_json::json;
    let named = |f: &str| json!({"required": [f], "properties": {f: {"type": "string", "pattern": crate::domain::event::TEXT_PATTERN}}});
    for name in ["GpuReport", "PartInput", "PlacementInput", "RemovalInput"] {
        if let Some(item) = schemas.get_mut(name).and_then(|s| s.as_object_mut()) {
            item.insert("anyOf".into(), json!([named("serial"), named("uuid")]));
        }
    }
}

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

/// The alert rule's closed shapes (`deny_unknown_fields`) and the names and sizes of its maps.
fn alert_rule_rules(schemas: &mut serde_json::Value) {
    use serde_json::json;
    if let Some(variants) = schemas["Condition"]["oneOf"].as_array_mut() {
        for v in variants {
            v["additionalProperties"] = json!(false);
        }
    }
    let name = json!({"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "maxLength": 100});
    let value = json!({"type": "string", "maxLength": 2000});
    let spec = &mut schemas["RuleSpec"]["properties"];
    for field in ["labels", "annotations"] {
        spec[field]["maxProperties"] = json!(32);
        spec[field]["propertyNames"] = name.clone();
        spec[field]["additionalProperties"] = value.clone();
    }
    spec["labels"]["propertyNames"]["not"] = json!({"enum": crate::domain::alert::RESERVED_LABELS});
    let receiver = &mut schemas["Receiver"];
    receiver["if"] = json!({"properties": {"kind": {"not": {"const": "webhook"}}}});
    receiver["then"] = json!({"properties": {"secret": {"type": "null"}}});
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::text::Term;
    use crate::domain::taxonomy::RootCause;
    use crate::http::openapi::document;

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
