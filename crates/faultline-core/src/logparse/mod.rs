//! Pure, allocation-light parsers that turn raw node log lines into failure
//! signals (NVIDIA Xid/SXid, ECC, row remapping, NVLink, GSP, InfoROM, NCCL
//! timeouts and errors, CUDA errors and out-of-memory).
//!
//! * No I/O, no regex: hand-written byte scanners (`scan.rs`).
//! * Never panics on any `&str` (all slicing is boundary-checked) and runs in
//!   time linear in the line length: each parser performs a bounded number of
//!   `str::find` (Two-Way, linear) calls and bounded-length reads.
//! * Noise is rejected by [`prefilter`], a single pass over the bytes looking
//!   for a few anchors, before any prefix stripping or allocation.
//!
//! Layout: `prefix.rs` (timestamps, hosts, kmsg/dmesg/syslog/journald/glog
//! prefixes), `kernel.rs` (NVRM Xid, SXid, fabric manager, fallen off the bus),
//! `nccl.rs` (PyTorch/NCCL/CUDA), `hw.rs` (ECC, row remap, GSP, InfoROM, NVLink
//! outside Xids), `scan.rs` (helpers).

use chrono::{DateTime, Datelike, Utc};
use serde_json::{Map, Value};

pub mod bench;
mod hw;
pub mod ipmi_sel;
mod kernel;
mod nccl;
pub mod nvidia_smi;
mod prefix;
pub mod records;
mod scan;
pub mod slurm;

/// A PCI bus id in the one form signals and inventory share (`0000:3b:00.0`), from any of the
/// forms tools print (`00000000:3B:00.0`, `PCI:0000:3b:00`, `3b:00.0`); None if it is not one.
pub fn normalise_pci_bus_id(raw: &str) -> Option<String> {
    scan::normalise_pci(raw.trim())
}

/// Messages longer than this are cut (on a char boundary) and flagged with
/// `attributes.message_truncated = true`.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// String attribute values longer than this are cut.
const MAX_ATTR_BYTES: usize = 512;

/// One failure signal extracted from one log line.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedSignal {
    /// One of: "xid", "sxid", "ecc", "row_remap", "nvlink", "nccl_timeout",
    /// "nccl_error", "cuda_error", "gpu_oom", "gsp_error", "inforom", "gpu_init_failure",
    /// "gpu_probe_failure", "gpu_reset_required".
    pub kind: &'static str,
    /// XID / SXid number; for `ecc`: 1 correctable, 2 uncorrectable.
    pub code: Option<i64>,
    /// The line's own absolute timestamp (None for kmsg/dmesg monotonic seconds,
    /// which are kept as `attributes.monotonic_s`).
    pub occurred_at: Option<DateTime<Utc>>,
    /// Host named in a syslog/journald prefix (or in an NCCL `host:pid:tid` header).
    pub host: Option<String>,
    /// Normalised `0000:3b:00.0`.
    pub pci_bus_id: Option<String>,
    /// GPU ordinal when the line states one (`GPU 3`, NCCL `[3]` cudaDev).
    pub gpu_index: Option<i32>,
    /// Distributed rank (`[Rank 4]`, `[rank4]:`, `on rank 4`).
    pub rank: Option<i32>,
    /// The meaningful part of the line (after prefixes), trimmed.
    pub message: String,
    /// Extra facts (see the per-format docs in the submodules).
    pub attributes: Map<String, Value>,
}

impl ParsedSignal {
    pub(crate) fn new(kind: &'static str) -> Self {
        ParsedSignal {
            kind,
            code: None,
            occurred_at: None,
            host: None,
            pci_bus_id: None,
            gpu_index: None,
            rank: None,
            message: String::new(),
            attributes: Map::new(),
        }
    }

    pub(crate) fn set(&mut self, k: &str, v: impl Into<Value>) {
        self.attributes.insert(k.to_owned(), v.into());
    }

    pub(crate) fn set_str(&mut self, k: &str, v: &str) {
        let v = scan::truncate(v, MAX_ATTR_BYTES).0;
        self.attributes.insert(k.to_owned(), Value::String(v.to_owned()));
    }

    /// Convenience accessor for tests and callers.
    pub fn attr(&self, k: &str) -> Option<&Value> {
        self.attributes.get(k)
    }
}

/// Context a line cannot carry itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineContext {
    /// Year assumed for timestamps without one (BSD syslog `Dec  6 12:34:56`,
    /// glog `E1206 12:34:56.789`).
    pub year: i32,
}

impl Default for LineContext {
    /// The current UTC year.
    fn default() -> Self {
        LineContext {
            year: Utc::now().year(),
        }
    }
}

/// Result of one sub-parser.
pub(crate) enum Outcome {
    /// A signal.
    Hit(ParsedSignal),
    /// The line is definitely not a signal (e.g. `NCCL INFO`, an Xid header
    /// without a number); no further parser is tried.
    Reject,
    /// Not this parser's line.
    Miss,
}

/// Parse one raw log line. `None` = noise / unmatched.
pub fn parse_line(line: &str, ctx: &LineContext) -> Option<ParsedSignal> {
    if !prefilter(line.as_bytes()) {
        return None;
    }
    let pre = prefix::strip(line, ctx.year);
    let body = pre.body.trim();
    if body.is_empty() {
        return None;
    }
    let mut s = match kernel::parse(body) {
        Outcome::Hit(s) => s,
        Outcome::Reject => return None,
        Outcome::Miss => match nccl::parse(body, &pre) {
            Outcome::Hit(s) => s,
            Outcome::Reject => return None,
            Outcome::Miss => hw::parse(body)?,
        },
    };
    if s.occurred_at.is_none() {
        s.occurred_at = pre.occurred_at;
    }
    if let Some(h) = pre.host {
        // A syslog/journald host column is authoritative.
        s.host = Some(h.to_owned());
    }
    if s.rank.is_none() {
        s.rank = pre.rank;
    }
    if let Some(m) = pre.monotonic_s
        && m.is_finite()
    {
        s.set("monotonic_s", m);
    }
    if let Some(lr) = pre.local_rank {
        s.set("local_rank", lr);
    }
    let (msg, cut) = scan::truncate(body, MAX_MESSAGE_BYTES);
    s.message = msg.to_owned();
    if cut {
        s.set("message_truncated", true);
    }
    Some(s)
}

/// Parse many lines; convenience for batch ingestion.
pub fn parse_lines<'a, I>(lines: I, ctx: &LineContext) -> Vec<ParsedSignal>
where
    I: IntoIterator<Item = &'a str>,
{
    lines.into_iter().filter_map(|l| parse_line(l, ctx)).collect()
}

/// Cheap rejection of noise: one pass over the bytes; at each byte that can
/// start an anchor, compare a handful of short needles. Every parser requires
/// at least one of these anchors, so a `false` here is always a correct `None`.
///
/// Anchors: NVRM, nvidia, Xid (also SXid), NCCL/nccl, CUDA/cudaError, ECC, GSP,
/// InfoROM variants, NVSwitch/NvSwitch, NVL*/NvLink/Nvlink/nvlink, Remap/remap,
/// OutOfMemory, "Heartbeat monitor".
#[inline]
pub fn prefilter(b: &[u8]) -> bool {
    #[inline(always)]
    fn at(rest: &[u8], needles: &[&[u8]]) -> bool {
        needles.iter().any(|n| rest.starts_with(n))
    }
    // Bytes that can start an anchor. Table lookup keeps the hot loop tight.
    const fn table() -> [bool; 256] {
        let mut t = [false; 256];
        let starts = b"NXCcEGIiOnrRH";
        let mut i = 0;
        while i < starts.len() {
            t[starts[i] as usize] = true;
            i += 1;
        }
        t
    }
    static START: [bool; 256] = table();

    let n = b.len();
    let mut i = 0;
    while i < n {
        let c = b[i];
        if START[c as usize] {
            let rest = &b[i..];
            let hit = match c {
                b'N' => at(
                    rest,
                    &[
                        b"NVRM",
                        b"NCCL",
                        b"NVL",
                        b"NVSwitch",
                        b"NvSwitch",
                        b"NvLink",
                        b"Nvlink",
                        b"NV_ERR_RESET_REQUIRED",
                    ],
                ),
                b'X' => at(rest, &[b"Xid"]),
                b'C' => at(rest, &[b"CUDA"]),
                b'c' => at(rest, &[b"cudaError"]),
                b'E' => at(rest, &[b"ECC"]),
                b'G' => at(rest, &[b"GSP"]),
                b'I' => at(rest, &[b"InfoROM", b"INFOROM"]),
                b'i' => at(rest, &[b"infoROM", b"inforom"]),
                b'O' => at(rest, &[b"OutOfMemory"]),
                // `nvidia: probe of ... failed`, the kernel's word for a GPU the driver could not take.
                b'n' => at(rest, &[b"nccl", b"nvlink", b"nvidia"]),
                b'r' => at(rest, &[b"remap"]),
                b'R' => at(rest, &[b"Remap"]),
                b'H' => at(rest, &[b"Heartbeat monitor"]),
                _ => false,
            };
            if hit {
                return true;
            }
        }
        i += 1;
    }
    false
}

/// Realistic signal lines, one per format (used by `bench_lines` and tests).
pub const SIGNAL_SAMPLES: &[&str] = &[
    "4,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
    "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
    "[Mon Dec  6 12:34:56 2021] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 0, SM 1): Out Of Range Address",
    "kern  :warn  : 2021-12-06T12:34:56,123456+00:00 NVRM: Xid (PCI:0000:9b:00): 48, pid=2280636, name=train.3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
    "Dec  6 12:34:56 gpu-node-17 kernel: [ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=4321, name=pt_main_thread, GPU has fallen off the bus.",
    "2021-12-06T12:34:56.123456+00:00 gpu-node-18 kernel: NVRM: Xid (PCI:0000:1b:00): 94, pid=1234, name=python3, Contained ECC error.",
    "Dec  6 12:34:57 gpu-node-17 kernel: NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=777, name=python3, Contained ECC error.",
    "[171167.620236] NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)",
    "[171167.620240] NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
    "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149",
    "[ 2231.004512] NVRM: Xid (PCI:0000:3b:00): 119, pid=91234, name=python, Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
    "[  115.083711] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0) installed in this system has fallen off the bus and is not responding to commands.",
    "[6781753.400584] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 37 egress non-posted PRIV error (First)",
    "[Jul 26 2023 06:14:05] [ERROR] [tid 1234] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 11",
    "[rank4]:[E1206 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600023 milliseconds before timing out.",
    "[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800498 milliseconds before timing out.",
    "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid fd00:1148:9000:5000:4:200:3:ff22 remoteGidsfd00:1148:9000:5000:4:200:3:ff1f",
    "node3:2211:2290 [1] NCCL WARN socketProgress: Connection reset by peer",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.18.1 ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 3; 79.15 GiB total capacity; 75.23 GiB already allocated; 1.02 GiB free; 76.50 GiB reserved in total by PyTorch)",
    "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "2024-05-24 10:22:29.245 ERROR [5231:5273] GPU 0 had uncorrectable memory errors and row remapping failed.",
    "[  115.083750] NVRM: GPU6 RmInitAdapter: Cannot initialize GSP firmware RM",
    "WARNING: infoROM is corrupted at gpu 0000:B3:00.0",
];

/// Deterministic benchmark input: `n` lines, 1 % signal lines (cycling over
/// [`SIGNAL_SAMPLES`], i.e. every line with `i % 100 == 0`), 99 % ordinary
/// noise (sshd, systemd, kernel lines without NVRM, python INFO logs, docker,
/// kubelet, NCCL INFO).
pub fn bench_lines(n: usize) -> Vec<String> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if i % 100 == 0 {
            out.push(SIGNAL_SAMPLES[(i / 100) % SIGNAL_SAMPLES.len()].to_owned());
            continue;
        }
        let r = rnd();
        let (mm, ss, node, pid) = (r % 60, (r >> 8) % 60, (r >> 16) % 64, 1000 + (r >> 24) % 60000);
        let line = match (r >> 40) % 12 {
            0 => format!(
                "Dec  6 12:{mm:02}:{ss:02} gpu-node-{node} sshd[{pid}]: Accepted publickey for ubuntu from 10.1.{}.{} port {} ssh2: ED25519 SHA256:q1w2e3r4t5y6u7i8o9p0",
                r % 250,
                (r >> 3) % 250,
                30000 + r % 30000
            ),
            1 => format!(
                "Dec  6 12:{mm:02}:{ss:02} gpu-node-{node} systemd[1]: Started Session {} of User ubuntu.",
                r % 9999
            ),
            2 => format!(
                "[{}.{:06}] eth{}: renamed from veth{:08x}",
                r % 900000,
                pid,
                r % 4,
                r >> 32
            ),
            3 => format!(
                "[{}.{:06}] EXT4-fs (nvme0n1p{}): mounted filesystem with ordered data mode. Opts: (null). Quota mode: none.",
                r % 900000,
                pid,
                r % 4
            ),
            4 => format!(
                "2021-12-06T12:{mm:02}:{ss:02}.{:06}+00:00 gpu-node-{node} kernel: IPv6: ADDRCONF(NETDEV_CHANGE): eth{}: link becomes ready",
                pid,
                r % 4
            ),
            5 => format!(
                "2021-12-06 12:{mm:02}:{ss:02},{:03} - INFO - train.py:{} - step {} loss={:.4} lr=3.0e-4 tokens/s={}",
                r % 1000,
                r % 900,
                r % 100000,
                (r % 10000) as f64 / 1000.0,
                r % 500000
            ),
            6 => format!(
                "[default{}]:INFO:root:iteration {}/100000 | consumed samples: {} | elapsed time per iteration (ms): {} | learning rate: 2.9E-04",
                r % 8,
                r % 100000,
                r % 9999999,
                r % 2000
            ),
            7 => format!(
                "Dec  6 12:{mm:02}:{ss:02} gpu-node-{node} kubelet[{pid}]: I1206 12:{mm:02}:{ss:02}.{:06} {pid} kubelet.go:2{}] \"SyncLoop (PLEG): event for pod\" pod=\"default/trainer-{}\"",
                pid,
                r % 999,
                r % 64
            ),
            8 => format!(
                "Dec  6 12:{mm:02}:{ss:02} gpu-node-{node} CRON[{pid}]: (root) CMD (/usr/local/bin/healthcheck.sh > /dev/null 2>&1)"
            ),
            9 => format!(
                "6,{},{},-;audit: type=1400 audit({}.{:03}:{}): apparmor=\"STATUS\" operation=\"profile_load\" profile=\"unconfined\" name=\"docker-default\" pid={pid}",
                r % 99999,
                r % 999999999,
                1638000000 + r % 99999,
                r % 1000,
                r % 9999
            ),
            10 => format!(
                "Dec  6 12:{mm:02}:{ss:02} gpu-node-{node} dockerd[{pid}]: time=\"2021-12-06T12:{mm:02}:{ss:02}.{:09}Z\" level=info msg=\"ignoring event\" container={:016x} module=libcontainerd namespace=moby topic=/tasks/delete type=\"*events.TaskDelete\"",
                r % 999999999,
                r
            ),
            _ => format!(
                "gpu-node-{node}:{pid}:{} [{}] NCCL INFO Channel {:02}/0 : {}[{}] -> {}[{}] via P2P/IPC/read",
                pid + 7,
                r % 8,
                r % 32,
                r % 8,
                r % 8,
                (r >> 5) % 8,
                (r >> 5) % 8
            ),
        };
        out.push(line);
    }
    out
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

#[cfg(test)]
mod batch_tests {
    use super::*;

    fn ctx() -> LineContext {
        LineContext { year: 2021 }
    }

    /// 100,000 lines, 1 % signals: exactly the signal lines parse, every kind
    /// of sample is represented, and all noise is rejected.
    #[test]
    fn batch_of_100k_counts() {
        let lines = bench_lines(100_000);
        assert_eq!(lines.len(), 100_000);
        let c = ctx();
        let mut hits = 0;
        let mut kinds = std::collections::BTreeSet::new();
        for (i, l) in lines.iter().enumerate() {
            match parse_line(l, &c) {
                Some(s) => {
                    assert_eq!(i % 100, 0, "noise line parsed as {}: {l}", s.kind);
                    kinds.insert(s.kind);
                    hits += 1;
                }
                None => assert_ne!(i % 100, 0, "signal line not parsed: {l}"),
            }
        }
        assert_eq!(hits, 1_000);
        for k in [
            "xid",
            "sxid",
            "ecc",
            "row_remap",
            "nccl_timeout",
            "nccl_error",
            "cuda_error",
            "gpu_oom",
            "gsp_error",
            "inforom",
        ] {
            assert!(kinds.contains(k), "kind {k} missing from bench signals");
        }
        // The pre-filter alone rejects all ordinary noise; only the NCCL INFO
        // noise template (which does mention NCCL) reaches the parsers.
        for (i, l) in lines.iter().enumerate() {
            if i % 100 != 0 && !l.contains("NCCL INFO") {
                assert!(!prefilter(l.as_bytes()), "prefilter passed noise: {l}");
            }
        }
    }

    /// Tiny deterministic xorshift64.
    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    fn fuzz_corpus() -> Vec<String> {
        let mut v: Vec<String> = SIGNAL_SAMPLES.iter().map(|s| s.to_string()).collect();
        v.extend(tests::EXTRA_SAMPLES.iter().map(|s| s.to_string()));
        v
    }

    /// Robustness: every prefix and suffix of every sample (at every byte, via
    /// lossy conversion when the cut splits a char), random byte mutations,
    /// insertions and deletions, splices of two samples, and non-ASCII
    /// sprinkled in. Only checks that nothing panics and output is sane.
    #[test]
    fn fuzz_no_panic() {
        let c = ctx();
        let corpus = fuzz_corpus();
        let check = |s: &str| {
            if let Some(sig) = parse_line(s, &c) {
                assert!(sig.message.len() <= MAX_MESSAGE_BYTES);
                assert!(!sig.kind.is_empty());
            }
        };
        for line in &corpus {
            let b = line.as_bytes();
            for i in 0..=b.len() {
                check(&String::from_utf8_lossy(&b[..i]));
                check(&String::from_utf8_lossy(&b[i..]));
            }
        }
        const ALPHABET: &[&str] = &[
            "0",
            "9",
            ":",
            "(",
            ")",
            "[",
            "]",
            ",",
            " ",
            ".",
            "=",
            "'",
            "<",
            ">",
            ";",
            "-",
            "x",
            "é",
            "€",
            "𝄞",
            "\u{0}",
            "\t",
            "Xid (",
            "SXid (",
            "NCCL WARN",
            "GPU ",
            "PCI:",
            "NVRM: ",
            "WorkNCCL(",
            "ran for ",
            "Timeout(ms)=",
            "CUDA error: ",
            "remap",
            "GSP",
            "ECC",
            "\u{FFFD}",
        ];
        let mut rng = XorShift(0xDEAD_BEEF_CAFE_F00D);
        for round in 0..20_000 {
            let base = &corpus[(rng.next() % corpus.len() as u64) as usize];
            let mut bytes = base.as_bytes().to_vec();
            let edits = 1 + rng.next() % 6;
            for _ in 0..edits {
                let len = bytes.len().max(1);
                let pos = (rng.next() % len as u64) as usize;
                match rng.next() % 5 {
                    0 if !bytes.is_empty() => {
                        let p = pos.min(bytes.len() - 1);
                        bytes[p] = rng.next() as u8;
                    }
                    1 => {
                        let ins = ALPHABET[(rng.next() % ALPHABET.len() as u64) as usize].as_bytes();
                        let p = pos.min(bytes.len());
                        bytes.splice(p..p, ins.iter().copied());
                    }
                    2 if !bytes.is_empty() => {
                        let p = pos.min(bytes.len() - 1);
                        let end = (p + 1 + (rng.next() % 8) as usize).min(bytes.len());
                        bytes.drain(p..end);
                    }
                    3 => {
                        let other = &corpus[(rng.next() % corpus.len() as u64) as usize];
                        let p = pos.min(bytes.len());
                        let ob = other.as_bytes();
                        let q = (rng.next() % (ob.len() as u64 + 1)) as usize;
                        bytes.truncate(p);
                        bytes.extend_from_slice(&ob[q..]);
                    }
                    _ => bytes.truncate(pos),
                }
            }
            if round % 7 == 0 {
                // pure random bytes
                let n = (rng.next() % 200) as usize;
                bytes = (0..n).map(|_| rng.next() as u8).collect();
            }
            check(&String::from_utf8_lossy(&bytes));
        }
    }

    /// Multi-megabyte lines are handled (and in linear time: pathological
    /// repetitions of anchors would blow up a quadratic scanner here).
    #[test]
    fn huge_lines() {
        let c = ctx();
        let start = std::time::Instant::now();
        let reps = [
            "NVRM: Xid (",
            "Xid (PCI:0000:3b:00): ",
            "GPU ",
            "nccl",
            "NCCL WARN peer ",
            "[rank",
            "remap ",
            "Tried to allocate ",
            "é€",
            "(GPU 3; ",
            "SXid (",
            "ncclncclnccl",
            "0",
            " ",
            "[",
        ];
        for r in reps {
            let big = r.repeat(2_000_000 / r.len());
            let _ = parse_line(&big, &c);
            let with_tail = format!("{big} NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.");
            let _ = parse_line(&with_tail, &c);
        }
        let long_msg = format!(
            "NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=x, {}",
            "Graphics Exception ".repeat(200_000)
        );
        let s = parse_line(&long_msg, &c).expect("xid");
        assert_eq!(s.code, Some(13));
        assert!(s.message.len() <= MAX_MESSAGE_BYTES);
        assert_eq!(s.attr("message_truncated"), Some(&Value::Bool(true)));
        // Generous bound even for unoptimised test builds; quadratic would take minutes.
        assert!(start.elapsed().as_secs() < 60);
    }
}
