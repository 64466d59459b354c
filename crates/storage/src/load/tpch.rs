//! TPC-H tables from tpchgen-arrow (bit-identical to dbgen), cut into parts that load
//! in parallel (`part` of `part_count`, as dbgen's -C/-S).

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use tpchgen::generators::{CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator, PartSuppGenerator, RegionGenerator, SupplierGenerator};
use tpchgen_arrow::{CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow, SupplierArrow};

use super::source::{BatchIter, PartSource, TableSource};
use crate::error::StorageError;

pub const TPCH_TABLES: [&str; 8] = ["lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region"];

/// Rows a generator part produces per batch.
const TPCH_BATCH_ROWS: usize = 8192;
/// Target rows per part: parts are the unit of parallel work and of load balance.
const TPCH_PART_ROWS: u64 = 500_000;
pub const SCALE_FACTOR_MAX: f64 = 100_000.0;

/// Approximate rows at scale factor 1 (exact for all but lineitem).
fn rows_at_sf1(table: &str) -> Option<u64> {
    Some(match table {
        "lineitem" => 6_001_215,
        "orders" => 1_500_000,
        "customer" => 150_000,
        "part" => 200_000,
        "partsupp" => 800_000,
        "supplier" => 10_000,
        "nation" => return Some(25),
        "region" => return Some(5),
        _ => return None,
    })
}

fn wrap<I>(iter: I) -> BatchIter
where
    I: Iterator<Item = Result<RecordBatch, arrow::error::ArrowError>> + Send + 'static,
{
    Box::new(iter.map(|r| r.map_err(|e| StorageError::Worker(format!("tpchgen: {e}")))))
}

/// The source for one TPC-H table at `scale_factor`, cut into parts for `threads` workers.
pub fn tpch_source(table: &str, scale_factor: f64, threads: usize) -> Result<TableSource, StorageError> {
    let name = table.to_ascii_lowercase();
    if !(scale_factor > 0.0 && scale_factor <= SCALE_FACTOR_MAX) {
        return Err(StorageError::InvalidArgument(format!("scale factor {scale_factor} out of range: use a number above 0 and at most {SCALE_FACTOR_MAX}")));
    }
    let Some(sf1_rows) = rows_at_sf1(&name) else {
        return Err(StorageError::InvalidArgument(format!("unknown TPC-H table {table:?}: choose from {}", TPCH_TABLES.join(", "))));
    };
    let fixed_size = matches!(name.as_str(), "nation" | "region");
    let rows_estimate = if fixed_size { sf1_rows } else { (sf1_rows as f64 * scale_factor).ceil() as u64 };
    let part_count: i32 = if fixed_size || rows_estimate < 100_000 {
        1
    } else {
        (rows_estimate.div_ceil(TPCH_PART_ROWS) as usize).max(threads).min(4096) as i32
    };
    let schema: SchemaRef = match name.as_str() {
        "lineitem" => LineItemArrow::schema_ref(),
        "orders" => OrderArrow::schema_ref(),
        "customer" => CustomerArrow::schema_ref(),
        "part" => PartArrow::schema_ref(),
        "partsupp" => PartSuppArrow::schema_ref(),
        "supplier" => SupplierArrow::schema_ref(),
        "nation" => NationArrow::schema_ref(),
        _ => RegionArrow::schema_ref(),
    }
    .clone();
    let sf = scale_factor;
    let mut parts: Vec<PartSource> = Vec::with_capacity(part_count as usize);
    for part in 1..=part_count {
        let name = name.clone();
        let n = part_count;
        parts.push(Box::new(move || {
            Ok(match name.as_str() {
                "lineitem" => wrap(LineItemArrow::new(LineItemGenerator::new(sf, part, n)).with_batch_size(TPCH_BATCH_ROWS)),
                "orders" => wrap(OrderArrow::new(OrderGenerator::new(sf, part, n)).with_batch_size(TPCH_BATCH_ROWS)),
                "customer" => wrap(CustomerArrow::new(CustomerGenerator::new(sf, part, n)).with_batch_size(TPCH_BATCH_ROWS)),
                "part" => wrap(PartArrow::new(PartGenerator::new(sf, part, n)).with_batch_size(TPCH_BATCH_ROWS)),
                "partsupp" => wrap(PartSuppArrow::new(PartSuppGenerator::new(sf, part, n)).with_batch_size(TPCH_BATCH_ROWS)),
                "supplier" => wrap(SupplierArrow::new(SupplierGenerator::new(sf, part, n)).with_batch_size(TPCH_BATCH_ROWS)),
                "nation" => wrap(NationArrow::new(NationGenerator::new(sf, part, n)).with_batch_size(TPCH_BATCH_ROWS)),
                _ => wrap(RegionArrow::new(RegionGenerator::new(sf, part, n)).with_batch_size(TPCH_BATCH_ROWS)),
            })
        }));
    }
    Ok(TableSource { name, schema, parts, description: format!("tpch sf={scale_factor}"), rows_estimate })
}
