//! Keeping the rollups equal to a recount of the failures: every write that changes what a failure
//! counts under (re-fold, catalog rebuild, post-mortem, inventory) reads the facts of the failures it
//! touches before and after, and adds the difference, in its own transaction. The difference goes
//! in one upsert per table with the keys sorted, so concurrent batches that touch the same rows
//! take their row locks in the same order.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use sqlx::PgConnection;

use crate::storage::rollups::{self as store, CauseColumns, ErrorColumns, Facts, GroupColumns};

type CauseKey = (&'static str, NaiveDate, String, String, String, String, String, String);
type GroupKey = (&'static str, NaiveDate, String, String, String);
/// (period, bucket, cluster, kind, code, severity).
type ErrorKey = (&'static str, NaiveDate, String, String, String, String);

/// Rows to add to the rollups (negative for failures that went away).
#[derive(Debug, Default)]
pub struct Delta {
    causes: BTreeMap<CauseKey, (i64, i64)>,
    groups: BTreeMap<GroupKey, i64>,
    /// (root_failures, holding_failures, signals).
    errors: BTreeMap<ErrorKey, (i64, i64, i64)>,
}

/// Every row a fact of `day` counts in: its day, its month and its quarter.
fn buckets(day: NaiveDate) -> [(&'static str, NaiveDate); 3] {
    [
        ("day", day),
        ("month", store::month_start(day)),
        ("quarter", store::quarter_start(day)),
    ]
}

impl Delta {
    /// The change from `before` to `after` (facts of the same selection).
    pub fn between(before: &Facts, after: &Facts) -> Delta {
        let mut d = Delta::default();
        d.add(before, -1);
        d.add(after, 1);
        d
    }

    pub fn add(&mut self, facts: &Facts, sign: i64) {
        for f in &facts.errors {
            for (period, bucket) in buckets(f.day) {
                let e = self
                    .errors
                    .entry((
                        period,
                        bucket,
                        f.cluster.clone(),
                        f.kind.clone(),
                        f.code.clone(),
                        f.severity.clone(),
                    ))
                    .or_default();
                e.0 += sign * f.root_failures;
                e.1 += sign * f.holding_failures;
                e.2 += sign * f.signals;
            }
        }
        for f in &facts.causes {
            for (period, bucket) in buckets(f.day) {
                let c = self
                    .causes
                    .entry((
                        period,
                        bucket,
                        f.cluster.clone(),
                        f.generation.clone(),
                        f.model.clone(),
                        f.category.clone(),
                        f.component.clone(),
                        f.symptom.clone(),
                    ))
                    .or_default();
                c.0 += sign * f.failures;
                c.1 += sign * f.signals;
                *self
                    .groups
                    .entry((
                        period,
                        bucket,
                        f.cluster.clone(),
                        f.node_group.clone(),
                        f.root_node.clone(),
                    ))
                    .or_default() += sign * f.failures;
            }
        }
    }

    /// Adds the non-zero rows, causes, groups then errors, each in key order and in chunks, then
    /// moves the versions of the cause and group buckets it changed.
    pub async fn apply(self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        const CHUNK: usize = 5_000;
        let causes: Vec<_> = self.causes.into_iter().filter(|(_, v)| *v != (0, 0)).collect();
        let groups: Vec<_> = self.groups.into_iter().filter(|(_, v)| *v != 0).collect();
        // The (rollup, period, bucket, cluster)s whose rows change, sorted and distinct: their
        // versions move last. A cause month's version also moves with any of its days (the
        // timeline keeps a month of day counts under it; a failure that moves between two days of
        // one month leaves the month row as it was).
        let mut moved: Vec<(&'static str, &'static str, NaiveDate, &String)> = causes
            .iter()
            .flat_map(|((p, b, c, ..), _)| {
                let days_month = (*p == "day").then(|| ("causes", "month", store::month_start(*b), c));
                std::iter::once(("causes", *p, *b, c)).chain(days_month)
            })
            .chain(groups.iter().map(|((p, b, c, ..), _)| ("groups", *p, *b, c)))
            .collect();
        moved.sort();
        moved.dedup();
        for chunk in causes.chunks(CHUNK) {
            let mut c = CauseColumns::default();
            for ((period, bucket, cluster, generation, model, category, component, symptom), (n, s)) in chunk {
                c.period.push(period);
                c.bucket.push(*bucket);
                c.cluster.push(cluster.clone());
                c.generation.push(generation.clone());
                c.model.push(model.clone());
                c.category.push(category.clone());
                c.component.push(component.clone());
                c.symptom.push(symptom.clone());
                c.failures.push(*n);
                c.signals.push(*s);
            }
            store::add_causes(conn, &c).await?;
        }
        for chunk in groups.chunks(CHUNK) {
            let mut c = GroupColumns::default();
            for ((period, bucket, cluster, node_group, root_node), n) in chunk {
                c.period.push(period);
                c.bucket.push(*bucket);
                c.cluster.push(cluster.clone());
                c.node_group.push(node_group.clone());
                c.root_node.push(root_node.clone());
                c.failures.push(*n);
            }
            store::add_groups(conn, &c).await?;
        }
        let errors: Vec<_> = self.errors.into_iter().filter(|(_, v)| *v != (0, 0, 0)).collect();
        for chunk in errors.chunks(CHUNK) {
            let mut c = ErrorColumns::default();
            for ((period, bucket, cluster, kind, code, severity), (r, h, s)) in chunk {
                c.period.push(period);
                c.bucket.push(*bucket);
                c.cluster.push(cluster.clone());
                c.kind.push(kind.clone());
                c.code.push(code.clone());
                c.severity.push(severity.clone());
                c.root_failures.push(*r);
                c.holding_failures.push(*h);
                c.signals.push(*s);
            }
            store::add_errors(conn, &c).await?;
        }
        let (mut rollups, mut periods, mut buckets, mut clusters) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (r, p, b, c) in moved {
            rollups.push(r);
            periods.push(p);
            buckets.push(b);
            clusters.push(c.clone());
        }
        store::bump_versions(conn, &rollups, &periods, &buckets, &clusters).await
    }
}

/// Before lifecycle writes to failure sessions (a post-mortem cause, or which of two merged
/// lifecycles is the latest, changes what its failure counts under): takes the catalog lock shared
/// and the sessions' fold-key stripes (the order ingest takes them: neither a re-fold of these keys
/// nor an inventory change runs beside it, and writes of the same session wait for each other).
/// `keys` are "cluster\ncorrelation_key".
pub async fn lock_for_lifecycle_write(conn: &mut PgConnection, keys: &[String]) -> Result<(), sqlx::Error> {
    crate::storage::catalog::version_for_share(conn).await?;
    super::locks::lock(conn, super::locks::LockSpace::FoldKeys, keys).await
}

/// What the failures of `cluster` with these ids count under (before and after a lifecycle write
/// to their sessions: a lifecycle moves only the failure whose span holds its anchor).
pub async fn facts_of_failures(
    conn: &mut PgConnection,
    cluster: &str,
    ids: &[uuid::Uuid],
) -> Result<Facts, sqlx::Error> {
    store::facts_of_failures(conn, cluster, ids).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::rollups::{ErrorFact, Fact};

    fn causes(facts: Vec<Fact>) -> Facts {
        Facts {
            causes: facts,
            errors: Vec::new(),
        }
    }

    fn fact(day: &str, category: &str, group: &str, node: &str, n: i64) -> Fact {
        Fact {
            day: day.parse().unwrap(),
            cluster: "a".into(),
            generation: "hopper".into(),
            model: "H100".into(),
            category: category.into(),
            component: "gpu".into(),
            symptom: "job_crash".into(),
            node_group: group.into(),
            root_node: node.into(),
            failures: n,
            signals: 3 * n,
        }
    }

    #[test]
    fn a_moved_failure_leaves_its_old_rows_and_joins_the_new_ones() {
        let before = causes(vec![fact("2026-03-04", "hardware", "g1", "", 2)]);
        let after = causes(vec![
            fact("2026-03-04", "hardware", "g1", "", 1),
            fact("2026-03-04", "user", "g1", "", 1),
        ]);
        let d = Delta::between(&before, &after);
        let day = "2026-03-04".parse().unwrap();
        let month = "2026-03-01".parse().unwrap();
        let key = |p, b, c: &str| {
            (
                p,
                b,
                "a".into(),
                "hopper".into(),
                "H100".into(),
                c.to_string(),
                "gpu".into(),
                "job_crash".into(),
            )
        };
        assert_eq!(d.causes[&key("day", day, "hardware")], (-1, -3));
        assert_eq!(d.causes[&key("month", month, "user")], (1, 3));
        let quarter = "2026-01-01".parse().unwrap();
        assert_eq!(d.causes[&key("quarter", quarter, "hardware")], (-1, -3));
        assert_eq!(d.causes[&key("quarter", quarter, "user")], (1, 3));
        // Same group either way: nothing to write there.
        assert_eq!(d.groups[&("day", day, "a".into(), "g1".into(), String::new())], 0);
    }

    #[test]
    fn a_refold_that_regrades_a_failure_moves_its_error_rows_by_severity() {
        let e = |severity: &str, root, holding, signals| ErrorFact {
            day: "2026-03-31".parse().unwrap(),
            cluster: "a".into(),
            kind: "xid".into(),
            code: "79".into(),
            severity: severity.into(),
            root_failures: root,
            holding_failures: holding,
            signals,
        };
        // Three failures rooted at xid 79 (five xid 79 signals in all) were critical; a catalog
        // edit makes one of them (two signals) high.
        let before = Facts {
            causes: Vec::new(),
            errors: vec![e("critical", 3, 3, 5)],
        };
        let after = Facts {
            causes: Vec::new(),
            errors: vec![e("critical", 2, 2, 3), e("high", 1, 1, 2)],
        };
        let d = Delta::between(&before, &after);
        let key = |p, b: &str, sev: &str| {
            (
                p,
                b.parse().unwrap(),
                "a".to_string(),
                "xid".to_string(),
                "79".to_string(),
                sev.to_string(),
            )
        };
        assert_eq!(d.errors[&key("day", "2026-03-31", "critical")], (-1, -1, -2));
        assert_eq!(d.errors[&key("month", "2026-03-01", "high")], (1, 1, 2));
        assert_eq!(d.errors[&key("quarter", "2026-01-01", "critical")], (-1, -1, -2));
        // Two severities, each in its day, month and quarter.
        assert_eq!(d.errors.len(), 6);
        assert!(d.causes.is_empty() && d.groups.is_empty());
    }
}
