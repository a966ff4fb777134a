//! The site and its timeline, from a seed. Pure: no I/O, no clock; the same seed gives the same
//! scenario, byte for byte.
//!
//! Times are microseconds of signal time after the scenario's origin (the runner places the origin
//! some hours before the wall clock). The site is eight nodes of one cluster, each with the GPUs of
//! one of three generations, built from the recorded `nvidia-smi -q -x` reports in
//! tests/fixtures/nvidia-smi/ (their bus ids; serials and UUIDs rewritten per node, slot and board
//! so every board of the site is its own part).

use std::fmt::Write as _;

use uuid::Uuid;

use crate::devtools::simulate::Rng;

pub const CLUSTER: &str = "soak";
pub const NODES: usize = 8;
pub const SECOND: i64 = 1_000_000;
pub const MINUTE: i64 = 60 * SECOND;

const P100: &str = include_str!("../../../tests/fixtures/nvidia-smi/p100-two-gpus.xml");
const L4: &str = include_str!("../../../tests/fixtures/nvidia-smi/l4-555.xml");
const A100: &str = include_str!("../../../tests/fixtures/nvidia-smi/a100-sxm4-80gb-mig-535.xml");

/// A GPU generation of the site: a recorded report and how many GPUs a node of it holds (a report
/// of one GPU is repeated on further buses).
pub struct Generation {
    pub name: &'static str,
    pub model: &'static str,
    report: &'static str,
    pub gpus: usize,
}

pub const GENERATIONS: [Generation; 3] = [
    Generation {
        name: "pascal",
        model: "Tesla P100-PCIE-12GB",
        report: P100,
        gpus: 2,
    },
    Generation {
        name: "ada",
        model: "NVIDIA L4",
        report: L4,
        gpus: 4,
    },
    Generation {
        name: "ampere",
        model: "NVIDIA A100-SXM4-80GB",
        report: A100,
        gpus: 4,
    },
];

#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub name: String,
    pub generation: usize,
    /// The server instance its agent sends to.
    pub server: usize,
}

/// One GPU slot of a node: its index (nvidia-smi's order) and its PCI bus id, normalised
/// (`0000:04:00.0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub index: usize,
    pub bus: String,
}

/// A board: its serial and UUID (the part is its serial).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Board {
    pub serial: String,
    pub uuid: String,
}

#[derive(Debug, Clone)]
pub struct Site {
    pub seed: u64,
    pub nodes: Vec<NodeSpec>,
}

impl Site {
    pub fn generation(&self, node: usize) -> &'static Generation {
        &GENERATIONS[self.nodes[node].generation]
    }

    /// The node's slots, in bus order.
    pub fn slots(&self, node: usize) -> Vec<Slot> {
        let g = self.generation(node);
        let recorded: Vec<String> = gpu_blocks(g.report)
            .iter()
            .filter_map(|b| tag(b, "pci_bus_id"))
            .collect();
        (0..g.gpus)
            .map(|i| {
                let bus = recorded.get(i).cloned().unwrap_or_else(|| shifted_bus(&recorded[0], i));
                Slot {
                    index: i,
                    bus: normalise_bus(&bus),
                }
            })
            .collect()
    }

    /// The board of `version` (0: the one installed at the start, 1: its first replacement...) in
    /// a slot: the recorded serial and UUID with their tails rewritten.
    pub fn board(&self, node: usize, slot: usize, version: usize) -> Board {
        let g = self.generation(node);
        let blocks = gpu_blocks(g.report);
        let b = blocks.get(slot).unwrap_or(&blocks[0]);
        let serial = tag(b, "serial").expect("a recorded serial");
        let uuid = tag(b, "uuid").expect("a recorded UUID");
        let tail = format!("{:02}{:02}{:02}", node % 100, slot % 100, version % 100);
        let serial = format!("{}{tail}", &serial[..serial.len() - tail.len()]);
        let uuid_tail = format!("{:04x}{:04x}{:04x}", self.seed % 0x1_0000, node * 0x100 + slot, version);
        let uuid = format!("{}{uuid_tail}", &uuid[..uuid.len() - uuid_tail.len()]);
        Board { serial, uuid }
    }

    /// The GPU model the report names for a slot's boards (`product_name`: a report may name its
    /// GPUs differently, as the recorded P100 report does).
    pub fn slot_model(&self, node: usize, slot: usize) -> String {
        let g = self.generation(node);
        let blocks = gpu_blocks(g.report);
        let b = blocks.get(slot).unwrap_or(&blocks[0]);
        tag(b, "product_name").unwrap_or_else(|| g.model.to_string())
    }

    /// The `nvidia-smi -q -x` report of a node whose slots hold the given board versions.
    pub fn report(&self, node: usize, versions: &[usize]) -> String {
        let g = self.generation(node);
        let blocks = gpu_blocks(g.report);
        let start = g.report.find("<gpu id=").expect("a <gpu> element");
        let end = g.report.rfind("</nvidia_smi_log>").expect("the closing tag");
        let mut out = g.report[..start].replace(
            &format!(
                "<attached_gpus>{}</attached_gpus>",
                tag(g.report, "attached_gpus").unwrap_or_default()
            ),
            &format!("<attached_gpus>{}</attached_gpus>", g.gpus),
        );
        for (i, v) in versions.iter().enumerate() {
            let recorded = blocks.get(i).unwrap_or(&blocks[0]);
            let mut block = recorded.to_string();
            let b = self.board(node, i, *v);
            if let Some(s) = tag(recorded, "serial") {
                block = block.replacen(
                    &format!("<serial>{s}</serial>"),
                    &format!("<serial>{}</serial>", b.serial),
                    1,
                );
            }
            if let Some(u) = tag(recorded, "uuid") {
                block = block.replacen(&format!("<uuid>{u}</uuid>"), &format!("<uuid>{}</uuid>", b.uuid), 1);
            }
            if blocks.get(i).is_none() {
                let bus = tag(recorded, "pci_bus_id").expect("a recorded bus id");
                let new = shifted_bus(&bus, i);
                block = block.replace(&bus, &new);
                let byte = |b: &str| b.split(':').nth(1).unwrap_or_default().to_string();
                block = block.replace(
                    &format!("<pci_bus>{}</pci_bus>", byte(&bus)),
                    &format!("<pci_bus>{}</pci_bus>", byte(&new)),
                );
            }
            out.push_str(&block);
            out.push_str("\n    ");
        }
        out.push_str(&g.report[end..]);
        out
    }
}

/// The `<gpu ...>...</gpu>` elements of a report, in order.
fn gpu_blocks(report: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = report;
    let mut base = 0;
    while let Some(s) = rest.find("<gpu id=") {
        let Some(e) = rest[s..].find("</gpu>") else { break };
        let end = s + e + "</gpu>".len();
        out.push(&report[base + s..base + end]);
        base += end;
        rest = &report[base..];
    }
    out
}

/// The text of the first `<name>` element.
fn tag(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let s = xml.find(&open)? + open.len();
    let e = xml[s..].find(&format!("</{name}>"))?;
    Some(xml[s..s + e].trim().to_string())
}

/// The bus id of the `i`-th copy of a recorded GPU: its bus byte moved by 0x40 per copy, written
/// as nvidia-smi writes it (`00000000:41:00.0`).
fn shifted_bus(recorded: &str, i: usize) -> String {
    let mut parts: Vec<String> = recorded.split(':').map(str::to_string).collect();
    let byte = u8::from_str_radix(&parts[1], 16).unwrap_or(0);
    parts[1] = format!("{:02X}", byte.wrapping_add((0x40 * i) as u8));
    parts.join(":")
}

/// `00000000:3B:00.0` -> `0000:3b:00.0`.
pub fn normalise_bus(bus: &str) -> String {
    let parts: Vec<&str> = bus.split(':').collect();
    let (domain, b, rest) = (parts[0], parts[1], parts[2]);
    let domain = &domain[domain.len().saturating_sub(4)..];
    format!("{domain}:{b}:{rest}").to_ascii_lowercase()
}

/// A bus id as the server or a tool writes it (`00000000:04:00.0`, `0000:04:00.0`, `0000:04:00`),
/// as [`normalise_bus`] writes it.
pub fn normalise_bus_lenient(bus: &str) -> String {
    let bus = bus.trim().trim_start_matches("PCI:");
    let parts: Vec<&str> = bus.split(':').collect();
    let (domain, b, devfn) = match parts.as_slice() {
        [d, b, f] => (*d, *b, *f),
        [b, f] => ("0000", *b, *f),
        _ => return bus.to_ascii_lowercase(),
    };
    let devfn = if devfn.contains('.') {
        devfn.to_string()
    } else {
        format!("{devfn}.0")
    };
    normalise_bus(&format!("{domain}:{b}:{devfn}"))
}

/// The bus as a kernel line names it: `0000:3b:00`.
pub fn kernel_bus(bus: &str) -> String {
    bus.rsplit_once('.').map_or(bus, |(b, _)| b).to_string()
}

/// What a kernel line says, as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    /// An XID of the GPU in `slot`.
    Xid { code: i64, slot: usize },
    /// A line that is no signal (boot noise).
    Noise,
}

#[derive(Debug, Clone)]
pub struct KernelLine {
    pub at: i64,
    pub priority: u8,
    pub fact: Fact,
    pub message: String,
}

/// A record of a node's BMC event log, as `ipmitool sel elist` prints it after the time:
/// `Sensor | Event | Asserted`.
#[derive(Debug, Clone)]
pub struct SelRecord {
    /// Whole seconds (the BMC stamps seconds).
    pub at: i64,
    pub text: String,
}

/// One incident of an imported history: an XID on a node, without its GPU (the ticket names the
/// node and the error only).
#[derive(Debug, Clone)]
pub struct HistoryEvent {
    pub id: Uuid,
    pub node: usize,
    /// Whole seconds, before the timeline (negative).
    pub at: i64,
    pub code: i64,
    pub message: String,
}

/// An NCCL watchdog timeout a rank of a job logged, sent by the site's log shipper.
#[derive(Debug, Clone)]
pub struct NcclTimeout {
    pub id: Uuid,
    pub node: usize,
    pub at: i64,
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct Job {
    pub id: String,
    pub nodes: Vec<usize>,
    pub start: i64,
    /// None while it runs.
    pub end: Option<i64>,
}

/// One step of the timeline, done in order by the runner.
#[derive(Debug, Clone)]
pub enum Action {
    /// Lines the node's kernel logs in its current boot (journald keeps them).
    Kernel { node: usize, lines: Vec<KernelLine> },
    /// Records the node's BMC logs (its agent reads them with `ipmitool sel elist`).
    Bmc { node: usize, records: Vec<SelRecord> },
    /// The scheduler's record of a job (`PUT /v1/jobs`).
    Job(Job),
    /// A job's ranks report NCCL timeouts (`POST /v1/events`).
    Nccl { job: String, timeouts: Vec<NcclTimeout> },
    /// An operator drains the node (`POST /v1/nodes/{cluster}/{node}/state`).
    Drain { node: usize, at: i64, reason: String },
    /// An operator returns the node to service.
    Return { node: usize, at: i64 },
    /// The node goes down at `down` and boots at `up` (a new boot id); `swap`: the board of that
    /// slot is replaced meanwhile.
    Reboot {
        node: usize,
        down: i64,
        up: i64,
        swap: Option<usize>,
    },
    /// The node leaves service (`PUT /v1/nodes` with `retired_at`); its agent stops.
    Retire { node: usize, at: i64 },
    /// A fault of the system, not of the site: the server instance is SIGKILLed and started again.
    KillServer { server: usize },
    /// The node's agent is SIGKILLed and started again.
    KillAgent { node: usize },
    /// The site's Alertmanager is SIGKILLed and started again (its alerts, held in memory, lost).
    KillAlertmanager,
    /// The site's Alertmanager is frozen (SIGSTOP) for `seconds`: it accepts connections and
    /// answers none; the timeline goes on meanwhile.
    FreezeAlertmanager { seconds: f64 },
    /// The ticket system's webhook answers 503 until `TicketsUp`; the timeline goes on meanwhile.
    TicketsDown,
    /// The ticket system answers again, once it has refused a request while down (a page came
    /// in meanwhile), or after a few seconds.
    TicketsUp,
    /// A year's incident history of some nodes, imported from the site's ticketing system
    /// (`POST /v1/events`, times hundreds of days before the timeline) while the site runs.
    ImportHistory { events: Vec<HistoryEvent> },
    /// An administrator edits the classification catalog: the rule for XID `code` now files it under
    /// `component` (`PUT /v1/classification-rules/{rule}`); the failures are rebuilt under the
    /// new version in the background while the timeline goes on.
    EditCatalog {
        rule: &'static str,
        code: i64,
        component: &'static str,
    },
    /// The nodes' network refuses connections to the servers (and cuts the open ones) for
    /// `seconds`; the timeline goes on meanwhile.
    RefuseNetwork { seconds: f64 },
    /// The database server crashes (every process stops at once) and starts again after
    /// `seconds`; played only when the soak runs its own server.
    RestartPostgres { seconds: f64 },
}

#[derive(Debug, Clone)]
pub struct Step {
    /// The incident the step belongs to (index into `Scenario::incidents`), None for faults of
    /// the system.
    pub incident: Option<usize>,
    pub action: Action,
}

#[derive(Debug, Clone)]
pub struct Incident {
    pub kind: &'static str,
    pub at: i64,
    pub summary: String,
}

/// The Slurm track: a real Slurm whose nodes are three of the site's, running jobs in wall time
/// beside the signal timeline, read by `faultline slurm sync --follow` (src/devtools/soak/slurm.rs).
#[derive(Debug, Clone)]
pub struct SlurmPlan {
    /// A job an administrator requeues while it runs on `requeued_first`; it runs again, to its
    /// end, on `requeued_second`.
    pub requeued_first: usize,
    pub requeued_second: usize,
    /// A `--requeue` job on `held_node`, set DOWN with `down_reason` while the job runs: the run
    /// ends NODE_FAIL and the job is requeued, held pending (its node is down).
    pub held_node: usize,
    pub down_reason: String,
    /// The XID the reason names (the catalog classifies the text by it).
    pub down_xid: i64,
    /// The server instance the sync sends to.
    pub server: usize,
    /// The sync is SIGKILLed and started again after the requeue (else after the DOWN).
    pub kill_sync_after_requeue: bool,
}

impl SlurmPlan {
    /// What the track does, for a report.
    pub fn describe(&self, site: &Site) -> String {
        let name = |n: usize| site.nodes[n].name.as_str();
        format!(
            "a job requeued by an administrator on {}, run again on {}; a --requeue job on {}, set DOWN ({}): NODE_FAIL, held pending; faultline slurm sync --follow against server {}, SIGKILLed and restarted after the {}",
            name(self.requeued_first),
            name(self.requeued_second),
            name(self.held_node),
            self.down_reason,
            self.server,
            if self.kill_sync_after_requeue {
                "requeue"
            } else {
                "DOWN"
            }
        )
    }

    /// The site's nodes Slurm runs, in site order.
    pub fn nodes(&self) -> Vec<usize> {
        let mut n = vec![self.requeued_first, self.requeued_second, self.held_node];
        n.sort();
        n.dedup();
        n
    }
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub site: Site,
    /// The Slurm track (played when the round runs it).
    pub slurm: SlurmPlan,
    /// Each node's first boot: when it started (the GPU sets are registered then).
    pub first_boot: i64,
    pub incidents: Vec<Incident>,
    pub steps: Vec<Step>,
    /// Where the timeline ends (the last signal, plus a margin).
    pub end: i64,
}

impl Scenario {
    /// The boot id of a node's `boot`-th boot (0: the first).
    pub fn boot_id(&self, node: usize, boot: usize) -> String {
        let ns = Uuid::from_u128(0x5f0a_c4e1_9b2d_4c3e_8a71_0d6e_2b9f_4a10);
        Uuid::new_v5(&ns, format!("{}/{}/{}", self.site.seed, node, boot).as_bytes())
            .hyphenated()
            .to_string()
    }

    /// The steps that led to incident `i`, for a report.
    pub fn describe(&self, i: usize) -> String {
        let inc = &self.incidents[i];
        format!("incident {i} ({}) at +{}: {}", inc.kind, minutes(inc.at), inc.summary)
    }
}

/// `+2h05m30s` style offset.
pub fn minutes(t: i64) -> String {
    let s = t / SECOND;
    format!("{}h{:02}m{:02}s", s / 3600, (s / 60) % 60, s % 60)
}

/// The kinds of incident, each at most once in every run of `KINDS` (then the extras drawn).
const KINDS: [&str; 6] = [
    "fall_off_bus",
    "board_swap",
    "ecc_storm",
    "nvlink",
    "nccl_cascade",
    "window_edges",
];

/// The scenario of `seed`: every kind of incident once, `extra` more drawn among them, in a
/// shuffled order, then a node retired. Incidents are 25 to 40 minutes apart (more than the fold
/// window after the last signal of the one before); faults of the system fall between them.
pub fn scenario(seed: u64, extra: usize) -> Scenario {
    let mut rng = Rng::new(seed, 0x50a4);
    let mut receivers = Rng::new(seed, 0x50a5);
    // Every generation on at least two nodes.
    let mut gens: Vec<usize> = vec![0, 1, 2, 0, 1, 2, rng.below(3), rng.below(3)];
    shuffle(&mut rng, &mut gens);
    let nodes = (0..NODES)
        .map(|i| NodeSpec {
            name: format!("soak-n{:02}", i + 1),
            generation: gens[i],
            server: i % 2,
        })
        .collect();
    let site = Site { seed, nodes };

    let mut kinds: Vec<&'static str> = KINDS.to_vec();
    for _ in 0..extra {
        kinds.push(KINDS[rng.below(KINDS.len())]);
    }
    shuffle(&mut rng, &mut kinds);
    // The node retired at the end: no incident after it touches it anyway.
    let retired = rng.below(NODES);

    let mut b = Builder {
        site: &site,
        rng: &mut rng,
        steps: Vec::new(),
        incidents: Vec::new(),
        boots: vec![0; NODES],
        versions: (0..NODES).map(|n| vec![0; site.generation(n).gpus]).collect(),
        jobs: 0,
    };
    let mut t = 30 * MINUTE;
    let mut kills_server = 0;
    let mut kills_agent = 0;
    let mut tickets_down = false;
    for (k, kind) in kinds.iter().enumerate() {
        let lasts = b.incident(kind, t);
        t = lasts + b.rng.range(25 * MINUTE, 40 * MINUTE);
        // Faults of the system between incidents: each server killed at least once in a run of
        // three incidents, agents more often.
        if b.rng.chance(0.4) || (k == 1 && kills_server == 0) {
            let server = kills_server % 2;
            b.steps.push(Step {
                incident: None,
                action: Action::KillServer { server },
            });
            kills_server += 1;
        }
        if b.rng.chance(0.3) || k + 2 == kinds.len() {
            b.steps.push(Step {
                incident: None,
                action: Action::KillAlertmanager,
            });
        }
        if b.rng.chance(0.5) || (k == 2 && kills_agent == 0) {
            let node = b.rng.below(NODES);
            b.steps.push(Step {
                incident: None,
                action: Action::KillAgent { node },
            });
            kills_agent += 1;
        }
        // Receivers that stop answering, drawn from a stream of their own so that the draws above
        // (and the scenarios of the seeds that found defects) stay as they were: each at least
        // once in a round.
        if receivers.chance(0.3) || k == 0 {
            b.steps.push(Step {
                incident: None,
                action: Action::FreezeAlertmanager {
                    seconds: receivers.range(2_000, 5_000) as f64 / 1000.0,
                },
            });
        }
        // The database crashes once in a round (after the third incident), now and then again.
        if receivers.chance(0.15) || k == 2 {
            b.steps.push(Step {
                incident: None,
                action: Action::RestartPostgres {
                    seconds: receivers.range(500, 3_000) as f64 / 1000.0,
                },
            });
        }
        // Last year's incidents, imported while the site runs: four to seven, some a few minutes
        // apart on one node (one failure), the rest alone.
        if k == 5 {
            let mut events = Vec::new();
            let mut at = -receivers.range(300, 365) * 24 * 3600 * SECOND;
            for j in 0..receivers.range(4, 8) {
                let node = receivers.below(NODES);
                let code = [79, 48, 74, 64][receivers.below(4)];
                events.push(HistoryEvent {
                    id: Uuid::new_v5(&Uuid::NAMESPACE_OID, format!("soak/{seed}/history/{j}").as_bytes()),
                    node,
                    at,
                    code,
                    message: format!(
                        "Xid {code} reported on {} (ticket INC-{:05})",
                        site.nodes[node].name,
                        10_000 + j
                    ),
                });
                // The next one the same node minutes later, or days later anywhere.
                if receivers.chance(0.4) {
                    let mut next = events.last().cloned().expect("an event");
                    next.id = Uuid::new_v5(&Uuid::NAMESPACE_OID, format!("soak/{seed}/history/{j}b").as_bytes());
                    next.at += receivers.range(1, 9) * MINUTE / SECOND * SECOND;
                    events.push(next);
                }
                at += receivers.range(2, 30) * 24 * 3600 * SECOND;
            }
            b.steps.push(Step {
                incident: None,
                action: Action::ImportHistory { events },
            });
        }
        // A node rebooted between incidents, its boards unchanged (a kernel update): a new boot
        // whose set is the same parts, whose journal the agent reads from its start.
        if receivers.chance(0.3) || k == 1 {
            let node = receivers.below(NODES);
            let down = lasts + receivers.range(2 * MINUTE, 10 * MINUTE);
            b.steps.push(Step {
                incident: None,
                action: Action::Reboot {
                    node,
                    down,
                    up: down + 3 * MINUTE,
                    swap: None,
                },
            });
            b.boots[node] += 1;
        }
        // Mid-timeline, the site files NVLink errors under the network (its fabric team owns them).
        if k == 4 {
            b.steps.push(Step {
                incident: None,
                action: Action::EditCatalog {
                    rule: "xid-74",
                    code: 74,
                    component: "network",
                },
            });
        }
        // The nodes cut off from the servers as the next incident starts.
        if receivers.chance(0.2) || k == 3 {
            b.steps.push(Step {
                incident: None,
                action: Action::RefuseNetwork {
                    seconds: receivers.range(1_000, 4_000) as f64 / 1000.0,
                },
            });
        }
        // Down across the next incident, when nodes may page.
        if tickets_down {
            b.steps.push(Step {
                incident: None,
                action: Action::TicketsUp,
            });
            tickets_down = false;
        } else if receivers.chance(0.3) || k == 1 {
            b.steps.push(Step {
                incident: None,
                action: Action::TicketsDown,
            });
            tickets_down = true;
        }
    }
    if tickets_down {
        b.steps.push(Step {
            incident: None,
            action: Action::TicketsUp,
        });
    }
    // A power supply losing its input, in the BMC's event log (drawn from the second stream, after
    // the other incidents, so that their draws stay as they were).
    let node = receivers.below(NODES);
    let psu = 1 + receivers.below(2);
    let at = t / SECOND * SECOND;
    let i = b.incidents.len();
    b.incidents.push(Incident {
        kind: "psu_fault",
        at,
        summary: format!("{}: PSU{psu} loses AC (BMC event log)", site.nodes[node].name),
    });
    b.steps.push(Step {
        incident: Some(i),
        action: Action::Bmc {
            node,
            records: vec![SelRecord {
                at,
                text: format!("Power Supply PS{psu} Status | Power Supply AC lost | Asserted"),
            }],
        },
    });
    t = at + receivers.range(25 * MINUTE, 40 * MINUTE);
    // A node retired while its silence alert fires (so its page must resolve, and no longer page):
    // the one drawn above if it sent, else one that did.
    let sent: Vec<usize> = (0..NODES)
        .filter(|&n| {
            b.steps.iter().any(|s| match &s.action {
                Action::Kernel { node, lines } => *node == n && lines.iter().any(|l| l.fact != Fact::Noise),
                Action::Nccl { timeouts, .. } => timeouts.iter().any(|t| t.node == n),
                Action::Bmc { node, records } => *node == n && !records.is_empty(),
                Action::ImportHistory { events } => events.iter().any(|e| e.node == n),
                _ => false,
            })
        })
        .collect();
    let retired = if sent.contains(&retired) || sent.is_empty() {
        retired
    } else {
        sent[receivers.below(sent.len())]
    };
    let i = b.incidents.len();
    b.incidents.push(Incident {
        kind: "retire",
        at: t,
        summary: format!("{} retired", site.nodes[retired].name),
    });
    b.steps.push(Step {
        incident: Some(i),
        action: Action::Retire { node: retired, at: t },
    });
    let steps = b.steps;
    let incidents = b.incidents;
    let slurm = slurm_plan(&site, retired);
    Scenario {
        site,
        slurm,
        first_boot: 0,
        incidents,
        steps,
        end: t + MINUTE,
    }
}

/// The Slurm track's nodes and faults, drawn from a stream of their own (the timeline of a seed is
/// the same with or without the track): three nodes in service to the end (not the retired one).
fn slurm_plan(site: &Site, retired: usize) -> SlurmPlan {
    let mut rng = Rng::new(site.seed, 0x5107);
    let mut nodes: Vec<usize> = (0..NODES).filter(|&n| n != retired).collect();
    shuffle(&mut rng, &mut nodes);
    let held_node = nodes[2];
    let gpu = rng.below(site.generation(held_node).gpus);
    // As a site's health check words it when it downs a node.
    let (down_xid, what) = if rng.chance(0.5) {
        (79, "GPU has fallen off the bus")
    } else {
        (48, "double bit ECC error")
    };
    SlurmPlan {
        requeued_first: nodes[0],
        requeued_second: nodes[1],
        held_node,
        down_reason: format!("Xid {down_xid} on gpu {gpu}: {what}"),
        down_xid,
        server: rng.below(2),
        kill_sync_after_requeue: rng.chance(0.5),
    }
}

fn shuffle<T>(rng: &mut Rng, xs: &mut [T]) {
    for i in (1..xs.len()).rev() {
        xs.swap(i, rng.below(i + 1));
    }
}

struct Builder<'a> {
    site: &'a Site,
    rng: &'a mut Rng,
    steps: Vec<Step>,
    incidents: Vec<Incident>,
    /// Each node's current boot.
    boots: Vec<usize>,
    /// Each node's board version per slot.
    versions: Vec<Vec<usize>>,
    jobs: usize,
}

impl Builder<'_> {
    fn name(&self, node: usize) -> &str {
        &self.site.nodes[node].name
    }

    fn slot(&self, node: usize, slot: usize) -> Slot {
        self.site.slots(node)[slot].clone()
    }

    fn push(&mut self, action: Action) {
        let incident = Some(self.incidents.len() - 1);
        self.steps.push(Step { incident, action });
    }

    fn xid_line(&mut self, node: usize, slot: usize, code: i64, at: i64) -> KernelLine {
        let bus = kernel_bus(&self.slot(node, slot).bus);
        let pid = 1000 + self.rng.below(60_000);
        let detail = match code {
            79 => "GPU has fallen off the bus.".to_string(),
            48 => "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 1.".into(),
            63 => "Row Remapper: New row marked for remapping, reset gpu to activate.".into(),
            64 => "Row Remapper: Failed to remap row, reset gpu and run field diagnostics.".into(),
            74 => "NVLink: fatal error detected on link 2(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)".into(),
            _ => String::new(),
        };
        KernelLine {
            at,
            priority: if code == 63 { 4 } else { 3 },
            fact: Fact::Xid { code, slot },
            message: format!("NVRM: Xid (PCI:{bus}): {code}, pid={pid}, name=python, {detail}"),
        }
    }

    /// Adds an incident starting at `t`; returns the time of its last signal.
    fn incident(&mut self, kind: &'static str, t: i64) -> i64 {
        let node = self.rng.below(NODES);
        let gpus = self.site.generation(node).gpus;
        let slot = self.rng.below(gpus);
        let i = self.incidents.len();
        self.incidents.push(Incident {
            kind,
            at: t,
            summary: String::new(),
        });
        let (summary, last) = match kind {
            "fall_off_bus" => {
                let repeats = 1 + self.rng.below(3);
                let lines: Vec<KernelLine> = (0..repeats)
                    .map(|k| self.xid_line(node, slot, 79, t + k as i64 * 2 * SECOND))
                    .collect();
                let last = lines.last().map_or(t, |l| l.at);
                self.push(Action::Kernel { node, lines });
                self.push(Action::Drain {
                    node,
                    at: t + 2 * MINUTE,
                    reason: "XID 79: GPU fell off the bus".into(),
                });
                (
                    format!(
                        "{} GPU {slot} falls off the bus (XID 79 x{repeats}), node drained",
                        self.name(node)
                    ),
                    last,
                )
            }
            "board_swap" => {
                let line = self.xid_line(node, slot, 79, t);
                self.push(Action::Kernel {
                    node,
                    lines: vec![line],
                });
                self.push(Action::Drain {
                    node,
                    at: t + MINUTE,
                    reason: "XID 79, board replaced".into(),
                });
                // Down after the fold window: the new board's first line, logged as it boots, is a
                // failure of its own.
                let (down, up) = (t + 11 * MINUTE, t + 14 * MINUTE);
                self.push(Action::Reboot {
                    node,
                    down,
                    up,
                    swap: Some(slot),
                });
                self.boots[node] += 1;
                self.versions[node][slot] += 1;
                // The new board logs a double-bit error, as it boots or minutes later: its own part's.
                let after = up + self.rng.range(20 * SECOND, 5 * MINUTE);
                let line = self.xid_line(node, slot, 48, after);
                self.push(Action::Kernel {
                    node,
                    lines: vec![line],
                });
                self.push(Action::Return {
                    node,
                    at: up + 2 * MINUTE,
                });
                (
                    format!(
                        "{} GPU {slot} falls off the bus (XID 79), drained, board replaced across a reboot at +{}, then XID 48 on the new board at +{}",
                        self.name(node),
                        minutes(up),
                        minutes(after)
                    ),
                    after,
                )
            }
            "ecc_storm" => {
                let other = (slot + 1 + self.rng.below(gpus - 1)) % gpus;
                let repeats = 50 + self.rng.below(250);
                // Either a double-bit storm with a row remap on another GPU, or a row-remap storm
                // with a remap failure on another GPU.
                let (storm_code, other_code) = if self.rng.chance(0.5) { (48, 63) } else { (63, 64) };
                // Half the storms (by the repeat count's parity, so that no draw moves) have the
                // same XID on the other GPU: only the GPU tells that line from the storm's.
                let other_code = if repeats.is_multiple_of(2) {
                    storm_code
                } else {
                    other_code
                };
                let mut lines: Vec<KernelLine> = (0..repeats)
                    .map(|k| self.xid_line(node, slot, storm_code, t + k as i64 * SECOND))
                    .collect();
                let at = t + (repeats as i64 / 2) * SECOND + SECOND / 2;
                let other_line = self.xid_line(node, other, other_code, at);
                lines.insert(repeats / 2 + 1, other_line);
                let last = t + (repeats as i64 - 1) * SECOND;
                self.push(Action::Kernel { node, lines });
                (
                    format!(
                        "{} GPU {slot}: XID {storm_code} x{repeats} (1 s apart); GPU {other}: one XID {other_code} amid them",
                        self.name(node)
                    ),
                    last,
                )
            }
            "nvlink" => {
                let repeats = 2 + self.rng.below(6);
                let lines: Vec<KernelLine> = (0..repeats)
                    .map(|k| self.xid_line(node, slot, 74, t + k as i64 * 5 * SECOND))
                    .collect();
                let last = lines.last().map_or(t, |l| l.at);
                self.push(Action::Kernel { node, lines });
                (
                    format!("{} GPU {slot}: NVLink error (XID 74 x{repeats})", self.name(node)),
                    last,
                )
            }
            "nccl_cascade" => {
                let mut nodes: Vec<usize> = (0..NODES).collect();
                shuffle(self.rng, &mut nodes);
                let size = 3 + self.rng.below(3);
                nodes.truncate(size);
                let faulty = nodes[0];
                let fslot = self.rng.below(self.site.generation(faulty).gpus);
                self.jobs += 1;
                let job = Job {
                    id: format!("{}{:02}", 700_000 + self.site.seed % 100_000, self.jobs),
                    nodes: nodes.clone(),
                    start: t - 5 * MINUTE,
                    end: Some(t + 3 * MINUTE),
                };
                let code = if self.rng.chance(0.5) { 79 } else { 74 };
                let line = self.xid_line(faulty, fslot, code, t);
                let mut timeouts = Vec::new();
                let mut last = t;
                for &n in &nodes[1..] {
                    let at = t + self.rng.range(40 * SECOND, 90 * SECOND);
                    last = last.max(at);
                    let rank = n * 8;
                    timeouts.push(NcclTimeout {
                        id: Uuid::new_v5(
                            &Uuid::NAMESPACE_OID,
                            format!("soak/{}/{}/{n}", self.site.seed, job.id).as_bytes(),
                        ),
                        node: n,
                        at,
                        message: format!(
                            "[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88213, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600{:03} milliseconds before timing out.",
                            self.rng.below(1000)
                        ),
                    });
                }
                let summary = format!(
                    "job {} on {}: {} GPU {fslot} XID {code}, NCCL timeouts on the {} other nodes",
                    job.id,
                    nodes
                        .iter()
                        .map(|&n| self.name(n).to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                    self.name(faulty),
                    nodes.len() - 1
                );
                // The scheduler reports the job as it starts and again when it ends, or (a sync that
                // lags) only once it ended, after its signals arrived.
                let prompt = self.rng.chance(0.5);
                if prompt {
                    self.push(Action::Job(Job {
                        end: None,
                        ..job.clone()
                    }));
                }
                self.push(Action::Kernel {
                    node: faulty,
                    lines: vec![line],
                });
                self.push(Action::Nccl {
                    job: job.id.clone(),
                    timeouts,
                });
                self.push(Action::Job(job.clone()));
                let summary = format!(
                    "{summary}; the job recorded {}",
                    if prompt {
                        "as it started and when it ended"
                    } else {
                        "only after its signals"
                    }
                );
                (summary, last)
            }
            "window_edges" => {
                // Two lines exactly the burst gap apart (one signal counting two), then one the fold
                // window after the second, or a second later (one failure, or two).
                let code = if self.rng.chance(0.5) { 74 } else { 48 };
                let beyond = self.rng.chance(0.5);
                let third = t + 60 * SECOND + 10 * MINUTE + if beyond { SECOND } else { 0 };
                let lines = vec![
                    self.xid_line(node, slot, code, t),
                    self.xid_line(node, slot, code, t + 60 * SECOND),
                    self.xid_line(node, slot, code, third),
                ];
                self.push(Action::Kernel { node, lines });
                (
                    format!(
                        "{} GPU {slot}: XID {code} at +0 s and +60 s (the burst gap), again {} the fold window later",
                        self.name(node),
                        if beyond { "a second more than" } else { "exactly" }
                    ),
                    third,
                )
            }
            other => unreachable!("incident kind {other}"),
        };
        self.incidents[i].summary = summary;
        last
    }
}

/// Journal lines of a node's boot as the kernel logs them when it starts: no signal among them.
pub fn boot_lines(site: &Site, node: usize, boot_start: i64) -> Vec<KernelLine> {
    let mut out = Vec::new();
    let mut msg = String::new();
    let _ = write!(
        msg,
        "Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103) #49-Ubuntu SMP"
    );
    out.push(KernelLine {
        at: boot_start + SECOND / 10,
        priority: 5,
        fact: Fact::Noise,
        message: msg,
    });
    out.push(KernelLine {
        at: boot_start + 20 * SECOND,
        priority: 6,
        fact: Fact::Noise,
        message: format!(
            "nvidia-nvlink: Nvlink Core is being initialized, major device number 511 ({} GPUs)",
            site.generation(node).gpus
        ),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_scenario() {
        let a = format!("{:?}", scenario(7, 3));
        let b = format!("{:?}", scenario(7, 3));
        assert_eq!(a, b);
        assert_ne!(a, format!("{:?}", scenario(8, 3)));
    }

    #[test]
    fn reports_keep_the_recorded_buses_and_rewrite_identities() {
        let sc = scenario(3, 0);
        for n in 0..NODES {
            let g = sc.site.generation(n);
            let report = sc.site.report(n, &vec![0; g.gpus]);
            let gpus = crate::logparse::nvidia_smi::parse_gpus(&report).unwrap();
            assert_eq!(gpus.len(), g.gpus, "{}", g.name);
            let slots = sc.site.slots(n);
            for (i, gpu) in gpus.iter().enumerate() {
                let b = sc.site.board(n, i, 0);
                assert_eq!(gpu.serial.as_deref(), Some(b.serial.as_str()));
                assert_eq!(gpu.uuid.as_deref(), Some(b.uuid.as_str()));
                assert_eq!(normalise_bus(gpu.pci_bus_id.as_deref().unwrap()), slots[i].bus);
            }
        }
        // The P100 report keeps its two recorded buses.
        let p100 = (0..NODES).find(|&n| sc.site.nodes[n].generation == 0).unwrap();
        let buses: Vec<String> = sc.site.slots(p100).into_iter().map(|s| s.bus).collect();
        assert_eq!(buses, ["0000:04:00.0", "0000:82:00.0"]);
        // A replacement board is another part in the same slot.
        assert_ne!(sc.site.board(p100, 0, 0), sc.site.board(p100, 0, 1));
    }
}
