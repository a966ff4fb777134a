//! Editing the classification catalog: the edit and the rebuild of every failure run in one
//! transaction that holds the catalog version row, so ingest waits for it and then sees the new
//! rules, and no analysis ever mixes two versions.

use std::sync::Arc;

use chrono::Duration;
use sqlx::PgPool;

use super::refold;
use crate::classify::{Catalog, Rule};
use crate::storage;
use crate::storage::catalog::CatalogCache;

/// One change to the rule catalog.
pub enum RuleEdit {
    /// Create or replace a rule, by the named caller.
    Upsert {
        rule: Rule,
        by: String,
    },
    Delete {
        rule_id: String,
    },
}

/// The catalog after an edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebuilt {
    pub catalog_version: i64,
    /// Failures after the rebuild.
    pub failures: usize,
}

/// Applies `edit` and rebuilds every failure; None when the edit changed nothing (rolled back).
pub async fn edit(
    db: &PgPool,
    cache: &CatalogCache,
    window: Duration,
    edit: RuleEdit,
) -> Result<Option<Rebuilt>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let catalog_version = storage::catalog::bump_version(&mut tx).await?;
    let changed = match &edit {
        RuleEdit::Upsert { rule, by } => storage::catalog::upsert_rule(&mut tx, rule, by).await?,
        RuleEdit::Delete { rule_id } => storage::catalog::delete_rule(&mut tx, rule_id).await?,
    };
    if !changed {
        return Ok(None);
    }
    let catalog = Arc::new(Catalog::new(
        catalog_version,
        storage::catalog::load_rules(&mut tx).await?,
    ));
    let failures = refold::rebuild_all(&mut tx, &catalog, window).await?;
    tx.commit().await?;
    *cache.write().await = catalog;
    Ok(Some(Rebuilt {
        catalog_version,
        failures,
    }))
}
