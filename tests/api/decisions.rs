//! compare, job-plan and lemon-nodes over HTTP, on a small fleet ingested through the API, with the
//! expected values computed by hand in the comments (the binomial and Poisson sums are the same as in
//! the unit tests of analytics::decisions, where each is worked out).

use serde_json::{Value, json};

use crate::cost::csv;
use crate::helpers::{ADMIN_TOKEN, TestApp, event, spawn_app, status_json, uuid_n};

/// Window A: 10 days, B: the next 10, C: the 10 after (no failures).
const A: (&str, &str) = ("2026-10-01T00:00:00Z", "2026-10-11T00:00:00Z");
const B: (&str, &str) = ("2026-10-11T00:00:00Z", "2026-10-21T00:00:00Z");
const C: (&str, &str) = ("2026-10-21T00:00:00Z", "2026-10-31T00:00:00Z");

fn close(v: &Value, want: f64, tol: f64) {
    let got = v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
    assert!(
        (got - want).abs() <= tol * want.abs().max(1e-12),
        "got {got}, want {want}"
    );
}

/// c1: 10 H100 nodes of 8 GPUs (n00..n09), c2: 10 more; all in service since 2026-09-01.
/// Each node has 8 x 240 h = 1,920 GPU-hours (80 GPU-days) in a 10-day window: 800 GPU-days a cluster.
///
/// A (c1): n00: 4 uncorrectable ECC (hardware/gpu_memory) + 2 Xid 79 (hardware/gpu); n01: 1 GPU OOM
/// (automatic user/oom, post-mortem hardware/network, recovery 10 + 5 = 15 min); n02..n04: 1 GPU OOM
/// each (user). 10 failures: hardware 7, user 3. n00 drained after its failures.
/// B (c1): Xid 79 on n05 and n06: 2 hardware. C: nothing.
async fn fleet(app: &TestApp) {
    let mut nodes = Vec::new();
    for cluster in ["c1", "c2"] {
        for i in 0..10 {
            nodes.push(
                json!({"hostname": format!("n{i:02}"), "cluster": cluster, "gpu_model": "NVIDIA H100 80GB HBM3",
                              "gpu_count": 8, "in_service_since": "2026-09-01T00:00:00Z"}),
            );
        }
    }
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await;
    assert_eq!(status, 200, "{body}");
    let at = |day: u32, hour: u32| format!("2026-10-{day:02}T{hour:02}:00:00Z");
    let mut events = Vec::new();
    let mut id = 0;
    let mut push = |node: &str, kind: &str, code: Value, when: String| {
        id += 1;
        events.push(event(
            &uuid_n(id),
            json!({"node": node, "kind": kind, "code": code, "occurred_at": when, "message": "x"}),
        ));
    };
    for h in 0..4 {
        push("n00", "ecc", json!(2), at(2, 3 * h));
    }
    push("n00", "xid", json!(79), at(3, 0));
    push("n00", "xid", json!(79), at(3, 6));
    push("n00", "node_drain", Value::Null, at(3, 12));
    push("n01", "gpu_oom", Value::Null, at(4, 0));
    for (i, n) in ["n02", "n03", "n04"].iter().enumerate() {
        push(n, "gpu_oom", Value::Null, at(5 + i as u32, 0));
    }
    push("n05", "xid", json!(79), at(12, 0));
    push("n06", "xid", json!(79), at(13, 0));
    let (status, body) = app.post_events(ADMIN_TOKEN, &json!({"events": events})).await;
    assert_eq!(status, 200, "{body}");
    // The post-mortem of n01's failure.
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/failures?limit=100").await;
    let n01 = list["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["first_at"] == "2026-10-04T00:00:00Z")
        .expect("n01's failure")["id"]
        .as_str()
        .unwrap()
        .to_string();
    let res = app
        .client
        .patch(app.url(&format!("/v1/failures/{n01}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"root_cause": {"category": "hardware", "component": "network"},
                      "recovery_minutes": {"detection": 10, "resubmission": 5}}))
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(res).await;
    assert_eq!(status, 200, "{body}");
}

/// A fresh app with the fleet and a reader token.
async fn fleet_app() -> (TestApp, String) {
    let app = spawn_app().await;
    fleet(&app).await;
    let reader = app.token("reader", None).await;
    (app, reader)
}

fn windows(a: (&str, &str), b: (&str, &str)) -> String {
    format!("a_from={}&a_to={}&b_from={}&b_to={}", a.0, a.1, b.0, b.1)
}

fn by_key<'a>(rows: &'a Value, key: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no {key} in {rows}"))
}

#[tokio::test]
async fn compare_windows_and_deployments() {
    let (app, reader) = fleet_app().await;

    // A vs B on c1: 10 vs 2 failures over 800 GPU-days each (12.5 and 2.5 per 1,000 GPU-days).
    // Ratio 0.2; p = 2 x P(X <= 2 | 12, 1/2) = 2 x 79/4096 = 0.038574; Clopper-Pearson on 2/12
    // mapped to p/(1-p): (0.021307, 0.938502): the interval excludes 1.
    let (status, v) = app
        .get(
            &reader,
            &format!("/v1/analytics/compare?{}&cluster=c1&by=gpu_generation", windows(A, B)),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let o = &v["overall"];
    assert_eq!(
        (o["a_failures"].as_u64(), o["b_failures"].as_u64()),
        (Some(10), Some(2))
    );
    assert_eq!(
        (o["a_gpu_days"].as_f64(), o["b_gpu_days"].as_f64()),
        (Some(800.0), Some(800.0))
    );
    assert_eq!(o["a_rate_per_1000_gpu_days"], 12.5);
    assert_eq!(o["b_rate_per_1000_gpu_days"], 2.5);
    assert_eq!(o["rate_ratio"], 0.2);
    close(&o["p_value"], 79.0 / 2048.0, 1e-9);
    close(&o["ratio_lower"], 0.021307, 1e-4);
    close(&o["ratio_upper"], 0.938502, 1e-5);
    assert_eq!(o["significant"], true);
    assert_eq!(
        o["verdict"],
        "B fails 80% less often than A (rate ratio 0.20, 95% CI 0.02 to 0.94); the difference is unlikely to be chance, p = 0.039."
    );
    // All nodes are Hopper: the one group is the overall comparison.
    assert_eq!(v["groups"].as_array().unwrap().len(), 1);
    assert_eq!(by_key(&v["groups"], "hopper")["rate_ratio"], 0.2);
    // Hardware (post-mortem counts: n01's OOM is hardware): 7 vs 2, ratio 2/7 = 0.285714,
    // p = 2 x P(X <= 2 | 9, 1/2) = 2 x (1 + 9 + 36)/512 = 0.179688.
    let hw = by_key(&v["by_category"], "hardware");
    assert_eq!(
        (hw["a_failures"].as_u64(), hw["b_failures"].as_u64()),
        (Some(7), Some(2))
    );
    close(&hw["rate_ratio"], 2.0 / 7.0, 1e-5);
    close(&hw["p_value"], 92.0 / 512.0, 1e-9);
    // User: 3 vs 0: ratio 0, at most (1 - 0.025^(1/3)) / 0.025^(1/3) = 2.419952; p = 2 x 1/8 = 0.25.
    let user = by_key(&v["by_category"], "user");
    assert_eq!(user["rate_ratio"], 0.0);
    close(&user["ratio_upper"], 2.419952, 1e-5);
    close(&user["p_value"], 0.25, 1e-9);
    assert!(
        user["verdict"]
            .as_str()
            .unwrap()
            .starts_with("B had no failures and A had 3: B's rate is at most 2.42 times A's")
    );
    // Platform: nothing on either side.
    let platform = by_key(&v["by_category"], "platform");
    assert_eq!(platform["p_value"], 1.0);
    assert_eq!(platform["rate_ratio"], Value::Null);

    // B vs C (zero failures in C): ratio 0, at most (1 - 0.025^(1/2)) / 0.025^(1/2) = 5.324555, p = 0.5.
    let (_, v) = app
        .get(&reader, &format!("/v1/analytics/compare?{}&cluster=c1", windows(B, C)))
        .await;
    assert_eq!(v["overall"]["rate_ratio"], 0.0);
    close(&v["overall"]["ratio_upper"], 5.324555, 1e-6);
    close(&v["overall"]["p_value"], 0.5, 1e-9);
    assert_eq!(v["groups"], json!([]));
    // C vs C: nothing to compare.
    let (_, v) = app
        .get(&reader, &format!("/v1/analytics/compare?{}&cluster=c1", windows(C, C)))
        .await;
    assert_eq!(
        v["overall"]["verdict"],
        "No failures in A or B: no evidence of a difference yet."
    );
    // Two deployments over window A: c1 (10) against c2 (0): at most (1 - 0.025^0.1)/0.025^0.1 = 0.446126,
    // p = 2 x 2^-10 = 0.001953: c2 is significantly better.
    let (_, v) = app
        .get(
            &reader,
            &format!(
                "/v1/analytics/compare?{}&a_cluster=c1&b_cluster=c2&by=cluster",
                windows(A, A)
            ),
        )
        .await;
    let o = &v["overall"];
    close(&o["ratio_upper"], 0.446126, 1e-5);
    close(&o["p_value"], 0.001953125, 1e-9);
    assert_eq!(o["significant"], true);
    assert_eq!(v["a"]["cluster"], "c1");
    assert_eq!(v["b"]["cluster"], "c2");
    assert_eq!(by_key(&v["groups"], "c1")["a_failures"], 10);
    assert_eq!(by_key(&v["groups"], "c2")["b_failures"], 0);

    // Defaults: B = the last 30 days, A = the 30 days before.
    let (status, v) = app.get(&reader, "/v1/analytics/compare").await;
    assert_eq!(status, 200, "{v}");
    let (af, at) = (v["a"]["from"].as_str().unwrap(), v["a"]["to"].as_str().unwrap());
    assert_eq!(at, v["b"]["from"].as_str().unwrap());
    assert!(af < at);

    // CSV: overall, four categories, one row per group.
    let (content_type, text) = csv(
        &app,
        &format!("/v1/analytics/compare?{}&cluster=c1&by=gpu_generation", windows(A, B)),
    )
    .await;
    assert!(content_type.starts_with("text/csv"), "{content_type}");
    let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1 + 1 + 4 + 1, "{text}");
    assert!(lines[0].starts_with("scope,key,a_failures,a_gpu_days"));
    assert!(
        lines[1].starts_with("overall,,10,800,12.5,2,800,2.5,0.2,"),
        "{}",
        lines[1]
    );
    assert!(lines[6].starts_with("gpu_generation,hopper,10,800,"), "{}", lines[6]);

    // Bad input is a 400 with where; an agent may not query.
    let (status, v) = app
        .get(&reader, &format!("/v1/analytics/compare?{}&by=rack", windows(A, B)))
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(v["message"].as_str().unwrap().contains("by"), "{v}");
    let (status, _) = app
        .get(
            &reader,
            &format!(
                "/v1/analytics/compare?{}",
                windows(B, A).replace("a_to=2026-10-21", "a_to=2026-10-01")
            ),
        )
        .await;
    assert_eq!(status, 400);
    let agent = app.token("agent", None).await;
    assert_eq!(app.get(&agent, "/v1/analytics/compare").await.0, 403);
    assert_eq!(app.get("nope", "/v1/analytics/compare").await.0, 401);
}

#[tokio::test]
async fn job_plan_from_the_measured_rate() {
    let (app, reader) = fleet_app().await;
    // Window A on c1: 10 failures over 10 x 1,920 = 19,200 GPU-hours: per-GPU MTBF 1,920 h.
    // 64 GPUs: job MTBF 30 h = 1,800 min, 0.8 interruptions a day.
    // C = 6, R = 30: Young sqrt(2 x 6 x 1800) = 146.969385; Daly: x = 6/3600, 146.969385 x (1 + 0.0136083
    // + 0.0001852) - 6 = 142.996601; ETTR = 142.996601 / (1800 e^(30/1800) (e^(148.996601/1800) - 1)) = 0.905342.
    // 95% interval on 10 failures: (chi2(0.025; 20)/2, chi2(0.975; 22)/2) = (4.795389, 18.390356):
    // job MTBF (300/18.390356, 300/4.795389) = (16.312898, 62.560101) h; ETTR (0.866357, 0.937000).
    let path = format!(
        "/v1/analytics/job-plan?from={}&to={}&cluster=c1&gpus=64&checkpoint_minutes=6&restart_minutes=30",
        A.0, A.1
    );
    let (status, v) = app.get(&reader, &path).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["nodes"], 10);
    assert_eq!(v["gpu_hours"], 19200.0);
    assert_eq!(v["failures"], 10);
    assert_eq!(v["restart_source"], "given");
    let p = &v["plan"];
    close(&p["mtbf_per_gpu_hours"]["value"], 1920.0, 1e-9);
    close(&p["job_mtbf_hours"]["value"], 30.0, 1e-9);
    close(&p["job_mtbf_hours"]["lower"], 16.312898, 1e-4);
    close(&p["job_mtbf_hours"]["upper"], 62.560101, 1e-4);
    close(&p["interruptions_per_day"]["value"], 0.8, 1e-9);
    close(&p["young_interval_minutes"]["value"], 146.969385, 1e-6);
    close(&p["daly_interval_minutes"]["value"], 142.996601, 1e-6);
    close(&p["effective_training_time_ratio"]["value"], 0.905342, 1e-5);
    close(&p["effective_training_time_ratio"]["lower"], 0.866357, 1e-4);
    close(&p["effective_training_time_ratio"]["upper"], 0.937000, 1e-4);

    // Defaults: checkpoint 5 min; restart = the median recorded downtime (n01: 10 + 5 = 15 min).
    // Daly at C = 5, M = 1800: 130.851450; ETTR with R = 15: 0.919609.
    let (_, v) = app
        .get(
            &reader,
            &format!("/v1/analytics/job-plan?from={}&to={}&cluster=c1&gpus=64", A.0, A.1),
        )
        .await;
    assert_eq!(v["checkpoint_source"], "default");
    assert_eq!(v["restart_source"], "measured_median");
    assert_eq!(v["restart_measured_over"], 1);
    assert_eq!(v["plan"]["restart_minutes"], 15.0);
    close(&v["plan"]["daly_interval_minutes"]["value"], 130.851450, 1e-6);
    close(&v["plan"]["effective_training_time_ratio"]["value"], 0.919609, 1e-5);

    // Window C: no failures, no lifecycles: MTBF unbounded above, the documented 53-minute restart.
    // Lower MTBF = 19,200 / 3.688879 / 64 = 81.325 h (chi2(0.975; 2)/2 = -ln 0.025 = 3.688879).
    let (_, v) = app
        .get(
            &reader,
            &format!("/v1/analytics/job-plan?from={}&to={}&cluster=c1&gpus=64", C.0, C.1),
        )
        .await;
    assert_eq!(v["restart_source"], "default");
    assert_eq!(v["plan"]["restart_minutes"], 53.0);
    assert_eq!(v["plan"]["job_mtbf_hours"]["value"], Value::Null);
    assert_eq!(v["plan"]["job_mtbf_hours"]["upper"], Value::Null);
    close(
        &v["plan"]["job_mtbf_hours"]["lower"],
        19_200.0 / -(0.025_f64.ln()) / 64.0,
        1e-6,
    );
    assert_eq!(v["plan"]["effective_training_time_ratio"]["upper"], 1.0);

    // Another generation: no nodes, nothing measured.
    let (status, v) = app
        .get(
            &reader,
            &format!(
                "/v1/analytics/job-plan?from={}&to={}&gpus=64&generation=ampere",
                A.0, A.1
            ),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!((v["nodes"].as_u64(), v["failures"].as_u64()), (Some(0), Some(0)));
    assert_eq!(v["plan"]["job_mtbf_hours"]["value"], Value::Null);

    // CSV: one row per figure.
    let (_, text) = csv(&app, &path).await;
    assert!(text.starts_with("figure,value,lower,upper\r\n"), "{text}");
    assert!(text.contains("\r\njob_mtbf_hours,30,"), "{text}");
    assert!(text.contains("\r\ngpus,64,,\r\n"), "{text}");

    for bad in [
        "gpus=0",
        "gpus=1000001",
        "",
        "gpus=8&generation=fermi",
        "gpus=8&checkpoint_minutes=-1",
        "gpus=8&restart_minutes=99999",
    ] {
        let (status, v) = app.get(&reader, &format!("/v1/analytics/job-plan?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {v}");
    }
}

#[tokio::test]
async fn lemon_nodes_worse_than_chance() {
    let (app, reader) = fleet_app().await;
    // Hardware in A on c1: n00 6 (4 gpu_memory, 2 gpu), n01 1 (post-mortem network): K = 7 over
    // 19,200 GPU-hours, mu = 0.7 per node. n00: P(X >= 6 | 0.7) = 9.0026e-5, Holm x 10 = 9.0026e-4:
    // a lemon, drained. n01: 1 - e^-0.7 = 0.503: not.
    let (status, v) = app
        .get(
            &reader,
            &format!("/v1/analytics/lemon-nodes?from={}&to={}&cluster=c1", A.0, A.1),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["category"], "hardware");
    assert_eq!(v["nodes_tested"], 10);
    assert_eq!(v["failures"], 7);
    assert_eq!(v["fleet_failures_per_1000_gpu_days"], 8.75);
    assert_eq!(v["correction"], "holm");
    let lemons = v["lemons"].as_array().unwrap();
    assert_eq!(lemons.len(), 1, "{v}");
    let l = &lemons[0];
    assert_eq!(l["hostname"], "n00");
    assert_eq!(l["failures"], 6);
    assert_eq!(l["expected_failures"], 0.7);
    close(&l["tail_probability"], 9.0026e-5, 1e-4);
    close(&l["adjusted_probability"], 9.0026e-4, 1e-4);
    assert_eq!(l["dominant_component"], "gpu_memory");
    assert_eq!(l["dominant_component_failures"], 4);
    assert_eq!(l["drained"], true);

    // All causes: K = 10, mu = 1 per node; n00: P(X >= 6 | 1) = 1 - e^-1 (1 + 1 + 1/2 + 1/6 + 1/24 + 1/120)
    // = 1 - 0.367879 x 2.716667 = 5.9418e-4; x 10 = 5.9418e-3: still a lemon.
    let (_, v) = app
        .get(
            &reader,
            &format!(
                "/v1/analytics/lemon-nodes?from={}&to={}&cluster=c1&category=all",
                A.0, A.1
            ),
        )
        .await;
    assert_eq!(v["category"], Value::Null);
    assert_eq!(v["failures"], 10);
    close(&v["lemons"][0]["tail_probability"], 5.9418e-4, 1e-4);
    // At alpha = 0.001 the all-cause lemon is no longer significant.
    let (_, v) = app
        .get(
            &reader,
            &format!(
                "/v1/analytics/lemon-nodes?from={}&to={}&cluster=c1&category=all&alpha=0.001",
                A.0, A.1
            ),
        )
        .await;
    assert_eq!(v["lemons"], json!([]));

    // CSV.
    let (_, text) = csv(
        &app,
        &format!("/v1/analytics/lemon-nodes?from={}&to={}&cluster=c1", A.0, A.1),
    )
    .await;
    let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[1].starts_with("c1,n00,6,0.7,"), "{text}");
    assert!(lines[1].ends_with(",gpu_memory,4,true"), "{text}");

    for bad in ["alpha=0", "alpha=0.9", "category=gpu"] {
        assert_eq!(
            app.get(&reader, &format!("/v1/analytics/lemon-nodes?{bad}")).await.0,
            400,
            "{bad}"
        );
    }
}

#[tokio::test]
async fn fleet_health_in_the_report_html_and_markdown_agree() {
    use crate::report::{html_table, md_table, report};
    let (app, reader) = fleet_app().await;
    let q = format!("from={}&to={}&cluster=c1&job_gpus=64", A.0, A.1);
    let (status, _, md) = report(&app, &reader, &q, "text/markdown").await;
    assert_eq!(status, 200, "{md}");
    let (_, _, html) = report(&app, &reader, &format!("{q}&format=html"), "text/html").await;

    // Window A against the previous 10 days (no failures, the same 800 GPU-days): 0 vs 10.
    // Lower bound = 0.025^(1/10) / (1 - 0.025^(1/10)) = 0.691503 / 0.308497 = 2.241521; p = 2 x 2^-10.
    let compare = md_table(&md, "This window against the previous window");
    assert_eq!(compare, html_table(&html, "This window against the previous window"));
    assert_eq!(
        compare[0],
        [
            "all failures",
            "0",
            "0.00",
            "10",
            "12.50",
            "n/a",
            "at least 2.24",
            "p = 0.002"
        ]
    );
    assert_eq!(compare[1][0], "hardware");
    assert_eq!(compare.len(), 5);
    assert!(md.contains(
        "The previous window had no failures and this window had 10: this window's rate is at least 2.24 times the previous window's (95% lower bound); the difference is unlikely to be chance, p = 0.002."
    ));

    // The lemon of lemon_nodes_worse_than_chance.
    let lemons = md_table(&md, "Lemon nodes");
    assert_eq!(lemons, html_table(&html, "Lemon nodes"));
    assert_eq!(
        lemons,
        vec![vec!["c1/n00", "6", "0.70", "9.00e-5", "9.00e-4", "gpu_memory", "yes"]]
    );

    // The job plan of job_plan_from_the_measured_rate with its defaults: MTBF 30 h (16.31 to 62.56),
    // 0.8 a day, Daly 130.85 min, ETTR 92.0%.
    let plan = md_table(&md, "Job plan for 64 GPUs");
    assert_eq!(plan, html_table(&html, "Job plan for 64 GPUs"));
    assert_eq!(plan[0], ["Job MTBF, hours", "30.00", "16.31", "62.56"]);
    assert_eq!(plan[1][..2], ["Interruptions per day", "0.80"]);
    assert_eq!(plan[3][..2], ["Daly checkpoint interval, minutes", "130.85"]);
    assert_eq!(plan[4][..2], ["Effective training time ratio", "92.0%"]);

    // Default job size, and its bounds.
    let (_, _, md) = report(&app, &reader, &format!("from={}&to={}", A.0, A.1), "text/markdown").await;
    assert!(
        md.contains("Job plan for 16,384 GPUs") || md.contains("Job plan for 16384 GPUs"),
        "{md}"
    );
    for bad in ["job_gpus=0", "job_gpus=1000001"] {
        assert_eq!(report(&app, &reader, bad, "text/markdown").await.0, 400, "{bad}");
    }
}

/// Every `$ref` of the OpenAPI document names a schema it defines (the closed sets of these
/// endpoints, `GpuGeneration` and `LemonCategory`, are query parameters only, so they must be
/// registered by hand).
#[test]
fn every_schema_reference_resolves() {
    let doc = faultline::http::openapi::openapi_json();
    let parsed: Value = serde_json::from_str(&doc).unwrap();
    let schemas = parsed["components"]["schemas"].as_object().unwrap();
    let marker = "\"#/components/schemas/";
    let mut rest = doc.as_str();
    while let Some(i) = rest.find(marker) {
        rest = &rest[i + marker.len()..];
        let name = &rest[..rest.find('"').unwrap()];
        assert!(schemas.contains_key(name), "{name} is referenced but not defined");
    }
}
