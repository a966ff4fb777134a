//! Loading a simulated fleet straight into the database (`faultline serve --demo`), through the
//! same validation and use cases (`crate::ingest`) as the HTTP routes: inventory, jobs, signals,
//! node drains and returns, failure lifecycles (recovery phases, resolutions, post-mortems).

use std::collections::HashMap;

use chrono::{DateTime, Duration, SubsecRound, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::devtools::simulate::{SimConfig, SimulatedFleet, simulate};
use crate::domain::audit::Actor;
use crate::domain::event::parse_event;
use crate::domain::job::parse_job;
use crate::domain::lifecycle::LifecyclePatch;
use crate::domain::node::parse_node;
use crate::domain::window::DEFAULT_WINDOW_DAYS;
use crate::ingest::catalog::CatalogCache;
use crate::ingest::lifecycle::{PatchError, Transition, WriteError};
use crate::storage::failure_queries::{FailureFilter, FailureRow};

/// Days the demo covers, ending now: two default analysis windows, so the default window is fully
/// covered (its rates are not diluted by empty days) and `compare` and the report's health section
/// have a previous window to set it against.
pub const DEMO_DAYS: u32 = 2 * DEFAULT_WINDOW_DAYS as u32;

/// Who the demo's drains and lifecycle changes are recorded as (the audit trail's `changed_by`).
const DEMO_AUTHOR: &str = "demo";

/// The simulation `serve --demo` loads and `faultline simulate` sends by default: [`DEMO_DAYS`]
/// days ending at `now` (whole seconds).
pub fn demo_config(now: DateTime<Utc>) -> SimConfig {
    SimConfig {
        start: now.trunc_subsecs(0) - Duration::days(DEMO_DAYS.into()),
        days: DEMO_DAYS,
        ..SimConfig::default()
    }
}

pub fn demo_fleet() -> SimulatedFleet {
    simulate(&demo_config(Utc::now()))
}

#[derive(Debug, Default)]
pub struct Loaded {
    pub nodes: usize,
    /// GPU node reports and removals applied.
    pub gpu_steps: usize,
    pub jobs: usize,
    pub events: usize,
    pub node_states: usize,
    pub lifecycles: usize,
    pub failures: i64,
}

/// Loads the demo fleet unless the database already holds events. Returns None when it did nothing.
pub async fn load_if_empty(db: &PgPool, catalog: &CatalogCache, window: Duration) -> anyhow::Result<Option<Loaded>> {
    let has_events: bool = sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM events) AS "exists!""#)
        .fetch_one(db)
        .await?;
    if has_events {
        return Ok(None);
    }
    Ok(Some(load(db, catalog, window, &demo_fleet()).await?))
}

/// Loads `fleet` in the order a site's agents would send it: inventory, jobs, signals, then what
/// engineers record afterwards (drains and returns, lifecycles of the failures formed).
pub async fn load(
    db: &PgPool,
    catalog: &CatalogCache,
    window: Duration,
    fleet: &SimulatedFleet,
) -> anyhow::Result<Loaded> {
    let mut loaded = Loaded::default();
    let nodes: Vec<_> = fleet.nodes.iter().cloned().filter_map(|v| parse_node(v).ok()).collect();
    loaded.nodes = crate::ingest::inventory::upsert_nodes(db, &nodes).await?;
    loaded.gpu_steps = load_gpus(db, fleet).await?;
    let jobs: Vec<_> = fleet.jobs.iter().cloned().filter_map(|v| parse_job(v).ok()).collect();
    for chunk in jobs.chunks(1_000) {
        loaded.jobs += crate::ingest::jobs::upsert_jobs(db, catalog, window, chunk).await?;
    }
    let now = Utc::now();
    let events: Vec<_> = fleet
        .events
        .iter()
        .cloned()
        .filter_map(|v| parse_event(v, now).ok())
        .collect();
    loaded.events = events.len();
    for chunk in events.chunks(5_000) {
        crate::ingest::store_events(
            db,
            catalog,
            window,
            0,
            crate::ingest::batch::Route::Events,
            chunk.to_vec(),
        )
        .await?;
    }
    for s in &fleet.node_states {
        let text = |k: &str| s[k].as_str().unwrap_or_default();
        let at = text("at").parse::<DateTime<Utc>>().ok();
        let recorded = crate::ingest::lifecycle::record_transition(
            db,
            Transition {
                cluster: text("cluster"),
                hostname: text("hostname"),
                drained: text("state") == "drained",
                at,
                reason: s["reason"].as_str().map(str::to_string),
                failure_id: None,
                by: DEMO_AUTHOR,
            },
        )
        .await;
        match recorded {
            Ok(_) => loaded.node_states += 1,
            Err(WriteError::Db(e)) => return Err(e.into()),
            Err(_) => {} // a node the inventory refused
        }
    }
    let failures = FailureIndex::read(db).await?;
    let actor = Actor {
        token_id: None,
        name: DEMO_AUTHOR.to_string(),
    };
    for l in &fleet.lifecycles {
        let Some(id) = failures.find(l) else { continue };
        let Ok(patch) = serde_json::from_value::<LifecyclePatch>(l["patch"].clone()) else {
            continue;
        };
        match crate::ingest::lifecycle::patch(db, &actor, |_| true, id, &patch, Utc::now()).await {
            Ok(_) => loaded.lifecycles += 1,
            Err(PatchError::Database(e)) => return Err(e.into()),
            Err(_) => {}
        }
    }
    loaded.failures = failures.count as i64;
    Ok(loaded)
}

/// The GPU parts' changes in time order (node reports, removals), then the lots: as the simulator
/// sends them through `PUT /v1/gpus/inventory`, `POST /v1/gpus/{part}/removals` and
/// `POST /v1/gpus/history`.
async fn load_gpus(db: &PgPool, fleet: &SimulatedFleet) -> anyhow::Result<usize> {
    use crate::domain::part::{GpuReport, RemovalReason, validate_node_gpus};
    let actor = Actor {
        token_id: None,
        name: DEMO_AUTHOR.to_string(),
    };
    let mut applied = 0;
    for step in &fleet.gpu_steps {
        if let Some(r) = step.get("inventory") {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            let gpus: Vec<GpuReport> = serde_json::from_value(r["gpus"].clone())?;
            let at: DateTime<Utc> = text("observed_at").parse()?;
            let Ok(report) = validate_node_gpus(text("cluster"), text("hostname"), at, gpus) else {
                continue;
            };
            crate::ingest::gpus::apply_inventory(db, &[report]).await?;
            applied += 1;
        } else if let Some(r) = step.get("removal") {
            let text = |k: &str| r[k].as_str().map(str::to_string);
            let reason: RemovalReason = serde_json::from_value(r["reason"].clone())?;
            let removal = crate::ingest::gpus::Removal {
                cluster: text("cluster").unwrap_or_default(),
                part: text("part").unwrap_or_default(),
                at: text("at").unwrap_or_default().parse()?,
                reason,
                ticket: text("ticket"),
                note: text("note"),
            };
            match crate::ingest::gpus::remove_part(db, &actor, removal).await {
                Ok(_) => applied += 1,
                Err(crate::ingest::gpus::RemovalError::Db(e)) => return Err(e.into()),
                Err(_) => {}
            }
        }
    }
    let now = Utc::now();
    let parts = fleet
        .gpu_history
        .iter()
        .filter_map(|p| {
            let serial = p["serial"].as_str()?.to_string();
            Some(crate::storage::gpus::PartRow {
                cluster: p["cluster"].as_str()?.to_string(),
                part: serial.clone(),
                serial: Some(serial),
                generation: "unknown".into(),
                attributes: p["attributes"].clone(),
                // The stored first sighting is kept (the earlier of the two).
                first_seen_at: now,
                ..Default::default()
            })
        })
        .collect();
    crate::ingest::gpus::import_history(
        db,
        &actor,
        crate::ingest::gpus::History {
            parts,
            ..Default::default()
        },
    )
    .await?;
    Ok(applied)
}

/// The stored failures by how the simulator names them: (cluster, first signal, job) for a job's
/// failures, (cluster, first signal, node) for the others.
struct FailureIndex {
    by_name: HashMap<(String, DateTime<Utc>, String), Uuid>,
    count: usize,
}

impl FailureIndex {
    async fn read(db: &PgPool) -> Result<Self, sqlx::Error> {
        let mut index = FailureIndex {
            by_name: HashMap::new(),
            count: 0,
        };
        let mut before = None;
        loop {
            let page: Vec<FailureRow> = crate::storage::failure_queries::list(
                db,
                &FailureFilter {
                    before,
                    limit: 1_000,
                    ..FailureFilter::default()
                },
            )
            .await?;
            let Some(last) = page.last() else { break };
            before = Some((last.first_at, last.id));
            index.count += page.len();
            for f in page {
                match &f.job_id {
                    Some(j) => {
                        index
                            .by_name
                            .insert((f.cluster.clone(), f.first_at, format!("job\n{j}")), f.id);
                    }
                    None => {
                        for n in &f.nodes {
                            index
                                .by_name
                                .insert((f.cluster.clone(), f.first_at, format!("node\n{n}")), f.id);
                        }
                    }
                }
            }
        }
        Ok(index)
    }

    fn find(&self, l: &serde_json::Value) -> Option<Uuid> {
        let cluster = l["cluster"].as_str()?.to_string();
        let first_at: DateTime<Utc> = l["first_at"].as_str()?.parse().ok()?;
        let name = match (l["job_id"].as_str(), l["node"].as_str()) {
            (Some(j), _) => format!("job\n{j}"),
            (None, Some(n)) => format!("node\n{n}"),
            (None, None) => return None,
        };
        self.by_name.get(&(cluster, first_at, name)).copied()
    }
}
