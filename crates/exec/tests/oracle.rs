//! Every built-in query's answer against an oracle computed independently with Arrow's
//! compute kernels over the same tpchgen-arrow batches (SF 0.02), and Q1 at SF 1 against
//! the answer published with the TPC-H specification.

mod common;

use std::collections::BTreeMap;

use arrow::array::{Array, AsArray, BooleanArray, Date32Array, Decimal128Array, Scalar, StringViewArray};
use arrow::compute::kernels::aggregate::sum;
use arrow::compute::kernels::cmp::{eq, lt_eq};
use arrow::compute::kernels::numeric::{add, mul, sub};
use arrow::compute::{filter_record_batch, nullif};
use arrow::datatypes::{DataType, Decimal128Type, Int32Type, Int64Type};
use arrow::record_batch::RecordBatch;
use flashscan_exec::queries::{run_on_batches, NeedleSpec};
use flashscan_exec::value::days_from_civil;
use flashscan_exec::{BuiltinQuery, QueryResult, Value};

const SF: f64 = 0.02;

fn batches() -> Vec<RecordBatch> {
    common::lineitem(SF, 2)
}

fn dec(value: i128, scale: u8) -> Value {
    Value::Decimal { value, scale }
}

fn decimal_scalar(value: i128) -> Scalar<Decimal128Array> {
    Scalar::new(Decimal128Array::from(vec![value]).with_precision_and_scale(15, 2).unwrap())
}

fn sum_decimal(arrays: impl Iterator<Item = arrow::array::ArrayRef>) -> i128 {
    arrays.map(|a| sum(a.as_primitive::<Decimal128Type>()).unwrap_or(0)).sum()
}

#[test]
fn count_equals_rows_generated() {
    let b = batches();
    let rows: usize = b.iter().map(|b| b.num_rows()).sum();
    assert!(rows > 100_000);
    let r = run_on_batches(&BuiltinQuery::Count, &b, 3).unwrap();
    assert_eq!(r.rows, vec![vec![Value::Int(rows as i64)]]);
}

#[test]
fn count11_counts_non_null_values_of_each_column() {
    let b = batches();
    // Null out every third l_comment and every fifth l_partkey: the counts must drop by that.
    let mut nulls_comment = 0i64;
    let mut nulls_partkey = 0i64;
    let with_nulls: Vec<RecordBatch> = b
        .iter()
        .map(|batch| {
            let n = batch.num_rows();
            let every = |k: usize| BooleanArray::from((0..n).map(|i| i % k == 0).collect::<Vec<_>>());
            let (c, p) = (every(3), every(5));
            nulls_comment += c.true_count() as i64;
            nulls_partkey += p.true_count() as i64;
            let schema = batch.schema();
            let mut columns = batch.columns().to_vec();
            let ci = schema.index_of("l_comment").unwrap();
            let pi = schema.index_of("l_partkey").unwrap();
            columns[ci] = nullif(&columns[ci], &c).unwrap();
            columns[pi] = nullif(&columns[pi], &p).unwrap();
            let fields: Vec<_> = schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
            RecordBatch::try_new(std::sync::Arc::new(arrow::datatypes::Schema::new(fields)), columns).unwrap()
        })
        .collect();
    let rows: i64 = b.iter().map(|b| b.num_rows() as i64).sum();
    let r = run_on_batches(&BuiltinQuery::Count11, &with_nulls, 2).unwrap();
    assert_eq!(r.columns.len(), 11);
    let expected: Vec<Value> = r
        .columns
        .iter()
        .map(|c| match c.as_str() {
            "count(l_comment)" => Value::Int(rows - nulls_comment),
            "count(l_partkey)" => Value::Int(rows - nulls_partkey),
            _ => Value::Int(rows),
        })
        .collect();
    assert_eq!(r.rows, vec![expected]);
}

#[test]
fn sum4_equals_arrow_sum() {
    let b = batches();
    let r = run_on_batches(&BuiltinQuery::Sum4, &b, 4).unwrap();
    let expected: Vec<Value> = ["l_quantity", "l_extendedprice", "l_discount", "l_tax"]
        .iter()
        .map(|c| dec(sum_decimal(b.iter().map(|batch| batch.column_by_name(c).unwrap().clone())), 2))
        .collect();
    assert_eq!(r.rows, vec![expected]);
    assert!(matches!(r.rows[0][1], Value::Decimal { value, .. } if value > 0));
}

#[test]
fn sum4_of_no_rows_is_null() {
    let b = batches();
    let empty = b[0].slice(0, 0);
    let r = run_on_batches(&BuiltinQuery::Sum4, [&empty], 1).unwrap();
    assert_eq!(r.rows, vec![vec![Value::Null; 4]]);
}

fn needle_oracle(b: &[RecordBatch], pattern: &str) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for batch in b {
        let comment = batch.column_by_name("l_comment").unwrap();
        let pattern_array = StringViewArray::from(vec![format!("%{pattern}%")]);
        let hit = arrow::compute::kernels::comparison::like(comment.as_string_view(), &Scalar::new(pattern_array)).unwrap();
        let matched = filter_record_batch(batch, &hit).unwrap();
        let keys = matched.column_by_name("l_orderkey").unwrap().as_primitive::<Int64Type>().clone();
        let lines = matched.column_by_name("l_linenumber").unwrap().as_primitive::<Int32Type>().clone();
        let texts = matched.column_by_name("l_comment").unwrap().as_string_view().clone();
        for i in 0..matched.num_rows() {
            rows.push(vec![Value::Int(keys.value(i)), Value::Int(lines.value(i) as i64), Value::Text(texts.value(i).to_string())]);
        }
    }
    rows.sort_by(|a, b| match (&a[0], &a[1], &b[0], &b[1]) {
        (Value::Int(a0), Value::Int(a1), Value::Int(b0), Value::Int(b1)) => (a0, a1).cmp(&(b0, b1)),
        _ => unreachable!(),
    });
    rows
}

#[test]
fn needle_equals_arrow_like() {
    let b = batches();
    for pattern in ["Tiresias", "Tiresias sleep", "furiously", "no such words here"] {
        let spec = NeedleSpec { pattern: pattern.into(), ..NeedleSpec::default() };
        let r = run_on_batches(&BuiltinQuery::Needle(spec), &b, 3).unwrap();
        let expected = needle_oracle(&b, pattern);
        assert_eq!(r.rows_total, expected.len() as u64, "{pattern}");
        let kept = expected.len().min(flashscan_exec::limits::NEEDLE_KEYS_MAX);
        assert_eq!(r.rows, expected[..kept].to_vec(), "{pattern}");
    }
}

/// Q1 over Arrow kernels: filter, then per group arrow sums of arrow products.
fn q1_oracle(b: &[RecordBatch]) -> QueryResult {
    let cutoff = Scalar::new(Date32Array::from(vec![days_from_civil(1998, 9, 2) as i32]));
    let one = decimal_scalar(100);
    let mut groups: BTreeMap<(String, String), [i128; 6]> = BTreeMap::new();
    for batch in b {
        let keep = lt_eq(batch.column_by_name("l_shipdate").unwrap(), &cutoff).unwrap();
        let kept = filter_record_batch(batch, &keep).unwrap();
        for (rf, ls) in [("A", "F"), ("N", "F"), ("N", "O"), ("R", "F")] {
            let m1 = eq(kept.column_by_name("l_returnflag").unwrap(), &Scalar::new(StringViewArray::from(vec![rf]))).unwrap();
            let m2 = eq(kept.column_by_name("l_linestatus").unwrap(), &Scalar::new(StringViewArray::from(vec![ls]))).unwrap();
            let mask = arrow::compute::and(&m1, &m2).unwrap();
            let g = filter_record_batch(&kept, &mask).unwrap();
            if g.num_rows() == 0 {
                continue;
            }
            let col = |n: &str| g.column_by_name(n).unwrap().clone();
            let disc_price = mul(&col("l_extendedprice"), &sub(&one, &col("l_discount")).unwrap()).unwrap();
            let charge = mul(&disc_price, &add(&one, &col("l_tax")).unwrap()).unwrap();
            assert_eq!(disc_price.data_type(), &DataType::Decimal128(32, 4));
            assert!(matches!(charge.data_type(), DataType::Decimal128(_, 6)));
            let acc = groups.entry((rf.to_string(), ls.to_string())).or_default();
            acc[0] += sum_decimal(std::iter::once(col("l_quantity")));
            acc[1] += sum_decimal(std::iter::once(col("l_extendedprice")));
            acc[2] += sum_decimal(std::iter::once(disc_price));
            acc[3] += sum_decimal(std::iter::once(charge));
            acc[4] += sum_decimal(std::iter::once(col("l_discount")));
            acc[5] += g.num_rows() as i128;
        }
    }
    let avg = |s: i128, n: i128| dec((2 * s * 10_000 + n) / (2 * n), 6);
    let rows = groups
        .into_iter()
        .map(|((rf, ls), a)| {
            vec![
                Value::Text(rf),
                Value::Text(ls),
                dec(a[0], 2),
                dec(a[1], 2),
                dec(a[2], 4),
                dec(a[3], 6),
                avg(a[0], a[5]),
                avg(a[1], a[5]),
                avg(a[4], a[5]),
                Value::Int(a[5] as i64),
            ]
        })
        .collect();
    QueryResult { columns: vec![], rows, rows_total: 4 }
}

#[test]
fn q1_equals_arrow_oracle() {
    let b = batches();
    let r = run_on_batches(&BuiltinQuery::Q1, &b, 2).unwrap();
    let expected = q1_oracle(&b);
    assert_eq!(r.rows.len(), 4);
    assert_eq!(r.rows, expected.rows);
    assert_eq!(r.columns[2], "sum_qty");
}

#[test]
fn q1_refuses_multi_character_flags() {
    let b = batches();
    let batch = &b[0];
    let schema = batch.schema();
    let mut columns = batch.columns().to_vec();
    let i = schema.index_of("l_returnflag").unwrap();
    columns[i] = std::sync::Arc::new(StringViewArray::from(vec!["AB"; batch.num_rows()]));
    let bad = RecordBatch::try_new(schema, columns).unwrap();
    let err = run_on_batches(&BuiltinQuery::Q1, [&bad], 1).unwrap_err();
    assert!(err.to_string().contains("not one character"), "{err}");
}

fn fixture_rows() -> Vec<String> {
    include_str!("fixtures/q1_sf1.tbl").lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(String::from).collect()
}

/// SF 1: 6 million rows generated on all cores, then Q1, rounded to the 2 decimals the
/// specification publishes. Kept in the default test run (a few seconds) because it is
/// the one test that ties the kernel to the outside world's answer.
#[test]
fn q1_at_sf1_equals_the_published_answer() {
    let b = common::lineitem(1.0, std::thread::available_parallelism().map(|n| n.get() as i32).unwrap_or(2).max(2));
    let r = run_on_batches(&BuiltinQuery::Q1, &b, 2).unwrap();
    let published: Vec<String> = r
        .rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| match v {
                    Value::Decimal { .. } => v.rounded(2).to_string(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    assert_eq!(published, fixture_rows());
}

#[test]
fn tpchgen_ships_the_same_published_answer() {
    // The fixture was copied from the specification; tpchgen carries the same file.
    let shipped: Vec<String> = tpchgen::q_and_a::answers_sf1::Q1_ANSWER
        .lines()
        .skip(2)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('|').map(|f| f.trim()).collect::<Vec<_>>().join("|"))
        .collect();
    assert_eq!(shipped, fixture_rows());
}
