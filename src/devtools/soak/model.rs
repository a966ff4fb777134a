//! What the site should show, computed from the scenario's own events with the documented rules,
//! not through the server's code: docs/ingest.md (bursts: a signal's identity, 60 s gaps),
//! docs/analytics.md (failures: 10-minute fold window by job, else node; job attribution by the
//! job's nodes and run; the root-cause order) and docs/parts.md (placements, attribution of a
//! signal to the board in its slot at its time). The classification of the few signals the
//! scenario uses is NVIDIA's XID catalog as the rule catalog documents it (docs/analytics.md,
//! Classification). Pure.
//!
//! The Slurm track (docs/ingest/slurm.md): each job's answer from what the track did (a requeue
//! keeps every run: its nodes, its restarts, its first start; a job requeued after NODE_FAIL and
//! held is between runs), the times only the wall clock decides (when a run started, when a node
//! went down) taken from what Slurm recorded; a node event is a drain (and a return when it
//! ended) and its reason a signal, classified by the XID it names and linked to the job whose run
//! it ended.

use std::collections::{BTreeMap, BTreeSet};

use super::scenario::{Action, CLUSTER, Fact, MINUTE, NODES, SECOND, Scenario};

/// Signals of one identity closer than this are one stored signal (docs/ingest.md, Bursts).
pub const BURST_GAP: i64 = 60 * SECOND;
/// Signals of one job (or node) closer than this are one failure (docs/analytics.md, Failures).
pub const FOLD_WINDOW: i64 = 10 * MINUTE;

/// One stored signal: a burst of one identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExpectedSignal {
    pub node: String,
    pub kind: String,
    pub code: Option<i64>,
    /// The GPU's bus, normalised (`0000:04:00.0`), when the signal names one.
    pub bus: Option<String>,
    pub repeats: u64,
    pub first: i64,
    pub last: i64,
}

#[derive(Debug, Clone)]
pub struct ExpectedFailure {
    pub incident: Option<usize>,
    /// The job it folds under, else None (folded by node).
    pub job: Option<String>,
    pub first: i64,
    pub last: i64,
    pub nodes: BTreeSet<String>,
    pub root_node: String,
    pub root_bus: Option<String>,
    /// The part placed in the root signal's slot at its time.
    pub root_part: Option<String>,
    pub category: String,
    pub component: String,
    /// Of its root signal: critical 4, high 3, medium 2, low 1.
    pub severity: u8,
    pub generation: String,
    /// Its stored signals, in identity order.
    pub signals: Vec<ExpectedSignal>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExpectedPlacement {
    pub part: String,
    pub uuid: String,
    pub index: usize,
    pub bus: String,
    pub installed_at: i64,
    pub removed_at: Option<i64>,
    pub end_reason: Option<String>,
}

/// What the round's real Slurm recorded, times in microseconds after the origin.
#[derive(Debug, Clone, Default)]
pub struct SlurmRecord {
    /// The job ids of the track's requeued and held jobs.
    pub requeued: String,
    pub held: String,
    /// sacct's records of the two jobs (every run, and a pending record after them).
    pub runs: Vec<SlurmRun>,
    /// sacctmgr's node events.
    pub events: Vec<SlurmEvent>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmRun {
    pub job: String,
    pub state: String,
    /// sacct's NodeList (one node here; `None assigned` while pending).
    pub nodes: String,
    pub start: Option<i64>,
    pub end: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmEvent {
    pub node: String,
    pub start: i64,
    pub end: Option<i64>,
    pub state: String,
    pub reason: String,
}

/// A job's answer (`GET /v1/jobs/{cluster}/{id}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedJob {
    /// What the track did with it, and what sacct recorded of it, for a report.
    pub story: String,
    pub recorded: String,
    pub state: String,
    pub scheduler_state: String,
    pub restarts: i64,
    pub nodes: Vec<String>,
    pub gpus: i64,
    pub start: i64,
    pub end: Option<i64>,
    /// Failures folded under it.
    pub failures: usize,
}

#[derive(Debug, Clone, Default)]
pub struct Expected {
    pub failures: Vec<ExpectedFailure>,
    /// The Slurm track's jobs by id, when the round ran it.
    pub jobs: BTreeMap<String, ExpectedJob>,
    /// Per node name.
    pub placements: BTreeMap<String, Vec<ExpectedPlacement>>,
    /// Per node name: (state, at), in time order.
    pub transitions: BTreeMap<String, Vec<(&'static str, i64)>>,
    pub retired: BTreeMap<String, i64>,
    /// Per part: its state (`installed` while a placement is open, else `spare`), its node and
    /// slot while installed, and the failures resolved to it (docs/parts.md, Reads).
    pub parts: BTreeMap<String, ExpectedPart>,
    /// Nodes the silence rule pages for at the end (docs/alerts.md, Rules): in the inventory, not
    /// retired, seen at least once (a signal), and silent since (every signal is over half an
    /// hour old when the round ends).
    pub silent: BTreeSet<String>,
    /// Per node, the transitions of its silence alert a webhook receiver hears, in order
    /// (docs/alerts.md, Alerts and their state): `firing` once for every node seen, as soon as it
    /// sends (its signals are all old), and `resolved` once it is retired (the rule watches the
    /// active inventory; the site retires a node only once its alert fired). No repeat: the
    /// rule's repeat interval is longer than a round.
    pub notifications: BTreeMap<String, Vec<&'static str>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedPart {
    pub state: String,
    pub node: Option<String>,
    pub index: Option<usize>,
    pub failures: usize,
}

/// How the rule catalog classifies a signal (NVIDIA's XID catalog; an NCCL watchdog timeout is a
/// symptom, `unknown`, secondary).
struct Class {
    category: &'static str,
    component: &'static str,
    /// critical 4, high 3, medium 2, low 1.
    severity: u8,
    secondary: bool,
}

/// The XID a free text names (`Xid 79 on gpu 3`, `XID=48`): the catalog looks it up as such
/// (docs/analytics.md, Free text).
pub fn named_xid(text: &str) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find("xid")? + 3;
    let rest = lower[at..].trim_start_matches([' ', ':', '=']);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Slurm's own words for a node it lost are `node_unreachable`, any other reason a
/// `health_check` (docs/ingest/slurm.md, node events).
fn reason_kind(reason: &str) -> &'static str {
    let r = reason.to_ascii_lowercase();
    if r.starts_with("not responding") || r.contains("unexpectedly rebooted") {
        "node_unreachable"
    } else {
        "health_check"
    }
}

/// A signal's class; free text naming an XID is classified as that XID.
fn class_of(kind: &str, code: Option<i64>, named: Option<i64>) -> Class {
    match (kind, named) {
        ("health_check", Some(x)) => classify("xid", Some(x)),
        _ => classify(kind, code),
    }
}

fn classify(kind: &str, code: Option<i64>) -> Class {
    let c = |category, component, severity, secondary| Class {
        category,
        component,
        severity,
        secondary,
    };
    match (kind, code) {
        ("xid", Some(79)) => c("hardware", "gpu", 4, false),
        ("xid", Some(48)) => c("hardware", "gpu_memory", 4, false),
        ("xid", Some(63)) => c("hardware", "gpu_memory", 2, true),
        ("xid", Some(64)) => c("hardware", "gpu_memory", 4, false),
        ("xid", Some(74)) => c("hardware", "nvlink", 3, false),
        ("nccl_timeout", _) => c("unknown", "unknown", 3, true),
        // The BMC records the site logs are a power supply's lost input (the classifier's
        // lexicon: "ac lost", a fault of power, critical).
        ("bmc_event", _) => c("hardware", "power", 4, false),
        _ => c("unknown", "unknown", 1, false),
    }
}

fn category_rank(c: &str) -> u8 {
    match c {
        "hardware" => 0,
        "platform" => 1,
        "user" => 2,
        _ => 3,
    }
}

/// One occurrence, before bursts.
struct Occurrence {
    node: usize,
    kind: &'static str,
    code: Option<i64>,
    slot: Option<usize>,
    job: Option<String>,
    at: i64,
    incident: Option<usize>,
    /// The XID its text names.
    named: Option<i64>,
}

/// The model's answers; `slurm`: what the round's Slurm track recorded, when it ran.
pub fn expected(sc: &Scenario, slurm: Option<&SlurmRecord>) -> Expected {
    let site = &sc.site;
    let mut out = Expected::default();
    let mut occurrences = Vec::new();
    let mut jobs = Vec::new();
    // The board versions of each slot over time: (from, version).
    let mut versions: Vec<Vec<Vec<(i64, usize)>>> = (0..NODES)
        .map(|n| vec![vec![(sc.first_boot, 0)]; site.generation(n).gpus])
        .collect();
    // A catalog edit applies to every failure once the rebuild is done, earlier ones included.
    let edits: BTreeMap<i64, &'static str> = sc
        .steps
        .iter()
        .filter_map(|s| match s.action {
            Action::EditCatalog { code, component, .. } => Some((code, component)),
            _ => None,
        })
        .collect();
    for step in &sc.steps {
        match &step.action {
            Action::Kernel { node, lines } => {
                for l in lines {
                    if let Fact::Xid { code, slot } = l.fact {
                        occurrences.push(Occurrence {
                            node: *node,
                            kind: "xid",
                            code: Some(code),
                            slot: Some(slot),
                            job: None,
                            at: l.at,
                            incident: step.incident,
                            named: None,
                        });
                    }
                }
            }
            Action::ImportHistory { events } => {
                for e in events {
                    occurrences.push(Occurrence {
                        node: e.node,
                        kind: "xid",
                        code: Some(e.code),
                        slot: None,
                        job: None,
                        at: e.at,
                        incident: step.incident,
                        named: None,
                    });
                }
            }
            Action::Bmc { node, records } => {
                for r in records {
                    occurrences.push(Occurrence {
                        node: *node,
                        kind: "bmc_event",
                        code: None,
                        slot: None,
                        job: None,
                        at: r.at,
                        incident: step.incident,
                        named: None,
                    });
                }
            }
            // A job sent again replaces its record.
            Action::Job(j) => {
                jobs.retain(|k: &super::scenario::Job| k.id != j.id);
                jobs.push(j.clone());
            }
            Action::Nccl { job, timeouts } => {
                for t in timeouts {
                    occurrences.push(Occurrence {
                        node: t.node,
                        kind: "nccl_timeout",
                        code: None,
                        slot: None,
                        job: Some(job.clone()),
                        at: t.at,
                        incident: step.incident,
                        named: None,
                    });
                }
            }
            Action::Drain { node, at, .. } => out
                .transitions
                .entry(site.nodes[*node].name.clone())
                .or_default()
                .push(("drained", *at)),
            Action::Return { node, at } => out
                .transitions
                .entry(site.nodes[*node].name.clone())
                .or_default()
                .push(("returned", *at)),
            Action::Reboot {
                node,
                up,
                swap: Some(slot),
                ..
            } => {
                let v = versions[*node][*slot].last().map_or(0, |x| x.1) + 1;
                versions[*node][*slot].push((*up, v));
            }
            Action::Retire { node, at } => {
                out.retired.insert(site.nodes[*node].name.clone(), *at);
            }
            Action::Reboot { swap: None, .. }
            | Action::KillServer { .. }
            | Action::KillAgent { .. }
            | Action::KillAlertmanager
            | Action::FreezeAlertmanager { .. }
            | Action::TicketsDown
            | Action::TicketsUp
            | Action::RestartPostgres { .. }
            | Action::RefuseNetwork { .. }
            | Action::EditCatalog { .. } => {}
        }
    }
    // The nodes that sent in signal time (the Slurm track's node events come in the round's last
    // minutes).
    let seen: BTreeSet<String> = occurrences.iter().map(|o| site.nodes[o.node].name.clone()).collect();
    if let Some(record) = slurm {
        slurm_track(sc, record, &mut out, &mut jobs, &mut occurrences);
    }
    for v in out.transitions.values_mut() {
        v.sort_by_key(|x| x.1);
    }

    // Placements: each version of a slot from when it was installed until the next.
    for (n, slots) in versions.iter().enumerate() {
        let name = site.nodes[n].name.clone();
        let buses = site.slots(n);
        let list = out.placements.entry(name).or_default();
        for (s, vs) in slots.iter().enumerate() {
            for (k, &(from, v)) in vs.iter().enumerate() {
                let b = site.board(n, s, v);
                let next = vs.get(k + 1).map(|x| x.0);
                list.push(ExpectedPlacement {
                    part: b.serial,
                    uuid: b.uuid,
                    index: s,
                    bus: buses[s].bus.clone(),
                    installed_at: from,
                    removed_at: next,
                    end_reason: next.map(|_| "absent".to_string()),
                });
            }
        }
        list.sort();
    }
    let board_at = |n: usize, s: usize, t: i64| -> String {
        let v = versions[n][s].iter().rfind(|(from, _)| *from <= t).map_or(0, |x| x.1);
        site.board(n, s, v).serial
    };

    // Job attribution: a node signal without a job folds under the job that ran on the node then
    // (the latest started, then the smallest id).
    for o in occurrences.iter_mut().filter(|o| o.job.is_none()) {
        o.job = jobs
            .iter()
            .filter(|j| j.nodes.contains(&o.node) && j.start <= o.at && j.end.is_none_or(|end| o.at <= end))
            .max_by(|a, b| a.start.cmp(&b.start).then(b.id.cmp(&a.id)))
            .map(|j| j.id.clone());
    }

    // Bursts: one identity (node, job, kind, code, GPU), gaps of at most 60 s.
    type Identity = (usize, Option<String>, &'static str, Option<i64>, Option<usize>);
    let mut by_identity: BTreeMap<Identity, Vec<&Occurrence>> = BTreeMap::new();
    for o in &occurrences {
        by_identity
            .entry((o.node, o.job.clone(), o.kind, o.code, o.slot))
            .or_default()
            .push(o);
    }
    struct Row {
        sig: ExpectedSignal,
        node: usize,
        slot: Option<usize>,
        job: Option<String>,
        incident: Option<usize>,
        named: Option<i64>,
    }
    let mut rows: Vec<Row> = Vec::new();
    for ((node, job, kind, code, slot), mut os) in by_identity {
        os.sort_by_key(|o| o.at);
        let mut current: Option<Row> = None;
        for o in os {
            match current.as_mut() {
                Some(r) if o.at - r.sig.last <= BURST_GAP => {
                    r.sig.repeats += 1;
                    r.sig.last = o.at;
                }
                _ => {
                    rows.extend(current.take());
                    current = Some(Row {
                        sig: ExpectedSignal {
                            node: site.nodes[node].name.clone(),
                            kind: kind.to_string(),
                            code,
                            bus: slot.map(|s| site.slots(node)[s].bus.clone()),
                            repeats: 1,
                            first: o.at,
                            last: o.at,
                        },
                        node,
                        slot,
                        job: job.clone(),
                        incident: o.incident,
                        named: o.named,
                    });
                }
            }
        }
        rows.extend(current);
    }

    // Failures: by job, else by node; a gap over the fold window starts another.
    let mut by_key: BTreeMap<(Option<String>, Option<usize>), Vec<Row>> = BTreeMap::new();
    for r in rows {
        let key = match &r.job {
            Some(j) => (Some(j.clone()), None),
            None => (None, Some(r.node)),
        };
        by_key.entry(key).or_default().push(r);
    }
    for ((job, _), mut rs) in by_key {
        rs.sort_by_key(|r| r.sig.first);
        let mut groups: Vec<Vec<Row>> = Vec::new();
        for r in rs {
            match groups.last_mut() {
                Some(g) if r.sig.first - g.iter().map(|x| x.sig.last).max().unwrap_or(i64::MIN) <= FOLD_WINDOW => {
                    g.push(r)
                }
                _ => groups.push(vec![r]),
            }
        }
        for g in groups {
            let root = g
                .iter()
                .min_by_key(|r| {
                    let c = class_of(&r.sig.kind, r.sig.code, r.named);
                    (
                        c.secondary,
                        category_rank(c.category),
                        r.sig.kind == "nccl_timeout",
                        std::cmp::Reverse(c.severity),
                        r.sig.first,
                    )
                })
                .expect("a group has a signal");
            let class = class_of(&root.sig.kind, root.sig.code, root.named);
            let mut signals: Vec<ExpectedSignal> = g.iter().map(|r| r.sig.clone()).collect();
            signals.sort();
            out.failures.push(ExpectedFailure {
                incident: root.incident,
                job: job.clone(),
                first: g.iter().map(|r| r.sig.first).min().unwrap_or_default(),
                last: g.iter().map(|r| r.sig.last).max().unwrap_or_default(),
                nodes: g.iter().map(|r| r.sig.node.clone()).collect(),
                root_node: root.sig.node.clone(),
                root_bus: root.sig.bus.clone(),
                root_part: root.slot.map(|s| board_at(root.node, s, root.sig.first)),
                category: class.category.to_string(),
                // A text naming an XID is looked up as that XID, edited or not.
                component: match (root.sig.kind.as_str(), root.sig.code, root.named) {
                    ("xid", Some(code), _) | ("health_check", _, Some(code)) => {
                        edits.get(&code).copied().unwrap_or(class.component)
                    }
                    _ => class.component,
                }
                .to_string(),
                severity: class.severity,
                generation: site.generation(root.node).name.to_string(),
                signals,
            });
        }
    }
    out.failures.sort_by_key(|f| (f.first, f.root_node.clone()));
    for (node, ps) in &out.placements {
        for p in ps {
            let open = p.removed_at.is_none();
            let e = out.parts.entry(p.part.clone()).or_insert(ExpectedPart {
                state: "spare".into(),
                node: None,
                index: None,
                failures: 0,
            });
            if open {
                e.state = "installed".into();
                e.node = Some(node.clone());
                e.index = Some(p.index);
            }
        }
    }
    // A node event of the Slurm track is a signal of the round's last minutes: its node is heard
    // from. The site downs it once its silence alert fired, which then resolves.
    let heard: BTreeSet<&String> = slurm.iter().flat_map(|r| r.events.iter().map(|e| &e.node)).collect();
    out.silent = seen
        .iter()
        .filter(|n| !out.retired.contains_key(*n) && !heard.contains(n))
        .cloned()
        .collect();
    out.notifications = seen
        .iter()
        .map(|n| {
            let events = if out.retired.contains_key(n) || heard.contains(n) {
                vec!["firing", "resolved"]
            } else {
                vec!["firing"]
            };
            (n.clone(), events)
        })
        .collect();
    for (id, j) in out.jobs.iter_mut() {
        j.failures = out.failures.iter().filter(|f| f.job.as_ref() == Some(id)).count();
    }
    for f in &out.failures {
        if let Some(p) = f.root_part.as_ref().and_then(|p| out.parts.get_mut(p)) {
            p.failures += 1;
        }
    }
    out
}

/// The Slurm track's jobs, drains and signals (see the module's comment).
fn slurm_track(
    sc: &Scenario,
    record: &SlurmRecord,
    out: &mut Expected,
    jobs: &mut Vec<super::scenario::Job>,
    occurrences: &mut Vec<Occurrence>,
) {
    let plan = &sc.slurm;
    let name = |n: usize| sc.site.nodes[n].name.clone();
    // When the wall clock decided: the first run's start, the last run's end, as Slurm recorded.
    let started = |id: &str| record.runs.iter().filter(|r| r.job == id).filter_map(|r| r.start).min();
    let last_end = |id: &str| {
        record
            .runs
            .iter()
            .filter(|r| r.job == id && r.start.is_some())
            .max_by_key(|r| r.start)
            .and_then(|r| r.end)
    };
    let recorded = |id: &str| {
        record
            .runs
            .iter()
            .filter(|r| r.job == id)
            .map(|r| {
                let at = |t: Option<i64>| t.map_or("Unknown".into(), |t| format!("+{}", super::scenario::minutes(t)));
                format!("{} {} {}..{}", r.state, r.nodes, at(r.start), at(r.end))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let requeued = ExpectedJob {
        recorded: recorded(&record.requeued),
        story: format!(
            "requeued by an administrator while it ran on {}, ran again on {} to its end",
            name(plan.requeued_first),
            name(plan.requeued_second)
        ),
        state: "completed".into(),
        scheduler_state: "COMPLETED".into(),
        restarts: 1,
        nodes: vec![name(plan.requeued_first), name(plan.requeued_second)],
        gpus: 1,
        start: started(&record.requeued).unwrap_or(i64::MIN),
        end: last_end(&record.requeued),
        failures: 0,
    };
    let held = ExpectedJob {
        recorded: recorded(&record.held),
        story: format!(
            "--requeue, on {} when it was set DOWN ({}): NODE_FAIL, requeued, held pending",
            name(plan.held_node),
            plan.down_reason
        ),
        state: "running".into(),
        scheduler_state: "PENDING".into(),
        restarts: 1,
        nodes: vec![name(plan.held_node)],
        gpus: sc.site.generation(plan.held_node).gpus as i64,
        start: started(&record.held).unwrap_or(i64::MIN),
        end: None,
        failures: 0,
    };
    for (id, j) in [(&record.requeued, &requeued), (&record.held, &held)] {
        let node_index = |n: &String| sc.site.nodes.iter().position(|s| &s.name == n);
        jobs.push(super::scenario::Job {
            id: id.clone(),
            nodes: j.nodes.iter().filter_map(node_index).collect(),
            start: j.start,
            end: j.end,
        });
    }
    out.jobs.insert(record.requeued.clone(), requeued);
    out.jobs.insert(record.held.clone(), held);

    for e in &record.events {
        let Some(node) = sc.site.nodes.iter().position(|s| s.name == e.node) else {
            continue;
        };
        let t = out.transitions.entry(e.node.clone()).or_default();
        t.push(("drained", e.start));
        if let Some(end) = e.end {
            t.push(("returned", end));
        }
        if e.reason.trim().is_empty() {
            continue;
        }
        // The held job's node going down ended its run.
        let ended = node == plan.held_node && e.state.to_ascii_uppercase().contains("DOWN");
        occurrences.push(Occurrence {
            node,
            kind: reason_kind(&e.reason),
            code: None,
            slot: None,
            job: ended.then(|| record.held.clone()),
            at: e.start,
            incident: None,
            named: named_xid(&e.reason),
        });
    }
}

/// The MTBF groups' size the check asks for: the site's 8 nodes (2 or 4 GPUs each) make several.
pub const MTBF_GROUP_SIZE: u64 = 8;

/// One generation's row of the failure mix (docs/analytics.md, Definitions and Headline figures).
#[derive(Debug, Clone, PartialEq)]
pub struct MixFigure {
    pub generation: String,
    /// GPUs of the nodes in service at some time in the window.
    pub gpus_in_service: u64,
    /// Σ nodes GPUs × days in service inside the window.
    pub gpu_days: f64,
    /// Failures whose first signal is in the window, by their root node's generation.
    pub failures: u64,
    pub by_category: BTreeMap<String, u64>,
    /// By `category/component`.
    pub by_component: BTreeMap<String, u64>,
}

/// One MTBF group (docs/analytics.md, Definitions): unlabelled nodes packed greedily in natural
/// hostname order into groups of at most [`MTBF_GROUP_SIZE`] GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupFigure {
    pub group: String,
    pub nodes: Vec<String>,
    pub gpus: u64,
    /// Σ GPUs × hours in service inside the window / GPUs of the group.
    pub exposure_hours: f64,
    /// Failures whose root node is in the group.
    pub failures: u64,
}

/// Node `n`'s hours in service inside [`from`, `to`): from the first boot until its retirement,
/// counted in whole milliseconds (docs/analytics.md, Exposure).
fn service_hours(sc: &Scenario, e: &Expected, n: usize, from: i64, to: i64) -> f64 {
    let end = e.retired.get(&sc.site.nodes[n].name).copied().unwrap_or(to).min(to);
    let ms = (end - from.max(sc.first_boot)).max(0) / 1000;
    ms as f64 / 3_600_000.0
}

/// P(X >= k) for X ~ Poisson(mu): 1 - P(X < k), the mass function summed term by term.
pub fn poisson_tail(k: u64, mu: f64) -> f64 {
    let mut term = (-mu).exp();
    let mut below = 0.0;
    for j in 0..k {
        below += term;
        term *= mu / (j + 1) as f64;
    }
    (1.0 - below).max(0.0)
}

/// A node the lemon test lists at level `alpha` (docs/decisions.md, Lemon nodes).
#[derive(Debug, Clone, PartialEq)]
pub struct LemonFigure {
    pub hostname: String,
    pub failures: u64,
    pub expected_failures: f64,
    pub tail_probability: f64,
    pub adjusted_probability: f64,
    pub dominant_component: Option<String>,
    pub drained: bool,
}

/// The nodes whose hardware failures in [`from`, `to`) are improbably many at level `alpha`:
/// each node's Poisson upper tail at the fleet's rate over its GPU-hours (summed from the
/// probability mass function here), adjusted by Holm's step-down method.
pub fn lemons(sc: &Scenario, e: &Expected, from: i64, to: i64, alpha: f64) -> Vec<LemonFigure> {
    let site = &sc.site;
    let gpu_hours: Vec<f64> = (0..NODES)
        .map(|n| site.generation(n).gpus as f64 * service_hours(sc, e, n, from, to))
        .collect();
    let counted: Vec<&ExpectedFailure> = e
        .failures
        .iter()
        .filter(|f| f.first >= from && f.first < to && f.category == "hardware")
        .collect();
    let tested: Vec<usize> = (0..NODES).filter(|&n| gpu_hours[n] > 0.0).collect();
    let total: f64 = tested.iter().map(|&n| gpu_hours[n]).sum();
    let k = |n: usize| counted.iter().filter(|f| f.root_node == site.nodes[n].name).count() as u64;
    let rate = counted.len() as f64 / total;
    let tails: Vec<f64> = tested
        .iter()
        .map(|&n| poisson_tail(k(n), rate * gpu_hours[n]))
        .collect();
    // Holm: sorted ascending, the j-th of m (from 1) becomes the running max of (m - j + 1) p.
    let mut order: Vec<usize> = (0..tested.len()).collect();
    order.sort_by(|&a, &b| tails[a].total_cmp(&tails[b]).then(a.cmp(&b)));
    let mut adjusted = vec![1.0; tested.len()];
    let mut running: f64 = 0.0;
    for (j, &i) in order.iter().enumerate() {
        running = running.max(((tested.len() - j) as f64 * tails[i]).min(1.0));
        adjusted[i] = running;
    }
    let mut out: Vec<LemonFigure> = tested
        .iter()
        .enumerate()
        .filter(|&(i, &n)| adjusted[i] <= alpha && k(n) > 0)
        .map(|(i, &n)| {
            let name = &site.nodes[n].name;
            let mut components: BTreeMap<&str, u64> = BTreeMap::new();
            for f in counted.iter().filter(|f| &f.root_node == name) {
                *components.entry(f.component.as_str()).or_default() += 1;
            }
            // Most failures; on a tie the first name.
            let dominant = components
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                .map(|(c, _)| c.to_string());
            let drained = e
                .transitions
                .get(name)
                .and_then(|t| t.iter().rfind(|(_, at)| *at < to))
                .is_some_and(|(state, _)| *state == "drained");
            LemonFigure {
                hostname: name.clone(),
                failures: k(n),
                expected_failures: rate * gpu_hours[n],
                tail_probability: tails[i],
                adjusted_probability: adjusted[i],
                dominant_component: dominant,
                drained,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        a.tail_probability
            .total_cmp(&b.tail_probability)
            .then(a.hostname.cmp(&b.hostname))
    });
    out
}

/// One GPU model's annualised failure rate (docs/parts.md, Annualised failure rate) as of `to`:
/// every hard failure resolved to a part of the model (hardware, critical or high, none of the
/// XIDs used is transient) over the parts' installed time.
#[derive(Debug, Clone, PartialEq)]
pub struct AfrFigure {
    pub model: String,
    pub parts: u64,
    pub failures: u64,
    /// Installed part-days / 365.25, each placement's time in whole milliseconds.
    pub part_years: f64,
}

pub fn afr_by_model(sc: &Scenario, e: &Expected, to: i64) -> Vec<AfrFigure> {
    let mut out: BTreeMap<String, AfrFigure> = BTreeMap::new();
    let mut parts: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // Each part's model: what the report names for its slot.
    let mut model_of: BTreeMap<String, String> = BTreeMap::new();
    for (node, ps) in &e.placements {
        let n = sc
            .site
            .nodes
            .iter()
            .position(|s| &s.name == node)
            .expect("a node of the site");
        for p in ps.iter().filter(|p| p.installed_at < to) {
            let model = sc.site.slot_model(n, p.index);
            let row = out.entry(model.clone()).or_insert_with(|| AfrFigure {
                model: model.clone(),
                parts: 0,
                failures: 0,
                part_years: 0.0,
            });
            let end = p.removed_at.unwrap_or(to).min(to);
            let ms = (end - p.installed_at).max(0) / 1000;
            row.part_years += ms as f64 / 86_400_000.0 / 365.25;
            parts.entry(model.clone()).or_default().insert(p.part.clone());
            model_of.insert(p.part.clone(), model);
        }
    }
    for f in e.failures.iter().filter(|f| f.first <= to) {
        let hard = f.category == "hardware" && f.severity >= 3;
        if let Some(row) = f
            .root_part
            .as_ref()
            .filter(|_| hard)
            .and_then(|p| model_of.get(p))
            .and_then(|m| out.get_mut(m))
        {
            row.failures += 1;
        }
    }
    for (model, row) in out.iter_mut() {
        row.parts = parts.get(model).map_or(0, |p| p.len() as u64);
    }
    out.into_values().collect()
}

/// The failure mix by generation and the MTBF groups over the window [`from`, `to`) of signal
/// time: every node in service from the first boot until its retirement.
pub fn figures(sc: &Scenario, e: &Expected, from: i64, to: i64) -> (Vec<MixFigure>, Vec<GroupFigure>) {
    let site = &sc.site;
    // Each node's service in whole milliseconds (docs/analytics.md, Exposure).
    let hours = |n: usize| service_hours(sc, e, n, from, to);
    let in_window: Vec<&ExpectedFailure> = e.failures.iter().filter(|f| f.first >= from && f.first < to).collect();
    let mut mix: BTreeMap<String, MixFigure> = BTreeMap::new();
    for n in 0..NODES {
        let g = site.generation(n);
        let row = mix.entry(g.name.to_string()).or_insert_with(|| MixFigure {
            generation: g.name.to_string(),
            gpus_in_service: 0,
            gpu_days: 0.0,
            failures: 0,
            by_category: BTreeMap::new(),
            by_component: BTreeMap::new(),
        });
        if hours(n) > 0.0 {
            row.gpus_in_service += g.gpus as u64;
        }
        row.gpu_days += g.gpus as f64 * hours(n) / 24.0;
    }
    for f in &in_window {
        if let Some(row) = mix.get_mut(&f.generation) {
            row.failures += 1;
            *row.by_category.entry(f.category.clone()).or_default() += 1;
            *row.by_component
                .entry(format!("{}/{}", f.category, f.component))
                .or_default() += 1;
        }
    }
    // Natural hostname order is the names' order here (soak-n01 ... soak-n08).
    let mut groups: Vec<GroupFigure> = Vec::new();
    for n in 0..NODES {
        let gpus = site.generation(n).gpus as u64;
        if groups.last().is_none_or(|g| g.gpus + gpus > MTBF_GROUP_SIZE) {
            groups.push(GroupFigure {
                group: format!("{CLUSTER}/auto-{:03}", groups.len()),
                nodes: Vec::new(),
                gpus: 0,
                exposure_hours: 0.0,
                failures: 0,
            });
        }
        let g = groups.last_mut().expect("a group");
        g.nodes.push(site.nodes[n].name.clone());
        g.gpus += gpus;
        g.exposure_hours += gpus as f64 * hours(n);
    }
    for g in &mut groups {
        g.exposure_hours /= g.gpus as f64;
        g.failures = in_window.iter().filter(|f| g.nodes.contains(&f.root_node)).count() as u64;
    }
    (mix.into_values().collect(), groups)
}

#[cfg(test)]
mod tests {
    use super::super::scenario::scenario;
    use super::*;

    /// Every incident but the retirement forms one failure; the board swap two, the second blamed
    /// on the new board; lines a second past the fold window two.
    #[test]
    fn each_incident_forms_its_failures() {
        for seed in 1..20 {
            let sc = scenario(seed, 2);
            let e = expected(&sc, None);
            for (i, inc) in sc.incidents.iter().enumerate() {
                let fs: Vec<_> = e.failures.iter().filter(|f| f.incident == Some(i)).collect();
                let want = match inc.kind {
                    "retire" => 0,
                    "board_swap" => 2,
                    "window_edges" if inc.summary.contains("a second more") => 2,
                    _ => 1,
                };
                assert_eq!(fs.len(), want, "seed {seed}: {}", sc.describe(i));
                for f in &fs {
                    assert_eq!(f.category, "hardware", "seed {seed}: {f:?}");
                    // A power supply is no GPU part.
                    assert_eq!(f.root_part.is_some(), inc.kind != "psu_fault", "seed {seed}: {f:?}");
                }
                if inc.kind == "board_swap" {
                    assert_ne!(
                        fs[0].root_part, fs[1].root_part,
                        "the new board is blamed after the reboot"
                    );
                }
                if inc.kind == "window_edges" {
                    let first = fs[0].signals.iter().find(|s| s.first == inc.at).unwrap();
                    assert_eq!(first.repeats, 2, "two lines the burst gap apart are one signal");
                }
            }
        }
    }

    /// A storm on one GPU and a line of another GPU amid it: one failure, two signals.
    #[test]
    fn a_storm_and_another_gpu_stay_two_signals() {
        let sc = scenario(5, 0);
        let e = expected(&sc, None);
        let (i, _) = sc
            .incidents
            .iter()
            .enumerate()
            .find(|(_, i)| i.kind == "ecc_storm")
            .unwrap();
        let f = e.failures.iter().find(|f| f.incident == Some(i)).unwrap();
        assert_eq!(f.signals.len(), 2, "{f:?}");
        assert!(f.signals.iter().any(|s| s.repeats >= 50), "{f:?}");
        assert!(f.signals.iter().any(|s| s.repeats == 1), "{f:?}");
    }

    /// The Slurm track: the requeued job keeps its first run (start, nodes, restarts), the held job
    /// is between runs, and its node's DOWN is a drain and a failure of the held job, classified by
    /// the XID its reason names; the node is heard from, so not silent (its page resolves).
    #[test]
    fn the_slurm_track_keeps_every_run_and_folds_the_down_into_the_held_job() {
        for seed in 1..8 {
            let sc = scenario(seed, 1);
            let p = &sc.slurm;
            let name = |n: usize| sc.site.nodes[n].name.clone();
            // Wall time: past the timeline's end.
            let t0 = sc.end + 40 * MINUTE;
            let run = |job: &str, state: &str, nodes: String, start: Option<i64>, end: Option<i64>| SlurmRun {
                job: job.into(),
                state: state.into(),
                nodes,
                start,
                end,
            };
            let record = SlurmRecord {
                requeued: "11".into(),
                held: "12".into(),
                runs: vec![
                    run(
                        "11",
                        "REQUEUED",
                        name(p.requeued_first),
                        Some(t0),
                        Some(t0 + 3 * SECOND),
                    ),
                    run(
                        "11",
                        "COMPLETED",
                        name(p.requeued_second),
                        Some(t0 + 5 * SECOND),
                        Some(t0 + 11 * SECOND),
                    ),
                    run("12", "NODE_FAIL", name(p.held_node), Some(t0), Some(t0 + 7 * SECOND)),
                    run("12", "PENDING", "None assigned".into(), None, None),
                ],
                events: vec![SlurmEvent {
                    node: name(p.held_node),
                    start: t0 + 7 * SECOND,
                    end: None,
                    state: "DOWN".into(),
                    reason: p.down_reason.clone(),
                }],
            };
            let e = expected(&sc, Some(&record));
            let r = &e.jobs["11"];
            assert_eq!(
                (r.state.as_str(), r.restarts, r.start, r.end, r.failures),
                ("completed", 1, t0, Some(t0 + 11 * SECOND), 0)
            );
            assert_eq!(r.nodes, [name(p.requeued_first), name(p.requeued_second)]);
            let h = &e.jobs["12"];
            assert_eq!(
                (
                    h.state.as_str(),
                    h.scheduler_state.as_str(),
                    h.restarts,
                    h.start,
                    h.end,
                    h.failures
                ),
                ("running", "PENDING", 1, t0, None, 1)
            );
            let f = e.failures.iter().find(|f| f.job.as_deref() == Some("12")).unwrap();
            let component = if p.down_xid == 79 { "gpu" } else { "gpu_memory" };
            assert_eq!(
                (f.category.as_str(), f.component.as_str()),
                ("hardware", component),
                "{f:?}"
            );
            assert_eq!(f.root_node, name(p.held_node));
            assert_eq!(f.signals.len(), 1);
            assert_eq!(
                (f.signals[0].kind.as_str(), f.signals[0].repeats, f.signals[0].first),
                ("health_check", 1, t0 + 7 * SECOND)
            );
            assert_eq!(
                e.transitions[&name(p.held_node)].last(),
                Some(&("drained", t0 + 7 * SECOND))
            );
            assert!(!e.silent.contains(&name(p.held_node)));
            assert!(!e.retired.contains_key(&name(p.held_node)));
            // Without the track, nothing of it; with it, the held node's page (when it sent in
            // signal time) resolves.
            let without = expected(&sc, None);
            assert!(without.jobs.is_empty());
            assert_eq!(without.failures.len() + 1, e.failures.len());
            let held = name(p.held_node);
            assert_eq!(
                e.notifications.get(&held).cloned(),
                without.silent.contains(&held).then(|| vec!["firing", "resolved"]),
                "seed {seed}"
            );
        }
        assert_eq!(named_xid("Xid 79 on gpu 3: GPU has fallen off the bus"), Some(79));
        assert_eq!(named_xid("NHC: XID=48 seen"), Some(48));
        assert_eq!(named_xid("NHC: check_fs_mount: /lustre not mounted"), None);
    }

    /// Every node that sent pages once; the retired one, when it sent, is resolved after.
    #[test]
    fn the_retired_node_is_paged_then_resolved() {
        for seed in 1..20 {
            let sc = scenario(seed, 0);
            let e = expected(&sc, None);
            let (retired, _) = e.retired.iter().next().unwrap();
            for (node, events) in &e.notifications {
                let want: &[&str] = if node == retired {
                    &["firing", "resolved"]
                } else {
                    &["firing"]
                };
                assert_eq!(events, want, "seed {seed}: {node}");
                assert_eq!(e.silent.contains(node), node != retired, "seed {seed}: {node}");
            }
            assert_eq!(
                e.notifications.len(),
                e.silent.len() + usize::from(e.notifications.contains_key(retired))
            );
        }
    }

    /// The figures by hand for seed 1: the window is the whole timeline, every node in service
    /// from the first boot, the retired one until its retirement.
    #[test]
    fn figures_count_exposure_by_hand() {
        let sc = scenario(1, 3);
        let e = expected(&sc, None);
        let (mix, groups) = figures(&sc, &e, 0, sc.end);
        let (retired, at) = e.retired.iter().next().unwrap();
        let full_ms = (sc.end / 1000) as f64;
        let retired_ms = (*at / 1000) as f64;
        let gpu_ms: f64 = (0..NODES)
            .map(|n| {
                let g = sc.site.generation(n).gpus as f64;
                g * if &sc.site.nodes[n].name == retired {
                    retired_ms
                } else {
                    full_ms
                }
            })
            .sum();
        let gpu_days: f64 = mix.iter().map(|m| m.gpu_days).sum();
        assert!((gpu_days - gpu_ms / 86_400_000.0).abs() < 1e-12, "{gpu_days}");
        // Last year's imported failures are before the window.
        let in_window = e.failures.iter().filter(|f| f.first >= 0 && f.first < sc.end).count() as u64;
        assert!(in_window < e.failures.len() as u64, "the history is outside the window");
        assert_eq!(mix.iter().map(|m| m.failures).sum::<u64>(), in_window);
        // Packed in name order, at most 8 GPUs each, every node once.
        let names: Vec<String> = groups.iter().flat_map(|g| g.nodes.clone()).collect();
        let want: Vec<String> = sc.site.nodes.iter().map(|n| n.name.clone()).collect();
        assert_eq!(names, want);
        assert!(groups.iter().all(|g| g.gpus <= MTBF_GROUP_SIZE));
        assert_eq!(groups[0].group, "soak/auto-000");
        assert_eq!(groups.iter().map(|g| g.failures).sum::<u64>(), in_window);
        let with_retired = groups.iter().find(|g| g.nodes.contains(retired)).unwrap();
        assert!(with_retired.exposure_hours < full_ms / 3_600_000.0);
    }

    /// The Poisson tail by hand, and the lemon list at 0.5 holds some node in some seed (so the
    /// check compares probabilities, not only an empty list).
    #[test]
    fn lemons_by_hand() {
        // P(X >= 2 | 1) = 1 - e^-1 (1 + 1); P(X >= 0) = 1; P(X >= 3 | 0.5) = 1 - e^-0.5 (1 + 0.5 + 0.125).
        assert!((poisson_tail(2, 1.0) - (1.0 - 2.0 * (-1.0f64).exp())).abs() < 1e-15);
        assert_eq!(poisson_tail(0, 0.7), 1.0);
        assert!((poisson_tail(3, 0.5) - (1.0 - 1.625 * (-0.5f64).exp())).abs() < 1e-15);
        let listed: usize = (1..6)
            .map(|seed| {
                let sc = scenario(seed, 3);
                lemons(&sc, &expected(&sc, None), 0, sc.end, 0.5).len()
            })
            .sum();
        assert!(listed > 0);
    }
}
