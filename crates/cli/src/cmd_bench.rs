//! `flashscan bench …`: the articles' measurement tables, run on this machine.

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// The CPU cost of I/O (seed 002): µs per page for scans at 1..323 rows per page, page
    /// eviction, and key lookups at 10..10,000 rows per query, sync vs prefetch.
    Costs(crate::cmd_bench_costs::BenchCostsArgs),
    /// Seed 001's table: size, and COUNT of 11 columns / SUM of 4 cold and warm, for the
    /// heap, row, page, columnstore and columnstore_archive formats of one table.
    Compression(crate::cmd_bench_compression::BenchCompressionArgs),
    /// Singleton (or K-row) inserts from N threads for S seconds through the embedded write
    /// path: rows/s, commits per log flush, commit latency, CPU µs per row.
    Inserts(crate::cmd_bench_inserts::BenchInsertsArgs),
    /// Seed 003's experiment: a cold scan alone, then beside a checkpoint of >= 1 GB at
    /// --max-async-io 1, 8, 32, 255 (pacing off and on): scan MB/s kept, checkpoint time.
    Checkpoint(crate::cmd_bench_checkpoint::BenchCheckpointArgs),
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Costs(args) => crate::cmd_bench_costs::run_bench_costs(args),
        BenchCommand::Compression(args) => crate::cmd_bench_compression::run(args),
        BenchCommand::Inserts(args) => crate::cmd_bench_inserts::run(args),
        BenchCommand::Checkpoint(args) => crate::cmd_bench_checkpoint::run_bench(args),
    }
}
