//! The text classifier and its place in `Catalog::classify`, on the built-in catalog.

use super::seed::{builtin_catalog, rules_only_catalog};
use super::text::{Lexicon, classify_text, normalise};
use crate::domain::taxonomy::{Category, Component};

fn rc(kind: &str, code: Option<i64>, msg: &str) -> (Category, Component, String) {
    let c = builtin_catalog().classify(kind, code, Some(msg), None);
    (c.root_cause.category, c.root_cause.component, c.explanation)
}

fn assert_rc(kind: &str, msg: &str, want: (Category, Component)) {
    let got = rc(kind, None, msg);
    assert_eq!((got.0, got.1), want, "{msg:?} ({kind}): {}", got.2);
}

#[test]
fn normalise_folds_case_plurals_abbreviations_and_camel_case() {
    assert_eq!(normalise("PSUs FAILED").tokens, ["power", "supply", "failure"]);
    assert_eq!(normalise("PS2 Status").tokens, ["power", "supply", "status"]);
    assert_eq!(normalise("check_ps_service").tokens, ["check_ps", "service"]);
    assert_eq!(normalise("KubeletNotReady").tokens, ["kubelet", "notready"]);
    assert_eq!(normalise("DBE on gpu0").tokens, ["double", "bit", "ecc", "on", "gpu"]);
    assert_eq!(
        normalise("NVLink InfiniBand RoCE").tokens,
        ["nvlink", "infiniband", "roce"]
    );
    assert_eq!(normalise("Lustre read-only").tokens, ["lustre", "read", "only"]);
    assert_eq!(normalise("temprature errors").tokens, ["temperature", "error"]);
    assert_eq!(normalise("OOMKilled").tokens, ["out", "of", "memory", "kill"]);
    // Clauses: a comma separates "no errors" from what follows.
    let n = normalise("fan ok, psu lost");
    assert_ne!(n.clause[0], n.clause[2]);
    // Bad input: nothing to read, never a panic.
    assert!(normalise("").tokens.is_empty());
    assert!(normalise("日本語のテキスト").tokens.is_empty());
    assert!(normalise("\u{0}\u{1}\u{7f}\u{fffd}").tokens.is_empty());
    let huge = "gpu ".repeat(100_000);
    assert!(normalise(&huge).tokens.len() <= super::text::MAX_SCORED_BYTES / 4 + 1);
}

#[test]
fn the_phrases_of_issue_11_land_in_the_right_place() {
    use Category::*;
    use Component as C;
    let cases = [
        ("PSU redundancy lost", (Hardware, C::Power)),
        ("GPU memory temperature critical", (Hardware, C::Cooling)),
        ("IB port 1 link down", (Hardware, C::Network)),
        ("nvidia-smi hangs", (Hardware, C::Gpu)),
        ("faulty HBM", (Hardware, C::GpuMemory)),
        ("DIMM uncorrectable error", (Hardware, C::HostMemory)),
        ("kubelet not ready", (Platform, C::Scheduler)),
        ("Lustre mount read-only", (Platform, C::Storage)),
        ("BIOS version mismatch", (Platform, C::Driver)),
        ("Xid 119 GSP timeout", (Platform, C::Driver)),
        ("user script error", (User, C::Code)),
    ];
    for (msg, want) in cases {
        assert_rc("health_check", msg, want);
        // Any kind, known or not.
        assert_rc("bmc_event", msg, want);
    }
}

#[test]
fn explanations_name_the_rule_or_the_terms() {
    let (_, _, e) = rc("xid", Some(79), "GPU has fallen off the bus");
    assert_eq!(e, "rule xid-79");
    let (_, _, e) = rc("health_check", None, "PSU redundancy lost");
    assert!(
        e.starts_with("terms: power supply(power) + redundancy lost(failure)"),
        "{e}"
    );
    let (_, _, e) = rc("syslog", None, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python");
    assert_eq!(e, "rule xid-79 (xid 79 named in the text)");
}

#[test]
fn xid_rules_still_win_over_the_text() {
    // Xid 13 is the application's, whatever words the driver's message carries.
    let c = builtin_catalog().classify(
        "xid",
        Some(13),
        Some("Graphics SM Warp Exception on GPU, ECC error"),
        None,
    );
    assert_eq!(c.rule_id.as_deref(), Some("xid-13"));
    assert_eq!(c.root_cause.component, Component::Code);
    // ECC type codes and kind-only rules of a known category decide too.
    let c = builtin_catalog().classify("ecc", Some(1), Some("uncorrectable DIMM error"), None);
    assert_eq!(c.rule_id.as_deref(), Some("ecc-correctable"));
    let c = builtin_catalog().classify("power", None, Some("fan failure"), None);
    assert_eq!(c.rule_id.as_deref(), Some("power-fallback"));
}

#[test]
fn negation_and_healthy_states_are_not_failures() {
    for msg in [
        "no errors",
        "GPU health check passed",
        "No ECC errors detected",
        "PSU redundancy regained",
        "Power Supply AC lost - Deasserted",
        "fan speed normal",
        "Link recovered",
        "all checks OK",
    ] {
        let (cat, _, e) = rc("health_check", None, msg);
        assert_eq!(cat, Category::Unknown, "{msg:?}: {e}");
    }
    // A healthy clause does not hide a failing one.
    assert_rc(
        "health_check",
        "fan OK, PSU 2 failure",
        (Category::Hardware, Component::Power),
    );
}

#[test]
fn symptoms_without_a_cause_stay_unknown() {
    for msg in [
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 1800000 milliseconds",
        "NCCL timeout",
        "job hang detected",
        "training slow",
    ] {
        let (cat, _, e) = rc("nccl_timeout", None, msg);
        assert_eq!(cat, Category::Unknown, "{msg:?}: {e}");
    }
    // With a cause in the text, the cause is named.
    assert_rc(
        "nccl_timeout",
        "NCCL watchdog timeout caused by IB link down on mlx5_0",
        (Category::Hardware, Component::Network),
    );
}

#[test]
fn weak_or_contradictory_evidence_is_unknown() {
    let lex = Lexicon::new(super::lexicon::builtin());
    for msg in [
        "error",
        "something failed",
        "GPU OOM or Lustre down, unclear",
        "hello world",
    ] {
        let v = classify_text(&lex, msg);
        assert!(!v.is_known(), "{msg:?}: {}", v.explanation);
    }
    assert!(
        classify_text(&lex, "GPU OOM or Lustre down, unclear")
            .explanation
            .contains("contradictory")
    );
}

#[test]
fn bad_input_is_unknown_without_error() {
    let cat = builtin_catalog();
    // A cause in the middle of a huge message is not scored (the first and last 2 KiB are).
    let huge = format!("{} PSU failure {}", "x".repeat(500_000), "y".repeat(500_000));
    for msg in [
        "",
        "   ",
        "\u{0}\u{1}\u{2}binary\u{ff}",
        "электропитание отказ",
        "電源故障",
        &huge,
    ] {
        let c = cat.classify("health_check", None, Some(msg), None);
        assert_eq!(
            c.root_cause.category,
            Category::Unknown,
            "{:?}",
            &msg[..msg.len().min(40)]
        );
    }
    // The first and last 2 KiB are scored (a traceback names its error at the end).
    let back = format!(
        "Traceback (most recent call last): {} torch.cuda.OutOfMemoryError: CUDA out of memory",
        "  File \"x.py\", line 1\n".repeat(10_000)
    );
    assert_eq!(
        cat.classify("job_exit", None, Some(&back), None).root_cause.component,
        Component::Oom
    );
    let front = format!("PSU failure {}", "x ".repeat(100_000));
    assert_eq!(
        cat.classify("health_check", None, Some(&front), None)
            .root_cause
            .component,
        Component::Power
    );
}

#[test]
fn nccl_cuda_out_of_memory_is_user_oom() {
    let line = "node1:1234:5678 [0] NCCL WARN Cuda failure 'out of memory'";
    for kind in ["nccl_error", "health_check", "job_exit"] {
        assert_rc(kind, line, (Category::User, Component::Oom));
    }
    // The old catalog did not know it.
    let old = rules_only_catalog().classify("nccl_error", None, Some(line), None);
    assert_eq!(old.root_cause.category, Category::Unknown);
}

#[test]
fn the_most_specific_component_wins() {
    assert_rc(
        "health_check",
        "GPU 3 HBM ECC error",
        (Category::Hardware, Component::GpuMemory),
    );
    assert_rc(
        "health_check",
        "GPU 3 NVLink 2 inactive",
        (Category::Hardware, Component::Nvlink),
    );
    assert_rc(
        "health_check",
        "GPU 3 power supply voltage low",
        (Category::Hardware, Component::Power),
    );
    assert_rc(
        "health_check",
        "nvidia-smi has failed because it couldn't communicate with the NVIDIA driver",
        (Category::Platform, Component::Driver),
    );
}

/// The simulator's signals carry structured kinds and codes and were labelled for the rules; the
/// text classifier must not change a single one of their root causes (the simulation test checks
/// the injected category counts end to end).
#[test]
fn the_simulated_fleet_is_classified_as_by_the_rules() {
    use crate::devtools::simulate::{SimConfig, simulate};
    let fleet = simulate(&SimConfig::default());
    let (old, new) = (rules_only_catalog(), builtin_catalog());
    let mut changed = Vec::new();
    for e in &fleet.events {
        let k = e["kind"].as_str().unwrap_or("");
        let (code, m) = (e["code"].as_i64(), e["message"].as_str());
        let (a, b) = (old.classify(k, code, m, None), new.classify(k, code, m, None));
        if a.root_cause != b.root_cause {
            changed.push(format!(
                "{k} {:?} -> {:?}: {:?} ({})",
                a.root_cause, b.root_cause, m, b.explanation
            ));
        }
    }
    assert!(changed.is_empty(), "{}", changed.join("\n"));
}
