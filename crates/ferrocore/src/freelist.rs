//! Free pages: the free DB's records, reclaiming them, and saving a txn's frees at commit.
//!
//! The free DB maps a txnid `T` (8-byte integer key) to an IDL: a u64 count followed by
//! that many page numbers in descending order. Record `T` lists pages that txn `T` stopped
//! using: reachable in snapshot `T - 1`, unreachable from snapshot `T` on. So its pages may
//! be reused once no reader holds a snapshot older than `T` (invariant 3 of DESIGN.md):
//! the writer reclaims records with `T <= oldest live snapshot` (and `<=` the last
//! committed txn), oldest first.
//!
//! Records are consumed lazily, when allocation runs out of pages, and deleted from the
//! free DB at commit, where the txn's own frees are written as record `W` (its txnid).

use crate::btree::Position;
use crate::btree::TreeMut;
use crate::error::{Error, Result};
use crate::format::idl::{decode_idl, encode_idl_into};
use crate::format::meta::DbRecord;
use crate::format::page::overflow_pages;
use crate::order::KeyCmp;
use crate::store::{DirtyPages, PageSource};

/// Finds the first free-DB record with a key in `from..limit`: returns its key and pages.
/// The [`FindReclaimable`](crate::store::FindReclaimable) a write txn's store refills its
/// free pages with.
pub fn next_reclaimable(
    src: &dyn PageSource,
    free_db: &DbRecord,
    from: u64,
    limit: u64,
) -> Result<Option<(u64, Vec<u64>)>> {
    if from >= limit {
        return Ok(None);
    }
    let mut pos = Position::default();
    if pos
        .seek(src, free_db, KeyCmp::Integer, &from.to_le_bytes())?
        .is_none()
    {
        return Ok(None);
    }
    let (key, value) = pos.current(src)?;
    let key: [u8; 8] = key
        .try_into()
        .map_err(|_| Error::corrupted(pos.path.leaf(), "free-DB key is not 8 bytes"))?;
    let key = u64::from_le_bytes(key);
    if key >= limit {
        return Ok(None);
    }
    let pages = decode_idl(value, pos.path.leaf())?;
    Ok(Some((key, pages)))
}

/// The length a free-DB record of `needed` bytes is first written with: room for the few
/// pages the next saving round adds, so later rounds rewrite it in place. Whole page
/// numbers, as LMDB's own records. A large (overflow) record fills the run its exact size
/// needs, so that giving the slack back at the end frees no page.
fn slack_len(needed: usize, page_size: usize) -> usize {
    if needed < page_size / 4 {
        return (needed + needed / 8 + 64).next_multiple_of(8);
    }
    let pages = overflow_pages(page_size, needed);
    (pages * page_size - crate::format::page::PAGE_HEADER_SIZE) / 8 * 8
}

/// Writes the txn's free-page bookkeeping into the free DB: deletes the records it
/// consumed and saves every page it freed or did not use under key `txnid`.
///
/// Saving changes the free DB, which allocates pages (from the very lists being saved) and
/// frees the free DB's old pages, so the list is recomputed and saved again until it no
/// longer changes. The pages on the way to the record are copied before the first round,
/// so usually the first record written is final and the second round only checks it.
/// Otherwise the record keeps its size between rounds (it is written with slack and LMDB
/// readers use the count, not the length), so later rounds rewrite it in place and
/// allocate nothing: the loop settles in two or three rounds.
pub fn save(pages: &mut DirtyPages<'_>, free_db: &mut DbRecord, txnid: u64) -> Result<()> {
    pages.reclaim.exhausted();
    let consumed = std::mem::take(&mut pages.reclaim.consumed);
    for key in &consumed {
        let mut tree = TreeMut {
            store: &mut *pages,
            db: &mut *free_db,
            cmp: KeyCmp::Integer,
        };
        if !tree.delete(&key.to_le_bytes())? {
            return Err(Error::corrupted(
                free_db.root,
                "consumed free-DB record vanished",
            ));
        }
    }
    let key = txnid.to_le_bytes();
    let page_size = pages.page_size();
    // Copy the free DB's pages on the way to the new record first: that allocation (and
    // the freeing of the old copies) then happens before the list is taken, and the first
    // round's record is usually the final one.
    TreeMut {
        store: &mut *pages,
        db: &mut *free_db,
        cmp: KeyCmp::Integer,
    }
    .touch_to(&key)?;
    // The list as the last round wrote it (`None`: nothing written yet), and the buffers
    // each round builds the list in (reused from round to round).
    let mut written: Option<Vec<u64>> = None;
    let (mut merged, mut all) = (Vec::new(), Vec::new());
    let mut value = Vec::new();
    let mut record_len = 0;
    let mut shrink_tried = false;
    for round in 0..64 {
        let free = &mut pages.free;
        // The pool is kept in descending order; the two short lists are sorted here, and
        // the three merged (each commit writes the whole list back: no n log n per round).
        debug_assert!(
            free.pool.windows(2).all(|w| w[0] > w[1]),
            "pool out of order"
        );
        free.loose.sort_unstable_by(|a, b| b.cmp(a));
        free.freed.sort_unstable_by(|a, b| b.cmp(a));
        merged.clear();
        crate::store::merge_descending(&free.loose, &free.pool, &mut merged);
        all.clear();
        crate::store::merge_descending(&merged, &free.freed, &mut all);
        debug_assert!(all.windows(2).all(|w| w[0] != w[1]), "a page is free twice");
        let needed = 8 * (all.len() + 1);
        if written.is_none() && all.is_empty() {
            return Ok(());
        }
        if written.as_deref() == Some(&all[..]) {
            // Settled. LMDB's records hold exactly their count of pages (and checkers such
            // as py-lmdb's verify insist), so the slack is given back once; if that moved
            // pages, the loop goes on and the record keeps its slack (readers use the count).
            let same_run =
                overflow_pages(page_size, needed) == overflow_pages(page_size, record_len);
            if record_len == needed || shrink_tried || !same_run {
                return Ok(());
            }
            shrink_tried = true;
            record_len = needed;
        } else if round == 0 && needed < page_size / 4 {
            // A small record, likely final already: its exact size (no slack to give
            // back in another round); if the list still moves, later rounds add slack.
            record_len = needed;
        } else if needed > record_len || needed + 2 * page_size < record_len {
            record_len = slack_len(needed, page_size);
        }
        encode_idl_into(&all, record_len, &mut value);
        let mut tree = TreeMut {
            store: &mut *pages,
            db: &mut *free_db,
            cmp: KeyCmp::Integer,
        };
        tree.put(&key, &value, Default::default())?;
        // Keep this round's list; the previous one's buffer builds the next.
        let previous = written.replace(std::mem::take(&mut all));
        all = previous.unwrap_or_default();
    }
    Err(Error::Panic("free list did not settle while saving"))
}
