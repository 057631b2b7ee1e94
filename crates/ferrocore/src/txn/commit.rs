//! The commit's I/O, as named steps in LMDB's order. Everything here goes through the
//! environment's [`DataFile`](crate::io::DataFile); nothing else in a commit touches the
//! file.
//!
//! 1. [`CommitStep::GrowFile`]: the file is made to cover every page the meta will count,
//!    before anything is written to them (a page written through a writable map must lie
//!    within the file). Skipped when the file's length is known (this process wrote it
//!    last) and step 2 writes the last page the meta counts: that write grows the file,
//!    as LMDB's writes past the end do, without an `ftruncate` (which, on a file this
//!    process maps, also walks the map past the new end).
//! 2. [`CommitStep::WriteData`]: the dirty pages, sorted by page number, each run of
//!    adjacent pages in vectored writes.
//! 3. [`CommitStep::FlushData`]: `fdatasync`, unless `NO_SYNC`.
//! 4. [`CommitStep::WriteMeta`]: meta page `txnid & 1`, the older of the two.
//! 5. [`CommitStep::FlushMeta`]: unless `NO_SYNC` or `NO_META_SYNC`, the meta write is
//!    synced, in one call with step 4 on Linux (`RWF_DSYNC`, as LMDB's `O_DSYNC`
//!    descriptor; see `DataFile::write_at_synced`).
//! 6. Cut the file's end (when the map grows on demand, see [`FileShrink`]): after a
//!    flushed meta, the file is cut to the pages the two metas on disk count, if that
//!    frees more than a quarter of it and 1 MiB (under `WRITE_MAP`, whose file grows in
//!    steps of four, to the step that holds them, if it is longer than the step for twice
//!    as many). Best effort: a
//!    failure leaves the file longer and fails nothing.
//!
//! Then the txn id is published and readers see the commit.
//!
//! What a failure leaves (the README's durability section has the same table):
//!
//! | step fails | the txn | the environment |
//! |---|---|---|
//! | GrowFile, WriteData | fails (`Error::Commit`), must be aborted | usable: the last commit stands, the next write txn works |
//! | FlushData, WriteMeta, FlushMeta | fails | poisoned: write txns get `Error::Panic` until it is reopened; read txns keep working |
//!
//! Steps 1 and 2 only touch pages no snapshot reaches (copy-on-write), so failing there
//! loses nothing. A failed flush is different: the kernel may have dropped the pages it
//! could not write while the page cache still shows them, so a later commit could build on
//! data that is not on the disk. And once the meta write has begun, the meta page is in
//! doubt: the commit puts the page's previous bytes back (best effort, as LMDB does) so
//! that no process takes the unflushed meta for the newest, and the environment stops.

use std::sync::atomic::Ordering;

use crate::btree::{PutMode, TreeMut};
use crate::error::{CommitStep, Error, Result};
use crate::flags::env_flags;
use crate::format::meta::{DbRecord, Meta, META_WRITE_SIZE};
use crate::freelist;
use crate::io::SyncedWriteError;
use crate::shared::EnvInner;
use crate::store::{mapped_file_len, recycle_order, MappedWrites};

use super::*;

/// What a commit does about the free pages at the end of the file.
///
/// The pages it can give back are those its txn may reuse at once (taken from free-DB
/// records no reader and no durable meta reaches, or allocated and freed again): they leave
/// the free list and the new meta ends before them. The file itself is cut only to what
/// both metas on disk count (the base's and the new one's), once the new meta is flushed,
/// so that whichever meta a crash leaves, its pages are in the file; and only while no
/// reader holds a snapshot older than the base, whose last page may lie further on (a
/// plain copy reads every page up to it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum FileShrink {
    /// Nothing: the map size is explicit (LMDB's behaviour), or shrinking is off.
    Off,
    /// Gives back the free tail it took, but leaves the file's length: a reader of an older
    /// snapshot is live.
    TrimOnly,
    /// Gives back the free tail it took, and cuts the file when that frees more than a
    /// quarter of it and 1 MiB (see `cut_file_end` for `WRITE_MAP`), if the meta was
    /// flushed.
    OnCommit,
    /// [`Env::shrink_file`](crate::Env::shrink_file): the txn took every reclaimable
    /// record, and the commit writes and flushes a meta even with nothing changed or in a
    /// `NO_SYNC` mode, then cuts the file to exactly what the metas count.
    Now,
}

impl WriteTxn<'_> {
    /// Commits: every change becomes durable (unless `NO_SYNC`) and visible atomically.
    #[inline]
    pub fn commit(mut self) -> Result<()> {
        self.commit_here()
    }

    /// [`WriteTxn::commit`] for a txn kept in `slot` (a field of a struct, a box): commits
    /// it where it lies, without moving it (over a kilobyte) out first, and empties the
    /// slot whatever the result, ending the txn (aborted if the commit failed). `BadTxn`
    /// if the slot is empty.
    pub fn commit_in_place(slot: &mut Option<WriteTxn<'_>>) -> Result<()> {
        let result = match slot.as_mut() {
            Some(txn) => txn.commit_here(),
            None => return Err(Error::BadTxn),
        };
        *slot = None;
        result
    }

    /// The commit of the txn in place; dropping it afterwards ends it (and, if the commit
    /// failed, aborts it).
    fn commit_here(&mut self) -> Result<()> {
        self.check_usable()?;
        self.env.check_not_forked()?;
        // Nothing changed: LMDB writes no meta either. As LMDB decides it: no page was made
        // dirty, even for a while (a named DB's record changes only with its pages, or by a
        // drop), and no DB was dropped (LMDB commits an empty DB's drop).
        if self.shrink != FileShrink::Now
            && self.pages.untouched()
            && !self.main_dropped
            && self.carry.drops.is_empty()
            && self.carry.main_db == self.carry.base.main_db
        {
            self.handles.publish();
            return Ok(());
        }
        let r = self.commit_inner();
        if r.is_err() {
            self.failed = true;
            self.pages.forget_checked();
        } else if self.env.strict {
            check_committed(self.env, self.txnid);
        }
        r
    }

    pub(super) fn commit_inner(&mut self) -> Result<()> {
        let main_cmp = main_orders(self.env, &self.carry.main_db)?.key;
        assert!(
            one_state_per_name(&self.carry.named),
            "a named DB has two states in one txn: both records would be written"
        );
        // Named DBs this txn changed: their records go into the main DB (in handle order,
        // a parked state's last; the order changes nothing but the order of the puts).
        let carry = &mut *self.carry;
        for (_, named) in carry.named.iter().filter(|(_, n)| n.dirty) {
            // Under the name it was loaded with (its handle may name another DB by now).
            let mode = PutMode {
                node_flags: crate::format::page::node_flags::SUBDATA,
                ..PutMode::default()
            };
            TreeMut {
                store: &mut self.pages,
                db: &mut carry.main_db,
                cmp: main_cmp,
            }
            .put(&named.name, &named.record.to_bytes(), mode)?;
        }
        let watch_tail = self.shrink != FileShrink::Off;
        if watch_tail {
            freelist::take_tail_records(&mut self.pages, self.txnid)?;
        }
        freelist::save(
            &mut self.pages,
            &mut self.carry.free_db,
            self.txnid,
            watch_tail,
        )?;
        let env = self.env;
        let next_pgno = self.pages.next_pgno;
        self.flush_new_metas(next_pgno)?;
        assert!(
            next_pgno <= self.pages.max_pgno,
            "allocation passed the map: page {next_pgno} of {}",
            self.pages.max_pgno
        );
        if let Some(pages) = self.pages.mapped_file_pages() {
            // Under WRITE_MAP the txn grew the file as it wrote: that length is the file's.
            env.file_len
                .store(pages * env.page_size as u64, Ordering::Release);
            self.pages.take_mapped_growth();
        }
        let in_map = self.pages.writes_through_map();
        let dirty = self.pages.sorted_dirty();
        let needed = next_pgno * env.page_size as u64;
        let file_len = env.file_len.load(Ordering::Acquire);
        // Step 1 is the data write itself when that writes the last page the meta counts:
        // a write past the end grows the file, as LMDB's do. (An `ftruncate` of a file
        // this process maps also walks the map past the new end: kernel time per growing
        // commit that LMDB does not spend.) The file's length must be known for that:
        // after opening, or after another process committed, step 1 reads it.
        let write_grows = !in_map
            && file_len != 0
            && dirty.last().is_some_and(|&(pgno, bytes)| {
                pgno + (bytes.len() / env.page_size) as u64 == next_pgno
            });
        if !write_grows {
            grow_file(env, next_pgno)?;
        }
        let written = write_data(env, &dirty, in_map);
        let emptied = recycle_order(dirty);
        self.pages.keep_write_order(emptied);
        written?;
        if write_grows {
            env.file_len.store(file_len.max(needed), Ordering::Release);
        }
        assert!(
            env.file_len.load(Ordering::Acquire) >= needed,
            "the meta would count pages past the end of the file"
        );
        let force_sync = self.shrink == FileShrink::Now;
        flush_data(env, force_sync)?;
        let meta = Meta {
            address: self.carry.base.address,
            map_size: env.map_size_for(next_pgno),
            free_db: self.carry.free_db,
            main_db: self.carry.main_db,
            last_pgno: next_pgno - 1,
            txnid: self.txnid,
        };
        // Txn ids only increase, one per commit: the writer lock has been held since this
        // txn took its snapshot, so the published id is still the snapshot's.
        assert_eq!(
            meta.txnid,
            self.carry.base.txnid + 1,
            "txn ids go up by one per commit"
        );
        assert_eq!(
            env.lock.txnid_cell().load(Ordering::SeqCst),
            self.carry.base.txnid,
            "another commit was published while this write txn held the writer lock"
        );
        let meta_flushed = write_and_flush_meta(env, &meta, force_sync)?;
        self.pages.note_committed(&meta);
        if meta_flushed {
            // Both metas on disk are durable now (step 3's flush covered the base's).
            let metas_end = next_pgno.max(self.carry.base.last_pgno + 1);
            match self.shrink {
                FileShrink::OnCommit => cut_file_end(env, metas_end, false),
                FileShrink::Now => cut_file_end(env, metas_end, true),
                FileShrink::Off | FileShrink::TrimOnly => {}
            }
        }
        // Before readers can see this txn, the record cache learns the new versions, and the
        // environment that this process wrote it.
        self.publish_records();
        // The handles it opened become public before others can see the commit.
        self.handles.publish();
        env.local_txnid.store(self.txnid, Ordering::SeqCst);
        // The next txn of this process starts from this meta without reading its page.
        env.meta_cache
            .put(self.txnid, crate::seqcache::meta_words(&meta));
        env.lock.txnid_cell().store(self.txnid, Ordering::SeqCst);
        // The next write txn of this handle begins from this snapshot, kept in the carry
        // (the checked pages describe it: `note_committed`).
        self.carry.base = meta;
        Ok(())
    }

    /// Updates the environment's record cache with the named-DB records this txn wrote, as of
    /// its txnid (called after the meta is durable, before the txn becomes visible).
    pub(super) fn publish_records(&self) {
        let env = self.env;
        if !self.main_dropped
            && self.carry.deleted_named.is_empty()
            && self.carry.named.has_no_slots()
        {
            return; // The main DB's txns (most): no named-DB record to publish.
        }
        if self.main_dropped {
            // Every named DB vanished with the main DB: stop trusting the cache.
            env.orders_generation.fetch_add(1, Ordering::AcqRel);
            return;
        }
        let slot = |dbi: u32| {
            dbi.checked_sub(crate::catalog::FIRST_NAMED)
                .and_then(|i| env.record_cache.get(i as usize))
        };
        for (dbi, named) in self.carry.named.iter().filter(|(_, n)| n.dirty) {
            if let Some(s) = slot(dbi) {
                s.put(self.txnid, crate::seqcache::record_words(&named.record));
            }
        }
        for &(dbi, flags) in &self.carry.deleted_named {
            if let Some(s) = slot(dbi) {
                s.put(
                    self.txnid,
                    crate::seqcache::record_words(&DbRecord::empty(flags)),
                );
            }
        }
    }

    /// Readies this txn to shrink the file ([`Env::shrink_file`](crate::Env::shrink_file)):
    /// takes every free-DB record no reader can see, so that the commit sees every free
    /// page at the end of the file, and makes the commit write and flush its meta and cut
    /// the file, unless a reader of an older snapshot is live.
    pub(crate) fn prepare_shrink(&mut self) -> Result<()> {
        self.check_usable()?;
        self.pages.reclaim_all()?;
        // Readers beginning from now on take the base snapshot or a newer one.
        let older_reader = self
            .env
            .lock
            .oldest_reader()
            .is_some_and(|r| r < self.carry.base.txnid);
        self.shrink = if older_reader {
            FileShrink::TrimOnly
        } else {
            FileShrink::Now
        };
        Ok(())
    }

    /// Discards every change.
    pub fn abort(self) {}
}

/// Under `WRITE_MAP`, the data file a write txn writes its pages through (the map), with
/// the length it has now: `None` otherwise. Here because only the commit's module touches
/// the data file; the txn grows it before a page past its end is written.
pub(super) fn mapped_writes(env: &EnvInner) -> Result<Option<MappedWrites<'_>>> {
    if !env.map.is_writable() {
        return Ok(None);
    }
    // The length this process knows (exact: every change of it is recorded, a growth by
    // a txn that did not commit too, and it is forgotten when another process commits),
    // else the file's, read (`fstat`).
    let len = match env.file_len.load(Ordering::Acquire) {
        0 => env.data.len()?,
        known => known,
    };
    Ok(Some(MappedWrites::new(&*env.data, len, env.page_size)))
}

/// Strict mode: checks the snapshot commit `txnid` made, and panics if it is damaged.
#[cold]
fn check_committed(env: &EnvInner, txnid: u64) {
    let checked = ReadTxn::begin(env).and_then(|txn| {
        assert_eq!(
            txn.id(),
            txnid,
            "strict mode: the writer lock is still held"
        );
        txn.check()
    });
    if let Err(e) = checked {
        panic!("strict mode: the snapshot of commit {txnid} does not check: {e}");
    }
}

/// The error of a failed step; a step that poisons marks the environment failed first.
pub(super) fn failed(env: &EnvInner, step: CommitStep, source: std::io::Error) -> Error {
    if step.failure_poisons() {
        env.failed.store(true, Ordering::Release);
    }
    Error::Commit { step, source }
}

/// Step 2: writes `dirty` (page number and buffer, sorted by page number, a buffer of
/// several pages for an overflow run), each run of adjacent pages in vectored writes.
/// `in_map` (`WRITE_MAP`): the pages are in place in the map already, and each run is
/// only announced to the data file (the fault-injecting one records it).
pub(crate) fn write_data(env: &EnvInner, dirty: &[(u64, &[u8])], in_map: bool) -> Result<()> {
    let ps = env.page_size;
    debug_assert!(
        dirty.windows(2).all(|w| w[0].0 < w[1].0),
        "dirty pages sorted"
    );
    let pages_in = |buf: &[u8]| crate::format::page::pages_in(buf.len() as u64, ps);
    let mut i = 0;
    while i < dirty.len() {
        let start = dirty[i].0;
        let mut end = start + pages_in(dirty[i].1);
        let mut j = i + 1;
        while j < dirty.len() && dirty[j].0 == end {
            end += pages_in(dirty[j].1);
            j += 1;
        }
        debug_assert!(
            j == dirty.len() || dirty[j].0 > end,
            "dirty buffers overlap"
        );
        let offset = start * ps as u64;
        let written = if in_map {
            env.data
                .wrote_through_map(offset, ((end - start) as usize) * ps)
        } else if j == i + 1 && dirty[i].1.len() <= crate::io::MAX_WRITE_BYTES {
            // A run of one buffer (most runs of a small commit): one plain write.
            env.data.write_at(offset, dirty[i].1)
        } else {
            env.data
                .write_vectored_at(offset, &mut dirty[i..j].iter().map(|&(_, b)| b))
        };
        written.map_err(|e| failed(env, CommitStep::WriteData, e))?;
        i = j;
    }
    Ok(())
}

/// Step 1: makes the file cover pages `..next_pgno`, before they are written, and even
/// those allocated and freed again within the txn (never written): open rejects a meta
/// whose last page lies past the end of the file.
pub(crate) fn grow_file(env: &EnvInner, next_pgno: u64) -> Result<()> {
    let needed = next_pgno * env.page_size as u64;
    if env.file_len.load(Ordering::Acquire) >= needed {
        return Ok(());
    }
    let grow = || -> std::io::Result<u64> {
        let actual = env.data.len()?;
        if actual < needed {
            env.data.set_len(needed)?;
        }
        Ok(actual)
    };
    let actual = grow().map_err(|e| failed(env, CommitStep::GrowFile, e))?;
    env.file_len.store(needed.max(actual), Ordering::Release);
    Ok(())
}

/// Step 6: cuts the file to `end` pages (what both metas on disk count) if it is longer:
/// `exact`, whenever it is; otherwise only when that frees more than a quarter of the file
/// and more than 1 MiB, so that a file growing and shrinking around one size is not cut
/// each commit. Under `WRITE_MAP`, where the file grows in steps of four
/// ([`mapped_file_len`]), it is cut to the step that holds `end` pages, and only when it
/// is longer than the step that would hold twice as many (so a txn's growth is never cut
/// back by its own commit, nor a file around a step's edge cut and grown each commit).
/// Best effort: on failure the file keeps its length (and its length is read again).
fn cut_file_end(env: &EnvInner, end: u64, exact: bool) {
    let used = end * env.page_size as u64;
    let len = match env.file_len.load(Ordering::Acquire) {
        len if len > 0 => len,
        _ => match env.data.len() {
            Ok(len) => len,
            Err(_) => return,
        },
    };
    let (target, longest_kept) = if exact {
        (used, used)
    } else if env.map.is_writable() {
        (mapped_file_len(used), mapped_file_len(2 * used))
    } else {
        (used, used + (len / 4).max(1 << 20))
    };
    if len <= longest_kept {
        env.file_len.store(len, Ordering::Release);
        return;
    }
    match env.data.set_len(target) {
        Ok(()) => env.file_len.store(target, Ordering::Release),
        Err(_) => env.file_len.store(0, Ordering::Release),
    }
}

/// True if commits flush nothing: `NO_SYNC`, or `WRITE_MAP` with `MAP_ASYNC` (LMDB's
/// asynchronous map flush, which Linux leaves to its writeback).
pub(super) fn no_sync(flags: u32) -> bool {
    flags & env_flags::NO_SYNC != 0
        || flags & (env_flags::WRITE_MAP | env_flags::MAP_ASYNC)
            == env_flags::WRITE_MAP | env_flags::MAP_ASYNC
}

/// Step 3: flushes the data pages, unless `NO_SYNC` (or `WRITE_MAP` with `MAP_ASYNC`)
/// and not `force`d. Under `WRITE_MAP` this is the same `fdatasync`: the kernel writes
/// the map's dirty pages, and only those (it tracks them), never the whole map.
pub(crate) fn flush_data(env: &EnvInner, force: bool) -> Result<()> {
    if !force && no_sync(env.flags.load(Ordering::Relaxed)) {
        return Ok(());
    }
    env.data
        .sync_data()
        .map_err(|e| failed(env, CommitStep::FlushData, e))
}

/// Steps 4 and 5: writes `meta` to its page (`txnid & 1`) and flushes it unless
/// `NO_SYNC`, `NO_META_SYNC` or `WRITE_MAP` with `MAP_ASYNC` (and not `force`d); returns
/// whether it flushed. The meta is written with `pwrite` under `WRITE_MAP` too (the page
/// cache is the map's). On failure the page's previous bytes are written back.
pub(crate) fn write_and_flush_meta(env: &EnvInner, meta: &Meta, force: bool) -> Result<bool> {
    let which = meta.txnid & 1;
    let offset = which * env.page_size as u64;
    let mut previous = [0u8; META_WRITE_SIZE];
    previous.copy_from_slice(env.map.slice(offset as usize, META_WRITE_SIZE));
    let mut buf = [0u8; META_WRITE_SIZE];
    meta.encode(which, &mut buf);
    let flags = env.flags.load(Ordering::Relaxed);
    let result = if !force && (no_sync(flags) || flags & env_flags::NO_META_SYNC != 0) {
        env.data
            .write_at(offset, &buf)
            .map(|()| false)
            .map_err(|e| (CommitStep::WriteMeta, e))
    } else {
        // The data pages were flushed just before (step 3 runs whenever this one does):
        // syncing this write alone makes the commit durable.
        env.data
            .write_at_synced(offset, &buf)
            .map(|()| true)
            .map_err(|e| match e {
                SyncedWriteError::Write(e) => (CommitStep::WriteMeta, e),
                SyncedWriteError::Sync(e) => (CommitStep::FlushMeta, e),
            })
    };
    result.map_err(|(step, e)| {
        // The meta page is in doubt: put back what it held, so that no process opening the
        // file takes an unflushed meta for the newest. If that fails too, the checksum
        // trailer still marks a torn page, and the other meta is the last commit's.
        let _ = env.data.write_at(offset, &previous);
        failed(env, step, e)
    })
}

/// True if no two of a txn's named-DB states name the same DB (the states move between
/// handle numbers, see `WriteTxn::adopt_named`, but a DB has one). A few states are
/// compared pair by pair (no allocation on a commit); more are sorted.
fn one_state_per_name(named: &DbiMap<NamedDb>) -> bool {
    const PAIRWISE: usize = 16;
    let count = named.values().count();
    if count < 2 {
        return true;
    }
    if count <= PAIRWISE {
        let mut names = [&[][..]; PAIRWISE];
        for (slot, n) in names.iter_mut().zip(named.values()) {
            *slot = &n.name[..];
        }
        let names = &names[..count];
        return names
            .iter()
            .enumerate()
            .all(|(i, a)| names[i + 1..].iter().all(|b| a != b));
    }
    let mut names = Vec::with_capacity(count);
    names.extend(named.values().map(|n| &n.name[..]));
    names.sort_unstable();
    names.windows(2).all(|w| w[0] != w[1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TailRun;
    use crate::{Database, EnvOptions};

    /// Once a look for free-DB records near the end found nothing, commits that keep the
    /// last page out of their records skip the next looks; and what could put the page in
    /// a record ends that: a commit whose free lists hold it, one that writes a record on
    /// overflow pages, another process's commit (the base is not the run's), a file that
    /// ends elsewhere.
    #[test]
    fn the_look_for_the_free_end_waits_only_while_no_commit_could_free_the_last_page() {
        let (_dir, env) = crate::env::temp_env(&EnvOptions::new());
        let put = |i: u32| {
            let mut txn = env.begin_write().unwrap();
            txn.put(Database::MAIN, &i.to_be_bytes(), &[7; 100], 0)
                .unwrap();
            txn.commit().unwrap();
        };
        let mut txn = env.begin_write().unwrap();
        for i in 0..2000u32 {
            txn.put(Database::MAIN, &i.to_be_bytes(), &[7; 100], 0)
                .unwrap();
        }
        txn.commit().unwrap();
        let mut txn = env.begin_write().unwrap();
        for i in 500..1500u32 {
            txn.delete(Database::MAIN, &i.to_be_bytes()).unwrap();
        }
        txn.commit().unwrap();
        // One-put commits on the first keys: their pages come from the free middle of the
        // file, and its end stays where it is. 20 commits of the 320 are due for a look.
        let looks = || env.inner.txn_buffers.lock().unwrap().tail_looks;
        let before = looks();
        for i in 0..320 {
            put(i % 50);
        }
        let made = looks() - before;
        assert!((1..=3).contains(&made), "{made} looks in 320 commits");
        // Keys that grow the file, deleted again: the looks give the new end back.
        let last_page = || env.info().unwrap().last_pgno;
        let end = last_page();
        let mut txn = env.begin_write().unwrap();
        for i in 2000..5000u32 {
            txn.put(Database::MAIN, &i.to_be_bytes(), &[7; 100], 0)
                .unwrap();
        }
        txn.commit().unwrap();
        let grown = last_page();
        assert!(grown > end + 10);
        let mut txn = env.begin_write().unwrap();
        for i in 2000..5000u32 {
            txn.delete(Database::MAIN, &i.to_be_bytes()).unwrap();
        }
        txn.commit().unwrap();
        for i in 0..32 {
            put(i);
        }
        assert!(
            last_page() <= end + 2,
            "the file ends at page {}, grew to {grown} from {end}",
            last_page()
        );

        let mut txn = env.begin_write().unwrap();
        let t = txn.txnid;
        let pages = &mut txn.pages;
        let last = pages.next_pgno - 1;
        let run = |txnid, looked| TailRun {
            last_page: last,
            txnid,
            looked,
        };
        // A clean base (nothing in the lists), then a look that found nothing.
        pages.note_tail_saved(t - 1, false);
        assert_eq!(pages.tail_run(t), Some(run(t - 1, false)));
        pages.note_tail_look(t, true);
        assert_eq!(pages.tail_run(t), Some(run(t - 1, true)));
        assert_eq!(
            pages.tail_run(t + 1),
            None,
            "a commit between: not this run"
        );
        pages.note_tail_saved(t, false);
        assert_eq!(pages.tail_run(t + 1), Some(run(t, true)), "carried on");
        // The file ends elsewhere.
        pages.next_pgno += 1;
        assert_eq!(pages.tail_run(t + 1), None);
        pages.next_pgno -= 1;
        // The last page in a list the commit saved.
        pages.free_lists_mut().freed.push(last);
        pages.note_tail_saved(t + 1, false);
        assert_eq!(pages.tail_run(t + 2), None);
        pages.free_lists_mut().freed.clear();
        // A new run, not looked at yet; then a record on overflow pages.
        pages.note_tail_saved(t + 1, false);
        assert_eq!(pages.tail_run(t + 2), Some(run(t + 1, false)));
        pages.note_tail_look(t + 2, true);
        pages.note_tail_saved(t + 2, true);
        assert_eq!(pages.tail_run(t + 3), None);
        // A look that found something, or was kept from records by a reader.
        pages.note_tail_saved(t + 3, false);
        pages.note_tail_look(t + 4, false);
        assert_eq!(pages.tail_run(t + 4), Some(run(t + 3, false)));
        txn.abort();
        env.check().unwrap();
    }

    fn state(name: &str) -> NamedDb {
        NamedDb {
            name: name.as_bytes().into(),
            record: DbRecord::empty(0),
            orders: crate::order::Orders::for_flags(0),
            generation: 0,
            dirty: true,
            append_hint: None,
        }
    }

    /// Both ways of comparing (pair by pair for a few states, sorted for more) find a
    /// name held twice wherever the two states are, and only then.
    #[test]
    fn one_state_per_name_finds_a_name_held_twice() {
        for count in [0usize, 1, 2, 3, 16, 17, 40] {
            let mut named = DbiMap::default();
            for i in 0..count {
                named.insert(2 + i as u32, state(&format!("db{i}")));
            }
            assert!(one_state_per_name(&named), "{count} distinct names");
            for (a, b) in [(0, 1), (0, count.saturating_sub(1)), (count / 2, count / 3)] {
                if count < 2 || a == b {
                    continue;
                }
                let mut twice = named.clone();
                twice.insert(2 + b as u32, state(&format!("db{a}")));
                assert!(!one_state_per_name(&twice), "{count}: {a} and {b}");
            }
        }
    }
}
