//! Cursors that do not borrow their transaction, for handle-based bindings (the C ABI).
//!
//! A [`crate::Cursor`] borrows its txn, so Rust allows one writing cursor at a time and
//! none once the txn changes. LMDB's C API lets a program keep any number of cursors on a
//! write txn, write through one (or through `mdb_put`) and go on using the others, which
//! LMDB fixes up to stay on their items. A [`DetachedCursor`] holds only the cursor state;
//! each call lends it the txn. On a write txn it also remembers its place by content
//! (key, and value in a DUPSORT DB) after every call, and when the txn's change count
//! ([`WriteTxn::changes`]) moved since, it finds the place again first: on the same item,
//! or, if that item was deleted, on the one that followed, marked deleted (LMDB's `C_DEL`).
//!
//! Finding the place again sees only the tree as it is then, so it must happen after each
//! write to the cursor's DB, as LMDB's fix-ups do: once the item under a cursor is deleted,
//! the cursor stands on the item that followed, and a key written later between the two
//! must not take that place. Whoever holds the cursors of a write txn calls
//! [`DetachedCursor::settle`] on each cursor of a DB right after every write to it (the C
//! ABI does, in `mdb_put`, `mdb_del`, `mdb_drop` and the cursor writes).

use crate::btree::State;
use crate::cursor::{CursorCore, SavedPlace};
use crate::error::{Error, Result};
use crate::flags::put_flags;
use crate::format::meta::DbRecord;
use crate::format::page::{PageShape, PageView, PlainLeaf};
use crate::order::Orders;
use crate::store::{PageSource, SnapshotPages};
use crate::txn::{Database, Item, ReadTxn, Source, WriteCursor, WriteTxn};

/// LMDB's `MDB_cursor_op`, in LMDB's order: the discriminants are the C values.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CursorOp {
    /// `MDB_FIRST`.
    First = 0,
    /// `MDB_FIRST_DUP`.
    FirstDup,
    /// `MDB_GET_BOTH`.
    GetBoth,
    /// `MDB_GET_BOTH_RANGE`.
    GetBothRange,
    /// `MDB_GET_CURRENT`.
    GetCurrent,
    /// `MDB_GET_MULTIPLE`.
    GetMultiple,
    /// `MDB_LAST`.
    Last,
    /// `MDB_LAST_DUP`.
    LastDup,
    /// `MDB_NEXT`.
    Next,
    /// `MDB_NEXT_DUP`.
    NextDup,
    /// `MDB_NEXT_MULTIPLE`.
    NextMultiple,
    /// `MDB_NEXT_NODUP`.
    NextNoDup,
    /// `MDB_PREV`.
    Prev,
    /// `MDB_PREV_DUP`.
    PrevDup,
    /// `MDB_PREV_NODUP`.
    PrevNoDup,
    /// `MDB_SET`.
    Set,
    /// `MDB_SET_KEY`.
    SetKey,
    /// `MDB_SET_RANGE`.
    SetRange,
    /// `MDB_PREV_MULTIPLE`.
    PrevMultiple,
}

impl CursorOp {
    /// The op with C value `op`, if there is one.
    pub fn from_raw(op: u32) -> Option<CursorOp> {
        use CursorOp::*;
        const ALL: [CursorOp; 19] = [
            First,
            FirstDup,
            GetBoth,
            GetBothRange,
            GetCurrent,
            GetMultiple,
            Last,
            LastDup,
            Next,
            NextDup,
            NextMultiple,
            NextNoDup,
            Prev,
            PrevDup,
            PrevNoDup,
            Set,
            SetKey,
            SetRange,
            PrevMultiple,
        ];
        ALL.get(op as usize).copied()
    }
}

/// The txn a detached cursor is lent for one call.
#[derive(Clone, Copy)]
pub enum TxnRef<'t, 'env> {
    /// A read txn.
    Read(&'t ReadTxn<'env>),
    /// The write txn (read access).
    Write(&'t WriteTxn<'env>),
}

impl<'t> TxnRef<'t, '_> {
    fn source(self) -> Source<'t> {
        match self {
            TxnRef::Read(r) => r.source(),
            TxnRef::Write(w) => w.source(),
        }
    }

    fn tree(self, db: Database) -> Result<(DbRecord, Orders)> {
        match self {
            TxnRef::Read(r) => r.tree(db),
            TxnRef::Write(w) => {
                if w.has_failed() {
                    return Err(Error::BadTxn);
                }
                w.tree(db)
            }
        }
    }
}

/// A cursor whose txn is passed to each call (see the module doc).
#[derive(Clone, Debug)]
pub struct DetachedCursor {
    db: Database,
    core: CursorCore,
    /// On a write txn: its change count when `place` was taken.
    seen_changes: u64,
    /// On a write txn: where the cursor stood after its last call, by content.
    place: SavedPlace,
    /// The last `get` succeeded without a value to return (see [`DetachedCursor::get`]).
    value_untouched: bool,
    /// On a read txn: its snapshot, and the shape of the leaf the last item came from
    /// (see [`Source::item_with_shape`]).
    leaf_shape: (u64, Option<PageShape>),
    /// A read cursor's walk along its leaf with `MDB_NEXT`, between calls (see
    /// [`LeafScan`]). Every call but the walk's own steps clears it
    /// ([`DetachedCursor::end_scan`]).
    scan: Option<LeafScan>,
}

/// Where a read cursor's plain `MDB_NEXT` steps stand: set by a step that found the cursor
/// in the state [`CursorCore::next_slot_on_leaf`] needs (no DUPSORT, no mark set, on a leaf
/// of snapshot `snapshot`), it lets the next step read slot `idx + 1` of the same leaf with
/// no other check. It stays true because nothing else changes the cursor while it is set.
#[derive(Clone, Copy, Debug)]
struct LeafScan {
    snapshot: u64,
    /// The leaf's place in the map ([`SnapshotPages::page_offset`]).
    offset: usize,
    leaf: PlainLeaf,
    idx: usize,
}

impl DetachedCursor {
    /// An unpositioned cursor over `db` in `txn`.
    pub fn open(txn: TxnRef<'_, '_>, db: Database) -> Result<Self> {
        let (record, orders) = txn.tree(db)?;
        Ok(DetachedCursor {
            db,
            core: CursorCore::new(record, orders),
            seen_changes: match txn {
                TxnRef::Write(w) => w.changes(),
                TxnRef::Read(_) => 0,
            },
            place: SavedPlace::default(),
            value_untouched: false,
            leaf_shape: (0, None),
            scan: None,
        })
    }

    /// The database the cursor walks.
    pub fn db(&self) -> Database {
        self.db
    }

    /// True if the DB has sorted duplicates (DUPSORT).
    pub fn is_dupsort(&self) -> bool {
        self.core.dcmp.is_some()
    }

    /// True if the cursor stands on a key (even one whose values it has moved past).
    pub fn is_positioned(&self) -> bool {
        self.core.is_positioned()
    }

    /// Binds the cursor to a new txn, unpositioned (`mdb_cursor_renew`).
    pub fn renew(&mut self, txn: TxnRef<'_, '_>) -> Result<()> {
        *self = DetachedCursor::open(txn, self.db)?;
        Ok(())
    }

    /// Finds the cursor's place again after a write to its DB through another handle, as
    /// LMDB's fix-ups do at each write (see the module doc); nothing to do if the txn did
    /// not change since the cursor's last call. On an error (a damaged page) the cursor
    /// keeps its old place, and its next call tries again.
    pub fn settle(&mut self, txn: &WriteTxn<'_>) -> Result<()> {
        self.catch_up(TxnRef::Write(txn))
    }

    /// On a write txn that changed since this cursor's last call, finds its place again.
    fn catch_up(&mut self, txn: TxnRef<'_, '_>) -> Result<()> {
        let TxnRef::Write(w) = txn else {
            return Ok(());
        };
        if w.has_failed() {
            return Err(Error::BadTxn);
        }
        if w.changes() == self.seen_changes {
            return Ok(());
        }
        let (record, orders) = w.tree(self.db)?;
        let dropped = w.dropped_since(self.db, self.seen_changes);
        self.end_scan();
        (self.core.cmp, self.core.dcmp) = (orders.key, orders.dup);
        if dropped {
            // As LMDB: emptying a DB unpositions its cursors.
            self.core = CursorCore::new(record, orders);
        } else {
            self.core.restore_place(&w.source(), record, &self.place)?;
        }
        // The place found is the one to find again next time (even if the call fails).
        self.remember(txn)
    }

    /// Ends the [`LeafScan`], whose steps rely on the state it was set in: called by
    /// every call that may change the cursor otherwise than by the scan's own steps.
    #[inline]
    fn end_scan(&mut self) {
        self.scan = None;
    }

    /// On a write txn, remembers the cursor's place by content.
    fn remember(&mut self, txn: TxnRef<'_, '_>) -> Result<()> {
        if let TxnRef::Write(w) = txn {
            self.core.save_place(&w.source(), &mut self.place)?;
            self.seen_changes = w.changes();
        }
        Ok(())
    }

    /// Runs `op` (`mdb_cursor_get`): `key` is the key for the SET and GET_BOTH ops, `value`
    /// the value for the GET_BOTH ops. Returns the item the cursor lands on, `None` where
    /// LMDB returns `MDB_NOTFOUND`. For the MULTIPLE ops the value is the packed values;
    /// `MDB_GET_MULTIPLE` on a key whose values the cursor has moved past succeeds with
    /// nothing to return, as in LMDB: then [`DetachedCursor::value_untouched`] is true and
    /// the value returned is empty.
    #[inline]
    pub fn get<'t>(
        &mut self,
        txn: TxnRef<'t, '_>,
        op: CursorOp,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<Option<Item<'t>>> {
        if let TxnRef::Read(r) = txn {
            if op == CursorOp::Next {
                if let Some(item) = self.next_plain(r) {
                    return Ok(Some(item));
                }
            }
        }
        self.get_general(txn, op, key, value)
    }

    /// `MDB_NEXT` on a read txn in its common case: a DB without DUPSORT, no mark set, a
    /// value stored in the node, and the next item on the leaf the cursor stands on or on
    /// the next leaf of the same parent. `None` otherwise, with the cursor unchanged: then
    /// [`DetachedCursor::get`] does the move. It reads only those pages and never panics
    /// (a C binding may call it before its panic guard); the leaf's shape is kept per
    /// snapshot, so a step along a leaf parses no header.
    #[inline]
    pub fn next_plain<'t>(&mut self, r: &'t ReadTxn<'_>) -> Option<Item<'t>> {
        if let Some(item) = self.next_in_scan(r) {
            return Some(item);
        }
        let Source::Snapshot(pages) = r.source() else {
            return None;
        };
        self.next_plain_checked(r, pages)
    }

    /// The step of [`DetachedCursor::next_plain`] along the leaf of the cursor's
    /// `LeafScan`: `None` without a scan in snapshot `r`, at the leaf's end, or on any
    /// other doubt (then `next_plain` does the checks). Calls nothing, so that a C
    /// binding's step can be a leaf function.
    #[inline(always)]
    pub fn next_in_scan<'t>(&mut self, r: &'t ReadTxn<'_>) -> Option<Item<'t>> {
        let scan = self.scan.as_mut()?;
        let Source::Snapshot(pages) = r.source() else {
            return None;
        };
        if scan.snapshot != r.id() {
            return None;
        }
        let next = scan.idx + 1;
        let item = scan.leaf.item(pages.page_at(scan.offset)?, next)?;
        debug_assert_eq!(
            self.core
                .next_slot_on_leaf()
                .and_then(|(pgno, idx)| Some((pages.page_offset(pgno)?, idx))),
            Some((scan.offset, next)),
            "a leaf scan outlived the state it was set in"
        );
        scan.idx = next;
        self.core.pos.set_leaf_idx(next);
        Some(item)
    }

    /// [`DetachedCursor::next_plain`] without a [`LeafScan`] to follow: checks the
    /// cursor's state, reads the item, and sets the scan for the next step.
    #[inline(never)]
    fn next_plain_checked<'t>(
        &mut self,
        r: &'t ReadTxn<'_>,
        pages: &'t SnapshotPages<'t>,
    ) -> Option<Item<'t>> {
        let Some((pgno, idx)) = self.core.next_slot_on_leaf() else {
            return self.next_leaf_plain(r, pages);
        };
        let bytes = pages.page(pgno).ok()?;
        let shape = match self.leaf_shape {
            (snapshot, Some(shape)) if snapshot == r.id() && shape.pgno() == pgno => shape,
            _ => {
                let shape = PageView::parse(bytes, pgno).ok()?.shape();
                self.leaf_shape = (r.id(), Some(shape));
                shape
            }
        };
        let leaf = shape.plain_leaf()?;
        let item = leaf.item(bytes, idx)?;
        self.start_scan(r, pages, pgno, leaf, idx);
        self.core.pos.set_leaf_idx(idx);
        Some(item)
    }

    /// [`DetachedCursor::next_plain`] from the last item of a leaf: to the first of the
    /// next leaf under the same parent. Out of line: one step in a leaf's worth.
    #[inline(never)]
    fn next_leaf_plain<'t>(
        &mut self,
        r: &'t ReadTxn<'_>,
        pages: &'t SnapshotPages<'t>,
    ) -> Option<Item<'t>> {
        let next = self.core.next_leaf_on_parent(pages)?;
        let shape = next.leaf.shape();
        let leaf = shape.plain_leaf()?;
        let item = leaf.item(next.leaf.bytes(), 0)?;
        self.leaf_shape = (r.id(), Some(shape));
        self.start_scan(r, pages, shape.pgno(), leaf, 0);
        self.core.pos.enter_next_leaf(&next);
        Some(item)
    }

    /// After a plain step to slot `idx` of leaf `pgno`, which `leaf` describes: the
    /// following steps need check only the next slot ([`LeafScan`]).
    #[inline]
    fn start_scan(
        &mut self,
        r: &ReadTxn<'_>,
        pages: &SnapshotPages<'_>,
        pgno: u64,
        leaf: PlainLeaf,
        idx: usize,
    ) {
        self.value_untouched = false;
        self.scan = pages.page_offset(pgno).map(|offset| LeafScan {
            snapshot: r.id(),
            offset,
            leaf,
            idx,
        });
    }

    /// [`DetachedCursor::get`] for everything but a read cursor's step along its leaf.
    fn get_general<'t>(
        &mut self,
        txn: TxnRef<'t, '_>,
        op: CursorOp,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<Option<Item<'t>>> {
        if let TxnRef::Read(r) = txn {
            if self.leaf_shape.0 != r.id() {
                self.leaf_shape = (r.id(), None);
            }
        }
        self.end_scan();
        self.catch_up(txn)?;
        self.value_untouched = false;
        let r = self.step(txn.source(), op, key, value);
        self.core.end_get();
        self.remember(txn)?;
        r
    }

    /// True if the last [`DetachedCursor::get`] succeeded without a value (LMDB leaves the
    /// caller's value as it was).
    pub fn value_untouched(&self) -> bool {
        self.value_untouched
    }

    fn step<'t>(
        &mut self,
        src: Source<'t>,
        op: CursorOp,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<Option<Item<'t>>> {
        use CursorOp::*;
        let c = &mut self.core;
        let need_key = || key.ok_or(Error::InvalidArgument("this cursor op needs a key"));
        let need_value = || value.ok_or(Error::InvalidArgument("this cursor op needs a value"));
        let moved = match op {
            First => c.first(&src)?,
            Last => c.last(&src)?,
            Next => c.next(&src)?,
            Prev => c.prev(&src)?,
            NextDup => c.next_dup(&src)?,
            PrevDup => c.prev_dup(&src)?,
            NextNoDup => c.next_nodup(&src)?,
            PrevNoDup => c.prev_nodup(&src)?,
            FirstDup | LastDup => c.edge_dup(&src, op == LastDup)?,
            Set | SetKey => c.seek(&src, need_key()?, true)?,
            SetRange => c.seek(&src, need_key()?, false)?,
            GetBoth | GetBothRange => {
                let v = need_value()?;
                if c.dcmp.is_none() {
                    return Err(Error::Incompatible);
                }
                c.seek_both(&src, need_key()?, v, op == GetBoth)?
            }
            GetCurrent => {
                c.current_op()?;
                true
            }
            GetMultiple | NextMultiple | PrevMultiple => {
                // LMDB's order of checks: positioned (GET_MULTIPLE only), then DUPFIXED.
                if op == GetMultiple && c.pos.state != State::Valid {
                    return Err(Error::InvalidArgument("cursor is not positioned"));
                }
                if c.db.flags & crate::db_flags::DUP_FIXED == 0 {
                    return Err(Error::Incompatible);
                }
                if op == GetMultiple && c.values_at_end() {
                    // LMDB returns success and neither key nor value.
                    self.value_untouched = true;
                    return Ok(Some((&[][..], &[][..])));
                }
                return src.with(|s| {
                    let packed = match op {
                        GetMultiple => c.get_multiple(s)?,
                        NextMultiple => c.next_multiple(s)?,
                        _ => c.prev_multiple(s)?,
                    };
                    match packed {
                        Some(values) => Ok(Some((c.key(s)?, values))),
                        None => Ok(None),
                    }
                });
            }
        };
        if !moved || !c.is_valid() {
            return Ok(None);
        }
        match src.item_with_shape(c, &mut self.leaf_shape.1) {
            Ok(item) => Ok(Some(item)),
            Err(Error::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// True if the cursor's key holds its values as a sub-page or sub-DB (LMDB's
    /// `F_DUPDATA`), which decides whether `MDB_FIRST_DUP`/`MDB_LAST_DUP` return the key.
    pub fn on_dup_data(&self, txn: TxnRef<'_, '_>) -> Result<bool> {
        self.core.on_dup_data(&txn.source())
    }

    /// Number of values of the current key (`mdb_cursor_count`); `Incompatible` on a DB
    /// without DUPSORT, as in LMDB.
    pub fn count(&mut self, txn: TxnRef<'_, '_>) -> Result<u64> {
        // LMDB's order of checks: DUPSORT, then positioned.
        if self.core.dcmp.is_none() {
            return Err(Error::Incompatible);
        }
        self.catch_up(txn)?;
        if !self.is_positioned() {
            return Err(Error::InvalidArgument("cursor is not positioned"));
        }
        self.end_scan();
        let r = self.core.count(&txn.source());
        self.remember(txn)?;
        r
    }

    /// Runs `f` with a write cursor standing where this cursor stands, then takes its state
    /// back and remembers the place.
    fn with_write_cursor<R>(
        &mut self,
        txn: &mut WriteTxn<'_>,
        f: impl FnOnce(&mut WriteCursor<'_, '_>) -> Result<R>,
    ) -> Result<R> {
        self.catch_up(TxnRef::Write(txn))?;
        let mut cursor = WriteCursor::with_core(txn, self.db, self.core.clone());
        let r = f(&mut cursor);
        self.end_scan();
        self.core = cursor.into_core();
        self.remember(TxnRef::Write(txn))?;
        r
    }

    /// Stores `key`/`value` and stands on it (`mdb_cursor_put`); `flags` as for
    /// [`WriteCursor::put`] (without `RESERVE` and `MULTIPLE`, which have their own calls).
    pub fn put(
        &mut self,
        txn: &mut WriteTxn<'_>,
        key: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
        self.with_write_cursor(txn, |c| c.put(key, value, flags))
    }

    /// Stores a zeroed value of `len` bytes under `key`, stands on it and returns it to be
    /// filled in place (`mdb_cursor_put` with `MDB_RESERVE`).
    pub fn put_reserve<'t>(
        &mut self,
        txn: &'t mut WriteTxn<'_>,
        key: &[u8],
        len: usize,
        flags: u32,
    ) -> Result<&'t mut [u8]> {
        let zeros = vec![0u8; len];
        self.with_write_cursor(txn, |c| {
            if c.is_dupsort() {
                return Err(Error::Incompatible);
            }
            c.put(key, &zeros, flags & !put_flags::RESERVE)
        })?;
        txn.value_slot_mut(self.db, key, len)
    }

    /// True if `MDB_MULTIPLE` applies to the DB: it is DUPSORT and DUPFIXED.
    pub fn is_dup_fixed(&self) -> bool {
        let both = crate::db_flags::DUP_SORT | crate::db_flags::DUP_FIXED;
        self.core.db.flags & both == both
    }

    /// Stores the packed values of `size` bytes each under `key`, in order
    /// (`MDB_MULTIPLE`; `flags` as for [`DetachedCursor::put`]). Returns how many were
    /// stored, and the error that ended the call: as in LMDB, the first value that cannot
    /// be stored (`KeyExist` under `NO_DUP_DATA`) stops it and those before it stay, so
    /// the count is there on every return (0 if the call was refused up front:
    /// `Incompatible` unless the DB is DUPSORT and DUPFIXED).
    pub fn put_multiple(
        &mut self,
        txn: &mut WriteTxn<'_>,
        key: &[u8],
        values: &[u8],
        size: usize,
        flags: u32,
    ) -> (usize, Result<()>) {
        if !self.is_dup_fixed() {
            return (0, Err(Error::Incompatible));
        }
        if size == 0 || !values.len().is_multiple_of(size) {
            let e = Error::BadValSize {
                what: "MULTIPLE values",
                size: values.len(),
                max: size,
            };
            return (0, Err(e));
        }
        let mut stored = 0;
        let r = self.with_write_cursor(txn, |c| {
            for value in values.chunks_exact(size) {
                c.put(key, value, flags & !put_flags::MULTIPLE)?;
                stored += 1;
            }
            Ok(())
        });
        (stored, r)
    }

    /// Deletes the item at the cursor (`mdb_cursor_del`); with `put_flags::NO_DUP_DATA`
    /// every value of the key.
    pub fn delete(&mut self, txn: &mut WriteTxn<'_>, flags: u32) -> Result<()> {
        self.catch_up(TxnRef::Write(txn))?;
        self.with_write_cursor(txn, |c| c.delete(flags))
    }
}
