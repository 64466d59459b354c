//! The B+tree against a BTreeMap oracle: random keys (with duplicates), bulk built with
//! tiny and full nodes, then every seek and random ranges compared; composite keys and
//! prefix seeks; damaged nodes surfacing as checksum errors.

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flashscan_buffer::BufferPool;
use flashscan_index::btree::{BTree, BuildOptions, TreeBuilder};
use flashscan_index::key::encode_part;
use flashscan_index::{IndexError, RowLocator};
use flashscan_buffer::PageReader;
use flashscan_io::{open_engine, EngineConfig, EngineKind, FileSet, OpenMode};
use proptest::prelude::*;

fn key_bytes(parts: &[i64]) -> Vec<u8> {
    parts.iter().flat_map(|&p| encode_part(p).to_be_bytes()).collect()
}

/// A tree file built from `entries` in a new temporary directory (which the first part of
/// the answer keeps).
fn built_tree(entries: &BTreeMap<Vec<u8>, Vec<RowLocator>>, key_width: usize, options: BuildOptions) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.fsbt");
    let mut b = TreeBuilder::create(&path, key_width, options).unwrap();
    for (k, locs) in entries {
        for l in locs {
            b.push(k, *l).unwrap();
        }
    }
    b.finish().unwrap();
    (dir, path)
}

/// An index file opened for reading: a pool, the random path's reader and the tree.
struct OpenTree {
    pool: BufferPool,
    reader: PageReader<()>,
    tree: BTree,
}

/// Opens the tree at `path` through a fresh pool of `frames` frames.
fn open_tree(path: &Path, frames: u32) -> Result<OpenTree, IndexError> {
    let files = Arc::new(FileSet::open(&[path.to_path_buf()], OpenMode { direct: false, write: false }).unwrap());
    let engine = open_engine(EngineKind::Psync, files, EngineConfig::for_depth(1, 8192), &mut |_| {}).unwrap();
    let pool = BufferPool::with_frames(frames).unwrap();
    let mut reader = PageReader::<()>::new(&pool, engine).unwrap();
    let file_id = reader.file_id(0);
    let tree = BTree::open(&pool, &mut reader, file_id, path)?;
    Ok(OpenTree { pool, reader, tree })
}

fn oracle_range(entries: &BTreeMap<Vec<u8>, Vec<RowLocator>>, lo: &[u8], hi: &[u8]) -> Vec<RowLocator> {
    entries.iter().filter(|(k, _)| k.as_slice() >= lo && (hi.is_empty() || &k[..hi.len()] <= hi)).flat_map(|(_, v)| v.iter().copied()).collect()
}

fn loc(i: u64) -> RowLocator {
    RowLocator { page_id: i / 7, partition: (i % 3) as u32, slot: (i % 7) as u16 }
}

/// Keys 0, step, 2 * step, … (`count` of them), key `i * step` at `loc(i)`.
fn every_nth_key(count: i64, step: i64) -> BTreeMap<Vec<u8>, Vec<RowLocator>> {
    (0..count).map(|i| (key_bytes(&[i * step]), vec![loc(i as u64)])).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn seeks_and_ranges_match_the_oracle(
        raw in proptest::collection::vec(-200i64..200, 0..1500),
        tiny in proptest::bool::ANY,
        leaf in 1usize..6,
        // Inner fan-out 2 with 1-entry leaves would need more than 16 levels.
        inner in 3usize..6,
        ranges in proptest::collection::vec((-220i64..220, 0i64..80), 1..20),
    ) {
        let mut entries: BTreeMap<Vec<u8>, Vec<RowLocator>> = BTreeMap::new();
        for (i, k) in raw.iter().enumerate() {
            entries.entry(key_bytes(&[*k])).or_default().push(loc(i as u64));
        }
        for v in entries.values_mut() {
            v.sort();
        }
        let options = if tiny { BuildOptions { leaf_entries_max: leaf, inner_entries_max: inner } } else { BuildOptions::full(8) };
        let (_dir, path) = built_tree(&entries, 8, options);
        let OpenTree { pool, mut reader, tree } = open_tree(&path, 64).unwrap();
        prop_assert_eq!(tree.meta.entry_count, raw.len() as u64);
        let mut out = Vec::new();
        for k in -205i64..205 {
            out.clear();
            let kb = key_bytes(&[k]);
            tree.seek(&pool, &mut reader, &kb, &mut out).unwrap();
            let expected = entries.get(&kb).cloned().unwrap_or_default();
            prop_assert_eq!(&out, &expected, "key {}", k);
        }
        for (lo, len) in ranges {
            out.clear();
            let (lo_b, hi_b) = (key_bytes(&[lo]), key_bytes(&[lo + len]));
            tree.range(&pool, &mut reader, &lo_b, &hi_b, &mut out).unwrap();
            prop_assert_eq!(&out, &oracle_range(&entries, &lo_b, &hi_b), "range {}..={}", lo, lo + len);
        }
        out.clear();
        tree.range(&pool, &mut reader, &[], &[], &mut out).unwrap();
        prop_assert_eq!(out.len(), raw.len());
        prop_assert_eq!(pool.pinned_count(), 0);
    }

    #[test]
    fn composite_keys_and_prefixes(raw in proptest::collection::vec((0i64..20, -50i64..50), 0..600)) {
        let mut entries: BTreeMap<Vec<u8>, Vec<RowLocator>> = BTreeMap::new();
        for (i, (a, b)) in raw.iter().enumerate() {
            entries.entry(key_bytes(&[*a, *b])).or_default().push(loc(i as u64));
        }
        for v in entries.values_mut() {
            v.sort();
        }
        let (_dir, path) = built_tree(&entries, 16, BuildOptions { leaf_entries_max: 4, inner_entries_max: 3 });
        let OpenTree { pool, mut reader, tree } = open_tree(&path, 32).unwrap();
        let mut out = Vec::new();
        for a in -1i64..21 {
            out.clear();
            let prefix = key_bytes(&[a]);
            tree.seek(&pool, &mut reader, &prefix, &mut out).unwrap();
            let expected: Vec<RowLocator> = entries.iter().filter(|(k, _)| k[..8] == prefix[..]).flat_map(|(_, v)| v.iter().copied()).collect();
            prop_assert_eq!(&out, &expected, "prefix {}", a);
        }
        for ((a, b), locs) in entries.iter().map(|(k, v)| ((k.clone(), ()), v)).map(|((k, _), v)| ((k[..8].to_vec(), k[8..].to_vec()), v)) {
            out.clear();
            let full = [a, b].concat();
            tree.seek(&pool, &mut reader, &full, &mut out).unwrap();
            prop_assert_eq!(&out, locs);
        }
    }
}

#[test]
fn deep_tree_with_many_keys() {
    let entries = every_nth_key(200_000, 3);
    let (_dir, path) = built_tree(&entries, 8, BuildOptions::full(8));
    let OpenTree { pool, mut reader, tree } = open_tree(&path, 16).unwrap();
    assert_eq!(tree.meta.height, 3, "200k keys in 339-entry leaves under 509-entry inner nodes need two inner levels");
    let mut out = Vec::new();
    for i in (0..200_000i64).step_by(997) {
        out.clear();
        tree.seek(&pool, &mut reader, &key_bytes(&[i * 3]), &mut out).unwrap();
        assert_eq!(out, vec![loc(i as u64)]);
        out.clear();
        tree.seek(&pool, &mut reader, &key_bytes(&[i * 3 + 1]), &mut out).unwrap();
        assert!(out.is_empty());
    }
    let sample = tree.sample_keys(500, 7).unwrap();
    assert_eq!(sample.len(), 500);
    for k in &sample {
        assert!(entries.contains_key(k));
    }
    // A tiny pool forces evictions: the tree still answers (budget respected).
    assert!(pool.snapshot().evictions_count > 0);
    assert!(pool.resident_count() <= 16);
}

#[test]
fn unsorted_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = TreeBuilder::create(&dir.path().join("u.fsbt"), 8, BuildOptions::full(8)).unwrap();
    b.push(&key_bytes(&[5]), loc(0)).unwrap();
    assert!(matches!(b.push(&key_bytes(&[4]), loc(1)), Err(IndexError::InvalidArgument(_))));
}

#[test]
fn damaged_node_is_a_checksum_error() {
    let entries = every_nth_key(5000, 1);
    let (_dir, path) = built_tree(&entries, 8, BuildOptions::full(8));
    // Flip a byte in the middle of leaf 3.
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start(3 * 8192 + 4000)).unwrap();
    f.write_all(&[0xAB]).unwrap();
    drop(f);
    let OpenTree { pool, mut reader, tree } = open_tree(&path, 16).unwrap();
    let mut out = Vec::new();
    // Leaf 3 holds entries 3 * 339 - 339 .. : key 800 is in it.
    let r = tree.seek(&pool, &mut reader, &key_bytes(&[800]), &mut out);
    assert!(matches!(r, Err(IndexError::NodeChecksum { node: 3, .. })), "{r:?}");
    assert_eq!(pool.snapshot().verify_failures_count, 1);
    // Other leaves still answer.
    out.clear();
    tree.seek(&pool, &mut reader, &key_bytes(&[10]), &mut out).unwrap();
    assert_eq!(out, vec![loc(10)]);
}

/// Rewrites node `number` of the index file with `edit` and a fresh checksum: damage that a
/// checksum cannot catch (what fuzz/btree_seek feeds the reader).
fn forge_node(path: &Path, number: u64, edit: impl FnOnce(&mut [u8])) {
    use flashscan_index::btree::node::{compute_checksum, NODE_SIZE_BYTES};
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut node = vec![0u8; NODE_SIZE_BYTES];
    f.read_exact_at(&mut node, number * NODE_SIZE_BYTES as u64).unwrap();
    edit(&mut node);
    let crc = compute_checksum(&node);
    node[32..36].copy_from_slice(&crc.to_le_bytes());
    f.write_all_at(&node, number * NODE_SIZE_BYTES as u64).unwrap();
}

/// Keys 0..40 in 4-entry leaves: leaf n (nodes 1..=10) holds keys 4(n-1)..4n.
fn small_tree() -> (tempfile::TempDir, PathBuf) {
    built_tree(&every_nth_key(40, 1), 8, BuildOptions { leaf_entries_max: 4, inner_entries_max: 3 })
}

fn seek_all(path: &Path) -> Result<usize, IndexError> {
    let OpenTree { pool, mut reader, tree } = open_tree(path, 16)?;
    let mut out = Vec::new();
    tree.range(&pool, &mut reader, &key_bytes(&[2]), &[], &mut out)
}

/// `small_tree` in a temporary directory (its seek answers 38 entries), damaged by `forge`
/// (re-checksummed nodes, see `forge_node`): the seek must then call node `node` corrupt.
fn assert_forged_tree_is_corrupt(node: u64, forge: impl FnOnce(&Path)) {
    let (_dir, path) = small_tree();
    assert_eq!(seek_all(&path).unwrap(), 38);
    forge(&path);
    let r = seek_all(&path);
    assert!(matches!(r, Err(IndexError::NodeCorrupt { node: n, .. }) if n == node), "{r:?}");
}

/// Found by fuzz/btree_seek: a re-checksummed leaf whose keys are out of order tripped a
/// debug assertion in `range` (a panic in debug builds); it is a corrupt node.
#[test]
fn keys_out_of_order_are_corrupt() {
    // First key of leaf 3 (node 3) below the range's lower bound.
    assert_forged_tree_is_corrupt(3, |path| forge_node(path, 3, |n| n[40..48].copy_from_slice(&key_bytes(&[-5]))));
}

/// A meta-kind node where a leaf belongs passes `verify` (meta nodes have no entry bounds);
/// reading its "entries" indexed past the node. It is a corrupt node.
#[test]
fn a_meta_node_on_the_path_is_corrupt() {
    assert_forged_tree_is_corrupt(1, |path| {
        forge_node(path, 1, |n| {
            n[6..8].copy_from_slice(&3u16.to_le_bytes());
            n[10..12].copy_from_slice(&u16::MAX.to_le_bytes());
        })
    });
}

/// A leaf chain that points back (a cycle) is corrupt at once, even when a forged meta node
/// claims enough leaves for the walk to go on for ever.
#[test]
fn a_leaf_chain_pointing_back_is_corrupt() {
    use flashscan_index::btree::node::{NODE_SIZE_BYTES, TreeMeta};
    assert_forged_tree_is_corrupt(2, |path| {
        let mut meta_node = vec![0u8; NODE_SIZE_BYTES];
        {
            use std::os::unix::fs::FileExt;
            std::fs::File::open(path).unwrap().read_exact_at(&mut meta_node, 0).unwrap();
        }
        let meta = TreeMeta::read(&meta_node, path).unwrap();
        let forged = TreeMeta { leaf_count: 1 << 40, node_count: 1 << 41, ..meta };
        forge_node(path, 0, |n| forged.write(n));
        forge_node(path, 2, |n| n[24..32].copy_from_slice(&1u64.to_le_bytes()));
    });
}
