//! Nodes copied out of pages, and where a split divides them.

use crate::error::{Error, Result};
use crate::format::page::{edit, even, read_u16, NodeValue, PageView, NODE_HEADER_SIZE};

thread_local! {
    /// The thread's buffers for rebuilding pages, see [`with_node_scratch`].
    static NODE_SCRATCH: std::cell::RefCell<NodeScratch> =
        std::cell::RefCell::new((Nodes::with_room(), Nodes::with_room(), Vec::new()));
}

/// Buffers for rebuilding pages: a split's new node, a move's node or nothing (a merge);
/// the page's nodes; a separator key.
pub(super) type NodeScratch = (Nodes, Nodes, Vec<u8>);

/// Runs `f` with the thread's [`NodeScratch`], kept from call to call: splits, and the
/// moves and merges of a delete's rebalance, allocate nothing once a thread's first one
/// has sized them (and a thread's deletes find them sized by its puts' splits). A split,
/// move or merge further up the stack holds them: `f` then gets new ones.
pub(super) fn with_node_scratch<R>(f: impl FnOnce(&mut NodeScratch) -> R) -> R {
    NODE_SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        Err(_) => f(&mut NodeScratch::default()),
    })
}

/// Nodes copied out of pages in their stored form (header, key, data), packed in one
/// buffer: what splits and merges rebuild pages from, without an allocation per node.
#[derive(Default)]
pub(super) struct Nodes {
    pub(super) bytes: Vec<u8>,
    /// (start, length) of each node in `bytes`, in slot order.
    pub(super) spans: Vec<(usize, usize)>,
    /// Nodes of a LEAF2 page: each "node" is just its key, of this size; else 0.
    pub(super) fixed: usize,
}

impl Nodes {
    /// An empty list with room for the nodes of a full 4 KiB page and a separator or two
    /// (a split's copy of the page), so that a thread's first splits do not grow it in
    /// steps.
    pub(super) fn with_room() -> Self {
        Nodes {
            bytes: Vec::with_capacity(8192),
            spans: Vec::with_capacity(256),
            fixed: 0,
        }
    }

    /// Empties the list for nodes of pages like `page`, keeping its allocations.
    pub(super) fn reset_like(&mut self, page: &PageView<'_>) {
        self.bytes.clear();
        self.spans.clear();
        self.fixed = page.fixed_size();
    }

    /// Replaces the list with `page`'s nodes, keeping its allocations. A page with nodes
    /// is copied with its node area in one piece (holes and all), the nodes found in it
    /// by their slots.
    pub(super) fn refill(&mut self, page: &PageView<'_>) -> Result<()> {
        self.reset_like(page);
        self.bytes.reserve(page.bytes().len());
        self.spans.reserve(page.num_keys() + 1);
        if self.fixed != 0 {
            for i in 0..page.num_keys() {
                self.push_raw(page.key(i)?);
            }
            return Ok(());
        }
        let upper = page.bounds().1;
        self.bytes.extend_from_slice(&page.bytes()[upper..]);
        for i in 0..page.num_keys() {
            // `node_extent` checked the node lies in the node area (at or past `upper`).
            let (off, len) = page.node_extent(i)?;
            self.spans.push((off - upper, len));
        }
        Ok(())
    }

    pub(super) fn len(&self) -> usize {
        self.spans.len()
    }

    pub(super) fn raw(&self, i: usize) -> &[u8] {
        let (start, len) = self.spans[i];
        &self.bytes[start..start + len]
    }

    pub(super) fn key(&self, i: usize) -> &[u8] {
        let raw = self.raw(i);
        if self.fixed != 0 {
            return raw;
        }
        let ksize = read_u16(raw, 6) as usize;
        &raw[NODE_HEADER_SIZE..NODE_HEADER_SIZE + ksize]
    }

    /// Bytes node `i` takes in a page, slot included.
    pub(super) fn size(&self, i: usize) -> usize {
        if self.fixed != 0 {
            return self.fixed;
        }
        2 + even(self.spans[i].1)
    }

    pub(super) fn push_raw(&mut self, raw: &[u8]) {
        self.spans.push((self.bytes.len(), raw.len()));
        self.bytes.extend_from_slice(raw);
    }

    /// Appends a node built from a key and value, encoded as `insert_node` writes it.
    pub(super) fn push_value(&mut self, key: &[u8], value: NodeValue<'_>) {
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
    pub(super) fn move_last_to(&mut self, idx: usize) {
        let span = self.spans.pop().expect("a node to move");
        self.spans.insert(idx, span);
    }

    /// Replaces node `i`'s key (branch nodes only: the data field is empty).
    pub(super) fn set_branch_key(&mut self, i: usize, key: &[u8]) {
        let mut header = [0u8; NODE_HEADER_SIZE];
        header.copy_from_slice(&self.raw(i)[..NODE_HEADER_SIZE]);
        crate::format::page::write_u16(&mut header, 6, key.len() as u16);
        let start = self.bytes.len();
        self.bytes.extend_from_slice(&header);
        self.bytes.extend_from_slice(key);
        self.spans[i] = (start, NODE_HEADER_SIZE + key.len());
    }

    /// Writes nodes `range` into `page` as a fresh page.
    pub(super) fn write_page(
        &self,
        page: &mut [u8],
        pgno: u64,
        flags: u16,
        range: std::ops::Range<usize>,
    ) {
        if self.fixed != 0 {
            edit::init_leaf2(page, pgno, flags, self.fixed);
            for i in range {
                let ok = edit::append_raw(page, self.raw(i));
                assert!(ok, "rebuilt page {pgno} overflowed");
            }
            return;
        }
        edit::init(page, pgno, flags);
        let ok = edit::append_raws(page, range.map(|i| self.raw(i)));
        assert!(ok, "rebuilt page {pgno} overflowed");
    }
}

/// Chooses where to split `nodes` into two pages of `capacity` bytes each.
///
/// `at_end`: the new node is the last one. Then, as LMDB biases it, the left page keeps
/// as much as fits and the new page starts with the old last node and the new one, so
/// sequential inserts (and the branch pages above them) fill their pages instead of
/// leaving them half full.
pub(super) fn choose_split(
    nodes: &Nodes,
    branch: bool,
    capacity: usize,
    at_end: bool,
) -> Result<usize> {
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
