//! Monthly partitions of `events` (migration 0013): created ahead and on demand,
//! dropped past retention. The DDL lives in SQL functions so it runs under their lock bounds.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// Creates the missing partitions for the months of `[from, to)`; returns how many it created.
pub async fn ensure_range(db: &PgPool, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT faultline_ensure_partitions($1, $2) AS "created!""#, from, to)
        .fetch_one(db)
        .await
}

/// Makes sure a partition holds each of `months` (any instant of the month), also one before the
/// retention horizon (the next retention pass drops it again), and returns that horizon (None
/// before retention dropped anything). Runs outside any transaction, so it holds no lock while a
/// creation waits.
pub async fn ensure_months(db: &PgPool, months: &[DateTime<Utc>]) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT (SELECT count(faultline_ensure_partitions(m, m + interval '1 microsecond'))
                   FROM UNNEST($1::timestamptz[]) AS m) AS "checked!",
                  (SELECT NULLIF(retained_from, '-infinity') FROM signal_retention) AS horizon"#,
        months,
    )
    .fetch_one(db)
    .await?;
    Ok(row.horizon)
}

/// Where retained signals begin (None before retention dropped anything): the ledger no longer
/// holds the ids of older signals.
pub async fn horizon(db: &PgPool) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT NULLIF(retained_from, '-infinity') AS horizon FROM signal_retention"#)
        .fetch_one(db)
        .await
}

/// Drops the partitions that end at or before `cutoff`; returns how many (the ledger loses their ids).
pub async fn drop_before(db: &PgPool, cutoff: DateTime<Utc>) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT faultline_drop_partitions_before($1) AS "dropped!""#, cutoff)
        .fetch_one(db)
        .await
}
