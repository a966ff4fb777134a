//! The command line (`faultline --help`): every flag has an environment variable, a help line and
//! its default (a test checks all three), so `--help` reads as the reference of every setting.
//! Defined in the library so tests can read it; `main.rs` runs it.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::app::configuration::{DatabaseSettings, ServeSettings};

#[derive(Parser)]
#[command(
    name = "faultline",
    version,
    about = "Failure-telemetry warehouse for GPU training clusters",
    after_help = "Every flag can also be set by the environment variable shown beside it (a flag wins \
                  over its variable). Logging: RUST_LOG (default: info,sqlx=warn,tower_http=info).\n\
                  Start here: `faultline serve --demo`, then open the dashboard URL it prints."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the REST service (migrations run first).
    Serve(ServeSettings),
    /// Run the database migrations and exit (on Citus, also distribute the tables).
    Migrate(MigrateArgs),
    /// Print the OpenAPI document.
    Openapi,
    /// Generate a simulated fleet and send it to a server as an agent would.
    Simulate(SimulateArgs),
    /// Fetch the reliability report (HTML with charts, or Markdown tables) from a server.
    Report(ReportArgs),
    /// Measure ingest throughput and analytics latency on a large simulated fleet.
    Bench(BenchArgs),
    /// Measure recording post-mortems on nodes with over a thousand failures each: in bulk, and
    /// one PATCH at a time (the rate over the first and the last thousand).
    BenchPostmortems(BenchPostmortemsArgs),
    /// Measure GPU parts at fleet scale: 100,000 GPUs' inventory posted (then again, unchanged),
    /// and the survival analysis over a Titan-sized history (30,000 parts, 6,000 hard failures).
    BenchParts(BenchPartsArgs),
    /// Read a Slurm cluster's accounting (jobs, node drains and their reasons) into Faultline.
    #[command(subcommand)]
    Slurm(SlurmCommand),
    /// Measure the log-line parsers on one core (99 % noise, 1 % signals) and print lines/s.
    BenchParse(BenchParseArgs),
    /// Run the failure forecast's backtest over a database and print, per group, each origin's
    /// forecasts against what happened and each method's scores.
    ForecastBacktest(ForecastBacktestArgs),
    /// leptonai/gpud on a node: `faultline gpud sync` copies its events and GPUs into Faultline.
    Gpud(GpudArgs),
    /// A site in a box: from a seed, eight nodes with real agents and two servers on a fresh
    /// database, a timeline of incidents with servers and agents killed along the way; every answer
    /// compared with a model of the documented rules. Exits non-zero on a difference.
    Soak(SoakArgs),
}

#[derive(clap::Args)]
pub struct SoakArgs {
    #[command(flatten)]
    pub database: DatabaseSettings,
    /// Seed of the first round's site and timeline (the same seed, the same scenario).
    #[arg(long, env = "FAULTLINE_SOAK_SEED", default_value_t = 1)]
    pub seed: u64,
    /// Go on with the next seeds until this many minutes have passed (0: one round).
    #[arg(long, env = "FAULTLINE_SOAK_MINUTES", default_value_t = 0.0)]
    pub minutes: f64,
    /// Incidents drawn at random beyond one of each kind.
    #[arg(long, env = "FAULTLINE_SOAK_EXTRA_INCIDENTS", default_value_t = 3)]
    pub extra_incidents: usize,
    /// Run the rounds on a PostgreSQL cluster of the soak's own (initdb'd in the work directory,
    /// removed at the end) and restart it (a crash: `pg_ctl stop -m immediate`) as a fault of the
    /// system; without it the rounds use the database server above and never restart it.
    #[arg(long, env = "FAULTLINE_SOAK_OWN_POSTGRES")]
    pub own_postgres: bool,
    /// Prefix of each round's database (`<prefix>_<seed>`): dropped and created afresh, dropped
    /// again when the round passes.
    #[arg(long, env = "FAULTLINE_SOAK_DB_NAME", default_value = "faultline_soak")]
    pub db_name: String,
    /// The node agent's binary [default: faultline-agent beside this binary].
    #[arg(long, env = "FAULTLINE_SOAK_AGENT")]
    pub agent: Option<PathBuf>,
    /// The journalctl the agents read their node's journal with.
    #[arg(long, env = "FAULTLINE_SOAK_JOURNALCTL", default_value = "journalctl")]
    pub journalctl: String,
    /// systemd-journal-remote, which writes the nodes' journal files.
    #[arg(
        long,
        env = "FAULTLINE_SOAK_JOURNAL_REMOTE",
        default_value = "/lib/systemd/systemd-journal-remote"
    )]
    pub journal_remote: PathBuf,
    /// Prometheus Alertmanager, which the site's silence alert rule notifies (restarted as a fault).
    #[arg(
        long,
        env = "FAULTLINE_SOAK_ALERTMANAGER",
        default_value = "/usr/bin/prometheus-alertmanager"
    )]
    pub alertmanager: PathBuf,
    /// The agents' storm window in seconds (their --compact-window): repeats are sent when a window
    /// closes, so the end of a round waits for the last one; shorter than the agent's default (60)
    /// to keep a round short.
    #[arg(long, env = "FAULTLINE_SOAK_COMPACT_WINDOW", default_value_t = 10.0)]
    pub compact_window: f64,
    /// Where each round keeps its processes' files (logs, journals, spools), removed when it passes
    /// [default: the temp directory].
    #[arg(long, env = "FAULTLINE_SOAK_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
    /// The Slurm track: a real Slurm on three of the site's nodes (a requeued job, a job held
    /// after its node went down) read by `faultline slurm sync --follow`. `auto`: where the
    /// machine has Slurm, munge, MariaDB and root; else the rounds say they run without it.
    #[arg(long, env = "FAULTLINE_SOAK_SLURM", value_enum, default_value = "auto")]
    pub slurm: crate::devtools::soak::SlurmTrack,
}

#[derive(clap::Args)]
pub struct GpudArgs {
    #[command(subcommand)]
    pub command: GpudCommand,
}

#[derive(Subcommand)]
pub enum GpudCommand {
    /// Pull gpud's events (`GET /v1/events`) and machine info (`GET /machine-info`) and send them
    /// to Faultline: the events as signals, the GPUs' UUIDs and serials into the parts inventory.
    Sync(GpudSyncArgs),
}

#[derive(clap::Args)]
pub struct GpudSyncArgs {
    /// gpud's local API, plain HTTP (gpud's HTTPS port has a self-signed certificate: put a
    /// forwarder in front of it, see docs/ingest/gpud.md).
    #[arg(long, env = "FAULTLINE_GPUD_URL", default_value = "http://127.0.0.1:15133")]
    pub url: String,
    /// Base URL of the Faultline server, http:// or https://.
    #[arg(long, env = "FAULTLINE_SERVER", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// PEM certificates (one or a bundle) to trust for an https:// server besides the host's
    /// certificate store: a site's own certificate authority [default: none].
    #[arg(long, env = "FAULTLINE_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// An agent (or admin) token.
    #[arg(long, env = "FAULTLINE_TOKEN", hide_env_values = true)]
    pub token: String,
    /// The cluster the node belongs to.
    #[arg(long, env = "FAULTLINE_CLUSTER")]
    pub cluster: String,
    /// The node's hostname in Faultline [default: the hostname gpud reports].
    #[arg(long, env = "FAULTLINE_GPUD_NODE")]
    pub node: Option<String>,
    /// Hours of events to pull, ending now (gpud keeps three days; re-sent events are duplicates).
    #[arg(long, env = "FAULTLINE_GPUD_SINCE_HOURS", default_value_t = 72)]
    pub since_hours: u32,
    /// Repeat every this many seconds [default: sync once and exit].
    #[arg(long, env = "FAULTLINE_GPUD_EVERY_SECONDS")]
    pub every: Option<u64>,
}

#[derive(clap::Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub db: DatabaseSettings,
    /// Create the `citus` extension (the server must preload it) and distribute the tables by
    /// cluster. A database that has the extension is distributed by every migrate and start anyway.
    #[arg(long, env = "FAULTLINE_DISTRIBUTED", default_value_t = false)]
    pub distributed: bool,
}

#[derive(clap::Args)]
pub struct ForecastBacktestArgs {
    #[command(flatten)]
    pub db: DatabaseSettings,
    /// Restrict to one cluster [default: every cluster].
    #[arg(long, env = "FAULTLINE_CLUSTER")]
    pub cluster: Option<String>,
    /// model, generation, cluster, all, or attribute:KEY.
    #[arg(long, env = "FAULTLINE_FORECAST_BY", default_value = "model")]
    pub by: String,
    /// What counts as a failure: removal or hardware_failure.
    #[arg(long, env = "FAULTLINE_FORECAST_EVENT", default_value = "removal")]
    pub event: String,
    /// Days forecast after each origin.
    #[arg(long, env = "FAULTLINE_FORECAST_HORIZON_DAYS", default_value_t = 91.0)]
    pub horizon_days: f64,
    /// The last instant of history used (RFC 3339) [default: now].
    #[arg(long, env = "FAULTLINE_FORECAST_TO")]
    pub to: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(clap::Args)]
pub struct SimulateArgs {
    /// Base URL of the Faultline server, http:// or https://.
    #[arg(long, env = "FAULTLINE_SERVER", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// PEM certificates (one or a bundle) to trust for an https:// server besides the host's
    /// certificate store: a site's own certificate authority [default: none].
    #[arg(long, env = "FAULTLINE_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// An admin token (an agent token sends all but the failure lifecycles, which need failures
    /// read back).
    #[arg(long, env = "FAULTLINE_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Seed of the simulation: the same seed, start and size give the same fleet.
    #[arg(long, env = "FAULTLINE_SIMULATE_SEED", default_value_t = 42)]
    pub seed: u64,
    /// Days simulated, ending now (or starting at --start); the default is what `serve --demo` loads.
    #[arg(long, env = "FAULTLINE_SIMULATE_DAYS", default_value_t = crate::devtools::demo::DEMO_DAYS)]
    pub days: u32,
    /// Nodes in the fleet (8 GPUs each, mostly).
    #[arg(long, env = "FAULTLINE_SIMULATE_NODES", default_value_t = 256)]
    pub nodes: u32,
    /// First instant, RFC 3339 [default: `days` days before now].
    #[arg(long, env = "FAULTLINE_SIMULATE_START", value_parser = crate::domain::window::parse_rfc3339)]
    pub start: Option<chrono::DateTime<chrono::Utc>>,
    /// Events per request.
    #[arg(long, env = "FAULTLINE_SIMULATE_BATCH", default_value_t = 5000)]
    pub batch: usize,
}

#[derive(Subcommand)]
pub enum SlurmCommand {
    /// Send the jobs (`sacct`) and node events (`sacctmgr show event`) recorded since the server's
    /// cursor for the cluster, then move the cursor; with `--follow`, again every N seconds.
    Sync(SlurmSyncArgs),
}

#[derive(clap::Args, Clone)]
pub struct SlurmSyncArgs {
    /// Base URL of the Faultline server, http:// or https://.
    #[arg(long, env = "FAULTLINE_SERVER", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// PEM certificates (one or a bundle) to trust for an https:// server besides the host's
    /// certificate store: a site's own certificate authority [default: none].
    #[arg(long, env = "FAULTLINE_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// An agent token (scoped to the cluster) or an admin token.
    #[arg(long, env = "FAULTLINE_TOKEN", hide_env_values = true)]
    pub token: String,
    /// The cluster's name in Faultline.
    #[arg(long, env = "FAULTLINE_SLURM_CLUSTER")]
    pub cluster: String,
    /// The cluster's name in Slurm's accounting (`sacct -M`), when it differs [default: the
    /// cluster Slurm's configuration names].
    #[arg(long, env = "FAULTLINE_SLURM_ACCOUNTING_CLUSTER")]
    pub slurm_cluster: Option<String>,
    /// The `sacct` program.
    #[arg(long, env = "FAULTLINE_SLURM_SACCT", default_value = "sacct")]
    pub sacct: PathBuf,
    /// The `sacctmgr` program.
    #[arg(long, env = "FAULTLINE_SLURM_SACCTMGR", default_value = "sacctmgr")]
    pub sacctmgr: PathBuf,
    /// Where the first sync of a cluster starts, RFC 3339 [default: 7 days ago].
    #[arg(long, env = "FAULTLINE_SLURM_SINCE", value_parser = crate::domain::window::parse_rfc3339)]
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    /// Seconds each window reaches back before the cursor: slurmdbd records a job's end a little
    /// after the job ends, and a re-read record is a duplicate.
    #[arg(long, env = "FAULTLINE_SLURM_OVERLAP_SECS", default_value_t = 300)]
    pub overlap_secs: u64,
    /// Repeat every N seconds instead of once (a failed pass is reported and retried at the next).
    #[arg(long, env = "FAULTLINE_SLURM_FOLLOW_SECS")]
    pub follow: Option<u64>,
    /// Jobs or signals per request.
    #[arg(long, env = "FAULTLINE_SLURM_BATCH", default_value_t = 1000)]
    pub batch: usize,
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Base URL of the Faultline server, http:// or https://.
    #[arg(long, env = "FAULTLINE_SERVER", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// PEM certificates (one or a bundle) to trust for an https:// server besides the host's
    /// certificate store: a site's own certificate authority [default: none].
    #[arg(long, env = "FAULTLINE_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// A reader (or admin) token.
    #[arg(long, env = "FAULTLINE_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Start of the window, RFC 3339 [default: 30 days before `to`].
    #[arg(long, env = "FAULTLINE_REPORT_FROM", value_parser = crate::domain::window::parse_rfc3339)]
    pub from: Option<chrono::DateTime<chrono::Utc>>,
    /// End of the window (exclusive), RFC 3339 [default: now].
    #[arg(long, env = "FAULTLINE_REPORT_TO", value_parser = crate::domain::window::parse_rfc3339)]
    pub to: Option<chrono::DateTime<chrono::Utc>>,
    /// Restrict to one cluster [default: every cluster the token may read].
    #[arg(long, env = "FAULTLINE_REPORT_CLUSTER")]
    pub cluster: Option<String>,
    /// HTML (charts, for a browser) or Markdown (tables, for a wiki or a ticket).
    #[arg(long, env = "FAULTLINE_REPORT_FORMAT", value_enum, default_value_t = ReportFormat::Html)]
    pub format: ReportFormat,
    /// Where to write the report [default: standard output].
    #[arg(long, env = "FAULTLINE_REPORT_OUT")]
    pub out: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ReportFormat {
    Html,
    Markdown,
}

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub database: DatabaseSettings,
    /// Approximate number of signals to generate.
    #[arg(long, env = "FAULTLINE_BENCH_SIGNALS", default_value_t = 1_000_000)]
    pub signals: usize,
    /// Events per request.
    #[arg(long, env = "FAULTLINE_BENCH_BATCH", default_value_t = 5000)]
    pub batch: usize,
    /// Requests in flight at once (a fleet's agents send concurrently; 1 = one sender in turn).
    #[arg(long, env = "FAULTLINE_BENCH_SENDERS", default_value_t = 4)]
    pub senders: usize,
    /// Seed of the simulated fleet.
    #[arg(long, env = "FAULTLINE_BENCH_SEED", default_value_t = 7)]
    pub seed: u64,
    /// A fixed fleet of this many nodes (8 GPUs each, mostly; 12,500 is a 100,000-GPU fleet),
    /// simulated over as many years as --signals needs [default: one year, the fleet sized to the
    /// signals].
    #[arg(long, env = "FAULTLINE_BENCH_NODES")]
    pub nodes: Option<u32>,
    /// Database to drop and recreate for the run (one per concurrent run on a shared server).
    #[arg(long, env = "FAULTLINE_BENCH_DB_NAME", default_value = "faultline_bench")]
    pub db_name: String,
    /// Citus workers (PostgreSQL URLs without a database, comma-separated): the database is then
    /// created on each of them too and the server's one becomes their coordinator, so the run
    /// measures Faultline distributed by cluster. Empty: one PostgreSQL.
    #[arg(
        long,
        env = "FAULTLINE_BENCH_CITUS_WORKERS",
        value_delimiter = ',',
        default_value = ""
    )]
    pub citus_workers: Vec<String>,
    /// Correlation keys per transaction of the catalog rebuild the bench triggers (as
    /// FAULTLINE_REBUILD_CHUNK_KEYS for `serve`).
    #[arg(long, env = "FAULTLINE_BENCH_REBUILD_CHUNK_KEYS", default_value_t = crate::app::configuration::DEFAULT_REBUILD_CHUNK_KEYS)]
    pub rebuild_chunk_keys: usize,
}

#[derive(clap::Args)]
pub struct BenchPostmortemsArgs {
    #[command(flatten)]
    pub database: DatabaseSettings,
    /// Nodes of the history (one cluster).
    #[arg(long, env = "FAULTLINE_BENCH_PM_NODES", default_value_t = 15)]
    pub nodes: u32,
    /// Failures on each node (6 h apart: one correlation key per node).
    #[arg(long, env = "FAULTLINE_BENCH_PM_FAILURES_PER_NODE", default_value_t = 1_334)]
    pub failures_per_node: u32,
    /// Clients sending PATCHes at once.
    #[arg(long, env = "FAULTLINE_BENCH_PM_CLIENTS", default_value_t = 8)]
    pub clients: usize,
    /// Post-mortems per import request (at most 1,000).
    #[arg(long, env = "FAULTLINE_BENCH_PM_BATCH", default_value_t = 1_000)]
    pub batch: usize,
    /// Prefix of the two databases to drop and recreate for the run (`_bulk`, `_patch`).
    #[arg(long, env = "FAULTLINE_BENCH_PM_DB_NAME", default_value = "faultline_bench_pm")]
    pub db_name: String,
}

#[derive(clap::Args)]
pub struct BenchPartsArgs {
    #[command(flatten)]
    pub database: DatabaseSettings,
    /// Nodes of 8 GPUs whose inventory is posted.
    #[arg(long, env = "FAULTLINE_BENCH_PARTS_NODES", default_value_t = 12_500)]
    pub nodes: u32,
    /// Nodes per inventory request.
    #[arg(long, env = "FAULTLINE_BENCH_PARTS_BATCH", default_value_t = 500)]
    pub batch: usize,
    /// Survival requests timed per grouping.
    #[arg(long, env = "FAULTLINE_BENCH_PARTS_SAMPLES", default_value_t = 20)]
    pub samples: usize,
    /// Prefix of the two databases to drop and recreate for the run (`_inventory`, `_history`).
    #[arg(long, env = "FAULTLINE_BENCH_PARTS_DB_NAME", default_value = "faultline_bench_parts")]
    pub db_name: String,
}

#[derive(clap::Args)]
pub struct BenchParseArgs {
    /// Log lines generated and parsed per pass.
    #[arg(long, env = "FAULTLINE_BENCH_PARSE_LINES", default_value_t = 100_000)]
    pub lines: usize,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every option of every subcommand: its environment variable, a help line, and a default
    /// (shown by clap, or stated in the help as `[default: ...]`), unless it is required.
    #[test]
    fn every_flag_shows_its_environment_variable_help_and_default() {
        let cli = Cli::command();
        cli.clone().debug_assert();
        let mut missing = Vec::new();
        for sub in cli.get_subcommands() {
            for arg in sub.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") || arg.is_positional() {
                    continue;
                }
                let name = format!("{} --{}", sub.get_name(), arg.get_long().unwrap_or(id));
                if arg.get_env().is_none() {
                    missing.push(format!("{name}: no environment variable"));
                }
                let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
                if help.trim().is_empty() {
                    missing.push(format!("{name}: no help"));
                }
                let is_flag = matches!(arg.get_action(), clap::ArgAction::SetTrue);
                let has_default = !arg.get_default_values().is_empty() || help.contains("[default: ");
                if !is_flag && !arg.is_required_set() && !has_default {
                    missing.push(format!("{name}: no default shown"));
                }
            }
        }
        assert!(missing.is_empty(), "{missing:#?}");
    }

    /// Secrets never appear in `--help`, even when set in the environment.
    #[test]
    fn secret_values_stay_out_of_the_help() {
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            for arg in sub.get_arguments() {
                let secret = arg
                    .get_env()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| e.ends_with("TOKEN") || e.ends_with("DATABASE_URL"));
                if secret {
                    assert!(arg.is_hide_env_values_set(), "{} --{}", sub.get_name(), arg.get_id());
                }
            }
        }
    }
}
