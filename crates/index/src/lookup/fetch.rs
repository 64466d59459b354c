//! Fetching the read units of a plan through the pool: a window of at most `depth` reads
//! in flight (depth 1 is the synchronous path: issue, wait, process, next). A unit whose
//! pages are all in memory issues no read. Each wanted page missing from the pool is
//! claimed (a load ticket, so nobody reads it twice) before its read is queued, and
//! completed — verified, then visible — the moment its read lands; its rows go to the sink
//! at once. With 64 KB reads, the extent's other pages are installed too (unpinned), as
//! SQL Server does when its cache is cold.

use std::time::Instant;

use flashscan_buffer::{Fetch, LoadTicket, PageGuard, PageKey};
use flashscan_io::{IoOp, IoRequest};
use flashscan_storage::verify_page;

use super::plan::{PageGroup, PAGE_BYTES};
use super::session::LookupSession;
use crate::error::IndexError;
use crate::heap_rows::row_at;
use crate::locator::RowLocator;

impl<'p> LookupSession<'p> {
    /// Returns (rows, heap reads issued, ns waiting for reads).
    pub(super) fn fetch_units(&mut self, depth: u32, sink: &mut dyn FnMut(RowLocator, &[u8])) -> Result<(u64, u64, u64), IndexError> {
        debug_assert!(depth >= 1 && depth <= self.options.depth);
        assert_eq!(self.engine.in_flight(), 0, "a lookup starts with an idle engine");
        let pool = self.pool;
        let mut rows = 0u64;
        let mut reads = 0u64;
        let mut io_wait_ns = 0u64;
        // Per slot: the wanted pages of the unit in flight there, each with its ticket.
        let mut slot_pages: Vec<Vec<(PageGroup, LoadTicket<'p>)>> = (0..depth).map(|_| Vec::with_capacity(8)).collect();
        let mut free_slots: Vec<u32> = (0..depth).rev().collect();
        let mut next_unit = 0usize;
        let mut in_flight = 0u32;
        loop {
            while next_unit < self.plan.units.len() && !free_slots.is_empty() {
                let unit = self.plan.units[next_unit];
                next_unit += 1;
                let slot = *free_slots.last().expect("checked non-empty");
                debug_assert!(slot_pages[slot as usize].is_empty());
                for p in unit.first_page..unit.end_page {
                    let page = self.plan.pages[p as usize];
                    match pool.fetch(page.key)? {
                        Fetch::Hit(guard) => rows += self.emit(&guard, &page, sink)?,
                        Fetch::Miss(ticket) => slot_pages[slot as usize].push((page, ticket)),
                    }
                }
                if slot_pages[slot as usize].is_empty() {
                    continue;
                }
                free_slots.pop();
                self.engine.queue(IoRequest {
                    op: IoOp::Read,
                    file_index: unit.file_index,
                    offset_bytes: unit.offset_bytes,
                    length_bytes: unit.length_bytes,
                    slot,
                    user_data: (next_unit - 1) as u64,
                })?;
                in_flight += 1;
                reads += 1;
            }
            if in_flight == 0 {
                debug_assert!(next_unit >= self.plan.units.len());
                break;
            }
            let waited = Instant::now();
            self.completions.clear();
            self.engine.reap(1, &mut self.completions)?;
            io_wait_ns += waited.elapsed().as_nanos() as u64;
            let mut done = std::mem::take(&mut self.completions);
            for c in done.drain(..) {
                in_flight -= 1;
                c.expect_full(self.engine.files())?;
                pool.counters().read(c.length_bytes as u64);
                let unit = self.plan.units[c.user_data as usize];
                debug_assert_eq!(unit.offset_bytes, c.offset_bytes);
                for (page, ticket) in slot_pages[c.slot as usize].drain(..) {
                    let at = (page.key.offset_bytes() - unit.offset_bytes) as usize;
                    let bytes = &self.engine.slot(c.slot)[at..at + PAGE_BYTES as usize];
                    let path = self.files.path(page.key.file_index);
                    let offset = page.key.offset_bytes();
                    let guard = ticket.complete_from(bytes, |b| verify_page(b, page.page_id, path, offset).map(drop).map_err(IndexError::from))?;
                    rows += self.emit(&guard, &page, sink)?;
                }
                if unit.length_bytes as u64 > PAGE_BYTES {
                    self.install_rest_of_extent(c.slot, &unit)?;
                }
                free_slots.push(c.slot);
            }
            self.completions = done;
        }
        debug_assert_eq!(free_slots.len(), depth as usize);
        Ok((rows, reads, io_wait_ns))
    }

    /// Hands the rows of one page to the sink.
    #[inline]
    fn emit(&self, guard: &PageGuard<'_>, page: &PageGroup, sink: &mut dyn FnMut(RowLocator, &[u8])) -> Result<u64, IndexError> {
        let data = guard.data();
        let path = self.files.path(page.key.file_index);
        for loc in &self.locators[page.start as usize..page.end as usize] {
            debug_assert_eq!(loc.page_id, page.page_id);
            let row = row_at(data, loc.slot, loc.page_id, path, page.key.offset_bytes())?;
            sink(*loc, row);
        }
        Ok((page.end - page.start) as u64)
    }

    /// Installs the pages of a 64 KB read nobody asked for yet. A page that fails
    /// verification (an unused page at the end of a file, or real damage) is simply not
    /// installed: if it is ever wanted, its own read reports the damage.
    fn install_rest_of_extent(&self, slot: u32, unit: &super::plan::ReadUnit) -> Result<(), IndexError> {
        let pool = self.pool;
        let page_count = unit.length_bytes as u64 / PAGE_BYTES;
        let first_page_number = unit.offset_bytes / PAGE_BYTES;
        let file_id = self.table_file_id(unit.file_index);
        for i in 0..page_count {
            let key = PageKey::new(unit.file_index, first_page_number + i);
            let bytes = &self.engine.slot(slot)[(i * PAGE_BYTES) as usize..((i + 1) * PAGE_BYTES) as usize];
            let page_id = flashscan_storage::PageId::new(file_id, key.page_number as u32).0;
            let path = self.files.path(unit.file_index);
            let installed = pool.install(key, bytes, |b| verify_page(b, page_id, path, key.offset_bytes()).map(drop).map_err(IndexError::from));
            match installed {
                Ok(()) | Err(IndexError::Storage(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn table_file_id(&self, file_index: u32) -> u32 {
        self.table.files.get(file_index as usize).map(|f| f.file_id).unwrap_or(u32::MAX)
    }
}
