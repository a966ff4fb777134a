use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use faultline::configuration::{AppConfig, DatabaseSettings, ServeSettings};
use faultline::domain::auth::generate_admin_token;
use faultline::{database, startup, telemetry};

#[derive(Parser)]
#[command(name = "faultline", version, about = "Failure-telemetry warehouse for GPU training clusters")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the REST service (migrations run first).
    Serve(ServeSettings),
    /// Run the database migrations and exit.
    Migrate(DatabaseSettings),
    /// Print the OpenAPI document.
    Openapi,
    /// Measure the log-line parsers on one core (99 % noise, 1 % signals) and print lines/s.
    BenchParse {
        #[arg(long, default_value_t = 100_000)]
        lines: usize,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Openapi => {
            print!("{}", faultline::openapi::openapi_json());
            Ok(())
        }
        Command::BenchParse { lines } => {
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
        Command::Migrate(db) => {
            telemetry::init_tracing();
            let database = database::open(db.database_url.as_deref(), &db.data_dir).await?;
            tracing::info!("migrations applied");
            database.pool.close().await;
            database.server.stop().await
        }
        Command::Serve(settings) => {
            telemetry::init_tracing();
            serve(settings).await
        }
    }
}

async fn serve(settings: ServeSettings) -> anyhow::Result<()> {
    std::fs::create_dir_all(&settings.database.data_dir)
        .with_context(|| format!("creating data directory {}", settings.database.data_dir.display()))?;
    let database = database::open(settings.database.database_url.as_deref(), &settings.database.data_dir).await?;
    let admin_token = match settings.admin_token.clone() {
        Some(t) if !t.trim().is_empty() => t,
        _ => load_or_create_admin_token(&settings.database.data_dir)?,
    };
    let config = AppConfig {
        admin_token,
        limits: settings.limits.clone(),
        correlation_window: Duration::from_secs(settings.correlation_window_secs.into()),
    };
    let ctx = startup::api_context(config, database.pool.clone());
    let listener = tokio::net::TcpListener::bind(settings.addr).await.with_context(|| format!("binding {}", settings.addr))?;
    tracing::info!(addr = %listener.local_addr()?, "faultline listening; API docs at /docs");
    let served = startup::serve(listener, startup::build_router(ctx), shutdown_signal()).await;
    database.pool.close().await;
    database.server.stop().await?;
    Ok(served?)
}

/// Reads the admin token stored in the data directory, or creates one and prints it once.
fn load_or_create_admin_token(data_dir: &Path) -> anyhow::Result<String> {
    let path: PathBuf = data_dir.join("admin-token");
    if let Ok(existing) = std::fs::read_to_string(&path)
        && !existing.trim().is_empty()
    {
        tracing::info!(path = %path.display(), "using the admin token stored in the data directory");
        return Ok(existing.trim().to_string());
    }
    let token = generate_admin_token();
    write_private(&path, &token).with_context(|| format!("storing the admin token in {}", path.display()))?;
    println!("Generated admin token (stored in {}; shown once):\n  {token}", path.display());
    Ok(token)
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
