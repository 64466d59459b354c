//! How a table's pages are dealt out to DataFusion's execution partitions.
//!
//! A scan unit is the pages one execution partition reads: one flashscan partition, or a
//! slice of one when the table has fewer partitions than the session has cores (so a
//! one-partition table still keeps every core busy). Slices cut runs at page boundaries,
//! so every unit still reads in large contiguous I/Os. Column store partitions are cut
//! between row groups instead.

use flashscan_storage::{PageRun, PartitionMeta, PAGE_SIZE_BYTES};

/// Below this many pages a unit is not split: the scan would be dominated by start-up
/// (an engine and its buffers per unit) rather than by reading.
pub const UNIT_PAGES_SPLIT_MIN: u64 = 256;
/// Execution partitions per scan, at most: each holds an I/O engine and its buffers.
pub const UNITS_PER_SCAN_MAX: usize = 256;

/// The pages one execution partition reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanUnit {
    /// The flashscan partition the pages belong to.
    pub partition_index: u32,
    pub runs: Vec<PageRun>,
    pub page_count: u64,
    /// Rows in these pages: exact for a whole partition, estimated (pro rata) for a slice.
    pub row_count: u64,
    pub row_count_exact: bool,
    /// Column store partitions: the row groups (indexes into the partition's
    /// `row_groups`) this unit reads; `runs` are theirs. Empty for heap tables.
    pub row_groups: Vec<usize>,
}

impl ScanUnit {
    pub fn of_partition(p: &PartitionMeta) -> ScanUnit {
        let page_count = p.runs.iter().map(|r| r.page_count as u64).sum();
        debug_assert_eq!(page_count, p.page_count, "partition {} runs and page count disagree", p.index);
        ScanUnit {
            partition_index: p.index,
            runs: p.runs.clone(),
            page_count,
            row_count: p.row_count,
            row_count_exact: true,
            row_groups: (0..p.row_groups.len()).collect(),
        }
    }

    /// A column store unit cut between row groups (a row group is decoded whole by one
    /// reader); `None` with fewer than two row groups.
    fn split_row_groups(&self, partition: &PartitionMeta) -> Option<(ScanUnit, ScanUnit)> {
        if self.row_groups.len() < 2 {
            return None;
        }
        let (a, b) = self.row_groups.split_at(self.row_groups.len() / 2);
        let half = |groups: &[usize]| {
            // Row groups and runs correspond one to one (formats.md).
            let runs: Vec<PageRun> = groups.iter().filter_map(|&g| partition.runs.get(g).cloned()).collect();
            ScanUnit {
                partition_index: self.partition_index,
                page_count: runs.iter().map(|r| r.page_count as u64).sum(),
                runs,
                row_count: groups.iter().filter_map(|&g| partition.row_groups.get(g)).map(|g| g.row_count).sum(),
                row_count_exact: true,
                row_groups: groups.to_vec(),
            }
        };
        Some((half(a), half(b)))
    }

    pub fn bytes(&self) -> u64 {
        self.page_count * PAGE_SIZE_BYTES as u64
    }

    /// Cuts the unit in two halves of pages; `None` when too small to be worth it.
    fn split(&self) -> Option<(ScanUnit, ScanUnit)> {
        if self.page_count < 2 * UNIT_PAGES_SPLIT_MIN {
            return None;
        }
        let first_pages = self.page_count / 2;
        let mut first = Vec::new();
        let mut second = Vec::new();
        let mut taken = 0u64;
        for run in &self.runs {
            let left = first_pages.saturating_sub(taken);
            if left == 0 {
                second.push(run.clone());
            } else if left >= run.page_count as u64 {
                first.push(run.clone());
            } else {
                let (a, b) = split_run(run, left as u32);
                first.push(a);
                second.push(b);
            }
            taken += run.page_count as u64;
        }
        let first_rows = ((self.row_count as u128 * first_pages as u128) / self.page_count as u128) as u64;
        let half = |runs: Vec<PageRun>, pages: u64, rows: u64| ScanUnit {
            partition_index: self.partition_index,
            runs,
            page_count: pages,
            row_count: rows,
            row_count_exact: false,
            row_groups: Vec::new(),
        };
        Some((half(first, first_pages, first_rows), half(second, self.page_count - first_pages, self.row_count - first_rows)))
    }
}

/// Run `run` cut after `first_pages` pages.
fn split_run(run: &PageRun, first_pages: u32) -> (PageRun, PageRun) {
    debug_assert!(first_pages > 0 && first_pages < run.page_count);
    let a = PageRun { page_count: first_pages, ..run.clone() };
    let b = PageRun {
        file: run.file.clone(),
        offset_bytes: run.offset_bytes + first_pages as u64 * PAGE_SIZE_BYTES as u64,
        page_count: run.page_count - first_pages,
        first_page_id: run.first_page_id + first_pages as u64,
    };
    (a, b)
}

/// One unit per partition (empty partitions dropped), then the largest units halved
/// until there are `units_wanted` or none is worth splitting.
pub fn plan_units(partitions: &[&PartitionMeta], units_wanted: usize) -> Vec<ScanUnit> {
    let units_wanted = units_wanted.clamp(1, UNITS_PER_SCAN_MAX);
    let mut units: Vec<ScanUnit> = partitions.iter().filter(|p| p.page_count > 0).map(|p| ScanUnit::of_partition(p)).collect();
    while units.len() < units_wanted {
        let Some((largest, _)) = units.iter().enumerate().max_by_key(|(_, u)| u.page_count) else { break };
        let unit = &units[largest];
        let halves = match partitions.iter().find(|p| p.index == unit.partition_index) {
            Some(p) if !p.row_groups.is_empty() => unit.split_row_groups(p),
            _ => unit.split(),
        };
        let Some((a, b)) = halves else { break };
        units[largest] = a;
        units.insert(largest + 1, b);
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(index: u32, pages: &[u32], rows: u64) -> PartitionMeta {
        let mut first_page_id = 0;
        let runs = pages
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let r = PageRun { file: format!("f{i}"), offset_bytes: 0, page_count: n, first_page_id };
                first_page_id += n as u64;
                r
            })
            .collect();
        PartitionMeta { index, row_count: rows, page_count: pages.iter().map(|&n| n as u64).sum(), filegroup: 0, runs, row_groups: Vec::new() }
    }

    #[test]
    fn one_unit_per_partition_when_enough() {
        let ps = [partition(0, &[600], 100), partition(1, &[600], 100)];
        let units = plan_units(&ps.iter().collect::<Vec<_>>(), 2);
        assert_eq!(units.len(), 2);
        assert!(units.iter().all(|u| u.row_count_exact));
    }

    #[test]
    fn splits_keep_every_page_once() {
        let ps = [partition(0, &[300, 700, 50], 10_000)];
        let units = plan_units(&ps.iter().collect::<Vec<_>>(), 4);
        assert_eq!(units.len(), 4);
        assert_eq!(units.iter().map(|u| u.page_count).sum::<u64>(), 1050);
        assert_eq!(units.iter().map(|u| u.row_count).sum::<u64>(), 10_000);
        for u in &units {
            assert_eq!(u.runs.iter().map(|r| r.page_count as u64).sum::<u64>(), u.page_count);
        }
        // Page ids stay consecutive across a cut.
        let mut ids: Vec<(String, u64, u64)> = units
            .iter()
            .flat_map(|u| u.runs.iter().map(|r| (r.file.clone(), r.first_page_id, r.offset_bytes)))
            .collect();
        ids.sort();
        let f1: Vec<_> = ids.iter().filter(|(f, _, _)| f == "f1").collect();
        assert!(f1.len() >= 2);
        assert_eq!(f1[1].2 - f1[0].2, (f1[1].1 - f1[0].1) * PAGE_SIZE_BYTES as u64);
    }

    #[test]
    fn small_partitions_stay_whole_and_empty_ones_go() {
        let ps = [partition(0, &[10], 5), partition(1, &[], 0)];
        let units = plan_units(&ps.iter().collect::<Vec<_>>(), 8);
        assert_eq!(units.len(), 1);
    }
}
