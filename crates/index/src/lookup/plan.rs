//! From sorted locators to read units: each unit is one read (8 KB: one page; 64 KB: the
//! extent holding one or more wanted pages) and the pages in it with their locators.

use flashscan_buffer::PageKey;
use flashscan_storage::PageId;

use crate::error::IndexError;
use crate::locator::RowLocator;
use crate::table_files::TableFiles;

pub const PAGE_BYTES: u64 = flashscan_storage::PAGE_SIZE_BYTES as u64;

/// One wanted page: its key, id, and `locators[start..end]`.
#[derive(Debug, Clone, Copy)]
pub struct PageGroup {
    pub key: PageKey,
    pub page_id: PageId,
    pub start: u32,
    pub end: u32,
}

/// One read: `pages[first_page..end_page]` are the wanted pages inside it.
#[derive(Debug, Clone, Copy)]
pub struct ReadUnit {
    pub file_index: u32,
    pub offset_bytes: u64,
    pub length_bytes: u32,
    pub first_page: u32,
    pub end_page: u32,
}

#[derive(Default)]
pub struct ReadPlan {
    pub pages: Vec<PageGroup>,
    pub units: Vec<ReadUnit>,
}

impl ReadPlan {
    /// `locators` must be sorted by (page id, slot).
    pub fn build(&mut self, locators: &[RowLocator], files: &TableFiles, table: &str, io_size_bytes: u32) -> Result<(), IndexError> {
        self.pages.clear();
        self.units.clear();
        debug_assert!(locators.windows(2).all(|w| w[0] <= w[1]));
        let mut i = 0;
        while i < locators.len() {
            let page_id = PageId(locators[i].page_id);
            let mut j = i + 1;
            while j < locators.len() && locators[j].page_id == page_id.0 {
                j += 1;
            }
            let key = files.page_key(page_id, table)?;
            self.pages.push(PageGroup { key, page_id, start: i as u32, end: j as u32 });
            i = j;
        }
        let io = io_size_bytes as u64;
        debug_assert!(io % PAGE_BYTES == 0 && io >= PAGE_BYTES);
        let mut p = 0;
        while p < self.pages.len() {
            let first = self.pages[p];
            let file_size = files.size_bytes(first.key.file_index);
            let offset = (first.key.offset_bytes() / io) * io;
            // Clamp to the file (the last extent may be short), whole pages only.
            let end = (offset + io).min(file_size.max(first.key.offset_bytes() + PAGE_BYTES));
            let length = ((end - offset) / PAGE_BYTES) * PAGE_BYTES;
            let mut q = p + 1;
            while q < self.pages.len() && self.pages[q].key.file_index == first.key.file_index && self.pages[q].key.offset_bytes() < offset + length {
                q += 1;
            }
            debug_assert!(first.key.offset_bytes() + PAGE_BYTES <= offset + length);
            self.units.push(ReadUnit { file_index: first.key.file_index, offset_bytes: offset, length_bytes: length as u32, first_page: p as u32, end_page: q as u32 });
            p = q;
        }
        Ok(())
    }
}
