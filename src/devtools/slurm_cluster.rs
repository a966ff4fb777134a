//! A real Slurm (Debian 12's 22.05) for the tests and the soak: munged, slurmdbd on the local
//! MariaDB (a database of its own), slurmctld and one slurmd per node (the nodes and their GPU
//! counts are the caller's; the GPUs are declared on character devices made in the temp dir), all
//! on free ports, with a private munge socket and configuration in a temp dir. Nothing of the
//! machine's own Slurm or munge is read or touched: every command runs with `SLURM_CONF` set to the
//! private slurm.conf (see [`SlurmCluster::env`]).
//!
//! Needs root (slurmd runs jobs as their user; SlurmUser=root), the Debian packages
//! `slurm-wlm slurmdbd munge`, and MariaDB answering `mysql -u root` on its socket (scripts/test
//! installs and starts them); [`unavailable`] says what is missing. Starts in about 3 s; stops (on
//! drop, also when the caller panics) in a few.
//!
//! Everything here blocks (std::process and sleeps) and panics, with the daemons' logs, when a step
//! fails or does not finish in time: from async code, call it in `tokio::task::spawn_blocking`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The partition every node is in, the default.
pub const PARTITION: &str = "gpu";
/// The account root's jobs are charged to.
pub const ACCOUNT: &str = "research";

/// A node of the cluster: its name (a slurmd started with `-N name`) and its GPUs (`gres/gpu`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmNode {
    pub name: String,
    pub gpus: u32,
}

/// The raw `sacct` invocation a sync makes (as the test asserts on it): one line per allocation,
/// requeued records included. `--starttime` because sacct's default window starts at today's
/// midnight (a test across midnight would lose its jobs); the database is the test's own, so
/// an early start reads only this test's jobs.
pub const SACCT_ARGS: &[&str] = &[
    "--parsable2",
    "--noheader",
    "--allocations",
    "--duplicates",
    "--allusers",
    "--starttime=2020-01-01T00:00:00",
    "--format=JobIDRaw,JobName,State,ExitCode,DerivedExitCode,NodeList,AllocTRES,Start,End",
];

/// The raw `sacctmgr` invocation for node events. `Start=` because the default window starts at
/// yesterday's midnight.
pub const SACCTMGR_EVENT_ARGS: &[&str] = &[
    "-P",
    "-n",
    "show",
    "event",
    "Start=2020-01-01T00:00:00",
    "format=NodeName,TimeStart,TimeEnd,State,Reason,User",
];

/// A test database in MariaDB older than this is a leftover of a killed run.
const STALE_AFTER_SECS: u64 = 6 * 3600;
const DB_PREFIX: &str = "faultline_slurm_";

pub struct SlurmCluster {
    pub name: String,
    dir: PathBuf,
    conf: PathBuf,
    database: String,
    /// Started daemons, in start order (munged, slurmdbd, slurmctld, the slurmds).
    daemons: Vec<Daemon>,
    bins: BTreeMap<&'static str, PathBuf>,
    nodes: Vec<SlurmNode>,
}

struct Daemon {
    name: String,
    child: Child,
    log: PathBuf,
}

const SBIN: &[&str] = &["munged", "slurmdbd", "slurmctld", "slurmd"];
const BIN: &[&str] = &["sbatch", "sacct", "sacctmgr", "scontrol", "squeue", "sinfo", "scancel"];

/// The absolute path of `program`: on PATH or in the sbin directories (often off a test's PATH).
fn find_binary(program: &str) -> PathBuf {
    locate(program).unwrap_or_else(|| {
        panic!(
            "{program} not found: a real Slurm needs the Debian packages `slurm-wlm slurmdbd munge` \
             (apt-get install slurm-wlm slurmdbd munge; scripts/test does) and MariaDB running"
        )
    })
}

fn locate(program: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .chain(
            [
                "/usr/sbin",
                "/sbin",
                "/usr/bin",
                "/bin",
                "/usr/local/sbin",
                "/usr/local/bin",
            ]
            .map(PathBuf::from),
        )
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Why a cluster cannot start on this machine (a program missing, not root, MariaDB not
/// answering), or None when it can.
pub fn unavailable() -> Option<String> {
    let missing: Vec<&str> = SBIN
        .iter()
        .chain(BIN)
        .chain(&["mysql"])
        .copied()
        .filter(|p| locate(p).is_none())
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "{} not found (the Debian packages slurm-wlm slurmdbd munge mariadb-server)",
            missing.join(", ")
        ));
    }
    // SAFETY: geteuid(2) reads the process's own id; it cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (slurmd runs jobs as their user; SlurmUser=root)".into());
    }
    mysql("SELECT 1")
        .err()
        .map(|e| format!("MariaDB does not answer `mysql -u root` ({})", e.trim()))
}

fn free_ports(n: usize) -> Vec<u16> {
    // All bound at once so that they differ; released together just before the daemons bind them.
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    listeners.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Runs `mysql -u root` with `sql`; its stdout, or the error.
fn mysql(sql: &str) -> Result<String, String> {
    let out = Command::new("mysql")
        .args(["-u", "root", "--batch", "--skip-column-names", "-e", sql])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running mysql: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Drops the test databases that killed runs left behind (once per process).
fn drop_stale_databases(now: u64) {
    static SWEPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SWEPT.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let Ok(names) = mysql(&format!("SHOW DATABASES LIKE '{}%'", DB_PREFIX.replace('_', "\\_"))) else {
        return;
    };
    for name in names.lines() {
        let created = name
            .strip_prefix(DB_PREFIX)
            .and_then(|rest| rest.split_once('_'))
            .and_then(|(secs, _)| secs.parse::<u64>().ok());
        if created.is_some_and(|t| t + STALE_AFTER_SECS < now) {
            let _ = mysql(&format!("DROP DATABASE IF EXISTS `{name}`"));
        }
    }
}

unsafe extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
    fn mknod(path: *const std::ffi::c_char, mode: u32, dev: u64) -> i32;
}
const SIGTERM: i32 = 15;
const SIGKILL: i32 = 9;

fn make_char_device(path: &Path, major: u64, minor: u64) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // makedev for glibc: major in bits 8-19 and 32+, minor in bits 0-7 and 12+.
    let dev = ((major & 0xfff) << 8) | ((major & !0xfff) << 32) | (minor & 0xff) | ((minor & !0xff) << 12);
    // SAFETY: a valid NUL-terminated path; mknod reads it only.
    let rc = unsafe { mknod(c.as_ptr(), 0o020_660, dev) };
    assert_eq!(
        rc,
        0,
        "mknod {} (the fake GPU devices need root): {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

impl SlurmCluster {
    /// Writes the configuration, starts the daemons, registers the cluster (and an account with
    /// root in it) and waits until every node is idle. Panics, with the daemons' logs, when a
    /// step fails or does not finish in time.
    pub fn start(cluster_name: &str, nodes: &[SlurmNode]) -> SlurmCluster {
        assert!(
            !nodes.is_empty() && nodes.iter().all(|n| n.gpus > 0),
            "a cluster of nodes with GPUs: {nodes:?}"
        );
        let bins: BTreeMap<&'static str, PathBuf> = SBIN.iter().chain(BIN).map(|b| (*b, find_binary(b))).collect();
        let now = unix_now();
        if let Err(e) = mysql("SELECT 1") {
            panic!(
                "MariaDB does not answer `mysql -u root` on its socket ({}): slurmdbd needs it; install \
                 mariadb-server and start it (`service mariadb start`; scripts/test does)",
                e.trim()
            );
        }
        drop_stale_databases(now);
        let id = uuid::Uuid::new_v4().simple().to_string();
        let database = format!("{DB_PREFIX}{now}_{id}");
        // Short: a unix socket path is at most 107 bytes.
        let dir = std::env::temp_dir().join(format!("faultline-slurm-{}", &id[..12]));
        // The guard exists before anything is started: a failure from here on cleans up.
        let mut cluster = SlurmCluster {
            name: cluster_name.to_string(),
            conf: dir.join("slurm.conf"),
            dir,
            database,
            daemons: Vec::new(),
            bins,
            nodes: nodes.to_vec(),
        };
        cluster.write_config();
        cluster.start_daemons();
        cluster
    }

    fn write_config(&self) {
        let d = &self.dir;
        for sub in ["munge", "state", "dev", "jobs"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        for node in &self.nodes {
            std::fs::create_dir_all(d.join("spool").join(&node.name)).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        // munged refuses a key readable by others, and a socket dir writable by others (and
        // warns about one others cannot search).
        std::fs::set_permissions(d.join("munge"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let key: Vec<u8> = (0..8).flat_map(|_| *uuid::Uuid::new_v4().as_bytes()).collect();
        let key_path = d.join("munge/munge.key");
        std::fs::write(&key_path, &key).unwrap();
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o400)).unwrap();
        // Fake GPUs: NVIDIA's character device numbers (195, minor = index).
        let devices: u32 = self.nodes.iter().map(|n| n.gpus).sum();
        for i in 0..devices {
            make_char_device(&d.join(format!("dev/nvidia{i}")), 195, u64::from(i));
        }
        let ports = free_ports(2 + self.nodes.len());
        let (ctld_port, dbd_port, node_ports) = (ports[0], ports[1], &ports[2..]);
        let dir = d.display();
        let sock = self.munge_socket();
        let sock = sock.display();
        let name = &self.name;
        let mut slurm_conf = format!(
            "ClusterName={name}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={}
SlurmUser=root
SlurmdUser=root
# Use the CPUs and memory configured here, whatever the machine has.
SlurmdParameters=config_overrides
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldDebug=info
SlurmdDebug=info
# No systemd, no cgroups.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={dbd_port}
# sacct and sacctmgr find the private munge socket here, not in AuthInfo.
AccountingStoragePass={sock}
AccountingStorageTRES=gres/gpu
GresTypes=gpu
# 1, not 2: with 2 a node an administrator downs is returned to service at once.
ReturnToService=1
MinJobAge=2
SlurmctldTimeout=10
SlurmdTimeout=30
InactiveLimit=0
KillWait=2
OverTimeLimit=0
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1,defer_batch=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
",
            node_ports[0]
        );
        for (node, port) in self.nodes.iter().zip(node_ports) {
            writeln!(
                slurm_conf,
                "NodeName={} NodeAddr=127.0.0.1 Port={port} CPUs=4 RealMemory=1000 Gres=gpu:{} State=UNKNOWN",
                node.name, node.gpus
            )
            .unwrap();
        }
        writeln!(
            slurm_conf,
            "PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
        )
        .unwrap();
        std::fs::write(&self.conf, slurm_conf).unwrap();
        let mut gres = String::from("AutoDetect=off\n");
        let mut first = 0;
        for node in &self.nodes {
            let last = first + node.gpus - 1;
            let files = if node.gpus == 1 {
                format!("nvidia{first}")
            } else {
                format!("nvidia[{first}-{last}]")
            };
            writeln!(gres, "NodeName={} Name=gpu File={dir}/dev/{files}", node.name).unwrap();
            first = last + 1;
        }
        std::fs::write(d.join("gres.conf"), gres).unwrap();
        let database = &self.database;
        let dbd_conf = format!(
            "AuthType=auth/munge
AuthInfo=socket={sock}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={dbd_port}
SlurmUser=root
PidFile={dir}/slurmdbd.pid
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc={database}
StorageUser=root
"
        );
        // slurmdbd refuses a configuration others can read (it may hold a password).
        let dbd_path = d.join("slurmdbd.conf");
        std::fs::write(&dbd_path, dbd_conf).unwrap();
        std::fs::set_permissions(&dbd_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    fn munge_socket(&self) -> PathBuf {
        self.dir.join("munge/munge.sock")
    }

    fn start_daemons(&mut self) {
        let m = self.dir.join("munge");
        self.spawn_daemon(
            "munged",
            "munged",
            &[
                "--foreground".into(),
                "--force".into(),
                format!("--socket={}", self.munge_socket().display()),
                format!("--key-file={}", m.join("munge.key").display()),
                format!("--pid-file={}", m.join("munged.pid").display()),
                format!("--log-file={}", m.join("munged.log").display()),
                format!("--seed-file={}", m.join("munged.seed").display()),
            ],
        );
        let socket = self.munge_socket();
        self.wait_for("munged's socket", Duration::from_secs(10), |_| socket.exists());

        self.spawn_daemon("slurmdbd", "slurmdbd", &["-D".into()]);
        // The first start creates the database's tables: about a second.
        self.wait_for("slurmdbd to answer", Duration::from_secs(30), |c| {
            c.try_run("sacctmgr", &["-n", "-P", "show", "cluster"]).is_ok()
        });
        let name = self.name.clone();
        self.sacctmgr(&["-i", "add", "cluster", &name]);
        self.sacctmgr(&["-i", "add", "account", ACCOUNT, &format!("Cluster={name}")]);
        self.sacctmgr(&[
            "-i",
            "add",
            "user",
            "root",
            &format!("Account={ACCOUNT}"),
            &format!("Cluster={name}"),
        ]);

        // -i: ignore (there is none) saved state.
        self.spawn_daemon("slurmctld", "slurmctld", &["-D".into(), "-i".into()]);
        for node in self.nodes.clone() {
            self.spawn_daemon(
                &format!("slurmd-{}", node.name),
                "slurmd",
                &["-D".into(), "-N".into(), node.name.clone()],
            );
        }
        self.wait_for("every node idle", Duration::from_secs(60), |c| {
            c.nodes.iter().all(|n| c.node_state(&n.name).as_deref() == Some("IDLE"))
        });
    }

    fn spawn_daemon(&mut self, name: &str, program: &'static str, args: &[String]) {
        let log = self.dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .current_dir(&self.dir)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {program}: {e}"));
        self.daemons.push(Daemon {
            name: name.to_string(),
            child,
            log,
        });
    }

    /// `program` (a Slurm client or daemon, found on PATH or in the sbin directories) with the
    /// cluster's environment.
    pub fn command(&self, program: &str) -> Command {
        let path = self.bins.get(program).cloned().unwrap_or_else(|| find_binary(program));
        let mut command = Command::new(path);
        command.envs(self.env());
        command
    }

    /// What a Slurm client needs to reach this cluster: `SLURM_CONF` (through which `sacct` and
    /// `sacctmgr` also find the private munge socket and slurmdbd's port).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("SLURM_CONF".to_string(), self.conf.display().to_string())]
    }

    pub fn sacct_path(&self) -> PathBuf {
        self.bins["sacct"].clone()
    }

    pub fn sacctmgr_path(&self) -> PathBuf {
        self.bins["sacctmgr"].clone()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn database(&self) -> &str {
        &self.database
    }

    /// Runs `program args`; its stdout, or a description of the failure.
    pub fn try_run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let out = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .current_dir(self.dir.join("jobs"))
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{program} {args:?}: {}\nstdout: {}\nstderr: {}",
                out.status,
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Runs `program args`; its stdout. Panics with the daemons' logs when it fails.
    pub fn run(&self, program: &str, args: &[&str]) -> String {
        self.try_run(program, args)
            .unwrap_or_else(|e| panic!("{e}\n{}", self.log_tails()))
    }

    pub fn scontrol(&self, args: &[&str]) -> String {
        self.run("scontrol", args)
    }

    pub fn sacctmgr(&self, args: &[&str]) -> String {
        self.run("sacctmgr", args)
    }

    /// `sacct` with [`SACCT_ARGS`]: the raw lines.
    pub fn sacct_raw(&self) -> String {
        self.run("sacct", SACCT_ARGS)
    }

    /// `sacctmgr show event` with [`SACCTMGR_EVENT_ARGS`]: the raw lines.
    pub fn events_raw(&self) -> String {
        self.run("sacctmgr", SACCTMGR_EVENT_ARGS)
    }

    /// Submits `script` (a `#!/bin/sh` line is added when it has none) with `sbatch args`; the
    /// job id. Output goes to the temp dir's jobs/ folder.
    pub fn sbatch(&self, args: &[&str], script: &str) -> u32 {
        let script = if script.starts_with("#!") {
            script.to_string()
        } else {
            format!("#!/bin/sh\n{script}\n")
        };
        let path = self
            .dir
            .join("jobs")
            .join(format!("script-{}.sh", uuid::Uuid::new_v4().simple()));
        std::fs::write(&path, script).unwrap();
        let mut all = vec!["--parsable"];
        all.extend_from_slice(args);
        let path = path.display().to_string();
        all.push(&path);
        let out = self.run("sbatch", &all);
        // --parsable: "id" or "id;cluster".
        out.trim()
            .split(';')
            .next()
            .and_then(|id| id.parse().ok())
            .unwrap_or_else(|| panic!("sbatch answered {out:?}"))
    }

    /// A job's state as `squeue` gives it (`PENDING`, `RUNNING`...; empty once the controller
    /// forgot it).
    pub fn job_state(&self, job: u32) -> String {
        self.try_run("squeue", &["-h", "-j", &job.to_string(), "-o", "%T"])
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// `sacct` of the given jobs, every record of each (`--duplicates`, no time bounds), in the
    /// fields of [`SACCT_ARGS`]: the raw lines.
    pub fn sacct_jobs_raw(&self, jobs: &[u32]) -> String {
        let ids = jobs.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let mut args: Vec<&str> = SACCT_ARGS
            .iter()
            .copied()
            .filter(|a| !a.starts_with("--starttime"))
            .collect();
        args.extend(["--jobs", &ids]);
        self.run("sacct", &args)
    }

    /// A node's state as `scontrol show node` gives it (`IDLE`, `MIXED`, `DOWN`, `IDLE+DRAIN`...).
    pub fn node_state(&self, node: &str) -> Option<String> {
        let out = self.try_run("scontrol", &["show", "node", node]).ok()?;
        out.split_whitespace()
            .find_map(|w| w.strip_prefix("State="))
            .map(str::to_string)
    }

    /// The accounting state of each job (its last record, from slurmdbd), once none is pending or
    /// running any more. Panics after `timeout`, with the states seen and the daemons' logs.
    pub fn wait_until_done(&self, jobs: &[u32], timeout: Duration) -> BTreeMap<u32, String> {
        let ids = jobs.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let mut states = BTreeMap::new();
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(out) = self.try_run(
                "sacct",
                &["-n", "-P", "-X", "--allusers", "-o", "JobIDRaw,State", "-j", &ids],
            ) {
                states = out
                    .lines()
                    .filter_map(|l| l.split_once('|'))
                    .filter_map(|(id, state)| Some((id.parse::<u32>().ok()?, state.to_string())))
                    .collect();
                let running = [
                    "PENDING",
                    "RUNNING",
                    "REQUEUED",
                    "SUSPENDED",
                    "COMPLETING",
                    "CONFIGURING",
                    "RESIZING",
                ];
                if jobs
                    .iter()
                    .all(|j| states.get(j).is_some_and(|s| !running.iter().any(|r| s.starts_with(r))))
                {
                    return states;
                }
            }
            if let Some(d) = self.exited_daemon() {
                panic!(
                    "waiting for jobs {ids} to end: {d} exited ({states:?})\n{}",
                    self.log_tails()
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "jobs {ids} not all done within {timeout:?}: {states:?}\nsqueue:\n{}\n{}",
                    self.try_run("squeue", &["-a"]).unwrap_or_else(|e| e),
                    self.log_tails()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The name of a daemon that has exited (gone, or a zombie not yet waited for): nothing that
    /// is waited for will happen then.
    fn exited_daemon(&self) -> Option<&str> {
        self.daemons.iter().find_map(|d| {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", d.child.id())).unwrap_or_default();
            let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
            matches!(state, None | Some('Z' | 'X')).then_some(d.name.as_str())
        })
    }

    /// Waits until `done` holds, polling; panics after `timeout` naming `what`, with the logs.
    pub fn wait_for(&self, what: &str, timeout: Duration, mut done: impl FnMut(&SlurmCluster) -> bool) {
        let deadline = Instant::now() + timeout;
        while !done(self) {
            if let Some(d) = self.exited_daemon() {
                panic!("waiting for {what}: {d} exited\n{}", self.log_tails());
            }
            if Instant::now() > deadline {
                panic!("waiting for {what}: not within {timeout:?}\n{}", self.log_tails());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The node events of `node` in `state` (`DOWN`, `DRAIN`) as `sacctmgr` lists them.
    pub fn events(&self, node: &str, state: &str) -> Vec<Vec<String>> {
        self.try_run("sacctmgr", SACCTMGR_EVENT_ARGS)
            .unwrap_or_default()
            .lines()
            .map(|l| l.split('|').map(str::to_string).collect::<Vec<_>>())
            .filter(|f| f.len() >= 4 && f[0] == node && f[3] == state)
            .collect()
    }

    /// The last 25 lines of each daemon's log (stdout and stderr), for failure messages.
    pub fn log_tails(&self) -> String {
        let mut out = String::new();
        let mut logs: Vec<(String, PathBuf)> = self.daemons.iter().map(|d| (d.name.clone(), d.log.clone())).collect();
        logs.push(("munged (own log)".into(), self.dir.join("munge/munged.log")));
        for (name, log) in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(25)..];
            let _ = writeln!(out, "--- {name} ({}):\n{}", log.display(), tail.join("\n"));
        }
        out
    }

    /// Stops everything (as drop does), returning how long it took.
    pub fn stop(self) -> Duration {
        let started = Instant::now();
        drop(self);
        started.elapsed()
    }

    /// Processes (other than ours) whose environment names this cluster's slurm.conf: the
    /// daemons, slurmstepd and the jobs' processes.
    fn own_processes(&self) -> Vec<i32> {
        let needle = format!("SLURM_CONF={}\0", self.conf.display());
        let me = std::process::id() as i32;
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| *pid != me)
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_bytes()))
            })
            .collect()
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        // Jobs first: slurmd leaves running jobs (and their slurmstepd) behind when it stops.
        if self.daemons.iter().any(|d| d.name == "slurmctld") {
            let _ = self.try_run("scancel", &["--user=root"]);
        }
        // slurmds and slurmctld together, then slurmdbd (slurmctld's last records go to it),
        // then munged.
        let stages: [&dyn Fn(&str) -> bool; 3] = [
            &|n: &str| n.starts_with("slurmd-") || n == "slurmctld",
            &|n: &str| n == "slurmdbd",
            &|n: &str| n == "munged",
        ];
        for stage in stages {
            let batch: Vec<&mut Daemon> = self.daemons.iter_mut().filter(|d| stage(&d.name)).collect();
            for d in &batch {
                // SAFETY: kill(2) on our own child's pid.
                unsafe { kill(d.child.id() as i32, SIGTERM) };
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            for d in batch {
                while d.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = d.child.kill();
                let _ = d.child.wait();
            }
        }
        // Whatever is left (a job's processes, a slurmstepd): by the environment they inherited.
        for pid in self.own_processes() {
            // SAFETY: kill(2) on a process that carries our private SLURM_CONF.
            unsafe { kill(pid, SIGKILL) };
        }
        let _ = mysql(&format!("DROP DATABASE IF EXISTS `{}`", self.database));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
