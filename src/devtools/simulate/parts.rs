//! The simulated fleet's GPU parts: a serial in every slot, a vendor lot on the Hopper parts (one
//! lot with a higher hazard), hard GPU failures removed and replaced (failed, or sent to the vendor
//! as RMA with a ticket), repaired parts returning into another node of their pool, and the early
//! signals (corrected ECC errors, pending row remaps) that precede a share of hard failures.
//!
//! Runs after every other phase, from its own streams, so the failures, jobs and signals drawn
//! before are unchanged; the bad lot's extra failures and the early signals are added to them.
//!
//! Model: the base hazard of a GPU is its node's (`POOLS`, drawn by `node_failures`, the GPU picked
//! uniformly). A part of [`BAD_LOT`] also fails at [`BAD_LOT_EXTRA_RATE`] per installed day until its
//! first hard failure; a repaired part that returns has only the base hazard. A hard failure (XID
//! 79, 62, 48, 95, uncorrectable ECC, a double-bit health check) removes its part 2-48 h later unless
//! the node leaves service first; a replacement is reported 1-24 h after the removal, a repaired
//! part of the same pool (ready 7-21 days after its RMA, from another node) first, else a new serial.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use uuid::Uuid;

use super::{DAY, HARDWARE, HOUR, PCI, POOLS, Rng, SPAN, Sig, Template, World, rfc3339, root_signal};

/// Lots of the Hopper parts in service at the start; replacements come from [`NEW_LOT`].
const LOTS: [&str; 4] = ["LOT-2311A", "LOT-2311B", "LOT-2402A", "LOT-2402B"];
/// The lot whose parts fail more.
pub const BAD_LOT: &str = "LOT-2402B";
const NEW_LOT: &str = "LOT-2409A";
/// Extra hard failures per installed day of a bad-lot part (the base of a Hopper GPU is about
/// 0.015 x 0.18 / 8 = 0.00034, so the lot fails about ten times as often).
const BAD_LOT_EXTRA_RATE: f64 = 0.003;
/// Share of removals sent to the vendor (RMA) rather than scrapped, and of RMAs that come back.
const P_RMA: f64 = 0.6;
const P_REPAIRED: f64 = 0.7;
/// Share of hard failures preceded by early signals on the same GPU, 2 h to 6 days before.
const P_PRECURSOR: f64 = 0.6;
/// Early signals on any GPU, per GPU-day, followed by nothing (the background the ratio is against).
const BACKGROUND_RATE: f64 = 0.0005;
/// Namespace of the simulated GPUs' UUIDs: v5(namespace, serial).
const UUID_NAMESPACE: Uuid = Uuid::from_u128(0x6661_756c_746c_696e_6573_696d_0000_0002);

/// What the parts phase injected, for tests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartsTruth {
    /// Distinct parts (serials) reported: those in service at the start and every replacement.
    pub parts: usize,
    /// Removals sent (`POST /v1/gpus/{part}/removals`), `rma` of them as RMA.
    pub removals: usize,
    pub rma: usize,
    /// Repaired parts reported again, each in another node than the one it left (serials).
    pub returned: Vec<String>,
    /// Hard GPU failures injected (root signal naming the GPU), the bad lot's extra ones included.
    pub hard_failures: usize,
    /// Extra failures of the bad lot's parts.
    pub bad_lot_failures: usize,
    /// Hard failures with early signals before them, and early signals sent in all.
    pub preceded: usize,
    pub early_signals: usize,
    /// Parts per lot (those in service at the start and replacements).
    pub lots: BTreeMap<String, usize>,
}

struct Part {
    serial: String,
    uuid: String,
    pool: usize,
    lot: Option<&'static str>,
}

/// A part in a slot over [from, to).
struct Placement {
    part: usize,
    node: usize,
    gpu: u32,
    from: i64,
    to: i64,
}

enum Step {
    Report(usize),
    Removal {
        part: usize,
        reason: &'static str,
        ticket: String,
    },
}

/// A hard failure of a GPU: what removes its part. XID 94 is contained (the catalog's transient).
fn hard(kind: &str, code: Option<i64>, component: &str) -> bool {
    match kind {
        "xid" => matches!(code, Some(79 | 62 | 48 | 95)),
        "ecc" => code == Some(2),
        "health_check" => component == "gpu_memory",
        _ => false,
    }
}

fn template_is_hard(t: &Template) -> bool {
    hard(t.2, (t.3 != 0).then_some(t.3), t.0)
}

/// The Hopper pools carry lots.
fn has_lots(pool: usize) -> bool {
    POOLS[pool].5 == "hopper"
}

pub(super) struct Output {
    /// `{"inventory": NodeGpus}` or `{"removal": {...}}`, in time order.
    pub steps: Vec<Value>,
    /// PartInput objects (`POST /v1/gpus/history`): the lot of each part that has one.
    pub history: Vec<Value>,
    pub truth: PartsTruth,
}

pub(super) fn simulate_parts(world: &mut World, seed: u64, base: i64) -> Output {
    let mut truth = PartsTruth::default();
    let mut parts: Vec<Part> = Vec::new();
    let mut placements: Vec<Placement> = Vec::new();
    let mut steps: Vec<(i64, usize, Step)> = Vec::new();
    let mut lot_rng = Rng::new(seed, 8);
    let new_part = |parts: &mut Vec<Part>, pool: usize, lot: Option<&'static str>| {
        let serial = format!("{}", 1_654_922_000_000u64 + parts.len() as u64);
        let uuid = format!("GPU-{}", Uuid::new_v5(&UUID_NAMESPACE, serial.as_bytes()));
        parts.push(Part {
            serial,
            uuid,
            pool,
            lot,
        });
        parts.len() - 1
    };
    // Every node reports its set when it enters service (the window's start for most).
    for n in 0..world.nodes.len() {
        let (pool, from) = (world.nodes[n].pool, world.nodes[n].from.max(0));
        if from >= world.w {
            continue;
        }
        for g in 0..POOLS[pool].3 {
            let lot = has_lots(pool).then(|| *lot_rng.pick(&LOTS));
            let part = new_part(&mut parts, pool, lot);
            placements.push(Placement {
                part,
                node: n,
                gpu: g,
                from,
                to: i64::MAX,
            });
        }
        steps.push((from, steps.len(), Step::Report(n)));
    }

    // The bad lot's extra failures, until the part's first hard failure of the base hazard.
    let hard_table: Vec<Template> = HARDWARE.iter().copied().filter(template_is_hard).collect();
    let mut first_hard: BTreeMap<(usize, u32), i64> = BTreeMap::new();
    for k in &world.kept {
        if let (Some(n), Some(g)) = (k.node, k.gpu)
            && k.category == "hardware"
            && hard(k.kind, k.code, k.component)
        {
            let e = first_hard.entry((n, g)).or_insert(k.t);
            *e = (*e).min(k.t);
        }
    }
    let mut extra_rng = Rng::new(seed, 9);
    for pl in placements.iter().filter(|p| parts[p.part].lot == Some(BAD_LOT)) {
        let (pool, end) = (world.nodes[pl.node].pool, world.nodes[pl.node].to.min(world.w) - SPAN);
        let until = first_hard.get(&(pl.node, pl.gpu)).copied().unwrap_or(i64::MAX).min(end);
        let t = pl.from + (extra_rng.exp(1.0 / BAD_LOT_EXTRA_RATE) * DAY as f64) as i64;
        if t >= until {
            continue;
        }
        let job = world.job_at(pl.node, t);
        let symptom = if job.is_some() { "job_crash" } else { "" };
        let (mut root, comp) = root_signal(
            world,
            &mut extra_rng,
            &hard_table,
            t,
            (pl.node, Some(pl.gpu)),
            job,
            symptom,
        );
        if job.is_none() && comp == "gpu" {
            root.symptom = Some("node_down");
        }
        let mut sigs = vec![root];
        if let Some(j) = job {
            let exit = extra_rng.chance(0.6).then(|| super::WATCHDOG_EXIT.to_string());
            world.cascade(&mut extra_rng, &mut sigs, j, symptom, exit);
        }
        if world.commit(sigs, Some(("hardware", comp)), pool) {
            truth.bad_lot_failures += 1;
        }
    }

    // Hard failures in time order: each removes its part, and a replacement fills the slot.
    let mut failures: Vec<(i64, usize, u32)> = world
        .kept
        .iter()
        .filter(|k| k.category == "hardware" && hard(k.kind, k.code, k.component))
        .filter_map(|k| Some((k.t, k.node?, k.gpu?)))
        .collect();
    failures.sort_unstable();
    truth.hard_failures = failures.len();
    let mut rng = Rng::new(seed, 10);
    // Per pool: repaired parts (part, ready at, the node it left).
    let mut spares: Vec<Vec<(usize, i64, usize)>> = vec![Vec::new(); POOLS.len()];
    let covering = |placements: &[Placement], n: usize, g: u32, t: i64| {
        placements
            .iter()
            .position(|p| p.node == n && p.gpu == g && p.from <= t && t < p.to)
    };
    for &(t, n, g) in &failures {
        let Some(i) = covering(&placements, n, g, t) else {
            continue;
        };
        if placements[i].to != i64::MAX {
            continue; // its removal is already on its way
        }
        let (pool, end) = (world.nodes[n].pool, world.nodes[n].to.min(world.w));
        let removed = t + rng.range(2 * HOUR, 48 * HOUR);
        if removed >= end {
            continue;
        }
        let part = placements[i].part;
        placements[i].to = removed;
        let rma = rng.chance(P_RMA);
        let reason = if rma { "rma" } else { "failed" };
        let ticket = format!("{}-{:06}", if rma { "RMA" } else { "INC" }, rng.range(100_000, 999_999));
        steps.push((removed, steps.len(), Step::Removal { part, reason, ticket }));
        truth.removals += 1;
        truth.rma += usize::from(rma);
        if rma && rng.chance(P_REPAIRED) {
            spares[pool].push((part, removed + rng.range(7 * DAY, 21 * DAY), n));
        }
        let installed = removed + rng.range(HOUR, 24 * HOUR);
        if installed >= end {
            continue;
        }
        let back = spares[pool]
            .iter()
            .position(|&(_, ready, left)| ready <= installed && left != n);
        let replacement = match back {
            Some(k) => {
                let (p, ..) = spares[pool].remove(k);
                truth.returned.push(parts[p].serial.clone());
                p
            }
            None => new_part(&mut parts, pool, has_lots(pool).then_some(NEW_LOT)),
        };
        placements.push(Placement {
            part: replacement,
            node: n,
            gpu: g,
            from: installed,
            to: i64::MAX,
        });
        steps.push((installed, steps.len(), Step::Report(n)));
    }
    // A node leaving service reports no GPU.
    for (n, node) in world.nodes.iter().enumerate() {
        if node.to < world.w && node.from < node.to {
            for p in placements.iter_mut().filter(|p| p.node == n && p.to > node.to) {
                p.to = node.to;
            }
            steps.push((node.to, steps.len(), Step::Report(n)));
        }
    }

    // Early signals before a share of the hard failures, on the same part, and a background.
    let mut early_rng = Rng::new(seed, 11);
    let early = |rng: &mut Rng, t: i64, n: usize, g: u32| {
        let s = if rng.chance(0.6) {
            let m = format!("Corrected ECC error count increased on GPU {g}: single-bit error corrected by hardware");
            Sig::new(t, "ecc", m).code(1)
        } else {
            let m = format!("Row remapping pending on GPU {g}: the remap is applied at the next GPU reset");
            Sig::new(t, "row_remap", m)
        };
        // Counters an agent reports for the record: they interrupted nothing, so never a failure.
        s.on(Some(n), None).gpu(g).symptom("none")
    };
    let mut signals = Vec::new();
    for &(t, n, g) in &failures {
        if !early_rng.chance(P_PRECURSOR) {
            continue;
        }
        let Some(i) = covering(&placements, n, g, t) else {
            continue;
        };
        let since = placements[i].from.max(world.nodes[n].from).max(0);
        let mut any = false;
        for _ in 0..early_rng.range(1, 4) {
            let at = t - early_rng.range(2 * HOUR, 6 * DAY);
            if at >= since {
                signals.push(early(&mut early_rng, at, n, g));
                any = true;
            }
        }
        truth.preceded += usize::from(any);
    }
    for (n, node) in world.nodes.iter().enumerate() {
        let (lo, hi) = (node.from.max(0), node.to.min(world.w));
        for g in 0..POOLS[node.pool].3 {
            let mut t = lo;
            loop {
                t += (early_rng.exp(1.0 / BACKGROUND_RATE) * DAY as f64) as i64;
                if t >= hi {
                    break;
                }
                signals.push(early(&mut early_rng, t, n, g));
            }
        }
    }
    truth.early_signals = signals.len();
    world.sigs.extend(signals);

    // Render: each report is its node's slots at that time.
    steps.sort_by_key(|(t, seq, _)| (*t, *seq));
    let steps = steps
        .into_iter()
        .map(|(t, _, step)| match step {
            Step::Report(n) => {
                let node = &world.nodes[n];
                let mut here: Vec<&Placement> = placements
                    .iter()
                    .filter(|p| p.node == n && p.from <= t && t < p.to)
                    .collect();
                here.sort_by_key(|p| p.gpu);
                let gpus: Vec<Value> = here
                    .iter()
                    .map(|p| {
                        let part = &parts[p.part];
                        json!({"index": p.gpu, "pci_bus_id": format!("00000000:{}:00.0", PCI[p.gpu as usize % 8]),
                               "uuid": part.uuid, "serial": part.serial, "model": POOLS[part.pool].2})
                    })
                    .collect();
                json!({"inventory": {"cluster": POOLS[node.pool].0, "hostname": node.host,
                                     "observed_at": rfc3339(base, t), "gpus": gpus}})
            }
            Step::Removal { part, reason, ticket } => {
                let p = &parts[part];
                json!({"removal": {"part": p.serial, "cluster": POOLS[p.pool].0, "at": rfc3339(base, t),
                                   "reason": reason, "ticket": ticket,
                                   "note": if reason == "rma" { "sent to the vendor" } else { "scrapped" }}})
            }
        })
        .collect();
    let mut history = Vec::new();
    for p in &parts {
        if let Some(lot) = p.lot {
            *truth.lots.entry(lot.to_string()).or_default() += 1;
            history.push(json!({"cluster": POOLS[p.pool].0, "serial": p.serial, "attributes": {"lot": lot}}));
        }
    }
    truth.parts = parts.len();
    Output { steps, history, truth }
}

#[cfg(test)]
mod tests {
    use super::super::{SimConfig, simulate};
    use super::*;

    #[test]
    fn parts_are_deterministic_consistent_and_the_bad_lot_fails_more() {
        let f = simulate(&SimConfig::default());
        let t = &f.truth.parts;
        assert_eq!(t, &simulate(&SimConfig::default()).truth.parts);
        eprintln!("{t:?}");
        // Every simulated GPU has a part; every removal is a step; a return goes to another node.
        let gpus: i64 = f.nodes.iter().map(|n| n["gpu_count"].as_i64().unwrap()).sum();
        assert!(
            t.parts as i64 >= gpus && t.parts as i64 <= gpus + t.removals as i64,
            "{t:?}"
        );
        let removals = f.gpu_steps.iter().filter(|s| s.get("removal").is_some()).count();
        assert_eq!(removals, t.removals);
        assert!(t.removals >= 20 && t.rma > 5 && !t.returned.is_empty(), "{t:?}");
        assert!(t.preceded * 3 > t.hard_failures && t.bad_lot_failures > 5, "{t:?}");
        let mut last = String::new();
        for s in &f.gpu_steps {
            let at = s["inventory"]["observed_at"]
                .as_str()
                .or(s["removal"]["at"].as_str())
                .unwrap()
                .to_string();
            assert!(at >= last, "steps in time order");
            last = at;
        }
        // A returned part left one node by removal and is later reported by another.
        let serial = &t.returned[0];
        let mut seen: Vec<&str> = Vec::new();
        for s in &f.gpu_steps {
            if let Some(gpus) = s["inventory"]["gpus"].as_array()
                && gpus.iter().any(|g| g["serial"] == serial.as_str())
            {
                seen.push(s["inventory"]["hostname"].as_str().unwrap());
            }
        }
        seen.dedup();
        assert!(seen.len() >= 2, "{seen:?}");
        // The bad lot's share of removals exceeds its share of parts.
        let lot_of: std::collections::HashMap<&str, &str> = f
            .gpu_history
            .iter()
            .map(|p| (p["serial"].as_str().unwrap(), p["attributes"]["lot"].as_str().unwrap()))
            .collect();
        let bad = f
            .gpu_steps
            .iter()
            .filter_map(|s| s["removal"]["part"].as_str())
            .filter(|p| lot_of.get(p) == Some(&BAD_LOT))
            .count();
        assert!(bad * 4 > t.removals, "{bad} of {}", t.removals);
    }
}
