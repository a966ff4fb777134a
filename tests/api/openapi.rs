use serde_json::Value;

use crate::helpers::spawn_app;

/// api/openapi.json is the committed, generated document. Regenerate with
/// `cargo run -- openapi > api/openapi.json` (or `UPDATE_OPENAPI=1 cargo nextest run openapi`).
#[test]
fn committed_openapi_matches_the_code() {
    let generated = faultline::http::openapi::openapi_json();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/api/openapi.json");
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "api/openapi.json is stale: run `cargo run -- openapi > api/openapi.json`"
    );
}

#[test]
fn every_response_has_a_description_and_errors_are_documented() {
    let doc: Value = serde_json::from_str(&faultline::http::openapi::openapi_json()).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            operations += 1;
            let responses = op["responses"].as_object().unwrap();
            for (code, r) in responses {
                let d = r["description"].as_str().unwrap_or("");
                assert!(!d.trim().is_empty(), "{method} {path} {code} has no description");
            }
            if path.starts_with("/v1") {
                assert!(responses.contains_key("401"), "{method} {path} documents no 401");
                assert!(op["security"].is_array(), "{method} {path} has no security");
            }
        }
    }
    assert!(operations >= 9);
}

#[tokio::test]
async fn served_document_is_the_generated_one() {
    let app = spawn_app().await;
    let served: Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let generated: Value = serde_json::from_str(&faultline::http::openapi::openapi_json()).unwrap();
    assert_eq!(served, generated);
}

#[tokio::test]
async fn unknown_query_parameters_are_named_in_a_400() {
    let app = spawn_app().await;
    let token = crate::helpers::ADMIN_TOKEN;
    let (status, body) = app
        .get(token, "/v1/analytics/failure-mix?bogus=1&by=cluster&limt=3")
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "unknown_query_parameter");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("`bogus`") && message.contains("`limt`") && message.contains("`by`"),
        "{message}"
    );
    // Documented parameters of both extractors of the route, and empty values, are fine.
    let (status, body) = app
        .get(
            token,
            "/v1/analytics/failure-mix?by=cluster&cluster=&from=2026-11-01T00:00:00Z",
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn timestamp_errors_name_rfc_3339_and_give_an_example() {
    let app = spawn_app().await;
    let (status, body) = app
        .get(crate::helpers::ADMIN_TOKEN, "/v1/analytics/mtbf?from=2026-11-01")
        .await;
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("`from`") && message.contains("RFC 3339") && message.contains("2026-11-02T10:15:00Z"),
        "{message}"
    );
}

#[tokio::test]
async fn csv_by_format_parameter_or_accept_with_q_values() {
    let app = spawn_app().await;
    let get = |query: &'static str, accept: &'static str| {
        app.client
            .get(app.url(&format!("/v1/analytics/top-errors{query}")))
            .bearer_auth(crate::helpers::ADMIN_TOKEN)
            .header("accept", accept)
            .send()
    };
    let content_type = |r: &reqwest::Response| r.headers()["content-type"].to_str().unwrap().to_string();
    let r = get("?format=csv", "application/json").await.unwrap();
    assert!(content_type(&r).starts_with("text/csv"), "{r:?}");
    assert!(r.text().await.unwrap().starts_with("view,kind,code"));
    let r = get("?format=json", "text/csv").await.unwrap();
    assert!(content_type(&r).starts_with("application/json"));
    let r = get("", "text/csv;q=0.5, application/json").await.unwrap();
    assert!(content_type(&r).starts_with("application/json"));
    let r = get("", "text/csv, application/json;q=0.9").await.unwrap();
    assert!(content_type(&r).starts_with("text/csv"));
    let r = get("?format=xml", "*/*").await.unwrap();
    assert_eq!(r.status(), 400);
}

#[test]
fn the_document_states_limits_enums_and_open_routes() {
    let doc: Value = serde_json::from_str(&faultline::http::openapi::openapi_json()).unwrap();
    assert_eq!(doc["info"]["license"]["identifier"], "Apache-2.0");
    assert!(doc["servers"][0]["url"].is_string());
    for open in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(doc["paths"][open]["get"]["security"], serde_json::json!([]), "{open}");
    }
    let events = &doc["components"]["schemas"]["EventBatch"]["properties"]["events"];
    assert_eq!(
        (events["minItems"].as_u64(), events["maxItems"].as_u64()),
        (Some(1), Some(10_000))
    );
    let text = &doc["components"]["schemas"]["Text"];
    assert_eq!(
        (text["minLength"].as_u64(), text["maxLength"].as_u64()),
        (Some(1), Some(256))
    );
    let param = |path: &str, name: &str| {
        doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{path} {name}"))
            .clone()
    };
    assert_eq!(param("/v1/analytics/top-errors", "limit")["schema"]["minimum"], 1);
    assert_eq!(
        param("/v1/analytics/recovery", "jobs_limit")["schema"]["maximum"],
        10_000
    );
    assert!(
        param("/v1/analytics/top-errors", "format")["schema"]
            .to_string()
            .contains("Format")
    );
    assert_eq!(
        doc["components"]["schemas"]["Format"]["enum"],
        serde_json::json!(["json", "csv"])
    );
    assert!(doc["components"]["schemas"]["Action"]["enum"].as_array().unwrap().len() >= 10);
    let attributes = &doc["components"]["schemas"]["EventInput"]["properties"]["attributes"];
    assert!(attributes["additionalProperties"].is_object(), "{attributes}");
    assert!(
        doc["components"]["schemas"]["ErrorDetails"]["properties"]["rejected"]["items"]["$ref"]
            .as_str()
            .unwrap()
            .ends_with("RejectedItem")
    );
}
