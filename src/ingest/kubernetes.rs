//! Kubernetes interop: core/v1 `Event`s (what `kubectl get events -o json` prints and event
//! exporters' webhook sinks send), `Node` objects or their `conditions` (node-problem-detector,
//! NVSentinel, GKE's GPU device plugin, AKS's and EKS's node agents report faults as node
//! conditions) and `Pod` objects (a container's termination: OOMKilled, Error with its exit code;
//! an eviction), mapped to Faultline signals. Pure.
//!
//! One object may give several signals (a node's bad conditions and its drain or return; one per
//! XID a GPU condition lists), or none (a `Normal` event such as `Scheduled`). Ids are UUID v5: an
//! Event's of its `uid` and `count`, a condition's of its type, status and `lastTransitionTime`
//! (and the XID, for a condition that lists several), a container's termination of the pod uid,
//! the container and `finishedAt`; so a re-sent object is a duplicate.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::domain::event::{Event, FieldError, optional_text, required_text};
use crate::domain::taxonomy::Symptom;

const NAMESPACE: Uuid = Uuid::from_u128(0x3f6b_1d2e_9a47_4c85_b0e3_5a7c_2d91_e604);

/// An `EventList`/`NodeList`/`PodList`/`List` (`items`), an array, or one object.
pub fn split_body(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        Value::Object(mut o) if o.get("items").is_some_and(Value::is_array) => match o.remove("items") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        },
        other => vec![other],
    }
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// An RFC 3339 time at `key` (`field` names it in an error); None when absent or null.
fn time_at(v: &Value, key: &str, field: &str) -> Result<Option<DateTime<Utc>>, FieldError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => DateTime::parse_from_rfc3339(s.trim())
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|_| FieldError::new(field, format!("'{s}' is not an RFC 3339 time"))),
        Some(other) => Err(FieldError::new(field, format!("{other} is not an RFC 3339 time"))),
    }
}

/// The Job a pod belongs to: `batch.kubernetes.io/job-name` or `job-name` label, else an owner
/// reference of kind Job.
pub fn job_name(meta: &Value) -> Option<String> {
    let labels = meta.get("labels");
    let label = |k: &str| labels.and_then(|l| text(l, k)).map(str::to_string);
    label("batch.kubernetes.io/job-name")
        .or_else(|| label("job-name"))
        .or_else(|| {
            meta.get("ownerReferences")?
                .as_array()?
                .iter()
                .find(|o| text(o, "kind") == Some("Job"))
                .and_then(|o| text(o, "name"))
                .map(str::to_string)
        })
}

struct Signal {
    key: String,
    at: DateTime<Utc>,
    node: Option<String>,
    job: Option<String>,
    kind: &'static str,
    code: Option<i64>,
    symptom: Option<Symptom>,
    gpu_index: Option<i32>,
    gpu_uuid: Option<String>,
    message: String,
    attributes: Map<String, Value>,
}

fn event(cluster: &str, s: Signal) -> Result<Event, FieldError> {
    let mut attributes = s.attributes;
    attributes.insert("source".into(), "kubernetes".into());
    Ok(Event {
        id: Uuid::new_v5(&NAMESPACE, format!("{cluster}\n{}", s.key).as_bytes()),
        occurred_at: s.at,
        cluster: required_text("cluster", cluster.to_string())?,
        node: optional_text("node", s.node)?,
        gpu_index: s.gpu_index,
        gpu_uuid: optional_text("gpu_uuid", s.gpu_uuid)?,
        gpu_model: None,
        job_id: optional_text("job_id", s.job)?,
        job_gpus: None,
        kind: s.kind.to_string(),
        code: s.code,
        symptom: s.symptom,
        root_cause: None,
        message: Some(s.message.chars().take(4096).collect()),
        attributes,
        repeat_count: 1,
        last_occurred_at: None,
    })
}

/// Maps one object (Event, Node, Pod, or `{"node", "conditions"}`); an empty list when it says
/// nothing about a failure (a `Normal` event, a healthy pod).
pub fn map_object(value: &Value, cluster: &str, now: DateTime<Utc>) -> Result<Vec<Event>, FieldError> {
    if !value.is_object() {
        return Err(FieldError {
            field: None,
            message: "a Kubernetes object must be a JSON object".into(),
        });
    }
    let kind = text(value, "kind").unwrap_or("");
    let signals = match kind {
        "Event" => map_event(value, now)?,
        "Node" => map_node(value, now)?,
        "Pod" => map_pod(value, now)?,
        _ if value.get("involvedObject").is_some() || value.get("regarding").is_some() => map_event(value, now)?,
        _ if value.get("conditions").is_some() => {
            let node = text(value, "node")
                .or_else(|| text(value, "nodeName"))
                .ok_or_else(|| FieldError::new("node", "missing: the node the conditions are about"))?;
            map_conditions(node, value.get("conditions"), "conditions", false, None, now)?
        }
        "" => return Err(FieldError::new("kind", "missing: an Event, Node or Pod object")),
        other => {
            return Err(FieldError::new(
                "kind",
                format!("'{other}' is not an Event, Node or Pod"),
            ));
        }
    };
    let mut out: Vec<Event> = Vec::with_capacity(signals.len());
    for s in signals {
        let e = event(cluster, s)?;
        if !out.iter().any(|o| o.id == e.id) {
            out.push(e);
        }
    }
    Ok(out)
}

/// The signal kind of an Event by its object kind and reason; None: not a failure signal.
fn event_kind(object: &str, reason: &str, warning: bool, message: &str) -> Option<&'static str> {
    let r = reason.to_ascii_lowercase();
    let kind = match object {
        "Node" => match reason {
            "NodeNotReady" => "node_unreachable",
            "NodeNotSchedulable" => "node_drain",
            "NodeSchedulable" => "node_resume",
            _ if r.contains("oom") => "host_oom",
            "KernelOops" | "KernelPanic" => "kernel_panic",
            // GKE's GPU device plugin (`XIDError`, "Caught XID error, XID=31"), EKS's node
            // monitoring agent (`NvidiaXID79Error`, `NvidiaXID13Warning`).
            _ if r.contains("xid") => "xid",
            _ if warning => "health_check",
            _ => return None,
        },
        _ => match reason {
            // The node controller's echo on each pod of a node it marks not ready ("Node is not
            // ready") names no node: the node's own event and Ready condition carry the fault.
            "NodeNotReady" => return None,
            "Evicted" | "Preempted" | "Preempting" | "FailedScheduling" => "scheduler_error",
            _ if r.contains("oom") => "host_oom",
            "BackOff" | "CrashLoopBackOff" | "BackoffLimitExceeded" | "DeadlineExceeded" => "job_exit",
            "ErrImagePull" | "ImagePullBackOff" | "InspectFailed" | "ErrImageNeverPull" => "submission_error",
            "Failed" if message.to_ascii_lowercase().contains("image") => "submission_error",
            "Failed" => "job_exit",
            "FailedMount" | "FailedAttachVolume" => "storage_error",
            _ if warning => "health_check",
            _ => return None,
        },
    };
    Some(kind)
}

fn map_event(v: &Value, now: DateTime<Utc>) -> Result<Vec<Signal>, FieldError> {
    let (object, object_field) = match v.get("involvedObject") {
        Some(o) => (o, "involvedObject"),
        None => (
            v.get("regarding")
                .ok_or_else(|| FieldError::new("involvedObject", "missing: the object the event is about"))?,
            "regarding",
        ),
    };
    let object_kind = text(object, "kind").unwrap_or("");
    let name = text(object, "name").ok_or_else(|| FieldError::new(format!("{object_field}.name"), "missing"))?;
    let reason = text(v, "reason").unwrap_or("");
    let note = text(v, "message").or_else(|| text(v, "note")).unwrap_or("");
    let warning = text(v, "type") == Some("Warning");
    let count = match v
        .get("count")
        .or_else(|| v.pointer("/series/count"))
        .or_else(|| v.get("deprecatedCount"))
    {
        None | Some(Value::Null) => 1,
        Some(c) => c
            .as_i64()
            .filter(|n| *n >= 0)
            .ok_or_else(|| FieldError::new("count", format!("{c} is not a count")))?,
    };
    let meta = v.get("metadata").cloned().unwrap_or(Value::Null);
    let mut at = None;
    for (key, field) in [
        ("lastTimestamp", "lastTimestamp"),
        ("eventTime", "eventTime"),
        ("firstTimestamp", "firstTimestamp"),
    ] {
        if let Some(t) = time_at(v, key, field)? {
            at = at.or(Some(t));
        }
    }
    let at = match at {
        Some(t) => t,
        None => v
            .get("series")
            .map(|s| time_at(s, "lastObservedTime", "series.lastObservedTime"))
            .transpose()?
            .flatten()
            .or(time_at(&meta, "creationTimestamp", "metadata.creationTimestamp")?)
            .unwrap_or(now),
    };
    let Some(kind) = event_kind(object_kind, reason, warning, note) else {
        return Ok(Vec::new());
    };
    let code = match kind {
        "xid" => number_in(reason).or_else(|| xids_in_text(note).first().copied()),
        _ => None,
    };
    let node = if object_kind == "Node" {
        Some(name.to_string())
    } else {
        v.get("source")
            .and_then(|s| text(s, "host"))
            .or_else(|| text(v, "reportingInstance").filter(|_| text(v, "reportingComponent") == Some("kubelet")))
            .map(str::to_string)
    };
    let job = match object_kind {
        "Job" => Some(name.to_string()),
        "Pod" => job_name(object),
        _ => None,
    };
    let key = match text(&meta, "uid") {
        Some(uid) => format!("event\n{uid}\n{count}"),
        None => format!("event\n{v}"),
    };
    let mut attributes = Map::new();
    attributes.insert("reason".into(), reason.into());
    attributes.insert("type".into(), text(v, "type").unwrap_or("Normal").into());
    attributes.insert("count".into(), count.into());
    let mut involved = Map::new();
    for k in ["kind", "name", "namespace", "uid", "fieldPath"] {
        if let Some(s) = text(object, k) {
            involved.insert(k.into(), s.into());
        }
    }
    attributes.insert("involvedObject".into(), Value::Object(involved));
    if let Some(uid) = text(&meta, "uid") {
        attributes.insert("event_uid".into(), uid.into());
    }
    // NVSentinel and node-problem-detector name GPUs in their messages.
    let gpu = gpu_in_text(note);
    if let Some(p) = &gpu.pci {
        attributes.insert("pci_bus_id".into(), p.clone().into());
    }
    Ok(vec![Signal {
        key,
        at,
        node,
        job,
        kind,
        code,
        symptom: None,
        gpu_index: gpu.index,
        gpu_uuid: gpu.uuid,
        message: format!("{reason}: {note}"),
        attributes,
    }])
}

#[derive(Default)]
struct GpuInText {
    index: Option<i32>,
    uuid: Option<String>,
    pci: Option<String>,
    codes: Vec<String>,
}

/// `ErrorCode:79 PCI:0000:3b:00 GPU:3 GPU-455d...` tokens as NVSentinel writes node conditions.
fn gpu_in_text(message: &str) -> GpuInText {
    let mut g = GpuInText::default();
    for token in message.split(|c: char| c.is_whitespace() || c == ';' || c == ',') {
        if let Some(code) = token.strip_prefix("ErrorCode:") {
            g.codes
                .extend(code.split(',').filter(|c| !c.is_empty()).map(str::to_string));
        } else if let Some(p) = token.strip_prefix("PCI:") {
            g.pci = g
                .pci
                .or(Some(p.trim_end_matches([')', ':']).to_string()).filter(|p| !p.is_empty()));
        } else if let Some(i) = token.strip_prefix("GPU:") {
            if let Ok(i) = i.parse::<i32>()
                && (0..=1023).contains(&i)
            {
                g.index = g.index.or(Some(i));
            } else if i.starts_with("GPU-") {
                g.uuid = g.uuid.or(Some(i.to_string()));
            }
        } else if token.starts_with("GPU-") && token.len() > 20 {
            g.uuid = g.uuid.or(Some(token.to_string()));
        }
    }
    g
}

/// The first number in `text` (`NvidiaXID79Error` -> 79).
fn number_in(text: &str) -> Option<i64> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let digits: String = text[start..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The XIDs a text names: each number after "xid" (any case), then any of `=`, `:`, `-`,
/// spaces ("XID=31", "Xid 79", "XID-48"), in order, without repeats.
fn xids_in_text(text: &str) -> Vec<i64> {
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    for (at, _) in lower.match_indices("xid") {
        let rest = lower[at + 3..].trim_start_matches([' ', '=', ':', '-', '(', '#']);
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse::<i64>()
            && !out.contains(&n)
        {
            out.push(n);
        }
    }
    out
}

/// GKE's GPU device plugin writes the XIDs it saw as the condition's reason, a JSON object of
/// XID -> true (`{"48":true,"79":true}`, container-engine-accelerators
/// `pkg/gpu/nvidia/health_check`); the XIDs set true, in numeric order.
fn gke_xids(reason: &str) -> Vec<i64> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(reason) else {
        return Vec::new();
    };
    let mut xids: Vec<i64> = map
        .iter()
        .filter(|(_, v)| v.as_bool() == Some(true))
        .filter_map(|(k, _)| k.trim().parse().ok())
        .collect();
    xids.sort_unstable();
    xids.dedup();
    xids
}

/// Whether a condition of this type and status reports a problem: `Ready` not True; the other
/// `...Ready` conditions (EKS's node monitoring agent: `AcceleratedHardwareReady`, `KernelReady`,
/// `NetworkingReady`, `StorageReady`, `ContainerRuntimeReady`) False (Unknown: not evaluated);
/// any other condition (a problem's name) True.
fn condition_is_bad(kind: &str, status: &str) -> bool {
    match kind {
        "Ready" => status != "True",
        k if k.ends_with("Ready") => status == "False",
        _ => status == "True",
    }
}

/// EKS's node monitoring agent names the issue of `AcceleratedHardwareReady` in its reason
/// (aws/eks-node-monitoring-agent `pkg/reasons`).
fn eks_accelerated_hardware(reason: &str) -> (&'static str, Option<i64>) {
    let xid = reason
        .strip_prefix("NvidiaXID")
        .and_then(|r| r.strip_suffix("Error").or_else(|| r.strip_suffix("Warning")))
        .and_then(|n| n.parse().ok());
    if let Some(n) = xid {
        return ("xid", Some(n));
    }
    match reason {
        "NvidiaDoubleBitError" => ("ecc", Some(2)),
        "NvidiaNVLinkError" => ("nvlink", None),
        "NvidiaThermalError" => ("thermal", None),
        "NvidiaPowerError" => ("power", None),
        // DCGM findings, device count, PCIe, fabric, page retirement, Neuron: the catalog's
        // health-check rules read the message.
        _ => ("health_check", None),
    }
}

/// The signals of a bad node condition: (kind, code) each, and whether the condition lists
/// several codes (then each signal's id holds its code).
fn condition_kinds(kind: &str, reason: &str, note: &str, codes: &[String]) -> (Vec<(&'static str, Option<i64>)>, bool) {
    let one = |k: &'static str, c: Option<i64>| (vec![(k, c)], false);
    let listed = |xids: Vec<i64>| {
        if xids.is_empty() {
            (vec![("xid", None)], false)
        } else {
            (xids.into_iter().map(|x| ("xid", Some(x))).collect(), true)
        }
    };
    match kind {
        "Ready" => one("node_unreachable", None),
        "NetworkUnavailable" => one("link_down", None),
        "KernelDeadlock" => one("kernel_panic", None),
        "ReadonlyFilesystem" | "FilesystemCorruptionProblem" => one("storage_error", None),
        "MemoryPressure"
        | "DiskPressure"
        | "PIDPressure"
        | "FrequentKubeletRestart"
        | "FrequentDockerRestart"
        | "FrequentContainerdRestart"
        | "ContainerRuntimeUnhealthy"
        | "KubeletUnhealthy" => one("health_check", None),
        // GKE's GPU device plugin: the reason lists the XIDs.
        "XidCriticalError" => listed(gke_xids(reason)),
        // AKS's node-problem-detector GPU checks (learn.microsoft.com aks/gpu-health-monitoring).
        "XIDErrors" => listed(xids_in_text(&format!("{reason} {note}"))),
        "NVLinkStatusInactive" => one("nvlink", None),
        "IBLinkFlapping" => one("link_flap", None),
        "GPUMissing" => one("health_check", None),
        // EKS's node monitoring agent.
        "AcceleratedHardwareReady" => {
            let (k, c) = eks_accelerated_hardware(reason);
            one(k, c)
        }
        "KernelReady" | "NetworkingReady" | "StorageReady" | "ContainerRuntimeReady" => one("health_check", None),
        // NVSentinel names its conditions after the check (`GpuXidError`, `GpuMemWatch`, ...).
        other => {
            let (k, c) = super::nvsentinel::kind_and_code("", other, codes);
            one(k, c)
        }
    }
}

/// A Node's conditions (`status.conditions`) and cordon (`spec.unschedulable`): each bad condition
/// (Ready not True; any other True) a signal; then the node's state, a `node_drain` from the
/// earliest bad condition (or the cordon) or, when all are good, a `node_resume` at the latest
/// transition.
fn map_conditions(
    node: &str,
    conditions: Option<&Value>,
    path: &str,
    cordoned: bool,
    cordoned_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Vec<Signal>, FieldError> {
    let list = match conditions {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(a)) => a.as_slice(),
        Some(_) => return Err(FieldError::new(path, "must be a list of conditions")),
    };
    let mut out = Vec::new();
    let mut drained_since: Option<DateTime<Utc>> = None;
    let mut reasons = Vec::new();
    let mut latest: Option<DateTime<Utc>> = None;
    for (i, c) in list.iter().enumerate() {
        let field = |k: &str| format!("{path}[{i}].{k}");
        let kind = text(c, "type").ok_or_else(|| FieldError::new(field("type"), "missing"))?;
        let status = text(c, "status").ok_or_else(|| FieldError::new(field("status"), "missing"))?;
        if !matches!(status, "True" | "False" | "Unknown") {
            return Err(FieldError::new(
                field("status"),
                format!("'{status}' is not True, False or Unknown"),
            ));
        }
        let at = time_at(c, "lastTransitionTime", &field("lastTransitionTime"))?
            .or(time_at(c, "lastHeartbeatTime", &field("lastHeartbeatTime"))?)
            .unwrap_or(now);
        latest = latest.max(Some(at));
        if !condition_is_bad(kind, status) {
            continue;
        }
        let reason = text(c, "reason").unwrap_or("");
        let note = text(c, "message").unwrap_or("");
        let gpu = gpu_in_text(note);
        let (signals, per_code) = condition_kinds(kind, reason, note, &gpu.codes);
        let mut attributes = Map::new();
        attributes.insert("condition".into(), kind.into());
        attributes.insert("status".into(), status.into());
        attributes.insert("reason".into(), reason.into());
        if !gpu.codes.is_empty() {
            attributes.insert("errorCode".into(), gpu.codes.clone().into());
        }
        if let Some(p) = &gpu.pci {
            attributes.insert("pci_bus_id".into(), p.clone().into());
        }
        let message = format!("{kind} {status}: {reason}: {note}");
        reasons.push(format!("{kind}={status} ({reason})"));
        drained_since = Some(drained_since.map_or(at, |d| d.min(at)));
        for (signal_kind, code) in signals {
            let mut key = format!("condition\n{node}\n{kind}\n{status}\n{}", at.to_rfc3339());
            if per_code {
                key.push_str(&format!("\n{}", code.unwrap_or(-1)));
            }
            out.push(Signal {
                key,
                at,
                node: Some(node.to_string()),
                job: None,
                kind: signal_kind,
                code,
                symptom: None,
                gpu_index: gpu.index,
                gpu_uuid: gpu.uuid.clone(),
                message: message.clone(),
                attributes: attributes.clone(),
            });
        }
    }
    if cordoned {
        reasons.push("cordoned (spec.unschedulable)".into());
        let at = cordoned_at.unwrap_or(now);
        drained_since = Some(drained_since.map_or(at, |d| d.min(at)));
    }
    let state = match (drained_since, latest) {
        (Some(at), _) => Some(("node_drain", at, format!("Kubernetes: {}", reasons.join(", ")))),
        (None, Some(at)) => Some(("node_resume", at, "Kubernetes: every condition healthy".to_string())),
        (None, None) => None,
    };
    if let Some((kind, at, message)) = state {
        let mut attributes = Map::new();
        attributes.insert("from".into(), "node_conditions".into());
        out.push(Signal {
            key: format!("state\n{node}\n{kind}\n{}", at.to_rfc3339()),
            at,
            node: Some(node.to_string()),
            job: None,
            kind,
            code: None,
            symptom: None,
            gpu_index: None,
            gpu_uuid: None,
            message,
            attributes,
        });
    }
    Ok(out)
}

fn map_node(v: &Value, now: DateTime<Utc>) -> Result<Vec<Signal>, FieldError> {
    let meta = v.get("metadata").cloned().unwrap_or(Value::Null);
    let name = text(&meta, "name").ok_or_else(|| FieldError::new("metadata.name", "missing"))?;
    let spec = v.get("spec").cloned().unwrap_or(Value::Null);
    let cordoned = spec.get("unschedulable").and_then(Value::as_bool).unwrap_or(false);
    // The cordon's time is its taint's `timeAdded`.
    let cordoned_at = spec
        .get("taints")
        .and_then(Value::as_array)
        .and_then(|t| {
            t.iter()
                .find(|t| text(t, "key") == Some("node.kubernetes.io/unschedulable"))
        })
        .map(|t| time_at(t, "timeAdded", "spec.taints.timeAdded"))
        .transpose()?
        .flatten();
    let conditions = v.get("status").and_then(|s| s.get("conditions"));
    map_conditions(name, conditions, "status.conditions", cordoned, cordoned_at, now)
}

fn map_pod(v: &Value, now: DateTime<Utc>) -> Result<Vec<Signal>, FieldError> {
    let meta = v.get("metadata").cloned().unwrap_or(Value::Null);
    let name = text(&meta, "name").ok_or_else(|| FieldError::new("metadata.name", "missing"))?;
    let namespace = text(&meta, "namespace").unwrap_or("default");
    let uid = text(&meta, "uid")
        .map(str::to_string)
        .unwrap_or_else(|| format!("{namespace}/{name}"));
    let node = v.pointer("/spec/nodeName").and_then(Value::as_str).map(str::to_string);
    let job = job_name(&meta);
    let status = v.get("status").cloned().unwrap_or(Value::Null);
    let base = || {
        let mut a = Map::new();
        a.insert("pod".into(), name.into());
        a.insert("namespace".into(), namespace.into());
        a.insert("pod_uid".into(), uid.clone().into());
        a
    };
    let mut out = Vec::new();
    for list in ["initContainerStatuses", "containerStatuses"] {
        let Some(statuses) = status.get(list) else { continue };
        let statuses = statuses
            .as_array()
            .ok_or_else(|| FieldError::new(format!("status.{list}"), "must be a list"))?;
        for (i, cs) in statuses.iter().enumerate() {
            let container = text(cs, "name").unwrap_or("");
            for state in ["state", "lastState"] {
                let Some(t) = cs.get(state).and_then(|s| s.get("terminated")) else {
                    continue;
                };
                let field = |k: &str| format!("status.{list}[{i}].{state}.terminated.{k}");
                let exit = t
                    .get("exitCode")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| FieldError::new(field("exitCode"), "missing or not an integer"))?;
                let reason = text(t, "reason").unwrap_or("");
                if exit == 0 && reason != "OOMKilled" {
                    continue;
                }
                let at = time_at(t, "finishedAt", &field("finishedAt"))?.unwrap_or(now);
                let kind = if reason == "OOMKilled" { "host_oom" } else { "job_exit" };
                let note = text(t, "message").map(|m| format!(": {m}")).unwrap_or_default();
                let mut attributes = base();
                attributes.insert("container".into(), container.into());
                attributes.insert("reason".into(), reason.into());
                attributes.insert("exit_code".into(), exit.into());
                out.push(Signal {
                    key: format!(
                        "pod\n{uid}\n{container}\n{}\n{}",
                        at.to_rfc3339(),
                        text(t, "containerID").unwrap_or("")
                    ),
                    at,
                    node: node.clone(),
                    job: job.clone(),
                    kind,
                    code: Some(exit),
                    symptom: Some(Symptom::JobCrash),
                    gpu_index: None,
                    gpu_uuid: None,
                    message: format!(
                        "container {container} of pod {namespace}/{name} terminated: {reason} (exit code {exit}){note}"
                    ),
                    attributes,
                });
            }
        }
    }
    if text(&status, "reason") == Some("Evicted") {
        let note = text(&status, "message").unwrap_or("");
        // The eviction is the pod's last condition change (Ready turning False, DisruptionTarget).
        let mut at = None;
        if let Some(conditions) = status.get("conditions").and_then(Value::as_array) {
            for (i, c) in conditions.iter().enumerate() {
                let t = time_at(
                    c,
                    "lastTransitionTime",
                    &format!("status.conditions[{i}].lastTransitionTime"),
                )?;
                at = at.max(t);
            }
        }
        out.push(Signal {
            key: format!("pod\n{uid}\nevicted"),
            at: at.unwrap_or(now),
            node: node.clone(),
            job: job.clone(),
            kind: "scheduler_error",
            code: None,
            symptom: Some(Symptom::JobCrash),
            gpu_index: None,
            gpu_uuid: None,
            message: format!("Evicted: {note}"),
            attributes: base(),
        });
    }
    Ok(out)
}

#[cfg(test)]
#[path = "kubernetes_tests.rs"]
mod tests;
