//! `nvidia-smi -q -x`: the XML report every NVIDIA node can produce. Read here for the node's GPU
//! set (identity, slot, model, firmware) with [`parse_gpus`], and for its health counters (ECC,
//! retired pages, remapped rows, recovery action) with [`parse_counters`], which the agent diffs. Elements differ by
//! driver generation (`gpu_part_number` before `board_part_number` existed, `pci_bus_id` with a
//! 4- or 8-digit domain), so every field is optional and unknown elements are ignored.
//!
//! A GPU's index is its position in the report: nvidia-smi enumerates GPUs in PCI bus order, the
//! order `nvidia-smi -i N` and CUDA (with `CUDA_DEVICE_ORDER=PCI_BUS_ID`) use.

use serde::Deserialize;

use crate::domain::part::GpuReport;

#[derive(Debug, Deserialize)]
struct Log {
    driver_version: Option<String>,
    #[serde(default)]
    gpu: Vec<Gpu>,
}

#[derive(Debug, Deserialize)]
struct Gpu {
    #[serde(rename = "@id")]
    id: Option<String>,
    product_name: Option<String>,
    serial: Option<String>,
    uuid: Option<String>,
    vbios_version: Option<String>,
    board_part_number: Option<String>,
    gpu_part_number: Option<String>,
    pci: Option<Pci>,
}

#[derive(Debug, Deserialize)]
struct Pci {
    pci_bus_id: Option<String>,
}

/// The GPUs of one report, in its order, with `index` their position. Errors say what is wrong
/// with the document (not XML, not an `nvidia_smi_log`).
pub fn parse_gpus(xml: &str) -> Result<Vec<GpuReport>, String> {
    // serde reads any root element; a document that is not a report must not read as a node
    // without GPUs (which would close every placement of the node).
    match root_element(xml)? {
        Some(name) if name == "nvidia_smi_log" => {}
        Some(name) => {
            return Err(format!(
                "not an nvidia-smi -q -x report: the root element is <{name}>, not <nvidia_smi_log>"
            ));
        }
        None => return Err("not an nvidia-smi -q -x report: no root element".into()),
    }
    // The DOCTYPE names a DTD that is not fetched; serde's reader skips it.
    let log: Log = quick_xml::de::from_str(xml).map_err(|e| format!("not an nvidia-smi -q -x report: {e}"))?;
    Ok(log
        .gpu
        .into_iter()
        .enumerate()
        .map(|(i, g)| GpuReport {
            index: i32::try_from(i).ok(),
            pci_bus_id: g.pci.and_then(|p| p.pci_bus_id).or(g.id),
            uuid: g.uuid.map(|s| s.trim().to_string()),
            serial: g.serial.map(|s| s.trim().to_string()),
            model: g.product_name.map(|s| s.trim().to_string()),
            board_part_number: g.board_part_number.or(g.gpu_part_number).map(|s| s.trim().to_string()),
            vbios: g.vbios_version.map(|s| s.trim().to_string()),
            driver: log.driver_version.as_ref().map(|s| s.trim().to_string()),
        })
        .collect())
}

/// One GPU's health counters as `nvidia-smi -q -x` reports them: None where the driver says
/// `N/A` or the element does not exist in its generation.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GpuCounters {
    pub index: i32,
    pub uuid: Option<String>,
    pub serial: Option<String>,
    pub pci_bus_id: Option<String>,
    pub model: Option<String>,
    /// Corrected (single-bit) ECC errors since the driver loaded / over the GPU's life:
    /// `single_bit/total` before Ampere, `sram_correctable + dram_correctable` since.
    pub ecc_volatile_corrected: Option<u64>,
    pub ecc_aggregate_corrected: Option<u64>,
    /// Uncorrected (double-bit) ECC errors: `double_bit/total`, or the sum of the SRAM
    /// (parity, SEC-DED) and DRAM uncorrectable counts.
    pub ecc_volatile_uncorrected: Option<u64>,
    pub ecc_aggregate_uncorrected: Option<u64>,
    /// Pages retired for repeated single-bit and for double-bit errors (before Ampere).
    pub retired_pages_single_bit: Option<u64>,
    pub retired_pages_double_bit: Option<u64>,
    /// A retirement waits for the next driver reload (`pending_retirement`, `pending_blacklist`).
    pub retired_pages_pending: Option<bool>,
    /// Rows remapped for correctable and uncorrectable errors (Ampere and later).
    pub remapped_rows_correctable: Option<u64>,
    pub remapped_rows_uncorrectable: Option<u64>,
    /// A remap waits for a GPU reset; a remap failed (the GPU needs service).
    pub remapped_rows_pending: Option<bool>,
    pub remapped_rows_failure: Option<bool>,
    /// What newer drivers say the GPU needs (`None`, `Reset`, `Node Reboot`, `Drain P2P`, ...).
    pub recovery_action: Option<String>,
}

#[derive(Debug, Deserialize)]
struct CountersLog {
    #[serde(default)]
    gpu: Vec<CountersGpu>,
}

#[derive(Debug, Deserialize)]
struct CountersGpu {
    #[serde(rename = "@id")]
    id: Option<String>,
    product_name: Option<String>,
    serial: Option<String>,
    uuid: Option<String>,
    pci: Option<Pci>,
    ecc_errors: Option<EccErrors>,
    retired_pages: Option<RetiredPages>,
    remapped_rows: Option<RemappedRows>,
    gpu_recovery_action: Option<String>,
}

#[derive(Debug, Deserialize)]
struct EccErrors {
    volatile: Option<EccCounts>,
    aggregate: Option<EccCounts>,
}

#[derive(Debug, Deserialize)]
struct EccCounts {
    single_bit: Option<BitCounts>,
    double_bit: Option<BitCounts>,
    sram_correctable: Option<String>,
    sram_uncorrectable: Option<String>,
    sram_uncorrectable_parity: Option<String>,
    sram_uncorrectable_secded: Option<String>,
    dram_correctable: Option<String>,
    dram_uncorrectable: Option<String>,
}

#[derive(Debug, Deserialize)]
struct BitCounts {
    total: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RetiredPages {
    multiple_single_bit_retirement: Option<RetiredCount>,
    double_bit_retirement: Option<RetiredCount>,
    pending_blacklist: Option<String>,
    pending_retirement: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RetiredCount {
    retired_count: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RemappedRows {
    remapped_row_corr: Option<String>,
    remapped_row_unc: Option<String>,
    remapped_row_pending: Option<String>,
    remapped_row_failure: Option<String>,
}

fn count(v: &Option<String>) -> Option<u64> {
    v.as_deref().and_then(|s| s.trim().parse().ok())
}

fn yes_no(v: &Option<String>) -> Option<bool> {
    match v.as_deref().map(str::trim) {
        Some(s) if s.eq_ignore_ascii_case("yes") => Some(true),
        Some(s) if s.eq_ignore_ascii_case("no") => Some(false),
        _ => None,
    }
}

/// The sum of the counts that are numbers; None if none is.
fn sum(values: &[Option<u64>]) -> Option<u64> {
    values.iter().flatten().copied().reduce(|a, b| a.saturating_add(b))
}

impl EccCounts {
    fn corrected(&self) -> Option<u64> {
        count(&self.single_bit.as_ref().and_then(|b| b.total.clone()))
            .or_else(|| sum(&[count(&self.sram_correctable), count(&self.dram_correctable)]))
    }

    fn uncorrected(&self) -> Option<u64> {
        count(&self.double_bit.as_ref().and_then(|b| b.total.clone())).or_else(|| {
            sum(&[
                count(&self.sram_uncorrectable),
                count(&self.sram_uncorrectable_parity),
                count(&self.sram_uncorrectable_secded),
                count(&self.dram_uncorrectable),
            ])
        })
    }
}

/// Each GPU's health counters, in report order (`index` = position, as in [`parse_gpus`]).
pub fn parse_counters(xml: &str) -> Result<Vec<GpuCounters>, String> {
    match root_element(xml)? {
        Some(name) if name == "nvidia_smi_log" => {}
        _ => return Err("not an nvidia-smi -q -x report: the root element is not <nvidia_smi_log>".into()),
    }
    let log: CountersLog = quick_xml::de::from_str(xml).map_err(|e| format!("not an nvidia-smi -q -x report: {e}"))?;
    let text = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty() && s != "N/A");
    Ok(log
        .gpu
        .into_iter()
        .enumerate()
        .map(|(i, g)| {
            let ecc = g.ecc_errors.as_ref();
            let vol = ecc.and_then(|e| e.volatile.as_ref());
            let agg = ecc.and_then(|e| e.aggregate.as_ref());
            let ret = g.retired_pages.as_ref();
            let rem = g.remapped_rows.as_ref();
            GpuCounters {
                index: i32::try_from(i).unwrap_or(i32::MAX),
                uuid: text(g.uuid),
                serial: text(g.serial),
                pci_bus_id: g
                    .pci
                    .and_then(|p| p.pci_bus_id)
                    .or(g.id)
                    .and_then(|b| crate::logparse::normalise_pci_bus_id(&b)),
                model: text(g.product_name),
                ecc_volatile_corrected: vol.and_then(EccCounts::corrected),
                ecc_aggregate_corrected: agg.and_then(EccCounts::corrected),
                ecc_volatile_uncorrected: vol.and_then(EccCounts::uncorrected),
                ecc_aggregate_uncorrected: agg.and_then(EccCounts::uncorrected),
                retired_pages_single_bit: ret
                    .and_then(|r| r.multiple_single_bit_retirement.as_ref())
                    .and_then(|c| count(&c.retired_count)),
                retired_pages_double_bit: ret
                    .and_then(|r| r.double_bit_retirement.as_ref())
                    .and_then(|c| count(&c.retired_count)),
                retired_pages_pending: ret
                    .and_then(|r| yes_no(&r.pending_retirement).or_else(|| yes_no(&r.pending_blacklist))),
                remapped_rows_correctable: rem.and_then(|r| count(&r.remapped_row_corr)),
                remapped_rows_uncorrectable: rem.and_then(|r| count(&r.remapped_row_unc)),
                remapped_rows_pending: rem.and_then(|r| yes_no(&r.remapped_row_pending)),
                remapped_rows_failure: rem.and_then(|r| yes_no(&r.remapped_row_failure)),
                recovery_action: text(g.gpu_recovery_action),
            }
        })
        .collect())
}

/// The name of the document's first element.
fn root_element(xml: &str) -> Result<Option<String>, String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e) | Event::Empty(e)) => {
                return Ok(Some(e.name().into_inner().to_string()));
            }
            Ok(Event::Eof) => return Ok(None),
            Ok(_) => {}
            Err(e) => return Err(format!("not an nvidia-smi -q -x report: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real report of a two-GPU Tesla P100 node (driver 375.66), from Apache Hadoop's YARN GPU
    /// plugin tests (`nvidia-smi-sample-output.xml`, Apache License 2.0), shortened.
    const P100: &str = include_str!("../../../../tests/fixtures/nvidia-smi/p100-two-gpus.xml");

    #[test]
    fn reads_identity_slot_and_firmware_of_each_gpu_in_order() {
        let gpus = parse_gpus(P100).unwrap();
        assert_eq!(gpus.len(), 2);
        let g = &gpus[0];
        assert_eq!(g.index, Some(0));
        assert_eq!(g.serial.as_deref(), Some("0320717030197"));
        assert_eq!(g.uuid.as_deref(), Some("GPU-28604e81-21ec-cc48-6759-bf2648b22e16"));
        assert_eq!(g.pci_bus_id.as_deref(), Some("0000:04:00.0"));
        assert_eq!(g.model.as_deref(), Some("Tesla P100-PCIE-12GB"));
        assert_eq!(g.board_part_number.as_deref(), Some("900-2H400-0110-030"));
        assert_eq!(g.vbios.as_deref(), Some("86.00.3A.00.02"));
        assert_eq!(g.driver.as_deref(), Some("375.66"));
        assert_eq!(gpus[1].index, Some(1));
        assert_eq!(gpus[1].serial.as_deref(), Some("0320717031755"));
        assert_eq!(gpus[1].pci_bus_id.as_deref(), Some("0000:82:00.0"));
    }

    #[test]
    fn a_newer_report_without_serial_keeps_the_uuid_and_an_eight_digit_domain() {
        let xml = r#"<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <driver_version>550.54.14</driver_version>
  <attached_gpus>1</attached_gpus>
  <gpu id="00000000:18:00.0">
    <product_name>NVIDIA H100 80GB HBM3</product_name>
    <serial>N/A</serial>
    <uuid>GPU-0b1c2d3e-0000-1111-2222-333344445555</uuid>
    <board_part_number>692-2G520-0200-000</board_part_number>
    <pci><pci_bus_id>00000000:18:00.0</pci_bus_id></pci>
  </gpu>
</nvidia_smi_log>"#;
        let gpus = parse_gpus(xml).unwrap();
        let g = crate::domain::part::validate_gpu("gpus[0]", gpus[0].clone()).unwrap();
        assert_eq!(g.part, "GPU-0b1c2d3e-0000-1111-2222-333344445555");
        assert_eq!(g.pci_bus_id.as_deref(), Some("0000:18:00.0"));
        assert_eq!(g.generation, crate::domain::gpu::GpuGeneration::Hopper);
    }

    #[test]
    fn what_is_not_a_report_is_said_so() {
        assert!(
            parse_gpus("{\"gpus\": []}")
                .unwrap_err()
                .starts_with("not an nvidia-smi -q -x report")
        );
        assert!(parse_gpus("<nvidia_smi_log><gpu>").is_err());
        assert!(parse_gpus("<html></html>").unwrap_err().contains("<html>"));
        assert!(parse_gpus("").is_err());
        assert_eq!(parse_gpus("<nvidia_smi_log></nvidia_smi_log>").unwrap().len(), 0);
    }

    /// A real NVIDIA L4 report (driver 555.42.06, DTD v12), shortened: see the fixture's comment.
    const L4: &str = include_str!("../../../../tests/fixtures/nvidia-smi/l4-555.xml");

    #[test]
    fn counters_of_the_pre_ampere_schema_single_and_double_bit_totals_and_retired_pages() {
        let c = parse_counters(P100).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].uuid.as_deref(), Some("GPU-28604e81-21ec-cc48-6759-bf2648b22e16"));
        assert_eq!(c[0].pci_bus_id.as_deref(), Some("0000:04:00.0"));
        assert_eq!(
            (c[0].ecc_volatile_corrected, c[0].ecc_volatile_uncorrected),
            (Some(0), Some(0))
        );
        assert_eq!(
            (c[0].retired_pages_single_bit, c[0].retired_pages_double_bit),
            (Some(0), Some(0))
        );
        // No remapped rows before Ampere, no recovery action before r55x.
        assert_eq!(c[0].remapped_rows_correctable, None);
        assert_eq!(c[0].recovery_action, None);
    }

    #[test]
    fn counters_of_the_sram_dram_schema_with_remapped_rows() {
        let c = parse_counters(L4).unwrap();
        assert_eq!(c.len(), 1);
        let g = &c[0];
        assert_eq!(g.serial.as_deref(), Some("1654523003308"));
        assert_eq!(g.pci_bus_id.as_deref(), Some("0000:01:00.0"));
        assert_eq!(
            (g.ecc_aggregate_corrected, g.ecc_aggregate_uncorrected),
            (Some(0), Some(0))
        );
        assert_eq!((g.retired_pages_single_bit, g.retired_pages_pending), (None, None));
        assert_eq!(
            (g.remapped_rows_correctable, g.remapped_rows_uncorrectable),
            (Some(0), Some(0))
        );
        assert_eq!(
            (g.remapped_rows_pending, g.remapped_rows_failure),
            (Some(false), Some(false))
        );
        // The counters add up by kind: SRAM parity + SEC-DED + DRAM uncorrectable.
        let bumped = L4
            .replacen("<sram_uncorrectable_parity>0<", "<sram_uncorrectable_parity>2<", 1)
            .replacen("<dram_uncorrectable>0<", "<dram_uncorrectable>3<", 1)
            .replacen("<dram_correctable>0<", "<dram_correctable>40<", 1)
            .replace("<remapped_row_pending>No<", "<remapped_row_pending>Yes<")
            .replace(
                "<gsp_firmware_version>",
                "<gpu_recovery_action>Reset</gpu_recovery_action><gsp_firmware_version>",
            );
        let g = &parse_counters(&bumped).unwrap()[0];
        assert_eq!(
            (g.ecc_volatile_uncorrected, g.ecc_volatile_corrected),
            (Some(5), Some(40))
        );
        assert_eq!(g.ecc_aggregate_uncorrected, Some(0));
        assert_eq!(g.remapped_rows_pending, Some(true));
        assert_eq!(g.recovery_action.as_deref(), Some("Reset"));
        // The GPU set reads as before.
        assert_eq!(parse_gpus(L4).unwrap()[0].model.as_deref(), Some("NVIDIA L4"));
        assert!(parse_counters("<html/>").is_err());
    }

    /// A real report of an A100-SXM4-80GB in MIG mode (driver 535.54.03, DTD v12), verbatim from
    /// Telegraf's nvidia_smi tests (`a100-sxm4-v12.xml`, MIT): see tests/fixtures/nvidia-smi/README.md.
    const A100_MIG: &str = include_str!("../../../../tests/fixtures/nvidia-smi/a100-sxm4-80gb-mig-535.xml");

    #[test]
    fn a_real_a100_report_in_mig_mode_reads_its_gpu_not_its_mig_instances() {
        // The report says <attached_gpus>4</attached_gpus> but holds one <gpu> (as stored
        // upstream); the GPU set is the <gpu> elements, and its four <mig_device>s are not GPUs.
        let gpus = parse_gpus(A100_MIG).unwrap();
        assert_eq!(gpus.len(), 1);
        let g = &gpus[0];
        assert_eq!(g.index, Some(0));
        assert_eq!(g.pci_bus_id.as_deref(), Some("00000000:01:00.0"));
        assert_eq!(g.uuid.as_deref(), Some("GPU-513536b6-7d19-9063-b049-1e69664bb298"));
        assert_eq!(g.serial.as_deref(), Some("1650522003820"));
        assert_eq!(g.model.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
        assert_eq!(g.board_part_number.as_deref(), Some("692-2G506-0212-002"));
        assert_eq!(g.vbios.as_deref(), Some("92.00.36.00.02"));
        assert_eq!(g.driver.as_deref(), Some("535.54.03"));
        let v = crate::domain::part::validate_gpu("gpus[0]", g.clone()).unwrap();
        assert_eq!(v.part, "1650522003820");
        assert_eq!(v.pci_bus_id.as_deref(), Some("0000:01:00.0"));
        assert_eq!(v.generation, crate::domain::gpu::GpuGeneration::Ampere);
    }

    #[test]
    fn counters_of_a_real_a100_in_mig_mode_sram_dram_counts_and_remapped_rows_not_available() {
        let c = parse_counters(A100_MIG).unwrap();
        assert_eq!(c.len(), 1);
        let g = &c[0];
        assert_eq!(g.index, 0);
        assert_eq!(g.uuid.as_deref(), Some("GPU-513536b6-7d19-9063-b049-1e69664bb298"));
        assert_eq!(g.serial.as_deref(), Some("1650522003820"));
        assert_eq!(g.pci_bus_id.as_deref(), Some("0000:01:00.0"));
        assert_eq!(g.model.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
        // sram_correctable 0 + dram_correctable 0; sram_uncorrectable 0 + dram_uncorrectable 0.
        assert_eq!(
            (g.ecc_volatile_corrected, g.ecc_volatile_uncorrected),
            (Some(0), Some(0))
        );
        assert_eq!(
            (g.ecc_aggregate_corrected, g.ecc_aggregate_uncorrected),
            (Some(0), Some(0))
        );
        // Ampere retires no pages (every retired_pages field is N/A) ...
        assert_eq!(
            (
                g.retired_pages_single_bit,
                g.retired_pages_double_bit,
                g.retired_pages_pending
            ),
            (None, None, None)
        );
        // ... and this report has <remapped_rows>N/A</remapped_rows>, text where the counters
        // would be: unknown, not zero.
        assert_eq!(
            (g.remapped_rows_correctable, g.remapped_rows_uncorrectable),
            (None, None)
        );
        assert_eq!((g.remapped_rows_pending, g.remapped_rows_failure), (None, None));
        // r535 has no <gpu_recovery_action>.
        assert_eq!(g.recovery_action, None);
    }
}
