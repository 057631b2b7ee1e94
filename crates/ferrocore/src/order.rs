//! Key and value orders: LMDB's built-in comparisons, application comparators, and the
//! pair of orders a DB is opened with. The bottom layer: imports nothing of the crate but
//! the byte readers of `page` and the DB flags.

use std::cmp::Ordering;

use crate::db_flags;
use crate::format::page::{read_u32, read_u64};

/// The key order of a database, chosen once when the database is opened (seed 003: the
/// comparison is the hottest function). The built-in orders are variants rather than
/// function pointers, so search loops are compiled once per order with the comparison
/// inlined; only application comparators are called through a pointer.
#[derive(Clone, Copy, Debug)]
pub enum KeyCmp {
    /// Bytes compared lexicographically (memcmp, shorter prefix first): LMDB's default.
    Lexicographic,
    /// Bytes compared from the last one backwards (MDB_REVERSEKEY).
    Reverse,
    /// Native unsigned integers, 4 or 8 bytes (MDB_INTEGERKEY; the free DB's txn ids).
    Integer,
    /// An application-supplied comparator.
    Custom(fn(&[u8], &[u8]) -> Ordering),
    /// An application comparator called with a context word: the C ABI passes the C
    /// function pointer it wraps.
    WithContext(fn(usize, &[u8], &[u8]) -> Ordering, usize),
}

impl KeyCmp {
    /// Compares two keys in this order.
    #[inline]
    pub fn compare(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            KeyCmp::Lexicographic => cmp_lexicographic(a, b),
            KeyCmp::Reverse => cmp_reverse(a, b),
            KeyCmp::Integer => cmp_integer(a, b),
            KeyCmp::Custom(f) => f(a, b),
            KeyCmp::WithContext(f, ctx) => f(ctx, a, b),
        }
    }
}

/// Calls `$body` with `$f` bound to the comparison function of `$cmp`, as a distinct
/// function item per built-in order so that generic code inlines it.
macro_rules! with_order {
    ($cmp:expr, |$f:ident| $body:expr) => {
        match $cmp {
            $crate::order::KeyCmp::Lexicographic => {
                let $f = $crate::order::cmp_lexicographic;
                $body
            }
            $crate::order::KeyCmp::Reverse => {
                let $f = $crate::order::cmp_reverse;
                $body
            }
            $crate::order::KeyCmp::Integer => {
                let $f = $crate::order::cmp_integer;
                $body
            }
            $crate::order::KeyCmp::Custom(custom) => {
                let $f = custom;
                $body
            }
            $crate::order::KeyCmp::WithContext(call, ctx) => {
                let $f = move |a: &[u8], b: &[u8]| call(ctx, a, b);
                $body
            }
        }
    };
}

/// Lexicographic byte order, the default.
///
/// The first 8 bytes of both (4 if one is shorter), read as big-endian integers, decide
/// most comparisons of a search (keys that differ there) in a few instructions, without a
/// call to `memcmp`; equal prefixes (or a key shorter than 4 bytes) fall back to the
/// slices' own order, which is the same order.
#[inline(always)]
pub fn cmp_lexicographic(a: &[u8], b: &[u8]) -> Ordering {
    if let (Some(pa), Some(pb)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        let (x, y) = (u64::from_be_bytes(*pa), u64::from_be_bytes(*pb));
        if x != y {
            return x.cmp(&y);
        }
    } else if let (Some(pa), Some(pb)) = (a.first_chunk::<4>(), b.first_chunk::<4>()) {
        let (x, y) = (u32::from_be_bytes(*pa), u32::from_be_bytes(*pb));
        if x != y {
            return x.cmp(&y);
        }
    }
    a.cmp(b)
}

/// Byte order read from the end (REVERSEKEY): a proper suffix sorts first.
#[inline]
pub fn cmp_reverse(a: &[u8], b: &[u8]) -> Ordering {
    a.iter().rev().cmp(b.iter().rev())
}

/// Native (little-endian) unsigned integers of 4 or 8 bytes; other lengths by bytes.
#[inline]
pub fn cmp_integer(a: &[u8], b: &[u8]) -> Ordering {
    match (a.len(), b.len()) {
        (8, 8) => read_u64(a, 0).cmp(&read_u64(b, 0)),
        (4, 4) => read_u32(a, 0).cmp(&read_u32(b, 0)),
        _ => a.cmp(b),
    }
}

pub(crate) use with_order;

/// The orders of a DB: of its keys, and of its values if it is DUPSORT.
#[derive(Clone, Copy, Debug)]
pub struct Orders {
    /// Key order.
    pub key: KeyCmp,
    /// Value order of a DUPSORT DB; `None` otherwise.
    pub dup: Option<KeyCmp>,
}

impl Orders {
    /// The orders LMDB uses for these DB flags.
    #[inline]
    pub fn for_flags(flags: u16) -> Orders {
        Orders {
            key: cmp_for_flags(flags),
            dup: dup_order(flags),
        }
    }
}

/// The key order LMDB uses for DB flags (no custom comparator).
#[inline]
pub fn cmp_for_flags(flags: u16) -> KeyCmp {
    if flags & db_flags::REVERSE_KEY != 0 {
        KeyCmp::Reverse
    } else if flags & db_flags::INTEGER_KEY != 0 {
        KeyCmp::Integer
    } else {
        KeyCmp::Lexicographic
    }
}

/// The value order of a DUPSORT DB with these flags, or `None` if it is not DUPSORT.
#[inline]
pub fn dup_order(flags: u16) -> Option<KeyCmp> {
    if flags & db_flags::DUP_SORT == 0 {
        None
    } else if flags & db_flags::REVERSE_DUP != 0 {
        Some(KeyCmp::Reverse)
    } else if flags & db_flags::INTEGER_DUP != 0 {
        Some(KeyCmp::Integer)
    } else {
        Some(KeyCmp::Lexicographic)
    }
}

#[cfg(test)]
mod lexicographic_tests {
    use super::cmp_lexicographic;

    /// The prefix shortcut agrees with the slices' own order on keys that differ at any
    /// byte, share prefixes, or are shorter than 8 bytes.
    #[test]
    fn prefix_shortcut_is_the_byte_order() {
        let mut keys: Vec<Vec<u8>> = vec![vec![], vec![0], vec![0xFF], vec![1, 2, 3]];
        let mut seed = 99u64;
        for len in 0..20 {
            for _ in 0..12 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let mut k: Vec<u8> = (0..len)
                    .map(|i| (seed >> (i % 7 * 8)) as u8 & 0x83)
                    .collect();
                keys.push(k.clone());
                if let Some(last) = k.last_mut() {
                    *last ^= 1;
                }
                keys.push(k);
            }
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(cmp_lexicographic(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }
}
