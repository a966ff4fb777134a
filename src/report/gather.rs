//! Fills [`ReportData`] through the read use cases in `crate::queries`, one call per section, so
//! every number in the report is the number the JSON API answers for the same window.

use chrono::{Duration, Utc};
use sqlx::PgPool;

use super::{
    CauseSection, MixSection, MtbfSection, PhaseMinutes, RecoverySection, ReportData, ReportWindow, fill_timeline,
};
use crate::analytics::headline::MixKey;
use crate::domain::window::Window;
use crate::queries;

/// How many nodes the worst-nodes section lists.
pub const WORST_NODES: i64 = 15;
/// The group size of the MTBF section (Unicron's 128-GPU set).
pub const GROUP_SIZE: u32 = 128;

pub async fn gather(db: &PgPool, w: &Window) -> Result<ReportData, sqlx::Error> {
    let computed = queries::computed(db, w).await?;
    let window = ReportWindow {
        from: w.from,
        to: w.to,
        cluster: w.cluster.clone(),
        catalog_version: computed.catalog_version,
        generated_at: Utc::now(),
    };
    let clusters = match w.cluster() {
        Some(c) => vec![c.to_string()],
        None => queries::report::clusters(db).await?,
    };
    let mix = queries::headline::failure_mix(db, w, MixKey::Generation).await?;
    let mtbf = queries::headline::mtbf(db, w, GROUP_SIZE, None).await?;
    let causes = queries::headline::root_causes(db, w).await?;
    let bucket = super::Bucket::for_window(w.from, w.to);
    let days = queries::inputs::daily_categories(db, w).await?;
    Ok(ReportData {
        mix: MixSection {
            failures: mix.totals.failures,
            gpu_days: mix.rows.iter().map(|r| r.gpu_days).sum(),
            rows: mix.rows,
        },
        mtbf: MtbfSection {
            group_size: GROUP_SIZE,
            groups: mtbf.groups,
            fleet: mtbf.fleet,
        },
        causes: CauseSection {
            failures: causes.failures,
            categories: causes.categories,
        },
        timeline: fill_timeline(bucket, w.from, w.to, &days),
        recovery: recovery(db, w).await?,
        worst_nodes: queries::report::worst_nodes(db, w, WORST_NODES).await?,
        baselines: queries::baselines::rows(db, w).await?,
        parts: Some(super::parts::gather(db, w).await?),
        availability: Some(super::availability::gather(db, w).await?),
        clusters,
        window,
        health: None,
    })
}

/// Downtime by recovery phase and by root cause, from the failure lifecycles (PATCH
/// /v1/failures/{id}); None when no failure of the window recorded a phase or a downtime.
async fn recovery(db: &PgPool, w: &Window) -> Result<Option<RecoverySection>, sqlx::Error> {
    let inventory = queries::inputs::node_service(db, w).await?;
    let data = queries::recovery::recovery_data(db, w, &inventory, Duration::hours(24)).await?;
    let phases: Vec<PhaseMinutes> = data
        .summary
        .phases
        .iter()
        .filter(|p| p.minutes.count > 0)
        .map(|p| PhaseMinutes {
            phase: p.phase.clone(),
            failures: p.minutes.count,
            total_minutes: p.minutes.total,
            median_minutes: p.minutes.median,
        })
        .collect();
    // Failures with at least one recorded phase.
    let recorded = data
        .failures
        .iter()
        .filter(|f| (0..4).any(|i| f.phases.get(i).is_some()))
        .count() as u64;
    let repaired = data.summary.downtime_minutes.count;
    Ok((recorded > 0 || repaired > 0).then_some(RecoverySection {
        failures: recorded,
        phases,
        by_cause: data.by_cause,
    }))
}
