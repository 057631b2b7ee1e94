//! The one descent from a root to a leaf, and the lookups built on it.

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::format::page::OverflowView;
use crate::format::page::{
    node_flags, overflow_pages, Node, PageView, PAGE_HEADER_SIZE, P_INVALID,
};
use crate::order::{cmp_lexicographic, with_order, KeyCmp};
use crate::store::PageSource;

use super::{view, Path, MAX_DEPTH};

/// The error for a page found at a level of the tree that needs another type of page
/// (`leaf_level`: whether a leaf was needed), or for an empty branch page.
#[cold]
#[inline(never)]
pub(super) fn misplaced(page: &PageView<'_>, leaf_level: bool) -> Error {
    if !leaf_level && page.is_branch() && page.num_keys() == 0 {
        Error::corrupted(page.pgno(), "empty branch page")
    } else {
        Error::corrupted(page.pgno(), "page type does not match its tree level")
    }
}

/// Index of the child of branch `page` that covers `key`.
#[inline]
fn branch_search(
    page: &PageView<'_>,
    cmp: impl Fn(&[u8], &[u8]) -> Ordering,
    key: &[u8],
) -> Result<usize> {
    let (mut lo, mut hi) = (1, page.num_keys());
    while lo < hi {
        let mid = usize::midpoint(lo, hi);
        if cmp(page.key(mid)?, key) == Ordering::Greater {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(lo - 1)
}

/// First slot of leaf `page` whose key is `>= key`, and whether it is equal.
#[inline]
pub fn leaf_search(
    page: &PageView<'_>,
    cmp: impl Fn(&[u8], &[u8]) -> Ordering,
    key: &[u8],
) -> Result<(usize, bool)> {
    let (mut lo, mut hi) = (0, page.num_keys());
    while lo < hi {
        let mid = usize::midpoint(lo, hi);
        match cmp(page.key(mid)?, key) {
            Ordering::Less => lo = mid + 1,
            Ordering::Equal => return Ok((mid, true)),
            Ordering::Greater => hi = mid,
        }
    }
    Ok((lo, false))
}

/// Where a descent goes at each page, as LMDB's `mdb_page_search_root` does with
/// `MDB_PS_FIRST`, `MDB_PS_LAST` or a key.
#[derive(Clone, Copy, Debug)]
pub enum Descend<'k> {
    /// The first child at every level, to slot 0 of the leftmost leaf.
    First,
    /// The last child at every level, to the last slot of the rightmost leaf (slot 0 of an
    /// empty root leaf).
    Last,
    /// The child that covers the key, to the first leaf slot whose key is `>= key`.
    Key(&'k [u8]),
}

/// What a descent records of its way down: the [`Path`], for callers that go on to change
/// the leaf or move from it, or nothing ([`NoTrail`]), for a point lookup.
pub trait Trail {
    /// The descent took slot `idx` of page `pgno` at `level`.
    fn step(&mut self, level: usize, pgno: u64, idx: usize);
    /// The descent reached the leaf level of a tree of `depth` levels.
    fn reached_leaf(&mut self, depth: usize);
}

impl Trail for Path {
    #[inline(always)]
    fn step(&mut self, level: usize, pgno: u64, idx: usize) {
        self.pgno[level] = pgno;
        self.idx[level] = idx as u16;
    }

    #[inline(always)]
    fn reached_leaf(&mut self, depth: usize) {
        self.depth = depth;
    }
}

/// A [`Trail`] that records nothing: a lookup that only reads the leaf.
pub struct NoTrail;

impl Trail for NoTrail {
    #[inline(always)]
    fn step(&mut self, _level: usize, _pgno: u64, _idx: usize) {}

    #[inline(always)]
    fn reached_leaf(&mut self, _depth: usize) {}
}

/// The tree's one descent: from page `pgno` at `level` (the root at level 0, or a child
/// of the page `trail` holds at `level - 1`) down to a leaf, recording each page and slot
/// in `trail` from `level` on. Every page is checked to be of the type its level needs,
/// and a branch to have children, so a damaged file cannot send the descent astray or
/// past [`MAX_DEPTH`].
///
/// Returns the leaf's view, the slot taken in it, and whether that slot holds `key`
/// (always false for the edges). `cmp` is the key order; [`Descend::First`] and
/// [`Descend::Last`] do not call it. Inlined into each caller: it is the hot path of every
/// lookup, and each caller fixes `target` and the order.
#[inline(always)]
pub fn descend<'s, S: PageSource + ?Sized>(
    src: &'s S,
    db: &DbRecord,
    trail: &mut impl Trail,
    mut level: usize,
    mut pgno: u64,
    target: Descend<'_>,
    cmp: impl Fn(&[u8], &[u8]) -> Ordering + Copy,
) -> Result<(PageView<'s>, usize, bool)> {
    let depth = db.depth as usize;
    if depth == 0 || depth > MAX_DEPTH {
        return Err(Error::corrupted(db.root, "tree depth out of range"));
    }
    debug_assert!(level < depth, "descent starts below the leaf level");
    loop {
        let page = view(src, pgno)?;
        let n = page.num_keys();
        if level + 1 == depth {
            if !page.is_leaf() {
                return Err(misplaced(&page, true));
            }
            let (idx, exact) = match target {
                Descend::First => (0, false),
                Descend::Last => (n.saturating_sub(1), false),
                Descend::Key(key) => leaf_search(&page, cmp, key)?,
            };
            trail.step(level, pgno, idx);
            trail.reached_leaf(depth);
            return Ok((page, idx, exact));
        }
        // A parsed page is a branch or a leaf: here it must be a branch with children.
        if page.is_leaf() || n == 0 {
            return Err(misplaced(&page, false));
        }
        let idx = match target {
            Descend::First => 0,
            Descend::Last => n - 1,
            Descend::Key(key) => branch_search(&page, cmp, key)?,
        };
        trail.step(level, pgno, idx);
        pgno = page.child(idx)?;
        level += 1;
    }
}

/// [`descend`] along the first (`last` false) or last children, from `pgno` at `level`.
/// Returns the number of items on the leaf it reached.
#[inline]
pub fn descend_edge<S: PageSource + ?Sized>(
    src: &S,
    db: &DbRecord,
    path: &mut Path,
    level: usize,
    pgno: u64,
    last: bool,
) -> Result<usize> {
    let target = if last { Descend::Last } else { Descend::First };
    // The edges compare no keys: any order does.
    let (leaf, _, _) = descend(src, db, path, level, pgno, target, cmp_lexicographic)?;
    Ok(leaf.num_keys())
}

/// Descends from the root to the leaf that covers `key`, filling `path`. Returns the leaf
/// slot (first key `>= key`) and whether it holds `key`. The tree must not be empty.
pub fn search<S: PageSource + ?Sized>(
    src: &S,
    db: &DbRecord,
    cmp: KeyCmp,
    key: &[u8],
    path: &mut Path,
) -> Result<(usize, bool)> {
    search_leaf(src, db, cmp, key, path).map(|(idx, exact, _)| (idx, exact))
}

/// [`search`], also returning the view of the leaf it reached (parsed once).
pub fn search_leaf<'s, S: PageSource + ?Sized>(
    src: &'s S,
    db: &DbRecord,
    cmp: KeyCmp,
    key: &[u8],
    path: &mut Path,
) -> Result<(usize, bool, PageView<'s>)> {
    let (leaf, idx, exact) = with_order!(cmp, |f| descend(
        src,
        db,
        path,
        0,
        db.root,
        Descend::Key(key),
        f
    ))?;
    Ok((idx, exact, leaf))
}

/// Descends an integer-keyed tree (the free DB) to the leaf that covers `key`, recording
/// no path: the leaf's view, the first slot whose key is `>= key`, and whether it holds
/// `key`. The tree must not be empty.
pub fn integer_key_leaf<'s, S: PageSource + ?Sized>(
    src: &'s S,
    db: &DbRecord,
    key: u64,
) -> Result<(PageView<'s>, usize, bool)> {
    let key = key.to_le_bytes();
    descend(
        src,
        db,
        &mut NoTrail,
        0,
        db.root,
        Descend::Key(&key),
        crate::order::cmp_integer,
    )
}

/// The DB's first leaf, reached along first children without comparing a key (slot 0
/// holds its first key, if it has any).
pub fn first_leaf<'s, S: PageSource + ?Sized>(src: &'s S, db: &DbRecord) -> Result<PageView<'s>> {
    // The edges compare no keys: any order does.
    let (leaf, _, _) = descend(
        src,
        db,
        &mut NoTrail,
        0,
        db.root,
        Descend::First,
        cmp_lexicographic,
    )?;
    Ok(leaf)
}

/// Reads the value of a leaf node, following an overflow run if it has one.
#[inline]
pub fn node_value<'s, S: PageSource + ?Sized>(src: &'s S, node: &Node<'s>) -> Result<&'s [u8]> {
    // The common case, inline: a value in the node.
    if node.flags & (node_flags::DUPDATA | node_flags::BIGDATA) == 0 {
        return Ok(node.data);
    }
    node_value_slow(src, node)
}

/// [`node_value`] for a value in an overflow run (or a node that should not be read so).
#[cold]
fn node_value_slow<'s, S: PageSource + ?Sized>(src: &'s S, node: &Node<'s>) -> Result<&'s [u8]> {
    if node.flags & node_flags::DUPDATA != 0 {
        // A set of values where a plain value belongs (a DB without DUPSORT).
        return Err(Error::corrupted(
            P_INVALID,
            "node holds duplicate values in a DB without DUPSORT",
        ));
    }
    let pgno = node.overflow_pgno();
    let size = node.data_size();
    OverflowView::parse(src.page(pgno)?, pgno)?.check_holds(src.page_size(), size)?;
    let run = overflow_pages(src.page_size(), size);
    let pages = src.pages(pgno, run)?;
    Ok(&pages[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + size])
}

/// Looks up `key`; returns its value.
pub fn get<'s, S: PageSource + ?Sized>(
    src: &'s S,
    db: &DbRecord,
    cmp: KeyCmp,
    key: &[u8],
) -> Result<Option<&'s [u8]>> {
    with_order!(cmp, |f| get_in(src, db, f, key))
}

fn get_in<'s, S: PageSource + ?Sized>(
    src: &'s S,
    db: &DbRecord,
    cmp: impl Fn(&[u8], &[u8]) -> Ordering + Copy,
    key: &[u8],
) -> Result<Option<&'s [u8]>> {
    if db.root == P_INVALID {
        return Ok(None);
    }
    let (leaf, idx, exact) = descend(src, db, &mut NoTrail, 0, db.root, Descend::Key(key), cmp)?;
    if !exact {
        return Ok(None);
    }
    node_value(src, &leaf.node(idx)?).map(Some)
}

/// Looks up `key` and returns its node's flags and stored data (not following overflow).
pub fn get_node<'s, S: PageSource + ?Sized>(
    src: &'s S,
    db: &DbRecord,
    cmp: KeyCmp,
    key: &[u8],
) -> Result<Option<(u16, &'s [u8])>> {
    if db.root == P_INVALID {
        return Ok(None);
    }
    let (leaf, idx, exact) = with_order!(cmp, |f| descend(
        src,
        db,
        &mut NoTrail,
        0,
        db.root,
        Descend::Key(key),
        f
    ))?;
    if !exact {
        return Ok(None);
    }
    let node = leaf.node(idx)?;
    Ok(Some((node.flags, node.data)))
}
