//! Bit-packing kernels: 1024 unsigned values of one bit width packed into 16 × width u64
//! words, LSB first (value i occupies bits [i·w, (i+1)·w) of the word stream).
//!
//! Unpacking is the hot path of every scan, so it is monomorphised per width (65 copies)
//! and unrolled by hand over 64 values: with the width a constant, every word index, shift
//! and "does this value straddle two words" test folds away and the loop body is straight
//! loads, shifts, ors and masks. Packing runs once at load time and stays simple.

/// Values per bit-packed block. A block of width w is exactly 16·w words, so full blocks
/// never need a partial word.
pub const BLOCK_VALUES: usize = 1024;
/// Words of a full block at the widest width (64 bits).
pub const BLOCK_WORDS_MAX: usize = BLOCK_VALUES;
/// The widest width: a u64 difference.
pub const WIDTH_BITS_MAX: u32 = 64;

const _: () = assert!(BLOCK_VALUES % 64 == 0);
const _: () = assert!(BLOCK_WORDS_MAX == BLOCK_VALUES * WIDTH_BITS_MAX as usize / 64);

/// Bits needed for any value in 0..=max_value.
pub fn width_bits_for(max_value: u64) -> u32 {
    64 - max_value.leading_zeros()
}

/// Words needed to pack `value_count` values of `width_bits`.
pub fn packed_words(value_count: usize, width_bits: u32) -> usize {
    debug_assert!(width_bits <= WIDTH_BITS_MAX);
    (value_count * width_bits as usize).div_ceil(64)
}

/// Appends `values` (at most one block, each < 2^width_bits) packed as little-endian words.
pub fn pack_block(values: &[u64], width_bits: u32, out: &mut Vec<u8>) {
    debug_assert!(values.len() <= BLOCK_VALUES);
    debug_assert!(width_bits <= WIDTH_BITS_MAX);
    if width_bits == 0 {
        debug_assert!(values.iter().all(|value| *value == 0));
        return;
    }
    let words = packed_words(values.len(), width_bits);
    let mut packed = [0u64; BLOCK_WORDS_MAX];
    let width = width_bits as usize;
    for (index, value) in values.iter().enumerate() {
        debug_assert!(width == 64 || *value >> width == 0, "value {value} wider than {width} bits");
        let bit = index * width;
        let word = bit / 64;
        let shift = bit % 64;
        packed[word] |= value << shift;
        if shift + width > 64 {
            packed[word + 1] |= value >> (64 - shift);
        }
    }
    for word in &packed[..words] {
        out.extend_from_slice(&word.to_le_bytes());
    }
}

/// Unpacks 64 values of width W from exactly W words.
#[inline(always)]
fn unpack_64_values<const W: usize>(input: &[u64; W], out: &mut [u64; 64]) {
    let mask: u64 = if W == 64 { u64::MAX } else { (1u64 << W) - 1 };
    macro_rules! unrolled {
        ($($index:literal)*) => {$(
            {
                let bit = $index * W;
                let word = bit / 64;
                let shift = bit % 64;
                let mut value = input[word] >> shift;
                if shift + W > 64 {
                    value |= input[word + 1] << (64 - shift);
                }
                out[$index] = value & mask;
            }
        )*};
    }
    unrolled!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
              32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63);
}

fn unpack_block_width<const W: usize>(words: &[u64; BLOCK_WORDS_MAX], out: &mut [u64; BLOCK_VALUES]) {
    for group in 0..BLOCK_VALUES / 64 {
        let input: &[u64; W] = words[group * W..group * W + W].try_into().unwrap_or_else(|_| unreachable!());
        let output: &mut [u64; 64] =
            (&mut out[group * 64..group * 64 + 64]).try_into().unwrap_or_else(|_| unreachable!());
        unpack_64_values::<W>(input, output);
    }
}

/// `unpack::<W>(args…)` for the run-time `width_bits` (1 to 64, each width its own
/// monomorphized kernel), or `out` zeroed for width 0. A macro, not a function taking a
/// function, so each call site's kernels are compiled inside it (the AVX2 kernel's
/// `target_feature` reaches them); every width dispatch of the codecs goes through it.
macro_rules! dispatch_width {
    ($width_bits:expr, $out:expr, $unpack:ident $args:tt) => {
        $crate::compression::bits::dispatch_width!(@each $width_bits, $out, $unpack $args; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
              33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64)
    };
    (@each $width_bits:expr, $out:expr, $unpack:ident $args:tt; $($width:literal)*) => {
        match $width_bits {
            0 => $out.fill(0),
            $($width => $unpack::<$width> $args,)*
            _ => unreachable!("width checked when the block header was read"),
        }
    };
}
pub(crate) use dispatch_width;

/// Unpacks one full block of `width_bits` (≤ 64, checked by the caller) from `words`.
/// Words past the packed length may hold anything: only values of the block's real length
/// are used by callers.
pub fn unpack_block(width_bits: u32, words: &[u64; BLOCK_WORDS_MAX], out: &mut [u64; BLOCK_VALUES]) {
    debug_assert!(width_bits <= WIDTH_BITS_MAX);
    dispatch_width!(width_bits, out, unpack_block_width(words, out))
}

/// Unpacks 64 values of width W from the first W·8 bytes of `input`, read as unaligned
/// little-endian words: no copy of the packed words into an aligned buffer first.
#[inline(always)]
fn unpack_64_values_bytes<const W: usize>(input: &[u8], out: &mut [u64]) {
    // One check up front lets the optimizer drop every bounds check below (constant offsets).
    assert!(input.len() >= W * 8 && out.len() >= 64);
    let mask: u64 = if W == 64 { u64::MAX } else { (1u64 << W) - 1 };
    let word_at = |word: usize| -> u64 {
        let mut array = [0u8; 8];
        array.copy_from_slice(&input[word * 8..word * 8 + 8]);
        u64::from_le_bytes(array)
    };
    macro_rules! unrolled {
        ($($index:literal)*) => {$(
            {
                let bit = $index * W;
                let word = bit / 64;
                let shift = bit % 64;
                let mut value = word_at(word) >> shift;
                if shift + W > 64 {
                    value |= word_at(word + 1) << (64 - shift);
                }
                out[$index] = value & mask;
            }
        )*};
    }
    unrolled!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
              32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63);
}

fn unpack_full_block_bytes<const W: usize>(bytes: &[u8], out: &mut [u64; BLOCK_VALUES]) {
    for group in 0..BLOCK_VALUES / 64 {
        unpack_64_values_bytes::<W>(&bytes[group * W * 8..], &mut out[group * 64..]);
    }
}

/// Unpacks the `value_count` (≤ a block) values of `width_bits` packed in `bytes`
/// (exactly `packed_words(value_count, width_bits)` words) into `out[..value_count]`.
/// A full block is unpacked straight from the bytes; a partial one (the segment's last)
/// through a zero-padded copy. Values past `value_count` are unspecified.
pub fn unpack_block_bytes(width_bits: u32, bytes: &[u8], value_count: usize, out: &mut [u64; BLOCK_VALUES]) {
    debug_assert!(width_bits <= WIDTH_BITS_MAX);
    debug_assert!(value_count <= BLOCK_VALUES);
    debug_assert_eq!(bytes.len(), packed_words(value_count, width_bits) * 8);
    if value_count < BLOCK_VALUES {
        let mut words = [0u64; BLOCK_WORDS_MAX];
        load_words(bytes, &mut words);
        unpack_block(width_bits, &words, out);
        return;
    }
    dispatch_width!(width_bits, out, unpack_full_block_bytes(bytes, out))
}

/// Copies little-endian words from `bytes` (a multiple of 8, at most a block) into `words`.
#[inline]
pub fn load_words(bytes: &[u8], words: &mut [u64; BLOCK_WORDS_MAX]) {
    debug_assert!(bytes.len() % 8 == 0);
    debug_assert!(bytes.len() / 8 <= BLOCK_WORDS_MAX);
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut array = [0u8; 8];
        array.copy_from_slice(chunk);
        *word = u64::from_le_bytes(array);
    }
}

/// Value `index` of a packed stream, read without unpacking its neighbours.
pub fn unpack_one(bytes: &[u8], width_bits: u32, index: usize) -> u64 {
    debug_assert!(width_bits <= WIDTH_BITS_MAX);
    if width_bits == 0 {
        return 0;
    }
    let bit = index * width_bits as usize;
    let word_at = |word: usize| -> u64 {
        let mut array = [0u8; 8];
        if let Some(chunk) = bytes.get(word * 8..word * 8 + 8) {
            array.copy_from_slice(chunk);
        }
        u64::from_le_bytes(array)
    };
    let shift = bit % 64;
    let mut value = word_at(bit / 64) >> shift;
    if shift + width_bits as usize > 64 {
        value |= word_at(bit / 64 + 1) << (64 - shift);
    }
    if width_bits == 64 {
        value
    } else {
        value & ((1u64 << width_bits) - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_bits_round_trip_every_width() {
        for width_bits in 0..=64u32 {
            for value_count in [0usize, 1, 63, 64, 65, 1000, 1024] {
                let mask = if width_bits == 64 { u64::MAX } else { (1u64 << width_bits) - 1 };
                let values: Vec<u64> =
                    (0..value_count as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & mask).collect();
                let mut bytes = Vec::new();
                pack_block(&values, width_bits, &mut bytes);
                assert_eq!(bytes.len(), packed_words(value_count, width_bits) * 8);
                let mut words = [0u64; BLOCK_WORDS_MAX];
                load_words(&bytes, &mut words);
                let mut out = [0u64; BLOCK_VALUES];
                unpack_block(width_bits, &words, &mut out);
                assert_eq!(&out[..value_count], &values[..], "width {width_bits}");
                let mut from_bytes = [u64::MAX; BLOCK_VALUES];
                unpack_block_bytes(width_bits, &bytes, value_count, &mut from_bytes);
                assert_eq!(&from_bytes[..value_count], &values[..], "width {width_bits} from bytes");
                for (index, value) in values.iter().enumerate() {
                    assert_eq!(unpack_one(&bytes, width_bits, index), *value);
                }
            }
        }
    }
}
