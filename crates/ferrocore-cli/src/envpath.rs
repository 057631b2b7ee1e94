//! The environment a command names: where its files are, opening it with a one-line message
//! for a path that is not one, and the few figures the LMDB tools compute from it.

use std::io;
use std::path::{Path, PathBuf};

use ferrocore::raw::{DbRecord, Meta};
use ferrocore::{env_flags, Database, Env, EnvOptions, Error, ReadTxn};

use crate::failure::{Failure, Outcome};

/// An environment's path as the LMDB tools take it: a directory holding `data.mdb` and
/// `lock.mdb`, or with `-n` (`MDB_NOSUBDIR`) the data file itself, its lock file beside it
/// as `PATH-lock`.
#[derive(Clone, Debug)]
pub struct EnvPath {
    pub path: PathBuf,
    pub no_subdir: bool,
}

impl EnvPath {
    pub fn new(path: PathBuf, no_subdir: bool) -> EnvPath {
        EnvPath { path, no_subdir }
    }

    /// The data file.
    pub fn data_file(&self) -> PathBuf {
        if self.no_subdir {
            self.path.clone()
        } else {
            self.path.join("data.mdb")
        }
    }

    /// The lock file.
    pub fn lock_file(&self) -> PathBuf {
        if self.no_subdir {
            let mut lock = self.path.as_os_str().to_owned();
            lock.push("-lock");
            PathBuf::from(lock)
        } else {
            self.path.join("lock.mdb")
        }
    }

    /// Checks that an environment exists here before opening it, so that a wrong path gets
    /// a message saying what is wrong (and no lock file is left in a directory that holds
    /// no environment).
    pub fn require_existing(&self) -> Outcome {
        let shown = self.path.display();
        let meta = std::fs::metadata(&self.path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Failure::new(format!("{shown}: no such environment")),
            _ => Failure::new(format!("{shown}: {e}")),
        })?;
        if self.no_subdir {
            if meta.is_dir() {
                return Err(Failure::new(format!(
                    "{shown}: is a directory (without -n the path is the environment's directory)"
                )));
            }
            return Ok(());
        }
        if !meta.is_dir() {
            return Err(Failure::new(format!(
                "{shown}: not a directory (with -n the path is the data file itself)"
            )));
        }
        match std::fs::metadata(self.data_file()) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Failure::new(format!(
                "{shown}: not an environment (no data.mdb in it)"
            ))),
            Err(e) => Err(Failure::new(format!("{}: {e}", self.data_file().display()))),
        }
    }

    /// Environment flags for these files, plus `extra`.
    pub fn flags(&self, extra: u32) -> u32 {
        extra
            | if self.no_subdir {
                env_flags::NO_SUB_DIR
            } else {
                0
            }
    }

    /// Opens an existing environment, read-only or for writing, with room for `max_dbs`
    /// named DB handles at a time.
    pub fn open_existing(&self, read_only: bool, max_dbs: u32) -> Outcome<Env> {
        self.require_existing()?;
        let flags = self.flags(if read_only { env_flags::READ_ONLY } else { 0 });
        let lock_existed = self.lock_file().exists();
        let opened = self.open_with(EnvOptions::new().flags(flags).max_dbs(max_dbs));
        if opened.is_err() && !lock_existed {
            // Opening made a lock file beside something that is not an environment.
            let _ = std::fs::remove_file(self.lock_file());
        }
        opened
    }

    /// Opens an existing environment read-only with a handle for each of its named DBs
    /// (with `all`), else for one: the `-a` of `mdb_dump` and `mdb_stat` opens them all in one
    /// read txn. The count is read first, then the environment opened again with room for
    /// exactly that many (handles cost memory for the environment's life).
    ///
    /// The handles are not closed and reused as `mdb_dump` does it (two handles, each closed
    /// after use): in ferrocore a read txn that reopens a closed handle's number for another
    /// DB still sees the first DB's record.
    pub fn open_for_reading(&self, all: bool) -> Outcome<Env> {
        if !all {
            return self.open_existing(true, 1);
        }
        let count = {
            let env = self.open_existing(true, 0)?;
            let txn = env.begin_read().map_err(|e| self.failure(e))?;
            candidate_names(&txn).map_err(|e| self.failure(e))?.len()
        };
        // A few more, for DBs another process creates meanwhile.
        let room = u32::try_from(count).unwrap_or(u32::MAX).saturating_add(8);
        self.open_existing(true, room)
    }

    /// Opens (creating if needed) the environment with `options`.
    pub fn open_with(&self, options: &EnvOptions) -> Outcome<Env> {
        // SAFETY: the command touches the environment's files only through ferrocore; the
        // user is responsible for nothing truncating them behind it while it runs (the
        // contract of every LMDB tool).
        unsafe { options.open(&self.path) }.map_err(|e| self.failure(e))
    }

    /// An engine error met on this environment, as a one-line failure.
    pub fn failure(&self, e: Error) -> Failure {
        Failure::at(&self.path, e)
    }
}

/// The map size LMDB's `mdb_env_info` reports for an environment it has just opened
/// without setting one: the size recorded in the current meta, raised to the size of the
/// pages in use (LMDB's `mdb_env_open2`). `mdb_dump` prints it as `mapsize=` and
/// `mdb_stat -e` as `Map size:`; the tools here print the same figure.
pub fn lmdb_map_size(meta: &Meta, page_size: usize) -> u64 {
    meta.map_size
        .max((meta.last_pgno + 1).saturating_mul(page_size as u64))
}

/// A named DB found among the main DB's keys.
pub enum Named {
    /// Opened.
    Db(String, Database),
    /// A key that is not a DB (a plain key of the main DB): skipped, as the LMDB tools do.
    NotADb,
    /// A key whose value is a DB record's size but which is not UTF-8: perhaps a DB, but
    /// ferrocore's API names DBs with `&str`, so it cannot be opened here.
    NotUtf8(Vec<u8>),
}

/// A key of the main DB that may name a DB.
pub struct Candidate {
    name: Vec<u8>,
    value_len: usize,
}

/// The main DB's keys that may name DBs, in order, as `mdb_dump -a` and `mdb_stat -a` walk
/// them (`MDB_NEXT_NODUP`): keys holding a NUL byte are skipped, as they do.
pub fn candidate_names(txn: &ReadTxn<'_>) -> ferrocore::Result<Vec<Candidate>> {
    let mut names = Vec::new();
    let mut cursor = txn.cursor(Database::MAIN)?;
    let mut item = cursor.next_nodup()?;
    while let Some((key, value)) = item {
        if !key.contains(&0) {
            names.push(Candidate {
                name: key.to_vec(),
                value_len: value.len(),
            });
        }
        item = cursor.next_nodup()?;
    }
    Ok(names)
}

/// Opens the DB named by main-DB key `candidate`, if it is one.
pub fn open_named(txn: &ReadTxn<'_>, candidate: &Candidate) -> ferrocore::Result<Named> {
    let Ok(text) = std::str::from_utf8(&candidate.name) else {
        // The public API does not tell a DB's record from a plain value of its size.
        return Ok(if candidate.value_len == DbRecord::SIZE {
            Named::NotUtf8(candidate.name.clone())
        } else {
            Named::NotADb
        });
    };
    match txn.open_db(Some(text)) {
        Ok(db) => Ok(Named::Db(text.to_owned(), db)),
        Err(Error::Incompatible | Error::NotFound) => Ok(Named::NotADb),
        Err(e) => Err(e),
    }
}

/// Runs `f` on every named DB among `candidates` (keys that are not DBs skipped, as the
/// LMDB tools skip them). A DB that cannot be opened (a name that is not UTF-8) is
/// reported and the walk goes on; it then fails, since its output is incomplete.
pub fn each_named_db(
    at: &EnvPath,
    txn: &ReadTxn<'_>,
    candidates: &[Candidate],
    mut f: impl FnMut(String, Database) -> Outcome,
) -> Outcome {
    let mut unopenable = None;
    for candidate in candidates {
        match open_named(txn, candidate).map_err(|e| at.failure(e))? {
            Named::Db(name, db) => f(name, db)?,
            Named::NotADb => {}
            Named::NotUtf8(name) => {
                let failure = not_utf8(&at.path, &name);
                eprintln!("ferrocore: {failure}");
                unopenable.get_or_insert(failure);
            }
        }
    }
    unopenable.map_or(Ok(()), Err)
}

/// The failure for a DB name ferrocore cannot open.
pub fn not_utf8(path: &Path, name: &[u8]) -> Failure {
    let hex: String = name.iter().map(|b| format!("{b:02x}")).collect();
    Failure::new(format!(
        "{}: main-DB key {hex} may name a DB (its value has a DB record's size) but is not UTF-8: ferrocore's API cannot open it",
        path.display()
    ))
}
