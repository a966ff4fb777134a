//! Transaction-scoped advisory locks on hashed stripes (see `crate::ingest::locks`).

use sqlx::PgConnection;

/// Locks (namespace, stripe) for the distinct stripes of `keys`, in ascending stripe order. The
/// hash is Postgres's own, so every instance of the service maps a key to the same stripe.
pub async fn lock_stripes(
    conn: &mut PgConnection,
    namespace: i32,
    stripes: i32,
    keys: &[String],
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "SELECT count(pg_advisory_xact_lock($1, s))
         FROM (SELECT DISTINCT (((hashtextextended(k, 0) % $2) + $2) % $2)::int AS s
               FROM UNNEST($3::text[]) AS k ORDER BY s) AS stripes",
    )
    .bind(namespace)
    .bind(i64::from(stripes))
    .bind(keys)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
