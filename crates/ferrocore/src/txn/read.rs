//! Read txns: reader slots, taking a snapshot, and the read txn's operations.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::format::meta::{DbRecord, Meta, Stat, META_WRITE_SIZE};
use crate::order::Orders;
use crate::shared::EnvInner;
use crate::store::{PageSource, SnapshotPages};

use super::*;

/// A reader slot held by a read txn; given back on drop (or kept for the environment's
/// next read txn: [`EnvInner::put_back_reader_slot`]).
pub(super) struct ReaderSlot<'env> {
    pub(super) env: &'env EnvInner,
    pub(super) index: usize,
    /// The fork generation it was taken in: a forked child must not give back the
    /// parent's slot (the parent still reads under it).
    pub(super) fork_generation: u64,
}

impl Drop for ReaderSlot<'_> {
    fn drop(&mut self) {
        if crate::lock::fork::current_generation() == self.fork_generation {
            self.env.put_back_reader_slot(self.index);
        }
    }
}

/// Publishes a snapshot in `slot` and reads its meta.
pub(super) fn take_snapshot(env: &EnvInner, slot: &ReaderSlot<'_>) -> Result<Meta> {
    // A poisoned environment (`env.failed`) still reads: every snapshot a reader can take
    // was committed whole, and reads never build on unflushed pages.
    env.check_not_forked()?;
    loop {
        let t = env.lock.begin_snapshot(slot.index);
        env.note_snapshot(t);
        if let Some(words) = env.meta_cache.get(t) {
            return check_map_size(env, slot, crate::seqcache::meta_from(words));
        }
        match env.meta_for(t) {
            Ok(meta) => {
                env.meta_cache
                    .try_put(t, crate::seqcache::meta_words(&meta));
                return check_map_size(env, slot, meta);
            }
            Err(_) if env.lock.txnid_cell().load(Ordering::Acquire) != t => {}
            Err(e) => {
                env.lock.end_snapshot(slot.index);
                return Err(e);
            }
        }
    }
}

/// `MapResized` if the snapshot `meta` reaches past this process's map size (another
/// process with a larger map wrote it), as LMDB: the application then calls
/// `set_map_size(0)` to adopt the size recorded in the file. Only with a fixed map size.
pub(super) fn check_map_size(env: &EnvInner, slot: &ReaderSlot<'_>, meta: Meta) -> Result<Meta> {
    if env.map_size_explicit.load(Ordering::Acquire) {
        let used = (meta.last_pgno + 1) * env.page_size as u64;
        if used > env.map_size.load(Ordering::Acquire) {
            env.lock.end_snapshot(slot.index);
            return Err(Error::MapResized);
        }
    }
    Ok(meta)
}

/// `MapResized` if the last commit `meta` reaches past this process's map size (a process
/// with a larger map wrote it), as LMDB's write txns check too. Only with a fixed map size.
pub(super) fn check_write_map_size(env: &EnvInner, meta: &Meta) -> Result<()> {
    let used = (meta.last_pgno + 1) * env.page_size as u64;
    if env.map_size_explicit.load(Ordering::Acquire) && used > env.map_size.load(Ordering::Acquire)
    {
        return Err(Error::MapResized);
    }
    Ok(())
}

/// A read-only transaction: a consistent snapshot of the last commit when it began.
///
/// Not tied to a thread (as LMDB's with `MDB_NOTLS`): it is `Send`, so it and its cursors
/// may move to another thread and end there; it is not `Sync` (one thread at a time). A
/// thread may hold several read txns at once. Its reader slot is freed when it ends, or
/// kept for the thread's next read txn ([`crate::EnvOptions::keep_reader_slots`], which
/// the C ABI turns on without `MDB_NOTLS`, as LMDB keeps a thread's slot).
pub struct ReadTxn<'env> {
    pub(super) env: &'env EnvInner,
    pub(super) slot: ReaderSlot<'env>,
    pub(super) meta: Meta,
    pub(super) pages: SnapshotPages<'env>,
    /// Named DBs looked up by this txn (filled lazily).
    pub(super) named: RefCell<DbiMap<(DbRecord, Orders, u64)>>,
    /// The named DB used last (most txns use one): (dbi, record, orders, generation).
    pub(super) last_named: Cell<Option<(u32, DbRecord, Orders, u64)>>,
    /// Handles this txn opened.
    pub(super) handles: HandleScope<'env>,
}

/// A reset read transaction: it keeps its reader slot but holds no snapshot (so it pins
/// no pages). `renew` makes it a read transaction again without reallocating.
pub struct InactiveReadTxn<'env> {
    pub(super) env: &'env EnvInner,
    pub(super) slot: ReaderSlot<'env>,
}

impl<'env> ReadTxn<'env> {
    /// Inlined, so that the caller builds the txn where it keeps it (a C handle's state),
    /// not in a result it then copies.
    #[inline]
    pub(crate) fn begin(env: &'env EnvInner) -> Result<Self> {
        env.check_not_forked()?;
        let slot = ReaderSlot {
            env,
            index: env.reader_slot()?,
            fork_generation: env.fork_generation,
        };
        let meta = take_snapshot(env, &slot)?;
        let pages = SnapshotPages::new(&env.map, env.page_size, meta.last_pgno);
        Ok(ReadTxn {
            env,
            slot,
            meta,
            pages,
            named: RefCell::default(),
            last_named: Cell::new(None),
            handles: HandleScope::new(env, true),
        })
    }

    pub(crate) fn tree(&self, db: Database) -> Result<(DbRecord, Orders)> {
        match db {
            Database::MAIN => Ok((
                self.meta.main_db,
                main_orders(self.env, &self.meta.main_db)?,
            )),
            Database::FREE => Ok((self.meta.free_db, FREE_ORDERS)),
            _ => {
                // The DB this txn used last, without touching the map. A closed handle
                // (or a new comparator) moves the generation: then the handle may name
                // another DB, and its record is looked up again.
                let gen_now = self.env.orders_generation.load(Ordering::Acquire);
                if let Some((dbi, record, orders, gen)) = self.last_named.get() {
                    if dbi == db.0 && gen == gen_now {
                        return Ok((record, orders));
                    }
                }
                let cached = self.named.borrow().get(db.0).copied();
                let (record, orders, gen) = match cached {
                    Some(entry) if entry.2 == gen_now => entry,
                    _ => self.load_named(db)?,
                };
                if let Some((dbi, r, o, g)) =
                    self.last_named.replace(Some((db.0, record, orders, gen)))
                {
                    self.named.borrow_mut().insert(dbi, (r, o, g));
                }
                Ok((record, orders))
            }
        }
    }

    /// Finds named DB `db`'s record in this snapshot: from the environment's record cache
    /// when it holds the version this snapshot sees (no search, whatever the number of
    /// DBs), else by looking its name up in the main DB.
    pub(super) fn load_named(&self, db: Database) -> Result<(DbRecord, Orders, u64)> {
        let gen = self.env.orders_generation.load(Ordering::Acquire);
        let snapshot = self.meta.txnid;
        let slot =
            db.0.checked_sub(crate::catalog::FIRST_NAMED)
                .and_then(|i| self.env.record_cache.get(i as usize));
        if gen == 0 {
            // No application comparator and no closed handle: the flags give the orders.
            if let Some((_, words)) = slot.and_then(|s| s.get_if(|from| from <= snapshot)) {
                let record = crate::seqcache::record_from(words);
                return Ok((record, Orders::for_flags(record.flags), gen));
            }
        }
        let ((name, flags, orders), public) =
            catalog_entry_full(self.env, db, self.handles.lookup_serial())?;
        let main_cmp = main_orders(self.env, &self.meta.main_db)?.key;
        match named_record(&self.pages, &self.meta.main_db, main_cmp, &name)? {
            Some(record) => {
                // A handle private to this txn stays out of the shared cache, which other
                // txns read without asking the catalog.
                if let (Some(slot), true) = (slot, public) {
                    slot.put_if_empty(snapshot, crate::seqcache::record_words(&record));
                }
                Ok((record, orders, gen))
            }
            // Absent from this snapshot (created later): reads as an empty DB.
            None => Ok((DbRecord::empty(flags), orders, gen)),
        }
    }

    /// Opens an existing named DB (LMDB's `mdb_dbi_open` in a read txn); `None` is the
    /// main DB. `NotFound` if it does not exist in this snapshot (or the main DB, with
    /// DUPSORT or INTEGERKEY, holds no named DB).
    pub fn open_db(&self, name: Option<&str>) -> Result<Database> {
        let Some(name) = name else {
            return Ok(Database::MAIN);
        };
        check_room(self.env, name.as_bytes())?;
        check_main_holds_names(self.env, &self.meta.main_db, name.as_bytes(), false)?;
        let main_cmp = main_orders(self.env, &self.meta.main_db)?.key;
        let record = named_record(&self.pages, &self.meta.main_db, main_cmp, name.as_bytes())?
            .ok_or(Error::NotFound)?;
        let (dbi, _) = self
            .env
            .catalog
            .write()
            .map_err(|_| Error::Panic("catalog lock poisoned"))?
            .register(name.as_bytes(), record.flags, self.handles.serial())?;
        self.handles.opened.set(true);
        Ok(Database(dbi))
    }

    /// The id of the snapshot (the txn that committed it).
    pub fn id(&self) -> u64 {
        self.meta.txnid
    }

    /// The snapshot's pages, for cursors.
    pub(crate) fn source(&self) -> Source<'_> {
        Source::Snapshot(&self.pages)
    }

    /// The value of `key`, borrowed from the map for as long as the txn lives (`None` for a
    /// key longer than any that can be stored; `BadValSize` for an empty one, as LMDB).
    pub fn get(&self, db: Database, key: &[u8]) -> Result<Option<&[u8]>> {
        check_lookup_key(self.env, key)?;
        if db == Database::MAIN {
            // The snapshot's own record, read in place rather than copied out by `tree`.
            let orders = main_orders(self.env, &self.meta.main_db)?;
            return read_value(&self.pages, &self.meta.main_db, orders, key);
        }
        let (rec, cmp) = self.tree(db)?;
        read_value(&self.pages, &rec, cmp, key)
    }

    /// A cursor over `db`.
    pub fn cursor(&self, db: Database) -> Result<Cursor<'_>> {
        let (rec, orders) = self.tree(db)?;
        Ok(Cursor::new(Source::Snapshot(&self.pages), rec, orders))
    }

    /// Statistics of the main database in this snapshot.
    pub fn stat(&self) -> Stat {
        self.meta.main_db.stat(self.env.page_size)
    }

    /// Statistics of `db` in this snapshot.
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

    /// Writes this snapshot as a complete data file to `out`: both meta pages describe the
    /// snapshot, then every page up to its last one, as the map holds them (`mdb_env_copy`
    /// without compaction).
    pub fn copy_to(&self, out: &mut dyn std::io::Write) -> Result<()> {
        let ps = self.env.page_size;
        let mut metas = vec![0u8; 2 * ps];
        let mut buf = [0u8; META_WRITE_SIZE];
        for which in 0..2u64 {
            self.meta.encode(which, &mut buf);
            let at = which as usize * ps;
            metas[at..at + META_WRITE_SIZE].copy_from_slice(&buf);
        }
        out.write_all(&metas)?;
        const CHUNK: u64 = 256;
        let mut pgno = 2;
        while pgno <= self.meta.last_pgno {
            let count = CHUNK.min(self.meta.last_pgno + 1 - pgno);
            out.write_all(self.pages.pages(pgno, count as usize)?)?;
            pgno += count;
        }
        Ok(())
    }

    /// The snapshot's meta (last page, txnid, roots).
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Verifies every invariant of this snapshot (see `check`): tree order and shape,
    /// record counts, and that every page is used or free exactly once.
    pub fn check(&self) -> Result<crate::check::CheckReport> {
        self.with_orders(|orders_for| {
            crate::check::check_snapshot_with(&self.pages, &self.meta, orders_for)
        })?
    }

    /// Checks the snapshot as [`ReadTxn::check`] does, but goes on past every problem: the
    /// report lists them all (the first `options.max_problems` in full, the rest counted),
    /// with each DB's figures. Fails only if the environment's state cannot be read.
    pub fn check_report(
        &self,
        options: crate::check::CheckOptions<'_>,
    ) -> Result<crate::check::CheckDetails> {
        let src = crate::check::WithMetas {
            pages: &self.pages,
            metas: self.env.map.slice(0, 2 * self.env.page_size),
        };
        self.with_orders(|orders_for| {
            crate::check::check_report(&src, &self.meta, orders_for, options)
        })
    }

    /// Runs `f` with the orders of the snapshot's DBs: the application's comparators for
    /// the DBs opened with them, else those of each DB's flags.
    fn with_orders<R>(&self, f: impl FnOnce(crate::check::OrdersFor<'_>) -> R) -> Result<R> {
        let catalog = self
            .env
            .catalog
            .read()
            .map_err(|_| Error::Panic("catalog lock poisoned"))?;
        let orders_for = |name: Option<&[u8]>, flags: u16| match name {
            None => catalog.main_orders(flags),
            Some(name) => match catalog.lookup(name).and_then(|dbi| catalog.entry(dbi).ok()) {
                Some(entry) => entry.orders,
                None => Orders::for_flags(flags),
            },
        };
        Ok(f(&orders_for))
    }

    /// Ends the txn; the DB handles it opened become usable in every txn (as LMDB's
    /// `mdb_txn_commit` of a read txn). Dropping the txn does the same.
    pub fn commit(self) {}

    /// Ends the txn and closes the DB handles it opened (as LMDB's `mdb_txn_abort`).
    pub fn abort(self) {
        self.set_abort_on_drop();
    }

    /// Makes dropping the txn abort it (close the DB handles it opened) rather than commit
    /// it: [`ReadTxn::abort`] for a txn dropped where it lies (a C handle's state).
    pub fn set_abort_on_drop(&self) {
        self.handles.publish_on_drop.set(false);
    }

    /// Releases the snapshot but keeps the reader slot (LMDB's `mdb_txn_reset`).
    #[inline]
    pub fn reset(self) -> InactiveReadTxn<'env> {
        self.env.lock.end_snapshot(self.slot.index);
        InactiveReadTxn {
            env: self.env,
            slot: self.slot,
        }
    }

    /// [`ReadTxn::reset`] where the txn lies, for a handle that cannot change type (a C
    /// `MDB_txn`, which `mdb_txn_reset` keeps for `mdb_txn_renew`): nothing is moved or
    /// built. Releases the snapshot, keeping the reader slot; until
    /// [`ReadTxn::renew_in_place`] the txn reads an empty snapshot (every DB empty, the id
    /// 0), so no page of the released one stays reachable. The handles the txn opened are
    /// published, as when `reset` drops them.
    pub fn reset_in_place(&mut self) {
        self.env.lock.end_snapshot(self.slot.index);
        self.forget_snapshot();
        if self.handles.opened.get() {
            self.handles = HandleScope::new(self.env, true);
        }
    }

    /// [`InactiveReadTxn::renew`] in place: takes a snapshot of the latest commit (after
    /// [`ReadTxn::reset_in_place`], or instead of the one the txn holds). If that fails,
    /// the txn is left reset.
    pub fn renew_in_place(&mut self) -> Result<()> {
        match take_snapshot(self.env, &self.slot) {
            Ok(meta) => {
                self.use_snapshot(meta);
                Ok(())
            }
            Err(e) => {
                // The snapshot the txn held is released or replaced (`take_snapshot` ends
                // what it published before failing): nothing may point into it.
                self.forget_snapshot();
                Err(e)
            }
        }
    }

    /// Makes the txn read an empty snapshot, forgetting every record of the one it held
    /// (whose pages are no longer pinned): the state between a reset in place and the
    /// renewal.
    fn forget_snapshot(&mut self) {
        let held = self.meta;
        self.use_snapshot(Meta {
            main_db: DbRecord::empty(held.main_db.flags),
            free_db: DbRecord {
                pad: held.free_db.pad,
                ..DbRecord::empty(held.free_db.flags)
            },
            last_pgno: 1,
            txnid: 0,
            ..held
        });
    }

    /// Reads snapshot `meta` from now on: its pages, and none of the named-DB records
    /// looked up in the one before.
    fn use_snapshot(&mut self, meta: Meta) {
        self.meta = meta;
        self.pages = SnapshotPages::new(&self.env.map, self.env.page_size, meta.last_pgno);
        self.named.get_mut().clear();
        self.last_named.set(None);
    }
}

impl<'env> InactiveReadTxn<'env> {
    /// Takes a new snapshot of the latest commit (LMDB's `mdb_txn_renew`).
    #[inline]
    pub fn renew(self) -> Result<ReadTxn<'env>> {
        let meta = take_snapshot(self.env, &self.slot)?;
        let pages = SnapshotPages::new(&self.env.map, self.env.page_size, meta.last_pgno);
        Ok(ReadTxn {
            env: self.env,
            slot: self.slot,
            meta,
            pages,
            named: RefCell::default(),
            last_named: Cell::new(None),
            handles: HandleScope::new(self.env, true),
        })
    }
}
