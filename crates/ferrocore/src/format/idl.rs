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
    let ascending = pages
        .windows(2)
        .fold(0u8, |bad, w| bad | u8::from(w[0] <= w[1]))
        != 0;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A record decodes to its pages when they are strictly descending and above the
    /// metas; a repeat or a rise anywhere (first, middle, last pair) or a meta page is
    /// corruption.
    #[test]
    fn decoding_checks_the_whole_record() {
        let valid: Vec<u64> = (2..300).rev().collect();
        let mut value = Vec::new();
        encode_idl_into(&valid, 0, &mut value);
        let mut pages = Vec::new();
        decode_idl_into(&value, 7, &mut pages).unwrap();
        assert_eq!(pages, valid);
        let mut bad_lists = vec![vec![5, 4, 1], vec![3, 3]];
        for at in [0, 150, 296] {
            let mut rise = valid.clone();
            rise.swap(at, at + 1);
            bad_lists.push(rise);
            let mut repeat = valid.clone();
            repeat[at + 1] = repeat[at];
            bad_lists.push(repeat);
        }
        for bad in bad_lists {
            // Encoded by hand: encode_idl_into asserts the order in debug builds.
            let mut value = (bad.len() as u64).to_le_bytes().to_vec();
            value.extend(bad.iter().flat_map(|p| p.to_le_bytes()));
            assert!(
                matches!(
                    decode_idl_into(&value, 7, &mut pages),
                    Err(Error::Corrupted { .. })
                ),
                "{:?}",
                &bad[..bad.len().min(4)]
            );
        }
    }
}
