//! A place in a tree: the stack of (page, slot) from the root to a leaf, so that `next`
//! and `prev` usually stay on their leaf and only climb when they leave it.

use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::format::page::{Node, PageView, P_INVALID};
use crate::order::KeyCmp;
use crate::store::PageSource;

use super::search::{descend_edge, search_leaf};
use super::{node_value, view, Path, MAX_DEPTH};

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

/// The leaf after a cursor's current one, under the same parent: what
/// [`Position::next_leaf_on_parent`] found and [`Position::enter_next_leaf`] moves to.
pub struct NextLeaf<'s> {
    /// The parent's slot that points to `leaf`.
    parent_slot: u16,
    /// The leaf, parsed (a leaf page with at least one node).
    pub leaf: PageView<'s>,
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

impl Position {
    /// True if the position stands on a leaf slot (`path` names its leaf).
    #[inline]
    pub fn is_set(&self) -> bool {
        self.state == State::Valid
    }

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
        let (idx, exact, leaf) = search_leaf(src, db, cmp, key, &mut self.path)?;
        let n = leaf.num_keys();
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

    /// The leaf and slot of the next item if it is on the same leaf, without moving (no
    /// page read, no panic); `None` otherwise. [`Position::set_leaf_idx`] then moves there.
    #[inline]
    pub fn next_slot_on_leaf(&self) -> Option<(u64, usize)> {
        if self.state != State::Valid {
            return None;
        }
        let level = self.path.depth.checked_sub(1)?;
        let idx = *self.path.idx.get(level)? as usize + 1;
        (idx < self.leaf_keys).then(|| (self.path.pgno[level], idx))
    }

    /// Moves to slot `idx` of the current leaf, one that [`Position::next_slot_on_leaf`]
    /// returned.
    #[inline]
    pub fn set_leaf_idx(&mut self, idx: usize) {
        debug_assert!(self.state == State::Valid && idx < self.leaf_keys);
        if let Some(slot) = self
            .path
            .depth
            .checked_sub(1)
            .and_then(|l| self.path.idx.get_mut(l))
        {
            *slot = idx as u16;
        }
    }

    /// The leaf after the current one when the cursor stands on its current leaf's last
    /// slot and that next leaf hangs from the same parent: the common leaf change of a
    /// scan, for a step that must not climb or panic. Reads the parent and the next leaf,
    /// moves nothing; `None` for anything else (another parent, a page of the wrong type,
    /// an empty or unreadable leaf), which [`Position::next`] handles, errors included.
    /// [`Position::enter_next_leaf`] then moves there.
    #[inline(always)]
    pub fn next_leaf_on_parent<'s, S: PageSource + ?Sized>(
        &self,
        src: &'s S,
    ) -> Option<NextLeaf<'s>> {
        if self.state != State::Valid {
            return None;
        }
        let leaf_level = self.path.depth.checked_sub(1)?;
        let parent_level = leaf_level.checked_sub(1)?;
        if *self.path.idx.get(leaf_level)? as usize + 1 != self.leaf_keys {
            return None;
        }
        let parent = view(src, *self.path.pgno.get(parent_level)?).ok()?;
        let parent_slot = *self.path.idx.get(parent_level)? as usize + 1;
        if parent.is_leaf() || parent_slot >= parent.num_keys() {
            return None;
        }
        let pgno = parent.child(parent_slot).ok()?;
        let leaf = view(src, pgno).ok()?;
        if !leaf.is_leaf() || leaf.num_keys() == 0 {
            return None;
        }
        Some(NextLeaf {
            parent_slot: parent_slot as u16,
            leaf,
        })
    }

    /// Moves to slot 0 of the leaf that [`Position::next_leaf_on_parent`] returned (for
    /// this position, unmoved since).
    #[inline]
    pub fn enter_next_leaf(&mut self, next: &NextLeaf<'_>) {
        let leaf_level = self.path.depth.wrapping_sub(1);
        debug_assert!(self.state == State::Valid && leaf_level > 0);
        debug_assert_eq!(self.path.idx[leaf_level] as usize + 1, self.leaf_keys);
        // Checked, not indexed: a C binding calls this before its panic guard.
        if (1..MAX_DEPTH).contains(&leaf_level) {
            self.path.idx[leaf_level - 1] = next.parent_slot;
            self.path.idx[leaf_level] = 0;
            self.path.pgno[leaf_level] = next.leaf.pgno();
            self.leaf_keys = next.leaf.num_keys();
        }
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
        Ok((node.key, node_value(src, &node)?))
    }
}
