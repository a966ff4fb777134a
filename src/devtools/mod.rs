//! Tooling that ships in the binary but serves no request: the fleet simulator, its HTTP client,
//! the benchmark and the demo loader.
pub mod bench;
pub mod bench_parts;
pub mod bench_postmortems;
pub mod client;
pub mod demo;
pub mod forecast_backtest;
pub mod simulate;
pub mod slurm_cluster;
pub mod soak;
