//! The engines under test behind one small trait, so each workload is written once.
//!
//! Every method is one engine-level operation as its documentation recommends doing it:
//! one write transaction per `put_batch`, one read transaction (snapshot) per `get_all`,
//! and so on. Keys and values come from the harness; engines only store and look up.

pub mod ferro;
pub mod lmdb;
pub mod redb;
pub mod sqlite;

use std::path::Path;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::data::{IndexedEntry, Keys};

/// The engines and variants a workload can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum Kind {
    Ferrocore,
    /// ferrocore with WRITE_MAP (write txns build their pages in a writable shared map).
    FerrocoreWritemap,
    Lmdb,
    /// LMDB with MDB_WRITEMAP (writes go straight into a writable shared map).
    LmdbWritemap,
    Redb,
    Sqlite,
    /// ferrocore through its C ABI: its `liblmdb.so`, driven by the same C calls as LMDB.
    FerrocoreC,
    /// Debian's LMDB C library (`liblmdb.so.0`, 0.9.24), loaded at run time.
    LmdbDebian,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Ferrocore => "ferrocore",
            Kind::FerrocoreWritemap => "ferrocore WRITEMAP",
            Kind::Lmdb => "LMDB",
            Kind::LmdbWritemap => "LMDB WRITEMAP",
            Kind::Redb => "redb",
            Kind::Sqlite => "SQLite",
            Kind::FerrocoreC => "ferrocore C ABI",
            Kind::LmdbDebian => "LMDB 0.9.24 .so",
        }
    }

    /// The name used on the command line and in JSON.
    pub fn short(self) -> &'static str {
        match self {
            Kind::Ferrocore => "ferrocore",
            Kind::FerrocoreWritemap => "ferrocore-writemap",
            Kind::Lmdb => "lmdb",
            Kind::LmdbWritemap => "lmdb-writemap",
            Kind::Redb => "redb",
            Kind::Sqlite => "sqlite",
            Kind::FerrocoreC => "ferrocore-c",
            Kind::LmdbDebian => "lmdb-debian",
        }
    }

    /// The engines every workload runs on.
    pub const MAIN: [Kind; 4] = [Kind::Ferrocore, Kind::Lmdb, Kind::Redb, Kind::Sqlite];
    /// The bulk loaders: ferrocore's bottom-up loader against LMDB's MDB_APPEND (W2 bulk).
    pub const BULK: [Kind; 3] = [Kind::Ferrocore, Kind::Lmdb, Kind::LmdbWritemap];
    /// With the WRITEMAP variants, for the workloads where LMDB's WRITEMAP matters (W2,
    /// W6, W7).
    pub const WITH_WRITEMAP: [Kind; 6] = [
        Kind::Ferrocore,
        Kind::FerrocoreWritemap,
        Kind::Lmdb,
        Kind::LmdbWritemap,
        Kind::Redb,
        Kind::Sqlite,
    ];
}

/// True if `FERROBENCH_NO_READAHEAD` is set: ferrocore and LMDB then open with
/// `NO_READAHEAD` / `MDB_NORDAHEAD` (the map advised `MADV_RANDOM`), to measure what the
/// advice does (for instance to `WRITE_MAP`'s synced commits on a large file).
pub fn no_readahead() -> bool {
    std::env::var_os("FERROBENCH_NO_READAHEAD").is_some()
}

/// How to open an engine for a workload.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Synced commits (ferrocore/LMDB without NOSYNC, redb `Durability::Immediate`,
    /// SQLite `synchronous=FULL`); otherwise commits are not synced (ferrocore/LMDB
    /// NOSYNC, redb `Durability::None`, SQLite `synchronous=NORMAL` in WAL mode) and the
    /// workload calls `sync` where it needs durability.
    pub sync: bool,
    /// Upper bound on the data the workload writes, in bytes; LMDB's map is sized from it
    /// (the other engines grow their files on their own).
    pub data_bytes: u64,
    /// Index DBs for W7 (0 otherwise).
    pub indexes: usize,
}

/// One engine, opened on a directory.
pub trait Engine {
    /// One write transaction putting every key with `value`, then commit. `append`: the
    /// keys are sorted and beyond every stored key (LMDB's and ferrocore's APPEND flag;
    /// engines without an append mode insert normally).
    fn put_batch(&mut self, keys: Keys<'_>, value: &[u8], append: bool);
    /// One write transaction loading the sorted `keys` (each with `value`) into the empty
    /// main DB, then commit: the engine's fastest way to fill a DB from sorted data
    /// (ferrocore's bottom-up bulk loader; elsewhere puts with the APPEND flag).
    fn bulk_load(&mut self, keys: Keys<'_>, value: &[u8]) {
        self.put_batch(keys, value, true);
    }
    /// One write transaction deleting every key, then commit.
    fn delete_batch(&mut self, keys: Keys<'_>);
    /// One read transaction looking up every key; returns the total value bytes found.
    fn get_all(&self, keys: Keys<'_>) -> u64;
    /// One read transaction per key, as a server answers a request: begin, get, end. With
    /// `renew`, one transaction handle is reset after each get and renewed before the next
    /// (LMDB's `mdb_txn_reset` and `mdb_txn_renew`, which reuse the handle and its reader
    /// slot). Total value bytes found. Engines without a reset: a txn per key either way.
    fn get_each_in_own_txn(&self, keys: Keys<'_>, renew: bool) -> u64 {
        let _ = renew;
        keys.chunks(1).map(|one| self.get_all(one)).sum()
    }
    /// One thread per part, each with its own read transaction; total value bytes found.
    fn get_parallel(&self, parts: &[Keys<'_>]) -> u64;
    /// Prepares what `get_parallel` with `threads` threads needs, outside the timing
    /// (SQLite: one connection per thread).
    fn prepare_readers(&mut self, _threads: usize) {}
    /// Full scan in key order in one read transaction; entries seen.
    fn scan(&self) -> u64;
    /// For each start key, position at the first key >= it and read up to `len` entries,
    /// all in one read transaction; total entries read.
    fn range_reads(&self, starts: Keys<'_>, len: usize) -> u64;
    /// W7: one write transaction putting each entry's record (`record`) in the main DB
    /// (APPEND where the engine has it: IDs ascend) and its ID under each index key.
    fn indexed_batch(&mut self, entries: &[IndexedEntry], record: &[u8]);
    /// Makes every commit so far durable (after a no-sync load).
    fn sync(&mut self);
    /// Switches between synced and unsynced commits (W6 prefills without syncs).
    fn set_sync(&mut self, on: bool);
}

pub fn open(kind: Kind, dir: &Path, cfg: Config) -> Box<dyn Engine> {
    match kind {
        Kind::Ferrocore => Box::new(ferro::Ferro::open(dir, cfg, false)),
        Kind::FerrocoreWritemap => Box::new(ferro::Ferro::open(dir, cfg, true)),
        Kind::Lmdb => Box::new(lmdb::Lmdb::open(dir, cfg, false, lmdb::Library::Linked)),
        Kind::LmdbWritemap => Box::new(lmdb::Lmdb::open(dir, cfg, true, lmdb::Library::Linked)),
        Kind::FerrocoreC => Box::new(lmdb::Lmdb::open(dir, cfg, false, lmdb::Library::Ferrocore)),
        Kind::LmdbDebian => Box::new(lmdb::Lmdb::open(dir, cfg, false, lmdb::Library::System)),
        Kind::Redb => Box::new(redb::Redb::open(dir, cfg)),
        Kind::Sqlite => Box::new(sqlite::Sqlite::open(dir, cfg)),
    }
}

/// Names of the W7 index DBs/tables.
pub const INDEX_NAMES: [&str; 10] = [
    "idx0", "idx1", "idx2", "idx3", "idx4", "idx5", "idx6", "idx7", "idx8", "idx9",
];
