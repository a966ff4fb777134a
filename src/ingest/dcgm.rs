//! NVIDIA DCGM interop: `dcgmi diag -j` results (the "DCGM Diagnostic" layout of DCGM 4, with
//! `entity_groups` naming each GPU's serial, and the older "DCGM GPU Diagnostic" layout of DCGM
//! 2 and 3 with `gpu_ids` / `gpu_id`) and `dcgmi health -c -j` reports, mapped to Faultline
//! signals. Pure.
//!
//! Each failed test result and each health incident is a signal on its GPU. The result's status
//! decides whether it is a failure (Fail, health `Failure`) or stored with symptom `none` (Warn,
//! health `Warning`); the DCGM error code it carries classifies it by the code's own category
//! (`dcgm_codes`, from DCGM's `dcgm_errors.h`) and keeps its severity as an attribute, but never
//! turns a Fail into no failure: DCGM's default severity of a code is about the code in general,
//! the status is DCGM's verdict on this GPU. Health reports carry no code: the incident's text is
//! matched against DCGM's message formats to find it.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::dcgm_codes::CODES;
use crate::domain::event::{Event, FieldError, required_text};
use crate::domain::taxonomy::{Component, RootCause, Symptom};

const NAMESPACE: Uuid = Uuid::from_u128(0x71c4_9e08_5b2a_4f3d_9c61_0e8b_d4a7_23f5);

/// `dcgmErrorSeverity_t` names by value.
const SEVERITIES: [&str; 7] = ["NONE", "MONITOR", "ISOLATE", "UNKNOWN", "TRIAGE", "CONFIG", "RESET"];
/// `dcgmErrorCategory_t` names by value.
const CATEGORIES: [&str; 17] = [
    "NONE",
    "PERF_THRESHOLD",
    "PERF_VIOLATION",
    "SOFTWARE_CONFIG",
    "SOFTWARE_LIBRARY",
    "SOFTWARE_XID",
    "SOFTWARE_CUDA",
    "SOFTWARE_EUD",
    "SOFTWARE_OTHER",
    "HARDWARE_THERMAL",
    "HARDWARE_MEMORY",
    "HARDWARE_NVLINK",
    "HARDWARE_NVSWITCH",
    "HARDWARE_PCIE",
    "HARDWARE_POWER",
    "HARDWARE_OTHER",
    "INTERNAL_OTHER",
];

/// A DCGM error code's entry: (code, name, severity, category, message format).
pub type CodeInfo = (i64, &'static str, u8, u8, &'static str);

pub fn code_info(code: i64) -> Option<&'static CodeInfo> {
    usize::try_from(code)
        .ok()
        .and_then(|i| CODES.get(i))
        .filter(|c| c.0 == code)
}

/// The root cause a DCGM error category names (None: the catalog decides, e.g. by the Xid).
pub fn root_cause(code: i64, category: u8) -> Option<RootCause> {
    use Component::*;
    let component = match category {
        1 | 2 | 15 => Gpu,
        3 | 8 => Runtime,
        4 | 6 => Driver,
        7 if code == 95 => Gpu, // EUD_TEST_FAILED: the GPU failed NVIDIA's field diagnostic
        7 => Runtime,
        9 => Cooling,
        10 => GpuMemory,
        11 | 12 => Nvlink,
        13 => Pcie,
        14 => Power,
        _ => return None,
    };
    RootCause::new(component.category(), component).ok()
}

/// The literal pieces of a printf format, in order.
fn literal_pieces(format: &str) -> Vec<String> {
    let mut pieces = vec![String::new()];
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            pieces.last_mut().unwrap().push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            pieces.last_mut().unwrap().push('%');
            continue;
        }
        // flags, width, precision, length, then the conversion letter
        while let Some(&n) = chars.peek() {
            chars.next();
            if n.is_ascii_alphabetic() && !matches!(n, 'h' | 'l' | 'z' | 'j' | 't' | 'L') {
                break;
            }
        }
        pieces.push(String::new());
    }
    pieces.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// The code whose message format `text` starts with (its literal pieces in order); the longest
/// match wins. Formats with fewer than 12 literal characters are too vague to match.
pub fn code_from_text(text: &str) -> Option<&'static CodeInfo> {
    let mut best: Option<(&CodeInfo, usize)> = None;
    for info in CODES {
        let pieces = literal_pieces(info.4);
        let len: usize = pieces.iter().map(String::len).sum();
        if len < 12 {
            continue;
        }
        let mut rest = text;
        let mut ok = true;
        for (i, p) in pieces.iter().enumerate() {
            let p = p.trim();
            match rest.find(p) {
                Some(at) if i > 0 || at == 0 || !info.4.starts_with(p) => rest = &rest[at + p.len()..],
                _ => {
                    ok = false;
                    break;
                }
            }
        }
        if ok && best.is_none_or(|(_, l)| len > l) {
            best = Some((info, len));
        }
    }
    best.map(|(info, _)| info)
}

/// The first number after `word` in `text` (an Xid or SXid number).
fn number_after(text: &str, word: &str) -> Option<i64> {
    let at = text.to_ascii_uppercase().find(word)? + word.len();
    let digits: String = text[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Kind and code of a DCGM finding: Xid, SXid and fallen-off-the-bus codes become the signals
/// the catalog knows (`xid` N, `sxid` N, `xid` 79); others are kind `dcgm` with the DCGM code.
fn kind_and_code(code: Option<i64>, text: &str) -> (&'static str, Option<i64>) {
    match code {
        Some(101) => ("xid", number_after(text, "XID")),
        Some(81) => ("xid", Some(95)),
        Some(120) => ("xid", Some(79)),
        Some(109) => ("sxid", number_after(text, "SXID")),
        _ => ("dcgm", code),
    }
}

/// Where and when a report was taken: the node (the JSON does not say), the time (`at`, or the
/// request's) and the key of its ids.
pub struct Run<'a> {
    pub cluster: &'a str,
    pub node: &'a str,
    pub at: DateTime<Utc>,
    /// `at` when the sender gave it; else the UTC day, so a report re-sent the same day is a
    /// duplicate.
    pub id_time: String,
}

struct Finding<'a> {
    path: &'a str,
    gpu_index: Option<i32>,
    code: Option<i64>,
    text: String,
    failed: bool,
    attributes: Map<String, Value>,
}

fn signal(run: &Run, f: Finding) -> Result<Event, FieldError> {
    let info = f.code.and_then(code_info);
    let (kind, code) = kind_and_code(f.code, &f.text);
    let mut attributes = f.attributes;
    attributes.insert("source".into(), "dcgm".into());
    let mut root = None;
    if let Some(&(id, name, severity, category, _)) = info {
        attributes.insert("dcgm_error".into(), format!("DCGM_FR_{name}").into());
        attributes.insert("dcgm_error_id".into(), id.into());
        attributes.insert("dcgm_severity".into(), SEVERITIES[usize::from(severity)].into());
        attributes.insert("dcgm_category".into(), CATEGORIES[usize::from(category)].into());
        if kind == "dcgm" {
            root = root_cause(id, category);
        }
    }
    let key = format!(
        "{}\n{}\n{}\n{}\n{}",
        run.node,
        run.id_time,
        f.path,
        f.code.unwrap_or(-1),
        f.text
    );
    Ok(Event {
        id: Uuid::new_v5(&NAMESPACE, format!("{}\n{key}", run.cluster).as_bytes()),
        occurred_at: run.at,
        cluster: required_text("cluster", run.cluster.to_string())?,
        node: Some(required_text("node", run.node.to_string())?),
        gpu_index: f.gpu_index,
        gpu_uuid: None,
        gpu_model: None,
        job_id: None,
        job_gpus: None,
        kind: kind.to_string(),
        code,
        symptom: (!f.failed).then_some(Symptom::None),
        root_cause: root,
        message: Some(f.text.chars().take(4096).collect()),
        attributes,
        repeat_count: 1,
        last_occurred_at: None,
    })
}

/// One test result of a diag report, with where it sits (`path`, for errors) and its test.
#[derive(Debug, Clone)]
pub struct DiagResult {
    pub path: String,
    pub category: String,
    pub test: String,
    pub result: Value,
    /// GPU entity id -> (serial, PCI device id), from `entity_groups`.
    pub gpus: HashMap<i64, (Option<String>, Option<String>)>,
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// A DCGM report as `dcgmi ... -j` printed it: JSON, possibly after lines the tool printed first
/// (DCGM 3.1 prints e.g. "WARNING: THIS SHOULD NOT HAPPEN" before the report; NVIDIA's own reader
/// skips to the first `{`). Returns the report and the lines skipped; an error says why the body
/// is not a report, naming the first line when lines preceded the JSON.
pub fn report_json(body: &[u8]) -> Result<(Value, Vec<String>), String> {
    let whole = match serde_json::from_slice(body) {
        Ok(v) => return Ok((v, Vec::new())),
        Err(e) => e,
    };
    let text = String::from_utf8_lossy(body);
    let start = text
        .split_inclusive('\n')
        .scan(0usize, |at, line| {
            let here = *at;
            *at += line.len();
            Some((here, line))
        })
        .find(|(_, line)| line.trim_start().starts_with('{'));
    match start {
        Some((at, _)) if at > 0 => {
            let skipped: Vec<String> = text[..at]
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            serde_json::from_str(&text[at..])
                .map(|v| (v, skipped.clone()))
                .map_err(|e| {
                    format!(
                        "the body is not JSON: {e} (after {} line(s) before the report, the first: '{}')",
                        skipped.len(),
                        skipped
                            .first()
                            .map_or("", String::as_str)
                            .chars()
                            .take(200)
                            .collect::<String>()
                    )
                })
        }
        _ => Err(format!("the body is not JSON: {whole}")),
    }
}

/// The test results of a `dcgmi diag -j` document, either layout. An error names the layout's
/// missing or malformed part; a malformed result is left for [`map_diag_result`] to refuse.
pub fn diag_results(doc: &Value) -> Result<Vec<DiagResult>, FieldError> {
    let (key, body) = ["DCGM Diagnostic", "DCGM GPU Diagnostic"]
        .into_iter()
        .find_map(|k| doc.get(k).map(|b| (k, b)))
        .ok_or_else(|| {
            FieldError::new(
                "DCGM Diagnostic",
                "missing: not a `dcgmi diag -j` document (neither \"DCGM Diagnostic\" nor \"DCGM GPU Diagnostic\")",
            )
        })?;
    let groups = match doc.get("entity_groups") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(groups)) => groups.as_slice(),
        Some(_) => return Err(FieldError::new("entity_groups", "must be a list of entity groups")),
    };
    let mut gpus = HashMap::new();
    for (gi, group) in groups.iter().enumerate() {
        if !group.is_object() {
            return Err(FieldError::new(
                format!("entity_groups[{gi}]"),
                "an entity group must be an object",
            ));
        }
        if text(group, "entity_group").is_some_and(|g| g != "GPU") {
            continue;
        }
        for e in group.get("entities").and_then(Value::as_array).into_iter().flatten() {
            if let Some(id) = e.get("entity_id").and_then(Value::as_i64) {
                // "<<<NOT_SUPPORTED>>>" is how DCGM says a part has no readable serial.
                let serial = text(e, "serial_num")
                    .filter(|s| !s.starts_with('<'))
                    .map(str::to_string);
                gpus.insert(id, (serial, text(e, "device_id").map(str::to_string)));
            }
        }
    }
    let categories = body
        .get("test_categories")
        .and_then(Value::as_array)
        .ok_or_else(|| FieldError::new(format!("{key}.test_categories"), "missing or not a list"))?;
    let mut out = Vec::new();
    // dcgmi writes its lists with jsoncpp by index, so DCGM 3.1 leaves `null` where it skipped an
    // index (between the Deployment tests, for a GPU that did not run a test); NVIDIA's own reader
    // (nvvs `JsonResult.hpp`) skips them, and so does this one.
    for (ci, c) in categories.iter().enumerate().filter(|(_, c)| !c.is_null()) {
        let category = text(c, "category").unwrap_or("").to_string();
        let tests = c
            .get("tests")
            .and_then(Value::as_array)
            .ok_or_else(|| FieldError::new(format!("{key}.test_categories[{ci}].tests"), "missing or not a list"))?;
        for (ti, t) in tests.iter().enumerate().filter(|(_, t)| !t.is_null()) {
            let test = text(t, "name").unwrap_or("").to_string();
            let results = t.get("results").and_then(Value::as_array).ok_or_else(|| {
                FieldError::new(
                    format!("{key}.test_categories[{ci}].tests[{ti}].results"),
                    "missing or not a list",
                )
            })?;
            for (ri, r) in results.iter().enumerate().filter(|(_, r)| !r.is_null()) {
                out.push(DiagResult {
                    path: format!("{key}.test_categories[{ci}].tests[{ti}].results[{ri}]"),
                    category: category.clone(),
                    test: test.clone(),
                    result: r.clone(),
                    gpus: gpus.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// The GPU ids a result is about: `entity_id` of group GPU (DCGM 4), `gpu_ids` ("0,1,2,3") or
/// `gpu_id` (older); none for a system-wide result.
fn result_gpus(r: &DiagResult) -> Result<Vec<i64>, FieldError> {
    let field = |k: &str| format!("{}.{k}", r.path);
    let v = &r.result;
    if let Some(e) = v.get("entity_id") {
        let id = e
            .as_i64()
            .ok_or_else(|| FieldError::new(field("entity_id"), format!("{e} is not an entity id")))?;
        return Ok(match text(v, "entity_group") {
            None | Some("GPU") => vec![id],
            Some(_) => Vec::new(),
        });
    }
    let ids = match v.get("gpu_ids").or_else(|| v.get("gpu_id")) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(FieldError::new(
                field("gpu_ids"),
                format!("{other} is not a list of GPU ids"),
            ));
        }
    };
    ids.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .map_err(|_| FieldError::new(field("gpu_ids"), format!("'{s}' is not a GPU id")))
        })
        .collect()
}

/// The signals of one result: one per warning (one for a failure without warnings) per GPU of a
/// `Fail`ed (or `Warn`ed: symptom `none`) result; none for Pass, Skip and Not Run.
pub fn map_diag_result(r: &DiagResult, run: &Run) -> Result<Vec<Event>, FieldError> {
    let field = |k: &str| format!("{}.{k}", r.path);
    if !r.result.is_object() {
        return Err(FieldError::new(r.path.clone(), "a test result must be an object"));
    }
    let status = text(&r.result, "status").ok_or_else(|| FieldError::new(field("status"), "missing"))?;
    // None: a result that makes no signal (read whole all the same: a malformed one is refused).
    let failed = match status.to_ascii_lowercase().as_str() {
        "fail" => Some(true),
        "warn" | "warning" => Some(false),
        "pass" | "skip" | "skipped" | "not run" | "notrun" => None,
        _ => {
            return Err(FieldError::new(
                field("status"),
                format!("'{status}' is not Pass, Fail, Warn, Skip or Not Run"),
            ));
        }
    };
    let gpus = result_gpus(r)?;
    let mut warnings: Vec<(Option<i64>, String)> = Vec::new();
    let listed = match r.result.get("warnings") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(w)) => w.as_slice(),
        // DCGM 3.0 to 3.2 write the one warning of a result as text, 3.2 its code beside it as
        // `error_id`; without a code, DCGM's message formats name it.
        Some(Value::String(w)) => {
            let code = match r.result.get("error_id") {
                None | Some(Value::Null) => code_from_text(w).map(|c| c.0),
                Some(c) => Some(
                    c.as_i64()
                        .ok_or_else(|| FieldError::new(field("error_id"), format!("{c} is not an error code")))?,
                ),
            };
            if !w.trim().is_empty() {
                warnings.push((code, w.trim().to_string()));
            }
            &[][..]
        }
        Some(_) => {
            return Err(FieldError::new(
                field("warnings"),
                "must be a list of warnings or a warning's text",
            ));
        }
    };
    for (wi, w) in listed.iter().enumerate() {
        let message =
            text(w, "warning").ok_or_else(|| FieldError::new(field(&format!("warnings[{wi}].warning")), "missing"))?;
        let code = match w.get("error_id") {
            None | Some(Value::Null) => None,
            Some(c) => Some(c.as_i64().ok_or_else(|| {
                FieldError::new(
                    field(&format!("warnings[{wi}].error_id")),
                    format!("{c} is not an error code"),
                )
            })?),
        };
        warnings.push((code, message.to_string()));
    }
    let Some(failed) = failed else {
        return Ok(Vec::new());
    };
    if warnings.is_empty() {
        warnings.push((None, format!("DCGM diagnostic test '{}' {status}", r.test)));
    }
    let slots: Vec<Option<i64>> = if gpus.is_empty() {
        vec![None]
    } else {
        gpus.into_iter().map(Some).collect()
    };
    let mut out = Vec::new();
    for gpu in &slots {
        for (code, message) in &warnings {
            let mut attributes = Map::new();
            attributes.insert("dcgm_report".into(), "diag".into());
            attributes.insert("test".into(), r.test.clone().into());
            attributes.insert("test_category".into(), r.category.clone().into());
            attributes.insert("status".into(), status.into());
            if let Some((serial, device)) = gpu.and_then(|g| r.gpus.get(&g)) {
                if let Some(s) = serial {
                    attributes.insert("gpu_serial".into(), s.clone().into());
                }
                if let Some(d) = device {
                    attributes.insert("pci_device_id".into(), d.clone().into());
                }
            }
            let gpu_index = gpu
                .and_then(|g| i32::try_from(g).ok())
                .filter(|g| (0..=1023).contains(g));
            let path = format!("{}/{}", r.path, gpu.map_or(String::new(), |g| g.to_string()));
            out.push(signal(
                run,
                Finding {
                    path: &path,
                    gpu_index,
                    code: *code,
                    text: format!("{}: {message}", r.test),
                    failed,
                    attributes,
                },
            )?);
        }
    }
    Ok(out)
}

/// One system's incidents of one entity in a `dcgmi health -c -j` report.
#[derive(Debug, Clone)]
pub struct HealthIncident {
    pub path: String,
    pub group: String,
    pub entity: String,
    pub system: String,
    pub value: Value,
}

/// The incidents of a health report: `body.<group>.children.<entity>.children.Errors.children.<system>`
/// (dcgmi's JSON output tree). An error names the missing part of the report.
pub fn health_incidents(doc: &Value) -> Result<(String, Vec<HealthIncident>), FieldError> {
    let body = doc
        .get("body")
        .and_then(Value::as_object)
        .ok_or_else(|| FieldError::new("body", "missing: not a `dcgmi health -c -j` report"))?;
    let overall = body
        .get("Overall Health")
        .and_then(|o| text(o, "value"))
        .ok_or_else(|| FieldError::new("body.Overall Health.value", "missing"))?
        .to_string();
    let mut out = Vec::new();
    for (group, g) in body.iter().filter(|(k, _)| k.as_str() != "Overall Health") {
        for (entity, e) in g.get("children").and_then(Value::as_object).into_iter().flatten() {
            let errors = e.pointer("/children/Errors/children").and_then(Value::as_object);
            for (system, s) in errors.into_iter().flatten() {
                out.push(HealthIncident {
                    path: format!("body.{group}.children.{entity}.children.Errors.children.{system}"),
                    group: group.clone(),
                    entity: entity.clone(),
                    system: system.clone(),
                    value: s.clone(),
                });
            }
        }
    }
    Ok((overall, out))
}

/// The root cause of a health watch system, for an incident whose text matches no DCGM code.
fn system_root_cause(system: &str) -> Option<RootCause> {
    let s = system.to_ascii_lowercase();
    let component = if s.starts_with("memory") {
        Component::GpuMemory
    } else if s.starts_with("pcie") {
        Component::Pcie
    } else if s.starts_with("nvlink") {
        Component::Nvlink
    } else if s.starts_with("thermal") {
        Component::Cooling
    } else if s.starts_with("power") {
        Component::Power
    } else if s.starts_with("connectx") {
        Component::Network
    } else if s.starts_with("driver") {
        Component::Driver
    } else if s.starts_with("pmu") || s.starts_with("mcu") || s.starts_with("sm") || s.starts_with("inforom") {
        Component::Gpu
    } else {
        return None;
    };
    RootCause::new(component.category(), component).ok()
}

/// One incident's signal: health `Failure` is a failure, `Warning` is stored with symptom `none`;
/// the code found in its text, when any, decides as for diag results.
pub fn map_health_incident(i: &HealthIncident, run: &Run) -> Result<Event, FieldError> {
    let health = text(&i.value, "value").ok_or_else(|| FieldError::new(format!("{}.value", i.path), "missing"))?;
    let failed = match health {
        "Failure" => true,
        "Warning" => false,
        "Healthy" => false,
        other => {
            return Err(FieldError::new(
                format!("{}.value", i.path),
                format!("'{other}' is not Healthy, Warning or Failure"),
            ));
        }
    };
    let message = match i.value.get("overflow") {
        None | Some(Value::Null) => String::new(),
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(FieldError::new(
                format!("{}.overflow", i.path),
                "must be a list of text",
            ));
        }
    };
    let code = code_from_text(&message).map(|c| c.0);
    let gpu_index = (i.group == "GPU")
        .then(|| i.entity.parse::<i32>().ok())
        .flatten()
        .filter(|g| (0..=1023).contains(g));
    let mut attributes = Map::new();
    attributes.insert("dcgm_report".into(), "health".into());
    attributes.insert("health_system".into(), i.system.clone().into());
    attributes.insert("health".into(), health.into());
    attributes.insert("entity_group".into(), i.group.clone().into());
    attributes.insert("entity_id".into(), i.entity.clone().into());
    let mut e = signal(
        run,
        Finding {
            path: &i.path,
            gpu_index,
            code,
            text: format!("{}: {health}: {message}", i.system),
            failed,
            attributes,
        },
    )?;
    if code.is_none() {
        e.root_cause = system_root_cause(&i.system);
    }
    Ok(e)
}

#[cfg(test)]
#[path = "dcgm_tests.rs"]
mod tests;
