//! A real Slurm 22.05 (see [`crate::slurm_harness`]): the records `faultline slurm sync` reads, as
//! `sacct` and `sacctmgr` print them, and what arrives in Faultline through the sync.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, spawn_app};
use crate::slurm_harness::{DOWN_REASON, DRAIN_REASON, NODES, Scenario, SlurmCluster, run_scenario};

/// Starts the cluster and runs the scenario off the async runtime; a panic in there (with the
/// daemons' logs) is the test's.
pub async fn cluster_with_scenario(name: &str) -> (SlurmCluster, Scenario) {
    let name = name.to_string();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let cluster = crate::slurm_harness::start(&name);
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
    assert!(failed[6].split(',').any(|t| t == "gres/gpu=1"), "{context}");
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

    // The drain begins when the job on the node ends, in the same second or the next: only in the
    // same one does its reason fall within the job's run.
    let drain_at_job_end = during_drain[8] == drain[1];
    synced_through_the_api(&cluster, &scenario, drain_at_job_end, &context).await;

    let stop = cluster.stop();
    eprintln!("slurm: stopped in {stop:.1?}");
}

/// `faultline slurm sync` against the real server, as a site would run it.
async fn sync(app: &TestApp, cluster: &SlurmCluster, token: &str, since: chrono::DateTime<chrono::Utc>) -> String {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args([
            "slurm",
            "sync",
            "--cluster",
            SITE,
            "--server",
            &app.address,
            "--token",
            token,
        ])
        .arg("--sacct")
        .arg(cluster.sacct_path())
        .arg("--sacctmgr")
        .arg(cluster.sacctmgr_path())
        .args(["--since", &since.to_rfc3339()])
        .envs(cluster.env())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "slurm sync failed: {stderr}");
    stderr
}

const SITE: &str = "slurm-c1";

async fn synced_through_the_api(cluster: &SlurmCluster, scenario: &Scenario, drain_at_job_end: bool, context: &str) {
    let app = spawn_app().await;
    let nodes: Vec<Value> = NODES
        .iter()
        .map(|n| {
            json!({"hostname": n, "cluster": SITE, "gpu_model": "H100", "gpu_count": 4, "group": "g1",
                        "in_service_since": "2026-01-01T00:00:00Z"})
        })
        .collect();
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({ "nodes": nodes })).await;
    assert_eq!(status, 200, "{body}");
    let token = app.token("agent", Some(SITE)).await;
    let since = scenario.submitted_at - chrono::Duration::minutes(10);
    let summary = sync(&app, cluster, &token, since).await;
    assert!(
        summary.contains("5 jobs (0 without GPUs left out), 2 node events, 6 signals; 0 rejected, 0 unreadable lines"),
        "{summary}\n{context}"
    );

    let job = |id: u32| {
        let app = &app;
        async move {
            let (status, j) = app.get(ADMIN_TOKEN, &format!("/v1/jobs/{SITE}/{id}")).await;
            assert_eq!(status, 200, "job {id}: {j}");
            j
        }
    };
    let [healthy, failing] = NODES;
    let completed = job(scenario.completed).await;
    assert_eq!(
        (
            completed["state"].as_str(),
            completed["gpus"].as_i64(),
            completed["name"].as_str()
        ),
        (Some("completed"), Some(2), Some("train-ok"))
    );
    assert_eq!(completed["nodes"], json!([healthy]));
    let failed = job(scenario.failed).await;
    assert_eq!(
        (
            failed["state"].as_str(),
            failed["scheduler_state"].as_str(),
            failed["exit_code"].as_i64()
        ),
        (Some("failed"), Some("FAILED"), Some(3))
    );
    let timeout = job(scenario.timeout).await;
    assert_eq!(
        (timeout["state"].as_str(), timeout["scheduler_state"].as_str()),
        (Some("failed"), Some("TIMEOUT"))
    );
    // The job that lost its node has the node's failure, classified from the drain's reason.
    let node_fail = job(scenario.node_fail).await;
    assert_eq!(
        (
            node_fail["state"].as_str(),
            node_fail["scheduler_state"].as_str(),
            node_fail["gpus"].as_i64()
        ),
        (Some("failed"), Some("NODE_FAIL"), Some(4))
    );
    let ids = node_fail["failure_ids"].as_array().unwrap();
    assert_eq!(ids.len(), 1, "{node_fail}\n{context}");
    let (_, f) = app
        .get(ADMIN_TOKEN, &format!("/v1/failures/{}", ids[0].as_str().unwrap()))
        .await;
    let f = &f["failure"];
    assert_eq!(
        (
            f["root_cause"]["category"].as_str(),
            f["root_cause"]["component"].as_str()
        ),
        (Some("hardware"), Some("gpu")),
        "{f}"
    );
    assert_eq!(f["job_id"], scenario.node_fail.to_string());

    // The drain explains itself: its reason is a failure of the node (GPU memory), and the node's
    // state has both out-of-service intervals.
    let (_, failures) = app
        .get(
            ADMIN_TOKEN,
            &format!(
                "/v1/failures?cluster={SITE}&node={failing}&from={}",
                since.to_rfc3339().replace('+', "%2B")
            ),
        )
        .await;
    let components: Vec<&str> = failures["failures"]
        .as_array()
        .unwrap_or_else(|| panic!("{failures}"))
        .iter()
        .map(|f| f["root_cause"]["component"].as_str().unwrap())
        .collect();
    assert!(components.contains(&"gpu_memory"), "{failures}");
    let (status, state) = app.get(ADMIN_TOKEN, &format!("/v1/nodes/{SITE}/{failing}/state")).await;
    assert_eq!(status, 200, "{state}");
    let transitions: Vec<&str> = state["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(transitions, ["drained", "returned", "drained", "returned"], "{state}");

    // The same intervals in the node state ledger: over one window, the drained GPU-hours of the
    // availability are the node's out-of-service GPU-hours, each attributed to a hardware failure
    // of the node (the reasons' XID 79 and ECC), and the repair pipeline holds the incidents.
    let enc = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339().replace('+', "%2B");
    let window = format!("from={}&to={}&cluster={SITE}", enc(since), enc(chrono::Utc::now()));
    let (status, state) = app
        .get(ADMIN_TOKEN, &format!("/v1/nodes/{SITE}/{failing}/state?{window}"))
        .await;
    assert_eq!(status, 200, "{state}");
    let out = state["out_of_service_gpu_hours"].as_f64().unwrap();
    assert!(out > 0.0, "{state}");
    let (status, av) = app
        .get(
            ADMIN_TOKEN,
            &format!("/v1/analytics/availability?{window}&period=month"),
        )
        .await;
    assert_eq!(status, 200, "{av}");
    let points = av["points"].as_array().unwrap();
    let drained: f64 = points
        .iter()
        .flat_map(|p| p["lost_by_state"].as_array().unwrap())
        .filter(|s| s["state"] == "drained")
        .map(|s| s["gpu_hours"].as_f64().unwrap())
        .sum();
    let causes: Vec<&Value> = points
        .iter()
        .flat_map(|p| p["lost_by_cause"].as_array().unwrap())
        .collect();
    let by_cause: f64 = causes.iter().map(|c| c["gpu_hours"].as_f64().unwrap()).sum();
    assert!(
        (drained - out).abs() < 1e-5 && (by_cause - out).abs() < 1e-5,
        "{out} {av}"
    );
    assert!(causes.iter().all(|c| c["category"] == "hardware"), "{av}");
    let (status, pipeline) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/repair-pipeline?{window}"))
        .await;
    assert_eq!(status, 200, "{pipeline}");
    let incidents = pipeline["incidents"].as_array().unwrap();
    assert!(
        !incidents.is_empty()
            && incidents
                .iter()
                .all(|i| i["hostname"] == failing && i["returned_at"].is_string()),
        "{pipeline}"
    );

    // Job analytics answer from the records: 5 jobs, 3 failed by the scheduler (FAILED, TIMEOUT,
    // NODE_FAIL), and the job that ran on gpu-0002 until its drain began when the drain's reason
    // (GPU memory) is a failure at the job's last second.
    let (status, sizes) = app
        .get(
            ADMIN_TOKEN,
            &format!(
                "/v1/analytics/job-size?cluster={SITE}&from={}",
                since.to_rfc3339().replace('+', "%2B")
            ),
        )
        .await;
    assert_eq!(status, 200, "{sizes}");
    assert_eq!(sizes["jobs"], 5, "{sizes}");
    let failed_jobs: u64 = sizes["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["failed_jobs"].as_u64().unwrap())
        .sum();
    assert_eq!(failed_jobs, 3 + u64::from(drain_at_job_end), "{sizes}");

    // Again: the cursors say where the last pass ended, and what is read again is a duplicate.
    let events = app.count("SELECT count(*) FROM events").await;
    let summary = sync(&app, cluster, &token, since).await;
    assert!(summary.contains("0 rejected"), "{summary}");
    assert_eq!(app.count("SELECT count(*) FROM events").await, events);
    assert_eq!(app.count("SELECT count(*) FROM jobs").await, 5);
    let (_, cursor) = app.get(&token, &format!("/v1/sync-cursors/{SITE}/slurm-jobs")).await;
    assert!(cursor["position"].is_string(), "{cursor}");
}

/// `faultline slurm sync` reaching back only `overlap` seconds before its cursor.
async fn sync_with_overlap(
    app: &TestApp,
    cluster: &SlurmCluster,
    token: &str,
    since: chrono::DateTime<chrono::Utc>,
    overlap_secs: u32,
) -> String {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args([
            "slurm",
            "sync",
            "--cluster",
            SITE,
            "--server",
            &app.address,
            "--token",
            token,
        ])
        .arg("--sacct")
        .arg(cluster.sacct_path())
        .arg("--sacctmgr")
        .arg(cluster.sacctmgr_path())
        .args(["--since", &since.to_rfc3339()])
        .args(["--overlap-secs", &overlap_secs.to_string()])
        .envs(cluster.env())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "slurm sync failed: {stderr}");
    stderr
}

fn seconds(t: &str) -> i64 {
    chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S")
        .unwrap_or_else(|e| panic!("{t}: {e}"))
        .and_utc()
        .timestamp()
}

/// Histories that change under the sync, on a real Slurm: a job requeued whose first run ended
/// before the next sync's window keeps it; a job requeued after NODE_FAIL and held (its node is
/// down) is between runs across a sync, not a finished failure; a node going down again after its
/// job ended is not linked to that job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_slurm_requeue_a_held_requeue_and_a_down_after_the_job_ended() {
    let cluster = tokio::task::spawn_blocking(|| crate::slurm_harness::start("faultline-requeue"))
        .await
        .unwrap();
    let app = spawn_app().await;
    let nodes: Vec<Value> = NODES
        .iter()
        .map(|n| json!({"hostname": n, "cluster": SITE, "gpu_model": "H100", "gpu_count": 4}))
        .collect();
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({ "nodes": nodes })).await;
    assert_eq!(status, 200, "{body}");
    let token = app.token("agent", Some(SITE)).await;
    let since = chrono::Utc::now() - chrono::Duration::minutes(10);
    let [healthy, failing] = NODES;
    let on = |node: &str| format!("--nodelist={node}");
    let state = |job: u32| {
        cluster
            .try_run("squeue", &["-h", "-j", &job.to_string(), "-o", "%T"])
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let down = |node: &str, reason: &str| {
        cluster.scontrol(&[
            "update",
            &format!("nodename={node}"),
            "state=down",
            &format!("reason={reason}"),
        ]);
    };
    let resume = |node: &str| {
        cluster.scontrol(&["update", &format!("nodename={node}"), "state=resume"]);
        cluster.wait_for("the node idle again", Duration::from_secs(30), |c| {
            c.node_state(node).as_deref() == Some("IDLE")
        });
    };

    // 1. R runs on gpu-0001, an administrator requeues it, it runs again on gpu-0002; the first
    // sync sees both runs, the second (reaching back 1 s) only the last.
    let requeued = tokio::task::block_in_place(|| {
        let r = cluster.sbatch(
            &["--job-name=train-requeued", "--requeue", "--gres=gpu:1", &on(healthy)],
            "sleep 8",
        );
        cluster.wait_for("R to run", Duration::from_secs(30), |_| state(r) == "RUNNING");
        std::thread::sleep(Duration::from_secs(1));
        cluster.scontrol(&["requeue", &r.to_string()]);
        cluster.wait_for("R requeued", Duration::from_secs(30), |_| state(r) == "PENDING");
        // A requeued job waits for its BeginTime (Slurm sets it minutes ahead, while gpu-0001
        // still refuses the job's revoked credential): let it go now, on the other node.
        cluster.scontrol(&[
            "update",
            &format!("jobid={r}"),
            &format!("nodelist={failing}"),
            "starttime=now",
        ]);
        cluster.wait_for("R to run again", Duration::from_secs(90), |_| state(r) == "RUNNING");
        std::thread::sleep(Duration::from_secs(2));
        r
    });
    sync_with_overlap(&app, &cluster, &token, since, 1).await;
    tokio::task::block_in_place(|| {
        cluster.wait_until_done(&[requeued], Duration::from_secs(60));
        std::thread::sleep(Duration::from_secs(2));
    });
    sync_with_overlap(&app, &cluster, &token, since, 1).await;

    // 2. H runs on gpu-0002 with --requeue; the node goes down: H ends NODE_FAIL and is requeued,
    // pending (its node is down). 3. N runs on gpu-0001 without requeue; the node goes down (N
    // ends NODE_FAIL), comes back, and goes down again a few seconds later for another reason.
    const AGAIN: &str = "NHC: check_gpu: GPU 1 is missing";
    let (held, lost) = tokio::task::block_in_place(|| {
        let h = cluster.sbatch(
            &["--job-name=train-held", "--requeue", "--gres=gpu:4", &on(failing)],
            "sleep 300",
        );
        let n = cluster.sbatch(
            &["--job-name=train-lost", "--no-requeue", "--gres=gpu:1", &on(healthy)],
            "sleep 300",
        );
        cluster.wait_for("H and N to run", Duration::from_secs(30), |_| {
            state(h) == "RUNNING" && state(n) == "RUNNING"
        });
        std::thread::sleep(Duration::from_secs(2));
        down(failing, DOWN_REASON);
        cluster.wait_for("H requeued", Duration::from_secs(30), |_| state(h) == "PENDING");
        down(healthy, DOWN_REASON);
        cluster.wait_until_done(&[n], Duration::from_secs(30));
        resume(healthy);
        std::thread::sleep(Duration::from_secs(3));
        down(healthy, AGAIN);
        cluster.wait_for("the second DOWN", Duration::from_secs(30), |c| {
            c.events(healthy, "DOWN").len() == 2
        });
        (h, n)
    });
    let summary = sync_with_overlap(&app, &cluster, &token, since, 1).await;
    let sacct = cluster.sacct_raw();
    let events = cluster.events_raw();
    let context = format!("{summary}\nsacct:\n{sacct}\nevents:\n{events}");
    eprintln!("{context}");
    let records = by_job(&sacct);

    // R: both runs, though the last sync listed only the second.
    let runs = &records[&requeued];
    assert_eq!(runs.len(), 2, "{context}");
    let (_, r) = app.get(ADMIN_TOKEN, &format!("/v1/jobs/{SITE}/{requeued}")).await;
    assert_eq!(
        (r["state"].as_str(), r["restarts"].as_i64()),
        (Some("completed"), Some(1)),
        "{r}\n{context}"
    );
    assert_eq!(r["nodes"], json!([healthy, failing]), "every run's nodes\n{context}");
    assert_eq!(
        seconds(&r["start"].as_str().unwrap()[..19]),
        seconds(runs[0][7]),
        "the first run's start: {r}\n{context}"
    );

    // H: requeued after NODE_FAIL and pending: between runs.
    let (_, h) = app.get(ADMIN_TOKEN, &format!("/v1/jobs/{SITE}/{held}")).await;
    assert_eq!(
        (
            h["state"].as_str(),
            h["scheduler_state"].as_str(),
            h["restarts"].as_i64()
        ),
        (Some("running"), Some("PENDING"), Some(1)),
        "{h}\n{context}"
    );
    assert!(h["end"].is_null(), "{h}");

    // Slurm's clock skew between a NODE_FAIL run's end and its node's DOWN: measured here.
    let node_events: Vec<Vec<&str>> = events
        .lines()
        .map(|l| l.split('|').collect::<Vec<_>>())
        .filter(|f| f[0] == healthy && f[3] == "DOWN")
        .collect();
    assert_eq!(node_events.len(), 2, "{context}");
    let lost_run = &records[&lost][0];
    assert_eq!(lost_run[2], "NODE_FAIL", "{context}");
    let skew = seconds(lost_run[8]) - seconds(node_events[0][1]);
    assert!(
        skew.abs() <= faultline::sync::slurm::SLURM_RECORD_SKEW_SECS,
        "a NODE_FAIL run ends within the skew of its DOWN: {skew} s\n{context}"
    );
    // N is linked to the DOWN that ended it, not to the one after it had ended.
    let linked: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT message, job_id FROM events WHERE cluster = $1 AND node = $2 AND kind <> 'node_drain'
           AND kind <> 'node_resume' ORDER BY occurred_at",
    )
    .bind(SITE)
    .bind(healthy)
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(
        linked,
        [
            (DOWN_REASON.to_string(), Some(lost.to_string())),
            (AGAIN.to_string(), None)
        ],
        "{context}"
    );

    // 4. gpu-0001 returns, is drained by a node health check for its GPU memory, returns, and 30 s
    // after the first is drained again for a file system: two reasons of one node within the
    // burst gap, two signals, each classified from its own text.
    const ECC: &str = "NHC: check_gpu_ecc: uncorrectable ECC errors on GPU 3";
    const LUSTRE: &str = "NHC: check_fs_mount: /lustre not mounted";
    tokio::task::block_in_place(|| {
        resume(healthy);
        let drain = |reason: &str| {
            cluster.scontrol(&[
                "update",
                &format!("nodename={healthy}"),
                "state=drain",
                &format!("reason={reason}"),
            ]);
        };
        drain(ECC);
        std::thread::sleep(Duration::from_secs(2));
        resume(healthy);
        std::thread::sleep(Duration::from_secs(28));
        drain(LUSTRE);
        cluster.wait_for("the second drain recorded", Duration::from_secs(30), |c| {
            c.events(healthy, "DRAIN")
                .iter()
                .any(|e| e.iter().any(|f| f.contains("/lustre")))
        });
    });
    let summary = sync_with_overlap(&app, &cluster, &token, since, 1).await;
    let reasons: Vec<(String, i32)> = sqlx::query_as(
        "SELECT message, repeat_count FROM events WHERE cluster = $1 AND node = $2
           AND message IN ($3, $4) AND kind <> 'node_drain' ORDER BY occurred_at",
    )
    .bind(SITE)
    .bind(healthy)
    .bind(ECC)
    .bind(LUSTRE)
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(
        reasons,
        [(ECC.to_string(), 1), (LUSTRE.to_string(), 1)],
        "{summary}\n{}",
        cluster.events_raw()
    );
    // Each reason is a signal of a failure, with its own root cause.
    let (_, list) = app
        .get(ADMIN_TOKEN, &format!("/v1/failures?node={healthy}&limit=100"))
        .await;
    let mut causes = std::collections::BTreeMap::new();
    for f in list["failures"].as_array().unwrap() {
        let (_, detail) = app
            .get(ADMIN_TOKEN, &format!("/v1/failures/{}", f["id"].as_str().unwrap()))
            .await;
        for sig in detail["signals"].as_array().unwrap() {
            if let Some(m) = sig["message"].as_str().filter(|m| *m == ECC || *m == LUSTRE) {
                causes.insert(
                    m.to_string(),
                    sig["root_cause"]["component"].as_str().unwrap().to_string(),
                );
            }
        }
    }
    assert_eq!(causes.len(), 2, "{list}");
    assert_ne!(causes[ECC], causes[LUSTRE], "{causes:?}");

    let stop = cluster.stop();
    eprintln!("slurm: stopped in {stop:.1?}");
}
