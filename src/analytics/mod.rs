pub mod headline;
pub mod stats;
pub mod cost;
