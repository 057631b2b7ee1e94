//! An environment's data file mapped read-only, as a page source for the checker: pages
//! are read straight from the map, however large the file, without copying it.
//!
//! Its pages are those of the snapshot of a read txn the caller holds open for as long as
//! the map is read: that txn keeps writers from reusing them, so they do not change.

use std::fs::File;
use std::io;
use std::path::Path;

use ferrocore::raw::PageSource;
use ferrocore::Error;

/// The first `(last_pgno + 1)` pages of a data file, mapped read-only.
pub struct MappedPages {
    addr: *mut libc::c_void,
    len: usize,
    page_size: usize,
    /// Pages `0..end_pgno` may be read.
    end_pgno: u64,
}

impl MappedPages {
    /// Maps the pages `0..=last_pgno` of the data file at `path`. Fails if the file is
    /// shorter than that.
    pub fn open(path: &Path, page_size: usize, last_pgno: u64) -> io::Result<MappedPages> {
        let file = File::open(path)?;
        let file_len = file.metadata()?.len();
        let len = last_pgno
            .checked_add(1)
            .and_then(|pages| pages.checked_mul(page_size as u64))
            .filter(|&len| len <= file_len && len > 0)
            .and_then(|len| usize::try_from(len).ok())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the snapshot's last page {last_pgno} lies past the end of the file ({file_len} bytes)"
                    ),
                )
            })?;
        // SAFETY: a fresh read-only, shared mapping of `len` bytes of an open file (the
        // kernel picks the address); the file may be closed once mapped. The map is only
        // read, and only within `len`; `Drop` unmaps it. As for every LMDB tool, the user
        // promises that nothing truncates the file while the command runs (that would
        // make reads fault), and the caller's read txn keeps these pages from change.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(MappedPages {
            addr,
            len,
            page_size,
            end_pgno: last_pgno + 1,
        })
    }
}

impl Drop for MappedPages {
    fn drop(&mut self) {
        // SAFETY: `addr` and `len` are the mapping made in `open`, unmapped only here; no
        // slice of it outlives `self` (they borrow it).
        unsafe {
            libc::munmap(self.addr, self.len);
        }
    }
}

impl PageSource for MappedPages {
    fn page_size(&self) -> usize {
        self.page_size
    }

    fn pages(&self, pgno: u64, count: usize) -> ferrocore::Result<&[u8]> {
        match pgno.checked_add(count as u64) {
            Some(end) if end <= self.end_pgno => {
                let start = pgno as usize * self.page_size;
                let bytes = count * self.page_size;
                debug_assert!(start + bytes <= self.len);
                // SAFETY: `start + bytes <= len` (end_pgno * page_size == len), so the
                // slice lies within the live, read-only mapping, which `self` owns and
                // the slice borrows.
                Ok(unsafe { std::slice::from_raw_parts(self.addr.cast::<u8>().add(start), bytes) })
            }
            _ => Err(Error::PageNotFound { pgno }),
        }
    }
}
