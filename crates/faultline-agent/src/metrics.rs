//! `--metrics-addr`: the agent's counters in the Prometheus text format, over a bare TCP listener
//! (one small HTTP/1.0-style answer per connection; no web framework in the agent).

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::spool::Spool;
use crate::state::Shared;

/// The metrics page.
pub fn render(shared: &Shared, spool_records: u64, spool_bytes: u64, spool_max: u64) -> String {
    let mut out = String::new();
    for (name, help, value) in shared.counters.values().each() {
        out.push_str(&format!(
            "# HELP faultline_agent_{name}_total {help}\n# TYPE faultline_agent_{name}_total counter\nfaultline_agent_{name}_total {value}\n"
        ));
    }
    let open_runs = shared.status.lock().expect("status lock").open_runs;
    for (name, help, value) in [
        ("spool_records", "Signals waiting in the spool", spool_records),
        ("spool_bytes", "Bytes the spool's files take", spool_bytes),
        ("spool_max_bytes", "The spool's bound", spool_max),
        (
            "storm_open_runs",
            "Runs of a repeated kernel signal whose count is not sent yet",
            open_runs,
        ),
    ] {
        out.push_str(&format!(
            "# HELP faultline_agent_{name} {help}\n# TYPE faultline_agent_{name} gauge\nfaultline_agent_{name} {value}\n"
        ));
    }
    let last_send = shared
        .status
        .lock()
        .expect("status lock")
        .last_send_at
        .as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp())
        .unwrap_or(0);
    out.push_str(&format!(
        "# HELP faultline_agent_last_send_timestamp_seconds When the server last acknowledged a batch (0: never)\n# TYPE faultline_agent_last_send_timestamp_seconds gauge\nfaultline_agent_last_send_timestamp_seconds {last_send}\n"
    ));
    out
}

pub async fn serve(listener: TcpListener, shared: Arc<Shared>, spool: Arc<Mutex<Spool>>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let (shared, spool) = (shared.clone(), spool.clone());
        tokio::spawn(async move {
            // The request itself does not matter: every path answers the metrics. Read what the
            // client sent (bounded) so that closing does not reset the connection.
            let mut buf = [0u8; 2048];
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), sock.read(&mut buf)).await;
            let (records, bytes, max) = {
                let s = spool.lock().expect("spool lock");
                (
                    s.len(),
                    s.bytes(),
                    shared.status.lock().expect("status lock").spool_max_bytes,
                )
            };
            let body = render(&shared, records, bytes, max);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_gauges_in_the_text_format() {
        let shared = Shared::default();
        shared.add(&shared.counters.dropped_low_severity_spool_full, 4);
        let page = render(&shared, 7, 1024, 4096);
        assert!(
            page.contains("faultline_agent_dropped_low_severity_spool_full_total 4\n"),
            "{page}"
        );
        assert!(page.contains("# TYPE faultline_agent_spool_records gauge\nfaultline_agent_spool_records 7\n"));
        assert!(page.contains("faultline_agent_last_send_timestamp_seconds 0\n"));
    }
}
