//! Part or slot: when hardware failures repeat, is it the part (the serial keeps failing wherever
//! it is installed) or the slot (whatever part sits in that node position keeps failing)?
//!
//! A part is installed in node slots over placements; its exposure is its installed time, a slot's
//! exposure the time any part was installed in it (every placement is one part in one slot, so
//! both add up to the fleet's E part-days). Under the null that the fleet's N failures fall in
//! proportion to exposure, a part or slot with exposure e expects mu = N e / E failures and gets
//! at least k with probability P(X >= k | mu), X Poisson (the lemon-node test, `decisions::lemon`).
//! Every part and every slot with exposure is one test; Holm's step-down adjustment runs over all
//! of them together, so the family-wise error rate holds across both lists. Only those with at
//! least two failures can show a pattern and are returned.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::analytics::decisions::lemon::{holm, poisson_sf};

/// One part (by serial) installed in one slot (e.g. "node-17/gpu3") from `from` to `to`, in days
/// on any common clock (e.g. days since an epoch).
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub part: String,
    pub slot: String,
    pub from: f64,
    pub to: f64,
}

impl Placement {
    /// Installed days; 0 for an inverted or non-finite interval.
    pub fn days(&self) -> f64 {
        let d = self.to - self.from;
        if d.is_finite() && d > 0.0 { d } else { 0.0 }
    }
}

/// A hardware failure of `part` while installed in `slot`, at `at` days (same clock as placements).
#[derive(Debug, Clone, PartialEq)]
pub struct PartFailure {
    pub part: String,
    pub slot: String,
    pub at: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SuspectKind {
    Part,
    Slot,
}

/// What the pattern suggests doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Recommendation {
    /// The failures followed the part across slots: RMA the part (its serial) and put a known-good
    /// one in; the node returns to service once the part is swapped, and the old part must not be
    /// installed anywhere else.
    ReplacePart,
    /// The failures stayed with the slot across parts: drain the node and inspect that position
    /// (baseboard, riser, power delivery, cooling, cabling) before installing another part in it;
    /// replacing parts there only moves good parts into a bad place.
    InspectSlot,
    /// Significant, but every failure was the same part in the same slot, so part and slot cannot
    /// be told apart: move the part to another slot (and a known-good part into this one) and watch
    /// which of them fails next.
    SwapToTell,
    /// Repeated failures, but not beyond chance after the correction: keep watching.
    Monitor,
}

/// A part or slot with at least two failures, tested against the fleet's rate.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Suspect {
    pub kind: SuspectKind,
    /// The part's serial or the slot's name.
    pub id: String,
    pub failures: u64,
    /// For a part: the distinct slots it failed in; for a slot: the distinct parts that failed in it.
    pub distinct: u64,
    /// Installed days (a part's own; a slot's, summed over the parts in it).
    pub exposure_days: f64,
    /// Fleet failures x exposure / fleet exposure.
    pub expected: f64,
    /// P(X >= failures) for X ~ Poisson(expected).
    pub p_value: f64,
    /// Holm-adjusted over every part and slot tested.
    pub adjusted_p: f64,
    /// `adjusted_p <= alpha`.
    pub significant: bool,
    pub recommendation: Recommendation,
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct PartsOrSlots {
    /// Failures counted (those whose part and slot both have installed time).
    pub failures: u64,
    /// Failures left out because their part or slot has no installed time in the placements.
    pub failures_without_exposure: u64,
    /// Fleet part-days installed.
    pub exposure_days: f64,
    /// Parts with installed time (each one test).
    pub parts_tested: u64,
    /// Slots with installed time (each one test).
    pub slots_tested: u64,
    pub alpha: f64,
    pub correction: String,
    /// Parts with >= 2 failures, by adjusted p (then p, then serial).
    pub parts: Vec<Suspect>,
    /// Slots with >= 2 failures, by adjusted p (then p, then name).
    pub slots: Vec<Suspect>,
}

#[derive(Default)]
struct Tally<'a> {
    exposure: f64,
    failures: u64,
    /// Slots a part failed in, or parts that failed in a slot.
    others: BTreeSet<&'a str>,
}

/// Attributes repeated hardware failures to parts or to slots (see the module documentation).
///
/// A part is `replace_part` when significant and it failed in >= 2 distinct slots; a slot is
/// `inspect_slot` when significant and >= 2 distinct parts failed in it; a significant part or slot
/// whose failures were all one part in one slot is `swap_to_tell`; anything not significant is
/// `monitor`. A part that failed in a slot that is itself `inspect_slot` may still be flagged as a
/// part: read the two lists together. A failure counts only if its part and its slot both have
/// installed time (the time of the failure is not checked against the placements: failure records
/// and placement records come from different sources and their clocks need not agree to the second).
pub fn parts_or_slots(placements: &[Placement], failures: &[PartFailure], alpha: f64) -> PartsOrSlots {
    let mut parts: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut slots: BTreeMap<&str, Tally> = BTreeMap::new();
    for p in placements {
        let days = p.days();
        if days > 0.0 {
            parts.entry(&p.part).or_default().exposure += days;
            slots.entry(&p.slot).or_default().exposure += days;
        }
    }
    let mut counted = 0_u64;
    for f in failures {
        let (Some(part), true) = (parts.get_mut(f.part.as_str()), slots.contains_key(f.slot.as_str())) else {
            continue;
        };
        part.failures += 1;
        part.others.insert(&f.slot);
        let slot = slots.get_mut(f.slot.as_str()).expect("checked above");
        slot.failures += 1;
        slot.others.insert(&f.part);
        counted += 1;
    }
    let exposure: f64 = parts.values().map(|t| t.exposure).sum();
    let rate = if exposure > 0.0 { counted as f64 / exposure } else { 0.0 };
    let tested: Vec<(SuspectKind, &str, &Tally)> = parts
        .iter()
        .map(|(id, t)| (SuspectKind::Part, *id, t))
        .chain(slots.iter().map(|(id, t)| (SuspectKind::Slot, *id, t)))
        .collect();
    let tails: Vec<f64> = tested
        .iter()
        .map(|(_, _, t)| poisson_sf(t.failures, rate * t.exposure))
        .collect();
    let adjusted = holm(&tails);
    let (mut part_list, mut slot_list) = (Vec::new(), Vec::new());
    for (i, (kind, id, t)) in tested.iter().enumerate() {
        if t.failures < 2 {
            continue;
        }
        let significant = adjusted[i] <= alpha;
        let distinct = t.others.len() as u64;
        let recommendation = match (significant, distinct >= 2, kind) {
            (false, _, _) => Recommendation::Monitor,
            (true, false, _) => Recommendation::SwapToTell,
            (true, true, SuspectKind::Part) => Recommendation::ReplacePart,
            (true, true, SuspectKind::Slot) => Recommendation::InspectSlot,
        };
        let suspect = Suspect {
            kind: *kind,
            id: id.to_string(),
            failures: t.failures,
            distinct,
            exposure_days: crate::analytics::stats::positive_zero(t.exposure),
            expected: rate * t.exposure,
            p_value: tails[i],
            adjusted_p: adjusted[i],
            significant,
            recommendation,
        };
        match kind {
            SuspectKind::Part => part_list.push(suspect),
            SuspectKind::Slot => slot_list.push(suspect),
        }
    }
    for list in [&mut part_list, &mut slot_list] {
        list.sort_by(|a, b| {
            a.adjusted_p
                .total_cmp(&b.adjusted_p)
                .then(a.p_value.total_cmp(&b.p_value))
                .then_with(|| a.id.cmp(&b.id))
        });
    }
    PartsOrSlots {
        failures: counted,
        failures_without_exposure: failures.len() as u64 - counted,
        exposure_days: crate::analytics::stats::positive_zero(exposure),
        parts_tested: parts.len() as u64,
        slots_tested: slots.len() as u64,
        alpha,
        correction: "holm".into(),
        parts: part_list,
        slots: slot_list,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(part: &str, slot: &str, from: f64, to: f64) -> Placement {
        Placement {
            part: part.into(),
            slot: slot.into(),
            from,
            to,
        }
    }

    fn fail(part: &str, slot: &str, at: f64) -> PartFailure {
        PartFailure {
            part: part.into(),
            slot: slot.into(),
            at,
        }
    }

    /// P(X >= k | mu) = sum over j >= k of e^-mu mu^j / j!, summed directly (1 - P(X < k) would
    /// cancel to a few digits when the tail is small).
    fn tail(k: u64, mu: f64) -> f64 {
        let mut term = (-mu).exp() * (1..=k).fold(1.0, |acc, j| acc * mu / j as f64);
        let mut sum = 0.0;
        for j in k + 1..k + 60 {
            sum += term;
            term *= mu / j as f64;
        }
        sum
    }

    /// 40 healthy parts B00..B39, each in its own slot N00..N39 for 360 days (14,400 part-days);
    /// B00 and B01 fail once, B02 twice (in N02).
    /// Part PF moves through slots S1, S2, S3 (30 days each) and fails in every one: it follows the part.
    /// Slot SB holds K1, K2, K3 for 30 days each and every one fails: it stays with the slot.
    /// Part Q fails twice in slot SQ within 20 days: part and slot cannot be told apart.
    /// E = 14,400 + 90 + 90 + 20 = 14,600 part-days, N = 2 + 2 + 3 + 3 + 2 = 12 failures;
    /// 45 parts and 45 slots are 90 tests.
    fn fleet() -> (Vec<Placement>, Vec<PartFailure>) {
        let mut placements: Vec<Placement> = (0..40)
            .map(|i| place(&format!("B{i:02}"), &format!("N{i:02}"), 0.0, 360.0))
            .collect();
        let mut failures = vec![
            fail("B00", "N00", 100.0),
            fail("B01", "N01", 200.0),
            fail("B02", "N02", 50.0),
            fail("B02", "N02", 300.0),
        ];
        for (i, slot) in ["S1", "S2", "S3"].iter().enumerate() {
            let from = 30.0 * i as f64;
            placements.push(place("PF", slot, from, from + 30.0));
            failures.push(fail("PF", slot, from + 29.0));
        }
        for (i, part) in ["K1", "K2", "K3"].iter().enumerate() {
            let from = 30.0 * i as f64;
            placements.push(place(part, "SB", from, from + 30.0));
            failures.push(fail(part, "SB", from + 29.0));
        }
        placements.push(place("Q", "SQ", 0.0, 20.0));
        failures.extend([fail("Q", "SQ", 5.0), fail("Q", "SQ", 19.0)]);
        (placements, failures)
    }

    #[test]
    fn part_that_follows_and_slot_that_kills() {
        let (placements, mut failures) = fleet();
        // A failure of a part never placed is not counted (and a placement of no length adds nothing).
        failures.push(fail("ghost", "N05", 10.0));
        let mut placements = placements;
        placements.push(place("empty", "N05", 10.0, 10.0));
        let r = parts_or_slots(&placements, &failures, 0.05);
        assert_eq!((r.failures, r.failures_without_exposure), (12, 1));
        assert_eq!(r.exposure_days, 14_600.0);
        assert_eq!((r.parts_tested, r.slots_tested), (45, 45));
        assert_eq!(r.correction, "holm");

        // PF and SB: mu = 12 x 90 / 14,600 = 0.0739726, P(X >= 3) = 1 - e^-mu (1 + mu + mu^2 / 2)
        // = 6.38e-5, the two smallest of 90: Holm gives 90 p to both.
        let mu = 12.0 * 90.0 / 14_600.0;
        let p3 = tail(3, mu);
        assert!((p3 - 6.383e-5).abs() < 1e-8, "{p3}");
        // Q and SQ: mu = 12 x 20 / 14,600 = 0.0164384, P(X >= 2) = 1.336e-4, third and fourth:
        // max(90 p3, 88 p2) = 88 p2 = 0.0118 for both.
        let mu_q = 12.0 * 20.0 / 14_600.0;
        let p2 = tail(2, mu_q);
        // B02 and N02: mu = 12 x 360 / 14,600 = 0.295890, P(X >= 2) = 0.0360; 86 x 0.0360 > 1: 1.
        let mu_b = 12.0 * 360.0 / 14_600.0;
        let pb = tail(2, mu_b);
        assert!((pb - 0.0360).abs() < 1e-4, "{pb}");

        let ids: Vec<&str> = r.parts.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["PF", "Q", "B02"]);
        let ids: Vec<&str> = r.slots.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["SB", "SQ", "N02"]);

        let pf = &r.parts[0];
        assert_eq!(
            (pf.kind, pf.failures, pf.distinct, pf.exposure_days),
            (SuspectKind::Part, 3, 3, 90.0)
        );
        assert!((pf.expected - mu).abs() < 1e-15);
        assert!((pf.p_value - p3).abs() < 1e-12 * p3);
        assert!((pf.adjusted_p - 90.0 * p3).abs() < 1e-12);
        assert!(pf.significant);
        assert_eq!(pf.recommendation, Recommendation::ReplacePart);

        let sb = &r.slots[0];
        assert_eq!(
            (sb.kind, sb.failures, sb.distinct, sb.exposure_days),
            (SuspectKind::Slot, 3, 3, 90.0)
        );
        assert!((sb.adjusted_p - 90.0 * p3).abs() < 1e-12);
        assert_eq!(sb.recommendation, Recommendation::InspectSlot);

        for q in [&r.parts[1], &r.slots[1]] {
            assert_eq!((q.failures, q.distinct), (2, 1));
            assert!((q.p_value - p2).abs() < 1e-12 * p2);
            assert!((q.adjusted_p - 88.0 * p2).abs() < 1e-12);
            assert!(q.significant);
            assert_eq!(q.recommendation, Recommendation::SwapToTell);
        }
        for b in [&r.parts[2], &r.slots[2]] {
            assert!((b.p_value - pb).abs() < 1e-12);
            assert_eq!(
                (b.adjusted_p, b.significant, b.recommendation),
                (1.0, false, Recommendation::Monitor)
            );
        }
        // (The failing K parts and PF's slots S1-S3 had one failure each: tested, not listed.)
    }

    #[test]
    fn serialises_snake_case_and_handles_an_empty_fleet() {
        let json = serde_json::to_string(&(SuspectKind::Slot, Recommendation::SwapToTell)).unwrap();
        assert_eq!(json, r#"["slot","swap_to_tell"]"#);
        let r = parts_or_slots(&[], &[fail("a", "b", 1.0)], 0.05);
        assert_eq!((r.failures, r.failures_without_exposure, r.parts_tested), (0, 1, 0));
        assert!(r.parts.is_empty() && r.slots.is_empty());
        // Failures but a fleet too small to tell chance from pattern: listed, not significant.
        let r = parts_or_slots(
            &[place("a", "s", 0.0, 10.0)],
            &[fail("a", "s", 1.0), fail("a", "s", 2.0)],
            0.05,
        );
        // mu = 2 for each: P(X >= 2) = 1 - 3 e^-2 = 0.594.
        assert!((r.parts[0].p_value - (1.0 - 3.0 * (-2.0_f64).exp())).abs() < 1e-12);
        assert_eq!(r.parts[0].recommendation, Recommendation::Monitor);
    }
}
