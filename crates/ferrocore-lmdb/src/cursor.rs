//! `mdb_cursor_*`: cursors over read txns (closed by the program, renewable) and over write
//! txns (any number per txn, freed with it, kept on their items while others write).
//!
//! Holds only exported functions: the cursor handle and its lifecycle are in `handles`.
//! May import: `handles`, `errors`, `types`.

use std::os::raw::{c_int, c_uint, c_void};

use ferrocore::{put_flags, CursorOp, Database};

use crate::errors::{dbi_rc, put_rc, ToRc};
use crate::handles::{
    access, close_cursor, env_of, guard, guard_void, new_cursor, open_cursor, open_detached,
    settle_cursors, Access, MDB_cursor, MDB_txn,
};
use crate::types::codes::*;
use crate::types::*;

/// Opens a cursor (`mdb_cursor_open`).
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_open(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    cursor: *mut *mut MDB_cursor,
) -> c_int {
    guard(env_of(txn), || {
        let out = cursor.as_mut().ok_or(libc::EINVAL)?;
        if txn.is_null() {
            return Err(libc::EINVAL);
        }
        let detached = match open_detached(txn, Database::from_dbi(dbi)) {
            Err(code) if code == MDB_BAD_DBI => return Err(libc::EINVAL),
            other => other?,
        };
        *out = new_cursor(txn, detached);
        Ok(())
    })
}

/// Closes a cursor (`mdb_cursor_close`). A cursor of a parent txn lent to a nested txn is
/// closed when its own txn ends, as in LMDB.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_close(cursor: *mut MDB_cursor) {
    let Some(c) = open_cursor(cursor) else { return };
    guard_void(env_of(c.txn), || close_cursor(cursor))
}

/// Binds a read txn's cursor to another (or renewed) read txn (`mdb_cursor_renew`).
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_renew(txn: *mut MDB_txn, cursor: *mut MDB_cursor) -> c_int {
    guard(env_of(txn), || {
        let c = open_cursor(cursor).ok_or(libc::EINVAL)?;
        let t = txn.as_ref().ok_or(libc::EINVAL)?;
        if c.is_tracked() || !t.is_read_only() {
            return Err(libc::EINVAL);
        }
        let a = access(txn)?;
        c.cursor.renew(a.as_ref()).rc()?;
        c.txn = txn;
        Ok(())
    })
}

/// The cursor's txn (`mdb_cursor_txn`).
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_txn(cursor: *mut MDB_cursor) -> *mut MDB_txn {
    open_cursor(cursor).map_or(std::ptr::null_mut(), |c| c.txn)
}

/// The cursor's database (`mdb_cursor_dbi`).
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_dbi(cursor: *mut MDB_cursor) -> MDB_dbi {
    open_cursor(cursor).map_or(0, |c| c.cursor.db().dbi())
}

/// Which of the caller's `MDB_val`s an op fills, as LMDB's `mdb_cursor_get` does.
fn writes_key(op: CursorOp) -> bool {
    use CursorOp::*;
    !matches!(
        op,
        Set | GetBoth | GetBothRange | GetMultiple | FirstDup | LastDup
    )
}

/// Moves the cursor (`mdb_cursor_get`).
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_get(
    cursor: *mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    op: c_uint,
) -> c_int {
    let Some(c) = open_cursor(cursor) else {
        return libc::EINVAL;
    };
    guard(env_of(c.txn), || {
        use CursorOp::*;
        let op = CursorOp::from_raw(op).ok_or(libc::EINVAL)?;
        let (k, v) = match op {
            Set | SetKey | SetRange => {
                let k = val_slice(key).ok_or(libc::EINVAL)?;
                if k.is_empty() {
                    return Err(MDB_BAD_VALSIZE);
                }
                (Some(k), None)
            }
            GetBoth | GetBothRange => {
                let k = val_slice(key).ok_or(libc::EINVAL)?;
                let v = val_slice(data).ok_or(libc::EINVAL)?;
                if k.is_empty() {
                    return Err(MDB_BAD_VALSIZE);
                }
                (Some(k), Some(v))
            }
            FirstDup | LastDup | GetMultiple | NextMultiple | PrevMultiple if data.is_null() => {
                return Err(libc::EINVAL)
            }
            _ => (None, None),
        };
        let a = access(c.txn)?;
        let txn = a.as_ref();
        let found = dbi_rc(c.cursor.get(txn, op, k, v))?;
        let (fk, fv) = found.ok_or(MDB_NOTFOUND)?;
        let key_too = writes_key(op)
            || (matches!(op, FirstDup | LastDup) && !c.cursor.on_dup_data(txn).rc()?);
        if key_too {
            set_val(key, fk);
        }
        if !c.cursor.value_untouched() {
            set_val(data, fv);
        }
        Ok(())
    })
}

/// The flags `mdb_cursor_put` accepts.
const CURSOR_PUT_FLAGS: u32 = put_flags::NO_OVERWRITE
    | put_flags::NO_DUP_DATA
    | put_flags::CURRENT
    | put_flags::RESERVE
    | put_flags::APPEND
    | put_flags::APPEND_DUP
    | put_flags::MULTIPLE;

/// Stores through the cursor and leaves it on the item (`mdb_cursor_put`). With
/// `MDB_MULTIPLE`, `data` is an array of two `MDB_val`s: the values' size and address, and
/// their count. As in LMDB, on every return the count says how many values were stored (0
/// when the call is refused before the first: `MDB_INCOMPATIBLE` on a DB that is not
/// DUPFIXED, `EACCES`, a bad size), and `mv_data` has moved to the last value stored, or to
/// the value that failed; a count of 0 stores one value.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_put(
    cursor: *mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    flags: c_uint,
) -> c_int {
    let Some(c) = open_cursor(cursor) else {
        return libc::EINVAL;
    };
    guard(env_of(c.txn), || {
        if key.is_null() {
            return Err(libc::EINVAL);
        }
        let data_val = data.as_mut().ok_or(libc::EINVAL)?;
        // As LMDB: the count is taken and set to 0 before anything can fail, then the DB
        // must be DUPFIXED.
        let mut multiple = None;
        if flags & put_flags::MULTIPLE != 0 {
            // SAFETY: with MDB_MULTIPLE the caller passes two MDB_vals.
            let count_val = &mut *data.add(1);
            multiple = Some(std::mem::replace(&mut count_val.mv_size, 0));
            if !c.cursor.is_dup_fixed() {
                return Err(MDB_INCOMPATIBLE);
            }
        }
        let k = val_slice(key).ok_or(libc::EINVAL)?;
        if flags & !CURSOR_PUT_FLAGS != 0 {
            return Err(libc::EINVAL);
        }
        let w = match access(c.txn)? {
            Access::Write(w) => w,
            Access::Read(_) => return Err(libc::EACCES),
        };
        let r: ferrocore::Result<()> = if let Some(count) = multiple {
            // LMDB stores the first value before it compares its count with the count
            // given: a count of 0 stores one value.
            let count = count.max(1);
            let size = data_val.mv_size;
            let total = size.checked_mul(count).ok_or(libc::EINVAL)?;
            let base = data_val.mv_data as *const u8;
            let values = if total == 0 {
                &[][..]
            } else if base.is_null() {
                return Err(libc::EINVAL);
            } else {
                // SAFETY: with MDB_MULTIPLE the caller passes `count` values of `size`
                // bytes at `mv_data`.
                std::slice::from_raw_parts(base, total)
            };
            let flags = flags & !put_flags::MULTIPLE;
            let (stored, r) = c.cursor.put_multiple(w, k, values, size, flags);
            // SAFETY: with MDB_MULTIPLE the caller passes two MDB_vals.
            (*data.add(1)).mv_size = stored;
            // LMDB moves `mv_data` on after each value stored but the last one.
            let moved = if r.is_ok() {
                stored.saturating_sub(1)
            } else {
                stored
            };
            data_val.mv_data = base.wrapping_add(moved * size) as *mut c_void;
            r
        } else if flags & put_flags::RESERVE != 0 {
            match c
                .cursor
                .put_reserve(w, k, data_val.mv_size, flags & !put_flags::RESERVE)
            {
                Ok(slot) => {
                    data_val.mv_data = slot.as_mut_ptr() as *mut c_void;
                    Ok(())
                }
                Err(e) => Err(e),
            }
        } else {
            let v = val_slice(data).ok_or(libc::EINVAL)?;
            c.cursor.put(w, k, v, flags)
        };
        let rc = put_rc(r, flags, w, c.cursor.db(), k, data);
        settle_cursors(c.txn, c.cursor.db(), cursor);
        rc
    })
}

/// Deletes the item at the cursor (`mdb_cursor_del`); with `MDB_NODUPDATA` every value of
/// its key.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_del(cursor: *mut MDB_cursor, flags: c_uint) -> c_int {
    let Some(c) = open_cursor(cursor) else {
        return libc::EINVAL;
    };
    guard(env_of(c.txn), || {
        let w = match access(c.txn)? {
            Access::Write(w) => w,
            Access::Read(_) => return Err(libc::EACCES),
        };
        let rc = dbi_rc(c.cursor.delete(w, flags & put_flags::NO_DUP_DATA));
        settle_cursors(c.txn, c.cursor.db(), cursor);
        rc
    })
}

/// The number of values of the cursor's key (`mdb_cursor_count`); `MDB_INCOMPATIBLE`
/// without DUPSORT, as in LMDB.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_count(cursor: *mut MDB_cursor, countp: *mut usize) -> c_int {
    let Some(c) = open_cursor(cursor) else {
        return libc::EINVAL;
    };
    guard(env_of(c.txn), || {
        let out = countp.as_mut().ok_or(libc::EINVAL)?;
        let a = access(c.txn)?;
        *out = c.cursor.count(a.as_ref()).rc()? as usize;
        Ok(())
    })
}
