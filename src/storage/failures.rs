//! Materialised failures: rebuilt for the keys a batch touched, or wholesale on a catalog change.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use futures_util::TryStreamExt;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::classify::Catalog;
use crate::domain::event::Event;
use crate::domain::gpu::generation_of;
use crate::domain::taxonomy::{Category, Component, RootCause, Symptom};
use crate::fold::{CorrelationKey, FailureDraft, Signal, fold};

#[derive(sqlx::FromRow)]
struct SignalRow {
    id: Uuid,
    occurred_at: DateTime<Utc>,
    cluster: String,
    node: Option<String>,
    job_id: Option<String>,
    gpu_model: Option<String>,
    kind: String,
    code: Option<i64>,
    symptom: Option<String>,
    rc_category: Option<String>,
    rc_component: Option<String>,
    message: Option<String>,
    /// The job that ran on the node when a node-only signal occurred (see `ATTRIBUTED_JOB`).
    attributed_job: Option<String>,
}

impl SignalRow {
    fn key(&self) -> CorrelationKey {
        CorrelationKey::of(
            self.job_id.as_deref().or(self.attributed_job.as_deref()),
            self.node.as_deref(),
            self.id,
        )
    }

    fn into_signal(self, catalog: &Catalog) -> Signal {
        let explicit = match (
            self.rc_category.as_deref().and_then(Category::parse),
            self.rc_component.as_deref().and_then(Component::parse),
        ) {
            (Some(category), Some(component)) => RootCause::new(category, component).ok(),
            _ => None,
        };
        let classification = catalog.classify(&self.kind, self.code, self.message.as_deref(), explicit);
        Signal {
            id: self.id,
            occurred_at: self.occurred_at,
            node: self.node,
            gpu_model: self.gpu_model,
            kind: self.kind,
            code: self.code,
            symptom: self.symptom.as_deref().and_then(Symptom::parse),
            classification,
        }
    }
}

const SIGNAL_COLUMNS: &str =
    "id, occurred_at, cluster, node, job_id, gpu_model, kind, code, symptom, rc_category, rc_component, message";

/// Job attribution, computed when folding (the stored event is never rewritten): a signal with a
/// node but no job_id belongs to the job that ran on that node when it occurred, the latest
/// started one (then the smallest id) when runs overlap. A lateral subquery over an event `e`
/// with columns cluster, node, job_id, occurred_at; yields `aj.job_id`, NULL when none ran.
const ATTRIBUTED_JOB: &str = "LEFT JOIN LATERAL (
        SELECT j.job_id FROM jobs j
        WHERE e.job_id IS NULL AND e.node IS NOT NULL AND j.cluster = e.cluster AND j.nodes @> ARRAY[e.node]
          AND j.started_at <= e.occurred_at AND (j.ended_at IS NULL OR e.occurred_at <= j.ended_at)
        ORDER BY j.started_at DESC, j.job_id LIMIT 1) aj ON true";

/// Stands in for "still running" in ranges (chrono has no infinity); far from overflow when widened.
fn open_end() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("9999-01-01T00:00:00Z")
        .expect("valid timestamp")
        .with_timezone(&Utc)
}

/// The time range of `key` to re-fold, per (cluster, key).
pub type Touched = BTreeMap<(String, CorrelationKey), (DateTime<Utc>, DateTime<Utc>)>;

/// Adds `[start, end]` to the range of (cluster, key).
pub fn touch(touched: &mut Touched, cluster: &str, key: CorrelationKey, start: DateTime<Utc>, end: DateTime<Utc>) {
    let span = touched.entry((cluster.to_string(), key)).or_insert((start, end));
    span.0 = span.0.min(start);
    span.1 = span.1.max(end);
}

/// What a job record changes in the fold, for a job as it was (`old`) and as it is now: its
/// key over its run, and the node keys of its nodes over its run (their node-only signals move
/// between the node and the job).
pub fn touch_job(
    touched: &mut Touched,
    cluster: &str,
    job_id: &str,
    nodes: &[String],
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
) {
    let end = end.unwrap_or_else(open_end);
    touch(touched, cluster, CorrelationKey::Job(job_id.to_string()), start, end);
    for n in nodes {
        touch(touched, cluster, CorrelationKey::Node(n.clone()), start, end);
    }
}

/// Re-folds the keys that newly stored events touch. Runs in the ingest transaction, so the
/// events and their failures commit together. Set-based: a fixed number of statements per batch,
/// whatever the number of keys.
pub async fn correlate(
    conn: &mut PgConnection,
    catalog: &Catalog,
    window: Duration,
    events: &[&Event],
) -> Result<usize, sqlx::Error> {
    let events: Vec<&Event> = events
        .iter()
        .copied()
        .filter(|e| crate::fold::participates(&e.kind, e.symptom))
        .collect();
    // Node-only signals fold under the job that ran on their node: one statement for the batch.
    let node_only: Vec<&Event> = events
        .iter()
        .copied()
        .filter(|e| e.job_id.is_none() && e.node.is_some())
        .collect();
    let mut attributed: BTreeMap<Uuid, String> = BTreeMap::new();
    if !node_only.is_empty() {
        let sql = format!(
            "SELECT e.id, aj.job_id
             FROM (SELECT u.*, NULL::text AS job_id
                   FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::timestamptz[]) AS u(id, cluster, node, occurred_at)) AS e
             {ATTRIBUTED_JOB}
             WHERE aj.job_id IS NOT NULL"
        );
        let rows: Vec<(Uuid, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(node_only.iter().map(|e| e.id).collect::<Vec<_>>())
            .bind(node_only.iter().map(|e| e.cluster.as_str()).collect::<Vec<_>>())
            .bind(node_only.iter().map(|e| e.node.as_deref()).collect::<Vec<_>>())
            .bind(node_only.iter().map(|e| e.occurred_at).collect::<Vec<_>>())
            .fetch_all(&mut *conn)
            .await?;
        attributed.extend(rows);
    }
    let mut touched = Touched::new();
    for e in &events {
        let job = e.job_id.as_deref().or(attributed.get(&e.id).map(String::as_str));
        touch(
            &mut touched,
            &e.cluster,
            CorrelationKey::of(job, e.node.as_deref(), e.id),
            e.occurred_at,
            e.occurred_at,
        );
    }
    refold(conn, catalog, window, &touched).await
}

/// Re-folds the failures of each (cluster, key) whose sessions come within the window of its
/// range: a fixed number of statements whatever the number of keys.
pub async fn refold(
    conn: &mut PgConnection,
    catalog: &Catalog,
    window: Duration,
    touched: &Touched,
) -> Result<usize, sqlx::Error> {
    if touched.is_empty() {
        return Ok(0);
    }
    // Keys are locked in ascending lock-id order so that concurrent batches cannot deadlock (also
    // when two keys hash to the same id).
    let lock_keys: Vec<String> = touched
        .keys()
        .filter(|(_, k)| k.alone().is_none())
        .map(|(c, k)| format!("{c}\n{}", k.as_string()))
        .collect();
    if !lock_keys.is_empty() {
        sqlx::query(
            "SELECT count(pg_advisory_xact_lock(h))
             FROM (SELECT DISTINCT hashtextextended(k, 0) AS h FROM UNNEST($1::text[]) AS k ORDER BY h) AS locks",
        )
        .bind(&lock_keys)
        .execute(&mut *conn)
        .await?;
    }
    let clusters: Vec<&str> = touched.keys().map(|(c, _)| c.as_str()).collect();
    let keys: Vec<String> = touched.keys().map(|(_, k)| k.as_string()).collect();
    let probe_start: Vec<DateTime<Utc>> = touched.values().map(|(min, _)| *min - window).collect();
    let probe_end: Vec<DateTime<Utc>> = touched.values().map(|(_, max)| *max + window).collect();
    // Existing failures within a window of the new signals are re-folded with them: widen each
    // key's range to cover them, then delete them.
    let spans: Vec<(i64, DateTime<Utc>, DateTime<Utc>)> = sqlx::query_as(
        "SELECT k.idx, min(f.first_at), max(f.last_at)
         FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS k(cluster, key, s, e, idx)
         JOIN failures f ON f.cluster = k.cluster AND f.correlation_key = k.key AND f.last_at >= k.s AND f.first_at <= k.e
         GROUP BY k.idx",
    )
    .bind(&clusters)
    .bind(&keys)
    .bind(&probe_start)
    .bind(&probe_end)
    .fetch_all(&mut *conn)
    .await?;
    let mut ranges: Vec<(DateTime<Utc>, DateTime<Utc>)> = touched.values().copied().collect();
    for (idx, fmin, fmax) in spans {
        let r = &mut ranges[(idx - 1) as usize];
        r.0 = r.0.min(fmin);
        r.1 = r.1.max(fmax);
    }
    let range_start: Vec<DateTime<Utc>> = ranges.iter().map(|r| r.0).collect();
    let range_end: Vec<DateTime<Utc>> = ranges.iter().map(|r| r.1).collect();
    sqlx::query(
        "DELETE FROM failures f
         USING UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS k(cluster, key, s, e)
         WHERE f.cluster = k.cluster AND f.correlation_key = k.key AND f.last_at >= k.s AND f.first_at <= k.e",
    )
    .bind(&clusters)
    .bind(&keys)
    .bind(&range_start)
    .bind(&range_end)
    .execute(&mut *conn)
    .await?;
    // All signals of all touched keys within their ranges, in one statement.
    let jobs: Vec<Option<&str>> = touched.keys().map(|(_, k)| k.job()).collect();
    let nodes: Vec<Option<&str>> = touched.keys().map(|(_, k)| k.node()).collect();
    let alone: Vec<Uuid> = touched.keys().filter_map(|(_, k)| k.alone()).collect();
    let cols = SIGNAL_COLUMNS
        .split(", ")
        .map(|c| format!("e.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    // A job key holds the signals naming the job and the node-only signals attributed to it (on its
    // nodes, during its run and in range); a node key, the node-only signals attributed to no job.
    let sql = format!(
        "WITH k AS (SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[])
                    AS k(cluster, job, node, s, e))
         SELECT {cols}, NULL::text AS attributed_job FROM k JOIN events e
             ON e.cluster = k.cluster AND e.job_id = k.job AND e.occurred_at BETWEEN k.s AND k.e
         WHERE k.job IS NOT NULL
         UNION ALL
         SELECT {cols}, aj.job_id FROM k
             JOIN jobs j ON j.cluster = k.cluster AND j.job_id = k.job
             CROSS JOIN LATERAL (SELECT DISTINCT unnest(j.nodes)) AS jn(node)
             JOIN events e ON e.cluster = k.cluster AND e.job_id IS NULL AND e.node = jn.node
                 AND e.occurred_at BETWEEN GREATEST(k.s, j.started_at) AND LEAST(k.e, COALESCE(j.ended_at, 'infinity'))
             {ATTRIBUTED_JOB}
         WHERE k.job IS NOT NULL AND aj.job_id = k.job
         UNION ALL
         SELECT {cols}, NULL FROM k JOIN events e
             ON e.cluster = k.cluster AND e.job_id IS NULL AND e.node = k.node AND e.occurred_at BETWEEN k.s AND k.e
             {ATTRIBUTED_JOB}
         WHERE k.job IS NULL AND k.node IS NOT NULL AND aj.job_id IS NULL
         UNION ALL
         SELECT {cols}, NULL FROM events e WHERE e.id = ANY($6)"
    );
    let rows: Vec<SignalRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&clusters)
        .bind(&jobs)
        .bind(&nodes)
        .bind(&range_start)
        .bind(&range_end)
        .bind(&alone)
        .fetch_all(&mut *conn)
        .await?;
    let mut grouped: BTreeMap<(String, CorrelationKey), Vec<Signal>> = BTreeMap::new();
    for row in rows {
        let key = (row.cluster.clone(), row.key());
        grouped.entry(key).or_default().push(row.into_signal(catalog));
    }
    let drafts: Vec<(String, CorrelationKey, FailureDraft)> = grouped
        .into_iter()
        .flat_map(|((cluster, key), signals)| {
            fold(&cluster, &key, signals, window)
                .into_iter()
                .map(move |d| (cluster.clone(), key.clone(), d))
        })
        .collect();
    for chunk in drafts.chunks(5_000) {
        insert_rows(conn, chunk.iter().map(|(c, k, d)| (c.as_str(), k, d)), catalog.version).await?;
    }
    Ok(drafts.len())
}

/// Rebuilds every failure from every signal with `catalog` (after a catalog change, in the same
/// transaction). Returns the number of failures.
pub async fn rebuild_all(conn: &mut PgConnection, catalog: &Catalog, window: Duration) -> Result<usize, sqlx::Error> {
    sqlx::query("DELETE FROM failures").execute(&mut *conn).await?;
    let mut pending: Vec<(String, CorrelationKey, FailureDraft)> = Vec::new();
    {
        let cols = SIGNAL_COLUMNS
            .split(", ")
            .map(|c| format!("e.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {cols}, aj.job_id AS attributed_job FROM events e
             {ATTRIBUTED_JOB}
             ORDER BY e.cluster, (CASE WHEN COALESCE(e.job_id, aj.job_id) IS NOT NULL THEN 'job:' || COALESCE(e.job_id, aj.job_id)
                                       WHEN e.node IS NOT NULL THEN 'node:' || e.node
                                       ELSE 'alone:' || e.id::text END), e.occurred_at, e.id"
        );
        let mut rows = sqlx::query_as::<_, SignalRow>(sqlx::AssertSqlSafe(sql)).fetch(&mut *conn);
        let mut current: Option<(String, CorrelationKey)> = None;
        let mut batch: Vec<Signal> = Vec::new();
        while let Some(row) = rows.try_next().await? {
            let this = (row.cluster.clone(), row.key());
            if current.as_ref() != Some(&this) {
                if let Some((c, k)) = current.take() {
                    pending.extend(
                        fold(&c, &k, std::mem::take(&mut batch), window)
                            .into_iter()
                            .map(|d| (c.clone(), k.clone(), d)),
                    );
                }
                current = Some(this);
            }
            batch.push(row.into_signal(catalog));
        }
        if let Some((c, k)) = current.take() {
            pending.extend(
                fold(&c, &k, batch, window)
                    .into_iter()
                    .map(|d| (c.clone(), k.clone(), d)),
            );
        }
    }
    let total = pending.len();
    for chunk in pending.chunks(5_000) {
        insert_rows(conn, chunk.iter().map(|(c, k, d)| (c.as_str(), k, d)), catalog.version).await?;
    }
    Ok(total)
}

/// One statement per call (UNNEST). Array columns travel as joined text, because UNNEST would
/// flatten a two-dimensional array.
async fn insert_rows<'a>(
    conn: &mut PgConnection,
    rows: impl Iterator<Item = (&'a str, &'a CorrelationKey, &'a FailureDraft)>,
    version: i64,
) -> Result<(), sqlx::Error> {
    let mut c = Cols::default();
    for (cluster, key, d) in rows {
        c.id.push(d.id);
        c.cluster.push(cluster.to_string());
        c.key.push(key.as_string());
        c.job.push(key.job().map(str::to_string));
        c.first.push(d.first_at);
        c.last.push(d.last_at);
        c.nodes.push(d.nodes.join("\u{1f}"));
        c.signals
            .push(d.signal_ids.iter().map(Uuid::to_string).collect::<Vec<_>>().join(","));
        c.count.push(d.signal_ids.len() as i32);
        c.root.push(d.root_signal);
        c.root_node.push(d.root_node.clone());
        c.root_kind.push(d.root_kind.clone());
        c.root_code.push(d.root_code);
        c.generation.push(
            d.root_gpu_model
                .as_deref()
                .map_or("unknown", |m| generation_of(m).as_str())
                .to_string(),
        );
        c.category.push(d.classification.root_cause.category.as_str());
        c.component.push(d.classification.root_cause.component.as_str());
        c.severity.push(d.classification.severity.as_str());
        c.transient.push(d.classification.transient);
        c.action.push(d.classification.action.clone());
        c.rule.push(d.classification.rule_id.clone());
        c.explanation.push(d.classification.explanation.clone());
        c.explicit.push(d.classification.explicit);
        c.symptom.push(d.symptom.map(|s| s.as_str()));
    }
    if c.id.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO failures (id, cluster, correlation_key, job_id, first_at, last_at, nodes, signal_ids, signal_count,
                               root_signal, root_node, root_kind, root_code, signal_generation, category, component,
                               severity, transient, action, rule_id, explicit_cause, symptom, catalog_version, explanation)
         SELECT id, cluster, key, job, first_at, last_at,
                CASE WHEN nodes = '' THEN '{}'::text[] ELSE string_to_array(nodes, E'\\x1f') END,
                string_to_array(signals, ',')::uuid[], cnt, root, root_node, root_kind, root_code, generation,
                category, component, severity, transient, action, rule_id, explicit, symptom, $23, explanation
         FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::text[],
                     $8::text[], $9::int[], $10::uuid[], $11::text[], $12::text[], $13::bigint[], $14::text[],
                     $15::text[], $16::text[], $17::text[], $18::bool[], $19::text[], $20::text[], $21::bool[],
                     $22::text[], $24::text[])
              AS t(id, cluster, key, job, first_at, last_at, nodes, signals, cnt, root, root_node, root_kind,
                   root_code, generation, category, component, severity, transient, action, rule_id, explicit, symptom,
                   explanation)",
    )
    .bind(c.id)
    .bind(c.cluster)
    .bind(c.key)
    .bind(c.job)
    .bind(c.first)
    .bind(c.last)
    .bind(c.nodes)
    .bind(c.signals)
    .bind(c.count)
    .bind(c.root)
    .bind(c.root_node)
    .bind(c.root_kind)
    .bind(c.root_code)
    .bind(c.generation)
    .bind(c.category)
    .bind(c.component)
    .bind(c.severity)
    .bind(c.transient)
    .bind(c.action)
    .bind(c.rule)
    .bind(c.explicit)
    .bind(c.symptom)
    .bind(version)
    .bind(c.explanation)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[derive(Default)]
struct Cols {
    id: Vec<Uuid>,
    cluster: Vec<String>,
    key: Vec<String>,
    job: Vec<Option<String>>,
    first: Vec<DateTime<Utc>>,
    last: Vec<DateTime<Utc>>,
    nodes: Vec<String>,
    signals: Vec<String>,
    count: Vec<i32>,
    root: Vec<Uuid>,
    root_node: Vec<Option<String>>,
    root_kind: Vec<String>,
    root_code: Vec<Option<i64>>,
    generation: Vec<String>,
    category: Vec<&'static str>,
    component: Vec<&'static str>,
    severity: Vec<&'static str>,
    transient: Vec<bool>,
    action: Vec<String>,
    rule: Vec<Option<String>>,
    explanation: Vec<String>,
    explicit: Vec<bool>,
    symptom: Vec<Option<&'static str>>,
}
