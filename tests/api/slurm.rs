//! A real Slurm 22.05 (see [`crate::slurm_harness`]): the records `faultline slurm sync` reads, as
//! `sacct` and `sacctmgr` print them.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::slurm_harness::{DOWN_REASON, DRAIN_REASON, NODES, Scenario, SlurmCluster, run_scenario};

/// Starts the cluster and runs the scenario off the async runtime; a panic in there (with the
/// daemons' logs) is the test's.
pub async fn cluster_with_scenario(name: &str) -> (SlurmCluster, Scenario) {
    let name = name.to_string();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let cluster = SlurmCluster::start(&name);
        eprintln!("slurm: started in {:.1?}", started.elapsed());
        let started = Instant::now();
        let scenario = run_scenario(&cluster);
        eprintln!("slurm: scenario ran in {:.1?}", started.elapsed());
        (cluster, scenario)
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// `sacct --parsable2` lines by JobIDRaw, the fields in the order of `--format`.
fn by_job(sacct: &str) -> BTreeMap<u32, Vec<Vec<&str>>> {
    let mut jobs: BTreeMap<u32, Vec<Vec<&str>>> = BTreeMap::new();
    for line in sacct.lines() {
        let fields: Vec<&str> = line.split('|').collect();
        assert_eq!(fields.len(), 9, "a sacct line of 9 fields: {line:?}");
        jobs.entry(fields[0].parse().unwrap()).or_default().push(fields);
    }
    jobs
}

#[tokio::test]
async fn a_real_slurm_records_jobs_and_node_events() {
    let (cluster, scenario) = cluster_with_scenario("faultline-test").await;
    let sacct = cluster.sacct_raw();
    let events = cluster.events_raw();
    eprintln!("sacct:\n{sacct}\nsacctmgr show event:\n{events}");
    let context = format!("{scenario:#?}\nsacct:\n{sacct}\nevents:\n{events}");

    // JobIDRaw|JobName|State|ExitCode|DerivedExitCode|NodeList|AllocTRES|Start|End
    let jobs = by_job(&sacct);
    let only = |job: u32| {
        let records = jobs
            .get(&job)
            .unwrap_or_else(|| panic!("job {job} not in sacct\n{context}"));
        assert_eq!(records.len(), 1, "one record of job {job} (none requeued)\n{context}");
        records[0].clone()
    };
    let [healthy, failing] = NODES;
    let completed = only(scenario.completed);
    assert_eq!(
        completed[1..6],
        ["train-ok", "COMPLETED", "0:0", "0:0", healthy],
        "{context}"
    );
    assert!(completed[6].split(',').any(|t| t == "gres/gpu=2"), "{context}");
    let failed = only(scenario.failed);
    assert_eq!(
        failed[1..6],
        ["train-fails", "FAILED", "3:0", "0:0", healthy],
        "{context}"
    );
    assert!(!failed[6].contains("gres/gpu"), "{context}");
    let timeout = only(scenario.timeout);
    assert_eq!(timeout[1..3], ["train-timeout", "TIMEOUT"], "{context}");
    assert_eq!(timeout[5], healthy, "{context}");
    let node_fail = only(scenario.node_fail);
    assert_eq!(
        node_fail[1..6],
        ["train-node-lost", "NODE_FAIL", "0:0", "0:0", failing],
        "{context}"
    );
    assert!(node_fail[6].split(',').any(|t| t == "gres/gpu=4"), "{context}");
    let during_drain = only(scenario.during_drain);
    assert_eq!(during_drain[1..3], ["eval-during-drain", "COMPLETED"], "{context}");
    assert_eq!(during_drain[5], failing, "{context}");
    for job in [&completed, &failed, &timeout, &node_fail, &during_drain] {
        assert!(
            job[7] != "Unknown" && job[8] != "Unknown",
            "started and ended: {job:?}\n{context}"
        );
    }
    assert_eq!(jobs.len(), 5, "only the scenario's jobs\n{context}");

    // NodeName|TimeStart|TimeEnd|State|Reason|User; the cluster's own events have no node name.
    let node_events: Vec<Vec<&str>> = events
        .lines()
        .map(|l| l.split('|').collect::<Vec<_>>())
        .filter(|f| !f[0].is_empty())
        .collect();
    assert_eq!(node_events.len(), 2, "a DOWN and a DRAIN, nothing else\n{context}");
    let down = &node_events[0];
    assert_eq!(down[0], failing, "{context}");
    assert_eq!(down[3..6], ["DOWN", DOWN_REASON, "root(0)"], "{context}");
    let drain = &node_events[1];
    assert_eq!(drain[0], failing, "{context}");
    assert_eq!(drain[3..6], ["DRAIN", DRAIN_REASON, "root(0)"], "{context}");
    for event in [down, drain] {
        assert!(
            event[1] < event[2] && event[2] != "Unknown",
            "ended: {event:?}\n{context}"
        );
    }
    // The node lost its job when it went down; the drain began once the running job had ended.
    assert!(node_fail[8] <= down[2], "{context}");
    assert!(during_drain[8] <= drain[1], "{context}");

    let stop = cluster.stop();
    eprintln!("slurm: stopped in {stop:.1?}");
}
