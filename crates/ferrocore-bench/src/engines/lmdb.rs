//! LMDB through its C API (`lmdb-master-sys`, which builds the library into this
//! binary): map sized up front, NOSYNC or synced commits, MDB_APPEND for sorted loads,
//! MDB_WRITEMAP for the WRITEMAP variant, one read txn per read pass.

use std::ffi::CString;
use std::path::Path;
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

/// LMDB's version string.
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

pub struct Lmdb {
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
    pub fn open(dir: &Path, cfg: Config, writemap: bool) -> Lmdb {
        // SAFETY: plain use of LMDB's C API on handles created here, in the documented
        // order.
        unsafe {
            let mut env = ptr::null_mut();
            check(ffi::mdb_env_create(&mut env), "env_create");
            // Room for the data at LMDB's worst fill (half-full pages after random
            // inserts) plus free-list churn.
            let map = cfg.data_bytes * 4 + (256 << 20);
            check(ffi::mdb_env_set_mapsize(env, map as usize), "set_mapsize");
            check(ffi::mdb_env_set_maxdbs(env, 16), "set_maxdbs");
            check(ffi::mdb_env_set_maxreaders(env, 126), "set_maxreaders");
            let path = CString::new(dir.to_str().unwrap()).unwrap();
            let mut flags = if cfg.sync { 0 } else { ffi::MDB_NOSYNC };
            if writemap {
                flags |= ffi::MDB_WRITEMAP;
            }
            check(
                ffi::mdb_env_open(env, path.as_ptr(), flags, 0o644),
                "env_open",
            );
            let mut txn = ptr::null_mut();
            check(
                ffi::mdb_txn_begin(env, ptr::null_mut(), 0, &mut txn),
                "txn_begin",
            );
            let mut dbi = 0;
            check(ffi::mdb_dbi_open(txn, ptr::null(), 0, &mut dbi), "dbi_open");
            let mut indexes = Vec::new();
            let mut entries = dbi;
            if cfg.indexes > 0 {
                let name = CString::new("id2entry").unwrap();
                check(
                    ffi::mdb_dbi_open(txn, name.as_ptr(), ffi::MDB_CREATE, &mut entries),
                    "dbi_open id2entry",
                );
            }
            for name in &INDEX_NAMES[..cfg.indexes] {
                let name = CString::new(*name).unwrap();
                let mut idx = 0;
                check(
                    ffi::mdb_dbi_open(
                        txn,
                        name.as_ptr(),
                        ffi::MDB_DUPSORT | ffi::MDB_CREATE,
                        &mut idx,
                    ),
                    "dbi_open index",
                );
                indexes.push(idx);
            }
            check(ffi::mdb_txn_commit(txn), "commit");
            Lmdb {
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
            unsafe { ffi::mdb_txn_begin(self.env, ptr::null_mut(), flags, &mut txn) },
            "txn_begin",
        );
        txn
    }
}

impl Drop for Lmdb {
    fn drop(&mut self) {
        // SAFETY: no txn is open when the engine is dropped.
        unsafe { ffi::mdb_env_close(self.env) }
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
                check(ffi::mdb_put(txn, self.dbi, &mut kv, &mut vv, flags), "put");
            }
            check(ffi::mdb_txn_commit(txn), "commit");
        }
    }

    fn delete_batch(&mut self, keys: Keys<'_>) {
        let txn = self.begin(0);
        // SAFETY: as in put_batch.
        unsafe {
            for k in keys.iter() {
                let mut kv = val(k);
                let rc = ffi::mdb_del(txn, self.dbi, &mut kv, ptr::null_mut());
                assert!(rc == 0 || rc == ffi::MDB_NOTFOUND, "LMDB del failed: {rc}");
            }
            check(ffi::mdb_txn_commit(txn), "commit");
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
                if ffi::mdb_get(txn, self.dbi, &mut kv, &mut vv) == 0 {
                    found += vv.mv_size as u64;
                }
            }
            ffi::mdb_txn_abort(txn);
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
            check(ffi::mdb_cursor_open(txn, self.dbi, &mut cur), "cursor_open");
            let mut kv = empty();
            let mut vv = empty();
            let mut rc = ffi::mdb_cursor_get(cur, &mut kv, &mut vv, ffi::MDB_FIRST);
            while rc == 0 {
                n += 1;
                rc = ffi::mdb_cursor_get(cur, &mut kv, &mut vv, ffi::MDB_NEXT);
            }
            ffi::mdb_cursor_close(cur);
            ffi::mdb_txn_abort(txn);
        }
        n
    }

    fn range_reads(&self, starts: Keys<'_>, len: usize) -> u64 {
        let txn = self.begin(ffi::MDB_RDONLY);
        let mut n = 0;
        // SAFETY: as in scan.
        unsafe {
            let mut cur = ptr::null_mut();
            check(ffi::mdb_cursor_open(txn, self.dbi, &mut cur), "cursor_open");
            for k in starts.iter() {
                let mut kv = val(k);
                let mut vv = empty();
                let mut rc = ffi::mdb_cursor_get(cur, &mut kv, &mut vv, ffi::MDB_SET_RANGE);
                let mut i = 0;
                while rc == 0 && i < len {
                    n += 1;
                    i += 1;
                    if i < len {
                        rc = ffi::mdb_cursor_get(cur, &mut kv, &mut vv, ffi::MDB_NEXT);
                    }
                }
            }
            ffi::mdb_cursor_close(cur);
            ffi::mdb_txn_abort(txn);
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
                    ffi::mdb_put(txn, self.entries, &mut kv, &mut vv, ffi::MDB_APPEND),
                    "put main",
                );
                for (dbi, key) in self.indexes.iter().zip(&e.index_keys) {
                    let mut kv = val(key);
                    let mut vv = val(&e.id);
                    check(ffi::mdb_put(txn, *dbi, &mut kv, &mut vv, 0), "put index");
                }
            }
            check(ffi::mdb_txn_commit(txn), "commit");
        }
    }

    fn sync(&mut self) {
        // SAFETY: env is open.
        check(unsafe { ffi::mdb_env_sync(self.env, 1) }, "env_sync");
    }

    fn set_sync(&mut self, on: bool) {
        // SAFETY: env is open; MDB_NOSYNC may be changed at run time.
        check(
            unsafe { ffi::mdb_env_set_flags(self.env, ffi::MDB_NOSYNC, if on { 0 } else { 1 }) },
            "set_flags",
        );
    }
}
