//! `fastlanes`: frame of reference + bit-packing in the FastLanes layout (Afroozeh & Boncz,
//! "The FastLanes Compression Layout", VLDB 2023): each block of 1,024 values is split into
//! 16 lanes of 64 values, lane `l` holding values l, l+16, l+32, …; each lane is packed
//! LSB-first into W words, and the lanes' words are interleaved: word j of lane l sits at
//! word index 16·j + l. Unpacking value row r then does the same shifts and masks on 16
//! neighbouring words, so the inner loop is one SIMD operation on every lane at once
//! (2 lanes per SSE2 register, 4 per AVX2, 8 per AVX-512) with no per-value branch, and the
//! 16 values it produces are consecutive in the output.
//!
//! Payload (all little-endian), for n values in b = ceil(n / 1024) blocks:
//! | offset | size    | field                                                      |
//! |--------|---------|------------------------------------------------------------|
//! | 0      | 9·b     | per block: min i64, width_bits u8 (0..=64)                 |
//! | 9·b    | 128·w·b | per block: 16·w u64 words, transposed (a short last block is padded with zero deltas) |
//!
//! Target CPU features: the crate is built for the baseline x86-64 (SSE2) so one binary runs
//! everywhere; on x86-64 the unpacking kernel is compiled a second time with AVX2 enabled and
//! chosen at run time (`is_x86_feature_detected!`, checked once). Other targets use the
//! portable kernel, which the compiler vectorizes for their baseline.

use super::bitpack::BLOCK_HEADER_BYTES;
pub use super::cpu::{kernel, Kernel};
use super::bits::{self, dispatch_width, BLOCK_VALUES, WIDTH_BITS_MAX};
use super::codec::{CodecId, IntegerCodec, IntegerInput, IntegerNative};
use super::error::CodecError;
use super::vectors::{IntegerVectors, PackedBlocks, VECTOR_VALUES};

/// Lanes of a block: 16 u64 words side by side (1,024 bits, FastLanes' virtual register).
pub const LANES: usize = 16;
/// Values per lane in one block.
pub const LANE_VALUES: usize = BLOCK_VALUES / LANES;
const _: () = assert!(LANE_VALUES == 64);

pub struct FastLanes;

/// Bytes of one packed block of `width_bits`: 16 lanes × width words × 8 bytes.
pub fn block_bytes(width_bits: u32) -> usize {
    LANES * width_bits as usize * 8
}

fn block_min_max(block: &[i64]) -> (i64, i64) {
    debug_assert!(!block.is_empty());
    block.iter().fold((block[0], block[0]), |(min, max), value| (min.min(*value), max.max(*value)))
}

/// Exact payload size in bytes for `values`.
pub fn encoded_bytes(values: &[i64]) -> usize {
    values
        .chunks(BLOCK_VALUES)
        .map(|block| {
            let (min, max) = block_min_max(block);
            BLOCK_HEADER_BYTES + block_bytes(bits::width_bits_for(max.wrapping_sub(min) as u64))
        })
        .sum()
}

/// Packs one block's deltas (≤ 1,024, each < 2^width_bits; missing ones are zero).
pub fn pack_block(deltas: &[u64], width_bits: u32, out: &mut Vec<u8>) {
    debug_assert!(deltas.len() <= BLOCK_VALUES);
    debug_assert!(width_bits <= WIDTH_BITS_MAX);
    if width_bits == 0 {
        debug_assert!(deltas.iter().all(|delta| *delta == 0));
        return;
    }
    let width = width_bits as usize;
    let mut words = vec![0u64; LANES * width];
    for (index, delta) in deltas.iter().enumerate() {
        debug_assert!(width == 64 || delta >> width == 0);
        let (lane, row) = (index % LANES, index / LANES);
        let bit = row * width;
        let (word, shift) = (bit / 64, bit % 64);
        words[word * LANES + lane] |= delta << shift;
        if shift + width > 64 {
            words[(word + 1) * LANES + lane] |= delta >> (64 - shift);
        }
    }
    for word in words {
        out.extend_from_slice(&word.to_le_bytes());
    }
}

/// Appends the payload for `values`.
pub fn encode(values: &[i64], out: &mut Vec<u8>) {
    let start_bytes = out.len();
    let mut frames = Vec::with_capacity(values.len().div_ceil(BLOCK_VALUES));
    for block in values.chunks(BLOCK_VALUES) {
        let (min, max) = block_min_max(block);
        let width_bits = bits::width_bits_for(max.wrapping_sub(min) as u64);
        out.extend_from_slice(&min.to_le_bytes());
        out.push(width_bits as u8);
        frames.push((min, width_bits));
    }
    let mut deltas = [0u64; BLOCK_VALUES];
    for (block, (min, width_bits)) in values.chunks(BLOCK_VALUES).zip(frames) {
        for (delta, value) in deltas.iter_mut().zip(block) {
            *delta = value.wrapping_sub(min) as u64;
        }
        pack_block(&deltas[..block.len()], width_bits, out);
    }
    debug_assert_eq!(out.len() - start_bytes, encoded_bytes(values));
}

/// Unpacks one block of width W: for each of the 64 rows (unrolled, so every word index
/// and shift is a constant), the same operations on the 16 lanes.
#[inline(always)]
fn unpack_width<const W: usize>(bytes: &[u8], out: &mut [u64; BLOCK_VALUES]) {
    assert!(bytes.len() >= LANES * W * 8);
    let mask: u64 = if W == 64 { u64::MAX } else { (1u64 << W) - 1 };
    let word_at = |index: usize| -> u64 {
        let mut array = [0u8; 8];
        array.copy_from_slice(&bytes[index * 8..index * 8 + 8]);
        u64::from_le_bytes(array)
    };
    macro_rules! unrolled {
        ($($row:literal)*) => {$(
            {
                let bit = $row * W;
                let (word, shift) = (bit / 64, bit % 64);
                let lanes_out = &mut out[$row * LANES..$row * LANES + LANES];
                for lane in 0..LANES {
                    let mut value = word_at(word * LANES + lane) >> shift;
                    if shift + W > 64 {
                        value |= word_at((word + 1) * LANES + lane) << (64 - shift);
                    }
                    lanes_out[lane] = value & mask;
                }
            }
        )*};
    }
    unrolled!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
              32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63);
}

fn unpack_portable(width_bits: u32, bytes: &[u8], out: &mut [u64; BLOCK_VALUES]) {
    dispatch_width!(width_bits, out, unpack_width(bytes, out))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn unpack_avx2(width_bits: u32, bytes: &[u8], out: &mut [u64; BLOCK_VALUES]) {
    dispatch_width!(width_bits, out, unpack_width(bytes, out))
}

/// Unpacks the 1,024 deltas of one block of `width_bits` (≤ 64, checked by the caller)
/// from `bytes` (exactly `block_bytes(width_bits)`).
#[inline]
pub fn unpack_block(width_bits: u32, bytes: &[u8], out: &mut [u64; VECTOR_VALUES]) {
    debug_assert!(width_bits <= WIDTH_BITS_MAX);
    debug_assert_eq!(bytes.len(), block_bytes(width_bits));
    match kernel() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `kernel()` returns Avx2 only when the CPU reports AVX2.
        Kernel::Avx2 => unsafe { unpack_avx2(width_bits, bytes, out) },
        _ => unpack_portable(width_bits, bytes, out),
    }
}

impl IntegerCodec for FastLanes {
    const ID: CodecId = CodecId::FastLanes;

    fn analyze(input: &IntegerInput<'_>) -> Option<usize> {
        Some(encoded_bytes(input.values))
    }

    fn compress(input: &IntegerInput<'_>, out: &mut Vec<u8>) {
        encode(input.values, out);
    }

    fn decompress<T: IntegerNative>(payload: &[u8], out: &mut [T]) -> Result<(), CodecError> {
        let mut blocks = PackedBlocks::open(payload, out.len(), true)?;
        let mut deltas = Box::new([0u64; VECTOR_VALUES]);
        for block_out in out.chunks_mut(BLOCK_VALUES) {
            let block = blocks.next_block().ok_or_else(|| CodecError::corrupt("fastlanes blocks", "fewer blocks than values"))?;
            blocks.unpack(&block, &mut deltas);
            for (value, delta) in block_out.iter_mut().zip(deltas.iter()) {
                *value = T::from_i64(block.min.wrapping_add(*delta as i64));
            }
        }
        Ok(())
    }

    fn fetch(payload: &[u8], value_count: usize, row: usize) -> Result<i64, CodecError> {
        if row >= value_count {
            return Err(CodecError::corrupt("fastlanes fetch", format!("row {row} of {value_count} values")));
        }
        let mut cursor = IntegerVectors::open(CodecId::FastLanes, payload, value_count)?;
        let mut vector = [0i64; VECTOR_VALUES];
        for _ in 0..row / VECTOR_VALUES {
            // Blocks have a fixed size per width: skipping is cheap, but unpacking keeps one path.
            cursor.next_vector(&mut vector)?;
        }
        cursor.next_vector(&mut vector)?;
        Ok(vector[row % VECTOR_VALUES])
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The scalar oracle: value i of a block is bits [row·w, row·w + w) of lane i % 16.
    fn oracle_unpack(bytes: &[u8], width_bits: u32) -> Vec<u64> {
        let width = width_bits as usize;
        (0..BLOCK_VALUES)
            .map(|index| {
                let (lane, row) = (index % LANES, index / LANES);
                let mut value = 0u64;
                for bit in 0..width {
                    let stream_bit = row * width + bit;
                    let word = (stream_bit / 64) * LANES + lane;
                    let byte = bytes[word * 8 + (stream_bit % 64) / 8];
                    if byte >> (stream_bit % 8) & 1 == 1 {
                        value |= 1 << bit;
                    }
                }
                value
            })
            .collect()
    }

    #[test]
    fn every_width_round_trips_on_both_kernels() {
        for width_bits in 0..=64u32 {
            let mask = if width_bits == 64 { u64::MAX } else { (1u64 << width_bits) - 1 };
            let deltas: Vec<u64> = (0..BLOCK_VALUES as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(7) & mask).collect();
            let mut bytes = Vec::new();
            pack_block(&deltas, width_bits, &mut bytes);
            assert_eq!(bytes.len(), block_bytes(width_bits));
            assert_eq!(oracle_unpack(&bytes, width_bits), deltas, "oracle, width {width_bits}");
            let mut out = [u64::MAX; BLOCK_VALUES];
            unpack_portable(width_bits, &bytes, &mut out);
            assert_eq!(&out[..], &deltas[..], "portable, width {width_bits}");
            let mut out = [u64::MAX; BLOCK_VALUES];
            unpack_block(width_bits, &bytes, &mut out);
            assert_eq!(&out[..], &deltas[..], "dispatched ({:?}), width {width_bits}", kernel());
        }
    }

    proptest! {
        #[test]
        fn fastlanes_matches_the_scalar_oracle(
            values in prop::collection::vec(prop_oneof![any::<i64>(), -50i64..50, Just(i64::MIN), Just(i64::MAX)], 0..2500),
            narrow in any::<bool>(),
        ) {
            let values: Vec<i64> = if narrow { values.iter().map(|v| v % 300).collect() } else { values };
            let mut payload = Vec::new();
            encode(&values, &mut payload);
            prop_assert_eq!(payload.len(), encoded_bytes(&values));
            let mut out = vec![0i64; values.len()];
            FastLanes::decompress(&payload, &mut out).unwrap();
            prop_assert_eq!(&out, &values);
            for row in [0, values.len() / 2, values.len().saturating_sub(1)] {
                if row < values.len() {
                    prop_assert_eq!(FastLanes::fetch(&payload, values.len(), row).unwrap(), values[row]);
                }
            }
            // Truncated or extended payloads are errors, never panics or wrong lengths.
            if !payload.is_empty() {
                prop_assert!(FastLanes::decompress(&payload[..payload.len() - 1], &mut out).is_err());
            }
        }
    }
}
