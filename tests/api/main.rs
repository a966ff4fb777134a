//! Integration tests: the real server on port 0 over HTTP, a fresh real Postgres database per test.
mod admission;
mod auth;
mod body_budget;
mod browser;
mod cost;
mod cost_simulated;
mod edge;
mod failures;
mod fold_order;
mod helpers;
mod ingest;
mod inventory;
mod logs;
mod openapi;
mod report;
mod shutdown;
mod simulation;
