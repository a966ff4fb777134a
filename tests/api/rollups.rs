//! The rollups (migrations 0014, 0015 and 0018) equal a recount from the failures after every kind of write that
//! moves a failure between their rows: batches in random order and concurrently, inventory that
//! arrives late or changes, post-mortems, a catalog edit. And the analytics that read them answer
//! as a count over the failures does, for windows with ragged ends.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, Backend, TestApp, event, join_all, spawn_app_on_backend, uuid_n};
use faultline::analytics::headline::{self, FleetFailures, Inventory, NodeService};
use faultline::devtools::simulate::{SimConfig, simulate};

type CauseRow = (String, String, String, String, String, String, String, String, i64, i64);
type GroupRow = (String, String, String, String, String, i64);
type ErrorRow = (String, String, String, String, String, String, i64, i64, i64);

/// The three rollup tables (rows at zero left out) and their recount from the failures, in one order.
pub(crate) async fn assert_rollups_recount(app: &TestApp, after: &str) {
    assert_rollups_recount_from(app, after, false).await
}

/// [`assert_rollups_recount`]; with `kept_kinds`, the held kinds and codes come from the failures'
/// `signal_kinds`, for failures whose signal rows retention dropped.
pub(crate) async fn assert_rollups_recount_from(app: &TestApp, after: &str, kept_kinds: bool) {
    let stored: Vec<CauseRow> = sqlx::query_as(
        "SELECT period, bucket::text, cluster, generation, model, category, component, symptom, failures, signals
         FROM rollup_causes WHERE failures <> 0 OR signals <> 0 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    let recount: Vec<CauseRow> = sqlx::query_as(
        "SELECT p.period, date_trunc(p.period, f.day)::date::text,
                f.cluster, f.generation, f.model, f.category, f.component, f.symptom, count(*), sum(f.signal_count)::bigint
         FROM (SELECT (fe.first_at AT TIME ZONE 'UTC')::date AS day, fe.cluster,
                      COALESCE(n.gpu_generation, fe.signal_generation) AS generation, COALESCE(n.gpu_model, 'unknown') AS model,
                      fe.effective_category AS category, fe.effective_component AS component,
                      COALESCE(fe.symptom, 'unspecified') AS symptom, fe.signal_count
               FROM failures_effective fe LEFT JOIN nodes n ON n.cluster = fe.cluster AND n.hostname = fe.root_node) f
         CROSS JOIN (VALUES ('day'), ('month'), ('quarter')) AS p(period)
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert!(!recount.is_empty(), "{after}: no failures to count");
    assert_eq!(stored, recount, "rollup_causes after {after}");
    let stored: Vec<GroupRow> = sqlx::query_as(
        "SELECT period, bucket::text, cluster, node_group, root_node, failures
         FROM rollup_groups WHERE failures <> 0 ORDER BY 1, 2, 3, 4, 5",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    let recount: Vec<GroupRow> = sqlx::query_as(
        "SELECT p.period, date_trunc(p.period, f.day)::date::text,
                f.cluster, f.node_group, f.root_node, count(*)
         FROM (SELECT (fa.first_at AT TIME ZONE 'UTC')::date AS day, fa.cluster, COALESCE(n.group_label, '') AS node_group,
                      CASE WHEN n.group_label IS NULL THEN COALESCE(fa.root_node, '') ELSE '' END AS root_node
               FROM failures fa LEFT JOIN nodes n ON n.cluster = fa.cluster AND n.hostname = fa.root_node) f
         CROSS JOIN (VALUES ('day'), ('month'), ('quarter')) AS p(period)
         GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(stored, recount, "rollup_groups after {after}");
    // rollup_errors: roots from the failures' root columns, held kinds and codes from the signal
    // rows themselves (through signal_ids), not from the failures' signal_kinds.
    let stored: Vec<ErrorRow> = sqlx::query_as(
        "SELECT period, bucket::text, cluster, kind, code, severity, root_failures, holding_failures, signals
         FROM rollup_errors WHERE root_failures <> 0 OR holding_failures <> 0 OR signals <> 0 ORDER BY 1, 2, 3, 4, 5, 6",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    let recount: Vec<ErrorRow> = sqlx::query_as(
        "WITH f AS (SELECT id, (first_at AT TIME ZONE 'UTC')::date AS day, cluster, severity, root_kind, root_code, signal_ids,
                           signal_kinds
                    FROM failures),
              e AS (SELECT day, cluster, root_kind AS kind, COALESCE(root_code::text, '') AS code, severity,
                           count(*) AS root, 0 AS holding, 0 AS signals
                    FROM f GROUP BY 1, 2, 3, 4, 5
                    UNION ALL
                    SELECT f.day, f.cluster, ev.kind, COALESCE(ev.code::text, ''), f.severity, 0, count(DISTINCT f.id), count(*)
                    FROM f CROSS JOIN LATERAL unnest(f.signal_ids) AS s(id) JOIN events ev ON ev.id = s.id
                    WHERE NOT $1
                    GROUP BY 1, 2, 3, 4, 5
                    UNION ALL
                    SELECT f.day, f.cluster, split_part(k, E'\\x1f', 1), split_part(k, E'\\x1f', 2), f.severity, 0,
                           count(DISTINCT f.id), count(*)
                    FROM f CROSS JOIN LATERAL unnest(f.signal_kinds) AS k
                    WHERE $1
                    GROUP BY 1, 2, 3, 4, 5)
         SELECT p.period, date_trunc(p.period, e.day)::date::text,
                e.cluster, e.kind, e.code, e.severity, sum(e.root)::bigint, sum(e.holding)::bigint, sum(e.signals)::bigint
         FROM e CROSS JOIN (VALUES ('day'), ('month'), ('quarter')) AS p(period)
         GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6",
    )
    .bind(kept_kinds)
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(stored, recount, "rollup_errors after {after}");
}

/// top-errors over `[from, to)` against a count over the failures of the window: per root (kind,
/// code) its failures and most common severity, per held (kind, code) its failures and signals.
async fn assert_top_errors_recount(app: &TestApp, from: DateTime<Utc>, to: DateTime<Utc>) {
    let window = format!("from={}&to={}", iso(from), iso(to));
    let (status, v) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/top-errors?limit=1000&{window}"))
        .await;
    assert_eq!(status, 200, "{v}");
    let rows = |view: &str, with_severity: bool| -> Vec<(String, Option<i64>, i64, i64, String)> {
        let mut out: Vec<_> = v[view]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["kind"].as_str().unwrap().to_string(),
                    r["code"].as_i64(),
                    r["failures"].as_i64().unwrap(),
                    r["signals"].as_i64().unwrap(),
                    if with_severity {
                        r["severity"].as_str().unwrap().to_string()
                    } else {
                        String::new()
                    },
                )
            })
            .collect();
        out.sort();
        out
    };
    // Sorted here (Postgres orders a NULL code last, Rust None first).
    let mut roots: Vec<(String, Option<i64>, i64, i64, String)> = sqlx::query_as(
        "SELECT root_kind, root_code, count(*), count(*), mode() WITHIN GROUP (ORDER BY severity)
         FROM failures WHERE first_at >= $1 AND first_at < $2 GROUP BY 1, 2",
    )
    .bind(from)
    .bind(to)
    .fetch_all(&app.db)
    .await
    .unwrap();
    roots.sort();
    assert_eq!(rows("root_signals", true), roots, "top-errors roots {window}");
    // A failure holds signals of its own cluster: joining on the cluster too changes no row, and
    // Citus needs it (events and failures are sharded by cluster; a join on the id alone is one it
    // refuses: "complex joins are only supported when all distributed tables are co-located and
    // joined on their distribution columns").
    let mut held: Vec<(String, Option<i64>, i64, i64, String)> = sqlx::query_as(
        "SELECT ev.kind, ev.code, count(DISTINCT f.id), count(*), ''
         FROM failures f CROSS JOIN LATERAL unnest(f.signal_ids) AS s(id)
              JOIN events ev ON ev.cluster = f.cluster AND ev.id = s.id
         WHERE f.first_at >= $1 AND f.first_at < $2 GROUP BY 1, 2",
    )
    .bind(from)
    .bind(to)
    .fetch_all(&app.db)
    .await
    .unwrap();
    held.sort();
    assert_eq!(rows("all_signals", false), held, "top-errors all signals {window}");
    let (failures, signals): (i64, i64) = sqlx::query_as(
        "SELECT count(*), COALESCE(sum(signal_count), 0)::bigint FROM failures WHERE first_at >= $1 AND first_at < $2",
    )
    .bind(from)
    .bind(to)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(
        (v["failures"].as_i64(), v["signals"].as_i64()),
        (Some(failures), Some(signals))
    );
}

/// A small deterministic generator (xorshift), so a failing seed replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// MTBF's (group, failures) and fleet failures over [from, to), from the inventory and a per-node
/// count of the failures themselves (no rollup), through the same pure function.
async fn mtbf_recount(app: &TestApp, from: DateTime<Utc>, to: DateTime<Utc>) -> (Vec<(String, i64)>, i64) {
    type NodeRow = (
        String,
        String,
        String,
        String,
        i32,
        Option<String>,
        DateTime<Utc>,
        Option<DateTime<Utc>>,
    );
    let nodes: Vec<NodeRow> = sqlx::query_as(
        "SELECT cluster, hostname, gpu_model, gpu_generation, gpu_count, group_label,
                COALESCE(in_service_since, first_registered_at), retired_at FROM nodes",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    let nodes: Vec<NodeService> = nodes
        .into_iter()
        .map(
            |(cluster, hostname, gpu_model, gpu_generation, gpu_count, group, since, retired_at)| NodeService {
                cluster,
                hostname,
                gpu_model,
                gpu_generation,
                gpu_count: gpu_count as u32,
                group,
                in_service_since: since,
                retired_at,
            },
        )
        .collect();
    let counts: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT cluster, root_node, count(*) FROM failures
         WHERE first_at >= $1 AND first_at < $2 AND root_node IS NOT NULL GROUP BY 1, 2",
    )
    .bind(from)
    .bind(to)
    .fetch_all(&app.db)
    .await
    .unwrap();
    let per_node = counts.into_iter().map(|(c, h, n)| ((c, h), n as u64)).collect();
    let inventory = Inventory::new(nodes);
    let failures = FleetFailures::of_nodes(&inventory, &per_node);
    let (groups, fleet) = headline::mtbf(&inventory, &failures, 128, from, to, 0.95);
    (
        groups.into_iter().map(|g| (g.group, g.failures as i64)).collect(),
        fleet.failures as i64,
    )
}

/// mtbf over each window equals the pure MTBF over a per-node recount. Called after every kind
/// of change, with the same windows, so the buckets mtbf keeps in memory from the call before
/// must have been read again wherever the change moved them. Returns the fleet's failures.
async fn assert_mtbf_recount(app: &TestApp, windows: &[(DateTime<Utc>, DateTime<Utc>)], after: &str) -> i64 {
    let mut failures = 0;
    for &(from, to) in windows {
        let window = format!("from={}&to={}", iso(from), iso(to));
        let (status, v) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/mtbf?{window}")).await;
        assert_eq!(status, 200, "{v}");
        let (groups, fleet) = mtbf_recount(app, from, to).await;
        let got: Vec<(String, i64)> = v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                (
                    g["group"].as_str().unwrap().to_string(),
                    g["failures"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, groups, "mtbf groups {window} after {after}");
        assert_eq!(
            v["fleet"]["failures"].as_i64(),
            Some(fleet),
            "mtbf fleet {window} after {after}"
        );
        failures += fleet;
    }
    failures
}

/// The daily timeline over each window equals a count of the failures per (UTC day, effective
/// category): after every kind of change, with the same windows, so the months the timeline keeps
/// in memory from the call before must have been read again wherever the change moved them.
async fn assert_timeline_recount(app: &TestApp, windows: &[(DateTime<Utc>, DateTime<Utc>)], after: &str) {
    for &(from, to) in windows {
        let window = format!("from={}&to={}", iso(from), iso(to));
        let (status, v) = app
            .get(ADMIN_TOKEN, &format!("/v1/analytics/timeline?period=day&{window}"))
            .await;
        assert_eq!(status, 200, "{v}");
        let mut got: Vec<(String, String, i64)> = Vec::new();
        for p in v["points"].as_array().unwrap() {
            for category in ["hardware", "platform", "user", "unknown"] {
                let n = p[category].as_i64().unwrap();
                if n > 0 {
                    got.push((p["period"].as_str().unwrap().to_string(), category.to_string(), n));
                }
            }
        }
        let mut want: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT ((first_at AT TIME ZONE 'UTC')::date)::text, effective_category, count(*) FROM failures_effective
             WHERE first_at >= $1 AND first_at < $2 GROUP BY 1, 2",
        )
        .bind(from)
        .bind(to)
        .fetch_all(&app.db)
        .await
        .unwrap();
        got.sort();
        want.sort();
        assert_eq!(got, want, "timeline {window} after {after}");
        assert!(
            !want.is_empty(),
            "timeline {window} after {after}: no failures to compare"
        );
    }
}

async fn put_nodes(app: &TestApp, nodes: &[Value]) {
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({ "nodes": nodes })).await;
    assert_eq!(status, 200, "{body}");
}

fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true).replace('+', "%2B")
}

#[tokio::test]
async fn rollups_equal_a_recount_after_random_ingest_inventory_post_mortems_and_a_catalog_edit() {
    rollups_equal_a_recount_after_random_ingest_inventory_post_mortems_and_a_catalog_edit_on(Backend::Postgres).await;
}

#[tokio::test]
async fn rollups_equal_a_recount_after_random_ingest_inventory_post_mortems_and_a_catalog_edit_on_citus() {
    rollups_equal_a_recount_after_random_ingest_inventory_post_mortems_and_a_catalog_edit_on(Backend::Citus).await;
}

async fn rollups_equal_a_recount_after_random_ingest_inventory_post_mortems_and_a_catalog_edit_on(backend: Backend) {
    let app = spawn_app_on_backend(backend).await;
    // Over a month boundary, so both periods have several buckets.
    let start = Utc.with_ymd_and_hms(2026, 5, 20, 0, 0, 0).unwrap();
    let fleet = simulate(&SimConfig {
        seed: 11,
        start,
        days: 20,
        nodes: 48,
    });
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Two thirds of the inventory first; the rest arrives after the signals naming it.
    let (early, late) = fleet.nodes.split_at(fleet.nodes.len() * 2 / 3);
    put_nodes(&app, early).await;

    // The signals shuffled, in batches of random size, four batches at a time.
    let mut events = fleet.events.clone();
    for i in (1..events.len()).rev() {
        events.swap(i, rng.below(i + 1));
    }
    let mut batches: Vec<Vec<Value>> = Vec::new();
    let mut rest = events.as_slice();
    while !rest.is_empty() {
        let n = (1 + rng.below(rest.len().min(120))).min(rest.len());
        batches.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    for wave in batches.chunks(4) {
        let bodies: Vec<Value> = wave.iter().map(|b| json!({ "events": b })).collect();
        let posts = bodies.iter().map(|b| app.post_events(ADMIN_TOKEN, b)).collect();
        for (status, body) in join_all(posts).await {
            assert_eq!(status, 200, "{body}");
        }
    }
    assert_rollups_recount(&app, "random ingest").await;
    // Whole days and months (and, for the second, the whole second quarter) with ragged ends.
    let kept = [
        (start - Duration::days(1), start + Duration::days(30)),
        (
            start - Duration::days(60) + Duration::hours(3),
            start + Duration::days(120),
        ),
    ];
    let compared = assert_mtbf_recount(&app, &kept, "random ingest").await;
    assert!(compared > 0, "no failures to compare");
    assert_timeline_recount(&app, &kept, "random ingest").await;

    put_nodes(&app, late).await;
    assert_rollups_recount(&app, "late inventory").await;
    assert_mtbf_recount(&app, &kept, "late inventory").await;
    assert_timeline_recount(&app, &kept, "late inventory").await;
    // Regroup, unlabel and re-model some nodes: their failures move between rows.
    let changed: Vec<Value> = fleet
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 == 0)
        .map(|(i, n)| {
            let mut n = n.clone();
            match i % 9 {
                0 => n["group"] = json!("regrouped"),
                3 => {
                    n.as_object_mut().unwrap().remove("group");
                }
                _ => n["gpu_model"] = json!("NVIDIA A100-SXM4-80GB"),
            }
            n
        })
        .collect();
    put_nodes(&app, &changed).await;
    assert_rollups_recount(&app, "inventory changes").await;
    assert_mtbf_recount(&app, &kept, "inventory changes").await;
    assert_timeline_recount(&app, &kept, "inventory changes").await;

    // Post-mortems on a few failures, one of them twice.
    let ids: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM failures ORDER BY id LIMIT 4")
        .fetch_all(&app.db)
        .await
        .unwrap();
    let causes = [
        json!({"root_cause": {"category": "hardware", "component": "nvlink"}}),
        json!({"root_cause": {"category": "platform", "component": "driver"}}),
        json!({"root_cause": {"category": "hardware", "component": "nvlink"}, "resolution": "drained"}),
        json!({"root_cause": null}),
    ];
    for (i, body) in causes.iter().enumerate() {
        let id = ids[[0, 1, 0, 2][i] % ids.len()];
        let res = app
            .client
            .patch(app.url(&format!("/v1/failures/{id}")))
            .bearer_auth(ADMIN_TOKEN)
            .json(body)
            .send()
            .await
            .unwrap();
        let (status, v) = crate::helpers::status_json(res).await;
        assert_eq!(status, 200, "{v}");
    }
    assert_rollups_recount(&app, "post-mortems").await;
    assert_mtbf_recount(&app, &kept, "post-mortems").await;
    assert_timeline_recount(&app, &kept, "post-mortems").await;

    // Late duplicates of some signals under new ids, an hour later: more re-folds over the rollups.
    let late_signals: Vec<Value> = fleet
        .events
        .iter()
        .step_by(7)
        .map(|e| {
            let mut e = e.clone();
            e["id"] = json!(uuid::Uuid::new_v4().to_string());
            let at: DateTime<Utc> = e["occurred_at"].as_str().unwrap().parse().unwrap();
            e["occurred_at"] = json!((at + Duration::minutes(61)).to_rfc3339());
            e
        })
        .collect();
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({ "events": late_signals })).await;
    assert_eq!(status, 200, "{body}");
    assert_rollups_recount(&app, "late signals").await;
    assert_mtbf_recount(&app, &kept, "late signals").await;
    assert_timeline_recount(&app, &kept, "late signals").await;

    let rule = json!({"kind": "xid", "code": 79, "priority": 200, "category": "platform", "component": "driver", "severity": "high",
                      "transient": true, "secondary": false, "action": "reset_gpu", "description": "site override", "source": "test"});
    let res = app
        .client
        .put(app.url("/v1/classification-rules/xid-79"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&rule)
        .send()
        .await
        .unwrap();
    let (status, change) = crate::helpers::catalog_edit(&app.address, res).await;
    assert_eq!(
        (status, change["rebuild"]["state"].as_str()),
        (202, Some("done")),
        "{change}"
    );
    assert_rollups_recount(&app, "a catalog edit").await;
    assert_mtbf_recount(&app, &kept, "a catalog edit").await;
    assert_timeline_recount(&app, &kept, "a catalog edit").await;

    // Ragged windows read rollups for the whole days and months and failures for the ends.
    for (from, to) in [
        (
            start + Duration::hours(7),
            start + Duration::days(19) + Duration::hours(5),
        ),
        (
            start + Duration::days(12),
            start + Duration::days(12) + Duration::hours(9),
        ),
        (start - Duration::days(3), start + Duration::days(40)),
        // The whole second quarter (all the signals) with months and days on both sides.
        (
            start - Duration::days(60) + Duration::hours(3),
            start + Duration::days(120),
        ),
    ] {
        let want: i64 = sqlx::query_scalar("SELECT count(*) FROM failures WHERE first_at >= $1 AND first_at < $2")
            .bind(from)
            .bind(to)
            .fetch_one(&app.db)
            .await
            .unwrap();
        let window = format!("from={}&to={}", iso(from), iso(to));
        let (status, v) = app
            .get(ADMIN_TOKEN, &format!("/v1/analytics/root-causes?{window}"))
            .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["failures"].as_i64(), Some(want), "root-causes {window}");
        let (_, v) = app
            .get(ADMIN_TOKEN, &format!("/v1/analytics/failure-mix?by=cluster&{window}"))
            .await;
        assert_eq!(v["totals"]["failures"].as_i64(), Some(want), "failure-mix {window}");
        let (_, v) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/mtbf?{window}")).await;
        let unattributed = v["unattributed_failures"].as_i64().unwrap();
        // Each failure is in a group of the fleet, unattributed, or on a node out of service then.
        let fleet = v["fleet"]["failures"].as_i64().unwrap();
        assert!(
            fleet + unattributed <= want,
            "mtbf {window}: {fleet} + {unattributed} of {want}"
        );
        // Each group's failures equal the pure MTBF over a per-node recount from the failures.
        assert_mtbf_recount(&app, &[(from, to)], "the ragged windows").await;
        assert_top_errors_recount(&app, from, to).await;
    }
}

/// A stored burst that an earlier repeat extends moves its failure to the day before, inside the
/// same month: the month's rollup row keeps its counts (one failure of one stored signal), and the
/// timeline, which keeps a month of day counts in memory, must still see the move.
#[tokio::test]
async fn the_timeline_follows_a_failure_moved_to_another_day_of_the_same_month() {
    the_timeline_follows_a_failure_moved_to_another_day_of_the_same_month_on(Backend::Postgres).await;
}

#[tokio::test]
async fn the_timeline_follows_a_failure_moved_to_another_day_of_the_same_month_on_citus() {
    the_timeline_follows_a_failure_moved_to_another_day_of_the_same_month_on(Backend::Citus).await;
}

async fn the_timeline_follows_a_failure_moved_to_another_day_of_the_same_month_on(backend: Backend) {
    let app = spawn_app_on_backend(backend).await;
    let window = "from=2026-05-01T00:00:00Z&to=2026-06-01T00:00:00Z";
    let days = |v: &Value| -> Vec<(String, i64)> {
        v["points"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["total"].as_i64() != Some(0))
            .map(|p| (p["period"].as_str().unwrap().to_string(), p["total"].as_i64().unwrap()))
            .collect()
    };
    let first = event(&uuid_n(1), json!({"occurred_at": "2026-05-11T00:00:30Z"}));
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({ "events": [first] })).await;
    assert_eq!(status, 200, "{body}");
    let (status, v) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/timeline?{window}")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(days(&v), [("2026-05-11".to_string(), 1)]);

    // The same Xid on the same GPU 40 s earlier: the burst's start moves to May 10.
    let earlier = event(&uuid_n(2), json!({"occurred_at": "2026-05-10T23:59:50Z"}));
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({ "events": [earlier] })).await;
    assert_eq!(status, 200, "{body}");
    let month: (i64, i64) =
        sqlx::query_as("SELECT failures, signals FROM rollup_causes WHERE period = 'month' AND bucket = '2026-05-01'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(month, (1, 1), "the month row is as it was");
    let (_, v) = app.get(ADMIN_TOKEN, &format!("/v1/analytics/timeline?{window}")).await;
    assert_eq!(days(&v), [("2026-05-10".to_string(), 1)]);
}
