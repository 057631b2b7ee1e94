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

    /// Grows the file to cover pages `..end` (and some room beyond, up to `max_pgno`, so
    /// that a growing txn does not extend it page by page).
    pub(super) fn cover(&mut self, end: u64, max_pgno: u64, page_size: usize) -> Result<()> {
        if end <= self.file_pages {
            return Ok(());
        }
        let room = (self.file_pages / 8).max((1 << 20) / page_size as u64);
        let target = end.max(self.file_pages + room).min(max_pgno).max(end);
        self.file.set_len(target * page_size as u64)?;
        self.file_pages = target;
        Ok(())
    }
}
