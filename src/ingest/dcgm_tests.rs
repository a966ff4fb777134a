use super::*;
use crate::domain::taxonomy::Category;
use serde_json::json;

fn run() -> Run<'static> {
    Run {
        cluster: "c1",
        node: "gpu-node-07",
        at: "2026-11-30T10:00:00Z".parse().unwrap(),
        id_time: "2026-11-30T10:00:00+00:00".into(),
    }
}

fn diag(name: &str) -> Vec<Event> {
    let text = match name {
        "dcgm4" => include_str!("../../tests/fixtures/dcgm/diag-dcgm4-layout.json"),
        _ => include_str!("../../tests/fixtures/dcgm/diag-gpu-diagnostic-layout.json"),
    };
    let doc: Value = serde_json::from_str(text).unwrap();
    diag_results(&doc)
        .unwrap()
        .iter()
        .flat_map(|r| map_diag_result(r, &run()).unwrap())
        .collect()
}

#[test]
fn the_code_table_is_dcgms() {
    assert_eq!(CODES.len(), 133);
    assert!(CODES.iter().enumerate().all(|(i, c)| c.0 == i as i64));
    // dcgm_errors.c: DBE is ISOLATE / HARDWARE_MEMORY, persistence mode CONFIG / SOFTWARE_OTHER.
    assert_eq!(
        code_info(4).map(|c| (c.1, c.2, c.3)),
        Some(("VOLATILE_DBE_DETECTED", 2, 10))
    );
    assert_eq!(code_info(29).map(|c| (c.2, c.3)), Some((5, 8)));
    assert!(code_info(133).is_none() && code_info(-1).is_none());
}

#[test]
fn dcgm4_layout_failures_are_signals_on_their_gpus() {
    let e = diag("dcgm4");
    assert_eq!(e.len(), 2);
    // Persistence mode off: DCGM rates it CONFIG, so it is stored but makes no failure.
    assert_eq!(
        (e[0].kind.as_str(), e[0].code, e[0].gpu_index),
        ("dcgm", Some(29), Some(0))
    );
    assert_eq!(e[0].symptom, Some(Symptom::None));
    assert_eq!(e[0].attributes["dcgm_severity"], "CONFIG");
    // A double-bit ECC error: ISOLATE, HARDWARE_MEMORY -> hardware / gpu_memory, on serial ...242.
    let dbe = &e[1];
    assert_eq!((dbe.code, dbe.gpu_index, dbe.symptom), (Some(4), Some(1), None));
    assert_eq!(
        dbe.root_cause,
        Some(RootCause::new(Category::Hardware, Component::GpuMemory).unwrap())
    );
    assert_eq!(dbe.attributes["gpu_serial"], "1654922000242");
    assert_eq!(dbe.attributes["test"], "memory");
    // Same report, same ids.
    assert_eq!(diag("dcgm4")[1].id, dbe.id);
}

#[test]
fn older_layout_failures_are_signals_too() {
    let e = diag("older");
    // sm_stress failed on GPUs 0, 2 and 3 with DCGM_FR_STRESS_LEVEL (TRIAGE, PERF_THRESHOLD).
    let gpus: Vec<Option<i32>> = e.iter().map(|e| e.gpu_index).collect();
    assert_eq!(gpus, vec![Some(0), Some(2), Some(3)]);
    assert!(e.iter().all(|e| e.code == Some(50) && e.symptom.is_none()));
    assert_eq!(
        e[0].root_cause,
        Some(RootCause::new(Category::Hardware, Component::Gpu).unwrap())
    );
}

#[test]
fn xid_codes_become_xid_signals() {
    assert_eq!(kind_and_code(Some(101), "Detected XID 79 for GPU 3"), ("xid", Some(79)));
    assert_eq!(
        kind_and_code(Some(109), "Detected fatal NvSwitch SXID 20034"),
        ("sxid", Some(20034))
    );
    assert_eq!(
        kind_and_code(Some(120), "GPU 3 has fallen off the bus"),
        ("xid", Some(79))
    );
    assert_eq!(kind_and_code(Some(4), "x"), ("dcgm", Some(4)));
}

#[test]
fn health_incidents_find_their_code_in_the_text() {
    assert_eq!(
        code_from_text("Detected 2 volatile double-bit ECC error(s) in GPU 1.").map(|c| c.0),
        Some(4)
    );
    assert_eq!(
        code_from_text("Detected more than 8 PCIe replays per minute for GPU 1 : 13").map(|c| c.0),
        Some(3)
    );
    assert_eq!(code_from_text("something else entirely"), None);
    let doc: Value = serde_json::from_str(include_str!("../../tests/fixtures/dcgm/health-failure.json")).unwrap();
    let (overall, incidents) = health_incidents(&doc).unwrap();
    assert_eq!((overall.as_str(), incidents.len()), ("Failure", 2));
    let e: Vec<Event> = incidents
        .iter()
        .map(|i| map_health_incident(i, &run()).unwrap())
        .collect();
    assert_eq!((e[0].code, e[0].gpu_index, e[0].symptom), (Some(4), Some(1), None));
    // A Warning (PCIe replays) is stored with symptom none.
    assert_eq!((e[1].code, e[1].symptom), (Some(3), Some(Symptom::None)));
    let healthy: Value = serde_json::from_str(include_str!("../../tests/fixtures/dcgm/health-healthy.json")).unwrap();
    assert_eq!(health_incidents(&healthy).unwrap().1.len(), 0);
}

#[test]
fn malformed_results_name_their_field() {
    let mut doc: Value =
        serde_json::from_str(include_str!("../../tests/fixtures/dcgm/diag-dcgm4-layout.json")).unwrap();
    doc["DCGM Diagnostic"]["test_categories"][1]["tests"][0]["results"][1]["status"] = json!("Exploded");
    let results = diag_results(&doc).unwrap();
    let err = map_diag_result(&results[2], &run()).unwrap_err();
    assert_eq!(
        err.field.as_deref(),
        Some("DCGM Diagnostic.test_categories[1].tests[0].results[1].status")
    );
    assert_eq!(
        diag_results(&json!({"body": {}})).unwrap_err().field.as_deref(),
        Some("DCGM Diagnostic")
    );
}
