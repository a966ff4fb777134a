//! Finding or starting PostgreSQL: a URL, a local server, or a private cluster of our own.
pub mod database;
pub mod embedded_pg;
pub mod pool;
