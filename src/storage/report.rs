//! Queries that only the report needs (worst nodes, clusters); the rest comes from the headline and
//! cost analytics' queries, so the report and the API never disagree.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::report::{NodeCount, WorstNodes};

/// The `limit` root-cause nodes with the most failures, and the totals they are a share of.
pub async fn worst_nodes(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
    limit: i64,
) -> Result<WorstNodes, sqlx::Error> {
    let rows: Vec<(String, String, Option<String>, i64, i64, i64)> = sqlx::query_as(
        "WITH per_node AS (
             SELECT cluster, root_node, count(*) AS failures FROM failures
             WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3) AND root_node IS NOT NULL
             GROUP BY 1, 2)
         SELECT p.cluster, p.root_node, n.gpu_generation, p.failures,
                sum(p.failures) OVER ()::bigint, count(*) OVER ()
         FROM per_node p LEFT JOIN nodes n ON n.cluster = p.cluster AND n.hostname = p.root_node
         ORDER BY p.failures DESC, p.cluster, p.root_node
         LIMIT $4",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .bind(limit)
    .fetch_all(db)
    .await?;
    let (failures_with_node, nodes_with_failures) = rows.first().map_or((0, 0), |r| (r.4 as u64, r.5 as u64));
    Ok(WorstNodes {
        failures_with_node,
        nodes_with_failures,
        nodes: rows
            .into_iter()
            .map(|(cluster, hostname, gpu_generation, n, _, _)| NodeCount {
                cluster,
                hostname,
                gpu_generation,
                failures: n as u64,
            })
            .collect(),
    })
}

/// Clusters of the inventory (for the dashboard's picker).
pub async fn clusters(db: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT DISTINCT cluster FROM nodes ORDER BY 1")
        .fetch_all(db)
        .await
}
