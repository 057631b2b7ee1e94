//! `mdb_txn_*`: read txns (with reset/renew), the write txn, and nested write txns.
//!
//! Holds only exported functions: the txn handle, its states and its lifecycle are in
//! `handles`. May import: `handles`, `types`.
//!
//! Every function's `# Safety` is LMDB's contract for it: `txn` is null or a live txn handle
//! (ended handles are tolerated: they answer `MDB_BAD_TXN` or are ignored), used by one
//! thread at a time.

use std::os::raw::{c_int, c_uint};

use ferrocore::env_flags;

use crate::handles::{
    begin_nested, begin_txn, end_txn, env_of, env_ref, guard, guard_inlined, guard_void, CallEnv,
    MDB_env, MDB_txn,
};
use crate::types::codes::*;
use crate::types::*;

/// Begins a txn (`mdb_txn_begin`): read-only with `MDB_RDONLY`, a nested write txn when
/// `parent` is given, else the write txn (waiting for any other writer).
///
/// # Safety
/// `env` is null or a live handle; `parent` null or a live txn handle of `env`, not in use
/// by another call; `txn` null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_begin(
    env: *mut MDB_env,
    parent: *mut MDB_txn,
    flags: c_uint,
    txn: *mut *mut MDB_txn,
) -> c_int {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard(call_env, || {
        // SAFETY: the caller's contract: `txn` is null or writable.
        let out = unsafe { txn.as_mut() }.ok_or(libc::EINVAL)?;
        // SAFETY: the caller's contract.
        let e = unsafe { env_ref(env) }?;
        let open = e.open_env()?;
        let flags = flags & MDB_RDONLY;
        // SAFETY: the caller's contract: `parent` is null or live; the borrow ends here.
        if let Some(p) = unsafe { parent.as_ref() } {
            if p.is_read_only() {
                return Err(libc::EINVAL);
            }
            if flags != 0 || open.flags() & env_flags::WRITE_MAP != 0 {
                // As LMDB: no read-only child, and no nested txn with WRITEMAP.
                return Err(MDB_BAD_TXN);
            }
            // SAFETY: `env` is live and open (checked above); `parent` a live write or
            // nested txn (not read-only, checked above) of it, not in use (the contract).
            *out = unsafe { begin_nested(env, parent) }?;
            return Ok(());
        }
        // SAFETY: `env` is live and open (checked above).
        *out = unsafe { begin_txn(env, flags & MDB_RDONLY != 0) }?;
        Ok(())
    })
}

/// The txn's environment (`mdb_txn_env`).
///
/// # Safety
/// `txn` is null or a txn handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_env(txn: *mut MDB_txn) -> *mut MDB_env {
    // SAFETY: the caller's contract (handles are never freed).
    unsafe { txn.as_ref() }.map_or(std::ptr::null_mut(), super::handles::MDB_txn::env_handle)
}

/// The txn's id (`mdb_txn_id`): the snapshot's for a read txn.
///
/// # Safety
/// `txn` is null or a txn handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_id(txn: *mut MDB_txn) -> usize {
    // SAFETY: the caller's contract (handles are never freed).
    unsafe { txn.as_ref() }.map_or(0, super::handles::MDB_txn::id)
}

/// Commits the txn and its children, and frees it (`mdb_txn_commit`); on failure it is
/// aborted and freed all the same, as in LMDB.
///
/// # Safety
/// `txn` is null or a txn handle, not in use by another call.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_commit(txn: *mut MDB_txn) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard(call_env, || {
        if txn.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's contract; not null (checked above).
        unsafe { end_txn(txn, true) }
    })
}

/// Aborts the txn and its children, and frees it (`mdb_txn_abort`).
///
/// # Safety
/// `txn` is null or a txn handle, not in use by another call.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_abort(txn: *mut MDB_txn) {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard_void(call_env, || {
        if !txn.is_null() {
            // SAFETY: the caller's contract; not null (checked above).
            let _ = unsafe { end_txn(txn, false) };
        }
    });
}

/// Releases a read txn's snapshot, keeping the handle for `mdb_txn_renew`
/// (`mdb_txn_reset`). Ignored for write txns, as in LMDB.
///
/// # Safety
/// `txn` is null or a txn handle, not in use by another call.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_reset(txn: *mut MDB_txn) {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    let _ = guard_inlined(call_env, || {
        // SAFETY: the caller's contract.
        if let Some(t) = unsafe { txn.as_mut() } {
            t.reset();
        }
        Ok(())
    });
}

/// Takes a new snapshot for a reset read txn (`mdb_txn_renew`); `EINVAL` otherwise.
///
/// # Safety
/// `txn` is null or a txn handle, not in use by another call.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_renew(txn: *mut MDB_txn) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard_inlined(call_env, || {
        // SAFETY: the caller's contract.
        let t = unsafe { txn.as_mut() }.ok_or(libc::EINVAL)?;
        t.renew()
    })
}
