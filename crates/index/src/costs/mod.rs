//! The I/O cost bench (filled in below).
