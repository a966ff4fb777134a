pub mod baselines;
pub mod cost;
pub mod decisions;
pub mod headline;
pub mod stats;
