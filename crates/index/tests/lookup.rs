//! Lookups return exactly the rows an oracle finds by decoding every page of the table
//! with the storage crate's row decoder — sync and prefetch paths, 8 KB and 64 KB reads,
//! unique and duplicate keys, warm and after clearing the pool, never a deleted row — and
//! damaged heap pages surface as checksum errors.

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use flashscan_buffer::BufferPool;
use flashscan_index::key::encode_part;
use flashscan_bench::synth::{write_table, SynthSpec};
use flashscan_index::{create_index, CreateIndex, IndexError, KeyQuery, LookupOptions, LookupSession};
use flashscan_io::EngineKind;
use flashscan_storage::heap::heap_page::decode_page_rows;
use flashscan_storage::heap::row_codec::{decode_row, RowLayout, Value};
use flashscan_storage::testkit::mark_rows_deleted;
use flashscan_storage::{Database, PageId, RowId, PAGE_SIZE_BYTES};
use rand::{Rng, SeedableRng};

type Row = Vec<Value>;

/// Column → rows, from a full decode of the table.
fn oracle(dir: &Path, table: &str, column: usize) -> BTreeMap<i64, Vec<String>> {
    oracle_skipping(dir, table, column, None)
}

/// `oracle` without the rows of the (damaged) page `skip_page_id`.
fn oracle_skipping(dir: &Path, table: &str, column: usize, skip_page_id: Option<u64>) -> BTreeMap<i64, Vec<String>> {
    let db = Database::open(dir).unwrap();
    let t = db.table(table).unwrap();
    let layout = RowLayout::new(&t.columns);
    let mut map: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for p in &t.partitions {
        for run in &p.runs {
            let path = db.file_path(run);
            let bytes = std::fs::read(&path).unwrap();
            for i in 0..run.page_count as usize {
                let page_id = run.first_page_id + i as u64;
                if skip_page_id == Some(page_id) {
                    continue;
                }
                let off = run.offset_bytes as usize + i * PAGE_SIZE_BYTES;
                let rows = decode_page_rows(&bytes[off..off + PAGE_SIZE_BYTES], &layout, PageId(page_id), &path, off as u64).unwrap();
                for r in rows {
                    let Value::Int64(k) = r[column] else { panic!("key column not Int64") };
                    map.entry(k).or_default().push(format!("{r:?}"));
                }
            }
        }
    }
    for v in map.values_mut() {
        v.sort();
    }
    map
}

/// Synthetic table `t` (ids 0..row_count, shuffled) with indexes `by_id` and `by_val` in a
/// new database in a temporary directory; returns the directory and the oracle of `by_id`.
fn setup(rows_per_page: usize, row_count: u64) -> (tempfile::TempDir, BTreeMap<i64, Vec<String>>) {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    write_table(dir, &SynthSpec { name: "t".into(), rows_per_page, row_count, shuffle_seed: Some(42) }).unwrap();
    create_index(dir, &CreateIndex { table: "t".into(), name: "by_id".into(), columns: vec!["id".into()], build_options: None }).unwrap();
    create_index(dir, &CreateIndex { table: "t".into(), name: "by_val".into(), columns: vec!["val".into()], build_options: None }).unwrap();
    let by_id = oracle(dir, "t", 0);
    (temp, by_id)
}

/// The index key of an id (one BIGINT part).
fn key(id: i64) -> Vec<u8> {
    encode_part(id).to_be_bytes().to_vec()
}

fn keys_query(keys: &[i64]) -> KeyQuery {
    KeyQuery::Keys(keys.iter().map(|&k| key(k)).collect())
}

/// A session on index `index` of table `t` in `dir`.
fn session<'p>(dir: &Path, index: &str, pool: &'p BufferPool, options: LookupOptions) -> LookupSession<'p> {
    LookupSession::open(dir, "t", index, pool, options, &mut |_| {}).unwrap()
}

fn run(session: &mut LookupSession<'_>, keys: &[i64]) -> (Vec<String>, flashscan_index::LookupStats) {
    run_query(session, &keys_query(keys))
}

/// The rows `query` finds (decoded, as text, sorted) and the lookup's figures.
fn run_query(session: &mut LookupSession<'_>, query: &KeyQuery) -> (Vec<String>, flashscan_index::LookupStats) {
    let layout = RowLayout::new(&session.table.columns);
    let mut rows: Vec<String> = Vec::new();
    let stats = session
        .run(query, &mut |_loc, bytes| {
            let r: Row = decode_row(&layout, bytes).unwrap();
            rows.push(format!("{r:?}"));
        })
        .unwrap();
    rows.sort();
    (rows, stats)
}

fn expected(oracle: &BTreeMap<i64, Vec<String>>, keys: &[i64]) -> Vec<String> {
    let mut unique: Vec<i64> = keys.to_vec();
    unique.sort();
    unique.dedup();
    let mut rows: Vec<String> = unique.iter().flat_map(|k| oracle.get(k).cloned().unwrap_or_default()).collect();
    rows.sort();
    rows
}

fn options(prefetch_from_rows: u32, io_size_bytes: u32, depth: u32) -> LookupOptions {
    LookupOptions { prefetch_from_rows, depth, io_size_bytes, direct: false, engine: EngineKind::Auto, single_thread_engine: true }
}

#[test]
fn lookups_match_the_oracle_on_every_path() {
    let (dir, by_id) = setup(20, 5000);
    let by_val = oracle(dir.path(), "t", 1);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let key_sets: Vec<Vec<i64>> = vec![
        vec![],
        vec![7],
        (0..10).map(|_| rng.gen_range(-5..5005)).collect(),
        (0..40).map(|_| rng.gen_range(0..5000)).collect(),
        (0..700).map(|_| rng.gen_range(-100..5100)).collect(),
    ];
    for (io_size, depth) in [(8192u32, 1u32), (8192, 32), (65536, 8)] {
        for prefetch_from in [0u32, 25, u32::MAX] {
            let pool = BufferPool::with_frames(2048).unwrap();
            for index in ["by_id", "by_val"] {
                let mut s = session(dir.path(), index, &pool, options(prefetch_from, io_size, depth));
                for keys in &key_sets {
                    let keys: Vec<i64> = if index == "by_val" { keys.iter().map(|k| k % 1000).take(12).collect() } else { keys.clone() };
                    let oracle = if index == "by_val" { &by_val } else { &by_id };
                    let want = expected(oracle, &keys);
                    let (got, stats) = run(&mut s, &keys);
                    assert_eq!(got.len(), want.len(), "{index} io {io_size} depth {depth} prefetch_from {prefetch_from} keys {}", keys.len());
                    assert_eq!(got, want, "{index} io {io_size} depth {depth} prefetch_from {prefetch_from}");
                    assert_eq!(stats.rows_count, want.len() as u64);
                    let expect_prefetch = stats.rows_count >= prefetch_from as u64;
                    assert_eq!(stats.mode, if expect_prefetch { "prefetch" } else { "sync" });
                    // Again, warm: same rows, no heap reads.
                    let (again, warm) = run(&mut s, &keys);
                    assert_eq!(again, want);
                    assert_eq!(warm.heap_reads_count, 0, "warm lookup read the heap");
                }
                assert_eq!(pool.pinned_count(), 0);
                pool.clear().unwrap();
            }
        }
    }
}

#[test]
fn range_lookup_matches_the_oracle() {
    let (dir, by_id) = setup(40, 3000);
    let pool = BufferPool::with_frames(512).unwrap();
    let mut s = session(dir.path(), "by_id", &pool, options(25, 8192, 16));
    let (got, _) = run_query(&mut s, &KeyQuery::Range { lo: key(100), hi: key(399) });
    let mut want: Vec<String> = by_id.range(100..=399).flat_map(|(_, v)| v.clone()).collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn a_small_pool_still_answers_right() {
    let (dir, by_id) = setup(10, 4000);
    // 64 frames: far fewer than the table's 400 pages; the window (16) fits.
    let pool = BufferPool::with_frames(64).unwrap();
    let mut s = session(dir.path(), "by_id", &pool, options(25, 8192, 16));
    let keys: Vec<i64> = (0..4000).step_by(7).collect();
    let (got, _) = run(&mut s, &keys);
    assert_eq!(got, expected(&by_id, &keys));
    assert!(pool.snapshot().evictions_count > 0);
    assert!(pool.resident_count() <= 64);
}

#[test]
fn damaged_heap_page_is_a_checksum_error_on_both_paths() {
    let (dir, _) = setup(20, 2000);
    let db = Database::open(dir.path()).unwrap();
    let t = db.table("t").unwrap();
    let path = db.file_path(&t.partitions[0].runs[0]);
    let damaged_page_id = t.partitions[0].runs[0].first_page_id + 5;
    // Damage page 5.
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start(5 * 8192 + 3000)).unwrap();
    f.write_all(&[0x5A, 0xA5]).unwrap();
    drop(f);
    let by_id = oracle_skipping(dir.path(), "t", 0, Some(damaged_page_id));
    for prefetch_from in [0u32, u32::MAX] {
        let pool = BufferPool::with_frames(256).unwrap();
        let mut s = session(dir.path(), "by_id", &pool, options(prefetch_from, 8192, 8));
        let all: Vec<i64> = (0..2000).collect();
        let layout = RowLayout::new(&s.table.columns);
        let q = keys_query(&all);
        let r = s.run(&q, &mut |_l, b| drop(decode_row(&layout, b)));
        match r {
            Err(IndexError::Storage(flashscan_storage::StorageError::PageChecksum { page_id, .. })) => assert_eq!(page_id & 0xFFFF_FFFF, 5),
            other => panic!("expected a checksum error, got {other:?}"),
        }
        assert_eq!(pool.pinned_count(), 0);
        // The session is usable afterwards: keys on undamaged pages still answer.
        let keys: Vec<i64> = by_id.keys().copied().take(50).collect();
        let (got, _) = run(&mut s, &keys);
        assert_eq!(got, expected(&by_id, &keys));
    }
}

#[test]
fn catalog_errors_are_typed() {
    let (dir, _) = setup(5, 100);
    let again = create_index(dir.path(), &CreateIndex { table: "t".into(), name: "by_id".into(), columns: vec!["id".into()], build_options: None });
    assert!(matches!(again, Err(IndexError::IndexExists { .. })));
    let bad = create_index(dir.path(), &CreateIndex { table: "t".into(), name: "f".into(), columns: vec!["filler".into()], build_options: None });
    assert!(matches!(bad, Err(IndexError::UnsupportedKeyColumn { .. })));
    let pool = BufferPool::with_frames(64).unwrap();
    let missing = LookupSession::open(dir.path(), "t", "nope", &pool, LookupOptions::default(), &mut |_| {});
    assert!(matches!(missing, Err(IndexError::UnknownIndex { .. })));
}

/// Rows a DELETE removed are never returned: an index holding their entries (built before
/// the deleted rows file named them) drops them before any read, on both paths, and an
/// index built afterwards leaves them out.
#[test]
fn deleted_rows_are_neither_returned_nor_indexed() {
    let (dir, by_id) = setup(20, 2000);
    let pool = BufferPool::with_frames(512).unwrap();
    let all: Vec<i64> = (0..2000).collect();
    // Where each id lives, as the index says.
    let mut places: Vec<(i64, u64)> = Vec::new();
    let mut s = session(dir.path(), "by_id", &pool, options(25, 8192, 8));
    let layout = RowLayout::new(&s.table.columns);
    s.run(&keys_query(&all), &mut |loc, bytes| {
        let Value::Int64(id) = decode_row(&layout, bytes).unwrap()[0] else { panic!("id not Int64") };
        places.push((id, RowId::in_page(PageId(loc.page_id), loc.slot as u32).unwrap().0));
    })
    .unwrap();
    drop(s);
    let deleted = |id: i64| id % 3 == 0;
    let mut deleted_ids: Vec<u64> = places.iter().filter(|(id, _)| deleted(*id)).map(|(_, row)| *row).collect();
    deleted_ids.sort_unstable();
    mark_rows_deleted(dir.path(), "t", &deleted_ids);
    let live: Vec<i64> = all.iter().copied().filter(|id| !deleted(*id)).collect();

    let by_id_live = create_index(dir.path(), &CreateIndex { table: "t".into(), name: "by_id_live".into(), columns: vec!["id".into()], build_options: None }).unwrap();
    assert_eq!(by_id_live.tree.entry_count, live.len() as u64, "the deleted rows are not indexed");
    for (index, skipped) in [("by_id", deleted_ids.len() as u64), ("by_id_live", 0)] {
        for prefetch_from in [0u32, u32::MAX] {
            pool.clear().unwrap();
            let mut s = session(dir.path(), index, &pool, options(prefetch_from, 8192, 8));
            let (got, stats) = run(&mut s, &all);
            assert_eq!(got, expected(&by_id, &live), "{index} prefetch_from {prefetch_from}");
            assert_eq!(stats.deleted_rows_skipped, skipped, "{index}");
            let (none, _) = run(&mut s, &[0, 3, 1998]);
            assert!(none.is_empty(), "{index}: deleted keys found {none:?}");
        }
    }
}
