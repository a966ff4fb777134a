//! Serialising concurrent writers of the same burst source or fold key with a bounded number of
//! transaction-scoped advisory locks: keys hash onto a fixed set of stripes per lock space, taken
//! in ascending order (no deadlock). Postgres's lock table is shared by every database of the
//! server (about 6,400 entries by default); one lock per key ran it out for a 10,000-node batch.
//! With two spaces of 64 stripes a transaction holds at most 128 advisory locks, whatever the batch.

use sqlx::PgConnection;

use crate::storage;

/// Stripes per lock space: enough that unrelated keys rarely wait for each other, few enough
/// that a pool of transactions stays far below the server's lock table.
pub const STRIPES: i32 = 64;

/// What a lock protects. Spaces are taken in this order within a transaction (bursts first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockSpace {
    /// (cluster, node) sources whose stored bursts a batch may extend.
    BurstSources,
    /// (cluster, correlation key) of failures a batch re-folds.
    FoldKeys,
    /// GPU parts (by identity) and nodes (cluster, hostname) whose placements a write changes;
    /// taken alone, never with the spaces above.
    GpuParts,
}

impl LockSpace {
    /// The first key of Postgres's two-key advisory locks; the second is the stripe.
    fn namespace(self) -> i32 {
        match self {
            LockSpace::BurstSources => 0x464c_0001,
            LockSpace::FoldKeys => 0x464c_0002,
            LockSpace::GpuParts => 0x464c_0005,
        }
    }
}

/// Takes the stripes of `keys` in `space` until the transaction ends.
pub async fn lock(conn: &mut PgConnection, space: LockSpace, keys: &[String]) -> Result<(), sqlx::Error> {
    if keys.is_empty() {
        return Ok(());
    }
    storage::locks::lock_stripes(conn, space.namespace(), STRIPES, keys).await
}
