//! Positioning a cursor by key (and value), and reading the item, count and values it
//! stands on.

use crate::btree::{self, view, State};
use crate::error::{Error, Result};
use crate::format::page::{PageView, PAGE_HEADER_SIZE};
use crate::order::KeyCmp;
use crate::store::PageSource;

use super::*;

impl CursorCore {
    /// `MDB_SET` (exact key) or `MDB_SET_RANGE` (first key `>= key`); at the first value.
    pub fn seek<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        key: &[u8],
        exact: bool,
    ) -> Result<bool> {
        let r = self.seek_inner(src, key, exact);
        self.op_done(r)
    }

    pub(super) fn seek_inner<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        key: &[u8],
        exact: bool,
    ) -> Result<bool> {
        self.main_past = false;
        self.eof = false;
        let found = match self.pos.seek(src, &self.db, self.cmp, key)? {
            Some(is_exact) => is_exact || !exact,
            None => false,
        };
        if !found {
            self.pos.state = State::Unset;
            self.dup = None;
            return Ok(false);
        }
        self.enter(src, false)?;
        Ok(true)
    }

    /// `MDB_GET_BOTH` (`exact`) or `MDB_GET_BOTH_RANGE`: key `key`, and the value equal to
    /// (or the first `>=`) `value`.
    pub fn seek_both<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        key: &[u8],
        value: &[u8],
        exact: bool,
    ) -> Result<bool> {
        let r = self.seek_both_inner(src, key, value, exact);
        self.op_done(r)
    }

    fn seek_both_inner<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        key: &[u8],
        value: &[u8],
        exact: bool,
    ) -> Result<bool> {
        if !self.seek_inner(src, key, true)? {
            return Ok(false);
        }
        let found = match self.dcmp {
            None => {
                // Not DUPSORT: the one value must match (LMDB compares with memcmp).
                let (node, _) = self.pos.node(src)?;
                let v = btree::node_value(src, &node)?;
                if exact {
                    v == value
                } else {
                    v >= value
                }
            }
            Some(dcmp) => self.seek_value(src, dcmp, value, exact)?,
        };
        if !found {
            self.pos.state = State::Unset;
            self.dup = None;
        }
        Ok(found)
    }

    pub(super) fn seek_value<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        dcmp: KeyCmp,
        value: &[u8],
        exact: bool,
    ) -> Result<bool> {
        let (node, leaf) = self.pos.node(src)?;
        match self.dup.as_mut() {
            None => Ok(false),
            Some(DupPos::Single) => {
                let ord = dcmp.compare(node.data, value);
                Ok(ord == std::cmp::Ordering::Equal
                    || (!exact && ord == std::cmp::Ordering::Greater))
            }
            Some(DupPos::Sub { idx, .. }) => {
                let sub = PageView::parse(node.data, leaf)?;
                let (i, eq) =
                    btree::leaf_search(&sub, |a: &[u8], b: &[u8]| dcmp.compare(a, b), value)?;
                *idx = i;
                Ok(if exact { eq } else { i < sub.num_keys() })
            }
            Some(DupPos::Tree { pos, rec }) => {
                let rec = *rec;
                match pos.seek(src, &rec, dcmp, value)? {
                    Some(eq) => Ok(eq || !exact),
                    None => Ok(false),
                }
            }
        }
    }

    /// `MDB_GET_MULTIPLE` (DUPFIXED): the values on the current key's current page of
    /// values, packed; the cursor moves to the last of them (so `next_multiple` continues
    /// with the next page).
    pub fn get_multiple<'s, S: PageSource + ?Sized>(
        &mut self,
        src: &'s S,
    ) -> Result<Option<&'s [u8]>> {
        self.del = false;
        if !self.is_valid() {
            return Err(Error::InvalidArgument("cursor is not positioned"));
        }
        let (node, leaf) = self.pos.node(src)?;
        match self.dup.as_mut() {
            None => Err(Error::Incompatible),
            Some(DupPos::Single) => Ok(Some(node.data)),
            Some(DupPos::Sub { idx, count }) => {
                let sub = PageView::parse(node.data, leaf)?;
                if !sub.is_leaf2() {
                    return Err(Error::Incompatible);
                }
                *idx = *count - 1;
                Ok(Some(
                    &node.data[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + *count * sub.fixed_size()],
                ))
            }
            Some(DupPos::Tree { pos, rec }) => {
                let page = view(src, pos.path.leaf())?;
                if !page.is_leaf2() {
                    return Err(Error::Incompatible);
                }
                check_fixed_size(rec, page.fixed_size(), pos.path.leaf())?;
                let n = page.num_keys();
                let level = pos.path.leaf_level();
                pos.path.idx[level] = (n - 1) as u16;
                Ok(Some(
                    &page.bytes()[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + n * page.fixed_size()],
                ))
            }
        }
    }

    /// `MDB_NEXT_MULTIPLE`: the next page of the current key's values (the first page if
    /// the cursor is not positioned).
    pub fn next_multiple<'s, S: PageSource + ?Sized>(
        &mut self,
        src: &'s S,
    ) -> Result<Option<&'s [u8]>> {
        if self.dcmp.is_none() {
            return Err(Error::Incompatible);
        }
        if !self.next_dup(src)? {
            return Ok(None);
        }
        self.get_multiple(src)
    }

    /// `MDB_PREV_MULTIPLE`: the previous page of the current key's values.
    pub fn prev_multiple<'s, S: PageSource + ?Sized>(
        &mut self,
        src: &'s S,
    ) -> Result<Option<&'s [u8]>> {
        self.del = false;
        // As LMDB: only an unpositioned cursor goes to the last item first; one standing
        // past the end after a delete has no previous page of values to return.
        if self.pos.state != State::Valid {
            if !self.last(src)? {
                return Ok(None);
            }
        } else if self.main_past {
            return Ok(None);
        }
        match self.dup.as_mut() {
            None => Err(Error::Incompatible),
            Some(DupPos::Single | DupPos::Sub { .. }) => Ok(None),
            Some(DupPos::Tree { pos, rec }) => {
                // To the last value of the previous leaf of values, if there is one.
                let mut probe = (**pos).clone();
                let level = probe.path.leaf_level();
                probe.path.idx[level] = 0;
                if !probe.prev(src, rec)? {
                    return Ok(None);
                }
                **pos = probe;
                self.get_multiple(src)
            }
        }
    }

    /// Number of values of the current key (`mdb_cursor_count`).
    pub fn count<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<u64> {
        let _ = src;
        if self.pos.state != State::Valid {
            return Err(Error::InvalidArgument("cursor is not positioned"));
        }
        if self.eof {
            if self.main_past {
                return Err(Error::NotFound);
            }
            self.eof = false;
        }
        if self.main_past {
            return Err(Error::NotFound);
        }
        Ok(match &self.dup {
            None | Some(DupPos::Single) => 1,
            Some(DupPos::Sub { count, .. }) => *count as u64,
            Some(DupPos::Tree { rec, .. }) => rec.entries,
        })
    }

    /// The key the main cursor stands on (even when its values cursor is one past its last
    /// value, as after deleting it).
    pub fn key<'s, S: PageSource + ?Sized>(&self, src: &'s S) -> Result<&'s [u8]> {
        if self.pos.state != State::Valid || self.main_past {
            return Err(Error::NotFound);
        }
        Ok(self.pos.node(src)?.0.key)
    }

    /// The key and value at the cursor.
    pub fn item<'s, S: PageSource + ?Sized>(&self, src: &'s S) -> Result<(&'s [u8], &'s [u8])> {
        if !self.is_valid() {
            return Err(Error::NotFound);
        }
        let leaf = view(src, self.pos.path.leaf())?;
        self.item_on(src, &leaf)
    }

    /// [`CursorCore::item`] where `leaf` is the view of the cursor's leaf page.
    #[inline]
    pub fn item_on<'s, S: PageSource + ?Sized>(
        &self,
        src: &'s S,
        leaf: &PageView<'s>,
    ) -> Result<(&'s [u8], &'s [u8])> {
        debug_assert_eq!(leaf.pgno(), self.pos.path.leaf());
        let idx = self.pos.path.leaf_idx();
        if !self.is_valid() || idx >= leaf.num_keys() {
            return Err(Error::NotFound);
        }
        let node = leaf.node_inlined(idx)?;
        let value = match &self.dup {
            Some(dup) => dup_value(src, dup, &node, leaf.pgno())?,
            None => btree::node_value(src, &node)?,
        };
        Ok((node.key, value))
    }

    /// True if LMDB's values cursor would not be usable here: the key has a single plain
    /// value (LMDB initialises its xcursor only for sets of values), or the values cursor
    /// stands at or past the end after a move failed there (C_EOF). `MDB_GET_MULTIPLE` then
    /// succeeds without returning anything, as in LMDB.
    pub fn values_at_end(&self) -> bool {
        matches!(self.dup, None | Some(DupPos::Single)) || self.x_eof || self.x_past
    }

    /// True if the current key's values are a sub-page or sub-DB (LMDB's `F_DUPDATA`), as
    /// opposed to a single plain value.
    pub fn on_dup_data<S: PageSource + ?Sized>(&self, src: &S) -> Result<bool> {
        if self.pos.state != State::Valid {
            return Ok(false);
        }
        self.on_dupdata(src)
    }
}
