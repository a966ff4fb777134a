//! Storm compaction: a failing GPU can print the same XID a hundred thousand times a minute. The
//! agent sends the first of a run at once and folds the rest into one signal with a repeat count,
//! so the server sees a handful of signals, not the storm.
//!
//! Runs are cut on the kernel's own clock: a record belongs to the window
//! `floor(monotonic timestamp / window)` of its signal's identity (the server's rule, in
//! `faultline_core::domain::identity`: kind, code, the GPU in every form named, what was measured). The first record of a
//! window is sent at once; the others of that window become one signal sent when the window
//! closes. Both ids derive from the node, boot, key and window. The open runs are saved with the
//! reader's position, in one file written atomically after their signals are spooled: a restart
//! goes on where it stopped, and a crash between the spool and the position reads records again
//! into the same runs, which give the same ids (duplicates to the server, never a second count).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use faultline_core::domain::event::EventInput;
use faultline_core::domain::identity::{GpuNames, SignalIdentity};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::signals::{NodeId, storm_signal_id};
use crate::spool::Severity;

/// Open windows are bounded (they are saved with the position): past this many, the oldest is
/// closed early (its summary is sent).
const MAX_OPEN_WINDOWS: usize = 1024;
/// How long past a window's end (by the wall clock, from when its first record was read) the
/// reader waits for late records before it closes the window.
const CLOSE_GRACE_MS: i64 = 2_000;

/// A run: one signal ([`SignalIdentity`], the rule the server folds repeats by) in one window.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Key {
    #[serde(flatten)]
    signal: SignalIdentity,
    window: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Window {
    /// Order of opening (the oldest goes first when too many are open).
    opened: u64,
    /// When the reader closes it if no later record closes it first (Unix ms).
    deadline_ms: i64,
    rest: Option<Rest>,
}

/// The repeats after the first: the first of them stands for all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Rest {
    severity: Severity,
    event: EventInput,
    count: i32,
    last_at: String,
    last_seq: Option<Value>,
}

/// What left the compactor, ready for the spool.
pub type Signal = (Severity, EventInput);

/// An open run as saved with the reader's position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenRun {
    key: Key,
    #[serde(flatten)]
    window: Window,
}

pub struct Compactor {
    node: NodeId,
    boot_id: String,
    window_us: u64,
    open: BTreeMap<Key, Window>,
    opened: u64,
    /// Records folded into a repeat count so far (for the counters).
    pub folded: u64,
    /// The open runs changed since [`Compactor::runs`] was last taken.
    pub changed: bool,
}

impl Compactor {
    /// `window` zero: no compaction (each record is its own signal).
    pub fn new(node: NodeId, boot_id: String, window: Duration) -> Compactor {
        Compactor {
            node,
            boot_id,
            window_us: window.as_micros().min(u128::from(u64::MAX)) as u64,
            open: BTreeMap::new(),
            opened: 0,
            folded: 0,
            changed: false,
        }
    }

    /// Goes on with the runs saved with the position.
    pub fn restore(&mut self, runs: Vec<OpenRun>) {
        for r in runs {
            self.opened = self.opened.max(r.window.opened);
            self.open.insert(r.key, r.window);
        }
    }

    /// The open runs, to save with the position.
    pub fn runs(&mut self) -> Vec<OpenRun> {
        self.changed = false;
        self.open
            .iter()
            .map(|(k, w)| OpenRun {
                key: k.clone(),
                window: w.clone(),
            })
            .collect()
    }

    pub fn enabled(&self) -> bool {
        self.window_us > 0
    }

    /// One record's signal (kernel timestamp `ts_us`), read at `now_ms` (Unix ms). Returns what
    /// to spool now: the record's own signal if it opens a window, and the summaries of the
    /// windows a later record has closed.
    pub fn push(&mut self, ts_us: u64, (severity, mut event): Signal, now_ms: i64) -> Vec<Signal> {
        if !self.enabled() {
            return vec![(severity, event)];
        }
        self.changed = true;
        let window = ts_us / self.window_us;
        // The kernel's clock only moves forward: every earlier window is complete.
        let mut out = self.close(|k, _| k.window < window);
        let gpu = GpuNames::of(event.gpu_index, event.gpu_uuid.as_deref(), event.attributes.as_ref());
        let key = Key {
            signal: SignalIdentity::of(
                &event.kind,
                event.code,
                gpu,
                event.message.as_deref(),
                event.attributes.as_ref(),
            ),
            window,
        };
        match self.open.get_mut(&key) {
            None => {
                event.id = storm_signal_id(&self.node, &self.boot_id, &key_text(&key), "first");
                let left_ms = ((window + 1) * self.window_us - ts_us).div_ceil(1000);
                self.opened += 1;
                self.open.insert(
                    key,
                    Window {
                        opened: self.opened,
                        deadline_ms: now_ms.saturating_add(left_ms.min(i64::MAX as u64) as i64) + CLOSE_GRACE_MS,
                        rest: None,
                    },
                );
                out.push((severity, event));
                if self.open.len() > MAX_OPEN_WINDOWS {
                    let oldest = self.open.values().map(|w| w.opened).min();
                    out.extend(self.close(|_, w| Some(w.opened) == oldest));
                }
            }
            Some(w) => {
                self.folded += 1;
                let last_seq = event.attributes.as_ref().and_then(|a| a.get("kmsg_seq")).cloned();
                match &mut w.rest {
                    Some(r) => {
                        r.count = r.count.saturating_add(1);
                        r.last_at = event.occurred_at;
                        r.last_seq = last_seq;
                    }
                    None => {
                        w.rest = Some(Rest {
                            severity,
                            last_at: event.occurred_at.clone(),
                            event,
                            count: 1,
                            last_seq,
                        })
                    }
                }
            }
        }
        out
    }

    /// Closes the windows whose time has passed.
    pub fn close_due(&mut self, now_ms: i64) -> Vec<Signal> {
        self.close(|_, w| w.deadline_ms <= now_ms)
    }

    /// Closes every window (the end of the input).
    pub fn close_all(&mut self) -> Vec<Signal> {
        self.close(|_, _| true)
    }

    fn close(&mut self, done: impl Fn(&Key, &Window) -> bool) -> Vec<Signal> {
        let keys: Vec<Key> = self
            .open
            .iter()
            .filter(|(k, w)| done(k, w))
            .map(|(k, _)| k.clone())
            .collect();
        self.changed |= !keys.is_empty();
        let mut out = Vec::new();
        for key in keys {
            let Some(Rest {
                severity,
                mut event,
                count,
                last_at,
                last_seq,
            }) = self.open.remove(&key).and_then(|w| w.rest)
            else {
                continue;
            };
            event.id = storm_signal_id(&self.node, &self.boot_id, &key_text(&key), "repeats");
            if count > 1 {
                event.repeat_count = Some(count);
                event.repeat_span_seconds = span_seconds(&event.occurred_at, &last_at);
                if let (Some(a), Some(s)) = (event.attributes.as_mut(), last_seq) {
                    a.insert("last_kmsg_seq".into(), s);
                }
            }
            out.push((severity, event));
        }
        out
    }
}

/// The run's text for its ids: the same, for a kernel line naming its GPU by index or bus alone,
/// as before the identity named UUIDs, serials and texts (ids of runs saved by an earlier version
/// stay the same).
fn key_text(k: &Key) -> String {
    format!("{}\n{}", k.signal.key_text(), k.window)
}

/// Seconds from `first` to `last` (RFC 3339), None when not after it.
fn span_seconds(first: &str, last: &str) -> Option<f64> {
    let t = |s: &str| DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).ok();
    let span = t(last)? - t(first)?;
    (span > chrono::Duration::zero()).then(|| span.num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kmsg::parse_record;
    use crate::signals::{kmsg_event, test_node as node};
    use uuid::Uuid;

    fn boot() -> DateTime<Utc> {
        "2026-11-30T00:00:00Z".parse().unwrap()
    }

    const NOW_MS: i64 = 1_800_000_000_000;

    /// XID `code` on bus `bus` at `ts_ms` as kernel record `seq`: (timestamp, signal).
    fn xid(seq: u64, ts_ms: u64, bus: u8, code: u32) -> (u64, Signal) {
        let text = format!(
            "4,{seq},{},-;NVRM: Xid (PCI:0000:{bus:02x}:00): {code}, pid={seq}, name=python",
            ts_ms * 1000
        );
        let r = parse_record(&text).unwrap();
        let now = boot() + chrono::Duration::days(1);
        (r.ts_us, kmsg_event(&node(), "b", boot(), &r, now).unwrap())
    }

    fn run(c: &mut Compactor, records: impl IntoIterator<Item = (u64, Signal)>) -> Vec<Signal> {
        let mut out = Vec::new();
        for (ts, sig) in records {
            out.extend(c.push(ts, sig, NOW_MS));
        }
        out
    }

    fn minute() -> Compactor {
        Compactor::new(node(), "b".into(), Duration::from_secs(60))
    }

    #[test]
    fn a_storm_of_one_xid_is_its_first_line_and_one_repeat_count_per_minute() {
        let mut c = minute();
        // 100,000 lines of XID 13 on one GPU over 100 s of kernel time (one per ms), from 10 s.
        let storm = (0..100_000u64).map(|i| xid(i, 10_000 + i, 0x3b, 13));
        let mut out = run(&mut c, storm);
        // The window of 0-60 s has closed (a later line arrived); 60-120 s is open.
        assert_eq!(out.len(), 3, "first line, repeats of 10-60 s, first line of 60-120 s");
        assert_eq!(c.runs().len(), 1);
        out.extend(c.close_all());
        assert_eq!(out.len(), 4);
        let counts: Vec<i32> = out.iter().map(|(_, e)| e.repeat_count.unwrap_or(1)).collect();
        // 10.000-59.999 s: 50,000 lines; 60.000-109.999 s: 50,000 lines.
        assert_eq!(counts, [1, 49_999, 1, 49_999]);
        assert_eq!(counts.iter().sum::<i32>(), 100_000);
        assert_eq!(c.folded, 99_998);
        let summary = &out[1].1;
        assert_eq!(summary.occurred_at, "2026-11-30T00:00:10.001000Z");
        // To 59.999 s.
        assert_eq!(summary.repeat_span_seconds, Some(49.998));
        assert_eq!(summary.attributes.as_ref().unwrap()["kmsg_seq"], 1);
        assert_eq!(summary.attributes.as_ref().unwrap()["last_kmsg_seq"], 49_999);
        assert!(c.runs().is_empty());
        // Every id differs; each is a valid event for the server.
        let ids: std::collections::HashSet<Uuid> = out.iter().map(|(_, e)| e.id).collect();
        assert_eq!(ids.len(), 4);
        for (_, e) in &out {
            faultline_core::domain::event::parse_event(serde_json::to_value(e).unwrap(), Utc::now()).unwrap();
        }
    }

    #[test]
    fn a_restart_goes_on_with_the_saved_runs_and_a_crash_before_the_save_gives_the_same_ids() {
        let records: Vec<_> = (0..30u64).map(|i| xid(i, 1_000 * i, 0x3b, 13)).collect();
        let mut whole = minute();
        let mut expected = run(&mut whole, records.clone());
        expected.extend(whole.close_all());
        assert_eq!(expected.len(), 2);
        assert_eq!(expected[1].1.repeat_count, Some(29));

        // Stopped after 20 records with its runs saved (through JSON, as in position.json).
        let mut first = minute();
        let mut got = run(&mut first, records[..20].to_vec());
        let saved: Vec<OpenRun> = serde_json::from_str(&serde_json::to_string(&first.runs()).unwrap()).unwrap();
        let mut again = minute();
        again.restore(saved.clone());
        got.extend(run(&mut again, records[20..].to_vec()));
        got.extend(again.close_all());
        let ids = |v: &[Signal]| v.iter().map(|(_, e)| e.id).collect::<Vec<_>>();
        assert_eq!(ids(&got), ids(&expected));
        assert_eq!(got[1].1.repeat_count, Some(29));

        // Killed after spooling records 20-24 but before saving: the saved runs (after 20) and
        // records 20.. again give the same signals; what was spooled twice is a duplicate.
        let mut crashed = minute();
        crashed.restore(saved);
        let mut replay = run(&mut crashed, records[20..].to_vec());
        replay.extend(crashed.close_all());
        assert_eq!(ids(&replay), ids(&expected[1..]));
        assert_eq!(replay[0].1.repeat_count, Some(29));
    }

    #[test]
    fn other_gpus_codes_and_windows_are_runs_of_their_own_and_quiet_windows_close_by_the_clock() {
        let mut c = minute();
        let out = run(
            &mut c,
            [
                xid(0, 1_000, 0x3b, 13),
                xid(1, 1_001, 0x3c, 13),
                xid(2, 1_002, 0x3b, 31),
                xid(3, 1_003, 0x3b, 13),
            ],
        );
        assert_eq!(out.len(), 3, "three runs started");
        assert!(c.close_due(NOW_MS).is_empty());
        // Nothing more is logged: the window closes 59 s (+ grace) after its first line was read.
        let due = c.close_due(NOW_MS + 62_000);
        assert_eq!(due.len(), 1, "only the run with a repeat has something to send");
        assert_eq!(due[0].1.repeat_count, None, "one repeat is a plain signal");
        assert_eq!(due[0].1.attributes.as_ref().unwrap()["kmsg_seq"], 3);
        assert!(c.runs().is_empty());
    }

    #[test]
    fn too_many_open_runs_close_the_oldest_and_no_window_sends_each_record() {
        let mut c = minute();
        let out = run(
            &mut c,
            (0..(MAX_OPEN_WINDOWS as u64 + 1)).map(|i| xid(i, 1_000 + i, 0, 13 + i as u32)),
        );
        assert_eq!(out.len(), MAX_OPEN_WINDOWS + 1);
        assert_eq!(c.runs().len(), MAX_OPEN_WINDOWS);
        let mut c = Compactor::new(node(), "b".into(), Duration::ZERO);
        let out = run(&mut c, (0..5u64).map(|i| xid(i, i, 0x3b, 13)));
        assert_eq!(out.len(), 5);
        assert!(c.runs().is_empty());
    }

    #[test]
    fn runs_saved_by_an_earlier_version_go_on_with_the_same_ids() {
        // position.json's runs before the identity named UUIDs, serials and texts.
        let saved = r#"[{"key":{"kind":"xid","code":13,"gpu_index":null,"pci_bus_id":"0000:3b:00.0","window":0},
                          "opened":1,"deadline_ms":1800000062000,"rest":null}]"#;
        let mut c = minute();
        c.restore(serde_json::from_str(saved).unwrap());
        let out = run(&mut c, [xid(1, 2_000, 0x3b, 13), xid(2, 3_000, 0x3b, 13)]);
        assert!(out.is_empty(), "both records join the restored run");
        let closed = c.close_all();
        assert_eq!(closed[0].1.repeat_count, Some(2));
        let mut fresh = minute();
        let mut all = run(
            &mut fresh,
            [
                xid(0, 1_000, 0x3b, 13),
                xid(1, 2_000, 0x3b, 13),
                xid(2, 3_000, 0x3b, 13),
            ],
        );
        all.extend(fresh.close_all());
        assert_eq!(closed[0].1.id, all[1].1.id);
    }

    #[test]
    fn different_gpus_and_counters_of_one_kind_are_runs_of_their_own() {
        let mut c = minute();
        let by_uuid = |seq: u64, uuid: &str| {
            let (ts, (sev, mut e)) = xid(seq, 1_000 + seq, 0x3b, 79);
            e.attributes.as_mut().unwrap().remove("pci_bus_id");
            e.gpu_uuid = Some(uuid.into());
            (ts, (sev, e))
        };
        let out = run(
            &mut c,
            [by_uuid(0, "GPU-aaaa"), by_uuid(1, "GPU-bbbb"), by_uuid(2, "GPU-aaaa")],
        );
        assert_eq!(out.len(), 2, "one run per GPU");
        assert_eq!(c.close_all().len(), 1, "GPU-aaaa's repeat");
    }
}
