//! Faultline's pure core: the signal vocabulary and its validation (`domain`) and the parsers of
//! what nodes print (`logparse`). Shared by the server and the node agent, so a line is read the
//! same on the node as at `/v1/logs`. Knows nothing of HTTP or SQL.

pub mod domain;
pub mod logparse;
