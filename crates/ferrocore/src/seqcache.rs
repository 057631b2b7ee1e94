//! Small lock-free caches shared by the transactions of an environment, so that beginning a
//! txn and opening a cursor on a named DB cost the same whatever the number of DBs (seed 000).
//!
//! Each cache slot is a seqlock over atomics: a writer makes the sequence odd, stores the
//! words and makes it even again; a reader takes the words only if the sequence was even and
//! unchanged around its reads. Readers never block and never see a torn value; a writer that
//! finds the slot busy simply does not cache.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use crate::format::meta::{DbRecord, Meta};

/// One seqlock-protected slot of `N` words, tagged with a key.
pub struct Slot<const N: usize> {
    seq: AtomicU64,
    key: AtomicU64,
    words: [AtomicU64; N],
}

impl<const N: usize> Default for Slot<N> {
    fn default() -> Self {
        Slot {
            seq: AtomicU64::new(0),
            key: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl<const N: usize> Slot<N> {
    /// The words stored under `key`, if the slot holds them.
    #[inline]
    pub fn get(&self, key: u64) -> Option<[u64; N]> {
        self.get_if(|k| k == key).map(|(_, w)| w)
    }

    /// The key and words in the slot, if it holds a key accepted by `accept`.
    #[inline]
    pub fn get_if(&self, accept: impl Fn(u64) -> bool) -> Option<(u64, [u64; N])> {
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 == 0 || s1 & 1 == 1 {
            return None;
        }
        let stored_key = self.key.load(Ordering::Relaxed);
        let words = std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed));
        fence(Ordering::Acquire);
        if self.seq.load(Ordering::Relaxed) != s1 || !accept(stored_key) {
            return None;
        }
        Some((stored_key, words))
    }

    /// Takes the slot for writing if its sequence is `from` (even); true on success.
    fn lock_from(&self, from: u64) -> bool {
        from & 1 == 0
            && self
                .seq
                .compare_exchange(from, from + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Writes the slot taken by `lock_from(from)` and releases it as `from + 2`.
    fn write_locked(&self, from: u64, key: u64, words: [u64; N]) {
        fence(Ordering::Release);
        self.key.store(key, Ordering::Relaxed);
        for (slot, w) in self.words.iter().zip(words) {
            slot.store(w, Ordering::Relaxed);
        }
        self.seq.store(from + 2, Ordering::Release);
    }

    /// Stores `words` under `key` only if the slot is empty (so a reader's fill never
    /// replaces what a writer stored).
    pub fn put_if_empty(&self, key: u64, words: [u64; N]) {
        if self.lock_from(0) {
            self.write_locked(0, key, words);
        }
    }

    /// Stores `words` under `key`, waiting for a concurrent writer of the slot to finish.
    pub fn put(&self, key: u64, words: [u64; N]) {
        loop {
            let s = self.seq.load(Ordering::Relaxed);
            if self.lock_from(s) {
                return self.write_locked(s, key, words);
            }
            std::hint::spin_loop();
        }
    }

    /// Stores `words` under `key` unless someone else is writing the slot right now.
    pub fn try_put(&self, key: u64, words: [u64; N]) {
        let s = self.seq.load(Ordering::Relaxed);
        if self.lock_from(s) {
            self.write_locked(s, key, words);
        }
    }
}

/// Words of a DB record.
pub fn record_words(r: &DbRecord) -> [u64; 6] {
    [
        r.pad as u64 | (r.flags as u64) << 32 | (r.depth as u64) << 48,
        r.branch_pages,
        r.leaf_pages,
        r.overflow_pages,
        r.entries,
        r.root,
    ]
}

/// The DB record back from its words.
pub fn record_from(w: [u64; 6]) -> DbRecord {
    DbRecord {
        pad: w[0] as u32,
        flags: (w[0] >> 32) as u16,
        depth: (w[0] >> 48) as u16,
        branch_pages: w[1],
        leaf_pages: w[2],
        overflow_pages: w[3],
        entries: w[4],
        root: w[5],
    }
}

/// Words of a meta.
pub fn meta_words(m: &Meta) -> [u64; 16] {
    let f = record_words(&m.free_db);
    let d = record_words(&m.main_db);
    [
        m.address,
        m.map_size,
        m.last_pgno,
        m.txnid,
        f[0],
        f[1],
        f[2],
        f[3],
        f[4],
        f[5],
        d[0],
        d[1],
        d[2],
        d[3],
        d[4],
        d[5],
    ]
}

/// The meta back from its words.
pub fn meta_from(w: [u64; 16]) -> Meta {
    Meta {
        address: w[0],
        map_size: w[1],
        last_pgno: w[2],
        txnid: w[3],
        free_db: record_from([w[4], w[5], w[6], w[7], w[8], w[9]]),
        main_db: record_from([w[10], w[11], w[12], w[13], w[14], w[15]]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keys() {
        let slot: Slot<6> = Slot::default();
        assert!(
            slot.get(0).is_none(),
            "an empty slot holds nothing, even for key 0"
        );
        let mut rec = DbRecord::empty(0x24);
        rec.entries = 77;
        rec.depth = 3;
        rec.pad = 9;
        slot.put(5, record_words(&rec));
        assert_eq!(slot.get(5).map(record_from), Some(rec));
        assert!(slot.get(6).is_none());
        let mut meta = Meta::new_empty(4096, 1 << 20, 0);
        meta.txnid = 12;
        meta.main_db = rec;
        assert_eq!(meta_from(meta_words(&meta)), meta);
    }
}
