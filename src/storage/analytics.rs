//! Read queries behind the analytics. Causes are the effective ones: a post-mortem root cause
//! (failure lifecycle) overrides the automatic one, which stays stored beside it.
//! Each aggregates in SQL over the failures table (indexed by
//! first_at) and the small nodes table; none scans the events table.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::analytics::headline::{FailureCount, NodeFailures, NodeService};

pub async fn node_service(db: &PgPool, cluster: Option<&str>) -> Result<Vec<NodeService>, sqlx::Error> {
    let rows: Vec<(
        String,
        String,
        String,
        String,
        i32,
        Option<String>,
        DateTime<Utc>,
        Option<DateTime<Utc>>,
    )> = sqlx::query_as(
        "SELECT cluster, hostname, gpu_model, gpu_generation, gpu_count, group_label,
                COALESCE(in_service_since, first_registered_at), retired_at
         FROM nodes WHERE ($1::text IS NULL OR cluster = $1)",
    )
    .bind(cluster)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(cluster, hostname, gpu_model, gpu_generation, gpu_count, group, since, retired)| NodeService {
                cluster,
                hostname,
                gpu_model,
                gpu_generation,
                gpu_count: gpu_count.max(0) as u32,
                group,
                in_service_since: since,
                retired_at: retired,
            },
        )
        .collect())
}

/// What the failure mix groups by.
#[derive(Debug, Clone, Copy)]
pub enum MixDimension {
    Generation,
    Model,
    Cluster,
}

pub async fn failure_counts(
    db: &PgPool,
    by: MixDimension,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<FailureCount>, sqlx::Error> {
    let dim = match by {
        MixDimension::Generation => "generation",
        MixDimension::Model => "model",
        MixDimension::Cluster => "cluster",
    };
    let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
        "SELECT CASE $4 WHEN 'generation' THEN COALESCE(n.gpu_generation, f.signal_generation)
                        WHEN 'model' THEN COALESCE(n.gpu_model, 'unknown')
                        ELSE f.cluster END AS grp,
                f.effective_category, f.effective_component, count(*)
         FROM failures_effective f LEFT JOIN nodes n ON n.cluster = f.cluster AND n.hostname = f.root_node
         WHERE f.first_at >= $1 AND f.first_at < $2 AND ($3::text IS NULL OR f.cluster = $3)
         GROUP BY 1, 2, 3",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .bind(dim)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(group, category, component, n)| FailureCount {
            group,
            category,
            component,
            failures: n as u64,
        })
        .collect())
}

/// Failures per root-cause node, and the count of failures with no node.
pub async fn failures_per_node(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<(NodeFailures, u64), sqlx::Error> {
    let rows: Vec<(String, Option<String>, i64)> = sqlx::query_as(
        "SELECT cluster, root_node, count(*) FROM failures
         WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)
         GROUP BY 1, 2",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await?;
    let mut per_node = NodeFailures::new();
    let mut without_node = 0;
    for (c, node, n) in rows {
        match node {
            Some(h) => {
                per_node.insert((c, h), n as u64);
            }
            None => without_node += n as u64,
        }
    }
    Ok((per_node, without_node))
}

pub async fn cause_counts(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<(String, String, u64)>, sqlx::Error> {
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT effective_category, effective_component, count(*) FROM failures_effective
         WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)
         GROUP BY 1, 2",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(a, b, n)| (a, b, n as u64)).collect())
}

pub async fn symptom_counts(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<(String, u64)>, sqlx::Error> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT COALESCE(symptom, 'unspecified'), count(*) FROM failures
         WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)
         GROUP BY 1",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(a, n)| (a, n as u64)).collect())
}

pub async fn catalog_version(db: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT version FROM catalog_state")
        .fetch_one(db)
        .await
}
