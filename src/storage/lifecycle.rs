//! Failure lifecycle (beside the failures table, which is rebuilt) and node service transitions.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::domain::lifecycle::{Lifecycle, Resolution};
use crate::domain::taxonomy::{Category, Component, RootCause};

/// What a lifecycle is anchored by: the failure's session of signals.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
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

/// The write path reads by index only, planned for the tables as they are now: a lifecycle write
/// touches one failure and the lifecycles anchored in its span, which the primary key of `failures`
/// and `failure_lifecycle_anchor_idx` reach directly. Without this, a plan made while
/// `failure_lifecycle` was small or empty (a prepared statement's generic plan, kept for the
/// connection's life; or statistics from an ANALYZE of the empty table) scans the table, or all of
/// a cluster's lifecycles by the primary key, on every write: a cost that grows with the history
/// until an ANALYZE replaces the plan. Transaction-scoped (the settings end with the transaction).
pub async fn plan_by_index(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "SELECT set_config('enable_seqscan', 'off', true) AS seqscan, set_config('plan_cache_mode', 'force_custom_plan', true) AS plans"
    )
    .fetch_one(conn)
    .await?;
    Ok(())
}

/// The failures with these ids (any cluster; unknown ids are left out).
pub async fn anchors_by_id(conn: &mut PgConnection, ids: &[Uuid]) -> Result<Vec<FailureAnchor>, sqlx::Error> {
    sqlx::query_as!(
        FailureAnchor,
        "SELECT id, cluster, correlation_key, first_at, last_at, category, component FROM failures WHERE id = ANY($1)",
        ids,
    )
    .fetch_all(conn)
    .await
}

/// A failure found by what a ticket names: `n` is the 1-based position of the description.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FoundAnchor {
    pub n: i64,
    pub id: Uuid,
    pub cluster: String,
    pub correlation_key: String,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
    pub category: String,
    pub component: String,
}

impl FoundAnchor {
    pub fn anchor(self) -> FailureAnchor {
        FailureAnchor {
            id: self.id,
            cluster: self.cluster,
            correlation_key: self.correlation_key,
            first_at: self.first_at,
            last_at: self.last_at,
            category: self.category,
            component: self.component,
        }
    }
}

/// The failures of `cluster` described by (first_at, job_id or node): the first signal in
/// `[first_at, first_at + 1 s)`, of the job when one is named, else involving the node; of several,
/// the latest (the first that `GET /v1/failures` lists for the same filter). Descriptions that match
/// nothing are left out.
pub async fn anchors_found(
    conn: &mut PgConnection,
    cluster: &str,
    first_ats: &[DateTime<Utc>],
    job_ids: &[Option<String>],
    nodes: &[Option<String>],
) -> Result<Vec<FoundAnchor>, sqlx::Error> {
    sqlx::query_as!(
        FoundAnchor,
        r#"SELECT k.n AS "n!", f.id, f.cluster, f.correlation_key, f.first_at, f.last_at, f.category, f.component
           FROM UNNEST($2::timestamptz[], $3::text[], $4::text[]) WITH ORDINALITY AS k(first_at, job_id, node, n)
           CROSS JOIN LATERAL (
               SELECT f.id, f.cluster, f.correlation_key, f.first_at, f.last_at, f.category, f.component
               FROM failures f
               WHERE f.cluster = $1 AND f.first_at >= k.first_at AND f.first_at < k.first_at + interval '1 second'
                 AND (CASE WHEN k.job_id IS NOT NULL THEN f.job_id = k.job_id ELSE k.node = ANY(f.nodes) END)
               ORDER BY f.first_at DESC, f.id DESC
               LIMIT 1
           ) f"#,
        cluster,
        first_ats,
        job_ids as &[Option<String>],
        nodes as &[Option<String>],
    )
    .fetch_all(conn)
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

pub async fn by_lifecycle_id(
    conn: &mut PgConnection,
    cluster: &str,
    id: Uuid,
) -> Result<Option<LifecycleRow>, sqlx::Error> {
    sqlx::query_as!(
        LifecycleRow,
        "SELECT failure_id, resolved_at, resolution, detection_minutes, resubmission_minutes, setup_minutes,
                recomputation_minutes, pm_category, pm_component, note, updated_at, updated_by
         FROM failure_lifecycle WHERE cluster = $1 AND failure_id = $2",
        cluster,
        id,
    )
    .fetch_optional(conn)
    .await
}

/// A lifecycle row in force over a span: `n` is the 1-based position of the span asked.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SpanLifecycleRow {
    pub n: i64,
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

impl SpanLifecycleRow {
    pub fn row(self) -> LifecycleRow {
        LifecycleRow {
            failure_id: self.failure_id,
            resolved_at: self.resolved_at,
            resolution: self.resolution,
            detection_minutes: self.detection_minutes,
            resubmission_minutes: self.resubmission_minutes,
            setup_minutes: self.setup_minutes,
            recomputation_minutes: self.recomputation_minutes,
            pm_category: self.pm_category,
            pm_component: self.pm_component,
            note: self.note,
            updated_at: self.updated_at,
            updated_by: self.updated_by,
        }
    }
}

/// The lifecycle in force for each failure session (correlation key, first_at, last_at) of
/// `cluster`: the latest-updated anchored in the span, as `failures_effective` picks it. Each span
/// reads only its own lifecycles (`failure_lifecycle_anchor_idx`), never the rest of its key's history.
pub async fn in_force_for_spans(
    conn: &mut PgConnection,
    cluster: &str,
    keys: &[String],
    starts: &[DateTime<Utc>],
    ends: &[DateTime<Utc>],
) -> Result<Vec<SpanLifecycleRow>, sqlx::Error> {
    sqlx::query_as!(
        SpanLifecycleRow,
        r#"SELECT k.n AS "n!", l.failure_id, l.resolved_at, l.resolution, l.detection_minutes, l.resubmission_minutes,
                  l.setup_minutes, l.recomputation_minutes, l.pm_category, l.pm_component, l.note, l.updated_at, l.updated_by
           FROM UNNEST($2::text[], $3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS k(key, s, e, n)
           CROSS JOIN LATERAL (
               SELECT * FROM failure_lifecycle l
               WHERE l.cluster = $1 AND l.correlation_key = k.key AND l.anchor_at BETWEEN k.s AND k.e
               ORDER BY l.updated_at DESC, l.failure_id
               LIMIT 1
           ) l"#,
        cluster,
        keys,
        starts,
        ends,
    )
    .fetch_all(conn)
    .await
}

/// New states of lifecycles of one cluster, as columns (one row per lifecycle id).
#[derive(Debug, Default)]
pub struct LifecycleColumns {
    pub id: Vec<Uuid>,
    pub correlation_key: Vec<String>,
    pub anchor_at: Vec<DateTime<Utc>>,
    pub resolved_at: Vec<Option<DateTime<Utc>>>,
    pub resolution: Vec<Option<String>>,
    pub detection_minutes: Vec<Option<f64>>,
    pub resubmission_minutes: Vec<Option<f64>>,
    pub setup_minutes: Vec<Option<f64>>,
    pub recomputation_minutes: Vec<Option<f64>>,
    pub pm_category: Vec<Option<String>>,
    pub pm_component: Vec<Option<String>>,
    pub note: Vec<Option<String>>,
}

impl LifecycleColumns {
    /// Adds lifecycle `id` (anchored at `f`'s first signal when it is new) in state `l`.
    pub fn push(&mut self, id: Uuid, f: &FailureAnchor, l: &Lifecycle) {
        self.id.push(id);
        self.correlation_key.push(f.correlation_key.clone());
        self.anchor_at.push(f.first_at);
        self.resolved_at.push(l.resolved_at);
        self.resolution.push(l.resolution.map(|r| r.as_str().to_string()));
        self.detection_minutes.push(l.detection_minutes);
        self.resubmission_minutes.push(l.resubmission_minutes);
        self.setup_minutes.push(l.setup_minutes);
        self.recomputation_minutes.push(l.recomputation_minutes);
        self.pm_category
            .push(l.post_mortem.map(|r| r.category.as_str().to_string()));
        self.pm_component
            .push(l.post_mortem.map(|r| r.component.as_str().to_string()));
        self.note.push(l.note.clone());
    }
}

/// Writes the new states of lifecycles of `cluster` (one statement; rows in the given order, which
/// the caller keeps sorted by id so concurrent writers lock them in the same order).
pub async fn save_many(
    conn: &mut PgConnection,
    cluster: &str,
    c: &LifecycleColumns,
    by: &str,
) -> Result<(), sqlx::Error> {
    if c.id.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO failure_lifecycle (failure_id, cluster, correlation_key, anchor_at, resolved_at, resolution, detection_minutes,
                                        resubmission_minutes, setup_minutes, recomputation_minutes, pm_category, pm_component,
                                        note, updated_by)
         SELECT u.id, $1, u.correlation_key, u.anchor_at, u.resolved_at, u.resolution, u.detection_minutes, u.resubmission_minutes,
                u.setup_minutes, u.recomputation_minutes, u.pm_category, u.pm_component, u.note, $14
         FROM UNNEST($2::uuid[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::text[], $7::float8[], $8::float8[],
                     $9::float8[], $10::float8[], $11::text[], $12::text[], $13::text[])
              AS u(id, correlation_key, anchor_at, resolved_at, resolution, detection_minutes, resubmission_minutes,
                   setup_minutes, recomputation_minutes, pm_category, pm_component, note)
         ON CONFLICT (cluster, failure_id) DO UPDATE SET
             resolved_at = EXCLUDED.resolved_at, resolution = EXCLUDED.resolution,
             detection_minutes = EXCLUDED.detection_minutes, resubmission_minutes = EXCLUDED.resubmission_minutes,
             setup_minutes = EXCLUDED.setup_minutes, recomputation_minutes = EXCLUDED.recomputation_minutes,
             pm_category = EXCLUDED.pm_category, pm_component = EXCLUDED.pm_component, note = EXCLUDED.note,
             updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by",
        cluster,
        &c.id,
        &c.correlation_key,
        &c.anchor_at,
        &c.resolved_at as &[Option<DateTime<Utc>>],
        &c.resolution as &[Option<String>],
        &c.detection_minutes as &[Option<f64>],
        &c.resubmission_minutes as &[Option<f64>],
        &c.setup_minutes as &[Option<f64>],
        &c.recomputation_minutes as &[Option<f64>],
        &c.pm_category as &[Option<String>],
        &c.pm_component as &[Option<String>],
        &c.note as &[Option<String>],
        by,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Appends history entries of lifecycles of `cluster`, in the given order (which their ids keep).
pub async fn insert_changes(
    conn: &mut PgConnection,
    cluster: &str,
    lifecycle_ids: &[Uuid],
    changes: &[serde_json::Value],
    by: &str,
) -> Result<(), sqlx::Error> {
    if lifecycle_ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO failure_lifecycle_changes (cluster, failure_id, changed_by, changes)
         SELECT $1, u.id, $4, u.changes FROM UNNEST($2::uuid[], $3::jsonb[]) WITH ORDINALITY AS u(id, changes, n) ORDER BY u.n",
        cluster,
        lifecycle_ids,
        changes,
        by,
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
    /// The failure a drain was recorded with (API only).
    pub failure_id: Option<Uuid>,
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
             SELECT cluster, hostname, state, at, reason, 'api' AS source, failure_id FROM node_state_changes
             WHERE at < $2 AND ($3::text IS NULL OR cluster = $3) AND ($4::text IS NULL OR hostname = $4)
             UNION ALL
             SELECT cluster, node, CASE kind WHEN 'node_drain' THEN 'drained' ELSE 'returned' END, occurred_at, message, 'event',
                    NULL::uuid
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
                source AS "source!", failure_id FROM before
         UNION ALL SELECT cluster, hostname, state, at, reason, source, failure_id FROM t WHERE at >= $1
         ORDER BY 1, 2, 4, 3"#,
        from,
        to,
        cluster,
        hostname,
    )
    .fetch_all(db)
    .await
}
