//! Reads that only the report needs: the worst nodes and the clusters of the inventory.

use sqlx::PgPool;

use crate::domain::window::Window;
use crate::report::{NodeCount, WorstNodes};
use crate::storage;

/// The `limit` root-cause nodes with the most failures, and the totals they are a share of.
pub async fn worst_nodes(db: &PgPool, w: &Window, limit: i64) -> Result<WorstNodes, sqlx::Error> {
    let rows = storage::failure_queries::worst_nodes(db, w.from, w.to, w.cluster(), limit).await?;
    let (failures_with_node, nodes_with_failures) = rows
        .first()
        .map_or((0, 0), |r| (r.failures_with_node as u64, r.nodes_with_failures as u64));
    Ok(WorstNodes {
        failures_with_node,
        nodes_with_failures,
        nodes: rows
            .into_iter()
            .map(|r| NodeCount {
                cluster: r.cluster,
                hostname: r.hostname,
                gpu_generation: r.gpu_generation,
                failures: r.failures as u64,
            })
            .collect(),
    })
}

/// Clusters of the inventory (for the dashboard's picker).
pub async fn clusters(db: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    storage::nodes::clusters(db).await
}
