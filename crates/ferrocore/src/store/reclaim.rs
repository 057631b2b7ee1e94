//! The refill hook of the page allocator: where the write txn finds the next free-DB
//! record it may take pages from.

use crate::error::Result;
use crate::format::meta::DbRecord;

use super::*;

/// Finds the first free-DB record with a key in `from..limit`: returns its key, its
/// pages in `pages` (old content replaced). The free list's format is not the store's
/// business: the write txn plugs in `freelist::next_reclaimable`.
pub type FindReclaimable = fn(
    src: &dyn PageSource,
    free_db: &DbRecord,
    from: u64,
    limit: u64,
    pages: &mut Vec<u64>,
) -> Result<Option<u64>>;

/// Where a write txn's store looks for the next reclaimable free-DB record when its free
/// pages run out (the refill hook of the page allocator).
#[derive(Clone, Debug)]
pub struct Reclaim {
    /// The free DB as of the txn's base snapshot (it does not change until commit).
    pub(super) free_db: DbRecord,
    /// Records with keys below this may be reclaimed.
    pub(super) limit: u64,
    /// Look for keys `>= next_key`.
    pub(super) next_key: u64,
    /// Keys consumed so far, to delete at commit.
    pub consumed: Vec<u64>,
    pub(super) active: bool,
    /// A record was taken out of order.
    pub(super) out_of_order: bool,
    pub(super) find: FindReclaimable,
}

impl Default for Reclaim {
    /// Reclaiming nothing (the state between txns; each txn restarts it).
    fn default() -> Self {
        Reclaim {
            free_db: DbRecord::empty(0),
            limit: 0,
            next_key: 0,
            consumed: Vec::new(),
            active: false,
            out_of_order: false,
            // Between txns nothing is looked for (not active): a finder of nothing.
            find: |_, _, _, _, _| Ok(None),
        }
    }
}

impl Reclaim {
    /// Reclaiming from `free_db` records with keys `< limit`, found by `find`, from the
    /// first record on: a txn's start. The list of consumed keys (empty) keeps its room.
    pub fn restart(&mut self, free_db: DbRecord, limit: u64, find: FindReclaimable) {
        debug_assert!(
            self.consumed.is_empty(),
            "a txn's end empties the consumed keys"
        );
        self.free_db = free_db;
        self.limit = limit;
        self.next_key = 0;
        self.consumed.clear();
        self.active = true;
        self.out_of_order = false;
        self.find = find;
    }

    /// True while more records may be found.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// The next record not yet taken, if any: its key, and its pages in `pages`.
    pub(super) fn next_record(
        &self,
        src: &dyn PageSource,
        pages: &mut Vec<u64>,
    ) -> Result<Option<u64>> {
        (self.find)(src, &self.free_db, self.next_key, self.limit, pages)
    }

    /// Records with keys below this may be taken (no reader and no durable meta reaches
    /// their pages).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Records that `key` was taken.
    pub fn consumed(&mut self, key: u64) {
        self.consumed.push(key);
        self.next_key = key + 1;
    }

    /// Records that `key`, newer than the oldest record not yet taken, was taken; no more
    /// records are taken in order (the next one could be this one).
    pub fn consumed_out_of_order(&mut self, key: u64) {
        debug_assert!(key >= self.next_key, "record {key} taken twice");
        self.consumed.push(key);
        self.out_of_order = true;
        self.active = false;
    }

    /// The free DB it reclaims from and the keys of records not yet taken (`from..limit`),
    /// while reclaiming is active.
    pub fn untaken(&self) -> Option<(DbRecord, u64, u64)> {
        self.active
            .then_some((self.free_db, self.next_key, self.limit))
    }

    /// Every free-DB key below this is free: its record was taken, or there was none
    /// (records are taken oldest first). 0 once a record was taken out of order (see
    /// [`DirtyPages::take_record`]): the commit then writes the pages it took back under
    /// its own txnid, in the newest record, where the next look for the end finds them.
    pub fn free_keys_end(&self) -> u64 {
        if self.out_of_order {
            0
        } else {
            self.next_key
        }
    }

    /// No more records to take (or no more taking: commit has begun).
    pub fn exhausted(&mut self) {
        self.active = false;
    }
}
