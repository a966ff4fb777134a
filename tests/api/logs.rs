//! `/v1/logs` and `/v1/integrations/nvsentinel/health-events` end to end.

use std::io::Write;

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, event, spawn_app, status_json, uuid_n};

const XID79_KMSG: &str =
    "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.";

async fn post_logs(
    app: &TestApp,
    token: &str,
    query: &str,
    content_type: &str,
    body: impl Into<reqwest::Body>,
) -> (u16, Value) {
    let res = app
        .client
        .post(app.url(&format!("/v1/logs{query}")))
        .bearer_auth(token)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

async fn post_nvsentinel(app: &TestApp, query: &str, content_type: &str, body: String) -> (u16, Value) {
    let res = app
        .client
        .post(app.url(&format!("/v1/integrations/nvsentinel/health-events{query}")))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

fn ndjson(records: &[Value]) -> String {
    records.iter().map(|r| r.to_string() + "\n").collect()
}

#[tokio::test]
async fn text_lines_become_signals_with_their_facts() {
    let app = spawn_app().await;
    let agent = app.token("agent", Some("c1")).await;
    let body = format!(
        "{XID79_KMSG}\r\nDec  6 12:00:00 n07 sshd[1]: Accepted publickey for ubuntu\n\n\
         [rank4]:[E1130 10:00:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600023 milliseconds before timing out.\n"
    );
    let (status, r) = post_logs(
        &app,
        &agent,
        "?cluster=c1&node=n07&job_id=j1",
        "text/plain; charset=utf-8",
        body,
    )
    .await;
    assert_eq!(status, 200, "{r}");
    // 3 non-blank lines: the Xid and the watchdog timeout are signals, sshd is noise.
    assert_eq!(
        (r["lines"].as_u64(), r["signals"].as_u64(), r["unmatched"].as_u64()),
        (Some(3), Some(2), Some(1))
    );
    assert_eq!(r["signals_by_kind"], json!({"xid": 1, "nccl_timeout": 1}));
    assert_eq!((r["accepted"].as_u64(), r["stored"].as_u64()), (Some(2), Some(2)));
    let (node, job, code, attrs): (String, String, i64, Value) =
        sqlx::query_as("SELECT node, job_id, code, attributes FROM events WHERE kind = 'xid'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!((node.as_str(), job.as_str(), code), ("n07", "j1", 79));
    assert_eq!(
        (attrs["raw_line"].as_str(), attrs["pci_bus_id"].as_str()),
        (Some(XID79_KMSG), Some("0000:3b:00.0"))
    );
    let (rank, op, timeout): (Value, Value, Value) = sqlx::query_as(
        "SELECT attributes->'rank', attributes->'op_type', attributes->'timeout_ms' FROM events WHERE kind = 'nccl_timeout'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!((rank, op, timeout), (json!(4), json!("ALLREDUCE"), json!(600000)));
}

#[tokio::test]
async fn vector_and_fluent_bit_records_and_gzip() {
    let app = spawn_app().await;
    // Vector http sink, NDJSON framing.
    let vector = ndjson(&[
        json!({"message": XID79_KMSG, "host": "n07", "timestamp": "2026-11-30T10:00:00.123456Z", "cluster": "c1", "source_type": "journald"}),
        json!({"message": "systemd[1]: Started Session 4.", "host": "n07", "timestamp": "2026-11-30T10:00:01Z", "cluster": "c1"}),
    ]);
    let (status, r) = post_logs(&app, ADMIN_TOKEN, "", "application/x-ndjson", vector).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (r["records"].as_u64(), r["signals"].as_u64(), r["unmatched"].as_u64()),
        (Some(2), Some(1), Some(1))
    );
    // Fluent Bit http output, format json: an array, `log`, `date` in epoch seconds; gzip.
    // 1,796,032,860 s = 2026-11-30T10:01:00Z
    let fluent = json!([{"date": 1_796_032_860.25, "log": "RuntimeError: CUDA error: an illegal memory access was encountered", "hostname": "n08", "SLURM_JOB_ID": 77}]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(fluent.to_string().as_bytes()).unwrap();
    let res = app
        .client
        .post(app.url("/v1/logs?cluster=c1"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(gz.finish().unwrap())
        .send()
        .await
        .unwrap();
    let (status, r) = status_json(res).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["signals_by_kind"], json!({"cuda_error": 1}));
    let (node, job, at): (String, String, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("SELECT node, job_id, occurred_at FROM events WHERE kind = 'cuda_error'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(
        (node.as_str(), job.as_str(), at.to_rfc3339().as_str()),
        ("n08", "77", "2026-11-30T10:01:00.250+00:00")
    );
    // Configured field names (an OpenTelemetry-ish record).
    let custom = ndjson(&[
        json!({"body": XID79_KMSG, "resource": {"host": "n09"}, "ts": "2026-11-30T10:02:00Z", "k8s_cluster": "c1"}),
    ]);
    let q = "?message_field=body&host_field=resource.host&timestamp_field=ts&cluster_field=k8s_cluster";
    let (status, r) = post_logs(&app, ADMIN_TOKEN, q, "application/x-ndjson", custom).await;
    assert_eq!((status, r["signals"].as_u64()), (200, Some(1)), "{r}");
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE node = 'n09' AND occurred_at = '2026-11-30T10:02:00Z'")
            .await,
        1
    );
}

#[tokio::test]
async fn a_burst_of_ten_thousand_identical_xids_is_one_signal_and_resending_is_idempotent() {
    let app = spawn_app().await;
    // 10,000 kernel lines of the same Xid (distinct monotonic stamps), no absolute time: all at
    // the request time, so one burst.
    let lines = |from: usize, to: usize| -> String {
        (from..to)
            .map(|i| {
                format!("[{i}.000000] NVRM: Xid (PCI:0000:3b:00): 95, pid=1, name=python, Uncontained ECC error.\n")
            })
            .collect()
    };
    let (status, r) = post_logs(
        &app,
        ADMIN_TOKEN,
        "?cluster=c1&node=n07",
        "text/plain",
        lines(0, 10_000),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (
            r["signals"].as_u64(),
            r["accepted"].as_u64(),
            r["stored"].as_u64(),
            r["folded"].as_u64()
        ),
        (Some(10_000), Some(10_000), Some(1), Some(9_999))
    );
    let burst = || async {
        sqlx::query_as::<_, (i64, i64)>("SELECT count(*), sum(repeat_count) FROM events")
            .fetch_one(&app.db)
            .await
            .unwrap()
    };
    assert_eq!(burst().await, (1, 10_000));
    // The same request again: every line a duplicate, the count unchanged.
    let (_, r) = post_logs(
        &app,
        ADMIN_TOKEN,
        "?cluster=c1&node=n07",
        "text/plain",
        lines(0, 10_000),
    )
    .await;
    assert_eq!(
        (r["accepted"].as_u64(), r["duplicates"].as_u64()),
        (Some(0), Some(10_000))
    );
    // Half of it again (a shipper retrying a partial batch): still duplicates.
    let (_, r) = post_logs(
        &app,
        ADMIN_TOKEN,
        "?cluster=c1&node=n07",
        "text/plain",
        lines(5_000, 10_000),
    )
    .await;
    assert_eq!(
        (r["accepted"].as_u64(), r["duplicates"].as_u64()),
        (Some(0), Some(5_000))
    );
    assert_eq!(burst().await, (1, 10_000));
    // 100 new lines seconds later extend the stored burst: 10,000 + 100.
    let (_, r) = post_logs(
        &app,
        ADMIN_TOKEN,
        "?cluster=c1&node=n07",
        "text/plain",
        lines(10_000, 10_100),
    )
    .await;
    assert_eq!(
        (r["accepted"].as_u64(), r["stored"].as_u64(), r["folded"].as_u64()),
        (Some(100), Some(0), Some(100))
    );
    assert_eq!(burst().await, (1, 10_100));
    let last: Option<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar("SELECT last_occurred_at FROM events")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(last.is_some());
    let (status, list) = app.get(ADMIN_TOKEN, "/v1/failures").await;
    assert_eq!((status, list["failures"].as_array().unwrap().len()), (200, 1));
}

#[tokio::test]
async fn events_bursts_fold_across_requests_and_a_retry_does_not_count_twice() {
    let app = spawn_app().await;
    let first = json!({"events": [event(&uuid_n(1), json!({"occurred_at": "2026-11-30T10:00:00Z"}))]});
    let second = json!({"events": [event(&uuid_n(2), json!({"occurred_at": "2026-11-30T10:00:30Z"}))]});
    let later = json!({"events": [event(&uuid_n(3), json!({"occurred_at": "2026-11-30T10:05:00Z"}))]});
    assert_eq!(app.post_events(ADMIN_TOKEN, &first).await.1["stored"], 1);
    let (_, r) = app.post_events(ADMIN_TOKEN, &second).await;
    assert_eq!((r["accepted"].as_u64(), r["folded"].as_u64()), (Some(1), Some(1)));
    let (_, r) = app.post_events(ADMIN_TOKEN, &second).await;
    assert_eq!(r["duplicates"], 1);
    // 10:05 is 4.5 min after 10:00:30: beyond the 60 s gap, a new row.
    assert_eq!(app.post_events(ADMIN_TOKEN, &later).await.1["stored"], 1);
    let rows: Vec<(i32, Option<chrono::DateTime<chrono::Utc>>)> =
        sqlx::query_as("SELECT repeat_count, last_occurred_at FROM events ORDER BY occurred_at")
            .fetch_all(&app.db)
            .await
            .unwrap();
    let t = |s: &str| s.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
    assert_eq!(rows, vec![(2, Some(t("2026-11-30T10:00:30Z"))), (1, None)]);
}

#[tokio::test]
async fn an_xid_79_and_nccl_timeouts_of_the_same_job_are_one_hardware_gpu_failure() {
    let app = spawn_app().await;
    // The kernel log of n07 (shipped with the job id), then watchdog timeouts from four other
    // nodes of job j1 one to three minutes later.
    let mut records = vec![
        json!({"message": "Nov 30 10:00:00 n07 kernel: [ 5000.123456] NVRM: Xid (PCI:0000:3b:00): 79, pid=4321, name=pt_main_thread, GPU has fallen off the bus.",
                                  "host": "n07", "job_id": "j1", "timestamp": "2026-11-30T10:00:00Z"}),
    ];
    for (i, node) in ["n01", "n02", "n03", "n04"].iter().enumerate() {
        let minute = 1 + i % 3;
        records.push(json!({
            "message": format!("[rank{i}]:[E1130 10:0{minute}:00.000000000 ProcessGroupNCCL.cpp:616] [Rank {i}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=99, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600100 milliseconds before timing out."),
            "host": node, "job_id": "j1", "timestamp": format!("2026-11-30T10:0{minute}:00Z")
        }));
    }
    let (status, r) = post_logs(
        &app,
        ADMIN_TOKEN,
        "?cluster=c1",
        "application/x-ndjson",
        ndjson(&records),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["signals_by_kind"], json!({"xid": 1, "nccl_timeout": 4}));
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/failures").await;
    let failures = list["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{list}");
    let f = &failures[0];
    assert_eq!(f["root_cause"], json!({"category": "hardware", "component": "gpu"}));
    assert_eq!(
        (
            f["root_node"].as_str(),
            f["root_kind"].as_str(),
            f["root_code"].as_i64()
        ),
        (Some("n07"), Some("xid"), Some(79))
    );
    // 1 Xid + 4 timeouts; the first at 10:00, the last at 10:03 (n03: minute 1 + 2 % 3 = 3).
    assert_eq!(
        (f["signal_count"].as_i64(), f["job_id"].as_str(), f["symptom"].as_str()),
        (Some(5), Some("j1"), Some("job_hang"))
    );
    assert_eq!(
        (f["first_at"].as_str(), f["last_at"].as_str()),
        (Some("2026-11-30T10:00:00Z"), Some("2026-11-30T10:03:00Z"))
    );
}

fn health_event(check: &str, component: &str, codes: &[&str], healthy: bool, gpu: &str, at: &str) -> Value {
    json!({
        "version": 1, "agent": "syslog-health-monitor", "componentClass": component, "checkName": check,
        "isFatal": !healthy, "isHealthy": healthy, "message": format!("{check} {codes:?}"),
        "recommendedAction": if healthy { "NONE" } else { "RESTART_BM" }, "errorCode": codes,
        "entitiesImpacted": [{"entityType": "GPU", "entityValue": gpu}, {"entityType": "PCI", "entityValue": "0000:3b:00"}],
        "metadata": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
        "generatedTimestamp": at, "nodeName": "n07"
    })
}

#[tokio::test]
async fn nvsentinel_health_events_are_mapped_and_healthy_ones_make_no_failure() {
    let app = spawn_app().await;
    let body = json!([
        health_event("SysLogsXIDError", "GPU", &["79"], false, "3", "2026-11-30T10:00:00Z"),
        health_event(
            "SysLogsSXIDError",
            "NVSwitch",
            &["20034"],
            false,
            "0",
            "2026-11-30T10:00:05Z"
        ),
        health_event(
            "InfiniBandDegradationCheck",
            "NIC",
            &[],
            false,
            "0",
            "2026-11-30T11:00:00Z"
        ),
    ]);
    let (status, r) = post_nvsentinel(&app, "?cluster=c1", "application/json", body.to_string()).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["signals_by_kind"], json!({"xid": 1, "sxid": 1, "link_down": 1}));
    let (kind, code, gpu): (String, i64, i32) =
        sqlx::query_as("SELECT kind, code, gpu_index FROM events WHERE kind = 'xid'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!((kind.as_str(), code, gpu), ("xid", 79, 3));
    // Resent: duplicates. A healthy event (NDJSON) a day later: stored, but no failure.
    let (_, r) = post_nvsentinel(&app, "?cluster=c1", "application/json", body.to_string()).await;
    assert_eq!(r["duplicates"], 3);
    let healthy = ndjson(&[health_event(
        "SysLogsXIDError",
        "GPU",
        &[],
        true,
        "3",
        "2026-11-30T14:00:00Z",
    )]);
    let (status, r) = post_nvsentinel(&app, "?cluster=c1", "application/x-ndjson", healthy).await;
    assert_eq!(
        (status, r["healthy"].as_u64(), r["accepted"].as_u64()),
        (200, Some(1), Some(1)),
        "{r}"
    );
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/failures").await;
    let failures = list["failures"].as_array().unwrap();
    // 10:00 (xid + sxid, same node, 5 s apart) and 11:00 (link down, an hour later): two failures.
    assert_eq!(failures.len(), 2, "{list}");
    assert!(failures.iter().all(|f| f["first_at"] != "2026-11-30T14:00:00Z"));
    // Bad records are rejected alone; all bad is 422; no cluster is 400.
    let (status, r) = post_nvsentinel(
        &app,
        "?cluster=c1",
        "application/x-ndjson",
        "{\"checkName\": \"X\"}\nnot json\n".into(),
    )
    .await;
    assert_eq!(
        (status, r["details"]["rejected"].as_array().map(Vec::len)),
        (422, Some(2)),
        "{r}"
    );
    let (status, _) = post_nvsentinel(&app, "", "application/json", body.to_string()).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn bad_input_is_unmatched_or_rejected_never_a_500_and_never_loses_valid_lines() {
    let app = spawn_app().await;
    // Binary garbage (invalid UTF-8, NULs), a 2 MB line, an Xid without a number, and one valid Xid.
    let mut body: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .filter(|b| *b != b'\n')
        .collect();
    body.extend_from_slice(b"\n\xff\xfe NVRM: Xid \x00 (PCI:0000:3b:00): \xc3\x28\n");
    body.extend_from_slice("NVRM: Xid (PCI:0000:3b:00): , pid=1, name=x, no number\n".as_bytes());
    body.extend_from_slice(format!("{}\n", "x".repeat(2 * 1024 * 1024)).as_bytes());
    body.extend_from_slice(format!("{XID79_KMSG}\n").as_bytes());
    let (status, r) = post_logs(&app, ADMIN_TOKEN, "?cluster=c1&node=n07", "text/plain", body).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (
            r["lines"].as_u64(),
            r["signals"].as_u64(),
            r["unmatched"].as_u64(),
            r["truncated_lines"].as_u64()
        ),
        (Some(5), Some(1), Some(4), Some(1))
    );
    // NDJSON: a record without a message, a broken line, a NUL inside a valid Xid record, a
    // record of another type: each rejected or stored alone.
    let records = format!(
        "{}\nnot json at all\n{}\n[1,2]\n{}\n",
        json!({"host": "n07", "text": "no message field"}),
        json!({"message": format!("{XID79_KMSG}\u{0}tail"), "host": "n08", "timestamp": "2026-11-30T10:00:00Z"}),
        json!({"message": XID79_KMSG, "host": "n07", "timestamp": 12}),
    );
    let (status, r) = post_logs(&app, ADMIN_TOKEN, "?cluster=c1", "application/x-ndjson", records).await;
    assert_eq!(status, 200, "{r}");
    let rejected: Vec<(u64, &str)> = r["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["index"].as_u64().unwrap(), x["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        rejected,
        vec![(0, "missing_field"), (1, "invalid_json"), (3, "invalid_record")]
    );
    assert_eq!(r["signals"], 2);
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE node = 'n08' AND position('tail' in message) > 0")
            .await,
        1
    );
    // Only bad records: 422 with the reasons; no cluster for text: 400; wrong type: 415.
    let (status, r) = post_logs(
        &app,
        ADMIN_TOKEN,
        "?cluster=c1",
        "application/x-ndjson",
        "{\"log2\": 1}\n".to_string(),
    )
    .await;
    assert_eq!(
        (status, r["details"]["rejected"][0]["reason"].as_str()),
        (422, Some("missing_field"))
    );
    let (status, r) = post_logs(&app, ADMIN_TOKEN, "", "text/plain", XID79_KMSG.to_string()).await;
    assert_eq!((status, r["error"].as_str()), (400, Some("missing_parameter")));
    let (status, _) = post_logs(&app, ADMIN_TOKEN, "?cluster=c1", "application/xml", "<x/>".to_string()).await;
    assert_eq!(status, 415);
    let (status, _) = post_logs(&app, ADMIN_TOKEN, "?cluster=c1", "text/plain", "  \n".to_string()).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn logs_need_an_ingest_token_for_the_cluster() {
    let app = spawn_app().await;
    let reader = app.token("reader", None).await;
    let scoped = app.token("agent", Some("c2")).await;
    let (status, _) = post_logs(&app, &reader, "?cluster=c1", "text/plain", XID79_KMSG.to_string()).await;
    assert_eq!(status, 403);
    let (status, _) = post_logs(&app, &scoped, "?cluster=c1", "text/plain", XID79_KMSG.to_string()).await;
    assert_eq!(status, 403);
    let (status, _) = post_logs(&app, "nope", "?cluster=c1", "text/plain", XID79_KMSG.to_string()).await;
    assert_eq!(status, 401);
    // A record naming another cluster is rejected alone.
    let records = ndjson(&[
        json!({"message": XID79_KMSG, "host": "n1", "cluster": "c1"}),
        json!({"message": XID79_KMSG, "host": "n1", "cluster": "c2"}),
    ]);
    let (status, r) = post_logs(&app, &scoped, "", "application/x-ndjson", records).await;
    assert_eq!(
        (status, r["rejected"][0]["reason"].as_str(), r["accepted"].as_u64()),
        (200, Some("forbidden_cluster"), Some(1)),
        "{r}"
    );
}

#[tokio::test]
async fn driver_lines_of_a_gpu_that_cannot_be_used_are_failures_of_their_own_rules() {
    let app = spawn_app().await;
    // One node each (the lines of one node would fold into one failure).
    let cases = [
        (
            "n1",
            "[Sun Apr 14 12:48:42 2024] NVRM: GPU 0000:81:00.0: RmInitAdapter failed! (0x25:0x40:1470)",
            "gpu-init-failure",
            "hardware",
            "gpu",
        ),
        (
            "n2",
            "[28525.409543] NVRM: The NVIDIA probe routine failed for 1 device(s).",
            "gpu-probe-failure",
            "platform",
            "driver",
        ),
        (
            "n3",
            "NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2874",
            "gpu-reset-required",
            "hardware",
            "gpu",
        ),
    ];
    for (node, line, ..) in cases {
        let (status, r) = post_logs(
            &app,
            ADMIN_TOKEN,
            &format!("?cluster=c1&node={node}"),
            "text/plain",
            format!("{line}\n"),
        )
        .await;
        assert_eq!((status, r["stored"].as_u64()), (200, Some(1)), "{line}: {r}");
    }
    for (node, _, rule, category, component) in cases {
        let (_, list) = app.get(ADMIN_TOKEN, &format!("/v1/failures?node={node}")).await;
        let f = &list["failures"][0];
        assert_eq!(
            (
                f["rule_id"].as_str(),
                f["root_cause"]["category"].as_str(),
                f["root_cause"]["component"].as_str()
            ),
            (Some(rule), Some(category), Some(component)),
            "{node}: {list}"
        );
    }
    let bus: Option<String> =
        sqlx::query_scalar("SELECT attributes->>'pci_bus_id' FROM events WHERE kind = 'gpu_init_failure'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(bus.as_deref(), Some("0000:81:00.0"));
}
