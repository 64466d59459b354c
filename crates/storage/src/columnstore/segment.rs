//! One column segment: a fixed 80-byte header (codec, counts, min/max, sizes, checksum)
//! followed by the body: [validity bitmap][codec payload], zstd-compressed as a whole when
//! the row group is `archive`. See docs/formats-columnstore.md for the byte table.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, PrimitiveArray,
    StringArray, Time32MillisecondArray, Time32SecondArray, Time64MicrosecondArray, Time64NanosecondArray, TimestampMicrosecondArray,
    TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray, UInt64Array,
};
use arrow::buffer::{NullBuffer, ScalarBuffer};
use arrow::datatypes::ArrowNativeType;
use arrow::datatypes::{ArrowPrimitiveType, DataType};

use super::column_type::{ColumnType, TemporalUnit};
use super::error::{ColumnRef, ColumnStoreError, Location};
use super::vec_pool::{Pooled, VecPool};
use super::stats::{SegmentStats, StatValue};
use super::{ROW_GROUP_ROWS_MAX, SEGMENT_RAW_BODY_BYTES_MAX, ZSTD_LEVEL};
use crate::compression::reader::{u16_at, u32_at, u64_at};
use crate::column::TIMESTAMP_TIME_ZONE;
use crate::compression::{
    binary_plain, boolean_bitmap, decode_integers, encode_integers, encode_strings, float_plain, wide_plain, CodecError, CodecId,
    IntegerInput, IntegerNative, IntegerVectors, StringInput,
};
use crate::compression::string_dictionary::StringCodes;
use crate::compression::string_plain::PlainStrings;

pub const SEGMENT_MAGIC: [u8; 4] = *b"FSSG";
pub const SEGMENT_VERSION: u16 = 1;
pub const SEGMENT_HEADER_BYTES: usize = 80;

const FLAG_HAS_VALIDITY: u8 = 1 << 0;
const FLAG_ZSTD: u8 = 1 << 1;
const FLAG_HAS_MIN_MAX: u8 = 1 << 2;
const FLAGS_KNOWN: u8 = FLAG_HAS_VALIDITY | FLAG_ZSTD | FLAG_HAS_MIN_MAX;

/// Byte offsets of the segment header fields.
mod field {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const CODEC: usize = 6;
    pub const TYPE_TAG: usize = 7;
    pub const FLAGS: usize = 8;
    pub const PRECISION: usize = 9;
    pub const SCALE: usize = 10;
    pub const CHECKSUM: usize = 12;
    pub const VALUE_COUNT: usize = 16;
    pub const NULL_COUNT: usize = 24;
    pub const MIN: usize = 32;
    pub const MAX: usize = 40;
    pub const BODY_BYTES: usize = 48;
    pub const RAW_BODY_BYTES: usize = 56;
    pub const VALIDITY_BYTES: usize = 64;
}

const _: () = assert!(field::VALIDITY_BYTES + 8 + 8 == SEGMENT_HEADER_BYTES);

/// How to encode one segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentOptions {
    /// Wrap the body in zstd (column store archive).
    pub archive: bool,
    /// Skip analysis and use this codec (tests, experiments); an error if it cannot apply.
    pub forced_codec: Option<CodecId>,
}

/// An encoded segment and the stats that go into the column directory.
#[derive(Debug, Clone)]
pub struct EncodedSegment {
    pub bytes: Vec<u8>,
    pub stats: SegmentStats,
    pub column_type: ColumnType,
}

/// crc32c over the header with its checksum field taken as zero, then the body.
fn segment_checksum(header: &[u8], body: &[u8]) -> u32 {
    debug_assert_eq!(header.len(), SEGMENT_HEADER_BYTES);
    let mut crc = crc32c::crc32c(&header[..field::CHECKSUM]);
    crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc = crc32c::crc32c_append(crc, &header[field::CHECKSUM + 4..]);
    crc32c::crc32c_append(crc, body)
}

/// Integer values with null slots filled by the previous valid value (the first valid
/// value for leading nulls), so nulls extend runs and never widen the range.
fn integers_with_filled_nulls(values: impl Iterator<Item = i64>, nulls: Option<&NullBuffer>, value_count: usize) -> Vec<i64> {
    let mut out: Vec<i64> = values.collect();
    debug_assert_eq!(out.len(), value_count);
    if let Some(nulls) = nulls {
        let first_valid = nulls.valid_indices().next().map(|index| out[index]).unwrap_or(0);
        let mut previous = first_valid;
        for (index, value) in out.iter_mut().enumerate() {
            if nulls.is_valid(index) {
                previous = *value;
            } else {
                *value = previous;
            }
        }
    }
    out
}

fn integer_min_max(values: &[i64], nulls: Option<&NullBuffer>) -> Option<(i64, i64)> {
    // Null slots hold copies of valid values, so min/max over all slots equals min/max over
    // valid ones as long as one valid value exists.
    let valid_count = values.len() - nulls.map_or(0, |nulls| nulls.null_count());
    if valid_count == 0 {
        return None;
    }
    Some((values.iter().copied().min().unwrap_or(0), values.iter().copied().max().unwrap_or(0)))
}

fn unsupported(column: &ColumnRef, data_type: &DataType, detail: &'static str) -> ColumnStoreError {
    ColumnStoreError::UnsupportedType { column: column.index, name: column.name.clone(), data_type: data_type.clone(), detail }
}

/// Encodes one column of a row group.
pub fn encode_segment(array: &dyn Array, column: &ColumnRef, options: SegmentOptions) -> Result<EncodedSegment, ColumnStoreError> {
    let data_type = array.data_type();
    let column_type = ColumnType::from_data_type(data_type).map_err(|detail| unsupported(column, data_type, detail))?;
    let value_count = array.len();
    if value_count > ROW_GROUP_ROWS_MAX {
        return Err(ColumnStoreError::TooLarge { row_count: value_count, what: "ROW_GROUP_ROWS_MAX", limit: ROW_GROUP_ROWS_MAX });
    }
    let nulls = array.logical_nulls().filter(|nulls| nulls.null_count() > 0);
    let null_count = nulls.as_ref().map_or(0, |nulls| nulls.null_count());

    let mut raw_body = Vec::new();
    if let Some(nulls) = &nulls {
        boolean_bitmap::compress(nulls.inner(), &mut raw_body);
    }
    let validity_bytes = raw_body.len();
    let codec_error = |error: CodecError| {
        ColumnStoreError::from_codec(Location { column: Some(column.clone()), ..Location::in_memory() }, error)
    };

    // Wide decimals whose valid values all fit an i64 take the integer codecs (and get
    // min/max); the others are stored 16 bytes a value, without min/max (the header's
    // min/max fields are 8 bytes).
    let wide_values_fit_i64 = match column_type {
        ColumnType::WideDecimal { .. } => {
            let typed = as_primitive::<arrow::datatypes::Decimal128Type>(array, column)?;
            typed.values().iter().enumerate().all(|(index, value)| nulls.as_ref().is_some_and(|n| n.is_null(index)) || i64::try_from(*value).is_ok())
        }
        _ => true,
    };
    let (codec, min_max) = match column_type {
        ColumnType::WideDecimal { .. } if !wide_values_fit_i64 => {
            check_forced(options.forced_codec, wide_plain::ID, "wide decimal").map_err(codec_error)?;
            let typed = as_primitive::<arrow::datatypes::Decimal128Type>(array, column)?;
            // Null slots are zeroed: their bytes are never read, and zeros are what a reader of
            // the raw payload expects.
            let values: Vec<i128> =
                typed.values().iter().enumerate().map(|(index, value)| if nulls.as_ref().is_some_and(|n| n.is_null(index)) { 0 } else { *value }).collect();
            wide_plain::compress(&values, &mut raw_body);
            (wide_plain::ID, None)
        }
        ColumnType::Binary => {
            check_forced(options.forced_codec, binary_plain::ID, "binary").map_err(codec_error)?;
            let typed = array
                .as_any()
                .downcast_ref::<arrow::array::BinaryArray>()
                .ok_or_else(|| unsupported(column, data_type, " (array does not downcast)"))?;
            let values: Vec<&[u8]> =
                (0..value_count).map(|index| if nulls.as_ref().is_none_or(|n| n.is_valid(index)) { typed.value(index) } else { &[][..] }).collect();
            binary_plain::compress(&values, &mut raw_body).map_err(codec_error)?;
            (binary_plain::ID, None)
        }
        ColumnType::UInt64 | ColumnType::Timestamp { .. } | ColumnType::Time { .. } | ColumnType::WideDecimal { .. } => {
            let values = match column_type {
                ColumnType::UInt64 => {
                    let typed = as_primitive::<arrow::datatypes::UInt64Type>(array, column)?;
                    integers_with_filled_nulls(typed.values().iter().map(|v| *v as i64), nulls.as_ref(), value_count)
                }
                ColumnType::WideDecimal { .. } => {
                    let typed = as_primitive::<arrow::datatypes::Decimal128Type>(array, column)?;
                    integers_with_filled_nulls(typed.values().iter().map(|value| i64::try_from(*value).unwrap_or(0)), nulls.as_ref(), value_count)
                }
                _ => integers_with_filled_nulls(native_integers(array, column)?.into_iter(), nulls.as_ref(), value_count),
            };
            let width_bytes = column_type.integer_width_bytes().unwrap_or(8);
            let input = IntegerInput::new(&values, width_bytes);
            let codec = encode_integers(&input, options.forced_codec, &mut raw_body).map_err(codec_error)?;
            // UInt64 bits order like i64 only while every value is below 2^63.
            let ordered = column_type != ColumnType::UInt64 || values.iter().all(|v| *v >= 0);
            let min_max = integer_min_max(&values, nulls.as_ref())
                .filter(|_| ordered)
                .map(|(min, max)| (StatValue::Int64(min), StatValue::Int64(max)));
            (codec, min_max)
        }
        ColumnType::Int32 | ColumnType::Int64 | ColumnType::Date32 | ColumnType::Decimal { .. } => {
            let values = match column_type {
                ColumnType::Int32 => {
                    let typed = as_primitive::<arrow::datatypes::Int32Type>(array, column)?;
                    integers_with_filled_nulls(typed.values().iter().map(|v| i64::from(*v)), nulls.as_ref(), value_count)
                }
                ColumnType::Date32 => {
                    let typed = as_primitive::<arrow::datatypes::Date32Type>(array, column)?;
                    integers_with_filled_nulls(typed.values().iter().map(|v| i64::from(*v)), nulls.as_ref(), value_count)
                }
                ColumnType::Int64 => {
                    let typed = as_primitive::<arrow::datatypes::Int64Type>(array, column)?;
                    integers_with_filled_nulls(typed.values().iter().copied(), nulls.as_ref(), value_count)
                }
                _ => {
                    let typed = as_primitive::<arrow::datatypes::Decimal128Type>(array, column)?;
                    // Null slots may hold anything; only valid values must fit i64.
                    let out_of_range = typed
                        .values()
                        .iter()
                        .enumerate()
                        .find(|(index, value)| nulls.as_ref().is_none_or(|n| n.is_valid(*index)) && i64::try_from(**value).is_err());
                    if out_of_range.is_some() {
                        return Err(unsupported(column, data_type, " (a decimal value does not fit in i64)"));
                    }
                    integers_with_filled_nulls(
                        typed.values().iter().map(|value| i64::try_from(*value).unwrap_or(0)),
                        nulls.as_ref(),
                        value_count,
                    )
                }
            };
            let width_bytes = column_type.integer_width_bytes().unwrap_or(8);
            let input = IntegerInput::new(&values, width_bytes);
            let codec = encode_integers(&input, options.forced_codec, &mut raw_body).map_err(codec_error)?;
            let min_max = integer_min_max(&values, nulls.as_ref()).map(|(min, max)| (StatValue::Int64(min), StatValue::Int64(max)));
            (codec, min_max)
        }
        ColumnType::Float64 => {
            check_forced(options.forced_codec, float_plain::ID, "f64").map_err(codec_error)?;
            let typed = as_primitive::<arrow::datatypes::Float64Type>(array, column)?;
            float_plain::compress(typed.values(), &mut raw_body);
            let valid = typed.values().iter().enumerate().filter(|(index, _)| nulls.as_ref().is_none_or(|n| n.is_valid(*index)));
            let min_max = valid.fold(None, |acc: Option<(f64, f64)>, (_, value)| match acc {
                None => Some((*value, *value)),
                Some((min, max)) => Some((min.min_by_total(*value), max.max_by_total(*value))),
            });
            (float_plain::ID, min_max.map(|(min, max)| (StatValue::Float64(min), StatValue::Float64(max))))
        }
        ColumnType::Boolean => {
            check_forced(options.forced_codec, boolean_bitmap::ID, "boolean").map_err(codec_error)?;
            let typed = array
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| unsupported(column, data_type, " (array does not downcast)"))?;
            boolean_bitmap::compress(typed.values(), &mut raw_body);
            let valid = (0..value_count).filter(|index| nulls.as_ref().is_none_or(|n| n.is_valid(*index)));
            let (mut any_true, mut any_false, mut any_valid) = (false, false, false);
            for index in valid {
                any_valid = true;
                if typed.value(index) {
                    any_true = true;
                } else {
                    any_false = true;
                }
            }
            let min_max = any_valid.then_some((StatValue::Boolean(!any_false), StatValue::Boolean(any_true)));
            (boolean_bitmap::ID, min_max)
        }
        ColumnType::Utf8 => {
            let typed = array
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| unsupported(column, data_type, " (array does not downcast)"))?;
            let values: Vec<&str> = (0..value_count)
                .map(|index| if nulls.as_ref().is_none_or(|n| n.is_valid(index)) { typed.value(index) } else { "" })
                .collect();
            let codec = encode_strings(&StringInput { values: &values }, options.forced_codec, &mut raw_body).map_err(codec_error)?;
            (codec, None)
        }
    };

    let body = if options.archive {
        zstd::bulk::compress(&raw_body, ZSTD_LEVEL).map_err(|error| ColumnStoreError::Corrupt {
            location: Location { column: Some(column.clone()), ..Location::in_memory() },
            what: "zstd compression",
            detail: error.to_string(),
        })?
    } else {
        raw_body.clone()
    };
    if raw_body.len() > SEGMENT_RAW_BODY_BYTES_MAX {
        return Err(ColumnStoreError::TooLarge { row_count: value_count, what: "SEGMENT_RAW_BODY_BYTES_MAX", limit: SEGMENT_RAW_BODY_BYTES_MAX });
    }

    let (tag, precision, scale) = column_type.to_tag();
    let mut flags = 0u8;
    if nulls.is_some() {
        flags |= FLAG_HAS_VALIDITY;
    }
    if options.archive {
        flags |= FLAG_ZSTD;
    }
    if min_max.is_some() {
        flags |= FLAG_HAS_MIN_MAX;
    }
    let mut header = [0u8; SEGMENT_HEADER_BYTES];
    header[field::MAGIC..field::MAGIC + 4].copy_from_slice(&SEGMENT_MAGIC);
    header[field::VERSION..field::VERSION + 2].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    header[field::CODEC] = codec as u8;
    header[field::TYPE_TAG] = tag;
    header[field::FLAGS] = flags;
    header[field::PRECISION] = precision;
    header[field::SCALE] = scale as u8;
    let put_u64 = |header: &mut [u8; SEGMENT_HEADER_BYTES], at: usize, value: u64| header[at..at + 8].copy_from_slice(&value.to_le_bytes());
    put_u64(&mut header, field::VALUE_COUNT, value_count as u64);
    put_u64(&mut header, field::NULL_COUNT, null_count as u64);
    put_u64(&mut header, field::MIN, min_max.map_or(0, |(min, _)| min.to_bits()));
    put_u64(&mut header, field::MAX, min_max.map_or(0, |(_, max)| max.to_bits()));
    put_u64(&mut header, field::BODY_BYTES, body.len() as u64);
    put_u64(&mut header, field::RAW_BODY_BYTES, raw_body.len() as u64);
    put_u64(&mut header, field::VALIDITY_BYTES, validity_bytes as u64);
    let checksum = segment_checksum(&header, &body);
    header[field::CHECKSUM..field::CHECKSUM + 4].copy_from_slice(&checksum.to_le_bytes());

    let mut bytes = Vec::with_capacity(SEGMENT_HEADER_BYTES + body.len());
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(&body);
    let stats = SegmentStats {
        min: min_max.map(|(min, _)| min),
        max: min_max.map(|(_, max)| max),
        value_count: value_count as u64,
        null_count: null_count as u64,
        codec,
        encoded_bytes: body.len() as u64,
    };
    Ok(EncodedSegment { bytes, stats, column_type })
}

/// The stored integers of a timestamp or time column (i64, or i32 widened), as the
/// integer codecs take them.
fn native_integers(array: &dyn Array, column: &ColumnRef) -> Result<Vec<i64>, ColumnStoreError> {
    use arrow::datatypes::{
        Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit, TimestampMicrosecondType,
        TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
    };
    let data_type = array.data_type();
    let wrong = || unsupported(column, data_type, " (array does not downcast)");
    Ok(match data_type {
        DataType::Timestamp(TimeUnit::Second, _) => array.as_primitive_opt::<TimestampSecondType>().ok_or_else(wrong)?.values().to_vec(),
        DataType::Timestamp(TimeUnit::Millisecond, _) => array.as_primitive_opt::<TimestampMillisecondType>().ok_or_else(wrong)?.values().to_vec(),
        DataType::Timestamp(TimeUnit::Microsecond, _) => array.as_primitive_opt::<TimestampMicrosecondType>().ok_or_else(wrong)?.values().to_vec(),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => array.as_primitive_opt::<TimestampNanosecondType>().ok_or_else(wrong)?.values().to_vec(),
        DataType::Time32(TimeUnit::Second) => array.as_primitive_opt::<Time32SecondType>().ok_or_else(wrong)?.values().iter().map(|v| i64::from(*v)).collect(),
        DataType::Time32(TimeUnit::Millisecond) => {
            array.as_primitive_opt::<Time32MillisecondType>().ok_or_else(wrong)?.values().iter().map(|v| i64::from(*v)).collect()
        }
        DataType::Time64(TimeUnit::Microsecond) => array.as_primitive_opt::<Time64MicrosecondType>().ok_or_else(wrong)?.values().to_vec(),
        DataType::Time64(TimeUnit::Nanosecond) => array.as_primitive_opt::<Time64NanosecondType>().ok_or_else(wrong)?.values().to_vec(),
        _ => return Err(wrong()),
    })
}

trait TotalOrder {
    fn min_by_total(self, other: Self) -> Self;
    fn max_by_total(self, other: Self) -> Self;
}

impl TotalOrder for f64 {
    fn min_by_total(self, other: f64) -> f64 {
        if other.total_cmp(&self).is_lt() { other } else { self }
    }
    fn max_by_total(self, other: f64) -> f64 {
        if other.total_cmp(&self).is_gt() { other } else { self }
    }
}

fn check_forced(forced: Option<CodecId>, only: CodecId, kind: &'static str) -> Result<(), CodecError> {
    match forced {
        Some(codec) if codec != only => Err(CodecError::NotApplicable { codec, kind, detail: "" }),
        _ => Ok(()),
    }
}

fn as_primitive<'a, T: ArrowPrimitiveType>(array: &'a dyn Array, column: &ColumnRef) -> Result<&'a PrimitiveArray<T>, ColumnStoreError> {
    array
        .as_any()
        .downcast_ref::<PrimitiveArray<T>>()
        .ok_or_else(|| unsupported(column, array.data_type(), " (array does not downcast)"))
}

/// The parsed, checksum-verified header of one segment.
#[derive(Debug, Clone)]
pub struct SegmentHeader {
    pub codec: CodecId,
    pub column_type: ColumnType,
    pub value_count: usize,
    pub null_count: usize,
    pub has_validity: bool,
    pub archive: bool,
    pub stats: SegmentStats,
    pub body_bytes: usize,
    pub raw_body_bytes: usize,
    pub validity_bytes: usize,
}

/// Parses and verifies (checksum included) the segment in `bytes`, which must hold exactly
/// one segment: header and body.
pub fn read_segment_header(bytes: &[u8], location: &Location) -> Result<SegmentHeader, ColumnStoreError> {
    let corrupt = |what: &'static str, detail: String| ColumnStoreError::Corrupt { location: location.clone(), what, detail };
    if bytes.len() < SEGMENT_HEADER_BYTES {
        return Err(ColumnStoreError::Truncated {
            location: location.clone(),
            what: "segment header",
            needed_bytes: SEGMENT_HEADER_BYTES as u64,
            available_bytes: bytes.len() as u64,
        });
    }
    let header = &bytes[..SEGMENT_HEADER_BYTES];
    if header[field::MAGIC..field::MAGIC + 4] != SEGMENT_MAGIC {
        return Err(ColumnStoreError::BadMagic { location: location.clone(), what: "segment header", found: header[..4].to_vec() });
    }
    let version = u16_at(header, field::VERSION);
    if version != SEGMENT_VERSION {
        return Err(ColumnStoreError::UnsupportedVersion { location: location.clone(), what: "segment", version, supported: SEGMENT_VERSION });
    }
    let body_bytes = u64_at(header, field::BODY_BYTES);
    let available_bytes = (bytes.len() - SEGMENT_HEADER_BYTES) as u64;
    if body_bytes > available_bytes {
        return Err(ColumnStoreError::Truncated { location: location.clone(), what: "segment body", needed_bytes: body_bytes, available_bytes });
    }
    if body_bytes < available_bytes {
        return Err(corrupt("segment length", format!("{} bytes after a body of {body_bytes}", available_bytes - body_bytes)));
    }
    let body_bytes = body_bytes as usize;
    let body = &bytes[SEGMENT_HEADER_BYTES..SEGMENT_HEADER_BYTES + body_bytes];
    let stored_crc32c = u32_at(header, field::CHECKSUM);
    let computed_crc32c = segment_checksum(header, body);
    if stored_crc32c != computed_crc32c {
        return Err(ColumnStoreError::ChecksumMismatch { location: location.clone(), what: "segment", stored_crc32c, computed_crc32c });
    }
    // From here the bytes are what the writer wrote (or a collision); still checked, since a
    // fuzzer can forge checksums and a writer bug must not become a reader panic.
    let codec = CodecId::from_u8(header[field::CODEC]).map_err(|error| ColumnStoreError::from_codec(location.clone(), error))?;
    let column_type = ColumnType::from_tag(header[field::TYPE_TAG], header[field::PRECISION], header[field::SCALE] as i8)
        .map_err(|detail| corrupt("segment type", detail))?;
    let flags = header[field::FLAGS];
    if flags & !FLAGS_KNOWN != 0 {
        return Err(corrupt("segment flags", format!("{flags:#04x}")));
    }
    let value_count = u64_at(header, field::VALUE_COUNT);
    if value_count > ROW_GROUP_ROWS_MAX as u64 {
        return Err(corrupt("segment value count", format!("{value_count} > ROW_GROUP_ROWS_MAX {ROW_GROUP_ROWS_MAX}")));
    }
    let value_count = value_count as usize;
    let null_count = u64_at(header, field::NULL_COUNT);
    if null_count > value_count as u64 {
        return Err(corrupt("segment null count", format!("{null_count} for {value_count} values")));
    }
    let null_count = null_count as usize;
    let has_validity = flags & FLAG_HAS_VALIDITY != 0;
    let archive = flags & FLAG_ZSTD != 0;
    let raw_body_bytes = u64_at(header, field::RAW_BODY_BYTES);
    if raw_body_bytes > SEGMENT_RAW_BODY_BYTES_MAX as u64 {
        return Err(corrupt("segment raw body length", format!("{raw_body_bytes} > {SEGMENT_RAW_BODY_BYTES_MAX}")));
    }
    if !archive && raw_body_bytes != body_bytes as u64 {
        return Err(corrupt("segment raw body length", format!("{raw_body_bytes}, body is {body_bytes} and not compressed")));
    }
    let validity_bytes = u64_at(header, field::VALIDITY_BYTES);
    let validity_bytes_expected = if has_validity { value_count.div_ceil(8) as u64 } else { 0 };
    if validity_bytes != validity_bytes_expected || validity_bytes > raw_body_bytes {
        return Err(corrupt("segment validity length", format!("{validity_bytes} bytes for {value_count} values")));
    }
    if !has_validity && null_count != 0 {
        return Err(corrupt("segment null count", format!("{null_count} nulls without a validity bitmap")));
    }
    let has_min_max = flags & FLAG_HAS_MIN_MAX != 0;
    let min = if has_min_max { StatValue::from_bits(column_type, u64_at(header, field::MIN)) } else { None };
    let max = if has_min_max { StatValue::from_bits(column_type, u64_at(header, field::MAX)) } else { None };
    Ok(SegmentHeader {
        codec,
        column_type,
        value_count,
        null_count,
        has_validity,
        archive,
        stats: SegmentStats { min, max, value_count: value_count as u64, null_count: null_count as u64, codec, encoded_bytes: body_bytes as u64 },
        body_bytes,
        raw_body_bytes: raw_body_bytes as usize,
        validity_bytes: validity_bytes as usize,
    })
}

/// The segment's body before zstd: borrowed as is, or decompressed for `archive`.
fn read_raw_body<'a>(bytes: &'a [u8], header: &SegmentHeader, location: &Location) -> Result<Cow<'a, [u8]>, ColumnStoreError> {
    let corrupt = |what: &'static str, detail: String| ColumnStoreError::Corrupt { location: location.clone(), what, detail };
    let body = &bytes[SEGMENT_HEADER_BYTES..SEGMENT_HEADER_BYTES + header.body_bytes];
    if !header.archive {
        return Ok(Cow::Borrowed(body));
    }
    // Check the frame's own size before allocating, so forged sizes cannot make us allocate.
    match zstd::zstd_safe::get_frame_content_size(body) {
        Ok(Some(size)) if size == header.raw_body_bytes as u64 => {}
        other => return Err(corrupt("zstd frame", format!("content size {other:?}, header says {}", header.raw_body_bytes))),
    }
    let decompressed = zstd::bulk::decompress(body, header.raw_body_bytes).map_err(|error| corrupt("zstd frame", error.to_string()))?;
    if decompressed.len() != header.raw_body_bytes {
        return Err(corrupt("zstd frame", format!("{} bytes, header says {}", decompressed.len(), header.raw_body_bytes)));
    }
    Ok(Cow::Owned(decompressed))
}

/// One verified segment opened for decoding a vector at a time (`IntegerVectors`,
/// `StringCodes`): the checksum is checked once here, the body unwrapped from zstd once,
/// and kernels then read values straight from the payload with nothing materialized.
#[derive(Debug)]
pub struct SegmentView<'a> {
    pub header: SegmentHeader,
    /// The whole segment (header and body), for the whole-column decoder.
    pub bytes: &'a [u8],
    raw_body: Cow<'a, [u8]>,
}

impl<'a> SegmentView<'a> {
    /// Verifies (checksum included) the segment in `bytes` and opens its body.
    pub fn open(bytes: &'a [u8], location: &Location) -> Result<SegmentView<'a>, ColumnStoreError> {
        let header = read_segment_header(bytes, location)?;
        let raw_body = read_raw_body(bytes, &header, location)?;
        debug_assert_eq!(raw_body.len(), header.raw_body_bytes);
        Ok(SegmentView { header, bytes, raw_body })
    }

    /// The validity bitmap (bit i set: row i is not null), when the segment has nulls.
    pub fn validity(&self) -> Option<&[u8]> {
        self.header.has_validity.then(|| &self.raw_body[..self.header.validity_bytes])
    }

    /// The codec payload.
    pub fn payload(&self) -> &[u8] {
        &self.raw_body[self.header.validity_bytes..]
    }

    /// The values of an integer-like column (Int32, Int64, Date32, Decimal ≤ 18 digits as
    /// i64), a vector at a time. Null slots hold a filler: read `validity` to skip them.
    pub fn integer_vectors(&self) -> Result<IntegerVectors<'_>, CodecError> {
        if self.header.column_type.integer_width_bytes().is_none() {
            return Err(CodecError::NotApplicable { codec: self.header.codec, kind: "non-integer column", detail: " (vector read)" });
        }
        IntegerVectors::open(self.header.codec, self.payload(), self.header.value_count)
    }

    /// The codes of a dictionary-encoded string column, or None for another codec.
    pub fn string_codes(&self) -> Result<Option<StringCodes<'_>>, CodecError> {
        if self.header.column_type != ColumnType::Utf8 || self.header.codec != CodecId::Dictionary {
            return Ok(None);
        }
        StringCodes::open(self.payload(), self.header.value_count).map(Some)
    }

    /// The strings of a plain-encoded string column, a slice of rows at a time, or None
    /// for another codec.
    pub fn plain_strings(&self) -> Result<Option<PlainStrings<'_>>, CodecError> {
        if self.header.column_type != ColumnType::Utf8 || self.header.codec != CodecId::Plain {
            return Ok(None);
        }
        PlainStrings::open(self.payload(), self.header.value_count).map(Some)
    }

    /// The whole column as an Arrow array (the path for what vector readers do not cover).
    pub fn decode_array(&self, location: &Location, pool: &mut VecPool) -> Result<ArrayRef, ColumnStoreError> {
        decode_segment_pooled(self.bytes, location, pool).map(|(_, array)| array)
    }
}

/// Decodes one verified segment into an Arrow array of `header.column_type`.
pub fn decode_segment_at(bytes: &[u8], location: &Location) -> Result<(SegmentHeader, ArrayRef), ColumnStoreError> {
    decode_segment_pooled(bytes, location, &mut VecPool::default())
}

/// `decode_segment_at`, decoding integer columns into vectors taken from `pool`.
pub fn decode_segment_pooled(bytes: &[u8], location: &Location, pool: &mut VecPool) -> Result<(SegmentHeader, ArrayRef), ColumnStoreError> {
    let header = read_segment_header(bytes, location)?;
    let corrupt = |what: &'static str, detail: String| ColumnStoreError::Corrupt { location: location.clone(), what, detail };
    let codec_error = |error: CodecError| ColumnStoreError::from_codec(location.clone(), error);

    let raw_body = read_raw_body(bytes, &header, location)?;
    let raw_body: &[u8] = &raw_body;
    debug_assert_eq!(raw_body.len(), header.raw_body_bytes);

    let value_count = header.value_count;
    let (validity, payload) = raw_body.split_at(header.validity_bytes);
    let nulls = if header.has_validity {
        let bits = boolean_bitmap::decompress(validity, value_count, "segment validity").map_err(codec_error)?;
        let nulls = NullBuffer::new(bits);
        if nulls.null_count() != header.null_count {
            return Err(corrupt("segment validity", format!("{} nulls, header says {}", nulls.null_count(), header.null_count)));
        }
        Some(nulls)
    } else {
        None
    };

    let array: ArrayRef = match header.column_type {
        ColumnType::Int32 => Arc::new(Int32Array::new(decode_integer_values(header.codec, payload, value_count, pool).map_err(codec_error)?, nulls)),
        ColumnType::Int64 => Arc::new(Int64Array::new(decode_integer_values(header.codec, payload, value_count, pool).map_err(codec_error)?, nulls)),
        ColumnType::Date32 => Arc::new(Date32Array::new(decode_integer_values(header.codec, payload, value_count, pool).map_err(codec_error)?, nulls)),
        ColumnType::Decimal { precision, scale } => Arc::new(
            Decimal128Array::new(decode_integer_values(header.codec, payload, value_count, pool).map_err(codec_error)?, nulls)
                .with_precision_and_scale(precision, scale)?,
        ),
        ColumnType::Float64 => {
            if header.codec != float_plain::ID {
                return Err(codec_error(CodecError::NotApplicable { codec: header.codec, kind: "f64", detail: "" }));
            }
            let mut values = vec![0f64; value_count];
            float_plain::decompress(payload, &mut values).map_err(codec_error)?;
            Arc::new(Float64Array::new(ScalarBuffer::from(values), nulls))
        }
        ColumnType::Boolean => {
            if header.codec != boolean_bitmap::ID {
                return Err(codec_error(CodecError::NotApplicable { codec: header.codec, kind: "boolean", detail: "" }));
            }
            let values = boolean_bitmap::decompress(payload, value_count, "boolean values").map_err(codec_error)?;
            Arc::new(BooleanArray::new(values, nulls))
        }
        ColumnType::Utf8 => Arc::new(crate::compression::decode_strings(header.codec, payload, value_count, nulls).map_err(codec_error)?),
        ColumnType::UInt64 => {
            let values: ScalarBuffer<i64> = decode_integer_values(header.codec, payload, value_count, pool).map_err(codec_error)?;
            // Same width: the decoded i64 buffer is the u64 buffer, no copy.
            Arc::new(UInt64Array::new(ScalarBuffer::new(values.into_inner(), 0, value_count), nulls))
        }
        ColumnType::Timestamp { unit, with_time_zone } => {
            let values = decode_integer_values(header.codec, payload, value_count, pool).map_err(codec_error)?;
            let zone = with_time_zone.then_some(TIMESTAMP_TIME_ZONE);
            match unit {
                TemporalUnit::Second => Arc::new(TimestampSecondArray::new(values, nulls).with_timezone_opt(zone)),
                TemporalUnit::Millisecond => Arc::new(TimestampMillisecondArray::new(values, nulls).with_timezone_opt(zone)),
                TemporalUnit::Microsecond => Arc::new(TimestampMicrosecondArray::new(values, nulls).with_timezone_opt(zone)),
                TemporalUnit::Nanosecond => Arc::new(TimestampNanosecondArray::new(values, nulls).with_timezone_opt(zone)),
            }
        }
        ColumnType::Time { unit: TemporalUnit::Second } => {
            Arc::new(Time32SecondArray::new(decode_integer_values(header.codec, payload, value_count, pool).map_err(codec_error)?, nulls))
        }
        ColumnType::Time { unit: TemporalUnit::Millisecond } => {
            Arc::new(Time32MillisecondArray::new(decode_integer_values(header.codec, payload, value_count, pool).map_err(codec_error)?, nulls))
        }
        ColumnType::Time { unit: TemporalUnit::Microsecond } => {
            Arc::new(Time64MicrosecondArray::new(decode_integer_values(header.codec, payload, value_count, pool).map_err(codec_error)?, nulls))
        }
        ColumnType::Time { unit: TemporalUnit::Nanosecond } => {
            Arc::new(Time64NanosecondArray::new(decode_integer_values(header.codec, payload, value_count, pool).map_err(codec_error)?, nulls))
        }
        ColumnType::WideDecimal { precision, scale } => {
            let values = if header.codec == wide_plain::ID && wide_plain::is_wide(payload) {
                let mut values = pool.take::<i128>(value_count);
                wide_plain::decompress(payload, &mut values).map_err(codec_error)?;
                ScalarBuffer::from(values)
            } else {
                decode_integer_values(header.codec, payload, value_count, pool).map_err(codec_error)?
            };
            Arc::new(Decimal128Array::new(values, nulls).with_precision_and_scale(precision, scale)?)
        }
        ColumnType::Binary => {
            if header.codec != binary_plain::ID {
                return Err(codec_error(CodecError::NotApplicable { codec: header.codec, kind: "binary", detail: "" }));
            }
            Arc::new(binary_plain::decompress(payload, value_count, nulls).map_err(codec_error)?)
        }
    };
    debug_assert_eq!(array.len(), value_count);
    Ok((header, array))
}

/// Decodes straight into the buffer the Arrow array will own, taken from `pool` (so not
/// cleared: every codec writes all `value_count` values or fails).
fn decode_integer_values<T: IntegerNative + ArrowNativeType + Pooled>(
    codec: CodecId,
    payload: &[u8],
    value_count: usize,
    pool: &mut VecPool,
) -> Result<ScalarBuffer<T>, CodecError> {
    let mut values = pool.take::<T>(value_count);
    decode_integers(codec, payload, &mut values)?;
    Ok(ScalarBuffer::from(values))
}

/// Decodes one segment (header + body, as `column_byte_range` delimits it) into an array of
/// `data_type`, verifying its checksum. Errors name no file: use `RowGroupReader` for that.
pub fn decode_segment(bytes: &[u8], data_type: &DataType) -> Result<ArrayRef, ColumnStoreError> {
    let location = Location::in_memory();
    let (header, array) = decode_segment_at(bytes, &location)?;
    if header.column_type.data_type() != *data_type {
        return Err(ColumnStoreError::TypeMismatch { location, stored: header.column_type.data_type().to_string(), expected: data_type.clone() });
    }
    Ok(array)
}
