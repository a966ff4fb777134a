//! Alerting, beside the write path (`ingest`) and the read path (`queries`): rule evaluation
//! (`evaluation`: figures read through `queries`, state changes and their outbox rows written
//! together) and the task every instance runs (`task`: the lease, the evaluation loop and
//! delivery, each receiver on its own). Rule edits and heartbeats are writes: `ingest::alerts`.

pub mod evaluation;
pub mod task;
