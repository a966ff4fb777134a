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
    pub explanation: String,
    pub explicit_cause: bool,
    pub symptom: Option<String>,
    pub catalog_version: i64,
}

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
    select(db, f, None).await
}

pub async fn get(db: &PgPool, id: Uuid) -> Result<Option<FailureRow>, sqlx::Error> {
    let all = FailureFilter {
        limit: 1,
        ..Default::default()
    };
    Ok(select(db, &all, Some(id)).await?.into_iter().next())
}

/// The one statement that reads failures (a list page, or one failure by id).
async fn select(db: &PgPool, f: &FailureFilter, id: Option<Uuid>) -> Result<Vec<FailureRow>, sqlx::Error> {
    let (before_t, before_id) = f.before.unzip();
    sqlx::query_as!(
        FailureRow,
        r#"SELECT f.id, f.cluster, f.job_id, f.first_at, f.last_at, f.nodes, f.signal_ids, f.signal_count,
                  f.root_signal, f.root_node, f.root_kind, f.root_code,
                  COALESCE(n.gpu_generation, f.signal_generation) AS "gpu_generation!",
                  f.category, f.component, f.severity, f.transient, f.action, f.rule_id, f.explanation,
                  f.explicit_cause, f.symptom, f.catalog_version
           FROM failures f LEFT JOIN nodes n ON n.cluster = f.cluster AND n.hostname = f.root_node
           WHERE ($1::timestamptz IS NULL OR f.first_at >= $1) AND ($2::timestamptz IS NULL OR f.first_at < $2)
             AND ($3::text IS NULL OR f.cluster = $3) AND ($4::text IS NULL OR f.category = $4)
             AND ($5::text IS NULL OR f.component = $5)
             AND ($6::text IS NULL OR COALESCE(n.gpu_generation, f.signal_generation) = $6)
             AND ($7::text IS NULL OR $7 = ANY(f.nodes)) AND ($8::text IS NULL OR f.job_id = $8)
             AND ($9::timestamptz IS NULL OR (f.first_at, f.id) < ($9, $10))
             AND ($12::uuid IS NULL OR f.id = $12)
           ORDER BY f.first_at DESC, f.id DESC LIMIT $11"#,
        f.from,
        f.to,
        f.cluster.as_deref(),
        f.category.as_deref(),
        f.component.as_deref(),
        f.generation.as_deref(),
        f.node.as_deref(),
        f.job.as_deref(),
        before_t,
        before_id,
        f.limit,
        id,
    )
    .fetch_all(db)
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

/// The stored signals of a failure: its cluster, ids and span (every member starts inside
/// [first_at, last_at]), so the read is a primary-key range in the partitions of the span. Signals
/// past retention are gone; the failure keeps their ids and (kind, code).
pub async fn signals(
    db: &PgPool,
    cluster: &str,
    first_at: DateTime<Utc>,
    last_at: DateTime<Utc>,
    ids: &[Uuid],
    limit: i64,
) -> Result<Vec<SignalRow>, sqlx::Error> {
    sqlx::query_as!(
        SignalRow,
        "SELECT id, occurred_at, node, gpu_index, job_id, kind, code, symptom, rc_category, rc_component, message, attributes,
                repeat_count, last_occurred_at
         FROM events WHERE cluster = $1 AND occurred_at BETWEEN $2 AND $3 AND id = ANY($4)
         ORDER BY occurred_at, id LIMIT $5",
        cluster,
        first_at,
        last_at,
        ids,
        limit,
    )
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
    sqlx::query_as!(
        WorstNodeRow,
        r#"WITH per_node AS (
             SELECT cluster, root_node, count(*) AS failures FROM failures
             WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3) AND root_node IS NOT NULL
             GROUP BY 1, 2)
         SELECT p.cluster AS "cluster!", p.root_node AS "hostname!", n.gpu_generation AS "gpu_generation?",
                p.failures AS "failures!", sum(p.failures) OVER ()::bigint AS "failures_with_node!",
                count(*) OVER () AS "nodes_with_failures!"
         FROM per_node p LEFT JOIN nodes n ON n.cluster = p.cluster AND n.hostname = p.root_node
         ORDER BY p.failures DESC, p.cluster, p.root_node
         LIMIT $4"#,
        from,
        to,
        cluster,
        limit,
    )
    .fetch_all(db)
    .await
}
