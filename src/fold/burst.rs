//! Burst deduplication. Pure: one failing GPU can log the same Xid hundreds of thousands of
//! times; identical signals repeating within a short gap are one signal with a repeat count and
//! a first/last time.

use chrono::Duration;

use crate::domain::event::Event;
use crate::domain::identity::{GpuNames, SignalIdentity};

/// Identical signals closer than this (to the previous one of the run) join one burst.
pub const BURST_GAP_SECS: i64 = 60;

pub fn burst_gap() -> Duration {
    Duration::seconds(BURST_GAP_SECS)
}

/// A stored burst spans at most this (first to last occurrence); a longer run of repeats is cut
/// into bursts of a day. The bound lets storage find a signal overlapping a time range by its
/// start (`occurred_at >= range start - span`), so a lookup reads one or two monthly partitions
/// instead of every older one. Failures do not depend on where a run is cut.
pub const MAX_BURST_SPAN_SECS: i64 = crate::domain::event::MAX_REPEAT_SPAN_SECS;

pub fn max_burst_span() -> Duration {
    Duration::seconds(MAX_BURST_SPAN_SECS)
}

pub use crate::domain::event::Burst;

/// What makes two signals "the same": the source (cluster, node, job), the stated symptom and
/// root cause, and the signal's own identity ([`SignalIdentity`]: kind, code, the GPU in every
/// form it is named, what was measured, and the text of a signal without a code). The job is part
/// of it so that one job's failure never hides inside another job's burst on a shared node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct BurstIdentity {
    pub cluster: String,
    pub node: String,
    pub job_id: Option<String>,
    pub symptom: Option<&'static str>,
    pub root_cause: Option<(&'static str, &'static str)>,
    pub signal: SignalIdentity,
}

impl BurstIdentity {
    /// The identity as one key, stored with each signal (`events.burst_key`) so that a later batch
    /// finds the stored signal its repeats extend by equality.
    pub fn key(&self) -> uuid::Uuid {
        let text = serde_json::to_string(self).expect("an identity serialises");
        uuid::Uuid::new_v5(&BURST_KEY_NAMESPACE, text.as_bytes())
    }
}

/// Namespace of [`BurstIdentity::key`] (a fixed random UUID).
const BURST_KEY_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6c1f_2b7e_93d4_4a0e_b5c1_0f83_2d6e_9a47);

/// Kinds that record a change of state (a node drained or returned, a job started): each is a
/// fact of its own, so two of them are never one burst (a node drained twice within a minute was
/// out of service twice).
pub const TRANSITION_KINDS: &[&str] = &["node_drain", "node_resume", "job_start"];

/// None for a signal that is never merged: one without a node (no source to compare) or a
/// transition ([`TRANSITION_KINDS`]).
pub fn identity(e: &Event) -> Option<BurstIdentity> {
    if TRANSITION_KINDS.contains(&e.kind.as_str()) {
        return None;
    }
    let gpu = GpuNames::of(e.gpu_index, e.gpu_uuid.as_deref(), Some(&e.attributes));
    Some(BurstIdentity {
        cluster: e.cluster.clone(),
        node: e.node.clone()?,
        job_id: e.job_id.clone(),
        symptom: e.symptom.map(|s| s.as_str()),
        root_cause: e.root_cause.map(|r| (r.category.as_str(), r.component.as_str())),
        signal: SignalIdentity::of(&e.kind, e.code, gpu, e.message.as_deref(), Some(&e.attributes)),
    })
}

/// Collapses a batch into bursts: per identity, signals sorted by time form one burst while each
/// gap to the previous one is at most `gap` and the burst spans at most [`max_burst_span`].
/// Signals without identity stay alone. The result depends only on the set of signals, not their
/// order.
pub fn collapse(events: Vec<Event>, gap: Duration) -> Vec<Burst> {
    let groups = groups(&events, gap);
    let mut slots: Vec<Option<Event>> = events.into_iter().map(Some).collect();
    groups
        .into_iter()
        .map(|g| {
            let members = || g.iter().filter_map(|&i| slots[i].as_ref());
            let last_at = members()
                .map(last_occurrence)
                .max()
                .expect("a burst holds at least one signal");
            // A signal the sender compacted counts as the occurrences it stands for.
            let count = members().map(|e| i64::from(e.repeat_count.max(1))).sum::<i64>();
            let count = count.min(i64::from(i32::MAX)) as i32;
            let event = slots[g[0]].take().expect("each signal is in one burst");
            Burst { event, count, last_at }
        })
        .collect()
}

/// The last occurrence a signal stands for.
pub fn last_occurrence(e: &Event) -> chrono::DateTime<chrono::Utc> {
    e.last_occurred_at.map_or(e.occurred_at, |l| l.max(e.occurred_at))
}

/// The bursts [`collapse`] forms, as positions in `events`: each burst's signals in time order, the
/// first being the one that stands for the burst.
pub fn groups(events: &[Event], gap: Duration) -> Vec<Vec<usize>> {
    let mut keyed: Vec<(Option<BurstIdentity>, usize)> =
        events.iter().enumerate().map(|(i, e)| (identity(e), i)).collect();
    keyed.sort_by(|(ka, a), (kb, b)| {
        let (a, b) = (&events[*a], &events[*b]);
        ka.cmp(kb).then(a.occurred_at.cmp(&b.occurred_at)).then(a.id.cmp(&b.id))
    });
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut current: Option<BurstIdentity> = None;
    let mut last_at = None;
    for (key, i) in keyed {
        let event = &events[i];
        if let (Some(k), Some(last), Some(reach)) = (&key, out.last_mut(), last_at)
            && current.as_ref() == Some(k)
            && event.occurred_at - reach <= gap
            && last_occurrence(event) - events[last[0]].occurred_at <= max_burst_span()
        {
            last.push(i);
            last_at = Some(last_occurrence(event).max(reach));
            continue;
        }
        current = key;
        last_at = Some(last_occurrence(event));
        out.push(vec![i]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::taxonomy::Symptom;
    use chrono::{DateTime, Utc};
    use uuid::Uuid;

    fn at(secs: i64) -> DateTime<Utc> {
        "2026-11-02T10:00:00Z".parse::<DateTime<Utc>>().unwrap() + Duration::seconds(secs)
    }

    fn ev(n: u128, secs: i64, node: &str, code: i64) -> Event {
        Event {
            id: Uuid::from_u128(n),
            occurred_at: at(secs),
            cluster: "c1".into(),
            node: Some(node.into()),
            gpu_index: Some(3),
            gpu_uuid: None,
            gpu_model: None,
            job_id: None,
            job_gpus: None,
            kind: "xid".into(),
            code: Some(code),
            symptom: None,
            root_cause: None,
            message: None,
            attributes: Default::default(),
            repeat_count: 1,
            last_occurred_at: None,
        }
    }

    #[test]
    fn ten_thousand_identical_xids_are_one_signal() {
        // One line every 10 ms for 100 s: all gaps (10 ms) are below 60 s.
        let events: Vec<Event> = (0..10_000)
            .map(|i| {
                let mut e = ev(i as u128 + 1, 0, "n07", 79);
                e.occurred_at = at(0) + Duration::milliseconds(10 * i);
                e
            })
            .collect();
        let bursts = collapse(events, burst_gap());
        assert_eq!(bursts.len(), 1);
        assert_eq!(bursts[0].count, 10_000);
        assert_eq!(bursts[0].event.id, Uuid::from_u128(1));
        // last = 9,999 * 10 ms = 99.99 s
        assert_eq!(bursts[0].last_at, at(0) + Duration::milliseconds(99_990));
    }

    #[test]
    fn a_signal_the_sender_compacted_counts_as_its_occurrences_and_reaches_its_last() {
        // One XID at 0 s, the sender's summary of 998 more from 1 s to 200 s, one more at 250 s:
        // the last gap (250 - 200 = 50 s) is within 60 s, so it is one burst of 1,000.
        let mut summary = ev(2, 1, "n07", 13);
        summary.repeat_count = 998;
        summary.last_occurred_at = Some(at(200));
        let events = vec![ev(1, 0, "n07", 13), summary, ev(3, 250, "n07", 13)];
        let bursts = collapse(events, burst_gap());
        assert_eq!(bursts.len(), 1);
        assert_eq!((bursts[0].count, bursts[0].last_at), (1000, at(250)));
        assert_eq!(bursts[0].event.id, Uuid::from_u128(1));
        // Measured from the summary's last occurrence, 270 s is still within the gap: from its
        // first (1 s) it would not be.
        let mut summary = ev(2, 1, "n07", 13);
        summary.repeat_count = 5;
        summary.last_occurred_at = Some(at(220));
        let bursts = collapse(vec![summary, ev(3, 270, "n07", 13)], burst_gap());
        assert_eq!(bursts.iter().map(|b| b.count).collect::<Vec<_>>(), [6]);
    }

    #[test]
    fn drains_and_returns_are_never_one_burst() {
        let events: Vec<Event> = (0..3)
            .map(|i| {
                let mut e = ev(i as u128 + 1, 5 * i, "n07", 0);
                e.kind = "node_drain".into();
                e.code = None;
                e
            })
            .collect();
        let bursts = collapse(events, burst_gap());
        assert_eq!(bursts.len(), 3);
        assert!(bursts.iter().all(|b| b.count == 1));
    }

    #[test]
    fn a_run_longer_than_a_day_is_cut_into_days() {
        // One signal every 30 s for 36 h: one burst of the first 24 h, one of the rest.
        let events: Vec<Event> = (0..4320).map(|i| ev(i as u128 + 1, 30 * i, "n07", 48)).collect();
        let bursts = collapse(events, burst_gap());
        let got: Vec<(u128, i32, i64)> = bursts
            .iter()
            .map(|b| {
                (
                    b.event.id.as_u128(),
                    b.count,
                    (b.last_at - b.event.occurred_at).num_seconds(),
                )
            })
            .collect();
        assert_eq!(got, [(1, 2881, 86_400), (2882, 1439, 43_140)]);
    }

    #[test]
    fn gaps_split_and_chains_join() {
        // 0, 50, 100 chain (gaps of 50 s); 161 is 61 s later: a new burst.
        let bursts = collapse(
            vec![
                ev(4, 161, "n1", 79),
                ev(2, 50, "n1", 79),
                ev(1, 0, "n1", 79),
                ev(3, 100, "n1", 79),
            ],
            burst_gap(),
        );
        assert_eq!(
            bursts
                .iter()
                .map(|b| (b.event.id.as_u128(), b.count))
                .collect::<Vec<_>>(),
            vec![(1, 3), (4, 1)]
        );
        assert_eq!(bursts[0].last_at, at(100));
    }

    #[test]
    fn different_identities_never_merge() {
        let mut other_gpu = ev(3, 0, "n1", 79);
        other_gpu.gpu_index = Some(4);
        let mut healthy = ev(5, 0, "n1", 79);
        healthy.symptom = Some(Symptom::None);
        let mut no_node = ev(6, 0, "n1", 79);
        no_node.node = None;
        let mut no_node2 = no_node.clone();
        no_node2.id = Uuid::from_u128(7);
        let mut other_job = ev(8, 0, "n1", 79);
        other_job.job_id = Some("j2".into());
        let events = vec![
            ev(1, 0, "n1", 79),
            ev(2, 0, "n2", 79),
            other_gpu,
            ev(4, 0, "n1", 13),
            healthy,
            no_node,
            no_node2,
            other_job,
        ];
        let bursts = collapse(events, burst_gap());
        assert_eq!(bursts.len(), 8);
        assert!(bursts.iter().all(|b| b.count == 1));
    }

    #[test]
    fn order_does_not_matter() {
        let a: Vec<Event> = (0..50)
            .map(|i| ev(i, (i as i64 * 37) % 400, if i % 3 == 0 { "n1" } else { "n2" }, 79))
            .collect();
        let mut b = a.clone();
        b.reverse();
        assert_eq!(collapse(a, burst_gap()), collapse(b, burst_gap()));
    }
}
