//! The data file as the commit writes it: the [`DataFile`] seam, and [`OsFile`], the real
//! file behind it.
//!
//! Every write, flush and length change the engine makes to the data file goes through a
//! `DataFile`: the commit's data pages, its meta page, the two metas of a new file and
//! `Env::sync`. Reads do not: read txns read the memory map of the file underneath
//! ([`DataFile::file`]), which shows every write this process made. Tests put a
//! fault-injecting implementation ([`super::fault`]) in the seam to cut the power or fail
//! a call at any point of a commit.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// The data file, as the engine changes it. Implementations must write through to
/// [`DataFile::file`] (the engine maps that file and reads what it wrote from the map), and
/// may add what they like around it: fault injection, counting, tracing.
#[allow(clippy::len_without_is_empty)] // an open data file always holds its two metas
pub trait DataFile: Send + Sync {
    /// The file underneath: mapped for reads, and its descriptor is `mdb_env_get_fd`'s.
    fn file(&self) -> &File;

    /// Writes `bufs` one after another from `offset` on, all of them or an error.
    fn write_vectored_at(
        &self,
        offset: u64,
        bufs: &mut dyn Iterator<Item = &[u8]>,
    ) -> io::Result<()>;

    /// Writes `buf` at `offset`, all of it or an error.
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.write_vectored_at(offset, &mut std::iter::once(buf))
    }

    /// Under `WRITE_MAP`: the commit wrote `len` bytes at `offset` through the writable map
    /// of [`DataFile::file`]. They are in the page cache already and reach the disk with
    /// the next flush (or whenever the kernel writes them back): the real file has nothing
    /// to do, a fault-injecting one records them.
    fn wrote_through_map(&self, offset: u64, len: usize) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }

    /// Makes every write so far durable (`fdatasync`): the data and the length needed to
    /// read it back.
    fn sync_data(&self) -> io::Result<()>;

    /// Writes `buf` at `offset` and makes that write durable: the meta page's write and
    /// flush. The default is [`DataFile::write_at`] then [`DataFile::sync_data`], as two
    /// calls. [`OsFile`] makes one `pwritev2` with `RWF_DSYNC` (LMDB writes its meta
    /// through a second descriptor opened `O_DSYNC`, the same thing), which syncs only this
    /// write's range: the commit calls it right after flushing the data pages, so nothing
    /// else is waiting, and on Linux 6.18 over ext4 it costs half an `fdatasync` (strace:
    /// 0.13 ms against 0.27 ms on W6's 250 MB file).
    fn write_at_synced(&self, offset: u64, buf: &[u8]) -> Result<(), SyncedWriteError> {
        self.write_at(offset, buf)
            .map_err(SyncedWriteError::Write)?;
        self.sync_data().map_err(SyncedWriteError::Sync)
    }

    /// Sets the file's length (a commit grows it, and cuts its free end, see
    /// `FileShrink`).
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// The file's length.
    fn len(&self) -> io::Result<u64> {
        Ok(self.file().metadata()?.len())
    }
}

/// Which half of [`DataFile::write_at_synced`] failed.
#[derive(Debug)]
pub enum SyncedWriteError {
    /// The write (nothing is known to be durable).
    Write(io::Error),
    /// The flush after a whole write (or the one call doing both).
    Sync(io::Error),
}

/// The real data file: positioned vectored writes in calls of at most 256 KiB (as LMDB's),
/// `fdatasync`, and synced writes with `RWF_DSYNC`.
#[derive(Debug)]
pub struct OsFile {
    file: File,
    /// False once the kernel refused `pwritev2`'s `RWF_DSYNC` (before Linux 4.7, or a file
    /// system without it): synced writes are then a write and an `fdatasync`.
    dsync_writes: AtomicBool,
}

impl OsFile {
    /// The seam over `file`, opened for reading and writing.
    pub fn new(file: File) -> OsFile {
        OsFile {
            file,
            dsync_writes: AtomicBool::new(true),
        }
    }

    /// One `pwritev2(RWF_DSYNC)` of all of `buf` at `offset`, or `None` if the kernel does
    /// not have it.
    fn write_dsync(&self, offset: u64, buf: &[u8]) -> Option<io::Result<()>> {
        let iov = libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        loop {
            // SAFETY: `iov` points at `buf`, borrowed for this call; pwritev2 only reads it.
            let n = unsafe {
                libc::pwritev2(
                    self.file.as_raw_fd(),
                    &iov,
                    1,
                    offset as libc::off_t,
                    libc::RWF_DSYNC,
                )
            };
            if n == buf.len() as isize {
                return Some(Ok(()));
            }
            if n >= 0 {
                // A short write (a full disk): the rest, then a flush, by the plain path.
                return None;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::ENOSYS | libc::EOPNOTSUPP | libc::EINVAL) => {
                    self.dsync_writes.store(false, Ordering::Relaxed);
                    return None;
                }
                _ => return Some(Err(err)),
            }
        }
    }
}

impl DataFile for OsFile {
    fn file(&self) -> &File {
        &self.file
    }

    fn write_vectored_at(
        &self,
        offset: u64,
        bufs: &mut dyn Iterator<Item = &[u8]>,
    ) -> io::Result<()> {
        // A short run (most runs of a commit are one to a few pages) is cut into batches
        // of at most `SHORT_IOV` pieces: the batch's arrays are then a tenth as large, and
        // filling them (they are initialized whole) cost more than the rest of the call.
        if bufs.size_hint().1.is_some_and(|n| n <= SHORT_IOV) {
            for_each_batch::<SHORT_IOV>(offset, bufs, |at, pieces, len| {
                write_batch::<SHORT_IOV>(&self.file, at, pieces, len)
            })
        } else {
            for_each_batch::<MAX_IOV>(offset, bufs, |at, pieces, len| {
                write_batch::<MAX_IOV>(&self.file, at, pieces, len)
            })
        }
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        pwrite_all(&self.file, offset, buf)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn write_at_synced(&self, offset: u64, buf: &[u8]) -> Result<(), SyncedWriteError> {
        if self.dsync_writes.load(Ordering::Relaxed) {
            if let Some(done) = self.write_dsync(offset, buf) {
                return done.map_err(SyncedWriteError::Sync);
            }
        }
        self.write_at(offset, buf)
            .map_err(SyncedWriteError::Write)?;
        self.sync_data().map_err(SyncedWriteError::Sync)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
}

/// Most bytes one write call carries: 256 KiB, LMDB's own batch (`MDB_COMMIT_PAGES`, 64
/// pages of 4 KiB).
///
/// The kernel caches a buffered write in page-cache folios sized after the write (on ext4,
/// up to 2 MiB for a large write), and a later read fault on the map maps a whole folio.
/// With writes of up to 4 MiB, 1,000 synced one-put commits on a 250 MB file (W6) mapped
/// 248 MiB into the process against LMDB's 120, and W9's synced batch writes, bulk load and
/// removals ran 15-30% slower than with 256 KiB calls; 64 KiB calls were no faster than
/// 256 KiB (measured A/B, `ferrocore-bench run --groups w6-prefilled,w9`, on Linux 6.18).
pub const MAX_WRITE_BYTES: usize = 256 << 10;

/// Most iovecs in one call. Buffers are whole pages (at least 4 KiB), so a full batch of
/// them is at most `MAX_WRITE_BYTES`.
const MAX_IOV: usize = 64;

/// Most iovecs in one call of a short run's write (see `OsFile::write_vectored_at`).
const SHORT_IOV: usize = 8;

/// Cuts `bufs` (to be written from `offset` on) into batches of at most `N` pieces
/// and [`MAX_WRITE_BYTES`] bytes, splitting a buffer larger than that, and calls `write`
/// with each batch's offset, pieces and length, in order.
fn for_each_batch<'a, const N: usize>(
    mut offset: u64,
    bufs: impl IntoIterator<Item = &'a [u8]>,
    mut write: impl FnMut(u64, &[&'a [u8]], usize) -> io::Result<()>,
) -> io::Result<()> {
    let mut batch: [&[u8]; N] = [&[]; N];
    let (mut count, mut len) = (0, 0);
    for piece in bufs.into_iter().flat_map(|b| b.chunks(MAX_WRITE_BYTES)) {
        if count > 0 && (count == N || len + piece.len() > MAX_WRITE_BYTES) {
            write(offset, &batch[..count], len)?;
            offset += len as u64;
            (count, len) = (0, 0);
        }
        batch[count] = piece;
        count += 1;
        len += piece.len();
    }
    if count > 0 {
        write(offset, &batch[..count], len)?;
    }
    Ok(())
}

/// Writes all of `buf` at `offset`: one `pwrite`, then more for the rest of a short write.
/// A commit writes most of its pages as runs of one page; std's `write_all_at` cost some 60
/// instructions a call around the system call.
fn pwrite_all(file: &File, mut offset: u64, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is a live slice borrowed for this call; pwrite reads at most its
        // `buf.len()` bytes.
        let n = unsafe {
            libc::pwrite(
                file.as_raw_fd(),
                buf.as_ptr().cast::<libc::c_void>(),
                buf.len(),
                offset as libc::off_t,
            )
        };
        match usize::try_from(n) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(written) => {
                buf = &buf[written.min(buf.len())..];
                offset += written as u64;
            }
            Err(_) => {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
    Ok(())
}

/// One `pwritev` of `pieces` (`len` bytes in all, at most `N` pieces) at `offset`; a short
/// write is finished with positioned writes.
fn write_batch<const N: usize>(
    file: &File,
    offset: u64,
    pieces: &[&[u8]],
    len: usize,
) -> io::Result<()> {
    // Not only a debug check: pwritev is told `pieces.len()` iovecs of the `N` below.
    assert!(pieces.len() <= N, "a batch of {} pieces", pieces.len());
    debug_assert_eq!(pieces.iter().map(|p| p.len()).sum::<usize>(), len);
    let empty = libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    };
    let mut iov = [empty; N];
    for (v, p) in iov.iter_mut().zip(pieces) {
        *v = libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        };
    }
    let written = loop {
        // SAFETY: the first `pieces.len()` iovecs point at live slices borrowed for this
        // call; pwritev only reads from them.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                iov.as_ptr(),
                pieces.len() as libc::c_int,
                offset as libc::off_t,
            )
        };
        if n >= 0 {
            break n as usize;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    };
    if written < len {
        // Short write: finish the batch with plain positioned writes.
        let mut skip = written;
        let mut at = offset + written as u64;
        for p in pieces {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            pwrite_all(file, at, &p[skip..])?;
            at += (p.len() - skip) as u64;
            skip = 0;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::unix::fs::FileExt;

    /// Deterministic bytes for buffer `i` of `len` bytes.
    fn buffer(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
    }

    /// Batches of at most `N` pieces come in order, start where the previous ended, stay
    /// within the limits, and carry every byte once.
    fn check_batches<const N: usize>(lens: &[usize], offset: u64) {
        let bufs: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(i, &l)| buffer(i, l))
            .collect();
        let refs: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
        let mut next = offset;
        let mut seen = Vec::new();
        for_each_batch::<N>(offset, refs.iter().copied(), |at, pieces, len| {
            assert_eq!(at, next, "batches are contiguous");
            assert!(!pieces.is_empty() && pieces.len() <= N);
            assert!(len > 0 && len <= MAX_WRITE_BYTES, "batch of {len} bytes");
            assert_eq!(pieces.iter().map(|p| p.len()).sum::<usize>(), len);
            for p in pieces {
                seen.extend_from_slice(p);
            }
            next += len as u64;
            Ok(())
        })
        .unwrap();
        assert!(
            seen == bufs.concat(),
            "the batches carry every byte once, in order"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Both batch sizes the writes use keep to the limits and carry every byte.
        #[test]
        fn batches_cover_the_buffers_within_the_limits(
            lens in proptest::collection::vec(0usize..(3 * MAX_WRITE_BYTES / 2), 0..60),
            offset in 0u64..(1 << 40),
        ) {
            check_batches::<MAX_IOV>(&lens, offset);
            check_batches::<SHORT_IOV>(&lens, offset);
        }
    }

    /// Page-sized buffers fill whole batches: 64 pages of 4 KiB, 8 of 32 KiB.
    #[test]
    fn page_buffers_make_full_batches() {
        for page in [4096usize, 32768] {
            let bufs: Vec<Vec<u8>> = (0..200).map(|i| buffer(i, page)).collect();
            let refs: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
            let mut lens = Vec::new();
            for_each_batch::<MAX_IOV>(0, refs.iter().copied(), |_, _, len| {
                lens.push(len);
                Ok(())
            })
            .unwrap();
            let (full, last) = lens.split_at(lens.len() - 1);
            assert!(
                full.iter().all(|&l| l == MAX_WRITE_BYTES),
                "{page}: {lens:?}"
            );
            assert_eq!(last[0], 200 * page - full.len() * MAX_WRITE_BYTES);
        }
    }

    /// The bytes reach the file at their offsets, a buffer larger than one call included,
    /// in a long run and in a short one (the two batch sizes).
    #[test]
    fn vectored_writes_land_in_place() {
        for count in [140, 5] {
            let file = tempfile::tempfile().unwrap();
            let mut bufs: Vec<Vec<u8>> = (0..count.min(100)).map(|i| buffer(i, 4096)).collect();
            bufs.insert(bufs.len() / 2, buffer(100, 3 * MAX_WRITE_BYTES + 4096));
            bufs.extend((101..=count).map(|i| buffer(i, 8192)));
            let refs: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
            OsFile::new(file.try_clone().unwrap())
                .write_vectored_at(8192, &mut refs.iter().copied())
                .unwrap();
            let want = bufs.concat();
            let mut got = vec![0u8; want.len()];
            file.read_exact_at(&mut got, 8192).unwrap();
            assert!(got == want, "{count} buffers: file content differs");
        }
    }

    /// A plain write lands at its offset, past the end of the file too (the gap reads as
    /// zeros), and a later one over it replaces its bytes.
    #[test]
    fn plain_writes_land_in_place() {
        let file = tempfile::tempfile().unwrap();
        let data = OsFile::new(file.try_clone().unwrap());
        data.write_at(8192, &buffer(1, 4096)).unwrap();
        data.write_at(0, &buffer(2, 4096)).unwrap();
        data.write_at(9000, &buffer(3, 100)).unwrap();
        assert_eq!(data.len().unwrap(), 12288);
        let mut want = buffer(2, 4096);
        want.extend(vec![0u8; 4096]);
        want.extend(buffer(1, 4096));
        want[9000..9100].copy_from_slice(&buffer(3, 100));
        let mut got = vec![0u8; 12288];
        file.read_exact_at(&mut got, 0).unwrap();
        assert!(got == want, "file content differs from the writes");
    }

    /// A synced write lands at its offset whether the kernel takes `RWF_DSYNC` or the
    /// write falls back to a write and a flush; writing past the end grows the file.
    #[test]
    fn synced_writes_land_in_place_on_both_paths() {
        for dsync in [true, false] {
            let file = tempfile::tempfile().unwrap();
            let data = OsFile::new(file.try_clone().unwrap());
            data.dsync_writes.store(dsync, Ordering::Relaxed);
            data.write_at(0, &buffer(0, 8192)).unwrap();
            data.write_at_synced(4096, &buffer(1, 176)).unwrap();
            data.write_at_synced(12288, &buffer(2, 4096)).unwrap();
            assert_eq!(data.len().unwrap(), 16384, "dsync {dsync}");
            let mut got = vec![0u8; 16384];
            file.read_exact_at(&mut got, 0).unwrap();
            let mut want = buffer(0, 8192);
            want[4096..4096 + 176].copy_from_slice(&buffer(1, 176));
            want.resize(12288, 0);
            want.extend(buffer(2, 4096));
            assert!(got == want, "dsync {dsync}: file content differs");
            assert_eq!(data.dsync_writes.load(Ordering::Relaxed), dsync);
        }
    }

    /// A synced write the kernel refuses fails as the flush: nothing is known durable.
    #[test]
    fn a_refused_synced_write_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("read-only");
        std::fs::write(&path, [0u8; 4096]).unwrap();
        for dsync in [true, false] {
            let data = OsFile::new(File::open(&path).unwrap());
            data.dsync_writes.store(dsync, Ordering::Relaxed);
            let err = data.write_at_synced(0, &[1u8; 176]).unwrap_err();
            let io = match &err {
                SyncedWriteError::Write(e) | SyncedWriteError::Sync(e) => e,
            };
            assert_eq!(
                io.raw_os_error(),
                Some(libc::EBADF),
                "dsync {dsync}: {err:?}"
            );
        }
        assert_eq!(std::fs::read(&path).unwrap(), [0u8; 4096]);
    }
}
