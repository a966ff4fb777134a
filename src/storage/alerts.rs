//! Alert rules, alert state, the notification outbox and its delivery records, the evaluation
//! lease, and when each node last sent (migration 0027).

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct RuleRow {
    pub id: String,
    pub version: i64,
    pub spec: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Creates the rule or replaces its spec under the next version; the stored row. Unchanged specs
/// of a live rule are left alone (None).
pub async fn upsert_rule(
    conn: &mut PgConnection,
    id: &str,
    spec: &serde_json::Value,
    now: DateTime<Utc>,
) -> Result<Option<RuleRow>, sqlx::Error> {
    sqlx::query_as!(
        RuleRow,
        r#"INSERT INTO alert_rules (id, version, spec, created_at, updated_at, deleted_at)
           VALUES ($1, 1, $2, $3, $3, NULL)
           ON CONFLICT (id) DO UPDATE
             SET version = alert_rules.version + 1, spec = EXCLUDED.spec, updated_at = EXCLUDED.updated_at,
                 deleted_at = NULL,
                 created_at = CASE WHEN alert_rules.deleted_at IS NULL THEN alert_rules.created_at
                                   ELSE EXCLUDED.created_at END
             WHERE alert_rules.deleted_at IS NOT NULL OR alert_rules.spec <> EXCLUDED.spec
           RETURNING id, version, spec, created_at, updated_at"#,
        id,
        spec,
        now,
    )
    .fetch_optional(conn)
    .await
}

/// Marks the rule deleted (its alerts keep its name); None when there is no live rule `id`.
pub async fn delete_rule(
    conn: &mut PgConnection,
    id: &str,
    now: DateTime<Utc>,
) -> Result<Option<RuleRow>, sqlx::Error> {
    sqlx::query_as!(
        RuleRow,
        r#"UPDATE alert_rules SET deleted_at = $2, version = version + 1, updated_at = $2
           WHERE id = $1 AND deleted_at IS NULL
           RETURNING id, version, spec, created_at, updated_at"#,
        id,
        now,
    )
    .fetch_optional(conn)
    .await
}

pub async fn rules(db: &PgPool) -> Result<Vec<RuleRow>, sqlx::Error> {
    sqlx::query_as!(
        RuleRow,
        "SELECT id, version, spec, created_at, updated_at FROM alert_rules WHERE deleted_at IS NULL ORDER BY id"
    )
    .fetch_all(db)
    .await
}

/// Every rule, deleted ones too (`deleted`): their firing alerts resolve at the next evaluation.
pub async fn rules_to_evaluate(db: &PgPool) -> Result<Vec<(RuleRow, bool)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id, version, spec, created_at, updated_at, deleted_at IS NOT NULL AS "deleted!"
           FROM alert_rules ORDER BY id"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                RuleRow {
                    id: r.id,
                    version: r.version,
                    spec: r.spec,
                    created_at: r.created_at,
                    updated_at: r.updated_at,
                },
                r.deleted,
            )
        })
        .collect())
}

/// Clusters where `rule_id` has a firing alert.
pub async fn firing_clusters(db: &PgPool, rule_id: &str) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT DISTINCT cluster FROM alerts WHERE rule_id = $1 AND state = 'firing' ORDER BY cluster",
        rule_id
    )
    .fetch_all(db)
    .await
}

pub async fn rule(db: &PgPool, id: &str) -> Result<Option<RuleRow>, sqlx::Error> {
    sqlx::query_as!(
        RuleRow,
        "SELECT id, version, spec, created_at, updated_at FROM alert_rules WHERE id = $1 AND deleted_at IS NULL",
        id,
    )
    .fetch_optional(db)
    .await
}

/// Every cluster that has an inventory or has sent a signal or heartbeat.
pub async fn clusters(db: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    let rows = sqlx::query_scalar!(
        r#"SELECT cluster AS "cluster!" FROM nodes UNION SELECT cluster FROM node_last_seen ORDER BY 1"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows)
}

/// An alert's stored state.
#[derive(Debug, Clone)]
pub struct AlertRow {
    pub cluster: String,
    pub fingerprint: String,
    pub rule_id: String,
    pub rule_version: i64,
    pub subject: String,
    pub state: String,
    pub value: Option<f64>,
    pub labels: serde_json::Value,
    pub annotations: serde_json::Value,
    pub starts_at: DateTime<Utc>,
    pub ends_at: Option<DateTime<Utc>>,
    pub last_notified_at: DateTime<Utc>,
    pub evaluated_at: DateTime<Utc>,
    pub notifications: i64,
}

/// The alerts of one rule in one cluster (firing and resolved).
pub async fn alerts_of_rule(db: &PgPool, cluster: &str, rule_id: &str) -> Result<Vec<AlertRow>, sqlx::Error> {
    sqlx::query_as!(
        AlertRow,
        "SELECT cluster, fingerprint, rule_id, rule_version, subject, state, value, labels, annotations, starts_at,
                ends_at, last_notified_at, evaluated_at, notifications
         FROM alerts WHERE cluster = $1 AND rule_id = $2",
        cluster,
        rule_id,
    )
    .fetch_all(db)
    .await
}

/// A firing alert as a re-send to Alertmanager needs it.
#[derive(Debug, Clone)]
pub struct FiringAlert {
    pub cluster: String,
    pub rule_id: String,
    pub labels: serde_json::Value,
    pub annotations: serde_json::Value,
    pub starts_at: DateTime<Utc>,
}

/// Every firing alert, by rule.
pub async fn firing(db: &PgPool) -> Result<Vec<FiringAlert>, sqlx::Error> {
    sqlx::query_as!(
        FiringAlert,
        "SELECT cluster, rule_id, labels, annotations, starts_at FROM alerts WHERE state = 'firing'
         ORDER BY rule_id, cluster, fingerprint"
    )
    .fetch_all(db)
    .await
}

pub struct AlertFilter<'a> {
    pub cluster: Option<&'a str>,
    pub state: Option<&'a str>,
    pub rule_id: Option<&'a str>,
    /// Resolved alerts ended before this are left out.
    pub resolved_since: DateTime<Utc>,
    pub limit: i64,
}

/// Firing alerts and those resolved since `resolved_since`, firing first, newest first.
pub async fn list(db: &PgPool, f: &AlertFilter<'_>) -> Result<Vec<AlertRow>, sqlx::Error> {
    sqlx::query_as!(
        AlertRow,
        "SELECT cluster, fingerprint, rule_id, rule_version, subject, state, value, labels, annotations, starts_at,
                ends_at, last_notified_at, evaluated_at, notifications
         FROM alerts
         WHERE ($1::text IS NULL OR cluster = $1) AND ($2::text IS NULL OR state = $2)
           AND ($3::text IS NULL OR rule_id = $3) AND (state = 'firing' OR ends_at >= $4)
         ORDER BY state = 'firing' DESC, starts_at DESC, fingerprint
         LIMIT $5",
        f.cluster,
        f.state,
        f.rule_id,
        f.resolved_since,
        f.limit,
    )
    .fetch_all(db)
    .await
}

pub async fn find(db: &PgPool, cluster: Option<&str>, fingerprint: &str) -> Result<Option<AlertRow>, sqlx::Error> {
    sqlx::query_as!(
        AlertRow,
        "SELECT cluster, fingerprint, rule_id, rule_version, subject, state, value, labels, annotations, starts_at,
                ends_at, last_notified_at, evaluated_at, notifications
         FROM alerts WHERE fingerprint = $1 AND ($2::text IS NULL OR cluster = $2)",
        fingerprint,
        cluster,
    )
    .fetch_optional(db)
    .await
}

/// New or changed alert states of one cluster, one statement. `notified[i]`: row i notifies
/// (its `notifications` count grows by one and `last_notified_at` is set). Returns each
/// fingerprint with its notification count after the change (the new notification's `seq`).
pub struct AlertColumns {
    pub fingerprint: Vec<String>,
    pub rule_id: Vec<String>,
    pub rule_version: Vec<i64>,
    pub subject: Vec<String>,
    pub state: Vec<String>,
    pub value: Vec<Option<f64>>,
    pub labels: Vec<serde_json::Value>,
    pub annotations: Vec<serde_json::Value>,
    pub starts_at: Vec<DateTime<Utc>>,
    pub ends_at: Vec<Option<DateTime<Utc>>>,
    pub notified: Vec<bool>,
}

pub async fn upsert_alerts(
    conn: &mut PgConnection,
    cluster: &str,
    c: &AlertColumns,
    now: DateTime<Utc>,
) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"INSERT INTO alerts AS a (cluster, fingerprint, rule_id, rule_version, subject, state, value, labels,
                             annotations, starts_at, ends_at, last_notified_at, evaluated_at, notifications)
           SELECT $1, u.fingerprint, u.rule_id, u.rule_version, u.subject, u.state, u.value, u.labels, u.annotations,
                  u.starts_at, u.ends_at, $12, $12, CASE WHEN u.notified THEN 1 ELSE 0 END
           FROM UNNEST($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::float8[], $8::jsonb[],
                       $9::jsonb[], $10::timestamptz[], $11::timestamptz[], $13::bool[])
                AS u(fingerprint, rule_id, rule_version, subject, state, value, labels, annotations, starts_at,
                     ends_at, notified)
           ORDER BY u.fingerprint
           ON CONFLICT (cluster, fingerprint) DO UPDATE SET
             rule_version = EXCLUDED.rule_version, state = EXCLUDED.state, value = EXCLUDED.value,
             labels = EXCLUDED.labels, annotations = EXCLUDED.annotations, starts_at = EXCLUDED.starts_at,
             ends_at = EXCLUDED.ends_at, evaluated_at = EXCLUDED.evaluated_at,
             last_notified_at = CASE WHEN EXCLUDED.notifications > 0 THEN EXCLUDED.last_notified_at
                                     ELSE a.last_notified_at END,
             notifications = a.notifications + EXCLUDED.notifications
           RETURNING fingerprint, notifications"#,
        cluster,
        &c.fingerprint,
        &c.rule_id,
        &c.rule_version,
        &c.subject,
        &c.state,
        &c.value as &[Option<f64>],
        &c.labels,
        &c.annotations,
        &c.starts_at,
        &c.ends_at as &[Option<DateTime<Utc>>],
        now,
        &c.notified,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.fingerprint, r.notifications)).collect())
}

/// Outbox rows of one cluster, written with the state change.
#[derive(Default)]
pub struct OutboxColumns {
    pub id: Vec<Uuid>,
    pub fingerprint: Vec<String>,
    pub seq: Vec<i64>,
    pub receiver: Vec<i32>,
    pub receiver_kind: Vec<String>,
    pub url: Vec<String>,
    pub secret: Vec<Option<String>>,
    pub event: Vec<String>,
    pub payload: Vec<serde_json::Value>,
}

pub async fn insert_outbox(
    conn: &mut PgConnection,
    cluster: &str,
    c: &OutboxColumns,
    now: DateTime<Utc>,
) -> Result<u64, sqlx::Error> {
    if c.id.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query!(
        "INSERT INTO alert_outbox (cluster, id, fingerprint, seq, receiver, receiver_kind, url, secret, event, payload,
                                   created_at, state, attempts, next_attempt_at)
         SELECT $1, u.id, u.fingerprint, u.seq, u.receiver, u.receiver_kind, u.url, u.secret, u.event, u.payload,
                $11, 'pending', 0, $11
         FROM UNNEST($2::uuid[], $3::text[], $4::bigint[], $5::int[], $6::text[], $7::text[], $8::text[], $9::text[],
                     $10::jsonb[]) AS u(id, fingerprint, seq, receiver, receiver_kind, url, secret, event, payload)",
        cluster,
        &c.id,
        &c.fingerprint,
        &c.seq,
        &c.receiver,
        &c.receiver_kind,
        &c.url,
        &c.secret as &[Option<String>],
        &c.event,
        &c.payload,
        now,
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

#[derive(Debug, Clone)]
pub struct OutboxRow {
    pub cluster: String,
    pub id: Uuid,
    pub fingerprint: String,
    pub seq: i64,
    pub receiver: i32,
    pub receiver_kind: String,
    pub url: String,
    pub secret: Option<String>,
    pub event: String,
    pub payload: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub attempts: i32,
}

/// Pending rows due at `now` that are first in their alert's order for their receiver (an
/// earlier notification of the same alert still pending holds the later ones back), oldest first,
/// leaving out the receivers (URLs) in `busy`: a receiver still working on its last batch must not
/// fill this one.
pub async fn due(db: &PgPool, now: DateTime<Utc>, limit: i64, busy: &[String]) -> Result<Vec<OutboxRow>, sqlx::Error> {
    sqlx::query_as!(
        OutboxRow,
        "SELECT o.cluster, o.id, o.fingerprint, o.seq, o.receiver, o.receiver_kind, o.url, o.secret, o.event,
                o.payload, o.created_at, o.attempts
         FROM alert_outbox o
         WHERE o.state = 'pending' AND o.next_attempt_at <= $1 AND NOT (o.url = ANY($3))
           AND NOT EXISTS (SELECT 1 FROM alert_outbox p
                           WHERE p.cluster = o.cluster AND p.fingerprint = o.fingerprint
                             AND p.receiver = o.receiver AND p.state = 'pending' AND p.seq < o.seq)
         ORDER BY o.created_at, o.seq, o.receiver
         LIMIT $2",
        now,
        limit,
        busy,
    )
    .fetch_all(db)
    .await
}

/// One attempt's result: the outbox row's new state and its delivery record, together.
pub struct Attempt<'a> {
    pub row: &'a OutboxRow,
    pub attempt: i32,
    pub at: DateTime<Utc>,
    pub status_code: Option<i32>,
    /// delivered, retry, rejected, expired.
    pub outcome: &'a str,
    pub error: Option<&'a str>,
    /// When a `retry` is due.
    pub next_attempt_at: DateTime<Utc>,
}

/// The lease a delivery was sent under: its attempt is recorded only while it is still held.
pub struct Fence<'a> {
    pub lease: &'a str,
    pub holder: &'a str,
    pub epoch: i64,
}

/// Whether `fence` still holds its lease, locking the lease row (shared) until the end of the
/// transaction: a takeover waits for what this transaction writes, then sees it.
pub async fn lease_held(conn: &mut PgConnection, fence: &Fence<'_>) -> Result<bool, sqlx::Error> {
    let held = sqlx::query_scalar!(
        "SELECT epoch FROM alert_lease WHERE name = $1 AND holder = $2 FOR SHARE",
        fence.lease,
        fence.holder,
    )
    .fetch_optional(conn)
    .await?;
    Ok(held == Some(fence.epoch))
}

/// Records the attempt unless `fence` no longer holds the lease (or the row is no longer pending):
/// whether it was recorded. The lease row is locked (shared) until the commit, so a takeover waits
/// for the record and then sees it.
pub async fn record_attempt(db: &PgPool, a: &Attempt<'_>, fence: &Fence<'_>) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    if !lease_held(&mut tx, fence).await? {
        return Ok(false);
    }
    let state = if a.outcome == "retry" { "pending" } else { a.outcome };
    let updated = sqlx::query!(
        "UPDATE alert_outbox SET state = $3, attempts = $4, next_attempt_at = $5
         WHERE cluster = $1 AND id = $2 AND state = 'pending'",
        a.row.cluster,
        a.row.id,
        state,
        a.attempt,
        a.next_attempt_at,
    )
    .execute(&mut *tx)
    .await?;
    if updated.rows_affected() != 1 {
        return Ok(false);
    }
    sqlx::query!(
        "INSERT INTO alert_deliveries (cluster, id, outbox_id, fingerprint, seq, receiver, receiver_kind, event, attempt,
                                       attempted_at, status_code, outcome, error)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        a.row.cluster,
        Uuid::new_v4(),
        a.row.id,
        a.row.fingerprint,
        a.row.seq,
        a.row.receiver,
        a.row.receiver_kind,
        a.row.event,
        a.attempt,
        a.at,
        a.status_code,
        a.outcome,
        a.error,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

#[derive(Debug, Clone)]
pub struct DeliveryRow {
    pub outbox_id: Uuid,
    pub seq: i64,
    pub receiver: i32,
    pub receiver_kind: String,
    pub event: String,
    pub attempt: i32,
    pub attempted_at: DateTime<Utc>,
    pub status_code: Option<i32>,
    pub outcome: String,
    pub error: Option<String>,
}

pub async fn deliveries(
    db: &PgPool,
    cluster: &str,
    fingerprint: &str,
    limit: i64,
) -> Result<Vec<DeliveryRow>, sqlx::Error> {
    sqlx::query_as!(
        DeliveryRow,
        "SELECT outbox_id, seq, receiver, receiver_kind, event, attempt, attempted_at, status_code, outcome, error
         FROM alert_deliveries WHERE cluster = $1 AND fingerprint = $2
         ORDER BY attempted_at, seq, receiver, attempt LIMIT $3",
        cluster,
        fingerprint,
        limit,
    )
    .fetch_all(db)
    .await
}

/// Notifications still waiting to be delivered, per alert (for the list).
pub async fn pending_count(db: &PgPool, cluster: &str, fingerprint: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM alert_outbox WHERE cluster = $1 AND fingerprint = $2 AND state = 'pending'"#,
        cluster,
        fingerprint,
    )
    .fetch_one(db)
    .await
}

/// Takes or renews the lease `name` for `holder` until `until` when it is free, expired or
/// already this holder's; its epoch when `holder` holds it now (None: another does). The epoch
/// grows when the holder changes. The row is there from the migration.
pub async fn take_lease(
    db: &PgPool,
    name: &str,
    holder: &str,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar!(
        "UPDATE alert_lease
         SET epoch = CASE WHEN holder IS NOT DISTINCT FROM $2 THEN epoch ELSE epoch + 1 END,
             holder = $2, expires_at = $4
         WHERE name = $1 AND (holder = $2 OR holder IS NULL OR expires_at < $3)
         RETURNING epoch",
        name,
        holder,
        now,
        until,
    )
    .fetch_optional(db)
    .await
}

/// Gives the lease back (at shutdown), so another instance takes it at once.
pub async fn release_lease(db: &PgPool, name: &str, holder: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE alert_lease SET holder = NULL WHERE name = $1 AND holder = $2",
        name,
        holder
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Records that node `hostname[i]` of `cluster[i]` sent at `at[i]` (the signal's own time; a later
/// time already stored stays). Sorted keys: concurrent batches take the rows in one order.
pub async fn seen(
    conn: &mut PgConnection,
    cluster: &[String],
    hostname: &[String],
    at: &[DateTime<Utc>],
) -> Result<(), sqlx::Error> {
    if cluster.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO node_last_seen AS s (cluster, hostname, last_seen_at)
         SELECT u.cluster, u.hostname, u.at
         FROM UNNEST($1::text[], $2::text[], $3::timestamptz[]) AS u(cluster, hostname, at)
         ORDER BY u.cluster, u.hostname
         ON CONFLICT (cluster, hostname) DO UPDATE
           SET last_seen_at = GREATEST(s.last_seen_at, EXCLUDED.last_seen_at)",
        cluster,
        hostname,
        at,
    )
    .execute(conn)
    .await?;
    Ok(())
}

pub struct LastSeen {
    pub hostname: String,
    pub last_seen_at: DateTime<Utc>,
}

/// When each node the silence rule watches in `cluster` last sent: nodes of the inventory not
/// retired at `now` that have sent at least once. A retired node, or one the inventory does not
/// list, is expected to be quiet.
pub async fn watched_last_seen(db: &PgPool, cluster: &str, now: DateTime<Utc>) -> Result<Vec<LastSeen>, sqlx::Error> {
    sqlx::query_as!(
        LastSeen,
        "SELECT s.hostname, s.last_seen_at
         FROM node_last_seen s
         JOIN nodes n ON n.cluster = s.cluster AND n.hostname = s.hostname
         WHERE s.cluster = $1 AND (n.retired_at IS NULL OR n.retired_at > $2)
         ORDER BY s.hostname",
        cluster,
        now,
    )
    .fetch_all(db)
    .await
}

/// A failure kind (signal kind and code) seen in the cluster since `since`, with the last day it
/// was seen before `since` (None: never), from the daily error rollup.
pub struct KindSeen {
    pub kind: String,
    pub code: String,
    pub first_recent: NaiveDate,
    pub last_before: Option<NaiveDate>,
}

pub async fn kinds_seen_since(db: &PgPool, cluster: &str, since: NaiveDate) -> Result<Vec<KindSeen>, sqlx::Error> {
    sqlx::query_as!(
        KindSeen,
        r#"SELECT kind, code, min(bucket) FILTER (WHERE bucket >= $2) AS "first_recent!",
                  max(bucket) FILTER (WHERE bucket < $2) AS last_before
           FROM rollup_errors
           WHERE period = 'day' AND cluster = $1 AND (root_failures > 0 OR holding_failures > 0)
           GROUP BY kind, code
           HAVING bool_or(bucket >= $2)
           ORDER BY kind, code"#,
        cluster,
        since,
    )
    .fetch_all(db)
    .await
}
