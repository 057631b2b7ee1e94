//! Process-shared, robust pthread mutexes inside the lock file, initialised and used exactly
//! as LMDB 0.9 does on Linux (`PTHREAD_PROCESS_SHARED` + `PTHREAD_MUTEX_ROBUST`, default
//! type), so that LMDB processes and ferrocore processes exclude each other through the same
//! bytes. Those bytes are glibc-private: they are only ever touched through glibc's calls.

use std::io;

// glibc exports these (libc.so.6 since 2.34, libpthread before); the `libc` crate does not
// declare them for linux-gnu.
extern "C" {
    fn pthread_mutexattr_setpshared(
        attr: *mut libc::pthread_mutexattr_t,
        pshared: libc::c_int,
    ) -> libc::c_int;
    fn pthread_mutexattr_setrobust(
        attr: *mut libc::pthread_mutexattr_t,
        robust: libc::c_int,
    ) -> libc::c_int;
    fn pthread_mutex_consistent(mutex: *mut libc::pthread_mutex_t) -> libc::c_int;
}

const PTHREAD_PROCESS_SHARED: libc::c_int = 1;
const PTHREAD_MUTEX_ROBUST: libc::c_int = 1;

/// Bytes of a `pthread_mutex_t` (LMDB's `mti_rmutex` and `mti_wmutex` fields).
pub const MUTEX_SIZE: usize = std::mem::size_of::<libc::pthread_mutex_t>();
const _: () = assert!(MUTEX_SIZE == 40, "LMDB 0.9's x86-64 glibc lock layout");

/// How a [`SharedMutex::lock`] succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locked {
    /// The previous owner unlocked it.
    Clean,
    /// The previous owner died holding it (`EOWNERDEAD`): the caller owns it now, must
    /// repair what the owner guarded, then call [`SharedMutex::mark_consistent`] — or
    /// unlock without doing so, which leaves it unusable for every process.
    OwnerDied,
}

/// A pthread mutex at a fixed place in a shared mapping.
#[derive(Clone, Copy)]
pub struct SharedMutex(*mut libc::pthread_mutex_t);

// SAFETY: a process-shared pthread mutex is made to be used from any thread; the pointer
// is only ever passed to glibc's mutex calls.
unsafe impl Send for SharedMutex {}
// SAFETY: as above.
unsafe impl Sync for SharedMutex {}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

impl SharedMutex {
    /// The mutex at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` is 8-aligned, points at [`MUTEX_SIZE`] bytes of a shared mapping that outlives
    /// every use of the returned value, and those bytes are used by every process only as a
    /// pthread mutex (or are about to be initialised by [`SharedMutex::init`]).
    pub unsafe fn at(ptr: *mut u8) -> SharedMutex {
        debug_assert!((ptr as usize).is_multiple_of(8));
        SharedMutex(ptr.cast())
    }

    /// Initialises the mutex as LMDB does: zeroed, then process-shared and robust.
    /// Only the lone first opener of a lock file calls this (nobody else can hold it).
    pub fn init(&self) -> io::Result<()> {
        // SAFETY: `at`'s contract: MUTEX_SIZE writable bytes that nobody else uses now.
        unsafe { std::ptr::write_bytes(self.0.cast::<u8>(), 0, MUTEX_SIZE) };
        let mut attr = std::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
        // SAFETY: pthread_mutexattr_init initialises the attribute object it is given.
        check(unsafe { libc::pthread_mutexattr_init(attr.as_mut_ptr()) })?;
        // SAFETY: `attr` was initialised above; the mutex bytes are ours to initialise;
        // the attribute is destroyed exactly once, after its last use.
        unsafe {
            let mut rc = pthread_mutexattr_setpshared(attr.as_mut_ptr(), PTHREAD_PROCESS_SHARED);
            if rc == 0 {
                rc = pthread_mutexattr_setrobust(attr.as_mut_ptr(), PTHREAD_MUTEX_ROBUST);
            }
            if rc == 0 {
                rc = libc::pthread_mutex_init(self.0, attr.as_ptr());
            }
            libc::pthread_mutexattr_destroy(attr.as_mut_ptr());
            check(rc)
        }
    }

    /// Locks the mutex, waiting for its owner (in any process) to unlock it or die.
    pub fn lock(&self) -> io::Result<Locked> {
        // SAFETY: `at`'s contract: an initialised pthread mutex in a live mapping.
        match unsafe { libc::pthread_mutex_lock(self.0) } {
            0 => Ok(Locked::Clean),
            libc::EOWNERDEAD => Ok(Locked::OwnerDied),
            rc => Err(io::Error::from_raw_os_error(rc)),
        }
    }

    /// After [`Locked::OwnerDied`] and the repair: the mutex is usable again.
    pub fn mark_consistent(&self) -> io::Result<()> {
        // SAFETY: as in `lock`; the caller holds the mutex.
        check(unsafe { pthread_mutex_consistent(self.0) })
    }

    /// Unlocks the mutex, which this thread holds.
    pub fn unlock(&self) {
        // SAFETY: as in `lock`; the caller holds the mutex. Unlocking a mutex this thread
        // holds cannot fail.
        let rc = unsafe { libc::pthread_mutex_unlock(self.0) };
        debug_assert_eq!(rc, 0, "pthread_mutex_unlock");
    }
}
