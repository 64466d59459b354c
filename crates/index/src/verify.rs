//! Index verification for `flashscan verify`: every node of every index file read and
//! checked (checksum, magic, version, node number, kind, widths, entry count), the meta node
//! against the catalog, and the file's length against the node count (checked before any
//! node is read). Failures go into the storage crate's `VerifyReport`.

use std::os::unix::fs::FileExt;

use flashscan_storage::verify::VerifyReport;
use flashscan_storage::Database;

use crate::btree::node::{verify, NODE_SIZE_BYTES};
use crate::btree::TreeMeta;
use crate::catalog::IndexCatalog;

const REBUILD: &str = "lookups through it fail: drop it (flashscan index drop DB TABLE INDEX) and create it again";

/// Checks the indexes on `table` (all tables when `None`) into `report`.
pub fn verify_indexes(db: &Database, table: Option<&str>, report: &mut VerifyReport) {
    let catalog = match IndexCatalog::from_catalog(db.dir(), db.catalog()) {
        Ok(c) => c,
        Err(e) => {
            report.fail("indexes", &IndexCatalog::path(db.dir()), 0, e.to_string(), "see the message");
            return;
        }
    };
    for index in catalog.indexes.iter().filter(|i| table.is_none_or(|t| i.table.eq_ignore_ascii_case(t))) {
        report.counts.indexes_count += 1;
        let object = format!("{}.{}", index.table, index.name);
        let path = db.resolve(&index.file);
        let file = match flashscan_storage::fs_safe::open_read_nofollow(&path) {
            Ok(f) => f,
            Err(e) => {
                report.fail(&object, &path, 0, format!("cannot be opened: {e}"), REBUILD);
                continue;
            }
        };
        let file_bytes = match file.metadata() {
            Ok(m) => m.len(),
            Err(e) => {
                report.fail(&object, &path, 0, format!("cannot be checked: {e}"), REBUILD);
                continue;
            }
        };
        let expected_bytes = index.tree.node_count.checked_mul(NODE_SIZE_BYTES as u64);
        if expected_bytes != Some(file_bytes) {
            report.fail(&object, &path, 0, format!("file is {file_bytes} bytes, the catalog says {} nodes of 8 KB", index.tree.node_count), REBUILD);
            continue;
        }
        let mut node = vec![0u8; NODE_SIZE_BYTES];
        let key_width = index.tree.key_width_bytes as usize;
        for n in 0..index.tree.node_count {
            report.counts.index_nodes_count += 1;
            let offset = n * NODE_SIZE_BYTES as u64;
            if let Err(e) = file.read_exact_at(&mut node, offset) {
                report.fail(&object, &path, offset, format!("cannot be read: {e}"), REBUILD);
                break;
            }
            let checked = if n == 0 {
                TreeMeta::read(&node, &path).and_then(|meta| {
                    if meta != index.tree {
                        Err(crate::error::IndexError::NodeCorrupt { path: path.clone(), node: 0, reason: "the meta node does not match the catalog's entry".into() })
                    } else {
                        Ok(())
                    }
                })
            } else {
                verify(&node, n, key_width, &path).map(drop)
            };
            if let Err(e) = checked {
                report.fail(&object, &path, offset, e.to_string(), REBUILD);
            }
        }
    }
}
