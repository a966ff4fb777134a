//! The node agent reading the kernel log from the systemd journal (`--journal`) where /dev/kmsg is
//! not readable: real journal files (written by systemd-journal-remote) read by the real
//! journalctl. The kernel's lines arrive once; a restart goes on after the saved cursor; lines
//! the journal receives while the agent follows it arrive too; another boot's lines are not this
//! boot's; after a reboot, the lines the previous boot logged after the cursor arrive too.

#[path = "../../crates/faultline-agent/tests/support/journal_builder.rs"]
pub(crate) mod journal_builder;

use journal_builder::{JournalEntry, journal_remote, journalctl_available, write_journal};

use crate::agent::{Node, SIGNAL_IDS, wait_count};
use crate::helpers::spawn_app;

const BOOT: &str = "7c3f4a5e-1b2d-4c6e-8f90-a1b2c3d4e5f6";
const OTHER_BOOT: &str = "0d9e8f7a-6b5c-4d3e-2f1a-0b9c8d7e6f5a";
const NEW_BOOT: &str = "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b";

/// XID 79 of the GPU on bus `0000:<bus>:00` at `secs` after boot, as journald stores the line
/// (the new boot started an hour after the first).
fn xid(boot: &str, secs: u64, bus: u8) -> JournalEntry {
    let boot_at = if boot == NEW_BOOT { 1_764_703_600 } else { 1_764_700_000 };
    JournalEntry::kernel(
        boot,
        (boot_at + secs) * 1_000_000,
        secs * 1_000_000,
        3,
        format!("NVRM: Xid (PCI:0000:{bus:02x}:00): 79, pid=1234, name=python, GPU has fallen off the bus."),
    )
}

/// A node in boot BOOT whose kernel log is a journal directory (created empty): the node, the
/// directory and the journal file to write. Needs journalctl and systemd-journal-remote.
async fn journal_node(app: &crate::helpers::TestApp) -> (Node, std::path::PathBuf, std::path::PathBuf) {
    assert!(
        journal_remote().is_some() && journalctl_available("journalctl"),
        "needs journalctl and systemd-journal-remote (Debian packages systemd, systemd-journal-remote)"
    );
    let node = Node::new(app, &app.address).await;
    std::fs::write(node.dir.join("boot_id"), format!("{BOOT}\n")).unwrap();
    let journal = node.dir.join("journal");
    std::fs::create_dir_all(&journal).unwrap();
    let file = journal.join("kernel.journal");
    (node, journal, file)
}

#[tokio::test]
async fn the_journal_gives_the_kernel_lines_once_and_a_restart_goes_on_after_its_cursor() {
    let app = spawn_app().await;
    let (node, journal, file) = journal_node(&app).await;
    // Another boot's line first (the journal keeps every boot), then this boot's: two XIDs and a
    // line that is not a signal.
    write_journal(
        &file,
        &[
            xid(OTHER_BOOT, 10, 0x1b),
            xid(BOOT, 20, 0x3b),
            JournalEntry::kernel(
                BOOT,
                1_764_700_021_000_000,
                21_000_000,
                6,
                "EXT4-fs (nvme0n1p1): mounted filesystem",
            ),
            xid(BOOT, 22, 0x5d),
        ],
    )
    .unwrap();
    let args = ["--journal", "--journal-directory", journal.to_str().unwrap()];
    node.oneshot(&args).await;
    wait_count(&app, SIGNAL_IDS, 2, &node).await;
    assert_eq!(
        // (The two are 2 s apart on one node: the server stores them as one row counting two.)
        app.count("SELECT sum(repeat_count) FROM events WHERE kind = 'xid' AND code = 79 AND attributes->>'source' = 'agent:journal' AND attributes->>'boot_id' = '7c3f4a5e-1b2d-4c6e-8f90-a1b2c3d4e5f6' AND attributes->>'journal_cursor' LIKE 's=%'").await,
        2
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE attributes->>'pci_bus_id' = '0000:1b:00.0'")
            .await,
        0,
        "the other boot's line"
    );
    let s = node.status();
    assert_eq!(s["counters"]["kmsg_records"], 3, "{s}");
    assert!(s["position"]["cursor"].as_str().unwrap().starts_with("s="), "{s}");

    // Two more lines; a restart reads only those.
    write_journal(&file, &[xid(BOOT, 30, 0x86), xid(BOOT, 31, 0x87)]).unwrap();
    node.oneshot(&args).await;
    wait_count(&app, SIGNAL_IDS, 4, &node).await;
    let s = node.status();
    assert_eq!(
        (
            s["counters"]["kmsg_records"].as_u64(),
            s["counters"]["sent_accepted"].as_u64(),
            s["counters"]["sent_duplicates"].as_u64()
        ),
        (Some(5), Some(4), Some(0)),
        "{s}"
    );

    // Followed: a line the journal receives while the agent runs arrives.
    let mut agent = node.start(&args);
    node.wait_status("journalctl following", |s| {
        s["pid"].as_u64() == Some(u64::from(agent.id()))
    })
    .await;
    write_journal(&file, &[xid(BOOT, 40, 0xb1)]).unwrap();
    wait_count(&app, SIGNAL_IDS, 5, &node).await;
    // SIGKILL only once the agent has recorded the server's acknowledgement: a kill between the
    // server's commit and the agent's fsync'd ack rightly resends the line (a duplicate), which
    // is not what this part tests.
    node.wait_status("the followed line acknowledged", |s| {
        s["counters"]["sent_accepted"].as_u64() == Some(5) && s["spool_records"].as_u64() == Some(0)
    })
    .await;
    agent.kill();
    assert_eq!(node.status()["counters"]["sent_duplicates"], 0);

    // The GPU on bus c1 fails twice while the agent is down, then the node reboots: the ring
    // buffer is gone, the journal kept both lines, and they arrive as that boot's, dated when
    // journald received them; so does the new boot's first line.
    write_journal(
        &file,
        &[xid(BOOT, 50, 0xc1), xid(BOOT, 51, 0xc1), xid(NEW_BOOT, 5, 0x3b)],
    )
    .unwrap();
    std::fs::write(node.dir.join("boot_id"), format!("{NEW_BOOT}\n")).unwrap();
    node.oneshot(&args).await;
    wait_count(&app, SIGNAL_IDS, 8, &node).await;
    // The first boot's seven XIDs, 20 s to 51 s after it started, are one burst on the server
    // (no gap over 60 s), ending with the late line's time as journald stamped it.
    assert_eq!(
        app.count("SELECT sum(repeat_count) FROM events WHERE kind = 'xid' AND occurred_at < to_timestamp(1764700100)")
            .await,
        7
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE last_occurred_at = to_timestamp(1764700051)")
            .await,
        1
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE attributes->>'boot_id' = '1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b'")
            .await,
        1
    );
    let s = node.status();
    assert_eq!(s["position"]["boot_id"], NEW_BOOT);
    assert_eq!(s["counters"]["sent_duplicates"], 0, "{s}");
}

/// An agent that read nothing of a boot (journald had none of its kernel lines yet when the agent
/// read), then a reboot: the lines that boot logged later arrive, as that boot's. The agent records
/// the boot it reads before its first record, so it finishes that boot from its first record.
#[tokio::test]
async fn a_boot_the_agent_read_nothing_of_is_finished_after_a_reboot() {
    let app = spawn_app().await;
    let (node, journal, file) = journal_node(&app).await;
    write_journal(&file, &[xid(OTHER_BOOT, 10, 0x1b)]).unwrap();
    let args = ["--journal", "--journal-directory", journal.to_str().unwrap()];
    node.oneshot(&args).await;
    assert_eq!(node.status()["counters"]["kmsg_records"], 0);

    // The boot's XID reaches the journal after the agent read it; the node reboots.
    write_journal(&file, &[xid(BOOT, 20, 0x3b), xid(NEW_BOOT, 5, 0x5d)]).unwrap();
    std::fs::write(node.dir.join("boot_id"), format!("{NEW_BOOT}\n")).unwrap();
    node.oneshot(&args).await;
    wait_count(&app, SIGNAL_IDS, 2, &node).await;
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE attributes->>'boot_id' = '7c3f4a5e-1b2d-4c6e-8f90-a1b2c3d4e5f6' AND attributes->>'pci_bus_id' = '0000:3b:00.0'")
            .await,
        1,
        "the first boot's XID"
    );
    assert_eq!(node.status()["counters"]["kmsg_records"], 2);
}

/// A crash after a line's signal was spooled and before the position moved past it, then a
/// reboot: the new boot reads the line again from the journal, and sends it as the first reading
/// did, attributed to the board the boot had (same identity, same id): a duplicate to the server,
/// not a second signal.
#[tokio::test]
async fn a_line_read_again_after_a_crash_and_a_reboot_is_a_duplicate() {
    const P100: &str = include_str!("../fixtures/nvidia-smi/p100-two-gpus.xml");
    let app = spawn_app().await;
    let (node, journal, file) = journal_node(&app).await;
    let report = node.dir.join("report.xml");
    std::fs::write(&report, P100).unwrap();
    let fake = node.fake_tool("nvidia-smi", "-q -x", &report);
    let args = [
        "--journal",
        "--journal-directory",
        journal.to_str().unwrap(),
        "--gpu-interval",
        "300",
        "--nvidia-smi",
        fake.to_str().unwrap(),
    ];
    write_journal(
        &file,
        &[JournalEntry::kernel(
            BOOT,
            1_764_700_001_000_000,
            1_000_000,
            6,
            "Linux version 6.8.0",
        )],
    )
    .unwrap();
    node.oneshot(&args).await;
    let position = node.dir.join("state").join("position.json");
    let before_the_line = std::fs::read(&position).unwrap();

    // The GPU on bus 04:00 (index 0, serial 0320717030197) falls off the bus; its line is sent.
    write_journal(&file, &[xid(BOOT, 30, 0x04)]).unwrap();
    node.oneshot(&args).await;
    wait_count(&app, SIGNAL_IDS, 1, &node).await;
    // A crash after the spool, before the position: the position is the one before the line. The
    // board is replaced and the node boots.
    std::fs::write(&position, before_the_line).unwrap();
    std::fs::write(
        &report,
        P100.replacen("0320717030197", "0321017041822", 1).replacen(
            "GPU-28604e81-21ec-cc48-6759-bf2648b22e16",
            "GPU-9a1c3e55-0b7d-4f2e-8c61-d2a7b90e4f13",
            1,
        ),
    )
    .unwrap();
    write_journal(
        &file,
        &[JournalEntry::kernel(
            NEW_BOOT,
            1_764_703_601_000_000,
            1_000_000,
            6,
            "Linux version 6.8.0",
        )],
    )
    .unwrap();
    std::fs::write(node.dir.join("boot_id"), format!("{NEW_BOOT}\n")).unwrap();
    node.oneshot(&args).await;
    node.wait_status("the line sent again", |s| {
        s["counters"]["sent_duplicates"].as_u64() == Some(1) && s["spool_records"].as_u64() == Some(0)
    })
    .await;
    assert_eq!(app.count("SELECT count(*) FROM events WHERE code = 79").await, 1);
    assert_eq!(
        app.count(
            "SELECT count(*) FROM events WHERE code = 79 AND attributes->>'serial' = '0320717030197' AND gpu_index = 0"
        )
        .await,
        1,
        "the board of the boot the line was logged in"
    );
}
