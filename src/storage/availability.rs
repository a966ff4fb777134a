//! The node state ledger's sources beyond drains (`lifecycle::transitions`), the inventory
//! (`nodes::service_periods`) and failures (`failure_stats::latest_before`): the alerts that say a
//! node is silent or degraded, and the GPU removals (failed, RMA) with the placement that refilled
//! their slot.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// An alert of a silence (node scope), lemon-node or bad-part-or-slot rule.
#[derive(Debug, Clone)]
pub struct StateAlert {
    pub cluster: String,
    /// The rule's condition kind: silence | lemon_node | bad_part_or_slot.
    pub kind: String,
    /// The node (silence, lemon_node) or `slot:<node>/<index>` / `part:<id>` (bad_part_or_slot).
    pub subject: String,
    pub starts_at: DateTime<Utc>,
    /// None while firing.
    pub ends_at: Option<DateTime<Utc>>,
}

/// The alerts of those kinds overlapping [from, to).
pub async fn state_alerts(
    db: &PgPool,
    cluster: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<StateAlert>, sqlx::Error> {
    sqlx::query_as!(
        StateAlert,
        r#"SELECT a.cluster, r.spec->'condition'->>'kind' AS "kind!", a.subject, a.starts_at,
                  CASE WHEN a.state = 'firing' THEN NULL ELSE a.ends_at END AS "ends_at?"
           FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
           WHERE ($1::text IS NULL OR a.cluster = $1)
             AND a.starts_at < $3 AND (a.state = 'firing' OR a.ends_at IS NULL OR a.ends_at > $2)
             AND (r.spec->'condition'->>'kind' IN ('lemon_node', 'bad_part_or_slot')
                  OR (r.spec->'condition'->>'kind' = 'silence'
                      AND COALESCE(r.spec->'condition'->>'scope', 'node') = 'node'))
           ORDER BY a.cluster, a.subject, a.starts_at"#,
        cluster,
        from,
        to,
    )
    .fetch_all(db)
    .await
}

/// A GPU removed failed or for RMA from a node's slot, and when a part was next installed in that
/// slot (None while empty).
#[derive(Debug, Clone)]
pub struct Repair {
    pub cluster: String,
    pub hostname: String,
    pub gpu_index: Option<i32>,
    pub part: String,
    /// failed | rma
    pub reason: String,
    pub removed_at: DateTime<Utc>,
    pub refilled_at: Option<DateTime<Utc>>,
    pub ticket: Option<String>,
}

/// Removals before `to` whose slot was not refilled before `from`.
pub async fn repairs(
    db: &PgPool,
    cluster: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<Repair>, sqlx::Error> {
    sqlx::query_as!(
        Repair,
        r#"SELECT p.cluster, p.hostname, p.gpu_index, p.part, p.end_reason AS "reason!",
                  p.removed_at AS "removed_at!", n.installed_at AS "refilled_at?", rm.ticket AS "ticket?"
           FROM gpu_placements p
           LEFT JOIN LATERAL (
               SELECT q.installed_at FROM gpu_placements q
               WHERE q.cluster = p.cluster AND q.hostname = p.hostname
                 AND q.gpu_index IS NOT DISTINCT FROM p.gpu_index AND q.installed_at >= p.removed_at
               ORDER BY q.installed_at LIMIT 1
           ) n ON true
           LEFT JOIN gpu_removals rm ON rm.cluster = p.cluster AND rm.part = p.part AND rm.removed_at = p.removed_at
           WHERE p.end_reason IN ('failed', 'rma') AND p.removed_at < $3
             AND ($1::text IS NULL OR p.cluster = $1)
             AND (n.installed_at IS NULL OR n.installed_at > $2)
           ORDER BY p.cluster, p.hostname, p.removed_at"#,
        cluster,
        from,
        to,
    )
    .fetch_all(db)
    .await
}

/// A pending row remap signalled on a node (`row_remap` with status `pending` from the logs, or the
/// agent's `remapped_rows_pending` counter turning on).
#[derive(Debug, Clone)]
pub struct PendingRemap {
    pub cluster: String,
    pub hostname: String,
    pub at: DateTime<Utc>,
}

/// Pending row remaps signalled before `to` (index on (kind, occurred_at) of both event tables).
pub async fn pending_remaps(
    db: &PgPool,
    cluster: Option<&str>,
    to: DateTime<Utc>,
) -> Result<Vec<PendingRemap>, sqlx::Error> {
    sqlx::query_as!(
        PendingRemap,
        r#"SELECT cluster AS "cluster!", node AS "hostname!", occurred_at AS "at!"
           FROM (SELECT cluster, node, occurred_at, attributes FROM events
                 WHERE kind = 'row_remap' AND occurred_at < $2
                 UNION ALL
                 SELECT cluster, node, occurred_at, attributes FROM events_archive
                 WHERE kind = 'row_remap' AND occurred_at < $2) AS e
           WHERE node IS NOT NULL AND ($1::text IS NULL OR cluster = $1)
             AND (attributes->>'status' = 'pending' OR attributes->>'counter' = 'remapped_rows_pending')
           ORDER BY 1, 2, 3"#,
        cluster,
        to,
    )
    .fetch_all(db)
    .await
}
