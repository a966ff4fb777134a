//! Storage: all SQL lives here, one module per table family. No HTTP types.
pub mod alerts;
pub mod audit;
pub mod availability;
pub mod catalog;
pub mod decisions;
pub mod distribution;
pub mod events;
pub mod failure_queries;
pub mod failure_stats;
pub mod failures;
pub mod gpus;
pub mod jobs;
pub mod lexicon;
pub mod lifecycle;
pub mod locks;
pub mod migration_checksums;
pub mod nodes;
pub mod partitions;
pub mod rebuilds;
pub mod rollups;
pub mod signal_stats;
pub mod sync_cursors;
pub mod tokens;

use sqlx::PgPool;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs the migrations, after accepting the reworded comments of released ones
/// ([`migration_checksums`]), then keeps a Citus database distributed as the plan says
/// ([`distribution`]): a no-op on plain Postgres.
pub async fn migrate(db: &PgPool) -> Result<distribution::Distribution, sqlx::migrate::MigrateError> {
    migration_checksums::adopt_reworded(db).await?;
    MIGRATOR.run(db).await?;
    Ok(distribution::distribute(db).await?)
}
