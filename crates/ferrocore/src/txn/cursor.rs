//! Cursors: the read cursor, the page source both txn kinds read through, and the write
//! cursor.

use crate::btree::{self};
use crate::cursor::{dup_value, CursorCore, DupPos};
use crate::error::{Error, Result};
use crate::flags::put_flags;
use crate::format::meta::DbRecord;
use crate::format::page::{node_flags, Node, PageShape, PageView};
use crate::order::Orders;
use crate::store::{DirtyPages, PageSource, SnapshotPages};

use super::*;

/// A cursor: a position in a database that moves in key order (and, in a DUPSORT
/// database, through each key's values in their order).
///
/// Each move returns `Ok(None)` where LMDB returns `MDB_NOTFOUND`; items borrow from the
/// transaction, not the cursor.
pub struct Cursor<'t> {
    pub(super) src: Source<'t>,
    pub(super) core: CursorCore,
    /// The current leaf, parsed once while the cursor stays on it.
    pub(super) leaf: Option<PageView<'t>>,
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
    pub(super) fn page_for_txn(self, pgno: u64) -> Result<&'t [u8]> {
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
    pub(super) fn dup_value_for_txn(
        self,
        dup: &DupPos,
        node: &Node<'t>,
        leaf: u64,
    ) -> Result<&'t [u8]> {
        match self {
            Source::Snapshot(s) => dup_value(s, dup, node, leaf),
            Source::Write(w) => dup_value(w, dup, node, leaf),
        }
    }

    /// The value of a leaf node, borrowed for the whole of `'t`.
    #[inline]
    pub(super) fn value_for_txn(self, node: &Node<'t>) -> Result<&'t [u8]> {
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
    pub(super) fn new(src: Source<'t>, db: DbRecord, orders: Orders) -> Self {
        Cursor {
            src,
            core: CursorCore::new(db, orders),
            leaf: None,
        }
    }

    /// The item the cursor stands on, if `moved`.
    #[inline]
    pub(super) fn found(&mut self, moved: bool) -> Result<Option<Item<'t>>> {
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
        let node = leaf.node_inlined(idx)?;
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
    ///
    /// Always inlined: a scan's common step (the next node of the leaf the cursor holds a
    /// view of, in a DB without DUPSORT, no mark set) then costs no call; everything else
    /// is `next_general`, out of line.
    #[allow(clippy::should_implement_trait)]
    #[inline(always)]
    pub fn next(&mut self) -> Result<Option<Item<'t>>> {
        if let (Some(leaf), Some((pgno, idx))) = (&self.leaf, self.core.next_slot_on_leaf()) {
            if leaf.pgno() == pgno {
                if let Ok(node) = leaf.node_inlined(idx) {
                    if node.flags & (node_flags::BIGDATA | node_flags::DUPDATA) == 0 {
                        self.core.pos.set_leaf_idx(idx);
                        return Ok(Some((node.key, node.data)));
                    }
                }
            }
        }
        self.next_general()
    }

    /// [`Cursor::next`] for all but its common step. From a leaf's last item to the next
    /// leaf of the same parent it reads just those two pages (as LMDB's sibling step).
    #[inline(never)]
    fn next_general(&mut self) -> Result<Option<Item<'t>>> {
        let next = match self.src {
            Source::Snapshot(s) => self.core.next_leaf_on_parent(s),
            Source::Write(w) => self.core.next_leaf_on_parent(w),
        };
        if let Some(next) = next {
            self.core.pos.enter_next_leaf(&next);
            self.leaf = Some(next.leaf);
            return self.found(true);
        }
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

/// A cursor on the write txn that can also put and delete at its position.
pub struct WriteCursor<'t, 'env> {
    pub(super) txn: &'t mut WriteTxn<'env>,
    pub(super) db: Database,
    pub(super) core: CursorCore,
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
    pub(super) fn refresh(&mut self) -> Result<()> {
        self.core.db = self.txn.tree(self.db)?.0;
        Ok(())
    }

    pub(super) fn found(&self, moved: bool) -> Result<Option<Item<'_>>> {
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
    pub(super) fn stand_where_put_failed(
        &mut self,
        key: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
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
