//! LMDB's C API, driven the same way on three libraries: LMDB built into this binary
//! (`lmdb-master-sys`), and, loaded at run time, Debian's `liblmdb.so.0` and ferrocore's
//! own `liblmdb.so` (its C ABI lane: the path the drop-in users take). Map sized up front,
//! NOSYNC or synced commits, MDB_APPEND for sorted loads, MDB_WRITEMAP for the WRITEMAP
//! variant, one read txn per read pass.

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_uint};
use std::path::{Path, PathBuf};
use std::ptr;

use lmdb_master_sys as ffi;

use super::{Config, Engine, INDEX_NAMES};
use crate::data::{IndexedEntry, Keys};

pub fn check(rc: i32, what: &str) {
    assert_eq!(rc, 0, "LMDB {what} failed: {rc}");
}

pub fn val(b: &[u8]) -> ffi::MDB_val {
    ffi::MDB_val {
        mv_size: b.len(),
        mv_data: b.as_ptr() as *mut _,
    }
}

fn empty() -> ffi::MDB_val {
    ffi::MDB_val {
        mv_size: 0,
        mv_data: ptr::null_mut(),
    }
}

/// LMDB's version string (the linked LMDB).
pub fn version() -> String {
    // SAFETY: mdb_version returns a static NUL-terminated string.
    unsafe {
        std::ffi::CStr::from_ptr(ffi::mdb_version(
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
        ))
        .to_string_lossy()
        .into_owned()
    }
}

type Env = *mut ffi::MDB_env;
type Txn = *mut ffi::MDB_txn;
type Cursor = *mut ffi::MDB_cursor;
type Val = ffi::MDB_val;

/// The calls the engine makes, as C function pointers of one library.
#[derive(Clone, Copy)]
pub struct Api {
    env_create: unsafe extern "C" fn(*mut Env) -> c_int,
    env_set_mapsize: unsafe extern "C" fn(Env, usize) -> c_int,
    env_set_maxdbs: unsafe extern "C" fn(Env, ffi::MDB_dbi) -> c_int,
    env_set_maxreaders: unsafe extern "C" fn(Env, c_uint) -> c_int,
    env_open: unsafe extern "C" fn(Env, *const c_char, c_uint, ffi::mdb_mode_t) -> c_int,
    env_close: unsafe extern "C" fn(Env),
    env_sync: unsafe extern "C" fn(Env, c_int) -> c_int,
    env_set_flags: unsafe extern "C" fn(Env, c_uint, c_int) -> c_int,
    txn_begin: unsafe extern "C" fn(Env, Txn, c_uint, *mut Txn) -> c_int,
    txn_commit: unsafe extern "C" fn(Txn) -> c_int,
    txn_abort: unsafe extern "C" fn(Txn),
    txn_reset: unsafe extern "C" fn(Txn),
    txn_renew: unsafe extern "C" fn(Txn) -> c_int,
    dbi_open: unsafe extern "C" fn(Txn, *const c_char, c_uint, *mut ffi::MDB_dbi) -> c_int,
    get: unsafe extern "C" fn(Txn, ffi::MDB_dbi, *mut Val, *mut Val) -> c_int,
    put: unsafe extern "C" fn(Txn, ffi::MDB_dbi, *mut Val, *mut Val, c_uint) -> c_int,
    del: unsafe extern "C" fn(Txn, ffi::MDB_dbi, *mut Val, *mut Val) -> c_int,
    cursor_open: unsafe extern "C" fn(Txn, ffi::MDB_dbi, *mut Cursor) -> c_int,
    cursor_close: unsafe extern "C" fn(Cursor),
    cursor_get: unsafe extern "C" fn(Cursor, *mut Val, *mut Val, ffi::MDB_cursor_op) -> c_int,
}

impl Api {
    /// The LMDB built into this binary.
    fn linked() -> Api {
        Api {
            env_create: ffi::mdb_env_create,
            env_set_mapsize: ffi::mdb_env_set_mapsize,
            env_set_maxdbs: ffi::mdb_env_set_maxdbs,
            env_set_maxreaders: ffi::mdb_env_set_maxreaders,
            env_open: ffi::mdb_env_open,
            env_close: ffi::mdb_env_close,
            env_sync: ffi::mdb_env_sync,
            env_set_flags: ffi::mdb_env_set_flags,
            txn_begin: ffi::mdb_txn_begin,
            txn_commit: ffi::mdb_txn_commit,
            txn_abort: ffi::mdb_txn_abort,
            txn_reset: ffi::mdb_txn_reset,
            txn_renew: ffi::mdb_txn_renew,
            dbi_open: ffi::mdb_dbi_open,
            get: ffi::mdb_get,
            put: ffi::mdb_put,
            del: ffi::mdb_del,
            cursor_open: ffi::mdb_cursor_open,
            cursor_close: ffi::mdb_cursor_close,
            cursor_get: ffi::mdb_cursor_get,
        }
    }

    /// The same calls from a shared library loaded at `path` (kept loaded by the caller).
    fn load(lib: &libloading::Library) -> Api {
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is the exported LMDB function of that name, whose C
                // signature (lmdb.h) is the field's type; the library outlives the engine.
                unsafe { *lib.get(concat!($name, "\0").as_bytes()).expect($name) }
            };
        }
        Api {
            env_create: sym!("mdb_env_create"),
            env_set_mapsize: sym!("mdb_env_set_mapsize"),
            env_set_maxdbs: sym!("mdb_env_set_maxdbs"),
            env_set_maxreaders: sym!("mdb_env_set_maxreaders"),
            env_open: sym!("mdb_env_open"),
            env_close: sym!("mdb_env_close"),
            env_sync: sym!("mdb_env_sync"),
            env_set_flags: sym!("mdb_env_set_flags"),
            txn_begin: sym!("mdb_txn_begin"),
            txn_commit: sym!("mdb_txn_commit"),
            txn_abort: sym!("mdb_txn_abort"),
            txn_reset: sym!("mdb_txn_reset"),
            txn_renew: sym!("mdb_txn_renew"),
            dbi_open: sym!("mdb_dbi_open"),
            get: sym!("mdb_get"),
            put: sym!("mdb_put"),
            del: sym!("mdb_del"),
            cursor_open: sym!("mdb_cursor_open"),
            cursor_close: sym!("mdb_cursor_close"),
            cursor_get: sym!("mdb_cursor_get"),
        }
    }
}

/// Which LMDB C library an engine drives.
#[derive(Clone, Copy, Debug)]
pub enum Library {
    /// LMDB built into this binary (`lmdb-master-sys`).
    Linked,
    /// Debian's `liblmdb.so.0` (LMDB 0.9.24 on the machines we measure).
    System,
    /// ferrocore's `liblmdb.so`, from `cargo build --release -p ferrocore-lmdb`.
    Ferrocore,
}

/// Where ferrocore's `liblmdb.so` is: `FERROCORE_LIBLMDB`, or beside this executable.
fn ferrocore_library_path() -> PathBuf {
    if let Some(p) = std::env::var_os("FERROCORE_LIBLMDB") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("own path");
    exe.parent().expect("target dir").join("liblmdb.so")
}

/// Loads `lib` (not `Linked`), or exits with what to do.
fn load_library(lib: Library) -> libloading::Library {
    let path = match lib {
        Library::System => PathBuf::from("/usr/lib/x86_64-linux-gnu/liblmdb.so.0"),
        _ => ferrocore_library_path(),
    };
    // SAFETY: loading an LMDB C library runs no initialisers that need anything from us.
    match unsafe { libloading::Library::new(&path) } {
        Ok(l) => l,
        Err(e) => {
            let how = match lib {
                Library::System => "apt-get install liblmdb0",
                _ => "cargo build --release -p ferrocore-lmdb (or set FERROCORE_LIBLMDB)",
            };
            eprintln!("cannot load {}: {e}\nto fix: {how}", path.display());
            std::process::exit(2);
        }
    }
}

pub struct Lmdb {
    api: Api,
    /// The loaded library the function pointers point into (`None`: linked in).
    _library: Option<libloading::Library>,
    env: *mut ffi::MDB_env,
    dbi: ffi::MDB_dbi,
    /// W7: the entries DB (named, as back-mdb's id2entry) and the index DBs.
    entries: ffi::MDB_dbi,
    indexes: Vec<ffi::MDB_dbi>,
}

// SAFETY: an MDB_env may be used from several threads, each with its own read txn (the
// harness never shares a txn between threads, and writes come from one thread).
unsafe impl Send for Lmdb {}
// SAFETY: see above.
unsafe impl Sync for Lmdb {}

impl Lmdb {
    pub fn open(dir: &Path, cfg: Config, writemap: bool, library: Library) -> Lmdb {
        let loaded = match library {
            Library::Linked => None,
            other => Some(load_library(other)),
        };
        let api = loaded.as_ref().map_or_else(Api::linked, Api::load);
        // SAFETY: plain use of LMDB's C API on handles created here, in the documented
        // order.
        unsafe {
            let mut env = ptr::null_mut();
            check((api.env_create)(&mut env), "env_create");
            // Room for the data at LMDB's worst fill (half-full pages after random
            // inserts) plus free-list churn.
            let map = cfg.data_bytes * 4 + (256 << 20);
            check((api.env_set_mapsize)(env, map as usize), "set_mapsize");
            check((api.env_set_maxdbs)(env, 16), "set_maxdbs");
            check((api.env_set_maxreaders)(env, 126), "set_maxreaders");
            let path = CString::new(dir.to_str().unwrap()).unwrap();
            let mut flags = if cfg.sync { 0 } else { ffi::MDB_NOSYNC };
            if writemap {
                flags |= ffi::MDB_WRITEMAP;
            }
            if super::no_readahead() {
                flags |= ffi::MDB_NORDAHEAD;
            }
            check((api.env_open)(env, path.as_ptr(), flags, 0o644), "env_open");
            let mut txn = ptr::null_mut();
            check(
                (api.txn_begin)(env, ptr::null_mut(), 0, &mut txn),
                "txn_begin",
            );
            let mut dbi = 0;
            check((api.dbi_open)(txn, ptr::null(), 0, &mut dbi), "dbi_open");
            let mut indexes = Vec::new();
            let mut entries = dbi;
            if cfg.indexes > 0 {
                let name = CString::new("id2entry").unwrap();
                check(
                    (api.dbi_open)(txn, name.as_ptr(), ffi::MDB_CREATE, &mut entries),
                    "dbi_open id2entry",
                );
            }
            for name in &INDEX_NAMES[..cfg.indexes] {
                let name = CString::new(*name).unwrap();
                let mut idx = 0;
                check(
                    (api.dbi_open)(
                        txn,
                        name.as_ptr(),
                        ffi::MDB_DUPSORT | ffi::MDB_CREATE,
                        &mut idx,
                    ),
                    "dbi_open index",
                );
                indexes.push(idx);
            }
            check((api.txn_commit)(txn), "commit");
            Lmdb {
                api,
                _library: loaded,
                env,
                dbi,
                entries,
                indexes,
            }
        }
    }

    fn begin(&self, flags: u32) -> *mut ffi::MDB_txn {
        let mut txn = ptr::null_mut();
        // SAFETY: env is open.
        check(
            unsafe { (self.api.txn_begin)(self.env, ptr::null_mut(), flags, &mut txn) },
            "txn_begin",
        );
        txn
    }
}

impl Drop for Lmdb {
    fn drop(&mut self) {
        // SAFETY: no txn is open when the engine is dropped.
        unsafe { (self.api.env_close)(self.env) }
    }
}

impl Engine for Lmdb {
    fn put_batch(&mut self, keys: Keys<'_>, value: &[u8], append: bool) {
        let flags = if append { ffi::MDB_APPEND } else { 0 };
        let txn = self.begin(0);
        // SAFETY: every MDB_val points at live memory for the duration of the call.
        unsafe {
            for k in keys.iter() {
                let mut kv = val(k);
                let mut vv = val(value);
                check(
                    (self.api.put)(txn, self.dbi, &mut kv, &mut vv, flags),
                    "put",
                );
            }
            check((self.api.txn_commit)(txn), "commit");
        }
    }

    fn delete_batch(&mut self, keys: Keys<'_>) {
        let txn = self.begin(0);
        // SAFETY: as in put_batch.
        unsafe {
            for k in keys.iter() {
                let mut kv = val(k);
                let rc = (self.api.del)(txn, self.dbi, &mut kv, ptr::null_mut());
                assert!(rc == 0 || rc == ffi::MDB_NOTFOUND, "LMDB del failed: {rc}");
            }
            check((self.api.txn_commit)(txn), "commit");
        }
    }

    fn get_all(&self, keys: Keys<'_>) -> u64 {
        let txn = self.begin(ffi::MDB_RDONLY);
        let mut found = 0u64;
        // SAFETY: as in put_batch; values are read before the txn ends.
        unsafe {
            for k in keys.iter() {
                let mut kv = val(k);
                let mut vv = empty();
                if (self.api.get)(txn, self.dbi, &mut kv, &mut vv) == 0 {
                    found += vv.mv_size as u64;
                }
            }
            (self.api.txn_abort)(txn);
        }
        found
    }

    fn get_each_in_own_txn(&self, keys: Keys<'_>, renew: bool) -> u64 {
        let mut found = 0u64;
        // SAFETY: as in get_all; each value is read before its txn is reset or ended.
        unsafe {
            let get = |txn: Txn, k: &[u8]| {
                let mut kv = val(k);
                let mut vv = empty();
                match (self.api.get)(txn, self.dbi, &mut kv, &mut vv) {
                    0 => vv.mv_size as u64,
                    _ => 0,
                }
            };
            if renew {
                let txn = self.begin(ffi::MDB_RDONLY);
                (self.api.txn_reset)(txn);
                for k in keys.iter() {
                    check((self.api.txn_renew)(txn), "txn_renew");
                    found += get(txn, k);
                    (self.api.txn_reset)(txn);
                }
                (self.api.txn_abort)(txn);
            } else {
                for k in keys.iter() {
                    let txn = self.begin(ffi::MDB_RDONLY);
                    found += get(txn, k);
                    (self.api.txn_abort)(txn);
                }
            }
        }
        found
    }

    fn get_parallel(&self, parts: &[Keys<'_>]) -> u64 {
        std::thread::scope(|s| {
            let handles: Vec<_> = parts
                .iter()
                .map(|&part| s.spawn(move || self.get_all(part)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        })
    }

    fn scan(&self) -> u64 {
        let txn = self.begin(ffi::MDB_RDONLY);
        let mut n = 0;
        // SAFETY: cursor and txn are closed before returning.
        unsafe {
            let mut cur = ptr::null_mut();
            check(
                (self.api.cursor_open)(txn, self.dbi, &mut cur),
                "cursor_open",
            );
            let mut kv = empty();
            let mut vv = empty();
            let mut rc = (self.api.cursor_get)(cur, &mut kv, &mut vv, ffi::MDB_FIRST);
            while rc == 0 {
                n += 1;
                rc = (self.api.cursor_get)(cur, &mut kv, &mut vv, ffi::MDB_NEXT);
            }
            (self.api.cursor_close)(cur);
            (self.api.txn_abort)(txn);
        }
        n
    }

    fn range_reads(&self, starts: Keys<'_>, len: usize) -> u64 {
        let txn = self.begin(ffi::MDB_RDONLY);
        let mut n = 0;
        // SAFETY: as in scan.
        unsafe {
            let mut cur = ptr::null_mut();
            check(
                (self.api.cursor_open)(txn, self.dbi, &mut cur),
                "cursor_open",
            );
            for k in starts.iter() {
                let mut kv = val(k);
                let mut vv = empty();
                let mut rc = (self.api.cursor_get)(cur, &mut kv, &mut vv, ffi::MDB_SET_RANGE);
                let mut i = 0;
                while rc == 0 && i < len {
                    n += 1;
                    i += 1;
                    if i < len {
                        rc = (self.api.cursor_get)(cur, &mut kv, &mut vv, ffi::MDB_NEXT);
                    }
                }
            }
            (self.api.cursor_close)(cur);
            (self.api.txn_abort)(txn);
        }
        n
    }

    fn indexed_batch(&mut self, entries: &[IndexedEntry], record: &[u8]) {
        let txn = self.begin(0);
        // SAFETY: as in put_batch.
        unsafe {
            for e in entries {
                let mut kv = val(&e.id);
                let mut vv = val(record);
                check(
                    (self.api.put)(txn, self.entries, &mut kv, &mut vv, ffi::MDB_APPEND),
                    "put main",
                );
                for (dbi, key) in self.indexes.iter().zip(&e.index_keys) {
                    let mut kv = val(key);
                    let mut vv = val(&e.id);
                    check((self.api.put)(txn, *dbi, &mut kv, &mut vv, 0), "put index");
                }
            }
            check((self.api.txn_commit)(txn), "commit");
        }
    }

    fn sync(&mut self) {
        // SAFETY: env is open.
        check(unsafe { (self.api.env_sync)(self.env, 1) }, "env_sync");
    }

    fn set_sync(&mut self, on: bool) {
        // SAFETY: env is open; MDB_NOSYNC may be changed at run time.
        check(
            unsafe { (self.api.env_set_flags)(self.env, ffi::MDB_NOSYNC, i32::from(!on)) },
            "set_flags",
        );
    }
}
