//! The classification rule catalog and its version.

use std::sync::Arc;

use sqlx::PgConnection;
use tokio::sync::RwLock;

use crate::classify::{Catalog, Rule, Severity};
use crate::domain::taxonomy::{Category, Component};

/// The last catalog loaded, shared by the handlers; reloaded when the stored version moves.
pub type CatalogCache = Arc<RwLock<Arc<Catalog>>>;

#[derive(sqlx::FromRow)]
struct RuleRow {
    rule_id: String,
    kind: String,
    code: Option<i64>,
    pattern: Option<String>,
    priority: i32,
    category: String,
    component: String,
    severity: String,
    transient: bool,
    secondary: bool,
    action: String,
    description: String,
    source: String,
    builtin: bool,
}

impl RuleRow {
    fn into_rule(self) -> Rule {
        Rule {
            category: Category::parse(&self.category).unwrap_or(Category::Unknown),
            component: Component::parse(&self.component).unwrap_or(Component::Unknown),
            severity: Severity::parse(&self.severity).unwrap_or(Severity::Medium),
            rule_id: self.rule_id,
            kind: self.kind,
            code: self.code,
            pattern: self.pattern,
            priority: self.priority,
            transient: self.transient,
            secondary: self.secondary,
            action: self.action,
            description: self.description,
            source: self.source,
            builtin: self.builtin,
        }
    }
}

pub async fn load_rules(conn: &mut PgConnection) -> Result<Vec<Rule>, sqlx::Error> {
    let rows: Vec<RuleRow> = sqlx::query_as!(
        RuleRow,
        "SELECT rule_id, kind, code, pattern, priority, category, component, severity, transient, secondary,
                action, description, source, builtin
         FROM classification_rules ORDER BY kind, priority DESC, rule_id",
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows.into_iter().map(RuleRow::into_rule).collect())
}

/// Takes the catalog version FOR SHARE (a concurrent rule change waits for this transaction, and
/// this one for it) and returns the matching catalog, from the cache when it is current.
pub async fn lock_shared(conn: &mut PgConnection, cache: &CatalogCache) -> Result<Arc<Catalog>, sqlx::Error> {
    let version: i64 = sqlx::query_scalar!("SELECT version FROM catalog_state FOR SHARE")
        .fetch_one(&mut *conn)
        .await?;
    current(conn, cache, version).await
}

/// Takes the catalog version row FOR UPDATE without changing it: for writes that change what
/// the fold reads besides signals (job records), so no ingest folds half before and half after.
pub async fn lock_exclusive(conn: &mut PgConnection, cache: &CatalogCache) -> Result<Arc<Catalog>, sqlx::Error> {
    let version: i64 = sqlx::query_scalar!("SELECT version FROM catalog_state FOR UPDATE")
        .fetch_one(&mut *conn)
        .await?;
    current(conn, cache, version).await
}

async fn current(conn: &mut PgConnection, cache: &CatalogCache, version: i64) -> Result<Arc<Catalog>, sqlx::Error> {
    {
        let cached = cache.read().await;
        if cached.version == version && !cached.is_empty() {
            return Ok(cached.clone());
        }
    }
    let catalog = Arc::new(load_catalog(conn, version).await?);
    *cache.write().await = catalog.clone();
    Ok(catalog)
}

/// The rules and the lexicon as one catalog of `version`.
pub async fn load_catalog(conn: &mut PgConnection, version: i64) -> Result<Catalog, sqlx::Error> {
    let rules = load_rules(conn).await?;
    let terms = super::lexicon::load_terms(conn).await?;
    Ok(Catalog::with_lexicon(version, rules, terms))
}

/// Bumps the version, holding the row lock until commit: ingest waits, then sees the new rules.
pub async fn bump_version(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!("UPDATE catalog_state SET version = version + 1 RETURNING version")
        .fetch_one(&mut *conn)
        .await
}

pub async fn version(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!("SELECT version FROM catalog_state")
        .fetch_one(&mut *conn)
        .await
}

/// Inserts or replaces a rule. Returns true when it replaced an existing one.
pub async fn upsert_rule(conn: &mut PgConnection, r: &Rule, by: &str) -> Result<bool, sqlx::Error> {
    let existed = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM classification_rules WHERE rule_id = $1) AS "existed!""#,
        &r.rule_id,
    )
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO classification_rules (rule_id, kind, code, pattern, priority, category, component, severity,
                                           transient, secondary, action, description, source, builtin, updated_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, false, $14)
         ON CONFLICT (rule_id) DO UPDATE SET kind = EXCLUDED.kind, code = EXCLUDED.code, pattern = EXCLUDED.pattern,
             priority = EXCLUDED.priority, category = EXCLUDED.category, component = EXCLUDED.component,
             severity = EXCLUDED.severity, transient = EXCLUDED.transient, secondary = EXCLUDED.secondary,
             action = EXCLUDED.action, description = EXCLUDED.description, source = EXCLUDED.source,
             builtin = false, updated_at = now(), updated_by = EXCLUDED.updated_by",
        &r.rule_id,
        &r.kind,
        r.code,
        r.pattern.as_deref(),
        r.priority,
        r.category.as_str(),
        r.component.as_str(),
        r.severity.as_str(),
        r.transient,
        r.secondary,
        &r.action,
        &r.description,
        &r.source,
        by,
    )
    .execute(&mut *conn)
    .await?;
    Ok(existed)
}

pub async fn delete_rule(conn: &mut PgConnection, rule_id: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM classification_rules WHERE rule_id = $1", rule_id,)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}
