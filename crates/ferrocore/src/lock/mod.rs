//! The lock file: reader table and writer lock shared by every process of an environment.
//!
//! Layout follows LMDB 0.9's `lock.mdb` header and slot positions (see `docs/FORMAT.md`),
//! but with format word [`LOCK_FORMAT`] instead of LMDB's, so that a real LMDB process
//! opening the environment while ferrocore has it open refuses it (MDB_VERSION_MISMATCH)
//! rather than using uninitialised pthread mutexes.
//!
//! - Presence: every process holds a shared fcntl lock on byte 0. The first opener gets an
//!   exclusive lock instead, knows it is alone, re-initialises the header (whoever left the
//!   file behind, LMDB or ferrocore) and downgrades to shared.
//! - Liveness: a process holds an exclusive fcntl lock on the byte at offset = its pid, so
//!   `reader_check` can tell a dead reader's slot from a live one.
//! - Writer: an exclusive fcntl lock on the byte at [`WRITER_LOCK_OFFSET`], which the
//!   kernel releases if the process dies, plus an in-process mutex (fcntl locks do not
//!   exclude threads of one process).
//! - Readers claim a slot with a compare-and-swap on its pid word and publish their
//!   snapshot txnid with atomics: no lock on the read path.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::error::{Error, Result};

/// `mti_magic`.
pub const LOCK_MAGIC: u32 = 0xBEEF_C0DE;
/// ferrocore's lock format word (LMDB 0.9 writes 0x00010001).
pub const LOCK_FORMAT: u32 = 0x00FC_0001;
/// Bytes of header before the reader slots.
pub const HEADER_SIZE: usize = 128;
/// Bytes per reader slot (one cache line).
pub const SLOT_SIZE: usize = 64;
/// Offset of the byte whose exclusive fcntl lock is the writer lock.
pub const WRITER_LOCK_OFFSET: i64 = 1 << 40;
/// `mr_txnid` of a slot that is held but has no snapshot in use.
pub const NO_SNAPSHOT: u64 = u64::MAX;

/// The mapped lock file of an open environment.
pub struct LockFile {
    file: File,
    ptr: *mut u8,
    len: usize,
    max_readers: usize,
    pid: u32,
    initialised_here: bool,
}

// SAFETY: all shared state in the mapping is accessed through atomics; the pointer itself
// never changes after creation.
unsafe impl Send for LockFile {}
// SAFETY: see above.
unsafe impl Sync for LockFile {}

fn fcntl_lock(file: &File, cmd: libc::c_int, kind: libc::c_int, start: i64) -> io::Result<()> {
    // SAFETY: flock is plain data; zeroed is a valid value for every field.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start as libc::off_t;
    fl.l_len = 1;
    loop {
        // SAFETY: fcntl with a pointer to a valid flock struct for the duration of the call.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut fl) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return Err(err);
    }
}

/// True if some process holds a conflicting lock on byte `start`.
fn fcntl_is_locked(file: &File, start: i64) -> io::Result<bool> {
    // SAFETY: as in fcntl_lock.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start as libc::off_t;
    fl.l_len = 1;
    // SAFETY: F_GETLK fills the valid flock struct we pass.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut fl) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

impl LockFile {
    /// Opens (creating if needed) the lock file at `path` with room for `max_readers`.
    pub fn open(path: &Path, max_readers: usize, mode: u32) -> Result<LockFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(mode)
            .open(path)?;
        Self::with_file(file, max_readers)
    }

    /// A lock table no other process sees, in memory (`NO_LOCK`: the application
    /// serialises access itself, and no lock file is created, as in LMDB).
    pub fn private(max_readers: usize) -> Result<LockFile> {
        // SAFETY: memfd_create takes a NUL-terminated name and flags; it returns a new
        // descriptor (or -1), which the File below then owns.
        let fd = unsafe { libc::memfd_create(c"ferrocore-nolock".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error().into());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let file = unsafe { <File as std::os::unix::io::FromRawFd>::from_raw_fd(fd) };
        Self::with_file(file, max_readers)
    }

    fn with_file(file: File, max_readers: usize) -> Result<LockFile> {
        let pid = std::process::id();
        let alone = match fcntl_lock(&file, libc::F_SETLK, libc::F_WRLCK, 0) {
            Ok(()) => true,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) => false,
            Err(e) => return Err(e.into()),
        };
        let existing_len = file.metadata()?.len() as usize;
        let wanted = HEADER_SIZE + SLOT_SIZE * max_readers;
        let len = if alone {
            // Nobody else has the environment open: start a fresh table, keeping a larger
            // size an earlier opener chose (as LMDB does).
            let len = wanted.max(existing_len);
            file.set_len(0)?;
            file.set_len(len as u64)?;
            len
        } else {
            fcntl_lock(&file, libc::F_SETLKW, libc::F_RDLCK, 0)?;
            if existing_len < HEADER_SIZE + SLOT_SIZE {
                return Err(Error::Invalid("lock file too short"));
            }
            existing_len
        };
        // SAFETY: fresh shared read-write mapping of the whole lock file, which has `len`
        // bytes (set above or checked); no other memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error().into());
        }
        let lock = LockFile {
            file,
            ptr: ptr.cast(),
            len,
            max_readers: (len - HEADER_SIZE) / SLOT_SIZE,
            pid,
            initialised_here: alone,
        };
        if alone {
            lock.u32_at(0).store(LOCK_MAGIC, Ordering::Relaxed);
            lock.u32_at(4).store(LOCK_FORMAT, Ordering::Relaxed);
            lock.txnid_cell().store(0, Ordering::Relaxed);
            lock.u32_at(56).store(0, Ordering::Release);
            fcntl_lock(&lock.file, libc::F_SETLK, libc::F_RDLCK, 0)?;
        } else {
            let magic = lock.u32_at(0).load(Ordering::Acquire);
            let format = lock.u32_at(4).load(Ordering::Acquire);
            if magic != LOCK_MAGIC {
                return Err(Error::Invalid("lock file has a bad magic"));
            }
            if format != LOCK_FORMAT {
                // Another engine (LMDB itself) has the environment open right now.
                return Err(Error::VersionMismatch { found: format });
            }
        }
        // Liveness marker for reader_check in other processes.
        fcntl_lock(&lock.file, libc::F_SETLK, libc::F_WRLCK, pid as i64)?;
        Ok(lock)
    }

    /// An atomic u32 at byte `off` of the mapping.
    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len);
        // SAFETY: in bounds and 4-aligned (mmap returns page-aligned memory); the mapping
        // lives as long as `self`, and every access to shared words is atomic.
        unsafe { &*(self.ptr.add(off) as *const AtomicU32) }
    }

    /// An atomic u64 at byte `off` of the mapping.
    fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len);
        // SAFETY: as in u32_at, with 8-byte alignment.
        unsafe { &*(self.ptr.add(off) as *const AtomicU64) }
    }

    /// True if this process was alone at open and initialised the table.
    pub fn initialised_here(&self) -> bool {
        self.initialised_here
    }

    /// The last committed txnid, published by the writer (`mti_txnid`).
    pub fn txnid_cell(&self) -> &AtomicU64 {
        self.u64_at(48)
    }

    fn numreaders(&self) -> &AtomicU32 {
        self.u32_at(56)
    }

    fn slot_txnid(&self, i: usize) -> &AtomicU64 {
        self.u64_at(HEADER_SIZE + SLOT_SIZE * i)
    }

    fn slot_pid(&self, i: usize) -> &AtomicU32 {
        self.u32_at(HEADER_SIZE + SLOT_SIZE * i + 8)
    }

    fn slot_tid(&self, i: usize) -> &AtomicU64 {
        self.u64_at(HEADER_SIZE + SLOT_SIZE * i + 16)
    }

    /// Number of reader slots.
    pub fn max_readers(&self) -> usize {
        self.max_readers
    }

    /// Slots used since the table was initialised (high-water mark).
    pub fn num_readers(&self) -> usize {
        (self.numreaders().load(Ordering::Acquire) as usize).min(self.max_readers)
    }

    /// Claims a free reader slot for this process.
    pub fn acquire_slot(&self) -> Result<usize> {
        for i in 0..self.max_readers {
            let pid = self.slot_pid(i);
            if pid.load(Ordering::Relaxed) == 0
                && pid
                    .compare_exchange(0, self.pid, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                self.slot_txnid(i).store(NO_SNAPSHOT, Ordering::SeqCst);
                // SAFETY: pthread_self has no preconditions.
                self.slot_tid(i)
                    .store(unsafe { libc::pthread_self() } as u64, Ordering::Relaxed);
                self.numreaders().fetch_max(i as u32 + 1, Ordering::AcqRel);
                return Ok(i);
            }
        }
        Err(Error::ReadersFull)
    }

    /// Publishes a consistent snapshot in slot `i` and returns its txnid: loops until the
    /// txnid it stored is still the latest after storing, so a writer scanning the table
    /// either sees this reader or committed before the reader picked its snapshot.
    pub fn begin_snapshot(&self, i: usize) -> u64 {
        let latest = self.txnid_cell();
        let slot = self.slot_txnid(i);
        loop {
            let t = latest.load(Ordering::SeqCst);
            slot.store(t, Ordering::SeqCst);
            if latest.load(Ordering::SeqCst) == t {
                return t;
            }
        }
    }

    /// Marks slot `i` as holding no snapshot (the reader was reset).
    pub fn end_snapshot(&self, i: usize) {
        self.slot_txnid(i).store(NO_SNAPSHOT, Ordering::Release);
    }

    /// Gives slot `i` back.
    pub fn release_slot(&self, i: usize) {
        self.slot_txnid(i).store(NO_SNAPSHOT, Ordering::Release);
        self.slot_pid(i).store(0, Ordering::Release);
    }

    /// The oldest snapshot any live reader holds, or `None` when no reader has one.
    pub fn oldest_reader(&self) -> Option<u64> {
        let mut oldest = None;
        for i in 0..self.num_readers() {
            if self.slot_pid(i).load(Ordering::Acquire) == 0 {
                continue;
            }
            let t = self.slot_txnid(i).load(Ordering::SeqCst);
            if t != NO_SNAPSHOT {
                oldest = Some(oldest.map_or(t, |o: u64| o.min(t)));
            }
        }
        oldest
    }

    /// Takes the cross-process writer lock (blocks).
    pub fn lock_writer(&self) -> Result<()> {
        fcntl_lock(
            &self.file,
            libc::F_SETLKW,
            libc::F_WRLCK,
            WRITER_LOCK_OFFSET,
        )?;
        Ok(())
    }

    /// Releases the cross-process writer lock.
    pub fn unlock_writer(&self) {
        // An unlock of a lock we hold cannot fail for a valid fd.
        let _ = fcntl_lock(&self.file, libc::F_SETLK, libc::F_UNLCK, WRITER_LOCK_OFFSET);
    }

    /// Lists the occupied slots: (pid, thread id, snapshot txnid or None).
    pub fn readers(&self) -> Vec<(u32, u64, Option<u64>)> {
        (0..self.num_readers())
            .filter_map(|i| {
                let pid = self.slot_pid(i).load(Ordering::Acquire);
                (pid != 0).then(|| {
                    let t = self.slot_txnid(i).load(Ordering::Acquire);
                    (
                        pid,
                        self.slot_tid(i).load(Ordering::Relaxed),
                        (t != NO_SNAPSHOT).then_some(t),
                    )
                })
            })
            .collect()
    }

    /// Clears the slots of processes that no longer exist; returns how many were cleared.
    pub fn clear_stale_readers(&self) -> Result<usize> {
        let mut cleared = 0;
        let mut checked: Vec<(u32, bool)> = Vec::new();
        for i in 0..self.num_readers() {
            let pid = self.slot_pid(i).load(Ordering::Acquire);
            if pid == 0 || pid == self.pid {
                continue;
            }
            let alive = match checked.iter().find(|(p, _)| *p == pid) {
                Some(&(_, alive)) => alive,
                None => {
                    let alive = fcntl_is_locked(&self.file, pid as i64)?;
                    checked.push((pid, alive));
                    alive
                }
            };
            // A dead process writes nothing: clear its snapshot first, then free the slot,
            // so a new owner's snapshot is never overwritten.
            if !alive {
                self.slot_txnid(i).store(NO_SNAPSHOT, Ordering::SeqCst);
                if self
                    .slot_pid(i)
                    .compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    cleared += 1;
                }
            }
        }
        Ok(cleared)
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        // SAFETY: ptr/len are what mmap returned; nothing borrows the mapping past the
        // environment's lifetime.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}
