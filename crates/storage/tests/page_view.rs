//! `HeapPageView` (uncompressed heap pages read in place by the scan's page kernels) against
//! `HeapDecoder`, its oracle: the same pages are accepted and refused, and every value the
//! view hands out equals the decoder's, for every type, NULLs, repeated columns, and pages
//! whose bytes were changed and resealed (so only the structural checks stand between the
//! bytes and the readers).

use std::path::Path;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Date32Type, Decimal128Type, Float64Type, Int32Type, Int64Type, UInt64Type};
use flashscan_storage::heap::header::{seal, PAGE_KIND_HEAP_ROW_COMPRESSED};
use flashscan_storage::heap::heap_page::HeapPageBuilder;
use flashscan_storage::heap::row_codec::{RowLayout, Value};
use flashscan_storage::{ColumnType, HeapDecoder, HeapPageLayout, Lsn, PageId, TableMeta, PAGE_SIZE_BYTES};
use proptest::prelude::*;

mod common;
use common::{any_value as value, sealed_pages as build_pages, schema_and_rows, table, PAGES_FILE_ID as FILE_ID};



/// The fixed-width value at row `r` of a decoded column as the view's `integer` reads it
/// (the stored bits, 4-byte values sign-extended); None where the view has no integer.
fn decoded_integer(t: ColumnType, a: &dyn Array, r: usize) -> Option<i64> {
    Some(match t {
        ColumnType::Int32 => a.as_primitive::<Int32Type>().value(r) as i64,
        ColumnType::Date32 => a.as_primitive::<Date32Type>().value(r) as i64,
        ColumnType::Int64 => a.as_primitive::<Int64Type>().value(r),
        ColumnType::Float64 => a.as_primitive::<Float64Type>().value(r).to_bits() as i64,
        ColumnType::Decimal { .. } => a.as_primitive::<Decimal128Type>().value(r) as i64,
        ColumnType::UInt64 => a.as_primitive::<UInt64Type>().value(r) as i64,
        ColumnType::Timestamp { .. } | ColumnType::Time { .. } => common::units_at(a, r),
        _ => return None,
    })
}

/// Checks one page: the view accepts it iff the decoder does, and agrees on every value.
fn check_page(meta: &TableMeta, projection: &[usize], page: &[u8], page_id: u64) -> Result<(), TestCaseError> {
    let layout = HeapPageLayout::try_new(meta, projection).unwrap();
    let mut starts = Vec::new();
    let viewed = layout.view(page, page_id, Path::new("f"), 0, &mut starts);
    let mut decoder = HeapDecoder::try_new(meta, projection).unwrap();
    let decoded = decoder.push_page(page, page_id, Path::new("f"), 0);
    let view = match viewed {
        Ok(Some(view)) => view,
        // Compressed kinds are the decoder's alone.
        Ok(None) => return Ok(()),
        Err(e) => {
            prop_assert!(decoded.is_err(), "view refused a page the decoder took: {}", e);
            // Both name the same failure (a checksum, a slot, a string's bounds).
            prop_assert_eq!(e.to_string(), decoded.unwrap_err().to_string());
            return Ok(());
        }
    };
    let rows = match decoded {
        Ok(rows) => rows as usize,
        Err(e) => return Err(TestCaseError::fail(format!("decoder refused a page the view took: {e}"))),
    };
    prop_assert_eq!(view.row_count(), rows);
    prop_assert_eq!(view.column_count(), projection.len());
    let batch = decoder.finish();
    for (k, &column) in projection.iter().enumerate() {
        let t = meta.columns[column].column_type;
        prop_assert_eq!(view.column_type(k), t);
        prop_assert_eq!(view.column_name(k), meta.columns[column].name.as_str());
        let a = batch.column(k);
        prop_assert_eq!(view.non_null_count(k), a.len() - a.null_count());
        let mut each = Vec::new();
        let iterated = view.for_each_integer(k, |row, v| each.push((row, v)));
        prop_assert_eq!(iterated, matches!(t.fixed_width_bytes(), Some(4 | 8)));
        for r in 0..rows {
            prop_assert_eq!(view.is_null(k, r), a.is_null(r), "column {} row {}", k, r);
            // Fixed-width values are the stored bits, NULL or not (NULLs are stored as 0).
            let expected = decoded_integer(t, a.as_ref(), r);
            prop_assert_eq!(view.integer(k, r), expected, "column {} row {}", k, r);
            if let Some(v) = expected {
                prop_assert_eq!(each[r], (r, v));
            }
            match t {
                // The page's bytes; the decoder shows bytes that are not UTF-8 lossily.
                ColumnType::Utf8 if !a.is_null(r) => {
                    let shown = String::from_utf8_lossy(view.var_bytes(k, r).unwrap()).into_owned();
                    prop_assert_eq!(shown.as_str(), a.as_string::<i32>().value(r), "column {} row {}", k, r);
                }
                ColumnType::Utf8 => prop_assert!(view.var_bytes(k, r).is_some()),
                ColumnType::Binary => prop_assert_eq!(view.var_bytes(k, r), Some(a.as_binary::<i32>().value(r)), "column {} row {}", k, r),
                _ => prop_assert_eq!(view.var_bytes(k, r), None, "column {} row {}", k, r),
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every value of every page, all columns (reversed, one repeated) projected.
    #[test]
    fn view_equals_decoder((cols, rows) in schema_and_rows(value, 300), reverse in any::<bool>()) {
        let meta = table(&cols);
        let layout = RowLayout::new(&meta.columns);
        let pages = build_pages(&layout, cols.len() as u16, &rows);
        let mut projection: Vec<usize> = (0..cols.len()).collect();
        if reverse {
            projection.reverse();
            projection.push(projection[0]);
        }
        for (i, page) in pages.iter().enumerate() {
            check_page(&meta, &projection, page, PageId::new(FILE_ID, i as u32).0)?;
        }
    }

    /// A page changed at a few places and resealed (the checksum passes): the view refuses
    /// it exactly when the decoder does, and agrees on every value when both take it.
    #[test]
    fn resealed_damage_is_refused_like_the_decoder(
        changes in prop::collection::vec((0usize..PAGE_SIZE_BYTES, any::<u8>()), 1..4),
        near_the_end in any::<bool>(),
        projection in prop::sample::subsequence(vec![0usize, 1, 2, 3], 1..=4),
    ) {
        let meta = table(&[(ColumnType::Int64, false), (ColumnType::Utf8, true), (ColumnType::Decimal { precision: 15, scale: 2 }, true), (ColumnType::Utf8, false)]);
        let layout = RowLayout::new(&meta.columns);
        let rows: Vec<Vec<Value>> = (0..70)
            .map(|i| vec![Value::Int64(i), if i % 5 == 0 { Value::Null } else { Value::Utf8(format!("comment {i}")) }, Value::Decimal(i * 100), Value::Utf8("x".repeat(i as usize % 9))])
            .collect();
        let mut page = build_pages(&layout, 4, &rows).swap_remove(0);
        for (at, byte) in changes {
            // Half the time in the slot array and the last rows, where structure lives. Never
            // the magic (bytes 0..4): `seal` asserts it, a page without it is not one to seal
            // (CI drew byte 0 once).
            let at = if near_the_end { PAGE_SIZE_BYTES - 1 - at % 512 } else { 4 + at % (PAGE_SIZE_BYTES - 4) };
            page[at] = byte;
        }
        seal(&mut page, PageId::new(FILE_ID, 0), Lsn(3));
        check_page(&meta, &projection, &page, PageId::new(FILE_ID, 0).0)?;
    }
}

#[test]
fn compressed_pages_are_left_to_the_decoder() {
    let meta = table(&[(ColumnType::Int32, false)]);
    let mut builder = HeapPageBuilder::with_kind(1, PAGE_KIND_HEAP_ROW_COMPRESSED);
    assert!(builder.try_append(&[0, 0]));
    let mut page = Vec::new();
    builder.take_page(&mut page);
    seal(&mut page, PageId::new(FILE_ID, 0), Lsn(3));
    let layout = HeapPageLayout::try_new(&meta, &[0]).unwrap();
    let mut starts = Vec::new();
    assert!(layout.view(&page, PageId::new(FILE_ID, 0).0, Path::new("f"), 0, &mut starts).unwrap().is_none());
}

#[test]
fn wrong_page_id_and_projection_are_errors() {
    let meta = table(&[(ColumnType::Int32, false)]);
    let layout_rows = RowLayout::new(&meta.columns);
    let pages = build_pages(&layout_rows, 1, &[vec![Value::Int32(5)]]);
    let layout = HeapPageLayout::try_new(&meta, &[0]).unwrap();
    let mut starts = Vec::new();
    let err = layout.view(&pages[0], 99, Path::new("x.dat"), 8192, &mut starts).err().unwrap().to_string();
    assert!(err.contains("x.dat") && err.contains("wrong place"), "{err}");
    assert!(HeapPageLayout::try_new(&meta, &[1]).is_err());
    let view = layout.view(&pages[0], PageId::new(FILE_ID, 0).0, Path::new("x.dat"), 0, &mut starts).unwrap().unwrap();
    assert_eq!((view.row_count(), view.integer(0, 0), view.var_bytes(0, 0)), (1, Some(5), None));
    assert!(view.has_columns(&["c0"]) && !view.has_columns(&["c1"]) && !view.has_columns(&["c0", "c0"]));
}
