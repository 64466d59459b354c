//! Named bounds of the scan, checked against each other and against the I/O layer.

use flashscan_io::limits::{IO_SIZE_BYTES_MAX, QUEUE_DEPTH_MAX};

/// Smallest read a scan issues: the articles show flash needs 64 KB reads to be fed.
pub const SCAN_IO_SIZE_BYTES_MIN: usize = 64 * 1024;
/// Largest read a scan issues (the I/O layer's bound).
pub const SCAN_IO_SIZE_BYTES_MAX: usize = IO_SIZE_BYTES_MAX;
/// Default read size. On the 2-core test machines 1 MiB reads at depth 8 reach the
/// device's sequential rate with the least CPU per byte (see docs/scan.md).
pub const SCAN_IO_SIZE_BYTES_DEFAULT: usize = 1024 * 1024;
/// Reads in flight per worker of a scan given a fixed depth by its caller (SQL's readers,
/// one worker per scan unit); `flashscan scan` finds its own (`depth.rs`) unless `--depth`.
pub const SCAN_QUEUE_DEPTH_DEFAULT: u32 = 8;
/// Reads in flight per worker, at most: bounds the arena (depth x io size per worker).
pub const SCAN_QUEUE_DEPTH_MAX: u32 = 256;
/// Worker threads, at most.
pub const SCAN_THREADS_MAX: u32 = 256;
/// Chunks a worker takes from the shared list at once: enough that neighbouring reads
/// stay with one worker, few enough that workers finish together.
pub const CHUNKS_PER_GRAB: usize = 4;
/// Keys the needle query returns, at most (the count is always exact).
pub const NEEDLE_KEYS_MAX: usize = 1000;

const _: () = assert!(SCAN_IO_SIZE_BYTES_MIN <= SCAN_IO_SIZE_BYTES_DEFAULT);
const _: () = assert!(SCAN_IO_SIZE_BYTES_DEFAULT <= SCAN_IO_SIZE_BYTES_MAX);
const _: () = assert!(SCAN_QUEUE_DEPTH_DEFAULT <= SCAN_QUEUE_DEPTH_MAX);
const _: () = assert!(SCAN_QUEUE_DEPTH_MAX <= QUEUE_DEPTH_MAX);
const _: () = assert!(CHUNKS_PER_GRAB >= 1);
