//! Any bytes in `DB/catalog.json` → `Catalog::read` returns Ok or Err, never panics; a
//! catalog it accepts can be used (schemas, decoders, page counts) and written back.
//! The indexes of an accepted catalog are read too (`IndexCatalog::from_catalog`), and a
//! legacy `DB/indexes.json` of any bytes is refused, never read.
//!
//! Byte 0 picks the mode: the file as given; the input as the body under a correct header
//! line (length and crc32c), so the JSON parser and the body's types are reached; or a
//! catalog synthesized from input values, serialized, mutated and resealed.
#![no_main]

mod common;

use std::collections::BTreeMap;

use common::{column_type, mutate, scratch_dir, Cursor};
use flashscan_index::IndexCatalog;
use flashscan_storage::catalog::{CATALOG_FILE_NAME, CATALOG_FORMAT_VERSION, CATALOG_MAGIC};
use flashscan_storage::{Catalog, ColumnDef, DataFileMeta, FilegroupMeta, HeapDecoder, PageRun, PartitionMeta, RowGroupMeta, TableMeta};
use libfuzzer_sys::fuzz_target;

fn with_header(body: &[u8]) -> Vec<u8> {
    let mut bytes = format!(
        "{{\"magic\":\"{CATALOG_MAGIC}\",\"format_version\":{CATALOG_FORMAT_VERSION},\"body_bytes\":{},\"body_crc32c\":{}}}\n",
        body.len(),
        crc32c::crc32c(body)
    )
    .into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn synthesized(c: &mut Cursor) -> Catalog {
    let mut tables = BTreeMap::new();
    for t in 0..(c.u8() % 3) {
        let name = format!("t{t}");
        let columns: Vec<ColumnDef> = (0..1 + c.u8() % 5)
            .map(|i| {
                let b = c.u8();
                let mut column_type = column_type(b);
                if let flashscan_storage::ColumnType::Decimal { precision, scale } = &mut column_type {
                    *precision = c.u8();
                    *scale = c.u8() as i8;
                }
                ColumnDef { name: format!("c{i}"), column_type, nullable: b & 0x80 != 0 }
            })
            .collect();
        let partitions = (0..c.u8() % 3)
            .map(|index| PartitionMeta {
                index: index as u32,
                row_count: c.u64(),
                page_count: c.u64(),
                filegroup: c.u8() as u32,
                runs: (0..c.u8() % 3).map(|_| PageRun { file: "d.dat".into(), offset_bytes: c.u64(), page_count: c.u32(), first_page_id: c.u64() }).collect(),
                row_groups: (0..c.u8() % 2)
                    .map(|_| RowGroupMeta { file: "d.dat".into(), offset_bytes: c.u64(), total_bytes: c.u64(), metadata_bytes: c.u64(), row_count: c.u64() })
                    .collect(),
            })
            .collect();
        let meta = TableMeta {
            name: name.clone(),
            columns,
            partitions,
            row_count: c.u64(),
            format: ["heap", "heap_row", "heap_page", "columnstore", "columnstore_archive", "x"][c.u8() as usize % 6].into(),
            partition_by: "c0".into(),
            filegroups: vec![FilegroupMeta { index: 0, files: vec![c.u8() as u32] }],
            files: vec![DataFileMeta { file_id: c.u32(), path: "d.dat".into(), volume: ".".into(), size_bytes: c.u64(), page_count: c.u64() }],
            interleave_bytes: c.u64(),
            size_bytes: c.u64(),
            source: "fuzz".into(),
            load_lsn: c.u64(),
            deleted_rows: (c.u8() % 2 == 0).then(|| flashscan_storage::deleted_rows::DeletedRowsMeta { path: "d.g1.del".into(), row_count: c.u64() }),
            // SQL index definitions: names and columns, valid or not (a catalog that names
            // a missing column is read; writes of that table are refused).
            indexes: (0..c.u8() % 3)
                .map(|i| flashscan_storage::KeyIndexDef { name: format!("i{i}"), columns: vec![["c0", "c1", "nope"][c.u8() as usize % 3].into()], unique: c.u8() % 2 == 0, primary: c.u8() % 2 == 0, constraint: c.u8() % 2 == 0 })
                .collect(),
            // ANALYZE's distinct counts, as many as the columns or not (the planner ignores
            // counts that do not match the table's columns).
            statistics: (c.u8() % 2 == 0).then(|| flashscan_storage::TableStatisticsMeta { row_count: c.u64(), distinct_counts: (0..c.u8() % 4).map(|_| (c.u8() % 2 == 0).then(|| c.u64())).collect() }),
            // Column DEFAULTs, naming a column that exists or not (SQL text is planned
            // when a session registers the table, never when the catalog is read).
            column_defaults: (0..c.u8() % 3)
                .map(|_| flashscan_storage::ColumnDefaultMeta { column: ["c0", "c1", "nope"][c.u8() as usize % 3].into(), sql: "nextval('s')".into(), sequence: (c.u8() % 2 == 0).then(|| "s".into()), always: c.u8() % 2 == 0, identity: c.u8() % 2 == 0 })
                .collect(),
        };
        tables.insert(name, meta);
    }
    // Sequences with any bounds and reservations (a reservation past the maximum reads as
    // an exhausted sequence).
    let sequences = (0..c.u8() % 3)
        .map(|i| (format!("s{i}"), flashscan_storage::SequenceMeta { start: c.u64() as i64, increment: c.u64() as i64, min_value: c.u64() as i64, max_value: c.u64() as i64, reserved_through: (c.u8() % 2 == 0).then(|| c.u64() as i64), owned_by: None }))
        .collect();
    Catalog { generation: c.u64(), next_file_id: c.u32(), next_lsn: c.u64(), tables, sequences, ..Catalog::default() }
}

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor::new(data);
    let mode = c.u8();
    let dir = scratch_dir();
    if mode & 0x80 != 0 {
        std::fs::write(dir.join("indexes.json"), c.rest()).expect("writing indexes.json");
        assert!(IndexCatalog::refuse_legacy(dir).is_err());
        std::fs::remove_file(dir.join("indexes.json")).expect("removing indexes.json");
        return;
    }
    let bytes = match mode % 3 {
        0 => c.rest().to_vec(),
        1 => with_header(c.rest()),
        _ => {
            let catalog = synthesized(&mut c);
            let mut body = serde_json::to_vec(&catalog).expect("serializing");
            mutate(&mut body, &mut c);
            with_header(&body)
        }
    };
    std::fs::write(dir.join(CATALOG_FILE_NAME), &bytes).expect("writing catalog.json");
    let Ok(catalog) = Catalog::read(dir) else { return };
    for table in catalog.tables.values() {
        let _ = table.arrow_schema();
        let _ = table.page_count();
        let _ = table.is_column_store();
        let _ = table.column_index("c0");
        let all: Vec<usize> = (0..table.columns.len()).collect();
        if let Ok(mut decoder) = HeapDecoder::try_new(table, &all) {
            let batch = decoder.finish();
            assert_eq!(batch.num_rows(), 0);
        }
    }
    let _ = IndexCatalog::from_catalog(dir, &catalog);
    // What was read can be written back and reads the same.
    catalog.write_atomic(dir).expect("writing the catalog back");
    assert_eq!(Catalog::read(dir).expect("reading it again"), catalog);
});
