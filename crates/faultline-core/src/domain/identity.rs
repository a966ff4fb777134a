//! What makes two signals of one source the same thing. One definition, used by the server when it
//! folds repeats into bursts and by the node agent when it compacts a kernel-log storm: repeats of
//! the same thing fold into one counted signal, different things never do.
//!
//! Two signals of one source (cluster, node, job) are the same thing when all of these agree:
//!
//! - the kind and the code;
//! - the GPU in every form it is named: index, PCI bus id (normalised), UUID and serial. A form
//!   one signal states and the other does not makes them different (a line naming bus `dc:00` and
//!   one naming `ed:00` are two GPUs even without an index);
//! - what was measured, where an attribute says it: the counter (`counter`: volatile and aggregate
//!   ECC, pages retired and pending), the NVLink link (`link`), the network port (`port`), the BMC
//!   sensor (`sensor`), the diagnostic test (`test`);
//! - for a signal without a code, what it says: its message in [`normalised_text`] form (a drain
//!   reason "check_gpu_ecc: ..." and one "check_fs_mount: ..." are two things). A signal with a
//!   code is identified by the code, so a storm whose lines differ only in a pid still folds.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Attributes that name what a signal measured; signals differing in one are different things.
pub const MEASURED_ATTRIBUTES: &[&str] = &["counter", "link", "port", "sensor", "test"];

/// At most this many characters of a normalised text take part in the identity: long messages
/// that agree this far are one thing (their tails are dumps, not reasons).
pub const MAX_IDENTITY_TEXT_CHARS: usize = 200;

/// The GPU a signal names, in every form it names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GpuNames {
    #[serde(default, alias = "gpu_index", skip_serializing_if = "Option::is_none")]
    pub index: Option<i32>,
    /// `0000:3b:00.0` form when it parses as a PCI bus id, else the text as sent (lowercase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    /// As sent, without surrounding space (NVIDIA prints `GPU-` UUIDs in lowercase hex; case is
    /// folded so a tool printing uppercase names the same GPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
}

impl GpuNames {
    /// From a signal's GPU fields and its attributes (`pci_bus_id`, `serial` or `gpu_serial`).
    pub fn of(index: Option<i32>, uuid: Option<&str>, attributes: Option<&Map<String, Value>>) -> GpuNames {
        let attr = |k: &str| {
            attributes
                .and_then(|a| a.get(k))
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        GpuNames {
            index,
            pci_bus_id: attr("pci_bus_id")
                .map(|b| crate::logparse::normalise_pci_bus_id(b).unwrap_or_else(|| b.to_ascii_lowercase())),
            uuid: uuid
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_ascii_lowercase),
            serial: attr("serial").or_else(|| attr("gpu_serial")).map(str::to_string),
        }
    }
}

/// The identity of a signal within its source: see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SignalIdentity {
    pub kind: String,
    #[serde(default)]
    pub code: Option<i64>,
    #[serde(default, flatten)]
    pub gpu: GpuNames,
    /// `name=value` of each [`MEASURED_ATTRIBUTES`] the signal carries, in that order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<String>,
    /// The normalised message of a signal without a code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl SignalIdentity {
    pub fn of(
        kind: &str,
        code: Option<i64>,
        gpu: GpuNames,
        message: Option<&str>,
        attributes: Option<&Map<String, Value>>,
    ) -> SignalIdentity {
        let measured = MEASURED_ATTRIBUTES
            .iter()
            .filter_map(|k| {
                let v = attributes?.get(*k)?;
                let v = match v {
                    Value::String(s) => s.trim().to_string(),
                    Value::Null => return None,
                    other => other.to_string(),
                };
                Some(format!("{k}={v}"))
            })
            .collect();
        let text = match code {
            Some(_) => None,
            None => message.map(normalised_text).filter(|t| !t.is_empty()),
        };
        SignalIdentity {
            kind: kind.trim().to_string(),
            code,
            gpu,
            measured,
            text,
        }
    }

    /// One line per part, in a fixed order: stable across versions for a signal whose GPU is named
    /// by index or bus alone and which has no measured attribute or text (so ids an agent derived
    /// from it before stay the same).
    pub fn key_text(&self) -> String {
        let mut s = format!(
            "{}\n{:?}\n{:?}\n{}",
            self.kind,
            self.code,
            self.gpu.index,
            self.gpu.pci_bus_id.as_deref().unwrap_or("")
        );
        if self.gpu.uuid.is_some() || self.gpu.serial.is_some() || !self.measured.is_empty() || self.text.is_some() {
            s.push_str(&format!(
                "\nuuid={}\nserial={}\n{}\ntext={}",
                self.gpu.uuid.as_deref().unwrap_or(""),
                self.gpu.serial.as_deref().unwrap_or(""),
                self.measured.join("\n"),
                self.text.as_deref().unwrap_or("")
            ));
        }
        s
    }
}

/// A message as its identity reads it: lowercase, runs of white space as one space, and the parts
/// that change between repeats of one thing replaced by `#`: hexadecimal literals (`0x7f3a...`,
/// addresses), numbers of four or more digits (pids, job ids, sequence numbers, byte counts) and
/// decimal fractions (durations, timestamps). Short numbers stay: they name things (GPU 3, port
/// 1, mlx5_2), so "ECC errors on GPU 3" and "on GPU 5" stay two things. Cut to
/// [`MAX_IDENTITY_TEXT_CHARS`].
pub fn normalised_text(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_IDENTITY_TEXT_CHARS + 8));
    let chars: Vec<char> = message.chars().collect();
    let mut i = 0;
    let mut space = false;
    let mut emitted = 0;
    while i < chars.len() && emitted < MAX_IDENTITY_TEXT_CHARS {
        let c = chars[i];
        if c.is_whitespace() {
            space = !out.is_empty();
            i += 1;
            continue;
        }
        if space {
            out.push(' ');
            emitted += 1;
            space = false;
        }
        let word_start = i == 0 || !chars[i - 1].is_ascii_alphanumeric();
        // 0x-prefixed hexadecimal.
        if word_start
            && c == '0'
            && matches!(chars.get(i + 1), Some('x' | 'X'))
            && chars.get(i + 2).is_some_and(char::is_ascii_hexdigit)
        {
            let mut j = i + 2;
            while j < chars.len() && chars[j].is_ascii_hexdigit() {
                j += 1;
            }
            out.push_str("0x#");
            emitted += 3;
            i = j;
            continue;
        }
        if c.is_ascii_digit() && word_start {
            let mut j = i;
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
            let digits = j - i;
            let fraction = chars.get(j) == Some(&'.') && chars.get(j + 1).is_some_and(char::is_ascii_digit);
            if fraction {
                j += 1;
                while j < chars.len() && chars[j].is_ascii_digit() {
                    j += 1;
                }
            }
            if digits >= 4 || fraction {
                out.push('#');
                emitted += 1;
            } else {
                out.extend(chars[i..j].iter());
                emitted += j - i;
            }
            i = j;
            continue;
        }
        out.extend(c.to_lowercase());
        emitted += 1;
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn id(
        kind: &str,
        code: Option<i64>,
        index: Option<i32>,
        uuid: Option<&str>,
        msg: Option<&str>,
        a: Value,
    ) -> SignalIdentity {
        let a = attrs(a);
        SignalIdentity::of(kind, code, GpuNames::of(index, uuid, Some(&a)), msg, Some(&a))
    }

    #[test]
    fn gpus_named_by_bus_alone_are_two_things() {
        let dc = id("xid", Some(45), None, None, None, json!({"pci_bus_id": "0000:dc:00.0"}));
        let ed = id("xid", Some(45), None, None, None, json!({"pci_bus_id": "0000:ed:00.0"}));
        assert_ne!(dc, ed);
        // The same bus as printed by another tool is the same GPU.
        let dc_again = id(
            "xid",
            Some(45),
            None,
            None,
            None,
            json!({"pci_bus_id": "00000000:DC:00.0"}),
        );
        assert_eq!(dc, dc_again);
        assert_eq!(dc.gpu.pci_bus_id.as_deref(), Some("0000:dc:00.0"));
    }

    #[test]
    fn gpus_named_by_uuid_alone_are_two_things_and_case_does_not_matter() {
        let a = id("xid", Some(79), None, Some("GPU-aaaa"), None, json!({}));
        let b = id("xid", Some(79), None, Some("GPU-bbbb"), None, json!({}));
        assert_ne!(a, b);
        assert_eq!(a, id("xid", Some(79), None, Some("gpu-AAAA "), None, json!({})));
    }

    #[test]
    fn a_board_swapped_into_the_same_slot_is_another_thing() {
        let old = id("xid", Some(48), Some(2), None, None, json!({"serial": "1650924060175"}));
        let new = id("xid", Some(48), Some(2), None, None, json!({"serial": "1650924060999"}));
        assert_ne!(old, new);
    }

    #[test]
    fn reasons_without_a_code_are_things_of_their_own() {
        let ecc = id(
            "health_check",
            None,
            None,
            None,
            Some("NHC: check_gpu_ecc: uncorrectable ECC errors on GPU 3"),
            json!({}),
        );
        let fs = id(
            "health_check",
            None,
            None,
            None,
            Some("NHC: check_fs_mount: /lustre not mounted"),
            json!({}),
        );
        assert_ne!(ecc, fs);
        // Another GPU named in the text is another thing.
        let ecc5 = id(
            "health_check",
            None,
            None,
            None,
            Some("NHC: check_gpu_ecc: uncorrectable ECC errors on GPU 5"),
            json!({}),
        );
        assert_ne!(ecc, ecc5);
        // The same reason with another pid and time is the same thing.
        let a = id(
            "node_unreachable",
            None,
            None,
            None,
            Some("slurmd[48211]: error: timeout after 30.5 s"),
            json!({}),
        );
        let b = id(
            "node_unreachable",
            None,
            None,
            None,
            Some("slurmd[51002]:  error: timeout after 31.25 s"),
            json!({}),
        );
        assert_eq!(a, b);
    }

    #[test]
    fn a_code_identifies_without_the_text() {
        let a = id(
            "xid",
            Some(13),
            Some(0),
            None,
            Some("NVRM: Xid (PCI:0000:3b:00): 13, pid=101, name=python"),
            json!({}),
        );
        let b = id(
            "xid",
            Some(13),
            Some(0),
            None,
            Some("NVRM: Xid (PCI:0000:3b:00): 13, pid=2, name=torchrun"),
            json!({}),
        );
        assert_eq!(a, b);
    }

    #[test]
    fn distinct_counters_are_distinct_things() {
        let volatile = id(
            "ecc",
            Some(2),
            Some(1),
            None,
            None,
            json!({"counter": "ecc.volatile.double_bit"}),
        );
        let aggregate = id(
            "ecc",
            Some(2),
            Some(1),
            None,
            None,
            json!({"counter": "ecc.aggregate.double_bit"}),
        );
        assert_ne!(volatile, aggregate);
        let retired = id(
            "row_remap",
            None,
            Some(1),
            None,
            Some("a"),
            json!({"counter": "retired_pages.double_bit"}),
        );
        let pending = id(
            "row_remap",
            None,
            Some(1),
            None,
            Some("a"),
            json!({"counter": "retired_pages.pending"}),
        );
        assert_ne!(retired, pending);
        let link0 = id("nvlink", Some(1), Some(1), None, None, json!({"link": 0}));
        let link5 = id("nvlink", Some(1), Some(1), None, None, json!({"link": 5}));
        assert_ne!(link0, link5);
    }

    #[test]
    fn normalised_text_keeps_names_and_drops_what_changes() {
        assert_eq!(
            normalised_text("  GPU 3: Xid at 0x7F3A00 after 1234567 ms\tpid 42  "),
            "gpu 3: xid at 0x# after # ms pid 42"
        );
        assert_eq!(
            normalised_text("[12345.678901] mlx5_2 port 1 down"),
            "[#] mlx5_2 port 1 down"
        );
        assert_eq!(normalised_text("took 2.5 s"), "took # s");
        assert_eq!(
            normalised_text(&"a".repeat(500)).chars().count(),
            MAX_IDENTITY_TEXT_CHARS
        );
        // A digit inside a word is part of the name.
        assert_eq!(normalised_text("node gpu1234 sda1"), "node gpu1234 sda1");
    }

    #[test]
    fn key_text_of_a_plain_kernel_signal_is_what_agents_derived_ids_from() {
        let k = id(
            "xid",
            Some(13),
            Some(0),
            None,
            None,
            json!({"pci_bus_id": "0000:3b:00.0"}),
        );
        assert_eq!(k.key_text(), "xid\nSome(13)\nSome(0)\n0000:3b:00.0");
        let with_serial = id("xid", Some(13), Some(0), None, None, json!({"serial": "x"}));
        assert!(with_serial.key_text().contains("serial=x"));
    }
}
