//! Cursor movement over a tree: a stack of (page, slot) from the root to a leaf, so that
//! `next`/`prev` usually stay on their leaf and only climb when they leave it.

use crate::btree::{self, view, KeyCmp, Path, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::meta::DbRecord;
use crate::page::P_INVALID;
use crate::store::PageSource;

/// Where a cursor stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Never positioned, or its last move failed.
    Unset,
    /// On the item at `path`.
    Valid,
    /// The item it stood on was deleted through it; `path` holds the item that followed
    /// (if any): `next` returns that item, `prev` the one before it.
    AfterDelete,
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
            State::AfterDelete => {
                self.state = State::Valid;
                if self.leaf_has_item(src)? {
                    return Ok(true);
                }
                self.state = State::Unset;
                Ok(false)
            }
            State::Valid => self.step(src, db, true),
        }
    }

    /// Moves to the previous item. Returns false at the start.
    pub fn prev<S: PageSource + ?Sized>(&mut self, src: &S, db: &DbRecord) -> Result<bool> {
        match self.state {
            State::Unset => self.last(src, db),
            State::AfterDelete => {
                // The deleted item's successor sits at path (possibly one past the leaf's end).
                self.state = State::Valid;
                let level = self.path.leaf_level();
                if self.path.idx[level] > 0 {
                    self.path.idx[level] -= 1;
                    return Ok(true);
                }
                self.step(src, db, false)
            }
            State::Valid => self.step(src, db, false),
        }
    }
    fn leaf_has_item<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        self.leaf_keys = view(src, self.path.leaf())?.num_keys();
        Ok(self.path.leaf_idx() < self.leaf_keys)
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
