//! Scans read through the buffer pool's streaming path: a page dirty in the pool is what
//! the scan sees, not the file's bytes.

mod common;

use std::sync::Arc;

use flashscan_buffer::{BufferPool, Lsn, PageKey, PageReader};
use flashscan_exec::queries::run_on_batches;
use flashscan_exec::{run_query, BuiltinQuery, CacheMode, ExecError, ScanOptions};
use flashscan_io::{open_engine, EngineConfig, EngineKind, FileSet, OpenMode};

use common::{ToyTable, TOY_PAGE_SIZE_BYTES};

fn options(cache_mode: CacheMode) -> ScanOptions {
    ScanOptions { io_size_bytes: 64 * 1024, queue_depth: 4, auto_depth: false, thread_count: 2, cache_mode, check: false, engine_kind: EngineKind::Auto }
}

fn flip_file_byte(path: &std::path::Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0xFF;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_scan_sees_the_pools_version_of_a_dirty_page() {
    let dir = tempfile::tempdir().unwrap();
    let batches = common::lineitem(0.005, 1);
    let table = ToyTable::write(dir.path(), &batches, 61, 2);
    let expected = run_on_batches(&BuiltinQuery::Sum4, &batches, 1).unwrap();
    let run = &table.runs[1];
    assert!(run.page_count >= 3);
    let offset = run.offset_bytes + 2 * TOY_PAGE_SIZE_BYTES as u64;
    assert_eq!(offset % 8192, 0, "toy pages sit on pool page boundaries");

    // The page, read into the process's pool and marked dirty with its good bytes.
    let pool = BufferPool::global();
    let files = Arc::new(FileSet::open(std::slice::from_ref(&run.path), OpenMode { direct: false, write: false }).unwrap());
    let engine = open_engine(EngineKind::Psync, files, EngineConfig::for_depth(1, 8192), &mut |_| {}).unwrap();
    let mut reader: PageReader = PageReader::new(pool, engine).unwrap();
    let key = PageKey::new(reader.file_id(0), offset / 8192);
    let guard = pool.read_page(&mut reader, key, |_| Ok::<(), flashscan_buffer::BufferError>(())).unwrap();
    let mut page = guard.into_mut();
    page.mark_dirty(Lsn::ZERO);
    drop(page);

    // The file's copy is damaged: a scan from the file would fail; through the pool it
    // sees the good (dirty) page, in every cache mode.
    flip_file_byte(&run.path, offset + 17);
    // (Not cold: dropping the machine's page cache would disturb others' measurements.)
    for mode in [CacheMode::Warm, CacheMode::Direct] {
        let report = run_query(&table, &BuiltinQuery::Sum4, &options(mode)).unwrap_or_else(|e| panic!("{mode:?}: the scan read the file's damaged page, not the pool's: {e}"));
        assert_eq!(report.result, expected, "{mode:?}");
        assert_eq!(report.figures.rows_scanned, table.row_count);
    }

    // And the other way round: the file is fine again, the pool's version is damaged.
    flip_file_byte(&run.path, offset + 17);
    let guard = pool.get_resident(key).expect("a dirty page stays in the pool");
    let mut page = guard.into_mut();
    page.data_mut()[17] ^= 0xFF;
    page.mark_dirty(Lsn::ZERO);
    drop(page);
    let err = run_query(&table, &BuiltinQuery::Sum4, &options(CacheMode::Warm)).unwrap_err();
    match &err {
        ExecError::Corrupt { path, offset_bytes, .. } => {
            assert_eq!(path, &run.path);
            assert_eq!(*offset_bytes, offset);
        }
        other => panic!("expected the pool's damaged page, got {other}"),
    }

    // Thrown away (a dropped table's pages): scans read the file again.
    assert_eq!(pool.discard_file(key.file_index).unwrap(), 1);
    assert_eq!(pool.dirty_count(), 0);
    assert_eq!(run_query(&table, &BuiltinQuery::Sum4, &options(CacheMode::Warm)).unwrap().result, expected);
}
