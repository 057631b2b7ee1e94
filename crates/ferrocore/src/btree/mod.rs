//! Copy-on-write B+tree: search, insert with splits, delete with rebalancing, overflow values.
//!
//! The tree code sees pages only through `store::PageSource`/`PageStore`; it never knows
//! whether a page lives in the map or in a dirty buffer. Before changing anything it
//! "touches" the path from the root to the leaf, so every page it writes was allocated by
//! the current transaction (invariant 1 of DESIGN.md: reachable pages are never written in
//! place).
//!
//! Separator keys follow LMDB: node 0 of a branch page has an empty key and stands for
//! "everything below node 1's key"; child `i` holds keys `k` with `key_i <= k < key_{i+1}`.
//! A separator may be smaller than every key left in its subtree after deletes.
//!
//! Files: `search` (the one descent from the root, point lookups), `position` (a cursor's
//! place in a tree and its moves), `put` (insert, splits, overflow values), `delete`
//! (removal and rebalancing), `free` (freeing a whole tree), `nodes` (the node lists
//! splits and merges rebuild pages from).

mod delete;
mod free;
mod nodes;
mod position;
mod put;
mod search;
#[cfg(test)]
mod tests;

pub use free::free_tree;
pub use position::{NextLeaf, Position, State};
pub use put::{LeafFacts, PutMode, TreeMut};
pub use search::{
    first_leaf, get, get_node, integer_key_leaf, leaf_search, node_value, search, search_leaf,
};

use crate::error::Result;
use crate::format::page::{PageView, P_INVALID};
use crate::store::PageSource;

/// Maximum tree depth: a deeper tree is treated as corrupted (it would need more pages than
/// any map can hold), so descent is bounded even on a hostile file.
pub const MAX_DEPTH: usize = 32;

/// Below this fill (per-mille) a page touched by a delete is rebalanced (LMDB's value).
pub const FILL_THRESHOLD: usize = 250;

/// The pages from the root to a leaf, and the slot taken at each level.
#[derive(Clone, Debug)]
pub struct Path {
    /// Number of levels filled in (the tree depth once a search completes).
    pub depth: usize,
    /// Page number at each level, root first.
    pub pgno: [u64; MAX_DEPTH],
    /// Slot index at each level.
    pub idx: [u16; MAX_DEPTH],
}

impl Default for Path {
    fn default() -> Self {
        Path {
            depth: 0,
            pgno: [P_INVALID; MAX_DEPTH],
            idx: [0; MAX_DEPTH],
        }
    }
}

impl Path {
    /// Index of the leaf level.
    #[inline]
    pub fn leaf_level(&self) -> usize {
        self.depth - 1
    }

    /// Leaf page number.
    #[inline]
    pub fn leaf(&self) -> u64 {
        self.pgno[self.depth - 1]
    }

    /// Slot in the leaf.
    #[inline]
    pub fn leaf_idx(&self) -> usize {
        self.idx[self.depth - 1] as usize
    }
}

/// Parses page `pgno` as a branch or leaf page.
#[inline]
pub fn view<S: PageSource + ?Sized>(src: &S, pgno: u64) -> Result<PageView<'_>> {
    PageView::parse(src.page(pgno)?, pgno)
}

/// Debug builds: the keys of the page at `pgno`, which the tree has just written, are in
/// strictly increasing `cmp` order (slot 0 of a branch, the empty key that stands for
/// "everything below", excepted), none below `low` and all below `high`. Release builds
/// skip it: every split and merge would pay a walk of the page.
pub(crate) fn debug_assert_ordered<S: PageSource + ?Sized>(
    src: &S,
    pgno: u64,
    cmp: crate::order::KeyCmp,
    low: Option<&[u8]>,
    high: Option<&[u8]>,
) {
    use std::cmp::Ordering::Less;
    if !cfg!(debug_assertions) {
        return;
    }
    let page = view(src, pgno).expect("a page the tree just wrote parses");
    let first = usize::from(page.is_branch());
    let mut prev: Option<&[u8]> = None;
    for i in first..page.num_keys() {
        let key = page.key(i).expect("a key of a page the tree just wrote");
        if let Some(prev) = prev {
            assert_eq!(
                cmp.compare(prev, key),
                Less,
                "page {pgno}: key {i} out of order"
            );
        }
        if let Some(low) = low {
            assert_ne!(
                cmp.compare(key, low),
                Less,
                "page {pgno}: key {i} below its bound"
            );
        }
        if let Some(high) = high {
            assert_eq!(
                cmp.compare(key, high),
                Less,
                "page {pgno}: key {i} not below its bound"
            );
        }
        prev = Some(key);
    }
}
