//! `mdb_cursor_*`: cursors over read txns (closed by the program, renewable) and over write
//! txns (any number per txn, freed with it, kept on their items while others write).
//!
//! Holds only exported functions (and private helpers that only they use): the cursor
//! handle and its lifecycle are in `handles`. May import: `handles`, `errors`, `types`.
//!
//! Every function's `# Safety` is LMDB's contract for it: `cursor` is null or a handle from
//! `mdb_cursor_open` (closed handles are tolerated: they answer `EINVAL`), used by one
//! thread at a time, while its txn is live (or after `mdb_cursor_renew`); each `MDB_val`
//! given is null or valid, its `mv_data` pointing to `mv_size` readable bytes (writable
//! `MDB_val`s for outputs). An open cursor's txn handle is never freed, and its environment
//! is live (cursors are closed before `mdb_env_close`).

use std::os::raw::{c_int, c_uint, c_void};

use ferrocore::{put_flags, CursorOp, Database};

use crate::errors::{dbi_rc, put_rc, ToRc};
use crate::handles::{
    access, access_naming_db, active_read_txn, close_cursor, env_of, guard, guard_void, new_cursor,
    open_cursor, open_detached, settle_cursors, write_access, MDB_cursor, MDB_txn,
};
use crate::types::codes::*;
use crate::types::*;

/// Opens a cursor (`mdb_cursor_open`).
///
/// # Safety
/// `txn` is null or a live txn handle, not in use by another call; `cursor` null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_open(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    cursor: *mut *mut MDB_cursor,
) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard(call_env, || {
        // SAFETY: the caller's contract: `cursor` is null or writable.
        let out = unsafe { cursor.as_mut() }.ok_or(libc::EINVAL)?;
        if txn.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's contract.
        let detached = match unsafe { open_detached(txn, Database::from_dbi(dbi)) } {
            Err(code) if code == MDB_BAD_DBI => return Err(libc::EINVAL),
            other => other?,
        };
        // As LMDB: the free DB is read only in a read txn.
        // SAFETY: the caller's contract; not null (checked above), not borrowed here.
        if dbi == crate::dbi::FREE_DBI && !unsafe { &*txn }.is_read_only() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's contract; not null (checked above).
        *out = unsafe { new_cursor(txn, detached) };
        Ok(())
    })
}

/// Closes a cursor (`mdb_cursor_close`). A cursor of a parent txn lent to a nested txn is
/// closed when its own txn ends, as in LMDB.
///
/// # Safety
/// `cursor` is null or a cursor handle, not in use by another call; a write txn's cursor
/// is closed while its txn is live.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_close(cursor: *mut MDB_cursor) {
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { open_cursor(cursor) }) else {
        return;
    };
    // SAFETY: an open cursor's txn handle and environment (module doc).
    let call_env = unsafe { env_of(c.txn) };
    // SAFETY: open (checked above); the caller's contract; `c` is not used from here on.
    guard_void(call_env, || unsafe { close_cursor(cursor) });
}

/// Binds a read txn's cursor to another (or renewed) read txn (`mdb_cursor_renew`).
///
/// # Safety
/// `txn` is null or a live txn handle and `cursor` null or a cursor handle, neither in use
/// by another call.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_renew(txn: *mut MDB_txn, cursor: *mut MDB_cursor) -> c_int {
    // SAFETY: the caller's contract; its environment outlives it (LMDB's contract).
    let call_env = unsafe { env_of(txn) };
    guard(call_env, || {
        // SAFETY: the caller's contract.
        let c = unsafe { open_cursor(cursor) }.ok_or(libc::EINVAL)?;
        // SAFETY: the caller's contract; the borrow ends before `access` below.
        let t = unsafe { txn.as_ref() }.ok_or(libc::EINVAL)?;
        if c.is_tracked() || !t.is_read_only() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's contract.
        let a = unsafe { access_naming_db(txn) }?;
        c.cursor.renew(a.as_ref()).rc()?;
        c.txn = txn;
        Ok(())
    })
}

/// The cursor's txn (`mdb_cursor_txn`).
///
/// # Safety
/// `cursor` is null or a cursor handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_txn(cursor: *mut MDB_cursor) -> *mut MDB_txn {
    // SAFETY: the caller's contract.
    unsafe { open_cursor(cursor) }.map_or(std::ptr::null_mut(), |c| c.txn)
}

/// The cursor's database (`mdb_cursor_dbi`).
///
/// # Safety
/// `cursor` is null or a cursor handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_dbi(cursor: *mut MDB_cursor) -> MDB_dbi {
    // SAFETY: the caller's contract.
    unsafe { open_cursor(cursor) }.map_or(0, |c| c.cursor.db().dbi())
}

/// Which of the caller's `MDB_val`s an op fills, as LMDB's `mdb_cursor_get` does.
fn writes_key(op: CursorOp) -> bool {
    use CursorOp::*;
    !matches!(
        op,
        Set | GetBoth | GetBothRange | GetMultiple | FirstDup | LastDup
    )
}

/// Moves the cursor (`mdb_cursor_get`). The hot path of iteration, `MDB_NEXT` on a read
/// txn to the next item of the same leaf or of the next leaf under the same parent, runs
/// before the panic guard and the op decoding: one look at the handle, one at its txn,
/// then [`ferrocore::DetachedCursor::next_plain`], which cannot panic (it reads through
/// checked slices and gives up with `None`).
/// Everything else goes through `cursor_get`, out of line.
///
/// # Safety
/// `cursor` is null or a cursor handle (module doc); `key` and `data` null or valid,
/// writable `MDB_val`s.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_get(
    cursor: *mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    op: c_uint,
) -> c_int {
    // A scan's step along its leaf: no call, so that it saves few registers.
    // SAFETY: the caller's contract.
    if let Some(rc) = unsafe { next_unguarded(cursor, key, data, op, true) } {
        return rc;
    }
    // SAFETY: the caller's contract.
    unsafe { cursor_get_any(cursor, key, data, op) }
}

/// `op` if it is a read cursor's `MDB_NEXT` that can run outside the panic guard (neither
/// step panics): along its leaf scan only (`in_scan`: no call), or any of `next_plain`'s
/// steps. `None` for anything else, a closed cursor included (the general path takes it).
///
/// # Safety
/// As for [`mdb_cursor_get`].
#[inline(always)]
unsafe fn next_unguarded(
    cursor: *mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    op: c_uint,
    in_scan: bool,
) -> Option<c_int> {
    if op != CursorOp::Next as c_uint {
        return None;
    }
    // SAFETY: the caller's contract.
    let c = unsafe { open_cursor(cursor) }?;
    // SAFETY: an open cursor's txn handle (module doc), not in use by another call.
    let r = unsafe { active_read_txn(c.txn) }?;
    let item = if in_scan {
        c.cursor.next_in_scan(r)
    } else {
        c.cursor.next_plain(r)
    }?;
    // SAFETY: the caller's contract: `key` and `data` are null or writable.
    unsafe {
        set_val(key, item.0);
        set_val(data, item.1);
    }
    Some(MDB_SUCCESS)
}

/// [`mdb_cursor_get`] but for a step along a leaf scan. Out of line, so that the step
/// saves few registers.
///
/// # Safety
/// As for [`mdb_cursor_get`].
#[inline(never)]
unsafe fn cursor_get_any(
    cursor: *mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    op: c_uint,
) -> c_int {
    // The other steps of a scan.
    // SAFETY: the caller's contract.
    if let Some(rc) = unsafe { next_unguarded(cursor, key, data, op, false) } {
        return rc;
    }
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { open_cursor(cursor) }) else {
        return libc::EINVAL;
    };
    // SAFETY: the caller's contract.
    unsafe { cursor_get(c, key, data, op) }
}

/// [`mdb_cursor_get`] for all but a scan's common step. Kept out of line, so that the
/// step's path saves few registers.
///
/// # Safety
/// As for [`mdb_cursor_get`], with `c` open.
#[inline(never)]
unsafe fn cursor_get(
    c: &mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    op: c_uint,
) -> c_int {
    // SAFETY: an open cursor's txn handle and environment (module doc).
    let call_env = unsafe { env_of(c.txn) };
    guard(call_env, || {
        use CursorOp::*;
        let op = CursorOp::from_raw(op).ok_or(libc::EINVAL)?;
        let (k, v) = match op {
            Set | SetKey | SetRange => {
                // SAFETY: the caller's contract: `key` is null or valid.
                let k = unsafe { val_slice(key) }.ok_or(libc::EINVAL)?;
                if k.is_empty() {
                    return Err(MDB_BAD_VALSIZE);
                }
                (Some(k), None)
            }
            GetBoth | GetBothRange => {
                // SAFETY: the caller's contract: `key` is null or valid.
                let k = unsafe { val_slice(key) }.ok_or(libc::EINVAL)?;
                // SAFETY: the caller's contract: `data` is null or valid.
                let v = unsafe { val_slice(data) }.ok_or(libc::EINVAL)?;
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
        // SAFETY: an open cursor's txn handle (module doc), not in use by another call.
        let a = unsafe { access(c.txn) }?;
        let txn = a.as_ref();
        let found = dbi_rc(c.cursor.get(txn, op, k, v))?;
        let (fk, fv) = found.ok_or(MDB_NOTFOUND)?;
        let key_too = writes_key(op)
            || (matches!(op, FirstDup | LastDup) && !c.cursor.on_dup_data(txn).rc()?);
        if key_too {
            // SAFETY: the caller's contract: `key` is null or writable.
            unsafe { set_val(key, fk) };
        }
        if !c.cursor.value_untouched() {
            // SAFETY: the caller's contract: `data` is null or writable.
            unsafe { set_val(data, fv) };
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
///
/// # Safety
/// `cursor` is null or a cursor handle (module doc); `key` null or a valid `MDB_val`;
/// `data` null or a valid, writable `MDB_val` — with `MDB_MULTIPLE`, two, the first
/// pointing to as many values of its size as the second counts.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_put(
    cursor: *mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    flags: c_uint,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { open_cursor(cursor) }) else {
        return libc::EINVAL;
    };
    // SAFETY: an open cursor's txn handle and environment (module doc).
    let call_env = unsafe { env_of(c.txn) };
    guard(call_env, || {
        if key.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's contract: `data` is null or writable.
        let data_val = unsafe { data.as_mut() }.ok_or(libc::EINVAL)?;
        // As LMDB: the count is taken and set to 0 before anything can fail, then the DB
        // must be DUPFIXED.
        let mut multiple = None;
        if flags & put_flags::MULTIPLE != 0 {
            // SAFETY: with MDB_MULTIPLE the caller passes two writable MDB_vals.
            let count_val = unsafe { &mut *data.add(1) };
            multiple = Some(std::mem::replace(&mut count_val.mv_size, 0));
            if !c.cursor.is_dup_fixed() {
                return Err(MDB_INCOMPATIBLE);
            }
        }
        // SAFETY: the caller's contract: `key` is valid (not null, checked above).
        let k = unsafe { val_slice(key) }.ok_or(libc::EINVAL)?;
        if flags & !CURSOR_PUT_FLAGS != 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: an open cursor's txn handle (module doc), not in use by another call.
        let w = unsafe { write_access(c.txn) }?;
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
                // bytes at `mv_data` (not null, checked above).
                unsafe { std::slice::from_raw_parts(base, total) }
            };
            let flags = flags & !put_flags::MULTIPLE;
            let (stored, r) = c.cursor.put_multiple(w, k, values, size, flags);
            // SAFETY: with MDB_MULTIPLE the caller passes two writable MDB_vals.
            unsafe { (*data.add(1)).mv_size = stored };
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
                    data_val.mv_data = slot.as_mut_ptr().cast::<c_void>();
                    Ok(())
                }
                Err(e) => Err(e),
            }
        } else {
            // SAFETY: the caller's contract: `data` is valid (`data_val` is not used again).
            let v = unsafe { val_slice(data) }.ok_or(libc::EINVAL)?;
            c.cursor.put(w, k, v, flags)
        };
        // SAFETY: the caller's contract: `data` is writable.
        let rc = unsafe { put_rc(r, flags, w, c.cursor.db(), k, data) };
        // SAFETY: an open cursor's txn handle (module doc); `w` is not used from here on,
        // and this cursor, the one borrowed, is the writer skipped.
        unsafe { settle_cursors(c.txn, c.cursor.db(), cursor) };
        rc
    })
}

/// Deletes the item at the cursor (`mdb_cursor_del`); with `MDB_NODUPDATA` every value of
/// its key.
///
/// # Safety
/// `cursor` is null or a cursor handle (module doc).
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_del(cursor: *mut MDB_cursor, flags: c_uint) -> c_int {
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { open_cursor(cursor) }) else {
        return libc::EINVAL;
    };
    // SAFETY: an open cursor's txn handle and environment (module doc).
    let call_env = unsafe { env_of(c.txn) };
    guard(call_env, || {
        // SAFETY: an open cursor's txn handle (module doc), not in use by another call.
        let w = unsafe { write_access(c.txn) }?;
        let rc = dbi_rc(c.cursor.delete(w, flags & put_flags::NO_DUP_DATA));
        // SAFETY: an open cursor's txn handle (module doc); `w` is not used from here on,
        // and this cursor, the one borrowed, is the writer skipped.
        unsafe { settle_cursors(c.txn, c.cursor.db(), cursor) };
        rc
    })
}

/// The number of values of the cursor's key (`mdb_cursor_count`); `MDB_INCOMPATIBLE`
/// without DUPSORT, as in LMDB.
///
/// # Safety
/// `cursor` is null or a cursor handle (module doc); `countp` null or writable.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_count(cursor: *mut MDB_cursor, countp: *mut usize) -> c_int {
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { open_cursor(cursor) }) else {
        return libc::EINVAL;
    };
    // SAFETY: an open cursor's txn handle and environment (module doc).
    let call_env = unsafe { env_of(c.txn) };
    guard(call_env, || {
        // SAFETY: the caller's contract: `countp` is null or writable.
        let out = unsafe { countp.as_mut() }.ok_or(libc::EINVAL)?;
        // SAFETY: an open cursor's txn handle (module doc), not in use by another call.
        let a = unsafe { access(c.txn) }?;
        *out = c.cursor.count(a.as_ref()).rc()? as usize;
        Ok(())
    })
}
