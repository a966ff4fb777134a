//! The free-text lexicon (`classification_terms`), versioned with the rules by `catalog_state`.

use sqlx::PgConnection;

/// A lexicon term as stored.
#[derive(Debug, Clone)]
pub struct TermRow {
    pub term: String,
    pub kind: String,
    pub category: String,
    pub component: String,
    pub weight: f64,
    pub source: String,
    pub builtin: bool,
}

/// Every term, by term.
pub async fn terms(conn: &mut PgConnection) -> Result<Vec<TermRow>, sqlx::Error> {
    sqlx::query_as!(
        TermRow,
        "SELECT term, kind, category, component, weight, source, builtin FROM classification_terms ORDER BY term",
    )
    .fetch_all(&mut *conn)
    .await
}

/// Inserts or replaces a term.
pub async fn upsert_term(conn: &mut PgConnection, t: &TermRow, by: &str) -> Result<bool, sqlx::Error> {
    sqlx::query!(
        "INSERT INTO classification_terms (term, kind, category, component, weight, source, builtin, updated_by)
         VALUES ($1, $2, $3, $4, $5, $6, false, $7)
         ON CONFLICT (term) DO UPDATE SET kind = EXCLUDED.kind, category = EXCLUDED.category,
             component = EXCLUDED.component, weight = EXCLUDED.weight, source = EXCLUDED.source,
             builtin = false, updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by",
        &t.term,
        &t.kind,
        &t.category,
        &t.component,
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
