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
