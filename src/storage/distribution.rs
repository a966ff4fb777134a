//! Distribution on Citus: which table is sharded by `cluster`, which is a reference table, and the
//! idempotent step that makes the database say so. It runs after every migration, so a database
//! that has the `citus` extension stays distributed as the schema grows (a table a migration adds
//! must be named here: `tests/api/distribution.rs` fails otherwise).
//!
//! These statements call Citus' own functions, which a plain Postgres (where the offline query data
//! is prepared) does not have: they are checked at run time, not compile time.

use sqlx::{PgConnection, PgPool};

/// Fleet-wide tables, replicated to every worker so that joins to them stay local: the inventory,
/// the classification catalog, tokens, retention, the audit log and the inventory's version, catalog rebuilds.
pub const REFERENCE_TABLES: &[&str] = &[
    "nodes",
    "classification_rules",
    "classification_terms",
    "catalog_state",
    "api_tokens",
    "signal_retention",
    "audit_log",
    "inventory_state",
    "catalog_rebuilds",
    "alert_rules",
    "alert_lease",
];

/// Per-cluster tables, sharded by `cluster` and co-located with `events`, in the order they are
/// distributed (a table after the tables its foreign keys name).
pub const DISTRIBUTED_TABLES: &[&str] = &[
    "events",
    "event_ids",
    "events_archive",
    "failures",
    "failure_lifecycle",
    "failure_lifecycle_changes",
    "jobs",
    "job_node_runs",
    "node_state_changes",
    "rollup_causes",
    "rollup_groups",
    "rollup_errors",
    "rollup_versions",
    "gpu_parts",
    "gpu_placements",
    "gpu_removals",
    "gpu_part_versions",
    "sync_cursors",
    "alerts",
    "alert_outbox",
    "alert_deliveries",
    "node_last_seen",
];

/// Tables that are Faultline's bookkeeping, not data: they stay on the coordinator.
pub const LOCAL_TABLES: &[&str] = &["_sqlx_migrations"];

/// The distribution column of every per-cluster table.
pub const DISTRIBUTION_COLUMN: &str = "cluster";

/// What [`distribute`] found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Distribution {
    /// Whether the database has the `citus` extension (nothing else is done without it).
    pub citus: bool,
    /// Tables this call distributed or made reference tables (empty when all already were).
    pub changed: Vec<String>,
    /// Shards per distributed table (`citus.shard_count` when they were created).
    pub shard_count: Option<i64>,
}

/// Whether the database has the `citus` extension.
pub async fn citus_installed(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS "installed!""#)
        .fetch_one(conn)
        .await
}

/// `CREATE EXTENSION citus` (the server must preload the library: `shared_preload_libraries`).
pub async fn create_citus_extension(db: &PgPool) -> Result<(), sqlx::Error> {
    sqlx::query!("CREATE EXTENSION IF NOT EXISTS citus").execute(db).await?;
    Ok(())
}

/// Makes this database the coordinator of the same database on `workers` ((host, port) as the
/// coordinator reaches them), with `coordinator` its own address as the workers reach it. The
/// extension must be in every one of them.
pub async fn add_workers(
    conn: &mut PgConnection,
    coordinator: (&str, i32),
    workers: &[(String, i32)],
) -> Result<(), sqlx::Error> {
    let (hosts, ports): (Vec<&str>, Vec<i32>) = workers.iter().map(|(h, p)| (h.as_str(), *p)).unzip();
    sqlx::query(
        "SELECT citus_set_coordinator_host($1, $2),
                (SELECT count(citus_add_node(h, p)) FROM UNNEST($3::text[], $4::int[]) AS w(h, p))",
    )
    .bind(coordinator.0)
    .bind(coordinator.1)
    .bind(&hosts)
    .bind(&ports)
    .execute(conn)
    .await?;
    Ok(())
}

/// On a database with the `citus` extension, makes every table of the plan what the plan says
/// (reference tables first, then `events` and the tables co-located with it), moves rows that were
/// there before into the shards, and propagates Faultline's functions to the workers. Does nothing
/// on plain Postgres, and nothing where everything already is distributed. Serialised across
/// instances by an advisory lock (several may start at once).
pub async fn distribute(db: &PgPool) -> Result<Distribution, sqlx::Error> {
    let mut conn = db.acquire().await?;
    if !citus_installed(&mut conn).await? {
        return Ok(Distribution::default());
    }
    // Held on the coordinator for this session: the other instances wait, then find nothing to do.
    sqlx::query!("SELECT pg_advisory_lock(1179385859, 2)")
        .fetch_one(&mut *conn)
        .await?;
    let result = distribute_locked(&mut conn).await;
    sqlx::query!("SELECT pg_advisory_unlock(1179385859, 2)")
        .fetch_one(&mut *conn)
        .await?;
    result
}

async fn distribute_locked(conn: &mut PgConnection) -> Result<Distribution, sqlx::Error> {
    let mut done = Distribution {
        citus: true,
        ..Distribution::default()
    };
    // Tables whose rows were copied into shards: their local copies are emptied once every table
    // is distributed (a local table's foreign key would refuse it before).
    let mut copied: Vec<&str> = Vec::new();
    let placed: Vec<String> = citus_tables(conn).await?.into_iter().map(|(t, _)| t).collect();
    let is_citus_table = |table: &str| placed.iter().any(|t| t == table);
    for table in REFERENCE_TABLES {
        if !is_citus_table(table) {
            let had_rows = has_rows(conn, table).await?;
            sqlx::query("SELECT create_reference_table($1::regclass)")
                .bind(table)
                .execute(&mut *conn)
                .await?;
            if had_rows {
                copied.push(table);
            }
            done.changed.push((*table).to_string());
        }
    }
    for (i, table) in DISTRIBUTED_TABLES.iter().enumerate() {
        if !is_citus_table(table) {
            let colocate_with = if i == 0 { "default" } else { DISTRIBUTED_TABLES[0] };
            let had_rows = has_rows(conn, table).await?;
            sqlx::query("SELECT create_distributed_table($1::regclass, $2, colocate_with => $3)")
                .bind(table)
                .bind(DISTRIBUTION_COLUMN)
                .bind(colocate_with)
                .execute(&mut *conn)
                .await?;
            if had_rows {
                copied.push(table);
            }
            done.changed.push((*table).to_string());
        }
    }
    for table in copied.iter().rev() {
        truncate_local_data(conn, table).await?;
    }
    // Functions the shards call (rollups, job attribution, partitions) must exist on every
    // worker; those created before the extension was are not there yet.
    sqlx::query(
        "SELECT count(create_distributed_function(p.oid::regprocedure)) FROM pg_proc p
         WHERE p.pronamespace = 'public'::regnamespace
           AND NOT EXISTS (SELECT 1 FROM pg_extension e JOIN pg_depend d ON d.refobjid = e.oid
                           WHERE d.objid = p.oid AND d.deptype = 'e')
           AND NOT EXISTS (SELECT 1 FROM pg_dist_object o
                           WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)",
    )
    .execute(&mut *conn)
    .await?;
    done.shard_count = citus_tables(conn)
        .await?
        .into_iter()
        .find(|(t, _)| t == DISTRIBUTED_TABLES[0])
        .map(|(_, shards)| shards);
    Ok(done)
}

/// The tables Citus knows (distributed or reference), each with its number of shards.
async fn citus_tables(conn: &mut PgConnection) -> Result<Vec<(String, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT p.logicalrelid::regclass::text,
                (SELECT count(*) FROM pg_dist_shard s WHERE s.logicalrelid = p.logicalrelid)
         FROM pg_dist_partition p",
    )
    .fetch_all(conn)
    .await
}

/// Whether a table not yet distributed holds rows (in itself or, for `events`, its partitions).
async fn has_rows(conn: &mut PgConnection, table: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT EXISTS (SELECT 1 FROM {} LIMIT 1)",
        quote_ident(table)
    )))
    .fetch_one(conn)
    .await
}

/// Distributing a table copies its rows into the shards and leaves them in the coordinator's
/// local table, where no query reads them again: removed, so they take no space.
async fn truncate_local_data(conn: &mut PgConnection, table: &str) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT truncate_local_data_after_distributing_table($1::regclass)")
        .bind(table)
        .execute(conn)
        .await?;
    Ok(())
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
