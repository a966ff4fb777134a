//! The dashboard at `/`: a small HTML page and vanilla script, embedded in the binary (no CDN, no
//! framework), that shows the firing alerts, the fleet's state now and the reliability report for a chosen window and cluster. No token is
//! needed to load the page; the report it fetches needs a reader token.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::ApiContext;

const INDEX: &str = include_str!("dashboard/index.html");
const SCRIPT: &str = include_str!("dashboard/dashboard.js");
const PARTS_SCRIPT: &str = include_str!("dashboard/parts.js");
const ALERTS_SCRIPT: &str = include_str!("dashboard/alerts.js");
const FLEET_SCRIPT: &str = include_str!("dashboard/fleet.js");
const STYLE: &str = include_str!("dashboard/dashboard.css");

pub fn router() -> Router<ApiContext> {
    Router::new()
        .route("/", get(|| async { asset("text/html; charset=utf-8", INDEX) }))
        .route(
            "/assets/dashboard.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/assets/parts.js",
            get(|| async { asset("text/javascript; charset=utf-8", PARTS_SCRIPT) }),
        )
        .route(
            "/assets/alerts.js",
            get(|| async { asset("text/javascript; charset=utf-8", ALERTS_SCRIPT) }),
        )
        .route(
            "/assets/fleet.js",
            get(|| async { asset("text/javascript; charset=utf-8", FLEET_SCRIPT) }),
        )
        .route(
            "/assets/dashboard.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
}
