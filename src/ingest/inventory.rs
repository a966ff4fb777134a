//! Writing the node inventory.

use sqlx::PgPool;

use crate::domain::node::Node;
use crate::storage;

/// Upserts validated nodes by (cluster, hostname) in one statement; returns how many.
pub async fn upsert_nodes(db: &PgPool, nodes: &[Node]) -> Result<usize, sqlx::Error> {
    Ok(storage::nodes::upsert(db, nodes).await? as usize)
}
