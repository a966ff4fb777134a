//! Scheduler jobs, validated at the edge.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::event::{FieldError, Text, required_text};

/// Final (or current) state of a job as the scheduler reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Completed,
    Failed,
    Cancelled,
    Running,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Running => "running",
        }
    }
}

/// A job as the scheduler sends it.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobInput {
    /// The scheduler's job id (the `job_id` signals carry), unique within the cluster.
    #[schema(value_type = Text)]
    pub id: String,
    #[schema(value_type = Text)]
    pub cluster: String,
    /// GPUs allocated to the job.
    #[schema(minimum = 1, maximum = 1000000)]
    pub gpus: i32,
    /// Hostnames allocated to the job.
    #[serde(default)]
    #[schema(value_type = Vec<Text>, max_items = 100000)]
    pub nodes: Vec<String>,
    /// When the job started running (not when it was queued: ETTR counts available wall-clock time).
    pub start: DateTime<Utc>,
    /// When it ended; required unless the state is `running`.
    pub end: Option<DateTime<Utc>>,
    pub state: JobState,
    /// The job's name in the scheduler.
    #[serde(default)]
    #[schema(value_type = Option<Text>)]
    pub name: Option<String>,
    /// The scheduler's own final state, which `state` folds (Slurm: TIMEOUT, NODE_FAIL,
    /// OUT_OF_MEMORY, PREEMPTED... are failed or cancelled).
    #[serde(default)]
    #[schema(value_type = Option<Text>)]
    pub scheduler_state: Option<String>,
    /// The job's exit code.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 255)]
    pub exit_code: Option<i32>,
    /// The signal that ended the job, if one did.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 255)]
    pub exit_signal: Option<i32>,
    /// Slurm's DerivedExitCode: the highest exit code of the job's steps.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 255)]
    pub derived_exit_code: Option<i32>,
    /// Times the job was requeued and ran again; `start` is its first run's.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1000000)]
    pub restarts: Option<i32>,
}

/// What the scheduler says of a job beyond its run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobDetails {
    pub name: Option<String>,
    pub scheduler_state: Option<String>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub derived_exit_code: Option<i32>,
    pub restarts: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: String,
    pub cluster: String,
    pub gpus: i32,
    pub nodes: Vec<String>,
    pub start: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
    pub state: JobState,
    pub details: JobDetails,
}

pub const MAX_JOB_GPUS: i32 = 1_000_000;
pub const MAX_JOB_NODES: usize = 100_000;

pub fn parse_job(value: serde_json::Value) -> Result<Job, FieldError> {
    let input: JobInput = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        FieldError {
            field: (path != "." && !path.is_empty()).then_some(path),
            message: e.into_inner().to_string(),
        }
    })?;
    validate_job(input)
}

pub fn validate_job(input: JobInput) -> Result<Job, FieldError> {
    if !(1..=MAX_JOB_GPUS).contains(&input.gpus) {
        return Err(FieldError::new(
            "gpus",
            format!("{} is not in 1..={MAX_JOB_GPUS}", input.gpus),
        ));
    }
    if input.nodes.len() > MAX_JOB_NODES {
        return Err(FieldError::new("nodes", format!("more than {MAX_JOB_NODES} nodes")));
    }
    let nodes = input
        .nodes
        .into_iter()
        .enumerate()
        .map(|(i, n)| required_text(&format!("nodes[{i}]"), n))
        .collect::<Result<Vec<_>, _>>()?;
    match (input.state, input.end) {
        (JobState::Running, Some(_)) => return Err(FieldError::new("end", "a running job has no end yet")),
        (s, None) if s != JobState::Running => {
            return Err(FieldError::new("end", format!("a {} job needs its end", s.as_str())));
        }
        (_, Some(end)) if end < input.start => return Err(FieldError::new("end", "is before start")),
        _ => {}
    }
    let code = |field: &str, v: Option<i32>| match v {
        Some(c) if !(0..=255).contains(&c) => Err(FieldError::new(field, format!("{c} is not in 0..=255"))),
        v => Ok(v),
    };
    let details = JobDetails {
        name: input.name.map(|n| required_text("name", n)).transpose()?,
        scheduler_state: input
            .scheduler_state
            .map(|s| required_text("scheduler_state", s))
            .transpose()?,
        exit_code: code("exit_code", input.exit_code)?,
        exit_signal: code("exit_signal", input.exit_signal)?,
        derived_exit_code: code("derived_exit_code", input.derived_exit_code)?,
        restarts: match input.restarts {
            Some(r) if !(0..=1_000_000).contains(&r) => {
                return Err(FieldError::new("restarts", format!("{r} is not in 0..=1000000")));
            }
            r => r.unwrap_or(0),
        },
    };
    Ok(Job {
        details,
        id: required_text("id", input.id)?,
        cluster: required_text("cluster", input.cluster)?,
        gpus: input.gpus,
        nodes,
        start: input.start,
        end: input.end,
        state: input.state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn valid() -> serde_json::Value {
        json!({"id": "job-1", "cluster": "c1", "gpus": 128, "nodes": ["n01", "n02"], "start": "2026-11-01T00:00:00Z",
               "end": "2026-11-01T10:00:00Z", "state": "failed"})
    }

    #[test]
    fn a_valid_job_parses() {
        let j = parse_job(valid()).unwrap();
        assert_eq!((j.gpus, j.nodes.len(), j.state), (128, 2, JobState::Failed));
    }

    #[test]
    fn errors_say_which_field() {
        let cases = [
            ("gpus", json!(0), "gpus"),
            ("state", json!("exploded"), "state"),
            ("end", json!("2026-10-31T00:00:00Z"), "end"),
            ("end", json!(null), "end"),
            ("nodes", json!(["n01", " "]), "nodes[1]"),
            ("id", json!(""), "id"),
            ("colour", json!("red"), "colour"),
        ];
        for (key, value, field) in cases {
            let mut v = valid();
            v[key] = value;
            let err = parse_job(v).unwrap_err();
            assert_eq!(err.field.as_deref().unwrap_or("."), field, "{key}: {err:?}");
        }
        let mut running = valid();
        running["state"] = json!("running");
        assert_eq!(parse_job(running.clone()).unwrap_err().field.as_deref(), Some("end"));
        running.as_object_mut().unwrap().remove("end");
        assert!(parse_job(running).is_ok());
    }
}
