-- Host components: the node's parts get components of their own beside `host` (which keeps the
-- rest of the node): cpu, host_memory, disk, pcie and baseboard (BMC, system board). Component
-- columns are free text (no CHECK), so rows classified `host` stay valid and readable.
--
-- Built-in terms and rules reach an existing database here. Rows an admin edited (builtin false)
-- are left as they are; a built-in row an admin deleted stays deleted; a new term or rule whose
-- name an admin already uses keeps the admin's row. src/classify/lexicon.tsv is the lexicon's
-- source: 0008's rows with the changes below are exactly its rows (a unit test checks).

-- Built-in terms that now name a host part.
UPDATE classification_terms AS t
SET kind = v.kind, category = v.category, component = v.component, weight = v.weight, source = v.source
FROM (VALUES
  ('cpu', 'component', 'hardware', 'cpu', 3, 'IPMI sensor type Processor'),
  ('processor', 'component', 'hardware', 'cpu', 3, 'IPMI 2.0 sensor type 07h Processor'),
  ('core', 'component', 'hardware', 'cpu', 1, 'faultline: domain vocabulary'),
  ('dimm', 'component', 'hardware', 'host_memory', 4, 'IPMI 2.0 sensor type 0Ch Memory (DIMM)'),
  ('memory', 'component', 'hardware', 'host_memory', 2, 'IPMI 2.0 sensor type 0Ch Memory'),
  ('system memory', 'component', 'hardware', 'host_memory', 3, 'faultline: domain vocabulary'),
  ('host memory', 'component', 'hardware', 'host_memory', 3, 'faultline: domain vocabulary'),
  ('ram', 'component', 'hardware', 'host_memory', 2, 'faultline: domain vocabulary'),
  ('realmemory', 'component', 'hardware', 'host_memory', 3, 'Slurm drain reason: Low RealMemory'),
  ('motherboard', 'component', 'hardware', 'baseboard', 3, 'faultline: domain vocabulary'),
  ('mainboard', 'component', 'hardware', 'baseboard', 3, 'faultline: domain vocabulary'),
  ('baseboard', 'component', 'hardware', 'baseboard', 3, 'IPMI baseboard'),
  ('system board', 'component', 'hardware', 'baseboard', 3, 'IPMI 2.0 sensor type 15h System Board'),
  ('riser', 'component', 'hardware', 'pcie', 3, 'faultline: domain vocabulary (PCIe riser)'),
  ('bmc', 'component', 'hardware', 'baseboard', 3, 'IPMI/Redfish baseboard management controller'),
  ('ipmi', 'component', 'hardware', 'baseboard', 1, 'IPMI'),
  ('sel', 'component', 'hardware', 'baseboard', 1, 'IPMI system event log'),
  ('mce', 'fault', 'hardware', 'cpu', 4, 'Linux machine check exception'),
  ('machine check', 'fault', 'hardware', 'cpu', 4, 'Linux mcelog / kernel: Machine Check Exception'),
  ('ierr', 'fault', 'hardware', 'cpu', 4, 'IPMI Processor IERR'),
  ('caterr', 'fault', 'hardware', 'cpu', 4, 'Intel CATERR'),
  ('pcie', 'component', 'hardware', 'pcie', 2, 'PCI Express (AER)'),
  ('pci', 'component', 'hardware', 'pcie', 1.5, 'PCI'),
  ('aer', 'component', 'hardware', 'pcie', 3, 'PCIe Advanced Error Reporting'),
  ('pcie replay', 'fault', 'hardware', 'pcie', 3, 'DCGM PCIe replay counter'),
  ('pcie bus error', 'fault', 'hardware', 'pcie', 4, 'Linux PCIe AER: PCIe Bus Error'),
  ('ssd', 'component', 'hardware', 'disk', 3, 'faultline: domain vocabulary (local disk)'),
  ('nvme', 'component', 'hardware', 'disk', 3, 'faultline: domain vocabulary (local NVMe)'),
  ('disk', 'component', 'hardware', 'disk', 2, 'faultline: domain vocabulary'),
  ('drive', 'component', 'hardware', 'disk', 2, 'IPMI 2.0 sensor type 0Dh Drive Slot'),
  ('hard drive', 'component', 'hardware', 'disk', 3, 'faultline: domain vocabulary'),
  ('hdd', 'component', 'hardware', 'disk', 3, 'faultline: domain vocabulary'),
  ('raid', 'component', 'hardware', 'disk', 3, 'faultline: domain vocabulary'),
  ('smart', 'component', 'hardware', 'disk', 1, 'S.M.A.R.T. disk health'),
  ('battery', 'component', 'hardware', 'baseboard', 2, 'IPMI 2.0 sensor type 29h Battery (CMOS)'),
  ('cmos', 'component', 'hardware', 'baseboard', 2, 'CMOS battery'),
  ('tpm', 'component', 'hardware', 'baseboard', 2, 'Trusted Platform Module'),
  ('pci link', 'component', 'hardware', 'pcie', 3, 'DCGM: PCI link width / generation'),
  ('pcie link', 'component', 'hardware', 'pcie', 3, 'PCIe link width / speed'),
  ('critical interrupt', 'component', 'hardware', 'pcie', 3, 'IPMI 2.0 sensor type 13h Critical Interrupt'),
  ('serr', 'fault', 'hardware', 'pcie', 3, 'PCI SERR'),
  ('perr', 'fault', 'hardware', 'pcie', 3, 'PCI PERR'),
  ('bus', 'component', 'hardware', 'pcie', 1, 'faultline: domain vocabulary (PCI bus)'),
  ('drive slot', 'component', 'hardware', 'disk', 3, 'IPMI 2.0 sensor type 0Dh Drive Slot (Bay)'),
  ('rebuild', 'component', 'hardware', 'disk', 2, 'IPMI drive slot: rebuild/remap'),
  ('array', 'component', 'hardware', 'disk', 1, 'IPMI drive slot: in failed array'),
  ('management subsystem', 'component', 'hardware', 'baseboard', 3, 'IPMI 2.0 sensor type 28h Management Subsystem Health'),
  ('management controller', 'component', 'hardware', 'baseboard', 3, 'baseboard management controller'),
  ('ext4', 'component', 'hardware', 'disk', 3, 'ext4 (local file system)'),
  ('xfs', 'component', 'hardware', 'disk', 3, 'XFS (local file system)'),
  ('i o error', 'fault', 'hardware', 'disk', 3, 'Linux block layer I/O error'),
  ('ata', 'component', 'hardware', 'disk', 3, 'Linux libata (local disk)'),
  ('mcelog', 'component', 'hardware', 'cpu', 4, 'mcelog (LBNL NHC check_hw_mcelog)'),
  ('host to device', 'component', 'hardware', 'pcie', 3, 'host-to-device (PCIe) bandwidth'),
  ('device to host', 'component', 'hardware', 'pcie', 3, 'device-to-host (PCIe) bandwidth')
) AS v (term, kind, category, component, weight, source)
WHERE t.term = v.term AND t.builtin;

-- New built-in terms: IPMI sensor events, machine-check, EDAC, AER and block-layer vocabulary.
INSERT INTO classification_terms (term, kind, category, component, weight, source)
VALUES
  ('edac', 'component', 'hardware', 'host_memory', 4, 'Linux EDAC (drivers/edac/edac_mc.c: EDAC MCn: ... memory read error on ... DIMM)'),
  ('memory read error', 'fault', 'hardware', 'host_memory', 4, 'Linux EDAC edac_mc.c error type (memory read / write / scrubbing error)'),
  ('memory controller', 'component', 'hardware', 'host_memory', 3, 'mcelog decoder (nehalem.c: MEMORY CONTROLLER ..._CHANNEL..._ERR)'),
  ('memory device', 'component', 'hardware', 'host_memory', 3, 'IPMI 2.0 Memory sensor offset: Memory Device Disabled (ipmitool ipmi_sel.h)'),
  ('memory scrub', 'component', 'hardware', 'host_memory', 3, 'IPMI 2.0 Memory sensor offset: Memory Scrub Failed (ipmitool ipmi_sel.h)'),
  ('memory subsystem', 'component', 'hardware', 'host_memory', 3, 'Cloud instance health notices (a fault in the memory subsystem)'),
  ('dram', 'component', 'hardware', 'host_memory', 3, 'AMD machine-check decoder: DRAM ECC error (MC4, drivers/edac/mce_amd.c)'),
  ('pcieport', 'component', 'hardware', 'pcie', 3, 'Linux PCIe port service driver (pcieport ...: AER: / DPC: messages)'),
  ('dpc', 'component', 'hardware', 'pcie', 3, 'Linux PCIe Downstream Port Containment (pcieport ...: DPC: containment event)'),
  ('surprise down', 'fault', 'hardware', 'pcie', 4, 'PCIe AER uncorrectable error: Surprise Down (SDES)'),
  ('root port', 'component', 'hardware', 'pcie', 3, 'PCIe root port (AER error source)'),
  ('blk update request', 'fault', 'hardware', 'disk', 4, 'Linux block layer: blk_update_request: I/O error, dev sdX'),
  ('sector', 'component', 'hardware', 'disk', 2, 'Linux block layer: I/O error, dev sdX, sector N'),
  ('medium error', 'fault', 'hardware', 'disk', 4, 'SCSI sense key Medium Error (sd driver)'),
  ('unrecovered read error', 'fault', 'hardware', 'disk', 4, 'SCSI additional sense: Unrecovered read error'),
  ('scsi', 'component', 'hardware', 'disk', 2, 'Linux SCSI disk driver (sd)'),
  ('sata', 'component', 'hardware', 'disk', 3, 'SATA disk (libata)'),
  ('drive fault', 'fault', 'hardware', 'disk', 4, 'IPMI 2.0 Drive Slot sensor offset: Drive Fault (ipmitool ipmi_sel.h)'),
  ('post error', 'fault', 'hardware', 'baseboard', 3, 'IPMI 2.0 System Firmware Progress: POST error'),
  ('system firmware', 'component', 'hardware', 'baseboard', 2, 'IPMI 2.0 sensor type 0Fh System Firmware Progress (ipmitool ipmi_sdr.c: System Firmwares)'),
  ('containment event', 'fault', 'hardware', 'pcie', 4, 'Linux PCIe Downstream Port Containment (drivers/pci/pcie/dpc.c: DPC: containment event)'),
  ('ext4 filesystem', 'component', 'hardware', 'disk', 4, 'Linux ext4 messages of a local disk (EXT4-fs error (device sda1), EXT4-fs (sda1): Remounting filesystem read-only)')
ON CONFLICT (term) DO NOTHING;

-- Built-in rules that now name a host part.
UPDATE classification_rules AS r
SET category = v.category, component = v.component, description = v.description
FROM (VALUES
  ('kernel-panic-mce', 'hardware', 'cpu', 'Kernel panic due to a machine check: the processor''s machine-check architecture reported the error (CPU, cache or memory controller; EDAC names the DIMM).'),
  ('hc-pcie', 'hardware', 'pcie', 'Health check: PCIe bus / AER error or degraded PCIe link.'),
  ('any-pcie', 'hardware', 'pcie', 'PCIe bus / AER error or degraded PCIe link.')
) AS v (rule_id, category, component, description)
WHERE r.rule_id = v.rule_id AND r.builtin;

-- New built-in rules: machine checks, host memory and local disks, in the bands of 0002.
INSERT INTO classification_rules
  (rule_id, kind, code, pattern, priority, category, component, severity, transient, secondary, action, description, source)
VALUES
  ('hc-machine-check', 'health_check', NULL, 'machine check|mce:|mcelog', 156, 'hardware', 'cpu', 'high', false, false, 'drain_node', 'Health check: machine check reported by the processor (MCE); an EDAC or DIMM name in the text points to host memory instead.', 'Linux x86 machine-check messages (arch/x86/kernel/cpu/mce/core.c: mce: [Hardware Error]: CPU n: Machine Check ...); mcelog; IPMI 2.0 Processor sensor offsets (ipmitool include/ipmitool/ipmi_sel.h)'),
  ('any-machine-check', '*', NULL, 'machine check|mce:|mcelog', 56, 'hardware', 'cpu', 'high', false, false, 'drain_node', 'Machine check reported by the processor (MCE); an EDAC or DIMM name in the text points to host memory instead.', 'Linux x86 machine-check messages (arch/x86/kernel/cpu/mce/core.c: mce: [Hardware Error]: CPU n: Machine Check ...); mcelog; IPMI 2.0 Processor sensor offsets (ipmitool include/ipmitool/ipmi_sel.h)'),
  ('hc-host-memory', 'health_check', NULL, 'edac|dimm', 158, 'hardware', 'host_memory', 'high', false, false, 'drain_node', 'Health check: host memory (DIMM) error reported by EDAC, the BMC or a node health check.', 'Linux EDAC (drivers/edac/edac_mc.c: EDAC MCn: ... error on ... DIMM); IPMI 2.0 Memory sensor offsets (ipmitool include/ipmitool/ipmi_sel.h)'),
  ('any-host-memory', '*', NULL, 'edac|dimm', 58, 'hardware', 'host_memory', 'high', false, false, 'drain_node', 'Host memory (DIMM) error reported by EDAC, the BMC or a node health check.', 'Linux EDAC (drivers/edac/edac_mc.c: EDAC MCn: ... error on ... DIMM); IPMI 2.0 Memory sensor offsets (ipmitool include/ipmitool/ipmi_sel.h)'),
  ('hc-disk', 'health_check', NULL, 'blk_update_request|i/o error, dev|failed command:|medium error|unrecovered read error|drive fault|ext4-fs', 153, 'hardware', 'disk', 'high', false, false, 'check_hardware', 'Health check: local disk I/O error, failed ATA command or drive fault.', 'Linux block layer and libata messages (blk_update_request: I/O error, dev sdX; ataN.00: failed command:); ext4 on a local disk (EXT4-fs error / remounting read-only); SCSI sense keys; IPMI 2.0 Drive Slot sensor offsets (ipmitool include/ipmitool/ipmi_sel.h)'),
  ('any-disk', '*', NULL, 'blk_update_request|i/o error, dev|failed command:|medium error|unrecovered read error|drive fault|ext4-fs', 53, 'hardware', 'disk', 'high', false, false, 'check_hardware', 'Local disk I/O error, failed ATA command or drive fault.', 'Linux block layer and libata messages (blk_update_request: I/O error, dev sdX; ataN.00: failed command:); ext4 on a local disk (EXT4-fs error / remounting read-only); SCSI sense keys; IPMI 2.0 Drive Slot sensor offsets (ipmitool include/ipmitool/ipmi_sel.h)'),
  ('storage-error-disk', 'storage_error', NULL, 'blk_update_request|i/o error, dev|failed command:|medium error|unrecovered read error|drive fault|ext4-fs', 153, 'hardware', 'disk', 'high', false, false, 'check_hardware', 'Storage error of a local disk (block layer I/O error, failed ATA command, medium error), not of the shared file system.', 'Linux block layer and libata messages (blk_update_request: I/O error, dev sdX; ataN.00: failed command:); ext4 on a local disk (EXT4-fs error / remounting read-only); SCSI sense keys; IPMI 2.0 Drive Slot sensor offsets (ipmitool include/ipmitool/ipmi_sel.h)')
ON CONFLICT (rule_id) DO NOTHING;

-- A database that holds failures gets a new catalog version and a catalog rebuild, as after an
-- admin's edit: the background worker re-classifies its failures under the new terms and rules
-- (a fresh database has nothing to rebuild and stays at its first version). The test of
-- `failures` runs on its own, so each statement below touches reference tables only (Citus).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM failures) THEN
        UPDATE catalog_state SET version = version + 1;
        UPDATE catalog_rebuilds SET state = 'superseded', finished_at = now(), updated_at = now()
        WHERE state = 'running';
        INSERT INTO catalog_rebuilds (version) SELECT version FROM catalog_state
        ON CONFLICT (version) DO NOTHING;
    END IF;
END
$$;
