//! Loading a simulated fleet straight into the database (`faultline serve --demo`), through the
//! same validation and storage path as the HTTP ingest.

use chrono::{Duration, Utc};
use sqlx::PgPool;

use crate::devtools::simulate::{SimConfig, SimulatedFleet, simulate};
use crate::domain::event::parse_event;
use crate::domain::node::parse_node;


/// A demo fleet whose 28 days end now, so the analytics' default window (30 days) shows it.
pub fn demo_fleet() -> SimulatedFleet {
    let start = (Utc::now() - Duration::days(28))
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .expect("midnight exists")
        .and_utc();
    simulate(&SimConfig {
        start,
        ..SimConfig::default()
    })
}

pub struct Loaded {
    pub nodes: usize,
    pub events: usize,
    pub failures: i64,
}

/// Loads the fleet unless the database already holds events. Returns None when it did nothing.
pub async fn load_if_empty(
    db: &PgPool,
    catalog: &crate::ingest::catalog::CatalogCache,
    window: Duration,
) -> anyhow::Result<Option<Loaded>> {
    let has_events: bool = sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM events) AS "exists!""#)
        .fetch_one(db)
        .await?;
    if has_events {
        return Ok(None);
    }
    let fleet = demo_fleet();
    let nodes: Vec<_> = fleet.nodes.iter().cloned().filter_map(|v| parse_node(v).ok()).collect();
    crate::ingest::inventory::upsert_nodes(db, &nodes).await?;
    let now = Utc::now();
    let events: Vec<_> = fleet
        .events
        .iter()
        .cloned()
        .filter_map(|v| parse_event(v, now).ok())
        .collect();
    let count = events.len();
    for chunk in events.chunks(5_000) {
        crate::ingest::store_events(db, catalog, window, crate::ingest::batch::Route::Events, chunk.to_vec()).await?;
    }
    let failures: i64 = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM failures"#)
        .fetch_one(db)
        .await?;
    Ok(Some(Loaded {
        nodes: nodes.len(),
        events: count,
        failures,
    }))
}
