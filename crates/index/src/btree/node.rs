//! One 8 KB node, little-endian header, entries packed after it:
//!
//! | offset | size | field |
//! | 0  | 4 | magic `FSBT` |
//! | 4  | 2 | format version (1) |
//! | 6  | 2 | node kind: 1 leaf, 2 inner, 3 meta |
//! | 8  | 2 | level (0 = leaf) |
//! | 10 | 2 | entry count |
//! | 12 | 2 | key width in bytes |
//! | 14 | 2 | value width in bytes (16 in leaves: a row locator; 8 in inner nodes: a child) |
//! | 16 | 8 | node number (its page number in the index file) |
//! | 24 | 8 | right sibling node number, u64::MAX for none |
//! | 32 | 4 | crc32c of the node with this field zeroed (same rule as heap pages) |
//! | 36 | 4 | reserved, zero |
//! | 40 | count × (key + value) | entries in key order; keys big-endian (memcmp order) |
//!
//! An inner entry's key is the smallest key under its child. Node 0 of every index file is
//! the meta node (kind 3): the tree's shape, so a reader can check the catalog against it.

use std::path::Path;

use crate::error::IndexError;
use crate::locator::LOCATOR_BYTES;

pub const NODE_SIZE_BYTES: usize = 8192;
pub const NODE_HEADER_BYTES: usize = 40;
pub const NODE_MAGIC: [u8; 4] = *b"FSBT";
pub const NODE_FORMAT_VERSION: u16 = 1;
pub const NODE_KIND_LEAF: u16 = 1;
pub const NODE_KIND_INNER: u16 = 2;
pub const NODE_KIND_META: u16 = 3;
pub const CHILD_BYTES: usize = 8;
pub const SIBLING_NONE: u64 = u64::MAX;
/// Levels including the leaves. Full nodes need 4 for billions of rows; the bound leaves
/// room for the tiny nodes the tests build, and stops a corrupt meta node sending a seek
/// down an endless path.
pub const TREE_HEIGHT_MAX: u16 = 16;

const OFFSET_MAGIC: usize = 0;
const OFFSET_VERSION: usize = 4;
const OFFSET_KIND: usize = 6;
const OFFSET_LEVEL: usize = 8;
const OFFSET_COUNT: usize = 10;
const OFFSET_KEY_WIDTH: usize = 12;
const OFFSET_VALUE_WIDTH: usize = 14;
const OFFSET_NODE_NUMBER: usize = 16;
const OFFSET_SIBLING: usize = 24;
const OFFSET_CHECKSUM: usize = 32;
const _: () = assert!(OFFSET_CHECKSUM + 8 == NODE_HEADER_BYTES);
const _: () = assert!(NODE_SIZE_BYTES == flashscan_buffer::FRAME_SIZE_BYTES);

/// Entries of a node with these widths.
pub const fn capacity(key_width_bytes: usize, value_width_bytes: usize) -> usize {
    (NODE_SIZE_BYTES - NODE_HEADER_BYTES) / (key_width_bytes + value_width_bytes)
}

#[inline]
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline]
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3], b[at + 4], b[at + 5], b[at + 6], b[at + 7]])
}

pub fn compute_checksum(node: &[u8]) -> u32 {
    debug_assert_eq!(node.len(), NODE_SIZE_BYTES);
    let crc = crc32c::crc32c(&node[..OFFSET_CHECKSUM]);
    let crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc32c::crc32c_append(crc, &node[OFFSET_CHECKSUM + 4..])
}

/// A verified node's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeHeader {
    pub kind: u16,
    pub level: u16,
    pub count: u16,
    pub key_width_bytes: u16,
    pub value_width_bytes: u16,
    pub node_number: u64,
    pub sibling: u64,
}

/// Writes a node's header and checksum over `node` (entries already in place).
pub fn seal(node: &mut [u8], h: &NodeHeader) {
    debug_assert_eq!(node.len(), NODE_SIZE_BYTES);
    debug_assert!(h.kind == NODE_KIND_META || h.count as usize <= capacity(h.key_width_bytes as usize, h.value_width_bytes as usize));
    node[OFFSET_MAGIC..OFFSET_MAGIC + 4].copy_from_slice(&NODE_MAGIC);
    node[OFFSET_VERSION..OFFSET_VERSION + 2].copy_from_slice(&NODE_FORMAT_VERSION.to_le_bytes());
    node[OFFSET_KIND..OFFSET_KIND + 2].copy_from_slice(&h.kind.to_le_bytes());
    node[OFFSET_LEVEL..OFFSET_LEVEL + 2].copy_from_slice(&h.level.to_le_bytes());
    node[OFFSET_COUNT..OFFSET_COUNT + 2].copy_from_slice(&h.count.to_le_bytes());
    node[OFFSET_KEY_WIDTH..OFFSET_KEY_WIDTH + 2].copy_from_slice(&h.key_width_bytes.to_le_bytes());
    node[OFFSET_VALUE_WIDTH..OFFSET_VALUE_WIDTH + 2].copy_from_slice(&h.value_width_bytes.to_le_bytes());
    node[OFFSET_NODE_NUMBER..OFFSET_NODE_NUMBER + 8].copy_from_slice(&h.node_number.to_le_bytes());
    node[OFFSET_SIBLING..OFFSET_SIBLING + 8].copy_from_slice(&h.sibling.to_le_bytes());
    node[OFFSET_CHECKSUM + 4..NODE_HEADER_BYTES].fill(0);
    let crc = compute_checksum(node);
    node[OFFSET_CHECKSUM..OFFSET_CHECKSUM + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Verifies checksum, magic, version, node number and bounds: every node read passes here
/// before a byte of it is trusted.
pub fn verify(node: &[u8], expected_node: u64, key_width_bytes: usize, path: &Path) -> Result<NodeHeader, IndexError> {
    let corrupt = |reason: String| IndexError::NodeCorrupt { path: path.to_path_buf(), node: expected_node, reason };
    if node.len() != NODE_SIZE_BYTES {
        return Err(corrupt(format!("node is {} bytes", node.len())));
    }
    let stored = u32_at(node, OFFSET_CHECKSUM);
    let computed = compute_checksum(node);
    if stored != computed {
        return Err(IndexError::NodeChecksum { path: path.to_path_buf(), node: expected_node, stored_crc32c: stored, computed_crc32c: computed });
    }
    if node[..4] != NODE_MAGIC {
        return Err(corrupt("bad magic (not a flashscan index node)".into()));
    }
    let version = u16_at(node, OFFSET_VERSION);
    if version != NODE_FORMAT_VERSION {
        return Err(corrupt(format!("format version {version} (this build reads {NODE_FORMAT_VERSION})")));
    }
    let h = read_header(node);
    if h.node_number != expected_node {
        return Err(corrupt(format!("holds node {} (read from the wrong place)", h.node_number)));
    }
    if h.kind == NODE_KIND_META {
        return Ok(h);
    }
    let expected_value = match h.kind {
        NODE_KIND_LEAF => LOCATOR_BYTES,
        NODE_KIND_INNER => CHILD_BYTES,
        k => return Err(corrupt(format!("node kind {k}"))),
    };
    if (h.kind == NODE_KIND_LEAF) != (h.level == 0) {
        return Err(corrupt(format!("kind {} at level {}", h.kind, h.level)));
    }
    if h.key_width_bytes as usize != key_width_bytes || h.value_width_bytes as usize != expected_value {
        return Err(corrupt(format!("entry widths {}+{}, the index has {key_width_bytes}+{expected_value}", h.key_width_bytes, h.value_width_bytes)));
    }
    if h.count as usize > capacity(key_width_bytes, expected_value) {
        return Err(corrupt(format!("{} entries do not fit a node", h.count)));
    }
    if h.kind == NODE_KIND_INNER && h.count == 0 {
        return Err(corrupt("inner node without children".into()));
    }
    Ok(h)
}

/// Header fields, unverified (call `verify` first for data from disk).
#[inline]
pub fn read_header(node: &[u8]) -> NodeHeader {
    NodeHeader {
        kind: u16_at(node, OFFSET_KIND),
        level: u16_at(node, OFFSET_LEVEL),
        count: u16_at(node, OFFSET_COUNT),
        key_width_bytes: u16_at(node, OFFSET_KEY_WIDTH),
        value_width_bytes: u16_at(node, OFFSET_VALUE_WIDTH),
        node_number: u64_at(node, OFFSET_NODE_NUMBER),
        sibling: u64_at(node, OFFSET_SIBLING),
    }
}

/// A verified node's entries.
pub struct NodeView<'a> {
    pub bytes: &'a [u8],
    pub header: NodeHeader,
    entry_bytes: usize,
    key_bytes: usize,
}

impl<'a> NodeView<'a> {
    pub fn new(bytes: &'a [u8], header: NodeHeader) -> NodeView<'a> {
        let key_bytes = header.key_width_bytes as usize;
        NodeView { bytes, header, entry_bytes: key_bytes + header.value_width_bytes as usize, key_bytes }
    }

    #[inline]
    pub fn count(&self) -> usize {
        self.header.count as usize
    }

    #[inline]
    pub fn key(&self, i: usize) -> &'a [u8] {
        debug_assert!(i < self.count());
        let at = NODE_HEADER_BYTES + i * self.entry_bytes;
        &self.bytes[at..at + self.key_bytes]
    }

    #[inline]
    pub fn value(&self, i: usize) -> &'a [u8] {
        debug_assert!(i < self.count());
        let at = NODE_HEADER_BYTES + i * self.entry_bytes + self.key_bytes;
        &self.bytes[at..at + self.header.value_width_bytes as usize]
    }

    #[inline]
    pub fn child(&self, i: usize) -> u64 {
        debug_assert_eq!(self.header.kind, NODE_KIND_INNER);
        u64_at(self.value(i), 0)
    }

    /// The first entry whose key (its first `probe.len()` bytes) is >= `probe`.
    #[inline]
    pub fn lower_bound(&self, probe: &[u8]) -> usize {
        let n = probe.len().min(self.key_bytes);
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if &self.key(mid)[..n] < &probe[..n] {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// The meta node's body (after the header), little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TreeMeta {
    pub root_node: u64,
    /// Levels including the leaves (1 = the root is a leaf).
    pub height: u16,
    pub key_width_bytes: u16,
    pub entry_count: u64,
    pub first_leaf_node: u64,
    pub leaf_count: u64,
    /// Entries in every leaf but the last: the bulk build fills them all, so entry `i` is
    /// in leaf `first_leaf_node + i / leaf_entries` (used to sample random keys).
    pub leaf_entries: u16,
    pub node_count: u64,
}

impl TreeMeta {
    pub fn write(&self, node: &mut [u8]) {
        let b = &mut node[NODE_HEADER_BYTES..];
        b[0..8].copy_from_slice(&self.root_node.to_le_bytes());
        b[8..10].copy_from_slice(&self.height.to_le_bytes());
        b[10..12].copy_from_slice(&self.key_width_bytes.to_le_bytes());
        b[12..20].copy_from_slice(&self.entry_count.to_le_bytes());
        b[20..28].copy_from_slice(&self.first_leaf_node.to_le_bytes());
        b[28..36].copy_from_slice(&self.leaf_count.to_le_bytes());
        b[36..38].copy_from_slice(&self.leaf_entries.to_le_bytes());
        b[38..46].copy_from_slice(&self.node_count.to_le_bytes());
        seal(node, &NodeHeader { kind: NODE_KIND_META, level: 0, count: 0, key_width_bytes: self.key_width_bytes, value_width_bytes: 0, node_number: 0, sibling: SIBLING_NONE });
    }

    pub fn read(node: &[u8], path: &Path) -> Result<TreeMeta, IndexError> {
        let h = verify(node, 0, 0, path)?;
        let corrupt = |reason: String| IndexError::NodeCorrupt { path: path.to_path_buf(), node: 0, reason };
        if h.kind != NODE_KIND_META {
            return Err(corrupt(format!("node 0 is of kind {}, not the meta node", h.kind)));
        }
        let b = &node[NODE_HEADER_BYTES..];
        let meta = TreeMeta {
            root_node: u64_at(b, 0),
            height: u16_at(b, 8),
            key_width_bytes: u16_at(b, 10),
            entry_count: u64_at(b, 12),
            first_leaf_node: u64_at(b, 20),
            leaf_count: u64_at(b, 28),
            leaf_entries: u16_at(b, 36),
            node_count: u64_at(b, 38),
        };
        if meta.height == 0 || meta.height > TREE_HEIGHT_MAX {
            return Err(corrupt(format!("height {}", meta.height)));
        }
        if meta.root_node == 0 || meta.root_node >= meta.node_count || meta.key_width_bytes == 0 || meta.key_width_bytes as usize > crate::key::KEY_BYTES_MAX {
            return Err(corrupt(format!("root {} of {} nodes, key width {}", meta.root_node, meta.node_count, meta.key_width_bytes)));
        }
        if meta.leaf_entries == 0 && meta.entry_count > 0 {
            return Err(corrupt("zero entries per leaf".into()));
        }
        // Node numbers become byte offsets (number × 8 KB) and leaf numbers are computed
        // from these fields (`sample_keys`): keep both inside the node count, and the node
        // count inside what a u64 byte offset can address.
        if meta.node_count > u64::MAX / NODE_SIZE_BYTES as u64 {
            return Err(corrupt(format!("{} nodes do not fit a file", meta.node_count)));
        }
        if meta.first_leaf_node == 0 || meta.first_leaf_node.checked_add(meta.leaf_count).is_none_or(|end| end > meta.node_count) {
            return Err(corrupt(format!("leaves {}+{} outside nodes 1..{}", meta.first_leaf_node, meta.leaf_count, meta.node_count)));
        }
        if (meta.leaf_entries as u64).checked_mul(meta.leaf_count).is_some_and(|capacity| meta.entry_count > capacity) {
            return Err(corrupt(format!("{} entries in {} leaves of {}", meta.entry_count, meta.leaf_count, meta.leaf_entries)));
        }
        Ok(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> TreeMeta {
        TreeMeta { root_node: 3, height: 2, key_width_bytes: 8, entry_count: 5, first_leaf_node: 1, leaf_count: 2, leaf_entries: 3, node_count: 4 }
    }

    fn read(m: TreeMeta) -> Result<TreeMeta, IndexError> {
        let mut node = vec![0u8; NODE_SIZE_BYTES];
        m.write(&mut node);
        TreeMeta::read(&node, Path::new("t.fsbt"))
    }

    /// Found by fuzz/btree_seek: a meta node (valid checksum) whose first leaf number was
    /// near u64::MAX made `sample_keys` overflow computing the leaf's byte offset; a node
    /// count past u64::MAX / 8 KB did the same for any node number.
    #[test]
    fn leaf_and_node_numbers_outside_the_tree_are_corrupt() {
        assert_eq!(read(meta()).unwrap(), meta());
        let bad = [
            TreeMeta { first_leaf_node: u64::MAX - 1, ..meta() },
            TreeMeta { first_leaf_node: 0, ..meta() },
            TreeMeta { leaf_count: 4, ..meta() },
            TreeMeta { leaf_count: u64::MAX, ..meta() },
            TreeMeta { node_count: u64::MAX, ..meta() },
            TreeMeta { entry_count: 7, ..meta() },
            TreeMeta { entry_count: u64::MAX, leaf_entries: 0, ..meta() },
        ];
        for m in bad {
            assert!(matches!(read(m), Err(IndexError::NodeCorrupt { .. })), "{m:?}");
        }
        // The empty tree the bulk build writes: one empty leaf.
        read(TreeMeta { root_node: 1, height: 1, entry_count: 0, leaf_count: 1, node_count: 2, ..meta() }).unwrap();
    }
}
