//! Typed access to the columns kernels read, resolved by name in each batch. Kernels run
//! tight loops over raw value slices; these helpers get them those slices, converting only
//! when a table stores a column in a type the loop does not take (into a reused buffer,
//! so nothing allocates per batch once the buffer has grown).

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Date32Type, Decimal128Type, Decimal64Type, Int32Type, Int64Type};
use arrow::record_batch::RecordBatch;

use crate::error::ExecError;

pub fn column<'a>(batch: &'a RecordBatch, query: &str, name: &str) -> Result<&'a ArrayRef, ExecError> {
    batch.column_by_name(name).ok_or_else(|| ExecError::QueryColumns {
        query: query.to_string(),
        table: String::new(),
        what: format!("the decoder returned no column {name}"),
    })
}

fn wrong_type(query: &str, name: &str, data_type: &DataType, wanted: &str) -> ExecError {
    ExecError::QueryColumns {
        query: query.to_string(),
        table: String::new(),
        what: format!("column {name} is {data_type}, the query needs {wanted}"),
    }
}

/// Fails when a column the kernel reads without validity checks has nulls.
pub fn require_no_nulls(array: &dyn Array, query: &str, name: &str) -> Result<(), ExecError> {
    if array.null_count() > 0 {
        return Err(null_in_not_null_column(query, name));
    }
    Ok(())
}

/// The error of a column read as NOT NULL that holds a NULL (batch and heap page paths).
pub fn null_in_not_null_column(query: &str, name: &str) -> ExecError {
    ExecError::QueryColumns {
        query: query.to_string(),
        table: String::new(),
        what: format!("column {name} has nulls; this query reads it as NOT NULL (as TPC-H declares it)"),
    }
}

/// Whether a type can be read as an exact scaled integer.
pub fn is_exact_numeric(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Decimal128(..) | DataType::Decimal64(..) | DataType::Int64 | DataType::Int32
    )
}

/// A numeric column as scaled integers: `(values, scale)`. Decimal128 is borrowed as is;
/// Decimal64 and integers are widened into `scratch`.
pub fn decimal_values<'a>(
    array: &'a dyn Array,
    scratch: &'a mut Vec<i128>,
    query: &str,
    name: &str,
) -> Result<(&'a [i128], u8), ExecError> {
    match array.data_type() {
        DataType::Decimal128(_, scale) if *scale >= 0 => {
            Ok((array.as_primitive::<Decimal128Type>().values().as_ref(), *scale as u8))
        }
        DataType::Decimal64(_, scale) if *scale >= 0 => {
            scratch.clear();
            scratch.extend(array.as_primitive::<Decimal64Type>().values().iter().map(|v| *v as i128));
            Ok((scratch.as_slice(), *scale as u8))
        }
        DataType::Int64 => {
            scratch.clear();
            scratch.extend(array.as_primitive::<Int64Type>().values().iter().map(|v| *v as i128));
            Ok((scratch.as_slice(), 0))
        }
        DataType::Int32 => {
            scratch.clear();
            scratch.extend(array.as_primitive::<Int32Type>().values().iter().map(|v| *v as i128));
            Ok((scratch.as_slice(), 0))
        }
        other => Err(wrong_type(query, name, other, "a decimal or integer")),
    }
}

/// A date column as days since 1970-01-01.
/// Keeps the decimal scale(s) `seen` first (a page, a row group or another worker's
/// kernel) and fails if `now` differs: sums at different scales cannot be added.
pub fn same_scale<S: PartialEq + Copy + std::fmt::Debug>(seen: &mut Option<S>, now: S, query: &str, name: &str) -> Result<(), ExecError> {
    match *seen {
        None => *seen = Some(now),
        Some(s) if s == now => {}
        Some(s) => {
            return Err(ExecError::QueryColumns {
                query: query.into(),
                table: String::new(),
                what: format!("{name} changes scale between pages ({s:?} then {now:?})"),
            })
        }
    }
    Ok(())
}

pub fn date_values<'a>(array: &'a dyn Array, query: &str, name: &str) -> Result<&'a [i32], ExecError> {
    match array.data_type() {
        DataType::Date32 => Ok(array.as_primitive::<Date32Type>().values().as_ref()),
        other => Err(wrong_type(query, name, other, "a date (Date32)")),
    }
}

/// The single byte of every value of a one-character string column, into `out`.
/// TPC-H flags are one character; grouping on that byte avoids hashing strings. A value
/// longer than one byte (or empty) is refused rather than silently grouped by its prefix.
pub fn single_bytes(array: &dyn Array, out: &mut Vec<u8>, query: &str, name: &str) -> Result<(), ExecError> {
    out.clear();
    let all_single = match array.data_type() {
        DataType::Utf8View => {
            // A view holds the length in its low 4 bytes and, for strings of up to 12 bytes,
            // the bytes themselves in the next 12.
            let views = array.as_string_view().views();
            out.extend(views.iter().map(|v| (*v >> 32) as u8));
            views.iter().all(|v| *v as u32 == 1)
        }
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            let (offsets, bytes) = (a.value_offsets(), a.value_data());
            out.extend(offsets[..offsets.len() - 1].iter().map(|o| bytes.get(*o as usize).copied().unwrap_or(0)));
            offsets.windows(2).all(|w| w[1] - w[0] == 1)
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            let (offsets, bytes) = (a.value_offsets(), a.value_data());
            out.extend(offsets[..offsets.len() - 1].iter().map(|o| bytes.get(*o as usize).copied().unwrap_or(0)));
            offsets.windows(2).all(|w| w[1] - w[0] == 1)
        }
        DataType::Dictionary(..) => {
            let plain = cast(array, &DataType::Utf8)?;
            return single_bytes(plain.as_ref(), out, query, name);
        }
        other => return Err(wrong_type(query, name, other, "a string")),
    };
    if !all_single {
        return Err(ExecError::QueryColumns {
            query: query.to_string(),
            table: String::new(),
            what: format!("column {name} holds values that are not one character long"),
        });
    }
    Ok(())
}

/// Calls `each(row, bytes)` for every non-null value of a string column.
pub fn for_each_str(array: &dyn Array, query: &str, name: &str, mut each: impl FnMut(usize, &[u8])) -> Result<(), ExecError> {
    match array.data_type() {
        DataType::Utf8View => {
            let a = array.as_string_view();
            for i in 0..a.len() {
                if a.is_valid(i) {
                    each(i, a.value(i).as_bytes());
                }
            }
        }
        DataType::Utf8 => each_offset_str(array.as_string::<i32>(), &mut each),
        DataType::LargeUtf8 => each_offset_str(array.as_string::<i64>(), &mut each),
        DataType::Dictionary(..) => {
            let plain = cast(array, &DataType::Utf8)?;
            return for_each_str(plain.as_ref(), query, name, each);
        }
        other => return Err(wrong_type(query, name, other, "a string")),
    }
    Ok(())
}

/// `for_each_str` over an offset-addressed string array (Utf8 or LargeUtf8): the bytes
/// are sliced straight out of the value buffer, no `&str` per row.
fn each_offset_str<O: arrow::array::OffsetSizeTrait>(a: &arrow::array::GenericStringArray<O>, each: &mut impl FnMut(usize, &[u8])) {
    let (offsets, bytes) = (a.value_offsets(), a.value_data());
    for i in 0..a.len() {
        if a.is_valid(i) {
            each(i, &bytes[offsets[i].as_usize()..offsets[i + 1].as_usize()]);
        }
    }
}

/// An integer key column value (for the needle's keys).
pub fn int_value(array: &dyn Array, row: usize) -> Option<i64> {
    if array.is_null(row) {
        return None;
    }
    match array.data_type() {
        DataType::Int64 => Some(array.as_primitive::<Int64Type>().value(row)),
        DataType::Int32 => Some(array.as_primitive::<Int32Type>().value(row) as i64),
        _ => None,
    }
}
