//! Alert rule edits (audited, versioned) and heartbeats: the writes of alerting. Evaluation and
//! delivery live in `crate::alerting`.

use chrono::Utc;
use sqlx::PgPool;

use super::audit;
use crate::domain::alert::RuleSpec;
use crate::domain::audit::{Actor, AuditAction};
use crate::storage;
use crate::storage::alerts::RuleRow;

/// Stores `spec` as rule `id` (a new version when it changes); None when it is stored exactly so.
pub async fn put_alert_rule(
    db: &PgPool,
    actor: &Actor,
    id: &str,
    spec: &RuleSpec,
) -> Result<Option<RuleRow>, sqlx::Error> {
    let body = serde_json::to_value(spec).unwrap_or_default();
    let mut tx = db.begin().await?;
    let Some(row) = storage::alerts::upsert_rule(&mut tx, id, &body, Utc::now()).await? else {
        return Ok(None);
    };
    // The audit row keeps each version's body, secrets left out.
    let mut audited = spec.clone();
    for r in &mut audited.receivers {
        r.secret = r.secret.as_ref().map(|_| "(set)".to_string());
    }
    let details = serde_json::json!({"version": row.version, "spec": audited});
    audit::record(&mut tx, actor, AuditAction::AlertRuleUpsert, id, details).await?;
    tx.commit().await?;
    Ok(Some(row))
}

/// Deletes rule `id` (its firing alerts resolve at the next evaluation); None when there is none.
pub async fn delete_alert_rule(db: &PgPool, actor: &Actor, id: &str) -> Result<Option<RuleRow>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let Some(row) = storage::alerts::delete_rule(&mut tx, id, Utc::now()).await? else {
        return Ok(None);
    };
    let details = serde_json::json!({"version": row.version});
    audit::record(&mut tx, actor, AuditAction::AlertRuleDelete, id, details).await?;
    tx.commit().await?;
    Ok(Some(row))
}

/// Records that `nodes` of `cluster` are alive now; how many distinct nodes.
pub async fn heartbeats(db: &PgPool, cluster: &str, mut nodes: Vec<String>) -> Result<usize, sqlx::Error> {
    nodes.sort();
    nodes.dedup();
    let clusters = vec![cluster.to_string(); nodes.len()];
    let times = vec![Utc::now(); nodes.len()];
    let mut tx = db.begin().await?;
    storage::alerts::seen(&mut tx, &clusters, &nodes, &times).await?;
    tx.commit().await?;
    Ok(nodes.len())
}
