//! Finding a database: DATABASE_URL, else localhost:5432, else a private cluster (embedded_pg),
//! and making sure the `faultline` database exists on the chosen server.

use std::path::Path;

use anyhow::Context;
use sqlx::PgPool;

use crate::embedded_pg::{self, DatabaseServer};

pub const DEFAULT_DATABASE: &str = "faultline";

/// A connected, migrated pool and the server behind it (kept so a private cluster can be stopped).
pub struct Database {
    pub pool: PgPool,
    pub server: DatabaseServer,
}

pub async fn open(explicit_url: Option<&str>, data_dir: &Path) -> anyhow::Result<Database> {
    let server = embedded_pg::resolve(explicit_url, data_dir).await?;
    let url = match &server {
        // An explicit URL names its database; use it as it is.
        DatabaseServer::External { url } if explicit_url.is_some() => url.clone(),
        other => {
            ensure_database(other.url(), DEFAULT_DATABASE).await?;
            format!("{}/{DEFAULT_DATABASE}", other.url().trim_end_matches('/'))
        }
    };
    let pool = crate::storage::connect(&url).await.with_context(|| format!("connecting to {}", redact(&url)))?;
    crate::storage::migrate(&pool).await.context("running migrations")?;
    Ok(Database { pool, server })
}

/// Creates `name` on the server unless it exists. `server_url` has no database path.
pub async fn ensure_database(server_url: &str, name: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let admin_url = format!("{}/postgres", server_url.trim_end_matches('/'));
    let mut conn = sqlx::PgConnection::connect(&admin_url).await.with_context(|| format!("connecting to {}", redact(&admin_url)))?;
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(name)
        .fetch_one(&mut conn)
        .await?;
    if !exists {
        // Identifiers can't be bound; `name` is ours (alphanumeric and '_'), quoted anyway.
        let sql = format!("CREATE DATABASE \"{}\"", name.replace('"', ""));
        match sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await {
            Ok(_) => {}
            // A concurrent creator won the race: fine.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P04") => {}
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
    #[test]
    fn passwords_are_redacted() {
        assert_eq!(super::redact("postgres://u:secret@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(super::redact("postgres://u@h/db"), "postgres://u@h/db");
    }
}
