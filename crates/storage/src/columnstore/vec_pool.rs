//! Recycled value vectors for column decoding. A column store scan decodes a 4-16 MB
//! vector per column per row group; allocating each fresh cost a third of a warm SUM of 4
//! columns in `perf` (the kernel zeroing new pages, then `vec![0; n]` zeroing them again).
//! A scan hands the vectors of a batch it is done with back here, and the next segment is
//! decoded into one of them without clearing it: every codec writes all `value_count`
//! values or fails (checked by `recycled_vectors_decode_like_fresh_ones`).

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::DataType;

/// Vectors kept per type, at most: a few row groups' worth per worker.
pub const POOLED_VECTORS_MAX: usize = 32;

#[derive(Debug, Default)]
pub struct VecPool {
    i32s: Vec<Vec<i32>>,
    i64s: Vec<Vec<i64>>,
    i128s: Vec<Vec<i128>>,
}

/// The value types the pool keeps.
pub trait Pooled: Copy + Default + 'static {
    fn shelf(pool: &mut VecPool) -> &mut Vec<Vec<Self>>;
}

impl Pooled for i32 {
    fn shelf(pool: &mut VecPool) -> &mut Vec<Vec<i32>> {
        &mut pool.i32s
    }
}

impl Pooled for i64 {
    fn shelf(pool: &mut VecPool) -> &mut Vec<Vec<i64>> {
        &mut pool.i64s
    }
}

impl Pooled for i128 {
    fn shelf(pool: &mut VecPool) -> &mut Vec<Vec<i128>> {
        &mut pool.i128s
    }
}

impl VecPool {
    /// A vector of exactly `len` values whose contents are unspecified (stale values from
    /// an earlier batch, or zeros): the caller must overwrite all of them.
    pub fn take<T: Pooled>(&mut self, len: usize) -> Vec<T> {
        let shelf = T::shelf(self);
        match shelf.iter().position(|v| v.capacity() >= len) {
            Some(i) => {
                let mut v = shelf.swap_remove(i);
                if v.len() >= len {
                    v.truncate(len);
                } else {
                    v.resize(len, T::default());
                }
                v
            }
            None => vec![T::default(); len],
        }
    }

    pub fn give<T: Pooled>(&mut self, v: Vec<T>) {
        let shelf = T::shelf(self);
        if shelf.len() < POOLED_VECTORS_MAX {
            shelf.push(v);
        }
    }

    /// Takes back the value vector of `array` when nothing else holds it (the consumer
    /// kept no reference); otherwise leaves it to be freed as usual.
    pub fn recycle(&mut self, array: ArrayRef) {
        if std::sync::Arc::strong_count(&array) != 1 {
            return;
        }
        let data = array.to_data();
        drop(array);
        let data_type = data.data_type().clone();
        let (_, _, _, offset, buffers, _) = data.into_parts();
        let Some(values) = buffers.into_iter().next() else { return };
        if offset != 0 {
            return;
        }
        match data_type {
            DataType::Int32 | DataType::Date32 => {
                if let Ok(v) = values.into_vec::<i32>() {
                    self.give(v);
                }
            }
            DataType::Int64 => {
                if let Ok(v) = values.into_vec::<i64>() {
                    self.give(v);
                }
            }
            DataType::Decimal128(_, _) => {
                if let Ok(v) = values.into_vec::<i128>() {
                    self.give(v);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, Decimal128Array, Int32Array, Int64Array};
    use proptest::prelude::*;

    use super::*;
    use crate::columnstore::error::{ColumnRef, Location};
    use crate::columnstore::segment::{decode_segment_at, decode_segment_pooled, encode_segment, SegmentOptions};
    use crate::compression::CodecId;

    /// A pool whose every vector is full of a value no codec produces here.
    fn poisoned_pool(len: usize) -> VecPool {
        let mut pool = VecPool::default();
        pool.give(vec![i32::MIN + 7; len + 3]);
        pool.give(vec![i64::MIN + 7; len]);
        pool.give(vec![i128::MIN + 7; len.saturating_sub(1)]);
        pool
    }

    proptest! {
        #[test]
        fn recycled_vectors_decode_like_fresh_ones(values in prop::collection::vec(-1000i64..1000, 0..3000), runs in any::<bool>()) {
            // Long runs for rle and constant, short ones for the rest.
            let values: Vec<i64> = if runs { values.iter().map(|v| v / 400).collect() } else { values };
            let column = ColumnRef { index: 0, name: "c".into() };
            let arrays: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from(values.clone())),
                Arc::new(Int32Array::from(values.iter().map(|v| *v as i32).collect::<Vec<_>>())),
                Arc::new(Decimal128Array::from(values.iter().map(|v| *v as i128).collect::<Vec<_>>()).with_precision_and_scale(15, 2).unwrap()),
            ];
            for array in &arrays {
                for codec in [None, Some(CodecId::Constant), Some(CodecId::Rle), Some(CodecId::Bitpack), Some(CodecId::FastLanes), Some(CodecId::Dictionary), Some(CodecId::Plain)] {
                    let Ok(segment) = encode_segment(array.as_ref(), &column, SegmentOptions { archive: false, forced_codec: codec }) else { continue };
                    let (_, fresh) = decode_segment_at(&segment.bytes, &Location::in_memory()).unwrap();
                    let mut pool = poisoned_pool(values.len());
                    let (_, pooled) = decode_segment_pooled(&segment.bytes, &Location::in_memory(), &mut pool).unwrap();
                    prop_assert_eq!(fresh.as_ref().to_data(), pooled.as_ref().to_data());
                    // And a vector given back is taken again.
                    pool.recycle(pooled);
                    let (_, again) = decode_segment_pooled(&segment.bytes, &Location::in_memory(), &mut pool).unwrap();
                    prop_assert_eq!(fresh.to_data(), again.to_data());
                }
            }
        }
    }

    #[test]
    fn shared_arrays_are_not_recycled() {
        let mut pool = VecPool::default();
        let array: ArrayRef = Arc::new(Int64Array::from(vec![1i64, 2, 3]));
        let keep = array.clone();
        pool.recycle(array);
        assert!(pool.i64s.is_empty());
        assert_eq!(keep.len(), 3);
        pool.recycle(keep);
        assert_eq!(pool.i64s.len(), 1);
    }
}
