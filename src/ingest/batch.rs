//! The one batch pipeline of every ingest route (events, logs, NVSentinel, nodes, jobs): the empty
//! and size checks, per-item parsing, the token's cluster scope, in-batch duplicates and the
//! all-invalid answer, with every dropped item counted in `/metrics` by route and typed reason.
//! A bad item never loses the good ones beside it.

use std::collections::HashSet;
use std::hash::Hash;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::event::FieldError;

/// The ingest routes, a closed set (metric labels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Events,
    Logs,
    Nvsentinel,
    Kubernetes,
    Dcgm,
    Gpud,
    Nodes,
    Jobs,
    /// Nodes' GPU sets (`/v1/gpus/inventory`, `/v1/nodes/{cluster}/{hostname}/gpus`).
    GpuInventory,
    /// History of GPU parts (`/v1/gpus/history`).
    GpuHistory,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Events => "events",
            Route::Logs => "logs",
            Route::Nvsentinel => "nvsentinel",
            Route::Kubernetes => "kubernetes",
            Route::Dcgm => "dcgm",
            Route::Gpud => "gpud",
            Route::Nodes => "nodes",
            Route::Jobs => "jobs",
            Route::GpuInventory => "gpu_inventory",
            Route::GpuHistory => "gpu_history",
        }
    }

    /// What the route's items are called in messages.
    pub fn items(self) -> &'static str {
        match self {
            Route::Events | Route::Nvsentinel | Route::Gpud => "events",
            Route::Kubernetes => "objects",
            Route::Dcgm => "results",
            Route::Logs => "records",
            Route::Nodes | Route::GpuInventory => "nodes",
            Route::Jobs => "jobs",
            Route::GpuHistory => "records",
        }
    }
}

/// Why an item of a batch was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// The item (an NDJSON line) is not JSON.
    InvalidJson,
    /// A log record that is not a JSON object.
    InvalidRecord,
    /// A required field is missing.
    MissingField,
    /// A field has an invalid value.
    InvalidField,
    /// The item names a cluster the token may not write.
    ForbiddenCluster,
    /// The same key appears earlier in the batch.
    DuplicateInBatch,
    /// A log line that parsed as a signal with an invalid value.
    InvalidSignal,
    /// The item names a failure that does not exist.
    NotFound,
    /// The item contradicts another (a removal and a placement's ending that disagree).
    Contradicts,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::InvalidJson => "invalid_json",
            RejectReason::InvalidRecord => "invalid_record",
            RejectReason::MissingField => "missing_field",
            RejectReason::InvalidField => "invalid_field",
            RejectReason::ForbiddenCluster => "forbidden_cluster",
            RejectReason::DuplicateInBatch => "duplicate_in_batch",
            RejectReason::InvalidSignal => "invalid_signal",
            RejectReason::NotFound => "not_found",
            RejectReason::Contradicts => "contradicts",
        }
    }
}

/// An item of the batch that was not stored, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RejectedItem {
    /// Zero-based position in the batch (for NDJSON: the line, counting non-blank lines).
    pub index: usize,
    pub reason: RejectReason,
    /// Field path inside the item, when the problem is one field.
    pub field: Option<String>,
    pub message: String,
}

/// Why an item is refused: its reason and where.
pub type Rejection = (RejectReason, FieldError);

/// A batch that cannot be taken as a whole.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("the batch holds no {0}")]
    Empty(&'static str),
    #[error("the batch holds {count} {items}; the limit is {limit}")]
    TooLarge {
        count: usize,
        limit: usize,
        items: &'static str,
    },
    /// Every item was refused; `rejected` says why.
    #[error("all {received} {items} were invalid")]
    AllInvalid {
        received: usize,
        items: &'static str,
        rejected: Vec<RejectedItem>,
    },
    /// Every item named a cluster outside the token's scope.
    #[error("this token may only write cluster '{0}'")]
    AllForbidden(String),
}

/// A batch on its way through validation: the items still in it (with their index) and the
/// rejected ones.
#[derive(Debug)]
pub struct Batch<T> {
    route: Route,
    pub received: usize,
    items: Vec<(usize, T)>,
    pub rejected: Vec<RejectedItem>,
}

/// What validation let through.
#[derive(Debug)]
pub struct Accepted<T> {
    pub received: usize,
    pub items: Vec<T>,
    /// Each item's position in the batch.
    pub indices: Vec<usize>,
    pub rejected: Vec<RejectedItem>,
}

impl<I> Batch<I> {
    /// Takes the raw items of a request: refuses an empty batch and one over `max_items`.
    pub fn new(route: Route, items: Vec<I>, max_items: usize) -> Result<Self, BatchError> {
        if items.is_empty() {
            return Err(BatchError::Empty(route.items()));
        }
        if items.len() > max_items {
            return Err(BatchError::TooLarge {
                count: items.len(),
                limit: max_items,
                items: route.items(),
            });
        }
        Ok(Batch {
            route,
            received: items.len(),
            items: items.into_iter().enumerate().collect(),
            rejected: Vec::new(),
        })
    }

    fn reject(rejected: &mut Vec<RejectedItem>, index: usize, (reason, e): Rejection) {
        rejected.push(RejectedItem {
            index,
            reason,
            field: e.field,
            message: e.message,
        });
    }

    /// Parses each item alone; a failure rejects that item only.
    pub fn parse<T>(self, mut parse: impl FnMut(I) -> Result<T, Rejection>) -> Batch<T> {
        let mut rejected = self.rejected;
        let mut items = Vec::with_capacity(self.items.len());
        for (index, item) in self.items {
            match parse(item) {
                Ok(t) => items.push((index, t)),
                Err(r) => Self::reject(&mut rejected, index, r),
            }
        }
        Batch {
            route: self.route,
            received: self.received,
            items,
            rejected,
        }
    }

    /// Keeps the items whose cluster the token may write.
    pub fn scoped(self, cluster: impl Fn(&I) -> &str, may_write: impl Fn(&str) -> bool) -> Self {
        self.keep(|item| {
            let c = cluster(item);
            if may_write(c) {
                Ok(())
            } else {
                Err((
                    RejectReason::ForbiddenCluster,
                    FieldError::new("cluster", format!("this token may not write cluster '{c}'")),
                ))
            }
        })
    }

    /// Keeps the first item of each key; later ones are rejected as duplicates of the batch.
    pub fn dedup_by<K: Hash + Eq>(self, field: &str, key: impl Fn(&I) -> K, describe: impl Fn(&I) -> String) -> Self {
        let mut seen = HashSet::new();
        self.keep(|item| {
            if seen.insert(key(item)) {
                Ok(())
            } else {
                Err((
                    RejectReason::DuplicateInBatch,
                    FieldError::new(field, format!("{} appears earlier in this batch", describe(item))),
                ))
            }
        })
    }

    fn keep(mut self, mut check: impl FnMut(&I) -> Result<(), Rejection>) -> Self {
        let mut items = Vec::with_capacity(self.items.len());
        for (index, item) in self.items {
            match check(&item) {
                Ok(()) => items.push((index, item)),
                Err(r) => Self::reject(&mut self.rejected, index, r),
            }
        }
        self.items = items;
        self
    }

    /// Counts the rejected items in `/metrics` and answers: the valid items, or, when none is
    /// left, why the batch as a whole is refused (`scope`: the token's cluster, if scoped).
    pub fn finish(mut self, scope: Option<&str>) -> Result<Accepted<I>, BatchError> {
        self.rejected.sort_by_key(|r| r.index);
        count_rejected(self.route, &self.rejected);
        if self.items.is_empty() {
            if let Some(scope) = scope
                && self.rejected.iter().all(|r| r.reason == RejectReason::ForbiddenCluster)
            {
                return Err(BatchError::AllForbidden(scope.to_string()));
            }
            return Err(BatchError::AllInvalid {
                received: self.received,
                items: self.route.items(),
                rejected: self.rejected,
            });
        }
        let (indices, items) = self.items.into_iter().unzip();
        Ok(Accepted {
            received: self.received,
            items,
            indices,
            rejected: self.rejected,
        })
    }
}

/// Counts items a route refused after validation (e.g. log lines whose signal is invalid).
pub fn count_rejected<'a>(route: Route, rejected: impl IntoIterator<Item = &'a RejectedItem>) {
    for r in rejected {
        metrics::counter!("faultline_ingest_items_total",
            "route" => route.as_str(), "outcome" => "rejected", "reason" => r.reason.as_str())
        .increment(1);
    }
}

/// Counts stored and duplicate items of a route (rejected ones are counted by [`Batch::finish`]).
pub fn count_stored(route: Route, accepted: usize, duplicates: usize) {
    let counter = |outcome: &'static str| metrics::counter!("faultline_ingest_items_total", "route" => route.as_str(), "outcome" => outcome, "reason" => "none");
    counter("accepted").increment(accepted as u64);
    counter("duplicate").increment(duplicates as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<(String, u32), Rejection> {
        let (c, n) = s
            .split_once('/')
            .ok_or((RejectReason::InvalidField, FieldError::new("item", "no '/'")))?;
        let n = n
            .parse()
            .map_err(|_| (RejectReason::InvalidField, FieldError::new("n", "not a number")))?;
        Ok((c.to_string(), n))
    }

    #[test]
    fn bad_items_are_rejected_alone_in_index_order() {
        let a = Batch::new(Route::Nodes, vec!["a/1", "x", "b/2", "a/1", "a/z"], 10)
            .unwrap()
            .parse(parse)
            .scoped(|i| i.0.as_str(), |c| c == "a")
            .dedup_by("id", |i| i.clone(), |i| format!("{}/{}", i.0, i.1))
            .finish(Some("a"))
            .unwrap();
        assert_eq!(a.received, 5);
        assert_eq!(a.items, vec![("a".to_string(), 1)]);
        let got: Vec<(usize, RejectReason)> = a.rejected.iter().map(|r| (r.index, r.reason)).collect();
        assert_eq!(
            got,
            [
                (1, RejectReason::InvalidField),
                (2, RejectReason::ForbiddenCluster),
                (3, RejectReason::DuplicateInBatch),
                (4, RejectReason::InvalidField)
            ]
        );
        assert_eq!(a.rejected[3].field.as_deref(), Some("n"));
    }

    #[test]
    fn whole_batch_answers() {
        assert!(matches!(
            Batch::<&str>::new(Route::Jobs, vec![], 10),
            Err(BatchError::Empty("jobs"))
        ));
        assert!(matches!(
            Batch::new(Route::Events, vec!["a/1"; 3], 2),
            Err(BatchError::TooLarge { count: 3, limit: 2, .. })
        ));
        let all_bad = Batch::new(Route::Events, vec!["x", "y"], 10)
            .unwrap()
            .parse(parse)
            .finish(None);
        assert!(
            matches!(all_bad, Err(BatchError::AllInvalid { received: 2, ref rejected, .. }) if rejected.len() == 2)
        );
        let forbidden = Batch::new(Route::Events, vec!["b/1"], 10)
            .unwrap()
            .parse(parse)
            .scoped(|i| i.0.as_str(), |c| c == "a")
            .finish(Some("a"));
        assert_eq!(
            forbidden.unwrap_err().to_string(),
            "this token may only write cluster 'a'"
        );
    }
}
