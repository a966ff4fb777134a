//! Aggregates over the failures table for the analytics. Causes are the effective ones (view
//! `failures_effective`: a post-mortem root cause over the automatic one). Each filters on the
//! indexed first_at; none scans the events table.

use chrono::{DateTime, Duration, NaiveDate, Utc};
use sqlx::PgPool;
use uuid::Uuid;

/// Failures of one group value by effective (category, component); `dimension` is generation,
/// model or cluster.
#[derive(Debug)]
pub struct GroupCauseCount {
    pub grp: String,
    pub category: String,
    pub component: String,
    pub failures: i64,
}

pub async fn group_cause_counts(
    db: &PgPool,
    dimension: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<GroupCauseCount>, sqlx::Error> {
    sqlx::query_as!(
        GroupCauseCount,
        r#"SELECT CASE $4 WHEN 'generation' THEN COALESCE(n.gpu_generation, f.signal_generation)
                          WHEN 'model' THEN COALESCE(n.gpu_model, 'unknown')
                          ELSE f.cluster END AS "grp!",
                  f.effective_category AS "category!", f.effective_component AS "component!", count(*) AS "failures!"
           FROM failures_effective f LEFT JOIN nodes n ON n.cluster = f.cluster AND n.hostname = f.root_node
           WHERE f.first_at >= $1 AND f.first_at < $2 AND ($3::text IS NULL OR f.cluster = $3)
           GROUP BY 1, 2, 3"#,
        from,
        to,
        cluster,
        dimension,
    )
    .fetch_all(db)
    .await
}

/// Failures per root-cause node (None: failures without a node).
#[derive(Debug)]
pub struct NodeCount {
    pub cluster: String,
    pub root_node: Option<String>,
    pub failures: i64,
}

pub async fn per_root_node(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<NodeCount>, sqlx::Error> {
    sqlx::query_as!(
        NodeCount,
        r#"SELECT cluster, root_node, count(*) AS "failures!" FROM failures
           WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)
           GROUP BY 1, 2"#,
        from,
        to,
        cluster,
    )
    .fetch_all(db)
    .await
}

#[derive(Debug)]
pub struct CauseCount {
    pub category: String,
    pub component: String,
    pub symptom: String,
    pub failures: i64,
}

/// Failures per effective (category, component) and symptom (`unspecified` when none): one read
/// serves both the cause ratios and the symptom mix.
pub async fn cause_counts(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<CauseCount>, sqlx::Error> {
    sqlx::query_as!(
        CauseCount,
        r#"SELECT effective_category AS "category!", effective_component AS "component!",
                  COALESCE(symptom, 'unspecified') AS "symptom!", count(*) AS "failures!"
           FROM failures_effective
           WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)
           GROUP BY 1, 2, 3"#,
        from,
        to,
        cluster,
    )
    .fetch_all(db)
    .await
}

/// (failures, signals) of the window.
pub async fn totals(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<(u64, u64), sqlx::Error> {
    let r = sqlx::query!(
        r#"SELECT count(*) AS "failures!", COALESCE(sum(signal_count), 0)::bigint AS "signals!" FROM failures
           WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)"#,
        from,
        to,
        cluster,
    )
    .fetch_one(db)
    .await?;
    Ok((r.failures as u64, r.signals as u64))
}

#[derive(Debug, Clone)]
pub struct NodeFailure {
    pub cluster: String,
    pub root_node: String,
    pub id: Uuid,
    pub first_at: DateTime<Utc>,
    pub category: String,
    pub component: String,
    pub root_kind: String,
    pub root_code: Option<i64>,
    pub job_id: Option<String>,
    pub resolution: Option<String>,
}

/// The window's failures of the given (cluster, root node)s, oldest first.
pub async fn of_nodes(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    clusters: &[&str],
    hosts: &[&str],
) -> Result<Vec<NodeFailure>, sqlx::Error> {
    sqlx::query_as!(
        NodeFailure,
        r#"SELECT f.cluster AS "cluster!", f.root_node AS "root_node!", f.id AS "id!", f.first_at AS "first_at!",
                  f.effective_category AS "category!", f.effective_component AS "component!",
                  f.root_kind AS "root_kind!", f.root_code, f.job_id, f.resolution
           FROM failures_effective f JOIN UNNEST($3::text[], $4::text[]) AS n(cluster, hostname)
                ON f.cluster = n.cluster AND f.root_node = n.hostname
           WHERE f.first_at >= $1 AND f.first_at < $2
           ORDER BY f.cluster, f.root_node, f.first_at"#,
        from,
        to,
        clusters as &[&str],
        hosts as &[&str],
    )
    .fetch_all(db)
    .await
}

/// For each (cluster, root node, earliest, at): the node's latest failure whose first signal is
/// in [earliest, at], if any (a range of the root node's time index each; a join rather than a
/// lateral subquery, which Citus cannot plan against a function's rows). Rows in the keys' order;
/// a failure that is the latest for several keys comes once per key.
pub async fn latest_before(
    db: &PgPool,
    clusters: &[&str],
    hosts: &[&str],
    earliest: &[DateTime<Utc>],
    at: &[DateTime<Utc>],
) -> Result<Vec<NodeFailure>, sqlx::Error> {
    sqlx::query_as!(
        NodeFailure,
        r#"SELECT DISTINCT ON (k.n) f.cluster AS "cluster!", f.root_node AS "root_node!", f.id AS "id!",
                  f.first_at AS "first_at!", f.effective_category AS "category!",
                  f.effective_component AS "component!", f.root_kind AS "root_kind!", f.root_code, f.job_id,
                  f.resolution
           FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY
                AS k(cluster, hostname, earliest, at, n)
           JOIN failures_effective f
             ON f.cluster = k.cluster AND f.root_node = k.hostname
            AND f.first_at >= k.earliest AND f.first_at <= k.at
           ORDER BY k.n, f.first_at DESC"#,
        clusters as &[&str],
        hosts as &[&str],
        earliest,
        at,
    )
    .fetch_all(db)
    .await
}

/// The failures of the given (cluster, id)s (e.g. named by a drain), wherever their root node.
pub async fn by_ids(db: &PgPool, clusters: &[&str], ids: &[Uuid]) -> Result<Vec<NodeFailure>, sqlx::Error> {
    sqlx::query_as!(
        NodeFailure,
        r#"SELECT f.cluster AS "cluster!", COALESCE(f.root_node, '') AS "root_node!", f.id AS "id!", f.first_at AS "first_at!",
                  f.effective_category AS "category!", f.effective_component AS "component!",
                  f.root_kind AS "root_kind!", f.root_code, f.job_id, f.resolution
           FROM failures_effective f JOIN UNNEST($1::text[], $2::uuid[]) AS k(cluster, id)
                ON f.cluster = k.cluster AND f.id = k.id"#,
        clusters as &[&str],
        ids as &[Uuid],
    )
    .fetch_all(db)
    .await
}

#[derive(Debug)]
pub struct DayCategoryCount {
    pub day: NaiveDate,
    pub category: String,
    pub failures: i64,
}

/// Failures per UTC day and effective category.
pub async fn daily_categories(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<DayCategoryCount>, sqlx::Error> {
    sqlx::query_as!(
        DayCategoryCount,
        r#"SELECT (first_at AT TIME ZONE 'UTC')::date AS "day!", effective_category AS "category!", count(*) AS "failures!"
           FROM failures_effective
           WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)
           GROUP BY 1, 2"#,
        from,
        to,
        cluster,
    )
    .fetch_all(db)
    .await
}

/// A failure of the window with its lifecycle, job GPUs, and whether its root node was drained
/// within the drain horizon of its first signal.
#[derive(Debug)]
pub struct RecoveryRow {
    pub id: Uuid,
    pub cluster: String,
    pub job_id: Option<String>,
    pub first_at: DateTime<Utc>,
    pub category: String,
    pub component: String,
    pub transient: bool,
    pub resolution: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub detection_minutes: Option<f64>,
    pub resubmission_minutes: Option<f64>,
    pub setup_minutes: Option<f64>,
    pub recomputation_minutes: Option<f64>,
    pub gpus: Option<i64>,
    pub drained: bool,
}

pub async fn with_recovery(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
    drain_horizon: Duration,
) -> Result<Vec<RecoveryRow>, sqlx::Error> {
    let horizon_secs = drain_horizon.num_milliseconds() as f64 / 1000.0;
    sqlx::query_as!(
        RecoveryRow,
        r#"SELECT f.id AS "id!", f.cluster AS "cluster!", f.job_id, f.first_at AS "first_at!",
                  f.effective_category AS "category!", f.effective_component AS "component!",
                  f.transient AS "transient!", f.resolution, f.resolved_at,
                  f.detection_minutes, f.resubmission_minutes, f.setup_minutes, f.recomputation_minutes,
                  COALESCE(j.gpus::bigint, (SELECT sum(n.gpu_count) FROM nodes n
                                            WHERE n.cluster = f.cluster AND n.hostname = ANY(f.nodes))::bigint) AS gpus,
                  (f.root_node IS NOT NULL AND (
                      EXISTS (SELECT 1 FROM node_state_changes s
                              WHERE s.cluster = f.cluster AND s.hostname = f.root_node AND s.state = 'drained'
                                AND s.at >= f.first_at AND s.at < f.first_at + make_interval(secs => $4))
                   OR EXISTS (SELECT 1 FROM events e
                              WHERE e.kind = 'node_drain' AND e.occurred_at >= f.first_at AND e.occurred_at < f.first_at + make_interval(secs => $4)
                                AND e.cluster = f.cluster AND e.node = f.root_node)
                   OR EXISTS (SELECT 1 FROM events_archive e
                              WHERE e.kind = 'node_drain' AND e.occurred_at >= f.first_at AND e.occurred_at < f.first_at + make_interval(secs => $4)
                                AND e.cluster = f.cluster AND e.node = f.root_node))) AS "drained!"
           FROM failures_effective f LEFT JOIN jobs j ON j.cluster = f.cluster AND j.job_id = f.job_id
           WHERE f.first_at >= $1 AND f.first_at < $2 AND ($3::text IS NULL OR f.cluster = $3)
           ORDER BY f.first_at, f.id"#,
        from,
        to,
        cluster,
        horizon_secs,
    )
    .fetch_all(db)
    .await
}
