//! The built-in queries' heap page path (kernels reading verified pages in place,
//! `heap_pages.rs`) against their batch path (`HeapDecoder` into Arrow, the kernels'
//! `consume`), the oracle: the same answers or the same refusal, over random
//! lineitem-shaped pages with NULLs (nullable tables), one-character flags that are not,
//! other key types, and several pages per kernel.

use std::path::Path;

use flashscan_exec::queries::{merge_all, AnyKernel, NeedleSpec};
use flashscan_exec::{BatchSink, BuiltinQuery};
use flashscan_storage::heap::row_codec::{RowLayout, Value};
use flashscan_storage::testkit::{sealed_pages, PAGES_FILE_ID};
use flashscan_storage::{ColumnDef, ColumnType, HeapDecoder, HeapPageLayout, PageId, TableMeta};
use proptest::prelude::*;

const DECIMAL: ColumnType = ColumnType::Decimal { precision: 15, scale: 2 };

/// lineitem's columns the built-in queries read; `nullable` for all of them; the key type
/// of l_linenumber (Int32 as in TPC-H, or Utf8: a key the page path does not read).
fn table(nullable: bool, linenumber: ColumnType) -> TableMeta {
    let columns = [
        ("l_orderkey", ColumnType::Int64),
        ("l_partkey", ColumnType::Int64),
        ("l_suppkey", ColumnType::Int64),
        ("l_linenumber", linenumber),
        ("l_quantity", DECIMAL),
        ("l_extendedprice", DECIMAL),
        ("l_discount", DECIMAL),
        ("l_tax", DECIMAL),
        ("l_returnflag", ColumnType::Utf8),
        ("l_linestatus", ColumnType::Utf8),
        ("l_shipdate", ColumnType::Date32),
        ("l_shipinstruct", ColumnType::Utf8),
        ("l_shipmode", ColumnType::Utf8),
        ("l_comment", ColumnType::Utf8),
    ];
    let columns = columns.iter().map(|&(name, column_type)| ColumnDef { name: name.into(), column_type, nullable }).collect();
    TableMeta::heap_without_rows("lineitem", columns)
}

fn row_strategy(nullable: bool, odd_flags: bool, linenumber: ColumnType) -> BoxedStrategy<Vec<Value>> {
    let null_or = move |v: BoxedStrategy<Value>| if nullable { prop_oneof![1 => Just(Value::Null), 9 => v].boxed() } else { v };
    let int64 = || null_or(prop_oneof![0i64..100, any::<i64>().prop_map(|v| v >> 4)].prop_map(Value::Int64).boxed());
    let decimal = || null_or((-100_000_000_000i64..100_000_000_000).prop_map(Value::Decimal).boxed());
    let flag = move || {
        let one = prop::sample::select(vec!["A", "N", "R", "F", "O"]).prop_map(|s| Value::Utf8(s.into())).boxed();
        let flag = if odd_flags { prop_oneof![20 => one, 1 => prop::sample::select(vec!["", "AB"]).prop_map(|s| Value::Utf8(s.into()))].boxed() } else { one };
        null_or(flag)
    };
    let linenumber = match linenumber {
        ColumnType::Int32 => null_or((1i32..8).prop_map(Value::Int32).boxed()),
        _ => null_or((1i32..8).prop_map(|v| Value::Utf8(v.to_string())).boxed()),
    };
    let words = prop::sample::select(vec!["Tiresias", "sleep", "Tiresias sleep", "furiously", "ideas", "", "ñ"]);
    let comment = null_or(prop::collection::vec(words, 0..6).prop_map(|w| Value::Utf8(w.join(" "))).boxed());
    let text = || null_or(prop_oneof!["[A-Z ]{0,25}", "[AB ]{0,6}"].prop_map(Value::Utf8).boxed());
    // Around 1998-09-02 (day 10471), so Q1's filter keeps some rows and drops others.
    let shipdate = null_or((10_400i32..10_500).prop_map(Value::Date32).boxed());
    vec![int64(), int64(), int64(), linenumber, decimal(), decimal(), decimal(), decimal(), flag(), flag(), shipdate, text(), text(), comment].boxed()
}

fn pages_of(meta: &TableMeta, rows: &[Vec<Value>]) -> Vec<Vec<u8>> {
    sealed_pages(&RowLayout::new(&meta.columns), meta.columns.len() as u16, rows)
}

fn projection(meta: &TableMeta, query: &BuiltinQuery) -> Vec<usize> {
    query.columns().iter().map(|name| meta.columns.iter().position(|c| &c.name == name).expect("column")).collect()
}

/// The query's answer over `pages` through the page path: each page viewed and offered to
/// the kernel, pages it declines decoded into a batch (as the scan's heap decoder does).
/// Also returns how many pages the kernel took in place.
fn by_pages(meta: &TableMeta, query: &BuiltinQuery, pages: &[Vec<u8>]) -> (Result<flashscan_exec::QueryResult, String>, usize) {
    let projection = projection(meta, query);
    let layout = HeapPageLayout::try_new(meta, &projection).unwrap();
    let mut decoder = HeapDecoder::try_new(meta, &projection).unwrap();
    let mut kernel = AnyKernel::new(query);
    let mut starts = Vec::new();
    let mut taken = 0;
    for (i, page) in pages.iter().enumerate() {
        let id = PageId::new(PAGES_FILE_ID, i as u32).0;
        let view = layout.view(page, id, Path::new("f"), 0, &mut starts).unwrap().unwrap();
        let sink = kernel.heap_page_sink().expect("the heap page path is on");
        match sink.consume_page(&view) {
            Ok(true) => taken += 1,
            Ok(false) => {
                decoder.push_page(page, id, Path::new("f"), 0).unwrap();
                if let Err(e) = sink.consume_batch(&decoder.finish()) {
                    return (Err(e.to_string()), taken);
                }
            }
            Err(e) => return (Err(e.to_string()), taken),
        }
    }
    (merge_all(vec![kernel]).map(|r| r.unwrap_or_default()).map_err(|e| e.to_string()), taken)
}

/// The same through the batch path: each page decoded into a batch for `consume`.
fn by_batches(meta: &TableMeta, query: &BuiltinQuery, pages: &[Vec<u8>]) -> Result<flashscan_exec::QueryResult, String> {
    let projection = projection(meta, query);
    let mut decoder = HeapDecoder::try_new(meta, &projection).unwrap();
    let mut kernel = AnyKernel::new(query);
    for (i, page) in pages.iter().enumerate() {
        decoder.push_page(page, PageId::new(PAGES_FILE_ID, i as u32).0, Path::new("f"), 0).unwrap();
        kernel.consume(&decoder.finish()).map_err(|e| e.to_string())?;
    }
    merge_all(vec![kernel]).map(|r| r.unwrap_or_default()).map_err(|e| e.to_string())
}

fn queries() -> Vec<BuiltinQuery> {
    vec![
        BuiltinQuery::Count11,
        BuiltinQuery::Sum4,
        BuiltinQuery::Q1,
        BuiltinQuery::Needle(NeedleSpec::default()),
        BuiltinQuery::Needle(NeedleSpec { pattern: "Tiresias".into(), ..NeedleSpec::default() }),
        // Keys of another order and a string key: the latter is not read in place.
        BuiltinQuery::Needle(NeedleSpec { column: "l_comment".into(), pattern: "sleep".into(), key_columns: vec!["l_suppkey".into(), "l_orderkey".into()] }),
        BuiltinQuery::Needle(NeedleSpec { column: "l_shipmode".into(), pattern: "A".into(), key_columns: vec!["l_linenumber".into()] }),
        // l_shipinstruct's bytes are followed by l_shipmode's in each row: matches that
        // straddle the two must not count, nor hide a real match they overlap ("AA").
        BuiltinQuery::Needle(NeedleSpec { column: "l_shipinstruct".into(), pattern: "A B".into(), key_columns: vec!["l_orderkey".into()] }),
        BuiltinQuery::Needle(NeedleSpec { column: "l_shipinstruct".into(), pattern: "AA".into(), key_columns: vec!["l_orderkey".into()] }),
        BuiltinQuery::Needle(NeedleSpec { column: "l_shipmode".into(), pattern: "AAA".into(), key_columns: vec!["l_partkey".into()] }),
        // The empty pattern matches every non-NULL string (searched row by row).
        BuiltinQuery::Needle(NeedleSpec { column: "l_comment".into(), pattern: String::new(), key_columns: vec!["l_orderkey".into()] }),
    ]
}

fn lineitem_cases() -> impl Strategy<Value = (bool, bool, ColumnType, Vec<Vec<Value>>)> {
    (any::<bool>(), prop::bool::weighted(0.2), prop::sample::select(vec![ColumnType::Int32, ColumnType::Utf8]))
        .prop_flat_map(|(nullable, odd_flags, linenumber)| {
            (Just(nullable), Just(odd_flags), Just(linenumber), prop::collection::vec(row_strategy(nullable, odd_flags, linenumber), 0..400))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn page_path_equals_batch_path((nullable, _odd_flags, linenumber, rows) in lineitem_cases()) {
        let meta = table(nullable, linenumber);
        let pages = pages_of(&meta, &rows);
        for query in queries() {
            let (pages_answer, taken) = by_pages(&meta, &query, &pages);
            let batches_answer = by_batches(&meta, &query, &pages);
            prop_assert_eq!(&pages_answer, &batches_answer, "{:?}", query);
            // Lineitem's own types are read in place; a string key sends the needle to batches.
            let string_key = matches!(&query, BuiltinQuery::Needle(spec) if spec.key_columns.iter().any(|k| k == "l_linenumber")) && linenumber == ColumnType::Utf8;
            if pages_answer.is_ok() {
                prop_assert_eq!(taken, if string_key { 0 } else { pages.len() }, "{:?}", query);
            }
        }
    }
}
