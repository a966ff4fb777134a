//! Deterministic fleet simulator: a GPU training fleet, its job schedule and the failure signals its
//! agents would send, as the JSON items that `PUT /v1/nodes` and `POST /v1/events` accept.
//!
//! Pure: no I/O, no clock, no OS randomness. One seeded xoshiro256** stream per phase, so the same
//! [`SimConfig`] gives byte-identical output and each phase's draws do not perturb the others.
//!
//! Calibration (the published figures of `analytics::baselines`): a 128-GPU group fails a few times a week (Unicron), newer
//! generations fail more, root causes hardware : platform : user near 2 : 2 : 3 overall (ICSE 2023) but
//! hardware dominates big jobs (Llama 3), hardware splits node/host > network > GPU, a few lemon nodes
//! fail repeatedly, stragglers slow jobs down (MegaScale), and faults surface as NCCL timeouts on the
//! other nodes of the job (Alibaba C4).
//!
//! Each failure's signals lie within [`SPAN`] of its root signal, and distinct failures (and benign
//! signals) are more than [`SEPARATION`] apart on every node and job they touch, so a server that folds
//! the signals of one job (else node) with gaps up to 10 minutes forms exactly `truth.failures` failures,
//! whose root categories are `truth.by_category` under the built-in catalog. Benign signals (slowdown,
//! low_utilization, symptom `none`) never take part in failures (`crate::fold::participates`).

use std::collections::BTreeMap;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Map, Value, json};
use uuid::Uuid;

mod parts;
pub use parts::{BAD_LOT, PartsTruth};

const MIN: i64 = 60;
const HOUR: i64 = 3600;
const DAY: i64 = 86_400;
/// All signals of one failure lie within this of its root signal (under the 10-minute fold window).
const SPAN: i64 = 9 * MIN + 30;
/// Minimum gap between signals of distinct failures sharing a node or job (> the 10-minute window).
const SEPARATION: i64 = 11 * MIN;
/// Stable namespace for event ids: v5(namespace, "seed/counter").
const ID_NAMESPACE: Uuid = Uuid::from_u128(0x6661_756c_746c_696e_6573_696d_0000_0001);

pub struct SimConfig {
    pub seed: u64,
    pub start: DateTime<Utc>,
    pub days: u32,
    /// Scale: total nodes across clusters (default 256 nodes ≈ 2,048 GPUs).
    pub nodes: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 42,
            start: Utc.with_ymd_and_hms(2026, 10, 1, 0, 0, 0).unwrap(),
            days: 28,
            nodes: 256,
        }
    }
}

pub struct SimulatedFleet {
    /// NodeInput JSON objects.
    pub nodes: Vec<Value>,
    /// EventInput JSON objects, sorted by `occurred_at`.
    pub events: Vec<Value>,
    /// JobInput JSON objects (`PUT /v1/jobs`): every job that ran in the window, in id order; refused
    /// submissions never ran and are only signals.
    pub jobs: Vec<Value>,
    /// Drains and returns (`POST /v1/nodes/{cluster}/{hostname}/state`), in time order: `cluster`,
    /// `hostname`, and the body's `state`, `at`, `reason`.
    pub node_states: Vec<Value>,
    /// What engineers record after failures (`PATCH /v1/failures/{id}`), in time order. A failure is
    /// named by `cluster`, `first_at` (its first signal) and `job_id`, else `node`: the simulated
    /// failures of one job or node lie more than [`SEPARATION`] apart, so that names exactly one.
    /// `patch` is the LifecyclePatch body: resolution, recovery phases, sometimes a post-mortem cause.
    pub lifecycles: Vec<Value>,
    /// The GPU parts' changes, in time order: `{"inventory": {...}}`, a node's GPU set as
    /// `PUT /v1/gpus/inventory` takes it (every node's at its entry into service, then after each
    /// replacement, and an empty one when it leaves service), or `{"removal": {...}}`, a part retired
    /// (`part`, `cluster`, and the `POST /v1/gpus/{part}/removals` body's `at`, `reason`, `ticket`, `note`).
    pub gpu_steps: Vec<Value>,
    /// Parts' vendor lots as `POST /v1/gpus/history` takes them (`parts`), sent after the steps.
    pub gpu_history: Vec<Value>,
    /// What was injected, for tests and demos.
    pub truth: GroundTruth,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroundTruth {
    /// Failures injected (the count the server should form).
    pub failures: usize,
    /// Failures by the category of their root signal (explicit `root_cause` if sent, else the catalog's).
    pub by_category: BTreeMap<String, usize>,
    /// Failures by GPU generation of their node or job ("volta", "ampere", "ada", "hopper", "blackwell").
    pub by_generation: BTreeMap<String, usize>,
    /// Job ids submitted or running during the window (including refused submissions and jobs still
    /// queued at its end); only those with a signal appear in `events`.
    pub jobs: usize,
    /// Benign signals (slowdown, low_utilization, passing health checks with symptom `none`): not failures.
    pub benign: usize,
    /// GPU parts: serials, removals, returns from repair, the bad lot, early signals.
    pub parts: PartsTruth,
}

/// (cluster, host prefix, model, GPUs per node, share of nodes, generation, hardware failures per node-day).
/// Hardware rates rise with generation (domain.md: newer GPUs show higher error rates).
const POOLS: [(&str, &str, &str, u32, f64, &str, f64); 6] = [
    (
        "train-a",
        "h100-a",
        "NVIDIA H100 80GB HBM3",
        8,
        144.0 / 256.0,
        "hopper",
        0.015,
    ),
    (
        "train-a",
        "a100-a",
        "NVIDIA A100-SXM4-80GB",
        8,
        40.0 / 256.0,
        "ampere",
        0.011,
    ),
    ("train-b", "h800-b", "NVIDIA H800", 8, 24.0 / 256.0, "hopper", 0.015),
    ("train-b", "b200-b", "NVIDIA B200", 8, 24.0 / 256.0, "blackwell", 0.021),
    (
        "train-b",
        "v100-b",
        "Tesla V100-SXM2-32GB",
        8,
        12.0 / 256.0,
        "volta",
        0.007,
    ),
    ("train-b", "l40s-b", "NVIDIA L40S", 4, 12.0 / 256.0, "ada", 0.008),
];
/// Platform (driver, runtime, storage mount) and unclassifiable faults per node-day, all generations.
const PLATFORM_NODE_RATE: f64 = 0.003;
const UNKNOWN_NODE_RATE: f64 = 0.0008;
/// Lemons fail this many times more often than their peers.
const LEMON_FACTOR: f64 = 10.0;
/// Job sizes in GPUs, their share of submissions and duration range in hours: many small jobs, few huge.
const SIZES: [u32; 5] = [8, 64, 128, 512, 1024];
const SIZE_WEIGHT: [f64; 5] = [0.50, 0.20, 0.22, 0.06, 0.02];
const DURATION_H: [(f64, f64); 5] = [(2.0, 48.0), (4.0, 48.0), (12.0, 72.0), (24.0, 96.0), (48.0, 168.0)];
/// User- and platform-caused job ends per node-hour of a job of each size. Per exposure, not per job,
/// so pools of many small jobs do not dwarf big pools; mature big jobs rarely fail on user code, which
/// leaves them hardware-dominated (Llama 3).
const R_USER: [f64; 5] = [0.0020, 0.0020, 0.0018, 0.00004, 0.00004];
const R_PLATFORM: [f64; 5] = [0.0016, 0.0016, 0.0014, 0.00004, 0.00004];
/// Per-submission probability that the scheduler refuses it first (user error 60%, platform 40%).
const P_SUBMIT_FAIL: f64 = 0.06;
/// PCI bus of GPU i on an HGX board, for realistic XID lines.
const PCI: [&str; 8] = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"];

/// xoshiro256** seeded by splitmix64: small, fast, and identical on every platform.
pub(crate) struct Rng([u64; 4]);

impl Rng {
    pub(crate) fn new(seed: u64, stream: u64) -> Self {
        let mut x = seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03);
        let mut s = [0u64; 4];
        for v in &mut s {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            *v = z ^ (z >> 31);
        }
        Rng(s)
    }
    pub(crate) fn next(&mut self) -> u64 {
        let s = &mut self.0;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }
    pub(crate) fn f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((self.f64() * n as f64) as usize).min(n.saturating_sub(1))
    }
    /// Uniform in [lo, hi).
    pub(crate) fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            lo
        } else {
            lo + (self.f64() * (hi - lo) as f64) as i64
        }
    }
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }
    pub(crate) fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }
    fn weighted(&mut self, w: &[f64]) -> usize {
        let mut x = self.f64() * w.iter().sum::<f64>();
        for (i, wi) in w.iter().enumerate() {
            x -= wi;
            if x < 0.0 {
                return i;
            }
        }
        w.len() - 1
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

struct Node {
    host: String,
    pool: usize,
    /// Service interval in seconds from the window start; `to` is i64::MAX when not retired.
    from: i64,
    to: i64,
    lemon: bool,
    straggler: bool,
    /// (start, end, job index), in start order.
    jobs: Vec<(i64, i64, usize)>,
}

enum Fate {
    Done,
    User(i64),
    Platform(i64),
    /// Refused at submission; `true` when the user's request was at fault.
    Refused(bool),
}

struct Job {
    id: String,
    pool: usize,
    gpus: u32,
    nodes: Vec<usize>,
    start: i64,
    end: i64,
    fate: Fate,
}

/// One signal before serialisation; times are seconds from the window start.
#[derive(Clone)]
struct Sig {
    t: i64,
    node: Option<usize>,
    job: Option<usize>,
    gpu: Option<u32>,
    kind: &'static str,
    code: Option<i64>,
    symptom: Option<&'static str>,
    cause: Option<(&'static str, &'static str)>,
    msg: String,
    attrs: Map<String, Value>,
}

impl Sig {
    fn new(t: i64, kind: &'static str, msg: impl Into<String>) -> Self {
        Sig {
            t,
            node: None,
            job: None,
            gpu: None,
            kind,
            code: None,
            symptom: None,
            cause: None,
            msg: msg.into(),
            attrs: Map::new(),
        }
    }
    fn on(mut self, node: Option<usize>, job: Option<usize>) -> Self {
        self.node = node;
        self.job = job;
        self
    }
    fn gpu(mut self, g: u32) -> Self {
        self.gpu = Some(g);
        self
    }
    fn code(mut self, c: i64) -> Self {
        self.code = Some(c);
        self
    }
    fn symptom(mut self, s: &'static str) -> Self {
        self.symptom = Some(s);
        self
    }
    fn attr(mut self, k: &str, v: Value) -> Self {
        self.attrs.insert(k.into(), v);
        self
    }
}

/// A failure as committed: what its lifecycle is drawn from.
struct Kept {
    t: i64,
    node: Option<usize>,
    job: Option<usize>,
    category: &'static str,
    component: &'static str,
    hang: bool,
    pool: usize,
    /// The root signal's GPU index, kind and code (what the part analytics resolve and classify).
    gpu: Option<u32>,
    kind: &'static str,
    code: Option<i64>,
}

struct World {
    w: i64,
    kept: Vec<Kept>,
    nodes: Vec<Node>,
    jobs: Vec<Job>,
    sigs: Vec<Sig>,
    busy_node: Vec<Vec<(i64, i64)>>,
    busy_job: Vec<Vec<(i64, i64)>>,
    truth: GroundTruth,
}

pub fn simulate(cfg: &SimConfig) -> SimulatedFleet {
    let w = i64::from(cfg.days) * DAY;
    let nodes = build_nodes(cfg, &mut Rng::new(cfg.seed, 1));
    let mut world = World {
        w,
        busy_node: vec![Vec::new(); nodes.len()],
        nodes,
        jobs: Vec::new(),
        sigs: Vec::new(),
        busy_job: Vec::new(),
        kept: Vec::new(),
        truth: GroundTruth::default(),
    };
    schedule_jobs(&mut world, &mut Rng::new(cfg.seed, 2));
    world.busy_job = vec![Vec::new(); world.jobs.len()];
    world.truth.jobs = world.jobs.len();
    // Job-level faults first (they also ended their jobs in the schedule), then node-level faults
    // wherever they still fit, then benign noise in the gaps.
    job_failures(&mut world, &mut Rng::new(cfg.seed, 3));
    node_failures(&mut world, &mut Rng::new(cfg.seed, 4));
    noise(&mut world, &mut Rng::new(cfg.seed, 5));
    let parts = parts::simulate_parts(&mut world, cfg.seed, cfg.start.timestamp());
    world.truth.parts = parts.truth.clone();
    render(cfg, world, parts)
}

fn build_nodes(cfg: &SimConfig, rng: &mut Rng) -> Vec<Node> {
    let n = cfg.nodes as usize;
    // Largest-remainder apportionment so pool sizes always sum to `nodes`.
    let exact: Vec<f64> = POOLS.iter().map(|p| p.4 * n as f64).collect();
    let mut counts: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..POOLS.len()).collect();
    order.sort_by(|&a, &b| {
        (exact[b] - exact[b].floor())
            .total_cmp(&(exact[a] - exact[a].floor()))
            .then(a.cmp(&b))
    });
    for &i in order.iter().cycle().take(n - counts.iter().sum::<usize>()) {
        counts[i] += 1;
    }
    let w = i64::from(cfg.days) * DAY;
    let mut nodes = Vec::with_capacity(n);
    for (p, &count) in counts.iter().enumerate() {
        for i in 0..count {
            // The newest nodes of a pool (highest hostnames) are the unlabelled tail: a few of them
            // enter service mid-window, as an expansion would.
            let late = i >= count * 9 / 10 && rng.chance(0.3) && w > 6 * DAY;
            let from = if late {
                rng.range(2 * DAY, w - 4 * DAY)
            } else {
                -rng.range(60 * DAY, 900 * DAY)
            };
            nodes.push(Node {
                host: format!("{}-{i:04}", POOLS[p].1),
                pool: p,
                from,
                to: i64::MAX,
                lemon: false,
                straggler: false,
                jobs: Vec::new(),
            });
        }
    }
    // About 2% of the nodes retire mid-window; 2% are lemons; 0.5% are stragglers (MegaScale).
    let mark = |rng: &mut Rng, share: f64| -> Vec<usize> {
        let k = ((n as f64 * share).round() as usize).max(1).min(n);
        let mut idx: Vec<usize> = (0..n).collect();
        for i in 0..k {
            let j = i + rng.below(n - i);
            idx.swap(i, j);
        }
        idx.truncate(k);
        idx
    };
    if n > 0 {
        for i in mark(rng, 0.02) {
            if nodes[i].from < 0 && w > 6 * DAY {
                nodes[i].to = rng.range(5 * DAY, w - DAY);
            }
        }
        for i in mark(rng, 0.02) {
            nodes[i].lemon = true;
        }
        for i in mark(rng, 0.005) {
            nodes[i].straggler = true;
        }
    }
    nodes
}

/// Nodes of pool `p`, in hostname order.
fn pool_nodes(nodes: &[Node], p: usize) -> Vec<usize> {
    (0..nodes.len()).filter(|&i| nodes[i].pool == p).collect()
}

/// A simple reserving scheduler per pool: each job takes the k nodes that free up first (so big jobs
/// hold nodes idle until the last one frees), starting three days before the window so it opens busy.
fn schedule_jobs(world: &mut World, rng: &mut Rng) {
    let mut planned: Vec<(i64, Job)> = Vec::new();
    for (p, pool) in POOLS.iter().enumerate() {
        let members = pool_nodes(&world.nodes, p);
        let per_node = pool.3;
        // Sizes that fit in 90% of the pool, so the biggest job never waits for every node.
        let fits: Vec<bool> = SIZES
            .iter()
            .map(|&g| (g.div_ceil(per_node) as usize) * 10 <= members.len() * 9)
            .collect();
        if !fits.iter().any(|&f| f) {
            continue;
        }
        let weights: Vec<f64> = (0..5).map(|s| if fits[s] { SIZE_WEIGHT[s] } else { 0.0 }).collect();
        // Mean node-hours per job, to submit at ~90% of the pool's capacity.
        let demand: f64 = (0..5)
            .map(|s| {
                let (lo, hi) = DURATION_H[s];
                weights[s] * f64::from(SIZES[s].div_ceil(per_node)) * (hi - lo) / (hi / lo).ln()
            })
            .sum::<f64>()
            / weights.iter().sum::<f64>();
        let gap = demand * HOUR as f64 / (0.9 * members.len() as f64);
        let mut free: Vec<i64> = members.iter().map(|&i| world.nodes[i].from.max(-3 * DAY)).collect();
        let mut arrival = -3 * DAY;
        loop {
            arrival += rng.exp(gap) as i64 + 1;
            if arrival >= world.w {
                break;
            }
            let s = rng.weighted(&weights);
            let k = SIZES[s].div_ceil(per_node) as usize;
            let (lo, hi) = DURATION_H[s];
            let dur = (lo * (hi / lo).powf(rng.f64()) * HOUR as f64) as i64;
            if rng.chance(P_SUBMIT_FAIL) {
                let t = arrival - rng.range(5 * MIN, 30 * MIN);
                let refused = Job {
                    id: String::new(),
                    pool: p,
                    gpus: SIZES[s],
                    nodes: vec![],
                    start: t,
                    end: t,
                    fate: Fate::Refused(rng.chance(0.6)),
                };
                planned.push((t, refused));
            }
            let mut cand: Vec<(i64, usize)> = (0..members.len())
                .map(|j| (arrival.max(free[j]), j))
                .filter(|&(t, j)| world.nodes[members[j]].to > t + dur)
                .collect();
            if cand.len() < k {
                continue;
            }
            cand.sort_unstable();
            cand.truncate(k);
            let start = cand[k - 1].0;
            let retire = cand
                .iter()
                .map(|&(_, j)| world.nodes[members[j]].to)
                .min()
                .unwrap_or(i64::MAX);
            let mut end = (start + dur).min(retire.saturating_sub(HOUR));
            if end - start < HOUR {
                continue; // a chosen node retires first; the job goes elsewhere (dropped here)
            }
            // A user or platform fault ends the job: often early (bad config, OOM), else anywhere.
            let fault_at = |rng: &mut Rng| {
                let t = if rng.chance(0.5) {
                    start + rng.range(3 * MIN, 40 * MIN)
                } else {
                    rng.range(start + 3 * MIN, end)
                };
                if t >= end - MIN { start + (end - start) / 2 } else { t }
            };
            let node_hours = (k as f64) * (end - start) as f64 / HOUR as f64;
            let fate = if rng.chance(1.0 - (-node_hours * R_USER[s]).exp()) {
                Fate::User(fault_at(rng))
            } else if rng.chance(1.0 - (-node_hours * R_PLATFORM[s]).exp()) {
                Fate::Platform(fault_at(rng))
            } else {
                Fate::Done
            };
            if let Fate::User(t) | Fate::Platform(t) = fate {
                end = end.min(t + 10 * MIN);
            }
            for &(_, j) in &cand {
                free[j] = end + rng.range(10 * MIN, 30 * MIN); // epilog, node health check
            }
            let nodes = cand.iter().map(|&(_, j)| members[j]).collect();
            planned.push((
                arrival,
                Job {
                    id: String::new(),
                    pool: p,
                    gpus: SIZES[s],
                    nodes,
                    start,
                    end,
                    fate,
                },
            ));
        }
    }
    // Ids follow submission order across the fleet, as a single scheduler would issue them.
    planned.sort_by_key(|(t, j)| (*t, j.pool));
    for (t, mut job) in planned {
        if job.end <= 0 && t < 0 {
            continue;
        }
        job.id = format!("job-{:06}", world.jobs.len() + 1);
        let idx = world.jobs.len();
        for &n in &job.nodes {
            world.nodes[n].jobs.push((job.start, job.end, idx));
        }
        world.jobs.push(job);
    }
    for n in &mut world.nodes {
        n.jobs.sort_unstable();
    }
}

impl World {
    fn cluster(&self, s: &Sig) -> &'static str {
        let pool = s
            .node
            .map(|n| self.nodes[n].pool)
            .or(s.job.map(|j| self.jobs[j].pool))
            .unwrap_or(0);
        POOLS[pool].0
    }

    /// Keeps a failure (or benign signal group) only if it stays inside the window and its nodes' service,
    /// and lies more than SEPARATION from everything already kept on the same nodes and jobs.
    fn commit(&mut self, sigs: Vec<Sig>, cause: Option<(&'static str, &'static str)>, pool: usize) -> bool {
        let a = sigs.iter().map(|s| s.t).min().unwrap_or(0);
        let b = sigs.iter().map(|s| s.t).max().unwrap_or(0);
        if a < 0 || b >= self.w || b - a > SPAN {
            return false;
        }
        let clear = |list: &Vec<(i64, i64)>| list.iter().all(|&(s, e)| b + SEPARATION < s || a > e + SEPARATION);
        for s in &sigs {
            if let Some(n) = s.node {
                let node = &self.nodes[n];
                if s.t < node.from || s.t >= node.to || !clear(&self.busy_node[n]) {
                    return false;
                }
            }
            if let Some(j) = s.job
                && !clear(&self.busy_job[j])
            {
                return false;
            }
        }
        for s in &sigs {
            if let Some(n) = s.node {
                self.busy_node[n].push((a, b));
            }
            if let Some(j) = s.job {
                self.busy_job[j].push((a, b));
            }
        }
        match cause {
            Some((c, component)) => {
                self.truth.failures += 1;
                *self.truth.by_category.entry(c.to_string()).or_default() += 1;
                *self.truth.by_generation.entry(POOLS[pool].5.to_string()).or_default() += 1;
                let root = &sigs[0];
                self.kept.push(Kept {
                    t: a,
                    node: root.node,
                    job: root.job,
                    category: c,
                    component,
                    hang: root.symptom == Some("job_hang"),
                    pool,
                    gpu: root.gpu,
                    kind: root.kind,
                    code: root.code,
                });
            }
            None => self.truth.benign += 1,
        }
        self.sigs.extend(sigs);
        true
    }

    /// The job running on `node` at `t`, if any.
    fn job_at(&self, node: usize, t: i64) -> Option<usize> {
        self.nodes[node]
            .jobs
            .iter()
            .find(|&&(s, e, _)| s <= t && t < e)
            .map(|&(_, _, j)| j)
    }

    /// What the rest of a job sees when one rank dies (the root signal is `out[0]`): NCCL watchdog
    /// timeouts from up to 32 other nodes within 1-9 minutes, then often the launcher's exit record.
    fn cascade(&self, rng: &mut Rng, out: &mut Vec<Sig>, job: usize, symptom: &'static str, exit: Option<String>) {
        let (t, root) = (out[0].t, out[0].node);
        let j = &self.jobs[job];
        let mut others: Vec<usize> = j.nodes.iter().copied().filter(|&n| Some(n) != root).collect();
        let k = others.len().min(32);
        for i in 0..k {
            let x = i + rng.below(others.len() - i);
            others.swap(i, x);
        }
        let sym = if symptom == "job_crash" {
            "job_crash"
        } else {
            "job_hang"
        };
        let per = POOLS[j.pool].3 as i64;
        for &n in &others[..k] {
            let rank = j.nodes.iter().position(|&x| x == n).unwrap_or(0) as i64 * per;
            let msg = format!(
                "[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={}, OpType=ALLREDUCE, Timeout(ms)=600000) ran for {} milliseconds before timing out.",
                rng.range(1_000, 900_000),
                600_000 + rng.range(1, 900)
            );
            out.push(
                Sig::new(t + rng.range(MIN, 9 * MIN), "nccl_timeout", msg)
                    .on(Some(n), Some(job))
                    .symptom(sym)
                    .attr("rank", json!(rank))
                    .attr("timeout_ms", json!(600_000)),
            );
        }
        if let Some(m) = exit {
            let rank0 = j.nodes[0];
            out.push(
                Sig::new(t + rng.range(9 * MIN, SPAN), "job_exit", m)
                    .on(Some(rank0), Some(job))
                    .symptom(sym)
                    .code(1)
                    .attr("exit_code", json!(1)),
            );
        }
    }
}

fn xid_line(g: u32, code: i64, job: bool, text: &str, pid: i64) -> String {
    let who = if job {
        format!("pid={pid}, name=python")
    } else {
        "pid='<unknown>', name=<unknown>".into()
    };
    format!("NVRM: Xid (PCI:0000:{}:00): {code}, {who}, {text}", PCI[g as usize % 8])
}

const WATCHDOG_EXIT: &str = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED: [Rank 0] Watchdog caught collective operation timeout";

/// Root-signal templates: (component, weight, kind, code or 0, symptom or "" for the failure's, text);
/// a failure's symptom "" means none sent (an idle node's fault: no job saw it). Never `none`: the server
/// ignores signals with symptom `none` when it forms failures.
/// in the text {g} is the GPU index, {x} a small number, {n} a large one, {job} the job id.
type Template = (&'static str, f64, &'static str, i64, &'static str, &'static str);

/// Weights follow ICSE 2023 (node/host 16 : network 7 : GPU 5.5), the GPU share split three ways.
const HARDWARE: [Template; 17] = [
    (
        "cpu",
        0.21,
        "kernel_panic",
        0,
        "node_down",
        "Kernel panic - not syncing: Fatal machine check on CPU {x}",
    ),
    (
        "pcie",
        0.09,
        "health_check",
        0,
        "",
        "PCIe Bus Error: severity=Uncorrected (Fatal), AER: Completion Timeout",
    ),
    (
        "power",
        0.08,
        "power",
        0,
        "node_down",
        "PSU {x} failure: power supply redundancy lost, node powered off",
    ),
    ("cooling", 0.05, "fan", 0, "", "Fan {x} failed (0 RPM)"),
    (
        "cooling",
        0.05,
        "thermal",
        0,
        "",
        "GPU {g} over-temperature (9{x} C), clocks throttled",
    ),
    (
        "network",
        0.09,
        "link_flap",
        0,
        "",
        "mlx5_core: ib{x} link flapped 4 times in 60 s",
    ),
    ("network", 0.09, "link_down", 0, "", "ib{x}: port 1 link down"),
    ("network", 0.08, "health_check", 0, "", "NIC mlx5_{x} link down"),
    ("gpu", 0.08, "xid", 79, "", "GPU has fallen off the bus."),
    ("gpu", 0.02, "xid", 62, "", "Internal micro-controller halt."),
    (
        "gpu_memory",
        0.02,
        "xid",
        48,
        "",
        "An uncorrectable double bit ECC error was detected.",
    ),
    ("gpu_memory", 0.02, "xid", 94, "", "Contained ECC error."),
    ("gpu_memory", 0.01, "xid", 95, "", "Uncontained ECC error."),
    (
        "gpu_memory",
        0.025,
        "ecc",
        2,
        "",
        "Volatile uncorrectable ECC error count increased on GPU {g}",
    ),
    ("gpu_memory", 0.025, "health_check", 0, "", "DBE detected on GPU {g}"),
    (
        "nvlink",
        0.036,
        "xid",
        74,
        "",
        "NVLink: fatal error detected on link {x}",
    ),
    (
        "nvlink",
        0.024,
        "sxid",
        20034,
        "",
        "SXid (PCI:0000:05:00.0): 20034, Fatal, Link 4{x} LTSSM Fault Up",
    ),
];
/// Platform faults seen on a node: driver/GSP, container runtime, storage mount.
const PLATFORM_NODE: [Template; 6] = [
    (
        "driver",
        1.0,
        "xid",
        119,
        "",
        "Timeout after 6s of waiting for RPC response from GPU GSP! Expected function 76.",
    ),
    ("driver", 1.0, "xid", 120, "", "GSP task timeout @ pc:0x{n}"),
    (
        "driver",
        1.0,
        "health_check",
        0,
        "",
        "Failed to initialize NVML: Driver/library version mismatch",
    ),
    (
        "driver",
        1.0,
        "kernel_panic",
        0,
        "",
        "BUG: unable to handle page fault; RIP: nvidia_uvm_fault_handler [nvidia_uvm]",
    ),
    (
        "runtime",
        1.0,
        "health_check",
        0,
        "",
        "containerd: failed to create shim task: OCI runtime create failed: runc",
    ),
    (
        "storage",
        1.0,
        "health_check",
        0,
        "",
        "/lustre not mounted: mount point missing after remount",
    ),
];
/// Signals the catalog cannot place; the NCCL one only occurs inside a job.
const UNKNOWN: [Template; 3] = [
    ("unknown", 1.0, "xid", 8, "", "Channel timeout; GPU stopped processing."),
    (
        "unknown",
        1.0,
        "xid",
        32,
        "",
        "Invalid or corrupted push buffer stream.",
    ),
    (
        "unknown",
        1.0,
        "nccl_error",
        0,
        "",
        "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    ),
];
const TRACEBACK: &str = "Traceback (most recent call last):\n  File \"train.py\", line {n}, in <module>\n    main()\n";
/// User faults ending a job: OOM, code errors, and the model itself (loss NaN).
const USER: [Template; 12] = [
    (
        "oom",
        0.20,
        "gpu_oom",
        0,
        "",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {x}.00 GiB. GPU {g} has 1.19 GiB free.",
    ),
    (
        "code",
        0.06,
        "job_exit",
        0,
        "",
        "{tb}ValueError: Expected input batch_size (32) to match target batch_size (64).",
    ),
    ("code", 0.06, "job_exit", 0, "", "{tb}KeyError: 'attention_mask'"),
    (
        "code",
        0.05,
        "job_exit",
        0,
        "",
        "{tb}TypeError: forward() got an unexpected keyword argument 'use_cache'",
    ),
    (
        "code",
        0.05,
        "job_exit",
        0,
        "",
        "{tb}AttributeError: 'NoneType' object has no attribute 'shape'",
    ),
    (
        "model",
        0.20,
        "job_exit",
        0,
        "abnormal_behavior",
        "RuntimeError: loss is NaN at step {n}; stopping (grad norm inf)",
    ),
    (
        "code",
        0.06,
        "xid",
        13,
        "",
        "Graphics Exception: ESR 0x50df30=0x107000e",
    ),
    (
        "code",
        0.06,
        "xid",
        31,
        "",
        "MMU Fault: ENGINE GRAPHICS faulted @ 0x7f1c_{n}000. Fault is of type FAULT_PDE",
    ),
    (
        "code",
        0.06,
        "cuda_error",
        0,
        "",
        "CUDA error: an illegal memory access was encountered",
    ),
    (
        "oom",
        0.07,
        "host_oom",
        0,
        "",
        "Out of memory: Killed process {n} (python)",
    ),
    (
        "config",
        0.07,
        "storage_error",
        0,
        "",
        "checkpoint write failed: [Errno 13] Permission denied: '/lustre/ckpt/shared'",
    ),
    (
        "code",
        0.06,
        "nccl_error",
        0,
        "",
        "NCCL error in: ProcessGroupNCCL.cpp:1269, invalid usage, ncclInvalidUsage",
    ),
];
/// Platform faults ending a job; a preemption comes from the scheduler, not from a node.
const PLATFORM_JOB: [Template; 5] = [
    (
        "storage",
        1.0,
        "storage_error",
        0,
        "",
        "checkpoint write failed: [Errno 5] Input/output error: '/lustre/ckpt/{job}/step_{n}'",
    ),
    (
        "storage",
        1.0,
        "storage_error",
        0,
        "abnormal_behavior",
        "data loader read timed out after 600 s on /lustre/datasets",
    ),
    (
        "scheduler",
        1.0,
        "scheduler_error",
        0,
        "",
        "JOB {job} preempted by a higher-priority job",
    ),
    (
        "framework",
        1.0,
        "nccl_error",
        0,
        "",
        "NCCL error: ncclInternalError: Internal check failed. Last error: proxy thread stalled",
    ),
    (
        "scheduler",
        1.0,
        "scheduler_error",
        0,
        "",
        "pod evicted: node condition NotReady (kubelet stopped posting status)",
    ),
];

/// Draws a template and renders its root signal on `slot`: node `n` and GPU `g`, drawn when None
/// (inside `job` if any).
fn root_signal(
    world: &World,
    rng: &mut Rng,
    table: &[Template],
    t: i64,
    (n, gpu): (usize, Option<u32>),
    job: Option<usize>,
    symptom: &'static str,
) -> (Sig, &'static str) {
    let (comp, _, kind, code, sym, text) = table[rng.weighted(&table.iter().map(|x| x.1).collect::<Vec<_>>())];
    let g = gpu.unwrap_or_else(|| rng.below(POOLS[world.nodes[n].pool].3 as usize) as u32);
    let msg = text
        .replace("{tb}", TRACEBACK)
        .replace("{g}", &g.to_string())
        .replace("{x}", &rng.range(1, 8).to_string())
        .replace("{n}", &rng.range(100, 90_000).to_string())
        .replace("{job}", job.map_or("", |j| &world.jobs[j].id));
    let msg = if kind == "xid" {
        xid_line(g, code, job.is_some(), &msg, rng.range(1000, 400_000))
    } else {
        msg
    };
    let mut s = Sig::new(t, kind, msg).on(Some(n), job);
    s.symptom = Some(if sym.is_empty() { symptom } else { sym }).filter(|x| !x.is_empty());
    if code != 0 {
        s = s.code(code);
    }
    if matches!(kind, "xid" | "ecc" | "thermal" | "gpu_oom" | "cuda_error") || text.contains("{g}") {
        s = s.gpu(g);
    }
    (s, comp)
}

/// A node-level hardware fault: the root signal(s) on `n`, plus the job's cascade if it was busy.
fn hardware(world: &World, rng: &mut Rng, n: usize, t: i64, job: Option<usize>) -> (Vec<Sig>, &'static str) {
    let symptom = if job.is_some() {
        *rng.pick(&["job_crash", "job_crash", "job_hang"])
    } else {
        ""
    };
    let (mut root, component) = root_signal(world, rng, &HARDWARE, t, (n, None), job, symptom);
    let symptom = match (job.is_some(), component) {
        (true, "cooling") => "abnormal_behavior", // throttled GPUs slow the job down
        (false, "cpu" | "host" | "power" | "gpu") => "node_down",
        _ => symptom,
    };
    if root.symptom != Some("node_down") {
        root.symptom = Some(symptom).filter(|x| !x.is_empty());
    }
    let (kind, code, g) = (root.kind, root.code.unwrap_or(0), root.gpu.unwrap_or(0));
    // XID bursts: the driver repeats a memory or NVLink error a few times within seconds.
    let repeats = if kind == "xid" && !matches!(code, 62 | 79) {
        rng.range(1, 5)
    } else {
        1
    };
    let mut out: Vec<Sig> = (0..repeats)
        .map(|i| Sig {
            t: t + 2 * i,
            ..root.clone()
        })
        .collect();
    if kind == "kernel_panic" {
        let m = format!("{} stopped answering heartbeats", world.nodes[n].host);
        out.push(
            Sig::new(t + rng.range(MIN, 3 * MIN), "node_unreachable", m)
                .on(Some(n), job)
                .symptom("node_down"),
        );
    } else if kind == "xid" && code == 48 {
        let m = xid_line(
            g,
            63,
            job.is_some(),
            "Row remapping event recorded.",
            rng.range(1000, 400_000),
        );
        out.push(
            Sig::new(t + rng.range(10, 30), "xid", m)
                .on(Some(n), job)
                .gpu(g)
                .code(63),
        );
    }
    if let Some(j) = job {
        if component == "network" {
            let m = "NCCL WARN NET/IB : Got completion from peer with error 12, vendor err 129 (Recv) on mlx5_2:1";
            out.push(
                Sig::new(t + rng.range(10, 60), "nccl_error", m)
                    .on(Some(n), job)
                    .symptom(symptom),
            );
        }
        let exit = match component {
            "gpu_memory" => "RuntimeError: CUDA error: uncorrectable ECC error encountered",
            _ => WATCHDOG_EXIT,
        };
        let exit = rng.chance(0.6).then(|| exit.to_string());
        world.cascade(rng, &mut out, j, symptom, exit);
    }
    (out, component)
}

/// Node-level Poisson faults over each node's service time; lemons fail far more often.
fn node_failures(world: &mut World, rng: &mut Rng) {
    for n in 0..world.nodes.len() {
        let node = &world.nodes[n];
        let hw = POOLS[node.pool].6 * if node.lemon { LEMON_FACTOR } else { 1.0 };
        let rates = [hw, PLATFORM_NODE_RATE, UNKNOWN_NODE_RATE];
        let total: f64 = rates.iter().sum();
        let (lo, hi, pool) = (node.from.max(0), node.to.min(world.w) - SPAN, node.pool);
        let mut t = lo;
        loop {
            t += (rng.exp(1.0 / total) * DAY as f64) as i64;
            if t >= hi {
                break;
            }
            let job = world.job_at(n, t);
            let (mut sigs, mut cat, mut comp) = match rng.weighted(&rates) {
                0 => {
                    let (s, c) = hardware(world, rng, n, t, job);
                    (s, "hardware", c)
                }
                k => {
                    let (table, cat): (&[Template], _) = match k {
                        1 => (&PLATFORM_NODE, "platform"),
                        _ if job.is_some() => (&UNKNOWN, "unknown"),
                        _ => (&UNKNOWN[..2], "unknown"),
                    };
                    let symptom = match (job, cat) {
                        (None, _) => "",
                        (_, "platform") => "job_crash",
                        _ => "job_hang",
                    };
                    let (root, comp) = root_signal(world, rng, table, t, (n, None), job, symptom);
                    let mut out = vec![root];
                    if let Some(j) = job {
                        let exit = (cat == "platform" && rng.chance(0.5)).then(|| WATCHDOG_EXIT.to_string());
                        world.cascade(rng, &mut out, j, symptom, exit);
                    }
                    (out, cat, comp)
                }
            };
            if rng.chance(0.10) {
                // An engineer's post-mortem: confirms the cause, or resolves an unknown one.
                let rc = match cat {
                    "unknown" => *rng.pick(&[("hardware", "gpu"), ("platform", "driver"), ("unknown", "unknown")]),
                    _ => (cat, comp),
                };
                (cat, comp) = rc;
                sigs[0].cause = Some(rc);
                sigs[0].attrs.insert("post_mortem".into(), json!(true));
            }
            world.commit(sigs, Some((cat, comp)), pool);
        }
    }
}

/// Faults decided by the schedule: refused submissions, user errors, platform errors ending a job.
fn job_failures(world: &mut World, rng: &mut Rng) {
    for j in 0..world.jobs.len() {
        let job = &world.jobs[j];
        let (pool, multi) = (job.pool, job.nodes.len() > 1);
        let (mut sigs, cat, comp) = match job.fate {
            Fate::Done => continue,
            Fate::Refused(user) => {
                let (m, cat, comp) = if user {
                    let m = *rng.pick(&[
                        "sbatch: error: Invalid account or account/partition combination specified",
                        "sbatch: error: Invalid generic resource (gres) specification",
                        "sbatch: error: QOSMaxGRESPerUser limit exceeded",
                    ]);
                    (m, "user", "config")
                } else {
                    let m = *rng.pick(&[
                        "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
                        "sbatch: error: Batch job submission failed: Unable to contact slurm controller",
                    ]);
                    (m, "platform", "scheduler")
                };
                let s = Sig::new(job.start, "submission_error", m)
                    .on(None, Some(j))
                    .symptom("submission_failure");
                (vec![s], cat, comp)
            }
            Fate::User(t) | Fate::Platform(t) => {
                let (table, cat): (&[Template], _) = if matches!(job.fate, Fate::User(_)) {
                    (&USER, "user")
                } else {
                    (&PLATFORM_JOB, "platform")
                };
                // A user's rank can die anywhere; platform errors surface on the first node (checkpoint writer).
                let n = if cat == "user" {
                    *rng.pick(&job.nodes)
                } else {
                    job.nodes[0]
                };
                let (mut root, comp) = root_signal(world, rng, table, t, (n, None), Some(j), "job_crash");
                if root.kind == "scheduler_error" && root.msg.contains("preempted") {
                    root.node = None;
                }
                let symptom = root.symptom.unwrap_or("job_crash");
                let exit = (root.kind == "xid")
                    .then(|| "RuntimeError: CUDA error: an illegal memory access was encountered".into());
                let mut out = vec![root];
                if multi && out[0].node.is_some() && rng.chance(0.5) {
                    world.cascade(rng, &mut out, j, symptom, exit);
                }
                (out, cat, comp)
            }
        };
        if rng.chance(0.10) {
            sigs[0].cause = Some((cat, comp));
            sigs[0].attrs.insert("post_mortem".into(), json!(true));
        }
        world.commit(sigs, Some((cat, comp)), pool);
    }
}

/// Benign signals (~1% of events): straggler slowdowns, low-utilisation reports with the ICSE 2024
/// cause mix, and passing health checks.
fn noise(world: &mut World, rng: &mut Rng) {
    let days = world.w as f64 / DAY as f64;
    for n in 0..world.nodes.len() {
        let (lo, hi, straggler, pool) = {
            let node = &world.nodes[n];
            (node.from.max(0), node.to.min(world.w) - MIN, node.straggler, node.pool)
        };
        if hi <= lo {
            continue;
        }
        let count = if straggler {
            (days * 0.6) as usize
        } else {
            usize::from(rng.chance(0.06))
        };
        for _ in 0..count {
            let t = rng.range(lo, hi);
            let job = world.job_at(n, t);
            let s = if straggler && job.is_some() {
                let ratio = (rng.range(13, 21) as f64) / 10.0;
                Sig::new(
                    t,
                    "slowdown",
                    format!("step time {ratio:.1}x the job median on this rank"),
                )
                .symptom("slowdown")
                .attr("step_time_ratio", json!(ratio))
            } else if job.is_some() {
                let cause = [
                    "batch_size",
                    "host_to_device_transfer",
                    "checkpointing",
                    "data_exchange",
                ][rng.weighted(&[25.0, 28.0, 16.0, 7.0])];
                Sig::new(
                    t,
                    "low_utilization",
                    format!("GPU utilisation {}% over the last hour", rng.range(5, 35)),
                )
                .symptom("none")
                .attr("cause", json!(cause))
            } else {
                Sig::new(t, "health_check", "all checks passed").symptom("none")
            };
            world.commit(vec![s.on(Some(n), job)], None, pool);
        }
    }
}

fn rfc3339(start: i64, t: i64) -> String {
    DateTime::<Utc>::from_timestamp(start + t, 0)
        .expect("timestamp in range")
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The scheduler's records of the jobs that ran (refused submissions never did). Cancellations draw
/// from their own stream, so the signals stay as they were.
fn job_records(cfg: &SimConfig, world: &World, rng: &mut Rng) -> Vec<Value> {
    let base = cfg.start.timestamp();
    world
        .jobs
        .iter()
        .filter(|j| !matches!(j.fate, Fate::Refused(_)) && j.start < world.w)
        .map(|j| {
            let state = match j.fate {
                Fate::User(_) | Fate::Platform(_) => "failed",
                _ if j.end >= world.w => "running",
                _ if rng.chance(0.04) => "cancelled",
                _ => "completed",
            };
            let mut v = json!({
                "id": j.id, "cluster": POOLS[j.pool].0, "gpus": j.gpus,
                "nodes": j.nodes.iter().map(|&n| world.nodes[n].host.as_str()).collect::<Vec<_>>(),
                "start": rfc3339(base, j.start), "state": state,
            });
            if state != "running" {
                v["end"] = json!(rfc3339(base, j.end));
            }
            v
        })
        .collect()
}

/// Minutes with one decimal, uniform in [lo, hi).
fn minutes(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    ((lo + rng.f64() * (hi - lo)) * 10.0).round() / 10.0
}

/// What engineers record after the failures (Unicron's recovery phases, resolutions, post-mortems)
/// and the drains that hardware repairs take, from their own stream. Returns (node_states, lifecycles).
fn aftermath(cfg: &SimConfig, world: &World, rng: &mut Rng) -> (Vec<Value>, Vec<Value>) {
    let base = cfg.start.timestamp();
    let mut states: Vec<(i64, Value)> = Vec::new();
    let mut lifecycles = Vec::new();
    // Until when each node is out of service: a node is drained at most once at a time.
    let mut drained_until = vec![i64::MIN; world.nodes.len()];
    let mut kept: Vec<&Kept> = world.kept.iter().collect();
    kept.sort_by_key(|k| (k.t, k.pool, k.node, k.job));
    for k in kept {
        // Some failures are never written up: their downtime stays unknown.
        if !rng.chance(0.75) {
            continue;
        }
        let detection = if k.hang {
            minutes(rng, 10.0, 30.0) // until the collective's watchdog fires
        } else {
            minutes(rng, 0.5, 5.0)
        };
        let mut phases = serde_json::Map::new();
        phases.insert("detection".into(), json!(detection));
        let mut total = detection;
        if k.job.is_some() {
            for (phase, lo, hi) in [
                ("resubmission", 3.0, 15.0),
                ("setup", 5.0, 20.0),
                ("recomputation", 5.0, 45.0),
            ] {
                let m = minutes(rng, lo, hi);
                total += m;
                phases.insert(phase.into(), json!(m));
            }
        }
        let repair = k.category == "hardware" && !matches!(k.component, "network" | "cooling");
        let resolution = match (k.category, k.node) {
            (_, Some(n)) if repair && drained_until[n] < k.t && rng.chance(0.7) => {
                let at = k.t + (detection * MIN as f64) as i64;
                let back = at + rng.range(2 * HOUR, 72 * HOUR);
                let node = &world.nodes[n];
                let reason = format!("{} fault: drained for repair", k.component);
                states.push((
                    at,
                    json!({"cluster": POOLS[node.pool].0, "hostname": node.host, "state": "drained",
                                        "at": rfc3339(base, at), "reason": reason}),
                ));
                if back < world.w && back < node.to {
                    states.push((
                        back,
                        json!({"cluster": POOLS[node.pool].0, "hostname": node.host, "state": "returned",
                                              "at": rfc3339(base, back), "reason": "repaired and burnt in"}),
                    ));
                    drained_until[n] = back;
                } else {
                    drained_until[n] = i64::MAX;
                }
                "drained"
            }
            ("user", _) => "other",
            _ if rng.chance(0.8) => "transient_restart",
            _ => "other",
        };
        let resolved = k.t + (total * MIN as f64) as i64;
        let mut patch = json!({
            "resolution": resolution,
            "recovery_minutes": Value::Object(phases),
        });
        if resolved < world.w {
            patch["resolved_at"] = json!(rfc3339(base, resolved));
        }
        // Post-mortems settle most unknown causes.
        if k.category == "unknown" && rng.chance(0.6) {
            let (category, component) =
                *rng.pick(&[("hardware", "gpu"), ("platform", "driver"), ("platform", "framework")]);
            patch["root_cause"] = json!({"category": category, "component": component});
            patch["note"] = json!(format!("post-mortem: {category}/{component}, see the incident review"));
        }
        let mut v = json!({
            "cluster": POOLS[k.pool].0,
            "first_at": rfc3339(base, k.t),
            "patch": patch,
        });
        match (k.job, k.node) {
            (Some(j), _) => v["job_id"] = json!(world.jobs[j].id),
            (None, Some(n)) => v["node"] = json!(world.nodes[n].host),
            (None, None) => continue,
        }
        lifecycles.push(v);
    }
    states.sort_by_key(|(t, _)| *t);
    (states.into_iter().map(|(_, v)| v).collect(), lifecycles)
}

fn render(cfg: &SimConfig, mut world: World, parts: parts::Output) -> SimulatedFleet {
    let base = cfg.start.timestamp();
    let sizes: Vec<usize> = (0..POOLS.len()).map(|p| pool_nodes(&world.nodes, p).len()).collect();
    let firsts: Vec<usize> = (0..POOLS.len())
        .map(|p| world.nodes.iter().position(|n| n.pool == p).unwrap_or(0))
        .collect();
    let nodes = world
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let (cluster, prefix, model, gpus, ..) = POOLS[n.pool];
            let (pos, size) = (i - firsts[n.pool], sizes[n.pool]); // nodes are built pool by pool
            let per_group = (128 / gpus) as usize;
            // ~80% labelled in whole 128-GPU groups; a pool smaller than a group is one partial group.
            let labelled = if size < per_group {
                size
            } else {
                size * 8 / 10 / per_group * per_group
            };
            let mut v = json!({
                "hostname": n.host, "cluster": cluster, "gpu_model": model, "gpu_count": gpus,
                "rack": format!("{prefix}-r{:03}", pos / (32 / gpus as usize)),
                "in_service_since": rfc3339(base, n.from),
            });
            if pos < labelled {
                v["group"] = json!(format!("{prefix}-g{:02}", pos / per_group));
            }
            if n.to != i64::MAX {
                v["retired_at"] = json!(rfc3339(base, n.to));
            }
            v
        })
        .collect();
    world.sigs.sort_by_key(|s| s.t); // stable: equal times keep generation order
    let events = world
        .sigs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut v = json!({
                "id": Uuid::new_v5(&ID_NAMESPACE, format!("{}/{i}", cfg.seed).as_bytes()).to_string(),
                "occurred_at": rfc3339(base, s.t),
                "cluster": world.cluster(s),
                "kind": s.kind,
                "message": s.msg,
                "attributes": Value::Object(s.attrs.clone()),
            });
            if let Some(n) = s.node {
                v["node"] = json!(world.nodes[n].host);
            }
            if s.gpu.is_some() || s.node.is_none() {
                let pool = s
                    .node
                    .map(|n| world.nodes[n].pool)
                    .or(s.job.map(|j| world.jobs[j].pool))
                    .unwrap_or(0);
                v["gpu_model"] = json!(POOLS[pool].2);
            }
            if let Some(g) = s.gpu {
                v["gpu_index"] = json!(g);
            }
            if let Some(j) = s.job {
                v["job_id"] = json!(world.jobs[j].id);
                v["job_gpus"] = json!(world.jobs[j].gpus);
            }
            if let Some(c) = s.code {
                v["code"] = json!(c);
            }
            if let Some(sym) = s.symptom {
                v["symptom"] = json!(sym);
            }
            if let Some((cat, comp)) = s.cause {
                v["root_cause"] = json!({"category": cat, "component": comp});
            }
            v
        })
        .collect();
    let jobs = job_records(cfg, &world, &mut Rng::new(cfg.seed, 6));
    let (node_states, lifecycles) = aftermath(cfg, &world, &mut Rng::new(cfg.seed, 7));
    SimulatedFleet {
        nodes,
        events,
        jobs,
        node_states,
        lifecycles,
        gpu_steps: parts.steps,
        gpu_history: parts.history,
        truth: world.truth,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    fn ts(v: &Value) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(v.as_str().unwrap())
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn same_config_same_bytes_and_seeds_differ() {
        let a = simulate(&SimConfig::default());
        let b = simulate(&SimConfig::default());
        assert_eq!(
            serde_json::to_string(&a.events).unwrap(),
            serde_json::to_string(&b.events).unwrap()
        );
        assert_eq!(
            serde_json::to_string(&a.nodes).unwrap(),
            serde_json::to_string(&b.nodes).unwrap()
        );
        assert_eq!(a.truth, b.truth);
        let c = simulate(&SimConfig {
            seed: 7,
            ..SimConfig::default()
        });
        assert_ne!(
            serde_json::to_string(&a.events).unwrap(),
            serde_json::to_string(&c.events).unwrap()
        );
        assert_ne!(a.events[0]["id"], c.events[0]["id"]);
    }

    #[test]
    fn ids_unique_events_sorted_and_inside_inventory() {
        let cfg = SimConfig::default();
        let f = simulate(&cfg);
        let ids: HashSet<&str> = f.events.iter().map(|e| e["id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), f.events.len());
        assert!(
            f.events
                .windows(2)
                .all(|w| ts(&w[0]["occurred_at"]) <= ts(&w[1]["occurred_at"]))
        );
        let mut inventory = HashMap::new();
        for n in &f.nodes {
            let key = (n["cluster"].as_str().unwrap(), n["hostname"].as_str().unwrap());
            assert!(inventory.insert(key, n).is_none(), "duplicate node {key:?}");
        }
        let end = cfg.start + chrono::Duration::days(i64::from(cfg.days));
        for e in &f.events {
            let at = ts(&e["occurred_at"]);
            assert!(at >= cfg.start && at < end);
            if e["symptom"] == "none" {
                // The server ignores symptom `none`: only benign signals may carry it.
                assert!(
                    e["kind"] == "low_utilization"
                        || e["message"] == "all checks passed"
                        || (e["kind"] == "ecc" && e["code"] == 1)
                        || e["kind"] == "row_remap",
                    "{e}"
                );
            }
            if let Some(host) = e["node"].as_str() {
                let n = inventory[&(e["cluster"].as_str().unwrap(), host)];
                assert!(ts(&n["in_service_since"]) <= at, "{e}");
                assert!(n.get("retired_at").is_none_or(|r| at < ts(r)), "{e}");
            } else {
                assert!(e["gpu_model"].is_string() && e["job_id"].is_string(), "{e}");
            }
        }
    }

    #[test]
    fn cascades_share_the_job_of_their_root() {
        let f = simulate(&SimConfig::default());
        let mut job_nodes: HashMap<&str, HashSet<&str>> = HashMap::new();
        for e in &f.events {
            if let (Some(j), Some(n)) = (e["job_id"].as_str(), e["node"].as_str()) {
                job_nodes.entry(j).or_default().insert(n);
            }
        }
        let mut by_job: HashMap<&str, Vec<&Value>> = HashMap::new();
        for e in f.events.iter().filter(|e| e["kind"] != "nccl_timeout") {
            if let Some(j) = e["job_id"].as_str() {
                by_job.entry(j).or_default().push(e);
            }
        }
        let timeouts: Vec<&Value> = f.events.iter().filter(|e| e["kind"] == "nccl_timeout").collect();
        assert!(timeouts.len() > 100);
        for e in &timeouts {
            let job = e["job_id"].as_str().expect("nccl_timeout carries its job");
            let at = ts(&e["occurred_at"]);
            // A root signal of the same job on another node precedes it by 1-9 minutes.
            let root = by_job.get(job).into_iter().flatten().any(|r| {
                r["node"] != e["node"] && {
                    let d = at - ts(&r["occurred_at"]);
                    d >= chrono::Duration::minutes(1) && d <= chrono::Duration::minutes(9)
                }
            });
            assert!(root, "orphan timeout {e}");
        }
        assert!(job_nodes.values().any(|n| n.len() >= 33), "some cascade spans 33 nodes");
    }

    #[test]
    fn default_run_is_realistic() {
        let f = simulate(&SimConfig::default());
        let t = &f.truth;
        assert!((300..=1500).contains(&t.failures), "{t:?}");
        assert!(f.events.len() < 60_000, "{}", f.events.len());
        assert_eq!(t.by_category.values().sum::<usize>(), t.failures);
        assert_eq!(t.by_generation.values().sum::<usize>(), t.failures);
        let share = |c: &str| *t.by_category.get(c).unwrap_or(&0) as f64 / t.failures as f64;
        // 2 : 2 : 3 is 29% : 29% : 43%.
        assert!((0.20..0.40).contains(&share("hardware")), "{t:?}");
        assert!((0.18..0.38).contains(&share("platform")), "{t:?}");
        assert!((0.33..0.55).contains(&share("user")), "{t:?}");
        assert!(share("unknown") < 0.08, "{t:?}");
        for g in ["volta", "ampere", "ada", "hopper", "blackwell"] {
            assert!(t.by_generation.contains_key(g), "{g}: {t:?}");
        }
        // Unicron: a 128-GPU group fails 1 to 7 times a week.
        let gpus: i64 = f.nodes.iter().map(|n| n["gpu_count"].as_i64().unwrap()).sum();
        let on_nodes = t.failures
            - f.events
                .iter()
                .filter(|e| e["kind"] == "submission_error" || e["kind"] == "scheduler_error" && e["node"].is_null())
                .count();
        let per_group_week = on_nodes as f64 / (gpus as f64 / 128.0) / 4.0;
        assert!((1.0..7.0).contains(&per_group_week), "{per_group_week}");
        let unlabelled = f.nodes.iter().filter(|n| n.get("group").is_none()).count() as f64 / f.nodes.len() as f64;
        assert!((0.12..0.30).contains(&unlabelled), "{unlabelled}");
        let benign = f
            .events
            .iter()
            .filter(|e| ["slowdown", "low_utilization"].contains(&e["kind"].as_str().unwrap()))
            .count();
        assert!(benign > 0 && (benign as f64) < 0.02 * f.events.len() as f64, "{benign}");
        assert!(f.events.iter().any(|e| e["message"] == "all checks passed"));
        let explicit = f.events.iter().filter(|e| e.get("root_cause").is_some()).count();
        assert!(explicit > 0 && explicit < t.failures / 4);
    }

    #[test]
    fn big_jobs_fail_mostly_on_hardware_and_lemons_repeat() {
        let f = simulate(&SimConfig::default());
        // Root signal = first non-timeout signal of each (job, 10-minute) burst; count big-job causes
        // by the signals the catalog maps to hardware.
        let hw_kinds = [
            "kernel_panic",
            "power",
            "fan",
            "thermal",
            "link_flap",
            "link_down",
            "ecc",
            "sxid",
        ];
        let mut big_hw = 0;
        let mut big_user = 0;
        let mut per_node: HashMap<&str, usize> = HashMap::new();
        for e in f
            .events
            .iter()
            .filter(|e| e["kind"] != "nccl_timeout" && e["kind"] != "job_exit")
        {
            let kind = e["kind"].as_str().unwrap();
            let hw = hw_kinds.contains(&kind)
                || (kind == "xid" && [48, 62, 74, 79, 94, 95].contains(&e["code"].as_i64().unwrap_or(0)));
            let user = ["gpu_oom", "host_oom"].contains(&kind)
                || (kind == "xid" && [13, 31].contains(&e["code"].as_i64().unwrap_or(0)));
            if e["job_gpus"].as_i64().unwrap_or(0) >= 512 {
                big_hw += usize::from(hw);
                big_user += usize::from(user);
            }
            if hw && let Some(n) = e["node"].as_str() {
                *per_node.entry(n).or_default() += 1;
            }
        }
        assert!(big_hw > 3 * big_user.max(1), "hw {big_hw} user {big_user}");
        assert!(per_node.values().any(|&c| c >= 4), "a lemon fails repeatedly");
    }

    #[test]
    fn jobs_drains_and_lifecycles_are_valid_inputs() {
        let cfg = SimConfig::default();
        let f = simulate(&cfg);
        let end = cfg.start + chrono::Duration::days(i64::from(cfg.days));
        assert!(f.jobs.len() > 500, "{}", f.jobs.len());
        for j in &f.jobs {
            let job = crate::domain::job::parse_job(j.clone()).unwrap_or_else(|e| panic!("{e:?}: {j}"));
            assert!(job.start < end && !job.nodes.is_empty(), "{j}");
        }
        let states: HashSet<&str> = f.jobs.iter().map(|j| j["state"].as_str().unwrap()).collect();
        assert_eq!(states, HashSet::from(["completed", "failed", "cancelled", "running"]));
        // Per node, drains and returns alternate, starting with a drain, inside the window.
        let mut last: HashMap<&str, &str> = HashMap::new();
        for s in &f.node_states {
            let (host, state) = (s["hostname"].as_str().unwrap(), s["state"].as_str().unwrap());
            let at = ts(&s["at"]);
            assert!(at >= cfg.start && at < end, "{s}");
            let before = last.insert(host, state).unwrap_or("returned");
            assert_ne!(before, state, "{s}");
        }
        assert!(f.node_states.iter().any(|s| s["state"] == "returned"));
        // Most failures get a lifecycle; every patch is one the API accepts.
        assert!(f.lifecycles.len() * 2 > f.truth.failures, "{}", f.lifecycles.len());
        for l in &f.lifecycles {
            let p: crate::domain::lifecycle::LifecyclePatch = serde_json::from_value(l["patch"].clone()).unwrap();
            let first = ts(&l["first_at"]);
            crate::domain::lifecycle::apply(&Default::default(), &p, first, end)
                .unwrap_or_else(|e| panic!("{e:?}: {l}"));
            assert!(l["job_id"].is_string() || l["node"].is_string(), "{l}");
        }
        assert!(
            f.lifecycles.iter().any(|l| l["patch"]["root_cause"].is_object()),
            "some post-mortem"
        );
        assert!(f.lifecycles.iter().any(|l| l["patch"]["resolution"] == "drained"));
        assert!(
            f.lifecycles
                .iter()
                .any(|l| l["patch"]["resolution"] == "transient_restart")
        );
    }

    #[test]
    fn small_and_tiny_fleets_work() {
        for nodes in [0, 1, 6, 40] {
            let f = simulate(&SimConfig {
                nodes,
                days: 7,
                ..SimConfig::default()
            });
            assert_eq!(f.nodes.len(), nodes as usize);
        }
    }

    #[test]
    fn default_run_is_fast() {
        let t0 = std::time::Instant::now();
        let f = simulate(&SimConfig::default());
        let limit = if cfg!(debug_assertions) { 10.0 } else { 1.0 };
        assert!(
            t0.elapsed().as_secs_f64() < limit,
            "{:?} for {} events",
            t0.elapsed(),
            f.events.len()
        );
    }
}
