//! Efficiency: low-utilisation incidents by cause (the ICSE 2024 taxonomy) and their mix.

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::{Computed, computed, inputs};
use crate::analytics::cost::{self as c, CauseShare};
use crate::domain::window::Window;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EfficiencyResponse {
    pub window: Computed,
    pub incidents: u64,
    /// batch_size, host_to_device_transfer, checkpointing, data_exchange, model, data, other, unspecified.
    pub fine: Vec<CauseShare>,
    /// model-related, data-related, other.
    pub coarse: Vec<CauseShare>,
    pub definitions: String,
}

const EFFICIENCY_DEFINITIONS: &str = "Low-GPU-utilisation incidents: signals of kind `low_utilization` in [from, to) with \
attributes.cause, the ICSE 2024 study's taxonomy: batch_size (improper batch size, 25% in the study), host_to_device_transfer \
(inefficient host-to-GPU data transfer, 28%), checkpointing (model checkpointing, 16%), data_exchange (7%), or the coarse model / \
data. Coarse classes (study: model-related 45%, data-related 46%): model = batch_size, checkpointing, model; data = \
host_to_device_transfer, data_exchange, data; any other cause is `other`, a missing one `unspecified` (both in coarse `other`). \
share = incidents / all incidents; hours = sum of attributes.duration_seconds when sent.";

pub async fn efficiency(db: &PgPool, w: &Window) -> Result<EfficiencyResponse, sqlx::Error> {
    let rows = inputs::low_utilization(db, w).await?;
    let (fine, coarse) = c::efficiency_mix(&rows);
    Ok(EfficiencyResponse {
        window: computed(db, w).await?,
        incidents: rows.iter().map(|r| r.1).sum(),
        fine,
        coarse,
        definitions: EFFICIENCY_DEFINITIONS.into(),
    })
}
