//! Finding a database: DATABASE_URL, else localhost:5432, else a private cluster (embedded_pg),
//! and making sure the `faultline` database exists on the chosen server.

use std::path::Path;

use anyhow::Context;
use sqlx::PgPool;

use crate::app::edge::PoolSettings;
use crate::db::embedded_pg::{self, DatabaseServer};

pub const DEFAULT_DATABASE: &str = "faultline";

/// A connected, migrated pool and the server behind it (kept so a private cluster can be stopped).
pub struct Database {
    pub pool: PgPool,
    pub server: DatabaseServer,
}

pub async fn open(explicit_url: Option<&str>, data_dir: &Path) -> anyhow::Result<Database> {
    open_with(explicit_url, data_dir, &PoolSettings::default()).await
}

/// [`open`] with the pool sized and timed by `pool`.
pub async fn open_with(explicit_url: Option<&str>, data_dir: &Path, pool: &PoolSettings) -> anyhow::Result<Database> {
    let server = embedded_pg::resolve(explicit_url, data_dir).await?;
    let url = match &server {
        // An explicit URL names its database; use it as it is.
        DatabaseServer::External { url } if explicit_url.is_some() => url.clone(),
        other => {
            ensure_database(other.url(), DEFAULT_DATABASE).await?;
            with_database(other.url(), DEFAULT_DATABASE)
        }
    };
    let pool = crate::db::pool::connect(&url, pool)
        .await
        .with_context(|| format!("connecting to {}", redact(&url)))?;
    crate::storage::migrate(&pool).await.context("running migrations")?;
    Ok(Database { pool, server })
}

/// The read-replica pool when `url` names one (empty counts as unset), sized and timed like the
/// primary's. It must answer at start, as the primary must; it is not migrated (a standby is read-only
/// and receives the primary's schema through replication).
pub async fn open_replica(url: Option<&str>, pool: &PoolSettings) -> anyhow::Result<Option<PgPool>> {
    let Some(url) = url.filter(|url| !url.is_empty()) else {
        return Ok(None);
    };
    let replica = crate::db::pool::connect(url, pool)
        .await
        .with_context(|| format!("connecting to the read replica {}", redact(url)))?;
    Ok(Some(replica))
}

/// Creates `name` on the server unless it exists. `server_url` has no database path.
pub async fn ensure_database(server_url: &str, name: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let admin_url = with_database(server_url, "postgres");
    let mut conn = sqlx::PgConnection::connect(&admin_url)
        .await
        .with_context(|| format!("connecting to {}", redact(&admin_url)))?;
    // Runtime SQL here: these statements run against the server's maintenance database before any
    // migration, and CREATE DATABASE takes an identifier, which cannot be a bound parameter.
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(name)
        .fetch_one(&mut conn)
        .await?;
    if !exists {
        // Identifiers can't be bound; `name` is ours (alphanumeric and '_'), quoted anyway.
        let sql = format!("CREATE DATABASE \"{}\"", name.replace('"', ""));
        match sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await {
            Ok(_) => {}
            // A concurrent creator won the race: fine. Postgres reports it as "already exists" or,
            // when both passed the existence check at once, as a unique violation on pg_database.
            Err(sqlx::Error::Database(e)) if matches!(e.code().as_deref(), Some("42P04" | "23505")) => {}
            Err(e) => return Err(e.into()),
        }
    }
    conn.close().await?;
    Ok(())
}

/// Hides a password in a URL for logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn no_or_an_empty_replica_url_means_no_replica() {
        let settings = crate::app::edge::PoolSettings::default();
        assert!(super::open_replica(None, &settings).await.unwrap().is_none());
        assert!(super::open_replica(Some(""), &settings).await.unwrap().is_none());
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            super::redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(super::redact("postgres://u@h/db"), "postgres://u@h/db");
    }
}

/// The same server URL pointing at database `name` (query parameters kept).
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let server = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{server}/{name}?{q}"),
        None => format!("{server}/{name}"),
    }
}

#[cfg(test)]
mod url_tests {
    #[test]
    fn database_is_swapped_and_query_kept() {
        use super::with_database;
        assert_eq!(with_database("postgres://u@h:5432/test", "x"), "postgres://u@h:5432/x");
        assert_eq!(with_database("postgres://u@h:5432", "x"), "postgres://u@h:5432/x");
        assert_eq!(
            with_database("postgres://u@h/db?sslmode=disable", "x"),
            "postgres://u@h/x?sslmode=disable"
        );
    }
}
