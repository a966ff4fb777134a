//! From shipper records and raw lines to signals. Pure: the HTTP handler (`http/logs.rs`) splits
//! the body, this module reads records (Vector, Fluent Bit and similar HTTP outputs), parses each
//! line with [`parse_line`] and builds validated [`Event`]s with stable ids.

use std::collections::HashMap;

use chrono::{DateTime, Datelike, Duration, NaiveDateTime, TimeZone, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{LineContext, MAX_MESSAGE_BYTES, ParsedSignal, parse_line, scan};
use crate::domain::event::{Event, FieldError, MAX_FUTURE_SKEW_HOURS, optional_text, required_text};
use crate::domain::taxonomy::Symptom;

/// Lines longer than this are cut (on a char boundary) before parsing and counted as truncated;
/// every signal anchor sits near the start of a line, and a megabyte "line" is a broken sender.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Namespace of log-line signal ids (uuid v5).
const LINE_NAMESPACE: Uuid = Uuid::from_u128(0x3f0b_51c2_7a1e_4d8c_9b3a_2e4f_6a7d_8c90);

/// Which record fields hold what. Each list is tried in order; a dotted name (`kubernetes.host`)
/// also looks into nested objects.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldNames {
    pub message: Vec<String>,
    pub host: Vec<String>,
    pub timestamp: Vec<String>,
    pub job: Vec<String>,
    pub cluster: Vec<String>,
}

impl Default for FieldNames {
    /// Vector's (`message`, `host`, `timestamp`) and Fluent Bit's (`log`, `hostname`, `date`,
    /// `@timestamp`, `time`) conventions, plus journald's upper-case names.
    fn default() -> Self {
        let v = |names: &[&str]| names.iter().map(|s| s.to_string()).collect();
        FieldNames {
            message: v(&["message", "log", "MESSAGE", "msg"]),
            host: v(&["host", "hostname", "_HOSTNAME", "node", "kubernetes.host"]),
            timestamp: v(&["timestamp", "@timestamp", "time", "date", "__REALTIME_TIMESTAMP"]),
            job: v(&["job_id", "slurm_job_id", "SLURM_JOB_ID", "job"]),
            cluster: v(&["cluster"]),
        }
    }
}

/// One shipper record, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The log text; may hold several lines.
    pub message: String,
    pub host: Option<String>,
    pub time: Option<DateTime<Utc>>,
    pub job_id: Option<String>,
    pub cluster: Option<String>,
}

fn lookup<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    if let Some(v) = obj.get(name) {
        return Some(v);
    }
    let mut parts = name.split('.');
    let mut cur = obj.get(parts.next()?)?;
    for p in parts {
        cur = cur.as_object()?.get(p)?;
    }
    Some(cur)
}

fn first<'a>(obj: &'a Map<String, Value>, names: &'a [String]) -> Option<(&'a str, &'a Value)> {
    names
        .iter()
        .find_map(|n| lookup(obj, n).filter(|v| !v.is_null()).map(|v| (n.as_str(), v)))
}

/// A scalar as text (Slurm job ids are often numbers).
fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Reads one record. A missing or non-text message is an error; an unreadable timestamp is an
/// error too (rather than silently using the request time).
pub fn read_record(value: &Value, names: &FieldNames) -> Result<Record, FieldError> {
    let obj = value.as_object().ok_or_else(|| FieldError {
        field: None,
        message: "a record must be a JSON object".into(),
    })?;
    let (mfield, mval) = first(obj, &names.message).ok_or_else(|| FieldError {
        field: None,
        message: format!("no message field (looked for {})", names.message.join(", ")),
    })?;
    let message = match mval {
        Value::String(s) => s.clone(),
        Value::Array(lines) if lines.iter().all(Value::is_string) => {
            lines.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n")
        }
        _ => return Err(FieldError::new(mfield, "the message must be a string")),
    };
    let time = match first(obj, &names.timestamp) {
        None => None,
        Some((field, v)) => Some(parse_time_value(v).ok_or_else(|| {
            FieldError::new(field, format!("{v} is neither an RFC 3339 timestamp nor epoch seconds"))
        })?),
    };
    let text = |list: &[String]| {
        first(obj, list)
            .and_then(|(_, v)| text_of(v))
            .filter(|s| !s.trim().is_empty())
    };
    Ok(Record {
        message,
        host: text(&names.host),
        time,
        job_id: text(&names.job),
        cluster: text(&names.cluster),
    })
}

/// RFC 3339 (also with a space instead of `T`), `YYYY-MM-DD HH:MM:SS[.f]` taken as UTC, or epoch
/// seconds as a number or digit string (a value above 1e11 is taken as milliseconds, above 1e14
/// as microseconds: journald's `__REALTIME_TIMESTAMP`).
pub fn parse_time_value(v: &Value) -> Option<DateTime<Utc>> {
    match v {
        Value::Number(n) => epoch(n.as_f64()?),
        Value::String(s) => {
            let s = s.trim();
            if let Ok(t) = DateTime::parse_from_rfc3339(s) {
                return Some(t.with_timezone(&Utc));
            }
            if let Ok(t) = DateTime::parse_from_rfc3339(&s.replacen(' ', "T", 1)) {
                return Some(t.with_timezone(&Utc));
            }
            for f in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
                if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
                    return Some(Utc.from_utc_datetime(&t));
                }
            }
            s.parse::<f64>().ok().and_then(epoch)
        }
        _ => None,
    }
}

fn epoch(x: f64) -> Option<DateTime<Utc>> {
    if !x.is_finite() || x < 0.0 {
        return None;
    }
    let secs = if x > 1e14 {
        x / 1e6
    } else if x > 1e11 {
        x / 1e3
    } else {
        x
    };
    let whole = secs.floor();
    DateTime::from_timestamp(whole as i64, ((secs - whole) * 1e9).round().min(999_999_999.0) as u32)
}

/// Cuts `line` to [`MAX_LINE_BYTES`]; true when it was cut.
pub fn bound_line(line: &str) -> (&str, bool) {
    scan::truncate(line, MAX_LINE_BYTES)
}

/// Where a line came from.
#[derive(Debug, Clone, Copy)]
pub struct LineSource<'a> {
    pub cluster: &'a str,
    /// The record's host or the request's `node`; when None, the line's own host column.
    pub node: Option<&'a str>,
    pub job_id: Option<&'a str>,
    pub record_time: Option<DateTime<Utc>>,
    /// The request time: the last resort for `occurred_at`.
    pub received_at: DateTime<Utc>,
}

impl LineSource<'_> {
    /// The year assumed for lines without one: the record's, else the request's.
    pub fn line_context(&self) -> LineContext {
        LineContext {
            year: self.record_time.unwrap_or(self.received_at).year(),
        }
    }
}

/// Counts identical (host, time, line) triples within one request so that repeats of a line get
/// distinct ids, and the same request sent again gets the same ids.
#[derive(Default)]
pub struct Occurrences(HashMap<Uuid, u32>);

impl Occurrences {
    pub fn next(&mut self, base: Uuid) -> u32 {
        let n = self.0.entry(base).or_insert(0);
        *n += 1;
        *n - 1
    }
}

/// The stable id of a line's signal: uuid v5 of cluster, host, the line's (else the record's)
/// timestamp, the line, and its occurrence number among identical ones in the request. Without
/// any timestamp the time part is empty, so resending a file is idempotent.
pub fn line_event_id(
    cluster: &str,
    host: Option<&str>,
    time: Option<DateTime<Utc>>,
    line: &str,
    occurrence: u32,
) -> Uuid {
    let t = time
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
        .unwrap_or_default();
    let base = format!("{cluster}\n{}\n{t}\n{line}", host.unwrap_or(""));
    if occurrence == 0 {
        Uuid::new_v5(&LINE_NAMESPACE, base.as_bytes())
    } else {
        Uuid::new_v5(&LINE_NAMESPACE, format!("{base}\n#{occurrence}").as_bytes())
    }
}

/// Builds the event for one parsed line. `occurred_at`: the line's own absolute timestamp, else
/// the record's, else the request time (`attributes.time_source` says which). A time more than
/// 24 h in the future (a wrong assumed year) falls through to the next source.
pub fn signal_event(
    line: &str,
    sig: ParsedSignal,
    src: &LineSource,
    occurrences: &mut Occurrences,
) -> Result<Event, FieldError> {
    let limit = src.received_at + Duration::hours(MAX_FUTURE_SKEW_HOURS);
    let plausible = |t: Option<DateTime<Utc>>| t.filter(|t| *t <= limit);
    let (occurred_at, time_source, id_time) = match (plausible(sig.occurred_at), plausible(src.record_time)) {
        (Some(t), _) => (t, "line", Some(t)),
        (None, Some(t)) => (t, "record", Some(t)),
        (None, None) => (src.received_at, "received", None),
    };
    let cluster = required_text("cluster", src.cluster.to_string())?;
    let node = optional_text("node", src.node.map(str::to_string).or_else(|| sig.host.clone()))?;
    let job_id = optional_text("job_id", src.job_id.map(str::to_string))?;
    let base = line_event_id(&cluster, node.as_deref(), id_time, line, 0);
    let occurrence = occurrences.next(base);
    let id = if occurrence == 0 {
        base
    } else {
        line_event_id(&cluster, node.as_deref(), id_time, line, occurrence)
    };

    let mut attributes = sig.attributes;
    let (raw, cut) = scan::truncate(line, MAX_MESSAGE_BYTES);
    attributes.insert("raw_line".into(), Value::String(raw.to_string()));
    if cut {
        attributes.insert("raw_line_truncated".into(), Value::Bool(true));
    }
    attributes.insert("source".into(), Value::String("logs".into()));
    attributes.insert("time_source".into(), Value::String(time_source.into()));
    if let Some(p) = &sig.pci_bus_id {
        attributes.insert("pci_bus_id".into(), Value::String(p.clone()));
    }
    if let Some(r) = sig.rank {
        attributes.insert("rank".into(), Value::from(r));
    }
    if let Some(h) = &sig.host
        && node.as_deref() != Some(h.as_str())
    {
        attributes.insert("line_host".into(), Value::String(h.clone()));
    }
    let gpu_index = match sig.gpu_index {
        Some(i) if (0..=1023).contains(&i) => Some(i),
        Some(i) => {
            attributes.insert("gpu_ordinal".into(), Value::from(i));
            None
        }
        None => None,
    };
    Ok(Event {
        id,
        occurred_at,
        cluster,
        node,
        gpu_index,
        gpu_uuid: None,
        gpu_model: None,
        job_id,
        job_gpus: None,
        kind: sig.kind.to_string(),
        code: sig.code,
        // The watchdog timeout is how a hung collective shows; the catalog gives the cause.
        symptom: (sig.kind == "nccl_timeout").then_some(Symptom::JobHang),
        root_cause: None,
        message: Some(sig.message),
        attributes,
        repeat_count: 1,
        last_occurred_at: None,
    })
}

/// What happened to one line.
#[derive(Debug)]
pub enum LineOutcome {
    Signal(Box<Event>),
    Unmatched,
    Invalid(FieldError),
}

/// Parses one (already bounded) line and builds its event.
pub fn ingest_line(line: &str, src: &LineSource, occurrences: &mut Occurrences) -> LineOutcome {
    match parse_line(line, &src.line_context()) {
        None => LineOutcome::Unmatched,
        Some(sig) => match signal_event(line, sig, src, occurrences) {
            Ok(e) => LineOutcome::Signal(Box::new(e)),
            Err(e) => LineOutcome::Invalid(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        "2026-11-30T12:00:00Z".parse().unwrap()
    }

    fn src<'a>(node: Option<&'a str>, record_time: Option<DateTime<Utc>>) -> LineSource<'a> {
        LineSource {
            cluster: "c1",
            node,
            job_id: Some("j1"),
            record_time,
            received_at: now(),
        }
    }

    const XID79: &str =
        "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.";

    #[test]
    fn vector_and_fluent_bit_records_are_read_with_the_defaults() {
        let names = FieldNames::default();
        let vector = json!({"message": XID79, "host": "n07", "timestamp": "2026-11-30T10:00:00.123Z", "source_type": "journald"});
        let r = read_record(&vector, &names).unwrap();
        assert_eq!(
            (r.host.as_deref(), r.time.unwrap().to_rfc3339()),
            (Some("n07"), "2026-11-30T10:00:00.123+00:00".to_string())
        );
        // Fluent Bit: `log`, `date` as epoch seconds with a fraction, numeric Slurm job id.
        let fluent =
            json!({"date": 1_796_032_800.5, "log": XID79, "hostname": "n08", "SLURM_JOB_ID": 4242, "cluster": "c2"});
        let r = read_record(&fluent, &names).unwrap();
        assert_eq!(r.message, XID79);
        assert_eq!(
            (r.host.as_deref(), r.job_id.as_deref(), r.cluster.as_deref()),
            (Some("n08"), Some("4242"), Some("c2"))
        );
        // 1,796,032,800 s = 2026-11-30T10:00:00Z
        assert_eq!(r.time.unwrap().to_rfc3339(), "2026-11-30T10:00:00.500+00:00");
        // Configured names, nested.
        let names = FieldNames {
            message: vec!["body".into()],
            host: vec!["k8s.node".into()],
            ..FieldNames::default()
        };
        let r = read_record(&json!({"body": "x", "k8s": {"node": "n09"}}), &names).unwrap();
        assert_eq!(r.host.as_deref(), Some("n09"));
    }

    #[test]
    fn bad_records_say_why() {
        let names = FieldNames::default();
        let e = read_record(&json!({"host": "n1", "msg2": "x"}), &names).unwrap_err();
        assert!(e.message.contains("no message field"), "{e:?}");
        let e = read_record(&json!({"message": 5}), &names).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("message"));
        let e = read_record(&json!({"message": "x", "timestamp": "yesterday"}), &names).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("timestamp"));
        assert!(read_record(&json!([1, 2]), &names).is_err());
    }

    #[test]
    fn times_in_the_usual_shapes() {
        let t = |v: Value| parse_time_value(&v).map(|t| t.to_rfc3339());
        let want = Some("2026-11-30T10:00:00+00:00".to_string());
        assert_eq!(t(json!("2026-11-30T11:00:00+01:00")), want);
        assert_eq!(t(json!("2026-11-30 10:00:00")), want);
        assert_eq!(t(json!(1_796_032_800)), want);
        assert_eq!(t(json!("1796032800")), want);
        assert_eq!(t(json!(1_796_032_800_000u64)), want);
        assert_eq!(t(json!("1796032800000000")), want);
        assert_eq!(t(json!("soon")), None);
        assert_eq!(t(json!(-5)), None);
    }

    #[test]
    fn a_line_becomes_an_event_with_a_stable_id_and_its_facts() {
        let at: DateTime<Utc> = "2026-11-30T10:00:00Z".parse().unwrap();
        let s = src(Some("n07"), Some(at));
        let LineOutcome::Signal(e) = ingest_line(XID79, &s, &mut Occurrences::default()) else {
            panic!()
        };
        assert_eq!(
            (e.kind.as_str(), e.code, e.node.as_deref(), e.job_id.as_deref()),
            ("xid", Some(79), Some("n07"), Some("j1"))
        );
        assert_eq!(e.occurred_at, at);
        assert_eq!(e.attributes["raw_line"], XID79);
        assert_eq!(e.attributes["pci_bus_id"], "0000:3b:00.0");
        assert_eq!(e.attributes["time_source"], "record");
        let LineOutcome::Signal(again) = ingest_line(XID79, &s, &mut Occurrences::default()) else {
            panic!()
        };
        assert_eq!(e.id, again.id, "the same line from the same request is the same id");
        // A second identical line in the same request is a second occurrence.
        let mut occ = Occurrences::default();
        let a = ingest_line(XID79, &s, &mut occ);
        let b = ingest_line(XID79, &s, &mut occ);
        let (LineOutcome::Signal(a), LineOutcome::Signal(b)) = (a, b) else {
            panic!()
        };
        assert_ne!(a.id, b.id);
        // Another host or time is another id.
        let LineOutcome::Signal(other) = ingest_line(XID79, &src(Some("n08"), Some(at)), &mut Occurrences::default())
        else {
            panic!()
        };
        assert_ne!(other.id, e.id);
    }

    #[test]
    fn the_lines_own_time_wins_and_a_future_one_falls_back() {
        let line = "2026-11-30T09:00:00.000000+00:00 n07 kernel: NVRM: Xid (PCI:0000:1b:00): 94, pid=1, name=p, Contained ECC error.";
        let s = src(None, Some("2026-11-30T10:00:00Z".parse().unwrap()));
        let LineOutcome::Signal(e) = ingest_line(line, &s, &mut Occurrences::default()) else {
            panic!()
        };
        assert_eq!(e.occurred_at.to_rfc3339(), "2026-11-30T09:00:00+00:00");
        assert_eq!(
            e.node.as_deref(),
            Some("n07"),
            "the line's host column when no node is given"
        );
        let future = line.replace("2026-11-30T09", "2027-05-30T09");
        let LineOutcome::Signal(e) = ingest_line(&future, &s, &mut Occurrences::default()) else {
            panic!()
        };
        assert_eq!(
            (e.occurred_at.to_rfc3339().as_str(), &e.attributes["time_source"]),
            ("2026-11-30T10:00:00+00:00", &json!("record"))
        );
        let LineOutcome::Signal(e) = ingest_line(XID79, &src(None, None), &mut Occurrences::default()) else {
            panic!()
        };
        assert_eq!(
            (e.occurred_at, &e.attributes["time_source"]),
            (now(), &json!("received"))
        );
    }

    #[test]
    fn noise_and_numberless_xids_are_unmatched_and_bad_hosts_invalid() {
        let s = src(Some("n1"), None);
        let mut occ = Occurrences::default();
        assert!(matches!(
            ingest_line("Dec  6 12:00:00 n1 sshd[1]: Accepted publickey", &s, &mut occ),
            LineOutcome::Unmatched
        ));
        assert!(matches!(
            ingest_line("NVRM: Xid (PCI:0000:3b:00): , pid=1, name=x", &s, &mut occ),
            LineOutcome::Unmatched
        ));
        let bad = LineSource {
            node: Some("bad\u{7}host"),
            ..s
        };
        assert!(
            matches!(ingest_line(XID79, &bad, &mut occ), LineOutcome::Invalid(f) if f.field.as_deref() == Some("node"))
        );
    }

    /// Robustness of the record path: mutated records (wrong types, missing fields, garbage
    /// strings, deep nesting) never panic and either read or say why.
    #[test]
    fn mutated_records_never_panic() {
        let names = FieldNames::default();
        let mut x: u64 = 0x1234_5678_9ABC_DEF1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let values = [
            json!(null),
            json!(true),
            json!(-1),
            json!(1e300),
            json!(f64::MAX),
            json!(""),
            json!("\u{0}\u{FFFD}"),
            json!(XID79),
            json!([XID79, 3]),
            json!({"a": {"b": null}}),
            json!("9999999999999999999999"),
            json!("2026-13-45T99:99:99Z"),
            json!(1_796_032_800),
            json!([]),
        ];
        let keys = [
            "message",
            "log",
            "host",
            "hostname",
            "timestamp",
            "@timestamp",
            "time",
            "date",
            "job_id",
            "cluster",
            "kubernetes",
        ];
        let s = src(None, None);
        for _ in 0..20_000 {
            let mut obj = Map::new();
            for _ in 0..(rnd() % 6) {
                let k = keys[(rnd() % keys.len() as u64) as usize];
                obj.insert(k.into(), values[(rnd() % values.len() as u64) as usize].clone());
            }
            let v = if rnd() % 10 == 0 {
                values[(rnd() % values.len() as u64) as usize].clone()
            } else {
                Value::Object(obj)
            };
            if let Ok(r) = read_record(&v, &names) {
                let src = LineSource {
                    node: r.host.as_deref(),
                    record_time: r.time,
                    ..s
                };
                for line in r.message.split('\n') {
                    let _ = ingest_line(bound_line(line).0, &src, &mut Occurrences::default());
                }
            }
        }
    }
}
