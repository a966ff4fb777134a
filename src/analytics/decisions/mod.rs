//! From figures to decisions: did a change help (two Poisson rates compared exactly),
//! how to run the next big job (per-GPU rate scaled to N GPUs, Young / Daly checkpoint interval,
//! expected effective training time ratio), and which nodes fail more than chance allows (Poisson
//! upper tail per node with Holm's correction). Pure functions of counts and exposures; the SQL is
//! in `storage::decisions`, the use cases in `queries::decisions`. Methods and their limits:
//! docs/decisions.md.

pub mod binomial;
pub mod compare;
pub mod job_plan;
pub mod lemon;
