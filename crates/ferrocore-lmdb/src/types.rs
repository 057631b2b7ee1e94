//! The C types of LMDB's API, with LMDB's layouts (LP64), and its constants, and the two
//! helpers that read and fill a caller's `MDB_val`.
//!
//! May import: nothing of this crate (ferrocore's `Stat` only). The handle types
//! (`MDB_env`, `MDB_txn`, `MDB_cursor`, and `MDB_assert_func`, which names `MDB_env`)
//! live in `handles`.

#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

/// `MDB_dbi`: a database handle.
pub type MDB_dbi = c_uint;

/// `MDB_val`: a size and a pointer, both ways across the API.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MDB_val {
    /// Size of the data item.
    pub mv_size: usize,
    /// Address of the data item.
    pub mv_data: *mut c_void,
}

/// `MDB_stat`: statistics of a database.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MDB_stat {
    /// Page size.
    pub ms_psize: c_uint,
    /// Tree depth.
    pub ms_depth: c_uint,
    /// Branch pages.
    pub ms_branch_pages: usize,
    /// Leaf pages.
    pub ms_leaf_pages: usize,
    /// Overflow pages.
    pub ms_overflow_pages: usize,
    /// Data items.
    pub ms_entries: usize,
}

impl From<&ferrocore::Stat> for MDB_stat {
    fn from(s: &ferrocore::Stat) -> Self {
        MDB_stat {
            ms_psize: s.page_size,
            ms_depth: s.depth,
            ms_branch_pages: s.branch_pages as usize,
            ms_leaf_pages: s.leaf_pages as usize,
            ms_overflow_pages: s.overflow_pages as usize,
            ms_entries: s.entries as usize,
        }
    }
}

/// `MDB_envinfo`: information about the environment.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MDB_envinfo {
    /// Address of the map, if fixed (else NULL).
    pub me_mapaddr: *mut c_void,
    /// Size of the map.
    pub me_mapsize: usize,
    /// Last used page number.
    pub me_last_pgno: usize,
    /// Last committed txn id.
    pub me_last_txnid: usize,
    /// Reader slots.
    pub me_maxreaders: c_uint,
    /// Reader slots in use.
    pub me_numreaders: c_uint,
}

/// `MDB_cmp_func`: an application comparator.
pub type MDB_cmp_func = unsafe extern "C" fn(*const MDB_val, *const MDB_val) -> c_int;
/// `MDB_rel_func`: a relocation function (stored, never called, as in LMDB 0.9).
pub type MDB_rel_func = unsafe extern "C" fn(*mut MDB_val, *mut c_void, *mut c_void, *mut c_void);
/// `MDB_msg_func`: receives the lines of `mdb_reader_list`.
pub type MDB_msg_func = unsafe extern "C" fn(*const c_char, *mut c_void) -> c_int;

/// Error codes, with LMDB's values.
pub mod codes {
    use std::os::raw::c_int;

    /// Successful result.
    pub const MDB_SUCCESS: c_int = 0;
    /// Key/data pair already exists.
    pub const MDB_KEYEXIST: c_int = -30799;
    /// No matching key/data pair found.
    pub const MDB_NOTFOUND: c_int = -30798;
    /// Requested page not found.
    pub const MDB_PAGE_NOTFOUND: c_int = -30797;
    /// Located page was wrong type (a damaged file).
    pub const MDB_CORRUPTED: c_int = -30796;
    /// Update of meta page failed or environment had fatal error.
    pub const MDB_PANIC: c_int = -30795;
    /// Environment version mismatch.
    pub const MDB_VERSION_MISMATCH: c_int = -30794;
    /// File is not a valid LMDB file.
    pub const MDB_INVALID: c_int = -30793;
    /// Environment mapsize reached.
    pub const MDB_MAP_FULL: c_int = -30792;
    /// Environment maxdbs reached.
    pub const MDB_DBS_FULL: c_int = -30791;
    /// Environment maxreaders reached.
    pub const MDB_READERS_FULL: c_int = -30790;
    /// Too many TLS keys in use.
    pub const MDB_TLS_FULL: c_int = -30789;
    /// Txn has too many dirty pages.
    pub const MDB_TXN_FULL: c_int = -30788;
    /// Cursor stack too deep (internal error).
    pub const MDB_CURSOR_FULL: c_int = -30787;
    /// Page has not enough space (internal error).
    pub const MDB_PAGE_FULL: c_int = -30786;
    /// Database contents grew beyond environment mapsize.
    pub const MDB_MAP_RESIZED: c_int = -30785;
    /// Operation and DB incompatible, or DB type changed.
    pub const MDB_INCOMPATIBLE: c_int = -30784;
    /// Invalid reuse of reader locktable slot.
    pub const MDB_BAD_RSLOT: c_int = -30783;
    /// Txn must abort, has a child, or is invalid.
    pub const MDB_BAD_TXN: c_int = -30782;
    /// Unsupported size of key/DB name/data, or wrong DUPFIXED size.
    pub const MDB_BAD_VALSIZE: c_int = -30781;
    /// The specified DBI was changed unexpectedly.
    pub const MDB_BAD_DBI: c_int = -30780;
    /// The last LMDB-defined error code.
    pub const MDB_LAST_ERRCODE: c_int = MDB_BAD_DBI;
}

/// `mdb_txn_begin` flag: a read-only txn (the environment flag of the same value).
pub const MDB_RDONLY: c_uint = 0x20000;
/// `mdb_env_copy2` flag: compact while copying.
pub const MDB_CP_COMPACT: c_uint = 0x01;

/// Reads an `MDB_val` as a byte slice. `None` for a null pointer.
///
/// # Safety
/// `val` is null or points to an `MDB_val` whose `mv_data` points to `mv_size` readable
/// bytes that outlive `'a` (the C caller's contract).
#[inline]
pub(crate) unsafe fn val_slice<'a>(val: *const MDB_val) -> Option<&'a [u8]> {
    // SAFETY: the caller's contract: null or a valid `MDB_val`.
    let val = unsafe { val.as_ref() }?;
    if val.mv_size == 0 {
        return Some(&[]);
    }
    if val.mv_data.is_null() {
        return None;
    }
    // SAFETY: the caller's contract: `mv_size` readable bytes at `mv_data` (not null,
    // checked above), living for `'a`.
    Some(unsafe { std::slice::from_raw_parts(val.mv_data as *const u8, val.mv_size) })
}

/// Points the `MDB_val` at `bytes` (if `val` is not null). The caller keeps `bytes` alive
/// for as long as LMDB's contract says the returned data is valid (the txn's life, or until
/// the next write in a write txn).
///
/// # Safety
/// `val` is null or points to a writable `MDB_val`.
#[inline]
pub(crate) unsafe fn set_val(val: *mut MDB_val, bytes: &[u8]) {
    // SAFETY: the caller's contract: null or writable.
    if let Some(val) = unsafe { val.as_mut() } {
        val.mv_size = bytes.len();
        val.mv_data = bytes.as_ptr() as *mut _;
    }
}
