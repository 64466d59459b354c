//! Named bounds of the buffer pool, checked against each other at compile time.

/// Every frame holds one 8 KB page (the page size of heap pages and B+tree nodes).
pub const FRAME_SIZE_BYTES: usize = 8192;
/// Frames start at this alignment so O_DIRECT transfers may target them.
pub const FRAME_ALIGN_BYTES: usize = 4096;
/// Fewer frames than this cannot hold a B+tree path plus the pages a lookup pins.
pub const POOL_FRAMES_MIN: u32 = 16;
/// 64 GiB of frames: more than the machines we target have, and frame numbers fit u32.
pub const POOL_BYTES_MAX: u64 = 64 << 30;
/// Shards of the page table: enough that two cores rarely meet on one mutex.
pub const PAGE_TABLE_SHARD_COUNT: usize = 64;
/// The clock gives up after this many full turns finding every frame pinned.
pub const CLOCK_TURNS_MAX: u32 = 3;
/// A scan ring holds at least this many frames (one read-ahead batch and the page in use).
pub const RING_FRAMES_MIN: u32 = 4;

/// Neighbouring dirty pages written as one request at most (256 KB: large enough for the
/// device's sequential rate, small enough to keep `max_outstanding_writes` meaningful).
pub const WRITE_PAGES_MAX: u32 = 32;
/// Bound on writes in flight for `write_dirty` (SQL Server's "max async IO" tops at 255;
/// the I/O layer's queue depth bounds us).
pub const WRITE_OUTSTANDING_MAX: u32 = 1024;
/// Bound on one streaming read (a scan extent or a column store segment piece).
pub const STREAM_IO_SIZE_BYTES_MAX: usize = flashscan_io::limits::IO_SIZE_BYTES_MAX;

const _: () = assert!(FRAME_SIZE_BYTES % FRAME_ALIGN_BYTES == 0);
const _: () = assert!(WRITE_OUTSTANDING_MAX <= flashscan_io::limits::QUEUE_DEPTH_MAX);
const _: () = assert!(WRITE_PAGES_MAX as usize * FRAME_SIZE_BYTES <= flashscan_io::limits::IO_SIZE_BYTES_MAX);
const _: () = assert!(FRAME_ALIGN_BYTES.is_power_of_two());
const _: () = assert!(PAGE_TABLE_SHARD_COUNT.is_power_of_two());
const _: () = assert!(POOL_BYTES_MAX / (FRAME_SIZE_BYTES as u64) <= u32::MAX as u64);
const _: () = assert!(RING_FRAMES_MIN < POOL_FRAMES_MIN);
