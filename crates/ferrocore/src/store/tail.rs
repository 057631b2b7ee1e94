//! Giving the end of the file back: the free pages at the tail leave the free list, and
//! the snapshot ends before them (the commit then shortens the file).
//!
//! Only pages the txn may reuse at once can go: those it took from free-DB records no
//! reader and no durable meta can reach (the pool) and those it allocated and freed again
//! (loose). Its own frees of base-snapshot pages are still reachable from the base
//! snapshot, so a tail page among them stops the trim.

use crate::error::Result;

use super::*;

/// A run of consecutive commits of this process that each ended the file at the same last
/// page and put that page in no free-DB record: it was in none of the free lists they
/// saved, and none of them wrote a record on overflow pages (which could lie on it). Kept
/// in [`TxnBuffers`] from commit to commit, for `freelist::take_tail_records`: once a look
/// for free-DB records near the end, made within the run, found none that lists the last
/// page or is stored on it (`looked`), another look could find none either while the run
/// goes on from the base of the txn that would make it, and is skipped.
///
/// Why: a look reads the newest records the txn may take (those keyed below its base's
/// txn id). The one that look within the run did not read, the base's own (a reader of the
/// snapshot before may still need it), was written by the run's commit before the look;
/// the records newer than those it read were all written by the run's commits, as was
/// any record rewritten since (a pool's remainder under an old key): none lists the last
/// page, none lies on overflow pages. So a later look would read records that the look
/// read or that the run wrote. Another process's commit ends the run (the next base is not
/// the run's commit); so does a failed commit (its txn id never becomes a base).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TailRun {
    /// The last page of the file at every commit of the run.
    pub last_page: u64,
    /// The txn id of the run's latest commit.
    pub txnid: u64,
    /// A look made within the run found no record listing the last page or stored on it
    /// (with no reader older than its base, which would have kept records from it).
    pub looked: bool,
}

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
        assert!(self.bufs.nested.is_empty(), "trimming inside a nested txn");
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
            debug_assert!(!bufs.dirty.contains_key(last), "free page {last} is dirty");
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

    /// The run of clean commits (see [`TailRun`]) if this txn (`txnid`) continues it: its
    /// base is the run's latest commit, and the file still ends at the run's last page.
    pub fn tail_run(&self, txnid: u64) -> Option<TailRun> {
        self.bufs
            .tail_run
            .filter(|run| run.txnid + 1 == txnid && run.last_page + 1 == self.next_pgno)
    }

    /// Records that commit `txnid` looked for free-DB records near the end, and whether
    /// it found nothing it could give back with no reader older than its base.
    pub fn note_tail_look(&mut self, txnid: u64, found_nothing: bool) {
        self.bufs.tail_looks += 1;
        self.bufs.tail_run = self.tail_run(txnid).map(|run| TailRun {
            looked: found_nothing,
            ..run
        });
    }

    /// After commit `txnid`'s free-list save (its lists are what the records hold now):
    /// the run goes on, or a new one starts, if the last page is in none of them and no
    /// record went on overflow pages (`overflow_records`); else there is no run.
    pub fn note_tail_saved(&mut self, txnid: u64, overflow_records: bool) {
        let last = self.next_pgno - 1;
        let FreePages { loose, freed, pool } = &self.bufs.free;
        // The save planned its records from the lists sorted in descending order, and
        // they have not changed since: the last page is in a list if it is its first.
        let listed = [loose, freed, pool].iter().any(|list| {
            debug_assert_eq!(list.first() == Some(&last), list.contains(&last));
            list.first() == Some(&last)
        });
        let looked = self.tail_run(txnid).is_some_and(|run| run.looked);
        self.bufs.tail_run = (!listed && !overflow_records).then_some(TailRun {
            last_page: last,
            txnid,
            looked,
        });
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
