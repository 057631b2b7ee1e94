//! `mdb_env_*`: creating, opening, configuring, copying and closing an environment, and
//! the reader table functions.
//!
//! Holds only exported functions (and `copy`, which two of them share); the `MDB_env`
//! handle is in `handles`. May import: `handles`, `errors`, `types`.
//!
//! Every function's `# Safety` is LMDB's contract for it: `env` is null or a live handle
//! from `mdb_env_create`, and each out-parameter is null or writable.

use std::ffi::{CStr, CString};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::FromRawFd;
use std::path::Path;

use ferrocore::{env_flags, Env, EnvOptions};

use crate::errors::ToRc;
use crate::handles::{env_mut, env_ref, guard, guard_void, CallEnv, MDB_assert_func, MDB_env};
use crate::types::*;

/// Creates an environment handle (`mdb_env_create`).
///
/// # Safety
/// `env` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_create(env: *mut *mut MDB_env) -> c_int {
    guard(CallEnv::NONE, || {
        if env.is_null() {
            return Err(libc::EINVAL);
        }
        let handle = Box::new(MDB_env::new());
        // SAFETY: `env` is writable (the caller's contract) and not null (checked above).
        unsafe { *env = Box::into_raw(handle) };
        Ok(())
    })
}

/// Opens the environment at `path` (`mdb_env_open`); new files get `mode` (less umask).
///
/// # Safety
/// `env` is null or a live handle, used by no other thread during the call; `path` is null
/// or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_open(
    env: *mut MDB_env,
    path: *const c_char,
    flags: c_uint,
    mode: libc::mode_t,
) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?;
        if e.env.is_some() || path.is_null() || flags & !env_flags::ALL != 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: `path` is a NUL-terminated string (the caller's contract), not null.
        let cpath = unsafe { CStr::from_ptr(path) };
        let fs_path = Path::new(std::ffi::OsStr::from_bytes(cpath.to_bytes()));
        let mut opts = EnvOptions::new();
        opts.flags(flags | e.flags)
            .max_readers(e.max_readers)
            .max_dbs(e.max_dbs)
            .file_mode(mode)
            .grow_map(false)
            // As LMDB's without MDB_NOTLS: a read txn's end keeps its reader slot for the
            // thread's next one.
            .keep_reader_slots((flags | e.flags) & env_flags::NO_TLS == 0);
        if let Some(size) = e.map_size {
            opts.map_size(size);
        }
        // SAFETY: LMDB's contract, which the C program accepted by calling mdb_env_open: no
        // one but LMDB-compatible code modifies the environment's files while it is open.
        let opened = unsafe { opts.open(fs_path) }.rc()?;
        // SAFETY: not open yet (checked above), so no txn of it exists, and the caller
        // makes no other call on it meanwhile (the contract above).
        let e = unsafe { env_mut(env) }?;
        e.env = Some(opened);
        e.path = Some(cpath.to_owned());
        Ok(())
    })
}

/// Closes the environment and frees the handle (`mdb_env_close`). Txns still alive keep
/// it alive: the handle is then leaked instead of freed.
///
/// # Safety
/// `env` is null or a live handle, which the caller gives up: no other call on it runs or
/// follows, and its cursors are closed (LMDB's contract).
#[no_mangle]
pub unsafe extern "C" fn mdb_env_close(env: *mut MDB_env) {
    guard_void(CallEnv::NONE, || {
        // SAFETY: the caller's contract.
        let Ok(e) = (unsafe { env_ref(env) }) else {
            return;
        };
        if e.has_live_txns() {
            return; // leaked: the txns still point into it
        }
        // SAFETY: `env` came from `Box::into_raw` in mdb_env_create; the caller gives it
        // up, no txn of it is alive (checked above) and `e` is not used from here on.
        drop(unsafe { Box::from_raw(env) });
    });
}

/// Statistics of the main DB (`mdb_env_stat`).
///
/// # Safety
/// `env` is null or a live handle; `stat` null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_stat(env: *mut MDB_env, stat: *mut MDB_stat) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let s = unsafe { env_ref(env) }?.open_env()?.stat().rc()?;
        // SAFETY: the caller's contract: `stat` is null or writable.
        let out = unsafe { stat.as_mut() }.ok_or(libc::EINVAL)?;
        *out = MDB_stat::from(&s);
        Ok(())
    })
}

/// Map size, last page, last txn, readers (`mdb_env_info`).
///
/// # Safety
/// `env` is null or a live handle; `info` null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_info(env: *mut MDB_env, info: *mut MDB_envinfo) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract: `info` is null or writable.
        let out = unsafe { info.as_mut() }.ok_or(libc::EINVAL)?;
        // SAFETY: the caller's contract.
        let i = unsafe { env_ref(env) }?.open_env()?.info().rc()?;
        *out = MDB_envinfo {
            me_mapaddr: std::ptr::null_mut(),
            me_mapsize: i.map_size as usize,
            me_last_pgno: i.last_pgno as usize,
            me_last_txnid: i.last_txnid as usize,
            me_maxreaders: i.max_readers,
            me_numreaders: i.num_readers,
        };
        Ok(())
    })
}

/// Flushes the data file (`mdb_env_sync`); without `force`, only when the environment
/// syncs at commit anyway (no `MDB_NOSYNC`), as in LMDB.
///
/// # Safety
/// `env` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_sync(env: *mut MDB_env, force: c_int) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?.open_env()?;
        if force == 0 && e.flags() & env_flags::NO_SYNC != 0 {
            return Ok(());
        }
        e.sync().rc()
    })
}

/// Sets or clears flags (`mdb_env_set_flags`): only the changeable ones.
///
/// # Safety
/// `env` is null or a live handle; before `mdb_env_open`, no other thread uses it
/// meanwhile.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_flags(
    env: *mut MDB_env,
    flags: c_uint,
    onoff: c_int,
) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?;
        if flags & !env_flags::CHANGEABLE != 0 {
            return Err(libc::EINVAL);
        }
        if let Some(open) = &e.env {
            return open.set_flags(flags, onoff != 0).rc();
        }
        // SAFETY: not open (checked above), so no txn of it exists; the caller's contract:
        // no other thread uses it meanwhile.
        let e = unsafe { env_mut(env) }?;
        if onoff != 0 {
            e.flags |= flags;
        } else {
            e.flags &= !flags;
        }
        Ok(())
    })
}

/// The environment's flags (`mdb_env_get_flags`).
///
/// # Safety
/// `env` is null or a live handle; `flags` null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_flags(env: *mut MDB_env, flags: *mut c_uint) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?;
        // SAFETY: the caller's contract: `flags` is null or writable.
        let out = unsafe { flags.as_mut() }.ok_or(libc::EINVAL)?;
        *out = match &e.env {
            Some(open) => open.flags(),
            None => e.flags,
        };
        Ok(())
    })
}

/// The path given to `mdb_env_open` (`mdb_env_get_path`); NULL before it.
///
/// # Safety
/// `env` is null or a live handle; `path` null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_path(env: *mut MDB_env, path: *mut *const c_char) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?;
        // SAFETY: the caller's contract: `path` is null or writable.
        let out = unsafe { path.as_mut() }.ok_or(libc::EINVAL)?;
        *out = e.path.as_ref().map_or(std::ptr::null(), |p| p.as_ptr());
        Ok(())
    })
}

/// The data file's descriptor (`mdb_env_get_fd`); -1 before open.
///
/// # Safety
/// `env` is null or a live handle; `fd` null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_fd(env: *mut MDB_env, fd: *mut c_int) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?;
        // SAFETY: the caller's contract: `fd` is null or writable.
        let out = unsafe { fd.as_mut() }.ok_or(libc::EINVAL)?;
        *out = e.env.as_ref().map_or(-1, ferrocore::Env::data_fd);
        Ok(())
    })
}

/// Sets the map size (`mdb_env_set_mapsize`): before open, or on an open environment with
/// no txn alive in this process.
///
/// # Safety
/// `env` is null or a live handle; before `mdb_env_open`, no other thread uses it
/// meanwhile.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_mapsize(env: *mut MDB_env, size: usize) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?;
        if let Some(open) = &e.env {
            if e.has_live_txns() {
                return Err(libc::EINVAL);
            }
            return open.set_map_size(size as u64).rc();
        }
        // SAFETY: not open (checked above), so no txn of it exists; the caller's contract:
        // no other thread uses it meanwhile.
        unsafe { env_mut(env) }?.map_size = Some(size as u64);
        Ok(())
    })
}

/// Sets the number of reader slots (`mdb_env_set_maxreaders`), before open.
///
/// # Safety
/// `env` is null or a live handle; before `mdb_env_open`, no other thread uses it
/// meanwhile.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_maxreaders(env: *mut MDB_env, readers: c_uint) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?;
        if e.env.is_some() || readers < 1 {
            return Err(libc::EINVAL);
        }
        // SAFETY: not open (checked above), so no txn of it exists; the caller's contract:
        // no other thread uses it meanwhile.
        unsafe { env_mut(env) }?.max_readers = readers;
        Ok(())
    })
}

/// The number of reader slots (`mdb_env_get_maxreaders`).
///
/// # Safety
/// `env` is null or a live handle; `readers` null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_maxreaders(env: *mut MDB_env, readers: *mut c_uint) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?;
        // SAFETY: the caller's contract: `readers` is null or writable.
        let out = unsafe { readers.as_mut() }.ok_or(libc::EINVAL)?;
        *out = match &e.env {
            Some(open) => open.info().rc()?.max_readers,
            None => e.max_readers,
        };
        Ok(())
    })
}

/// Sets the number of named DBs (`mdb_env_set_maxdbs`), before open.
///
/// # Safety
/// `env` is null or a live handle; before `mdb_env_open`, no other thread uses it
/// meanwhile.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_maxdbs(env: *mut MDB_env, dbs: MDB_dbi) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?;
        if e.env.is_some() {
            return Err(libc::EINVAL);
        }
        // SAFETY: not open (checked above), so no txn of it exists; the caller's contract:
        // no other thread uses it meanwhile.
        unsafe { env_mut(env) }?.max_dbs = dbs;
        Ok(())
    })
}

/// The longest key (`mdb_env_get_maxkeysize`): 511, as in LMDB.
///
/// # Safety
/// `env` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_maxkeysize(env: *mut MDB_env) -> c_int {
    let mut size = ferrocore::LMDB_MAX_KEY_SIZE as c_int;
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard_void(call_env, || {
        // SAFETY: the caller's contract.
        if let Some(open) = unsafe { env.as_ref() }.and_then(|e| e.env.as_ref()) {
            size = open.max_key_size() as c_int;
        }
    });
    size
}

/// Stores an application pointer (`mdb_env_set_userctx`).
///
/// # Safety
/// `env` is null or a live handle; no other thread calls `mdb_env_set_userctx` or
/// `mdb_env_get_userctx` on it meanwhile (LMDB stores the pointer unguarded too).
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_userctx(env: *mut MDB_env, ctx: *mut c_void) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        if env.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: live (the caller's contract) and not null (checked above). Only this
        // field is written, through the raw pointer: txns borrowing the open environment
        // are not disturbed, and no other thread reads the field meanwhile (the contract).
        unsafe { (*env).userctx = ctx };
        Ok(())
    })
}

/// The application pointer (`mdb_env_get_userctx`); NULL if `env` is.
///
/// # Safety
/// `env` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_userctx(env: *mut MDB_env) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { env.as_ref() }.map_or(std::ptr::null_mut(), |e| e.userctx)
}

/// Stores the assertion callback (`mdb_env_set_assert`). ferrocore reports failed
/// invariants as error codes, so it is never called.
///
/// # Safety
/// `env` is null or a live handle; no other thread calls `mdb_env_set_assert` on it
/// meanwhile.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_assert(
    env: *mut MDB_env,
    func: Option<MDB_assert_func>,
) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        if env.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: live (the caller's contract) and not null (checked above). Only this
        // field is written, through the raw pointer (as in `mdb_env_set_userctx`); it is
        // never read.
        unsafe { (*env).assert_func = func };
        Ok(())
    })
}

/// Copies the environment to the directory `path` (`mdb_env_copy`).
///
/// # Safety
/// As for [`mdb_env_copy2`].
#[no_mangle]
pub unsafe extern "C" fn mdb_env_copy(env: *mut MDB_env, path: *const c_char) -> c_int {
    // SAFETY: the caller's contract, which is mdb_env_copy2's.
    unsafe { mdb_env_copy2(env, path, 0) }
}

/// Copies the environment to `path` (a directory, or the file itself under
/// `MDB_NOSUBDIR`), which must not exist yet (`mdb_env_copy2`). With `MDB_CP_COMPACT` the
/// copy holds only the pages in use, renumbered, and no free pages.
///
/// # Safety
/// `env` is null or a live handle; `path` null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_copy2(
    env: *mut MDB_env,
    path: *const c_char,
    flags: c_uint,
) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?.open_env()?;
        if path.is_null() || flags & !MDB_CP_COMPACT != 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: `path` is a NUL-terminated string (the caller's contract), not null.
        let cpath = unsafe { CStr::from_ptr(path) };
        let dir = Path::new(std::ffi::OsStr::from_bytes(cpath.to_bytes()));
        let target = if e.flags() & env_flags::NO_SUB_DIR != 0 {
            dir.to_path_buf()
        } else {
            dir.join("data.mdb")
        };
        let io = |r: std::io::Result<()>| r.map_err(|err| err.raw_os_error().unwrap_or(libc::EIO));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&target)
            .map_err(|err| err.raw_os_error().unwrap_or(libc::EIO))?;
        copy(e, &mut file, flags).rc()?;
        io(file.flush())?;
        io(file.sync_all())
    })
}

/// Copies the environment to an open file descriptor (`mdb_env_copyfd`).
///
/// # Safety
/// As for [`mdb_env_copyfd2`].
#[no_mangle]
pub unsafe extern "C" fn mdb_env_copyfd(env: *mut MDB_env, fd: c_int) -> c_int {
    // SAFETY: the caller's contract, which is mdb_env_copyfd2's.
    unsafe { mdb_env_copyfd2(env, fd, 0) }
}

/// Copies the environment to an open file descriptor (`mdb_env_copyfd2`); the descriptor
/// stays open. `MDB_CP_COMPACT` as for `mdb_env_copy2`.
///
/// # Safety
/// `env` is null or a live handle; `fd`, if not negative, an open descriptor the caller
/// lends for the call.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_copyfd2(env: *mut MDB_env, fd: c_int, flags: c_uint) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?.open_env()?;
        if fd < 0 || flags & !MDB_CP_COMPACT != 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller lends an open descriptor; ManuallyDrop keeps it open.
        let mut file = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
        copy(e, &mut *file, flags).rc()?;
        file.flush()
            .map_err(|err| err.raw_os_error().unwrap_or(libc::EIO))
    })
}

/// The copy `mdb_env_copy2` and `mdb_env_copyfd2` write: compacted with `MDB_CP_COMPACT`.
fn copy(e: &Env, out: &mut dyn std::io::Write, flags: c_uint) -> ferrocore::Result<()> {
    if flags & MDB_CP_COMPACT != 0 {
        e.copy_compact_to(out)
    } else {
        e.copy_to(out)
    }
}

/// Lists the reader table through `func`, in LMDB's format (`mdb_reader_list`).
///
/// # Safety
/// `env` is null or a live handle; `func`, if given, a callback that accepts a
/// NUL-terminated line and `ctx`.
#[no_mangle]
pub unsafe extern "C" fn mdb_reader_list(
    env: *mut MDB_env,
    func: Option<MDB_msg_func>,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live for the call.
    let call_env = unsafe { CallEnv::new(env) };
    // Inside `guard`, so that nothing panics into C; the callback's own answer, when not 0,
    // is what LMDB returns (`guard` passes an `Err` code through unchanged).
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let (Some(e), Some(func)) = (unsafe { env.as_ref() }, func) else {
            return Err(-1);
        };
        let Some(open) = e.env.as_ref() else {
            return Err(-1);
        };
        // As LMDB: a negative answer of the callback stops the listing and is returned;
        // otherwise the last answer is.
        let say = |line: String| -> Result<c_int, c_int> {
            let line = CString::new(line).expect("no NUL in reader lines");
            // SAFETY: `func` is the caller's callback (the contract); the line lives for
            // the call.
            match unsafe { func(line.as_ptr(), ctx) } {
                rc if rc < 0 => Err(rc),
                rc => Ok(rc),
            }
        };
        let mut first = true;
        let mut rc = 0;
        for (pid, tid, txnid) in open.readers() {
            if first {
                first = false;
                say("    pid     thread     txnid\n".to_string())?;
            }
            rc = say(match txnid {
                Some(t) => format!("{pid:10} {tid:x} {t}\n"),
                None => format!("{pid:10} {tid:x} -\n"),
            })?;
        }
        if first {
            rc = say("(no active readers)\n".to_string())?;
        }
        if rc == 0 {
            Ok(())
        } else {
            Err(rc)
        }
    })
}

/// Clears reader slots of dead processes (`mdb_reader_check`); `dead` gets how many.
///
/// # Safety
/// `env` is null or a live handle; `dead` null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_reader_check(env: *mut MDB_env, dead: *mut c_int) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let n = unsafe { env_ref(env) }?.open_env()?.reader_check().rc()?;
        // SAFETY: the caller's contract: `dead` is null or writable.
        if let Some(out) = unsafe { dead.as_mut() } {
            *out = n as c_int;
        }
        Ok(())
    })
}
