//! Folding is a pure function of the set of signals: arrival order, batching, concurrency and burst
//! compaction must not change a failure. And a batch of any size takes a bounded number of locks.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, Backend, TestApp, event, join_all, spawn_app_on_backend};

fn t0() -> DateTime<Utc> {
    "2026-11-02T18:00:00Z".parse().unwrap()
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn xid48(id: uuid::Uuid, at: DateTime<Utc>, node: &str) -> Value {
    event(
        &id.to_string(),
        json!({"node": node, "gpu_index": 2, "code": 48, "occurred_at": ts(at), "message": "Xid 48: DBE"}),
    )
}

/// (correlation key, first, last, root kind) of every failure, in order.
async fn failure_rows(app: &TestApp) -> Vec<(String, DateTime<Utc>, DateTime<Utc>, String)> {
    sqlx::query_as(
        "SELECT correlation_key, first_at, last_at, root_kind FROM failures ORDER BY correlation_key, first_at",
    )
    .fetch_all(&app.db)
    .await
    .unwrap()
}

async fn post(app: &TestApp, events: &[Value]) {
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({ "events": events })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rejected"].as_array().unwrap().len(), 0, "{body}");
}

/// A GPU logging an uncorrectable ECC error every 40 s, the last signal arriving first: the
/// earlier ones extend its burst backwards in time, and the batch must not fail (it hit
/// `failures_pkey` when only the burst's first occurrence was re-folded).
#[tokio::test]
async fn a_burst_arriving_backwards_is_one_failure() {
    a_burst_arriving_backwards_is_one_failure_on(Backend::Postgres).await;
}

#[tokio::test]
async fn a_burst_arriving_backwards_is_one_failure_on_citus() {
    a_burst_arriving_backwards_is_one_failure_on(Backend::Citus).await;
}

async fn a_burst_arriving_backwards_is_one_failure_on(backend: Backend) {
    let app = spawn_app_on_backend(backend).await;
    post(
        &app,
        &[xid48(uuid::Uuid::new_v4(), t0() + Duration::seconds(1207), "n1")],
    )
    .await;
    let earlier: Vec<Value> = (0..30)
        .map(|i| xid48(uuid::Uuid::new_v4(), t0() + Duration::seconds(40 * i), "n1"))
        .collect();
    post(&app, &earlier).await;
    // 0, 40, ..., 1160 s and 1207 s: gaps of at most 47 s, one failure over the whole span.
    assert_eq!(
        failure_rows(&app).await,
        [(
            "node:n1".to_string(),
            t0(),
            t0() + Duration::seconds(1207),
            "xid".to_string()
        )]
    );
}

/// Gaps are measured from a burst's last occurrence: a burst 18:01:47-18:03:28 and a signal at
/// 18:13:13 are 9 min 45 s apart, inside the 10-minute window: one failure, ending at 18:13:13.
#[tokio::test]
async fn the_gap_after_a_burst_counts_from_its_end() {
    the_gap_after_a_burst_counts_from_its_end_on(Backend::Postgres).await;
}

#[tokio::test]
async fn the_gap_after_a_burst_counts_from_its_end_on_citus() {
    the_gap_after_a_burst_counts_from_its_end_on(Backend::Citus).await;
}

async fn the_gap_after_a_burst_counts_from_its_end_on(backend: Backend) {
    let app = spawn_app_on_backend(backend).await;
    let start = t0() + Duration::seconds(107);
    let mut events: Vec<Value> = (0..6)
        .map(|i| xid48(uuid::Uuid::new_v4(), start + Duration::seconds(20 * i), "n1"))
        .collect();
    events.push(xid48(uuid::Uuid::new_v4(), t0() + Duration::seconds(208), "n1"));
    post(&app, &events).await;
    let late = t0() + Duration::seconds(13 * 60 + 13);
    post(&app, &[xid48(uuid::Uuid::new_v4(), late, "n1")]).await;
    assert_eq!(
        failure_rows(&app).await,
        [("node:n1".to_string(), start, late, "xid".to_string())]
    );
}

/// Failures folded from the raw signals directly: sorted by time, a new failure wherever the gap
/// from the latest signal so far exceeds the window. The root kind is xid when the session holds
/// one (a hardware cause outranks an NCCL timeout).
fn reference_fold(
    signals: &[(String, DateTime<Utc>, &str)],
    window: Duration,
) -> Vec<(String, DateTime<Utc>, DateTime<Utc>, String)> {
    let mut sorted = signals.to_vec();
    sorted.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let mut out: Vec<(String, DateTime<Utc>, DateTime<Utc>, String)> = Vec::new();
    for (key, at, kind) in sorted {
        match out.last_mut() {
            Some(f) if f.0 == key && at - f.2 <= window => {
                f.2 = f.2.max(at);
                if kind == "xid" {
                    f.3 = "xid".into();
                }
            }
            _ => out.push((key, at, at, kind.to_string())),
        }
    }
    out
}

/// A small deterministic generator (xorshift64*), so a failing case can be replayed by its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random signal sets per node (XIDs, compacted into bursts) and per job (NCCL timeouts and XIDs),
/// with gaps drawn around the 60 s burst span and the 10-minute window, sent in random order and
/// random batches, some concurrently: the failures equal the reference fold of the raw signals.
#[tokio::test]
async fn failures_do_not_depend_on_arrival_order_batching_or_bursts() {
    failures_do_not_depend_on_arrival_order_batching_or_bursts_on(Backend::Postgres).await;
}

#[tokio::test]
async fn failures_do_not_depend_on_arrival_order_batching_or_bursts_on_citus() {
    failures_do_not_depend_on_arrival_order_batching_or_bursts_on(Backend::Citus).await;
}

async fn failures_do_not_depend_on_arrival_order_batching_or_bursts_on(backend: Backend) {
    let app = spawn_app_on_backend(backend).await;
    const GAPS: [i64; 9] = [5, 30, 59, 61, 200, 540, 599, 601, 900];
    let mut rng = Rng(0x5eed_f01d);
    let mut raw: Vec<(String, DateTime<Utc>, &str)> = Vec::new();
    let mut events: Vec<Value> = Vec::new();
    for (case, key) in ["node:n1", "node:n2", "node:n3", "job:j1", "job:j2"]
        .into_iter()
        .enumerate()
    {
        let mut at = t0() + Duration::hours(case as i64 * 10);
        for _ in 0..(20 + rng.below(20)) {
            at += Duration::seconds(GAPS[rng.below(GAPS.len() as u64) as usize]);
            let id = uuid::Uuid::from_u64_pair(case as u64 + 1, rng.next());
            let (kind, e) = match key.split_once(':').unwrap() {
                ("node", n) => ("xid", xid48(id, at, n)),
                (_, j) if rng.below(4) == 0 => {
                    let mut e = xid48(id, at, "n9");
                    e["job_id"] = json!(j);
                    ("xid", e)
                }
                (_, j) => (
                    "nccl_timeout",
                    event(
                        &id.to_string(),
                        json!({"node": format!("n{}", 10 + rng.below(4)), "job_id": j, "kind": "nccl_timeout",
                               "code": null, "occurred_at": ts(at), "message": "Watchdog caught collective operation timeout"}),
                    ),
                ),
            };
            raw.push((key.to_string(), at, kind));
            events.push(e);
        }
    }
    let expected = reference_fold(&raw, Duration::minutes(10));
    // Fisher-Yates shuffle, then batches of 1 to 12 events, sent four at a time.
    for i in (1..events.len()).rev() {
        events.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut batches: Vec<Vec<Value>> = Vec::new();
    let mut rest = events.as_slice();
    while !rest.is_empty() {
        let n = (1 + rng.below(12) as usize).min(rest.len());
        batches.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    for group in batches.chunks(4) {
        join_all(group.iter().map(|b| post(&app, b)).collect()).await;
    }
    assert!(
        expected.len() > 10,
        "the case should hold several failures per key: {expected:?}"
    );
    assert_eq!(failure_rows(&app).await, expected);
    // Bursts were compacted (fewer rows than signals), and that changed no failure.
    let rows = app.count("SELECT count(*) FROM events").await;
    assert!(rows < raw.len() as i64, "{rows} rows for {} signals", raw.len());
}

/// 10,000 events on 10,000 distinct nodes in one batch, and four concurrent batches of 2,000
/// distinct nodes: every one is stored (one advisory lock per node ran out Postgres's shared lock
/// table: "out of shared memory", also for other databases on the server).
#[tokio::test]
async fn a_batch_of_ten_thousand_distinct_nodes_takes_bounded_locks() {
    a_batch_of_ten_thousand_distinct_nodes_takes_bounded_locks_on(Backend::Postgres).await;
}

// On Citus the stripes are advisory locks of the coordinator's transaction, so the bound holds
// there as on one Postgres (the workers take their shards' locks, not one per node).
#[tokio::test]
async fn a_batch_of_ten_thousand_distinct_nodes_takes_bounded_locks_on_citus() {
    a_batch_of_ten_thousand_distinct_nodes_takes_bounded_locks_on(Backend::Citus).await;
}

async fn a_batch_of_ten_thousand_distinct_nodes_takes_bounded_locks_on(backend: Backend) {
    let app = spawn_app_on_backend(backend).await;
    let batch = |offset: usize, n: usize| -> Vec<Value> {
        (offset..offset + n)
            .map(|i| {
                xid48(
                    uuid::Uuid::new_v4(),
                    t0() + Duration::seconds(i as i64 % 3600),
                    &format!("wide-{i:05}"),
                )
            })
            .collect()
    };
    post(&app, &batch(0, 10_000)).await;
    let groups: Vec<Vec<Value>> = (0..4).map(|g| batch(10_000 + g * 2_000, 2_000)).collect();
    join_all(groups.iter().map(|b| post(&app, b)).collect()).await;
    assert_eq!(app.count("SELECT count(*) FROM events").await, 18_000);
    assert_eq!(app.count("SELECT count(*) FROM failures").await, 18_000);
}
