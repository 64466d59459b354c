//! flashscan's write-ahead log.
//!
//! - [`record`]: what is logged (insert of a row into a page, delete of a row, commit,
//!   abort, checkpoint begin/end) and its bytes;
//! - [`block`]: 4 KiB checksummed log blocks, written once;
//! - [`files`]: segment files (preallocated, O_EXCL|O_NOFOLLOW, recycled), the control file
//!   that names the database, the lock;
//! - [`writer`]: [`Wal`]: appends, group commit with several flushes in flight (durable
//!   published in LSN order), the log writer thread, checkpoints;
//! - [`durability`]: strict or delayed commits ([`Durability`]) and the delayed flush's
//!   bounds;
//! - [`reader`]: the recovery scan (torn tail vs corruption) and the [`Redo`] iterator.
//!
//! Byte layouts: docs/formats.md, "Write-ahead log". The commit protocol:
//! docs/architecture.md, "Commit protocol".
//!
//! A table writer's use:
//! ```no_run
//! # use flashscan_wal::*;
//! # fn f(wal: &Wal) -> Result<(), WalError> {
//! let txn = wal.begin();
//! let a = wal.append(&Record::Insert(InsertRow { txn, table_id: 1, partition: 0, page_no: 7, row: b"row".to_vec() }))?;
//! // put the row on page 7, set the page's LSN to a.end (the buffer pool writes the page
//! // only once wal.durable_lsn() >= a.end)
//! wal.commit(txn)?; // returns once the commit record is durable
//! # Ok(()) }
//! ```

pub mod block;
pub mod config;
pub mod durability;
pub mod error;
pub mod files;
pub mod limits;
pub mod lsn;
pub mod reader;
pub mod record;
pub mod writer;

pub use config::{psync_engine_factory, EngineFactory, SyncMethod, WalConfig};
pub use durability::Durability;
pub use error::WalError;
pub use files::DatabaseIdentity;
pub use lsn::{Lsn, SegmentPosition, TxnId};
pub use reader::{scan, scan_dir, LogEnd, LoggedRecord, Redo, RedoChange, RedoDelete, RedoInsert, Scan};
pub use record::{DeleteRow, InsertRow, Record};
pub use writer::{Appended, Durable, LogImage, PendingFlush, Wal, WalStats, FIRST_RECORD_LSN};
