//! Faultline: failure-telemetry warehouse for GPU training clusters.
//!
//! Every request runs one way: `http` (thin, one module per resource) -> a use case (`ingest` for
//! writes, `queries` for reads) -> `storage` (SQL only). The use cases call the pure code:
//! `domain`, `classify`, `fold`, `analytics`, `logparse`.
pub mod analytics;
pub mod app;
pub mod classify;
pub mod cli;
pub mod db;
pub mod devtools;
pub mod domain;
pub mod fold;
pub mod http;
pub mod ingest;
pub mod logparse;
pub mod queries;
pub mod report;
pub mod storage;
pub mod sync;
