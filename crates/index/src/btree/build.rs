//! Bulk build: sorted (key, locator) pairs in, a packed tree out. Leaves are written left
//! to right as they fill (consecutive node numbers, each linked to the next); then each
//! upper level is built from the first keys of the level below, until one node remains:
//! the root. Node 0 is written last: the meta node describing the finished tree.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::node::{capacity, seal, NodeHeader, TreeMeta, CHILD_BYTES, NODE_HEADER_BYTES, NODE_KIND_INNER, NODE_KIND_LEAF, NODE_SIZE_BYTES, SIBLING_NONE, TREE_HEIGHT_MAX};
use crate::error::IndexError;
use crate::locator::{RowLocator, LOCATOR_BYTES};

/// How full nodes are packed. The defaults fill nodes completely (a read-only bulk
/// build); tests use tiny nodes to get deep trees from few keys.
#[derive(Debug, Clone, Copy)]
pub struct BuildOptions {
    pub leaf_entries_max: usize,
    pub inner_entries_max: usize,
}

impl BuildOptions {
    pub fn full(key_width_bytes: usize) -> BuildOptions {
        BuildOptions { leaf_entries_max: capacity(key_width_bytes, LOCATOR_BYTES), inner_entries_max: capacity(key_width_bytes, CHILD_BYTES) }
    }
}

pub struct TreeBuilder {
    path: PathBuf,
    out: BufWriter<File>,
    key_width_bytes: usize,
    options: BuildOptions,
    node: Vec<u8>,
    node_entries: usize,
    next_node_number: u64,
    /// First key and node number of every node of the level being written.
    level_keys: Vec<u8>,
    level_nodes: Vec<u64>,
    last_key: Vec<u8>,
    last_locator: Option<RowLocator>,
    entry_count: u64,
}

impl TreeBuilder {
    pub fn create(path: &Path, key_width_bytes: usize, options: BuildOptions) -> Result<TreeBuilder, IndexError> {
        let max_leaf = capacity(key_width_bytes, LOCATOR_BYTES);
        let max_inner = capacity(key_width_bytes, CHILD_BYTES);
        if key_width_bytes == 0 || key_width_bytes > crate::key::KEY_BYTES_MAX {
            return Err(IndexError::InvalidArgument(format!("key width {key_width_bytes} bytes")));
        }
        if !(1..=max_leaf).contains(&options.leaf_entries_max) || !(2..=max_inner).contains(&options.inner_entries_max) {
            return Err(IndexError::InvalidArgument(format!(
                "node fill {}/{} out of range (leaf 1..={max_leaf}, inner 2..={max_inner})",
                options.leaf_entries_max, options.inner_entries_max
            )));
        }
        // O_EXCL|O_NOFOLLOW: a file or link already at the name is never written through.
        let file = flashscan_storage::fs_safe::create_new(path).map_err(|e| IndexError::file("creating", path, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        // Node 0 (meta) is filled in at the end.
        out.write_all(&[0u8; NODE_SIZE_BYTES]).map_err(|e| IndexError::file("writing", path, e))?;
        Ok(TreeBuilder {
            path: path.to_path_buf(),
            out,
            key_width_bytes,
            options,
            node: vec![0u8; NODE_SIZE_BYTES],
            node_entries: 0,
            next_node_number: 1,
            level_keys: Vec::new(),
            level_nodes: Vec::new(),
            last_key: Vec::with_capacity(key_width_bytes),
            last_locator: None,
            entry_count: 0,
        })
    }

    /// Appends one entry; entries must come in (key, locator) order.
    pub fn push(&mut self, key: &[u8], locator: RowLocator) -> Result<(), IndexError> {
        if key.len() != self.key_width_bytes {
            return Err(IndexError::InvalidArgument(format!("key of {} bytes in a {}-byte index", key.len(), self.key_width_bytes)));
        }
        if let Some(last) = self.last_locator {
            if (key, locator) < (self.last_key.as_slice(), last) {
                return Err(IndexError::InvalidArgument("bulk build input is not sorted".into()));
            }
        }
        if self.node_entries == self.options.leaf_entries_max {
            self.flush_node(NODE_KIND_LEAF, 0, false)?;
        }
        let entry_bytes = self.key_width_bytes + LOCATOR_BYTES;
        let at = NODE_HEADER_BYTES + self.node_entries * entry_bytes;
        if self.node_entries == 0 {
            self.level_keys.extend_from_slice(key);
            self.level_nodes.push(self.next_node_number);
        }
        self.node[at..at + self.key_width_bytes].copy_from_slice(key);
        locator.encode(&mut self.node[at + self.key_width_bytes..at + entry_bytes]);
        self.node_entries += 1;
        self.entry_count += 1;
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.last_locator = Some(locator);
        Ok(())
    }

    /// Seals and writes the node being filled as node `next_node_number`.
    fn flush_node(&mut self, kind: u16, level: u16, last_of_level: bool) -> Result<(), IndexError> {
        let value_width = if kind == NODE_KIND_LEAF { LOCATOR_BYTES } else { CHILD_BYTES };
        debug_assert!(self.node_entries <= capacity(self.key_width_bytes, value_width));
        let node_number = self.next_node_number;
        let header = NodeHeader {
            kind,
            level,
            count: self.node_entries as u16,
            key_width_bytes: self.key_width_bytes as u16,
            value_width_bytes: value_width as u16,
            node_number,
            sibling: if last_of_level { SIBLING_NONE } else { node_number + 1 },
        };
        seal(&mut self.node, &header);
        self.out.write_all(&self.node).map_err(|e| IndexError::file("writing", &self.path, e))?;
        self.node.fill(0);
        self.node_entries = 0;
        self.next_node_number += 1;
        Ok(())
    }

    /// Writes the last leaf, the upper levels and the meta node; syncs the file.
    pub fn finish(mut self) -> Result<TreeMeta, IndexError> {
        let first_leaf_node = 1;
        if self.level_nodes.is_empty() {
            // An empty tree is one empty leaf.
            self.level_nodes.push(self.next_node_number);
            self.level_keys.extend(std::iter::repeat_n(0u8, self.key_width_bytes));
        }
        self.flush_node(NODE_KIND_LEAF, 0, true)?;
        let leaf_count = self.level_nodes.len() as u64;
        let mut height: u16 = 1;
        let kw = self.key_width_bytes;
        while self.level_nodes.len() > 1 {
            if height >= TREE_HEIGHT_MAX {
                return Err(IndexError::InvalidArgument(format!("tree would be taller than {TREE_HEIGHT_MAX} levels: use fuller nodes")));
            }
            let keys = std::mem::take(&mut self.level_keys);
            let nodes = std::mem::take(&mut self.level_nodes);
            let chunks = nodes.len().div_ceil(self.options.inner_entries_max);
            for c in 0..chunks {
                let from = c * self.options.inner_entries_max;
                let to = (from + self.options.inner_entries_max).min(nodes.len());
                self.level_keys.extend_from_slice(&keys[from * kw..(from + 1) * kw]);
                self.level_nodes.push(self.next_node_number);
                for (i, e) in (from..to).enumerate() {
                    let at = NODE_HEADER_BYTES + i * (kw + CHILD_BYTES);
                    self.node[at..at + kw].copy_from_slice(&keys[e * kw..(e + 1) * kw]);
                    self.node[at + kw..at + kw + CHILD_BYTES].copy_from_slice(&nodes[e].to_le_bytes());
                    debug_assert!(e == from || keys[(e - 1) * kw..e * kw] <= keys[e * kw..(e + 1) * kw], "separators out of order");
                }
                self.node_entries = to - from;
                self.flush_node(NODE_KIND_INNER, height, c + 1 == chunks)?;
            }
            height += 1;
        }
        let meta = TreeMeta {
            root_node: self.level_nodes[0],
            height,
            key_width_bytes: kw as u16,
            entry_count: self.entry_count,
            first_leaf_node,
            leaf_count,
            leaf_entries: self.options.leaf_entries_max as u16,
            node_count: self.next_node_number,
        };
        let mut meta_node = vec![0u8; NODE_SIZE_BYTES];
        meta.write(&mut meta_node);
        let file = self.out.into_inner().map_err(|e| IndexError::file("writing", &self.path, e.into_error()))?;
        file.write_all_at(&meta_node, 0).map_err(|e| IndexError::file("writing", &self.path, e))?;
        file.sync_all().map_err(|e| IndexError::file("syncing", &self.path, e))?;
        Ok(meta)
    }
}
