//! Faultline: failure-telemetry warehouse for GPU training clusters.
//!
//! Every request runs one way: `http` (thin, one module per resource) -> a use case (`ingest` for
//! writes, `queries` for reads) -> `storage` (SQL only). The use cases call the pure code:
//! `domain`, `classify`, `fold`, `analytics`, `logparse`. `domain` and `logparse` live in the
//! `faultline-core` crate, which the node agent shares.
pub use faultline_core::{domain, logparse};
pub mod alerting;
pub mod analytics;
pub mod app;
pub mod classify;
pub mod cli;
pub mod db;
pub mod devtools;
pub mod fold;
pub mod http;
pub mod ingest;
pub mod queries;
pub mod report;
pub mod storage;
pub mod sync;
