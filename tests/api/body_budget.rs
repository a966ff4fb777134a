//! The budget of in-flight request body bytes.

use std::time::Duration;

use faultline::app::configuration::Limits;
use faultline::app::edge::EdgeSettings;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{ADMIN_TOKEN, spawn_app_on};

async fn raw(addr: &str, head: &str, body: &[u8]) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(addr.trim_start_matches("http://"))
        .await
        .unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    s.flush().await.unwrap();
    s
}

async fn answer(mut s: tokio::net::TcpStream) -> String {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// A stalled upload holds 900 kB of a 1 MB budget: a second upload that declares 200 kB is
/// answered 503 + Retry-After before its body is sent, and so is a chunked one once its bytes
/// exceed the budget; when the first upload goes away, the budget is free again.
#[tokio::test]
async fn bodies_beyond_the_budget_get_503_before_being_read() {
    let server_url = crate::helpers::test_server_url().await.unwrap();
    let edge = EdgeSettings {
        max_inflight_body_bytes: 1_000_000,
        ..EdgeSettings::default()
    };
    let app = spawn_app_on(&server_url, Limits::default(), edge).await;
    let post = |len: &str| {
        format!(
            "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
             Content-Type: application/json\r\n{len}\r\n"
        )
    };
    let stalled = raw(&app.address, &post("Content-Length: 900000\r\n"), b"{\"events\": [").await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Declared length: refused from the headers alone (no body sent at all).
    let second = raw(&app.address, &post("Content-Length: 200000\r\n"), b"").await;
    let text = answer(second).await;
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.to_ascii_lowercase().contains("retry-after: 1"), "{text}");
    assert!(text.contains("\"error\":\"unavailable\""), "{text}");

    // Unknown length: counted as read, refused when the budget runs out.
    let mut chunked = raw(&app.address, &post("Transfer-Encoding: chunked\r\n"), b"").await;
    let chunk = vec![b' '; 50_000];
    for _ in 0..4 {
        let _ = chunked.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await;
        let _ = chunked.write_all(&chunk).await;
        let _ = chunked.write_all(b"\r\n").await;
    }
    let text = answer(chunked).await;
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.to_ascii_lowercase().contains("retry-after: 1"), "{text}");

    drop(stalled);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let body =
        serde_json::json!({"events": [crate::helpers::event(&crate::helpers::uuid_n(1), serde_json::json!({}))]});
    let (status, res) = app.post_events(ADMIN_TOKEN, &body).await;
    assert_eq!(status, 200, "{res}");
}
