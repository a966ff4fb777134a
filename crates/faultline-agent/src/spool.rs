//! The disk spool: every signal is written here, and fsync'd, before its source position moves on;
//! the sender reads from here and removes what the server acknowledged.
//!
//! Layout in `<state-dir>/spool/`: append-only segment files `NNNNNNNNNNNNNNNNNNNN.seg` holding
//! frames `[len u32][crc32 u32][seq u64][severity u8][payload]` (little endian; the CRC covers seq,
//! severity and payload), and `acked`, the highest spool sequence number the server acknowledged
//! (written to a temporary file, fsync'd and renamed). The sender acknowledges in order, so
//! everything at or below `acked` is gone; a segment entirely below it is deleted. A torn frame at
//! the end of the last segment (a crash mid-write: never acknowledged) is cut off on reopen.
//!
//! Bounded in bytes: when an append would pass the bound, the oldest low-severity records are
//! dropped first (their segments rewritten without them, atomically), then the oldest of any
//! severity; each drop is counted by reason.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const HEADER: usize = 4 + 4 + 8 + 1;
/// A frame longer than this is corruption, not a signal (a signal is a few KiB at most).
const MAX_PAYLOAD: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Low = 0,
    High = 1,
}

/// Why records left the spool without reaching the server.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Drops {
    /// Low-severity records dropped to make room.
    pub low_severity_spool_full: u64,
    /// Records of any severity dropped to make room once no low-severity one was left.
    pub spool_full: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    seq: u64,
    offset: u64,
    /// The whole frame.
    len: u64,
    severity: Severity,
}

struct Segment {
    path: PathBuf,
    entries: Vec<Entry>,
    bytes: u64,
}

pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    segment_bytes: u64,
    /// By first sequence number.
    segments: BTreeMap<u64, Segment>,
    acked: u64,
    next_seq: u64,
    /// The open tail segment (the last of `segments`), for appends.
    tail: Option<(u64, File)>,
    pub drops: Drops,
}

/// One record read for sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub seq: u64,
    pub severity: Severity,
    pub payload: Vec<u8>,
}

fn frame(seq: u64, severity: Severity, payload: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(9 + payload.len());
    body.extend_from_slice(&seq.to_le_bytes());
    body.push(severity as u8);
    body.extend_from_slice(payload);
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Reads the frames of a segment; stops at the first torn or corrupt one, returning its offset.
fn scan(path: &Path) -> io::Result<(Vec<Entry>, u64)> {
    let data = fs::read(path)?;
    let mut entries = Vec::new();
    let mut at = 0usize;
    while at + HEADER <= data.len() {
        let len = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(data[at + 4..at + 8].try_into().unwrap());
        if len > MAX_PAYLOAD || at + HEADER + len > data.len() {
            break;
        }
        let body = &data[at + 8..at + HEADER + len];
        if crc32fast::hash(body) != crc {
            break;
        }
        let seq = u64::from_le_bytes(body[..8].try_into().unwrap());
        let severity = if body[8] == 0 { Severity::Low } else { Severity::High };
        entries.push(Entry {
            seq,
            offset: at as u64,
            len: (HEADER + len) as u64,
            severity,
        });
        at += HEADER + len;
    }
    Ok((entries, at as u64))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}.seg")
}

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename, directory fsync).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// What a read-only look at a spool directory finds (for `faultline-agent status`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Depth {
    pub records: u64,
    pub bytes: u64,
    pub segments: u64,
}

/// Counts the records waiting in `dir` without changing anything.
pub fn depth(dir: &Path) -> io::Result<Depth> {
    let acked = read_acked(dir)?;
    let mut d = Depth::default();
    if !dir.exists() {
        return Ok(d);
    }
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "seg") {
            let (entries, _) = scan(&p)?;
            d.segments += 1;
            d.bytes += fs::metadata(&p)?.len();
            d.records += entries.iter().filter(|e| e.seq > acked).count() as u64;
        }
    }
    Ok(d)
}

fn read_acked(dir: &Path) -> io::Result<u64> {
    match fs::read_to_string(dir.join("acked")) {
        Ok(s) => Ok(s.trim().parse().unwrap_or(0)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

impl Spool {
    /// Opens (or creates) the spool in `dir`, bounded to `max_bytes`.
    pub fn open(dir: &Path, max_bytes: u64) -> io::Result<Spool> {
        fs::create_dir_all(dir)?;
        let acked = read_acked(dir)?;
        let mut segments = BTreeMap::new();
        let mut paths: Vec<PathBuf> = fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "seg"))
            .collect();
        paths.sort();
        let mut next_seq = acked + 1;
        for path in paths {
            let (entries, valid_len) = scan(&path)?;
            let file_len = fs::metadata(&path)?.len();
            if valid_len < file_len {
                // Only the last segment is written to; anything after its last whole frame was
                // never acknowledged to a reader. In an older segment it is corruption: keep what
                // reads.
                let f = OpenOptions::new().write(true).open(&path)?;
                f.set_len(valid_len)?;
                f.sync_all()?;
            }
            let live: Vec<Entry> = entries.iter().copied().filter(|e| e.seq > acked).collect();
            if let Some(max) = entries.iter().map(|e| e.seq).max() {
                next_seq = next_seq.max(max + 1);
            }
            if live.is_empty() {
                fs::remove_file(&path)?;
                continue;
            }
            let first = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse().ok())
                .unwrap_or(live[0].seq);
            segments.insert(
                first,
                Segment {
                    path,
                    entries: live,
                    bytes: valid_len,
                },
            );
        }
        Ok(Spool {
            dir: dir.to_path_buf(),
            max_bytes,
            segment_bytes: (max_bytes / 8).clamp(4 * 1024, 8 * 1024 * 1024),
            segments,
            acked,
            next_seq,
            tail: None,
            drops: Drops::default(),
        })
    }

    /// Records waiting to be sent.
    pub fn len(&self) -> u64 {
        self.segments.values().map(|s| s.entries.len() as u64).sum()
    }

    #[cfg_attr(not(test), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the spool's files take.
    pub fn bytes(&self) -> u64 {
        self.segments.values().map(|s| s.bytes).sum()
    }

    /// Appends records and fsyncs them: when this returns, they survive a crash. Records larger
    /// than the whole bound are refused (counted as `spool_full`).
    pub fn append(&mut self, records: &[(Severity, Vec<u8>)]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut touched = false;
        for (severity, payload) in records {
            let len = (HEADER + payload.len()) as u64;
            if payload.len() > MAX_PAYLOAD || len > self.max_bytes {
                self.drops.spool_full += 1;
                continue;
            }
            if self.bytes() + len > self.max_bytes {
                // Rewrites keep the frames written but not yet fsync'd (they are read back from
                // the page cache), and the final sync covers the tail.
                self.make_room(len)?;
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            let bytes = frame(seq, *severity, payload);
            let (first, file) = self.tail_for(len)?;
            let offset = file.seek(SeekFrom::End(0))?;
            file.write_all(&bytes)?;
            let seg = self.segments.get_mut(&first).expect("the tail segment is indexed");
            seg.entries.push(Entry {
                seq,
                offset,
                len,
                severity: *severity,
            });
            seg.bytes = offset + len;
            touched = true;
        }
        if touched {
            self.sync_tail()?;
        }
        Ok(())
    }

    fn sync_tail(&mut self) -> io::Result<()> {
        if let Some((_, f)) = self.tail.as_mut() {
            f.sync_data()?;
        }
        Ok(())
    }

    /// The segment to append `len` bytes to: the last one while it has room, else a new one.
    fn tail_for(&mut self, len: u64) -> io::Result<(u64, &mut File)> {
        let last = self.segments.iter().next_back().map(|(k, s)| (*k, s.bytes));
        let reuse = match (last, &self.tail) {
            (Some((k, bytes)), Some((tk, _))) if k == *tk => bytes + len <= self.segment_bytes || bytes == 0,
            _ => false,
        };
        if !reuse {
            if let Some((k, bytes)) = last
                && bytes + len <= self.segment_bytes
            {
                // Reopen the last segment (after a restart, or after it was rewritten).
                let path = self.segments[&k].path.clone();
                self.tail = Some((k, OpenOptions::new().append(true).open(path)?));
            } else {
                let first = self.next_seq - 1;
                let path = self.dir.join(segment_name(first));
                let f = OpenOptions::new().create(true).append(true).open(&path)?;
                sync_dir(&self.dir)?;
                self.segments.insert(
                    first,
                    Segment {
                        path,
                        entries: Vec::new(),
                        bytes: 0,
                    },
                );
                self.tail = Some((first, f));
            }
        }
        let (k, f) = self.tail.as_mut().expect("a tail segment");
        Ok((*k, f))
    }

    /// Drops records until `incoming` more bytes fit, and a tenth of the bound more (so that a
    /// full spool is not rewritten at every append): the oldest low-severity ones first.
    fn make_room(&mut self, incoming: u64) -> io::Result<()> {
        let target = self.max_bytes.saturating_sub(incoming + self.max_bytes / 10);
        let mut to_free = self.bytes().saturating_sub(target);
        let mut victims: Vec<(u64, u64)> = Vec::new(); // (segment, seq)
        for pass in [Some(Severity::Low), None] {
            for (k, seg) in &self.segments {
                for e in &seg.entries {
                    if to_free == 0 {
                        break;
                    }
                    let eligible = match pass {
                        Some(sev) => e.severity == sev,
                        None => !victims.contains(&(*k, e.seq)),
                    };
                    if eligible {
                        victims.push((*k, e.seq));
                        to_free = to_free.saturating_sub(e.len);
                        match pass {
                            Some(_) => self.drops.low_severity_spool_full += 1,
                            None => self.drops.spool_full += 1,
                        }
                    }
                }
            }
            if to_free == 0 {
                break;
            }
        }
        let mut by_segment: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (k, seq) in victims {
            by_segment.entry(k).or_default().push(seq);
        }
        for (k, seqs) in by_segment {
            self.rewrite_without(k, &seqs)?;
        }
        Ok(())
    }

    /// Rewrites segment `k` without the records `seqs` (temporary file, fsync, rename); removes
    /// it when nothing is left.
    fn rewrite_without(&mut self, k: u64, seqs: &[u64]) -> io::Result<()> {
        if self.tail.as_ref().is_some_and(|(tk, _)| *tk == k) {
            self.tail = None;
        }
        let seg = self.segments.get_mut(&k).expect("a known segment");
        let mut data = Vec::new();
        File::open(&seg.path)?.read_to_end(&mut data)?;
        let mut out = Vec::with_capacity(data.len());
        let mut kept = Vec::new();
        for e in &seg.entries {
            if seqs.contains(&e.seq) {
                continue;
            }
            let offset = out.len() as u64;
            out.extend_from_slice(&data[e.offset as usize..(e.offset + e.len) as usize]);
            kept.push(Entry { offset, ..*e });
        }
        if kept.is_empty() {
            fs::remove_file(&seg.path)?;
            self.segments.remove(&k);
            return sync_dir(&self.dir);
        }
        write_atomic(&seg.path, &out)?;
        seg.bytes = out.len() as u64;
        seg.entries = kept;
        Ok(())
    }

    /// Up to `max_records` of the oldest records, up to about `max_bytes` of payload (at least one).
    pub fn peek(&self, max_records: usize, max_bytes: usize) -> io::Result<Vec<Pending>> {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for seg in self.segments.values() {
            if seg.entries.is_empty() {
                continue;
            }
            let mut f = File::open(&seg.path)?;
            for e in &seg.entries {
                if out.len() >= max_records || (!out.is_empty() && bytes + e.len as usize > max_bytes) {
                    return Ok(out);
                }
                let mut buf = vec![0u8; e.len as usize];
                f.seek(SeekFrom::Start(e.offset))?;
                f.read_exact(&mut buf)?;
                bytes += buf.len();
                out.push(Pending {
                    seq: e.seq,
                    severity: e.severity,
                    payload: buf[HEADER..].to_vec(),
                });
            }
        }
        Ok(out)
    }

    /// The server has everything up to `seq`: remember it (fsync'd) and delete what is done.
    pub fn ack(&mut self, seq: u64) -> io::Result<()> {
        if seq <= self.acked {
            return Ok(());
        }
        self.acked = seq;
        write_atomic(&self.dir.join("acked"), seq.to_string().as_bytes())?;
        let mut emptied = Vec::new();
        for (k, seg) in self.segments.iter_mut() {
            seg.entries.retain(|e| e.seq > seq);
            if seg.entries.is_empty() {
                emptied.push(*k);
            }
        }
        for k in emptied {
            if self.tail.as_ref().is_some_and(|(tk, _)| *tk == k) {
                self.tail = None;
            }
            if let Some(seg) = self.segments.remove(&k) {
                fs::remove_file(&seg.path)?;
            }
        }
        Ok(())
    }
}

/// Appends signals to the spool (fsync'd), counts them and what the spool dropped for them, and
/// wakes the sender. Returns how many were spooled.
pub fn append_signals(
    spool: &std::sync::Mutex<Spool>,
    shared: &crate::state::Shared,
    wake: &tokio::sync::Notify,
    signals: Vec<(Severity, faultline_core::domain::event::EventInput)>,
) -> io::Result<u64> {
    if signals.is_empty() {
        return Ok(0);
    }
    let records: Vec<_> = signals
        .into_iter()
        .map(|(sev, event)| (sev, serde_json::to_vec(&event).expect("an event serialises")))
        .collect();
    let n = records.len() as u64;
    let mut spool = spool.lock().expect("spool lock");
    spool.append(&records)?;
    let drops = std::mem::take(&mut spool.drops);
    drop(spool);
    shared.spooled(n, drops);
    wake.notify_one();
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fl-spool-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn payloads(spool: &Spool) -> Vec<String> {
        spool
            .peek(usize::MAX, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|p| String::from_utf8(p.payload).unwrap())
            .collect()
    }

    fn rec(sev: Severity, s: &str) -> (Severity, Vec<u8>) {
        (sev, s.as_bytes().to_vec())
    }

    #[test]
    fn records_come_back_in_order_and_leave_when_acknowledged() {
        let d = dir("order");
        let mut s = Spool::open(&d, 1 << 20).unwrap();
        s.append(&[rec(Severity::High, "a"), rec(Severity::Low, "b")]).unwrap();
        s.append(&[rec(Severity::High, "c")]).unwrap();
        assert_eq!(payloads(&s), ["a", "b", "c"]);
        let first_two = s.peek(2, usize::MAX).unwrap();
        s.ack(first_two[1].seq).unwrap();
        assert_eq!(payloads(&s), ["c"]);
        assert_eq!(s.len(), 1);
        // Reopened: the acknowledged ones stay gone, numbering goes on.
        drop(s);
        let mut s = Spool::open(&d, 1 << 20).unwrap();
        assert_eq!(payloads(&s), ["c"]);
        s.append(&[rec(Severity::High, "d")]).unwrap();
        let all = s.peek(10, usize::MAX).unwrap();
        assert_eq!(all.iter().map(|p| p.seq).collect::<Vec<_>>(), [3, 4]);
        s.ack(4).unwrap();
        assert!(s.is_empty());
        assert_eq!(depth(&d).unwrap().records, 0);
        fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn a_torn_last_frame_is_cut_and_the_rest_survives_reopen() {
        let d = dir("torn");
        let mut s = Spool::open(&d, 1 << 20).unwrap();
        s.append(&[rec(Severity::High, "one"), rec(Severity::High, "two")])
            .unwrap();
        drop(s);
        // A crash mid-write leaves half a frame at the end.
        let seg = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "seg"))
            .unwrap();
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(&frame(3, Severity::High, b"three")[..10]).unwrap();
        drop(f);
        let mut s = Spool::open(&d, 1 << 20).unwrap();
        assert_eq!(payloads(&s), ["one", "two"]);
        s.append(&[rec(Severity::High, "four")]).unwrap();
        drop(s);
        let s = Spool::open(&d, 1 << 20).unwrap();
        assert_eq!(payloads(&s), ["one", "two", "four"]);
        fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn full_drops_the_oldest_low_severity_first_then_the_oldest() {
        let d = dir("full");
        let one = (HEADER + 10) as u64; // a 10-byte payload's frame
        let mut s = Spool::open(&d, one * 10).unwrap();
        let mut recs = Vec::new();
        for i in 0..10 {
            let sev = if i % 2 == 0 { Severity::Low } else { Severity::High };
            recs.push(rec(
                sev,
                &format!("{}{i:09}", if sev == Severity::Low { 'L' } else { 'H' }),
            ));
        }
        s.append(&recs).unwrap();
        assert_eq!(s.len(), 10);
        assert_eq!(s.bytes(), one * 10);
        // One more: room for it plus a tenth of the bound, i.e. two frames: the two oldest lows.
        s.append(&[rec(Severity::High, "H000000010")]).unwrap();
        assert_eq!(
            payloads(&s),
            [
                "H000000001",
                "H000000003",
                "L000000004",
                "H000000005",
                "L000000006",
                "H000000007",
                "L000000008",
                "H000000009",
                "H000000010"
            ]
        );
        assert_eq!(
            s.drops,
            Drops {
                low_severity_spool_full: 2,
                spool_full: 0
            }
        );
        assert!(s.bytes() <= one * 10);
        // Survives reopen as it is.
        drop(s);
        let mut s = Spool::open(&d, one * 10).unwrap();
        assert_eq!(s.len(), 9);
        // Fill with highs: the remaining lows go first, then the oldest highs.
        for i in 11..20 {
            s.append(&[rec(Severity::High, &format!("H{i:09}"))]).unwrap();
        }
        let left = payloads(&s);
        assert!(left.iter().all(|p| p.starts_with('H')), "{left:?}");
        assert_eq!(left.last().unwrap(), "H000000019");
        assert!(s.bytes() <= one * 10);
        // Since the reopen (drops are counted per open; the agent adds them to its totals):
        // every low (3) went before any high; of the 6 + 9 highs, what no longer fit.
        assert_eq!(s.drops.low_severity_spool_full, 3);
        assert_eq!(s.drops.spool_full as usize + left.len(), 15);
        fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn segments_roll_over_and_are_deleted_once_acknowledged() {
        let d = dir("roll");
        let mut s = Spool::open(&d, 64 * 1024).unwrap(); // 8 KiB segments
        let big = "x".repeat(1000);
        for _ in 0..30 {
            s.append(&[rec(Severity::High, &big)]).unwrap();
        }
        let segs = || {
            fs::read_dir(&d)
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "seg"))
                .count()
        };
        assert!(segs() >= 4, "{} segments", segs());
        let batch = s.peek(20, usize::MAX).unwrap();
        assert_eq!(batch.len(), 20);
        s.ack(batch.last().unwrap().seq).unwrap();
        assert_eq!(s.len(), 10);
        assert!(segs() <= 3, "{} segments", segs());
        drop(s);
        assert_eq!(depth(&d).unwrap().records, 10);
        let s = Spool::open(&d, 64 * 1024).unwrap();
        assert_eq!(s.len(), 10);
        // peek's byte bound: at least one record, then whole records within the bound.
        assert_eq!(s.peek(100, 1).unwrap().len(), 1);
        assert_eq!(s.peek(100, 3 * (HEADER + 1000)).unwrap().len(), 3);
        fs::remove_dir_all(&d).ok();
    }
}
