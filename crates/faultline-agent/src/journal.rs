//! The kernel log as the systemd journal holds it, read through `journalctl -o json`: for nodes
//! where `/dev/kmsg` is not readable (a container without `CAP_SYSLOG`) or where the kernel log is
//! only in the persistent journal (a host journal mounted into a container: `--directory`).
//!
//! Where reading resumes is the journal cursor of the last record read (`__CURSOR`).
//!
//! journalctl's JSON: one object per entry and line, every value a string, except a value that is
//! not valid UTF-8 or holds control characters (an array of its bytes), a field with several
//! values (an array of those values) and a value over 4096 bytes without `--all` (null).
//!
//! What journalctl (systemd 252) does with the flags, measured on journals built with
//! systemd-journal-remote, and why the command line is what `JournalConfig::args` builds:
//! - `-k` is `_TRANSPORT=kernel` plus `-b`. `-b` means this machine's boot id when journalctl reads
//!   the local journal, but with `--directory` the newest boot found in that directory, whichever
//!   machine's boot that is; with no entry there yet, it fails ("Data from the specified boot (+0)
//!   is not available"). Hence the explicit `_TRANSPORT=kernel _BOOT_ID=...` matches when the boot
//!   is known.
//! - `-f` implies `-b` unless `--merge` is given (and `--merge` refuses `-b`), so following one
//!   boot's matches needs `--merge`; `_BOOT_ID=` keeps other machines' journals out.
//! - `-f` alone starts at the last 10 entries; `--no-tail` starts at the first.
//! - `--after-cursor=C` skips one entry after seeking to C even when the entry there is not C (C
//!   did not match the filters, e.g. a cursor of the previous boot, or was vacuumed): the first
//!   record of the new boot would be lost. `--cursor=C` and dropping C here loses nothing.

use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Map, Value};

/// Records returned by one poll: one spool write and fsync for a burst, as for `/dev/kmsg`.
pub const MAX_RECORDS_PER_POLL: usize = 1000;

/// Records parsed ahead of the caller: journalctl waits (the pipe fills) beyond this.
const CHANNEL_RECORDS: usize = 4 * MAX_RECORDS_PER_POLL;

/// A longer line (no kernel message comes near) is skipped rather than held in memory.
const MAX_LINE_BYTES: usize = 1 << 20;

/// What of journalctl's stderr is kept for the error message: its end, where the reason is.
const MAX_STDERR_BYTES: usize = 16 * 1024;

/// The fields read; journalctl adds the address fields (`__CURSOR`, `__REALTIME_TIMESTAMP`,
/// `__MONOTONIC_TIMESTAMP`, `_BOOT_ID`). Fewer bytes through the pipe than whole entries.
const OUTPUT_FIELDS: &str =
    "MESSAGE,PRIORITY,SYSLOG_FACILITY,_SOURCE_MONOTONIC_TIMESTAMP,_KERNEL_SUBSYSTEM,_KERNEL_DEVICE";

/// One kernel log record from the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRecord {
    /// Where the journal is at this record (`__CURSOR`): resume after it with
    /// `JournalConfig::after_cursor`.
    pub cursor: String,
    /// The boot it was logged in, as `/proc/sys/kernel/random/boot_id` writes it (dashed,
    /// lowercase; the journal's 32 digits converted), so it compares with the agent's boot id.
    pub boot_id: String,
    /// Microseconds since boot: the kernel's own timestamp (`_SOURCE_MONOTONIC_TIMESTAMP`, as in
    /// `/dev/kmsg`), else when journald received it (`__MONOTONIC_TIMESTAMP`).
    pub ts_us: u64,
    /// Wall-clock microseconds since the epoch when journald received it (`__REALTIME_TIMESTAMP`):
    /// the time of a record of an earlier boot, whose boot time the agent does not know.
    pub realtime_us: Option<u64>,
    /// Syslog level (0 emerg .. 7 debug), `PRIORITY`.
    pub level: u8,
    /// Syslog facility (0 kernel; userspace writing to `/dev/kmsg` has its own), `SYSLOG_FACILITY`.
    pub facility: u8,
    /// `MESSAGE` (bytes that are not UTF-8 replaced; empty when journalctl left it out).
    pub message: String,
    /// `SUBSYSTEM` (`_KERNEL_SUBSYSTEM`) and `DEVICE` (`_KERNEL_DEVICE`): the keys of the
    /// `/dev/kmsg` dictionary they come from, as in `KmsgRecord::dict`.
    pub dict: Vec<(String, String)>,
}

/// The values of a field: one for a string or a byte array, each element for an array of values.
fn values(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_number) => {
            let bytes: Vec<u8> = items
                .iter()
                .map(|b| b.as_u64().map_or(b'?', |b| u8::try_from(b).unwrap_or(b'?')))
                .collect();
            vec![String::from_utf8_lossy(&bytes).into_owned()]
        }
        Value::Array(items) => items.iter().flat_map(values).collect(),
        Value::Number(n) => vec![n.to_string()],
        Value::Null | Value::Bool(_) | Value::Object(_) => Vec::new(),
    }
}

/// A field's first value (a kernel record has one of each; the first is the one journald wrote).
fn first(entry: &Map<String, Value>, name: &str) -> Option<String> {
    entry.get(name).and_then(|v| values(v).into_iter().next())
}

fn number(entry: &Map<String, Value>, name: &str) -> Option<u64> {
    first(entry, name).and_then(|s| s.trim().parse().ok())
}

/// `/proc/sys/kernel/random/boot_id`'s form of a boot id (8-4-4-4-12), from the journal's 32 hex
/// digits or that form itself; anything else as it is.
pub fn dashed_boot_id(id: &str) -> String {
    let hex: String = id
        .trim()
        .chars()
        .filter(|c| *c != '-')
        .collect::<String>()
        .to_ascii_lowercase();
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return id.trim().to_string();
    }
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The journal's form of a boot id (32 lowercase hex digits), None if it is not one.
fn undashed_boot_id(id: &str) -> Option<String> {
    let hex = id.trim().replace('-', "").to_ascii_lowercase();
    (hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}

/// Parses one line of `journalctl -o json`. None if it is not an entry (not a JSON object, or no
/// cursor to resume from).
pub fn parse_journal_line(line: &str) -> Option<JournalRecord> {
    let Ok(Value::Object(entry)) = serde_json::from_str::<Value>(line.trim()) else {
        return None;
    };
    let cursor = first(&entry, "__CURSOR").filter(|c| !c.is_empty())?;
    let dict = [("SUBSYSTEM", "_KERNEL_SUBSYSTEM"), ("DEVICE", "_KERNEL_DEVICE")]
        .into_iter()
        .filter_map(|(key, field)| first(&entry, field).map(|v| (key.to_string(), v)))
        .collect();
    Some(JournalRecord {
        cursor,
        boot_id: first(&entry, "_BOOT_ID")
            .map(|b| dashed_boot_id(&b))
            .unwrap_or_default(),
        ts_us: number(&entry, "_SOURCE_MONOTONIC_TIMESTAMP")
            .or_else(|| number(&entry, "__MONOTONIC_TIMESTAMP"))
            .unwrap_or(0),
        realtime_us: number(&entry, "__REALTIME_TIMESTAMP"),
        // journald's kernel records always have one; info if not.
        level: number(&entry, "PRIORITY").map_or(6, |p| (p & 7) as u8),
        facility: number(&entry, "SYSLOG_FACILITY").map_or(0, |f| f.min(255) as u8),
        message: first(&entry, "MESSAGE").unwrap_or_default(),
        dict,
    })
}

/// How to run journalctl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalConfig {
    /// The program (`--journalctl`).
    pub journalctl: String,
    /// Read the journal files of this directory (`--directory=`): a host's `/var/log/journal`
    /// mounted into a container. None: the local journal.
    pub directory: Option<PathBuf>,
    /// Start after this cursor (the last record read before). None: the boot's first record.
    pub after_cursor: Option<String>,
    /// Keep reading as entries arrive (`-f`); otherwise stop at the end.
    pub follow: bool,
    /// Read this boot's kernel records (the agent's boot id; with or without dashes). In follow
    /// mode journalctl then waits for them even where the journal holds none yet (a directory not
    /// yet flushed to). None: journalctl's `-k` choice: this machine's boot for the local journal,
    /// the newest boot in `directory` otherwise.
    pub boot_id: Option<String>,
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            journalctl: "journalctl".into(),
            directory: None,
            after_cursor: None,
            follow: false,
            boot_id: None,
        }
    }
}

impl JournalConfig {
    /// journalctl's arguments. An `after_cursor` goes as `--cursor` (the entry at the cursor is
    /// dropped by the reader), for the reason in the module's comment.
    pub fn args(&self) -> io::Result<Vec<String>> {
        let mut args: Vec<String> = ["-o", "json", "--no-pager", "--all", "--no-tail"]
            .map(String::from)
            .to_vec();
        args.push(format!("--output-fields={OUTPUT_FIELDS}"));
        if let Some(d) = &self.directory {
            args.push(format!("--directory={}", d.display()));
        }
        if self.follow {
            args.push("-f".into());
        }
        if let Some(c) = self.cursor() {
            args.push(format!("--cursor={c}"));
        }
        match &self.boot_id {
            Some(b) => {
                let b = undashed_boot_id(b)
                    .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("not a boot id: {b:?}")))?;
                if self.follow {
                    args.push("--merge".into());
                }
                args.push("_TRANSPORT=kernel".into());
                args.push(format!("_BOOT_ID={b}"));
            }
            None => args.push("-k".into()),
        }
        Ok(args)
    }

    fn cursor(&self) -> Option<&str> {
        self.after_cursor.as_deref().map(str::trim).filter(|c| !c.is_empty())
    }
}

/// How journalctl ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalExit {
    /// Its exit status; None if a signal ended it.
    pub code: Option<i32>,
    /// The end of what it wrote to stderr (why it failed), trimmed.
    pub stderr: String,
}

impl JournalExit {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl std::fmt::Display for JournalExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            Some(c) => write!(f, "journalctl exited with status {c}")?,
            None => write!(f, "journalctl was killed by a signal")?,
        }
        if !self.stderr.is_empty() {
            write!(f, ": {}", self.stderr)?;
        }
        Ok(())
    }
}

/// What one poll of the journal gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalPoll {
    /// Up to `MAX_RECORDS_PER_POLL` records, oldest first.
    Records(Vec<JournalRecord>),
    /// Nothing new yet.
    Idle,
    /// journalctl exited and every record it printed was returned. Without `follow` and with
    /// `success()`, the end of the journal; otherwise the caller starts it again after the last
    /// record it read (a failure says why in `stderr`: a missing directory, a refused cursor, no
    /// entry of the `-k` boot in a directory).
    Ended(JournalExit),
}

/// journalctl running, its output parsed on a thread into a bounded channel: when the caller
/// falls behind, the channel and then the pipe fill and journalctl waits; memory stays bounded.
/// The child is killed when this is dropped.
pub struct JournalSource {
    child: Child,
    records: Receiver<JournalRecord>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_thread: Option<JoinHandle<()>>,
    read_error: Arc<Mutex<Option<String>>>,
    exit: Option<JournalExit>,
}

impl JournalSource {
    /// Starts journalctl as `config` says.
    pub fn spawn(config: &JournalConfig) -> io::Result<JournalSource> {
        let mut child = Command::new(&config.journalctl)
            .args(config.args()?)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("starting {}: {e}", config.journalctl)))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let child_stderr = child.stderr.take().expect("stderr is piped");
        let (tx, records) = sync_channel(CHANNEL_RECORDS);
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let read_error = Arc::new(Mutex::new(None));
        let skip = config.cursor().map(str::to_string);
        let threads = (|| {
            let err = read_error.clone();
            std::thread::Builder::new()
                .name("journalctl-stdout".into())
                .spawn(move || read_records(stdout, skip, tx, err))?;
            let buf = stderr.clone();
            std::thread::Builder::new()
                .name("journalctl-stderr".into())
                .spawn(move || read_stderr(child_stderr, buf))
        })();
        let stderr_thread = match threads {
            Ok(t) => t,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        Ok(JournalSource {
            child,
            records,
            stderr,
            stderr_thread: Some(stderr_thread),
            read_error,
            exit: None,
        })
    }

    /// The records read since the last poll; never blocks, except for journalctl's exit once its
    /// output has ended.
    pub fn poll(&mut self) -> io::Result<JournalPoll> {
        if let Some(exit) = &self.exit {
            return Ok(JournalPoll::Ended(exit.clone()));
        }
        let mut out = Vec::new();
        while out.len() < MAX_RECORDS_PER_POLL {
            match self.records.try_recv() {
                Ok(r) => out.push(r),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) if out.is_empty() => return self.finish(),
                Err(TryRecvError::Disconnected) => break,
            }
        }
        Ok(if out.is_empty() {
            JournalPoll::Idle
        } else {
            JournalPoll::Records(out)
        })
    }

    /// How long to wait after `Idle`.
    pub fn idle_wait(&self) -> Duration {
        Duration::from_millis(200)
    }

    /// journalctl's process id.
    #[cfg(test)]
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its output has ended: its exit status and stderr.
    fn finish(&mut self) -> io::Result<JournalPoll> {
        let read_error = self.read_error.lock().expect("read error lock").take();
        if read_error.is_some() {
            // Its output is no longer read: it would wait on a full pipe forever.
            let _ = self.child.kill();
        }
        let status = self.child.wait()?;
        if let Some(t) = self.stderr_thread.take() {
            let _ = t.join();
        }
        let mut stderr = String::from_utf8_lossy(&self.stderr.lock().expect("stderr lock"))
            .trim()
            .to_string();
        if let Some(e) = read_error {
            stderr = format!("{stderr} (reading its output: {e})").trim().to_string();
        }
        let exit = JournalExit {
            code: status.code(),
            stderr,
        };
        self.exit = Some(exit.clone());
        Ok(JournalPoll::Ended(exit))
    }
}

impl Drop for JournalSource {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Reads journalctl's lines into records until its output ends or the source is dropped. The
/// entry at the resume cursor (the first line, if the cursor's entry still exists) is dropped.
fn read_records(
    stdout: ChildStdout,
    mut skip: Option<String>,
    tx: SyncSender<JournalRecord>,
    read_error: Arc<Mutex<Option<String>>>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader).take(MAX_LINE_BYTES as u64).read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) if line.last() != Some(&b'\n') && line.len() >= MAX_LINE_BYTES => {
                // Too long: skip to its end.
                if let Err(e) = skip_line(&mut reader) {
                    *read_error.lock().expect("read error lock") = Some(e.to_string());
                    return;
                }
                continue;
            }
            Ok(_) => {}
            // read_until retries EINTR itself.
            Err(e) => {
                *read_error.lock().expect("read error lock") = Some(e.to_string());
                return;
            }
        }
        let Some(record) = parse_journal_line(&String::from_utf8_lossy(&line)) else {
            continue;
        };
        if let Some(cursor) = skip.take()
            && cursor == record.cursor
        {
            continue;
        }
        if tx.send(record).is_err() {
            return;
        }
    }
}

fn skip_line(reader: &mut impl BufRead) -> io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            reader.consume(i + 1);
            return Ok(());
        }
        let n = buf.len();
        reader.consume(n);
    }
}

/// Keeps the end of journalctl's stderr.
fn read_stderr(mut stderr: ChildStderr, keep: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 4096];
    loop {
        match stderr.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                let mut k = keep.lock().expect("stderr lock");
                k.extend_from_slice(&buf[..n]);
                if k.len() > MAX_STDERR_BYTES {
                    let cut = k.len() - MAX_STDERR_BYTES;
                    k.drain(..cut);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
#[path = "../tests/support/journal_builder.rs"]
mod journal_builder;

#[cfg(test)]
mod tests {
    use super::journal_builder::{JournalEntry, host_boot_id, journal_remote, journalctl_available, write_journal};
    use super::*;
    use std::path::Path;
    use std::time::Instant;

    /// `journalctl -o json` (systemd 252) of kernel entries; see tests/fixtures/README.md.
    const FIXTURE: &str = include_str!("../../../tests/fixtures/journald/journalctl-kernel.json");

    #[test]
    fn journalctl_json_strings_byte_arrays_several_values_and_null() {
        let r: Vec<JournalRecord> = FIXTURE.lines().map(|l| parse_journal_line(l).unwrap()).collect();
        assert_eq!(r.len(), 6);
        let xid = &r[0];
        assert_eq!(
            xid.cursor,
            "s=30f14ea88fa243558386f058ed4a42dc;i=1;b=6f1b8e0c2d4a4e3f9a7c5b1d0e2f4a6c;m=141dd763e8;t=61a830bb963e8;x=4f398c82e280084c"
        );
        assert_eq!(xid.boot_id, "6f1b8e0c-2d4a-4e3f-9a7c-5b1d0e2f4a6c");
        assert_eq!(
            (xid.ts_us, xid.realtime_us),
            (86_400_000_000, Some(1_718_000_000_001_000))
        );
        assert_eq!((xid.level, xid.facility), (4, 0));
        assert_eq!(
            xid.message,
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
        );
        assert_eq!(
            xid.dict,
            vec![
                ("SUBSYSTEM".to_string(), "pci".to_string()),
                ("DEVICE".to_string(), "+pci:0000:3b:00.0".to_string())
            ]
        );
        // Not UTF-8, with a tab: an array of bytes.
        assert_eq!(r[1].message, "NVRM: GPU at PCI:0000:3b:00: \u{fffd}\u{fffd}\tGPU-5f2c");
        assert_eq!(r[1].level, 3);
        // Several values: the first; a value among them may be bytes.
        assert_eq!(r[2].message, "first value");
        assert_eq!(r[2].dict, vec![("SUBSYSTEM".to_string(), "pci".to_string())]);
        // Over 4096 bytes without --all: null.
        assert_eq!(r[3].message, "");
        assert_eq!(r[3].ts_us, 86_400_003_000);
        assert_eq!(r[4].message, "quote \" backslash \\ unicode é");
        // No _SOURCE_MONOTONIC_TIMESTAMP: when journald received it.
        assert_eq!(r[4].ts_us, 86_400_005_000);
        // Userspace writing to /dev/kmsg: its own facility.
        assert_eq!((r[5].facility, r[5].level), (3, 6));
    }

    #[test]
    fn lines_that_are_not_entries_are_refused() {
        assert!(parse_journal_line("").is_none());
        assert!(parse_journal_line("not json").is_none());
        assert!(parse_journal_line("[1,2]").is_none());
        assert!(parse_journal_line(r#"{"MESSAGE":"no cursor"}"#).is_none());
        let r = parse_journal_line(r#"{"__CURSOR":"c","MESSAGE":[104,105],"PRIORITY":"11"}"#).unwrap();
        assert_eq!(
            (r.message.as_str(), r.level, r.ts_us, r.realtime_us),
            ("hi", 3, 0, None)
        );
        assert_eq!(r.boot_id, "");
    }

    #[test]
    fn boot_ids_in_both_forms() {
        let dashed = "14744485-9266-4c1e-bd31-9bd3df6dca9c";
        assert_eq!(dashed_boot_id("1474448592664C1EBD319BD3DF6DCA9C"), dashed);
        assert_eq!(dashed_boot_id(dashed), dashed);
        assert_eq!(dashed_boot_id("not-a-boot"), "not-a-boot");
        assert_eq!(undashed_boot_id(dashed).unwrap(), "1474448592664c1ebd319bd3df6dca9c");
        assert!(undashed_boot_id("x").is_none());
    }

    #[test]
    fn the_command_line() {
        let fixed = "-o json --no-pager --all --no-tail --output-fields=MESSAGE,PRIORITY,SYSLOG_FACILITY,_SOURCE_MONOTONIC_TIMESTAMP,_KERNEL_SUBSYSTEM,_KERNEL_DEVICE";
        let c = JournalConfig::default();
        assert_eq!(c.args().unwrap().join(" "), format!("{fixed} -k"));
        let c = JournalConfig {
            directory: Some("/host/var/log/journal".into()),
            after_cursor: Some("s=1;i=2".into()),
            follow: true,
            boot_id: Some("14744485-9266-4c1e-bd31-9bd3df6dca9c".into()),
            ..Default::default()
        };
        assert_eq!(
            c.args().unwrap().join(" "),
            format!(
                "{fixed} --directory=/host/var/log/journal -f --cursor=s=1;i=2 --merge _TRANSPORT=kernel _BOOT_ID=1474448592664c1ebd319bd3df6dca9c"
            )
        );
        let bad = JournalConfig {
            boot_id: Some("x _SYSTEMD_UNIT=y".into()),
            ..Default::default()
        };
        assert_eq!(bad.args().unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    /// journalctl and systemd-journal-remote, or a line saying why the test does not run.
    fn tools() -> bool {
        if journal_remote().is_none() || !journalctl_available("journalctl") {
            eprintln!(
                "skipped: needs journalctl and systemd-journal-remote (Debian: apt-get install systemd systemd-journal-remote)"
            );
            return false;
        }
        true
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fl-journal-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    const OTHER_BOOT: &str = "0123456789abcdef0123456789abcdef";

    fn kernel(boot: &str, i: u64, message: &str) -> JournalEntry {
        JournalEntry::kernel(boot, 1_700_000_000_000_000 + i * 1000, 5_000_000 + i * 1000, 4, message)
    }

    fn config(dir: &Path) -> JournalConfig {
        JournalConfig {
            directory: Some(dir.to_path_buf()),
            boot_id: Some(host_boot_id()),
            ..Default::default()
        }
    }

    /// Polls until `n` records came (or it ended, or 10 s passed).
    fn read(src: &mut JournalSource, n: usize) -> (Vec<JournalRecord>, Option<JournalExit>) {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while out.len() < n && Instant::now() < deadline {
            match src.poll().unwrap() {
                JournalPoll::Records(r) => out.extend(r),
                JournalPoll::Idle => std::thread::sleep(Duration::from_millis(20)),
                JournalPoll::Ended(e) => return (out, Some(e)),
            }
        }
        (out, None)
    }

    /// All of it, to its end (no follow).
    fn read_all(config: &JournalConfig) -> (Vec<JournalRecord>, JournalExit) {
        let mut src = JournalSource::spawn(config).unwrap();
        let (r, exit) = read(&mut src, usize::MAX);
        (r, exit.expect("journalctl ends without -f"))
    }

    fn messages(r: &[JournalRecord]) -> Vec<&str> {
        r.iter().map(|r| r.message.as_str()).collect()
    }

    #[test]
    fn a_real_journal_read_to_its_end_and_resumed_after_a_cursor() {
        if !tools() {
            return;
        }
        let dir = temp_dir("resume");
        let host = host_boot_id();
        write_journal(
            &dir.join("kernel.journal"),
            &[
                kernel(OTHER_BOOT, 0, "an earlier boot"),
                kernel(
                    &host,
                    1,
                    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
                )
                .field("_KERNEL_SUBSYSTEM", "pci")
                .field("_KERNEL_DEVICE", "+pci:0000:3b:00.0"),
                kernel(&host, 2, "")
                    .without("MESSAGE")
                    .field("MESSAGE", b"bytes \xff\x01 end"),
                kernel(&host, 3, "third"),
                kernel(&host, 4, "a service's output")
                    .without("_TRANSPORT")
                    .field("_TRANSPORT", "stdout"),
            ],
        )
        .unwrap();
        let (r, exit) = read_all(&config(&dir));
        assert!(exit.success(), "{exit}");
        assert_eq!(
            messages(&r),
            vec![
                "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
                "bytes \u{fffd}\u{1} end",
                "third"
            ]
        );
        assert!(r.iter().all(|r| r.boot_id == host));
        assert_eq!(
            (r[0].level, r[0].ts_us, r[0].realtime_us),
            (4, 5_000_000, Some(1_700_000_000_001_000))
        );
        assert_eq!(r[0].dict[1], ("DEVICE".to_string(), "+pci:0000:3b:00.0".to_string()));

        // From the first record's cursor: only what came after it.
        let after_first = JournalConfig {
            after_cursor: Some(r[0].cursor.clone()),
            ..config(&dir)
        };
        let (later, _) = read_all(&after_first);
        assert_eq!(later, r[1..].to_vec());
        // From the last: nothing.
        let (none, exit) = read_all(&JournalConfig {
            after_cursor: Some(r[2].cursor.clone()),
            ..config(&dir)
        });
        assert!(none.is_empty() && exit.success(), "{none:?} {exit}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_cursor_of_an_earlier_boot_loses_no_record_of_this_one() {
        if !tools() {
            return;
        }
        let dir = temp_dir("boots");
        let host = host_boot_id();
        write_journal(
            &dir.join("kernel.journal"),
            &[
                kernel(OTHER_BOOT, 0, "earlier 1"),
                kernel(OTHER_BOOT, 1, "earlier 2"),
                kernel(&host, 2, "this 1"),
                kernel(&host, 3, "this 2"),
            ],
        )
        .unwrap();
        let earlier = JournalConfig {
            boot_id: Some(OTHER_BOOT.into()),
            ..config(&dir)
        };
        let (r, _) = read_all(&earlier);
        assert_eq!(messages(&r), vec!["earlier 1", "earlier 2"]);
        assert_eq!(r[0].boot_id, dashed_boot_id(OTHER_BOOT));
        // The end of the earlier boot after its first record (what a reboot left unread)...
        let (rest, _) = read_all(&JournalConfig {
            after_cursor: Some(r[0].cursor.clone()),
            ..earlier.clone()
        });
        assert_eq!(messages(&rest), vec!["earlier 2"]);
        // ...and this boot from its first record, though the cursor is of another boot
        // (journalctl's --after-cursor would skip "this 1").
        let (this, _) = read_all(&JournalConfig {
            after_cursor: Some(r[0].cursor.clone()),
            ..config(&dir)
        });
        assert_eq!(messages(&this), vec!["this 1", "this 2"]);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn dash_k_with_a_directory_is_its_newest_boot_not_this_machines() {
        if !tools() {
            return;
        }
        let dir = temp_dir("dash-k");
        let host = host_boot_id();
        write_journal(
            &dir.join("kernel.journal"),
            &[kernel(&host, 0, "this boot"), kernel(OTHER_BOOT, 1, "a newer boot")],
        )
        .unwrap();
        let (r, _) = read_all(&JournalConfig {
            boot_id: None,
            ..config(&dir)
        });
        assert_eq!(messages(&r), vec!["a newer boot"]);
        let (r, _) = read_all(&config(&dir));
        assert_eq!(messages(&r), vec!["this boot"]);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn following_sees_appended_entries_and_the_child_dies_with_the_source() {
        if !tools() {
            return;
        }
        let dir = temp_dir("follow");
        let host = host_boot_id();
        let file = dir.join("kernel.journal");
        // Only an earlier boot so far: journalctl waits for this boot's records.
        write_journal(&file, &[kernel(OTHER_BOOT, 0, "earlier")]).unwrap();
        let mut src = JournalSource::spawn(&JournalConfig {
            follow: true,
            ..config(&dir)
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(src.poll().unwrap(), JournalPoll::Idle);
        write_journal(&file, &[kernel(&host, 1, "one"), kernel(&host, 2, "two")]).unwrap();
        let (r, exit) = read(&mut src, 2);
        assert!(exit.is_none(), "{exit:?}");
        assert_eq!(messages(&r), vec!["one", "two"]);
        write_journal(&file, &[kernel(&host, 3, "three")]).unwrap();
        let (r3, _) = read(&mut src, 1);
        assert_eq!(messages(&r3), vec!["three"]);

        // Restarted after "two": "three" only.
        let mut again = JournalSource::spawn(&JournalConfig {
            follow: true,
            after_cursor: Some(r[1].cursor.clone()),
            ..config(&dir)
        })
        .unwrap();
        let (r, _) = read(&mut again, 1);
        assert_eq!(messages(&r), vec!["three"]);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(again.poll().unwrap(), JournalPoll::Idle);

        let pid = src.id();
        assert!(Path::new(&format!("/proc/{pid}")).exists());
        drop(src);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "journalctl {pid} outlived its source"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_burst_comes_a_thousand_records_at_a_time() {
        if !tools() {
            return;
        }
        let dir = temp_dir("burst");
        let host = host_boot_id();
        let entries: Vec<_> = (0..2500).map(|i| kernel(&host, i, &format!("line {i}"))).collect();
        write_journal(&dir.join("kernel.journal"), &entries).unwrap();
        let mut src = JournalSource::spawn(&config(&dir)).unwrap();
        // Let journalctl run ahead (up to the channel's bound).
        std::thread::sleep(Duration::from_millis(1500));
        let mut sizes = Vec::new();
        let mut all = Vec::new();
        loop {
            match src.poll().unwrap() {
                JournalPoll::Records(r) => {
                    sizes.push(r.len());
                    all.extend(r);
                }
                JournalPoll::Idle => std::thread::sleep(Duration::from_millis(20)),
                JournalPoll::Ended(e) => {
                    assert!(e.success(), "{e}");
                    break;
                }
            }
        }
        assert_eq!(all.len(), 2500);
        assert!(sizes.iter().all(|&n| n <= MAX_RECORDS_PER_POLL));
        assert_eq!(sizes[..2], [1000, 1000]);
        assert!(all.iter().enumerate().all(|(i, r)| r.message == format!("line {i}")));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn failures_end_with_journalctls_reason() {
        if !tools() {
            return;
        }
        let dir = temp_dir("failures");
        write_journal(&dir.join("kernel.journal"), &[kernel(&host_boot_id(), 0, "x")]).unwrap();
        let (_, exit) = read_all(&config(&dir.join("missing")));
        assert!(!exit.success());
        assert!(exit.stderr.contains("No such file or directory"), "{exit}");
        let mut src = JournalSource::spawn(&JournalConfig {
            after_cursor: Some("not a cursor".into()),
            follow: true,
            ..config(&dir)
        })
        .unwrap();
        let (_, exit) = read(&mut src, 1);
        let exit = exit.expect("a refused cursor ends journalctl");
        assert_eq!(exit.code, Some(1));
        assert!(exit.to_string().contains("cursor"), "{exit}");
        // Ended stays ended.
        assert_eq!(src.poll().unwrap(), JournalPoll::Ended(exit));
        let missing = JournalSource::spawn(&JournalConfig {
            journalctl: "/nonexistent/journalctl".into(),
            ..config(&dir)
        });
        assert!(missing.err().unwrap().to_string().contains("/nonexistent/journalctl"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
