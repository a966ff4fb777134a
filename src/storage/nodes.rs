use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use crate::domain::node::Node;

/// Upserts in one statement (UNNEST arrays), never row by row. `in_service_since` absent keeps
/// the earlier value; `retired_at` is replaced (PUT semantics). Moves the inventory's version in
/// the caller's transaction: this is the one write to `nodes`, and readers reload the inventory
/// when the version moves.
pub async fn upsert(conn: &mut PgConnection, nodes: &[Node]) -> Result<u64, sqlx::Error> {
    if nodes.is_empty() {
        return Ok(0);
    }
    let col = |f: fn(&Node) -> String| nodes.iter().map(f).collect::<Vec<_>>();
    let opt = |f: fn(&Node) -> Option<String>| nodes.iter().map(f).collect::<Vec<_>>();
    let time = |f: fn(&Node) -> Option<DateTime<Utc>>| nodes.iter().map(f).collect::<Vec<_>>();
    let done = sqlx::query!(
        "INSERT INTO nodes (cluster, hostname, gpu_model, gpu_generation, gpu_count, group_label, rack,
                            in_service_since, retired_at)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[],
                              $8::timestamptz[], $9::timestamptz[])
         ON CONFLICT (cluster, hostname) DO UPDATE SET
             gpu_model = EXCLUDED.gpu_model,
             gpu_generation = EXCLUDED.gpu_generation,
             gpu_count = EXCLUDED.gpu_count,
             group_label = EXCLUDED.group_label,
             rack = EXCLUDED.rack,
             in_service_since = COALESCE(EXCLUDED.in_service_since, nodes.in_service_since),
             retired_at = EXCLUDED.retired_at,
             updated_at = EXCLUDED.updated_at",
        &col(|n| n.cluster.clone()),
        &col(|n| n.hostname.clone()),
        &col(|n| n.gpu_model.clone()),
        &col(|n| n.gpu_generation.as_str().to_string()),
        &nodes.iter().map(|n| n.gpu_count).collect::<Vec<i32>>(),
        &opt(|n| n.group.clone()) as &[Option<String>],
        &opt(|n| n.rack.clone()) as &[Option<String>],
        &time(|n| n.in_service_since) as &[Option<DateTime<Utc>>],
        &time(|n| n.retired_at) as &[Option<DateTime<Utc>>],
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("UPDATE inventory_state SET version = version + 1")
        .execute(conn)
        .await?;
    Ok(done.rows_affected())
}

#[derive(Debug, sqlx::FromRow)]
pub struct NodeRow {
    pub cluster: String,
    pub hostname: String,
    pub gpu_model: String,
    pub gpu_generation: String,
    pub gpu_count: i32,
    pub group_label: Option<String>,
    pub rack: Option<String>,
    pub in_service_since: DateTime<Utc>,
    pub retired_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Default)]
pub struct NodeFilter {
    pub cluster: Option<String>,
    pub generation: Option<String>,
    pub group: Option<String>,
    pub rack: Option<String>,
    pub gpu_model: Option<String>,
    /// Keyset cursor: rows strictly after (cluster, hostname).
    pub after: Option<(String, String)>,
    pub limit: i64,
}

pub async fn list(db: &PgPool, f: &NodeFilter) -> Result<Vec<NodeRow>, sqlx::Error> {
    let (after_cluster, after_host) = f.after.clone().unzip();
    sqlx::query_as!(
        NodeRow,
        "SELECT cluster, hostname, gpu_model, gpu_generation, gpu_count, group_label, rack,
                COALESCE(in_service_since, first_registered_at) AS \"in_service_since!\", retired_at, updated_at
         FROM nodes
         WHERE ($1::text IS NULL OR cluster = $1)
           AND ($2::text IS NULL OR gpu_generation = $2)
           AND ($3::text IS NULL OR group_label = $3)
           AND ($4::text IS NULL OR rack = $4)
           AND ($5::text IS NULL OR gpu_model = $5)
           AND ($6::text IS NULL OR (cluster, hostname) > ($6, $7))
         ORDER BY cluster, hostname
         LIMIT $8",
        f.cluster.as_deref(),
        f.generation.as_deref(),
        f.group.as_deref(),
        f.rack.as_deref(),
        f.gpu_model.as_deref(),
        after_cluster,
        after_host,
        f.limit,
    )
    .fetch_all(db)
    .await
}

/// Clusters of the inventory (for the dashboard's picker).
pub async fn clusters(db: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT DISTINCT cluster FROM nodes ORDER BY 1",)
        .fetch_all(db)
        .await
}

/// A node's service interval and size, as the exposure of the analytics needs it.
#[derive(Debug)]
pub struct ServiceRow {
    pub cluster: String,
    pub hostname: String,
    pub gpu_model: String,
    pub gpu_generation: String,
    pub gpu_count: i32,
    pub group_label: Option<String>,
    pub in_service_since: DateTime<Utc>,
    pub retired_at: Option<DateTime<Utc>>,
}

pub async fn service_periods(db: &PgPool, cluster: Option<&str>) -> Result<Vec<ServiceRow>, sqlx::Error> {
    sqlx::query_as!(
        ServiceRow,
        r#"SELECT cluster, hostname, gpu_model, gpu_generation, gpu_count, group_label,
                  COALESCE(in_service_since, first_registered_at) AS "in_service_since!", retired_at
           FROM nodes WHERE ($1::text IS NULL OR cluster = $1)"#,
        cluster,
    )
    .fetch_all(db)
    .await
}

/// The inventory's version: moves with every write to `nodes` ([`upsert`]).
pub async fn inventory_version(db: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!("SELECT version FROM inventory_state")
        .fetch_one(db)
        .await
}

/// A node's labels, for grouping by where a part served.
#[derive(Debug, Clone)]
pub struct NodeLabels {
    pub cluster: String,
    pub hostname: String,
    pub rack: Option<String>,
    pub group_label: Option<String>,
}

/// Every node's labels (all clusters).
pub async fn labels(db: &PgPool) -> Result<Vec<NodeLabels>, sqlx::Error> {
    sqlx::query_as!(NodeLabels, "SELECT cluster, hostname, rack, group_label FROM nodes")
        .fetch_all(db)
        .await
}
