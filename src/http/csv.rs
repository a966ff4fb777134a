//! CSV responses: an RFC 4180 writer and the choice between JSON and CSV (`?format=csv`, or
//! `Accept: text/csv` preferred by q-value).

use std::fmt::Display;

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// RFC 4180 writer: CRLF line ends, a field quoted when it holds a comma, quote, CR or LF, quotes doubled.
pub struct Csv {
    out: String,
}

impl Csv {
    pub fn new(header: &[&str]) -> Self {
        let mut csv = Csv { out: String::new() };
        csv.row(header.iter().map(|h| h.to_string()));
        csv
    }

    pub fn row(&mut self, fields: impl IntoIterator<Item = String>) {
        let mut first = true;
        for f in fields {
            if !first {
                self.out.push(',');
            }
            first = false;
            if f.contains([',', '"', '\r', '\n']) {
                self.out.push('"');
                self.out.push_str(&f.replace('"', "\"\""));
                self.out.push('"');
            } else {
                self.out.push_str(&f);
            }
        }
        self.out.push_str("\r\n");
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// A field from any displayable value.
pub fn s(v: impl Display) -> String {
    v.to_string()
}

/// A field from an optional value: empty when absent.
pub fn o<T: Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// The representations a CSV-capable route answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Json,
    Csv,
}

/// The `format` query parameter of every route that can answer CSV. It wins over `Accept`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FormatQuery {
    /// `json` (default) or `csv`. Without it the `Accept` header decides (q-values honoured):
    /// `text/csv` preferred over `application/json` gives CSV.
    pub format: Option<Format>,
}

/// The representation the client asked for: `?format=`, else `Accept` negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated(pub Format);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Negotiated {
    type Rejection = crate::http::error::ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            if key == "format" && !value.is_empty() {
                return match value.to_ascii_lowercase().as_str() {
                    "json" => Ok(Negotiated(Format::Json)),
                    "csv" => Ok(Negotiated(Format::Csv)),
                    _ => Err(crate::http::error::ApiError::bad_request(
                        "invalid_query",
                        format!("query parameter `format`: '{value}' is not one of json, csv"),
                    )),
                };
            }
        }
        Ok(Negotiated(if wants_csv(&parts.headers) {
            Format::Csv
        } else {
            Format::Json
        }))
    }
}

/// Whether `Accept` prefers `text/csv` to JSON: the highest q-value wins, JSON on a tie (and
/// when neither is named); `q=0` refuses a type.
pub fn wants_csv(headers: &HeaderMap) -> bool {
    let mut csv_q: Option<f32> = None;
    let mut json_q: Option<f32> = None;
    for range in headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| {
                let (k, v) = p.split_once('=')?;
                k.trim()
                    .eq_ignore_ascii_case("q")
                    .then(|| v.trim().parse::<f32>().ok())?
            })
            .next()
            .unwrap_or(1.0);
        let slot = match media.as_str() {
            "text/csv" => &mut csv_q,
            "application/json" => &mut json_q,
            _ => continue,
        };
        *slot = Some(slot.map_or(q, |old: f32| old.max(q)));
    }
    match csv_q {
        Some(c) if c > 0.0 => json_q.is_none_or(|j| c > j),
        _ => false,
    }
}

/// JSON, or CSV rendered by `csv` when the client asked for it (`name` becomes the file name).
pub fn respond<T: Serialize>(format: Negotiated, name: &str, body: T, csv: impl FnOnce(&T) -> String) -> Response {
    if format.0 != Format::Csv {
        return Json(body).into_response();
    }
    let mut r = csv(&body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8; header=present"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("inline; filename=\"{name}.csv\"")) {
        r.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn csv_quotes_by_rfc_4180() {
        let mut csv = Csv::new(&["a", "b"]);
        csv.row([s("plain"), s("has, comma")]);
        csv.row([s("say \"hi\""), s("two\nlines")]);
        assert_eq!(
            csv.finish(),
            "a,b\r\nplain,\"has, comma\"\r\n\"say \"\"hi\"\"\",\"two\nlines\"\r\n"
        );
    }

    #[test]
    fn accept_negotiation() {
        let mut h = HeaderMap::new();
        assert!(!wants_csv(&h));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, Text/CSV; q=0.9"),
        );
        assert!(!wants_csv(&h), "JSON is preferred at q=1");
        h.insert(header::ACCEPT, HeaderValue::from_static("Text/CSV"));
        assert!(wants_csv(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("text/csvx"));
        assert!(!wants_csv(&h));
        // q-values decide; JSON wins a tie.
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/csv;q=0.5, application/json"),
        );
        assert!(!wants_csv(&h));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/csv, application/json;q=0.9"),
        );
        assert!(wants_csv(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("text/csv, application/json"));
        assert!(!wants_csv(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("text/csv;q=0"));
        assert!(!wants_csv(&h));
    }
}
