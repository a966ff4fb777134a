//! Slurm's accounting output read as Faultline records: `sacct --parsable2 --noheader
//! --allocations` lines become jobs, `sacctmgr -P -n show event` lines become node drains and
//! returns. Pure: the sync command runs the programs and sends what this returns.
//!
//! Times are read as UTC: the sync command runs both programs with `TZ=UTC` (they print local
//! time without an offset).

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDateTime, Utc};

/// Every `--format` field the sync asks `sacct` for, in order: releases from 23.02 also know the
/// last two (`Restarts`, `FailedNode`).
const SACCT_ALL_FIELDS: [&str; 11] = [
    "JobIDRaw",
    "JobName",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "NodeList",
    "AllocTRES",
    "Start",
    "End",
    "Restarts",
    "FailedNode",
];
/// The fields of every release.
pub const SACCT_FIELDS: &[&str] = SACCT_ALL_FIELDS.split_at(9).0;
/// The fields of releases from 23.02, tried first.
pub const SACCT_FIELDS_NEWER: &[&str] = &SACCT_ALL_FIELDS;

/// The `format=` fields of `sacctmgr show event`.
pub const EVENT_FIELDS: &[&str] = &["NodeName", "TimeStart", "TimeEnd", "State", "Reason", "User"];

/// The most hosts one hostlist may expand to (a job's node list is bounded the same way).
pub const MAX_HOSTS: usize = 100_000;

/// Expands Slurm's hostlist syntax: `gpu-[0400-0431,0500]`, `a[1-2]-b[1-3]`, `n1,n[3-4]`.
/// Ranges keep the zero padding of their start (`[08-10]` gives 08, 09, 10).
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, String> {
    let list = list.trim();
    if list.is_empty() || list == "None assigned" || list == "(null)" {
        return Ok(Vec::new());
    }
    let mut hosts = Vec::new();
    for item in split_top_level(list)? {
        let mut expanded = vec![String::new()];
        let mut rest = item;
        while !rest.is_empty() {
            let (text, bracket) = match rest.find('[') {
                Some(open) => {
                    let close = rest[open..]
                        .find(']')
                        .map(|c| open + c)
                        .ok_or_else(|| format!("unclosed '[' in '{item}'"))?;
                    (&rest[..open], Some(&rest[open + 1..close]))
                }
                None => (rest, None),
            };
            for h in &mut expanded {
                h.push_str(text);
            }
            rest = &rest[text.len()..];
            if let Some(ranges) = bracket {
                let values = expand_ranges(ranges).map_err(|e| format!("{e} in '{item}'"))?;
                if expanded.len().saturating_mul(values.len()) + hosts.len() > MAX_HOSTS {
                    return Err(format!("'{list}' names more than {MAX_HOSTS} hosts"));
                }
                expanded = expanded
                    .iter()
                    .flat_map(|h| values.iter().map(move |v| format!("{h}{v}")))
                    .collect();
                rest = &rest[ranges.len() + 2..];
            }
        }
        if expanded.iter().any(String::is_empty) {
            return Err(format!("an empty host name in '{list}'"));
        }
        hosts.extend(expanded);
    }
    Ok(hosts)
}

/// Splits on the commas outside brackets.
fn split_top_level(list: &str) -> Result<Vec<&str>, String> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("unbalanced brackets in '{list}'"));
        }
    }
    if depth != 0 {
        return Err(format!("unclosed '[' in '{list}'"));
    }
    out.push(&list[start..]);
    Ok(out.into_iter().map(str::trim).filter(|s| !s.is_empty()).collect())
}

/// `0400-0431,0500` -> the numbers as text, padded like their range's start.
fn expand_ranges(ranges: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for r in ranges.split(',') {
        let r = r.trim();
        let (lo, hi) = r.split_once('-').unwrap_or((r, r));
        let width = lo.len();
        let parse = |s: &str| s.parse::<u64>().map_err(|_| format!("'{s}' is not a number"));
        let (a, b) = (parse(lo)?, parse(hi)?);
        if b < a {
            return Err(format!("range '{r}' runs backwards"));
        }
        if b - a >= MAX_HOSTS as u64 || out.len() + (b - a) as usize >= MAX_HOSTS {
            return Err(format!("range '{r}' is longer than {MAX_HOSTS}"));
        }
        out.extend((a..=b).map(|n| format!("{n:0width$}")));
    }
    Ok(out)
}

/// A job's final (or current) state as Faultline keeps it, from Slurm's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    Completed,
    Failed,
    Cancelled,
    Running,
    /// Not started, or a record that says nothing final (PENDING, REQUEUED, RESIZING).
    NotRun,
}

/// Slurm's job state (`CANCELLED by 1000` reads as CANCELLED) in Faultline's terms: the job
/// ended by itself or by the system against its will (failed: FAILED, TIMEOUT, NODE_FAIL,
/// OUT_OF_MEMORY, BOOT_FAIL, DEADLINE), by a person or the scheduler's policy (cancelled:
/// CANCELLED, PREEMPTED, REVOKED), or not yet.
pub fn job_outcome(state: &str) -> (String, JobOutcome) {
    let base = state.split_whitespace().next().unwrap_or("").trim_end_matches('+');
    let outcome = match base {
        "COMPLETED" => JobOutcome::Completed,
        "FAILED" | "TIMEOUT" | "NODE_FAIL" | "OUT_OF_MEMORY" | "BOOT_FAIL" | "DEADLINE" => JobOutcome::Failed,
        "CANCELLED" | "PREEMPTED" | "REVOKED" => JobOutcome::Cancelled,
        "RUNNING" | "SUSPENDED" | "COMPLETING" | "STOPPED" | "SIGNALING" | "STAGE_OUT" => JobOutcome::Running,
        _ => JobOutcome::NotRun,
    };
    (base.to_string(), outcome)
}

/// `exit:signal` (`0:0`, `3:0`, `0:9`).
pub fn exit_code(s: &str) -> Option<(i32, i32)> {
    let (code, signal) = s.trim().split_once(':')?;
    Some((code.parse().ok()?, signal.parse().ok()?))
}

/// GPUs in an `AllocTRES` list: `gres/gpu=N`, else the sum of the typed `gres/gpu:h100=N`.
pub fn tres_gpus(tres: &str) -> i32 {
    let mut plain = None;
    let mut typed = 0i64;
    for item in tres.split(',') {
        let Some((key, value)) = item.trim().split_once('=') else {
            continue;
        };
        let Ok(n) = value.trim().parse::<i64>() else { continue };
        if key == "gres/gpu" {
            plain = Some(n);
        } else if key.starts_with("gres/gpu:") {
            typed += n;
        }
    }
    plain.unwrap_or(typed).clamp(0, i64::from(i32::MAX)) as i32
}

/// A time as sacct prints it (`2026-12-02T10:15:00`, in UTC under `TZ=UTC`); `Unknown`, `None`
/// and empty are absent.
pub fn slurm_time(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S")
        .ok()
        .map(|t| t.and_utc())
}

/// One allocation (one run of a job) as sacct reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct SacctRecord {
    pub job_id: String,
    pub name: String,
    pub state: String,
    pub outcome: JobOutcome,
    pub exit: Option<(i32, i32)>,
    pub derived_exit: Option<(i32, i32)>,
    pub nodes: Vec<String>,
    pub gpus: i32,
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
    /// `Restarts`, where the release reports it.
    pub restarts: Option<i32>,
    /// `FailedNode`, where the release reports it.
    pub failed_node: Option<String>,
}

/// A line that could not be read, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

/// Reads sacct's `--parsable2 --noheader` output for `fields` (either format above).
pub fn parse_sacct(output: &str, fields: &[&str]) -> (Vec<SacctRecord>, Vec<LineError>) {
    let mut records = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in output.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_sacct_line(line, fields) {
            Ok(r) => records.push(r),
            Err(message) => errors.push(LineError { line: i + 1, message }),
        }
    }
    (records, errors)
}

fn parse_sacct_line(line: &str, fields: &[&str]) -> Result<SacctRecord, String> {
    let values: Vec<&str> = line.split('|').collect();
    if values.len() < fields.len() {
        return Err(format!("{} fields, expected {}", values.len(), fields.len()));
    }
    // A job name may itself hold '|': the fields after it are counted from the end.
    let extra = values.len() - fields.len();
    let name_at = fields.iter().position(|f| *f == "JobName");
    let get = |field: &str| -> &str {
        let Some(at) = fields.iter().position(|f| *f == field) else {
            return "";
        };
        match name_at {
            Some(n) if at > n => values[at + extra],
            _ => values[at],
        }
    };
    let name = match name_at {
        Some(n) => values[n..=n + extra].join("|"),
        None => String::new(),
    };
    let job_id = get("JobIDRaw").trim().to_string();
    if job_id.is_empty() {
        return Err("JobIDRaw is empty".into());
    }
    let (state, outcome) = job_outcome(get("State"));
    let nodes = expand_hostlist(get("NodeList")).map_err(|e| format!("NodeList: {e}"))?;
    Ok(SacctRecord {
        job_id,
        name,
        state,
        outcome,
        exit: exit_code(get("ExitCode")),
        derived_exit: exit_code(get("DerivedExitCode")),
        nodes,
        gpus: tres_gpus(get("AllocTRES")),
        start: slurm_time(get("Start")),
        end: slurm_time(get("End")),
        restarts: get("Restarts").trim().parse().ok(),
        failed_node: Some(get("FailedNode").trim())
            .filter(|s| !s.is_empty() && *s != "None" && *s != "(null)")
            .map(str::to_string),
    })
}

/// One run of a job: one allocation, from its start to its end (absent while it runs).
#[derive(Debug, Clone, PartialEq)]
pub struct JobRun {
    /// The run's Slurm state (`NODE_FAIL`, `REQUEUED`, `COMPLETED`...).
    pub state: String,
    pub nodes: Vec<String>,
    pub start: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
}

/// A job made of its runs: a requeued job is one job whose earlier runs ended (NODE_FAIL,
/// PREEMPTED, REQUEUED) before its last; `--duplicates` lists each run.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmJob {
    pub job_id: String,
    pub name: String,
    /// The latest record's Slurm state (`PENDING` for a job requeued and waiting to run again).
    pub state: String,
    pub outcome: JobOutcome,
    pub exit: Option<(i32, i32)>,
    pub derived_exit: Option<(i32, i32)>,
    /// Every node any run used.
    pub nodes: Vec<String>,
    pub gpus: i32,
    /// The first run's start, the last run's end.
    pub start: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
    /// Runs before the last (or what the release reports, when more).
    pub restarts: i32,
    pub failed_node: Option<String>,
    /// Every run, in start order.
    pub runs: Vec<JobRun>,
}

/// Gathers runs by job id (in start order); jobs that never started are left out. A record that
/// has not started after a job's runs (the job requeued and pending, held by its BeginTime) is
/// the job's latest state: the job is between runs, running as far as its failures go, until a
/// later record ends it (a pending job cancelled ends there).
pub fn jobs_of(records: Vec<SacctRecord>) -> Vec<SlurmJob> {
    let mut runs: BTreeMap<String, (Vec<SacctRecord>, Option<SacctRecord>)> = BTreeMap::new();
    for r in records {
        let entry = runs.entry(r.job_id.clone()).or_default();
        if r.start.is_some() {
            entry.0.push(r);
        } else {
            // Only a job's latest record can be waiting to start.
            entry.1 = Some(r);
        }
    }
    runs.into_values()
        .filter_map(|(mut runs, waiting)| {
            runs.sort_by_key(|r| r.start);
            let first_start = runs.first()?.start?;
            let last_run = runs.last()?.clone();
            let mut nodes: Vec<String> = Vec::new();
            for r in &runs {
                for n in &r.nodes {
                    if !nodes.contains(n) {
                        nodes.push(n.clone());
                    }
                }
            }
            // A record waiting after the runs is a requeue as well.
            let restarts = (runs.len() as i32 - 1 + i32::from(waiting.is_some())).max(last_run.restarts.unwrap_or(0));
            let failed_node = runs.iter().rev().find_map(|r| r.failed_node.clone());
            let (state, outcome, end) = match &waiting {
                Some(w) => match w.outcome {
                    JobOutcome::NotRun | JobOutcome::Running => (w.state.clone(), JobOutcome::Running, None),
                    o => (w.state.clone(), o, w.end.or(last_run.end).or(last_run.start)),
                },
                None => match last_run.outcome {
                    // A last record that says nothing final: the job is between runs.
                    JobOutcome::NotRun | JobOutcome::Running => (last_run.state.clone(), JobOutcome::Running, None),
                    o => (last_run.state.clone(), o, last_run.end.or(last_run.start)),
                },
            };
            let job_runs = runs
                .iter()
                .filter_map(|r| {
                    Some(JobRun {
                        state: r.state.clone(),
                        nodes: r.nodes.clone(),
                        start: r.start?,
                        end: r.end,
                    })
                })
                .collect();
            Some(SlurmJob {
                job_id: last_run.job_id,
                name: last_run.name,
                state,
                outcome,
                exit: last_run.exit,
                derived_exit: last_run.derived_exit,
                gpus: runs.iter().map(|r| r.gpus).max().unwrap_or(0),
                nodes,
                start: first_start,
                end: end.map(|e| e.max(first_start)),
                restarts,
                failed_node,
                runs: job_runs,
            })
        })
        .collect()
}

/// A node event: the node out of service from `start` to `end` (absent while it lasts).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeEvent {
    pub node: String,
    pub start: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
    pub state: String,
    pub reason: Option<String>,
    pub user: Option<String>,
}

/// Reads `sacctmgr -P -n show event format=NodeName,TimeStart,TimeEnd,State,Reason,User`.
/// Cluster events (no node name) are left out; a node list names each node.
pub fn parse_events(output: &str) -> (Vec<NodeEvent>, Vec<LineError>) {
    let mut events = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in output.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Vec<&str> = line.split('|').collect();
        if v.len() < EVENT_FIELDS.len() {
            errors.push(LineError {
                line: i + 1,
                message: format!("{} fields, expected {}", v.len(), EVENT_FIELDS.len()),
            });
            continue;
        }
        // The reason may hold '|': it is everything between State and User.
        let (node_list, start, end, state) = (v[0], v[1], v[2], v[3]);
        let reason = v[4..v.len() - 1].join("|");
        let user = v[v.len() - 1];
        if node_list.trim().is_empty() {
            continue;
        }
        let Some(start) = slurm_time(start) else {
            errors.push(LineError {
                line: i + 1,
                message: format!("TimeStart '{start}' is not a time"),
            });
            continue;
        };
        let nodes = match expand_hostlist(node_list) {
            Ok(n) => n,
            Err(e) => {
                errors.push(LineError {
                    line: i + 1,
                    message: format!("NodeName: {e}"),
                });
                continue;
            }
        };
        let text = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty() && s != "(null)");
        for node in nodes {
            events.push(NodeEvent {
                node,
                start,
                end: slurm_time(end),
                state: state.trim().to_string(),
                reason: text(&reason),
                user: text(user).map(|u| u.split('(').next().unwrap_or(&u).trim().to_string()),
            });
        }
    }
    (events, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostlists_expand_with_their_padding() {
        assert_eq!(
            expand_hostlist("gpu-[0400-0402,0500]").unwrap(),
            ["gpu-0400", "gpu-0401", "gpu-0402", "gpu-0500"]
        );
        assert_eq!(expand_hostlist("n1,n[3-4],x").unwrap(), ["n1", "n3", "n4", "x"]);
        assert_eq!(
            expand_hostlist("r[1-2]-g[08-09]").unwrap(),
            ["r1-g08", "r1-g09", "r2-g08", "r2-g09"]
        );
        assert_eq!(expand_hostlist("node[9-11]").unwrap(), ["node9", "node10", "node11"]);
        assert!(expand_hostlist("None assigned").unwrap().is_empty());
        assert!(expand_hostlist("gpu-[1-").is_err());
        assert!(expand_hostlist("gpu-[5-1]").is_err());
        assert!(expand_hostlist("gpu-[a-b]").is_err());
        assert!(expand_hostlist("g[0-99999]x[0-9]").is_err());
    }

    #[test]
    fn states_exit_codes_and_gpus_read_as_slurm_writes_them() {
        assert_eq!(
            job_outcome("CANCELLED by 1000"),
            ("CANCELLED".into(), JobOutcome::Cancelled)
        );
        assert_eq!(job_outcome("NODE_FAIL").1, JobOutcome::Failed);
        assert_eq!(job_outcome("TIMEOUT").1, JobOutcome::Failed);
        assert_eq!(job_outcome("OUT_OF_MEMORY").1, JobOutcome::Failed);
        assert_eq!(job_outcome("PREEMPTED").1, JobOutcome::Cancelled);
        assert_eq!(job_outcome("REQUEUED").1, JobOutcome::NotRun);
        assert_eq!(job_outcome("RUNNING").1, JobOutcome::Running);
        assert_eq!(exit_code("3:0"), Some((3, 0)));
        assert_eq!(exit_code("0:15"), Some((0, 15)));
        assert_eq!(exit_code(""), None);
        assert_eq!(tres_gpus("billing=2,cpu=2,gres/gpu=2,mem=1G,node=1"), 2);
        assert_eq!(tres_gpus("cpu=8,gres/gpu:h100=4,gres/gpu:a100=2,node=1"), 6);
        assert_eq!(tres_gpus("cpu=8,gres/gpu=8,gres/gpu:h100=8"), 8);
        assert_eq!(tres_gpus("cpu=1,node=1"), 0);
    }

    #[test]
    fn runs_of_a_requeued_job_are_one_job_with_its_restarts() {
        let out = "\
101|train|NODE_FAIL|0:0|0:0|gpu-[0001-0002]|cpu=2,gres/gpu=8,node=2|2026-12-01T10:00:00|2026-12-01T11:00:00
101|train|COMPLETED|0:0|0:0|gpu-[0003-0004]|cpu=2,gres/gpu=8,node=2|2026-12-01T11:05:00|2026-12-01T15:00:00
102|a|b|FAILED|3:0|0:0|gpu-0001|cpu=1,gres/gpu=1,node=1|2026-12-01T09:00:00|2026-12-01T09:10:00
103|queued|PENDING|0:0|0:0|None assigned|cpu=1|Unknown|Unknown
104|run|RUNNING|0:0|0:0|gpu-0009|cpu=1,gres/gpu=2|2026-12-01T12:00:00|Unknown
bad line
";
        let (records, errors) = parse_sacct(out, SACCT_FIELDS);
        assert_eq!(
            errors,
            [LineError {
                line: 6,
                message: "1 fields, expected 9".into()
            }]
        );
        let jobs = jobs_of(records);
        assert_eq!(jobs.len(), 3);
        let j = &jobs[0];
        assert_eq!(
            (j.job_id.as_str(), j.state.as_str(), j.restarts, j.gpus),
            ("101", "COMPLETED", 1, 8)
        );
        assert_eq!(j.nodes, ["gpu-0001", "gpu-0002", "gpu-0003", "gpu-0004"]);
        assert_eq!(j.start.to_rfc3339(), "2026-12-01T10:00:00+00:00");
        assert_eq!(j.end.unwrap().to_rfc3339(), "2026-12-01T15:00:00+00:00");
        // A name holding the separator keeps it.
        assert_eq!(
            (jobs[1].name.as_str(), jobs[1].exit, jobs[1].outcome),
            ("a|b", Some((3, 0)), JobOutcome::Failed)
        );
        assert_eq!((jobs[2].outcome, jobs[2].end), (JobOutcome::Running, None));
    }

    #[test]
    fn newer_releases_report_restarts_and_the_failed_node() {
        let out = "77|x|NODE_FAIL|0:0|0:0|gpu-0001|gres/gpu=4|2026-12-01T10:00:00|2026-12-01T10:30:00|2|gpu-0001\n";
        let jobs = jobs_of(parse_sacct(out, SACCT_FIELDS_NEWER).0);
        assert_eq!(
            (jobs[0].restarts, jobs[0].failed_node.as_deref()),
            (2, Some("gpu-0001"))
        );
    }

    #[test]
    fn node_events_name_each_node_and_keep_their_reason() {
        let out = "\
|2026-12-01T00:00:00|Unknown|||root(0)
gpu-[0001-0002]|2026-12-01T10:00:00|2026-12-01T12:00:00|DOWN|Xid 79 on gpu 3|root(0)
gpu-0003|2026-12-01T13:00:00|Unknown|DRAIN|NHC: check_gpu: GPU 2 a|b|slurm(64030)
gpu-0004|yesterday|Unknown|DRAIN|x|root(0)
";
        let (events, errors) = parse_events(out);
        assert_eq!(events.len(), 3);
        assert_eq!(
            (events[0].node.as_str(), events[1].node.as_str()),
            ("gpu-0001", "gpu-0002")
        );
        assert_eq!(events[0].end.unwrap().to_rfc3339(), "2026-12-01T12:00:00+00:00");
        assert_eq!(events[0].user.as_deref(), Some("root"));
        assert_eq!(
            (events[2].reason.as_deref(), events[2].end, events[2].state.as_str()),
            (Some("NHC: check_gpu: GPU 2 a|b"), None, "DRAIN")
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].line, 4);
    }
}
