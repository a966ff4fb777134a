//! Configuration, start-up (the one `Application::build` used by main, the benchmark and the
//! tests) and telemetry.
pub mod configuration;
pub mod edge;
pub mod maintenance;
pub mod process_metrics;
pub mod startup;
pub mod telemetry;
pub mod welcome;
