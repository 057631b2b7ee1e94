//! Txn and cursor handles are never given back to the allocator. An ended one is marked
//! so and waits here to be reused by the next `mdb_txn_begin` or `mdb_cursor_open`. A
//! program that uses a handle after it ended (LMDB frees it, so there the use is undefined)
//! reaches a handle marked ended and gets an error code, not freed memory. Memory is bounded
//! by the most handles alive at once.

use std::sync::Mutex;

use crate::cursor::MDB_cursor;
use crate::txn::MDB_txn;

/// Ended handles, by address (raw pointers are not `Send`).
static TXNS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static CURSORS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// A handle for `value`: an ended one reused, or a new allocation.
fn take<T>(pool: &Mutex<Vec<usize>>, value: T) -> *mut T {
    let reused = pool.lock().ok().and_then(|mut p| p.pop());
    match reused {
        Some(addr) => {
            let p = addr as *mut T;
            // SAFETY: `addr` came from `Box::into_raw` of a `T` (below) and was put in the
            // pool when its handle ended; nothing else owns it. Assigning drops the ended
            // value in place.
            unsafe { *p = value };
            p
        }
        None => Box::into_raw(Box::new(value)),
    }
}

/// A txn handle for `txn`.
pub(crate) fn new_txn(txn: MDB_txn) -> *mut MDB_txn {
    take(&TXNS, txn)
}

/// A cursor handle for `cursor`.
pub(crate) fn new_cursor(cursor: MDB_cursor) -> *mut MDB_cursor {
    take(&CURSORS, cursor)
}

/// Puts an ended txn handle (already marked ended) back for reuse.
pub(crate) fn recycle_txn(txn: *mut MDB_txn) {
    if let Ok(mut p) = TXNS.lock() {
        p.push(txn as usize);
    }
}

/// Puts a closed cursor handle (already marked closed) back for reuse.
pub(crate) fn recycle_cursor(cursor: *mut MDB_cursor) {
    if let Ok(mut p) = CURSORS.lock() {
        p.push(cursor as usize);
    }
}
