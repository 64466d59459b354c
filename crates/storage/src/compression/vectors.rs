//! Vector-at-a-time decoding of integer payloads: the scan consumes a segment in vectors of
//! `VECTOR_VALUES` (1,024, FastLanes' vector; DuckDB uses 2,048) decoded into a buffer the
//! caller reuses, so a kernel adds up values while they are still in L1 instead of reading
//! back a whole decoded million-row column from DRAM.
//!
//! Every codec's payload is validated when the cursor opens (block headers, run lengths,
//! dictionary entries), so `next_vector` only fails on a dictionary code out of range.
//! Vector `i` holds values [1024·i, 1024·(i+1)) of the segment: bit-packed blocks are 1,024
//! values, so a vector is exactly one block and no block is ever split between vectors.

use super::bitpack::BLOCK_HEADER_BYTES;
use super::bits::{self, BLOCK_VALUES, WIDTH_BITS_MAX};
use super::codec::CodecId;
use super::error::CodecError;
use super::fastlanes;
use super::reader::ByteReader;

/// Values per vector: one bit-packed block.
pub const VECTOR_VALUES: usize = BLOCK_VALUES;

/// Widest deltas whose sum over one vector still fits a u64: 1024 · (2^53 − 1) < 2^63.
pub const SUM_U64_WIDTH_BITS_MAX: u32 = 53;
const _: () = assert!((VECTOR_VALUES as u128) * ((1u128 << SUM_U64_WIDTH_BITS_MAX) - 1) < (1u128 << 63));

/// One vector's buffer, reused vector after vector.
pub type Vector = [i64; VECTOR_VALUES];

/// The frame-of-reference blocks of one bit-packed stream (`bitpack` or `fastlanes`
/// layout), validated up front: headers in range, word bytes summing to the payload.
#[derive(Debug, Clone)]
pub struct PackedBlocks<'a> {
    transposed: bool,
    headers: &'a [u8],
    words: &'a [u8],
    value_count: usize,
    block_index: usize,
    word_offset_bytes: usize,
}

/// One block: values are `min + delta`, deltas of `width_bits`, packed in `bytes`.
#[derive(Debug, Clone, Copy)]
pub struct PackedBlock<'a> {
    pub min: i64,
    pub width_bits: u32,
    pub value_count: usize,
    pub bytes: &'a [u8],
}

impl<'a> PackedBlocks<'a> {
    /// Opens a stream of `value_count` values that must use all of `payload`.
    pub fn open(payload: &'a [u8], value_count: usize, transposed: bool) -> Result<Self, CodecError> {
        let block_count = value_count.div_ceil(BLOCK_VALUES);
        let header_bytes = block_count.checked_mul(BLOCK_HEADER_BYTES).ok_or(CodecError::LimitExceeded {
            what: "bitpack block count",
            value: block_count as u64,
            limit: (usize::MAX / BLOCK_HEADER_BYTES) as u64,
        })?;
        let mut reader = ByteReader::new(payload);
        let headers = reader.take(header_bytes, "bitpack block headers")?;
        let words = reader.rest();
        let mut word_bytes = 0usize;
        for block_index in 0..block_count {
            let width_bits = u32::from(headers[block_index * BLOCK_HEADER_BYTES + 8]);
            if width_bits > WIDTH_BITS_MAX {
                return Err(CodecError::corrupt("bitpack block width", format!("{width_bits} bits, more than 64")));
            }
            let block_len = BLOCK_VALUES.min(value_count - block_index * BLOCK_VALUES);
            word_bytes += block_word_bytes(block_len, width_bits, transposed);
        }
        if word_bytes != words.len() {
            return Err(CodecError::corrupt("bitpack payload", format!("{} bytes of words, headers say {word_bytes}", words.len())));
        }
        Ok(PackedBlocks { transposed, headers, words, value_count, block_index: 0, word_offset_bytes: 0 })
    }

    /// The next block, or None after the last.
    #[inline]
    pub fn next_block(&mut self) -> Option<PackedBlock<'a>> {
        let first_value = self.block_index * BLOCK_VALUES;
        if first_value >= self.value_count {
            return None;
        }
        let header = &self.headers[self.block_index * BLOCK_HEADER_BYTES..(self.block_index + 1) * BLOCK_HEADER_BYTES];
        let mut min_bytes = [0u8; 8];
        min_bytes.copy_from_slice(&header[..8]);
        let width_bits = u32::from(header[8]);
        let value_count = BLOCK_VALUES.min(self.value_count - first_value);
        let length = block_word_bytes(value_count, width_bits, self.transposed);
        // In range: `open` checked that the blocks' word bytes sum to the words' length.
        let bytes = &self.words[self.word_offset_bytes..self.word_offset_bytes + length];
        self.word_offset_bytes += length;
        self.block_index += 1;
        Some(PackedBlock { min: i64::from_le_bytes(min_bytes), width_bits, value_count, bytes })
    }

    /// Unpacks `block`'s deltas into `deltas[..block.value_count]`.
    #[inline]
    pub fn unpack(&self, block: &PackedBlock<'_>, deltas: &mut [u64; VECTOR_VALUES]) {
        if self.transposed {
            fastlanes::unpack_block(block.width_bits, block.bytes, deltas);
        } else {
            bits::unpack_block_bytes(block.width_bits, block.bytes, block.value_count, deltas);
        }
    }
}

fn block_word_bytes(value_count: usize, width_bits: u32, transposed: bool) -> usize {
    if transposed {
        fastlanes::block_bytes(width_bits)
    } else {
        bits::packed_words(value_count, width_bits) * 8
    }
}

/// Reads a nested `u64 payload_bytes` + bitpack stream of `value_count` values.
fn nested_blocks<'a>(reader: &mut ByteReader<'a>, value_count: usize, what: &'static str) -> Result<PackedBlocks<'a>, CodecError> {
    let payload_bytes = reader.u64_le(what)?;
    let payload = reader.take_u64_length(payload_bytes, what)?;
    PackedBlocks::open(payload, value_count, false)
}

#[derive(Debug)]
enum Cursor<'a> {
    Constant(i64),
    Plain { width_bytes: usize, values: &'a [u8] },
    Packed(PackedBlocks<'a>),
    Rle { run_values: Vec<i64>, run_lengths: Vec<i64>, run: usize, left_in_run: usize },
    Dictionary { entries: Vec<i64>, codes: PackedBlocks<'a> },
}

/// Where a vector-at-a-time reader stands in its segment: every vector is full
/// (`VECTOR_VALUES`) but the last. Shared by the integer and string dictionary cursors.
#[derive(Debug, Clone, Copy)]
pub struct VectorPosition {
    value_count: usize,
    position: usize,
}

impl VectorPosition {
    pub fn new(value_count: usize) -> VectorPosition {
        VectorPosition { value_count, position: 0 }
    }

    pub fn value_count(self) -> usize {
        self.value_count
    }

    /// Values handed out so far.
    pub fn position(self) -> usize {
        self.position
    }

    pub fn remaining(self) -> usize {
        self.value_count - self.position
    }

    /// The length of the next vector (0 at the end).
    pub fn next_length(self) -> usize {
        VECTOR_VALUES.min(self.remaining())
    }

    pub fn advance(&mut self, length: usize) {
        debug_assert!(length <= self.remaining(), "advance {length} past the {} values left", self.remaining());
        self.position += length;
    }
}

/// A cursor over one integer payload handing out its values a vector at a time.
#[derive(Debug)]
pub struct IntegerVectors<'a> {
    cursor: Cursor<'a>,
    at: VectorPosition,
    deltas: Box<[u64; VECTOR_VALUES]>,
}

impl<'a> IntegerVectors<'a> {
    /// Opens `payload` of `codec` holding `value_count` values, validating its structure.
    pub fn open(codec: CodecId, payload: &'a [u8], value_count: usize) -> Result<Self, CodecError> {
        let cursor = match codec {
            CodecId::Constant => {
                let mut reader = ByteReader::new(payload);
                let value = reader.i64_le("constant value")?;
                trailing(&reader, "constant payload")?;
                Cursor::Constant(value)
            }
            CodecId::Plain => {
                let mut reader = ByteReader::new(payload);
                let width_bytes = match reader.u8("plain width")? {
                    4 => 4,
                    8 => 8,
                    other => return Err(CodecError::corrupt("plain width", format!("{other} bytes, expected 4 or 8"))),
                };
                let values = reader.take(value_count.saturating_mul(width_bytes), "plain values")?;
                trailing(&reader, "plain payload")?;
                Cursor::Plain { width_bytes, values }
            }
            CodecId::Bitpack => Cursor::Packed(PackedBlocks::open(payload, value_count, false)?),
            CodecId::FastLanes => Cursor::Packed(PackedBlocks::open(payload, value_count, true)?),
            CodecId::Rle => {
                let (run_values, run_lengths) = super::rle::read_runs(payload, value_count)?;
                let left_in_run = run_lengths.first().map_or(0, |length| *length as usize);
                Cursor::Rle { run_values, run_lengths, run: 0, left_in_run }
            }
            CodecId::Dictionary => {
                let mut reader = ByteReader::new(payload);
                let entries: Vec<i64> = super::dictionary::read_entries(&mut reader, value_count)?;
                let codes = nested_blocks(&mut reader, value_count, "dictionary codes")?;
                trailing(&reader, "dictionary payload")?;
                Cursor::Dictionary { entries, codes }
            }
            CodecId::Bitmap => return Err(CodecError::NotApplicable { codec, kind: "integer", detail: "" }),
        };
        Ok(IntegerVectors { cursor, at: VectorPosition::new(value_count), deltas: Box::new([0u64; VECTOR_VALUES]) })
    }

    pub fn value_count(&self) -> usize {
        self.at.value_count()
    }

    /// Decodes the next vector into `out`; returns how many values it holds (0 at the end).
    /// Every vector but the last is full.
    pub fn next_vector(&mut self, out: &mut Vector) -> Result<usize, CodecError> {
        let length = self.at.next_length();
        if length == 0 {
            return Ok(0);
        }
        let out = &mut out[..length];
        match &mut self.cursor {
            Cursor::Constant(value) => out.fill(*value),
            Cursor::Plain { width_bytes, values } => {
                let start = self.at.position() * *width_bytes;
                let bytes = &values[start..start + length * *width_bytes];
                if *width_bytes == 4 {
                    for (value, chunk) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                        *value = i64::from(i32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
                    }
                } else {
                    for (value, chunk) in out.iter_mut().zip(bytes.chunks_exact(8)) {
                        let mut array = [0u8; 8];
                        array.copy_from_slice(chunk);
                        *value = i64::from_le_bytes(array);
                    }
                }
            }
            Cursor::Packed(blocks) => {
                let block = next_block(blocks, length)?;
                blocks.unpack(&block, &mut self.deltas);
                // Frame of reference and widening in one pass over an L1-resident vector.
                add_frame_of_reference(block.min, &self.deltas[..], out);
            }
            Cursor::Rle { run_values, run_lengths, run, left_in_run } => {
                // The cursor in locals (not written back per run), and a short run written
                // as one fixed store of `SHORT_RUN` copies whose tail the next runs
                // overwrite: a sorted key repeated a few times per row (TPC-H l_orderkey:
                // ~4) spent ~6 ns a value here in a `memset` call and the cursor's stores.
                const SHORT_RUN: usize = 8;
                let (mut r, mut left) = (*run, *left_in_run);
                let mut filled = 0;
                while filled < length {
                    // Run lengths were checked to sum to value_count: a run is always left here.
                    let take = left.min(length - filled);
                    let value = run_values[r];
                    match out.get_mut(filled..filled + SHORT_RUN) {
                        Some(window) if take <= SHORT_RUN => window.copy_from_slice(&[value; SHORT_RUN]),
                        _ => out[filled..filled + take].fill(value),
                    }
                    filled += take;
                    left -= take;
                    if left == 0 && r + 1 < run_lengths.len() {
                        r += 1;
                        left = run_lengths[r] as usize;
                    }
                }
                (*run, *left_in_run) = (r, left);
            }
            Cursor::Dictionary { entries, codes } => {
                let block = next_block(codes, length)?;
                codes.unpack(&block, &mut self.deltas);
                let codes = &self.deltas[..length];
                check_codes(codes, block.min, entries.len())?;
                let base = block.min as u64;
                for (value, code) in out.iter_mut().zip(codes) {
                    // In range: check_codes saw every base + code below entries.len().
                    *value = entries[(base + *code) as usize];
                }
            }
        }
        self.at.advance(length);
        Ok(length)
    }

    /// Moves past the next vector without decoding it (a scan whose filter rejected all
    /// of its rows); returns how many values it held (0 at the end). Bit-packed blocks are
    /// stepped over by their headers, nothing unpacked.
    pub fn skip_vector(&mut self) -> Result<usize, CodecError> {
        let length = self.at.next_length();
        if length == 0 {
            return Ok(0);
        }
        match &mut self.cursor {
            Cursor::Constant(_) | Cursor::Plain { .. } => {}
            Cursor::Packed(blocks) | Cursor::Dictionary { codes: blocks, .. } => {
                next_block(blocks, length)?;
            }
            Cursor::Rle { run_lengths, run, left_in_run, .. } => {
                let mut skipped = 0;
                while skipped < length {
                    // Run lengths were checked to sum to value_count: a run is always left here.
                    let take = (*left_in_run).min(length - skipped);
                    skipped += take;
                    *left_in_run -= take;
                    if *left_in_run == 0 && *run + 1 < run_lengths.len() {
                        *run += 1;
                        *left_in_run = run_lengths[*run] as usize;
                    }
                }
            }
        }
        self.at.advance(length);
        Ok(length)
    }

    /// The sum of all remaining values (for a segment without nulls), exact, without
    /// materializing them where the codec allows: n·min + Σ deltas for bit-packed blocks,
    /// Σ count(code)·entry for dictionaries, Σ length·value for runs.
    pub fn sum_rest(&mut self) -> Result<i128, CodecError> {
        let mut total: i128 = 0;
        match &mut self.cursor {
            Cursor::Constant(value) => {
                total = i128::from(*value) * self.at.remaining() as i128;
                self.at.advance(self.at.remaining());
            }
            Cursor::Packed(blocks) => {
                while self.at.remaining() > 0 {
                    let length = self.at.next_length();
                    let block = next_block(blocks, length)?;
                    blocks.unpack(&block, &mut self.deltas);
                    total += i128::from(block.min) * length as i128 + sum_deltas(&self.deltas[..length], block.width_bits) as i128;
                    self.at.advance(length);
                }
            }
            Cursor::Dictionary { entries, codes } => {
                let mut counts = vec![0u64; entries.len()];
                while self.at.remaining() > 0 {
                    let length = self.at.next_length();
                    let block = next_block(codes, length)?;
                    codes.unpack(&block, &mut self.deltas);
                    let block_codes = &self.deltas[..length];
                    check_codes(block_codes, block.min, entries.len())?;
                    let base = block.min as u64;
                    for code in block_codes {
                        counts[(base + *code) as usize] += 1;
                    }
                    self.at.advance(length);
                }
                total = counts.iter().zip(entries.iter()).map(|(count, entry)| i128::from(*entry) * i128::from(*count)).sum();
            }
            Cursor::Plain { .. } | Cursor::Rle { .. } => {
                let mut vector = [0i64; VECTOR_VALUES];
                loop {
                    let length = self.next_vector(&mut vector)?;
                    if length == 0 {
                        break;
                    }
                    total += vector[..length].iter().map(|v| i128::from(*v)).sum::<i128>();
                }
            }
        }
        Ok(total)
    }
}

fn trailing(reader: &ByteReader<'_>, what: &'static str) -> Result<(), CodecError> {
    match reader.remaining_bytes() {
        0 => Ok(()),
        extra => Err(CodecError::corrupt(what, format!("{extra} trailing bytes"))),
    }
}

#[inline]
pub(crate) fn next_block<'a>(blocks: &mut PackedBlocks<'a>, length: usize) -> Result<PackedBlock<'a>, CodecError> {
    let block = blocks.next_block().ok_or_else(|| CodecError::corrupt("bitpack blocks", "fewer blocks than values"))?;
    debug_assert_eq!(block.value_count, length);
    Ok(block)
}

/// Codes are frame-of-reference deltas: every `base + code` must name an entry. One
/// branch-free max over the vector, so the gathers after it need no bounds failure path.
#[inline]
pub(crate) fn check_codes(codes: &[u64], base: i64, entry_count: usize) -> Result<(), CodecError> {
    if codes.is_empty() {
        return Ok(());
    }
    let code_max = codes.iter().fold(0u64, |max, code| max.max(*code));
    match u64::try_from(base).ok().and_then(|base| base.checked_add(code_max)) {
        Some(top) if top < entry_count as u64 => Ok(()),
        _ => Err(CodecError::corrupt("dictionary code", format!("{base} + {code_max} for {entry_count} entries"))),
    }
}

/// Σ deltas of `width_bits` each: in u64 when the width makes overflow impossible
/// (`SUM_U64_WIDTH_BITS_MAX`), else in u128.
#[inline]
pub fn sum_deltas(deltas: &[u64], width_bits: u32) -> u128 {
    debug_assert!(deltas.len() <= VECTOR_VALUES);
    if width_bits <= SUM_U64_WIDTH_BITS_MAX {
        u128::from(deltas.iter().sum::<u64>())
    } else {
        deltas.iter().map(|d| u128::from(*d)).sum()
    }
}

/// `out[i] = min + deltas[i]` (wrapping, as the encoder subtracted), for every `out`.
fn add_frame_of_reference(min: i64, deltas: &[u64], out: &mut [i64]) {
    match super::cpu::kernel() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `kernel()` returns Avx2 only when the CPU reports AVX2.
        super::cpu::Kernel::Avx2 => unsafe { add_frame_of_reference_avx2(min, deltas, out) },
        _ => add_frame_of_reference_body(min, deltas, out),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn add_frame_of_reference_avx2(min: i64, deltas: &[u64], out: &mut [i64]) {
    add_frame_of_reference_body(min, deltas, out)
}

#[inline(always)]
fn add_frame_of_reference_body(min: i64, deltas: &[u64], out: &mut [i64]) {
    for (value, delta) in out.iter_mut().zip(deltas) {
        *value = min.wrapping_add(*delta as i64);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::compression::{decode_integers, encode_integers, IntegerInput};

    fn all_vectors(codec: CodecId, payload: &[u8], value_count: usize) -> Vec<i64> {
        let mut cursor = IntegerVectors::open(codec, payload, value_count).unwrap();
        let mut vector = [0i64; VECTOR_VALUES];
        let mut out = Vec::new();
        loop {
            let length = cursor.next_vector(&mut vector).unwrap();
            if length == 0 {
                break;
            }
            assert!(length == VECTOR_VALUES || out.len() + length == value_count);
            out.extend_from_slice(&vector[..length]);
        }
        out
    }

    fn edge_values() -> impl Strategy<Value = i64> {
        prop_oneof![
            Just(i64::MIN),
            Just(i64::MAX),
            Just(0i64),
            Just(-1i64),
            -100i64..100,
            any::<i64>(),
            (0u32..64).prop_map(|shift| 1i64 << shift),
        ]
    }

    proptest! {
        #[test]
        fn vectors_and_sums_match_the_whole_column_decoder(
            values in prop::collection::vec(edge_values(), 0..3000),
            shape in 0u8..5,
        ) {
            // Shapes: as drawn; few distinct values (dictionary); runs (rle); narrow (bitpack);
            // short runs of 1 to 9 (rle's short-run stores, runs across vector ends).
            let values: Vec<i64> = match shape {
                0 => values,
                1 => values.iter().map(|v| [i64::MIN, 7, i64::MAX][(*v as u64 % 3) as usize]).collect(),
                2 => values.iter().enumerate().map(|(i, v)| if i % 300 < 150 { *v % 5 } else { 3 }).collect(),
                3 => values.iter().map(|v| v % 1000).collect(),
                _ => values.iter().flat_map(|v| std::iter::repeat_n(*v, 1 + (v.unsigned_abs() % 9) as usize)).take(6000).collect(),
            };
            for codec in [CodecId::Constant, CodecId::Plain, CodecId::Bitpack, CodecId::FastLanes, CodecId::Rle, CodecId::Dictionary] {
                let input = IntegerInput::new(&values, 8);
                let mut payload = Vec::new();
                if encode_integers(&input, Some(codec), &mut payload).is_err() {
                    continue;
                }
                let mut oracle = vec![0i64; values.len()];
                decode_integers(codec, &payload, &mut oracle).unwrap();
                prop_assert_eq!(&oracle, &values);
                prop_assert_eq!(all_vectors(codec, &payload, values.len()), values.clone());
                let sum = IntegerVectors::open(codec, &payload, values.len()).unwrap().sum_rest().unwrap();
                prop_assert_eq!(sum, values.iter().map(|v| i128::from(*v)).sum::<i128>(), "codec {}", codec);
            }
        }

        #[test]
        fn vector_cursors_never_panic_on_bad_payloads(bytes in prop::collection::vec(any::<u8>(), 0..600), value_count in 0usize..3000, codec in 0u8..9) {
            let Ok(codec) = CodecId::from_u8(codec) else { return Ok(()) };
            if let Ok(mut cursor) = IntegerVectors::open(codec, &bytes, value_count) {
                let mut vector = [0i64; VECTOR_VALUES];
                while let Ok(length) = cursor.next_vector(&mut vector) {
                    if length == 0 { break; }
                }
            }
            if let Ok(mut cursor) = IntegerVectors::open(codec, &bytes, value_count) {
                let _ = cursor.sum_rest();
            }
        }
    }

    #[test]
    fn wide_deltas_sum_in_u128() {
        let deltas = [u64::MAX; VECTOR_VALUES];
        assert_eq!(sum_deltas(&deltas, 64), u128::from(u64::MAX) * VECTOR_VALUES as u128);
        let narrow = [(1u64 << 53) - 1; VECTOR_VALUES];
        assert_eq!(sum_deltas(&narrow, 53), ((1u128 << 53) - 1) * VECTOR_VALUES as u128);
    }
}
