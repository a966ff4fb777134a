//! CSV responses: an RFC 4180 writer and the choice between JSON and CSV (`Accept: text/csv`).

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

/// Whether the client asked for CSV: a `text/csv` media range in Accept.
pub fn wants_csv(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|range| {
            range
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("text/csv")
        })
}

/// JSON, or CSV rendered by `csv` when the client asked for it (`name` becomes the file name).
pub fn respond<T: Serialize>(headers: &HeaderMap, name: &str, body: T, csv: impl FnOnce(&T) -> String) -> Response {
    if !wants_csv(headers) {
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
        assert!(wants_csv(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("text/csvx"));
        assert!(!wants_csv(&h));
    }
}
