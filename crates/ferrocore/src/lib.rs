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
//! Layers, each importing only those below it (`tests/layers.rs` fails on a cycle), every
//! module private, the API re-exported here:
//!
//! 0. `error`, `flags` (LMDB's env, DB and put flags), `io` (the map, the [`DataFile`]
//!    seam, the fault-injecting file);
//! 1. `format` (LMDB 0.9's on-disk format: `page` with nodes and the overflow header,
//!    `meta` with DB records, `idl`), `lock` (LMDB 0.9's lock file: reader table, writer
//!    mutex);
//! 2. `order` (key and value orders), `store` (the page seam: snapshot and dirty pages,
//!    nested-txn undo, the free-page refill hook), `seqcache` (lock-free caches);
//! 3. `btree` (the one descent, positions, put/delete/split/merge, overflow values),
//!    `catalog` (named DBs);
//! 4. `dupsort` (sorted duplicates), `freelist` (the free DB), `shared` (what every txn
//!    of an environment shares);
//! 5. `cursor` (LMDB's cursor state machine), `check` (the integrity checker);
//! 6. `txn` (read and write txns, the commit, nested txns, cursors);
//! 7. `bulk` (bottom-up bulk load), `compact` (the compacting copy), `detached` (cursors
//!    the C ABI keeps apart from their txn);
//! 8. `env` (open, stat, info, copy), `extsort` (external sort for the bulk loader).

// `unsafe` lives only in `io` (the map), `lock` (the shared lock file), `env` (the
// contract of `open`, `sysconf`) and one block of `store` (a WRITE_MAP txn's page in the
// writable map); everything else works on safe, bounds-checked views.
#![deny(unsafe_code)]

mod btree;
mod bulk;
mod catalog;
mod check;
mod compact;
mod cursor;
mod detached;
mod dupsort;
#[allow(unsafe_code)]
mod env;
mod error;
mod extsort;
mod flags;
mod format;
mod freelist;
#[allow(unsafe_code)]
mod io;
#[allow(unsafe_code)]
mod lock;
mod order;
mod seqcache;
mod shared;
mod store;
mod txn;

pub use bulk::{BulkLoader, BulkOptions, BulkSummary, Duplicates};
pub use check::{CheckDetails, CheckOptions, CheckReport, DbName, DbPages, Problem, ProblemKind};
pub use detached::{CursorOp, DetachedCursor, TxnRef};
pub use env::{
    long_key_max, Env, EnvInfo, EnvOptions, DEFAULT_MAX_READERS, LMDB_DEFAULT_MAP_SIZE,
    LMDB_MAX_KEY_SIZE,
};
pub use error::{CommitStep, Error, Result};
pub use extsort::{ExternalSort, SortOptions, SortedItem, SortedItems};
pub use flags::{db_flags, env_flags, put_flags};
pub use format::meta::Stat;
pub use io::{DataFile, OsFile, SyncedWriteError};
pub use order::{KeyCmp, Orders};
pub use txn::{
    Cursor, Database, InactiveReadTxn, Item, NestedLevel, NestedTxn, ReadTxn, WriteCursor, WriteTxn,
};

/// A [`DataFile`] that injects faults: power cuts that keep any subset of the writes since
/// the last flush (torn at 512-byte sectors), and failing calls (`ENOSPC`, `EIO`, short
/// writes). For testing what a crash or a full disk does to an application's data; install
/// it with [`EnvOptions::data_file`].
pub mod fault {
    pub use crate::io::fault::*;
}

/// Raw access to the on-disk format, for tools and tests that look below the API: the
/// meta pages and DB records, page and node flags, validated views of pages read from any
/// [`PageSource`](raw::PageSource), and the compacting copy of a snapshot given by its
/// pages and meta. Nothing here writes to an environment.
pub mod raw {
    pub use crate::btree::{get_node, view};
    pub use crate::check::check_report;
    pub use crate::compact::copy_snapshot;
    pub use crate::format::meta::{DbRecord, Meta, MetaCheck};
    pub use crate::format::page::{node_flags, page_flags, Node, PageView, P_INVALID};
    pub use crate::store::PageSource;
}
