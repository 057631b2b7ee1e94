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

use crate::btree::KeyCmp;
use crate::db_flags;
use crate::error::{Error, Result};

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
    /// The name (the key of its record in the main DB).
    pub name: Vec<u8>,
    /// Its DB flags.
    pub flags: u16,
    /// Its key order, chosen from the flags.
    pub cmp: KeyCmp,
}

/// Every named DB opened in this environment.
#[derive(Debug)]
pub struct Catalog {
    entries: Vec<CatalogEntry>,
    by_name: HashMap<Vec<u8>, u32>,
    max_dbs: usize,
}

/// The key order LMDB uses for DB flags (no custom comparator).
pub fn cmp_for_flags(flags: u16) -> KeyCmp {
    if flags & db_flags::REVERSE_KEY != 0 {
        KeyCmp::Reverse
    } else if flags & db_flags::INTEGER_KEY != 0 {
        KeyCmp::Integer
    } else {
        KeyCmp::Lexicographic
    }
}

/// The value order of a DUPSORT DB with these flags, or `None` if it is not DUPSORT.
pub fn dup_order(flags: u16) -> Option<KeyCmp> {
    if flags & db_flags::DUP_SORT == 0 {
        None
    } else if flags & db_flags::REVERSE_DUP != 0 {
        Some(KeyCmp::Reverse)
    } else if flags & db_flags::INTEGER_DUP != 0 {
        Some(KeyCmp::Integer)
    } else {
        Some(KeyCmp::Lexicographic)
    }
}

impl Catalog {
    /// An empty catalog allowing `max_dbs` named DBs.
    pub fn new(max_dbs: usize) -> Self {
        Catalog {
            entries: Vec::new(),
            by_name: HashMap::new(),
            max_dbs,
        }
    }

    /// The handle of an already opened DB.
    pub fn lookup(&self, name: &[u8]) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// The entry behind a handle.
    pub fn entry(&self, dbi: u32) -> Result<&CatalogEntry> {
        dbi.checked_sub(FIRST_NAMED)
            .and_then(|i| self.entries.get(i as usize))
            .ok_or(Error::BadDbi)
    }

    /// Registers a DB (or returns its existing handle).
    pub fn register(&mut self, name: &[u8], flags: u16) -> Result<u32> {
        if let Some(dbi) = self.lookup(name) {
            return Ok(dbi);
        }
        if self.entries.len() >= self.max_dbs {
            return Err(Error::DbsFull);
        }
        let dbi = FIRST_NAMED + self.entries.len() as u32;
        self.entries.push(CatalogEntry {
            name: name.to_vec(),
            flags,
            cmp: cmp_for_flags(flags),
        });
        self.by_name.insert(name.to_vec(), dbi);
        Ok(dbi)
    }
}
