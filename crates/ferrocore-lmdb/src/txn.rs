//! `mdb_txn_*`: read txns (with reset/renew), the write txn, and nested write txns.
//!
//! Holds only exported functions: the txn handle, its states and its lifecycle are in
//! `handles`. May import: `handles`, `errors`, `types`.

use std::os::raw::{c_int, c_uint};

use ferrocore::env_flags;

use crate::handles::{
    begin_nested, begin_txn, end_txn, env_of, env_ref, guard, guard_void, MDB_env, MDB_txn,
};
use crate::types::codes::*;
use crate::types::*;

/// Begins a txn (`mdb_txn_begin`): read-only with `MDB_RDONLY`, a nested write txn when
/// `parent` is given, else the write txn (waiting for any other writer).
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_begin(
    env: *mut MDB_env,
    parent: *mut MDB_txn,
    flags: c_uint,
    txn: *mut *mut MDB_txn,
) -> c_int {
    guard(env, || {
        let out = txn.as_mut().ok_or(libc::EINVAL)?;
        let e = env_ref(env)?;
        let open = e.open_env()?;
        let flags = flags & MDB_RDONLY;
        if let Some(p) = parent.as_ref() {
            if p.is_read_only() {
                return Err(libc::EINVAL);
            }
            if flags != 0 || open.flags() & env_flags::WRITE_MAP != 0 {
                // As LMDB: no read-only child, and no nested txn with WRITEMAP.
                return Err(MDB_BAD_TXN);
            }
            *out = begin_nested(env, parent)?;
            return Ok(());
        }
        *out = begin_txn(env, flags & MDB_RDONLY != 0)?;
        Ok(())
    })
}

/// The txn's environment (`mdb_txn_env`).
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_env(txn: *mut MDB_txn) -> *mut MDB_env {
    txn.as_ref()
        .map_or(std::ptr::null_mut(), |t| t.env_handle())
}

/// The txn's id (`mdb_txn_id`): the snapshot's for a read txn.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_id(txn: *mut MDB_txn) -> usize {
    txn.as_ref().map_or(0, |t| t.id())
}

/// Commits the txn and its children, and frees it (`mdb_txn_commit`); on failure it is
/// aborted and freed all the same, as in LMDB.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_commit(txn: *mut MDB_txn) -> c_int {
    guard(env_of(txn), || {
        if txn.is_null() {
            return Err(libc::EINVAL);
        }
        end_txn(txn, true)
    })
}

/// Aborts the txn and its children, and frees it (`mdb_txn_abort`).
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_abort(txn: *mut MDB_txn) {
    guard_void(env_of(txn), || {
        if !txn.is_null() {
            let _ = end_txn(txn, false);
        }
    })
}

/// Releases a read txn's snapshot, keeping the handle for `mdb_txn_renew`
/// (`mdb_txn_reset`). Ignored for write txns, as in LMDB.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_reset(txn: *mut MDB_txn) {
    guard_void(env_of(txn), || {
        if let Some(t) = txn.as_mut() {
            t.reset();
        }
    })
}

/// Takes a new snapshot for a reset read txn (`mdb_txn_renew`); `EINVAL` otherwise.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_renew(txn: *mut MDB_txn) -> c_int {
    guard(env_of(txn), || txn.as_mut().ok_or(libc::EINVAL)?.renew())
}
