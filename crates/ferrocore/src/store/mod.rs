//! The seam between the tree code and page storage.
//!
//! Tree algorithms (`btree`, `cursor`) see pages only through [`PageSource`] (read a page
//! by number) and [`PageStore`] (make a page writable, allocate, free). The map-backed
//! implementations live here: [`SnapshotPages`] for read transactions and [`DirtyPages`]
//! for the write transaction, which keeps every page it changes in memory until commit
//! (copy-on-write: a page reachable from a committed meta is never written in place).
//! Under `WRITE_MAP` the write txn's pages are not in memory but in the writable map
//! itself, at their own page numbers: pages no reader and no durable meta can reach.
//!
//! Files: `snapshot` (a read txn's pages), `dirty` (the write txn's pages, allocation and
//! spare buffers), `dirty_table` (the write txn's dirty pages by number), `mapped` (`WRITE_MAP`: the file grown before a page is written through
//! the map), `reclaim` (the refill hook through which the free list hands back pages),
//! `nested` (what a nested txn's abort undoes), `early` (pages a bulk load writes before
//! commit), `tail` (free pages at the end of the file given back), `checked` (pages known
//! to be well formed, so taking one over needs no full check), and, for unit tests
//! of the tree, `memory` (pages in a vector).

mod checked;
mod dirty;
mod dirty_table;
mod early;
mod mapped;
#[cfg(test)]
pub(crate) mod memory;
mod nested;
mod reclaim;
mod snapshot;
mod tail;

pub use checked::CheckedPages;
pub(crate) use dirty::PRESIZED_ENTRIES;
pub use dirty::{recycle_order, DirtyPages, FreePages, TxnBuffers};
pub use mapped::{mapped_file_len, MappedWrites};
pub use reclaim::{FindReclaimable, Reclaim};
pub use snapshot::SnapshotPages;
pub use tail::TailRun;

use dirty::PageBuf;
use dirty_table::DirtyTable;
use early::EarlyWrites;
use nested::NestLevel;
use snapshot::map_pages;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::error::Result;

/// Read access to pages by number.
pub trait PageSource {
    /// Page size in bytes.
    fn page_size(&self) -> usize;

    /// `count` consecutive pages starting at `pgno`, checked to lie within the snapshot.
    fn pages(&self, pgno: u64, count: usize) -> Result<&[u8]>;

    /// One page.
    #[inline]
    fn page(&self, pgno: u64) -> Result<&[u8]> {
        self.pages(pgno, 1)
    }
}

/// Write access: what copy-on-write tree mutation needs.
pub trait PageStore: PageSource {
    /// True if `pgno` was allocated by this transaction (and so may be written in place).
    fn is_dirty(&self, pgno: u64) -> bool;

    /// The buffer of a dirty page (or overflow run). Panics if `pgno` is not dirty.
    fn dirty_mut(&mut self, pgno: u64) -> &mut [u8];

    /// Returns the number of a writable copy of `pgno`: itself if dirty, else a new page
    /// holding a copy (the old page is freed as of this transaction).
    fn touch(&mut self, pgno: u64) -> Result<u64>;

    /// Allocates `count` consecutive new pages (content unspecified).
    fn alloc(&mut self, count: usize) -> Result<u64>;

    /// Frees `count` consecutive pages starting at `pgno`. `Corrupted` (and nothing freed)
    /// unless they are pages this store holds: at least one, past the metas, within the
    /// snapshot or within the dirty run at `pgno` (a run length read from a damaged file
    /// may say anything).
    fn free(&mut self, pgno: u64, count: usize) -> Result<()>;
}

/// A cheap hasher for page numbers (they are already well spread in their low bits).
#[derive(Default)]
pub struct PgnoHasher(u64);

impl Hasher for PgnoHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
}

/// Map from page number to something, hashed cheaply.
pub type PgnoMap<V> = HashMap<u64, V, BuildHasherDefault<PgnoHasher>>;

/// Appends to `out` the elements of `a` and `b`, both in descending order, in descending
/// order. Walks the shorter list and copies the longer one in blocks between its elements
/// (a commit merges a few pages into a free list of thousands).
pub fn merge_descending(a: &[u64], b: &[u64], out: &mut Vec<u64>) {
    let (short, mut long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    out.reserve(a.len() + b.len());
    for &x in short {
        // The elements of `long` that come before `x` (greater, or equal: the order
        // between equal elements does not matter).
        let before = long.partition_point(|&y| y >= x);
        out.extend_from_slice(&long[..before]);
        out.push(x);
        long = &long[before..];
    }
    out.extend_from_slice(long);
}

/// Empties `list`, keeping its allocation for the next txn unless a huge txn grew it past
/// `keep` elements.
#[inline]
pub(crate) fn empty_keeping<T>(list: &mut Vec<T>, keep: usize) {
    list.clear();
    if list.capacity() > keep {
        *list = Vec::new();
    }
}

/// Merges `src` into `dst`, both in descending order, keeping `dst` descending, in `dst`'s
/// own allocation (grown if need be). From the back. Lists of like lengths merge element
/// by element; otherwise the merge is driven by the shorter list: each of its elements
/// finds its place in the other with a binary search, and the run between two of them
/// moves in one block (the txn's few freed pages into a pool of hundreds, or the other
/// way).
// Inlined into its hot caller, the save's planning of records, as when it was the only
// caller (a call there cost ~20 instructions a one-put commit).
#[inline(always)]
pub fn merge_descending_into(dst: &mut Vec<u64>, src: &[u64]) {
    let (mut kept, mut from) = (dst.len(), src.len());
    dst.resize(kept + from, 0);
    // `dst[..kept]` and `src[..from]` are left to merge; `dst[kept + from..]` is final.
    if kept.min(from) * 8 >= kept.max(from) {
        // The smallest of the two lists' last elements goes last.
        while from > 0 {
            if kept > 0 && dst[kept - 1] < src[from - 1] {
                dst[kept + from - 1] = dst[kept - 1];
                kept -= 1;
            } else {
                dst[kept + from - 1] = src[from - 1];
                from -= 1;
            }
        }
    } else if from <= kept {
        while from > 0 {
            let x = src[from - 1];
            // The elements of `dst` below `x` go after it.
            let p = dst[..kept].partition_point(|&y| y >= x);
            dst.copy_within(p..kept, p + from);
            dst[p + from - 1] = x;
            (kept, from) = (p, from - 1);
        }
    } else {
        while kept > 0 {
            let x = dst[kept - 1];
            // The elements of `src` below `x` go after it.
            let q = src[..from].partition_point(|&y| y >= x);
            dst[kept + q..kept + from].copy_from_slice(&src[q..from]);
            dst[kept + q - 1] = x;
            (kept, from) = (kept - 1, q);
        }
        dst[..from].copy_from_slice(&src[..from]);
    }
}

/// The shortest list [`sort_pgnos`] sorts by radix (a comparison sort of a shorter one costs
/// less than the radix sort's passes over its 256 counters).
pub const RADIX_FROM: usize = 64;

/// [`sort_pgnos`], descending (the free lists' order). A list already in order up to a
/// few pages at its end (one an earlier round of the same commit's save sorted, with the
/// pages that round's own writes freed added since) has only those sorted, in `scratch`,
/// and merged in: a commit of a thousand puts sorted its ~600 freed pages three times.
#[inline]
pub fn sort_pgnos_descending(pgnos: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    if pgnos.len() < RADIX_FROM {
        pgnos.sort_unstable_by(|a, b| b.cmp(a));
    } else {
        sort_long_descending(pgnos, scratch);
    }
}

/// [`sort_pgnos_descending`] of a list of at least [`RADIX_FROM`] pages.
#[inline(never)]
fn sort_long_descending(pgnos: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    // The length of the list's leading run in descending order.
    let in_order = match pgnos.windows(2).position(|w| w[0] <= w[1]) {
        Some(i) => i + 1,
        None => return,
    };
    if pgnos.len() - in_order < RADIX_FROM && in_order >= RADIX_FROM {
        scratch.clear();
        scratch.extend_from_slice(&pgnos[in_order..]);
        pgnos.truncate(in_order);
        scratch.sort_unstable_by(|a, b| b.cmp(a));
        merge_descending_into(pgnos, scratch);
    } else {
        sort_pgnos(pgnos, scratch);
        pgnos.reverse();
    }
}

/// Sorts page numbers ascending. A list of more than a few dozen distinct numbers that are
/// not too sparse (at least one in 64 of the range they span, as a txn's dirty or freed
/// pages of a file mostly are) goes through a bitmap of that range in `scratch`; others
/// through a radix sort by bytes. A commit of a thousand random puts sorts some 600 to
/// 1,500 pages two to four times: a comparison sort of them was a tenth of the txn's
/// instructions, the radix sort ~60 a page, the bitmap ~15.
pub fn sort_pgnos(pgnos: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    if pgnos.len() < RADIX_FROM {
        pgnos.sort_unstable();
        return;
    }
    let (min, max) = pgnos
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), &p| (lo.min(p), hi.max(p)));
    let words = (max - min) / 64 + 1;
    if words <= pgnos.len() as u64 && sort_by_bitmap(pgnos, scratch, min, words as usize) {
        return;
    }
    sort_by_radix(pgnos, scratch, max);
}

/// Sorts `pgnos`, numbers from `min` on within `words` 64-bit words, through a bitmap in
/// `scratch`. False, and `pgnos` unchanged, if a number repeats (the bitmap would lose it).
fn sort_by_bitmap(pgnos: &mut [u64], scratch: &mut Vec<u64>, min: u64, words: usize) -> bool {
    scratch.clear();
    scratch.resize(words, 0);
    for &p in pgnos.iter() {
        let offset = p - min;
        let (word, bit) = ((offset / 64) as usize, 1u64 << (offset % 64));
        if scratch[word] & bit != 0 {
            return false;
        }
        scratch[word] |= bit;
    }
    let mut out = pgnos.iter_mut();
    for (word, &bits) in scratch.iter().enumerate() {
        let base = min + 64 * word as u64;
        let mut bits = bits;
        while bits != 0 {
            *out.next().expect("as many bits as numbers") = base + u64::from(bits.trailing_zeros());
            bits &= bits - 1;
        }
    }
    debug_assert!(out.next().is_none(), "as many numbers as bits");
    true
}

/// Sorts `pgnos`, none above `max`, by radix: by bytes, least significant first, over only
/// the bytes `max` uses, with `scratch` as the second buffer.
fn sort_by_radix(pgnos: &mut Vec<u64>, scratch: &mut Vec<u64>, max: u64) {
    let bytes = (u64::BITS - max.leading_zeros()).div_ceil(8);
    scratch.clear();
    scratch.resize(pgnos.len(), 0);
    for byte in 0..bytes {
        let shift = 8 * byte;
        let digit = |p: u64| (p >> shift) as usize & 0xff;
        let mut counts = [0usize; 256];
        for &p in pgnos.iter() {
            counts[digit(p)] += 1;
        }
        if counts.contains(&pgnos.len()) {
            continue; // every number has the same byte here: nothing moves
        }
        let mut next = [0usize; 256];
        let mut sum = 0;
        for (start, &count) in next.iter_mut().zip(&counts) {
            *start = sum;
            sum += count;
        }
        for &p in pgnos.iter() {
            let d = digit(p);
            scratch[next[d]] = p;
            next[d] += 1;
        }
        std::mem::swap(pgnos, scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::{merge_descending, merge_descending_into, sort_pgnos, sort_pgnos_descending};

    /// A reproducible stream of pseudo-random numbers (an LCG's high `64 - shift` bits).
    fn numbers(mut seed: u64, shift: u32) -> impl FnMut() -> u64 {
        move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> shift
        }
    }

    #[test]
    fn sort_pgnos_matches_a_sort() {
        let mut next = numbers(11, 20);
        let mut scratch = vec![1, 2, 3];
        for round in 0..300usize {
            let len = [0, 1, 5, 63, 64, 65, 200, 1500][round % 8];
            // Ranges from a byte to five: passes skipped where every number agrees.
            let range = 1u64 << (8 * (1 + round % 5));
            let mut pgnos: Vec<u64> = (0..len).map(|_| next() % range).collect();
            if round % 7 == 0 {
                // A constant middle byte.
                for p in &mut pgnos {
                    *p |= 0xAB00;
                }
            }
            let mut want = pgnos.clone();
            want.sort_unstable();
            let mut descending = pgnos.clone();
            sort_pgnos(&mut pgnos, &mut scratch);
            assert_eq!(pgnos, want, "round {round}");
            sort_pgnos_descending(&mut descending, &mut scratch);
            want.reverse();
            assert_eq!(descending, want, "round {round}, descending");
        }
    }

    /// Distinct page numbers, as a txn's lists hold them: dense ones (the bitmap), sparse
    /// ones (the radix sort), one repeated (the bitmap gives way to the radix sort), and a
    /// list in descending order but for a tail (sorted alone and merged in).
    #[test]
    fn distinct_pgnos_sort_by_every_path() {
        let mut next = numbers(5, 24);
        let mut scratch = Vec::new();
        for round in 0..200usize {
            let len = [64, 65, 100, 600, 1500][round % 5];
            let spread = [1u64, 2, 63, 64, 65, 1000][round % 6];
            let base = next() % 100_000;
            let mut pgnos: Vec<u64> = (0..len as u64).map(|i| base + i * spread).collect();
            // Shuffled (Fisher-Yates).
            for i in (1..pgnos.len()).rev() {
                pgnos.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            if round % 3 == 0 {
                let again = pgnos[len / 2];
                pgnos.push(again);
            }
            let mut want = pgnos.clone();
            want.sort_unstable();
            let mut got = pgnos.clone();
            sort_pgnos(&mut got, &mut scratch);
            assert_eq!(got, want, "round {round}");
            // In descending order but for the last `tail`, in any order.
            let tail = [1, 5, 63, 64, 300][round % 5].min(want.len());
            let mut descending: Vec<u64> = want.iter().rev().copied().collect();
            let cut = descending.len() - tail;
            descending[cut..].reverse();
            let mut rest = descending.split_off(cut);
            rest.rotate_left(tail / 2);
            descending.extend(rest);
            sort_pgnos_descending(&mut descending, &mut scratch);
            want.reverse();
            assert_eq!(
                descending, want,
                "round {round}, descending with a tail of {tail}"
            );
        }
    }

    #[test]
    fn merge_descending_matches_a_sort() {
        let mut next = numbers(7, 33);
        for round in 0..200 {
            let (na, nb) = ((next() % 40) as usize, (next() % (1 + round)) as usize);
            let mut a: Vec<u64> = (0..na).map(|_| next() % 500).collect();
            let mut b: Vec<u64> = (0..nb).map(|_| next() % 500).collect();
            a.sort_unstable_by(|x, y| y.cmp(x));
            b.sort_unstable_by(|x, y| y.cmp(x));
            let mut out = vec![9999];
            merge_descending(&a, &b, &mut out);
            let mut want: Vec<u64> = a.iter().chain(&b).copied().collect();
            want.sort_unstable_by(|x, y| y.cmp(x));
            assert_eq!(out[0], 9999, "appends to what `out` holds");
            assert_eq!(&out[1..], &want[..], "a={a:?} b={b:?}");
            let mut merged = a.clone();
            merge_descending_into(&mut merged, &b);
            assert_eq!(merged, want, "in place: a={a:?} b={b:?}");
        }
    }
}
