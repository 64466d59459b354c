//! The benchmark reports as text tables and CSV. Printers only read the report structs the
//! measurement filled (fio's "one measurement core, several printers"); every CSV goes through
//! `flashscan_measure::csv`.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, Table};
use flashscan_measure::csv;

use crate::compression::CompressionReport;
use crate::costs::CostReport;

fn right(text: String) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}

impl CompressionReport {
    /// The sizes table and the runs table, as `flashscan bench compression` prints them.
    pub fn to_text(&self) -> String {
        let r = self;
        let mut out = format!("{}: {} rows, {} cores; medians of {} rounds\n", r.table, r.row_count, r.cores, r.runs.first().map_or(0, |x| x.rounds));
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
        out.push_str(&format!("{sizes}\n"));
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
        out.push_str(&format!("{runs}\n"));
        out
    }

    pub fn to_csv(&self) -> String {
        let header = [
            "format", "table", "size_bytes", "size_ratio_to_heap", "query", "cache", "rounds", "elapsed_s", "mb_per_s", "rows_per_s", "cpu_pct", "decode_s", "bytes_read",
            "rows_scanned",
        ];
        let rows = self.runs.iter().map(|r| {
            let size = self.formats.iter().find(|s| s.format == r.format);
            vec![
                r.format.clone(),
                size.map_or(String::new(), |s| s.table.clone()),
                size.map_or(0, |s| s.size_bytes).to_string(),
                size.and_then(|s| s.size_ratio_to_heap).map_or(String::new(), |x| format!("{x:.3}")),
                r.query.clone(),
                r.cache.clone(),
                r.rounds.to_string(),
                format!("{:.4}", r.elapsed_s),
                format!("{:.1}", r.mb_per_s),
                format!("{:.0}", r.rows_per_s),
                format!("{:.1}", r.cpu_pct),
                format!("{:.4}", r.decode_s),
                r.bytes_read.to_string(),
                r.rows_scanned.to_string(),
            ]
        });
        csv::document(&header, rows)
    }
}

impl CostReport {
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        s.push_str("Scans: CPU µs per page (needle-in-haystack in memory / from disk; aggregate in memory)\n");
        s.push_str(&format!("{:>10} {:>8} {:>10} {:>10} {:>10} {:>12}\n", "rows/page", "pages", "memory", "disk", "aggregate", "memory/row"));
        for r in &self.scans {
            s.push_str(&format!(
                "{:>10} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>12.3}\n",
                r.rows_per_page,
                r.pages_count,
                r.memory_cpu_us_per_page,
                r.disk_cpu_us_per_page,
                r.aggregate_cpu_us_per_page,
                r.memory_cpu_us_per_row()
            ));
        }
        s.push_str(&format!("Evicting a clean page: {:.2} CPU µs\n\n", self.eviction_cpu_us_per_page));
        s.push_str(&format!("Key lookups (engine {}): CPU µs per row and per read, rows/s and reads/s\n", self.engine));
        s.push_str(&format!("{:>9} {:<18} {:>8} {:>8} {:>12} {:>11} {:>9} {:>9}\n", "rows/qry", "mode", "rows", "reads", "rows/s", "reads/s", "µs/row", "µs/read"));
        for r in &self.lookups {
            s.push_str(&format!(
                "{:>9} {:<18} {:>8} {:>8} {:>12.0} {:>11.0} {:>9.2} {:>9.2}\n",
                r.rows_per_query, r.mode, r.rows_count, r.reads_count, r.rows_per_s, r.reads_per_s, r.cpu_us_per_row, r.cpu_us_per_read
            ));
        }
        s
    }

    /// One CSV with a `section` column (scan, eviction, lookup).
    pub fn to_csv(&self) -> String {
        let header = [
            "section", "rows_per_page", "pages", "memory_cpu_us_per_page", "disk_cpu_us_per_page", "aggregate_cpu_us_per_page", "rows_per_query", "mode", "queries",
            "rows", "reads", "rows_per_s", "reads_per_s", "cpu_us_per_row", "cpu_us_per_read",
        ];
        let blank = |n: usize| std::iter::repeat_n(String::new(), n);
        let mut rows: Vec<Vec<String>> = Vec::new();
        for r in &self.scans {
            let mut row = vec![
                "scan".to_string(),
                r.rows_per_page.to_string(),
                r.pages_count.to_string(),
                format!("{:.4}", r.memory_cpu_us_per_page),
                format!("{:.4}", r.disk_cpu_us_per_page),
                format!("{:.4}", r.aggregate_cpu_us_per_page),
            ];
            row.extend(blank(9));
            rows.push(row);
        }
        let mut eviction: Vec<String> = vec!["eviction".into()];
        eviction.extend(blank(3));
        eviction.push(format!("{:.4}", self.eviction_cpu_us_per_page));
        eviction.extend(blank(10));
        rows.push(eviction);
        for r in &self.lookups {
            let mut row: Vec<String> = vec!["lookup".into()];
            row.extend(blank(5));
            row.extend([
                r.rows_per_query.to_string(),
                r.mode.clone(),
                r.queries_count.to_string(),
                r.rows_count.to_string(),
                r.reads_count.to_string(),
                format!("{:.1}", r.rows_per_s),
                format!("{:.1}", r.reads_per_s),
                format!("{:.4}", r.cpu_us_per_row),
                format!("{:.4}", r.cpu_us_per_read),
            ]);
            rows.push(row);
        }
        csv::document(&header, rows)
    }
}

#[cfg(test)]
mod tests {
    use crate::costs::report::{LookupCostRow, ScanCostRow};
    use crate::costs::CostReport;

    #[test]
    fn cost_csv_rows_have_every_column() {
        let report = CostReport {
            scans: vec![ScanCostRow { rows_per_page: 20, pages_count: 64, memory_cpu_us_per_page: 1.0, disk_cpu_us_per_page: 2.0, aggregate_cpu_us_per_page: 3.0 }],
            eviction_cpu_us_per_page: 0.5,
            lookups: vec![LookupCostRow {
                rows_per_query: 10,
                mode: "memory".into(),
                queries_count: 2,
                rows_count: 20,
                reads_count: 0,
                rows_per_s: 1.0,
                reads_per_s: 0.0,
                cpu_us_per_row: 1.5,
                cpu_us_per_read: 0.0,
            }],
            engine: "psync".into(),
            options: String::new(),
        };
        let csv = report.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 4);
        for l in &lines {
            assert_eq!(l.split(',').count(), 15, "{l}");
        }
        assert_eq!(lines[1], "scan,20,64,1.0000,2.0000,3.0000,,,,,,,,,");
        assert_eq!(lines[2], "eviction,,,,0.5000,,,,,,,,,,");
        assert_eq!(lines[3], "lookup,,,,,,10,memory,2,20,0,1.0,0.0,1.5000,0.0000");
    }
}
