//! Integration tests: the real server on port 0 over HTTP, a fresh real Postgres database per test.
mod auth;
mod browser;
mod cost;
mod cost_simulated;
mod decisions;
mod failures;
mod fold_order;
mod helpers;
mod ingest;
mod inventory;
mod logs;
mod openapi;
mod report;
mod simulation;
