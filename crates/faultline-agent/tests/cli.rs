//! The binary as an operator meets it. Being an integration test, it also makes `cargo test` /
//! `cargo nextest run` of the workspace build `target/<profile>/faultline-agent`, which the
//! server's tests (tests/api/agent.rs) run against the real server.

use std::process::Command;

fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_faultline-agent"))
}

#[test]
fn run_without_a_server_says_what_is_missing() {
    let out = agent()
        .env_remove("FAULTLINE_SERVER")
        .args(["--oneshot", "--no-kmsg"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--server (or FAULTLINE_SERVER) is required"));
}

#[test]
fn status_of_a_state_dir_the_agent_never_used_is_an_error() {
    let dir = std::env::temp_dir().join(format!("fl-agent-cli-{}", std::process::id()));
    let out = agent().args(["status", "--state-dir"]).arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no agent state"));
}
