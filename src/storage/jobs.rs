//! Scheduler jobs.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use crate::domain::job::Job;

/// A job as stored before an upsert: what its record attributed until now.
#[derive(sqlx::FromRow)]
pub struct StoredRun {
    pub cluster: String,
    pub job_id: String,
    pub nodes: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
}

/// The stored runs of `jobs` (those already known), in one statement.
pub async fn stored_runs(conn: &mut PgConnection, jobs: &[Job]) -> Result<Vec<StoredRun>, sqlx::Error> {
    let clusters: Vec<&str> = jobs.iter().map(|j| j.cluster.as_str()).collect();
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    sqlx::query_as!(
        StoredRun,
        "SELECT j.cluster, j.job_id, j.nodes, j.started_at, j.ended_at
         FROM UNNEST($1::text[], $2::text[]) AS k(cluster, job_id)
         JOIN jobs j ON j.cluster = k.cluster AND j.job_id = k.job_id",
        &clusters as &[&str],
        &ids as &[&str],
    )
    .fetch_all(&mut *conn)
    .await
}

/// Upserts in one statement (UNNEST arrays). Node lists travel as joined text, because UNNEST would
/// flatten a two-dimensional array.
pub async fn upsert(conn: &mut PgConnection, jobs: &[Job]) -> Result<u64, sqlx::Error> {
    if jobs.is_empty() {
        return Ok(0);
    }
    let clusters: Vec<&str> = jobs.iter().map(|j| j.cluster.as_str()).collect();
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    let gpus: Vec<i32> = jobs.iter().map(|j| j.gpus).collect();
    let nodes: Vec<String> = jobs.iter().map(|j| j.nodes.join("\u{1f}")).collect();
    let starts: Vec<DateTime<Utc>> = jobs.iter().map(|j| j.start).collect();
    let ends: Vec<Option<DateTime<Utc>>> = jobs.iter().map(|j| j.end).collect();
    let states: Vec<&str> = jobs.iter().map(|j| j.state.as_str()).collect();
    let names: Vec<Option<&str>> = jobs.iter().map(|j| j.details.name.as_deref()).collect();
    let scheduler_states: Vec<Option<&str>> = jobs.iter().map(|j| j.details.scheduler_state.as_deref()).collect();
    let exit_codes: Vec<Option<i32>> = jobs.iter().map(|j| j.details.exit_code).collect();
    let exit_signals: Vec<Option<i32>> = jobs.iter().map(|j| j.details.exit_signal).collect();
    let derived: Vec<Option<i32>> = jobs.iter().map(|j| j.details.derived_exit_code).collect();
    let restarts: Vec<i32> = jobs.iter().map(|j| j.details.restarts).collect();
    let done = sqlx::query!(
        "INSERT INTO jobs (cluster, job_id, gpus, nodes, started_at, ended_at, state, name, scheduler_state,
                          exit_code, exit_signal, derived_exit_code, restarts)
         SELECT cluster, job_id, gpus,
                CASE WHEN nodes = '' THEN '{}'::text[] ELSE string_to_array(nodes, E'\\x1f') END,
                started_at, ended_at, state, name, scheduler_state, exit_code, exit_signal, derived_exit_code, restarts
         FROM UNNEST($1::text[], $2::text[], $3::int[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::text[],
                     $8::text[], $9::text[], $10::int[], $11::int[], $12::int[], $13::int[])
              AS t(cluster, job_id, gpus, nodes, started_at, ended_at, state, name, scheduler_state, exit_code,
                   exit_signal, derived_exit_code, restarts)
         ON CONFLICT (cluster, job_id) DO UPDATE SET
             gpus = EXCLUDED.gpus, nodes = EXCLUDED.nodes, started_at = EXCLUDED.started_at,
             ended_at = EXCLUDED.ended_at, state = EXCLUDED.state, updated_at = EXCLUDED.updated_at,
             name = EXCLUDED.name, scheduler_state = EXCLUDED.scheduler_state, exit_code = EXCLUDED.exit_code,
             exit_signal = EXCLUDED.exit_signal, derived_exit_code = EXCLUDED.derived_exit_code,
             restarts = EXCLUDED.restarts",
        &clusters as &[&str],
        &ids as &[&str],
        &gpus,
        &nodes,
        &starts,
        &ends as &[Option<DateTime<Utc>>],
        &states as &[&str],
        &names as &[Option<&str>],
        &scheduler_states as &[Option<&str>],
        &exit_codes as &[Option<i32>],
        &exit_signals as &[Option<i32>],
        &derived as &[Option<i32>],
        &restarts,
    )
    .execute(&mut *conn)
    .await?;
    sync_node_runs(conn, &clusters, &ids).await?;
    Ok(done.rows_affected())
}

/// Makes `job_node_runs` (what job attribution reads: one row per job and node) hold the stored
/// node lists and run times of these jobs, in the upsert's transaction.
async fn sync_node_runs(conn: &mut PgConnection, clusters: &[&str], ids: &[&str]) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM job_node_runs r USING UNNEST($1::text[], $2::text[]) AS k(cluster, job_id)
         WHERE r.cluster = k.cluster AND r.job_id = k.job_id",
        clusters as &[&str],
        ids as &[&str],
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO job_node_runs (cluster, job_id, node, started_at, ended_at)
         SELECT j.cluster, j.job_id, n.node, j.started_at, j.ended_at
         FROM (SELECT DISTINCT * FROM UNNEST($1::text[], $2::text[])) AS k(cluster, job_id)
              JOIN jobs j ON j.cluster = k.cluster AND j.job_id = k.job_id
              CROSS JOIN LATERAL (SELECT DISTINCT unnest(j.nodes)) AS n(node)",
        clusters as &[&str],
        ids as &[&str],
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A job as the analytics read it.
#[derive(Debug)]
pub struct JobRow {
    pub cluster: String,
    pub job_id: String,
    pub gpus: i32,
    pub nodes: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub state: String,
}

/// Jobs running at some time in [from, to).
pub async fn running_in(
    db: &sqlx::PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<JobRow>, sqlx::Error> {
    sqlx::query_as!(
        JobRow,
        "SELECT cluster, job_id, gpus, nodes, started_at, ended_at, state FROM jobs
         WHERE started_at < $2 AND (ended_at IS NULL OR ended_at > $1) AND ($3::text IS NULL OR cluster = $3)",
        from,
        to,
        cluster,
    )
    .fetch_all(db)
    .await
}

/// A job with what the scheduler said of it.
#[derive(Debug)]
pub struct JobRecord {
    pub cluster: String,
    pub job_id: String,
    pub gpus: i32,
    pub nodes: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub state: String,
    pub name: Option<String>,
    pub scheduler_state: Option<String>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub derived_exit_code: Option<i32>,
    pub restarts: i32,
    pub updated_at: DateTime<Utc>,
    /// Failures folded under the job, in time order.
    pub failure_ids: Vec<uuid::Uuid>,
}

pub async fn job(db: &sqlx::PgPool, cluster: &str, job_id: &str) -> Result<Option<JobRecord>, sqlx::Error> {
    sqlx::query_as!(
        JobRecord,
        r#"SELECT j.cluster, j.job_id, j.gpus, j.nodes, j.started_at, j.ended_at, j.state, j.name, j.scheduler_state,
                  j.exit_code, j.exit_signal, j.derived_exit_code, j.restarts, j.updated_at,
                  ARRAY(SELECT f.id FROM failures f WHERE f.cluster = j.cluster AND f.job_id = j.job_id
                        ORDER BY f.first_at, f.id) AS "failure_ids!"
           FROM jobs j WHERE j.cluster = $1 AND j.job_id = $2"#,
        cluster,
        job_id,
    )
    .fetch_optional(db)
    .await
}
