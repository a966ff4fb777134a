//! The check: the site's answers through the API against the model. A difference is reported with
//! the seed, the first differing object (expected and found) and the scenario's steps that led to
//! it.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::model::{Expected, ExpectedFailure, ExpectedJob, ExpectedPlacement, ExpectedSignal, FOLD_WINDOW};
use super::scenario::{Action, CLUSTER, Scenario, minutes};
use super::site::{RECEIVER_TICKETS, RECEIVERS_HUNG, Received};
use crate::devtools::client::Client;

/// One difference between the model and the site.
#[derive(Debug, Clone)]
pub struct Difference {
    /// The object: `failure of soak-n03 at +1h02m00s`, `placements of soak-n05`, ...
    pub object: String,
    pub expected: String,
    pub found: String,
    /// The incident it belongs to, when one.
    pub incident: Option<usize>,
}

/// What the site answered, read through the API.
pub struct Found {
    pub failures: Vec<Value>,
    pub details: BTreeMap<String, Value>,
    pub placements: BTreeMap<String, Vec<Value>>,
    pub transitions: BTreeMap<String, Vec<Value>>,
    pub nodes: Vec<Value>,
    /// `GET /v1/gpus`: the cluster's parts.
    pub gpus: Vec<Value>,
    /// `GET /v1/alerts` of the silence rule: firing, then recently resolved.
    pub alerts: Vec<Value>,
    /// What Alertmanager holds (its `GET /api/v2/alerts`).
    pub alertmanager: Vec<Value>,
    /// What the ticket system's webhook accepted, in order of arrival.
    pub tickets: Vec<Received>,
    /// `GET /v1/alerts/{fingerprint}/deliveries` of each of the rule's alerts.
    pub deliveries: BTreeMap<String, Vec<Value>>,
    /// `GET /v1/analytics/failure-mix?by=gpu_generation` over the timeline.
    pub failure_mix: Value,
    /// `GET /v1/analytics/mtbf?group_size=8` over the timeline.
    pub mtbf: Value,
    /// `GET /v1/analytics/afr?by=model&event=hardware_failure` as of the timeline's end.
    pub afr: Value,
    /// `GET /v1/analytics/lemon-nodes?alpha=0.5` over the timeline.
    pub lemons: Value,
    /// The Slurm track's jobs (`GET /v1/jobs/{cluster}/{id}`; Null when not found), by id.
    pub jobs: BTreeMap<String, Value>,
}

/// The subjects of the silence rule's alerts Alertmanager holds as active.
pub fn held(alerts: &[Value]) -> BTreeSet<String> {
    alerts
        .iter()
        .filter(|a| a["labels"]["alertname"] == super::site::SILENCE_RULE && a["status"]["state"] == "active")
        .filter_map(|a| a["labels"]["subject"].as_str().map(str::to_string))
        .collect()
}

/// The silence rule's alerts, once the firing ones are the model's (the evaluation runs every
/// half second), or as they are after `limit`.
pub async fn settled_alerts(
    client: &Client,
    expected: &Expected,
    limit: std::time::Duration,
) -> anyhow::Result<Vec<Value>> {
    let started = std::time::Instant::now();
    loop {
        let a = get(
            client,
            &format!("/v1/alerts?cluster={CLUSTER}&rule_id={}", super::site::SILENCE_RULE),
        )
        .await?;
        let alerts = a
            .as_array()
            .cloned()
            .or_else(|| a["alerts"].as_array().cloned())
            .unwrap_or_default();
        if firing(&alerts) == expected.silent || started.elapsed() > limit {
            return Ok(alerts);
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

fn firing(alerts: &[Value]) -> BTreeSet<String> {
    alerts
        .iter()
        .filter(|a| a["state"] == "firing")
        .filter_map(|a| a["subject"].as_str().map(str::to_string))
        .collect()
}

/// A read of the runner's (retried through 429/503 and restarts).
async fn get(client: &Client, path: &str) -> anyhow::Result<Value> {
    Ok(client.send_json(reqwest::Method::GET, path, None).await?.0)
}

pub async fn read(
    client: &Client,
    sc: &Scenario,
    origin: DateTime<Utc>,
    alerts: Vec<Value>,
    alertmanager: Vec<Value>,
    tickets: Vec<Received>,
    job_ids: &[String],
) -> anyhow::Result<Found> {
    // Imported history reaches back a year.
    let from = (origin - chrono::Duration::days(400)).to_rfc3339();
    let to = (origin + chrono::Duration::microseconds(sc.end) + chrono::Duration::hours(2)).to_rfc3339();
    let enc = |s: &str| s.replace('+', "%2B").replace(':', "%3A");
    let parts_to = (origin + chrono::Duration::microseconds(sc.end) + chrono::Duration::minutes(30)).to_rfc3339();
    let mut failures = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!(
            "/v1/failures?cluster={CLUSTER}&from={}&to={}&limit=500",
            enc(&from),
            enc(&to)
        );
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={}", enc(c)));
        }
        let page = get(client, &path).await?;
        failures.extend(page["failures"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let mut details = BTreeMap::new();
    for f in &failures {
        let id = f["id"].as_str().unwrap_or_default().to_string();
        let d = get(client, &format!("/v1/failures/{id}")).await?;
        details.insert(id, d);
    }
    let mut placements = BTreeMap::new();
    let mut transitions = BTreeMap::new();
    for spec in &sc.site.nodes {
        let p = get(client, &format!("/v1/nodes/{CLUSTER}/{}/gpus", spec.name)).await?;
        placements.insert(
            spec.name.clone(),
            p["placements"].as_array().cloned().unwrap_or_default(),
        );
        let s = get(
            client,
            &format!(
                "/v1/nodes/{CLUSTER}/{}/state?from={}&to={}",
                spec.name,
                enc(&from),
                enc(&to)
            ),
        )
        .await?;
        transitions.insert(
            spec.name.clone(),
            s["transitions"].as_array().cloned().unwrap_or_default(),
        );
    }
    let n = get(client, &format!("/v1/nodes?cluster={CLUSTER}&limit=100")).await?;
    let g = get(
        client, // Installed time counted to a fixed instant (the round's start), so both instances'
        // answers compare.
        &format!("/v1/gpus?cluster={CLUSTER}&limit=1000&to={}", enc(&parts_to)),
    )
    .await?;
    // The figures over the timeline's window in signal time: partial days at both ends, whole
    // days (rollup rows) between when it spans them.
    let (wfrom, wto) = (
        enc(&origin.to_rfc3339()),
        enc(&(origin + chrono::Duration::microseconds(sc.end)).to_rfc3339()),
    );
    let failure_mix = get(
        client,
        &format!("/v1/analytics/failure-mix?by=gpu_generation&cluster={CLUSTER}&from={wfrom}&to={wto}"),
    )
    .await?;
    let mtbf = get(
        client,
        &format!(
            "/v1/analytics/mtbf?group_size={}&cluster={CLUSTER}&from={wfrom}&to={wto}",
            super::model::MTBF_GROUP_SIZE
        ),
    )
    .await?;
    let afr = get(
        client,
        &format!("/v1/analytics/afr?by=model&event=hardware_failure&cluster={CLUSTER}&to={wto}"),
    )
    .await?;
    // At the widest level the API allows, so that the list holds more than the rare true lemon.
    let lemons = get(
        client,
        &format!("/v1/analytics/lemon-nodes?alpha={LEMON_ALPHA}&cluster={CLUSTER}&from={wfrom}&to={wto}"),
    )
    .await?;
    let mut deliveries = BTreeMap::new();
    for a in &alerts {
        let fp = a["fingerprint"].as_str().unwrap_or_default().to_string();
        let d = get(client, &format!("/v1/alerts/{fp}/deliveries")).await?;
        deliveries.insert(fp, d.as_array().cloned().unwrap_or_default());
    }
    let mut jobs = BTreeMap::new();
    for id in job_ids {
        let answer = client
            .send_json(reqwest::Method::GET, &format!("/v1/jobs/{CLUSTER}/{id}"), None)
            .await
            .map(|(j, _)| j)
            .unwrap_or(Value::Null);
        jobs.insert(id.clone(), answer);
    }
    Ok(Found {
        jobs,
        alerts,
        alertmanager,
        tickets,
        deliveries,
        failure_mix,
        mtbf,
        afr,
        lemons,
        gpus: g["gpus"].as_array().cloned().unwrap_or_default(),
        failures,
        details,
        placements,
        transitions,
        nodes: n["nodes"].as_array().cloned().unwrap_or_default(),
    })
}

fn time(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// A signal as the model states it, from a failure's detail.
fn found_signal(s: &Value, origin: DateTime<Utc>) -> ExpectedSignal {
    let off = |t: Option<DateTime<Utc>>| t.map_or(i64::MIN, |t| (t - origin).num_microseconds().unwrap_or(i64::MIN));
    let first = off(time(&s["occurred_at"]));
    let last = if s["last_occurred_at"].is_null() {
        first
    } else {
        off(time(&s["last_occurred_at"]))
    };
    ExpectedSignal {
        node: s["node"].as_str().unwrap_or_default().to_string(),
        kind: s["kind"].as_str().unwrap_or_default().to_string(),
        code: s["code"].as_i64(),
        bus: s["attributes"]["pci_bus_id"]
            .as_str()
            .map(super::scenario::normalise_bus_lenient),
        repeats: s["repeat_count"].as_u64().unwrap_or(0),
        first,
        last,
    }
}

fn show_signals(s: &[ExpectedSignal]) -> String {
    s.iter()
        .map(|s| {
            format!(
                "{} {}{} {} x{} +{}..+{}",
                s.node,
                s.kind,
                s.code.map(|c| format!(" {c}")).unwrap_or_default(),
                s.bus.as_deref().unwrap_or("-"),
                s.repeats,
                minutes(s.first),
                minutes(s.last)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn show_failure(f: &ExpectedFailure) -> String {
    format!(
        "job {} root {} {} part {} {}/{} ({}), nodes {:?}, +{}..+{}, signals [{}]",
        f.job.as_deref().unwrap_or("-"),
        f.root_node,
        f.root_bus.as_deref().unwrap_or("-"),
        f.root_part.as_deref().unwrap_or("-"),
        f.category,
        f.component,
        f.generation,
        f.nodes,
        minutes(f.first),
        minutes(f.last),
        show_signals(&f.signals)
    )
}

fn show_job(j: &ExpectedJob) -> String {
    format!(
        "{} ({}), restarts {}, nodes {:?}, {} GPUs, +{}..{}, {} failure(s)",
        j.state,
        j.scheduler_state,
        j.restarts,
        j.nodes,
        j.gpus,
        minutes(j.start),
        j.end.map_or("(no end)".into(), |e| format!("+{}", minutes(e))),
        j.failures
    )
}

/// The failure as found, in the model's terms.
fn as_expected(f: &Value, detail: &Value, origin: DateTime<Utc>) -> ExpectedFailure {
    let off = |v: &Value| time(v).map_or(i64::MIN, |t| (t - origin).num_microseconds().unwrap_or(i64::MIN));
    let mut signals: Vec<ExpectedSignal> = detail["signals"]
        .as_array()
        .map(|a| a.iter().map(|s| found_signal(s, origin)).collect())
        .unwrap_or_default();
    signals.sort();
    ExpectedFailure {
        incident: None,
        job: f["job_id"].as_str().map(str::to_string),
        first: off(&f["first_at"]),
        last: off(&f["last_at"]),
        nodes: f["nodes"]
            .as_array()
            .map(|a| a.iter().filter_map(|n| n.as_str().map(str::to_string)).collect())
            .unwrap_or_default(),
        root_node: f["root_node"].as_str().unwrap_or_default().to_string(),
        root_bus: detail["root_gpu"]["pci_bus_id"]
            .as_str()
            .map(super::scenario::normalise_bus_lenient),
        root_part: detail["root_gpu"]["part"].as_str().map(str::to_string),
        category: f["root_cause"]["category"].as_str().unwrap_or_default().to_string(),
        component: f["root_cause"]["component"].as_str().unwrap_or_default().to_string(),
        severity: match f["root_cause"]["severity"].as_str() {
            Some("critical") => 4,
            Some("high") => 3,
            Some("medium") => 2,
            Some("low") => 1,
            _ => 0,
        },
        generation: f["gpu_generation"].as_str().unwrap_or_default().to_string(),
        signals,
    }
}

/// Every difference, the failures' first (in time order), then the parts', the nodes'.
pub fn compare(sc: &Scenario, expected: &Expected, found: &Found, origin: DateTime<Utc>) -> Vec<Difference> {
    let mut out = Vec::new();
    let actual: Vec<ExpectedFailure> = found
        .failures
        .iter()
        .map(|f| {
            let id = f["id"].as_str().unwrap_or_default();
            as_expected(f, found.details.get(id).unwrap_or(&Value::Null), origin)
        })
        .collect();
    let mut used = vec![false; actual.len()];
    for e in &expected.failures {
        let object = format!(
            "failure of {} at +{}",
            e.job.as_ref().map_or(e.root_node.clone(), |j| format!("job {j}")),
            minutes(e.first)
        );
        // The one of the same key nearest in time, within the fold window.
        let candidate = actual
            .iter()
            .enumerate()
            .filter(|(i, a)| {
                !used[*i]
                    && a.job == e.job
                    && (e.job.is_some() || a.root_node == e.root_node)
                    && (a.first - e.first).abs() <= FOLD_WINDOW
            })
            .min_by_key(|(_, a)| (a.first - e.first).abs());
        let Some((i, a)) = candidate else {
            out.push(Difference {
                object,
                expected: show_failure(e),
                found: "no such failure".into(),
                incident: e.incident,
            });
            continue;
        };
        used[i] = true;
        let same = a.first == e.first
            && a.last == e.last
            && a.nodes == e.nodes
            && a.root_node == e.root_node
            && a.root_bus == e.root_bus
            && a.root_part == e.root_part
            && a.category == e.category
            && a.component == e.component
            && a.generation == e.generation
            && a.signals == e.signals;
        if !same {
            out.push(Difference {
                object,
                expected: show_failure(e),
                found: show_failure(a),
                incident: e.incident,
            });
        }
    }
    for (_, a) in actual.iter().enumerate().filter(|(i, _)| !used[*i]) {
        out.push(Difference {
            object: format!(
                "failure of {} at +{}",
                a.job.as_ref().map_or(a.root_node.clone(), |j| format!("job {j}")),
                minutes(a.first)
            ),
            expected: "no such failure".into(),
            found: show_failure(a),
            incident: None,
        });
    }

    let off = |v: &Value| time(v).map(|t| (t - origin).num_microseconds().unwrap_or(i64::MIN));
    for (id, want) in &expected.jobs {
        let j = found.jobs.get(id).unwrap_or(&Value::Null);
        let got = (!j.is_null()).then(|| ExpectedJob {
            story: want.story.clone(),
            recorded: want.recorded.clone(),
            state: j["state"].as_str().unwrap_or_default().to_string(),
            scheduler_state: j["scheduler_state"].as_str().unwrap_or_default().to_string(),
            restarts: j["restarts"].as_i64().unwrap_or(-1),
            nodes: j["nodes"]
                .as_array()
                .map(|a| a.iter().filter_map(|n| n.as_str().map(str::to_string)).collect())
                .unwrap_or_default(),
            gpus: j["gpus"].as_i64().unwrap_or(-1),
            start: off(&j["start"]).unwrap_or(i64::MIN),
            end: off(&j["end"]),
            failures: j["failure_ids"].as_array().map_or(usize::MAX, Vec::len),
        });
        if got.as_ref() != Some(want) {
            out.push(Difference {
                object: format!("Slurm job {id} (GET /v1/jobs/{CLUSTER}/{id}): {}", want.story),
                expected: format!("{} (sacct recorded: {})", show_job(want), want.recorded),
                found: got.as_ref().map_or("no such job".into(), show_job),
                incident: None,
            });
        }
    }
    for (node, want) in &expected.placements {
        let mut got: Vec<ExpectedPlacement> = found
            .placements
            .get(node)
            .map(|ps| {
                ps.iter()
                    .map(|p| ExpectedPlacement {
                        part: p["part"].as_str().unwrap_or_default().to_string(),
                        uuid: p["uuid"].as_str().unwrap_or_default().to_string(),
                        index: p["gpu_index"].as_u64().unwrap_or(u64::MAX) as usize,
                        bus: p["pci_bus_id"]
                            .as_str()
                            .map(super::scenario::normalise_bus_lenient)
                            .unwrap_or_default(),
                        installed_at: off(&p["installed_at"]).unwrap_or(i64::MIN),
                        removed_at: off(&p["removed_at"]),
                        end_reason: p["end_reason"].as_str().map(str::to_string),
                    })
                    .collect()
            })
            .unwrap_or_default();
        got.sort();
        if &got != want {
            let show = |ps: &[ExpectedPlacement]| {
                ps.iter()
                    .map(|p| {
                        format!(
                            "{} (GPU {} {}) +{}..{}{}",
                            p.part,
                            p.index,
                            p.bus,
                            minutes(p.installed_at),
                            p.removed_at.map_or("open".into(), |t| format!("+{}", minutes(t))),
                            p.end_reason.as_ref().map(|r| format!(" {r}")).unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let incident = sc.steps.iter().find_map(|s| match &s.action {
                Action::Reboot {
                    node: n, swap: Some(_), ..
                } if &sc.site.nodes[*n].name == node => s.incident,
                _ => None,
            });
            out.push(Difference {
                object: format!("placements of {node}"),
                expected: show(want),
                found: show(&got),
                incident,
            });
        }
    }

    for spec in &sc.site.nodes {
        let want: Vec<(String, i64)> = expected
            .transitions
            .get(&spec.name)
            .map(|v| v.iter().map(|(s, t)| (s.to_string(), *t)).collect())
            .unwrap_or_default();
        let got: Vec<(String, i64)> = found
            .transitions
            .get(&spec.name)
            .map(|v| {
                v.iter()
                    .map(|t| {
                        (
                            t["state"].as_str().unwrap_or_default().to_string(),
                            off(&t["at"]).unwrap_or(i64::MIN),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        if want != got {
            let show = |v: &[(String, i64)]| {
                v.iter()
                    .map(|(s, t)| format!("{s} +{}", minutes(*t)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push(Difference {
                object: format!("drains of {}", spec.name),
                expected: show(&want),
                found: show(&got),
                incident: None,
            });
        }
    }

    let retired: BTreeSet<(String, Option<i64>)> = found
        .nodes
        .iter()
        .map(|n| {
            (
                n["hostname"].as_str().unwrap_or_default().to_string(),
                off(&n["retired_at"]),
            )
        })
        .collect();
    let want: BTreeSet<(String, Option<i64>)> = sc
        .site
        .nodes
        .iter()
        .map(|n| (n.name.clone(), expected.retired.get(&n.name).copied()))
        .collect();
    let got_parts: BTreeMap<String, super::model::ExpectedPart> = found
        .gpus
        .iter()
        .map(|g| {
            (
                g["part"].as_str().unwrap_or_default().to_string(),
                super::model::ExpectedPart {
                    state: g["state"].as_str().unwrap_or_default().to_string(),
                    node: g["node"].as_str().map(str::to_string),
                    index: g["gpu_index"].as_u64().map(|i| i as usize),
                    failures: g["failure_count"].as_u64().unwrap_or(u64::MAX) as usize,
                },
            )
        })
        .collect();
    let parts: BTreeSet<&String> = expected.parts.keys().chain(got_parts.keys()).collect();
    for part in parts {
        let (want, got) = (expected.parts.get(part), got_parts.get(part));
        if want != got {
            let incident = expected
                .failures
                .iter()
                .find(|f| f.root_part.as_ref() == Some(part))
                .and_then(|f| f.incident);
            out.push(Difference {
                object: format!("part {part} (GET /v1/gpus)"),
                expected: format!("{want:?}"),
                found: format!("{got:?}"),
                incident,
            });
        }
    }
    let got = firing(&found.alerts);
    if got != expected.silent {
        out.push(Difference {
            object: format!("nodes paged as silent (alert rule {})", super::site::SILENCE_RULE),
            expected: format!("{:?}", expected.silent),
            found: format!(
                "{got:?}; alerts: {}",
                found
                    .alerts
                    .iter()
                    .map(|a| format!("{} {}", a["subject"], a["state"]))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            incident: sc.incidents.iter().position(|i| i.kind == "retire"),
        });
    }
    let got = held(&found.alertmanager);
    if got != expected.silent {
        out.push(Difference {
            object: "the silence alerts Alertmanager holds".into(),
            expected: format!("{:?}", expected.silent),
            found: format!("{got:?}"),
            incident: None,
        });
    }
    if retired != want {
        out.push(Difference {
            object: "the inventory's nodes (hostname, retired_at)".into(),
            expected: format!("{want:?}"),
            found: format!("{retired:?}"),
            incident: None,
        });
    }
    out.extend(compare_notifications(sc, expected, found));
    out.extend(compare_figures(sc, expected, found));
    out
}

const LEMON_ALPHA: f64 = 0.5;

/// The API rounds figures to 6 decimals.
const FIGURE_TOLERANCE: f64 = 1e-6;

fn close(a: f64, b: Option<f64>) -> bool {
    b.is_some_and(|b| (a - b).abs() <= FIGURE_TOLERANCE)
}

/// The failure mix by generation and the MTBF groups against the model's, to the API's rounding.
fn compare_figures(sc: &Scenario, expected: &Expected, found: &Found) -> Vec<Difference> {
    let mut out = Vec::new();
    let (mix, groups) = super::model::figures(sc, expected, 0, sc.end);
    let rows = found.failure_mix["rows"].as_array().cloned().unwrap_or_default();
    for want in &mix {
        let row = rows.iter().find(|r| r["key"] == want.generation.as_str());
        let shares = |v: &Value| -> BTreeMap<String, u64> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| Some((s["name"].as_str()?.to_string(), s["failures"].as_u64()?)))
                .collect()
        };
        let rate = (want.gpu_days > 0.0).then(|| want.failures as f64 / want.gpu_days * 1000.0);
        let same = row.is_some_and(|r| {
            r["gpus_in_service"].as_u64() == Some(want.gpus_in_service)
                && r["failures"].as_u64() == Some(want.failures)
                && close(want.gpu_days, r["gpu_days"].as_f64())
                && rate.is_some_and(|x| close(x, r["failures_per_1000_gpu_days"].as_f64()))
                && shares(&r["by_category"]) == want.by_category
                && shares(&r["by_component"]) == want.by_component
        });
        if !same {
            out.push(Difference {
                object: format!("the failure mix of {} (GET /v1/analytics/failure-mix)", want.generation),
                expected: format!("{want:?}, {:.6} per 1,000 GPU-days", rate.unwrap_or_default()),
                found: row.map_or("no row".into(), |r| r.to_string()),
                incident: None,
            });
        }
    }
    let found_groups = found.mtbf["groups"].as_array().cloned().unwrap_or_default();
    for want in &groups {
        let g = found_groups.iter().find(|g| g["group"] == want.group.as_str());
        let mtbf = (want.failures > 0).then(|| want.exposure_hours / want.failures as f64);
        let per_week = (want.exposure_hours > 0.0).then(|| want.failures as f64 / want.exposure_hours * 168.0);
        let same = g.is_some_and(|g| {
            g["gpus"].as_u64() == Some(want.gpus)
                && g["nodes"].as_u64() == Some(want.nodes.len() as u64)
                && g["failures"].as_u64() == Some(want.failures)
                && close(want.exposure_hours, g["exposure_hours"].as_f64())
                && match mtbf {
                    Some(m) => close(m, g["mtbf_hours"].as_f64()),
                    None => g["mtbf_hours"].is_null(),
                }
                && per_week.is_some_and(|w| close(w, g["failures_per_week"].as_f64()))
        });
        if !same {
            out.push(Difference {
                object: format!("MTBF group {} (GET /v1/analytics/mtbf)", want.group),
                expected: format!("{want:?}, MTBF {mtbf:?} h, {per_week:?} a week"),
                found: g.map_or("no group".into(), |g| g.to_string()),
                incident: None,
            });
        }
    }
    let afr_groups = found.afr["groups"].as_array().cloned().unwrap_or_default();
    for want in super::model::afr_by_model(sc, expected, sc.end) {
        let g = afr_groups.iter().find(|g| g["group"] == want.model.as_str());
        let rate = want.failures as f64 / want.part_years;
        // Relative: the API counts each placement's installed time from millisecond timestamps.
        let near = |a: f64, b: Option<f64>| b.is_some_and(|b| (a - b).abs() <= 1e-6 * a.abs().max(1.0));
        let same = g.is_some_and(|g| {
            g["parts"].as_u64() == Some(want.parts)
                && g["failures"].as_u64() == Some(want.failures)
                && near(want.part_years, g["part_years"].as_f64())
                && near(rate, g["rate_per_year"].as_f64())
        });
        if !same {
            out.push(Difference {
                object: format!("the AFR of {} (GET /v1/analytics/afr?by=model)", want.model),
                expected: format!("{want:?}, {rate:.6} a part-year"),
                found: g.map_or("no group".into(), |g| g.to_string()),
                incident: None,
            });
        }
    }
    let want: Vec<super::model::LemonFigure> = super::model::lemons(sc, expected, 0, sc.end, LEMON_ALPHA);
    let got = found.lemons["lemons"].as_array().cloned().unwrap_or_default();
    // Probabilities unrounded: the incomplete gamma against the summed mass function.
    let prob = |a: f64, b: Option<f64>| b.is_some_and(|b| (a - b).abs() <= 1e-9 * a.abs().max(1e-6));
    let same = want.len() == got.len()
        && want.iter().zip(&got).all(|(w, g)| {
            g["hostname"] == w.hostname.as_str()
                && g["failures"].as_u64() == Some(w.failures)
                && close(w.expected_failures, g["expected_failures"].as_f64())
                && prob(w.tail_probability, g["tail_probability"].as_f64())
                && prob(w.adjusted_probability, g["adjusted_probability"].as_f64())
                && g["dominant_component"].as_str() == w.dominant_component.as_deref()
                && g["drained"].as_bool() == Some(w.drained)
        });
    if !same {
        out.push(Difference {
            object: format!("the lemon nodes at alpha {LEMON_ALPHA} (GET /v1/analytics/lemon-nodes)"),
            expected: format!("{want:?}"),
            found: Value::Array(got).to_string(),
            incident: None,
        });
    }
    if found_groups.len() != groups.len() || rows.len() != mix.len() {
        out.push(Difference {
            object: "the figures' groups".into(),
            expected: format!("{} generations, {} MTBF groups", mix.len(), groups.len()),
            found: format!("{} rows, {} groups", rows.len(), found_groups.len()),
            incident: None,
        });
    }
    out
}

/// Per node, the events the ticket system heard, in order of arrival, each once; and how many
/// requests repeated one already heard (the same alert, event and times).
pub fn heard(tickets: &[Received]) -> (BTreeMap<String, Vec<String>>, usize) {
    let mut seen = BTreeSet::new();
    let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut repeated = 0;
    for r in tickets {
        let b = &r.body;
        let key = (
            b["fingerprint"].to_string(),
            b["event"].to_string(),
            b["starts_at"].to_string(),
            b["ends_at"].to_string(),
        );
        if !seen.insert(key) {
            repeated += 1;
            continue;
        }
        let node = b["labels"]["node"].as_str().unwrap_or("(no node label)").to_string();
        by_node
            .entry(node)
            .or_default()
            .push(b["event"].as_str().unwrap_or_default().to_string());
    }
    (by_node, repeated)
}

/// How late a page may reach the ticket system after its alert started: an evaluation (0.5 s)
/// and a delivery poll (0.2 s) with room for a loaded machine; below what a receiver that holds
/// up the others costs (a send timeout, 1.5 s, per request to the hung bridge's two receivers or
/// to a frozen Alertmanager, and some are due every second).
pub const PAGE_LATENCY_SECS: f64 = 2.0;

/// Each page the ticket system heard (firing or resolved): its node, when its alert started or
/// resolved, how long after that it
/// arrived (seconds), and whether a disruption of the site's (a server killed, the ticket system
/// down) overlapped that time.
pub fn page_delays(
    tickets: &[Received],
    disruptions: &[(DateTime<Utc>, DateTime<Utc>, String)],
) -> Vec<(String, DateTime<Utc>, f64, bool)> {
    tickets
        .iter()
        .filter_map(|r| {
            // A page's moment: when its alert started firing, or resolved.
            let started = match r.body["event"].as_str()? {
                "firing" => time(&r.body["starts_at"])?,
                "resolved" => time(&r.body["ends_at"])?,
                _ => return None,
            };
            let late = (r.arrived - started).num_milliseconds() as f64 / 1000.0;
            let excused = disruptions
                .iter()
                .any(|(from, to, _)| *from <= r.arrived && started <= *to);
            let node = r.body["labels"]["node"].as_str().unwrap_or("?").to_string();
            Some((node, started, late, excused))
        })
        .collect()
}

/// Pages the ticket system heard later than [`PAGE_LATENCY_SECS`] after their alert started
/// with no server killed and the ticket system up meanwhile: another receiver held them up.
pub fn late_pages(tickets: &[Received], disruptions: &[(DateTime<Utc>, DateTime<Utc>, String)]) -> Vec<Difference> {
    page_delays(tickets, disruptions)
        .into_iter()
        .filter(|(_, _, late, excused)| *late > PAGE_LATENCY_SECS && !excused)
        .map(|(node, started, late, _)| Difference {
            object: format!("the page for {node} the ticket system heard"),
            expected: format!("within {PAGE_LATENCY_SECS} s of its alert's transition ({started})"),
            found: format!(
                "{late:.2} s after it, with no server killed and the ticket system up meanwhile (a receiver held up the others?)"
            ),
            incident: None,
        })
        .collect()
}

/// The silence rule's notifications: what the ticket system heard against the model, the
/// delivery records of the ticket system (each notification delivered once) and of the hung
/// bridge (never delivered, every attempt timed out).
fn compare_notifications(sc: &Scenario, expected: &Expected, found: &Found) -> Vec<Difference> {
    let mut out = Vec::new();
    let retire = sc.incidents.iter().position(|i| i.kind == "retire");
    let (got, repeated) = heard(&found.tickets);
    let nodes: BTreeSet<&String> = got.keys().chain(expected.notifications.keys()).collect();
    for node in nodes {
        let want: Vec<&str> = expected.notifications.get(node).cloned().unwrap_or_default();
        let have: Vec<&str> = got
            .get(node)
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default();
        if want != have {
            out.push(Difference {
                object: format!("the silence notifications of {node} the ticket system heard"),
                expected: format!("{want:?}"),
                found: format!("{have:?}"),
                incident: retire.filter(|&i| sc.incidents[i].summary.starts_with(&format!("{node} "))),
            });
        }
    }
    // A crash between a receiver's 2xx and its record sends again (at least once): only a round
    // that killed a server may hear a notification twice.
    let killed = sc.steps.iter().any(|s| matches!(s.action, Action::KillServer { .. }));
    if repeated > 0 && !killed {
        out.push(Difference {
            object: "notifications the ticket system heard twice".into(),
            expected: "none (no server was killed)".into(),
            found: format!("{repeated}"),
            incident: None,
        });
    }
    let mut delivered: BTreeMap<String, usize> = BTreeMap::new();
    let mut hung = Vec::new();
    for d in found.deliveries.values().flatten() {
        match d["receiver"].as_i64() {
            Some(RECEIVER_TICKETS) => {
                *delivered.entry(d["notification"].to_string()).or_default() +=
                    usize::from(d["outcome"] == "delivered");
            }
            Some(r)
                if RECEIVERS_HUNG.contains(&r)
                    && (d["outcome"] == "delivered"
                        || !d["error"].as_str().is_some_and(|e| e.starts_with("timed out after"))) =>
            {
                hung.push(format!("{} {}", d["outcome"], d["error"]));
            }
            _ => {}
        }
    }
    let sent: usize = expected.notifications.values().map(Vec::len).sum();
    let once = delivered.values().filter(|&&n| n == 1).count();
    if delivered.len() != sent || once != sent {
        out.push(Difference {
            object: "the ticket system's delivery records (GET /v1/alerts/{fingerprint}/deliveries)".into(),
            expected: format!("{sent} notifications, each delivered once"),
            found: format!(
                "{} notifications, delivered {:?} times",
                delivered.len(),
                delivered.values().collect::<Vec<_>>()
            ),
            incident: None,
        });
    }
    if !hung.is_empty() {
        out.push(Difference {
            object: "the hung bridge's delivery records".into(),
            expected: "attempts that time out, none delivered".into(),
            found: hung.join("; "),
            incident: None,
        });
    }
    out
}

/// Server instance 1's answers where they differ from instance 0's (both read after the site
/// went idle: one database, the same answers).
pub fn same_answers(zero: &Found, one: &Found) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut differ = |what: &str, a: String, b: String| {
        if a != b {
            out.push(Difference {
                object: format!("{what}, as server 1 answers it"),
                expected: format!("as server 0: {a}"),
                found: b,
                incident: None,
            });
        }
    };
    let show = |v: &dyn std::fmt::Debug| format!("{v:?}");
    differ("the failures", show(&zero.failures), show(&one.failures));
    differ("the failures' details", show(&zero.details), show(&one.details));
    differ("the placements", show(&zero.placements), show(&one.placements));
    differ("the drains", show(&zero.transitions), show(&one.transitions));
    differ("the nodes", show(&zero.nodes), show(&one.nodes));
    differ("the parts", show(&zero.gpus), show(&one.gpus));
    differ(
        "the failure mix",
        zero.failure_mix["rows"].to_string(),
        one.failure_mix["rows"].to_string(),
    );
    differ(
        "the MTBF groups",
        zero.mtbf["groups"].to_string(),
        one.mtbf["groups"].to_string(),
    );
    // The time of the last write differs by nothing a reader asks for.
    let jobs = |f: &Found| {
        let mut jobs = f.jobs.clone();
        for j in jobs.values_mut() {
            if let Some(o) = j.as_object_mut() {
                o.remove("updated_at");
            }
        }
        show(&jobs)
    };
    differ("the Slurm jobs", jobs(zero), jobs(one));
    out
}

/// The report of a round that found differences (or errors): the seed, the first differing
/// object, the scenario's steps that led to it, and a count of the rest.
pub fn report(
    sc: &Scenario,
    origin: DateTime<Utc>,
    differences: &[Difference],
    errors: &[String],
    faults: &[String],
) -> String {
    let mut r = String::new();
    r.push_str(&format!(
        "soak seed {}: {} difference(s), {} error(s); signal time starts at {} (+0h00m00s)\n",
        sc.site.seed,
        differences.len(),
        errors.len(),
        origin.to_rfc3339()
    ));
    for e in errors.iter().take(10) {
        r.push_str(&format!("  error: {e}\n"));
    }
    if let Some(d) = differences.first() {
        r.push_str(&format!(
            "first difference: {}\n  expected: {}\n  found:    {}\n",
            d.object, d.expected, d.found
        ));
        if let Some(i) = d.incident {
            r.push_str(&format!("  led to by {}\n", sc.describe(i)));
            for (k, s) in sc.steps.iter().enumerate().filter(|(_, s)| s.incident == Some(i)) {
                r.push_str(&format!("    step {k}: {}\n", step_line(sc, &s.action)));
            }
        }
        for d in &differences[1..differences.len().min(6)] {
            r.push_str(&format!(
                "then: {}\n  expected: {}\n  found:    {}\n",
                d.object, d.expected, d.found
            ));
        }
    }
    r.push_str("site:\n");
    for (n, spec) in sc.site.nodes.iter().enumerate() {
        r.push_str(&format!(
            "  {} {} x{} -> server {}\n",
            spec.name,
            sc.site.generation(n).name,
            sc.site.generation(n).gpus,
            spec.server
        ));
    }
    r.push_str("timeline:\n");
    for i in 0..sc.incidents.len() {
        r.push_str(&format!("  {}\n", sc.describe(i)));
    }
    for f in faults {
        r.push_str(&format!("  fault: {f}\n"));
    }
    r
}

fn step_line(sc: &Scenario, a: &Action) -> String {
    let name = |n: &usize| sc.site.nodes[*n].name.clone();
    match a {
        Action::Kernel { node, lines } => format!(
            "{} logs {} kernel line(s) +{}..+{}: {}",
            name(node),
            lines.len(),
            minutes(lines.first().map_or(0, |l| l.at)),
            minutes(lines.last().map_or(0, |l| l.at)),
            lines.first().map(|l| l.message.as_str()).unwrap_or_default()
        ),
        Action::Job(j) => format!(
            "job {} on {:?} +{}..{}",
            j.id,
            j.nodes.iter().map(name).collect::<Vec<_>>(),
            minutes(j.start),
            j.end.map_or("(running)".to_string(), |e| format!("+{}", minutes(e)))
        ),
        Action::Nccl { job, timeouts } => format!(
            "job {job}: NCCL timeouts on {:?}",
            timeouts
                .iter()
                .map(|t| format!("{} +{}", name(&t.node), minutes(t.at)))
                .collect::<Vec<_>>()
        ),
        Action::Drain { node, at, .. } => format!("{} drained at +{}", name(node), minutes(*at)),
        Action::Return { node, at } => format!("{} returned at +{}", name(node), minutes(*at)),
        Action::Reboot { node, down, up, swap } => format!(
            "{} down +{}, up +{}{}",
            name(node),
            minutes(*down),
            minutes(*up),
            swap.map(|s| format!(", board of GPU {s} replaced")).unwrap_or_default()
        ),
        Action::Retire { node, at } => format!("{} retired at +{}", name(node), minutes(*at)),
        Action::KillServer { server } => format!("server {server} SIGKILLed"),
        Action::KillAgent { node } => format!("agent of {} SIGKILLed", name(node)),
        Action::KillAlertmanager => "Alertmanager SIGKILLed".into(),
        Action::FreezeAlertmanager { seconds } => format!("Alertmanager frozen for {seconds:.1} s"),
        Action::TicketsDown => "the ticket system's webhook down (503)".into(),
        Action::TicketsUp => "the ticket system's webhook up again".into(),
        Action::Bmc { node, records } => format!(
            "{}'s BMC logs {} record(s) +{}: {}",
            name(node),
            records.len(),
            records.first().map_or(String::new(), |r| minutes(r.at)),
            records.first().map_or("", |r| r.text.as_str())
        ),
        Action::ImportHistory { events } => format!(
            "{} incidents of last year imported ({}..{})",
            events.len(),
            events.first().map_or(0, |e| e.at / super::scenario::SECOND / 86_400),
            events.last().map_or(0, |e| e.at / super::scenario::SECOND / 86_400)
        ),
        Action::EditCatalog { rule, component, .. } => {
            format!("the catalog edited: rule {rule} files its signals under {component}")
        }
        Action::RefuseNetwork { seconds } => format!("the nodes' network refuses connections for {seconds:.1} s"),
        Action::RestartPostgres { seconds } => format!("PostgreSQL crashed, started again {seconds:.1} s later"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::model::expected;
    use super::super::scenario::scenario;
    use super::*;

    /// The model's own answers as the API writes them.
    fn answers(e: &Expected, origin: DateTime<Utc>) -> Found {
        let at = |t: i64| (origin + chrono::Duration::microseconds(t)).to_rfc3339();
        let mut failures = Vec::new();
        let mut details = BTreeMap::new();
        for (i, f) in e.failures.iter().enumerate() {
            let id = format!("f{i}");
            failures.push(
                json!({"id": id, "job_id": f.job, "first_at": at(f.first), "last_at": at(f.last),
                "nodes": f.nodes, "root_node": f.root_node, "gpu_generation": f.generation,
                "root_cause": {"category": f.category, "component": f.component}}),
            );
            let signals: Vec<Value> = f
                .signals
                .iter()
                .map(|s| {
                    json!({"node": s.node, "kind": s.kind, "code": s.code, "attributes": {"pci_bus_id": s.bus},
                    "repeat_count": s.repeats, "occurred_at": at(s.first),
                    "last_occurred_at": if s.repeats > 1 { json!(at(s.last)) } else { Value::Null }})
                })
                .collect();
            details.insert(
                id,
                json!({"root_gpu": {"pci_bus_id": f.root_bus, "part": f.root_part}, "signals": signals}),
            );
        }
        Found {
            failures,
            details,
            placements: BTreeMap::new(),
            transitions: BTreeMap::new(),
            nodes: Vec::new(),
            gpus: Vec::new(),
            alerts: Vec::new(),
            alertmanager: Vec::new(),
            tickets: Vec::new(),
            deliveries: BTreeMap::new(),
            failure_mix: Value::Null,
            mtbf: Value::Null,
            afr: Value::Null,
            lemons: Value::Null,
            jobs: BTreeMap::new(),
        }
    }

    /// A failure blamed on another board is the first difference, reported with the seed and the
    /// steps of its incident.
    #[test]
    fn a_failure_blamed_on_another_board_is_reported_with_its_incident() {
        let sc = scenario(6, 1);
        let e = expected(&sc, None);
        let origin = DateTime::from_timestamp(1_796_400_000, 0).unwrap();
        let mut found = answers(&e, origin);
        let failures_only = |d: &[Difference]| -> Vec<String> {
            d.iter()
                .filter(|d| d.object.starts_with("failure"))
                .map(|d| d.object.clone())
                .collect()
        };
        assert!(failures_only(&compare(&sc, &e, &found, origin)).is_empty());

        let (i, f) = e
            .failures
            .iter()
            .enumerate()
            .find(|(_, f)| f.root_part.is_some())
            .unwrap();
        found.details.get_mut(&format!("f{i}")).unwrap()["root_gpu"]["part"] = json!("0000000000000");
        let d = compare(&sc, &e, &found, origin);
        assert_eq!(failures_only(&d).len(), 1, "{d:?}");
        let first = d.iter().find(|d| d.object.starts_with("failure")).unwrap();
        assert!(first.found.contains("part 0000000000000"), "{first:?}");
        assert_eq!(first.incident, f.incident);
        let r = report(&sc, origin, std::slice::from_ref(first), &[], &[]);
        assert!(r.starts_with("soak seed 6: 1 difference(s)"), "{r}");
        assert!(r.contains("led to by incident"), "{r}");
        assert!(r.contains("    step "), "{r}");
    }

    /// A requeued job answered without its first run is a difference naming the job and what the
    /// track did with it; the answer the model gives is none.
    #[test]
    fn a_requeued_job_without_its_first_run_is_reported() {
        use super::super::model::{SlurmRecord, SlurmRun};
        use super::super::scenario::SECOND;
        let sc = scenario(2, 0);
        let p = &sc.slurm;
        let name = |n: usize| sc.site.nodes[n].name.clone();
        let t0 = sc.end + 3600 * SECOND;
        let record = SlurmRecord {
            requeued: "5".into(),
            held: "6".into(),
            runs: vec![
                SlurmRun {
                    job: "5".into(),
                    state: "REQUEUED".into(),
                    nodes: name(p.requeued_first),
                    start: Some(t0),
                    end: Some(t0 + 2 * SECOND),
                },
                SlurmRun {
                    job: "5".into(),
                    state: "COMPLETED".into(),
                    nodes: name(p.requeued_second),
                    start: Some(t0 + 4 * SECOND),
                    end: Some(t0 + 10 * SECOND),
                },
                SlurmRun {
                    job: "6".into(),
                    state: "NODE_FAIL".into(),
                    nodes: name(p.held_node),
                    start: Some(t0),
                    end: Some(t0 + 5 * SECOND),
                },
            ],
            events: Vec::new(),
        };
        let e = expected(&sc, Some(&record));
        let origin = DateTime::from_timestamp(1_796_400_000, 0).unwrap();
        let at = |t: i64| (origin + chrono::Duration::microseconds(t)).to_rfc3339();
        let mut found = answers(&e, origin);
        for (id, j) in &e.jobs {
            found.jobs.insert(
                id.clone(),
                json!({"state": j.state, "scheduler_state": j.scheduler_state, "restarts": j.restarts,
                       "nodes": j.nodes, "gpus": j.gpus, "start": at(j.start), "end": j.end.map(at),
                       "failure_ids": vec!["x"; j.failures], "updated_at": "now"}),
            );
        }
        let jobs_only = |d: Vec<Difference>| -> Vec<Difference> {
            d.into_iter().filter(|d| d.object.starts_with("Slurm job")).collect()
        };
        assert!(jobs_only(compare(&sc, &e, &found, origin)).is_empty());
        let j = found.jobs.get_mut("5").unwrap();
        j["nodes"] = json!([name(p.requeued_second)]);
        j["restarts"] = json!(0);
        j["start"] = json!(at(t0 + 4 * SECOND));
        let d = jobs_only(compare(&sc, &e, &found, origin));
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].object.contains("requeued by an administrator"), "{:?}", d[0]);
        assert!(d[0].expected.contains("restarts 1"), "{:?}", d[0]);
        assert!(d[0].found.contains("restarts 0"), "{:?}", d[0]);
    }
}
