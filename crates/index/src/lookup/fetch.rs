//! Fetching the read units of a plan through the pool: a window of at most `depth` reads
//! in flight (depth 1 is the synchronous path: issue, wait, process, next). A unit whose
//! pages are all in memory issues no read. Each wanted page missing from the pool is
//! claimed (a load ticket, so nobody reads it twice) before its read is queued, and
//! completed — verified, then visible — the moment its read lands; its rows go to the sink
//! at once. With 64 KB reads, the extent's other pages are installed too (unpinned), as
//! SQL Server does when its cache is cold.

use flashscan_buffer::{BufferPool, Fetch, PageGuard, PageKey};
use flashscan_storage::verify_page;

use super::plan::{PageGroup, PAGE_BYTES};
use super::session::LookupSession;
use crate::error::IndexError;
use flashscan_storage::heap::heap_page::HeapPageRows;
use crate::locator::RowLocator;
use crate::table_files::TableFiles;

impl<'p> LookupSession<'p> {
    /// Returns (rows, heap reads issued, ns waiting for reads).
    pub(super) fn fetch_units(&mut self, depth: u32, sink: &mut dyn FnMut(RowLocator, &[u8])) -> Result<(u64, u64, u64), IndexError> {
        debug_assert!(depth >= 1 && depth <= self.options.depth);
        assert!(self.reader.is_idle(), "a lookup starts with an idle reader");
        let pool = self.pool;
        let mut rows = 0u64;
        let mut reads = 0u64;
        let wait_before = self.reader.queue_mut().stats().io_wait_ns;
        let mut next_unit = 0usize;
        let mut outstanding = 0u32;
        loop {
            while next_unit < self.plan.units.len() && outstanding < depth && self.reader.has_free_slot() {
                let unit_index = next_unit;
                let unit = self.plan.units[unit_index];
                next_unit += 1;
                let mut wanted = Vec::with_capacity((unit.end_page - unit.first_page) as usize);
                for p in unit.first_page..unit.end_page {
                    let page = self.plan.pages[p as usize];
                    match pool.fetch(page.key)? {
                        Fetch::Hit(guard) => rows += self.emit(&guard, &page, sink)?,
                        Fetch::Miss(ticket) => wanted.push((page, ticket)),
                    }
                }
                if wanted.is_empty() {
                    continue;
                }
                // The read carries its tickets: they are completed when it lands, or
                // abandoned (waiting readers retry) if it fails or is drained.
                self.reader.queue_read(unit.file_index, unit.offset_bytes, unit.length_bytes, (unit_index, wanted))?;
                outstanding += 1;
                reads += 1;
            }
            let files = &self.files;
            let plan = &self.plan;
            let done = self.reader.complete_next(|c| -> Result<u64, IndexError> {
                let bytes = c.result?;
                pool.counters().read(c.completion.length_bytes as u64);
                let (unit_index, wanted) = c.tag;
                let unit = plan.units[unit_index];
                debug_assert_eq!(unit.offset_bytes, c.completion.offset_bytes);
                let mut guards = Vec::with_capacity(wanted.len());
                for (page, ticket) in wanted {
                    let at = (page.key.offset_bytes() - unit.offset_bytes) as usize;
                    let path = files.path(page.key.file_index);
                    let offset = page.key.offset_bytes();
                    let guard = ticket.complete_from(&bytes[at..at + PAGE_BYTES as usize], |b| verify_page(b, page.page_id, path, offset).map(drop).map_err(IndexError::from))?;
                    guards.push((page, guard));
                }
                if unit.length_bytes as u64 > PAGE_BYTES {
                    install_rest_of_extent(pool, files, bytes, &unit)?;
                }
                let mut found = 0u64;
                for (page, guard) in &guards {
                    found += emit_rows(&self.locators, files, guard, page, sink)?;
                }
                Ok(found)
            })?;
            match done {
                Some(found) => {
                    outstanding -= 1;
                    rows += found?;
                }
                None => break,
            }
        }
        debug_assert!(next_unit >= self.plan.units.len());
        debug_assert!(self.reader.is_idle());
        let io_wait_ns = self.reader.queue_mut().stats().io_wait_ns - wait_before;
        Ok((rows, reads, io_wait_ns))
    }

    /// Hands the rows of one page to the sink.
    #[inline]
    fn emit(&self, guard: &PageGuard<'_>, page: &PageGroup, sink: &mut dyn FnMut(RowLocator, &[u8])) -> Result<u64, IndexError> {
        emit_rows(&self.locators, &self.files, guard, page, sink)
    }
}

/// Hands the rows of one page to the sink.
#[inline]
fn emit_rows(locators: &[RowLocator], files: &TableFiles, guard: &PageGuard<'_>, page: &PageGroup, sink: &mut dyn FnMut(RowLocator, &[u8])) -> Result<u64, IndexError> {
    let rows = HeapPageRows::new(guard.data(), page.page_id, files.path(page.key.file_index), page.key.offset_bytes())?;
    for loc in &locators[page.start as usize..page.end as usize] {
        debug_assert_eq!(loc.page_id, page.page_id.0);
        sink(*loc, rows.row(loc.slot)?);
    }
    Ok((page.end - page.start) as u64)
}

/// Installs the pages of a 64 KB read nobody asked for yet. A page that fails
/// verification (an unused page at the end of a file, or real damage) is simply not
/// installed: if it is ever wanted, its own read reports the damage.
fn install_rest_of_extent(pool: &BufferPool, files: &TableFiles, bytes: &[u8], unit: &super::plan::ReadUnit) -> Result<(), IndexError> {
    let page_count = unit.length_bytes as u64 / PAGE_BYTES;
    let first_page_number = unit.offset_bytes / PAGE_BYTES;
    let path = files.path(unit.file_index);
    let data_file_id = files.data_file_id(unit.file_index).unwrap_or(u32::MAX);
    for i in 0..page_count {
        let key = PageKey::new(unit.file_index, first_page_number + i);
        let page = &bytes[(i * PAGE_BYTES) as usize..((i + 1) * PAGE_BYTES) as usize];
        let page_id = flashscan_storage::PageId::new(data_file_id, key.page_number as u32);
        let installed = pool.install(key, page, |b| verify_page(b, page_id, path, key.offset_bytes()).map(drop).map_err(IndexError::from));
        match installed {
            Ok(()) | Err(IndexError::Storage(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
