//! Nested txns over the write txn's pages: what a nested txn changed in its parent's pages,
//! so that aborting it restores them.

use std::hash::BuildHasherDefault;

use super::*;

/// What a nested txn changed in its parent's pages, so that aborting it can restore them.
pub(super) struct NestLevel {
    /// Pages dirty before the nested txn began that it has changed or freed: their
    /// content as the parent left it (always heap buffers: no nesting under WRITE_MAP).
    pub(super) saved: PgnoMap<PageBuf>,
    /// Pages the nested txn allocated.
    pub(super) allocated: std::collections::HashSet<u64, BuildHasherDefault<PgnoHasher>>,
    /// The parent's free-page lists, allocation point and reclaim position.
    pub(super) free: FreePages,
    pub(super) next_pgno: u64,
    pub(super) reclaim: Reclaim,
    /// The pages written early, and the end of them.
    pub(super) written_early: (PgnoMap<u32>, u64),
}

impl DirtyPages<'_> {
    /// Starts a nested txn: from here on, changes can be undone by [`Self::abort_nested`].
    pub fn begin_nested(&mut self) {
        assert!(self.mapped.is_none(), "no nested txn under WRITE_MAP");
        let bufs = &mut *self.bufs;
        bufs.nested.push(NestLevel {
            saved: PgnoMap::default(),
            allocated: Default::default(),
            free: bufs.free.clone(),
            next_pgno: self.next_pgno,
            reclaim: bufs.reclaim.clone(),
            written_early: (bufs.early_written.clone(), self.early.end),
        });
    }

    /// Undoes everything since the matching `begin_nested`.
    pub fn abort_nested(&mut self) {
        let level = self.bufs.nested.pop().expect("a nested txn to abort");
        for pgno in level.allocated {
            if let Some(PageBuf::Heap(buf)) = self.bufs.dirty.remove(pgno) {
                if buf.len() == self.page_size {
                    self.bufs.spare.push(buf);
                }
            }
        }
        for (pgno, buf) in level.saved {
            self.bufs.dirty.insert(pgno, buf);
        }
        self.bufs.free = level.free;
        self.free_edits += 1;
        self.next_pgno = level.next_pgno;
        self.bufs.reclaim = level.reclaim;
        // The level's early pages are free again; queued ones may be the level's too (the
        // rest stay dirty and commit writes them).
        (self.bufs.early_written, self.early.end) = level.written_early;
        self.bufs.early_queue.clear();
    }

    /// Keeps everything since the matching `begin_nested`, as part of the parent.
    pub fn commit_nested(&mut self) {
        let level = self.bufs.nested.pop().expect("a nested txn to commit");
        if let Some(parent) = self.bufs.nested.last_mut() {
            // The parent's own undo keeps the oldest copy of each page.
            for (pgno, buf) in level.saved {
                if !parent.allocated.contains(&pgno) && !parent.saved.contains_key(&pgno) {
                    parent.saved.insert(pgno, buf);
                }
            }
            parent.allocated.extend(level.allocated);
        }
    }

    /// Before a nested txn changes or frees a page its parent had dirty, keep a copy.
    #[inline]
    pub(super) fn save_for_nested(&mut self, pgno: u64) {
        let bufs = &mut *self.bufs;
        let Some(level) = bufs.nested.last_mut() else {
            return;
        };
        if level.allocated.contains(&pgno) || level.saved.contains_key(&pgno) {
            return;
        }
        if let Some(PageBuf::Heap(buf)) = bufs.dirty.get(pgno) {
            level.saved.insert(pgno, PageBuf::Heap(buf.clone()));
        }
    }
}
