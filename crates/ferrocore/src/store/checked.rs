//! Tree pages known to be well formed, so that taking one over for writing need not walk
//! all its nodes again.
//!
//! In-place edits trust a page's node offsets and sizes, so [`DirtyPages::touch`] checks
//! a page whole ([`PageView::validate_all`]) before copying it for writing. That walk is a
//! third of a small commit's cost, and mostly repeated: the pages a commit touches are
//! the ones the previous commit wrote. So the writer remembers, per environment handle,
//! which pages' current bytes it checked or wrote itself, as of the snapshot its last txn
//! left ([`CheckedPages::as_of`]).
//!
//! Why that is sound: a page's bytes change only when a writer writes it, and a page a
//! snapshot reaches was written by the commit that made it reachable. While the base
//! snapshot is the one this handle's own last txn left, every commit since the pages were
//! checked was this handle's, and what it wrote it built itself. Any other commit (another
//! process, another handle, LMDB) publishes a greater txn id, and the writer forgets
//! everything. The snapshot is known by its txn id, as [`EnvInner::meta_cache`] knows it:
//! each commit, in any process, publishes the id after the one before, under the writer
//! lock, so no two snapshots share one (a writer that dies before publishing leaves its
//! meta's id for the next writer to publish, not to reuse). A page an aborted txn wrote
//! in place (`WRITE_MAP`) is one no snapshot reaches; it becomes reachable again only
//! through a commit that writes it anew.
//!
//! What is not covered: bytes changed under the open environment without a commit (a
//! stray write into the file, a disk fault after the page was read). Such damage was
//! never detectable in general (LMDB pages carry no checksum); what a check here would
//! have caught is then caught, if at all, by the bounds checks every node access makes.
//!
//! [`DirtyPages::touch`]: super::DirtyPages
//! [`EnvInner::meta_cache`]: crate::shared::EnvInner::meta_cache
//! [`PageView::validate_all`]: crate::format::page::PageView::validate_all

use crate::format::meta::Meta;

/// Page numbers whose current bytes were checked whole or written by this handle, valid
/// while the base snapshot is [`CheckedPages::as_of`].
#[derive(Default, Debug)]
pub struct CheckedPages {
    /// The snapshot the set describes: the one this handle's last write txn began from
    /// or committed. `None`: nothing is known.
    as_of: Option<Meta>,
    /// One bit per page number.
    bits: Vec<u64>,
}

impl CheckedPages {
    /// An empty set with room for page numbers below `pages` without growing.
    pub fn with_room_for(pages: usize) -> Self {
        CheckedPages {
            as_of: None,
            bits: Vec::with_capacity(pages.div_ceil(64)),
        }
    }

    /// The snapshot the set describes, if its txn id is `txnid` (the published one: no
    /// other commit came since this handle's last txn): the next write txn's base.
    #[inline]
    pub fn snapshot(&self, txnid: u64) -> Option<&Meta> {
        self.as_of.as_ref().filter(|m| m.txnid == txnid)
    }

    /// Readies the set for a write txn over `base`: keeps it if `base` is the snapshot it
    /// describes (the same txn id), forgets everything otherwise (someone else committed).
    #[inline]
    pub fn begin(&mut self, base: &Meta) {
        if self.snapshot(base.txnid).is_none() {
            self.bits.clear();
            self.as_of = Some(*base);
        }
    }

    /// The commit of `meta` by this handle's write txn: the set now describes it.
    pub fn committed(&mut self, meta: &Meta) {
        debug_assert!(
            self.as_of.is_some_and(|m| m.txnid + 1 == meta.txnid),
            "the set must describe the committed txn's base"
        );
        self.as_of = Some(*meta);
    }

    /// Forgets everything (a commit failed part way: what is on disk is unknown).
    pub fn forget(&mut self) {
        self.bits.clear();
        self.as_of = None;
    }

    /// True if page `pgno`'s current bytes are known to be well formed.
    #[inline]
    pub fn contains(&self, pgno: u64) -> bool {
        let (word, bit) = Self::position(pgno);
        self.bits.get(word).is_some_and(|w| w & bit != 0)
    }

    /// Records that page `pgno`'s current bytes are well formed.
    #[inline]
    pub fn insert(&mut self, pgno: u64) {
        let (word, bit) = Self::position(pgno);
        if word >= self.bits.len() {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= bit;
    }

    #[inline]
    fn position(pgno: u64) -> (usize, u64) {
        ((pgno / 64) as usize, 1 << (pgno % 64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(txnid: u64) -> Meta {
        let db = crate::format::meta::DbRecord::empty(0);
        Meta {
            address: 0,
            map_size: 1 << 20,
            free_db: db,
            main_db: db,
            last_pgno: 10,
            txnid,
        }
    }

    #[test]
    fn kept_only_over_the_snapshot_it_describes() {
        let mut c = CheckedPages::default();
        c.begin(&meta(5));
        assert!(!c.contains(3));
        c.insert(3);
        c.insert(700);
        assert!(c.contains(3) && c.contains(700) && !c.contains(4) && !c.contains(701));
        c.committed(&meta(6));
        c.begin(&meta(6));
        assert!(c.contains(3) && c.contains(700), "kept over its own commit");
        c.begin(&meta(7));
        assert!(
            !c.contains(3) && !c.contains(700),
            "someone else committed 7"
        );
        c.insert(3);
        // The next write txn of the same snapshot: known by its txn id.
        assert_eq!(c.snapshot(7), Some(&meta(7)));
        assert_eq!(c.snapshot(6), None);
        assert_eq!(c.snapshot(8), None);
        c.begin(&meta(7));
        assert!(c.contains(3), "kept over the snapshot it describes");
        c.forget();
        assert_eq!(
            c.snapshot(7),
            None,
            "nothing is known after a failed commit"
        );
        c.begin(&meta(7));
        assert!(!c.contains(3));
    }
}
