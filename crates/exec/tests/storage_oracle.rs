//! The whole path: lineitem loaded through flashscan-storage (heap pages, 3 partitions),
//! scanned through flashscan (reader, decoder, kernels), each answer equal to the same
//! query over the tpchgen-arrow batches (themselves checked against Arrow's kernels in
//! oracle.rs), in every storage format (heap, row, page, columnstore, columnstore_archive),
//! and without the rows a DELETE removed. Buffered reads, since the temp directory may
//! refuse O_DIRECT.

mod common;

use flashscan_exec::queries::{run_on_batches, NeedleSpec};
use flashscan_exec::scan::ReadConfig;
use flashscan_exec::{
    open_source, run_query, scan_batches, BatchSink, BuiltinQuery, CacheMode, ColumnRange, ExecError, ScanFilter, ScanOptions, StorageTable,
    TableSource,
};
use flashscan_exec::segments::set_vector_kernels;
use flashscan_io::EngineKind;
use flashscan_storage::columnstore::CodecId;
use flashscan_storage::load::tpch::tpch_source;
use flashscan_storage::testkit::mark_rows_deleted;
use flashscan_storage::{load_table, rebuild_table, Database, LoadOptions, PageId, RebuildOptions, RebuildTarget, RowId, PAGE_SIZE_BYTES};

const SF: f64 = 0.02;

/// lineitem at `SF` loaded (heap pages, `partitions` hash partitions) into a new
/// temporary database.
fn lineitem_db(partitions: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let load = LoadOptions { partition_count: partitions, threads: 2, ..LoadOptions::default() };
    load_table(dir.path(), tpch_source("lineitem", SF, 2).unwrap(), &load).unwrap();
    dir
}

#[test]
fn every_query_through_storage_equals_the_query_over_generated_batches() {
    let dir = lineitem_db(3);
    let db = Database::open(dir.path()).unwrap();
    let table = StorageTable::new(&db, "lineitem").unwrap();
    let batches = common::lineitem(SF, 1);
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    assert_eq!(table.row_count(), rows);
    assert_eq!(table.partition_count(), 3);

    for (i, query) in all_queries().iter().enumerate() {
        let report = run_query(&table, query, &options(i, CacheMode::Warm)).unwrap();
        let expected = run_on_batches(query, &batches, 1).unwrap();
        // Storage keeps strings as Utf8 where tpchgen makes Utf8View: same values either way.
        assert_eq!(report.result, expected, "{}", query.name());
        assert_eq!(report.figures.rows_scanned, rows, "{}", query.name());
        assert_eq!(report.figures.pages_read, table.meta().page_count(), "{}", query.name());
    }
}

fn all_queries() -> Vec<BuiltinQuery> {
    vec![
        BuiltinQuery::Count,
        BuiltinQuery::Count11,
        BuiltinQuery::Sum4,
        BuiltinQuery::Q1,
        BuiltinQuery::Needle(NeedleSpec::default()),
        BuiltinQuery::Needle(NeedleSpec { pattern: "Tiresias".into(), ..NeedleSpec::default() }),
    ]
}

fn options(i: usize, cache_mode: CacheMode) -> ScanOptions {
    ScanOptions {
        io_size_bytes: [64 * 1024, 1 << 20, 256 * 1024][i % 3],
        queue_depth: [2, 8, 5][i % 3],
        // One case in three finds its depth while scanning: answers must not depend on it.
        auto_depth: i % 3 == 2,
        thread_count: [1, 2, 3][i % 3],
        cache_mode,
        check: false,
        engine_kind: EngineKind::Auto,
    }
}

/// One load, rebuilt into each format in turn (each rebuild reads the previous format):
/// every query's answer equals the oracle's in all five.
#[test]
fn every_query_gives_the_same_answer_in_all_five_formats() {
    let dir = lineitem_db(3);
    let batches = common::lineitem(SF, 1);
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    let expected: Vec<_> = all_queries().iter().map(|q| run_on_batches(q, &batches, 1).unwrap()).collect();

    // Small row groups: several per partition, and one read may cut a segment in two.
    let rebuild = RebuildOptions { row_group_rows: Some(20_000), ..RebuildOptions::default() };
    for (format, compression) in [("heap", None), ("heap_page", Some("page")), ("columnstore", Some("columnstore")), ("heap_row", Some("row")), ("columnstore_archive", Some("columnstore_archive"))] {
        if let Some(c) = compression {
            rebuild_table(dir.path(), "lineitem", RebuildTarget::parse(c).unwrap(), &rebuild).unwrap();
        }
        let db = Database::open(dir.path()).unwrap();
        assert_eq!(db.table("lineitem").unwrap().format, format);
        let source = open_source(&db, "lineitem").unwrap();
        assert_eq!(source.row_count(), rows, "{format}");
        for (i, query) in all_queries().iter().enumerate() {
            let report = run_query(source.as_ref(), query, &options(i, CacheMode::Warm)).unwrap();
            assert_eq!(report.result, expected[i], "{} on {format}", query.name());
            assert_eq!(report.format, format);
            assert_eq!(report.figures.rows_scanned + report.skipped.rows_skipped, rows, "{} on {format}", query.name());
            // Heap tables search their depth when asked to; column stores keep the fixed default.
            let o = options(i, CacheMode::Warm);
            let searched = o.auto_depth && !format.starts_with("columnstore");
            assert_eq!(report.queue_depth_mode, if searched { "auto" } else { "fixed" }, "{} on {format}", query.name());
            if o.auto_depth && !searched {
                assert_eq!(report.queue_depth, flashscan_exec::limits::SCAN_QUEUE_DEPTH_DEFAULT.min(report.figures.read_ios_count.max(1) as u32));
            }
        }
    }
}

/// SUM of 4 and Q1 on the column store give the oracle's answers on both paths: segments
/// decoded a vector at a time by the kernels (fastlanes segments among them: row groups of
/// a multiple of 1,024 rows make it the smallest), and whole columns decoded into batches.
#[test]
fn column_store_vector_kernels_equal_the_whole_column_path() {
    let dir = lineitem_db(2);
    let batches = common::lineitem(SF, 1);
    let queries = [BuiltinQuery::Sum4, BuiltinQuery::Q1];
    let expected: Vec<_> = queries.iter().map(|q| run_on_batches(q, &batches, 1).unwrap()).collect();
    for format in ["columnstore", "columnstore_archive"] {
        let rebuild = RebuildOptions { row_group_rows: Some(20_480), ..RebuildOptions::default() };
        rebuild_table(dir.path(), "lineitem", RebuildTarget::parse(format).unwrap(), &rebuild).unwrap();
        let db = Database::open(dir.path()).unwrap();
        let meta = db.table("lineitem").unwrap();
        let table = flashscan_exec::ColumnStoreTable::new(&db, meta).unwrap();
        let fastlanes = table.row_groups().iter().flat_map(|g| g.columns.iter()).filter(|(_, _, stats)| stats.codec == CodecId::FastLanes).count();
        assert!(fastlanes > 0, "no fastlanes segment in {format}");
        for vector_kernels in [true, false] {
            set_vector_kernels(vector_kernels);
            for (i, query) in queries.iter().enumerate() {
                let report = run_query(&table, query, &options(i, CacheMode::Warm)).unwrap();
                assert_eq!(report.result, expected[i], "{} on {format}, vector kernels {vector_kernels}", query.name());
            }
        }
        set_vector_kernels(true);
    }
}

/// The column store reads only the columns a query needs: SUM of 4 columns reads a
/// fraction of the table, and COUNT(*) only the row groups' metadata pages.
#[test]
fn column_store_reads_only_the_projected_columns() {
    let dir = lineitem_db(2);
    rebuild_table(dir.path(), "lineitem", RebuildTarget::parse("columnstore").unwrap(), &RebuildOptions::default()).unwrap();
    let db = Database::open(dir.path()).unwrap();
    let size_bytes = db.table("lineitem").unwrap().size_bytes;
    let source = open_source(&db, "lineitem").unwrap();
    let sum4 = run_query(source.as_ref(), &BuiltinQuery::Sum4, &options(1, CacheMode::Warm)).unwrap();
    let count11 = run_query(source.as_ref(), &BuiltinQuery::Count11, &options(1, CacheMode::Warm)).unwrap();
    let count = run_query(source.as_ref(), &BuiltinQuery::Count, &options(1, CacheMode::Warm)).unwrap();
    assert!(sum4.figures.bytes_read * 2 < size_bytes, "sum4 read {} of {size_bytes} bytes", sum4.figures.bytes_read);
    assert!(sum4.figures.bytes_read < count11.figures.bytes_read, "sum4 {} vs count11 {}", sum4.figures.bytes_read, count11.figures.bytes_read);
    // One 8 KB metadata page per row group (one row group per partition here).
    assert_eq!(count.figures.bytes_read, 2 * 8192);
    assert!(sum4.figures.decode_s > 0.0);
}

struct Collect(Vec<arrow::record_batch::RecordBatch>);

impl BatchSink for Collect {
    fn consume(&mut self, batch: &arrow::record_batch::RecordBatch) -> Result<(), ExecError> {
        self.0.push(batch.clone());
        Ok(())
    }
}

/// Row groups whose min/max miss the filter are not read, and no matching row is lost:
/// lineitem is generated in l_orderkey order, so row groups hold narrow key ranges.
#[test]
fn column_store_skips_row_groups_by_min_max_without_losing_rows() {
    let dir = tempfile::tempdir().unwrap();
    let load = LoadOptions { partition_count: 2, threads: 1, ..LoadOptions::default() };
    load_table(dir.path(), tpch_source("lineitem", SF, 1).unwrap(), &load).unwrap();
    let rebuild = RebuildOptions { row_group_rows: Some(10_000), ..RebuildOptions::default() };
    rebuild_table(dir.path(), "lineitem", RebuildTarget::parse("columnstore").unwrap(), &rebuild).unwrap();
    let db = Database::open(dir.path()).unwrap();
    let source = open_source(&db, "lineitem").unwrap();
    let key = source.schema().index_of("l_orderkey").unwrap();
    let key_max = 5_000i64;
    let filter = ScanFilter { ranges: vec![ColumnRange { column: key, min: None, max: Some(key_max) }] };
    let config = ReadConfig { io_size_bytes: 256 * 1024, queue_depth: 4, thread_count: 2, direct: false, engine_kind: EngineKind::Auto };
    let (sinks, stats) = scan_batches(source.as_ref(), &[key], &filter, &config, &|_| Ok(Collect(Vec::new()))).unwrap();
    let kept: usize = sinks
        .iter()
        .flat_map(|s| s.0.iter())
        .map(|b| {
            let keys = b.column(0).as_any().downcast_ref::<arrow::array::Int64Array>().unwrap();
            keys.values().iter().filter(|k| **k <= key_max).count()
        })
        .sum();
    let expected: usize = batches_matching(key_max);
    assert_eq!(kept, expected);
    assert!(stats.skipped.row_groups_skipped > 0, "{:?}", stats.skipped);
    assert!(stats.skipped.row_groups_skipped < stats.skipped.row_groups_total);
}

fn batches_matching(key_max: i64) -> usize {
    common::lineitem(SF, 1)
        .iter()
        .map(|b| {
            let column = b.column(b.schema().index_of("l_orderkey").unwrap());
            let keys = column.as_any().downcast_ref::<arrow::array::Int64Array>().unwrap();
            keys.values().iter().filter(|k| **k <= key_max).count()
        })
        .sum()
}

/// The row ids of `table`'s rows whose `l_orderkey` satisfies `deleted`, and how many of its
/// pages hold one: every page decoded in slot order (row i of a page is slot i), whatever
/// its heap format.
fn row_ids_of_orders(db: &Database, table: &str, deleted: &dyn Fn(i64) -> bool) -> (Vec<u64>, u64) {
    let meta = db.table(table).unwrap();
    let key = meta.columns.iter().position(|c| c.name == "l_orderkey").unwrap();
    let mut decoder = flashscan_storage::HeapDecoder::try_new(meta, &[key]).unwrap();
    let (mut ids, mut pages) = (Vec::new(), 0);
    for run in meta.partitions.iter().flat_map(|p| &p.runs) {
        let path = db.file_path(run);
        let bytes = std::fs::read(&path).unwrap();
        for i in 0..run.page_count as u64 {
            let page_id = run.first_page_id + i;
            let offset = (run.offset_bytes + i * PAGE_SIZE_BYTES as u64) as usize;
            decoder.push_page(&bytes[offset..offset + PAGE_SIZE_BYTES], page_id, &path, offset as u64).unwrap();
            let keys = decoder.finish();
            let keys = keys.column(0).as_any().downcast_ref::<arrow::array::Int64Array>().unwrap();
            let before = ids.len();
            ids.extend(keys.values().iter().enumerate().filter(|(_, k)| deleted(**k)).map(|(slot, _)| RowId::in_page(PageId(page_id), slot as u32).unwrap().0));
            pages += u64::from(ids.len() > before);
        }
    }
    ids.sort_unstable();
    (ids, pages)
}

/// The generated lineitem rows whose order `deleted` does not name.
fn live_lineitem(deleted: &dyn Fn(i64) -> bool) -> Vec<arrow::record_batch::RecordBatch> {
    common::lineitem(SF, 1)
        .iter()
        .map(|b| {
            let keys = b.column(b.schema().index_of("l_orderkey").unwrap()).as_any().downcast_ref::<arrow::array::Int64Array>().unwrap().clone();
            let keep: arrow::array::BooleanArray = keys.values().iter().map(|k| Some(!deleted(*k))).collect();
            arrow::compute::filter_record_batch(b, &keep).unwrap()
        })
        .collect()
}

/// Rows a DELETE removed (a deleted rows file beside the pages, as the checkpoint writes
/// it) are skipped by every query, in the plain and the page-compressed heap, on both
/// paths: pages read in place by the kernels (pages without deleted rows) beside pages
/// decoded and filtered, and every page decoded (vector kernels off). Each answer is the
/// generated batches' without those rows; COUNT(*) subtracts them from page headers; the
/// report counts live rows and says how many it skipped.
#[test]
fn deleted_rows_are_skipped_on_the_page_path_and_the_decode_path() {
    // Orders whose key is a multiple of 97: some pages hold their lines, most do not.
    let deleted = |key: i64| key % 97 == 0;
    let live = live_lineitem(&deleted);
    let live_rows: u64 = live.iter().map(|b| b.num_rows() as u64).sum();
    let expected: Vec<_> = all_queries().iter().map(|q| run_on_batches(q, &live, 1).unwrap()).collect();
    for (format, compression) in [("heap", None), ("heap_page", Some("page"))] {
        // A new load each time: a rebuild would leave the last round's deleted rows behind.
        let dir = lineitem_db(2);
        if let Some(c) = compression {
            rebuild_table(dir.path(), "lineitem", RebuildTarget::parse(c).unwrap(), &RebuildOptions::default()).unwrap();
        }
        let (ids, pages_with_deleted) = row_ids_of_orders(&Database::open(dir.path()).unwrap(), "lineitem", &deleted);
        mark_rows_deleted(dir.path(), "lineitem", &ids);
        let db = Database::open(dir.path()).unwrap();
        let table = StorageTable::new(&db, "lineitem").unwrap();
        assert_eq!(table.meta().format, format);
        assert!(pages_with_deleted > 0 && pages_with_deleted * 2 < table.meta().page_count(), "{format}: {pages_with_deleted} pages with deleted rows");
        assert_eq!(table.row_count(), live_rows, "{format}");
        assert_eq!(table.deleted_row_count(), ids.len() as u64);
        for vector_kernels in [true, false] {
            set_vector_kernels(vector_kernels);
            for (i, query) in all_queries().iter().enumerate() {
                let case = format!("{} on {format}, vector kernels {vector_kernels}", query.name());
                let report = run_query(&table, query, &options(i, CacheMode::Warm)).unwrap();
                assert_eq!(report.result, expected[i], "{case}");
                assert_eq!(report.figures.rows_scanned, live_rows, "{case}");
                assert_eq!(report.figures.deleted_rows_skipped, ids.len() as u64, "{case}");
                assert_eq!(report.figures.pages_read, table.meta().page_count(), "{case}: every page read");
            }
        }
        set_vector_kernels(true);
    }
}

/// A column store's deleted rows (named by row group and place, `RowId::in_row_group`, in
/// the same deleted rows file) are skipped by every query, on both paths: row groups
/// without deleted rows handed to the kernels as segments, the others decoded whole and
/// filtered (and every row group decoded, vector kernels off). Each answer is the
/// generated batches' without those rows.
#[test]
fn a_column_store_skips_its_deleted_rows_on_every_path() {
    // Orders whose key is a multiple of 97 in the first third of the keys: rows are loaded
    // in key order, so the row groups past them hold none.
    let max_key = common::lineitem(SF, 1).iter().map(|b| arrow::compute::max(b.column(b.schema().index_of("l_orderkey").unwrap()).as_any().downcast_ref::<arrow::array::Int64Array>().unwrap()).unwrap()).max().unwrap();
    let deleted = |key: i64| key % 97 == 0 && key < max_key / 3;
    let live = live_lineitem(&deleted);
    let expected: Vec<_> = all_queries().iter().map(|q| run_on_batches(q, &live, 1).unwrap()).collect();
    let dir = lineitem_db(2);
    // Small row groups: some hold a deleted row, some none.
    rebuild_table(dir.path(), "lineitem", RebuildTarget::parse("columnstore").unwrap(), &RebuildOptions { row_group_rows: Some(4096), ..Default::default() }).unwrap();
    let db = Database::open(dir.path()).unwrap();
    let meta = db.table("lineitem").unwrap().clone();
    let key = meta.columns.iter().position(|c| c.name == "l_orderkey").unwrap();
    let first_pages = flashscan_storage::live_rows::row_group_first_pages(&meta);
    let (mut ids, mut groups_with_deleted) = (Vec::new(), 0);
    for (p, partition) in meta.partitions.iter().enumerate() {
        let mut g = 0;
        flashscan_storage::columnstore::table_reader::read_partition_row_groups(&db, &meta, partition, &[key], &Default::default(), &mut |batch| {
            let keys = batch.column(0).as_any().downcast_ref::<arrow::array::Int64Array>().unwrap();
            let first = first_pages[p][g].unwrap();
            let before = ids.len();
            ids.extend(keys.values().iter().enumerate().filter(|(_, k)| deleted(**k)).map(|(r, _)| RowId::in_row_group(first, r as u64).unwrap().0));
            groups_with_deleted += usize::from(ids.len() > before);
            g += 1;
            Ok(())
        })
        .unwrap();
    }
    let groups: usize = meta.partitions.iter().map(|p| p.row_groups.len()).sum();
    assert!(groups_with_deleted > 0 && groups_with_deleted < groups, "{groups_with_deleted} of {groups} row groups with deleted rows");
    ids.sort_unstable();
    mark_rows_deleted(dir.path(), "lineitem", &ids);
    let db = Database::open(dir.path()).unwrap();
    let table = open_source(&db, "lineitem").unwrap();
    for vector_kernels in [true, false] {
        set_vector_kernels(vector_kernels);
        for (i, query) in all_queries().iter().enumerate() {
            let report = run_query(table.as_ref(), query, &options(i, CacheMode::Warm)).unwrap();
            assert_eq!(report.result, expected[i], "{} on the column store, vector kernels {vector_kernels}", query.name());
        }
    }
    set_vector_kernels(true);
}
