//! A row group: a 64-byte header, a column directory (64 bytes per column), the column
//! names, then the segments (8-byte aligned), zero-padded to a multiple of 8192 bytes.
//! The header checksum covers header, directory and names, so statistics and byte ranges
//! can be trusted before any column is read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Field, Schema, SchemaRef};

use super::column_type::ColumnType;
use super::error::{ColumnRef, ColumnStoreError, Location};
use super::segment::{decode_segment_pooled, encode_segment, EncodedSegment, SegmentHeader, SegmentOptions, SegmentView};
use super::vec_pool::VecPool;
use super::stats::{SegmentStats, StatValue};
use super::{COLUMN_COUNT_MAX, ROW_GROUP_ROWS_DEFAULT, ROW_GROUP_ROWS_MAX};
use crate::compression::reader::{u16_at, u32_at, u64_at};
use crate::compression::CodecId;

pub const ROW_GROUP_MAGIC: [u8; 8] = *b"FSCOLRG\0";
pub const ROW_GROUP_VERSION: u16 = 1;
pub const ROW_GROUP_HEADER_BYTES: usize = 64;
pub const DIRECTORY_ENTRY_BYTES: usize = 64;
/// Row groups are padded to whole 8 KB pages, so they can be read with O_DIRECT and placed
/// back to back in a file.
pub const ROW_GROUP_ALIGNMENT_BYTES: usize = 8192;
/// Segments start at multiples of 8 bytes.
pub const SEGMENT_ALIGNMENT_BYTES: usize = 8;

const FLAG_ARCHIVE: u16 = 1 << 0;
const ENTRY_FLAG_NULLABLE: u8 = 1 << 0;
const ENTRY_FLAG_HAS_MIN_MAX: u8 = 1 << 1;

/// Byte offsets of the row group header fields.
mod header_field {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 8;
    pub const FLAGS: usize = 10;
    pub const COLUMN_COUNT: usize = 12;
    pub const ROW_COUNT: usize = 16;
    pub const TOTAL_BYTES: usize = 24;
    pub const METADATA_BYTES: usize = 32;
    pub const CHECKSUM: usize = 40;
}

/// Byte offsets of a column directory entry's fields.
mod entry_field {
    pub const SEGMENT_OFFSET: usize = 0;
    pub const SEGMENT_BYTES: usize = 8;
    pub const TYPE_TAG: usize = 16;
    pub const CODEC: usize = 17;
    pub const PRECISION: usize = 18;
    pub const SCALE: usize = 19;
    pub const FLAGS: usize = 20;
    pub const NULL_COUNT: usize = 24;
    pub const MIN: usize = 32;
    pub const MAX: usize = 40;
    pub const ENCODED_BYTES: usize = 48;
    pub const NAME_OFFSET: usize = 56;
    pub const NAME_BYTES: usize = 60;
}

const _: () = assert!(entry_field::NAME_BYTES + 4 == DIRECTORY_ENTRY_BYTES);
const _: () = assert!(ROW_GROUP_ALIGNMENT_BYTES % SEGMENT_ALIGNMENT_BYTES == 0);
const _: () = assert!(ROW_GROUP_HEADER_BYTES + COLUMN_COUNT_MAX * DIRECTORY_ENTRY_BYTES < u32::MAX as usize);

/// How row groups are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnStoreOptions {
    /// Rows per row group (encode_row_group rejects bigger batches; encode_row_groups splits).
    pub row_group_rows: usize,
    /// Wrap every segment body in zstd: SQL Server's COLUMNSTORE_ARCHIVE.
    pub archive: bool,
}

impl Default for ColumnStoreOptions {
    fn default() -> Self {
        ColumnStoreOptions { row_group_rows: ROW_GROUP_ROWS_DEFAULT, archive: false }
    }
}

fn round_up(value: usize, multiple: usize) -> usize {
    value.div_ceil(multiple) * multiple
}

fn header_checksum(metadata: &[u8]) -> u32 {
    debug_assert!(metadata.len() >= ROW_GROUP_HEADER_BYTES);
    let mut crc = crc32c::crc32c(&metadata[..header_field::CHECKSUM]);
    crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc32c::crc32c_append(crc, &metadata[header_field::CHECKSUM + 4..])
}

/// Encodes `batch` as one row group: bytes padded to a multiple of 8192.
pub fn encode_row_group(batch: &RecordBatch, options: &ColumnStoreOptions) -> Result<Vec<u8>, ColumnStoreError> {
    encode_row_group_with_codecs(batch, options, &[])
}

/// Like `encode_row_group`, with a codec forced for some columns (`forced[i]` for column i;
/// missing or None means analyze). For tests and codec experiments.
pub fn encode_row_group_with_codecs(
    batch: &RecordBatch,
    options: &ColumnStoreOptions,
    forced: &[Option<CodecId>],
) -> Result<Vec<u8>, ColumnStoreError> {
    let row_count = batch.num_rows();
    let row_group_rows_max = options.row_group_rows.min(ROW_GROUP_ROWS_MAX);
    if row_count > row_group_rows_max {
        return Err(ColumnStoreError::TooLarge { row_count, what: "row_group_rows", limit: row_group_rows_max });
    }
    let column_count = batch.num_columns();
    if column_count > COLUMN_COUNT_MAX {
        return Err(ColumnStoreError::TooLarge { row_count: column_count, what: "COLUMN_COUNT_MAX columns", limit: COLUMN_COUNT_MAX });
    }
    let schema = batch.schema();
    let mut segments: Vec<EncodedSegment> = Vec::with_capacity(column_count);
    for (index, (field, array)) in schema.fields().iter().zip(batch.columns()).enumerate() {
        let column = ColumnRef { index, name: field.name().clone() };
        let segment_options = SegmentOptions { archive: options.archive, forced_codec: forced.get(index).copied().flatten() };
        segments.push(encode_segment(array.as_ref(), &column, segment_options)?);
    }

    // Layout: header, directory, names, then segments at 8-byte boundaries.
    let directory_end = ROW_GROUP_HEADER_BYTES + column_count * DIRECTORY_ENTRY_BYTES;
    let names_bytes: usize = schema.fields().iter().map(|field| field.name().len()).sum();
    let metadata_bytes = round_up(directory_end + names_bytes, SEGMENT_ALIGNMENT_BYTES);
    let mut segment_offsets = Vec::with_capacity(column_count);
    let mut end = metadata_bytes;
    for segment in &segments {
        segment_offsets.push(end);
        end = round_up(end + segment.bytes.len(), SEGMENT_ALIGNMENT_BYTES);
    }
    let total_bytes = round_up(end.max(1), ROW_GROUP_ALIGNMENT_BYTES);

    let mut bytes = vec![0u8; total_bytes];
    bytes[header_field::MAGIC..header_field::MAGIC + 8].copy_from_slice(&ROW_GROUP_MAGIC);
    bytes[header_field::VERSION..header_field::VERSION + 2].copy_from_slice(&ROW_GROUP_VERSION.to_le_bytes());
    let flags = if options.archive { FLAG_ARCHIVE } else { 0 };
    bytes[header_field::FLAGS..header_field::FLAGS + 2].copy_from_slice(&flags.to_le_bytes());
    bytes[header_field::COLUMN_COUNT..header_field::COLUMN_COUNT + 4].copy_from_slice(&(column_count as u32).to_le_bytes());
    bytes[header_field::ROW_COUNT..header_field::ROW_COUNT + 8].copy_from_slice(&(row_count as u64).to_le_bytes());
    bytes[header_field::TOTAL_BYTES..header_field::TOTAL_BYTES + 8].copy_from_slice(&(total_bytes as u64).to_le_bytes());
    bytes[header_field::METADATA_BYTES..header_field::METADATA_BYTES + 8].copy_from_slice(&(metadata_bytes as u64).to_le_bytes());

    let mut name_offset = directory_end;
    for (index, (segment, field)) in segments.iter().zip(schema.fields()).enumerate() {
        let entry = &mut bytes[ROW_GROUP_HEADER_BYTES + index * DIRECTORY_ENTRY_BYTES..][..DIRECTORY_ENTRY_BYTES];
        let (tag, precision, scale) = segment.column_type.to_tag();
        let stats = &segment.stats;
        entry[entry_field::SEGMENT_OFFSET..][..8].copy_from_slice(&(segment_offsets[index] as u64).to_le_bytes());
        entry[entry_field::SEGMENT_BYTES..][..8].copy_from_slice(&(segment.bytes.len() as u64).to_le_bytes());
        entry[entry_field::TYPE_TAG] = tag;
        entry[entry_field::CODEC] = stats.codec as u8;
        entry[entry_field::PRECISION] = precision;
        entry[entry_field::SCALE] = scale as u8;
        let mut entry_flags = 0u8;
        if field.is_nullable() {
            entry_flags |= ENTRY_FLAG_NULLABLE;
        }
        if stats.min.is_some() {
            entry_flags |= ENTRY_FLAG_HAS_MIN_MAX;
        }
        entry[entry_field::FLAGS] = entry_flags;
        entry[entry_field::NULL_COUNT..][..8].copy_from_slice(&stats.null_count.to_le_bytes());
        entry[entry_field::MIN..][..8].copy_from_slice(&stats.min.map_or(0, StatValue::to_bits).to_le_bytes());
        entry[entry_field::MAX..][..8].copy_from_slice(&stats.max.map_or(0, StatValue::to_bits).to_le_bytes());
        entry[entry_field::ENCODED_BYTES..][..8].copy_from_slice(&stats.encoded_bytes.to_le_bytes());
        entry[entry_field::NAME_OFFSET..][..4].copy_from_slice(&(name_offset as u32).to_le_bytes());
        entry[entry_field::NAME_BYTES..][..4].copy_from_slice(&(field.name().len() as u32).to_le_bytes());
        bytes[name_offset..name_offset + field.name().len()].copy_from_slice(field.name().as_bytes());
        name_offset += field.name().len();
        let offset = segment_offsets[index];
        bytes[offset..offset + segment.bytes.len()].copy_from_slice(&segment.bytes);
    }
    debug_assert_eq!(name_offset, directory_end + names_bytes);
    let checksum = header_checksum(&bytes[..metadata_bytes]);
    bytes[header_field::CHECKSUM..header_field::CHECKSUM + 4].copy_from_slice(&checksum.to_le_bytes());
    debug_assert_eq!(bytes.len() % ROW_GROUP_ALIGNMENT_BYTES, 0);
    Ok(bytes)
}

/// Splits `batch` into row groups of `options.row_group_rows` and encodes them back to back.
pub fn encode_row_groups(batch: &RecordBatch, options: &ColumnStoreOptions) -> Result<Vec<u8>, ColumnStoreError> {
    let rows_per_group = options.row_group_rows.clamp(1, ROW_GROUP_ROWS_MAX);
    let mut out = Vec::new();
    let mut start = 0;
    while start < batch.num_rows() || (start == 0 && batch.num_rows() == 0) {
        let length = rows_per_group.min(batch.num_rows() - start);
        out.extend_from_slice(&encode_row_group(&batch.slice(start, length), options)?);
        start += length;
        if length == 0 {
            break;
        }
    }
    Ok(out)
}

/// Sizes a scan learns from the first 64 bytes of a row group, before reading the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowGroupSizes {
    /// Header + directory + names: read this much to open a `RowGroupReader`.
    pub metadata_bytes: u64,
    /// The whole padded row group.
    pub total_bytes: u64,
}

#[derive(Debug, Clone)]
struct ColumnEntry {
    segment_offset_bytes: u64,
    segment_bytes: u64,
    column_type: ColumnType,
    stats: SegmentStats,
    name: String,
}

/// Reads one row group: metadata on `open` (checksum verified), columns on demand.
#[derive(Debug)]
pub struct RowGroupReader<'a> {
    bytes: &'a [u8],
    file: PathBuf,
    offset_bytes: u64,
    row_count: usize,
    total_bytes: u64,
    archive: bool,
    columns: Vec<ColumnEntry>,
    schema: SchemaRef,
}

impl<'a> RowGroupReader<'a> {
    /// Reads the fixed header without verifying it (the checksum covers more than 64 bytes):
    /// tells a scan how much to read before `open`.
    pub fn peek_sizes(header: &[u8], file: &Path, offset_bytes: u64) -> Result<RowGroupSizes, ColumnStoreError> {
        let location = Location { file: file.to_path_buf(), offset_bytes, column: None };
        check_fixed_header(header, &location)?;
        Ok(RowGroupSizes {
            metadata_bytes: u64_at(header, header_field::METADATA_BYTES),
            total_bytes: u64_at(header, header_field::TOTAL_BYTES),
        })
    }

    /// Opens the row group whose bytes start at `bytes[0]`, found at `offset_bytes` of
    /// `file` (both only for error messages). `bytes` must hold at least the metadata;
    /// columns are read from it later if it holds them.
    pub fn open(bytes: &'a [u8], file: &Path, offset_bytes: u64) -> Result<Self, ColumnStoreError> {
        let location = Location { file: file.to_path_buf(), offset_bytes, column: None };
        let corrupt = |what: &'static str, detail: String| ColumnStoreError::Corrupt { location: location.clone(), what, detail };
        check_fixed_header(bytes, &location)?;
        let column_count = u32_at(bytes, header_field::COLUMN_COUNT) as usize;
        if column_count > COLUMN_COUNT_MAX {
            return Err(corrupt("row group column count", format!("{column_count} > COLUMN_COUNT_MAX {COLUMN_COUNT_MAX}")));
        }
        let metadata_bytes = u64_at(bytes, header_field::METADATA_BYTES);
        let total_bytes = u64_at(bytes, header_field::TOTAL_BYTES);
        let directory_end = (ROW_GROUP_HEADER_BYTES + column_count * DIRECTORY_ENTRY_BYTES) as u64;
        if metadata_bytes < directory_end || metadata_bytes > total_bytes {
            return Err(corrupt("row group metadata length", format!("{metadata_bytes} bytes, directory ends at {directory_end}, row group is {total_bytes}")));
        }
        if metadata_bytes > bytes.len() as u64 {
            return Err(ColumnStoreError::Truncated {
                location: location.clone(),
                what: "row group metadata",
                needed_bytes: metadata_bytes,
                available_bytes: bytes.len() as u64,
            });
        }
        let metadata = &bytes[..metadata_bytes as usize];
        let stored_crc32c = u32_at(metadata, header_field::CHECKSUM);
        let computed_crc32c = header_checksum(metadata);
        if stored_crc32c != computed_crc32c {
            return Err(ColumnStoreError::ChecksumMismatch { location: location.clone(), what: "row group header and directory", stored_crc32c, computed_crc32c });
        }
        let flags = u16_at(metadata, header_field::FLAGS);
        if flags & !FLAG_ARCHIVE != 0 {
            return Err(corrupt("row group flags", format!("{flags:#06x}")));
        }
        let row_count = u64_at(metadata, header_field::ROW_COUNT);
        if row_count > ROW_GROUP_ROWS_MAX as u64 {
            return Err(corrupt("row group row count", format!("{row_count} > ROW_GROUP_ROWS_MAX {ROW_GROUP_ROWS_MAX}")));
        }

        let mut columns = Vec::with_capacity(column_count);
        let mut fields = Vec::with_capacity(column_count);
        for index in 0..column_count {
            let entry = &metadata[ROW_GROUP_HEADER_BYTES + index * DIRECTORY_ENTRY_BYTES..][..DIRECTORY_ENTRY_BYTES];
            let column_location = Location { column: Some(ColumnRef { index, name: String::new() }), ..location.clone() };
            let entry_corrupt =
                |what: &'static str, detail: String| ColumnStoreError::Corrupt { location: column_location.clone(), what, detail };
            let name_offset = u32_at(entry, entry_field::NAME_OFFSET) as u64;
            let name_bytes = u32_at(entry, entry_field::NAME_BYTES) as u64;
            if name_offset < directory_end || name_offset + name_bytes > metadata_bytes {
                return Err(entry_corrupt("column name range", format!("{name_offset}+{name_bytes} outside the metadata")));
            }
            let name = std::str::from_utf8(&metadata[name_offset as usize..(name_offset + name_bytes) as usize])
                .map_err(|error| entry_corrupt("column name", error.to_string()))?
                .to_string();
            let column_type = ColumnType::from_tag(entry[entry_field::TYPE_TAG], entry[entry_field::PRECISION], entry[entry_field::SCALE] as i8)
                .map_err(|detail| entry_corrupt("column type", detail))?;
            let codec = CodecId::from_u8(entry[entry_field::CODEC]).map_err(|error| ColumnStoreError::from_codec(column_location.clone(), error))?;
            let segment_offset_bytes = u64_at(entry, entry_field::SEGMENT_OFFSET);
            let segment_bytes = u64_at(entry, entry_field::SEGMENT_BYTES);
            let segment_end = segment_offset_bytes.checked_add(segment_bytes);
            if segment_offset_bytes < metadata_bytes || segment_end.is_none_or(|end| end > total_bytes) {
                return Err(entry_corrupt("segment range", format!("{segment_offset_bytes}+{segment_bytes} outside {metadata_bytes}..{total_bytes}")));
            }
            let null_count = u64_at(entry, entry_field::NULL_COUNT);
            if null_count > row_count {
                return Err(entry_corrupt("column null count", format!("{null_count} for {row_count} rows")));
            }
            let entry_flags = entry[entry_field::FLAGS];
            let has_min_max = entry_flags & ENTRY_FLAG_HAS_MIN_MAX != 0;
            let stat = |at: usize| if has_min_max { StatValue::from_bits(column_type, u64_at(entry, at)) } else { None };
            let stats = SegmentStats {
                min: stat(entry_field::MIN),
                max: stat(entry_field::MAX),
                value_count: row_count,
                null_count,
                codec,
                encoded_bytes: u64_at(entry, entry_field::ENCODED_BYTES),
            };
            fields.push(Field::new(name.clone(), column_type.data_type(), entry_flags & ENTRY_FLAG_NULLABLE != 0));
            columns.push(ColumnEntry { segment_offset_bytes, segment_bytes, column_type, stats, name });
        }
        Ok(RowGroupReader {
            bytes,
            file: file.to_path_buf(),
            offset_bytes,
            row_count: row_count as usize,
            total_bytes,
            archive: flags & FLAG_ARCHIVE != 0,
            columns,
            schema: Arc::new(Schema::new(fields)),
        })
    }

    pub fn row_count(&self) -> usize {
        self.row_count
    }

    pub fn column_count(&self) -> usize {
        self.columns.len()
    }

    /// Schema of all columns, names and types as written.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The padded size of the whole row group in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    pub fn is_archive(&self) -> bool {
        self.archive
    }

    /// Statistics of column `column` from the directory. Panics if `column >= column_count()`
    /// (a caller bug, like slice indexing; bytes from disk cannot cause it).
    pub fn column_stats(&self, column: usize) -> SegmentStats {
        self.columns[column].stats
    }

    /// (offset, length) in bytes of column `column`'s segment within the row group, so a scan
    /// can read only the columns it needs. Panics if `column >= column_count()`.
    pub fn column_byte_range(&self, column: usize) -> (u64, u64) {
        let entry = &self.columns[column];
        (entry.segment_offset_bytes, entry.segment_bytes)
    }

    fn column_location(&self, column: usize) -> Location {
        let entry = &self.columns[column];
        Location {
            file: self.file.clone(),
            offset_bytes: self.offset_bytes + entry.segment_offset_bytes,
            column: Some(ColumnRef { index: column, name: entry.name.clone() }),
        }
    }

    /// Decodes one column (checksum verified) into an Arrow array.
    pub fn read_column(&self, column: usize) -> Result<ArrayRef, ColumnStoreError> {
        if column >= self.columns.len() {
            return Err(ColumnStoreError::ColumnOutOfRange { column, column_count: self.columns.len() });
        }
        let entry = &self.columns[column];
        let location = self.column_location(column);
        // Both fit in total_bytes (checked in open), which bounds them below u64::MAX.
        let end = entry.segment_offset_bytes + entry.segment_bytes;
        if end > self.bytes.len() as u64 {
            return Err(ColumnStoreError::Truncated {
                location,
                what: "segment",
                needed_bytes: end,
                available_bytes: self.bytes.len() as u64,
            });
        }
        let segment = &self.bytes[entry.segment_offset_bytes as usize..end as usize];
        self.decode_column_bytes(column, segment)
    }

    /// Decodes column `column` from its segment's bytes read elsewhere (a scan that reads
    /// only some columns), with the same checks as `read_column`: the segment's checksum,
    /// and its header against this row group's directory.
    pub fn decode_column_bytes(&self, column: usize, segment: &[u8]) -> Result<ArrayRef, ColumnStoreError> {
        self.decode_column_bytes_pooled(column, segment, &mut VecPool::default())
    }

    /// `decode_column_bytes`, decoding into vectors recycled through `pool`.
    pub fn decode_column_bytes_pooled(&self, column: usize, segment: &[u8], pool: &mut VecPool) -> Result<ArrayRef, ColumnStoreError> {
        let location = self.segment_location(column, segment)?;
        let (header, array) = decode_segment_pooled(segment, &location, pool)?;
        self.check_against_directory(column, &header, &location)?;
        Ok(array)
    }

    /// Opens column `column` from its segment's bytes for vector-at-a-time decoding, with
    /// the checks of `decode_column_bytes` (checksum, header against the directory).
    pub fn open_column_segment<'s>(&self, column: usize, segment: &'s [u8]) -> Result<SegmentView<'s>, ColumnStoreError> {
        let location = self.segment_location(column, segment)?;
        let view = SegmentView::open(segment, &location)?;
        self.check_against_directory(column, &view.header, &location)?;
        Ok(view)
    }

    /// Checks that `column` exists and `segment` has the length the directory gives its
    /// segment; returns where errors about the segment point.
    fn segment_location(&self, column: usize, segment: &[u8]) -> Result<Location, ColumnStoreError> {
        if column >= self.columns.len() {
            return Err(ColumnStoreError::ColumnOutOfRange { column, column_count: self.columns.len() });
        }
        let entry = &self.columns[column];
        let location = self.column_location(column);
        if segment.len() as u64 != entry.segment_bytes {
            return Err(ColumnStoreError::Truncated { location, what: "segment", needed_bytes: entry.segment_bytes, available_bytes: segment.len() as u64 });
        }
        Ok(location)
    }

    /// Where errors about column `column` point.
    pub fn column_error_location(&self, column: usize) -> Location {
        self.column_location(column)
    }

    fn check_against_directory(&self, column: usize, header: &SegmentHeader, location: &Location) -> Result<(), ColumnStoreError> {
        let entry = &self.columns[column];
        let corrupt = |detail: String| ColumnStoreError::Corrupt { location: location.clone(), what: "segment header vs directory", detail };
        if header.column_type != entry.column_type {
            return Err(corrupt(format!("type {:?} vs {:?}", header.column_type, entry.column_type)));
        }
        if header.value_count != self.row_count || header.null_count as u64 != entry.stats.null_count || header.codec != entry.stats.codec {
            return Err(corrupt(format!(
                "{} values / {} nulls / {} vs {} rows / {} nulls / {}",
                header.value_count, header.null_count, header.codec, self.row_count, entry.stats.null_count, entry.stats.codec
            )));
        }
        Ok(())
    }

    /// Decodes the columns in `projection` (indexes into the schema, any order) as a batch.
    pub fn read_columns(&self, projection: &[usize]) -> Result<RecordBatch, ColumnStoreError> {
        let mut arrays = Vec::with_capacity(projection.len());
        let mut fields = Vec::with_capacity(projection.len());
        for column in projection {
            arrays.push(self.read_column(*column)?);
            fields.push(self.schema.field(*column).clone());
        }
        let schema = Arc::new(Schema::new(fields));
        let options = RecordBatchOptions::new().with_row_count(Some(self.row_count));
        Ok(RecordBatch::try_new_with_options(schema, arrays, &options)?)
    }
}

/// Length, magic and version of the first 64 bytes.
fn check_fixed_header(bytes: &[u8], location: &Location) -> Result<(), ColumnStoreError> {
    if bytes.len() < ROW_GROUP_HEADER_BYTES {
        return Err(ColumnStoreError::Truncated {
            location: location.clone(),
            what: "row group header",
            needed_bytes: ROW_GROUP_HEADER_BYTES as u64,
            available_bytes: bytes.len() as u64,
        });
    }
    if bytes[header_field::MAGIC..header_field::MAGIC + 8] != ROW_GROUP_MAGIC {
        return Err(ColumnStoreError::BadMagic { location: location.clone(), what: "row group header", found: bytes[..8].to_vec() });
    }
    let version = u16_at(bytes, header_field::VERSION);
    if version != ROW_GROUP_VERSION {
        return Err(ColumnStoreError::UnsupportedVersion { location: location.clone(), what: "row group", version, supported: ROW_GROUP_VERSION });
    }
    Ok(())
}
