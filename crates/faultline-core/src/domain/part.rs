//! GPU parts: identity rules, a node's reported GPU set validated at the edge, and the diff of a
//! node's report against the open placements (pure: storage reads the placements and writes the
//! plan).
//!
//! Identity: a part is its board serial when the GPU reports one, else its UUID. A serial is what
//! the vendor's RMA process and a site's CMDB track, and it survives what changes a UUID (a board
//! swap on the same serial is rare; a UUID regenerated after a repair or a firmware flash is not).
//! - The same serial with a new UUID is the same part: its placement is closed as `reidentified`
//!   and a new one opened with the new UUID, so signals naming either UUID still resolve.
//! - A UUID reported with a different serial than before belongs to the part of that serial: the
//!   placements hold the UUID each part had at the time, so attribution by UUID is unambiguous.
//! - A part first seen without a serial keeps its UUID as identity.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::event::{FieldError, optional_text};
use super::gpu::{GpuGeneration, generation_of};

/// Values vendor tools print where a field has no value.
const ABSENT: &[&str] = &[
    "",
    "n/a",
    "[n/a]",
    "na",
    "none",
    "not supported",
    "[not supported]",
    "unknown",
];

/// One GPU as a node reports it (`nvidia-smi -q -x`, DCGM, an agent).
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuReport {
    /// The GPU's index on the node (`nvidia-smi -i`), as signals name it.
    #[schema(minimum = 0, maximum = 1023)]
    pub index: Option<i32>,
    /// PCI bus id, e.g. `00000000:3B:00.0` (normalised to `0000:3b:00.0`); blank means absent.
    #[schema(
        max_length = 256,
        pattern = r"^[ \t\n\r]*(?:(?:PCI:)?(?:[0-9A-Fa-f]{1,8}:)?[0-9A-Fa-f]{1,2}:(?:[01]?[0-9A-Fa-f])(?:\.[0-7])?)?[ \t\n\r]*$"
    )]
    pub pci_bus_id: Option<String>,
    /// e.g. `GPU-28604e81-21ec-cc48-6759-bf2648b22e16`.
    #[schema(value_type = Option<super::event::OptionalText>)]
    pub uuid: Option<String>,
    /// Board serial number. One of `serial` and `uuid` is required.
    #[schema(value_type = Option<super::event::OptionalText>)]
    pub serial: Option<String>,
    /// Product name, e.g. "NVIDIA H100 80GB HBM3".
    #[schema(value_type = Option<super::event::OptionalText>)]
    pub model: Option<String>,
    #[schema(value_type = Option<super::event::OptionalText>)]
    pub board_part_number: Option<String>,
    #[schema(value_type = Option<super::event::OptionalText>)]
    pub vbios: Option<String>,
    #[schema(value_type = Option<super::event::OptionalText>)]
    pub driver: Option<String>,
}

/// A reported GPU, validated: identity decided, bus id normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportedGpu {
    pub part: String,
    pub serial: Option<String>,
    pub uuid: Option<String>,
    pub index: Option<i32>,
    pub pci_bus_id: Option<String>,
    pub model: Option<String>,
    pub generation: GpuGeneration,
    pub board_part_number: Option<String>,
    pub vbios: Option<String>,
    pub driver: Option<String>,
}

/// A field's value, or None where the tool printed a placeholder.
fn present(field: &str, v: Option<String>) -> Result<Option<String>, FieldError> {
    Ok(optional_text(field, v)?.filter(|s| !ABSENT.contains(&s.to_ascii_lowercase().as_str())))
}

/// The part's identity: the serial when present, else the UUID.
pub fn identity(serial: Option<&str>, uuid: Option<&str>) -> Option<String> {
    serial.or(uuid).map(str::to_string)
}

/// Validates one reported GPU (`prefix` names it in errors, e.g. `gpus[3]`).
pub fn validate_gpu(prefix: &str, g: GpuReport) -> Result<ReportedGpu, FieldError> {
    let f = |name: &str| format!("{prefix}.{name}");
    if let Some(i) = g.index
        && !(0..=1023).contains(&i)
    {
        return Err(FieldError::new(
            f("index"),
            format!("{i} is not a GPU index (0..=1023)"),
        ));
    }
    let pci_bus_id = match present(&f("pci_bus_id"), g.pci_bus_id)? {
        Some(raw) => Some(crate::logparse::normalise_pci_bus_id(&raw).ok_or_else(|| {
            FieldError::new(
                f("pci_bus_id"),
                format!("'{raw}' is not a PCI bus id (domain:bus:device.function)"),
            )
        })?),
        None => None,
    };
    let serial = present(&f("serial"), g.serial)?;
    let uuid = present(&f("uuid"), g.uuid)?;
    let part = identity(serial.as_deref(), uuid.as_deref())
        .ok_or_else(|| FieldError::new(f("serial"), "a GPU needs a serial or a UUID to be told apart"))?;
    let model = present(&f("model"), g.model)?;
    Ok(ReportedGpu {
        part,
        serial,
        uuid,
        index: g.index,
        pci_bus_id,
        generation: model.as_deref().map_or(GpuGeneration::Unknown, generation_of),
        model,
        board_part_number: present(&f("board_part_number"), g.board_part_number)?,
        vbios: present(&f("vbios"), g.vbios)?,
        driver: present(&f("driver"), g.driver)?,
    })
}

/// A node's GPU set at a time, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeGpus {
    pub cluster: String,
    pub hostname: String,
    pub observed_at: DateTime<Utc>,
    pub gpus: Vec<ReportedGpu>,
}

/// Validates a node's set: each GPU, and no part, index or bus id twice.
pub fn validate_node_gpus(
    cluster: String,
    hostname: String,
    observed_at: DateTime<Utc>,
    gpus: Vec<GpuReport>,
) -> Result<NodeGpus, FieldError> {
    let gpus = gpus
        .into_iter()
        .enumerate()
        .map(|(i, g)| validate_gpu(&format!("gpus[{i}]"), g))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, g) in gpus.iter().enumerate() {
        for (j, h) in gpus[..i].iter().enumerate() {
            let clash = if g.part == h.part {
                Some("part (serial or UUID)")
            } else if g.index.is_some() && g.index == h.index {
                Some("index")
            } else if g.pci_bus_id.is_some() && g.pci_bus_id == h.pci_bus_id {
                Some("pci_bus_id")
            } else {
                None
            };
            if let Some(what) = clash {
                return Err(FieldError::new(
                    format!("gpus[{i}]"),
                    format!("has the same {what} as gpus[{j}]"),
                ));
            }
        }
    }
    Ok(NodeGpus {
        cluster,
        hostname,
        observed_at,
        gpus,
    })
}

/// Why a placement ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// No longer reported by its node.
    Absent,
    /// Reported by another node or slot.
    Moved,
    /// Reported with a new UUID in the same slot.
    Reidentified,
    Failed,
    Rma,
    Decommissioned,
    Upgraded,
    /// Imported without a reason.
    Other,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Absent => "absent",
            EndReason::Moved => "moved",
            EndReason::Reidentified => "reidentified",
            EndReason::Failed => "failed",
            EndReason::Rma => "rma",
            EndReason::Decommissioned => "decommissioned",
            EndReason::Upgraded => "upgraded",
            EndReason::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            EndReason::Absent,
            EndReason::Moved,
            EndReason::Reidentified,
            EndReason::Failed,
            EndReason::Rma,
            EndReason::Decommissioned,
            EndReason::Upgraded,
            EndReason::Other,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }

    /// The removal this ending is, when it is one (`failed`, `rma`, `decommissioned`,
    /// `upgraded`): a placement that ends so records the part's removal at its end.
    pub fn removal(self) -> Option<RemovalReason> {
        match self {
            EndReason::Failed => Some(RemovalReason::Failed),
            EndReason::Rma => Some(RemovalReason::Rma),
            EndReason::Decommissioned => Some(RemovalReason::Decommissioned),
            EndReason::Upgraded => Some(RemovalReason::Upgraded),
            EndReason::Absent | EndReason::Moved | EndReason::Reidentified | EndReason::Other => None,
        }
    }
}

/// Why a part was retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RemovalReason {
    /// It failed in service.
    Failed,
    /// Returned to the vendor for repair or replacement (a failure, as the analytics count it).
    Rma,
    Decommissioned,
    Upgraded,
}

impl RemovalReason {
    pub fn as_str(self) -> &'static str {
        self.end_reason().as_str()
    }

    pub fn end_reason(self) -> EndReason {
        match self {
            RemovalReason::Failed => EndReason::Failed,
            RemovalReason::Rma => EndReason::Rma,
            RemovalReason::Decommissioned => EndReason::Decommissioned,
            RemovalReason::Upgraded => EndReason::Upgraded,
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            RemovalReason::Failed,
            RemovalReason::Rma,
            RemovalReason::Decommissioned,
            RemovalReason::Upgraded,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }

    /// Whether the removal counts as the part failing (survival's default event, AFR).
    pub fn is_failure(s: &str) -> bool {
        matches!(s, "failed" | "rma")
    }
}

/// One of a part's placements as the removal rule reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub installed_at: DateTime<Utc>,
    /// None while installed.
    pub removed_at: Option<DateTime<Utc>>,
    /// None while installed; an unknown stored reason reads as `other`.
    pub end_reason: Option<EndReason>,
}

impl Span {
    /// A stored placement's span: an unknown stored reason reads as `other`.
    pub fn stored(installed_at: DateTime<Utc>, removed_at: Option<DateTime<Utc>>, end_reason: Option<&str>) -> Span {
        Span {
            installed_at,
            removed_at,
            end_reason: removed_at.map(|_| end_reason.and_then(EndReason::parse).unwrap_or(EndReason::Other)),
        }
    }
}

/// What a removal does to the part's placements ([`fit_removal`]); indices are into its spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalFit {
    /// Ends this open placement at the removal's time, for its reason.
    Closes(usize),
    /// Is the ending of this placement, which ended at the removal's time; `relabel` when that
    /// ending named no removal reason (`absent`, `moved`, `reidentified`, `other`): it takes the
    /// removal's.
    Ends { span: usize, relabel: bool },
    /// No placement covers the time: the part was out of every slot (recorded on its own).
    Alone,
}

/// Why a removal contradicts the part's placements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalConflict {
    /// This placement ended at the removal's time for another removal reason.
    Disagrees { span: usize, end_reason: EndReason },
    /// This placement went on after the removal's time (the part was still in its slot).
    Inside(usize),
    /// This open placement began after the removal's time, and no placement ended at it.
    BeforePlacement(usize),
}

/// The one rule of a removal at `at` for `reason` against the part's placements (in one cluster),
/// for an import and for `POST /v1/gpus/{part}/removals` alike:
/// - a placement that ended at `at` is the one the removal ends: its ending must be the same
///   removal reason or one that names none (which then takes the removal's);
/// - else an open placement installed at or before `at` is closed at `at`;
/// - a closed placement that began before `at` and ended after it contradicts the removal, as does
///   an open placement that began after it (the part is in service since then);
/// - else the part was out of every slot and the removal stands alone.
pub fn fit_removal(spans: &[Span], at: DateTime<Utc>, reason: RemovalReason) -> Result<RemovalFit, RemovalConflict> {
    if let Some((i, s)) = spans.iter().enumerate().find(|(_, s)| s.removed_at == Some(at)) {
        let ending = s.end_reason.unwrap_or(EndReason::Other);
        return match ending.removal() {
            Some(r) if r != reason => Err(RemovalConflict::Disagrees {
                span: i,
                end_reason: ending,
            }),
            Some(_) => Ok(RemovalFit::Ends {
                span: i,
                relabel: false,
            }),
            None => Ok(RemovalFit::Ends { span: i, relabel: true }),
        };
    }
    if let Some(i) = spans
        .iter()
        .position(|s| s.installed_at < at && s.removed_at.is_some_and(|r| r > at))
    {
        return Err(RemovalConflict::Inside(i));
    }
    if let Some(i) = spans
        .iter()
        .position(|s| s.removed_at.is_none() && s.installed_at <= at)
    {
        return Ok(RemovalFit::Closes(i));
    }
    if let Some(i) = spans.iter().position(|s| s.removed_at.is_none() && s.installed_at > at) {
        return Err(RemovalConflict::BeforePlacement(i));
    }
    Ok(RemovalFit::Alone)
}

/// An open placement as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenPlacement {
    pub cluster: String,
    pub part: String,
    pub installed_at: DateTime<Utc>,
    pub hostname: String,
    pub gpu_index: Option<i32>,
    pub pci_bus_id: Option<String>,
    pub uuid: Option<String>,
}

/// A placement to close: (cluster, part, installed_at) at `at` for `reason`.
#[derive(Debug, Clone, PartialEq)]
pub struct Closing {
    pub cluster: String,
    pub part: String,
    pub installed_at: DateTime<Utc>,
    pub at: DateTime<Utc>,
    pub reason: EndReason,
}

/// What a set of node reports changes.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct InventoryPlan {
    pub close: Vec<Closing>,
    /// New placements (the part's cluster and node are the report's).
    pub open: Vec<OpenPlacement>,
    /// GPUs ignored because their part has a newer placement than the report (a stale report).
    pub stale: usize,
}

/// Diffs node reports against the open placements of the reported nodes and of the reported parts
/// (wherever they are). A part in the same slot with the same UUID changes nothing; in the same
/// slot with a new UUID it is reidentified; anywhere else it moved; an open placement on a reported
/// node whose part the node no longer reports ends as absent. Reports are applied in time order;
/// a part whose open placement began after the report keeps it (the report is stale for it).
pub fn plan_inventory(reports: &[NodeGpus], open: &[OpenPlacement]) -> InventoryPlan {
    use std::collections::HashMap;
    let mut current: HashMap<&str, &OpenPlacement> = HashMap::new();
    for o in open {
        // Two open placements of one part can only come from an import; the latest is current.
        let e = current.entry(o.part.as_str()).or_insert(o);
        if o.installed_at > e.installed_at {
            *e = o;
        }
    }
    let mut plan = InventoryPlan::default();
    let mut order: Vec<&NodeGpus> = reports.iter().collect();
    order.sort_by_key(|r| r.observed_at);
    let mut moved_away: std::collections::HashSet<(&str, &str)> = std::collections::HashSet::new();
    let mut reported: std::collections::HashSet<(&str, &str, &str)> = std::collections::HashSet::new();
    for r in &order {
        for g in &r.gpus {
            reported.insert((&r.cluster, &r.hostname, &g.part));
            let here = OpenPlacement {
                cluster: r.cluster.clone(),
                part: g.part.clone(),
                installed_at: r.observed_at,
                hostname: r.hostname.clone(),
                gpu_index: g.index,
                pci_bus_id: g.pci_bus_id.clone(),
                uuid: g.uuid.clone(),
            };
            match current.get(g.part.as_str()) {
                Some(o) if o.installed_at > r.observed_at => plan.stale += 1,
                Some(o) => {
                    let same_node = o.cluster == r.cluster && o.hostname == r.hostname;
                    let same_slot = same_node && o.gpu_index == g.index && o.pci_bus_id == g.pci_bus_id;
                    if same_slot && o.uuid == g.uuid {
                        continue;
                    }
                    let reason = if same_slot {
                        EndReason::Reidentified
                    } else {
                        EndReason::Moved
                    };
                    if o.installed_at == r.observed_at {
                        // Reported twice at one instant: the later report in the batch wins.
                        plan.close
                            .retain(|c| !(c.part == o.part && c.installed_at == o.installed_at));
                        plan.open
                            .retain(|p| !(p.part == o.part && p.installed_at == o.installed_at));
                    }
                    plan.close.push(Closing {
                        cluster: o.cluster.clone(),
                        part: o.part.clone(),
                        installed_at: o.installed_at,
                        at: r.observed_at,
                        reason,
                    });
                    moved_away.insert((&o.cluster, &o.part));
                    plan.open.push(here);
                }
                None => plan.open.push(here),
            }
        }
    }
    // Parts a reported node no longer reports, unless another report already moved them.
    for r in &order {
        for o in open
            .iter()
            .filter(|o| o.cluster == r.cluster && o.hostname == r.hostname)
        {
            if reported.contains(&(r.cluster.as_str(), r.hostname.as_str(), o.part.as_str()))
                || moved_away.contains(&(o.cluster.as_str(), o.part.as_str()))
                || o.installed_at > r.observed_at
                || plan
                    .close
                    .iter()
                    .any(|c| c.part == o.part && c.installed_at == o.installed_at)
            {
                continue;
            }
            plan.close.push(Closing {
                cluster: o.cluster.clone(),
                part: o.part.clone(),
                installed_at: o.installed_at,
                at: r.observed_at,
                reason: EndReason::Absent,
            });
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(h: i64) -> DateTime<Utc> {
        "2026-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap() + chrono::Duration::hours(h)
    }

    fn gpu(index: i32, serial: &str, uuid: &str) -> ReportedGpu {
        validate_gpu(
            "g",
            GpuReport {
                index: Some(index),
                serial: Some(serial.into()),
                uuid: Some(uuid.into()),
                model: Some("NVIDIA H100 80GB HBM3".into()),
                ..Default::default()
            },
        )
        .unwrap()
    }

    fn report(host: &str, at: i64, gpus: Vec<ReportedGpu>) -> NodeGpus {
        NodeGpus {
            cluster: "c".into(),
            hostname: host.into(),
            observed_at: t(at),
            gpus,
        }
    }

    fn placed(host: &str, part: &str, index: i32, uuid: &str, at: i64) -> OpenPlacement {
        OpenPlacement {
            cluster: "c".into(),
            part: part.into(),
            installed_at: t(at),
            hostname: host.into(),
            gpu_index: Some(index),
            pci_bus_id: None,
            uuid: Some(uuid.into()),
        }
    }

    #[test]
    fn identity_is_the_serial_else_the_uuid_and_placeholders_are_absent() {
        let g = validate_gpu(
            "g",
            GpuReport {
                serial: Some("N/A".into()),
                uuid: Some("GPU-1".into()),
                pci_bus_id: Some("00000000:3B:00.0".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!((g.part.as_str(), g.serial.as_deref()), ("GPU-1", None));
        assert_eq!(g.pci_bus_id.as_deref(), Some("0000:3b:00.0"));
        assert_eq!(gpu(0, "1654922000001", "GPU-2").part, "1654922000001");
        let err = validate_gpu("gpus[2]", GpuReport::default()).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("gpus[2].serial"));
        let err = validate_gpu(
            "gpus[0]",
            GpuReport {
                serial: Some("S".into()),
                pci_bus_id: Some("bus three".into()),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("gpus[0].pci_bus_id"));
    }

    #[test]
    fn a_node_may_not_report_one_part_or_index_twice() {
        let dup = |a: GpuReport, b: GpuReport| validate_node_gpus("c".into(), "n".into(), t(0), vec![a, b]);
        let g = |i: i32, s: &str| GpuReport {
            index: Some(i),
            serial: Some(s.into()),
            ..Default::default()
        };
        assert!(dup(g(0, "A"), g(1, "B")).is_ok());
        assert_eq!(
            dup(g(0, "A"), g(1, "A")).unwrap_err().message,
            "has the same part (serial or UUID) as gpus[0]"
        );
        assert_eq!(
            dup(g(0, "A"), g(0, "B")).unwrap_err().message,
            "has the same index as gpus[0]"
        );
    }

    #[test]
    fn an_unchanged_report_changes_nothing() {
        let open = vec![placed("n1", "A", 0, "GPU-a", 0), placed("n1", "B", 1, "GPU-b", 0)];
        let plan = plan_inventory(
            &[report("n1", 5, vec![gpu(0, "A", "GPU-a"), gpu(1, "B", "GPU-b")])],
            &open,
        );
        assert_eq!(plan, InventoryPlan::default());
    }

    #[test]
    fn a_swap_closes_the_old_part_as_absent_and_opens_the_new_one() {
        let open = vec![placed("n1", "A", 0, "GPU-a", 0), placed("n1", "B", 1, "GPU-b", 0)];
        let plan = plan_inventory(
            &[report("n1", 5, vec![gpu(0, "A", "GPU-a"), gpu(1, "C", "GPU-c")])],
            &open,
        );
        assert_eq!(plan.close.len(), 1);
        assert_eq!(
            (plan.close[0].part.as_str(), plan.close[0].reason, plan.close[0].at),
            ("B", EndReason::Absent, t(5))
        );
        assert_eq!(plan.open.len(), 1);
        assert_eq!((plan.open[0].part.as_str(), plan.open[0].gpu_index), ("C", Some(1)));
    }

    #[test]
    fn a_part_reported_by_another_node_moved_and_is_not_also_absent() {
        let open = vec![placed("n1", "A", 0, "GPU-a", 0), placed("n2", "X", 0, "GPU-x", 0)];
        // n1 no longer has A; n2 now has A in slot 3 beside X.
        let plan = plan_inventory(
            &[
                report("n1", 5, vec![]),
                report("n2", 6, vec![gpu(0, "X", "GPU-x"), gpu(3, "A", "GPU-a")]),
            ],
            &open,
        );
        let reasons: Vec<_> = plan.close.iter().map(|c| (c.part.as_str(), c.reason, c.at)).collect();
        // One close, when n2 found it: where A was between n1's report and n2's is not known,
        // so it ages in its old slot until then.
        assert_eq!(reasons, vec![("A", EndReason::Moved, t(6))]);
        assert_eq!(plan.open.len(), 1);
        assert_eq!(
            (plan.open[0].hostname.as_str(), plan.open[0].gpu_index),
            ("n2", Some(3))
        );
    }

    #[test]
    fn a_new_uuid_on_the_same_serial_reidentifies_the_part_in_place() {
        let open = vec![placed("n1", "A", 0, "GPU-old", 0)];
        let plan = plan_inventory(&[report("n1", 5, vec![gpu(0, "A", "GPU-new")])], &open);
        assert_eq!(plan.close[0].reason, EndReason::Reidentified);
        assert_eq!(plan.open[0].uuid.as_deref(), Some("GPU-new"));
    }

    #[test]
    fn a_report_older_than_the_placement_is_stale_for_it() {
        let open = vec![placed("n1", "A", 0, "GPU-a", 10)];
        let plan = plan_inventory(&[report("n2", 5, vec![gpu(0, "A", "GPU-a")])], &open);
        assert_eq!((plan.stale, plan.close.len(), plan.open.len()), (1, 0, 0));
    }

    #[test]
    fn a_part_back_from_rma_opens_a_new_placement() {
        // No open placement: the part was removed earlier.
        let plan = plan_inventory(&[report("n7", 5, vec![gpu(2, "A", "GPU-a2")])], &[]);
        assert_eq!(plan.open.len(), 1);
        assert!(plan.close.is_empty());
    }

    fn span(from: i64, to: Option<i64>, end: Option<EndReason>) -> Span {
        let t = |d: i64| DateTime::<Utc>::from_timestamp(d * 86_400, 0).unwrap();
        Span {
            installed_at: t(from),
            removed_at: to.map(t),
            end_reason: end,
        }
    }

    #[test]
    fn a_removal_ends_the_placement_it_closes_or_contradicts_it() {
        let at = |d: i64| DateTime::<Utc>::from_timestamp(d * 86_400, 0).unwrap();
        let failed = RemovalReason::Failed;
        // Open since day 0: a failure on day 10 closes it; one before it began is refused.
        let open = [span(0, None, None)];
        assert_eq!(fit_removal(&open, at(10), failed), Ok(RemovalFit::Closes(0)));
        assert_eq!(fit_removal(&open, at(0), failed), Ok(RemovalFit::Closes(0)));
        assert_eq!(
            fit_removal(&[span(5, None, None)], at(1), failed),
            Err(RemovalConflict::BeforePlacement(0))
        );
        // Ended on day 10 as failed: the same removal is its ending; rma is another story.
        let ended = [span(0, Some(10), Some(EndReason::Failed)), span(20, None, None)];
        assert_eq!(
            fit_removal(&ended, at(10), failed),
            Ok(RemovalFit::Ends {
                span: 0,
                relabel: false
            })
        );
        assert_eq!(
            fit_removal(&ended, at(10), RemovalReason::Rma),
            Err(RemovalConflict::Disagrees {
                span: 0,
                end_reason: EndReason::Failed
            })
        );
        // An ending that named no removal takes the removal's reason.
        let absent = [span(0, Some(10), Some(EndReason::Absent))];
        assert_eq!(
            fit_removal(&absent, at(10), failed),
            Ok(RemovalFit::Ends { span: 0, relabel: true })
        );
        // Inside a closed placement: the part was still in its slot.
        assert_eq!(fit_removal(&absent, at(5), failed), Err(RemovalConflict::Inside(0)));
        // Between placements, before the part came back: refused (end the earlier one instead);
        // after the last one ended: a spare retired, alone.
        assert_eq!(
            fit_removal(&ended, at(15), failed),
            Err(RemovalConflict::BeforePlacement(1))
        );
        assert_eq!(fit_removal(&absent, at(15), failed), Ok(RemovalFit::Alone));
        assert_eq!(fit_removal(&[], at(15), failed), Ok(RemovalFit::Alone));
    }
}
