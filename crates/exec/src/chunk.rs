//! Runs cut into chunks of at most one I/O each, and the shared cursor workers take
//! chunks from. A chunk never spans two runs, so its pages are contiguous in one file
//! and its page ids follow each other.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::source::RunSpec;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Index into the scan's list of distinct files (and every worker's `FileSet`).
    pub file_index: u32,
    pub offset_bytes: u64,
    pub length_bytes: u32,
    pub first_page_id: u64,
    pub page_count: u32,
    /// The source's own label for the chunk (a column store names the row group it
    /// belongs to); 0 for heap pages.
    pub tag: u64,
}

/// Cuts every run into chunks of at most `io_size_bytes` (whole pages).
/// `file_index_of` maps a run to the index of its file.
pub fn chunks_of_runs(
    runs: &[RunSpec],
    page_size_bytes: usize,
    io_size_bytes: usize,
    file_index_of: impl Fn(&RunSpec) -> u32,
) -> Vec<Chunk> {
    assert!(page_size_bytes > 0);
    let pages_per_chunk = (io_size_bytes / page_size_bytes).max(1) as u32;
    let mut chunks = Vec::new();
    for run in runs {
        let file_index = file_index_of(run);
        let mut page = 0u32;
        while page < run.page_count {
            let page_count = pages_per_chunk.min(run.page_count - page);
            chunks.push(Chunk {
                file_index,
                offset_bytes: run.offset_bytes + page as u64 * page_size_bytes as u64,
                length_bytes: page_count * page_size_bytes as u32,
                first_page_id: run.first_page_id + page as u64,
                page_count,
                tag: 0,
            });
            page += page_count;
        }
    }
    chunks
}

/// Hands out chunks to workers a unit at a time, lock-free. A unit is a few neighbouring
/// chunks (heap pages: neighbouring reads stay with one worker) or every chunk one decoder
/// needs together (a column store row group's columns).
pub struct ChunkCursor<'a> {
    chunks: &'a [Chunk],
    /// One past the last chunk of each unit, increasing, the last equal to `chunks.len()`.
    unit_ends: &'a [usize],
    next_unit: AtomicUsize,
}

/// Unit ends cutting `chunk_count` chunks every `per_unit`.
pub fn units_every(chunk_count: usize, per_unit: usize) -> Vec<usize> {
    assert!(per_unit >= 1);
    (1..=chunk_count.div_ceil(per_unit)).map(|u| (u * per_unit).min(chunk_count)).collect()
}

impl<'a> ChunkCursor<'a> {
    pub fn new(chunks: &'a [Chunk], unit_ends: &'a [usize]) -> ChunkCursor<'a> {
        assert!(unit_ends.windows(2).all(|w| w[0] < w[1]), "unit ends must increase");
        assert_eq!(unit_ends.last().copied().unwrap_or(0), chunks.len(), "units must cover every chunk");
        ChunkCursor { chunks, unit_ends, next_unit: AtomicUsize::new(0) }
    }

    /// The next unit's chunks, or an empty slice when every unit has been handed out.
    pub fn grab(&self) -> &'a [Chunk] {
        let unit = self.next_unit.fetch_add(1, Ordering::Relaxed);
        if unit >= self.unit_ends.len() {
            return &[];
        }
        let start = if unit == 0 { 0 } else { self.unit_ends[unit - 1] };
        &self.chunks[start..self.unit_ends[unit]]
    }

    /// A per-worker iterator over grabbed chunks.
    pub fn worker_feed(&'a self) -> impl FnMut() -> Option<Chunk> + 'a {
        let mut current: &'a [Chunk] = &[];
        move || {
            if current.is_empty() {
                current = self.grab();
            }
            let (first, rest) = current.split_first()?;
            current = rest;
            Some(*first)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn run(offset_bytes: u64, page_count: u32, first_page_id: u64) -> RunSpec {
        RunSpec { path: PathBuf::from("f"), offset_bytes, page_count, first_page_id, partition_index: 0 }
    }

    #[test]
    fn runs_split_into_whole_page_chunks() {
        let runs = [run(8192, 5, 1), run(81920, 2, 10)];
        let chunks = chunks_of_runs(&runs, 8192, 2 * 8192 + 100, |_| 0);
        let summary: Vec<(u64, u32, u64)> = chunks.iter().map(|c| (c.offset_bytes, c.page_count, c.first_page_id)).collect();
        assert_eq!(summary, vec![(8192, 2, 1), (24576, 2, 3), (40960, 1, 5), (81920, 2, 10)]);
        assert!(chunks.iter().all(|c| c.length_bytes == c.page_count * 8192));
    }

    #[test]
    fn units_cover_every_chunk_once() {
        assert_eq!(units_every(10, 4), vec![4, 8, 10]);
        assert_eq!(units_every(8, 4), vec![4, 8]);
        assert_eq!(units_every(0, 4), Vec::<usize>::new());
        let chunks = chunks_of_runs(&[run(0, 5, 0)], 8192, 8192, |_| 0);
        let units = [2, 3, 5];
        let cursor = ChunkCursor::new(&chunks, &units);
        let sizes: Vec<usize> = (0..4).map(|_| cursor.grab().len()).collect();
        assert_eq!(sizes, vec![2, 1, 2, 0]);
    }

    #[test]
    fn io_smaller_than_a_page_still_reads_whole_pages() {
        let chunks = chunks_of_runs(&[run(0, 3, 0)], 8192, 4096, |_| 0);
        assert_eq!(chunks.len(), 3);
        assert!(chunks.iter().all(|c| c.length_bytes == 8192));
    }

    #[test]
    fn cursor_hands_out_every_chunk_once() {
        let chunks = chunks_of_runs(&[run(0, 37, 0)], 8192, 8192, |_| 0);
        let units = units_every(chunks.len(), 4);
        let cursor = ChunkCursor::new(&chunks, &units);
        let seen: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| {
                        let mut feed = cursor.worker_feed();
                        let mut ids = Vec::new();
                        while let Some(c) = feed() {
                            ids.push(c.first_page_id);
                        }
                        ids
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let mut seen = seen;
        seen.sort();
        assert_eq!(seen, (0..37).collect::<Vec<u64>>());
    }
}
