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
use crate::btree::{PutMode, TreeMut};
use crate::error::{Error, Result};
use crate::format::idl::{decode_idl, decode_idl_into, encode_idl_into};
use crate::format::meta::DbRecord;
use crate::format::page::overflow_pages;
use crate::order::KeyCmp;
use crate::store::{DirtyPages, PageSource, PageStore};

/// Finds the first free-DB record with a key in `from..limit`: returns its key, its pages
/// in `pages`. The [`FindReclaimable`](crate::store::FindReclaimable) a write txn's store
/// refills its free pages with.
pub fn next_reclaimable(
    src: &dyn PageSource,
    free_db: &DbRecord,
    from: u64,
    limit: u64,
    pages: &mut Vec<u64>,
) -> Result<Option<u64>> {
    if from >= limit || free_db.root == crate::format::page::P_INVALID {
        return Ok(None);
    }
    // The record is read from the leaf the search returns (the usual case), else, when
    // every key of that leaf is below `from`, from the next leaf. A txn's first look
    // (`from` 0) wants the first record: found along first children, comparing no key.
    let (leaf, idx) = if from == 0 {
        (crate::btree::first_leaf(src, free_db)?, 0)
    } else {
        let (leaf, idx, _) = crate::btree::integer_key_leaf(src, free_db, from)?;
        (leaf, idx)
    };
    let (key, value, leaf_pgno) = if idx < leaf.num_keys() {
        let node = leaf.node(idx)?;
        let key = record_key(node.key, leaf.pgno())?;
        (key, crate::btree::node_value(src, &node)?, leaf.pgno())
    } else {
        let mut pos = Position::default();
        if pos
            .seek(src, free_db, KeyCmp::Integer, &from.to_le_bytes())?
            .is_none()
        {
            return Ok(None);
        }
        let (key, value) = record_at(&pos, src)?;
        (key, value, pos.path.leaf())
    };
    if key >= limit {
        return Ok(None);
    }
    decode_idl_into(value, leaf_pgno, pages)?;
    Ok(Some(key))
}

/// A free-DB key (a txnid), found on page `pgno`.
fn record_key(key: &[u8], pgno: u64) -> Result<u64> {
    let key: [u8; 8] = key
        .try_into()
        .map_err(|_| Error::corrupted(pgno, "free-DB key is not 8 bytes"))?;
    Ok(u64::from_le_bytes(key))
}

/// The free-DB record at `pos`: its txnid key and its IDL value.
fn record_at<'s>(pos: &Position, src: &'s dyn PageSource) -> Result<(u64, &'s [u8])> {
    let (key, value) = pos.current(src)?;
    Ok((record_key(key, pos.path.leaf())?, value))
}

/// What [`records_near_end`] found: the records, newest first (their keys and pages, if
/// asked to decode them), the oldest one's key, and whether taking them can give the last
/// page back: one of them lists it, or one is stored in an overflow run that holds it.
#[derive(Default)]
struct NearEnd {
    records: Vec<(u64, Vec<u64>)>,
    oldest: Option<u64>,
    holds_last: bool,
}

/// Of the `count` newest free-DB records with keys in `from..limit` and below `below`,
/// those whose highest page (the first of the IDL, which lists pages in descending order)
/// is `near_end` or above, and whether they list or are stored on page `last`; their
/// pages too if `decode`. One descent, then a step back per record.
fn records_near_end(
    src: &dyn PageSource,
    free_db: &DbRecord,
    (from, limit): (u64, u64),
    (near_end, last): (u64, u64),
    (count, below): (usize, u64),
    decode: bool,
) -> Result<NearEnd> {
    let mut found = NearEnd::default();
    let limit = limit.min(below);
    if from >= limit {
        return Ok(found);
    }
    let mut pos = Position::default();
    let past = pos.seek(src, free_db, KeyCmp::Integer, &limit.to_le_bytes())?;
    // The record before the first one at or past `limit` (the last one if there is none).
    if !pos.prev(src, free_db)? && past.is_some() {
        return Ok(found);
    }
    // The leaf the position is on, parsed once for all its records.
    let mut leaf: Option<crate::format::page::PageView<'_>> = None;
    for _ in 0..count {
        if !pos.is_set() {
            break; // an empty free DB
        }
        let pgno = pos.path.leaf();
        let page = match leaf {
            Some(page) if page.pgno() == pgno => page,
            _ => *leaf.insert(crate::btree::view(src, pgno)?),
        };
        let Ok(node) = page.node(pos.path.leaf_idx()) else {
            break; // past the last record
        };
        let key = record_key(node.key, pgno)?;
        let value = crate::btree::node_value(src, &node)?;
        if key < from || key >= limit {
            break;
        }
        let top = value
            .get(..16)
            .filter(|head| head[..8] != [0; 8])
            .map(|head| u64::from_le_bytes(head[8..].try_into().unwrap()));
        if top.is_some_and(|top| top >= near_end) {
            let stored_on_last = node.flags & crate::format::page::node_flags::BIGDATA != 0 && {
                let run = overflow_pages(src.page_size(), value.len());
                (node.overflow_pgno()..node.overflow_pgno() + run as u64).contains(&last)
            };
            found.holds_last |= top == Some(last) || stored_on_last;
            found.oldest = Some(key);
            if decode {
                found
                    .records
                    .push((key, decode_idl(value, pos.path.leaf())?));
            }
        }
        if !pos.prev(src, free_db)? {
            break;
        }
    }
    Ok(found)
}

/// How often (in txn ids) a commit looks for the records that list pages near the end,
/// and how many records each round of the look reads.
const TAIL_LOOKUP_EVERY: u64 = 16;

/// Most rounds of one look: each after a round that gave pages back (so the work is in
/// proportion to what goes back; the cap only bounds a pathological free list).
const TAIL_LOOKUP_ROUNDS: usize = 64;

/// How often (in txn ids) a commit looks even where a look found nothing since and no
/// commit could have freed the last page ([`TailRun`](crate::store::TailRun)): a bound,
/// should that reasoning miss a case, on how long the free end could wait.
const TAIL_LOOKUP_ANYWAY: u64 = 256;

/// Before commit `txnid` gives the free end of the file back: trims the free pages it
/// took; and every [`TAIL_LOOKUP_EVERY`]th commit, takes those of the newest
/// `TAIL_LOOKUP_EVERY` reclaimable records that list a page near the end (among the last
/// 64th of the snapshot, and at least its last 16 pages), and trims again; but only if
/// one of them lists the last page or is stored on it (else the round could give nothing
/// back, and taking the records would only move their pages into this commit's record:
/// in W8's one-put commits 95% of the looks did that, a record of up to a thousand pages
/// each time). A round that gave pages back is followed by one over the records below the
/// oldest it took, up to [`TAIL_LOOKUP_ROUNDS`].
///
/// Allocation takes the free list oldest first, and it is written back with the lowest
/// pages under the oldest keys, so the pages a large delete frees at the end wait in a
/// newer record. Taken here, they go back (the pages not trimmed) in this commit's own
/// record, the newest, which the next look finds if they are still near the end. Near,
/// not last: a large record's own pages are often the last ones, allocated after those it
/// lists; taking it frees them, and the next look gives them back. A large pool is written
/// back in several records under consecutive old keys, the highest pages under the
/// highest key: once the free end's top record is given back, the next part of the end is
/// in the record just below it, which the next round finds (with the newest records only,
/// a file kept 80 MB of free end for good, `tests/write_map.rs`). A round is one descent
/// of the free DB and a step per record (a few thousand instructions), hence not on every
/// commit; and no look is made while a look found nothing and every commit since left
/// the last page out of its records ([`TailRun`](crate::store::TailRun)), but every
/// [`TAIL_LOOKUP_ANYWAY`]th commit.
pub fn take_tail_records(pages: &mut DirtyPages<'_>, txnid: u64) -> Result<()> {
    pages.trim_free_tail();
    if !txnid.is_multiple_of(TAIL_LOOKUP_EVERY) {
        return Ok(());
    }
    let Some((free_db, from, limit)) = pages.reclaim().untaken() else {
        return Ok(());
    };
    if pages.tail_run(txnid).is_some_and(|run| run.looked)
        && !txnid.is_multiple_of(TAIL_LOOKUP_ANYWAY)
    {
        return Ok(());
    }
    let mut below = u64::MAX;
    let mut found_nothing = false;
    for _ in 0..TAIL_LOOKUP_ROUNDS {
        let window = (pages.next_pgno / 64).max(16);
        let near_end = pages.next_pgno.saturating_sub(window);
        // The trim before this round left the last page in use or in no list the txn
        // holds: the round can give pages back only if a record lists it (its first,
        // highest page), or if a record is stored on it (taking the record frees its run,
        // which a later look gives back). Otherwise taking the records would only move
        // their pages from record to record, on every look. They are decoded only then.
        let look = |decode| {
            records_near_end(
                &*pages,
                &free_db,
                (from, limit),
                (near_end, pages.next_pgno - 1),
                (TAIL_LOOKUP_EVERY as usize, below),
                decode,
            )
        };
        let near = look(false)?;
        let (Some(oldest), true) = (near.oldest, near.holds_last) else {
            found_nothing = true;
            break;
        };
        let near = look(true)?;
        debug_assert_eq!(near.oldest, Some(oldest), "the same records, decoded");
        below = oldest;
        for (key, list) in near.records {
            pages.take_record(key, &list, false)?;
        }
        if pages.trim_free_tail() == 0 {
            break;
        }
    }
    // A reader older than the base keeps records from the look (keys from `limit` on).
    pages.note_tail_look(txnid, found_nothing && limit >= txnid - 1);
    Ok(())
}

/// The length a free-DB record of `needed` bytes is written with once the lists moved
/// (the first round writes exact lengths): room for the few pages the next saving round
/// adds, so later rounds rewrite it in place. Whole page
/// numbers, as LMDB's own records. A record that fits in its leaf stays there (the slack
/// never pushes it onto an overflow page, which would cost a page and its copy on every
/// write); a large (overflow) record fills the run its exact size needs, so that giving
/// the slack back at the end frees no page.
fn slack_len(needed: usize, page_size: usize) -> usize {
    let inline_max = max_inline_record(page_size);
    if needed <= inline_max {
        return (needed + needed / 8 + 64)
            .next_multiple_of(8)
            .min(inline_max);
    }
    let pages = overflow_pages(page_size, needed);
    (pages * page_size - crate::format::page::PAGE_HEADER_SIZE) / 8 * 8
}

/// The longest free-DB record (whole page numbers) stored in its leaf: its node (header,
/// 8-byte key, value) is at most [`node_max`](crate::format::page::node_max).
fn max_inline_record(page_size: usize) -> usize {
    let room = crate::format::page::node_max(page_size) - crate::format::page::NODE_HEADER_SIZE - 8;
    room / 8 * 8
}

/// The most pages a remainder of the pool that joins the txn's own record may have (see
/// [`plan_records`]): a one-put commit's worth, and then some.
const SMALL_POOL: usize = 16;

/// The most page numbers a record of the pool is written back with: a page's worth, as
/// LMDB's `maxfree_1pg`. The next txn then reads (and rewrites) at most a page of them per
/// record it takes, however many pages are free in the file.
fn pool_record_cap(page_size: usize) -> usize {
    (page_size - crate::format::page::PAGE_HEADER_SIZE) / 8 - 1
}

/// One free-DB record a saving round writes: its key and its pages (descending).
#[derive(PartialEq, Eq, Debug, Default)]
struct PlannedRecord {
    key: u64,
    pages: Vec<u64>,
}

/// Plans a round's records into `out`: the txn's own frees (`loose` and `freed`) under
/// `txnid`, and the pool (`pool`, descending) in records of at most `cap` pages under the
/// keys `1..=max_consumed`, as LMDB's `mdb_freelist_save` writes its `me_pghead` back.
/// Those keys are free: records are taken oldest first, so every key up to the newest
/// taken was taken (and deleted). The lowest pages go under the lowest key, to be taken
/// first. Without a key to use (`max_consumed` 0), the pool joins the txn's own record.
///
/// So does a pool of at most [`SMALL_POOL`] pages when no reader holds a snapshot older
/// than the txn's base (`no_older_reader`). Written back on its own, such a remainder is
/// the oldest record, too small for the next txn, which takes it and the record after it
/// and leaves a remainder in turn: two records taken and two written on every commit (W8's
/// one-put commits: 1.8 of each, where one of each suffices). In the txn's own record
/// (reusable two commits later when no reader is older) the next txn takes one record, as
/// large as what it frees. A reader older than the base would keep such pages from reuse
/// until it ends: then the pool goes back under the old keys, as LMDB's does.
fn plan_records(
    free: &mut crate::store::FreePages,
    txnid: u64,
    (max_consumed, no_older_reader): (u64, bool),
    cap: usize,
    out: &mut Vec<PlannedRecord>,
    sort_scratch: &mut Vec<u64>,
    spare: &mut Vec<Vec<u64>>,
) {
    crate::store::sort_pgnos_descending(&mut free.loose, sort_scratch);
    crate::store::sort_pgnos_descending(&mut free.freed, sort_scratch);
    debug_assert!(
        free.pool.windows(2).all(|w| w[0] > w[1]),
        "pool out of order"
    );
    let mut records = std::mem::take(out);
    let mut slot = 0;
    let mut next = |records: &mut Vec<PlannedRecord>, key: u64| -> usize {
        if slot == records.len() {
            add_record(records, spare);
        }
        records[slot].key = key;
        records[slot].pages.clear();
        slot += 1;
        slot - 1
    };
    let own = next(&mut records, txnid);
    crate::store::merge_descending(&free.loose, &free.freed, &mut records[own].pages);
    let pool = &free.pool[..];
    if pool.is_empty() {
        // Nothing taken and left over: the txn's own record only.
    } else if max_consumed == 0 || (no_older_reader && pool.len() <= SMALL_POOL) {
        // No key is free (the pool comes from records taken out of order), or the pool is
        // a small remainder: it joins the txn's own record.
        crate::store::merge_descending_into(&mut records[own].pages, pool);
    } else {
        let chunks = (pool.len().div_ceil(cap) as u64).min(max_consumed);
        // With too few keys, the records share the pool evenly (larger than a page), as
        // LMDB's do.
        let size = pool.len().div_ceil(chunks as usize);
        let first_key = max_consumed + 1 - chunks;
        let mut end = pool.len();
        for j in 0..chunks {
            let start = end.saturating_sub(size);
            let r = next(&mut records, first_key + j);
            records[r].pages.extend_from_slice(&pool[start..end]);
            end = start;
        }
        debug_assert_eq!(end, 0, "the whole pool is planned");
    }
    if records.len() > slot {
        drop_records(&mut records, slot, spare);
    }
    debug_assert!(
        records
            .iter()
            .all(|r| r.pages.windows(2).all(|w| w[0] > w[1])),
        "a page is free twice"
    );
    *out = records;
}

/// Adds a record to `records`, with a spare list if [`drop_records`] kept one: the number of
/// records changes from commit to commit, and a list dropped with its record would be
/// allocated again.
#[cold]
#[inline(never)]
fn add_record(records: &mut Vec<PlannedRecord>, spare: &mut Vec<Vec<u64>>) {
    records.push(PlannedRecord {
        key: 0,
        pages: spare.pop().unwrap_or_default(),
    });
}

/// Drops the records from `len` on, keeping their lists in `spare` for [`add_record`],
/// but not those a huge commit grew (as [`SaveScratch::trim`]).
#[cold]
#[inline(never)]
fn drop_records(records: &mut Vec<PlannedRecord>, len: usize, spare: &mut Vec<Vec<u64>>) {
    for record in records.drain(len..) {
        if (1..=SaveScratch::KEEP).contains(&record.pages.capacity()) {
            spare.push(record.pages);
        }
    }
}

/// Writes the txn's free-page bookkeeping into the free DB: deletes the records it
/// consumed, writes back the pages it took from them and did not use (in records of at
/// most a page, under the consumed keys), and saves the pages it freed under `txnid`.
///
/// Saving changes the free DB, which allocates pages (from the very lists being saved) and
/// frees the free DB's old pages, so the records are recomputed and saved again until they
/// no longer change. The pages on the way to the records are copied before the first
/// round, so usually the first records written, each of its exact length, are final: if
/// writing them allocated and freed nothing, the save ends there. Otherwise a record keeps
/// its size between later rounds (it is written with slack and LMDB readers use the count,
/// not the length), so they rewrite it in place and allocate nothing: the loop settles in
/// two or three more rounds.
///
/// With `watch_tail` (the commit gives the free end of the file back), notes whether the
/// records written leave the file's last page out ([`DirtyPages::note_tail_saved`]).
pub fn save(
    pages: &mut DirtyPages<'_>,
    free_db: &mut DbRecord,
    txnid: u64,
    watch_tail: bool,
) -> Result<()> {
    // Copy the free DB's pages on the way to the records first, while records may still be
    // taken: the copies then come from the free list (as LMDB's do), not from the end of
    // the file, which a commit that had used up the pages it took would otherwise grow by
    // a page or two, its record waiting in the list one more each time (the file of W8's
    // one-put commits through the C ABI grew by half in 20,000 commits). And the
    // allocation (and the freeing of the old copies) happens before the lists are taken,
    // so the first round's records are usually the final ones.
    let mut tree = TreeMut {
        store: &mut *pages,
        db: &mut *free_db,
        cmp: KeyCmp::Integer,
    };
    // The txn's own record goes after every other (its key, the txn's id, is the
    // highest); the records taken are deleted, and the pool's written, at the left edge
    // (those keys are below every record left): the deletes below copy that edge, still
    // before the lists are taken.
    tree.touch_edge(true)?;
    // Delete the records taken, still taking more if a delete needs pages (it may copy a
    // sibling to even out a leaf): those are deleted in turn, the oldest left each time.
    let mut deleted = 0;
    while deleted < pages.reclaim().consumed.len() {
        // Up to 8 keys at a time, copied out of the list the deletes may add to.
        let mut keys = [[0u8; 8]; 8];
        let batch = (pages.reclaim().consumed.len() - deleted).min(keys.len());
        for (slot, key) in keys.iter_mut().zip(&pages.reclaim().consumed[deleted..]) {
            *slot = key.to_le_bytes();
        }
        let mut tree = TreeMut {
            store: &mut *pages,
            db: &mut *free_db,
            cmp: KeyCmp::Integer,
        };
        // Taken in order, records are the oldest left: the free DB's first.
        deleted += match tree.delete_leading(&keys[..batch])? {
            0 if tree.delete(&keys[0])? => 1,
            0 => {
                return Err(Error::corrupted(
                    free_db.root,
                    "consumed free-DB record vanished",
                ))
            }
            n => n,
        };
    }
    pages.reclaim_mut().exhausted();
    // Every key below the first record not taken in order is free; a record taken out of
    // order (`take_tail_records`) is deleted, but its key is not reused.
    let max_consumed = pages.reclaim().free_keys_end().saturating_sub(1);
    // Emptied, the list goes back for the next txn (`release_buffers`).
    pages.reclaim_mut().consumed.clear();
    debug_assert!(
        max_consumed < txnid,
        "a consumed record is older than the txn"
    );
    if own_record_shortcut::allowed() && save_own_record_in_leaf(pages, free_db, txnid)? {
        own_record_shortcut::taken();
        if watch_tail {
            pages.note_tail_saved(txnid, false);
        }
        return Ok(());
    }
    SCRATCH.with_borrow_mut(|scratch| {
        let r = settle(pages, free_db, txnid, max_consumed, scratch);
        if r.is_ok() && watch_tail {
            // `lens`: every record this commit wrote, with its length.
            let inline_max = max_inline_record(pages.page_size());
            let overflow = scratch.lens.iter().any(|&(_, len)| len > inline_max);
            pages.note_tail_saved(txnid, overflow);
        }
        scratch.trim();
        r
    })
}

/// Whether [`save`] may take [`save_own_record_in_leaf`]: always, but in the unit test
/// that runs the same commits with and without it and compares the files.
#[cfg(not(test))]
mod own_record_shortcut {
    #[inline(always)]
    pub(super) fn allowed() -> bool {
        true
    }

    #[inline(always)]
    pub(super) fn taken() {}
}

#[cfg(test)]
mod own_record_shortcut {
    use std::cell::Cell;

    thread_local! {
        /// Whether the shortcut may be taken, and how many times it was.
        static STATE: Cell<(bool, u64)> = const { Cell::new((true, 0)) };
    }

    pub(super) fn allowed() -> bool {
        STATE.get().0
    }

    pub(super) fn taken() {
        STATE.set((true, STATE.get().1 + 1));
    }

    /// Allows the shortcut or not on this thread, and resets its count.
    pub(super) fn set(allowed: bool) {
        STATE.set((allowed, 0));
    }

    /// Times the shortcut was taken on this thread since [`set`].
    pub(super) fn count() -> u64 {
        STATE.get().1
    }
}

/// The most pages the txn's own record holds for [`save_own_record_in_leaf`] (a one-put
/// commit frees four or five).
const SMALL_RECORD: usize = 16;

/// The save of a small commit's free pages without the rounds of [`settle`], when its
/// first round would be final: the txn used every page it took from the free list (the
/// pool is empty), so its own record (the pages it freed, at most [`SMALL_RECORD`]) is the
/// only one to write; and the free DB is one leaf, already copied for writing, that takes
/// it at its end in place, which allocates and frees no page. The record is the one that
/// round writes, byte for byte: its exact length, no slack. Returns false, having written
/// nothing (the lists may be sorted), if the case is another.
fn save_own_record_in_leaf(
    pages: &mut DirtyPages<'_>,
    free_db: &mut DbRecord,
    txnid: u64,
) -> Result<bool> {
    let root = free_db.root;
    if free_db.depth != 1 || !pages.is_dirty(root) {
        return Ok(false);
    }
    let free = pages.free_lists_mut();
    let count = free.loose.len() + free.freed.len();
    let len = 8 * (count + 1);
    if !free.pool.is_empty()
        || count == 0
        || count > SMALL_RECORD
        || len > max_inline_record(pages.page_size())
    {
        return Ok(false);
    }
    let free = pages.free_lists_mut();
    free.loose.sort_unstable_by(|a, b| b.cmp(a));
    free.freed.sort_unstable_by(|a, b| b.cmp(a));
    // LMDB's IDL: the count, then the pages in descending order (the two lists merged).
    let mut value = [0u8; 8 * (SMALL_RECORD + 1)];
    value[..8].copy_from_slice(&(count as u64).to_le_bytes());
    let (mut loose, mut freed) = (&free.loose[..], &free.freed[..]);
    let slots = value[8..len].chunks_exact_mut(8);
    if loose.is_empty() {
        // The usual case: no page was allocated and freed again.
        for (slot, page) in slots.zip(freed) {
            slot.copy_from_slice(&page.to_le_bytes());
        }
    } else {
        for slot in slots {
            let page = match (loose.split_first(), freed.split_first()) {
                (Some((&a, rest)), Some((&b, _))) if a > b => {
                    loose = rest;
                    a
                }
                (_, Some((&b, rest))) => {
                    freed = rest;
                    b
                }
                (Some((&a, rest)), None) => {
                    loose = rest;
                    a
                }
                (None, None) => unreachable!("count is the two lists' length"),
            };
            slot.copy_from_slice(&page.to_le_bytes());
        }
    }
    debug_assert!(
        value[8..len]
            .chunks_exact(8)
            .zip(value[16..len].chunks_exact(8))
            .all(|(a, b)| u64::from_le_bytes(a.try_into().unwrap())
                > u64::from_le_bytes(b.try_into().unwrap())),
        "a page is free twice"
    );
    let edits = pages.free_list_edits();
    let appended = TreeMut {
        store: &mut *pages,
        db: &mut *free_db,
        cmp: KeyCmp::Integer,
    }
    .append_to_leaf(root, &txnid.to_le_bytes(), &value[..len])?;
    debug_assert_eq!(
        pages.free_list_edits(),
        edits,
        "an append in place moved the free lists"
    );
    Ok(appended)
}

/// The buffers the saving rounds build records in, kept from commit to commit.
struct SaveScratch {
    /// What the last round wrote (left over from the last commit before the first round:
    /// read only once `lens` names a key of this commit's).
    written: Vec<PlannedRecord>,
    /// What this round plans.
    planned: Vec<PlannedRecord>,
    /// The length each key's record was written with in this commit.
    lens: Vec<(u64, usize)>,
    /// A record's encoded value.
    value: Vec<u8>,
    /// The second buffer of the free lists' sort.
    sort_scratch: Vec<u64>,
    /// Page lists of records a round planned and a later one did not, for the next
    /// records (so that a commit allocates none when its number of records changes).
    spare: Vec<Vec<u64>>,
}

impl Default for SaveScratch {
    /// Room for a record of as many pages as the store's lists have from the start
    /// (`PRESIZED_ENTRIES`, LMDB's allocation at open in spirit), and a few hundred pages
    /// to sort, so that a thread's first commits, or the first large one, do not grow them
    /// step by step: the txn's own record's list waits among the spares.
    fn default() -> Self {
        let pages = crate::store::PRESIZED_ENTRIES;
        SaveScratch {
            written: Vec::new(),
            planned: Vec::new(),
            lens: Vec::new(),
            value: Vec::with_capacity(8 * (pages + 1)),
            sort_scratch: Vec::with_capacity(512),
            spare: vec![Vec::with_capacity(pages)],
        }
    }
}

impl SaveScratch {
    /// The most pages a list keeps room for from one commit to the next.
    const KEEP: usize = 1 << 16;

    /// Lets go of buffers a huge commit grew (more than a few pages of records).
    fn trim(&mut self) {
        for records in [&mut self.written, &mut self.planned] {
            for r in records.iter_mut() {
                if r.pages.capacity() > Self::KEEP {
                    r.pages = Vec::new();
                }
            }
        }
        if self.value.capacity() > 8 * Self::KEEP {
            self.value = Vec::new();
        }
        if self.sort_scratch.capacity() > Self::KEEP {
            self.sort_scratch = Vec::new();
        }
    }
}

thread_local! {
    /// A write txn stays on its thread, so its commit finds the buffers the thread's last
    /// commit used: saving the free list allocates nothing in the steady state.
    static SCRATCH: std::cell::RefCell<SaveScratch> = std::cell::RefCell::default();
}

/// The rounds of [`save`]: plans the records, writes them, until they settle.
fn settle(
    pages: &mut DirtyPages<'_>,
    free_db: &mut DbRecord,
    txnid: u64,
    max_consumed: u64,
    scratch: &mut SaveScratch,
) -> Result<()> {
    let page_size = pages.page_size();
    let cap = pool_record_cap(page_size);
    // Records up to the base's are reusable: no reader is older than the base.
    let no_older_reader = pages.reclaim().limit() >= txnid - 1;
    let inline_max = max_inline_record(page_size);
    let SaveScratch {
        written,
        planned,
        lens,
        value,
        sort_scratch,
        spare,
    } = scratch;
    lens.clear();
    let mut shrink_tried = false;
    for round in 0..64 {
        plan_records(
            pages.free_lists_mut(),
            txnid,
            (max_consumed, no_older_reader),
            cap,
            planned,
            sort_scratch,
            spare,
        );
        // A record written in an earlier round stays, empty if need be: deleting it would
        // free its page, which the next round would write again (and so on).
        for (key, _) in lens.iter() {
            if !planned.iter().any(|r| r.key == *key) {
                planned.push(PlannedRecord {
                    key: *key,
                    pages: Vec::new(),
                });
            }
        }
        if round == 0 && planned.iter().all(|r| r.pages.is_empty()) {
            return Ok(());
        }
        let settled = round > 0 && planned == written;
        if settled {
            // LMDB's records hold exactly their count of pages (and checkers such as
            // py-lmdb's verify insist), so the slack is given back once; if that moved
            // pages, the loop goes on and the records keep their slack (readers use the
            // count).
            if shrink_tried || all_exact(lens, planned) {
                return Ok(());
            }
            shrink_tried = true;
        }
        // The lists this round planned from: if its writes leave them as they are, the
        // next round would plan the same records (settled) and need not be run.
        let edits = pages.free_list_edits();
        for record in planned.iter() {
            let old = lens.iter().position(|&(key, _)| key == record.key);
            if record.pages.is_empty() && old.is_none() {
                continue;
            }
            let needed = 8 * (record.pages.len() + 1);
            // A length `len` whose overflow run also holds the exact record.
            let same_run =
                |len| overflow_pages(page_size, needed) == overflow_pages(page_size, len);
            let len = match old.map(|i| lens[i].1) {
                // The shrinking round: exact, unless that changes the run's length.
                Some(len) if settled => {
                    if same_run(len) {
                        needed
                    } else {
                        len
                    }
                }
                // A record on overflow pages that shrank within its run (writing the
                // record took pages from its own list): rewritten in place, exact, as
                // the shrinking round would.
                Some(len) if needed <= len && needed > inline_max && same_run(len) => needed,
                Some(len) if needed <= len && needed + 2 * page_size >= len => len,
                Some(_) => slack_len(needed, page_size),
                // A new record, likely final already in the first round (the path to the
                // records was copied before it) or small: its exact size, no slack to give
                // back in another round; if the list still moves, later rounds add slack.
                None if needed < page_size / 4 || round == 0 => needed,
                None => slack_len(needed, page_size),
            };
            match old {
                Some(i) if lens[i].1 == len && written.contains(record) => continue,
                Some(i) => lens[i].1 = len,
                None => lens.push((record.key, len)),
            }
            encode_idl_into(&record.pages, len, value);
            let mut tree = TreeMut {
                store: &mut *pages,
                db: &mut *free_db,
                cmp: KeyCmp::Integer,
            };
            let key = record.key.to_le_bytes();
            if record.key == txnid && old.is_none() {
                // The txn's own record, new: its key (the txn's id) sorts after every
                // record (they are keyed by committed txns, or by keys below those), so it
                // goes down the right edge with one comparison, as an APPEND put.
                // A free DB of one leaf (the usual one: a few records) that the deletes
                // above copied takes it at its end without a descent, if it has room.
                // (The same test inside `put_tracked`, for every APPEND put, cost W8's
                // steady one-put commit ~100 instructions more and random puts ~15.)
                let root = tree.db.root;
                if tree.db.depth == 1
                    && tree.store.is_dirty(root)
                    && tree.append_to_leaf(root, &key, value)?
                {
                    continue;
                }
                let append = PutMode {
                    append: true,
                    ..PutMode::default()
                };
                match tree.put(&key, value, append) {
                    Err(Error::KeyExist) => {
                        debug_assert!(false, "free-DB record {txnid} exists before its txn");
                        tree.put(&key, value, PutMode::default())?;
                    }
                    r => r?,
                }
            } else {
                tree.put(&key, value, PutMode::default())?;
            }
        }
        if pages.free_list_edits() == edits && !settled && all_exact(lens, planned) {
            // Settled, every record of its exact length: the round after the next would
            // find nothing to give back either.
            return Ok(());
        }
        // Keep this round's records; the previous one's buffers build the next.
        std::mem::swap(written, planned);
    }
    Err(Error::Panic("free list did not settle while saving"))
}

/// True if every record written (`lens`: key and length) has its planned record's exact
/// length, with no slack left to give back.
fn all_exact(lens: &[(u64, usize)], planned: &[PlannedRecord]) -> bool {
    lens.iter()
        .all(|&(key, len)| len == exact_len(planned, key))
}

/// The exact length of `key`'s planned record.
fn exact_len(planned: &[PlannedRecord], key: u64) -> usize {
    planned
        .iter()
        .find(|r| r.key == key)
        .map_or(0, |r| 8 * (r.pages.len() + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::page::{node_max, NODE_HEADER_SIZE};

    /// The small commit's own record, appended to the free DB's leaf without the saving
    /// rounds, is the record the rounds' first would write, byte for byte: the same commits
    /// (a load, one-put commits, commits that delete, a commit of many deletes) on two
    /// environments, one with the shortcut and one without, leave the same file, the
    /// shortcut taken in many of the one-put commits. Both with a map that grows (the file
    /// gives its free end back, as through the Rust API by default) and with a fixed map
    /// size (it does not, as LMDB's and the C ABI's).
    #[test]
    fn the_own_record_shortcut_writes_what_the_rounds_write() {
        for fixed_map in [false, true] {
            own_record_shortcut_matches_the_rounds(fixed_map);
        }
    }

    fn own_record_shortcut_matches_the_rounds(fixed_map: bool) {
        use crate::{env_flags, Database, EnvOptions};
        let run = |shortcut: bool| -> (Vec<u8>, u64) {
            own_record_shortcut::set(shortcut);
            let mut opts = EnvOptions::new();
            opts.flags(env_flags::NO_SYNC);
            if fixed_map {
                opts.map_size(64 << 20);
            }
            let (dir, env) = crate::env::temp_env(&opts);
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            let mut next = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut keys = Vec::new();
            for _ in 0..10 {
                let mut txn = env.begin_write().unwrap();
                for _ in 0..200 {
                    let key = next().to_be_bytes();
                    txn.put(Database::MAIN, &key, &[7; 100], 0).unwrap();
                    keys.push(key);
                }
                txn.commit().unwrap();
            }
            for i in 0..3_000u64 {
                let mut txn = env.begin_write().unwrap();
                let key = next().to_be_bytes();
                txn.put(Database::MAIN, &key, &[i as u8; 60], 0).unwrap();
                keys.push(key);
                if i % 7 == 0 {
                    let gone = keys.swap_remove((next() % keys.len() as u64) as usize);
                    txn.delete(Database::MAIN, &gone).unwrap();
                }
                txn.commit().unwrap();
            }
            let mut txn = env.begin_write().unwrap();
            for key in keys.drain(..1_000) {
                txn.delete(Database::MAIN, &key).unwrap();
            }
            txn.commit().unwrap();
            for _ in 0..500 {
                let mut txn = env.begin_write().unwrap();
                txn.put(Database::MAIN, &next().to_be_bytes(), &[1; 30], 0)
                    .unwrap();
                txn.commit().unwrap();
            }
            env.check().unwrap();
            drop(env);
            let taken = own_record_shortcut::count();
            own_record_shortcut::set(true);
            (std::fs::read(dir.path().join("data.mdb")).unwrap(), taken)
        };
        let (with, taken) = run(true);
        let (without, not_taken) = run(false);
        assert_eq!(not_taken, 0, "the shortcut was off");
        assert!(
            taken >= 500,
            "fixed map {fixed_map}: the shortcut taken in {taken} commits of 3,511"
        );
        assert_eq!(
            with.len(),
            without.len(),
            "fixed map {fixed_map}: the files' lengths"
        );
        assert!(with == without, "fixed map {fixed_map}: the files differ");
    }

    /// A record's first length: never shorter than it needs, whole page numbers, in its
    /// leaf whenever its exact length fits there, else filling its overflow run.
    #[test]
    fn slack_keeps_leaf_records_in_the_leaf_and_fills_overflow_runs() {
        for page_size in [4096, 8192, 16384] {
            let fits_leaf = |len: usize| NODE_HEADER_SIZE + 8 + len <= node_max(page_size);
            for count in 0..3 * page_size / 8 {
                let needed = 8 * (count + 1);
                let len = slack_len(needed, page_size);
                assert!(
                    len >= needed && len.is_multiple_of(8),
                    "{page_size} {needed}: {len}"
                );
                if fits_leaf(needed) {
                    assert!(
                        fits_leaf(len),
                        "{page_size} {needed}: {len} leaves the leaf"
                    );
                } else {
                    let run = overflow_pages(page_size, needed);
                    assert_eq!(overflow_pages(page_size, len), run, "{page_size} {needed}");
                    assert!(len + 8 > run * page_size - crate::format::page::PAGE_HEADER_SIZE);
                }
            }
            // Room for a few more pages where there is some.
            assert!(slack_len(80, page_size) > 80);
        }
    }

    /// A look from 0 (a txn's first) takes the free DB's first record, found along first
    /// children; a later look the first record at or after its key: the same answers as
    /// a scan of the records, over a free DB of several leaves and within the limit.
    #[test]
    fn next_reclaimable_finds_the_first_record_at_or_after_from() {
        use crate::store::memory::MemoryPages;
        let mut src = MemoryPages::new(4096);
        let mut db = DbRecord::empty(0);
        let keys: Vec<u64> = (0..1_500).map(|i| 7 + 3 * i).collect();
        for &key in &keys {
            let mut value = Vec::new();
            encode_idl_into(&[key + 2, key + 1], 8 * 3, &mut value);
            TreeMut {
                store: &mut src,
                db: &mut db,
                cmp: KeyCmp::Integer,
            }
            .put(&key.to_le_bytes(), &value, PutMode::default())
            .unwrap();
        }
        assert!(db.depth >= 2, "several leaves: {} levels", db.depth);
        let mut pages = Vec::new();
        let last = *keys.last().unwrap();
        for from in (0..last + 3).step_by(2).chain([1, 7, 8, last]) {
            for limit in [u64::MAX, from + 2, 7] {
                pages.clear();
                let found = next_reclaimable(&src, &db, from, limit, &mut pages).unwrap();
                let want = keys
                    .iter()
                    .copied()
                    .find(|&k| k >= from)
                    .filter(|&k| k < limit);
                assert_eq!(found, want, "from {from}, limit {limit}");
                if let Some(key) = want {
                    assert_eq!(pages, [key + 2, key + 1], "from {from}");
                }
            }
        }
    }

    /// A look for records near the end finds those whose highest page is near it, and
    /// tells whether taking them can give the last page back: a record lists it, or is
    /// stored in an overflow run that holds it.
    #[test]
    fn records_near_the_end_say_whether_they_hold_the_last_page() {
        use crate::store::memory::MemoryPages;
        let mut src = MemoryPages::new(4096);
        let mut db = DbRecord::empty(0);
        let mut put = |src: &mut MemoryPages, key: u64, pages: &[u64]| {
            let mut value = Vec::new();
            encode_idl_into(pages, 8 * (pages.len() + 1), &mut value);
            TreeMut {
                store: src,
                db: &mut db,
                cmp: KeyCmp::Integer,
            }
            .put(&key.to_le_bytes(), &value, PutMode::default())
            .unwrap();
        };
        put(&mut src, 4, &[60, 50]);
        put(&mut src, 5, &[100, 90, 80]);
        put(&mut src, 6, &[5_120, 5_110]);
        // 600 pages: more than a leaf holds, stored in an overflow run.
        let large: Vec<u64> = (4_000..4_600).rev().collect();
        put(&mut src, 7, &large);
        let look = |near_end, last| {
            let ask = |decode| {
                let range = (0, u64::MAX);
                records_near_end(&src, &db, range, (near_end, last), (16, u64::MAX), decode)
                    .unwrap()
            };
            let (quick, near) = (ask(false), ask(true));
            assert!(quick.records.is_empty(), "decoded only when asked");
            assert_eq!(
                (quick.oldest, quick.holds_last),
                (near.oldest, near.holds_last)
            );
            assert_eq!(near.oldest, near.records.last().map(|r| r.0));
            near
        };
        let keys = |near: &NearEnd| near.records.iter().map(|r| r.0).collect::<Vec<_>>();

        let near = look(5_000, 5_120);
        assert_eq!(
            keys(&near),
            [6],
            "newest first, only those reaching near_end"
        );
        assert_eq!(near.records[0].1, [5_120, 5_110]);
        assert!(near.holds_last, "record 6 lists the last page");
        let near = look(5_000, 5_121);
        assert_eq!(keys(&near), [6]);
        assert!(
            !near.holds_last,
            "no record lists page 5,121 or is stored on it"
        );
        let near = look(90, 7_000);
        assert_eq!(keys(&near), [7, 6, 5], "record 4 tops out below 90");
        assert!(!near.holds_last);

        // Record 7's own overflow run.
        let mut pos = Position::default();
        pos.seek(&src, &db, KeyCmp::Integer, &7u64.to_le_bytes())
            .unwrap();
        let leaf = crate::btree::view(&src, pos.path.leaf()).unwrap();
        let node = leaf.node(pos.path.leaf_idx()).unwrap();
        assert!(node.flags & crate::format::page::node_flags::BIGDATA != 0);
        let run = node.overflow_pgno();
        let run_len = overflow_pages(4096, 8 * 601) as u64;
        assert_eq!(run_len, 2);
        for last in [run, run + run_len - 1] {
            assert!(
                look(90, last).holds_last,
                "record 7 is stored on page {last}"
            );
        }
        assert!(!look(90, run + run_len).holds_last);
        assert_eq!(keys(&look(4_599, run)), [7, 6], "record 7 lists page 4,599");
    }

    /// A round that plans fewer records than the last keeps the lists of those it drops,
    /// and the next round with more records reuses them: the number of records moving
    /// from commit to commit allocates nothing.
    #[test]
    fn dropped_records_lend_their_lists_to_the_next_rounds() {
        let pool: Vec<u64> = (50..50 + 3 * SMALL_POOL as u64).rev().collect();
        let mut free = crate::store::FreePages {
            loose: vec![40],
            freed: vec![30, 31],
            pool,
        };
        let (mut out, mut sort_scratch, mut spare) = (Vec::new(), Vec::new(), Vec::new());
        let mut plan = |free: &mut crate::store::FreePages, cap| {
            plan_records(
                free,
                100,
                (7, false),
                cap,
                &mut out,
                &mut sort_scratch,
                &mut spare,
            );
            let lists = out.iter().map(|r| r.pages.as_ptr()).collect::<Vec<_>>();
            (lists, spare.iter().map(Vec::as_ptr).collect::<Vec<_>>())
        };
        // The pool in three records of at most SMALL_POOL pages, then in one, then in
        // three again.
        let (four, spare_after_four) = plan(&mut free, SMALL_POOL);
        assert_eq!((four.len(), spare_after_four.len()), (4, 0));
        let (two, spare_after_two) = plan(&mut free, 3 * SMALL_POOL);
        assert_eq!(two.len(), 2);
        assert_eq!(two[0], four[0], "the txn's own record keeps its list");
        assert_eq!(
            spare_after_two,
            four[2..],
            "the dropped records' lists are kept"
        );
        let (mut again, spare_after_again) = plan(&mut free, SMALL_POOL);
        assert!(spare_after_again.is_empty());
        let mut expected = [two[0], two[1], four[2], four[3]];
        again.sort_unstable();
        expected.sort_unstable();
        assert_eq!(again, expected, "no list allocated anew");
    }

    /// The pool's remainder goes back under the newest key taken, or, when small and no
    /// reader is older than the base, into the txn's own record.
    #[test]
    fn a_small_remainder_joins_the_own_record_unless_an_older_reader_would_pin_it() {
        let free = |pool: Vec<u64>| crate::store::FreePages {
            loose: vec![40],
            freed: vec![30, 31],
            pool,
        };
        let plan = |free: &mut crate::store::FreePages, no_older_reader| {
            let mut out = Vec::new();
            plan_records(
                free,
                100,
                (7, no_older_reader),
                509,
                &mut out,
                &mut Vec::new(),
                &mut Vec::new(),
            );
            out.into_iter()
                .map(|r| (r.key, r.pages))
                .collect::<Vec<_>>()
        };
        let small: Vec<u64> = (50..50 + SMALL_POOL as u64).rev().collect();
        let mut joined = vec![40, 31, 30];
        joined.extend(&small);
        joined.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(plan(&mut free(small.clone()), true), [(100, joined)]);
        assert_eq!(
            plan(&mut free(small.clone()), false),
            [(100, vec![40, 31, 30]), (7, small)]
        );
        let large: Vec<u64> = (50..51 + SMALL_POOL as u64).rev().collect();
        assert_eq!(
            plan(&mut free(large.clone()), true),
            [(100, vec![40, 31, 30]), (7, large)]
        );
    }
}
