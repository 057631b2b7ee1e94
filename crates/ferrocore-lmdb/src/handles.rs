//! The handles C holds — `MDB_env`, `MDB_txn`, `MDB_cursor` — with their lifecycles, the
//! pool that keeps ended txn and cursor handles for reuse, and the access helpers every
//! exported function goes through ([`guard`], [`access`], [`open_cursor`], ...).
//!
//! May import: `types`, `errors` (and ferrocore). The extern "C" modules (`env`, `txn`,
//! `dbi`, `cursor`) import this one; it imports none of them.
//!
//! Lifetimes, as LMDB's: `mdb_env_close` frees the environment; a txn ends at
//! `mdb_txn_commit`/`mdb_txn_abort` (with the cursors of a write txn); a cursor at
//! `mdb_cursor_close`. Ended txn and cursor handles are never freed but kept in the pool
//! (the last top-level write txn's by its environment, as LMDB's `me_txn0`, for the next
//! write txn), so a use after the end meets a handle marked ended (`MDB_BAD_TXN`, `EINVAL`)
//! where LMDB would read freed memory, until the handle is reused by a new txn or cursor.
//!
//! Invariants the `unsafe` code here relies on:
//! - a txn or cursor handle, once made by [`Pool::take`], is never freed;
//! - an environment is not freed while a txn of it is alive (`MDB_env::live_txns`; its
//!   cursors must be closed before `mdb_env_close`, LMDB's contract);
//! - a nested txn's parents are alive while it is (ending a txn ends its child first) and
//!   blocked: a txn with a child refuses every operation (`MDB_BAD_TXN`), so only the
//!   innermost txn of a chain reaches the write txn at its root;
//! - a write txn's open cursors are listed in its `cursors` and closed when it ends, so an
//!   open tracked cursor's txn is alive.

use std::cell::Cell;
use std::ffi::CString;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::LocalKey;

use ferrocore::{Database, DetachedCursor, Env, NestedLevel, ReadTxn, TxnRef, WriteTxn};

use crate::errors::{Rc, ToRc};
use crate::types::codes::*;

// ---------------------------------------------------------------------------------------
// Calls: the guard every exported function runs its body under.

/// The environment an exported call was made on, which [`guard`] marks failed if the
/// call panics. Null when there is none (or the call frees it).
#[derive(Clone, Copy)]
pub(crate) struct CallEnv(*const MDB_env);

impl CallEnv {
    /// No environment to mark failed.
    pub(crate) const NONE: CallEnv = CallEnv(std::ptr::null());

    /// The environment `env` (null for none).
    ///
    /// # Safety
    /// `env` is null or a live environment handle that stays live until the guarded body
    /// returns.
    #[inline]
    pub(crate) unsafe fn new(env: *const MDB_env) -> Self {
        CallEnv(env)
    }
}

/// Runs an exported function's body: its code, or `MDB_PANIC` if it panicked (and then
/// the environment `env`, if known, is marked failed). A panic never crosses into C.
///
/// Deliberately not `#[inline]`: inlined, `catch_unwind` and the whole body land in the
/// exported function, and `mdb_cursor_get` with `MDB_NEXT` was measured ~50% slower
/// (16.7 ns to 25.8 ns a step over 1M keys, release build).
pub(crate) fn guard(env: CallEnv, body: impl FnOnce() -> Rc) -> c_int {
    guard_inlined(env, body)
}

/// [`guard`], inlined into the exported function: for a body that is a few calls (`mdb_get`,
/// a read txn's reset and renewal), where the call into `guard` and its frame cost as much
/// as the body's own glue (W8 through the C ABI: a get 1,478 -> 1,451 instructions, a get
/// in a renewed read txn 1,762 -> 1,721).
#[inline(always)]
pub(crate) fn guard_inlined(env: CallEnv, body: impl FnOnce() -> Rc) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => MDB_SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => {
            // SAFETY: `CallEnv::new`'s contract: null or live until the body returned.
            if let Some(env) = unsafe { env.0.as_ref() } {
                env.mark_failed();
            }
            MDB_PANIC
        }
    }
}

/// Runs the body of an exported function that returns nothing to C: a panic is swallowed
/// (and marks the environment failed). Not `#[inline]`, as [`guard`].
pub(crate) fn guard_void(env: CallEnv, body: impl FnOnce()) {
    let _ = guard(env, || {
        body();
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------
// The pool of ended txn and cursor handles.

/// Ended handles of type `T`, by address (raw pointers are not `Send`), waiting to be
/// reused by the next `mdb_txn_begin` or `mdb_cursor_open`. Invariant: it holds only
/// addresses from `Box::into_raw` of a `T` (in [`Pool::take`]), each at most once, either
/// in the shared list or as one thread's [`LocalHandle`]. Memory is bounded by the most
/// handles alive at once.
struct Pool<T> {
    /// The addresses of ended handles.
    ended: Mutex<Vec<usize>>,
    /// Each thread's last ended handle, in front of `ended`: a thread that begins and ends
    /// txns one after another (a server answering requests) takes and gives back its
    /// handle without the list's lock.
    local: &'static LocalKey<LocalHandle>,
    /// `fn() -> T`: the pool is `Sync` whatever `T` is (it holds addresses, not values).
    _handles: PhantomData<fn() -> T>,
}

/// One ended handle kept by a thread for its pool ([`Pool::local`]); 0 if none. A thread
/// that exits gives it to the pool's shared list.
struct LocalHandle {
    addr: Cell<usize>,
    /// The shared list of the pool this belongs to (a function: a constant may not hold a
    /// reference to the list, which is mutable).
    ended: fn() -> &'static Mutex<Vec<usize>>,
}

impl Drop for LocalHandle {
    fn drop(&mut self) {
        let addr = self.addr.get();
        if addr != 0 {
            if let Ok(mut p) = (self.ended)().lock() {
                p.push(addr);
            }
        }
    }
}

impl<T> Pool<T> {
    /// An empty pool whose threads keep their last ended handle in `local`.
    const fn new(local: &'static LocalKey<LocalHandle>) -> Self {
        Pool {
            ended: Mutex::new(Vec::new()),
            local,
            _handles: PhantomData,
        }
    }

    /// A handle for `value`: an ended one reused, or a new allocation. Never null.
    fn take(&self, value: T) -> *mut T {
        match self.reuse() {
            Some(p) => {
                // SAFETY: `reuse`'s guarantee: `p` is an ended handle owned by no one.
                // Assigning drops the ended value in place.
                unsafe { *p = value };
                p
            }
            None => Box::into_raw(Box::new(value)),
        }
    }

    /// An ended handle, still holding its ended value, for the caller to set up in place
    /// (field by field, without moving a whole new value in); `None` if the pool is empty
    /// (then [`Pool::take`] allocates). The caller owns it until it is recycled.
    fn reuse(&self) -> Option<*mut T> {
        // The pool's invariant: every address came from `Box::into_raw` of a `T` and was
        // put back when its handle ended; taken out, it is owned by no one. (During a
        // thread's exit the thread's own is gone: the shared list serves.)
        let addr = match self.local.try_with(|l| l.addr.replace(0)) {
            Ok(addr) if addr != 0 => addr,
            _ => self.ended.lock().ok().and_then(|mut p| p.pop())?,
        };
        Some(addr as *mut T)
    }

    /// Puts an ended handle (already marked ended) back for reuse: as the thread's own if
    /// it holds none, else in the shared list.
    ///
    /// # Safety
    /// `handle` came from `take` on this pool and has just ended: it is not in the pool
    /// yet, and nothing uses it as live any more.
    unsafe fn recycle(&self, handle: *mut T) {
        let kept = self.local.try_with(|l| {
            let free = l.addr.get() == 0;
            if free {
                l.addr.set(handle as usize);
            }
            free
        });
        if kept != Ok(true) {
            if let Ok(mut p) = self.ended.lock() {
                p.push(handle as usize);
            }
        }
    }
}

thread_local! {
    /// The thread's last ended txn handle ([`Pool::local`] of [`TXNS`]).
    static LOCAL_TXN: LocalHandle = const {
        LocalHandle {
            addr: Cell::new(0),
            ended: || &TXNS.ended,
        }
    };
    /// The thread's last closed cursor handle ([`Pool::local`] of [`CURSORS`]).
    static LOCAL_CURSOR: LocalHandle = const {
        LocalHandle {
            addr: Cell::new(0),
            ended: || &CURSORS.ended,
        }
    };
}

/// Ended txn handles.
static TXNS: Pool<MDB_txn> = Pool::new(&LOCAL_TXN);
/// Closed cursor handles.
static CURSORS: Pool<MDB_cursor> = Pool::new(&LOCAL_CURSOR);

// ---------------------------------------------------------------------------------------
// Environments.

/// `MDB_assert_func`: called on an internal assertion failure (stored, never called).
pub type MDB_assert_func = unsafe extern "C" fn(*mut MDB_env, *const c_char);

/// An environment handle (`MDB_env`): its settings until `mdb_env_open`, then the open
/// ferrocore environment. The settings are written through `env_mut`, only before open;
/// `userctx` and `assert_func`, at any time, field by field through the raw pointer.
pub struct MDB_env {
    /// The open environment, from `mdb_env_open` until the handle is freed.
    pub(crate) env: Option<Env>,
    /// `mdb_env_set_mapsize` before open.
    pub(crate) map_size: Option<u64>,
    /// `mdb_env_set_maxreaders` before open.
    pub(crate) max_readers: u32,
    /// `mdb_env_set_maxdbs` before open.
    pub(crate) max_dbs: u32,
    /// Flags set with `mdb_env_set_flags` before open.
    pub(crate) flags: u32,
    /// The path given to `mdb_env_open`.
    pub(crate) path: Option<CString>,
    /// `mdb_env_set_userctx`.
    pub(crate) userctx: *mut c_void,
    /// `mdb_env_set_assert`.
    pub(crate) assert_func: Option<MDB_assert_func>,
    /// Txns begun and not yet ended: `mdb_env_close` with txns alive leaks the environment
    /// rather than free memory they point into. Only txn begin and end change it.
    live_txns: LiveTxns,
    /// The handle of the last write txn, ended, for the next one to begin in (null if
    /// none): LMDB's `me_txn0`. It keeps the txn's emptied heap place
    /// ([`MDB_txn::spare_write`]), so a write txn begins and ends without the handle pool
    /// and without a lock. Taken and put back with a swap; a handle it displaces goes to the
    /// pool. Recycled into the pool when the environment is freed (handles are never freed).
    write_handle: AtomicPtr<MDB_txn>,
}

impl Drop for MDB_env {
    fn drop(&mut self) {
        let t = *self.write_handle.get_mut();
        if !t.is_null() {
            // SAFETY: the cached handle is an ended handle from `TXNS.take` that nothing
            // else holds (taken out of the cache, it would be null); `&mut self` means no
            // call on the environment runs, so no begin can take it meanwhile.
            unsafe {
                (*t).spare_write = None;
                TXNS.recycle(t);
            }
        }
    }
}

impl MDB_env {
    /// A new, unopened environment with LMDB's defaults.
    pub(crate) fn new() -> Self {
        MDB_env {
            env: None,
            map_size: None,
            max_readers: ferrocore::DEFAULT_MAX_READERS,
            max_dbs: 0,
            flags: 0,
            path: None,
            userctx: std::ptr::null_mut(),
            assert_func: None,
            live_txns: LiveTxns::default(),
            write_handle: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The open environment; `EINVAL` before `mdb_env_open`.
    #[inline]
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
        self.live_txns.any()
    }
}

/// The count of an environment's live txns, in parts on cache lines of their own: a txn
/// counts itself in its handle's part ([`MDB_txn::live_part`], given when the handle is
/// made, round robin) and leaves the same part wherever it ends; the environment has live
/// txns while any part is above 0. One count for all threads cost every read request two
/// atomic updates of a cache line that the threads making requests all contended for.
/// Threads that begin txns one after another each reuse a handle of their own (the pool's
/// thread-local one), hence each their own part. (A part per thread, read from a
/// thread-local, cost a `__tls_get_addr` call a txn in the shared library.)
#[derive(Default)]
struct LiveTxns {
    parts: [LivePart; LIVE_PARTS],
}

/// Parts of [`LiveTxns`].
const LIVE_PARTS: usize = 16;

/// One part of [`LiveTxns`].
#[derive(Default)]
#[repr(align(64))]
struct LivePart(AtomicUsize);

/// The part of [`LiveTxns`] for a handle about to be made: handles are numbered as they
/// are made.
fn new_live_part() -> u8 {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    (NEXT.fetch_add(1, Ordering::Relaxed) % LIVE_PARTS) as u8
}

impl LiveTxns {
    /// Counts a txn in `part`, its handle's.
    #[inline]
    fn enter(&self, part: u8) {
        self.parts[part as usize].0.fetch_add(1, Ordering::AcqRel);
    }

    /// Uncounts a txn counted in `part`.
    #[inline]
    fn leave(&self, part: u8) {
        let before = self.parts[part as usize].0.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "a txn left a part it was not counted in");
    }

    /// True while a txn is counted.
    fn any(&self) -> bool {
        self.parts.iter().any(|p| p.0.load(Ordering::Acquire) != 0)
    }
}

/// The environment behind `env`; `EINVAL` for null.
///
/// # Safety
/// `env` is null or a live handle from `mdb_env_create`, live for `'a`.
#[inline]
pub(crate) unsafe fn env_ref<'a>(env: *mut MDB_env) -> Rc<&'a MDB_env> {
    // SAFETY: the caller's contract; only shared references to a live environment are
    // made outside `env_mut`, whose callers have it to themselves.
    unsafe { env.as_ref() }.ok_or(libc::EINVAL)
}

/// The environment behind `env`, to change its settings; `EINVAL` for null.
///
/// # Safety
/// `env` is null or a live handle from `mdb_env_create`, live for `'a`, and nothing else
/// refers to it meanwhile: no other thread is in a call on it (LMDB: settings are
/// changed before `mdb_env_open`, or by one thread at a time) and no txn of it is in a call.
pub(crate) unsafe fn env_mut<'a>(env: *mut MDB_env) -> Rc<&'a mut MDB_env> {
    // SAFETY: the caller's contract.
    unsafe { env.as_mut() }.ok_or(libc::EINVAL)
}

/// The environment of `txn`, for [`guard`] (none if `txn` is null).
///
/// # Safety
/// `txn` is null or a txn handle (live or ended: handles are never freed) whose
/// environment is live for the call (LMDB: an environment is closed after its txns and
/// cursors).
#[inline]
pub(crate) unsafe fn env_of(txn: *const MDB_txn) -> CallEnv {
    // SAFETY: the caller's contract: `txn` is null or points to a txn handle.
    let env = unsafe { txn.as_ref() }.map_or(std::ptr::null(), |t| t.env.cast_const());
    // SAFETY: the caller's contract: that environment is live for the call.
    unsafe { CallEnv::new(env) }
}

// ---------------------------------------------------------------------------------------
// Txns.
//
// A txn handle refers to its environment with a `'static` lifetime: the environment is a
// heap object that `mdb_env_close` does not free while any txn is alive (`live_txns`). A
// nested txn keeps only its [`NestedLevel`]; it works on the write txn at the root of its
// chain (see the module doc).

/// A transaction handle (`MDB_txn`).
pub struct MDB_txn {
    /// The environment handle the txn was begun on (live while the txn is).
    env: *mut MDB_env,
    /// The txn this one is nested in (null for a top-level txn).
    parent: *mut MDB_txn,
    /// The nested txn alive in this one (null if none): while set, this txn is blocked.
    child: *mut MDB_txn,
    /// What the txn holds: see [`TxnState`].
    state: TxnState,
    /// The cursors of a write txn (freed when it ends, as in LMDB). A nested txn starts with
    /// its parent's cursors (the first `inherited`), lent to it as LMDB shadows them.
    cursors: Vec<*mut MDB_cursor>,
    /// How many of `cursors` are lent by the parent (given back when this txn ends).
    inherited: usize,
    /// The txn id, kept for `mdb_txn_id` after a reset.
    id: usize,
    /// The part of its environment's `live_txns` the txn is counted in: the handle's for
    /// its whole life (see [`LiveTxns`]).
    live_part: u8,
    /// The heap place of a write txn begun in this handle, emptied, kept while the handle
    /// is not a write txn's for the next write txn begun in it (see [`WriteBox`]).
    spare_write: Option<WriteBox>,
}

/// A write txn on the heap (it is much larger than the other states of a txn handle).
/// The handle keeps the box, emptied, when its write txn ends ([`MDB_txn::spare_write`]),
/// and the environment keeps the handle ([`MDB_env::write_handle`]): the next write txn
/// moves into the same box, and beginning one allocates nothing (a new box each time put
/// the C ABI's commit above LMDB's count of allocations).
type WriteBox = Box<Option<WriteTxn<'static>>>;

/// What a txn handle holds.
enum TxnState {
    /// A read txn: with its snapshot (`active`), or after `mdb_txn_reset`, waiting for
    /// `mdb_txn_renew`. Reset and renewed where it lies (`ReadTxn::reset_in_place`): no
    /// state change moves its some 400 bytes.
    Read { txn: ReadTxn<'static>, active: bool },
    /// The write txn in its box (see [`WriteBox`]): both always `Some` in this state (the
    /// box is an `Option` so that ending the txn takes it out without moving the state).
    Write(Option<WriteBox>),
    /// A nested txn: its level in the root's write txn (`None` never lasts past its end).
    Nested(Option<NestedLevel>),
    /// Ended (the handle waits in the pool), or transient while a state is replaced.
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
    #[inline]
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
            live_part: new_live_part(),
            spare_write: None,
        }
    }

    /// An ended handle made a top-level txn handle of `env` again, still `Ended`: what
    /// [`MDB_txn::new`] makes, written in place (its cursor list keeps its room).
    fn restart(&mut self, env: *mut MDB_env, id: usize) {
        debug_assert!(matches!(self.state, TxnState::Ended) && self.cursors.is_empty());
        self.env = env;
        self.parent = std::ptr::null_mut();
        self.child = std::ptr::null_mut();
        self.inherited = 0;
        self.id = id;
    }

    /// The environment of the txn.
    #[inline]
    pub(crate) fn env(&self) -> &MDB_env {
        // SAFETY: a reference to a txn handle is made only from a handle C passes as live
        // (or while it ends), and the environment outlives its live txns (`live_txns`).
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
    #[inline]
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(self.state, TxnState::Read { .. })
    }

    /// Releases a read txn's snapshot, keeping the handle for [`MDB_txn::renew`]; nothing
    /// for other txns.
    pub(crate) fn reset(&mut self) {
        if let TxnState::Read { txn, active } = &mut self.state {
            if *active {
                txn.reset_in_place();
                *active = false;
            }
        }
    }

    /// Takes a new snapshot for a reset read txn; `EINVAL` for any other txn. Inlined into
    /// `mdb_txn_renew`, its one caller.
    #[inline]
    pub(crate) fn renew(&mut self) -> Rc {
        let TxnState::Read { txn, active } = &mut self.state else {
            return Err(libc::EINVAL);
        };
        if *active {
            return Err(libc::EINVAL);
        }
        txn.renew_in_place().rc()?;
        *active = true;
        self.id = txn.id() as usize;
        Ok(())
    }
}

/// The usable txn behind `txn`: `EINVAL` for null, `MDB_BAD_TXN` if it has a child, was
/// reset or has ended.
///
/// # Safety
/// `txn` is null or a live txn handle, and for `'a` no other reference to it or to its
/// chain's write txn is in use (a txn is used by one thread at a time, LMDB's contract).
#[inline]
pub(crate) unsafe fn access<'a>(txn: *mut MDB_txn) -> Rc<Access<'a>> {
    // SAFETY: the caller's contract.
    let t = unsafe { txn.as_mut() }.ok_or(libc::EINVAL)?;
    if !t.child.is_null() {
        return Err(MDB_BAD_TXN);
    }
    match &mut t.state {
        TxnState::Read { txn, active: true } => Ok(Access::Read(txn)),
        TxnState::Write(Some(w)) => (**w).as_mut().map(Access::Write).ok_or(MDB_BAD_TXN),
        TxnState::Nested(_) => {
            let mut root = t.parent;
            loop {
                // SAFETY: a live nested txn's parents are alive and blocked (module doc),
                // so nothing else refers to them; the caller's contract covers the rest.
                let p = unsafe { &mut *root };
                match &mut p.state {
                    TxnState::Write(Some(w)) => {
                        return (**w).as_mut().map(Access::Write).ok_or(MDB_BAD_TXN)
                    }
                    TxnState::Nested(_) => root = p.parent,
                    _ => return Err(MDB_BAD_TXN),
                }
            }
        }
        TxnState::Read { active: false, .. } | TxnState::Write(None) | TxnState::Ended => {
            Err(MDB_BAD_TXN)
        }
    }
}

/// [`access`] for the calls that name a DB (`mdb_get`, `mdb_put`, `mdb_del`, `mdb_drop`,
/// `mdb_stat`, `mdb_dbi_flags`, `mdb_cursor_open`, `mdb_cursor_renew`, ...). LMDB checks
/// the DB handle against the txn before the txn's state, and a txn that was reset or has
/// ended knows no DB (its `mt_numdbs` is 0): these calls answer `EINVAL` for it, where the
/// others answer `MDB_BAD_TXN`. A txn with a child answers `MDB_BAD_TXN`, as in LMDB.
///
/// # Safety
/// As for [`access`].
#[inline]
pub(crate) unsafe fn access_naming_db<'a>(txn: *mut MDB_txn) -> Rc<Access<'a>> {
    // SAFETY: the caller's contract.
    match unsafe { access(txn) } {
        // SAFETY: the caller's contract; `access` borrows nothing once it has failed.
        Err(MDB_BAD_TXN) if unsafe { is_finished(txn) } => Err(libc::EINVAL),
        other => other,
    }
}

/// True if `txn` is a handle that was reset or has ended (and has no child), which LMDB
/// leaves knowing no DB.
///
/// # Safety
/// `txn` is null or a live txn handle, not mutably borrowed during the call.
#[cold]
#[inline(never)]
pub(crate) unsafe fn is_finished(txn: *mut MDB_txn) -> bool {
    // SAFETY: the caller's contract.
    let Some(t) = (unsafe { txn.as_ref() }) else {
        return false;
    };
    t.child.is_null()
        && match &t.state {
            TxnState::Read { active, .. } => !active,
            TxnState::Write(w) => w.as_ref().is_none_or(|w| w.is_none()),
            TxnState::Nested(level) => level.is_none(),
            TxnState::Ended => true,
        }
}

/// The read txn behind `txn`, if it is an active read txn (`None` for anything else: a
/// null handle, a write, nested, reset or ended txn).
///
/// # Safety
/// As for [`access`].
#[inline]
pub(crate) unsafe fn active_read_txn<'a>(txn: *mut MDB_txn) -> Option<&'a ReadTxn<'static>> {
    // SAFETY: the caller's contract, which is `access`'s.
    let t = unsafe { txn.as_ref() }?;
    match &t.state {
        TxnState::Read { txn, active: true } if t.child.is_null() => Some(txn),
        _ => None,
    }
}

/// The write txn behind `txn`: `EACCES` for a read txn, reset or not (LMDB refuses a write
/// to a read txn before it looks at the txn's state).
///
/// # Safety
/// As for [`access`].
#[inline]
pub(crate) unsafe fn write_access<'a>(txn: *mut MDB_txn) -> Rc<&'a mut WriteTxn<'static>> {
    // SAFETY: the caller's contract, which is `access`'s.
    match unsafe { access(txn) } {
        Ok(Access::Write(w)) => Ok(w),
        Ok(Access::Read(_)) => Err(libc::EACCES),
        // SAFETY: the caller's contract; `access` borrows nothing once it has failed.
        Err(MDB_BAD_TXN) if unsafe { is_read_txn(txn) } => Err(libc::EACCES),
        Err(code) => Err(code),
    }
}

/// True if `txn` is a read txn's handle (active or reset).
///
/// # Safety
/// `txn` is null or a live txn handle, not mutably borrowed during the call.
#[cold]
#[inline(never)]
unsafe fn is_read_txn(txn: *mut MDB_txn) -> bool {
    // SAFETY: the caller's contract.
    unsafe { txn.as_ref() }.is_some_and(MDB_txn::is_read_only)
}

/// The write txn behind `txn`, for a call that changes DB `db` (`mdb_put`, `mdb_del`,
/// `mdb_drop`): as [`access_naming_db`], and for a read txn `EACCES`, or `EINVAL` if `db`
/// is no DB of it (LMDB checks the DB handle first).
///
/// # Safety
/// As for [`access`].
#[inline]
pub(crate) unsafe fn write_access_to_db<'a>(
    txn: *mut MDB_txn,
    db: Database,
) -> Rc<&'a mut WriteTxn<'static>> {
    // SAFETY: the caller's contract, which is `access`'s.
    match unsafe { access_naming_db(txn) }? {
        Access::Write(w) => Ok(w),
        Access::Read(r) => Err(read_only_code(r, db)),
    }
}

/// [`write_access_to_db`]'s code for read txn `r`.
#[cold]
#[inline(never)]
fn read_only_code(r: &ReadTxn<'static>, db: Database) -> c_int {
    match crate::errors::dbi_rc(r.db_flags(db)) {
        Ok(_) => libc::EACCES,
        Err(code) => code,
    }
}

/// After a write to `db` in `txn`, whatever its outcome (a refused put may still have
/// changed the tree), settles every other cursor of the txn on `db` where it must stand,
/// as LMDB's fix-ups do at each write (see [`DetachedCursor::settle`]).
///
/// # Safety
/// `txn` is null or a live txn handle, not borrowed during the call (as for [`access`]);
/// `writer` is null or the cursor handle whose call this is (it is skipped).
#[inline]
pub(crate) unsafe fn settle_cursors(txn: *mut MDB_txn, db: Database, writer: *mut MDB_cursor) {
    // SAFETY: the caller's contract; the borrow ends with the statement.
    let count = match unsafe { txn.as_ref() } {
        Some(t) => t.cursors.len(),
        None => return,
    };
    // A write with no cursor open (the common case) pays for this check only.
    if count > 0 {
        // SAFETY: the caller's contract.
        unsafe { settle_open_cursors(txn, db, writer, count) };
    }
}

/// [`settle_cursors`] for a txn with `count` cursors open, out of line.
///
/// # Safety
/// As for [`settle_cursors`], with `txn` live.
#[inline(never)]
unsafe fn settle_open_cursors(
    txn: *mut MDB_txn,
    db: Database,
    writer: *mut MDB_cursor,
    count: usize,
) {
    for i in 0..count {
        // SAFETY: `txn` is live (the caller's contract), read afresh each time so that no
        // borrow of it is held across `access`; its cursor handles are never freed.
        let c = unsafe { (&(*txn).cursors)[i] };
        // SAFETY: none of the txn's cursors is borrowed during this call: the one that
        // wrote (`writer`, whose call is on the stack) is skipped, and a txn and its
        // cursors are used by one thread at a time.
        if c == writer || unsafe { (*c).cursor.db() } != db {
            continue;
        }
        // SAFETY: the caller's contract; `w` is dropped before the next `access`.
        let Ok(Access::Write(w)) = (unsafe { access(txn) }) else {
            return;
        };
        // An error (a damaged page) leaves the cursor's place as it was; its next call
        // meets the error.
        // SAFETY: as above: `c` is a live cursor handle that nothing else borrows.
        let _ = unsafe { (*c).cursor.settle(w) };
    }
}

/// The open environment of `env`, borrowed for as long as a txn handle may live.
///
/// # Safety
/// `env` is a live handle, and the borrow is used only by a txn counted in `live_txns`.
unsafe fn env_for_txn(env: *mut MDB_env) -> Rc<&'static Env> {
    // SAFETY: the caller's contract. The environment is not freed while txns are alive
    // (`live_txns`), so the txn may borrow it for as long as the handle is live; the txn
    // drops its borrow (its ReadTxn/WriteTxn) when it ends.
    let e: &'static MDB_env = unsafe { &*env };
    e.open_env()
}

/// Begins a read txn or the write txn (waiting for any other writer) on `env`.
///
/// # Safety
/// `env` is a live, open handle.
pub(crate) unsafe fn begin_txn(env: *mut MDB_env, read_only: bool) -> Rc<*mut MDB_txn> {
    // SAFETY: the caller's contract; the txn made here is counted in `live_txns` below.
    let open = unsafe { env_for_txn(env) }?;
    if read_only {
        // The handle first, so that the txn goes from the call's result straight into it:
        // a result converted, or the txn kept in a local, was a copy of its ~400 bytes.
        // SAFETY: the caller's contract: `env` is live.
        let t = unsafe { top_level_handle(env, 0) };
        match open.begin_read() {
            Ok(txn) => {
                // SAFETY: `t` was just set up for this call, which owns it.
                unsafe {
                    (*t).id = txn.id() as usize;
                    (*t).state = TxnState::Read { txn, active: true };
                }
                return Ok(t);
            }
            Err(e) => {
                // SAFETY: `t` is this call's, still `Ended`, counted in `live_txns`.
                unsafe { give_back_unused(env, t) };
                return Err(e.lmdb_code());
            }
        }
    }
    // The environment's write handle if it has one (the usual case), else one from the
    // pool; its box is the last write txn's.
    // SAFETY: the caller's contract: `env` is live.
    let t = unsafe { write_handle(env) };
    // SAFETY: `t` is this call's alone (taken out of the cache or the pool), `Ended`.
    let mut place = unsafe { (*t).spare_write.take() }.unwrap_or_default();
    // Built in its boxed place (a txn returned and then moved in was a copy of it, 408
    // bytes then; through a converted result, one more).
    let id = match open.begin_write_in(&mut place) {
        Ok(w) => w.id() as usize,
        Err(e) => {
            // SAFETY: as above; given back unused, still `Ended`, counted in `live_txns`.
            unsafe {
                (*t).spare_write = Some(place);
                give_back_write_handle(env, t);
            }
            return Err(e.lmdb_code());
        }
    };
    // SAFETY: `t` is this call's alone. The state is written in the handle directly (a
    // `TxnState` moved in, a read txn's size, was a 500-byte copy).
    unsafe {
        (*t).id = id;
        (*t).state = TxnState::Write(Some(place));
    }
    Ok(t)
}

/// The handle for a write txn of `env` about to begin, counted in `live_txns`, `Ended`:
/// the environment's cached one ([`MDB_env::write_handle`]), set up in place, or one from
/// [`top_level_handle`].
///
/// # Safety
/// `env` is a live handle.
unsafe fn write_handle(env: *mut MDB_env) -> *mut MDB_txn {
    // SAFETY: the caller's contract: `env` is live (only a shared reference is made).
    let e = unsafe { &*env };
    let cached = e.write_handle.swap(std::ptr::null_mut(), Ordering::Acquire);
    if cached.is_null() {
        // SAFETY: the caller's contract.
        return unsafe { top_level_handle(env, 0) };
    }
    // SAFETY: the cache holds only ended handles from `TXNS.take` (state `Ended`, cursor
    // list empty) that nothing else holds; the swap made this call its only owner.
    unsafe {
        (*cached).restart(env, 0);
        e.live_txns.enter((*cached).live_part);
    }
    cached
}

/// Puts the ended handle of a top-level write txn of `env` in the environment's cache and
/// uncounts it from `live_txns`; a handle the cache held goes to the pool.
///
/// # Safety
/// `env` is live; `t` is a handle of `env` from `TXNS.take`, `Ended`, counted in
/// `live_txns`, that nothing else uses from here on.
unsafe fn give_back_write_handle(env: *mut MDB_env, t: *mut MDB_txn) {
    // SAFETY: the caller's contract: `env` is live (only a shared reference is made).
    let e = unsafe { &*env };
    // Read before the handle is published: once in the cache, another thread's begin may
    // take it and set it up.
    // SAFETY: the caller's contract: `t` is the caller's alone until the swap.
    let part = unsafe { (*t).live_part };
    let displaced = e.write_handle.swap(t, Ordering::AcqRel);
    if !displaced.is_null() {
        // SAFETY: the cache held it alone (an ended handle from `TXNS.take`); the swap
        // took it out, so this call is its only owner. Its box goes: handles in the pool
        // keep none.
        unsafe {
            (*displaced).spare_write = None;
            TXNS.recycle(displaced);
        }
    }
    // Last: once uncounted, the environment may be closed and freed.
    e.live_txns.leave(part);
}

/// The handle of a top-level txn of `env` just begun (txn id `id`), counted in
/// `live_txns`, for the caller to give its state (it is `Ended`): an ended handle set up
/// in place (its cursor list keeps its room), or a new one.
///
/// # Safety
/// `env` is a live handle.
unsafe fn top_level_handle(env: *mut MDB_env, id: usize) -> *mut MDB_txn {
    let t = match TXNS.reuse() {
        // SAFETY: `reuse`'s guarantee: an ended handle (state `Ended`, its cursor list
        // empty) that this call owns.
        Some(t) => unsafe {
            (*t).restart(env, id);
            t
        },
        None => {
            let mut handle = MDB_txn::new(env, std::ptr::null_mut());
            handle.id = id;
            TXNS.take(handle)
        }
    };
    // SAFETY: the caller's contract: `env` is live (only a shared reference is made); `t`
    // is this call's alone.
    unsafe { (*env).live_txns.enter((*t).live_part) };
    t
}

/// Gives back a handle from [`top_level_handle`] that no txn went into.
///
/// # Safety
/// `env` is live; `t` came from `top_level_handle(env, ..)` and is still `Ended`, used by
/// nothing else.
unsafe fn give_back_unused(env: *mut MDB_env, t: *mut MDB_txn) {
    // SAFETY: the caller's contract: `t` is the caller's alone (a read of one field).
    let part = unsafe { (*t).live_part };
    // SAFETY: the caller's contract: `env` is live (only a shared reference is made).
    unsafe { &*env }.live_txns.leave(part);
    // SAFETY: the caller's contract: `t` came from `TXNS.take` and holds no txn.
    unsafe { TXNS.recycle(t) };
}

/// Begins a txn nested in the write txn (or nested txn) `parent`; the parent's cursors
/// are lent to it (LMDB's shadow cursors) and the parent is blocked until it ends.
///
/// # Safety
/// `env` is a live, open handle; `parent` a live write or nested txn handle of `env`, not
/// borrowed during the call.
pub(crate) unsafe fn begin_nested(env: *mut MDB_env, parent: *mut MDB_txn) -> Rc<*mut MDB_txn> {
    // SAFETY: the caller's contract; `root` is not used once `p` is made below.
    let root = unsafe { write_access(parent) }?;
    if root.has_failed() {
        return Err(MDB_BAD_TXN);
    }
    let level = root.begin_nested_level().rc()?;
    let mut handle = MDB_txn::new(env, parent);
    handle.id = root.id() as usize;
    handle.state = TxnState::Nested(Some(level));
    // SAFETY: the caller's contract; `root`, which may point into this handle, is dead.
    let p = unsafe { &mut *parent };
    handle.cursors = std::mem::take(&mut p.cursors);
    handle.inherited = handle.cursors.len();
    let child: *mut MDB_txn = TXNS.take(handle);
    // SAFETY: `child` was just made by `take` and nothing else refers to it yet.
    let lent = unsafe { &(*child).cursors };
    for &c in lent {
        // SAFETY: the parent's open cursor handles (never freed); none is borrowed during
        // this call (the txn and its cursors are used by one thread at a time).
        let c = unsafe { &mut *c };
        c.backups.push(c.cursor.clone());
        c.txn = child;
    }
    p.child = child;
    // SAFETY: the caller's contract: `env` is live (only a shared reference is made);
    // `child` was made above, and nothing else refers to it yet.
    unsafe { (*env).live_txns.enter((*child).live_part) };
    Ok(child)
}

/// Ends `txn` (and its children, first): commits if `commit`, and frees the handle, the
/// cursors it owns, and gives lent cursors back to its parent.
///
/// # Safety
/// `txn` is a txn handle (live or ended), not borrowed during the call; it is freed.
pub(crate) unsafe fn end_txn(txn: *mut MDB_txn, commit: bool) -> Rc {
    // SAFETY: the caller's contract; the borrow ends with the statement.
    if matches!(unsafe { &(*txn).state }, TxnState::Ended) {
        // Already ended (a use after commit or abort): LMDB's handle would be freed.
        return Err(MDB_BAD_TXN);
    }
    let mut rc = Ok(());
    // SAFETY: the caller's contract (a read of one field; no borrow is kept).
    let child = unsafe { (*txn).child };
    if !child.is_null() {
        // SAFETY: a txn's child is live while the link is set, and no borrow of `txn` is
        // held across the call (which clears `(*txn).child` through its parent link).
        rc = unsafe { end_txn(child, commit) };
    }
    // SAFETY: the caller's contract; the child has ended, so nothing else refers to `txn`.
    let t = unsafe { &mut *txn };
    t.child = std::ptr::null_mut();
    let commit = commit && rc.is_ok();
    let top_level_write = matches!(t.state, TxnState::Write(_));
    let state = match &mut t.state {
        // The box alone taken out: replacing the state moves all of its bytes (a read
        // txn's, some 500), where a write txn's state is a pointer.
        TxnState::Write(place) => {
            let place = place.take();
            t.state = TxnState::Ended;
            TxnState::Write(place)
        }
        // A read txn ends where it lies (moved out, its bytes were copied): as LMDB, its
        // commit makes the DB handles it opened public and its abort closes them. One
        // reset has ended already, its handles published then.
        TxnState::Read { txn, active } => {
            if *active && !commit {
                txn.set_abort_on_drop();
            }
            t.state = TxnState::Ended;
            TxnState::Ended
        }
        _ => std::mem::replace(&mut t.state, TxnState::Ended),
    };
    let inherited: Vec<*mut MDB_cursor> = match t.inherited {
        0 => Vec::new(), // A top-level txn: no iterator to run.
        n => t.cursors.drain(..n).collect(),
    };
    for c in t.cursors.drain(..) {
        // SAFETY: the txn's own cursor handles, never freed, borrowed by no one.
        unsafe { free_cursor(c) };
    }
    match state {
        // Ended above.
        TxnState::Read { .. } | TxnState::Ended => {}
        TxnState::Write(None) => {}
        TxnState::Write(Some(mut place)) => {
            if commit {
                // Committed in its box, and dropped there: the txn is not moved out.
                rc = WriteTxn::commit_in_place(&mut place).rc();
            } else {
                // Dropped: aborted.
                *place = None;
            }
            t.spare_write = Some(place);
        }
        TxnState::Nested(level) => {
            let level = level.expect("a nested txn ends once");
            // SAFETY: a live nested txn's parent is alive and blocked (module doc): nothing
            // else refers to it. It is usable again from here (its write txn is reached
            // through it).
            unsafe { (*t.parent).child = std::ptr::null_mut() };
            // SAFETY: as above; `t` is a different handle.
            let root = match unsafe { access(t.parent) } {
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
                // SAFETY: the parent's open cursor handles, lent to this txn (never freed);
                // none is borrowed during this call.
                let c = unsafe { &mut *c };
                let before = c.backups.pop().expect("a lent cursor has its backup");
                if !committed {
                    c.cursor = before;
                }
                c.txn = t.parent;
            }
            // SAFETY: as above (the parent); the write txn borrowed from it (`root`) is dead.
            unsafe { (*t.parent).cursors = inherited };
        }
    }
    t.parent = std::ptr::null_mut();
    t.inherited = 0;
    if top_level_write {
        // Cached by its environment for the next write txn, with its box.
        let env = t.env;
        // SAFETY: `env` is live (it outlives its counted txns); `txn` came from
        // `TXNS.take`, has just ended (it was not `Ended` above) and is counted; the
        // reference `t` is not used from here on.
        unsafe { give_back_write_handle(env, txn) };
        return rc;
    }
    t.env().live_txns.leave(t.live_part);
    // SAFETY: `txn` came from `TXNS.take` and has just ended (it was not `Ended` above).
    unsafe { TXNS.recycle(txn) };
    rc
}

/// A detached cursor over `db` in `txn` (for `mdb_cursor_open`).
///
/// # Safety
/// As for [`access`].
pub(crate) unsafe fn open_detached(txn: *mut MDB_txn, db: Database) -> Rc<DetachedCursor> {
    // SAFETY: the caller's contract, which is `access`'s.
    let a = unsafe { access_naming_db(txn) }?;
    DetachedCursor::open(a.as_ref(), db).rc()
}

// ---------------------------------------------------------------------------------------
// Cursors.

/// A cursor handle (`MDB_cursor`).
pub struct MDB_cursor {
    /// The txn the cursor works in: a lent cursor's nested txn, a read cursor's last txn
    /// (which may have ended: the handle is still readable).
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
/// `txn` is a live txn handle, not borrowed during the call.
pub(crate) unsafe fn new_cursor(txn: *mut MDB_txn, cursor: DetachedCursor) -> *mut MDB_cursor {
    // SAFETY: the caller's contract.
    let t = unsafe { &mut *txn };
    let tracked = !t.is_read_only();
    let handle = CURSORS.take(MDB_cursor {
        txn,
        cursor,
        backups: Vec::new(),
        tracked,
        open: true,
    });
    if tracked {
        t.cursors.push(handle);
    }
    handle
}

/// The open cursor behind `cursor`; `None` for null or a closed cursor.
///
/// # Safety
/// `cursor` is null or a handle from `mdb_cursor_open` (handles are never freed), not
/// borrowed elsewhere for `'a` (a cursor is used by one thread at a time).
#[inline]
pub(crate) unsafe fn open_cursor<'a>(cursor: *mut MDB_cursor) -> Option<&'a mut MDB_cursor> {
    // SAFETY: the caller's contract.
    unsafe { cursor.as_mut() }.filter(|c| c.open)
}

/// Closes a cursor for `mdb_cursor_close`. A cursor of a parent txn lent to a nested txn
/// is left open (it is closed when its own txn ends, as in LMDB); a write txn's cursor
/// leaves its txn's list.
///
/// # Safety
/// `cursor` is an open cursor handle; neither it nor its txn is borrowed during the call.
pub(crate) unsafe fn close_cursor(cursor: *mut MDB_cursor) {
    // SAFETY: the caller's contract.
    let c = unsafe { &mut *cursor };
    if !c.backups.is_empty() {
        return;
    }
    if c.tracked {
        // SAFETY: an open write txn's cursor belongs to a live txn (it is closed with it);
        // the caller's contract: not borrowed.
        let t = unsafe { &mut *c.txn };
        t.cursors.retain(|&p| p != cursor);
    }
    // SAFETY: the caller's contract; `c` is not used from here on.
    unsafe { free_cursor(cursor) };
}

/// Closes a cursor: marks it closed and gives the handle to the pool (once).
///
/// # Safety
/// `c` is a cursor handle from `mdb_cursor_open`, not borrowed during the call.
unsafe fn free_cursor(c: *mut MDB_cursor) {
    // SAFETY: the caller's contract.
    let cursor = unsafe { &mut *c };
    if !cursor.open {
        return;
    }
    cursor.open = false;
    cursor.backups.clear();
    // SAFETY: `c` came from `CURSORS.take` and has just closed (it was open above).
    unsafe { CURSORS.recycle(c) };
}
