//! NVIDIA kernel-driver lines: `NVRM: Xid`, NVSwitch `SXid`, fabric-manager
//! NVSwitch errors and the "fallen off the bus" message without an Xid.

use super::scan::{
    after, find_pci, int_after, normalise_pci, parse_uint, pci_at, skip_ws_bounded, take_bytes_while, token, truncate,
    uint_after, until_any,
};
use super::{Outcome, ParsedSignal};

pub(crate) fn parse(body: &str) -> Outcome {
    // An SXid / Xid header with no number is malformed ("NVRM: Xid
    // (PCI:0000:3b:00): , pid=..."): the line is unmatched and no other rule
    // is tried. Later occurrences are tried (bounded) in case of garbage in
    // front; each failed attempt reads O(100) bytes, so this stays linear.
    if body.contains("SXid") {
        return first_hit(body, "SXid", parse_sxid);
    }
    if body.contains("Xid (") {
        return first_hit(body, "Xid (", parse_xid);
    }
    if let Some(s) = parse_fabric_manager(body) {
        return Outcome::Hit(s);
    }
    if body.contains("NVRM") && body.contains("fallen off the bus") {
        return Outcome::Hit(parse_fallen_off_bus(body));
    }
    if let Some(s) = parse_unusable_gpu(body) {
        return Outcome::Hit(s);
    }
    Outcome::Miss
}

/// Driver messages of a GPU that cannot be used and that come without an Xid, in the words of
/// NVIDIA's kernel modules (open-gpu-kernel-modules):
///
/// - `gpu_init_failure`: the driver could not initialise the GPU: `NVRM: GPU 0000:81:00.0:
///   RmInitAdapter failed! (0x25:0x40:1470)` and its companion `rm_init_adapter failed, device
///   minor number 0` (the triple is the driver's internal step, status and line);
/// - `gpu_probe_failure`: the driver could not take the GPU at all: `NVRM: The NVIDIA probe
///   routine failed for 1 device(s).`, `NVRM: None of the NVIDIA devices were initialized.`, and
///   the kernel's own `nvidia: probe of 0000:01:00.0 failed with error -1` (newer kernels: `nvidia
///   0000:01:00.0: probe with driver nvidia failed with error -1`);
/// - `gpu_reset_required`: a driver call returned `NV_ERR_RESET_REQUIRED` (status 0x62, "Reset
///   required"): the GPU must be reset before it can be used again.
fn parse_unusable_gpu(body: &str) -> Option<ParsedSignal> {
    let nvrm = body.contains("NVRM");
    let kind = if nvrm && (body.contains("RmInitAdapter failed") || body.contains("rm_init_adapter failed")) {
        "gpu_init_failure"
    } else if (nvrm
        && (body.contains("probe routine failed") || body.contains("None of the NVIDIA devices were initialized")))
        || (body.starts_with("nvidia") && body.contains("probe") && body.contains("failed with error"))
    {
        "gpu_probe_failure"
    } else if body.contains("NV_ERR_RESET_REQUIRED") {
        "gpu_reset_required"
    } else {
        return None;
    };
    let mut s = ParsedSignal::new(kind);
    s.pci_bus_id = find_pci(body).or_else(|| {
        // The kernel names the device it could not probe: `probe of 0000:01:00.0`, or
        // `nvidia 0000:01:00.0: probe with driver ...`.
        ["probe of ", "nvidia "]
            .iter()
            .find_map(|m| after(body, m).and_then(pci_at))
    });
    if let Some(r) = after(body, "RmInitAdapter failed! (") {
        let triple = until_any(r, b")", 32);
        if !triple.is_empty() {
            s.set_str("rm_status", triple);
        }
    }
    Some(s)
}

fn first_hit(body: &str, needle: &str, f: fn(&str, usize) -> Option<ParsedSignal>) -> Outcome {
    let mut from = 0;
    for _ in 0..64 {
        let Some(i) = super::scan::find_from(body, from, needle) else {
            break;
        };
        if let Some(s) = f(body, i) {
            return Outcome::Hit(s);
        }
        from = i + needle.len();
    }
    Outcome::Reject
}

/// The common head of Xid and SXid records after the keyword: ` (<device>): <code>`. Returns the
/// device text, the code and what follows it; None when the shape or the number is missing.
fn device_and_code(rest: &str) -> Option<(&str, u64, &str)> {
    let rest = skip_ws_bounded(rest, 4).strip_prefix('(')?;
    let close = rest.as_bytes().iter().take(96).position(|&c| c == b')')?;
    let dev = rest.get(..close)?;
    let after_dev = skip_ws_bounded(rest.get(close + 1..)?.strip_prefix(':')?, 8);
    let (code, n) = parse_uint(after_dev)?;
    if code > 1_000_000 {
        return None;
    }
    Some((dev, code, after_dev.get(n..)?))
}

/// `[.. ]NVRM: Xid (PCI:0000:3b:00[ GPU-I:05]): 79, pid=1234, name=python, <detail>`
fn parse_xid(body: &str, i: usize) -> Option<ParsedSignal> {
    let (dev, code, tail) = device_and_code(body.get(i + 3..)?)?;
    let mut s = ParsedSignal::new("xid");
    s.code = Some(code as i64);

    let mut toks = dev.split_whitespace();
    if let Some(addr) = toks.next() {
        s.pci_bus_id = normalise_pci(addr);
    }
    for t in toks.take(4) {
        if let Some(v) = t.strip_prefix("GPU-I:") {
            if let Some((v, _)) = parse_uint(v) {
                s.set("mig_gpu_instance", v);
            }
        } else if let Some(v) = t.strip_prefix("GPU-CI:")
            && let Some((v, _)) = parse_uint(v)
        {
            s.set("mig_compute_instance", v);
        }
    }

    // pid= / name= fields (either order, each optional).
    let mut d = tail.trim_start_matches([',', ' ']);
    for _ in 0..2 {
        if let Some(r) = d.strip_prefix("pid=") {
            let (v, rest) = field(r, 64);
            if let Ok(pid) = v.trim_matches(['\'', '"']).parse::<u64>() {
                s.set("pid", pid);
            }
            d = rest;
        } else if let Some(r) = d.strip_prefix("name=") {
            let (v, rest) = field(r, 256);
            let v = v.trim_matches(['\'', '"']);
            if !v.is_empty() && v != "<unknown>" && v != "N/A" {
                s.set_str("process_name", v);
            }
            d = rest;
        }
    }
    let detail = d.trim();
    if !detail.is_empty() {
        s.set_str("detail", truncate(detail, 512).0);
    }

    if let Some(v) = uint_after(detail, "caused by previous Xid ") {
        s.set("caused_by_xid", v);
    }
    if detail.contains("reemptive cleanup") {
        s.set("preemptive_cleanup", true);
    }
    // Xid 119/120: GSP RPC timeout / GSP error details.
    if let Some(v) = uint_after(detail, "Timeout after ") {
        s.set("gsp_timeout_s", v);
    }
    if let Some(r) = after(detail, "Expected function ")
        && let Some((f, fl)) = parse_uint(r)
    {
        s.set("gsp_function", f);
        if let Some(name) = r
            .get(fl..)
            .map(|x| skip_ws_bounded(x, 2))
            .and_then(|x| x.strip_prefix('('))
        {
            let name = take_bytes_while(name, 64, |c| c.is_ascii_alphanumeric() || c == b'_');
            if !name.is_empty() {
                s.set_str("gsp_function_name", name);
            }
        }
    }
    if let Some(r) = after(detail, "response from GPU")
        && let Some((g, _)) = parse_uint(r)
    {
        s.set("rm_gpu_instance", g);
    }
    // Xid 154: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
    if let Some(r) = after(detail, "recovery action changed from ")
        && let Some(r) = after(r, " to ")
        && let Some(r) = after(r, "(")
    {
        let a = until_any(r, b")", 64);
        if !a.is_empty() {
            s.set_str("recovery_action", a);
        }
    }
    if code == 74 || code == 137 || (144..=150).contains(&code) || detail.contains("NVLink") {
        nvlink_detail(detail, &mut s);
    }
    Some(s)
}

/// Split `value, rest` at the first comma within `max` bytes; without a comma
/// the first whitespace token is the value.
fn field(r: &str, max: usize) -> (&str, &str) {
    match r.as_bytes().iter().take(max).position(|&c| c == b',') {
        Some(i) => (r[..i].trim(), r[i + 1..].trim_start()),
        None => {
            let t = token(r, max);
            (t, r[t.len()..].trim_start())
        }
    }
}

/// NVLink details of Xid 74 / 137 / 144-150.
///
/// NVLink5 (Blackwell) form, e.g.
/// `145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 ...)` or
/// pre-R575 `149, NETIR_LINK_EVT Fatal XC 1 i 2 Link 01 [0x0000000a]`:
/// the leading mnemonic is recorded as `subcode`, plus `fatal`, `nvlink_link`,
/// `xc`, `instance` and the raw interrupt words as `intr_info`. The numeric
/// sub-code NVIDIA derives from the interrupt words is unit-specific and is
/// left to the consumer (the raw words are kept).
fn nvlink_detail(detail: &str, s: &mut ParsedSignal) {
    s.set("nvlink", true);
    let first = token(detail, 64).trim_end_matches(',');
    if first.len() >= 3
        && first
            .bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
        && first.bytes().any(|c| c.is_ascii_uppercase())
    {
        s.set_str("subcode", first);
    }
    if let Some(f) = fatality(detail) {
        s.set("fatal", f);
    }
    let link = int_after(detail, "Link ").or_else(|| int_after(detail, "link "));
    if let Some(l) = link {
        s.set("nvlink_link", l);
    }
    if let Some(r) = after(detail, "XC") {
        let r = skip_ws_bounded(r, 2);
        if let Some((xc, n)) = parse_uint(r) {
            s.set("xc", xc);
            if let Some(r) = r.get(n..).and_then(|r| r.strip_prefix(" i"))
                && let Some((inst, _)) = parse_uint(skip_ws_bounded(r, 2))
            {
                s.set("instance", inst);
            }
        }
    }
    // interrupt words: the first (...) or [...] group containing 0x
    let open = detail.find(['(', '[']);
    if let Some(o) = open {
        let inner = until_any(&detail[o + 1..], b")]", 256);
        let words: Vec<serde_json::Value> = inner
            .split([' ', ','])
            .filter(|w| w.starts_with("0x") && w.len() <= 18)
            .take(16)
            .map(serde_json::Value::from)
            .collect();
        if !words.is_empty() {
            s.set("intr_info", words);
        }
    }
}

/// `Some(false)` for Nonfatal / Non-fatal, `Some(true)` for Fatal, else None.
pub(crate) fn fatality(h: &str) -> Option<bool> {
    if h.contains("Nonfatal")
        || h.contains("Non-fatal")
        || h.contains("nonfatal")
        || h.contains("non-fatal")
        || h.contains("NON_FATAL")
        || h.contains("Non fatal")
    {
        Some(false)
    } else if h.contains("Fatal") || h.contains("fatal") || h.contains("FATAL") {
        Some(true)
    } else {
        None
    }
}

/// `nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 37 egress ...`
/// and the continuation records of the same event
/// (`..., 20034, Severity 5 Engine instance 31 ...`, `..., 12028, Data {0x...}`),
/// which are flagged `continuation: true` so they can be de-duplicated.
fn parse_sxid(body: &str, i: usize) -> Option<ParsedSignal> {
    let (dev, code, tail) = device_and_code(body.get(i + 4..)?)?;
    let mut s = ParsedSignal::new("sxid");
    s.code = Some(code as i64);
    s.pci_bus_id = normalise_pci(dev.trim());
    if let Some(r) = body.get(..i).and_then(|h| after(h, "nvidia-nvswitch"))
        && let Some((sw, _)) = parse_uint(r)
    {
        s.set("nvswitch", sw);
    }
    let detail = tail.trim_start_matches([',', ' ']).trim();
    if detail.starts_with("Data {") || detail.starts_with("Severity ") {
        s.set("continuation", true);
        if let Some(v) = uint_after(detail, "Severity ") {
            s.set("severity", v);
        }
    } else if let Some(f) = fatality(token(detail, 32)) {
        s.set("fatal", f);
    }
    if let Some(l) = uint_after(detail, "Link ") {
        s.set("link", l);
    }
    if detail.contains("(First)") {
        s.set("first", true);
    }
    if !detail.is_empty() {
        s.set_str("detail", truncate(detail, 512).0);
    }
    Some(s)
}

/// Fabric manager:
/// `detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 11`
/// DCGM health: `Detected fatal NvSwitch SXID 20034`,
/// `Detected fatal errors on NvSwitch 2 link 11`.
fn parse_fabric_manager(body: &str) -> Option<ParsedSignal> {
    if let Some(r) = after(body, "detected NVSwitch ") {
        let mut s = ParsedSignal::new("sxid");
        s.set("source", "fabricmanager");
        let sev = token(r, 16);
        s.set("fatal", sev == "fatal");
        s.code = uint_after(r, "error ").map(|v| v as i64);
        s.pci_bus_id = after(r, "pci bus id ").and_then(super::scan::pci_at);
        if let Some(v) = uint_after(r, "physical id ") {
            s.set("nvswitch_physical_id", v);
        }
        if let Some(v) = uint_after(r, " port ") {
            s.set("port", v);
        }
        if let Some(v) = uint_after(r, "on fid ") {
            s.set("fid", v);
        }
        return Some(s);
    }
    if let Some(r) = after(body, "NvSwitch SXID ") {
        let mut s = ParsedSignal::new("sxid");
        s.set("source", "dcgm");
        s.code = parse_uint(r).map(|(v, _)| v as i64);
        if let Some(f) = fatality(body) {
            s.set("fatal", f);
        }
        return Some(s);
    }
    for (needle, fatal) in [
        ("Detected fatal errors on NvSwitch ", true),
        ("Detected nonfatal errors on NvSwitch ", false),
    ] {
        if let Some(r) = after(body, needle) {
            let mut s = ParsedSignal::new("sxid");
            s.set("source", "dcgm");
            s.set("fatal", fatal);
            if let Some((sw, _)) = parse_uint(r) {
                s.set("nvswitch", sw);
            }
            if let Some(l) = uint_after(r, "link ") {
                s.set("link", l);
            }
            return Some(s);
        }
    }
    None
}

/// `NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0) installed in this
/// system has fallen off the bus and is not responding to commands.`
/// (also the split multi-line form and `NVRM: GPU 0000:91:00.0: GPU has fallen
/// off the bus.`).
///
/// Mapped to kind `xid`, code 79, `inferred: true`: the driver prints this when
/// it finds the GPU unreachable on PCIe, which is exactly what Xid 79 ("GPU
/// has fallen off the bus") reports, but on several paths (at driver load /
/// `RmInitAdapter`, or when the Xid line was rate-limited or lost) no Xid line
/// is emitted. Reusing code 79 makes GPU-lost incidents aggregate under one
/// code; `inferred` lets consumers de-duplicate it against a real Xid 79 from
/// the same GPU seconds apart.
fn parse_fallen_off_bus(body: &str) -> ParsedSignal {
    let mut s = ParsedSignal::new("xid");
    s.code = Some(79);
    s.set("inferred", true);
    s.set("inferred_from", "fallen_off_the_bus_message");
    s.pci_bus_id = find_pci(body);
    if let Some(r) = after(body, "PCI ID: ") {
        let id = take_bytes_while(r, 9, |c| c.is_ascii_hexdigit() || c == b':');
        if id.len() == 9 {
            s.set_str("pci_device_id", &id.to_ascii_lowercase());
        }
    }
    s
}
