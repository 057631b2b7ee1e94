//! The seam between the tree code and page storage.
//!
//! Tree algorithms (`btree`, `cursor`) see pages only through [`PageSource`] (read a page
//! by number) and [`PageStore`] (make a page writable, allocate, free). The map-backed
//! implementations live here: [`SnapshotPages`] for read transactions and [`DirtyPages`]
//! for the write transaction, which keeps every page it changes in memory until commit
//! (copy-on-write: a page reachable from a committed meta is never written in place).
//! Under `WRITE_MAP` the write txn's pages are not in memory but in the writable map
//! itself, at their own page numbers: pages no reader and no durable meta can reach.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::io::{DataFile, Map};

/// Read access to pages by number.
pub trait PageSource {
    /// Page size in bytes.
    fn page_size(&self) -> usize;

    /// `count` consecutive pages starting at `pgno`, checked to lie within the snapshot.
    fn pages(&self, pgno: u64, count: usize) -> Result<&[u8]>;

    /// One page.
    #[inline]
    fn page(&self, pgno: u64) -> Result<&[u8]> {
        self.pages(pgno, 1)
    }
}

/// Write access: what copy-on-write tree mutation needs.
pub trait PageStore: PageSource {
    /// True if `pgno` was allocated by this transaction (and so may be written in place).
    fn is_dirty(&self, pgno: u64) -> bool;

    /// The buffer of a dirty page (or overflow run). Panics if `pgno` is not dirty.
    fn dirty_mut(&mut self, pgno: u64) -> &mut [u8];

    /// Returns the number of a writable copy of `pgno`: itself if dirty, else a new page
    /// holding a copy (the old page is freed as of this transaction).
    fn touch(&mut self, pgno: u64) -> Result<u64>;

    /// Allocates `count` consecutive new pages (content unspecified).
    fn alloc(&mut self, count: usize) -> Result<u64>;

    /// Frees `count` consecutive pages starting at `pgno`. `Corrupted` (and nothing freed)
    /// unless they are pages this store holds: at least one, past the metas, within the
    /// snapshot or within the dirty run at `pgno` (a run length read from a damaged file
    /// may say anything).
    fn free(&mut self, pgno: u64, count: usize) -> Result<()>;
}

/// Pages of a committed snapshot, read straight from the map.
pub struct SnapshotPages<'e> {
    map: &'e Map,
    page_size: usize,
    /// Pages `0..end_pgno` belong to the snapshot.
    end_pgno: u64,
}

impl<'e> SnapshotPages<'e> {
    /// A view of the snapshot whose last page is `last_pgno`.
    pub fn new(map: &'e Map, page_size: usize, last_pgno: u64) -> Self {
        SnapshotPages {
            map,
            page_size,
            end_pgno: last_pgno + 1,
        }
    }
}

#[inline]
fn map_pages(map: &Map, page_size: usize, end_pgno: u64, pgno: u64, count: usize) -> Result<&[u8]> {
    match pgno.checked_add(count as u64) {
        Some(end) if pgno >= 2 && end <= end_pgno => {
            Ok(map.slice(pgno as usize * page_size, count * page_size))
        }
        _ => Err(Error::PageNotFound { pgno }),
    }
}

impl PageSource for SnapshotPages<'_> {
    #[inline]
    fn page_size(&self) -> usize {
        self.page_size
    }

    #[inline]
    fn pages(&self, pgno: u64, count: usize) -> Result<&[u8]> {
        map_pages(self.map, self.page_size, self.end_pgno, pgno, count)
    }
}

/// A cheap hasher for page numbers (they are already well spread in their low bits).
#[derive(Default)]
pub struct PgnoHasher(u64);

impl Hasher for PgnoHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
}

/// Map from page number to something, hashed cheaply.
pub type PgnoMap<V> = HashMap<u64, V, BuildHasherDefault<PgnoHasher>>;

/// Appends to `out` the elements of `a` and `b`, both in descending order, in descending
/// order. Walks the shorter list and copies the longer one in blocks between its elements
/// (a commit merges a few pages into a free list of thousands).
pub fn merge_descending(a: &[u64], b: &[u64], out: &mut Vec<u64>) {
    let (short, mut long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    out.reserve(a.len() + b.len());
    for &x in short {
        // The elements of `long` that come before `x` (greater, or equal: the order
        // between equal elements does not matter).
        let before = long.partition_point(|&y| y >= x);
        out.extend_from_slice(&long[..before]);
        out.push(x);
        long = &long[before..];
    }
    out.extend_from_slice(long);
}

/// Where a dirty page's bytes are.
enum PageBuf {
    /// In a buffer of the txn's, written to the file at commit.
    Heap(Box<[u8]>),
    /// In the writable map at the page's own place (`WRITE_MAP`): this many bytes.
    Mapped(usize),
}

impl PageBuf {
    fn len(&self) -> usize {
        match self {
            PageBuf::Heap(b) => b.len(),
            PageBuf::Mapped(len) => *len,
        }
    }
}

/// What a write txn leaves to the next one so that it allocates less: page buffers and
/// the dirty-page map's table (emptied).
#[derive(Default)]
pub struct SpareBuffers {
    /// Single pages (up to 128 MiB of them), then a few runs of up to 16 pages.
    pages: Vec<Box<[u8]>>,
    /// An empty dirty-page map with the capacity the last txn needed.
    dirty: PgnoMap<PageBuf>,
}

/// Under `WRITE_MAP`: the data file, which must cover a page before the txn writes it
/// through the map, and how many pages it covers.
pub struct MappedWrites<'e> {
    file: &'e dyn DataFile,
    file_pages: u64,
}

impl<'e> MappedWrites<'e> {
    /// Writes through the map of `file`, whose length is `file_len` bytes.
    pub fn new(file: &'e dyn DataFile, file_len: u64, page_size: usize) -> Self {
        MappedWrites {
            file,
            file_pages: file_len / page_size as u64,
        }
    }

    /// Grows the file to cover pages `..end` (and some room beyond, up to `max_pgno`, so
    /// that a growing txn does not extend it page by page).
    fn cover(&mut self, end: u64, max_pgno: u64, page_size: usize) -> Result<()> {
        if end <= self.file_pages {
            return Ok(());
        }
        let room = (self.file_pages / 8).max((1 << 20) / page_size as u64);
        let target = end.max(self.file_pages + room).min(max_pgno).max(end);
        self.file.set_len(target * page_size as u64)?;
        self.file_pages = target;
        Ok(())
    }
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

/// The write transaction's pages: dirty copies in memory over the map of the base snapshot.
pub struct DirtyPages<'e> {
    map: &'e Map,
    page_size: usize,
    /// Pages below this number exist in the file as of the base snapshot.
    snapshot_end: u64,
    /// First page number never allocated (the file's logical end for this txn).
    pub next_pgno: u64,
    /// Allocation may not reach this page number (the map size limit).
    pub max_pgno: u64,
    dirty: PgnoMap<PageBuf>,
    /// Set under `WRITE_MAP`: dirty pages live in the map.
    mapped: Option<MappedWrites<'e>>,
    /// Single-page buffers kept for reuse (across commits too).
    spare: Vec<Box<[u8]>>,
    /// A few multi-page buffers kept for reuse (overflow runs, such as a large free-list
    /// record that every commit rewrites).
    spare_runs: Vec<Box<[u8]>>,
    /// Free pages and their provenance.
    pub free: FreePages,
    /// Where the next free-DB record to reclaim is looked for.
    pub reclaim: Reclaim,
    /// One entry per open nested txn, innermost last: what its abort must undo.
    nested: Vec<NestLevel>,
}

/// Finds the first free-DB record with a key in `from..limit` and returns its key and
/// pages. The free list's format is not the store's business: the write txn plugs in
/// `freelist::next_reclaimable`.
pub type FindReclaimable = fn(
    src: &dyn PageSource,
    free_db: &DbRecord,
    from: u64,
    limit: u64,
) -> Result<Option<(u64, Vec<u64>)>>;

/// Where a write txn's store looks for the next reclaimable free-DB record when its free
/// pages run out (the refill hook of the page allocator).
#[derive(Clone, Debug)]
pub struct Reclaim {
    /// The free DB as of the txn's base snapshot (it does not change until commit).
    free_db: DbRecord,
    /// Records with keys below this may be reclaimed.
    limit: u64,
    /// Look for keys `>= next_key`.
    next_key: u64,
    /// Keys consumed so far, to delete at commit.
    pub consumed: Vec<u64>,
    active: bool,
    find: FindReclaimable,
}

impl Reclaim {
    /// Reclaiming from `free_db` records with keys `< limit`, found by `find`.
    pub fn new(free_db: DbRecord, limit: u64, find: FindReclaimable) -> Self {
        Reclaim {
            free_db,
            limit,
            next_key: 0,
            consumed: Vec::new(),
            active: true,
            find,
        }
    }

    /// True while more records may be found.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// The next record not yet taken, if any: its key and pages.
    fn next_record(&self, src: &dyn PageSource) -> Result<Option<(u64, Vec<u64>)>> {
        (self.find)(src, &self.free_db, self.next_key, self.limit)
    }

    /// Records that `key` was taken.
    pub fn consumed(&mut self, key: u64) {
        self.consumed.push(key);
        self.next_key = key + 1;
    }

    /// No more records to take (or no more taking: commit has begun).
    pub fn exhausted(&mut self) {
        self.active = false;
    }
}

/// What a nested txn changed in its parent's pages, so that aborting it can restore them.
struct NestLevel {
    /// Pages dirty before the nested txn began that it has changed or freed: their
    /// content as the parent left it (always heap buffers: no nesting under WRITE_MAP).
    saved: PgnoMap<PageBuf>,
    /// Pages the nested txn allocated.
    allocated: std::collections::HashSet<u64, BuildHasherDefault<PgnoHasher>>,
    /// The parent's free-page lists, allocation point and reclaim position.
    free: FreePages,
    next_pgno: u64,
    reclaim: Reclaim,
}

impl<'e> DirtyPages<'e> {
    /// Starts a write transaction over the snapshot whose last page is `last_pgno`;
    /// with `mapped`, its pages are written in place in the (writable) map.
    pub fn new(
        map: &'e Map,
        page_size: usize,
        last_pgno: u64,
        max_pgno: u64,
        spare: SpareBuffers,
        reclaim: Reclaim,
        mapped: Option<MappedWrites<'e>>,
    ) -> Self {
        assert!(
            mapped.is_none() || map.is_writable(),
            "WRITE_MAP needs a writable map"
        );
        let SpareBuffers {
            pages: mut spare,
            dirty,
        } = spare;
        debug_assert!(dirty.is_empty());
        // `take_spare` put the runs last.
        let mut spare_runs = Vec::new();
        while spare.last().is_some_and(|b| b.len() != page_size) {
            spare_runs.extend(spare.pop());
        }
        DirtyPages {
            map,
            page_size,
            snapshot_end: last_pgno + 1,
            next_pgno: last_pgno + 1,
            max_pgno,
            dirty,
            mapped,
            spare,
            spare_runs,
            free: FreePages::default(),
            reclaim,
            nested: Vec::new(),
        }
    }

    /// Number of dirty pages (runs count once).
    pub fn dirty_count(&self) -> usize {
        self.dirty.len()
    }

    /// The dirty pages sorted by page number, for the commit's write-out (under
    /// `WRITE_MAP`, slices of the map: the pages are in place already).
    pub fn sorted_dirty(&self) -> Vec<(u64, &[u8])> {
        let mut v: Vec<(u64, &[u8])> = self
            .dirty
            .iter()
            .map(|(&p, b)| (p, self.dirty_bytes(p, b)))
            .collect();
        v.sort_unstable_by_key(|&(p, _)| p);
        v
    }

    /// True if the txn's pages are written in place in the map (`WRITE_MAP`).
    pub fn writes_through_map(&self) -> bool {
        self.mapped.is_some()
    }

    /// The bytes of dirty page `pgno`, whose buffer is `buf`.
    #[inline]
    fn dirty_bytes<'s>(&'s self, pgno: u64, buf: &'s PageBuf) -> &'s [u8] {
        match buf {
            PageBuf::Heap(b) => b,
            PageBuf::Mapped(len) => self.map.slice(pgno as usize * self.page_size, *len),
        }
    }

    /// Drops every dirty page, returning buffers for the next transaction: single pages
    /// (as many as this txn dirtied, up to 128 MiB of them), then a few runs of up to 16
    /// pages. A large txn thus hands its buffers to the next one instead of each allocating
    /// (and zeroing) pages anew; a huge one (a bulk load) does not pin its memory forever.
    pub fn take_spare(&mut self) -> SpareBuffers {
        const KEEP_BYTES: usize = 128 << 20;
        const KEEP_RUNS: usize = 8;
        let ps = self.page_size;
        let keep = KEEP_BYTES / ps;
        for (_, b) in self.dirty.drain() {
            let PageBuf::Heap(b) = b else { continue };
            if b.len() == ps {
                if self.spare.len() < keep {
                    self.spare.push(b);
                }
            } else if b.len() <= 16 * ps && self.spare_runs.len() < KEEP_RUNS {
                self.spare_runs.push(b);
            }
        }
        let mut pages = std::mem::take(&mut self.spare);
        pages.append(&mut self.spare_runs);
        SpareBuffers {
            pages,
            dirty: std::mem::take(&mut self.dirty),
        }
    }

    fn new_buffer(&mut self, count: usize) -> Box<[u8]> {
        if count == 1 {
            if let Some(b) = self.spare.pop() {
                return b;
            }
        } else if let Some(i) = self
            .spare_runs
            .iter()
            .position(|b| b.len() == count * self.page_size)
        {
            return self.spare_runs.swap_remove(i);
        }
        vec![0u8; count * self.page_size].into_boxed_slice()
    }

    /// Takes `count` consecutive page numbers from the free pages, if they hold such a run.
    fn take_free(&mut self, count: usize) -> Option<u64> {
        if count == 1 {
            if let Some(p) = self.free.loose.pop() {
                return Some(p);
            }
            return self.free.pool.pop();
        }
        // Runs come only from the pool (sorted descending): find `count` consecutive.
        let pool = &mut self.free.pool;
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
    fn add_to_pool(&mut self, mut pages: Vec<u64>) {
        if !pages.windows(2).all(|w| w[0] > w[1]) {
            pages.sort_unstable_by(|a, b| b.cmp(a));
        }
        if self.free.pool.is_empty() {
            self.free.pool = pages;
            return;
        }
        let pool = std::mem::take(&mut self.free.pool);
        self.free.pool.reserve(pool.len() + pages.len());
        merge_descending(&pool, &pages, &mut self.free.pool);
    }

    /// Allocates from free pages, refilling the pool from free-DB records no reader can
    /// see, and only then past the end of the file.
    fn alloc_pages(&mut self, count: usize) -> Result<u64> {
        let pgno = loop {
            if let Some(p) = self.take_free(count) {
                break p;
            }
            if self.reclaim.is_active() {
                if let Some((key, pages)) = self.reclaim.next_record(&*self)? {
                    if let Some(&bad) = pages.iter().find(|&&p| p < 2 || p >= self.snapshot_end) {
                        return Err(Error::corrupted(
                            bad,
                            "free-list record names a page outside the file",
                        ));
                    }
                    self.reclaim.consumed(key);
                    self.add_to_pool(pages);
                    continue;
                }
                self.reclaim.exhausted();
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
        let buf = match &mut self.mapped {
            Some(mapped) => {
                // The page is written through the map: the file must cover it first.
                mapped.cover(pgno + count as u64, self.max_pgno, self.page_size)?;
                PageBuf::Mapped(count * self.page_size)
            }
            None => PageBuf::Heap(self.new_buffer(count)),
        };
        let old = self.dirty.insert(pgno, buf);
        debug_assert!(old.is_none(), "page {pgno} allocated while dirty");
        if let Some(level) = self.nested.last_mut() {
            level.allocated.insert(pgno);
        }
        Ok(pgno)
    }

    /// Starts a nested txn: from here on, changes can be undone by [`Self::abort_nested`].
    pub fn begin_nested(&mut self) {
        assert!(self.mapped.is_none(), "no nested txn under WRITE_MAP");
        self.nested.push(NestLevel {
            saved: PgnoMap::default(),
            allocated: Default::default(),
            free: self.free.clone(),
            next_pgno: self.next_pgno,
            reclaim: self.reclaim.clone(),
        });
    }

    /// Undoes everything since the matching `begin_nested`.
    pub fn abort_nested(&mut self) {
        let level = self.nested.pop().expect("a nested txn to abort");
        for pgno in level.allocated {
            if let Some(PageBuf::Heap(buf)) = self.dirty.remove(&pgno) {
                if buf.len() == self.page_size {
                    self.spare.push(buf);
                }
            }
        }
        for (pgno, buf) in level.saved {
            self.dirty.insert(pgno, buf);
        }
        self.free = level.free;
        self.next_pgno = level.next_pgno;
        self.reclaim = level.reclaim;
    }

    /// Keeps everything since the matching `begin_nested`, as part of the parent.
    pub fn commit_nested(&mut self) {
        let level = self.nested.pop().expect("a nested txn to commit");
        if let Some(parent) = self.nested.last_mut() {
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
    fn save_for_nested(&mut self, pgno: u64) {
        let Some(level) = self.nested.last_mut() else {
            return;
        };
        if level.allocated.contains(&pgno) || level.saved.contains_key(&pgno) {
            return;
        }
        if let Some(PageBuf::Heap(buf)) = self.dirty.get(&pgno) {
            level.saved.insert(pgno, PageBuf::Heap(buf.clone()));
        }
    }

    /// Exchanges the buffer of the single dirty page `pgno` with `buf` (of one page), with
    /// no copy: the bulk loader builds a page in its own buffer, makes it the page's
    /// content, and builds the next one in the buffer it gets back.
    pub fn swap_page(&mut self, pgno: u64, buf: &mut Box<[u8]>) {
        if !self.nested.is_empty() {
            self.save_for_nested(pgno);
        }
        match self.dirty.get_mut(&pgno) {
            Some(PageBuf::Heap(page)) => {
                assert_eq!(page.len(), buf.len(), "swap_page takes one page");
                std::mem::swap(page, buf);
            }
            // Under WRITE_MAP the page lives in the map: copy it there.
            Some(PageBuf::Mapped(_)) => self.dirty_mut(pgno).copy_from_slice(buf),
            None => panic!("page {pgno} is not dirty"),
        }
    }

    /// Reads the base snapshot's copy of a page, bypassing dirty copies.
    pub fn snapshot_pages(&self, pgno: u64, count: usize) -> Result<&'e [u8]> {
        map_pages(self.map, self.page_size, self.snapshot_end, pgno, count)
    }
}

impl PageSource for DirtyPages<'_> {
    #[inline]
    fn page_size(&self) -> usize {
        self.page_size
    }

    #[inline]
    fn pages(&self, pgno: u64, count: usize) -> Result<&[u8]> {
        if let Some(b) = self.dirty.get(&pgno) {
            if b.len() < count * self.page_size {
                return Err(Error::corrupted(
                    pgno,
                    "overflow run longer than its allocation",
                ));
            }
            return Ok(&self.dirty_bytes(pgno, b)[..count * self.page_size]);
        }
        map_pages(self.map, self.page_size, self.snapshot_end, pgno, count)
    }
}

impl PageStore for DirtyPages<'_> {
    #[inline]
    fn is_dirty(&self, pgno: u64) -> bool {
        self.dirty.contains_key(&pgno)
    }

    #[inline]
    // The one `unsafe` outside `io`, `lock` and `env`: under WRITE_MAP the write txn's page
    // is a slice of the map, and only this store knows which pages nothing else reaches.
    #[allow(unsafe_code)]
    fn dirty_mut(&mut self, pgno: u64) -> &mut [u8] {
        if !self.nested.is_empty() {
            self.save_for_nested(pgno);
        }
        match self.dirty.get_mut(&pgno) {
            Some(PageBuf::Heap(b)) => b,
            Some(PageBuf::Mapped(len)) => {
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
        let src = self.snapshot_pages(pgno, 1)?;
        // Edits in place trust node offsets: check the whole page before taking it over.
        let view = crate::format::page::PageView::parse(src, pgno)?;
        view.validate_all()?;
        let (lower, upper) = view.bounds();
        let new = self.alloc(1)?;
        let buf = self.dirty_mut(new);
        // Copy the header and slots, and the nodes; the free gap between them holds
        // nothing (as in LMDB, whatever bytes it has are never read).
        buf[..lower].copy_from_slice(&src[..lower]);
        buf[upper..].copy_from_slice(&src[upper..]);
        crate::format::page::edit::set_pgno(buf, new);
        self.free(pgno, 1)?;
        Ok(new)
    }

    fn alloc(&mut self, count: usize) -> Result<u64> {
        self.alloc_pages(count)
    }

    fn free(&mut self, pgno: u64, count: usize) -> Result<()> {
        let held = match self.dirty.get(&pgno) {
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
        if !self.nested.is_empty() {
            self.save_for_nested(pgno);
        }
        if let Some(buf) = self.dirty.remove(&pgno) {
            if let PageBuf::Heap(buf) = buf {
                if buf.len() == self.page_size {
                    self.spare.push(buf);
                }
            }
            self.free.loose.extend(pgno..pgno + count as u64);
        } else {
            self.free.freed.extend(pgno..pgno + count as u64);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::merge_descending;

    #[test]
    fn merge_descending_matches_a_sort() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for round in 0..200 {
            let (na, nb) = ((next() % 40) as usize, (next() % (1 + round)) as usize);
            let mut a: Vec<u64> = (0..na).map(|_| next() % 500).collect();
            let mut b: Vec<u64> = (0..nb).map(|_| next() % 500).collect();
            a.sort_unstable_by(|x, y| y.cmp(x));
            b.sort_unstable_by(|x, y| y.cmp(x));
            let mut out = vec![9999];
            merge_descending(&a, &b, &mut out);
            let mut want: Vec<u64> = a.iter().chain(&b).copied().collect();
            want.sort_unstable_by(|x, y| y.cmp(x));
            assert_eq!(out[0], 9999, "appends to what `out` holds");
            assert_eq!(&out[1..], &want[..], "a={a:?} b={b:?}");
        }
    }
}
