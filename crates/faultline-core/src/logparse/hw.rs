//! GPU hardware-health lines that are not Xids: ECC, row remapping, GSP,
//! InfoROM and NVLink, whether printed by the driver (`NVRM: ...`), DCGM
//! (`nv-hostengine`, `dcgmi health`/`diag`) or `nvidia-smi`.
//!
//! These rules run last, after the Xid/SXid and NCCL/CUDA parsers declined
//! the line, and each requires an error word so that informational lines
//! ("ECC Mode: Enabled", "Nvlink Core is being initialized") stay noise.

use super::ParsedSignal;
use super::kernel::fatality;
use super::scan::{after, contains_any, find_gpu_index, find_pci, int_after, parse_uint, uint_after};

pub(crate) fn parse(body: &str) -> Option<ParsedSignal> {
    let mut s = inforom(body)
        .or_else(|| row_remap(body))
        .or_else(|| gsp(body))
        .or_else(|| ecc(body))
        .or_else(|| nvlink(body))?;
    if s.pci_bus_id.is_none() {
        s.pci_bus_id = find_pci(body);
    }
    if s.gpu_index.is_none() {
        s.gpu_index = find_gpu_index(body);
    }
    if !s.attributes.contains_key("source") {
        if body.contains("NVRM") {
            s.set("source", "nvrm");
        } else if body.contains("DCGM") || body.contains("dcgm") || body.contains("nv-hostengine") {
            s.set("source", "dcgm");
        }
    }
    Some(s)
}

const ERROR_WORDS: [&str; 6] = ["error", "Error", "ERROR", "fail", "Fail", "FAIL"];

/// `WARNING: infoROM is corrupted at gpu 0000:B3:00.0` (nvidia-smi),
/// `A corrupt InfoROM has been detected in GPU 0.` (DCGM),
/// `NVRM: GPU 0000:3b:00.0: InfoROM ... corrupted/invalid/failed`.
fn inforom(body: &str) -> Option<ParsedSignal> {
    if !contains_any(body, &["InfoROM", "infoROM", "inforom", "INFOROM"]) {
        return None;
    }
    let corrupt = contains_any(body, &["corrupt", "Corrupt"]);
    if !corrupt && !contains_any(body, &ERROR_WORDS) && !contains_any(body, &["invalid", "Invalid", "mismatch"]) {
        return None;
    }
    let mut s = ParsedSignal::new("inforom");
    s.set("corrupted", corrupt);
    if body.contains("infoROM is corrupted at gpu") {
        s.set("source", "nvidia-smi");
    }
    Some(s)
}

/// DCGM: `GPU 0 had uncorrectable memory errors and row remapping failed.`,
/// `GPU 0 had memory errors and row remappings are pending`,
/// `GPU 0 had uncorrectable memory errors and 3 rows were remapped`;
/// nvidia-smi `Remapping Failure Occurred : Yes`; driver
/// `NVRM: ... Row Remapper: New row marked for remapping` (non-Xid forms).
/// Attribute `status`: "failure" | "pending" | "remapped".
fn row_remap(body: &str) -> Option<ParsedSignal> {
    if !contains_any(body, &["remap", "Remap"]) {
        return None;
    }
    let t = body.trim_end_matches(['.', ' ']);
    if t.ends_with(": No") || t.ends_with(":No") || t.ends_with(": 0") {
        return None; // nvidia-smi "Remapping Failure Occurred : No"
    }
    let status = if contains_any(body, &["fail", "Fail", "FAIL"]) {
        "failure"
    } else if contains_any(body, &["pending", "Pending"]) {
        "pending"
    } else if contains_any(
        body,
        &["were remapped", "marked for remapping", "rows remapped", "New row"],
    ) {
        "remapped"
    } else {
        return None;
    };
    let mut s = ParsedSignal::new("row_remap");
    s.set("status", status);
    if contains_any(body, &["uncorrectable", "Uncorrectable"]) {
        s.set("uncorrectable", true);
    }
    if let Some(r) = after(body, " and ")
        && let Some((n, _)) = parse_uint(r)
        && r.contains(" rows were remapped")
    {
        s.set("rows_remapped", n);
    }
    Some(s)
}

/// GSP firmware failures outside a numbered Xid:
/// `NVRM: GPU6 RmInitAdapter: Cannot initialize GSP firmware RM`,
/// `NVRM: GPU6 _kgspBootGspRm: unexpected WPR2 already up, cannot proceed with booting GSP`,
/// `NVRM: _kgspRpcRecvPoll: GSP RM heartbeat timed out`,
/// `NVRM: GPU0 kgspHealthCheck_TU102: ****** GSP-CrashCat Report ******`,
/// `NVRM: GPU0 _kgspRpcGspEventPmuHalted: Received signal from GSP that PMU has halted.`,
/// `... GSP ... reset required`.
/// (`RmInitAdapter failed!` is a GPU the driver could not initialise: `gpu_init_failure`, read
/// with the kernel driver's lines.) The `_kgspLogXid119` banner and RPC-history table rows of an
/// Xid 119 dump are not separate signals (the Xid line is).
fn gsp(body: &str) -> Option<ParsedSignal> {
    if !body.contains("GSP") || body.contains("_kgspLogXid") {
        return None;
    }
    let reset = contains_any(
        body,
        &[
            "reset required",
            "Reset Required",
            "reset is required",
            "need to be reset",
            "needs to be reset",
            "RESET_REQUIRED",
        ],
    );
    let stage = if contains_any(
        body,
        &["Cannot initialize GSP", "booting GSP", "cannot proceed with booting"],
    ) {
        "init"
    } else if body.contains("heartbeat") && contains_any(body, &["timed out", "timeout", "Timeout"]) {
        "heartbeat"
    } else if body.contains("RPC") && contains_any(body, &["timed out", "timeout", "Timeout"]) {
        "rpc_timeout"
    } else if body.contains("CrashCat") {
        "crashcat"
    } else if body.contains("PMU has halted") {
        "pmu_halted"
    } else if reset || contains_any(body, &ERROR_WORDS) || contains_any(body, &["exception", "timed out", "Timeout"]) {
        "error"
    } else {
        return None;
    };
    let mut s = ParsedSignal::new("gsp_error");
    s.set("stage", stage);
    if reset {
        s.set("reset_required", true);
    }
    if let Some(g) = rm_gpu_instance(body) {
        s.set("rm_gpu_instance", g);
    }
    Some(s)
}

/// `NVRM: GPU6 ...`: the driver's internal GPU instance number (not the
/// nvidia-smi / CUDA index, so it is an attribute, never `gpu_index`).
fn rm_gpu_instance(body: &str) -> Option<u64> {
    let r = after(body, "NVRM: GPU")?;
    let (v, n) = parse_uint(r)?;
    if r.as_bytes().get(n) == Some(&b' ') {
        Some(v)
    } else {
        None
    }
}

/// ECC errors of a GPU outside Xids (driver, DCGM, CUDA text):
/// code 2 = uncorrectable (DBE / double-bit / contained / uncontained),
/// code 1 = correctable (SBE / single-bit).
fn ecc(body: &str) -> Option<ParsedSignal> {
    if !body.contains("ECC") || !contains_any(body, &["error", "Error", "ERROR"]) {
        return None;
    }
    // The host's memory, not a GPU's: EDAC reports, machine-check decodes ("[Hardware Error]:
    // MC4 Error (node 1): DRAM ECC error detected on the NB.") and DIMM names.
    if contains_any(body, &["EDAC", "[Hardware Error]", "DIMM"]) {
        return None;
    }
    let code = if contains_any(
        body,
        &[
            "uncorrectable",
            "Uncorrectable",
            "UNCORRECTABLE",
            "double-bit",
            "double bit",
            "Double Bit",
            "DBE",
            "ontained ECC",
        ],
    ) {
        2
    } else if contains_any(
        body,
        &[
            "correctable",
            "Correctable",
            "single-bit",
            "single bit",
            "Single Bit",
            "SBE",
        ],
    ) {
        1
    } else {
        return None;
    };
    let mut s = ParsedSignal::new("ecc");
    s.code = Some(code);
    if body.contains("olatile") {
        s.set("volatile", true);
    }
    Some(s)
}

/// NVLink errors outside Xids: DCGM `Detected 12 CRC NvLink errors on GPU 3's
/// NVLink`, `GPU 3's NvLink link 5 is currently down`, driver NVLink fatal
/// messages.
fn nvlink(body: &str) -> Option<ParsedSignal> {
    if !contains_any(body, &["NVLink", "NvLink", "nvlink", "Nvlink", "NVLINK"]) {
        return None;
    }
    if !contains_any(
        body,
        &[
            "error", "Error", "ERROR", "down", "Down", "DOWN", "fail", "Fail", "fatal", "Fatal",
        ],
    ) {
        return None;
    }
    let mut s = ParsedSignal::new("nvlink");
    if let Some(f) = fatality(body) {
        s.set("fatal", f);
    }
    let link = int_after(body, "link ").or_else(|| int_after(body, "Link "));
    if let Some(l) = link {
        s.set("nvlink_link", l);
    }
    if contains_any(body, &["is currently down", "is down", "link down", "Link down"]) {
        s.set("link_down", true);
    }
    if let Some(n) = uint_after(body, "Detected ") {
        s.set("error_count", n);
    }
    Some(s)
}
