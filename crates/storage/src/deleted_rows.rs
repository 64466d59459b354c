//! A heap table's deleted rows on disk: the rows of its pages that DELETE or UPDATE took
//! away, as a sorted list of row ids (page and slot), written by the checkpoint beside the
//! pages it writes (SQL Server's delete bitmap; Delta Lake's and Iceberg's deletion
//! vectors). Pages are never rewritten to drop a row: a scan skips the rows listed here,
//! so no page format changes and every page kind (plain, row- and page-compressed) takes
//! deletes alike; readers ask which rows are live through `live_rows`. Space comes back when
//! the table is rebuilt (docs/architecture.md).
//!
//! Layout (docs/formats.md, "Deleted rows file"), little-endian:
//! `magic "FSDEL001"` · `row count: u64` · `row ids: u64 × count, strictly ascending` ·
//! `crc32c of everything before: u32`. A file is written once under a new name
//! (`TABLE.gGEN.del`, O_EXCL|O_NOFOLLOW, fsynced) and named by the catalog commit that
//! makes it current; the one it replaces is listed as unreferenced and swept.

use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::StorageError;
use crate::fs_safe::{create_new, open_read_nofollow};

const MAGIC: &[u8; 8] = b"FSDEL001";
const HEADER_BYTES: usize = 8 + 8;
const CHECKSUM_BYTES: usize = 4;
/// A file of more ids than this is refused as damaged before its bytes are read: 2^32 rows
/// is 32 GiB of ids, beyond any table this version deletes from.
pub const DELETED_ROWS_MAX: u64 = 1 << 32;

/// The catalog's pointer to a table's deleted rows file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedRowsMeta {
    /// Path relative to the database directory: `TABLE.gGEN.del`.
    pub path: String,
    pub row_count: u64,
}

/// The file name a checkpoint of catalog generation `generation` writes for `table`.
pub fn deleted_rows_file_name(table: &str, generation: u64) -> String {
    format!("{table}.g{generation}.del")
}

/// The file's bytes for `row_ids` (strictly ascending: asserted).
pub fn encode_deleted_rows(row_ids: &[u64]) -> Vec<u8> {
    debug_assert!(row_ids.windows(2).all(|w| w[0] < w[1]), "row ids strictly ascending");
    let mut out = Vec::with_capacity(HEADER_BYTES + row_ids.len() * 8 + CHECKSUM_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(row_ids.len() as u64).to_le_bytes());
    for id in row_ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The row ids of a file's bytes: every field checked (magic, length, checksum, order),
/// so damage is an error naming what is wrong, never a wrong set of rows.
pub fn decode_deleted_rows(bytes: &[u8]) -> Result<Vec<u64>, String> {
    if bytes.len() < HEADER_BYTES + CHECKSUM_BYTES {
        return Err(format!("{} bytes, shorter than a header and checksum", bytes.len()));
    }
    if &bytes[..8] != MAGIC {
        return Err("not a deleted rows file (magic)".into());
    }
    let count = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    if count > DELETED_ROWS_MAX {
        return Err(format!("{count} row ids, more than {DELETED_ROWS_MAX}"));
    }
    let expected = HEADER_BYTES as u64 + count * 8 + CHECKSUM_BYTES as u64;
    if bytes.len() as u64 != expected {
        return Err(format!("{} bytes, {count} row ids need {expected}", bytes.len()));
    }
    let body_end = bytes.len() - CHECKSUM_BYTES;
    let stored = u32::from_le_bytes(bytes[body_end..].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&bytes[..body_end]);
    if stored != computed {
        return Err(format!("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"));
    }
    let ids: Vec<u64> = bytes[HEADER_BYTES..body_end].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
    if let Some(w) = ids.windows(2).find(|w| w[0] >= w[1]) {
        return Err(format!("row ids out of order ({:#x} then {:#x})", w[0], w[1]));
    }
    Ok(ids)
}

/// Writes a new deleted rows file at `path` (which must not exist) and makes it durable
/// (the file; the directory is the caller's, synced with its other new files).
pub fn write_deleted_rows(path: &Path, row_ids: &[u64]) -> Result<(), StorageError> {
    let bytes = encode_deleted_rows(row_ids);
    let mut f = create_new(path).map_err(|e| StorageError::io("creating", path, e))?;
    f.write_all(&bytes).map_err(|e| StorageError::io("writing", path, e))?;
    f.sync_all().map_err(|e| StorageError::io("syncing", path, e))?;
    Ok(())
}

/// Reads and verifies a table's deleted rows file (the catalog's entry, relative to `dir`).
pub fn read_deleted_rows(dir: &Path, meta: &DeletedRowsMeta) -> Result<Vec<u64>, StorageError> {
    let path = dir.join(&meta.path);
    let mut bytes = Vec::new();
    open_read_nofollow(&path).and_then(|mut f| f.read_to_end(&mut bytes)).map_err(|e| StorageError::io("reading", &path, e))?;
    let ids = decode_deleted_rows(&bytes).map_err(|reason| StorageError::CatalogCorrupt { path: path.clone(), reason: format!("deleted rows file: {reason}") })?;
    if ids.len() as u64 != meta.row_count {
        return Err(StorageError::CatalogCorrupt { path, reason: format!("deleted rows file holds {} rows, the catalog says {}", ids.len(), meta.row_count) });
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn round_trips(mut ids in prop::collection::vec(any::<u64>(), 0..300)) {
            ids.sort_unstable();
            ids.dedup();
            prop_assert_eq!(decode_deleted_rows(&encode_deleted_rows(&ids)).unwrap(), ids);
        }

        #[test]
        fn any_flipped_bit_is_refused(mut ids in prop::collection::vec(any::<u64>(), 1..50), bit in any::<usize>()) {
            ids.sort_unstable();
            ids.dedup();
            let mut bytes = encode_deleted_rows(&ids);
            let bit = bit % (bytes.len() * 8);
            bytes[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(decode_deleted_rows(&bytes).is_err());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_deleted_rows(&bytes);
        }
    }

    #[test]
    fn a_file_is_written_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let name = deleted_rows_file_name("t", 7);
        write_deleted_rows(&dir.path().join(&name), &[1, 5, 9]).unwrap();
        assert!(write_deleted_rows(&dir.path().join(&name), &[1]).is_err(), "never over an existing file");
        let meta = DeletedRowsMeta { path: name, row_count: 3 };
        assert_eq!(read_deleted_rows(dir.path(), &meta).unwrap(), vec![1, 5, 9]);
        let wrong = DeletedRowsMeta { row_count: 4, ..meta };
        assert!(read_deleted_rows(dir.path(), &wrong).is_err());
    }
}
