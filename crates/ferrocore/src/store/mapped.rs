//! `WRITE_MAP`: the write txn writes pages through the map, so the file must cover a page
//! before the txn writes it.

use crate::error::Result;
use crate::io::DataFile;

/// Under `WRITE_MAP`: the data file, which must cover a page before the txn writes it
/// through the map, and how many pages it covers.
pub struct MappedWrites<'e> {
    pub(super) file: &'e dyn DataFile,
    pub(super) file_pages: u64,
    /// The txn set the file's length (to `file_pages`) and nobody has recorded it yet
    /// (see [`DirtyPages::take_mapped_growth`](super::DirtyPages::take_mapped_growth)).
    pub(super) grew: bool,
}

impl<'e> MappedWrites<'e> {
    /// Writes through the map of `file`, whose length is `file_len` bytes.
    pub fn new(file: &'e dyn DataFile, file_len: u64, page_size: usize) -> Self {
        MappedWrites {
            file,
            file_pages: file_len / page_size as u64,
            grew: false,
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
        self.grew = true;
        Ok(())
    }
}

/// The length a file written through the map (`WRITE_MAP`, the map growing on demand) is
/// given to hold `used` bytes: a power of four from 1 MiB (1, 4, 16, 64, 256 MiB) up to
/// 1 GiB, then whole GiBs. The holes are sparse: they take no disk space.
///
/// Why few, large steps: Linux fills a new map page's fault with a page-cache folio whose
/// size readahead ramps up (4 KiB, 16 KiB, ... 2 MiB, every 8 MiB of faults), and that
/// ramp starts over each time the file's end moves (`perf record -e page-faults -d`: 256
/// faults per MiB after each growth, then 64, 16, 4, 1). W7 (`ferrocore-bench w8-cell --op
/// index`, `perf stat -e page-faults`) at 50,000 entries: 14,700 faults growing an eighth
/// at a time, 8,070 doubling from 1 MiB, 5,733 in steps of 4, against LMDB's 4,081 (its
/// file is the map's size from the open); at 200,000 entries: 15,261 doubling, 11,220 in
/// steps of 4, LMDB 7,675. (A 64 MiB first step took 4,203 at 50,000, but made every file
/// 64 MiB, and the fault-injection tests' disk images with it.)
pub fn mapped_file_len(used: u64) -> u64 {
    const GIB: u64 = 1 << 30;
    if used > GIB {
        return used.div_ceil(GIB) * GIB;
    }
    let mut len: u64 = 1 << 20;
    while len < used {
        len *= 4;
    }
    len.min(GIB)
}

#[cfg(test)]
mod tests {
    use super::mapped_file_len;

    #[test]
    fn mapped_file_len_steps_by_four_then_by_a_gib() {
        const MIB: u64 = 1 << 20;
        assert_eq!(mapped_file_len(0), MIB);
        assert_eq!(mapped_file_len(MIB), MIB);
        assert_eq!(mapped_file_len(MIB + 1), 4 * MIB);
        assert_eq!(mapped_file_len(5 * MIB), 16 * MIB);
        assert_eq!(mapped_file_len(64 * MIB), 64 * MIB);
        assert_eq!(mapped_file_len(64 * MIB + 1), 256 * MIB);
        assert_eq!(mapped_file_len(257 * MIB), 1024 * MIB);
        assert_eq!(mapped_file_len(1024 * MIB), 1024 * MIB);
        assert_eq!(mapped_file_len(1024 * MIB + 1), 2048 * MIB);
        assert_eq!(mapped_file_len(5000 * MIB), 5120 * MIB);
        for used in [1, MIB - 1, 3 * MIB, 65 * MIB, 700 * MIB, 3000 * MIB] {
            let len = mapped_file_len(used);
            assert!(len >= used && len < 4 * used.max(MIB), "{used} -> {len}");
        }
    }
}
