//! `mdb_txn_*`: read txns (with reset/renew), the write txn, and nested write txns.
//!
//! A txn handle refers to its environment with a `'static` lifetime: the environment is a
//! heap object that `mdb_env_close` does not free while any txn is alive (`live_txns`).
//! A nested txn keeps only its [`NestedLevel`]; it works on the write txn at the root of
//! its chain, which is safe because a txn with a child refuses every operation
//! (`MDB_BAD_TXN`), so only the innermost txn of a chain ever touches the write txn.

use std::os::raw::{c_int, c_uint};
use std::sync::atomic::Ordering;

use ferrocore::{
    env_flags, DetachedCursor, Env, InactiveReadTxn, NestedLevel, ReadTxn, TxnRef, WriteTxn,
};

use crate::cursor::{free_cursor, MDB_cursor};
use crate::env::{env_ref, MDB_env};
use crate::types::codes::*;
use crate::types::*;
use crate::{guard, guard_void, Rc, ToRc};

/// A transaction handle (`MDB_txn`).
pub struct MDB_txn {
    pub(crate) env: *mut MDB_env,
    parent: *mut MDB_txn,
    child: *mut MDB_txn,
    state: TxnState,
    /// The cursors of a write txn (freed when it ends, as in LMDB). A nested txn starts with
    /// its parent's cursors (the first `inherited`), lent to it as LMDB shadows them.
    pub(crate) cursors: Vec<*mut MDB_cursor>,
    inherited: usize,
    /// The txn id, kept for `mdb_txn_id` after a reset.
    id: usize,
}

enum TxnState {
    Read(ReadTxn<'static>),
    Reset(InactiveReadTxn<'static>),
    Write(Box<WriteTxn<'static>>),
    Nested(Option<NestedLevel>),
    /// Transient, while a state is being replaced.
    Ended,
}

/// What a call may do with a txn.
pub(crate) enum Access<'a> {
    /// A read txn.
    Read(&'a ReadTxn<'static>),
    /// The write txn (the root of a nested chain).
    Write(&'a mut WriteTxn<'static>),
}

impl Access<'_> {
    /// The txn for a read-only call.
    pub(crate) fn as_ref(&self) -> TxnRef<'_, 'static> {
        match self {
            Access::Read(r) => TxnRef::Read(r),
            Access::Write(w) => TxnRef::Write(w),
        }
    }
}

impl MDB_txn {
    /// The environment of the txn.
    pub(crate) fn env(&self) -> &MDB_env {
        // SAFETY: the environment outlives its txns (see the module doc).
        unsafe { &*self.env }
    }

    /// True for read-only txns.
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(self.state, TxnState::Read(_) | TxnState::Reset(_))
    }
}

/// The usable txn behind `txn`: `EINVAL` for null, `MDB_BAD_TXN` if it has a child or was
/// reset.
///
/// # Safety
/// `txn` is null or a live txn handle, and no other reference to its chain's write txn is
/// in use.
pub(crate) unsafe fn access<'a>(txn: *mut MDB_txn) -> Rc<Access<'a>> {
    let t = txn.as_mut().ok_or(libc::EINVAL)?;
    if !t.child.is_null() {
        return Err(MDB_BAD_TXN);
    }
    match &mut t.state {
        TxnState::Read(r) => Ok(Access::Read(r)),
        TxnState::Write(w) => Ok(Access::Write(w)),
        TxnState::Nested(_) => {
            let mut root = t.parent;
            loop {
                // SAFETY: a nested txn's parents stay alive while it is (they are blocked).
                let p = &mut *root;
                match &mut p.state {
                    TxnState::Write(w) => return Ok(Access::Write(w)),
                    TxnState::Nested(_) => root = p.parent,
                    _ => return Err(MDB_BAD_TXN),
                }
            }
        }
        TxnState::Reset(_) | TxnState::Ended => Err(MDB_BAD_TXN),
    }
}

/// After a write to `db` in `txn`, whatever its outcome (a refused put may still have
/// changed the tree), settles every other cursor of the txn on `db` where it must stand,
/// as LMDB's fix-ups do at each write (see [`DetachedCursor::settle`]).
///
/// # Safety
/// `txn` is null or a txn handle; its cursor handles are live (they are never freed).
pub(crate) unsafe fn settle_cursors(
    txn: *mut MDB_txn,
    db: ferrocore::Database,
    writer: *mut MDB_cursor,
) {
    let count = match txn.as_ref() {
        Some(t) => t.cursors.len(),
        None => return,
    };
    for i in 0..count {
        // SAFETY: `txn` is a live handle (the caller's contract), read afresh each time so
        // that no borrow of it is held across `access`. Its cursor handles are never freed,
        // and none is borrowed elsewhere during this call: the one that wrote (`writer`,
        // whose call is on the stack) is skipped, and a txn is used by one thread at a time.
        let c = (&(*txn).cursors)[i];
        if c == writer || (*c).cursor.db() != db {
            continue;
        }
        let Ok(Access::Write(w)) = access(txn) else {
            return;
        };
        // An error (a damaged page) leaves the cursor's place as it was; its next call
        // meets the error.
        let _ = (*c).cursor.settle(w);
    }
}

/// The write txn behind `txn`: `EACCES` for a read txn.
///
/// # Safety
/// As for [`access`].
pub(crate) unsafe fn write_access<'a>(txn: *mut MDB_txn) -> Rc<&'a mut WriteTxn<'static>> {
    match access(txn)? {
        Access::Write(w) => Ok(w),
        Access::Read(_) => Err(libc::EACCES),
    }
}

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
        // SAFETY: the environment is not freed while txns are alive (live_txns), so the
        // txn may borrow it for as long as the handle exists.
        let open: &'static Env = &*(e.open_env()? as *const Env);
        let flags = flags & MDB_RDONLY;
        let mut handle = MDB_txn {
            env,
            parent,
            child: std::ptr::null_mut(),
            state: TxnState::Ended,
            cursors: Vec::new(),
            inherited: 0,
            id: 0,
        };
        if let Some(p) = parent.as_mut() {
            if p.is_read_only() {
                return Err(libc::EINVAL);
            }
            if flags != 0 || open.flags() & env_flags::WRITE_MAP != 0 {
                // As LMDB: no read-only child, and no nested txn with WRITEMAP.
                return Err(MDB_BAD_TXN);
            }
            let root = write_access(parent)?;
            if root.has_failed() {
                return Err(MDB_BAD_TXN);
            }
            let level = root.begin_nested_level().rc()?;
            handle.id = root.id() as usize;
            handle.state = TxnState::Nested(Some(level));
            // The parent's cursors are lent to the child (LMDB's shadow cursors).
            handle.cursors = std::mem::take(&mut p.cursors);
            handle.inherited = handle.cursors.len();
            let child: *mut MDB_txn = crate::pool::new_txn(handle);
            for &c in &(*child).cursors {
                let c = &mut *c;
                c.backups.push(c.cursor.clone());
                c.txn = child;
            }
            p.child = child;
            e.live_txns.fetch_add(1, Ordering::AcqRel);
            *out = child;
            return Ok(());
        }
        if flags & MDB_RDONLY != 0 {
            let r = open.begin_read().rc()?;
            handle.id = r.id() as usize;
            handle.state = TxnState::Read(r);
        } else {
            let w = open.begin_write().rc()?;
            handle.id = w.id() as usize;
            handle.state = TxnState::Write(Box::new(w));
        }
        e.live_txns.fetch_add(1, Ordering::AcqRel);
        *out = crate::pool::new_txn(handle);
        Ok(())
    })
}

/// The txn's environment (`mdb_txn_env`).
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_env(txn: *mut MDB_txn) -> *mut MDB_env {
    txn.as_ref().map_or(std::ptr::null_mut(), |t| t.env)
}

/// The txn's id (`mdb_txn_id`): the snapshot's for a read txn.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_id(txn: *mut MDB_txn) -> usize {
    txn.as_ref().map_or(0, |t| t.id)
}

/// Ends `txn` (and its children, first): commits if `commit`, and frees the handle, the
/// cursors it owns, and gives lent cursors back to its parent.
///
/// # Safety
/// `txn` is a live txn handle; it is freed.
unsafe fn end(txn: *mut MDB_txn, commit: bool) -> Rc {
    let t = &mut *txn;
    if matches!(t.state, TxnState::Ended) {
        // Already ended (a use after commit or abort): LMDB's handle would be freed.
        return Err(MDB_BAD_TXN);
    }
    let mut rc = Ok(());
    if !t.child.is_null() {
        rc = end(t.child, commit);
        t.child = std::ptr::null_mut();
    }
    let commit = commit && rc.is_ok();
    let state = std::mem::replace(&mut t.state, TxnState::Ended);
    let inherited: Vec<*mut MDB_cursor> = t.cursors.drain(..t.inherited).collect();
    for c in t.cursors.drain(..) {
        free_cursor(c);
    }
    match state {
        // As LMDB: a read txn's commit makes the DB handles it opened public; an abort
        // closes them.
        TxnState::Read(r) => {
            if commit {
                r.commit();
            } else {
                r.abort();
            }
        }
        TxnState::Reset(_) | TxnState::Ended => {}
        TxnState::Write(w) => {
            if commit {
                rc = (*w).commit().rc();
            }
        }
        TxnState::Nested(level) => {
            let level = level.expect("a nested txn ends once");
            // The parent is usable again from here (its write txn is reached through it).
            (*t.parent).child = std::ptr::null_mut();
            let root = match access(t.parent) {
                Ok(Access::Write(w)) => Some(w),
                _ => None,
            };
            let committed = match (root, commit) {
                (Some(root), true) => {
                    rc = root.commit_nested_level(level).rc();
                    rc.is_ok()
                }
                (Some(root), false) => {
                    root.abort_nested_level(level);
                    false
                }
                (None, _) => false,
            };
            for &c in &inherited {
                let c = &mut *c;
                let before = c.backups.pop().expect("a lent cursor has its backup");
                if !committed {
                    c.cursor = before;
                }
                c.txn = t.parent;
            }
            (*t.parent).cursors = inherited;
        }
    }
    t.env().live_txns.fetch_sub(1, Ordering::AcqRel);
    t.parent = std::ptr::null_mut();
    t.child = std::ptr::null_mut();
    t.inherited = 0;
    crate::pool::recycle_txn(txn);
    rc
}

/// Commits the txn and its children, and frees it (`mdb_txn_commit`); on failure it is
/// aborted and freed all the same, as in LMDB.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_commit(txn: *mut MDB_txn) -> c_int {
    let env = txn.as_ref().map_or(std::ptr::null_mut(), |t| t.env);
    guard(env, || {
        if txn.is_null() {
            return Err(libc::EINVAL);
        }
        end(txn, true)
    })
}

/// Aborts the txn and its children, and frees it (`mdb_txn_abort`).
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_abort(txn: *mut MDB_txn) {
    let env = txn.as_ref().map_or(std::ptr::null_mut(), |t| t.env);
    guard_void(env, || {
        if !txn.is_null() {
            let _ = end(txn, false);
        }
    })
}

/// Releases a read txn's snapshot, keeping the handle for `mdb_txn_renew`
/// (`mdb_txn_reset`). Ignored for write txns, as in LMDB.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_reset(txn: *mut MDB_txn) {
    let env = txn.as_ref().map_or(std::ptr::null_mut(), |t| t.env);
    guard_void(env, || {
        let Some(t) = txn.as_mut() else { return };
        if let TxnState::Read(_) = t.state {
            let TxnState::Read(r) = std::mem::replace(&mut t.state, TxnState::Ended) else {
                unreachable!("matched above");
            };
            t.state = TxnState::Reset(r.reset());
        }
    })
}

/// Takes a new snapshot for a reset read txn (`mdb_txn_renew`); `EINVAL` otherwise.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_renew(txn: *mut MDB_txn) -> c_int {
    let env = txn.as_ref().map_or(std::ptr::null_mut(), |t| t.env);
    guard(env, || {
        let t = txn.as_mut().ok_or(libc::EINVAL)?;
        let TxnState::Reset(_) = t.state else {
            return Err(libc::EINVAL);
        };
        let TxnState::Reset(inactive) = std::mem::replace(&mut t.state, TxnState::Ended) else {
            unreachable!("matched above");
        };
        let r = inactive.renew().rc()?;
        t.id = r.id() as usize;
        t.state = TxnState::Read(r);
        Ok(())
    })
}

/// A detached cursor over `db` in `txn` (for `mdb_cursor_open`).
///
/// # Safety
/// As for [`access`].
pub(crate) unsafe fn open_detached(
    txn: *mut MDB_txn,
    db: ferrocore::Database,
) -> Rc<DetachedCursor> {
    let a = access(txn)?;
    DetachedCursor::open(a.as_ref(), db).rc()
}
