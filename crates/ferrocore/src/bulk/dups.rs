//! A DUPSORT key's values, gathered in order and stored in the form LMDB gives them.
//!
//! The rule is the one `dupsort` applies to puts (FORMAT.md §9): one value is a plain
//! node; more go into a sub-page of exactly their size while the node holding it fits
//! `node_max`; past that, into a sub-DB. The form depends only on the final set (a set
//! only grows), so the values are buffered while they could still make a sub-page (at
//! most a node's worth) and, once they cannot, stream into a sub-DB built bottom-up.

use crate::dupsort::encode_subpage_into;
use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::format::page::{even, node_flags, node_max, NODE_HEADER_SIZE, PAGE_HEADER_SIZE};
use crate::store::DirtyPages;

use super::tree::TreeBuilder;

/// The values of the key being loaded, and what finishing it takes.
pub(crate) struct DupSets {
    page_size: usize,
    fill_percent: u8,
    /// The DB's flags (DUPFIXED and INTEGERDUP decide the sub-DB's form).
    db_flags: u16,
    /// The current key; meaningful while `count > 0`.
    key: Vec<u8>,
    /// Its values while they may still form a sub-page, back to back, and their ends.
    values: Vec<u8>,
    ends: Vec<usize>,
    /// Size of a sub-page of exactly the buffered values.
    subpage_bytes: usize,
    /// Values of the current key.
    count: u64,
    /// DUPFIXED: the size of the current key's values.
    fixed: usize,
    /// The current key's sub-DB, once its values outgrew a sub-page.
    sub: Option<TreeBuilder>,
    scratch: Vec<u8>,
    /// Values beyond the first of each finished key: the DB record counts values, the
    /// main tree's leaves count keys.
    pub(crate) extra_values: u64,
}

impl DupSets {
    /// Value sets for a DUPSORT DB with flags `db_flags`.
    pub(crate) fn new(page_size: usize, fill_percent: u8, db_flags: u16) -> DupSets {
        DupSets {
            page_size,
            fill_percent,
            db_flags,
            key: Vec::new(),
            values: Vec::new(),
            ends: Vec::new(),
            subpage_bytes: PAGE_HEADER_SIZE,
            count: 0,
            fixed: 0,
            sub: None,
            scratch: Vec::new(),
            extra_values: 0,
        }
    }

    fn is_dupfixed(&self) -> bool {
        self.db_flags & crate::db_flags::DUP_FIXED != 0
    }

    /// `BadValSize` unless `value` may join the current key's values (DUPFIXED: all of one
    /// size, as `DupTree::put` requires). Changes nothing.
    pub(crate) fn check_value(&self, value: &[u8]) -> Result<()> {
        if self.is_dupfixed() && self.count > 0 && value.len() != self.fixed {
            return Err(Error::BadValSize {
                what: "DUPFIXED value (all values of a key have one size)",
                size: value.len(),
                max: self.fixed,
            });
        }
        Ok(())
    }

    /// Finishes the current key (if any) into `main` and starts `key` with `value`.
    pub(crate) fn start_key(
        &mut self,
        store: &mut DirtyPages<'_>,
        main: &mut TreeBuilder,
        key: &[u8],
        value: &[u8],
    ) -> Result<()> {
        self.finish_key(store, main)?;
        self.key.clear();
        self.key.extend_from_slice(key);
        self.fixed = value.len();
        self.add_value(store, value)
    }

    /// Adds `value` (after every value of the current key, checked by `check_value`).
    pub(crate) fn add_value(&mut self, store: &mut DirtyPages<'_>, value: &[u8]) -> Result<()> {
        self.count += 1;
        if let Some(sub) = &mut self.sub {
            return sub.push(store, value, 0, &[]);
        }
        self.values.extend_from_slice(value);
        self.ends.push(self.values.len());
        self.subpage_bytes += if self.is_dupfixed() {
            value.len()
        } else {
            2 + even(NODE_HEADER_SIZE + value.len())
        };
        if self.count > 1
            && NODE_HEADER_SIZE + self.key.len() + self.subpage_bytes > node_max(self.page_size)
        {
            self.spill(store)?;
        }
        Ok(())
    }

    /// The buffered values no longer fit a sub-page: they start the key's sub-DB.
    fn spill(&mut self, store: &mut DirtyPages<'_>) -> Result<()> {
        let fixed = if self.is_dupfixed() { self.fixed } else { 0 };
        let mut sub = TreeBuilder::new(self.page_size, self.fill_percent, fixed, self.sub_record());
        let mut start = 0;
        for &end in &self.ends {
            sub.push(store, &self.values[start..end], 0, &[])?;
            start = end;
        }
        self.clear_buffer();
        self.sub = Some(sub);
        Ok(())
    }

    /// The record a new sub-DB starts from, as `DupTree` makes it: DUPFIXED sub-DBs have
    /// LEAF2 leaves, flags DUPFIXED (plus INTEGERKEY under INTEGERDUP) and `pad` = the
    /// value size; others flags 0.
    fn sub_record(&self) -> DbRecord {
        if !self.is_dupfixed() {
            return DbRecord::empty(0);
        }
        let integer = if self.db_flags & crate::db_flags::INTEGER_DUP != 0 {
            crate::db_flags::INTEGER_KEY
        } else {
            0
        };
        let mut rec = DbRecord::empty(crate::db_flags::DUP_FIXED | integer);
        rec.pad = self.fixed as u32;
        rec
    }

    fn clear_buffer(&mut self) {
        self.values.clear();
        self.ends.clear();
        self.subpage_bytes = PAGE_HEADER_SIZE;
    }

    /// Stores the current key's values in `main` as a plain node, a sub-page or a sub-DB.
    pub(crate) fn finish_key(
        &mut self,
        store: &mut DirtyPages<'_>,
        main: &mut TreeBuilder,
    ) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let count = std::mem::take(&mut self.count);
        if let Some(sub) = self.sub.take() {
            let rec = sub.finish(store)?;
            debug_assert_eq!(rec.entries, count);
            let flags = node_flags::DUPDATA | node_flags::SUBDATA;
            main.push(store, &self.key, flags, &rec.to_bytes())?;
        } else if count == 1 {
            main.push(store, &self.key, 0, &self.values)?;
        } else {
            let mut start = 0;
            let values: Vec<&[u8]> = self
                .ends
                .iter()
                .map(|&end| {
                    let v = &self.values[start..end];
                    start = end;
                    v
                })
                .collect();
            let fixed = self.is_dupfixed().then_some(self.fixed);
            encode_subpage_into(&values, fixed, &mut self.scratch);
            debug_assert_eq!(self.scratch.len(), self.subpage_bytes);
            main.push(store, &self.key, node_flags::DUPDATA, &self.scratch)?;
        }
        self.clear_buffer();
        self.extra_values += count - 1;
        Ok(())
    }
}
