//! NVIDIA NVSentinel interop: its `HealthEvent` records (protobuf `datamodels.HealthEvent`, in
//! JSON) mapped to Faultline signals. Pure.
//!
//! Field names are matched case-insensitively and without underscores, so the protojson form
//! (`componentClass`), the MongoDB/bson form (`componentclass`) and snake_case all read.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::domain::event::{Event, FieldError, optional_text, required_text};
use crate::domain::taxonomy::Symptom;

const NAMESPACE: Uuid = Uuid::from_u128(0x8e2d_4c61_0b7f_4a93_a1c5_3d9e_7f20_6b48);

/// `{"version":1,"events":[...]}` (the HealthEvents message), an array, or one object.
pub fn split_body(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        Value::Object(mut o) if o.get("events").is_some_and(Value::is_array) && !o.contains_key("checkName") => {
            match o.remove("events") {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            }
        }
        other => vec![other],
    }
}

fn norm(k: &str) -> String {
    k.chars().filter(|c| *c != '_').flat_map(char::to_lowercase).collect()
}

/// The record with normalised keys (top level and entities).
struct Fields(Map<String, Value>);

impl Fields {
    fn new(o: &Map<String, Value>) -> Self {
        Fields(o.iter().map(|(k, v)| (norm(k), v.clone())).collect())
    }
    fn get(&self, k: &str) -> Option<&Value> {
        self.0.get(k).filter(|v| !v.is_null())
    }
    fn str(&self, k: &str) -> Option<&str> {
        self.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }
    fn bool(&self, k: &str) -> bool {
        self.get(k).and_then(Value::as_bool).unwrap_or(false)
    }
}

/// protobuf Timestamp as protojson (RFC 3339 string) or as stored ({seconds, nanos}).
fn timestamp(v: &Value) -> Option<DateTime<Utc>> {
    match v {
        Value::String(s) => DateTime::parse_from_rfc3339(s.trim())
            .ok()
            .map(|t| t.with_timezone(&Utc)),
        Value::Object(o) => {
            let o = Fields::new(o);
            let secs = o
                .get("seconds")
                .and_then(|s| s.as_i64().or_else(|| s.as_str()?.parse().ok()))?;
            let nanos = o
                .get("nanos")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .clamp(0, 999_999_999) as u32;
            DateTime::from_timestamp(secs, nanos)
        }
        Value::Number(n) => DateTime::from_timestamp(n.as_i64()?, 0),
        _ => None,
    }
}

/// The signal kind and code: Xid checks and GPU numeric codes -> `xid` N; NVSwitch / SXid ->
/// `sxid` N; a fallen-off-the-bus check -> `xid` 79; ECC/DBE/SBE -> `ecc` (2 uncorrectable, 1
/// correctable); row remapping, NVLink, thermal, power, InfoROM, GSP by name; NIC, InfiniBand
/// and Ethernet checks -> `link_down`; anything else -> `health_check` (the catalog's keyword
/// rules then read the message).
pub fn kind_and_code(component: &str, check: &str, codes: &[String]) -> (&'static str, Option<i64>) {
    let numeric = codes.iter().find_map(|c| c.trim().parse::<i64>().ok());
    let c = component.to_ascii_lowercase();
    // "SysLogsXIDError" would read as "...sXIDError" -> "sxid" without dropping its prefix.
    let lower = check.to_ascii_lowercase();
    let k = lower.trim_start_matches("syslogs");
    let all = format!("{} {}", k, codes.join(" ").to_ascii_lowercase());
    if k.contains("sxid") || c.contains("nvswitch") {
        return ("sxid", numeric);
    }
    if k.contains("fallenoff") || k.contains("fallen_off") || all.contains("fallen off") {
        return ("xid", Some(numeric.unwrap_or(79)));
    }
    if k.contains("xid") || (c == "gpu" && numeric.is_some()) {
        return ("xid", numeric);
    }
    // "nic" as a word start only: "KernelPanicCheck" holds it too.
    let nic = |s: &str| {
        s.starts_with("nic")
            || s.contains("nicdriver")
            || s.contains("nichealth")
            || s.contains("infiniband")
            || s.contains("ethernet")
    };
    if nic(&c) || c == "ib" || nic(k) {
        return ("link_down", numeric);
    }
    if all.contains("row_remap") || all.contains("rowremap") || all.contains("row remap") {
        return ("row_remap", None);
    }
    if all.contains("dbe")
        || all.contains("uncorrectable")
        || all.contains("ecc")
        || all.contains("sbe")
        || k.contains("mem")
    {
        let correctable = (all.contains("sbe") || all.contains("correctable"))
            && !all.contains("dbe")
            && !all.contains("uncorrectable");
        return ("ecc", Some(if correctable { 1 } else { 2 }));
    }
    if all.contains("nvlink") {
        return ("nvlink", None);
    }
    if all.contains("thermal") || all.contains("temp") {
        return ("thermal", None);
    }
    if all.contains("power") {
        return ("power", None);
    }
    if all.contains("inforom") {
        return ("inforom", None);
    }
    if all.contains("gsp") {
        return ("gsp_error", None);
    }
    ("health_check", numeric)
}

/// recommendedAction as name or enum number.
fn action_name(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(
            match n.as_i64()? {
                0 => "NONE",
                2 => "COMPONENT_RESET",
                5 => "CONTACT_SUPPORT",
                6 => "RUN_FIELDDIAG",
                15 => "RESTART_VM",
                24 => "RESTART_BM",
                25 => "REPLACE_VM",
                26 => "RUN_DCGMEUD",
                39 => "RESTART_APP",
                _ => "UNKNOWN",
            }
            .to_string(),
        ),
        _ => None,
    }
}

/// Maps one HealthEvent. `now` stands in for a missing `generatedTimestamp`. The id is a uuid v5
/// of the cluster and the whole record (keys sorted), so sending it again is a duplicate.
/// Healthy events get symptom `none`: stored, but they open and join no failure.
pub fn map_health_event(value: &Value, cluster: &str, now: DateTime<Utc>) -> Result<Event, FieldError> {
    let obj = value.as_object().ok_or_else(|| FieldError {
        field: None,
        message: "a HealthEvent must be a JSON object".into(),
    })?;
    let f = Fields::new(obj);
    let node = f
        .str("nodename")
        .ok_or_else(|| FieldError::new("nodeName", "missing: the node the event is about"))?;
    let node = required_text("nodeName", node.to_string())?;
    let component = f.str("componentclass").unwrap_or("");
    let check = f.str("checkname").unwrap_or("");
    let codes: Vec<String> = match f.get("errorcode") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .or_else(|| v.as_i64().map(|n| n.to_string()))
            })
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Number(n)) => vec![n.to_string()],
        Some(_) => return Err(FieldError::new("errorCode", "must be a list of strings")),
    };
    if component.is_empty() && check.is_empty() {
        return Err(FieldError::new(
            "checkName",
            "a HealthEvent needs a checkName or a componentClass",
        ));
    }
    let (kind, code) = kind_and_code(component, check, &codes);
    let occurred_at = match f.get("generatedtimestamp") {
        None => now,
        Some(v) => {
            timestamp(v).ok_or_else(|| FieldError::new("generatedTimestamp", format!("{v} is not a timestamp")))?
        }
    };
    let healthy = f.bool("ishealthy");
    let mut gpu_index = None;
    let mut gpu_uuid = None;
    let mut pci = None;
    if let Some(Value::Array(entities)) = f.get("entitiesimpacted") {
        for ent in entities.iter().filter_map(Value::as_object).map(Fields::new) {
            let (Some(t), Some(v)) = (ent.str("entitytype"), ent.str("entityvalue")) else {
                continue;
            };
            match t.to_ascii_uppercase().as_str() {
                "GPU" | "GPU_INDEX" | "GPUID" | "GPU_ID" => match v.parse::<i32>() {
                    Ok(i) if (0..=1023).contains(&i) => gpu_index = gpu_index.or(Some(i)),
                    _ if v.starts_with("GPU-") => gpu_uuid = gpu_uuid.or(Some(v.to_string())),
                    _ => {}
                },
                "GPU_UUID" | "GPUUUID" => gpu_uuid = gpu_uuid.or(Some(v.to_string())),
                "PCI" | "PCI_BUS_ID" => pci = pci.or(Some(v.to_string())),
                _ => {}
            }
        }
    }
    let message = f.str("message").map(|m| m.chars().take(4096).collect::<String>());
    let mut attributes = Map::new();
    attributes.insert("source".into(), "nvsentinel".into());
    for (key, name) in [
        ("agent", "agent"),
        ("componentclass", "componentClass"),
        ("checkname", "checkName"),
    ] {
        if let Some(v) = f.str(key) {
            attributes.insert(name.into(), v.into());
        }
    }
    attributes.insert("isFatal".into(), f.bool("isfatal").into());
    attributes.insert("isHealthy".into(), healthy.into());
    if let Some(a) = f.get("recommendedaction").and_then(action_name) {
        attributes.insert("recommendedAction".into(), a.into());
    }
    if !codes.is_empty() {
        attributes.insert("errorCode".into(), codes.clone().into());
    }
    for (key, name) in [("entitiesimpacted", "entitiesImpacted"), ("metadata", "metadata")] {
        if let Some(v) = f.get(key) {
            attributes.insert(name.into(), v.clone());
        }
    }
    if let Some(p) = pci {
        attributes.insert("pci_bus_id".into(), p.into());
    }
    let cluster = required_text("cluster", cluster.to_string())?;
    let id = Uuid::new_v5(&NAMESPACE, format!("{cluster}\n{value}").as_bytes());
    Ok(Event {
        id,
        occurred_at,
        cluster,
        node: Some(node),
        gpu_index,
        gpu_uuid: optional_text("entitiesImpacted", gpu_uuid)?,
        gpu_model: None,
        job_id: None,
        job_gpus: None,
        kind: kind.to_string(),
        code,
        symptom: healthy.then_some(Symptom::None),
        root_cause: None,
        message,
        attributes,
        repeat_count: 1,
        last_occurred_at: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold::participates;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        "2026-11-30T12:00:00Z".parse().unwrap()
    }

    fn xid79() -> Value {
        json!({
            "version": 1, "agent": "syslog-health-monitor", "componentClass": "GPU", "checkName": "SysLogsXIDError",
            "isFatal": true, "isHealthy": false,
            "message": "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
            "recommendedAction": "RESTART_BM", "errorCode": ["79"],
            "entitiesImpacted": [{"entityType": "PCI", "entityValue": "0000:3b:00"}, {"entityType": "GPU", "entityValue": "3"},
                                 {"entityType": "GPU_UUID", "entityValue": "GPU-455d8f70-2051-db6c-0430-ffc457bff834"}],
            "metadata": {"chassis_serial": "1650924060010"},
            "generatedTimestamp": "2026-11-30T10:00:00Z", "nodeName": "n07"
        })
    }

    #[test]
    fn an_xid_health_event_is_an_xid_signal_on_its_gpu() {
        let e = map_health_event(&xid79(), "c1", now()).unwrap();
        assert_eq!(
            (e.kind.as_str(), e.code, e.gpu_index, e.node.as_deref()),
            ("xid", Some(79), Some(3), Some("n07"))
        );
        assert_eq!(e.gpu_uuid.as_deref(), Some("GPU-455d8f70-2051-db6c-0430-ffc457bff834"));
        assert_eq!(e.occurred_at.to_rfc3339(), "2026-11-30T10:00:00+00:00");
        assert_eq!(
            (
                e.attributes["pci_bus_id"].as_str(),
                e.attributes["recommendedAction"].as_str()
            ),
            (Some("0000:3b:00"), Some("RESTART_BM"))
        );
        assert_eq!(e.symptom, None);
        assert!(participates(&e.kind, e.symptom));
        // Stable: the same record is the same id; another cluster another id.
        assert_eq!(map_health_event(&xid79(), "c1", now()).unwrap().id, e.id);
        assert_ne!(map_health_event(&xid79(), "c2", now()).unwrap().id, e.id);
    }

    #[test]
    fn healthy_events_count_as_no_failure() {
        let healthy = json!({"agent": "syslog-health-monitor", "componentClass": "GPU", "checkName": "SysLogsXIDError",
                             "isFatal": false, "isHealthy": true, "message": "No Health Failures", "recommendedAction": 0,
                             "generatedTimestamp": {"seconds": 1796032800, "nanos": 0}, "nodeName": "n07"});
        let e = map_health_event(&healthy, "c1", now()).unwrap();
        assert_eq!((e.kind.as_str(), e.symptom), ("xid", Some(Symptom::None)));
        assert!(!participates(&e.kind, e.symptom));
        assert_eq!(e.attributes["recommendedAction"], "NONE");
        // 1,796,032,800 s = 2026-11-30T10:00:00Z
        assert_eq!(e.occurred_at.to_rfc3339(), "2026-11-30T10:00:00+00:00");
    }

    #[test]
    fn kinds_from_component_check_and_codes() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            kind_and_code("NVSwitch", "SysLogsSXIDError", &s(&["20034"])),
            ("sxid", Some(20034))
        );
        assert_eq!(kind_and_code("GPU", "SysLogsGPUFallenOff", &[]), ("xid", Some(79)));
        assert_eq!(
            kind_and_code("GPU", "GpuMemWatch", &s(&["DCGM_FR_VOLATILE_DBE_DETECTED"])),
            ("ecc", Some(2))
        );
        assert_eq!(
            kind_and_code("GPU", "GpuMemWatch", &s(&["DCGM_FR_VOLATILE_SBE_DETECTED"])),
            ("ecc", Some(1))
        );
        assert_eq!(
            kind_and_code("GPU", "GpuMemWatch", &s(&["DCGM_FR_ROW_REMAP_FAILURE"])),
            ("row_remap", None)
        );
        assert_eq!(
            kind_and_code("GPU", "GpuNvlinkWatch", &s(&["DCGM_FR_NVLINK_DOWN"])),
            ("nvlink", None)
        );
        assert_eq!(
            kind_and_code("GPU", "GpuThermalWatch", &s(&["DCGM_FR_CLOCK_THROTTLE_THERMAL"])),
            ("thermal", None)
        );
        assert_eq!(
            kind_and_code("NIC", "InfiniBandDegradationCheck", &s(&["mlx5_port_down"])),
            ("link_down", None)
        );
        assert_eq!(
            kind_and_code("NIC", "SysLogsNICDriverError", &s(&["netdev_watchdog"])),
            ("link_down", None)
        );
        assert_eq!(kind_and_code("CPU", "KernelPanicCheck", &[]), ("health_check", None));
    }

    #[test]
    fn bodies_and_bad_records() {
        assert_eq!(split_body(json!({"version": 1, "events": [xid79(), xid79()]})).len(), 2);
        assert_eq!(split_body(json!([xid79()])).len(), 1);
        assert_eq!(split_body(xid79()).len(), 1);
        let mut no_node = xid79();
        no_node.as_object_mut().unwrap().remove("nodeName");
        assert_eq!(
            map_health_event(&no_node, "c1", now()).unwrap_err().field.as_deref(),
            Some("nodeName")
        );
        let mut bad_time = xid79();
        bad_time["generatedTimestamp"] = json!("yesterday");
        assert_eq!(
            map_health_event(&bad_time, "c1", now()).unwrap_err().field.as_deref(),
            Some("generatedTimestamp")
        );
        // bson-style lower-case keys read too
        let lower =
            json!({"componentclass": "GPU", "checkname": "SysLogsXIDError", "errorcode": ["48"], "nodename": "n1"});
        let e = map_health_event(&lower, "c1", now()).unwrap();
        assert_eq!((e.kind.as_str(), e.code, e.occurred_at), ("xid", Some(48), now()));
        assert!(map_health_event(&json!("x"), "c1", now()).is_err());
    }
}
