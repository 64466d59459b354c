//! `LIKE` patterns made of literal pieces between several `%` (`'%special%requests%'`,
//! TPC-H Q13; `'%Customer%Complaints%'`, Q16), matched in the scan by one substring search
//! per piece, in order.
//!
//! Arrow's `like` kernel answers `'abc'`, `'abc%'`, `'%abc'` and `'%abc%'` with a compare or
//! one substring search (memchr's `memmem`), but turns any other pattern into a regular
//! expression and calls `Regex::is_match` on every row: for Q13's 15 M `o_comment` strings
//! at SF 10 that is most of the scan's filter time. With `%` as the only wildcard, a string
//! matches `p0%p1%…%pn` exactly when it starts with `p0`, ends with `pn`, and `p1 … pn-1`
//! occur in order, without overlap, between them; finding each piece leftmost after the
//! previous one is enough (an earlier end never rules out a later piece). The pieces are
//! searched with memchr's `memmem::Finder` (the searcher Arrow's own `contains` uses).
//!
//! Only the scan's own evaluation changes: the conjunct stays DataFusion's `LikeExpr` (shown
//! by EXPLAIN, sent to cluster hosts as is), and any pattern with `_` or an escape (`\`), an
//! `ILIKE`, or an input that is not a plain column is left to DataFusion.

use std::sync::Arc;

use arrow::array::{Array, BooleanArray, LargeStringArray, StringArray, StringViewArray};
use arrow::buffer::BooleanBuffer;
use arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::physical_expr::expressions::{Column, LikeExpr, Literal};
use datafusion::physical_expr::PhysicalExpr;
use memchr::memmem::Finder;

/// A `LIKE` / `NOT LIKE` of one column with a pattern of literal pieces between `%`s that
/// Arrow would match with a regular expression (at least two pieces that are not empty).
#[derive(Debug)]
pub struct PiecewiseLike {
    /// The input column's index in the batch the predicate is evaluated on.
    column: usize,
    negated: bool,
    /// Before the first `%` (the string starts with it; may be empty).
    head: Vec<u8>,
    /// Between `%`s, in order, none empty.
    middle: Vec<Finder<'static>>,
    /// After the last `%` (the string ends with it; may be empty).
    tail: Vec<u8>,
}

impl PiecewiseLike {
    /// `predicate` as a piecewise match, when it is a case-sensitive `[NOT] LIKE` of a
    /// column with a constant pattern of that shape; None for anything else (DataFusion
    /// evaluates those).
    pub fn of(predicate: &Arc<dyn PhysicalExpr>) -> Option<PiecewiseLike> {
        let like = predicate.downcast_ref::<LikeExpr>()?;
        if like.case_insensitive() {
            return None;
        }
        let column = like.expr().downcast_ref::<Column>()?.index();
        let pattern = match like.pattern().downcast_ref::<Literal>()?.value() {
            ScalarValue::Utf8(Some(p)) | ScalarValue::Utf8View(Some(p)) | ScalarValue::LargeUtf8(Some(p)) => p.clone(),
            _ => return None,
        };
        Self::of_pattern(column, like.negated(), &pattern)
    }

    /// See `of`: `pattern` split at its `%`s, when it has no `_`, no escape, and at least
    /// two pieces that are not empty (fewer: Arrow's kernel compares or searches once).
    fn of_pattern(column: usize, negated: bool, pattern: &str) -> Option<PiecewiseLike> {
        if pattern.contains(['_', '\\']) || !pattern.contains('%') {
            return None;
        }
        let pieces: Vec<&str> = pattern.split('%').collect();
        if pieces.iter().filter(|p| !p.is_empty()).count() < 2 {
            return None;
        }
        let (head, rest) = pieces.split_first()?;
        let (tail, middle) = rest.split_last()?;
        Some(PiecewiseLike {
            column,
            negated,
            head: head.as_bytes().to_vec(),
            middle: middle.iter().filter(|p| !p.is_empty()).map(|p| Finder::new(p.as_bytes()).into_owned()).collect(),
            tail: tail.as_bytes().to_vec(),
        })
    }

    /// Whether `value` matches the pattern (before `NOT`).
    fn matches(&self, value: &[u8]) -> bool {
        let (head, tail) = (self.head.len(), self.tail.len());
        if value.len() < head + tail {
            return false;
        }
        // Compared only when not empty: a slice compare is a `memcmp` call even for no
        // bytes, and with the `%…%` patterns (empty head and tail) those two calls per row
        // cost more than the searches (a quarter of Q13's samples at SF 10).
        if (head > 0 && value[..head] != self.head[..]) || (tail > 0 && value[value.len() - tail..] != self.tail[..]) {
            return false;
        }
        // The middle pieces lie between the head and the tail.
        let inner = &value[head..value.len() - tail];
        let mut at = 0;
        for finder in &self.middle {
            match finder.find(&inner[at..]) {
                Some(i) => at += i + finder.needle().len(),
                None => return false,
            }
        }
        true
    }

    /// The predicate's value for every row of `batch` (null where the input is null), as
    /// DataFusion's `LikeExpr` gives it; None when the input column is not a string array
    /// this knows (the caller then evaluates the expression itself).
    pub fn evaluate(&self, batch: &RecordBatch) -> Option<BooleanArray> {
        let input = batch.columns().get(self.column)?;
        let any = input.as_any();
        let values = if let Some(a) = any.downcast_ref::<StringViewArray>() {
            self.collect(a.len(), |i| a.value(i).as_bytes())
        } else if let Some(a) = any.downcast_ref::<StringArray>() {
            self.collect(a.len(), |i| a.value(i).as_bytes())
        } else if let Some(a) = any.downcast_ref::<LargeStringArray>() {
            self.collect(a.len(), |i| a.value(i).as_bytes())
        } else {
            return None;
        };
        Some(BooleanArray::new(values, input.logical_nulls()))
    }

    fn collect<'a>(&self, len: usize, value: impl Fn(usize) -> &'a [u8]) -> BooleanBuffer {
        // Null rows hold some value (often empty); what they give is masked by the nulls.
        BooleanBuffer::collect_bool(len, |i| self.matches(value(i)) != self.negated)
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::ArrayRef;
    use arrow::datatypes::{DataType, Field, Schema};
    use proptest::prelude::*;

    use super::*;

    fn batch_of(values: &[Option<&str>], data_type: &DataType) -> RecordBatch {
        let strings: ArrayRef = Arc::new(StringArray::from(values.to_vec()));
        let column = arrow::compute::cast(&strings, data_type).unwrap_or(strings);
        let schema = Arc::new(Schema::new(vec![Field::new("s", data_type.clone(), true)]));
        RecordBatch::try_new(schema, vec![column]).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Arrow's own kernel (what DataFusion's `LikeExpr` runs): the oracle.
    fn arrow_like(batch: &RecordBatch, pattern: &str, negated: bool) -> BooleanArray {
        let input = batch.column(0);
        let pattern = arrow::array::Scalar::new(arrow::compute::cast(&(Arc::new(StringArray::from(vec![pattern])) as ArrayRef), input.data_type()).unwrap_or_else(|e| panic!("{e}")));
        let result = if negated { arrow::compute::kernels::comparison::nlike(input, &pattern) } else { arrow::compute::kernels::comparison::like(input, &pattern) };
        result.unwrap_or_else(|e| panic!("{e}"))
    }

    fn like_expr(pattern: &str, negated: bool, case_insensitive: bool) -> Arc<dyn PhysicalExpr> {
        Arc::new(LikeExpr::new(
            negated,
            case_insensitive,
            Arc::new(Column::new("s", 0)),
            Arc::new(Literal::new(ScalarValue::Utf8View(Some(pattern.to_string())))),
        ))
    }

    #[test]
    fn only_patterns_arrow_would_match_with_a_regex_are_taken() {
        for pattern in ["%special%requests%", "a%b", "%a%b", "a%b%", "a%%b", "x%y%z"] {
            assert!(PiecewiseLike::of(&like_expr(pattern, false, false)).is_some(), "{pattern}");
        }
        // One piece: Arrow compares or searches once. `_` and escapes: Arrow's regex.
        for pattern in ["abc", "abc%", "%abc", "%abc%", "%%abc%%", "%", "%%", "", "a_%b", "%a\\%b%"] {
            assert!(PiecewiseLike::of(&like_expr(pattern, false, false)).is_none(), "{pattern}");
        }
        // ILIKE is left to DataFusion.
        assert!(PiecewiseLike::of(&like_expr("%a%b%", false, true)).is_none());
    }

    #[test]
    fn q13_pattern_on_views_with_nulls() {
        let values = [
            Some("furiously special foxes requests"),
            Some("requests before special"),
            Some("specialrequests"),
            None,
            Some(""),
            Some("special requests"),
            Some("a long string of more than twelve bytes, special then requests at the end"),
        ];
        let batch = batch_of(&values, &DataType::Utf8View);
        for negated in [false, true] {
            let like = PiecewiseLike::of(&like_expr("%special%requests%", negated, false)).unwrap_or_else(|| panic!("not taken"));
            let ours = like.evaluate(&batch).unwrap_or_else(|| panic!("not evaluated"));
            let arrow = arrow_like(&batch, "%special%requests%", negated);
            assert_eq!(ours, arrow, "negated {negated}");
            assert!(ours.is_null(3));
        }
    }

    fn piece() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(vec!["a", "b", "ab", "ba", "é", ""]), 0..3).prop_map(|p| p.concat())
    }

    proptest! {
        /// Every pattern of pieces and `%`s, on strings of the same letters (so pieces
        /// overlap, repeat and touch), in the three string types and negated: the same
        /// answers and nulls as Arrow's `like`/`nlike`.
        #[test]
        fn equals_arrows_like(
            pieces in prop::collection::vec(piece(), 2..6),
            values in prop::collection::vec(prop::option::weighted(0.9, prop::collection::vec(prop::sample::select(vec!['a', 'b', 'é', 'c']), 0..14).prop_map(|c| c.into_iter().collect::<String>())), 0..40),
            negated in any::<bool>(),
            type_index in 0usize..3,
        ) {
            let pattern = pieces.join("%");
            let data_type = [DataType::Utf8View, DataType::Utf8, DataType::LargeUtf8][type_index].clone();
            let values: Vec<Option<&str>> = values.iter().map(|v| v.as_deref()).collect();
            let batch = batch_of(&values, &data_type);
            if let Some(like) = PiecewiseLike::of_pattern(0, negated, &pattern) {
                let ours = like.evaluate(&batch);
                prop_assert!(ours.is_some());
                prop_assert_eq!(ours.unwrap_or_else(|| BooleanArray::from(Vec::<bool>::new())), arrow_like(&batch, &pattern, negated), "pattern {:?}", pattern);
            }
        }
    }
}
