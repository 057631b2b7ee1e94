//! Cursor movement over a tree: a stack of (page, slot) from the root to a leaf, so that
//! `next`/`prev` usually stay on their leaf and only climb when they leave it.

//!
//! Files: this one holds the cursor's state and its moves (LMDB's cursor state machine,
//! with its end-of-data and deleted-here marks); `seek` positions it by key and value and
//! reads what it stands on; `place` keeps its place across writes of other cursors.

mod place;
mod seek;

pub use place::SavedPlace;

use crate::btree::{view, NextLeaf, Position, State};
use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::format::page::{node_flags, Node, PageView};
use crate::order::KeyCmp;
use crate::store::PageSource;

/// Where a cursor stands among the values of its key in a DUPSORT DB.
#[derive(Clone, Debug)]
pub enum DupPos {
    /// The key has one value, stored in its node.
    Single,
    /// Value `idx` of the `count` in the node's sub-page.
    Sub { idx: usize, count: usize },
    /// A position in the key's sub-DB.
    Tree { pos: Box<Position>, rec: DbRecord },
}

/// The value `dup` designates in `node` (a node of leaf page `leaf`).
pub fn dup_value<'s, S: PageSource + ?Sized>(
    src: &'s S,
    dup: &DupPos,
    node: &Node<'s>,
    leaf: u64,
) -> Result<&'s [u8]> {
    match dup {
        DupPos::Single => Ok(node.data),
        DupPos::Sub { idx, .. } => PageView::parse(node.data, leaf)?.key(*idx),
        DupPos::Tree { pos, rec } => {
            let value = pos.current(src)?.0;
            check_fixed_size(rec, value.len(), pos.path.leaf())?;
            Ok(value)
        }
    }
}

/// In a DUPFIXED DB's sub-DB, every value has the size its record gives (`md_pad`): a
/// record that says otherwise is corrupted (LMDB sizes LEAF2 reads by it; py-lmdb's
/// MdPadTest forges it).
fn check_fixed_size(rec: &DbRecord, size: usize, pgno: u64) -> Result<()> {
    if rec.flags & crate::db_flags::DUP_FIXED != 0 && rec.pad as usize != size {
        return Err(Error::corrupted(
            pgno,
            "sub-DB record's value size differs from its pages'",
        ));
    }
    Ok(())
}

/// A cursor's state over one DB: its place in the tree and, in a DUPSORT DB, among the
/// current key's values. Movement is LMDB's `MDB_cursor_op` set; each move returns
/// whether the cursor now stands on an item.
///
/// The flags follow LMDB's cursor state machine (`mdb.c`), checked move by move against
/// LMDB in `tests/lmdb_interop_dbs.rs`: the main cursor and the duplicates cursor each have
/// an end-of-data mark (`C_EOF`), a "deleted here" mark (`C_DEL`) and may stand one past
/// the last item of their page after a delete.
#[derive(Clone, Debug)]
pub struct CursorCore {
    /// The DB's record (root and counts) as the cursor's txn sees it.
    pub db: DbRecord,
    /// Key order.
    pub cmp: KeyCmp,
    /// Value order, for DUPSORT DBs.
    pub dcmp: Option<KeyCmp>,
    /// Place in the tree.
    pub pos: Position,
    /// Place among the values (DUPSORT DBs, when positioned).
    pub dup: Option<DupPos>,
    /// Main cursor one past the last node of its leaf (after deleting the DB's last key).
    main_past: bool,
    /// Main cursor's C_EOF: a move to a later key failed.
    eof: bool,
    /// Main cursor's C_DEL: the key node it stood on was deleted; it now stands on the
    /// node that followed. Lasts for one operation.
    del: bool,
    /// Values cursor one past its last value (after deleting a key's last value).
    x_past: bool,
    /// Values cursor's C_EOF.
    x_eof: bool,
    /// Values cursor's C_DEL: the value it stood on was deleted; it stands on the next.
    x_del: bool,
}

impl CursorCore {
    /// An unpositioned cursor over the DB `db`.
    pub fn new(db: DbRecord, orders: crate::order::Orders) -> Self {
        CursorCore {
            db,
            cmp: orders.key,
            dcmp: orders.dup,
            pos: Position::default(),
            dup: None,
            main_past: false,
            eof: false,
            del: false,
            x_past: false,
            x_eof: false,
            x_del: false,
        }
    }

    /// True if the cursor has a position: it was placed and its last positioning did not
    /// fail (it may still stand past the end after a delete). LMDB's C_INITIALIZED.
    pub fn is_positioned(&self) -> bool {
        self.pos.state == State::Valid
    }

    /// True if the cursor stands on an item.
    pub fn is_valid(&self) -> bool {
        self.pos.state == State::Valid && !self.main_past && !self.x_past
    }

    /// Ends an operation: the main C_DEL lasts for one (LMDB clears it in `mdb_cursor_get`).
    #[inline]
    fn op_done(&mut self, r: Result<bool>) -> Result<bool> {
        self.del = false;
        r
    }

    /// True if the node at the main position holds a set of duplicates (sub-page or sub-DB).
    fn on_dupdata<S: PageSource + ?Sized>(&self, src: &S) -> Result<bool> {
        if self.dcmp.is_none() || self.main_past {
            return Ok(false);
        }
        let (node, _) = self.pos.node(src)?;
        Ok(node.flags & node_flags::DUPDATA != 0)
    }

    /// (Re)initialises the values cursor on the current key at its first (or last) value;
    /// LMDB's `mdb_xcursor_init1` then `mdb_cursor_first`/`_last` (which marks the end).
    fn enter<S: PageSource + ?Sized>(&mut self, src: &S, last: bool) -> Result<()> {
        self.x_past = false;
        self.x_del = false;
        self.x_eof = last;
        if self.dcmp.is_none() {
            self.dup = None;
            return Ok(());
        }
        let (node, leaf) = self.pos.node(src)?;
        self.dup = Some(match crate::dupsort::dups_of(&node, leaf)? {
            crate::dupsort::Dups::Single(_) => DupPos::Single,
            crate::dupsort::Dups::SubPage(sub) => {
                let count = sub.num_keys();
                DupPos::Sub {
                    idx: if last { count - 1 } else { 0 },
                    count,
                }
            }
            crate::dupsort::Dups::SubDb(rec) => {
                let mut pos = Position::default();
                let found = if last {
                    pos.last(src, &rec)?
                } else {
                    pos.first(src, &rec)?
                };
                if !found {
                    return Err(Error::corrupted(leaf, "empty duplicate sub-DB"));
                }
                DupPos::Tree {
                    pos: Box::new(pos),
                    rec,
                }
            }
        });
        Ok(())
    }

    /// Main cursor at the last index of its leaf (or past it).
    fn main_at_page_end<S: PageSource + ?Sized>(&self, src: &S) -> Result<bool> {
        let n = view(src, self.pos.path.leaf())?.num_keys();
        Ok(self.main_past || self.pos.path.leaf_idx() + 1 >= n)
    }

    /// Values cursor at its last value (or past it).
    fn x_at_end<S: PageSource + ?Sized>(&self, src: &S) -> Result<bool> {
        Ok(match &self.dup {
            None | Some(DupPos::Single) => true,
            Some(DupPos::Sub { idx, count }) => self.x_past || idx + 1 >= *count,
            Some(DupPos::Tree { pos, .. }) => {
                let n = view(src, pos.path.leaf())?.num_keys();
                self.x_past || pos.path.leaf_idx() + 1 >= n
            }
        })
    }

    /// `mdb_cursor_next` on the values cursor.
    fn x_next<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        if self.x_eof {
            if self.x_at_end(src)? {
                return Ok(false);
            }
            self.x_eof = false;
        }
        if std::mem::take(&mut self.x_del) {
            return Ok(!self.x_past);
        }
        let moved = match &mut self.dup {
            None | Some(DupPos::Single) => false,
            Some(DupPos::Sub { idx, count }) => {
                if *idx + 1 < *count {
                    *idx += 1;
                    true
                } else {
                    false
                }
            }
            Some(DupPos::Tree { pos, rec }) => {
                let mut probe = (**pos).clone();
                let moved = probe.next(src, rec)?;
                if moved {
                    **pos = probe;
                }
                moved
            }
        };
        if !moved {
            self.x_eof = true;
        }
        Ok(moved)
    }

    /// `mdb_cursor_prev` on the values cursor.
    fn x_prev<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        self.x_eof = false;
        self.x_del = false;
        if std::mem::take(&mut self.x_past) {
            return Ok(true); // back from one past the last value onto it
        }
        Ok(match &mut self.dup {
            None | Some(DupPos::Single) => false,
            Some(DupPos::Sub { idx, .. }) => {
                if *idx > 0 {
                    *idx -= 1;
                    true
                } else {
                    false
                }
            }
            Some(DupPos::Tree { pos, rec }) => {
                let mut probe = (**pos).clone();
                let moved = probe.prev(src, rec)?;
                if moved {
                    **pos = probe;
                }
                moved
            }
        })
    }

    /// `MDB_FIRST`.
    pub fn first<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let r = self.first_inner(src);
        self.op_done(r)
    }

    fn first_inner<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        self.main_past = false;
        self.eof = false;
        if !self.pos.first(src, &self.db)? {
            self.dup = None;
            return Ok(false);
        }
        self.enter(src, false)?;
        Ok(true)
    }

    /// `MDB_LAST` (LMDB marks the cursor at the end).
    pub fn last<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let r = self.last_inner(src);
        self.op_done(r)
    }

    fn last_inner<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        self.main_past = false;
        if !self.pos.last(src, &self.db)? {
            self.dup = None;
            return Ok(false);
        }
        self.eof = true;
        self.enter(src, true)?;
        Ok(true)
    }

    /// `mdb_cursor_next` for MDB_NEXT, MDB_NEXT_DUP and MDB_NEXT_NODUP.
    fn next_op<S: PageSource + ?Sized>(&mut self, src: &S, op: Step) -> Result<bool> {
        if self.del && op == Step::Dup {
            return Ok(false);
        }
        if self.pos.state != State::Valid {
            // Unpositioned but marked deleted: another handle emptied the DB under the
            // cursor, which stands where its item was. Nothing follows it, whatever was
            // written since. (LMDB 0.9 starts from the first item again, so a loop that
            // deletes and re-puts the only key never ends: py-lmdb issue #388, fixed the
            // same way in py-lmdb's patched LMDB.)
            if self.del {
                return Ok(false);
            }
            return self.first_inner(src);
        }
        if self.eof {
            if self.main_at_page_end(src)? {
                return Ok(false);
            }
            self.eof = false;
        }
        if self.dcmp.is_some() && !self.main_past {
            if self.on_dupdata(src)? {
                if op != Step::NoDup {
                    let moved = self.x_next(src)?;
                    if op == Step::Dup || moved {
                        return Ok(moved);
                    }
                }
            } else if op == Step::Dup {
                return Ok(false);
            }
        }
        if std::mem::take(&mut self.del) {
            // Standing on the node that followed the deleted one: that is the next.
            if self.main_past {
                return Ok(false);
            }
            self.enter(src, false)?;
            return Ok(true);
        }
        if !self.pos.next(src, &self.db)? {
            self.eof = true;
            return Ok(false);
        }
        self.enter(src, false)?;
        Ok(true)
    }

    /// `mdb_cursor_prev` for MDB_PREV, MDB_PREV_DUP and MDB_PREV_NODUP.
    fn prev_op<S: PageSource + ?Sized>(&mut self, src: &S, op: Step) -> Result<bool> {
        if self.pos.state != State::Valid {
            // As in `next_op`: nothing precedes where the deleted item was.
            if self.del {
                return Ok(false);
            }
            return self.last_inner(src);
        }
        if self.dcmp.is_some() && !self.main_past {
            if self.on_dupdata(src)? {
                if op != Step::NoDup {
                    let moved = self.x_prev(src)?;
                    if op == Step::Dup || moved {
                        if moved {
                            self.eof = false;
                        }
                        return Ok(moved);
                    }
                }
            } else if op == Step::Dup {
                return Ok(false);
            }
        }
        self.eof = false;
        self.del = false;
        if std::mem::take(&mut self.main_past) {
            // Back from one past the last key onto it.
        } else if !self.pos.prev(src, &self.db)? {
            return Ok(false);
        }
        self.enter(src, true)?;
        Ok(true)
    }

    /// `MDB_NEXT`: the next value of this key, else the first of the next key.
    #[inline]
    pub fn next<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        // The common case of a scan, inline: a DB without DUPSORT, a cursor on an item with
        // no mark set, the next item on the same leaf. (`enter` would only reset the
        // values-cursor state, which a DB without DUPSORT does not use.)
        if let Some((_, idx)) = self.next_slot_on_leaf() {
            self.pos.set_leaf_idx(idx);
            return Ok(true);
        }
        let r = self.next_op(src, Step::Any);
        self.op_done(r)
    }

    /// The leaf and slot `MDB_NEXT` would move to if that needs no page but the current
    /// leaf and nothing else to settle: a DB without DUPSORT, no mark set, a next node on
    /// this leaf. The cursor does not move (see [`Position::set_leaf_idx`]).
    #[inline]
    pub fn next_slot_on_leaf(&self) -> Option<(u64, usize)> {
        if !self.steps_plainly() {
            return None;
        }
        self.pos.next_slot_on_leaf()
    }

    /// The leaf `MDB_NEXT` would move to from the current leaf's last item, if it hangs
    /// from the same parent and nothing else needs settling (as for
    /// [`CursorCore::next_slot_on_leaf`]). The cursor does not move (see
    /// [`Position::enter_next_leaf`]).
    #[inline]
    pub fn next_leaf_on_parent<'s, S: PageSource + ?Sized>(
        &self,
        src: &'s S,
    ) -> Option<NextLeaf<'s>> {
        if !self.steps_plainly() {
            return None;
        }
        self.pos.next_leaf_on_parent(src)
    }

    /// True if `MDB_NEXT` is a step of the main position alone: a DB without DUPSORT, no
    /// mark set.
    #[inline]
    fn steps_plainly(&self) -> bool {
        self.dcmp.is_none() && !(self.del | self.eof | self.main_past)
    }

    /// `MDB_PREV`: the previous value of this key, else the last of the previous key.
    pub fn prev<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let r = self.prev_op(src, Step::Any);
        self.op_done(r)
    }

    /// `MDB_NEXT_DUP`: the next value of the current key only.
    pub fn next_dup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let r = self.next_op(src, Step::Dup);
        self.op_done(r)
    }

    /// `MDB_PREV_DUP`: the previous value of the current key only.
    pub fn prev_dup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let r = self.prev_op(src, Step::Dup);
        self.op_done(r)
    }

    /// `MDB_NEXT_NODUP`: the first value of the next key.
    pub fn next_nodup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let r = self.next_op(src, Step::NoDup);
        self.op_done(r)
    }

    /// `MDB_PREV_NODUP`: the last value of the previous key.
    pub fn prev_nodup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let r = self.prev_op(src, Step::NoDup);
        self.op_done(r)
    }

    /// `MDB_FIRST_DUP` / `MDB_LAST_DUP`: the first or last value of the current key. As in
    /// LMDB, `InvalidArgument` on a cursor that is not positioned and `Incompatible`
    /// outside a DUPSORT DB; either leaves the cursor's marks as they were.
    pub fn edge_dup<S: PageSource + ?Sized>(&mut self, src: &S, last: bool) -> Result<bool> {
        if !self.is_positioned() {
            return Err(Error::InvalidArgument("cursor is not positioned"));
        }
        if self.dcmp.is_none() {
            return Err(Error::Incompatible);
        }
        let r = self.edge_dup_inner(src, last);
        self.op_done(r)
    }

    fn edge_dup_inner<S: PageSource + ?Sized>(&mut self, src: &S, last: bool) -> Result<bool> {
        if self.pos.state != State::Valid || self.main_past {
            return Ok(false);
        }
        self.eof = false;
        if !self.on_dupdata(src)? {
            return Ok(true); // a single value is its own first and last
        }
        // The values cursor moves; its "deleted here" mark stays (LMDB's mdb_cursor_first/
        // _last do not clear C_DEL).
        let x_del = self.x_del;
        self.enter(src, last)?;
        self.x_del = x_del;
        Ok(true)
    }
}

/// Which of LMDB's next/prev variants a move is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// MDB_NEXT / MDB_PREV.
    Any,
    /// MDB_NEXT_DUP / MDB_PREV_DUP.
    Dup,
    /// MDB_NEXT_NODUP / MDB_PREV_NODUP.
    NoDup,
}
