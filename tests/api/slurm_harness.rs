//! The Slurm of the tests: [`faultline::devtools::slurm_cluster`] with two nodes, `gpu-0001` and
//! `gpu-0002` (4 GPUs each), and [`run_scenario`], which produces the records a sync reads: a
//! COMPLETED, a FAILED, a TIMEOUT and a NODE_FAIL job, and a DOWN and a DRAIN event with their
//! reasons. It takes 60-90 s: Slurm checks time limits every 30 s and the shortest limit is a minute.
//!
//! Everything here blocks (std::process and sleeps): from an async test, call it in
//! `tokio::task::spawn_blocking`, or before the app is spawned on a current-thread runtime.

use std::time::Duration;

pub use faultline::devtools::slurm_cluster::{SlurmCluster, SlurmNode};

/// The cluster's nodes: gpu-0001 runs the ordinary jobs; the scenario downs and drains gpu-0002.
pub const NODES: [&str; 2] = ["gpu-0001", "gpu-0002"];
pub const GPUS_PER_NODE: u32 = 4;

/// The reason the scenario gives when it downs gpu-0002 (an administrator's `state=down`).
pub const DOWN_REASON: &str = "Xid 79 on gpu 3: GPU has fallen off the bus";
/// The reason the scenario gives when it drains gpu-0002.
pub const DRAIN_REASON: &str = "NHC: check_gpu: GPU 2 uncorrectable ECC error count exceeds threshold";

/// The tests' cluster: [`NODES`], [`GPUS_PER_NODE`] GPUs each.
pub fn start(cluster_name: &str) -> SlurmCluster {
    let nodes: Vec<SlurmNode> = NODES
        .iter()
        .map(|n| SlurmNode {
            name: n.to_string(),
            gpus: GPUS_PER_NODE,
        })
        .collect();
    SlurmCluster::start(cluster_name, &nodes)
}

/// The jobs and node events [`run_scenario`] made, with when it made them (UTC; Slurm prints its
/// times in the local time zone, without an offset).
#[derive(Debug, Clone)]
#[allow(dead_code)] // the times are for the sync test
pub struct Scenario {
    /// Exit 0 on gpu-0001 with `--gres=gpu:2`: COMPLETED.
    pub completed: u32,
    /// `exit 3` on gpu-0001: FAILED, exit code 3:0.
    pub failed: u32,
    /// `--time=1`, `sleep 300` on gpu-0001: TIMEOUT.
    pub timeout: u32,
    /// `--no-requeue`, running on gpu-0002 when it is downed: NODE_FAIL.
    pub node_fail: u32,
    /// Running on gpu-0002 (`--gres=gpu:1`, a few seconds) when the drain is asked for:
    /// COMPLETED, and the DRAIN event starts when it ends.
    pub during_drain: u32,
    /// The node the scenario downs and drains (gpu-0002).
    pub failing_node: &'static str,
    pub submitted_at: chrono::DateTime<chrono::Utc>,
    pub down_at: chrono::DateTime<chrono::Utc>,
    pub down_resumed_at: chrono::DateTime<chrono::Utc>,
    pub drain_requested_at: chrono::DateTime<chrono::Utc>,
    pub drained_at: chrono::DateTime<chrono::Utc>,
    pub drain_resumed_at: chrono::DateTime<chrono::Utc>,
    pub finished_at: chrono::DateTime<chrono::Utc>,
}

/// The scenario: on gpu-0001 a TIMEOUT (submitted first: it takes 60-90 s), a COMPLETED and a
/// FAILED job; meanwhile on gpu-0002 a job that loses its node (an administrator's DOWN with an
/// Xid reason, then a resume), and a drain with an NHC reason asked for while a job runs, resumed
/// once the DRAIN event is recorded. The failing node is not the TIMEOUT job's, so the DOWN kills
/// only the NODE_FAIL job.
pub fn run_scenario(cluster: &SlurmCluster) -> Scenario {
    let failing_node = NODES[1];
    let now = chrono::Utc::now;
    let on = |node: &str| format!("--nodelist={node}");
    let healthy = on(NODES[0]);
    let failing = on(failing_node);
    let submitted_at = now();
    let timeout = cluster.sbatch(
        &["--job-name=train-timeout", "--time=1", "--gres=gpu:1", &healthy],
        "sleep 300",
    );
    let completed = cluster.sbatch(
        &["--job-name=train-ok", "--gres=gpu:2", &healthy],
        "echo \"GPUs: $CUDA_VISIBLE_DEVICES\"\nsleep 1\nexit 0",
    );
    let failed = cluster.sbatch(&["--job-name=train-fails", "--gres=gpu:1", &healthy], "sleep 1\nexit 3");
    let node_fail = cluster.sbatch(
        &["--job-name=train-node-lost", "--no-requeue", "--gres=gpu:4", &failing],
        "sleep 300",
    );
    let job_state = |job: u32| {
        cluster
            .try_run("squeue", &["-h", "-j", &job.to_string(), "-o", "%T"])
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    cluster.wait_for("the node-losing job to run", Duration::from_secs(30), |_| {
        job_state(node_fail) == "RUNNING"
    });
    // Let it run a moment, so that its record has an elapsed time.
    std::thread::sleep(Duration::from_secs(2));

    let down_at = now();
    cluster.scontrol(&[
        "update",
        &format!("nodename={failing_node}"),
        "state=down",
        &format!("reason={DOWN_REASON}"),
    ]);
    cluster.wait_until_done(&[node_fail], Duration::from_secs(30));
    cluster.wait_for("the DOWN event", Duration::from_secs(30), |c| {
        !c.events(failing_node, "DOWN").is_empty()
    });
    std::thread::sleep(Duration::from_secs(1));
    let down_resumed_at = now();
    cluster.scontrol(&["update", &format!("nodename={failing_node}"), "state=resume"]);
    cluster.wait_for("the downed node idle again", Duration::from_secs(30), |c| {
        c.node_state(failing_node).as_deref() == Some("IDLE")
    });

    let during_drain = cluster.sbatch(&["--job-name=eval-during-drain", "--gres=gpu:1", &failing], "sleep 4");
    cluster.wait_for("the job on the node to drain to run", Duration::from_secs(30), |_| {
        job_state(during_drain) == "RUNNING"
    });
    let drain_requested_at = now();
    cluster.scontrol(&[
        "update",
        &format!("nodename={failing_node}"),
        "state=drain",
        &format!("reason={DRAIN_REASON}"),
    ]);
    // Recorded only once the node has drained: when the job ends.
    cluster.wait_for("the DRAIN event", Duration::from_secs(60), |c| {
        !c.events(failing_node, "DRAIN").is_empty()
    });
    let drained_at = now();
    std::thread::sleep(Duration::from_secs(1));
    let drain_resumed_at = now();
    cluster.scontrol(&["update", &format!("nodename={failing_node}"), "state=resume"]);
    cluster.wait_for("the DRAIN event closed", Duration::from_secs(30), |c| {
        c.events(failing_node, "DRAIN")
            .iter()
            .all(|e| e.get(2).is_some_and(|end| end != "Unknown"))
    });

    cluster.wait_until_done(&[completed, failed, during_drain, timeout], Duration::from_secs(150));
    Scenario {
        completed,
        failed,
        timeout,
        node_fail,
        during_drain,
        failing_node,
        submitted_at,
        down_at,
        down_resumed_at,
        drain_requested_at,
        drained_at,
        drain_resumed_at,
        finished_at: now(),
    }
}
