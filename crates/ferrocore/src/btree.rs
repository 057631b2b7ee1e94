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

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::meta::DbRecord;
use crate::page::{
    edit, even, node_flags, node_max, overflow_pages, page_flags, read_u16, read_u32, read_u64,
    Node, NodeValue, PageView, NODE_HEADER_SIZE, PAGE_HEADER_SIZE, P_INVALID,
};
use crate::store::{PageSource, PageStore};

/// Maximum tree depth: a deeper tree is treated as corrupted (it would need more pages than
/// any map can hold), so descent is bounded even on a hostile file.
pub const MAX_DEPTH: usize = 32;

/// Below this fill (per-mille) a page touched by a delete is rebalanced (LMDB's value).
pub const FILL_THRESHOLD: usize = 250;

/// The key order of a database, chosen once when the database is opened (seed 003: the
/// comparison is the hottest function). The built-in orders are variants rather than
/// function pointers, so search loops are compiled once per order with the comparison
/// inlined; only application comparators are called through a pointer.
#[derive(Clone, Copy, Debug)]
pub enum KeyCmp {
    /// Bytes compared lexicographically (memcmp, shorter prefix first): LMDB's default.
    Lexicographic,
    /// Bytes compared from the last one backwards (MDB_REVERSEKEY).
    Reverse,
    /// Native unsigned integers, 4 or 8 bytes (MDB_INTEGERKEY; the free DB's txn ids).
    Integer,
    /// An application-supplied comparator.
    Custom(fn(&[u8], &[u8]) -> Ordering),
    /// An application comparator called with a context word: the C ABI passes the C
    /// function pointer it wraps.
    WithContext(fn(usize, &[u8], &[u8]) -> Ordering, usize),
}

impl KeyCmp {
    /// Compares two keys in this order.
    #[inline]
    pub fn compare(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            KeyCmp::Lexicographic => cmp_lexicographic(a, b),
            KeyCmp::Reverse => cmp_reverse(a, b),
            KeyCmp::Integer => cmp_integer(a, b),
            KeyCmp::Custom(f) => f(a, b),
            KeyCmp::WithContext(f, ctx) => f(ctx, a, b),
        }
    }
}

/// Calls `$body` with `$f` bound to the comparison function of `$cmp`, as a distinct
/// function item per built-in order so that generic code inlines it.
macro_rules! with_order {
    ($cmp:expr, |$f:ident| $body:expr) => {
        match $cmp {
            KeyCmp::Lexicographic => {
                let $f = cmp_lexicographic;
                $body
            }
            KeyCmp::Reverse => {
                let $f = cmp_reverse;
                $body
            }
            KeyCmp::Integer => {
                let $f = cmp_integer;
                $body
            }
            KeyCmp::Custom(custom) => {
                let $f = custom;
                $body
            }
            KeyCmp::WithContext(call, ctx) => {
                let $f = move |a: &[u8], b: &[u8]| call(ctx, a, b);
                $body
            }
        }
    };
}

/// Lexicographic byte order, the default.
#[inline(always)]
pub fn cmp_lexicographic(a: &[u8], b: &[u8]) -> Ordering {
    a.cmp(b)
}

/// Byte order read from the end (REVERSEKEY): a proper suffix sorts first.
#[inline]
pub fn cmp_reverse(a: &[u8], b: &[u8]) -> Ordering {
    a.iter().rev().cmp(b.iter().rev())
}

/// Native (little-endian) unsigned integers of 4 or 8 bytes; other lengths by bytes.
#[inline]
pub fn cmp_integer(a: &[u8], b: &[u8]) -> Ordering {
    match (a.len(), b.len()) {
        (8, 8) => read_u64(a, 0).cmp(&read_u64(b, 0)),
        (4, 4) => read_u32(a, 0).cmp(&read_u32(b, 0)),
        _ => a.cmp(b),
    }
}

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

/// Checks that a page found at `level` of a tree of `depth` levels has the right type.
#[inline]
fn check_level(page: &PageView<'_>, level: usize, depth: usize) -> Result<()> {
    let want_leaf = level + 1 == depth;
    if page.is_leaf() != want_leaf {
        return Err(Error::corrupted(
            page.pgno(),
            "page type does not match its tree level",
        ));
    }
    if page.num_keys() == 0 && (!want_leaf || level != 0) && page.is_branch() {
        return Err(Error::corrupted(page.pgno(), "empty branch page"));
    }
    Ok(())
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
        let mid = (lo + hi) / 2;
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
        let mid = (lo + hi) / 2;
        match cmp(page.key(mid)?, key) {
            Ordering::Less => lo = mid + 1,
            Ordering::Equal => return Ok((mid, true)),
            Ordering::Greater => hi = mid,
        }
    }
    Ok((lo, false))
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
    with_order!(cmp, |f| search_in(src, db, f, key, path))
}

fn search_in<'s, S: PageSource + ?Sized>(
    src: &'s S,
    db: &DbRecord,
    cmp: impl Fn(&[u8], &[u8]) -> Ordering + Copy,
    key: &[u8],
    path: &mut Path,
) -> Result<(usize, bool, PageView<'s>)> {
    let depth = db.depth as usize;
    if depth == 0 || depth > MAX_DEPTH {
        return Err(Error::corrupted(db.root, "tree depth out of range"));
    }
    let mut pgno = db.root;
    for level in 0..depth {
        let page = view(src, pgno)?;
        check_level(&page, level, depth)?;
        path.pgno[level] = pgno;
        if page.is_leaf() {
            let (idx, exact) = leaf_search(&page, cmp, key)?;
            path.idx[level] = idx as u16;
            path.depth = depth;
            return Ok((idx, exact, page));
        }
        let idx = branch_search(&page, cmp, key)?;
        path.idx[level] = idx as u16;
        pgno = page.child(idx)?;
    }
    unreachable!("the leaf level returns")
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
    let run = overflow_pages(src.page_size(), size);
    let first = src.page(pgno)?;
    if first[10..12] != page_flags::OVERFLOW.to_le_bytes() || read_u64(first, 0) != pgno {
        return Err(Error::corrupted(
            pgno,
            "overflow value points at a page that is not an overflow page",
        ));
    }
    if (read_u32(first, 12) as usize) < run {
        return Err(Error::corrupted(
            pgno,
            "overflow run shorter than its value",
        ));
    }
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
    let depth = db.depth as usize;
    if depth == 0 || depth > MAX_DEPTH {
        return Err(Error::corrupted(db.root, "tree depth out of range"));
    }
    let mut pgno = db.root;
    for level in 0..depth {
        let page = view(src, pgno)?;
        check_level(&page, level, depth)?;
        if page.is_leaf() {
            let (idx, exact) = leaf_search(&page, cmp, key)?;
            if !exact {
                return Ok(None);
            }
            let node = page.node(idx)?;
            return node_value(src, &node).map(Some);
        }
        pgno = page.child(branch_search(&page, cmp, key)?)?;
    }
    unreachable!("the leaf level returns")
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
    let mut path = Path::default();
    let (idx, exact) = search(src, db, cmp, key, &mut path)?;
    if !exact {
        return Ok(None);
    }
    let node = view(src, path.leaf())?.node(idx)?;
    Ok(Some((node.flags, node.data)))
}

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
fn check_node_kind(existing: u16, wanted: u16) -> Result<()> {
    const KIND: u16 = node_flags::SUBDATA | node_flags::DUPDATA;
    if existing & KIND != wanted & KIND {
        return Err(Error::Incompatible);
    }
    Ok(())
}

thread_local! {
    /// A split's scratch: the new node, the page's nodes, and the separator key.
    static SPLIT_SCRATCH: std::cell::RefCell<(Nodes, Nodes, Vec<u8>)> = Default::default();
}

/// Nodes copied out of pages in their stored form (header, key, data), packed in one
/// buffer: what splits and merges rebuild pages from, without an allocation per node.
#[derive(Default)]
struct Nodes {
    bytes: Vec<u8>,
    /// (start, length) of each node in `bytes`, in slot order.
    spans: Vec<(usize, usize)>,
    /// Nodes of a LEAF2 page: each "node" is just its key, of this size; else 0.
    fixed: usize,
}

impl Nodes {
    /// An empty list for nodes of pages like `page` (LEAF2 or not).
    fn like(page: &PageView<'_>) -> Nodes {
        Nodes {
            fixed: page.fixed_size(),
            ..Nodes::default()
        }
    }

    fn from_page(page: &PageView<'_>) -> Result<Nodes> {
        let mut nodes = Nodes::default();
        nodes.refill(page)?;
        Ok(nodes)
    }

    /// Empties the list for nodes of pages like `page`, keeping its allocations.
    fn reset_like(&mut self, page: &PageView<'_>) {
        self.bytes.clear();
        self.spans.clear();
        self.fixed = page.fixed_size();
    }

    /// Replaces the list with `page`'s nodes, keeping its allocations.
    fn refill(&mut self, page: &PageView<'_>) -> Result<()> {
        self.reset_like(page);
        self.bytes.reserve(page.bytes().len());
        self.spans.reserve(page.num_keys() + 1);
        for i in 0..page.num_keys() {
            self.push_raw(page.node_raw(i)?);
        }
        Ok(())
    }

    fn len(&self) -> usize {
        self.spans.len()
    }

    fn raw(&self, i: usize) -> &[u8] {
        let (start, len) = self.spans[i];
        &self.bytes[start..start + len]
    }

    fn key(&self, i: usize) -> &[u8] {
        let raw = self.raw(i);
        if self.fixed != 0 {
            return raw;
        }
        let ksize = read_u16(raw, 6) as usize;
        &raw[NODE_HEADER_SIZE..NODE_HEADER_SIZE + ksize]
    }

    /// Bytes node `i` takes in a page, slot included.
    fn size(&self, i: usize) -> usize {
        if self.fixed != 0 {
            return self.fixed;
        }
        2 + even(self.spans[i].1)
    }

    fn push_raw(&mut self, raw: &[u8]) {
        self.spans.push((self.bytes.len(), raw.len()));
        self.bytes.extend_from_slice(raw);
    }

    /// Appends a node built from a key and value, encoded as `insert_node` writes it.
    fn push_value(&mut self, key: &[u8], value: NodeValue<'_>) {
        if self.fixed != 0 {
            self.push_raw(key);
            return;
        }
        let start = self.bytes.len();
        self.bytes.extend_from_slice(&value.header(key.len()));
        self.bytes.extend_from_slice(key);
        match value {
            NodeValue::Child(_) => {}
            NodeValue::Inline { data, .. } => self.bytes.extend_from_slice(data),
            NodeValue::Overflow { pgno, .. } => self.bytes.extend_from_slice(&pgno.to_le_bytes()),
        }
        self.spans.push((start, self.bytes.len() - start));
    }

    /// Moves the last node to position `idx`.
    fn move_last_to(&mut self, idx: usize) {
        let span = self.spans.pop().expect("a node to move");
        self.spans.insert(idx, span);
    }

    /// Replaces node `i`'s key (branch nodes only: the data field is empty).
    fn set_branch_key(&mut self, i: usize, key: &[u8]) {
        let mut raw = self.raw(i)[..NODE_HEADER_SIZE].to_vec();
        crate::page::write_u16(&mut raw, 6, key.len() as u16);
        raw.extend_from_slice(key);
        let start = self.bytes.len();
        self.bytes.extend_from_slice(&raw);
        self.spans[i] = (start, raw.len());
    }

    /// Writes nodes `range` into `page` as a fresh page.
    fn write_page(&self, page: &mut [u8], pgno: u64, flags: u16, range: std::ops::Range<usize>) {
        if self.fixed != 0 {
            edit::init_leaf2(page, pgno, flags, self.fixed);
        } else {
            edit::init(page, pgno, flags);
        }
        for i in range {
            let ok = edit::append_raw(page, self.raw(i));
            assert!(ok, "rebuilt page {pgno} overflowed");
        }
    }
}

/// Chooses where to split `nodes` into two pages of `capacity` bytes each.
///
/// `at_end`: the new node is the last one. Then, as LMDB biases it, the left page keeps
/// as much as fits and the new page starts with the old last node and the new one, so
/// sequential inserts (and the branch pages above them) fill their pages instead of
/// leaving them half full.
fn choose_split(nodes: &Nodes, branch: bool, capacity: usize, at_end: bool) -> Result<usize> {
    let n = nodes.len();
    debug_assert!(n >= 2);
    let total: usize = (0..n).map(|i| nodes.size(i)).sum();
    // Bytes of the right page if it starts at node `sp`, given the left's `prefix`.
    let right_of = |sp: usize, prefix: usize| {
        let right = total - prefix;
        if branch {
            // The right page's first node loses its key (it moves up as the separator).
            right - nodes.size(sp) + 2 + even(NODE_HEADER_SIZE)
        } else {
            right
        }
    };
    if at_end && n >= 3 {
        // The new page takes at least the old last node and the new one, as in LMDB: a
        // non-root branch page always keeps two children.
        let mut prefix = total - nodes.size(n - 1);
        for sp in (1..n - 1).rev() {
            prefix -= nodes.size(sp);
            if prefix <= capacity && right_of(sp, prefix) <= capacity {
                return Ok(sp);
            }
        }
    }
    let mut prefix = 0;
    let mut best: Option<(usize, usize)> = None;
    for sp in 1..n {
        prefix += nodes.size(sp - 1);
        let right = right_of(sp, prefix);
        if prefix > capacity || right > capacity {
            continue;
        }
        let worst = prefix.max(right);
        if best.is_none_or(|(_, w)| worst < w) {
            best = Some((sp, worst));
        }
    }
    best.map(|(sp, _)| sp).ok_or(Error::PageFull)
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
    fn page_size(&self) -> usize {
        self.store.page_size()
    }

    /// Makes the pages on the way to `key` writable now (copy-on-write), so that a later
    /// put of `key` allocates nothing unless it splits. Nothing to do in an empty tree.
    pub fn touch_to(&mut self, key: &[u8]) -> Result<()> {
        if self.db.root == P_INVALID {
            return Ok(());
        }
        let mut path = Path::default();
        search(&*self.store, self.db, self.cmp, key, &mut path)?;
        self.touch_path(&mut path)
    }

    /// Makes every page on `path` writable, re-pointing parents at the copies.
    fn touch_path(&mut self, path: &mut Path) -> Result<()> {
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
    fn free_overflow(&mut self, pgno: u64) -> Result<()> {
        let first = self.store.page(pgno)?;
        if first[10..12] != page_flags::OVERFLOW.to_le_bytes() {
            return Err(Error::corrupted(
                pgno,
                "freeing an overflow run that is not one",
            ));
        }
        let count = read_u32(first, 12) as usize;
        // A forged count must not free pages past the file (or billions of them).
        if count == 0 || self.store.pages(pgno, count).is_err() {
            return Err(Error::corrupted(pgno, "overflow run length out of range"));
        }
        self.store.free(pgno, count)?;
        self.db.overflow_pages = self.db.overflow_pages.saturating_sub(count as u64);
        Ok(())
    }

    /// Writes `value` into a new overflow run if it is too big for a node.
    fn store_value<'v>(
        &mut self,
        key: &[u8],
        value: &'v [u8],
        flags: u16,
    ) -> Result<NodeValue<'v>> {
        let ps = self.page_size();
        if NODE_HEADER_SIZE + key.len() + value.len() <= node_max(ps) {
            return Ok(NodeValue::Inline { flags, data: value });
        }
        debug_assert_eq!(flags, 0, "only plain values go to overflow pages");
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
        if self.db.root == P_INVALID {
            let pgno = self.store.alloc(1)?;
            let leaf2 = self.db.flags & (crate::db_flags::DUP_FIXED | crate::db_flags::DUP_SORT)
                == crate::db_flags::DUP_FIXED;
            if leaf2 {
                // The sub-DB of a DUPFIXED DB (flags DUPFIXED without DUPSORT): its leaves are
                // LEAF2, keys of `pad` bytes.
                if key.len() != self.db.pad as usize || !value.is_empty() {
                    return Err(Error::BadValSize {
                        what: "DUPFIXED value",
                        size: key.len(),
                        max: self.db.pad as usize,
                    });
                }
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
            return Ok(());
        }
        let mut path = Path::default();
        let (idx, exact) = if mode.append {
            // As LMDB's MDB_APPEND: down the rightmost edge, one comparison with the last
            // key, and the new key goes after it (or KeyExist).
            match self.append_slot(key, &mut path)? {
                Some(idx) => (idx, false),
                None => return Err(Error::KeyExist),
            }
        } else {
            search(&*self.store, self.db, self.cmp, key, &mut path)?
        };
        self.put_at(&mut path, idx, exact, key, value, mode)?;
        Ok(())
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
        debug_assert!(path.depth > 0 && path.depth as u16 == self.db.depth);
        let leaf = view(&*self.store, path.leaf())?;
        if exact {
            let flags = leaf.node(idx)?.flags;
            if !mode.any_kind {
                check_node_kind(flags, mode.node_flags)?;
            }
            if mode.no_overwrite {
                return Err(Error::KeyExist);
            }
        }
        let fixed = leaf.fixed_size();
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
        if exact {
            let (flags, size, stored) = {
                let page = view(&*self.store, leaf)?;
                let node = page.node(idx)?;
                (
                    node.flags,
                    node.data_size(),
                    if node.flags & node_flags::BIGDATA != 0 {
                        node.overflow_pgno()
                    } else {
                        0
                    },
                )
            };
            if flags & node_flags::BIGDATA != 0 {
                if self.rewrite_overflow_in_place(leaf, idx, stored, key, value)? {
                    return Ok(true);
                }
                self.free_overflow(stored)?;
            } else if size == value.len()
                && flags == mode.node_flags
                && NODE_HEADER_SIZE + key.len() + value.len() <= node_max(self.page_size())
            {
                edit::overwrite_inline_data(self.store.dirty_mut(leaf), idx, value);
                return Ok(true);
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
        let depth = self.db.depth as usize;
        if depth == 0 || depth > MAX_DEPTH {
            return Err(Error::corrupted(self.db.root, "tree depth out of range"));
        }
        let mut pgno = self.db.root;
        for level in 0..depth {
            let page = view(&*self.store, pgno)?;
            if page.is_leaf() != (level + 1 == depth) {
                return Err(Error::corrupted(
                    pgno,
                    "page type does not match its tree level",
                ));
            }
            let n = page.num_keys();
            path.pgno[level] = pgno;
            if page.is_leaf() {
                path.depth = depth;
                path.idx[level] = n as u16;
                if n > 0 && self.cmp.compare(key, page.key(n - 1)?) != Ordering::Greater {
                    return Ok(None);
                }
                return Ok(Some(n));
            }
            if n == 0 {
                return Err(Error::corrupted(pgno, "empty branch page"));
            }
            path.idx[level] = (n - 1) as u16;
            pgno = page.child(n - 1)?;
        }
        unreachable!("the loop returns at the leaf level")
    }

    /// Inserts `key`/`value` at slot `idx` of the (dirty, full) page at `level` of `path`
    /// by splitting it, and carries the new separator up, splitting parents as needed.
    fn split_insert(
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
        let mut scratch = SPLIT_SCRATCH.with(|s| s.take());
        let (pending, nodes, separator) = &mut scratch;
        let r = self.split_insert_with(
            path, level, idx, key, value, append, pending, nodes, separator,
        );
        SPLIT_SCRATCH.with(|s| s.replace(scratch));
        r
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
        self.touch_path(&mut path)?;
        let leaf = path.leaf();
        let overflow = {
            let page = view(&*self.store, leaf)?;
            let node = page.node(idx)?;
            (node.flags & node_flags::BIGDATA != 0).then(|| node.overflow_pgno())
        };
        if let Some(run) = overflow {
            self.free_overflow(run)?;
        }
        edit::delete_node(self.store.dirty_mut(leaf), idx);
        self.db.entries -= 1;
        let level = path.leaf_level();
        self.rebalance(&mut path, level)?;
        Ok(true)
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
            if sfill >= FILL_THRESHOLD && sn > min_keys {
                return self.move_node(path, level, sib, sib_right);
            }
            let (left, right, ridx) = if sib_right {
                (pgno, sib, 1)
            } else {
                (sib, pgno, pidx)
            };
            if !self.merge(parent, left, right, ridx)? {
                return Ok(());
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
        let (mut nodes, flags) = {
            let l = view(&*self.store, left)?;
            (Nodes::from_page(&l)?, l.flags())
        };
        let branch = flags & page_flags::BRANCH != 0;
        let first_right = nodes.len();
        let r = view(&*self.store, right)?;
        for i in 0..r.num_keys() {
            nodes.push_raw(r.node_raw(i)?);
        }
        if branch {
            let separator = view(&*self.store, parent)?.key(ridx)?.to_vec();
            nodes.set_branch_key(first_right, &separator);
        }
        let size: usize = (0..nodes.len()).map(|i| nodes.size(i)).sum();
        if size > self.page_size() - PAGE_HEADER_SIZE {
            return Ok(false);
        }
        nodes.write_page(self.store.dirty_mut(left), left, flags, 0..nodes.len());
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
        let pgno = path.pgno[level];
        let parent = path.pgno[level - 1];
        let pidx = path.idx[level - 1] as usize;
        let branch = view(&*self.store, pgno)?.is_branch();
        let mut moved = Nodes::like(&view(&*self.store, sib)?);
        if sib_right {
            let ridx = pidx + 1;
            moved.push_raw(view(&*self.store, sib)?.node_raw(0)?);
            if branch {
                let separator = view(&*self.store, parent)?.key(ridx)?.to_vec();
                moved.set_branch_key(0, &separator);
            }
            edit::delete_node(self.store.dirty_mut(sib), 0);
            let new_sep = view(&*self.store, sib)?.key(0)?.to_vec();
            if branch {
                let c = view(&*self.store, sib)?.child(0)?;
                let buf = self.store.dirty_mut(sib);
                edit::delete_node(buf, 0);
                let ok = edit::insert_node(buf, 0, &[], NodeValue::Child(c));
                assert!(ok, "a shorter node fits where a longer one was");
            }
            let ok = edit::append_raw(self.store.dirty_mut(pgno), moved.raw(0));
            assert!(ok, "an underfull page takes one more node");
            self.replace_separator(path, level - 1, ridx, &new_sep)
        } else {
            let last = view(&*self.store, sib)?.num_keys() - 1;
            moved.push_raw(view(&*self.store, sib)?.node_raw(last)?);
            let moved_key = moved.key(0).to_vec();
            edit::delete_node(self.store.dirty_mut(sib), last);
            let page = view(&*self.store, pgno)?;
            let mut nodes = Nodes::from_page(&page)?;
            let flags = page.flags();
            if branch {
                let separator = view(&*self.store, parent)?.key(pidx)?.to_vec();
                nodes.set_branch_key(0, &separator);
                moved.set_branch_key(0, &[]);
            }
            nodes.push_raw(moved.raw(0));
            nodes.move_last_to(0);
            nodes.write_page(self.store.dirty_mut(pgno), pgno, flags, 0..nodes.len());
            self.replace_separator(path, level - 1, pidx, &moved_key)
        }
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
