//! What the read use cases keep in memory between requests: rollup buckets, each filed under the
//! versions its clusters had when it was read (migration 0021), and used again while those
//! versions hold. Process-wide rather than per `ApiContext`, like the inventory cache; correct
//! across instances and replicas because every use first reads the versions from the database it
//! answers from.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::NaiveDate;
use sqlx::PgPool;

use crate::storage::rollups::BucketVersion;

/// Which data: the database (server, port, name: tests and benchmarks run several in one process)
/// and the cluster filter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Source(String, u16, String, Option<String>);

impl Source {
    pub fn of(db: &PgPool, cluster: Option<&str>) -> Self {
        let o = db.connect_options();
        Source(
            o.get_host().to_string(),
            o.get_port(),
            o.get_database().unwrap_or_default().to_string(),
            cluster.map(str::to_string),
        )
    }
}

/// (period, bucket) of a rollup.
pub type BucketKey = (String, NaiveDate);

/// The versions of one bucket's clusters, in cluster order.
pub type Versions = Vec<(String, i64)>;

/// Version rows in (period, bucket, cluster) order, gathered per bucket.
pub fn by_bucket(rows: Vec<BucketVersion>) -> Vec<(BucketKey, Versions)> {
    let mut out: Vec<(BucketKey, Versions)> = Vec::new();
    for v in rows {
        match out.last_mut() {
            Some(((p, b), versions)) if *p == v.period && *b == v.bucket => versions.push((v.cluster, v.version)),
            _ => out.push(((v.period, v.bucket), vec![(v.cluster, v.version)])),
        }
    }
    out
}

/// What a bucket cache keeps: its weight counts against the cache's bound.
pub trait Weigh {
    fn weight(&self) -> usize;
}

/// Buckets kept with the versions they were read at. Bounded in total weight and in buckets:
/// past either bound it starts afresh (a fleet's dashboards read a few windows, so a cold start
/// costs one read of each).
pub struct BucketCache<V> {
    entries: Mutex<Entries<V>>,
    max_weight: usize,
    max_buckets: usize,
}

struct Entries<V> {
    map: HashMap<(Source, BucketKey), (Versions, Arc<V>)>,
    weight: usize,
}

impl<V: Weigh> BucketCache<V> {
    pub fn new(max_weight: usize, max_buckets: usize) -> Self {
        BucketCache {
            entries: Mutex::new(Entries {
                map: HashMap::new(),
                weight: 0,
            }),
            max_weight,
            max_buckets,
        }
    }

    /// The bucket kept at exactly these versions, if `usable` accepts it.
    pub fn get(
        &self,
        source: &Source,
        key: &BucketKey,
        versions: &[(String, i64)],
        usable: impl Fn(&V) -> bool,
    ) -> Option<Arc<V>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .map
            .get(&(source.clone(), key.clone()))
            .filter(|(v, kept)| v == versions && usable(kept))
            .map(|(_, kept)| kept.clone())
    }

    /// Keeps `value` as read after `versions` were (so it is never older than they say).
    pub fn put(&self, source: Source, key: BucketKey, versions: Versions, value: Arc<V>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let key = (source, key);
        if let Some((_, old)) = entries.map.remove(&key) {
            entries.weight -= old.weight() + 1;
        }
        let weight = value.weight() + 1;
        if entries.weight + weight > self.max_weight || entries.map.len() >= self.max_buckets {
            entries.map.clear();
            entries.weight = 0;
        }
        entries.weight += weight;
        entries.map.insert(key, (versions, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counts(usize);
    impl Weigh for Counts {
        fn weight(&self) -> usize {
            self.0
        }
    }

    fn source(db: &str) -> Source {
        Source("h".into(), 5432, db.into(), None)
    }

    fn key(day: u32) -> BucketKey {
        ("day".into(), NaiveDate::from_ymd_opt(2026, 5, day).unwrap())
    }

    #[test]
    fn a_bucket_is_used_again_only_at_the_versions_it_was_read_at() {
        let cache = BucketCache::new(100, 10);
        let v1 = vec![("a".to_string(), 7), ("b".to_string(), 9)];
        cache.put(source("x"), key(1), v1.clone(), Arc::new(Counts(3)));
        assert_eq!(cache.get(&source("x"), &key(1), &v1, |_| true).map(|c| c.0), Some(3));
        // A moved version, a cluster more or less, another database, another bucket: not kept.
        assert!(
            cache
                .get(&source("x"), &key(1), &[("a".into(), 7), ("b".into(), 10)], |_| true)
                .is_none()
        );
        assert!(cache.get(&source("x"), &key(1), &[("a".into(), 7)], |_| true).is_none());
        assert!(cache.get(&source("y"), &key(1), &v1, |_| true).is_none());
        assert!(cache.get(&source("x"), &key(2), &v1, |_| true).is_none());
        // Kept, but refused by the caller (read against another inventory, say).
        assert!(cache.get(&source("x"), &key(1), &v1, |_| false).is_none());
    }

    #[test]
    fn past_its_weight_or_its_buckets_the_cache_starts_afresh() {
        let cache = BucketCache::new(10, 3);
        let v = vec![("a".to_string(), 1)];
        cache.put(source("x"), key(1), v.clone(), Arc::new(Counts(4)));
        // Replacing a bucket takes its old weight off: 4 + 1 then 5 + 1 of 10.
        cache.put(source("x"), key(1), v.clone(), Arc::new(Counts(5)));
        cache.put(source("x"), key(2), v.clone(), Arc::new(Counts(2)));
        assert!(cache.get(&source("x"), &key(1), &v, |_| true).is_some());
        // 6 + 3 kept, 3 more is past 10: afresh, with only the new bucket.
        cache.put(source("x"), key(3), v.clone(), Arc::new(Counts(2)));
        assert!(cache.get(&source("x"), &key(1), &v, |_| true).is_none());
        assert!(cache.get(&source("x"), &key(3), &v, |_| true).is_some());
        for d in 4..6 {
            cache.put(source("x"), key(d), v.clone(), Arc::new(Counts(0)));
        }
        // Three buckets kept: a fourth starts afresh.
        cache.put(source("x"), key(6), v.clone(), Arc::new(Counts(0)));
        assert!(cache.get(&source("x"), &key(3), &v, |_| true).is_none());
        assert!(cache.get(&source("x"), &key(6), &v, |_| true).is_some());
    }
}
