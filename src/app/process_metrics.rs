//! The standard Prometheus process metrics (`process_*`, as the official clients name them), read
//! by hand from `/proc` on Linux at each scrape; elsewhere nothing is reported. Rendered as text
//! directly, because `process_cpu_seconds_total` is a fractional counter, which the `metrics`
//! facade (integer counters) cannot hold.

use std::fmt::Write;

/// `/proc` reports CPU and start times in clock ticks of USER_HZ, which Linux fixes at 100 for
/// user space on every architecture it ships (`sysconf(_SC_CLK_TCK)`).
const TICKS_PER_SECOND: f64 = 100.0;

/// What one scrape read.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessSample {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<f64>,
    pub virtual_bytes: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
}

/// From `/proc/self/stat`: (user + system CPU seconds, start in ticks after boot, virtual size in
/// bytes). The command name (field 2) is in parentheses and may hold spaces or ')', so fields are
/// counted after the last ')': field 3 (state) is index 0 there, utime (14) index 11, stime (15)
/// index 12, starttime (22) index 19, vsize (23) index 20.
pub fn parse_stat(stat: &str) -> Option<(f64, f64, f64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| fields.get(i)?.parse::<f64>().ok();
    let cpu = (num(11)? + num(12)?) / TICKS_PER_SECOND;
    Some((cpu, num(19)?, num(20)?))
}

/// `btime` of `/proc/stat`: the boot time, seconds since the Unix epoch.
pub fn parse_boot_time(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// `VmRSS` of `/proc/self/status` in bytes (the file says kB, meaning KiB).
pub fn parse_rss(status: &str) -> Option<f64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024.0)
}

/// The soft limit of "Max open files" in `/proc/self/limits` (None when "unlimited").
pub fn parse_max_fds(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

/// Reads the current process's figures; every one it cannot read is left out.
pub fn sample() -> ProcessSample {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let mut s = ProcessSample::default();
    if let Some((cpu, start_ticks, vsize)) = read("/proc/self/stat").as_deref().and_then(parse_stat) {
        s.cpu_seconds = Some(cpu);
        s.virtual_bytes = Some(vsize);
        s.start_time_seconds = read("/proc/stat")
            .as_deref()
            .and_then(parse_boot_time)
            .map(|boot| boot + start_ticks / TICKS_PER_SECOND);
    }
    s.resident_bytes = read("/proc/self/status").as_deref().and_then(parse_rss);
    s.max_fds = read("/proc/self/limits").as_deref().and_then(parse_max_fds);
    // The directory handle read_dir holds is one of the entries: not counted.
    s.open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|d| d.count().saturating_sub(1) as f64);
    s
}

/// The sample in the Prometheus text format, with HELP and TYPE lines.
pub fn format(s: &ProcessSample) -> String {
    let metrics: [(&str, &str, &str, Option<f64>); 6] = [
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            s.cpu_seconds,
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            s.resident_bytes,
        ),
        (
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            s.virtual_bytes,
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            s.start_time_seconds,
        ),
        (
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            s.open_fds,
        ),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            s.max_fds,
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, value) in metrics {
        if let Some(v) = value {
            let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n\n");
        }
    }
    out
}

pub fn render() -> String {
    format(&sample())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A command name with a space and a ')' inside; utime 250 and stime 50 ticks -> 3.0 s;
        // starttime 12345 ticks; vsize 1048576 bytes.
        let stat = "4242 (we ird) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 12345 1048576 300 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((3.0, 12345.0, 1_048_576.0)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn status_limits_and_boot_time() {
        // 2048 kB -> 2048 * 1024 = 2,097,152 bytes.
        assert_eq!(parse_rss("Name:\tfaultline\nVmRSS:\t    2048 kB\n"), Some(2_097_152.0));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n";
        assert_eq!(parse_max_fds(limits), Some(1024.0));
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"),
            Some(1.7e9)
        );
    }

    #[test]
    fn format_writes_help_and_type_and_skips_unknowns() {
        let text = format(&ProcessSample {
            cpu_seconds: Some(1.5),
            open_fds: Some(7.0),
            ..Default::default()
        });
        assert!(text.contains("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n"));
        assert!(text.contains("# HELP process_open_fds "));
        assert!(text.contains("process_open_fds 7\n"));
        assert!(!text.contains("process_max_fds"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_sampled() {
        let s = sample();
        assert!(s.resident_bytes.unwrap() > 0.0);
        assert!(s.open_fds.unwrap() >= 3.0);
        // Started after 2020-01-01 and not in the future.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = s.start_time_seconds.unwrap();
        assert!(start > 1.577e9 && start <= now + 1.0, "{start}");
    }
}
