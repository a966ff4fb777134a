//! docs/getting-started.md's walkthrough runs as written: `faultline serve --demo` on a fresh
//! database and data directory, then every command block of the walkthrough, in order, in one shell
//! (so `export`s carry over), with the built binaries on `PATH`. Two things are put in place of the
//! reader's machine: the server's address (the page's `http://127.0.0.1:8080`, `FAULTLINE_ADDR`'s
//! default, becomes the free port the server took) and the host's journal (`journalctl` reads a
//! journal file holding a few kernel lines, one of them an XID, written by systemd-journal-remote;
//! the real journalctl formats them). What the page says a command prints is checked against what it
//! printed: a `json` block after a command's "answers" holds fields the answer must have.

#[path = "../../crates/faultline-agent/tests/support/journal_builder.rs"]
mod journal_builder;

use std::path::{Path, PathBuf};

use serde_json::Value;

use journal_builder::{JournalEntry, host_boot_id, journal_remote, journalctl_available, write_journal};

/// The address the page uses: `serve`'s default `FAULTLINE_ADDR`.
const PAGE_BASE: &str = "http://127.0.0.1:8080";
/// Where the walkthrough ends: the reference below it is not run in order.
const WALKTHROUGH_END: &str = "\n## Reference";

/// A fenced block of the page: its language, its lines, and the prose just before it.
#[derive(Debug, Clone)]
struct Block {
    lang: String,
    text: String,
    prose_before: String,
}

fn blocks(page: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut prose = String::new();
    let mut open: Option<(String, String)> = None;
    for line in page.lines() {
        match (&mut open, line.trim_start().strip_prefix("```")) {
            (None, Some(lang)) => open = Some((lang.trim().to_string(), String::new())),
            (Some(_), Some("")) => {
                let (lang, text) = open.take().unwrap();
                out.push(Block {
                    lang,
                    text,
                    prose_before: std::mem::take(&mut prose),
                });
            }
            (Some((_, text)), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    out
}

/// A shell block as the test runs it: the built binary for `cargo run --`, the test server's URL
/// for the page's.
fn as_run(command: &str, base: &str) -> String {
    command
        .replace("cargo run --release -- ", "faultline ")
        .replace("cargo run -- ", "faultline ")
        .replace(PAGE_BASE, base)
}

/// Whether `actual` holds everything `shown` shows: an object's every key with a matching value, a
/// list's every element matched by some element of the actual list, anything else equal.
fn holds(actual: &Value, shown: &Value) -> bool {
    match (actual, shown) {
        (Value::Object(a), Value::Object(s)) => s.iter().all(|(k, v)| a.get(k).is_some_and(|av| holds(av, v))),
        (Value::Array(a), Value::Array(s)) => s.iter().all(|v| a.iter().any(|av| holds(av, v))),
        _ => actual == shown,
    }
}

#[test]
fn holds_compares_what_is_shown() {
    let actual = serde_json::json!({"a": 1, "b": [{"k": "x", "n": 2}, {"k": "y"}], "c": null});
    assert!(holds(&actual, &serde_json::json!({"a": 1})));
    assert!(holds(
        &actual,
        &serde_json::json!({"b": [{"k": "y"}, {"k": "x", "n": 2}]})
    ));
    assert!(!holds(&actual, &serde_json::json!({"a": 2})));
    assert!(!holds(&actual, &serde_json::json!({"b": [{"k": "z"}]})));
    assert!(!holds(&actual, &serde_json::json!({"d": null})));
}

/// The kernel lines the test's "host" journal holds for this boot: two noise lines and one XID 79,
/// logged a minute ago.
fn write_host_journal(dir: &Path) {
    let boot = host_boot_id();
    assert!(!boot.is_empty(), "no /proc/sys/kernel/random/boot_id");
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let at = now_us - 60_000_000;
    let entries = [
        JournalEntry::kernel(&boot, at, 3_600_000_000, 6, "EXT4-fs (nvme0n1p1): mounted filesystem"),
        JournalEntry::kernel(
            &boot,
            at + 1_000_000,
            3_601_000_000,
            3,
            "NVRM: Xid (PCI:0000:5d:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
        ),
        JournalEntry::kernel(
            &boot,
            at + 2_000_000,
            3_602_000_000,
            6,
            "mlx5_core 0000:0c:00.0: link up",
        ),
    ];
    write_journal(&dir.join("kernel.journal"), &entries).unwrap();
}

#[tokio::test]
async fn the_getting_started_walkthrough_runs_as_written() {
    for tool in ["curl", "jq", "bash"] {
        assert!(
            std::process::Command::new(tool)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success()),
            "the walkthrough needs {tool}"
        );
    }
    assert!(
        journal_remote().is_some() && journalctl_available("journalctl"),
        "needs journalctl and systemd-journal-remote (Debian packages systemd, systemd-journal-remote)"
    );
    let page_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/getting-started.md");
    let page = std::fs::read_to_string(&page_path).unwrap();
    let walkthrough = &page[..page.find(WALKTHROUGH_END).expect("a Reference section")];
    let all = blocks(walkthrough);
    let shell: Vec<&Block> = all.iter().filter(|b| b.lang == "sh").collect();
    assert!(shell.len() >= 8, "{shell:#?}");

    // The first block starts the server: run it here, on a fresh database, at a free port, in a
    // directory of its own (the page's `.faultline/` is relative to where it runs).
    assert_eq!(shell[0].text.trim(), "cargo run -- serve --demo");
    let server_url = crate::helpers::test_server_url().await.unwrap();
    let database = crate::helpers::TestDatabase::create(&server_url).await;
    let work = std::env::temp_dir().join(format!("faultline-getting-started-{}", database.name));
    let journal = work.join("host-journal");
    let shims = work.join("bin");
    std::fs::create_dir_all(&journal).unwrap();
    std::fs::create_dir_all(&shims).unwrap();
    write_host_journal(&journal);
    // `journalctl` reads the test's journal, not this machine's (whatever it holds).
    let real_journalctl = which("journalctl").expect("journalctl on PATH");
    let shim = shims.join("journalctl");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\nexec '{}' --directory='{}' \"$@\"\n",
            real_journalctl.display(),
            journal.display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_faultline"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = std::env::join_paths(
        [shims.clone(), bin_dir]
            .into_iter()
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();

    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(["serve", "--demo"])
        .current_dir(&work)
        .env("DATABASE_URL", database.url())
        .env("FAULTLINE_ADDR", "127.0.0.1:0")
        .env_remove("FAULTLINE_ADMIN_TOKEN")
        .env_remove("FAULTLINE_DATA_DIR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (printed, lines) = crate::demo::printed_until_curl(server.stdout.take().unwrap()).await;
    let text = printed.join("\n");
    let base = printed
        .iter()
        .find_map(|l| l.strip_prefix("Faultline is listening on "))
        .unwrap_or_else(|| panic!("no 'listening on' line:\n{text}"))
        .trim()
        .to_string();
    // What the page says it prints: a dashboard URL signed in with the token, the Swagger UI, a curl.
    let token = std::fs::read_to_string(work.join(".faultline/admin-token")).expect("the token in .faultline/");
    assert!(text.contains(&format!("{base}/#token={}", token.trim())), "{text}");
    assert!(text.contains(&format!("{base}/docs")), "{text}");
    assert!(text.contains("curl -H"), "{text}");

    // Every other block, in order, in one shell; a marker line before each block's output.
    let mut script = String::from("set -euo pipefail\n");
    for (i, block) in shell.iter().enumerate().skip(1) {
        script.push_str(&format!("echo '@@block {i}'\n{}\necho\n", as_run(&block.text, &base)));
    }
    let out = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&work)
        .env("PATH", &path)
        .env_remove("ADMIN")
        .env_remove("TOKEN")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "the walkthrough stopped ({}):\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    let mut outputs: Vec<String> = vec![String::new(); shell.len()];
    for part in stdout.split("@@block ").skip(1) {
        let (n, rest) = part.split_once('\n').unwrap();
        outputs[n.parse::<usize>().unwrap()] = rest.trim().to_string();
    }
    let output_of = |needle: &str| -> String {
        let i = shell
            .iter()
            .position(|b| b.text.contains(needle))
            .unwrap_or_else(|| panic!("no block runs {needle}"));
        outputs[i].clone()
    };

    // A `json` block right after a command block, introduced as its answer, is what it printed.
    let mut checked = 0;
    for pair in all.windows(2) {
        let (command, shown) = (&pair[0], &pair[1]);
        if command.lang != "sh" || shown.lang != "json" || !shown.prose_before.contains("answers") {
            continue;
        }
        let i = shell.iter().position(|b| b.text == command.text).unwrap();
        let shown: Value = serde_json::from_str(&shown.text).unwrap_or_else(|e| panic!("{e}: {}", shown.text));
        let actual: Value = serde_json::from_str(&outputs[i])
            .unwrap_or_else(|e| panic!("`{}` printed no JSON ({e}):\n{}", command.text.trim(), outputs[i]));
        assert!(
            holds(&actual, &shown),
            "`{}` printed\n{actual:#}\nwhich lacks what the page shows:\n{shown:#}",
            command.text.trim()
        );
        checked += 1;
    }
    assert_eq!(checked, 4, "the answers the page shows");

    // The HTML report was written where the page says; the Markdown one starts as the page says.
    let html = std::fs::read_to_string(work.join("report.html")).expect("report.html written");
    assert!(html.contains("<html"), "{}", &html[..html.len().min(500)]);
    assert!(
        output_of("Accept: text/markdown").starts_with("# Reliability report: all clusters"),
        "{}",
        output_of("Accept: text/markdown")
    );
    // The kernel log sent through /v1/logs: three lines, one of them a signal.
    let logs: Value = serde_json::from_str(&output_of("journalctl -k")).unwrap();
    assert_eq!(
        (
            logs["lines"].as_u64(),
            logs["signals"].as_u64(),
            logs["unmatched"].as_u64()
        ),
        (Some(3), Some(1), Some(2)),
        "{logs}"
    );
    // The failure the events step sent is on the page the next step lists, with the one from the
    // kernel log above it (newest first).
    let listed: Value = serde_json::from_str(&output_of("/v1/failures?")).unwrap();
    let failures = listed["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 2, "{listed:#}");
    assert_eq!(
        failures[1]["root_signal"], "0d9e4c1a-6f3b-4a53-9b8e-3c2f1d7a5e10",
        "{listed:#}"
    );
    assert_eq!(failures[0]["root_kind"], "xid", "{listed:#}");
    assert_eq!(failures[0]["root_code"], 79, "{listed:#}");

    drop(lines);
    let _ = server.kill().await;
    let _ = std::fs::remove_dir_all(&work);
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}
