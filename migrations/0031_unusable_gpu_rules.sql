-- Driver messages of a GPU that cannot be used and that print no Xid get rules of their own kinds
-- (read by the node agent and /v1/logs): the driver could not initialise the GPU
-- (`RmInitAdapter failed!`, until now read as a GSP error), could not take it at all (`The NVIDIA
-- probe routine failed`, `probe of ... failed with error`), or needs a reset before the GPU can be
-- used again (`NV_ERR_RESET_REQUIRED`). Rules in the bands of 0002 (100: a kind without a code).
INSERT INTO classification_rules
  (rule_id, kind, code, pattern, priority, category, component, severity, transient, secondary, action, description, source)
VALUES
  ('gpu-init-failure', 'gpu_init_failure', NULL, NULL, 100, 'hardware', 'gpu', 'critical', false, false, 'check_hardware', 'The driver could not initialise the GPU (NVRM: RmInitAdapter failed!): the GPU is unusable until it does; reset the GPU or reboot the node, and run field diagnostics (and NVIDIA''s RMA process) if it fails again.', 'NVIDIA open-gpu-kernel-modules (kernel-open/nvidia/nv.c: rm_init_adapter failed; src/nvidia/arch/nvalloc/unix/src/osinit.c: RmInitAdapter failed!); https://docs.nvidia.com/deploy/gpu-debug-guidelines/index.html'),
  ('gpu-probe-failure', 'gpu_probe_failure', NULL, NULL, 100, 'platform', 'driver', 'high', false, false, 'fix_config', 'The NVIDIA driver could not take a GPU (its probe routine failed; no NVIDIA device initialised): a GPU the installed driver release does not support, another driver holding the device, or PCI resources (a 64-bit BAR) the firmware did not assign. The GPU is unusable until the configuration is fixed.', 'NVIDIA Linux driver README, chapter Common Problems; NVIDIA open-gpu-kernel-modules kernel-open/nvidia/nv-pci.c and nv.c (The NVIDIA probe routine failed for %d device(s)); Linux drivers/base/dd.c (probe of %s failed with error %d)'),
  ('gpu-reset-required', 'gpu_reset_required', NULL, NULL, 100, 'hardware', 'gpu', 'critical', false, true, 'reset_gpu', 'The driver answers that the GPU needs a reset before it can be used again (NV_ERR_RESET_REQUIRED, status 0x62), as after a fatal GPU or GSP error: secondary to the error that caused it, the failure''s root when alone. Reset the GPU.', 'NVIDIA open-gpu-kernel-modules (src/common/sdk/nvidia/inc/nvstatuscodes.h: NV_ERR_RESET_REQUIRED 0x00000062 Reset required); https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (recovery action GPU Reset Required)')
ON CONFLICT (rule_id) DO NOTHING;

-- A database that holds failures gets a new catalog version and a catalog rebuild (as 0025 does):
-- its stored RmInitAdapter lines keep their kind, new ones are read with the new one.
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
