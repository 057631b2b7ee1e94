//! The text format of `mdb_dump` and `mdb_load` (Berkeley DB's `db_dump` format, VERSION=3),
//! the parts `dump` and `load` share: the DB flag keywords and the two encodings of a key
//! or value on a data line.
//!
//! A dump is one section per DB:
//!
//! ```text
//! VERSION=3
//! format=bytevalue          (or format=print)
//! database=NAME             (named DBs only)
//! type=btree
//! mapsize=1048576
//! maxreaders=126
//! duplicates=1              (DUPSORT DBs: this line, then the flag lines below)
//! dupsort=1
//! db_pagesize=4096
//! HEADER=END
//!  6b6579                   (a key: a space, then the encoded bytes)
//!  76616c7565               (its value)
//! DATA=END
//! ```
//!
//! `bytevalue` writes each byte as two lowercase hex digits. `print` writes the printable
//! ASCII bytes (0x20..=0x7e, C's `isprint` in the C locale) as themselves, except the
//! backslash, written `\\`, and every other byte as `\` and two hex digits. Escaping the
//! backslash is LMDB's rule since 0.9.25 (ITS#9068); LMDB 0.9.24's `mdb_dump -p` wrote it
//! bare, which makes a backslash followed by two hex digits ambiguous on reload.

use ferrocore::db_flags;

/// The DB flags a header names, in the order `mdb_dump` prints them.
pub const FLAG_NAMES: [(u16, &str); 6] = [
    (db_flags::REVERSE_KEY, "reversekey"),
    (db_flags::DUP_SORT, "dupsort"),
    (db_flags::INTEGER_KEY, "integerkey"),
    (db_flags::DUP_FIXED, "dupfixed"),
    (db_flags::INTEGER_DUP, "integerdup"),
    (db_flags::REVERSE_DUP, "reversedup"),
];

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `bytes` to `line` as `bytevalue` does.
pub fn encode_hex(line: &mut Vec<u8>, bytes: &[u8]) {
    line.reserve(bytes.len() * 2);
    for &b in bytes {
        line.push(HEX[usize::from(b >> 4)]);
        line.push(HEX[usize::from(b & 0xf)]);
    }
}

/// Appends `bytes` to `line` as `print` does.
pub fn encode_print(line: &mut Vec<u8>, bytes: &[u8]) {
    line.reserve(bytes.len());
    for &b in bytes {
        match b {
            b'\\' => line.extend_from_slice(b"\\\\"),
            0x20..=0x7e => line.push(b),
            _ => {
                line.push(b'\\');
                line.push(HEX[usize::from(b >> 4)]);
                line.push(HEX[usize::from(b & 0xf)]);
            }
        }
    }
}

/// Why an encoded line could not be decoded, and where (0-based byte column).
#[derive(Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub column: usize,
    pub expected: &'static str,
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Decodes a `bytevalue` field (hex digits of either case, as `mdb_load` reads them) into
/// `out` (cleared first).
pub fn decode_hex(text: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    out.clear();
    if text.len() & 1 == 1 {
        return Err(DecodeError {
            column: text.len(),
            expected: "an even number of hex digits",
        });
    }
    out.reserve(text.len() / 2);
    for (i, pair) in text.chunks_exact(2).enumerate() {
        match (hex_digit(pair[0]), hex_digit(pair[1])) {
            (Some(hi), Some(lo)) => out.push(hi << 4 | lo),
            (None, _) => {
                return Err(DecodeError {
                    column: 2 * i,
                    expected: "a hex digit",
                })
            }
            (_, None) => {
                return Err(DecodeError {
                    column: 2 * i + 1,
                    expected: "a hex digit",
                })
            }
        }
    }
    Ok(())
}

/// Decodes a `print` field into `out` (cleared first): `\\` is a backslash, `\` and two hex
/// digits a byte, anything else itself (`mdb_load` takes raw bytes as they are).
pub fn decode_print(text: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    out.clear();
    out.reserve(text.len());
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        if text.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
            continue;
        }
        match (
            text.get(i + 1).copied().and_then(hex_digit),
            text.get(i + 2).copied().and_then(hex_digit),
        ) {
            (Some(hi), Some(lo)) => out.push(hi << 4 | lo),
            _ => {
                return Err(DecodeError {
                    column: i,
                    expected: "\\\\ or \\ and two hex digits",
                })
            }
        }
        i += 3;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips_in_both_encodings() {
        let all: Vec<u8> = (0..=255u8).chain(b"\\41\\\\ x".iter().copied()).collect();
        let (mut line, mut back) = (Vec::new(), Vec::new());
        encode_hex(&mut line, &all);
        decode_hex(&line, &mut back).unwrap();
        assert_eq!(back, all);
        line.clear();
        encode_print(&mut line, &all);
        assert!(line.iter().all(|c| (0x20..=0x7e).contains(c)));
        decode_print(&line, &mut back).unwrap();
        assert_eq!(back, all);
    }

    #[test]
    fn print_escapes_as_lmdb_does() {
        let mut line = Vec::new();
        encode_print(&mut line, b"a b\\\x00\x7f\xff~");
        assert_eq!(line, b"a b\\\\\\00\\7f\\ff~");
    }

    #[test]
    fn malformed_fields_say_where() {
        let mut out = Vec::new();
        assert_eq!(decode_hex(b"abc", &mut out).unwrap_err().column, 3);
        assert_eq!(decode_hex(b"a0zz", &mut out).unwrap_err().column, 2);
        assert_eq!(decode_hex(b"a00z", &mut out).unwrap_err().column, 3);
        assert_eq!(decode_print(b"ab\\4", &mut out).unwrap_err().column, 2);
        assert_eq!(decode_print(b"\\g0", &mut out).unwrap_err().column, 0);
        decode_hex(b"A0fF", &mut out).unwrap();
        assert_eq!(out, [0xa0, 0xff]);
    }
}
