//! Top errors: the most frequent kinds and codes among failures, by root signal and by all signals.

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::{Computed, computed, inputs};
use crate::analytics::cost::{self as c, ErrorRow};
use crate::domain::window::Window;
use crate::ingest::catalog::CatalogCache;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TopErrorsResponse {
    pub window: Computed,
    pub failures: u64,
    /// Signals of those failures.
    pub signals: u64,
    /// What the failures were attributed to: their root signal's kind and code.
    pub root_signals: Vec<ErrorRow>,
    /// Everything the failures showed: every signal's kind and code (an NCCL timeout is mostly here).
    pub all_signals: Vec<ErrorRow>,
    pub definitions: String,
}

const TOP_ERRORS_DEFINITIONS: &str = "Over the failures whose first signal is in [from, to). root_signals: failures per kind and \
code of their root signal; share = failures / all failures; severity = the most common severity of those failures. all_signals: \
per kind and code among all the signals folded into the failures; failures = failures holding at least one such signal, share = \
that / all failures (Unicron reports failure types this way: NCCL timeout 10.1%, ECC 5%, NVLink 4.5%, link flapping 3.9%), \
signals and signal_share = signals / all signals; severity from the current classification catalog. The two views differ most for \
symptoms such as NCCL timeouts that surface far from their cause.";

/// `db` holds the failures (the read replica, if any); `primary` the catalog, which is read where it
/// is edited and locked (a standby cannot take the catalog lock).
pub async fn top_errors(
    db: &PgPool,
    primary: &PgPool,
    catalog_cache: &CatalogCache,
    w: &Window,
    limit: usize,
) -> Result<TopErrorsResponse, sqlx::Error> {
    // Independent reads: at once, on three connections.
    let ((failures, signals), tally, window) = tokio::try_join!(
        inputs::failure_totals(db, w),
        inputs::error_tally(db, w),
        computed(db, w)
    )?;
    let root = c::top_errors(
        tally
            .roots()
            .into_iter()
            .map(|(k, code, n, sev)| (k, code, n, n, sev))
            .collect(),
        failures,
        failures,
        limit,
    );
    let all = tally.signals();
    let catalog = {
        let mut conn = primary.acquire().await?;
        crate::ingest::catalog::lock_shared(&mut conn, catalog_cache).await?
    };
    let all = c::top_errors(
        all.into_iter()
            .map(|(k, code, f, n)| {
                let sev = catalog.classify(&k, code, None, None).severity.as_str().to_string();
                (k, code, f, n, sev)
            })
            .collect(),
        failures,
        signals,
        limit,
    );
    Ok(TopErrorsResponse {
        window,
        failures,
        signals,
        root_signals: root,
        all_signals: all,
        definitions: TOP_ERRORS_DEFINITIONS.into(),
    })
}
