//! Named bounds of the I/O layer, checked against each other at compile time.

/// Largest single I/O the layer accepts (fio allows more; 8 MiB covers every database use).
pub const IO_SIZE_BYTES_MAX: usize = 8 * 1024 * 1024;
/// Smallest single I/O: one 512-byte sector.
pub const IO_SIZE_BYTES_MIN: usize = 512;
/// Outstanding I/Os per engine (per thread). io_uring rings are sized to this at most.
pub const QUEUE_DEPTH_MAX: u32 = 1024;
/// Worker threads of the portable engine, per engine instance.
pub const PSYNC_THREADS_MAX: u32 = 128;
/// Alignment of every buffer: the largest logical block size we expect (4 KiB sectors).
pub const BUFFER_ALIGN_BYTES: usize = 4096;
/// Bound on the memory one engine may pin for its buffers.
pub const ARENA_BYTES_MAX: usize = 1 << 30;

const _: () = assert!(IO_SIZE_BYTES_MIN <= IO_SIZE_BYTES_MAX);
const _: () = assert!(IO_SIZE_BYTES_MAX % BUFFER_ALIGN_BYTES == 0);
const _: () = assert!(BUFFER_ALIGN_BYTES.is_power_of_two());
const _: () = assert!(PSYNC_THREADS_MAX <= QUEUE_DEPTH_MAX);
const _: () = assert!(IO_SIZE_BYTES_MAX <= ARENA_BYTES_MAX);
