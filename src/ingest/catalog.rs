//! The classification catalog as the engine uses it: loaded from its rows (rules and lexicon),
//! cached per version, locked for a transaction, and edited: an edit commits a new catalog version
//! at once (under the catalog lock, held exclusively for the edit only), so the next ingest batch
//! folds with the new rules, and records the rebuild of the existing failures, which runs in the
//! background (`super::rebuild`).

use std::sync::Arc;

use sqlx::{PgConnection, PgPool};

use tokio::sync::RwLock;

use crate::classify::text::{Term, TermKind};
use crate::classify::{Catalog, Rule, Severity};
use crate::domain::audit::{Actor, AuditAction};
use crate::domain::taxonomy::{Category, Component};
use crate::storage;
use crate::storage::catalog::RuleRow;
use crate::storage::lexicon::TermRow;

/// One change to the classification catalog (rules and lexicon terms).
pub enum RuleEdit {
    /// Create or replace a rule, by the named caller.
    Upsert {
        rule: Rule,
        by: String,
    },
    Delete {
        rule_id: String,
    },
    /// Create or replace a lexicon term of the free-text classifier.
    UpsertTerm {
        term: Term,
        by: String,
    },
    DeleteTerm {
        term: String,
    },
}

/// The catalog after an edit: its new version, which is also the id of the rebuild it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edited {
    pub catalog_version: i64,
}

impl RuleEdit {
    /// The audit log's action, target and details of this edit.
    fn audit_entry(&self) -> (AuditAction, String, serde_json::Value) {
        match self {
            RuleEdit::Upsert { rule, .. } => (
                AuditAction::RuleUpsert,
                rule.rule_id.clone(),
                serde_json::json!({ "rule": rule }),
            ),
            RuleEdit::Delete { rule_id } => (AuditAction::RuleDelete, rule_id.clone(), serde_json::json!({})),
            RuleEdit::UpsertTerm { term, .. } => (
                AuditAction::TermUpsert,
                term.term.clone(),
                serde_json::json!({ "term": term }),
            ),
            RuleEdit::DeleteTerm { term } => (AuditAction::TermDelete, term.clone(), serde_json::json!({})),
        }
    }
}

/// Applies `edit` and records the rebuild of the failures under the new version (it runs in the
/// background); None when the edit changed nothing (rolled back). The edit is audited (by
/// `actor`, with the new catalog version) in the same transaction.
pub async fn edit(
    db: &PgPool,
    cache: &CatalogCache,
    actor: &Actor,
    edit: RuleEdit,
) -> Result<Option<Edited>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let catalog_version = storage::catalog::bump_version(&mut tx).await?;
    let changed = match &edit {
        // An upsert always changes the catalog; `upsert_rule`'s answer says whether it replaced
        // a rule (treating "new" as "nothing to change" answered 409 to every new rule).
        RuleEdit::Upsert { rule, by } => {
            storage::catalog::upsert_rule(&mut tx, &rule_row(rule), by).await?;
            true
        }
        RuleEdit::Delete { rule_id } => storage::catalog::delete_rule(&mut tx, rule_id).await?,
        RuleEdit::UpsertTerm { term, by } => storage::lexicon::upsert_term(&mut tx, &term_row(term), by).await?,
        RuleEdit::DeleteTerm { term } => storage::lexicon::delete_term(&mut tx, term).await?,
    };
    if !changed {
        return Ok(None);
    }
    let catalog = Arc::new(load_catalog(&mut tx, catalog_version).await?);
    storage::rebuilds::start(&mut tx, catalog_version).await?;
    let (action, target, mut details) = edit.audit_entry();
    details["catalog_version"] = catalog_version.into();
    super::audit::record(&mut tx, actor, action, &target, details).await?;
    tx.commit().await?;
    *cache.write().await = catalog;
    Ok(Some(Edited { catalog_version }))
}

/// The last catalog loaded, shared by the handlers; reloaded when the stored version moves.
pub type CatalogCache = Arc<RwLock<Arc<Catalog>>>;

/// Takes the catalog lock shared (a concurrent catalog change waits for this transaction,
/// and this one for it) and returns the matching catalog, from the cache when it is current.
pub async fn lock_shared(conn: &mut PgConnection, cache: &CatalogCache) -> Result<Arc<Catalog>, sqlx::Error> {
    let version = storage::catalog::version_for_share(conn).await?;
    current(conn, cache, version).await
}

/// Takes the catalog lock exclusively without changing the version: for writes that change what
/// the fold reads besides signals (job records), so no ingest folds half before and half after.
pub async fn lock_exclusive(conn: &mut PgConnection, cache: &CatalogCache) -> Result<Arc<Catalog>, sqlx::Error> {
    let version = storage::catalog::version_for_update(conn).await?;
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
    let terms = load_terms(conn).await?;
    Ok(Catalog::with_lexicon(version, rules, terms))
}

/// Every rule, by kind, priority (highest first) and id.
pub async fn load_rules(conn: &mut PgConnection) -> Result<Vec<Rule>, sqlx::Error> {
    Ok(storage::catalog::rules(conn).await?.into_iter().map(rule).collect())
}

/// Every lexicon term, by term. A row the code cannot read (edited by hand) is skipped.
pub async fn load_terms(conn: &mut PgConnection) -> Result<Vec<Term>, sqlx::Error> {
    Ok(storage::lexicon::terms(conn)
        .await?
        .into_iter()
        .filter_map(term)
        .collect())
}

fn rule(r: RuleRow) -> Rule {
    Rule {
        category: Category::parse(&r.category).unwrap_or(Category::Unknown),
        component: Component::parse(&r.component).unwrap_or(Component::Unknown),
        severity: Severity::parse(&r.severity).unwrap_or(Severity::Medium),
        rule_id: r.rule_id,
        kind: r.kind,
        code: r.code,
        pattern: r.pattern,
        priority: r.priority,
        transient: r.transient,
        secondary: r.secondary,
        action: r.action,
        description: r.description,
        source: r.source,
        builtin: r.builtin,
    }
}

fn rule_row(r: &Rule) -> RuleRow {
    RuleRow {
        rule_id: r.rule_id.clone(),
        kind: r.kind.clone(),
        code: r.code,
        pattern: r.pattern.clone(),
        priority: r.priority,
        category: r.category.as_str().into(),
        component: r.component.as_str().into(),
        severity: r.severity.as_str().into(),
        transient: r.transient,
        secondary: r.secondary,
        action: r.action.clone(),
        description: r.description.clone(),
        source: r.source.clone(),
        builtin: r.builtin,
    }
}

fn term(t: TermRow) -> Option<Term> {
    Some(Term {
        term: t.term,
        kind: TermKind::parse(&t.kind)?,
        category: Category::parse(&t.category)?,
        component: Component::parse(&t.component)?,
        weight: t.weight,
        source: t.source,
        builtin: t.builtin,
    })
}

fn term_row(t: &Term) -> TermRow {
    TermRow {
        term: t.term.clone(),
        kind: t.kind.as_str().into(),
        category: t.category.as_str().into(),
        component: t.component.as_str().into(),
        weight: t.weight,
        source: t.source.clone(),
        builtin: t.builtin,
    }
}
