//! Read use cases: `fn(db, &Window, params) -> figures`, used by `http/` and `report/` alike, so the
//! API and the report render the same rows. Each composes storage reads with the pure analytics.

pub mod alerts;
pub mod audit;
pub mod availability;
pub mod baselines;
pub mod concentration;
pub mod decisions;
pub mod efficiency;
pub mod errors;
pub mod forecast;
pub mod gpus;
pub mod headline;
pub mod inputs;
pub mod job_size;
pub mod jobs;
mod kept;
pub mod parts;
pub mod rebuilds;
pub mod recovery;
pub mod report;
pub mod stragglers;
pub mod timeline;
pub mod tokens;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use crate::analytics::headline::NodeService;
use crate::domain::window::Window;
use crate::storage;

/// What a figure was computed over: the window and the classification catalog's version.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = Window)]
pub struct Computed {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub cluster: Option<String>,
    /// The classification catalog's current version: new signals fold with it. Failures are
    /// classified with it, except while `rebuild` runs: then those not rebuilt yet are still
    /// classified under an older version (ask with `catalog_version` to wait for a complete one).
    pub catalog_version: i64,
    /// While a catalog rebuild runs: its version and progress; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebuild: Option<rebuilds::RebuildProgress>,
}

pub async fn computed(db: &PgPool, w: &Window) -> Result<Computed, sqlx::Error> {
    Ok(Computed {
        from: w.from,
        to: w.to,
        cluster: w.cluster.clone(),
        catalog_version: {
            let mut conn = db.acquire().await?;
            storage::catalog::version(&mut conn).await?
        },
        rebuild: rebuilds::progress(db).await?,
    })
}

/// Nodes of the inventory in service at some time in the window.
pub(crate) fn in_service<'a>(nodes: &'a [NodeService], w: &Window) -> Vec<&'a NodeService> {
    nodes.iter().filter(|n| n.exposure_hours(w.from, w.to) > 0.0).collect()
}

/// Per (cluster, hostname), the node's state transitions as (time, drained) marks.
pub(crate) type NodeMarks = BTreeMap<(String, String), Vec<(DateTime<Utc>, bool)>>;

/// Node transitions of the window grouped per node.
pub(crate) async fn node_marks(db: &PgPool, w: &Window) -> Result<NodeMarks, sqlx::Error> {
    let mut marks = NodeMarks::new();
    for t in storage::lifecycle::transitions(db, w.from, w.to, w.cluster(), None).await? {
        marks
            .entry((t.cluster, t.hostname))
            .or_default()
            .push((t.at, t.state == "drained"));
    }
    Ok(marks)
}
