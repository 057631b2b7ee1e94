//! Pages written before commit: a bulk load hands its finished leaves and overflow runs
//! to the file as it goes, so that its memory stays bounded instead of holding the whole
//! new tree until commit (LMDB spills dirty pages for the same reason).
//!
//! Writing such a page early is safe: it was allocated by this txn from pages that no
//! snapshot and no durable meta reaches (past the base snapshot's end, or reclaimed), so
//! no reader sees it and a crash before the commit's meta leaves it unreferenced. The
//! commit's data flush covers it as it covers the pages written at commit, before the
//! meta that makes it reachable.
//!
//! A page is queued first ([`DirtyPages::write_early`]) and written with its neighbours
//! when the queue holds [`EARLY_BATCH`] pages, in runs of consecutive pages (one vectored
//! write per run); its buffer then goes back to the spare list. Until then it is an
//! ordinary dirty page: one still queued at commit is written by the commit.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{CommitStep, Error, Result};
use crate::io::DataFile;

use super::*;

/// Pages queued before the queue is written: 1 MiB of 4 KiB pages.
const EARLY_BATCH: usize = 256;

/// The early-write state of a write txn's pages that borrows the environment; the queue
/// of pages to write and the map of pages written are the txn's `TxnBuffers`'
/// (`early_queue`, `early_written`), as its other plain data.
#[derive(Default)]
pub(super) struct EarlyWrites<'e> {
    /// Where pages go; `None` (nothing written early) under `WRITE_MAP`, whose pages are
    /// in the map already, and until [`DirtyPages::write_early_to`].
    pub(super) file: Option<&'e dyn DataFile>,
    /// One past the last page written: reads below it may go to the map.
    pub(super) end: u64,
    /// A new environment's metas, to be flushed before the first page is written.
    pub(super) new_metas: NewMetas<'e>,
}

/// What the early writes do about a new environment's unflushed metas (see
/// `WriteTxn::flush_new_metas`).
#[derive(Default)]
pub(super) enum NewMetas<'e> {
    /// Nothing: they are flushed, or the commit flushes them.
    #[default]
    NotAsked,
    /// Flush them before the first early write, after growing the file over it (so that
    /// the file system allocates them as a large file's, with the pages that follow); a
    /// failed flush sets the flag, which poisons the environment.
    Pending(&'e AtomicBool),
    /// Flushed before the first early write.
    Flushed,
}

impl<'e> DirtyPages<'e> {
    /// Lets the txn write pages before commit to `file` (the environment's data file).
    pub fn write_early_to(&mut self, file: &'e dyn DataFile) {
        if self.mapped.is_none() {
            self.early.file = Some(file);
        }
    }

    /// Makes the first early write flush a new environment's metas first (see
    /// [`NewMetas::Pending`]); `poison` is set if that flush fails. Once only.
    pub fn flush_new_metas_before_early_writes(&mut self, poison: &'e AtomicBool) {
        if matches!(self.early.new_metas, NewMetas::NotAsked) {
            self.early.new_metas = NewMetas::Pending(poison);
        }
    }

    /// True if an early write flushed a new environment's metas: the commit need not.
    pub fn new_metas_flushed_early(&self) -> bool {
        matches!(self.early.new_metas, NewMetas::Flushed)
    }

    /// Queues dirty page (or run) `pgno`, which this txn allocated and will not change
    /// again, to be written to the file before commit; writes the queue when it is full.
    /// A page a nested level may not own (dirty before the level began) stays dirty: the
    /// level's abort could not restore it once written.
    pub fn write_early(&mut self, pgno: u64) -> Result<()> {
        if self.early.file.is_none() {
            return Ok(());
        }
        if let Some(level) = self.bufs.nested.last() {
            if !level.allocated.contains(&pgno) {
                return Ok(());
            }
        }
        debug_assert!(
            self.bufs.dirty.contains_key(pgno),
            "page {pgno} is not dirty"
        );
        self.bufs.early_queue.push(pgno);
        if self.bufs.early_queue.len() >= EARLY_BATCH {
            self.flush_early()?;
        }
        Ok(())
    }

    /// Writes the queued pages, in runs of consecutive pages, and frees their buffers.
    pub(super) fn flush_early(&mut self) -> Result<()> {
        let Some(file) = self.early.file else {
            return Ok(());
        };
        let mut queue = std::mem::take(&mut self.bufs.early_queue);
        queue.sort_unstable();
        queue.dedup();
        let ps = self.page_size;
        if let (NewMetas::Pending(poison), Some(&last)) = (&self.early.new_metas, queue.last()) {
            // The file grown to what this batch's write would make it, then the metas.
            let end = (last + self.pages_of(last)) * ps as u64;
            if file.len().map_err(Error::Io)? < end {
                file.set_len(end).map_err(Error::Io)?;
            }
            file.sync_data().map_err(|source| {
                poison.store(true, Ordering::Release);
                Error::Commit {
                    step: CommitStep::FlushData,
                    source,
                }
            })?;
            self.early.new_metas = NewMetas::Flushed;
        }
        let mut i = 0;
        while i < queue.len() {
            // A run: pages whose buffers follow each other in the file.
            let mut j = i + 1;
            let mut next = queue[i] + self.pages_of(queue[i]);
            while j < queue.len() && queue[j] == next {
                next += self.pages_of(queue[j]);
                j += 1;
            }
            let run = &queue[i..j];
            let dirty = &self.bufs.dirty;
            let mut bufs = run.iter().map(|&p| match dirty.buf(p) {
                PageBuf::Heap(b) => &b[..],
                PageBuf::Mapped(_) => unreachable!("no early writes under WRITE_MAP"),
            });
            file.write_vectored_at(queue[i] * ps as u64, &mut bufs)
                .map_err(Error::Io)?;
            for &p in run {
                let Some(PageBuf::Heap(buf)) = self.bufs.dirty.remove(p) else {
                    unreachable!("a queued page is a heap page");
                };
                let count = (buf.len() / ps) as u32;
                if buf.len() == ps {
                    self.bufs.spare.push(buf);
                }
                self.bufs.early_written.insert(p, count);
            }
            self.early.end = self.early.end.max(next);
            i = j;
        }
        queue.clear();
        self.bufs.early_queue = queue;
        Ok(())
    }

    /// Pages in dirty page or run `pgno`.
    fn pages_of(&self, pgno: u64) -> u64 {
        (self.bufs.dirty.buf(pgno).len() / self.page_size) as u64
    }

    /// Forgets `pgno` in the queue (it is being freed while queued).
    pub(super) fn unqueue_early(&mut self, pgno: u64) {
        if !self.bufs.early_queue.is_empty() {
            self.bufs.early_queue.retain(|&p| p != pgno);
        }
    }

    /// If `pgno` was written early, forgets it and returns its length in pages: it is free
    /// again (the caller puts it on the loose list).
    pub(super) fn take_written_early(&mut self, pgno: u64) -> Option<u32> {
        if self.bufs.early_written.is_empty() {
            return None;
        }
        self.bufs.early_written.remove(&pgno)
    }

    /// The end of the pages the map may be read at: the base snapshot's, or past the pages
    /// written early.
    #[inline]
    pub(super) fn readable_end(&self) -> u64 {
        self.snapshot_end.max(self.early.end)
    }
}
