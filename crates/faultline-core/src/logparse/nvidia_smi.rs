//! `nvidia-smi -q -x`: the XML report every NVIDIA node can produce. Read here for the node's GPU
//! set (identity, slot, model, firmware); the counters are read by the agent. Elements differ by
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
}
