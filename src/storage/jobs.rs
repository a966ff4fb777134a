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
    sqlx::query_as(
        "SELECT j.cluster, j.job_id, j.nodes, j.started_at, j.ended_at
         FROM UNNEST($1::text[], $2::text[]) AS k(cluster, job_id)
         JOIN jobs j ON j.cluster = k.cluster AND j.job_id = k.job_id",
    )
    .bind(jobs.iter().map(|j| j.cluster.as_str()).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>())
    .fetch_all(&mut *conn)
    .await
}

/// Upserts in one statement (UNNEST arrays). Node lists travel as joined text, because UNNEST would
/// flatten a two-dimensional array.
pub async fn upsert(conn: &mut PgConnection, jobs: &[Job]) -> Result<u64, sqlx::Error> {
    if jobs.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(
        "INSERT INTO jobs (cluster, job_id, gpus, nodes, started_at, ended_at, state)
         SELECT cluster, job_id, gpus,
                CASE WHEN nodes = '' THEN '{}'::text[] ELSE string_to_array(nodes, E'\\x1f') END,
                started_at, ended_at, state
         FROM UNNEST($1::text[], $2::text[], $3::int[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::text[])
              AS t(cluster, job_id, gpus, nodes, started_at, ended_at, state)
         ON CONFLICT (cluster, job_id) DO UPDATE SET
             gpus = EXCLUDED.gpus, nodes = EXCLUDED.nodes, started_at = EXCLUDED.started_at,
             ended_at = EXCLUDED.ended_at, state = EXCLUDED.state, updated_at = now()",
    )
    .bind(jobs.iter().map(|j| j.cluster.as_str()).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.gpus).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.nodes.join("\u{1f}")).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.start).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.end).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.state.as_str()).collect::<Vec<_>>())
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected())
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
