//! Bulk load: a DB built bottom-up from items sorted in its order (seed 004). How it
//! works and what it guarantees: the doc comment of [`BulkLoader`].

mod dups;
mod tree;

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::format::page::P_INVALID;
use crate::order::Orders;
use crate::store::PageSource;
use crate::txn::{Database, NestedLevel, WriteTxn};

use dups::DupSets;
use tree::TreeBuilder;

/// What a key repeated in the input of a DB without DUPSORT does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Duplicates {
    /// It is refused with [`Error::Unsorted`].
    #[default]
    Reject,
    /// The later value replaces the earlier, as a second put of the key does
    /// (`ferrocore load`, like `mdb_load`).
    KeepLast,
}

/// How a bulk load builds its pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkOptions {
    /// How full each page is made before the next one starts, in percent of its room
    /// (1..=100; default 100). A page still takes the nodes the format needs (a leaf one,
    /// a branch page two). Below 100 leaves room for later inserts without splits.
    pub fill_percent: u8,
    /// What a repeated key does in a DB without DUPSORT.
    pub duplicates: Duplicates,
}

impl Default for BulkOptions {
    fn default() -> Self {
        BulkOptions {
            fill_percent: 100,
            duplicates: Duplicates::Reject,
        }
    }
}

/// What a finished bulk load did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkSummary {
    /// Items stored (a repeated DUPSORT pair, or a key replaced by `KeepLast`, counts once).
    pub stored: u64,
    /// True if the DB was built bottom-up; false if the items were put into existing data.
    pub bottom_up: bool,
}

/// The limits a put applies to an item, checked before a bulk load or a sort takes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ItemLimits {
    /// Longest key (and, in a DUPSORT DB, value).
    pub(crate) max_key: usize,
    /// The DB has sorted duplicates.
    pub(crate) dupsort: bool,
}

impl ItemLimits {
    /// `BadValSize` for an item `WriteTxn::put` would refuse for its size.
    pub(crate) fn check(&self, key: &[u8], value: &[u8]) -> Result<()> {
        if key.is_empty() || key.len() > self.max_key {
            return Err(Error::BadValSize {
                what: "key",
                size: key.len(),
                max: self.max_key,
            });
        }
        if self.dupsort && (value.is_empty() || value.len() > self.max_key) {
            return Err(Error::BadValSize {
                what: "duplicate value",
                size: value.len(),
                max: self.max_key,
            });
        }
        if value.len() > u32::MAX as usize {
            return Err(Error::BadValSize {
                what: "value",
                size: value.len(),
                max: u32::MAX as usize,
            });
        }
        Ok(())
    }
}

/// How the loader stores items. (One per load: the builder's size does not matter, and
/// a box would put an indirection on every push.)
#[allow(clippy::large_enum_variant)]
enum Path {
    /// The DB was empty: it is built bottom-up.
    Build {
        tree: TreeBuilder,
        dups: Option<DupSets>,
    },
    /// The DB had data: ordinary puts.
    Puts { stored: u64 },
}

/// Where an item goes relative to the one before it.
enum Step {
    /// A key after the previous one (or the first item).
    NewKey,
    /// DUPSORT: the previous item's key, a value after its value.
    NextValue,
    /// The previous item again: nothing to store.
    Repeat,
    /// A key without DUPSORT repeated, its value to replace the earlier one.
    Replace,
}

/// A bulk load into one DB of a write txn, in progress.
///
/// Bulk load: a DB built bottom-up from items sorted in its order (seed 004).
///
/// [`WriteTxn::bulk_loader`] returns a [`BulkLoader`]; [`BulkLoader::push`] takes the
/// items in the DB's order (keys by its key order, REVERSEKEY, INTEGERKEY or an
/// application comparator; in a DUPSORT DB a key's values by its value order), and
/// [`BulkLoader::finish`] makes them part of the txn.
///
/// - **Into an empty DB** (the fast path), leaves are filled one after the other to the
///   fill target ([`BulkOptions::fill_percent`], 100% by default), each full page passes
///   its first key up to the level above, and branch pages fill the same way: no search,
///   no split, every page written once. Large values go to overflow runs; a DUPSORT key's
///   values become a plain node, a sub-page or a sub-DB (itself built bottom-up) by the
///   rule puts follow, so the DB has the forms LMDB would give the same data. Pages come
///   from the txn's allocator (free pages first), so commit writes them like any other.
/// - **Into a DB that has data**, each item is an ordinary put (no merge): the result is
///   what the same puts make. The input must still be in order.
///
/// Input out of order is [`Error::Unsorted`], naming the item; in a DB without DUPSORT a
/// repeated key is one too unless [`Duplicates::KeepLast`] is asked for. In a DUPSORT DB a
/// repeated key/value pair is stored once (as a put of a pair already there does).
/// Refused items change nothing and the loader stays usable. The loader works in a
/// nested level of the txn: until `finish`, dropping it (or an error inside the txn's
/// storage) leaves the DB and the txn as they were before `bulk_loader`.
///
/// Unsorted input goes through [`crate::ExternalSort`] first.
pub struct BulkLoader<'t, 'env> {
    txn: &'t mut WriteTxn<'env>,
    db: Database,
    /// The nested level the load works in; `None` once finished.
    level: Option<NestedLevel>,
    orders: Orders,
    limits: ItemLimits,
    options: BulkOptions,
    /// The DB's record when the load began (flags and pad for the new one).
    template: DbRecord,
    path: Path,
    /// Items offered so far, refused ones included: the index of the next.
    offered: u64,
    /// The last item taken (its value only in a DUPSORT DB).
    prev_key: Vec<u8>,
    prev_value: Vec<u8>,
    has_prev: bool,
    /// A storage error left the load half done: it can only be dropped.
    broken: bool,
}

impl<'env> WriteTxn<'env> {
    /// Starts a bulk load of `db`: items pushed in the DB's order build it bottom-up if it
    /// is empty (full pages, no splits), or are put into it if it has data. See
    /// [`BulkLoader`].
    pub fn bulk_loader(
        &mut self,
        db: Database,
        options: BulkOptions,
    ) -> Result<BulkLoader<'_, 'env>> {
        BulkLoader::begin(self, db, options)
    }
}

impl<'t, 'env> BulkLoader<'t, 'env> {
    /// Starts a load of `db` in `txn` (see [`WriteTxn::bulk_loader`]).
    pub(crate) fn begin(
        txn: &'t mut WriteTxn<'env>,
        db: Database,
        options: BulkOptions,
    ) -> Result<Self> {
        // The load writes finished pages to the file as it goes: a new environment's metas
        // are flushed before its first write.
        txn.flush_new_metas_before_early_writes();
        let level = txn.begin_nested_level()?;
        let target = txn.bulk_target(db);
        let (template, orders) = match target {
            Ok(t) => t,
            Err(e) => {
                txn.abort_nested_level(level);
                return Err(e);
            }
        };
        let fill = options.fill_percent.clamp(1, 100);
        let page_size = txn.bulk_pages().page_size();
        let path = if template.root == P_INVALID {
            Path::Build {
                tree: TreeBuilder::new(page_size, fill, 0, template),
                dups: orders
                    .dup
                    .is_some()
                    .then(|| DupSets::new(page_size, fill, template.flags)),
            }
        } else {
            Path::Puts { stored: 0 }
        };
        Ok(BulkLoader {
            limits: ItemLimits {
                max_key: txn.max_key_size(),
                dupsort: orders.dup.is_some(),
            },
            txn,
            db,
            level: Some(level),
            orders,
            options,
            template,
            path,
            offered: 0,
            prev_key: Vec::new(),
            prev_value: Vec::new(),
            has_prev: false,
            broken: false,
        })
    }

    /// True if the DB was empty and is being built bottom-up.
    pub fn is_bottom_up(&self) -> bool {
        matches!(self.path, Path::Build { .. })
    }

    /// Items offered to [`BulkLoader::push`] so far (refused ones too).
    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// Adds `key`/`value`, which must come after the item before it in the DB's order.
    ///
    /// Refused, changing nothing: `BadValSize` for what a put refuses for its size (and, in
    /// a DUPFIXED DB, a value whose size differs from its key's other values);
    /// [`Error::Unsorted`] for an item out of order, or a repeated key without DUPSORT
    /// under [`Duplicates::Reject`]. Any other error comes from the txn's storage and
    /// leaves the loader unusable (`BadTxn`); dropping it undoes the load.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if self.broken {
            return Err(Error::BadTxn);
        }
        let index = self.offered;
        self.offered += 1;
        self.limits.check(key, value)?;
        let step = self.step(index, key, value)?;
        if let Path::Build {
            dups: Some(dups), ..
        } = &self.path
        {
            if matches!(step, Step::NextValue) {
                dups.check_value(value)?;
            }
        }
        let r = self.store(step, key, value);
        if r.is_err() {
            self.broken = true;
            return r;
        }
        self.prev_key.clear();
        self.prev_key.extend_from_slice(key);
        if self.limits.dupsort {
            self.prev_value.clear();
            self.prev_value.extend_from_slice(value);
        }
        self.has_prev = true;
        Ok(())
    }

    /// Places item `index` relative to the last one taken, or refuses it.
    fn step(&self, index: u64, key: &[u8], value: &[u8]) -> Result<Step> {
        if !self.has_prev {
            return Ok(Step::NewKey);
        }
        let unsorted = |what| Err(Error::Unsorted { index, what });
        match self.orders.key.compare(key, &self.prev_key) {
            Ordering::Greater => Ok(Step::NewKey),
            Ordering::Less => unsorted("its key sorts before the previous item's in the DB's key order"),
            Ordering::Equal => match self.orders.dup {
                Some(dcmp) => match dcmp.compare(value, &self.prev_value) {
                    Ordering::Greater => Ok(Step::NextValue),
                    Ordering::Equal => Ok(Step::Repeat),
                    Ordering::Less => unsorted(
                        "its value sorts before the previous value of its key in the DB's value order",
                    ),
                },
                None if self.options.duplicates == Duplicates::KeepLast => Ok(Step::Replace),
                None => unsorted("its key repeats the previous item's in a DB without DUPSORT"),
            },
        }
    }

    /// Stores an item `step` placed.
    fn store(&mut self, step: Step, key: &[u8], value: &[u8]) -> Result<()> {
        let store = self.txn.bulk_pages();
        match (&mut self.path, step) {
            (_, Step::Repeat) => Ok(()),
            (Path::Puts { stored }, step) => {
                self.txn.put(self.db, key, value, 0)?;
                if !matches!(step, Step::Replace) {
                    *stored += 1;
                }
                Ok(())
            }
            (Path::Build { tree, dups: None }, Step::Replace) => {
                tree.pop_last(store)?;
                tree.push(store, key, 0, value)
            }
            (Path::Build { tree, dups: None }, _) => tree.push(store, key, 0, value),
            (
                Path::Build {
                    tree,
                    dups: Some(d),
                },
                Step::NewKey,
            ) => d.start_key(store, tree, key, value),
            (Path::Build { dups: Some(d), .. }, _) => d.add_value(store, value),
        }
    }

    /// Makes the loaded items part of the txn and returns what was stored.
    pub fn finish(mut self) -> Result<BulkSummary> {
        if self.broken {
            return Err(Error::BadTxn);
        }
        let path = std::mem::replace(&mut self.path, Path::Puts { stored: 0 });
        let summary = match path {
            Path::Puts { stored } => BulkSummary {
                stored,
                bottom_up: false,
            },
            Path::Build { mut tree, dups } => {
                let store = self.txn.bulk_pages();
                let mut extra = 0;
                if let Some(mut dups) = dups {
                    dups.finish_key(store, &mut tree)?;
                    extra = dups.extra_values;
                }
                let mut record = tree.finish(store)?;
                record.entries += extra;
                record.flags = self.template.flags;
                record.pad = self.template.pad;
                self.txn.bulk_set_record(self.db, record);
                BulkSummary {
                    stored: record.entries,
                    bottom_up: true,
                }
            }
        };
        let level = self.level.take().expect("a loader finishes once");
        self.txn.commit_nested_level(level)?;
        Ok(summary)
    }
}

impl Drop for BulkLoader<'_, '_> {
    fn drop(&mut self) {
        if let Some(level) = self.level.take() {
            self.txn.abort_nested_level(level);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ItemLimits;

    #[test]
    fn limits_follow_put() {
        let l = ItemLimits {
            max_key: 511,
            dupsort: true,
        };
        assert!(l.check(b"k", b"v").is_ok());
        assert!(l.check(b"", b"v").is_err());
        assert!(l.check(&[1; 512], b"v").is_err());
        assert!(l.check(b"k", b"").is_err());
        assert!(l.check(b"k", &[1; 512]).is_err());
        let plain = ItemLimits {
            dupsort: false,
            ..l
        };
        assert!(plain.check(b"k", b"").is_ok());
        assert!(plain.check(b"k", &[1; 5000]).is_ok());
    }
}
