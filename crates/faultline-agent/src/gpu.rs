//! The GPUs: runs `nvidia-smi -q -x` every `--gpu-interval` (jittered), registers the node's GPU
//! set in the parts inventory when it changes, and turns counter changes into signals. The last
//! registered set and the last counters are kept in `gpus.json`, so a restart neither registers
//! again nor resends.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use faultline_core::domain::event::EventInput;
use faultline_core::domain::part::GpuReport;
use faultline_core::logparse::normalise_pci_bus_id;
use faultline_core::logparse::nvidia_smi::{GpuCounters, parse_counters, parse_gpus};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::signals::{NodeId, counter_signal_id, severity};
use crate::spool::{Severity, Spool};
use crate::state::{Paths, Shared};

/// What `gpus.json` holds.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct GpuState {
    /// The set the inventory has (None: never registered).
    pub registered: Option<Vec<GpuReport>>,
    /// The counters of the last poll, by GPU key (UUID, else serial, else index).
    pub counters: BTreeMap<String, GpuCounters>,
}

fn key(c: &GpuCounters) -> String {
    c.uuid
        .clone()
        .or_else(|| c.serial.clone())
        .unwrap_or_else(|| format!("index-{}", c.index))
}

/// The GPU set nvidia-smi last reported (`gpus-now.json`), whether or not the inventory has it
/// yet: the kernel lines of a boot are attributed with the boards installed in that boot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ObservedGpus {
    pub boot_id: String,
    /// Since when this set is known to be installed (RFC 3339): for the set the first poll of a
    /// boot reports, the boot's start (boards are swapped while a node is down) or, if later, the
    /// last poll that saw the set before it; otherwise the poll that first reported it.
    pub observed_at: String,
    /// The last poll that reported this set (RFC 3339).
    #[serde(default)]
    pub last_seen_at: Option<String>,
    pub gpus: Vec<GpuReport>,
}

impl ObservedGpus {
    pub fn load(paths: &Paths) -> Option<ObservedGpus> {
        Self::load_from(&paths.gpus_now())
    }

    fn load_from(path: &std::path::Path) -> Option<ObservedGpus> {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }
}

/// The node's GPUs by PCI bus id, as nvidia-smi reported them in this boot: a kernel line names
/// its GPU by bus (`NVRM: Xid (PCI:0000:3b:00): ...`); the index, UUID and serial of the board in
/// that slot now are added to it. Before the first report of a boot the set is empty and lines
/// go with their bus id alone (the server finds the board in that slot at the line's time).
#[derive(Debug, Default, Clone)]
pub struct GpusByBus(BTreeMap<String, GpuReport>);

impl GpusByBus {
    /// The set of `boot_id`: this boot's, or the one before (kept when this boot's replaced it).
    pub fn load(paths: &Paths, boot_id: &str) -> GpusByBus {
        let gpus = [paths.gpus_now(), paths.gpus_previous_boot()]
            .iter()
            .filter_map(|p| ObservedGpus::load_from(p))
            .find(|o| o.boot_id == boot_id)
            .map(|o| o.gpus)
            .unwrap_or_default();
        GpusByBus(
            gpus.into_iter()
                .filter_map(|g| Some((normalise_pci_bus_id(g.pci_bus_id.as_deref()?)?, g)))
                .collect(),
        )
    }

    /// Names the GPU of a signal that has only its bus id (attribute `pci_bus_id`).
    pub fn attribute(&self, event: &mut EventInput) {
        if event.gpu_index.is_some() || event.gpu_uuid.is_some() {
            return;
        }
        let Some(gpu) = event
            .attributes
            .as_ref()
            .and_then(|a| a.get("pci_bus_id"))
            .and_then(Value::as_str)
            .and_then(normalise_pci_bus_id)
            .and_then(|bus| self.0.get(&bus))
        else {
            return;
        };
        event.gpu_index = gpu.index.filter(|i| (0..=1023).contains(i));
        event.gpu_uuid = gpu.uuid.clone();
        event.gpu_model = gpu.model.clone();
        if let (Some(a), Some(serial)) = (event.attributes.as_mut(), &gpu.serial) {
            a.insert("serial".into(), Value::String(serial.clone()));
        }
    }
}

/// One counter change worth a signal.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterChange {
    pub counter: &'static str,
    pub kind: &'static str,
    /// For `ecc`: 1 corrected, 2 uncorrected.
    pub code: Option<i64>,
    pub previous: Value,
    pub value: Value,
    pub message: String,
}

/// The changes from `before` (None: first sight of this GPU, compared with zero/No) to `now`.
/// Counters only count up; one that went down (volatile counters reset with the driver) is a
/// new baseline, not a signal.
pub fn diff(before: Option<&GpuCounters>, now: &GpuCounters) -> Vec<CounterChange> {
    let mut out = Vec::new();
    let gpu = format!("GPU {}", now.index);
    let mut grew = |counter: &'static str,
                    kind: &'static str,
                    code: Option<i64>,
                    what: &str,
                    get: fn(&GpuCounters) -> Option<u64>| {
        let Some(v) = get(now) else { return };
        let prev = before.and_then(get).unwrap_or(0);
        if v > prev {
            out.push(CounterChange {
                counter,
                kind,
                code,
                previous: json!(prev),
                value: json!(v),
                message: format!("{gpu}: {what} rose from {prev} to {v}"),
            });
        }
    };
    grew(
        "ecc_volatile_uncorrected",
        "ecc",
        Some(2),
        "uncorrectable ECC errors (volatile)",
        |c| c.ecc_volatile_uncorrected,
    );
    grew(
        "ecc_aggregate_uncorrected",
        "ecc",
        Some(2),
        "uncorrectable ECC errors (aggregate)",
        |c| c.ecc_aggregate_uncorrected,
    );
    // Corrected errors: one signal for the growth of the lifetime count (else the volatile one).
    grew("ecc_corrected", "ecc", Some(1), "corrected ECC errors", |c| {
        c.ecc_aggregate_corrected.or(c.ecc_volatile_corrected)
    });
    grew(
        "retired_pages_single_bit",
        "row_remap",
        None,
        "pages retired for single-bit errors",
        |c| c.retired_pages_single_bit,
    );
    grew(
        "retired_pages_double_bit",
        "row_remap",
        None,
        "pages retired for double-bit errors",
        |c| c.retired_pages_double_bit,
    );
    grew(
        "remapped_rows_correctable",
        "row_remap",
        None,
        "rows remapped for correctable errors",
        |c| c.remapped_rows_correctable,
    );
    grew(
        "remapped_rows_uncorrectable",
        "row_remap",
        None,
        "rows remapped for uncorrectable errors",
        |c| c.remapped_rows_uncorrectable,
    );
    let mut became = |counter: &'static str, what: &str, get: fn(&GpuCounters) -> Option<bool>| {
        if get(now) == Some(true) && before.and_then(get) != Some(true) {
            out.push(CounterChange {
                counter,
                kind: "row_remap",
                code: None,
                previous: json!(before.and_then(get)),
                value: json!(true),
                message: format!("{gpu}: {what}"),
            });
        }
    };
    became(
        "retired_pages_pending",
        "a page retirement is pending (takes effect at the next driver reload)",
        |c| c.retired_pages_pending,
    );
    became(
        "remapped_rows_pending",
        "a row remap is pending (takes effect at the next GPU reset)",
        |c| c.remapped_rows_pending,
    );
    became(
        "remapped_rows_failure",
        "row remapping failed: the GPU needs service",
        |c| c.remapped_rows_failure,
    );
    if let Some(action) = now.recovery_action.as_deref()
        && !action.eq_ignore_ascii_case("none")
        && before.and_then(|b| b.recovery_action.as_deref()) != Some(action)
    {
        out.push(CounterChange {
            counter: "recovery_action",
            kind: "health_check",
            code: None,
            previous: json!(before.and_then(|b| b.recovery_action.clone())),
            value: json!(action),
            message: format!("{gpu}: the driver asks for recovery action '{action}'"),
        });
    }
    out
}

/// The event of one change. Its id: node, GPU, counter, the values, and the boot (a volatile
/// counter reaching the same value after a reboot is a new event).
pub fn change_event(node: &NodeId, boot_id: &str, gpu: &GpuCounters, ch: &CounterChange) -> (Severity, EventInput) {
    let value = format!("{}->{}@{boot_id}", ch.previous, ch.value);
    let id = counter_signal_id(node, &key(gpu), ch.counter, &value);
    let mut attributes = Map::new();
    attributes.insert("source".into(), Value::String("agent:nvidia-smi".into()));
    attributes.insert("counter".into(), Value::String(ch.counter.into()));
    attributes.insert("previous".into(), ch.previous.clone());
    attributes.insert("value".into(), ch.value.clone());
    if let (Some(p), Some(v)) = (ch.previous.as_u64(), ch.value.as_u64()) {
        attributes.insert("delta".into(), json!(v - p));
    }
    if let Some(b) = &gpu.pci_bus_id {
        attributes.insert("pci_bus_id".into(), Value::String(b.clone()));
    }
    if let Some(s) = &gpu.serial {
        attributes.insert("serial".into(), Value::String(s.clone()));
    }
    let sev = if ch.counter == "ecc_corrected" {
        Severity::Low
    } else {
        severity(ch.kind, ch.code)
    };
    (
        sev,
        EventInput {
            id,
            occurred_at: Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            cluster: node.cluster.clone(),
            node: Some(node.node.clone()),
            gpu_index: (0..=1023).contains(&gpu.index).then_some(gpu.index),
            gpu_uuid: gpu.uuid.clone(),
            gpu_model: gpu.model.clone(),
            job_id: None,
            job_gpus: None,
            kind: ch.kind.into(),
            code: ch.code,
            symptom: None,
            root_cause: None,
            message: Some(ch.message.clone()),
            attributes: Some(attributes),
            repeat_count: None,
            repeat_span_seconds: None,
        },
    )
}

pub struct GpuPoller {
    pub node: NodeId,
    pub boot_id: String,
    /// This boot's start (the time of a set first seen in this boot).
    pub boot_time: chrono::DateTime<Utc>,
    pub nvidia_smi: String,
    pub interval: Duration,
    pub server: String,
    pub token: String,
    pub client: reqwest::Client,
    pub paths: Paths,
    pub spool: Arc<Mutex<Spool>>,
    pub shared: Arc<Shared>,
    pub wake: Arc<tokio::sync::Notify>,
    pub max_backoff: Duration,
    /// nvidia-smi is failing (reported when it starts to).
    pub failing: Mutex<bool>,
}

/// What one poll left to do.
enum Outcome {
    Done,
    /// The inventory could not be updated: poll again sooner.
    InventoryPending,
    Failed,
}

impl GpuPoller {
    pub async fn run(&self) {
        let mut inventory_failures = 0u32;
        loop {
            let wait = match self.poll().await {
                Outcome::InventoryPending => {
                    inventory_failures += 1;
                    crate::sender::backoff(inventory_failures, self.max_backoff).min(self.interval)
                }
                Outcome::Done | Outcome::Failed => {
                    inventory_failures = 0;
                    crate::sender::jitter(self.interval.mul_f64(1.0 / 0.95)).max(self.interval.mul_f64(0.9))
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    pub async fn poll_once(&self) {
        self.poll().await;
    }

    /// Before the kernel log of a boot is read: the GPU set of this boot, unless a poll of this
    /// boot already saved it. A failure is reported; lines then go with their bus id alone.
    pub async fn observe_this_boot(&self) {
        if ObservedGpus::load(&self.paths).is_some_and(|o| o.boot_id == self.boot_id) {
            return;
        }
        if let Some((_, gpus)) = self.report().await {
            self.observe(&gpus);
        }
    }

    /// One run of nvidia-smi and its GPU set. A failure is reported when it starts failing, not
    /// at every poll.
    async fn report(&self) -> Option<(String, Vec<GpuReport>)> {
        let res = crate::command::output(&self.nvidia_smi, &["-q", "-x"], &[], Duration::from_secs(60)).await;
        match res.and_then(|x| parse_gpus(&x).map(|g| (x, g))) {
            Ok(x) => {
                *self.failing.lock().expect("poll state") = false;
                self.shared.add(&self.shared.counters.gpu_polls, 1);
                Some(x)
            }
            Err(e) => {
                let command = format!("{} -q -x", self.nvidia_smi);
                let c = &self.shared.counters.gpu_poll_failures;
                let mut failing = self.failing.lock().expect("poll state");
                self.shared.poll_failed(c, &mut failing, &command, &e, self.interval);
                None
            }
        }
    }

    /// Saves the set nvidia-smi reports when it is new to this boot (the kernel log reader takes it
    /// at once) and returns since when it is installed.
    fn observe(&self, gpus: &[GpuReport]) -> String {
        let now = Utc::now();
        let rfc3339 = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let previous = ObservedGpus::load(&self.paths);
        let previous_boot = previous.clone();
        let same = previous.as_ref().is_some_and(|p| {
            p.boot_id == self.boot_id && serde_json::to_value(&p.gpus).ok() == serde_json::to_value(gpus).ok()
        });
        let observed = match previous {
            Some(p) if same => ObservedGpus {
                last_seen_at: Some(rfc3339(now)),
                ..p
            },
            previous => {
                let at = match &previous {
                    Some(p) if p.boot_id == self.boot_id => now,
                    // First of this boot: changed while the node was down, after the last sighting
                    // of the set before.
                    _ => {
                        let last_seen = previous
                            .as_ref()
                            .and_then(|p| p.last_seen_at.as_deref())
                            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                            .map(|t| t.with_timezone(&Utc));
                        last_seen.map_or(self.boot_time, |l| l.max(self.boot_time)).min(now)
                    }
                };
                ObservedGpus {
                    boot_id: self.boot_id.clone(),
                    observed_at: rfc3339(at),
                    last_seen_at: Some(rfc3339(now)),
                    gpus: gpus.to_vec(),
                }
            }
        };
        // The previous boot's set is kept: its last lines, read after the reboot, name its boards.
        if let Some(p) = previous_boot.filter(|p| p.boot_id != self.boot_id) {
            let bytes = serde_json::to_vec(&p).expect("a GPU set serialises");
            if let Err(e) = crate::spool::write_atomic(&self.paths.gpus_previous_boot(), &bytes) {
                self.shared
                    .error(format!("saving {}: {e}", self.paths.gpus_previous_boot().display()));
            }
        }
        let bytes = serde_json::to_vec(&observed).expect("a GPU set serialises");
        match crate::spool::write_atomic(&self.paths.gpus_now(), &bytes) {
            Ok(()) if !same => self.shared.add(&self.shared.gpu_set_version, 1),
            Ok(()) => {}
            Err(e) => self
                .shared
                .error(format!("saving {}: {e}", self.paths.gpus_now().display())),
        }
        observed.observed_at
    }

    /// One poll: counters, this boot's set, the inventory.
    async fn poll(&self) -> Outcome {
        let Some((xml, gpus)) = self.report().await else {
            return Outcome::Failed;
        };
        let observed_at = self.observe(&gpus);
        let counters = parse_counters(&xml).unwrap_or_default();
        let mut state: GpuState = std::fs::read(self.paths.gpus())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();

        // Counter changes first: spooled (fsync'd) before the new baseline is saved.
        let signals = counters
            .iter()
            .flat_map(|c| {
                diff(state.counters.get(&key(c)), c)
                    .into_iter()
                    .map(|ch| change_event(&self.node, &self.boot_id, c, &ch))
            })
            .collect();
        if let Err(e) = crate::spool::append_signals(&self.spool, &self.shared, &self.wake, signals) {
            self.shared.error(format!("writing GPU signals to the spool: {e}"));
            return Outcome::Failed;
        }
        state.counters = counters.iter().map(|c| (key(c), c.clone())).collect();

        let mut outcome = Outcome::Done;
        let as_json = |g: &Vec<GpuReport>| serde_json::to_value(g).ok();
        if state.registered.as_ref().and_then(as_json) != as_json(&gpus) {
            match self.register(&gpus, &observed_at).await {
                Ok(()) => {
                    self.shared.add(&self.shared.counters.gpu_inventory_updates, 1);
                    state.registered = Some(gpus);
                }
                Err(e) => {
                    self.shared.error(format!("registering the GPU set: {e}; will retry"));
                    outcome = Outcome::InventoryPending;
                }
            }
        }
        let bytes = serde_json::to_vec(&state).expect("GPU state serialises");
        if let Err(e) = crate::spool::write_atomic(&self.paths.gpus(), &bytes) {
            self.shared
                .error(format!("saving {}: {e}", self.paths.gpus().display()));
        }
        outcome
    }

    /// Registers the set as installed since `observed_at` (a set registered late, after an outage,
    /// still starts when it was first seen).
    async fn register(&self, gpus: &[GpuReport], observed_at: &str) -> Result<(), String> {
        let url = format!(
            "{}/v1/nodes/{}/{}/gpus",
            self.server.trim_end_matches('/'),
            path_segment(&self.node.cluster),
            path_segment(&self.node.node)
        );
        let res = self
            .client
            .put(&url)
            .bearer_auth(&self.token)
            .json(&json!({"observed_at": observed_at, "gpus": gpus}))
            .send()
            .await
            .map_err(|e| crate::sender::error_chain(&e))?;
        let status = res.status();
        if status.is_success() {
            return Ok(());
        }
        let text = res.text().await.unwrap_or_default();
        Err(format!("{status}: {}", text.chars().take(300).collect::<String>()))
    }
}

/// Percent-encodes a path segment.
fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_xid_names_the_gpu_reported_at_its_bus_in_this_boot() {
        let dir = std::env::temp_dir().join(format!("fl-gpus-by-bus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let paths = Paths { root: dir.clone() };
        let h100 = GpuReport {
            index: Some(3),
            pci_bus_id: Some("00000000:3B:00.0".into()),
            uuid: Some("GPU-3".into()),
            serial: Some("1650924060175".into()),
            model: Some("NVIDIA H100 80GB HBM3".into()),
            board_part_number: None,
            vbios: None,
            driver: None,
        };
        let observed = ObservedGpus {
            boot_id: "b".into(),
            observed_at: "2026-11-30T00:00:00Z".into(),
            last_seen_at: None,
            gpus: vec![h100],
        };
        std::fs::write(paths.gpus_now(), serde_json::to_vec(&observed).unwrap()).unwrap();
        // Another boot's set names nothing in this one.
        assert!(GpusByBus::load(&paths, "another boot").0.is_empty());
        let by_bus = GpusByBus::load(&paths, "b");
        let node = NodeId {
            cluster: "c1".into(),
            node: "n1".into(),
        };
        let now = Utc::now();
        let rec = crate::kmsg::parse_record(
            "3,1,10,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.",
        )
        .unwrap();
        let (_, mut e) = crate::signals::kmsg_event(&node, "b", now, &rec, now).unwrap();
        by_bus.attribute(&mut e);
        assert_eq!((e.gpu_index, e.gpu_uuid.as_deref()), (Some(3), Some("GPU-3")));
        assert_eq!(e.gpu_model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(e.attributes.as_ref().unwrap()["serial"], "1650924060175");
        // Another bus: left as it is.
        let rec = crate::kmsg::parse_record(
            "3,2,10,-;NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=x, GPU has fallen off the bus.",
        )
        .unwrap();
        let (_, mut e) = crate::signals::kmsg_event(&node, "b", now, &rec, now).unwrap();
        by_bus.attribute(&mut e);
        assert_eq!((e.gpu_index, e.gpu_uuid), (None, None));
        std::fs::remove_dir_all(&dir).ok();
    }

    fn gpu() -> GpuCounters {
        GpuCounters {
            index: 2,
            uuid: Some("GPU-1".into()),
            serial: Some("S1".into()),
            pci_bus_id: Some("0000:3b:00.0".into()),
            model: Some("NVIDIA H100 80GB HBM3".into()),
            ecc_volatile_corrected: Some(10),
            ecc_aggregate_corrected: Some(100),
            ecc_volatile_uncorrected: Some(0),
            ecc_aggregate_uncorrected: Some(0),
            retired_pages_single_bit: None,
            retired_pages_double_bit: None,
            retired_pages_pending: None,
            remapped_rows_correctable: Some(0),
            remapped_rows_uncorrectable: Some(1),
            remapped_rows_pending: Some(false),
            remapped_rows_failure: Some(false),
            recovery_action: Some("None".into()),
        }
    }

    fn counters(ch: &[CounterChange]) -> Vec<&'static str> {
        ch.iter().map(|c| c.counter).collect()
    }

    #[test]
    fn nothing_changed_nothing_sent() {
        assert!(diff(Some(&gpu()), &gpu()).is_empty());
    }

    #[test]
    fn first_sight_reports_what_is_already_non_zero() {
        assert_eq!(
            counters(&diff(None, &gpu())),
            ["ecc_corrected", "remapped_rows_uncorrectable"]
        );
    }

    #[test]
    fn each_counter_that_grows_or_turns_on_is_a_signal() {
        let before = gpu();
        let mut now = gpu();
        now.ecc_volatile_uncorrected = Some(2);
        now.ecc_aggregate_uncorrected = Some(2);
        now.ecc_aggregate_corrected = Some(130);
        now.remapped_rows_uncorrectable = Some(2);
        now.remapped_rows_pending = Some(true);
        now.recovery_action = Some("Reset".into());
        let ch = diff(Some(&before), &now);
        assert_eq!(
            counters(&ch),
            [
                "ecc_volatile_uncorrected",
                "ecc_aggregate_uncorrected",
                "ecc_corrected",
                "remapped_rows_uncorrectable",
                "remapped_rows_pending",
                "recovery_action"
            ]
        );
        let corrected = &ch[2];
        assert_eq!((corrected.kind, corrected.code), ("ecc", Some(1)));
        assert_eq!(
            (corrected.previous.clone(), corrected.value.clone()),
            (json!(100), json!(130))
        );
        let node = NodeId {
            cluster: "c".into(),
            node: "n".into(),
        };
        let (sev, e) = change_event(&node, "b", &now, corrected);
        assert_eq!(sev, Severity::Low);
        assert_eq!(e.attributes.as_ref().unwrap()["delta"], 30);
        assert_eq!(e.gpu_index, Some(2));
        let (sev, e) = change_event(&node, "b", &now, &ch[0]);
        assert_eq!((sev, e.kind.as_str(), e.code), (Severity::High, "ecc", Some(2)));
        // The same change read again (a restart before the baseline was saved) has the same id.
        assert_eq!(change_event(&node, "b", &now, &ch[0]).1.id, e.id);
        faultline_core::domain::event::parse_event(serde_json::to_value(&e).unwrap(), Utc::now()).unwrap();
    }

    #[test]
    fn a_volatile_reset_is_a_new_baseline_and_pre_ampere_retirements_count() {
        let mut before = gpu();
        before.ecc_volatile_uncorrected = Some(5);
        let mut now = gpu();
        now.ecc_volatile_uncorrected = Some(0);
        assert!(diff(Some(&before), &now).is_empty());
        before.retired_pages_double_bit = Some(1);
        before.retired_pages_pending = Some(false);
        now.retired_pages_double_bit = Some(3);
        now.retired_pages_pending = Some(true);
        assert_eq!(
            counters(&diff(Some(&before), &now)),
            ["retired_pages_double_bit", "retired_pages_pending"]
        );
        assert_eq!(path_segment("train a/1"), "train%20a%2F1");
    }
}
