//! Graceful shutdown with a deadline, on the real `faultline serve` process.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use crate::helpers::ADMIN_TOKEN;

/// A client sends half a body and stalls; SIGTERM; the server exits once the deadline
/// (FAULTLINE_SHUTDOWN_TIMEOUT_SECS=2) has passed, not when the client pleases.
#[tokio::test]
async fn sigterm_exits_after_the_deadline_despite_a_stalled_client() {
    let server_url = crate::helpers::test_server_url().await.unwrap();
    // Dropped at the end, also when the test fails.
    let database = crate::helpers::TestDatabase::create(&server_url).await;
    let db_name = database.name.clone();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let data_dir = std::env::temp_dir().join(format!("faultline-shutdown-{db_name}"));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
        .arg("serve")
        .env(
            "DATABASE_URL",
            faultline::db::database::with_database(&server_url, &db_name),
        )
        .env("FAULTLINE_ADDR", format!("127.0.0.1:{port}"))
        .env("FAULTLINE_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("FAULTLINE_DATA_DIR", &data_dir)
        .env("FAULTLINE_SHUTDOWN_TIMEOUT_SECS", "2")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let started = Instant::now();
    while client.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "the server did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut stalled = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let head = format!(
        "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{\"events\": ["
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    stalled.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let pid = child.id().unwrap().to_string();
    let signalled = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the server still runs 10 s after SIGTERM with a 2 s deadline")
        .unwrap();
    let took = signalled.elapsed();
    eprintln!("exited {exit:?} {took:?} after SIGTERM");
    assert!(exit.success(), "{exit:?}");
    assert!(
        took >= Duration::from_millis(1800),
        "exited before the deadline: {took:?}"
    );
    assert!(took < Duration::from_secs(6), "took {took:?}");
    drop(stalled);
    let _ = std::fs::remove_dir_all(&data_dir);
}
