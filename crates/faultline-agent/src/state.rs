//! What the agent keeps in its state directory besides the spool: the kernel log position
//! (`position.json`), the GPU set last registered and counters last seen (`gpus.json`), the BMC
//! event log records already spooled (`sel.json`), and its status (`status.json`: counters since
//! it was installed, last send, last error), which `faultline-agent status` and the metrics port
//! show.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::spool::write_atomic;

/// How far the kernel log has been read: the last record of boot `boot_id` whose signal (if it
/// was one) is in the spool, with the storm compactor's open runs at that point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Position {
    pub boot_id: String,
    /// The next kernel record to read (`/dev/kmsg` or a file of its records).
    pub seq: u64,
    /// The journal's cursor of the last entry read (the journal source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Runs of repeats not yet sent whole (see [`crate::storm`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<crate::storm::OpenRun>,
    /// The reader's counters when this position was saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<ReaderCounts>,
}

/// The kernel log reader's counters, saved with its position: records read (each once, whatever
/// restarts re-read) and repeats folded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ReaderCounts {
    pub kmsg_records: u64,
    pub kmsg_repeats_folded: u64,
}

impl ReaderCounts {
    pub fn of(c: &Counters) -> ReaderCounts {
        ReaderCounts {
            kmsg_records: c.kmsg_records.load(Ordering::Relaxed),
            kmsg_repeats_folded: c.kmsg_repeats_folded.load(Ordering::Relaxed),
        }
    }

    pub fn restore(&self, c: &Counters) {
        c.kmsg_records.store(self.kmsg_records, Ordering::Relaxed);
        c.kmsg_repeats_folded.store(self.kmsg_repeats_folded, Ordering::Relaxed);
    }
}

impl Position {
    pub fn load(path: &Path) -> Option<Position> {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }

    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        write_atomic(path, &serde_json::to_vec(self).expect("a position serialises"))
    }
}

macro_rules! counters {
    ($($name:ident: $help:literal),* $(,)?) => {
        /// Counters since the agent was installed (kept across restarts in `status.json`).
        #[derive(Debug, Default)]
        pub struct Counters { $(pub $name: AtomicU64,)* }

        #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
        pub struct CounterValues { $(#[serde(default)] pub $name: u64,)* }

        impl Counters {
            pub fn values(&self) -> CounterValues {
                CounterValues { $($name: self.$name.load(Ordering::Relaxed),)* }
            }

            pub fn restore(&self, v: &CounterValues) {
                $(self.$name.store(v.$name, Ordering::Relaxed);)*
            }
        }

        impl CounterValues {
            /// (name, help, value) of each counter, for the metrics port.
            pub fn each(&self) -> Vec<(&'static str, &'static str, u64)> {
                vec![$((stringify!($name), $help, self.$name),)*]
            }
        }
    };
}

counters! {
    kmsg_records: "Kernel log records read",
    kmsg_overruns: "Times the kernel overwrote records before they were read",
    signals_spooled: "Signals written to the spool",
    dropped_low_severity_spool_full: "Low-severity signals dropped because the spool was full",
    dropped_spool_full: "Signals of any severity dropped because the spool was full (no low-severity one was left)",
    sent_accepted: "Signals the server accepted as new",
    sent_duplicates: "Signals the server already had (resends)",
    rejected: "Signals the server refused (invalid); logged, not resent",
    send_batches: "Batches acknowledged by the server",
    send_failures: "Send attempts that failed (network, 5xx, 429/503, auth)",
    gpu_polls: "nvidia-smi runs that gave a report",
    gpu_poll_failures: "nvidia-smi runs that failed",
    gpu_inventory_updates: "GPU sets registered in the parts inventory",
    kmsg_repeats_folded: "Kernel log signals folded into the repeat count of the first of their run (storm compaction)",
    sel_polls: "ipmitool sel elist runs that gave the BMC's event log",
    sel_poll_failures: "ipmitool sel elist runs that failed",
    sel_records: "BMC event log records new to the agent (each spooled as a signal)",
}

/// The agent's status as written to `status.json`.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Status {
    pub version: String,
    pub pid: u32,
    pub cluster: String,
    pub node: String,
    pub server: String,
    /// RFC 3339.
    pub started_at: Option<String>,
    pub last_send_at: Option<String>,
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
    pub spool_records: u64,
    pub spool_bytes: u64,
    pub spool_max_bytes: u64,
    pub position: Option<Position>,
    /// Runs of repeated kernel signals whose count is not sent yet.
    #[serde(default)]
    pub open_runs: u64,
    #[serde(default)]
    pub counters: CounterValues,
    pub updated_at: Option<String>,
}

/// Shared, live state.
#[derive(Debug, Default)]
pub struct Shared {
    pub counters: Counters,
    pub status: Mutex<Status>,
    /// Moves when a poll saves a GPU set new to this boot (the kernel log reader reloads it).
    pub gpu_set_version: AtomicU64,
}

impl Shared {
    pub fn error(&self, msg: impl Into<String>) {
        let msg = msg.into();
        eprintln!("{} faultline-agent: {msg}", now_rfc3339());
        let mut s = self.status.lock().expect("status lock");
        s.last_error = Some(msg);
        s.last_error_at = Some(now_rfc3339());
    }

    /// A failed run of a polled tool: counted every time, reported when it starts failing (a node
    /// without the device fails at every poll).
    pub fn poll_failed(
        &self,
        counter: &AtomicU64,
        failing: &mut bool,
        command: &str,
        error: &str,
        interval: std::time::Duration,
    ) {
        self.add(counter, 1);
        if !*failing {
            self.error(format!(
                "running `{command}`: {error} (reported once; polling goes on every {:.1} s)",
                interval.as_secs_f64()
            ));
            *failing = true;
        }
    }

    pub fn add(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `n` signals written to the spool and what the spool dropped to make room for them.
    pub fn spooled(&self, n: u64, drops: crate::spool::Drops) {
        let c = &self.counters;
        self.add(&c.signals_spooled, n);
        self.add(&c.dropped_low_severity_spool_full, drops.low_severity_spool_full);
        self.add(&c.dropped_spool_full, drops.spool_full);
    }

    /// The status with the counters now.
    pub fn snapshot(&self) -> Status {
        let mut s = self.status.lock().expect("status lock").clone();
        s.counters = self.counters.values();
        s.updated_at = Some(now_rfc3339());
        s
    }

    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        write_atomic(
            path,
            &serde_json::to_vec_pretty(&self.snapshot()).expect("status serialises"),
        )
    }
}

/// The position as the status shows it (the open runs are counted, not listed).
pub fn without_runs(p: Position) -> Position {
    Position { runs: Vec::new(), ..p }
}

pub fn load_status(path: &Path) -> Option<Status> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The files of a state directory.
#[derive(Debug, Clone)]
pub struct Paths {
    pub root: PathBuf,
}

impl Paths {
    pub fn spool(&self) -> PathBuf {
        self.root.join("spool")
    }
    pub fn position(&self) -> PathBuf {
        self.root.join("position.json")
    }
    pub fn status(&self) -> PathBuf {
        self.root.join("status.json")
    }
    pub fn gpus(&self) -> PathBuf {
        self.root.join("gpus.json")
    }
    pub fn gpus_now(&self) -> PathBuf {
        self.root.join("gpus-now.json")
    }
    /// The GPU set of the boot before this one, kept when a boot's first poll replaces it: the
    /// previous boot's last lines are attributed with its boards.
    pub fn gpus_previous_boot(&self) -> PathBuf {
        self.root.join("gpus-previous-boot.json")
    }
    pub fn sel(&self) -> PathBuf {
        self.root.join("sel.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_and_counters_survive_a_restart() {
        let dir = std::env::temp_dir().join(format!("fl-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let paths = Paths { root: dir.clone() };
        let p = Position {
            boot_id: "b".into(),
            seq: 42,
            cursor: None,
            runs: Vec::new(),
            counted: None,
        };
        p.save(&paths.position()).unwrap();
        assert_eq!(Position::load(&paths.position()), Some(p));
        let shared = Shared::default();
        shared.add(&shared.counters.dropped_low_severity_spool_full, 3);
        shared.save(&paths.status()).unwrap();
        let again = Shared::default();
        again.counters.restore(&load_status(&paths.status()).unwrap().counters);
        assert_eq!(again.counters.values().dropped_low_severity_spool_full, 3);
        std::fs::remove_dir_all(&dir).ok();
    }
}
