//! The rollup tables (migrations 0014 and 0015): what the failures of a selection contribute to them
//! ("facts", read before and after a write), additive upserts of the difference, and the reads the
//! analytics make over the whole days and months of a window. The bookkeeping (which writes touch
//! which failures, the difference) lives in `crate::ingest::rollups`.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, TimeZone, Utc};
use sqlx::{PgConnection, PgPool};

/// What a set of failures contributes to the rollups, grouped by every dimension of both tables.
/// Dimensions resolve as the analytics resolve them: generation and model from the root node's
/// inventory entry, else the root signal; the effective (post-mortem over automatic) cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    pub day: NaiveDate,
    pub cluster: String,
    pub generation: String,
    pub model: String,
    pub category: String,
    pub component: String,
    pub symptom: String,
    /// The root node's group label, '' when unlabelled, unknown or without a root node.
    pub node_group: String,
    /// The root node when it has no group label ('' for a labelled node or no node).
    pub root_node: String,
    pub failures: i64,
    pub signals: i64,
}

/// What a set of failures contributes to `rollup_errors`, per UTC day of first_at, cluster, signal
/// kind and code ('' when none) and the failures' own severity (their root signal's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFact {
    pub day: NaiveDate,
    pub cluster: String,
    pub kind: String,
    pub code: String,
    pub severity: String,
    /// Failures whose root signal has this kind and code.
    pub root_failures: i64,
    /// Failures holding at least one signal of this kind and code.
    pub holding_failures: i64,
    /// Signals of this kind and code in them.
    pub signals: i64,
}

/// What a selection of failures contributes to every rollup table. `errors` stays empty for the
/// selections of writes that cannot move a failure there (post-mortems, inventory: kind, code and
/// severity are the failure row's own, rewritten only by a re-fold or a rebuild).
#[derive(Debug, Default)]
pub struct Facts {
    pub causes: Vec<Fact>,
    pub errors: Vec<ErrorFact>,
}

impl Facts {
    pub fn is_empty(&self) -> bool {
        self.causes.is_empty() && self.errors.is_empty()
    }
}

/// Facts of the failures of each (cluster, key) overlapping its range: the same selection as
/// `failures::delete_in_ranges`, so re-folded failures are read before the delete and after the insert.
pub async fn facts_in_ranges(
    conn: &mut PgConnection,
    cluster: &str,
    keys: &[String],
    starts: &[DateTime<Utc>],
    ends: &[DateTime<Utc>],
) -> Result<Facts, sqlx::Error> {
    let causes = cause_facts_in_ranges(conn, cluster, keys, starts, ends).await?;
    let errors = sqlx::query_as!(
        ErrorFact,
        r#"SELECT (f.first_at AT TIME ZONE 'UTC')::date AS "day!", f.cluster AS "cluster!", x.kind AS "kind!",
                  x.code AS "code!", f.severity AS "severity!", sum(x.root_failures)::bigint AS "root_failures!",
                  sum(x.holding_failures)::bigint AS "holding_failures!", sum(x.signals)::bigint AS "signals!"
           FROM UNNEST($2::text[], $3::timestamptz[], $4::timestamptz[]) AS k(key, s, e)
           JOIN failures f ON f.cluster = $1 AND f.correlation_key = k.key AND f.last_at >= k.s AND f.first_at <= k.e
           CROSS JOIN LATERAL failure_error_entries(f.root_kind, f.root_code, f.signal_kinds) x
           GROUP BY 1, 2, 3, 4, 5"#,
        cluster,
        keys,
        starts,
        ends,
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(Facts { causes, errors })
}

/// `rollup_errors` facts of the failures whose first signal is in `[from, to)` (of `cluster`, or
/// all): the partial days of a window.
pub async fn error_facts_between<'e>(
    db: impl sqlx::PgExecutor<'e>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<ErrorFact>, sqlx::Error> {
    sqlx::query_as!(
        ErrorFact,
        r#"SELECT (f.first_at AT TIME ZONE 'UTC')::date AS "day!", f.cluster AS "cluster!", x.kind AS "kind!",
                  x.code AS "code!", f.severity AS "severity!", sum(x.root_failures)::bigint AS "root_failures!",
                  sum(x.holding_failures)::bigint AS "holding_failures!", sum(x.signals)::bigint AS "signals!"
           FROM failures f CROSS JOIN LATERAL failure_error_entries(f.root_kind, f.root_code, f.signal_kinds) x
           WHERE f.first_at >= $1 AND f.first_at < $2 AND ($3::text IS NULL OR f.cluster = $3)
           GROUP BY 1, 2, 3, 4, 5"#,
        from,
        to,
        cluster,
    )
    .fetch_all(db)
    .await
}

async fn cause_facts_in_ranges(
    conn: &mut PgConnection,
    cluster: &str,
    keys: &[String],
    starts: &[DateTime<Utc>],
    ends: &[DateTime<Utc>],
) -> Result<Vec<Fact>, sqlx::Error> {
    sqlx::query_as!(
        Fact,
        r#"SELECT (f.first_at AT TIME ZONE 'UTC')::date AS "day!", f.cluster AS "cluster!",
                  COALESCE(n.gpu_generation, f.signal_generation) AS "generation!", COALESCE(n.gpu_model, 'unknown') AS "model!",
                  f.effective_category AS "category!", f.effective_component AS "component!",
                  COALESCE(f.symptom, 'unspecified') AS "symptom!", COALESCE(n.group_label, '') AS "node_group!",
                  CASE WHEN n.group_label IS NULL THEN COALESCE(f.root_node, '') ELSE '' END AS "root_node!",
                  count(*) AS "failures!", sum(f.signal_count)::bigint AS "signals!"
           FROM UNNEST($2::text[], $3::timestamptz[], $4::timestamptz[]) AS k(key, s, e)
           JOIN failures_effective f ON f.cluster = $1 AND f.correlation_key = k.key AND f.last_at >= k.s AND f.first_at <= k.e
           LEFT JOIN nodes n ON n.cluster = f.cluster AND n.hostname = f.root_node
           GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9"#,
        cluster,
        keys,
        starts,
        ends,
    )
    .fetch_all(&mut *conn)
    .await
}

/// Facts of the failures whose root node is one of (cluster, hostname), for an inventory change
/// (which moves failures in `rollup_causes` and `rollup_groups` only).
pub async fn facts_of_nodes(
    conn: &mut PgConnection,
    clusters: &[String],
    hosts: &[String],
) -> Result<Facts, sqlx::Error> {
    if clusters.is_empty() {
        return Ok(Facts::default());
    }
    let causes = sqlx::query_as!(
        Fact,
        r#"SELECT (f.first_at AT TIME ZONE 'UTC')::date AS "day!", f.cluster AS "cluster!",
                  COALESCE(n.gpu_generation, f.signal_generation) AS "generation!", COALESCE(n.gpu_model, 'unknown') AS "model!",
                  f.effective_category AS "category!", f.effective_component AS "component!",
                  COALESCE(f.symptom, 'unspecified') AS "symptom!", COALESCE(n.group_label, '') AS "node_group!",
                  CASE WHEN n.group_label IS NULL THEN COALESCE(f.root_node, '') ELSE '' END AS "root_node!",
                  count(*) AS "failures!", sum(f.signal_count)::bigint AS "signals!"
           FROM UNNEST($1::text[], $2::text[]) AS k(cluster, hostname)
           JOIN failures_effective f ON f.cluster = k.cluster AND f.root_node = k.hostname
           LEFT JOIN nodes n ON n.cluster = f.cluster AND n.hostname = f.root_node
           GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9"#,
        clusters,
        hosts,
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(Facts {
        causes,
        errors: Vec::new(),
    })
}

/// Facts of the failures of `cluster` with these ids, for a lifecycle write (which moves only the
/// failure whose span holds the lifecycle's anchor, in `rollup_causes` only). Each failure is read by
/// its primary key and its lifecycles by `failure_lifecycle_anchor_idx` within its own span: the
/// cost does not grow with the rest of its key's history.
pub async fn facts_of_failures(
    conn: &mut PgConnection,
    cluster: &str,
    ids: &[uuid::Uuid],
) -> Result<Facts, sqlx::Error> {
    if ids.is_empty() {
        return Ok(Facts::default());
    }
    let causes = sqlx::query_as!(
        Fact,
        r#"SELECT (f.first_at AT TIME ZONE 'UTC')::date AS "day!", f.cluster AS "cluster!",
                  COALESCE(n.gpu_generation, f.signal_generation) AS "generation!", COALESCE(n.gpu_model, 'unknown') AS "model!",
                  COALESCE(l.pm_category, f.category) AS "category!", COALESCE(l.pm_component, f.component) AS "component!",
                  COALESCE(f.symptom, 'unspecified') AS "symptom!", COALESCE(n.group_label, '') AS "node_group!",
                  CASE WHEN n.group_label IS NULL THEN COALESCE(f.root_node, '') ELSE '' END AS "root_node!",
                  count(*) AS "failures!", sum(f.signal_count)::bigint AS "signals!"
           FROM failures f
           LEFT JOIN LATERAL (
               SELECT l.pm_category, l.pm_component FROM failure_lifecycle l
               WHERE l.cluster = $1 AND l.correlation_key = f.correlation_key AND l.anchor_at BETWEEN f.first_at AND f.last_at
               ORDER BY l.updated_at DESC, l.failure_id
               LIMIT 1
           ) l ON true
           LEFT JOIN nodes n ON n.cluster = f.cluster AND n.hostname = f.root_node
           WHERE f.cluster = $1 AND f.id = ANY($2)
           GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9"#,
        cluster,
        ids,
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(Facts {
        causes,
        errors: Vec::new(),
    })
}

/// The (cluster, hostname)s of an inventory write whose generation, model or group would change
/// (or that are new): their failures move between rollup rows.
pub async fn nodes_changing(
    conn: &mut PgConnection,
    clusters: &[String],
    hosts: &[String],
    models: &[String],
    generations: &[String],
    groups: &[Option<String>],
) -> Result<Vec<(String, String)>, sqlx::Error> {
    Ok(sqlx::query!(
        r#"SELECT u.cluster AS "cluster!", u.hostname AS "hostname!"
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS u(cluster, hostname, model, generation, grp)
           LEFT JOIN nodes n ON n.cluster = u.cluster AND n.hostname = u.hostname
           WHERE n.hostname IS NULL OR n.gpu_model IS DISTINCT FROM u.model
              OR n.gpu_generation IS DISTINCT FROM u.generation OR n.group_label IS DISTINCT FROM u.grp"#,
        clusters,
        hosts,
        models,
        generations,
        groups as &[Option<String>],
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| (r.cluster, r.hostname))
    .collect())
}

/// Rows of `rollup_causes` to add, as columns, in key order.
#[derive(Debug, Default)]
pub struct CauseColumns {
    pub period: Vec<&'static str>,
    pub bucket: Vec<NaiveDate>,
    pub cluster: Vec<String>,
    pub generation: Vec<String>,
    pub model: Vec<String>,
    pub category: Vec<String>,
    pub component: Vec<String>,
    pub symptom: Vec<String>,
    pub failures: Vec<i64>,
    pub signals: Vec<i64>,
}

/// Adds each row's counts to the stored row of its key (one statement; rows lock in the given
/// order, which every writer keeps sorted, so concurrent writers never deadlock).
pub async fn add_causes(conn: &mut PgConnection, c: &CauseColumns) -> Result<(), sqlx::Error> {
    if c.period.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO rollup_causes (period, bucket, cluster, generation, model, category, component, symptom, failures, signals)
         SELECT * FROM UNNEST($1::text[], $2::date[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                              $8::text[], $9::bigint[], $10::bigint[])
         ON CONFLICT (period, bucket, cluster, generation, model, category, component, symptom) DO UPDATE SET
             failures = rollup_causes.failures + EXCLUDED.failures,
             signals = rollup_causes.signals + EXCLUDED.signals",
        &c.period as &[&str],
        &c.bucket,
        &c.cluster,
        &c.generation,
        &c.model,
        &c.category,
        &c.component,
        &c.symptom,
        &c.failures,
        &c.signals,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Rows of `rollup_groups` to add, as columns, in key order.
#[derive(Debug, Default)]
pub struct GroupColumns {
    pub period: Vec<&'static str>,
    pub bucket: Vec<NaiveDate>,
    pub cluster: Vec<String>,
    pub node_group: Vec<String>,
    pub root_node: Vec<String>,
    pub failures: Vec<i64>,
}

pub async fn add_groups(conn: &mut PgConnection, c: &GroupColumns) -> Result<(), sqlx::Error> {
    if c.period.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO rollup_groups (period, bucket, cluster, node_group, root_node, failures)
         SELECT * FROM UNNEST($1::text[], $2::date[], $3::text[], $4::text[], $5::text[], $6::bigint[])
         ON CONFLICT (period, bucket, cluster, node_group, root_node) DO UPDATE SET
             failures = rollup_groups.failures + EXCLUDED.failures",
        &c.period as &[&str],
        &c.bucket,
        &c.cluster,
        &c.node_group,
        &c.root_node,
        &c.failures,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Rows of `rollup_errors` to add, as columns, in key order.
#[derive(Debug, Default)]
pub struct ErrorColumns {
    pub period: Vec<&'static str>,
    pub bucket: Vec<NaiveDate>,
    pub cluster: Vec<String>,
    pub kind: Vec<String>,
    pub code: Vec<String>,
    pub severity: Vec<String>,
    pub root_failures: Vec<i64>,
    pub holding_failures: Vec<i64>,
    pub signals: Vec<i64>,
}

pub async fn add_errors(conn: &mut PgConnection, c: &ErrorColumns) -> Result<(), sqlx::Error> {
    if c.period.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO rollup_errors (period, bucket, cluster, kind, code, severity, root_failures, holding_failures, signals)
         SELECT * FROM UNNEST($1::text[], $2::date[], $3::text[], $4::text[], $5::text[], $6::text[],
                              $7::bigint[], $8::bigint[], $9::bigint[])
         ON CONFLICT (period, bucket, cluster, kind, code, severity) DO UPDATE SET
             root_failures = rollup_errors.root_failures + EXCLUDED.root_failures,
             holding_failures = rollup_errors.holding_failures + EXCLUDED.holding_failures,
             signals = rollup_errors.signals + EXCLUDED.signals",
        &c.period as &[&str],
        &c.bucket,
        &c.cluster,
        &c.kind,
        &c.code,
        &c.severity,
        &c.root_failures,
        &c.holding_failures,
        &c.signals,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// How a window `[from, to)` splits: whole calendar quarters read from quarter rows, the other
/// whole UTC months from month rows, the other whole UTC days from day rows, and the partial days
/// at either end (`raw`) from the failures themselves. A year's window reads about three quarters
/// and a few months instead of twelve months (half the rows: MTBF's per-node rows are the many).
/// Empty ranges have start == end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    pub quarters: (NaiveDate, NaiveDate),
    /// Whole months before the first and after the last whole quarter.
    pub months: [(NaiveDate, NaiveDate); 2],
    /// Whole days before the first and after the last whole month.
    pub days: [(NaiveDate, NaiveDate); 2],
    pub raw: Vec<(DateTime<Utc>, DateTime<Utc>)>,
}

fn midnight(d: NaiveDate) -> DateTime<Utc> {
    Utc.from_utc_datetime(&d.and_time(NaiveTime::MIN))
}

/// The first day of `d`'s month (the bucket of its month rows).
pub fn month_start(d: NaiveDate) -> NaiveDate {
    d.with_day(1).expect("day 1 exists")
}

/// The first day of `d`'s calendar quarter (the bucket of its quarter rows).
pub fn quarter_start(d: NaiveDate) -> NaiveDate {
    NaiveDate::from_ymd_opt(d.year(), (d.month0() / 3) * 3 + 1, 1).expect("a quarter's first day exists")
}

/// The first whole unit at or after `d` and the last unit start at or before `e`, as a range
/// (empty, at `e`, when no whole unit fits).
fn whole_units(
    d: NaiveDate,
    e: NaiveDate,
    floor: fn(NaiveDate) -> NaiveDate,
    next: fn(NaiveDate) -> NaiveDate,
) -> (NaiveDate, NaiveDate) {
    let first = if floor(d) == d { d } else { next(floor(d)) };
    let last = floor(e);
    if first < last { (first, last) } else { (e, e) }
}

fn next_month(m: NaiveDate) -> NaiveDate {
    month_start(m + Duration::days(32))
}

fn next_quarter(q: NaiveDate) -> NaiveDate {
    quarter_start(q + Duration::days(93))
}

impl Coverage {
    pub fn of(from: DateTime<Utc>, to: DateTime<Utc>) -> Coverage {
        let floor = from.date_naive();
        let d0 = if midnight(floor) == from {
            floor
        } else {
            floor + Duration::days(1)
        };
        let d1 = to.date_naive();
        if from >= to || d0 >= d1 {
            let raw = if from < to { vec![(from, to)] } else { Vec::new() };
            return Coverage {
                quarters: (d1, d1),
                months: [(d1, d1), (d1, d1)],
                days: [(d1, d1), (d1, d1)],
                raw,
            };
        }
        let (m0, m1) = whole_units(d0, d1, month_start, next_month);
        let (q0, q1) = if m0 < m1 {
            whole_units(m0, m1, quarter_start, next_quarter)
        } else {
            (m1, m1)
        };
        let months = if q0 < q1 {
            [(m0, q0), (q1, m1)]
        } else {
            [(m0, m1), (m1, m1)]
        };
        let raw = [(from, midnight(d0)), (midnight(d1), to)]
            .into_iter()
            .filter(|(a, b)| a < b)
            .collect();
        Coverage {
            quarters: (q0, q1),
            months,
            days: [(d0, m0), (m1, d1)],
            raw,
        }
    }
}

#[derive(Debug)]
pub struct CauseTotal {
    pub cluster: String,
    pub generation: String,
    pub model: String,
    pub category: String,
    pub component: String,
    pub symptom: String,
    pub failures: i64,
    pub signals: i64,
}

/// `rollup_causes` summed over the whole days, months and quarters of `c`.
pub async fn cause_totals(db: &PgPool, c: &Coverage, cluster: Option<&str>) -> Result<Vec<CauseTotal>, sqlx::Error> {
    sqlx::query_as!(
        CauseTotal,
        r#"SELECT cluster, generation, model, category, component, symptom,
                  sum(failures)::bigint AS "failures!", sum(signals)::bigint AS "signals!"
           FROM rollup_causes
           WHERE ((period = 'quarter' AND bucket >= $1 AND bucket < $2)
               OR (period = 'month' AND ((bucket >= $3 AND bucket < $4) OR (bucket >= $5 AND bucket < $6)))
               OR (period = 'day' AND ((bucket >= $7 AND bucket < $8) OR (bucket >= $9 AND bucket < $10))))
             AND ($11::text IS NULL OR cluster = $11)
           GROUP BY 1, 2, 3, 4, 5, 6
           HAVING sum(failures) <> 0"#,
        c.quarters.0,
        c.quarters.1,
        c.months[0].0,
        c.months[0].1,
        c.months[1].0,
        c.months[1].1,
        c.days[0].0,
        c.days[0].1,
        c.days[1].0,
        c.days[1].1,
        cluster,
    )
    .fetch_all(db)
    .await
}

/// The version of one (period, bucket, cluster) of a rollup (migration 0021).
#[derive(Debug)]
pub struct BucketVersion {
    pub period: String,
    pub bucket: NaiveDate,
    pub cluster: String,
    pub version: i64,
}

/// The versions of the `rollup_groups` buckets of `c` (whole days, months, quarters) that hold
/// rows, in (period, bucket, cluster) order: a few dozen rows where the buckets hold thousands.
pub async fn group_versions(
    db: &PgPool,
    c: &Coverage,
    cluster: Option<&str>,
) -> Result<Vec<BucketVersion>, sqlx::Error> {
    sqlx::query_as!(
        BucketVersion,
        r#"SELECT period, bucket, cluster, version FROM rollup_versions
           WHERE rollup = 'groups'
             AND ((period = 'quarter' AND bucket >= $1 AND bucket < $2)
                  OR (period = 'month' AND ((bucket >= $3 AND bucket < $4) OR (bucket >= $5 AND bucket < $6)))
                  OR (period = 'day' AND ((bucket >= $7 AND bucket < $8) OR (bucket >= $9 AND bucket < $10))))
             AND ($11::text IS NULL OR cluster = $11)
           ORDER BY period, bucket, cluster"#,
        c.quarters.0,
        c.quarters.1,
        c.months[0].0,
        c.months[0].1,
        c.months[1].0,
        c.months[1].1,
        c.days[0].0,
        c.days[0].1,
        c.days[1].0,
        c.days[1].1,
        cluster,
    )
    .fetch_all(db)
    .await
}

/// The versions of the `rollup_causes` months starting in `[from, to)` that hold rows, in
/// (bucket, cluster) order. A month's version moves with any of its days.
pub async fn cause_month_versions(
    db: &PgPool,
    from: NaiveDate,
    to: NaiveDate,
    cluster: Option<&str>,
) -> Result<Vec<BucketVersion>, sqlx::Error> {
    sqlx::query_as!(
        BucketVersion,
        r#"SELECT period, bucket, cluster, version FROM rollup_versions
           WHERE rollup = 'causes' AND period = 'month' AND bucket >= $1 AND bucket < $2
             AND ($3::text IS NULL OR cluster = $3)
           ORDER BY bucket, cluster"#,
        from,
        to,
        cluster,
    )
    .fetch_all(db)
    .await
}

#[derive(Debug)]
pub struct GroupRow {
    pub period: String,
    pub bucket: NaiveDate,
    pub cluster: String,
    pub node_group: String,
    pub root_node: String,
    pub failures: i64,
}

/// The non-zero rows of the given (period, bucket)s: one index range each.
pub async fn group_rows(
    db: &PgPool,
    periods: &[String],
    buckets: &[NaiveDate],
    cluster: Option<&str>,
) -> Result<Vec<GroupRow>, sqlx::Error> {
    sqlx::query_as!(
        GroupRow,
        r#"SELECT g.period AS "period!", g.bucket AS "bucket!", g.cluster AS "cluster!", g.node_group AS "node_group!",
                  g.root_node AS "root_node!", g.failures AS "failures!"
           FROM UNNEST($1::text[], $2::date[]) AS k(period, bucket)
           JOIN rollup_groups g ON g.period = k.period AND g.bucket = k.bucket
           WHERE ($3::text IS NULL OR g.cluster = $3) AND g.failures <> 0"#,
        periods,
        buckets,
        cluster,
    )
    .fetch_all(db)
    .await
}

/// Moves the version of each (rollup, period, bucket, cluster), sorted and distinct so
/// concurrent writers lock the rows in one order. The last statement of a rollup change: a
/// writer holds these rows only until it commits, and takes no rollup row after them.
pub async fn bump_versions(
    conn: &mut PgConnection,
    rollups: &[&'static str],
    periods: &[&'static str],
    buckets: &[NaiveDate],
    clusters: &[String],
) -> Result<(), sqlx::Error> {
    if rollups.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO rollup_versions (rollup, period, bucket, cluster, version)
         SELECT r, p, b, c, nextval('rollup_version_seq')
         FROM UNNEST($1::text[], $2::text[], $3::date[], $4::text[]) AS k(r, p, b, c)
         ON CONFLICT (rollup, period, bucket, cluster) DO UPDATE SET version = EXCLUDED.version",
        rollups as &[&str],
        periods as &[&str],
        buckets,
        clusters,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[derive(Debug)]
pub struct ErrorTotal {
    pub kind: String,
    /// '' when the signals had no code.
    pub code: String,
    pub severity: String,
    pub root_failures: i64,
    pub holding_failures: i64,
    pub signals: i64,
}

/// A partial day's facts, summed like the rollup rows (day and cluster dropped).
impl From<ErrorFact> for ErrorTotal {
    fn from(f: ErrorFact) -> ErrorTotal {
        ErrorTotal {
            kind: f.kind,
            code: f.code,
            severity: f.severity,
            root_failures: f.root_failures,
            holding_failures: f.holding_failures,
            signals: f.signals,
        }
    }
}

/// `rollup_errors` summed over the whole days, months and quarters of `c`.
pub async fn error_totals(db: &PgPool, c: &Coverage, cluster: Option<&str>) -> Result<Vec<ErrorTotal>, sqlx::Error> {
    sqlx::query_as!(
        ErrorTotal,
        r#"SELECT kind, code, severity, sum(root_failures)::bigint AS "root_failures!",
                  sum(holding_failures)::bigint AS "holding_failures!", sum(signals)::bigint AS "signals!"
           FROM rollup_errors
           WHERE ((period = 'quarter' AND bucket >= $1 AND bucket < $2)
               OR (period = 'month' AND ((bucket >= $3 AND bucket < $4) OR (bucket >= $5 AND bucket < $6)))
               OR (period = 'day' AND ((bucket >= $7 AND bucket < $8) OR (bucket >= $9 AND bucket < $10))))
             AND ($11::text IS NULL OR cluster = $11)
           GROUP BY 1, 2, 3
           HAVING sum(root_failures) <> 0 OR sum(holding_failures) <> 0"#,
        c.quarters.0,
        c.quarters.1,
        c.months[0].0,
        c.months[0].1,
        c.months[1].0,
        c.months[1].1,
        c.days[0].0,
        c.days[0].1,
        c.days[1].0,
        c.days[1].1,
        cluster,
    )
    .fetch_all(db)
    .await
}

#[derive(Debug)]
pub struct DayCategoryTotal {
    pub day: NaiveDate,
    pub category: String,
    pub failures: i64,
}

/// Failures per whole UTC day in `[from, to)` and effective category, from the day rows.
pub async fn daily_categories(
    db: &PgPool,
    from: NaiveDate,
    to: NaiveDate,
    cluster: Option<&str>,
) -> Result<Vec<DayCategoryTotal>, sqlx::Error> {
    sqlx::query_as!(
        DayCategoryTotal,
        r#"SELECT bucket AS day, category, sum(failures)::bigint AS "failures!"
           FROM rollup_causes
           WHERE period = 'day' AND bucket >= $1 AND bucket < $2 AND ($3::text IS NULL OR cluster = $3)
           GROUP BY 1, 2
           HAVING sum(failures) <> 0"#,
        from,
        to,
        cluster,
    )
    .fetch_all(db)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }
    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }
    /// Ranges the window reads nothing from.
    fn assert_empty(ranges: &[(NaiveDate, NaiveDate)]) {
        for (a, b) in ranges {
            assert_eq!(a, b, "{ranges:?}");
        }
    }

    #[test]
    fn a_year_from_midnight_is_whole_quarters_and_months() {
        let c = Coverage::of(t("2025-06-01T00:00:00Z"), t("2026-06-01T00:00:00Z"));
        // June, then the quarters July to March, then April and May.
        assert_eq!(c.quarters, (d("2025-07-01"), d("2026-04-01")));
        assert_eq!(
            c.months,
            [(d("2025-06-01"), d("2025-07-01")), (d("2026-04-01"), d("2026-06-01"))]
        );
        assert_empty(&c.days);
        assert!(c.raw.is_empty());
    }

    #[test]
    fn ragged_ends_split_into_days_and_raw_hours() {
        let c = Coverage::of(t("2026-01-30T10:00:00Z"), t("2026-04-02T06:00:00Z"));
        // February and March are whole months but not a whole quarter.
        assert_empty(&[c.quarters, c.months[1]]);
        assert_eq!(c.months[0], (d("2026-02-01"), d("2026-04-01")));
        assert_eq!(
            c.days,
            [(d("2026-01-31"), d("2026-02-01")), (d("2026-04-01"), d("2026-04-02"))]
        );
        assert_eq!(
            c.raw,
            vec![
                (t("2026-01-30T10:00:00Z"), t("2026-01-31T00:00:00Z")),
                (t("2026-04-02T00:00:00Z"), t("2026-04-02T06:00:00Z"))
            ]
        );
    }

    #[test]
    fn no_whole_month_reads_days_only() {
        let c = Coverage::of(t("2026-03-03T00:00:00Z"), t("2026-03-10T12:00:00Z"));
        assert_empty(&[c.quarters, c.months[0], c.months[1], c.days[1]]);
        assert_eq!(c.days[0], (d("2026-03-03"), d("2026-03-10")));
        assert_eq!(c.raw, vec![(t("2026-03-10T00:00:00Z"), t("2026-03-10T12:00:00Z"))]);
    }

    #[test]
    fn inside_one_day_is_all_raw() {
        let c = Coverage::of(t("2026-03-03T01:00:00Z"), t("2026-03-03T05:00:00Z"));
        assert_empty(&[c.quarters, c.months[0], c.months[1], c.days[0], c.days[1]]);
        assert_eq!(c.raw, vec![(t("2026-03-03T01:00:00Z"), t("2026-03-03T05:00:00Z"))]);
        assert!(
            Coverage::of(t("2026-03-03T01:00:00Z"), t("2026-03-03T01:00:00Z"))
                .raw
                .is_empty()
        );
    }

    #[test]
    fn quarters_with_months_and_days_on_both_sides() {
        // From 10 Feb 2025 to 20 Nov 2026 (ragged hours): days to 1 March, March, then the
        // quarters April 2025 to October 2026, then October, then days to the 20th.
        let c = Coverage::of(t("2025-02-09T18:00:00Z"), t("2026-11-20T06:00:00Z"));
        assert_eq!(c.quarters, (d("2025-04-01"), d("2026-10-01")));
        assert_eq!(
            c.months,
            [(d("2025-03-01"), d("2025-04-01")), (d("2026-10-01"), d("2026-11-01"))]
        );
        assert_eq!(
            c.days,
            [(d("2025-02-10"), d("2025-03-01")), (d("2026-11-01"), d("2026-11-20"))]
        );
        assert_eq!(c.raw.len(), 2);
        // Exactly one quarter, nothing else.
        let c = Coverage::of(t("2026-07-01T00:00:00Z"), t("2026-10-01T00:00:00Z"));
        assert_eq!(c.quarters, (d("2026-07-01"), d("2026-10-01")));
        assert_empty(&[c.months[0], c.months[1], c.days[0], c.days[1]]);
        assert!(c.raw.is_empty());
    }

    #[test]
    fn quarter_starts() {
        assert_eq!(quarter_start(d("2026-01-01")), d("2026-01-01"));
        assert_eq!(quarter_start(d("2026-03-31")), d("2026-01-01"));
        assert_eq!(quarter_start(d("2026-05-15")), d("2026-04-01"));
        assert_eq!(quarter_start(d("2026-09-30")), d("2026-07-01"));
        assert_eq!(quarter_start(d("2026-12-31")), d("2026-10-01"));
        assert_eq!(next_quarter(d("2026-10-01")), d("2027-01-01"));
    }

    #[test]
    fn month_boundaries_within_a_ragged_window() {
        // From mid-December to mid-February: January is the one whole month.
        let c = Coverage::of(t("2025-12-15T00:00:00Z"), t("2026-02-15T00:00:00Z"));
        assert_empty(&[c.quarters, c.months[1]]);
        assert_eq!(c.months[0], (d("2026-01-01"), d("2026-02-01")));
        assert_eq!(
            c.days,
            [(d("2025-12-15"), d("2026-01-01")), (d("2026-02-01"), d("2026-02-15"))]
        );
        assert!(c.raw.is_empty());
    }
}
