//! Cursor movement over a tree: a stack of (page, slot) from the root to a leaf, so that
//! `next`/`prev` usually stay on their leaf and only climb when they leave it.

use crate::btree::{self, view, KeyCmp, Path, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::meta::DbRecord;
use crate::page::P_INVALID;
use crate::page::{Node, PageView, PAGE_HEADER_SIZE};
use crate::store::PageSource;

/// Where a cursor stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Never positioned, or its last move failed.
    Unset,
    /// On the item at `path`.
    Valid,
}

/// A position in a tree.
#[derive(Clone, Debug)]
pub struct Position {
    /// Pages and slots from the root to the current leaf.
    pub path: Path,
    /// What `path` means.
    pub state: State,
    /// Number of nodes on the current leaf, so `next` within a leaf reads no page.
    leaf_keys: usize,
}

impl Default for Position {
    fn default() -> Self {
        Position {
            path: Path::default(),
            state: State::Unset,
            leaf_keys: 0,
        }
    }
}

/// Descends from `pgno` at `level` to a leaf along the first (or last) child.
fn descend_edge<S: PageSource + ?Sized>(
    src: &S,
    db: &DbRecord,
    path: &mut Path,
    mut level: usize,
    mut pgno: u64,
    last: bool,
) -> Result<usize> {
    let depth = db.depth as usize;
    if depth == 0 || depth > MAX_DEPTH {
        return Err(Error::corrupted(db.root, "tree depth out of range"));
    }
    loop {
        let page = view(src, pgno)?;
        if page.is_leaf() != (level + 1 == depth) {
            return Err(Error::corrupted(
                pgno,
                "page type does not match its tree level",
            ));
        }
        let n = page.num_keys();
        path.pgno[level] = pgno;
        if page.is_leaf() {
            path.idx[level] = if last { n.saturating_sub(1) as u16 } else { 0 };
            path.depth = depth;
            return Ok(n);
        }
        if n == 0 {
            return Err(Error::corrupted(pgno, "empty branch page"));
        }
        let idx = if last { n - 1 } else { 0 };
        path.idx[level] = idx as u16;
        pgno = page.child(idx)?;
        level += 1;
    }
}

impl Position {
    /// The leaf node at the position, and its leaf page number.
    pub fn node<'s, S: PageSource + ?Sized>(&self, src: &'s S) -> Result<(Node<'s>, u64)> {
        if self.state == State::Unset {
            return Err(Error::NotFound);
        }
        let page = view(src, self.path.leaf())?;
        if self.path.leaf_idx() >= page.num_keys() {
            return Err(Error::NotFound);
        }
        Ok((page.node(self.path.leaf_idx())?, self.path.leaf()))
    }

    /// Stands on the item at `path` (a path a tree operation just produced).
    pub fn place<S: PageSource + ?Sized>(&mut self, src: &S, path: Path) -> Result<()> {
        self.path = path;
        self.leaf_keys = view(src, self.path.leaf())?.num_keys();
        self.state = State::Valid;
        Ok(())
    }

    /// Moves to the first item. Returns false if the tree is empty.
    pub fn first<S: PageSource + ?Sized>(&mut self, src: &S, db: &DbRecord) -> Result<bool> {
        self.edge(src, db, false)
    }

    /// Moves to the last item. Returns false if the tree is empty.
    pub fn last<S: PageSource + ?Sized>(&mut self, src: &S, db: &DbRecord) -> Result<bool> {
        self.edge(src, db, true)
    }

    fn edge<S: PageSource + ?Sized>(&mut self, src: &S, db: &DbRecord, last: bool) -> Result<bool> {
        self.state = State::Unset;
        if db.root == P_INVALID {
            return Ok(false);
        }
        self.leaf_keys = descend_edge(src, db, &mut self.path, 0, db.root, last)?;
        if self.leaf_keys == 0 {
            return Ok(false);
        }
        self.state = State::Valid;
        Ok(true)
    }

    /// Moves to the first item `>= key` (`exact`: only to `key` itself). Returns whether
    /// an item was found, and if it equals `key`.
    pub fn seek<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        db: &DbRecord,
        cmp: KeyCmp,
        key: &[u8],
    ) -> Result<Option<bool>> {
        self.state = State::Unset;
        if db.root == P_INVALID {
            return Ok(None);
        }
        let (idx, exact) = btree::search(src, db, cmp, key, &mut self.path)?;
        let n = view(src, self.path.leaf())?.num_keys();
        self.leaf_keys = n;
        if idx < n {
            self.state = State::Valid;
            return Ok(Some(exact));
        }
        // Past the end of this leaf: the next item is the first of the next leaf.
        if n > 0 {
            let level = self.path.leaf_level();
            self.path.idx[level] = (n - 1) as u16;
            self.state = State::Valid;
            if self.step(src, db, true)? {
                return Ok(Some(false));
            }
        }
        self.state = State::Unset;
        Ok(None)
    }

    /// Moves to the next item. Returns false (leaving the cursor on the last item) at the end.
    pub fn next<S: PageSource + ?Sized>(&mut self, src: &S, db: &DbRecord) -> Result<bool> {
        match self.state {
            State::Unset => self.first(src, db),

            State::Valid => self.step(src, db, true),
        }
    }

    /// Moves to the previous item. Returns false at the start.
    pub fn prev<S: PageSource + ?Sized>(&mut self, src: &S, db: &DbRecord) -> Result<bool> {
        match self.state {
            State::Unset => self.last(src, db),

            State::Valid => self.step(src, db, false),
        }
    }

    /// One step forward or back from a valid position.
    fn step<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        db: &DbRecord,
        forward: bool,
    ) -> Result<bool> {
        let leaf_level = self.path.leaf_level();
        let idx = self.path.idx[leaf_level] as usize;
        if forward {
            if idx + 1 < self.leaf_keys {
                self.path.idx[leaf_level] += 1;
                return Ok(true);
            }
        } else if idx > 0 {
            self.path.idx[leaf_level] -= 1;
            return Ok(true);
        }
        // Climb to the nearest ancestor that has a sibling slot in this direction.
        let mut level = leaf_level;
        while level > 0 {
            level -= 1;
            let page = view(src, self.path.pgno[level])?;
            let i = self.path.idx[level] as usize;
            let next = if forward {
                (i + 1 < page.num_keys()).then_some(i + 1)
            } else {
                i.checked_sub(1)
            };
            if let Some(j) = next {
                self.path.idx[level] = j as u16;
                let child = page.child(j)?;
                self.leaf_keys = descend_edge(src, db, &mut self.path, level + 1, child, !forward)?;
                if self.leaf_keys == 0 {
                    return Err(Error::corrupted(self.path.leaf(), "empty leaf page"));
                }
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The key and value at the position.
    pub fn current<'s, S: PageSource + ?Sized>(&self, src: &'s S) -> Result<(&'s [u8], &'s [u8])> {
        if self.state == State::Unset {
            return Err(Error::NotFound);
        }
        let page = view(src, self.path.leaf())?;
        if self.path.leaf_idx() >= page.num_keys() {
            // After deleting the last item there is no successor to stand on.
            return Err(Error::NotFound);
        }
        let node = page.node(self.path.leaf_idx())?;
        Ok((node.key, btree::node_value(src, &node)?))
    }
}

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
        DupPos::Tree { pos, .. } => Ok(pos.current(src)?.0),
    }
}

/// A cursor's state over one DB: its place in the tree and, in a DUPSORT DB, among the
/// current key's values. Movement is LMDB's `MDB_cursor_op` set; each move returns
/// whether the cursor now stands on an item.
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
    /// The item the cursor stood on was deleted through it; it now stands on the item that
    /// followed, which `next` returns without moving.
    after_delete: bool,
    /// After a delete, nothing followed: `next` fails, `prev` returns the last item.
    past_end: bool,
    /// The delete that set `after_delete`/`past_end` removed its key altogether (its last
    /// value), rather than one value of a key that still has others.
    key_removed: bool,
    /// With `after_delete`: the item that followed is a later value of the same key.
    same_key_successor: bool,
    /// A move to a later key failed at the end of the DB (LMDB's C_EOF): the cursor still
    /// stands on the last key, but forward moves fail until it moves back, goes to the first
    /// or last value of its key, counts its values, or is repositioned (LMDB's rules,
    /// checked move by move against LMDB in the interop tests).
    at_end: bool,
}

impl CursorCore {
    /// An unpositioned cursor over the DB `db`.
    pub fn new(db: DbRecord, orders: crate::catalog::Orders) -> Self {
        CursorCore {
            db,
            cmp: orders.key,
            dcmp: orders.dup,
            pos: Position::default(),
            dup: None,
            after_delete: false,
            past_end: false,
            key_removed: false,
            same_key_successor: false,
            at_end: false,
        }
    }

    /// True if the cursor stands on an item.
    pub fn is_valid(&self) -> bool {
        self.pos.state == State::Valid && !self.past_end
    }

    fn clear_delete_marks(&mut self) {
        self.after_delete = false;
        self.past_end = false;
        self.at_end = false;
    }

    /// Enters the current key's values at the first (or last) one.
    fn enter<S: PageSource + ?Sized>(&mut self, src: &S, last: bool) -> Result<()> {
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

    /// After a tree move: enter the new key's values. A move that failed at an edge
    /// leaves the cursor where it was (as LMDB does: GET_CURRENT still answers).
    fn landed<S: PageSource + ?Sized>(&mut self, src: &S, moved: bool, last: bool) -> Result<bool> {
        if moved {
            self.enter(src, last)?;
        } else if self.pos.state != State::Valid {
            self.dup = None;
        }
        Ok(moved)
    }

    /// One step among the current key's values; false at the end of them.
    fn dup_step<S: PageSource + ?Sized>(&mut self, src: &S, forward: bool) -> Result<bool> {
        match &mut self.dup {
            None | Some(DupPos::Single) => Ok(false),
            Some(DupPos::Sub { idx, count }) => {
                if forward && *idx + 1 < *count {
                    *idx += 1;
                    Ok(true)
                } else if !forward && *idx > 0 {
                    *idx -= 1;
                    Ok(true)
                } else {
                    Ok(false)
                }
            }
            Some(DupPos::Tree { pos, rec }) => {
                let mut probe = (**pos).clone();
                let moved = if forward {
                    probe.next(src, rec)?
                } else {
                    probe.prev(src, rec)?
                };
                if moved {
                    **pos = probe;
                }
                Ok(moved)
            }
        }
    }

    /// `MDB_FIRST`.
    pub fn first<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        self.clear_delete_marks();
        let moved = self.pos.first(src, &self.db)?;
        self.landed(src, moved, false)
    }

    /// `MDB_LAST`.
    pub fn last<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        self.clear_delete_marks();
        let moved = self.pos.last(src, &self.db)?;
        self.landed(src, moved, true)
    }

    /// `MDB_NEXT`: the next value of this key, else the first of the next key.
    pub fn next<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        if self.past_end {
            return Ok(false);
        }
        if std::mem::take(&mut self.after_delete) {
            return Ok(self.is_valid());
        }
        if self.at_end {
            return Ok(false);
        }
        if self.pos.state == State::Valid && self.dup_step(src, true)? {
            return Ok(true);
        }
        let was_valid = self.pos.state == State::Valid;
        let moved = self.pos.next(src, &self.db)?;
        self.at_end = was_valid && !moved;
        self.landed(src, moved, false)
    }

    /// `MDB_PREV`: the previous value of this key, else the last of the previous key.
    pub fn prev<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        if std::mem::take(&mut self.past_end) {
            self.after_delete = false;
            return Ok(self.is_valid());
        }
        self.after_delete = false;
        self.at_end = false;
        if self.pos.state == State::Valid && self.dup_step(src, false)? {
            return Ok(true);
        }
        let moved = self.pos.prev(src, &self.db)?;
        self.landed(src, moved, true)
    }

    /// `MDB_NEXT_DUP`: the next value of the current key only.
    pub fn next_dup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        match self.take_delete_marks() {
            // On the value that followed a deleted one of this key: that is the next.
            (true, _) => return Ok(self.same_key_successor),
            (_, true) => return Ok(false),
            _ => {}
        }
        if !self.is_valid() {
            return Ok(false);
        }
        if self.at_end {
            return Ok(false);
        }
        self.dup_step(src, true)
    }

    /// `MDB_PREV_DUP`: the previous value of the current key only.
    pub fn prev_dup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        if self.take_delete_marks().1 {
            // The last value of the DB was deleted: the one before it, if of the same key.
            return Ok(!self.key_removed && self.is_valid());
        }
        if !self.is_valid() {
            return Ok(false);
        }
        let moved = self.dup_step(src, false)?;
        if moved {
            self.at_end = false;
        }
        Ok(moved)
    }

    /// `MDB_NEXT_NODUP`: the first value of the next key.
    pub fn next_nodup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        if self.past_end {
            return Ok(false);
        }
        let at_end = self.at_end;
        let (after_delete, _) = self.take_delete_marks();
        if after_delete && self.key_removed {
            // On the first value of the key that followed the deleted one.
            return Ok(true);
        }
        if at_end {
            return Ok(false);
        }
        let was_valid = self.pos.state == State::Valid;
        let moved = self.pos.next(src, &self.db)?;
        self.at_end = was_valid && !moved;
        self.landed(src, moved, false)
    }

    /// `MDB_PREV_NODUP`: the last value of the previous key.
    pub fn prev_nodup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let (_, was_past_end) = self.take_delete_marks();
        self.at_end = false;
        if was_past_end && self.key_removed {
            // The last key was deleted: the previous key is the one the cursor is on.
            return self.landed(src, self.pos.state == State::Valid, true);
        }
        let moved = self.pos.prev(src, &self.db)?;
        self.landed(src, moved, true)
    }

    /// `MDB_FIRST_DUP` / `MDB_LAST_DUP`: the first or last value of the current key.
    pub fn edge_dup<S: PageSource + ?Sized>(&mut self, src: &S, last: bool) -> Result<bool> {
        self.clear_delete_marks();
        if self.pos.state != State::Valid {
            return Ok(false);
        }
        self.enter(src, last)?;
        Ok(true)
    }

    /// `MDB_SET` (exact key) or `MDB_SET_RANGE` (first key `>= key`); at the first value.
    pub fn seek<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        key: &[u8],
        exact: bool,
    ) -> Result<bool> {
        self.clear_delete_marks();
        let found = match self.pos.seek(src, &self.db, self.cmp, key)? {
            Some(is_exact) => is_exact || !exact,
            None => false,
        };
        if !found {
            self.pos.state = State::Unset;
        }
        self.landed(src, found, false)
    }

    /// `MDB_GET_BOTH` (`exact`) or `MDB_GET_BOTH_RANGE`: key `key`, and the value equal to
    /// (or the first `>=`) `value`.
    pub fn seek_both<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        key: &[u8],
        value: &[u8],
        exact: bool,
    ) -> Result<bool> {
        if !self.seek(src, key, true)? {
            return Ok(false);
        }
        let found = match self.dcmp {
            None => {
                // Not DUPSORT: the one value must match (LMDB compares with memcmp).
                let (node, _) = self.pos.node(src)?;
                let v = btree::node_value(src, &node)?;
                if exact {
                    v == value
                } else {
                    v >= value
                }
            }
            Some(dcmp) => self.seek_value(src, dcmp, value, exact)?,
        };
        if !found {
            self.pos.state = State::Unset;
            self.dup = None;
        }
        Ok(found)
    }

    fn seek_value<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        dcmp: KeyCmp,
        value: &[u8],
        exact: bool,
    ) -> Result<bool> {
        let (node, leaf) = self.pos.node(src)?;
        match self.dup.as_mut() {
            None => Ok(false),
            Some(DupPos::Single) => {
                let ord = dcmp.compare(node.data, value);
                Ok(ord == std::cmp::Ordering::Equal
                    || (!exact && ord == std::cmp::Ordering::Greater))
            }
            Some(DupPos::Sub { idx, .. }) => {
                let sub = PageView::parse(node.data, leaf)?;
                let (i, eq) =
                    btree::leaf_search(&sub, |a: &[u8], b: &[u8]| dcmp.compare(a, b), value)?;
                *idx = i;
                Ok(if exact { eq } else { i < sub.num_keys() })
            }
            Some(DupPos::Tree { pos, rec }) => {
                let rec = *rec;
                match pos.seek(src, &rec, dcmp, value)? {
                    Some(eq) => Ok(eq || !exact),
                    None => Ok(false),
                }
            }
        }
    }

    /// `MDB_GET_MULTIPLE` (DUPFIXED): the values on the current key's current page of
    /// values, packed; the cursor moves to the last of them (so `next_multiple` continues
    /// with the next page).
    pub fn get_multiple<'s, S: PageSource + ?Sized>(
        &mut self,
        src: &'s S,
    ) -> Result<Option<&'s [u8]>> {
        if !self.is_valid() {
            return Err(Error::InvalidArgument("cursor is not positioned"));
        }
        self.after_delete = false;
        let (node, leaf) = self.pos.node(src)?;
        match self.dup.as_mut() {
            None => Err(Error::Incompatible),
            Some(DupPos::Single) => Ok(Some(node.data)),
            Some(DupPos::Sub { idx, count }) => {
                let sub = PageView::parse(node.data, leaf)?;
                if !sub.is_leaf2() {
                    return Err(Error::Incompatible);
                }
                *idx = *count - 1;
                Ok(Some(
                    &node.data[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + *count * sub.fixed_size()],
                ))
            }
            Some(DupPos::Tree { pos, .. }) => {
                let page = view(src, pos.path.leaf())?;
                if !page.is_leaf2() {
                    return Err(Error::Incompatible);
                }
                let n = page.num_keys();
                let level = pos.path.leaf_level();
                pos.path.idx[level] = (n - 1) as u16;
                Ok(Some(
                    &page.bytes()[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + n * page.fixed_size()],
                ))
            }
        }
    }

    /// `MDB_NEXT_MULTIPLE`: the next page of the current key's values (the first page if
    /// the cursor is not positioned).
    pub fn next_multiple<'s, S: PageSource + ?Sized>(
        &mut self,
        src: &'s S,
    ) -> Result<Option<&'s [u8]>> {
        if !self.is_valid() {
            if !self.first(src)? {
                return Ok(None);
            }
            return self.get_multiple(src);
        }
        if self.dcmp.is_none() {
            return Err(Error::Incompatible);
        }
        if !self.dup_step(src, true)? {
            return Ok(None);
        }
        self.get_multiple(src)
    }

    /// `MDB_PREV_MULTIPLE`: the previous page of the current key's values.
    pub fn prev_multiple<'s, S: PageSource + ?Sized>(
        &mut self,
        src: &'s S,
    ) -> Result<Option<&'s [u8]>> {
        if !self.is_valid() {
            if !self.last(src)? {
                return Ok(None);
            }
            return self.get_multiple(src);
        }
        self.after_delete = false;
        match self.dup.as_mut() {
            None => Err(Error::Incompatible),
            Some(DupPos::Single) | Some(DupPos::Sub { .. }) => Ok(None),
            Some(DupPos::Tree { pos, rec }) => {
                // To the last value of the previous leaf of values, if there is one.
                let mut probe = (**pos).clone();
                let level = probe.path.leaf_level();
                probe.path.idx[level] = 0;
                if !probe.prev(src, rec)? {
                    return Ok(None);
                }
                **pos = probe;
                self.get_multiple(src)
            }
        }
    }

    /// Number of values of the current key (`mdb_cursor_count`).
    pub fn count<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<u64> {
        self.at_end = false;
        self.after_delete = false;
        if !self.is_valid() {
            return Err(Error::InvalidArgument("cursor is not positioned"));
        }
        Ok(match &self.dup {
            None | Some(DupPos::Single) => 1,
            Some(DupPos::Sub { count, .. }) => *count as u64,
            Some(DupPos::Tree { rec, .. }) => {
                let _ = src;
                rec.entries
            }
        })
    }

    /// The key and value at the cursor.
    pub fn item<'s, S: PageSource + ?Sized>(&self, src: &'s S) -> Result<(&'s [u8], &'s [u8])> {
        if !self.is_valid() {
            return Err(Error::NotFound);
        }
        let (node, leaf) = self.pos.node(src)?;
        let value = match &self.dup {
            Some(dup) => dup_value(src, dup, &node, leaf)?,
            None => btree::node_value(src, &node)?,
        };
        Ok((node.key, value))
    }

    /// After the item (`key`, `value`) was deleted through this cursor: stand on what
    /// followed it, so that `next` returns that and `prev` the item before the deleted one.
    pub fn reposition_after_delete<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        db: DbRecord,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<()> {
        self.db = db;
        let key_removed = !self.seek(src, key, true)?;
        let mut found = match value {
            Some(v) if self.dcmp.is_some() && !key_removed => self.seek_both(src, key, v, false)?,
            _ => false,
        };
        self.same_key_successor = found;
        if !found {
            // The key is gone (or had no later value): the next key, if any.
            found = self.seek(src, key, false)?;
            if found && self.cmp.compare(self.item(src)?.0, key) == std::cmp::Ordering::Equal {
                found = self.next_nodup(src)?;
            }
        }
        if found {
            self.after_delete = true;
        } else if self.last(src)? {
            self.past_end = true;
        }
        self.key_removed = key_removed;
        Ok(())
    }

    /// The delete marks end with any other operation (LMDB's C_DEL); returns them.
    fn take_delete_marks(&mut self) -> (bool, bool) {
        let marks = (self.after_delete, self.past_end);
        self.after_delete = false;
        self.past_end = false;
        marks
    }

    /// `MDB_GET_CURRENT`: ends the "after a delete" state, as in LMDB.
    pub fn current_op(&mut self) {
        self.after_delete = false;
    }
}
