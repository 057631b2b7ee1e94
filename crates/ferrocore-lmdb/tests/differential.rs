//! Differential test of the C ABI: one pseudo-random sequence of LMDB calls runs on the
//! real LMDB (statically linked from `lmdb-master-sys`) and on ferrocore's `liblmdb.so`
//! (loaded with `dlopen`, so the two libraries' `mdb_*` symbols never meet), and every
//! return code and every key and value returned must be the same.
//!
//! The sequence covers every DB flag (DUPSORT, DUPFIXED, INTEGERKEY, REVERSEKEY,
//! INTEGERDUP, REVERSEDUP), every put flag, every cursor op, several cursors per write txn,
//! nested txns committed and aborted, and read txns on old snapshots. Page counts and tree
//! depth may differ; entry counts may not. Every 10 steps and at the end of every txn the
//! whole content of every DB is compared too, with the form of each key's values (a single
//! value or a set, which `MDB_FIRST_DUP` reveals).
//!
//! Where LMDB's answer depends on state it does not define (a cursor never positioned, or
//! whose last positioning failed; a values cursor left stale by a delete or by another
//! handle's write to a DUPSORT DB; cursors given back by a nested commit), the
//! harness stops comparing that cursor's position-dependent moves until it is positioned
//! again. Each rule says what LMDB was seen to do. Cases where LMDB loses data or reads
//! freed memory there were found this way (see issue 5's note); ferrocore's answers in
//! those states follow LMDB's documentation.

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::path::{Path, PathBuf};

type Ptr = *mut c_void;

#[repr(C)]
#[derive(Clone, Copy)]
struct Val {
    size: usize,
    data: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Stat {
    psize: c_uint,
    depth: c_uint,
    branch: usize,
    leaf: usize,
    overflow: usize,
    entries: usize,
}

/// The calls the sequence makes, as C function pointers of one library.
#[derive(Clone, Copy)]
struct Api {
    env_create: unsafe extern "C" fn(*mut Ptr) -> c_int,
    env_set_maxdbs: unsafe extern "C" fn(Ptr, c_uint) -> c_int,
    env_set_mapsize: unsafe extern "C" fn(Ptr, usize) -> c_int,
    env_open: unsafe extern "C" fn(Ptr, *const c_char, c_uint, libc::mode_t) -> c_int,
    env_close: unsafe extern "C" fn(Ptr),
    txn_begin: unsafe extern "C" fn(Ptr, Ptr, c_uint, *mut Ptr) -> c_int,
    txn_commit: unsafe extern "C" fn(Ptr) -> c_int,
    txn_abort: unsafe extern "C" fn(Ptr),
    dbi_open: unsafe extern "C" fn(Ptr, *const c_char, c_uint, *mut c_uint) -> c_int,
    get: unsafe extern "C" fn(Ptr, c_uint, *mut Val, *mut Val) -> c_int,
    put: unsafe extern "C" fn(Ptr, c_uint, *mut Val, *mut Val, c_uint) -> c_int,
    del: unsafe extern "C" fn(Ptr, c_uint, *mut Val, *mut Val) -> c_int,
    stat: unsafe extern "C" fn(Ptr, c_uint, *mut Stat) -> c_int,
    drop: unsafe extern "C" fn(Ptr, c_uint, c_int) -> c_int,
    cursor_open: unsafe extern "C" fn(Ptr, c_uint, *mut Ptr) -> c_int,
    cursor_close: unsafe extern "C" fn(Ptr),
    cursor_get: unsafe extern "C" fn(Ptr, *mut Val, *mut Val, c_uint) -> c_int,
    cursor_put: unsafe extern "C" fn(Ptr, *mut Val, *mut Val, c_uint) -> c_int,
    cursor_del: unsafe extern "C" fn(Ptr, c_uint) -> c_int,
    cursor_count: unsafe extern "C" fn(Ptr, *mut usize) -> c_int,
    cursor_renew: unsafe extern "C" fn(Ptr, Ptr) -> c_int,
    txn_reset: unsafe extern "C" fn(Ptr),
    txn_renew: unsafe extern "C" fn(Ptr) -> c_int,
}

/// Casts a `lmdb-master-sys` function to the pointer type of the same C signature.
macro_rules! real {
    ($f:ident) => {
        // SAFETY: the two pointer types describe the same C function: same arguments, with
        // LMDB's opaque handle types as `void *` and layout-identical MDB_val/MDB_stat.
        unsafe { std::mem::transmute(lmdb_master_sys::$f as *const ()) }
    };
}

// The target type of each transmute is the `Api` field it initialises.
#[allow(clippy::missing_transmute_annotations)]
fn real_api() -> Api {
    Api {
        env_create: real!(mdb_env_create),
        env_set_maxdbs: real!(mdb_env_set_maxdbs),
        env_set_mapsize: real!(mdb_env_set_mapsize),
        env_open: real!(mdb_env_open),
        env_close: real!(mdb_env_close),
        txn_begin: real!(mdb_txn_begin),
        txn_commit: real!(mdb_txn_commit),
        txn_abort: real!(mdb_txn_abort),
        dbi_open: real!(mdb_dbi_open),
        get: real!(mdb_get),
        put: real!(mdb_put),
        del: real!(mdb_del),
        stat: real!(mdb_stat),
        drop: real!(mdb_drop),
        cursor_open: real!(mdb_cursor_open),
        cursor_close: real!(mdb_cursor_close),
        cursor_get: real!(mdb_cursor_get),
        cursor_put: real!(mdb_cursor_put),
        cursor_del: real!(mdb_cursor_del),
        cursor_count: real!(mdb_cursor_count),
        cursor_renew: real!(mdb_cursor_renew),
        txn_reset: real!(mdb_txn_reset),
        txn_renew: real!(mdb_txn_renew),
    }
}

/// ferrocore's `liblmdb.so` from this test run's build.
fn ferrocore_library() -> libloading::Library {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let so: PathBuf = [deps.to_path_buf(), deps.parent().unwrap().to_path_buf()]
        .into_iter()
        .map(|d| d.join("liblmdb.so"))
        .find(|p| p.exists())
        .expect("liblmdb.so built");
    // SAFETY: loading our own library runs no initialisers beyond Rust's std.
    unsafe { libloading::Library::new(so) }.unwrap()
}

fn ferrocore_api(lib: &libloading::Library) -> Api {
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol is the exported function of that name, whose C signature
            // is the field's type (lmdb.h); the library outlives the test.
            unsafe { *lib.get(concat!($name, "\0").as_bytes()).unwrap() }
        };
    }
    Api {
        env_create: sym!("mdb_env_create"),
        env_set_maxdbs: sym!("mdb_env_set_maxdbs"),
        env_set_mapsize: sym!("mdb_env_set_mapsize"),
        env_open: sym!("mdb_env_open"),
        env_close: sym!("mdb_env_close"),
        txn_begin: sym!("mdb_txn_begin"),
        txn_commit: sym!("mdb_txn_commit"),
        txn_abort: sym!("mdb_txn_abort"),
        dbi_open: sym!("mdb_dbi_open"),
        get: sym!("mdb_get"),
        put: sym!("mdb_put"),
        del: sym!("mdb_del"),
        stat: sym!("mdb_stat"),
        drop: sym!("mdb_drop"),
        cursor_open: sym!("mdb_cursor_open"),
        cursor_close: sym!("mdb_cursor_close"),
        cursor_get: sym!("mdb_cursor_get"),
        cursor_put: sym!("mdb_cursor_put"),
        cursor_del: sym!("mdb_cursor_del"),
        cursor_count: sym!("mdb_cursor_count"),
        cursor_renew: sym!("mdb_cursor_renew"),
        txn_reset: sym!("mdb_txn_reset"),
        txn_renew: sym!("mdb_txn_renew"),
    }
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const DUPSORT: c_uint = 0x04;
const INTEGERKEY: c_uint = 0x08;
const DUPFIXED: c_uint = 0x10;
const INTEGERDUP: c_uint = 0x20;
const REVERSEDUP: c_uint = 0x40;
const REVERSEKEY: c_uint = 0x02;
const CREATE: c_uint = 0x40000;
const RDONLY: c_uint = 0x20000;
const NOTLS: c_uint = 0x200000;
const NOOVERWRITE: c_uint = 0x10;
const NODUPDATA: c_uint = 0x20;
const CURRENT: c_uint = 0x40;
const RESERVE: c_uint = 0x10000;
const APPEND: c_uint = 0x20000;
const APPENDDUP: c_uint = 0x40000;
const MULTIPLE: c_uint = 0x80000;

/// The databases of the sequence: name and flags.
const DBS: [(&str, c_uint); 5] = [
    ("plain", 0),
    ("dups", DUPSORT),
    ("fixed", DUPSORT | DUPFIXED | INTEGERDUP),
    ("ints", INTEGERKEY),
    ("rev", REVERSEKEY | DUPSORT | REVERSEDUP),
];

/// One engine's handles during the sequence.
struct Side {
    api: Api,
    env: Ptr,
    dbis: Vec<c_uint>,
    /// The write txn and its nested children, innermost last.
    txns: Vec<Ptr>,
    /// Write cursors: handle, nesting level that opened it, DB index.
    cursors: Vec<(Ptr, usize, usize)>,
    /// Cursors whose last positioning op failed (see [`leaves_cursor_indeterminate`]).
    indeterminate: Vec<Ptr>,
    /// Cursors whose LMDB values cursor may be stale: after a delete through the cursor
    /// (GET_MULTIPLE reads the deleted key's old page, COUNT may find it uninitialised; in
    /// a DUPSORT DB the cursor is not compared at all until positioned again, see
    /// `Op::CursorDel`), and after NEXT, PREV, NEXT_NODUP or PREV_NODUP onto a key with a
    /// single value (LMDB keeps the values cursor of the key it left): GET_MULTIPLE and
    /// COUNT are not compared until the cursor is positioned again.
    stale_values: Vec<Ptr>,
    /// `indeterminate`, `stale_values` and `foreign_writes` as each nested txn found them:
    /// an abort gives the parent's cursors back as they were, LMDB's state included.
    marks_before: Vec<[Vec<Ptr>; 3]>,
    /// Cursors whose DB another handle wrote to since they were last positioned or wrote
    /// themselves. LMDB's end-of-data mark (C_EOF, from MDB_LAST or an APPEND) does not
    /// heed a key written after the cursor's item; once the cursor deletes its item it
    /// stands on that key still marked at the end, and MDB_NEXT answers NOTFOUND
    /// (`cursor_after_another_handle_appended` shows it). After such a cursor deletes, it is
    /// not compared until positioned again; what it deleted is, by the content checks.
    foreign_writes: Vec<Ptr>,
    /// Read txns on old snapshots, each with a cursor on one DB.
    readers: Vec<(Ptr, Ptr, usize)>,
}

/// What a call returned: its code and the key and value it handed back (if it set them).
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    rc: c_int,
    key: Option<Bytes>,
    data: Option<Bytes>,
}

/// Bytes shown as text where they are printable, for readable failure logs.
#[derive(Clone, PartialEq, Eq)]
struct Bytes(Vec<u8>);

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text: String = self
            .0
            .iter()
            .flat_map(|&b| std::ascii::escape_default(b))
            .map(char::from)
            .collect();
        if text.len() > 24 {
            write!(f, "\"{}..\"({})", &text[..20], self.0.len())
        } else {
            write!(f, "\"{text}\"")
        }
    }
}

const UNSET: *mut c_void = 0x10 as *mut c_void;

fn in_val(bytes: &[u8]) -> Val {
    Val {
        size: bytes.len(),
        data: bytes.as_ptr() as *mut c_void,
    }
}

fn unset() -> Val {
    Val {
        size: 0,
        data: UNSET,
    }
}

/// The bytes a call left in `v`, unless it left the sentinel or the input untouched.
fn read_back(v: &Val, input: Option<&[u8]>) -> Option<Bytes> {
    if v.data == UNSET || input.is_some_and(|i| i.as_ptr() as *mut c_void == v.data) {
        return None;
    }
    // SAFETY: the library pointed `v` at `size` bytes valid until the next write.
    Some(Bytes(
        unsafe { std::slice::from_raw_parts(v.data as *const u8, v.size) }.to_vec(),
    ))
}

/// What a put returned: its code, and with NOOVERWRITE on an existing key the value it
/// handed back.
fn put_outcome(rc: c_int, flags: c_uint, v: &Val, value: &[u8]) -> Outcome {
    let existing = if rc == -30799 && flags & NOOVERWRITE != 0 {
        read_back(v, Some(value))
    } else {
        None
    };
    Outcome {
        rc,
        key: None,
        data: existing,
    }
}

/// One call of the sequence, generated once and applied to both engines.
#[derive(Clone, Debug)]
enum Op {
    BeginWrite,
    BeginNested,
    EndTxn {
        commit: bool,
    },
    Put {
        db: usize,
        key: Bytes,
        value: Bytes,
        flags: c_uint,
    },
    Del {
        db: usize,
        key: Bytes,
        value: Option<Bytes>,
    },
    Get {
        db: usize,
        key: Bytes,
    },
    Drop {
        db: usize,
    },
    Stat {
        db: usize,
    },
    CursorOpen {
        db: usize,
    },
    CursorClose {
        which: usize,
    },
    CursorGet {
        which: usize,
        op: c_uint,
        key: Bytes,
        value: Bytes,
    },
    CursorPut {
        which: usize,
        key: Bytes,
        value: Bytes,
        flags: c_uint,
    },
    CursorPutMultiple {
        which: usize,
        key: Bytes,
        values: Vec<u32>,
        flags: c_uint,
    },
    CursorDel {
        which: usize,
        flags: c_uint,
    },
    CursorCount {
        which: usize,
    },
    ReaderBegin {
        db: usize,
    },
    ReaderGet {
        which: usize,
        op: c_uint,
        key: Bytes,
    },
    ReaderEnd {
        which: usize,
    },
}

fn key_for(rng: &mut Rng, db: usize) -> Bytes {
    let k = rng.below(48) as u32;
    Bytes(if DBS[db].1 & INTEGERKEY != 0 {
        (k * 7 + 1).to_ne_bytes().to_vec()
    } else {
        format!("k{k:03}").into_bytes()
    })
}

fn value_for(rng: &mut Rng, db: usize) -> Bytes {
    if DBS[db].1 & DUPFIXED != 0 {
        return Bytes((rng.below(64) as u32).to_ne_bytes().to_vec());
    }
    let n = rng.below(40);
    let len = [3usize, 12, 60, 200][rng.below(4) as usize];
    let mut v = format!("v{n:02}").into_bytes();
    v.resize(len, b'.' + (n % 7) as u8);
    Bytes(v)
}

fn generate(rng: &mut Rng, in_write: bool, depth: usize, cursors: usize, readers: usize) -> Op {
    let db = rng.below(DBS.len() as u64) as usize;
    if !in_write {
        return match rng.below(4) {
            0 if readers > 0 => Op::ReaderEnd {
                which: rng.below(readers as u64) as usize,
            },
            1 if readers < 3 => Op::ReaderBegin { db },
            _ => Op::BeginWrite,
        };
    }
    match rng.below(100) {
        0..=24 => {
            let flags = [0, 0, 0, NOOVERWRITE, NODUPDATA, APPEND, APPENDDUP, RESERVE]
                [rng.below(8) as usize];
            let dup = DBS[db].1 & DUPSORT != 0;
            Op::Put {
                db,
                key: key_for(rng, db),
                value: value_for(rng, db),
                flags: if dup && flags == RESERVE { 0 } else { flags },
            }
        }
        25..=31 => Op::Del {
            db,
            key: key_for(rng, db),
            value: rng.chance(50).then(|| value_for(rng, db)),
        },
        32..=35 => Op::Get {
            db,
            key: key_for(rng, db),
        },
        36 if rng.chance(20) => Op::Drop { db },
        37..=38 => Op::Stat { db },
        39..=42 if cursors < 4 => Op::CursorOpen { db },
        43 if cursors > 0 => Op::CursorClose {
            which: rng.below(cursors as u64) as usize,
        },
        44..=69 if cursors > 0 => Op::CursorGet {
            which: rng.below(cursors as u64) as usize,
            op: rng.below(19) as c_uint,
            key: key_for(rng, db),
            value: value_for(rng, db),
        },
        70..=77 if cursors > 0 => Op::CursorPut {
            which: rng.below(cursors as u64) as usize,
            key: key_for(rng, db),
            value: value_for(rng, db),
            flags: [0, NOOVERWRITE, NODUPDATA, CURRENT, APPEND, APPENDDUP][rng.below(6) as usize],
        },
        78 if cursors > 0 => Op::CursorPutMultiple {
            which: rng.below(cursors as u64) as usize,
            key: key_for(rng, db),
            values: (0..=rng.below(6)).map(|_| rng.below(64) as u32).collect(),
            flags: if rng.chance(30) { NODUPDATA } else { 0 },
        },
        79..=84 if cursors > 0 => Op::CursorDel {
            which: rng.below(cursors as u64) as usize,
            flags: if rng.chance(30) { NODUPDATA } else { 0 },
        },
        85..=86 if cursors > 0 => Op::CursorCount {
            which: rng.below(cursors as u64) as usize,
        },
        87..=88 if depth < 3 => Op::BeginNested,
        89..=91 => Op::EndTxn {
            commit: rng.chance(70),
        },
        92..=95 if readers > 0 => Op::ReaderGet {
            which: rng.below(readers as u64) as usize,
            op: [0, 6, 8, 12, 15, 16, 17][rng.below(7) as usize],
            key: key_for(rng, db),
        },
        96..=97 if readers > 0 => Op::ReaderEnd {
            which: rng.below(readers as u64) as usize,
        },
        98 if readers < 3 => Op::ReaderBegin { db },
        _ => Op::Get {
            db,
            key: key_for(rng, db),
        },
    }
}

impl Side {
    fn open(api: Api, dir: &Path) -> Side {
        let mut env = std::ptr::null_mut();
        let path = CString::new(dir.to_str().unwrap()).unwrap();
        // SAFETY: the calls follow lmdb.h; every pointer passed is valid for the call.
        unsafe {
            assert_eq!((api.env_create)(&mut env), 0);
            assert_eq!((api.env_set_maxdbs)(env, 8), 0);
            assert_eq!((api.env_set_mapsize)(env, 64 << 20), 0);
            // NOTLS: the sequence keeps several read txns in one thread.
            assert_eq!((api.env_open)(env, path.as_ptr(), NOTLS, 0o644), 0);
            let mut txn = std::ptr::null_mut();
            assert_eq!((api.txn_begin)(env, std::ptr::null_mut(), 0, &mut txn), 0);
            let mut dbis = Vec::new();
            for (name, flags) in DBS {
                let name = CString::new(name).unwrap();
                let mut dbi = 0;
                assert_eq!(
                    (api.dbi_open)(txn, name.as_ptr(), flags | CREATE, &mut dbi),
                    0
                );
                dbis.push(dbi);
            }
            assert_eq!((api.txn_commit)(txn), 0);
            Side {
                api,
                env,
                dbis,
                txns: Vec::new(),
                cursors: Vec::new(),
                indeterminate: Vec::new(),
                marks_before: Vec::new(),
                stale_values: Vec::new(),
                foreign_writes: Vec::new(),
                readers: Vec::new(),
            }
        }
    }

    fn outcome(rc: c_int, key: Option<Bytes>, data: Option<Bytes>) -> Outcome {
        if rc != 0 {
            return Outcome {
                rc,
                key: None,
                data: None,
            };
        }
        Outcome { rc, key, data }
    }

    /// Applies `op`; the outcome is compared with the other engine's.
    fn apply(&mut self, op: &Op) -> Outcome {
        let a = self.api;
        let txn = self.txns.last().copied().unwrap_or(std::ptr::null_mut());
        // SAFETY: every handle passed is live (the sequence tracks what each call frees),
        // and every MDB_val points at memory valid for the call.
        unsafe {
            match op {
                Op::BeginWrite => {
                    let mut t = std::ptr::null_mut();
                    let rc = (a.txn_begin)(self.env, std::ptr::null_mut(), 0, &mut t);
                    if rc == 0 {
                        self.txns.push(t);
                    }
                    Self::outcome(rc, None, None)
                }
                Op::BeginNested => {
                    let mut t = std::ptr::null_mut();
                    let rc = (a.txn_begin)(self.env, txn, 0, &mut t);
                    if rc == 0 {
                        self.txns.push(t);
                        self.marks_before.push([
                            self.indeterminate.clone(),
                            self.stale_values.clone(),
                            self.foreign_writes.clone(),
                        ]);
                    }
                    Self::outcome(rc, None, None)
                }
                Op::EndTxn { commit } => {
                    let level = self.txns.len();
                    let t = self.txns.pop().unwrap();
                    // Cursors opened at this level are freed with the txn (and their
                    // addresses may come back from malloc for new cursors).
                    let freed: Vec<Ptr> = self
                        .cursors
                        .iter()
                        .filter(|&&(_, l, _)| l >= level)
                        .map(|&(p, _, _)| p)
                        .collect();
                    self.indeterminate.retain(|p| !freed.contains(p));
                    self.stale_values.retain(|p| !freed.contains(p));
                    self.foreign_writes.retain(|p| !freed.contains(p));
                    self.cursors.retain(|&(_, l, _)| l < level);
                    if level > 1 {
                        let [indeterminate, stale_values, foreign_writes] =
                            self.marks_before.pop().unwrap();
                        if *commit {
                            // The parent's cursors come back from the nested txn with the
                            // state they reached in it; LMDB's values cursors were seen to
                            // be unusable afterwards in some cases (a delete through one
                            // gave EINVAL). Compared again once positioned.
                            for &(c, _, _) in &self.cursors {
                                if !self.indeterminate.contains(&c) {
                                    self.indeterminate.push(c);
                                }
                            }
                        } else {
                            for &(c, _, _) in &self.cursors {
                                for (marks, before) in [
                                    (&mut self.indeterminate, &indeterminate),
                                    (&mut self.stale_values, &stale_values),
                                    (&mut self.foreign_writes, &foreign_writes),
                                ] {
                                    marks.retain(|&p| p != c);
                                    if before.contains(&c) {
                                        marks.push(c);
                                    }
                                }
                            }
                        }
                    }
                    let rc = if *commit {
                        (a.txn_commit)(t)
                    } else {
                        (a.txn_abort)(t);
                        0
                    };
                    Self::outcome(rc, None, None)
                }
                Op::Put {
                    db,
                    key,
                    value,
                    flags,
                } => {
                    let mut k = in_val(key);
                    let mut v = in_val(value);
                    let rc = (a.put)(txn, self.dbis[*db], &mut k, &mut v, *flags);
                    // Also after a refused put: a refused APPENDDUP still turned a single
                    // value into a set in LMDB (and fixed up the other cursors).
                    if rc == 0 || rc == -30799 {
                        self.after_put(*db, None);
                    }
                    if rc == 0 && flags & RESERVE != 0 {
                        std::ptr::copy_nonoverlapping(
                            value.as_ptr(),
                            v.data.cast::<u8>(),
                            value.len(),
                        );
                        return Self::outcome(rc, None, None);
                    }
                    put_outcome(rc, *flags, &v, value)
                }
                Op::Del { db, key, value } => {
                    let mut k = in_val(key);
                    let rc = match value {
                        Some(value) => {
                            let mut v = in_val(value);
                            (a.del)(txn, self.dbis[*db], &mut k, &mut v)
                        }
                        None => (a.del)(txn, self.dbis[*db], &mut k, std::ptr::null_mut()),
                    };
                    if rc == 0 {
                        self.written(*db, None);
                    }
                    Self::outcome(rc, None, None)
                }
                Op::Get { db, key } => {
                    let mut k = in_val(key);
                    let mut v = unset();
                    let rc = (a.get)(txn, self.dbis[*db], &mut k, &mut v);
                    Self::outcome(rc, None, read_back(&v, None))
                }
                Op::Drop { db } => {
                    let rc = (a.drop)(txn, self.dbis[*db], 0);
                    if rc == 0 {
                        self.written(*db, None);
                    }
                    Self::outcome(rc, None, None)
                }
                Op::Stat { db } => {
                    let mut s = Stat::default();
                    let rc = (a.stat)(txn, self.dbis[*db], &mut s);
                    Self::outcome(rc, None, Some(Bytes(s.entries.to_le_bytes().to_vec())))
                }
                Op::CursorOpen { db } => {
                    let mut c = std::ptr::null_mut();
                    let rc = (a.cursor_open)(txn, self.dbis[*db], &mut c);
                    if rc == 0 {
                        self.indeterminate.retain(|&p| p != c);
                        self.stale_values.retain(|&p| p != c);
                        self.foreign_writes.retain(|&p| p != c);
                        self.cursors.push((c, self.txns.len(), *db));
                        // A fresh cursor is positioned at once: see
                        // `leaves_cursor_indeterminate` for LMDB's unpositioned ones.
                        let (mut k, mut v) = (unset(), unset());
                        let first = (a.cursor_get)(c, &mut k, &mut v, 0);
                        if first != 0 {
                            self.indeterminate.push(c);
                        }
                        return Self::outcome(first, read_back(&k, None), read_back(&v, None));
                    }
                    Self::outcome(rc, None, None)
                }
                Op::CursorClose { which } => {
                    let (c, level, _) = self.cursors[*which % self.cursors.len()];
                    // A cursor lent to a nested txn is not freed by close (LMDB ignores it).
                    if level == self.txns.len() {
                        (a.cursor_close)(c);
                        self.cursors.retain(|&(p, _, _)| p != c);
                        self.indeterminate.retain(|&p| p != c);
                        self.stale_values.retain(|&p| p != c);
                        self.foreign_writes.retain(|&p| p != c);
                    }
                    Self::outcome(0, None, None)
                }
                Op::CursorGet {
                    which,
                    op,
                    key,
                    value,
                } => {
                    let (c, _, db) = self.cursors[*which % self.cursors.len()];
                    let value = &fit_value(db, value);
                    let positioning = matches!(op, 0 | 2 | 3 | 6 | 15..=17);
                    if !positioning && self.indeterminate.contains(&c)
                        || *op == 5 && self.stale_values.contains(&c)
                    {
                        return Self::outcome(0, None, None);
                    }
                    if positioning {
                        self.stale_values.retain(|&p| p != c);
                        self.foreign_writes.retain(|&p| p != c);
                    }
                    let (mut k, mut v) = match op {
                        2 | 3 => (in_val(key), in_val(value)),
                        15..=17 => (in_val(key), unset()),
                        _ => (unset(), unset()),
                    };
                    let rc = (a.cursor_get)(c, &mut k, &mut v, *op);
                    self.indeterminate.retain(|&p| p != c);
                    if leaves_cursor_indeterminate(*op, rc) {
                        self.indeterminate.push(c);
                    }
                    let (got_key, got_value) = (
                        read_back(&k, Some(&key[..])),
                        read_back(&v, Some(&value[..])),
                    );
                    // NEXT, NEXT_NODUP, PREV, PREV_NODUP onto a key with one value: LMDB sets
                    // up the values cursor only for a key with several, and keeps the one
                    // of the key it left (GET_MULTIPLE then returns that key's values).
                    if rc == 0
                        && matches!(op, 8 | 11 | 12 | 14)
                        && DBS[db].1 & DUPSORT != 0
                        && got_key
                            .as_ref()
                            .is_some_and(|k| self.value_count(db, k) == 1)
                        && !self.stale_values.contains(&c)
                    {
                        self.stale_values.push(c);
                    }
                    Self::outcome(rc, got_key, got_value)
                }
                Op::CursorPut {
                    which,
                    key,
                    value,
                    flags,
                } => {
                    let (c, _, db) = self.cursors[*which % self.cursors.len()];
                    if self.indeterminate.contains(&c) {
                        // LMDB's APPEND looks at the last item through the cursor's page
                        // when the cursor is at its end: position-dependent too.
                        return Self::outcome(0, None, None);
                    }
                    if *flags == CURRENT && DBS[db].1 & DUPSORT != 0 {
                        // LMDB overwrites the value in place even where it no longer sorts
                        // there (its documented contract is that it must); not compared.
                        return Self::outcome(0, None, None);
                    }
                    // CURRENT with another key than the cursor's breaks LMDB's order (it
                    // writes the given key into the node): it gets the cursor's key.
                    let mut current_key = None;
                    if *flags == CURRENT {
                        let (mut k, mut v) = (unset(), unset());
                        if (a.cursor_get)(c, &mut k, &mut v, 4) != 0 {
                            return Self::outcome(0, None, None);
                        }
                        current_key = read_back(&k, None);
                    }
                    let key: &[u8] = current_key.as_deref().unwrap_or(key);
                    let value = fit_value(db, value);
                    let mut k = in_val(key);
                    let mut v = in_val(&value);
                    let rc = (a.cursor_put)(c, &mut k, &mut v, *flags);
                    // Also after a refused put: a refused APPENDDUP still turned a single
                    // value into a set in LMDB (and fixed up the other cursors).
                    if rc == 0 || rc == -30799 {
                        self.after_put(db, Some(c));
                    }
                    put_outcome(rc, *flags, &v, &value)
                }
                Op::CursorPutMultiple {
                    which,
                    key,
                    values,
                    flags,
                } => {
                    let (c, _, db) = self.cursors[*which % self.cursors.len()];
                    if self.indeterminate.contains(&c) {
                        return Self::outcome(0, None, None); // LMDB would misread the array
                    }
                    let fixed = DBS[db].1 & DUPFIXED != 0;
                    if fixed && self.value_count(db, key) < 2 {
                        // Under a key without a set of values yet, LMDB stores the first
                        // value only and reports 0 stored; ferrocore stores them all. Not
                        // compared.
                        return Self::outcome(0, None, None);
                    }
                    let mut sorted = values.clone();
                    sorted.sort_unstable();
                    sorted.dedup();
                    let mut k = in_val(key);
                    let mut vals = [
                        Val {
                            size: 4,
                            data: sorted.as_ptr() as *mut c_void,
                        },
                        Val {
                            size: sorted.len(),
                            data: std::ptr::null_mut(),
                        },
                    ];
                    let rc = (a.cursor_put)(c, &mut k, vals.as_mut_ptr(), MULTIPLE | flags);
                    // Also after a refused put: a refused APPENDDUP still turned a single
                    // value into a set in LMDB (and fixed up the other cursors); NODUPDATA
                    // stops at a value already there, after storing those before it.
                    if fixed && (rc == 0 || rc == -30799) {
                        self.after_put(db, Some(c));
                    }
                    // On every return (MDB_INCOMPATIBLE without DUPFIXED, MDB_KEYEXIST under
                    // NODUPDATA): the count stored and how far `mv_data` moved.
                    let moved = (vals[0].data as usize - sorted.as_ptr() as usize) / 4;
                    let mut report = vals[1].size.to_le_bytes().to_vec();
                    report.extend_from_slice(&moved.to_le_bytes());
                    Outcome {
                        rc,
                        key: None,
                        data: Some(Bytes(report)),
                    }
                }
                Op::CursorDel { which, flags } => {
                    let (c, _, db) = self.cursors[*which % self.cursors.len()];
                    if self.indeterminate.contains(&c) {
                        return Self::outcome(0, None, None);
                    }
                    let rc = (a.cursor_del)(c, *flags);
                    if rc == 0 {
                        if self.foreign_writes.contains(&c) && !self.indeterminate.contains(&c) {
                            self.indeterminate.push(c);
                        }
                        self.written(db, Some(c));
                    }
                    // In a DUPSORT DB, LMDB leaves the cursor's values cursor with the page
                    // and index of the deleted item: PREV_DUP, NEXT and a further delete
                    // were seen to return or remove another value than the one the cursor
                    // stands on (even bytes of a freed buffer). ferrocore stands where the
                    // documentation says. Compared again once positioned.
                    if rc == 0 && !self.stale_values.contains(&c) {
                        self.stale_values.push(c);
                    }
                    if rc == 0 && DBS[db].1 & DUPSORT != 0 && !self.indeterminate.contains(&c) {
                        self.indeterminate.push(c);
                    }
                    if rc == 0 && *flags == NODUPDATA && !self.indeterminate.contains(&c) {
                        // After deleting a key with all its values, LMDB's values cursor
                        // keeps an index from the deleted key: the next PREV was seen to
                        // return a value of the key after it, and the next delete to remove
                        // another value than the first. ferrocore stands on the next key's
                        // first value, as documented. Compared again once positioned.
                        self.indeterminate.push(c);
                    }
                    Self::outcome(rc, None, None)
                }
                Op::CursorCount { which } => {
                    let (c, _, _) = self.cursors[*which % self.cursors.len()];
                    if self.indeterminate.contains(&c) || self.stale_values.contains(&c) {
                        return Self::outcome(0, None, None);
                    }
                    let mut n = 0usize;
                    let rc = (a.cursor_count)(c, &mut n);
                    Self::outcome(rc, None, Some(Bytes(n.to_le_bytes().to_vec())))
                }
                Op::ReaderBegin { db } => {
                    let mut t = std::ptr::null_mut();
                    let rc = (a.txn_begin)(self.env, std::ptr::null_mut(), RDONLY, &mut t);
                    assert_eq!(rc, 0);
                    let mut c = std::ptr::null_mut();
                    let rc = (a.cursor_open)(t, self.dbis[*db], &mut c);
                    assert_eq!(rc, 0);
                    self.readers.push((t, c, *db));
                    self.indeterminate.retain(|&p| p != c);
                    let (mut k, mut v) = (unset(), unset());
                    let first = (a.cursor_get)(c, &mut k, &mut v, 0);
                    if first != 0 {
                        self.indeterminate.push(c);
                    }
                    Self::outcome(first, read_back(&k, None), read_back(&v, None))
                }
                Op::ReaderGet { which, op, key } => {
                    let (_, c, _) = self.readers[*which % self.readers.len()];
                    let positioning = matches!(op, 0 | 6 | 15..=17);
                    if !positioning && self.indeterminate.contains(&c) {
                        return Self::outcome(0, None, None);
                    }
                    let (mut k, mut v) = match op {
                        15..=17 => (in_val(key), unset()),
                        _ => (unset(), unset()),
                    };
                    let rc = (a.cursor_get)(c, &mut k, &mut v, *op);
                    self.indeterminate.retain(|&p| p != c);
                    if leaves_cursor_indeterminate(*op, rc) {
                        self.indeterminate.push(c);
                    }
                    Self::outcome(rc, read_back(&k, Some(&key[..])), read_back(&v, None))
                }
                Op::ReaderEnd { which } => {
                    let i = *which % self.readers.len();
                    let (t, c, _) = self.readers.remove(i);
                    self.indeterminate.retain(|&p| p != c);
                    (a.cursor_close)(c);
                    (a.txn_abort)(t);
                    Self::outcome(0, None, None)
                }
            }
        }
    }

    /// After a write to `db` through `writer` (a cursor, or `None` for the txn), see
    /// `foreign_writes`.
    fn written(&mut self, db: usize, writer: Option<Ptr>) {
        self.foreign_writes.retain(|&p| Some(p) != writer);
        for &(c, _, cdb) in &self.cursors {
            if cdb == db && Some(c) != writer && !self.foreign_writes.contains(&c) {
                self.foreign_writes.push(c);
            }
        }
    }

    /// Entries in `db` in the current write txn.
    fn entries(&self, db: usize) -> u64 {
        let mut st = Stat::default();
        let txn = *self.txns.last().expect("a write txn");
        // SAFETY: as in `apply`.
        assert_eq!(unsafe { (self.api.stat)(txn, self.dbis[db], &mut st) }, 0);
        st.entries as u64
    }

    /// Marks every cursor on `db` as not comparable until positioned again.
    fn unsettle(&mut self, db: usize) {
        self.unsettle_others(db, None);
    }

    /// Marks the cursors on `db` other than the one at index `except` as not comparable.
    fn unsettle_others(&mut self, db: usize, except: Option<usize>) {
        for (i, &(c, _, cdb)) in self.cursors.iter().enumerate() {
            if cdb == db && Some(i) != except && !self.indeterminate.contains(&c) {
                self.indeterminate.push(c);
            }
        }
    }

    /// Number of values `key` has in `db` in the current write txn (0 if absent).
    fn value_count(&self, db: usize, key: &[u8]) -> usize {
        let a = self.api;
        let txn = *self.txns.last().expect("a write txn");
        let mut n = 0;
        // SAFETY: as in `apply`; the cursor is closed here.
        unsafe {
            let mut c = std::ptr::null_mut();
            assert_eq!((a.cursor_open)(txn, self.dbis[db], &mut c), 0);
            let mut k = in_val(key);
            let mut v = unset();
            if (a.cursor_get)(c, &mut k, &mut v, 15) == 0 {
                assert_eq!((a.cursor_count)(c, &mut n), 0);
            }
            (a.cursor_close)(c);
        }
        n
    }

    /// After a put (whatever its outcome) through `putter` (a cursor, or `None` for the
    /// txn): records the write for `foreign_writes`; in a DUPSORT DB, moreover, the other
    /// cursors on it are not compared until positioned again. When the put changes the form
    /// of a key's values (a single value becoming a set, a sub-page becoming a sub-DB), LMDB
    /// points the other cursors on that key at the first value with a copy of the putting
    /// cursor's value-DB record (`mdb_xcursor_init2`); a delete through such a cursor was
    /// seen to remove every value of the key. ferrocore keeps them on their value.
    fn after_put(&mut self, db: usize, putter: Option<Ptr>) {
        self.written(db, putter);
        if DBS[db].1 & DUPSORT == 0 {
            return;
        }
        for &(c, _, cdb) in &self.cursors {
            if cdb == db && Some(c) != putter && !self.indeterminate.contains(&c) {
                self.indeterminate.push(c);
            }
        }
    }

    /// Every key/value pair of `db` as the current write txn (or, without one, the latest
    /// snapshot) sees it, read with a cursor of its own.
    fn contents(&self, db: usize) -> Vec<(Bytes, Bytes)> {
        let a = self.api;
        let mut items = Vec::new();
        // SAFETY: as in `apply`; the cursor and any txn begun here are ended here.
        unsafe {
            let (txn, own) = match self.txns.last() {
                Some(&t) => (t, false),
                None => {
                    let mut t = std::ptr::null_mut();
                    assert_eq!(
                        (a.txn_begin)(self.env, std::ptr::null_mut(), RDONLY, &mut t),
                        0
                    );
                    (t, true)
                }
            };
            let mut c = std::ptr::null_mut();
            assert_eq!((a.cursor_open)(txn, self.dbis[db], &mut c), 0);
            let dupsort = DBS[db].1 & DUPSORT != 0;
            let mut op = 0; // MDB_FIRST, then MDB_NEXT
            loop {
                let (mut k, mut v) = (unset(), unset());
                if (a.cursor_get)(c, &mut k, &mut v, op) != 0 {
                    break;
                }
                let key = read_back(&k, None).unwrap();
                let value = read_back(&v, None).unwrap();
                if dupsort && op != 9 {
                    // On each key's first value: its form. MDB_FIRST_DUP returns the key
                    // only for a single plain value (not a set of values, even of one).
                    let (mut k2, mut v2) = (unset(), unset());
                    assert_eq!((a.cursor_get)(c, &mut k2, &mut v2, 1), 0);
                    let form = if read_back(&k2, None).is_some() {
                        "plain"
                    } else {
                        "set"
                    };
                    items.push((key.clone(), Bytes(form.as_bytes().to_vec())));
                }
                items.push((key, value));
                // In a DUPSORT DB: the key's values (NEXT_DUP), then the next key.
                op = if dupsort {
                    let (mut k3, mut v3) = (unset(), unset());
                    if (a.cursor_get)(c, &mut k3, &mut v3, 9) == 0 {
                        items.push((Bytes(Vec::new()), read_back(&v3, None).unwrap()));
                        loop {
                            let (mut k4, mut v4) = (unset(), unset());
                            if (a.cursor_get)(c, &mut k4, &mut v4, 9) != 0 {
                                break;
                            }
                            items.push((Bytes(Vec::new()), read_back(&v4, None).unwrap()));
                        }
                    }
                    11 // MDB_NEXT_NODUP
                } else {
                    8
                };
            }
            (a.cursor_close)(c);
            if own {
                (a.txn_abort)(txn);
            }
        }
        items
    }

    fn close(mut self) {
        // SAFETY: the handles are live; ending the txns frees their cursors.
        unsafe {
            for (t, c, _) in self.readers.drain(..) {
                (self.api.cursor_close)(c);
                (self.api.txn_abort)(t);
            }
            if let Some(&root) = self.txns.first() {
                (self.api.txn_abort)(root);
            }
            (self.api.env_close)(self.env);
        }
    }
}

/// `value` made fit for DB `db`: DUPFIXED values all have 4 bytes (LMDB does not check
/// the size of every value, and mixing sizes breaks its pages).
fn fit_value(db: usize, value: &Bytes) -> Bytes {
    if DBS[db].1 & DUPFIXED == 0 || value.len() == 4 {
        return value.clone();
    }
    let mut v = value.0.clone();
    v.resize(4, 0);
    Bytes(v)
}

/// True if a failed `op` leaves the cursor where the two engines differ by design: LMDB
/// leaves a cursor whose SET or GET_BOTH search failed at the search's insertion point
/// (still "initialized" if it was, so GET_CURRENT or NEXT then act from there), ferrocore
/// leaves it unpositioned. The same holds for a cursor never positioned: LMDB's
/// `mdb_cursor_open` on a DB the txn has not used yet marks the cursor initialized at the
/// root page (so `mdb_cursor_del` deletes the first item, or fails with MDB_CORRUPTED on a
/// branch page), where ferrocore answers EINVAL. Until such a cursor is positioned, moves
/// that depend on its place are not compared (noted in issue 5).
fn leaves_cursor_indeterminate(op: c_uint, rc: c_int) -> bool {
    rc != 0 && matches!(op, 2 | 3 | 15..=17)
}

fn run_sequence(seed: u64, steps: usize) {
    let lib = ferrocore_library();
    let real_dir = tempfile::tempdir().unwrap();
    let ours_dir = tempfile::tempdir().unwrap();
    let mut real = Side::open(real_api(), real_dir.path());
    let mut ours = Side::open(ferrocore_api(&lib), ours_dir.path());
    let mut rng = Rng(seed);
    let mut log: Vec<String> = Vec::new();
    for step in 0..steps {
        let op = generate(
            &mut rng,
            !real.txns.is_empty(),
            real.txns.len(),
            real.cursors.len(),
            real.readers.len(),
        );
        let deleter = match &op {
            Op::CursorDel { which, .. } if !real.cursors.is_empty() => {
                Some(which % real.cursors.len())
            }
            _ => None,
        };
        let deleting = match &op {
            Op::Del { db, .. } => Some(*db),
            Op::CursorDel { .. } => deleter.map(|c| real.cursors[c].2),
            _ => None,
        };
        let want = real.apply(&op);
        let got = ours.apply(&op);
        if let Some(db) = deleting {
            if want.rc == 0 && real.entries(db) == 0 {
                // A delete emptied the DB: the cursors whose item it was are unpositioned
                // and marked deleted. LMDB's MDB_NEXT/MDB_PREV then start again from the
                // first/last item written since (py-lmdb issue #388: a loop that deletes
                // and re-puts the only key never ends); ferrocore's find nothing, see
                // `cursor_whose_db_another_handle_emptied`. Compared again once positioned.
                real.unsettle(db);
                ours.unsettle(db);
            }
            if want.rc == 0 && DBS[db].1 & DUPSORT != 0 {
                // The other cursors on a DUPSORT DB: LMDB's fix-ups after a delete leave
                // their values cursor as the deleted key had it; ferrocore finds their item
                // again. Compared again once they are positioned. (In the other DBs they
                // are compared: both libraries keep them on their items, or on the item
                // that followed a deleted one, through every later write.)
                real.unsettle_others(db, deleter);
                ours.unsettle_others(db, deleter);
            }
        }
        log.push(format!(
            "{step}: [depth {} cursors {}] {op:?} -> {want:?}",
            real.txns.len(),
            real.cursors.len()
        ));
        if want != got {
            let start = log.len().saturating_sub(60);
            panic!(
                "seed {seed}, step {step}: LMDB and ferrocore differ\n  LMDB:      {want:?}\n  ferrocore: {got:?}\ncursors' DBs: {:?}\nlast steps:\n{}",
                real.cursors.iter().map(|c| DBS[c.2].0).collect::<Vec<_>>(),
                log[start..].join("\n")
            );
        }
        assert_eq!(real.txns.len(), ours.txns.len());
        assert_eq!(real.cursors.len(), ours.cursors.len());
        if step % 10 == 9 || matches!(op, Op::EndTxn { .. }) {
            for (db, (name, _)) in DBS.iter().enumerate() {
                let (want, got) = (real.contents(db), ours.contents(db));
                if want != got {
                    let start = log.len().saturating_sub(30);
                    panic!(
                        "seed {seed}, after step {step}: DB {name} differs\n  LMDB:      {want:?}\n  ferrocore: {got:?}\nlast steps:\n{}",
                        log[start..].join("\n")
                    );
                }
            }
        }
    }
    real.close();
    ours.close();
}

/// 100 sequences by default; `FERROCORE_DIFF_SEEDS=2000` runs more (400 take about 25 s
/// in a release build).
#[test]
fn random_sequences_give_the_same_answers_as_lmdb() {
    let n: u64 = std::env::var("FERROCORE_DIFF_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    for seed in 1..=n {
        run_sequence(seed, 3000);
    }
}

/// One step of [`cursor_script`].
#[derive(Clone, Copy)]
enum Step<'a> {
    /// `mdb_cursor_get` with an op and, for the ops that take them, a key and a value.
    Get(c_uint, Option<&'a str>, Option<&'a str>),
    /// `mdb_cursor_del` with flags.
    Del(c_uint),
    /// `mdb_cursor_put` of a key and value with flags.
    Put(&'a str, &'a str, c_uint),
    /// `mdb_cursor_count`.
    Count,
    /// `mdb_put` of a key and value through the txn (another handle than the cursor).
    TxnPut(&'a str, &'a str),
    /// `mdb_del` of a key through the txn.
    TxnDel(&'a str),
}

const OP_FIRST: c_uint = 0;
const OP_FIRST_DUP: c_uint = 1;
const OP_GET_BOTH: c_uint = 2;
const OP_GET_CURRENT: c_uint = 4;
const OP_LAST_DUP: c_uint = 7;
const OP_NEXT: c_uint = 8;
const OP_NEXT_DUP: c_uint = 9;
const OP_NEXT_NODUP: c_uint = 11;
const OP_PREV: c_uint = 12;
const OP_SET: c_uint = 15;

/// Stores `pairs` in a new DB with `flags` through `api`, then runs `steps` on one cursor of
/// a write txn (aborted): each step's answer as text (`k=v`, `count n`, `deleted`, `put`,
/// `NOTFOUND`, `EINVAL`).
fn cursor_script(
    api: Api,
    dir: &Path,
    flags: c_uint,
    pairs: &[(&str, &str)],
    steps: &[Step<'_>],
) -> Vec<String> {
    let path = CString::new(dir.to_str().unwrap()).unwrap();
    let name = CString::new("dups").unwrap();
    let text = |b: Option<Bytes>| {
        String::from_utf8_lossy(&b.map(|b| b.0).unwrap_or_default()).into_owned()
    };
    // SAFETY: the calls follow lmdb.h; every pointer passed is valid for the call, and the
    // bytes read back are read before the next call.
    unsafe {
        let (mut env, mut txn, mut dbi, mut c) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
        );
        assert_eq!((api.env_create)(&mut env), 0);
        assert_eq!((api.env_set_maxdbs)(env, 2), 0);
        assert_eq!((api.env_open)(env, path.as_ptr(), 0, 0o644), 0);
        assert_eq!((api.txn_begin)(env, std::ptr::null_mut(), 0, &mut txn), 0);
        assert_eq!(
            (api.dbi_open)(txn, name.as_ptr(), flags | CREATE, &mut dbi),
            0
        );
        for (k, v) in pairs {
            let (mut kv, mut vv) = (in_val(k.as_bytes()), in_val(v.as_bytes()));
            assert_eq!((api.put)(txn, dbi, &mut kv, &mut vv, 0), 0);
        }
        assert_eq!((api.txn_commit)(txn), 0);
        assert_eq!((api.txn_begin)(env, std::ptr::null_mut(), 0, &mut txn), 0);
        assert_eq!((api.cursor_open)(txn, dbi, &mut c), 0);
        let answers = steps
            .iter()
            .map(|step| {
                let (rc, answer) = match *step {
                    Step::Get(op, key, value) => {
                        let mut k = key.map_or_else(unset, |s| in_val(s.as_bytes()));
                        let mut v = value.map_or_else(unset, |s| in_val(s.as_bytes()));
                        let rc = (api.cursor_get)(c, &mut k, &mut v, op);
                        let k = read_back(&k, None).or(key.map(|s| Bytes(s.as_bytes().to_vec())));
                        (rc, format!("{}={}", text(k), text(read_back(&v, None))))
                    }
                    Step::Del(flags) => ((api.cursor_del)(c, flags), "deleted".to_string()),
                    Step::Put(key, value, flags) => {
                        let (mut k, mut v) = (in_val(key.as_bytes()), in_val(value.as_bytes()));
                        (
                            (api.cursor_put)(c, &mut k, &mut v, flags),
                            "put".to_string(),
                        )
                    }
                    Step::Count => {
                        let mut n = 0usize;
                        let rc = (api.cursor_count)(c, &mut n);
                        (rc, format!("count {n}"))
                    }
                    Step::TxnPut(key, value) => {
                        let (mut k, mut v) = (in_val(key.as_bytes()), in_val(value.as_bytes()));
                        ((api.put)(txn, dbi, &mut k, &mut v, 0), "put".to_string())
                    }
                    Step::TxnDel(key) => {
                        let mut k = in_val(key.as_bytes());
                        let rc = (api.del)(txn, dbi, &mut k, std::ptr::null_mut());
                        (rc, "deleted".to_string())
                    }
                };
                match rc {
                    0 => answer,
                    -30798 => "NOTFOUND".to_string(),
                    libc::EINVAL => "EINVAL".to_string(),
                    rc => format!("error {rc}"),
                }
            })
            .collect();
        (api.cursor_close)(c);
        (api.txn_abort)(txn);
        (api.env_close)(env);
        answers
    }
}

/// After a delete that removes the key under a cursor, the cursor stands on the next key's
/// first value, through the C ABI too, however it came to the deleted key. LMDB keeps the
/// values cursor of a key it visited before when it came by NEXT or NEXT_NODUP to a key
/// with a single value (the reason the random sequences stop comparing a cursor after a
/// delete in a DUPSORT DB; `lmdb_keeps_a_stale_values_cursor_after_a_key_is_deleted` in the
/// ferrocore crate shows LMDB's answers); ferrocore's must be those of a fresh cursor.
/// A delete that empties the DB leaves the cursor unpositioned in both libraries.
#[test]
fn cursor_after_deleting_a_key() {
    let lib = ferrocore_library();
    let ours = ferrocore_api(&lib);
    let pairs = [
        ("a", "1"),
        ("a", "2"),
        ("a", "3"),
        ("b", "1"),
        ("c", "1"),
        ("c", "2"),
    ];
    let by_next = [
        Step::Get(OP_SET, Some("a"), None),
        Step::Get(OP_LAST_DUP, None, None),
        Step::Get(OP_NEXT, None, None),
        Step::Del(0),
        Step::Count,
        Step::Get(OP_GET_CURRENT, None, None),
        Step::Get(OP_NEXT, None, None),
    ];
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        cursor_script(ours, dir.path(), DUPSORT, &pairs, &by_next),
        // LAST_DUP hands back only the value, as LMDB's does on a key with several.
        ["a=1", "=3", "b=1", "deleted", "count 2", "c=1", "c=2"]
    );
    let by_next_nodup = [
        Step::Get(OP_GET_BOTH, Some("a"), Some("2")),
        Step::Get(OP_NEXT_NODUP, None, None),
        Step::Del(0),
        Step::Get(OP_NEXT, None, None),
        Step::Get(OP_NEXT, None, None),
        Step::Get(OP_PREV, None, None),
    ];
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        cursor_script(ours, dir.path(), DUPSORT, &pairs, &by_next_nodup),
        ["a=2", "b=1", "deleted", "c=1", "c=2", "c=1"]
    );

    // Emptying the DB: the same answers from both libraries.
    let only = [("k", "1"), ("k", "2")];
    let empty_it = |then: Step<'static>| {
        [
            Step::Get(OP_SET, Some("k"), None),
            Step::Del(NODUPDATA),
            then,
        ]
    };
    for (then, want) in [
        (Step::Get(OP_GET_CURRENT, None, None), "EINVAL"),
        (Step::Count, "EINVAL"),
        (Step::Get(OP_FIRST_DUP, None, None), "EINVAL"),
        (Step::Del(0), "EINVAL"),
        (Step::Get(OP_NEXT, None, None), "NOTFOUND"),
        (Step::Get(OP_PREV, None, None), "NOTFOUND"),
    ] {
        for api in [real_api(), ours] {
            let dir = tempfile::tempdir().unwrap();
            let got = cursor_script(api, dir.path(), DUPSORT, &only, &empty_it(then));
            assert_eq!(got, ["k=1", "deleted", want]);
        }
    }
}

/// When another handle deletes the item under a cursor, the cursor stands on the item
/// that followed; a key written afterwards between the two does not take its place (found
/// by the random sequences: ferrocore's cursors used to find their place only at their
/// next call, and deleted the new key). The same answers from both libraries, with and
/// without DUPSORT.
#[test]
fn cursor_keeps_the_follower_of_an_item_deleted_under_it() {
    let lib = ferrocore_library();
    let ours = ferrocore_api(&lib);
    let steps = [
        Step::Get(OP_SET, Some("a"), None),
        Step::TxnDel("a"),
        Step::TxnPut("b", "2"),
        Step::Del(0),
        Step::Get(OP_FIRST, None, None),
        Step::Get(OP_NEXT, None, None),
    ];
    for flags in [0, DUPSORT] {
        for api in [real_api(), ours] {
            let dir = tempfile::tempdir().unwrap();
            let got = cursor_script(api, dir.path(), flags, &[("a", "1"), ("c", "3")], &steps);
            assert_eq!(
                got,
                ["a=1", "deleted", "put", "deleted", "b=2", "NOTFOUND"],
                "flags {flags:#x}"
            );
        }
    }
}

/// A cursor that appended carries LMDB's end-of-data mark; another handle appends after its
/// item; the cursor deletes its item and now stands on the key appended after it. MDB_NEXT
/// returns that key in ferrocore, as after any delete; LMDB (0.9.70 here, Debian's 0.9.24
/// alike) still holds the end mark and answers NOTFOUND, so a delete-as-you-iterate loop
/// misses the key (see `Side::foreign_writes`). If LMDB's answer changes, LMDB was fixed
/// and that rule can go.
#[test]
fn cursor_after_another_handle_appended() {
    let lib = ferrocore_library();
    let steps = [
        Step::Put("b", "2", APPEND),
        Step::TxnPut("c", "3"),
        Step::Del(0),
        Step::Get(OP_NEXT, None, None),
    ];
    let run = |api| {
        let dir = tempfile::tempdir().unwrap();
        cursor_script(api, dir.path(), 0, &[("a", "1")], &steps)
    };
    assert_eq!(
        run(ferrocore_api(&lib)),
        ["put", "put", "deleted", "c=3"],
        "ferrocore"
    );
    assert_eq!(
        run(real_api()),
        ["put", "put", "deleted", "NOTFOUND"],
        "LMDB's answer changed: if it no longer misses the key, see Side::foreign_writes"
    );
}

/// Another handle deletes the only item, under a cursor, then writes new ones. The cursor
/// stands where its item was, marked deleted, and nothing follows or precedes it there:
/// every move answers NOTFOUND until it is positioned again. LMDB unpositions the cursor,
/// keeps the mark, and answers NOTFOUND only to MDB_NEXT_DUP; MDB_NEXT and MDB_PREV start
/// again from the first or last item, so a loop that deletes and re-puts the only key never
/// ends (py-lmdb issue #388, which py-lmdb fixed as ferrocore answers, in its patched LMDB).
/// If LMDB's answers here change, see the rule in `run_sequence`.
#[test]
fn cursor_whose_db_another_handle_emptied() {
    let lib = ferrocore_library();
    for (then, ours, lmdb) in [
        (Step::Get(OP_NEXT_DUP, None, None), "NOTFOUND", "NOTFOUND"),
        (Step::Get(OP_NEXT, None, None), "NOTFOUND", "b=2"),
        (Step::Get(OP_NEXT_NODUP, None, None), "NOTFOUND", "b=2"),
        (Step::Get(OP_PREV, None, None), "NOTFOUND", "b=2"),
    ] {
        for (api, want) in [(ferrocore_api(&lib), ours), (real_api(), lmdb)] {
            let steps = [
                Step::Get(OP_SET, Some("a"), None),
                Step::TxnDel("a"),
                Step::TxnPut("b", "2"),
                then,
            ];
            let dir = tempfile::tempdir().unwrap();
            let got = cursor_script(api, dir.path(), DUPSORT, &[("a", "1")], &steps);
            assert_eq!(got, ["a=1", "deleted", "put", want]);
        }
    }
}

/// What a read cursor's scan returns, as text: every item from `MDB_FIRST` by `MDB_NEXT`
/// to NOTFOUND, with a step back (`MDB_PREV`, `MDB_GET_CURRENT`, `MDB_NEXT`) every 37
/// items. A value is shown by its length and first and last bytes.
///
/// # Safety
/// `c` is an open cursor of `api` on a live read txn.
unsafe fn scan_text(api: Api, c: Ptr) -> Vec<String> {
    let mut out = Vec::new();
    let mut op = OP_FIRST;
    for i in 0.. {
        let ops: &[c_uint] = if i % 37 == 36 {
            &[OP_PREV, OP_GET_CURRENT, OP_NEXT]
        } else {
            &[op]
        };
        for &op in ops {
            let (mut k, mut v) = (unset(), unset());
            // SAFETY: the caller's contract; both vals are writable.
            let rc = unsafe { (api.cursor_get)(c, &mut k, &mut v, op) };
            if rc != 0 {
                out.push(format!("op {op}: rc {rc}"));
                return out;
            }
            let (k, v) = (
                read_back(&k, None).unwrap().0,
                read_back(&v, None).unwrap().0,
            );
            out.push(format!(
                "op {op}: {}={}:{:?}..{:?}",
                String::from_utf8_lossy(&k),
                v.len(),
                v.first(),
                v.last()
            ));
        }
        op = OP_NEXT;
    }
    unreachable!()
}

/// Read cursors' scans through the C ABI, against LMDB: over many leaves, with values
/// inline and on overflow pages, in a plain and a DUPSORT DB and a three-level one, on a
/// snapshot that a later commit changed (deletes and new keys), and with one cursor
/// carried across `mdb_txn_reset`/`mdb_txn_renew` and `mdb_cursor_renew` to the newer
/// snapshot. The answers must be LMDB's, step for step: ferrocore takes a shortcut for
/// `MDB_NEXT` on a read txn (`DetachedCursor::next_plain`), along a leaf and to the next
/// leaf of the same parent, which must give up on an overflow value, a DUPSORT DB, a leaf
/// whose next leaf has another parent, and a new snapshot.
#[test]
fn read_cursor_scans_match_lmdb_across_leaves_and_snapshots() {
    let lib = ferrocore_library();
    let run = |api: Api| -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = CString::new(dir.path().to_str().unwrap()).unwrap();
        let key = |i: usize| format!("key{:06}", i * 7 % 3001);
        let value = |i: usize| {
            let len = if i.is_multiple_of(97) {
                3000
            } else {
                8 + i % 60
            };
            vec![(i % 251) as u8; len]
        };
        let mut answers = Vec::new();
        // SAFETY: the calls follow lmdb.h; every pointer passed is valid for the call,
        // and the bytes read back are read before the next call.
        unsafe {
            let (mut env, mut txn, mut reader) = (
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            assert_eq!((api.env_create)(&mut env), 0);
            assert_eq!((api.env_set_maxdbs)(env, 4), 0);
            assert_eq!((api.env_set_mapsize)(env, 16 << 20), 0);
            assert_eq!((api.env_open)(env, path.as_ptr(), 0, 0o644), 0);
            assert_eq!((api.txn_begin)(env, std::ptr::null_mut(), 0, &mut txn), 0);
            let mut dbis = [0; 3];
            let names = [("plain", 0), ("dups", DUPSORT), ("wide", 0)];
            for (dbi, (name, flags)) in dbis.iter_mut().zip(names) {
                let name = CString::new(name).unwrap();
                assert_eq!((api.dbi_open)(txn, name.as_ptr(), flags | CREATE, dbi), 0);
            }
            for i in 0..3000 {
                let k = key(i);
                let (v, dup) = (value(i), format!("{}", i % 5));
                let (mut kv, mut vv) = (in_val(k.as_bytes()), in_val(&v));
                assert_eq!((api.put)(txn, dbis[0], &mut kv, &mut vv, 0), 0);
                for d in 0..=i % 3 {
                    let dup = format!("{dup}{d}");
                    let (mut kv, mut vv) = (in_val(k.as_bytes()), in_val(dup.as_bytes()));
                    assert_eq!((api.put)(txn, dbis[1], &mut kv, &mut vv, 0), 0);
                }
                // Six nodes a leaf: enough leaves for branch pages under the root.
                let wide = vec![(i % 251) as u8; 600];
                let (mut kv, mut vv) = (in_val(k.as_bytes()), in_val(&wide));
                assert_eq!((api.put)(txn, dbis[2], &mut kv, &mut vv, 0), 0);
            }
            let mut st = Stat::default();
            assert_eq!((api.stat)(txn, dbis[2], &mut st), 0);
            assert!(st.depth >= 3, "depth {}", st.depth);
            assert_eq!((api.txn_commit)(txn), 0);

            assert_eq!(
                (api.txn_begin)(env, std::ptr::null_mut(), RDONLY, &mut reader),
                0
            );
            let mut cursors = [std::ptr::null_mut(); 3];
            for (c, dbi) in cursors.iter_mut().zip(dbis) {
                assert_eq!((api.cursor_open)(reader, dbi, c), 0);
                answers.extend(scan_text(api, *c));
            }
            // A commit that changes most leaves, while the reader still sees the old ones.
            assert_eq!((api.txn_begin)(env, std::ptr::null_mut(), 0, &mut txn), 0);
            for i in 0..3000 {
                let k = key(i);
                let mut kv = in_val(k.as_bytes());
                if i % 3 == 0 {
                    let rc = (api.del)(txn, dbis[0], &mut kv, std::ptr::null_mut());
                    assert_eq!(rc, 0);
                } else if i % 3 == 1 {
                    let (k, v) = (format!("{k}+"), value(i + 1));
                    let (mut kv, mut vv) = (in_val(k.as_bytes()), in_val(&v));
                    assert_eq!((api.put)(txn, dbis[0], &mut kv, &mut vv, 0), 0);
                }
            }
            assert_eq!((api.txn_commit)(txn), 0);
            answers.extend(scan_text(api, cursors[0]));
            // The same cursor on the new snapshot, after a reset and renew.
            (api.txn_reset)(reader);
            assert_eq!((api.txn_renew)(reader), 0);
            for c in cursors {
                assert_eq!((api.cursor_renew)(reader, c), 0);
                answers.extend(scan_text(api, c));
                (api.cursor_close)(c);
            }
            (api.txn_abort)(reader);
            (api.env_close)(env);
        }
        answers
    };
    let (ours, lmdb) = (run(ferrocore_api(&lib)), run(real_api()));
    assert!(lmdb.len() > 4 * 3000, "{} answers", lmdb.len());
    assert_eq!(ours.len(), lmdb.len());
    for (i, (a, b)) in ours.iter().zip(&lmdb).enumerate() {
        assert_eq!(a, b, "answer {i}");
    }
}
