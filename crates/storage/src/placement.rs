//! Placement: where a partition's pages go in its filegroup's files.
//!
//! A partition's pages are cut into stripe units of `interleave` bytes (a multiple of the
//! 64 KB extent) and the units are dealt round-robin over the filegroup's files, one file
//! per volume, so every volume gets the same share (proportional fill for equal volumes).
//! Each file holds only this partition, so its pages are contiguous in the file and a
//! scan can read them with large I/Os.

use crate::heap::{PageId, EXTENT_SIZE_BYTES, PAGE_SIZE_BYTES};
use crate::table_meta::PageRun;

/// Stripe unit bounds: at least one extent, at most 1 GB.
pub const INTERLEAVE_BYTES_MIN: u64 = EXTENT_SIZE_BYTES as u64;
pub const INTERLEAVE_BYTES_MAX: u64 = 1 << 30;
pub const INTERLEAVE_BYTES_DEFAULT: u64 = 64 * 1024;

/// The striping of one partition over `file_count` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stripe {
    pub file_count: u32,
    pub interleave_pages: u64,
}

impl Stripe {
    pub fn new(file_count: u32, interleave_bytes: u64) -> Stripe {
        debug_assert!(file_count > 0);
        debug_assert!(interleave_bytes % EXTENT_SIZE_BYTES as u64 == 0);
        Stripe { file_count, interleave_pages: interleave_bytes / PAGE_SIZE_BYTES as u64 }
    }

    /// The file slot and page index within that file of the partition's `page_seq`-th page.
    #[inline]
    pub fn locate(&self, page_seq: u64) -> (u32, u64) {
        let unit = page_seq / self.interleave_pages;
        let within = page_seq % self.interleave_pages;
        let file_slot = (unit % self.file_count as u64) as u32;
        let unit_in_file = unit / self.file_count as u64;
        (file_slot, unit_in_file * self.interleave_pages + within)
    }

    /// The partition's first `page_count` pages as runs in scan order, coalescing pages
    /// that are contiguous in one file. `file_ids[slot]` and `file_paths[slot]` name the files.
    pub fn runs(&self, page_count: u64, file_ids: &[u32], file_paths: &[String]) -> Vec<PageRun> {
        let mut runs: Vec<PageRun> = Vec::new();
        let mut seq = 0u64;
        while seq < page_count {
            let (slot, index) = self.locate(seq);
            // Pages up to the end of this stripe unit are contiguous in one file.
            let unit_end = (seq / self.interleave_pages + 1) * self.interleave_pages;
            let mut n = unit_end.min(page_count) - seq;
            let offset_bytes = index * PAGE_SIZE_BYTES as u64;
            if let Some(last) = runs.last_mut() {
                let last_end = last.offset_bytes + last.page_count as u64 * PAGE_SIZE_BYTES as u64;
                if last.file == file_paths[slot as usize] && last_end == offset_bytes && (last.page_count as u64 + n) <= u32::MAX as u64 {
                    last.page_count += n as u32;
                    seq += n;
                    continue;
                }
            }
            n = n.min(u32::MAX as u64);
            runs.push(PageRun {
                file: file_paths[slot as usize].clone(),
                offset_bytes,
                page_count: n as u32,
                first_page_id: PageId::new(file_ids[slot as usize], index as u32).0,
            });
            seq += n;
        }
        debug_assert_eq!(runs.iter().map(|r| r.page_count as u64).sum::<u64>(), page_count);
        runs
    }
}

/// Parses sizes like `64K`, `1M`, `4m`, `65536` into bytes.
pub fn parse_size_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, multiplier) = match t.chars().last()?.to_ascii_uppercase() {
        'K' => (&t[..t.len() - 1], 1u64 << 10),
        'M' => (&t[..t.len() - 1], 1 << 20),
        'G' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(multiplier)
}

/// Rounds up to a whole number of extents: data files are sized in 64 KB steps.
pub fn round_up_to_extent(bytes: u64) -> u64 {
    bytes.div_ceil(EXTENT_SIZE_BYTES as u64) * EXTENT_SIZE_BYTES as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_file_is_one_run() {
        let s = Stripe::new(1, 64 * 1024);
        let runs = s.runs(100, &[3], &["a".into()]);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].page_count, 100);
        assert_eq!(runs[0].first_page_id, PageId::new(3, 0).0);
    }

    #[test]
    fn two_files_alternate_by_interleave() {
        let s = Stripe::new(2, 64 * 1024);
        assert_eq!(s.locate(0), (0, 0));
        assert_eq!(s.locate(7), (0, 7));
        assert_eq!(s.locate(8), (1, 0));
        assert_eq!(s.locate(16), (0, 8));
        let runs = s.runs(20, &[1, 2], &["a".into(), "b".into()]);
        let shape: Vec<(String, u64, u32)> = runs.iter().map(|r| (r.file.clone(), r.offset_bytes, r.page_count)).collect();
        assert_eq!(shape, vec![("a".into(), 0, 8), ("b".into(), 0, 8), ("a".into(), 65536, 4)]);
    }

    #[test]
    fn every_page_placed_once() {
        let s = Stripe::new(3, 128 * 1024);
        let mut seen = std::collections::HashSet::new();
        for seq in 0..1000 {
            assert!(seen.insert(s.locate(seq)));
        }
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size_bytes("64K"), Some(65536));
        assert_eq!(parse_size_bytes("1m"), Some(1 << 20));
        assert_eq!(parse_size_bytes("4096"), Some(4096));
        assert_eq!(parse_size_bytes("x"), None);
    }
}
