//! The BMC's system event log: runs `ipmitool sel elist` every `--sel-interval` (jittered) and
//! spools each record not spooled before as a `bmc_event` signal, worded as ipmitool prints it
//! (`Sensor | Event | Asserted`, the wording the server's classifier knows). The records already
//! spooled are kept in `sel.json` by id and a hash of their time and text, since a cleared log
//! numbers its records from 1 again; only those the log still holds are kept.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Local, TimeZone, Utc};
use faultline_core::domain::event::EventInput;
use faultline_core::logparse::ipmi_sel::{SelEntry, parse_sel_elist};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::signals::{NodeId, sel_signal_id};
use crate::spool::{Severity, Spool};
use crate::state::{Paths, Shared};

/// How long one `ipmitool sel elist` may take (a long log over a slow BMC interface is slow).
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// What `sel.json` holds: the keys ([`key`]) of the spooled records the log still holds.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelState {
    pub spooled: BTreeSet<String>,
}

impl SelState {
    fn load(paths: &Paths) -> SelState {
        std::fs::read(paths.sel())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }
}

/// The hash of a record's time and text (see [`SelEntry::identity`]).
pub fn text_hash(e: &SelEntry) -> u32 {
    crc32fast::hash(e.identity().as_bytes())
}

/// A record's key in `sel.json`: its id and [`text_hash`].
pub fn key(e: &SelEntry) -> String {
    format!("{:04x}:{:08x}", e.record_id, text_hash(e))
}

/// The records of `entries` not spooled yet, and the state once they are: the keys of every
/// record the log holds now (those cleared from it are forgotten, so the state stays bounded).
pub fn select_new<'a>(state: &SelState, entries: &'a [SelEntry]) -> (Vec<&'a SelEntry>, SelState) {
    let mut next = SelState::default();
    let mut new = Vec::new();
    for e in entries {
        let k = key(e);
        if !state.spooled.contains(&k) && !next.spooled.contains(&k) {
            new.push(e);
        }
        next.spooled.insert(k);
    }
    (new, next)
}

/// When the record happened: its time in the zone ipmitool printed (a UTC or numeric zone), else
/// in the node's own (`local`), ipmitool's default. A record without a time (`Pre-Init`) and one
/// stamped in the future (a BMC clock ahead) are `now`.
pub fn occurred_at<Tz: TimeZone>(e: &SelEntry, local: &Tz, now: DateTime<Utc>) -> DateTime<Utc> {
    let Some(naive) = e.at else { return now };
    let t = match e.utc_offset() {
        Some(offset) => offset
            .from_local_datetime(&naive)
            .single()
            .map(|t| t.with_timezone(&Utc)),
        // A time the clock skipped (spring forward) is read an hour later, as the clock showed.
        None => local
            .from_local_datetime(&naive)
            .earliest()
            .or_else(|| {
                local
                    .from_local_datetime(&(naive + chrono::Duration::hours(1)))
                    .earliest()
            })
            .map(|t| t.with_timezone(&Utc)),
    };
    match t {
        Some(t) if t <= now + chrono::Duration::minutes(1) => t,
        _ => now,
    }
}

/// The signal of one record. A deassertion (the condition ended) is low severity.
pub fn sel_event<Tz: TimeZone>(node: &NodeId, e: &SelEntry, local: &Tz, now: DateTime<Utc>) -> (Severity, EventInput) {
    let mut attributes = Map::new();
    attributes.insert("source".into(), Value::String("agent:ipmi-sel".into()));
    attributes.insert("sel_record_id".into(), Value::String(format!("{:#x}", e.record_id)));
    attributes.insert("sensor".into(), Value::String(e.sensor.clone()));
    attributes.insert("event".into(), Value::String(e.event.clone()));
    if let Some(a) = e.asserted {
        attributes.insert("asserted".into(), Value::Bool(a));
    }
    if let Some(d) = &e.detail {
        attributes.insert("detail".into(), Value::String(d.clone()));
    }
    // The BMC's own clock, as it stamped the record (it may differ from the node's).
    if let Some(at) = e.at {
        let mut t = at.format("%Y-%m-%dT%H:%M:%S").to_string();
        if let Some(z) = &e.zone {
            t.push(' ');
            t.push_str(z);
        }
        attributes.insert("bmc_time".into(), Value::String(t));
    }
    if let Some(s) = e.pre_init_secs {
        attributes.insert("bmc_seconds_since_start".into(), Value::from(s));
    }
    let severity = if e.asserted == Some(false) {
        Severity::Low
    } else {
        Severity::High
    };
    (
        severity,
        EventInput {
            id: sel_signal_id(node, e.record_id, text_hash(e)),
            occurred_at: occurred_at(e, local, now).to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            cluster: node.cluster.clone(),
            node: Some(node.node.clone()),
            gpu_index: None,
            gpu_uuid: None,
            gpu_model: None,
            job_id: None,
            job_gpus: None,
            kind: "bmc_event".into(),
            code: None,
            symptom: None,
            root_cause: None,
            message: Some(e.message()),
            attributes: Some(attributes),
            repeat_count: None,
            repeat_span_seconds: None,
        },
    )
}

pub struct SelPoller {
    pub node: NodeId,
    pub ipmitool: String,
    pub interval: Duration,
    pub paths: Paths,
    pub spool: Arc<Mutex<Spool>>,
    pub shared: Arc<Shared>,
    pub wake: Arc<tokio::sync::Notify>,
}

impl SelPoller {
    pub async fn run(&self) {
        let mut failing = false;
        loop {
            self.poll(&mut failing).await;
            let wait = crate::sender::jitter(self.interval.mul_f64(1.0 / 0.95)).max(self.interval.mul_f64(0.9));
            tokio::time::sleep(wait).await;
        }
    }

    pub async fn poll_once(&self) {
        let mut failing = false;
        self.poll(&mut failing).await;
    }

    /// One read of the log. A failure is reported when it starts failing, not at every poll
    /// (a node without a BMC fails every time).
    async fn poll(&self, failing: &mut bool) {
        let entries = match self.read_log().await {
            Ok(e) => e,
            Err(e) => {
                let command = format!("{} sel elist", self.ipmitool);
                let c = &self.shared.counters.sel_poll_failures;
                self.shared.poll_failed(c, failing, &command, &e, self.interval);
                return;
            }
        };
        *failing = false;
        self.shared.add(&self.shared.counters.sel_polls, 1);
        // An empty log: nothing to send, and nothing learnt about what was sent.
        if entries.is_empty() {
            return;
        }
        let state = SelState::load(&self.paths);
        let (new, next) = select_new(&state, &entries);
        if !new.is_empty() {
            let now = Utc::now();
            let signals = new.iter().map(|e| sel_event(&self.node, e, &Local, now)).collect();
            match crate::spool::append_signals(&self.spool, &self.shared, &self.wake, signals) {
                Ok(n) => self.shared.add(&self.shared.counters.sel_records, n),
                Err(e) => {
                    // Not spooled: the state stays, the next poll tries them again.
                    self.shared
                        .error(format!("writing BMC event log signals to the spool: {e}"));
                    return;
                }
            }
        }
        // After the spool: a crash in between sends the records again, with the same ids, and the
        // server counts them as duplicates.
        if next != state {
            let bytes = serde_json::to_vec(&next).expect("the SEL state serialises");
            if let Err(e) = crate::spool::write_atomic(&self.paths.sel(), &bytes) {
                self.shared.error(format!("saving {}: {e}", self.paths.sel().display()));
            }
        }
    }

    /// The records `ipmitool sel elist` prints. Output with lines yet no record read is an error:
    /// a format this agent does not know must not pass for an empty log.
    async fn read_log(&self) -> Result<Vec<SelEntry>, String> {
        // Month-first dates whatever the node's locale.
        let text = crate::command::output(&self.ipmitool, &["sel", "elist"], &[("LC_ALL", "C")], RUN_TIMEOUT).await?;
        let entries = parse_sel_elist(&text);
        if entries.is_empty()
            && let Some(line) = text.lines().find(|l| l.contains('|'))
        {
            return Err(format!(
                "no record could be read in its output, e.g. {:?}",
                line.chars().take(200).collect::<String>()
            ));
        }
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;
    use faultline_core::logparse::ipmi_sel::parse_line;

    const ACPI: &str = include_str!("../../../tests/fixtures/ipmitool/linuxfabrik-acpi-soft-off.txt");

    fn node() -> NodeId {
        NodeId {
            cluster: "c1".into(),
            node: "n1".into(),
        }
    }

    fn entry(line: &str) -> SelEntry {
        parse_line(line).unwrap()
    }

    fn ids(new: &[&SelEntry]) -> Vec<u16> {
        new.iter().map(|e| e.record_id).collect()
    }

    #[test]
    fn each_record_is_new_once_and_a_cleared_log_reusing_ids_is_new_again() {
        let first = [
            entry("   1 | 10/19/2020 | 14:40:00 | Event Logging Disabled SEL | Log area reset/cleared | Asserted"),
            entry("   2 | 10/19/2020 | 14:45:10 | Power Supply PS2 Status | Power Supply AC lost | Asserted"),
        ];
        // The first poll sends everything the log holds.
        let (new, state) = select_new(&SelState::default(), &first);
        assert_eq!(ids(&new), [1, 2]);
        assert_eq!(state.spooled.len(), 2);
        // Read again: nothing.
        let (new, again) = select_new(&state, &first);
        assert!(new.is_empty());
        assert_eq!(again, state);
        // The log grows: the new record only.
        let mut grown = first.to_vec();
        grown.push(entry(
            "   3 | 10/19/2020 | 14:50:29 | Power Supply PS2 Status | Power Supply AC lost | Deasserted",
        ));
        let (new, state) = select_new(&state, &grown);
        assert_eq!(ids(&new), [3]);
        // Cleared, and a new record 1 (same text, another time) and 2 (another text): both new,
        // and the cleared records leave the state.
        let cleared = [
            entry("   1 | 11/02/2020 | 09:00:00 | Event Logging Disabled SEL | Log area reset/cleared | Asserted"),
            entry("   2 | 11/02/2020 | 09:10:00 | Fan FAN1 | Lower Critical going low | Asserted"),
        ];
        let (new, state) = select_new(&state, &cleared);
        assert_eq!(ids(&new), [1, 2]);
        assert_eq!(state.spooled.len(), 2);
        assert!(state.spooled.iter().all(|k| cleared.iter().any(|e| key(e) == *k)));
        // Ids: stable for a record, distinct for a reused id.
        let now = Utc::now();
        let id = |e: &SelEntry| sel_event(&node(), e, &Utc, now).1.id;
        assert_eq!(id(&cleared[0]), id(&cleared[0].clone()));
        assert_ne!(id(&cleared[0]), id(&first[0]));
        assert_ne!(id(&cleared[1]), id(&first[1]));
        assert_eq!(id(&first[1]), sel_signal_id(&node(), 2, text_hash(&first[1])));
    }

    #[test]
    fn a_record_becomes_a_bmc_event_the_server_accepts() {
        let now: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().unwrap();
        let e = entry(
            "  2c | 10/12/2021 | 08:15:03 | Temperature CPU1 Temp | Upper Critical going high | Asserted | Reading 95 > Threshold 90 degrees C",
        );
        let cet = FixedOffset::east_opt(3600).unwrap();
        let (sev, ev) = sel_event(&node(), &e, &cet, now);
        assert_eq!(sev, Severity::High);
        assert_eq!(
            (ev.kind.as_str(), ev.code, ev.node.as_deref()),
            ("bmc_event", None, Some("n1"))
        );
        assert_eq!(
            ev.message.as_deref(),
            Some("Temperature CPU1 Temp | Upper Critical going high | Asserted | Reading 95 > Threshold 90 degrees C")
        );
        // The node's local time (here UTC+1).
        assert_eq!(ev.occurred_at, "2021-10-12T07:15:03.000000Z");
        let a = ev.attributes.as_ref().unwrap();
        assert_eq!(a["source"], "agent:ipmi-sel");
        assert_eq!(a["sel_record_id"], "0x2c");
        assert_eq!(a["sensor"], "Temperature CPU1 Temp");
        assert_eq!(a["event"], "Upper Critical going high");
        assert_eq!(a["asserted"], true);
        assert_eq!(a["detail"], "Reading 95 > Threshold 90 degrees C");
        assert_eq!(a["bmc_time"], "2021-10-12T08:15:03");
        faultline_core::domain::event::parse_event(serde_json::to_value(&ev).unwrap(), now).unwrap();
        // A deassertion is low severity; a zone ipmitool printed wins over the node's.
        let e = entry(
            "16bd | 12/18/20 | 12:04:41 UTC | Temperature SCM_TEMP | Lower Non-critical going low  | Deasserted | Reading 34 < Threshold 5 degrees C",
        );
        let (sev, ev) = sel_event(&node(), &e, &cet, now);
        assert_eq!(sev, Severity::Low);
        assert_eq!(ev.occurred_at, "2020-12-18T12:04:41.000000Z");
        assert_eq!(ev.attributes.as_ref().unwrap()["asserted"], false);
    }

    #[test]
    fn a_record_without_a_usable_time_happened_now() {
        let now: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().unwrap();
        let pre_init =
            entry("  56 |  Pre-Init  |0000000085| System ACPI Power State ACPI_Stat | S0/G0: working | Asserted");
        assert_eq!(occurred_at(&pre_init, &Utc, now), now);
        let (_, ev) = sel_event(&node(), &pre_init, &Utc, now);
        assert_eq!(ev.attributes.as_ref().unwrap()["bmc_seconds_since_start"], 85);
        let ahead = entry("   7 | 01/01/2036 | 00:00:00 | Fan FAN1 | Lower Critical going low | Asserted");
        assert_eq!(occurred_at(&ahead, &Utc, now), now);
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("fl-sel-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn poller(dir: &std::path::Path, ipmitool: &str) -> SelPoller {
        let paths = Paths {
            root: dir.to_path_buf(),
        };
        SelPoller {
            node: node(),
            ipmitool: ipmitool.to_string(),
            interval: Duration::from_secs(300),
            spool: Arc::new(Mutex::new(Spool::open(&paths.spool(), 1 << 24).unwrap())),
            paths,
            shared: Arc::new(Shared::default()),
            wake: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// A fake ipmitool that prints `sel.txt` of `dir` for `sel elist`.
    fn fake_ipmitool(dir: &std::path::Path) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("ipmitool");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n[ \"$1 $2\" = \"sel elist\" ] || exit 2\ncat '{}'\n",
                dir.join("sel.txt").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    fn spooled_ids(p: &SelPoller) -> Vec<String> {
        p.spool
            .lock()
            .unwrap()
            .peek(usize::MAX, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|r| {
                let v: Value = serde_json::from_slice(&r.payload).unwrap();
                v["attributes"]["sel_record_id"].as_str().unwrap().to_string()
            })
            .collect()
    }

    #[tokio::test]
    async fn polls_spool_each_record_once_across_restarts() {
        let dir = temp_dir("polls");
        let lines: Vec<&str> = ACPI.lines().collect();
        std::fs::write(dir.join("sel.txt"), lines[..lines.len() - 2].join("\n")).unwrap();
        let ipmitool = fake_ipmitool(&dir);
        let p = poller(&dir, &ipmitool);
        p.poll_once().await;
        assert_eq!(spooled_ids(&p).len(), 254);
        assert_eq!(p.shared.counters.values().sel_records, 254);
        // A restarted agent (a new poller on the same state directory) reads the same log: nothing.
        drop(p);
        let p = poller(&dir, &ipmitool);
        p.poll_once().await;
        assert_eq!(spooled_ids(&p).len(), 254);
        // Two records more: those two.
        std::fs::write(dir.join("sel.txt"), ACPI).unwrap();
        p.poll_once().await;
        let ids = spooled_ids(&p);
        assert_eq!(ids.len(), 256);
        assert_eq!(ids[254..], ["0x152", "0x153"]);
        let c = p.shared.counters.values();
        assert_eq!((c.sel_polls, c.sel_records, c.sel_poll_failures), (2, 2, 0));
        let state: SelState = serde_json::from_slice(&std::fs::read(dir.join("sel.json")).unwrap()).unwrap();
        assert_eq!(state.spooled.len(), 256);
        // Emptied (ipmitool prints nothing on stdout): nothing sent, nothing forgotten.
        std::fs::write(dir.join("sel.txt"), "").unwrap();
        p.poll_once().await;
        assert_eq!(spooled_ids(&p).len(), 256);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test]
    async fn a_missing_or_failing_ipmitool_is_reported_once() {
        let dir = temp_dir("failing");
        let p = poller(&dir, "/nonexistent/ipmitool");
        let mut failing = false;
        p.poll(&mut failing).await;
        let first = p.shared.status.lock().unwrap().last_error.take();
        assert!(first.unwrap().contains("running `/nonexistent/ipmitool sel elist`"));
        p.poll(&mut failing).await;
        assert_eq!(p.shared.status.lock().unwrap().last_error, None, "not reported twice");
        assert_eq!(p.shared.counters.values().sel_poll_failures, 2);
        // No BMC: ipmitool says so on stderr and exits 1.
        let script = dir.join("no-bmc");
        std::fs::write(
            &script,
            "#!/bin/sh\necho 'Could not open device at /dev/ipmi0 or /dev/ipmi/0 or /dev/ipmidev/0: No such file or directory' >&2\nexit 1\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let p = poller(&dir, script.to_str().unwrap());
        p.poll_once().await;
        let e = p.shared.status.lock().unwrap().last_error.clone().unwrap();
        assert!(e.contains("Could not open device at /dev/ipmi0"), "{e}");
        // Output it cannot read is an error, not an empty log.
        std::fs::write(
            dir.join("sel.txt"),
            "1,04/26/2023,16:21:34,Fan FAN1,Lower Critical going low,Asserted\n| |\n",
        )
        .unwrap();
        let p = poller(&dir, &fake_ipmitool(&dir));
        p.poll_once().await;
        assert_eq!(p.shared.counters.values().sel_poll_failures, 1);
        assert!(spooled_ids(&p).is_empty());
        std::fs::remove_dir_all(&dir).ok();
    }
}
