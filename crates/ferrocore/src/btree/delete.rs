//! Delete, and the rebalancing that keeps pages at least a quarter full.

use crate::error::Result;
use crate::format::page::{
    edit, node_flags, page_flags, NodeValue, PageView, PAGE_HEADER_SIZE, P_INVALID,
};
use crate::store::PageStore;

use super::nodes::{with_node_scratch, Nodes};
use super::put::{check_node_kind, TreeMut};
use super::search::{descend, search, Descend};
use super::{debug_assert_ordered, view, Path, FILL_THRESHOLD};
use crate::order::cmp_lexicographic;

/// The most two leaves may fill (per-mille of a page, together) for a delete's rebalance to
/// merge them rather than move nodes between them: all of it, so two leaves that fit one
/// page merge. (At three quarters, which left room for inserts before the merged leaf
/// split again, the free DB's first leaf, a queue's front, borrowed from a sibling not much
/// fuller than itself every ten commits or so, rewriting both each time: W8's one-put
/// commit through the C ABI spent ~300 instructions more.)
pub(super) const MERGE_ROOM: usize = 1000;

/// How many of leaf `page`'s first items have the keys `keys`, in order (plain nodes, or
/// `Incompatible`), and whether one of those holds its value on overflow pages.
#[inline(always)]
fn leading_matches<K: AsRef<[u8]>>(page: &PageView<'_>, keys: &[K]) -> Result<(usize, bool)> {
    let mut count = 0;
    let mut overflow = false;
    while count < keys.len().min(page.num_keys()) {
        let node = page.node(count)?;
        if node.key != keys[count].as_ref() {
            break;
        }
        check_node_kind(node.flags, 0)?;
        overflow |= node.flags & node_flags::BIGDATA != 0;
        count += 1;
    }
    Ok((count, overflow))
}

impl<S: PageStore> TreeMut<'_, S> {
    /// Deletes `key`. Returns false if it was not present.
    pub fn delete(&mut self, key: &[u8]) -> Result<bool> {
        self.delete_kind(key, 0)
    }

    /// Deletes `key` if its node is of kind `node_flags` (see [`PutMode::node_flags`]).
    pub fn delete_kind(&mut self, key: &[u8], node_flags: u16) -> Result<bool> {
        if self.db.root == P_INVALID {
            return Ok(false);
        }
        let mut path = Path::default();
        let (idx, exact) = search(&*self.store, self.db, self.cmp, key, &mut path)?;
        if !exact {
            return Ok(false);
        }
        check_node_kind(
            view(&*self.store, path.leaf())?.node(idx)?.flags,
            node_flags,
        )?;
        self.delete_at(&mut path, idx)?;
        Ok(true)
    }

    /// Deletes the tree's first items while their keys are `keys`, in order (plain nodes),
    /// as many as the first leaf holds, with one descent and one rebalance; returns how
    /// many it deleted (0, changing nothing, if the first key is not `keys[0]`). No key is
    /// compared on the way down: for the free DB, whose records a txn consumes oldest
    /// first.
    #[inline]
    pub fn delete_leading<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<usize> {
        if self.db.root == P_INVALID || keys.is_empty() {
            return Ok(0);
        }
        if self.db.depth == 1 && self.store.is_dirty(self.db.root) {
            if let Some(count) = self.delete_leading_in_root(keys)? {
                return Ok(count);
            }
        }
        let mut path = Path::default();
        // The first leaf, parsed once: its keys are compared, and its item count tells
        // whether a root leaf keeps any.
        let (page, _, _) = descend(
            &*self.store,
            self.db,
            &mut path,
            0,
            self.db.root,
            Descend::First,
            cmp_lexicographic,
        )?;
        let items = page.num_keys();
        let (count, overflow) = leading_matches(&page, keys)?;
        if count == 0 {
            return Ok(0);
        }
        self.touch_path(&mut path)?;
        let leaf = path.leaf();
        if overflow {
            for _ in 0..count {
                let node = view(&*self.store, leaf)?.node(0)?;
                if node.flags & node_flags::BIGDATA != 0 {
                    let run = node.overflow_pgno();
                    self.free_overflow(run)?;
                }
                edit::delete_node(self.store.dirty_mut(leaf), 0);
            }
        } else {
            // Inline records: the copy is looked up once for all of them.
            let buf = self.store.dirty_mut(leaf);
            for _ in 0..count {
                edit::delete_node(buf, 0);
            }
        }
        self.db.entries -= count as u64;
        if path.depth == 1 && count < items {
            // A root leaf that keeps items: a root has no fill to keep up.
            return Ok(count);
        }
        let level = path.leaf_level();
        self.rebalance(&mut path, level)?;
        Ok(count)
    }

    /// [`TreeMut::delete_leading`]'s usual case (the free DB's, a few records in a root
    /// leaf the commit has made writable): no descent, one look-up of the leaf's copy.
    /// `None`, changing nothing, if the deletes would empty the leaf or free overflow
    /// pages: the general path does those.
    #[inline]
    fn delete_leading_in_root<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Option<usize>> {
        let root = self.db.root;
        let buf = self.store.dirty_mut(root);
        let count = {
            let page = PageView::parse(buf, root)?;
            if !page.is_leaf() {
                return Err(super::search::misplaced(&page, true));
            }
            let (count, overflow) = leading_matches(&page, keys)?;
            if overflow || count == page.num_keys() {
                return Ok(None);
            }
            count
        };
        for _ in 0..count {
            edit::delete_node(buf, 0);
        }
        self.db.entries -= count as u64;
        Ok(Some(count))
    }

    /// Deletes the item at slot `idx` of `path`'s leaf, with its overflow run, and
    /// rebalances.
    fn delete_at(&mut self, path: &mut Path, idx: usize) -> Result<()> {
        self.touch_path(path)?;
        let leaf = path.leaf();
        // The copy, looked up once: read, then written (unless a value on overflow pages
        // is freed first).
        let buf = self.store.dirty_mut(leaf);
        let overflow = {
            let node = PageView::parse(buf, leaf)?.node(idx)?;
            (node.flags & node_flags::BIGDATA != 0).then(|| node.overflow_pgno())
        };
        match overflow {
            None => edit::delete_node(buf, idx),
            Some(run) => {
                self.free_overflow(run)?;
                edit::delete_node(self.store.dirty_mut(leaf), idx);
            }
        }
        self.db.entries -= 1;
        let level = path.leaf_level();
        self.rebalance(path, level)
    }

    /// Restores fill and key-count bounds after a delete at `level` of `path`.
    fn rebalance(&mut self, path: &mut Path, mut level: usize) -> Result<()> {
        loop {
            let pgno = path.pgno[level];
            let (n, fill, leaf, child0) = {
                let page = view(&*self.store, pgno)?;
                let child0 = if page.is_branch() && page.num_keys() > 0 {
                    page.child(0)?
                } else {
                    P_INVALID
                };
                (
                    page.num_keys(),
                    page.fill_permille(),
                    page.is_leaf(),
                    child0,
                )
            };
            if level == 0 {
                if leaf && n == 0 {
                    self.store.free(pgno, 1)?;
                    self.db.root = P_INVALID;
                    self.db.depth = 0;
                    self.db.leaf_pages = 0;
                } else if !leaf && n == 1 {
                    self.store.free(pgno, 1)?;
                    self.db.root = child0;
                    self.db.depth -= 1;
                    self.db.branch_pages -= 1;
                }
                return Ok(());
            }
            let min_keys = if leaf { 1 } else { 2 };
            if fill >= FILL_THRESHOLD && n >= min_keys {
                return Ok(());
            }
            let parent = path.pgno[level - 1];
            let pidx = path.idx[level - 1] as usize;
            let pn = view(&*self.store, parent)?.num_keys();
            if pn < 2 {
                // No sibling to borrow from (only a damaged tree has a non-root branch with
                // one child): rebalance the parent instead.
                level -= 1;
                continue;
            }
            let (sib_idx, sib_right) = if pidx == 0 {
                (1, true)
            } else {
                (pidx - 1, false)
            };
            let sib_old = view(&*self.store, parent)?.child(sib_idx)?;
            let sib = self.store.touch(sib_old)?;
            if sib != sib_old {
                edit::set_child(self.store.dirty_mut(parent), sib_idx, sib);
            }
            let (sn, sfill) = {
                let s = view(&*self.store, sib)?;
                (s.num_keys(), s.fill_permille())
            };
            // The tree's first leaf and its sibling merge when they fill at most
            // `MERGE_ROOM` of one page together, even when the sibling could lend a node:
            // a queue deleted at its left end (the free DB, whose oldest records go first
            // and newest come last) otherwise borrows from the right leaf every few
            // commits, each time rewriting both. Everywhere else LMDB's rule: the sibling
            // lends if it can; if not, the two merge if they fit. (Merging wherever two
            // leaves fit made W9's removals, half of a DB's keys deleted at random in one
            // txn, leave 17% fewer leaves than LMDB's but write them in four times as many
            // runs of adjacent pages: each merge freed a page amid the txn's new ones.)
            let can_lend = sfill >= FILL_THRESHOLD && sn > min_keys;
            let first_leaf = leaf && path.idx[..level].iter().all(|&i| i == 0);
            let try_merge = !can_lend || (first_leaf && fill + sfill <= MERGE_ROOM);
            let (left, right, ridx) = if sib_right {
                (pgno, sib, 1)
            } else {
                (sib, pgno, pidx)
            };
            // `merge` changes nothing when the two do not fit (the fills are rounded down).
            if !(try_merge && self.merge(parent, left, right, ridx)?) {
                return if can_lend {
                    self.move_node(path, level, sib, sib_right)
                } else {
                    Ok(())
                };
            }
            if !sib_right {
                // Our page was merged into its left sibling; the parent's path entry is
                // still the parent itself, which lost one key.
                path.idx[level - 1] = sib_idx as u16;
            }
            level -= 1;
        }
    }

    /// Merges page `right` (child `ridx` of `parent`) into its left neighbour `left`.
    /// Returns false, changing nothing, if the two do not fit one page.
    fn merge(&mut self, parent: u64, left: u64, right: u64, ridx: usize) -> Result<bool> {
        with_node_scratch(|(_, nodes, key)| self.merge_with(parent, left, right, ridx, nodes, key))
    }

    /// [`TreeMut::merge`] with buffers for the two pages' nodes and the separator.
    fn merge_with(
        &mut self,
        parent: u64,
        left: u64,
        right: u64,
        ridx: usize,
        nodes: &mut Nodes,
        separator: &mut Vec<u8>,
    ) -> Result<bool> {
        let flags = {
            let l = view(&*self.store, left)?;
            nodes.refill(&l)?;
            l.flags()
        };
        let branch = flags & page_flags::BRANCH != 0;
        let first_right = nodes.len();
        let r = view(&*self.store, right)?;
        for i in 0..r.num_keys() {
            nodes.push_raw(r.node_raw(i)?);
        }
        if branch {
            separator.clear();
            separator.extend_from_slice(view(&*self.store, parent)?.key(ridx)?);
            nodes.set_branch_key(first_right, separator);
        }
        let size: usize = (0..nodes.len()).map(|i| nodes.size(i)).sum();
        if size > self.page_size() - PAGE_HEADER_SIZE {
            return Ok(false);
        }
        nodes.write_page(self.store.dirty_mut(left), left, flags, 0..nodes.len());
        debug_assert_ordered(&*self.store, left, self.cmp, None, None);
        self.store.free(right, 1)?;
        if branch {
            self.db.branch_pages -= 1;
        } else {
            self.db.leaf_pages -= 1;
        }
        edit::delete_node(self.store.dirty_mut(parent), ridx);
        Ok(true)
    }

    /// Moves one node from sibling `sib` into the underfull page at `level` of `path`.
    fn move_node(
        &mut self,
        path: &mut Path,
        level: usize,
        sib: u64,
        sib_right: bool,
    ) -> Result<()> {
        with_node_scratch(|(moved, nodes, key)| {
            self.move_node_with(path, level, sib, sib_right, moved, nodes, key)
        })
    }

    /// [`TreeMut::move_node`] with buffers for the node moved, the page's nodes and the
    /// new separator key.
    #[allow(clippy::too_many_arguments)]
    fn move_node_with(
        &mut self,
        path: &mut Path,
        level: usize,
        sib: u64,
        sib_right: bool,
        moved: &mut Nodes,
        nodes: &mut Nodes,
        new_sep: &mut Vec<u8>,
    ) -> Result<()> {
        let pgno = path.pgno[level];
        let parent = path.pgno[level - 1];
        let pidx = path.idx[level - 1] as usize;
        let branch = view(&*self.store, pgno)?.is_branch();
        if sib_right && !branch {
            return self.even_out_from_right(path, level, sib, nodes, new_sep);
        }
        moved.reset_like(&view(&*self.store, sib)?);
        if sib_right {
            let ridx = pidx + 1;
            moved.push_raw(view(&*self.store, sib)?.node_raw(0)?);
            if branch {
                let separator = view(&*self.store, parent)?.key(ridx)?.to_vec();
                moved.set_branch_key(0, &separator);
            }
            edit::delete_node(self.store.dirty_mut(sib), 0);
            new_sep.clear();
            new_sep.extend_from_slice(view(&*self.store, sib)?.key(0)?);
            if branch {
                let c = view(&*self.store, sib)?.child(0)?;
                let buf = self.store.dirty_mut(sib);
                edit::delete_node(buf, 0);
                let ok = edit::insert_node(buf, 0, &[], NodeValue::Child(c));
                assert!(ok, "a shorter node fits where a longer one was");
            }
            let ok = edit::append_raw(self.store.dirty_mut(pgno), moved.raw(0));
            assert!(ok, "an underfull page takes one more node");
            debug_assert_ordered(&*self.store, pgno, self.cmp, None, Some(new_sep));
            debug_assert_ordered(&*self.store, sib, self.cmp, Some(new_sep), None);
            self.replace_separator(path, level - 1, ridx, new_sep)
        } else {
            let last = view(&*self.store, sib)?.num_keys() - 1;
            moved.push_raw(view(&*self.store, sib)?.node_raw(last)?);
            new_sep.clear();
            new_sep.extend_from_slice(moved.key(0));
            let moved_key = &*new_sep;
            edit::delete_node(self.store.dirty_mut(sib), last);
            let page = view(&*self.store, pgno)?;
            nodes.refill(&page)?;
            let flags = page.flags();
            if branch {
                let separator = view(&*self.store, parent)?.key(pidx)?.to_vec();
                nodes.set_branch_key(0, &separator);
                moved.set_branch_key(0, &[]);
            }
            nodes.push_raw(moved.raw(0));
            nodes.move_last_to(0);
            nodes.write_page(self.store.dirty_mut(pgno), pgno, flags, 0..nodes.len());
            debug_assert_ordered(&*self.store, sib, self.cmp, None, Some(moved_key));
            debug_assert_ordered(&*self.store, pgno, self.cmp, Some(moved_key), None);
            self.replace_separator(path, level - 1, pidx, moved_key)
        }
    }

    /// [`TreeMut::move_node`] for a leaf and its right sibling `sib`: moves as many of the
    /// sibling's first nodes as even out the two pages' bytes (at least one; the sibling
    /// keeps one or more), with one new separator. Moving one node, as LMDB does, a queue
    /// deleted at its left end (the free DB, whose oldest records go first) borrowed a node
    /// at every delete once its first leaf ran low: a copy of the sibling and a separator
    /// rewritten per commit.
    fn even_out_from_right(
        &mut self,
        path: &mut Path,
        level: usize,
        sib: u64,
        nodes: &mut Nodes,
        new_sep: &mut Vec<u8>,
    ) -> Result<()> {
        let pgno = path.pgno[level];
        let ridx = path.idx[level - 1] as usize + 1;
        let mut ours = {
            let page = view(&*self.store, pgno)?;
            page.bytes().len() - PAGE_HEADER_SIZE - page.free_space()
        };
        let sib_flags = {
            let s = view(&*self.store, sib)?;
            nodes.refill(&s)?;
            s.flags()
        };
        let mut theirs: usize = (0..nodes.len()).map(|i| nodes.size(i)).sum();
        let mut count = 0;
        while count + 1 < nodes.len() {
            let size = nodes.size(count);
            if count > 0 && ours + size > theirs - size {
                break;
            }
            ours += size;
            theirs -= size;
            count += 1;
        }
        debug_assert!(count >= 1 && count < nodes.len());
        let page = self.store.dirty_mut(pgno);
        let ok = if nodes.fixed != 0 {
            // LEAF2: one key at a time (`append_raws` is for pages with nodes).
            (0..count).all(|i| edit::append_raw(page, nodes.raw(i)))
        } else {
            edit::append_raws(page, (0..count).map(|i| nodes.raw(i)))
        };
        assert!(ok, "an underfull leaf takes no more than its sibling keeps");
        nodes.write_page(
            self.store.dirty_mut(sib),
            sib,
            sib_flags,
            count..nodes.len(),
        );
        new_sep.clear();
        new_sep.extend_from_slice(nodes.key(count));
        debug_assert_ordered(&*self.store, pgno, self.cmp, None, Some(new_sep));
        debug_assert_ordered(&*self.store, sib, self.cmp, Some(new_sep), None);
        self.replace_separator(path, level - 1, ridx, new_sep)
    }

    /// Replaces the key of branch node `idx` of the page at `level` of `path`.
    fn replace_separator(
        &mut self,
        path: &Path,
        level: usize,
        idx: usize,
        key: &[u8],
    ) -> Result<()> {
        debug_assert!(idx > 0, "node 0 of a branch has no key");
        let pgno = path.pgno[level];
        let child = view(&*self.store, pgno)?.child(idx)?;
        let buf = self.store.dirty_mut(pgno);
        edit::delete_node(buf, idx);
        if edit::insert_node(buf, idx, key, NodeValue::Child(child)) {
            return Ok(());
        }
        self.split_insert(path, level, idx, key, NodeValue::Child(child), false)
    }
}
