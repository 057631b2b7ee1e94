//! DUPSORT: sorted duplicate values per key, stored the way LMDB stores them.
//!
//! A key's values live in its leaf node in one of three forms (see docs/FORMAT.md):
//! - one value: a plain node whose data is the value;
//! - a few values: node flag `DUPDATA`, data = a *sub-page*, a small leaf page embedded in
//!   the node whose nodes have the values as keys and empty data (flags LEAF|DIRTY|SUBP);
//! - many values: flags `DUPDATA|SUBDATA`, data = the 48-byte record of a *sub-DB*, a tree
//!   whose keys are the values.
//!
//! A value set grows from one form to the next when it no longer fits the node (`node_max`)
//! and, as in LMDB, never shrinks back. Values are at most `max_key_size` bytes (they are
//! keys of the sub-tree) and are ordered by the DB's duplicate comparator.
//!
//! DUPFIXED DBs keep their values as LEAF2 pages: packed, fixed-size values without node
//! headers, in sub-pages and in the leaves of sub-DBs (docs/FORMAT.md §10).

use crate::btree::Position;
use crate::btree::{self, LeafFacts, PutMode, TreeMut};
use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::format::page::{
    edit, even, node_flags, node_max, page_flags, Node, NodeValue, PageView, NODE_HEADER_SIZE,
    PAGE_HEADER_SIZE, P_INVALID,
};
use crate::order::KeyCmp;
use crate::store::{PageSource, PageStore};

/// The values of one key, as its node stores them.
#[derive(Clone, Copy, Debug)]
pub enum Dups<'a> {
    /// A single value, stored as plain node data.
    Single(&'a [u8]),
    /// Values in an embedded sub-page.
    SubPage(PageView<'a>),
    /// Values in a sub-DB with this record.
    SubDb(DbRecord),
}

/// Decodes the value set of a leaf node of a DUPSORT DB (`leaf_pgno` for errors).
pub fn dups_of<'a>(node: &Node<'a>, leaf_pgno: u64) -> Result<Dups<'a>> {
    let kind = node.flags & (node_flags::DUPDATA | node_flags::SUBDATA | node_flags::BIGDATA);
    match kind {
        0 => Ok(Dups::Single(node.data)),
        node_flags::DUPDATA => {
            let sub = PageView::parse(node.data, leaf_pgno)?;
            if sub.flags() & page_flags::SUBP == 0 || !sub.is_leaf() || sub.num_keys() == 0 {
                return Err(Error::corrupted(leaf_pgno, "bad duplicate sub-page"));
            }
            Ok(Dups::SubPage(sub))
        }
        k if k == node_flags::DUPDATA | node_flags::SUBDATA => {
            if node.data.len() != DbRecord::SIZE {
                return Err(Error::corrupted(
                    leaf_pgno,
                    "sub-DB record of the wrong size",
                ));
            }
            Ok(Dups::SubDb(DbRecord::decode(node.data)))
        }
        _ => Err(Error::corrupted(
            leaf_pgno,
            "unexpected node flags in a DUPSORT DB",
        )),
    }
}

/// Size of a plain sub-page holding `values` with no free space.
fn subpage_size(values: &[&[u8]]) -> usize {
    PAGE_HEADER_SIZE
        + values
            .iter()
            .map(|v| 2 + even(NODE_HEADER_SIZE + v.len()))
            .sum::<usize>()
}

/// Encodes sorted `values` as a sub-page with no free space: plain (nodes whose keys are
/// the values), or for DUPFIXED (`fixed` = the value size) a LEAF2 sub-page of the values
/// packed after the header.
pub fn encode_subpage(values: &[&[u8]], fixed: Option<usize>) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_subpage_into(values, fixed, &mut buf);
    buf
}

/// [`encode_subpage`] into `buf` (its old content replaced), reusing its allocation.
pub fn encode_subpage_into(values: &[&[u8]], fixed: Option<usize>, buf: &mut Vec<u8>) {
    let sub = page_flags::LEAF | page_flags::DIRTY | page_flags::SUBP;
    buf.clear();
    let ok = match fixed {
        Some(size) => {
            buf.resize(PAGE_HEADER_SIZE + values.len() * size, 0);
            edit::init_leaf2(buf, 0, sub | page_flags::LEAF2, size);
            values
                .iter()
                .enumerate()
                .all(|(i, v)| edit::insert_node(buf, i, v, NO_DATA))
        }
        None => {
            buf.resize(subpage_size(values), 0);
            edit::init(buf, 0, sub);
            edit::fill_key_nodes(buf, values)
        }
    };
    assert!(ok, "sub-page sized for its values");
    debug_assert_eq!(edit::free_space(buf), 0);
}

/// The values of a sub-page, in order.
fn subpage_values<'a>(sub: &PageView<'a>) -> Result<Vec<&'a [u8]>> {
    (0..sub.num_keys()).map(|i| sub.key(i)).collect()
}

/// The first value of a set.
pub fn first_value<'s, S: PageSource + ?Sized>(
    src: &'s S,
    dups: Dups<'s>,
    dcmp: KeyCmp,
) -> Result<&'s [u8]> {
    match dups {
        Dups::Single(v) => Ok(v),
        Dups::SubPage(sub) => sub.key(0),
        Dups::SubDb(rec) => {
            let mut pos = Position::default();
            let _ = dcmp;
            if !pos.first(src, &rec)? {
                return Err(Error::corrupted(rec.root, "empty sub-DB"));
            }
            Ok(pos.current(src)?.0)
        }
    }
}

/// The values of a set that outgrows its node: one, or a sub-page's (a sub-DB takes values
/// in place and never regroups).
#[derive(Clone, Copy)]
enum OldValues<'b> {
    One(&'b [u8]),
    SubPage(PageView<'b>),
}

/// A key's set of values with one more value inserted in order, read in place: what a
/// set that outgrows its node is stored anew from.
struct GrownSet<'b> {
    old: OldValues<'b>,
    /// The number of old values.
    old_len: usize,
    new: &'b [u8],
    /// The new value's place among all of them.
    at: usize,
}

impl<'b> GrownSet<'b> {
    /// `old` with `new`, which it does not hold, in `dcmp`'s order.
    fn new(old: OldValues<'b>, new: &'b [u8], dcmp: KeyCmp) -> Result<Self> {
        let old_len = match old {
            OldValues::One(_) => 1,
            OldValues::SubPage(sub) => sub.num_keys(),
        };
        let mut set = GrownSet {
            old,
            old_len,
            new,
            at: 0,
        };
        let (mut lo, mut hi) = (0, old_len);
        while lo < hi {
            let mid = usize::midpoint(lo, hi);
            if dcmp.compare(set.old_value(mid)?, new).is_lt() {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        set.at = lo;
        Ok(set)
    }

    /// How many values: the old ones and the new one.
    fn len(&self) -> usize {
        self.old_len + 1
    }

    /// The size of a sub-page holding the set with no free space, from the old set's
    /// (a sub-page's nodes lie packed after its free space): no value is read.
    fn packed_size(&self, fixed: bool) -> usize {
        let node = |v: &[u8]| 2 + even(NODE_HEADER_SIZE + v.len());
        match (self.old, fixed) {
            (_, true) => PAGE_HEADER_SIZE + self.len() * self.new.len(),
            (OldValues::One(v), false) => PAGE_HEADER_SIZE + node(v) + node(self.new),
            (OldValues::SubPage(sub), false) => {
                sub.bytes().len() - sub.free_space() + node(self.new)
            }
        }
    }

    /// Value `i` in order.
    #[inline]
    fn value(&self, i: usize) -> Result<&'b [u8]> {
        match i.cmp(&self.at) {
            std::cmp::Ordering::Less => self.old_value(i),
            std::cmp::Ordering::Equal => Ok(self.new),
            std::cmp::Ordering::Greater => self.old_value(i - 1),
        }
    }

    #[inline]
    fn old_value(&self, i: usize) -> Result<&'b [u8]> {
        match self.old {
            OldValues::One(v) => Ok(v),
            OldValues::SubPage(sub) => sub.key(i),
        }
    }
}

/// Writes to a DUPSORT tree.
pub struct DupTree<'a, S: PageStore> {
    /// The main tree of the DB (keys to value sets).
    pub tree: TreeMut<'a, S>,
    /// The order of values.
    pub dcmp: KeyCmp,
    /// Where a grown sub-page is built (the txn keeps it, so puts do not allocate).
    pub scratch: &'a mut Vec<u8>,
}

/// What `DupTree::put` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DupPut {
    /// The value was added.
    Added,
    /// The key/value pair was already there; nothing changed.
    Present,
}

impl<S: PageStore> DupTree<'_, S> {
    /// The value set of `key`, copied out (so the tree can be changed afterwards).
    fn load(&self, key: &[u8]) -> Result<Option<OwnedDups>> {
        let db = *self.tree.db;
        let src = &*self.tree.store;
        if db.root == P_INVALID {
            return Ok(None);
        }
        let mut path = btree::Path::default();
        let (idx, exact) = btree::search(src, &db, self.tree.cmp, key, &mut path)?;
        if !exact {
            return Ok(None);
        }
        let node = btree::view(src, path.leaf())?.node(idx)?;
        Ok(Some(match dups_of(&node, path.leaf())? {
            Dups::Single(v) => OwnedDups::Values(vec![v.to_vec()]),
            Dups::SubPage(sub) => OwnedDups::Values(
                subpage_values(&sub)?
                    .into_iter()
                    .map(<[u8]>::to_vec)
                    .collect(),
            ),
            Dups::SubDb(rec) => OwnedDups::SubDb(rec),
        }))
    }

    /// Stores `set` (at least two values) as `key`'s set: a sub-page packed tightly, or a
    /// new sub-DB when that would not fit the node.
    fn store_values(&mut self, key: &[u8], set: &GrownSet<'_>) -> Result<()> {
        let entries = self.tree.db.entries;
        let node_limit = node_max(self.tree.store.page_size());
        let any = PutMode {
            any_kind: true,
            ..PutMode::default()
        };
        if NODE_HEADER_SIZE + key.len() + set.packed_size(self.is_fixed()) <= node_limit {
            // Rare (a set only regroups when it outgrows its node): the values are listed.
            let values = (0..set.len())
                .map(|i| set.value(i))
                .collect::<Result<Vec<_>>>()?;
            let sub = self.encode(&values);
            self.tree.put(
                key,
                &sub,
                PutMode {
                    node_flags: node_flags::DUPDATA,
                    ..any
                },
            )?;
        } else {
            let mut rec = self.new_sub_db(set.value(0)?.len());
            for i in 0..set.len() {
                TreeMut {
                    store: &mut *self.tree.store,
                    db: &mut rec,
                    cmp: self.dcmp,
                }
                .put(set.value(i)?, &[], PutMode::default())?;
            }
            self.tree.put(
                key,
                &rec.to_bytes(),
                PutMode {
                    node_flags: node_flags::DUPDATA | node_flags::SUBDATA,
                    ..any
                },
            )?;
        }
        self.tree.db.entries = entries;
        Ok(())
    }

    /// What adding `value` to `key`'s set takes, decided from the set in place (no copy of
    /// its values unless its form changes). Errors as [`DupTree::put`].
    /// Also leaves in `path` where the search put `key`, and returns its slot and whether
    /// it is present, for `put_at`.
    fn plan_put(
        &self,
        key: &[u8],
        value: &[u8],
        no_overwrite: bool,
        path: &mut btree::Path,
        scratch: &mut Vec<u8>,
    ) -> Result<(PutPlan, Option<Found>)> {
        let db = *self.tree.db;
        let src = &*self.tree.store;
        if db.root == P_INVALID {
            return Ok((PutPlan::NewKey, None));
        }
        let (idx, exact, leaf) = btree::search_leaf(src, &db, self.tree.cmp, key, path)?;
        // Every put of a plan replaces the present node whatever its kind.
        let any = PutMode {
            any_kind: true,
            ..PutMode::default()
        };
        let facts = LeafFacts::read(&leaf, idx, exact, any)?;
        if !exact {
            return Ok((PutPlan::NewKey, Some((idx, facts))));
        }
        let plan = self.plan_existing(key, value, no_overwrite, &leaf, idx, scratch)?;
        Ok((plan, Some((idx, facts))))
    }

    /// [`DupTree::plan_put`] for a key present at slot `idx` of `path`'s leaf.
    fn plan_existing(
        &self,
        key: &[u8],
        value: &[u8],
        no_overwrite: bool,
        leaf: &PageView<'_>,
        idx: usize,
        scratch: &mut Vec<u8>,
    ) -> Result<PutPlan> {
        let src = &*self.tree.store;
        if no_overwrite {
            return Err(Error::KeyExist);
        }
        let node = leaf.node(idx)?;
        let dups = dups_of(&node, leaf.pgno())?;
        if self.is_fixed() {
            // DUPFIXED: every value of a key has the size of its first one.
            let size = match dups {
                Dups::Single(v) => v.len(),
                Dups::SubPage(sub) => sub.key(0)?.len(),
                Dups::SubDb(rec) => rec.pad as usize,
            };
            if size != value.len() {
                return Err(Error::BadValSize {
                    what: "DUPFIXED value (all values of a key have one size)",
                    size: value.len(),
                    max: size,
                });
            }
        }
        match dups {
            Dups::Single(v) => {
                let pair = match self.dcmp.compare(v, value) {
                    std::cmp::Ordering::Equal => return Ok(PutPlan::Present),
                    std::cmp::Ordering::Less => [v, value],
                    std::cmp::Ordering::Greater => [value, v],
                };
                // The single value becomes a set of two: a sub-page, built in the scratch
                // buffer, if it fits the node (else `store_values` makes a sub-DB).
                let fixed = self.is_fixed().then_some(value.len());
                encode_subpage_into(&pair, fixed, scratch);
                if NODE_HEADER_SIZE + key.len() + scratch.len() <= node_max(src.page_size()) {
                    Ok(PutPlan::SubPage)
                } else {
                    Ok(PutPlan::Regroup)
                }
            }
            Dups::SubPage(sub) => {
                let (mut lo, mut hi) = (0, sub.num_keys());
                while lo < hi {
                    let mid = usize::midpoint(lo, hi);
                    match self.dcmp.compare(sub.key(mid)?, value) {
                        std::cmp::Ordering::Less => lo = mid + 1,
                        std::cmp::Ordering::Greater => hi = mid,
                        std::cmp::Ordering::Equal => return Ok(PutPlan::Present),
                    }
                }
                let footprint = if sub.is_leaf2() {
                    value.len()
                } else {
                    2 + even(NODE_HEADER_SIZE + value.len())
                };
                // A sub-page LMDB wrote may have room already. The growth is even (a
                // DUPFIXED value of odd size leaves a spare byte, as LMDB's growth by four
                // values does): a node grows by even steps, so that its old data stays
                // the tail of its new data (`DupTree::grow_subpage`).
                let extra = footprint
                    .saturating_sub(sub.free_space())
                    .next_multiple_of(2);
                let bytes = sub.bytes();
                let node_limit = node_max(src.page_size());
                if NODE_HEADER_SIZE + key.len() + bytes.len() + extra > node_limit {
                    // Too big for the node as it is: `store_values` packs the values
                    // tightly, or makes the set a sub-DB.
                    return Ok(PutPlan::Regroup);
                }
                // Grown where it is, if its leaf has the room (`DupTree::grow_subpage`).
                Ok(PutPlan::GrowSubPage { slot: lo, extra })
            }
            Dups::SubDb(rec) => Ok(PutPlan::SubDb(rec)),
        }
    }

    /// Adds `value` at slot `slot` of the sub-page of `key`, the present node at slot
    /// `idx` of `path`'s leaf, growing it by `extra` bytes ([`PutPlan::GrowSubPage`]):
    /// where it is if the leaf has the room (its nodes stay in place, only its header and
    /// slots move), else built aside in `scratch` and put in the node's place, which
    /// splits the leaf.
    #[allow(clippy::too_many_arguments)]
    fn grow_subpage(
        &mut self,
        key: &[u8],
        value: &[u8],
        path: &mut btree::Path,
        (idx, facts): Found,
        slot: usize,
        extra: usize,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        if let Some(data) =
            self.tree
                .grow_inline_at(path, idx, facts, node_flags::DUPDATA, extra)?
        {
            if extra > 0 {
                edit::regrow_subpage(data, extra);
            }
            let fits = edit::insert_node(data, slot, value, NO_DATA);
            assert!(fits, "sub-page grown by the new value's footprint");
            return Ok(());
        }
        // The leaf lacks the room: the node's sub-page (unchanged, its leaf now writable)
        // is copied out grown, and replaces it.
        let leaf = btree::view(&*self.tree.store, path.leaf())?;
        let node = leaf.node(idx)?;
        let Dups::SubPage(sub) = dups_of(&node, leaf.pgno())? else {
            return Err(Error::corrupted(
                leaf.pgno(),
                "sub-page changed under a put",
            ));
        };
        edit::with_room(sub.bytes(), extra, scratch);
        let fits = edit::insert_node(scratch, slot, value, NO_DATA);
        assert!(fits, "sub-page grown by the new value's footprint");
        let mode = PutMode {
            node_flags: node_flags::DUPDATA,
            any_kind: true,
            ..PutMode::default()
        };
        self.tree
            .put_at_with(path, idx, facts, key, scratch, mode)?;
        Ok(())
    }

    /// Stores `key`'s set, found at slot `idx` of `leaf`, with `value` added, anew
    /// ([`DupTree::store_values`]: a sub-page packed tightly, or a sub-DB). The set is
    /// copied out of the leaf once, into `scratch`, before the tree changes; nothing else
    /// is allocated on the way to a sub-DB. Out of line: rare, and kept out of the put's
    /// common paths.
    #[inline(never)]
    fn regroup(
        &mut self,
        key: &[u8],
        value: &[u8],
        leaf: u64,
        idx: usize,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        scratch.clear();
        let single = {
            let page = btree::view(&*self.tree.store, leaf)?;
            let node = page.node(idx)?;
            match dups_of(&node, leaf)? {
                Dups::Single(v) => {
                    scratch.extend_from_slice(v);
                    true
                }
                Dups::SubPage(sub) => {
                    scratch.extend_from_slice(sub.bytes());
                    false
                }
                Dups::SubDb(_) => unreachable!("a sub-DB takes values in place"),
            }
        };
        let old = if single {
            OldValues::One(scratch)
        } else {
            // Parsed again from the copy: the same bytes `dups_of` accepted.
            OldValues::SubPage(PageView::parse(scratch, leaf)?)
        };
        let set = GrownSet::new(old, value, self.dcmp)?;
        self.store_values(key, &set)
    }

    /// Adds `value` to `key`'s set. `no_overwrite`: fail if the key exists at all;
    /// `no_dup_data`: fail if the pair exists.
    pub fn put(
        &mut self,
        key: &[u8],
        value: &[u8],
        no_overwrite: bool,
        no_dup_data: bool,
    ) -> Result<DupPut> {
        let mut path = btree::Path::default();
        let mut scratch = std::mem::take(&mut *self.scratch);
        let planned = self.plan_put(key, value, no_overwrite, &mut path, &mut scratch);
        let r = planned.and_then(|(plan, found)| {
            self.put_planned(
                key,
                value,
                no_dup_data,
                plan,
                found,
                &mut path,
                &mut scratch,
            )
        });
        *self.scratch = scratch;
        r
    }

    /// Carries out [`DupTree::plan_put`]'s plan (`sub`: the sub-page it built, for
    /// [`PutPlan::SubPage`]; room to build one for [`PutPlan::GrowSubPage`]).
    #[allow(clippy::too_many_arguments)]
    fn put_planned(
        &mut self,
        key: &[u8],
        value: &[u8],
        no_dup_data: bool,
        plan: PutPlan,
        found: Option<Found>,
        path: &mut btree::Path,
        sub: &mut Vec<u8>,
    ) -> Result<DupPut> {
        let entries = self.tree.db.entries;
        let any = PutMode {
            any_kind: true,
            ..PutMode::default()
        };
        match (plan, found) {
            (PutPlan::Present, _) if no_dup_data => return Err(Error::KeyExist),
            (PutPlan::Present, _) => return Ok(DupPut::Present),
            (PutPlan::NewKey, None) => {
                self.tree.put(key, value, PutMode::default())?;
            }
            (PutPlan::NewKey, Some((idx, facts))) => {
                self.tree
                    .put_at_with(path, idx, facts, key, value, PutMode::default())?;
            }
            (PutPlan::SubPage, Some((idx, facts))) => {
                let mode = PutMode {
                    node_flags: node_flags::DUPDATA,
                    ..any
                };
                self.tree.put_at_with(path, idx, facts, key, sub, mode)?;
            }
            (PutPlan::SubPage, None) => {
                let mode = PutMode {
                    node_flags: node_flags::DUPDATA,
                    ..any
                };
                self.tree.put(key, sub, mode)?;
            }
            (PutPlan::GrowSubPage { slot, extra }, Some(found)) => {
                self.grow_subpage(key, value, path, found, slot, extra, sub)?;
            }
            (PutPlan::GrowSubPage { .. }, None) => {
                unreachable!("a sub-page is grown only when its key is found")
            }
            (PutPlan::Regroup, Some((idx, facts))) if facts.exact() => {
                self.regroup(key, value, path.leaf(), idx, sub)?;
            }
            (PutPlan::Regroup, _) => unreachable!("a set is regrouped only when its key is found"),
            (PutPlan::SubDb(mut rec), found) => {
                let r = TreeMut {
                    store: &mut *self.tree.store,
                    db: &mut rec,
                    cmp: self.dcmp,
                }
                .put(
                    value,
                    &[],
                    PutMode {
                        no_overwrite: true,
                        ..PutMode::default()
                    },
                );
                match r {
                    Err(Error::KeyExist) => {
                        return if no_dup_data {
                            Err(Error::KeyExist)
                        } else {
                            Ok(DupPut::Present)
                        };
                    }
                    r => r?,
                }
                let mode = PutMode {
                    node_flags: node_flags::DUPDATA | node_flags::SUBDATA,
                    ..any
                };
                // The sub-DB's pages are its own: the main tree's path still holds.
                match found {
                    Some((idx, facts)) => {
                        self.tree
                            .put_at_with(path, idx, facts, key, &rec.to_bytes(), mode)?;
                    }
                    None => {
                        self.tree.put(key, &rec.to_bytes(), mode)?;
                    }
                }
            }
        }
        self.tree.db.entries = entries + 1;
        Ok(DupPut::Added)
    }

    /// Deletes `value` from `key`'s set, or (`None`) the whole set. Returns false if
    /// nothing matched.
    pub fn delete(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<bool> {
        let Some(existing) = self.load(key)? else {
            return Ok(false);
        };
        let entries = self.tree.db.entries;
        let removed = match (existing, value) {
            (OwnedDups::Values(values), None) => {
                self.delete_node(key)?;
                values.len() as u64
            }
            (OwnedDups::SubDb(rec), None) => {
                btree::free_tree(&mut *self.tree.store, &rec)?;
                self.delete_node(key)?;
                rec.entries
            }
            (OwnedDups::Values(mut values), Some(value)) => {
                let Ok(at) = values.binary_search_by(|v| self.dcmp.compare(v, value)) else {
                    return Ok(false);
                };
                values.remove(at);
                if values.is_empty() {
                    self.delete_node(key)?;
                } else {
                    // LMDB keeps the sub-page form even for one value left.
                    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
                    let sub = self.encode(&refs);
                    let mode = PutMode {
                        node_flags: node_flags::DUPDATA,
                        any_kind: true,
                        ..PutMode::default()
                    };
                    self.tree.put(key, &sub, mode)?;
                }
                1
            }
            (OwnedDups::SubDb(mut rec), Some(value)) => {
                let found = TreeMut {
                    store: &mut *self.tree.store,
                    db: &mut rec,
                    cmp: self.dcmp,
                }
                .delete(value)?;
                if !found {
                    return Ok(false);
                }
                if rec.entries == 0 {
                    self.delete_node(key)?;
                } else {
                    let mode = PutMode {
                        node_flags: node_flags::DUPDATA | node_flags::SUBDATA,
                        any_kind: true,
                        ..PutMode::default()
                    };
                    self.tree.put(key, &rec.to_bytes(), mode)?;
                }
                1
            }
        };
        self.tree.db.entries = entries - removed;
        Ok(true)
    }

    /// True for a DUPFIXED DB (each key's values all have one size).
    fn is_fixed(&self) -> bool {
        self.tree.db.flags & crate::db_flags::DUP_FIXED != 0
    }

    /// A sub-page holding `values` (sorted, at least one) in this DB's form.
    fn encode(&self, values: &[&[u8]]) -> Vec<u8> {
        encode_subpage(values, self.is_fixed().then(|| values[0].len()))
    }

    /// The record of a new sub-DB for values of `size` bytes: LEAF2 leaves for DUPFIXED
    /// (flags DUPFIXED, plus INTEGERKEY for INTEGERDUP, `pad` = the size), as LMDB writes it.
    fn new_sub_db(&self, size: usize) -> DbRecord {
        let flags = self.tree.db.flags;
        if flags & crate::db_flags::DUP_FIXED == 0 {
            return DbRecord::empty(0);
        }
        let integer = if flags & crate::db_flags::INTEGER_DUP != 0 {
            crate::db_flags::INTEGER_KEY
        } else {
            0
        };
        let mut rec = DbRecord::empty(crate::db_flags::DUP_FIXED | integer);
        rec.pad = size as u32;
        rec
    }

    /// Deletes `key`'s node, whatever form its set has.
    /// Turns the single plain value of `key` into a set of one value (a sub-page). LMDB
    /// leaves a key so when it refuses an out-of-order APPEND_DUP on it: it converts the
    /// node before it finds the order wrong.
    pub fn make_set(&mut self, key: &[u8]) -> Result<()> {
        let value = {
            let src = &*self.tree.store;
            let db = *self.tree.db;
            match btree::get_node(src, &db, self.tree.cmp, key)? {
                Some((flags, data)) if flags & node_flags::DUPDATA == 0 => data.to_vec(),
                _ => return Ok(()),
            }
        };
        let sub = self.encode(&[&value]);
        let mode = PutMode {
            node_flags: node_flags::DUPDATA,
            any_kind: true,
            ..PutMode::default()
        };
        self.tree.put(key, &sub, mode)
    }

    fn delete_node(&mut self, key: &[u8]) -> Result<()> {
        let node_kind = {
            let src = &*self.tree.store;
            let db = *self.tree.db;
            btree::get_node(src, &db, self.tree.cmp, key)?.map_or(0, |(f, _)| f)
        };
        let kind = node_kind & (node_flags::DUPDATA | node_flags::SUBDATA);
        self.tree.delete_kind(key, kind)?;
        Ok(())
    }
}

/// Where a search of the main tree put a key (in the path it filled): its slot, and what
/// the put needs of the leaf (whether the key is there, the present node).
type Found = (usize, LeafFacts);

/// How [`DupTree::put`] adds a value, decided before the tree changes.
enum PutPlan {
    /// The key is new: a plain node with the value.
    NewKey,
    /// The pair is there already.
    Present,
    /// A single value and the new one as a sub-page, built in the scratch buffer, ready to
    /// replace the node's data.
    SubPage,
    /// The key's sub-page takes the value at slot `slot` once grown by `extra` bytes (0 if
    /// it has the room): see `DupTree::grow_subpage`.
    GrowSubPage { slot: usize, extra: usize },
    /// The key's values and the new one, in a new form (a single value and the new one too
    /// large for a sub-page, or a sub-page outgrowing its node): see `DupTree::regroup`.
    Regroup,
    /// The key's sub-DB, to insert the value into.
    SubDb(DbRecord),
}

/// An inline node's data with no bytes: the node of a value in a sub-page.
const NO_DATA: NodeValue<'static> = NodeValue::Inline {
    flags: 0,
    data: &[],
};

/// A key's value set copied out of its node.
enum OwnedDups {
    Values(Vec<Vec<u8>>),
    SubDb(DbRecord),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryPages;

    /// The size of the sub-page `encode_subpage` makes of the set.
    fn packed(set: &GrownSet<'_>, fixed: Option<usize>) -> usize {
        let values: Vec<&[u8]> = (0..set.len()).map(|i| set.value(i).unwrap()).collect();
        encode_subpage(&values, fixed).len()
    }

    fn values(set: &GrownSet<'_>) -> Vec<u8> {
        (0..set.len())
            .flat_map(|i| set.value(i).unwrap().to_vec())
            .collect()
    }

    /// A grown set lists the old values with the new one in its place: first, between
    /// two, last; beside a single value and among a sub-page's.
    #[test]
    fn a_grown_set_holds_the_new_value_in_order() {
        let cmp = KeyCmp::Lexicographic;
        let sub = encode_subpage(&[b"b", b"d", b"f"], None);
        let old = OldValues::SubPage(PageView::parse(&sub, 0).unwrap());
        for (new, all) in [
            (b"a", "abdf"),
            (b"c", "bcdf"),
            (b"e", "bdef"),
            (b"g", "bdfg"),
        ] {
            let set = GrownSet::new(old, new, cmp).unwrap();
            assert_eq!(values(&set), all.as_bytes());
            assert_eq!(set.packed_size(false), packed(&set, None));
        }
        for (new, all) in [(b"a", "am"), (b"z", "mz")] {
            let set = GrownSet::new(OldValues::One(b"m"), new, cmp).unwrap();
            assert_eq!(values(&set), all.as_bytes());
            assert_eq!(set.packed_size(false), packed(&set, None));
            assert_eq!(set.packed_size(true), packed(&set, Some(1)));
        }
        // Values of several sizes, and a DUPFIXED sub-page.
        let sub = encode_subpage(&[b"bb", b"d", b"ffff"], None);
        let old = OldValues::SubPage(PageView::parse(&sub, 0).unwrap());
        let set = GrownSet::new(old, b"ccc", cmp).unwrap();
        assert_eq!(set.packed_size(false), packed(&set, None));
        let sub = encode_subpage(&[b"bb", b"dd"], Some(2));
        let old = OldValues::SubPage(PageView::parse(&sub, 0).unwrap());
        let set = GrownSet::new(old, b"cc", cmp).unwrap();
        assert_eq!(values(&set), b"bbccdd");
        assert_eq!(set.packed_size(true), packed(&set, Some(2)));
    }

    /// A set stored anew is a sub-page of its values in order when that fits the node,
    /// else a sub-DB holding them all.
    #[test]
    fn a_set_stored_anew_is_a_sub_page_if_it_fits_else_a_sub_db() {
        let cmp = KeyCmp::Lexicographic;
        let mut pages = MemoryPages::new(4096);
        let mut db = DbRecord::empty(crate::db_flags::DUP_SORT);
        let mut scratch = Vec::new();
        let mut dups = DupTree {
            tree: TreeMut {
                store: &mut pages,
                db: &mut db,
                cmp,
            },
            dcmp: cmp,
            scratch: &mut scratch,
        };
        let small = GrownSet::new(OldValues::One(b"m"), b"a", cmp).unwrap();
        dups.store_values(b"small", &small).unwrap();
        match dups.load(b"small").unwrap() {
            Some(OwnedDups::Values(v)) => assert_eq!(v, [b"a".to_vec(), b"m".to_vec()]),
            _ => panic!("not a sub-page"),
        }
        // Five values of 500 bytes: more than a node holds.
        let sub = encode_subpage(&[&[1; 500], &[3; 500], &[4; 500], &[5; 500]], None);
        let old = OldValues::SubPage(PageView::parse(&sub, 0).unwrap());
        let large = GrownSet::new(old, &[2; 500], cmp).unwrap();
        dups.store_values(b"large", &large).unwrap();
        let Some(OwnedDups::SubDb(rec)) = dups.load(b"large").unwrap() else {
            panic!("not a sub-DB");
        };
        let mut pos = Position::default();
        let mut found = Vec::new();
        let mut more = pos.first(&pages, &rec).unwrap();
        while more {
            found.push(pos.current(&pages).unwrap().0[0]);
            more = pos.next(&pages, &rec).unwrap();
        }
        assert_eq!(found, [1, 2, 3, 4, 5]);
    }
}
