//! The node's own tools (`nvidia-smi`, `ipmitool`): run with a time limit, killed if they hang,
//! their output as text or why they failed.

use std::time::Duration;

/// Runs `program args` (with `env` set) and returns its standard output; an error says why it
/// failed: not found, its exit status with its stderr, or no answer within `limit`.
pub async fn output(program: &str, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Result<String, String> {
    let run = tokio::process::Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(limit, run).await {
        Ok(Ok(o)) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(Ok(o)) => Err(format!(
            "it exited with {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("it did not answer within {} s", limit.as_secs())),
    }
}
