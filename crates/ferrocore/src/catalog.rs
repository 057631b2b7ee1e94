//! The catalog of named databases: handles shared by every transaction of an environment.
//!
//! A named DB lives in the main DB as a node whose key is the name and whose data is the
//! DB's 48-byte record (flag `SUBDATA`). A handle (`Database`, LMDB's `MDB_dbi`) is an index
//! into the environment's catalog, valid in every transaction once opened: where the DB does
//! not exist in a transaction's snapshot, it reads as empty (seed 000, ITS#8431).
//!
//! Per-transaction state is created lazily, on a handle's first use in that transaction, so
//! beginning, committing and aborting never loop over all open DBs.

use std::collections::HashMap;
use std::sync::Arc;

use crate::db_flags;
use crate::error::{Error, Result};
use crate::order::{KeyCmp, Orders};

/// Handles 0 and 1 are the free DB and the main DB; named DBs start here.
pub const FIRST_NAMED: u32 = 2;

/// DB flags a named DB may be created with.
pub const KNOWN_FLAGS: u16 = db_flags::REVERSE_KEY
    | db_flags::DUP_SORT
    | db_flags::INTEGER_KEY
    | db_flags::DUP_FIXED
    | db_flags::INTEGER_DUP
    | db_flags::REVERSE_DUP;

/// One opened named DB.
#[derive(Clone, Debug)]
pub struct CatalogEntry {
    /// The name (the key of its record in the main DB). Shared: every write txn that uses
    /// the DB keeps it, with no copy.
    pub name: Arc<[u8]>,
    /// Its DB flags.
    pub flags: u16,
    /// Its orders: from the flags, or the application's comparators.
    pub orders: Orders,
    /// The txns (by serial) the handle is private to, until one of them commits: empty for
    /// a public handle. As LMDB documents for `mdb_dbi_open`: "The database handle will be
    /// private to the current transaction until the transaction is successfully committed."
    pub private_to: Vec<u64>,
}

/// Every named DB opened in this environment.
#[derive(Debug)]
pub struct Catalog {
    /// Indexed by `dbi - FIRST_NAMED`; `None` once the handle is closed.
    entries: Vec<Option<CatalogEntry>>,
    by_name: HashMap<Vec<u8>, u32>,
    max_dbs: usize,
    /// Comparators the application set for the main DB.
    main_orders: Option<Orders>,
}

impl Catalog {
    /// An empty catalog allowing `max_dbs` named DBs.
    pub fn new(max_dbs: usize) -> Self {
        Catalog {
            entries: Vec::new(),
            by_name: HashMap::new(),
            max_dbs,
            main_orders: None,
        }
    }

    /// The handle of an already opened DB.
    pub fn lookup(&self, name: &[u8]) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// True if `name` has no handle and no handle is left for it (LMDB checks this before
    /// looking the name up: `DbsFull` comes first).
    pub fn full_for(&self, name: &[u8]) -> bool {
        self.lookup(name).is_none() && self.by_name.len() >= self.max_dbs
    }

    /// The entry behind a handle, as txn `serial` may use it: `BadDbi` for a handle still
    /// private to other txns.
    pub fn entry_for(&self, dbi: u32, serial: u64) -> Result<&CatalogEntry> {
        let e = self.entry(dbi)?;
        if !e.private_to.is_empty() && !e.private_to.contains(&serial) {
            return Err(Error::BadDbi);
        }
        Ok(e)
    }

    /// Makes the handles private to txn `serial` public (it committed).
    pub fn publish(&mut self, serial: u64) {
        for e in self.entries.iter_mut().flatten() {
            if e.private_to.contains(&serial) {
                e.private_to.clear();
            }
        }
    }

    /// Txn `serial` ended without committing: the handles only it had opened are closed,
    /// as LMDB closes them. Returns true if one was.
    pub fn discard(&mut self, serial: u64) -> bool {
        let mut closed = false;
        for slot in &mut self.entries {
            let Some(e) = slot else { continue };
            if !e.private_to.contains(&serial) {
                continue;
            }
            e.private_to.retain(|&s| s != serial);
            if e.private_to.is_empty() {
                self.by_name.remove(&e.name[..]);
                *slot = None;
                closed = true;
            }
        }
        closed
    }

    /// The entry behind a handle.
    pub fn entry(&self, dbi: u32) -> Result<&CatalogEntry> {
        dbi.checked_sub(FIRST_NAMED)
            .and_then(|i| self.entries.get(i as usize))
            .and_then(Option::as_ref)
            .ok_or(Error::BadDbi)
    }

    /// The main DB's orders, given its flags.
    pub fn main_orders(&self, flags: u16) -> Orders {
        self.main_orders.unwrap_or_else(|| Orders::for_flags(flags))
    }

    /// Sets the key comparator (`key`) or the value comparator of handle `dbi`, as LMDB's
    /// `mdb_set_compare` / `mdb_set_dupsort`. `main_flags` are the main DB's flags.
    pub fn set_order(&mut self, dbi: u32, main_flags: u16, key: bool, cmp: KeyCmp) -> Result<()> {
        let orders = match dbi {
            0 => return Err(Error::InvalidArgument("the free DB's order is fixed")),
            1 => self
                .main_orders
                .get_or_insert(Orders::for_flags(main_flags)),
            _ => {
                let i = (dbi - FIRST_NAMED) as usize;
                &mut self
                    .entries
                    .get_mut(i)
                    .and_then(Option::as_mut)
                    .ok_or(Error::BadDbi)?
                    .orders
            }
        };
        if key {
            orders.key = cmp;
        } else {
            if orders.dup.is_none() {
                return Err(Error::Incompatible);
            }
            orders.dup = Some(cmp);
        }
        Ok(())
    }

    /// Registers a DB for txn `serial` (or returns its existing handle), and whether the
    /// handle is new. A new handle is private to that txn until it commits; opening a
    /// handle still private to another txn shares it.
    pub fn register(&mut self, name: &[u8], flags: u16, serial: u64) -> Result<(u32, bool)> {
        if let Some(dbi) = self.lookup(name) {
            if let Ok(e) = self.entry_mut(dbi) {
                if !e.private_to.is_empty() && !e.private_to.contains(&serial) {
                    e.private_to.push(serial);
                }
            }
            return Ok((dbi, false));
        }
        if self.by_name.len() >= self.max_dbs {
            return Err(Error::DbsFull);
        }
        let entry = CatalogEntry {
            name: name.into(),
            flags,
            orders: Orders::for_flags(flags),
            private_to: vec![serial],
        };
        // Reuse the slot of a closed handle, as LMDB does.
        let slot = match self.entries.iter().position(Option::is_none) {
            Some(i) => {
                self.entries[i] = Some(entry);
                i
            }
            None => {
                self.entries.push(Some(entry));
                self.entries.len() - 1
            }
        };
        let dbi = FIRST_NAMED + slot as u32;
        self.by_name.insert(name.to_vec(), dbi);
        Ok((dbi, true))
    }

    /// A nested level of txn `serial` that opened handle `dbi` as new (`register`) aborted:
    /// the handle closes, as LMDB closes the handles a child txn opened when it aborts,
    /// unless it is no longer that txn's private handle (a `drop_db` of the level closed
    /// it, and the slot went to another txn). Returns true if it closed.
    pub fn close_opened(&mut self, dbi: u32, serial: u64) -> bool {
        let Ok(e) = self.entry_mut(dbi) else {
            return false;
        };
        if !e.private_to.contains(&serial) {
            return false;
        }
        e.private_to.retain(|&s| s != serial);
        if !e.private_to.is_empty() {
            // Another txn opened it meanwhile and holds it still.
            return false;
        }
        self.close(dbi).is_ok()
    }

    fn entry_mut(&mut self, dbi: u32) -> Result<&mut CatalogEntry> {
        dbi.checked_sub(FIRST_NAMED)
            .and_then(|i| self.entries.get_mut(i as usize))
            .and_then(Option::as_mut)
            .ok_or(Error::BadDbi)
    }

    /// Closes handle `dbi` (LMDB's `mdb_dbi_close`): later uses of it give `BadDbi`.
    pub fn close(&mut self, dbi: u32) -> Result<()> {
        let i = dbi.checked_sub(FIRST_NAMED).ok_or(Error::BadDbi)? as usize;
        let entry = self
            .entries
            .get_mut(i)
            .and_then(Option::take)
            .ok_or(Error::BadDbi)?;
        self.by_name.remove(&entry.name[..]);
        Ok(())
    }
}
