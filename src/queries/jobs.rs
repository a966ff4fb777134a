//! One job as the scheduler reported it, with the failures folded under it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use crate::storage;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    pub cluster: String,
    pub id: String,
    pub gpus: i32,
    pub nodes: Vec<String>,
    pub start: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
    /// completed, failed, cancelled or running.
    pub state: String,
    pub name: Option<String>,
    /// The scheduler's own state (Slurm: TIMEOUT, NODE_FAIL, OUT_OF_MEMORY...).
    pub scheduler_state: Option<String>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub derived_exit_code: Option<i32>,
    pub restarts: i32,
    pub updated_at: DateTime<Utc>,
    /// Failures folded under the job (its signals, and node signals during its run), in time order.
    pub failure_ids: Vec<uuid::Uuid>,
}

pub async fn job(db: &PgPool, cluster: &str, id: &str) -> Result<Option<JobView>, sqlx::Error> {
    Ok(storage::jobs::job(db, cluster, id).await?.map(|j| JobView {
        cluster: j.cluster,
        id: j.job_id,
        gpus: j.gpus,
        nodes: j.nodes,
        start: j.started_at,
        end: j.ended_at,
        state: j.state,
        name: j.name,
        scheduler_state: j.scheduler_state,
        exit_code: j.exit_code,
        exit_signal: j.exit_signal,
        derived_exit_code: j.derived_exit_code,
        restarts: j.restarts,
        updated_at: j.updated_at,
        failure_ids: j.failure_ids,
    }))
}
