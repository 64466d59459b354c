//! Named bounds of the write path, with units and the reason for each, checked against
//! each other at compile time.

/// SQL Server's default "Max Async IO" was 32 (later raised to 255): enough to keep a flash
/// device busy, few enough that concurrent reads are not starved.
pub const MAX_ASYNC_IO_DEFAULT: usize = 32;
/// The io crate's deepest queue; a checkpoint at this depth pins
/// `MAX_ASYNC_IO_MAX * CHECKPOINT_WRITE_BYTES_MAX` = 1 GiB of write buffers.
pub const MAX_ASYNC_IO_MAX: usize = 1024;
/// Neighbouring pages of one file coalesce into writes of at most this size: large enough
/// to amortize a request, small enough that `max_async_io` of them stay a bounded amount
/// of memory in flight (32 MiB at the default).
pub const CHECKPOINT_WRITE_BYTES_MAX: usize = 1 << 20;
/// A checkpoint appends a partition's new pages to the partition's last file until the
/// file would pass this size, then starts a new file: few files per partition (each open
/// file costs a scan a descriptor and an engine slot), none so large that a rebuild or a
/// copy of one takes long.
pub const CHECKPOINT_FILE_BYTES_MAX: u64 = 1 << 30;
/// While a scan of the process is reading, a paced checkpoint keeps at most one write in
/// flight per this many scan reads in flight (and at least one). A device serves queued
/// requests roughly in turn, so 4 reads per write leaves a scan about 4/5 of the device —
/// the 80 % issue 11 asks a concurrent scan to keep.
pub const PACED_READS_PER_WRITE: u64 = 4;
/// A paced checkpoint stays paced this long after it last saw a scan read: a scan's next
/// pass, or a query's next scan, follows within it (measured gaps of tens of ms in
/// `bench checkpoint`); without it the checkpoint filled the device queue (all
/// `max_async_io` writes) in each gap and the next scan started behind them.
pub const PACED_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// Committed rows held in memory (the deltas) before INSERT refuses more: past this the
/// write path first checkpoints, and a statement that still does not fit fails with an
/// error naming this limit. 2 GiB: a tenth of the 24 GB machines flashscan is measured on,
/// and about two seconds of checkpoint writes on their disk.
pub const DELTA_BYTES_MAX_DEFAULT: u64 = 2 << 30;
/// An automatic checkpoint runs after an INSERT once the deltas hold this much (half the
/// bound, so the checkpoint starts well before inserts would be refused).
pub const CHECKPOINT_DELTA_BYTES_DEFAULT: u64 = DELTA_BYTES_MAX_DEFAULT / 2;
/// An automatic checkpoint runs once this much log was written since the redo point:
/// recovery replays at most about this much (seconds at the log's read speed), and the
/// log's disk holds about this much plus a segment.
pub const CHECKPOINT_LOG_BYTES_DEFAULT: u64 = 1 << 30;
/// An automatic checkpoint runs after an INSERT when the last one is older than this and
/// rows wait in the deltas: a quiet database does not keep its rows only in the log for
/// long. Checked when an INSERT commits (a database nobody writes has nothing to write).
pub const CHECKPOINT_INTERVAL_S_DEFAULT: u64 = 300;

const _: () = assert!(MAX_ASYNC_IO_DEFAULT <= MAX_ASYNC_IO_MAX);
const _: () = assert!(MAX_ASYNC_IO_MAX <= flashscan_io::limits::QUEUE_DEPTH_MAX as usize);
const _: () = assert!(CHECKPOINT_WRITE_BYTES_MAX <= flashscan_io::limits::IO_SIZE_BYTES_MAX);
const _: () = assert!(MAX_ASYNC_IO_MAX * CHECKPOINT_WRITE_BYTES_MAX <= flashscan_io::limits::ARENA_BYTES_MAX);
const _: () = assert!(CHECKPOINT_WRITE_BYTES_MAX % flashscan_storage::PAGE_SIZE_BYTES == 0);
const _: () = assert!(PACED_READS_PER_WRITE >= 1);
const _: () = assert!(CHECKPOINT_FILE_BYTES_MAX % flashscan_storage::PAGE_SIZE_BYTES as u64 == 0);
const _: () = assert!(CHECKPOINT_FILE_BYTES_MAX / (flashscan_storage::PAGE_SIZE_BYTES as u64) < u32::MAX as u64);
const _: () = assert!(CHECKPOINT_DELTA_BYTES_DEFAULT < DELTA_BYTES_MAX_DEFAULT);
