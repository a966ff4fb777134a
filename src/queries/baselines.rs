//! The published baselines beside this fleet's values: one gathering of the inputs, used by
//! `GET /v1/analytics/baselines` and by the report.

use chrono::Duration;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::{Computed, computed, inputs};
use crate::analytics::baselines::{self as b, BASELINE_DEFINITIONS, Baseline, BaselineInputs, Part, RootKind};
use crate::domain::window::Window;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BaselinesResponse {
    pub window: Computed,
    pub baselines: Vec<Baseline>,
    pub definitions: String,
}

/// The inputs of every baseline row over `w`, read through the analyses that define them.
pub async fn inputs(db: &PgPool, w: &Window) -> Result<BaselineInputs, sqlx::Error> {
    let inputs::CauseCounts { causes, symptoms } = inputs::cause_counts(db, w).await?;
    let root_kinds = inputs::root_errors(db, w)
        .await?
        .into_iter()
        .map(|(kind, code, failures, _severity)| RootKind { kind, code, failures })
        .collect();
    // The inventory once, for every analysis below.
    let inventory = inputs::node_service(db, w).await?;
    let rec = super::recovery::recovery_data(db, w, &inventory, Duration::hours(24)).await?;
    let sm = &rec.summary;
    let js = super::job_size::job_size_data(db, w, &inventory, 0.05).await?;
    let gpu_hours: f64 = inventory
        .iter()
        .map(|n| n.exposure_hours(w.from, w.to) * f64::from(n.gpu_count))
        .sum();
    let conc = super::concentration::concentration_data(db, w, &inventory).await?;
    let st = super::stragglers::straggler_data(db, w, &inventory, 1.1, 10.0, 30.0).await?;
    let eff = super::efficiency::efficiency(db, w).await?;
    Ok(BaselineInputs {
        causes,
        symptoms,
        root_kinds,
        transient: Part {
            part: sm.transient_failures,
            whole: sm.failures,
        },
        hardware_drained: Part {
            part: sm.hardware_failures_drained,
            whole: sm.hardware_failures,
        },
        mean_downtime_minutes: sm.downtime_minutes.mean,
        failures_with_downtime: sm.downtime_minutes.count,
        largest_jobs_failed: Part {
            part: js.largest.failed_jobs,
            whole: js.largest.jobs,
        },
        node_failures: js.projection.node_failures,
        gpu_hours,
        confined: Part {
            part: conc.with_node,
            whole: conc.failures,
        },
        straggling: Part {
            part: st.straggling,
            whole: st.nodes,
        },
        low_utilization_incidents: eff.incidents,
        efficiency_fine: eff.fine,
        efficiency_coarse: eff.coarse,
    })
}

/// The baseline rows over `w`, in their fixed order.
pub async fn rows(db: &PgPool, w: &Window) -> Result<Vec<Baseline>, sqlx::Error> {
    Ok(b::baselines(&inputs(db, w).await?))
}

pub async fn baselines(db: &PgPool, w: &Window) -> Result<BaselinesResponse, sqlx::Error> {
    Ok(BaselinesResponse {
        window: computed(db, w).await?,
        baselines: rows(db, w).await?,
        definitions: BASELINE_DEFINITIONS.into(),
    })
}
