//! The one table of published figures (the literature reliability engineers compare against) and how
//! this fleet's value of each is measured. `GET /v1/analytics/baselines` and the report's baseline
//! section both render [`baselines`]'s rows, so they cannot disagree.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::cost::CauseShare;
use super::headline::round6;

pub const LLAMA3: &str = "Llama 3 pre-training (Meta, 2024)";
pub const ICSE23: &str = "Quality issues of a deep-learning platform (ICSE 2023)";
pub const ICSE24: &str = "Low GPU utilisation of deep-learning jobs (ICSE 2024)";
pub const UNICRON: &str = "Unicron (2023)";
pub const UNICRON_GPT3: &str = "Unicron (2023), one GPT-3 recovery: 30 + 9 + 14 + 15 min";
pub const C4: &str = "Alibaba C4 (2024)";
pub const MEGASCALE: &str = "MegaScale (NSDI 2024)";

/// The unit of a published figure and of the fleet's value beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Fraction,
    Minutes,
    Hours,
    PerWeek,
}

impl Unit {
    /// The name in JSON and CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Fraction => "fraction",
            Unit::Minutes => "minutes",
            Unit::Hours => "hours",
            Unit::PerWeek => "per_week",
        }
    }
}

/// A published figure beside this fleet's value of the same measure over the same window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Baseline {
    pub measure: String,
    /// A few words for a chart axis.
    pub short: String,
    /// The published value (a fraction, or in `unit`), when the source gives one number.
    pub published: Option<f64>,
    /// Lower bound when the source gives a range or a bound.
    pub published_low: Option<f64>,
    /// Upper bound when the source gives a range.
    pub published_high: Option<f64>,
    pub unit: Unit,
    pub source: String,
    /// This fleet's value for the same measure and window (null: no data to compute it).
    pub fleet: Option<f64>,
    /// What the fleet value was computed from, e.g. "61 of 100 failures".
    pub basis: String,
    /// How the fleet value is measured.
    pub definition: String,
}

/// `part` of `whole`: the count behind a share.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Part {
    pub part: u64,
    pub whole: u64,
}

impl Part {
    pub fn share(self) -> Option<f64> {
        (self.whole > 0).then(|| self.part as f64 / self.whole as f64)
    }
}

/// A failure's root signal: what Unicron's "leading failure types" classify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootKind {
    pub kind: String,
    pub code: Option<i64>,
    pub failures: u64,
}

/// Everything the baselines are computed from, gathered over one window (see `queries::baselines`).
#[derive(Debug, Clone, Default)]
pub struct BaselineInputs {
    /// Failures per effective (category, component).
    pub causes: Vec<(String, String, u64)>,
    /// Failures per symptom.
    pub symptoms: Vec<(String, u64)>,
    pub root_kinds: Vec<RootKind>,
    /// Transient failures of all failures (recovery analysis).
    pub transient: Part,
    /// Hardware failures that needed a drain, of hardware failures (recovery analysis).
    pub hardware_drained: Part,
    pub mean_downtime_minutes: Option<f64>,
    pub failures_with_downtime: u64,
    /// Failed jobs among the 5% largest (job-size analysis).
    pub largest_jobs_failed: Part,
    /// Failures whose root node is in the inventory, and the inventory's GPU-hours in the window.
    pub node_failures: u64,
    pub gpu_hours: f64,
    /// Failures with a root node, of all failures (node-concentration analysis).
    pub confined: Part,
    /// Straggling nodes of nodes in service (stragglers analysis).
    pub straggling: Part,
    pub low_utilization_incidents: u64,
    pub efficiency_fine: Vec<CauseShare>,
    pub efficiency_coarse: Vec<CauseShare>,
}

/// The ICSE 2023 hardware split: node = the host's parts (cpu, host_memory, disk, pcie,
/// baseboard), host, power and cooling; GPU = gpu, gpu_memory, nvlink.
pub const ICSE_NODE: &[&str] = &[
    "cpu",
    "host_memory",
    "disk",
    "pcie",
    "baseboard",
    "host",
    "power",
    "cooling",
];
pub const ICSE_GPU: &[&str] = &["gpu", "gpu_memory", "nvlink"];
pub const ICSE_NETWORK: &[&str] = &["network"];

/// ECC errors as a root signal: the ecc and row_remap kinds and the XIDs of memory errors (48
/// double-bit, 63/64 row remapping, 92 high single-bit rate, 94/95 contained/uncontained, 140
/// unrecovered ECC).
pub fn is_ecc(kind: &str, code: Option<i64>) -> bool {
    kind == "ecc" || kind == "row_remap" || (kind == "xid" && matches!(code, Some(48 | 63 | 64 | 92 | 94 | 95 | 140)))
}

/// NVLink errors as a root signal: the nvlink kind, NVSwitch SXids (the NVLink fabric) and the
/// NVLink XIDs (74, 136 link training, 144-150 NVLink5, 155).
pub fn is_nvlink(kind: &str, code: Option<i64>) -> bool {
    kind == "nvlink" || kind == "sxid" || (kind == "xid" && matches!(code, Some(74 | 136 | 144..=150 | 155)))
}

const ROOT_SIGNAL_DEFINITION: &str = "Failures whose root signal (the most specific signal of the failure, the one its \
cause comes from) is of this type, over all failures whose first signal is in the window";

/// A published share beside the fleet's `p`.
fn share(measure: &str, short: &str, published: f64, source: &str, p: Part, what: &str, definition: &str) -> Baseline {
    Baseline {
        measure: measure.into(),
        short: short.into(),
        published: Some(published),
        published_low: None,
        published_high: None,
        unit: Unit::Fraction,
        source: source.into(),
        fleet: p.share().map(round6),
        basis: format!("{} of {} {what}", p.part, p.whole),
        definition: definition.into(),
    }
}

/// The rows, in the order every rendering shows them.
pub fn baselines(inp: &BaselineInputs) -> Vec<Baseline> {
    let total: u64 = inp.causes.iter().map(|c| c.2).sum();
    let of_all = |part: u64| Part { part, whole: total };
    let category = |name: &str| of_all(inp.causes.iter().filter(|c| c.0 == name).map(|c| c.2).sum());
    let components = |names: &[&str]| {
        of_all(
            inp.causes
                .iter()
                .filter(|c| c.0 == "hardware" && names.contains(&c.1.as_str()))
                .map(|c| c.2)
                .sum(),
        )
    };
    let sym_total: u64 = inp.symptoms.iter().map(|s| s.1).sum();
    let symptom = |key: &str| Part {
        part: inp.symptoms.iter().filter(|s| s.0 == key).map(|s| s.1).sum(),
        whole: sym_total,
    };
    let root =
        |pred: &dyn Fn(&RootKind) -> bool| of_all(inp.root_kinds.iter().filter(|k| pred(k)).map(|k| k.failures).sum());
    let mut rows = Vec::new();
    let hw = category("hardware");
    let effective = "by the effective root cause (a post-mortem's over the automatic one), of all failures whose first signal is in the window";
    rows.push(share(
        "hardware share of failures",
        "Hardware (Llama 3)",
        0.78,
        LLAMA3,
        hw,
        "failures",
        &format!("Failures caused by hardware {effective}"),
    ));
    rows.push(share(
        "hardware share of failures",
        "Hardware (ICSE)",
        0.28,
        ICSE23,
        hw,
        "failures",
        &format!("Failures caused by hardware {effective}"),
    ));
    rows.push(share(
        "platform share of failures (hardware : platform : user = 2 : 2 : 3)",
        "Platform",
        round6(2.0 / 7.0),
        ICSE23,
        category("platform"),
        "failures",
        &format!("Failures caused by the platform {effective}"),
    ));
    rows.push(share(
        "user share of failures (hardware : platform : user = 2 : 2 : 3)",
        "User",
        round6(3.0 / 7.0),
        ICSE23,
        category("user"),
        "failures",
        &format!("Failures caused by the user {effective}"),
    ));
    rows.push(share(
        "node (host) share of failures",
        "Node / host",
        0.16,
        ICSE23,
        components(ICSE_NODE),
        "failures",
        &format!(
            "Hardware failures of the host (CPU, host memory, disk, PCIe, baseboard, the rest of the node), power or cooling {effective}"
        ),
    ));
    rows.push(share(
        "GPU share of failures",
        "GPU",
        0.055,
        ICSE23,
        components(ICSE_GPU),
        "failures",
        &format!("Hardware failures of the GPU, GPU memory or NVLink {effective}"),
    ));
    rows.push(share(
        "network share of failures",
        "Network",
        0.07,
        ICSE23,
        components(ICSE_NETWORK),
        "failures",
        &format!("Hardware failures of the network {effective}"),
    ));
    let symptom_def = "Failures by their symptom (the most telling symptom among their signals), of the failures whose first signal is in the window";
    rows.push(share(
        "job crash share of failures",
        "Job crash",
        0.55,
        ICSE23,
        symptom("job_crash"),
        "failures",
        symptom_def,
    ));
    rows.push(share(
        "job submission failure share of failures",
        "Submission failure",
        0.14,
        ICSE23,
        symptom("submission_failure"),
        "failures",
        symptom_def,
    ));
    rows.push(share(
        "abnormal job behaviour share of failures",
        "Abnormal behaviour",
        0.13,
        ICSE23,
        symptom("abnormal_behavior"),
        "failures",
        symptom_def,
    ));
    rows.push(share(
        "NCCL timeout share of failures",
        "NCCL timeout",
        0.101,
        UNICRON,
        root(&|k| k.kind == "nccl_timeout"),
        "failures",
        &format!(
            "{ROOT_SIGNAL_DEFINITION}: an NCCL timeout (kind nccl_timeout) with no more specific signal beside it"
        ),
    ));
    rows.push(share(
        "ECC error share of failures",
        "ECC error",
        0.05,
        UNICRON,
        root(&|k| is_ecc(&k.kind, k.code)),
        "failures",
        &format!("{ROOT_SIGNAL_DEFINITION}: kinds ecc and row_remap, XIDs 48, 63, 64, 92, 94, 95 and 140"),
    ));
    rows.push(share(
        "NVLink error share of failures",
        "NVLink error",
        0.045,
        UNICRON,
        root(&|k| is_nvlink(&k.kind, k.code)),
        "failures",
        &format!("{ROOT_SIGNAL_DEFINITION}: kinds nvlink and sxid (NVSwitch), XIDs 74, 136, 144-150 and 155"),
    ));
    rows.push(share(
        "link flapping share of failures",
        "Link flapping",
        0.039,
        UNICRON,
        root(&|k| k.kind == "link_flap"),
        "failures",
        &format!("{ROOT_SIGNAL_DEFINITION}: kind link_flap"),
    ));
    rows.push(share(
        "transient share of failures (cleared by a restart)",
        "Transient",
        0.73,
        UNICRON,
        inp.transient,
        "failures",
        "Failures resolved by a plain restart (resolution transient_restart), else, without a recorded resolution, whose root signal the catalog marks transient (see /v1/analytics/recovery)",
    ));
    rows.push(share(
        "share of hardware failures that needed a drain",
        "Needed a drain",
        0.37,
        UNICRON,
        inp.hardware_drained,
        "hardware failures",
        "Hardware failures resolved by draining, else whose root node was drained within 24 h of the first signal (see /v1/analytics/recovery)",
    ));
    rows.push(Baseline {
        measure: "mean downtime per failure".into(),
        short: "Downtime".into(),
        published: Some(68.0),
        published_low: None,
        published_high: None,
        unit: Unit::Minutes,
        source: UNICRON_GPT3.into(),
        fleet: inp.mean_downtime_minutes.map(round6),
        basis: format!("{} failures with a known downtime", inp.failures_with_downtime),
        definition: "Mean over failures with a known downtime: the sum of recorded recovery phases, else resolved_at - first signal (see /v1/analytics/recovery)".into(),
    });
    rows.push(share(
        "failure rate of the 5% largest jobs",
        "Largest jobs failed",
        0.434,
        UNICRON,
        inp.largest_jobs_failed,
        "jobs",
        "Jobs that failed among the ceil(5% x jobs) jobs with the most GPUs running in the window (see /v1/analytics/job-size)",
    ));
    // A 128-GPU group: failures on inventory nodes per 128 GPUs of exposure.
    let group_hours = inp.gpu_hours / 128.0;
    let nf = inp.node_failures;
    rows.push(Baseline {
        measure: "failures per week of a 128-GPU group".into(),
        short: "Group failures / week".into(),
        published: None,
        published_low: Some(1.0),
        published_high: Some(7.0),
        unit: Unit::PerWeek,
        source: UNICRON.into(),
        fleet: (group_hours > 0.0).then(|| round6(nf as f64 / group_hours * 168.0)),
        basis: format!("{nf} failures over {} 128-GPU group-hours", round6(group_hours)),
        definition: "Failures whose root node is in the inventory / (GPU-hours in service in the window / 128) x 168"
            .into(),
    });
    rows.push(Baseline {
        measure: "MTBF of a 128-GPU group".into(),
        short: "Group MTBF".into(),
        published: None,
        published_low: Some(24.0),
        published_high: None,
        unit: Unit::Hours,
        source: UNICRON.into(),
        fleet: (nf > 0).then(|| round6(group_hours / nf as f64)),
        basis: format!("{} group-hours / {nf} failures", round6(group_hours)),
        definition: "(GPU-hours in service in the window / 128) / failures whose root node is in the inventory".into(),
    });
    rows.push(share(
        "share of failures confined to one node or device",
        "Confined to a node",
        0.825,
        C4,
        inp.confined,
        "failures",
        "Failures with a root-cause node, of all failures (see /v1/analytics/node-concentration)",
    ));
    rows.push(share(
        "share of machines that straggle",
        "Stragglers",
        0.005,
        MEGASCALE,
        inp.straggling,
        "nodes",
        "Nodes with a slowdown episode (step time at least 1.1 x the job median), of the nodes in service (see /v1/analytics/stragglers)",
    ));
    let incidents = |v: &[CauseShare], k: &str| Part {
        part: v.iter().find(|r| r.cause == k).map_or(0, |r| r.incidents),
        whole: inp.low_utilization_incidents,
    };
    let eff = "Low-GPU-utilisation incidents with this cause, of all such incidents in the window (see /v1/analytics/efficiency)";
    let (fine, coarse) = (&inp.efficiency_fine, &inp.efficiency_coarse);
    rows.push(share(
        "model-related share of low-utilisation causes",
        "Model-related",
        0.45,
        ICSE24,
        incidents(coarse, "model"),
        "incidents",
        eff,
    ));
    rows.push(share(
        "data-related share of low-utilisation causes",
        "Data-related",
        0.46,
        ICSE24,
        incidents(coarse, "data"),
        "incidents",
        eff,
    ));
    rows.push(share(
        "improper batch size share",
        "Batch size",
        0.25,
        ICSE24,
        incidents(fine, "batch_size"),
        "incidents",
        eff,
    ));
    rows.push(share(
        "host-to-GPU data transfer share",
        "Host-to-GPU transfer",
        0.28,
        ICSE24,
        incidents(fine, "host_to_device_transfer"),
        "incidents",
        eff,
    ));
    rows.push(share(
        "model checkpointing share",
        "Checkpointing",
        0.16,
        ICSE24,
        incidents(fine, "checkpointing"),
        "incidents",
        eff,
    ));
    rows.push(share(
        "data exchange share",
        "Data exchange",
        0.07,
        ICSE24,
        incidents(fine, "data_exchange"),
        "incidents",
        eff,
    ));
    rows
}

pub const BASELINE_DEFINITIONS: &str = "Each row is a figure from the literature next to this fleet's value for the same \
measure over [from, to); each row's definition says how the fleet value is measured. Root-cause shares use the effective \
root cause (post-mortem over automatic). Unicron's leading failure types are failure causes, so they are matched on each \
failure's root signal. A published value is a reference from other fleets and workloads, not a target.";

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> BaselineInputs {
        let cause = |c: &str, k: &str, n: u64| (c.to_string(), k.to_string(), n);
        let rk = |k: &str, code: Option<i64>, n: u64| RootKind {
            kind: k.into(),
            code,
            failures: n,
        };
        BaselineInputs {
            // 20 failures: hardware 10 (node 5 = host 2 + cpu 2 + host_memory 1, gpu 2, nvlink 1,
            // network 2), platform 4, user 6.
            causes: vec![
                cause("hardware", "host", 2),
                cause("hardware", "cpu", 2),
                cause("hardware", "host_memory", 1),
                cause("hardware", "gpu", 2),
                cause("hardware", "nvlink", 1),
                cause("hardware", "network", 2),
                cause("platform", "scheduler", 4),
                cause("user", "oom", 6),
            ],
            symptoms: vec![("job_crash".into(), 15), ("job_hang".into(), 5)],
            root_kinds: vec![
                rk("nccl_timeout", None, 2),
                rk("ecc", None, 1),
                rk("xid", Some(48), 1),
                rk("xid", Some(74), 1),
                rk("sxid", Some(10003), 1),
                rk("xid", Some(79), 2),
            ],
            node_failures: 6,
            // 2 groups of 128 GPUs for one week: 2 x 128 x 168 GPU-hours.
            gpu_hours: 2.0 * 128.0 * 168.0,
            ..Default::default()
        }
    }

    #[test]
    fn shares_by_cause_component_symptom_and_root_signal() {
        let b = baselines(&inputs());
        let get = |m: &str| b.iter().find(|x| x.measure.starts_with(m)).unwrap().clone();
        assert_eq!(get("hardware share").fleet, Some(0.5));
        assert_eq!(get("hardware share").basis, "10 of 20 failures");
        assert_eq!(get("platform share").fleet, Some(0.2));
        assert_eq!(get("user share").fleet, Some(0.3));
        // node = host 5; GPU = gpu 2 + nvlink 1; network 2; all of 20.
        assert_eq!(get("node (host)").fleet, Some(0.25));
        assert_eq!(get("GPU share").fleet, Some(0.15));
        assert_eq!(get("network share").fleet, Some(0.1));
        assert_eq!(get("job crash").fleet, Some(0.75));
        // Root signals: nccl_timeout 2; ECC = ecc 1 + XID 48 1; NVLink = XID 74 1 + SXid 1; of 20.
        assert_eq!(get("NCCL timeout").fleet, Some(0.1));
        assert_eq!(get("ECC error").fleet, Some(0.1));
        assert_eq!(get("NVLink error").fleet, Some(0.1));
        assert_eq!(get("link flapping").fleet, Some(0.0));
        // 6 failures over 2 x 168 group-hours: 6 / 336 x 168 = 3 per week; MTBF 336 / 6 = 56 h.
        assert_eq!(get("failures per week").fleet, Some(3.0));
        assert_eq!(get("MTBF of a 128-GPU").fleet, Some(56.0));
        // No data: no value rather than a zero.
        assert_eq!(get("transient share").fleet, None);
        assert_eq!(get("improper batch size").fleet, None);
        assert_eq!(get("mean downtime").fleet, None);
    }

    #[test]
    fn rows_have_a_fixed_order_and_a_definition_each() {
        let b = baselines(&BaselineInputs::default());
        assert_eq!(b.len(), 28);
        assert_eq!(b[0].source, LLAMA3);
        assert_eq!(b[27].measure, "data exchange share");
        assert!(b.iter().all(|r| !r.definition.is_empty() && !r.short.is_empty()));
    }

    #[test]
    fn ecc_and_nvlink_signals() {
        assert!(is_ecc("xid", Some(48)) && is_ecc("row_remap", None) && !is_ecc("xid", Some(79)));
        assert!(is_nvlink("xid", Some(145)) && is_nvlink("nvlink", None) && !is_nvlink("xid", Some(48)));
    }
}
