//! The HTTP edge: NUL in query and path strings, closed metric labels.

use serde_json::Value;

use faultline::app::configuration::Limits;
use faultline::app::edge::EdgeSettings;
use faultline::http::rate_limit::RateLimitSettings;

use crate::helpers::{ADMIN_TOKEN, spawn_app, spawn_app_on, status_json};

/// Every GET route of the OpenAPI document (so a new route is covered without editing this
/// test), each query parameter alone set to NUL, and each path parameter set to `a%00`: always a
/// 400 JSON error that names the parameter, never a 500.
#[tokio::test]
async fn nul_in_any_query_or_path_parameter_is_a_400_naming_it() {
    // Hundreds of requests on one token: its rate limit is not what is tested here.
    let server_url = crate::helpers::test_server_url().await.unwrap();
    let edge = EdgeSettings {
        rate_limit: RateLimitSettings {
            rate_limit_per_token_rps: 0.0,
            ..Default::default()
        },
        ..EdgeSettings::default()
    };
    let app = spawn_app_on(&server_url, Limits::default(), edge).await;
    let doc: Value = serde_json::from_str(&faultline::http::openapi::openapi_json()).unwrap();
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(op) = item.get("get") else { continue };
        let params: Vec<(String, String)> = op["parameters"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .map(|p| {
                        (
                            p["name"].as_str().unwrap().to_string(),
                            p["in"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        // A harmless value for each path parameter, so the query cases reach the handler.
        let mut plain_path = path.clone();
        for (name, _) in params.iter().filter(|(_, at)| at == "path") {
            plain_path = plain_path.replace(&format!("{{{name}}}"), "x");
        }
        let mut cases: Vec<(String, String)> = Vec::new();
        for (name, at) in &params {
            match at.as_str() {
                "query" => cases.push((format!("{plain_path}?{name}=%00"), name.clone())),
                "path" => {
                    // This path parameter NUL, the others harmless.
                    let mut p = path.clone();
                    for (other, _) in params.iter().filter(|(_, at)| at == "path") {
                        let v = if other == name { "a%00" } else { "x" };
                        p = p.replace(&format!("{{{other}}}"), v);
                    }
                    cases.push((p, name.clone()));
                }
                _ => {}
            }
        }
        // `cluster` and `group` holding NUL on every GET route, documented or not: never a 500.
        cases.push((format!("{plain_path}?cluster=%00&group=%00"), String::new()));
        for (url, name) in cases {
            let res = app
                .client
                .get(app.url(&url))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await
                .unwrap();
            checked += 1;
            if name.is_empty() {
                let status = res.status();
                assert!(
                    status.as_u16() < 500,
                    "GET {url}: {status} {}",
                    res.text().await.unwrap()
                );
                continue;
            }
            let (status, body) = status_json(res).await;
            assert_eq!(status, 400, "GET {url}: {body}");
            let message = body["message"].as_str().unwrap_or_default();
            assert!(message.contains(&format!("`{name}`")), "GET {url}: {message}");
        }
    }
    assert!(
        checked >= 40,
        "only {checked} requests: is the OpenAPI document listing the GET routes?"
    );
    // A query parameter and a path parameter holding NUL, spelled out.
    for url in [
        "/v1/failures?cluster=%00",
        "/v1/analytics/mtbf?group=%00",
        "/v1/nodes/a%00/b/state",
    ] {
        let (status, body) = app.get(ADMIN_TOKEN, url).await;
        assert_eq!(status, 400, "GET {url}: {body}");
        assert_eq!(body["error"], "invalid_parameter", "GET {url}: {body}");
    }
}

/// Path parameters on write routes are checked too (a NUL rule id, a NUL token id).
#[tokio::test]
async fn nul_in_write_route_path_is_a_400() {
    let app = spawn_app().await;
    let res = app
        .client
        .delete(app.url("/v1/classification-rules/r%00"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(res).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("`rule_id`"), "{body}");
    let res = app
        .client
        .delete(app.url("/v1/tokens/a%00"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
}

fn request_series(metrics: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with("faultline_http_request"))
        .map(|l| l.rsplit_once(' ').map_or(l, |(series, _)| series).to_string())
        .collect()
}

/// 200 requests with random verbs to /healthz add no series: the method label is `other` for
/// every non-standard verb.
#[tokio::test]
async fn random_methods_add_no_metric_series() {
    let app = spawn_app().await;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut random_verb = move || {
        let mut verb = String::new();
        for _ in 0..8 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            verb.push((b'A' + (seed % 26) as u8) as char);
        }
        verb
    };
    let send = |verb: String| {
        let method = reqwest::Method::from_bytes(verb.as_bytes()).unwrap();
        app.client.request(method, app.url("/healthz")).send()
    };
    // One of each first, so the series a random verb may legitimately create exist.
    let res = send(random_verb()).await.unwrap();
    assert_eq!(res.status(), 405);
    app.client.get(app.url("/metrics")).send().await.unwrap();
    let metrics = |app: &crate::helpers::TestApp| {
        let url = app.url("/metrics");
        let client = app.client.clone();
        async move { client.get(url).send().await.unwrap().text().await.unwrap() }
    };
    let before = request_series(&metrics(&app).await);
    for _ in 0..200 {
        send(random_verb()).await.unwrap();
    }
    let after_text = metrics(&app).await;
    let after = request_series(&after_text);
    assert_eq!(
        before.len(),
        after.len(),
        "new series: {:?}",
        after.iter().filter(|s| !before.contains(s)).collect::<Vec<_>>()
    );
    let known = [
        "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT", "TRACE", "other",
    ];
    for series in &after {
        if let Some(rest) = series.split("method=\"").nth(1) {
            let method = rest.split('"').next().unwrap();
            assert!(known.contains(&method), "{series}");
        }
    }
    assert!(
        after_text.contains("method=\"other\",route=\"/healthz\""),
        "{after_text}"
    );
    // An unknown path is `unmatched`, not the path itself.
    app.client.get(app.url("/no/such/path/123")).send().await.unwrap();
    let text = metrics(&app).await;
    assert!(!text.contains("/no/such/path"), "{text}");
    assert!(text.contains("route=\"unmatched\""), "{text}");
}
