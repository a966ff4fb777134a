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
        "dcgm33" => include_str!("../../tests/fixtures/dcgm/diag-dcgm33-coded-fail.json"),
        "dcgm31" => include_str!("../../tests/fixtures/dcgm/diag-dcgm31-nulls-after-warning.txt"),
        _ => include_str!("../../tests/fixtures/dcgm/diag-gpu-diagnostic-layout.json"),
    };
    let (doc, _) = report_json(text.as_bytes()).unwrap();
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
    // Persistence mode off, status Fail: a failure of GPU 0 although DCGM rates the code CONFIG
    // (kept as an attribute); SOFTWARE_OTHER -> platform / runtime.
    assert_eq!(
        (e[0].kind.as_str(), e[0].code, e[0].gpu_index),
        ("dcgm", Some(29), Some(0))
    );
    assert_eq!(e[0].symptom, None);
    assert_eq!(e[0].attributes["dcgm_severity"], "CONFIG");
    assert_eq!(
        e[0].root_cause,
        Some(RootCause::new(Category::Platform, Component::Runtime).unwrap())
    );
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

#[test]
fn a_dcgm31_report_with_nulls_after_a_warning_line_reads_whole() {
    // NVIDIA's nvvs test data: dcgmi printed "WARNING: THIS SHOULD NOT HAPPEN" before the JSON,
    // and a null after each Deployment test but the last.
    let text = include_str!("../../tests/fixtures/dcgm/diag-dcgm31-nulls-after-warning.txt");
    assert!(serde_json::from_str::<Value>(text).is_err());
    let (doc, skipped) = report_json(text.as_bytes()).unwrap();
    assert_eq!(skipped, vec!["WARNING: THIS SHOULD NOT HAPPEN".to_string()]);
    let results = diag_results(&doc).unwrap();
    // 9 Deployment tests (one result each, for GPUs 0-7) and `software` with one result per GPU.
    assert_eq!(results.len(), 9 + 8);
    assert_eq!(results[1].test, "NVML Library");
    assert_eq!(
        results[1].path,
        "DCGM GPU Diagnostic.test_categories[0].tests[2].results[0]"
    );
    // Every result PASS: no signal.
    assert!(diag("dcgm31").is_empty());
    // A body that is not JSON after its preamble says which line came first.
    let err = report_json(b"WARNING: THIS SHOULD NOT HAPPEN\n{\"DCGM GPU Diagnostic\": ").unwrap_err();
    assert!(err.contains("the first: 'WARNING: THIS SHOULD NOT HAPPEN'"), "{err}");
    assert!(
        report_json(b"no json here")
            .unwrap_err()
            .starts_with("the body is not JSON")
    );
}

#[test]
fn a_coded_fail_is_a_failure_of_its_gpu_whatever_the_codes_severity() {
    // DCGM 3.3.1 (go-dcgm#52): GPU Memory fails on GPU 0 with DCGM_FR_CUDA_API (51, MONITOR),
    // passes on GPU 1; Diagnostic fails on GPU 0 with DCGM_FR_API_FAIL (64, TRIAGE) and on GPU 1
    // without a warning.
    let e = diag("dcgm33");
    let got: Vec<(Option<i32>, Option<i64>, Option<Symptom>)> =
        e.iter().map(|e| (e.gpu_index, e.code, e.symptom)).collect();
    assert_eq!(
        got,
        vec![
            (Some(0), Some(51), None),
            (Some(0), Some(64), None),
            (Some(1), None, None)
        ]
    );
    assert!(e.iter().all(|e| e.kind == "dcgm"));
    assert_eq!(e[0].attributes["dcgm_severity"], "MONITOR");
    assert_eq!(e[0].attributes["dcgm_error"], "DCGM_FR_CUDA_API");
    // SOFTWARE_CUDA -> platform / driver; SOFTWARE_OTHER -> platform / runtime; no code: the
    // catalog decides.
    assert_eq!(
        e[0].root_cause,
        Some(RootCause::new(Category::Platform, Component::Driver).unwrap())
    );
    assert_eq!(
        e[1].root_cause,
        Some(RootCause::new(Category::Platform, Component::Runtime).unwrap())
    );
    assert_eq!(e[2].root_cause, None);
    assert_eq!(
        e[2].message.as_deref(),
        Some("Diagnostic: DCGM diagnostic test 'Diagnostic' Fail")
    );
    // A Warn result with the same code stays no failure.
    let (mut doc, _) =
        report_json(include_str!("../../tests/fixtures/dcgm/diag-dcgm33-coded-fail.json").as_bytes()).unwrap();
    doc["DCGM GPU Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["status"] = json!("Warn");
    let warned = map_diag_result(&diag_results(&doc).unwrap()[0], &run()).unwrap();
    assert_eq!((warned[0].code, warned[0].symptom), (Some(51), Some(Symptom::None)));
}

#[test]
fn a_dcgm3_warning_given_as_text_keeps_its_code() {
    // DCGM 3.0 to 3.2 write a result's warning as text (`dcgmi/Diag.cpp` HelperJsonAddResult),
    // 3.2 its code as `error_id` beside it.
    let mut doc: Value =
        serde_json::from_str(include_str!("../../tests/fixtures/dcgm/diag-dcgm33-coded-fail.json")).unwrap();
    let result = &mut doc["DCGM GPU Diagnostic"]["test_categories"][0]["tests"][0]["results"][0];
    result["warnings"] = json!("Detected 2 volatile double-bit ECC error(s) in GPU 0.");
    let without_id = map_diag_result(&diag_results(&doc).unwrap()[0], &run()).unwrap();
    assert_eq!((without_id[0].code, without_id[0].symptom), (Some(4), None));
    doc["DCGM GPU Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["error_id"] = json!(51);
    let with_id = map_diag_result(&diag_results(&doc).unwrap()[0], &run()).unwrap();
    assert_eq!(with_id[0].code, Some(51));
}
