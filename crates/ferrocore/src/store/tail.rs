//! Giving the end of the file back: the free pages at the tail leave the free list, and
//! the snapshot ends before them (the commit then shortens the file).
//!
//! Only pages the txn may reuse at once can go: those it took from free-DB records no
//! reader and no durable meta can reach (the pool) and those it allocated and freed again
//! (loose). Its own frees of base-snapshot pages are still reachable from the base
//! snapshot, so a tail page among them stops the trim.

use crate::error::Result;

use super::*;

impl DirtyPages<'_> {
    /// Takes every free-DB record no reader can see into the pool, so that
    /// [`trim_free_tail`](Self::trim_free_tail) sees every reusable page (the explicit
    /// shrink; a commit otherwise trims only what its allocations took).
    pub fn reclaim_all(&mut self) -> Result<()> {
        while self.reclaim_one()? {}
        Ok(())
    }

    /// Drops the free pages at the end of the snapshot from the pool and the loose list,
    /// as long as the last page is one of them, and ends the snapshot before them. Returns
    /// how many pages went.
    pub fn trim_free_tail(&mut self) -> u64 {
        assert!(self.nested.is_empty(), "trimming inside a nested txn");
        let bufs = &mut *self.bufs;
        let FreePages { loose, pool, .. } = &mut bufs.free;
        loose.sort_unstable_by(|a, b| b.cmp(a));
        debug_assert!(pool.windows(2).all(|w| w[0] > w[1]), "pool out of order");
        let (mut from_pool, mut from_loose) = (0, 0);
        let start = self.next_pgno;
        while self.next_pgno > 2 {
            let last = self.next_pgno - 1;
            if pool.get(from_pool) == Some(&last) {
                from_pool += 1;
            } else if loose.get(from_loose) == Some(&last) {
                from_loose += 1;
            } else {
                break;
            }
            debug_assert!(!bufs.dirty.contains_key(&last), "free page {last} is dirty");
            self.next_pgno = last;
        }
        pool.drain(..from_pool);
        loose.drain(..from_loose);
        self.free_edits += 1;
        debug_assert!(
            pool.first().is_none_or(|&p| p < self.next_pgno)
                && loose.first().is_none_or(|&p| p < self.next_pgno),
            "a free page past the new end"
        );
        start - self.next_pgno
    }

    /// Under `WRITE_MAP`, how many pages the file covers now (the txn grows it as it
    /// writes through the map).
    pub fn mapped_file_pages(&self) -> Option<u64> {
        self.mapped.as_ref().map(|m| m.file_pages)
    }

    /// Under `WRITE_MAP`, if this txn set the file's length since the last call: the
    /// pages it covers now (the file's exact length, which the caller records).
    pub fn take_mapped_growth(&mut self) -> Option<u64> {
        let mapped = self.mapped.as_mut()?;
        std::mem::take(&mut mapped.grew).then_some(mapped.file_pages)
    }
}
