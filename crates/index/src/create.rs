//! `index create`: read every heap page of the table (sequential, large reads), take each
//! live row's key and locator (rows a DELETE removed are skipped), sort, and bulk build the
//! tree; then register it in the index catalog (`catalog.json`), all under the database
//! lock. The tree file is listed as unreferenced in the catalog before it is created
//! (`O_EXCL|O_NOFOLLOW`), and referenced by the commit that adds the index.

use std::fs;
use std::path::Path;
use std::time::Instant;

use flashscan_storage::heap::heap_page::HeapPageRows;
use flashscan_storage::heap::row_codec::RowLayout;
use flashscan_storage::load::lock_database;
use flashscan_storage::orphans::sweep_unreferenced;
use flashscan_storage::heap::page_encoder::HeapFormat;
use flashscan_storage::{verify_page, Catalog, Database, DeletedRowSet, PageId, TableFormat, PAGE_SIZE_BYTES};

use crate::btree::{BuildOptions, TreeBuilder};
use crate::catalog::{IndexCatalog, IndexMeta};
use crate::error::IndexError;
use crate::key::{words_to_bytes, KeySchema, KeyWords};
use crate::locator::RowLocator;

/// Pages per read while scanning the table for keys (1 MiB reads).
const SCAN_READ_PAGES: usize = 128;

#[derive(Debug, Clone)]
pub struct CreateIndex {
    pub table: String,
    pub name: String,
    pub columns: Vec<String>,
    /// Node fill for tests (`None`: full nodes).
    pub build_options: Option<BuildOptions>,
}

pub fn index_file_name(table: &str, name: &str) -> String {
    format!("index_{}_{}.fsbt", table.to_ascii_lowercase(), name.to_ascii_lowercase())
}

/// Builds the index and commits it into the catalog, all under the database lock: two
/// creates at once run one after the other, and neither is lost.
pub fn create_index(dir: &Path, request: &CreateIndex) -> Result<IndexMeta, IndexError> {
    let started = Instant::now();
    if request.name.is_empty() || !request.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(IndexError::InvalidArgument(format!("index name {:?}: use letters, digits and _", request.name)));
    }
    IndexCatalog::refuse_legacy(dir)?;
    // Refuse a directory that is not a database before putting a lock file in it.
    Database::open(dir)?;
    let _lock = lock_database(dir)?;
    let mut catalog = Catalog::read(dir)?;
    sweep_unreferenced(dir, &mut catalog)?;
    let db = Database::open(dir)?;
    let table = db.table(&request.table)?.clone();
    if table.table_format()? != TableFormat::Heap(HeapFormat::Plain) {
        return Err(IndexError::InvalidArgument(format!(
            "table {} is stored as {}: indexes cover uncompressed heap tables only; run `flashscan rebuild DB {} --compression none` first",
            table.name, table.format, table.name
        )));
    }
    let schema = KeySchema::new(&table, &request.columns)?;
    if IndexCatalog::from_catalog(dir, &catalog)?.find(&table.name, &request.name).is_ok() {
        return Err(IndexError::IndexExists { table: table.name.clone(), name: request.name.clone() });
    }

    let mut entries = collect_entries(&db, &table, &schema)?;
    entries.sort_unstable();

    let file_name = index_file_name(&table.name, &request.name);
    debug_assert!(flashscan_storage::fs_safe::is_generated_file_name(&file_name));
    let path = dir.join(&file_name);
    if std::fs::symlink_metadata(&path).is_ok() {
        return Err(IndexError::InvalidArgument(format!("{} already exists and no index lists it; flashscan never overwrites a file it did not create: move it away", path.display())));
    }
    // The file is listed as unreferenced before it exists: a crash while building leaves it
    // for the next writer's sweep.
    let mut intent = catalog.clone();
    intent.unreferenced_files.push(file_name.clone());
    intent.write_atomic(dir)?;
    let kw = schema.key_width_bytes();
    let options = request.build_options.unwrap_or_else(|| BuildOptions::full(kw));
    let mut created = false;
    let result = (|| {
        let mut builder = TreeBuilder::create(&path, kw, options)?;
        created = true;
        let mut key = vec![0u8; kw];
        for (words, locator) in &entries {
            words_to_bytes(words, schema.column_count(), &mut key);
            builder.push(&key, *locator)?;
        }
        let tree = builder.finish()?;
        Ok(tree)
    })();
    let tree = match result {
        Ok(t) => t,
        Err(e) => {
            if created {
                let _ = fs::remove_file(&path);
            }
            let _ = catalog.write_atomic(dir);
            return Err(e);
        }
    };
    let meta = IndexMeta {
        name: request.name.clone(),
        table: table.name.clone(),
        columns: schema.names.clone(),
        file: file_name,
        tree,
        size_bytes: tree.node_count * PAGE_SIZE_BYTES as u64,
        table_load_lsn: table.load_lsn,
        build_seconds: started.elapsed().as_secs_f64(),
    };
    catalog.indexes.push(meta.to_entry()?);
    if let Err(e) = catalog.write_atomic(dir) {
        let _ = fs::remove_file(&path);
        return Err(e.into());
    }
    Ok(meta)
}

/// `index drop`: the index leaves the catalog (atomic commit, under the lock), then its
/// file is removed (a crash in between leaves it listed for the next sweep).
pub fn drop_index(dir: &Path, table: &str, name: &str) -> Result<IndexMeta, IndexError> {
    IndexCatalog::refuse_legacy(dir)?;
    Database::open(dir)?;
    let _lock = lock_database(dir)?;
    let mut catalog = Catalog::read(dir)?;
    let meta = IndexCatalog::from_catalog(dir, &catalog)?.find(table, name)?.clone();
    catalog.indexes.retain(|i| !(i.table == meta.table && i.name == meta.name));
    catalog.unreferenced_files.push(meta.file.clone());
    catalog.commit_and_sweep(dir)?;
    Ok(meta)
}

/// Every live row's (key, locator), in table order: rows a DELETE removed (the table's
/// deleted rows file) are left out, as no reader may find them.
fn collect_entries(db: &Database, table: &flashscan_storage::TableMeta, schema: &KeySchema) -> Result<Vec<(KeyWords, RowLocator)>, IndexError> {
    let layout = RowLayout::new(&table.columns);
    let deleted = DeletedRowSet::of_table(db.dir(), table)?;
    let mut entries = Vec::with_capacity((table.row_count - deleted.len()) as usize);
    // Read through the pool's streaming path (in order, 1 MB at a time), so an index is
    // built from the table as the pool sees it.
    let runs = table.partitions.iter().flat_map(|partition| &partition.runs);
    let Some(mut reader) = flashscan_storage::page_path::FileReader::open_distinct(runs.map(|run| db.file_path(run)))? else {
        return Ok(entries);
    };
    for partition in &table.partitions {
        for run in &partition.runs {
            let path = db.file_path(run);
            let file_index = reader.file_index(&path)?;
            let length = run.page_count as u64 * PAGE_SIZE_BYTES as u64;
            debug_assert!(SCAN_READ_PAGES * PAGE_SIZE_BYTES <= flashscan_storage::page_path::READ_BYTES_MAX);
            let mut visit = |offset: u64, chunk: &[u8]| -> Result<(), IndexError> {
                let done = ((offset - run.offset_bytes) / PAGE_SIZE_BYTES as u64) as usize;
                let n = chunk.len() / PAGE_SIZE_BYTES;
                for p in 0..n {
                    let page = &chunk[p * PAGE_SIZE_BYTES..(p + 1) * PAGE_SIZE_BYTES];
                    let page_id = PageId(run.first_page_id + (done + p) as u64);
                    let page_offset = offset + (p * PAGE_SIZE_BYTES) as u64;
                    let header = verify_page(page, page_id, &path, page_offset)?;
                    if header.page_kind != flashscan_storage::heap::header::PAGE_KIND_HEAP {
                        return Err(IndexError::UnsupportedLayout {
                            table: table.name.clone(),
                            reason: format!("page {:#x} is compressed (kind {}): indexes cover uncompressed heap tables only; rebuild the table as heap", page_id.0, header.page_kind),
                        });
                    }
                    let rows = HeapPageRows::new(page, page_id, &path, page_offset)?;
                    debug_assert_eq!(rows.row_count(), header.row_count);
                    let on_page = deleted.on_page(page_id);
                    on_page.live_rows(rows.row_count() as u32).map_err(|e| e.at(&path, page_id.0, page_offset))?;
                    // Both ascending: a deleted slot is met when the loop reaches it.
                    let mut deleted_slots = on_page.slots().peekable();
                    for slot in 0..rows.row_count() {
                        if deleted_slots.next_if_eq(&slot).is_some() {
                            continue;
                        }
                        let row = rows.row(slot)?;
                        if row.len() < layout.fixed_end_bytes {
                            return Err(flashscan_storage::StorageError::PageCorrupt {
                                file: path.clone(),
                                page_id: page_id.0,
                                offset_bytes: page_offset,
                                reason: format!("the row in slot {slot} is {} bytes, shorter than the row layout's fixed part ({} bytes)", row.len(), layout.fixed_end_bytes),
                            }
                            .into());
                        }
                        let words = schema.read_row_key(row);
                        entries.push((words, RowLocator { page_id: page_id.0, partition: partition.index, slot }));
                    }
                }
                Ok(())
            };
            // The reader speaks storage errors; ours (a compressed page) is kept aside.
            let mut failed: Option<IndexError> = None;
            let read = reader.for_each_extent(file_index, run.offset_bytes, length, PAGE_SIZE_BYTES as u64, &mut |offset, chunk| {
                visit(offset, chunk).map_err(|e| {
                    failed = Some(e);
                    flashscan_storage::StorageError::InvalidArgument("index build stopped".into())
                })
            });
            if let Some(e) = failed {
                return Err(e);
            }
            read?;
        }
    }
    Ok(entries)
}
