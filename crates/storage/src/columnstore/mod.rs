//! The column store: row groups of column segments.
