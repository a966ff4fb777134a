//! The site, run: two `faultline serve` processes on one fresh database, one real
//! `faultline-agent` per node reading its node's kernel log from a journal directory (real journal
//! files, written with systemd-journal-remote, read by the real journalctl) and its GPUs from a
//! fake `nvidia-smi` that prints a recorded report. The runner plays the timeline: it writes the
//! kernel's lines, plays the scheduler, the log shipper and the operators through the API, reboots
//! nodes, and kills servers and agents.
//!
//! Signal time runs hours in a minute: journald dates each kernel line (`__REALTIME_TIMESTAMP`)
//! and the agent dates a journal record by it, so the timeline is written hours in the past. The
//! agent dates a GPU set by the machine's own clock (its boot, or now); so that the set of each
//! boot is in place from that boot's start in signal time, the runner registers it then, as the
//! agent does at a real boot (`PUT /v1/nodes/{cluster}/{node}/gpus` with `observed_at`); the
//! agent's own registration later must change nothing, which the check sees.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::scenario::{Action, CLUSTER, KernelLine, NODES, Scenario, boot_lines};
use crate::db::embedded_pg::PrivateCluster;
use crate::devtools::client::{Client, RetryPolicy};

/// Where the binaries and tools are.
#[derive(Debug, Clone)]
pub struct Tools {
    pub faultline: PathBuf,
    pub agent: PathBuf,
    pub journalctl: String,
    pub journal_remote: PathBuf,
    /// Prometheus Alertmanager, which the silence rule notifies.
    pub alertmanager: PathBuf,
    /// The agents' storm window in seconds (`--compact-window`): the final drain waits for the
    /// last window to close.
    pub compact_window: f64,
}

/// What the runner saw besides the answers it checks.
#[derive(Debug, Default)]
pub struct Observed {
    /// Requests of the runner that failed for good (a 5xx, a 4xx, retries spent).
    pub client_errors: Vec<String>,
    /// Faults of the system done: (step, what).
    pub faults: Vec<String>,
    /// Wall-clock spans in which a notification may arrive late for a reason of the site's (a
    /// server killed, the receiver down), with the reason.
    pub disruptions: Vec<(DateTime<Utc>, DateTime<Utc>, String)>,
}

struct Server {
    port: u16,
    child: Option<Child>,
    log: PathBuf,
    data_dir: PathBuf,
}

struct NodeRun {
    name: String,
    dir: PathBuf,
    child: Option<Child>,
    boot: usize,
    boot_start: i64,
    versions: Vec<usize>,
    /// Journal records written for this node (every boot).
    written: u64,
    /// Records in its BMC's event log.
    sel_written: u64,
    retired: bool,
}

/// The site's Alertmanager: a real one, restarted (SIGKILL) as a fault of the system; it holds its
/// alerts in memory, so after a restart it knows the firing ones again only when Faultline re-sends
/// them.
struct Alertmanager {
    port: u16,
    child: Option<Child>,
    dir: PathBuf,
}

/// A crashed PostgreSQL's start: it answers when the server is up again.
type PostgresBack = tokio::task::JoinHandle<anyhow::Result<DateTime<Utc>>>;

/// What the agents' logs tell of the servers' answers.
#[derive(Debug, Default)]
pub struct AgentLogs {
    /// Lines that tell of a 5xx answer other than 503.
    pub server_errors: Vec<String>,
    /// Times an agent was told to come back later (429 or 503: busy, or the database away),
    /// which it honours.
    pub busy: usize,
    /// Sends that got no answer (refused or cut).
    pub unanswered: usize,
}

/// One request the ticket system's webhook accepted.
#[derive(Debug, Clone)]
pub struct Received {
    pub arrived: DateTime<Utc>,
    pub body: Value,
}

/// The site's ticket system: a webhook receiver that records what it accepts; while down, it
/// answers 503 and records nothing.
#[derive(Clone, Default)]
struct Tickets {
    got: Arc<Mutex<Vec<Received>>>,
    down: Arc<AtomicBool>,
    refused: Arc<AtomicUsize>,
}

impl Tickets {
    async fn start(&self) -> anyhow::Result<String> {
        let me = self.clone();
        let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let me = me.clone();
            async move {
                if me.down.load(Ordering::SeqCst) {
                    me.refused.fetch_add(1, Ordering::SeqCst);
                    return axum::http::StatusCode::SERVICE_UNAVAILABLE;
                }
                let Ok(body) = serde_json::from_slice::<Value>(&body) else {
                    return axum::http::StatusCode::BAD_REQUEST;
                };
                me.got.lock().expect("the receiver's lock").push(Received {
                    arrived: Utc::now(),
                    body,
                });
                axum::http::StatusCode::OK
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hooks/faultline", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(url)
    }
}

/// A receiver that accepts connections and never answers (a hung ticket bridge): it costs
/// Faultline a send timeout per attempt, and must delay no other receiver.
#[derive(Clone, Default)]
struct Hung {
    connections: Arc<AtomicUsize>,
}

impl Hung {
    async fn start(&self) -> anyhow::Result<String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let connections = self.connections.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
                // Kept open, never read or answered; dropped when the round ends.
                held.push(socket);
            }
        });
        Ok(url)
    }
}

/// The nodes' network path to a server instance: a TCP proxy the agents connect through, which
/// refuses connections (and cuts the open ones) while down, as a network partition or a firewall
/// change does; the runner, an operator's machine, reaches the servers directly.
struct Network {
    port: u16,
    up: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Network {
    async fn start(target: u16) -> anyhow::Result<Network> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (up, rx) = tokio::sync::watch::channel(true);
        tokio::spawn(Network::serve(Some(listener), port, target, rx));
        Ok(Network { port, up: Arc::new(up) })
    }

    async fn serve(
        mut listener: Option<tokio::net::TcpListener>,
        port: u16,
        target: u16,
        mut up: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            while !*up.borrow_and_update() {
                if up.changed().await.is_err() {
                    return;
                }
            }
            let bound = match listener.take() {
                Some(l) => l,
                None => match Network::bind(port).await {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!(port, error = %e, "the soak's network could not listen again");
                        return;
                    }
                },
            };
            let mut open = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    accepted = bound.accept() => {
                        let Ok((mut inbound, _)) = accepted else { continue };
                        open.spawn(async move {
                            if let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await {
                                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                            }
                        });
                    }
                    changed = up.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        if !*up.borrow() {
                            break;
                        }
                    }
                }
            }
            // Refused from now on; the open connections are cut.
            drop(bound);
            open.abort_all();
        }
    }

    /// Listens on the same port again (so the agents' URLs stay valid).
    async fn bind(port: u16) -> std::io::Result<tokio::net::TcpListener> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1], port)))?;
        socket.listen(128)
    }
}

pub struct Site<'a> {
    sc: &'a Scenario,
    tools: &'a Tools,
    pub origin: DateTime<Utc>,
    work: PathBuf,
    database_url: String,
    admin: String,
    agent_token: String,
    servers: Vec<Server>,
    nodes: Vec<NodeRun>,
    clients: Vec<Client>,
    alertmanager: Alertmanager,
    tickets: Tickets,
    tickets_url: String,
    hung: Hung,
    hung_url: String,
    /// The frozen Alertmanager's thaw, pending; aborted when it is killed meanwhile.
    thaw: Option<tokio::task::JoinHandle<()>>,
    /// Since when the ticket system is down, and how many requests it had refused then.
    tickets_down_since: Option<(DateTime<Utc>, usize)>,
    /// Nodes whose silence alert fires once they sent (the model's), so that a retirement comes
    /// after the page it ends.
    pub paged: std::collections::BTreeSet<String>,
    /// The nodes' network path to each server instance.
    networks: Vec<Network>,
    /// The catalog versions whose rebuild the site started.
    rebuilds: Vec<i64>,
    /// The network's return, pending.
    network_back: Option<tokio::task::JoinHandle<()>>,
    /// The database server, when it is the soak's own (restarted as a fault).
    postgres: Option<&'a PrivateCluster>,
    /// Since when a crashed PostgreSQL is down, and its start, pending (it answers when it is up).
    postgres_back: Option<(DateTime<Utc>, PostgresBack)>,
    pub observed: Observed,
}

/// The silence rule the site runs (`silence`, node scope).
pub const SILENCE_RULE: &str = "soak-silence";
pub const SILENCE_MINUTES: u32 = 20;
const TICKETS_SECRET: &str = "soak-tickets";
/// The rule's receivers, by their index in it: the ticket system, then the hung bridge's two.
pub const RECEIVER_TICKETS: i64 = 1;
pub const RECEIVERS_HUNG: [i64; 2] = [2, 3];

/// The site's processes go when the runner goes, however it ends (a test's timeout SIGKILLs it):
/// the kernel sends them SIGKILL when the thread that started them exits.
fn die_with_runner(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of the child; it allocates nothing and is
    // async-signal-safe, as code between fork and exec must be.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl<'a> Site<'a> {
    /// Starts the servers (migrating the database) and reads nothing yet.
    pub async fn start(
        sc: &'a Scenario,
        tools: &'a Tools,
        origin: DateTime<Utc>,
        work: &Path,
        database_url: &str,
        postgres: Option<&'a PrivateCluster>,
    ) -> anyhow::Result<Site<'a>> {
        std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
        let admin = format!("soak-admin-{}", uuid::Uuid::new_v4().simple());
        let mut site = Site {
            sc,
            tools,
            origin,
            work: work.to_path_buf(),
            database_url: database_url.to_string(),
            admin: admin.clone(),
            agent_token: String::new(),
            servers: Vec::new(),
            nodes: Vec::new(),
            clients: Vec::new(),
            alertmanager: Alertmanager {
                port: free_port()?,
                child: None,
                dir: work.join("alertmanager"),
            },
            tickets: Tickets::default(),
            tickets_url: String::new(),
            hung: Hung::default(),
            hung_url: String::new(),
            thaw: None,
            tickets_down_since: None,
            paged: Default::default(),
            networks: Vec::new(),
            rebuilds: Vec::new(),
            network_back: None,
            postgres,
            postgres_back: None,
            observed: Observed::default(),
        };
        site.tickets_url = site.tickets.start().await?;
        site.hung_url = site.hung.start().await?;
        std::fs::create_dir_all(site.alertmanager.dir.join("data"))?;
        std::fs::write(
            site.alertmanager.dir.join("alertmanager.yml"),
            "route:\n  receiver: site\n  group_by: ['alertname', 'cluster', 'subject']\nreceivers:\n  - name: site\n",
        )?;
        site.start_alertmanager()?;
        site.wait_alertmanager().await?;
        for i in 0..2 {
            let port = free_port()?;
            site.servers.push(Server {
                port,
                child: None,
                log: work.join(format!("server-{i}.log")),
                data_dir: work.join(format!("server-{i}")),
            });
        }
        // The first migrates alone; then the second starts on the migrated database.
        for i in 0..2 {
            site.start_server(i)?;
            site.wait_healthy(i).await?;
        }
        for i in 0..2 {
            let network = Network::start(site.servers[i].port).await?;
            site.networks.push(network);
        }
        let policy = RetryPolicy {
            attempts: 120,
            max_wait: Duration::from_secs(5),
            first_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
        };
        for s in &site.servers {
            site.clients.push(Client::with_retry(
                &format!("http://127.0.0.1:{}", s.port),
                &admin,
                policy,
            )?);
        }
        let (token, _) = site.clients[0]
            .send_json(
                reqwest::Method::POST,
                "/v1/tokens",
                Some(&json!({"name": "soak-agents", "role": "agent", "cluster": CLUSTER})),
            )
            .await?;
        site.agent_token = token["token"].as_str().context("a token in the answer")?.to_string();
        Ok(site)
    }

    pub fn alertmanager_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.alertmanager.port)
    }

    fn start_alertmanager(&mut self) -> anyhow::Result<()> {
        let am = &mut self.alertmanager;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(am.dir.join("alertmanager.log"))?;
        let child = die_with_runner(&mut Command::new(&self.tools.alertmanager))
            .arg(format!("--config.file={}", am.dir.join("alertmanager.yml").display()))
            .arg(format!("--storage.path={}", am.dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{}", am.port))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("starting {}", self.tools.alertmanager.display()))?;
        am.child = Some(child);
        Ok(())
    }

    async fn wait_alertmanager(&self) -> anyhow::Result<()> {
        let url = format!("{}/-/ready", self.alertmanager_url());
        let http = reqwest::Client::new();
        let started = Instant::now();
        loop {
            if let Ok(r) = http.get(&url).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!("Alertmanager did not become ready within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The alerts Alertmanager holds now (`GET /api/v2/alerts`, active ones).
    pub async fn alertmanager_alerts(&self) -> anyhow::Result<Vec<Value>> {
        let res = reqwest::get(format!("{}/api/v2/alerts", self.alertmanager_url())).await?;
        Ok(res.error_for_status()?.json().await?)
    }

    pub fn url(&self, server: usize) -> String {
        format!("http://127.0.0.1:{}", self.servers[server].port)
    }

    /// The cluster-scoped agent token (the agents' and the Slurm sync's).
    pub fn agent_token(&self) -> &str {
        &self.agent_token
    }

    /// The runner's client of server instance `server`.
    pub fn client(&self, server: usize) -> &Client {
        &self.clients[server]
    }

    pub fn at(&self, t: i64) -> DateTime<Utc> {
        self.origin + chrono::Duration::microseconds(t)
    }

    fn rfc3339(&self, t: i64) -> String {
        self.at(t).to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    }

    fn start_server(&mut self, i: usize) -> anyhow::Result<()> {
        let s = &mut self.servers[i];
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&s.log)?;
        let child = die_with_runner(&mut Command::new(&self.tools.faultline))
            .arg("serve")
            .env("DATABASE_URL", &self.database_url)
            .env("FAULTLINE_ADDR", format!("127.0.0.1:{}", s.port))
            .env("FAULTLINE_ADMIN_TOKEN", &self.admin)
            .env("FAULTLINE_DATA_DIR", &s.data_dir)
            .env("RUST_LOG", "warn")
            // Alerts evaluated twice a second; a killed lease holder is replaced within seconds.
            .env("FAULTLINE_ALERT_EVALUATION_INTERVAL_SECS", "0.5")
            .env("FAULTLINE_ALERT_LEASE_SECS", "3")
            .env("FAULTLINE_ALERT_SEND_TIMEOUT_SECS", "1.5")
            // A receiver that was down hears again within a second.
            .env("FAULTLINE_ALERT_RETRY_BASE_SECS", "0.2")
            .env("FAULTLINE_ALERT_RETRY_CAP_SECS", "1")
            .env("FAULTLINE_ALERT_DELIVERY_POLL_SECS", "0.2")
            // Firing alerts re-sent every 2 s: a restarted Alertmanager knows them again soon.
            .env("FAULTLINE_ALERT_RESEND_INTERVAL_SECS", "2")
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("starting {} serve", self.tools.faultline.display()))?;
        s.child = Some(child);
        Ok(())
    }

    async fn wait_healthy(&mut self, i: usize) -> anyhow::Result<()> {
        let url = format!("{}/healthz", self.url(i));
        let http = reqwest::Client::new();
        let started = Instant::now();
        let mut restarts = 0;
        loop {
            if let Ok(r) = http.get(&url).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            if let Some(c) = self.servers[i].child.as_mut()
                && let Some(exit) = c.try_wait()?
            {
                let log = std::fs::read_to_string(&self.servers[i].log).unwrap_or_default();
                // As a supervisor does (systemd's Restart=on-failure): a server that could not
                // reach its database in time at start (a loaded machine) is started again.
                let why = log
                    .lines()
                    .rev()
                    .find(|l| l.trim_start().starts_with("Caused by:") || l.starts_with("Error:"))
                    .map(str::to_string);
                restarts += 1;
                if restarts > 5 {
                    bail!("server {i} exited ({exit}) five times at start: {}", tail(&log));
                }
                self.observed.faults.push(format!(
                    "server {i} exited at start ({exit}{}) and was started again",
                    why.map(|w| format!(": {}", w.trim())).unwrap_or_default()
                ));
                tokio::time::sleep(Duration::from_millis(500)).await;
                self.start_server(i)?;
                continue;
            }
            if started.elapsed() > Duration::from_secs(90) {
                let log = std::fs::read_to_string(&self.servers[i].log).unwrap_or_default();
                bail!(
                    "server {i} did not answer /healthz within 90 s; its log ends:\n{}\nthe database's sessions:\n{}",
                    tail(&log),
                    self.database_sessions().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What every session of the round's database is doing (for a report of a server that does
    /// not come up: a lock it waits on, and who holds it).
    async fn database_sessions(&self) -> String {
        use sqlx::Connection;
        let Ok(mut conn) = sqlx::PgConnection::connect(&self.database_url).await else {
            return "(the database does not answer)".into();
        };
        let sessions: Result<Option<String>, _> = sqlx::query_scalar(
            "SELECT string_agg(format('  %s %s waiting on %s for %s: %s', pid, state,
                                      coalesce(wait_event_type || ':' || wait_event, 'nothing'),
                                      to_char(now() - query_start, 'HH24:MI:SS'), left(query, 160)), E'\\n')
               FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_one(&mut conn)
        .await;
        match sessions {
            Ok(s) => s.unwrap_or_else(|| "(none)".into()),
            Err(e) => format!("(not read: {e})"),
        }
    }

    /// Registers the nodes and the GPU sets of their first boot, writes the first boot's lines and
    /// starts the agents.
    pub async fn boot(&mut self) -> anyhow::Result<()> {
        let sc = self.sc;
        let nodes: Vec<Value> = sc
            .site
            .nodes
            .iter()
            .enumerate()
            .map(|(n, spec)| {
                let g = sc.site.generation(n);
                json!({"hostname": spec.name, "cluster": CLUSTER, "gpu_model": g.model, "gpu_count": g.gpus,
                       "in_service_since": self.rfc3339(sc.first_boot)})
            })
            .collect();
        self.send(0, reqwest::Method::PUT, "/v1/nodes", json!({"nodes": nodes}))
            .await;
        // Pages for a node silent for 20 minutes: every node that sent is, its last signal being
        // at least half an hour old; a retired one must not be.
        // Four receivers: Alertmanager, the ticket system's signed webhook, and a bridge that hangs
        // (for a second ticket system, and for Slack).
        let rule = json!({"condition": {"kind": "silence", "minutes": SILENCE_MINUTES, "scope": "node"},
                          "repeat_interval_minutes": 60,
                          "receivers": [{"kind": "alertmanager", "url": self.alertmanager_url()},
                                        {"kind": "webhook", "url": self.tickets_url, "secret": TICKETS_SECRET},
                                        {"kind": "webhook", "url": format!("{}/hooks/tickets", self.hung_url)},
                                        {"kind": "slack", "url": format!("{}/hooks/slack", self.hung_url)}]});
        self.send(
            1,
            reqwest::Method::PUT,
            &format!("/v1/alert-rules/{SILENCE_RULE}"),
            rule,
        )
        .await;
        for n in 0..NODES {
            let spec = &sc.site.nodes[n];
            let dir = self.work.join(&spec.name);
            std::fs::create_dir_all(dir.join("state"))?;
            std::fs::create_dir_all(dir.join("journal"))?;
            let script = dir.join("nvidia-smi");
            std::fs::write(
                &script,
                // As nvidia-smi answers while the driver is not loaded yet (early in a boot).
                format!(
                    "#!/bin/sh\n[ \"$*\" = \"-q -x\" ] || exit 2\n\
                     [ -e '{}' ] || {{ echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\"; exit 9; }}\n\
                     cat '{}'\n",
                    dir.join("driver_loaded").display(),
                    dir.join("report.xml").display()
                ),
            )?;
            // The BMC's event log as `ipmitool sel elist` prints it (ipmitool 1.8.19 and later: the
            // time with its zone); empty, as ipmitool says it.
            let ipmitool = dir.join("ipmitool");
            std::fs::write(dir.join("sel.txt"), "SEL has no entries\n")?;
            std::fs::write(
                &ipmitool,
                format!(
                    "#!/bin/sh\n[ \"$*\" = \"sel elist\" ] || exit 2\ncat '{}'\n",
                    dir.join("sel.txt").display()
                ),
            )?;
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
                std::fs::set_permissions(&ipmitool, std::fs::Permissions::from_mode(0o755))?;
            }
            self.nodes.push(NodeRun {
                name: spec.name.clone(),
                dir,
                child: None,
                boot: 0,
                boot_start: sc.first_boot,
                versions: vec![0; sc.site.generation(n).gpus],
                written: 0,
                sel_written: 0,
                retired: false,
            });
            self.power_on(n).await?;
        }
        Ok(())
    }

    /// A boot of node `n`: its boot id, its GPUs' report, the GPU set registered at the boot's
    /// start, the kernel's first lines, and the agent.
    async fn power_on(&mut self, n: usize) -> anyhow::Result<()> {
        let sc = self.sc;
        let (boot, start) = (self.nodes[n].boot, self.nodes[n].boot_start);
        let dir = self.nodes[n].dir.clone();
        std::fs::write(dir.join("boot_id"), format!("{}\n", sc.boot_id(n, boot)))?;
        let report = sc.site.report(n, &self.nodes[n].versions);
        std::fs::write(dir.join("report.xml"), &report)?;
        // After a reboot the driver loads once the boot's first kernel lines are read (see
        // `Action::Kernel`): until then the agent has no GPU set of this boot.
        let loaded = dir.join("driver_loaded");
        if boot == 0 {
            std::fs::write(&loaded, "")?;
        } else if loaded.exists() {
            std::fs::remove_file(&loaded)?;
        }
        let gpus = crate::logparse::nvidia_smi::parse_gpus(&report).map_err(|e| anyhow::anyhow!(e))?;
        let path = format!("/v1/nodes/{CLUSTER}/{}/gpus", self.nodes[n].name);
        self.send(
            n % 2,
            reqwest::Method::PUT,
            &path,
            json!({"observed_at": self.rfc3339(start), "gpus": gpus}),
        )
        .await;
        self.write_kernel(n, &boot_lines(&sc.site, n, start))?;
        self.start_agent(n)
    }

    fn start_agent(&mut self, n: usize) -> anyhow::Result<()> {
        let node = &self.nodes[n];
        let server = format!("http://127.0.0.1:{}", self.networks[self.sc.site.nodes[n].server].port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(node.dir.join("agent.log"))?;
        let child = die_with_runner(&mut Command::new(&self.tools.agent))
            .args(["--server", &server, "--token", &self.agent_token, "--cluster", CLUSTER])
            .args(["--node", &node.name])
            .arg("--state-dir")
            .arg(node.dir.join("state"))
            .arg("--journal")
            .arg("--journal-directory")
            .arg(node.dir.join("journal"))
            .args(["--journalctl", &self.tools.journalctl])
            .arg("--boot-id-file")
            .arg(node.dir.join("boot_id"))
            .arg("--nvidia-smi")
            .arg(node.dir.join("nvidia-smi"))
            .arg("--ipmitool")
            .arg(node.dir.join("ipmitool"))
            .args(["--gpu-interval", "20", "--sel-interval", "1", "--max-backoff", "1"])
            .args(["--compact-window", &self.tools.compact_window.to_string()])
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("starting {}", self.tools.agent.display()))?;
        self.nodes[n].child = Some(child);
        Ok(())
    }

    fn kill_agent(&mut self, n: usize) {
        if let Some(mut c) = self.nodes[n].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Appends lines to the node's journal, in its current boot.
    fn write_kernel(&mut self, n: usize, lines: &[KernelLine]) -> anyhow::Result<()> {
        let node = &self.nodes[n];
        let boot = self.sc.boot_id(n, node.boot).replace('-', "");
        let mut export = String::new();
        for l in lines {
            let realtime = self.at(l.at).timestamp_micros();
            let mono = (l.at - node.boot_start).max(0);
            export.push_str(&format!(
                "__REALTIME_TIMESTAMP={realtime}\n__MONOTONIC_TIMESTAMP={mono}\n_BOOT_ID={boot}\n\
                 _TRANSPORT=kernel\nPRIORITY={}\nSYSLOG_FACILITY=0\nSYSLOG_IDENTIFIER=kernel\n\
                 _SOURCE_MONOTONIC_TIMESTAMP={}\nMESSAGE={}\n\n",
                l.priority,
                mono.saturating_sub(1000),
                l.message.replace('\n', " ")
            ));
        }
        let mut child = Command::new(&self.tools.journal_remote)
            .arg(format!(
                "--output={}",
                node.dir.join("journal").join("kernel.journal").display()
            ))
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", self.tools.journal_remote.display()))?;
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().context("journal-remote's stdin")?;
            stdin.write_all(export.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "{} failed ({}): {}",
                self.tools.journal_remote.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        self.nodes[n].written += lines.len() as u64;
        Ok(())
    }

    /// Appends records to the node's BMC event log (ids counting up from 1, times in UTC).
    fn write_sel(&mut self, n: usize, records: &[super::scenario::SelRecord]) -> anyhow::Result<()> {
        let path = self.nodes[n].dir.join("sel.txt");
        let mut text = std::fs::read_to_string(&path)?;
        if self.nodes[n].sel_written == 0 {
            text.clear();
        }
        for r in records {
            self.nodes[n].sel_written += 1;
            let at = self.at(r.at);
            text.push_str(&format!(
                "{:>4x} | {} | {} UTC | {}\n",
                self.nodes[n].sel_written,
                at.format("%m/%d/%y"),
                at.format("%H:%M:%S"),
                r.text
            ));
        }
        // Written whole and renamed, as the agent may run ipmitool at any moment.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    }

    /// A request of the runner, retried through 429/503 and restarts; a failure for good is
    /// recorded (the check reports it), not fatal.
    async fn send(&mut self, server: usize, method: reqwest::Method, path: &str, body: Value) -> Option<Value> {
        match self.clients[server].send_json(method.clone(), path, Some(&body)).await {
            Ok((v, _)) => Some(v),
            Err(e) => {
                self.observed
                    .client_errors
                    .push(format!("{method} {path} (server {server}): {e:#}"));
                None
            }
        }
    }

    /// Plays step `i` of the timeline.
    pub async fn play(&mut self, i: usize) -> anyhow::Result<()> {
        let sc = self.sc;
        let step = &sc.steps[i];
        let server = i % 2;
        match &step.action {
            Action::Kernel { node, lines } => {
                self.write_kernel(*node, lines)?;
                // A boot's lines read before its GPUs answer: the agent must not name them with the
                // boards of the boot before (they were swapped meanwhile).
                self.load_driver(*node, true).await?;
            }
            Action::Bmc { node, records } => self.write_sel(*node, records)?,
            Action::Job(j) => {
                let gpus: usize = j.nodes.iter().map(|&n| sc.site.generation(n).gpus).sum();
                let nodes: Vec<&str> = j.nodes.iter().map(|&n| sc.site.nodes[n].name.as_str()).collect();
                let job = match j.end {
                    None => json!({"id": j.id, "cluster": CLUSTER, "gpus": gpus, "nodes": nodes,
                                   "start": self.rfc3339(j.start), "state": "running"}),
                    Some(end) => json!({"id": j.id, "cluster": CLUSTER, "gpus": gpus, "nodes": nodes,
                                        "start": self.rfc3339(j.start), "end": self.rfc3339(end), "state": "failed",
                                        "scheduler_state": "NODE_FAIL"}),
                };
                self.send(server, reqwest::Method::PUT, "/v1/jobs", json!({"jobs": [job]}))
                    .await;
            }
            Action::Nccl { job, timeouts } => {
                let events: Vec<Value> = timeouts
                    .iter()
                    .map(|t| {
                        json!({"id": t.id, "occurred_at": self.rfc3339(t.at), "cluster": CLUSTER,
                               "node": sc.site.nodes[t.node].name, "job_id": job, "kind": "nccl_timeout",
                               "message": t.message})
                    })
                    .collect();
                self.send(server, reqwest::Method::POST, "/v1/events", json!({"events": events}))
                    .await;
            }
            Action::Drain { node, at, reason } => {
                let path = format!("/v1/nodes/{CLUSTER}/{}/state", sc.site.nodes[*node].name);
                let body = json!({"state": "drained", "at": self.rfc3339(*at), "reason": reason});
                self.send(server, reqwest::Method::POST, &path, body).await;
            }
            Action::Return { node, at } => {
                let path = format!("/v1/nodes/{CLUSTER}/{}/state", sc.site.nodes[*node].name);
                let body = json!({"state": "returned", "at": self.rfc3339(*at)});
                self.send(server, reqwest::Method::POST, &path, body).await;
            }
            Action::Reboot { node, up, swap, .. } => {
                let n = *node;
                self.kill_agent(n);
                if let Some(slot) = swap {
                    self.nodes[n].versions[*slot] += 1;
                }
                self.nodes[n].boot += 1;
                self.nodes[n].boot_start = *up;
                self.power_on(n).await?;
                if swap.is_none() {
                    self.observed.faults.push(format!(
                        "step {i}: {} rebooted, its boards unchanged",
                        self.nodes[n].name
                    ));
                }
            }
            Action::Retire { node, at } => {
                let n = *node;
                // Its last signals sent, the node is powered off and leaves the inventory's service.
                self.wait_drained(&[n], Duration::from_secs(120)).await?;
                // Retired mid-alert, undisturbed.
                self.wait_page_out(&sc.site.nodes[n].name).await?;
                self.kill_agent(n);
                self.nodes[n].retired = true;
                let g = sc.site.generation(n);
                let body = json!({"nodes": [{"hostname": sc.site.nodes[n].name, "cluster": CLUSTER,
                    "gpu_model": g.model, "gpu_count": g.gpus, "retired_at": self.rfc3339(*at)}]});
                self.send(server, reqwest::Method::PUT, "/v1/nodes", body).await;
            }
            Action::KillServer { server } => {
                let s = *server;
                let killed = Utc::now();
                if let Some(mut c) = self.servers[s].child.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                self.observed
                    .faults
                    .push(format!("step {i}: server {s} SIGKILLed and restarted"));
                tokio::time::sleep(Duration::from_millis(300)).await;
                self.start_server(s)?;
                self.wait_healthy(s).await?;
                // Had it held the lease, the other instance takes it over when the lease (3 s)
                // runs out, and sends at its next poll.
                self.disrupted(
                    killed,
                    killed + chrono::Duration::milliseconds(4000),
                    "a server was killed",
                );
            }
            Action::KillAlertmanager => {
                if let Some(t) = self.thaw.take() {
                    t.abort();
                }
                if let Some(mut c) = self.alertmanager.child.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                self.observed
                    .faults
                    .push(format!("step {i}: Alertmanager SIGKILLed and restarted"));
                tokio::time::sleep(Duration::from_millis(200)).await;
                self.start_alertmanager()?;
                self.wait_alertmanager().await?;
            }
            Action::FreezeAlertmanager { seconds } => {
                // A stopped process keeps its listening socket: connections are accepted, never
                // answered.
                let Some(pid) = self.alertmanager.child.as_ref().map(|c| c.id() as i32) else {
                    return Ok(());
                };
                // SAFETY: kill(2) on our own child's pid.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                self.observed
                    .faults
                    .push(format!("step {i}: Alertmanager frozen for {seconds:.1} s"));
                let seconds = *seconds;
                if let Some(t) = self.thaw.take() {
                    t.abort();
                }
                self.thaw = Some(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
                    // SAFETY: as above; the thaw is aborted before the child is killed and reaped,
                    // so the pid is still this Alertmanager's.
                    unsafe { libc::kill(pid, libc::SIGCONT) };
                }));
            }
            Action::TicketsDown => {
                self.tickets.down.store(true, Ordering::SeqCst);
                self.tickets_down_since = Some((Utc::now(), self.tickets.refused.load(Ordering::SeqCst)));
            }
            Action::TicketsUp => {
                let Some((since, refused)) = self.tickets_down_since.take() else {
                    return Ok(());
                };
                let started = Instant::now();
                while self.tickets.refused.load(Ordering::SeqCst) == refused
                    && started.elapsed() < Duration::from_secs(6)
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                self.tickets.down.store(false, Ordering::SeqCst);
                let refused = self.tickets.refused.load(Ordering::SeqCst) - refused;
                self.observed.faults.push(format!(
                    "step {i}: the ticket system's webhook was down {:.1} s (503 to {refused} requests)",
                    (Utc::now() - since).num_milliseconds() as f64 / 1000.0
                ));
                // A refused notification is retried within the retry cap (1 s) and a poll.
                self.disrupted(
                    since,
                    Utc::now() + chrono::Duration::milliseconds(1500),
                    "the ticket system was down",
                );
            }
            Action::RestartPostgres { seconds } => {
                let Some(pg) = self.postgres else {
                    self.observed.faults.push(format!(
                        "step {i}: PostgreSQL restart left out (the database server is not the soak's own: --own-postgres)"
                    ));
                    return Ok(());
                };
                let pg = pg.clone();
                self.wait_postgres().await?;
                let crashed = Utc::now();
                pg.stop_immediately().await.context("crashing PostgreSQL")?;
                self.observed.faults.push(format!(
                    "step {i}: PostgreSQL crashed, started again {seconds:.1} s later"
                ));
                // The timeline goes on meanwhile: requests get 503 and are retried.
                let seconds = *seconds;
                let back = tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
                    let mut pg = pg;
                    pg.start_again().await.context("starting PostgreSQL again")?;
                    anyhow::Ok(Utc::now())
                });
                self.postgres_back = Some((crashed, back));
            }
            Action::ImportHistory { events } => {
                let items: Vec<Value> = events
                    .iter()
                    .map(|e| {
                        json!({"id": e.id, "occurred_at": self.rfc3339(e.at), "cluster": CLUSTER,
                               "node": sc.site.nodes[e.node].name, "kind": "xid", "code": e.code,
                               "message": e.message})
                    })
                    .collect();
                self.send(server, reqwest::Method::POST, "/v1/events", json!({"events": items}))
                    .await;
            }
            Action::EditCatalog { rule, component, .. } => {
                let (list, _) = self.clients[server]
                    .send_json(reqwest::Method::GET, "/v1/classification-rules?kind=xid", None)
                    .await?;
                let mut body = list["rules"]
                    .as_array()
                    .and_then(|r| r.iter().find(|r| r["rule_id"] == *rule))
                    .cloned()
                    .with_context(|| format!("rule {rule} in the catalog"))?;
                if let Some(o) = body.as_object_mut() {
                    o.remove("rule_id");
                    o.insert("component".into(), json!(component));
                }
                let path = format!("/v1/classification-rules/{rule}");
                if let Some(change) = self.send(server, reqwest::Method::PUT, &path, body).await {
                    self.rebuilds
                        .push(change["catalog_version"].as_i64().unwrap_or_default());
                }
                self.observed
                    .faults
                    .push(format!("step {i}: rule {rule} now files its signals under {component}"));
            }
            Action::RefuseNetwork { seconds } => {
                if let Some(t) = self.network_back.take() {
                    let _ = t.await;
                }
                for net in &self.networks {
                    net.up.send_replace(false);
                }
                self.observed.faults.push(format!(
                    "step {i}: the nodes' network refused connections for {seconds:.1} s"
                ));
                let ups: Vec<_> = self.networks.iter().map(|n| n.up.clone()).collect();
                let seconds = *seconds;
                self.network_back = Some(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
                    for up in ups {
                        up.send_replace(true);
                    }
                }));
            }
            Action::KillAgent { node } => {
                let n = *node;
                if self.nodes[n].retired {
                    return Ok(());
                }
                self.kill_agent(n);
                self.observed.faults.push(format!(
                    "step {i}: agent of {} SIGKILLed and restarted",
                    self.nodes[n].name
                ));
                tokio::time::sleep(Duration::from_millis(100)).await;
                self.start_agent(n)?;
            }
        }
        Ok(())
    }

    /// The agent's status (`faultline-agent status --json`).
    async fn agent_status(&self, n: usize) -> Value {
        let out = tokio::process::Command::new(&self.tools.agent)
            .args(["status", "--json", "--state-dir"])
            .arg(self.nodes[n].dir.join("state"))
            .output()
            .await;
        out.ok()
            .and_then(|o| serde_json::from_slice(&o.stdout).ok())
            .unwrap_or(Value::Null)
    }

    /// Waits until the nodes' agents have read every line written, closed their storm windows and
    /// emptied their spools.
    pub async fn wait_drained(&self, nodes: &[usize], limit: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let mut pending = Vec::new();
            for &n in nodes {
                if self.nodes[n].retired {
                    continue;
                }
                let s = self.agent_status(n).await;
                let read = s["counters"]["kmsg_records"].as_u64().unwrap_or(0);
                let sel = s["counters"]["sel_records"].as_u64().unwrap_or(0);
                let spooled = s["spool_records"].as_u64().unwrap_or(u64::MAX);
                // Repeats held in an open storm window are sent when it closes.
                let open = s["open_runs"].as_u64().unwrap_or(u64::MAX);
                if read < self.nodes[n].written || sel < self.nodes[n].sel_written || spooled > 0 || open > 0 {
                    pending.push(format!(
                        "{}: {read} of {} records read, {sel} of {} BMC records, {spooled} signals spooled, {open} storm windows open",
                        self.nodes[n].name, self.nodes[n].written, self.nodes[n].sel_written
                    ));
                }
            }
            if pending.is_empty() {
                return Ok(());
            }
            if started.elapsed() > limit {
                bail!("the agents did not drain within {limit:?}: {}", pending.join("; "));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Loads node `n`'s driver, if it is not loaded yet, once its agent has read every line written
    /// (when `after_reading`).
    async fn load_driver(&mut self, n: usize, after_reading: bool) -> anyhow::Result<()> {
        let loaded = self.nodes[n].dir.join("driver_loaded");
        if loaded.exists() {
            return Ok(());
        }
        if after_reading && !self.nodes[n].retired {
            let started = Instant::now();
            loop {
                let read = self.agent_status(n).await["counters"]["kmsg_records"]
                    .as_u64()
                    .unwrap_or(0);
                if read >= self.nodes[n].written {
                    break;
                }
                if started.elapsed() > Duration::from_secs(60) {
                    bail!(
                        "the agent of {} did not read its boot's lines within 60 s",
                        self.nodes[n].name
                    );
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        std::fs::write(&loaded, "")?;
        Ok(())
    }

    /// Loads every node's driver (a round ends with all GPUs answering).
    pub async fn load_drivers(&mut self) -> anyhow::Result<()> {
        for n in 0..self.nodes.len() {
            self.load_driver(n, false).await?;
        }
        Ok(())
    }

    /// Waits until the rebuilds of the catalog edits are over (done, or superseded by a newer one).
    pub async fn wait_rebuilt(&self, limit: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        for v in &self.rebuilds {
            loop {
                let (r, _) = self.clients[0]
                    .send_json(reqwest::Method::GET, &format!("/v1/catalog/rebuilds/{v}"), None)
                    .await?;
                if r["state"] != "running" {
                    break;
                }
                if started.elapsed() > limit {
                    bail!("the rebuild of catalog version {v} did not end within {limit:?}: {r}");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }

    /// Waits until the nodes' network is back.
    pub async fn wait_network(&mut self) {
        if let Some(t) = self.network_back.take() {
            let _ = t.await;
        }
    }

    /// Waits until a crashed PostgreSQL is up again.
    pub async fn wait_postgres(&mut self) -> anyhow::Result<()> {
        if let Some((since, task)) = self.postgres_back.take() {
            let up = task.await??;
            // The alert lease is renewed at the next poll once the database answers; had it lapsed
            // meanwhile, the next holder takes it within a lease.
            self.disrupted(since, up + chrono::Duration::milliseconds(4000), "PostgreSQL was down");
        }
        Ok(())
    }

    /// Waits until the frozen Alertmanager is thawed.
    pub async fn wait_thawed(&mut self) {
        if let Some(t) = self.thaw.take() {
            let _ = t.await;
        }
    }

    /// Records that notifications from `since` to `until` may arrive late for a reason of the
    /// site's, not of the sender.
    fn disrupted(&mut self, since: DateTime<Utc>, until: DateTime<Utc>, why: &str) {
        self.observed.disruptions.push((since, until, why.to_string()));
    }

    /// What the ticket system accepted, in order of arrival.
    pub fn tickets(&self) -> Vec<Received> {
        self.tickets.got.lock().expect("the receiver's lock").clone()
    }

    /// Requests the ticket system refused while down, and connections the hung bridge held.
    pub fn receiver_counts(&self) -> (usize, usize) {
        (
            self.tickets.refused.load(Ordering::SeqCst),
            self.hung.connections.load(Ordering::SeqCst),
        )
    }

    /// Waits until the node's silence page is out (the ticket system has it), when it pages, and
    /// no disruption is under way, so that the page resolving it next is timed undisturbed
    /// (check::late_pages).
    pub async fn wait_page_out(&self, node: &str) -> anyhow::Result<()> {
        if self.paged.contains(node) {
            self.wait_ticket(node, "firing", Duration::from_secs(30)).await?;
        }
        if let Some(until) = self.observed.disruptions.iter().map(|d| d.1).max()
            && let Ok(left) = (until - Utc::now()).to_std()
        {
            tokio::time::sleep(left).await;
        }
        Ok(())
    }

    async fn wait_ticket(&self, node: &str, event: &str, limit: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        while !self
            .tickets()
            .iter()
            .any(|r| r.body["labels"]["node"] == node && r.body["event"] == event)
        {
            if started.elapsed() > limit {
                bail!("the ticket system did not hear `{event}` for {node} within {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    pub async fn wait_all_drained(&self, limit: Duration) -> anyhow::Result<()> {
        let all: Vec<usize> = (0..NODES).collect();
        self.wait_drained(&all, limit).await
    }

    /// What the agents' logs tell of the servers' answers, read once at the end of a round.
    pub fn agent_logs(&self) -> AgentLogs {
        let mut out = AgentLogs::default();
        for n in &self.nodes {
            let log = std::fs::read_to_string(n.dir.join("agent.log")).unwrap_or_default();
            for l in log.lines() {
                // 503 (with Retry-After) is the documented answer while the database is away, and
                // the agent comes back; any other 5xx is an error.
                if (l.contains("failed (5") && !l.contains("failed (503"))
                    || (l.contains("GPU set: 5") && !l.contains("GPU set: 503"))
                {
                    out.server_errors.push(format!("{}: {l}", n.name));
                }
                out.busy += usize::from(l.contains("the server is busy ("));
                out.unanswered += usize::from(l.contains(" signals to http") && l.ends_with("; will retry"));
            }
        }
        out
    }

    pub fn work_dir(&self) -> &Path {
        &self.work
    }

    /// Stops every process.
    pub fn stop(&mut self) {
        if let Some(t) = self.thaw.take() {
            t.abort();
        }
        for n in 0..self.nodes.len() {
            self.kill_agent(n);
        }
        for s in &mut self.servers {
            if let Some(mut c) = s.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if let Some(mut c) = self.alertmanager.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Site<'_> {
    fn drop(&mut self) {
        self.stop();
    }
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
