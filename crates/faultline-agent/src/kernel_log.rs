//! Where the kernel log comes from: `/dev/kmsg` (or a file of its records), or the systemd
//! journal through `journalctl`. Both give kernel records; what differs is how the position is
//! kept (a sequence number, a journal cursor) and how the source starts again.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::journal::{JournalConfig, JournalPoll, JournalRecord, JournalSource};
use crate::kmsg::{KmsgRecord, Poll, Source, parse_record};
use crate::state::Position;

/// One record and, from the journal, its cursor and when journald received it.
pub struct Read {
    pub record: KmsgRecord,
    pub cursor: Option<String>,
    /// Microseconds since the epoch (`__REALTIME_TIMESTAMP`).
    pub realtime_us: Option<u64>,
}

impl Read {
    /// The boot's start as this record dates it: from journald's clock when the journal gives it
    /// (right for an earlier boot too), else `boot_time` (this boot's, from /proc/stat).
    pub fn boot_time(&self, boot_time: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
        self.realtime_us
            .and_then(|t| chrono::DateTime::from_timestamp_micros(t as i64 - self.record.ts_us as i64))
            .unwrap_or(boot_time)
    }
}

pub enum Batch {
    Records(Vec<Read>),
    /// The kernel overwrote records before they were read.
    Overrun,
    /// Nothing new now.
    Idle,
    /// The input has ended (`--oneshot` over the journal).
    End,
}

/// How the journal is read (`--journal`).
#[derive(Debug, Clone)]
pub struct JournalOptions {
    pub journalctl: String,
    pub directory: Option<PathBuf>,
}

pub enum KernelLog {
    Kmsg(Source),
    Journal {
        /// None after journalctl ended: started again, after the position, at the next poll.
        source: Option<JournalSource>,
        config: JournalConfig,
    },
}

impl KernelLog {
    /// The journal, from just after `pos` when it is of this boot, else from the boot's first
    /// record. `follow`: keep reading as records arrive (otherwise stop at the end).
    pub fn journal(options: &JournalOptions, boot_id: &str, pos: &Position, follow: bool) -> KernelLog {
        KernelLog::Journal {
            source: None,
            config: JournalConfig {
                journalctl: options.journalctl.clone(),
                directory: options.directory.clone(),
                after_cursor: resume_cursor(boot_id, pos),
                follow,
                boot_id: Some(boot_id.to_string()),
            },
        }
    }

    /// The next records. Errors are the source's (journalctl's exit and why); the caller waits and
    /// polls again, which starts journalctl again.
    pub fn poll(&mut self) -> io::Result<Batch> {
        match self {
            KernelLog::Kmsg(source) => Ok(match source.poll()? {
                Poll::Records(texts) => Batch::Records(
                    texts
                        .iter()
                        .filter_map(|t| parse_record(t))
                        .map(|record| Read {
                            record,
                            cursor: None,
                            realtime_us: None,
                        })
                        .collect(),
                ),
                Poll::Overrun => Batch::Overrun,
                Poll::Idle => Batch::Idle,
            }),
            KernelLog::Journal { source, config } => {
                let running = match source {
                    Some(s) => s,
                    None => source.insert(JournalSource::spawn(config)?),
                };
                match running.poll()? {
                    JournalPoll::Records(records) => {
                        if let Some(last) = records.last() {
                            // A restart of journalctl goes on after what was read.
                            config.after_cursor = Some(last.cursor.clone());
                        }
                        Ok(Batch::Records(records.into_iter().map(journal_read).collect()))
                    }
                    JournalPoll::Idle => Ok(Batch::Idle),
                    JournalPoll::Ended(exit) => {
                        *source = None;
                        if exit.success() && !config.follow {
                            Ok(Batch::End)
                        } else {
                            Err(io::Error::other(exit.to_string()))
                        }
                    }
                }
            }
        }
    }

    pub fn idle_wait(&self) -> Duration {
        match self {
            KernelLog::Kmsg(s) => s.idle_wait(),
            KernelLog::Journal { source, .. } => source
                .as_ref()
                .map_or(Duration::from_millis(200), JournalSource::idle_wait),
        }
    }

    /// Starts over from `pos` (what was read after it is read again).
    pub fn reopen(self, boot_id: &str, pos: &Position) -> io::Result<KernelLog> {
        match self {
            KernelLog::Kmsg(s) => s.reopen().map(KernelLog::Kmsg),
            KernelLog::Journal { mut config, .. } => {
                config.after_cursor = resume_cursor(boot_id, pos);
                Ok(KernelLog::Journal { source: None, config })
            }
        }
    }
}

/// The saved cursor, when it is of this boot (another boot's position starts this boot afresh).
fn resume_cursor(boot_id: &str, pos: &Position) -> Option<String> {
    (pos.boot_id == boot_id).then(|| pos.cursor.clone()).flatten()
}

pub fn journal_read(r: JournalRecord) -> Read {
    Read {
        record: KmsgRecord {
            level: r.level,
            facility: r.facility,
            // The journal keeps no kernel sequence number; its cursor is the position.
            seq: 0,
            ts_us: r.ts_us,
            message: r.message,
            dict: r.dict,
        },
        cursor: Some(r.cursor),
        realtime_us: r.realtime_us,
    }
}
