//! The `faultline` binary's clients (`report`, `simulate`, `gpud sync`, `slurm sync`) talking to an
//! https:// Faultline: the site's TLS front (tests/api/agent_tls.rs) with a certificate of the
//! site's own authority. Given the authority (`--ca-file`) each does its work; without it, or with
//! nothing listening, each fails at once naming the cause instead of retrying for minutes; a rate
//! limit behind the front is still waited out as its Retry-After asks.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use faultline::devtools::client::Client;

use crate::agent_tls::tls_front;
use crate::helpers::{ADMIN_TOKEN, spawn_app};
use crate::integrations_dcgm_gpud::fake_gpud;

struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir = std::env::temp_dir().join(format!("faultline-client-tls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// An executable shell script named `name`.
    fn script(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.0.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The four clients' command lines against `server`, each with `extra` appended.
fn commands(server: &str, gpud: &str, slurm: (&Path, &Path), extra: &[&str]) -> Vec<(&'static str, Vec<String>)> {
    let s = |v: &[&str]| -> Vec<String> { v.iter().chain(extra).map(|a| a.to_string()).collect() };
    let (sacct, sacctmgr) = (slurm.0.to_str().unwrap(), slurm.1.to_str().unwrap());
    vec![
        (
            "report",
            s(&[
                "report",
                "--server",
                server,
                "--token",
                ADMIN_TOKEN,
                "--format",
                "markdown",
            ]),
        ),
        (
            "simulate",
            s(&[
                "simulate",
                "--server",
                server,
                "--token",
                ADMIN_TOKEN,
                "--nodes",
                "4",
                "--days",
                "2",
            ]),
        ),
        (
            "gpud sync",
            s(&[
                "gpud",
                "sync",
                "--url",
                gpud,
                "--server",
                server,
                "--token",
                ADMIN_TOKEN,
                "--cluster",
                "c1",
            ]),
        ),
        (
            "slurm sync",
            s(&[
                "slurm",
                "sync",
                "--server",
                server,
                "--token",
                ADMIN_TOKEN,
                "--cluster",
                "slurm-c1",
                "--sacct",
                sacct,
                "--sacctmgr",
                sacctmgr,
                "--since",
                "2026-12-01T00:00:00Z",
            ]),
        ),
    ]
}

async fn run(args: &[String]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(args)
        .output()
        .await
        .unwrap();
    (out, started.elapsed())
}

/// Stand-ins for Slurm's `sacct` and `sacctmgr` printing the output recorded from a real Slurm 22.05
/// (tests/fixtures/slurm; the real Slurm runs in tests/api/slurm.rs): what they print is beside the
/// point here, the transport to the server is.
fn slurm_stand_ins(scratch: &Scratch) -> (PathBuf, PathBuf) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/slurm");
    // Slurm 22.05's sacct refuses the newer format (Restarts, FailedNode), as the real one does.
    let sacct = scratch.script(
        "sacct",
        &format!(
            "case \"$*\" in *Restarts*) echo 'sacct: error: Invalid field requested: \"Restarts\"' >&2; exit 1;; esac\n\
             cat '{}'",
            fixtures.join("sacct-22.05.txt").display()
        ),
    );
    let sacctmgr = scratch.script(
        "sacctmgr",
        &format!("cat '{}'", fixtures.join("sacctmgr-events-22.05.txt").display()),
    );
    (sacct, sacctmgr)
}

#[tokio::test]
async fn every_client_of_the_binary_speaks_https_to_a_server_of_the_sites_own_authority() {
    let app = spawn_app().await;
    let (url, ca_pem) = tls_front(&app).await;
    let scratch = Scratch::new();
    let ca_file = scratch.0.join("site-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let gpud = fake_gpud().await;
    let (sacct, sacctmgr) = slurm_stand_ins(&scratch);

    // Without the site's authority: each fails at once, naming the certificate and the way out,
    // and nothing arrives.
    for (name, args) in commands(&url, &gpud, (&sacct, &sacctmgr), &[]) {
        let (out, took) = run(&args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("cannot reach {url}"))
                && stderr.contains("UnknownIssuer")
                && stderr.contains("--ca-file"),
            "{name}: {stderr}"
        );
        assert!(took < Duration::from_secs(10), "{name} took {took:?}: {stderr}");
    }
    assert_eq!(app.count("SELECT count(*) FROM nodes").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM events").await, 0);

    // Given it, each does its work.
    let ca = ["--ca-file", ca_file.to_str().unwrap()];
    let mut simulated_nodes = None;
    for (name, args) in commands(&url, &gpud, (&sacct, &sacctmgr), &ca) {
        let (out, _) = run(&args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        if name == "report" {
            let report = String::from_utf8_lossy(&out.stdout);
            assert!(report.starts_with("# "), "{report}");
        }
        if name == "simulate" {
            // "simulated N nodes, ..."
            let n = stderr.split("simulated ").nth(1).and_then(|r| r.split(' ').next());
            simulated_nodes = n.and_then(|n| n.parse::<i64>().ok());
        }
    }
    // simulate's nodes; gpud's node and its 2 signals; Slurm's cursors moved to the pass's end.
    let simulated_nodes = simulated_nodes.expect("simulate says how many nodes it simulated");
    assert!(simulated_nodes > 0);
    assert_eq!(
        app.count("SELECT count(*) FROM nodes WHERE cluster NOT IN ('c1', 'slurm-c1')")
            .await,
        simulated_nodes
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE node = 'gpu-node-07' AND code IN (74, 79)")
            .await,
        2
    );
    for source in ["slurm-jobs", "slurm-events"] {
        let (status, cursor) = app
            .get(ADMIN_TOKEN, &format!("/v1/sync-cursors/slurm-c1/{source}"))
            .await;
        assert_eq!(status, 200, "{cursor}");
        assert!(cursor["position"].is_string(), "{cursor}");
    }
}

#[tokio::test]
async fn a_server_not_listening_fails_the_first_request_at_once_with_its_cause() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let (out, took) = run(&[
        "report".into(),
        "--server".into(),
        closed.clone(),
        "--token".into(),
        ADMIN_TOKEN.into(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("GET /v1/reports/reliability: cannot reach {closed}")) && stderr.contains("refused"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");

    // Not a URL this client speaks: said before any request.
    let (out, _) = run(&[
        "report".into(),
        "--server".into(),
        "ftp://127.0.0.1".into(),
        "--token".into(),
        "t".into(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ftp://127.0.0.1: an http:// or https:// URL is needed"),
        "{stderr}"
    );

    // A --ca-file without a certificate in it.
    let scratch = Scratch::new();
    let empty = scratch.0.join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let (out, _) = run(&[
        "report".into(),
        "--server".into(),
        "https://127.0.0.1:1".into(),
        "--token".into(),
        "t".into(),
        "--ca-file".into(),
        empty.to_str().unwrap().into(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no PEM certificate in it"), "{stderr}");
}

/// A read turned away by the rate limit behind the TLS front is retried after the Retry-After.
#[tokio::test]
async fn a_rate_limit_behind_https_is_waited_out() {
    let app = crate::simulation::rate_limited_app(1.0, 1).await;
    let (url, ca_pem) = tls_front(&app).await;
    let scratch = Scratch::new();
    let ca_file = scratch.0.join("site-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let client = Client::connect(&url, ADMIN_TOKEN, Some(&ca_file)).unwrap();
    let (_, retries) = client.send(reqwest::Method::GET, "/v1/failures", |r| r).await.unwrap();
    assert_eq!(retries, 0);
    let started = Instant::now();
    let (res, retries) = client
        .send(reqwest::Method::GET, "/v1/failures", |r| r.query(&[("limit", "1")]))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(retries >= 1, "{retries}");
    assert!(started.elapsed() >= Duration::from_millis(900));
}
