//! The corpus test: real phrases from public sources, each with the category and component a
//! reliability engineer gives it (`corpus/phrases.tsv`: message, kind, category, component,
//! source). Prints the agreement of the rules alone (without the lexicon) and of the full catalog.

use super::seed::{builtin_catalog, rules_only_catalog};
use crate::domain::taxonomy::{Category, Component};

const CORPUS: &str = include_str!("corpus/phrases.tsv");
const REQUIRED: f64 = 0.95;

struct Case {
    message: String,
    kind: String,
    want: (Category, Component),
    source: String,
}

fn cases() -> Vec<Case> {
    CORPUS
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 5, "corpus line {}: {l:?}", i + 1);
            let category = Category::parse(f[2]).unwrap_or_else(|| panic!("line {}: category {}", i + 1, f[2]));
            let component = Component::parse(f[3]).unwrap_or_else(|| panic!("line {}: component {}", i + 1, f[3]));
            assert_eq!(component.category(), category, "line {}", i + 1);
            Case {
                message: f[0].to_string(),
                kind: f[1].to_string(),
                want: (category, component),
                source: f[4].to_string(),
            }
        })
        .collect()
}

#[test]
fn corpus_agreement() {
    let cases = cases();
    assert!(cases.len() >= 400, "{} phrases", cases.len());
    assert!(cases.iter().all(|c| !c.source.trim().is_empty()));
    let mut distinct = std::collections::HashSet::new();
    for c in &cases {
        assert!(
            distinct.insert(c.message.to_lowercase()),
            "duplicate phrase {:?}",
            c.message
        );
    }
    let (old, new) = (rules_only_catalog(), builtin_catalog());
    let mut agree_old = 0;
    let mut agree_new = 0;
    let mut misses = Vec::new();
    for c in &cases {
        let o = old.classify(&c.kind, None, Some(&c.message), None).root_cause;
        if (o.category, o.component) == c.want {
            agree_old += 1;
        }
        let n = new.classify(&c.kind, None, Some(&c.message), None);
        if (n.root_cause.category, n.root_cause.component) == c.want {
            agree_new += 1;
        } else {
            misses.push(format!(
                "  {:?} [{}]: got {}/{}, want {}/{} -- {}",
                c.message,
                c.kind,
                n.root_cause.category.as_str(),
                n.root_cause.component.as_str(),
                c.want.0.as_str(),
                c.want.1.as_str(),
                n.explanation
            ));
        }
    }
    let total = cases.len() as f64;
    let (before, after) = (agree_old as f64 / total, agree_new as f64 / total);
    println!(
        "corpus: {} phrases; agreement rules only (before) {agree_old} = {:.1}%, rules + lexicon (after) {agree_new} = {:.1}%",
        cases.len(),
        before * 100.0,
        after * 100.0
    );
    println!("disagreements:\n{}", misses.join("\n"));
    assert!(
        after >= REQUIRED,
        "agreement {:.1}% < {:.0}%",
        after * 100.0,
        REQUIRED * 100.0
    );
}

/// Every corpus phrase labelled with one of the host's parts (machine checks, EDAC, IPMI SEL,
/// AER, block layer; each row names its source) is filed under exactly that part.
#[test]
fn host_part_phrases_are_filed_under_their_part() {
    let catalog = builtin_catalog();
    let mut wrong = Vec::new();
    let all = cases();
    let host_parts: Vec<&Case> = all
        .iter()
        .filter(|c| Component::HOST_PARTS.contains(&c.want.1))
        .collect();
    assert!(host_parts.len() >= 90, "{} host-part phrases", host_parts.len());
    for c in &host_parts {
        let got = catalog.classify(&c.kind, None, Some(&c.message), None);
        if got.root_cause.component != c.want.1 {
            wrong.push(format!(
                "  {:?}: got {}, want {} -- {}",
                c.message,
                got.root_cause.component.as_str(),
                c.want.1.as_str(),
                got.explanation
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "host-part phrases filed elsewhere:\n{}",
        wrong.join("\n")
    );
}

/// GPU lines keep their GPU components beside the host's vocabulary: PCIe words, "memory" and
/// "ECC" near a GPU name the GPU's parts, not the host's.
#[test]
fn gpu_lines_keep_their_gpu_components() {
    let catalog = builtin_catalog();
    let cases: &[(&str, Option<i64>, &str, Component)] = &[
        // NVIDIA Xid catalog (https://docs.nvidia.com/deploy/xid-errors/): Xid 79, 48, 74.
        (
            "xid",
            Some(79),
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
            Component::Gpu,
        ),
        (
            "xid",
            Some(48),
            "NVRM: Xid (PCI:0000:3b:00): 48, pid=1234, name=python, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.",
            Component::GpuMemory,
        ),
        (
            "xid",
            Some(74),
            "NVRM: Xid (PCI:0000:3b:00): 74, pid=1234, NVLink: fatal error detected on link 4",
            Component::Nvlink,
        ),
        // The same Xid 79 line sent without its code: the code is read from the text.
        (
            "syslog",
            None,
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
            Component::Gpu,
        ),
        // nvidia-smi -q / DCGM health: the GPU's memory ECC.
        (
            "health_check",
            None,
            "GPU 3: Volatile Uncorrectable ECC errors: 2 (DBE)",
            Component::GpuMemory,
        ),
        ("health_check", None, "faulty memory on GPU 2", Component::GpuMemory),
        (
            "health_check",
            None,
            "GPU 0 HBM3 uncorrectable ECC error, row remapping pending",
            Component::GpuMemory,
        ),
        // DCGM NVLink health watch.
        (
            "health_check",
            None,
            "Detected 12 CRC NvLink errors on GPU 3's NVLink",
            Component::Nvlink,
        ),
    ];
    for (kind, code, message, want) in cases {
        let got = catalog.classify(kind, *code, Some(message), None);
        assert_eq!(got.root_cause.component, *want, "{message:?}: {}", got.explanation);
    }
}
