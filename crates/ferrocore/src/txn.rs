//! Transactions: read-only snapshots, the write transaction, and its commit.
//!
//! A read txn claims a reader slot, publishes the txnid it reads, and from then on reads
//! pages straight from the map: zero-copy, no locks. The write txn holds the writer lock,
//! keeps every page it changes in memory (`store::DirtyPages`), and commits by writing
//! those pages in page order with vectored writes, flushing, then writing the meta page
//! that points at them and flushing again (invariant 2 of DESIGN.md).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// Map from DB handle (dbi) to what a txn keeps of that DB, hashed cheaply (the handle
/// is a small integer; SipHash cost more than the rest of a lookup).
type DbiMap<V> = HashMap<u32, V, BuildHasherDefault<crate::store::PgnoHasher>>;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use crate::btree::{self, KeyCmp, PutMode, TreeMut};
use crate::catalog::{Orders, KNOWN_FLAGS};
use crate::commit;
use crate::cursor::{dup_value, CursorCore, DupPos};
use crate::dupsort::{self, DupTree};
use crate::env::{env_flags, EnvInner, Stat};
use crate::error::{Error, Result};
use crate::freelist::{self, Reclaim};
use crate::lock::mutex::Locked;
use crate::lock::LockFile;
use crate::meta::{DbRecord, Meta, META_WRITE_SIZE};
use crate::page::{Node, PageShape, PageView};
use crate::store::{DirtyPages, MappedWrites, PageSource, PageStore, SnapshotPages};

/// A database handle. ferrocore has the main (unnamed) database; named databases come
/// with the catalog (see the issue tracker).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Database(pub(crate) u32);

impl Database {
    /// The free-page database (read-only access, as LMDB's `FREE_DBI`).
    pub const FREE: Database = Database(0);
    /// The main database.
    pub const MAIN: Database = Database(1);

    /// The LMDB `MDB_dbi` number of this handle.
    pub fn dbi(self) -> u32 {
        self.0
    }

    /// The handle with LMDB number `dbi` (as the C ABI receives it). Every operation
    /// checks it: a number no `open_db` returned gives `BadDbi`.
    pub fn from_dbi(dbi: u32) -> Database {
        Database(dbi)
    }
}

/// Flags for `put`, with LMDB's values.
pub mod put_flags {
    /// Fail with `KeyExist` if the key exists.
    pub const NO_OVERWRITE: u32 = 0x10;
    /// DUPSORT: fail with `KeyExist` if the key/value pair exists.
    pub const NO_DUP_DATA: u32 = 0x20;
    /// Replace the item at the cursor (cursor put only).
    pub const CURRENT: u32 = 0x40;
    /// Reserve space for the value and return it for the caller to fill.
    pub const RESERVE: u32 = 0x10000;
    /// The key sorts after every key in the DB; `KeyExist` otherwise. Builds full pages.
    pub const APPEND: u32 = 0x20000;
    /// DUPSORT: the value sorts after every value of the key; `KeyExist` otherwise.
    pub const APPEND_DUP: u32 = 0x40000;
    /// DUPFIXED: store several values of one size at once (cursor `put_multiple`).
    pub const MULTIPLE: u32 = 0x80000;
}

fn stat_of(db: &DbRecord, page_size: usize) -> Stat {
    Stat {
        page_size: page_size as u32,
        depth: db.depth as u32,
        branch_pages: db.branch_pages,
        leaf_pages: db.leaf_pages,
        overflow_pages: db.overflow_pages,
        entries: db.entries,
    }
}

/// Checks a key against the environment's limits.
fn check_key(env: &EnvInner, key: &[u8]) -> Result<()> {
    if key.is_empty() || key.len() > env.max_key_size {
        return Err(Error::BadValSize {
            what: "key",
            size: key.len(),
            max: env.max_key_size,
        });
    }
    Ok(())
}

/// A named DB's state in a write txn.
#[derive(Clone)]
struct NamedDb {
    /// The DB's name: a handle closed and reused names another DB (commit writes the
    /// record under this name, not under the handle's current one).
    name: Vec<u8>,
    record: DbRecord,
    orders: Orders,
    /// `orders_generation` when `orders` was read (0: from the flags, never checked).
    generation: u64,
    /// Changed by this txn: its record is written into the main DB at commit.
    dirty: bool,
}

/// Name, flags and key orders of a named DB.
type EntryInfo = (Vec<u8>, u16, Orders);

/// Name, flags and key order behind a named-DB handle, as txn `serial` may use it.
fn catalog_entry(env: &EnvInner, db: Database, serial: u64) -> Result<EntryInfo> {
    Ok(catalog_entry_full(env, db, serial)?.0)
}

/// As [`catalog_entry`], and whether the handle is public (not private to an open txn).
fn catalog_entry_full(env: &EnvInner, db: Database, serial: u64) -> Result<(EntryInfo, bool)> {
    let catalog = env
        .catalog
        .read()
        .map_err(|_| Error::Panic("catalog lock poisoned"))?;
    let e = catalog.entry_for(db.0, serial)?;
    Ok(((e.name.clone(), e.flags, e.orders), e.private_to.is_empty()))
}

/// The named-DB handles a txn opened: private to it until it commits (LMDB's rule), then
/// public; closed if it ends otherwise. A read txn's handles become public when it ends,
/// unless it is explicitly aborted.
struct HandleScope<'env> {
    env: &'env EnvInner,
    /// Unique per txn (and per renewal of a read txn).
    serial: u64,
    /// The txn opened a handle.
    opened: Cell<bool>,
    /// On drop: publish (true) or close (false) the handles.
    publish_on_drop: Cell<bool>,
}

impl<'env> HandleScope<'env> {
    fn new(env: &'env EnvInner, publish_on_drop: bool) -> Self {
        HandleScope {
            env,
            serial: env.txn_serial.fetch_add(1, Ordering::Relaxed) + 1,
            opened: Cell::new(false),
            publish_on_drop: Cell::new(publish_on_drop),
        }
    }

    /// Makes the handles public now (a commit that others may observe next).
    fn publish(&self) {
        if self.opened.replace(false) {
            if let Ok(mut c) = self.env.catalog.write() {
                c.publish(self.serial);
            }
        }
    }
}

impl Drop for HandleScope<'_> {
    fn drop(&mut self) {
        if !self.opened.get() {
            return;
        }
        if self.publish_on_drop.get() {
            self.publish();
        } else if let Ok(mut c) = self.env.catalog.write() {
            if c.discard(self.serial) {
                // A slot was freed and may be reused: cached records must be re-checked.
                self.env.orders_generation.fetch_add(1, Ordering::AcqRel);
            }
        }
    }
}

/// `DbsFull` if `name` has no handle and none is left: LMDB's first check in
/// `mdb_dbi_open`, before the name is looked up.
fn check_room(env: &EnvInner, name: &[u8]) -> Result<()> {
    let catalog = env
        .catalog
        .read()
        .map_err(|_| Error::Panic("catalog lock poisoned"))?;
    if catalog.full_for(name) {
        return Err(Error::DbsFull);
    }
    Ok(())
}

/// Reads the record of named DB `name` from the main DB `main`, if it exists.
/// `Incompatible` if `name` is a plain key of the main DB.
fn named_record<S: PageSource + ?Sized>(
    src: &S,
    main: &DbRecord,
    name: &[u8],
    _flags: u16,
) -> Result<Option<DbRecord>> {
    let Some((node_flags, data)) = btree::get_node(src, main, KeyCmp::Lexicographic, name)? else {
        return Ok(None);
    };
    if node_flags & crate::page::node_flags::SUBDATA == 0 || data.len() != DbRecord::SIZE {
        return Err(Error::Incompatible);
    }
    Ok(Some(DbRecord::decode(data)))
}

/// The main DB's orders (its flags, or comparators the application set).
fn main_orders(env: &EnvInner, main: &DbRecord) -> Result<Orders> {
    // Until an application comparator is set, orders follow the flags: no lock.
    if env.orders_generation.load(Ordering::Acquire) == 0 {
        return Ok(Orders::for_flags(main.flags));
    }
    let catalog = env
        .catalog
        .read()
        .map_err(|_| Error::Panic("catalog lock poisoned"))?;
    Ok(catalog.main_orders(main.flags))
}

/// The current orders of a named DB, refreshed if an application comparator changed since
/// `cached` was read (generation `cached_gen`).
fn named_orders(
    env: &EnvInner,
    db: Database,
    cached: Orders,
    cached_gen: u64,
    serial: u64,
) -> Result<(Orders, u64)> {
    let gen = env.orders_generation.load(Ordering::Acquire);
    if gen == cached_gen {
        return Ok((cached, gen));
    }
    Ok((catalog_entry(env, db, serial)?.2, gen))
}

/// The orders of the free DB.
const FREE_ORDERS: Orders = Orders {
    key: KeyCmp::Integer,
    dup: None,
};

/// Checks `mdb_dbi_open` flags; returns the DB flags to store.
fn check_db_flags(flags: u32) -> Result<u16> {
    if flags & !(KNOWN_FLAGS as u32 | crate::db_flags::CREATE) != 0 {
        return Err(Error::InvalidArgument("unknown database flag"));
    }
    let dup_only = (crate::db_flags::DUP_FIXED
        | crate::db_flags::INTEGER_DUP
        | crate::db_flags::REVERSE_DUP) as u32;
    if flags & dup_only != 0 && flags & crate::db_flags::DUP_SORT as u32 == 0 {
        // LMDB accepts DUPFIXED without DUPSORT and then loses the data (FORMAT.md §12).
        return Err(Error::InvalidArgument(
            "DUPFIXED, INTEGERDUP and REVERSEDUP need DUPSORT",
        ));
    }
    Ok((flags & KNOWN_FLAGS as u32) as u16)
}

/// The value of `key` (for a DUPSORT DB, its first value).
fn read_value<'s, S: PageSource + ?Sized>(
    src: &'s S,
    rec: &DbRecord,
    orders: Orders,
    key: &[u8],
) -> Result<Option<&'s [u8]>> {
    let cmp = orders.key;
    let Some(dcmp) = orders.dup else {
        return btree::get(src, rec, cmp, key);
    };
    if rec.root == crate::page::P_INVALID {
        return Ok(None);
    }
    let mut path = btree::Path::default();
    let (idx, exact) = btree::search(src, rec, cmp, key, &mut path)?;
    if !exact {
        return Ok(None);
    }
    let node = btree::view(src, path.leaf())?.node(idx)?;
    dupsort::first_value(src, dupsort::dups_of(&node, path.leaf())?, dcmp).map(Some)
}

/// A reader slot held by a read txn; given back on drop.
struct ReaderSlot<'env> {
    lock: &'env LockFile,
    index: usize,
    /// The fork generation it was taken in: a forked child must not give back the
    /// parent's slot (the parent still reads under it).
    fork_generation: u64,
}

impl Drop for ReaderSlot<'_> {
    fn drop(&mut self) {
        if crate::lock::fork::current_generation() == self.fork_generation {
            self.lock.release_slot(self.index);
        }
    }
}

/// Publishes a snapshot in `slot` and reads its meta.
fn take_snapshot(env: &EnvInner, slot: &ReaderSlot<'_>) -> Result<Meta> {
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
            Err(_) if env.lock.txnid_cell().load(Ordering::Acquire) != t => continue,
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
fn check_map_size(env: &EnvInner, slot: &ReaderSlot<'_>, meta: Meta) -> Result<Meta> {
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
fn check_write_map_size(env: &EnvInner, meta: Meta) -> Result<Meta> {
    let used = (meta.last_pgno + 1) * env.page_size as u64;
    if env.map_size_explicit.load(Ordering::Acquire) && used > env.map_size.load(Ordering::Acquire)
    {
        return Err(Error::MapResized);
    }
    Ok(meta)
}

/// A read-only transaction: a consistent snapshot of the last commit when it began.
///
/// Not tied to a thread (LMDB's `MDB_NOTLS` is always in effect): it is `Send`, so it and
/// its cursors may move to another thread and end there; it is not `Sync` (one thread at a
/// time). A thread may hold several read txns at once.
pub struct ReadTxn<'env> {
    env: &'env EnvInner,
    slot: ReaderSlot<'env>,
    meta: Meta,
    pages: SnapshotPages<'env>,
    /// Named DBs looked up by this txn (filled lazily).
    named: RefCell<DbiMap<(DbRecord, Orders, u64)>>,
    /// The named DB used last (most txns use one): (dbi, record, orders, generation).
    last_named: Cell<Option<(u32, DbRecord, Orders, u64)>>,
    /// Handles this txn opened.
    handles: HandleScope<'env>,
}

/// A reset read transaction: it keeps its reader slot but holds no snapshot (so it pins
/// no pages). `renew` makes it a read transaction again without reallocating.
pub struct InactiveReadTxn<'env> {
    env: &'env EnvInner,
    slot: ReaderSlot<'env>,
}

impl<'env> ReadTxn<'env> {
    pub(crate) fn begin(env: &'env EnvInner) -> Result<Self> {
        env.check_not_forked()?;
        let slot = ReaderSlot {
            lock: &env.lock,
            index: env.lock.acquire_slot()?,
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
                let cached = self.named.borrow().get(&db.0).copied();
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
    fn load_named(&self, db: Database) -> Result<(DbRecord, Orders, u64)> {
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
            catalog_entry_full(self.env, db, self.handles.serial)?;
        match named_record(&self.pages, &self.meta.main_db, &name, flags)? {
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
    /// main DB. `NotFound` if it does not exist in this snapshot.
    pub fn open_db(&self, name: Option<&str>) -> Result<Database> {
        let Some(name) = name else {
            return Ok(Database::MAIN);
        };
        check_room(self.env, name.as_bytes())?;
        let record = named_record(&self.pages, &self.meta.main_db, name.as_bytes(), 0)?
            .ok_or(Error::NotFound)?;
        let dbi = self
            .env
            .catalog
            .write()
            .map_err(|_| Error::Panic("catalog lock poisoned"))?
            .register(name.as_bytes(), record.flags, self.handles.serial)?;
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

    /// The value of `key`, borrowed from the map for as long as the txn lives.
    pub fn get(&self, db: Database, key: &[u8]) -> Result<Option<&[u8]>> {
        check_key(self.env, key)?;
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
        stat_of(&self.meta.main_db, self.env.page_size)
    }

    /// Statistics of `db` in this snapshot.
    pub fn db_stat(&self, db: Database) -> Result<Stat> {
        Ok(stat_of(&self.tree(db)?.0, self.env.page_size))
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
        crate::check::check_snapshot_with(&self.pages, &self.meta, &orders_for)
    }

    /// Ends the txn; the DB handles it opened become usable in every txn (as LMDB's
    /// `mdb_txn_commit` of a read txn). Dropping the txn does the same.
    pub fn commit(self) {}

    /// Ends the txn and closes the DB handles it opened (as LMDB's `mdb_txn_abort`).
    pub fn abort(self) {
        self.handles.publish_on_drop.set(false);
    }

    /// Releases the snapshot but keeps the reader slot (LMDB's `mdb_txn_reset`).
    pub fn reset(self) -> InactiveReadTxn<'env> {
        self.env.lock.end_snapshot(self.slot.index);
        InactiveReadTxn {
            env: self.env,
            slot: self.slot,
        }
    }
}

impl<'env> InactiveReadTxn<'env> {
    /// Takes a new snapshot of the latest commit (LMDB's `mdb_txn_renew`).
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

/// A cursor: a position in a database that moves in key order (and, in a DUPSORT
/// database, through each key's values in their order).
///
/// Each move returns `Ok(None)` where LMDB returns `MDB_NOTFOUND`; items borrow from the
/// transaction, not the cursor.
pub struct Cursor<'t> {
    src: Source<'t>,
    core: CursorCore,
    /// The current leaf, parsed once while the cursor stays on it.
    leaf: Option<PageView<'t>>,
}

/// The pages a read cursor walks: a snapshot, or the write txn's view. Both stay
/// unchanged for `'t` (the write txn is borrowed shared), so pages live for `'t`.
#[derive(Clone, Copy)]
pub(crate) enum Source<'t> {
    Snapshot(&'t SnapshotPages<'t>),
    Write(&'t DirtyPages<'t>),
}

impl<'t> Source<'t> {
    /// Page `pgno`, borrowed for the whole of `'t`.
    #[inline]
    fn page_for_txn(self, pgno: u64) -> Result<&'t [u8]> {
        match self {
            Source::Snapshot(s) => s.page(pgno),
            Source::Write(w) => w.page(pgno),
        }
    }

    /// The item `core` stands on, borrowed for the whole of `'t` (`NotFound` if it stands
    /// on none), with no dynamic dispatch per page (the scan path of detached cursors).
    #[inline]
    pub(crate) fn item(self, core: &CursorCore) -> Result<Item<'t>> {
        match self {
            Source::Snapshot(s) => core.item(s),
            Source::Write(w) => core.item(w),
        }
    }

    /// [`Source::item`] that, on a read snapshot, views the leaf through `shape` (what
    /// the last call parsed, if it was this leaf) instead of parsing its header again,
    /// and leaves the leaf's shape there. Pages of a snapshot never change, so a shape
    /// stays true for the snapshot it came from (the caller keeps it per snapshot).
    #[inline]
    pub(crate) fn item_with_shape(
        self,
        core: &CursorCore,
        shape: &mut Option<PageShape>,
    ) -> Result<Item<'t>> {
        let Source::Snapshot(s) = self else {
            return self.item(core);
        };
        if !core.is_valid() {
            return Err(Error::NotFound);
        }
        let pgno = core.pos.path.leaf();
        let bytes = s.page(pgno)?;
        let known = shape
            .filter(|sh| sh.pgno() == pgno)
            .and_then(|sh| PageView::with_shape(bytes, sh));
        let leaf = match known {
            Some(view) => view,
            None => {
                let view = PageView::parse(bytes, pgno)?;
                *shape = Some(view.shape());
                view
            }
        };
        core.item_on(s, &leaf)
    }

    /// Runs `f` with the pages as a source whose slices live for `'t`.
    pub(crate) fn with<R: 't>(self, f: impl FnOnce(&'t dyn PageSource) -> R) -> R {
        match self {
            Source::Snapshot(s) => f(s),
            Source::Write(w) => f(w),
        }
    }

    /// A duplicate value of a leaf node, borrowed for the whole of `'t`.
    #[inline]
    fn dup_value_for_txn(self, dup: &DupPos, node: &Node<'t>, leaf: u64) -> Result<&'t [u8]> {
        match self {
            Source::Snapshot(s) => dup_value(s, dup, node, leaf),
            Source::Write(w) => dup_value(w, dup, node, leaf),
        }
    }

    /// The value of a leaf node, borrowed for the whole of `'t`.
    #[inline]
    fn value_for_txn(self, node: &Node<'t>) -> Result<&'t [u8]> {
        match self {
            Source::Snapshot(s) => btree::node_value(s, node),
            Source::Write(w) => btree::node_value(w, node),
        }
    }
}

impl PageSource for Source<'_> {
    #[inline]
    fn page_size(&self) -> usize {
        match self {
            Source::Snapshot(s) => s.page_size(),
            Source::Write(w) => w.page_size(),
        }
    }

    #[inline]
    fn pages(&self, pgno: u64, count: usize) -> Result<&[u8]> {
        match self {
            Source::Snapshot(s) => s.pages(pgno, count),
            Source::Write(w) => w.pages(pgno, count),
        }
    }
}

/// A key/value pair borrowed from a transaction.
pub type Item<'t> = (&'t [u8], &'t [u8]);

impl<'t> Cursor<'t> {
    fn new(src: Source<'t>, db: DbRecord, orders: Orders) -> Self {
        Cursor {
            src,
            core: CursorCore::new(db, orders),
            leaf: None,
        }
    }

    /// The item the cursor stands on, if `moved`.
    #[inline]
    fn found(&mut self, moved: bool) -> Result<Option<Item<'t>>> {
        if !moved || !self.core.is_valid() {
            return Ok(None);
        }
        let pgno = self.core.pos.path.leaf();
        let leaf = match self.leaf {
            Some(view) if view.pgno() == pgno => view,
            _ => {
                let view = PageView::parse(self.src.page_for_txn(pgno)?, pgno)?;
                self.leaf = Some(view);
                view
            }
        };
        let idx = self.core.pos.path.leaf_idx();
        if idx >= leaf.num_keys() {
            return Ok(None);
        }
        let node = leaf.node(idx)?;
        let value = match &self.core.dup {
            None => self.src.value_for_txn(&node)?,
            Some(dup) => self.src.dup_value_for_txn(dup, &node, pgno)?,
        };
        Ok(Some((node.key, value)))
    }

    /// First item (`MDB_FIRST`).
    pub fn first(&mut self) -> Result<Option<Item<'t>>> {
        let moved = self.core.first(&self.src)?;
        self.found(moved)
    }

    /// Last item (`MDB_LAST`).
    pub fn last(&mut self) -> Result<Option<Item<'t>>> {
        let moved = self.core.last(&self.src)?;
        self.found(moved)
    }

    /// Next item, the first if not positioned (`MDB_NEXT`).
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> Result<Option<Item<'t>>> {
        let moved = self.core.next(&self.src)?;
        self.found(moved)
    }

    /// Previous item, the last if not positioned (`MDB_PREV`).
    pub fn prev(&mut self) -> Result<Option<Item<'t>>> {
        let moved = self.core.prev(&self.src)?;
        self.found(moved)
    }

    /// Next value of the current key (`MDB_NEXT_DUP`).
    pub fn next_dup(&mut self) -> Result<Option<Item<'t>>> {
        let moved = self.core.next_dup(&self.src)?;
        self.found(moved)
    }

    /// Previous value of the current key (`MDB_PREV_DUP`).
    pub fn prev_dup(&mut self) -> Result<Option<Item<'t>>> {
        let moved = self.core.prev_dup(&self.src)?;
        self.found(moved)
    }

    /// First value of the next key (`MDB_NEXT_NODUP`).
    pub fn next_nodup(&mut self) -> Result<Option<Item<'t>>> {
        let moved = self.core.next_nodup(&self.src)?;
        self.found(moved)
    }

    /// Last value of the previous key (`MDB_PREV_NODUP`).
    pub fn prev_nodup(&mut self) -> Result<Option<Item<'t>>> {
        let moved = self.core.prev_nodup(&self.src)?;
        self.found(moved)
    }

    /// First value of the current key (`MDB_FIRST_DUP`); `InvalidArgument` on a cursor that
    /// is not positioned, `Incompatible` outside a DUPSORT DB.
    pub fn first_dup(&mut self) -> Result<Option<Item<'t>>> {
        let moved = self.core.edge_dup(&self.src, false)?;
        self.found(moved)
    }

    /// Last value of the current key (`MDB_LAST_DUP`); errors as [`Cursor::first_dup`].
    pub fn last_dup(&mut self) -> Result<Option<Item<'t>>> {
        let moved = self.core.edge_dup(&self.src, true)?;
        self.found(moved)
    }

    /// Moves to `key` exactly, at its first value (`MDB_SET_KEY`).
    pub fn set(&mut self, key: &[u8]) -> Result<Option<Item<'t>>> {
        let moved = self.core.seek(&self.src, key, true)?;
        self.found(moved)
    }

    /// Moves to the first key `>= key` (`MDB_SET_RANGE`).
    pub fn set_range(&mut self, key: &[u8]) -> Result<Option<Item<'t>>> {
        let moved = self.core.seek(&self.src, key, false)?;
        self.found(moved)
    }

    /// Moves to the pair `key`/`value` (`MDB_GET_BOTH`).
    pub fn get_both(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Item<'t>>> {
        let moved = self.core.seek_both(&self.src, key, value, true)?;
        self.found(moved)
    }

    /// Moves to `key` and its first value `>= value` (`MDB_GET_BOTH_RANGE`).
    pub fn get_both_range(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Item<'t>>> {
        let moved = self.core.seek_both(&self.src, key, value, false)?;
        self.found(moved)
    }

    /// The item at the cursor (`MDB_GET_CURRENT`); `InvalidArgument` on a cursor that is
    /// not positioned.
    pub fn current(&mut self) -> Result<Option<Item<'t>>> {
        self.core.current_op()?;
        self.found(true)
    }

    /// Number of values of the current key (`mdb_cursor_count`).
    pub fn count(&mut self) -> Result<u64> {
        self.core.count(&self.src)
    }

    /// DUPFIXED: the current key's values on the current page of values, packed
    /// (`MDB_GET_MULTIPLE`); the cursor moves to the last of them.
    pub fn get_multiple(&mut self) -> Result<Option<&'t [u8]>> {
        let src = self.src;
        src.with(|s| self.core.get_multiple(s))
    }

    /// DUPFIXED: the next page of the current key's values (`MDB_NEXT_MULTIPLE`).
    pub fn next_multiple(&mut self) -> Result<Option<&'t [u8]>> {
        let src = self.src;
        src.with(|s| self.core.next_multiple(s))
    }

    /// DUPFIXED: the previous page of the current key's values (`MDB_PREV_MULTIPLE`).
    pub fn prev_multiple(&mut self) -> Result<Option<&'t [u8]>> {
        let src = self.src;
        src.with(|s| self.core.prev_multiple(s))
    }
}

/// The write transaction. Only one exists at a time in the whole environment.
///
/// Tied to the thread that began it (it holds the environment's writer mutex), as LMDB's
/// write txn is: it is not `Send`.
pub struct WriteTxn<'env> {
    env: &'env EnvInner,
    txnid: u64,
    base: Meta,
    free_db: DbRecord,
    main_db: DbRecord,
    /// Named DBs used by this txn, loaded on first use (never a loop over all DBs).
    named: DbiMap<NamedDb>,
    /// Named DBs this txn deleted (dbi, flags), and whether it emptied the main DB.
    deleted_named: Vec<(u32, u16)>,
    main_dropped: bool,
    pages: DirtyPages<'env>,
    /// An operation failed part way: the txn can only be aborted.
    failed: bool,
    /// Bumped by every change (put, delete, drop, nested abort): detached cursors compare it
    /// with the count they last saw to know whether the tree moved under them.
    changes: u64,
    /// Each `drop_db` of this txn: the DB and the change count it made. LMDB unpositions
    /// every cursor of a DB it empties; detached cursors read this to do the same.
    drops: Vec<(u32, u64)>,
    /// Handles this txn opened (private to it until it commits).
    handles: HandleScope<'env>,
    /// Room to build a DUPSORT key's grown sub-page in, kept from put to put.
    dup_scratch: Vec<u8>,
    // Released after Drop::drop has released the cross-process lock.
    _guard: MutexGuard<'env, ()>,
}

impl<'env> WriteTxn<'env> {
    pub(crate) fn begin(env: &'env EnvInner) -> Result<Self> {
        if env.flags.load(Ordering::Relaxed) & env_flags::READ_ONLY != 0 {
            return Err(Error::Io(std::io::Error::from_raw_os_error(libc::EACCES)));
        }
        env.check_not_forked()?;
        let guard = env.lock.writer_in_process()?;
        if env.failed.load(Ordering::Acquire) {
            return Err(Error::Panic("a commit failed; reopen the environment"));
        }
        if env.lock.lock_writer()? == Locked::OwnerDied {
            // A process died holding the writer lock, perhaps after writing its meta but
            // before publishing its txn id: publish the newest meta's, as LMDB does.
            if let Err(e) = env.recover_from_dead_writer() {
                env.lock.unlock_writer();
                return Err(e);
            }
        }
        let base = match env.latest_meta().and_then(|m| check_write_map_size(env, m)) {
            Ok(m) => m,
            Err(e) => {
                env.lock.unlock_writer();
                return Err(e);
            }
        };
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
        let spare = std::mem::take(
            &mut *env
                .spare_pages
                .lock()
                .map_err(|_| Error::Panic("spare pages lock"))?,
        );
        // Under WRITE_MAP the txn's pages are built in the map, within the file.
        let mapped = if env.map.is_writable() {
            match env.data.len() {
                Ok(len) => Some(MappedWrites::new(&*env.data, len, env.page_size)),
                Err(e) => {
                    env.lock.unlock_writer();
                    return Err(e.into());
                }
            }
        } else {
            None
        };
        let pages = DirtyPages::new(
            &env.map,
            env.page_size,
            base.last_pgno,
            env.max_pgno(),
            spare,
            Reclaim::new(base.free_db, limit),
            mapped,
        );
        Ok(WriteTxn {
            env,
            txnid: base.txnid + 1,
            base,
            free_db: base.free_db,
            main_db: base.main_db,
            named: DbiMap::default(),
            deleted_named: Vec::new(),
            main_dropped: false,
            pages,
            failed: false,
            changes: 0,
            drops: Vec::new(),
            handles: HandleScope::new(env, false),
            dup_scratch: Vec::new(),
            _guard: guard,
        })
    }

    /// This txn's id (the last committed id + 1).
    pub fn id(&self) -> u64 {
        self.txnid
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
        self.drops
            .iter()
            .any(|&(dbi, at)| dbi == db.0 && at > since)
    }

    /// A count that changes whenever this txn changes a tree (see [`crate::DetachedCursor`]).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::BadTxn);
        }
        Ok(())
    }

    pub(crate) fn tree(&self, db: Database) -> Result<(DbRecord, Orders)> {
        match db {
            Database::MAIN => Ok((self.main_db, main_orders(self.env, &self.main_db)?)),
            Database::FREE => Ok((self.free_db, FREE_ORDERS)),
            _ => match self.named.get(&db.0).filter(|n| !self.reused(db, n)) {
                Some(n) => Ok((
                    n.record,
                    named_orders(self.env, db, n.orders, n.generation, self.handles.serial)?.0,
                )),
                None => {
                    let (name, flags, cmp) = catalog_entry(self.env, db, self.handles.serial)?;
                    let record = named_record(&self.pages, &self.main_db, &name, flags)?
                        .unwrap_or_else(|| DbRecord::empty(flags));
                    Ok((record, cmp))
                }
            },
        }
    }

    /// Writes back the record of `db`, which [`WriteTxn::tree_mut`] loaded in this txn
    /// (without looking up its orders again).
    fn set_record(&mut self, db: Database, record: DbRecord) {
        if db == Database::MAIN {
            self.main_db = record;
        } else if let Some(named) = self.named.get_mut(&db.0) {
            named.record = record;
        } else {
            debug_assert!(false, "set_record of a DB tree_mut did not load");
        }
    }

    /// True if `db`'s handle was closed and reused for another DB since this txn loaded
    /// `n` for it (LMDB's `mdb_dump -a` closes each handle after use). Cheap unless some
    /// handle of the environment was closed since.
    fn reused(&self, db: Database, n: &NamedDb) -> bool {
        if self.env.orders_generation.load(Ordering::Acquire) == n.generation {
            return false;
        }
        match catalog_entry(self.env, db, self.handles.serial) {
            Ok((name, _, _)) => name != n.name,
            Err(_) => false, // the caller's next catalog look-up reports it
        }
    }

    /// Forgets what this txn loaded for `db` if its handle now names another DB. A DB this
    /// txn changed stays, under a number no handle has, so commit still writes it.
    fn forget_if_reused(&mut self, db: Database) {
        let Some(n) = self.named.get(&db.0) else {
            return;
        };
        if !self.reused(db, n) {
            return;
        }
        let old = self.named.remove(&db.0).expect("just looked up");
        if old.dirty {
            let spare = (0..=u32::MAX)
                .rev()
                .find(|k| !self.named.contains_key(k))
                .expect("fewer than 2^32 DBs");
            self.named.insert(spare, old);
        }
    }

    /// The record and key order of a DB this txn may write, loaded on first use.
    fn tree_mut(&mut self, db: Database) -> Result<(&mut DbRecord, Orders)> {
        match db {
            Database::MAIN => {
                let orders = main_orders(self.env, &self.main_db)?;
                Ok((&mut self.main_db, orders))
            }
            Database::FREE => Err(Error::InvalidArgument("the free DB is read-only")),
            _ => {
                self.forget_if_reused(db);
                let n = match self.named.entry(db.0) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        let (name, flags, cmp) = catalog_entry(self.env, db, self.handles.serial)?;
                        // A handle whose DB does not exist in this txn (created by a txn
                        // that aborted, or dropped) cannot be written.
                        let record = named_record(&self.pages, &self.main_db, &name, flags)?
                            .ok_or(Error::BadDbi)?;
                        e.insert(NamedDb {
                            name,
                            record,
                            orders: cmp,
                            generation: 0,
                            dirty: false,
                        })
                    }
                };
                (n.orders, n.generation) =
                    named_orders(self.env, db, n.orders, n.generation, self.handles.serial)?;
                n.dirty = true;
                Ok((&mut n.record, n.orders))
            }
        }
    }

    /// Opens the named DB `name` (LMDB's `mdb_dbi_open`): `flags` are DB flags plus
    /// `db_flags::CREATE` to create it if it does not exist. `None` is the main DB.
    pub fn open_db(&mut self, name: Option<&str>, flags: u32) -> Result<Database> {
        self.check_usable()?;
        let Some(name) = name else {
            // As LMDB: flags given for the main DB are added to its record.
            let f = check_db_flags(flags)?;
            self.main_db.flags |= f;
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
        let existing = named_record(&self.pages, &self.main_db, name, db_flags)?;
        let dbi = match existing {
            Some(record) => {
                if record.flags & KNOWN_FLAGS != db_flags && flags & !crate::db_flags::CREATE != 0 {
                    return Err(Error::Incompatible);
                }
                let dbi = self
                    .env
                    .catalog
                    .write()
                    .map_err(|_| Error::Panic("catalog lock poisoned"))?
                    .register(name, record.flags, self.handles.serial)?;
                self.handles.opened.set(true);
                dbi
            }

            None if create => {
                let dbi = self
                    .env
                    .catalog
                    .write()
                    .map_err(|_| Error::Panic("catalog lock poisoned"))?
                    .register(name, db_flags, self.handles.serial)?;
                self.handles.opened.set(true);
                // As LMDB does, the record enters the main DB at once (rewritten at commit).
                let mode = PutMode {
                    node_flags: crate::page::node_flags::SUBDATA,
                    ..PutMode::default()
                };
                let record = DbRecord::empty(db_flags).to_bytes();
                let r = TreeMut {
                    store: &mut self.pages,
                    db: &mut self.main_db,
                    cmp: KeyCmp::Lexicographic,
                }
                .put(name, &record, mode);
                self.note(r)?;
                self.named.insert(
                    dbi,
                    NamedDb {
                        name: name.to_vec(),
                        record: DbRecord::empty(db_flags),
                        orders: Orders::for_flags(db_flags),
                        generation: 0,
                        dirty: true,
                    },
                );
                dbi
            }
            None => return Err(Error::NotFound),
        };
        Ok(Database(dbi))
    }

    /// Records a failure that may have left the txn's pages half changed.
    fn note<T>(&mut self, r: Result<T>) -> Result<T> {
        self.changes = self.changes.wrapping_add(1);
        if let Err(e) = &r {
            if !matches!(
                e,
                Error::KeyExist | Error::NotFound | Error::Incompatible | Error::BadDbi
            ) {
                self.failed = true;
            }
        }
        r
    }

    /// The value of `key` as this txn sees it.
    pub fn get(&self, db: Database, key: &[u8]) -> Result<Option<&[u8]>> {
        self.check_usable()?;
        check_key(self.env, key)?;
        let (rec, cmp) = self.tree(db)?;
        read_value(&self.pages, &rec, cmp, key)
    }

    /// Stores `value` under `key`. `flags` from [`put_flags`]: `NO_OVERWRITE` and `APPEND`
    /// are supported on the main DB.
    pub fn put(&mut self, db: Database, key: &[u8], value: &[u8], flags: u32) -> Result<()> {
        self.put_inner(db, key, value, flags)
    }

    fn put_inner(&mut self, db: Database, key: &[u8], value: &[u8], flags: u32) -> Result<()> {
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
        if flags & put_flags::MULTIPLE != 0 {
            return Err(Error::InvalidArgument(
                "MULTIPLE is a cursor put flag (WriteCursor::put_multiple)",
            ));
        }
        if flags & (put_flags::CURRENT | put_flags::RESERVE) != 0 {
            return Err(Error::InvalidArgument(
                "CURRENT is a cursor put flag and RESERVE has its own call (put_reserve)",
            ));
        }
        if flags & !known != 0 {
            return Err(Error::InvalidArgument("unknown put flag"));
        }
        let no_overwrite = flags & put_flags::NO_OVERWRITE != 0;
        let (record, orders) = self.tree_mut(db)?;
        let cmp = orders.key;
        let mut record_copy = *record;
        if let Some(dcmp) = orders.dup {
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
                        let tree = TreeMut {
                            store: &mut self.pages,
                            db: &mut record_copy,
                            cmp,
                        };
                        let scratch = &mut self.dup_scratch;
                        let r = DupTree {
                            tree,
                            dcmp,
                            scratch,
                        }
                        .make_set(key);
                        self.set_record(db, record_copy);
                        self.note(r)?;
                    }
                    return Err(Error::KeyExist);
                }
            }
            let no_dup_data = flags & put_flags::NO_DUP_DATA != 0;
            let tree = TreeMut {
                store: &mut self.pages,
                db: &mut record_copy,
                cmp,
            };
            let scratch = &mut self.dup_scratch;
            let r = DupTree {
                tree,
                dcmp,
                scratch,
            }
            .put(key, value, no_overwrite, no_dup_data);
            self.set_record(db, record_copy);
            return self.note(r.map(|_| ()));
        }
        // Without DUPSORT, LMDB ignores NO_DUP_DATA and APPEND_DUP; so does ferrocore.
        let mode = PutMode {
            no_overwrite,
            append: flags & put_flags::APPEND != 0,
            ..PutMode::default()
        };
        let r = TreeMut {
            store: &mut self.pages,
            db: &mut record_copy,
            cmp,
        }
        .put(key, value, mode);
        self.set_record(db, record_copy);
        self.note(r)
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
        if node.flags & crate::page::node_flags::BIGDATA != 0 {
            let run = node.overflow_pgno();
            let start = crate::page::PAGE_HEADER_SIZE;
            return Ok(&mut self.pages.dirty_mut(run)[start..start + len]);
        }
        Ok(crate::page::edit::inline_data_mut(
            self.pages.dirty_mut(path.leaf()),
            idx,
        ))
    }

    /// Deletes `key`. Returns false if it was not present.
    pub fn delete(&mut self, db: Database, key: &[u8]) -> Result<bool> {
        self.check_usable()?;
        self.delete_value(db, key, None)
    }

    /// Deletes one key/value pair of a DUPSORT DB (LMDB's `mdb_del` with data); on other
    /// DBs `value` is ignored, as in LMDB. Returns false if the pair was not present.
    pub fn delete_value(&mut self, db: Database, key: &[u8], value: Option<&[u8]>) -> Result<bool> {
        self.check_usable()?;
        check_key(self.env, key)?;
        let (record, orders) = self.tree_mut(db)?;
        let cmp = orders.key;
        let mut record_copy = *record;
        let r = match orders.dup {
            Some(dcmp) => DupTree {
                tree: TreeMut {
                    store: &mut self.pages,
                    db: &mut record_copy,
                    cmp,
                },
                dcmp,
                scratch: &mut self.dup_scratch,
            }
            .delete(key, value),
            None => TreeMut {
                store: &mut self.pages,
                db: &mut record_copy,
                cmp,
            }
            .delete(key),
        };
        *self.tree_mut(db)?.0 = record_copy;
        self.note(r)
    }

    /// Empties `db`, or with `delete` also removes it and closes its handle (LMDB's
    /// `mdb_drop`). The main DB is only emptied (with every named DB in it).
    pub fn drop_db(&mut self, db: Database, delete: bool) -> Result<()> {
        self.check_usable()?;
        let (record, _) = self.tree_mut(db)?;
        let rec = *record;
        let r = dupsort::free_tree(&mut self.pages, &rec);
        self.note(r)?;
        self.drops.push((db.0, self.changes));
        if db == Database::MAIN {
            self.main_db = DbRecord::empty(rec.flags);
            // The named DBs' records were in it: they no longer exist in this txn.
            self.named.clear();
            self.main_dropped = true;
            return Ok(());
        }
        if !delete {
            *self.tree_mut(db)?.0 = DbRecord::empty(rec.flags);
            return Ok(());
        }
        let (name, _, _) = catalog_entry(self.env, db, self.handles.serial)?;
        let main_orders = main_orders(self.env, &self.main_db)?;
        let r = TreeMut {
            store: &mut self.pages,
            db: &mut self.main_db,
            cmp: main_orders.key,
        }
        .delete_kind(&name, crate::page::node_flags::SUBDATA);
        self.note(r)?;
        self.named.remove(&db.0);
        self.deleted_named.push((db.0, rec.flags));
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
        Ok(stat_of(&self.tree(db)?.0, self.env.page_size))
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
        stat_of(&self.main_db, self.env.page_size)
    }

    /// Starts a bulk load of `db`: items pushed in the DB's order build it bottom-up if it
    /// is empty (full pages, no splits), or are put into it if it has data. See
    /// [`crate::bulk`].
    pub fn bulk_loader(
        &mut self,
        db: Database,
        options: crate::bulk::BulkOptions,
    ) -> Result<crate::bulk::BulkLoader<'_, 'env>> {
        crate::bulk::BulkLoader::begin(self, db, options)
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

    /// Commits: every change becomes durable (unless `NO_SYNC`) and visible atomically.
    pub fn commit(mut self) -> Result<()> {
        self.check_usable()?;
        self.env.check_not_forked()?;
        if self.pages.dirty_count() == 0
            && self.main_db == self.base.main_db
            && self.named.values().all(|n| !n.dirty)
        {
            self.handles.publish();
            return Ok(()); // Nothing changed: LMDB writes no meta either.
        }
        let r = self.commit_inner();
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    fn commit_inner(&mut self) -> Result<()> {
        // Named DBs this txn changed: their records go into the main DB.
        let mut changed: Vec<(u32, DbRecord)> = self
            .named
            .iter()
            .filter(|(_, n)| n.dirty)
            .map(|(&dbi, n)| (dbi, n.record))
            .collect();
        changed.sort_unstable_by_key(|&(dbi, _)| dbi);
        for &(dbi, record) in &changed {
            // Under the name it was loaded with (its handle may name another DB by now).
            let name = self.named[&dbi].name.clone();
            let mode = PutMode {
                node_flags: crate::page::node_flags::SUBDATA,
                ..PutMode::default()
            };
            TreeMut {
                store: &mut self.pages,
                db: &mut self.main_db,
                cmp: KeyCmp::Lexicographic,
            }
            .put(&name, &record.to_bytes(), mode)?;
        }
        freelist::save(&mut self.pages, &mut self.free_db, self.txnid)?;
        let env = self.env;
        let next_pgno = self.pages.next_pgno;
        commit::grow_file(env, next_pgno)?;
        commit::write_data(
            env,
            &self.pages.sorted_dirty(),
            self.pages.writes_through_map(),
        )?;
        commit::flush_data(env)?;
        let meta = Meta {
            address: self.base.address,
            map_size: env.map_size_for(next_pgno),
            free_db: self.free_db,
            main_db: self.main_db,
            last_pgno: next_pgno - 1,
            txnid: self.txnid,
        };
        debug_assert!(meta.txnid > self.base.txnid, "txn ids only increase");
        commit::write_and_flush_meta(env, &meta)?;
        // Before readers can see this txn, the record cache learns the new versions, and the
        // environment that this process wrote it.
        self.publish_records(&changed);
        // The handles it opened become public before others can see the commit.
        self.handles.publish();
        env.local_txnid.store(self.txnid, Ordering::SeqCst);
        env.lock.txnid_cell().store(self.txnid, Ordering::SeqCst);
        Ok(())
    }

    /// Updates the environment's record cache with the named-DB records this txn wrote, as of
    /// its txnid (called after the meta is durable, before the txn becomes visible).
    fn publish_records(&self, changed: &[(u32, DbRecord)]) {
        let env = self.env;
        if self.main_dropped {
            // Every named DB vanished with the main DB: stop trusting the cache.
            env.orders_generation.fetch_add(1, Ordering::AcqRel);
            return;
        }
        let slot = |dbi: u32| {
            dbi.checked_sub(crate::catalog::FIRST_NAMED)
                .and_then(|i| env.record_cache.get(i as usize))
        };
        for &(dbi, record) in changed {
            if let Some(s) = slot(dbi) {
                s.put(self.txnid, crate::seqcache::record_words(&record));
            }
        }
        for &(dbi, flags) in &self.deleted_named {
            if let Some(s) = slot(dbi) {
                s.put(
                    self.txnid,
                    crate::seqcache::record_words(&DbRecord::empty(flags)),
                );
            }
        }
    }

    /// Discards every change.
    pub fn abort(self) {}
}

impl Drop for WriteTxn<'_> {
    fn drop(&mut self) {
        let spare = self.pages.take_spare();
        if let Ok(mut s) = self.env.spare_pages.lock() {
            *s = spare;
        }
        // The cross-process writer mutex; the in-process one goes with `_guard` just after.
        self.env.lock.unlock_writer();
    }
}

/// A nested write txn (LMDB's child txn): its changes become part of the parent on
/// [`NestedTxn::commit`] and vanish on [`NestedTxn::abort`] (or drop), leaving the parent
/// as it was. It dereferences to [`WriteTxn`], so it can do everything a write txn does,
/// including nesting further; the parent cannot be used while it is open (it is borrowed).
pub struct NestedTxn<'p, 'env> {
    txn: &'p mut WriteTxn<'env>,
    level: Option<NestedLevel>,
}

/// One level of nesting, as [`WriteTxn::begin_nested_level`] opened it: the parts of the
/// write txn's state the nested txn may change, as the parent left them. Handle-based
/// bindings (the C ABI) keep it instead of a [`NestedTxn`], which borrows the parent.
#[must_use = "a nested level must be committed or aborted"]
pub struct NestedLevel {
    free_db: DbRecord,
    main_db: DbRecord,
    named: DbiMap<NamedDb>,
    deleted_named: Vec<(u32, u16)>,
    main_dropped: bool,
    failed: bool,
    /// `drops.len()` when the level began: an abort forgets the level's drops.
    drops: usize,
}

impl<'env> WriteTxn<'env> {
    /// Begins a nested txn (`mdb_txn_begin` with this txn as parent).
    pub fn begin_nested(&mut self) -> Result<NestedTxn<'_, 'env>> {
        let level = self.begin_nested_level()?;
        Ok(NestedTxn {
            txn: self,
            level: Some(level),
        })
    }

    /// Begins a nested level without borrowing: from here until the level is given back to
    /// [`WriteTxn::commit_nested_level`] or [`WriteTxn::abort_nested_level`], changes belong
    /// to it. Levels must be ended in the reverse order of their beginning.
    pub fn begin_nested_level(&mut self) -> Result<NestedLevel> {
        self.check_usable()?;
        if self.pages.writes_through_map() {
            // As LMDB: a WRITE_MAP txn changes pages in place, with nothing to undo them by.
            return Err(Error::BadTxn);
        }
        self.pages.begin_nested();
        Ok(NestedLevel {
            free_db: self.free_db,
            main_db: self.main_db,
            named: self.named.clone(),
            deleted_named: self.deleted_named.clone(),
            main_dropped: self.main_dropped,
            failed: self.failed,
            drops: self.drops.len(),
        })
    }

    /// Makes the innermost level's changes part of the level below. A level that failed is
    /// aborted instead, and `BadTxn` returned.
    pub fn commit_nested_level(&mut self, level: NestedLevel) -> Result<()> {
        if self.failed {
            self.abort_nested_level(level);
            return Err(Error::BadTxn);
        }
        self.pages.commit_nested();
        Ok(())
    }

    /// Discards the innermost level's changes.
    pub fn abort_nested_level(&mut self, level: NestedLevel) {
        self.pages.abort_nested();
        self.free_db = level.free_db;
        self.main_db = level.main_db;
        self.named = level.named;
        self.deleted_named = level.deleted_named;
        self.main_dropped = level.main_dropped;
        self.failed = level.failed;
        self.drops.truncate(level.drops);
        self.changes = self.changes.wrapping_add(1);
    }
}

impl NestedTxn<'_, '_> {
    /// Makes the nested txn's changes part of its parent. A nested txn that failed is
    /// aborted instead, and `BadTxn` returned.
    pub fn commit(mut self) -> Result<()> {
        let level = self.level.take().expect("a nested txn ends once");
        self.txn.commit_nested_level(level)
    }

    /// Discards the nested txn's changes.
    pub fn abort(self) {}
}

impl<'env> std::ops::Deref for NestedTxn<'_, 'env> {
    type Target = WriteTxn<'env>;

    fn deref(&self) -> &WriteTxn<'env> {
        self.txn
    }
}

impl<'env> std::ops::DerefMut for NestedTxn<'_, 'env> {
    fn deref_mut(&mut self) -> &mut WriteTxn<'env> {
        self.txn
    }
}

impl Drop for NestedTxn<'_, '_> {
    fn drop(&mut self) {
        if let Some(level) = self.level.take() {
            self.txn.abort_nested_level(level);
        }
    }
}

/// A cursor on the write txn that can also put and delete at its position.
pub struct WriteCursor<'t, 'env> {
    txn: &'t mut WriteTxn<'env>,
    db: Database,
    core: CursorCore,
}

impl<'t, 'env> WriteCursor<'t, 'env> {
    /// A write cursor standing where `core` stands (a detached cursor lending its state).
    pub(crate) fn with_core(txn: &'t mut WriteTxn<'env>, db: Database, core: CursorCore) -> Self {
        WriteCursor { txn, db, core }
    }

    /// True if the DB has sorted duplicates.
    pub fn is_dupsort(&self) -> bool {
        self.core.dcmp.is_some()
    }

    /// Gives the cursor state back (to the detached cursor that lent it).
    pub(crate) fn into_core(self) -> CursorCore {
        self.core
    }

    /// Stores a value of `len` bytes under `key`, leaves the cursor on it and returns the
    /// value to be filled in place (`MDB_RESERVE` through a cursor).
    pub fn put_reserve(&mut self, key: &[u8], len: usize, flags: u32) -> Result<&mut [u8]> {
        if self.core.dcmp.is_some() {
            return Err(Error::Incompatible);
        }
        let zeros = vec![0u8; len];
        self.put(key, &zeros, flags)?;
        self.txn.value_slot_mut(self.db, key, len)
    }
}

/// Generates the movement methods of [`WriteCursor`], each a [`CursorCore`] move followed
/// by the item it lands on.
macro_rules! write_cursor_moves {
    ($($(#[$doc:meta])* $name:ident => |$core:ident, $src:ident| $move:expr;)*) => {
        $(
            $(#[$doc])*
            #[allow(clippy::should_implement_trait)]
            pub fn $name(&mut self) -> Result<Option<Item<'_>>> {
                self.refresh()?;
                let $core = &mut self.core;
                let $src = &self.txn.pages;
                let moved = $move?;
                self.found(moved)
            }
        )*
    };
}

impl WriteCursor<'_, '_> {
    /// Picks up the DB's record as the txn's own changes left it.
    fn refresh(&mut self) -> Result<()> {
        self.core.db = self.txn.tree(self.db)?.0;
        Ok(())
    }

    fn found(&self, moved: bool) -> Result<Option<Item<'_>>> {
        if !moved || !self.core.is_valid() {
            return Ok(None);
        }
        match self.core.item(&self.txn.pages) {
            Ok(item) => Ok(Some(item)),
            Err(Error::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    write_cursor_moves! {
        /// First item (`MDB_FIRST`).
        first => |c, src| c.first(src);
        /// Last item (`MDB_LAST`).
        last => |c, src| c.last(src);
        /// Next item; after a delete through this cursor, the item that followed it.
        next => |c, src| c.next(src);
        /// Previous item.
        prev => |c, src| c.prev(src);
        /// Next value of the current key (`MDB_NEXT_DUP`).
        next_dup => |c, src| c.next_dup(src);
        /// Previous value of the current key (`MDB_PREV_DUP`).
        prev_dup => |c, src| c.prev_dup(src);
        /// First value of the next key (`MDB_NEXT_NODUP`).
        next_nodup => |c, src| c.next_nodup(src);
        /// Last value of the previous key (`MDB_PREV_NODUP`).
        prev_nodup => |c, src| c.prev_nodup(src);
        /// First value of the current key (`MDB_FIRST_DUP`); `InvalidArgument` on a cursor
        /// that is not positioned, `Incompatible` outside a DUPSORT DB.
        first_dup => |c, src| c.edge_dup(src, false);
        /// Last value of the current key (`MDB_LAST_DUP`); errors as for `first_dup`.
        last_dup => |c, src| c.edge_dup(src, true);
    }

    /// Moves to `key` exactly (`MDB_SET_KEY`).
    pub fn set(&mut self, key: &[u8]) -> Result<Option<Item<'_>>> {
        self.refresh()?;
        let moved = self.core.seek(&self.txn.pages, key, true)?;
        self.found(moved)
    }

    /// Moves to the first key `>= key` (`MDB_SET_RANGE`).
    pub fn set_range(&mut self, key: &[u8]) -> Result<Option<Item<'_>>> {
        self.refresh()?;
        let moved = self.core.seek(&self.txn.pages, key, false)?;
        self.found(moved)
    }

    /// Moves to the pair `key`/`value` (`MDB_GET_BOTH`).
    pub fn get_both(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Item<'_>>> {
        self.refresh()?;
        let moved = self.core.seek_both(&self.txn.pages, key, value, true)?;
        self.found(moved)
    }

    /// Moves to `key` and its first value `>= value` (`MDB_GET_BOTH_RANGE`).
    pub fn get_both_range(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Item<'_>>> {
        self.refresh()?;
        let moved = self.core.seek_both(&self.txn.pages, key, value, false)?;
        self.found(moved)
    }

    /// The item at the cursor; after a delete, the item that followed the deleted one (and,
    /// as in LMDB, the next move then starts from it). `InvalidArgument` on a cursor that
    /// is not positioned.
    pub fn current(&mut self) -> Result<Option<Item<'_>>> {
        self.core.current_op()?;
        self.found(true)
    }

    /// Number of values of the current key.
    pub fn count(&mut self) -> Result<u64> {
        self.core.count(&self.txn.pages)
    }

    /// DUPFIXED: the current page of the current key's values, packed (`MDB_GET_MULTIPLE`).
    pub fn get_multiple(&mut self) -> Result<Option<&[u8]>> {
        self.refresh()?;
        self.core.get_multiple(&self.txn.pages)
    }

    /// DUPFIXED: the next page of the current key's values (`MDB_NEXT_MULTIPLE`).
    pub fn next_multiple(&mut self) -> Result<Option<&[u8]>> {
        self.refresh()?;
        self.core.next_multiple(&self.txn.pages)
    }

    /// DUPFIXED: the previous page of the current key's values (`MDB_PREV_MULTIPLE`).
    pub fn prev_multiple(&mut self) -> Result<Option<&[u8]>> {
        self.refresh()?;
        self.core.prev_multiple(&self.txn.pages)
    }

    /// DUPFIXED: stores the values of `size` bytes packed in `values` under `key`
    /// (`MDB_MULTIPLE`); returns how many were stored. The cursor ends on the last one.
    pub fn put_multiple(
        &mut self,
        key: &[u8],
        values: &[u8],
        size: usize,
        flags: u32,
    ) -> Result<usize> {
        let fixed = self.core.db.flags & crate::db_flags::DUP_FIXED != 0;
        if !fixed {
            return Err(Error::Incompatible);
        }
        if size == 0 || !values.len().is_multiple_of(size) {
            return Err(Error::BadValSize {
                what: "MULTIPLE values",
                size: values.len(),
                max: size,
            });
        }
        let mut stored = 0;
        for value in values.chunks_exact(size) {
            self.put(key, value, flags & !put_flags::MULTIPLE)?;
            stored += 1;
        }
        Ok(stored)
    }

    /// Stores `key`/`value` and leaves the cursor on that pair. With `put_flags::CURRENT`
    /// the item at the cursor is replaced (`key` should be its key; as in LMDB it is not
    /// checked; in a DUPSORT DB the current value is replaced by `value`, which then takes
    /// its place in the order).
    pub fn put(&mut self, key: &[u8], value: &[u8], flags: u32) -> Result<()> {
        if flags & put_flags::CURRENT != 0 {
            let (cur_key, cur_value) = match self.core.item(&self.txn.pages) {
                Ok((k, v)) => (k.to_vec(), v.to_vec()),
                Err(Error::NotFound) => {
                    return Err(Error::InvalidArgument("CURRENT needs a positioned cursor"))
                }
                Err(e) => return Err(e),
            };
            // As LMDB, the item at the cursor is replaced whatever `key` says (LMDB documents
            // that it must match and does not check).
            let _ = key;
            if self.core.dcmp.is_some() && cur_value != value {
                self.txn.delete_value(self.db, &cur_key, Some(&cur_value))?;
            }
            return self.put(&cur_key, value, flags & !put_flags::CURRENT);
        }
        if let Err(e) = self.txn.put_inner(self.db, key, value, flags) {
            if matches!(e, Error::KeyExist) {
                self.stand_where_put_failed(key, value, flags)?;
            }
            return Err(e);
        }
        self.refresh()?;
        let found = if self.core.dcmp.is_some() {
            self.core.seek_both(&self.txn.pages, key, value, true)?
        } else {
            self.core.seek(&self.txn.pages, key, true)?
        };
        debug_assert!(found, "a pair just stored is found");
        if flags & put_flags::APPEND != 0 {
            self.core.mark_appended(true);
        } else if flags & put_flags::APPEND_DUP != 0 {
            self.core.mark_appended(false);
        }
        Ok(())
    }

    /// After a put refused with `KeyExist`, stands where LMDB's cursor stands: on the last
    /// item (APPEND: it looked there), on the key's last value (APPEND_DUP), on the pair
    /// (NO_DUP_DATA), or on the key's first value (NO_OVERWRITE).
    fn stand_where_put_failed(&mut self, key: &[u8], value: &[u8], flags: u32) -> Result<()> {
        self.refresh()?;
        let src = &self.txn.pages;
        // LMDB returns from these two before it clears C_DEL; the mark stays.
        let deleted_mark = self.core.deleted_mark();
        if flags & put_flags::APPEND != 0 {
            self.core.last(src)?;
            self.core.set_deleted_mark(deleted_mark);
        } else if flags & put_flags::APPEND_DUP != 0 && self.core.dcmp.is_some() {
            if self.core.seek(src, key, true)? {
                self.core.edge_dup(src, true)?;
            }
        } else if flags & put_flags::NO_DUP_DATA != 0 && self.core.dcmp.is_some() {
            self.core.seek_both(src, key, value, true)?;
        } else {
            self.core.seek(src, key, true)?;
            self.core.set_deleted_mark(deleted_mark);
        }
        Ok(())
    }

    /// Deletes the item at the cursor: in a DUPSORT DB the current value, or with
    /// `put_flags::NO_DUP_DATA` every value of the key. The cursor then stands on the item
    /// that followed: `next` returns it, `prev` the one before the deleted item.
    pub fn delete(&mut self, flags: u32) -> Result<()> {
        // As LMDB: EINVAL on a cursor never positioned, or left unpositioned (its last
        // positioning failed, or a delete emptied the DB).
        if !self.core.is_positioned() {
            return Err(Error::InvalidArgument("cursor is not positioned"));
        }
        let all = flags & put_flags::NO_DUP_DATA != 0 || self.core.dcmp.is_none();
        // Deleting a whole key needs only the key (LMDB allows it even when the cursor stands
        // past the key's last value); deleting one value needs the value under the cursor.
        let (key, value) = if all {
            (self.core.key(&self.txn.pages)?.to_vec(), Vec::new())
        } else {
            let (k, v) = self.core.item(&self.txn.pages)?;
            (k.to_vec(), v.to_vec())
        };
        let deleted =
            self.txn
                .delete_value(self.db, &key, if all { None } else { Some(&value) })?;
        debug_assert!(deleted);
        self.refresh()?;
        let db = self.core.db;
        self.core
            .reposition_after_delete(&self.txn.pages, db, &key, (!all).then_some(&value[..]))
    }
}
