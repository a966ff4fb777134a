//! Keeping the rollups equal to a recount of the failures: every write that changes what a failure
//! counts under (re-fold, catalog rebuild, post-mortem, inventory) reads the facts of the failures it
//! touches before and after, and adds the difference, in its own transaction. The difference goes
//! in one upsert per table with the keys sorted, so concurrent batches that touch the same rows
//! take their row locks in the same order.

use std::collections::BTreeMap;

use chrono::{Datelike, NaiveDate};
use sqlx::PgConnection;

use crate::storage::rollups::{self as store, CauseColumns, Fact, GroupColumns};

type CauseKey = (&'static str, NaiveDate, String, String, String, String, String, String);
type GroupKey = (&'static str, NaiveDate, String, String, String);

/// Rows to add to the rollups (negative for failures that went away).
#[derive(Debug, Default)]
pub struct Delta {
    causes: BTreeMap<CauseKey, (i64, i64)>,
    groups: BTreeMap<GroupKey, i64>,
}

fn buckets(day: NaiveDate) -> [(&'static str, NaiveDate); 2] {
    [("day", day), ("month", day.with_day(1).expect("day 1 exists"))]
}

impl Delta {
    /// The change from `before` to `after` (facts of the same selection).
    pub fn between(before: &[Fact], after: &[Fact]) -> Delta {
        let mut d = Delta::default();
        d.add(before, -1);
        d.add(after, 1);
        d
    }

    pub fn add(&mut self, facts: &[Fact], sign: i64) {
        for f in facts {
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

    /// Adds the non-zero rows, causes then groups, each in key order and in chunks.
    pub async fn apply(self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        const CHUNK: usize = 5_000;
        let causes: Vec<_> = self.causes.into_iter().filter(|(_, v)| *v != (0, 0)).collect();
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
        let groups: Vec<_> = self.groups.into_iter().filter(|(_, v)| *v != 0).collect();
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
        Ok(())
    }
}

/// Before a lifecycle write to a failure session (its post-mortem cause, or which of two merged
/// lifecycles is the latest, changes what its failure counts under): takes the catalog row FOR
/// SHARE and the session's fold-key stripe (the order ingest takes them: neither a re-fold of the
/// key nor an inventory change runs beside it) and returns the key's facts.
pub async fn before_lifecycle_write(
    conn: &mut PgConnection,
    cluster: &str,
    correlation_key: &str,
) -> Result<Vec<Fact>, sqlx::Error> {
    crate::storage::catalog::version_for_share(conn).await?;
    super::locks::lock(
        conn,
        super::locks::LockSpace::FoldKeys,
        &[format!("{cluster}\n{correlation_key}")],
    )
    .await?;
    store::facts_of_key(conn, cluster, correlation_key).await
}

/// After the write: adds the difference to the rollups.
pub async fn after_lifecycle_write(
    conn: &mut PgConnection,
    cluster: &str,
    correlation_key: &str,
    before: &[Fact],
) -> Result<(), sqlx::Error> {
    let after = store::facts_of_key(conn, cluster, correlation_key).await?;
    Delta::between(before, &after).apply(conn).await
}

/// Recounts both tables from every failure (after a catalog rebuild, in its transaction).
pub async fn rebuild(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    store::clear(conn).await?;
    let facts = store::facts_all(conn).await?;
    let mut d = Delta::default();
    d.add(&facts, 1);
    d.apply(conn).await
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let before = [fact("2026-03-04", "hardware", "g1", "", 2)];
        let after = [
            fact("2026-03-04", "hardware", "g1", "", 1),
            fact("2026-03-04", "user", "g1", "", 1),
        ];
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
        // Same group either way: nothing to write there.
        assert_eq!(d.groups[&("day", day, "a".into(), "g1".into(), String::new())], 0);
    }
}
