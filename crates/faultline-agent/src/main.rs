//! `faultline-agent`: one small binary per node. Reads the kernel log (`/dev/kmsg`, or a file of
//! its records), the GPUs' own counters (`nvidia-smi -q -x`) and the BMC's event log (`ipmitool
//! sel elist`), turns what it reads into signals with faultline-core's parsers, writes them to a
//! disk spool before moving on, and sends the spool to Faultline. See docs/agent.md.

mod command;
mod gpu;
mod ipmi;
mod journal;
mod kernel_log;
mod kmsg;
mod metrics;
mod sender;
mod signals;
mod spool;
mod state;
mod storm;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};

use crate::kernel_log::{Batch, JournalOptions, KernelLog, Read};
use crate::kmsg::Source;
use crate::sender::{Sender, SenderConfig};
use crate::signals::NodeId;
use crate::spool::Spool;
use crate::state::{Paths, Position, Shared, load_status};

#[derive(Parser)]
#[command(
    name = "faultline-agent",
    version,
    about = "Faultline's node agent: kernel log and GPU counters to Faultline, through a disk spool"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Read the kernel log and the GPUs and send (the default).
    Run,
    /// What the agent of this state directory did last: last send, spool depth, drops, errors.
    Status {
        #[arg(long, env = "FAULTLINE_AGENT_STATE_DIR", default_value = "/var/lib/faultline-agent")]
        state_dir: PathBuf,
        /// Print the status as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Clone)]
struct RunArgs {
    /// Faultline's base URL, e.g. http://faultline.internal:8080 or https://faultline.example.
    #[arg(long, env = "FAULTLINE_SERVER", global = true)]
    server: Option<String>,
    /// PEM certificates (one or a bundle) to trust for an https:// server, besides the host's
    /// certificate store: a site's own certificate authority.
    #[arg(long, env = "FAULTLINE_AGENT_CA_FILE", global = true)]
    ca_file: Option<PathBuf>,
    /// An ingest token (best: scoped to this cluster).
    #[arg(long, env = "FAULTLINE_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// A file holding the token (a mounted secret); used when --token is not given.
    #[arg(long, env = "FAULTLINE_TOKEN_FILE", global = true)]
    token_file: Option<PathBuf>,
    /// The cluster this node belongs to.
    #[arg(long, env = "FAULTLINE_CLUSTER", global = true)]
    cluster: Option<String>,
    /// This node's hostname as Faultline knows it (default: the kernel's hostname).
    #[arg(long, env = "FAULTLINE_NODE", global = true)]
    node: Option<String>,
    /// Where the spool, the log position and the status live.
    #[arg(
        long,
        env = "FAULTLINE_AGENT_STATE_DIR",
        default_value = "/var/lib/faultline-agent",
        global = true
    )]
    state_dir: PathBuf,
    /// Read kernel log records from this file (the /dev/kmsg record format, one per line, followed
    /// as it grows) instead of /dev/kmsg.
    #[arg(long, env = "FAULTLINE_AGENT_KMSG_FILE", global = true)]
    kmsg_file: Option<PathBuf>,
    /// The kernel log device.
    #[arg(
        long,
        env = "FAULTLINE_AGENT_KMSG_DEVICE",
        default_value = "/dev/kmsg",
        global = true
    )]
    kmsg_device: PathBuf,
    /// Read the kernel log from the systemd journal (`journalctl`) instead of /dev/kmsg (also
    /// chosen when /dev/kmsg cannot be opened).
    #[arg(long, env = "FAULTLINE_AGENT_JOURNAL", global = true)]
    journal: bool,
    /// The journalctl to run for `--journal`.
    #[arg(
        long,
        env = "FAULTLINE_AGENT_JOURNALCTL",
        default_value = "journalctl",
        global = true
    )]
    journalctl: String,
    /// Read the journal files of this directory (e.g. the host's /var/log/journal mounted into a
    /// container) instead of the local journal.
    #[arg(long, env = "FAULTLINE_AGENT_JOURNAL_DIRECTORY", global = true)]
    journal_directory: Option<PathBuf>,
    /// Do not read the kernel log.
    #[arg(long, env = "FAULTLINE_AGENT_NO_KMSG", global = true)]
    no_kmsg: bool,
    /// The file holding this boot's id.
    #[arg(
        long,
        env = "FAULTLINE_AGENT_BOOT_ID_FILE",
        default_value = "/proc/sys/kernel/random/boot_id",
        global = true
    )]
    boot_id_file: PathBuf,
    /// The spool's bound in bytes; when full, the oldest low-severity signals are dropped first.
    #[arg(long, env = "FAULTLINE_AGENT_SPOOL_MAX_BYTES", default_value_t = 64 * 1024 * 1024, global = true)]
    spool_max_bytes: u64,
    /// nvidia-smi to run (`-q -x`).
    #[arg(
        long,
        env = "FAULTLINE_AGENT_NVIDIA_SMI",
        default_value = "nvidia-smi",
        global = true
    )]
    nvidia_smi: String,
    /// Seconds between nvidia-smi runs (each wait jittered by up to a tenth); 0 turns GPU polling off.
    #[arg(long, env = "FAULTLINE_AGENT_GPU_INTERVAL", default_value_t = 300.0, global = true)]
    gpu_interval: f64,
    /// ipmitool to run (`sel elist`) for the BMC's system event log.
    #[arg(long, env = "FAULTLINE_AGENT_IPMITOOL", default_value = "ipmitool", global = true)]
    ipmitool: String,
    /// Seconds between reads of the BMC's event log (each wait jittered by up to a tenth); 0 turns
    /// it off.
    #[arg(long, env = "FAULTLINE_AGENT_SEL_INTERVAL", default_value_t = 300.0, global = true)]
    sel_interval: f64,
    /// Serve Prometheus text metrics on this address (e.g. 0.0.0.0:9835).
    #[arg(long, env = "FAULTLINE_AGENT_METRICS_ADDR", global = true)]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Repeats of one kernel signal (kind, code, GPU) within a window of this many seconds of the
    /// kernel's clock are sent as the first and one signal with a repeat count; 0 sends each.
    #[arg(long, env = "FAULTLINE_AGENT_COMPACT_WINDOW", default_value_t = 60.0, global = true)]
    compact_window: f64,
    /// Signals per batch.
    #[arg(long, env = "FAULTLINE_AGENT_BATCH", default_value_t = 500, global = true)]
    batch: usize,
    /// Longest wait between two send attempts after failures, in seconds.
    #[arg(long, env = "FAULTLINE_AGENT_MAX_BACKOFF", default_value_t = 60.0, global = true)]
    max_backoff: f64,
    /// Read the kernel log to its end, poll the GPUs and the BMC's event log once, send everything,
    /// exit.
    #[arg(long, global = true)]
    oneshot: bool,
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Some(Command::Status { state_dir, json }) => status(&state_dir, json),
        Some(Command::Run) | None => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
            match rt.block_on(run(cli.run)) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("faultline-agent: {e}");
                    1
                }
            }
        }
    };
    std::process::exit(code);
}

fn status(state_dir: &Path, json: bool) -> i32 {
    let paths = Paths {
        root: state_dir.to_path_buf(),
    };
    let mut s = match load_status(&paths.status()) {
        Some(s) => s,
        // Killed before its first status write: the spool and the position still tell.
        None if paths.spool().exists() => state::Status {
            position: Position::load(&paths.position()).map(state::without_runs),
            ..Default::default()
        },
        None => {
            eprintln!(
                "no agent state in {} (has the agent run with this --state-dir?)",
                state_dir.display()
            );
            return 1;
        }
    };
    // The spool as it is now, whether or not the agent runs.
    if let Ok(d) = spool::depth(&paths.spool()) {
        s.spool_records = d.records;
        s.spool_bytes = d.bytes;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&s).expect("status serialises"));
        return 0;
    }
    let c = &s.counters;
    let or = |v: &Option<String>| v.clone().unwrap_or_else(|| "never".into());
    println!("node           {} / {} -> {}", s.cluster, s.node, s.server);
    println!("status written {} (pid {})", or(&s.updated_at), s.pid);
    println!("last send      {}", or(&s.last_send_at));
    println!(
        "spool          {} signals, {} of {} bytes",
        s.spool_records, s.spool_bytes, s.spool_max_bytes
    );
    println!(
        "sent           {} accepted, {} duplicates, {} refused by the server",
        c.sent_accepted, c.sent_duplicates, c.rejected
    );
    println!(
        "dropped        {} low-severity (spool full), {} any severity (spool full)",
        c.dropped_low_severity_spool_full, c.dropped_spool_full
    );
    println!(
        "kernel log     {} records read, {} overruns, position {}",
        c.kmsg_records,
        c.kmsg_overruns,
        s.position
            .as_ref()
            .map(|p| match &p.cursor {
                Some(c) => format!("boot {} journal cursor {c}", p.boot_id),
                None => format!("boot {} seq {}", p.boot_id, p.seq),
            })
            .unwrap_or_else(|| "none".into())
    );
    println!(
        "gpus           {} polls, {} failed, {} inventory updates",
        c.gpu_polls, c.gpu_poll_failures, c.gpu_inventory_updates
    );
    println!(
        "storms         {} repeats folded into their run's count, {} runs open",
        c.kmsg_repeats_folded, s.open_runs
    );
    println!(
        "bmc event log  {} reads, {} failed, {} records",
        c.sel_polls, c.sel_poll_failures, c.sel_records
    );
    println!("send failures  {}", c.send_failures);
    println!(
        "last error     {} {}",
        or(&s.last_error_at),
        s.last_error.clone().unwrap_or_default()
    );
    0
}

fn required(v: Option<String>, flag: &str, env: &str) -> Result<String, String> {
    v.map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("{flag} (or {env}) is required"))
}

/// The wall-clock time at which the kernel log's clock read zero: CLOCK_REALTIME minus
/// CLOCK_MONOTONIC, read together (the kernel stamps records with its local clock, which, like
/// CLOCK_MONOTONIC and unlike CLOCK_BOOTTIME, stops while the machine is suspended). Microsecond
/// precise, where `btime` in /proc/stat is whole seconds (up to a second early). Taken again for
/// every batch, so a step of the wall clock (NTP) is followed.
fn boot_time() -> DateTime<Utc> {
    fn read(clock: libc::clockid_t) -> Option<i128> {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
        (unsafe { libc::clock_gettime(clock, &mut ts) } == 0)
            .then(|| i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec))
    }
    // The monotonic reading between two wall-clock ones: its wall time is their midpoint.
    let (Some(before), Some(mono), Some(after)) = (
        read(libc::CLOCK_REALTIME),
        read(libc::CLOCK_MONOTONIC),
        read(libc::CLOCK_REALTIME),
    ) else {
        return Utc::now();
    };
    let boot_ns = before + (after - before) / 2 - mono;
    DateTime::from_timestamp_nanos(boot_ns.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

async fn run(args: RunArgs) -> Result<(), String> {
    let server = required(args.server.clone(), "--server", "FAULTLINE_SERVER")?;
    if !(server.starts_with("http://") || server.starts_with("https://")) {
        return Err(format!("--server {server}: an http:// or https:// URL is needed"));
    }
    let ca_certs = match &args.ca_file {
        None => Vec::new(),
        Some(f) => {
            let pem = std::fs::read(f).map_err(|e| format!("reading --ca-file {}: {e}", f.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("--ca-file {}: {}", f.display(), sender::error_chain(&e)))?;
            if certs.is_empty() {
                return Err(format!("--ca-file {}: no PEM certificate in it", f.display()));
            }
            certs
        }
    };
    let token = match (args.token.clone(), &args.token_file) {
        (Some(t), _) => t,
        (None, Some(f)) => std::fs::read_to_string(f)
            .map_err(|e| format!("reading the token file {}: {e}", f.display()))?
            .trim()
            .to_string(),
        (None, None) => return Err("--token (or FAULTLINE_TOKEN, or --token-file) is required".into()),
    };
    let cluster = required(args.cluster.clone(), "--cluster", "FAULTLINE_CLUSTER")?;
    let node = match args.node.clone() {
        Some(n) => n,
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("--node not given and the hostname is unreadable: {e}"))?,
    };
    let node = NodeId { cluster, node };
    let paths = Paths {
        root: args.state_dir.clone(),
    };
    std::fs::create_dir_all(&paths.root).map_err(|e| format!("creating {}: {e}", paths.root.display()))?;
    let spool = Spool::open(&paths.spool(), args.spool_max_bytes)
        .map_err(|e| format!("opening the spool in {}: {e}", paths.spool().display()))?;
    let shared = Arc::new(Shared::default());
    if let Some(prev) = load_status(&paths.status()) {
        shared.counters.restore(&prev.counters);
        let mut s = shared.status.lock().expect("status lock");
        s.last_send_at = prev.last_send_at;
    }
    // The reader's counters as of its saved position (the status may be older or newer than it).
    if let Some(counted) = Position::load(&paths.position()).and_then(|p| p.counted) {
        counted.restore(&shared.counters);
    }
    {
        let mut s = shared.status.lock().expect("status lock");
        s.version = env!("CARGO_PKG_VERSION").into();
        s.pid = std::process::id();
        s.cluster = node.cluster.clone();
        s.node = node.node.clone();
        s.server = server.clone();
        s.started_at = Some(state::now_rfc3339());
        s.spool_max_bytes = args.spool_max_bytes;
    }
    let spool = Arc::new(Mutex::new(spool));
    let wake = Arc::new(tokio::sync::Notify::new());
    let stop = Arc::new(AtomicBool::new(false));

    let sender = Arc::new(
        Sender::new(
            SenderConfig {
                server: server.clone(),
                token: token.clone(),
                batch_records: args.batch,
                batch_bytes: 4 * 1024 * 1024,
                max_backoff: Duration::from_secs_f64(args.max_backoff.max(0.1)),
                timeout: Duration::from_secs(60),
                ca_certs,
            },
            spool.clone(),
            shared.clone(),
            wake.clone(),
        )
        .map_err(|e| format!("building the HTTP client: {e}"))?,
    );

    if let Some(addr) = args.metrics_addr {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("binding the metrics address {addr}: {e}"))?;
        tokio::spawn(metrics::serve(listener, shared.clone(), spool.clone()));
    }

    let gpus = gpu::GpuPoller {
        node: node.clone(),
        boot_id: std::fs::read_to_string(&args.boot_id_file)
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        boot_time: boot_time(),
        nvidia_smi: args.nvidia_smi.clone(),
        interval: Duration::from_secs_f64(args.gpu_interval.max(0.0)),
        server: server.clone(),
        token: token.clone(),
        client: sender.client.clone(),
        paths: paths.clone(),
        spool: spool.clone(),
        shared: shared.clone(),
        wake: wake.clone(),
        max_backoff: Duration::from_secs_f64(args.max_backoff.max(0.1)),
        failing: Mutex::new(false),
    };
    // Kernel lines are attributed with the GPUs of the boot they were logged in: the set of this
    // boot is read before them (a board swapped during the reboot is not named by its
    // predecessor), whether or not the server is reachable.
    if !gpus.interval.is_zero() && !args.no_kmsg {
        gpus.observe_this_boot().await;
    }

    // The kernel log: a blocking reader on its own thread.
    let reader = if args.no_kmsg {
        None
    } else {
        let boot_id = std::fs::read_to_string(&args.boot_id_file)
            .map_err(|e| format!("reading the boot id from {}: {e}", args.boot_id_file.display()))?
            .trim()
            .to_string();
        let journal = JournalOptions {
            journalctl: args.journalctl.clone(),
            directory: args.journal_directory.clone(),
        };
        let journal_source = || {
            let pos = Position::load(&paths.position()).unwrap_or_default();
            KernelLog::journal(&journal, &boot_id, &pos, !args.oneshot)
        };
        let source = match &args.kmsg_file {
            _ if args.journal => journal_source(),
            Some(f) => KernelLog::Kmsg(Source::open_file(f).map_err(|e| format!("opening {}: {e}", f.display()))?),
            None => match Source::open_device(&args.kmsg_device) {
                Ok(s) => KernelLog::Kmsg(s),
                // A container without CAP_SYSLOG, a kernel without /dev/kmsg: the journal has it.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::NotFound
                    ) =>
                {
                    eprintln!(
                        "{} faultline-agent: cannot open {} ({e}): reading the kernel log from the journal",
                        state::now_rfc3339(),
                        args.kmsg_device.display()
                    );
                    journal_source()
                }
                Err(e) => return Err(format!("opening {}: {e}", args.kmsg_device.display())),
            },
        };
        let ctx = ReaderContext {
            node: node.clone(),
            boot_id,
            paths: paths.clone(),
            spool: spool.clone(),
            shared: shared.clone(),
            wake: wake.clone(),
            stop: stop.clone(),
            until_end: args.oneshot,
            compact_window: Duration::from_secs_f64(args.compact_window.max(0.0)),
            journal: matches!(source, KernelLog::Journal { .. }).then(|| journal.clone()),
        };
        Some(tokio::task::spawn_blocking(move || read_kernel_log(source, ctx)))
    };

    let sel = ipmi::SelPoller {
        node: node.clone(),
        ipmitool: args.ipmitool.clone(),
        interval: Duration::from_secs_f64(args.sel_interval.max(0.0)),
        paths: paths.clone(),
        spool: spool.clone(),
        shared: shared.clone(),
        wake: wake.clone(),
    };

    // Status now and every two seconds, so `faultline-agent status` is current.
    write_status(&shared, &spool, &paths);
    {
        let (shared, spool, paths) = (shared.clone(), spool.clone(), paths.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                write_status(&shared, &spool, &paths);
            }
        });
    }

    if args.oneshot {
        if let Some(r) = reader {
            r.await.map_err(|e| format!("the kernel log reader stopped: {e}"))??;
        }
        if !gpus.interval.is_zero() {
            gpus.poll_once().await;
        }
        if !sel.interval.is_zero() {
            sel.poll_once().await;
        }
        sender.run(true).await;
        write_status(&shared, &spool, &paths);
        return Ok(());
    }

    if !gpus.interval.is_zero() {
        tokio::spawn(async move { gpus.run().await });
    }
    if !sel.interval.is_zero() {
        tokio::spawn(async move { sel.run().await });
    }
    {
        let sender = sender.clone();
        tokio::spawn(async move { sender.run(false).await });
    }
    shutdown_signal().await;
    stop.store(true, Ordering::SeqCst);
    if let Some(r) = reader {
        // The reader polls without blocking; it sees `stop` within its idle wait.
        let _ = tokio::time::timeout(Duration::from_secs(2), r).await;
    }
    write_status(&shared, &spool, &paths);
    Ok(())
}

fn write_status(shared: &Shared, spool: &Mutex<Spool>, paths: &Paths) {
    {
        let sp = spool.lock().expect("spool lock");
        let mut s = shared.status.lock().expect("status lock");
        s.spool_records = sp.len();
        s.spool_bytes = sp.bytes();
        let position = Position::load(&paths.position());
        s.open_runs = position.as_ref().map_or(0, |p| p.runs.len() as u64);
        s.position = position.map(state::without_runs);
    }
    if let Err(e) = shared.save(&paths.status()) {
        eprintln!("faultline-agent: writing {}: {e}", paths.status().display());
    }
}

async fn shutdown_signal() {
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

struct ReaderContext {
    node: NodeId,
    boot_id: String,
    paths: Paths,
    spool: Arc<Mutex<Spool>>,
    shared: Arc<Shared>,
    wake: Arc<tokio::sync::Notify>,
    stop: Arc<AtomicBool>,
    /// Return at the end of the input (`--oneshot`).
    until_end: bool,
    /// The storm compactor's window (zero: off).
    compact_window: Duration,
    /// How the journal is read, when it is the source (for the previous boot's last records).
    journal: Option<JournalOptions>,
}

/// Reads records, spools the signals among them (fsync'd), then moves the position past them.
/// Records at or below the saved position of this boot are skipped; a new boot id starts from
/// the first record of the ring buffer (or file), so the lines logged before the agent started
/// are read too. Repeats are folded by the storm compactor, whose open runs are saved with the
/// position.
fn read_kernel_log(mut source: KernelLog, ctx: ReaderContext) -> Result<(), String> {
    finish_previous_boot(&ctx)?;
    // A boot this agent reads is recorded before its first record is: killed before its first
    // save, the agent still knows after a reboot that this boot is to be finished.
    if Position::load(&ctx.paths.position()).is_none_or(|p| p.boot_id != ctx.boot_id) {
        Position {
            boot_id: ctx.boot_id.clone(),
            counted: Some(state::ReaderCounts::of(&ctx.shared.counters)),
            ..Default::default()
        }
        .save(&ctx.paths.position())
        .map_err(|e| format!("saving the kernel log position: {e}"))?;
    }
    let new_compactor = || storm::Compactor::new(ctx.node.clone(), ctx.boot_id.clone(), ctx.compact_window);
    let load = || {
        let mut pos = match Position::load(&ctx.paths.position()) {
            Some(p) if p.boot_id == ctx.boot_id => p,
            _ => Position {
                boot_id: ctx.boot_id.clone(),
                ..Default::default()
            },
        };
        // Records after the saved position are read again: they count from there.
        if let Some(counted) = pos.counted {
            counted.restore(&ctx.shared.counters);
        }
        let mut compactor = new_compactor();
        compactor.restore(std::mem::take(&mut pos.runs));
        (pos, compactor)
    };
    // `pos.seq` is the next kernel sequence number to read; `pos.cursor` the journal's last entry.
    let (mut pos, mut compactor) = load();
    let mark = |p: &Position| (p.seq, p.cursor.clone());
    let mut saved = mark(&pos);
    let mut last_save = Instant::now();
    let mut reported_error = false;
    // The GPUs of this boot; the GPU poller says when it saved a new set.
    let mut gpu_set_version = ctx.shared.gpu_set_version.load(Ordering::SeqCst);
    let mut gpus = gpu::GpusByBus::load(&ctx.paths, &ctx.boot_id);
    loop {
        if ctx.stop.load(Ordering::SeqCst) {
            break;
        }
        let polled = match source.poll() {
            Ok(p) => {
                reported_error = false;
                p
            }
            // Reading to the end (`--oneshot`): a journal that cannot be read is the answer.
            Err(e) if ctx.until_end && matches!(source, KernelLog::Journal { .. }) => {
                return Err(format!("reading the kernel log from the journal: {e}"));
            }
            Err(e) => {
                if !reported_error {
                    ctx.shared.error(format!("reading the kernel log: {e}"));
                    reported_error = true;
                }
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
        };
        let now_ms = Utc::now().timestamp_millis();
        let mut out = Vec::new();
        let mut read = 0;
        let (idle, end) = match polled {
            Batch::Records(reads) => {
                let now = Utc::now();
                let this_boot = boot_time();
                let version = ctx.shared.gpu_set_version.load(Ordering::SeqCst);
                if version != gpu_set_version {
                    gpus = gpu::GpusByBus::load(&ctx.paths, &ctx.boot_id);
                    gpu_set_version = version;
                }
                for r in reads {
                    let boot_time = r.boot_time(this_boot);
                    let Read {
                        record: rec, cursor, ..
                    } = r;
                    match &cursor {
                        // Read before: skipped, not counted again.
                        None if rec.seq < pos.seq => continue,
                        None => pos.seq = rec.seq + 1,
                        Some(c) => pos.cursor = Some(c.clone()),
                    }
                    read += 1;
                    if let Some((sev, mut event)) = signals::kmsg_event(&ctx.node, &ctx.boot_id, boot_time, &rec, now) {
                        if let Some(c) = &cursor {
                            signals::from_journal(&mut event, &ctx.node, &ctx.boot_id, c);
                        }
                        gpus.attribute(&mut event);
                        out.extend(compactor.push(rec.ts_us, (sev, event), now_ms));
                    }
                }
                out.extend(compactor.close_due(now_ms));
                (false, false)
            }
            Batch::Overrun => {
                ctx.shared.add(&ctx.shared.counters.kmsg_overruns, 1);
                (false, false)
            }
            // The journal has ended only when journalctl has (it may be idle before its end).
            polled @ (Batch::Idle | Batch::End) => {
                let end = ctx.until_end && (matches!(polled, Batch::End) || matches!(source, KernelLog::Kmsg(_)));
                out.extend(if end {
                    compactor.close_all()
                } else {
                    compactor.close_due(now_ms)
                });
                (true, end)
            }
        };
        if let Err(e) = spool::append_signals(&ctx.spool, &ctx.shared, &ctx.wake, out) {
            // Not spooled: go back to the saved position and runs and read those records again.
            ctx.shared.error(format!("writing to the spool: {e}"));
            (pos, compactor) = load();
            saved = mark(&pos);
            std::thread::sleep(Duration::from_secs(1));
            source = source
                .reopen(&ctx.boot_id, &pos)
                .map_err(|e| format!("reopening the kernel log: {e}"))?;
            continue;
        }
        // Counted once their signals are spooled: a status that shows them read shows them kept.
        ctx.shared.add(&ctx.shared.counters.kmsg_records, read);
        ctx.shared.add(
            &ctx.shared.counters.kmsg_repeats_folded,
            std::mem::take(&mut compactor.folded),
        );
        // The position after the spool: a crash in between reads the records again, and their
        // signals, with the same ids, are duplicates to the server.
        let moved = mark(&pos) != saved || compactor.changed;
        if moved && (idle || last_save.elapsed() >= Duration::from_secs(1)) {
            save_position(&pos, &mut compactor, &ctx)?;
            saved = mark(&pos);
            last_save = Instant::now();
        }
        if end {
            break;
        }
        if idle {
            std::thread::sleep(source.idle_wait());
        }
    }
    if mark(&pos) != saved || compactor.changed {
        save_position(&pos, &mut compactor, &ctx)?;
    }
    Ok(())
}

/// What the previous boot left, once, after a reboot: the runs of repeats it had open are sent
/// with their counts so far, and, from the journal, the records it logged after the saved cursor
/// (the last lines before a crash are often the ones that matter; the kernel's ring buffer lost
/// them with the reboot, a persistent journal kept them). Then the position moves to this boot.
fn finish_previous_boot(ctx: &ReaderContext) -> Result<(), String> {
    let Some(prev) = Position::load(&ctx.paths.position()).filter(|p| p.boot_id != ctx.boot_id) else {
        return Ok(());
    };
    let mut compactor = storm::Compactor::new(ctx.node.clone(), prev.boot_id.clone(), ctx.compact_window);
    compactor.restore(prev.runs.clone());
    // Attributed with that boot's boards, as its reader did: a line read again after a crash gets
    // the same identity and id, a duplicate to the server.
    let gpus = gpu::GpusByBus::load(&ctx.paths, &prev.boot_id);
    let mut out = Vec::new();
    let mut read = 0;
    // With no cursor, the agent read nothing of that boot (killed before its first record, or its
    // journal was empty so far): the boot is read from its first record.
    if let Some(journal) = &ctx.journal {
        let config = journal::JournalConfig {
            journalctl: journal.journalctl.clone(),
            directory: journal.directory.clone(),
            after_cursor: prev.cursor.clone(),
            follow: false,
            boot_id: Some(prev.boot_id.clone()),
        };
        let now = Utc::now();
        let mut source =
            journal::JournalSource::spawn(&config).map_err(|e| format!("reading the previous boot's journal: {e}"))?;
        loop {
            match source.poll() {
                Ok(journal::JournalPoll::Records(records)) => {
                    for r in records.into_iter().map(kernel_log::journal_read) {
                        read += 1;
                        // That boot's start is not this boot's: journald dates its records.
                        let boot_time = r.boot_time(boot_time());
                        let Read { record, cursor, .. } = r;
                        let cursor = cursor.unwrap_or_default();
                        if let Some((sev, mut event)) =
                            signals::kmsg_event(&ctx.node, &prev.boot_id, boot_time, &record, now)
                        {
                            signals::from_journal(&mut event, &ctx.node, &prev.boot_id, &cursor);
                            gpus.attribute(&mut event);
                            out.extend(compactor.push(record.ts_us, (sev, event), now.timestamp_millis()));
                        }
                    }
                }
                Ok(journal::JournalPoll::Idle) => std::thread::sleep(Duration::from_millis(50)),
                Ok(journal::JournalPoll::Ended(exit)) => {
                    if !exit.success() {
                        ctx.shared.error(format!("reading the previous boot's journal: {exit}"));
                    }
                    break;
                }
                Err(e) => {
                    ctx.shared.error(format!("reading the previous boot's journal: {e}"));
                    break;
                }
            }
        }
    }
    out.extend(compactor.close_all());
    spool::append_signals(&ctx.spool, &ctx.shared, &ctx.wake, out)
        .map_err(|e| format!("writing the previous boot's signals to the spool: {e}"))?;
    ctx.shared.add(&ctx.shared.counters.kmsg_records, read);
    ctx.shared.add(
        &ctx.shared.counters.kmsg_repeats_folded,
        std::mem::take(&mut compactor.folded),
    );
    let this_boot = Position {
        boot_id: ctx.boot_id.clone(),
        counted: Some(state::ReaderCounts::of(&ctx.shared.counters)),
        ..Default::default()
    };
    this_boot
        .save(&ctx.paths.position())
        .map_err(|e| format!("saving the kernel log position: {e}"))
}

/// Saves the position with the compactor's open runs and the reader's counters, in one file
/// written atomically: after a crash the counters go on from the position the reading goes on from.
fn save_position(pos: &Position, compactor: &mut storm::Compactor, ctx: &ReaderContext) -> Result<(), String> {
    let p = Position {
        runs: compactor.runs(),
        counted: Some(state::ReaderCounts::of(&ctx.shared.counters)),
        ..pos.clone()
    };
    p.save(&ctx.paths.position())
        .map_err(|e| format!("saving the kernel log position: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record the kernel stamps now (its clock read now) is dated within 10 ms of the wall clock
    /// (`btime` of /proc/stat, whole seconds, was up to a second early).
    #[test]
    fn a_record_stamped_now_is_dated_now() {
        for _ in 0..100 {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: a valid, writable timespec.
            assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) }, 0);
            let wall = Utc::now();
            let kernel_us = ts.tv_sec * 1_000_000 + ts.tv_nsec / 1_000;
            let dated = boot_time() + chrono::Duration::microseconds(kernel_us);
            let error = (dated - wall).num_microseconds().unwrap().abs();
            assert!(error < 10_000, "dated {dated}, wall clock {wall}: {error} us apart");
        }
    }
}
