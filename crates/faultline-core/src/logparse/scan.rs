//! Small, allocation-free scanning helpers shared by the parsers.
//!
//! Every helper is bounded: it either delegates to `str::find` (linear Two-Way
//! search) or reads at most a fixed number of bytes, so that calling a constant
//! number of them per line (or once per needle occurrence) stays linear in the
//! line length even for multi-megabyte lines. All slicing goes through
//! `str::get`, which returns `None` instead of panicking on a non-char boundary.

/// `haystack.find(needle)` starting at byte offset `from`.
#[inline]
pub(crate) fn find_from(h: &str, from: usize, n: &str) -> Option<usize> {
    h.get(from..)?.find(n).map(|i| i + from)
}

/// The text right after the first occurrence of `needle`.
#[inline]
pub(crate) fn after<'a>(h: &'a str, n: &str) -> Option<&'a str> {
    let i = h.find(n)?;
    h.get(i + n.len()..)
}

/// Does `h` contain any of `needles`?
#[inline]
pub(crate) fn contains_any(h: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| h.contains(n))
}

/// Skip up to `max` ASCII spaces/tabs.
#[inline]
pub(crate) fn skip_ws_bounded(s: &str, max: usize) -> &str {
    let n = s
        .as_bytes()
        .iter()
        .take(max)
        .take_while(|b| **b == b' ' || **b == b'\t')
        .count();
    // ASCII bytes only were skipped: `n` is a char boundary.
    s.get(n..).unwrap_or("")
}

/// Parse a run of ASCII digits at the start of `s` (at most 18 digits, else `None`).
/// Returns the value and the number of bytes consumed.
#[inline]
pub(crate) fn parse_uint(s: &str) -> Option<(u64, usize)> {
    let b = s.as_bytes();
    let mut v: u64 = 0;
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        if i >= 18 {
            return None;
        }
        v = v * 10 + u64::from(b[i] - b'0');
        i += 1;
    }
    if i == 0 { None } else { Some((v, i)) }
}

/// Signed variant of [`parse_uint`] (accepts one leading `-`).
#[inline]
pub(crate) fn parse_int(s: &str) -> Option<(i64, usize)> {
    if let Some(rest) = s.strip_prefix('-') {
        let (v, n) = parse_uint(rest)?;
        Some((-(v as i64), n + 1))
    } else {
        let (v, n) = parse_uint(s)?;
        Some((v as i64, n))
    }
}

/// Exactly `n` ASCII digits at the start of `s`.
#[inline]
pub(crate) fn fixed_digits(s: &[u8], n: usize) -> Option<u32> {
    if s.len() < n {
        return None;
    }
    let mut v = 0u32;
    for &c in &s[..n] {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(c - b'0');
    }
    Some(v)
}

/// Integer right after the first `needle` (optional spaces in between).
pub(crate) fn uint_after(h: &str, needle: &str) -> Option<u64> {
    let rest = skip_ws_bounded(after(h, needle)?, 8);
    parse_uint(rest).map(|(v, _)| v)
}

/// Signed integer right after the first `needle`.
pub(crate) fn int_after(h: &str, needle: &str) -> Option<i64> {
    let rest = skip_ws_bounded(after(h, needle)?, 8);
    parse_int(rest).map(|(v, _)| v)
}

/// Longest prefix of `s` (at most `max` bytes) whose bytes satisfy `pred`.
/// `pred` should only accept ASCII bytes, so the cut is a char boundary; if it
/// is not, the empty string is returned instead of panicking.
#[inline]
pub(crate) fn take_bytes_while(s: &str, max: usize, pred: impl Fn(u8) -> bool) -> &str {
    let n = s.as_bytes().iter().take(max).take_while(|b| pred(**b)).count();
    s.get(..n).unwrap_or("")
}

/// A whitespace-delimited token at the start of `s`, at most `max` bytes
/// (longer tokens are cut at the nearest char boundary below `max`).
pub(crate) fn token(s: &str, max: usize) -> &str {
    let b = s.as_bytes();
    let mut n = 0;
    while n < b.len() && n < max && !b[n].is_ascii_whitespace() {
        n += 1;
    }
    while n > 0 && !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

/// Text up to the first byte in `stops` (or end), at most `max` bytes, trimmed.
pub(crate) fn until_any<'a>(s: &'a str, stops: &[u8], max: usize) -> &'a str {
    let b = s.as_bytes();
    let mut n = 0;
    while n < b.len() && n < max && !stops.contains(&b[n]) {
        n += 1;
    }
    while n > 0 && !s.is_char_boundary(n) {
        n -= 1;
    }
    s[..n].trim()
}

/// Truncate to at most `max` bytes on a char boundary.
pub(crate) fn truncate(s: &str, max: usize) -> (&str, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut n = max;
    while n > 0 && !s.is_char_boundary(n) {
        n -= 1;
    }
    (&s[..n], true)
}

#[inline]
fn is_pci_byte(b: u8) -> bool {
    b.is_ascii_hexdigit() || b == b':' || b == b'.'
}

fn hex_field(s: &str, min: usize, max: usize) -> Option<u32> {
    if s.len() < min || s.len() > max || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

/// Normalise a PCI address to `dddd:bb:dd.f` (lower-case hex).
///
/// Accepts `PCI:0000:3b:00`, `0000:3b:00.0`, `00000000:86:00.0` (NVML's 8-digit
/// domain), `0000:B3:00.0` and `3b:00.0`. A missing function defaults to `.0`
/// (XID lines print bus:device only; GPUs are function 0).
pub(crate) fn normalise_pci(raw: &str) -> Option<String> {
    let s = raw.strip_prefix("PCI:").unwrap_or(raw);
    let s = s.trim_end_matches('.');
    if s.is_empty() || s.len() > 24 {
        return None;
    }
    let (addr, func) = match s.split_once('.') {
        Some((a, f)) => {
            let f = hex_field(f, 1, 1)?;
            if f > 7 {
                return None;
            }
            (a, f)
        }
        None => (s, 0),
    };
    let mut parts = addr.split(':');
    let p1 = parts.next()?;
    let p2 = parts.next()?;
    let p3 = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let (dom, bus, dev) = match p3 {
        Some(p3) => (hex_field(p1, 1, 8)?, hex_field(p2, 1, 2)?, hex_field(p3, 1, 2)?),
        None => (0, hex_field(p1, 1, 2)?, hex_field(p2, 1, 2)?),
    };
    if dev > 0x1f {
        return None;
    }
    Some(if dom <= 0xffff {
        format!("{dom:04x}:{bus:02x}:{dev:02x}.{func:x}")
    } else {
        format!("{dom:08x}:{bus:02x}:{dev:02x}.{func:x}")
    })
}

/// Normalise the PCI-looking token at the start of `s`.
pub(crate) fn pci_at(s: &str) -> Option<String> {
    let s = s.strip_prefix("PCI:").unwrap_or(s);
    let tok = take_bytes_while(s, 24, is_pci_byte).trim_end_matches([':', '.']);
    if !tok.contains(':') {
        return None;
    }
    normalise_pci(tok)
}

/// Find a PCI address in free text: after `PCI:`, `pci bus id `, `at gpu `,
/// `GPU ` (only when the token really is an address) or `Bus-Id `.
pub(crate) fn find_pci(h: &str) -> Option<String> {
    for marker in ["PCI:", "pci bus id ", "at gpu ", "Bus-Id "] {
        if let Some(rest) = after(h, marker)
            && let Some(p) = pci_at(skip_ws_bounded(rest, 4))
        {
            return Some(p);
        }
    }
    // "GPU 0000:b3:00.0" — iterate occurrences, each step moves forward.
    let mut from = 0;
    for _ in 0..64 {
        let Some(i) = find_from(h, from, "GPU ") else {
            break;
        };
        from = i + 4;
        if let Some(p) = h.get(from..).and_then(pci_at) {
            return Some(p);
        }
    }
    None
}

/// A GPU ordinal written as `GPU 3` (followed by a non-address character),
/// as printed by PyTorch OOM messages, DCGM and nvidia-smi. `GPU 0000:3b:00.0`
/// (an address) and `GPU1` (the driver's internal instance number) are not
/// GPU indices.
pub(crate) fn find_gpu_index(h: &str) -> Option<i32> {
    let mut from = 0;
    for _ in 0..64 {
        let i = find_from(h, from, "GPU ")?;
        from = i + 4;
        let rest = h.get(from..)?;
        if let Some((v, n)) = parse_uint(rest) {
            let b = rest.as_bytes();
            let next = b.get(n).copied();
            let ok = match next {
                None => true,
                Some(c) if c.is_ascii_alphanumeric() || c == b'-' => false,
                // "GPU 0000:3b:00.0" is an address, "GPU 5: ..." / "GPU 2." are ordinals
                Some(b':' | b'.') => !b.get(n + 1).is_some_and(|c| c.is_ascii_alphanumeric()),
                Some(_) => true,
            };
            if ok && n <= 4 && v < 4096 {
                return Some(v as i32);
            }
        }
    }
    None
}

/// Parse a human size like `2.00 GiB`, `20.00 MiB`, `512 B` into bytes.
pub(crate) fn parse_size(s: &str) -> Option<i64> {
    let s = skip_ws_bounded(s, 4);
    let num = take_bytes_while(s, 24, |b| b.is_ascii_digit() || b == b'.');
    if num.is_empty() {
        return None;
    }
    let v: f64 = num.parse().ok()?;
    let rest = skip_ws_bounded(s.get(num.len()..)?, 2);
    let unit = take_bytes_while(rest, 3, |b| b.is_ascii_alphabetic());
    let mul: f64 = match unit {
        "B" => 1.0,
        "KiB" | "KB" | "kB" => 1024.0,
        "MiB" | "MB" => 1024.0 * 1024.0,
        "GiB" | "GB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" | "TB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bytes = v * mul;
    if bytes.is_finite() && (0.0..9.0e18).contains(&bytes) {
        Some(bytes.round() as i64)
    } else {
        None
    }
}

/// The exception type written right before `idx` as in
/// `torch.distributed.DistBackendError: NCCL error ...` → that dotted name.
pub(crate) fn exception_before(h: &str, idx: usize) -> Option<&str> {
    let head = h.get(..idx)?;
    let head = head.strip_suffix(": ").or_else(|| head.strip_suffix(':'))?;
    let b = head.as_bytes();
    let mut start = b.len();
    let mut steps = 0;
    while start > 0 && steps < 96 {
        let c = b[start - 1];
        if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b':' {
            start -= 1;
            steps += 1;
        } else {
            break;
        }
    }
    let name = head.get(start..)?.trim_start_matches([':', '.']);
    if name.ends_with("Error") || name.ends_with("Exception") {
        Some(name)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_normalisation() {
        assert_eq!(normalise_pci("PCI:0000:3b:00").as_deref(), Some("0000:3b:00.0"));
        assert_eq!(normalise_pci("0000:B3:00.0").as_deref(), Some("0000:b3:00.0"));
        assert_eq!(normalise_pci("00000000:86:00.0").as_deref(), Some("0000:86:00.0"));
        assert_eq!(normalise_pci("0000:91:00.0.").as_deref(), Some("0000:91:00.0"));
        assert_eq!(normalise_pci("3b:00.1").as_deref(), Some("0000:3b:00.1"));
        assert_eq!(normalise_pci("0019:01:00").as_deref(), Some("0019:01:00.0"));
        assert_eq!(normalise_pci("..."), None);
        assert_eq!(normalise_pci("PCI:..."), None);
        assert_eq!(normalise_pci("0000:3b:ff.0"), None);
        assert_eq!(normalise_pci("0000:3b:00.9"), None);
    }

    #[test]
    fn gpu_index_rules() {
        assert_eq!(find_gpu_index("(GPU 3; 79.15 GiB total capacity"), Some(3));
        assert_eq!(find_gpu_index("GPU 0 has a total capacity"), Some(0));
        assert_eq!(find_gpu_index("detected in GPU 2."), Some(2));
        assert_eq!(find_gpu_index("GPU 5: Row remapping failure"), Some(5));
        assert_eq!(find_gpu_index("NVRM: GPU 0000:91:00.0: GPU has fallen"), None);
        assert_eq!(find_gpu_index("response from GPU1 GSP!"), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2.00 GiB"), Some(2 * 1024 * 1024 * 1024));
        assert_eq!(parse_size("20.00 MiB"), Some(20 * 1024 * 1024));
        assert_eq!(parse_size("lots"), None);
    }

    #[test]
    fn exceptions() {
        let s = "x torch.distributed.DistBackendError: NCCL error in: a";
        let i = s.find("NCCL error").unwrap();
        assert_eq!(exception_before(s, i), Some("torch.distributed.DistBackendError"));
        let s = "RuntimeError: CUDA error: boom";
        assert_eq!(exception_before(s, s.find("CUDA error").unwrap()), Some("RuntimeError"));
    }
}
