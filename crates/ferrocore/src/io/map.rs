//! The memory map of the data file, through which every read txn reads its pages.
//!
//! One of the places (with `lock`) where ferrocore uses `unsafe`: the map is a raw pointer
//! into a shared file mapping. The map reserves a large range of address space once, at
//! open, and is never moved while the environment is open; the file grows under it as the
//! writer appends pages, so no reader ever sees its mapping change.
//!
//! Contract with the user (stated on `Env::open`): nothing outside ferrocore truncates or
//! rewrites the data file while it is open. ferrocore only hands out slices of pages that
//! lie below the snapshot's last page, which the writer wrote (and the kernel placed in the
//! page cache) before it published that snapshot.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

/// Address space reserved for the map when the application sets no limit: 1 TiB. Shared
/// read-only file mappings cost no memory until touched, only address space.
pub const DEFAULT_RESERVATION: usize = 1 << 40;

/// A shared mapping of the data file: read-only, or writable under `WRITE_MAP`, where
/// the write txn builds its pages in place (see `store::DirtyPages`).
pub struct Map {
    ptr: *mut u8,
    len: usize,
    writable: bool,
}

// SAFETY: the mapping is memory shared with the page cache; concurrent reads from many
// threads are fine, and the pointer itself is never mutated after creation. Writes (only
// under WRITE_MAP) go through `Map::pages_mut`, whose callers guarantee exclusivity.
unsafe impl Send for Map {}
// SAFETY: see above.
unsafe impl Sync for Map {}

impl Map {
    /// Maps `len` bytes of `file`, read-only unless `writable` (the file may be shorter: the
    /// tail is reserved). If the kernel refuses that much address space, smaller
    /// reservations are tried, down to `min_len`.
    pub fn new(file: &File, len: usize, min_len: usize, writable: bool) -> io::Result<Map> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        let mut want = len.max(min_len);
        loop {
            // SAFETY: a fresh shared mapping at an address the kernel chooses; no existing
            // memory is affected. Failure is reported as MAP_FAILED.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    want,
                    prot,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    0,
                )
            };
            if ptr != libc::MAP_FAILED {
                return Ok(Map {
                    ptr: ptr.cast(),
                    len: want,
                    writable,
                });
            }
            let err = io::Error::last_os_error();
            // ENOMEM (address space limits) or EINVAL (e.g. under valgrind, which caps
            // mappings): try a smaller reservation.
            if want <= min_len || !matches!(err.raw_os_error(), Some(libc::ENOMEM | libc::EINVAL)) {
                return Err(err);
            }
            want = (want / 8).max(min_len);
        }
    }

    /// Bytes of address space mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The bytes at `offset..offset+len` of the file.
    ///
    /// Panics if the range is outside the mapping (callers bound page numbers first, so
    /// this is a bug check, not input validation). The range must lie within the file;
    /// callers guarantee it by only asking for pages of a published snapshot.
    #[inline]
    pub fn slice(&self, offset: usize, len: usize) -> &[u8] {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "map range out of bounds"
        );
        // SAFETY: the range lies inside the mapping (checked above), which stays mapped
        // for the lifetime of `self`; the bytes are within the file (callers' contract),
        // so reading them cannot fault, and ferrocore never writes through this mapping.
        unsafe { std::slice::from_raw_parts(self.ptr.add(offset), len) }
    }
}

impl Map {
    /// Advises the kernel that the map is read at random (`MADV_RANDOM`, as LMDB does for
    /// `MDB_NORDAHEAD`): a fault reads the page it needs, not a readahead window, and the
    /// page cache keeps what it reads in single pages. Best effort: advice the kernel
    /// refuses changes nothing else.
    pub fn advise_random(&self) {
        // SAFETY: advice about this mapping, which `self` owns and which stays mapped: it
        // changes how the kernel reads the file into it, never its contents or its
        // addresses.
        let _ = unsafe { libc::madvise(self.ptr.cast(), self.len, libc::MADV_RANDOM) };
    }

    /// True if the map was made writable (`WRITE_MAP`).
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The bytes at `offset..offset+len` of a writable map, for the write txn to build a
    /// page in place.
    ///
    /// Panics if the map is not writable or the range lies outside it.
    ///
    /// # Safety
    ///
    /// For as long as the returned slice lives, nothing else may read or write those bytes
    /// through this map: they must be pages no snapshot that a reader (or the write txn
    /// itself) can reach, held by one write txn only, and lying within the file (a store
    /// past the end of the file faults).
    #[allow(clippy::mut_from_ref)] // exclusivity is the caller's contract, as stated
    pub unsafe fn pages_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        assert!(self.writable, "writing through a read-only map");
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "map range out of bounds"
        );
        // SAFETY: the range lies inside the mapping (checked above), which is writable and
        // stays mapped for the lifetime of `self`; exclusivity and the file's length are
        // the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(offset), len) }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; no slice into the map outlives
        // the environment (transactions borrow it).
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}
