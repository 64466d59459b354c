//! Reading a tree through the buffer pool: seek to the first key >= a bound, then walk the
//! leaves rightwards to the upper bound. Nodes are verified (checksum, node number, level)
//! on their way into the pool.

use std::path::{Path, PathBuf};

use flashscan_buffer::{BufferPool, PageGuard, PageKey, PageReader};
use rand::SeedableRng;

use super::node::{self, NodeHeader, NodeView, TreeMeta, NODE_KIND_INNER, NODE_KIND_LEAF, NODE_SIZE_BYTES, SIBLING_NONE};
use crate::error::IndexError;
use crate::locator::RowLocator;

pub struct BTree {
    /// The index file's pool file id (what its pages' keys carry).
    pub file_index: u32,
    pub path: PathBuf,
    pub meta: TreeMeta,
}

impl BTree {
    /// Reads the meta node (through the pool) and checks it.
    pub fn open<T>(pool: &BufferPool, reader: &mut PageReader<T>, file_index: u32, path: &Path) -> Result<BTree, IndexError> {
        let guard = pool.read_page(reader, PageKey::new(file_index, 0), |b| TreeMeta::read(b, path).map(drop))?;
        let meta = TreeMeta::read(guard.data(), path)?;
        Ok(BTree { file_index, path: path.to_path_buf(), meta })
    }

    fn node<'p, T>(&self, pool: &'p BufferPool, reader: &mut PageReader<T>, number: u64, level: u16) -> Result<(PageGuard<'p>, NodeHeader), IndexError> {
        let corrupt = |reason: String| IndexError::NodeCorrupt { path: self.path.clone(), node: number, reason };
        if number == 0 || number >= self.meta.node_count {
            return Err(corrupt(format!("node number out of range 1..{}", self.meta.node_count)));
        }
        let kw = self.meta.key_width_bytes as usize;
        let guard = pool.read_page(reader, PageKey::new(self.file_index, number), |b| node::verify(b, number, kw, &self.path).map(drop))?;
        let header = node::read_header(guard.data());
        if header.level != level {
            return Err(corrupt(format!("at level {} where the path expects level {level}", header.level)));
        }
        // `verify` accepts a meta node at any number (its entry count is unchecked): only a
        // leaf or an inner node may sit on a path.
        let kind = if level == 0 { NODE_KIND_LEAF } else { NODE_KIND_INNER };
        if header.kind != kind {
            return Err(corrupt(format!("of kind {} where the path expects kind {kind}", header.kind)));
        }
        Ok((guard, header))
    }

    /// Appends the locators of every entry with `lo <= key` and `key[..hi.len()] <= hi`
    /// (bounds may be key prefixes; an empty `hi` means no upper bound), in key order.
    /// Returns how many were appended.
    pub fn range<T>(&self, pool: &BufferPool, reader: &mut PageReader<T>, lo: &[u8], hi: &[u8], out: &mut Vec<RowLocator>) -> Result<usize, IndexError> {
        let kw = self.meta.key_width_bytes as usize;
        if lo.len() > kw || hi.len() > kw {
            return Err(IndexError::InvalidArgument(format!("bound of {} / {} bytes for a {kw}-byte key", lo.len(), hi.len())));
        }
        let before = out.len();
        let mut number = self.meta.root_node;
        let mut level = self.meta.height - 1;
        while level > 0 {
            let (guard, header) = self.node(pool, reader, number, level)?;
            let view = NodeView::new(guard.data(), header);
            // The child whose key range may hold `lo`: the last separator strictly below it
            // (duplicates of `lo` may end the child before the first separator equal to it).
            let i = view.lower_bound(lo);
            let child = view.child(i.saturating_sub(1));
            debug_assert!(i == 0 || view.key(i - 1)[..lo.len()] < *lo);
            number = child;
            level -= 1;
        }
        let mut leaves_visited = 0u64;
        let mut first = true;
        loop {
            leaves_visited += 1;
            if leaves_visited > self.meta.leaf_count {
                return Err(IndexError::NodeCorrupt { path: self.path.clone(), node: number, reason: "leaf chain longer than the leaf count (a cycle)".into() });
            }
            let (guard, header) = self.node(pool, reader, number, 0)?;
            let view = NodeView::new(guard.data(), header);
            let start = if first { view.lower_bound(lo) } else { 0 };
            first = false;
            for pos in start..view.count() {
                let key = view.key(pos);
                // Sorted keys never go below the bound after the first match; a damaged
                // (re-checksummed) tree can.
                if key[..lo.len()] < *lo {
                    return Err(IndexError::NodeCorrupt { path: self.path.clone(), node: number, reason: format!("entry {pos} is below the previous entries (keys out of order)") });
                }
                if key[..hi.len()] > *hi {
                    return Ok(out.len() - before);
                }
                out.push(RowLocator::decode(view.value(pos)));
            }
            if header.sibling == SIBLING_NONE {
                return Ok(out.len() - before);
            }
            // The bulk build numbers leaves left to right: a sibling at or before its leaf is
            // a damaged chain (a cycle, which `leaf_count` alone bounds only loosely).
            if header.sibling <= number {
                return Err(IndexError::NodeCorrupt { path: self.path.clone(), node: number, reason: format!("right sibling {} is not to the right", header.sibling) });
            }
            number = header.sibling;
        }
    }

    /// Every locator stored under exactly `key` (or under a key starting with it).
    pub fn seek<T>(&self, pool: &BufferPool, reader: &mut PageReader<T>, key: &[u8], out: &mut Vec<RowLocator>) -> Result<usize, IndexError> {
        self.range(pool, reader, key, key, out)
    }

    /// `count` distinct entries' keys drawn uniformly (so every key exists), read through
    /// the pool's streaming path, uncached (a dirty node would still be seen): choosing
    /// keys is not part of a measured lookup, so it must not warm the pool.
    pub fn sample_keys(&self, count: usize, seed: u64) -> Result<Vec<Vec<u8>>, IndexError> {
        if self.meta.entry_count == 0 {
            return Ok(Vec::new());
        }
        let mut file = flashscan_storage::page_path::FileReader::open(std::slice::from_ref(&self.path))?;
        let kw = self.meta.key_width_bytes as usize;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut node_bytes: Vec<u8> = Vec::new();
        let mut cached_leaf = u64::MAX;
        // Distinct entries (so N keys find N rows on a unique index), at most all of them.
        let count = count.min(self.meta.entry_count as usize);
        let mut ordinals: Vec<u64> = rand::seq::index::sample(&mut rng, self.meta.entry_count as usize, count).into_iter().map(|i| i as u64).collect();
        // Read each leaf once; hand the keys back in the random order drawn.
        let mut order: Vec<usize> = (0..count).collect();
        order.sort_by_key(|&i| ordinals[i]);
        let mut keys = vec![Vec::new(); count];
        for i in order {
            let ordinal = ordinals[i];
            let leaf = self.meta.first_leaf_node + ordinal / self.meta.leaf_entries as u64;
            let pos = (ordinal % self.meta.leaf_entries as u64) as usize;
            if leaf != cached_leaf {
                node_bytes = file.read(0, leaf * NODE_SIZE_BYTES as u64, NODE_SIZE_BYTES as u64)?;
                node::verify(&node_bytes, leaf, kw, &self.path)?;
                cached_leaf = leaf;
            }
            let header = node::read_header(&node_bytes);
            let view = NodeView::new(&node_bytes, header);
            if header.kind != NODE_KIND_LEAF || pos >= view.count() {
                return Err(IndexError::NodeCorrupt { path: self.path.clone(), node: leaf, reason: format!("entry {ordinal} is not where a packed tree keeps it") });
            }
            keys[i] = view.key(pos).to_vec();
        }
        ordinals.clear();
        Ok(keys)
    }
}
