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

/// Page numbers whose current bytes were checked whole or written by this handle, valid
/// while the base snapshot is the one [`CheckedPages::describes`].
///
/// The set keeps the snapshot's txn id only: the write txn's carry (`TxnCarry::base`)
/// keeps its meta, which the next txn reuses when both agree on the id.
#[derive(Default, Debug)]
pub struct CheckedPages {
    /// The txn id of the snapshot the set describes: the one this handle's last write txn
    /// began from or committed. `None`: nothing is known.
    as_of: Option<u64>,
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

    /// True if the set describes snapshot `txnid` (the published one: no other commit
    /// came since this handle's last txn).
    #[inline]
    pub fn describes(&self, txnid: u64) -> bool {
        self.as_of == Some(txnid)
    }

    /// Readies the set for a write txn over snapshot `txnid`: keeps it if it describes that
    /// snapshot, forgets everything otherwise (someone else committed).
    #[inline]
    pub fn begin(&mut self, txnid: u64) {
        if !self.describes(txnid) {
            self.bits.clear();
            self.as_of = Some(txnid);
        }
    }

    /// The commit of snapshot `txnid` by this handle's write txn: the set now describes it.
    pub fn committed(&mut self, txnid: u64) {
        debug_assert!(
            self.as_of.is_some_and(|base| base + 1 == txnid),
            "the set must describe the committed txn's base"
        );
        self.as_of = Some(txnid);
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

    #[test]
    fn kept_only_over_the_snapshot_it_describes() {
        let mut c = CheckedPages::default();
        assert!(!c.describes(5), "nothing is known at first");
        c.begin(5);
        assert!(!c.contains(3));
        c.insert(3);
        c.insert(700);
        assert!(c.contains(3) && c.contains(700) && !c.contains(4) && !c.contains(701));
        c.committed(6);
        c.begin(6);
        assert!(c.contains(3) && c.contains(700), "kept over its own commit");
        c.begin(7);
        assert!(
            !c.contains(3) && !c.contains(700),
            "someone else committed 7"
        );
        c.insert(3);
        // The next write txn of the same snapshot: known by its txn id.
        assert!(c.describes(7) && !c.describes(6) && !c.describes(8));
        c.begin(7);
        assert!(c.contains(3), "kept over the snapshot it describes");
        c.forget();
        assert!(!c.describes(7), "nothing is known after a failed commit");
        c.begin(7);
        assert!(!c.contains(3));
    }
}
