//! Low-utilisation causes (the ICSE 2024 taxonomy) and their mix. Pure: storage hands in rows; unit-tested in `analytics::cost`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::headline::{ratio, round6};

/// Fine causes and their coarse class. The ICSE 2024 study groups causes as model-related and
/// data-related; batch size and checkpointing are properties of the model's training loop, transfer
/// and exchange of its data.
pub const EFFICIENCY_CAUSES: [(&str, &str); 6] = [
    ("batch_size", "model"),
    ("checkpointing", "model"),
    ("model", "model"),
    ("host_to_device_transfer", "data"),
    ("data_exchange", "data"),
    ("data", "data"),
];

pub fn coarse_cause(fine: &str) -> &'static str {
    EFFICIENCY_CAUSES
        .iter()
        .find(|(f, _)| *f == fine)
        .map_or("other", |(_, c)| c)
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct CauseShare {
    pub cause: String,
    /// model, data or other (coarse rows: the same as cause).
    pub coarse: String,
    pub incidents: u64,
    /// incidents / all incidents.
    pub share: f64,
    /// Sum of the incidents' duration_seconds attributes in hours (0 when not sent).
    pub hours: f64,
}

/// Incidents by cause (None = the sender named none: `unspecified`) into fine and coarse mixes.
pub fn efficiency_mix(incidents: &[(Option<String>, u64, f64)]) -> (Vec<CauseShare>, Vec<CauseShare>) {
    let total: u64 = incidents.iter().map(|i| i.1).sum();
    let mut fine: BTreeMap<String, (u64, f64)> = EFFICIENCY_CAUSES
        .iter()
        .map(|(c, _)| (c.to_string(), (0, 0.0)))
        .collect();
    for (cause, n, h) in incidents {
        let name = match cause.as_deref() {
            None | Some("") => "unspecified".to_string(),
            Some(c) if EFFICIENCY_CAUSES.iter().any(|(f, _)| f == &c) => c.to_string(),
            Some(_) => "other".to_string(),
        };
        let e = fine.entry(name).or_default();
        e.0 += n;
        e.1 += h;
    }
    let mut coarse: BTreeMap<&str, (u64, f64)> = [("model", (0, 0.0)), ("data", (0, 0.0)), ("other", (0, 0.0))]
        .into_iter()
        .collect();
    for (c, (n, h)) in &fine {
        let e = coarse.entry(coarse_cause(c)).or_default();
        e.0 += n;
        e.1 += h;
    }
    let to_rows = |m: Vec<(String, String, u64, f64)>| {
        let mut v: Vec<CauseShare> = m
            .into_iter()
            .map(|(cause, coarse, incidents, h)| CauseShare {
                cause,
                coarse,
                incidents,
                share: round6(ratio(incidents, total)),
                hours: round6(h),
            })
            .collect();
        v.sort_by(|a, b| b.incidents.cmp(&a.incidents).then_with(|| a.cause.cmp(&b.cause)));
        v
    };
    let fine_rows = to_rows(
        fine.into_iter()
            .map(|(c, (n, h))| (c.clone(), coarse_cause(&c).to_string(), n, h))
            .collect(),
    );
    let coarse_rows = to_rows(
        coarse
            .into_iter()
            .map(|(c, (n, h))| (c.to_string(), c.to_string(), n, h))
            .collect(),
    );
    (fine_rows, coarse_rows)
}
