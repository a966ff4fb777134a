//! A new user's first look: the demo fleet (`serve --demo`'s loader) makes every analysis and every
//! report section show data in the default window; no answer shows a negative zero, empty or not.

use serde_json::Value;
use std::collections::BTreeSet;

use crate::helpers::{ADMIN_TOKEN, TestApp, spawn_app};

/// Every `/v1/analytics/*` route of the OpenAPI document, with the query it needs (if any) and what
/// "shows data" means for it.
/// (path, what it shows, the check of its answer).
type Check = (&'static str, &'static str, fn(&Value) -> bool);

fn checks() -> Vec<Check> {
    vec![
        ("/v1/analytics/failure-mix", "", |b| {
            b["rows"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["failures"].as_u64() > Some(0)))
        }),
        ("/v1/analytics/mtbf", "", |b| {
            b["groups"]
                .as_array()
                .is_some_and(|g| g.iter().any(|g| g["failures"].as_u64() > Some(0)))
        }),
        ("/v1/analytics/root-causes", "", |b| b["failures"].as_u64() > Some(0)),
        ("/v1/analytics/recovery", "", |b| {
            let s = &b["summary"];
            s["downtime_minutes"]["count"].as_u64() > Some(0)
                && s["phases"]
                    .as_array()
                    .is_some_and(|p| p.iter().all(|p| p["minutes"]["count"].as_u64() > Some(0)))
                && s["hardware_failures_drained"].as_u64() > Some(0)
                && s["gpu_hours_lost"].as_f64() > Some(0.0)
                && b["out_of_service"]["nodes_drained"].as_u64() > Some(0)
                && b["ettr"]["fleet"]["jobs"].as_u64() > Some(0)
                && b["ettr"]["fleet"]["ettr"].as_f64().is_some()
                && !b["ettr"]["jobs"].as_array().is_none_or(Vec::is_empty)
        }),
        ("/v1/analytics/top-errors", "", |b| {
            !b["root_signals"].as_array().is_none_or(Vec::is_empty)
        }),
        ("/v1/analytics/node-concentration", "", |b| {
            !b["repeat_offenders"].as_array().is_none_or(Vec::is_empty)
        }),
        ("/v1/analytics/job-size", "", |b| {
            b["jobs"].as_u64() > Some(0)
                && b["largest"]["jobs"].as_u64() > Some(0)
                && b["buckets"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k["failed_jobs"].as_u64() > Some(0)))
                && !b["projection"]["sizes"].as_array().is_none_or(Vec::is_empty)
        }),
        ("/v1/analytics/stragglers", "", |b| {
            b["straggler_nodes"].as_u64() > Some(0) && b["gpu_hours_wasted"].as_f64() > Some(0.0)
        }),
        ("/v1/analytics/efficiency", "", |b| b["incidents"].as_u64() > Some(0)),
        ("/v1/analytics/timeline", "", |b| {
            b["points"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p["total"].as_u64() > Some(0)))
        }),
        ("/v1/analytics/baselines", "", |b| {
            b["baselines"]
                .as_array()
                .is_some_and(|r| r.iter().filter(|r| r["fleet"].is_number()).count() >= 10)
        }),
        ("/v1/analytics/compare", "by=gpu_generation", |b| {
            b["overall"]["a_failures"].as_u64() > Some(0)
                && b["overall"]["b_failures"].as_u64() > Some(0)
                && !b["groups"].as_array().is_none_or(Vec::is_empty)
        }),
        ("/v1/analytics/job-plan", "gpus=1024", |b| {
            b["failures"].as_u64() > Some(0) && b["plan"]["job_mtbf_hours"]["value"].is_number()
        }),
        ("/v1/analytics/lemon-nodes", "", |b| {
            !b["lemons"].as_array().is_none_or(Vec::is_empty)
        }),
        // The parts: removals of failed and RMA'd GPUs, the vendor lots, the early signals.
        ("/v1/analytics/survival", "by=attribute:lot", |b| {
            b["groups"].as_array().is_some_and(|g| {
                g.iter()
                    .any(|g| g["group"] == faultline::devtools::simulate::BAD_LOT && g["events"].as_u64() > Some(0))
            })
        }),
        ("/v1/analytics/afr", "", |b| {
            b["groups"]
                .as_array()
                .is_some_and(|g| g.iter().any(|g| g["failures"].as_u64() > Some(0)))
        }),
        ("/v1/analytics/parts-or-slots", "", |b| b["failures"].as_u64() > Some(0)),
        // Where the GPU-hours went: drains and downs of the demo's nodes, with their incidents.
        ("/v1/analytics/availability", "period=week", |b| {
            b["points"].as_array().is_some_and(|p| {
                p.iter().any(|p| p["installed_gpu_hours"].as_f64() > Some(0.0))
                    && p.iter().any(|p| p["lost_gpu_hours"].as_f64() > Some(0.0))
            })
        }),
        ("/v1/analytics/repair-pipeline", "", |b| {
            !b["incidents"].as_array().is_none_or(Vec::is_empty)
        }),
        ("/v1/analytics/failure-forecast", "", |b| {
            b["groups"].as_array().is_some_and(|g| {
                g.iter()
                    .any(|g| g["parts_in_service"].as_u64() > Some(0) && g["expected"].as_f64() > Some(0.0))
            })
        }),
        ("/v1/analytics/precursors", "", |b| {
            b["precursors"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p["significant"] == true))
        }),
    ]
}

fn analytics_routes() -> BTreeSet<String> {
    let doc: Value = serde_json::from_str(&faultline::http::openapi::openapi_json()).unwrap();
    doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|p| p.starts_with("/v1/analytics/"))
        .cloned()
        .collect()
}

async fn get_text(app: &TestApp, path: &str) -> (u16, String) {
    let res = app
        .client
        .get(app.url(path))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

fn assert_no_negative_zero(path: &str, body: &str) {
    for bad in ["-0.0,", "-0.0}", "-0.0]", "-0.0 ", "-0.0|", "-0.0<", "-0.0\n", "-0,"] {
        assert!(!body.contains(bad), "{path} shows a negative zero ({bad:?}):\n{body}");
    }
}

#[tokio::test]
async fn the_demo_fleet_shows_data_in_every_analysis_and_every_report_section() {
    let app = spawn_app().await;
    let loaded = faultline::devtools::demo::load_if_empty(&app.db, &app.catalog, chrono::Duration::minutes(10))
        .await
        .unwrap()
        .expect("an empty database gets the demo");
    assert!(
        loaded.jobs > 1000 && loaded.node_states > 50 && loaded.lifecycles > 300,
        "{loaded:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM failure_lifecycle").await,
        loaded.lifecycles as i64
    );
    // Post-mortems settled most unknown causes: some lifecycle carries one.
    assert!(
        app.count("SELECT count(*) FROM failure_lifecycle WHERE pm_category IS NOT NULL")
            .await
            > 0
    );
    // A second start leaves the data alone.
    assert!(
        faultline::devtools::demo::load_if_empty(&app.db, &app.catalog, chrono::Duration::minutes(10))
            .await
            .unwrap()
            .is_none()
    );

    let checks = checks();
    let checked: BTreeSet<String> = checks.iter().map(|c| c.0.to_string()).collect();
    assert_eq!(
        checked,
        analytics_routes(),
        "every analysis of the OpenAPI document is checked"
    );
    for (path, query, shows_data) in &checks {
        // The default window: what a new user sees first.
        let url = if query.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{query}")
        };
        let (status, text) = get_text(&app, &url).await;
        assert_eq!(status, 200, "{url}: {text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        assert!(shows_data(&body), "{url} shows no data: {text}");
        assert_no_negative_zero(&url, &text);
    }

    // Generations in age order (volta, ampere, ada, hopper, blackwell), not alphabetical.
    let (_, mix) = app.get(ADMIN_TOKEN, "/v1/analytics/failure-mix").await;
    let keys: Vec<&str> = mix["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["volta", "ampere", "ada", "hopper", "blackwell"]);
    let (_, cmp) = app.get(ADMIN_TOKEN, "/v1/analytics/compare?by=gpu_generation").await;
    let keys: Vec<&str> = cmp["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["volta", "ampere", "ada", "hopper", "blackwell"]);

    let (status, md) = get_text(&app, "/v1/reports/reliability?format=markdown&job_gpus=1024").await;
    assert_eq!(status, 200, "{md}");
    assert_no_negative_zero("report", &md);
    let sections: Vec<&str> = md.split("\n## ").skip(1).collect();
    let titles: Vec<&str> = sections.iter().map(|s| s.lines().next().unwrap()).collect();
    assert_eq!(
        titles,
        [
            "Failure mix by GPU generation",
            "MTBF per 128-GPU group",
            "Root causes",
            "Failures over time",
            "Downtime by recovery phase",
            "Availability and repairs",
            "Worst nodes",
            "Fleet health",
            "This fleet beside the published baselines",
            "Parts"
        ]
    );
    for s in &sections {
        assert!(s.contains("|---"), "section without a table:\n{s}");
        for empty in [
            "No GPU-days",
            "No group had a failure",
            "No failures in this window",
            "No recovery data recorded",
            "No failure had a root-cause node",
            "No node has more hardware failures than chance allows",
        ] {
            assert!(!s.contains(empty), "an empty section ({empty}):\n{s}");
        }
    }
    // One number format: no measure of four or more digits without a thousands separator.
    let unseparated = regex_like_unseparated(&md);
    assert!(unseparated.is_empty(), "numbers without separators: {unseparated:?}");
    let gpu_days_rows = md.lines().filter(|l| l.starts_with("| hopper |")).collect::<Vec<_>>();
    assert!(gpu_days_rows.iter().all(|l| l.contains(',')), "{gpu_days_rows:?}");
}

/// Table cells holding a plain number of 4+ integer digits (dates, ids and hostnames excluded).
fn regex_like_unseparated(md: &str) -> Vec<String> {
    md.lines()
        .filter(|l| l.starts_with('|'))
        .flat_map(|l| l.split('|').map(str::trim).map(str::to_string).collect::<Vec<_>>())
        .filter(|c| {
            let number = c.trim_end_matches(" h").trim_end_matches('%');
            let whole = number.split('.').next().unwrap_or("");
            !number.is_empty() && number.chars().all(|ch| ch.is_ascii_digit() || ch == '.') && whole.len() >= 4
        })
        .collect()
}

/// With nothing stored, every analysis still answers, and none with a negative zero (empty sums).
#[tokio::test]
async fn an_empty_database_shows_no_negative_zero() {
    let app = spawn_app().await;
    for (path, query, _) in checks() {
        let url = if query.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{query}")
        };
        let (status, text) = get_text(&app, &url).await;
        assert_eq!(status, 200, "{url}: {text}");
        assert_no_negative_zero(&url, &text);
    }
    let (_, md) = get_text(&app, "/v1/reports/reliability?format=markdown").await;
    assert_no_negative_zero("report", &md);
}

/// The words of a shell command line as `welcome::message` writes them (single quotes only).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                in_word = true;
            }
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                }
                in_word = false;
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// What `faultline serve --demo` prints up to its `curl` example (the demo loads first: at most
/// 5 minutes), and the rest of its output, to keep open while the server runs (a closed pipe
/// would fail its next line).
pub async fn printed_until_curl(
    stdout: tokio::process::ChildStdout,
) -> (
    Vec<String>,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut printed = Vec::new();
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let done = line.trim_start().starts_with("curl ");
            printed.push(line);
            if done {
                break;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(300), read)
        .await
        .expect("serve --demo printed its curl example within 5 minutes");
    (printed, lines)
}

/// `faultline serve --demo` on a fresh database and data directory, as a newcomer runs it: its
/// output names a dashboard URL that carries the generated token, the Swagger UI, and a `curl`
/// that answers with the demo's data when run as printed.
#[tokio::test]
async fn serve_demo_prints_where_to_go_and_every_address_works() {
    let server_url = crate::helpers::test_server_url().await.unwrap();
    let database = crate::helpers::TestDatabase::create(&server_url).await;
    let data_dir = std::env::temp_dir().join(format!("faultline-demo-{}", database.name));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(["serve", "--demo"])
        .env("DATABASE_URL", database.url())
        .env("FAULTLINE_ADDR", "127.0.0.1:0")
        .env_remove("FAULTLINE_ADMIN_TOKEN")
        .env("FAULTLINE_DATA_DIR", &data_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (printed, lines) = printed_until_curl(child.stdout.take().unwrap()).await;
    let text = printed.join("\n");
    let token = std::fs::read_to_string(data_dir.join("admin-token")).unwrap();
    let token = token.trim();
    assert!(text.contains(token), "the generated token is shown:\n{text}");

    let url_after = |label: &str| -> String {
        let line = printed
            .iter()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} line in:\n{text}"));
        line.split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap()
            .to_string()
    };
    let client = reqwest::Client::new();

    let dashboard = url_after("Dashboard");
    let (page, fragment) = dashboard.split_once('#').expect("the dashboard URL has a fragment");
    let signed: Vec<(String, String)> = form_urlencoded::parse(fragment.as_bytes()).into_owned().collect();
    assert_eq!(signed, [("token".to_string(), token.to_string())], "{dashboard}");
    let res = client.get(page).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains("dashboard.js"), "{html}");

    let docs = url_after("API reference");
    assert!(docs.ends_with("/docs"), "{docs}");
    let res = client.get(&docs).send().await.unwrap();
    assert_eq!(res.status(), 200, "{docs}");
    assert!(res.text().await.unwrap().contains("swagger"), "{docs}");

    // The curl line, run as printed.
    let curl = printed.iter().find(|l| l.trim_start().starts_with("curl ")).unwrap();
    let words = shell_words(curl.trim());
    assert_eq!(words.len(), 4, "{words:?}");
    assert_eq!((words[0].as_str(), words[1].as_str()), ("curl", "-H"));
    let (name, value) = words[2].split_once(": ").unwrap();
    let res = client.get(&words[3]).header(name, value).send().await.unwrap();
    assert_eq!(res.status(), 200, "{curl}");
    let body: Value = res.json().await.unwrap();
    assert!(
        body["rows"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["failures"].as_u64() > Some(0))),
        "{curl} shows no demo data: {body}"
    );

    drop(lines);
    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&data_dir);
}
