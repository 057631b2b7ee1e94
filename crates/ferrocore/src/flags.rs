//! The flags of environments, databases and puts, with LMDB's values. The bottom layer:
//! imports nothing.

/// Database flags, with LMDB's values (stored in the DB record's `md_flags`).
pub mod db_flags {
    /// Compare keys as byte strings from the end.
    pub const REVERSE_KEY: u16 = 0x02;
    /// Sorted duplicate values per key.
    pub const DUP_SORT: u16 = 0x04;
    /// Keys are native unsigned integers (u32 or u64), compared as such.
    pub const INTEGER_KEY: u16 = 0x08;
    /// DUPSORT values all have one size.
    pub const DUP_FIXED: u16 = 0x10;
    /// DUPSORT values are native unsigned integers.
    pub const INTEGER_DUP: u16 = 0x20;
    /// DUPSORT values compare from the end.
    pub const REVERSE_DUP: u16 = 0x40;
    /// Main-DB flags under which the main DB holds no named DB (its keys are not names):
    /// creating one there is `Incompatible`, as in LMDB.
    pub const NO_NAMED_DBS: u16 = DUP_SORT | INTEGER_KEY;
    /// `open_db`: create the database if it does not exist (never stored in the file).
    pub const CREATE: u32 = 0x40000;
}

/// Environment flags, with LMDB's values.
pub mod env_flags {
    /// Accepted for compatibility; the map address is chosen by the kernel.
    pub const FIXED_MAP: u32 = 0x01;
    /// The path names the data file itself; the lock file is `path-lock`.
    pub const NO_SUB_DIR: u32 = 0x4000;
    /// Don't flush at commit. A process crash loses nothing; an OS crash or power loss
    /// may lose the commits since the last `Env::sync` and may leave the newest meta
    /// pointing at pages that never reached the disk (a damaged database). As LMDB.
    pub const NO_SYNC: u32 = 0x10000;
    /// Open read-only.
    pub const READ_ONLY: u32 = 0x20000;
    /// Flush data at commit but not the meta page: an OS crash may lose the last commit,
    /// never corrupts.
    pub const NO_META_SYNC: u32 = 0x40000;
    /// Write txns build their pages in place in a writable shared map: no copy in memory
    /// and no write call per page; the commit flushes the dirty pages, then the meta.
    /// Nested txns are refused (`BadTxn`), as in LMDB. Ignored with `READ_ONLY`.
    pub const WRITE_MAP: u32 = 0x80000;
    /// With `WRITE_MAP`: leave the flush to the kernel's writeback (LMDB's `MS_ASYNC`),
    /// which makes it `NO_SYNC` as far as an OS crash goes.
    pub const MAP_ASYNC: u32 = 0x100000;
    /// Read txns are not tied to a thread (ferrocore never ties them).
    pub const NO_TLS: u32 = 0x200000;
    /// The application serialises access itself.
    pub const NO_LOCK: u32 = 0x400000;
    /// Advise the kernel that the map is read at random (`MADV_RANDOM`), as LMDB does: a
    /// page fault reads that page, not a readahead window. For databases larger than
    /// memory read at random. Under `WRITE_MAP` with synced commits it also keeps the
    /// kernel's page-cache folios at one page, so that a commit's flush writes the pages
    /// the txn changed and not the large folios around them (see the README's
    /// Durability section).
    pub const NO_READAHEAD: u32 = 0x800000;
    /// Accepted (ferrocore always zero-fills new pages it writes).
    pub const NO_MEM_INIT: u32 = 0x1000000;
    /// Every flag ferrocore knows.
    pub const ALL: u32 = FIXED_MAP
        | NO_SUB_DIR
        | NO_SYNC
        | READ_ONLY
        | NO_META_SYNC
        | WRITE_MAP
        | MAP_ASYNC
        | NO_TLS
        | NO_LOCK
        | NO_READAHEAD
        | NO_MEM_INIT;
    /// Flags `set_flags` may change on an open environment.
    pub const CHANGEABLE: u32 = NO_SYNC | NO_META_SYNC | MAP_ASYNC | NO_MEM_INIT;
}

/// Flags for `put`, with LMDB's values.
pub mod put_flags {
    /// Fail with `KeyExist` if the key exists.
    pub const NO_OVERWRITE: u32 = 0x10;
    /// DUPSORT: fail with `KeyExist` if the key/value pair exists.
    pub const NO_DUP_DATA: u32 = 0x20;
    /// Replace the item at the cursor (cursor put only).
    pub const CURRENT: u32 = 0x40;
    /// Reserve space for the value and return it for the caller to fill.
    pub const RESERVE: u32 = 0x10000;
    /// The key sorts after every key in the DB; `KeyExist` otherwise. Builds full pages.
    pub const APPEND: u32 = 0x20000;
    /// DUPSORT: the value sorts after every value of the key; `KeyExist` otherwise.
    pub const APPEND_DUP: u32 = 0x40000;
    /// DUPFIXED: store several values of one size at once (cursor `put_multiple`).
    pub const MULTIPLE: u32 = 0x80000;
}
