//! Handles: the `Database` handle, what a txn keeps of each named DB, and the orders and
//! records it looks up for them.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::btree::{self};
use crate::catalog::KNOWN_FLAGS;
use crate::dupsort::{self};
use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::order::{KeyCmp, Orders};
use crate::shared::EnvInner;
use crate::store::PageSource;

pub(super) use super::dbi_map::DbiMap;

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

/// Checks a key to look up (a get, a delete): empty is refused (`BadValSize`), as LMDB
/// refuses it; a key longer than the limit is looked up like any other, and not found
/// (LMDB answers `MDB_NOTFOUND` there too, not `MDB_BAD_VALSIZE`).
#[inline]
pub(super) fn check_lookup_key(env: &EnvInner, key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::BadValSize {
            what: "key",
            size: 0,
            max: env.max_key_size,
        });
    }
    Ok(())
}

/// Checks a key to store against the environment's limits.
pub(super) fn check_key(env: &EnvInner, key: &[u8]) -> Result<()> {
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
pub(super) struct NamedDb {
    /// The DB's name: a handle closed and reused names another DB (commit writes the
    /// record under this name, not under the handle's current one).
    pub(super) name: Arc<[u8]>,
    pub(super) record: DbRecord,
    pub(super) orders: Orders,
    /// `orders_generation` when `orders` was read (0: from the flags, never checked).
    pub(super) generation: u64,
    /// Changed by this txn: its record is written into the main DB at commit.
    pub(super) dirty: bool,
    /// Where this txn's last APPEND put into the DB went (see `AppendHint`).
    pub(super) append_hint: Option<super::write::AppendHint>,
}

/// Name, flags and key orders of a named DB.
pub(super) type EntryInfo = (Arc<[u8]>, u16, Orders);

/// Name, flags and key order behind a named-DB handle, as txn `serial` may use it.
pub(super) fn catalog_entry(env: &EnvInner, db: Database, serial: u64) -> Result<EntryInfo> {
    Ok(catalog_entry_full(env, db, serial)?.0)
}

/// As [`catalog_entry`], and whether the handle is public (not private to an open txn).
pub(super) fn catalog_entry_full(
    env: &EnvInner,
    db: Database,
    serial: u64,
) -> Result<(EntryInfo, bool)> {
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
pub(super) struct HandleScope<'env> {
    pub(super) env: &'env EnvInner,
    /// Unique per txn (and per renewal of a read txn), taken when the txn first opens a
    /// handle ([`HandleScope::serial`]): 0 until then, which no handle is private to.
    serial: Cell<u64>,
    /// The txn opened a handle.
    pub(super) opened: Cell<bool>,
    /// On drop: publish (true) or close (false) the handles.
    pub(super) publish_on_drop: Cell<bool>,
}

impl<'env> HandleScope<'env> {
    pub(super) fn new(env: &'env EnvInner, publish_on_drop: bool) -> Self {
        HandleScope {
            env,
            serial: Cell::new(0),
            opened: Cell::new(false),
            publish_on_drop: Cell::new(publish_on_drop),
        }
    }

    /// The txn's serial, to open a handle private to it: taken from the environment's
    /// counter the first time. A txn that opens no handle writes nothing shared: read
    /// txns begun on many threads at once do not contend for the counter.
    pub(super) fn serial(&self) -> u64 {
        match self.serial.get() {
            0 => {
                let serial = self.env.txn_serial.fetch_add(1, Ordering::Relaxed) + 1;
                self.serial.set(serial);
                serial
            }
            serial => serial,
        }
    }

    /// The serial to look handles up with: 0 (no handle's) if the txn opened none.
    pub(super) fn lookup_serial(&self) -> u64 {
        self.serial.get()
    }

    /// Makes the handles public now (a commit that others may observe next).
    pub(super) fn publish(&self) {
        if self.opened.replace(false) {
            if let Ok(mut c) = self.env.catalog.write() {
                c.publish(self.serial.get());
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
            if c.discard(self.serial.get()) {
                // A slot was freed and may be reused: cached records must be re-checked.
                self.env.orders_generation.fetch_add(1, Ordering::AcqRel);
            }
        }
    }
}

/// `DbsFull` if `name` has no handle and none is left: LMDB's first check in
/// `mdb_dbi_open`, before the name is looked up.
pub(super) fn check_room(env: &EnvInner, name: &[u8]) -> Result<()> {
    let catalog = env
        .catalog
        .read()
        .map_err(|_| Error::Panic("catalog lock poisoned"))?;
    if catalog.full_for(name) {
        return Err(Error::DbsFull);
    }
    Ok(())
}

/// Refuses to look for named DB `name` in a main DB `main` with `DUPSORT` or `INTEGERKEY`,
/// whose keys are no names (FORMAT.md §12): `Incompatible` to create it, else `NotFound`.
/// As in LMDB, after the check for a free handle and only for a name with no handle yet.
pub(super) fn check_main_holds_names(
    env: &EnvInner,
    main: &DbRecord,
    name: &[u8],
    create: bool,
) -> Result<()> {
    if main.flags & crate::db_flags::NO_NAMED_DBS == 0 {
        return Ok(());
    }
    let catalog = env
        .catalog
        .read()
        .map_err(|_| Error::Panic("catalog lock poisoned"))?;
    match catalog.lookup(name) {
        Some(_) => Ok(()),
        None if create => Err(Error::Incompatible),
        None => Err(Error::NotFound),
    }
}

/// Reads the record of named DB `name` from the main DB `main` (whose key order is
/// `main_cmp`: as in LMDB, names are keys of the main DB like any other), if it exists.
/// `Incompatible` if `name` is a plain key of the main DB.
pub(super) fn named_record<S: PageSource + ?Sized>(
    src: &S,
    main: &DbRecord,
    main_cmp: KeyCmp,
    name: &[u8],
) -> Result<Option<DbRecord>> {
    let Some((node_flags, data)) = btree::get_node(src, main, main_cmp, name)? else {
        return Ok(None);
    };
    if node_flags & crate::format::page::node_flags::SUBDATA == 0 || data.len() != DbRecord::SIZE {
        return Err(Error::Incompatible);
    }
    Ok(Some(DbRecord::decode(data)))
}

/// The main DB's orders (its flags, or comparators the application set). Inlined into
/// every put and get: returned through memory from a call, the 48-byte orders were read
/// back in pieces other than those written, which stalls until the writes have left the
/// store buffer.
#[inline]
pub(super) fn main_orders(env: &EnvInner, main: &DbRecord) -> Result<Orders> {
    // Until an application comparator is set, orders follow the flags: no lock.
    if env.orders_generation.load(Ordering::Acquire) == 0 {
        return Ok(Orders::for_flags(main.flags));
    }
    main_orders_from_catalog(env, main)
}

/// [`main_orders`] once an application set a comparator: from the catalog.
#[inline(never)]
fn main_orders_from_catalog(env: &EnvInner, main: &DbRecord) -> Result<Orders> {
    let catalog = env
        .catalog
        .read()
        .map_err(|_| Error::Panic("catalog lock poisoned"))?;
    Ok(catalog.main_orders(main.flags))
}

/// The current orders of a named DB, refreshed if an application comparator changed since
/// `cached` was read (generation `cached_gen`).
pub(super) fn named_orders(
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
pub(super) const FREE_ORDERS: Orders = Orders {
    key: KeyCmp::Integer,
    dup: None,
};

/// Checks `mdb_dbi_open` flags; returns the DB flags to store.
pub(super) fn check_db_flags(flags: u32) -> Result<u16> {
    if flags & !(KNOWN_FLAGS as u32 | crate::db_flags::CREATE) != 0 {
        return Err(Error::InvalidArgument("unknown database flag"));
    }
    // INTEGERDUP and REVERSEDUP without DUPSORT are kept and do nothing, as in LMDB. LMDB
    // also accepts DUPFIXED without DUPSORT, and then makes a tree of keys only that
    // loses every value (FORMAT.md §12): refused here.
    if flags & crate::db_flags::DUP_FIXED as u32 != 0
        && flags & crate::db_flags::DUP_SORT as u32 == 0
    {
        return Err(Error::InvalidArgument("DUPFIXED needs DUPSORT"));
    }
    Ok((flags & KNOWN_FLAGS as u32) as u16)
}

/// The value of `key` (for a DUPSORT DB, its first value).
#[inline]
pub(super) fn read_value<'s, S: PageSource + ?Sized>(
    src: &'s S,
    rec: &DbRecord,
    orders: Orders,
    key: &[u8],
) -> Result<Option<&'s [u8]>> {
    let cmp = orders.key;
    let Some(dcmp) = orders.dup else {
        return btree::get(src, rec, cmp, key);
    };
    if rec.root == crate::format::page::P_INVALID {
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
