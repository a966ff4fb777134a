//! The node agent reading the BMC's event log: a fake `ipmitool` prints a recorded `sel elist`
//! (tests/fixtures/ipmitool). Every record arrives once as a `bmc_event`, a second read sends
//! nothing, two records more are two signals more, and the server files a power supply's lost AC
//! under hardware/power.

use crate::agent::{Node, SIGNAL_IDS, wait_count};
use crate::helpers::spawn_app;

const SEL: &str = include_str!("../fixtures/ipmitool/actsys-first-records.txt");

const FROM_THE_SEL: &str = "SELECT coalesce(sum(repeat_count), 0) FROM events WHERE cluster = 'c1' AND node = 'n1' AND kind = 'bmc_event' AND attributes->>'source' = 'agent:ipmi-sel'";

#[tokio::test]
async fn the_bmc_event_log_arrives_record_by_record_once_and_is_classified() {
    let app = spawn_app().await;
    let node = Node::new(&app, &app.address).await;
    let log = node.dir.join("sel.txt");
    let fake = node.fake_tool("ipmitool", "sel elist", &log);
    let args = [
        "--no-kmsg",
        "--sel-interval",
        "300",
        "--ipmitool",
        fake.to_str().unwrap(),
    ];
    let records: Vec<&str> = SEL.lines().collect();
    assert_eq!(records.len(), 50);

    // The first read sends every record the log holds.
    std::fs::write(&log, records[..48].join("\n") + "\n").unwrap();
    node.oneshot(&args).await;
    wait_count(&app, SIGNAL_IDS, 48, &node).await;
    assert_eq!(app.count(FROM_THE_SEL).await, 48);

    // Read again: nothing new, nothing resent.
    node.oneshot(&args).await;
    let s = node.status();
    assert_eq!(
        (
            s["counters"]["sent_accepted"].as_u64(),
            s["counters"]["sent_duplicates"].as_u64(),
            s["counters"]["sel_polls"].as_u64(),
            s["counters"]["sel_records"].as_u64()
        ),
        (Some(48), Some(0), Some(2), Some(48)),
        "{s}"
    );
    assert_eq!(app.count(SIGNAL_IDS).await, 48);

    // Two records more: two signals more.
    std::fs::write(&log, SEL).unwrap();
    node.oneshot(&args).await;
    wait_count(&app, SIGNAL_IDS, 50, &node).await;
    assert_eq!(app.count(FROM_THE_SEL).await, 50);
    let s = node.status();
    assert_eq!(
        (
            s["counters"]["sent_accepted"].as_u64(),
            s["counters"]["sent_duplicates"].as_u64(),
            s["counters"]["sel_records"].as_u64(),
            s["counters"]["sel_poll_failures"].as_u64()
        ),
        (Some(50), Some(0), Some(50), Some(0)),
        "{s}"
    );

    // `  29 | 06/04/2014 | 09:49:51 | Power Supply PS1 Status | Power Supply AC lost | Asserted`:
    // two minutes from the record before it and days from the next, so a row of its own.
    let row: Vec<(String, String)> = sqlx::query_as(
        "SELECT e.message, f.category || '/' || f.component FROM events e JOIN failures f ON e.id = ANY(f.signal_ids)
         WHERE e.kind = 'bmc_event' AND e.attributes->>'sel_record_id' = '0x29'
           AND e.occurred_at >= '2014-06-03' AND e.occurred_at < '2014-06-06'",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(
        row,
        [(
            "Power Supply PS1 Status | Power Supply AC lost | Asserted".to_string(),
            "hardware/power".to_string()
        )]
    );
}
