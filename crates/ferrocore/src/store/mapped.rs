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

/// The shortest file written through the map ([`mapped_file_len`]): 64 MiB, sparse.
pub const MAPPED_FILE_MIN: u64 = 64 << 20;

/// The length a file written through the map (`WRITE_MAP`, the map growing on demand) is
/// given to hold `used` bytes: [`MAPPED_FILE_MIN`] at least, then a power of two up to
/// 1 GiB, then whole GiBs. The holes are sparse: they take no disk space.
///
/// Why few, large steps: Linux fills a new map page's fault with a page-cache folio whose
/// size readahead ramps up (4 KiB, 16 KiB, ... 2 MiB, every 8 MiB of faults) and that ramp
/// starts over each time the file's end moves. Growing an eighth at a time, W7 at 50,000
/// entries took 14,700 page faults; doubling from 1 MiB, 8,100 (7 ramps); with the 64 MiB
/// floor, 4,200, as LMDB, which sizes its file to the map once (4,100); `perf stat -e
/// page-faults` on `ferrocore-bench w8-cell --op index`. At 200,000 entries: 15,300
/// doubling from 1 MiB, 11,400 with the floor, LMDB 7,700.
pub fn mapped_file_len(used: u64) -> u64 {
    const GIB: u64 = 1 << 30;
    if used <= GIB {
        used.max(MAPPED_FILE_MIN).next_power_of_two()
    } else {
        used.div_ceil(GIB) * GIB
    }
}

#[cfg(test)]
mod tests {
    use super::{mapped_file_len, MAPPED_FILE_MIN};

    #[test]
    fn mapped_file_len_starts_at_the_floor_doubles_then_steps_by_a_gib() {
        const MIB: u64 = 1 << 20;
        assert_eq!(mapped_file_len(0), 64 * MIB);
        assert_eq!(mapped_file_len(MIB + 1), 64 * MIB);
        assert_eq!(mapped_file_len(64 * MIB), 64 * MIB);
        assert_eq!(mapped_file_len(64 * MIB + 1), 128 * MIB);
        assert_eq!(mapped_file_len(700 * MIB), 1024 * MIB);
        assert_eq!(mapped_file_len(1024 * MIB), 1024 * MIB);
        assert_eq!(mapped_file_len(1024 * MIB + 1), 2048 * MIB);
        assert_eq!(mapped_file_len(5000 * MIB), 5120 * MIB);
        for used in [1, MIB - 1, 3 * MIB, 65 * MIB, 700 * MIB, 3000 * MIB] {
            let len = mapped_file_len(used);
            assert!(
                len >= used && len < 2 * used.max(MAPPED_FILE_MIN),
                "{used} -> {len}"
            );
        }
    }
}
