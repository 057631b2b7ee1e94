//! The lock file: reader table and writer lock shared by every process of an environment,
//! in exactly LMDB 0.9's layout and protocol (x86-64 Linux, glibc), so that LMDB processes
//! and ferrocore processes share one live environment. See `docs/FORMAT.md` §14.
//!
//! - Presence: every process holds a shared fcntl lock on byte 0 while it has the
//!   environment open. An opener that gets an exclusive lock there instead is alone: it
//!   re-initialises the header, keeps the exclusive lock while it reads the data file, and
//!   only then publishes the last txn id and downgrades to shared ([`LockFile::share`]).
//!   Everyone else waits for the shared lock before reading anything of the file, so no
//!   opener ever sees a half-initialised table.
//! - Liveness: a process holds an exclusive fcntl lock on the byte at offset = its pid, so
//!   a reader-table check elsewhere can tell a dead reader's slot from a live one.
//! - Writer: `mti_wmutex`, a process-shared robust pthread mutex held for the whole write
//!   txn. If its owner dies, the next locker gets `EOWNERDEAD` and repairs the txn id.
//! - Readers claim a slot under `mti_rmutex`, as LMDB does, and publish their snapshot's
//!   txn id with atomics (no lock while reading); a reset txn keeps its slot.
//!
//! Each process opens one descriptor per lock file however many environments of it it has
//! open (see [`registry`]): POSIX drops all of a process's fcntl locks on a file when any
//! of its descriptors of that file is closed.

pub mod fork;
pub mod kept;
pub mod mutex;
pub mod registry;

use std::fs::File;
use std::io;
use std::mem::ManuallyDrop;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::error::{Error, Result};
use mutex::{Locked, SharedMutex};

/// `mti_magic`.
pub const LOCK_MAGIC: u32 = 0xBEEF_C0DE;
/// `mti_format` of LMDB 0.9: lock version 1, plus bit 16 "readers take pid locks".
pub const LOCK_FORMAT: u32 = 0x0001_0001;
/// Bytes of header before the reader slots.
pub const HEADER_SIZE: usize = 128;
/// Bytes per reader slot (one cache line).
pub const SLOT_SIZE: usize = 64;
/// `mr_txnid` of a slot that is held but has no snapshot in use.
pub const NO_SNAPSHOT: u64 = u64::MAX;

/// Offsets of the header fields (LMDB's `MDB_txninfo`).
const MAGIC_AT: usize = 0;
const FORMAT_AT: usize = 4;
const RMUTEX_AT: usize = 8;
const TXNID_AT: usize = 48;
const NUMREADERS_AT: usize = 56;
const WMUTEX_AT: usize = 64;
const _: () = assert!(RMUTEX_AT + mutex::MUTEX_SIZE <= TXNID_AT);
const _: () = assert!(WMUTEX_AT + mutex::MUTEX_SIZE <= HEADER_SIZE);

/// The mapped lock file of an open environment: one per process and file.
pub struct LockFile {
    /// The process's one descriptor of the file; never closed in a forked child (see
    /// [`fork`]).
    file: ManuallyDrop<File>,
    ptr: *mut u8,
    len: usize,
    max_readers: usize,
    pid: u32,
    /// Holding byte 0 exclusively: this process is the first opener and has not yet
    /// called [`LockFile::share`].
    exclusive: bool,
    /// The fork generation the file was opened in.
    fork_generation: u64,
}

// SAFETY: all shared state in the mapping is accessed through atomics or glibc's mutex
// calls; the pointer itself never changes after creation.
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

/// Tries to lock byte 0 exclusively without waiting: `true` if this process is alone.
fn try_exclusive(file: &File) -> io::Result<bool> {
    match fcntl_lock(file, libc::F_SETLK, libc::F_WRLCK, 0) {
        Ok(()) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// True if some other process holds a lock on byte `start`.
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

/// Maps `len` bytes of `file`, shared and writable.
fn map_shared(file: &File, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh shared mapping of `len` bytes of an open file; no existing memory is
    // affected.
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
        return Err(io::Error::last_os_error());
    }
    Ok(ptr.cast())
}

/// Checks the header of a mapped table that other processes share with us.
fn check_header(magic: u32, format: u32) -> Result<()> {
    if magic != LOCK_MAGIC {
        return Err(Error::Invalid("lock file has a bad magic"));
    }
    if format != LOCK_FORMAT {
        // Another engine (LMDB 1.0 / mdb.master's lock version 2) has it open right now.
        return Err(Error::VersionMismatch { found: format });
    }
    Ok(())
}

/// The reader-table mutex, held; unlocked on drop.
struct ReaderTableGuard<'a>(&'a LockFile);

impl Drop for ReaderTableGuard<'_> {
    fn drop(&mut self) {
        self.0.rmutex().unlock();
    }
}

impl LockFile {
    /// Takes the presence lock on the open lock file `file` and maps it with room for
    /// `max_readers` (a larger existing table wins). If this process is alone it
    /// re-initialises the table and keeps byte 0 exclusive: the caller must then call
    /// [`LockFile::share`] once it knows the last committed txn id.
    pub fn with_file(file: File, max_readers: usize) -> Result<LockFile> {
        let wanted = HEADER_SIZE + SLOT_SIZE * max_readers;
        let lock = if try_exclusive(&file)? {
            Self::initialise_alone(file, wanted)?
        } else {
            // Wait while a first opener initialises; then the table is complete.
            fcntl_lock(&file, libc::F_SETLKW, libc::F_RDLCK, 0)?;
            match Self::join(file)? {
                Ok(lock) => lock,
                // Never initialised, or its first opener died part way: if we are alone
                // now, start afresh (upgrading our shared lock); else it is not ours to fix.
                Err((file, e)) if matches!(e, Error::Invalid(_)) && try_exclusive(&file)? => {
                    Self::initialise_alone(file, wanted)?
                }
                Err((_, e)) => return Err(e),
            }
        };
        // Liveness marker for reader-table checks in other processes.
        fcntl_lock(&lock.file, libc::F_SETLK, libc::F_WRLCK, lock.pid as i64)?;
        Ok(lock)
    }

    /// Maps `len` bytes of `file` as this process's lock table.
    fn map(file: File, len: usize, exclusive: bool) -> Result<LockFile> {
        let ptr = map_shared(&file, len)?;
        Ok(LockFile {
            file: ManuallyDrop::new(file),
            ptr,
            len,
            max_readers: (len - HEADER_SIZE) / SLOT_SIZE,
            pid: std::process::id(),
            exclusive,
            fork_generation: fork::generation(),
        })
    }

    /// Holding byte 0 exclusively: a fresh table of at least `wanted` bytes (keeping a
    /// larger size an earlier opener chose, as LMDB does), zeroed and initialised.
    fn initialise_alone(file: File, wanted: usize) -> Result<LockFile> {
        let len = wanted.max(file.metadata()?.len() as usize);
        file.set_len(0)?;
        file.set_len(len as u64)?;
        let lock = Self::map(file, len, true)?;
        lock.rmutex().init()?;
        lock.wmutex().init()?;
        lock.u32_at(MAGIC_AT).store(LOCK_MAGIC, Ordering::Relaxed);
        lock.u32_at(FORMAT_AT).store(LOCK_FORMAT, Ordering::Relaxed);
        lock.txnid_cell().store(0, Ordering::Relaxed);
        lock.numreaders().store(0, Ordering::Release);
        Ok(lock)
    }

    /// Holding byte 0 shared: the table others initialised, or the file back with the
    /// reason it is not usable.
    fn join(file: File) -> Result<std::result::Result<LockFile, (File, Error)>> {
        let len = file.metadata()?.len() as usize;
        if len < HEADER_SIZE + SLOT_SIZE {
            return Ok(Err((file, Error::Invalid("lock file too short"))));
        }
        let lock = Self::map(file, len, false)?;
        match check_header(
            lock.u32_at(MAGIC_AT).load(Ordering::Acquire),
            lock.u32_at(FORMAT_AT).load(Ordering::Acquire),
        ) {
            Ok(()) => Ok(Ok(lock)),
            Err(e) => Ok(Err((lock.into_file(), e))),
        }
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

    /// Unmaps the table and gives the file back, still open (for a retry).
    fn into_file(self) -> File {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: ptr/len are what mmap returned and nothing borrows the mapping yet.
        unsafe { libc::munmap(me.ptr.cast(), me.len) };
        // SAFETY: `me` is never used or dropped again, so the file is taken exactly once;
        // the rest (an unlocked futex mutex, atomics) owns no resources.
        unsafe { ManuallyDrop::take(&mut me.file) }
    }

    /// True while this process is the first opener and has not yet shared the table.
    pub fn is_first_opener(&self) -> bool {
        self.exclusive
    }

    /// Ends a first open: publishes `txnid` (the data file's newest meta) and downgrades
    /// byte 0 to shared, letting the openers that waited in. A no-op for later openers.
    pub fn share(&mut self, txnid: u64) -> Result<()> {
        if self.exclusive {
            self.txnid_cell().store(txnid, Ordering::SeqCst);
            fcntl_lock(&self.file, libc::F_SETLK, libc::F_RDLCK, 0)?;
            self.exclusive = false;
        }
        Ok(())
    }

    /// An atomic u32 at byte `off` of the mapping.
    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len);
        // SAFETY: in bounds and 4-aligned (mmap returns page-aligned memory); the mapping
        // lives as long as `self`, and every access to shared words is atomic.
        #[allow(clippy::cast_ptr_alignment)] // aligned: asserted just above
        unsafe {
            &*(self.ptr.add(off) as *const AtomicU32)
        }
    }

    /// An atomic u64 at byte `off` of the mapping.
    fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len);
        // SAFETY: as in u32_at, with 8-byte alignment.
        #[allow(clippy::cast_ptr_alignment)] // aligned: asserted just above
        unsafe {
            &*(self.ptr.add(off) as *const AtomicU64)
        }
    }

    fn rmutex(&self) -> SharedMutex {
        // SAFETY: 8-aligned, in bounds (asserted against HEADER_SIZE above), and used by
        // every process of the environment only as LMDB's reader-table mutex.
        unsafe { SharedMutex::at(self.ptr.add(RMUTEX_AT)) }
    }

    fn wmutex(&self) -> SharedMutex {
        // SAFETY: as in rmutex, for LMDB's writer mutex.
        unsafe { SharedMutex::at(self.ptr.add(WMUTEX_AT)) }
    }

    /// The last committed txnid, published by the writer (`mti_txnid`).
    pub fn txnid_cell(&self) -> &AtomicU64 {
        self.u64_at(TXNID_AT)
    }

    fn numreaders(&self) -> &AtomicU32 {
        self.u32_at(NUMREADERS_AT)
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

    /// Locks the reader table (`mti_rmutex`). If its owner died, first clears the slots of
    /// dead processes (what the owner may have left half-claimed), as LMDB does.
    fn lock_reader_table(&self) -> Result<ReaderTableGuard<'_>> {
        let mutex = self.rmutex();
        let locked = mutex.lock()?;
        let guard = ReaderTableGuard(self);
        if locked == Locked::OwnerDied {
            self.clear_stale_readers_locked()?;
            mutex.mark_consistent()?;
        }
        Ok(guard)
    }

    /// Claims a free reader slot for this process, under the reader-table mutex and exactly
    /// as LMDB claims it.
    pub fn acquire_slot(&self) -> Result<usize> {
        // SAFETY: pthread_self has no preconditions.
        let tid = unsafe { libc::pthread_self() } as u64;
        let _table = self.lock_reader_table()?;
        let used = self.num_readers();
        let i = (0..used)
            .find(|&i| self.slot_pid(i).load(Ordering::Acquire) == 0)
            .unwrap_or(used);
        if i >= self.max_readers {
            return Err(Error::ReadersFull);
        }
        // Reset the slot, publish it in the count, then claim it: code that scans the
        // table without the mutex never sees a half-written slot with a pid.
        self.slot_pid(i).store(0, Ordering::SeqCst);
        self.slot_txnid(i).store(NO_SNAPSHOT, Ordering::SeqCst);
        self.slot_tid(i).store(tid, Ordering::Relaxed);
        if i == used {
            self.numreaders().store(used as u32 + 1, Ordering::SeqCst);
        }
        self.slot_pid(i).store(self.pid, Ordering::SeqCst);
        Ok(i)
    }

    /// Records the calling thread as slot `i`'s reader (a slot kept by this process
    /// passes from thread to thread: see [`kept::KeptSlots`]), as `mdb_reader_list` shows it.
    pub fn note_slot_thread(&self, i: usize) {
        debug_assert_eq!(self.slot_pid(i).load(Ordering::Relaxed), self.pid);
        // SAFETY: pthread_self has no preconditions.
        let tid = unsafe { libc::pthread_self() } as u64;
        self.slot_tid(i).store(tid, Ordering::Relaxed);
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

    /// Gives slot `i` back (as LMDB does when a `NOTLS` read txn ends).
    pub fn release_slot(&self, i: usize) {
        debug_assert!(i < self.max_readers);
        debug_assert_eq!(self.slot_pid(i).load(Ordering::Relaxed), self.pid);
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

    /// Takes the cross-process writer mutex (blocks). On [`Locked::OwnerDied`] the caller
    /// must republish the newest meta's txn id, then call [`LockFile::writer_recovered`].
    pub fn lock_writer(&self) -> Result<Locked> {
        Ok(self.wmutex().lock()?)
    }

    /// Ends the repair after [`Locked::OwnerDied`]: clears dead readers and makes the
    /// writer mutex usable again.
    pub fn writer_recovered(&self) -> Result<()> {
        self.clear_stale_readers()?;
        self.wmutex().mark_consistent()?;
        Ok(())
    }

    /// Releases the cross-process writer mutex.
    pub fn unlock_writer(&self) {
        self.wmutex().unlock();
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

    /// True if process `pid` holds its liveness lock (LMDB readers take it too).
    fn is_alive(&self, pid: u32) -> Result<bool> {
        Ok(fcntl_is_locked(&self.file, pid as i64)?)
    }

    /// Clears the slots of processes that no longer exist; returns how many were cleared.
    /// Finds them without the reader-table mutex, then clears each dead process's slots
    /// under it, after checking again that the pid was not reused meanwhile (as LMDB).
    pub fn clear_stale_readers(&self) -> Result<usize> {
        self.sweep_dead_readers(false)
    }

    /// [`LockFile::clear_stale_readers`] for a caller that holds the reader-table mutex.
    fn clear_stale_readers_locked(&self) -> Result<usize> {
        self.sweep_dead_readers(true)
    }

    /// Clears the slots of dead processes. `table_held`: the caller holds the reader-table
    /// mutex; otherwise it is taken for each dead pid found, and the pid checked again.
    fn sweep_dead_readers(&self, table_held: bool) -> Result<usize> {
        let mut cleared = 0;
        let mut checked: Vec<u32> = Vec::new();
        for i in 0..self.num_readers() {
            let pid = self.slot_pid(i).load(Ordering::Acquire);
            if pid == 0 || pid == self.pid || checked.contains(&pid) {
                continue;
            }
            checked.push(pid);
            if self.is_alive(pid)? {
                continue;
            }
            if table_held {
                cleared += self.clear_slots_of(pid, i);
            } else {
                let _table = self.lock_reader_table()?;
                if !self.is_alive(pid)? {
                    cleared += self.clear_slots_of(pid, i);
                }
            }
        }
        Ok(cleared)
    }

    /// Frees every slot from `from` on that dead process `pid` holds (reader-table mutex
    /// held). A dead process writes nothing: its snapshot is cleared first, then the slot.
    fn clear_slots_of(&self, pid: u32, from: usize) -> usize {
        let mut cleared = 0;
        for j in from..self.num_readers() {
            if self.slot_pid(j).load(Ordering::Acquire) == pid {
                self.slot_txnid(j).store(NO_SNAPSHOT, Ordering::SeqCst);
                self.slot_pid(j).store(0, Ordering::SeqCst);
                cleared += 1;
            }
        }
        cleared
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        let forked = fork::current_generation() != self.fork_generation;
        if !forked {
            // Any slot this process still holds goes back (no txn outlives its environment).
            for i in 0..self.num_readers() {
                if self.slot_pid(i).load(Ordering::Acquire) == self.pid {
                    self.slot_txnid(i).store(NO_SNAPSHOT, Ordering::SeqCst);
                    self.slot_pid(i).store(0, Ordering::SeqCst);
                }
            }
        }
        // SAFETY: ptr/len are what mmap returned; nothing borrows the mapping past the
        // environment's lifetime.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
        if !forked {
            // SAFETY: dropped exactly once, here; `self.file` is not used afterwards. In a
            // forked child the inherited descriptor stays open: closing it would drop the
            // fcntl locks this process holds on the same file through its own later open.
            unsafe { ManuallyDrop::drop(&mut self.file) };
        }
    }
}
