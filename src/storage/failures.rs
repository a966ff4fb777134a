//! The failures table as folding writes it: the signals of the keys to re-fold, the failures near
//! them, and bulk delete / insert. The orchestration (what to re-fold, classification, folding)
//! lives in `crate::ingest::refold`.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// A stored signal as folding reads it.
#[derive(Debug, sqlx::FromRow)]
pub struct SignalRow {
    pub id: Uuid,
    pub occurred_at: DateTime<Utc>,
    /// The last occurrence of a burst (the same as occurred_at for a single signal).
    pub last_at: DateTime<Utc>,
    pub cluster: String,
    pub node: Option<String>,
    pub job_id: Option<String>,
    pub gpu_model: Option<String>,
    pub gpu_index: Option<i32>,
    pub gpu_uuid: Option<String>,
    /// The normalised PCI bus id a log line named (`attributes.pci_bus_id`).
    pub gpu_bus: Option<String>,
    pub kind: String,
    pub code: Option<i64>,
    pub symptom: Option<String>,
    pub rc_category: Option<String>,
    pub rc_component: Option<String>,
    pub message: Option<String>,
    /// The job that ran on the node when a node-only signal occurred.
    pub attributed_job: Option<String>,
}

/// The job a node-only signal is attributed to.
#[derive(Debug, sqlx::FromRow)]
pub struct Attribution {
    pub id: Uuid,
    pub job_id: String,
}

/// For node-only signals of one cluster (id, node, time), the job that ran on the node then, if
/// any: the latest started run, then the smallest job id.
///
/// Like every statement here that reads per-cluster tables for a set of keys, it reads one
/// cluster: on Citus the whole statement then runs on the one shard group that holds the cluster.
pub async fn attributed_jobs(
    conn: &mut PgConnection,
    cluster: &str,
    ids: &[Uuid],
    nodes: &[&str],
    times: &[DateTime<Utc>],
) -> Result<Vec<Attribution>, sqlx::Error> {
    sqlx::query_as!(
        Attribution,
        r#"SELECT u.id AS "id!", a.job_id AS "job_id!"
         FROM UNNEST($2::uuid[], $3::text[], $4::timestamptz[]) AS u(id, node, at)
         CROSS JOIN LATERAL (
             SELECT r.job_id FROM job_node_runs r
             WHERE r.cluster = $1 AND r.node = u.node AND tstzrange(r.started_at, r.ended_at, '[]') @> u.at
             ORDER BY r.started_at DESC, r.job_id
             LIMIT 1) a"#,
        cluster,
        ids,
        nodes as &[&str],
        times,
    )
    .fetch_all(&mut *conn)
    .await
}

/// The span of a key's stored failures that reach into a probe range (`idx`: 1-based position of
/// the key in the arrays).
#[derive(Debug, sqlx::FromRow)]
pub struct FailureSpan {
    pub idx: i64,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
}

/// Per key (cluster, key, probe start, probe end), the span of its failures overlapping the probe.
/// Failures that start before the retention horizon take part too: their signals whose rows are
/// gone are re-folded through [`frozen_in_ranges`].
pub async fn failure_spans(
    conn: &mut PgConnection,
    cluster: &str,
    keys: &[String],
    starts: &[DateTime<Utc>],
    ends: &[DateTime<Utc>],
) -> Result<Vec<FailureSpan>, sqlx::Error> {
    sqlx::query_as!(
        FailureSpan,
        r#"SELECT k.idx AS "idx!", min(f.first_at) AS "first_at!", max(f.last_at) AS "last_at!"
         FROM UNNEST($2::text[], $3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS k(key, s, e, idx)
         JOIN failures f ON f.cluster = $1 AND f.correlation_key = k.key AND f.last_at >= k.s AND f.first_at <= k.e
         GROUP BY k.idx"#,
        cluster,
        keys,
        starts,
        ends,
    )
    .fetch_all(&mut *conn)
    .await
}

/// Deletes the failures of each key overlapping its range (read first with [`frozen_in_ranges`]:
/// those starting before the retention horizon are folded again from what they kept).
pub async fn delete_in_ranges(
    conn: &mut PgConnection,
    cluster: &str,
    keys: &[String],
    starts: &[DateTime<Utc>],
    ends: &[DateTime<Utc>],
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query!(
        "DELETE FROM failures f
         USING UNNEST($2::text[], $3::timestamptz[], $4::timestamptz[]) AS k(key, s, e)
         WHERE f.cluster = $1 AND f.correlation_key = k.key AND f.last_at >= k.s AND f.first_at <= k.e",
        cluster,
        keys,
        starts,
        ends,
    )
    .execute(&mut *conn)
    .await?
    .rows_affected())
}

/// A stored failure that starts before the retention horizon, with the signals whose rows are
/// gone (`idx`: 1-based position of its key in the arrays).
#[derive(Debug, sqlx::FromRow)]
pub struct FrozenFailure {
    pub idx: i64,
    pub id: Uuid,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
    pub nodes: Vec<String>,
    pub root_signal: Uuid,
    pub root_node: Option<String>,
    pub root_gpu_index: Option<i32>,
    pub root_gpu_uuid: Option<String>,
    pub root_gpu_bus: Option<String>,
    pub root_kind: String,
    pub root_code: Option<i64>,
    pub generation: String,
    pub category: String,
    pub component: String,
    pub severity: String,
    pub transient: bool,
    pub action: String,
    pub rule_id: Option<String>,
    pub explanation: String,
    pub explicit_cause: bool,
    pub symptom: Option<String>,
    /// Its signals without a row in `events`, in the failure's order, and each one's (kind, code).
    pub absent_ids: Vec<Uuid>,
    pub absent_kinds: Vec<String>,
}

/// The failures of each key overlapping its range (the selection of [`delete_in_ranges`]) that
/// start before the retention horizon, each with the signals whose rows retention dropped: a
/// re-fold puts the failure in their place ([`crate::fold::Summary`]). A signal's row, when
/// stored, starts within `max_span` before its failure; `lowest` .. `highest` bound all of them,
/// so the partitions are pruned once.
#[allow(clippy::too_many_arguments)]
pub async fn frozen_in_ranges(
    conn: &mut PgConnection,
    cluster: &str,
    keys: &[String],
    starts: &[DateTime<Utc>],
    ends: &[DateTime<Utc>],
    max_span: chrono::Duration,
) -> Result<Vec<FrozenFailure>, sqlx::Error> {
    let lowest = starts.iter().min().copied().map(|t| t - max_span);
    let highest = ends.iter().max().copied();
    sqlx::query_as!(
        FrozenFailure,
        r#"SELECT k.idx AS "idx!", f.id, f.first_at, f.last_at, f.nodes, f.root_signal, f.root_node,
                  f.root_gpu_index, f.root_gpu_uuid, f.root_gpu_bus, f.root_kind, f.root_code,
                  f.signal_generation AS generation, f.category, f.component, f.severity, f.transient,
                  f.action, f.rule_id, f.explanation, f.explicit_cause, f.symptom,
                  m.ids AS "absent_ids!", m.kinds AS "absent_kinds!"
         FROM UNNEST($2::text[], $3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS k(key, s, e, idx)
         JOIN failures f ON f.cluster = $1 AND f.correlation_key = k.key AND f.last_at >= k.s AND f.first_at <= k.e
         CROSS JOIN LATERAL (
             SELECT COALESCE(array_agg(x.id ORDER BY x.n), '{}') AS ids,
                    COALESCE(array_agg(COALESCE(x.kind, '') ORDER BY x.n), '{}') AS kinds
             FROM unnest(f.signal_ids, f.signal_kinds) WITH ORDINALITY AS x(id, kind, n)
             WHERE x.id IS NOT NULL AND NOT EXISTS (
                 SELECT 1 FROM events e
                 WHERE e.cluster = $1 AND e.id = x.id
                   AND e.occurred_at >= f.first_at - make_interval(secs => $5) AND e.occurred_at <= f.last_at
                   AND e.occurred_at >= $6 AND e.occurred_at <= $7)) m
         WHERE f.first_at < (SELECT retained_from FROM signal_retention)
         ORDER BY k.idx, f.first_at"#,
        cluster,
        keys,
        starts,
        ends,
        max_span.num_milliseconds() as f64 / 1000.0,
        lowest,
        highest,
    )
    .fetch_all(&mut *conn)
    .await
}

/// Of signals older than the retention horizon (their month's ledger may be gone), those already
/// folded: among the signal ids of the failure of their key (`keys`, stored form) that spans their
/// time, or archived (`events_archive`, the kinds analyses read by kind). A re-sent old signal is
/// then a duplicate, as the ledger would have said.
pub async fn already_folded(
    conn: &mut PgConnection,
    cluster: &str,
    ids: &[Uuid],
    keys: &[String],
    times: &[DateTime<Utc>],
) -> Result<Vec<Uuid>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_scalar!(
        r#"SELECT u.id AS "id!" FROM UNNEST($2::uuid[], $3::text[], $4::timestamptz[]) AS u(id, key, at)
         WHERE EXISTS (SELECT 1 FROM (SELECT f.first_at, f.signal_ids FROM failures f
                                      WHERE f.cluster = $1 AND f.correlation_key = u.key AND f.last_at >= u.at
                                      ORDER BY f.last_at LIMIT 1) f
                       WHERE f.first_at <= u.at AND u.id = ANY(f.signal_ids))
            OR EXISTS (SELECT 1 FROM events_archive a WHERE a.cluster = $1 AND a.occurred_at = u.at AND a.id = u.id)"#,
        cluster,
        ids,
        keys,
        times,
    )
    .fetch_all(&mut *conn)
    .await
}

/// All signals of the keys within their ranges, in one statement. A job key holds the signals
/// naming the job and the node-only signals attributed to it (on its nodes, during its run); a
/// node key the node-only signals attributed to no job; a key with neither names one signal
/// (`alone`, its id). A burst belongs to a range when its span overlaps it; a stored span is at
/// most `max_span` (`fold::burst::max_burst_span`), which bounds each branch's start time, so only
/// the partitions of the ranges are visited.
///
/// Each branch probes `events` per key through a LATERAL fenced with `OFFSET 0`: as a plain join,
/// once the partitions have statistics, the planner hashed all of `events` for a few thousand keys
/// (108 s a batch on 10 M signals); per key, the index serves, and the keys' overall reach ($8, $9)
/// prunes the partitions once.
#[allow(clippy::too_many_arguments)]
pub async fn signals_of_keys(
    conn: &mut PgConnection,
    cluster: &str,
    jobs: &[Option<&str>],
    nodes: &[Option<&str>],
    starts: &[DateTime<Utc>],
    ends: &[DateTime<Utc>],
    alone: &[Option<Uuid>],
    max_span: chrono::Duration,
) -> Result<Vec<SignalRow>, sqlx::Error> {
    // The reach of all the keys, implied by each branch's own bounds: as parameters, Postgres
    // prunes the partitions once at executor start-up instead of on every probe.
    let lowest = starts.iter().min().copied().map(|t| t - max_span);
    let highest = ends.iter().max().copied();
    sqlx::query_as!(
        SignalRow,
        r#"WITH k AS (SELECT * FROM UNNEST($2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::uuid[])
                    AS k(job, node, s, e, alone))
         SELECT e.id AS "id!", e.occurred_at AS "occurred_at!", COALESCE(e.last_occurred_at, e.occurred_at) AS "last_at!",
                e.cluster AS "cluster!", e.node, e.job_id, e.gpu_model, e.gpu_index, e.gpu_uuid,
                e.attributes->>'pci_bus_id' AS gpu_bus, e.kind AS "kind!", e.code, e.symptom,
                e.rc_category, e.rc_component, e.message, NULL::text AS "attributed_job?"
         FROM k CROSS JOIN LATERAL (
             SELECT * FROM events e
             WHERE e.cluster = $1 AND e.job_id = k.job AND e.occurred_at <= k.e
               AND COALESCE(e.last_occurred_at, e.occurred_at) >= k.s
               AND e.occurred_at >= k.s - make_interval(secs => $7)
               AND e.occurred_at >= $8 AND e.occurred_at <= $9
             OFFSET 0) e
         WHERE k.job IS NOT NULL
         UNION ALL
         SELECT e.id, e.occurred_at, COALESCE(e.last_occurred_at, e.occurred_at), e.cluster, e.node,
                e.job_id, e.gpu_model, e.gpu_index, e.gpu_uuid, e.attributes->>'pci_bus_id', e.kind, e.code, e.symptom, e.rc_category, e.rc_component, e.message,
                k.job
         FROM k
             JOIN jobs j ON j.cluster = $1 AND j.job_id = k.job
             CROSS JOIN LATERAL (SELECT DISTINCT unnest(j.nodes)) AS jn(node)
             CROSS JOIN LATERAL (
                 SELECT * FROM events e
                 WHERE e.cluster = $1 AND e.job_id IS NULL AND e.node = jn.node
                   AND COALESCE(e.last_occurred_at, e.occurred_at) >= k.s AND e.occurred_at <= k.e
                   AND e.occurred_at >= k.s - make_interval(secs => $7)
                   AND e.occurred_at BETWEEN j.started_at AND COALESCE(j.ended_at, 'infinity')
                   AND e.occurred_at >= $8 AND e.occurred_at <= $9
                 OFFSET 0) e
         WHERE k.job IS NOT NULL
           AND (SELECT r.job_id FROM job_node_runs r
                WHERE r.cluster = $1 AND r.node = e.node AND tstzrange(r.started_at, r.ended_at, '[]') @> e.occurred_at
                ORDER BY r.started_at DESC, r.job_id LIMIT 1) = k.job
         UNION ALL
         SELECT e.id, e.occurred_at, COALESCE(e.last_occurred_at, e.occurred_at), e.cluster, e.node,
                e.job_id, e.gpu_model, e.gpu_index, e.gpu_uuid, e.attributes->>'pci_bus_id', e.kind, e.code, e.symptom, e.rc_category, e.rc_component, e.message,
                NULL
         FROM k CROSS JOIN LATERAL (
             SELECT * FROM events e
             WHERE e.cluster = $1 AND e.job_id IS NULL AND e.node = k.node
               AND e.occurred_at <= k.e AND COALESCE(e.last_occurred_at, e.occurred_at) >= k.s
               AND e.occurred_at >= k.s - make_interval(secs => $7)
               AND e.occurred_at >= $8 AND e.occurred_at <= $9
             OFFSET 0) e
         WHERE k.job IS NULL AND k.node IS NOT NULL
           AND (SELECT r.job_id FROM job_node_runs r
                WHERE r.cluster = $1 AND r.node = e.node AND tstzrange(r.started_at, r.ended_at, '[]') @> e.occurred_at
                ORDER BY r.started_at DESC, r.job_id LIMIT 1) IS NULL
         UNION ALL
         SELECT e.id, e.occurred_at, COALESCE(e.last_occurred_at, e.occurred_at), e.cluster, e.node,
                e.job_id, e.gpu_model, e.gpu_index, e.gpu_uuid, e.attributes->>'pci_bus_id', e.kind, e.code, e.symptom, e.rc_category, e.rc_component, e.message,
                NULL
         FROM k CROSS JOIN LATERAL (
             SELECT * FROM events e
             WHERE e.cluster = $1 AND e.id = k.alone AND e.occurred_at BETWEEN k.s AND k.e
               AND e.occurred_at >= $8 AND e.occurred_at <= $9
             OFFSET 0) e
         WHERE k.alone IS NOT NULL"#,
        cluster,
        jobs as &[Option<&str>],
        nodes as &[Option<&str>],
        starts,
        ends,
        alone as &[Option<Uuid>],
        max_span.num_milliseconds() as f64 / 1000.0,
        lowest,
        highest,
    )
    .fetch_all(&mut *conn)
    .await
}

/// Failures as columns, one entry per failure, for one bulk insert.
#[derive(Debug, Default)]
pub struct FailureColumns {
    pub id: Vec<Uuid>,
    pub cluster: Vec<String>,
    pub key: Vec<String>,
    pub job: Vec<Option<String>>,
    pub first: Vec<DateTime<Utc>>,
    pub last: Vec<DateTime<Utc>>,
    /// Node names joined by U+001F (UNNEST would flatten a two-dimensional array).
    pub nodes: Vec<String>,
    /// Signal ids joined by commas (same reason).
    pub signals: Vec<String>,
    /// Each signal's kind, U+001F and code ('' when none), joined by U+001E.
    pub signal_kinds: Vec<String>,
    pub count: Vec<i32>,
    pub root: Vec<Uuid>,
    pub root_node: Vec<Option<String>>,
    pub root_gpu_index: Vec<Option<i32>>,
    pub root_gpu_uuid: Vec<Option<String>>,
    pub root_gpu_bus: Vec<Option<String>>,
    pub root_kind: Vec<String>,
    pub root_code: Vec<Option<i64>>,
    pub generation: Vec<String>,
    pub category: Vec<&'static str>,
    pub component: Vec<&'static str>,
    pub severity: Vec<&'static str>,
    pub transient: Vec<bool>,
    pub action: Vec<String>,
    pub rule: Vec<Option<String>>,
    /// Why the classification decided so (rule or lexicon terms).
    pub explanation: Vec<String>,
    pub explicit: Vec<bool>,
    pub symptom: Vec<Option<&'static str>>,
}

/// One statement for all the failures (UNNEST arrays).
pub async fn insert(conn: &mut PgConnection, c: FailureColumns, catalog_version: i64) -> Result<(), sqlx::Error> {
    if c.id.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO failures (id, cluster, correlation_key, job_id, first_at, last_at, nodes, signal_ids, signal_count,
                               root_signal, root_node, root_kind, root_code, signal_generation, category, component,
                               severity, transient, action, rule_id, explicit_cause, symptom, catalog_version, explanation,
                               signal_kinds, root_gpu_index, root_gpu_uuid, root_gpu_bus)
         SELECT id, cluster, key, job, first_at, last_at,
                CASE WHEN nodes = '' THEN '{}'::text[] ELSE string_to_array(nodes, E'\\x1f') END,
                string_to_array(signals, ',')::uuid[], cnt, root, root_node, root_kind, root_code, generation,
                category, component, severity, transient, action, rule_id, explicit, symptom, $23, explanation,
                string_to_array(kinds, E'\\x1e'), gpu_index, gpu_uuid, gpu_bus
         FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::text[],
                     $8::text[], $9::int[], $10::uuid[], $11::text[], $12::text[], $13::bigint[], $14::text[],
                     $15::text[], $16::text[], $17::text[], $18::bool[], $19::text[], $20::text[], $21::bool[],
                     $22::text[], $24::text[], $25::text[], $26::int[], $27::text[], $28::text[])
              AS t(id, cluster, key, job, first_at, last_at, nodes, signals, cnt, root, root_node, root_kind,
                   root_code, generation, category, component, severity, transient, action, rule_id, explicit, symptom,
                   explanation, kinds, gpu_index, gpu_uuid, gpu_bus)",
        &c.id,
        &c.cluster,
        &c.key,
        &c.job as &[Option<String>],
        &c.first,
        &c.last,
        &c.nodes,
        &c.signals,
        &c.count,
        &c.root,
        &c.root_node as &[Option<String>],
        &c.root_kind,
        &c.root_code as &[Option<i64>],
        &c.generation,
        &c.category as &[&str],
        &c.component as &[&str],
        &c.severity as &[&str],
        &c.transient,
        &c.action,
        &c.rule as &[Option<String>],
        &c.explicit,
        &c.symptom as &[Option<&str>],
        catalog_version,
        &c.explanation,
        &c.signal_kinds,
        &c.root_gpu_index as &[Option<i32>],
        &c.root_gpu_uuid as &[Option<String>],
        &c.root_gpu_bus as &[Option<String>],
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}
