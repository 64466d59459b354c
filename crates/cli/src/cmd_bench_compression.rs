//! `flashscan bench compression DB TABLE [--formats …] [--cold-only|--warm-only]
//! [--csv FILE] [--chart FILE]`: seed 001's comparison of storage formats, measured here.
//! The measuring lives in `flashscan_exec::bench_compression`; this file parses flags and
//! prints the table, the CSV and the SVG chart.

use std::path::{Path, PathBuf};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, Table};
use flashscan_exec::bench_compression::{self, CompressionBenchOptions, CompressionReport, FORMATS};
use flashscan_exec::{BuiltinQuery, CacheMode, ScanOptions};
use plotters::prelude::*;

use crate::cmd_scan::exec_error;
use crate::exit::bad_input;

#[derive(clap::Args)]
pub struct BenchCompressionArgs {
    /// Database directory (made by `flashscan load`).
    pub db: PathBuf,
    /// The table to measure; its copies TABLE__FORMAT are made beside it and kept.
    pub table: String,
    /// Formats, comma separated: none,row,page,columnstore,columnstore_archive.
    #[arg(long, value_delimiter = ',', default_value = "none,row,page,columnstore,columnstore_archive")]
    pub formats: Vec<String>,
    /// Built-in queries, comma separated (count11 and sum4 as in the article; q1, count, needle too).
    #[arg(long, value_delimiter = ',', default_value = "count11,sum4")]
    pub queries: Vec<String>,
    /// Cold runs only (page cache dropped, O_DIRECT).
    #[arg(long, conflicts_with = "warm_only")]
    pub cold_only: bool,
    /// Warm runs only (data in the page cache).
    #[arg(long)]
    pub warm_only: bool,
    /// Rounds; figures are medians. Formats are interleaved within each round.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Rebuild the format copies even if they exist.
    #[arg(long)]
    pub rebuild: bool,
    /// Column store rows per row group (default 1048576).
    #[arg(long, value_name = "ROWS")]
    pub row_group_rows: Option<usize>,
    /// Also write the results as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write an SVG chart.
    #[arg(long, value_name = "FILE")]
    pub chart: Option<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: BenchCompressionArgs) -> anyhow::Result<()> {
    if !args.db.is_dir() {
        return Err(bad_input(format!("{} is not a directory: give the database directory made by `flashscan load`", args.db.display())));
    }
    for f in &args.formats {
        if !FORMATS.contains(&f.as_str()) {
            return Err(bad_input(format!("--formats {f:?}: choose from {}", FORMATS.join(", "))));
        }
    }
    let queries = args.queries.iter().map(|q| BuiltinQuery::parse(q)).collect::<Result<Vec<_>, _>>().map_err(exec_error)?;
    let cache_modes = if args.cold_only {
        vec![CacheMode::Cold]
    } else if args.warm_only {
        vec![CacheMode::Warm]
    } else {
        vec![CacheMode::Cold, CacheMode::Warm]
    };
    let options = CompressionBenchOptions {
        formats: args.formats.clone(),
        queries,
        cache_modes,
        rounds: args.rounds,
        scan: ScanOptions::default(),
        rebuild: args.rebuild,
        row_group_rows: args.row_group_rows,
    };
    let report = bench_compression::run(&args.db, &args.table, &options, &mut |m| eprintln!("{m}")).map_err(exec_error)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if let Some(path) = &args.csv {
        std::fs::write(path, report.to_csv()).map_err(|e| bad_input(format!("cannot write {}: {e}", path.display())))?;
    }
    if let Some(path) = &args.chart {
        write_chart(&report, path).map_err(|e| bad_input(format!("cannot write chart {}: {e}", path.display())))?;
    }
    Ok(())
}

fn right(text: String) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}

fn print_report(r: &CompressionReport) {
    println!("{}: {} rows, {} cores; medians of {} rounds", r.table, r.row_count, r.cores, r.runs.first().map_or(0, |x| x.rounds));
    let mut sizes = Table::new();
    sizes.load_preset(UTF8_FULL_CONDENSED).set_header(vec!["format", "table", "size MB", "vs heap", "rebuild s"]);
    for s in &r.formats {
        sizes.add_row(vec![
            Cell::new(&s.format),
            Cell::new(&s.table),
            right(format!("{:.1}", s.size_bytes as f64 / 1e6)),
            right(s.size_ratio_to_heap.map_or("-".into(), |x| format!("{x:.2}"))),
            right(s.rebuild_s.map_or("reused".into(), |x| format!("{x:.1}"))),
        ]);
    }
    println!("{sizes}");
    let mut runs = Table::new();
    runs.load_preset(UTF8_FULL_CONDENSED).set_header(vec!["query", "cache", "format", "elapsed s", "MB read", "MB/s", "M rows/s", "CPU %", "decode s"]);
    for x in &r.runs {
        runs.add_row(vec![
            Cell::new(&x.query),
            Cell::new(&x.cache),
            Cell::new(&x.format),
            right(format!("{:.3}", x.elapsed_s)),
            right(format!("{:.1}", x.bytes_read as f64 / 1e6)),
            right(format!("{:.0}", x.mb_per_s)),
            right(format!("{:.1}", x.rows_per_s / 1e6)),
            right(format!("{:.0}", x.cpu_pct)),
            right(format!("{:.3}", x.decode_s)),
        ]);
    }
    println!("{runs}");
}

const PALETTE: [RGBColor; 5] = [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40), RGBColor(148, 103, 189)];

/// Two panels: size on disk per format (bars), and elapsed seconds per format for each
/// query and cache mode (one line each, formats in the article's order on the x axis).
fn write_chart(r: &CompressionReport, path: &Path) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let root = SVGBackend::new(path, (1000, 900)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let panels = root.split_evenly((2, 1));
    let formats: Vec<&str> = r.formats.iter().map(|s| s.format.as_str()).collect();
    let n = formats.len().max(1) as i32;
    let label = |x: &i32| formats.get(*x as usize).map_or(String::new(), |s| s.to_string());

    let size_max = r.formats.iter().map(|s| s.size_bytes as f64 / 1e6).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&panels[0])
        .caption(format!("{}: size on disk (MB)", r.table), ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..size_max)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => label(i),
            _ => String::new(),
        })
        .y_desc("MB")
        .draw()
        .map_err(|x| e(&x))?;
    chart
        .draw_series(r.formats.iter().enumerate().map(|(i, s)| {
            let x = i as i32;
            Rectangle::new([(SegmentValue::Exact(x), 0.0), (SegmentValue::Exact(x + 1), s.size_bytes as f64 / 1e6)], PALETTE[i % 5].filled())
        }))
        .map_err(|x| e(&x))?;

    let time_max = r.runs.iter().map(|x| x.elapsed_s).fold(0.001, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&panels[1])
        .caption("elapsed seconds (median)", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0..n - 1, 0.0..time_max)
        .map_err(|x| e(&x))?;
    chart.configure_mesh().x_labels(formats.len()).x_label_formatter(&label).y_desc("s").draw().map_err(|x| e(&x))?;
    let mut series: Vec<(String, String)> = Vec::new();
    for x in &r.runs {
        if !series.contains(&(x.query.clone(), x.cache.clone())) {
            series.push((x.query.clone(), x.cache.clone()));
        }
    }
    for (i, (query, cache)) in series.iter().enumerate() {
        let color = PALETTE[i % 5];
        let points: Vec<(i32, f64)> = r
            .runs
            .iter()
            .filter(|x| &x.query == query && &x.cache == cache)
            .filter_map(|x| formats.iter().position(|f| *f == x.format).map(|p| (p as i32, x.elapsed_s)))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(format!("{query} {cache}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled()))).map_err(|x| e(&x))?;
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw().map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
