pub mod cost;
pub mod headline;
pub mod stats;
