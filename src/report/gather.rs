//! Fills [`ReportData`] from the database, one function per section. Each section reads through
//! the same queries as its analytics endpoint where one exists (so the report and the JSON API agree);
//! the sections that the cost analytics will own (timeline, worst nodes, recovery) read
//! storage::report for now and can switch to those functions one by one.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::{
    CauseSection, MixSection, MtbfSection, PhaseMinutes, RecoverySection, ReportData, ReportWindow, Timeline,
    WorstNodes, fill_timeline,
};
use crate::analytics::headline::{self, MixKey};
use crate::storage::analytics::{self as q, MixDimension};
use crate::storage::report as r;

/// How many nodes the worst-nodes section lists.
pub const WORST_NODES: i64 = 15;
/// The group size of the MTBF section (Unicron's 128-GPU set).
pub const GROUP_SIZE: u32 = 128;

pub async fn gather(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<ReportData, sqlx::Error> {
    let window = ReportWindow {
        from,
        to,
        cluster: cluster.map(str::to_string),
        catalog_version: q::catalog_version(db).await?,
        generated_at: Utc::now(),
    };
    let nodes = q::node_service(db, cluster).await?;
    let clusters = match cluster {
        Some(c) => vec![c.to_string()],
        None => r::clusters(db).await?,
    };
    Ok(ReportData {
        mix: mix(db, &nodes, from, to, cluster).await?,
        mtbf: mtbf(db, &nodes, from, to, cluster).await?,
        causes: causes(db, from, to, cluster).await?,
        timeline: timeline(db, from, to, cluster).await?,
        recovery: recovery(db, from, to, cluster).await?,
        worst_nodes: worst_nodes(db, from, to, cluster).await?,
        root_kinds: crate::storage::cost::root_errors(db, from, to, cluster)
            .await?
            .into_iter()
            .map(|(kind, code, failures, _severity)| super::RootKindCount { kind, code, failures })
            .collect(),
        clusters,
        window,
        health: None,
    })
}

async fn mix(
    db: &PgPool,
    nodes: &[headline::NodeService],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<MixSection, sqlx::Error> {
    let counts = q::failure_counts(db, MixDimension::Generation, from, to, cluster).await?;
    let rows = headline::failure_mix(nodes, &counts, MixKey::Generation, from, to);
    Ok(MixSection {
        failures: rows.iter().map(|r| r.failures).sum(),
        gpu_days: rows.iter().map(|r| r.gpu_days).sum(),
        rows,
    })
}

async fn mtbf(
    db: &PgPool,
    nodes: &[headline::NodeService],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<MtbfSection, sqlx::Error> {
    let (per_node, _) = q::failures_per_node(db, from, to, cluster).await?;
    let (groups, fleet) = headline::mtbf(nodes, &per_node, GROUP_SIZE, from, to, 0.95);
    Ok(MtbfSection {
        group_size: GROUP_SIZE,
        groups,
        fleet,
    })
}

async fn causes(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<CauseSection, sqlx::Error> {
    let counts = q::cause_counts(db, from, to, cluster).await?;
    let (failures, categories) = headline::root_causes(&counts);
    Ok(CauseSection { failures, categories })
}

async fn timeline(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Timeline, sqlx::Error> {
    // The cost timeline's daily counts (effective causes), summed into the report's buckets.
    let bucket = super::Bucket::for_window(from, to);
    let days = crate::storage::cost::daily_categories(db, from, to, cluster).await?;
    Ok(fill_timeline(bucket, from, to, &days))
}

/// Downtime by recovery phase, from the failure lifecycles (PATCH /v1/failures/{id}); None when
/// no failure of the window recorded a phase.
async fn recovery(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Option<RecoverySection>, sqlx::Error> {
    let failures = crate::storage::cost::recovery_failures(db, from, to, cluster, chrono::Duration::hours(24)).await?;
    let summary = crate::analytics::cost::recovery(&failures);
    let phases: Vec<PhaseMinutes> = summary
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
    let recorded = failures
        .iter()
        .filter(|f| (0..4).any(|i| f.phases.get(i).is_some()))
        .count() as u64;
    Ok((recorded > 0).then_some(RecoverySection {
        failures: recorded,
        phases,
    }))
}

async fn worst_nodes(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<WorstNodes, sqlx::Error> {
    r::worst_nodes(db, from, to, cluster, WORST_NODES).await
}
