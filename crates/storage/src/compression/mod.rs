//! Codecs, one file each, behind one trait (DuckDB's storage/compression).
