//! The node agent (`faultline-agent`, the real binary) against the real server: the server down
//! and back, the agent killed mid-batch, a reboot, a full spool, a GPU moved between two polls.
//! Between the two sits a small TCP proxy the test switches: down (connections closed), forward,
//! or forward the requests and swallow the replies (the server commits, the agent never hears).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};

use crate::helpers::{TestApp, spawn_app};

const DOWN: u8 = 0;
const FORWARD: u8 = 1;
const SWALLOW_REPLIES: u8 = 2;
/// Forward, the requests at 16 KiB/s (a server that cannot keep up) until the mode changes.
const SLOW: u8 = 3;

struct Proxy {
    url: String,
    mode: Arc<AtomicU8>,
}

impl Proxy {
    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }
}

async fn proxy(app: &TestApp, mode: u8) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let upstream = app.address.trim_start_matches("http://").to_string();
    let mode = Arc::new(AtomicU8::new(mode));
    let m = mode.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                continue;
            };
            let upstream = upstream.clone();
            let m = m.clone();
            let mode = m.load(Ordering::SeqCst);
            tokio::spawn(async move {
                if mode == DOWN {
                    return; // dropped: the connection closes unanswered
                }
                let Ok(mut server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                if mode == FORWARD {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                } else if mode == SLOW {
                    let (mut from_client, mut to_client) = client.split();
                    let (mut from_server, mut to_server) = server.split();
                    let up = async {
                        use tokio::io::{AsyncReadExt, AsyncWriteExt};
                        let mut buf = [0u8; 4096];
                        loop {
                            let n = match from_client.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            if to_server.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                            if m.load(Ordering::SeqCst) == SLOW {
                                tokio::time::sleep(Duration::from_millis(250)).await;
                            }
                        }
                        let _ = to_server.shutdown().await;
                    };
                    let down = tokio::io::copy(&mut from_server, &mut to_client);
                    let _ = tokio::join!(up, down);
                } else {
                    let (mut from_client, _to_client) = client.split();
                    let (_from_server, mut to_server) = server.split();
                    let _ = tokio::io::copy(&mut from_client, &mut to_server).await;
                }
            });
        }
    });
    Proxy { url, mode }
}

/// The agent binary, built beside the server's.
fn agent_binary() -> PathBuf {
    let p = Path::new(env!("CARGO_BIN_EXE_faultline")).with_file_name("faultline-agent");
    assert!(
        p.exists(),
        "{} is missing: build the workspace (cargo build --workspace, or cargo nextest run from the root)",
        p.display()
    );
    p
}

/// A running agent, killed (SIGKILL) when dropped, so a failing test leaves none behind.
pub(crate) struct Agent(Child);

impl Agent {
    pub(crate) fn id(&self) -> u32 {
        self.0.id()
    }

    /// SIGKILL, and reaped.
    pub(crate) fn kill(&mut self) {
        self.0.kill().ok();
        self.0.wait().unwrap();
    }

    fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.0.try_wait()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(crate) struct Node {
    pub(crate) dir: PathBuf,
    token: String,
    server: String,
}

impl Node {
    pub(crate) async fn new(app: &TestApp, server: &str) -> Node {
        let dir = std::env::temp_dir().join(format!("fl-agent-test-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("state")).unwrap();
        std::fs::write(dir.join("boot_id"), "boot-a\n").unwrap();
        std::fs::write(dir.join("kmsg"), "").unwrap();
        Node {
            dir,
            token: app.token("agent", Some("c1")).await,
            server: server.to_string(),
        }
    }

    fn command(&self, extra: &[&str]) -> Command {
        let mut c = Command::new(agent_binary());
        c.args([
            "--server",
            &self.server,
            "--token",
            &self.token,
            "--cluster",
            "c1",
            "--node",
            "n1",
        ])
        .arg("--state-dir")
        .arg(self.dir.join("state"))
        .arg("--kmsg-file")
        .arg(self.dir.join("kmsg"))
        .arg("--boot-id-file")
        .arg(self.dir.join("boot_id"))
        // Defaults a test's own flags override.
        .env("FAULTLINE_AGENT_MAX_BACKOFF", "0.3")
        .env("FAULTLINE_AGENT_GPU_INTERVAL", "0")
        .env("FAULTLINE_AGENT_SEL_INTERVAL", "0")
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join("agent.log"))
                .unwrap(),
        ));
        c
    }

    pub(crate) fn start(&self, extra: &[&str]) -> Agent {
        Agent(self.command(extra).spawn().expect("start faultline-agent"))
    }

    /// Runs `--oneshot` to the end (bounded).
    pub(crate) async fn oneshot(&self, extra: &[&str]) {
        let mut args = vec!["--oneshot"];
        args.extend_from_slice(extra);
        let mut child = self.start(&args);
        for _ in 0..300 {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "the agent failed: {}", self.log());
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        child.kill();
        panic!("the oneshot agent did not finish: {}", self.log());
    }

    pub(crate) fn append_kmsg(&self, records: &[String]) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.join("kmsg"))
            .unwrap();
        for r in records {
            writeln!(f, "{r}").unwrap();
        }
    }

    pub(crate) fn status(&self) -> Value {
        let out = Command::new(agent_binary())
            .args(["status", "--json", "--state-dir"])
            .arg(self.dir.join("state"))
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// A stand-in for a node tool (`nvidia-smi`, `ipmitool`) that prints the file `prints` when
    /// called with `args`, and fails otherwise: the tests put recorded output there.
    pub(crate) fn fake_tool(&self, name: &str, args: &str, prints: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n[ \"$*\" = \"{args}\" ] || exit 2\ncat '{}'\n",
                prints.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default()
    }

    /// Waits (up to 30 s) until `f` holds of the agent's status.
    pub(crate) async fn wait_status(&self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        self.wait_status_for(what, Duration::from_secs(30), f).await
    }

    async fn wait_status_for(&self, what: &str, limit: Duration, f: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..limit.as_millis() / 100 {
            let s = self.status();
            if f(&s) {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "timed out waiting for {what}: status {}\nlog:\n{}",
            self.status(),
            self.log()
        );
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Kernel records of XIDs: one GPU each (`0000:1b:00` + i), so none folds into another.
pub(crate) fn xids(seqs: std::ops::Range<u64>, code: u32) -> Vec<String> {
    seqs.map(|s| {
        format!(
            "4,{s},{},-;NVRM: Xid (PCI:0000:{:02x}:00): {code}, pid={s}, name=python, test record {s}",
            1_000_000 + s * 1000,
            0x10 + s % 200
        )
    })
    .collect()
}

fn noise(seq: u64) -> String {
    format!(
        "6,{seq},{},-;EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode",
        1_000_000 + seq * 1000
    )
}

pub(crate) async fn wait_count(app: &TestApp, sql: &'static str, want: i64, node: &Node) {
    for _ in 0..300 {
        if app.count(sql).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{sql}: {} != {want}\nstatus {}\nlog:\n{}",
        app.count(sql).await,
        node.status(),
        node.log()
    );
}

pub(crate) const SIGNAL_IDS: &str = "SELECT count(*) FROM event_ids WHERE cluster = 'c1'";

#[tokio::test]
async fn agent_spools_while_the_server_is_down_and_everything_arrives_once_when_it_is_back() {
    let app = spawn_app().await;
    let proxy = proxy(&app, DOWN).await;
    let node = Node::new(&app, &proxy.url).await;
    let mut records = xids(0..2, 79);
    records.push(noise(2));
    records.extend(xids(3..6, 79));
    node.append_kmsg(&records);
    // A missing nvidia-smi is reported once, not at every poll.
    let mut agent = node.start(&["--gpu-interval", "0.2", "--nvidia-smi", "/nonexistent/nvidia-smi"]);
    let s = node
        .wait_status("five signals spooled and failed sends", |s| {
            s["spool_records"] == 5 && s["counters"]["send_failures"].as_u64() >= Some(2)
        })
        .await;
    assert_eq!(s["counters"]["kmsg_records"], 6);
    assert_eq!(app.count(SIGNAL_IDS).await, 0);
    proxy.set(FORWARD);
    wait_count(&app, SIGNAL_IDS, 5, &node).await;
    // Lines logged while it runs follow.
    node.append_kmsg(&xids(6..8, 79));
    wait_count(&app, SIGNAL_IDS, 7, &node).await;
    // Its status file is rewritten every two seconds.
    let s = node
        .wait_status("everything acknowledged", |s| s["counters"]["sent_accepted"] == 7)
        .await;
    assert_eq!(s["spool_records"], 0);
    assert_eq!(s["counters"]["sent_duplicates"], 0);
    assert!(s["last_send_at"].is_string());
    assert!(s["counters"]["gpu_poll_failures"].as_u64() >= Some(2), "{s}");
    agent.kill();
    assert_eq!(
        node.log().matches("running `/nonexistent/nvidia-smi -q -x`").count(),
        1,
        "{}",
        node.log()
    );
    // What arrived is what the kernel said, attributed to the node and the GPU's bus (identical
    // signals within 60 s are stored as one row with a repeat count, led by the earliest).
    assert_eq!(
        app.count("SELECT coalesce(sum(repeat_count), 0) FROM events WHERE node = 'n1' AND kind = 'xid' AND code = 79 AND attributes->>'source' = 'agent:kmsg' AND attributes->>'boot_id' = 'boot-a'").await,
        7
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE attributes->>'pci_bus_id' = '0000:10:00.0' AND attributes->>'kmsg_seq' = '0'").await,
        1
    );
}

#[tokio::test]
async fn agent_killed_mid_batch_and_restarted_loses_nothing_and_doubles_nothing() {
    let app = spawn_app().await;
    let proxy = proxy(&app, SWALLOW_REPLIES).await;
    let node = Node::new(&app, &proxy.url).await;
    node.append_kmsg(&xids(0..40, 79));
    let mut agent = node.start(&["--batch", "25"]);
    // The first batch reaches the server and commits; its answer never reaches the agent.
    wait_count(&app, SIGNAL_IDS, 25, &node).await;
    agent.kill(); // SIGKILL
    assert_eq!(node.status()["spool_records"], 40, "nothing was acknowledged");
    proxy.set(FORWARD);
    let mut agent = node.start(&["--batch", "25"]);
    let s = node
        .wait_status("everything acknowledged", |s| {
            s["spool_records"] == 0 && s["counters"]["send_batches"].as_u64() >= Some(2)
        })
        .await;
    agent.kill();
    assert_eq!(app.count(SIGNAL_IDS).await, 40);
    assert_eq!(
        app.count("SELECT coalesce(sum(repeat_count), 0) FROM events WHERE cluster = 'c1'")
            .await,
        40
    );
    assert_eq!(s["counters"]["sent_duplicates"], 25, "the resent first batch: {s}");
    assert_eq!(s["counters"]["sent_accepted"], 15);
}

#[tokio::test]
async fn a_reboot_starts_a_new_sequence_and_a_restart_resends_nothing() {
    let app = spawn_app().await;
    let node = Node::new(&app, &app.address).await;
    node.append_kmsg(&xids(0..3, 79));
    node.oneshot(&[]).await;
    assert_eq!(app.count(SIGNAL_IDS).await, 3);
    // Restarted on the same boot: the position holds, nothing is sent again.
    node.oneshot(&[]).await;
    assert_eq!(node.status()["counters"]["sent_duplicates"], 0);
    // Rebooted: a new boot id, the kernel counts from 0 again, and the ring buffer still holds
    // the lines logged before the agent started.
    std::fs::write(node.dir.join("boot_id"), "boot-b\n").unwrap();
    std::fs::write(node.dir.join("kmsg"), "").unwrap();
    node.append_kmsg(&xids(0..2, 48));
    node.oneshot(&[]).await;
    assert_eq!(app.count(SIGNAL_IDS).await, 5);
    assert_eq!(
        app.count(
            "SELECT coalesce(sum(repeat_count), 0) FROM events WHERE code = 48 AND attributes->>'boot_id' = 'boot-b'"
        )
        .await,
        2
    );
    let s = node.status();
    assert_eq!(
        (
            s["counters"]["sent_accepted"].as_u64(),
            s["counters"]["sent_duplicates"].as_u64()
        ),
        (Some(5), Some(0))
    );
    assert_eq!(s["position"]["boot_id"], "boot-b");
    assert_eq!(s["position"]["seq"], 2);
}

#[tokio::test]
async fn a_full_spool_drops_the_oldest_low_severity_signals_and_counts_them() {
    let app = spawn_app().await;
    let proxy = proxy(&app, DOWN).await;
    let node = Node::new(&app, &proxy.url).await;
    // 30 application XIDs (13: low severity), then 5 that matter (79).
    let mut records = xids(0..30, 13);
    records.extend(xids(30..35, 79));
    node.append_kmsg(&records);
    let mut agent = node.start(&["--spool-max-bytes", "12000"]);
    let s = node
        .wait_status("every record read", |s| s["counters"]["kmsg_records"] == 35)
        .await;
    let dropped = s["counters"]["dropped_low_severity_spool_full"].as_u64().unwrap();
    assert!(dropped >= 10, "{s}");
    assert_eq!(s["counters"]["dropped_spool_full"], 0);
    assert!(s["spool_bytes"].as_u64().unwrap() <= 12000, "{s}");
    proxy.set(FORWARD);
    node.wait_status("an empty spool", |s| {
        s["spool_records"] == 0 && s["counters"]["send_batches"].as_u64() >= Some(1)
    })
    .await;
    agent.kill();
    // Every high arrived; of the lows, the newest, and the dropped ones are the oldest.
    assert_eq!(
        app.count("SELECT coalesce(sum(repeat_count), 0) FROM events WHERE code = 79")
            .await,
        5
    );
    let lows = app
        .count("SELECT coalesce(sum(repeat_count), 0) FROM events WHERE code = 13")
        .await;
    assert_eq!(lows as u64 + dropped, 30);
    let oldest_kept = app
        .count("SELECT min((attributes->>'kmsg_seq')::bigint) FROM events WHERE code = 13")
        .await;
    assert_eq!(oldest_kept as u64, dropped, "the first {dropped} lows went");
}

const P100: &str = include_str!("../fixtures/nvidia-smi/p100-two-gpus.xml");

#[tokio::test]
async fn a_gpu_moved_between_two_polls_shows_in_the_parts_inventory_and_counters_become_signals() {
    let app = spawn_app().await;
    let node = Node::new(&app, &app.address).await;
    let report = node.dir.join("report.xml");
    let fake = node.fake_tool("nvidia-smi", "-q -x", &report);
    std::fs::write(&report, P100).unwrap();
    let gpu_args = [
        "--no-kmsg",
        "--gpu-interval",
        "300",
        "--nvidia-smi",
        fake.to_str().unwrap(),
    ];
    node.oneshot(&gpu_args).await;
    let open = "SELECT count(*) FROM gpu_placements WHERE cluster = 'c1' AND hostname = 'n1' AND removed_at IS NULL";
    assert_eq!(app.count(open).await, 2);
    assert_eq!(app.count(SIGNAL_IDS).await, 0, "all counters are zero");
    // Polled again unchanged: nothing registered, nothing sent.
    node.oneshot(&gpu_args).await;
    assert_eq!(node.status()["counters"]["gpu_inventory_updates"], 1);
    // The two GPUs swap slots (nvidia-smi lists them in bus order: the first is index 0), and the
    // one that was first (now index 1) reports two uncorrectable ECC errors.
    let first = P100.find("<gpu id=").unwrap();
    let second = P100.rfind("<gpu id=").unwrap();
    let end = P100.rfind("</nvidia_smi_log>").unwrap();
    let (a, b) = (&P100[first..second], &P100[second..end]);
    let i = a.find("<double_bit>").expect("the first GPU reports ECC counters");
    let a_bumped = format!(
        "{}{}",
        &a[..i],
        a[i..].replacen("<total>0</total>", "<total>2</total>", 1)
    );
    let swapped = format!(
        "{}{}\n    {}\n</nvidia_smi_log>\n",
        &P100[..first],
        b.trim_end(),
        a_bumped.trim_end()
    );
    std::fs::write(&report, swapped).unwrap();
    node.oneshot(&gpu_args).await;
    assert_eq!(node.status()["counters"]["gpu_inventory_updates"], 2);
    assert_eq!(app.count(open).await, 2);
    assert_eq!(
        app.count("SELECT count(*) FROM gpu_placements WHERE cluster = 'c1' AND end_reason = 'moved'")
            .await,
        2
    );
    assert_eq!(
        app.count(
            "SELECT count(*) FROM gpu_placements WHERE part = '0320717030197' AND removed_at IS NULL AND gpu_index = 1"
        )
        .await,
        1
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'ecc' AND code = 2 AND gpu_index = 1 AND gpu_uuid = 'GPU-28604e81-21ec-cc48-6759-bf2648b22e16' AND attributes->>'counter' = 'ecc_volatile_uncorrected' AND attributes->>'source' = 'agent:nvidia-smi'").await,
        1
    );
    assert_eq!(app.count(SIGNAL_IDS).await, 1);
}

/// Peak resident memory of a process, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_storm_of_a_hundred_thousand_xid_lines_reaches_the_server_as_four_signals() {
    let app = spawn_app().await;
    let node = Node::new(&app, &app.address).await;
    // One GPU prints XID 13 100,000 times in a minute of kernel time: from 5 s after boot, one line
    // every 0.6 ms, so lines 0..=91,666 fall in the first minute (0-60 s) and the rest in the
    // second. Then another GPU falls off the bus once.
    let mut records: Vec<String> = (0..100_000u64)
        .map(|s| {
            format!(
                "4,{s},{},-;NVRM: Xid (PCI:0000:3b:00): 13, pid={}, name=python, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
                5_000_000 + s * 600,
                4000 + s % 8
            )
        })
        .collect();
    records.push(
        "3,100000,65000000,-;NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=python, GPU has fallen off the bus.".into(),
    );
    node.append_kmsg(&records);
    node.oneshot(&[]).await;
    let s = node.status();
    assert_eq!(s["counters"]["kmsg_records"], 100_001);
    // Each minute's first line at once and one signal for its repeats; the 79 alone.
    assert_eq!(s["counters"]["signals_spooled"], 5, "{s}");
    assert_eq!(s["counters"]["kmsg_repeats_folded"], 99_998);
    assert_eq!(app.count(SIGNAL_IDS).await, 5);
    assert_eq!(
        app.count("SELECT coalesce(sum(repeat_count), 0) FROM events WHERE kind = 'xid' AND code = 13")
            .await,
        100_000
    );
    // The server keeps the run as one burst from the first line to the last.
    assert_eq!(
        app.count(
            "SELECT count(*) FROM events WHERE code = 13 AND last_occurred_at - occurred_at = interval '59.9994 s'"
        )
        .await,
        1
    );
    assert_eq!(app.count("SELECT count(*) FROM events WHERE code = 79").await, 1);
    // Read again (a restart on the same boot): nothing new.
    node.oneshot(&[]).await;
    assert_eq!(app.count(SIGNAL_IDS).await, 5);

    // Followed this time: 1,000 lines of XID 31 within a minute, and the agent is killed with the
    // run still open (its first line sent, the rest counted in position.json). The node reboots;
    // the restarted agent sends the previous boot's run with its count before reading on.
    let mut agent = node.start(&[]);
    node.append_kmsg(
        &(100_001..101_001u64)
            .map(|s| {
                format!(
                    "4,{s},{},-;NVRM: Xid (PCI:0000:3b:00): 31, pid=9, name=python, MMU Fault",
                    66_000_000 + (s - 100_001) * 1000
                )
            })
            .collect::<Vec<_>>(),
    );
    node.wait_status("the storm read", |s| {
        s["position"]["seq"] == 101_001 && s["open_runs"] == 1 && s["spool_records"] == 0
    })
    .await;
    agent.kill();
    assert_eq!(
        app.count("SELECT coalesce(sum(repeat_count), 0) FROM events WHERE code = 31")
            .await,
        1,
        "only the run's first line was sent"
    );
    std::fs::write(node.dir.join("boot_id"), "boot-b\n").unwrap();
    std::fs::write(node.dir.join("kmsg"), "").unwrap();
    node.oneshot(&[]).await;
    assert_eq!(
        app.count(
            "SELECT coalesce(sum(repeat_count), 0) FROM events WHERE code = 31 AND attributes->>'boot_id' = 'boot-a'"
        )
        .await,
        1_000
    );
    assert_eq!(node.status()["position"]["boot_id"], "boot-b");
}

#[tokio::test]
async fn a_slow_server_leaves_the_backlog_on_disk_not_in_memory() {
    let app = spawn_app().await;
    let proxy = proxy(&app, SLOW).await;
    let node = Node::new(&app, &proxy.url).await;
    // 40,000 distinct signals (no storm to fold: compaction off), about 50 MB of spool.
    let records: Vec<String> = (0..40_000u64)
        .map(|s| {
            format!(
                "4,{s},{},-;NVRM: Xid (PCI:0000:{:02x}:00): 79, pid={s}, name=python, GPU has fallen off the bus. {}",
                1_000_000 + s * 1000,
                s % 256,
                "x".repeat(100)
            )
        })
        .collect();
    node.append_kmsg(&records);
    let mut agent = node.start(&["--compact-window", "0", "--batch", "2000"]);
    let pid = agent.id();
    let s = node
        .wait_status("every record spooled and a batch sent", |s| {
            s["counters"]["signals_spooled"] == 40_000 && s["counters"]["send_batches"].as_u64() >= Some(1)
        })
        .await;
    assert!(s["spool_bytes"].as_u64().unwrap() > 20_000_000, "{s}");
    let peak = peak_rss_kib(pid);
    assert!(peak < 30 * 1024, "peak RSS {peak} KiB with the backlog on disk");
    proxy.set(FORWARD);
    node.wait_status_for("the backlog delivered", Duration::from_secs(120), |s| {
        s["spool_records"] == 0 && s["counters"]["sent_accepted"] == 40_000
    })
    .await;
    assert_eq!(app.count(SIGNAL_IDS).await, 40_000);
    let peak = peak_rss_kib(pid);
    eprintln!("agent peak RSS with a 40,000-signal backlog: {peak} KiB");
    assert!(peak < 30 * 1024, "peak RSS {peak} KiB after delivering the backlog");
    agent.kill();
}

const L4: &str = include_str!("../fixtures/nvidia-smi/l4-555.xml");

#[tokio::test]
async fn a_gpu_remapping_a_row_and_asking_for_a_reset_reaches_the_server_under_its_index_and_uuid() {
    let app = spawn_app().await;
    let node = Node::new(&app, &app.address).await;
    let report = node.dir.join("report.xml");
    let fake = node.fake_tool("nvidia-smi", "-q -x", &report);
    // Drivers from r560 print the recovery action after the reset status.
    let with_action = |action: &str| {
        L4.replacen(
            "</gpu_reset_status>",
            &format!("</gpu_reset_status>\n        <gpu_recovery_action>{action}</gpu_recovery_action>"),
            1,
        )
    };
    std::fs::write(&report, with_action("None")).unwrap();
    let gpu_args = ["--gpu-interval", "300", "--nvidia-smi", fake.to_str().unwrap()];
    let mut first = vec!["--no-kmsg"];
    first.extend_from_slice(&gpu_args);
    node.oneshot(&first).await;
    assert_eq!(node.status()["counters"]["gpu_inventory_updates"], 1);
    assert_eq!(app.count(SIGNAL_IDS).await, 0, "no action asked, no counter raised");

    // The kernel names the GPU by its bus; the GPU remaps a row for the uncorrectable error (the
    // remap pending until a reset) and the driver asks for the reset.
    node.append_kmsg(&["3,0,5000000,-;NVRM: Xid (PCI:0000:01:00): 48, pid=77, name=python, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.".to_string()]);
    let failing = with_action("Reset")
        .replacen(
            "<remapped_row_unc>0</remapped_row_unc>",
            "<remapped_row_unc>1</remapped_row_unc>",
            1,
        )
        .replacen(
            "<remapped_row_pending>No</remapped_row_pending>",
            "<remapped_row_pending>Yes</remapped_row_pending>",
            1,
        );
    std::fs::write(&report, failing).unwrap();
    node.oneshot(&gpu_args).await;
    wait_count(&app, SIGNAL_IDS, 4, &node).await;
    // Two row-remap signals (the uncorrectable count grew, a remap is pending), one burst on the
    // server under the GPU's index.
    assert_eq!(
        app.count("SELECT coalesce(sum(repeat_count), 0) FROM events WHERE kind = 'row_remap' AND gpu_index = 0 AND gpu_uuid = 'GPU-c5533cd4-5a60-059e-348d-b6d7466932e4'").await,
        2
    );
    const L4_UUID: &str = "GPU-c5533cd4-5a60-059e-348d-b6d7466932e4";
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'xid' AND code = 48 AND gpu_index = 0 AND gpu_uuid = 'GPU-c5533cd4-5a60-059e-348d-b6d7466932e4' AND gpu_model = 'NVIDIA L4' AND attributes->>'serial' = '1654523003308'").await,
        1
    );
    let action: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT kind, attributes->>'value', gpu_uuid FROM events WHERE attributes->>'counter' = 'recovery_action'",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(
        action,
        [(
            "health_check".to_string(),
            "Reset".to_string(),
            Some(L4_UUID.to_string())
        )]
    );
    // Asked again at the next poll: nothing new.
    node.oneshot(&gpu_args).await;
    assert_eq!(app.count(SIGNAL_IDS).await, 4);
    assert_eq!(node.status()["counters"]["sent_duplicates"], 0);
}

/// The kernel's clock now, in microseconds (CLOCK_BOOTTIME, which is CLOCK_MONOTONIC on a machine
/// that never slept), for records the agent dates at about the time they are written.
fn kernel_clock_us() -> u64 {
    let uptime = std::fs::read_to_string("/proc/uptime").unwrap();
    let secs: f64 = uptime.split_whitespace().next().unwrap().parse().unwrap();
    (secs * 1e6) as u64
}

#[tokio::test]
async fn a_board_swapped_during_a_reboot_owns_its_boot_time_xid_even_with_the_server_down() {
    let app = spawn_app().await;
    let proxy = proxy(&app, FORWARD).await;
    let node = Node::new(&app, &proxy.url).await;
    let report = node.dir.join("report.xml");
    let fake = node.fake_tool("nvidia-smi", "-q -x", &report);
    std::fs::write(&report, P100).unwrap();
    let gpu_args = ["--gpu-interval", "0.5", "--nvidia-smi", fake.to_str().unwrap()];
    node.oneshot(&gpu_args).await;
    let open = "SELECT count(*) FROM gpu_placements WHERE cluster = 'c1' AND hostname = 'n1' AND removed_at IS NULL";
    assert_eq!(app.count(open).await, 2);

    // The node goes down; the board on bus 04:00 (index 0) is replaced by another; the node boots
    // with Faultline unreachable, and the new board logs an XID 48 as the driver loads.
    let (old_serial, old_uuid) = ("0320717030197", "GPU-28604e81-21ec-cc48-6759-bf2648b22e16");
    let (new_serial, new_uuid) = ("0321017041822", "GPU-9a1c3e55-0b7d-4f2e-8c61-d2a7b90e4f13");
    assert!(P100.contains(old_serial) && P100.contains(old_uuid));
    std::fs::write(
        &report,
        P100.replacen(old_serial, new_serial, 1).replacen(old_uuid, new_uuid, 1),
    )
    .unwrap();
    proxy.set(DOWN);
    std::fs::write(node.dir.join("boot_id"), "boot-b\n").unwrap();
    std::fs::write(node.dir.join("kmsg"), "").unwrap();
    node.append_kmsg(&[format!(
        "3,0,{},-;NVRM: Xid (PCI:0000:04:00): 48, pid=2041, name=nvidia-persiste, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 1.",
        kernel_clock_us()
    )]);
    let mut agent = node.start(&gpu_args);
    node.wait_status("the XID spooled", |s| {
        s["counters"]["signals_spooled"].as_u64() >= Some(1)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE code = 48").await,
        0,
        "the server is down"
    );
    proxy.set(FORWARD);
    wait_count(&app, "SELECT count(*) FROM events WHERE code = 48", 1, &node).await;
    wait_count(
        &app,
        "SELECT count(*) FROM gpu_placements WHERE part = '0321017041822' AND removed_at IS NULL",
        1,
        &node,
    )
    .await;
    agent.kill();
    // The line names the board installed in this boot, and the inventory has that board in the
    // slot since before the line.
    let xid: (Option<i32>, Option<String>, Option<String>) =
        sqlx::query_as("SELECT gpu_index, gpu_uuid, attributes->>'serial' FROM events WHERE code = 48")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(xid, (Some(0), Some(new_uuid.into()), Some(new_serial.into())));
    let (_, list) = app.get(crate::helpers::ADMIN_TOKEN, "/v1/failures").await;
    let failures = list["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{list}");
    let id = failures[0]["id"].as_str().unwrap();
    let (_, detail) = app
        .get(crate::helpers::ADMIN_TOKEN, &format!("/v1/failures/{id}"))
        .await;
    assert_eq!(detail["root_gpu"]["part"], new_serial, "{detail}");
    // The removed board is a spare with no failure.
    assert_eq!(
        app.count("SELECT count(*) FROM gpu_placements WHERE part = '0320717030197' AND removed_at IS NULL")
            .await,
        0
    );
}

#[tokio::test]
async fn kernel_log_counters_count_each_record_once_across_restarts_and_a_sigkill() {
    let app = spawn_app().await;
    let node = Node::new(&app, &app.address).await;
    node.append_kmsg(&(0..300).map(noise).collect::<Vec<_>>());
    node.append_kmsg(&xids(300..320, 79));
    node.oneshot(&[]).await;
    assert_eq!(node.status()["counters"]["kmsg_records"], 320);
    // Restarted on the same boot over the same log: the records before the position are skipped,
    // not read again.
    node.oneshot(&[]).await;
    assert_eq!(node.status()["counters"]["kmsg_records"], 320);
    // Followed, 2,000 more records arrive and the agent is SIGKILLed while reading them; restarted,
    // it reads on from its saved position, and the counters are exact.
    let mut agent = node.start(&[]);
    node.append_kmsg(&(320..2_320).map(noise).collect::<Vec<_>>());
    node.wait_status("reading", |s| s["counters"]["kmsg_records"].as_u64() > Some(320))
        .await;
    agent.kill();
    node.oneshot(&[]).await;
    let s = node.status();
    assert_eq!(s["counters"]["kmsg_records"], 2_320, "{s}");
    assert_eq!(s["position"]["seq"], 2_320);
}
