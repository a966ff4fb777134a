//! The v1 root-cause vocabulary: categories, the components that belong to each, and symptoms.
//! Pure: no HTTP, no SQL.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Root-cause category of a signal or failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Hardware,
    Platform,
    User,
    Unknown,
}

/// Which failures a lemon-node test counts: the effective root cause's category, or all. One
/// definition for `/v1/analytics/lemon-nodes` and the `lemon_node` alert rule, so that both
/// default to hardware: a buggy application's failures do not make its nodes lemons.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LemonCategory {
    #[default]
    Hardware,
    Platform,
    User,
    Unknown,
    All,
}

impl LemonCategory {
    /// The category counted; None: all.
    pub fn category(self) -> Option<Category> {
        match self {
            LemonCategory::Hardware => Some(Category::Hardware),
            LemonCategory::Platform => Some(Category::Platform),
            LemonCategory::User => Some(Category::User),
            LemonCategory::Unknown => Some(Category::Unknown),
            LemonCategory::All => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.category().map_or("all", Category::as_str)
    }
}

impl Category {
    pub const ALL: [Category; 4] = [
        Category::Hardware,
        Category::Platform,
        Category::User,
        Category::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Hardware => "hardware",
            Category::Platform => "platform",
            Category::User => "user",
            Category::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Rank used to pick a failure's root cause: lower is more specific.
    pub fn specificity_rank(self) -> u8 {
        match self {
            Category::Hardware => 0,
            Category::Platform => 1,
            Category::User => 2,
            Category::Unknown => 3,
        }
    }
}

/// Component within a category. hardware: gpu, gpu_memory, nvlink, network, the host's parts (cpu,
/// host_memory, disk, pcie, baseboard) and host (the rest of the node: kernel, OS, board parts
/// without a component of their own), power, cooling; platform: scheduler, storage, runtime,
/// driver, framework; user: code, config, oom, data, model; unknown: unknown. `gpu_memory` is the
/// GPU's memory (HBM, framebuffer); `host_memory` the node's DIMMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    Gpu,
    GpuMemory,
    Nvlink,
    Network,
    /// The node's processors (machine checks, IERR, CATERR).
    Cpu,
    /// The node's memory: DIMMs, memory controllers (EDAC, IPMI Memory sensor).
    HostMemory,
    /// Local disks: SATA/SAS drives, NVMe SSDs, RAID members, drive slots.
    Disk,
    /// The PCIe fabric: root ports, links, risers, switches (AER, PERR/SERR).
    Pcie,
    /// The baseboard and its management: BMC, system board, CMOS battery, TPM, POST errors.
    Baseboard,
    /// The rest of the node: kernel, OS, a node-level fault of no named part.
    Host,
    Power,
    Cooling,
    Scheduler,
    Storage,
    Runtime,
    Driver,
    Framework,
    Code,
    Config,
    Oom,
    Data,
    Model,
    Unknown,
}

impl Component {
    pub const ALL: [Component; 23] = [
        Component::Gpu,
        Component::GpuMemory,
        Component::Nvlink,
        Component::Network,
        Component::Cpu,
        Component::HostMemory,
        Component::Disk,
        Component::Pcie,
        Component::Baseboard,
        Component::Host,
        Component::Power,
        Component::Cooling,
        Component::Scheduler,
        Component::Storage,
        Component::Runtime,
        Component::Driver,
        Component::Framework,
        Component::Code,
        Component::Config,
        Component::Oom,
        Component::Data,
        Component::Model,
        Component::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Component::Gpu => "gpu",
            Component::GpuMemory => "gpu_memory",
            Component::Nvlink => "nvlink",
            Component::Network => "network",
            Component::Cpu => "cpu",
            Component::HostMemory => "host_memory",
            Component::Disk => "disk",
            Component::Pcie => "pcie",
            Component::Baseboard => "baseboard",
            Component::Host => "host",
            Component::Power => "power",
            Component::Cooling => "cooling",
            Component::Scheduler => "scheduler",
            Component::Storage => "storage",
            Component::Runtime => "runtime",
            Component::Driver => "driver",
            Component::Framework => "framework",
            Component::Code => "code",
            Component::Config => "config",
            Component::Oom => "oom",
            Component::Data => "data",
            Component::Model => "model",
            Component::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The host's part components: a node fault of a named part, beside `host` (the rest).
    pub const HOST_PARTS: [Component; 5] = [
        Component::Cpu,
        Component::HostMemory,
        Component::Disk,
        Component::Pcie,
        Component::Baseboard,
    ];

    /// The category this component belongs to.
    pub fn category(self) -> Category {
        use Component::*;
        match self {
            Gpu | GpuMemory | Nvlink | Network | Cpu | HostMemory | Disk | Pcie | Baseboard | Host | Power
            | Cooling => Category::Hardware,
            Scheduler | Storage | Runtime | Driver | Framework => Category::Platform,
            Code | Config | Oom | Data | Model => Category::User,
            Unknown => Category::Unknown,
        }
    }
}

/// A root cause: category plus a component that belongs to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RootCause {
    pub category: Category,
    pub component: Component,
}

impl RootCause {
    /// Parses a (category, component) pair, refusing a component of another category.
    pub fn new(category: Category, component: Component) -> Result<Self, String> {
        if component.category() != category {
            return Err(format!(
                "component '{}' does not belong to category '{}' (it is a {} component)",
                component.as_str(),
                category.as_str(),
                component.category().as_str()
            ));
        }
        Ok(RootCause { category, component })
    }

    pub const UNKNOWN: RootCause = RootCause {
        category: Category::Unknown,
        component: Component::Unknown,
    };
}

/// What the job or user saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Symptom {
    JobCrash,
    JobHang,
    SubmissionFailure,
    AbnormalBehavior,
    Slowdown,
    NodeDown,
    None,
}

impl Symptom {
    pub const ALL: [Symptom; 7] = [
        Symptom::JobCrash,
        Symptom::JobHang,
        Symptom::SubmissionFailure,
        Symptom::AbnormalBehavior,
        Symptom::Slowdown,
        Symptom::NodeDown,
        Symptom::None,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Symptom::JobCrash => "job_crash",
            Symptom::JobHang => "job_hang",
            Symptom::SubmissionFailure => "submission_failure",
            Symptom::AbnormalBehavior => "abnormal_behavior",
            Symptom::Slowdown => "slowdown",
            Symptom::NodeDown => "node_down",
            Symptom::None => "none",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// Signal kinds Faultline knows by name. Unknown kinds are accepted and stored as sent.
pub const WELL_KNOWN_KINDS: &[&str] = &[
    "xid",
    "sxid",
    "ecc",
    "row_remap",
    "nvlink",
    "nccl_timeout",
    "nccl_error",
    "cuda_error",
    "gpu_oom",
    "host_oom",
    "link_flap",
    "link_down",
    "node_unreachable",
    "kernel_panic",
    "power",
    "fan",
    "thermal",
    "storage_error",
    "scheduler_error",
    "submission_error",
    "gsp_error",
    "inforom",
    "health_check",
    "job_exit",
    "slowdown",
    "low_utilization",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_component_round_trips_and_has_a_category() {
        for c in Component::ALL {
            assert_eq!(Component::parse(c.as_str()), Some(c));
            assert!(RootCause::new(c.category(), c).is_ok());
        }
        assert_eq!(Component::Nvlink.category(), Category::Hardware);
        assert_eq!(Component::Driver.category(), Category::Platform);
        assert_eq!(Component::Oom.category(), Category::User);
        for part in Component::HOST_PARTS {
            assert_eq!(part.category(), Category::Hardware, "{}", part.as_str());
        }
        assert_eq!(Component::parse("host_memory"), Some(Component::HostMemory));
        // The GPU's memory keeps its own name.
        assert_eq!(Component::parse("gpu_memory"), Some(Component::GpuMemory));
    }

    #[test]
    fn component_of_another_category_is_refused() {
        let err = RootCause::new(Category::User, Component::Gpu).unwrap_err();
        assert!(err.contains("'gpu'") && err.contains("hardware"), "{err}");
        assert!(RootCause::new(Category::Unknown, Component::Code).is_err());
    }

    #[test]
    fn symptoms_and_categories_parse() {
        assert_eq!(Symptom::parse("job_crash"), Some(Symptom::JobCrash));
        assert_eq!(Symptom::parse("crash"), None);
        assert_eq!(Category::parse("platform"), Some(Category::Platform));
        assert!(Category::Hardware.specificity_rank() < Category::Unknown.specificity_rank());
    }
}
