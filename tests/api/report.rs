//! The reliability report over HTTP: the HTML and Markdown forms carry the same numbers (and the
//! hand-computed ones), roles, bad windows, escaping and the empty report.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, event, spawn_app, uuid_n};

const W: &str = "from=2026-11-01T00:00:00Z&to=2026-11-08T00:00:00Z";

/// The fleet of the headline-analytics test: 16 H100 nodes (group su1) and 4 A100 nodes; in the
/// week of Nov 1: hopper 3 x XID 79 (n01, n01, n02) + 1 gpu_oom (n03); ampere 2 x explicit
/// platform/storage (a00); 1 node-less scheduler_error; one more XID 79 after the window.
async fn fixture() -> TestApp {
    let app = spawn_app().await;
    let mut nodes: Vec<Value> = (0..16)
        .map(|i| json!({"hostname": format!("n{i:02}"), "cluster": "c1", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
                        "group": "su1", "in_service_since": "2026-10-01T00:00:00Z"}))
        .collect();
    nodes.extend((0..4).map(|i| {
        json!({"hostname": format!("a{i:02}"), "cluster": "c1", "gpu_model": "A100-SXM4-80GB", "gpu_count": 8,
                                        "in_service_since": "2026-10-01T00:00:00Z"})
    }));
    let (status, body) = app.put_nodes(ADMIN_TOKEN, &json!({"nodes": nodes})).await;
    assert_eq!(status, 200, "{body}");
    let events = json!({"events": [
        event(&uuid_n(1), json!({"node": "n01", "occurred_at": "2026-11-02T00:00:00Z"})),
        event(&uuid_n(2), json!({"node": "n01", "occurred_at": "2026-11-03T00:00:00Z"})),
        event(&uuid_n(3), json!({"node": "n02", "occurred_at": "2026-11-04T00:00:00Z"})),
        event(&uuid_n(4), json!({"node": "n03", "occurred_at": "2026-11-05T00:00:00Z", "kind": "gpu_oom", "code": null})),
        event(&uuid_n(5), json!({"node": "a00", "occurred_at": "2026-11-02T00:00:00Z", "kind": "storage_error", "code": null,
                                  "root_cause": {"category": "platform", "component": "storage"}})),
        event(&uuid_n(6), json!({"node": "a00", "occurred_at": "2026-11-06T00:00:00Z", "kind": "storage_error", "code": null,
                                  "root_cause": {"category": "platform", "component": "storage"}})),
        event(&uuid_n(7), json!({"node": null, "occurred_at": "2026-11-06T00:00:00Z", "kind": "scheduler_error", "code": null})),
        event(&uuid_n(8), json!({"node": "n05", "occurred_at": "2026-11-09T00:00:00Z"})),
    ]});
    let (status, body) = app.post_events(ADMIN_TOKEN, &events).await;
    assert_eq!(status, 200, "{body}");
    app
}

pub async fn report(app: &TestApp, token: &str, query: &str, accept: &str) -> (u16, String, String) {
    let res = app
        .client
        .get(app.url(&format!("/v1/reports/reliability?{query}")))
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

/// Text between `start` and the next `end` after it.
fn between<'a>(s: &'a str, start: &str, end: &str) -> &'a str {
    let i = s.find(start).unwrap_or_else(|| panic!("{start:?} not found")) + start.len();
    &s[i..i + s[i..].find(end).unwrap()]
}

/// The summary figures of the HTML: value, with its note in parentheses when it has one.
fn html_figures(html: &str) -> Vec<(String, String)> {
    html.split("<div class=\"figure\" data-figure=\"")
        .skip(1)
        .map(|f| {
            let key = f[..f.find('"').unwrap()].to_string();
            let value = between(f, "<div class=\"value\">", "<").to_string();
            let value = match f.find("<div class=\"value-note\">") {
                Some(_) => format!("{value} ({})", between(f, "<div class=\"value-note\">", "<")),
                None => value,
            };
            (key, unescape_html(&value))
        })
        .collect()
}

fn unescape_html(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

fn unescape_md(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    unescape_html(&out)
}

/// Rows of a Markdown table: cells split on unescaped `|`.
fn md_rows(lines: &[&str]) -> Vec<Vec<String>> {
    lines
        .iter()
        .map(|l| {
            let mut cells = vec![String::new()];
            let mut chars = l.trim().trim_start_matches('|').chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        cells.last_mut().unwrap().push('\\');
                        cells.last_mut().unwrap().extend(chars.next());
                    }
                    '|' => cells.push(String::new()),
                    _ => cells.last_mut().unwrap().push(c),
                }
            }
            cells.pop();
            cells.iter().map(|c| unescape_md(c.trim())).collect()
        })
        .collect()
}

fn md_summary(md: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = md
        .lines()
        .skip_while(|l| !l.starts_with("| Figure |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    md_rows(&lines)
}

pub fn html_table(html: &str, caption: &str) -> Vec<Vec<String>> {
    let table = between(html, &format!("<caption>{caption}</caption>"), "</table>");
    between(table, "<tbody>", "</tbody>")
        .split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|c| unescape_html(between(c, ">", "</td>")))
                .collect()
        })
        .collect()
}

pub fn md_table(md: &str, caption: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = md
        .lines()
        .skip_while(|l| *l != format!("{caption}:"))
        .skip(4)
        .take_while(|l| l.starts_with('|'))
        .collect();
    md_rows(&lines)
}

#[tokio::test]
async fn html_and_markdown_carry_the_same_hand_computed_numbers() {
    let app = fixture().await;
    let reader = app.token("reader", None).await;
    let (status, ct, html) = report(&app, &reader, W, "text/html").await;
    assert_eq!(status, 200, "{html}");
    assert_eq!(ct, "text/html; charset=utf-8");
    let (status, ct, md) = report(&app, &reader, W, "text/markdown").await;
    assert_eq!(status, 200, "{md}");
    assert_eq!(ct, "text/markdown; charset=utf-8");

    let figures = html_figures(&html);
    let keys: Vec<&str> = figures.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        keys,
        [
            "failures",
            "failures_per_1000_gpu_days",
            "hardware_share",
            "median_group_mtbf_hours",
            "worst_generation"
        ]
    );
    let values: Vec<&str> = figures.iter().map(|f| f.1.as_str()).collect();
    // 7 failures; 7 / (160 GPUs x 7 d = 1,120 GPU-days) x 1,000 = 6.25; hardware 3 / 7 = 42.9%;
    // MTBF of the groups with failures: su1 168 h / 4 = 42 h, auto-000 168 h / 2 = 84 h: median 63 h;
    // worst generation: ampere 2 / 224 GPU-days x 1,000 = 8.93 (hopper 4 / 896 = 4.46).
    assert_eq!(
        values,
        ["7", "6.25", "42.9%", "63.0 h", "ampere (8.93 per 1,000 GPU-days)"]
    );
    let md_values: Vec<String> = md_summary(&md).into_iter().map(|r| r[1].clone()).collect();
    assert_eq!(md_values, values, "Markdown summary = HTML summary");

    // The tables agree cell by cell.
    for caption in [
        "Failures by GPU generation",
        "MTBF per group",
        "Failures by root-cause category",
        "Hardware failures by component",
        "Failures per day by root cause",
        "Nodes with the most failures",
        "Published figures and this fleet",
    ] {
        assert_eq!(html_table(&html, caption), md_table(&md, caption), "{caption}");
    }
    let mix = html_table(&html, "Failures by GPU generation");
    // hopper: 128 GPUs, 896 GPU-days, 4 failures, 4.46 per 1,000: hardware 3, user 1.
    assert!(
        mix.contains(
            &["hopper", "128", "896.0", "4", "4.46", "3", "0", "1", "0"]
                .map(String::from)
                .to_vec()
        ),
        "{mix:?}"
    );
    let days = html_table(&html, "Failures per day by root cause");
    assert_eq!(days.len(), 7, "a row per day of the window");
    // Nov 2: XID 79 on n01 (hardware) + storage on a00 (platform).
    assert_eq!(days[1], ["2026-11-02", "1", "1", "0", "0", "2"]);
    let worst = html_table(&html, "Nodes with the most failures");
    // n01: 2 of the 6 failures with a node = 33.3%.
    assert_eq!(worst[0], ["a00", "c1", "ampere", "2", "33.3%"]);
    assert_eq!(worst[1], ["n01", "c1", "hopper", "2", "33.3%"]);

    // Every chart is drawn (recovery says plainly that nothing is recorded).
    for id in [
        "failure-mix",
        "mtbf",
        "root-causes",
        "hardware-components",
        "timeline",
        "worst-nodes",
        "baselines",
    ] {
        assert!(
            html.contains(&format!("<svg class=\"chart\" data-chart=\"{id}\"")),
            "{id}"
        );
    }
    assert!(html.contains("<svg class=\"chart nodata\" data-chart=\"recovery\""));
    assert!(html.contains("No recovery data recorded in this window"));
    assert!(md.contains("No recovery data recorded in this window"));
    // Self-contained: no scripts, no external references.
    assert!(
        !html.contains("<script") && !html.contains("src=") && !html.contains("https://"),
        "self-contained"
    );

    // The fragment is the document's article; format= wins over Accept.
    let (_, _, fragment) = report(&app, &reader, &format!("{W}&format=fragment"), "text/markdown").await;
    assert!(
        fragment.starts_with("<article class=\"faultline-report\" data-clusters=\"c1\">"),
        "{}",
        &fragment[..80]
    );
    assert_eq!(html_figures(&fragment), figures);
    let (_, ct, _) = report(&app, &reader, &format!("{W}&format=markdown"), "text/html").await;
    assert!(ct.starts_with("text/markdown"));

    // `faultline report` writes the same report to a file.
    let out = std::env::temp_dir().join(format!("faultline-report-{}.md", uuid::Uuid::new_v4().simple()));
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args([
            "report",
            "--server",
            &app.address,
            "--token",
            &reader,
            "--from",
            "2026-11-01T00:00:00Z",
            "--to",
            "2026-11-08T00:00:00Z",
            "--format",
            "markdown",
            "--out",
        ])
        .arg(&out)
        .output()
        .await
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let written = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    assert_eq!(md_summary(&written), md_summary(&md));
    assert_eq!(md_table(&written, "MTBF per group"), md_table(&md, "MTBF per group"));
}

#[tokio::test]
async fn roles_windows_scopes_and_escaping() {
    let app = fixture().await;
    let agent = app.token("agent", None).await;
    let reader = app.token("reader", None).await;
    let scoped = app.token("reader", Some("c1")).await;
    let (status, _, body) = report(&app, &agent, W, "text/html").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"], "forbidden");
    assert_eq!(report(&app, "nope", W, "text/html").await.0, 401);
    assert_eq!(
        report(
            &app,
            &reader,
            "from=2026-11-08T00:00:00Z&to=2026-11-01T00:00:00Z",
            "text/html"
        )
        .await
        .0,
        400
    );
    assert_eq!(report(&app, &reader, "from=yesterday", "text/html").await.0, 400);
    assert_eq!(
        report(
            &app,
            &reader,
            "from=1990-01-01T00:00:00Z&to=2026-01-01T00:00:00Z",
            "text/html"
        )
        .await
        .0,
        400,
        "longer than 10 years"
    );
    assert_eq!(
        report(&app, &reader, &format!("{W}&format=pdf"), "text/html").await.0,
        400
    );
    // A token scoped to c1 may not read c2, and gets c1 without asking.
    assert_eq!(
        report(&app, &scoped, &format!("{W}&cluster=c2"), "text/html").await.0,
        403
    );
    let (status, _, html) = report(&app, &scoped, W, "text/html").await;
    assert_eq!(status, 200);
    assert!(html.contains("Reliability report: c1"));

    // A cluster name from the query is text, never markup; an empty window says so.
    let (status, _, html) = report(
        &app,
        &reader,
        &format!("{W}&cluster=%3Cscript%3Ealert(1)%3C%2Fscript%3E"),
        "text/html",
    )
    .await;
    assert_eq!(status, 200);
    assert!(!html.contains("<script>"), "escaped");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(
        html.matches("No data in this window").count() >= 7,
        "every chart says it has no data"
    );
    assert_eq!(
        html_figures(&html).into_iter().map(|f| f.1).collect::<Vec<_>>(),
        ["0", "n/a", "n/a", "n/a", "n/a"]
    );
    let (_, _, md) = report(
        &app,
        &reader,
        &format!("{W}&cluster=%3Cb%3Ex%7Cy%3C%2Fb%3E"),
        "text/markdown",
    )
    .await;
    assert!(
        md.starts_with("# Reliability report: &lt;b&gt;x\\|y&lt;/b&gt;"),
        "{}",
        &md[..80]
    );
}

#[tokio::test]
async fn the_dashboard_is_served_without_a_token() {
    let app = spawn_app().await;
    for (path, ct, needle) in [
        ("/", "text/html", "<script src=\"/assets/dashboard.js\">"),
        ("/", "text/html", "<script src=\"/assets/parts.js\">"),
        ("/assets/dashboard.js", "text/javascript", "/v1/reports/reliability"),
        // The Parts panel reads the parts analytics.
        ("/assets/parts.js", "text/javascript", "'/v1/analytics/' + path"),
        // The Fleet now panel reads /v1/fleet/now.
        ("/", "text/html", "<section id=\"fleet-panel\""),
        ("/assets/fleet.js", "text/javascript", "'/v1/fleet/now?'"),
        ("/assets/dashboard.css", "text/css", "#report"),
    ] {
        let res = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        assert!(
            res.headers()["content-type"].to_str().unwrap().starts_with(ct),
            "{path}"
        );
        let body = res.text().await.unwrap();
        assert!(body.contains(needle), "{path}");
        // The SVG namespace names elements; it is not a request.
        let body = body.replace("'http://www.w3.org/2000/svg'", "");
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path}: no external references"
        );
    }
    let script = app
        .client
        .get(app.url("/assets/parts.js"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for endpoint in ["q('survival'", "q('afr'", "q('parts-or-slots'", "q('precursors'"] {
        assert!(script.contains(endpoint), "the Parts panel fetches {endpoint}");
    }
}

/// Recovery phases recorded on a failure (PATCH) appear in the report's recovery section, the same in
/// HTML and Markdown: Unicron's GPT-3 example, 30 + 9 + 14 + 15 minutes.
#[tokio::test]
async fn recorded_recovery_phases_are_reported() {
    let app = spawn_app().await;
    let (status, _) = app
        .post_events(
            ADMIN_TOKEN,
            &serde_json::json!({"events": [crate::helpers::event(&crate::helpers::uuid_n(1),
        serde_json::json!({"occurred_at": "2026-11-02T10:00:00Z", "job_id": "j1"}))]}),
        )
        .await;
    assert_eq!(status, 200);
    let (_, list) = app.get(ADMIN_TOKEN, "/v1/failures").await;
    let id = list["failures"][0]["id"].as_str().unwrap().to_string();
    let res = app
        .client
        .patch(app.url(&format!("/v1/failures/{id}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&serde_json::json!({"resolution": "transient_restart",
            "recovery_minutes": {"detection": 30, "resubmission": 9, "setup": 14, "recomputation": 15}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let q = "from=2026-11-01T00:00:00Z&to=2026-11-08T00:00:00Z";
    let (status, _, md) = report(&app, ADMIN_TOKEN, q, "text/markdown").await;
    assert_eq!(status, 200);
    let rows = md_table(&md, "Downtime by recovery phase");
    assert_eq!(rows.len(), 4, "{md}");
    assert_eq!(
        rows[0][..3],
        ["detection".to_string(), "1".to_string(), "30.0".to_string()]
    );
    assert_eq!(
        rows[3][..3],
        ["recomputation".to_string(), "1".to_string(), "15.0".to_string()]
    );
    let (_, _, html) = report(&app, ADMIN_TOKEN, q, "text/html").await;
    assert_eq!(html_table(&html, "Downtime by recovery phase"), rows);
    // The repair time by root cause: the XID 79 (hardware/gpu), 30 + 9 + 14 + 15 = 68 minutes; the
    // category's subtotal first.
    let by_cause = md_table(&md, "Repair time by root cause");
    let want = |comp: &str| -> Vec<String> {
        ["hardware", comp, "1", "1", "68.0", "68.0", "68.0"]
            .map(String::from)
            .to_vec()
    };
    assert_eq!(by_cause, vec![want("(all)"), want("gpu")], "{md}");
    assert_eq!(html_table(&html, "Repair time by root cause"), by_cause);
}
