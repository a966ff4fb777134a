//! Per-format unit tests with realistic lines.

use super::*;
use serde_json::json;

fn ctx() -> LineContext {
    LineContext { year: 2021 }
}

fn p(line: &str) -> ParsedSignal {
    parse_line(line, &ctx()).unwrap_or_else(|| panic!("expected a signal for: {line}"))
}

fn none(line: &str) {
    if let Some(s) = parse_line(line, &ctx()) {
        panic!("expected None for {line:?}, got {s:?}");
    }
}

fn a<'s>(s: &'s ParsedSignal, k: &str) -> &'s Value {
    s.attr(k).unwrap_or_else(|| panic!("missing attribute {k} in {s:?}"))
}

/// Additional lines for the fuzzer (and exercised by the tests below).
pub(super) const EXTRA_SAMPLES: &[&str] = &[
    "NVRM: Xid (PCI:0000:3b:00): , pid=1234, name=python, GPU has fallen off the bus.",
    "nvidia-nvswitch2: SXid (PCI:0000:87:00.0): 24007, Fatal, Link 43 sourcetrack TCEN0 crumbstore ECC DBE Error",
    "kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0, 0x00bd5c8a, 0x00000500}",
    "NVRM: Xid (PCI:0000:48:00): 74, pid=22884, name=VLLM::Worker_TP, NVLink: fatal error detected on link 8(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    "NVRM: Xid (PCI:0000:48:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
    "NVRM: Xid (PCI:0000:00:1e): 149, NETIR_LINK_EVT Fatal XC 1 i 2 Link 01 [0x0000000a]",
    "NVRM: Xid (0000:03:00): 14, Channel 00000001",
    "NVRM: Xid (PCI:0000:65:00): 119, pid='N/A', Timeout waiting for RPC from GSP",
    "NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.",
    "node1:1234:5678 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<45678> with error 12, opcode 0, len 0, vendor err 129",
    "node1:1234:5678 [0] NCCL WARN Net : Connection closed by remote peer node2.cluster<34567>",
    "node1:1234:5678 [2] NCCL WARN socketProgress: Connection refused",
    "node1:1234:5678 [2] NCCL WARN Cuda failure 'an illegal memory access was encountered'",
    "node1:1234:5678 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
    "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.14.3",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 3.81 MiB is free. Process 12345 has 79.14 GiB memory in use.",
    "[rank2]:[E1206 01:02:03.000000000 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 2] Timeout at NCCL work: 5011, last enqueued NCCL work: 5011, last completed NCCL work: 5010.",
    "[PG ID 0 PG GUID 0(default_pg) Rank 5] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1",
    "Dec  6 12:34:56 gpu-node-3 nv-hostengine: GPU 1 had memory errors and row remappings are pending",
    "NVRM: _kgspRpcRecvPoll: GSP RM heartbeat timed out",
    "NVRM: GPU 0000:a1:00.0: RmInitAdapter failed! (0x62:0x40:2168)",
    "Detected 3 CRC NvLink errors on GPU 2's NVLink (should be 0)",
    "CUDA error: an uncorrectable NVLink error was detected during the execution",
    "Detected 2 volatile double-bit ECC error(s) in GPU 4.",
];

// ---------------------------------------------------------------- XID

#[test]
fn xid_kmsg() {
    let s = p(SIGNAL_SAMPLES[0]);
    assert_eq!((s.kind, s.code), ("xid", Some(79)));
    assert_eq!(s.pci_bus_id.as_deref(), Some("0000:3b:00.0"));
    assert_eq!(s.occurred_at, None);
    assert_eq!(a(&s, "pid"), &json!(1234));
    assert_eq!(a(&s, "process_name"), &json!("python"));
    assert_eq!(a(&s, "monotonic_s"), &json!(5.678901));
    assert_eq!(
        s.message,
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
    );
    assert_eq!(a(&s, "detail"), &json!("GPU has fallen off the bus."));
}

#[test]
fn xid_dmesg_and_dmesg_t() {
    let s = p(SIGNAL_SAMPLES[1]);
    assert_eq!((s.kind, s.code, s.occurred_at), ("xid", Some(79), None));
    assert_eq!(a(&s, "monotonic_s"), &json!(1234.56789));
    let s = p(SIGNAL_SAMPLES[2]);
    assert_eq!(s.code, Some(13));
    assert_eq!(s.occurred_at.unwrap().to_rfc3339(), "2021-12-06T12:34:56+00:00");
    assert_eq!(s.pci_bus_id.as_deref(), Some("0000:cb:00.0"));
    assert!(
        s.attr("pid").is_none() && s.attr("process_name").is_none(),
        "unknown pid/name are dropped"
    );
}

#[test]
fn xid_dmesg_iso_decorated() {
    let s = p(SIGNAL_SAMPLES[3]);
    assert_eq!(s.code, Some(48));
    assert_eq!(s.occurred_at.unwrap().to_rfc3339(), "2021-12-06T12:34:56.123456+00:00");
    assert_eq!(a(&s, "pid"), &json!(2280636));
    assert_eq!(a(&s, "process_name"), &json!("train.3"));
    assert!(s.message.starts_with("NVRM: Xid"));
}

#[test]
fn xid_syslog_and_rfc3339() {
    let s = p(SIGNAL_SAMPLES[4]);
    assert_eq!((s.kind, s.code), ("xid", Some(79)));
    assert_eq!(s.host.as_deref(), Some("gpu-node-17"));
    assert_eq!(s.occurred_at.unwrap().to_rfc3339(), "2021-12-06T12:34:56+00:00");
    assert_eq!(a(&s, "process_name"), &json!("pt_main_thread"));
    let s = p(SIGNAL_SAMPLES[5]);
    assert_eq!(s.code, Some(94));
    assert_eq!(s.host.as_deref(), Some("gpu-node-18"));
    assert_eq!(s.occurred_at.unwrap().to_rfc3339(), "2021-12-06T12:34:56.123456+00:00");
    // the year comes from the context for BSD syslog
    let s = parse_line(SIGNAL_SAMPLES[4], &LineContext { year: 2024 }).unwrap();
    assert_eq!(s.occurred_at.unwrap().to_rfc3339(), "2024-12-06T12:34:56+00:00");
}

#[test]
fn xid_mig() {
    let s = p(SIGNAL_SAMPLES[6]);
    assert_eq!(s.code, Some(94));
    assert_eq!(s.pci_bus_id.as_deref(), Some("0000:01:00.0"));
    assert_eq!(a(&s, "mig_gpu_instance"), &json!(5));
    assert_eq!(a(&s, "pid"), &json!(777));
}

#[test]
fn xid_nvlink5() {
    let s = p(SIGNAL_SAMPLES[7]);
    assert_eq!((s.kind, s.code), ("xid", Some(145)));
    assert_eq!(s.pci_bus_id.as_deref(), Some("0018:01:00.0"));
    assert_eq!(a(&s, "subcode"), &json!("RLW_RXPIPE"));
    assert_eq!(a(&s, "fatal"), &json!(false));
    assert_eq!(a(&s, "nvlink_link"), &json!(13));
    assert_eq!(a(&s, "xc"), &json!(0));
    assert_eq!(a(&s, "intr_info")[1], json!("0x00000008"));
    let s = p(SIGNAL_SAMPLES[8]);
    assert_eq!(s.code, Some(149));
    assert_eq!(a(&s, "subcode"), &json!("NETIR_LINK_EVT"));
    assert_eq!(a(&s, "fatal"), &json!(true));
    assert_eq!(a(&s, "nvlink_link"), &json!(1));
    let s = p(EXTRA_SAMPLES[5]);
    assert_eq!((s.code, a(&s, "fatal")), (Some(149), &json!(true)));
    assert_eq!(a(&s, "instance"), &json!(2));
    assert_eq!(a(&s, "intr_info"), &json!(["0x0000000a"]));
    // the brief's "NVLink: ... (Fatal)" wording
    let s = p("NVRM: Xid (PCI:0000:1b:00): 145, NVLink: RLW error on link 4 subcode 0x2 intr 0x00000100 (Fatal)");
    assert_eq!(
        (s.code, a(&s, "fatal"), a(&s, "nvlink_link")),
        (Some(145), &json!(true), &json!(4))
    );
    let s = p(EXTRA_SAMPLES[3]);
    assert_eq!(
        (s.code, a(&s, "fatal"), a(&s, "nvlink_link")),
        (Some(74), &json!(true), &json!(8))
    );
}

#[test]
fn xid_caused_by_and_preemptive() {
    let s = p(SIGNAL_SAMPLES[9]);
    assert_eq!((s.kind, s.code), ("xid", Some(45)));
    assert_eq!(a(&s, "caused_by_xid"), &json!(149));
    let s = p(
        "[ 99.1] NVRM: Xid (PCI:0000:3b:00): 45, pid=1, name=python, Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda applications and hitting a DBE.",
    );
    assert_eq!(a(&s, "preemptive_cleanup"), &json!(true));
}

#[test]
fn xid_gsp_119_and_154() {
    let s = p(SIGNAL_SAMPLES[10]);
    assert_eq!((s.kind, s.code), ("xid", Some(119)));
    assert_eq!(a(&s, "gsp_timeout_s"), &json!(6));
    assert_eq!(a(&s, "gsp_function"), &json!(76));
    assert_eq!(a(&s, "gsp_function_name"), &json!("GSP_RM_CONTROL"));
    assert_eq!(a(&s, "rm_gpu_instance"), &json!(1));
    assert_eq!(s.gpu_index, None, "GPU1 is the RM instance, not a GPU index");
    let s = p(EXTRA_SAMPLES[7]);
    assert_eq!(s.code, Some(119));
    assert!(s.attr("pid").is_none());
    let s = p(EXTRA_SAMPLES[4]);
    assert_eq!(s.code, Some(154));
    assert_eq!(a(&s, "recovery_action"), &json!("GPU Reset Required"));
    // the Xid-119 dump banner is not a second signal
    none("NVRM: _kgspLogXid119: ********************************* GSP Timeout **********************************");
    none("NVRM:     -2    76   GSP_RM_CONTROL              4125 0x000000002080a084 0x0000000000000004");
}

#[test]
fn xid_without_number_and_old_form() {
    none(EXTRA_SAMPLES[0]);
    none("NVRM: Xid (PCI:0000:3b:00): ");
    none("NVRM: Xid (PCI:0000:3b:00");
    none("NVRM: Xid error: xyz, invalid data");
    let s = p(EXTRA_SAMPLES[6]);
    assert_eq!(s.code, Some(14));
    assert_eq!(s.pci_bus_id.as_deref(), Some("0000:03:00.0"));
    let s = p("NVRM: Xid (PCI:...): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)");
    assert_eq!((s.code, s.pci_bus_id), (Some(145), None));
}

#[test]
fn fallen_off_bus_without_xid() {
    let s = p(SIGNAL_SAMPLES[11]);
    assert_eq!((s.kind, s.code), ("xid", Some(79)));
    assert_eq!(a(&s, "inferred"), &json!(true));
    assert_eq!(s.pci_bus_id.as_deref(), Some("0000:b3:00.0"));
    assert_eq!(a(&s, "pci_device_id"), &json!("10de:20b0"));
    let s = p(EXTRA_SAMPLES[8]);
    assert_eq!((s.code, s.pci_bus_id.as_deref()), (Some(79), Some("0000:91:00.0")));
    // split multi-line printk: only the "fallen off the bus" line is a signal
    none("NVRM: The NVIDIA GPU 0000:b3:00.0");
    none("NVRM: (PCI ID: 10de:20b0) installed in this system has");
    assert_eq!(
        p("NVRM: fallen off the bus and is not responding to commands.").code,
        Some(79)
    );
}

// ---------------------------------------------------------------- SXid

#[test]
fn sxid_forms() {
    let s = p(SIGNAL_SAMPLES[12]);
    assert_eq!((s.kind, s.code), ("sxid", Some(12028)));
    assert_eq!(s.pci_bus_id.as_deref(), Some("0000:05:00.0"));
    assert_eq!(a(&s, "fatal"), &json!(false));
    assert_eq!(a(&s, "link"), &json!(37));
    assert_eq!(a(&s, "nvswitch"), &json!(0));
    assert_eq!(a(&s, "first"), &json!(true));
    let s = p(EXTRA_SAMPLES[1]);
    assert_eq!((s.code, a(&s, "fatal")), (Some(24007), &json!(true)));
    assert_eq!(s.kind, "sxid", "ECC DBE inside an SXid line stays sxid");
    let s = p(EXTRA_SAMPLES[2]);
    assert_eq!((s.kind, s.code), ("sxid", Some(12028)));
    assert_eq!(a(&s, "continuation"), &json!(true));
    assert!(s.attr("fatal").is_none());
    none("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): , Non-fatal");
}

#[test]
fn fabric_manager() {
    let s = p(SIGNAL_SAMPLES[13]);
    assert_eq!((s.kind, s.code), ("sxid", Some(20034)));
    assert_eq!(a(&s, "fatal"), &json!(true));
    assert_eq!(s.pci_bus_id.as_deref(), Some("0000:86:00.0"));
    assert_eq!(a(&s, "nvswitch_physical_id"), &json!(3));
    assert_eq!(a(&s, "port"), &json!(11));
    assert_eq!(a(&s, "fid"), &json!(0));
    assert_eq!(s.occurred_at.unwrap().to_rfc3339(), "2023-07-26T06:14:05+00:00");
    let s = p(
        "[ERROR] [tid 1234] detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 11",
    );
    assert_eq!((s.code, a(&s, "fatal")), (Some(12028), &json!(false)));
}

// ---------------------------------------------------------------- PyTorch / NCCL

#[test]
fn nccl_watchdog_new() {
    let s = p(SIGNAL_SAMPLES[14]);
    assert_eq!(s.kind, "nccl_timeout");
    assert_eq!(s.rank, Some(4));
    assert_eq!(s.gpu_index, None, "[rank4] is not a GPU index");
    assert_eq!(a(&s, "op_type"), &json!("ALLREDUCE"));
    assert_eq!(a(&s, "timeout_ms"), &json!(600000));
    assert_eq!(a(&s, "ran_for_ms"), &json!(600023));
    assert_eq!(a(&s, "seq_num"), &json!(1234));
    assert_eq!(a(&s, "numel_in"), &json!(1));
    assert_eq!(a(&s, "source_location"), &json!("ProcessGroupNCCL.cpp:616"));
    assert_eq!(
        s.occurred_at.unwrap().to_rfc3339(),
        "2021-12-06T12:34:56.789012345+00:00"
    );
    assert!(s.message.starts_with("[Rank 4] Watchdog caught"));
}

#[test]
fn nccl_watchdog_old_and_pg_form() {
    let s = p(SIGNAL_SAMPLES[15]);
    assert_eq!((s.kind, s.rank), ("nccl_timeout", Some(0)));
    assert_eq!(a(&s, "op_type"), &json!("BROADCAST"));
    assert_eq!(a(&s, "timeout_ms"), &json!(1800000));
    assert_eq!(a(&s, "ran_for_ms"), &json!(1800498));
    assert_eq!(a(&s, "seq_num"), &json!(4));
    assert_eq!(s.occurred_at, None);
    let s = p(
        "[rank7]:[E1206 12:34:56.789012345 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, OpType=_ALLGATHER_BASE, NumelIn=4096, NumelOut=32768, Timeout(ms)=600000) ran for 600090 milliseconds before timing out.",
    );
    assert_eq!(s.rank, Some(7));
    assert_eq!(a(&s, "op_type"), &json!("_ALLGATHER_BASE"));
    assert_eq!(a(&s, "pg_id"), &json!(0));
    assert_eq!(a(&s, "pg_guid"), &json!("0(default_pg)"));
    let s = p(EXTRA_SAMPLES[17]);
    assert_eq!((s.kind, s.rank), ("nccl_timeout", Some(2)));
    assert_eq!(a(&s, "seq_num"), &json!(5011));
    assert_eq!(a(&s, "last_completed_seq"), &json!(5010));
    let s = p(EXTRA_SAMPLES[18]);
    assert_eq!((s.kind, s.rank), ("nccl_timeout", Some(5)));
}

#[test]
fn nccl_warn_ib() {
    let s = p(SIGNAL_SAMPLES[16]);
    assert_eq!(s.kind, "nccl_error");
    assert_eq!(s.gpu_index, Some(4));
    assert_eq!(s.host.as_deref(), Some("kp-ddp-worker-0"));
    assert_eq!(a(&s, "nccl_status"), &json!(12));
    assert_eq!(a(&s, "ib_status"), &json!("IBV_WC_RETRY_EXC_ERR"));
    assert_eq!(a(&s, "vendor_err"), &json!(129));
    assert_eq!(a(&s, "peer"), &json!("10.216.210.236<54862>"));
    assert_eq!(a(&s, "direction"), &json!("recv"));
    assert_eq!(a(&s, "transport"), &json!("NET/IB"));
    assert_eq!(a(&s, "remote_gid"), &json!("fd00:1148:9000:5000:4:200:3:ff1f"));
    assert_eq!(a(&s, "pid"), &json!(3468));
    let s = p(EXTRA_SAMPLES[9]);
    assert_eq!(
        (s.gpu_index, a(&s, "nccl_status"), a(&s, "vendor_err")),
        (Some(3), &json!(12), &json!(129))
    );
    assert_eq!(a(&s, "opcode"), &json!(0));
    assert_eq!(a(&s, "peer"), &json!("10.0.0.2<45678>"));
}

#[test]
fn nccl_warn_socket_and_info_noise() {
    let s = p(SIGNAL_SAMPLES[17]);
    assert_eq!((s.kind, s.gpu_index), ("nccl_error", Some(1)));
    assert_eq!(a(&s, "socket_error"), &json!("Connection reset by peer"));
    let s = p(EXTRA_SAMPLES[10]);
    assert_eq!(a(&s, "category"), &json!("connection_closed"));
    assert_eq!(a(&s, "peer"), &json!("node2.cluster<34567>"));
    let s = p(EXTRA_SAMPLES[11]);
    assert_eq!(a(&s, "socket_error"), &json!("Connection refused"));
    let s = p("node1:1234:5678 [2] NCCL WARN socketProgress: Broken pipe");
    assert_eq!(a(&s, "socket_error"), &json!("Broken pipe"));
    let s = p(EXTRA_SAMPLES[12]);
    assert_eq!(a(&s, "cuda_error"), &json!("an illegal memory access was encountered"));
    // INFO is noise
    none(EXTRA_SAMPLES[13]);
    none(
        "node1:1234:5678 [3] NCCL INFO NET/IB : Got completion from peer 10.0.0.2<45678> with status=12 opcode=0 len=0 vendor err 129",
    );
}

#[test]
fn nccl_python_errors() {
    let s = p(SIGNAL_SAMPLES[18]);
    assert_eq!(s.kind, "nccl_error");
    assert_eq!(a(&s, "nccl_result"), &json!("ncclRemoteError"));
    assert_eq!(a(&s, "nccl_version"), &json!("2.18.1"));
    assert_eq!(a(&s, "exception"), &json!("torch.distributed.DistBackendError"));
    assert_eq!(
        a(&s, "reason"),
        &json!("remote process exited or there was a network error")
    );
    let s = p(EXTRA_SAMPLES[14]);
    assert_eq!(a(&s, "nccl_result"), &json!("ncclSystemError"));
    let s = p(EXTRA_SAMPLES[15]);
    assert_eq!(a(&s, "nccl_result"), &json!("ncclUnhandledCudaError"));
    assert_eq!(a(&s, "exception"), &json!("RuntimeError"));
    assert_eq!(a(&s, "nccl_version"), &json!("2.14.3"));
    for r in ["ncclInternalError", "ncclInvalidUsage"] {
        let s = p(&format!("{r}: some NCCL failure text"));
        assert_eq!(a(&s, "nccl_result"), &json!(r));
    }
    let s = p("[Rank 3] NCCL communicator was aborted on rank 3.");
    assert_eq!((s.rank, a(&s, "aborted")), (Some(3), &json!(true)));
}

// ---------------------------------------------------------------- CUDA

#[test]
fn cuda_errors_and_oom() {
    let s = p(SIGNAL_SAMPLES[19]);
    assert_eq!(s.kind, "cuda_error");
    assert_eq!(a(&s, "cuda_error"), &json!("an illegal memory access was encountered"));
    assert_eq!(a(&s, "exception"), &json!("RuntimeError"));
    let s = p(SIGNAL_SAMPLES[20]);
    assert_eq!((s.kind, s.gpu_index), ("gpu_oom", Some(3)));
    assert_eq!(a(&s, "exception"), &json!("torch.OutOfMemoryError"));
    assert_eq!(a(&s, "tried_to_allocate_bytes"), &json!(2_147_483_648i64));
    assert!(a(&s, "total_capacity_bytes").as_i64().unwrap() > 84_000_000_000);
    assert!(a(&s, "free_bytes").as_i64().unwrap() > 1_000_000_000);
    let s = p(EXTRA_SAMPLES[16]);
    assert_eq!((s.kind, s.gpu_index), ("gpu_oom", Some(0)));
    assert_eq!(a(&s, "exception"), &json!("torch.cuda.OutOfMemoryError"));
    assert_eq!(a(&s, "tried_to_allocate_bytes"), &json!(20 * 1024 * 1024));
    let s = p(SIGNAL_SAMPLES[21]);
    assert_eq!((s.kind, s.code), ("ecc", Some(2)));
    assert_eq!(a(&s, "source"), &json!("cuda"));
    let s = p(EXTRA_SAMPLES[23]);
    assert_eq!((s.kind, a(&s, "fatal")), ("nvlink", &json!(true)));
    let s = p("RuntimeError: CUDA error: out of memory");
    assert_eq!(s.kind, "gpu_oom");
    // hints are not errors
    none(
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    );
    none("For debugging consider passing CUDA_LAUNCH_BLOCKING=1.");
}

// ---------------------------------------------------------------- ECC / remap / GSP / InfoROM / NVLink

#[test]
fn hardware_health() {
    let s = p(SIGNAL_SAMPLES[22]);
    assert_eq!((s.kind, s.gpu_index), ("row_remap", Some(0)));
    assert_eq!(a(&s, "status"), &json!("failure"));
    assert_eq!(s.occurred_at.unwrap().to_rfc3339(), "2024-05-24T10:22:29.245+00:00");
    let s = p(EXTRA_SAMPLES[19]);
    assert_eq!(
        (s.kind, s.gpu_index, a(&s, "status")),
        ("row_remap", Some(1), &json!("pending"))
    );
    assert_eq!(s.host.as_deref(), Some("gpu-node-3"));
    let s = p("        Remapping Failure Occurred        : Yes");
    assert_eq!(a(&s, "status"), &json!("failure"));
    none("        Remapping Failure Occurred        : No");
    let s = p("Dec  6 12:00:01 gpu-node-3 nvidia-dcgm[812]: GPU 5: Row remapping failure");
    assert_eq!(
        (s.kind, s.gpu_index, a(&s, "status")),
        ("row_remap", Some(5), &json!("failure"))
    );
    let s = p("GPU 00000000:3B:00.0: row remapping pending, reset the GPU to activate");
    assert_eq!(
        (s.pci_bus_id.as_deref(), a(&s, "status")),
        (Some("0000:3b:00.0"), &json!("pending"))
    );

    let s = p(SIGNAL_SAMPLES[23]);
    assert_eq!((s.kind, a(&s, "stage")), ("gsp_error", &json!("init")));
    assert_eq!(a(&s, "rm_gpu_instance"), &json!(6));
    let s = p(EXTRA_SAMPLES[20]);
    assert_eq!(a(&s, "stage"), &json!("heartbeat"));
    let s = p(EXTRA_SAMPLES[21]);
    assert_eq!(
        (s.kind, a(&s, "rm_status")),
        ("gpu_init_failure", &json!("0x62:0x40:2168"))
    );
    assert_eq!(s.pci_bus_id.as_deref(), Some("0000:a1:00.0"));
    let s = p(
        "NVRM: GPU at PCI:0000:3b:00: GPU-ff3dfd6d-7042-cc8c-f3a6-84d9d6eb3a4b RmInitAdapter failed! (0x25:0xffff:1457)",
    );
    assert_eq!(
        (s.kind, s.pci_bus_id.as_deref()),
        ("gpu_init_failure", Some("0000:3b:00.0"))
    );
    let s = p("NVRM: GPU0 GSP firmware error detected, GPU reset required");
    assert_eq!(a(&s, "reset_required"), &json!(true));

    let s = p(SIGNAL_SAMPLES[24]);
    assert_eq!((s.kind, s.pci_bus_id.as_deref()), ("inforom", Some("0000:b3:00.0")));
    let s = p("NVRM: GPU 0000:3b:00.0: inforom: object ECC checksum invalid, InfoROM is corrupted");
    assert_eq!(s.kind, "inforom");
    let s = p("A corrupt InfoROM has been detected in GPU 2.");
    assert_eq!((s.kind, s.gpu_index), ("inforom", Some(2)));

    let s = p(EXTRA_SAMPLES[24]);
    assert_eq!((s.kind, s.code, s.gpu_index), ("ecc", Some(2), Some(4)));
    let s = p("NVRM: GPU 0000:3b:00.0: uncorrectable ECC error detected in SRAM");
    assert_eq!(
        (s.kind, s.code, s.pci_bus_id.as_deref()),
        ("ecc", Some(2), Some("0000:3b:00.0"))
    );
    let s = p("Detected 150 volatile single-bit ECC errors for GPU 1 which is above the threshold 100");
    assert_eq!((s.kind, s.code), ("ecc", Some(1)));
    none("    ECC Mode: Enabled");
    // The host's memory ECC is no GPU signal: AMD's machine-check decoder, as quoted in
    // s905060/site-reliability-engineer-handbook (how_to_identify_defective_dimm_from_edac_error_on_.md).
    none("kernel: [Hardware Error]: MC4 Error (node 1): DRAM ECC error detected on the NB.");

    let s = p(EXTRA_SAMPLES[22]);
    assert_eq!((s.kind, s.gpu_index), ("nvlink", Some(2)));
    let s = p("GPU 3's NvLink link 5 is currently down");
    assert_eq!(
        (s.kind, a(&s, "nvlink_link"), a(&s, "link_down")),
        ("nvlink", &json!(5), &json!(true))
    );
    none("nvidia-nvlink: Nvlink Core is being initialized, major device number 240");
}

#[test]
fn noise_is_none() {
    for l in [
        "",
        "   ",
        "Dec  6 12:34:56 gpu-node-17 sshd[1234]: Accepted publickey for ubuntu from 10.0.0.1 port 5555 ssh2",
        "[ 1234.567890] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023",
        "[ 1234.567890] NVRM: GPU at PCI:0000:91:00: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b",
        "NVRM: GPU Board Serial Number: 1653723052734",
        "2021-12-06 12:34:56,789 - INFO - NCCL_DEBUG=INFO CUDA_VISIBLE_DEVICES=0,1,2,3",
        "node1:1234:1234 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
        "Using CUDA device 0: NVIDIA H100 80GB HBM3",
        "GSP firmware version 535.104.05 loaded",
    ] {
        none(l);
    }
}

#[test]
fn other_prefixes() {
    // journald without host column
    let s = p(
        "Mar 29 15:38:59 kernel: NVRM: Xid (PCI:0000:01:00): 120, GSP kernel exception: store access page fault (cause:0xf) @ pc:0xffffffff93003d42, partition:4#0",
    );
    assert_eq!((s.code, s.host), (Some(120), None));
    assert!(s.message.starts_with("NVRM: Xid"));
    // Talos-style bracketed ISO with decoration
    let s = p(
        "kern: warning: [2026-04-22T21:26:20.599716692Z]: NVRM: Xid (PCI:0000:48:00): 74, pid=22884, name=VLLM::Worker_TP, NVLink: fatal error detected on link 8(0x0, 0x0)",
    );
    assert_eq!(s.code, Some(74));
    assert_eq!(
        s.occurred_at.unwrap().to_rfc3339(),
        "2026-04-22T21:26:20.599716692+00:00"
    );
    // CRI container log
    let s = p("2021-12-06T12:34:56.123456789Z stderr F RuntimeError: CUDA error: device-side assert triggered");
    assert_eq!(s.kind, "cuda_error");
    assert_eq!(s.message, "RuntimeError: CUDA error: device-side assert triggered");
    // torchrun local-rank tag
    let s = p(
        "[default3]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB (GPU 3; 79.15 GiB total capacity)",
    );
    assert_eq!(a(&s, "local_rank"), &json!(3));
    // syslog with fractional seconds (journalctl -o short-precise)
    let s = p(
        "Dec 06 12:34:56.123456 gpu-node-17 kernel: NVRM: Xid (PCI:0000:3b:00): 31, pid=9, name=x, Ch 0000000a, intr 10000000. MMU Fault",
    );
    assert_eq!(s.occurred_at.unwrap().to_rfc3339(), "2021-12-06T12:34:56.123456+00:00");
    // Invalid dates do not panic and leave occurred_at empty
    let s = p("Feb 30 12:34:56 gpu-node-17 kernel: NVRM: Xid (PCI:0000:3b:00): 31, x");
    assert_eq!(s.occurred_at, None);
}

#[test]
fn every_sample_passes_prefilter() {
    for l in SIGNAL_SAMPLES.iter().chain(EXTRA_SAMPLES) {
        assert!(prefilter(l.as_bytes()), "{l}");
    }
    assert!(!prefilter(
        b"Dec  6 12:34:56 gpu-node-17 systemd[1]: Started Session 5 of User ubuntu."
    ));
}

#[test]
fn nccl_warn_cuda_out_of_memory_is_a_gpu_oom() {
    // A real log: the job ran out of GPU memory inside NCCL.
    let s = p("node1:1234:5678 [0] NCCL WARN Cuda failure 'out of memory'");
    assert_eq!(s.kind, "gpu_oom");
    assert_eq!(a(&s, "cuda_error"), &json!("out of memory"));
    assert_eq!(s.gpu_index, Some(0));
    // Other CUDA failures stay NCCL errors (the catalog reads their text).
    let s = p("node1:1234:5678 [2] NCCL WARN Cuda failure 'an illegal memory access was encountered'");
    assert_eq!(s.kind, "nccl_error");
}

#[test]
fn a_gpu_the_driver_cannot_initialise_probe_or_use_without_a_reset_is_a_signal_of_its_own() {
    // dmesg of a node whose GPU failed to initialise (illinois-scicomp/machine-shop-maintenance#76).
    let s = p("[Sun Apr 14 12:48:42 2024] NVRM: GPU 0000:81:00.0: RmInitAdapter failed! (0x25:0x40:1470)");
    assert_eq!((s.kind, s.code), ("gpu_init_failure", None));
    assert_eq!(s.pci_bus_id.as_deref(), Some("0000:81:00.0"));
    assert_eq!(a(&s, "rm_status"), &json!("0x25:0x40:1470"));
    let s = p("[Sun Apr 14 12:48:42 2024] NVRM: GPU 0000:81:00.0: rm_init_adapter failed, device minor number 0");
    assert_eq!(
        (s.kind, s.pci_bus_id.as_deref()),
        ("gpu_init_failure", Some("0000:81:00.0"))
    );
    // The driver could not take a GPU at all (NVIDIA driver 367 on an unsupported board).
    let s = p("[28525.409483] nvidia: probe of 0000:01:00.0 failed with error -1");
    assert_eq!(
        (s.kind, s.pci_bus_id.as_deref()),
        ("gpu_probe_failure", Some("0000:01:00.0"))
    );
    let s = p("[28525.409543] NVRM: The NVIDIA probe routine failed for 1 device(s).");
    assert_eq!((s.kind, s.pci_bus_id.as_deref()), ("gpu_probe_failure", None));
    let s = p("[ 7768.914300] NVRM: None of the NVIDIA devices were initialized.");
    assert_eq!(s.kind, "gpu_probe_failure");
    let s = p("nvidia 0000:3b:00.0: probe with driver nvidia failed with error -1");
    assert_eq!(
        (s.kind, s.pci_bus_id.as_deref()),
        ("gpu_probe_failure", Some("0000:3b:00.0"))
    );
    // A driver call answered "Reset required" (the assertion the driver logs for status 0x62).
    let s = p(
        "[Mon Jan  1 12:00:01 2024] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2874",
    );
    assert_eq!((s.kind, s.code), ("gpu_reset_required", None));
    // Not these: the GSP firmware line stays a GSP error; other nvidia modules' lines are noise.
    assert_eq!(
        p("[  115.083750] NVRM: GPU6 RmInitAdapter: Cannot initialize GSP firmware RM").kind,
        "gsp_error"
    );
    none("[ 7768.998669] nvidia-nvlink: Nvlink Core is being initialized, major device number 239");
    none("[    3.120000] nvidia: loading out-of-tree module taints kernel.");
}
