//! Insert: copy-on-write touch of the path, puts, overflow values and splits.

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::format::page::{
    edit, node_flags, node_max, overflow_pages, page_flags, read_u32, NodeValue, NODE_HEADER_SIZE,
    PAGE_HEADER_SIZE, P_INVALID,
};
use crate::format::page::{OverflowView, PageView};
use crate::order::{cmp_lexicographic, KeyCmp};
use crate::store::PageStore;

use super::nodes::{choose_split, with_node_scratch, Nodes};
use super::search::{descend, descend_edge, search_leaf, Descend};
use super::{debug_assert_ordered, view, Path, MAX_DEPTH};

/// How `put` treats an existing key and key order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PutMode {
    /// Fail with `KeyExist` if the key is present.
    pub no_overwrite: bool,
    /// The key must sort after every key in the tree (`KeyExist` otherwise); pages are
    /// split so that appended data fills them.
    pub append: bool,
    /// Node flags of the item: 0 for plain data, `SUBDATA` for a named DB's record in the
    /// main DB. An existing item of the other kind is not replaced (`Incompatible`).
    pub node_flags: u16,
    /// Replace an existing node whatever its kind (DUPSORT code turning a single value
    /// into a set of duplicates and back).
    pub any_kind: bool,
}

/// Fails with `Incompatible` unless an existing node's kind (plain data or named-DB
/// record) is the one the caller works with.
pub(super) fn check_node_kind(existing: u16, wanted: u16) -> Result<()> {
    const KIND: u16 = node_flags::SUBDATA | node_flags::DUPDATA;
    if existing & KIND != wanted & KIND {
        return Err(Error::Incompatible);
    }
    Ok(())
}

/// What [`TreeMut::put_at`] reads of the leaf before it changes anything, read once from
/// the leaf the search found (the copy-on-write copy `touch_path` may make holds the same
/// bytes). A caller that has the leaf's view from its own search reads it there
/// ([`LeafFacts::read`]) and calls [`TreeMut::put_at_with`], without a second look-up and
/// parse of the page.
#[derive(Clone, Copy, Debug)]
pub struct LeafFacts {
    /// The key is at the slot.
    exact: bool,
    /// The present node's flags, data size and overflow run (0 if none), if `exact`.
    present: Option<(u16, usize, u64)>,
    /// The leaf's key size if it is LEAF2, else 0.
    fixed: usize,
}

impl LeafFacts {
    /// True if the key is at the slot.
    pub fn exact(&self) -> bool {
        self.exact
    }

    /// Reads slot `idx` of `leaf` (`exact` if the key is there) for a put in `mode`: fails
    /// as the put must if `mode` does not overwrite (`KeyExist`, whatever the present
    /// node's kind, as in LMDB), or if the present node's kind is not `mode`'s.
    #[inline(always)]
    pub fn read(leaf: &PageView<'_>, idx: usize, exact: bool, mode: PutMode) -> Result<Self> {
        let present = if exact {
            if mode.no_overwrite {
                return Err(Error::KeyExist);
            }
            let node = leaf.node(idx)?;
            if !mode.any_kind {
                check_node_kind(node.flags, mode.node_flags)?;
            }
            let run = if node.flags & node_flags::BIGDATA != 0 {
                node.overflow_pgno()
            } else {
                0
            };
            Some((node.flags, node.data_size(), run))
        } else {
            None
        };
        Ok(LeafFacts {
            exact,
            present,
            fixed: leaf.fixed_size(),
        })
    }
}

/// A mutable tree: the store its pages live in, its record, and its key order.
pub struct TreeMut<'a, S: PageStore> {
    /// Where pages live.
    pub store: &'a mut S,
    /// Root, depth and statistics, updated as the tree changes.
    pub db: &'a mut DbRecord,
    /// Key order.
    pub cmp: KeyCmp,
}

impl<S: PageStore> TreeMut<'_, S> {
    pub(super) fn page_size(&self) -> usize {
        self.store.page_size()
    }

    /// Makes the pages along the tree's right edge (`last`) or left edge writable now
    /// (copy-on-write), so that a later put of a key past the last one or before the first
    /// allocates nothing unless it splits. No key is compared; nothing to do in an empty
    /// tree.
    #[inline]
    pub fn touch_edge(&mut self, last: bool) -> Result<()> {
        if self.db.root == P_INVALID {
            return Ok(());
        }
        if self.db.depth == 1 {
            // A root leaf is both edges: made writable without a descent. (A root that is
            // not a leaf, under a damaged depth, is copied as it is, already checked well
            // formed by `touch`; every change to it or read of it parses it and refuses it.)
            self.db.root = self.store.touch(self.db.root)?;
            return Ok(());
        }
        let mut path = Path::default();
        descend_edge(&*self.store, self.db, &mut path, 0, self.db.root, last)?;
        self.touch_path(&mut path)
    }

    /// Makes every page on `path` writable, re-pointing parents at the copies.
    pub(super) fn touch_path(&mut self, path: &mut Path) -> Result<()> {
        // A dirty page's parents are dirty: pages are made writable from the root down, and
        // a page the txn allocated hangs from one it changed (a bulk load's leaves written
        // early are no longer dirty, their parents still are: the other way round). So a
        // dirty leaf means the whole path is, the common case of a put in a busy txn.
        if path.depth > 0 && self.store.is_dirty(path.leaf()) {
            debug_assert!(
                (0..path.depth).all(|level| self.store.is_dirty(path.pgno[level])),
                "dirty page {} under a clean parent",
                path.leaf()
            );
            return Ok(());
        }
        for level in 0..path.depth {
            let old = path.pgno[level];
            let new = self.store.touch(old)?;
            if new != old {
                path.pgno[level] = new;
                if level == 0 {
                    self.db.root = new;
                } else {
                    let parent = self.store.dirty_mut(path.pgno[level - 1]);
                    edit::set_child(parent, path.idx[level - 1] as usize, new);
                }
            }
        }
        Ok(())
    }

    /// Frees the overflow run that starts at `pgno` (its length read from its header).
    pub(super) fn free_overflow(&mut self, pgno: u64) -> Result<()> {
        let count = OverflowView::parse(self.store.page(pgno)?, pgno)?.pages;
        // A forged count must not free pages past the file (or billions of them).
        if self.store.pages(pgno, count).is_err() {
            return Err(Error::corrupted(pgno, "overflow run length out of range"));
        }
        self.store.free(pgno, count)?;
        self.db.overflow_pages = self.db.overflow_pages.saturating_sub(count as u64);
        Ok(())
    }

    /// Writes `value` into a new overflow run if it is too big for a node. The check is
    /// inlined into the puts, the overflow run written out of line.
    #[inline]
    fn store_value<'v>(
        &mut self,
        key: &[u8],
        value: &'v [u8],
        flags: u16,
    ) -> Result<NodeValue<'v>> {
        if NODE_HEADER_SIZE + key.len() + value.len() <= node_max(self.page_size()) {
            return Ok(NodeValue::Inline { flags, data: value });
        }
        debug_assert_eq!(flags, 0, "only plain values go to overflow pages");
        self.store_overflow(value)
    }

    /// Writes `value` into a new overflow run.
    #[inline(never)]
    fn store_overflow<'v>(&mut self, value: &'v [u8]) -> Result<NodeValue<'v>> {
        let ps = self.page_size();
        let count = overflow_pages(ps, value.len());
        let pgno = self.store.alloc(count)?;
        let run = self.store.dirty_mut(pgno);
        edit::init_overflow(run, pgno, count as u32);
        run[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + value.len()].copy_from_slice(value);
        self.db.overflow_pages += count as u64;
        Ok(NodeValue::Overflow {
            pgno,
            size: value.len(),
        })
    }

    /// Inserts or replaces `key`. (Callers that need the item's place search again, or
    /// use [`TreeMut::put_at`] with their own path.)
    pub fn put(&mut self, key: &[u8], value: &[u8], mode: PutMode) -> Result<()> {
        self.put_tracked(key, value, mode).map(|_| ())
    }

    /// Appends `key`/`value` at the end of `leaf` if `leaf` is this tree's last leaf,
    /// dirty, the key sorts after its last key, and the node fits inline without a split:
    /// the next put of a sorted load, without a descent ([`TreeMut::put_tracked`] said
    /// where the last one went). Returns false (changing nothing) otherwise.
    pub fn append_to_leaf(&mut self, leaf: u64, key: &[u8], value: &[u8]) -> Result<bool> {
        debug_assert!(
            self.store.is_dirty(leaf),
            "the last append touched the leaf"
        );
        if NODE_HEADER_SIZE + key.len() + value.len() > node_max(self.page_size()) {
            return Ok(false);
        }
        let cmp = self.cmp;
        // The copy, looked up once: read, then written (a sorted load's every put).
        let buf = self.store.dirty_mut(leaf);
        let n = {
            let page = PageView::parse(buf, leaf)?;
            let n = page.num_keys();
            if !page.is_leaf()
                || page.fixed_size() != 0
                || n == 0
                || cmp.compare(key, page.key(n - 1)?) != Ordering::Greater
            {
                return Ok(false);
            }
            n
        };
        let node = NodeValue::Inline {
            flags: 0,
            data: value,
        };
        if !edit::insert_node(buf, n, key, node) {
            return Ok(false);
        }
        self.db.entries += 1;
        Ok(true)
    }

    /// [`TreeMut::put`], returning the leaf that took the item if it went in place (no
    /// split, no new root): where an APPEND put leaves a sorted load's next key.
    pub fn put_tracked(&mut self, key: &[u8], value: &[u8], mode: PutMode) -> Result<Option<u64>> {
        if self.db.root == P_INVALID {
            let leaf2 = self.db.flags & (crate::db_flags::DUP_FIXED | crate::db_flags::DUP_SORT)
                == crate::db_flags::DUP_FIXED;
            // The sub-DB of a DUPFIXED DB (flags DUPFIXED without DUPSORT): its leaves are
            // LEAF2, keys of `pad` bytes. Refused before the page is taken: a refused size
            // changes nothing (the txn stays usable, `WriteTxn::note`).
            if leaf2 && (key.len() != self.db.pad as usize || !value.is_empty()) {
                return Err(Error::BadValSize {
                    what: "DUPFIXED value",
                    size: key.len(),
                    max: self.db.pad as usize,
                });
            }
            let pgno = self.store.alloc(1)?;
            if leaf2 {
                edit::init_leaf2(
                    self.store.dirty_mut(pgno),
                    pgno,
                    page_flags::LEAF | page_flags::LEAF2,
                    key.len(),
                );
            } else {
                edit::init(self.store.dirty_mut(pgno), pgno, page_flags::LEAF);
            }
            self.db.root = pgno;
            self.db.depth = 1;
            self.db.leaf_pages = 1;
            let v = self.store_value(key, value, mode.node_flags)?;
            let ok = edit::insert_node(self.store.dirty_mut(pgno), 0, key, v);
            assert!(ok, "a node of at most node_max bytes fits an empty page");
            self.db.entries = 1;
            return Ok(None);
        }
        let mut path = Path::default();
        let in_place = if mode.append {
            // As LMDB's MDB_APPEND: down the rightmost edge, one comparison with the last
            // key, and the new key goes after it (or KeyExist).
            let Some(idx) = self.append_slot(key, &mut path)? else {
                return Err(Error::KeyExist);
            };
            self.put_at(&mut path, idx, false, key, value, mode)?
        } else {
            let (idx, exact, leaf) = search_leaf(&*self.store, self.db, self.cmp, key, &mut path)?;
            let facts = LeafFacts::read(&leaf, idx, exact, mode)?;
            self.put_at_with(&mut path, idx, facts, key, value, mode)?
        };
        Ok(in_place.then(|| path.leaf()))
    }

    /// [`TreeMut::put`] where [`search`] (of this tree, unchanged since) put `key` at slot
    /// `idx` of `path`'s leaf, `exact` if it is there: callers that searched already do
    /// not descend again. Returns true if `path` then leads to the item (false after a
    /// split). The path is borrowed, not moved: it is 328 bytes.
    pub fn put_at(
        &mut self,
        path: &mut Path,
        idx: usize,
        exact: bool,
        key: &[u8],
        value: &[u8],
        mode: PutMode,
    ) -> Result<bool> {
        let leaf = view(&*self.store, path.leaf())?;
        let facts = LeafFacts::read(&leaf, idx, exact, mode)?;
        self.put_at_with(path, idx, facts, key, value, mode)
    }

    /// [`TreeMut::put_at`] with what it reads of the leaf read by the caller, from the
    /// view its search of this tree (unchanged since) returned.
    pub fn put_at_with(
        &mut self,
        path: &mut Path,
        idx: usize,
        facts: LeafFacts,
        key: &[u8],
        value: &[u8],
        mode: PutMode,
    ) -> Result<bool> {
        debug_assert!(path.depth > 0 && path.depth as u16 == self.db.depth);
        let LeafFacts {
            exact,
            present,
            fixed,
        } = facts;
        if fixed != 0 {
            // A LEAF2 leaf holds keys only: present means nothing to change.
            if key.len() != fixed {
                return Err(Error::BadValSize {
                    what: "DUPFIXED value",
                    size: key.len(),
                    max: fixed,
                });
            }
            if exact {
                return Ok(true);
            }
        }
        self.touch_path(path)?;
        let leaf = path.leaf();
        if let Some((flags, size, stored)) = present {
            if flags & node_flags::BIGDATA != 0 {
                if self.rewrite_overflow_in_place(leaf, idx, stored, key, value)? {
                    return Ok(true);
                }
                self.free_overflow(stored)?;
            } else if NODE_HEADER_SIZE + key.len() + value.len() <= node_max(self.page_size()) {
                // The value stays inline: rewritten in place, the node resized first if
                // the page has room, its kind changed if the put's differs (a DUPSORT
                // key's single value becoming a sub-page, a sub-page a sub-DB's record:
                // only `any_kind` puts get here with another kind). A DUPSORT node
                // grows where it is (an index takes values for one key after another);
                // other values resize in place only as the page's lowest node, else a
                // delete and an insert make them the lowest, for the next rewrite (the
                // free list's records are rewritten round after round).
                debug_assert!(mode.any_kind || flags == mode.node_flags);
                let page = self.store.dirty_mut(leaf);
                let resize = if (flags | mode.node_flags) & node_flags::DUPDATA != 0 {
                    edit::resize_inline_data
                } else {
                    edit::resize_lowest_inline_data
                };
                if size == value.len() || resize(page, idx, value.len()) {
                    edit::overwrite_inline_data(page, idx, value);
                    if flags != mode.node_flags {
                        edit::set_node_flags(page, idx, mode.node_flags);
                    }
                    return Ok(true);
                }
            }
            edit::delete_node(self.store.dirty_mut(leaf), idx);
        } else {
            self.db.entries += 1;
        }
        let v = self.store_value(key, value, mode.node_flags)?;
        if edit::insert_node(self.store.dirty_mut(leaf), idx, key, v) {
            return Ok(true);
        }
        let level = path.leaf_level();
        self.split_insert(path, level, idx, key, v, mode.append)?;
        Ok(false)
    }

    /// Gives the present node at slot `idx` of `path`'s leaf, inline data of kind
    /// `node_flags` (`facts` read by the caller's search of this tree, unchanged since),
    /// `extra` more bytes of data where it is, and returns its data: the path is made
    /// writable and the node keeps its end, so the old data is the returned slice's tail
    /// and its first `extra` bytes are undefined (see [`edit::resize_inline_data`]). `None`
    /// (the path made writable, nothing else changed) if the leaf lacks the room or the
    /// node is not of that kind; the caller then puts the grown data with
    /// [`TreeMut::put_at_with`], which splits the leaf. The caller checks that the grown
    /// node fits a page ([`node_max`]). A DUPSORT sub-page grows this way.
    pub fn grow_inline_at(
        &mut self,
        path: &mut Path,
        idx: usize,
        facts: LeafFacts,
        node_flags: u16,
        extra: usize,
    ) -> Result<Option<&mut [u8]>> {
        let Some((flags, size, _)) = facts.present else {
            return Ok(None);
        };
        debug_assert_eq!(node_flags & node_flags::BIGDATA, 0, "inline data");
        if facts.fixed != 0 || flags != node_flags {
            return Ok(None);
        }
        self.touch_path(path)?;
        let page = self.store.dirty_mut(path.leaf());
        if extra > 0 && !edit::resize_inline_data(page, idx, size + extra) {
            return Ok(None);
        }
        Ok(Some(edit::inline_data_mut(page, idx)))
    }

    /// Overwrites an overflow value in its own run when the run is ours and big enough.
    fn rewrite_overflow_in_place(
        &mut self,
        leaf: u64,
        idx: usize,
        run: u64,
        key: &[u8],
        value: &[u8],
    ) -> Result<bool> {
        let ps = self.page_size();
        if !self.store.is_dirty(run) || NODE_HEADER_SIZE + key.len() + value.len() <= node_max(ps) {
            return Ok(false);
        }
        let have = read_u32(self.store.page(run)?, 12) as usize;
        if overflow_pages(ps, value.len()) > have {
            return Ok(false);
        }
        let buf = self.store.dirty_mut(run);
        buf[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + value.len()].copy_from_slice(value);
        // Same node footprint (an 8-byte pgno): replace the node to record the new size.
        let page = self.store.dirty_mut(leaf);
        edit::delete_node(page, idx);
        let ok = edit::insert_node(
            page,
            idx,
            key,
            NodeValue::Overflow {
                pgno: run,
                size: value.len(),
            },
        );
        assert!(ok, "same-size node fits where it was");
        Ok(true)
    }

    /// Fills `path` with the tree's rightmost edge and returns the slot after the last
    /// key, if `key` sorts after it; `None` if it does not (APPEND's KeyExist).
    fn append_slot(&self, key: &[u8], path: &mut Path) -> Result<Option<usize>> {
        let db = &*self.db;
        let (leaf, _, _) = descend(
            &*self.store,
            db,
            path,
            0,
            db.root,
            Descend::Last,
            cmp_lexicographic,
        )?;
        let n = leaf.num_keys();
        if n > 0 && self.cmp.compare(key, leaf.key(n - 1)?) != Ordering::Greater {
            return Ok(None);
        }
        path.idx[path.leaf_level()] = n as u16;
        Ok(Some(n))
    }

    /// Inserts `key`/`value` at slot `idx` of the (dirty, full) page at `level` of `path`
    /// by splitting it, and carries the new separator up, splitting parents as needed.
    pub(super) fn split_insert(
        &mut self,
        path: &Path,
        level: usize,
        idx: usize,
        key: &[u8],
        value: NodeValue<'_>,
        append: bool,
    ) -> Result<()> {
        // The node lists a split copies pages through, reused from split to split (a
        // split allocated a few buffers each time; write txns split often).
        with_node_scratch(|(pending, nodes, separator)| {
            self.split_insert_with(
                path, level, idx, key, value, append, pending, nodes, separator,
            )
        })
    }

    /// [`TreeMut::split_insert`] with its scratch lists.
    #[allow(clippy::too_many_arguments)]
    fn split_insert_with(
        &mut self,
        path: &Path,
        mut level: usize,
        mut idx: usize,
        key: &[u8],
        value: NodeValue<'_>,
        append: bool,
        pending: &mut Nodes,
        nodes: &mut Nodes,
        separator: &mut Vec<u8>,
    ) -> Result<()> {
        let capacity = self.page_size() - PAGE_HEADER_SIZE;
        // The new node in the stored form of the page it goes to (LEAF2 pages store keys only).
        let leaf = view(&*self.store, path.pgno[level])?;
        let (leaf_keys, leaf_flags) = (leaf.num_keys(), leaf.flags());
        pending.reset_like(&leaf);
        pending.push_value(key, value);
        loop {
            let pgno = path.pgno[level];
            separator.clear();
            let (right, branch) = if append
                && level == path.leaf_level()
                && idx == leaf_keys
                && leaf_flags & page_flags::LEAF2 == 0
            {
                // MDB_APPEND, as LMDB splits for it: the full leaf stays as it is, and
                // the new leaf holds the new node alone.
                let right = self.store.alloc(1)?;
                let buf = self.store.dirty_mut(right);
                edit::init(buf, right, leaf_flags);
                let ok = edit::insert_node(buf, 0, key, value);
                assert!(ok, "a node of at most node_max bytes fits an empty page");
                separator.extend_from_slice(key);
                (right, false)
            } else {
                let (flags, n) = {
                    let page = view(&*self.store, pgno)?;
                    nodes.refill(&page)?;
                    (page.flags(), page.num_keys())
                };
                let branch = flags & page_flags::BRANCH != 0;
                nodes.push_raw(pending.raw(0));
                nodes.move_last_to(idx);
                let sp = choose_split(nodes, branch, capacity, idx == n)?;
                separator.extend_from_slice(nodes.key(sp));
                if branch {
                    nodes.set_branch_key(sp, &[]);
                }
                let right = self.store.alloc(1)?;
                nodes.write_page(self.store.dirty_mut(pgno), pgno, flags, 0..sp);
                nodes.write_page(self.store.dirty_mut(right), right, flags, sp..nodes.len());
                (right, branch)
            };
            // Paired checks of the split: each half in order, the separator between them.
            debug_assert_ordered(&*self.store, pgno, self.cmp, None, Some(separator));
            debug_assert_ordered(&*self.store, right, self.cmp, Some(separator), None);
            if branch {
                self.db.branch_pages += 1;
            } else {
                self.db.leaf_pages += 1;
            }
            if level == 0 {
                let root = self.store.alloc(1)?;
                let buf = self.store.dirty_mut(root);
                edit::init(buf, root, page_flags::BRANCH);
                let ok = edit::insert_node(buf, 0, &[], NodeValue::Child(pgno))
                    && edit::insert_node(buf, 1, separator, NodeValue::Child(right));
                assert!(ok, "two nodes fit an empty branch page");
                self.db.root = root;
                self.db.depth += 1;
                self.db.branch_pages += 1;
                if self.db.depth as usize > MAX_DEPTH {
                    return Err(Error::CursorFull);
                }
                return Ok(());
            }
            let parent = path.pgno[level - 1];
            let pidx = path.idx[level - 1] as usize + 1;
            if edit::insert_node(
                self.store.dirty_mut(parent),
                pidx,
                separator,
                NodeValue::Child(right),
            ) {
                return Ok(());
            }
            level -= 1;
            idx = pidx;
            // The separator goes into the parent: a branch node (never LEAF2).
            pending.bytes.clear();
            pending.spans.clear();
            pending.fixed = 0;
            pending.push_value(separator, NodeValue::Child(right));
        }
    }
}
