//! Reading the audit log: one page, newest first, with a cursor for the next.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::audit::AuditAction;
use crate::storage;

/// One audited action.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditEntry {
    pub id: i64,
    /// When the action's transaction started (it committed with this row).
    pub at: DateTime<Utc>,
    pub action: AuditAction,
    /// Id of the token that acted; null for the configured admin token (FAULTLINE_ADMIN_TOKEN).
    pub actor_token_id: Option<Uuid>,
    /// Name of that token (`admin` for the configured one).
    pub actor_name: String,
    /// What was acted on: a token id, rule id, lexicon term or failure id.
    pub target: String,
    /// What changed: the token's name, role, cluster and expiry; the rule or term as stored;
    /// a lifecycle's `{"field": {"from", "to"}}`; for catalog edits the new `catalog_version`
    /// (also the id of the rebuild it started).
    #[schema(value_type = Object)]
    pub details: serde_json::Value,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    /// Pass as `cursor` for the next (older) page; absent on the last page.
    pub next_cursor: Option<String>,
}

pub struct AuditSelection<'a> {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub action: Option<AuditAction>,
    pub actor: Option<&'a str>,
    /// Entries older than this id (the previous page's cursor).
    pub before: Option<i64>,
    pub limit: i64,
}

pub async fn page(db: &PgPool, s: &AuditSelection<'_>) -> Result<AuditPage, sqlx::Error> {
    let filter = storage::audit::AuditFilter {
        from: s.from,
        to: s.to,
        action: s.action.map(AuditAction::as_str),
        actor: s.actor,
        before: s.before,
        limit: s.limit + 1,
    };
    let mut rows = storage::audit::list(db, &filter).await?;
    let next_cursor = if rows.len() as i64 > s.limit {
        rows.truncate(s.limit as usize);
        rows.last().map(|r| r.id.to_string())
    } else {
        None
    };
    let entries = rows
        .into_iter()
        .filter_map(|r| {
            Some(AuditEntry {
                id: r.id,
                at: r.at,
                // The column is CHECKed to the same closed set.
                action: AuditAction::parse(&r.action)?,
                actor_token_id: r.actor_token_id,
                actor_name: r.actor_name,
                target: r.target,
                details: r.details,
            })
        })
        .collect();
    Ok(AuditPage { entries, next_cursor })
}
