//! Pages in memory, for unit tests of the tree: a [`PageStore`] with no file, no map and
//! no free list. [`MemoryPages::end_txn`] plays a commit: pages written so far become
//! "committed" and the next change copies them (copy-on-write), as over the map.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::format::page::{edit, PageView};

use super::{PageSource, PageStore};

/// Every page ever allocated, in one buffer; page 0 and 1 stand for the metas.
pub(crate) struct MemoryPages {
    page_size: usize,
    bytes: Vec<u8>,
    /// Runs allocated since the last [`MemoryPages::end_txn`]: first page -> pages.
    dirty: BTreeMap<u64, usize>,
    /// Pages freed, never reused (a leak or a double free shows in the counts).
    freed: BTreeSet<u64>,
}

impl MemoryPages {
    /// An empty store of pages of `page_size` bytes.
    pub(crate) fn new(page_size: usize) -> Self {
        MemoryPages {
            page_size,
            bytes: vec![0; 2 * page_size],
            dirty: BTreeMap::new(),
            freed: BTreeSet::new(),
        }
    }

    /// Ends a "txn": every page written so far is now reachable from a committed state and
    /// may no longer be changed in place.
    pub(crate) fn end_txn(&mut self) {
        self.dirty.clear();
    }

    /// Pages allocated so far (past the two metas), and how many of them were freed.
    pub(crate) fn counts(&self) -> (u64, u64) {
        let allocated = (self.bytes.len() / self.page_size) as u64 - 2;
        (allocated, self.freed.len() as u64)
    }
}

impl PageSource for MemoryPages {
    fn page_size(&self) -> usize {
        self.page_size
    }

    fn pages(&self, pgno: u64, count: usize) -> Result<&[u8]> {
        let start = pgno as usize * self.page_size;
        let end = start + count * self.page_size;
        if pgno < 2 || end > self.bytes.len() {
            return Err(Error::PageNotFound { pgno });
        }
        assert!(
            !self.freed.contains(&pgno),
            "page {pgno} read after it was freed"
        );
        Ok(&self.bytes[start..end])
    }
}

impl PageStore for MemoryPages {
    fn is_dirty(&self, pgno: u64) -> bool {
        self.dirty.contains_key(&pgno)
    }

    fn dirty_mut(&mut self, pgno: u64) -> &mut [u8] {
        let count = self.dirty[&pgno];
        let start = pgno as usize * self.page_size;
        &mut self.bytes[start..start + count * self.page_size]
    }

    fn touch(&mut self, pgno: u64) -> Result<u64> {
        if self.is_dirty(pgno) {
            return Ok(pgno);
        }
        PageView::parse(self.page(pgno)?, pgno)?.validate_all()?;
        let new = self.alloc(1)?;
        let (old, new_at) = (
            pgno as usize * self.page_size,
            new as usize * self.page_size,
        );
        self.bytes.copy_within(old..old + self.page_size, new_at);
        edit::set_pgno(self.dirty_mut(new), new);
        self.free(pgno, 1)?;
        Ok(new)
    }

    fn alloc(&mut self, count: usize) -> Result<u64> {
        assert!(count > 0);
        let pgno = (self.bytes.len() / self.page_size) as u64;
        self.bytes
            .resize(self.bytes.len() + count * self.page_size, 0);
        self.dirty.insert(pgno, count);
        Ok(pgno)
    }

    fn free(&mut self, pgno: u64, count: usize) -> Result<()> {
        for p in pgno..pgno + count as u64 {
            assert!(p >= 2, "freeing a meta page");
            assert!(self.freed.insert(p), "page {p} freed twice");
        }
        self.dirty.remove(&pgno);
        Ok(())
    }
}
