//! Read queries behind the cost analytics. Failures are read through the `failures_effective` view
//! (the post-mortem root cause over the automatic one), filtered on the indexed first_at; slowdown,
//! low-utilisation and drain signals through the events (kind, occurred_at) index.

use chrono::{DateTime, Duration, NaiveDate, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::analytics::cost::{JobRun, Phases, RecoveryFailure, SlowdownSignal, slowdown_ratio};

/// The window's failures with their lifecycle, job GPUs, and whether the root node was drained
/// within `drain_horizon` of the first signal.
pub async fn recovery_failures(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
    drain_horizon: Duration,
) -> Result<Vec<RecoveryFailure>, sqlx::Error> {
    #[derive(sqlx::FromRow)]
    struct Row {
        id: Uuid,
        cluster: String,
        job_id: Option<String>,
        first_at: DateTime<Utc>,
        effective_category: String,
        transient: bool,
        resolution: Option<String>,
        resolved_at: Option<DateTime<Utc>>,
        detection_minutes: Option<f64>,
        resubmission_minutes: Option<f64>,
        setup_minutes: Option<f64>,
        recomputation_minutes: Option<f64>,
        gpus: Option<i64>,
        drained: bool,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT f.id, f.cluster, f.job_id, f.first_at, f.effective_category, f.transient, f.resolution, f.resolved_at,
                f.detection_minutes, f.resubmission_minutes, f.setup_minutes, f.recomputation_minutes,
                COALESCE(j.gpus::bigint, (SELECT sum(n.gpu_count) FROM nodes n WHERE n.cluster = f.cluster AND n.hostname = ANY(f.nodes))) AS gpus,
                f.root_node IS NOT NULL AND (
                    EXISTS (SELECT 1 FROM node_state_changes s
                            WHERE s.cluster = f.cluster AND s.hostname = f.root_node AND s.state = 'drained'
                              AND s.at >= f.first_at AND s.at < f.first_at + $4)
                 OR EXISTS (SELECT 1 FROM events e
                            WHERE e.kind = 'node_drain' AND e.occurred_at >= f.first_at AND e.occurred_at < f.first_at + $4
                              AND e.cluster = f.cluster AND e.node = f.root_node)) AS drained
         FROM failures_effective f LEFT JOIN jobs j ON j.cluster = f.cluster AND j.job_id = f.job_id
         WHERE f.first_at >= $1 AND f.first_at < $2 AND ($3::text IS NULL OR f.cluster = $3)
         ORDER BY f.first_at, f.id",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .bind(drain_horizon)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| RecoveryFailure {
            id: r.id,
            cluster: r.cluster,
            job_id: r.job_id,
            first_at: r.first_at,
            category: r.effective_category,
            catalog_transient: r.transient,
            resolution: r.resolution,
            resolved_at: r.resolved_at,
            phases: Phases {
                detection: r.detection_minutes,
                resubmission: r.resubmission_minutes,
                setup: r.setup_minutes,
                recomputation: r.recomputation_minutes,
            },
            gpus: r.gpus.and_then(|g| u32::try_from(g).ok()),
            root_node_drained: r.drained,
        })
        .collect())
}

/// Jobs running at some time in [from, to).
pub async fn jobs_in_window(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<JobRun>, sqlx::Error> {
    let rows: Vec<(
        String,
        String,
        i32,
        Vec<String>,
        DateTime<Utc>,
        Option<DateTime<Utc>>,
        String,
    )> = sqlx::query_as(
        "SELECT cluster, job_id, gpus, nodes, started_at, ended_at, state FROM jobs
         WHERE started_at < $2 AND (ended_at IS NULL OR ended_at > $1) AND ($3::text IS NULL OR cluster = $3)",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(cluster, job_id, gpus, nodes, started_at, ended_at, state)| JobRun {
            cluster,
            job_id,
            gpus: gpus.max(0) as u32,
            nodes,
            started_at,
            ended_at,
            state,
        })
        .collect())
}

/// Root-signal view: failures per (root kind, root code) with their most common severity.
pub async fn root_errors(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<(String, Option<i64>, u64, String)>, sqlx::Error> {
    let rows: Vec<(String, Option<i64>, i64, String)> = sqlx::query_as(
        "SELECT root_kind, root_code, count(*), mode() WITHIN GROUP (ORDER BY severity) FROM failures
         WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)
         GROUP BY 1, 2",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(k, c, n, s)| (k, c, n as u64, s)).collect())
}

/// All-signal view: per (kind, code) among the signals of the window's failures, the failures that
/// hold one and the signal count. Reads events by primary key only.
pub async fn signal_errors(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<(String, Option<i64>, u64, u64)>, sqlx::Error> {
    let rows: Vec<(String, Option<i64>, i64, i64)> = sqlx::query_as(
        "SELECT e.kind, e.code, count(DISTINCT f.id), count(*)
         FROM failures f CROSS JOIN LATERAL unnest(f.signal_ids) AS s(id) JOIN events e ON e.id = s.id
         WHERE f.first_at >= $1 AND f.first_at < $2 AND ($3::text IS NULL OR f.cluster = $3)
         GROUP BY 1, 2",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(k, c, f, s)| (k, c, f as u64, s as u64))
        .collect())
}

/// (failures, signals) of the window.
pub async fn failure_totals(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<(u64, u64), sqlx::Error> {
    let (f, s): (i64, Option<i64>) = sqlx::query_as(
        "SELECT count(*), sum(signal_count)::bigint FROM failures
         WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_one(db)
    .await?;
    Ok((f as u64, s.unwrap_or(0) as u64))
}

#[derive(Debug, Clone, sqlx::FromRow)]
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

/// The window's failures of the given nodes (root-cause node), oldest first.
pub async fn failures_of_nodes(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    nodes: &[(String, String)],
) -> Result<Vec<NodeFailure>, sqlx::Error> {
    let (clusters, hosts): (Vec<&str>, Vec<&str>) = nodes.iter().map(|(c, h)| (c.as_str(), h.as_str())).unzip();
    sqlx::query_as(
        "SELECT f.cluster, f.root_node, f.id, f.first_at, f.effective_category AS category, f.effective_component AS component,
                f.root_kind, f.root_code, f.job_id, f.resolution
         FROM failures_effective f JOIN UNNEST($3::text[], $4::text[]) AS n(cluster, hostname)
              ON f.cluster = n.cluster AND f.root_node = n.hostname
         WHERE f.first_at >= $1 AND f.first_at < $2
         ORDER BY f.cluster, f.root_node, f.first_at",
    )
    .bind(from)
    .bind(to)
    .bind(clusters)
    .bind(hosts)
    .fetch_all(db)
    .await
}

/// Failures per day and effective category.
pub async fn daily_categories(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<(NaiveDate, String, u64)>, sqlx::Error> {
    let rows: Vec<(NaiveDate, String, i64)> = sqlx::query_as(
        "SELECT (first_at AT TIME ZONE 'UTC')::date, effective_category, count(*) FROM failures_effective
         WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)
         GROUP BY 1, 2",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(d, c, n)| (d, c, n as u64)).collect())
}

/// Slowdown signals with a node, their ratio (step_time_ratio, else 1 / throughput_ratio), the
/// seconds they cover (duration_seconds) and the GPUs of their job.
/// Returns the signals and the count of those without a usable ratio.
pub async fn slowdowns(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<(Vec<SlowdownSignal>, u64), sqlx::Error> {
    let rows: Vec<(String, String, Option<String>, DateTime<Utc>, Option<f64>, Option<f64>, Option<f64>, Option<i64>)> = sqlx::query_as(
        "SELECT e.cluster, e.node, e.job_id, e.occurred_at,
                CASE WHEN jsonb_typeof(e.attributes->'step_time_ratio') = 'number' THEN (e.attributes->>'step_time_ratio')::float8 END,
                CASE WHEN jsonb_typeof(e.attributes->'throughput_ratio') = 'number' THEN (e.attributes->>'throughput_ratio')::float8 END,
                CASE WHEN jsonb_typeof(e.attributes->'duration_seconds') = 'number' THEN (e.attributes->>'duration_seconds')::float8 END,
                COALESCE(j.gpus, e.job_gpus, n.gpu_count)::bigint
         FROM events e
         LEFT JOIN jobs j ON j.cluster = e.cluster AND j.job_id = e.job_id
         LEFT JOIN nodes n ON n.cluster = e.cluster AND n.hostname = e.node
         WHERE e.kind = 'slowdown' AND e.occurred_at >= $1 AND e.occurred_at < $2 AND e.node IS NOT NULL
           AND ($3::text IS NULL OR e.cluster = $3)",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await?;
    let mut without_ratio = 0;
    let mut out = Vec::with_capacity(rows.len());
    for (cluster, node, job_id, at, step, throughput, duration, gpus) in rows {
        match slowdown_ratio(step, throughput) {
            Some(ratio) => out.push(SlowdownSignal {
                cluster,
                node,
                job_id,
                at,
                ratio,
                duration_seconds: duration,
                job_gpus: gpus.and_then(|g| u32::try_from(g).ok()),
            }),
            None => without_ratio += 1,
        }
    }
    Ok((out, without_ratio))
}

/// Low-utilisation incidents per attributes.cause: (cause, incidents, hours from duration_seconds).
pub async fn low_utilization(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<(Option<String>, u64, f64)>, sqlx::Error> {
    let rows: Vec<(Option<String>, i64, Option<f64>)> = sqlx::query_as(
        "SELECT lower(attributes->>'cause'), count(*),
                sum(CASE WHEN jsonb_typeof(attributes->'duration_seconds') = 'number' THEN (attributes->>'duration_seconds')::float8 END) / 3600.0
         FROM events
         WHERE kind = 'low_utilization' AND occurred_at >= $1 AND occurred_at < $2 AND ($3::text IS NULL OR cluster = $3)
         GROUP BY 1",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(c, n, h)| (c, n as u64, h.unwrap_or(0.0)))
        .collect())
}

/// Failures of the window holding at least one signal of each kind (XID 74 counts as `nvlink`).
pub async fn failures_by_signal_kind(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<(String, u64)>, sqlx::Error> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT CASE WHEN e.kind = 'xid' AND e.code = 74 THEN 'nvlink' ELSE e.kind END, count(DISTINCT f.id)
         FROM failures f CROSS JOIN LATERAL unnest(f.signal_ids) AS s(id) JOIN events e ON e.id = s.id
         WHERE f.first_at >= $1 AND f.first_at < $2 AND ($3::text IS NULL OR f.cluster = $3)
         GROUP BY 1",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(k, n)| (k, n as u64)).collect())
}
