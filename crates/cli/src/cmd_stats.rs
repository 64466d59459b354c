//! `flashscan stats DB [--reset] [--json]`: the buffer pool and wait counters every
//! command has added since the counters started (or were reset).

use std::path::PathBuf;

use flashscan_index::PersistedStats;

use crate::exit::index_error;
use crate::exit::bad_input;

#[derive(clap::Args)]
pub struct StatsArgs {
    /// Database directory.
    pub db: PathBuf,
    /// Zero the counters (prints them as they were first).
    #[arg(long)]
    pub reset: bool,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: StatsArgs) -> anyhow::Result<()> {
    // Stats live only in a database: a directory without a catalog is refused, never
    // written into (`PersistedStats` checks it too).
    if !flashscan_storage::Catalog::exists(&args.db) {
        return Err(bad_input(format!("{} is not a flashscan database (no catalog): pass a database directory", args.db.display())));
    }
    let stats = PersistedStats::read(&args.db).map_err(index_error)?;
    if args.json {
        crate::print_json(&stats)?;
    } else {
        let c = &stats.counters;
        let ms = |ns: u64| ns as f64 / 1e6;
        println!("buffer pool counters of {} ({} runs since unix time {})", args.db.display(), stats.runs_count, stats.since_unix_seconds);
        println!("  pool size (largest)  {:>14.1} MB", stats.pool_bytes_max as f64 / 1e6);
        println!("  page requests        {:>14}", c.hits_count + c.misses_count);
        println!("  hits                 {:>14}   ({:.1} %)", c.hits_count, 100.0 * c.hit_ratio());
        println!("  misses               {:>14}", c.misses_count);
        println!("  reads                {:>14}   ({:.1} MB)", c.reads_count, c.read_bytes as f64 / 1e6);
        println!("  pages installed      {:>14}", c.pages_installed_count);
        println!("  evictions            {:>14}", c.evictions_count);
        println!("  verify failures      {:>14}", c.verify_failures_count);
        println!("  page I/O waits       {:>14}   ({:.3} ms)", c.io_waits_count, ms(c.io_wait_ns));
        println!("  page latch waits     {:>14}   ({:.3} ms)", c.latch_waits_count, ms(c.latch_wait_ns));
    }
    if args.reset {
        PersistedStats::reset(&args.db).map_err(index_error)?;
        if !args.json {
            println!("counters reset");
        }
    }
    Ok(())
}
