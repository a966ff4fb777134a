//! PyTorch / NCCL / CUDA runtime lines: ProcessGroupNCCL watchdog timeouts,
//! `NCCL WARN` records, NCCL errors surfaced as Python exceptions, CUDA
//! errors and CUDA out-of-memory.

use super::prefix::Prefix;
use super::scan::{
    after, contains_any, exception_before, find_gpu_index, parse_size, parse_uint, skip_ws_bounded, take_bytes_while,
    token, truncate, uint_after, until_any,
};
use super::{Outcome, ParsedSignal};

const NCCL_RESULTS: [&str; 6] = [
    "ncclUnhandledCudaError",
    "ncclSystemError",
    "ncclInternalError",
    "ncclInvalidArgument",
    "ncclInvalidUsage",
    "ncclRemoteError",
];

pub(crate) fn parse(body: &str, pre: &Prefix<'_>) -> Outcome {
    if body.contains("NCCL WARN") {
        return Outcome::Hit(finish(nccl_warn(body), body, pre));
    }
    // NCCL_DEBUG=INFO / TRACE output is noise, whatever it mentions.
    if body.contains("NCCL INFO") || body.contains("NCCL TRACE") {
        return Outcome::Reject;
    }
    let s = if body.contains("Watchdog caught collective operation timeout") {
        watchdog_timeout(body)
    } else if let Some(r) = after(body, "Timeout at NCCL work: ") {
        work_timeout(body, r)
    } else if body.contains("Heartbeat monitor timed out") {
        let mut s = ParsedSignal::new("nccl_timeout");
        s.set("heartbeat_monitor", true);
        s
    } else if let Some(r) = after(body, "watchdog got stuck for ") {
        let mut s = ParsedSignal::new("nccl_timeout");
        s.set("watchdog_stuck", true);
        if let Some((v, _)) = parse_uint(r) {
            s.set("watchdog_stuck_s", v);
        }
        s
    } else if contains_any(
        body,
        &[
            "NCCL error",
            "DistBackendError",
            "NCCL communicator was aborted",
            "Some NCCL operations have failed",
        ],
    ) || NCCL_RESULTS.iter().any(|r| body.contains(r))
        || body.contains("detected by watchdog at work")
    {
        nccl_python_error(body)
    } else if contains_any(body, &["CUDA out of memory", "OutOfMemoryError"]) {
        oom(body)
    } else if let Some(s) = cuda_error(body) {
        s
    } else {
        return Outcome::Miss;
    };
    Outcome::Hit(finish(s, body, pre))
}

fn finish(mut s: ParsedSignal, body: &str, pre: &Prefix<'_>) -> ParsedSignal {
    if s.rank.is_none() {
        s.rank = find_rank(body).or(pre.rank);
    }
    if let Some(loc) = pre.source_location {
        s.set_str("source_location", loc);
    }
    s
}

/// `[Rank 4]`, `[PG 0 Rank 4]` / `[PG ID 0 PG GUID 0(default_pg) Rank 4]`,
/// `on rank 3`. A `[rankN]:` line prefix is handled by the prefix stripper.
fn find_rank(body: &str) -> Option<i32> {
    let v = uint_after(body, "[Rank ").or_else(|| {
        let r = after(body, " Rank ")?;
        let (v, n) = parse_uint(r)?;
        (r.as_bytes().get(n) == Some(&b']')).then_some(v)
    });
    let v = v.or_else(|| uint_after(body, "on rank "))?;
    i32::try_from(v).ok()
}

fn ident(s: &str) -> &str {
    take_bytes_while(s, 48, |c| c.is_ascii_alphanumeric() || c == b'_')
}

fn process_group(body: &str, s: &mut ParsedSignal) {
    if let Some(v) = uint_after(body, "PG ID ").or_else(|| uint_after(body, "[PG ")) {
        s.set("pg_id", v);
    }
    if let Some(r) = after(body, "PG GUID ") {
        let g = token(r, 64);
        if !g.is_empty() {
            s.set_str("pg_guid", g);
        }
    }
}

/// `[Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234,
/// OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600023
/// milliseconds before timing out.`
fn watchdog_timeout(body: &str) -> ParsedSignal {
    let mut s = ParsedSignal::new("nccl_timeout");
    if let Some(w) = after(body, "WorkNCCL(") {
        // Do not cut at ')': "Timeout(ms)=" contains one.
        let w = truncate(w, 512).0;
        if let Some(v) = uint_after(w, "SeqNum=") {
            s.set("seq_num", v);
        }
        if let Some(r) = after(w, "OpType=") {
            let op = ident(r);
            if !op.is_empty() {
                s.set_str("op_type", op);
            }
        }
        if let Some(v) = uint_after(w, "NumelIn=") {
            s.set("numel_in", v);
        }
        if let Some(v) = uint_after(w, "NumelOut=") {
            s.set("numel_out", v);
        }
        if let Some(v) = uint_after(w, "Timeout(ms)=") {
            s.set("timeout_ms", v);
        }
    }
    if let Some(v) = uint_after(body, "ran for ") {
        s.set("ran_for_ms", v);
    }
    process_group(body, &mut s);
    s
}

/// `[Rank 0] Timeout at NCCL work: 1234, last enqueued NCCL work: 1234, last completed NCCL work: 1233.`
fn work_timeout(body: &str, r: &str) -> ParsedSignal {
    let mut s = ParsedSignal::new("nccl_timeout");
    if let Some((v, _)) = parse_uint(r) {
        s.set("seq_num", v);
    }
    if let Some(v) = uint_after(body, "last enqueued NCCL work: ") {
        s.set("last_enqueued_seq", v);
    }
    if let Some(v) = uint_after(body, "last completed NCCL work: ") {
        s.set("last_completed_seq", v);
    }
    process_group(body, &mut s);
    s
}

fn ib_status_name(v: u64) -> Option<&'static str> {
    Some(match v {
        1 => "IBV_WC_LOC_LEN_ERR",
        2 => "IBV_WC_LOC_QP_OP_ERR",
        4 => "IBV_WC_LOC_PROT_ERR",
        5 => "IBV_WC_WR_FLUSH_ERR",
        9 => "IBV_WC_REM_INV_REQ_ERR",
        10 => "IBV_WC_REM_ACCESS_ERR",
        11 => "IBV_WC_REM_OP_ERR",
        12 => "IBV_WC_RETRY_EXC_ERR",
        13 => "IBV_WC_RNR_RETRY_EXC_ERR",
        19 => "IBV_WC_FATAL_ERR",
        20 => "IBV_WC_RESP_TIMEOUT_ERR",
        21 => "IBV_WC_GENERAL_ERR",
        _ => return None,
    })
}

/// `node1:1234:5678 [3] [ib_plugin.c:1615 ]NCCL WARN <msg>`
fn nccl_warn(body: &str) -> ParsedSignal {
    let mut s = ParsedSignal::new("nccl_error");
    s.set("level", "WARN");
    let w = body.find("NCCL WARN").unwrap_or(0);
    let head = body.get(..w).unwrap_or("");
    let msg = body.get(w + 9..).unwrap_or("").trim();

    // head: "host:pid:tid [cudaDev] [file:line]"
    let head = truncate(head, 512).0;
    for t in head.split_whitespace().take(4) {
        if let Some(d) = t.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            if let Some((v, n)) = parse_uint(d)
                && n == d.len()
                && v < 4096
            {
                s.gpu_index.get_or_insert(v as i32);
            }
        } else if s.host.is_none() {
            let mut it = t.rsplitn(3, ':');
            if let (Some(tid), Some(pid), Some(host)) = (it.next(), it.next(), it.next())
                && let (Ok(pid), Ok(tid)) = (pid.parse::<u64>(), tid.parse::<u64>())
            {
                let plausible = !host.is_empty()
                    && host.len() <= 253
                    && host.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c));
                if plausible {
                    s.host = Some(truncate(host, 253).0.to_owned());
                    s.set("pid", pid);
                    s.set("tid", tid);
                }
            }
        } else if t.contains(".c") && t.contains(':') {
            s.set_str("nccl_source", t);
        }
    }

    if let Some(r) = after(msg, "NET/") {
        let tr = take_bytes_while(r, 16, |c| c.is_ascii_alphanumeric());
        if !tr.is_empty() {
            s.set_str("transport", &format!("NET/{tr}"));
        }
    }
    if let Some(r) = after(msg, "peer ") {
        let p = token(r, 128).trim_end_matches([',', '.']);
        if !p.is_empty() {
            s.set_str("peer", p);
        }
    }
    let mut category = "other";
    if msg.contains("Got completion from peer") {
        category = "ib_completion";
        let st = uint_after(msg, "status=").or_else(|| uint_after(msg, "with error "));
        if let Some(v) = st {
            s.set("nccl_status", v);
            if let Some(n) = ib_status_name(v) {
                s.set("ib_status", n);
            }
        }
        if let Some(v) = uint_after(msg, "opcode=").or_else(|| uint_after(msg, "opcode ")) {
            s.set("opcode", v);
        }
        if let Some(v) = uint_after(msg, "vendor err ") {
            s.set("vendor_err", v);
        }
        if msg.contains("(Recv)") {
            s.set("direction", "recv");
        } else if msg.contains("(Send)") {
            s.set("direction", "send");
        }
        if let Some(r) = after(msg, "localGid ") {
            let g = token(r, 64);
            if !g.is_empty() {
                s.set_str("local_gid", g);
            }
        }
        if let Some(r) = after(msg, "remoteGids").or_else(|| after(msg, "remoteGid ")) {
            let g = token(skip_ws_bounded(r, 2), 64);
            if !g.is_empty() {
                s.set_str("remote_gid", g);
            }
        }
    } else if let Some(r) = after(msg, "Cuda failure") {
        category = "cuda";
        if let Some(q) = after(r, "'") {
            let e = until_any(q, b"'", 256);
            if !e.is_empty() {
                s.set_str("cuda_error", e);
            }
            // NCCL reports the job's own CUDA out-of-memory this way (seen in a real log):
            // it is the job's sizing, not a communication fault.
            if e.contains("out of memory") {
                s.kind = "gpu_oom";
            }
        }
    } else {
        for e in [
            "Connection closed by remote peer",
            "Connection closed by peer",
            "Connection refused",
            "Connection reset by peer",
            "Broken pipe",
            "Connection timed out",
            "No route to host",
        ] {
            if msg.contains(e) {
                category = if e.starts_with("Connection closed") {
                    "connection_closed"
                } else {
                    "socket"
                };
                s.set("socket_error", e);
                break;
            }
        }
    }
    s.set("category", category);
    if let Some(r) = NCCL_RESULTS.iter().find(|r| msg.contains(*r)) {
        s.set("nccl_result", *r);
    }
    s
}

/// `torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275,
/// remote process exited or there was a network error, NCCL version 2.18.1
/// ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.`
/// (the `ncclXxxError: ...` part may arrive as its own line; it is then a
/// signal of its own with only `nccl_result`).
fn nccl_python_error(body: &str) -> ParsedSignal {
    let mut s = ParsedSignal::new("nccl_error");
    if let Some(i) = body.find("NCCL error") {
        if let Some(e) = exception_before(body, i) {
            s.set_str("exception", e);
        }
    } else if let Some(i) = body.find("DistBackendError") {
        let e = take_bytes_while(body.get(i..).unwrap_or(""), 32, |c| c.is_ascii_alphanumeric());
        s.set_str("exception", e);
    }
    let mut reason: Option<&str> = None;
    if let Some(r) = after(body, "NCCL error in: ") {
        let loc = until_any(r, b",", 256);
        if !loc.is_empty() {
            s.set_str("error_location", loc);
        }
        if let Some(rr) = r.get(loc.len()..).and_then(|x| x.strip_prefix(',')) {
            let rs = match rr.find(", NCCL version") {
                Some(j) if j < 512 => rr[..j].trim(),
                _ => until_any(rr, b",", 256),
            };
            if !rs.is_empty() {
                reason = Some(rs);
                s.set_str("reason", rs);
            }
        }
    }
    if let Some(r) = after(body, "NCCL version ") {
        let v = take_bytes_while(r, 32, |c| c.is_ascii_alphanumeric() || c == b'.' || c == b'+');
        let v = v.trim_end_matches('.');
        if !v.is_empty() {
            s.set_str("nccl_version", v);
        }
    }
    let result = NCCL_RESULTS.iter().copied().find(|r| body.contains(r)).or_else(|| {
        let r = reason?;
        Some(if r.contains("remote process exited") || r.contains("network error") {
            "ncclRemoteError"
        } else if r.contains("unhandled system error") {
            "ncclSystemError"
        } else if r.contains("unhandled cuda error") {
            "ncclUnhandledCudaError"
        } else if r.contains("internal error") {
            "ncclInternalError"
        } else if r.contains("invalid usage") {
            "ncclInvalidUsage"
        } else if r.contains("invalid argument") {
            "ncclInvalidArgument"
        } else {
            return None;
        })
    });
    if let Some(r) = result {
        s.set("nccl_result", r);
    }
    if body.contains("NCCL communicator was aborted") {
        s.set("aborted", true);
    }
    if body.contains("Some NCCL operations have failed") {
        s.set("followup", true);
    }
    if let Some(v) = uint_after(body, "detected by watchdog at work: ") {
        s.set("watchdog_exception", true);
        s.set("seq_num", v);
    }
    if let Some(r) = after(body, "Last error:") {
        let e = until_any(r, b"\n", 256);
        if !e.is_empty() {
            s.set_str("last_error", e);
        }
    }
    s
}

/// Walk back from `idx` over an identifier with dots (`torch.cuda.`).
fn dotted_name_ending_at(h: &str, end: usize) -> &str {
    let b = h.as_bytes();
    let mut start = end.min(b.len());
    let mut steps = 0;
    while start > 0 && steps < 96 {
        let c = b[start - 1];
        if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' {
            start -= 1;
            steps += 1;
        } else {
            break;
        }
    }
    h.get(start..end).unwrap_or("")
}

/// `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 3;
/// 79.15 GiB total capacity; 75.23 GiB already allocated; 1.02 GiB free; ...)`
/// and the PyTorch ≥ 2.1 form `... Tried to allocate 20.00 MiB. GPU 0 has a
/// total capacity of 79.15 GiB of which 3.81 MiB is free. ...`.
fn oom(body: &str) -> ParsedSignal {
    let mut s = ParsedSignal::new("gpu_oom");
    if let Some(i) = body.find("OutOfMemoryError") {
        let name = dotted_name_ending_at(body, i + "OutOfMemoryError".len());
        if !name.is_empty() {
            s.set_str("exception", name.trim_start_matches('.'));
        }
    } else if let Some(i) = body.find("CUDA out of memory")
        && let Some(e) = exception_before(body, i)
    {
        s.set_str("exception", e);
    }
    if let Some(v) = after(body, "Tried to allocate ").and_then(parse_size) {
        s.set("tried_to_allocate_bytes", v);
    }
    s.gpu_index = find_gpu_index(body);
    let total = after(body, "total capacity of ")
        .and_then(parse_size)
        .or_else(|| seg_size_before(body, " total capacity"));
    if let Some(v) = total {
        s.set("total_capacity_bytes", v);
    }
    let free = after(body, "of which ")
        .and_then(parse_size)
        .or_else(|| seg_size_before(body, " free;"));
    if let Some(v) = free {
        s.set("free_bytes", v);
    }
    s
}

/// Size written just before `marker` inside a `(GPU 3; 79.15 GiB total capacity; ...)` list.
fn seg_size_before(body: &str, marker: &str) -> Option<i64> {
    let k = body.find(marker)?;
    let head = body.get(k.saturating_sub(32)..k)?;
    let start = head.rfind([';', '(']).map_or(0, |i| i + 1);
    parse_size(&head[start..])
}

/// `RuntimeError: CUDA error: an illegal memory access was encountered`,
/// `CUDA driver error: ...`, `cudaErrorIllegalAddress`, `CUDA_ERROR_ECC_UNCORRECTABLE`.
/// ECC / NVLink / out-of-memory CUDA errors are re-kinded to `ecc` (code 2),
/// `nvlink` and `gpu_oom` with `source: "cuda"`.
fn cuda_error(body: &str) -> Option<ParsedSignal> {
    let mut text: Option<&str> = None;
    let mut exception: Option<&str> = None;
    for marker in ["CUDA error: ", "CUDA driver error: ", "CUDA error:"] {
        if let Some(i) = body.find(marker) {
            let r = body.get(i + marker.len()..).unwrap_or("");
            text = Some(truncate(r.trim(), 256).0);
            exception = exception_before(body, i);
            break;
        }
    }
    let mut name: Option<&str> = None;
    if let Some(i) = body.find("cudaError") {
        name = Some(ident(body.get(i..).unwrap_or("")));
    } else if let Some(i) = body.find("CUDA_ERROR_") {
        name = Some(ident(body.get(i..).unwrap_or("")));
    }
    if text.is_none() && name.is_none() {
        return None;
    }
    let t = text.unwrap_or("");
    let n = name.unwrap_or("");
    let mut s = if t.contains("ECC") || n.contains("ECC") {
        let mut s = ParsedSignal::new("ecc");
        s.code = Some(
            if t.contains("uncorrectable") || n.contains("UNCORRECTABLE") || n.contains("Uncorrectable") {
                2
            } else {
                1
            },
        );
        s
    } else if t.contains("NVLink") || n.contains("NVLINK") || n.contains("Nvlink") {
        let mut s = ParsedSignal::new("nvlink");
        if t.contains("uncorrectable") || n.contains("UNCORRECTABLE") || n.contains("Uncorrectable") {
            s.set("fatal", true);
        }
        s
    } else if t.contains("out of memory") || n == "cudaErrorMemoryAllocation" || n == "CUDA_ERROR_OUT_OF_MEMORY" {
        let mut s = ParsedSignal::new("gpu_oom");
        s.gpu_index = find_gpu_index(body);
        s
    } else {
        ParsedSignal::new("cuda_error")
    };
    s.set("source", "cuda");
    if !t.is_empty() {
        s.set_str("cuda_error", t);
    }
    if !n.is_empty() {
        s.set_str("cuda_error_name", n);
    }
    if let Some(e) = exception {
        s.set_str("exception", e);
    }
    Some(s)
}
