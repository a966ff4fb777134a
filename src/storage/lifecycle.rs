//! Failure lifecycle (beside the failures table, which is rebuilt) and node service transitions.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::domain::lifecycle::{FieldChange, Lifecycle, Resolution};
use crate::domain::taxonomy::{Category, Component, RootCause};

/// What a lifecycle is anchored by: the failure's session of signals.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FailureAnchor {
    pub id: Uuid,
    pub cluster: String,
    pub correlation_key: String,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
    pub category: String,
    pub component: String,
}

pub async fn failure_anchor(conn: &mut PgConnection, id: Uuid) -> Result<Option<FailureAnchor>, sqlx::Error> {
    sqlx::query_as!(
        FailureAnchor,
        "SELECT id, cluster, correlation_key, first_at, last_at, category, component FROM failures WHERE id = $1",
        id,
    )
    .fetch_optional(conn)
    .await
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LifecycleRow {
    pub failure_id: Uuid,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolution: Option<String>,
    pub detection_minutes: Option<f64>,
    pub resubmission_minutes: Option<f64>,
    pub setup_minutes: Option<f64>,
    pub recomputation_minutes: Option<f64>,
    pub pm_category: Option<String>,
    pub pm_component: Option<String>,
    pub note: Option<String>,
    pub updated_at: DateTime<Utc>,
    pub updated_by: String,
}

impl LifecycleRow {
    pub fn lifecycle(&self) -> Lifecycle {
        let post_mortem = match (
            self.pm_category.as_deref().and_then(Category::parse),
            self.pm_component.as_deref().and_then(Component::parse),
        ) {
            (Some(a), Some(b)) => RootCause::new(a, b).ok(),
            _ => None,
        };
        Lifecycle {
            resolved_at: self.resolved_at,
            resolution: self.resolution.as_deref().and_then(Resolution::parse),
            detection_minutes: self.detection_minutes,
            resubmission_minutes: self.resubmission_minutes,
            setup_minutes: self.setup_minutes,
            recomputation_minutes: self.recomputation_minutes,
            post_mortem,
            note: self.note.clone(),
        }
    }
}

/// Every lifecycle row whose anchor lies in the failure's span, latest-updated first (the first is
/// the one in force; more than one only after a late signal merged two patched failures).
pub async fn for_failure(conn: &mut PgConnection, f: &FailureAnchor) -> Result<Vec<LifecycleRow>, sqlx::Error> {
    sqlx::query_as!(
        LifecycleRow,
        "SELECT failure_id, resolved_at, resolution, detection_minutes, resubmission_minutes, setup_minutes,
                recomputation_minutes, pm_category, pm_component, note, updated_at, updated_by
         FROM failure_lifecycle
         WHERE cluster = $1 AND correlation_key = $2 AND anchor_at BETWEEN $3 AND $4
         ORDER BY updated_at DESC, failure_id",
        &f.cluster,
        &f.correlation_key,
        f.first_at,
        f.last_at,
    )
    .fetch_all(conn)
    .await
}

pub async fn by_lifecycle_id(conn: &mut PgConnection, id: Uuid) -> Result<Option<LifecycleRow>, sqlx::Error> {
    sqlx::query_as!(
        LifecycleRow,
        "SELECT failure_id, resolved_at, resolution, detection_minutes, resubmission_minutes, setup_minutes,
                recomputation_minutes, pm_category, pm_component, note, updated_at, updated_by
         FROM failure_lifecycle WHERE failure_id = $1",
        id,
    )
    .fetch_optional(conn)
    .await
}

/// Serialises patches of one failure session (transaction-scoped).
pub async fn lock(conn: &mut PgConnection, f: &FailureAnchor) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 1))",
        format!("lifecycle\n{}\n{}", f.cluster, f.correlation_key),
    )
    .fetch_one(conn)
    .await?;
    Ok(())
}

/// Writes the new state of lifecycle `lifecycle_id` (created anchored at the failure when new) and
/// appends the audit row, in the caller's transaction.
pub async fn save(
    conn: &mut PgConnection,
    lifecycle_id: Uuid,
    f: &FailureAnchor,
    l: &Lifecycle,
    changes: &[FieldChange],
    by: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO failure_lifecycle (failure_id, cluster, correlation_key, anchor_at, resolved_at, resolution, detection_minutes,
                                        resubmission_minutes, setup_minutes, recomputation_minutes, pm_category, pm_component,
                                        note, updated_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
         ON CONFLICT (cluster, failure_id) DO UPDATE SET
             resolved_at = EXCLUDED.resolved_at, resolution = EXCLUDED.resolution,
             detection_minutes = EXCLUDED.detection_minutes, resubmission_minutes = EXCLUDED.resubmission_minutes,
             setup_minutes = EXCLUDED.setup_minutes, recomputation_minutes = EXCLUDED.recomputation_minutes,
             pm_category = EXCLUDED.pm_category, pm_component = EXCLUDED.pm_component, note = EXCLUDED.note,
             updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by",
        lifecycle_id,
        &f.cluster,
        &f.correlation_key,
        f.first_at,
        l.resolved_at,
        l.resolution.map(|r| r.as_str()),
        l.detection_minutes,
        l.resubmission_minutes,
        l.setup_minutes,
        l.recomputation_minutes,
        l.post_mortem.map(|r| r.category.as_str()),
        l.post_mortem.map(|r| r.component.as_str()),
        l.note.as_deref(),
        by,
    )
    .execute(&mut *conn)
    .await?;
    let map: serde_json::Map<String, serde_json::Value> = changes
        .iter()
        .map(|c| (c.field.to_string(), serde_json::json!({"from": c.from, "to": c.to})))
        .collect();
    sqlx::query!(
        "INSERT INTO failure_lifecycle_changes (cluster, failure_id, changed_by, changes) VALUES ($1, $2, $3, $4)",
        &f.cluster,
        lifecycle_id,
        by,
        serde_json::Value::Object(map),
    )
    .execute(conn)
    .await?;
    Ok(())
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChangeRow {
    pub failure_id: Uuid,
    pub changed_at: DateTime<Utc>,
    pub changed_by: String,
    pub changes: serde_json::Value,
}

pub async fn changes(conn: &mut PgConnection, lifecycle_ids: &[Uuid]) -> Result<Vec<ChangeRow>, sqlx::Error> {
    sqlx::query_as!(
        ChangeRow,
        "SELECT failure_id, changed_at, changed_by, changes FROM failure_lifecycle_changes
         WHERE failure_id = ANY($1) ORDER BY id",
        lifecycle_ids,
    )
    .fetch_all(conn)
    .await
}

// ---------------------------------------------------------------------------
// Node service transitions
// ---------------------------------------------------------------------------

pub async fn node_gpus(db: &PgPool, cluster: &str, hostname: &str) -> Result<Option<i32>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT gpu_count FROM nodes WHERE cluster = $1 AND hostname = $2",
        cluster,
        hostname,
    )
    .fetch_optional(db)
    .await
}

pub struct NewTransition<'a> {
    pub cluster: &'a str,
    pub hostname: &'a str,
    pub drained: bool,
    pub at: DateTime<Utc>,
    pub reason: Option<&'a str>,
    pub failure_id: Option<Uuid>,
    pub by: &'a str,
}

pub async fn insert_transition(db: &PgPool, t: &NewTransition<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO node_state_changes (cluster, hostname, state, at, reason, failure_id, recorded_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        t.cluster,
        t.hostname,
        if t.drained { "drained" } else { "returned" },
        t.at,
        t.reason,
        t.failure_id,
        t.by,
    )
    .fetch_one(db)
    .await
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TransitionRow {
    pub cluster: String,
    pub hostname: String,
    /// drained | returned
    pub state: String,
    pub at: DateTime<Utc>,
    pub reason: Option<String>,
    /// `api` (POST .../state) or `event` (node_drain / node_resume signals).
    pub source: String,
}

/// Transitions relevant to [from, to): each node's last one before `from` (its state entering the
/// window) and all inside it, from the API and from node_drain / node_resume events, in time order.
/// Optionally one node only.
pub async fn transitions(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
    hostname: Option<&str>,
) -> Result<Vec<TransitionRow>, sqlx::Error> {
    sqlx::query_as!(
        TransitionRow,
        r#"WITH t AS (
             SELECT cluster, hostname, state, at, reason, 'api' AS source FROM node_state_changes
             WHERE at < $2 AND ($3::text IS NULL OR cluster = $3) AND ($4::text IS NULL OR hostname = $4)
             UNION ALL
             SELECT cluster, node, CASE kind WHEN 'node_drain' THEN 'drained' ELSE 'returned' END, occurred_at, message, 'event'
             FROM (SELECT cluster, node, kind, occurred_at, message FROM events WHERE kind IN ('node_drain', 'node_resume')
                   UNION ALL
                   SELECT cluster, node, kind, occurred_at, message FROM events_archive
                   WHERE kind IN ('node_drain', 'node_resume')) AS e
             WHERE occurred_at < $2 AND node IS NOT NULL
               AND ($3::text IS NULL OR cluster = $3) AND ($4::text IS NULL OR node = $4)
         ),
         before AS (
             SELECT DISTINCT ON (cluster, hostname) * FROM t WHERE at < $1 ORDER BY cluster, hostname, at DESC
         )
         SELECT cluster AS "cluster!", hostname AS "hostname!", state AS "state!", at AS "at!", reason,
                source AS "source!" FROM before
         UNION ALL SELECT cluster, hostname, state, at, reason, source FROM t WHERE at >= $1
         ORDER BY 1, 2, 4, 3"#,
        from,
        to,
        cluster,
        hostname,
    )
    .fetch_all(db)
    .await
}
