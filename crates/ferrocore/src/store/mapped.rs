//! `WRITE_MAP`: the write txn writes pages through the map, so the file must cover a page
//! before the txn writes it.

use crate::error::Result;
use crate::io::DataFile;

/// Under `WRITE_MAP`: the data file, which must cover a page before the txn writes it
/// through the map, and how many pages it covers.
pub struct MappedWrites<'e> {
    pub(super) file: &'e dyn DataFile,
    pub(super) file_pages: u64,
}

impl<'e> MappedWrites<'e> {
    /// Writes through the map of `file`, whose length is `file_len` bytes.
    pub fn new(file: &'e dyn DataFile, file_len: u64, page_size: usize) -> Self {
        MappedWrites {
            file,
            file_pages: file_len / page_size as u64,
        }
    }

    /// Grows the file to cover pages `..end`: to [`mapped_file_len`] of them (up to
    /// `max_pgno`), so that a growing txn does not extend it page by page.
    pub(super) fn cover(&mut self, end: u64, max_pgno: u64, page_size: usize) -> Result<()> {
        if end <= self.file_pages {
            return Ok(());
        }
        let ps = page_size as u64;
        let target = (mapped_file_len(end * ps) / ps).min(max_pgno).max(end);
        self.file.set_len(target * ps)?;
        self.file_pages = target;
        Ok(())
    }
}

/// The length a file written through the map (`WRITE_MAP`, the map growing on demand) is
/// given to hold `used` bytes: a power of two from 1 MiB up to 1 GiB, then whole GiBs. So
/// the file doubles as it grows, and the txn writes pages far from its end. Growing it an
/// eighth at a time made Linux fault in each new page of the map separately (small page
/// cache folios near the end of the file): 14,700 faults where LMDB, which sizes the file
/// to its map, takes 4,100 (W7 at 50,000 entries), and 0.72 of LMDB WRITEMAP's speed on
/// W7 against 0.88 when doubling. The holes are sparse: they take no disk space.
pub fn mapped_file_len(used: u64) -> u64 {
    const GIB: u64 = 1 << 30;
    if used <= GIB {
        used.max(1 << 20).next_power_of_two()
    } else {
        used.div_ceil(GIB) * GIB
    }
}

#[cfg(test)]
mod tests {
    use super::mapped_file_len;

    #[test]
    fn mapped_file_len_doubles_then_steps_by_a_gib() {
        const MIB: u64 = 1 << 20;
        assert_eq!(mapped_file_len(0), MIB);
        assert_eq!(mapped_file_len(MIB), MIB);
        assert_eq!(mapped_file_len(MIB + 1), 2 * MIB);
        assert_eq!(mapped_file_len(33 * MIB), 64 * MIB);
        assert_eq!(mapped_file_len(1024 * MIB), 1024 * MIB);
        assert_eq!(mapped_file_len(1024 * MIB + 1), 2048 * MIB);
        assert_eq!(mapped_file_len(5000 * MIB), 5120 * MIB);
        for used in [1, MIB - 1, 3 * MIB, 700 * MIB, 3000 * MIB] {
            let len = mapped_file_len(used);
            assert!(len >= used && len < 2 * used.max(MIB), "{used} -> {len}");
        }
    }
}
