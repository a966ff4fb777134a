use serde_json::json;

use crate::helpers::{ADMIN_TOKEN, event, spawn_app, status_json, uuid_n};

#[tokio::test]
async fn missing_or_bad_tokens_get_401_json() {
    let app = spawn_app().await;
    let res = app.client.get(app.url("/v1/nodes")).send().await.unwrap();
    assert_eq!(res.headers()["www-authenticate"], "Bearer");
    let (status, body) = status_json(res).await;
    assert_eq!((status, body["error"].as_str()), (401, Some("unauthorized")));
    for bad in [
        "nope",
        "flt_00000000000000000000000000000000_0000000000000000000000000000000000000000000000000000000000000000",
    ] {
        let (status, _) = app.get(bad, "/v1/nodes").await;
        assert_eq!(status, 401, "{bad}");
    }
    let res = app
        .client
        .get(app.url("/v1/nodes"))
        .header("authorization", "Basic abc")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
}

#[tokio::test]
async fn roles_allow_and_forbid_per_issue() {
    let app = spawn_app().await;
    let agent = app.token("agent", None).await;
    let reader = app.token("reader", None).await;
    let batch = json!({"events": [event(&uuid_n(1), json!({}))]});
    assert_eq!(app.post_events(&agent, &batch).await.0, 200);
    assert_eq!(app.post_events(&reader, &batch).await.0, 403);
    let nodes = json!({"nodes": [{"hostname": "n1", "cluster": "c1", "gpu_model": "H100", "gpu_count": 8}]});
    assert_eq!(app.put_nodes(&agent, &nodes).await.0, 200);
    assert_eq!(app.put_nodes(&reader, &nodes).await.0, 403);
    assert_eq!(app.get(&reader, "/v1/nodes").await.0, 200);
    assert_eq!(app.get(&agent, "/v1/nodes").await.0, 200);
    for token in [&agent, &reader] {
        assert_eq!(app.get(token, "/v1/tokens").await.0, 403);
    }
    assert_eq!(app.get(ADMIN_TOKEN, "/v1/tokens").await.0, 200);
}

#[tokio::test]
async fn a_cluster_scoped_agent_cannot_write_another_cluster() {
    let app = spawn_app().await;
    let agent = app.token("agent", Some("c1")).await;
    let (status, body) = app
        .post_events(
            &agent,
            &json!({"events": [
        event(&uuid_n(1), json!({"cluster": "c1"})), event(&uuid_n(2), json!({"cluster": "c2"}))]}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["accepted"], 1);
    assert_eq!(body["rejected"][0]["reason"], "forbidden_cluster");
    let (status, _) = app
        .post_events(
            &agent,
            &json!({"events": [event(&uuid_n(3), json!({"cluster": "c2"}))]}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = app
        .put_nodes(
            &agent,
            &json!({"nodes": [{"hostname": "x", "cluster": "c2", "gpu_model": "H100", "gpu_count": 8}]}),
        )
        .await;
    assert_eq!(status, 403);
    assert_eq!(app.count("SELECT count(*) FROM events WHERE cluster = 'c2'").await, 0);
}

#[tokio::test]
async fn tokens_are_listed_without_secrets_and_revocation_takes_effect() {
    let app = spawn_app().await;
    let res = app
        .client
        .post(app.url("/v1/tokens"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "ci", "role": "reader"}))
        .send()
        .await
        .unwrap();
    let (status, created) = status_json(res).await;
    assert_eq!(status, 201);
    let secret = created["token"].as_str().unwrap().to_string();
    assert_eq!(app.get(&secret, "/v1/nodes").await.0, 200);
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/tokens").await;
    assert_eq!(list[0]["name"], "ci");
    assert!(list[0].get("token").is_none() && !list.to_string().contains(&secret[20..]));
    let stored: Vec<u8> = sqlx::query_scalar("SELECT secret_hash FROM api_tokens")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(stored.len(), 32);
    let id = created["id"].as_str().unwrap();
    let res = app
        .client
        .delete(app.url(&format!("/v1/tokens/{id}")))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(app.get(&secret, "/v1/nodes").await.0, 401);
    let res = app
        .client
        .delete(app.url(&format!("/v1/tokens/{id}")))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(res).await.0, 404);
    let res = app
        .client
        .delete(app.url("/v1/tokens/not-a-uuid"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(res).await.0, 400);
    let res = app
        .client
        .post(app.url("/v1/tokens"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "x", "role": "root"}))
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(res).await.0, 400);
}

#[tokio::test]
async fn open_endpoints_need_no_token_and_unknown_routes_are_json_404() {
    let app = spawn_app().await;
    assert_eq!(app.client.get(app.url("/healthz")).send().await.unwrap().status(), 200);
    let (status, body) = status_json(app.client.get(app.url("/readyz")).send().await.unwrap()).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ready")));
    let (status, body) = status_json(app.client.get(app.url("/v1/nope")).send().await.unwrap()).await;
    assert_eq!((status, body["error"].as_str()), (404, Some("not_found")));
    let (status, body) = status_json(app.client.patch(app.url("/v1/events")).send().await.unwrap()).await;
    assert_eq!(status, 405, "{body}");
    let docs = app.client.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(docs.status(), 200);
    assert!(docs.text().await.unwrap().contains("swagger"));
}
