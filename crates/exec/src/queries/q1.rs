//! TPC-H Q1, the pricing summary report, exactly as specified (delta = 90 days):
//! every sum is exact (scaled integers in i128), averages are rounded half away from zero
//! to `AVG_SCALE` digits. Groups are keyed by the two one-character flags, so the group
//! lookup is one array index per row instead of a hash of two strings.

use arrow::record_batch::RecordBatch;

use crate::error::ExecError;
use crate::heap_pages::HeapPageSink;
use crate::queries::columns::{column, date_values, decimal_values, null_in_not_null_column, require_no_nulls, same_scale, single_bytes};
use flashscan_storage::HeapPageView;
use crate::queries::Kernel;
use crate::scan::BatchSink;
use crate::segments::{RowGroupSegments, SegmentSink};
use flashscan_storage::columnstore::{ColumnType, SegmentView, StatValue, VecPool};
use flashscan_storage::compression::string_dictionary::StringCodes;
use flashscan_storage::compression::VECTOR_VALUES;
use crate::value::{days_from_civil, QueryResult, Value};

pub const COLUMNS: &[&str] =
    &["l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_shipdate"];
const NAME: &str = "q1";

pub const SQL: &str = "SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty, \
SUM(l_extendedprice) AS sum_base_price, SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price, \
SUM(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, AVG(l_quantity) AS avg_qty, \
AVG(l_extendedprice) AS avg_price, AVG(l_discount) AS avg_disc, COUNT(*) AS count_order \
FROM lineitem WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY \
GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus";

/// date '1998-12-01' - interval '90' day = 1998-09-02, in days since 1970-01-01.
pub const SHIPDATE_DAYS_MAX: i32 = (days_from_civil(1998, 12, 1) - 90) as i32;
/// Digits after the point of the averages.
pub const AVG_SCALE: u8 = 6;

const _: () = assert!(SHIPDATE_DAYS_MAX == days_from_civil(1998, 9, 2) as i32);

#[derive(Debug, Default, Clone, Copy)]
struct Group {
    sum_qty: i128,
    sum_base_price: i128,
    sum_disc_price: i128,
    sum_charge: i128,
    sum_disc: i128,
    count: u64,
}

/// Scales of the four decimal inputs, fixed by the first batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Scales {
    qty: u8,
    price: u8,
    disc: u8,
    tax: u8,
}

pub struct Q1Kernel {
    /// 1 + index into `groups` of each (returnflag, linestatus) byte pair, indexed
    /// `flag << 8 | status`; 0 when the pair has not been seen.
    group_of_key: Vec<u8>,
    /// (key, sums) of each group seen, at most 255 (checked).
    groups: Vec<(u16, Group)>,
    scales: Option<Scales>,
    flags: Vec<u8>,
    statuses: Vec<u8>,
    scratch: [Vec<i128>; 4],
    /// Vector path: per group slot (0: rows the filter drops), i64 partial sums of
    /// [qty, base_price, disc_price, charge, disc, count], flushed into `groups` (i128)
    /// before they could overflow.
    partials: Vec<[i64; 6]>,
    pool: VecPool,
    /// Heap page path: one page's l_quantity, l_extendedprice, l_discount, l_tax and
    /// l_shipdate, reused page after page.
    page_vectors: [Vec<i64>; 5],
}

impl Default for Q1Kernel {
    fn default() -> Q1Kernel {
        Q1Kernel {
            group_of_key: vec![0; 65536],
            groups: Vec::new(),
            scales: None,
            flags: Vec::new(),
            statuses: Vec::new(),
            scratch: Default::default(),
            partials: vec![[0; 6]; 256],
            pool: VecPool::default(),
            page_vectors: Default::default(),
        }
    }
}

impl BatchSink for Q1Kernel {
    fn consume(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        for name in COLUMNS {
            require_no_nulls(column(batch, NAME, name)?.as_ref(), NAME, name)?;
        }
        single_bytes(column(batch, NAME, "l_returnflag")?.as_ref(), &mut self.flags, NAME, "l_returnflag")?;
        single_bytes(column(batch, NAME, "l_linestatus")?.as_ref(), &mut self.statuses, NAME, "l_linestatus")?;
        let shipdate = date_values(column(batch, NAME, "l_shipdate")?.as_ref(), NAME, "l_shipdate")?;
        let [s_qty, s_price, s_disc, s_tax] = &mut self.scratch;
        let (qty, qty_scale) = decimal_values(column(batch, NAME, "l_quantity")?.as_ref(), s_qty, NAME, "l_quantity")?;
        let (price, price_scale) =
            decimal_values(column(batch, NAME, "l_extendedprice")?.as_ref(), s_price, NAME, "l_extendedprice")?;
        let (disc, disc_scale) = decimal_values(column(batch, NAME, "l_discount")?.as_ref(), s_disc, NAME, "l_discount")?;
        let (tax, tax_scale) = decimal_values(column(batch, NAME, "l_tax")?.as_ref(), s_tax, NAME, "l_tax")?;
        let scales = Scales { qty: qty_scale, price: price_scale, disc: disc_scale, tax: tax_scale };
        check_scales(&mut self.scales, scales)?;

        let n = batch.num_rows();
        let rows = Q1Rows { flags: &self.flags[..n], statuses: &self.statuses[..n], shipdate: &shipdate[..n], decimals: [&qty[..n], &price[..n], &disc[..n], &tax[..n]] };
        add_rows(&mut self.group_of_key, &mut self.groups, scales, &rows)
    }
}

/// One batch's or one page's inputs of Q1, row `i` in every slice: the flags' bytes, the
/// ship dates in days, and the unscaled l_quantity, l_extendedprice, l_discount, l_tax.
struct Q1Rows<'a, D, S> {
    flags: &'a [u8],
    statuses: &'a [u8],
    shipdate: &'a [S],
    decimals: [&'a [D]; 4],
}

/// Q1's filter, grouping and exact sums over `rows`: the loop the batch path (i128
/// decimals from Arrow) and the heap page path (i64 read from the page) share.
fn add_rows<D: Copy + Into<i128>, S: Copy + Into<i64>>(
    group_of_key: &mut [u8],
    groups: &mut Vec<(u16, Group)>,
    scales: Scales,
    rows: &Q1Rows<'_, D, S>,
) -> Result<(), ExecError> {
    // 1 at the scale of discount and of tax: (1 - disc) and (1 + tax) stay exact.
    let one_disc = 10i128.pow(scales.disc as u32);
    let one_tax = 10i128.pow(scales.tax as u32);
    let n = rows.flags.len();
    let (flags, statuses, shipdate) = (rows.flags, &rows.statuses[..n], &rows.shipdate[..n]);
    let [qty, price, disc, tax] = rows.decimals;
    let (qty, price, disc, tax) = (&qty[..n], &price[..n], &disc[..n], &tax[..n]);
    for i in 0..n {
        let day: i64 = shipdate[i].into();
        if day > i64::from(SHIPDATE_DAYS_MAX) {
            continue;
        }
        let key = (flags[i] as usize) << 8 | statuses[i] as usize;
        let g = match group_of_key[key] {
            0 => group_for_new_key(group_of_key, groups, key)?,
            slot => &mut groups[slot as usize - 1].1,
        };
        let (qty, price, disc, tax): (i128, i128, i128, i128) = (qty[i].into(), price[i].into(), disc[i].into(), tax[i].into());
        let disc_price = price * (one_disc - disc);
        g.sum_qty += qty;
        g.sum_base_price += price;
        g.sum_disc_price += disc_price;
        g.sum_charge += disc_price * (one_tax + tax);
        g.sum_disc += disc;
        g.count += 1;
    }
    Ok(())
}

/// Positions of Q1's columns in `COLUMNS` (the projection), for the heap page path.
const POSITION_FLAG: usize = 0;
const POSITION_STATUS: usize = 1;
const POSITIONS_DECIMAL: [usize; 4] = [2, 3, 4, 5];
const POSITION_SHIPDATE: usize = 6;

impl HeapPageSink for Q1Kernel {
    /// Q1 over a verified heap page in place: the fixed-width fields (decimals as their
    /// unscaled i64, the ship date) into small reused vectors, the flags' single bytes
    /// straight from the rows, then the shared loop (`add_rows`). NULLs and flags that are
    /// not one character are refused as the batch path refuses them.
    fn consume_page(&mut self, page: &HeapPageView<'_>) -> Result<bool, ExecError> {
        if !page.has_columns(COLUMNS)
            || page.column_type(POSITION_SHIPDATE) != ColumnType::Date32
            || page.column_type(POSITION_FLAG) != ColumnType::Utf8
            || page.column_type(POSITION_STATUS) != ColumnType::Utf8
        {
            return Ok(false);
        }
        let [Some(qty), Some(price), Some(disc), Some(tax)] = POSITIONS_DECIMAL.map(|k| decimal_scale(page.column_type(k))) else {
            return Ok(false);
        };
        let n = page.row_count();
        for (k, name) in COLUMNS.iter().enumerate() {
            if page.non_null_count(k) != n {
                return Err(null_in_not_null_column(NAME, name));
            }
        }
        let scales = Scales { qty, price, disc, tax };
        check_scales(&mut self.scales, scales)?;
        for (out, k) in [(&mut self.flags, POSITION_FLAG), (&mut self.statuses, POSITION_STATUS)] {
            out.clear();
            for row in 0..n {
                match page.var_bytes(k, row) {
                    Some([byte]) => out.push(*byte),
                    _ => return Err(not_one_character(COLUMNS[k])),
                }
            }
        }
        let [v_qty, v_price, v_disc, v_tax, v_ship] = &mut self.page_vectors;
        for (out, k) in [(&mut *v_qty, 2), (&mut *v_price, 3), (&mut *v_disc, 4), (&mut *v_tax, 5), (&mut *v_ship, POSITION_SHIPDATE)] {
            out.clear();
            let read = page.for_each_integer(k, |_, value| out.push(value));
            debug_assert!(read, "decimal_scale and Date32 admit only 4- and 8-byte columns");
        }
        let rows = Q1Rows { flags: &self.flags, statuses: &self.statuses, shipdate: v_ship.as_slice(), decimals: [v_qty.as_slice(), v_price.as_slice(), v_disc.as_slice(), v_tax.as_slice()] };
        add_rows(&mut self.group_of_key, &mut self.groups, scales, &rows)?;
        Ok(true)
    }

    fn consume_batch(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        self.consume(batch)
    }
}

fn group_for_new_key<'a>(
    group_of_key: &mut [u8],
    groups: &'a mut Vec<(u16, Group)>,
    key: usize,
) -> Result<&'a mut Group, ExecError> {
    if groups.len() >= u8::MAX as usize {
        return Err(ExecError::QueryColumns {
            query: NAME.into(),
            table: String::new(),
            what: "more than 255 (l_returnflag, l_linestatus) groups".into(),
        });
    }
    let index = groups.len();
    groups.push((key as u16, Group::default()));
    group_of_key[key] = (index + 1) as u8;
    Ok(&mut groups[index].1)
}

fn check_scales(mine: &mut Option<Scales>, theirs: Scales) -> Result<(), ExecError> {
    same_scale(mine, theirs, NAME, "the decimal columns")
}

/// `sum / count` at `AVG_SCALE` digits (or the sum's, if more), rounded half away from zero.
fn average(sum: i128, sum_scale: u8, count: u64) -> Value {
    debug_assert!(count > 0);
    let scale = AVG_SCALE.max(sum_scale);
    let scaled = sum * 10i128.pow((scale - sum_scale) as u32);
    let count = count as i128;
    let rounded = if scaled >= 0 { (2 * scaled + count) / (2 * count) } else { (2 * scaled - count) / (2 * count) };
    Value::Decimal { value: rounded, scale }
}

impl Kernel for Q1Kernel {
    fn merge(&mut self, other: Self) -> Result<(), ExecError> {
        if let Some(s) = other.scales {
            check_scales(&mut self.scales, s)?;
        }
        for (key, b) in &other.groups {
            let key = *key as usize;
            let a = match self.group_of_key[key] {
                0 => group_for_new_key(&mut self.group_of_key, &mut self.groups, key)?,
                slot => &mut self.groups[slot as usize - 1].1,
            };
            a.sum_qty += b.sum_qty;
            a.sum_base_price += b.sum_base_price;
            a.sum_disc_price += b.sum_disc_price;
            a.sum_charge += b.sum_charge;
            a.sum_disc += b.sum_disc;
            a.count += b.count;
        }
        Ok(())
    }

    fn finish(mut self) -> QueryResult {
        let columns = [
            "l_returnflag",
            "l_linestatus",
            "sum_qty",
            "sum_base_price",
            "sum_disc_price",
            "sum_charge",
            "avg_qty",
            "avg_price",
            "avg_disc",
            "count_order",
        ];
        let mut rows = Vec::new();
        if let Some(s) = self.scales {
            // Keys ascend with (flag, status) bytes: ORDER BY l_returnflag, l_linestatus.
            self.groups.sort_by_key(|(key, _)| *key);
            for (key, g) in &self.groups {
                rows.push(vec![
                    Value::Text(((key >> 8) as u8 as char).to_string()),
                    Value::Text(((key & 0xff) as u8 as char).to_string()),
                    Value::Decimal { value: g.sum_qty, scale: s.qty },
                    Value::Decimal { value: g.sum_base_price, scale: s.price },
                    Value::Decimal { value: g.sum_disc_price, scale: s.price + s.disc },
                    Value::Decimal { value: g.sum_charge, scale: s.price + s.disc + s.tax },
                    average(g.sum_qty, s.qty, g.count),
                    average(g.sum_base_price, s.price, g.count),
                    average(g.sum_disc, s.disc, g.count),
                    Value::Int(g.count as i64),
                ]);
            }
        }
        let rows_total = rows.len() as u64;
        QueryResult { columns: columns.iter().map(|c| c.to_string()).collect(), rows, rows_total }
    }
}

/// A flag column for the vector path: codes a vector at a time and the byte of each code.
enum FlagCodes<'a> {
    /// Dictionary-coded: the codes as stored; strings are never built.
    Dictionary(StringCodes<'a>),
    /// Another codec: the whole column's bytes (the whole-column decoder), the byte as code.
    Bytes { bytes: Vec<u8>, position: usize },
}

impl<'a> FlagCodes<'a> {
    /// Opens column `slot`; returns the codes and the byte of each code.
    fn open(group: &'a RowGroupSegments<'_>, slot: usize, pool: &mut VecPool) -> Result<(FlagCodes<'a>, Vec<u8>), ExecError> {
        let view = &group.columns[slot];
        let name = COLUMNS[slot];
        match view.string_codes().map_err(|error| group.codec_error(slot, error))? {
            Some(codes) => {
                let mut byte_of_code = Vec::with_capacity(codes.entry_count());
                for code in 0..codes.entry_count() {
                    match codes.entry(code) {
                        [byte] => byte_of_code.push(*byte),
                        _ => return Err(not_one_character(name)),
                    }
                }
                Ok((FlagCodes::Dictionary(codes), byte_of_code))
            }
            None => {
                let array = view.decode_array(&group.locations[slot], pool).map_err(flashscan_storage::StorageError::from)?;
                let mut bytes = Vec::new();
                single_bytes(array.as_ref(), &mut bytes, NAME, name)?;
                Ok((FlagCodes::Bytes { bytes, position: 0 }, (0..=255u8).collect()))
            }
        }
    }

    fn next(&mut self, out: &mut [u32; VECTOR_VALUES]) -> Result<usize, flashscan_storage::compression::CodecError> {
        match self {
            FlagCodes::Dictionary(codes) => codes.next_codes(out),
            FlagCodes::Bytes { bytes, position } => {
                let length = VECTOR_VALUES.min(bytes.len() - *position);
                for (code, byte) in out.iter_mut().zip(&bytes[*position..*position + length]) {
                    *code = u32::from(*byte);
                }
                *position += length;
                Ok(length)
            }
        }
    }
}

fn not_one_character(name: &str) -> ExecError {
    ExecError::QueryColumns {
        query: NAME.into(),
        table: String::new(),
        what: format!("column {name} holds values that are not one character long"),
    }
}

/// The segment's [min, max] from its statistics, if it has them.
fn stat_range(view: &SegmentView<'_>) -> Option<(i64, i64)> {
    match (view.header.stats.min, view.header.stats.max) {
        (Some(StatValue::Int64(min)), Some(StatValue::Int64(max))) => Some((min, max)),
        _ => None,
    }
}

fn decimal_scale(column_type: ColumnType) -> Option<u8> {
    match column_type {
        ColumnType::Decimal { scale, .. } if scale >= 0 => Some(scale as u8),
        ColumnType::Int64 | ColumnType::Int32 => Some(0),
        _ => None,
    }
}

/// How many rows' terms can be added into i64 partial sums before one could overflow,
/// from the columns' ranges: every term of a row (qty, price, price·(1 − disc),
/// price·(1 − disc)·(1 + tax), disc, 1) is at most `per_row` in magnitude, so
/// `rows · per_row ≤ i64::MAX` rows are safe. None when not even a vector is.
fn rows_per_flush(ranges: [(i64, i64); 4], one_disc: i128, one_tax: i128) -> Option<usize> {
    let magnitude = |(min, max): (i64, i64)| i128::from(min).abs().max(i128::from(max).abs());
    let [qty, price, disc, tax] = ranges.map(magnitude);
    let disc_price = price.checked_mul(one_disc + disc)?;
    let charge = disc_price.checked_mul(one_tax + tax)?;
    let per_row = qty.max(price).max(disc_price).max(charge).max(disc).max(1);
    let rows = i128::from(i64::MAX) / per_row;
    (rows >= VECTOR_VALUES as i128).then(|| rows.min(usize::MAX as i128) as usize / VECTOR_VALUES * VECTOR_VALUES)
}

/// Slots of the vector columns, in `COLUMNS` order.
const SLOT_FLAG: usize = 0;
const SLOT_STATUS: usize = 1;
const SLOTS_DECIMAL: [usize; 4] = [2, 3, 4, 5];
const SLOT_SHIPDATE: usize = 6;

impl SegmentSink for Q1Kernel {
    /// Q1 a vector at a time: the filter and the group of each row from the shipdate and
    /// the flags' dictionary codes, then the sums in i64 per vector (overflow ruled out by
    /// `rows_per_flush`, values checked against the ranges it assumed), flushed to i128.
    fn consume_segments(&mut self, group: &RowGroupSegments<'_>) -> Result<(), ExecError> {
        let views = &group.columns;
        let scales = SLOTS_DECIMAL.map(|slot| decimal_scale(views[slot].header.column_type));
        let ranges = SLOTS_DECIMAL.map(|slot| stat_range(&views[slot]));
        let vector_path = views.len() == COLUMNS.len()
            && views.iter().all(|view| view.header.null_count == 0)
            && views[SLOT_SHIPDATE].header.column_type == ColumnType::Date32
            && views[SLOT_FLAG].header.column_type == ColumnType::Utf8
            && views[SLOT_STATUS].header.column_type == ColumnType::Utf8
            && scales.iter().all(Option::is_some)
            && ranges.iter().all(Option::is_some);
        let (scales, ranges) = match (vector_path, scales, ranges) {
            (true, [Some(q), Some(p), Some(d), Some(t)], [Some(rq), Some(rp), Some(rd), Some(rt)]) => {
                (Scales { qty: q, price: p, disc: d, tax: t }, [rq, rp, rd, rt])
            }
            // Nulls, other types, no statistics: the whole-column path says what is wrong or answers.
            _ => {
                let batch = group.to_batch(&mut self.pool)?;
                return self.consume(&batch);
            }
        };
        check_scales(&mut self.scales, scales)?;
        let one_disc = 10i64.pow(u32::from(scales.disc));
        let one_tax = 10i64.pow(u32::from(scales.tax));
        let Some(flush_rows) = rows_per_flush(ranges, i128::from(one_disc), i128::from(one_tax)) else {
            let batch = group.to_batch(&mut self.pool)?;
            return self.consume(&batch);
        };
        debug_assert!(flush_rows >= VECTOR_VALUES && flush_rows % VECTOR_VALUES == 0);

        let (mut flags, flag_bytes) = FlagCodes::open(group, SLOT_FLAG, &mut self.pool)?;
        let (mut statuses, status_bytes) = FlagCodes::open(group, SLOT_STATUS, &mut self.pool)?;
        let mut decimals = Vec::with_capacity(4);
        for slot in SLOTS_DECIMAL {
            decimals.push(views[slot].integer_vectors().map_err(|error| group.codec_error(slot, error))?);
        }
        let mut shipdates = views[SLOT_SHIPDATE].integer_vectors().map_err(|error| group.codec_error(SLOT_SHIPDATE, error))?;
        // Group slot of each (flag code, status code) pair seen in this row group; 0 = not yet.
        let status_count = status_bytes.len();
        let mut slot_of_pair = vec![0u8; flag_bytes.len() * status_count];

        let mut flag_codes = [0u32; VECTOR_VALUES];
        let mut status_codes = [0u32; VECTOR_VALUES];
        let mut values = [[0i64; VECTOR_VALUES]; 4];
        let mut shipdate = [0i64; VECTOR_VALUES];
        let mut slots = [0u8; VECTOR_VALUES];
        let mut rows_since_flush = 0usize;
        let mut row = 0usize;
        while row < group.row_count {
            let length = shipdates.next_vector(&mut shipdate).map_err(|error| group.codec_error(SLOT_SHIPDATE, error))?;
            let lengths = [
                flags.next(&mut flag_codes).map_err(|error| group.codec_error(SLOT_FLAG, error))?,
                statuses.next(&mut status_codes).map_err(|error| group.codec_error(SLOT_STATUS, error))?,
            ];
            for (index, (cursor, out)) in decimals.iter_mut().zip(values.iter_mut()).enumerate() {
                let slot = SLOTS_DECIMAL[index];
                if cursor.next_vector(out).map_err(|error| group.codec_error(slot, error))? != length {
                    return Err(group.corrupt(slot, "columns of one row group decode to different lengths".into()));
                }
                // The bound above assumed the statistics: a value outside them is corruption.
                let (min, max) = ranges[index];
                let (low, high) = out[..length].iter().fold((i64::MAX, i64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
                if length > 0 && (low < min || high > max) {
                    return Err(group.corrupt(slot, format!("values [{low}, {high}] outside the segment's range [{min}, {max}]")));
                }
            }
            if length == 0 || lengths != [length, length] {
                return Err(group.corrupt(SLOT_SHIPDATE, "columns of one row group decode to different lengths".into()));
            }
            if rows_since_flush + length > flush_rows {
                self.flush_partials();
                rows_since_flush = 0;
            }
            // Which group each row adds to; rows the filter drops go to slot 0, never read.
            for i in 0..length {
                if shipdate[i] > i64::from(SHIPDATE_DAYS_MAX) {
                    slots[i] = 0;
                    continue;
                }
                let pair = flag_codes[i] as usize * status_count + status_codes[i] as usize;
                let mut slot = slot_of_pair.get(pair).copied().unwrap_or(0);
                if slot == 0 {
                    let (flag, status) = (flag_bytes[flag_codes[i] as usize], status_bytes[status_codes[i] as usize]);
                    let key = (flag as usize) << 8 | status as usize;
                    if self.group_of_key[key] == 0 {
                        group_for_new_key(&mut self.group_of_key, &mut self.groups, key)?;
                    }
                    slot = self.group_of_key[key];
                    slot_of_pair[pair] = slot;
                }
                slots[i] = slot;
            }
            let [qty, price, disc, tax] = &values;
            let partials = &mut self.partials;
            for i in 0..length {
                let partial = &mut partials[slots[i] as usize];
                let disc_price = price[i] * (one_disc - disc[i]);
                partial[0] += qty[i];
                partial[1] += price[i];
                partial[2] += disc_price;
                partial[3] += disc_price * (one_tax + tax[i]);
                partial[4] += disc[i];
                partial[5] += 1;
            }
            rows_since_flush += length;
            row += length;
        }
        self.flush_partials();
        Ok(())
    }
}

impl Q1Kernel {
    /// Adds the i64 partial sums into the groups' i128 sums and clears them.
    fn flush_partials(&mut self) {
        for (index, (_, group)) in self.groups.iter_mut().enumerate() {
            let partial = &mut self.partials[index + 1];
            group.sum_qty += i128::from(partial[0]);
            group.sum_base_price += i128::from(partial[1]);
            group.sum_disc_price += i128::from(partial[2]);
            group.sum_charge += i128::from(partial[3]);
            group.sum_disc += i128::from(partial[4]);
            group.count += partial[5] as u64;
            *partial = [0; 6];
        }
        self.partials[0] = [0; 6];
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Date32Array, Decimal128Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use flashscan_storage::columnstore::{encode_segment, CodecId, ColumnRef, Location, SegmentOptions, SegmentView};
    use proptest::prelude::*;

    use super::*;

    fn decimal(values: Vec<i128>) -> ArrayRef {
        Arc::new(Decimal128Array::from(values).with_precision_and_scale(15, 2).unwrap())
    }

    proptest! {
        /// Q1 a vector at a time (flags as dictionary codes or plain strings, every integer
        /// codec) answers like Q1 over the decoded batch.
        #[test]
        fn segment_q1_equals_batch_q1(
            rows in prop::collection::vec((0usize..3, 0usize..2, 100i128..5001, 90_000i128..10_500_000, 0i128..11, 0i128..9, -200i32..200), 0..4000),
            string_codec in 0usize..3,
            integer_codec in 0usize..6,
            archive in any::<bool>(),
        ) {
            let flags: StringArray = rows.iter().map(|r| Some(["A", "N", "R"][r.0])).collect();
            let statuses: StringArray = rows.iter().map(|r| Some(["F", "O"][r.1])).collect();
            let arrays: Vec<ArrayRef> = vec![
                Arc::new(flags),
                Arc::new(statuses),
                decimal(rows.iter().map(|r| r.2).collect()),
                decimal(rows.iter().map(|r| r.3).collect()),
                decimal(rows.iter().map(|r| r.4).collect()),
                decimal(rows.iter().map(|r| r.5).collect()),
                Arc::new(Date32Array::from(rows.iter().map(|r| SHIPDATE_DAYS_MAX + r.6).collect::<Vec<_>>())),
            ];
            let schema = Arc::new(Schema::new(COLUMNS.iter().zip(&arrays).map(|(name, a)| Field::new(*name, a.data_type().clone(), false)).collect::<Vec<_>>()));
            let string_codecs = [None, Some(CodecId::Dictionary), Some(CodecId::Plain)];
            let integer_codecs = [None, Some(CodecId::Plain), Some(CodecId::Bitpack), Some(CodecId::FastLanes), Some(CodecId::Rle), Some(CodecId::Dictionary)];
            let mut segments = Vec::new();
            for (slot, array) in arrays.iter().enumerate() {
                let forced = if slot < 2 { string_codecs[string_codec] } else { integer_codecs[integer_codec] };
                let segment = encode_segment(array.as_ref(), &ColumnRef { index: slot, name: COLUMNS[slot].into() }, SegmentOptions { archive, forced_codec: forced });
                segments.push(segment.unwrap().bytes);
            }
            let location = Location::in_memory();
            let columns = segments.iter().map(|bytes| SegmentView::open(bytes, &location).unwrap()).collect();
            let group = RowGroupSegments { row_count: rows.len(), schema: schema.clone(), columns, locations: vec![location.clone(); COLUMNS.len()] };
            let mut by_segments = Q1Kernel::default();
            by_segments.consume_segments(&group).unwrap();
            // Twice: the i64 partials must be flushed and cleared between row groups.
            by_segments.consume_segments(&group).unwrap();
            let mut by_batch = Q1Kernel::default();
            let batch = RecordBatch::try_new(schema, arrays).unwrap();
            by_batch.consume(&batch).unwrap();
            by_batch.consume(&batch).unwrap();
            prop_assert_eq!(by_segments.finish(), by_batch.finish());
        }
    }

    #[test]
    fn flush_interval_rules_out_overflow() {
        // TPC-H ranges at scale 2: a row's largest term is the charge, ~1.2e11.
        let rows = rows_per_flush([(100, 5000), (90_000, 10_500_000), (0, 10), (0, 8)], 100, 100).unwrap();
        assert!(rows >= 1 << 20, "{rows}");
        assert!(rows as i128 * 10_500_000 * 110 * 108 <= i128::from(i64::MAX));
        // Ranges so wide that not one vector is safe: the i128 batch path instead.
        assert_eq!(rows_per_flush([(0, 1), (i64::MIN, i64::MAX), (0, 1), (0, 1)], 100, 100), None);
    }
}
