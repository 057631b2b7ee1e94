//! The write txn's dirty pages by page number: a sorted list while the txn is small, as
//! LMDB's dirty list, and a hash table once it is large.
//!
//! Most txns dirty a handful of pages (a one-put commit dirties four or five), and they
//! allocate them in ascending order: from the free pool, which hands out its lowest page
//! first, then past the end of the file. For them a sorted list costs less than a hash
//! table at every step: an insert is a push at its end, a look-up a binary search of a
//! few entries, the commit's write-out needs no sort, and the txn's end walks only the
//! entries (a hash table walks every bucket). A large txn would pay for its inserts out
//! of order with moves of the list's tail, so past [`SORTED_MAX`] entries the table moves
//! them to its hash table for the rest of the txn.

use super::{PageBuf, PgnoMap};

/// The most entries the sorted list holds: an insert out of order moves at most this many
/// 32-byte entries (4 KiB), and a look-up takes at most 7 steps of its binary search.
pub(super) const SORTED_MAX: usize = 16;

/// Dirty pages by page number. Exactly one of its two stores is in use: the sorted list
/// while `hashed_in_use` is false, the hash table while it is true; the other is empty,
/// keeping its allocation for later txns.
#[derive(Default)]
pub(super) struct DirtyTable {
    /// The entries, in ascending order of page number, while the txn is small.
    sorted: Vec<(u64, PageBuf)>,
    /// The entries once the txn held more than [`SORTED_MAX`] pages.
    hashed: PgnoMap<PageBuf>,
    /// Which of the two holds the entries.
    hashed_in_use: bool,
}

/// A [`DirtyTable`]'s entries, as it holds them.
pub(super) enum Entries<'t> {
    /// A small txn's, in ascending order of page number.
    InOrder(&'t [(u64, PageBuf)]),
    /// A large txn's, in no order.
    Hashed(&'t PgnoMap<PageBuf>),
}

impl DirtyTable {
    /// An empty table whose hash table has room for `hashed` entries.
    pub(super) fn with_capacity(hashed: usize) -> Self {
        DirtyTable {
            sorted: Vec::with_capacity(SORTED_MAX),
            hashed: PgnoMap::with_capacity_and_hasher(hashed, Default::default()),
            hashed_in_use: false,
        }
    }

    /// The index of `pgno` in the sorted list, or where it would go.
    #[inline(always)]
    fn find(&self, pgno: u64) -> Result<usize, usize> {
        self.sorted.binary_search_by_key(&pgno, |&(p, _)| p)
    }

    /// Number of entries (a run of pages counts once).
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        if self.hashed_in_use {
            self.hashed.len()
        } else {
            self.sorted.len()
        }
    }

    /// True if the table holds no page.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer of `pgno`, if dirty.
    #[inline(always)]
    pub(super) fn get(&self, pgno: u64) -> Option<&PageBuf> {
        if self.hashed_in_use {
            return self.hashed.get(&pgno);
        }
        self.find(pgno).ok().map(|i| &self.sorted[i].1)
    }

    /// The buffer of `pgno`, if dirty, to change.
    #[inline(always)]
    pub(super) fn get_mut(&mut self, pgno: u64) -> Option<&mut PageBuf> {
        if self.hashed_in_use {
            return self.hashed.get_mut(&pgno);
        }
        match self.find(pgno) {
            Ok(i) => Some(&mut self.sorted[i].1),
            Err(_) => None,
        }
    }

    /// True if `pgno` is dirty.
    #[inline(always)]
    pub(super) fn contains_key(&self, pgno: u64) -> bool {
        self.get(pgno).is_some()
    }

    /// Makes `buf` the buffer of `pgno`, giving back the one it had.
    #[inline(always)]
    pub(super) fn insert(&mut self, pgno: u64, buf: PageBuf) -> Option<PageBuf> {
        if self.hashed_in_use {
            return self.hashed.insert(pgno, buf);
        }
        // The usual case: a page above every dirty one.
        if self.sorted.len() < SORTED_MAX && self.sorted.last().is_none_or(|&(last, _)| last < pgno)
        {
            self.sorted.push((pgno, buf));
            return None;
        }
        self.insert_in_order(pgno, buf)
    }

    /// [`DirtyTable::insert`] into the sorted list of a page below a dirty one, or past
    /// the list's limit (then into the hash table).
    #[inline(never)]
    fn insert_in_order(&mut self, pgno: u64, buf: PageBuf) -> Option<PageBuf> {
        debug_assert!(!self.hashed_in_use);
        match self.find(pgno) {
            Ok(i) => Some(std::mem::replace(&mut self.sorted[i].1, buf)),
            Err(i) if self.sorted.len() < SORTED_MAX => {
                self.sorted.insert(i, (pgno, buf));
                None
            }
            Err(_) => {
                self.move_to_hashed();
                self.hashed.insert(pgno, buf)
            }
        }
    }

    /// Moves the sorted list's entries to the hash table, which holds them from now on.
    #[cold]
    fn move_to_hashed(&mut self) {
        debug_assert!(!self.hashed_in_use && self.hashed.is_empty());
        self.hashed.extend(self.sorted.drain(..));
        self.hashed_in_use = true;
    }

    /// Takes `pgno`'s buffer out of the table.
    #[inline]
    pub(super) fn remove(&mut self, pgno: u64) -> Option<PageBuf> {
        if self.hashed_in_use {
            return self.hashed.remove(&pgno);
        }
        match self.find(pgno) {
            Ok(i) => Some(self.sorted.remove(i).1),
            Err(_) => None,
        }
    }

    /// The entries: in order of page number for a small txn, else the hash table.
    #[inline]
    pub(super) fn entries(&self) -> Entries<'_> {
        if self.hashed_in_use {
            Entries::Hashed(&self.hashed)
        } else {
            Entries::InOrder(&self.sorted)
        }
    }

    /// Empties the table, handing each entry to `each`, and goes back to the sorted list.
    /// The hash table keeps its capacity for the next large txn, but not far beyond what
    /// this one needed: walking it (to sort the write-out, and here) visits every bucket,
    /// and a table kept from one huge txn would cost every later large one (a 1,024-bucket
    /// table kept for txns of a few pages cost ~1,000 instructions a commit, before small
    /// txns kept to the sorted list).
    #[inline(always)]
    pub(super) fn drain_each(&mut self, mut each: impl FnMut(u64, PageBuf)) {
        if !self.hashed_in_use {
            for (pgno, buf) in self.sorted.drain(..) {
                each(pgno, buf);
            }
            return;
        }
        let held = self.hashed.len();
        for (pgno, buf) in self.hashed.drain() {
            each(pgno, buf);
        }
        if self.hashed.capacity() > 64 && self.hashed.capacity() > 8 * held {
            self.hashed.shrink_to(2 * held);
        }
        self.hashed_in_use = false;
    }
}

#[cfg(test)]
mod tests {
    use super::{DirtyTable, Entries, PageBuf, SORTED_MAX};
    use std::collections::BTreeMap;

    fn numbers(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        }
    }

    /// The table against a `BTreeMap` over random inserts, replacements, removals and
    /// drains, in and out of order, below and past the sorted list's limit.
    #[test]
    fn the_table_matches_a_map() {
        let mut next = numbers(3);
        let mut table = DirtyTable::with_capacity(4);
        for round in 0..60 {
            let mut model = BTreeMap::new();
            let size = [3, 40, SORTED_MAX - 1, SORTED_MAX, SORTED_MAX + 1, 600][round % 6];
            let ascending = round % 4 == 0;
            let mut base = 0;
            for step in 0..3 * size {
                let pgno = if ascending {
                    base += 1 + next() % 3;
                    base
                } else {
                    2 + next() % (2 * size as u64)
                };
                let len = 1 + (next() % 3) as usize;
                match step % 5 {
                    0..=2 => assert_eq!(
                        table.insert(pgno, PageBuf::Mapped(len)).map(|b| b.len()),
                        model.insert(pgno, len),
                        "round {round}, insert {pgno}"
                    ),
                    3 => assert_eq!(
                        table.remove(pgno).map(|b| b.len()),
                        model.remove(&pgno),
                        "round {round}, remove {pgno}"
                    ),
                    _ => {
                        if let Some(PageBuf::Mapped(l)) = table.get_mut(pgno) {
                            *l += 10;
                            *model.get_mut(&pgno).unwrap() += 10;
                        }
                    }
                }
                assert_eq!(table.len(), model.len());
                assert_eq!(table.contains_key(pgno), model.contains_key(&pgno));
                assert_eq!(table.get(pgno).map(|b| b.len()), model.get(&pgno).copied());
            }
            let mut listed: Vec<(u64, usize)> = match table.entries() {
                Entries::InOrder(entries) => entries.iter().map(|(p, b)| (*p, b.len())).collect(),
                Entries::Hashed(map) => {
                    assert!(
                        model.len() > SORTED_MAX / 2,
                        "round {round}: hashed while small"
                    );
                    let mut all: Vec<_> = map.iter().map(|(p, b)| (*p, b.len())).collect();
                    all.sort_unstable();
                    all
                }
            };
            let want: Vec<(u64, usize)> = model.iter().map(|(&p, &l)| (p, l)).collect();
            assert_eq!(listed, want, "round {round}: the entries");
            listed.clear();
            let mut drained = BTreeMap::new();
            table.drain_each(|p, b| assert!(drained.insert(p, b.len()).is_none()));
            assert_eq!(drained, model, "round {round}: drained");
            assert!(table.is_empty() && matches!(table.entries(), Entries::InOrder(_)));
        }
    }
}
