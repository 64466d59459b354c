//! The whole path: lineitem loaded through flashscan-storage (heap pages, 3 partitions),
//! scanned through flashscan (reader, decoder, kernels), each answer equal to the same
//! query over the tpchgen-arrow batches (themselves checked against Arrow's kernels in
//! oracle.rs). Buffered reads, since the temp directory may refuse O_DIRECT.

mod common;

use flashscan_exec::queries::{run_on_batches, NeedleSpec};
use flashscan_exec::{run_query, BuiltinQuery, CacheMode, ScanOptions, StorageTable, TableSource};
use flashscan_io::EngineKind;
use flashscan_storage::load::tpch::tpch_source;
use flashscan_storage::{load_table, Database, LoadOptions};

const SF: f64 = 0.02;

#[test]
fn every_query_through_storage_equals_the_query_over_generated_batches() {
    let dir = tempfile::tempdir().unwrap();
    let options = LoadOptions { partition_count: 3, threads: 2, ..LoadOptions::default() };
    load_table(dir.path(), tpch_source("lineitem", SF, 2).unwrap(), &options).unwrap();
    let db = Database::open(dir.path()).unwrap();
    let table = StorageTable::new(&db, "lineitem").unwrap();
    let batches = common::lineitem(SF, 1);
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    assert_eq!(table.row_count(), rows);
    assert_eq!(table.partition_count(), 3);

    let queries = [
        BuiltinQuery::Count,
        BuiltinQuery::Count11,
        BuiltinQuery::Sum4,
        BuiltinQuery::Q1,
        BuiltinQuery::Needle(NeedleSpec::default()),
        BuiltinQuery::Needle(NeedleSpec { pattern: "Tiresias".into(), ..NeedleSpec::default() }),
    ];
    for (i, query) in queries.iter().enumerate() {
        let scan_options = ScanOptions {
            io_size_bytes: [64 * 1024, 1 << 20, 256 * 1024][i % 3],
            queue_depth: [2, 8, 5][i % 3],
            thread_count: [1, 2, 3][i % 3],
            cache_mode: CacheMode::Warm,
            check: false,
            engine_kind: EngineKind::Auto,
        };
        let report = run_query(&table, query, &scan_options).unwrap();
        let expected = run_on_batches(query, &batches, 1).unwrap();
        // Storage keeps strings as Utf8 where tpchgen makes Utf8View: same values either way.
        assert_eq!(report.result, expected, "{}", query.name());
        assert_eq!(report.rows_scanned, rows, "{}", query.name());
        assert_eq!(report.pages_read, table.meta().page_count(), "{}", query.name());
    }
}
