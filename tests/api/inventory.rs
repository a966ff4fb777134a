use serde_json::json;

use crate::helpers::{ADMIN_TOKEN, spawn_app};

#[tokio::test]
async fn nodes_are_upserted_with_generation_and_listed_with_pagination() {
    let app = spawn_app().await;
    let agent = app.token("agent", None).await;
    let nodes: Vec<_> = (0..5)
        .map(|i| json!({"hostname": format!("n{i:02}"), "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
                        "group": "su-1", "in_service_since": "2026-01-01T00:00:00Z"}))
        .chain([json!({"hostname": "a100-1", "cluster": "c2", "gpu_model": "A100-SXM4-80GB", "gpu_count": 8}),
                json!({"hostname": "bad", "cluster": "c2", "gpu_model": "A100", "gpu_count": -8})])
        .collect();
    let (status, body) = app.put_nodes(&agent, &json!({"nodes": nodes})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["upserted"], 6);
    assert_eq!(body["rejected"][0]["index"], 6);
    assert_eq!(body["rejected"][0]["field"], "gpu_count");

    // Re-registering without in_service_since keeps it; gpu_count changes.
    let (status, _) = app
        .put_nodes(
            &agent,
            &json!({"nodes": [{"hostname": "n00", "cluster": "c1", "gpu_model": "H100", "gpu_count": 4}]}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, page) = app.get(&agent, "/v1/nodes?cluster=c1&limit=2").await;
    assert_eq!(status, 200);
    assert_eq!(page["nodes"][0]["hostname"], "n00");
    assert_eq!(page["nodes"][0]["gpu_count"], 4);
    assert_eq!(page["nodes"][0]["gpu_generation"], "hopper");
    assert_eq!(page["nodes"][0]["in_service_since"], "2026-01-01T00:00:00Z");
    let mut seen = vec![];
    let mut cursor = page["next_cursor"].as_str().map(str::to_string);
    seen.extend(
        page["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["hostname"].as_str().unwrap().to_string()),
    );
    while let Some(c) = cursor {
        let (_, page) = app
            .get(&agent, &format!("/v1/nodes?cluster=c1&limit=2&cursor={c}"))
            .await;
        seen.extend(
            page["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["hostname"].as_str().unwrap().to_string()),
        );
        cursor = page["next_cursor"].as_str().map(str::to_string);
    }
    assert_eq!(seen, ["n00", "n01", "n02", "n03", "n04"]);
    let (_, page) = app.get(ADMIN_TOKEN, "/v1/nodes?generation=ampere").await;
    assert_eq!(page["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(page["nodes"][0]["hostname"], "a100-1");
    // A new node without in_service_since starts at its first registration.
    assert!(page["nodes"][0]["in_service_since"].as_str().unwrap().starts_with("20"));
}

#[tokio::test]
async fn bad_queries_and_duplicate_hostnames_are_4xx() {
    let app = spawn_app().await;
    let (status, body) = app.get(ADMIN_TOKEN, "/v1/nodes?limit=abc").await;
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_query")));
    assert!(body["message"].as_str().unwrap().contains("limit"), "{body}");
    let (status, _) = app.get(ADMIN_TOKEN, "/v1/nodes?limit=0").await;
    assert_eq!(status, 400);
    let (status, _) = app.get(ADMIN_TOKEN, "/v1/nodes?generation=fermi").await;
    assert_eq!(status, 400);
    let (status, _) = app.get(ADMIN_TOKEN, "/v1/nodes?cursor=zz").await;
    assert_eq!(status, 400);
    let n = json!({"hostname": "n1", "cluster": "c", "gpu_model": "L40S", "gpu_count": 4});
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({"nodes": [n, n]})).await;
    assert_eq!(status, 200);
    assert_eq!(body["upserted"], 1);
    assert_eq!(body["rejected"][0]["reason"], "duplicate_in_batch");
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({"nodes": "n1"})).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("nodes"), "{body}");
}

#[tokio::test]
async fn empty_query_values_mean_absent() {
    let app = spawn_app().await;
    let (status, body) = app.get(ADMIN_TOKEN, "/v1/nodes?cluster=&generation=&limit=").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = app.get(ADMIN_TOKEN, "/v1/analytics/failure-mix?by=&cluster=").await;
    assert_eq!((status, body["by"].as_str()), (200, Some("gpu_generation")));
}
