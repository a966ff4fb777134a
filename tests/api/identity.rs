//! A signal's identity at the server (`faultline_core::domain::identity`): different GPUs,
//! reasons and counters stay signals of their own; repeats of one thing still fold.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, event, spawn_app, status_json, uuid_n};

async fn post_logs(app: &TestApp, query: &str, body: String) -> (u16, Value) {
    let res = app
        .client
        .post(app.url(&format!("/v1/logs{query}")))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "text/plain")
        .body(body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

/// (bus, GPU UUID, repeat count, message) of every stored signal, in a fixed order.
async fn rows(app: &TestApp) -> Vec<(Option<String>, Option<String>, i32, Option<String>)> {
    sqlx::query_as(
        "SELECT attributes->>'pci_bus_id', gpu_uuid, repeat_count, message FROM events
         ORDER BY occurred_at, attributes->>'pci_bus_id', gpu_uuid, message",
    )
    .fetch_all(&app.db)
    .await
    .unwrap()
}

#[tokio::test]
async fn two_gpus_named_by_bus_in_one_batch_are_two_signals_and_a_storm_of_one_is_one() {
    let app = spawn_app().await;
    let line = |bus: &str, pid: u32| {
        format!("2026-12-01T10:00:00Z NVRM: Xid (PCI:0000:{bus}:00): 45, pid={pid}, name=python, Ch 00000008\n")
    };
    let (status, r) = post_logs(&app, "?cluster=c1&node=n07", line("dc", 11) + &line("ed", 12)).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!((r["accepted"].as_u64(), r["stored"].as_u64()), (Some(2), Some(2)));
    let got = rows(&app).await;
    assert_eq!(
        got.iter().map(|r| (r.0.as_deref(), r.2)).collect::<Vec<_>>(),
        [(Some("0000:dc:00.0"), 1), (Some("0000:ed:00.0"), 1)]
    );

    // 1,000 lines of one XID on one bus, each from another process: one signal counting 1,000,
    // beside the two above.
    let storm: String = (0..1_000)
        .map(|i| {
            // One every 50 ms from 10:05:00.
            format!(
                "2026-12-01T10:05:{:02}.{:03}Z NVRM: Xid (PCI:0000:3b:00): 13, pid={}, name=python, Graphics Exception\n",
                i * 50 / 1000,
                i * 50 % 1000,
                1000 + i
            )
        })
        .collect();
    let (status, r) = post_logs(&app, "?cluster=c1&node=n07", storm).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!((r["accepted"].as_u64(), r["stored"].as_u64()), (Some(1_000), Some(1)));
    let counts: Vec<i32> = rows(&app).await.iter().map(|r| r.2).collect();
    assert_eq!(counts, [1, 1, 1_000]);
}

#[tokio::test]
async fn two_gpus_named_by_uuid_alone_are_two_signals_in_one_batch_and_across_batches() {
    let app = spawn_app().await;
    let xid79 = |n: u32, at: &str, uuid: &str| {
        event(
            &uuid_n(n),
            json!({"occurred_at": at, "node": "n07", "gpu_uuid": uuid, "code": 79}),
        )
    };
    let batch = json!({"events": [
        xid79(1, "2026-12-01T10:00:00Z", "GPU-aaaa"),
        xid79(2, "2026-12-01T10:00:05Z", "GPU-bbbb"),
    ]});
    let (status, r) = app.post_events(ADMIN_TOKEN, &batch).await;
    assert_eq!((status, r["stored"].as_u64()), (200, Some(2)), "{r}");
    // A repeat of each, 20 s later and in another request, extends its own GPU's signal.
    let later = json!({"events": [
        xid79(3, "2026-12-01T10:00:20Z", "GPU-bbbb"),
        xid79(4, "2026-12-01T10:00:25Z", "GPU-aaaa"),
        xid79(5, "2026-12-01T10:00:26Z", "GPU-aaaa"),
    ]});
    let (status, r) = app.post_events(ADMIN_TOKEN, &later).await;
    assert_eq!(
        (status, r["stored"].as_u64(), r["folded"].as_u64()),
        (200, Some(0), Some(3)),
        "{r}"
    );
    let got: Vec<(Option<String>, i32)> = rows(&app).await.into_iter().map(|r| (r.1, r.2)).collect();
    assert_eq!(got, [(Some("GPU-aaaa".into()), 3), (Some("GPU-bbbb".into()), 2)]);
}

#[tokio::test]
async fn two_drain_reasons_28_s_apart_are_two_signals_with_their_own_classifications() {
    let app = spawn_app().await;
    let ecc = "NHC: check_gpu_ecc: uncorrectable ECC errors on GPU 3";
    let fs = "NHC: check_fs_mount: /lustre not mounted";
    let reason = |n: u32, at: &str, text: &str| {
        event(
            &uuid_n(n),
            json!({"occurred_at": at, "node": "n07", "kind": "health_check", "code": null, "message": text}),
        )
    };
    let batch = json!({"events": [
        reason(1, "2026-12-01T10:00:00Z", ecc),
        reason(2, "2026-12-01T10:00:28Z", fs),
    ]});
    let (status, r) = app.post_events(ADMIN_TOKEN, &batch).await;
    assert_eq!((status, r["stored"].as_u64()), (200, Some(2)), "{r}");
    // The same reasons again, each 30 s after its first: repeats of it.
    let again = json!({"events": [
        reason(3, "2026-12-01T10:00:30Z", ecc),
        reason(4, "2026-12-01T10:00:58Z", fs),
    ]});
    let (_, r) = app.post_events(ADMIN_TOKEN, &again).await;
    assert_eq!((r["stored"].as_u64(), r["folded"].as_u64()), (Some(0), Some(2)), "{r}");
    let got: Vec<(Option<String>, i32)> = rows(&app).await.into_iter().map(|r| (r.3, r.2)).collect();
    assert_eq!(got, [(Some(ecc.into()), 2), (Some(fs.into()), 2)]);

    // Each signal is classified from its own text, as /v1/classify classifies it.
    let res = app
        .client
        .post(app.url("/v1/classify"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"items": [{"kind": "health_check", "message": ecc}, {"kind": "health_check", "message": fs}]}))
        .send()
        .await
        .unwrap();
    let (_, classified) = status_json(res).await;
    let want: Vec<(String, String)> = classified["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["category"].as_str().unwrap().into(),
                x["component"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_ne!(want[0], want[1], "the two reasons classify differently: {want:?}");
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/failures").await;
    let mut got = Vec::new();
    for f in list["failures"].as_array().unwrap() {
        let (_, detail) = app
            .get(ADMIN_TOKEN, &format!("/v1/failures/{}", f["id"].as_str().unwrap()))
            .await;
        for s in detail["signals"].as_array().unwrap() {
            got.push((
                s["message"].as_str().unwrap().to_string(),
                (
                    s["root_cause"]["category"].as_str().unwrap().to_string(),
                    s["root_cause"]["component"].as_str().unwrap().to_string(),
                ),
            ));
        }
    }
    got.sort();
    let mut expected = vec![(fs.to_string(), want[1].clone()), (ecc.to_string(), want[0].clone())];
    expected.sort();
    assert_eq!(got, expected);
}

#[tokio::test]
async fn distinct_counters_of_one_gpu_are_distinct_signals_with_their_attributes() {
    let app = spawn_app().await;
    let counter = |n: u32, kind: &str, code: Option<i64>, name: &str, message: &str| {
        event(
            &uuid_n(n),
            json!({"occurred_at": "2026-12-01T10:00:00Z", "node": "n07", "gpu_index": 1, "gpu_uuid": "GPU-1",
                   "kind": kind, "code": code, "message": message,
                   "attributes": {"source": "agent:nvidia-smi", "counter": name, "serial": "1650924060175"}}),
        )
    };
    let batch = json!({"events": [
        counter(1, "ecc", Some(2), "ecc_volatile_uncorrected", "GPU 1: uncorrectable ECC errors (volatile) rose from 0 to 1"),
        counter(2, "ecc", Some(2), "ecc_aggregate_uncorrected", "GPU 1: uncorrectable ECC errors (aggregate) rose from 0 to 1"),
        counter(3, "row_remap", None, "retired_pages_double_bit", "GPU 1: pages retired for double-bit errors rose from 0 to 1"),
        counter(4, "row_remap", None, "retired_pages_pending", "GPU 1: a page retirement is pending (takes effect at the next driver reload)"),
    ]});
    let (status, r) = app.post_events(ADMIN_TOKEN, &batch).await;
    assert_eq!((status, r["stored"].as_u64()), (200, Some(4)), "{r}");
    let mut counters: Vec<String> = sqlx::query_scalar("SELECT attributes->>'counter' FROM events")
        .fetch_all(&app.db)
        .await
        .unwrap();
    counters.sort();
    assert_eq!(
        counters,
        [
            "ecc_aggregate_uncorrected",
            "ecc_volatile_uncorrected",
            "retired_pages_double_bit",
            "retired_pages_pending"
        ]
    );
}
