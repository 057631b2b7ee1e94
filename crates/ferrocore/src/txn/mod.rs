//! Transactions: read-only snapshots, the write transaction, and its commit.
//!
//! A read txn claims a reader slot, publishes the txnid it reads, and from then on reads
//! pages straight from the map: zero-copy, no locks. The write txn holds the writer lock,
//! keeps every page it changes in memory (`store::DirtyPages`), and commits by writing
//! those pages in page order with vectored writes, flushing, then writing the meta page
//! that points at them and flushing again (invariant 2 of DESIGN.md).

//!
//! Files: `handles` (the `Database` handle, named DBs in a txn, orders), `read` (reader
//! slots, snapshots, the read txn), `write` (the write txn and its operations), `commit`
//! (the commit: records, free list, then the I/O as named steps), `nested` (nested write
//! txns), `cursor` (the read cursor, the page source of both txn kinds, the write cursor).
//! Only `commit` touches the data file.

mod commit;
mod cursor;
mod dbi_map;
mod handles;
mod nested;
mod read;
mod write;

use commit::FileShrink;
pub(crate) use cursor::Source;
pub use cursor::{Cursor, Item, WriteCursor};
pub use handles::Database;
use handles::*;
pub use nested::{NestedLevel, NestedTxn};
use read::*;
pub use read::{InactiveReadTxn, ReadTxn};
pub(crate) use write::TxnCarry;
pub use write::WriteTxn;
