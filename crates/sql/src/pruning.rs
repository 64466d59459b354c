//! Filter pushdown: which filters the scan can use to skip pages it would otherwise read.
//!
//! A filter is usable when it compares one column with a constant (`col < 5`,
//! `5 >= col`, `col BETWEEN a AND b`, `col IN (a, b)`), ANDed together. With the minimum and
//! maximum of that column over a unit (a partition, a segment) the scan skips the unit
//! when no value in range can pass. The answer to DataFusion is "Inexact": the filter still
//! runs above the scan on the rows of units that were read.
//!
//! Which units have min/max depends on the storage format: the heap keeps none (only the
//! hash partition key prunes it); the column store keeps min/max per row group, so its
//! scans skip row groups (`scan_filter_of`).

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};

/// A comparison of one column (index into the table's columns) with a constant.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnPredicate {
    Compare { column: usize, op: Operator, value: ScalarValue },
    Between { column: usize, low: ScalarValue, high: ScalarValue },
    InList { column: usize, values: Vec<ScalarValue> },
}

/// The range of a column over a unit, as the format recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnRange {
    pub min: ScalarValue,
    pub max: ScalarValue,
}

/// The predicates a filter holds; `None` when any part of it is not a simple comparison
/// (then the filter is not pushed down at all, so it never prunes wrongly).
pub fn predicates_of(filter: &Expr, column_index: &dyn Fn(&str) -> Option<usize>) -> Option<Vec<ColumnPredicate>> {
    let mut out = Vec::new();
    collect(filter, column_index, &mut out)?;
    Some(out)
}

fn collect(e: &Expr, column_index: &dyn Fn(&str) -> Option<usize>, out: &mut Vec<ColumnPredicate>) -> Option<()> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::And, right }) => {
            collect(left, column_index, out)?;
            collect(right, column_index, out)
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if is_comparison(*op) => {
            let (column, op, value) = match (column_of(left, column_index), literal_of(right)) {
                (Some(c), Some(v)) => (c, *op, v),
                _ => (column_of(right, column_index)?, op.swap()?, literal_of(left)?),
            };
            out.push(ColumnPredicate::Compare { column, op, value });
            Some(())
        }
        Expr::Between(Between { expr, negated: false, low, high }) => {
            let column = column_of(expr, column_index)?;
            out.push(ColumnPredicate::Between { column, low: literal_of(low)?, high: literal_of(high)? });
            Some(())
        }
        // `a = 1 OR a = 7` (DataFusion rewrites short IN lists so): an IN list on one column.
        Expr::BinaryExpr(BinaryExpr { op: Operator::Or, .. }) => {
            let (column, values) = equalities_of(e, column_index)?;
            out.push(ColumnPredicate::InList { column, values });
            Some(())
        }
        Expr::InList(list) if !list.negated => {
            let column = column_of(&list.expr, column_index)?;
            let values = list.list.iter().map(literal_of).collect::<Option<Vec<_>>>()?;
            out.push(ColumnPredicate::InList { column, values });
            Some(())
        }
        _ => None,
    }
}

/// The column and constants of an OR of equalities (or IN lists) all on one column.
fn equalities_of(e: &Expr, column_index: &dyn Fn(&str) -> Option<usize>) -> Option<(usize, Vec<ScalarValue>)> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Or, right }) => {
            let (a, mut values) = equalities_of(left, column_index)?;
            let (b, more) = equalities_of(right, column_index)?;
            if a != b {
                return None;
            }
            values.extend(more);
            Some((a, values))
        }
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right }) => match (column_of(left, column_index), literal_of(right)) {
            (Some(c), Some(v)) => Some((c, vec![v])),
            _ => Some((column_of(right, column_index)?, vec![literal_of(left)?])),
        },
        Expr::InList(list) if !list.negated => {
            let column = column_of(&list.expr, column_index)?;
            Some((column, list.list.iter().map(literal_of).collect::<Option<Vec<_>>>()?))
        }
        _ => None,
    }
}

fn is_comparison(op: Operator) -> bool {
    matches!(op, Operator::Eq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq)
}

fn column_of(e: &Expr, column_index: &dyn Fn(&str) -> Option<usize>) -> Option<usize> {
    match e {
        Expr::Column(c) => column_index(&c.name),
        _ => None,
    }
}

fn literal_of(e: &Expr) -> Option<ScalarValue> {
    match e {
        // NULL never compares true; leave such filters to DataFusion.
        Expr::Literal(v, _) if !v.is_null() => Some(v.clone()),
        _ => None,
    }
}

impl ColumnPredicate {
    pub fn column(&self) -> usize {
        match self {
            ColumnPredicate::Compare { column, .. } | ColumnPredicate::Between { column, .. } | ColumnPredicate::InList { column, .. } => *column,
        }
    }

    /// False only when no value in `range` can pass. Values of types that do not compare
    /// (a literal of another type) keep the unit: pruning must never drop a row.
    pub fn may_match(&self, range: &ColumnRange) -> bool {
        use std::cmp::Ordering::{Greater, Less};
        let cmp = |a: &ScalarValue, b: &ScalarValue| a.partial_cmp(b);
        match self {
            ColumnPredicate::Compare { op, value, .. } => {
                let (vs_min, vs_max) = (cmp(value, &range.min), cmp(value, &range.max));
                match op {
                    Operator::Eq => !(vs_min == Some(Less) || vs_max == Some(Greater)),
                    // col < v: some value passes unless min >= v.
                    Operator::Lt => !matches!(vs_min, Some(Less) | Some(std::cmp::Ordering::Equal)),
                    Operator::LtEq => vs_min != Some(Less),
                    Operator::Gt => !matches!(vs_max, Some(Greater) | Some(std::cmp::Ordering::Equal)),
                    Operator::GtEq => vs_max != Some(Greater),
                    _ => true,
                }
            }
            ColumnPredicate::Between { low, high, .. } => cmp(low, &range.max) != Some(Greater) && cmp(high, &range.min) != Some(Less),
            ColumnPredicate::InList { values, .. } => {
                values.iter().any(|v| cmp(v, &range.min) != Some(Less) && cmp(v, &range.max) != Some(Greater))
            }
        }
    }
}

/// The predicates as ranges in the integer domain the column store keeps min/max in
/// (integers, dates as days, decimals unscaled at the column's scale), for row group
/// elimination. Each bound is widened by one unit, so a constant rounded by the cast to the
/// column's type can never make a row group look empty when it is not: skipping stays
/// conservative, and the filter still runs above the scan.
pub fn scan_filter_of(predicates: &[ColumnPredicate], schema: &arrow::datatypes::Schema) -> flashscan_exec::ScanFilter {
    let mut ranges = Vec::new();
    for p in predicates {
        let column = p.column();
        let Some(field) = schema.fields().get(column) else { continue };
        let as_i64 = |v: &ScalarValue| integer_domain(v, field.data_type());
        let (min, max) = match p {
            ColumnPredicate::Compare { op, value, .. } => {
                let Some(v) = as_i64(value) else { continue };
                match op {
                    Operator::Eq => (Some(v.saturating_sub(1)), Some(v.saturating_add(1))),
                    Operator::Lt | Operator::LtEq => (None, Some(v.saturating_add(1))),
                    Operator::Gt | Operator::GtEq => (Some(v.saturating_sub(1)), None),
                    _ => continue,
                }
            }
            ColumnPredicate::Between { low, high, .. } => match (as_i64(low), as_i64(high)) {
                (Some(lo), Some(hi)) => (Some(lo.saturating_sub(1)), Some(hi.saturating_add(1))),
                _ => continue,
            },
            ColumnPredicate::InList { values, .. } => {
                let Some(vs) = values.iter().map(as_i64).collect::<Option<Vec<i64>>>() else { continue };
                match (vs.iter().min(), vs.iter().max()) {
                    (Some(lo), Some(hi)) => (Some(lo.saturating_sub(1)), Some(hi.saturating_add(1))),
                    _ => continue,
                }
            }
        };
        ranges.push(flashscan_exec::ColumnRange { column, min, max });
    }
    flashscan_exec::ScanFilter { ranges }
}

/// `value` cast to `data_type` and read as the column store's i64 statistic; `None` for
/// types without integer min/max (strings, floats) or values that do not convert.
fn integer_domain(value: &ScalarValue, data_type: &arrow::datatypes::DataType) -> Option<i64> {
    use arrow::datatypes::DataType;
    if !matches!(
        data_type,
        DataType::Int32
            | DataType::Int64
            | DataType::Date32
            | DataType::Decimal128(_, _)
            | DataType::UInt64
            | DataType::Timestamp(_, _)
            | DataType::Time32(_)
            | DataType::Time64(_)
    ) {
        return None;
    }
    let cast = value.cast_to(data_type).ok()?;
    match cast {
        ScalarValue::Int32(Some(v)) | ScalarValue::Date32(Some(v)) | ScalarValue::Time32Second(Some(v)) | ScalarValue::Time32Millisecond(Some(v)) => {
            Some(v as i64)
        }
        ScalarValue::Int64(Some(v))
        | ScalarValue::Time64Microsecond(Some(v))
        | ScalarValue::Time64Nanosecond(Some(v))
        | ScalarValue::TimestampSecond(Some(v), _)
        | ScalarValue::TimestampMillisecond(Some(v), _)
        | ScalarValue::TimestampMicrosecond(Some(v), _)
        | ScalarValue::TimestampNanosecond(Some(v), _) => Some(v),
        // Row groups keep UInt64 min/max only below 2^63, where u64 and i64 order alike;
        // a constant past it bounds nothing usable.
        ScalarValue::UInt64(Some(v)) => i64::try_from(v).ok(),
        ScalarValue::Decimal128(Some(v), _, _) => i64::try_from(v).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, lit};

    fn index(name: &str) -> Option<usize> {
        ["a", "b"].iter().position(|c| *c == name)
    }

    fn range(min: i64, max: i64) -> ColumnRange {
        ColumnRange { min: ScalarValue::Int64(Some(min)), max: ScalarValue::Int64(Some(max)) }
    }

    #[test]
    fn simple_comparisons_are_understood_both_ways_round() {
        let p = predicates_of(&lit(5i64).gt(col("a")), &index).unwrap_or_default();
        assert_eq!(p, vec![ColumnPredicate::Compare { column: 0, op: Operator::Lt, value: ScalarValue::Int64(Some(5)) }]);
        let p = predicates_of(&col("b").eq(lit(1i64)).and(col("a").between(lit(1i64), lit(2i64))), &index).unwrap_or_default();
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn or_of_equalities_on_one_column_is_an_in_list() {
        let p = predicates_of(&col("a").eq(lit(1i64)).or(lit(7i64).eq(col("a"))), &index).unwrap_or_default();
        assert_eq!(p, vec![ColumnPredicate::InList { column: 0, values: vec![ScalarValue::Int64(Some(1)), ScalarValue::Int64(Some(7))] }]);
        assert!(predicates_of(&col("a").eq(lit(1i64)).or(col("b").eq(lit(7i64))), &index).is_none());
        assert!(predicates_of(&col("a").eq(lit(1i64)).or(col("a").gt(lit(7i64))), &index).is_none());
    }

    #[test]
    fn anything_else_is_not_pushed() {
        assert!(predicates_of(&col("a").eq(col("b")), &index).is_none());
        assert!(predicates_of(&col("a").eq(lit(1i64)).or(col("b").eq(lit(1i64))), &index).is_none());
        assert!(predicates_of(&col("zz").eq(lit(1i64)), &index).is_none());
    }

    #[test]
    fn column_store_ranges_are_widened_and_typed() {
        use arrow::datatypes::{DataType, Field, Schema};
        let schema = Schema::new(vec![Field::new("a", DataType::Date32, false), Field::new("b", DataType::Utf8, false)]);
        let p = predicates_of(&col("a").lt_eq(lit(ScalarValue::Date32(Some(100)))).and(col("b").eq(lit("x"))), &index).unwrap_or_default();
        let f = scan_filter_of(&p, &schema);
        assert_eq!(f.ranges, vec![flashscan_exec::ColumnRange { column: 0, min: None, max: Some(101) }]);
        let dec = Schema::new(vec![Field::new("a", DataType::Decimal128(15, 2), false)]);
        let p = predicates_of(&col("a").gt(lit(ScalarValue::Decimal128(Some(5), 15, 1))), &index).unwrap_or_default();
        assert_eq!(scan_filter_of(&p, &dec).ranges[0].min, Some(49));
    }

    #[test]
    fn timestamps_times_and_unsigned_push_down_in_their_units() {
        use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
        let ts = Schema::new(vec![Field::new("a", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false)]);
        let p = predicates_of(&col("a").gt_eq(lit(ScalarValue::TimestampMicrosecond(Some(1_000), Some("UTC".into())))), &index).unwrap_or_default();
        assert_eq!(scan_filter_of(&p, &ts).ranges[0].min, Some(999));
        let time = Schema::new(vec![Field::new("a", DataType::Time32(TimeUnit::Second), false)]);
        let p = predicates_of(&col("a").lt(lit(ScalarValue::Time32Second(Some(3600)))), &index).unwrap_or_default();
        assert_eq!(scan_filter_of(&p, &time).ranges[0].max, Some(3601));
        let unsigned = Schema::new(vec![Field::new("a", DataType::UInt64, false)]);
        let p = predicates_of(&col("a").eq(lit(ScalarValue::UInt64(Some(u64::MAX)))), &index).unwrap_or_default();
        assert!(scan_filter_of(&p, &unsigned).ranges.is_empty(), "past 2^63 nothing is pushed");
        let p = predicates_of(&col("a").eq(lit(ScalarValue::UInt64(Some(42)))), &index).unwrap_or_default();
        assert_eq!(scan_filter_of(&p, &unsigned).ranges[0].max, Some(43));
    }

    #[test]
    fn ranges_prune_only_when_nothing_can_pass() {
        let r = range(10, 20);
        let cmp = |op, v: i64| ColumnPredicate::Compare { column: 0, op, value: ScalarValue::Int64(Some(v)) }.may_match(&r);
        assert!(!cmp(Operator::Eq, 9) && cmp(Operator::Eq, 10) && cmp(Operator::Eq, 20) && !cmp(Operator::Eq, 21));
        assert!(!cmp(Operator::Lt, 10) && cmp(Operator::Lt, 11));
        assert!(!cmp(Operator::LtEq, 9) && cmp(Operator::LtEq, 10));
        assert!(!cmp(Operator::Gt, 20) && cmp(Operator::Gt, 19));
        assert!(!cmp(Operator::GtEq, 21) && cmp(Operator::GtEq, 20));
        let between = |lo: i64, hi: i64| {
            ColumnPredicate::Between { column: 0, low: ScalarValue::Int64(Some(lo)), high: ScalarValue::Int64(Some(hi)) }.may_match(&r)
        };
        assert!(!between(1, 9) && between(1, 10) && between(20, 30) && !between(21, 30));
        // Another type does not compare: keep the unit.
        let other = ColumnPredicate::Compare { column: 0, op: Operator::Eq, value: ScalarValue::Utf8(Some("x".into())) };
        assert!(other.may_match(&r));
    }
}
