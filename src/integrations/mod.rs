//! Interop with health monitors sites already run. Pure mappings; the HTTP side is in http/.
pub mod nvsentinel;
