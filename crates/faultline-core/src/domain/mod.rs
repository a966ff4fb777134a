//! Pure domain logic: vocabulary, validation, parsing. Knows nothing of HTTP or SQL.
pub mod alert;
pub mod alert_delivery;
pub mod audit;
pub mod auth;
pub mod event;
pub mod gpu;
pub mod identity;
pub mod job;
pub mod lifecycle;
pub mod node;
pub mod part;
pub mod taxonomy;
pub mod window;
