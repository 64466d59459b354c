//! TPC-H Q1, the pricing summary report, exactly as specified (delta = 90 days):
//! every sum is exact (scaled integers in i128), averages are rounded half away from zero
//! to `AVG_SCALE` digits. Groups are keyed by the two one-character flags, so the group
//! lookup is one array index per row instead of a hash of two strings.

use arrow::record_batch::RecordBatch;

use crate::error::ExecError;
use crate::queries::columns::{column, date_values, decimal_values, require_no_nulls, single_bytes};
use crate::queries::Kernel;
use crate::scan::BatchSink;
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

        // 1 at the scale of discount and of tax: (1 - disc) and (1 + tax) stay exact.
        let one_disc = 10i128.pow(disc_scale as u32);
        let one_tax = 10i128.pow(tax_scale as u32);
        let n = batch.num_rows();
        let (flags, statuses) = (&self.flags[..n], &self.statuses[..n]);
        let (shipdate, qty, price, disc, tax) = (&shipdate[..n], &qty[..n], &price[..n], &disc[..n], &tax[..n]);
        for i in 0..n {
            if shipdate[i] > SHIPDATE_DAYS_MAX {
                continue;
            }
            let key = (flags[i] as usize) << 8 | statuses[i] as usize;
            let g = match self.group_of_key[key] {
                0 => group_for_new_key(&mut self.group_of_key, &mut self.groups, key)?,
                slot => &mut self.groups[slot as usize - 1].1,
            };
            let disc_price = price[i] * (one_disc - disc[i]);
            g.sum_qty += qty[i];
            g.sum_base_price += price[i];
            g.sum_disc_price += disc_price;
            g.sum_charge += disc_price * (one_tax + tax[i]);
            g.sum_disc += disc[i];
            g.count += 1;
        }
        Ok(())
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
    match *mine {
        None => *mine = Some(theirs),
        Some(s) if s == theirs => {}
        Some(s) => {
            return Err(ExecError::QueryColumns {
                query: NAME.into(),
                table: String::new(),
                what: format!("decimal scales change between pages ({s:?} then {theirs:?})"),
            })
        }
    }
    Ok(())
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
