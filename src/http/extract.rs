//! Extractors whose rejections are our JSON errors, never axum's plain text.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{HeaderMap, Response, StatusCode, header, request::Parts};
use axum::response::IntoResponse;
use serde::de::DeserializeOwned;

use crate::http::error::{ApiError, ErrorBody};

/// JSON body extractor: rejections become `ApiError`s with where the JSON went wrong. Postgres text
/// and jsonb cannot hold U+0000, so a body with one anywhere (in a string or a key) is refused with
/// a 400 naming where it is, before the handler sees it.
pub struct AppJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for AppJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        read_json(req, state, true).await.map(AppJson)
    }
}

/// [`AppJson`] for a batch whose items the handler validates one by one, U+0000 included: a bad
/// item is rejected with its field, and never loses the good ones beside it.
pub struct AppJsonItems<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for AppJsonItems<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        read_json(req, state, false).await.map(AppJsonItems)
    }
}

/// Where in `value` a string or key holds U+0000, as a path like `rules[0].pattern`.
fn nul_path(value: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::String(s) if s.contains('\0') => Some(if path.is_empty() { ".".into() } else { path.into() }),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_path(v, &format!("{path}[{i}]"))),
        Value::Object(fields) => fields.iter().find_map(|(k, v)| {
            let here = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            if k.contains('\0') {
                Some(here)
            } else {
                nul_path(v, &here)
            }
        }),
        _ => None,
    }
}

async fn read_json<S: Send + Sync, T: DeserializeOwned>(
    req: Request,
    state: &S,
    refuse_nul: bool,
) -> Result<T, ApiError> {
    {
        if !is_json(req.headers()) {
            return Err(ApiError::UnsupportedMediaType(
                "expected Content-Type: application/json".into(),
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if crate::http::body_budget::is_budget_exceeded(&e) {
                return ApiError::Unavailable {
                    retry_after_secs: crate::http::body_budget::RETRY_AFTER_SECS,
                };
            }
            body_error(e.status(), e.body_text())
        })?;
        // In JSON, U+0000 can only be written `\u0000`: a body without that text holds none.
        if refuse_nul
            && bytes.windows(6).any(|w| w == b"\\u0000")
            && let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes)
            && let Some(path) = nul_path(&value, "")
        {
            let path: String = path.chars().filter(|c| *c != '\0').collect();
            return Err(ApiError::bad_request(
                "invalid_text",
                format!("at `{path}`: a NUL character (U+0000) is not allowed in text"),
            ));
        }
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let mut message = inner.to_string();
            if crate::domain::window::is_time_parse_error(&message) {
                message = format!(
                    "{message}; expected an RFC 3339 timestamp, e.g. {}",
                    crate::domain::window::RFC3339_EXAMPLE
                );
            }
            ApiError::bad_request(
                "invalid_json",
                format!(
                    "at `{path}` (line {}, column {}): {message}",
                    inner.line(),
                    inner.column()
                ),
            )
        })?;
        Ok(value)
    }
}

/// Query-string extractor with JSON rejections. A parameter the operation does not document
/// (in the OpenAPI document, which is generated from the same handlers) is refused with a 400
/// naming it, so a misspelt `?limt=5` never silently falls back to a default.
pub struct AppQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for AppQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let raw = parts.uri.query().unwrap_or_default();
        // Postgres text cannot hold NUL: refuse it here, naming the parameter, rather than as a
        // 500 from the database.
        for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
            if key.contains('\0') || value.contains('\0') {
                return Err(nul_error("query parameter", &key));
            }
        }
        if let Some(matched) = parts.extensions.get::<axum::extract::MatchedPath>()
            && let Some(known) = documented_query_params()
                .get(&(parts.method.as_str().to_ascii_lowercase(), matched.as_str().to_string()))
        {
            let mut unknown: Vec<String> = Vec::new();
            for (key, _) in form_urlencoded::parse(raw.as_bytes()) {
                if !known.iter().any(|k| *k == key) && !unknown.iter().any(|u| *u == key) {
                    unknown.push(key.into_owned());
                }
            }
            if !unknown.is_empty() {
                let names = |v: &[String]| v.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
                return Err(ApiError::bad_request(
                    "unknown_query_parameter",
                    format!(
                        "unknown query parameter{} {}; this operation takes {}",
                        if unknown.len() > 1 { "s" } else { "" },
                        names(&unknown),
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            names(known)
                        }
                    ),
                ));
            }
        }
        // An empty value (`?cluster=&by=`, as HTML forms send them) means the parameter is absent.
        let query: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form_urlencoded::parse(raw.as_bytes()).filter(|(_, v)| !v.is_empty()))
            .finish();
        let de = serde_urlencoded_deserializer(&query);
        serde_path_to_error::deserialize(de).map(AppQuery).map_err(|e| {
            let name = e.path().to_string();
            let inner = e.inner().to_string();
            let message = if crate::domain::window::is_time_parse_error(&inner) {
                let given = form_urlencoded::parse(raw.as_bytes())
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default();
                crate::domain::window::time_error(&given, &inner)
            } else {
                inner
            };
            ApiError::bad_request("invalid_query", format!("query parameter `{name}`: {message}"))
        })
    }
}

/// The query parameters each operation documents, by (lower-case method, path template): read
/// once from the generated OpenAPI document, so what is documented is what is accepted.
fn documented_query_params() -> &'static std::collections::HashMap<(String, String), Vec<String>> {
    static TABLE: std::sync::OnceLock<std::collections::HashMap<(String, String), Vec<String>>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let doc = crate::http::openapi::document();
        let mut table = std::collections::HashMap::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for (method, op) in item.as_object().into_iter().flatten() {
                let names = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|p| p["in"] == "query")
                    .filter_map(|p| p["name"].as_str().map(str::to_string))
                    .collect();
                table.insert((method.clone(), path.clone()), names);
            }
        }
        table
    })
}

/// Path-parameter extractor: JSON rejections, and NUL refused (400 naming the parameter) like
/// [`AppQuery`] does, so no route hands a NUL to Postgres.
pub struct AppPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for AppPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        if let Ok(raw) = axum::extract::RawPathParams::from_request_parts(parts, state).await {
            for (key, value) in raw.iter() {
                if value.contains('\0') {
                    return Err(nul_error("path parameter", key));
                }
            }
        }
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(AppPath(v)),
            Err(e) => Err(ApiError::bad_request(
                "invalid_path",
                format!("path parameter: {}", e.body_text()),
            )),
        }
    }
}

fn nul_error(what: &str, name: &str) -> ApiError {
    let name: String = name.chars().filter(|c| *c != '\0').collect();
    ApiError::bad_request(
        "invalid_parameter",
        format!("{what} `{name}` contains a NUL character (%00), which is not allowed"),
    )
}

fn serde_urlencoded_deserializer(query: &str) -> serde_urlencoded::Deserializer<'_> {
    serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()))
}

pub fn is_json(headers: &HeaderMap) -> bool {
    content_type(headers).is_some_and(|ct| ct == "application/json" || ct.ends_with("+json"))
}

/// The media type without parameters, lower-cased.
pub fn content_type(headers: &HeaderMap) -> Option<String> {
    let raw = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(raw.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
}

fn body_error(status: StatusCode, text: String) -> ApiError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge(text)
    } else {
        ApiError::bad_request("invalid_body", text)
    }
}

/// Reads a whole body, bounded by `limit` bytes after decompression, so gzip bombs stop at the
/// same limit as plain bodies.
pub async fn read_body_limited(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let too_large = || ApiError::PayloadTooLarge(format!("request body exceeds the limit of {limit} bytes"));
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        && len > limit as u64
    {
        return Err(too_large());
    }
    match axum::body::to_bytes(body, limit).await {
        Ok(b) => Ok(b),
        Err(e) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
            while let Some(s) = source {
                if s.is::<http_body_util::LengthLimitError>() {
                    return Err(too_large());
                }
                if s.is::<crate::http::body_budget::BudgetExceeded>() {
                    return Err(ApiError::Unavailable {
                        retry_after_secs: crate::http::body_budget::RETRY_AFTER_SECS,
                    });
                }
                source = s.source();
            }
            Err(ApiError::bad_request(
                "invalid_body",
                format!("could not read the request body: {e}"),
            ))
        }
    }
}

/// Turns any non-JSON error response (a router 404/405, a tower-http rejection) into our JSON body.
pub async fn json_errors(response: Response<Body>) -> Response<Body> {
    let status = response.status();
    let is_json_body = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if status.as_u16() < 400 || is_json_body {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let code = status
        .canonical_reason()
        .unwrap_or("error")
        .to_ascii_lowercase()
        .replace(' ', "_");
    let message = if text.trim().is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        text
    };
    let mut out = (
        status,
        axum::Json(ErrorBody {
            error: code,
            message,
            details: None,
        }),
    )
        .into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// One batch item before validation: a parsed JSON value, or why its line was not JSON.
pub type RawItem = Result<serde_json::Value, String>;

/// NDJSON: every non-blank line is one item; a malformed line is rejected alone.
pub fn split_ndjson(bytes: &[u8]) -> Vec<RawItem> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .map(|line| serde_json::from_slice(line).map_err(|e| format!("line is not JSON: {e}")))
        .collect()
}
