//! LMDB's C API and ABI on ferrocore: built as `liblmdb.so` (soname `liblmdb.so.0`) and
//! `liblmdb.a`, with `include/lmdb.h`, so a program built against LMDB runs on ferrocore
//! unchanged.
//!
//! Module map: `types` (the C structs and constants), `env`, `txn`, `dbi` (databases and
//! the plain get/put/del), `cursor`, `errors` (`mdb_strerror`, `mdb_version`).
//!
//! Every exported function runs its body under [`guard`]: a Rust error becomes its LMDB
//! code, and a panic never crosses into C — it becomes `MDB_PANIC` and marks the
//! environment failed.
//!
//! Handles follow LMDB's lifetimes: `mdb_env_close` frees the environment,
//! `mdb_txn_commit`/`mdb_txn_abort` end a txn (and the cursors of a write txn),
//! `mdb_cursor_close` ends a cursor. Ended txn and cursor handles are not freed but kept
//! for reuse (`pool`), so using one after it ended gives `MDB_BAD_TXN` or `EINVAL` where
//! LMDB would read freed memory (until the handle is reused by a new txn or cursor).

// Raw pointers from C are dereferenced throughout; each `unsafe` block says why it is sound.
#![allow(clippy::missing_safety_doc)]
// The C names of LMDB's types (MDB_env, MDB_val, ...) are kept.
#![allow(non_camel_case_types)]

pub mod cursor;
pub mod dbi;
pub mod env;
pub mod errors;
mod pool;
pub mod txn;
pub mod types;

pub use cursor::MDB_cursor;
pub use env::MDB_env;
pub use txn::MDB_txn;
pub use types::*;

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The result of an exported function's body: `Err` carries the LMDB code.
pub(crate) type Rc<T = ()> = Result<T, c_int>;

/// Converts ferrocore results to LMDB codes.
pub(crate) trait ToRc<T> {
    /// The value, or the error's LMDB code.
    fn rc(self) -> Rc<T>;
}

impl<T> ToRc<T> for ferrocore::Result<T> {
    fn rc(self) -> Rc<T> {
        self.map_err(|e| e.lmdb_code())
    }
}

/// Runs an exported function's body: its code, or `MDB_PANIC` if it panicked (and then
/// the environment `env`, if known, is marked failed).
pub(crate) fn guard(env: *const MDB_env, body: impl FnOnce() -> Rc) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => codes::MDB_SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => {
            // SAFETY: `env` is null or the live environment the call was made on.
            if let Some(env) = unsafe { env.as_ref() } {
                env.mark_failed();
            }
            codes::MDB_PANIC
        }
    }
}

/// Runs the body of an exported function that returns nothing to C: a panic is swallowed
/// (and marks the environment failed).
pub(crate) fn guard_void(env: *const MDB_env, body: impl FnOnce()) {
    let _ = guard(env, || {
        body();
        Ok(())
    });
}

/// Reads an `MDB_val` as a byte slice. `None` for a null pointer.
///
/// # Safety
/// `val` is null or points to an `MDB_val` whose `mv_data` points to `mv_size` readable
/// bytes that outlive `'a` (the C caller's contract).
pub(crate) unsafe fn val_slice<'a>(val: *const MDB_val) -> Option<&'a [u8]> {
    let val = val.as_ref()?;
    if val.mv_size == 0 {
        return Some(&[]);
    }
    if val.mv_data.is_null() {
        return None;
    }
    Some(std::slice::from_raw_parts(
        val.mv_data as *const u8,
        val.mv_size,
    ))
}

/// Points the `MDB_val` at `bytes` (if `val` is not null).
///
/// # Safety
/// `val` is null or points to a writable `MDB_val`.
pub(crate) unsafe fn set_val(val: *mut MDB_val, bytes: &[u8]) {
    if let Some(val) = val.as_mut() {
        val.mv_size = bytes.len();
        val.mv_data = bytes.as_ptr() as *mut _;
    }
}
