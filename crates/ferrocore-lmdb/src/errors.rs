//! LMDB's error codes on the Rust side (`Rc`, `ToRc`, and the conversions the calls
//! taking a dbi or storing a value share), `mdb_strerror` (LMDB's texts) and
//! `mdb_version`.
//!
//! May import: `types`.

use std::os::raw::{c_char, c_int, c_uint};

use ferrocore::{put_flags, Database, Error};

use crate::types::codes::*;
use crate::types::{set_val, MDB_val};

/// The result of an exported function's body: `Err` carries the LMDB code.
pub(crate) type Rc<T = ()> = Result<T, c_int>;

/// Converts ferrocore results to LMDB codes.
pub(crate) trait ToRc<T> {
    /// The value, or the error's LMDB code.
    fn rc(self) -> Rc<T>;
}

impl<T> ToRc<T> for ferrocore::Result<T> {
    fn rc(self) -> Rc<T> {
        self.map_err(|e| e.lmdb_code())
    }
}

/// Converts a ferrocore error for a call taking a dbi: a handle that is not (or no longer)
/// valid in the txn is `EINVAL`, as LMDB's `TXN_DBI_EXIST` check returns. Inlined for its
/// `Ok` case; the error's conversion is out of line.
#[inline]
pub(crate) fn dbi_rc<T>(r: ferrocore::Result<T>) -> Rc<T> {
    r.map_err(dbi_code)
}

/// [`dbi_rc`]'s code for an error.
#[cold]
#[inline(never)]
fn dbi_code(e: Error) -> c_int {
    match e {
        Error::BadDbi => libc::EINVAL,
        other => other.lmdb_code(),
    }
}

/// The code of a put, as LMDB answers it: with `MDB_NOOVERWRITE` on an existing key,
/// `MDB_KEYEXIST` and `data` pointed at the existing value.
///
/// # Safety
/// `data` is null or a writable `MDB_val`.
#[inline]
pub(crate) unsafe fn put_rc(
    r: ferrocore::Result<()>,
    flags: c_uint,
    w: &ferrocore::WriteTxn<'_>,
    db: Database,
    key: &[u8],
    data: *mut MDB_val,
) -> Rc {
    match r {
        Err(Error::KeyExist) if flags & put_flags::NO_OVERWRITE != 0 => {
            if let Ok(Some(existing)) = w.get(db, key) {
                // SAFETY: the caller's contract: `data` is null or writable.
                unsafe { set_val(data, existing) };
            }
            Err(MDB_KEYEXIST)
        }
        other => dbi_rc(other),
    }
}

/// LMDB's message for each of its codes, from `MDB_KEYEXIST` to `MDB_BAD_DBI`.
const MESSAGES: [&str; 21] = [
    "MDB_KEYEXIST: Key/data pair already exists\0",
    "MDB_NOTFOUND: No matching key/data pair found\0",
    "MDB_PAGE_NOTFOUND: Requested page not found\0",
    "MDB_CORRUPTED: Located page was wrong type\0",
    "MDB_PANIC: Update of meta page failed or environment had fatal error\0",
    "MDB_VERSION_MISMATCH: Database environment version mismatch\0",
    "MDB_INVALID: File is not an LMDB file\0",
    "MDB_MAP_FULL: Environment mapsize limit reached\0",
    "MDB_DBS_FULL: Environment maxdbs limit reached\0",
    "MDB_READERS_FULL: Environment maxreaders limit reached\0",
    "MDB_TLS_FULL: Thread-local storage keys full - too many environments open\0",
    "MDB_TXN_FULL: Transaction has too many dirty pages - transaction too big\0",
    "MDB_CURSOR_FULL: Internal error - cursor stack limit reached\0",
    "MDB_PAGE_FULL: Internal error - page has no more space\0",
    "MDB_MAP_RESIZED: Database contents grew beyond environment mapsize\0",
    "MDB_INCOMPATIBLE: Operation and DB incompatible, or DB flags changed\0",
    "MDB_BAD_RSLOT: Invalid reuse of reader locktable slot\0",
    "MDB_BAD_TXN: Transaction must abort, has a child, or is invalid\0",
    "MDB_BAD_VALSIZE: Unsupported size of key/DB name/data, or wrong DUPFIXED size\0",
    "MDB_BAD_DBI: The specified DBI handle was closed/changed unexpectedly\0",
    "\0",
];

/// The text of an error code (`mdb_strerror`): LMDB's for its codes, the system's for
/// errno values.
#[no_mangle]
pub extern "C" fn mdb_strerror(err: c_int) -> *mut c_char {
    if err == MDB_SUCCESS {
        return c"Successful return: 0".as_ptr().cast_mut();
    }
    if (MDB_KEYEXIST..=MDB_LAST_ERRCODE).contains(&err) {
        let msg = MESSAGES[(err - MDB_KEYEXIST) as usize];
        return msg.as_ptr() as *mut c_char;
    }
    // SAFETY: strerror returns a pointer to a NUL-terminated message (as LMDB returns it).
    unsafe { libc::strerror(err) }
}

/// The version string: ferrocore, compatible with LMDB 0.9.32.
const VERSION: &str = concat!(
    "ferrocore ",
    env!("CARGO_PKG_VERSION"),
    " (LMDB 0.9.32 compatible)\0"
);

/// The library version (`mdb_version`): LMDB 0.9.32's numbers, and a string naming
/// ferrocore.
///
/// # Safety
/// `major`, `minor` and `patch` are each null or writable (LMDB's contract).
#[no_mangle]
pub unsafe extern "C" fn mdb_version(
    major: *mut c_int,
    minor: *mut c_int,
    patch: *mut c_int,
) -> *mut c_char {
    // SAFETY: the caller's contract: null or writable.
    if let Some(m) = unsafe { major.as_mut() } {
        *m = 0;
    }
    // SAFETY: the caller's contract: null or writable.
    if let Some(m) = unsafe { minor.as_mut() } {
        *m = 9;
    }
    // SAFETY: the caller's contract: null or writable.
    if let Some(p) = unsafe { patch.as_mut() } {
        *p = 32;
    }
    VERSION.as_ptr() as *mut c_char
}
