//! Faultline: failure-telemetry warehouse for GPU training clusters.
pub mod analytics;
pub mod classify;
pub mod configuration;
pub mod correlate;
pub mod database;
pub mod domain;
pub mod embedded_pg;
pub mod error;
pub mod http;
pub mod logparse;
pub mod openapi;
pub mod startup;
pub mod storage;
pub mod telemetry;
