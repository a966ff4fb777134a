use std::io::Write;

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, event, join_all, spawn_app, spawn_app_with, status_json, uuid_n};

#[tokio::test]
async fn a_valid_batch_is_stored_and_a_retry_counts_as_duplicates() {
    let app = spawn_app().await;
    let agent = app.token("agent", None).await;
    let batch = json!({"events": [event(&uuid_n(1), json!({})), event(&uuid_n(2), json!({"kind": "nccl_timeout", "code": null}))]});
    let (status, body) = app.post_events(&agent, &batch).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["received"].as_u64(),
            body["accepted"].as_u64(),
            body["duplicates"].as_u64()
        ),
        (Some(2), Some(2), Some(0))
    );
    let (status, body) = app.post_events(&agent, &batch).await;
    assert_eq!(status, 200);
    assert_eq!(
        (body["accepted"].as_u64(), body["duplicates"].as_u64()),
        (Some(0), Some(2))
    );
    assert_eq!(app.count("SELECT count(*) FROM events").await, 2);
    let (kind, code): (String, Option<i64>) = sqlx::query_as("SELECT kind, code FROM events WHERE id = $1")
        .bind(uuid::Uuid::parse_str(&uuid_n(1)).unwrap())
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!((kind.as_str(), code), ("xid", Some(79)));
}

#[tokio::test]
async fn concurrent_retries_store_each_event_once() {
    let app = spawn_app().await;
    let agent = app.token("agent", None).await;
    // Distinct codes: identical signals would fold into one burst row (see logs.rs for bursts).
    let batch = json!({"events": (0..200).map(|i| event(&uuid_n(i), json!({"code": i}))).collect::<Vec<_>>()});
    let results = join_all((0..8).map(|_| app.post_events(&agent, &batch)).collect()).await;
    let accepted: u64 = results
        .iter()
        .map(|(s, b)| {
            assert_eq!(*s, 200, "{b}");
            b["accepted"].as_u64().unwrap()
        })
        .sum();
    let duplicates: u64 = results.iter().map(|(_, b)| b["duplicates"].as_u64().unwrap()).sum();
    assert_eq!(accepted, 200);
    assert_eq!(duplicates, 7 * 200);
    assert_eq!(app.count("SELECT count(*) FROM events").await, 200);
}

#[tokio::test]
async fn invalid_items_are_rejected_alone_with_index_and_field() {
    let app = spawn_app().await;
    let agent = app.token("agent", None).await;
    let batch = json!({"events": [
        event(&uuid_n(1), json!({})),
        event(&uuid_n(2), json!({"occurred_at": "yesterday"})),
        event(&uuid_n(3), json!({"root_cause": {"category": "user", "component": "nvlink"}})),
        event(&uuid_n(4), json!({"symptom": "exploded"})),
        {"id": uuid_n(5), "occurred_at": "2026-11-02T10:00:00Z", "kind": "xid"},
        event(&uuid_n(6), json!({"gpu_index": "three"})),
        event("not-a-uuid", json!({})),
        event(&uuid_n(8), json!({"kind": "my_custom_kind", "root_cause": {"category": "platform", "component": "storage"}})),
    ]});
    let (status, body) = app.post_events(&agent, &batch).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["accepted"], 2);
    let rejected: Vec<(u64, Option<&str>)> = body["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["index"].as_u64().unwrap(), r["field"].as_str()))
        .collect();
    assert_eq!(
        rejected,
        vec![
            (1, Some("occurred_at")),
            (2, Some("root_cause.component")),
            (3, Some("symptom")),
            (4, None),
            (5, Some("gpu_index")),
            (6, Some("id"))
        ]
    );
    assert!(
        body["rejected"][3]["message"].as_str().unwrap().contains("cluster"),
        "{body}"
    );
    assert_eq!(app.count("SELECT count(*) FROM events").await, 2);
    let kind: String = sqlx::query_scalar("SELECT kind FROM events WHERE rc_component = 'storage'")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(kind, "my_custom_kind");
}

#[tokio::test]
async fn a_batch_of_only_invalid_items_is_422_with_details() {
    let app = spawn_app().await;
    let (status, body) = app
        .post_events(
            ADMIN_TOKEN,
            &json!({"events": [event(&uuid_n(1), json!({"cluster": ""}))]}),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["error"], "validation_failed");
    assert_eq!(body["details"]["rejected"][0]["field"], "cluster");
}

#[tokio::test]
async fn malformed_bodies_get_json_4xx() {
    let app = spawn_app().await;
    let send = |body: &'static str, ct: &'static str| {
        app.client
            .post(app.url("/v1/events"))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", ct)
            .body(body)
            .send()
    };
    let (status, body) = status_json(send("{\"events\": [", "application/json").await.unwrap()).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_json")));
    let (status, body) = status_json(send("{\"events\": []}", "application/json").await.unwrap()).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("empty_batch")));
    let (status, body) = status_json(send("", "application/json").await.unwrap()).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("empty_body")));
    let (status, body) = status_json(send("[1,2]", "application/json").await.unwrap()).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_json")));
    let (status, body) = status_json(send("id,kind\n1,xid", "text/csv").await.unwrap()).await;
    assert_eq!((status, body["error"].as_str()), (415, Some("unsupported_media_type")));
    let (status, body) = status_json(
        app.client
            .post(app.url("/v1/events"))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "application/json")
            .header("content-encoding", "gzip")
            .body("this is not gzip")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = status_json(
        app.client
            .post(app.url("/v1/events"))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "application/json")
            .header("content-encoding", "br")
            .body("{}")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 415);
}

#[tokio::test]
async fn ndjson_and_gzip_are_accepted_and_bad_lines_fail_alone() {
    let app = spawn_app().await;
    let lines = [
        event(&uuid_n(1), json!({})).to_string(),
        "{not json".to_string(),
        event(&uuid_n(2), json!({})).to_string(),
    ];
    let body = lines.join("\n") + "\n";
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(body.as_bytes()).unwrap();
    let res = app
        .client
        .post(app.url("/v1/events"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/x-ndjson")
        .header("content-encoding", "gzip")
        .body(gz.finish().unwrap())
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(res).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["accepted"], 2);
    assert_eq!(body["rejected"][0]["index"], 1);
    assert_eq!(body["rejected"][0]["reason"], "invalid_json");
}

#[tokio::test]
async fn oversize_bodies_batches_and_gzip_bombs_get_413() {
    let app = spawn_app_with(faultline::app::configuration::Limits {
        max_body_bytes: 64 * 1024,
        max_batch_items: 50,
        max_inflight_ingest: 4,
        ..Default::default()
    })
    .await;
    let big = json!({"events": (0..51).map(|i| event(&uuid_n(i), json!({}))).collect::<Vec<_>>()});
    let (status, body) = app.post_events(ADMIN_TOKEN, &big).await;
    assert_eq!((status, body["error"].as_str()), (413, Some("payload_too_large")));
    let huge = json!({"events": [event(&uuid_n(1), json!({"message": "x".repeat(100 * 1024)}))]});
    let (status, _) = app.post_events(ADMIN_TOKEN, &huge).await;
    assert_eq!(status, 413);
    // 10 MiB of zeros compress to ~10 KiB: the limit applies to the decompressed size.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&vec![b' '; 10 * 1024 * 1024]).unwrap();
    let bomb = gz.finish().unwrap();
    assert!(bomb.len() < 64 * 1024);
    let res = app
        .client
        .post(app.url("/v1/events"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(bomb)
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(res).await;
    assert_eq!(status, 413, "{body}");
}

#[tokio::test]
async fn five_thousand_events_are_stored_in_one_request() {
    let app = spawn_app().await;
    let batch = json!({"events": (0..5000).map(|i| event(&uuid_n(i), json!({"node": format!("n{:03}", i % 97), "code": i}))).collect::<Vec<Value>>()});
    let (status, body) = app.post_events(ADMIN_TOKEN, &batch).await;
    assert_eq!(status, 200);
    assert_eq!(body["accepted"], 5000);
    assert_eq!(app.count("SELECT count(*) FROM events").await, 5000);
}

#[tokio::test]
async fn metrics_count_events_by_outcome() {
    let app = spawn_app().await;
    app.post_events(
        ADMIN_TOKEN,
        &json!({"events": [event(&uuid_n(1), json!({})), event(&uuid_n(2), json!({"cluster": ""}))]}),
    )
    .await;
    let text = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("faultline_ingest_items_total{route=\"events\",outcome=\"accepted\""),
        "{text}"
    );
    assert!(
        text.contains("faultline_ingest_items_total{route=\"events\",outcome=\"rejected\",reason=\"invalid_field\"}"),
        "{text}"
    );
    assert!(text.contains("faultline_http_requests_total"), "{text}");
}

#[tokio::test]
async fn ingest_beyond_the_inflight_bound_is_shed_with_503_and_retry_after() {
    // No ingest slot at all: every ingest request is shed before its body is read.
    let app = spawn_app_with(faultline::app::configuration::Limits {
        max_inflight_ingest: 0,
        ..Default::default()
    })
    .await;
    let res = app
        .client
        .post(app.url("/v1/events"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"events": [event(&uuid_n(1), json!({}))]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["retry-after"], "1");
    let (status, body) = status_json(res).await;
    assert_eq!((status, body["error"].as_str()), (503, Some("unavailable")));
    assert_eq!(app.count("SELECT count(*) FROM events").await, 0);
    let text = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("faultline_ingest_shed_total{endpoint=\"events\"}"),
        "{text}"
    );
}

#[tokio::test]
async fn the_same_id_twice_in_one_batch_is_one_event_and_one_duplicate() {
    let app = spawn_app().await;
    let e = event(&uuid_n(1), json!({}));
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": [e, e]})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["received"].as_u64(),
            body["accepted"].as_u64(),
            body["duplicates"].as_u64()
        ),
        (Some(2), Some(1), Some(1))
    );
    assert_eq!(body["rejected"], json!([]));
    assert_eq!(app.count("SELECT count(*) FROM events").await, 1);
}
