//! Aggregates over signals for the performance analytics (slowdowns, low utilisation), through the
//! (kind, occurred_at) indexes of `events` and of `events_archive`, which keeps these kinds past
//! signal retention (so an old window answers the same after its partition is dropped).

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// A slowdown signal with a node: its ratios and duration as sent, and the GPUs of its job (jobs
/// table, else the signal's job_gpus, else the node's GPUs).
#[derive(Debug)]
pub struct SlowdownRow {
    pub cluster: String,
    pub node: String,
    pub job_id: Option<String>,
    pub at: DateTime<Utc>,
    pub step_time_ratio: Option<f64>,
    pub throughput_ratio: Option<f64>,
    pub duration_seconds: Option<f64>,
    pub gpus: Option<i64>,
}

pub async fn slowdowns(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<SlowdownRow>, sqlx::Error> {
    sqlx::query_as!(
        SlowdownRow,
        r#"SELECT e.cluster AS "cluster!", e.node AS "node!", e.job_id, e.occurred_at AS "at!",
                  CASE WHEN jsonb_typeof(e.attributes->'step_time_ratio') = 'number'
                       THEN (e.attributes->>'step_time_ratio')::float8 END AS step_time_ratio,
                  CASE WHEN jsonb_typeof(e.attributes->'throughput_ratio') = 'number'
                       THEN (e.attributes->>'throughput_ratio')::float8 END AS throughput_ratio,
                  CASE WHEN jsonb_typeof(e.attributes->'duration_seconds') = 'number'
                       THEN (e.attributes->>'duration_seconds')::float8 END AS duration_seconds,
                  COALESCE(j.gpus, e.job_gpus, n.gpu_count)::bigint AS gpus
           FROM (SELECT cluster, node, job_id, occurred_at, attributes, job_gpus FROM events WHERE kind = 'slowdown'
                 UNION ALL
                 SELECT cluster, node, job_id, occurred_at, attributes, job_gpus FROM events_archive WHERE kind = 'slowdown') e
           LEFT JOIN jobs j ON j.cluster = e.cluster AND j.job_id = e.job_id
           LEFT JOIN nodes n ON n.cluster = e.cluster AND n.hostname = e.node
           WHERE e.occurred_at >= $1 AND e.occurred_at < $2 AND e.node IS NOT NULL
             AND ($3::text IS NULL OR e.cluster = $3)"#,
        from,
        to,
        cluster,
    )
    .fetch_all(db)
    .await
}

/// Low-utilisation incidents per attributes.cause (lower-cased), with the hours they report.
#[derive(Debug)]
pub struct LowUtilizationRow {
    pub cause: Option<String>,
    pub incidents: i64,
    pub hours: Option<f64>,
}

pub async fn low_utilization(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<LowUtilizationRow>, sqlx::Error> {
    sqlx::query_as!(
        LowUtilizationRow,
        r#"SELECT lower(attributes->>'cause') AS cause, count(*) AS "incidents!",
                  sum(CASE WHEN jsonb_typeof(attributes->'duration_seconds') = 'number'
                           THEN (attributes->>'duration_seconds')::float8 END) / 3600.0 AS hours
           FROM (SELECT cluster, occurred_at, attributes FROM events WHERE kind = 'low_utilization'
                 UNION ALL
                 SELECT cluster, occurred_at, attributes FROM events_archive WHERE kind = 'low_utilization') e
           WHERE occurred_at >= $1 AND occurred_at < $2 AND ($3::text IS NULL OR cluster = $3)
           GROUP BY 1"#,
        from,
        to,
        cluster,
    )
    .fetch_all(db)
    .await
}
