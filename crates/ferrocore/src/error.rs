//! The one error type of ferrocore.
//!
//! Every variant maps onto an LMDB return code (see [`Error::lmdb_code`]) so the C ABI can
//! report exactly what LMDB would; the Rust side keeps the context (page numbers, sizes,
//! the I/O error) that LMDB's bare integers lose.

use std::fmt;
use std::io;

/// Result alias used throughout ferrocore.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in ferrocore.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A put with `NO_OVERWRITE` (or `NO_DUP_DATA`) found the key already present.
    KeyExist,
    /// The key (or cursor position) does not exist.
    NotFound,
    /// A page number points outside the file or the snapshot (`MDB_PAGE_NOTFOUND`).
    PageNotFound {
        /// The page number.
        pgno: u64,
    },
    /// The file's content is inconsistent: a bounds check on a page failed.
    Corrupted {
        /// The page where it was found (`u64::MAX` when not on a page).
        pgno: u64,
        /// What was wrong.
        what: &'static str,
    },
    /// A previous fatal error left the environment unusable until it is reopened.
    Panic(&'static str),
    /// The file has a data version ferrocore does not read.
    VersionMismatch {
        /// The version the file has.
        found: u32,
    },
    /// The file is not an LMDB/ferrocore data file (bad magic, bad page size, ...).
    Invalid(&'static str),
    /// The map size limit set by the application is reached.
    MapFull,
    /// `max_dbs` named databases are already open.
    DbsFull,
    /// Every reader slot is taken.
    ReadersFull,
    /// The transaction has too many dirty pages.
    TxnFull,
    /// The cursor stack is too deep (tree depth exceeds the bound).
    CursorFull,
    /// A page has no room (internal; should not reach users).
    PageFull,
    /// Another process grew the map beyond this process's mapping.
    MapResized,
    /// The operation is incompatible with the database's flags, or the db exists with others.
    Incompatible,
    /// The reader slot is invalid for this use.
    BadReaderSlot,
    /// The transaction cannot be used: it has ended, failed, or has an active child.
    BadTxn,
    /// A key or value has an unsupported size (empty key, key above the maximum, ...).
    BadValSize {
        /// Which item: key, value, DUPSORT value, ...
        what: &'static str,
        /// Its size.
        size: usize,
        /// The largest size allowed.
        max: usize,
    },
    /// The database handle is unknown or was closed/dropped.
    BadDbi,
    /// An argument is invalid (`EINVAL`).
    InvalidArgument(&'static str),
    /// Input to a bulk load (`WriteTxn::bulk_loader`) is not in the DB's order: item
    /// `index` (counting from 0) is not after the one before it, as `what` says. Reported
    /// through the C ABI as `MDB_KEYEXIST`, the code LMDB's `MDB_APPEND` gives out-of-order
    /// input.
    Unsorted {
        /// The item's position in the input, from 0.
        index: u64,
        /// What is out of order.
        what: &'static str,
    },
    /// An operating system error.
    Io(io::Error),
    /// A commit failed at `step` with the OS error `source`; the txn must be aborted, and
    /// if [`CommitStep::failure_poisons`] the environment refuses writes until reopened.
    Commit {
        /// The step that failed.
        step: CommitStep,
        /// The error the OS gave.
        source: io::Error,
    },
}

impl Error {
    /// The LMDB error code (or errno value) this error is reported as through the C ABI.
    pub fn lmdb_code(&self) -> i32 {
        match self {
            Error::KeyExist => -30799,
            Error::NotFound => -30798,
            Error::PageNotFound { .. } => -30797,
            Error::Corrupted { .. } => -30796,
            Error::Panic(_) => -30795,
            Error::VersionMismatch { .. } => -30794,
            Error::Invalid(_) => -30793,
            Error::MapFull => -30792,
            Error::DbsFull => -30791,
            Error::ReadersFull => -30790,
            Error::TxnFull => -30788,
            Error::CursorFull => -30787,
            Error::PageFull => -30786,
            Error::MapResized => -30785,
            Error::Incompatible => -30784,
            Error::BadReaderSlot => -30783,
            Error::BadTxn => -30782,
            Error::BadValSize { .. } => -30781,
            Error::BadDbi => -30780,
            Error::InvalidArgument(_) => libc::EINVAL,
            Error::Unsorted { .. } => -30799,
            Error::Io(e) | Error::Commit { source: e, .. } => e.raw_os_error().unwrap_or(libc::EIO),
        }
    }

    /// Shorthand for a corruption found on page `pgno`.
    pub(crate) fn corrupted(pgno: u64, what: &'static str) -> Error {
        Error::Corrupted { pgno, what }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::KeyExist => write!(f, "MDB_KEYEXIST: Key/data pair already exists"),
            Error::NotFound => write!(f, "MDB_NOTFOUND: No matching key/data pair found"),
            Error::PageNotFound { pgno } => {
                write!(f, "MDB_PAGE_NOTFOUND: Requested page not found (page {pgno})")
            }
            Error::Corrupted { pgno, what } => {
                write!(f, "MDB_CORRUPTED: Located page was wrong type (page {pgno}: {what})")
            }
            Error::Panic(why) => write!(f, "MDB_PANIC: Update of meta page failed or environment had fatal error ({why})"),
            Error::VersionMismatch { found } => write!(
                f,
                "MDB_VERSION_MISMATCH: Database environment version mismatch (found {found})"
            ),
            Error::Invalid(why) => write!(f, "MDB_INVALID: File is not an LMDB file ({why})"),
            Error::MapFull => write!(f, "MDB_MAP_FULL: Environment mapsize limit reached"),
            Error::DbsFull => write!(f, "MDB_DBS_FULL: Environment maxdbs limit reached"),
            Error::ReadersFull => write!(f, "MDB_READERS_FULL: Environment maxreaders limit reached"),
            Error::TxnFull => write!(f, "MDB_TXN_FULL: Transaction has too many dirty pages"),
            Error::CursorFull => write!(f, "MDB_CURSOR_FULL: Internal error - cursor stack limit reached"),
            Error::PageFull => write!(f, "MDB_PAGE_FULL: Internal error - page has no more space"),
            Error::MapResized => write!(f, "MDB_MAP_RESIZED: Database contents grew beyond environment mapsize"),
            Error::Incompatible => write!(f, "MDB_INCOMPATIBLE: Operation and DB incompatible, or DB flags changed"),
            Error::BadReaderSlot => write!(f, "MDB_BAD_RSLOT: Invalid reuse of reader locktable slot"),
            Error::BadTxn => write!(f, "MDB_BAD_TXN: Transaction must abort, has a child, or is invalid"),
            Error::BadValSize { what, size, max } => write!(
                f,
                "MDB_BAD_VALSIZE: Unsupported size of key/DB name/data, or wrong DUPFIXED size ({what}: {size} bytes, allowed 1..={max})"
            ),
            Error::BadDbi => write!(f, "MDB_BAD_DBI: The specified DBI handle was closed/changed unexpectedly"),
            Error::InvalidArgument(why) => write!(f, "Invalid argument: {why}"),
            Error::Unsorted { index, what } => write!(
                f,
                "bulk load input out of order: item {index} (counting from 0): {what}"
            ),
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Commit { step, source } => {
                let after = if step.failure_poisons() {
                    "the environment refuses writes until it is reopened"
                } else {
                    "the last commit stands"
                };
                write!(f, "commit failed {}: {source}; {after}", step.describe())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) | Error::Commit { source: e, .. } => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

/// A step of the commit's I/O, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommitStep {
    /// Growing the file to cover every page the new meta counts (when the data write
    /// does not: see the `commit` module).
    GrowFile,
    /// Writing the txn's dirty pages.
    WriteData,
    /// Flushing the data pages to the disk.
    FlushData,
    /// Writing the meta page.
    WriteMeta,
    /// Flushing the meta page to the disk.
    FlushMeta,
}

impl CommitStep {
    /// Every step, in order.
    pub const ALL: [CommitStep; 5] = [
        CommitStep::GrowFile,
        CommitStep::WriteData,
        CommitStep::FlushData,
        CommitStep::WriteMeta,
        CommitStep::FlushMeta,
    ];

    /// Whether a failure at this step poisons the environment (the table in `commit`).
    pub fn failure_poisons(self) -> bool {
        !matches!(self, CommitStep::WriteData | CommitStep::GrowFile)
    }

    /// What the step does, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            CommitStep::WriteData => "writing the data pages",
            CommitStep::GrowFile => "growing the data file",
            CommitStep::FlushData => "flushing the data pages",
            CommitStep::WriteMeta => "writing the meta page",
            CommitStep::FlushMeta => "flushing the meta page",
        }
    }
}
