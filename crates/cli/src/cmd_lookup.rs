//! `flashscan lookup DB TABLE --index NAME (--keys K[,K…] | --random N [--seed S]) [--cold]
//! [--io-size 8K|64K] [--prefetch-from N] [--depth N] [--json]`: index seeks, then the rows
//! from the heap, one read at a time below the prefetch threshold and as a window of
//! asynchronous reads at or above it; reports rows/s, reads/s and CPU per row and per read.
//!
//! Both modes run the lookup twice and report the second pass. Warm (default): the second
//! pass runs from the buffer pool. Cold (`--cold`): files are opened O_DIRECT and the heap
//! pages are dropped from the pool between the passes, so every heap page of the measured
//! pass comes from the device; the index nodes stay in memory.

use std::path::PathBuf;

use flashscan_buffer::BufferPool;
use flashscan_index::lookup::session::{LOOKUP_DEPTH_DEFAULT, PREFETCH_FROM_ROWS_DEFAULT};
use flashscan_index::{KeyQuery, LookupOptions, LookupSession, LookupStats, PersistedStats};
use flashscan_io::EngineKind;
use flashscan_storage::heap::row_codec::{decode_row, RowLayout, Value};
use serde::Serialize;

use crate::exit::index_error;
use crate::exit::bad_input;

#[derive(clap::Args)]
pub struct LookupArgs {
    /// Database directory.
    pub db: PathBuf,
    /// Table to read rows from.
    pub table: String,
    /// Index to seek.
    #[arg(long)]
    pub index: String,
    /// Keys, comma-separated; composite keys as a:b (a prefix a finds every a:*).
    #[arg(long, value_delimiter = ',', conflicts_with = "random", required_unless_present = "random")]
    pub keys: Vec<String>,
    /// Look up N keys drawn at random from the index.
    #[arg(long)]
    pub random: Option<usize>,
    /// Seed of --random.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Read the heap pages from the device (O_DIRECT, not in the pool); the index stays in memory.
    #[arg(long)]
    pub cold: bool,
    /// Read size: 8K (the page) or 64K (the extent around it).
    #[arg(long, default_value = "8K")]
    pub io_size: String,
    /// Lookups finding at least this many rows prefetch; fewer read one page at a time.
    #[arg(long, default_value_t = PREFETCH_FROM_ROWS_DEFAULT)]
    pub prefetch_from: u32,
    /// Reads in flight when prefetching.
    #[arg(long, default_value_t = LOOKUP_DEPTH_DEFAULT)]
    pub depth: u32,
    /// Buffer pool size (e.g. 512MB, 4GB).
    #[arg(long, default_value = "1GB")]
    pub buffer_pool: String,
    /// I/O engine: auto, uring, psync.
    #[arg(long, default_value = "auto")]
    pub engine: String,
    /// Rows to print (0: none).
    #[arg(long, default_value_t = 10)]
    pub show: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// "8K", "64KB", "512MB", "4GB", "4096" → bytes (binary multiples).
pub fn parse_size_bytes(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_uppercase();
    let t = t.strip_suffix("IB").map(|s| s.to_string()).unwrap_or(t);
    let t = t.strip_suffix('B').unwrap_or(&t);
    let (digits, mult) = match t.chars().last()? {
        'K' => (&t[..t.len() - 1], 1u64 << 10),
        'M' => (&t[..t.len() - 1], 1 << 20),
        'G' => (&t[..t.len() - 1], 1 << 30),
        'T' => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let v: f64 = digits.trim().parse().ok()?;
    if !(v.is_finite() && v > 0.0) {
        return None;
    }
    Some((v * mult as f64) as u64)
}

#[derive(Serialize)]
struct Derived {
    rows_per_s: f64,
    reads_per_s: f64,
    cpu_us_per_row: f64,
    cpu_us_per_read: f64,
}

#[derive(Serialize)]
struct Output<'a> {
    table: &'a str,
    index: &'a str,
    cold: bool,
    stats: &'a LookupStats,
    derived: Derived,
    rows: Vec<serde_json::Value>,
}

fn value_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Int32(x) | Value::Date32(x) => (*x).into(),
        Value::Int64(x) | Value::Decimal(x) => (*x).into(),
        Value::Float64(x) => (*x).into(),
        Value::Utf8(s) => s.clone().into(),
        Value::Boolean(b) => (*b).into(),
        Value::UInt64(x) => (*x).into(),
        // Past 2^53 a JSON number loses digits: wide decimals as strings.
        Value::Int128(x) => x.to_string().into(),
        Value::Binary(b) => b.iter().map(|byte| format!("{byte:02x}")).collect::<String>().into(),
    }
}

pub fn run(args: LookupArgs) -> anyhow::Result<()> {
    let io_size_bytes = match parse_size_bytes(&args.io_size) {
        Some(8192) => 8192,
        Some(65536) => 65536,
        _ => return Err(bad_input(format!("--io-size {}: use 8K or 64K", args.io_size))),
    };
    let pool_bytes = parse_size_bytes(&args.buffer_pool).ok_or_else(|| bad_input(format!("--buffer-pool {:?}: give a size like 512MB or 4GB", args.buffer_pool)))?;
    let engine = EngineKind::parse(&args.engine).ok_or_else(|| bad_input(format!("--engine {:?}: use auto, uring or psync", args.engine)))?;
    // The process's one pool, at the size asked: the lookup's pages and any other page
    // path of this process (key sampling, a dirty page) meet in it.
    let pool = BufferPool::init_global(pool_bytes).map_err(crate::exit::classify)?;
    let options = LookupOptions { prefetch_from_rows: args.prefetch_from, depth: args.depth, io_size_bytes, direct: args.cold, engine, single_thread_engine: true };
    let mut notice = |m: &str| eprintln!("flashscan: {m}");
    crate::cmd_write::checkpoint_if_unflushed(&args.db, &args.table, "flashscan lookup")?;
    let mut session = LookupSession::open(&args.db, &args.table, &args.index, pool, options, &mut notice).map_err(index_error)?;
    let keys: Vec<Vec<u8>> = match args.random {
        Some(n) => session.tree.sample_keys(n, args.seed).map_err(index_error)?,
        None => args.keys.iter().map(|k| session.schema.parse_key(k)).collect::<Result<_, _>>().map_err(index_error)?,
    };
    let query = KeyQuery::Keys(keys);
    // A first pass loads the index nodes on the keys' paths (and the heap pages); cold
    // then drops the heap pages, so the measured pass reads every heap page from the
    // device while the index is in memory, as its upper levels and hot leaves usually are.
    session.run(&query, &mut |_, _| {}).map_err(index_error)?;
    if args.cold {
        session.clear_heap_pages().map_err(index_error)?;
    }
    let layout = RowLayout::new(&session.table.columns);
    let mut shown: Vec<Vec<Value>> = Vec::new();
    let mut decode_error = None;
    let show = args.show;
    let stats = session
        .run(&query, &mut |_, row| {
            if shown.len() < show {
                match decode_row(&layout, row) {
                    Ok(r) => shown.push(r),
                    Err(e) => decode_error = Some(e),
                }
            }
        })
        .map_err(index_error)?;
    if let Some(e) = decode_error {
        return Err(bad_input(format!("a row of table {} does not decode: {e}", args.table)));
    }
    let total = pool.snapshot();
    let names: Vec<String> = session.table.columns.iter().map(|c| c.name.clone()).collect();
    drop(session);
    if let Err(e) = PersistedStats::record(&args.db, &total, pool.budget_bytes()) {
        eprintln!("flashscan: could not record buffer pool stats: {e}");
    }
    let derived = Derived { rows_per_s: stats.rows_per_s(), reads_per_s: stats.reads_per_s(), cpu_us_per_row: stats.cpu_us_per_row(), cpu_us_per_read: stats.cpu_us_per_read() };
    if args.json {
        let rows = shown.iter().map(|r| serde_json::Value::Array(r.iter().map(value_json).collect())).collect();
        let out = Output { table: &args.table, index: &args.index, cold: args.cold, stats: &stats, derived, rows };
        crate::print_json(&out)?;
        return Ok(());
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    println!(
        "lookup {}.{}: {} keys -> {} rows on {} pages ({}, depth {}, {} KB reads, {} engine, {})",
        args.table,
        args.index,
        stats.keys_count,
        stats.rows_count,
        stats.heap_pages_count,
        stats.mode,
        stats.depth,
        stats.io_size_bytes / 1024,
        stats.engine,
        if args.cold { "cold: O_DIRECT, empty pool" } else { "warm: from the buffer pool" }
    );
    if stats.deleted_rows_skipped > 0 {
        println!("  {} index entries name rows a DELETE removed: skipped, not read", stats.deleted_rows_skipped);
    }
    println!(
        "  elapsed {:.3} ms   {:.0} rows/s   {:.0} reads/s   reads {} (heap {}, {:.1} MB)",
        ms(stats.elapsed_ns),
        derived.rows_per_s,
        derived.reads_per_s,
        stats.reads_count,
        stats.heap_reads_count,
        stats.read_bytes as f64 / 1e6
    );
    println!("  CPU {:.3} ms: {:.2} µs per row, {:.2} µs per read", ms(stats.cpu_ns), derived.cpu_us_per_row, derived.cpu_us_per_read);
    let b = &stats.buffer;
    println!(
        "  buffer pool: {} hits, {} misses, {} evictions, I/O wait {:.3} ms, latch wait {:.3} ms",
        b.hits_count,
        b.misses_count,
        b.evictions_count,
        ms(stats.io_wait_ns.max(b.io_wait_ns)),
        ms(b.latch_wait_ns)
    );
    if !shown.is_empty() {
        println!("  first {} rows ({}):", shown.len(), names.join(", "));
        for r in &shown {
            let cells: Vec<String> = r.iter().map(format_value).collect();
            println!("    {}", cells.join(" | "));
        }
    }
    Ok(())
}

fn format_value(v: &Value) -> String {
    let s = match v {
        Value::Null => "NULL".to_string(),
        Value::Int32(x) | Value::Date32(x) => x.to_string(),
        Value::Int64(x) | Value::Decimal(x) => x.to_string(),
        Value::Float64(x) => x.to_string(),
        Value::Utf8(s) => s.clone(),
        Value::Boolean(b) => b.to_string(),
        Value::UInt64(x) => x.to_string(),
        Value::Int128(x) => x.to_string(),
        Value::Binary(b) => b.iter().map(|byte| format!("{byte:02x}")).collect(),
    };
    if s.len() > 24 {
        format!("{}…", &s[..s.char_indices().nth(24).map(|(i, _)| i).unwrap_or(s.len())])
    } else {
        s
    }
}
