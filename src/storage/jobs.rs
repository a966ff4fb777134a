//! Scheduler jobs.

use sqlx::PgPool;

use crate::domain::job::Job;

/// Upserts in one statement (UNNEST arrays). Node lists travel as joined text, because UNNEST would
/// flatten a two-dimensional array.
pub async fn upsert(db: &PgPool, jobs: &[Job]) -> Result<u64, sqlx::Error> {
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
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
