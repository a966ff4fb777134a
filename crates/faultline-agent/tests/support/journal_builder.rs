//! Real journal files with chosen entries, for tests of what reads the journal through journalctl.
//!
//! The entries are written in the journal export format and piped into
//! `systemd-journal-remote --output=FILE.journal -` (Debian: package `systemd-journal-remote`,
//! installed as `/lib/systemd/systemd-journal-remote`), which creates the file or appends to it;
//! `journalctl --directory=DIR` then reads it like any journal, and `journalctl -f` sees appended
//! entries. The address fields `__REALTIME_TIMESTAMP`, `__MONOTONIC_TIMESTAMP` and `_BOOT_ID` set
//! the entry's timestamps and boot (its cursor's `t=`, `m=`, `b=`); journal-remote assigns the
//! cursor itself. Std only, so that other test crates can include this file with
//! `#[path = ".../crates/faultline-agent/tests/support/journal_builder.rs"] mod journal_builder;`.
//!
//! The same by hand (one entry; a blank line ends each):
//!
//! ```text
//! printf '__REALTIME_TIMESTAMP=1700000000000000\n__MONOTONIC_TIMESTAMP=5000000\n_BOOT_ID=%s\n_TRANSPORT=kernel\nPRIORITY=4\nMESSAGE=NVRM: Xid ...\n\n' \
//!     "$(tr -d - < /proc/sys/kernel/random/boot_id)" \
//!     | /lib/systemd/systemd-journal-remote --output=/tmp/j/kernel.journal -
//! journalctl -k --directory=/tmp/j -o json --no-pager
//! ```
#![allow(dead_code)]

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One journal entry: its address fields and its fields (a field may repeat).
#[derive(Debug, Clone)]
pub struct JournalEntry {
    pub realtime_us: u64,
    pub monotonic_us: u64,
    /// 32 hex digits, with or without the dashes of `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    pub fields: Vec<(String, Vec<u8>)>,
}

impl JournalEntry {
    /// A kernel log entry as journald writes one it read from `/dev/kmsg`: `_TRANSPORT=kernel`
    /// (what `journalctl -k` selects), facility 0, identifier `kernel`, and the kernel's own
    /// timestamp as `_SOURCE_MONOTONIC_TIMESTAMP` (a little before journald received it).
    pub fn kernel(boot_id: &str, realtime_us: u64, monotonic_us: u64, priority: u8, message: impl AsRef<[u8]>) -> Self {
        JournalEntry {
            realtime_us,
            monotonic_us,
            boot_id: boot_id.to_string(),
            fields: Vec::new(),
        }
        .field("_TRANSPORT", "kernel")
        .field("PRIORITY", priority.to_string())
        .field("SYSLOG_FACILITY", "0")
        .field("SYSLOG_IDENTIFIER", "kernel")
        .field(
            "_SOURCE_MONOTONIC_TIMESTAMP",
            monotonic_us.saturating_sub(1000).to_string(),
        )
        .field("MESSAGE", message)
    }

    /// Adds a field (a name already there gets a second value).
    pub fn field(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.fields.push((name.to_string(), value.as_ref().to_vec()));
        self
    }

    /// Removes every value of a field.
    pub fn without(mut self, name: &str) -> Self {
        self.fields.retain(|(n, _)| n != name);
        self
    }
}

/// The entries in the journal export format. A value holding a newline takes the binary form
/// (name, newline, little-endian 64-bit length, bytes, newline); every other value `NAME=value`.
pub fn export(entries: &[JournalEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        out.extend_from_slice(format!("__REALTIME_TIMESTAMP={}\n", e.realtime_us).as_bytes());
        out.extend_from_slice(format!("__MONOTONIC_TIMESTAMP={}\n", e.monotonic_us).as_bytes());
        out.extend_from_slice(format!("_BOOT_ID={}\n", e.boot_id.replace('-', "")).as_bytes());
        for (name, value) in &e.fields {
            out.extend_from_slice(name.as_bytes());
            if value.contains(&b'\n') {
                out.push(b'\n');
                out.extend_from_slice(&(value.len() as u64).to_le_bytes());
            } else {
                out.push(b'=');
            }
            out.extend_from_slice(value);
            out.push(b'\n');
        }
        out.push(b'\n');
    }
    out
}

/// systemd-journal-remote: `$SYSTEMD_JOURNAL_REMOTE`, then `PATH`, then where Debian and
/// Fedora install it (outside `PATH`).
pub fn journal_remote() -> Option<PathBuf> {
    let candidates = std::env::var_os("SYSTEMD_JOURNAL_REMOTE")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            std::env::var_os("PATH")
                .map(|p| {
                    std::env::split_paths(&p)
                        .map(|d| d.join("systemd-journal-remote"))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        )
        .chain(
            [
                "/lib/systemd/systemd-journal-remote",
                "/usr/lib/systemd/systemd-journal-remote",
            ]
            .map(PathBuf::from),
        );
    candidates.into_iter().find(|p| p.is_file())
}

/// Whether `journalctl` runs.
pub fn journalctl_available(journalctl: &str) -> bool {
    Command::new(journalctl)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Writes the entries to `file` (it must end in `.journal`; created, or appended to), through
/// systemd-journal-remote.
pub fn write_journal(file: &Path, entries: &[JournalEntry]) -> io::Result<()> {
    let remote =
        journal_remote().ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "systemd-journal-remote not found"))?;
    let mut child = Command::new(remote)
        .arg(format!("--output={}", file.display()))
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().expect("piped").write_all(&export(entries))?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "systemd-journal-remote exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// This machine's boot id, as `/proc/sys/kernel/random/boot_id` has it (what journalctl's `-k`
/// means by the current boot when it reads the local journal).
pub fn host_boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
