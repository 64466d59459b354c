//! Any index file → `BTree::open`, `range`, `seek` and `sample_keys` return Ok or Err,
//! never panic, never loop without bound.
//!
//! Byte 0 picks the mode: a tree bulk built by `TreeBuilder` from input keys (tiny nodes,
//! so trees are several levels deep), then input-chosen mutations in node headers and
//! entries, every checksum recomputed; or a file of input nodes behind a meta node written
//! from input fields, each node's magic, version and number stamped and checksum computed.
#![no_main]

mod common;

use std::sync::Arc;

use common::{scratch_dir, Cursor};
use flashscan_buffer::{BufferPool, PageReader};
use flashscan_index::btree::node::{self, TreeMeta, NODE_FORMAT_VERSION, NODE_MAGIC, NODE_SIZE_BYTES};
use flashscan_index::btree::{BTree, BuildOptions, TreeBuilder};
use flashscan_index::RowLocator;
use flashscan_io::{open_engine, EngineConfig, EngineKind, FileSet, OpenMode};
use libfuzzer_sys::fuzz_target;

fn reseal(file: &mut [u8]) {
    for node in file.chunks_exact_mut(NODE_SIZE_BYTES) {
        let crc = node::compute_checksum(node);
        node[32..36].copy_from_slice(&crc.to_le_bytes());
    }
}

fn built(c: &mut Cursor, key_width: usize) -> Option<Vec<u8>> {
    let path = scratch_dir().join("build.fsbt");
    let options = if c.u8() & 1 == 0 {
        BuildOptions { leaf_entries_max: 1 + (c.u8() % 5) as usize, inner_entries_max: 2 + (c.u8() % 4) as usize }
    } else {
        BuildOptions::full(key_width)
    };
    // Few distinct key values, so duplicates span leaves.
    let count = (c.u8() % 120) as usize;
    let mut keys: Vec<Vec<u8>> = (0..count)
        .map(|_| {
            let mut k = vec![0x80u8; key_width];
            let b = c.u8();
            k[key_width - 1] = b % 32;
            if b & 0x80 != 0 {
                k[0] = c.u8();
            }
            k
        })
        .collect();
    keys.sort();
    let mut builder = TreeBuilder::create(&path, key_width, options).ok()?;
    for (i, k) in keys.iter().enumerate() {
        builder.push(k, RowLocator { page_id: i as u64 / 3, partition: 0, slot: (i % 3) as u16 }).ok()?;
    }
    builder.finish().ok()?;
    let mut file = std::fs::read(&path).ok()?;
    // Mutations aimed at node headers and the first entries, where the structure is.
    let nodes = file.len() / NODE_SIZE_BYTES;
    for _ in 0..c.u8() % 6 {
        let node = c.u8() as usize % nodes;
        let at = node * NODE_SIZE_BYTES + (c.u16() as usize % 320);
        let width = [1usize, 2, 8][c.u8() as usize % 3];
        let v = c.u64().to_le_bytes();
        file[at..at + width].copy_from_slice(&v[..width]);
    }
    reseal(&mut file);
    Some(file)
}

fn assembled(c: &mut Cursor, key_width: usize) -> Vec<u8> {
    let nodes = 2 + (c.u8() % 6) as usize;
    let mut file = vec![0u8; nodes * NODE_SIZE_BYTES];
    let meta = TreeMeta {
        root_node: (c.u8() % nodes as u8) as u64,
        height: (c.u8() % 5) as u16,
        key_width_bytes: key_width as u16,
        entry_count: if c.u8() & 1 == 0 { c.u8() as u64 } else { c.u64() },
        first_leaf_node: if c.u8() & 1 == 0 { (c.u8() % nodes as u8) as u64 } else { c.u64() },
        leaf_count: if c.u8() & 1 == 0 { (c.u8() % 8) as u64 } else { c.u64() },
        leaf_entries: c.u16(),
        node_count: if c.u8() & 1 == 0 { nodes as u64 } else { c.u64() },
    };
    meta.write(&mut file[..NODE_SIZE_BYTES]);
    let rest = c.rest();
    let chunk = rest.len().div_ceil(nodes - 1).max(1);
    for (i, part) in rest.chunks(chunk).enumerate().take(nodes - 1) {
        let node = &mut file[(i + 1) * NODE_SIZE_BYTES..(i + 2) * NODE_SIZE_BYTES];
        node[..part.len().min(NODE_SIZE_BYTES)].copy_from_slice(&part[..part.len().min(NODE_SIZE_BYTES)]);
        node[..4].copy_from_slice(&NODE_MAGIC);
        node[4..6].copy_from_slice(&NODE_FORMAT_VERSION.to_le_bytes());
        node[16..24].copy_from_slice(&((i + 1) as u64).to_le_bytes());
    }
    reseal(&mut file[NODE_SIZE_BYTES..]);
    file
}

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor::new(data);
    let mode = c.u8();
    let key_width = 8 * (1 + (c.u8() % 4) as usize);
    let lo_len = c.u8() as usize % (key_width + 1);
    let lo = c.bytes(lo_len).to_vec();
    let hi_len = c.u8() as usize % (key_width + 1);
    let hi = c.bytes(hi_len).to_vec();
    let file = if mode & 1 == 0 {
        match built(&mut c, key_width) {
            Some(f) => f,
            None => return,
        }
    } else {
        assembled(&mut c, key_width)
    };
    let path = scratch_dir().join("index.fsbt");
    std::fs::write(&path, &file).expect("writing the index file");

    let files = Arc::new(FileSet::open(&[path.clone()], OpenMode { direct: false, write: false }).expect("opening the index file"));
    let engine = open_engine(EngineKind::Psync, files, EngineConfig::for_depth(1, NODE_SIZE_BYTES), &mut |_| {}).expect("psync engine");
    let pool = BufferPool::with_frames(16).expect("pool");
    let mut reader: PageReader = PageReader::new(&pool, engine).expect("page reader");
    let Ok(tree) = BTree::open(&pool, &mut reader, 0, &path) else { return };
    let mut out = Vec::new();
    let _ = tree.range(&pool, &mut reader, &lo, &hi, &mut out);
    out.clear();
    let _ = tree.seek(&pool, &mut reader, &lo, &mut out);
    let _ = tree.sample_keys((mode >> 1) as usize % 8, 7);
});
