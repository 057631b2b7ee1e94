//! The write txn's pages: dirty copies over the base snapshot, allocation from free pages
//! and past the end, and the spare buffers kept from one txn to the next.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::MutexGuard;

use crate::error::{Error, Result};
use crate::format::meta::{DbRecord, Meta};
use crate::io::Map;

use super::*;

/// Where a dirty page's bytes are.
pub(super) enum PageBuf {
    /// In a buffer of the txn's, written to the file at commit.
    Heap(Box<[u8]>),
    /// In the writable map at the page's own place (`WRITE_MAP`): this many bytes.
    Mapped(usize),
}

impl PageBuf {
    /// The bytes of the page (or run) `pgno` this buffer holds: its own, or those of the
    /// map `map` of pages of `page_size` bytes.
    #[inline]
    pub(super) fn bytes<'b>(&'b self, map: &'b Map, page_size: usize, pgno: u64) -> &'b [u8] {
        match self {
            PageBuf::Heap(b) => b,
            PageBuf::Mapped(len) => map.slice(pgno as usize * page_size, *len),
        }
    }

    /// Its length in bytes.
    pub(super) fn len(&self) -> usize {
        match self {
            PageBuf::Heap(b) => b.len(),
            PageBuf::Mapped(len) => *len,
        }
    }
}

/// The allocations a write txn works in: the dirty-page map, page buffers kept for reuse,
/// the free-page lists, the pages known to be well formed. They live in the environment
/// (`EnvInner::txn_buffers`) behind a mutex the write txn holds from its start to its end,
/// so that beginning and ending a txn moves no buffer, and a txn allocates only what the
/// last one did not leave (emptied, with its capacity).
#[derive(Default)]
pub struct TxnBuffers {
    /// The txn's dirty pages, by page number; empty between txns.
    pub(super) dirty: DirtyTable,
    /// Single-page buffers kept for reuse (up to 128 MiB of them, across commits too).
    pub(super) spare: Vec<Box<[u8]>>,
    /// A few multi-page buffers kept for reuse (up to 8 runs of up to 16 pages: overflow
    /// runs, such as a large free-list record that every commit rewrites).
    pub(super) spare_runs: Vec<Box<[u8]>>,
    /// Free pages and their provenance; empty between txns.
    pub free: FreePages,
    /// Pages of the base snapshot known to be well formed (see [`CheckedPages`]): `touch`
    /// skips their full check. A write txn calls [`CheckedPages::begin`] with its base
    /// before use.
    pub checked: CheckedPages,
    /// The pages of the free-DB record being taken into the pool.
    record_pages: Vec<u64>,
    /// The pool merged with them, swapped in as the pool.
    pool_merged: Vec<u64>,
    /// Where the txn looks for the next reclaimable free-DB record (set up by each txn's
    /// [`DirtyPages::new`]; its list of consumed keys keeps its room from txn to txn).
    pub(super) reclaim: Reclaim,
    /// One entry per open nested txn, innermost last: what its abort must undo.
    pub(super) nested: Vec<NestLevel>,
    /// Pages queued to be written before commit (see `EarlyWrites`), first page of each.
    pub(super) early_queue: Vec<u64>,
    /// Pages written before commit (first page of each run, and its length in pages): no
    /// longer dirty, read back through the map, and the txn's to free.
    pub(super) early_written: PgnoMap<u32>,
    /// The buffer of [`DirtyPages::sorted_dirty`], empty between commits.
    write_order: WriteOrder<'static>,
    /// The dirty page numbers [`DirtyPages::sorted_dirty`] sorts, and its sort's second
    /// buffer.
    sorted_pgnos: Vec<u64>,
    sort_scratch: Vec<u64>,
    /// The latest commits that put the file's last page in no record (see [`TailRun`]).
    pub(super) tail_run: Option<TailRun>,
    /// How many looks for free-DB records near the end commits made (diagnostics, tests).
    pub tail_looks: u64,
}

/// How many entries each of [`TxnBuffers`]' lists has room for from the environment's
/// open: the first txns of a growing file then do not grow them step by step, as LMDB
/// allocates its dirty list and free-page list when it opens (`mdb_env_open`, 128K entries
/// each). Room for 4,096 pages (16 MiB of 4 KiB pages) is some 400 KiB of address space,
/// most of it never touched until a txn is that large. The dirty-page table's index starts
/// with room for [`PRESIZED_DIRTY`] pages; it grows with the txns (and shrinks after one
/// far larger than the next: `DirtyTable::drain_each`).
pub(crate) const PRESIZED_ENTRIES: usize = 4096;

/// Pages the dirty-page table's index has room for from the environment's open (see
/// [`PRESIZED_ENTRIES`]): 2,048 slots, 32 KiB.
const PRESIZED_DIRTY: usize = 1024;

impl TxnBuffers {
    /// Buffers with room for [`PRESIZED_ENTRIES`] pages each (the dirty-page table's list
    /// too), the dirty-page table's index for [`PRESIZED_DIRTY`] (the page buffers
    /// themselves are allocated as txns need them).
    pub fn presized() -> Self {
        let n = PRESIZED_ENTRIES;
        TxnBuffers {
            dirty: DirtyTable::with_capacity(PRESIZED_DIRTY, n),
            spare: Vec::with_capacity(n),
            spare_runs: Vec::new(),
            free: FreePages {
                loose: Vec::with_capacity(n),
                freed: Vec::with_capacity(n),
                pool: Vec::with_capacity(n),
            },
            // Page numbers of a 128 MiB file (4 KiB pages), one bit each.
            checked: CheckedPages::with_room_for(64 * n),
            record_pages: Vec::with_capacity(n),
            pool_merged: Vec::with_capacity(n),
            reclaim: Reclaim::default(),
            nested: Vec::new(),
            early_queue: Vec::new(),
            early_written: PgnoMap::default(),
            write_order: Vec::with_capacity(n),
            sorted_pgnos: Vec::with_capacity(n),
            sort_scratch: Vec::with_capacity(n),
            tail_run: None,
            tail_looks: 0,
        }
    }
}

/// The dirty pages in the order the commit writes them: page number and bytes, by page
/// number.
pub type WriteOrder<'p> = Vec<(u64, &'p [u8])>;

/// Empties `order` and gives its allocation to a list of another lifetime (the commit's
/// list is kept from txn to txn; no entry outlives the txn's pages).
pub fn recycle_order<'b>(mut order: WriteOrder<'_>) -> WriteOrder<'b> {
    order.clear();
    // An empty vector's buffer collected in place (same layout): nothing is mapped.
    order.into_iter().map(|(pgno, _)| (pgno, &[][..])).collect()
}

/// Free pages known to the write transaction, and where they came from.
#[derive(Default, Debug, Clone)]
pub struct FreePages {
    /// Pages allocated and then freed by this transaction: reusable at once.
    pub loose: Vec<u64>,
    /// Pages of the base snapshot freed by this transaction: recorded under its txnid.
    pub freed: Vec<u64>,
    /// Pages taken from free-DB records no reader can see: reusable now. Sorted
    /// descending, so `pop` yields the lowest page.
    pub pool: Vec<u64>,
}

impl FreePages {
    /// Empties the lists, keeping their capacity for the next txn (but not that of a huge
    /// one).
    fn clear(&mut self) {
        for list in [&mut self.loose, &mut self.freed, &mut self.pool] {
            empty_keeping(list, 1 << 16);
        }
    }
}

/// The write transaction's pages: dirty copies in memory over the map of the base snapshot.
pub struct DirtyPages<'e> {
    pub(super) map: &'e Map,
    pub(super) page_size: usize,
    /// Pages below this number exist in the file as of the base snapshot.
    pub(super) snapshot_end: u64,
    /// First page number never allocated (the file's logical end for this txn).
    pub next_pgno: u64,
    /// Allocation may not reach this page number (the map size limit).
    pub max_pgno: u64,
    /// The dirty pages, free lists and spare buffers, held for the txn's life.
    pub(super) bufs: MutexGuard<'e, TxnBuffers>,
    /// Set under `WRITE_MAP`: dirty pages live in the map.
    pub(super) mapped: Option<MappedWrites<'e>>,
    /// Pages written before commit (a bulk load's finished pages).
    pub(super) early: EarlyWrites<'e>,
    /// Bumped by every change to the free-page lists (`free`): see
    /// [`DirtyPages::free_list_edits`].
    pub(super) free_edits: u64,
    /// Under `WRITE_MAP`: a single page known to be in `dirty` (as one mapped page), or
    /// `NO_PAGE`. A put asks about the same page several times in a row (touch, then the
    /// edit, then the next level's parent); this answers without a look-up. Set only from
    /// `dirty`, and cleared whenever a page leaves it (`free`, `release_buffers`, both
    /// `&mut`). Atomic only so that the store stays `Sync` (cursors share it): the txn's
    /// thread is the only one to touch it, and it is a plain load and store.
    mapped_hot: AtomicU64,
    /// The txn committed ([`DirtyPages::note_committed`]): its dirty pages are to be marked
    /// checked as they are released.
    committed: bool,
}

/// No page: `mapped_hot`'s empty value (page numbers are far below it).
const NO_PAGE: u64 = u64::MAX;

/// A new heap buffer holding a copy of the page `src`, whose header and slots end at
/// `lower` and whose nodes begin at `upper`: those bytes are copied and the free gap
/// between them zeroed, each byte written once (a zeroed buffer would be written twice
/// where the copy lands; LMDB zeroes its new pages too).
fn copied_page(src: &[u8], lower: usize, upper: usize) -> Box<[u8]> {
    debug_assert!(lower <= upper && upper <= src.len());
    let mut buf = Vec::with_capacity(src.len());
    buf.extend_from_slice(&src[..lower]);
    buf.resize(upper, 0);
    buf.extend_from_slice(&src[upper..]);
    debug_assert_eq!(buf.len(), buf.capacity());
    buf.into_boxed_slice()
}

impl<'e> DirtyPages<'e> {
    /// Starts a write transaction over the snapshot whose last page is `last_pgno`;
    /// with `mapped`, its pages are written in place in the (writable) map. Inlined so
    /// that the txn's begin builds its pages where the txn lies (returned from a call, they
    /// were built, then copied in: about 110 instructions a begin).
    #[inline(always)]
    pub fn new(
        map: &'e Map,
        page_size: usize,
        last_pgno: u64,
        max_pgno: u64,
        mut bufs: MutexGuard<'e, TxnBuffers>,
        (free_db, limit, find): (DbRecord, u64, FindReclaimable),
        mapped: Option<MappedWrites<'e>>,
    ) -> Self {
        assert!(
            mapped.is_none() || map.is_writable(),
            "WRITE_MAP needs a writable map"
        );
        bufs.reclaim.restart(free_db, limit, find);
        debug_assert!(
            bufs.nested.is_empty() && bufs.early_queue.is_empty() && bufs.early_written.is_empty()
        );
        debug_assert!(bufs.dirty.is_empty());
        debug_assert!({
            let free = &bufs.free;
            free.loose.is_empty() && free.freed.is_empty() && free.pool.is_empty()
        });
        DirtyPages {
            map,
            page_size,
            snapshot_end: last_pgno + 1,
            next_pgno: last_pgno + 1,
            max_pgno,
            bufs,
            mapped,
            early: EarlyWrites::default(),
            free_edits: 0,
            mapped_hot: AtomicU64::new(NO_PAGE),
            committed: false,
        }
    }

    /// Where the txn looks for reclaimable free-DB records, and the keys it took.
    #[inline]
    pub fn reclaim(&self) -> &Reclaim {
        &self.bufs.reclaim
    }

    /// [`DirtyPages::reclaim`], to change.
    #[inline]
    pub fn reclaim_mut(&mut self) -> &mut Reclaim {
        &mut self.bufs.reclaim
    }

    /// The txn's free-page lists.
    pub fn free_lists_mut(&mut self) -> &mut FreePages {
        &mut self.bufs.free
    }

    /// Number of dirty pages (runs count once).
    pub fn dirty_count(&self) -> usize {
        self.bufs.dirty.len()
    }

    /// True if the txn has made no page dirty, even for a while: none is dirty, none was
    /// freed or taken from the free lists, none allocated. (LMDB keeps a page dirtied and
    /// freed again in its dirty list, as a loose page, and commits such a txn.)
    pub fn untouched(&self) -> bool {
        let bufs = &*self.bufs;
        bufs.dirty.is_empty()
            && bufs.free.loose.is_empty()
            && bufs.free.freed.is_empty()
            && bufs.reclaim.consumed.is_empty()
            && self.next_pgno == self.snapshot_end
    }

    /// The dirty pages sorted by page number, for the commit's write-out (under
    /// `WRITE_MAP`, slices of the map: the pages are in place already). Give the list back
    /// with [`DirtyPages::keep_write_order`] once written, for the next commit to reuse.
    pub fn sorted_dirty(&mut self) -> WriteOrder<'_> {
        let mut order = recycle_order(std::mem::take(&mut self.bufs.write_order));
        let bufs = &mut *self.bufs;
        let (entries, ascending) = bufs.dirty.entries();
        let (map, ps) = (self.map, self.page_size);
        if ascending || entries.len() < RADIX_FROM {
            // A small txn's pages, usually listed in order already.
            order.extend(
                entries
                    .iter()
                    .map(|e| (e.pgno, e.buf.bytes(map, ps, e.pgno))),
            );
            if !ascending {
                order.sort_unstable_by_key(|&(p, _)| p);
            }
            return order;
        }
        // Many: their numbers sorted by radix, then listed in that order.
        bufs.sorted_pgnos.clear();
        bufs.sorted_pgnos.extend(entries.iter().map(|e| e.pgno));
        sort_pgnos(&mut bufs.sorted_pgnos, &mut bufs.sort_scratch);
        let dirty = &bufs.dirty;
        order.extend(
            bufs.sorted_pgnos
                .iter()
                .map(|&p| (p, dirty.buf(p).bytes(map, ps, p))),
        );
        order
    }

    /// Keeps the allocation of a list [`DirtyPages::sorted_dirty`] gave, emptied with
    /// [`recycle_order`].
    pub fn keep_write_order(&mut self, order: WriteOrder<'static>) {
        debug_assert!(order.is_empty());
        self.bufs.write_order = order;
    }

    /// How many times the free-page lists ([`DirtyPages::free`]) changed in this txn: equal
    /// counts before and after some work mean the work allocated and freed nothing.
    pub fn free_list_edits(&self) -> u64 {
        self.free_edits
    }

    /// True if the txn's pages are written in place in the map (`WRITE_MAP`).
    pub fn writes_through_map(&self) -> bool {
        self.mapped.is_some()
    }

    /// After the commit of `meta` (written and, as its mode asks, flushed): the pages this
    /// txn wrote were built by the engine, so they are known well formed in the snapshot
    /// it made, which the checked set now describes. They join the set as the txn's end
    /// drains its dirty pages ([`DirtyPages::release_buffers`]), in the same walk.
    pub fn note_committed(&mut self, meta: &Meta) {
        self.committed = true;
        self.bufs.checked.committed(meta.txnid);
    }

    /// After a failed commit: what the file holds is not known, so nothing is trusted.
    pub fn forget_checked(&mut self) {
        self.bufs.checked.forget();
    }

    /// Drops every dirty page (after a commit, marking the single ones checked: see
    /// [`DirtyPages::note_committed`]), keeping buffers for the next transaction: single pages
    /// (as many as this txn dirtied, up to 128 MiB of them), then a few runs of up to 16
    /// pages; and empties the lists. A large txn thus hands its buffers to the next one
    /// instead of each allocating (and zeroing) pages anew; a huge one (a bulk load) does
    /// not pin its memory forever. The txn's end.
    pub fn release_buffers(&mut self) {
        const KEEP_BYTES: usize = 128 << 20;
        const KEEP_RUNS: usize = 8;
        let ps = self.page_size;
        let keep = crate::format::page::pages_in(KEEP_BYTES as u64, ps) as usize;
        self.mapped_hot.store(NO_PAGE, Ordering::Relaxed);
        let bufs = &mut *self.bufs;
        let committed = std::mem::take(&mut self.committed);
        let (checked, spare, spare_runs) =
            (&mut bufs.checked, &mut bufs.spare, &mut bufs.spare_runs);
        bufs.dirty.drain_each(|pgno, b| {
            if committed && b.len() == ps {
                checked.insert(pgno);
            }
            let PageBuf::Heap(b) = b else { return };
            if b.len() == ps {
                if spare.len() < keep {
                    spare.push(b);
                }
            } else if b.len() <= 16 * ps && spare_runs.len() < KEEP_RUNS {
                spare_runs.push(b);
            }
        });
        bufs.free.clear();
        for list in [&mut bufs.sorted_pgnos, &mut bufs.sort_scratch] {
            empty_keeping(list, 1 << 16);
        }
        bufs.reclaim.consumed.clear();
        bufs.nested.clear();
        bufs.early_queue.clear();
        // A bulk load's map of pages written early is not kept for the small txns after.
        if bufs.early_written.capacity() > 1 << 12 {
            bufs.early_written = PgnoMap::default();
        } else {
            bufs.early_written.clear();
        }
    }

    /// A buffer of `count` pages, zeroed if new (a spare one holds an old page's bytes).
    pub(super) fn new_buffer(&mut self, count: usize) -> Box<[u8]> {
        if count == 1 {
            if let Some(b) = self.bufs.spare.pop() {
                return b;
            }
        } else if let Some(i) = self
            .bufs
            .spare_runs
            .iter()
            .position(|b| b.len() == count * self.page_size)
        {
            return self.bufs.spare_runs.swap_remove(i);
        }
        vec![0u8; count * self.page_size].into_boxed_slice()
    }

    /// Takes `count` consecutive page numbers from the free pages, if they hold such a run.
    pub(super) fn take_free(&mut self, count: usize) -> Option<u64> {
        let taken = self.take_free_run(count);
        self.free_edits += u64::from(taken.is_some());
        taken
    }

    /// [`DirtyPages::take_free`] without the count of edits.
    fn take_free_run(&mut self, count: usize) -> Option<u64> {
        if count == 1 {
            if let Some(p) = self.bufs.free.loose.pop() {
                return Some(p);
            }
            return self.bufs.free.pool.pop();
        }
        // Runs come only from the pool (sorted descending): find `count` consecutive.
        let pool = &mut self.bufs.free.pool;
        if pool.len() < count {
            return None;
        }
        let mut run = 1;
        for i in (0..pool.len() - 1).rev() {
            if pool[i] == pool[i + 1] + 1 {
                run += 1;
                if run == count {
                    // pool[i..i+count] holds the run, highest first.
                    let first = pool[i + count - 1];
                    pool.drain(i..i + count);
                    return Some(first);
                }
            } else {
                run = 1;
            }
        }
        None
    }

    /// Adds the pages of a free-DB record to the pool, keeping it in descending order (a
    /// record LMDB wrote is in that order already: a merge, not a sort).
    pub(super) fn add_to_pool(&mut self, pages: &[u64]) {
        self.free_edits += 1;
        // Decoding checked it (`decode_idl_into`): a record lists its pages descending.
        debug_assert!(pages.windows(2).all(|w| w[0] > w[1]), "record out of order");
        if self.bufs.free.pool.is_empty() {
            self.bufs.free.pool.extend_from_slice(pages);
            return;
        }
        let bufs = &mut *self.bufs;
        let merged = &mut bufs.pool_merged;
        merged.clear();
        merge_descending(&bufs.free.pool, pages, merged);
        std::mem::swap(&mut bufs.free.pool, merged);
    }

    /// Takes the next free-DB record no reader can see into the pool: false once there is
    /// none (or reclaiming has ended).
    pub(super) fn reclaim_one(&mut self) -> Result<bool> {
        if !self.bufs.reclaim.is_active() {
            return Ok(false);
        }
        let mut pages = std::mem::take(&mut self.bufs.record_pages);
        let found = self.bufs.reclaim.next_record(&*self, &mut pages);
        let taken = match found {
            Ok(Some(key)) => self.take_record(key, &pages, true).map(|()| true),
            Ok(None) => {
                self.bufs.reclaim.exhausted();
                Ok(false)
            }
            Err(e) => Err(e),
        };
        self.bufs.record_pages = pages;
        taken
    }

    /// Takes free-DB record `key` (whose `pages` no reader and no durable meta reaches) into
    /// the pool, to be deleted at commit. `in_order`: the oldest record not yet taken;
    /// otherwise a newer one, taken out of order (and reclaiming ends: the next record in
    /// order could be this one).
    ///
    /// `pages` as decoding gives them (`decode_idl_into`): strictly descending, so the
    /// first and last are the ones to check against the file.
    pub fn take_record(&mut self, key: u64, pages: &[u64], in_order: bool) -> Result<()> {
        debug_assert!(pages.windows(2).all(|w| w[0] > w[1]), "record out of order");
        let mut ends = pages.first().into_iter().chain(pages.last());
        if let Some(&bad) = ends.find(|&&p| p < 2 || p >= self.snapshot_end) {
            return Err(Error::corrupted(
                bad,
                "free-list record names a page outside the file",
            ));
        }
        if in_order {
            self.bufs.reclaim.consumed(key);
        } else {
            self.bufs.reclaim.consumed_out_of_order(key);
        }
        self.add_to_pool(pages);
        Ok(())
    }

    /// Allocates from free pages, refilling the pool from free-DB records no reader can
    /// see, and only then past the end of the file.
    pub(super) fn alloc_pages(&mut self, count: usize) -> Result<u64> {
        let pgno = self.take_pgno(count)?;
        let buf = self.page_buf_for(pgno, count)?;
        self.hold(pgno, buf);
        Ok(pgno)
    }

    /// The first of `count` pages to allocate: from free pages, refilling the pool from
    /// free-DB records, and only then past the end of the file.
    fn take_pgno(&mut self, count: usize) -> Result<u64> {
        let pgno = loop {
            if let Some(p) = self.take_free(count) {
                break p;
            }
            if self.reclaim_one()? {
                continue;
            }
            let p = self.next_pgno;
            // As LMDB (`pgno + num >= me_maxpg`): the map's last page is never handed out,
            // so a txn that filled the map up to MapFull leaves the same room as LMDB's.
            if p + count as u64 >= self.max_pgno {
                return Err(Error::MapFull);
            }
            self.next_pgno += count as u64;
            break p;
        };
        Ok(pgno)
    }

    /// The buffer of `count` new pages at `pgno`: in the map under `WRITE_MAP` (which the
    /// file must cover first), else on the heap.
    fn page_buf_for(&mut self, pgno: u64, count: usize) -> Result<PageBuf> {
        Ok(match &mut self.mapped {
            Some(mapped) => {
                mapped.cover(pgno + count as u64, self.max_pgno, self.page_size)?;
                PageBuf::Mapped(count * self.page_size)
            }
            None => PageBuf::Heap(self.new_buffer(count)),
        })
    }

    /// Makes the new pages at `pgno` (in `buf`) dirty pages of the txn.
    #[inline(always)]
    fn hold(&mut self, pgno: u64, buf: PageBuf) {
        let hot = matches!(buf, PageBuf::Mapped(len) if len == self.page_size);
        let old = self.bufs.dirty.insert(pgno, buf);
        debug_assert!(old.is_none(), "page {pgno} allocated while dirty");
        if hot {
            self.mapped_hot.store(pgno, Ordering::Relaxed);
        }
        if let Some(level) = self.bufs.nested.last_mut() {
            level.allocated.insert(pgno);
        }
    }

    /// Exchanges the buffer of the single dirty page `pgno` with `buf` (of one page), with
    /// no copy: the bulk loader builds a page in its own buffer, makes it the page's
    /// content, and builds the next one in the buffer it gets back.
    pub fn swap_page(&mut self, pgno: u64, buf: &mut Box<[u8]>) {
        if !self.bufs.nested.is_empty() {
            self.save_for_nested(pgno);
        }
        match self.bufs.dirty.get_mut(pgno) {
            Some(PageBuf::Heap(page)) => {
                assert_eq!(page.len(), buf.len(), "swap_page takes one page");
                std::mem::swap(page, buf);
            }
            // Under WRITE_MAP the page lives in the map: copy it there.
            Some(PageBuf::Mapped(_)) => self.dirty_mut(pgno).copy_from_slice(buf),
            None => panic!("page {pgno} is not dirty"),
        }
    }
}

impl PageSource for DirtyPages<'_> {
    #[inline]
    fn page_size(&self) -> usize {
        self.page_size
    }

    #[inline]
    fn pages(&self, pgno: u64, count: usize) -> Result<&[u8]> {
        if self.mapped.is_some() {
            // Under WRITE_MAP every page, this txn's or the snapshot's, is read in the map
            // at its own place (no page is written early, no nested txn keeps copies): no
            // look-up in the dirty table. Pages this txn allocated end at `next_pgno`.
            let end = self.readable_end().max(self.next_pgno);
            return map_pages(self.map, self.page_size, end, pgno, count);
        }
        if let Some(b) = self.bufs.dirty.get(pgno) {
            if b.len() < count * self.page_size {
                return Err(Error::corrupted(
                    pgno,
                    "overflow run longer than its allocation",
                ));
            }
            return Ok(&b.bytes(self.map, self.page_size, pgno)[..count * self.page_size]);
        }
        map_pages(self.map, self.page_size, self.readable_end(), pgno, count)
    }
}

impl PageStore for DirtyPages<'_> {
    #[inline]
    fn is_dirty(&self, pgno: u64) -> bool {
        if self.mapped_hot.load(Ordering::Relaxed) == pgno {
            return true;
        }
        match self.bufs.dirty.get(pgno) {
            Some(PageBuf::Mapped(len)) => {
                if *len == self.page_size {
                    self.mapped_hot.store(pgno, Ordering::Relaxed);
                }
                true
            }
            Some(PageBuf::Heap(_)) => true,
            None => false,
        }
    }

    #[inline(always)]
    // The one `unsafe` outside `io`, `lock` and `env`: under WRITE_MAP the write txn's page
    // is a slice of the map, and only this store knows which pages nothing else reaches.
    #[allow(unsafe_code)]
    fn dirty_mut(&mut self, pgno: u64) -> &mut [u8] {
        if self.mapped_hot.load(Ordering::Relaxed) == pgno {
            debug_assert!(
                self.bufs.nested.is_empty()
                    && matches!(self.bufs.dirty.get(pgno), Some(PageBuf::Mapped(l)) if *l == self.page_size),
                "the hot page {pgno} is not a dirty mapped page"
            );
            // SAFETY: as below: `mapped_hot` names a single page this txn holds in `dirty`
            // as a mapped page (set from `dirty`, cleared when a page leaves it; nested
            // txns, which would need a copy first, do not exist under WRITE_MAP).
            return unsafe {
                self.map
                    .pages_mut(pgno as usize * self.page_size, self.page_size)
            };
        }
        if !self.bufs.nested.is_empty() {
            self.save_for_nested(pgno);
        }
        match self.bufs.dirty.get_mut(pgno) {
            Some(PageBuf::Heap(b)) => b,
            Some(PageBuf::Mapped(len)) => {
                if *len == self.page_size {
                    self.mapped_hot.store(pgno, Ordering::Relaxed);
                }
                // SAFETY: `pgno` was allocated to this write txn (the only one) from pages
                // no snapshot reaches: past the base snapshot's end, or from free-DB records
                // older than every reader and than both metas (`Reclaim`), or pages it
                // allocated itself. Nothing else reads or writes them, and the file covers
                // them (`MappedWrites::cover` at allocation). The slice borrows `self`
                // mutably, so the txn holds no other reference to the page meanwhile.
                unsafe { self.map.pages_mut(pgno as usize * self.page_size, *len) }
            }
            None => panic!("page {pgno} is not dirty"),
        }
    }

    fn touch(&mut self, pgno: u64) -> Result<u64> {
        if self.is_dirty(pgno) {
            return Ok(pgno);
        }
        // A page of the base snapshot, or one this txn wrote early.
        let src = map_pages(self.map, self.page_size, self.readable_end(), pgno, 1)?;
        // Edits in place trust node offsets: check the whole page before taking it over,
        // unless its bytes were checked or written by this handle since (`CheckedPages`);
        // then its bounds are read straight from its header (a parse cost some 30
        // instructions a touch).
        let checked = self.bufs.checked.contains(pgno);
        let known = if checked {
            crate::format::page::known_page_bounds(src, pgno)
        } else {
            None
        };
        let (lower, upper) = match known {
            Some(bounds) => bounds,
            None => {
                let view = crate::format::page::PageView::parse(src, pgno)?;
                if !checked {
                    view.validate_all()?;
                    self.bufs.checked.insert(pgno);
                }
                view.bounds()
            }
        };
        // Copy the header and slots, and the nodes; the free gap between them holds
        // nothing (as in LMDB, whatever bytes it has are never read).
        let copy = |buf: &mut [u8], new: u64| {
            buf[..lower].copy_from_slice(&src[..lower]);
            buf[upper..].copy_from_slice(&src[upper..]);
            crate::format::page::edit::set_pgno(buf, new);
        };
        let new = self.take_pgno(1)?;
        // Filled before it joins the dirty pages: no look-up to find it again.
        if self.mapped.is_some() {
            let mapped = self.page_buf_for(new, 1)?;
            self.hold(new, mapped);
            copy(self.dirty_mut(new), new);
        } else if let Some(mut buf) = self.bufs.spare.pop() {
            copy(&mut buf, new);
            self.hold(new, PageBuf::Heap(buf));
        } else {
            let mut buf = copied_page(src, lower, upper);
            crate::format::page::edit::set_pgno(&mut buf, new);
            self.hold(new, PageBuf::Heap(buf));
        }
        if self.bufs.early_written.is_empty()
            && self.bufs.nested.is_empty()
            && pgno < self.snapshot_end
        {
            // A page of the base snapshot (not dirty, checked above; at least 2, as every
            // page the map gives out past the metas): what `free` does for it, without its
            // look-ups in the dirty map.
            debug_assert!(pgno >= 2 && !self.bufs.dirty.contains_key(pgno));
            self.bufs.free.freed.push(pgno);
            self.free_edits += 1;
        } else {
            self.free(pgno, 1)?;
        }
        Ok(new)
    }

    fn alloc(&mut self, count: usize) -> Result<u64> {
        self.alloc_pages(count)
    }

    fn free(&mut self, pgno: u64, count: usize) -> Result<()> {
        if let Some(written) = self.take_written_early(pgno) {
            // This txn's page, written early: free to reuse at once, as a dirty one.
            if count == 0 || count > written as usize {
                return Err(Error::corrupted(
                    pgno,
                    "freeing more pages than were written",
                ));
            }
            self.bufs.free.loose.extend(pgno..pgno + u64::from(written));
            self.free_edits += 1;
            return Ok(());
        }
        let held = match self.bufs.dirty.get(pgno) {
            Some(buf) => count
                .checked_mul(self.page_size)
                .is_some_and(|len| len <= buf.len()),
            None => {
                pgno >= 2
                    && pgno
                        .checked_add(count as u64)
                        .is_some_and(|end| end <= self.snapshot_end)
            }
        };
        if count == 0 || !held {
            return Err(Error::corrupted(pgno, "freeing pages outside the file"));
        }
        if !self.bufs.nested.is_empty() {
            self.save_for_nested(pgno);
        }
        if self.mapped_hot.load(Ordering::Relaxed) == pgno {
            self.mapped_hot.store(NO_PAGE, Ordering::Relaxed);
        }
        if let Some(buf) = self.bufs.dirty.remove(pgno) {
            self.unqueue_early(pgno);
            if let PageBuf::Heap(buf) = buf {
                if buf.len() == self.page_size {
                    self.bufs.spare.push(buf);
                }
            }
            self.bufs.free.loose.extend(pgno..pgno + count as u64);
        } else {
            self.bufs.free.freed.extend(pgno..pgno + count as u64);
        }
        self.free_edits += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::copied_page;

    #[test]
    fn a_copied_page_keeps_header_slots_and_nodes_and_zeroes_the_gap() {
        let src: Vec<u8> = (0..4096u32).map(|i| (i % 251 + 1) as u8).collect();
        let page = copied_page(&src, 40, 3000);
        assert_eq!(page.len(), src.len());
        assert_eq!(&page[..40], &src[..40]);
        assert!(page[40..3000].iter().all(|&b| b == 0));
        assert_eq!(&page[3000..], &src[3000..]);
        // A full page (no gap) and an empty one (all gap but the header).
        assert_eq!(&*copied_page(&src, 2048, 2048), &src[..]);
        let empty = copied_page(&src, 16, 4096);
        assert_eq!(&empty[..16], &src[..16]);
        assert!(empty[16..].iter().all(|&b| b == 0));
    }
}
