//! Named bounds of the log, with their reasons, checked against each other at compile time.

/// A log block: the unit of a checksum and of O_DIRECT writes. 4 KiB is the logical block
/// size of every flash device we target, so a block is never split across device sectors
/// larger than itself, and every write is aligned for O_DIRECT.
pub const BLOCK_SIZE_BYTES: usize = 4096;
/// Block header (see block.rs).
pub const BLOCK_HEADER_BYTES: usize = 40;
/// Record bytes one block carries.
pub const BLOCK_PAYLOAD_BYTES: usize = BLOCK_SIZE_BYTES - BLOCK_HEADER_BYTES;
/// Record header: kind, flags, reserved, body length.
pub const RECORD_HEADER_BYTES: usize = 8;
/// Largest record body. A row is at most a page; 1 MiB leaves room for future records
/// (a page image) and bounds what a damaged length can make the reader allocate.
pub const RECORD_BODY_BYTES_MAX: usize = 1 << 20;
/// Segment files: 16 MiB by default (PostgreSQL's size), small ones for tests.
pub const SEGMENT_SIZE_BYTES_DEFAULT: u64 = 16 << 20;
/// A segment holds its header block and at least three log blocks.
pub const SEGMENT_SIZE_BYTES_MIN: u64 = 4 * BLOCK_SIZE_BYTES as u64;
/// Segments are read whole during recovery: bound the memory that takes.
pub const SEGMENT_SIZE_BYTES_MAX: u64 = 1 << 30;
/// One write request of the log writer (the engine's slot size). A flush larger than this
/// is written in several requests before its one durable flush.
pub const WRITE_CHUNK_BYTES: usize = 1 << 20;
/// Log bytes appended but not yet taken by the log writer before appenders wait: bounds
/// memory when committers outrun the device.
pub const LOG_BUFFER_BYTES_MAX: usize = 16 << 20;
/// Flushes in flight at most (`WalConfig::flushes_in_flight_max`'s bound). Each takes a
/// segment writer of its own (a descriptor per segment and a `WRITE_CHUNK_BYTES` aligned
/// buffer), and after a power loss damage to a durable block can pass for a torn tail only
/// while no flush submitted after it became durable follows (reader.rs): the more flushes
/// overlap, the wider that window. The VM's disk gained little past four (server7's
/// probe: 2 / 3 / 4 flushers at 19 / 31 / 39 times one flusher's rate under load).
pub const FLUSHES_IN_FLIGHT_MAX: usize = 8;
/// The default: one flush at a time, as before flushes could overlap. Measured with 4
/// (docs/benchmarks.md, wal8): 1.25× the rows/s at 8 clients on a loaded machine, but on a
/// quiet one no gain at 8 clients (CPU-bound) and 0.74–0.98× at 64 (flushes split the
/// commit workers' groups: 17 → 10 statements per flush). `FLASHSCAN_WAL_FLUSHES_IN_FLIGHT`
/// turns it on; the format and recovery are ready for any count up to the maximum.
pub const FLUSHES_IN_FLIGHT_DEFAULT: usize = 1;
/// The control file, one sector so its write is atomic on every device.
pub const CONTROL_FILE_BYTES: usize = 512;
/// Longest database label kept in the control file (for the "foreign wal dir" message).
pub const DATABASE_LABEL_BYTES_MAX: usize = 256;

const _: () = assert!(BLOCK_SIZE_BYTES.is_power_of_two());
const _: () = assert!(BLOCK_PAYLOAD_BYTES < u16::MAX as usize);
const _: () = assert!(SEGMENT_SIZE_BYTES_MIN.is_multiple_of(BLOCK_SIZE_BYTES as u64));
const _: () = assert!(SEGMENT_SIZE_BYTES_DEFAULT.is_multiple_of(BLOCK_SIZE_BYTES as u64));
const _: () = assert!(SEGMENT_SIZE_BYTES_DEFAULT <= SEGMENT_SIZE_BYTES_MAX);
const _: () = assert!(WRITE_CHUNK_BYTES.is_multiple_of(BLOCK_SIZE_BYTES));
const _: () = assert!(WRITE_CHUNK_BYTES <= flashscan_io::limits::IO_SIZE_BYTES_MAX);
const _: () = assert!(LOG_BUFFER_BYTES_MAX >= 2 * (RECORD_BODY_BYTES_MAX + RECORD_HEADER_BYTES));
const _: () = assert!(FLUSHES_IN_FLIGHT_DEFAULT >= 1 && FLUSHES_IN_FLIGHT_DEFAULT <= FLUSHES_IN_FLIGHT_MAX);
const _: () = assert!(DATABASE_LABEL_BYTES_MAX + 96 <= CONTROL_FILE_BYTES);
