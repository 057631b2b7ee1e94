//! Reader slots an environment keeps claimed between its read txns: see [`KeptSlots`].

use std::sync::atomic::{AtomicUsize, Ordering};

/// An entry holding no slot.
const EMPTY: usize = usize::MAX;

/// Entries: a thread uses the one its number picks ([`home`]), so that threads which
/// begin and end read txns at once mostly keep their slots apart.
const ENTRIES: usize = 16;

/// One entry, on a cache line of its own: threads keeping slots in neighbouring entries
/// share no line.
#[repr(align(64))]
struct Entry(AtomicUsize);

impl Entry {
    /// The slot in the entry, taken out.
    #[inline]
    fn take(&self) -> Option<usize> {
        let slot = self.0.swap(EMPTY, Ordering::AcqRel);
        (slot != EMPTY).then_some(slot)
    }
}

/// Reader slots that read txns left claimed when they ended, holding no snapshot, for
/// the environment's next read txns to take without the reader table's lock (which every
/// claim of a free slot takes). LMDB keeps a thread's slot likewise between its read txns
/// unless `MDB_NOTLS` is set: its next begin takes no lock.
///
/// A txn that ends keeps its slot in its thread's entry if that is empty (else gives it
/// back to the table); a txn that begins takes the slot in its thread's entry, if any. At
/// most [`ENTRIES`] slots stay claimed this way; the environment gives them back when it
/// closes. A kept slot's pid is this process's and its snapshot none: writers and stale
/// reader checks ignore it, and `mdb_reader_list` shows it as an idle reader, as LMDB
/// shows a thread's.
pub struct KeptSlots {
    entries: [Entry; ENTRIES],
}

impl Default for KeptSlots {
    fn default() -> Self {
        KeptSlots {
            entries: std::array::from_fn(|_| Entry(AtomicUsize::new(EMPTY))),
        }
    }
}

impl KeptSlots {
    /// The slot kept in this thread's entry, taken out: the caller now holds it.
    #[inline]
    pub fn take(&self) -> Option<usize> {
        self.entries[home()].take()
    }

    /// Any kept slot, taken out (the table is full, and one may sit in another entry).
    pub fn take_any(&self) -> Option<usize> {
        self.entries.iter().find_map(Entry::take)
    }

    /// Keeps slot `slot` (claimed by this process, its snapshot ended) in this thread's
    /// entry; false, keeping nothing, if the entry holds one already.
    #[inline]
    pub fn keep(&self, slot: usize) -> bool {
        debug_assert_ne!(slot, EMPTY);
        self.entries[home()]
            .0
            .compare_exchange(EMPTY, slot, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Takes out every kept slot, for the caller to give back (the environment closes).
    pub fn drain(&self) -> impl Iterator<Item = usize> + '_ {
        self.entries.iter().filter_map(Entry::take)
    }
}

/// This thread's entry: threads are numbered as they first ask, round the entries.
#[inline]
fn home() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static HOME: usize = NEXT.fetch_add(1, Ordering::Relaxed) % ENTRIES;
    }
    // A thread past its thread-locals' end (a txn dropped in a destructor) uses entry 0.
    HOME.try_with(|h| *h).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_takes_back_what_it_kept_and_no_slot_is_kept_twice() {
        let kept = KeptSlots::default();
        assert_eq!(kept.take(), None);
        assert!(kept.keep(5));
        assert!(!kept.keep(6), "the thread's entry holds 5");
        assert_eq!(kept.take(), Some(5));
        assert_eq!(kept.take(), None);
        assert!(kept.keep(7));
        // Other threads keep theirs in their own entries (unless two threads' numbers
        // share an entry: then the second keeps nothing).
        let mut want: Vec<usize> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..15)
                .map(|n| {
                    let kept = &kept;
                    s.spawn(move || kept.keep(100 + n).then_some(100 + n))
                })
                .collect();
            threads
                .into_iter()
                .filter_map(|t| t.join().unwrap())
                .collect()
        });
        assert!(!want.is_empty());
        want.push(7);
        want.sort_unstable();
        let mut all: Vec<usize> = kept.drain().collect();
        all.sort_unstable();
        assert_eq!(all, want, "every kept slot drained once");
        assert_eq!(kept.take_any(), None);
        assert!(kept.keep(9));
        assert_eq!(kept.take_any(), Some(9));
    }
}
