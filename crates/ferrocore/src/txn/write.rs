//! The write txn: begin, the DBs it changes, put, delete, drop, and its end.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use crate::btree::{self, PutMode, TreeMut};
use crate::cursor::CursorCore;
use crate::dupsort::DupTree;
use crate::error::{Error, Result};
use crate::flags::{env_flags, put_flags};
use crate::format::meta::{DbRecord, Meta, Stat};
use crate::format::page::P_INVALID;
use crate::freelist;
use crate::lock::mutex::Locked;
use crate::order::{KeyCmp, Orders};
use crate::shared::EnvInner;
use crate::store::{DirtyPages, PageStore};

use super::*;

/// The write transaction. Only one exists at a time in the whole environment.
///
/// Tied to the thread that began it (it holds the environment's writer mutex), as LMDB's
/// write txn is: it is not `Send`.
pub struct WriteTxn<'env> {
    pub(super) env: &'env EnvInner,
    pub(super) txnid: u64,
    /// The txn's plain data, kept by the environment between txns: see [`TxnCarry`].
    pub(super) carry: MutexGuard<'env, TxnCarry>,
    /// Whether this txn emptied the main DB.
    pub(super) main_dropped: bool,
    pub(super) pages: DirtyPages<'env>,
    /// An operation failed part way: the txn can only be aborted.
    pub(super) failed: bool,
    /// Bumped by every change (put, delete, drop, nested abort): detached cursors compare it
    /// with the count they last saw to know whether the tree moved under them.
    pub(super) changes: u64,
    /// Handles this txn opened (private to it until it commits).
    pub(super) handles: HandleScope<'env>,
    /// What the commit does about free pages at the end of the file.
    pub(super) shrink: FileShrink,
    /// Nothing was ever committed and the mode flushes: the environment's two metas may
    /// still be unflushed, and must be flushed before a page is written (see
    /// [`WriteTxn::flush_new_metas`]). Decided when the txn begins.
    pub(super) new_metas_unflushed: bool,
}

/// The plain data of a write txn (no borrow of the environment), kept by the environment
/// between txns (`Env`'s `txn_carry`, locked by each write txn for its life, after the
/// writer lock): a write txn sets its base and records as it begins
/// ([`TxnCarry::begin_records`]) and empties it as it ends, and its lists keep their room
/// from txn to txn. The txn holds only the guard: a txn is moved when `Env::begin_write`
/// returns it and when `WriteTxn::commit` takes it, and each move copies it whole: 872
/// bytes with these 480 inline, 224 now that the store's plain data (free-DB reclaiming,
/// nested levels, early writes' lists) lives in its `TxnBuffers` too (a copy costs about
/// 35 instructions a 100 bytes).
pub(crate) struct TxnCarry {
    /// The snapshot the txn began from; between txns, the one the last txn began from or
    /// committed, which the next begins from if no other commit came since (see `begin`).
    pub(super) base: Meta,
    /// The txn's free DB and main DB.
    pub(super) free_db: DbRecord,
    pub(super) main_db: DbRecord,
    /// Named DBs used by this txn, loaded on first use (never a loop over all DBs).
    pub(super) named: DbiMap<NamedDb>,
    /// Named DBs this txn deleted (dbi, flags).
    pub(super) deleted_named: Vec<(u32, u16)>,
    /// Each `drop_db` of this txn: the DB and the change count it made. LMDB unpositions
    /// every cursor of a DB it empties; detached cursors read this to do the same.
    pub(super) drops: Vec<(u32, u64)>,
    /// The handles this txn opened as new, in order: a nested level that aborts closes
    /// those it opened (`NestedLevel::opened_handles` is where its own begin).
    pub(super) opened_handles: Vec<u32>,
    /// Room to build a DUPSORT key's grown sub-page in, kept from put to put.
    pub(super) dup_scratch: Vec<u8>,
    /// Where this txn's last APPEND put into the main DB went (named DBs keep theirs in
    /// [`NamedDb::append_hint`]); taken by every `tree_mut` of the DB.
    pub(super) main_append_hint: Option<AppendHint>,
    /// The hint the last `tree_mut` took from its DB, for the put that called it.
    pub(super) append_hint: Option<AppendHint>,
}

impl TxnCarry {
    /// The carry of an environment whose latest snapshot is `latest` (reset by every txn).
    pub(crate) fn new(latest: &Meta) -> Self {
        TxnCarry {
            base: *latest,
            free_db: latest.free_db,
            main_db: latest.main_db,
            named: DbiMap::default(),
            deleted_named: Vec::new(),
            drops: Vec::new(),
            opened_handles: Vec::new(),
            dup_scratch: Vec::new(),
            main_append_hint: None,
            append_hint: None,
        }
    }

    /// Readies the carry, which the last txn's end emptied, for a txn over its `base`
    /// (just set): the txn's records start as the base's.
    #[inline]
    fn begin_records(&mut self) {
        debug_assert!(
            self.named.has_no_slots()
                && self.deleted_named.is_empty()
                && self.drops.is_empty()
                && self.opened_handles.is_empty()
                && self.dup_scratch.is_empty()
                && self.main_append_hint.is_none()
                && self.append_hint.is_none(),
            "a write txn's end empties the carry"
        );
        self.free_db = self.base.free_db;
        self.main_db = self.base.main_db;
    }

    /// Empties the lists and hints, keeping the lists' room (but a DUPSORT scratch a huge
    /// set grew): a txn's end.
    #[inline]
    fn empty(&mut self) {
        if !self.named.has_no_slots() {
            self.named.clear();
        }
        self.deleted_named.clear();
        self.drops.clear();
        self.opened_handles.clear();
        self.dup_scratch.clear();
        if self.dup_scratch.capacity() > 1 << 16 {
            self.dup_scratch = Vec::new();
        }
        self.main_append_hint = None;
        self.append_hint = None;
    }
}

/// Where a write txn's last APPEND put into a DB went: the leaf that took the key in place
/// (no split), the DB's last, dirty (the put touched it). Every change to the DB goes
/// through `WriteTxn::tree_mut`, which takes the hint away, so a hint the next put finds
/// is one nothing invalidated since; the DB's record, compared too, would show any other
/// change (opening a new named DB adds a main-DB entry without `tree_mut`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AppendHint {
    leaf: u64,
    /// The DB's root just after the put.
    root: u64,
    /// Its entry count.
    entries: u64,
    /// Its branch, leaf and overflow page counts.
    pages: (u64, u64, u64),
}

impl AppendHint {
    /// The state of `record` a later put checks (no leaf yet).
    #[inline]
    fn after(record: &DbRecord) -> AppendHint {
        AppendHint {
            leaf: P_INVALID,
            root: record.root,
            entries: record.entries,
            pages: (
                record.branch_pages,
                record.leaf_pages,
                record.overflow_pages,
            ),
        }
    }

    /// True if `record` is still as the hint left it: field by field, 8 bytes at a time
    /// (a read of the whole record just after the put's writes to two of its fields
    /// waits for them).
    #[inline]
    fn still_holds(&self, record: &DbRecord) -> bool {
        self.root == record.root
            && self.entries == record.entries
            && self.pages
                == (
                    record.branch_pages,
                    record.leaf_pages,
                    record.overflow_pages,
                )
    }
}

/// Locks `carry` for a write txn about to begin. Only write txns lock it, each after the
/// writer lock, so it is never waited for. A txn's end empties it, even one ended by a
/// panic (which poisons the lock: the carry is emptied again then, in case the panic came
/// from the end itself).
#[inline]
fn lock_carry(carry: &Mutex<TxnCarry>) -> MutexGuard<'_, TxnCarry> {
    match carry.lock() {
        Ok(carry) => carry,
        Err(poisoned) => {
            let mut carry = poisoned.into_inner();
            carry.empty();
            carry
        }
    }
}

impl<'env> WriteTxn<'env> {
    /// Sets the state of named DB `dbi` (in the table the last write txn emptied).
    fn insert_named(&mut self, dbi: u32, state: NamedDb) -> Option<NamedDb> {
        self.carry.named.insert(dbi, state)
    }

    /// Begins the write txn of `env`, whose plain data is kept in `carry` between txns.
    pub(crate) fn begin(env: &'env EnvInner, carry: &'env Mutex<TxnCarry>) -> Result<Self> {
        Self::begin_with(env, carry, |txn| txn)
    }

    /// [`WriteTxn::begin`] into `slot` (empty), built where it lies: a txn returned, then
    /// moved into a slot on the heap, is copied whole (the C ABI keeps its write txn in a
    /// box).
    pub(crate) fn begin_in<'s>(
        env: &'env EnvInner,
        carry: &'env Mutex<TxnCarry>,
        slot: &'s mut Option<Self>,
    ) -> Result<&'s mut Self> {
        debug_assert!(slot.is_none(), "a write txn begun into a full slot");
        Self::begin_with(env, carry, |txn| slot.insert(txn))
    }

    /// The begin, handing the txn to `place` (inlined into both callers, so that the txn
    /// is built where `place` puts it).
    #[inline(always)]
    fn begin_with<R>(
        env: &'env EnvInner,
        carry: &'env Mutex<TxnCarry>,
        place: impl FnOnce(Self) -> R,
    ) -> Result<R> {
        if env.flags.load(Ordering::Relaxed) & env_flags::READ_ONLY != 0 {
            return Err(Error::Io(std::io::Error::from_raw_os_error(libc::EACCES)));
        }
        env.check_not_forked()?;
        // The in-process half of the writer lock, and the buffers it guards.
        let mut bufs = env.writer_in_process()?;
        if env.failed.load(Ordering::Acquire) {
            return Err(Error::Panic("a commit failed; reopen the environment"));
        }
        let locked = env.lock.lock_writer()?;
        // From here every error gives the lock back as it returns.
        let unlocking = |e: Error| {
            env.lock.unlock_writer();
            e
        };
        if locked == Locked::OwnerDied {
            // A process died holding the writer lock, perhaps after writing its meta but
            // before publishing its txn id: publish the newest meta's, as LMDB does.
            env.recover_from_dead_writer().map_err(unlocking)?;
        }
        // The base: the snapshot this handle's last txn began from or committed, still in
        // the carry, if its id is still the published one and the checked pages describe
        // it too (a txn that died part way through its commit leaves them apart); else
        // the latest meta, read into the carry where it stays (locked only by write txns,
        // after the writer lock: never waited for; see `lock_carry`).
        let mut carry = lock_carry(carry);
        let published = env.lock.txnid_cell().load(Ordering::Acquire);
        if !(carry.base.txnid == published && bufs.checked.describes(published)) {
            carry.base = env.latest_meta().map_err(unlocking)?;
        }
        let base = &carry.base;
        check_write_map_size(env, base).map_err(unlocking)?;
        env.note_snapshot(base.txnid);
        // Pages freed by txn t belong to snapshot t - 1. A reader of snapshot r needs the
        // records above r kept; and, as in LMDB, so does the snapshot before the last commit
        // (the other meta page): with NOMETASYNC or NOSYNC the last meta may not be on disk,
        // and after a crash the file falls back to it. So the records below both are free.
        let mut oldest = env.lock.oldest_reader();
        if oldest.is_some_and(|r| r < base.txnid) && env.stale_reader_check_due() {
            // A reader pins pages this txn could reuse. If its process died (killed while
            // reading), clear its slot now, as LMDB's writer does when it runs short of
            // pages; at most once a second, so a live long reader costs nothing.
            if env.lock.clear_stale_readers().unwrap_or(0) > 0 {
                oldest = env.lock.oldest_reader();
            }
        }
        let limit = oldest.map_or(u64::MAX, |r| r + 1).min(base.txnid);
        if base.txnid != env.local_txnid.load(Ordering::SeqCst) {
            // Another process committed since this one last did, and may have grown or
            // shortened the file: read its length again before relying on it.
            env.file_len.store(0, Ordering::Release);
        }
        // A reader of a snapshot older than the base may read any page up to its own last
        // one (a plain copy does): the file keeps its length while one lives.
        let shrink = if !env.shrink_on_commit || env.map_size_explicit.load(Ordering::Acquire) {
            FileShrink::Off
        } else if oldest.is_some_and(|r| r < base.txnid) {
            FileShrink::TrimOnly
        } else {
            FileShrink::OnCommit
        };
        bufs.checked.begin(base.txnid);
        // Under WRITE_MAP the txn's pages are built in the map, within the file.
        let mapped = super::commit::mapped_writes(env).map_err(unlocking)?;
        // Nothing was ever committed: the metas written when the environment was created
        // may not be on the disk (`env::write_new_metas`). Under WRITE_MAP this txn's pages
        // go to the map as it writes them, and the kernel may write them back at any time:
        // the metas are flushed first. Otherwise before the first page is written.
        let mut new_metas_unflushed =
            base.txnid == 0 && !super::commit::no_sync(env.flags.load(Ordering::Relaxed));
        if new_metas_unflushed && mapped.is_some() {
            super::commit::flush_data(env, true).map_err(unlocking)?;
            new_metas_unflushed = false;
        }
        let mut pages = DirtyPages::new(
            &env.map,
            env.page_size,
            base.last_pgno,
            env.max_pgno(),
            bufs,
            (base.free_db, limit, freelist::next_reclaimable),
            mapped,
        );
        pages.write_early_to(&*env.data);
        let txnid = base.txnid + 1;
        carry.begin_records();
        Ok(place(WriteTxn {
            env,
            txnid,
            carry,
            main_dropped: false,
            pages,
            failed: false,
            changes: 0,
            handles: HandleScope::new(env, false),
            shrink,
            new_metas_unflushed,
        }))
    }

    /// This txn's id (the last committed id + 1).
    pub fn id(&self) -> u64 {
        self.txnid
    }

    /// Pages (and overflow runs) this txn holds in memory until commit. A bulk load writes
    /// its finished pages to the file as it goes, so a large one holds few.
    pub fn dirty_pages(&self) -> usize {
        self.pages.dirty_count()
    }

    /// Flushes the metas written when the environment was created, if nothing was ever
    /// committed and this txn has not flushed them yet, before it writes its first page to
    /// the file: so that a crash leaves those metas, or zeros and parts of them (a new
    /// environment to the next open, `env::holds_no_commit`), never pages without a meta.
    /// `end`: the pages the commit will count; the file is grown to them first, so that the
    /// file system allocates the metas' blocks as a large file's, with the data's that
    /// follow (flushed while the file was two pages long, ext4 put them among small
    /// files' blocks, far from the data: W9's synced writes then paid for both places).
    /// Under `NO_SYNC` (as the txn began) nothing is promised, and the first `Env::sync`
    /// flushes them. A failed flush poisons the environment, as a commit's.
    pub(crate) fn flush_new_metas(&mut self, end: u64) -> Result<()> {
        if !self.new_metas_unflushed || self.pages.new_metas_flushed_early() {
            return Ok(());
        }
        self.new_metas_unflushed = false;
        super::commit::grow_file(self.env, end)?;
        super::commit::flush_data(self.env, true)
    }

    /// Before a bulk load, which writes pages to the file as it goes: makes its first write
    /// flush a new environment's metas first, after growing the file over that write (see
    /// [`WriteTxn::flush_new_metas`]).
    pub(crate) fn flush_new_metas_before_early_writes(&mut self) {
        if self.new_metas_unflushed {
            self.pages
                .flush_new_metas_before_early_writes(&self.env.failed);
        }
    }

    /// The txn's pages, for cursors.
    pub(crate) fn source(&self) -> Source<'_> {
        Source::Write(&self.pages)
    }

    /// True if an operation failed part way (the txn can only be aborted).
    pub fn has_failed(&self) -> bool {
        self.failed
    }

    /// True if `db` was dropped (emptied or deleted) by a change after change count `since`.
    pub(crate) fn dropped_since(&self, db: Database, since: u64) -> bool {
        self.carry
            .drops
            .iter()
            .any(|&(dbi, at)| dbi == db.0 && at > since)
    }

    /// A count that changes whenever this txn changes a tree (see [`crate::DetachedCursor`]).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    pub(super) fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::BadTxn);
        }
        Ok(())
    }

    pub(crate) fn tree(&self, db: Database) -> Result<(DbRecord, Orders)> {
        match db {
            Database::MAIN => Ok((
                self.carry.main_db,
                main_orders(self.env, &self.carry.main_db)?,
            )),
            Database::FREE => Ok((self.carry.free_db, FREE_ORDERS)),
            _ => match self.carry.named.get(db.0).filter(|n| !self.reused(db, n)) {
                Some(n) => Ok((
                    n.record,
                    named_orders(
                        self.env,
                        db,
                        n.orders,
                        n.generation,
                        self.handles.lookup_serial(),
                    )?
                    .0,
                )),
                None => {
                    let (name, flags, cmp) =
                        catalog_entry(self.env, db, self.handles.lookup_serial())?;
                    // This txn's state of the DB, kept under another number (see
                    // `adopt_named`), is newer than its record in the main DB.
                    if let Some(n) = self.carry.named.values().find(|n| n.name == name) {
                        return Ok((n.record, cmp));
                    }
                    let main_cmp = main_orders(self.env, &self.carry.main_db)?.key;
                    let record = named_record(&self.pages, &self.carry.main_db, main_cmp, &name)?
                        .unwrap_or_else(|| DbRecord::empty(flags));
                    Ok((record, cmp))
                }
            },
        }
    }

    /// The record of a DB [`WriteTxn::tree_mut`] loaded, the txn's pages and the DUPSORT
    /// scratch buffer: what a `TreeMut` or `DupTree` over the DB borrows, which changes
    /// the record where it is kept (a copy written back would be read whole just after
    /// the tree's 8-byte writes to it, and wait for them). `BadDbi` if it is not loaded.
    #[inline]
    fn tree_parts(
        &mut self,
        db: Database,
    ) -> Result<(&mut DbRecord, &mut DirtyPages<'env>, &mut Vec<u8>)> {
        let carry = &mut *self.carry;
        let record = if db == Database::MAIN {
            &mut carry.main_db
        } else {
            &mut carry.named.get_mut(db.0).ok_or(Error::BadDbi)?.record
        };
        Ok((record, &mut self.pages, &mut carry.dup_scratch))
    }

    /// Writes back the record of `db`, which [`WriteTxn::tree_mut`] loaded in this txn
    /// (without looking up its orders again).
    fn set_record(&mut self, db: Database, record: DbRecord) {
        if db == Database::MAIN {
            self.carry.main_db = record;
        } else if let Some(named) = self.carry.named.get_mut(db.0) {
            named.record = record;
        } else {
            debug_assert!(false, "set_record of a DB tree_mut did not load");
        }
    }

    /// True if `db`'s handle was closed and reused for another DB since this txn loaded
    /// `n` for it (LMDB's `mdb_dump -a` closes each handle after use). Cheap unless some
    /// handle of the environment was closed since.
    pub(super) fn reused(&self, db: Database, n: &NamedDb) -> bool {
        if self.env.orders_generation.load(Ordering::Acquire) == n.generation {
            return false;
        }
        match catalog_entry(self.env, db, self.handles.lookup_serial()) {
            Ok((name, _, _)) => name != n.name,
            Err(_) => false, // the caller's next catalog look-up reports it
        }
    }

    /// Forgets what this txn loaded for `db` if its handle now names another DB. A DB this
    /// txn changed stays, under a number no handle has, so commit still writes it.
    /// Keeps this txn's state of the DB `name` under `dbi`, the handle it was just opened
    /// with. A handle number is not tied to a name for the life of a txn: dropping a DB
    /// closes its handle even in a nested txn, and when that nested txn aborts the DB is
    /// back, to be opened under whatever number is free then. So the state of another DB
    /// kept under `dbi` moves aside (its changes are still written at commit), and this
    /// DB's state kept under another number moves to `dbi`.
    fn adopt_named(&mut self, dbi: u32, name: &[u8]) {
        if self.carry.named.get(dbi).is_some_and(|n| *n.name != *name) {
            let other = self.carry.named.remove(dbi).expect("just looked up");
            if other.dirty {
                self.park_named(other);
            }
        }
        if self.carry.named.contains_key(dbi) {
            return;
        }
        let kept = self
            .carry
            .named
            .iter()
            .find(|(_, n)| *n.name == *name)
            .map(|(k, _)| k);
        if let Some(k) = kept {
            let n = self.carry.named.remove(k).expect("just found");
            self.insert_named(dbi, n);
        }
    }

    /// Keeps the state of a DB whose handle number went to another DB under a number no
    /// handle has (counting down from `u32::MAX`): commit still writes its record.
    fn park_named(&mut self, n: NamedDb) {
        let spare = (0..=u32::MAX)
            .rev()
            .find(|&k| !self.carry.named.contains_key(k))
            .expect("fewer than 2^32 DBs");
        self.insert_named(spare, n);
    }

    pub(super) fn forget_if_reused(&mut self, db: Database) {
        let Some(n) = self.carry.named.get(db.0) else {
            return;
        };
        if !self.reused(db, n) {
            return;
        }
        let old = self.carry.named.remove(db.0).expect("just looked up");
        if old.dirty {
            self.park_named(old);
        }
    }

    /// The record and key order of a DB this txn may write, loaded on first use. The main
    /// DB's is inlined into the puts; named DBs take [`WriteTxn::named_tree_mut`].
    #[inline]
    pub(super) fn tree_mut(&mut self, db: Database) -> Result<(&mut DbRecord, Orders)> {
        if db == Database::MAIN {
            let orders = main_orders(self.env, &self.carry.main_db)?;
            self.carry.append_hint = self.carry.main_append_hint.take();
            return Ok((&mut self.carry.main_db, orders));
        }
        self.named_tree_mut(db)
    }

    /// [`WriteTxn::tree_mut`] for every DB but the main one.
    #[inline(never)]
    fn named_tree_mut(&mut self, db: Database) -> Result<(&mut DbRecord, Orders)> {
        if db == Database::FREE {
            return Err(Error::InvalidArgument("the free DB is read-only"));
        }
        // The common case: loaded, and no handle closed since (so the handle still
        // names that DB and its orders are current).
        let generation = self.env.orders_generation.load(Ordering::Acquire);
        if self
            .carry
            .named
            .get(db.0)
            .is_some_and(|n| n.generation == generation)
        {
            let carry = &mut *self.carry;
            let n = carry.named.get_mut(db.0).expect("looked up above");
            n.dirty = true;
            carry.append_hint = n.append_hint.take();
            return Ok((&mut n.record, n.orders));
        }
        self.forget_if_reused(db);
        if !self.carry.named.contains_key(db.0) {
            let (name, _, cmp) = catalog_entry(self.env, db, self.handles.lookup_serial())?;
            // One state per DB: the one kept under another number moves here.
            self.adopt_named(db.0, &name);
            if !self.carry.named.contains_key(db.0) {
                // A handle whose DB does not exist in this txn (created by a txn
                // that aborted, or dropped) cannot be written.
                let main_cmp = main_orders(self.env, &self.carry.main_db)?.key;
                let record = named_record(&self.pages, &self.carry.main_db, main_cmp, &name)?
                    .ok_or(Error::BadDbi)?;
                let state = NamedDb {
                    name,
                    record,
                    orders: cmp,
                    generation: 0,
                    dirty: false,
                    append_hint: None,
                };
                self.insert_named(db.0, state);
            }
        }
        let carry = &mut *self.carry;
        let n = carry.named.get_mut(db.0).expect("loaded above");
        (n.orders, n.generation) = named_orders(
            self.env,
            db,
            n.orders,
            n.generation,
            self.handles.lookup_serial(),
        )?;
        n.dirty = true;
        carry.append_hint = n.append_hint.take();
        Ok((&mut n.record, n.orders))
    }

    /// Opens the named DB `name` (LMDB's `mdb_dbi_open`): `flags` are DB flags plus
    /// `db_flags::CREATE` to create it if it does not exist. `None` is the main DB. As in
    /// LMDB, an existing DB opens with its own flags, whatever `flags` holds;
    /// `Incompatible` if `name` is a plain key of the main DB, or to create a DB in a main
    /// DB with DUPSORT or INTEGERKEY (`NotFound` without CREATE).
    pub fn open_db(&mut self, name: Option<&str>, flags: u32) -> Result<Database> {
        self.check_usable()?;
        let Some(name) = name else {
            // As LMDB: flags given for the main DB are added to its record.
            let f = check_db_flags(flags)?;
            self.carry.main_db.flags |= f;
            return Ok(Database::MAIN);
        };
        let create = flags & crate::db_flags::CREATE != 0;
        let db_flags = check_db_flags(flags)?;
        let name = name.as_bytes();
        if name.is_empty() || name.len() > self.env.max_key_size {
            return Err(Error::BadValSize {
                what: "DB name",
                size: name.len(),
                max: self.env.max_key_size,
            });
        }
        check_room(self.env, name)?;
        check_main_holds_names(self.env, &self.carry.main_db, name, create)?;
        let main_cmp = main_orders(self.env, &self.carry.main_db)?.key;
        let existing = named_record(&self.pages, &self.carry.main_db, main_cmp, name)?;
        let dbi = match existing {
            Some(record) => {
                // As LMDB: an existing DB opens with its own flags, whatever flags are given
                // (they were checked above, and are used only to create a DB).
                let registered = self
                    .env
                    .catalog
                    .write()
                    .map_err(|_| Error::Panic("catalog lock poisoned"))?
                    .register(name, record.flags, self.handles.serial())?;
                let dbi = self.note_opened(registered);
                self.adopt_named(dbi, name);
                dbi
            }

            None if create => {
                let registered = self
                    .env
                    .catalog
                    .write()
                    .map_err(|_| Error::Panic("catalog lock poisoned"))?
                    .register(name, db_flags, self.handles.serial())?;
                let dbi = self.note_opened(registered);
                // As LMDB does, the record enters the main DB at once (rewritten at commit).
                let mode = PutMode {
                    node_flags: crate::format::page::node_flags::SUBDATA,
                    ..PutMode::default()
                };
                let record = DbRecord::empty(db_flags).to_bytes();
                let r = TreeMut {
                    store: &mut self.pages,
                    db: &mut self.carry.main_db,
                    cmp: main_cmp,
                }
                .put(name, &record, mode);
                self.note(r)?;
                self.adopt_named(dbi, name);
                self.insert_named(
                    dbi,
                    NamedDb {
                        name: name.into(),
                        record: DbRecord::empty(db_flags),
                        orders: Orders::for_flags(db_flags),
                        generation: 0,
                        dirty: true,
                        append_hint: None,
                    },
                );
                dbi
            }
            None => return Err(Error::NotFound),
        };
        Ok(Database(dbi))
    }

    /// Notes a handle `open_db` registered: `(dbi, new)` as the catalog returned it.
    fn note_opened(&mut self, (dbi, new): (u32, bool)) -> u32 {
        self.handles.opened.set(true);
        if new {
            self.carry.opened_handles.push(dbi);
        }
        dbi
    }

    /// Records a failure that may have left the txn's pages half changed. The refusals that
    /// come before any change leave the txn usable, as in LMDB: an existing or missing
    /// key, an incompatible DB, a bad handle, and a size the DB refuses (every size check,
    /// such as a DUPFIXED value's against its key's values, runs before the first page is
    /// touched).
    pub(super) fn note<T>(&mut self, r: Result<T>) -> Result<T> {
        self.changes = self.changes.wrapping_add(1);
        if let Err(e) = &r {
            if !matches!(
                e,
                Error::KeyExist
                    | Error::NotFound
                    | Error::Incompatible
                    | Error::BadDbi
                    | Error::BadValSize { .. }
            ) {
                self.failed = true;
            }
        }
        r
    }

    /// The value of `key` as this txn sees it (`None` for a key longer than any that can
    /// be stored; `BadValSize` for an empty one, as LMDB).
    pub fn get(&self, db: Database, key: &[u8]) -> Result<Option<&[u8]>> {
        self.check_usable()?;
        check_lookup_key(self.env, key)?;
        let (rec, cmp) = self.tree(db)?;
        read_value(&self.pages, &rec, cmp, key)
    }

    /// Stores `value` under `key`. `flags` from [`put_flags`]: `NO_OVERWRITE` and `APPEND`
    /// are supported on the main DB.
    #[inline]
    pub fn put(&mut self, db: Database, key: &[u8], value: &[u8], flags: u32) -> Result<()> {
        self.put_inner(db, key, value, flags)
    }

    pub(super) fn put_inner(
        &mut self,
        db: Database,
        key: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
        self.check_put(key, value, flags)?;
        let no_overwrite = flags & put_flags::NO_OVERWRITE != 0;
        let (record, orders) = self.tree_mut(db)?;
        let cmp = orders.key;
        if let Some(dcmp) = orders.dup {
            let record_copy = *record;
            return self.put_dup(db, key, value, flags, record_copy, (cmp, dcmp));
        }
        // Without DUPSORT, LMDB ignores NO_DUP_DATA and APPEND_DUP; so does ferrocore.
        let append = flags & put_flags::APPEND != 0;
        let mode = PutMode {
            no_overwrite,
            append,
            ..PutMode::default()
        };
        // (A hint left pending by a put that does not append is replaced by the next
        // `tree_mut`.)
        let hint = if append {
            self.carry.append_hint.take()
        } else {
            None
        };
        let (record, pages, _) = self.tree_parts(db)?;
        let hint = hint.filter(|h| h.still_holds(record));
        let mut tree = TreeMut {
            store: pages,
            db: record,
            cmp,
        };
        // A sorted load: the last APPEND put went into this leaf, the DB's last, and
        // nothing changed since; the next key goes after it without a descent if it fits.
        let r = match hint {
            Some(h) => match tree.append_to_leaf(h.leaf, key, value) {
                Ok(true) => Ok(Some(h.leaf)),
                Ok(false) => tree.put_tracked(key, value, mode),
                Err(e) => Err(e),
            },
            None => tree.put_tracked(key, value, mode),
        };
        let after = append.then(|| AppendHint::after(tree.db));
        let leaf = self.note(r)?;
        if let (Some(after), Some(leaf)) = (after, leaf) {
            let hint = Some(AppendHint { leaf, ..after });
            if db == Database::MAIN {
                self.carry.main_append_hint = hint;
            } else if let Some(named) = self.carry.named.get_mut(db.0) {
                named.append_hint = hint;
            }
        }
        Ok(())
    }

    /// Refuses a put the txn, the key, the value size or the flags do not allow.
    #[inline]
    fn check_put(&self, key: &[u8], value: &[u8], flags: u32) -> Result<()> {
        self.check_usable()?;
        check_key(self.env, key)?;
        if value.len() > u32::MAX as usize {
            return Err(Error::BadValSize {
                what: "value",
                size: value.len(),
                max: u32::MAX as usize,
            });
        }
        let known = put_flags::NO_OVERWRITE
            | put_flags::APPEND
            | put_flags::APPEND_DUP
            | put_flags::NO_DUP_DATA;
        if flags & !known != 0 {
            return Err(refused_put_flags(flags));
        }
        Ok(())
    }

    /// Runs `change` on DUPSORT DB `db` (loaded by [`WriteTxn::tree_mut`], its key and
    /// value orders `cmp` and `dcmp`), which changes its record in place, and notes the
    /// outcome.
    fn with_dup_tree(
        &mut self,
        db: Database,
        (cmp, dcmp): (KeyCmp, KeyCmp),
        change: impl FnOnce(DupTree<'_, DirtyPages<'env>>) -> Result<()>,
    ) -> Result<()> {
        let (record, pages, scratch) = self.tree_parts(db)?;
        let r = change(DupTree {
            tree: TreeMut {
                store: pages,
                db: record,
                cmp,
            },
            dcmp,
            scratch,
        });
        self.note(r)
    }

    /// [`WriteTxn::put_inner`] in a DUPSORT DB whose record is `record_copy` and whose
    /// key and value orders are `cmp` and `dcmp`.
    fn put_dup(
        &mut self,
        db: Database,
        key: &[u8],
        value: &[u8],
        flags: u32,
        record_copy: DbRecord,
        (cmp, dcmp): (KeyCmp, KeyCmp),
    ) -> Result<()> {
        let no_overwrite = flags & put_flags::NO_OVERWRITE != 0;
        let orders = Orders {
            key: cmp,
            dup: Some(dcmp),
        };
        if value.is_empty() || value.len() > self.env.max_key_size {
            return Err(Error::BadValSize {
                what: "duplicate value",
                size: value.len(),
                max: self.env.max_key_size,
            });
        }
        if flags & (put_flags::APPEND | put_flags::APPEND_DUP) != 0 {
            // LMDB: APPEND needs a key after every key; APPENDDUP a value after every
            // value of the key. Out of order is KeyExist.
            let src = &self.pages;
            let mut c = CursorCore::new(record_copy, orders);
            let mut converts = false;
            let in_order = if flags & put_flags::APPEND != 0 {
                !c.last(src)? || cmp.compare(key, c.item(src)?.0) == std::cmp::Ordering::Greater
            } else {
                !c.seek(src, key, true)? || {
                    converts = !c.on_dup_data(src)?;
                    c.edge_dup(src, true)?;
                    let last = c.item(src)?.1;
                    converts &= last != value;
                    dcmp.compare(value, last) == std::cmp::Ordering::Greater
                }
            };
            if !in_order {
                if converts {
                    // As LMDB: the single value became a set before the order was found
                    // wrong, and stays one.
                    self.with_dup_tree(db, (cmp, dcmp), |mut t| t.make_set(key))?;
                }
                return Err(Error::KeyExist);
            }
        }
        let no_dup_data = flags & put_flags::NO_DUP_DATA != 0;
        self.with_dup_tree(db, (cmp, dcmp), |mut t| {
            t.put(key, value, no_overwrite, no_dup_data).map(|_| ())
        })
    }

    /// Stores a value of `len` bytes under `key` and returns it to be filled in place
    /// (`MDB_RESERVE`): no copy of the value is made. The bytes start zeroed. Not for
    /// DUPSORT DBs (as in LMDB). `flags`: `NO_OVERWRITE`, `APPEND`.
    pub fn put_reserve(
        &mut self,
        db: Database,
        key: &[u8],
        len: usize,
        flags: u32,
    ) -> Result<&mut [u8]> {
        if self.tree(db)?.1.dup.is_some() {
            return Err(Error::Incompatible);
        }
        let zeros = vec![0u8; len];
        self.put_inner(db, key, &zeros, flags)?;
        self.value_slot_mut(db, key, len)
    }

    /// The `len` bytes of the value stored under `key` (just stored by this txn, so on a
    /// dirty page), to be written in place.
    pub(crate) fn value_slot_mut(
        &mut self,
        db: Database,
        key: &[u8],
        len: usize,
    ) -> Result<&mut [u8]> {
        let (record, orders) = self.tree(db)?;
        let mut path = btree::Path::default();
        let (idx, exact) = btree::search(&self.pages, &record, orders.key, key, &mut path)?;
        debug_assert!(exact, "the key just stored is found");
        let node = btree::view(&self.pages, path.leaf())?.node(idx)?;
        if node.flags & crate::format::page::node_flags::BIGDATA != 0 {
            let run = node.overflow_pgno();
            let start = crate::format::page::PAGE_HEADER_SIZE;
            return Ok(&mut self.pages.dirty_mut(run)[start..start + len]);
        }
        Ok(crate::format::page::edit::inline_data_mut(
            self.pages.dirty_mut(path.leaf()),
            idx,
        ))
    }

    /// Deletes `key`. Returns false if it was not present (a key longer than any that can
    /// be stored is looked up, and not present; an empty one is `BadValSize`).
    pub fn delete(&mut self, db: Database, key: &[u8]) -> Result<bool> {
        self.check_usable()?;
        self.delete_value(db, key, None)
    }

    /// Deletes one key/value pair of a DUPSORT DB (LMDB's `mdb_del` with data); on other
    /// DBs `value` is ignored, as in LMDB. Returns false if the pair was not present.
    pub fn delete_value(&mut self, db: Database, key: &[u8], value: Option<&[u8]>) -> Result<bool> {
        self.check_usable()?;
        check_lookup_key(self.env, key)?;
        let orders = self.tree_mut(db)?.1;
        let cmp = orders.key;
        let (record, pages, scratch) = self.tree_parts(db)?;
        let r = match orders.dup {
            Some(dcmp) => DupTree {
                tree: TreeMut {
                    store: pages,
                    db: record,
                    cmp,
                },
                dcmp,
                scratch,
            }
            .delete(key, value),
            None => TreeMut {
                store: pages,
                db: record,
                cmp,
            }
            .delete(key),
        };
        if db == Database::MAIN && matches!(r, Err(Error::Incompatible)) {
            // A named DB's record deleted through the main DB: refused, and, as LMDB does,
            // the txn fails (its later calls answer `BadTxn`).
            self.failed = true;
        }
        self.note(r)
    }

    /// Empties `db`, or with `delete` also removes it and closes its handle (LMDB's
    /// `mdb_drop`). The main DB is only emptied (with every named DB in it).
    pub fn drop_db(&mut self, db: Database, delete: bool) -> Result<()> {
        self.check_usable()?;
        let (record, _) = self.tree_mut(db)?;
        let rec = *record;
        let r = btree::free_tree(&mut self.pages, &rec);
        self.note(r)?;
        self.carry.drops.push((db.0, self.changes));
        if db == Database::MAIN {
            self.carry.main_db = DbRecord::empty(rec.flags);
            // The named DBs' records were in it: they no longer exist in this txn.
            self.carry.named.clear();
            self.main_dropped = true;
            return Ok(());
        }
        if !delete {
            *self.tree_mut(db)?.0 = DbRecord::empty(rec.flags);
            return Ok(());
        }
        let (name, _, _) = catalog_entry(self.env, db, self.handles.lookup_serial())?;
        let main_orders = main_orders(self.env, &self.carry.main_db)?;
        let r = TreeMut {
            store: &mut self.pages,
            db: &mut self.carry.main_db,
            cmp: main_orders.key,
        }
        .delete_kind(&name, crate::format::page::node_flags::SUBDATA);
        self.note(r)?;
        self.carry.named.remove(db.0);
        self.carry.deleted_named.push((db.0, rec.flags));
        self.env
            .catalog
            .write()
            .map_err(|_| Error::Panic("catalog lock poisoned"))?
            .close(db.0)?;
        // The handle's slot may be reused: cached orders and records must be re-checked.
        self.env.orders_generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// A read-only cursor over `db` as this txn sees it.
    pub fn cursor(&self, db: Database) -> Result<Cursor<'_>> {
        self.check_usable()?;
        let (rec, orders) = self.tree(db)?;
        Ok(Cursor::new(Source::Write(&self.pages), rec, orders))
    }

    /// A cursor that can also write (put and delete at its position).
    pub fn cursor_mut(&mut self, db: Database) -> Result<WriteCursor<'_, 'env>> {
        self.check_usable()?;
        let (record, orders) = self.tree_mut(db)?;
        let core = CursorCore::new(*record, orders);
        Ok(WriteCursor {
            txn: self,
            db,
            core,
        })
    }

    /// Statistics of `db` as this txn sees it.
    pub fn db_stat(&self, db: Database) -> Result<Stat> {
        Ok(self.tree(db)?.0.stat(self.env.page_size))
    }

    /// The flags of `db` (`db_flags`, as `mdb_dbi_flags` reports them).
    pub fn db_flags(&self, db: Database) -> Result<u16> {
        Ok(self.tree(db)?.0.flags)
    }

    /// The key and value orders of `db` (for `mdb_cmp`/`mdb_dcmp`).
    pub fn orders(&self, db: Database) -> Result<Orders> {
        Ok(self.tree(db)?.1)
    }

    /// Statistics of the main database as this txn sees it.
    pub fn stat(&self) -> Stat {
        self.carry.main_db.stat(self.env.page_size)
    }

    /// For `bulk`: `db`'s record and orders, loaded for writing.
    pub(crate) fn bulk_target(&mut self, db: Database) -> Result<(DbRecord, Orders)> {
        self.check_usable()?;
        let (record, orders) = self.tree_mut(db)?;
        Ok((*record, orders))
    }

    /// For `bulk`: the txn's pages.
    pub(crate) fn bulk_pages(&mut self) -> &mut DirtyPages<'env> {
        &mut self.pages
    }

    /// For `bulk`: stores the record of a DB it built (loaded by `bulk_target`).
    pub(crate) fn bulk_set_record(&mut self, db: Database, record: DbRecord) {
        self.set_record(db, record);
        self.changes = self.changes.wrapping_add(1);
    }

    /// The longest key (and DUPSORT value) this environment takes.
    pub(crate) fn max_key_size(&self) -> usize {
        self.env.max_key_size
    }
}

/// Why [`WriteTxn::put`] refuses `flags`, one of which it does not take.
#[cold]
fn refused_put_flags(flags: u32) -> Error {
    Error::InvalidArgument(if flags & put_flags::MULTIPLE != 0 {
        "MULTIPLE is a cursor put flag (WriteCursor::put_multiple)"
    } else if flags & (put_flags::CURRENT | put_flags::RESERVE) != 0 {
        "CURRENT is a cursor put flag and RESERVE has its own call (put_reserve)"
    } else {
        "unknown put flag"
    })
}

impl Drop for WriteTxn<'_> {
    fn drop(&mut self) {
        self.carry.empty();
        if let Some(pages) = self.pages.take_mapped_growth() {
            // A WRITE_MAP txn that did not commit set the file's length: record it, so
            // that the next txn's cached length (`commit::mapped_writes`) is exact.
            self.env
                .file_len
                .store(pages * self.env.page_size as u64, Ordering::Release);
        }
        self.pages.release_buffers();
        // The cross-process writer mutex; the in-process one (the buffers' lock, held by
        // `pages`) goes with the fields just after.
        self.env.lock.unlock_writer();
    }
}
