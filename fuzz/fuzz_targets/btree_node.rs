//! Any bytes → the B+tree node readers return Ok or Err, never panic: `node::verify`,
//! `TreeMeta::read`, and on a verified node every `NodeView` accessor a seek uses
//! (`key`, `value`, `child`, `lower_bound`).
//!
//! Byte 0 picks the mode: raw node; node with magic, version and number stamped and the
//! checksum recomputed; or a header sealed by `node::seal` from input fields (biased to
//! valid kinds and widths) over input entries.
#![no_main]

mod common;

use std::path::Path;

use common::Cursor;
use flashscan_index::btree::node::{
    self, NodeView, TreeMeta, CHILD_BYTES, NODE_FORMAT_VERSION, NODE_HEADER_BYTES, NODE_KIND_INNER, NODE_KIND_LEAF, NODE_KIND_META, NODE_MAGIC,
    NODE_SIZE_BYTES,
};
use flashscan_index::locator::{RowLocator, LOCATOR_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor::new(data);
    let mode = c.u8();
    let expected = if mode & 0x40 != 0 { 0 } else { 1 + (c.u8() % 4) as u64 };
    let key_width = 8 * (1 + (c.u8() % 4) as usize);
    let probe_len = (c.u8() as usize) % (key_width + 1);
    let probe = c.bytes(probe_len).to_vec();
    let mut bytes = vec![0u8; NODE_SIZE_BYTES];
    match mode % 3 {
        0 => {
            let rest = c.rest();
            let n = rest.len().min(NODE_SIZE_BYTES);
            bytes[..n].copy_from_slice(&rest[..n]);
        }
        1 => {
            let rest = c.rest();
            let n = rest.len().min(NODE_SIZE_BYTES);
            bytes[..n].copy_from_slice(&rest[..n]);
            bytes[..4].copy_from_slice(&NODE_MAGIC);
            bytes[4..6].copy_from_slice(&NODE_FORMAT_VERSION.to_le_bytes());
            bytes[16..24].copy_from_slice(&expected.to_le_bytes());
            let crc = node::compute_checksum(&bytes);
            bytes[32..36].copy_from_slice(&crc.to_le_bytes());
        }
        _ => {
            let kind_byte = c.u8();
            let kind = match kind_byte % 4 {
                0 => NODE_KIND_LEAF,
                1 => NODE_KIND_INNER,
                2 => NODE_KIND_META,
                _ => c.u16(),
            };
            let level = if kind_byte & 0x10 != 0 { c.u16() } else if kind == NODE_KIND_INNER { 1 } else { 0 };
            let value_width = if kind_byte & 0x20 != 0 { c.u16() } else if kind == NODE_KIND_INNER { CHILD_BYTES as u16 } else { LOCATOR_BYTES as u16 };
            let width = if kind_byte & 0x40 != 0 { c.u16() } else { key_width as u16 };
            let count = if kind_byte & 0x80 != 0 { c.u16() } else { c.u16() % 400 };
            let sibling = c.u64();
            let rest = c.rest();
            let n = rest.len().min(NODE_SIZE_BYTES - NODE_HEADER_BYTES);
            bytes[NODE_HEADER_BYTES..NODE_HEADER_BYTES + n].copy_from_slice(&rest[..n]);
            // Written field by field: `node::seal` is the writer and asserts sane headers.
            bytes[..4].copy_from_slice(&NODE_MAGIC);
            for (at, v) in [(4, NODE_FORMAT_VERSION), (6, kind), (8, level), (10, count), (12, width), (14, value_width)] {
                bytes[at..at + 2].copy_from_slice(&v.to_le_bytes());
            }
            bytes[16..24].copy_from_slice(&expected.to_le_bytes());
            bytes[24..32].copy_from_slice(&sibling.to_le_bytes());
            let crc = node::compute_checksum(&bytes);
            bytes[32..36].copy_from_slice(&crc.to_le_bytes());
        }
    }

    let path = Path::new("fuzz.fsbt");
    let _ = TreeMeta::read(&bytes, path);
    if let Ok(header) = node::verify(&bytes, expected, key_width, path) {
        if header.kind == NODE_KIND_META {
            return;
        }
        let view = NodeView::new(&bytes, header);
        let at = view.lower_bound(&probe);
        assert!(at <= view.count());
        for i in 0..view.count() {
            assert_eq!(view.key(i).len(), key_width);
            let value = view.value(i);
            if header.kind == NODE_KIND_INNER {
                let _ = view.child(i);
            } else {
                let _ = RowLocator::decode(value);
            }
        }
    }
});
