use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use faultline::app::configuration::{AppConfig, ServeSettings};
use faultline::app::{startup, telemetry};
use faultline::cli::{Cli, Command, MigrateArgs, ReportArgs, ReportFormat, SimulateArgs};
use faultline::db::database;
use faultline::domain::auth::generate_admin_token;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::ForecastBacktest(args) => {
            telemetry::init_tracing();
            let by =
                faultline::queries::parts::PartGrouping::parse(&args.by).map_err(|e| anyhow::anyhow!("--by: {e}"))?;
            let event = match args.event.as_str() {
                "removal" => faultline::queries::parts::PartEvent::Removal,
                "hardware_failure" => faultline::queries::parts::PartEvent::HardwareFailure,
                other => anyhow::bail!("--event {other}: not removal or hardware_failure"),
            };
            anyhow::ensure!(
                args.horizon_days.is_finite() && (1.0..=730.0).contains(&args.horizon_days),
                "--horizon-days must be between 1 and 730"
            );
            let database = database::open(args.db.database_url.as_deref(), &args.db.data_dir).await?;
            let request = faultline::queries::forecast::ForecastRequest {
                by,
                event,
                to: args.to.unwrap_or_else(chrono::Utc::now),
                request: faultline::analytics::forecast::Request {
                    horizon_days: args.horizon_days,
                    interval: 0.9,
                    service_level: 0.95,
                    afr_window_days: 365.25,
                },
                backtest: true,
            };
            let answer =
                faultline::queries::forecast::failure_forecast(&database.pool, args.cluster.as_deref(), &request)
                    .await?;
            print!("{}", faultline::devtools::forecast_backtest::table(&answer));
            Ok(())
        }
        Command::Openapi => {
            print!("{}", faultline::http::openapi::openapi_json());
            Ok(())
        }
        Command::BenchPostmortems(args) => {
            telemetry::init_tracing();
            let server =
                faultline::db::embedded_pg::resolve(args.database.database_url.as_deref(), &args.database.data_dir)
                    .await?;
            let report = faultline::devtools::bench_postmortems::run(
                faultline::devtools::bench_postmortems::PostmortemBenchOptions {
                    server_url: server.url().to_string(),
                    nodes: args.nodes,
                    failures_per_node: args.failures_per_node,
                    clients: args.clients,
                    batch: args.batch,
                    db_name: args.db_name,
                },
            )
            .await;
            server.stop().await?;
            println!("{}", report?);
            Ok(())
        }
        Command::BenchParts(args) => {
            telemetry::init_tracing();
            let server =
                faultline::db::embedded_pg::resolve(args.database.database_url.as_deref(), &args.database.data_dir)
                    .await?;
            let report = faultline::devtools::bench_parts::run(faultline::devtools::bench_parts::PartsBenchOptions {
                server_url: server.url().to_string(),
                nodes: args.nodes,
                batch: args.batch,
                samples: args.samples,
                db_name: args.db_name,
            })
            .await;
            server.stop().await?;
            println!("{}", report?);
            Ok(())
        }
        Command::BenchParse(faultline::cli::BenchParseArgs { lines }) => {
            let r = faultline::logparse::bench::bench_parse(lines);
            println!(
                "parsed {} lines ({} signals) in {:.4} s (best of {} passes): {:.0} lines/s per core, {:.1} MB/s",
                r.lines,
                r.signals,
                r.best_seconds,
                r.passes,
                r.lines_per_second,
                r.bytes_per_second / 1e6
            );
            Ok(())
        }
        Command::Migrate(MigrateArgs { db, distributed }) => {
            telemetry::init_tracing();
            let database = database::open(db.database_url.as_deref(), &db.data_dir).await?;
            tracing::info!("migrations applied");
            if distributed {
                faultline::storage::distribution::create_citus_extension(&database.pool).await?;
                let done = faultline::storage::distribution::distribute(&database.pool).await?;
                tracing::info!(
                    changed = ?done.changed,
                    shards = ?done.shard_count,
                    "tables distributed on Citus by cluster"
                );
            }
            database.pool.close().await;
            database.server.stop().await
        }
        Command::Serve(settings) => {
            telemetry::init_tracing();
            serve(settings).await
        }
        Command::Simulate(args) => simulate(args).await,
        Command::Soak(args) => soak(args).await,
        Command::Gpud(faultline::cli::GpudArgs {
            command: faultline::cli::GpudCommand::Sync(args),
        }) => faultline::sync::gpud::run(args).await,
        Command::Report(args) => report(args).await,
        Command::Slurm(faultline::cli::SlurmCommand::Sync(args)) => faultline::sync::slurm::run(args).await,
        Command::Bench(args) => {
            telemetry::init_tracing();
            let server =
                faultline::db::embedded_pg::resolve(args.database.database_url.as_deref(), &args.database.data_dir)
                    .await?;
            let report = faultline::devtools::bench::run(faultline::devtools::bench::BenchOptions {
                server_url: server.url().to_string(),
                signals: args.signals,
                batch: args.batch,
                senders: args.senders,
                seed: args.seed,
                nodes: args.nodes,
                db_name: args.db_name,
                citus_workers: args.citus_workers.into_iter().filter(|w| !w.is_empty()).collect(),
                rebuild_chunk_keys: args.rebuild_chunk_keys,
            })
            .await;
            server.stop().await?;
            println!("{}", report?);
            Ok(())
        }
    }
}

async fn serve(settings: ServeSettings) -> anyhow::Result<()> {
    std::fs::create_dir_all(&settings.database.data_dir)
        .with_context(|| format!("creating data directory {}", settings.database.data_dir.display()))?;
    let database = database::open_with(
        settings.database.database_url.as_deref(),
        &settings.database.data_dir,
        &settings.edge.pool,
    )
    .await?;
    let replica = database::open_replica(settings.read_database_url.as_deref(), &settings.edge.pool).await?;
    let (admin_token, origin) = match settings.admin_token.clone() {
        Some(t) if !t.trim().is_empty() => (t, TokenOrigin::Given),
        _ => load_or_create_admin_token(&settings.database.data_dir)?,
    };
    let config = AppConfig {
        admin_token: admin_token.clone(),
        limits: settings.limits.clone(),
        correlation_window: Duration::from_secs(settings.correlation_window_secs.into()),
        edge: settings.edge.clone(),
        retention: settings.retention.clone(),
        alerts: settings.alerts.clone(),
    };
    let app = startup::Application::build_with_replica(config, database.pool.clone(), replica.clone(), settings.addr)
        .await
        .with_context(|| format!("starting on {}", settings.addr))?;
    if settings.demo {
        let window = app.context().config.fold_window();
        match faultline::devtools::demo::load_if_empty(&database.pool, &app.context().catalog, window).await? {
            Some(l) => tracing::info!(
                nodes = l.nodes,
                jobs = l.jobs,
                events = l.events,
                node_states = l.node_states,
                lifecycles = l.lifecycles,
                failures = l.failures,
                "demo fleet loaded"
            ),
            None => tracing::info!("database already holds events; demo fleet not loaded"),
        }
    }
    let addr = app.local_addr()?;
    tracing::info!(addr = %addr, "faultline listening; API docs at /docs");
    // The token completes the sign-in link and the example when it was just generated (it is shown
    // once anyway), or for a demo (a local trial: the stored one is in the data directory); a token
    // set by flag or environment, or a stored one of a real deployment, stays out of the output.
    let shown = match origin {
        TokenOrigin::Generated => true,
        TokenOrigin::Stored => settings.demo,
        TokenOrigin::Given => false,
    };
    println!(
        "{}",
        faultline::app::welcome::message(addr, shown.then_some(admin_token.as_str()))
    );
    let served = app.run_until(shutdown_signal()).await;
    // A request still running past the deadline may hold a connection, which `close` would wait for.
    if tokio::time::timeout(Duration::from_secs(2), database.pool.close())
        .await
        .is_err()
    {
        tracing::warn!("database connections still in use at exit");
    }
    if let Some(replica) = replica {
        let _ = tokio::time::timeout(Duration::from_secs(2), replica.close()).await;
    }
    database.server.stop().await?;
    Ok(served?)
}

async fn simulate(args: SimulateArgs) -> anyhow::Result<()> {
    use chrono::SubsecRound;
    let start = args
        .start
        .unwrap_or_else(|| chrono::Utc::now().trunc_subsecs(0) - chrono::Duration::days(args.days.into()));
    let fleet = faultline::devtools::simulate::simulate(&faultline::devtools::simulate::SimConfig {
        seed: args.seed,
        start,
        days: args.days,
        nodes: args.nodes,
    });
    eprintln!(
        "simulated {} nodes, {} jobs, {} events, {} failures ({:?}) from {start}",
        fleet.nodes.len(),
        fleet.jobs.len(),
        fleet.events.len(),
        fleet.truth.failures,
        fleet.truth.by_category
    );
    let client = faultline::devtools::client::Client::connect(&args.server, &args.token, args.ca_file.as_deref())?;
    let sent = client.send_fleet(&fleet, args.batch, true).await?;
    eprintln!(
        "  retries (waits the server asked for, connections retried): {}",
        sent.retries()
    );
    Ok(())
}

async fn report(args: ReportArgs) -> anyhow::Result<()> {
    let client = faultline::devtools::client::Client::connect(&args.server, &args.token, args.ca_file.as_deref())?;
    let format = match args.format {
        ReportFormat::Html => "html",
        ReportFormat::Markdown => "markdown",
    };
    let body = client
        .report(args.from, args.to, args.cluster.as_deref(), format)
        .await?;
    match args.out {
        Some(path) => {
            std::fs::write(&path, body).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("report written to {}", path.display());
        }
        None => print!("{body}"),
    }
    Ok(())
}

/// Where the admin token came from, which decides whether the start-up message may show it.
enum TokenOrigin {
    /// `--admin-token` / `FAULTLINE_ADMIN_TOKEN`.
    Given,
    /// The data directory's, from an earlier start.
    Stored,
    /// Generated by this start.
    Generated,
}

/// Reads the admin token stored in the data directory, or creates one and prints it once.
fn load_or_create_admin_token(data_dir: &Path) -> anyhow::Result<(String, TokenOrigin)> {
    let path: PathBuf = data_dir.join("admin-token");
    if let Ok(existing) = std::fs::read_to_string(&path)
        && !existing.trim().is_empty()
    {
        tracing::info!(path = %path.display(), "using the admin token stored in the data directory");
        return Ok((existing.trim().to_string(), TokenOrigin::Stored));
    }
    let token = generate_admin_token();
    write_private(&path, &token).with_context(|| format!("storing the admin token in {}", path.display()))?;
    println!(
        "Generated admin token (stored in {}; shown once):\n  {token}",
        path.display()
    );
    Ok((token, TokenOrigin::Generated))
}

fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    opts.mode(0o600);
    opts.open(path)?.write_all(contents.as_bytes())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = terminate => {} }
    tracing::info!("shutting down");
}

async fn soak(args: faultline::cli::SoakArgs) -> anyhow::Result<()> {
    use faultline::devtools::soak;
    anyhow::ensure!(
        !args.db_name.is_empty()
            && args
                .db_name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
        "--db-name must be lower-case letters, digits and underscores: {}",
        args.db_name
    );
    let me = std::env::current_exe().context("locating this binary")?;
    let agent = args.agent.unwrap_or_else(|| me.with_file_name("faultline-agent"));
    anyhow::ensure!(
        agent.exists(),
        "{} is missing: build it (cargo build -p faultline-agent) or name it with --agent",
        agent.display()
    );
    let work_dir = args.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    let server = if args.own_postgres {
        let dir = work_dir.join(format!("faultline-soak-postgres-{}", std::process::id()));
        faultline::db::embedded_pg::DatabaseServer::Private(
            faultline::db::embedded_pg::PrivateCluster::start(&dir)
                .await
                .context("starting the soak's own PostgreSQL cluster")?,
        )
    } else {
        faultline::db::embedded_pg::resolve(args.database.database_url.as_deref(), &args.database.data_dir).await?
    };
    let opts = soak::SoakOptions {
        server_url: server.url().to_string(),
        db_name: args.db_name,
        seed: args.seed,
        minutes: args.minutes,
        extra_incidents: args.extra_incidents,
        tools: soak::Tools {
            faultline: me,
            agent,
            journalctl: args.journalctl,
            journal_remote: args.journal_remote,
            compact_window: args.compact_window,
            alertmanager: args.alertmanager,
        },
        work_dir: args.work_dir,
        slurm: args.slurm,
    };
    let rounds = match &server {
        faultline::db::embedded_pg::DatabaseServer::Private(cluster) if args.own_postgres => {
            soak::run(&opts, Some(cluster)).await
        }
        _ => soak::run(&opts, None).await,
    };
    server.stop().await?;
    if args.own_postgres
        && let faultline::db::embedded_pg::DatabaseServer::Private(cluster) = &server
        && rounds.as_ref().is_ok_and(|r| r.iter().all(|r| r.passed))
        && let Some(dir) = cluster.pgdata().parent()
    {
        let _ = std::fs::remove_dir_all(dir);
    }
    let rounds = rounds?;
    let failed: Vec<u64> = rounds.iter().filter(|r| !r.passed).map(|r| r.seed).collect();
    println!(
        "soak: {} round(s), seeds {}..={}, {:.1} s; {}",
        rounds.len(),
        rounds.first().map_or(0, |r| r.seed),
        rounds.last().map_or(0, |r| r.seed),
        rounds.iter().map(|r| r.seconds).sum::<f64>(),
        if failed.is_empty() {
            "all passed".to_string()
        } else {
            format!("seed {:?} found differences", failed)
        }
    );
    if !failed.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
