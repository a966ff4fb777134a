pub mod baselines;
pub mod cost;
pub mod headline;
pub mod stats;
