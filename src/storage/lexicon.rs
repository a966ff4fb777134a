//! The free-text lexicon (`classification_terms`), versioned with the rules by `catalog_state`.

use sqlx::PgConnection;

use crate::classify::text::{Term, TermKind};
use crate::domain::taxonomy::{Category, Component};

#[derive(sqlx::FromRow)]
struct TermRow {
    term: String,
    kind: String,
    category: String,
    component: String,
    weight: f64,
    source: String,
    builtin: bool,
}

impl TermRow {
    fn into_term(self) -> Option<Term> {
        Some(Term {
            term: self.term,
            kind: TermKind::parse(&self.kind)?,
            category: Category::parse(&self.category)?,
            component: Component::parse(&self.component)?,
            weight: self.weight,
            source: self.source,
            builtin: self.builtin,
        })
    }
}

/// Every term, by term. A row the code cannot read (edited by hand) is skipped.
pub async fn load_terms(conn: &mut PgConnection) -> Result<Vec<Term>, sqlx::Error> {
    let rows: Vec<TermRow> = sqlx::query_as!(
        TermRow,
        "SELECT term, kind, category, component, weight, source, builtin FROM classification_terms ORDER BY term",
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows.into_iter().filter_map(TermRow::into_term).collect())
}

/// Inserts or replaces a term.
pub async fn upsert_term(conn: &mut PgConnection, t: &Term, by: &str) -> Result<bool, sqlx::Error> {
    sqlx::query!(
        "INSERT INTO classification_terms (term, kind, category, component, weight, source, builtin, updated_by)
         VALUES ($1, $2, $3, $4, $5, $6, false, $7)
         ON CONFLICT (term) DO UPDATE SET kind = EXCLUDED.kind, category = EXCLUDED.category,
             component = EXCLUDED.component, weight = EXCLUDED.weight, source = EXCLUDED.source,
             builtin = false, updated_at = now(), updated_by = EXCLUDED.updated_by",
        &t.term,
        t.kind.as_str(),
        t.category.as_str(),
        t.component.as_str(),
        t.weight,
        &t.source,
        by,
    )
    .execute(&mut *conn)
    .await?;
    Ok(true)
}

pub async fn delete_term(conn: &mut PgConnection, term: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM classification_terms WHERE term = $1", term,)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}
