//! Databases (`mdb_dbi_*`, `mdb_drop`, comparators, `mdb_stat`) and the plain
//! `mdb_get`/`mdb_put`/`mdb_del`.
//!
//! Holds only exported functions (and private helpers that only they use). May import:
//! `handles`, `errors`, `types`.
//!
//! Every function's `# Safety` is LMDB's contract for it: `txn` is null or a live txn
//! handle, used by one thread at a time; each `MDB_val` given is null or valid, its
//! `mv_data` pointing to `mv_size` readable bytes (writable `MDB_val`s for outputs).

use std::cmp::Ordering;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_void};

use ferrocore::{db_flags, put_flags, Database, Error};

use crate::errors::{dbi_rc, put_rc, Rc, ToRc};
use crate::handles::{
    access, access_naming_db, env_of, env_ref, guard, guard_inlined, guard_void, is_finished,
    settle_cursors, write_access_to_db, Access, CallEnv, MDB_env, MDB_txn,
};
use crate::types::codes::*;
use crate::types::*;

/// Opens (or with `MDB_CREATE` creates) a database (`mdb_dbi_open`); NULL `name` is the
/// main DB.
///
/// # Safety
/// `txn` is null or a live txn handle; `name` null or a NUL-terminated string; `dbi` null
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_dbi_open(
    txn: *mut MDB_txn,
    name: *const c_char,
    flags: c_uint,
    dbi: *mut MDB_dbi,
) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard(call_env, || {
        // SAFETY: the caller's contract: `dbi` is null or writable.
        let out = unsafe { dbi.as_mut() }.ok_or(libc::EINVAL)?;
        let name = if name.is_null() {
            None
        } else {
            // SAFETY: the caller's contract: a NUL-terminated string (not null here).
            let name = unsafe { CStr::from_ptr(name) };
            // ferrocore names are UTF-8; other names are refused rather than mangled.
            Some(name.to_str().map_err(|_| libc::EINVAL)?)
        };
        // SAFETY: the caller's contract.
        let db = match unsafe { access(txn) }? {
            Access::Write(w) => w.open_db(name, flags).rc()?,
            Access::Read(r) => match r.open_db(name) {
                Err(Error::NotFound) if flags & db_flags::CREATE != 0 => {
                    // As LMDB: a main DB that holds no named DB says so before the txn is
                    // found read-only.
                    let main = r.db_flags(Database::MAIN).rc()?;
                    return Err(if main & db_flags::NO_NAMED_DBS != 0 {
                        MDB_INCOMPATIBLE
                    } else {
                        libc::EACCES
                    });
                }
                other => other.rc()?,
            },
        };
        *out = db.dbi();
        Ok(())
    })
}

/// Statistics of a database (`mdb_stat`).
///
/// # Safety
/// `txn` is null or a live txn handle; `stat` null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_stat(txn: *mut MDB_txn, dbi: MDB_dbi, stat: *mut MDB_stat) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard(call_env, || {
        let db = Database::from_dbi(dbi);
        // SAFETY: the caller's contract.
        let s = match unsafe { access_naming_db(txn) }? {
            Access::Write(w) => dbi_rc(w.db_stat(db))?,
            Access::Read(r) => dbi_rc(r.db_stat(db))?,
        };
        // SAFETY: the caller's contract: `stat` is null or writable.
        let out = unsafe { stat.as_mut() }.ok_or(libc::EINVAL)?;
        *out = MDB_stat::from(&s);
        Ok(())
    })
}

/// A database's flags (`mdb_dbi_flags`).
///
/// # Safety
/// `txn` is null or a live txn handle; `flags` null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_dbi_flags(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    flags: *mut c_uint,
) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard(call_env, || {
        // SAFETY: the caller's contract: `flags` is null or writable.
        let out = unsafe { flags.as_mut() }.ok_or(libc::EINVAL)?;
        if dbi == FREE_DBI {
            return Err(libc::EINVAL); // not a user DB (LMDB's DB_USRVALID)
        }
        let db = Database::from_dbi(dbi);
        // SAFETY: the caller's contract.
        *out = match unsafe { access_naming_db(txn) }? {
            Access::Write(w) => dbi_rc(w.db_flags(db))?,
            Access::Read(r) => dbi_rc(r.db_flags(db))?,
        } as c_uint;
        Ok(())
    })
}

/// Closes a database handle (`mdb_dbi_close`).
///
/// # Safety
/// `env` is null or a live environment handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_dbi_close(env: *mut MDB_env, dbi: MDB_dbi) {
    // SAFETY: the caller's contract: `env` is null or live.
    let call_env = unsafe { CallEnv::new(env) };
    guard_void(call_env, || {
        // SAFETY: the caller's contract.
        if let Ok(open) = unsafe { env_ref(env) }.and_then(|e| e.open_env()) {
            let _ = open.close_db(Database::from_dbi(dbi));
        }
    });
}

/// Empties a database, or with `del` = 1 deletes it and closes its handle (`mdb_drop`).
///
/// # Safety
/// `txn` is null or a live txn handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_drop(txn: *mut MDB_txn, dbi: MDB_dbi, del: c_int) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard(call_env, || {
        if !(0..=1).contains(&del) {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's contract.
        let w = unsafe { write_access_to_db(txn, Database::from_dbi(dbi)) }?;
        let rc = dbi_rc(w.drop_db(Database::from_dbi(dbi), del == 1));
        // SAFETY: the caller's contract; `w` is not used from here on.
        unsafe { settle_cursors(txn, Database::from_dbi(dbi), std::ptr::null_mut()) };
        rc
    })
}

/// Calls the C comparator whose address is `ctx` on two byte strings.
fn call_c_comparator(ctx: usize, a: &[u8], b: &[u8]) -> Ordering {
    // SAFETY: `ctx` was made from a non-null `MDB_cmp_func` in `set_order` below, and
    // function pointers and usize have the same size.
    let cmp: MDB_cmp_func = unsafe { std::mem::transmute::<usize, MDB_cmp_func>(ctx) };
    let va = MDB_val {
        mv_size: a.len(),
        mv_data: a.as_ptr() as *mut c_void,
    };
    let vb = MDB_val {
        mv_size: b.len(),
        mv_data: b.as_ptr() as *mut c_void,
    };
    // SAFETY: the comparator gets two valid MDB_vals for the duration of the call (and is
    // a comparator, the caller of mdb_set_compare/mdb_set_dupsort promised).
    unsafe { cmp(&va, &vb) }.cmp(&0)
}

/// Sets the key (`key`) or value comparator of a database.
///
/// # Safety
/// `txn` is null or a live txn handle; `cmp`, if given, a comparator callable from any
/// thread for as long as the environment is open (LMDB's contract).
unsafe fn set_order(txn: *mut MDB_txn, dbi: MDB_dbi, cmp: Option<MDB_cmp_func>, key: bool) -> Rc {
    // SAFETY: the caller's contract.
    let t = unsafe { txn.as_ref() }.ok_or(libc::EINVAL)?;
    // A reset or ended txn knows no DB (LMDB checks the DB handle, not the txn's state).
    // SAFETY: the caller's contract; `t` is only read, before and after.
    if unsafe { is_finished(txn) } {
        return Err(libc::EINVAL);
    }
    let cmp = cmp.ok_or(libc::EINVAL)?;
    let open = t.env().open_env()?;
    match open.set_order_with_context(
        Database::from_dbi(dbi),
        key,
        call_c_comparator,
        cmp as usize,
    ) {
        // LMDB stores a value comparator on any DB and uses it only with DUPSORT.
        Err(Error::Incompatible) if !key => Ok(()),
        other => dbi_rc(other),
    }
}

/// Sets a key comparator (`mdb_set_compare`).
///
/// # Safety
/// `txn` is null or a live txn handle; `cmp`, if given, a comparator (a total order on
/// byte strings) callable for as long as the environment is open.
#[no_mangle]
pub unsafe extern "C" fn mdb_set_compare(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    cmp: Option<MDB_cmp_func>,
) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    // SAFETY: the caller's contract, which is `set_order`'s.
    guard(call_env, || unsafe { set_order(txn, dbi, cmp, true) })
}

/// Sets a value comparator for a DUPSORT DB (`mdb_set_dupsort`).
///
/// # Safety
/// As for [`mdb_set_compare`].
#[no_mangle]
pub unsafe extern "C" fn mdb_set_dupsort(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    cmp: Option<MDB_cmp_func>,
) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    // SAFETY: the caller's contract, which is `set_order`'s.
    guard(call_env, || unsafe { set_order(txn, dbi, cmp, false) })
}

/// Checks that `dbi` is usable in `txn` (for the calls that only record something).
///
/// # Safety
/// `txn` is null or a live txn handle (as for [`access`]).
unsafe fn check_dbi(txn: *mut MDB_txn, dbi: MDB_dbi) -> Rc {
    let db = Database::from_dbi(dbi);
    // SAFETY: the caller's contract.
    match unsafe { access_naming_db(txn) }? {
        Access::Write(w) => dbi_rc(w.db_flags(db)).map(|_| ()),
        Access::Read(r) => dbi_rc(r.db_flags(db)).map(|_| ()),
    }
}

/// Accepts a relocation function (`mdb_set_relfunc`); like LMDB 0.9, ferrocore never calls it.
///
/// # Safety
/// `txn` is null or a live txn handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_set_relfunc(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    _rel: Option<MDB_rel_func>,
) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    // SAFETY: the caller's contract, which is `check_dbi`'s.
    guard(call_env, || unsafe { check_dbi(txn, dbi) })
}

/// Accepts a relocation context (`mdb_set_relctx`); never used, as in LMDB 0.9.
///
/// # Safety
/// `txn` is null or a live txn handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_set_relctx(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    _ctx: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    // SAFETY: the caller's contract, which is `check_dbi`'s.
    guard(call_env, || unsafe { check_dbi(txn, dbi) })
}

/// The value of a key (`mdb_get`); for a DUPSORT DB its first value.
///
/// # Safety
/// `txn` is null or a live txn handle; `key` null or a valid `MDB_val`; `data` null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_get(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    key: *mut MDB_val,
    data: *mut MDB_val,
) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard_inlined(call_env, || {
        // SAFETY: the caller's contract: `key` is null or valid.
        let k = unsafe { val_slice(key) }.ok_or(libc::EINVAL)?;
        if data.is_null() || dbi == FREE_DBI {
            // The free DB is read through a cursor only (LMDB's DB_USRVALID).
            return Err(libc::EINVAL);
        }
        let db = Database::from_dbi(dbi);
        // SAFETY: the caller's contract.
        let found = match unsafe { access_naming_db(txn) }? {
            Access::Write(w) => dbi_rc(w.get(db, k))?,
            Access::Read(r) => dbi_rc(r.get(db, k))?,
        };
        let v = found.ok_or(MDB_NOTFOUND)?;
        // SAFETY: the caller's contract: `data` is writable.
        unsafe { set_val(data, v) };
        Ok(())
    })
}

/// The free DB's handle (LMDB's `FREE_DBI`): statistics and a read txn's cursor may reach
/// it; the calls that work on a user's DB answer `EINVAL`.
pub(crate) const FREE_DBI: MDB_dbi = 0;

/// The flags `mdb_put` accepts.
const PUT_FLAGS: u32 = put_flags::NO_OVERWRITE
    | put_flags::NO_DUP_DATA
    | put_flags::RESERVE
    | put_flags::APPEND
    | put_flags::APPEND_DUP;

/// Stores a key/value pair (`mdb_put`). With `MDB_RESERVE`, `data->mv_data` gets the place
/// to write the value; with `MDB_NOOVERWRITE` on an existing key, the existing value.
///
/// # Safety
/// `txn` is null or a live txn handle; `key` null or a valid `MDB_val`; `data` null or a
/// valid, writable `MDB_val`.
#[no_mangle]
pub unsafe extern "C" fn mdb_put(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    key: *mut MDB_val,
    data: *mut MDB_val,
    flags: c_uint,
) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard(call_env, || {
        // SAFETY: the caller's contract: `key` is null or valid.
        let k = unsafe { val_slice(key) }.ok_or(libc::EINVAL)?;
        // SAFETY: the caller's contract: `data` is null or writable.
        let data_val = unsafe { data.as_mut() }.ok_or(libc::EINVAL)?;
        if flags & !PUT_FLAGS != 0 {
            return Err(libc::EINVAL);
        }
        let db = Database::from_dbi(dbi);
        // SAFETY: the caller's contract.
        let w = unsafe { write_access_to_db(txn, db) }?;
        let r = if flags & put_flags::RESERVE != 0 {
            match w.put_reserve(db, k, data_val.mv_size, flags & !put_flags::RESERVE) {
                Ok(slot) => {
                    data_val.mv_data = slot.as_mut_ptr().cast::<c_void>();
                    Ok(())
                }
                Err(e) => Err(e),
            }
        } else {
            // SAFETY: the caller's contract: `data` is valid (`data_val` is not used
            // again).
            let v = unsafe { val_slice(data) }.ok_or(libc::EINVAL)?;
            w.put(db, k, v, flags)
        };
        // SAFETY: the caller's contract: `data` is writable.
        let rc = unsafe { put_rc(r, flags, w, db, k, data) };
        // SAFETY: the caller's contract; `w` is not used from here on.
        unsafe { settle_cursors(txn, db, std::ptr::null_mut()) };
        rc
    })
}

/// Deletes a key, or with `data` (DUPSORT) one of its values (`mdb_del`).
///
/// # Safety
/// `txn` is null or a live txn handle; `key` and `data` null or valid `MDB_val`s.
#[no_mangle]
pub unsafe extern "C" fn mdb_del(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    key: *mut MDB_val,
    data: *mut MDB_val,
) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard(call_env, || {
        // SAFETY: the caller's contract: `key` is null or valid.
        let k = unsafe { val_slice(key) }.ok_or(libc::EINVAL)?;
        let db = Database::from_dbi(dbi);
        // SAFETY: the caller's contract.
        let w = unsafe { write_access_to_db(txn, db) }?;
        let is_dupsort = dbi_rc(w.db_flags(db))? & db_flags::DUP_SORT != 0;
        let value = if is_dupsort {
            // SAFETY: the caller's contract: `data` is null or valid.
            unsafe { val_slice(data) }
        } else {
            None
        };
        let deleted = dbi_rc(w.delete_value(db, k, value));
        // SAFETY: the caller's contract; `w` is not used from here on.
        unsafe { settle_cursors(txn, db, std::ptr::null_mut()) };
        if deleted? {
            Ok(())
        } else {
            Err(MDB_NOTFOUND)
        }
    })
}

/// Compares `a` and `b` in the key (`key`) or value order of a database: -1, 0 or 1; 0
/// when it cannot.
///
/// # Safety
/// `txn` is null or a live txn handle; `a` and `b` null or valid `MDB_val`s.
unsafe fn compare(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    a: *const MDB_val,
    b: *const MDB_val,
    key: bool,
) -> c_int {
    let mut result = 0;
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard_void(call_env, || {
        // SAFETY: the caller's contract: `a` and `b` are null or valid.
        let (Some(a), Some(b)) = (unsafe { val_slice(a) }, unsafe { val_slice(b) }) else {
            return;
        };
        let db = Database::from_dbi(dbi);
        // SAFETY: the caller's contract.
        let orders = match unsafe { access(txn) } {
            Ok(Access::Write(w)) => w.orders(db),
            Ok(Access::Read(r)) => r.orders(db),
            Err(_) => return,
        };
        if let Ok(orders) = orders {
            let cmp = if key { Some(orders.key) } else { orders.dup };
            let ord = match cmp {
                Some(cmp) => cmp.compare(a, b),
                None => a.cmp(b),
            };
            result = ord as c_int;
        }
    });
    result
}

/// Compares two keys in a database's order (`mdb_cmp`): <0, 0 or >0.
///
/// # Safety
/// `txn` is null or a live txn handle; `a` and `b` null or valid `MDB_val`s.
#[no_mangle]
pub unsafe extern "C" fn mdb_cmp(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    a: *const MDB_val,
    b: *const MDB_val,
) -> c_int {
    // SAFETY: the caller's contract, which is `compare`'s.
    unsafe { compare(txn, dbi, a, b, true) }
}

/// Compares two values in a DUPSORT database's value order (`mdb_dcmp`).
///
/// # Safety
/// `txn` is null or a live txn handle; `a` and `b` null or valid `MDB_val`s.
#[no_mangle]
pub unsafe extern "C" fn mdb_dcmp(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    a: *const MDB_val,
    b: *const MDB_val,
) -> c_int {
    // SAFETY: the caller's contract, which is `compare`'s.
    unsafe { compare(txn, dbi, a, b, false) }
}
