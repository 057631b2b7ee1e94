//! The handles C holds — `MDB_env`, `MDB_txn`, `MDB_cursor` — with their lifecycles, the
//! pool that keeps ended txn and cursor handles for reuse, and the access helpers every
//! exported function goes through ([`guard`], [`access`], [`open_cursor`], ...).
//!
//! May import: `types`, `errors` (and ferrocore). The extern "C" modules (`env`, `txn`,
//! `dbi`, `cursor`) import this one; it imports none of them.
//!
//! Lifetimes, as LMDB's: `mdb_env_close` frees the environment; a txn ends at
//! `mdb_txn_commit`/`mdb_txn_abort` (with the cursors of a write txn); a cursor at
//! `mdb_cursor_close`. Ended txn and cursor handles are never freed but kept in the pool,
//! so a use after the end meets a handle marked ended (`MDB_BAD_TXN`, `EINVAL`) where LMDB
//! would read freed memory, until the handle is reused by a new txn or cursor.

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ferrocore::{DetachedCursor, Env, InactiveReadTxn, NestedLevel, ReadTxn, TxnRef, WriteTxn};

use crate::errors::{Rc, ToRc};
use crate::types::codes::*;

// ---------------------------------------------------------------------------------------
// Calls: the guard every exported function runs its body under.

/// Runs an exported function's body: its code, or `MDB_PANIC` if it panicked (and then
/// the environment `env`, if known, is marked failed).
pub(crate) fn guard(env: *const MDB_env, body: impl FnOnce() -> Rc) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => MDB_SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => {
            // SAFETY: `env` is null or the live environment the call was made on.
            if let Some(env) = unsafe { env.as_ref() } {
                env.mark_failed();
            }
            MDB_PANIC
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

// ---------------------------------------------------------------------------------------
// The pool of ended txn and cursor handles.

/// Ended handles, by address (raw pointers are not `Send`). Memory is bounded by the most
/// handles alive at once.
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

/// Puts an ended handle (already marked ended) back for reuse.
fn recycle<T>(pool: &Mutex<Vec<usize>>, handle: *mut T) {
    if let Ok(mut p) = pool.lock() {
        p.push(handle as usize);
    }
}

// ---------------------------------------------------------------------------------------
// Environments.

/// `MDB_assert_func`: called on an internal assertion failure (stored, never called).
pub type MDB_assert_func = unsafe extern "C" fn(*mut MDB_env, *const c_char);

/// An environment handle (`MDB_env`): its settings until `mdb_env_open`, then the open
/// ferrocore environment.
pub struct MDB_env {
    /// The open environment, from `mdb_env_open` until the handle is freed.
    pub(crate) env: Option<Env>,
    pub(crate) map_size: Option<u64>,
    pub(crate) max_readers: u32,
    pub(crate) max_dbs: u32,
    /// Flags set with `mdb_env_set_flags` before open.
    pub(crate) flags: u32,
    /// The path given to `mdb_env_open`.
    pub(crate) path: Option<CString>,
    pub(crate) userctx: *mut c_void,
    pub(crate) assert_func: Option<MDB_assert_func>,
    /// Txns begun and not yet ended: `mdb_env_close` with txns alive leaks the environment
    /// rather than free memory they point into. Only txn begin and end change it.
    live_txns: AtomicUsize,
}

impl MDB_env {
    /// A new, unopened environment with LMDB's defaults.
    pub(crate) fn new() -> Self {
        MDB_env {
            env: None,
            map_size: None,
            max_readers: ferrocore::env::DEFAULT_MAX_READERS,
            max_dbs: 0,
            flags: 0,
            path: None,
            userctx: std::ptr::null_mut(),
            assert_func: None,
            live_txns: AtomicUsize::new(0),
        }
    }

    /// The open environment; `EINVAL` before `mdb_env_open`.
    pub(crate) fn open_env(&self) -> Rc<&Env> {
        self.env.as_ref().ok_or(libc::EINVAL)
    }

    /// Marks the environment failed (after a panic was caught).
    pub(crate) fn mark_failed(&self) {
        if let Some(env) = &self.env {
            env.mark_failed();
        }
    }

    /// True while a txn of this handle is alive.
    pub(crate) fn has_live_txns(&self) -> bool {
        self.live_txns.load(Ordering::Acquire) != 0
    }
}

/// The environment behind `env`; `EINVAL` for null.
///
/// # Safety
/// `env` is null or a live handle from `mdb_env_create`.
pub(crate) unsafe fn env_ref<'a>(env: *mut MDB_env) -> Rc<&'a mut MDB_env> {
    env.as_mut().ok_or(libc::EINVAL)
}

/// The environment of `txn`, for `guard` (null if `txn` is).
///
/// # Safety
/// `txn` is null or a txn handle.
pub(crate) unsafe fn env_of(txn: *mut MDB_txn) -> *mut MDB_env {
    txn.as_ref().map_or(std::ptr::null_mut(), |t| t.env)
}

// ---------------------------------------------------------------------------------------
// Txns.
//
// A txn handle refers to its environment with a `'static` lifetime: the environment is a
// heap object that `mdb_env_close` does not free while any txn is alive (`live_txns`). A
// nested txn keeps only its [`NestedLevel`]; it works on the write txn at the root of its
// chain, which is safe because a txn with a child refuses every operation (`MDB_BAD_TXN`),
// so only the innermost txn of a chain ever touches the write txn.

/// A transaction handle (`MDB_txn`).
pub struct MDB_txn {
    env: *mut MDB_env,
    parent: *mut MDB_txn,
    child: *mut MDB_txn,
    state: TxnState,
    /// The cursors of a write txn (freed when it ends, as in LMDB). A nested txn starts with
    /// its parent's cursors (the first `inherited`), lent to it as LMDB shadows them.
    cursors: Vec<*mut MDB_cursor>,
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
    /// A txn handle of `env` in no state yet (`Ended`).
    fn new(env: *mut MDB_env, parent: *mut MDB_txn) -> Self {
        MDB_txn {
            env,
            parent,
            child: std::ptr::null_mut(),
            state: TxnState::Ended,
            cursors: Vec::new(),
            inherited: 0,
            id: 0,
        }
    }

    /// The environment of the txn.
    pub(crate) fn env(&self) -> &MDB_env {
        // SAFETY: the environment outlives its txns (see the module doc).
        unsafe { &*self.env }
    }

    /// The environment handle of the txn, as C gave it.
    pub(crate) fn env_handle(&self) -> *mut MDB_env {
        self.env
    }

    /// The txn id (`mdb_txn_id`): the snapshot's for a read txn, kept after a reset.
    pub(crate) fn id(&self) -> usize {
        self.id
    }

    /// True for read-only txns.
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(self.state, TxnState::Read(_) | TxnState::Reset(_))
    }

    /// Releases a read txn's snapshot, keeping the handle for [`MDB_txn::renew`]; nothing
    /// for other txns.
    pub(crate) fn reset(&mut self) {
        if let TxnState::Read(_) = self.state {
            let TxnState::Read(r) = std::mem::replace(&mut self.state, TxnState::Ended) else {
                unreachable!("matched above");
            };
            self.state = TxnState::Reset(r.reset());
        }
    }

    /// Takes a new snapshot for a reset read txn; `EINVAL` for any other txn.
    pub(crate) fn renew(&mut self) -> Rc {
        let TxnState::Reset(_) = self.state else {
            return Err(libc::EINVAL);
        };
        let TxnState::Reset(inactive) = std::mem::replace(&mut self.state, TxnState::Ended) else {
            unreachable!("matched above");
        };
        let r = inactive.renew().rc()?;
        self.id = r.id() as usize;
        self.state = TxnState::Read(r);
        Ok(())
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

/// The open environment of `env`, borrowed for as long as a txn handle may live.
///
/// # Safety
/// `env` is a live handle.
unsafe fn env_for_txn(env: *mut MDB_env) -> Rc<&'static Env> {
    // SAFETY: the environment is not freed while txns are alive (live_txns), so the
    // txn may borrow it for as long as the handle exists.
    Ok(&*((*env).open_env()? as *const Env))
}

/// Begins a read txn or the write txn (waiting for any other writer) on `env`.
///
/// # Safety
/// `env` is a live, open handle.
pub(crate) unsafe fn begin_txn(env: *mut MDB_env, read_only: bool) -> Rc<*mut MDB_txn> {
    let open = env_for_txn(env)?;
    let mut handle = MDB_txn::new(env, std::ptr::null_mut());
    if read_only {
        let r = open.begin_read().rc()?;
        handle.id = r.id() as usize;
        handle.state = TxnState::Read(r);
    } else {
        let w = open.begin_write().rc()?;
        handle.id = w.id() as usize;
        handle.state = TxnState::Write(Box::new(w));
    }
    (*env).live_txns.fetch_add(1, Ordering::AcqRel);
    Ok(take(&TXNS, handle))
}

/// Begins a txn nested in the write txn (or nested txn) `parent`; the parent's cursors
/// are lent to it (LMDB's shadow cursors) and the parent is blocked until it ends.
///
/// # Safety
/// `env` is a live, open handle; `parent` a live write or nested txn handle of `env`.
pub(crate) unsafe fn begin_nested(env: *mut MDB_env, parent: *mut MDB_txn) -> Rc<*mut MDB_txn> {
    let root = write_access(parent)?;
    if root.has_failed() {
        return Err(MDB_BAD_TXN);
    }
    let level = root.begin_nested_level().rc()?;
    let mut handle = MDB_txn::new(env, parent);
    handle.id = root.id() as usize;
    handle.state = TxnState::Nested(Some(level));
    let p = &mut *parent;
    handle.cursors = std::mem::take(&mut p.cursors);
    handle.inherited = handle.cursors.len();
    let child: *mut MDB_txn = take(&TXNS, handle);
    for &c in &(*child).cursors {
        let c = &mut *c;
        c.backups.push(c.cursor.clone());
        c.txn = child;
    }
    p.child = child;
    (*env).live_txns.fetch_add(1, Ordering::AcqRel);
    Ok(child)
}

/// Ends `txn` (and its children, first): commits if `commit`, and frees the handle, the
/// cursors it owns, and gives lent cursors back to its parent.
///
/// # Safety
/// `txn` is a live txn handle; it is freed.
pub(crate) unsafe fn end_txn(txn: *mut MDB_txn, commit: bool) -> Rc {
    let t = &mut *txn;
    if matches!(t.state, TxnState::Ended) {
        // Already ended (a use after commit or abort): LMDB's handle would be freed.
        return Err(MDB_BAD_TXN);
    }
    let mut rc = Ok(());
    if !t.child.is_null() {
        rc = end_txn(t.child, commit);
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
    recycle(&TXNS, txn);
    rc
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

// ---------------------------------------------------------------------------------------
// Cursors.

/// A cursor handle (`MDB_cursor`).
pub struct MDB_cursor {
    /// The txn the cursor works in: a lent cursor's nested txn, a read cursor's last txn.
    pub(crate) txn: *mut MDB_txn,
    /// Where the cursor stands.
    pub(crate) cursor: DetachedCursor,
    /// The cursor's state before each nested txn it is lent to; restored if that txn aborts.
    backups: Vec<DetachedCursor>,
    /// Owned by a write txn (closed when the txn ends).
    tracked: bool,
    /// False once closed: the handle then waits in the pool.
    open: bool,
}

impl MDB_cursor {
    /// True for a write txn's cursor (closed with its txn, not renewable).
    pub(crate) fn is_tracked(&self) -> bool {
        self.tracked
    }
}

/// A new cursor handle over `cursor` in `txn`. A write txn's cursor is listed in the txn,
/// which closes it when it ends.
///
/// # Safety
/// `txn` is a live txn handle, not borrowed elsewhere.
pub(crate) unsafe fn new_cursor(txn: *mut MDB_txn, cursor: DetachedCursor) -> *mut MDB_cursor {
    let t = &mut *txn;
    let tracked = !t.is_read_only();
    let handle = take(
        &CURSORS,
        MDB_cursor {
            txn,
            cursor,
            backups: Vec::new(),
            tracked,
            open: true,
        },
    );
    if tracked {
        t.cursors.push(handle);
    }
    handle
}

/// The open cursor behind `cursor`; `None` for null or a closed cursor.
///
/// # Safety
/// `cursor` is null or a handle from `mdb_cursor_open` (handles are never freed).
pub(crate) unsafe fn open_cursor<'a>(cursor: *mut MDB_cursor) -> Option<&'a mut MDB_cursor> {
    cursor.as_mut().filter(|c| c.open)
}

/// Closes a cursor for `mdb_cursor_close`. A cursor of a parent txn lent to a nested txn
/// is left open (it is closed when its own txn ends, as in LMDB); a write txn's cursor
/// leaves its txn's list.
///
/// # Safety
/// `cursor` is an open cursor handle, not borrowed elsewhere; a write txn's cursor's txn
/// is live.
pub(crate) unsafe fn close_cursor(cursor: *mut MDB_cursor) {
    let c = &mut *cursor;
    if !c.backups.is_empty() {
        return;
    }
    if c.tracked {
        // SAFETY: a write txn's cursor belongs to a live txn (it is freed with it).
        let t = &mut *c.txn;
        t.cursors.retain(|&p| p != cursor);
    }
    free_cursor(cursor);
}

/// Closes a cursor: marks it closed and gives the handle to the pool.
///
/// # Safety
/// `c` is a cursor handle from `mdb_cursor_open`.
unsafe fn free_cursor(c: *mut MDB_cursor) {
    let cursor = &mut *c;
    if !cursor.open {
        return;
    }
    cursor.open = false;
    cursor.backups.clear();
    recycle(&CURSORS, c);
}
