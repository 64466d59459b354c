//! Helpers shared by the fuzz targets (included with `mod common;`, not a target itself).
//!
//! Most targets have three modes, picked by the input's first byte:
//! * raw: the bytes as they come (stops at checksums and magic numbers, as it should);
//! * patched: the bytes with magic, version, ids and checksum stamped, so the fuzzer's
//!   bytes reach the parsers behind the checksum;
//! * synthesized: a valid structure built by the real encoder from values read out of the
//!   input, then a few input-chosen byte mutations, then the checksum recomputed. This
//!   reaches the deepest code: every field is plausible except the mutated ones.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use flashscan_storage::heap::row_codec::Value;
use flashscan_storage::{ColumnDef, ColumnType, TableMeta};

/// Reads the input front to back; past its end every read returns zeros.
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8]) -> Cursor<'a> {
        Cursor { data, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub fn u64(&mut self) -> u64 {
        (self.u32() as u64) | ((self.u32() as u64) << 32)
    }

    /// Up to `n` bytes (fewer at the end of the input).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = (start + n).min(self.data.len());
        self.pos = start + n;
        &self.data[start..end]
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        self.pos = self.data.len();
        &self.data[start..]
    }
}

/// Applies up to 8 input-chosen mutations to `buf`: xor / set of 1, 2, 4 or 8 bytes at an
/// input-chosen offset. Returns how many were applied.
pub fn mutate(buf: &mut [u8], c: &mut Cursor) -> usize {
    if buf.is_empty() {
        return 0;
    }
    let count = (c.u8() % 9) as usize;
    for _ in 0..count {
        let op = c.u8();
        let at = c.u32() as usize % buf.len();
        let width = [1usize, 2, 4, 8][(op & 3) as usize].min(buf.len() - at);
        let v = c.u64().to_le_bytes();
        for i in 0..width {
            if op & 4 != 0 {
                buf[at + i] ^= v[i];
            } else {
                buf[at + i] = v[i];
            }
        }
    }
    count
}

/// A storage column type from one byte (bit 7: nullable).
pub fn column_type(b: u8) -> ColumnType {
    use flashscan_storage::column::TemporalUnit;
    match b % 12 {
        0 => ColumnType::Int32,
        1 => ColumnType::Int64,
        2 => ColumnType::Float64,
        3 => ColumnType::Decimal { precision: 15, scale: 2 },
        4 => ColumnType::Date32,
        5 => ColumnType::Utf8,
        6 => ColumnType::Boolean,
        7 => ColumnType::UInt64,
        8 => ColumnType::Timestamp { unit: TemporalUnit::Nanosecond, with_time_zone: true },
        9 => ColumnType::Time { unit: TemporalUnit::Millisecond },
        10 => ColumnType::WideDecimal { precision: 38, scale: 4 },
        _ => ColumnType::Binary,
    }
}

/// A heap table of 1..=9 columns chosen by the input (every type, nullable or not).
pub fn table(c: &mut Cursor) -> TableMeta {
    let count = 1 + (c.u8() % 9) as usize;
    let columns = (0..count)
        .map(|i| {
            let b = c.u8();
            ColumnDef { name: format!("c{i}"), column_type: column_type(b), nullable: b & 0x80 != 0 }
        })
        .collect();
    TableMeta::heap_without_rows("t", columns)
}

/// The table the compressed-page brief asks for: int, decimal, date and utf8 columns.
pub fn mixed_table() -> TableMeta {
    let col = |name: &str, column_type, nullable| ColumnDef { name: name.into(), column_type, nullable };
    let columns = vec![
        col("id", ColumnType::Int64, false),
        col("qty", ColumnType::Int32, true),
        col("price", ColumnType::Decimal { precision: 15, scale: 2 }, false),
        col("day", ColumnType::Date32, true),
        col("name", ColumnType::Utf8, false),
        col("comment", ColumnType::Utf8, true),
        col("ratio", ColumnType::Float64, true),
        col("flag", ColumnType::Boolean, false),
    ];
    TableMeta::heap_without_rows("t", columns)
}

/// One value of type `t`, biased towards repeats and extremes so compression kicks in.
pub fn value(c: &mut Cursor, t: ColumnType, nullable: bool) -> Value {
    let b = c.u8();
    if nullable && b % 7 == 0 {
        return Value::Null;
    }
    let small = (b >> 3) as i64 - 8;
    let pick = b % 4;
    match t {
        ColumnType::Int32 => Value::Int32(match pick {
            0 => small as i32,
            1 => c.u32() as i32,
            2 => [i32::MIN, i32::MAX, 0][b as usize % 3],
            _ => 1000 + small as i32,
        }),
        ColumnType::Date32 => Value::Date32(match pick {
            0 | 3 => 9000 + small as i32,
            1 => c.u32() as i32,
            _ => [i32::MIN, i32::MAX, 0][b as usize % 3],
        }),
        ColumnType::Int64 => Value::Int64(match pick {
            0 => small,
            1 => c.u64() as i64,
            2 => [i64::MIN, i64::MAX, 0][b as usize % 3],
            _ => 1_000_000 + small,
        }),
        ColumnType::Decimal { .. } => Value::Decimal(match pick {
            0 | 3 => small * 100,
            1 => c.u64() as i64 % 1_000_000_000_000_000,
            _ => [-999_999_999_999_999, 999_999_999_999_999, 0][b as usize % 3],
        }),
        ColumnType::Float64 => Value::Float64(match pick {
            0 => small as f64 / 4.0,
            1 => f64::from_bits(c.u64()),
            2 => [f64::MAX, f64::NAN, -0.0][b as usize % 3],
            _ => 1.5,
        }),
        ColumnType::Boolean => Value::Boolean(b & 8 != 0),
        ColumnType::UInt64 => Value::UInt64(match pick {
            0 => small as u64,
            1 => c.u64(),
            2 => [u64::MAX, 1 << 63, 0][b as usize % 3],
            _ => 1_000_000 + small as u64,
        }),
        // Timestamps and times travel as their integer units (row_codec decodes them so).
        ColumnType::Timestamp { .. } => Value::Int64(match pick {
            0 => small,
            1 => c.u64() as i64,
            2 => [i64::MIN, i64::MAX, 0][b as usize % 3],
            _ => 1_700_000_000_000_000_000 + small,
        }),
        ColumnType::Time { unit } if t.fixed_width_bytes() == Some(4) => {
            let per_day: i64 = if unit == flashscan_storage::column::TemporalUnit::Second { 86_400 } else { 86_400_000 };
            Value::Int32(match pick {
                1 => c.u32() as i32,
                _ => (per_day / 2 + small) as i32,
            })
        }
        ColumnType::Time { .. } => Value::Int64(match pick {
            1 => c.u64() as i64,
            _ => 43_200_000_000 + small,
        }),
        ColumnType::WideDecimal { .. } => Value::Int128(match pick {
            0 | 3 => small as i128 * 10_000,
            1 => ((c.u64() as i128) << 64 | c.u64() as i128) % 10i128.pow(38),
            _ => [-(10i128.pow(38) - 1), 10i128.pow(38) - 1, 0][b as usize % 3],
        }),
        ColumnType::Binary => {
            let len = (c.u8() % 24) as usize;
            Value::Binary(c.bytes(len).to_vec())
        }
        ColumnType::Utf8 => {
            let len = match pick {
                0 => 0,
                1 => (c.u8() % 40) as usize,
                2 => 14 + (c.u8() % 3) as usize,
                _ => 3,
            };
            let mut s = String::from_utf8_lossy(c.bytes(len)).into_owned();
            if b & 0x80 != 0 {
                s = format!("shared prefix {s}");
            }
            if b == 0xff {
                s = s.repeat(50);
            }
            Value::Utf8(s)
        }
    }
}

/// A directory for files the targets write, in memory when /dev/shm exists. One per
/// process, reused by every run.
pub fn scratch_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("flashscan-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creating the fuzz scratch directory");
        dir
    })
}

/// An Arrow array of `data_type` with `rows` values from the input: runs, repeats and
/// extremes, so analysis picks every codec (constant, RLE, bitpack, dictionary, plain).
pub fn arrow_array(c: &mut Cursor, data_type: &arrow::datatypes::DataType, rows: usize, nullable: bool) -> arrow::array::ArrayRef {
    use std::sync::Arc;

    use arrow::array::{BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, StringArray};
    use arrow::datatypes::DataType;

    // A small pool of values the rows draw from, plus a run length.
    let pool: Vec<i64> = (0..1 + c.u8() % 8)
        .map(|_| {
            let b = c.u8();
            match b % 4 {
                0 => (b >> 2) as i64,
                1 => c.u64() as i64,
                2 => [i64::MIN, i64::MAX, -1][b as usize % 3],
                _ => c.u16() as i64 - 30000,
            }
        })
        .collect();
    let step = c.u8();
    let run = 1 + (c.u8() % 64) as usize;
    let null_every = if nullable { c.u8() as usize } else { 0 };
    let values: Vec<i64> = (0..rows).map(|i| pool[(i / run + (i * step as usize) / 256) % pool.len()]).collect();
    let valid = |i: usize| null_every < 2 || i % null_every != 0;
    match data_type {
        DataType::Int32 => Arc::new(Int32Array::from_iter((0..rows).map(|i| valid(i).then_some(values[i] as i32)))),
        DataType::Int64 => Arc::new(Int64Array::from_iter((0..rows).map(|i| valid(i).then_some(values[i])))),
        DataType::Date32 => Arc::new(Date32Array::from_iter((0..rows).map(|i| valid(i).then_some(values[i] as i32)))),
        DataType::Float64 => Arc::new(Float64Array::from_iter((0..rows).map(|i| valid(i).then_some(f64::from_bits(values[i] as u64))))),
        // Wide decimals: values past i64 when the pool's value is odd (the 16-byte layout).
        DataType::Decimal128(p, s) if *p > 18 => Arc::new(
            Decimal128Array::from_iter((0..rows).map(|i| valid(i).then_some(values[i] as i128 * if values[i] & 1 != 0 { 10i128.pow(18) } else { 1 })))
                .with_precision_and_scale(*p, *s)
                .expect("decimal type"),
        ),
        DataType::Decimal128(p, s) => Arc::new(
            Decimal128Array::from_iter((0..rows).map(|i| valid(i).then_some((values[i] % 1_000_000_000_000_000) as i128)))
                .with_precision_and_scale(*p, *s)
                .expect("decimal type"),
        ),
        DataType::Boolean => Arc::new(BooleanArray::from_iter((0..rows).map(|i| valid(i).then_some(values[i] & 1 != 0)))),
        DataType::UInt64 => Arc::new(arrow::array::UInt64Array::from_iter((0..rows).map(|i| valid(i).then_some(values[i] as u64)))),
        DataType::Timestamp(_, zone) => {
            Arc::new(arrow::array::TimestampMicrosecondArray::from_iter((0..rows).map(|i| valid(i).then_some(values[i]))).with_timezone_opt(zone.clone()))
        }
        DataType::Time32(_) => Arc::new(arrow::array::Time32SecondArray::from_iter((0..rows).map(|i| valid(i).then_some((values[i] % 86_400) as i32)))),
        DataType::Binary => Arc::new(arrow::array::BinaryArray::from_iter((0..rows).map(|i| valid(i).then(|| values[i].to_le_bytes()[..(values[i] as u64 % 9) as usize].to_vec())))),
        _ => {
            let strings: Vec<String> = pool.iter().map(|v| format!("{:x}", v).repeat(1 + (*v as u64 % 5) as usize)).collect();
            Arc::new(StringArray::from_iter((0..rows).map(|i| valid(i).then(|| strings[(i / run) % strings.len()].clone()))))
        }
    }
}

/// `None` (let analysis choose) or one of the codecs, from one byte.
pub fn forced_codec(b: u8) -> Option<flashscan_storage::columnstore::CodecId> {
    use flashscan_storage::columnstore::CodecId;
    if b & 1 == 0 {
        None
    } else {
        Some(CodecId::ALL[(b >> 1) as usize % CodecId::ALL.len()])
    }
}

/// Recomputes a heap page's checksum in place, trusting nothing else in it (`header::seal`
/// is the writer's and asserts a well-formed page).
pub fn reseal_page(page: &mut [u8]) {
    use flashscan_storage::heap::header::{compute_checksum, OFFSET_CHECKSUM};
    let crc = compute_checksum(page);
    page[OFFSET_CHECKSUM..OFFSET_CHECKSUM + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Stamps the page id and recomputes the checksum.
pub fn stamp_page(page: &mut [u8], page_id: u64) {
    use flashscan_storage::heap::header::OFFSET_PAGE_ID;
    page[OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8].copy_from_slice(&page_id.to_le_bytes());
    reseal_page(page);
}

/// Bytes of a column store segment's header; its checksum field sits at `SEGMENT_CHECKSUM_AT`.
pub const SEGMENT_HEADER_BYTES: usize = 80;
pub const SEGMENT_CHECKSUM_AT: usize = 12;

/// Recomputes a column store segment's checksum (crc32c of the segment with the field as
/// zero), so mutated bytes reach the codecs instead of stopping at the CRC.
pub fn reseal_segment(segment: &mut [u8]) {
    if segment.len() >= SEGMENT_HEADER_BYTES {
        segment[SEGMENT_CHECKSUM_AT..SEGMENT_CHECKSUM_AT + 4].fill(0);
        let crc = crc32c::crc32c(segment);
        segment[SEGMENT_CHECKSUM_AT..SEGMENT_CHECKSUM_AT + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

/// A segment made by `encode_segment` from input values of `data_type` (up to `rows_max`
/// rows; nullable if bit 4 of `selector`, archived if bit 5; codec forced or analyzed),
/// then mutated: the array it was made from, the segment, and how many mutations it took.
pub fn synthesized_segment(
    selector: u8,
    c: &mut Cursor,
    data_type: &arrow::datatypes::DataType,
    rows_max: usize,
) -> Option<(arrow::array::ArrayRef, Vec<u8>, usize)> {
    use flashscan_storage::columnstore::{encode_segment, ColumnRef, SegmentOptions};
    let rows = c.u16() as usize % rows_max;
    let array = arrow_array(c, data_type, rows, selector & 0x10 != 0);
    let options = SegmentOptions { archive: selector & 0x20 != 0, forced_codec: forced_codec(c.u8()) };
    let encoded = encode_segment(array.as_ref(), &ColumnRef { index: 0, name: "c".into() }, options).ok()?;
    let mut segment = encoded.bytes;
    let mutations = mutate(&mut segment, c);
    Some((array, segment, mutations))
}

/// The Arrow types the column store keeps, the older ones first: `stored_data_type(b % n)`
/// draws from the first `n` (7 is the types of the first column store).
pub fn stored_data_type(index: usize) -> arrow::datatypes::DataType {
    use arrow::datatypes::{DataType, TimeUnit};
    match index {
        0 => DataType::Int64,
        1 => DataType::Int32,
        2 => DataType::Float64,
        3 => DataType::Decimal128(15, 2),
        4 => DataType::Date32,
        5 => DataType::Utf8,
        6 => DataType::Boolean,
        7 => DataType::UInt64,
        8 => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        9 => DataType::Time32(TimeUnit::Second),
        10 => DataType::Decimal128(38, 4),
        _ => DataType::Binary,
    }
}

/// Every reader of one heap page agrees: `verify_page` and the count-only decode accept
/// the same pages, and a page the decoder takes decodes to the verified row count, twice
/// over when pushed twice, with the projected columns. Returns the verified header.
pub fn check_page_readers(
    page: &[u8],
    page_id: u64,
    table: &TableMeta,
    projection: &[usize],
) -> Result<flashscan_storage::heap::header::PageHeader, flashscan_storage::StorageError> {
    use flashscan_storage::{decode_page_count_only, verify_page, HeapDecoder};
    let path = std::path::Path::new("fuzz.dat");
    let verified = verify_page(page, flashscan_storage::PageId(page_id), path, 0);
    let counted = decode_page_count_only(page, page_id, path, 0);
    assert_eq!(verified.is_ok(), counted.is_ok());
    let mut decoder = HeapDecoder::try_new(table, projection).expect("projection in range");
    if let Ok(rows) = decoder.push_page(page, page_id, path, 0) {
        assert_eq!(rows as usize, verified.as_ref().expect("push_page verifies").row_count as usize);
        // A second push of the same page appends the same rows again.
        let again = decoder.push_page(page, page_id, path, 0).expect("same page twice");
        assert_eq!(again, rows);
        let batch = decoder.finish();
        assert_eq!(batch.num_rows(), 2 * rows as usize);
        assert_eq!(batch.num_columns(), projection.len());
    }
    verified
}

/// The input's first half at the page's front (header fields included) and its second
/// half at the page's end (the slot array), each at most half a page.
pub fn fill_page_ends(page: &mut [u8], rest: &[u8]) {
    let page_bytes = page.len();
    let (front, back) = rest.split_at(rest.len() / 2);
    let front = &front[..front.len().min(page_bytes / 2)];
    let back = &back[back.len().saturating_sub(page_bytes / 2)..];
    page[..front.len()].copy_from_slice(front);
    page[page_bytes - back.len()..].copy_from_slice(back);
}
