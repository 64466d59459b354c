//! flashscan's write path on top of the write-ahead log (`flashscan-wal`).
//!
//! - [`init`]: `flashscan init`: an empty database with its log;
//! - [`lock`]: one writer process per database, and who holds it;
//! - [`delta`]: committed rows not yet in the table's pages, per partition, as heap pages
//!   in memory (SQL Server's delta store), which scans merge;
//! - [`write_path`]: [`WritePath`]: CREATE/DROP TABLE, INSERT as one transaction (every
//!   row logged, one durable commit, then visible), and redo of the log into the deltas;
//! - [`insert`]: the one commit protocol of SQL INSERT, UPDATE and DELETE, prepared
//!   inserts (the embedded API) and `BEGIN … COMMIT` transactions, waited for on a thread
//!   or awaited by an async caller ([`PendingCommit`]);
//! - [`key_index`]: SQL indexes (CREATE INDEX, PRIMARY KEY, UNIQUE): keys → row ids in
//!   memory, maintained by every commit, checked for uniqueness when rows are staged;
//! - [`row_id`]: how DELETE and UPDATE name a row (page and slot, or the LSN of a delta
//!   row's insert); [`deleted`]: a table's deleted rows with the commit that deleted each,
//!   which scans skip as their snapshot sees them; `table_lock`: the change lock an
//!   UPDATE or DELETE holds on its table until its transaction ends;
//! - [`own_writes`]: a transaction reads its own staged rows and deletes, and may change
//!   a row it changed before;
//! - `gate`: the commit gate that keeps a checkpoint's redo point out of a commit;
//! - `snapshot`: [`ReadSnapshot`], a statement's view of every heap table, each
//!   transaction whole or not at all;
//! - [`alter`]: ALTER TABLE's column and name changes (ADD / DROP COLUMN rewrite the
//!   table; RENAME and SET DEFAULT change the catalog);
//! - [`checkpoint`]: the deltas written as new heap pages, one catalog commit with the new
//!   page counts and the redo point, then the log recycled;
//! - [`limits`]: the delta's memory bound and the automatic checkpoint's triggers;
//! - [`unflushed`]: for readers that do not merge the delta (scan, lookup, rebuild, index
//!   create, drop): how many committed rows of a table are still only in the log.
//!
//! Why a delta in memory and not pages in the buffer pool: the one page path (buffer pool
//! frames that can be dirty, with a page-LSN hook) is not built yet; the delta is the
//! smallest thing that makes an acknowledged row visible and recoverable without it. The
//! log records are the same either way (a row in the page's own encoding), so moving rows
//! into dirty pool pages later needs no log format change. docs/architecture.md, "Write
//! path", has the whole protocol.

pub mod alter;
pub mod checkpoint;
pub mod deleted;
pub mod delta;
pub mod error;
mod gate;
mod index_write;
pub mod init;
pub mod insert;
pub mod key_index;
pub mod limits;
pub mod lock;
pub mod own_writes;
pub mod sequences;
/// A row's id lives with the deleted rows file that stores it (crates/storage).
pub use flashscan_storage::row_id;
mod table_statistics;
mod snapshot;
mod table_lock;
pub mod unflushed;
pub mod write_path;

pub use alter::{AlterOutcome, Alteration, ColumnFill};
pub use checkpoint::{checkpoint, CheckpointOptions, CheckpointReport};
pub use limits::{MAX_ASYNC_IO_DEFAULT, MAX_ASYNC_IO_MAX};
pub use delta::TableDelta;
pub use error::WriteError;
/// How a commit is acknowledged (strict or delayed), the log's concept.
pub use flashscan_wal::Durability;
pub use init::{init_database, InitOptions, InitReport};
pub use insert::{PendingCommit, PreparedInsert, Transaction};
pub use lock::WriterLock;
pub use row_id::RowId;
pub use snapshot::{Isolation, ReadSnapshot, SnapshotTable};
pub use table_lock::LOCK_WAIT_MAX;
pub use unflushed::unflushed_rows;
pub use write_path::{recover, AutoCheckpointStats, NewTable, RecoveryReport, WriteLimits, WritePath};
