//! GPU parts, their placements in node slots and their removals (migration 0024); and the
//! resolution of a failure's root GPU to the part placed there at the time. Writes take columns
//! (UNNEST), never a row at a time; updates run per cluster, so on Citus each touches one shard.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use crate::domain::part::{Closing, OpenPlacement};

/// Open placements on the given nodes of one cluster.
pub async fn open_on_nodes(
    conn: &mut PgConnection,
    cluster: &str,
    hosts: &[String],
) -> Result<Vec<OpenPlacement>, sqlx::Error> {
    sqlx::query_as!(
        OpenPlacement,
        "SELECT cluster, part, installed_at, hostname, gpu_index, pci_bus_id, uuid
         FROM gpu_placements WHERE cluster = $1 AND hostname = ANY($2) AND removed_at IS NULL",
        cluster,
        hosts,
    )
    .fetch_all(conn)
    .await
}

/// Open placements of the given parts, wherever they are (any node, any cluster).
pub async fn open_of_parts(conn: &mut PgConnection, parts: &[String]) -> Result<Vec<OpenPlacement>, sqlx::Error> {
    sqlx::query_as!(
        OpenPlacement,
        "SELECT cluster, part, installed_at, hostname, gpu_index, pci_bus_id, uuid
         FROM gpu_placements WHERE part = ANY($1) AND removed_at IS NULL",
        parts,
    )
    .fetch_all(conn)
    .await
}

/// The stored facts of the given parts of one cluster (to write only what changed).
pub async fn parts_of_cluster(
    conn: &mut PgConnection,
    cluster: &str,
    parts: &[String],
) -> Result<Vec<Part>, sqlx::Error> {
    sqlx::query_as!(
        Part,
        "SELECT cluster, part, serial, uuid, model, generation, board_part_number, vbios, driver, attributes,
                first_seen_at, updated_at
         FROM gpu_parts WHERE cluster = $1 AND part = ANY($2)",
        cluster,
        parts,
    )
    .fetch_all(conn)
    .await
}

/// Ends the given placements of one cluster.
pub async fn close_placements(conn: &mut PgConnection, cluster: &str, close: &[&Closing]) -> Result<u64, sqlx::Error> {
    if close.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query!(
        "UPDATE gpu_placements p SET removed_at = c.at, end_reason = c.reason
         FROM UNNEST($2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[]) AS c(part, installed_at, at, reason)
         WHERE p.cluster = $1 AND p.part = c.part AND p.installed_at = c.installed_at",
        cluster,
        &close.iter().map(|c| c.part.clone()).collect::<Vec<_>>(),
        &close.iter().map(|c| c.installed_at).collect::<Vec<_>>(),
        &close.iter().map(|c| c.at).collect::<Vec<_>>(),
        &close.iter().map(|c| c.reason.as_str().to_string()).collect::<Vec<_>>(),
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// One placement as written: open (`removed_at` None) or, from an import, with its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacementRow {
    pub cluster: String,
    pub part: String,
    pub installed_at: DateTime<Utc>,
    pub removed_at: Option<DateTime<Utc>>,
    pub hostname: String,
    pub gpu_index: Option<i32>,
    pub pci_bus_id: Option<String>,
    pub uuid: Option<String>,
    pub end_reason: Option<String>,
}

/// Inserts placements; one already stored with the same (cluster, part, installed_at) is
/// replaced (an import sent again converges on what it says).
pub async fn upsert_placements(conn: &mut PgConnection, rows: &[PlacementRow]) -> Result<u64, sqlx::Error> {
    if rows.is_empty() {
        return Ok(0);
    }
    let text = |f: fn(&PlacementRow) -> String| rows.iter().map(f).collect::<Vec<_>>();
    let opt = |f: fn(&PlacementRow) -> Option<String>| rows.iter().map(f).collect::<Vec<_>>();
    let done = sqlx::query!(
        "INSERT INTO gpu_placements (cluster, part, installed_at, removed_at, hostname, gpu_index, pci_bus_id, uuid,
                                     end_reason)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::int[],
                              $7::text[], $8::text[], $9::text[])
         ON CONFLICT (cluster, part, installed_at) DO UPDATE SET
             removed_at = EXCLUDED.removed_at, hostname = EXCLUDED.hostname, gpu_index = EXCLUDED.gpu_index,
             pci_bus_id = EXCLUDED.pci_bus_id, uuid = EXCLUDED.uuid, end_reason = EXCLUDED.end_reason
         WHERE (gpu_placements.removed_at, gpu_placements.hostname, gpu_placements.gpu_index,
                gpu_placements.pci_bus_id, gpu_placements.uuid, gpu_placements.end_reason)
               IS DISTINCT FROM (EXCLUDED.removed_at, EXCLUDED.hostname, EXCLUDED.gpu_index,
                                 EXCLUDED.pci_bus_id, EXCLUDED.uuid, EXCLUDED.end_reason)",
        &text(|r| r.cluster.clone()),
        &text(|r| r.part.clone()),
        &rows.iter().map(|r| r.installed_at).collect::<Vec<_>>(),
        &rows.iter().map(|r| r.removed_at).collect::<Vec<_>>() as &[Option<DateTime<Utc>>],
        &text(|r| r.hostname.clone()),
        &rows.iter().map(|r| r.gpu_index).collect::<Vec<_>>() as &[Option<i32>],
        &opt(|r| r.pci_bus_id.clone()) as &[Option<String>],
        &opt(|r| r.uuid.clone()) as &[Option<String>],
        &opt(|r| r.end_reason.clone()) as &[Option<String>],
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// What is known of a part in a cluster, as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartRow {
    pub cluster: String,
    pub part: String,
    pub serial: Option<String>,
    pub uuid: Option<String>,
    pub model: Option<String>,
    pub generation: String,
    pub board_part_number: Option<String>,
    pub vbios: Option<String>,
    pub driver: Option<String>,
    /// Merged into the stored attributes (a key sent again replaces its value).
    pub attributes: serde_json::Value,
    pub first_seen_at: DateTime<Utc>,
}

/// Inserts parts or updates what changed: a field sent as absent keeps the stored value, and a
/// part whose facts are unchanged is not written at all (an unchanged re-post writes nothing).
pub async fn upsert_parts(conn: &mut PgConnection, rows: &[PartRow], now: DateTime<Utc>) -> Result<u64, sqlx::Error> {
    if rows.is_empty() {
        return Ok(0);
    }
    let text = |f: fn(&PartRow) -> String| rows.iter().map(f).collect::<Vec<_>>();
    let opt = |f: fn(&PartRow) -> Option<String>| rows.iter().map(f).collect::<Vec<_>>();
    let done = sqlx::query!(
        "INSERT INTO gpu_parts AS g (cluster, part, serial, uuid, model, generation, board_part_number, vbios, driver,
                                attributes, first_seen_at, updated_at)
         SELECT cluster, part, serial, uuid, model, generation, bpn, vbios, driver, attrs, seen, $12
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                     $9::text[], $10::jsonb[], $11::timestamptz[])
              AS t(cluster, part, serial, uuid, model, generation, bpn, vbios, driver, attrs, seen)
         ON CONFLICT (cluster, part) DO UPDATE SET
             serial = COALESCE(EXCLUDED.serial, g.serial),
             uuid = COALESCE(EXCLUDED.uuid, g.uuid),
             model = COALESCE(EXCLUDED.model, g.model),
             generation = CASE WHEN EXCLUDED.model IS NULL THEN g.generation ELSE EXCLUDED.generation END,
             board_part_number = COALESCE(EXCLUDED.board_part_number, g.board_part_number),
             vbios = COALESCE(EXCLUDED.vbios, g.vbios),
             driver = COALESCE(EXCLUDED.driver, g.driver),
             attributes = g.attributes || EXCLUDED.attributes,
             first_seen_at = LEAST(g.first_seen_at, EXCLUDED.first_seen_at),
             updated_at = EXCLUDED.updated_at
         WHERE (g.serial, g.uuid, g.model, g.board_part_number, g.vbios, g.driver, g.attributes, g.first_seen_at)
               IS DISTINCT FROM (COALESCE(EXCLUDED.serial, g.serial), COALESCE(EXCLUDED.uuid, g.uuid),
                                 COALESCE(EXCLUDED.model, g.model),
                                 COALESCE(EXCLUDED.board_part_number, g.board_part_number),
                                 COALESCE(EXCLUDED.vbios, g.vbios), COALESCE(EXCLUDED.driver, g.driver),
                                 g.attributes || EXCLUDED.attributes, LEAST(g.first_seen_at, EXCLUDED.first_seen_at))",
        &text(|r| r.cluster.clone()),
        &text(|r| r.part.clone()),
        &opt(|r| r.serial.clone()) as &[Option<String>],
        &opt(|r| r.uuid.clone()) as &[Option<String>],
        &opt(|r| r.model.clone()) as &[Option<String>],
        &text(|r| r.generation.clone()),
        &opt(|r| r.board_part_number.clone()) as &[Option<String>],
        &opt(|r| r.vbios.clone()) as &[Option<String>],
        &opt(|r| r.driver.clone()) as &[Option<String>],
        &rows.iter().map(|r| r.attributes.clone()).collect::<Vec<_>>(),
        &rows.iter().map(|r| r.first_seen_at).collect::<Vec<_>>(),
        now,
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// One removal as written.
#[derive(Debug, Clone, PartialEq)]
pub struct RemovalRow {
    pub cluster: String,
    pub part: String,
    pub removed_at: DateTime<Utc>,
    pub reason: String,
    pub ticket: Option<String>,
    pub note: Option<String>,
    pub removed_by: Option<String>,
}

/// Records removals (idempotent on (cluster, part, removed_at): sent again, it replaces).
pub async fn upsert_removals(conn: &mut PgConnection, rows: &[RemovalRow]) -> Result<u64, sqlx::Error> {
    if rows.is_empty() {
        return Ok(0);
    }
    let text = |f: fn(&RemovalRow) -> String| rows.iter().map(f).collect::<Vec<_>>();
    let opt = |f: fn(&RemovalRow) -> Option<String>| rows.iter().map(f).collect::<Vec<_>>();
    let done = sqlx::query!(
        "INSERT INTO gpu_removals (cluster, part, removed_at, reason, ticket, note, removed_by)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[])
         ON CONFLICT (cluster, part, removed_at) DO UPDATE SET
             reason = EXCLUDED.reason, ticket = EXCLUDED.ticket, note = EXCLUDED.note, removed_by = EXCLUDED.removed_by
         WHERE (gpu_removals.reason, gpu_removals.ticket, gpu_removals.note, gpu_removals.removed_by)
               IS DISTINCT FROM (EXCLUDED.reason, EXCLUDED.ticket, EXCLUDED.note, EXCLUDED.removed_by)",
        &text(|r| r.cluster.clone()),
        &text(|r| r.part.clone()),
        &rows.iter().map(|r| r.removed_at).collect::<Vec<_>>(),
        &text(|r| r.reason.clone()),
        &opt(|r| r.ticket.clone()) as &[Option<String>],
        &opt(|r| r.note.clone()) as &[Option<String>],
        &opt(|r| r.removed_by.clone()) as &[Option<String>],
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Records removals an import implied (a placement's ending) where none is stored at that time: a
/// removal stored there already says the same (the import refuses one that disagrees) and may
/// carry a ticket and a note the ending does not.
pub async fn insert_missing_removals(conn: &mut PgConnection, rows: &[RemovalRow]) -> Result<u64, sqlx::Error> {
    if rows.is_empty() {
        return Ok(0);
    }
    let text = |f: fn(&RemovalRow) -> String| rows.iter().map(f).collect::<Vec<_>>();
    let opt = |f: fn(&RemovalRow) -> Option<String>| rows.iter().map(f).collect::<Vec<_>>();
    let done = sqlx::query!(
        "INSERT INTO gpu_removals (cluster, part, removed_at, reason, ticket, note, removed_by)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[])
         ON CONFLICT (cluster, part, removed_at) DO NOTHING",
        &text(|r| r.cluster.clone()),
        &text(|r| r.part.clone()),
        &rows.iter().map(|r| r.removed_at).collect::<Vec<_>>(),
        &text(|r| r.reason.clone()),
        &opt(|r| r.ticket.clone()) as &[Option<String>],
        &opt(|r| r.note.clone()) as &[Option<String>],
        &opt(|r| r.removed_by.clone()) as &[Option<String>],
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Every placement of the given parts in one cluster, open or closed, in (part, installed_at) order.
pub async fn placements_of_parts(
    conn: &mut PgConnection,
    cluster: &str,
    parts: &[String],
) -> Result<Vec<Placement>, sqlx::Error> {
    sqlx::query_as!(
        Placement,
        "SELECT cluster, part, hostname, gpu_index, pci_bus_id, uuid, installed_at, removed_at, end_reason
         FROM gpu_placements WHERE cluster = $1 AND part = ANY($2)
         ORDER BY part, installed_at",
        cluster,
        parts,
    )
    .fetch_all(conn)
    .await
}

/// Every removal of the given parts in one cluster, in (part, removed_at) order.
pub async fn removals_of_parts(
    conn: &mut PgConnection,
    cluster: &str,
    parts: &[String],
) -> Result<Vec<Removal>, sqlx::Error> {
    sqlx::query_as!(
        Removal,
        "SELECT cluster, part, removed_at, reason, ticket, note, removed_by
         FROM gpu_removals WHERE cluster = $1 AND part = ANY($2)
         ORDER BY part, removed_at",
        cluster,
        parts,
    )
    .fetch_all(conn)
    .await
}

/// Which of the given hostnames the cluster's node inventory holds.
pub async fn inventoried_nodes(
    conn: &mut PgConnection,
    cluster: &str,
    hosts: &[String],
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT hostname FROM nodes WHERE cluster = $1 AND hostname = ANY($2)",
        cluster,
        hosts,
    )
    .fetch_all(conn)
    .await
}

/// Whether the part is known in the cluster.
pub async fn part_exists(conn: &mut PgConnection, cluster: &str, part: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM gpu_parts WHERE cluster = $1 AND part = $2) AS "exists!""#,
        cluster,
        part
    )
    .fetch_one(conn)
    .await
}

/// A stored placement.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub cluster: String,
    pub part: String,
    pub hostname: String,
    pub gpu_index: Option<i32>,
    pub pci_bus_id: Option<String>,
    pub uuid: Option<String>,
    pub installed_at: DateTime<Utc>,
    pub removed_at: Option<DateTime<Utc>>,
    pub end_reason: Option<String>,
}

/// Placements of a cluster (every cluster when None), optionally of one part (by identity or any
/// UUID it had) or one node, in (part, installed_at) order.
pub async fn placements(
    db: &PgPool,
    cluster: Option<&str>,
    part: Option<&str>,
    hostname: Option<&str>,
) -> Result<Vec<Placement>, sqlx::Error> {
    sqlx::query_as!(
        Placement,
        "SELECT cluster, part, hostname, gpu_index, pci_bus_id, uuid, installed_at, removed_at, end_reason
         FROM gpu_placements
         WHERE ($1::text IS NULL OR cluster = $1)
           AND ($2::text IS NULL OR part = $2
                OR part IN (SELECT q.part FROM gpu_placements q WHERE q.uuid = $2))
           AND ($3::text IS NULL OR hostname = $3)
         ORDER BY part, installed_at, cluster",
        cluster,
        part,
        hostname,
    )
    .fetch_all(db)
    .await
}

/// A stored part.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub cluster: String,
    pub part: String,
    pub serial: Option<String>,
    pub uuid: Option<String>,
    pub model: Option<String>,
    pub generation: String,
    pub board_part_number: Option<String>,
    pub vbios: Option<String>,
    pub driver: Option<String>,
    pub attributes: serde_json::Value,
    pub first_seen_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Parts of a cluster (every cluster when None), optionally one part, in (part, cluster) order.
pub async fn parts(db: &PgPool, cluster: Option<&str>, part: Option<&str>) -> Result<Vec<Part>, sqlx::Error> {
    sqlx::query_as!(
        Part,
        "SELECT cluster, part, serial, uuid, model, generation, board_part_number, vbios, driver, attributes,
                first_seen_at, updated_at
         FROM gpu_parts
         WHERE ($1::text IS NULL OR cluster = $1) AND ($2::text IS NULL OR part = $2)
         ORDER BY part, cluster",
        cluster,
        part,
    )
    .fetch_all(db)
    .await
}

/// A stored removal.
#[derive(Debug, Clone, PartialEq)]
pub struct Removal {
    pub cluster: String,
    pub part: String,
    pub removed_at: DateTime<Utc>,
    pub reason: String,
    pub ticket: Option<String>,
    pub note: Option<String>,
    pub removed_by: Option<String>,
}

pub async fn removals(db: &PgPool, cluster: Option<&str>, part: Option<&str>) -> Result<Vec<Removal>, sqlx::Error> {
    sqlx::query_as!(
        Removal,
        "SELECT cluster, part, removed_at, reason, ticket, note, removed_by
         FROM gpu_removals
         WHERE ($1::text IS NULL OR cluster = $1) AND ($2::text IS NULL OR part = $2)
         ORDER BY part, removed_at",
        cluster,
        part,
    )
    .fetch_all(db)
    .await
}

/// A failure whose root signal named a GPU, with the part placed in that slot at the failure's
/// first signal (None when no placement covers it).
#[derive(Debug, Clone, PartialEq)]
pub struct PartFailure {
    pub id: uuid::Uuid,
    pub cluster: String,
    pub first_at: DateTime<Utc>,
    pub category: String,
    pub component: String,
    pub severity: String,
    pub transient: bool,
    pub root_kind: String,
    pub root_code: Option<i64>,
    pub root_node: Option<String>,
    pub root_gpu_index: Option<i32>,
    pub part: Option<String>,
    pub slot_hostname: Option<String>,
    pub slot_index: Option<i32>,
}

/// Failures naming a GPU, each resolved to its part: by UUID first, else by node and index or PCI
/// bus id, among the placements open at the failure's first signal. Optionally one part's only.
pub async fn part_failures(
    db: &PgPool,
    cluster: Option<&str>,
    part: Option<&str>,
) -> Result<Vec<PartFailure>, sqlx::Error> {
    sqlx::query_as!(
        PartFailure,
        r#"SELECT f.id, f.cluster, f.first_at, COALESCE(l.pm_category, f.category) AS "category!",
                  COALESCE(l.pm_component, f.component) AS "component!", f.severity, f.transient, f.root_kind, f.root_code, f.root_node,
                  f.root_gpu_index, p.part AS "part?", p.hostname AS "slot_hostname?", p.gpu_index AS "slot_index?"
           FROM failures f
           LEFT JOIN failure_lifecycle l ON l.cluster = f.cluster AND l.failure_id = f.id
           LEFT JOIN LATERAL (
               SELECT pl.part, pl.hostname, pl.gpu_index
               FROM gpu_placements pl
               WHERE pl.cluster = f.cluster AND pl.installed_at <= f.first_at
                 AND (pl.removed_at IS NULL OR pl.removed_at > f.first_at)
                 AND ((f.root_gpu_uuid IS NOT NULL AND pl.uuid = f.root_gpu_uuid)
                      OR (pl.hostname = f.root_node
                          AND ((f.root_gpu_index IS NOT NULL AND pl.gpu_index = f.root_gpu_index)
                               OR (f.root_gpu_bus IS NOT NULL AND pl.pci_bus_id = f.root_gpu_bus))))
               ORDER BY (pl.uuid IS NOT DISTINCT FROM f.root_gpu_uuid) DESC, pl.installed_at DESC
               LIMIT 1) p ON true
           WHERE ($1::text IS NULL OR f.cluster = $1)
             AND (f.root_gpu_index IS NOT NULL OR f.root_gpu_uuid IS NOT NULL OR f.root_gpu_bus IS NOT NULL)
             AND ($2::text IS NULL OR p.part = $2)
           ORDER BY f.first_at, f.id"#,
        cluster,
        part,
    )
    .fetch_all(db)
    .await
}

/// A signal that named a GPU, resolved to the part in that slot at the time.
#[derive(Debug, Clone, PartialEq)]
pub struct PartSignal {
    pub part: String,
    pub kind: String,
    pub code: Option<i64>,
    pub occurred_at: DateTime<Utc>,
}

/// Signals of [from, to) that name a GPU (index, UUID or PCI bus id), each resolved to its part as
/// failures are ([`part_failures`]); signals no placement covers are left out.
pub async fn part_signals(
    db: &PgPool,
    cluster: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<PartSignal>, sqlx::Error> {
    sqlx::query_as!(
        PartSignal,
        r#"SELECT p.part AS "part!", e.kind, e.code, e.occurred_at
           FROM events e
           JOIN LATERAL (
               SELECT pl.part
               FROM gpu_placements pl
               WHERE pl.cluster = e.cluster AND pl.installed_at <= e.occurred_at
                 AND (pl.removed_at IS NULL OR pl.removed_at > e.occurred_at)
                 AND ((e.gpu_uuid IS NOT NULL AND pl.uuid = e.gpu_uuid)
                      OR (pl.hostname = e.node
                          AND ((e.gpu_index IS NOT NULL AND pl.gpu_index = e.gpu_index)
                               OR (e.attributes ? 'pci_bus_id' AND pl.pci_bus_id = e.attributes->>'pci_bus_id'))))
               ORDER BY (pl.uuid IS NOT DISTINCT FROM e.gpu_uuid) DESC, pl.installed_at DESC
               LIMIT 1) p ON true
           WHERE ($1::text IS NULL OR e.cluster = $1) AND e.occurred_at >= $2 AND e.occurred_at < $3
             AND (e.gpu_index IS NOT NULL OR e.gpu_uuid IS NOT NULL OR e.attributes ? 'pci_bus_id')"#,
        cluster,
        from,
        to,
    )
    .fetch_all(db)
    .await
}

impl PartFailure {
    /// A hard failure of the part: a hardware root cause, not transient, of critical or high
    /// severity (a GPU off the bus, an uncorrectable ECC error), as opposed to what may precede
    /// one (corrected ECC, a pending row remap, a contained XID 94).
    pub fn is_hard(&self) -> bool {
        self.category == "hardware" && !self.transient && matches!(self.severity.as_str(), "critical" | "high")
    }
}

/// The GPU a failure's root signal named, and the part in that slot at the failure's time.
#[derive(Debug, Clone, PartialEq)]
pub struct RootGpu {
    pub gpu_index: Option<i32>,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    pub part: Option<String>,
}

/// The root GPU of one failure (None when its root signal named no GPU).
pub async fn root_gpu(db: &PgPool, cluster: &str, id: uuid::Uuid) -> Result<Option<RootGpu>, sqlx::Error> {
    sqlx::query_as!(
        RootGpu,
        r#"SELECT f.root_gpu_index AS gpu_index, f.root_gpu_uuid AS uuid, f.root_gpu_bus AS pci_bus_id, p.part AS "part?"
           FROM failures f
           LEFT JOIN LATERAL (
               SELECT pl.part
               FROM gpu_placements pl
               WHERE pl.cluster = f.cluster AND pl.installed_at <= f.first_at
                 AND (pl.removed_at IS NULL OR pl.removed_at > f.first_at)
                 AND ((f.root_gpu_uuid IS NOT NULL AND pl.uuid = f.root_gpu_uuid)
                      OR (pl.hostname = f.root_node
                          AND ((f.root_gpu_index IS NOT NULL AND pl.gpu_index = f.root_gpu_index)
                               OR (f.root_gpu_bus IS NOT NULL AND pl.pci_bus_id = f.root_gpu_bus))))
               ORDER BY (pl.uuid IS NOT DISTINCT FROM f.root_gpu_uuid) DESC, pl.installed_at DESC
               LIMIT 1) p ON true
           WHERE f.cluster = $1 AND f.id = $2
             AND (f.root_gpu_index IS NOT NULL OR f.root_gpu_uuid IS NOT NULL OR f.root_gpu_bus IS NOT NULL)"#,
        cluster,
        id,
    )
    .fetch_optional(db)
    .await
}

/// Raises the parts version of each cluster (sorted, distinct: the rows are locked in that order
/// until the transaction ends, so concurrent writers cannot deadlock on them).
pub async fn bump_part_versions(conn: &mut PgConnection, clusters: &[String]) -> Result<(), sqlx::Error> {
    if clusters.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO gpu_part_versions AS v (cluster, version)
         SELECT c, 1 FROM unnest($1::text[]) AS c ORDER BY c
         ON CONFLICT (cluster) DO UPDATE SET version = v.version + 1",
        clusters,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// (cluster, version) of the parts of a cluster (every cluster when None), in cluster order.
pub async fn part_versions(db: &PgPool, cluster: Option<&str>) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT cluster, version FROM gpu_part_versions WHERE ($1::text IS NULL OR cluster = $1) ORDER BY cluster",
        cluster,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.cluster, r.version)).collect())
}
