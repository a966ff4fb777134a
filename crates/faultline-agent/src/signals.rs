//! From what the node printed to the signals `POST /v1/events` takes: parsed with faultline-core's
//! parsers (the same as `/v1/logs`), with ids derived from where the signal came from, so that a
//! resend is a duplicate to the server and never a second signal.

use chrono::{DateTime, Duration, Utc};
use faultline_core::domain::event::EventInput;
use faultline_core::logparse::{LineContext, MAX_MESSAGE_BYTES, ParsedSignal, parse_line};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::kmsg::KmsgRecord;
use crate::spool::Severity;

/// Namespace of the agent's signal ids (uuid v5).
const AGENT_NAMESPACE: Uuid = Uuid::from_u128(0x6c1d_93a4_2b7e_4f05_8a9c_d3e2_f10b_4a77);

/// Who is sending.
#[derive(Debug, Clone)]
pub struct NodeId {
    pub cluster: String,
    pub node: String,
}

/// The id of the signal of kernel record `seq` of boot `boot_id`: the same record always gets
/// the same id, whoever reads it and however often.
pub fn kmsg_signal_id(node: &NodeId, boot_id: &str, seq: u64) -> Uuid {
    Uuid::new_v5(
        &AGENT_NAMESPACE,
        format!("kmsg\n{}\n{}\n{boot_id}\n{seq}", node.cluster, node.node).as_bytes(),
    )
}

/// The id of the signal of the journal entry at `cursor` of boot `boot_id`.
pub fn journal_signal_id(node: &NodeId, boot_id: &str, cursor: &str) -> Uuid {
    Uuid::new_v5(
        &AGENT_NAMESPACE,
        format!("journal\n{}\n{}\n{boot_id}\n{cursor}", node.cluster, node.node).as_bytes(),
    )
}

/// A kernel record's event ([`kmsg_event`]) as read from the journal: its id from the entry's
/// cursor, its source and cursor in the attributes instead of a kernel sequence number.
pub fn from_journal(event: &mut EventInput, node: &NodeId, boot_id: &str, cursor: &str) {
    event.id = journal_signal_id(node, boot_id, cursor);
    if let Some(a) = event.attributes.as_mut() {
        a.remove("kmsg_seq");
        a.insert("source".into(), Value::String("agent:journal".into()));
        a.insert("journal_cursor".into(), Value::String(cut(cursor, 512)));
    }
}

/// The id of a kernel log signal after storm compaction ([`crate::storm`]): the node, the boot,
/// the run's key and window, and which part of the run (`first` or `repeats`).
pub fn storm_signal_id(node: &NodeId, boot_id: &str, key: &str, part: &str) -> Uuid {
    Uuid::new_v5(
        &AGENT_NAMESPACE,
        format!("klog\n{}\n{}\n{boot_id}\n{key}\n{part}", node.cluster, node.node).as_bytes(),
    )
}

/// The id of a GPU counter signal: the GPU, the counter and the value it reached (a counter that
/// reaches a value twice, after a reset, is two events only if read twice: the server counts
/// the second as a duplicate, which is what a re-read after a restart is).
pub fn counter_signal_id(node: &NodeId, gpu: &str, counter: &str, value: &str) -> Uuid {
    Uuid::new_v5(
        &AGENT_NAMESPACE,
        format!("gpu\n{}\n{}\n{gpu}\n{counter}\n{value}", node.cluster, node.node).as_bytes(),
    )
}

/// The id of the signal of BMC event log record `record_id` whose time and text hash to
/// `text_hash`. Not the id alone: the log outlives reboots and numbers from 1 again once cleared.
pub fn sel_signal_id(node: &NodeId, record_id: u16, text_hash: u32) -> Uuid {
    Uuid::new_v5(
        &AGENT_NAMESPACE,
        format!("sel\n{}\n{}\n{record_id:04x}\n{text_hash:08x}", node.cluster, node.node).as_bytes(),
    )
}

/// Low severity: what is worth keeping for the precursor analysis but goes first when the spool
/// is full: corrected (single-bit) ECC, and the XIDs applications cause (13 graphics engine
/// exception, 31 MMU fault, 43 stopped channel, 45 preemptive cleanup), which come in storms.
pub fn severity(kind: &str, code: Option<i64>) -> Severity {
    match (kind, code) {
        ("ecc", Some(1)) => Severity::Low,
        ("xid", Some(13 | 31 | 43 | 45)) => Severity::Low,
        _ => Severity::High,
    }
}

/// The wall-clock time of a monotonic kernel timestamp: boot time plus the offset; a time past
/// `now` (a wrong boot time) is `now`.
pub fn kmsg_time(boot_time: DateTime<Utc>, ts_us: u64, now: DateTime<Utc>) -> DateTime<Utc> {
    let t = boot_time + Duration::microseconds(ts_us.min(i64::MAX as u64) as i64);
    if t > now + Duration::minutes(1) { now } else { t }
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The event of a kernel record, if its message is a signal.
pub fn kmsg_event(
    node: &NodeId,
    boot_id: &str,
    boot_time: DateTime<Utc>,
    record: &KmsgRecord,
    now: DateTime<Utc>,
) -> Option<(Severity, EventInput)> {
    let ctx = LineContext::default();
    let sig = parse_line(&record.message, &ctx)?;
    let occurred_at = kmsg_time(boot_time, record.ts_us, now);
    let mut attributes = Map::new();
    attributes.insert("source".into(), Value::String("agent:kmsg".into()));
    attributes.insert("boot_id".into(), Value::String(boot_id.to_string()));
    attributes.insert("kmsg_seq".into(), Value::from(record.seq));
    attributes.insert("monotonic_s".into(), Value::from(record.ts_us as f64 / 1e6));
    attributes.insert(
        "raw_line".into(),
        Value::String(cut(&record.message, MAX_MESSAGE_BYTES)),
    );
    for (k, v) in &record.dict {
        if k == "SUBSYSTEM" || k == "DEVICE" {
            attributes.insert(format!("kmsg_{}", k.to_ascii_lowercase()), Value::String(cut(v, 256)));
        }
    }
    let id = kmsg_signal_id(node, boot_id, record.seq);
    Some(event_of(node, id, occurred_at, sig, attributes))
}

fn event_of(
    node: &NodeId,
    id: Uuid,
    occurred_at: DateTime<Utc>,
    sig: ParsedSignal,
    mut attributes: Map<String, Value>,
) -> (Severity, EventInput) {
    let sev = severity(sig.kind, sig.code);
    if let Some(p) = &sig.pci_bus_id {
        attributes.insert("pci_bus_id".into(), Value::String(p.clone()));
    }
    for (k, v) in sig.attributes {
        attributes.entry(k).or_insert(v);
    }
    let gpu_index = sig.gpu_index.filter(|i| (0..=1023).contains(i));
    (
        sev,
        EventInput {
            id,
            occurred_at: occurred_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            cluster: node.cluster.clone(),
            node: Some(node.node.clone()),
            gpu_index,
            gpu_uuid: None,
            gpu_model: None,
            job_id: None,
            job_gpus: None,
            kind: sig.kind.to_string(),
            code: sig.code,
            symptom: None,
            root_cause: None,
            message: Some(sig.message),
            attributes: Some(attributes),
            repeat_count: None,
            repeat_span_seconds: None,
        },
    )
}

/// Node n1 of cluster c1, for the tests.
#[cfg(test)]
pub fn test_node() -> NodeId {
    NodeId {
        cluster: "c1".into(),
        node: "n1".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kmsg::parse_record;

    fn node() -> NodeId {
        test_node()
    }

    #[test]
    fn a_kernel_xid_becomes_an_event_with_an_id_of_node_boot_and_sequence() {
        let boot: DateTime<Utc> = "2026-11-30T00:00:00Z".parse().unwrap();
        let now: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().unwrap();
        let r = parse_record("3,812,3600000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n SUBSYSTEM=pci").unwrap();
        let (sev, e) = kmsg_event(&node(), "b-1", boot, &r, now).unwrap();
        assert_eq!(sev, Severity::High);
        assert_eq!((e.kind.as_str(), e.code), ("xid", Some(79)));
        assert_eq!(e.occurred_at, "2026-11-30T01:00:00.000000Z");
        assert_eq!(e.id, kmsg_signal_id(&node(), "b-1", 812));
        let a = e.attributes.as_ref().unwrap();
        assert_eq!(a["pci_bus_id"], "0000:3b:00.0");
        assert_eq!(a["kmsg_seq"], 812);
        assert_eq!(a["kmsg_subsystem"], "pci");
        assert_eq!(a["source"], "agent:kmsg");
        // The same record read again has the same id; another boot or sequence another one.
        assert_eq!(kmsg_event(&node(), "b-1", boot, &r, now).unwrap().1.id, e.id);
        assert_ne!(kmsg_signal_id(&node(), "b-2", 812), e.id);
        assert_ne!(kmsg_signal_id(&node(), "b-1", 813), e.id);
        // It is a valid event for the server.
        let v = serde_json::to_value(&e).unwrap();
        faultline_core::domain::event::parse_event(v, now).unwrap();
    }

    #[test]
    fn noise_is_not_sent_and_application_xids_are_low_severity() {
        let now = Utc::now();
        let r = parse_record("6,1,10,-;EXT4-fs (nvme0n1p1): mounted filesystem").unwrap();
        assert!(kmsg_event(&node(), "b", now, &r, now).is_none());
        let r =
            parse_record("4,2,10,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=x, Graphics SM Warp Exception").unwrap();
        assert_eq!(kmsg_event(&node(), "b", now, &r, now).unwrap().0, Severity::Low);
        assert_eq!(severity("ecc", Some(2)), Severity::High);
        assert_eq!(severity("row_remap", None), Severity::High);
    }

    #[test]
    fn a_boot_time_that_puts_records_in_the_future_gives_now() {
        let now: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().unwrap();
        assert_eq!(kmsg_time(now, 3_600_000_000, now), now);
    }
}
