//! `faultline soak`: a site in a box. From a seed, a small site and a timeline of incidents
//! (scenario.rs, pure); what Faultline should answer, from the documented rules (model.rs, pure);
//! the site run with the real binaries, faults of the system included (site.rs); the answers
//! compared with the model (check.rs). See docs/architecture.md, "Soak: a site in a box".

pub mod check;
pub mod model;
pub mod scenario;
pub mod site;
pub mod slurm;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::db::embedded_pg::PrivateCluster;

pub use site::Tools;

#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// PostgreSQL server URL (no database).
    pub server_url: String,
    /// Prefix of each round's database (`<prefix>_<seed>`), dropped and created afresh.
    pub db_name: String,
    pub seed: u64,
    /// Run further seeds (seed + 1, ...) until this much time has passed since the start; zero: one.
    pub minutes: f64,
    /// Incidents drawn beyond one of each kind.
    pub extra_incidents: usize,
    pub tools: Tools,
    /// Where each round's processes keep their files [default: the temp directory].
    pub work_dir: Option<PathBuf>,
    /// Whether rounds run the Slurm track (a real Slurm, `faultline slurm sync --follow`).
    pub slurm: SlurmTrack,
}

/// Whether rounds run the Slurm track.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SlurmTrack {
    /// Where this machine can run Slurm (its programs, root, MariaDB); else the rounds say they run
    /// without it.
    Auto,
    /// Always: a machine that cannot run Slurm fails the round.
    On,
    Off,
}

/// One round's outcome.
#[derive(Debug)]
pub struct Round {
    pub seed: u64,
    pub passed: bool,
    /// The report: a summary when it passed, the differences when not.
    pub report: String,
    pub seconds: f64,
}

/// Runs rounds from `opts.seed` on and returns them; stops at the first that fails.
pub async fn run(opts: &SoakOptions, postgres: Option<&PrivateCluster>) -> anyhow::Result<Vec<Round>> {
    let started = Instant::now();
    let mut rounds = Vec::new();
    let mut seed = opts.seed;
    let slurm = match (opts.slurm, crate::devtools::slurm_cluster::unavailable()) {
        (SlurmTrack::Off, _) => false,
        (_, None) => true,
        (SlurmTrack::On, Some(why)) => anyhow::bail!("--slurm on, but this machine cannot run Slurm: {why}"),
        (SlurmTrack::Auto, Some(why)) => {
            eprintln!("soak: the rounds run without the Slurm track: {why}");
            false
        }
    };
    loop {
        let round = round(opts, seed, slurm, postgres).await?;
        let passed = round.passed;
        eprintln!("{}", round.report);
        rounds.push(round);
        if !passed || started.elapsed().as_secs_f64() >= opts.minutes * 60.0 {
            break;
        }
        seed += 1;
    }
    Ok(rounds)
}

/// The message of a blocking task's panic (a Slurm step that failed, with the daemons' logs).
fn panicked(e: tokio::task::JoinError) -> anyhow::Error {
    match e.try_into_panic() {
        Ok(p) => anyhow::anyhow!(
            "{}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into())
        ),
        Err(e) => anyhow::anyhow!("{e}"),
    }
}

/// One seed: the scenario played on a fresh site (with the Slurm track when `slurm`) and checked.
/// `postgres`: the soak's own database server, which the round restarts as a fault of the system.
pub async fn round(
    opts: &SoakOptions,
    seed: u64,
    slurm: bool,
    postgres: Option<&PrivateCluster>,
) -> anyhow::Result<Round> {
    let started = Instant::now();
    let sc = scenario::scenario(seed, opts.extra_incidents);
    // Signal time: the timeline ends half an hour before now.
    let now = chrono::Utc::now();
    let origin = now - chrono::Duration::microseconds(sc.end) - chrono::Duration::minutes(30);
    let origin = chrono::DateTime::from_timestamp(origin.timestamp(), 0).unwrap_or(origin);

    let db = format!("{}_{seed}", opts.db_name);
    crate::devtools::bench::recreate_database(&opts.server_url, &db).await?;
    let database_url = crate::db::database::with_database(&opts.server_url, &db);
    let work = opts
        .work_dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("faultline-soak-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    // What the timeline alone brings (the nodes that page); the Slurm track's part is known once
    // Slurm recorded it.
    let planned = model::expected(&sc, None);

    // Slurm starts (about 3 s) while the servers do.
    let mut slurm_start = slurm.then(|| {
        let (sc, work) = (sc.clone(), work.clone());
        tokio::task::spawn_blocking(move || slurm::SlurmSite::start(&sc, &work))
    });
    let mut slurm_site: Option<slurm::SlurmSite> = None;
    // The track playing, and what lets its node go down (closed: the track stops).
    type Track = tokio::task::JoinHandle<(slurm::SlurmSite, slurm::Played)>;
    let mut track: Option<(Track, std::sync::mpsc::Sender<()>)> = None;
    let mut site = site::Site::start(&sc, &opts.tools, origin, &work, &database_url, postgres)
        .await
        .context("starting the site")?;
    site.paged = planned.notifications.keys().cloned().collect();
    let outcome = async {
        site.boot().await?;
        // The Slurm track plays in wall time beside the timeline.
        if let Some(start) = slurm_start.take() {
            let mut s = start.await.map_err(panicked).context("starting Slurm")?;
            s.start_sync(slurm::SyncCommand {
                faultline: opts.tools.faultline.clone(),
                server: site.url(sc.slurm.server),
                token: site.agent_token().to_string(),
                since: now - chrono::Duration::minutes(10),
            })
            .context("starting faultline slurm sync")?;
            let (sc, (go, down)) = (sc.clone(), std::sync::mpsc::channel());
            let playing = tokio::task::spawn_blocking(move || {
                let played = s.play(&sc, origin, down);
                (s, played)
            });
            track = Some((playing, go));
        }
        for i in 0..sc.steps.len() {
            site.play(i).await.with_context(|| format!("step {i}"))?;
        }
        site.wait_postgres().await?;
        site.wait_network().await;
        site.load_drivers().await?;
        // The held job's node goes down once the timeline is played and its silence page is out:
        // the DOWN, a signal of now, resolves it.
        if let Some((_, go)) = &track {
            site.wait_page_out(&sc.site.nodes[sc.slurm.held_node].name).await?;
            let _ = go.send(());
        }
        let record = match track.take() {
            Some((playing, _)) => {
                let (s, played) = playing.await.map_err(panicked).context("the Slurm track")?;
                let s = slurm_site.insert(s);
                slurm::wait_synced(site.client(0), played.read_at, s.log(), Duration::from_secs(60)).await?;
                s.stop_sync();
                Some(played.record)
            }
            None => None,
        };
        site.wait_all_drained(Duration::from_secs(180)).await?;
        site.wait_rebuilt(Duration::from_secs(60)).await?;
        site.wait_thawed().await;
        let expected = model::expected(&sc, record.as_ref());
        // Both instances read, for the check and for each other: one database, one answer.
        let alerts = check::settled_alerts(site.client(0), &expected, Duration::from_secs(30)).await?;
        // Alertmanager holds what fires once Faultline re-sent it after its last restart.
        let started = Instant::now();
        let held = loop {
            let held = site.alertmanager_alerts().await?;
            if check::held(&held) == expected.silent || started.elapsed() > Duration::from_secs(30) {
                break held;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        // The ticket system hears what fired once its outage (and any retry backoff) is over.
        let started = Instant::now();
        let tickets = loop {
            let tickets = site.tickets();
            let (heard, _) = check::heard(&tickets);
            let want: std::collections::BTreeMap<String, Vec<String>> = expected
                .notifications
                .iter()
                .map(|(n, e)| (n.clone(), e.iter().map(|e| e.to_string()).collect()))
                .collect();
            if heard == want || started.elapsed() > Duration::from_secs(30) {
                break tickets;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let jobs: Vec<String> = expected.jobs.keys().cloned().collect();
        let found = check::read(
            site.client(0),
            &sc,
            origin,
            alerts.clone(),
            held.clone(),
            tickets.clone(),
            &jobs,
        )
        .await?;
        let other = check::read(site.client(1), &sc, origin, alerts, held, tickets, &jobs).await?;
        anyhow::Ok((found, other, expected))
    }
    .await;
    // A round that ended early leaves no Slurm behind: a track told to stop (its channel closed)
    // ends, its cluster stopped as it panics, or handed back here.
    if let Some(start) = slurm_start.take()
        && let Ok(s) = start.await
    {
        slurm_site = Some(s);
    }
    if let Some((playing, go)) = track.take() {
        drop(go);
        if let Ok((s, _)) = playing.await {
            slurm_site = Some(s);
        }
    }
    let agent_logs = site.agent_logs();
    let mut errors = std::mem::take(&mut site.observed.client_errors);
    errors.extend(agent_logs.server_errors);
    let mut faults = std::mem::take(&mut site.observed.faults);
    if let Some(s) = slurm_site.as_mut() {
        faults.append(&mut s.faults);
    }
    let disruptions = std::mem::take(&mut site.observed.disruptions);
    let (refused, hung) = site.receiver_counts();
    let (busy, unanswered) = (agent_logs.busy, agent_logs.unanswered);
    site.stop();
    if let Some(s) = slurm_site.take() {
        // Slurm's daemons stop in a few seconds.
        let _ = tokio::task::spawn_blocking(move || drop(s)).await;
    }
    let (differences, expected, tickets) = match outcome {
        Ok((found, other, expected)) => {
            let mut d = check::compare(&sc, &expected, &found, origin);
            d.extend(check::late_pages(&found.tickets, &disruptions));
            d.extend(check::same_answers(&found, &other));
            (d, expected, Some(found.tickets))
        }
        Err(e) => {
            errors.push(format!("{e:#}"));
            (Vec::new(), planned, None)
        }
    };
    let passed = differences.is_empty() && errors.is_empty();
    let seconds = started.elapsed().as_secs_f64();
    let report = if passed {
        drop(site);
        let _ = std::fs::remove_dir_all(&work);
        let _ = drop_database(&opts.server_url, &db).await;
        let signals: u64 = expected
            .failures
            .iter()
            .flat_map(|f| f.signals.iter().map(|s| s.repeats))
            .sum();
        let (tickets, slowest) = match &tickets {
            Some(tickets) => (
                tickets.len(),
                check::page_delays(tickets, &disruptions)
                    .into_iter()
                    .filter(|d| !d.3)
                    .map(|d| d.2)
                    .fold(0.0, f64::max),
            ),
            None => (0, 0.0),
        };
        format!(
            "soak seed {seed}: passed in {seconds:.1} s: {} incidents, {} failures, {} signals, {} parts, {}; \
             the ticket system heard {tickets} notifications (refused {refused} while down; undisturbed, the \
             slowest page {slowest:.2} s after its alert started), the hung bridge held {hung} connections; \
             the agents were told to retry later {busy} times and got no answer {unanswered} times; \
             {} faults of the system ({})",
            sc.incidents.len(),
            expected.failures.len(),
            signals,
            expected.parts.len(),
            if slurm {
                format!("{} Slurm jobs", expected.jobs.len())
            } else {
                "without the Slurm track".into()
            },
            faults.len(),
            faults.join("; ")
        )
    } else {
        format!(
            "{}{}files of the round (server and agent logs, journals{}): {}\ndatabase kept: {db}\n",
            check::report(&sc, origin, &differences, &errors, &faults),
            if slurm {
                format!("  slurm track: {}\n", sc.slurm.describe(&sc.site))
            } else {
                String::new()
            },
            if slurm { ", slurm-sync.log" } else { "" },
            work.display()
        )
    };
    Ok(Round {
        seed,
        passed,
        report,
        seconds,
    })
}

async fn drop_database(server_url: &str, db: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&crate::db::database::with_database(server_url, "postgres")).await?;
    let sql = format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)");
    sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await?;
    Ok(())
}
