//! The write txn's dirty pages by page number: a list of entries in the order they came,
//! indexed by a hash table of entry numbers with linear probing.
//!
//! Built for what a write txn does with it. Every page access of the txn asks whether a
//! page is dirty, so a look-up is one multiplication, usually one slot read and, if the
//! slot is taken, one compare with its entry's page number (a general table of `u64` keys
//! probes groups of tags first). A slot is the 4-byte number of its entry, and an empty
//! slot's number is past every entry, so that one compare both finds the empty slot and
//! checks the entry's bounds. The index is a quarter of the size it was with slots of
//! page number and entry (16 bytes): 256 KiB for 20,000 dirty pages, against 1 MiB. Txns
//! dirty pages mostly in ascending order (the free pool hands out its lowest page first,
//! then pages past the end of the file follow), so the list of a small txn is in page
//! order and the commit writes it out without a sort. And a txn's end walks its entries
//! only, clearing the slot each entry records: it never walks the table's empty slots,
//! which a table sized for one large txn would make every later small one pay.

use super::PageBuf;

/// A slot with no entry: slots hold entry numbers, which stay below `2^31` (see
/// [`DirtyTable::rebuild`]).
const EMPTY_SLOT: u32 = u32::MAX;

/// The fewest slots a table has (a power of two, at least twice its entries).
const MIN_SLOTS: usize = 32;

/// A dirty page: its number, its buffer, and the slot of the index that names it.
pub(super) struct DirtyEntry {
    /// The page's number.
    pub(super) pgno: u64,
    /// Its bytes.
    pub(super) buf: PageBuf,
    /// The index of its slot in [`DirtyTable::slots`].
    slot: u32,
}

/// Dirty pages by page number.
///
/// Invariants: `slots.len()` is a power of two, at least [`MIN_SLOTS`], at least twice
/// `entries.len()` and at most 2^32 (slot and entry numbers fit a `u32`, and entry numbers
/// stay below [`EMPTY_SLOT`]); for every `i`, `slots[entries[i].slot]` is `i`; every other
/// slot is [`EMPTY_SLOT`]; every entry's slot is reached from its page number's home slot
/// ([`DirtyTable::home`]) through occupied slots only (linear probing); and page numbers
/// are distinct.
pub(super) struct DirtyTable {
    /// The entries, in the order they were inserted (but for removals, see `remove`).
    entries: Vec<DirtyEntry>,
    /// The index: entry numbers placed by their page numbers, open addressing with linear
    /// probing.
    slots: Vec<u32>,
    /// `64 - log2(slots.len())`: the shift that takes a hash to a slot.
    shift: u32,
    /// True while `entries` is in ascending order of page number.
    ascending: bool,
}

impl Default for DirtyTable {
    fn default() -> Self {
        DirtyTable::with_capacity(0, 0)
    }
}

impl DirtyTable {
    /// An empty table with room for `pages` entries before its index grows, and for
    /// `listed` (at least `pages`) in its list of entries. The index is walked by every
    /// look-up, so it starts small (see `drain_each`); the list only by the commit.
    pub(super) fn with_capacity(pages: usize, listed: usize) -> Self {
        let mut table = DirtyTable {
            entries: Vec::with_capacity(listed.max(pages)),
            slots: Vec::new(),
            shift: 0,
            ascending: true,
        };
        table.rebuild(Self::index_size(pages / 2));
        table
    }

    /// The index's size for `pages` entries: four slots each (the index then stays at
    /// most half full until they have doubled), and at least [`MIN_SLOTS`].
    fn index_size(pages: usize) -> usize {
        (4 * pages).max(MIN_SLOTS).next_power_of_two()
    }

    /// The slot where the probe for `pgno` starts (Fibonacci hashing: consecutive page
    /// numbers land far apart).
    #[inline(always)]
    fn home(&self, pgno: u64) -> usize {
        (pgno.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The slot holding `pgno`'s entry, or the empty slot where it would go.
    #[inline(always)]
    fn find(&self, pgno: u64) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(pgno);
        loop {
            // An empty slot's number is past every entry: one compare tells it and checks
            // the entry's bounds.
            match self.entries.get(self.slots[i] as usize) {
                None => return Err(i),
                Some(entry) if entry.pgno == pgno => return Ok(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    /// Number of entries (a run of pages counts once).
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if the table holds no page.
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The buffer of `pgno`, if dirty.
    #[inline(always)]
    pub(super) fn get(&self, pgno: u64) -> Option<&PageBuf> {
        match self.find(pgno) {
            Ok(i) => Some(&self.entries[self.slots[i] as usize].buf),
            Err(_) => None,
        }
    }

    /// The buffer of `pgno`, if dirty, to change.
    #[inline(always)]
    pub(super) fn get_mut(&mut self, pgno: u64) -> Option<&mut PageBuf> {
        match self.find(pgno) {
            Ok(i) => Some(&mut self.entries[self.slots[i] as usize].buf),
            Err(_) => None,
        }
    }

    /// The buffer of `pgno`, which must be dirty.
    #[inline]
    pub(super) fn buf(&self, pgno: u64) -> &PageBuf {
        self.get(pgno)
            .unwrap_or_else(|| panic!("page {pgno} is not dirty"))
    }

    /// True if `pgno` is dirty.
    #[inline(always)]
    pub(super) fn contains_key(&self, pgno: u64) -> bool {
        self.find(pgno).is_ok()
    }

    /// Makes `buf` the buffer of `pgno`, giving back the one it had.
    #[inline(always)]
    pub(super) fn insert(&mut self, pgno: u64, buf: PageBuf) -> Option<PageBuf> {
        if 2 * (self.entries.len() + 1) > self.slots.len() {
            self.grow();
        }
        match self.find(pgno) {
            Ok(i) => {
                let entry = &mut self.entries[self.slots[i] as usize];
                Some(std::mem::replace(&mut entry.buf, buf))
            }
            Err(i) => {
                let index = self.entries.len();
                self.ascending &= self.entries.last().is_none_or(|e| e.pgno < pgno);
                // Below `EMPTY_SLOT`: the index has at least twice as many slots, at most
                // 2^32 (`rebuild`).
                self.slots[i] = index as u32;
                self.entries.push(DirtyEntry {
                    pgno,
                    buf,
                    slot: i as u32,
                });
                None
            }
        }
    }

    /// Gives the index four slots per entry, placing every entry anew.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        self.rebuild(Self::index_size(self.entries.len()));
    }

    /// Places every entry in a new index of `slots` slots (a new allocation: a smaller
    /// index gives the old one's memory back).
    fn rebuild(&mut self, slots: usize) {
        debug_assert!(slots.is_power_of_two() && slots >= 2 * self.entries.len());
        // Slot numbers fit the `u32` an entry keeps, and entry numbers (at most half the
        // slots) stay below `EMPTY_SLOT` (a table that large would hold a billion dirty
        // pages).
        assert!(slots <= 1 << 32, "a dirty-page index of {slots} slots");
        self.slots = vec![EMPTY_SLOT; slots];
        self.shift = 64 - slots.trailing_zeros();
        for index in 0..self.entries.len() {
            let pgno = self.entries[index].pgno;
            let Err(i) = self.find(pgno) else {
                unreachable!("page {pgno} is in the table twice");
            };
            self.slots[i] = index as u32;
            self.entries[index].slot = i as u32;
        }
    }

    /// Takes `pgno`'s buffer out of the table. The last entry takes the removed one's
    /// place in the list.
    pub(super) fn remove(&mut self, pgno: u64) -> Option<PageBuf> {
        let i = self.find(pgno).ok()?;
        let index = self.slots[i] as usize;
        self.vacate(i);
        let removed = self.entries.swap_remove(index);
        debug_assert_eq!(removed.pgno, pgno);
        if let Some(moved) = self.entries.get(index) {
            // The former last entry, now at `index`: its slot follows it.
            self.slots[moved.slot as usize] = index as u32;
            self.ascending = false;
        }
        Some(removed.buf)
    }

    /// Empties slot `i` and closes the gap in its probe run: each later slot of the run
    /// whose home is not between the gap and itself moves into the gap (backward-shift
    /// deletion), so that no probe meets an empty slot before its page. The entry of slot
    /// `gap` is still listed (its page number is not read).
    fn vacate(&mut self, mut gap: usize) {
        let mask = self.slots.len() - 1;
        let mut j = gap;
        loop {
            j = (j + 1) & mask;
            let entry = self.slots[j];
            if entry == EMPTY_SLOT {
                break;
            }
            let home = self.home(self.entries[entry as usize].pgno);
            // The slot may move back if the gap lies on its probe path (from its home to
            // `j`, going round the end).
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(gap) & mask) {
                self.slots[gap] = entry;
                self.entries[entry as usize].slot = gap as u32;
                gap = j;
            }
        }
        self.slots[gap] = EMPTY_SLOT;
    }

    /// The entries, and whether they are in ascending order of page number (a small txn's
    /// usually are).
    #[inline]
    pub(super) fn entries(&self) -> (&[DirtyEntry], bool) {
        (&self.entries, self.ascending)
    }

    /// Empties the table, handing each entry's page number and buffer to `each`, last
    /// entry first (popped: a `drain` of the list cost some 9 instructions a page more). The
    /// index keeps its size for the next txn, but not far beyond what this one needed:
    /// a table left at a bulk load's size would spread the next small txns' pages over
    /// slots far apart in memory.
    #[inline(always)]
    pub(super) fn drain_each(&mut self, mut each: impl FnMut(u64, PageBuf)) {
        let held = self.entries.len();
        while let Some(entry) = self.entries.pop() {
            self.slots[entry.slot as usize] = EMPTY_SLOT;
            each(entry.pgno, entry.buf);
        }
        self.ascending = true;
        if self.slots.len() > 1 << 16 && self.slots.len() > 32 * held {
            // A smaller index, and a list to match.
            self.rebuild(Self::index_size(held));
            self.entries.shrink_to(self.slots.len() / 2);
        }
    }

    /// Checks the invariants (tests).
    #[cfg(test)]
    fn check(&self) {
        assert!(self.slots.len().is_power_of_two() && self.slots.len() >= MIN_SLOTS);
        assert!(self.slots.len() >= 2 * self.entries.len());
        assert_eq!(self.shift, 64 - self.slots.len().trailing_zeros());
        let occupied = self.slots.iter().filter(|&&s| s != EMPTY_SLOT).count();
        assert_eq!(occupied, self.entries.len());
        for (index, e) in self.entries.iter().enumerate() {
            assert_eq!(self.slots[e.slot as usize] as usize, index);
            assert_eq!(
                self.find(e.pgno),
                Ok(e.slot as usize),
                "page {} unreachable",
                e.pgno
            );
        }
        if self.ascending {
            assert!(self.entries.windows(2).all(|w| w[0].pgno < w[1].pgno));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{DirtyTable, PageBuf, MIN_SLOTS};
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
    /// drains: ascending page numbers (a txn's usual order), random ones from a narrow range
    /// (many collisions and removals), and tables that grow past their first size and
    /// shrink back after a huge round.
    #[test]
    fn the_table_matches_a_map() {
        let mut next = numbers(3);
        let mut table = DirtyTable::with_capacity(4, 4);
        for round in 0..80 {
            let mut model = BTreeMap::new();
            let size = [3, 16, 40, 200, 1000, 40_000][round % 6];
            let ascending = round % 4 == 0;
            let mut base = 2;
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
                assert_eq!(table.get(pgno).map(PageBuf::len), model.get(&pgno).copied());
                if size <= 200 || step % 997 == 0 {
                    table.check();
                }
            }
            table.check();
            let (entries, ascending_now) = table.entries();
            let mut listed: Vec<(u64, usize)> =
                entries.iter().map(|e| (e.pgno, e.buf.len())).collect();
            if ascending_now {
                assert!(listed.windows(2).all(|w| w[0].0 < w[1].0), "round {round}");
            }
            listed.sort_unstable();
            let want: Vec<(u64, usize)> = model.iter().map(|(&p, &l)| (p, l)).collect();
            assert_eq!(listed, want, "round {round}: the entries");
            let mut drained = BTreeMap::new();
            table.drain_each(|p, b| assert!(drained.insert(p, b.len()).is_none()));
            assert_eq!(drained, model, "round {round}: drained");
            assert!(table.is_empty());
            table.check();
            assert!(
                table.slots.len() <= (1usize << 16).max(4 * 3 * size).next_power_of_two(),
                "round {round}: the index shrinks after a huge round"
            );
        }
        assert!(table.slots.len() >= MIN_SLOTS);
    }

    /// A txn that dirties pages in ascending order keeps them in order for the write-out.
    #[test]
    fn ascending_inserts_stay_in_order() {
        let mut table = DirtyTable::with_capacity(8, 8);
        for pgno in (100..400).step_by(3) {
            assert!(table.insert(pgno, PageBuf::Mapped(1)).is_none());
        }
        let (entries, ascending) = table.entries();
        assert!(ascending && entries.len() == 100);
        assert!(table.insert(50, PageBuf::Mapped(1)).is_none());
        assert!(
            !table.entries().1,
            "a page below the last one breaks the order"
        );
        table.check();
        table.drain_each(|_, _| {});
        assert!(table.entries().1, "an empty table is in order");
    }
}
