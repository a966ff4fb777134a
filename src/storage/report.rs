//! Queries that only the report needs (timeline, worst nodes, root kinds, clusters). They aggregate
//! over the failures table by first_at, like the headline analytics; when the cost analytics land,
//! report::gather can use theirs instead.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::PgPool;

use crate::report::{Bucket, NodeCount, RootKindCount, WorstNodes};

/// Failures per (bucket start, category), buckets in UTC (weeks start on Monday).
pub async fn failures_per_bucket(
    db: &PgPool,
    bucket: Bucket,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<(NaiveDate, String, u64)>, sqlx::Error> {
    let rows: Vec<(NaiveDate, String, i64)> = sqlx::query_as(
        "SELECT (date_trunc($4, first_at, 'UTC') AT TIME ZONE 'UTC')::date, category, count(*)
         FROM failures
         WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)
         GROUP BY 1, 2",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .bind(bucket.as_str())
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(d, c, n)| (d, c, n as u64)).collect())
}

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

/// Failures by the kind and code of their root signal.
pub async fn root_kinds(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<RootKindCount>, sqlx::Error> {
    let rows: Vec<(String, Option<i64>, i64)> = sqlx::query_as(
        "SELECT root_kind, root_code, count(*) FROM failures
         WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)
         GROUP BY 1, 2",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(kind, code, n)| RootKindCount {
            kind,
            code,
            failures: n as u64,
        })
        .collect())
}

/// Clusters of the inventory (for the dashboard's picker).
pub async fn clusters(db: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT DISTINCT cluster FROM nodes ORDER BY 1")
        .fetch_all(db)
        .await
}
