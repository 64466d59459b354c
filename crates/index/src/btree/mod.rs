//! The B+tree: 8 KB nodes ([`node`]), bulk built bottom-up from sorted input ([`build`]),
//! read through the buffer pool for seeks and range scans ([`seek`]). Byte layouts are in
//! docs/indexes.md.

pub mod build;
pub mod node;
pub mod seek;

pub use build::{BuildOptions, TreeBuilder};
pub use node::TreeMeta;
pub use seek::BTree;
