//! The host's parts as root causes: machine checks, EDAC, AER, block-layer and IPMI SEL lines
//! posted as signals are filed under cpu, host_memory, pcie, disk and baseboard, GPU lines keep
//! their GPU components, and a database whose failures were classified `host` before the host
//! components existed keeps reading them and gets them re-classified by its catalog rebuild.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, event, rebuilt, spawn_app, uuid_n};

const WINDOW: &str = "from=2026-11-01T00:00:00Z&to=2026-11-03T00:00:00Z";

/// One line per part, each from public sources (the corpus, `src/classify/corpus/phrases.tsv`,
/// names them too), and the component it must be filed under.
const LINES: &[(&str, &str, &str)] = &[
    // Linux arch/x86/kernel/cpu/mce/core.c (print_mce), as printed in public dmesg output.
    (
        "syslog",
        "mce: [Hardware Error]: CPU 2: Machine Check: 0 Bank 3: cc5eb2c000100135",
        "cpu",
    ),
    // Linux drivers/edac/edac_mc.c error report.
    (
        "syslog",
        "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0",
        "host_memory",
    ),
    // Linux Documentation/PCI/pcieaer-howto.rst, AER error output example.
    (
        "syslog",
        "0000:50:00.0: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer, (Requester ID)",
        "pcie",
    ),
    // Linux block layer (blk_update_request).
    (
        "syslog",
        "blk_update_request: I/O error, dev sda, sector 123456",
        "disk",
    ),
    // ipmitool sel elist: Management Subsystem Health offset of ipmitool include/ipmitool/ipmi_sel.h.
    (
        "bmc_event",
        "Management Subsystem Health #0x80 | Management controller off-line | Asserted",
        "baseboard",
    ),
    // NVIDIA Xid catalog: Xid 79 (GPU), and nvidia-smi's uncorrectable ECC of the GPU's memory.
    (
        "xid",
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
        "gpu",
    ),
    (
        "health_check",
        "GPU 3: Volatile Uncorrectable ECC errors: 2 (DBE)",
        "gpu_memory",
    ),
];

/// One signal per line, each on its own node (one failure each).
fn signals() -> Value {
    let events: Vec<Value> = LINES
        .iter()
        .enumerate()
        .map(|(i, (kind, message, _))| {
            let code = if *kind == "xid" { json!(79) } else { Value::Null };
            event(
                &uuid_n(i as u32 + 1),
                json!({"node": format!("n{:03}", i + 1), "kind": kind, "code": code, "message": message}),
            )
        })
        .collect();
    json!({ "events": events })
}

/// (component, failures) of the hardware category in the window's root causes.
async fn hardware_components(app: &TestApp) -> Vec<(String, u64)> {
    let (status, rc) = app
        .get(ADMIN_TOKEN, &format!("/v1/analytics/root-causes?{WINDOW}"))
        .await;
    assert_eq!(status, 200, "{rc}");
    let hardware = rc["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == "hardware")
        .unwrap()
        .clone();
    let mut out: Vec<(String, u64)> = hardware["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["component"].as_str().unwrap().to_string(),
                c["failures"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

fn expected() -> Vec<(String, u64)> {
    let mut want: Vec<(String, u64)> = LINES.iter().map(|(_, _, c)| (c.to_string(), 1)).collect();
    want.sort();
    want
}

#[tokio::test]
async fn host_lines_are_filed_under_their_part_and_gpu_lines_keep_theirs() {
    let app = spawn_app().await;
    let agent = app.token("agent", None).await;
    let (status, body) = app.post_events(&agent, &signals()).await;
    assert_eq!(status, 200, "{body}");

    assert_eq!(hardware_components(&app).await, expected());

    // The failure list filters by the new components, and every one is a hardware cause.
    for (_, message, component) in LINES {
        let (status, list) = app
            .get(ADMIN_TOKEN, &format!("/v1/failures?component={component}&{WINDOW}"))
            .await;
        assert_eq!(status, 200, "{list}");
        let items = list["failures"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{component}: {list}");
        assert_eq!(items[0]["root_cause"]["category"], "hardware", "{message}");
    }
    // `memory` alone names no component: the host's is host_memory, the GPU's gpu_memory.
    let (status, _) = app.get(ADMIN_TOKEN, "/v1/failures?component=memory").await;
    assert_eq!(status, 400);
}

/// The catalog as migrations 0002 and 0008 seeded it, before the host components.
async fn restore_the_catalog_before_host_components(app: &TestApp) {
    let terms = include_str!("../../migrations/0008_lexicon.sql");
    let insert = &terms[terms.find("INSERT INTO").unwrap()..];
    let mut tx = app.db.begin().await.unwrap();
    sqlx::query("DELETE FROM classification_terms")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("DELETE FROM classification_rules")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::raw_sql(include_str!("../../migrations/0002_classification_rules.sql"))
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(insert.to_string()))
        .execute(&mut *tx)
        .await
        .unwrap();
    // A new version: the server loads the restored catalog at its next batch.
    sqlx::query("UPDATE catalog_state SET version = version + 1")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn an_existing_database_keeps_its_host_rows_and_its_rebuild_files_them_under_the_parts() {
    let app = spawn_app().await;
    restore_the_catalog_before_host_components(&app).await;
    // An admin's own term: the migration leaves it as the admin wrote it.
    sqlx::query("UPDATE classification_terms SET builtin = false, updated_by = 'admin' WHERE term = 'riser'")
        .execute(&app.db)
        .await
        .unwrap();

    let agent = app.token("agent", None).await;
    let (status, body) = app.post_events(&agent, &signals()).await;
    assert_eq!(status, 200, "{body}");
    // Before: the host's lines are `host`, and the answers read them.
    let before = hardware_components(&app).await;
    let host = before.iter().find(|(c, _)| c == "host").map(|(_, n)| *n);
    assert_eq!(host, Some(5), "{before:?}");
    let (status, list) = app
        .get(ADMIN_TOKEN, &format!("/v1/failures?component=host&{WINDOW}"))
        .await;
    assert_eq!(
        (status, list["failures"].as_array().map(Vec::len)),
        (200, Some(5)),
        "{list}"
    );

    // The migration, as it runs on an existing database at start-up.
    let version_before: i64 = app.count("SELECT version FROM catalog_state").await;
    sqlx::raw_sql(include_str!("../../migrations/0025_host_components.sql"))
        .execute(&app.db)
        .await
        .unwrap();
    let version: i64 = app.count("SELECT version FROM catalog_state").await;
    assert_eq!(
        version,
        version_before + 1,
        "a database with failures gets a new version"
    );
    let rebuild = rebuilt(&app.address, version).await;
    assert_eq!(rebuild["state"], "done", "{rebuild}");

    assert_eq!(hardware_components(&app).await, expected());
    let riser: String = sqlx::query_scalar("SELECT component FROM classification_terms WHERE term = 'riser'")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(riser, "host", "an admin's term is kept");
    let dimm: String = sqlx::query_scalar("SELECT component FROM classification_terms WHERE term = 'dimm'")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(dimm, "host_memory");
}
