//! flashscan-storage: how tables sit on flash.
//!
//! Owned by the storage work (heap pages, catalog, partitioning, placement, load), except
//! `compression/` and `columnstore/`, owned by the column store work.

pub mod columnstore;
pub mod compression;
