// Each test file is its own crate and uses only some of these helpers.
#![allow(dead_code)]
//! Helpers shared by the tests of this crate: ferrocore environments (opened in one
//! place, or in a temporary directory), the one deterministic PRNG, and, for the tests
//! against the real LMDB C library (mdb.master 0.9.70, through the `lmdb-master-sys`
//! dev-dependency) and Debian's `lmdb-utils` tools, a small wrapper around the LMDB C API,
//! both engines behind one set of traits (`engines`), and tool detection.

use std::ops::Deref;
use std::path::Path;
use std::process::Command;

use ferrocore::{Env, EnvOptions, Stat};
use tempfile::TempDir;

pub mod engines;

/// Map size for the LMDB side (LMDB's map does not grow by itself).
pub const LMDB_MAP_SIZE: usize = 1 << 30;

/// A key/value pair, owned.
pub type Pair = (Vec<u8>, Vec<u8>);

// ---------------------------------------------------------------------------------------
// A small wrapper around the LMDB C API, with named DBs and the cursor ops DUPSORT needs.
// ---------------------------------------------------------------------------------------

pub mod lmdb {
    use std::ffi::{CStr, CString};
    use std::marker::PhantomData;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::ptr;

    pub use lmdb_master_sys as ffi;

    use super::Pair;

    /// LMDB's `FREE_DBI`.
    pub const FREE_DBI: ffi::MDB_dbi = 0;

    pub fn check(rc: i32, what: &str) {
        if rc != ffi::MDB_SUCCESS {
            // SAFETY: mdb_strerror returns a static NUL-terminated string for any code.
            let msg = unsafe { CStr::from_ptr(ffi::mdb_strerror(rc)) };
            panic!("LMDB {what} failed: {rc} ({})", msg.to_string_lossy());
        }
    }

    /// An `MDB_val` pointing at `bytes`.
    pub fn val(bytes: &[u8]) -> ffi::MDB_val {
        ffi::MDB_val {
            mv_size: bytes.len(),
            mv_data: bytes.as_ptr() as *mut _,
        }
    }

    /// An empty `MDB_val`, for LMDB to fill in.
    pub fn empty_val() -> ffi::MDB_val {
        ffi::MDB_val {
            mv_size: 0,
            mv_data: ptr::null_mut(),
        }
    }

    /// Copies the bytes an `MDB_val` points at.
    ///
    /// # Safety
    /// `v` must come from LMDB within a still-live txn, or point at live caller memory.
    pub unsafe fn copy_out(v: &ffi::MDB_val) -> Vec<u8> {
        unsafe {
            if v.mv_size == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(v.mv_data as *const u8, v.mv_size).to_vec()
            }
        }
    }

    /// An open LMDB environment; closed on drop.
    pub struct Env {
        env: *mut ffi::MDB_env,
    }

    impl Env {
        /// Opens (creating if needed) the environment in directory `path`, main DB only.
        pub fn open(path: &Path, map_size: usize) -> Env {
            Env::open_inner(path, map_size, None)
        }

        /// Opens (creating if needed) the environment in directory `path`, with room for
        /// `max_dbs` named DBs (`mdb_env_set_maxdbs` must come before `mdb_env_open`).
        pub fn open_with_max_dbs(path: &Path, map_size: usize, max_dbs: u32) -> Env {
            Env::open_inner(path, map_size, Some(max_dbs))
        }

        fn open_inner(path: &Path, map_size: usize, max_dbs: Option<u32>) -> Env {
            Env::try_open_inner(path, map_size, max_dbs)
                .unwrap_or_else(|rc| panic!("mdb_env_open failed: {rc}"))
        }

        /// Opens the environment in directory `path`, main DB only; LMDB's error code if
        /// `mdb_env_open` fails.
        pub fn try_open(path: &Path, map_size: usize) -> Result<Env, i32> {
            Env::try_open_inner(path, map_size, None)
        }

        fn try_open_inner(path: &Path, map_size: usize, max_dbs: Option<u32>) -> Result<Env, i32> {
            let mut raw = ptr::null_mut();
            // SAFETY: out-pointer to a local.
            check(unsafe { ffi::mdb_env_create(&mut raw) }, "mdb_env_create");
            // From here Drop calls mdb_env_close, also when open fails (as LMDB requires).
            let env = Env { env: raw };
            // SAFETY: valid env handle, not yet opened.
            check(
                unsafe { ffi::mdb_env_set_mapsize(env.env, map_size) },
                "mdb_env_set_mapsize",
            );
            if let Some(max_dbs) = max_dbs {
                // SAFETY: valid env handle, not yet opened.
                check(
                    unsafe { ffi::mdb_env_set_maxdbs(env.env, max_dbs) },
                    "mdb_env_set_maxdbs",
                );
            }
            let cpath = CString::new(path.as_os_str().as_bytes()).expect("path without NUL");
            // SAFETY: valid env handle and NUL-terminated path.
            match unsafe { ffi::mdb_env_open(env.env, cpath.as_ptr(), ffi::MDB_NOTLS, 0o644) } {
                ffi::MDB_SUCCESS => Ok(env),
                rc => Err(rc),
            }
        }

        /// Commits no longer sync (`mdb_env_set_flags(MDB_NOSYNC)`).
        #[allow(dead_code)] // not every test binary uses it
        pub fn no_sync(&self) {
            // SAFETY: valid, open env handle.
            check(
                unsafe { ffi::mdb_env_set_flags(self.env, ffi::MDB_NOSYNC, 1) },
                "mdb_env_set_flags",
            );
        }

        pub fn begin(&self, write: bool) -> Txn<'_> {
            let mut txn = ptr::null_mut();
            let flags = if write { 0 } else { ffi::MDB_RDONLY };
            // SAFETY: valid open env; out-pointer to a local.
            check(
                unsafe { ffi::mdb_txn_begin(self.env, ptr::null_mut(), flags, &mut txn) },
                "mdb_txn_begin",
            );
            Txn {
                txn,
                _env: PhantomData,
            }
        }

        /// A read-only txn.
        pub fn read(&self) -> Txn<'_> {
            self.begin(false)
        }

        /// Runs `f` in a write txn and commits it.
        pub fn write<R>(&self, f: impl FnOnce(&mut Txn<'_>) -> R) -> R {
            let mut txn = self.begin(true);
            let r = f(&mut txn);
            txn.commit();
            r
        }

        /// `mdb_env_stat`: the main DB's record in the latest meta.
        pub fn stat(&self) -> ffi::MDB_stat {
            // SAFETY: MDB_stat is plain data.
            let mut st: ffi::MDB_stat = unsafe { std::mem::zeroed() };
            // SAFETY: valid env, out-pointer to a local.
            check(
                unsafe { ffi::mdb_env_stat(self.env, &mut st) },
                "mdb_env_stat",
            );
            st
        }

        /// `mdb_env_info`.
        pub fn info(&self) -> ffi::MDB_envinfo {
            // SAFETY: MDB_envinfo is plain data.
            let mut info: ffi::MDB_envinfo = unsafe { std::mem::zeroed() };
            // SAFETY: valid env, out-pointer to a local.
            check(
                unsafe { ffi::mdb_env_info(self.env, &mut info) },
                "mdb_env_info",
            );
            info
        }
    }

    impl Drop for Env {
        fn drop(&mut self) {
            // SAFETY: every txn borrows the env, so none is alive here.
            unsafe { ffi::mdb_env_close(self.env) };
        }
    }

    /// A transaction; aborted on drop unless committed.
    pub struct Txn<'e> {
        txn: *mut ffi::MDB_txn,
        _env: PhantomData<&'e Env>,
    }

    impl Txn<'_> {
        /// `mdb_dbi_open`; `None` is the main DB. Returns LMDB's error code on failure.
        pub fn open_db(&mut self, name: Option<&str>, flags: u32) -> Result<ffi::MDB_dbi, i32> {
            let cname = name.map(|n| CString::new(n).expect("name without NUL"));
            let mut dbi = 0;
            // SAFETY: valid txn; the name is NUL-terminated or null; out-pointer to a local.
            let rc = unsafe {
                ffi::mdb_dbi_open(
                    self.txn,
                    cname.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
                    flags,
                    &mut dbi,
                )
            };
            if rc == ffi::MDB_SUCCESS {
                Ok(dbi)
            } else {
                Err(rc)
            }
        }

        /// The main DB's handle (`mdb_dbi_open` with a null name).
        pub fn main_dbi(&self) -> ffi::MDB_dbi {
            let mut dbi = 0;
            // SAFETY: valid txn; a null name opens the main DB.
            check(
                unsafe { ffi::mdb_dbi_open(self.txn, ptr::null(), 0, &mut dbi) },
                "mdb_dbi_open",
            );
            dbi
        }

        /// The DB flags LMDB holds for `dbi`.
        pub fn dbi_flags(&self, dbi: ffi::MDB_dbi) -> u32 {
            let mut flags = 0;
            // SAFETY: valid txn and dbi; out-pointer to a local.
            check(
                unsafe { ffi::mdb_dbi_flags(self.txn, dbi, &mut flags) },
                "mdb_dbi_flags",
            );
            flags
        }

        /// `mdb_put`; returns LMDB's return code.
        pub fn put(&mut self, dbi: ffi::MDB_dbi, key: &[u8], value: &[u8], flags: u32) -> i32 {
            let (mut k, mut v) = (val(key), val(value));
            // SAFETY: valid write txn; LMDB copies key and value.
            unsafe { ffi::mdb_put(self.txn, dbi, &mut k, &mut v, flags) }
        }

        /// `mdb_get`: the (first) value of `key`.
        pub fn get(&self, dbi: ffi::MDB_dbi, key: &[u8]) -> Option<Vec<u8>> {
            let (mut k, mut v) = (val(key), empty_val());
            // SAFETY: valid txn; out-pointer to a local.
            let rc = unsafe { ffi::mdb_get(self.txn, dbi, &mut k, &mut v) };
            if rc == ffi::MDB_NOTFOUND {
                return None;
            }
            check(rc, "mdb_get");
            // SAFETY: v points into the map, valid while the txn lives.
            Some(unsafe { copy_out(&v) })
        }

        /// `mdb_del` of a whole key (`value` None) or of one pair; false if absent.
        pub fn del(&mut self, dbi: ffi::MDB_dbi, key: &[u8], value: Option<&[u8]>) -> bool {
            let mut k = val(key);
            let mut v = value.map(val);
            let vp = v.as_mut().map_or(ptr::null_mut(), std::ptr::from_mut);
            // SAFETY: valid write txn; key and data point at live memory (or data is null).
            let rc = unsafe { ffi::mdb_del(self.txn, dbi, &mut k, vp) };
            if rc == ffi::MDB_NOTFOUND {
                return false;
            }
            check(rc, "mdb_del");
            true
        }

        /// Every item of `dbi`, by MDB_FIRST / MDB_NEXT (FREE_DBI in read-only txns only).
        pub fn scan(&self, dbi: ffi::MDB_dbi) -> Vec<Pair> {
            let mut cur = ptr::null_mut();
            // SAFETY: valid txn and dbi; out-pointer to a local.
            check(
                unsafe { ffi::mdb_cursor_open(self.txn, dbi, &mut cur) },
                "mdb_cursor_open",
            );
            let mut out = Vec::new();
            let mut op = ffi::MDB_FIRST;
            loop {
                let (mut k, mut v) = (empty_val(), empty_val());
                // SAFETY: valid cursor; out-pointers to locals.
                let rc = unsafe { ffi::mdb_cursor_get(cur, &mut k, &mut v, op) };
                if rc == ffi::MDB_NOTFOUND {
                    break;
                }
                if rc != ffi::MDB_SUCCESS {
                    // SAFETY: the cursor belongs to this txn and is not used again.
                    unsafe { ffi::mdb_cursor_close(cur) };
                    check(rc, "mdb_cursor_get");
                }
                // SAFETY: k and v point into the map, valid while the txn lives.
                out.push(unsafe { (copy_out(&k), copy_out(&v)) });
                op = ffi::MDB_NEXT;
            }
            // SAFETY: as above.
            unsafe { ffi::mdb_cursor_close(cur) };
            out
        }

        /// `mdb_stat` of `dbi`.
        pub fn db_stat(&self, dbi: ffi::MDB_dbi) -> ffi::MDB_stat {
            // SAFETY: MDB_stat is plain data.
            let mut st: ffi::MDB_stat = unsafe { std::mem::zeroed() };
            // SAFETY: valid txn and dbi; out-pointer to a local.
            check(unsafe { ffi::mdb_stat(self.txn, dbi, &mut st) }, "mdb_stat");
            st
        }

        pub fn cursor(&self, dbi: ffi::MDB_dbi) -> Cursor<'_> {
            let mut cur = ptr::null_mut();
            // SAFETY: valid txn and dbi; out-pointer to a local.
            check(
                unsafe { ffi::mdb_cursor_open(self.txn, dbi, &mut cur) },
                "mdb_cursor_open",
            );
            Cursor {
                cur,
                _txn: PhantomData,
            }
        }

        pub fn commit(mut self) {
            let txn = std::mem::replace(&mut self.txn, ptr::null_mut());
            // SAFETY: valid txn, freed by commit whatever its result.
            check(unsafe { ffi::mdb_txn_commit(txn) }, "mdb_txn_commit");
        }
    }

    impl Drop for Txn<'_> {
        fn drop(&mut self) {
            if !self.txn.is_null() {
                // SAFETY: valid, uncommitted txn.
                unsafe { ffi::mdb_txn_abort(self.txn) };
            }
        }
    }

    /// A cursor of a txn; closed on drop.
    pub struct Cursor<'t> {
        cur: *mut ffi::MDB_cursor,
        _txn: PhantomData<&'t ()>,
    }

    impl Cursor<'_> {
        /// `mdb_cursor_get` with `op`; `key`/`data` are the inputs of the ops that take
        /// them. Returns the key and data LMDB hands back, `None` on MDB_NOTFOUND.
        pub fn get(
            &mut self,
            op: ffi::MDB_cursor_op,
            key: Option<&[u8]>,
            data: Option<&[u8]>,
        ) -> Option<Pair> {
            let mut k = key.map_or_else(empty_val, val);
            let mut v = data.map_or_else(empty_val, val);
            // SAFETY: valid cursor; k and v are locals pointing at live memory.
            let rc = unsafe { ffi::mdb_cursor_get(self.cur, &mut k, &mut v, op) };
            if rc == ffi::MDB_NOTFOUND {
                return None;
            }
            check(rc, &format!("mdb_cursor_get (op {op})"));
            // SAFETY: k and v point into the map (valid while the txn lives) or at the
            // caller's key/data, alive for this call.
            Some(unsafe { (copy_out(&k), copy_out(&v)) })
        }

        /// `mdb_cursor_get` with `op`: `Ok(None)` on MDB_NOTFOUND, `Err` on any other error.
        pub fn try_get(
            &mut self,
            op: ffi::MDB_cursor_op,
            key: Option<&[u8]>,
            data: Option<&[u8]>,
        ) -> Result<Option<Pair>, i32> {
            let mut k = key.map_or_else(empty_val, val);
            let mut v = data.map_or_else(empty_val, val);
            // SAFETY: valid cursor; k and v are locals pointing at live memory.
            let rc = unsafe { ffi::mdb_cursor_get(self.cur, &mut k, &mut v, op) };
            match rc {
                ffi::MDB_SUCCESS => {
                    // SAFETY: as in `get`.
                    Ok(Some(unsafe { (copy_out(&k), copy_out(&v)) }))
                }
                ffi::MDB_NOTFOUND => Ok(None),
                rc => Err(rc),
            }
        }

        /// `mdb_cursor_del`; LMDB's return code.
        pub fn del(&mut self, flags: u32) -> i32 {
            // SAFETY: valid cursor of a write txn.
            unsafe { ffi::mdb_cursor_del(self.cur, flags) }
        }

        /// `mdb_cursor_count`, or LMDB's error code.
        pub fn try_count(&self) -> Result<u64, i32> {
            let mut n: ffi::mdb_size_t = 0;
            // SAFETY: valid cursor; out-pointer to a local.
            match unsafe { ffi::mdb_cursor_count(self.cur, &mut n) } {
                ffi::MDB_SUCCESS => Ok(n as u64),
                rc => Err(rc),
            }
        }

        /// `mdb_cursor_count`.
        pub fn count(&self) -> u64 {
            let mut n: ffi::mdb_size_t = 0;
            // SAFETY: valid cursor; out-pointer to a local.
            check(
                unsafe { ffi::mdb_cursor_count(self.cur, &mut n) },
                "mdb_cursor_count",
            );
            n as u64
        }
    }

    impl Drop for Cursor<'_> {
        fn drop(&mut self) {
            // SAFETY: the cursor belongs to a live txn (it borrows it) and is not used again.
            unsafe { ffi::mdb_cursor_close(self.cur) };
        }
    }
}

// ---------------------------------------------------------------------------------------
// ferrocore environments.
// ---------------------------------------------------------------------------------------

/// Opens ferrocore on directory `dir` with `opts`: the tests' one call of the `unsafe`
/// open.
pub fn try_open_env(dir: &Path, opts: &EnvOptions) -> ferrocore::Result<Env> {
    // SAFETY: every test owns its directory. While ferrocore has it open, only ferrocore
    // touches the files (this process, or child processes the test starts); tests that
    // damage a file or hand it to LMDB do so while no ferrocore environment is open on it.
    unsafe { opts.open(dir) }
}

/// [`try_open_env`], which must succeed.
pub fn open_env(dir: &Path, opts: &EnvOptions) -> Env {
    try_open_env(dir, opts).unwrap_or_else(|e| panic!("open {}: {e}", dir.display()))
}

/// A ferrocore environment in a new temporary directory, which is removed after the
/// environment closes. Derefs to the [`Env`].
pub struct TempEnv {
    // Fields drop in order: the environment closes before its directory goes.
    env: Env,
    dir: TempDir,
}

impl TempEnv {
    pub fn new(opts: &EnvOptions) -> TempEnv {
        let dir = tempfile::tempdir().expect("tempdir");
        TempEnv {
            env: open_env(dir.path(), opts),
            dir,
        }
    }

    /// The environment's directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Closes the environment and hands back its directory (to reopen it, or to change
    /// its files while it is closed).
    pub fn close(self) -> TempDir {
        drop(self.env);
        self.dir
    }
}

impl Deref for TempEnv {
    type Target = Env;

    fn deref(&self) -> &Env {
        &self.env
    }
}

// ---------------------------------------------------------------------------------------
// Deterministic data.
// ---------------------------------------------------------------------------------------

/// splitmix64: the one PRNG of these tests. A test's data is a function of its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// `len` bytes from a small alphabet (so that keys share prefixes and suffixes).
    pub fn alpha(&mut self, len: usize) -> Vec<u8> {
        const ALPHABET: [u8; 8] = [0x00, 0x01, b'A', b'B', 0x7f, 0x80, 0xfe, 0xff];
        (0..len).map(|_| ALPHABET[self.below(8)]).collect()
    }
}

// ---------------------------------------------------------------------------------------
// Reporting and comparisons.
// ---------------------------------------------------------------------------------------

/// The first 16 bytes of `b` in hex, and its length.
pub fn hex_prefix(b: &[u8]) -> String {
    let mut s: String = b.iter().take(16).map(|x| format!("{x:02x}")).collect();
    if b.len() > 16 {
        s.push_str("..");
    }
    format!("{s} (len {})", b.len())
}

/// LMDB's DB record as (psize, depth, branch, leaf, overflow, entries).
pub fn stat_tuple_lm(st: &lmdb::ffi::MDB_stat) -> (u32, u32, u64, u64, u64, u64) {
    (
        st.ms_psize,
        st.ms_depth,
        st.ms_branch_pages as u64,
        st.ms_leaf_pages as u64,
        st.ms_overflow_pages as u64,
        st.ms_entries as u64,
    )
}

/// ferrocore's DB record as (psize, depth, branch, leaf, overflow, entries).
pub fn stat_tuple_fc(st: &Stat) -> (u32, u32, u64, u64, u64, u64) {
    (
        st.page_size,
        st.depth,
        st.branch_pages,
        st.leaf_pages,
        st.overflow_pages,
        st.entries,
    )
}

// ---------------------------------------------------------------------------------------
// Debian's lmdb-utils.
// ---------------------------------------------------------------------------------------

/// True if `mdb_dump` and `mdb_stat` can be run.
pub fn lmdb_utils_available() -> bool {
    ["mdb_dump", "mdb_stat"].iter().all(|tool| {
        Command::new(tool)
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Decodes a data line of `mdb_dump` in its default (hex) format.
pub fn decode_hex_line(line: &str) -> Vec<u8> {
    let b = line.as_bytes();
    assert!(
        b.first() == Some(&b' ') && b.len() % 2 == 1,
        "mdb_dump data line: {line:?}"
    );
    (1..b.len())
        .step_by(2)
        .map(|i| {
            std::str::from_utf8(&b[i..i + 2])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .unwrap_or_else(|| panic!("mdb_dump: bad hex at byte {i} of {line:?}"))
        })
        .collect()
}
