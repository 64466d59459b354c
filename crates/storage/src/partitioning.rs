//! Hash partitioning: which partition a row goes to.
//!
//! The hash is a 64-bit finalizer (splitmix64) over the value's integer form, or a
//! multiply-rotate mix of 8-byte words for strings, so consecutive keys (TPC-H order keys)
//! spread evenly. The partition is the high bits of `hash * partition_count` (Lemire's
//! range reduction): no division, and it uses the best-mixed bits.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Date32Type, Decimal128Type, Float32Type, Float64Type};

use crate::error::StorageError;

/// Partitions a table can have: partitions x volumes files must stay manageable.
pub const PARTITION_COUNT_MAX: u32 = 1024;

/// Hash of NULL: all NULLs go to one partition.
const NULL_HASH: u64 = 0x9e37_79b9_7f4a_7c15;

/// splitmix64's finalizer: every input bit flips each output bit with probability ~1/2.
#[inline]
pub fn hash_u64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hash of a byte string: 8 bytes at a time, then the finalizer.
#[inline]
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x9fb2_1c65_1e98_df25).rotate_left(29);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x9fb2_1c65_1e98_df25).rotate_left(29);
    }
    hash_u64(h)
}

/// The partition of a hash.
#[inline]
pub fn partition_of(hash: u64, partition_count: u32) -> u32 {
    debug_assert!(partition_count > 0);
    ((hash as u128 * partition_count as u128) >> 64) as u32
}

/// Fills `out` with the partition of every row of `column`. Integers of every width, dates
/// and decimals hash by their i64 value, so the same key lands in the same partition
/// whatever its declared width.
pub fn partition_rows(column: &ArrayRef, partition_count: u32, out: &mut Vec<u32>) -> Result<(), StorageError> {
    out.clear();
    out.reserve(column.len());
    macro_rules! ints {
        ($t:ty) => {{
            let a = column.as_primitive::<$t>();
            out.extend(a.values().iter().map(|&v| partition_of(hash_u64(v as i64 as u64), partition_count)));
        }};
    }
    // Arrow's own dispatch over the eight integer types; unsigned values hash by their
    // stored integer (an UInt64 below 2^63 lands where the same Int64 does).
    arrow::array::downcast_integer! {
        column.data_type() => (ints),
        DataType::Date32 => ints!(Date32Type),
        DataType::Decimal128(..) => ints!(Decimal128Type),
        DataType::Float32 => {
            let a = column.as_primitive::<Float32Type>();
            out.extend(a.values().iter().map(|&v| partition_of(hash_u64((v as f64).to_bits()), partition_count)));
        }
        DataType::Float64 => {
            let a = column.as_primitive::<Float64Type>();
            out.extend(a.values().iter().map(|&v| partition_of(hash_u64(v.to_bits()), partition_count)));
        }
        DataType::Boolean => {
            let a = column.as_boolean();
            out.extend(a.values().iter().map(|v| partition_of(hash_u64(v as u64), partition_count)));
        }
        DataType::Utf8 => out.extend(column.as_string::<i32>().iter().map(|v| partition_of(v.map_or(NULL_HASH, |s| hash_bytes(s.as_bytes())), partition_count))),
        DataType::LargeUtf8 => out.extend(column.as_string::<i64>().iter().map(|v| partition_of(v.map_or(NULL_HASH, |s| hash_bytes(s.as_bytes())), partition_count))),
        DataType::Utf8View => out.extend(column.as_string_view().iter().map(|v| partition_of(v.map_or(NULL_HASH, |s| hash_bytes(s.as_bytes())), partition_count))),
        // Timestamp and time values hash by their stored integer, like the integers.
        DataType::Timestamp(..) | DataType::Time64(_) | DataType::Date64 => {
            let data = column.to_data();
            let values = &data.buffers()[0].typed_data::<i64>()[data.offset()..data.offset() + data.len()];
            out.extend(values.iter().map(|&v| partition_of(hash_u64(v as u64), partition_count)));
        }
        DataType::Time32(_) => {
            let data = column.to_data();
            let values = &data.buffers()[0].typed_data::<i32>()[data.offset()..data.offset() + data.len()];
            out.extend(values.iter().map(|&v| partition_of(hash_u64(v as i64 as u64), partition_count)));
        }
        DataType::Binary => out.extend(column.as_binary::<i32>().iter().map(|v| partition_of(v.map_or(NULL_HASH, hash_bytes), partition_count))),
        DataType::LargeBinary => out.extend(column.as_binary::<i64>().iter().map(|v| partition_of(v.map_or(NULL_HASH, hash_bytes), partition_count))),
        DataType::BinaryView => out.extend(column.as_binary_view().iter().map(|v| partition_of(v.map_or(NULL_HASH, hash_bytes), partition_count))),
        other => {
            return Err(StorageError::UnsupportedType { column: "(partition key)".into(), data_type: other.to_string() });
        }
    }
    // Numeric arms hash the (zeroed) value under a NULL; send NULLs to the NULL partition.
    if let Some(nulls) = column.nulls() {
        let p = partition_of(NULL_HASH, partition_count);
        for (i, valid) in nulls.iter().enumerate() {
            if !valid {
                out[i] = p;
            }
        }
    }
    debug_assert_eq!(out.len(), column.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(keys: impl Iterator<Item = u64>, n: u32) -> Vec<u64> {
        let mut counts = vec![0u64; n as usize];
        for k in keys {
            counts[partition_of(k, n) as usize] += 1;
        }
        counts
    }

    /// Chi-square of the counts against a uniform spread; for n - 1 degrees of freedom the
    /// 99.9th percentile stays below n - 1 + 5 * sqrt(2 (n - 1)) for the n used here.
    fn chi_square(counts: &[u64]) -> f64 {
        let total: u64 = counts.iter().sum();
        let expected = total as f64 / counts.len() as f64;
        counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum()
    }

    #[test]
    fn sequential_integer_keys_spread_evenly() {
        for n in [2u32, 3, 7, 16, 64] {
            let counts = spread((1..=100_000u64).map(hash_u64), n);
            let dof = (n - 1) as f64;
            let bound = dof + 5.0 * (2.0 * dof).sqrt();
            assert!(chi_square(&counts) < bound, "n={n} counts={counts:?}");
            let (min, max) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
            // max/min within about 6 standard deviations of a uniform count.
            let expected = 100_000.0 / n as f64;
            assert!(max as f64 / min as f64 <= 1.0 + 8.0 / expected.sqrt(), "n={n} counts={counts:?}");
        }
    }

    #[test]
    fn string_keys_spread_evenly() {
        let counts = spread((0..100_000u64).map(|i| hash_bytes(format!("Customer#{i:09}").as_bytes())), 8);
        assert!(chi_square(&counts) < 7.0 + 5.0 * 14f64.sqrt(), "{counts:?}");
    }

    #[test]
    fn a_weak_hash_would_fail_the_bound() {
        // The identity "hash" puts 1..100000 all in partition 0: the test can fail.
        let counts = spread(1..=100_000u64, 8);
        assert!(chi_square(&counts) > 1000.0);
    }

    #[test]
    fn same_key_same_partition_across_widths() {
        use arrow::array::{Int32Array, Int64Array};
        use std::sync::Arc;
        let a: ArrayRef = Arc::new(Int32Array::from(vec![1, -5, 77]));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![1, -5, 77]));
        let (mut pa, mut pb) = (vec![], vec![]);
        partition_rows(&a, 13, &mut pa).unwrap();
        partition_rows(&b, 13, &mut pb).unwrap();
        assert_eq!(pa, pb);
    }
}
