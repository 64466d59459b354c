//! Encode/decode round trips of rows and pages, through both decoders (the `Value` path
//! and the scan's `HeapDecoder`), for every type, NULLs, empty and maximum-length strings.

use std::path::Path;

use flashscan_storage::heap::heap_page::decode_page_rows;
use flashscan_storage::heap::row_codec::{encode_row, RowLayout, Value, ROW_BYTES_MAX};
use flashscan_storage::{ColumnType, HeapDecoder, PageId, TableMeta, PAGE_SIZE_BYTES};
use proptest::prelude::*;

mod common;
use common::{same, table};
use common::{any_value as value, decoded_value, sealed_pages as build_pages, schema_and_rows, PAGES_FILE_ID};



fn check_heap_decoder(meta: &TableMeta, pages: &[Vec<u8>], rows: &[Vec<Value>]) {
    let projection: Vec<usize> = (0..meta.columns.len()).rev().collect();
    let mut dec = HeapDecoder::new(meta, &projection);
    for (i, p) in pages.iter().enumerate() {
        dec.push_page(p, PageId::new(PAGES_FILE_ID, i as u32).0, Path::new("f"), 0).unwrap();
    }
    assert_eq!(dec.rows_buffered(), rows.len());
    let batch = dec.finish();
    assert_eq!(batch.num_rows(), rows.len());
    assert_eq!(dec.rows_buffered(), 0);
    // A page built in memory decodes the same without its checksum checked.
    let mut built = HeapDecoder::new(meta, &projection);
    for p in pages {
        built.push_built_page(p, Path::new("built")).unwrap();
    }
    assert_eq!(built.finish(), batch, "push_built_page and push_page disagree");
    // A decoder sized for one row grows to any number of them.
    let mut small = HeapDecoder::try_with_capacity(meta, &projection, 1).unwrap();
    for p in pages {
        small.push_built_page(p, Path::new("built")).unwrap();
    }
    assert_eq!(small.finish(), batch, "a decoder sized for one row decodes differently");
    assert_eq!(small.finish().num_rows(), 0, "finish leaves it empty");
    for (out_i, &col) in projection.iter().enumerate() {
        let a = batch.column(out_i);
        for (r, row) in rows.iter().enumerate() {
            let got = decoded_value(meta.columns[col].column_type, a.as_ref(), r);
            assert!(same(&got, &row[col]), "row {r} col {col}: {got:?} != {:?}", row[col]);
        }
    }
}


proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn pages_round_trip((cols, rows) in schema_and_rows(value, 300)) {
        let meta = table(&cols);
        let layout = RowLayout::new(&meta.columns);
        let pages = build_pages(&layout, cols.len() as u16, &rows);
        let mut decoded = Vec::new();
        for (i, p) in pages.iter().enumerate() {
            decoded.extend(decode_page_rows(p, &layout, PageId::new(PAGES_FILE_ID, i as u32), Path::new("f"), 0).unwrap());
        }
        prop_assert_eq!(decoded.len(), rows.len());
        for (a, b) in decoded.iter().zip(&rows) {
            prop_assert!(a.iter().zip(b).all(|(x, y)| same(x, y)), "{:?} != {:?}", a, b);
        }
        check_heap_decoder(&meta, &pages, &rows);
    }

    #[test]
    fn any_flipped_byte_fails_the_checksum(index in 0usize..PAGE_SIZE_BYTES, bit in 0u8..8) {
        let meta = table(&[(ColumnType::Int64, false), (ColumnType::Utf8, true)]);
        let layout = RowLayout::new(&meta.columns);
        let rows: Vec<Vec<Value>> = (0..50).map(|i| vec![Value::Int64(i), Value::Utf8(format!("row {i}"))]).collect();
        let mut pages = build_pages(&layout, 2, &rows);
        pages[0][index] ^= 1 << bit;
        let mut dec = HeapDecoder::new(&meta, &[0, 1]);
        let err = dec.push_page(&pages[0], PageId::new(PAGES_FILE_ID, 0).0, Path::new("data.dat"), 8192).unwrap_err().to_string();
        prop_assert!(err.contains("data.dat") && err.contains(&PageId::new(PAGES_FILE_ID, 0).0.to_string()) && err.contains("8192"), "{}", err);
    }
}

#[test]
fn only_a_page_is_taken_as_a_built_page() {
    let meta = table(&[(ColumnType::Int64, false)]);
    let mut dec = HeapDecoder::new(&meta, &[0]);
    for bytes in [vec![0u8; PAGE_SIZE_BYTES], vec![0u8; 100]] {
        let err = dec.push_built_page(&bytes, Path::new("built")).unwrap_err().to_string();
        assert!(err.contains("built"), "{err}");
    }
}

#[test]
fn maximum_length_string_fits_one_page() {
    let meta = table(&[(ColumnType::Utf8, false)]);
    let layout = RowLayout::new(&meta.columns);
    let max_len = ROW_BYTES_MAX - layout.var_data_start;
    let rows = vec![vec![Value::Utf8("x".repeat(max_len))], vec![Value::Utf8(String::new())]];
    let pages = build_pages(&layout, 1, &rows);
    assert_eq!(pages.len(), 2, "a maximum row fills a page by itself");
    check_heap_decoder(&meta, &pages, &rows);
    let mut buf = Vec::new();
    assert!(encode_row(&layout, &[Value::Utf8("x".repeat(max_len + 1))], &mut buf).is_err());
}

#[test]
fn wrong_page_id_is_reported() {
    let meta = table(&[(ColumnType::Int32, false)]);
    let layout = RowLayout::new(&meta.columns);
    let pages = build_pages(&layout, 1, &[vec![Value::Int32(1)]]);
    let mut dec = HeapDecoder::new(&meta, &[0]);
    let err = dec.push_page(&pages[0], 99, Path::new("x.dat"), 0).unwrap_err().to_string();
    assert!(err.contains("x.dat") && err.contains("page 99") && err.contains("wrong place"), "{err}");
    assert_eq!(flashscan_storage::decode_page_count_only(&pages[0], PageId::new(PAGES_FILE_ID, 0).0, Path::new("x"), 0).unwrap(), 1);
}

#[test]
fn empty_projection_counts_rows() {
    let meta = table(&[(ColumnType::Int32, false)]);
    let layout = RowLayout::new(&meta.columns);
    let rows: Vec<Vec<Value>> = (0..10).map(|i| vec![Value::Int32(i)]).collect();
    let pages = build_pages(&layout, 1, &rows);
    let mut dec = HeapDecoder::new(&meta, &[]);
    dec.push_page(&pages[0], PageId::new(PAGES_FILE_ID, 0).0, Path::new("f"), 0).unwrap();
    assert_eq!(dec.finish().num_rows(), 10);
}
