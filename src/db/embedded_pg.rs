//! Finding a PostgreSQL server when none is configured.
//!
//! `faultline serve` and the test-suite use the same order:
//! 1. an explicit URL (normally `DATABASE_URL`), used unchanged;
//! 2. a server answering on `127.0.0.1:5432`, as `postgres://postgres@127.0.0.1:5432`;
//! 3. a private cluster that Faultline creates (`initdb`) and runs (`pg_ctl`) in `<data_dir>/pg`:
//!    user `postgres`, trust authentication, listening only on 127.0.0.1 on a free port, its
//!    Unix socket inside the cluster directory and its log in `<data_dir>/pg/server.log`.
//!
//! The server binaries are looked up on `PATH`, then through `pg_config --bindir`, then in
//! `/usr/lib/postgresql/<version>/bin` (Debian/Ubuntu keep them off `PATH`).
//!
//! **Running as root.** `initdb` and `postgres` refuse to run as root, so when the effective uid
//! is 0 the cluster belongs to, and runs as, the `postgres` user (or `nobody` when there is no
//! such user), through `runuser` (or `su`). That user must be able to reach `data_dir`; when it
//! cannot (say the data dir is under `/root`, mode 0700), the cluster goes to
//! `/var/tmp/faultline-pg-<hash of data_dir>` instead and a warning says so.
//!
//! **Lifetime.** `pg_ctl` detaches the postmaster into its own session, so the cluster outlives
//! Faultline if Faultline dies; the next [`PrivateCluster::start`] on the same directory finds it
//! running and reuses it. Call [`DatabaseServer::stop`] on shutdown; nothing stops it on drop.

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use tokio::process::Command;
use tracing::{debug, info, warn};

/// Where the usual local server would be.
const DEFAULT_PORT: u16 = 5432;
/// Longest wait for a connection probe; a local server answers in well under a millisecond.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// A Unix socket path (`<dir>/.s.PGSQL.<port>`) must fit in `sun_path` (108 bytes with the NUL).
const MAX_SOCKET_DIR_LEN: usize = 90;

/// Where the database server comes from.
#[derive(Debug)]
pub enum DatabaseServer {
    /// Someone else runs it: `DATABASE_URL` or a server already on localhost:5432.
    External { url: String },
    /// Faultline runs it; stop it with [`DatabaseServer::stop`] on shutdown.
    Private(PrivateCluster),
}

impl DatabaseServer {
    /// The URL to connect to. For a server Faultline found or started it has no database path
    /// (`postgres://postgres@127.0.0.1:5432`); an explicit URL is returned as given.
    pub fn url(&self) -> &str {
        match self {
            DatabaseServer::External { url } => url,
            DatabaseServer::Private(cluster) => cluster.url(),
        }
    }

    /// Stops the private cluster; external servers are left alone.
    pub async fn stop(&self) -> Result<()> {
        match self {
            DatabaseServer::External { .. } => Ok(()),
            DatabaseServer::Private(cluster) => cluster.stop().await,
        }
    }
}

/// Picks the database server: `explicit` (callers pass `DATABASE_URL`; an empty string counts as
/// unset) unchanged, else a server answering on 127.0.0.1:5432, else a private cluster in
/// `data_dir/pg` (see the module docs).
pub async fn resolve(explicit: Option<&str>, data_dir: &Path) -> Result<DatabaseServer> {
    if let Some(url) = explicit.filter(|url| !url.is_empty()) {
        return Ok(DatabaseServer::External { url: url.to_owned() });
    }
    if answers_postgres(DEFAULT_PORT).await {
        let url = local_url(DEFAULT_PORT);
        info!(%url, "no DATABASE_URL; using the PostgreSQL server on localhost:5432");
        return Ok(DatabaseServer::External { url });
    }
    info!("no DATABASE_URL and no server on localhost:5432; running a private PostgreSQL cluster");
    Ok(DatabaseServer::Private(PrivateCluster::start(data_dir).await?))
}

/// The server on localhost:5432 when one answers there.
pub async fn local_server() -> Option<String> {
    answers_postgres(DEFAULT_PORT).await.then(|| local_url(DEFAULT_PORT))
}

/// A PostgreSQL cluster that Faultline initialised and runs itself.
#[derive(Debug, Clone)]
pub struct PrivateCluster {
    /// The cluster directory (`PGDATA`): `<data_dir>/pg`, or under the fallback directory.
    pgdata: PathBuf,
    port: u16,
    /// `None` when the cluster path is too long for a socket path: then TCP only.
    socket_dir: Option<PathBuf>,
    /// Directory holding `initdb`, `pg_ctl` and `postgres`, all of one version.
    bin_dir: PathBuf,
    /// The unprivileged user the cluster runs as when Faultline runs as root.
    run_as: Option<String>,
    url: String,
    /// Whether `start` found the cluster already running rather than starting it.
    reused: bool,
}

impl PrivateCluster {
    /// Initialises `data_dir/pg` unless it holds a cluster already, then starts it on a free
    /// port, or reuses it if it is running already (e.g. left over from a crash).
    pub async fn start(data_dir: &Path) -> Result<Self> {
        Self::start_with(data_dir, "").await
    }

    /// [`start`](Self::start) with extra `postgres` options (as for `pg_ctl -o`), used only when
    /// this call starts the server.
    pub async fn start_with(data_dir: &Path, extra_options: &str) -> Result<Self> {
        let mut cluster = Self::locate(data_dir).await?;
        if !cluster.pgdata.join("PG_VERSION").exists() {
            cluster.initdb().await?;
        }
        cluster.start_or_reuse(extra_options).await?;
        Ok(cluster)
    }

    /// A hot standby of this running cluster in `data_dir/pg`, started on a free port (with
    /// `extra_options`, as for [`start_with`](Self::start_with)): `pg_basebackup -R` copies this
    /// cluster and configures streaming replication from it (initdb's `pg_hba.conf` trusts
    /// replication connections from 127.0.0.1, and `wal_level=replica` is the default). How the
    /// read-replica test gets a replica. Stop it with [`stop`](Self::stop).
    pub async fn start_standby(&self, data_dir: &Path, extra_options: &str) -> Result<Self> {
        let mut standby = Self::locate(data_dir).await?;
        if !standby.pgdata.join("PG_VERSION").exists() {
            standby.base_backup_of(self).await?;
        }
        standby.start_or_reuse(extra_options).await?;
        Ok(standby)
    }

    /// The cluster directory for `data_dir` (or its fallback) and the binaries, not started.
    async fn locate(data_dir: &Path) -> Result<Self> {
        let bin_dir = server_bin_dir()?;
        let run_as = if effective_uid().await == Some(0) {
            Some(unprivileged_user().await?)
        } else {
            None
        };
        let mut base = std::path::absolute(data_dir)
            .with_context(|| format!("resolving data directory {}", data_dir.display()))?;
        tokio::fs::create_dir_all(&base)
            .await
            .with_context(|| format!("creating data directory {}", base.display()))?;
        if let Some(user) = &run_as
            && !user_can_enter(user, &base).await
        {
            let fallback = fallback_dir(&base)?;
            warn!(
                data_dir = %base.display(),
                fallback = %fallback.display(),
                user,
                "PostgreSQL must run as an unprivileged user, who cannot reach the data directory \
                 (is it under /root?); putting the private cluster in the fallback directory"
            );
            base = fallback;
        }
        let pgdata = base.join("pg");
        let socket_dir = (pgdata.as_os_str().len() <= MAX_SOCKET_DIR_LEN).then(|| pgdata.clone());
        Ok(PrivateCluster {
            pgdata,
            port: 0,
            socket_dir,
            bin_dir,
            run_as,
            url: String::new(),
            reused: false,
        })
    }

    /// Reuses the server running on this cluster, if any, else starts it on a free port.
    async fn start_or_reuse(&mut self, extra_options: &str) -> Result<()> {
        if let Some(port) = self.running_port().await {
            self.port = port;
            self.url = local_url(port);
            self.reused = true;
            info!(pgdata = %self.pgdata.display(), url = %self.url, "reusing running private PostgreSQL cluster");
            return Ok(());
        }
        self.start_server(extra_options, None).await
    }

    /// Starts the stopped server again on the port it had, so URLs (and pools) that name it
    /// stay valid: how the outage tests bring the database back.
    pub async fn start_again(&mut self) -> Result<()> {
        let port = self.port;
        self.start_server("", Some(port)).await
    }

    /// Stops the server (`pg_ctl stop -m fast`: open sessions are rolled back). Not running
    /// already is fine.
    pub async fn stop(&self) -> Result<()> {
        let out = self
            .pg_ctl(&["stop".into(), "-w".into(), "-m".into(), "fast".into()])
            .await?;
        if !out.status.success() {
            if !self.pgdata.join("postmaster.pid").exists() {
                debug!(pgdata = %self.pgdata.display(), "private PostgreSQL cluster was not running");
                return Ok(());
            }
            bail!("pg_ctl stop failed ({}): {}", out.status, output_text(&out));
        }
        info!(pgdata = %self.pgdata.display(), "stopped private PostgreSQL cluster");
        Ok(())
    }

    /// Stops the server as a crash would (`pg_ctl stop -m immediate`: every process quits at
    /// once, nothing is checkpointed, the next start recovers from the WAL): how the soak
    /// restarts the database under load.
    pub async fn stop_immediately(&self) -> Result<()> {
        let out = self
            .pg_ctl(&["stop".into(), "-w".into(), "-m".into(), "immediate".into()])
            .await?;
        if !out.status.success() {
            bail!(
                "pg_ctl stop -m immediate failed ({}): {}",
                out.status,
                output_text(&out)
            );
        }
        Ok(())
    }

    /// `postgres://postgres@127.0.0.1:<port>`, no database path.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster directory (`PGDATA`), which may be under the fallback directory.
    pub fn pgdata(&self) -> &Path {
        &self.pgdata
    }

    /// Whether `start` found the cluster already running.
    pub fn reused(&self) -> bool {
        self.reused
    }

    /// An empty scratch directory beside the cluster directory, owned by the user the cluster runs
    /// as. Filling it and renaming it into place means a crash half-way never leaves a `pg`
    /// directory that initdb or pg_basebackup would refuse to fill and postgres to start.
    async fn scratch_dir(&self, extension: &str) -> Result<PathBuf> {
        let scratch = self.pgdata.with_extension(extension);
        if scratch.exists() {
            tokio::fs::remove_dir_all(&scratch).await?;
        }
        tokio::fs::create_dir(&scratch)
            .await
            .with_context(|| format!("creating {}", scratch.display()))?;
        // postgres refuses a data directory that others may read.
        tokio::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o700)).await?;
        if let Some(user) = &self.run_as {
            // Only the cluster directory is handed over; the data dir stays Faultline's.
            let out = run(
                None,
                Path::new("chown"),
                &[format!("{user}:").into(), (&scratch).into()],
            )
            .await?;
            check(&out, "chown")?;
        }
        Ok(scratch)
    }

    /// Copies the running `primary` into this cluster directory as a standby of it.
    async fn base_backup_of(&self, primary: &PrivateCluster) -> Result<()> {
        let scratch = self.scratch_dir("basebackup-tmp").await?;
        info!(pgdata = %self.pgdata.display(), primary = %primary.url, "copying a standby with pg_basebackup");
        let args: Vec<OsString> = vec![
            "-h".into(),
            "127.0.0.1".into(),
            "-p".into(),
            primary.port.to_string().into(),
            "-U".into(),
            "postgres".into(),
            "-D".into(),
            (&scratch).into(),
            // standby.signal and primary_conninfo: start as a streaming standby.
            "-R".into(),
            "-X".into(),
            "stream".into(),
            "-c".into(),
            "fast".into(),
        ];
        let out = run(self.run_as.as_deref(), &primary.bin_dir.join("pg_basebackup"), &args).await?;
        check(&out, "pg_basebackup")?;
        // The copy holds the primary's pid file and log; neither belongs to the standby.
        let _ = tokio::fs::remove_file(scratch.join("postmaster.pid")).await;
        let _ = tokio::fs::remove_file(scratch.join("server.log")).await;
        tokio::fs::rename(&scratch, &self.pgdata)
            .await
            .with_context(|| format!("moving the standby to {}", self.pgdata.display()))?;
        Ok(())
    }

    async fn initdb(&self) -> Result<()> {
        let scratch = self.scratch_dir("initdb-tmp").await?;
        info!(pgdata = %self.pgdata.display(), user = ?self.run_as, "initialising private PostgreSQL cluster");
        let args: Vec<OsString> = vec![
            "-D".into(),
            (&scratch).into(),
            "-U".into(),
            "postgres".into(),
            "--auth=trust".into(),
            "-E".into(),
            "UTF8".into(),
            "--no-locale".into(),
        ];
        let out = run(self.run_as.as_deref(), &self.bin_dir.join("initdb"), &args).await?;
        check(&out, "initdb")?;
        tokio::fs::rename(&scratch, &self.pgdata).await.with_context(|| {
            format!(
                "moving the new cluster to {} (is it a non-empty directory?)",
                self.pgdata.display()
            )
        })?;
        Ok(())
    }

    /// The port of a server already running on this cluster, if any.
    async fn running_port(&self) -> Option<u16> {
        // postmaster.pid: line 1 is the PID, line 4 the port. It outlives a crash or reboot.
        let pidfile = tokio::fs::read_to_string(self.pgdata.join("postmaster.pid"))
            .await
            .ok()?;
        let mut lines = pidfile.lines();
        let pid: u32 = lines.next()?.trim().parse().ok()?;
        let port: u16 = lines.nth(2)?.trim().parse().ok()?;
        // Give a server that another process is still starting, or a dead postmaster that is
        // still a zombie (postgres would refuse to start next to it), a few seconds.
        for _ in 0..20 {
            match postgres_process_state(pid) {
                None => {
                    debug!(pid, "stale postmaster.pid; pg_ctl start will replace it");
                    return None;
                }
                Some('Z') => {}
                Some(_) => {
                    if answers_postgres(port).await {
                        return Some(port);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        None
    }

    async fn start_server(&mut self, extra_options: &str, fixed_port: Option<u16>) -> Result<()> {
        let log = self.pgdata.join("server.log");
        let socket_dir = self
            .socket_dir
            .as_ref()
            .map_or(String::new(), |dir| dir.display().to_string());
        let mut attempts = 0;
        loop {
            attempts += 1;
            let port = match fixed_port {
                Some(port) => port,
                None => free_port()?,
            };
            // pg_ctl pastes -o into a shell command line, hence the quoting.
            let options = format!(
                "-p {port} -c listen_addresses=127.0.0.1 -k {} {extra_options}",
                shell_quote(&socket_dir)
            );
            let log_len = tokio::fs::metadata(&log).await.map_or(0, |m| m.len());
            let args: Vec<OsString> = vec![
                "start".into(),
                "-w".into(),
                "-t".into(),
                "60".into(),
                "-l".into(),
                (&log).into(),
                "-o".into(),
                options.into(),
            ];
            let out = self.pg_ctl(&args).await?;
            if out.status.success() {
                self.port = port;
                self.url = local_url(port);
                info!(pgdata = %self.pgdata.display(), url = %self.url, "started private PostgreSQL cluster");
                return Ok(());
            }
            let tail = log_tail(&log, log_len, 30).await;
            let error = anyhow!(
                "pg_ctl start failed ({}): {}\n--- end of {} ---\n{tail}",
                out.status,
                output_text(&out),
                log.display()
            );
            // Someone may have taken the port between our probe and the postmaster's bind.
            if fixed_port.is_none() && attempts < 3 && tail.contains("could not bind") {
                warn!(port, "port taken while starting PostgreSQL; retrying on another");
                continue;
            }
            return Err(error);
        }
    }

    async fn pg_ctl(&self, args: &[OsString]) -> Result<Output> {
        let mut all: Vec<OsString> = vec!["-D".into(), (&self.pgdata).into()];
        all.extend_from_slice(args);
        run(self.run_as.as_deref(), &self.bin_dir.join("pg_ctl"), &all).await
    }
}

/// Finds a PostgreSQL program: on `PATH`, then in `pg_config --bindir`, then in the
/// highest-versioned `/usr/lib/postgresql/<version>/bin`.
pub fn find_pg_bin(name: &str) -> Option<PathBuf> {
    let on_path = || {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(name))
            .find(|path| is_executable(path))
    };
    let from_pg_config = || {
        let out = std::process::Command::new("pg_config")
            .arg("--bindir")
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let dir = String::from_utf8(out.stdout).ok()?;
        let path = Path::new(dir.trim()).join(name);
        (out.status.success() && is_executable(&path)).then_some(path)
    };
    let debian_layout = || {
        std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let version: Vec<u32> = entry
                    .file_name()
                    .to_str()?
                    .split('.')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .ok()?;
                let path = entry.path().join("bin").join(name);
                is_executable(&path).then_some((version, path))
            })
            .max()
            .map(|(_, path)| path)
    };
    on_path().or_else(from_pg_config).or_else(debian_layout)
}

/// The real directory of `initdb`, which must hold `pg_ctl` too: mixing versions breaks.
fn server_bin_dir() -> Result<PathBuf> {
    let initdb = find_pg_bin("initdb").context(
        "PostgreSQL server programs (initdb, pg_ctl) not found on PATH, via pg_config --bindir or \
         in /usr/lib/postgresql/*/bin; install the PostgreSQL server or set DATABASE_URL",
    )?;
    // Resolve symlinks such as /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb.
    let initdb = std::fs::canonicalize(&initdb).unwrap_or(initdb);
    let dir = initdb.parent().context("initdb has no parent directory")?.to_path_buf();
    if !is_executable(&dir.join("pg_ctl")) {
        bail!("found {} but no pg_ctl beside it", initdb.display());
    }
    Ok(dir)
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn local_url(port: u16) -> String {
    format!("postgres://postgres@127.0.0.1:{port}")
}

/// Whether a PostgreSQL server answers on 127.0.0.1:`port`: it must reply to a protocol-3.0
/// startup packet for user `postgres` with an authentication request (`R`) or an error (`E`).
///
/// Why this dance: the server must not log every probe (tests probe once per process). An
/// SSLRequest makes SSL-enabled servers log "could not accept SSL connection", and hanging up
/// with unread replies resets the connection, which is logged too. So we half-close after the
/// startup packet and read until the server hangs up: it takes the EOF as a client that went
/// away, silently, under trust and password authentication alike.
async fn answers_postgres(port: u16) -> bool {
    // Blocking std I/O on a blocking thread: the crate's tokio has no io-util, and this is short.
    let probe = move || -> std::io::Result<bool> {
        use std::io::{Read, Write};
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let mut stream = std::net::TcpStream::connect_timeout(&addr, PROBE_TIMEOUT)?;
        stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
        stream.set_write_timeout(Some(PROBE_TIMEOUT))?;
        let mut startup = Vec::with_capacity(23);
        startup.extend_from_slice(&23u32.to_be_bytes());
        startup.extend_from_slice(&0x0003_0000u32.to_be_bytes()); // protocol 3.0
        startup.extend_from_slice(b"user\0postgres\0\0");
        stream.write_all(&startup)?;
        stream.shutdown(std::net::Shutdown::Write)?;
        let mut reply = Vec::new();
        stream.take(64 * 1024).read_to_end(&mut reply)?;
        Ok(matches!(reply.first(), Some(b'R' | b'E')))
    };
    matches!(tokio::task::spawn_blocking(probe).await, Ok(Ok(true)))
}

/// The state letter (`R`, `S`, `Z`...) of process `pid` if it is a `postgres` process; `None`
/// when it is gone or is something else (after a reboot, postmaster.pid may name anybody).
/// Without /proc, `Some('?')`: the port probe decides.
fn postgres_process_state(pid: u32) -> Option<char> {
    if !Path::new("/proc/self").exists() {
        return Some('?');
    }
    // "<pid> (<comm>) <state> ...": comm may itself contain ')' so split at the last one.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, tail) = stat.rsplit_once(')')?;
    if !head.ends_with("(postgres") {
        return None;
    }
    tail.trim_start().chars().next()
}

/// A port nothing listens on now; the OS picks it. It may be taken again before the postmaster
/// binds it, which `start_server` retries.
fn free_port() -> Result<u16> {
    let listener =
        std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Effective uid, without libc: from /proc, else from `id -u`.
async fn effective_uid() -> Option<u32> {
    if let Ok(status) = tokio::fs::read_to_string("/proc/self/status").await {
        // "Uid:\treal\teffective\tsaved\tfs"
        let line = status.lines().find(|line| line.starts_with("Uid:"))?;
        return line.split_whitespace().nth(2)?.parse().ok();
    }
    let out = Command::new("id").arg("-u").output().await.ok()?;
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

/// The account to run PostgreSQL as when Faultline runs as root.
async fn unprivileged_user() -> Result<String> {
    for user in ["postgres", "nobody"] {
        let exists = Command::new("id")
            .arg("-u")
            .arg(user)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .is_ok_and(|status| status.success());
        if exists {
            return Ok(user.to_owned());
        }
    }
    bail!("running as root, and neither a `postgres` nor a `nobody` user exists to run PostgreSQL as")
}

/// Whether `user` can reach into `dir`, i.e. every parent is searchable for them.
async fn user_can_enter(user: &str, dir: &Path) -> bool {
    let args: Vec<OsString> = vec!["-x".into(), dir.into()];
    run(Some(user), Path::new("test"), &args)
        .await
        .is_ok_and(|out| out.status.success())
}

/// Where the cluster goes when the unprivileged user cannot reach `data_dir`: a directory in
/// /var/tmp (survives reboots, unlike a tmpfs /tmp) named after `data_dir`, so the same data dir
/// always maps to the same cluster.
fn fallback_dir(data_dir: &Path) -> Result<PathBuf> {
    let root = if Path::new("/var/tmp").is_dir() {
        PathBuf::from("/var/tmp")
    } else {
        std::env::temp_dir()
    };
    let dir = root.join(format!("faultline-pg-{:016x}", fnv1a(data_dir.as_os_str().as_bytes())));
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
    }
    // The parent is world-writable: only accept a real directory of our own (root's), never a
    // symlink or directory someone else planted there.
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != 0 {
        bail!(
            "{} exists but is not a directory owned by root; remove it",
            dir.display()
        );
    }
    // Searchable by the unprivileged user whatever the umask.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// FNV-1a: a stable hash (std's hasher may change between Rust releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs `program`, as `user` when given (through `runuser`, else `su`), capturing its output.
async fn run(user: Option<&str>, program: &Path, args: &[OsString]) -> Result<Output> {
    let mut command = match user {
        None => {
            let mut command = Command::new(program);
            command.args(args);
            command
        }
        Some(user) => match ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"]
            .into_iter()
            .map(Path::new)
            .find(|path| is_executable(path))
        {
            Some(runuser) => {
                let mut command = Command::new(runuser);
                command.args(["-u", user, "--"]).arg(program).args(args);
                command
            }
            None => {
                // su only takes one shell command line.
                let line = std::iter::once(program.as_os_str())
                    .chain(args.iter().map(|arg| arg.as_os_str()))
                    .map(|arg| shell_quote(&arg.to_string_lossy()))
                    .collect::<Vec<_>>()
                    .join(" ");
                let mut command = Command::new("su");
                command.args(["-s", "/bin/sh", "-c", &line, user]);
                command
            }
        },
    };
    // The unprivileged user may not be allowed into our working directory (e.g. /root).
    command.current_dir("/").stdin(Stdio::null());
    command
        .output()
        .await
        .with_context(|| format!("running {}", program.display()))
}

fn check(out: &Output, what: &str) -> Result<()> {
    if out.status.success() {
        Ok(())
    } else {
        bail!("{what} failed ({}): {}", out.status, output_text(out))
    }
}

fn output_text(out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    text.trim().to_owned()
}

/// The last `lines` lines written to `log` after it was `from` bytes long.
async fn log_tail(log: &Path, from: u64, lines: usize) -> String {
    let Ok(bytes) = tokio::fs::read(log).await else {
        return String::from("(no log file)");
    };
    let start = usize::try_from(from).unwrap_or(0);
    let text = String::from_utf8_lossy(bytes.get(start..).unwrap_or(&bytes));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Holds an exclusive advisory lock on `path` until dropped, waiting for it up to 3 minutes.
/// The kernel drops the lock when its holder dies, so a killed test never leaves it stuck.
pub async fn lock_file(path: &Path) -> Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("opening lock file {}", path.display()))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                bail!("timed out waiting for lock {}", path.display())
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()));
            }
        }
    }
}
