//! Access for more than one team: cluster-scoped tokens on every read route, expiring tokens, the
//! per-token rate limit and the audit log of admin actions.

use faultline::app::configuration::Limits;
use faultline::app::edge::EdgeSettings;
use faultline::http::rate_limit::RateLimitSettings;
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, Backend, TestApp, event, spawn_app_on, spawn_app_on_backend, status_json, uuid_n};

/// Our cluster and the other team's. Names that occur nowhere else, so a body that mentions
/// `bravo` has leaked the other cluster.
const OWN: &str = "alpha";
const OTHER: &str = "bravo";

/// Two clusters with inventory, jobs, a drain and failures each; returns a failure id of each.
async fn two_clusters(app: &TestApp) -> (String, String) {
    let mut nodes = Vec::new();
    for (cluster, prefix) in [(OWN, "a"), (OTHER, "b")] {
        for i in 0..4 {
            nodes.push(
                json!({"hostname": format!("{prefix}{i}"), "cluster": cluster, "gpu_model": "H100",
                "gpu_count": 8, "group": format!("{prefix}-g"), "rack": format!("{prefix}-r"),
                "in_service_since": "2026-10-01T00:00:00Z"}),
            );
        }
    }
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await;
    assert_eq!(status, 200, "{body}");
    let jobs = json!({"jobs": [
        {"id": "ja", "cluster": OWN, "gpus": 16, "nodes": ["a0", "a1"], "start": "2026-11-02T08:00:00Z", "end": "2026-11-02T12:00:00Z", "state": "failed"},
        {"id": "jb", "cluster": OTHER, "gpus": 16, "nodes": ["b0", "b1"], "start": "2026-11-03T08:00:00Z", "end": "2026-11-03T12:00:00Z", "state": "failed"},
    ]});
    let res = app
        .client
        .put(app.url("/v1/jobs"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&jobs)
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(res).await;
    assert_eq!(status, 200, "{body}");
    let events = json!({"events": [
        event(&uuid_n(1), json!({"cluster": OWN, "node": "a0", "job_id": "ja", "occurred_at": "2026-11-02T10:00:00Z"})),
        event(&uuid_n(2), json!({"cluster": OWN, "node": "a1", "kind": "ecc", "code": null, "message": "uncorrectable ECC error", "occurred_at": "2026-11-05T10:00:00Z"})),
        event(&uuid_n(3), json!({"cluster": OTHER, "node": "b0", "job_id": "jb", "occurred_at": "2026-11-03T10:00:00Z"})),
        event(&uuid_n(4), json!({"cluster": OTHER, "node": "b0", "occurred_at": "2026-11-06T10:00:00Z"})),
        event(&uuid_n(5), json!({"cluster": OTHER, "node": "b2", "occurred_at": "2026-11-07T10:00:00Z"})),
    ]});
    let (status, body) = app.post_events(ADMIN_TOKEN, &events).await;
    assert_eq!(status, 200, "{body}");
    for (cluster, host) in [(OWN, "a0"), (OTHER, "b0")] {
        let res = app
            .client
            .post(app.url(&format!("/v1/nodes/{cluster}/{host}/state")))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"state": "drained", "at": "2026-11-08T00:00:00Z", "reason": "xid 79"}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
    }
    // A GPU part in each cluster.
    let gpus = |cluster: &str, host: &str, serial: &str| {
        json!({"cluster": cluster, "hostname": host, "observed_at": "2026-10-01T00:00:00Z",
               "gpus": [{"index": 0, "serial": serial, "model": "NVIDIA H100 80GB HBM3"}]})
    };
    let res = app
        .client
        .put(app.url("/v1/gpus/inventory"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"nodes": [gpus(OWN, "a0", "SA0"), gpus(OTHER, "b0", "SB0")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let failure_of = |cluster: &'static str| async move {
        let (status, page) = app
            .get(
                ADMIN_TOKEN,
                &format!("/v1/failures?cluster={cluster}&from=2026-10-01T00:00:00Z&to=2026-11-30T00:00:00Z"),
            )
            .await;
        assert_eq!(status, 200);
        page["failures"][0]["id"].as_str().unwrap().to_string()
    };
    (failure_of(OWN).await, failure_of(OTHER).await)
}

/// A GET answer: status, content type, body text.
async fn fetch(app: &TestApp, token: &str, path_and_query: &str, accept: &str) -> (u16, String, String) {
    let res = app
        .client
        .get(app.url(path_and_query))
        .bearer_auth(token)
        .header("accept", accept)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let ct = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, ct, res.text().await.unwrap())
}

fn query_string(pairs: &[(String, String)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    let q = s.finish();
    if q.is_empty() { q } else { format!("?{q}") }
}

/// Every authenticated GET route of the served OpenAPI document, for a reader token scoped to
/// `alpha`: naming `bravo` (in any `*cluster` parameter or the path) is 403 with a JSON error, a
/// failure of `bravo` is 404, and naming no cluster answers exactly what an unscoped admin gets
/// for `cluster=alpha` (JSON and CSV), with no trace of `bravo`. Admin-only routes refuse it.
#[tokio::test]
async fn a_scoped_reader_sees_only_its_cluster_on_every_read_route() {
    a_scoped_reader_sees_only_its_cluster_on_every_read_route_on(Backend::Postgres).await;
}

#[tokio::test]
async fn a_scoped_reader_sees_only_its_cluster_on_every_read_route_on_citus() {
    a_scoped_reader_sees_only_its_cluster_on_every_read_route_on(Backend::Citus).await;
}

async fn a_scoped_reader_sees_only_its_cluster_on_every_read_route_on(backend: Backend) {
    let app = spawn_app_on_backend(backend).await;
    let (own_failure, other_failure) = two_clusters(&app).await;
    let scoped = app.token("reader", Some(OWN)).await;
    // An alert in each cluster (each node silent), for the alert reads: one evaluation, as the
    // alerting task runs it, a minute after the signals arrived.
    let res = app
        .client
        .put(app.url("/v1/alert-rules/silent"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"condition": {"kind": "silence", "minutes": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let later = chrono::Utc::now() + chrono::Duration::minutes(2);
    faultline::alerting::evaluation::evaluate(&app.db, "http://faultline.example", chrono::Duration::minutes(4), later)
        .await
        .unwrap();
    let alert_of = |cluster: &str| {
        faultline::domain::alert::fingerprint("silent", cluster, if cluster == OWN { "a0" } else { "b0" })
    };
    let (_, doc) = app.get(ADMIN_TOKEN, "/openapi.json").await;
    let admin_only = [
        "/v1/tokens",
        "/v1/audit",
        "/v1/catalog/rebuilds/{version}",
        "/v1/alert-rules",
        "/v1/alert-rules/{rule_id}",
    ];
    let mut checked = Vec::new();
    let mut leak_visible_to_admin = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(op) = item.get("get") else { continue };
        if op["security"]
            .as_array()
            .is_none_or(|s| s.iter().all(|r| r.as_object().unwrap().is_empty()))
        {
            continue; // open routes (health, metrics) carry no cluster data
        }
        if admin_only.contains(&path.as_str()) {
            let (status, body) = app.get(&scoped, &path.replace("{version}", "1")).await;
            assert_eq!((status, body["error"].as_str()), (403, Some("forbidden")), "{path}");
            checked.push(path.clone());
            continue;
        }
        let params: Vec<(String, String, bool)> = op["parameters"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .map(|p| {
                        (
                            p["name"].as_str().unwrap().to_string(),
                            p["in"].as_str().unwrap().to_string(),
                            p["required"].as_bool().unwrap_or(false),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let fill_path = |cluster: &str, failure: &str| {
            path.replace("{cluster}", cluster)
                .replace("{hostname}", if cluster == OWN { "a0" } else { "b0" })
                .replace("{id}", failure)
                .replace("{part}", if cluster == OWN { "SA0" } else { "SB0" })
                .replace("{job_id}", if cluster == OWN { "ja" } else { "jb" })
                .replace("{source}", "slurm-jobs")
                .replace("{fingerprint}", &alert_of(cluster))
        };
        // A fixed window (the default one ends now, which moves between two requests).
        let mut query: Vec<(String, String)> = Vec::new();
        for (name, place, required) in &params {
            match (name.as_str(), place.as_str()) {
                ("from" | "b_from", "query") => query.push((name.clone(), "2026-10-01T00:00:00Z".into())),
                ("to" | "b_to", "query") => query.push((name.clone(), "2026-11-30T00:00:00Z".into())),
                ("gpus", "query") => query.push((name.clone(), "16".into())),
                ("as_of", "query") => query.push((name.clone(), "2026-11-30T00:00:00Z".into())),
                (_, "query") if *required => panic!("{path}: fill the required parameter {name} in this test"),
                _ => {}
            }
        }
        let cluster_params: Vec<&String> = params
            .iter()
            .filter(|(n, place, _)| place == "query" && n.ends_with("cluster"))
            .map(|(n, _, _)| n)
            .collect();
        // Naming the other cluster, in each parameter that names one: 403.
        for name in &cluster_params {
            let mut q = query.clone();
            q.push(((*name).clone(), OTHER.into()));
            let url = format!("{}{}", fill_path(OWN, &own_failure), query_string(&q));
            let (status, body) = app.get(&scoped, &url).await;
            assert_eq!(status, 403, "{url}: {body}");
            assert_eq!(body["error"], "forbidden", "{url}");
            assert!(
                body["message"].as_str().unwrap().contains("scoped to cluster 'alpha'"),
                "{url}: {body}"
            );
        }
        if path.contains("{cluster}") {
            let url = format!("{}{}", fill_path(OTHER, &own_failure), query_string(&query));
            let (status, body) = app.get(&scoped, &url).await;
            assert_eq!(
                (status, body["error"].as_str()),
                (403, Some("forbidden")),
                "{url}: {body}"
            );
        }
        if path.contains("{fingerprint}") {
            let url = format!("{}{}", fill_path(OTHER, &own_failure), query_string(&query));
            let (status, body) = app.get(&scoped, &url).await;
            assert_eq!(
                (status, body["error"].as_str()),
                (404, Some("not_found")),
                "{url}: {body}"
            );
            let (status, _) = app.get(ADMIN_TOKEN, &url).await;
            assert_eq!(status, 200, "{url} exists for the admin");
        }
        if path.contains("{id}") {
            let url = format!("{}{}", fill_path(OWN, &other_failure), query_string(&query));
            let (status, body) = app.get(&scoped, &url).await;
            assert_eq!(
                (status, body["error"].as_str()),
                (404, Some("not_found")),
                "{url}: {body}"
            );
            let (status, _) = app.get(ADMIN_TOKEN, &url).await;
            assert_eq!(status, 200, "{url} exists for the admin");
        }
        // Naming none: exactly the admin's answer for our cluster, in every representation.
        let mut as_admin = query.clone();
        if !cluster_params.is_empty() {
            as_admin.push(("cluster".into(), OWN.into()));
        }
        let offers_csv = op["responses"]["200"]["content"].get("text/csv").is_some();
        let accepts: &[&str] = if offers_csv {
            &["application/json", "text/csv"]
        } else {
            &["application/json"]
        };
        for accept in accepts {
            let url = format!("{}{}", fill_path(OWN, &own_failure), query_string(&query));
            let (status, ct, scoped_body) = fetch(&app, &scoped, &url, accept).await;
            assert_eq!(status, 200, "{url} ({accept}): {scoped_body}");
            assert!(
                !scoped_body.contains(OTHER),
                "{url} ({accept}) leaks {OTHER}: {scoped_body}"
            );
            let admin_url = format!("{}{}", fill_path(OWN, &own_failure), query_string(&as_admin));
            let (_, admin_ct, admin_body) = fetch(&app, ADMIN_TOKEN, &admin_url, accept).await;
            assert_eq!(ct, admin_ct, "{url}");
            assert_eq!(
                scoped_body, admin_body,
                "{url} ({accept}): scoped answer differs from the admin's for {OWN}"
            );
            // The data would show the other cluster to an unscoped caller (so the check above can fail).
            let (_, _, fleet_body) = fetch(&app, ADMIN_TOKEN, &url, accept).await;
            if fleet_body.contains(OTHER) {
                leak_visible_to_admin += 1;
            }
        }
        checked.push(path.clone());
    }
    for must in [
        "/v1/failures",
        "/v1/failures/{id}",
        "/v1/failures/{id}/history",
        "/v1/nodes",
        "/v1/nodes/{cluster}/{hostname}/state",
        "/v1/reports/reliability",
        "/v1/analytics/compare",
        "/v1/analytics/mtbf",
        "/v1/analytics/lemon-nodes",
        "/v1/analytics/survival",
        "/v1/gpus",
        "/v1/gpus/{part}",
        "/v1/nodes/{cluster}/{hostname}/gpus",
        "/v1/tokens",
        "/v1/audit",
        "/v1/alerts",
        "/v1/alerts/{fingerprint}/deliveries",
        "/v1/alert-rules",
    ] {
        assert!(checked.iter().any(|p| p == must), "{must} was not checked: {checked:?}");
    }
    assert!(checked.len() >= 24, "{checked:?}");
    // Lists, the report and the per-node analyses name clusters when unscoped.
    assert!(leak_visible_to_admin >= 5, "{leak_visible_to_admin}");
}

/// The report the dashboard shows and a scoped agent reading inventory follow the same scope.
#[tokio::test]
async fn a_scoped_agent_reads_only_its_cluster_inventory() {
    a_scoped_agent_reads_only_its_cluster_inventory_on(Backend::Postgres).await;
}

#[tokio::test]
async fn a_scoped_agent_reads_only_its_cluster_inventory_on_citus() {
    a_scoped_agent_reads_only_its_cluster_inventory_on(Backend::Citus).await;
}

async fn a_scoped_agent_reads_only_its_cluster_inventory_on(backend: Backend) {
    let app = spawn_app_on_backend(backend).await;
    two_clusters(&app).await;
    let agent = app.token("agent", Some(OTHER)).await;
    let (status, page) = app.get(&agent, "/v1/nodes").await;
    assert_eq!(status, 200);
    let hosts: Vec<&str> = page["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["hostname"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["b0", "b1", "b2", "b3"]);
    let (status, body) = app.get(&agent, "/v1/nodes?cluster=alpha").await;
    assert_eq!((status, body["error"].as_str()), (403, Some("forbidden")));
    // An admin token cannot be scoped.
    let res = app
        .client
        .post(app.url("/v1/tokens"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "x", "role": "admin", "cluster": OWN}))
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(res).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("cannot be scoped"));
}

async fn create_token(app: &TestApp, token: &str, body: Value) -> (u16, Value) {
    let res = app
        .client
        .post(app.url("/v1/tokens"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    status_json(res).await
}

/// A token with `ttl_seconds` works until then, then answers 401 `token_expired` and is listed
/// with its expiry; expiries in the past, too far away or given twice are refused.
#[tokio::test]
async fn tokens_expire() {
    tokens_expire_on(Backend::Postgres).await;
}

#[tokio::test]
async fn tokens_expire_on_citus() {
    tokens_expire_on(Backend::Citus).await;
}

async fn tokens_expire_on(backend: Backend) {
    let app = spawn_app_on_backend(backend).await;
    let (status, created) = create_token(
        &app,
        ADMIN_TOKEN,
        json!({"name": "short", "role": "reader", "ttl_seconds": 1}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let token = created["token"].as_str().unwrap().to_string();
    let created_at: chrono::DateTime<chrono::Utc> = created["created_at"].as_str().unwrap().parse().unwrap();
    let expires_at: chrono::DateTime<chrono::Utc> = created["expires_at"].as_str().unwrap().parse().unwrap();
    let lifetime = (expires_at - created_at).num_milliseconds();
    assert!((900..=1100).contains(&lifetime), "{lifetime} ms");
    assert_eq!(created["expired"], false);
    let (status, _) = app.get(&token, "/v1/failures").await;
    assert_eq!(status, 200);

    let (status, long) = create_token(
        &app,
        ADMIN_TOKEN,
        json!({"name": "dated", "role": "agent", "expires_at": "2035-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(long["expires_at"], "2035-01-01T00:00:00Z");

    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let (status, body) = app.get(&token, "/v1/failures").await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"], "token_expired");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("token 'short' expired at 20"), "{message}");

    let (status, list) = app.get(ADMIN_TOKEN, "/v1/tokens").await;
    assert_eq!(status, 200);
    let list = list.as_array().unwrap();
    let short = list.iter().find(|t| t["name"] == "short").unwrap();
    assert_eq!(
        (short["expired"].as_bool(), short["expires_at"].as_str().is_some()),
        (Some(true), true)
    );
    let dated = list.iter().find(|t| t["name"] == "dated").unwrap();
    assert_eq!(
        (dated["expired"].as_bool(), dated["expires_at"].as_str()),
        (Some(false), Some("2035-01-01T00:00:00Z"))
    );

    for (bad, says) in [
        (
            json!({"name": "p", "role": "reader", "expires_at": "2020-01-01T00:00:00Z"}),
            "not in the future",
        ),
        (
            json!({"name": "p", "role": "reader", "expires_at": "2099-01-01T00:00:00Z"}),
            "ten years",
        ),
        (
            json!({"name": "p", "role": "reader", "ttl_seconds": 0}),
            "ttl_seconds 0",
        ),
        (
            json!({"name": "p", "role": "reader", "ttl_seconds": 60, "expires_at": "2030-01-01T00:00:00Z"}),
            "not both",
        ),
    ] {
        let (status, body) = create_token(&app, ADMIN_TOKEN, bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["message"].as_str().unwrap().contains(says), "{bad}: {body}");
    }
}

/// With 1 request/s and bursts of 3, a token's fourth request at once is 429 with
/// `Retry-After: 1` and a JSON error; other tokens keep their own budget; a second later it
/// works again; rejections are counted by role.
#[tokio::test]
async fn the_rate_limit_is_per_token() {
    let server_url = crate::helpers::test_server_url().await.unwrap();
    let edge = EdgeSettings {
        rate_limit: RateLimitSettings {
            rate_limit_per_token_rps: 1.0,
            rate_limit_per_token_burst: 3,
        },
        ..EdgeSettings::default()
    };
    let app = spawn_app_on(&server_url, Limits::default(), edge).await;
    let reader = app.token("reader", None).await;
    let other = app.token("reader", None).await;
    for _ in 0..3 {
        assert_eq!(app.get(&reader, "/v1/nodes").await.0, 200);
    }
    let res = app
        .client
        .get(app.url("/v1/nodes"))
        .bearer_auth(&reader)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "1");
    let (_, body) = status_json(res).await;
    assert_eq!(body["error"], "rate_limited");
    assert!(
        body["message"].as_str().unwrap().contains("1 requests/s, bursts of 3"),
        "{body}"
    );
    assert_eq!(app.get(&other, "/v1/nodes").await.0, 200);
    // Writes count against the same budget.
    let (status, _) = app.put_nodes(&reader, &json!({"nodes": []})).await;
    assert_eq!(status, 429);

    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(app.get(&reader, "/v1/nodes").await.0, 200);
    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("faultline_rate_limited_total{role=\"reader\"}"))
        .unwrap_or_else(|| panic!("no rate-limit counter in {metrics}"));
    let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 2.0, "{line}");
    assert!(metrics.contains("# HELP faultline_rate_limited_total"));
}

/// Every audited action leaves one row with its actor and details, newest first; failed actions
/// leave none; filters and pages work; only admins read it.
#[tokio::test]
async fn admin_actions_are_audited() {
    admin_actions_are_audited_on(Backend::Postgres).await;
}

#[tokio::test]
async fn admin_actions_are_audited_on_citus() {
    admin_actions_are_audited_on(Backend::Citus).await;
}

async fn admin_actions_are_audited_on(backend: Backend) {
    let app = spawn_app_on_backend(backend).await;
    let (status, ops) = create_token(&app, ADMIN_TOKEN, json!({"name": "ops-admin", "role": "admin"})).await;
    assert_eq!(status, 201);
    let ops_token = ops["token"].as_str().unwrap().to_string();
    let ops_id = ops["id"].as_str().unwrap().to_string();
    let (status, reader) = create_token(
        &app,
        &ops_token,
        json!({"name": "team-a", "role": "reader", "cluster": "c1", "ttl_seconds": 3600}),
    )
    .await;
    assert_eq!(status, 201);
    let reader_id = reader["id"].as_str().unwrap().to_string();
    let res = app
        .client
        .delete(app.url(&format!("/v1/tokens/{reader_id}")))
        .bearer_auth(&ops_token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);

    let rule = json!({"kind": "xid", "code": 999, "pattern": null, "priority": 500, "category": "hardware",
        "component": "gpu_memory", "severity": "high", "transient": false, "secondary": false,
        "action": "reset_gpu", "description": "site rule", "source": "site"});
    let put = |path: &'static str, body: Value| {
        let req = app.client.put(app.url(path)).bearer_auth(&ops_token).json(&body);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(put("/v1/classification-rules/site-xid-999", rule).await, 202);
    let del = |path: &'static str| {
        let req = app.client.delete(app.url(path)).bearer_auth(ADMIN_TOKEN);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(del("/v1/classification-rules/site-xid-999").await, 202);
    // A failed action is not audited.
    assert_eq!(del("/v1/classification-rules/no-such-rule").await, 404);
    let term = json!({"kind": "component", "component": "storage", "weight": 4, "source": "site"});
    assert_eq!(put("/v1/classification-terms/vastdata", term).await, 202);
    assert_eq!(del("/v1/classification-terms/vastdata").await, 202);

    let (status, _) = app
        .post_events(ADMIN_TOKEN, &json!({"events": [event(&uuid_n(1), json!({}))]}))
        .await;
    assert_eq!(status, 200);
    let (_, page) = app
        .get(
            ADMIN_TOKEN,
            "/v1/failures?from=2026-10-01T00:00:00Z&to=2026-11-30T00:00:00Z",
        )
        .await;
    let failure_id = page["failures"][0]["id"].as_str().unwrap().to_string();
    let res = app
        .client
        .patch(app.url(&format!("/v1/failures/{failure_id}")))
        .bearer_auth(&ops_token)
        .json(&json!({"note": "PSU swapped", "root_cause": {"category": "hardware", "component": "power"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());

    let (status, audit) = app.get(ADMIN_TOKEN, "/v1/audit").await;
    assert_eq!(status, 200, "{audit}");
    let entries = audit["entries"].as_array().unwrap();
    let actions: Vec<&str> = entries.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        [
            "failure.lifecycle",
            "term.delete",
            "term.upsert",
            "rule.delete",
            "rule.upsert",
            "token.revoke",
            "token.create",
            "token.create"
        ]
    );
    let by: Vec<&str> = entries.iter().map(|e| e["actor_name"].as_str().unwrap()).collect();
    assert_eq!(
        by,
        [
            "ops-admin",
            "admin",
            "ops-admin",
            "admin",
            "ops-admin",
            "ops-admin",
            "ops-admin",
            "admin"
        ]
    );
    assert_eq!(entries[0]["actor_token_id"], ops_id.as_str());
    assert_eq!(entries[7]["actor_token_id"], Value::Null);
    assert_eq!(entries[0]["target"], failure_id.as_str());
    assert_eq!(
        entries[0]["details"]["changes"]["note"],
        json!({"from": null, "to": "PSU swapped"})
    );
    assert_eq!(entries[0]["details"]["cluster"], "c1");
    assert_eq!(entries[4]["target"], "site-xid-999");
    assert_eq!(entries[4]["details"]["rule"]["code"], 999);
    assert_eq!(
        entries[4]["details"]["catalog_version"].as_i64().unwrap() + 1,
        entries[3]["details"]["catalog_version"].as_i64().unwrap()
    );
    assert_eq!(entries[2]["target"], "vastdata");
    assert_eq!(entries[2]["details"]["term"]["component"], "storage");
    assert_eq!(entries[5]["target"], reader_id.as_str());
    assert_eq!(entries[5]["details"]["name"], "team-a");
    assert_eq!(entries[6]["details"]["cluster"], "c1");
    assert_eq!(entries[6]["details"]["role"], "reader");
    assert!(entries[6]["details"]["expires_at"].is_string());
    assert_eq!(entries[7]["details"]["name"], "ops-admin");
    assert!(
        !audit.to_string().contains(ops_token.as_str()),
        "a secret reached the audit log"
    );
    assert_eq!(audit["next_cursor"], Value::Null);

    // Filters: action, actor by name or id, time window; pages of 3 with a cursor.
    let (_, only) = app.get(ADMIN_TOKEN, "/v1/audit?action=token.create").await;
    assert_eq!(only["entries"].as_array().unwrap().len(), 2);
    let (_, mine) = app.get(ADMIN_TOKEN, "/v1/audit?actor=admin").await;
    assert_eq!(mine["entries"].as_array().unwrap().len(), 3);
    let (_, by_id) = app.get(ADMIN_TOKEN, &format!("/v1/audit?actor={ops_id}")).await;
    assert_eq!(by_id["entries"].as_array().unwrap().len(), 5);
    let (_, future) = app.get(ADMIN_TOKEN, "/v1/audit?from=2099-01-01T00:00:00Z").await;
    assert_eq!(future["entries"], json!([]));
    let mut seen = Vec::new();
    let mut url = "/v1/audit?limit=3".to_string();
    loop {
        let (status, page) = app.get(ADMIN_TOKEN, &url).await;
        assert_eq!(status, 200);
        seen.extend(
            page["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].as_i64().unwrap()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => url = format!("/v1/audit?limit=3&cursor={c}"),
            None => break,
        }
    }
    let all: Vec<i64> = entries.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert_eq!(seen, all);

    for bad in [
        "/v1/audit?limit=0",
        "/v1/audit?limit=1001",
        "/v1/audit?action=token.delete",
        "/v1/audit?cursor=zz",
    ] {
        let (status, body) = app.get(ADMIN_TOKEN, bad).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("invalid_query")),
            "{bad}: {body}"
        );
    }
    for role in ["reader", "agent"] {
        let token = app.token(role, None).await;
        let (status, body) = app.get(&token, "/v1/audit").await;
        assert_eq!((status, body["error"].as_str()), (403, Some("forbidden")), "{role}");
    }
    let (status, _) = app.get("flt_nope", "/v1/audit").await;
    assert_eq!(status, 401);
}
