//! How `ferrocore load` stores one section's pairs.
//!
//! - **Into an empty DB** (without `-N`): the bulk loader, which builds the DB bottom-up
//!   from full pages. A dump is in the DB's order, so its pairs stream straight in. At the
//!   first pair out of order, what was loaded so far and the rest of the input go through
//!   the external sort (within `--memory`), and the DB is built again from its output.
//!   A repeated key keeps its last value, as a second put of it does.
//! - **With `-N`, or into a DB that has data**: one put per pair, as `mdb_load` does.
//!
//! Either way every pair is checked as a put would check it, and a refusal names the
//! input line of the pair, as the put would have.

use ferrocore::{
    db_flags, put_flags, BulkOptions, Database, Duplicates, Error, ExternalSort, SortOptions,
    WriteTxn,
};

use crate::failure::{Failure, Outcome};

/// A pair read from the input: key, value, and its input line.
type LinePair = (Vec<u8>, Vec<u8>, u64);

/// A section's pairs, read one at a time.
pub trait PairSource {
    /// Reads the next pair into `key` and `value`; false at the end of the section.
    fn next_pair(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Outcome<bool>;
    /// The input line of the pair read last (its value's line), or of the end.
    fn line(&self) -> u64;
}

/// What a load does beyond the pairs: `-N`, and the sort's memory.
#[derive(Clone, Copy, Debug)]
pub struct LoadMode {
    /// `-N`: keep existing keys (and pairs), as mdb_load -N.
    pub no_overwrite: bool,
    /// Memory for the external sort of out-of-order input, in bytes.
    pub memory_bytes: usize,
}

/// A put the DB refused, reported at input line `line` as the put path reports it.
pub fn refused(line: u64, e: &Error) -> Failure {
    match e {
        Error::MapFull => Failure::new(format!(
            "line {line}: {e}; the map size is the first header's mapsize= when load creates the environment: raise it there"
        )),
        e => Failure::new(format!("line {line}: put refused: {e}")),
    }
}

/// Stores every pair of `pairs` in `db`.
pub fn load_pairs(
    txn: &mut WriteTxn<'_>,
    db: Database,
    mode: LoadMode,
    pairs: &mut dyn PairSource,
) -> Outcome {
    let empty = txn
        .db_stat(db)
        .map_err(|e| refused(pairs.line(), &e))?
        .entries
        == 0;
    if mode.no_overwrite || !empty {
        return put_each(txn, db, mode, pairs);
    }
    let Some(first_out_of_order) = stream(txn, db, pairs)? else {
        return Ok(());
    };
    sort_and_build(txn, db, mode, pairs, first_out_of_order)
}

/// One put per pair.
fn put_each(
    txn: &mut WriteTxn<'_>,
    db: Database,
    mode: LoadMode,
    pairs: &mut dyn PairSource,
) -> Outcome {
    let flags = if mode.no_overwrite {
        put_flags::NO_OVERWRITE | put_flags::NO_DUP_DATA
    } else {
        0
    };
    let (mut key, mut value) = (Vec::new(), Vec::new());
    while pairs.next_pair(&mut key, &mut value)? {
        match txn.put(db, &key, &value, flags) {
            // -N: what exists stays, as mdb_load -N.
            Err(Error::KeyExist) if flags != 0 => {}
            Err(e) => return Err(refused(pairs.line(), &e)),
            Ok(()) => {}
        }
    }
    Ok(())
}

fn bulk_options() -> BulkOptions {
    BulkOptions {
        duplicates: Duplicates::KeepLast,
        ..BulkOptions::default()
    }
}

/// Streams pairs in order into the bulk loader. Returns the first pair out of order (and
/// its line) with the loaded ones kept in the DB, or `None` when the section was in order.
fn stream(
    txn: &mut WriteTxn<'_>,
    db: Database,
    pairs: &mut dyn PairSource,
) -> Outcome<Option<LinePair>> {
    let mut loader = txn
        .bulk_loader(db, bulk_options())
        .map_err(|e| refused(pairs.line(), &e))?;
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut out_of_order = None;
    while pairs.next_pair(&mut key, &mut value)? {
        match loader.push(&key, &value) {
            Ok(()) => {}
            Err(Error::Unsorted { .. }) => {
                out_of_order = Some((key, value, pairs.line()));
                break;
            }
            Err(e) => return Err(refused(pairs.line(), &e)),
        }
    }
    loader.finish().map_err(|e| refused(pairs.line(), &e))?;
    Ok(out_of_order)
}

/// The DB's pairs so far, `first` and the rest of the input, sorted, then built again.
fn sort_and_build(
    txn: &mut WriteTxn<'_>,
    db: Database,
    mode: LoadMode,
    pairs: &mut dyn PairSource,
    first: LinePair,
) -> Outcome {
    let options = SortOptions {
        memory_bytes: mode.memory_bytes,
        ..SortOptions::default()
    };
    let at = |line: u64| move |e: Error| refused(line, &e);
    let mut sort = ExternalSort::for_db(txn, db, options).map_err(at(first.2))?;
    {
        // Pairs loaded so far came first: tag 0 keeps them before the rest.
        let mut c = txn.cursor(db).map_err(at(first.2))?;
        let mut item = c.first().map_err(at(first.2))?;
        while let Some((k, v)) = item {
            sort.push_tagged(k, v, 0).map_err(at(first.2))?;
            item = c.next().map_err(at(first.2))?;
        }
    }
    let (mut key, mut value, line) = first;
    sort.push_tagged(&key, &value, line).map_err(at(line))?;
    while pairs.next_pair(&mut key, &mut value)? {
        sort.push_tagged(&key, &value, pairs.line())
            .map_err(at(pairs.line()))?;
    }
    let end = pairs.line();
    txn.drop_db(db, false).map_err(at(end))?;
    let dupfixed = txn.db_flags(db).map_err(at(end))? & db_flags::DUP_FIXED != 0;
    let mut sorted = sort.finish().map_err(at(end))?;
    let mut loader = txn.bulk_loader(db, bulk_options()).map_err(at(end))?;
    let mut sizes = KeySizes::default();
    while let Some(item) = sorted.next().map_err(at(end))? {
        if dupfixed {
            sizes.note(item.key, item.value.len(), item.tag);
        }
        match loader.push(item.key, item.value) {
            Ok(()) => {}
            Err(Error::BadValSize { what, .. }) if dupfixed => {
                // The rest of the key's values decide which line a put would have refused.
                let key = item.key.to_vec();
                while let Some(more) = sorted.next().map_err(at(end))? {
                    if more.key != key {
                        break;
                    }
                    sizes.note(more.key, more.value.len(), more.tag);
                }
                let (line, size, max) = sizes.first_refused();
                return Err(refused(line, &Error::BadValSize { what, size, max }));
            }
            Err(e) => return Err(refused(if item.tag > 0 { item.tag } else { end }, &e)),
        }
    }
    loader.finish().map_err(at(end))?;
    Ok(())
}

/// DUPFIXED: the value sizes of one key and the earliest line of each, to tell which pair
/// a put would refuse (the first to differ from the key's first value, in input order).
#[derive(Default)]
struct KeySizes {
    key: Vec<u8>,
    /// (size, earliest tag); tag 0 is a pair loaded before the sort, earliest of all.
    sizes: Vec<(usize, u64)>,
}

impl KeySizes {
    fn note(&mut self, key: &[u8], size: usize, tag: u64) {
        if key != self.key {
            self.key.clear();
            self.key.extend_from_slice(key);
            self.sizes.clear();
        }
        match self.sizes.iter_mut().find(|(s, _)| *s == size) {
            Some((_, t)) => *t = (*t).min(tag),
            None => self.sizes.push((size, tag)),
        }
    }

    /// (line, size) of the first pair of another size than the key's first, and that size.
    fn first_refused(&self) -> (u64, usize, usize) {
        let first = *self
            .sizes
            .iter()
            .min_by_key(|(_, t)| *t)
            .expect("a key with values");
        let refused = self
            .sizes
            .iter()
            .filter(|(s, _)| *s != first.0)
            .min_by_key(|(_, t)| *t)
            .copied()
            .unwrap_or(first);
        (refused.1, refused.0, first.0)
    }
}

/// Parses a memory size: a number of bytes, or with a K, M or G suffix (powers of 1024).
pub fn parse_memory(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("expected a size such as 256M, 1G or 65536, found {text:?}"))?;
    n.checked_mul(1 << shift)
        .filter(|&bytes| bytes >= 4096)
        .ok_or_else(|| format!("{text:?}: the size must be from 4K to what the machine addresses"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes() {
        assert_eq!(parse_memory("256M"), Ok(256 << 20));
        assert_eq!(parse_memory("1G"), Ok(1 << 30));
        assert_eq!(parse_memory("64KiB"), Ok(64 << 10));
        assert_eq!(parse_memory("65536"), Ok(65536));
        assert!(parse_memory("12").is_err());
        assert!(parse_memory("lots").is_err());
    }

    #[test]
    fn a_dupfixed_refusal_is_where_a_put_would_be() {
        let mut s = KeySizes::default();
        // Input lines: 6 (4 bytes), 8 (2 bytes), 10 (4 bytes); sorted B, A, C.
        s.note(b"k", 2, 8);
        s.note(b"k", 4, 6);
        s.note(b"k", 4, 10);
        assert_eq!(s.first_refused(), (8, 2, 4));
        // Loaded before the sort (tag 0) decides the size.
        s.note(b"j", 4, 12);
        s.note(b"j", 2, 0);
        s.note(b"j", 4, 9);
        assert_eq!(s.first_refused(), (9, 4, 2));
    }
}
