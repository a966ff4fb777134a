//! The Slurm track, run: a real Slurm ([`crate::devtools::slurm_cluster`]) whose nodes are three of
//! the site's, `faultline slurm sync --follow` as a real process against one server instance, and
//! the plan's jobs played in wall time beside the signal timeline: a job an administrator requeues
//! that runs again on another node, and a `--requeue` job whose node is set DOWN with a health
//! check's reason (NODE_FAIL, requeued, held pending) when the runner says so (the timeline played,
//! the node's silence page out). The sync is SIGKILLed and started again once.
//! The sync runs every 2 s reaching back 10 s (slurmdbd writes a requeued job's pending record
//! about 5 s after its NODE_FAIL run ended; a window that moved past that run sooner never reads
//! it), and the requeued job's last run lasts 18 s, so its first run ends windows before the
//! sync's last pass over it: only a sync that reads a listed job again whole keeps it.
//!
//! Everything here blocks: the runner calls it in `tokio::task::spawn_blocking`. A Slurm step that
//! fails or times out panics with the daemons' logs (the runner reports it as the round's error).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDateTime, Utc};

use super::model::{SlurmEvent, SlurmRecord, SlurmRun};
use super::scenario::{CLUSTER, Scenario};
use crate::devtools::slurm_cluster::{SlurmCluster, SlurmNode};

/// The sync's period and how far each pass reaches back before its cursor.
pub const SYNC_FOLLOW_SECS: u64 = 2;
pub const SYNC_OVERLAP_SECS: u64 = 10;
/// How long each run of the requeued job lasts (its first is requeued after 2 s): its last run
/// ends more than an overlap and a period after its first.
pub const REQUEUED_RUN_SECS: u64 = 18;

/// How the sync process is started (again, after its SIGKILL).
pub struct SyncCommand {
    pub faultline: PathBuf,
    pub server: String,
    pub token: String,
    /// Its first pass's `--since`.
    pub since: DateTime<Utc>,
}

pub struct SlurmSite {
    cluster: SlurmCluster,
    sync: Option<Child>,
    command: Option<SyncCommand>,
    log: PathBuf,
    /// Faults of the system done.
    pub faults: Vec<String>,
}

/// What the track did: its jobs and what Slurm recorded, and when it was read (a sync pass
/// starting after that reads the final records).
pub struct Played {
    pub record: SlurmRecord,
    pub read_at: DateTime<Utc>,
}

impl SlurmSite {
    /// Starts Slurm on the plan's nodes, each with its generation's GPUs.
    pub fn start(sc: &Scenario, work: &Path) -> SlurmSite {
        let nodes: Vec<SlurmNode> = sc
            .slurm
            .nodes()
            .into_iter()
            .map(|n| SlurmNode {
                name: sc.site.nodes[n].name.clone(),
                gpus: sc.site.generation(n).gpus as u32,
            })
            .collect();
        let cluster = SlurmCluster::start(CLUSTER, &nodes);
        SlurmSite {
            cluster,
            sync: None,
            command: None,
            log: work.join("slurm-sync.log"),
            faults: Vec::new(),
        }
    }

    /// Starts `faultline slurm sync --follow` (again).
    pub fn start_sync(&mut self, command: SyncCommand) -> std::io::Result<()> {
        std::fs::create_dir_all(self.log.parent().unwrap_or(Path::new(".")))?;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let c = &command;
        let child = Command::new(&c.faultline)
            .args([
                "slurm",
                "sync",
                "--cluster",
                CLUSTER,
                "--server",
                &c.server,
                "--token",
                &c.token,
            ])
            .arg("--sacct")
            .arg(self.cluster.sacct_path())
            .arg("--sacctmgr")
            .arg(self.cluster.sacctmgr_path())
            .args(["--since", &c.since.to_rfc3339()])
            .args(["--follow", &SYNC_FOLLOW_SECS.to_string()])
            .args(["--overlap-secs", &SYNC_OVERLAP_SECS.to_string()])
            .envs(self.cluster.env())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()?;
        self.sync = Some(child);
        self.command = Some(command);
        Ok(())
    }

    pub fn stop_sync(&mut self) {
        if let Some(mut c) = self.sync.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn kill_sync(&mut self, when: &str) {
        self.stop_sync();
        if let Some(c) = self.command.take() {
            self.start_sync(c).expect("starting the sync again");
        }
        self.faults
            .push(format!("the Slurm sync SIGKILLed and restarted {when}"));
    }

    /// Plays the plan, setting the held job's node DOWN when `down` says so; returns what Slurm
    /// recorded.
    pub fn play(&mut self, sc: &Scenario, origin: DateTime<Utc>, down: std::sync::mpsc::Receiver<()>) -> Played {
        let plan = &sc.slurm;
        let name = |n: usize| sc.site.nodes[n].name.clone();
        let c = &self.cluster;
        let on = |n: usize| format!("--nodelist={}", name(n));
        let requeued = c.sbatch(
            &[
                "--job-name=soak-requeued",
                "--requeue",
                "--gres=gpu:1",
                &on(plan.requeued_first),
            ],
            &format!("sleep {REQUEUED_RUN_SECS}"),
        );
        let held_gpus = format!("--gres=gpu:{}", sc.site.generation(plan.held_node).gpus);
        let held = c.sbatch(
            &["--job-name=soak-held", "--requeue", &held_gpus, &on(plan.held_node)],
            "sleep 600",
        );
        c.wait_for("both jobs to run", Duration::from_secs(30), |c| {
            c.job_state(requeued) == "RUNNING" && c.job_state(held) == "RUNNING"
        });
        // Runs of some seconds, so their records have a start and an end apart.
        std::thread::sleep(Duration::from_secs(2));
        c.scontrol(&["requeue", &requeued.to_string()]);
        c.wait_for("the requeued job pending", Duration::from_secs(30), |c| {
            c.job_state(requeued) == "PENDING"
        });
        // Slurm delays a requeued job's BeginTime: let it go now, on another node.
        c.scontrol(&[
            "update",
            &format!("jobid={requeued}"),
            &format!("nodelist={}", name(plan.requeued_second)),
            "starttime=now",
        ]);
        c.wait_for("the requeued job to run again", Duration::from_secs(90), |c| {
            c.job_state(requeued) == "RUNNING"
        });
        if plan.kill_sync_after_requeue {
            self.kill_sync("after the requeue");
        }
        let c = &self.cluster;
        down.recv_timeout(Duration::from_secs(300))
            .expect("the round ended, or waited 300 s, before letting the held job's node go down");
        c.scontrol(&[
            "update",
            &format!("nodename={}", name(plan.held_node)),
            "state=down",
            &format!("reason={}", plan.down_reason),
        ]);
        c.wait_for("the held job requeued", Duration::from_secs(30), |c| {
            c.job_state(held) == "PENDING"
        });
        c.wait_for("the DOWN event", Duration::from_secs(30), |c| {
            !c.events(&name(plan.held_node), "DOWN").is_empty()
        });
        if !plan.kill_sync_after_requeue {
            self.kill_sync("after the DOWN");
        }
        let c = &self.cluster;
        c.wait_until_done(&[requeued], Duration::from_secs(60));
        // slurmdbd has what slurmctld ended: read once both jobs' records say so.
        let started = Instant::now();
        loop {
            let record = self.record(requeued, held, origin);
            let read_at = Utc::now();
            let settled = |id: &str, last: &str| {
                record
                    .runs
                    .iter()
                    .rfind(|r| r.job == id)
                    .is_some_and(|r| r.state.starts_with(last))
            };
            if (settled(&record.requeued, "COMPLETED") && settled(&record.held, "PENDING"))
                || started.elapsed() > Duration::from_secs(20)
            {
                return Played { record, read_at };
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// sacct's records of the two jobs and sacctmgr's node events, as the model takes them.
    fn record(&self, requeued: u32, held: u32, origin: DateTime<Utc>) -> SlurmRecord {
        let off = |t: &str| {
            NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S")
                .ok()
                .map(|t| (t.and_utc() - origin).num_microseconds().unwrap_or(i64::MIN))
        };
        let run = |program: &str, args: &[&str]| {
            let out = self
                .cluster
                .command(program)
                .args(args)
                .env("TZ", "UTC")
                .env("SLURM_TIME_FORMAT", "standard")
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("{program}: {e}"));
            assert!(
                out.status.success(),
                "{program} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let ids = format!("{requeued},{held}");
        let sacct = run(
            "sacct",
            &[
                "--parsable2",
                "--noheader",
                "--allocations",
                "--duplicates",
                "--allusers",
                "--jobs",
                &ids,
                "--format=JobIDRaw,State,NodeList,Start,End",
            ],
        );
        let runs = sacct
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split('|').collect();
                (f.len() == 5).then(|| SlurmRun {
                    job: f[0].to_string(),
                    state: f[1].to_string(),
                    nodes: f[2].to_string(),
                    start: off(f[3]),
                    end: off(f[4]),
                })
            })
            .collect();
        let events = run(
            "sacctmgr",
            &[
                "-P",
                "-n",
                "show",
                "event",
                "Start=2020-01-01T00:00:00",
                "format=NodeName,TimeStart,TimeEnd,State,Reason",
            ],
        );
        let events = events
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split('|').collect();
                (f.len() == 5 && !f[0].is_empty()).then(|| SlurmEvent {
                    node: f[0].to_string(),
                    start: off(f[1]).unwrap_or(i64::MIN),
                    end: off(f[2]),
                    state: f[3].to_string(),
                    reason: f[4].to_string(),
                })
            })
            .collect();
        SlurmRecord {
            requeued: requeued.to_string(),
            held: held.to_string(),
            runs,
            events,
        }
    }

    /// The sync's log, for a report.
    pub fn log(&self) -> &Path {
        &self.log
    }
}

/// Waits until the sync has stored a pass that began after `read_at` (both its cursors at or past
/// the next whole second): what Slurm recorded by then is in Faultline.
pub async fn wait_synced(
    client: &crate::devtools::client::Client,
    read_at: DateTime<Utc>,
    log: &Path,
    limit: Duration,
) -> anyhow::Result<()> {
    use chrono::SubsecRound;
    let after = read_at.trunc_subsecs(0) + chrono::Duration::seconds(1);
    let started = Instant::now();
    loop {
        let mut behind = false;
        for source in [crate::sync::slurm::JOBS_SOURCE, crate::sync::slurm::EVENTS_SOURCE] {
            let (c, _) = client
                .send_json(
                    reqwest::Method::GET,
                    &format!("/v1/sync-cursors/{CLUSTER}/{source}"),
                    None,
                )
                .await?;
            let at = c["position"]
                .as_str()
                .and_then(|p| DateTime::parse_from_rfc3339(p).ok());
            behind |= at.is_none_or(|p| p < after);
        }
        if !behind {
            return Ok(());
        }
        if started.elapsed() > limit {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            anyhow::bail!(
                "the Slurm sync stored no pass begun after the track's last record within {limit:?}; its log ends:\n{}",
                lines[lines.len().saturating_sub(10)..].join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

impl Drop for SlurmSite {
    fn drop(&mut self) {
        self.stop_sync();
    }
}
