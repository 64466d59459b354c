//! Column store tables as scan sources. Opening the table reads every row group's
//! metadata (header, directory: a few KB per million rows, checksum verified); a scan then
//! plans its reads from it:
//! - row groups whose min/max prove no row can pass the query's filter are skipped unread;
//! - of the others, only the projected columns' segments are read, each widened to whole
//!   8 KB pages (O_DIRECT alignment), neighbours closer than `COALESCE_GAP_BYTES` merged
//!   into one read, long segments cut into reads of the scan's I/O size;
//! - COUNT(*) (no columns) reads only the metadata pages and verifies them.
//!
//! A row group's reads form one unit, decoded by one worker: each segment is decoded as
//! soon as its bytes are complete (straight from the I/O buffer when one read holds it,
//! else gathered in a buffer first), and the row group's batch goes to the sink when its
//! last projected column is decoded.
//!
//! Deleted rows (the table's deleted rows file, or a SQL snapshot's view of its deletes:
//! `with_deleted`) are taken out of each row group's batch; a row group with deleted rows,
//! and every row group when row ids are asked for (`with_row_ids`: UPDATE and DELETE),
//! is decoded whole rather than handed to a segment sink, so kernels that read segments
//! never see a deleted row.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use flashscan_storage::columnstore::table_reader::read_row_group_metadata;
use flashscan_storage::columnstore::{RowGroupReader, SegmentStats, StatValue, VecPool};
use flashscan_storage::live_rows::{deleted_rows_of_group, row_group_first_pages, DeletedRowSet};
use flashscan_storage::{Database, PageId, RowId, TableMeta, PAGE_SIZE_BYTES};

use crate::chunk::Chunk;
use crate::error::ExecError;
use crate::segments::{RowGroupSegments, SegmentSink};
use crate::source::{distinct_paths, file_index_of, ChunkDecoder, Emit, PageDecoder, ReadPlan, RunSpec, ScanFilter, TableSource};

/// Segments closer than this are read together: one larger read costs less than two
/// (a gap of 64 KB is read in ~30 µs at 2 GB/s, about one I/O's overhead).
pub const COALESCE_GAP_BYTES: u64 = 64 * 1024;

/// One row group, as the scan knows it after opening the table.
#[derive(Debug)]
pub struct RowGroupInfo {
    pub partition_index: u32,
    pub path: PathBuf,
    pub offset_bytes: u64,
    pub row_count: u64,
    pub total_bytes: u64,
    pub metadata_bytes: u64,
    /// The verified metadata, reopened by decoders to check each segment against it.
    metadata: Vec<u8>,
    /// Per column: (segment offset in the row group, segment bytes, statistics).
    pub columns: Vec<(u64, u64, SegmentStats)>,
    /// Its first virtual page among row ids (`RowId::row_group_first_page`); None when
    /// its rows cannot be named.
    pub first_page: Option<PageId>,
}

/// Which slots of a (virtual) page are deleted, into the vector (cleared first); whether
/// any: the table's deleted rows file, or a SQL snapshot's deletes.
pub type DeletedSlots = Arc<dyn Fn(PageId, &mut Vec<u16>) -> bool + Send + Sync>;

pub struct ColumnStoreTable<'a> {
    meta: &'a TableMeta,
    row_groups: Arc<Vec<RowGroupInfo>>,
    deleted: Option<DeletedSlots>,
    row_ids: bool,
}

impl<'a> ColumnStoreTable<'a> {
    /// Opens every row group of the table.
    /// Opens every row group of the table, its deleted rows file applied.
    pub fn new(db: &Database, meta: &'a TableMeta) -> Result<ColumnStoreTable<'a>, ExecError> {
        Self::with_selection(db.dir(), meta, &|_, _| true)?.with_deleted_rows_file(db.dir())
    }

    /// Opens the row groups `keep(partition_index, row_group_index)` selects (a SQL
    /// execution partition reads a share of them), every row live: a reader that knows
    /// deleted rows says so (`with_deleted_rows_file`, or a snapshot's `with_deleted`).
    pub fn with_selection(db_dir: &Path, meta: &'a TableMeta, keep: &dyn Fn(u32, usize) -> bool) -> Result<ColumnStoreTable<'a>, ExecError> {
        if !meta.is_column_store() {
            return Err(ExecError::NotColumnStore { table: meta.name.clone(), format: meta.format.clone() });
        }
        let mut row_groups = Vec::new();
        let first_pages = row_group_first_pages(meta);
        for (position, partition) in meta.partitions.iter().enumerate() {
            for (index, row_group) in partition.row_groups.iter().enumerate() {
                if !keep(partition.index, index) {
                    continue;
                }
                // join keeps an absolute path (a file on another volume) as it is.
                let path = db_dir.join(&row_group.file);
                let metadata = read_row_group_metadata(db_dir, meta, row_group)?;
                let reader = RowGroupReader::open(&metadata, &path, row_group.offset_bytes).map_err(flashscan_storage::StorageError::from)?;
                let columns = (0..reader.column_count())
                    .map(|c| {
                        let (offset, bytes) = reader.column_byte_range(c);
                        (offset, bytes, reader.column_stats(c))
                    })
                    .collect();
                row_groups.push(RowGroupInfo {
                    partition_index: partition.index,
                    path,
                    offset_bytes: row_group.offset_bytes,
                    row_count: row_group.row_count,
                    total_bytes: row_group.total_bytes,
                    metadata_bytes: row_group.metadata_bytes,
                    metadata,
                    columns,
                    first_page: first_pages[position][index],
                });
            }
        }
        Ok(ColumnStoreTable { meta, row_groups: Arc::new(row_groups), deleted: None, row_ids: false })
    }

    /// The table's deleted rows file applied (read once here; none without one).
    pub fn with_deleted_rows_file(mut self, db_dir: &Path) -> Result<Self, ExecError> {
        if self.meta.deleted_rows.is_some() {
            let set = DeletedRowSet::of_table(db_dir, self.meta)?;
            self.deleted = Some(Arc::new(move |page, out: &mut Vec<u16>| set.slots_on_page(page, out)));
        }
        Ok(self)
    }

    /// Deleted rows as `deleted` says (a SQL snapshot's view).
    pub fn with_deleted(mut self, deleted: Option<DeletedSlots>) -> Self {
        self.deleted = deleted;
        self
    }

    /// Each row's id as a last column (UInt64), for UPDATE and DELETE.
    pub fn with_row_ids(mut self, row_ids: bool) -> Self {
        self.row_ids = row_ids;
        self
    }

    pub fn meta(&self) -> &TableMeta {
        self.meta
    }

    pub fn row_groups(&self) -> &[RowGroupInfo] {
        &self.row_groups
    }

    /// Row group `index` may hold a row passing `filter` (or nothing proves otherwise).
    fn may_match(&self, index: usize, filter: &ScanFilter) -> bool {
        let group = &self.row_groups[index];
        filter.ranges.iter().all(|range| {
            let Some((_, _, stats)) = group.columns.get(range.column) else { return true };
            match (stats.min, stats.max) {
                (Some(StatValue::Int64(min)), Some(StatValue::Int64(max))) => range.overlaps(min, max),
                // All null: no value can lie in any range.
                _ => !(group.row_count > 0 && stats.null_count == group.row_count),
            }
        })
    }
}

fn page_floor(offset: u64) -> u64 {
    offset / PAGE_SIZE_BYTES as u64 * PAGE_SIZE_BYTES as u64
}

fn page_ceil(offset: u64) -> u64 {
    offset.div_ceil(PAGE_SIZE_BYTES as u64) * PAGE_SIZE_BYTES as u64
}

/// Sorted, page-aligned file ranges merged when they touch or lie within `gap` bytes.
fn coalesce(mut ranges: Vec<(u64, u64)>, gap: u64) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if start <= last.1 + gap => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

impl TableSource for ColumnStoreTable<'_> {
    crate::table_meta_methods!(meta);

    fn is_column_store(&self) -> bool {
        true
    }

    fn row_count(&self) -> u64 {
        self.row_groups.iter().map(|g| g.row_count).sum()
    }

    fn partition_count(&self) -> u32 {
        let mut partitions: Vec<u32> = self.row_groups.iter().map(|g| g.partition_index).collect();
        partitions.dedup();
        partitions.len() as u32
    }

    /// Whole row groups (for cache drops and tools that read everything).
    fn runs(&self) -> Vec<RunSpec> {
        self.row_groups
            .iter()
            .map(|g| RunSpec {
                path: g.path.clone(),
                offset_bytes: g.offset_bytes,
                page_count: (g.total_bytes / PAGE_SIZE_BYTES as u64) as u32,
                first_page_id: 0,
                partition_index: g.partition_index,
            })
            .collect()
    }

    fn new_decoder(&self, _projection: &[usize]) -> Result<Box<dyn PageDecoder>, ExecError> {
        Err(ExecError::Internal(format!("table {} is a column store: it is read by row groups, not by pages", self.meta.name)))
    }

    fn plan_reads(&self, projection: &[usize], filter: &ScanFilter, io_size_bytes: usize) -> Result<ReadPlan, ExecError> {
        let column_count = self.meta.columns.len();
        if let Some(bad) = projection.iter().find(|c| **c >= column_count) {
            return Err(ExecError::InvalidOption(format!("column {bad} out of range: table {} has {column_count}", self.meta.name)));
        }
        let io_size_bytes = page_floor(io_size_bytes as u64).max(PAGE_SIZE_BYTES as u64);
        let paths = distinct_paths(&self.runs());
        let mut plan = ReadPlan { paths, ..ReadPlan::default() };
        for (index, group) in self.row_groups.iter().enumerate() {
            plan.skipped.row_groups_total += 1;
            if !self.may_match(index, filter) {
                plan.skipped.row_groups_skipped += 1;
                plan.skipped.rows_skipped += group.row_count;
                continue;
            }
            let file_index = file_index_of(&plan.paths, &group.path)?;
            let ranges: Vec<(u64, u64)> = if projection.is_empty() {
                vec![(group.offset_bytes, group.offset_bytes + page_ceil(group.metadata_bytes))]
            } else {
                projection
                    .iter()
                    .map(|&c| {
                        let (offset, bytes, _) = group.columns[c];
                        let start = group.offset_bytes + offset;
                        (page_floor(start), page_ceil(start + bytes.max(1)))
                    })
                    .collect()
            };
            for (start, end) in coalesce(ranges, COALESCE_GAP_BYTES) {
                let mut at = start;
                while at < end {
                    let length = (end - at).min(io_size_bytes);
                    plan.chunks.push(Chunk {
                        file_index,
                        offset_bytes: at,
                        length_bytes: length as u32,
                        first_page_id: 0,
                        page_count: (length / PAGE_SIZE_BYTES as u64) as u32,
                        tag: index as u64,
                    });
                    at += length;
                }
            }
            plan.unit_ends.push(plan.chunks.len());
        }
        Ok(plan)
    }

    fn new_chunk_decoder(&self, projection: &[usize], _plan: &ReadPlan) -> Result<Box<dyn ChunkDecoder>, ExecError> {
        let schema = self.meta.arrow_schema();
        let mut fields: Vec<_> = projection.iter().map(|&c| schema.field(c).clone()).collect();
        if self.row_ids {
            fields.push(arrow::datatypes::Field::new(ROW_ID_FIELD, arrow::datatypes::DataType::UInt64, false));
        }
        Ok(Box::new(RowGroupDecoder {
            row_groups: self.row_groups.clone(),
            deleted: self.deleted.clone(),
            row_ids: self.row_ids,
            gone: HashMap::new(),
            projection: projection.to_vec(),
            schema: Arc::new(Schema::new(fields)),
            pending: HashMap::new(),
            pool: VecPool::default(),
            gather_pool: Vec::new(),
            pending_segments: HashMap::new(),
        }))
    }
}

/// A row group whose columns are arriving.
struct PendingGroup {
    /// Per projected column: the decoded array once complete.
    arrays: Vec<Option<ArrayRef>>,
    /// Per projected column: bytes gathered so far, when reads split its segment.
    partial: Vec<Option<(Vec<u8>, u64)>>,
    missing: usize,
}

/// The row id column's name in a decoder's batches (the SQL layer renames it).
pub const ROW_ID_FIELD: &str = "__flashscan_row_id";

struct RowGroupDecoder {
    row_groups: Arc<Vec<RowGroupInfo>>,
    deleted: Option<DeletedSlots>,
    row_ids: bool,
    /// Per row group being decoded: its deleted rows (ascending), found once.
    gone: HashMap<u64, Arc<Vec<u32>>>,
    projection: Vec<usize>,
    schema: SchemaRef,
    pending: HashMap<u64, PendingGroup>,
    /// Value vectors of batches the sink is done with, decoded into again.
    pool: VecPool,
    /// Buffers segments split over several reads were gathered in, reused.
    gather_pool: Vec<Vec<u8>>,
    /// Row groups whose segments are arriving, for a sink that takes segments.
    pending_segments: HashMap<u64, PendingSegments>,
}

/// A row group's segment bytes gathered for a segment sink: per projected column, the
/// buffer and how many bytes of it are filled.
struct PendingSegments {
    buffers: Vec<(Vec<u8>, u64)>,
    missing: usize,
}

/// Gather buffers a decoder keeps for reuse.
const GATHER_BUFFERS_MAX: usize = 8;

impl RowGroupDecoder {
    /// Segment mode: when the chunk holds all of a row group's projected segments, they are
    /// read in place; otherwise each is gathered (compressed bytes, ~1-3 bytes a value for
    /// TPC-H, far less than decoded vectors) until the row group is complete.
    fn decode_segments(&mut self, chunk: &Chunk, bytes: &[u8], path: &Path, sink: &mut dyn SegmentSink) -> Result<u64, ExecError> {
        let group = self.row_groups.get(chunk.tag as usize).ok_or_else(|| ExecError::Internal(format!("chunk names row group {} of {}", chunk.tag, self.row_groups.len())))?;
        debug_assert_eq!(path, group.path);
        let chunk_start = chunk.offset_bytes;
        let chunk_end = chunk_start + bytes.len() as u64;
        let ranges: Vec<(u64, u64)> = self
            .projection
            .iter()
            .map(|&column| {
                let (offset, length, _) = group.columns[column];
                (group.offset_bytes + offset, group.offset_bytes + offset + length)
            })
            .collect();
        let reader = RowGroupReader::open(&group.metadata, &group.path, group.offset_bytes).map_err(flashscan_storage::StorageError::from)?;
        let all_here = ranges.iter().all(|(start, end)| *start >= chunk_start && *end <= chunk_end);
        if all_here && !self.pending_segments.contains_key(&chunk.tag) {
            let slices: Vec<&[u8]> = ranges.iter().map(|(start, end)| &bytes[(start - chunk_start) as usize..(end - chunk_start) as usize]).collect();
            Self::hand_segments(&reader, group, &self.projection, &self.schema, &slices, sink)?;
            return Ok(group.row_count);
        }
        let gather_pool = &mut self.gather_pool;
        let pending = self.pending_segments.entry(chunk.tag).or_insert_with(|| PendingSegments {
            buffers: ranges
                .iter()
                .map(|(start, end)| {
                    // Every byte is copied in before the segment is read: stale bytes never show.
                    let mut buffer = gather_pool.pop().unwrap_or_default();
                    buffer.resize((end - start) as usize, 0);
                    (buffer, 0)
                })
                .collect(),
            missing: ranges.len(),
        });
        for ((start, end), (buffer, filled)) in ranges.iter().zip(pending.buffers.iter_mut()) {
            let length = end - start;
            if *filled == length {
                continue;
            }
            let (from, to) = ((*start).max(chunk_start), (*end).min(chunk_end));
            if from >= to {
                continue;
            }
            buffer[(from - start) as usize..(to - start) as usize].copy_from_slice(&bytes[(from - chunk_start) as usize..(to - chunk_start) as usize]);
            *filled += to - from;
            if *filled == length {
                pending.missing -= 1;
            }
        }
        // Empty segments never receive bytes: count them complete.
        pending.missing = pending.buffers.iter().zip(&ranges).filter(|((_, filled), (start, end))| *filled < end - start).count();
        if pending.missing > 0 {
            return Ok(0);
        }
        let Some(done) = self.pending_segments.remove(&chunk.tag) else { return Ok(0) };
        let slices: Vec<&[u8]> = done.buffers.iter().map(|(buffer, _)| buffer.as_slice()).collect();
        let result = Self::hand_segments(&reader, group, &self.projection, &self.schema, &slices, sink);
        for (buffer, _) in done.buffers {
            if self.gather_pool.len() < GATHER_BUFFERS_MAX {
                self.gather_pool.push(buffer);
            }
        }
        result?;
        Ok(group.row_count)
    }

    /// Verifies every segment (checksum, directory) and hands the row group to the sink.
    fn hand_segments(
        reader: &RowGroupReader<'_>,
        group: &RowGroupInfo,
        projection: &[usize],
        schema: &SchemaRef,
        slices: &[&[u8]],
        sink: &mut dyn SegmentSink,
    ) -> Result<(), ExecError> {
        let mut columns = Vec::with_capacity(projection.len());
        let mut locations = Vec::with_capacity(projection.len());
        for (&column, slice) in projection.iter().zip(slices) {
            columns.push(reader.open_column_segment(column, slice).map_err(flashscan_storage::StorageError::from)?);
            locations.push(reader.column_error_location(column));
        }
        for view in &columns {
            if view.header.value_count != group.row_count as usize {
                return Err(Self::corrupt(group, format!("a segment holds {} values for {} rows", view.header.value_count, group.row_count)));
            }
        }
        sink.consume_segments(&RowGroupSegments { row_count: group.row_count as usize, schema: schema.clone(), columns, locations })
    }

    fn corrupt(group: &RowGroupInfo, what: String) -> ExecError {
        ExecError::Corrupt { path: group.path.clone(), offset_bytes: group.offset_bytes, what }
    }

    /// The deleted rows of row group `tag` (ascending), found on first ask.
    fn gone(&mut self, tag: u64) -> Result<Arc<Vec<u32>>, ExecError> {
        if let Some(g) = self.gone.get(&tag) {
            return Ok(g.clone());
        }
        let group = self.row_groups.get(tag as usize).ok_or_else(|| ExecError::Internal(format!("chunk names row group {tag} of {}", self.row_groups.len())))?;
        let rows = match (&self.deleted, group.first_page) {
            (Some(deleted), Some(first)) => deleted_rows_of_group(first, group.row_count, &mut |page, out| deleted(page, out)).map_err(|what| Self::corrupt(group, what))?,
            _ => Vec::new(),
        };
        let rows = Arc::new(rows);
        self.gone.insert(tag, rows.clone());
        Ok(rows)
    }

    /// The row group's batch as the scan hands it on: its deleted rows taken out and,
    /// when asked, each row's id added as the last column.
    fn live(&mut self, tag: u64, batch: RecordBatch) -> Result<RecordBatch, ExecError> {
        let gone = self.gone(tag)?;
        self.gone.remove(&tag);
        if gone.is_empty() && !self.row_ids {
            return Ok(batch);
        }
        let group = &self.row_groups[tag as usize];
        let rows = group.row_count as usize;
        let mut columns = batch.columns().to_vec();
        if self.row_ids {
            let first = group.first_page.ok_or_else(|| {
                ExecError::InvalidOption(format!("table row group at {} offset {}: its rows cannot be named by row ids (more than 32,768 row groups in one file): rebuild the table first", group.path.display(), group.offset_bytes))
            })?;
            let ids: Vec<u64> = (0..rows as u64).map(|r| RowId::in_row_group(first, r).map(|id| id.0)).collect::<Option<_>>().ok_or_else(|| Self::corrupt(group, format!("{rows} rows: more than a row id names")))?;
            columns.push(Arc::new(arrow::array::UInt64Array::from(ids)));
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        let whole = RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)?;
        Ok(if gone.is_empty() { whole } else { flashscan_storage::columnstore::table_reader::without_rows(&whole, &gone)? })
    }
}

impl ChunkDecoder for RowGroupDecoder {
    fn decode_chunk_segments(&mut self, chunk: &Chunk, bytes: &[u8], path: &Path, sink: &mut dyn SegmentSink) -> Option<Result<u64, ExecError>> {
        if self.projection.is_empty() {
            return None; // COUNT(*) reads metadata only: the batch path.
        }
        // Deleted rows and row ids are applied to whole batches (`live`).
        if self.row_ids {
            return None;
        }
        match self.gone(chunk.tag) {
            Ok(g) if !g.is_empty() => return None,
            Ok(_) => {
                self.gone.remove(&chunk.tag);
            }
            Err(e) => return Some(Err(e)),
        }
        Some(self.decode_segments(chunk, bytes, path, sink))
    }

    fn decode_chunk(&mut self, chunk: &Chunk, bytes: &[u8], path: &Path, emit: &mut Emit<'_>) -> Result<u64, ExecError> {
        let row_groups = self.row_groups.clone();
        let group = row_groups.get(chunk.tag as usize).ok_or_else(|| ExecError::Internal(format!("chunk names row group {} of {}", chunk.tag, self.row_groups.len())))?;
        debug_assert_eq!(path, group.path);
        let row_count = group.row_count as usize;
        if self.projection.is_empty() {
            // COUNT(*): the metadata pages read from disk must be the ones opened.
            let on_disk = &bytes[..(group.metadata_bytes as usize).min(bytes.len())];
            RowGroupReader::open(on_disk, path, chunk.offset_bytes).map_err(flashscan_storage::StorageError::from)?;
            if on_disk != group.metadata.as_slice() {
                return Err(Self::corrupt(group, "row group metadata changed since the table was opened".into()));
            }
            let options = RecordBatchOptions::new().with_row_count(Some(row_count));
            let batch = self.live(chunk.tag, RecordBatch::try_new_with_options(Arc::new(Schema::empty()), vec![], &options)?)?;
            emit(&batch)?;
            return Ok(group.row_count);
        }

        // Reopened from the metadata verified when the table was opened (~1 KB): the
        // directory checks each segment below.
        let reader = RowGroupReader::open(&group.metadata, &group.path, group.offset_bytes).map_err(flashscan_storage::StorageError::from)?;
        let chunk_start = chunk.offset_bytes;
        let chunk_end = chunk_start + bytes.len() as u64;
        let pending = self.pending.entry(chunk.tag).or_insert_with(|| PendingGroup {
            arrays: vec![None; self.projection.len()],
            partial: vec![None; self.projection.len()],
            missing: self.projection.len(),
        });
        for (slot, &column) in self.projection.iter().enumerate() {
            if pending.arrays[slot].is_some() {
                continue;
            }
            let (offset, length, _) = group.columns[column];
            let start = group.offset_bytes + offset;
            let end = start + length;
            let (from, to) = (start.max(chunk_start), end.min(chunk_end));
            if from >= to && length > 0 {
                continue;
            }
            let array = if from == start && to == end {
                // The whole segment is in this read: decode in place, no copy.
                reader.decode_column_bytes_pooled(column, &bytes[(start - chunk_start) as usize..(end - chunk_start) as usize], &mut self.pool)
            } else {
                let gather_pool = &mut self.gather_pool;
                let (buffer, filled) = pending.partial[slot].get_or_insert_with(|| {
                    // Every byte is copied in before the segment is decoded: stale bytes never show.
                    let mut buffer = gather_pool.pop().unwrap_or_default();
                    buffer.resize(length as usize, 0);
                    (buffer, 0)
                });
                buffer[(from - start) as usize..(to - start) as usize].copy_from_slice(&bytes[(from - chunk_start) as usize..(to - chunk_start) as usize]);
                *filled += to - from;
                if *filled < length {
                    continue;
                }
                let gathered = pending.partial[slot].take().map(|(b, _)| b).unwrap_or_default();
                let decoded = reader.decode_column_bytes_pooled(column, &gathered, &mut self.pool);
                if self.gather_pool.len() < GATHER_BUFFERS_MAX {
                    self.gather_pool.push(gathered);
                }
                decoded
            }
            .map_err(flashscan_storage::StorageError::from)?;
            if array.len() != row_count {
                return Err(Self::corrupt(group, format!("column {column} decoded {} values for {row_count} rows", array.len())));
            }
            pending.arrays[slot] = Some(array);
            pending.missing -= 1;
        }
        if pending.missing > 0 {
            return Ok(0);
        }
        let Some(done) = self.pending.remove(&chunk.tag) else { return Ok(0) };
        let arrays: Vec<ArrayRef> = done.arrays.into_iter().flatten().collect();
        let options = RecordBatchOptions::new().with_row_count(Some(row_count));
        let plain = if self.row_ids { Arc::new(Schema::new(self.schema.fields()[..arrays.len()].to_vec())) } else { self.schema.clone() };
        let batch = self.live(chunk.tag, RecordBatch::try_new_with_options(plain, arrays, &options)?)?;
        emit(&batch)?;
        // The sink is done with the batch: its vectors take the next row group's values.
        let columns = batch.columns().to_vec();
        drop(batch);
        for column in columns {
            self.pool.recycle(column);
        }
        Ok(group.row_count)
    }

    fn finish(&mut self) -> Result<(), ExecError> {
        match self.pending.keys().next() {
            None => Ok(()),
            Some(tag) => Err(ExecError::Internal(format!("row group {tag}: the scan ended before all its columns were read"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesce_merges_touching_and_near_ranges_only() {
        let r = coalesce(vec![(16384, 24576), (0, 8192), (8192, 16384), (200_000, 208_896)], 0);
        assert_eq!(r, vec![(0, 24576), (200_000, 208_896)]);
        let r = coalesce(vec![(0, 8192), (65536, 73728), (1 << 20, (1 << 20) + 8192)], 64 * 1024);
        assert_eq!(r, vec![(0, 73728), (1 << 20, (1 << 20) + 8192)]);
    }

    #[test]
    fn overlapping_ranges_merge() {
        assert_eq!(coalesce(vec![(0, 16384), (8192, 12288)], 0), vec![(0, 16384)]);
    }
}
