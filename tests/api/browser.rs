//! End to end, as a person sees it: a real server with a simulated fleet, the report and the
//! dashboard loaded in headless Chromium, screenshots into tests/screenshots/. Fails when a chart is
//! missing, the page logs a console error or throws, or any request leaves the server's host.
//!
//! Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: NUL-separated
//! JSON on file descriptors 3 and 4), so no WebSocket or browser-automation crate is needed.
//! Skipped, with a message, when no Chromium is installed (set FAULTLINE_CHROMIUM to point at one).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use faultline::devtools::client::Client;
use faultline::devtools::simulate::{SimConfig, simulate};
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, spawn_app};

/// Every chart the report draws for a fleet with failures and GPU parts (recovery has no data on
/// this server).
const CHARTS: [&str; 13] = [
    "failure-mix",
    "mtbf",
    "root-causes",
    "hardware-components",
    "timeline",
    "recovery",
    "availability",
    "repair-pipeline",
    "worst-nodes",
    "fleet-health",
    "baselines",
    "part-survival",
    "part-afr",
];

fn find_chromium() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("FAULTLINE_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
        "/usr/bin/google-chrome-stable",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

fn screenshots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

unsafe extern "C" {
    fn dup2(old: i32, new: i32) -> i32;
    fn fcntl(fd: i32, cmd: i32, ...) -> i32;
}
const F_DUPFD: i32 = 0;

/// What the page did that the test judges: console errors, exceptions, requests.
#[derive(Default, Debug)]
struct Observed {
    errors: Vec<String>,
    requests: Vec<String>,
}

struct Browser {
    child: Child,
    to_browser: std::io::PipeWriter,
    from_browser: Receiver<Value>,
    next_id: u64,
    session: Option<String>,
    observed: Observed,
    _profile: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Browser {
    fn launch(binary: &Path) -> Browser {
        let profile =
            TempDir(std::env::temp_dir().join(format!("faultline-chromium-{}", uuid::Uuid::new_v4().simple())));
        std::fs::create_dir_all(&profile.0).unwrap();
        // fd 3: commands to the browser; fd 4: its answers and events.
        let (cmd_read, cmd_write) = std::io::pipe().unwrap();
        let (evt_read, evt_write) = std::io::pipe().unwrap();
        let (r, w) = (cmd_read.as_raw_fd(), evt_write.as_raw_fd());
        let mut command = Command::new(binary);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-pipe",
                "--window-size=1400,2400",
            ])
            .arg(format!("--user-data-dir={}", profile.0.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec. The pipe ends are first moved
        // above fd 10 so that placing them on 3 and 4 cannot overwrite one with the other.
        unsafe {
            command.pre_exec(move || {
                let (r2, w2) = (fcntl(r, F_DUPFD, 10), fcntl(w, F_DUPFD, 10));
                if r2 < 0 || w2 < 0 || dup2(r2, 3) < 0 || dup2(w2, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("start chromium");
        drop(cmd_read);
        drop(evt_write);
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(evt_read);
            let mut buf = Vec::new();
            while reader.read_until(0, &mut buf).is_ok_and(|n| n > 0) {
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                    && tx.send(v).is_err()
                {
                    break;
                }
                buf.clear();
            }
        });
        Browser {
            child,
            to_browser: cmd_write,
            from_browser: rx,
            next_id: 0,
            session: None,
            observed: Observed::default(),
            _profile: profile,
        }
    }

    /// Sends a command (to the attached page when there is one) and waits for its answer, recording
    /// the events that arrive meanwhile.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session
            && !method.starts_with("Target.")
        {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to_browser.write_all(&bytes).expect("write to chromium");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = self
                .next_message(deadline)
                .unwrap_or_else(|| panic!("chromium did not answer {method} in time"));
            if m["id"].as_u64() == Some(id) {
                if let Some(e) = m.get("error") {
                    panic!("{method} failed: {e}");
                }
                return m["result"].clone();
            }
        }
    }

    fn next_message(&mut self, deadline: Instant) -> Option<Value> {
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.from_browser.recv_timeout(wait) {
            Ok(m) => {
                self.observe(&m);
                Some(m)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => panic!("chromium exited"),
        }
    }

    fn observe(&mut self, m: &Value) {
        let p = &m["params"];
        match m["method"].as_str().unwrap_or_default() {
            "Runtime.consoleAPICalled" if matches!(p["type"].as_str(), Some("error" | "assert")) => {
                self.observed
                    .errors
                    .push(format!("console.{}: {}", p["type"], p["args"]));
            }
            "Runtime.exceptionThrown" => self
                .observed
                .errors
                .push(format!("exception: {}", p["exceptionDetails"])),
            "Log.entryAdded" if p["entry"]["level"] == "error" => {
                self.observed
                    .errors
                    .push(format!("log: {} {}", p["entry"]["text"], p["entry"]["url"]));
            }
            "Network.requestWillBeSent" => self
                .observed
                .requests
                .push(p["request"]["url"].as_str().unwrap_or_default().to_string()),
            _ => {}
        }
    }

    fn open_page(&mut self) {
        let target = self.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = self.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        self.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        for domain in ["Page.enable", "Runtime.enable", "Log.enable", "Network.enable"] {
            self.call(domain, json!({}));
        }
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1400, "height": 2400, "deviceScaleFactor": 1, "mobile": false}),
        );
    }

    /// Navigates and waits for the load event.
    fn navigate(&mut self, url: &str) {
        self.observed = Observed::default();
        self.call("Page.navigate", json!({"url": url}));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = self
                .next_message(deadline)
                .unwrap_or_else(|| panic!("{url} did not load in time"));
            if m["method"] == "Page.loadEventFired" {
                return;
            }
        }
    }

    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        r["result"]["value"].clone()
    }

    /// Polls `expression` until it is true (the dashboard fills in after its fetch).
    fn wait_for(&mut self, expression: &str, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if self.eval(expression) == json!(true) {
                return;
            }
            // Let events arrive while waiting.
            let _ = self.next_message(Instant::now() + Duration::from_millis(200));
        }
        panic!("timed out waiting for {what}; observed {:?}", self.observed);
    }

    /// A full-page PNG: the viewport is grown to the page's height first.
    fn screenshot(&mut self, path: &Path) {
        let height = self
            .eval("Math.ceil(document.documentElement.scrollHeight)")
            .as_f64()
            .unwrap_or(2400.0)
            .clamp(600.0, 16000.0);
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1400, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}));
        std::fs::write(path, base64_decode(shot["data"].as_str().unwrap())).unwrap();
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1400, "height": 2400, "deviceScaleFactor": 1, "mobile": false}),
        );
    }

    /// One PNG per chart (clipped to its box), named `<prefix>-<chart>.png`, for close reading.
    fn chart_screenshots(&mut self, dir: &Path, prefix: &str) {
        let height = self
            .eval("Math.ceil(document.documentElement.scrollHeight)")
            .as_f64()
            .unwrap_or(2400.0)
            .clamp(600.0, 16000.0);
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1400, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        let boxes = self.eval(
            "[...document.querySelectorAll('.figures, svg.chart')].map(s => { const r = s.getBoundingClientRect(); \
             return [s.dataset.chart || 'summary', r.left + scrollX, r.top + scrollY, r.width, r.height]; })",
        );
        for b in boxes.as_array().unwrap() {
            let clip = json!({"x": b[1], "y": b[2], "width": b[3], "height": b[4], "scale": 1});
            let shot = self.call("Page.captureScreenshot", json!({"format": "png", "clip": clip}));
            std::fs::write(
                dir.join(format!("{prefix}-{}.png", b[0].as_str().unwrap())),
                base64_decode(shot["data"].as_str().unwrap()),
            )
            .unwrap();
        }
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1400, "height": 2400, "deviceScaleFactor": 1, "mobile": false}),
        );
    }

    /// The charts on the page: (data-chart, drawn with data?).
    fn charts(&mut self, scope: &str) -> Vec<(String, bool)> {
        let v = self.eval(&format!(
            "[...document.querySelectorAll('{scope} svg.chart')].map(s => [s.dataset.chart, !s.classList.contains('nodata'), s.querySelector('title') ? s.querySelector('title').textContent : ''])"
        ));
        v.as_array()
            .unwrap()
            .iter()
            .map(|c| {
                assert!(
                    !c[2].as_str().unwrap_or_default().is_empty(),
                    "chart {} has no title",
                    c[0]
                );
                (c[0].as_str().unwrap().to_string(), c[1].as_bool().unwrap())
            })
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| *c != b'=' && !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            acc |= u32::from(value(*c)) << (18 - 6 * i);
        }
        out.extend_from_slice(&acc.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// Fails on console errors and on requests that leave `allowed` (prefixes).
fn assert_clean(observed: &Observed, allowed: &[&str], page: &str) {
    assert!(
        observed.errors.is_empty(),
        "{page}: console errors: {:#?}",
        observed.errors
    );
    let foreign: Vec<&String> = observed
        .requests
        .iter()
        .filter(|u| !allowed.iter().any(|a| u.starts_with(a)))
        .collect();
    assert!(foreign.is_empty(), "{page}: requests to other hosts: {foreign:#?}");
}

/// The first failure with a root node takes that node out for five hours, an hour after its first
/// signal (a drain recorded with the failure): the repair pipeline has an incident to draw.
async fn drain_after_a_failure(app: &crate::helpers::TestApp) {
    let (status, v) = app
        .get(
            ADMIN_TOKEN,
            "/v1/failures?from=2026-10-02T00:00:00Z&to=2026-10-20T00:00:00Z&limit=50",
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let f = v["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["root_node"].is_string())
        .unwrap_or_else(|| panic!("no failure with a root node: {v}"));
    let first: chrono::DateTime<chrono::Utc> = f["first_at"].as_str().unwrap().parse().unwrap();
    let path = format!(
        "/v1/nodes/{}/{}/state",
        f["cluster"].as_str().unwrap(),
        f["root_node"].as_str().unwrap()
    );
    for (state, at, failure) in [
        ("drained", first + chrono::Duration::hours(1), f["id"].clone()),
        ("returned", first + chrono::Duration::hours(6), Value::Null),
    ] {
        let res = app
            .client
            .post(app.url(&path))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"state": state, "at": at, "failure_id": failure}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    }
}

#[tokio::test]
async fn the_report_and_the_dashboard_render_every_chart_in_a_real_browser() {
    let Some(chromium) = find_chromium() else {
        eprintln!(
            "SKIPPED the_report_and_the_dashboard_render_every_chart_in_a_real_browser: no Chromium found (apt-get install -y chromium, or set FAULTLINE_CHROMIUM)"
        );
        return;
    };
    let app = spawn_app().await;
    let fleet = simulate(&SimConfig::default());
    let client = Client::new(&app.address, ADMIN_TOKEN).unwrap();
    client.put_nodes(&fleet.nodes, 1000).await.unwrap();
    client.post_events(&fleet.events, 5000, 1, false).await.unwrap();
    crate::report_parts::load_parts_history(&app, "train-a").await;
    drain_after_a_failure(&app).await;
    let reader = app.token("reader", None).await;

    // The simulated 28 days from 2026-10-01: the report as a file, opened offline.
    let res = app
        .client
        .get(app.url("/v1/reports/reliability?from=2026-10-01T00:00:00Z&to=2026-10-29T00:00:00Z"))
        .bearer_auth(&reader)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    let dir = screenshots_dir();
    let report_file = dir.join("report.html");
    std::fs::write(&report_file, &html).unwrap();
    let report_url = format!("file://{}", report_file.display());
    let dashboard_url = format!("{}/#token={reader}&from=2026-10-01&to=2026-10-28", app.address);
    let server = format!("{}/", app.address);

    // The browser blocks; keep it off the runtime's threads (the server runs on them).
    let dir2 = dir.clone();
    tokio::task::spawn_blocking(move || {
        let mut browser = Browser::launch(&chromium);
        browser.open_page();

        browser.navigate(&report_url);
        let charts = browser.charts("");
        let ids: Vec<&str> = charts.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(ids, CHARTS, "every chart, in order");
        for (id, drawn) in &charts {
            assert_eq!(*drawn, id != "recovery", "{id}: drawn with data unless it is the recovery section");
        }
        assert_eq!(browser.eval("document.querySelectorAll('[data-figure]').length"), json!(5), "five summary figures");
        browser.screenshot(&dir2.join("report.png"));
        browser.chart_screenshots(&dir2, "report");
        // The report is self-contained: nothing but the file itself (and data: URLs) is loaded.
        assert_clean(&browser.observed, &[&report_url, "data:"], "report");

        browser.navigate(&dashboard_url);
        browser.wait_for("document.querySelectorAll('#report svg.chart').length >= 8", "the dashboard's charts");
        let charts = browser.charts("#report");
        assert_eq!(charts.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), CHARTS);
        // The Parts panel, drawn from the parts analytics: a step line and a band per generation,
        // the numbers at risk (ampere 2 2 2 1 1, hopper 4 3 1 1 0 at 0..400 days) and the AFR table.
        browser.wait_for("document.querySelectorAll('#parts-panel svg.chart .step').length === 2", "the Parts panel");
        let panel = browser.charts("#parts-panel");
        assert_eq!(panel, [("parts-survival".to_string(), true)]);
        assert_eq!(browser.eval("document.querySelectorAll('#parts-panel .band').length"), json!(2));
        assert_eq!(
            browser.eval("[...document.querySelectorAll('#parts-panel .at-risk-count')].map(t => t.textContent).join(' ')"),
            json!("2 2 2 1 1 4 3 1 1 0")
        );
        assert_eq!(
            browser.eval("[...document.querySelectorAll('#parts-panel table')[0].querySelectorAll('tbody tr')].map(r => r.cells[4].textContent).join(' ')"),
            json!("0.61 1.33"),
            "AFR per part-year by model"
        );
        // The forecast's backtest: at 2025-04-01 the H100s P1 and P2 were in service and P1 failed
        // on 04-11; nothing had failed before (naive and afr 0), no Weibull to fit.
        assert_eq!(
            browser.eval("[...document.querySelectorAll('#parts-panel table')].find(t => t.caption.textContent === 'Forecast backtest by model') ? [...[...document.querySelectorAll('#parts-panel table')].find(t => t.caption.textContent === 'Forecast backtest by model').querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent).join('|')).filter(r => r.includes('H100') && r.includes('2025-04-01')).join(';') : ''"),
            json!("NVIDIA H100 80GB HBM3|2025-04-01|1|0.0|0.0|n/a"),
            "the forecast backtest by model"
        );
        assert_eq!(browser.eval("getComputedStyle(document.querySelector('#report section#parts')).display"), json!("none"), "shown once, in the panel");
        assert_eq!(browser.eval("localStorage.getItem('faultline.token') !== null && !location.hash.includes('token')"), json!(true), "token stored, not left in the address bar");
        assert_eq!(browser.eval("[...document.querySelectorAll('#cluster option')].map(o => o.value).join(',')"), json!(",train-a,train-b"));
        assert_eq!(browser.eval("!!document.querySelector('a[href=\"/docs/\"]') && !!document.querySelector('a[href=\"/openapi.json\"]')"), json!(true));
        browser.screenshot(&dir2.join("dashboard.png"));
        assert_clean(&browser.observed, &[&server, "data:"], "dashboard");
    })
    .await
    .unwrap();
    eprintln!("screenshots in {}", dir.display());
}
