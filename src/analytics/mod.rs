pub mod headline;
pub mod stats;
