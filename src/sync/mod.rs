//! Commands that pull records from the systems a site already runs and send them through the
//! ingest API, as any client would.

pub mod gpud;
pub mod slurm;
