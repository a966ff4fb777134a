//! `faultline slurm sync`: reads a Slurm cluster's accounting since the server's cursor and sends
//! it through the ingest API. Jobs come from `sacct` (one job per job id, its requeued runs
//! gathered), node drains and returns from `sacctmgr show event`, each drain's reason also as a
//! signal of its own, classified like any free text, so a drain explains itself. A NODE_FAIL run
//! is linked to the node going down that ended it: same node, running at that moment.
//!
//! A job is sent whole: sacct's window listing leaves out a requeued job's runs that ended before
//! the window (and Slurm 22.05 prints nothing on a job's last run that says it was requeued), and
//! `PUT /v1/jobs` replaces what it said. So every job the window lists is read again by id with
//! `sacct -j ID --duplicates` and no time bounds: every run it had, and a pending record after
//! them (requeued, held by its BeginTime), which makes it a job between runs, not a finished one.
//!
//! Nothing is lost or doubled: the cursor moves only after a window's records were stored, each
//! window reaches back `overlap` before it, and every record has an id derived from the cluster
//! and Slurm's own keys, so what is read again is a duplicate.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, SubsecRound, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::cli::SlurmSyncArgs;
use crate::devtools::client::Client;
use crate::domain::event::MAX_TEXT_LEN;
use crate::logparse::slurm::{
    EVENT_FIELDS, JobOutcome, JobRun, NodeEvent, SACCT_FIELDS, SACCT_FIELDS_NEWER, SlurmJob, expand_hostlist, jobs_of,
    parse_events, parse_sacct,
};

const NAMESPACE: Uuid = Uuid::from_u128(0x51c2_7e0a_9d44_4b1f_8a6e_2f93_c0d1_7b35);
pub const JOBS_SOURCE: &str = "slurm-jobs";
pub const EVENTS_SOURCE: &str = "slurm-events";
/// How long after its node went down a NODE_FAIL run may end and still be linked to it.
const NODE_FAIL_LINK_SECS: i64 = 60;
/// How far Slurm's own records of one moment disagree: slurmctld stamps a job's end and
/// slurmdbd a node event's start each from its own reading of the clock, whole seconds apart.
/// Measured on Slurm 22.05 (tests/api/slurm.rs, which asserts it): a NODE_FAIL run ends in the
/// same second its node's DOWN event starts; one second allows for the two stamps falling either
/// side of a second's boundary. A run that ended more than this before the DOWN began had already
/// ended: it is not linked.
pub const SLURM_RECORD_SKEW_SECS: i64 = 1;
/// Job ids per `sacct -j` call (a command line stays far below the system's limit).
const IDS_PER_SACCT: usize = 500;

/// What one pass read and sent.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassSummary {
    pub jobs: usize,
    /// Jobs left out because Slurm allocated them no GPU.
    pub jobs_without_gpus: usize,
    pub node_events: usize,
    pub signals: usize,
    pub rejected: u64,
    /// Output lines sacct or sacctmgr printed that could not be read (each reported).
    pub unreadable_lines: usize,
}

/// Runs one pass, or passes every `follow` seconds until stopped.
pub async fn run(args: SlurmSyncArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.server, &args.token, args.ca_file.as_deref())?;
    let mut fields: Option<&'static [&'static str]> = None;
    loop {
        match pass(&client, &args, &mut fields, Utc::now()).await {
            Ok(s) => eprintln!(
                "slurm sync {}: {} jobs ({} without GPUs left out), {} node events, {} signals; {} rejected, {} unreadable lines",
                args.cluster, s.jobs, s.jobs_without_gpus, s.node_events, s.signals, s.rejected, s.unreadable_lines
            ),
            Err(e) if args.follow.is_some() => eprintln!("slurm sync {}: this pass failed: {e:#}", args.cluster),
            Err(e) => return Err(e),
        }
        let Some(every) = args.follow else { return Ok(()) };
        tokio::time::sleep(Duration::from_secs(every.max(1))).await;
    }
}

/// One window: reads the cursors, runs both programs up to `now`, sends, moves the cursors.
pub async fn pass(
    client: &Client,
    args: &SlurmSyncArgs,
    fields: &mut Option<&'static [&'static str]>,
    now: DateTime<Utc>,
) -> anyhow::Result<PassSummary> {
    let now = now.trunc_subsecs(0);
    let overlap = chrono::Duration::seconds(args.overlap_secs.min(86_400 * 30) as i64);
    let first = args.since.unwrap_or(now - chrono::Duration::days(7));
    let jobs_from = cursor(client, &args.cluster, JOBS_SOURCE)
        .await?
        .map_or(first, |c| c - overlap);
    let events_from = cursor(client, &args.cluster, EVENTS_SOURCE)
        .await?
        .map_or(first, |c| c - overlap);
    let mut summary = PassSummary::default();

    let (output, used) = sacct(args, *fields, Window::Between(jobs_from, now)).await?;
    *fields = Some(used);
    let (listed, errors) = parse_sacct(&output, used);
    for e in &errors {
        eprintln!("sacct line {}: {}", e.line, e.message);
    }
    summary.unreadable_lines += errors.len();
    // Every listed job again, whole (see the module's comment).
    let mut ids: Vec<String> = listed.iter().map(|r| r.job_id.clone()).collect();
    ids.sort();
    ids.dedup();
    let mut records = Vec::new();
    for chunk in ids.chunks(IDS_PER_SACCT) {
        let (output, _) = sacct(args, Some(used), Window::Jobs(chunk)).await?;
        let (whole, errors) = parse_sacct(&output, used);
        for e in &errors {
            eprintln!("sacct -j line {}: {}", e.line, e.message);
        }
        summary.unreadable_lines += errors.len();
        records.extend(whole);
    }
    // A job the second read did not return (purged meanwhile) keeps what the window listed.
    let reread: std::collections::HashSet<String> = records.iter().map(|r| r.job_id.clone()).collect();
    records.extend(listed.into_iter().filter(|r| !reread.contains(&r.job_id)));
    let jobs = jobs_of(records);

    let output = sacctmgr_events(args, events_from, now).await?;
    let (events, errors) = parse_events(&output);
    for e in &errors {
        eprintln!("sacctmgr line {}: {}", e.line, e.message);
    }
    summary.unreadable_lines += errors.len();

    let (with_gpus, without): (Vec<&SlurmJob>, Vec<&SlurmJob>) = jobs.iter().partition(|j| j.gpus > 0);
    summary.jobs_without_gpus = without.len();
    let job_bodies: Vec<Value> = with_gpus.iter().map(|j| job_body(&args.cluster, j)).collect();
    summary.jobs = job_bodies.len();
    if !job_bodies.is_empty() {
        let sent = client.put_jobs(&job_bodies, args.batch).await?;
        summary.rejected += sent.rejected;
    }
    let signals = node_event_signals(&args.cluster, &events, &jobs);
    summary.node_events = events.len();
    summary.signals = signals.len();
    if !signals.is_empty() {
        let sent = client.post_events(&signals, args.batch, 1, false).await?;
        summary.rejected += sent.rejected;
    }
    // Only now, with the window's records stored, do the cursors move.
    advance(client, &args.cluster, JOBS_SOURCE, now).await?;
    advance(client, &args.cluster, EVENTS_SOURCE, now).await?;
    Ok(summary)
}

fn cursor_path(cluster: &str, source: &str) -> String {
    format!(
        "/v1/sync-cursors/{}/{source}",
        crate::devtools::client::urlencoding_path(cluster)
    )
}

async fn cursor(client: &Client, cluster: &str, source: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
    let (answer, _) = client
        .send_json(reqwest::Method::GET, &cursor_path(cluster, source), None)
        .await?;
    Ok(answer["position"]
        .as_str()
        .and_then(|p| DateTime::parse_from_rfc3339(p).ok())
        .map(|p| p.with_timezone(&Utc)))
}

async fn advance(client: &Client, cluster: &str, source: &str, to: DateTime<Utc>) -> anyhow::Result<()> {
    client
        .send_json(
            reqwest::Method::PUT,
            &cursor_path(cluster, source),
            Some(&json!({ "position": to })),
        )
        .await?;
    Ok(())
}

fn slurm_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S").to_string()
}

/// Runs a Slurm program in UTC with ISO times, failing with its own words.
async fn run_program(program: &Path, args: &[String]) -> anyhow::Result<Result<String, String>> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .env("TZ", "UTC")
        .env("SLURM_TIME_FORMAT", "standard")
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("running {}", program.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(Ok(stdout))
    } else {
        Ok(Err(format!(
            "{} {}: {}",
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// What sacct lists: the jobs of a window, or the given jobs whole (every record, no time bounds).
enum Window<'a> {
    Between(DateTime<Utc>, DateTime<Utc>),
    Jobs(&'a [String]),
}

/// sacct over [from, to) or of some jobs: the newer format first (`Restarts`, `FailedNode`), else
/// the one every release knows. Returns the output and the fields it has.
async fn sacct(
    args: &SlurmSyncArgs,
    known: Option<&'static [&'static str]>,
    window: Window<'_>,
) -> anyhow::Result<(String, &'static [&'static str])> {
    let tries: &[&'static [&'static str]] = match known {
        Some(f) => &[f][..],
        None => &[SACCT_FIELDS_NEWER, SACCT_FIELDS][..],
    };
    let mut last = String::new();
    for fields in tries {
        let mut argv: Vec<String> = [
            "--parsable2",
            "--noheader",
            "--allocations",
            "--duplicates",
            "--allusers",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        match &window {
            Window::Between(from, to) => argv.extend([
                "--starttime".into(),
                slurm_time(*from),
                "--endtime".into(),
                slurm_time(*to),
            ]),
            // With --jobs and no --starttime sacct reads from the epoch: every record of them.
            Window::Jobs(ids) => argv.extend(["--jobs".into(), ids.join(",")]),
        }
        argv.push(format!("--format={}", fields.join(",")));
        if let Some(c) = &args.slurm_cluster {
            argv.extend(["--clusters".into(), c.clone()]);
        }
        match run_program(&args.sacct, &argv).await? {
            Ok(out) => return Ok((out, fields)),
            Err(e) => last = e,
        }
    }
    bail!("{last}")
}

async fn sacctmgr_events(args: &SlurmSyncArgs, from: DateTime<Utc>, to: DateTime<Utc>) -> anyhow::Result<String> {
    let mut argv: Vec<String> = ["-P", "-n", "show", "event"].iter().map(|s| s.to_string()).collect();
    argv.extend([format!("Start={}", slurm_time(from)), format!("End={}", slurm_time(to))]);
    if let Some(c) = &args.slurm_cluster {
        argv.push(format!("Clusters={c}"));
    }
    argv.push(format!("format={}", EVENT_FIELDS.join(",")));
    run_program(&args.sacctmgr, &argv).await?.map_err(anyhow::Error::msg)
}

/// Printable text of at most the API's length, or nothing.
fn text(s: &str) -> Option<String> {
    let t: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_TEXT_LEN)
        .collect();
    Some(t.trim().to_string()).filter(|t| !t.is_empty())
}

/// The `PUT /v1/jobs` item of a job.
pub fn job_body(cluster: &str, j: &SlurmJob) -> Value {
    let state = match j.outcome {
        JobOutcome::Completed => "completed",
        JobOutcome::Failed => "failed",
        JobOutcome::Cancelled => "cancelled",
        JobOutcome::Running | JobOutcome::NotRun => "running",
    };
    let code = |v: Option<(i32, i32)>, signal: bool| {
        v.map(|(c, s)| if signal { s } else { c })
            .filter(|v| (0..=255).contains(v))
    };
    json!({
        "id": j.job_id,
        "cluster": cluster,
        "gpus": j.gpus,
        "nodes": j.nodes,
        "start": j.start,
        "end": if state == "running" { None } else { j.end },
        "state": state,
        "name": text(&j.name),
        "scheduler_state": text(&j.state),
        "exit_code": code(j.exit, false),
        "exit_signal": code(j.exit, true),
        "derived_exit_code": code(j.derived_exit, false),
        "restarts": j.restarts,
    })
}

/// Slurm's own reasons for a node it took down, by the kind of signal they are.
fn reason_kind(reason: &str) -> &'static str {
    let r = reason.to_ascii_lowercase();
    if r.starts_with("not responding") || r.contains("unexpectedly rebooted") {
        "node_unreachable"
    } else {
        "health_check"
    }
}

/// Each node event as signals: `node_drain` at its start, `node_resume` at its end, and its reason
/// as a signal of its own (linked to the NODE_FAIL job it ended, if one did).
pub fn node_event_signals(cluster: &str, events: &[NodeEvent], jobs: &[SlurmJob]) -> Vec<Value> {
    // NODE_FAIL runs by node, to link a node event to the job it ended.
    let mut node_failed: BTreeMap<&str, Vec<(&SlurmJob, &JobRun)>> = BTreeMap::new();
    for j in jobs {
        let failed: Option<Vec<String>> = j.failed_node.as_deref().map(|n| expand_hostlist(n).unwrap_or_default());
        for run in j.runs.iter().filter(|r| r.state == "NODE_FAIL") {
            for node in &run.nodes {
                if failed.as_ref().is_none_or(|f| f.contains(node)) {
                    node_failed.entry(node.as_str()).or_default().push((j, run));
                }
            }
        }
    }
    let mut out = Vec::new();
    for e in events {
        let key = format!("{cluster}\n{}\n{}", e.node, e.start.to_rfc3339());
        let id = |what: &str| Uuid::new_v5(&NAMESPACE, format!("{key}\n{what}").as_bytes());
        let mut attributes = json!({"source": "slurm", "slurm_state": e.state});
        if let Some(u) = &e.user {
            attributes["slurm_user"] = json!(u);
        }
        out.push(json!({
            "id": id("drain"), "occurred_at": e.start, "cluster": cluster, "node": e.node,
            "kind": "node_drain", "message": e.reason.as_deref().and_then(text), "attributes": attributes,
        }));
        if let Some(end) = e.end {
            out.push(json!({
                "id": id("resume"), "occurred_at": end, "cluster": cluster, "node": e.node,
                "kind": "node_resume", "attributes": attributes,
            }));
        }
        if let Some(reason) = e.reason.as_deref().and_then(text) {
            // Only a node going down ends its jobs NODE_FAIL; a drain lets them finish.
            let down = e.state.to_ascii_uppercase().contains("DOWN");
            let ended = node_failed.get(e.node.as_str()).filter(|_| down).and_then(|runs| {
                runs.iter()
                    .filter_map(|(j, run)| Some((*j, (run.end? - e.start).num_seconds(), run.start)))
                    // Running when the node went down: started by then, ended then or within the
                    // link window after (not before, beyond Slurm's skew of its own records).
                    .filter(|(_, after, start)| {
                        (-SLURM_RECORD_SKEW_SECS..=NODE_FAIL_LINK_SECS).contains(after)
                            && (*start - e.start).num_seconds() <= SLURM_RECORD_SKEW_SECS
                    })
                    .min_by_key(|(_, after, _)| after.abs())
                    .map(|(j, _, _)| j)
            });
            let mut signal = json!({
                "id": id("reason"), "occurred_at": e.start, "cluster": cluster, "node": e.node,
                "kind": reason_kind(&reason), "message": reason, "attributes": attributes,
            });
            if let Some(j) = ended {
                signal["job_id"] = json!(j.job_id);
                signal["job_gpus"] = json!(j.gpus);
            }
            out.push(signal);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logparse::slurm::{SACCT_FIELDS, parse_sacct};

    #[test]
    fn a_node_fail_job_is_linked_to_the_event_that_ended_it() {
        let jobs = jobs_of(
            parse_sacct(
                "\
7|train|NODE_FAIL|0:0|0:0|gpu-[0001-0002]|gres/gpu=8|2026-12-01T10:00:00|2026-12-01T11:00:01
8|eval|COMPLETED|0:0|0:0|gpu-0003|gres/gpu=1|2026-12-01T10:00:00|2026-12-01T10:30:00
",
                SACCT_FIELDS,
            )
            .0,
        );
        let events = parse_events(
            "gpu-0002|2026-12-01T11:00:00|2026-12-01T12:00:00|DOWN|Xid 79 on gpu 3|root(0)\n\
             gpu-0003|2026-12-01T11:00:00|Unknown|DRAIN|Not responding|slurm(64030)\n\
             gpu-0002|2026-12-01T11:00:30|Unknown|DRAIN|NHC: check_gpu: ECC|root(0)\n",
        )
        .0;
        let signals = node_event_signals("c1", &events, &jobs);
        let kinds: Vec<&str> = signals.iter().map(|s| s["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "node_drain",
                "node_resume",
                "health_check",
                "node_drain",
                "node_unreachable",
                "node_drain",
                "health_check"
            ]
        );
        assert_eq!(signals[2]["job_id"], "7");
        assert_eq!(signals[2]["job_gpus"], 8);
        assert_eq!(signals[2]["message"], "Xid 79 on gpu 3");
        assert!(signals[4].get("job_id").is_none());
        // A drain half a minute later lets the node's jobs finish: it ended none.
        assert!(signals[6].get("job_id").is_none());
        // Ids are the event's: read again, the same signals.
        assert_eq!(node_event_signals("c1", &events, &jobs), signals);
        assert_ne!(signals[0]["id"], node_event_signals("c2", &events, &jobs)[0]["id"]);

        let body = job_body("c1", &jobs[0]);
        assert_eq!(
            (
                body["state"].as_str(),
                body["scheduler_state"].as_str(),
                body["exit_code"].as_i64()
            ),
            (Some("failed"), Some("NODE_FAIL"), Some(0))
        );
        assert_eq!(body["nodes"], json!(["gpu-0001", "gpu-0002"]));
        assert_eq!(body["end"], "2026-12-01T11:00:01Z");
    }

    #[test]
    fn a_node_going_down_is_linked_only_to_a_run_it_ended() {
        // Job 9 ended NODE_FAIL on gpu-0004 half a minute before the node went down (another
        // cause); job 10 ran on gpu-0005 when it went down, was requeued, and waits (PENDING).
        let jobs = jobs_of(
            parse_sacct(
                "\
9|a|NODE_FAIL|0:0|0:0|gpu-0004|gres/gpu=8|2026-12-01T10:00:00|2026-12-01T10:59:30
10|b|NODE_FAIL|0:0|0:0|gpu-0005|gres/gpu=8|2026-12-01T10:00:00|2026-12-01T11:00:00
10|b|PENDING|0:0|0:0|None assigned||Unknown|Unknown
",
                SACCT_FIELDS,
            )
            .0,
        );
        let events = parse_events(
            "gpu-0004|2026-12-01T11:00:00|Unknown|DOWN|Xid 79|root(0)\n\
             gpu-0005|2026-12-01T11:00:01|Unknown|DOWN|Xid 79|root(0)\n",
        )
        .0;
        let signals = node_event_signals("c1", &events, &jobs);
        let reasons: Vec<&Value> = signals.iter().filter(|s| s["kind"] == "health_check").collect();
        assert!(reasons[0].get("job_id").is_none(), "job 9 had ended: {:?}", reasons[0]);
        // Job 10's run ended a second before its node's DOWN began: within Slurm's skew.
        assert_eq!(reasons[1]["job_id"], "10");
        // Requeued and pending: between runs, not a finished failure.
        let held = jobs.iter().find(|j| j.job_id == "10").unwrap();
        let body = job_body("c1", held);
        assert_eq!(
            (body["state"].as_str(), body["scheduler_state"].as_str(), &body["end"]),
            (Some("running"), Some("PENDING"), &Value::Null)
        );
        assert_eq!(body["start"], "2026-12-01T10:00:00Z");
        assert_eq!(body["restarts"], 1);
    }
}
