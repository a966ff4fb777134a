//! Stripping of transport / logger prefixes: kmsg records, dmesg (all time
//! formats), syslog / journald (BSD and RFC 3339), CRI container logs,
//! fabric-manager brackets, torchrun `[rankN]:` / `[defaultN]:` tags and
//! glog-style severity headers (`[E1206 12:34:56.789 file.cpp:616]`).
//!
//! Prefixes may stack ("Dec  6 12:34:56 host kernel: [ 1234.5] NVRM: ...");
//! they are peeled in a loop. The outermost absolute timestamp wins.
//!
//! Time zones: BSD syslog, `dmesg -T`, fabric-manager and glog timestamps carry
//! no zone; they are taken as UTC (cluster nodes normally log in UTC). Those
//! formats also carry no year (except `dmesg -T`/FM), `LineContext::year` is used.

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};

use super::scan::{fixed_digits, parse_uint, skip_ws_bounded, token};

#[derive(Debug, Default)]
pub(crate) struct Prefix<'a> {
    pub body: &'a str,
    pub occurred_at: Option<DateTime<Utc>>,
    pub host: Option<&'a str>,
    /// Seconds since boot from kmsg / dmesg; not an absolute time.
    pub monotonic_s: Option<f64>,
    /// From a torchrun/PyTorch `[rankN]:` tag (global rank).
    pub rank: Option<i32>,
    /// From a torchrun `[defaultN]:` tag (local rank on the node).
    pub local_rank: Option<i32>,
    /// glog severity letter (`E`, `W`, ...).
    pub log_level: Option<&'a str>,
    /// glog `file.cpp:line`.
    pub source_location: Option<&'a str>,
}

pub(crate) fn strip(line: &str, year: i32) -> Prefix<'_> {
    let mut p = Prefix {
        body: line.trim_start(),
        ..Default::default()
    };
    // A handful of stacked prefixes at most; bounded so a pathological line
    // cannot make us loop.
    for _ in 0..8 {
        let s = p.body;
        let next = if let Some(r) = strip_kmsg(s, &mut p) {
            r
        } else if let Some(r) = strip_bracket(s, year, &mut p) {
            r
        } else if let Some(r) = strip_dmesg_decoration(s, &mut p) {
            r
        } else if let Some(r) = strip_iso(s, &mut p) {
            r
        } else if let Some(r) = strip_bsd_syslog(s, year, &mut p) {
            r
        } else if let Some(r) = strip_glog_plain(s, year, &mut p) {
            r
        } else {
            break;
        };
        p.body = next.trim_start();
    }
    p
}

fn set_time(p: &mut Prefix<'_>, t: Option<DateTime<Utc>>) {
    if p.occurred_at.is_none() {
        p.occurred_at = t;
    }
}

/// `/dev/kmsg` record: `pri,seq,usec,flags[,...];message`.
fn strip_kmsg<'a>(s: &'a str, p: &mut Prefix<'a>) -> Option<&'a str> {
    let b = s.as_bytes();
    if !b.first()?.is_ascii_digit() {
        return None;
    }
    let (_, n1) = parse_uint(s)?;
    if n1 > 4 || b.get(n1) != Some(&b',') {
        return None;
    }
    let (_, n2) = parse_uint(s.get(n1 + 1..)?)?;
    let i = n1 + 1 + n2;
    if b.get(i) != Some(&b',') {
        return None;
    }
    let (usec, n3) = parse_uint(s.get(i + 1..)?)?;
    let j = i + 1 + n3;
    if b.get(j) != Some(&b',') {
        return None;
    }
    let semi = b[j..].iter().take(48).position(|&c| c == b';')? + j;
    if p.monotonic_s.is_none() {
        p.monotonic_s = Some(usec as f64 / 1e6);
    }
    s.get(semi + 1..)
}

fn month_from(b: &[u8]) -> Option<u32> {
    Some(match b.get(..3)? {
        b"Jan" => 1,
        b"Feb" => 2,
        b"Mar" => 3,
        b"Apr" => 4,
        b"May" => 5,
        b"Jun" => 6,
        b"Jul" => 7,
        b"Aug" => 8,
        b"Sep" => 9,
        b"Oct" => 10,
        b"Nov" => 11,
        b"Dec" => 12,
        _ => return None,
    })
}

fn is_weekday(b: &[u8]) -> bool {
    matches!(
        b.get(..3),
        Some(b"Mon" | b"Tue" | b"Wed" | b"Thu" | b"Fri" | b"Sat" | b"Sun")
    )
}

/// `HH:MM:SS[.frac]` → (h, m, s, nanos, consumed)
fn parse_hms(b: &[u8]) -> Option<(u32, u32, u32, u32, usize)> {
    let h = fixed_digits(b, 2)?;
    if b.get(2) != Some(&b':') {
        return None;
    }
    let m = fixed_digits(b.get(3..)?, 2)?;
    if b.get(5) != Some(&b':') {
        return None;
    }
    let sec = fixed_digits(b.get(6..)?, 2)?;
    let mut i = 8;
    let mut nanos = 0u32;
    if matches!(b.get(i), Some(b'.' | b',')) && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i += 1;
        let mut digits = 0;
        while let Some(c) = b.get(i) {
            if !c.is_ascii_digit() {
                break;
            }
            if digits < 9 {
                nanos = nanos * 10 + u32::from(c - b'0');
                digits += 1;
            }
            i += 1;
            if i > 40 {
                return None;
            }
        }
        while digits < 9 {
            nanos *= 10;
            digits += 1;
        }
    }
    Some((h, m, sec, nanos, i))
}

#[allow(clippy::too_many_arguments)]
fn make_utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, ns: u32, offset_s: i64) -> Option<DateTime<Utc>> {
    let naive = NaiveDate::from_ymd_opt(y, mo, d)?.and_hms_nano_opt(h, mi, s, ns)?;
    let naive = naive.checked_sub_signed(TimeDelta::try_seconds(offset_s)?)?;
    Some(naive.and_utc())
}

/// RFC 3339 / ISO 8601 timestamp at the start of `b`:
/// `YYYY-MM-DD[T ]HH:MM:SS[.,frac][Z|±HH:MM|±HHMM|±HH]`.
pub(crate) fn parse_iso(b: &[u8]) -> Option<(DateTime<Utc>, usize)> {
    let y = fixed_digits(b, 4)?;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let mo = fixed_digits(b.get(5..)?, 2)?;
    let d = fixed_digits(b.get(8..)?, 2)?;
    if !matches!(b.get(10), Some(b'T' | b' ')) {
        return None;
    }
    let (h, mi, s, ns, n) = parse_hms(b.get(11..)?)?;
    let mut i = 11 + n;
    let mut off: i64 = 0;
    match b.get(i) {
        Some(b'Z') => i += 1,
        Some(&sign @ (b'+' | b'-')) => {
            if let Some(oh) = fixed_digits(b.get(i + 1..)?, 2) {
                let mut j = i + 3;
                let mut om = 0;
                if b.get(j) == Some(&b':') {
                    om = fixed_digits(b.get(j + 1..)?, 2)?;
                    j += 3;
                } else if let Some(m) = fixed_digits(b.get(j..).unwrap_or(&[]), 2) {
                    om = m;
                    j += 2;
                }
                off = i64::from(oh) * 3600 + i64::from(om) * 60;
                if sign == b'-' {
                    off = -off;
                }
                i = j;
            }
        }
        _ => {}
    }
    Some((make_utc(y as i32, mo, d, h, mi, s, ns, off)?, i))
}

/// `[...]` prefixes: dmesg monotonic, dmesg -T, fabric-manager time, bracketed
/// ISO (Talos), torchrun `[rankN]:`/`[defaultN]:`, bracketed glog header.
fn strip_bracket<'a>(s: &'a str, year: i32, p: &mut Prefix<'a>) -> Option<&'a str> {
    let b = s.as_bytes();
    if b.first() != Some(&b'[') {
        return None;
    }
    let close = b.iter().take(96).position(|&c| c == b']')?;
    let inner = s.get(1..close)?;
    let ib = inner.as_bytes();
    let mut rest = s.get(close + 1..)?;

    let t = inner.trim_start();
    let tb = t.as_bytes();
    if !tb.is_empty() && tb.iter().all(|c| c.is_ascii_digit() || *c == b'.') && t.contains('.') {
        // [ 1234.567890]
        if p.monotonic_s.is_none() {
            p.monotonic_s = t.parse::<f64>().ok();
        }
    } else if is_weekday(ib) && ib.get(3) == Some(&b' ') {
        // [Mon Dec  6 12:34:56 2021]
        let r = &ib[4..];
        let mo = month_from(r)?;
        let r = r.get(3..)?;
        let sp = r.iter().take_while(|c| **c == b' ').count();
        let r = &r[sp..];
        let (d, dn) = parse_uint(std::str::from_utf8(r).ok()?)?;
        let r = r.get(dn + 1..)?;
        let (h, mi, sec, ns, n) = parse_hms(r)?;
        let y = fixed_digits(r.get(n + 1..)?, 4)?;
        set_time(p, make_utc(y as i32, mo, d as u32, h, mi, sec, ns, 0));
    } else if month_from(ib).is_some() && ib.get(3) == Some(&b' ') && ib.len() >= 20 {
        // fabric manager: [Jul 26 2023 06:14:05]
        let mo = month_from(ib)?;
        let d = fixed_digits(ib.get(4..)?, 2)?;
        let y = fixed_digits(ib.get(7..)?, 4)?;
        let (h, mi, sec, ns, _) = parse_hms(ib.get(12..)?)?;
        set_time(p, make_utc(y as i32, mo, d, h, mi, sec, ns, 0));
    } else if let Some((t, _)) = parse_iso(ib) {
        set_time(p, Some(t));
    } else if let Some(n) = inner.strip_prefix("rank") {
        let (v, len) = parse_uint(n)?;
        if len != n.len() || v > i32::MAX as u64 {
            return None;
        }
        p.rank.get_or_insert(v as i32);
    } else if let Some(n) = inner.strip_prefix("default") {
        let (v, len) = parse_uint(n)?;
        if len != n.len() || v > i32::MAX as u64 {
            return None;
        }
        p.local_rank.get_or_insert(v as i32);
    } else if !parse_glog_header(inner, year, p) {
        return None;
    }
    if let Some(r) = rest.strip_prefix(':') {
        rest = r;
    }
    Some(rest)
}

/// glog header inside or at the start of a line:
/// `E1206 12:34:56.789012345 [tid ]file.cpp:616` or old `E file.cpp:475`.
fn parse_glog_header<'a>(h: &'a str, year: i32, p: &mut Prefix<'a>) -> bool {
    let b = h.as_bytes();
    if !matches!(b.first(), Some(b'I' | b'W' | b'E' | b'F')) {
        return false;
    }
    let level = &h[..1];
    if b.get(1) == Some(&b' ') {
        // old form: "E ProcessGroupNCCL.cpp:475"
        let loc = token(&h[2..], 128);
        if !loc.contains(':') || !loc.contains('.') {
            return false;
        }
        p.log_level.get_or_insert(level);
        p.source_location.get_or_insert(loc);
        return true;
    }
    let (Some(mo), Some(d)) = (fixed_digits(&b[1..], 2), fixed_digits(b.get(3..).unwrap_or(&[]), 2)) else {
        return false;
    };
    if b.get(5) != Some(&b' ') {
        return false;
    }
    let Some((hh, mi, sec, ns, n)) = b.get(6..).and_then(parse_hms) else {
        return false;
    };
    p.log_level.get_or_insert(level);
    set_time(p, make_utc(year, mo, d, hh, mi, sec, ns, 0));
    // the last token is file:line
    if let Some(tail) = h.get(6 + n..)
        && let Some(loc) = tail.split_whitespace().last()
        && loc.contains(':')
    {
        p.source_location.get_or_insert(loc);
    }
    true
}

/// Unbracketed glog: `E1206 12:34:56.789012  1234 file.cpp:123] msg`.
fn strip_glog_plain<'a>(s: &'a str, year: i32, p: &mut Prefix<'a>) -> Option<&'a str> {
    let b = s.as_bytes();
    if !matches!(b.first(), Some(b'I' | b'W' | b'E' | b'F')) || !b.get(1).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let close = b.iter().take(96).position(|&c| c == b']')?;
    let head = s.get(..close)?;
    if !parse_glog_header(head, year, p) {
        return None;
    }
    s.get(close + 1..)
}

/// `dmesg --decode`: `kern  :warn  : ` (also Talos' `kern: warning: `).
fn strip_dmesg_decoration<'a>(s: &'a str, p: &mut Prefix<'a>) -> Option<&'a str> {
    const FACILITIES: [&str; 12] = [
        "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv", "ftp",
    ];
    const LEVELS: [&str; 9] = [
        "emerg", "alert", "crit", "err", "warn", "warning", "notice", "info", "debug",
    ];
    let fac = super::scan::take_bytes_while(s, 10, |c| c.is_ascii_lowercase());
    if !FACILITIES.contains(&fac) {
        return None;
    }
    let r = skip_ws_bounded(&s[fac.len()..], 8).strip_prefix(':')?;
    let r = skip_ws_bounded(r, 8);
    let lvl = super::scan::take_bytes_while(r, 10, |c| c.is_ascii_lowercase());
    if !LEVELS.contains(&lvl) {
        return None;
    }
    let r = skip_ws_bounded(&r[lvl.len()..], 8).strip_prefix(':')?;
    let _ = p;
    Some(r)
}

/// A syslog tag such as `kernel:` or `python3[1234]:`.
fn is_tag(t: &str) -> bool {
    t.len() >= 2
        && t.ends_with(':')
        && !t.starts_with('[')
        && t.as_bytes()[..t.len() - 1]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.[]/@".contains(c))
}

fn is_hostname(t: &str) -> bool {
    !t.is_empty()
        && !t.ends_with(':')
        && t.as_bytes()
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
}

/// After a syslog timestamp: `host tag: msg` / `host msg` / CRI `stderr F msg`.
fn strip_host_tag<'a>(rest: &'a str, p: &mut Prefix<'a>, allow_untagged_host: bool) -> &'a str {
    let rest = skip_ws_bounded(rest, 8);
    let t1 = token(rest, 256);
    if t1 == "kernel:" {
        // "Mar 29 15:38:59 kernel: NVRM: ..." (journald without a host column)
        return &rest[t1.len()..];
    }
    if t1.is_empty() || t1.ends_with(':') {
        return rest;
    }
    let after1 = skip_ws_bounded(&rest[t1.len()..], 8);
    let t2 = token(after1, 256);
    if (t1 == "stdout" || t1 == "stderr") && (t2 == "F" || t2 == "P") {
        return &after1[t2.len()..];
    }
    if is_hostname(t1) && is_tag(t2) {
        p.host.get_or_insert(t1);
        return &after1[t2.len()..];
    }
    if allow_untagged_host && is_hostname(t1) {
        p.host.get_or_insert(t1);
        return after1;
    }
    rest
}

/// RFC 3339 syslog / journald short-iso / dmesg --time-format iso / CRI logs.
fn strip_iso<'a>(s: &'a str, p: &mut Prefix<'a>) -> Option<&'a str> {
    let (t, n) = parse_iso(s.as_bytes())?;
    set_time(p, Some(t));
    let rest = s.get(n..)?;
    Some(strip_host_tag(rest, p, false))
}

/// BSD syslog / journald short: `Dec  6 12:34:56[.123456] host tag: msg`.
fn strip_bsd_syslog<'a>(s: &'a str, year: i32, p: &mut Prefix<'a>) -> Option<&'a str> {
    let b = s.as_bytes();
    let mo = month_from(b)?;
    if b.get(3) != Some(&b' ') {
        return None;
    }
    let mut i = 4;
    if b.get(i) == Some(&b' ') {
        i += 1;
    }
    let (d, dn) = parse_uint(s.get(i..)?)?;
    if dn > 2 {
        return None;
    }
    i += dn;
    if b.get(i) != Some(&b' ') {
        return None;
    }
    let (h, mi, sec, ns, n) = parse_hms(b.get(i + 1..)?)?;
    set_time(p, make_utc(year, mo, d as u32, h, mi, sec, ns, 0));
    let rest = s.get(i + 1 + n..)?;
    Some(strip_host_tag(rest, p, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacked_syslog_and_dmesg() {
        let p = strip(
            "Dec  6 12:34:56 gpu-node-17 kernel: [ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, x",
            2021,
        );
        assert_eq!(p.body, "NVRM: Xid (PCI:0000:3b:00): 79, x");
        assert_eq!(p.host, Some("gpu-node-17"));
        assert_eq!(p.occurred_at.unwrap().to_rfc3339(), "2021-12-06T12:34:56+00:00");
        assert_eq!(p.monotonic_s, Some(1234.56789));
    }

    #[test]
    fn iso_variants() {
        let p = strip("kern  :warn  : 2021-12-06T12:34:56,123456+01:00 NVRM: Xid", 2000);
        assert_eq!(p.body, "NVRM: Xid");
        assert_eq!(p.occurred_at.unwrap().to_rfc3339(), "2021-12-06T11:34:56.123456+00:00");
        let p = strip("2021-12-06T12:34:56.5Z host kernel: NVRM: Xid", 2000);
        assert_eq!(p.body, "NVRM: Xid");
        assert_eq!(p.host, Some("host"));
        let p = strip("2021-12-06T12:34:56+0000 node1 python3[77]: RuntimeError: x", 2000);
        assert_eq!(p.body, "RuntimeError: x");
        let p = strip(
            "2021-12-06T12:34:56.1Z stderr F [rank3]:[E1206 12:34:56.789 a.cpp:1] m",
            2000,
        );
        assert_eq!(p.body, "m");
        assert_eq!(p.rank, Some(3));
    }

    #[test]
    fn glog_and_kmsg() {
        let p = strip(
            "[rank4]:[E1206 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank 4] W",
            2021,
        );
        assert_eq!(p.body, "[Rank 4] W");
        assert_eq!(p.rank, Some(4));
        assert_eq!(p.source_location, Some("ProcessGroupNCCL.cpp:616"));
        assert_eq!(
            p.occurred_at.unwrap().to_rfc3339(),
            "2021-12-06T12:34:56.789012345+00:00"
        );
        let p = strip("[E ProcessGroupNCCL.cpp:475] [Rank 0] W", 2021);
        assert_eq!(p.body, "[Rank 0] W");
        assert!(p.occurred_at.is_none());
        let p = strip("4,1234,5678901,-;NVRM: Xid", 2021);
        assert_eq!(p.body, "NVRM: Xid");
        assert_eq!(p.monotonic_s, Some(5.678901));
        let p = strip("[Mon Dec  6 12:34:56 2021] NVRM: Xid", 1999);
        assert_eq!(p.occurred_at.unwrap().to_rfc3339(), "2021-12-06T12:34:56+00:00");
    }
}
