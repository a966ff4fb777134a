//! Read use cases: `fn(db, &Window, params) -> figures`, used by `http/` and `report/` alike, so the
//! API and the report render the same rows.

pub mod decisions;
