//! A read txn's pages: the map, up to the snapshot's last page.

use crate::error::{Error, Result};
use crate::io::Map;

use super::*;

/// Pages of a committed snapshot, read straight from the map.
pub struct SnapshotPages<'e> {
    pub(super) map: &'e Map,
    pub(super) page_size: usize,
    /// Pages `0..end_pgno` belong to the snapshot.
    pub(super) end_pgno: u64,
    /// Where the snapshot's last page starts in the map.
    last_offset: usize,
}

impl<'e> SnapshotPages<'e> {
    /// A view of the snapshot whose last page is `last_pgno`.
    pub fn new(map: &'e Map, page_size: usize, last_pgno: u64) -> Self {
        SnapshotPages {
            map,
            page_size,
            end_pgno: last_pgno + 1,
            last_offset: (last_pgno as usize).saturating_mul(page_size),
        }
    }

    /// Where page `pgno` lies in the map, if it belongs to the snapshot: for
    /// [`SnapshotPages::page_at`] to read it again without a page number's checks.
    #[inline]
    pub fn page_offset(&self, pgno: u64) -> Option<usize> {
        map_pages(self.map, self.page_size, self.end_pgno, pgno, 1).ok()?;
        Some(pgno as usize * self.page_size)
    }

    /// The page at `offset` in the map, if it lies below the snapshot's end: read it with
    /// an offset that [`SnapshotPages::page_offset`] gave for this snapshot.
    #[inline]
    pub fn page_at(&self, offset: usize) -> Option<&[u8]> {
        (offset <= self.last_offset).then(|| self.map.slice(offset, self.page_size))
    }
}

#[inline]
pub(super) fn map_pages(
    map: &Map,
    page_size: usize,
    end_pgno: u64,
    pgno: u64,
    count: usize,
) -> Result<&[u8]> {
    match pgno.checked_add(count as u64) {
        Some(end) if pgno >= 2 && end <= end_pgno => {
            Ok(map.slice(pgno as usize * page_size, count * page_size))
        }
        _ => Err(Error::PageNotFound { pgno }),
    }
}

impl PageSource for SnapshotPages<'_> {
    #[inline]
    fn page_size(&self) -> usize {
        self.page_size
    }

    #[inline]
    fn pages(&self, pgno: u64, count: usize) -> Result<&[u8]> {
        map_pages(self.map, self.page_size, self.end_pgno, pgno, count)
    }
}
