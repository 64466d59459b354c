//! The live counters as SQL: `flashscan_stats_history` (one row per sampled second) and
//! `sys.dm_io_virtual_file_stats` (per file, cumulative like SQL Server's view, with the
//! last second's deltas beside). Each is built from the sampler's ring when scanned.

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, RecordBatch, StringArray, TimestampMillisecondArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::datasource::{MemTable, TableProvider, TableType};
use datafusion::error::Result;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::config::SAMPLE_RING_SECONDS;
use crate::sampler::{Sample, Sampler};

#[derive(Debug, Clone, Copy)]
pub enum StatsView {
    History,
    FileStats,
}

pub struct StatsTable {
    view: StatsView,
    sampler: Arc<Sampler>,
    schema: SchemaRef,
}

impl std::fmt::Debug for StatsTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsTable").field("view", &self.view).finish()
    }
}

fn time_field() -> Field {
    Field::new("sample_time", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), false)
}

type U64Col = (&'static str, fn(&Sample) -> u64);
type F64Col = (&'static str, fn(&Sample) -> f64);

const HISTORY_U64: [U64Col; 38] = [
    ("reads", |s| s.reads),
    ("bytes_read", |s| s.bytes_read),
    ("read_stall_us", |s| s.read_stall_us),
    ("writes", |s| s.writes),
    ("bytes_written", |s| s.bytes_written),
    ("queries_started", |s| s.queries_started),
    ("queries_completed", |s| s.queries_completed),
    ("queries_failed", |s| s.queries_failed),
    ("queries_canceled", |s| s.queries_canceled),
    ("queue_timeouts", |s| s.queue_timeouts),
    ("connections_refused", |s| s.connections_refused),
    ("rows_sent", |s| s.rows_sent),
    ("queries_running", |s| s.queries_running),
    ("queries_queued", |s| s.queries_queued),
    ("connections_open", |s| s.connections_open),
    ("reads_total", |s| s.reads_total),
    ("bytes_read_total", |s| s.bytes_read_total),
    ("queries_completed_total", |s| s.queries_completed_total),
    ("queries_failed_total", |s| s.queries_failed_total),
    ("rows_sent_total", |s| s.rows_sent_total),
    ("connections_total", |s| s.connections_total),
    ("statements_committed", |s| s.statements_committed),
    ("rows_inserted", |s| s.rows_inserted),
    ("commits", |s| s.commits),
    ("log_flushes", |s| s.log_flushes),
    ("log_bytes_written", |s| s.log_bytes_written),
    ("pool_hits", |s| s.pool_hits),
    ("pool_misses", |s| s.pool_misses),
    ("pool_reads", |s| s.pool_reads),
    ("pool_evictions", |s| s.pool_evictions),
    ("writes_waiting", |s| s.writes_waiting),
    ("statements_committed_total", |s| s.statements_committed_total),
    ("rows_inserted_total", |s| s.rows_inserted_total),
    ("commits_total", |s| s.commits_total),
    ("log_flushes_total", |s| s.log_flushes_total),
    ("pool_hits_total", |s| s.pool_hits_total),
    ("pool_reads_total", |s| s.pool_reads_total),
    ("pool_evictions_total", |s| s.pool_evictions_total),
];

const HISTORY_F64: [F64Col; 18] = [
    ("interval_s", |s| s.interval_s),
    ("read_iops", |s| s.read_iops),
    ("read_mb_per_s", |s| s.read_mb_per_s),
    ("read_latency_us_avg", |s| s.read_latency_us_avg),
    ("queue_wait_ms", |s| s.queue_wait_ms),
    ("query_latency_ms_p50", |s| s.query_latency_ms_p50),
    ("query_latency_ms_p99", |s| s.query_latency_ms_p99),
    ("query_latency_ms_max", |s| s.query_latency_ms_max),
    ("scan_buffer_mb_in_use", |s| s.scan_buffer_mb_in_use),
    ("commits_per_s", |s| s.commits_per_s),
    ("log_flushes_per_s", |s| s.log_flushes_per_s),
    ("log_flush_latency_us_avg", |s| s.log_flush_latency_us_avg),
    ("pool_hit_ratio", |s| s.pool_hit_ratio),
    ("wait_io_ms", |s| s.wait_io_ms),
    ("wait_latch_ms", |s| s.wait_latch_ms),
    ("wait_queue_ms", |s| s.wait_queue_ms),
    ("wait_commit_ms", |s| s.wait_commit_ms),
    ("io_queue_depth_avg", |s| s.io_queue_depth_avg),
];

fn history_schema() -> SchemaRef {
    let mut fields = vec![time_field()];
    fields.extend(HISTORY_F64.iter().map(|(n, _)| Field::new(*n, DataType::Float64, false)));
    fields.extend(HISTORY_U64.iter().map(|(n, _)| Field::new(*n, DataType::UInt64, false)));
    Arc::new(Schema::new(fields))
}

fn file_stats_schema() -> SchemaRef {
    let u = |n: &str| Field::new(n, DataType::UInt64, false);
    let f = |n: &str| Field::new(n, DataType::Float64, false);
    Arc::new(Schema::new(vec![
        Field::new("file_name", DataType::Utf8, false),
        u("num_of_reads"),
        u("num_of_bytes_read"),
        f("io_stall_read_ms"),
        u("num_of_writes"),
        u("num_of_bytes_written"),
        f("io_stall_write_ms"),
        f("io_stall_ms"),
        time_field(),
        f("interval_s"),
        u("reads_last_interval"),
        u("bytes_read_last_interval"),
        f("read_latency_us_avg_last_interval"),
    ]))
}

impl StatsTable {
    pub fn new(view: StatsView, sampler: Arc<Sampler>) -> StatsTable {
        let schema = match view {
            StatsView::History => history_schema(),
            StatsView::FileStats => file_stats_schema(),
        };
        StatsTable { view, sampler, schema }
    }

    fn batch(&self) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
        match self.view {
            StatsView::History => {
                let samples = self.sampler.history(SAMPLE_RING_SECONDS);
                let mut columns: Vec<ArrayRef> = vec![Arc::new(TimestampMillisecondArray::from_iter_values(samples.iter().map(|s| s.unix_ms as i64)).with_timezone("UTC"))];
                columns.extend(HISTORY_F64.iter().map(|(_, f)| Arc::new(Float64Array::from_iter_values(samples.iter().map(f))) as ArrayRef));
                columns.extend(HISTORY_U64.iter().map(|(_, f)| Arc::new(UInt64Array::from_iter_values(samples.iter().map(f))) as ArrayRef));
                RecordBatch::try_new(self.schema.clone(), columns)
            }
            StatsView::FileStats => {
                let latest = self.sampler.latest().unwrap_or_default();
                let files = &latest.files;
                let ms = |us: u64| us as f64 / 1000.0;
                let n = files.len();
                RecordBatch::try_new(
                    self.schema.clone(),
                    vec![
                        Arc::new(StringArray::from_iter_values(files.iter().map(|f| f.file.as_str()))),
                        Arc::new(UInt64Array::from_iter_values(files.iter().map(|f| f.reads_total))),
                        Arc::new(UInt64Array::from_iter_values(files.iter().map(|f| f.bytes_read_total))),
                        Arc::new(Float64Array::from_iter_values(files.iter().map(|f| ms(f.read_stall_us_total)))),
                        Arc::new(UInt64Array::from_iter_values(files.iter().map(|f| f.writes_total))),
                        Arc::new(UInt64Array::from_iter_values(files.iter().map(|f| f.bytes_written_total))),
                        Arc::new(Float64Array::from_iter_values(files.iter().map(|f| ms(f.write_stall_us_total)))),
                        Arc::new(Float64Array::from_iter_values(files.iter().map(|f| ms(f.read_stall_us_total + f.write_stall_us_total)))),
                        Arc::new(TimestampMillisecondArray::from_iter_values(std::iter::repeat_n(latest.unix_ms as i64, n)).with_timezone("UTC")),
                        Arc::new(Float64Array::from_iter_values(std::iter::repeat_n(latest.interval_s, n))),
                        Arc::new(UInt64Array::from_iter_values(files.iter().map(|f| f.reads))),
                        Arc::new(UInt64Array::from_iter_values(files.iter().map(|f| f.bytes_read))),
                        Arc::new(Float64Array::from_iter_values(files.iter().map(|f| if f.reads == 0 { 0.0 } else { f.read_stall_us as f64 / f.reads as f64 }))),
                    ],
                )
            }
        }
    }
}

#[async_trait]
impl TableProvider for StatsTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(&self, state: &dyn Session, projection: Option<&Vec<usize>>, filters: &[Expr], limit: Option<usize>) -> Result<Arc<dyn ExecutionPlan>> {
        let batch = self.batch()?;
        let table = MemTable::try_new(self.schema.clone(), vec![vec![batch]])?;
        table.scan(state, projection, filters, limit).await
    }
}
