//! Nested write txns: their changes join the parent on commit and vanish on abort.

use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::format::meta::DbRecord;

use super::*;

/// A nested write txn (LMDB's child txn): its changes become part of the parent on
/// [`NestedTxn::commit`] and vanish on [`NestedTxn::abort`] (or drop), leaving the parent
/// as it was. It dereferences to [`WriteTxn`], so it can do everything a write txn does,
/// including nesting further; the parent cannot be used while it is open (it is borrowed).
pub struct NestedTxn<'p, 'env> {
    pub(super) txn: &'p mut WriteTxn<'env>,
    pub(super) level: Option<NestedLevel>,
}

/// One level of nesting, as [`WriteTxn::begin_nested_level`] opened it: the parts of the
/// write txn's state the nested txn may change, as the parent left them. Handle-based
/// bindings (the C ABI) keep it instead of a [`NestedTxn`], which borrows the parent.
#[must_use = "a nested level must be committed or aborted"]
pub struct NestedLevel {
    pub(super) free_db: DbRecord,
    pub(super) main_db: DbRecord,
    pub(super) named: DbiMap<NamedDb>,
    pub(super) deleted_named: Vec<(u32, u16)>,
    pub(super) main_dropped: bool,
    pub(super) failed: bool,
    /// `drops.len()` when the level began: an abort forgets the level's drops.
    pub(super) drops: usize,
    /// `opened_handles.len()` when the level began: an abort closes the handles the level
    /// opened.
    pub(super) opened_handles: usize,
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
            free_db: self.carry.free_db,
            main_db: self.carry.main_db,
            named: self.carry.named.clone(),
            deleted_named: self.carry.deleted_named.clone(),
            main_dropped: self.main_dropped,
            failed: self.failed,
            drops: self.carry.drops.len(),
            opened_handles: self.carry.opened_handles.len(),
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
        self.carry.free_db = level.free_db;
        self.carry.main_db = level.main_db;
        self.carry.named = level.named;
        self.carry.deleted_named = level.deleted_named;
        self.main_dropped = level.main_dropped;
        self.failed = level.failed;
        self.carry.drops.truncate(level.drops);
        self.close_handles_opened_since(level.opened_handles);
        self.changes = self.changes.wrapping_add(1);
        // The restored states carry the APPEND hints they had when the level began. Those
        // would still hold (the level's pages were restored too), but no hint is kept
        // across a restore, so that none has to be reasoned about.
        self.carry.main_append_hint = None;
        for named in self.carry.named.values_mut() {
            named.append_hint = None;
        }
    }

    /// Closes the handles opened as new since `opened_handles[from]`, as LMDB closes the
    /// handles a child txn opened when it aborts (`mdb_dbis_update`). Without this, a
    /// handle could outlive the record its level created, and name a DB this txn no
    /// longer has.
    fn close_handles_opened_since(&mut self, from: usize) {
        if self.carry.opened_handles.len() <= from {
            return;
        }
        let Ok(mut catalog) = self.env.catalog.write() else {
            // A poisoned catalog fails every later use of a handle anyway.
            self.failed = true;
            return;
        };
        let mut closed = false;
        for dbi in self.carry.opened_handles.drain(from..) {
            closed |= catalog.close_opened(dbi, self.handles.lookup_serial());
        }
        drop(catalog);
        if closed {
            // The slots may be reused: cached records and orders must be re-checked.
            self.env.orders_generation.fetch_add(1, Ordering::AcqRel);
        }
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
