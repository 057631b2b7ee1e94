//! ferrocore: an embedded transactional key-value store with LMDB's data file format and
//! semantics — memory-mapped copy-on-write B+tree, MVCC snapshots, one writer and lock-free
//! readers, no write-ahead log.
//!
//! ```no_run
//! use ferrocore::{Database, Env};
//!
//! # fn main() -> ferrocore::Result<()> {
//! // SAFETY: nothing else modifies the files of this environment while it is open.
//! let env = unsafe { Env::open("/tmp/my-env")? };
//! let mut txn = env.begin_write()?;
//! txn.put(Database::MAIN, b"hello", b"world", 0)?;
//! txn.commit()?;
//!
//! let txn = env.begin_read()?;
//! assert_eq!(txn.get(Database::MAIN, b"hello")?, Some(&b"world"[..]));
//! # Ok(())
//! # }
//! ```
//!
//! Module map: `page` (on-disk layout, validated views), `meta` (the two meta pages),
//! `store` (the page seam between trees and storage, nested-txn undo), `btree` and
//! `cursor` (tree algorithms and LMDB's cursor moves), `dupsort` (sorted duplicates),
//! `catalog` (named DBs and their orders), `freelist` (free pages), `txn` (transactions),
//! `commit` (the commit's I/O steps), `env` (open, stat, info), `seqcache` (lock-free
//! caches shared by txns), `io` (the map, the data-file seam, fault injection), `lock`
//! (LMDB 0.9's lock file: reader table, writer mutex, one descriptor per process), `check`
//! (integrity checker), `compact` (the compacting copy), `bulk` (bottom-up bulk load from
//! sorted input), `extsort` (external sort of unsorted input for it).

// `unsafe` lives only in `io` (the map), `lock` (the shared lock file), `env` (the
// contract of `open`, `sysconf`) and one block of `store` (a WRITE_MAP txn's page in the
// writable map); everything else works on safe, bounds-checked views.
#![deny(unsafe_code)]

pub mod btree;
pub mod bulk;
pub mod catalog;
pub mod check;
pub mod commit;
pub mod compact;
pub mod cursor;
pub mod detached;
pub mod dupsort;
#[allow(unsafe_code)]
pub mod env;
pub mod error;
pub mod extsort;
pub mod freelist;
#[allow(unsafe_code)]
pub mod io;
#[allow(unsafe_code)]
pub mod lock;
pub mod meta;
pub mod page;
pub mod seqcache;
pub mod store;
pub mod txn;

pub use bulk::{BulkLoader, BulkOptions, BulkSummary, Duplicates};
pub use commit::CommitStep;
pub use detached::{CursorOp, DetachedCursor, TxnRef};
pub use env::{env_flags, long_key_max, Env, EnvInfo, EnvOptions, Stat};
pub use error::{Error, Result};
pub use extsort::{ExternalSort, SortOptions, SortedItem, SortedItems};
pub use txn::{
    put_flags, Cursor, Database, InactiveReadTxn, Item, NestedLevel, NestedTxn, ReadTxn,
    WriteCursor, WriteTxn,
};

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
    /// `open_db`: create the database if it does not exist (never stored in the file).
    pub const CREATE: u32 = 0x40000;
}
