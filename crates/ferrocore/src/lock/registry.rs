//! One lock-file descriptor per process and file, shared by every environment of the
//! process that opens it.
//!
//! POSIX drops every fcntl lock a process holds on a file as soon as any of its descriptors
//! of that file is closed. So a second open of an environment must never open (and later
//! close) a second descriptor of `lock.mdb`: that would silently drop the first open's
//! presence and liveness locks, and the next process to open the environment would
//! re-initialise the table under it. Instead the process finds the lock file it already has
//! open by device and inode, before opening anything, and shares it (reference-counted).
//!
//! Opens and the closing of a lock file are serialised by one process-wide mutex, held for
//! a whole environment open, so no open can slip between a last close and its `close(2)`.
//! fork() takes that mutex too (`pthread_atfork`), so a child never inherits it locked.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::{fork, LockFile};
use crate::error::{Error, Result};

/// A file's identity: (device, inode).
type FileId = (u64, u64);

struct Entry {
    lock: Arc<LockFile>,
    /// `LockHandle`s of this entry alive in this process.
    users: usize,
    /// The fork generation it was opened in: a forked child never shares its parent's.
    generation: u64,
}

type Registry = HashMap<FileId, Entry>;

fn registry() -> &'static Mutex<Registry> {
    static OPEN: OnceLock<Mutex<Registry>> = OnceLock::new();
    OPEN.get_or_init(|| {
        // SAFETY: registers plain `extern "C"` functions with no preconditions; done once,
        // before the registry is first locked, so every later fork() is covered.
        let rc =
            unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork)) };
        assert_eq!(rc, 0, "pthread_atfork: {rc}");
        Mutex::default()
    })
}

thread_local! {
    /// The registry, held by the thread that is calling fork(), from just before the fork
    /// until just after it, in the parent and in the child.
    static HELD_ACROSS_FORK: RefCell<Option<MutexGuard<'static, Registry>>> =
        const { RefCell::new(None) };
}

/// fork()'s prepare handler. Another thread may hold the registry (an open in progress);
/// a child forked at that moment would inherit it locked, with no thread to unlock it, and
/// hang at its first open. So fork() waits for the registry and takes it into the child.
extern "C" fn before_fork() {
    let guard = lock_registry();
    let _ = HELD_ACROSS_FORK.try_with(|held| *held.borrow_mut() = Some(guard));
}

/// fork()'s parent and child handler: releases what `before_fork` took. In the child the
/// forking thread is the one that holds it, so the unlock is its own.
extern "C" fn after_fork() {
    let _ = HELD_ACROSS_FORK.try_with(|held| held.borrow_mut().take());
}

fn lock_registry() -> MutexGuard<'static, Registry> {
    // A panic while holding it leaves the map consistent (every change is one insert or
    // remove), so a poisoned registry is still usable.
    registry()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// This process's share of a lock file; dereferences to the [`LockFile`]. Dropping the
/// last handle of a file closes the descriptor (under the registry mutex).
pub struct LockHandle {
    lock: ManuallyDrop<Arc<LockFile>>,
    /// Registered under this identity (`None`: a private table, never shared).
    id: Option<FileId>,
}

impl Deref for LockHandle {
    type Target = LockFile;
    fn deref(&self) -> &LockFile {
        &self.lock
    }
}

impl Drop for LockHandle {
    fn drop(&mut self) {
        let mut registry = lock_registry();
        if let Some(id) = self.id {
            if let Some(entry) = registry.get_mut(&id) {
                if Arc::ptr_eq(&entry.lock, &self.lock) {
                    entry.users -= 1;
                    if entry.users == 0 {
                        registry.remove(&id);
                    }
                }
            }
        }
        // SAFETY: dropped exactly once, here, and not used afterwards. Dropping it while
        // the registry is locked means a last close's close(2) happens before any later
        // open of the same file in this process can take its locks.
        unsafe { ManuallyDrop::drop(&mut self.lock) };
        drop(registry);
    }
}

/// A lock file being opened, until the environment open succeeds ([`OpenGuard::finish`]).
pub enum PendingLock {
    /// The one this process already has open.
    Shared(Arc<LockFile>, FileId),
    /// Opened now (registered under its identity when the open finishes).
    New(LockFile, Option<FileId>),
}

impl PendingLock {
    /// The lock file.
    pub fn lock(&self) -> &LockFile {
        match self {
            PendingLock::Shared(lock, _) => lock,
            PendingLock::New(lock, _) => lock,
        }
    }

    /// Ends a first open (see [`LockFile::share`]); nothing to do for a shared one.
    pub fn share(&mut self, txnid: u64) -> Result<()> {
        match self {
            PendingLock::Shared(..) => Ok(()),
            PendingLock::New(lock, _) => lock.share(txnid),
        }
    }
}

/// The registry, held for a whole environment open.
pub struct OpenGuard(MutexGuard<'static, Registry>);

/// Starts an environment open: until the guard drops, no other thread of this process
/// opens or closes a lock file.
pub fn begin_open() -> OpenGuard {
    OpenGuard(lock_registry())
}

impl OpenGuard {
    /// The lock file at `path`, with room for `max_readers` if it is created: the one this
    /// process has open already (found by device and inode before anything is opened), or
    /// a newly opened one, created with `mode`.
    pub fn open(&mut self, path: &Path, max_readers: usize, mode: u32) -> Result<PendingLock> {
        let generation = fork::generation();
        let find = |registry: &Registry, id: FileId| {
            registry
                .get(&id)
                .filter(|e| e.generation == generation)
                .map(|e| e.lock.clone())
        };
        if let Ok(meta) = std::fs::metadata(path) {
            let id = (meta.dev(), meta.ino());
            if let Some(lock) = find(&self.0, id) {
                return Ok(PendingLock::Shared(lock, id));
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(mode)
            .open(path)?;
        let meta = file.metadata()?;
        let id = (meta.dev(), meta.ino());
        if let Some(lock) = find(&self.0, id) {
            // The path was renamed onto a lock file this process has open, between the
            // look-up and the open. Closing the new descriptor would drop that file's locks,
            // so it stays open, unused.
            std::mem::forget(file);
            return Ok(PendingLock::Shared(lock, id));
        }
        Ok(PendingLock::New(
            LockFile::with_file(file, max_readers)?,
            Some(id),
        ))
    }

    /// A lock table private to this open (`NO_LOCK`, or a read-only environment whose lock
    /// file cannot be written).
    pub fn private(&mut self, max_readers: usize) -> Result<PendingLock> {
        Ok(PendingLock::New(LockFile::private(max_readers)?, None))
    }

    /// The environment open succeeded: its handle on the lock file.
    pub fn finish(&mut self, pending: PendingLock) -> Result<LockHandle> {
        let (lock, id) = match pending {
            PendingLock::Shared(lock, id) => {
                let entry = self
                    .0
                    .get_mut(&id)
                    .expect("a shared lock file is registered");
                entry.users += 1;
                (lock, Some(id))
            }
            PendingLock::New(lock, id) => {
                if lock.is_first_opener() {
                    return Err(Error::Panic("lock file still held exclusively"));
                }
                let lock = Arc::new(lock);
                if let Some(id) = id {
                    // Replaces an entry a forked child inherited from its parent.
                    self.0.insert(
                        id,
                        Entry {
                            lock: lock.clone(),
                            users: 1,
                            generation: fork::generation(),
                        },
                    );
                }
                (lock, id)
            }
        };
        Ok(LockHandle {
            lock: ManuallyDrop::new(lock),
            id,
        })
    }
}
