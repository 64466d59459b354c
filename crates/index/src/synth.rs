//! Synthetic tables with an exact number of rows per page, for tests and the cost bench:
//! `id` (Int64, row number, or a permutation of it), `val` (Int64, id mod 1000) and
//! `filler` (Utf8) sized so `rows_per_page` rows fill a page, as the 1…323 rows-per-page
//! tables of the I/O cost article. Written as one data file plus a catalog entry, through
//! the storage crate's public page builder and catalog.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use flashscan_storage::page::header::{seal, PAGE_HEADER_BYTES};
use flashscan_storage::page::heap_page::HeapPageBuilder;
use flashscan_storage::page::row_codec::{RowLayout, RowWriter};
use flashscan_storage::{Catalog, ColumnDef, ColumnType, DataFileMeta, FilegroupMeta, Lsn, PageId, PageRun, PartitionMeta, TableMeta, EXTENT_SIZE_BYTES, PAGE_SIZE_BYTES};
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::error::IndexError;

/// Null bitmap (1) + id (8) + val (8) + one var offset (2).
const ROW_FIXED_BYTES: usize = 19;
const SLOT_BYTES: usize = 2;
pub const ROWS_PER_PAGE_MAX: usize = (PAGE_SIZE_BYTES - PAGE_HEADER_BYTES) / (ROW_FIXED_BYTES + SLOT_BYTES);

#[derive(Debug, Clone)]
pub struct SynthSpec {
    pub name: String,
    pub rows_per_page: usize,
    pub row_count: u64,
    /// Shuffle ids over rows (seeded), so neighbouring keys live on unrelated pages.
    pub shuffle_seed: Option<u64>,
}

pub fn columns() -> Vec<ColumnDef> {
    vec![
        ColumnDef { name: "id".into(), column_type: ColumnType::Int64, nullable: false },
        ColumnDef { name: "val".into(), column_type: ColumnType::Int64, nullable: false },
        ColumnDef { name: "filler".into(), column_type: ColumnType::Utf8, nullable: false },
    ]
}

/// Filler bytes that make `rows_per_page` rows (and their slots) fit one page.
pub fn filler_bytes(rows_per_page: usize) -> usize {
    (PAGE_SIZE_BYTES - PAGE_HEADER_BYTES) / rows_per_page - ROW_FIXED_BYTES - SLOT_BYTES
}

/// Writes the table into database `dir` (created if needed), replacing a table of the
/// same name. Returns its catalog entry.
pub fn write_table(dir: &Path, spec: &SynthSpec) -> Result<TableMeta, IndexError> {
    if spec.rows_per_page == 0 || spec.rows_per_page > ROWS_PER_PAGE_MAX {
        return Err(IndexError::InvalidArgument(format!("rows per page {} out of range 1..={ROWS_PER_PAGE_MAX}", spec.rows_per_page)));
    }
    if !flashscan_storage::load::valid_table_name(&spec.name) {
        return Err(IndexError::InvalidArgument(format!("table name {:?}: use letters, digits and _", spec.name)));
    }
    let (_lock, _) = flashscan_storage::load::create_or_open_database_dir(dir)?;
    let mut catalog = Catalog::read(dir)?;
    flashscan_storage::orphans::sweep_unreferenced(dir, &mut catalog)?;
    catalog.generation += 1;
    let file_id = catalog.next_file_id;
    catalog.next_file_id += 1;
    let lsn = catalog.next_lsn.max(1);
    catalog.next_lsn = lsn + 1;
    let file_name = format!("{}_g{}.heap", spec.name, catalog.generation);
    let path = dir.join(&file_name);

    let cols = columns();
    let layout = RowLayout::new(&cols);
    let filler = vec![b'x'; filler_bytes(spec.rows_per_page)];
    let mut ids: Vec<u64> = (0..spec.row_count).collect();
    if let Some(seed) = spec.shuffle_seed {
        ids.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed));
    }
    // Listed as unreferenced before it exists: a crash while writing leaves it for the sweep.
    if fs::symlink_metadata(&path).is_ok() {
        return Err(IndexError::InvalidArgument(format!("{} already exists; flashscan never overwrites a file it did not create", path.display())));
    }
    let mut intent = catalog.clone();
    intent.unreferenced_files.push(file_name.clone());
    intent.write_atomic(dir)?;
    let file = flashscan_storage::fs_safe::create_new(&path).map_err(|e| IndexError::file("creating", &path, e))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut builder = HeapPageBuilder::new(cols.len() as u16);
    let mut row = Vec::with_capacity(PAGE_SIZE_BYTES);
    let mut page = Vec::with_capacity(PAGE_SIZE_BYTES);
    let mut page_index: u32 = 0;
    let mut write_page = |builder: &mut HeapPageBuilder, page_index: &mut u32| -> Result<(), IndexError> {
        page.clear();
        builder.take_page(&mut page);
        seal(&mut page, PageId::new(file_id, *page_index), Lsn(lsn));
        out.write_all(&page).map_err(|e| IndexError::file("writing", &path, e))?;
        *page_index += 1;
        Ok(())
    };
    for &id in &ids {
        let mut w = RowWriter::begin(&layout, &mut row);
        w.put_fixed(0, &(id as i64).to_le_bytes());
        w.put_fixed(1, &((id % 1000) as i64).to_le_bytes());
        w.put_var(2, &filler);
        w.finish().map_err(|len| IndexError::InvalidArgument(format!("synthetic row of {len} bytes does not fit a page")))?;
        let appended = builder.try_append(&row);
        debug_assert!(appended, "a page holds rows_per_page rows by construction");
        if builder.row_count() == spec.rows_per_page {
            write_page(&mut builder, &mut page_index)?;
        }
    }
    if !builder.is_empty() {
        write_page(&mut builder, &mut page_index)?;
    }
    drop(write_page);
    let data_bytes = page_index as u64 * PAGE_SIZE_BYTES as u64;
    let size_bytes = data_bytes.div_ceil(EXTENT_SIZE_BYTES as u64).max(1) * EXTENT_SIZE_BYTES as u64;
    let pad = vec![0u8; (size_bytes - data_bytes) as usize];
    out.write_all(&pad).map_err(|e| IndexError::file("writing", &path, e))?;
    let file = out.into_inner().map_err(|e| IndexError::file("writing", &path, e.into_error()))?;
    file.sync_all().map_err(|e| IndexError::file("syncing", &path, e))?;

    let table = TableMeta {
        name: spec.name.clone(),
        columns: cols,
        partitions: vec![PartitionMeta {
            index: 0,
            row_count: spec.row_count,
            page_count: page_index as u64,
            filegroup: 0,
            runs: if page_index == 0 {
                Vec::new()
            } else {
                vec![PageRun { file: file_name.clone(), offset_bytes: 0, page_count: page_index, first_page_id: PageId::new(file_id, 0).0 }]
            },
            row_groups: Vec::new(),
        }],
        row_count: spec.row_count,
        format: "heap".into(),
        partition_by: "id".into(),
        filegroups: vec![FilegroupMeta { index: 0, files: vec![0] }],
        files: vec![DataFileMeta { file_id, path: file_name, volume: ".".into(), size_bytes, page_count: page_index as u64 }],
        interleave_bytes: EXTENT_SIZE_BYTES as u64,
        size_bytes,
        source: format!("synthetic rows_per_page={} rows={}", spec.rows_per_page, spec.row_count),
        load_lsn: lsn,
    };
    catalog.remove_table(&spec.name);
    catalog.tables.insert(spec.name.clone(), table.clone());
    catalog.commit_and_sweep(dir)?;
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filler_gives_exact_rows_per_page() {
        for n in [1usize, 2, 5, 10, 20, 40, 80, 158, 323, ROWS_PER_PAGE_MAX] {
            let row = ROW_FIXED_BYTES + filler_bytes(n);
            assert!(n * (row + SLOT_BYTES) <= PAGE_SIZE_BYTES - PAGE_HEADER_BYTES, "{n} rows do not fit");
        }
    }
}
