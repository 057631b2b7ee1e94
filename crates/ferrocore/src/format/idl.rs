//! ID lists (LMDB's IDL): the value of a free-DB record, a u64 count followed by that
//! many page numbers in descending order.

use crate::error::{Error, Result};
use crate::format::page::read_u64;

/// Decodes an IDL value: count, then that many page numbers.
pub fn decode_idl(value: &[u8], pgno_for_errors: u64) -> Result<Vec<u64>> {
    let mut pages = Vec::new();
    decode_idl_into(value, pgno_for_errors, &mut pages)?;
    Ok(pages)
}

/// [`decode_idl`] into `pages` (its old content replaced), reusing its allocation.
pub fn decode_idl_into(value: &[u8], pgno_for_errors: u64, pages: &mut Vec<u64>) -> Result<()> {
    if value.len() < 8 {
        return Err(Error::corrupted(
            pgno_for_errors,
            "free-list record shorter than its count",
        ));
    }
    let count = read_u64(value, 0) as usize;
    if count.checked_mul(8).is_none_or(|b| b > value.len() - 8) {
        return Err(Error::corrupted(
            pgno_for_errors,
            "free-list record count exceeds its length",
        ));
    }
    pages.clear();
    pages.extend(
        value[8..8 + 8 * count]
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))),
    );
    // LMDB's IDLs are sorted descending without repeats, and never list a meta page: a
    // page listed twice would be handed out twice. (A fold without early exit, which the
    // compiler vectorises: a record is a few hundred pages, checked whole when valid.)
    let ascending = pages.windows(2).fold(false, |bad, w| bad | (w[0] <= w[1]));
    if ascending || pages.last().is_some_and(|&p| p < 2) {
        return Err(Error::corrupted(
            pgno_for_errors,
            "free-list record not strictly descending, or listing a meta page",
        ));
    }
    Ok(())
}

/// Encodes an IDL (pages must already be sorted descending), padded to `len` bytes,
/// into `out` (its old content replaced), reusing its allocation. The page numbers are
/// stored eight bytes at a time into a small batch copied in whole (an extend from a
/// flat_map of byte arrays went byte by byte); out of line, as the save's loops inlined
/// it into slower code.
#[inline(never)]
pub fn encode_idl_into(pages: &[u64], len: usize, out: &mut Vec<u8>) {
    debug_assert!(
        pages.windows(2).all(|w| w[0] > w[1]),
        "IDL must be strictly descending"
    );
    out.clear();
    out.reserve(len.max(8 * (pages.len() + 1)));
    out.extend_from_slice(&(pages.len() as u64).to_le_bytes());
    let mut batch = [0u8; 256];
    for chunk in pages.chunks(batch.len() / 8) {
        for (slot, p) in batch.chunks_exact_mut(8).zip(chunk) {
            slot.copy_from_slice(&p.to_le_bytes());
        }
        out.extend_from_slice(&batch[..8 * chunk.len()]);
    }
    // The slack, zeroed (only the bytes past the pages).
    out.resize(len.max(out.len()), 0);
}
