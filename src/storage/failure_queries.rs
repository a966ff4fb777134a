//! Reading failures and their signals.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

#[derive(Debug, sqlx::FromRow)]
pub struct FailureRow {
    pub id: Uuid,
    pub cluster: String,
    pub job_id: Option<String>,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
    pub nodes: Vec<String>,
    pub signal_ids: Vec<Uuid>,
    pub signal_count: i32,
    pub root_signal: Uuid,
    pub root_node: Option<String>,
    pub root_kind: String,
    pub root_code: Option<i64>,
    pub gpu_generation: String,
    pub category: String,
    pub component: String,
    pub severity: String,
    pub transient: bool,
    pub action: String,
    pub rule_id: Option<String>,
    pub explicit_cause: bool,
    pub symptom: Option<String>,
    pub catalog_version: i64,
}

const FAILURE_SELECT: &str = "SELECT f.id, f.cluster, f.job_id, f.first_at, f.last_at, f.nodes, f.signal_ids, f.signal_count,
        f.root_signal, f.root_node, f.root_kind, f.root_code,
        COALESCE(n.gpu_generation, f.signal_generation) AS gpu_generation,
        f.category, f.component, f.severity, f.transient, f.action, f.rule_id, f.explicit_cause, f.symptom, f.catalog_version
 FROM failures f LEFT JOIN nodes n ON n.cluster = f.cluster AND n.hostname = f.root_node";

#[derive(Debug, Default)]
pub struct FailureFilter {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub cluster: Option<String>,
    pub category: Option<String>,
    pub component: Option<String>,
    pub generation: Option<String>,
    pub node: Option<String>,
    pub job: Option<String>,
    /// Keyset cursor: rows strictly before (first_at, id) in (first_at DESC, id DESC) order.
    pub before: Option<(DateTime<Utc>, Uuid)>,
    pub limit: i64,
}

pub async fn list(db: &PgPool, f: &FailureFilter) -> Result<Vec<FailureRow>, sqlx::Error> {
    let (before_t, before_id) = f.before.unzip();
    let sql = format!(
        "{FAILURE_SELECT}
         WHERE ($1::timestamptz IS NULL OR f.first_at >= $1) AND ($2::timestamptz IS NULL OR f.first_at < $2)
           AND ($3::text IS NULL OR f.cluster = $3) AND ($4::text IS NULL OR f.category = $4)
           AND ($5::text IS NULL OR f.component = $5)
           AND ($6::text IS NULL OR COALESCE(n.gpu_generation, f.signal_generation) = $6)
           AND ($7::text IS NULL OR $7 = ANY(f.nodes)) AND ($8::text IS NULL OR f.job_id = $8)
           AND ($9::timestamptz IS NULL OR (f.first_at, f.id) < ($9, $10))
         ORDER BY f.first_at DESC, f.id DESC LIMIT $11"
    );
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(f.from)
        .bind(f.to)
        .bind(&f.cluster)
        .bind(&f.category)
        .bind(&f.component)
        .bind(&f.generation)
        .bind(&f.node)
        .bind(&f.job)
        .bind(before_t)
        .bind(before_id)
        .bind(f.limit)
        .fetch_all(db)
        .await
}

pub async fn get(db: &PgPool, id: Uuid) -> Result<Option<FailureRow>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!("{FAILURE_SELECT} WHERE f.id = $1")))
        .bind(id)
        .fetch_optional(db)
        .await
}

#[derive(Debug, sqlx::FromRow)]
pub struct SignalRow {
    pub id: Uuid,
    pub occurred_at: DateTime<Utc>,
    pub node: Option<String>,
    pub gpu_index: Option<i32>,
    pub job_id: Option<String>,
    pub kind: String,
    pub code: Option<i64>,
    pub symptom: Option<String>,
    pub rc_category: Option<String>,
    pub rc_component: Option<String>,
    pub message: Option<String>,
    pub attributes: serde_json::Value,
    pub repeat_count: i32,
    pub last_occurred_at: Option<DateTime<Utc>>,
}

pub async fn signals(db: &PgPool, ids: &[Uuid], limit: i64) -> Result<Vec<SignalRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, occurred_at, node, gpu_index, job_id, kind, code, symptom, rc_category, rc_component, message, attributes,
                repeat_count, last_occurred_at
         FROM events WHERE id = ANY($1) ORDER BY occurred_at, id LIMIT $2",
    )
    .bind(ids)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// A root-cause node with its failures, and (on every row) the totals they are a share of.
#[derive(Debug, sqlx::FromRow)]
pub struct WorstNodeRow {
    pub cluster: String,
    pub hostname: String,
    pub gpu_generation: Option<String>,
    pub failures: i64,
    pub failures_with_node: i64,
    pub nodes_with_failures: i64,
}

/// The `limit` root-cause nodes with the most failures, and the totals they are a share of.
pub async fn worst_nodes(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
    limit: i64,
) -> Result<Vec<WorstNodeRow>, sqlx::Error> {
    sqlx::query_as(
        "WITH per_node AS (
             SELECT cluster, root_node, count(*) AS failures FROM failures
             WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3) AND root_node IS NOT NULL
             GROUP BY 1, 2)
         SELECT p.cluster, p.root_node AS hostname, n.gpu_generation, p.failures,
                sum(p.failures) OVER ()::bigint AS failures_with_node, count(*) OVER () AS nodes_with_failures
         FROM per_node p LEFT JOIN nodes n ON n.cluster = p.cluster AND n.hostname = p.root_node
         ORDER BY p.failures DESC, p.cluster, p.root_node
         LIMIT $4",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .bind(limit)
    .fetch_all(db)
    .await
}
