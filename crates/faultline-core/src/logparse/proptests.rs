//! Property tests: the parsers never panic on any input, and an XID line's number survives any
//! of the kernel-log prefixes. Cases are generated (no corpus kept); failures are shrunk and
//! printed by proptest.

use proptest::prelude::*;

use super::{LineContext, SIGNAL_SAMPLES, parse_line};

fn ctx() -> LineContext {
    LineContext { year: 2026 }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(line in any::<String>()) {
        let _ = parse_line(&line, &ctx());
        let _ = super::ipmi_sel::parse_sel_elist(&line);
    }

    #[test]
    fn mutated_samples_never_panic(
        sample in 0..SIGNAL_SAMPLES.len(),
        cut in any::<prop::sample::Index>(),
        insert in any::<String>(),
    ) {
        let s = SIGNAL_SAMPLES[sample];
        let at = cut.index(s.len() + 1);
        let at = (0..=at).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
        let mutated = format!("{}{insert}{}", &s[..at], &s[at..]);
        let _ = parse_line(&mutated, &ctx());
        let _ = parse_line(&s[..at], &ctx());
    }

    #[test]
    fn the_xid_number_survives_every_prefix(
        code in 1u32..1000,
        prefix in prop::sample::select(vec![
            "",
            "[ 1234.567890] ",
            "4,1234,5678901,-;",
            "[Mon Dec  6 12:34:56 2021] ",
            "kern  :warn  : 2021-12-06T12:34:56,123456+00:00 ",
            "Dec  6 12:34:56 gpu-node-17 kernel: [ 1234.567890] ",
            "2021-12-06T12:34:56.123456+00:00 gpu-node-17 kernel: ",
        ]),
        bus in 0u8..=255,
    ) {
        let line = format!("{prefix}NVRM: Xid (PCI:0000:{bus:02x}:00): {code}, pid=4242, name=python, some detail");
        let parsed = parse_line(&line, &ctx());
        prop_assert!(parsed.is_some(), "not recognised: {line}");
        let parsed = parsed.unwrap();
        prop_assert_eq!(parsed.kind, "xid");
        prop_assert_eq!(parsed.code, Some(i64::from(code)));
        let expected_bus = format!("0000:{bus:02x}:00.0");
        prop_assert_eq!(parsed.pci_bus_id.as_deref(), Some(expected_bus.as_str()));
    }
}
