//! The shapes of the foreign reports the integration routes read as JSON values (`dcgmi diag -j`,
//! `dcgmi health -c -j`): what the mapping (`src/ingest/dcgm.rs`) requires, written into the
//! document's schemas, so a report the schema accepts is one the route reads.

use serde_json::{Value, json};

use super::rules::white_space_class;

/// `dcgmi diag -j` and `dcgmi health -c -j` as the mapping reads them:
/// - a diag report has "DCGM Diagnostic" (DCGM 4) or, without it, "DCGM GPU Diagnostic" (older):
///   an object with `test_categories`, each with `tests`, each with `results` (lists of objects);
///   a result has a `status` (Pass, Fail, Warn(ing), Skip(ped), Not Run, any case); its GPU is an
///   integer `entity_id`, else `gpu_ids` (else `gpu_id`): an integer or a comma-separated list of
///   them; its `warnings` are objects with a `warning` text and an integer `error_id`;
/// - a health report's `body` has `Overall Health` with a `value`, and each incident
///   (`<group>.children.<entity>.children.Errors.children.<system>`) a `value` of Healthy, Warning
///   or Failure and an `overflow` text or list of texts.
///
/// A part the mapping skips when it is not the JSON type it reads (a group's `children` not an
/// object, a category's name not a string) is left unconstrained, so the schema refuses only what
/// the route refuses.
pub(super) fn integration_rules(schemas: &mut Value) {
    let ws = white_space_class();
    let not_blank = json!({"type": "string", "pattern": format!("[^{ws}]")});
    let word = |alternatives: &[&str]| {
        // Any case, as the mapping lower-cases: `Fail` -> `[Ff][Aa][Ii][Ll]`.
        let any_case = |w: &str| {
            w.chars()
                .map(|c| {
                    if c.is_ascii_alphabetic() {
                        format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
                    } else {
                        c.to_string()
                    }
                })
                .collect::<String>()
        };
        let words: Vec<String> = alternatives.iter().map(|w| any_case(w)).collect();
        format!("^[{ws}]*(?:{})[{ws}]*$", words.join("|"))
    };
    let i64_integer = json!({"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX});
    let id = "[+-]?[0-9]{1,18}";
    let id_list = format!("^[{ws}]*(?:{id}[{ws}]*)?(?:,[{ws}]*(?:{id}[{ws}]*)?)*$");
    let gpu_ids = json!({
        "description": "GPU ids: an integer, or integers separated by commas (\"0,1,2,3\"); null: none",
        "anyOf": [i64_integer, {"type": "string", "pattern": id_list}, {"type": "null"}]
    });
    let warning = json!({
        "type": "object",
        "required": ["warning"],
        "properties": {
            "warning": {"description": "The warning's text", "type": "string", "pattern": format!("[^{ws}]")},
            "error_id": {"description": "DCGM error code (`dcgmError_t`)", "anyOf": [i64_integer, {"type": "null"}]}
        }
    });
    // DCGM 3.1 writes null entries between the items of its lists; the reader skips them.
    let result = json!({
        "type": ["object", "null"],
        "required": ["status"],
        "properties": {
            "status": {
                "description": "Pass, Fail, Warn (Warning), Skip (Skipped) or Not Run, in any case",
                "type": "string",
                "pattern": word(&["pass", "fail", "warn", "warning", "skip", "skipped", "not run", "notrun"])
            },
            "entity_id": {"description": "The GPU (DCGM 4, with `entity_group` GPU or none)", "allOf": [i64_integer]},
            "warnings": {
                "description": "The result's warnings (DCGM 3.3 and later), or its one warning's text (DCGM 3.0 to 3.2, which writes the warning's code beside it as the result's `error_id`)",
                "anyOf": [{"type": "array", "items": warning}, {"type": "string"}, {"type": "null"}]
            }
        },
        // Without `entity_id`: `gpu_ids`, else `gpu_id` (older DCGM).
        "if": {"required": ["entity_id"]},
        "else": {
            "if": {"required": ["gpu_ids"]},
            "then": {"properties": {"gpu_ids": gpu_ids}},
            "else": {"properties": {"gpu_id": gpu_ids}}
        }
    });
    let diagnostic = json!({
        "description": "The diagnostic's test results by category and test",
        "type": "object",
        "required": ["test_categories"],
        "properties": {"test_categories": {"type": "array", "items": {
            "type": ["object", "null"],
            "required": ["tests"],
            "properties": {"tests": {"type": "array", "items": {
                "type": ["object", "null"],
                "required": ["results"],
                "properties": {"results": {"type": "array", "items": result}}
            }}}
        }}}
    });
    let diag = &mut schemas["DcgmDiagReport"];
    let description = |d: &Value, key: &str| d["properties"][key]["description"].clone();
    let mut current = diagnostic.clone();
    current["description"] = description(diag, "DCGM Diagnostic");
    diag["properties"]["DCGM Diagnostic"] = current;
    diag["anyOf"] = json!([
        {"required": ["DCGM Diagnostic"]},
        {"required": ["DCGM GPU Diagnostic"], "properties": {"DCGM GPU Diagnostic": diagnostic}}
    ]);

    let incident = json!({
        "type": "object",
        "required": ["value"],
        "properties": {
            "value": {"type": "string", "pattern": format!("^[{ws}]*(?:Healthy|Warning|Failure)[{ws}]*$")},
            "overflow": {"description": "The incident's messages", "type": ["array", "string", "null"]}
        }
    });
    let entity = json!({"properties": {"children": {"properties": {"Errors": {"properties": {
        "children": {"additionalProperties": incident}
    }}}}}});
    let group = json!({"properties": {"children": {"additionalProperties": entity}}});
    let body = &mut schemas["DcgmHealthReport"]["properties"]["body"];
    body["required"] = json!(["Overall Health"]);
    body["properties"] = json!({"Overall Health": {
        "type": "object",
        "required": ["value"],
        "properties": {"value": not_blank}
    }});
    body["additionalProperties"] = group;
}
