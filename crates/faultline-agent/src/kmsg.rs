//! The kernel log in `/dev/kmsg`'s record format: `priority,sequence,timestamp_us,flags;message`,
//! then optional continuation lines starting with a space (`" SUBSYSTEM=pci"`). Reading
//! `/dev/kmsg` returns one record per `read`; a file (a copy, a container's view) holds records one
//! per line. Non-printable bytes of the message arrive escaped as `\xNN`.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One kernel log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsgRecord {
    /// Syslog level (0 emerg .. 7 debug).
    pub level: u8,
    /// Syslog facility (0 kernel).
    pub facility: u8,
    /// The kernel's sequence number: strictly increasing within one boot.
    pub seq: u64,
    /// Microseconds since boot (monotonic clock).
    pub ts_us: u64,
    /// The message, unescaped.
    pub message: String,
    /// Continuation lines (`KEY=value`), as the kernel's device dictionary.
    pub dict: Vec<(String, String)>,
}

/// Parses one record: its header line and its continuation lines. None if the header is not
/// `priority,sequence,timestamp[,flags...];`.
pub fn parse_record(text: &str) -> Option<KmsgRecord> {
    let mut lines = text.split('\n');
    let header = lines.next()?;
    let (prefix, message) = header.split_once(';')?;
    let mut fields = prefix.split(',');
    let priority: u32 = fields.next()?.trim().parse().ok()?;
    let seq: u64 = fields.next()?.trim().parse().ok()?;
    let ts_us: u64 = fields.next()?.trim().parse().ok()?;
    let dict = lines
        .filter_map(|l| l.strip_prefix(' '))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), unescape(v)))
        .collect();
    Some(KmsgRecord {
        level: (priority & 7) as u8,
        facility: (priority >> 3).min(255) as u8,
        seq,
        ts_us,
        message: unescape(message.trim_end_matches('\r')),
        dict,
    })
}

/// `\xNN` escapes back to bytes (invalid UTF-8 replaced); a backslash not followed by `xNN` stays.
pub fn unescape(s: &str) -> String {
    if !s.contains("\\x") {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1] == b'x'
            && let Some(v) = std::str::from_utf8(&b[i + 2..i + 4])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Splits a byte stream of records (one per line, continuation lines after their record) into
/// records. Incomplete lines stay buffered until their newline arrives.
#[derive(Default)]
pub struct RecordSplitter {
    buf: Vec<u8>,
}

impl RecordSplitter {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The complete records buffered so far. A record whose continuation lines may still be on
    /// their way (the buffer ends right after it) is held back unless `at_end`.
    pub fn records(&mut self, at_end: bool) -> Vec<String> {
        let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let mut out = Vec::new();
        // The record being gathered: its start and end (before its last newline) in `buf`.
        let mut current: Option<(usize, usize)> = None;
        let mut pos = 0;
        while let Some(nl) = self.buf[pos..].iter().position(|&c| c == b'\n') {
            let line = &self.buf[pos..pos + nl];
            if line.first() == Some(&b' ') {
                if let Some((_, end)) = current.as_mut() {
                    *end = pos + nl;
                }
            } else {
                if let Some((s, e)) = current.take() {
                    out.push(lossy(&self.buf[s..e]));
                }
                if !line.iter().all(u8::is_ascii_whitespace) {
                    current = Some((pos, pos + nl));
                }
            }
            pos += nl + 1;
        }
        // A header line (even incomplete) after the record means the record is whole.
        let header_follows = pos < self.buf.len() && self.buf[pos] != b' ';
        let keep_from = match current {
            Some((s, e)) if at_end || header_follows => {
                out.push(lossy(&self.buf[s..e]));
                pos
            }
            Some((s, _)) => s,
            None => pos,
        };
        self.buf.drain(..keep_from);
        out
    }
}

/// Where records come from.
pub enum Source {
    /// `/dev/kmsg`, opened non-blocking: one record per read, `EAGAIN` when there is none.
    Device { path: PathBuf, file: File },
    /// A file of records, followed as it grows (and read again from the start if it shrinks).
    File {
        path: PathBuf,
        file: File,
        offset: u64,
        splitter: RecordSplitter,
    },
}

/// What one poll of the source gave.
pub enum Poll {
    Records(Vec<String>),
    /// Nothing new (a file at its end).
    Idle,
    /// The kernel overwrote records before they were read (`EPIPE`); reading goes on.
    Overrun,
}

impl Source {
    pub fn open_device(path: &Path) -> io::Result<Source> {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK (Linux): the reader returns between records, so it can stop and save.
        const O_NONBLOCK: i32 = 0o4000;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK)
            .open(path)?;
        Ok(Source::Device {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Starts over from the first record the source still holds.
    pub fn reopen(self) -> io::Result<Source> {
        match self {
            Source::Device { path, .. } => Source::open_device(&path),
            Source::File { path, .. } => Source::open_file(&path),
        }
    }

    pub fn open_file(path: &Path) -> io::Result<Source> {
        Ok(Source::File {
            path: path.to_path_buf(),
            file: File::open(path)?,
            offset: 0,
            splitter: RecordSplitter::default(),
        })
    }

    /// The next records. A file at its end returns `Idle` (the caller waits and polls again).
    pub fn poll(&mut self) -> io::Result<Poll> {
        match self {
            Source::Device { file, .. } => {
                // Up to a thousand records per poll: one spool write and fsync for a burst.
                let mut buf = vec![0u8; 16 * 1024];
                let mut records = Vec::new();
                while records.len() < 1000 {
                    match file.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => records.push(String::from_utf8_lossy(&buf[..n]).trim_end_matches('\n').to_string()),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        // EPIPE: the kernel overwrote records; the next read goes on after them.
                        Err(e) if e.raw_os_error() == Some(32) && records.is_empty() => return Ok(Poll::Overrun),
                        Err(e) if e.raw_os_error() == Some(32) => break,
                        Err(e) => return Err(e),
                    }
                }
                Ok(if records.is_empty() {
                    Poll::Idle
                } else {
                    Poll::Records(records)
                })
            }
            Source::File {
                path,
                file,
                offset,
                splitter,
            } => {
                let len = std::fs::metadata(&*path)?.len();
                if len < *offset {
                    // Truncated or replaced: read the new content from its start.
                    *file = File::open(&*path)?;
                    *offset = 0;
                    *splitter = RecordSplitter::default();
                }
                file.seek(SeekFrom::Start(*offset))?;
                let mut buf = vec![0u8; 256 * 1024];
                let n = file.read(&mut buf)?;
                *offset += n as u64;
                splitter.push(&buf[..n]);
                let at_end = n == 0 || *offset >= len;
                let records = splitter.records(at_end);
                if records.is_empty() {
                    Ok(Poll::Idle)
                } else {
                    Ok(Poll::Records(records))
                }
            }
        }
    }

    /// How long to wait after `Idle`.
    pub fn idle_wait(&self) -> Duration {
        Duration::from_millis(200)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_with_its_continuation_lines() {
        let r = parse_record(
            "3,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0",
        )
        .unwrap();
        assert_eq!((r.level, r.facility, r.seq, r.ts_us), (3, 0, 1234, 5_678_901));
        assert!(r.message.starts_with("NVRM: Xid (PCI:0000:3b:00): 79"));
        assert_eq!(
            r.dict,
            vec![
                ("SUBSYSTEM".to_string(), "pci".to_string()),
                ("DEVICE".to_string(), "+pci:0000:3b:00.0".to_string())
            ]
        );
    }

    #[test]
    fn priority_carries_the_facility_and_flags_may_have_extra_fields() {
        // 30 = facility 3 (daemon) << 3 | level 6 (info); newer kernels add a caller field.
        let r = parse_record("30,7,100,c,caller=T1;systemd[1]: started").unwrap();
        assert_eq!((r.facility, r.level, r.seq, r.ts_us), (3, 6, 7, 100));
        assert_eq!(r.message, "systemd[1]: started");
    }

    #[test]
    fn escapes_are_undone_and_broken_headers_refused() {
        assert_eq!(unescape("a\\x0ab\\x5c\\x"), "a\nb\\\\x");
        assert_eq!(parse_record("6,1,2,-;tab\\x09here").unwrap().message, "tab\there");
        assert!(parse_record("no header here").is_none());
        assert!(parse_record("6,x,2,-;bad seq").is_none());
        assert!(parse_record("6,1;too short").is_none());
        assert!(parse_record("").is_none());
    }

    #[test]
    fn the_splitter_waits_for_whole_lines_and_continuations() {
        let mut s = RecordSplitter::default();
        s.push(b"6,1,10,-;first\n SUBSYSTEM=pci\n6,2,20,-;sec");
        // The first record is complete (a new header follows it); the second is not.
        assert_eq!(s.records(false), vec!["6,1,10,-;first\n SUBSYSTEM=pci".to_string()]);
        s.push(b"ond\n");
        // Its continuation lines may still come: held back until the end of the input.
        assert!(s.records(false).is_empty());
        s.push(b" DEVICE=x\n6,3,30,-;third\n");
        assert_eq!(s.records(false), vec!["6,2,20,-;second\n DEVICE=x".to_string()]);
        assert_eq!(s.records(true), vec!["6,3,30,-;third".to_string()]);
        assert!(s.records(true).is_empty());
    }

    #[test]
    fn a_followed_file_is_read_as_it_grows_and_again_when_replaced() {
        let dir = std::env::temp_dir().join(format!("fl-kmsg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kmsg");
        std::fs::write(&path, "6,1,10,-;one\n").unwrap();
        let mut src = Source::open_file(&path).unwrap();
        let Poll::Records(r) = src.poll().unwrap() else {
            panic!("records")
        };
        assert_eq!(r, vec!["6,1,10,-;one"]);
        assert!(matches!(src.poll().unwrap(), Poll::Idle));
        std::fs::write(&path, "6,1,10,-;one\n6,2,20,-;two\n").unwrap();
        let Poll::Records(r) = src.poll().unwrap() else {
            panic!("records")
        };
        assert_eq!(r, vec!["6,2,20,-;two"]);
        std::fs::write(&path, "6,1,5,-;new\n").unwrap();
        let Poll::Records(r) = src.poll().unwrap() else {
            panic!("records")
        };
        assert_eq!(r, vec!["6,1,5,-;new"]);
        std::fs::remove_dir_all(&dir).ok();
    }
}
