//! Writing the node inventory.

use sqlx::PgPool;

use super::rollups::Delta;
use crate::domain::node::Node;
use crate::storage;

/// Upserts validated nodes by (cluster, hostname) in one statement; returns how many. A node whose
/// generation, model or group changes (or a new node, which failures may already name) moves its
/// failures between rollup rows, in the same transaction. It holds the catalog row exclusively,
/// as a job record does: no ingest or post-mortem reads the inventory half before and half after.
pub async fn upsert_nodes(db: &PgPool, nodes: &[Node]) -> Result<usize, sqlx::Error> {
    let mut tx = db.begin().await?;
    storage::catalog::version_for_update(&mut tx).await?;
    let col = |f: fn(&Node) -> String| nodes.iter().map(f).collect::<Vec<_>>();
    let changing = storage::rollups::nodes_changing(
        &mut tx,
        &col(|n| n.cluster.clone()),
        &col(|n| n.hostname.clone()),
        &col(|n| n.gpu_model.clone()),
        &col(|n| n.gpu_generation.as_str().to_string()),
        &nodes.iter().map(|n| n.group.clone()).collect::<Vec<_>>(),
    )
    .await?;
    let (clusters, hosts): (Vec<String>, Vec<String>) = changing.into_iter().unzip();
    let before = storage::rollups::facts_of_nodes(&mut tx, &clusters, &hosts).await?;
    let upserted = storage::nodes::upsert(&mut tx, nodes).await? as usize;
    if !before.is_empty() {
        let after = storage::rollups::facts_of_nodes(&mut tx, &clusters, &hosts).await?;
        Delta::between(&before, &after).apply(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(upserted)
}
