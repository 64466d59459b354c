//! The codec function table: ids on disk, the integer codec trait, and the native types an
//! integer payload decodes into.
//!
//! Like DuckDB's `CompressionFunction`, every integer codec fills the same table: `analyze`
//! (the encoded size it would produce, the score), `compress`, `decompress` (a whole vector
//! at once) and `fetch` (one value). The table is a trait with associated functions rather
//! than a struct of fn pointers because `decompress` is generic over the output type; the
//! dispatch by id lives in `analyze.rs` and `integers.rs`.

use std::fmt;

use super::error::CodecError;

/// Codec ids as stored in segment headers (one byte). The meaning of an id depends on the
/// column's type: `Dictionary` on an Int64 column is `dictionary.rs`, on Utf8 `string_dictionary.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[repr(u8)]
pub enum CodecId {
    /// Every value the same: the value once.
    Constant = 1,
    /// Run values and run lengths, both bit-packed.
    Rle = 2,
    /// Frame of reference + bit-packing in blocks of 1024 values.
    Bitpack = 3,
    /// Distinct values once, bit-packed codes per row.
    Dictionary = 4,
    /// Values at their native width (integers, f64), or lengths + bytes (strings).
    Plain = 5,
    /// One bit per boolean value.
    Bitmap = 6,
    /// Frame of reference + bit-packing in the FastLanes transposed layout (16 interleaved
    /// lanes per 1024-value block): unpacks with SIMD and no per-value branch.
    FastLanes = 7,
}

impl CodecId {
    pub const ALL: [CodecId; 7] = [
        CodecId::Constant,
        CodecId::Rle,
        CodecId::Bitpack,
        CodecId::Dictionary,
        CodecId::Plain,
        CodecId::Bitmap,
        CodecId::FastLanes,
    ];

    pub fn from_u8(codec_id: u8) -> Result<CodecId, CodecError> {
        CodecId::ALL.into_iter().find(|codec| *codec as u8 == codec_id).ok_or(CodecError::UnknownCodec { codec_id })
    }

    pub fn name(self) -> &'static str {
        match self {
            CodecId::Constant => "constant",
            CodecId::Rle => "rle",
            CodecId::Bitpack => "bitpack",
            CodecId::Dictionary => "dictionary",
            CodecId::Plain => "plain",
            CodecId::Bitmap => "bitmap",
            CodecId::FastLanes => "fastlanes",
        }
    }

    /// Rank by decode cost, cheapest first: breaks ties between equal encoded sizes.
    pub fn decode_cost_rank(self) -> u8 {
        match self {
            CodecId::Constant => 0,
            CodecId::Plain => 1,
            CodecId::Bitmap => 2,
            // Same bytes as bitpack for full blocks, unpacked with SIMD: wins the tie.
            CodecId::FastLanes => 3,
            CodecId::Bitpack => 4,
            CodecId::Rle => 5,
            CodecId::Dictionary => 6,
        }
    }
}

impl fmt::Display for CodecId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// A native integer an integer payload decodes into: i32 (Int32, Date32), i64 (Int64) or
/// i128 (Decimal128 stored as i64). Decoding writes these straight into the Arrow buffer.
pub trait IntegerNative: Copy + Default + Send + Sync + 'static {
    /// Narrowing is a plain truncation: values of an i32 column were i32 when encoded, and a
    /// corrupt payload that passes its checksum must still not panic.
    fn from_i64(value: i64) -> Self;
}

impl IntegerNative for i32 {
    #[inline(always)]
    fn from_i64(value: i64) -> Self {
        value as i32
    }
}

impl IntegerNative for i64 {
    #[inline(always)]
    fn from_i64(value: i64) -> Self {
        value
    }
}

impl IntegerNative for i128 {
    #[inline(always)]
    fn from_i64(value: i64) -> Self {
        value as i128
    }
}

/// The values of one integer segment with the facts every codec's analyze needs.
/// Null slots hold a filler chosen by the caller (the previous value), so they cost little.
#[derive(Debug, Clone, Copy)]
pub struct IntegerInput<'a> {
    pub values: &'a [i64],
    pub min: i64,
    pub max: i64,
    /// 4 for Int32/Date32, 8 for Int64/Decimal: what `plain` stores per value.
    pub native_width_bytes: usize,
}

impl<'a> IntegerInput<'a> {
    pub fn new(values: &'a [i64], native_width_bytes: usize) -> Self {
        debug_assert!(native_width_bytes == 4 || native_width_bytes == 8);
        let min = values.iter().copied().min().unwrap_or(0);
        let max = values.iter().copied().max().unwrap_or(0);
        IntegerInput { values, min, max, native_width_bytes }
    }
}

/// One integer codec: the function table of DuckDB's storage/compression.
pub trait IntegerCodec {
    const ID: CodecId;

    /// The payload size in bytes `compress` would produce (the score), or `None` when this
    /// codec cannot represent these values. May be an upper bound where exact is costly.
    fn analyze(input: &IntegerInput<'_>) -> Option<usize>;

    /// Appends the payload for `input.values` to `out`. Only called when `analyze` said Some.
    fn compress(input: &IntegerInput<'_>, out: &mut Vec<u8>);

    /// Decodes all `out.len()` values of `payload` into `out`, a whole vector at once.
    fn decompress<T: IntegerNative>(payload: &[u8], out: &mut [T]) -> Result<(), CodecError>;

    /// One value at `row` without decoding the rest where the codec allows it.
    fn fetch(payload: &[u8], value_count: usize, row: usize) -> Result<i64, CodecError> {
        if row >= value_count {
            return Err(CodecError::corrupt("fetch row", format!("row {row} of {value_count} values")));
        }
        let mut values = vec![0i64; value_count];
        Self::decompress(payload, &mut values)?;
        Ok(values[row])
    }
}
