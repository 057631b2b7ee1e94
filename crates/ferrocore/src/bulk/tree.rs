//! One B+tree built bottom-up from nodes given in key order.
//!
//! Nodes go into the open leaf until the next one would pass the fill target; then the
//! leaf is written to a page of the txn, and its first key and page number become a node
//! of the open branch page one level up, which fills and closes the same way. Every level
//! holds one open page at a time, so memory stays at a page per level whatever the size
//! of the tree; there is no search and no split. `finish` closes the open pages from the
//! leaves up and sets the root.
//!
//! Branch pages need two nodes (FORMAT.md §5). Only the last page of a level can end with
//! one; `finish` then gives it to the page before it (merge), or takes that page's last
//! node (when the two do not fit one page). A top level with a single node is no level at
//! all: its child is the root.

use crate::btree::MAX_DEPTH;
use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::format::page::{
    edit, node_flags, node_max, overflow_pages, page_flags, NodeValue, PageView, NODE_HEADER_SIZE,
    PAGE_HEADER_SIZE,
};
use crate::store::{DirtyPages, PageSource, PageStore};

/// The page being filled at one level.
struct OpenPage {
    /// The page's bytes, handed to a page of the txn when it closes.
    buf: Box<[u8]>,
    /// Nodes on it; 0 when no page is open at this level.
    nodes: usize,
    /// The smallest key below it: its separator in the level above.
    first_key: Vec<u8>,
    /// The page this level closed last (`finish` may rebalance with it).
    prev: Option<u64>,
}

impl OpenPage {
    fn new(page_size: usize) -> OpenPage {
        OpenPage {
            buf: vec![0; page_size].into_boxed_slice(),
            nodes: 0,
            first_key: Vec::new(),
            prev: None,
        }
    }
}

/// Builds one tree (a DB, or a DUPSORT key's sub-DB) from nodes in key order.
pub(crate) struct TreeBuilder {
    page_size: usize,
    /// Bytes (of the `page_size - 16` a page has for slots and nodes) a page is filled to
    /// before the next one starts; a page always takes the nodes the format requires.
    fill_bytes: usize,
    /// LEAF2 leaves (a DUPFIXED sub-DB): the size of every key; else 0.
    fixed: usize,
    /// The largest node a page keeps; bigger values go to overflow runs.
    node_max: usize,
    leaf: OpenPage,
    /// Open branch pages; `branches[0]` is the level right above the leaves.
    branches: Vec<OpenPage>,
    /// The record built so far: flags and pad as given, counts as the tree grows.
    record: DbRecord,
}

impl TreeBuilder {
    /// A builder for a tree with `template`'s flags and pad, pages of `page_size` bytes
    /// filled to `fill_percent` (1..=100) of their room, LEAF2 leaves of `fixed`-byte keys
    /// if `fixed` is not 0.
    pub(crate) fn new(
        page_size: usize,
        fill_percent: u8,
        fixed: usize,
        template: DbRecord,
    ) -> TreeBuilder {
        let room = page_size - PAGE_HEADER_SIZE;
        let percent = usize::from(fill_percent.clamp(1, 100));
        let mut record = DbRecord::empty(template.flags);
        record.pad = template.pad;
        TreeBuilder {
            page_size,
            fill_bytes: room * percent / 100,
            fixed,
            node_max: node_max(page_size),
            leaf: OpenPage::new(page_size),
            branches: Vec::new(),
            record,
        }
    }

    /// True if `footprint` more bytes (slot included) go on `page` under the fill target,
    /// or fit at all while the page has fewer than `min_nodes` nodes.
    fn has_room(&self, page: &OpenPage, footprint: usize, min_nodes: usize) -> bool {
        let free = edit::free_space(&page.buf);
        if footprint > free {
            return false;
        }
        let used = self.page_size - PAGE_HEADER_SIZE - free;
        used + footprint <= self.fill_bytes || page.nodes < min_nodes
    }

    /// Adds a leaf node after every node added so far. `flags` 0 with a value too big for
    /// a node puts the value in an overflow run; other flags (a sub-page or a sub-DB
    /// record) always fit a node.
    pub(crate) fn push(
        &mut self,
        store: &mut DirtyPages<'_>,
        key: &[u8],
        flags: u16,
        data: &[u8],
    ) -> Result<()> {
        let value = if flags == 0 && NODE_HEADER_SIZE + key.len() + data.len() > self.node_max {
            self.write_overflow(store, data)?
        } else {
            NodeValue::Inline { flags, data }
        };
        let footprint = if self.fixed != 0 {
            self.fixed
        } else {
            2 + value.footprint(key.len())
        };
        if self.leaf.nodes > 0 && !self.has_room(&self.leaf, footprint, 1) {
            self.close_leaf(store)?;
        }
        let leaf = &mut self.leaf;
        if leaf.nodes == 0 {
            if self.fixed != 0 {
                edit::init_leaf2(
                    &mut leaf.buf,
                    0,
                    page_flags::LEAF | page_flags::LEAF2,
                    self.fixed,
                );
            } else {
                edit::init(&mut leaf.buf, 0, page_flags::LEAF);
            }
            leaf.first_key.clear();
            leaf.first_key.extend_from_slice(key);
        }
        let ok = edit::insert_node(&mut leaf.buf, leaf.nodes, key, value);
        debug_assert!(ok, "an empty leaf takes any node of at most node_max bytes");
        if !ok {
            return Err(Error::PageFull);
        }
        leaf.nodes += 1;
        self.record.entries += 1;
        Ok(())
    }

    /// Removes the node added last (it is on the open leaf: every node goes there), and
    /// frees its overflow run if it has one; for a repeated key whose last value wins.
    pub(crate) fn pop_last(&mut self, store: &mut DirtyPages<'_>) -> Result<()> {
        let n = self.leaf.nodes;
        if n == 0 {
            return Err(Error::InvalidArgument("no node to replace"));
        }
        let run = {
            let page = PageView::parse(&self.leaf.buf, 0)?;
            let node = page.node(n - 1)?;
            (node.flags & node_flags::BIGDATA != 0).then(|| {
                (
                    node.overflow_pgno(),
                    overflow_pages(self.page_size, node.data_size()),
                )
            })
        };
        if let Some((pgno, count)) = run {
            store.free(pgno, count)?;
            self.record.overflow_pages -= count as u64;
        }
        edit::delete_node(&mut self.leaf.buf, n - 1);
        self.leaf.nodes -= 1;
        self.record.entries -= 1;
        Ok(())
    }

    /// Writes `value` to a new overflow run.
    fn write_overflow<'v>(
        &mut self,
        store: &mut DirtyPages<'_>,
        value: &'v [u8],
    ) -> Result<NodeValue<'v>> {
        let count = overflow_pages(self.page_size, value.len());
        let pgno = store.alloc(count)?;
        let run = store.dirty_mut(pgno);
        edit::init_overflow(run, pgno, count as u32);
        run[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + value.len()].copy_from_slice(value);
        self.record.overflow_pages += count as u64;
        // Finished: it may go to the file now (a repeated key's replacement frees it).
        store.write_early(pgno)?;
        Ok(NodeValue::Overflow {
            pgno,
            size: value.len(),
        })
    }

    /// Makes the open leaf a page of the txn and adds it to the level above.
    fn close_leaf(&mut self, store: &mut DirtyPages<'_>) -> Result<()> {
        let pgno = write_page(store, &mut self.leaf)?;
        // A closed leaf never changes again (branch pages may: `finish` evens out the
        // last two of a level), so it may go to the file now.
        store.write_early(pgno)?;
        self.record.leaf_pages += 1;
        let first = std::mem::take(&mut self.leaf.first_key);
        let r = self.push_branch(store, 0, &first, pgno);
        self.leaf.first_key = first;
        r
    }

    /// Adds a node for `child`, whose smallest key is `key`, to the open page of branch
    /// level `level` (creating the level), closing that page first if it is full.
    fn push_branch(
        &mut self,
        store: &mut DirtyPages<'_>,
        level: usize,
        key: &[u8],
        child: u64,
    ) -> Result<()> {
        if level == self.branches.len() {
            // Leaves, then `level + 1` branch levels.
            if level + 2 > MAX_DEPTH {
                return Err(Error::CursorFull);
            }
            self.branches.push(OpenPage::new(self.page_size));
        }
        let footprint = 2 + NodeValue::Child(child).footprint(key.len());
        let page = &self.branches[level];
        if page.nodes > 0 && !self.has_room(page, footprint, 2) {
            let pgno = write_page(store, &mut self.branches[level])?;
            self.record.branch_pages += 1;
            let first = std::mem::take(&mut self.branches[level].first_key);
            self.push_branch(store, level + 1, &first, pgno)?;
            self.branches[level].first_key = first;
        }
        let page = &mut self.branches[level];
        let stored_key = if page.nodes == 0 {
            edit::init(&mut page.buf, 0, page_flags::BRANCH);
            page.first_key.clear();
            page.first_key.extend_from_slice(key);
            // Node 0 of a branch has no key: it covers everything below node 1's.
            &[][..]
        } else {
            key
        };
        let ok = edit::insert_node(
            &mut page.buf,
            page.nodes,
            stored_key,
            NodeValue::Child(child),
        );
        debug_assert!(ok, "has_room checked the node fits");
        if !ok {
            return Err(Error::PageFull);
        }
        page.nodes += 1;
        Ok(())
    }

    /// Closes every open page from the leaves up and returns the tree's record.
    pub(crate) fn finish(mut self, store: &mut DirtyPages<'_>) -> Result<DbRecord> {
        if self.leaf.nodes == 0 {
            debug_assert!(self.branches.is_empty(), "a closed leaf leaves an open one");
            return Ok(self.record);
        }
        let leaf = write_page(store, &mut self.leaf)?;
        store.write_early(leaf)?;
        self.record.leaf_pages += 1;
        if self.branches.is_empty() {
            return Ok(self.rooted(leaf, 1));
        }
        let first = std::mem::take(&mut self.leaf.first_key);
        self.push_branch(store, 0, &first, leaf)?;
        let mut level = 0;
        loop {
            let top = level + 1 == self.branches.len();
            if self.branches[level].nodes == 1 {
                match self.branches[level].prev {
                    // The only page of the top level, with one child: that child is the root.
                    None => {
                        debug_assert!(top, "a level below the top has closed a page");
                        let page = PageView::parse(&self.branches[level].buf, 0)?;
                        let child = page.child(0)?;
                        return Ok(self.rooted(child, level + 1));
                    }
                    Some(prev) => {
                        if merge_into(store, &self.branches[level], prev)? {
                            // The level above holds `prev` already; this page is gone.
                            level += 1;
                            continue;
                        }
                        take_last_of(store, &mut self.branches[level], prev)?;
                    }
                }
            }
            let pgno = write_page(store, &mut self.branches[level])?;
            self.record.branch_pages += 1;
            if top {
                return Ok(self.rooted(pgno, level + 2));
            }
            let first = std::mem::take(&mut self.branches[level].first_key);
            self.push_branch(store, level + 1, &first, pgno)?;
            level += 1;
        }
    }

    fn rooted(mut self, root: u64, depth: usize) -> DbRecord {
        self.record.root = root;
        self.record.depth = depth as u16;
        self.record
    }
}

/// Makes `page` a newly allocated page of the txn and returns its number; the level has
/// no open page after it.
fn write_page(store: &mut DirtyPages<'_>, page: &mut OpenPage) -> Result<u64> {
    let pgno = store.alloc(1)?;
    edit::set_pgno(&mut page.buf, pgno);
    // The built page becomes the txn's page; its fresh buffer is the next one to build in.
    store.swap_page(pgno, &mut page.buf);
    page.nodes = 0;
    page.prev = Some(pgno);
    Ok(pgno)
}

/// Moves the single node of the open branch page `page` to the end of the page `prev`
/// written before it, if it fits there. Returns false (changing nothing) if not.
fn merge_into(store: &mut DirtyPages<'_>, page: &OpenPage, prev: u64) -> Result<bool> {
    let child = PageView::parse(&page.buf, 0)?.child(0)?;
    let prev_page = store.dirty_mut(prev);
    let n = edit::num_keys(prev_page);
    Ok(edit::insert_node(
        prev_page,
        n,
        &page.first_key,
        NodeValue::Child(child),
    ))
}

/// Moves the last node of page `prev` to the front of the open branch page `page`, which
/// has one node: both then have at least two.
fn take_last_of(store: &mut DirtyPages<'_>, page: &mut OpenPage, prev: u64) -> Result<()> {
    let (key, moved) = {
        let view = PageView::parse(store.page(prev)?, prev)?;
        let n = view.num_keys();
        if n < 3 {
            // Three branch nodes always fit a page (keys are at most a quarter of it), so a
            // page that took no fourth has at least three.
            return Err(Error::PageFull);
        }
        (view.key(n - 1)?.to_vec(), view.child(n - 1)?)
    };
    let prev_page = store.dirty_mut(prev);
    let n = edit::num_keys(prev_page);
    edit::delete_node(prev_page, n - 1);
    let child = PageView::parse(&page.buf, 0)?.child(0)?;
    edit::init(&mut page.buf, 0, page_flags::BRANCH);
    let ok = edit::insert_node(&mut page.buf, 0, &[], NodeValue::Child(moved))
        && edit::insert_node(&mut page.buf, 1, &page.first_key, NodeValue::Child(child));
    if !ok {
        return Err(Error::PageFull);
    }
    page.nodes = 2;
    page.first_key = key;
    Ok(())
}
