//! leptonai/gpud interop: its `GET /v1/events` answer (`[{component, startTime, endTime,
//! events: [{time, name, type, message}]}]`, Go type `GPUdComponentEvents`) mapped to Faultline
//! signals, and its `GET /machine-info` GPU list (`gpuInfo.gpus[]`: `uuid`, `busID`, `sn`) as a
//! node's GPU set for the parts inventory. Pure.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::domain::event::{Event, FieldError, optional_text, required_text};
use crate::domain::taxonomy::Symptom;

const NAMESPACE: Uuid = Uuid::from_u128(0x5a2e_c7d1_46b9_4e0f_8d3c_b1a9_6f27_e850);

/// One gpud event with its component and where it sits in the answer (`[0].events[1]`).
#[derive(Debug, Clone)]
pub struct ComponentEvent {
    pub path: String,
    pub component: String,
    pub event: Value,
}

/// The events of a `GET /v1/events` answer (an array of components, or one component). A
/// component without a `component` name or with `events` not a list is refused as a whole.
pub fn split_body(value: Value) -> Result<Vec<ComponentEvent>, FieldError> {
    let components = match value {
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut out = Vec::new();
    for (ci, c) in components.iter().enumerate() {
        let field = format!("[{ci}].component");
        let component = match c.get("component") {
            Some(Value::String(s)) => required_text(&field, s.clone())?,
            _ => return Err(FieldError::new(field, "missing")),
        };
        let events = match c.get("events") {
            None | Some(Value::Null) => continue,
            Some(Value::Array(e)) => e,
            Some(_) => return Err(FieldError::new(format!("[{ci}].events"), "must be a list")),
        };
        for (ei, e) in events.iter().enumerate() {
            out.push(ComponentEvent {
                path: format!("[{ci}].events[{ei}]"),
                component: component.clone(),
                event: e.clone(),
            });
        }
    }
    Ok(out)
}

fn number_after(text: &str, word: &str) -> Option<i64> {
    let at = text.to_ascii_uppercase().find(word)? + word.len();
    let digits: String = text[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Kind and code: gpud's Xid and SXid components (`accelerator-nvidia-error-xid`, `...-sxid`,
/// events `error_xid` / `error_sxid`) -> `xid` / `sxid` with the number in the message; an OOM ->
/// `host_oom`; otherwise NVSentinel's check-name rules over component and name (NVLink, ECC,
/// row remap, thermal, power, InfiniBand...), else `health_check`.
pub fn kind_and_code(component: &str, name: &str, message: &str) -> (&'static str, Option<i64>) {
    let both = format!("{component} {name}").to_ascii_lowercase();
    if both.contains("sxid") {
        return ("sxid", number_after(message, "SXID"));
    }
    if both.contains("xid") {
        return ("xid", number_after(message, "XID"));
    }
    if both.contains("oom") {
        return ("host_oom", None);
    }
    let check = both.replace("accelerator-nvidia-", "");
    super::nvsentinel::kind_and_code("", &check, &[])
}

/// Maps one gpud event on `node`.
pub fn map_event(e: &ComponentEvent, cluster: &str, node: &str) -> Result<Event, FieldError> {
    let field = |k: &str| format!("{}.{k}", e.path);
    let v = &e.event;
    if !v.is_object() {
        return Err(FieldError::new(e.path.clone(), "an event must be an object"));
    }
    let time = v
        .get("time")
        .and_then(Value::as_str)
        .ok_or_else(|| FieldError::new(field("time"), "missing"))?;
    let occurred_at = DateTime::parse_from_rfc3339(time.trim())
        .map_err(|_| FieldError::new(field("time"), format!("'{time}' is not an RFC 3339 time")))?
        .with_timezone(&Utc);
    // gpud's fields are strings; absent or null reads as empty (`type`: Unknown).
    let string = |k: &str| match v.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(FieldError::new(field(k), format!("{other} is not a string"))),
    };
    let name = string("name")?.unwrap_or("");
    let message = string("message")?.unwrap_or("");
    let event_type = string("type")?.unwrap_or("Unknown");
    // gpud: Info needs no action; Warning, Critical and Fatal impact workloads.
    let symptom = match event_type {
        "Info" => Some(Symptom::None),
        "Warning" | "Critical" | "Fatal" | "Unknown" => None,
        other => {
            return Err(FieldError::new(
                field("type"),
                format!("'{other}' is not Info, Warning, Critical or Fatal"),
            ));
        }
    };
    let (kind, code) = kind_and_code(&e.component, name, message);
    let mut attributes = Map::new();
    attributes.insert("source".into(), "gpud".into());
    attributes.insert("component".into(), e.component.clone().into());
    attributes.insert("name".into(), name.into());
    attributes.insert("type".into(), event_type.into());
    let mut gpu_uuid = None;
    for token in message.split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '(' || c == ')') {
        if let Some(p) = token.strip_prefix("PCI:") {
            attributes.insert("pci_bus_id".into(), p.trim_end_matches(':').into());
        } else if token.starts_with("GPU-") && token.len() > 20 {
            gpu_uuid = gpu_uuid.or(Some(token.to_string()));
        }
    }
    let cluster = required_text("cluster", cluster.to_string())?;
    let node = required_text("node", node.to_string())?;
    let id = Uuid::new_v5(
        &NAMESPACE,
        format!("{cluster}\n{node}\n{}\n{time}\n{name}\n{message}", e.component).as_bytes(),
    );
    Ok(Event {
        id,
        occurred_at,
        cluster,
        node: Some(node),
        gpu_index: None,
        gpu_uuid: optional_text("gpu_uuid", gpu_uuid)?,
        gpu_model: None,
        job_id: None,
        job_gpus: None,
        kind: kind.to_string(),
        code,
        symptom,
        root_cause: None,
        message: Some(format!("{}: {message}", e.component).chars().take(4096).collect()),
        attributes,
        repeat_count: 1,
        last_occurred_at: None,
    })
}

/// A `GET /machine-info` answer as one node's GPU set for `PUT /v1/gpus/inventory`: the GPUs in
/// PCI bus order (their index, as nvidia-smi numbers them), with UUID, serial (`sn`), bus id,
/// product and driver. The node is `node` when given, else the machine's `hostname`.
pub fn machine_gpus(info: &Value, cluster: &str, node: Option<&str>) -> Result<Value, String> {
    let hostname = node
        .or_else(|| info.get("hostname").and_then(Value::as_str))
        .filter(|h| !h.trim().is_empty())
        .ok_or("the machine info names no hostname: pass --node")?;
    let gpu_info = info.get("gpuInfo").cloned().unwrap_or(Value::Null);
    let model = gpu_info.get("product").and_then(Value::as_str);
    let driver = info.get("gpuDriverVersion").and_then(Value::as_str);
    let mut gpus: Vec<&Value> = gpu_info
        .get("gpus")
        .and_then(Value::as_array)
        .map(|g| g.iter().collect())
        .unwrap_or_default();
    let bus = |g: &Value| {
        g.get("busID")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    gpus.sort_by_key(|g| bus(g));
    let text = |g: &Value, k: &str| {
        g.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_string)
    };
    let gpus: Vec<Value> = gpus
        .iter()
        .enumerate()
        .map(|(index, g)| {
            json!({"index": index, "uuid": text(g, "uuid"), "serial": text(g, "sn"),
                   "pci_bus_id": text(g, "busID"), "model": model, "driver": driver})
        })
        .collect();
    Ok(json!({"cluster": cluster, "hostname": hostname.trim(), "gpus": gpus}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Vec<ComponentEvent> {
        split_body(serde_json::from_str(include_str!("../../tests/fixtures/gpud/events.json")).unwrap()).unwrap()
    }

    #[test]
    fn xid_events_are_xid_signals() {
        let e: Vec<Event> = events()
            .iter()
            .map(|e| map_event(e, "c1", "gpu-node-07").unwrap())
            .collect();
        let got: Vec<(&str, Option<i64>)> = e.iter().map(|e| (e.kind.as_str(), e.code)).collect();
        assert_eq!(got, vec![("xid", Some(74)), ("xid", Some(79))]);
        assert_eq!(e[1].attributes["pci_bus_id"], "0000:04:00");
        assert_eq!(e[1].occurred_at.to_rfc3339(), "2025-06-01T16:59:04+00:00");
        assert_eq!(e[1].symptom, None);
        // Stable ids: a re-synced window gives the same signals.
        assert_eq!(map_event(&events()[1], "c1", "gpu-node-07").unwrap().id, e[1].id);
    }

    #[test]
    fn kinds_of_other_components() {
        assert_eq!(
            kind_and_code("accelerator-nvidia-error-sxid", "error_sxid", "SXID 20034 detected"),
            ("sxid", Some(20034))
        );
        assert_eq!(
            kind_and_code("accelerator-nvidia-nvlink", "nvlink_down", ""),
            ("nvlink", None)
        );
        assert_eq!(
            kind_and_code("accelerator-nvidia-remapped-rows", "row_remapping_failed", ""),
            ("row_remap", None)
        );
        assert_eq!(kind_and_code("memory", "oom_kill", ""), ("host_oom", None));
        assert_eq!(
            kind_and_code("accelerator-nvidia-infiniband", "ib_port_down", ""),
            ("link_down", None)
        );
    }

    #[test]
    fn bad_events_name_their_field() {
        let mut e = events();
        e[0].event["time"] = Value::Null;
        assert_eq!(
            map_event(&e[0], "c1", "n").unwrap_err().field.as_deref(),
            Some("[0].events[0].time")
        );
        e[1].event["type"] = "Loud".into();
        assert_eq!(
            map_event(&e[1], "c1", "n").unwrap_err().field.as_deref(),
            Some("[0].events[1].type")
        );
        assert!(split_body(json!([{"events": []}])).is_err());
    }

    #[test]
    fn machine_info_is_a_gpu_set_in_bus_order() {
        let info: Value = serde_json::from_str(include_str!("../../tests/fixtures/gpud/machine-info.json")).unwrap();
        let set = machine_gpus(&info, "c1", None).unwrap();
        assert_eq!(set["hostname"], "gpu-node-07");
        assert_eq!(set["gpus"][0]["pci_bus_id"], "0000:04:00.0");
        assert_eq!(set["gpus"][0]["serial"], "1654922000242");
        assert_eq!(set["gpus"][1]["uuid"], "GPU-46a3bbe2-3e87-3dde-b464-a03eba0c21d7");
        assert_eq!(set["gpus"][1]["index"], 1);
        assert_eq!(set["gpus"][1]["driver"], "570.124.06");
        assert_eq!(machine_gpus(&info, "c1", Some("n9")).unwrap()["hostname"], "n9");
    }
}
