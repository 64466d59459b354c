//! Row- and page-compressed heap pages: round trips through `HeapDecoder` (property tests
//! over every type, NULLs, empty and long strings, extremes, repeats, shared prefixes),
//! checksums, and `rebuild` of lineitem SF 0.01 (same contents in every format, sizes,
//! an interrupted rebuild leaves the old table).

use std::collections::BTreeSet;
use std::path::Path;

use flashscan_storage::heap::reader::read_table;
use flashscan_storage::heap::header::{read_header, seal, PAGE_KIND_HEAP_PAGE_COMPRESSED, PAGE_KIND_HEAP_ROW_COMPRESSED};
use flashscan_storage::heap::page_encoder::{HeapFormat, PageEncoder};
use flashscan_storage::heap::row_codec::Value;
use flashscan_storage::{
    decode_page_count_only, rebuild_table, ColumnType, Database, HeapDecoder, Lsn, PageId, RebuildOptions, RebuildTarget, TableMeta,
    PAGE_SIZE_BYTES,
};
use proptest::prelude::*;

mod common;
use common::{dir_listing, row_lines, same, table, tpch_db};
use common::{decoded_value, new_type_value, or_null, schema_and_rows};

/// Values biased towards what compression must get right: extremes, zero, repeats (a
/// small pool) and shared prefixes.
fn value(t: ColumnType, nullable: bool) -> BoxedStrategy<Value> {
    let v: BoxedStrategy<Value> = match t {
        t if new_type_value(t).is_some() => new_type_value(t).unwrap_or_else(|| Just(Value::Null).boxed()),
        ColumnType::Int32 => prop_oneof![any::<i32>(), Just(i32::MIN), Just(i32::MAX), Just(0), -3i32..3, 1000i32..1010].prop_map(Value::Int32).boxed(),
        ColumnType::Int64 => prop_oneof![any::<i64>(), Just(i64::MIN), Just(i64::MAX), Just(0), -3i64..3, 1_000_000i64..1_000_004].prop_map(Value::Int64).boxed(),
        ColumnType::Float64 => prop_oneof![any::<u64>().prop_map(f64::from_bits), Just(0.0), Just(-0.0), Just(1.5), Just(f64::MAX), Just(f64::NAN)].prop_map(Value::Float64).boxed(),
        ColumnType::Decimal { .. } => prop_oneof![any::<i64>(), Just(i64::MIN), Just(i64::MAX), 0i64..5].prop_map(Value::Decimal).boxed(),
        ColumnType::Date32 => prop_oneof![any::<i32>(), Just(i32::MIN), Just(i32::MAX), 9000i32..9003].prop_map(Value::Date32).boxed(),
        ColumnType::Utf8 => prop_oneof![
            Just(String::new()),
            ".{0,20}",
            "[a-c]{0,3}",
            "shared prefix [a-z]{0,10}",
            "[a-z]{14,16}",
            "[a-z]{200,300}",
        ]
        .prop_map(Value::Utf8)
        .boxed(),
        ColumnType::Boolean => any::<bool>().prop_map(Value::Boolean).boxed(),
        _ => Just(Value::Null).boxed(),
    };
    or_null(v, nullable)
}

fn build_pages(meta: &TableMeta, format: HeapFormat, rows: &[Vec<Value>]) -> Vec<Vec<u8>> {
    let mut enc = PageEncoder::new("t", &meta.columns, format);
    for r in rows {
        enc.push_values(r).unwrap();
    }
    enc.finish().unwrap();
    assert_eq!(enc.rows_in_pages as usize, rows.len());
    enc.pages
        .chunks_exact(PAGE_SIZE_BYTES)
        .enumerate()
        .map(|(i, chunk)| {
            let mut p = chunk.to_vec();
            seal(&mut p, PageId::new(7, i as u32), Lsn(3));
            p
        })
        .collect()
}

fn decoded_values(meta: &TableMeta, pages: &[Vec<u8>], projection: &[usize]) -> Vec<Vec<Value>> {
    let mut dec = HeapDecoder::new(meta, projection);
    for (i, p) in pages.iter().enumerate() {
        let rows = dec.push_page(p, PageId::new(7, i as u32).0, Path::new("f"), 0).unwrap();
        assert_eq!(rows, read_header(p).row_count as u32);
        assert_eq!(decode_page_count_only(p, PageId::new(7, i as u32).0, Path::new("f"), 0).unwrap(), rows);
    }
    let batch = dec.finish();
    (0..batch.num_rows())
        .map(|r| {
            projection
                .iter()
                .enumerate()
                .map(|(out_i, &col)| decoded_value(meta.columns[col].column_type, batch.column(out_i).as_ref(), r))
                .collect()
        })
        .collect()
}

fn check_round_trip(cols: &[(ColumnType, bool)], rows: &[Vec<Value>], format: HeapFormat, kind: u16) -> Result<(), TestCaseError> {
    let meta = table(cols);
    let pages = build_pages(&meta, format, rows);
    for p in &pages {
        prop_assert_eq!(read_header(p).page_kind, kind);
    }
    // Projection reversed, with a duplicate, so column order and repeats are exercised.
    let mut projection: Vec<usize> = (0..cols.len()).rev().collect();
    projection.push(0);
    let got = decoded_values(&meta, &pages, &projection);
    prop_assert_eq!(got.len(), rows.len());
    for (r, (g, want)) in got.iter().zip(rows).enumerate() {
        for (out_i, &col) in projection.iter().enumerate() {
            prop_assert!(same(&g[out_i], &want[col]), "{:?} row {} col {}: {:?} != {:?}", format, r, col, g[out_i], want[col]);
        }
    }
    Ok(())
}


proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn row_compressed_pages_round_trip((cols, rows) in schema_and_rows(value, 400)) {
        check_round_trip(&cols, &rows, HeapFormat::Row, PAGE_KIND_HEAP_ROW_COMPRESSED)?;
    }

    #[test]
    fn page_compressed_pages_round_trip((cols, rows) in schema_and_rows(value, 400)) {
        check_round_trip(&cols, &rows, HeapFormat::Page, PAGE_KIND_HEAP_PAGE_COMPRESSED)?;
    }

    #[test]
    fn any_flipped_byte_of_a_compressed_page_fails_the_checksum(index in 0usize..PAGE_SIZE_BYTES, bit in 0u8..8, page_mode in any::<bool>()) {
        let meta = table(&[(ColumnType::Int64, false), (ColumnType::Utf8, true), (ColumnType::Date32, false)]);
        let rows: Vec<Vec<Value>> = (0..300).map(|i| vec![Value::Int64(i), Value::Utf8(format!("mode {}", i % 3)), Value::Date32(9000 + i as i32 / 7)]).collect();
        let format = if page_mode { HeapFormat::Page } else { HeapFormat::Row };
        let mut pages = build_pages(&meta, format, &rows);
        pages[0][index] ^= 1 << bit;
        let mut dec = HeapDecoder::new(&meta, &[0, 1, 2]);
        let err = dec.push_page(&pages[0], PageId::new(7, 0).0, Path::new("data.dat"), 8192).unwrap_err().to_string();
        prop_assert!(err.contains("checksum") && err.contains("data.dat") && err.contains("8192"), "{}", err);
    }
}

#[test]
fn long_strings_and_all_nulls_round_trip() {
    let cols = [(ColumnType::Utf8, true), (ColumnType::Int64, true)];
    let long = "y".repeat(8000);
    let rows = vec![
        vec![Value::Utf8(long.clone()), Value::Int64(i64::MIN)],
        vec![Value::Null, Value::Null],
        vec![Value::Utf8(String::new()), Value::Int64(0)],
        vec![Value::Utf8(long), Value::Null],
    ];
    for (format, kind) in [(HeapFormat::Row, PAGE_KIND_HEAP_ROW_COMPRESSED), (HeapFormat::Page, PAGE_KIND_HEAP_PAGE_COMPRESSED)] {
        check_round_trip(&cols, &rows, format, kind).unwrap();
    }
}

fn table_lines(db_dir: &Path, name: &str) -> (Vec<String>, TableMeta) {
    let db = Database::open(db_dir).unwrap();
    let t = db.table(name).unwrap().clone();
    let projection: Vec<usize> = (0..t.columns.len()).collect();
    (row_lines(&read_table(&db, &t, &projection).unwrap()), t)
}

#[test]
fn lineitem_same_contents_in_heap_row_and_page_and_page_is_smaller() {
    let (_tmp, db_dir) = tpch_db("lineitem", 3);
    let (heap_lines, heap) = table_lines(&db_dir, "lineitem");
    assert_eq!(heap_lines.len(), 60175);
    let mut sizes = vec![("heap", heap.size_bytes, heap.page_count())];
    for (compression, format) in [("row", "heap_row"), ("page", "heap_page"), ("none", "heap"), ("page", "heap_page")] {
        let report = rebuild_table(&db_dir, "lineitem", RebuildTarget::parse(compression).unwrap(), &RebuildOptions::default()).unwrap();
        assert_eq!(report.new_format, format);
        let (lines, t) = table_lines(&db_dir, "lineitem");
        assert_eq!(t.format, format);
        assert_eq!(t.row_count, heap.row_count);
        assert!(lines == heap_lines, "contents differ after rebuild to {compression}");
        // Only the current files remain.
        let files: BTreeSet<String> = t.files.iter().map(|f| f.path.clone()).collect();
        let on_disk: BTreeSet<String> = dir_listing(&db_dir).into_iter().filter(|n| n.ends_with(".dat")).collect();
        assert_eq!(files, on_disk);
        sizes.push((format, t.size_bytes, t.page_count()));
    }
    let pages = |name: &str| sizes.iter().find(|s| s.0 == name).unwrap().2 as f64;
    eprintln!("lineitem sf 0.01 (3 partitions): {sizes:?}; row/heap pages {:.3}, page/heap pages {:.3}", pages("heap_row") / pages("heap"), pages("heap_page") / pages("heap"));
    assert!(pages("heap_row") <= 0.8 * pages("heap"), "{sizes:?}");
    assert!(pages("heap_page") <= 0.7 * pages("heap"), "{sizes:?}");
}

#[test]
fn interrupted_rebuild_leaves_the_old_table() {
    let (_tmp, db_dir) = tpch_db("orders", 2);
    let (before_lines, before) = table_lines(&db_dir, "orders");
    let listing = dir_listing(&db_dir);
    let catalog_before = std::fs::read(db_dir.join("catalog.json")).unwrap();
    for compression in ["row", "page", "none", "columnstore", "columnstore_archive"] {
        let options = RebuildOptions { fault_after_pages: Some(5), row_group_rows: Some(2000), ..RebuildOptions::default() };
        let err = rebuild_table(&db_dir, "orders", RebuildTarget::parse(compression).unwrap(), &options).unwrap_err();
        assert!(err.to_string().contains("disk full"), "{err}");
        assert_eq!(dir_listing(&db_dir), listing, "partial files left behind");
        assert_eq!(std::fs::read(db_dir.join("catalog.json")).unwrap(), catalog_before);
        let (lines, t) = table_lines(&db_dir, "orders");
        assert_eq!(t, before);
        assert!(lines == before_lines);
    }
    assert!(RebuildTarget::parse("zip").is_err());
    assert_eq!(dir_listing(&db_dir), listing);
}
