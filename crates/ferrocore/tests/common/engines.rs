//! ferrocore and LMDB behind one small set of traits, so that a test routine that drives
//! either engine (apply changes, walk a DB with every cursor move, read its stats) is
//! written once. The LMDB side goes through the wrapper in [`super::lmdb`].
//!
//! Each method is one call of the engine's API; results come back in terms both engines
//! share ([`Fail`], [`StatTuple`], owned pairs). Where the engines' APIs differ the
//! difference is named here ([`KvCursor::DUP_EDGE_KEY`], [`Engine::check_env`]), not
//! smoothed over.

use std::ffi::CStr;
use std::path::Path;

use ferrocore::{db_flags, Database, Error, ReadTxn, WriteCursor, WriteTxn};

use super::lmdb::{self, ffi};
use super::{stat_tuple_fc, stat_tuple_lm, Pair, LMDB_MAP_SIZE};

/// A DB's figures: (page size, depth, branch, leaf and overflow pages, entries).
pub type StatTuple = (u32, u32, u64, u64, u64, u64);

/// How an operation failed, in the terms both engines share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fail {
    /// `MDB_NOTFOUND` / `Error::NotFound`.
    NotFound,
    /// `MDB_KEYEXIST` / `Error::KeyExist`.
    KeyExist,
    /// Anything else, as the engine describes it.
    Other(String),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        match e {
            Error::NotFound => Fail::NotFound,
            Error::KeyExist => Fail::KeyExist,
            e => Fail::Other(format!("{e:?}")),
        }
    }
}

/// LMDB's return code `rc` (not `MDB_SUCCESS`) as a [`Fail`].
fn lm_fail(rc: i32) -> Fail {
    match rc {
        ffi::MDB_NOTFOUND => Fail::NotFound,
        ffi::MDB_KEYEXIST => Fail::KeyExist,
        rc => {
            // SAFETY: mdb_strerror returns a static NUL-terminated string for any code.
            let msg = unsafe { CStr::from_ptr(ffi::mdb_strerror(rc)) };
            Fail::Other(format!("{rc} ({})", msg.to_string_lossy()))
        }
    }
}

/// A cursor operation that answers with an item (LMDB's `MDB_cursor_op` names).
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    First,
    Last,
    Next,
    Prev,
    NextDup,
    PrevDup,
    NextNodup,
    PrevNodup,
    FirstDup,
    LastDup,
    /// `MDB_GET_CURRENT`.
    Current,
    /// `MDB_SET_KEY`.
    Set(&'a [u8]),
    SetRange(&'a [u8]),
    GetBoth(&'a [u8], &'a [u8]),
    GetBothRange(&'a [u8], &'a [u8]),
}

/// An open environment of one engine.
pub trait Engine: Sized {
    /// For messages.
    const NAME: &'static str;
    /// A DB handle.
    type Dbi: Copy;
    type Read<'e>: KvTxn<Dbi = Self::Dbi>
    where
        Self: 'e;
    type Write<'e>: KvWriteTxn<Dbi = Self::Dbi>
    where
        Self: 'e;

    /// Opens (creating if needed) the environment in directory `path` with room for
    /// `max_dbs` named DBs. Only this test may touch the directory, and the other engine
    /// must have it closed.
    /// The handle of the free DB (read-only).
    fn free_db() -> Self::Dbi;
    fn open_env(path: &Path, max_dbs: u32) -> Self;
    fn read_txn(&self) -> Self::Read<'_>;
    fn write_txn(&self) -> Self::Write<'_>;
    /// The integrity check's count of named DBs, or its error; `None` for an engine
    /// without one (LMDB).
    fn check_env(&self) -> Option<Result<u64, String>>;
}

/// What a read txn (or a write txn, for reading) offers.
pub trait KvTxn {
    type Dbi: Copy;
    type Cur<'t>: KvCursor
    where
        Self: 't;

    /// Opens DB `name` (`None`: the main DB) with `flags` (`db_flags`, with
    /// `db_flags::CREATE`, which is LMDB's `MDB_CREATE`); read txns take no flags.
    fn open_dbi(&mut self, name: Option<&str>, flags: u32) -> Result<Self::Dbi, Fail>;
    /// The DB's flags as stored (`db_flags`).
    fn stored_flags(&self, db: Self::Dbi) -> u32;
    fn cursor_ro(&self, db: Self::Dbi) -> Self::Cur<'_>;
    /// `get`: the (first) value of `key`.
    fn first_value(&self, db: Self::Dbi, key: &[u8]) -> Option<Vec<u8>>;
    fn stat_of(&self, db: Self::Dbi) -> StatTuple;
}

/// What a write txn adds. Dropping it aborts it.
pub trait KvWriteTxn: KvTxn {
    type WriteCur<'t>: KvWriteCursor
    where
        Self: 't;

    fn cursor_rw(&mut self, db: Self::Dbi) -> Self::WriteCur<'_>;
    fn put_item(&mut self, db: Self::Dbi, key: &[u8], val: &[u8], flags: u32) -> Result<(), Fail>;
    /// Deletes every value of `key` (`val` `None`) or one pair; false if absent.
    fn del_item(&mut self, db: Self::Dbi, key: &[u8], val: Option<&[u8]>) -> Result<bool, Fail>;
    fn commit_txn(self);
}

/// A cursor.
pub trait KvCursor {
    /// Whether FIRST_DUP and LAST_DUP hand back the key with the value. ferrocore does;
    /// LMDB fills in only the value when the key has several.
    const DUP_EDGE_KEY: bool;

    /// The item `op` lands on; `Ok(None)` for "nothing there" (`MDB_NOTFOUND`).
    fn get(&mut self, op: Op<'_>) -> Result<Option<Pair>, Fail>;
    /// How many values the current key has (`mdb_cursor_count`).
    fn count_values(&mut self) -> Result<u64, Fail>;

    /// [`KvCursor::get`], which must not fail.
    fn item(&mut self, op: Op<'_>) -> Option<Pair> {
        self.get(op)
            .unwrap_or_else(|e| panic!("cursor {op:?} failed: {e:?}"))
    }

    /// [`KvCursor::count_values`], which must not fail.
    fn count(&mut self) -> u64 {
        self.count_values()
            .unwrap_or_else(|e| panic!("cursor count failed: {e:?}"))
    }
}

/// A cursor of a write txn.
pub trait KvWriteCursor: KvCursor {
    /// Deletes the current pair, or every value of the current key (`all`: NODUPDATA).
    fn del_current(&mut self, all: bool) -> Result<(), Fail>;
}

// ---------------------------------------------------------------------------------------
// ferrocore.
// ---------------------------------------------------------------------------------------

impl Engine for ferrocore::Env {
    const NAME: &'static str = "ferrocore";
    type Dbi = Database;
    type Read<'e> = ReadTxn<'e>;
    type Write<'e> = WriteTxn<'e>;

    fn free_db() -> Self::Dbi {
        Database::FREE
    }

    fn open_env(path: &Path, max_dbs: u32) -> Self {
        super::open_env(path, ferrocore::EnvOptions::new().max_dbs(max_dbs))
    }

    fn read_txn(&self) -> ReadTxn<'_> {
        self.begin_read().expect("ferrocore begin_read")
    }

    fn write_txn(&self) -> WriteTxn<'_> {
        self.begin_write().expect("ferrocore begin_write")
    }

    fn check_env(&self) -> Option<Result<u64, String>> {
        Some(
            self.check()
                .map(|r| r.named_dbs)
                .map_err(|e| format!("{e:?}")),
        )
    }
}

/// The reading half of [`KvTxn`] for ferrocore's read and write txns (same method names).
macro_rules! fc_reads {
    () => {
        type Dbi = Database;
        type Cur<'t>
            = ferrocore::Cursor<'t>
        where
            Self: 't;

        fn stored_flags(&self, db: Database) -> u32 {
            self.db_flags(db).expect("ferrocore db_flags") as u32
        }

        fn cursor_ro(&self, db: Database) -> ferrocore::Cursor<'_> {
            self.cursor(db).expect("ferrocore cursor")
        }

        fn first_value(&self, db: Database, key: &[u8]) -> Option<Vec<u8>> {
            self.get(db, key)
                .expect("ferrocore get")
                .map(<[u8]>::to_vec)
        }

        fn stat_of(&self, db: Database) -> StatTuple {
            stat_tuple_fc(&self.db_stat(db).expect("ferrocore db_stat"))
        }
    };
}

impl KvTxn for ReadTxn<'_> {
    fc_reads!();

    fn open_dbi(&mut self, name: Option<&str>, flags: u32) -> Result<Database, Fail> {
        assert_eq!(flags, 0, "a read txn opens DBs without flags");
        Ok(self.open_db(name)?)
    }
}

impl KvTxn for WriteTxn<'_> {
    fc_reads!();

    fn open_dbi(&mut self, name: Option<&str>, flags: u32) -> Result<Database, Fail> {
        Ok(self.open_db(name, flags)?)
    }
}

impl<'env> KvWriteTxn for WriteTxn<'env> {
    type WriteCur<'t>
        = WriteCursor<'t, 'env>
    where
        Self: 't;

    fn cursor_rw(&mut self, db: Database) -> WriteCursor<'_, 'env> {
        self.cursor_mut(db).expect("ferrocore cursor_mut")
    }

    fn put_item(&mut self, db: Database, key: &[u8], val: &[u8], flags: u32) -> Result<(), Fail> {
        Ok(self.put(db, key, val, flags)?)
    }

    fn del_item(&mut self, db: Database, key: &[u8], val: Option<&[u8]>) -> Result<bool, Fail> {
        Ok(self.delete_value(db, key, val)?)
    }

    fn commit_txn(self) {
        self.commit().expect("ferrocore commit");
    }
}

/// [`KvCursor`] for ferrocore's read and write cursors (same method names).
macro_rules! fc_cursor {
    () => {
        const DUP_EDGE_KEY: bool = true;

        fn get(&mut self, op: Op<'_>) -> Result<Option<Pair>, Fail> {
            let r = match op {
                Op::First => self.first(),
                Op::Last => self.last(),
                Op::Next => self.next(),
                Op::Prev => self.prev(),
                Op::NextDup => self.next_dup(),
                Op::PrevDup => self.prev_dup(),
                Op::NextNodup => self.next_nodup(),
                Op::PrevNodup => self.prev_nodup(),
                Op::FirstDup => self.first_dup(),
                Op::LastDup => self.last_dup(),
                Op::Current => self.current(),
                Op::Set(k) => self.set(k),
                Op::SetRange(k) => self.set_range(k),
                Op::GetBoth(k, v) => self.get_both(k, v),
                Op::GetBothRange(k, v) => self.get_both_range(k, v),
            };
            Ok(r?.map(|(k, v)| (k.to_vec(), v.to_vec())))
        }

        fn count_values(&mut self) -> Result<u64, Fail> {
            Ok(self.count()?)
        }
    };
}

impl KvCursor for ferrocore::Cursor<'_> {
    fc_cursor!();
}

impl KvCursor for WriteCursor<'_, '_> {
    fc_cursor!();
}

impl KvWriteCursor for WriteCursor<'_, '_> {
    fn del_current(&mut self, all: bool) -> Result<(), Fail> {
        let flags = if all {
            ferrocore::put_flags::NO_DUP_DATA
        } else {
            0
        };
        Ok(self.delete(flags)?)
    }
}

// ---------------------------------------------------------------------------------------
// LMDB.
// ---------------------------------------------------------------------------------------

impl Engine for lmdb::Env {
    const NAME: &'static str = "LMDB";
    type Dbi = ffi::MDB_dbi;
    type Read<'e> = lmdb::Txn<'e>;
    type Write<'e> = lmdb::Txn<'e>;

    fn free_db() -> Self::Dbi {
        lmdb::FREE_DBI
    }

    fn open_env(path: &Path, max_dbs: u32) -> Self {
        lmdb::Env::open_with_max_dbs(path, LMDB_MAP_SIZE, max_dbs)
    }

    fn read_txn(&self) -> lmdb::Txn<'_> {
        self.begin(false)
    }

    fn write_txn(&self) -> lmdb::Txn<'_> {
        self.begin(true)
    }

    fn check_env(&self) -> Option<Result<u64, String>> {
        None
    }
}

impl KvTxn for lmdb::Txn<'_> {
    type Dbi = ffi::MDB_dbi;
    type Cur<'t>
        = lmdb::Cursor<'t>
    where
        Self: 't;

    fn open_dbi(&mut self, name: Option<&str>, flags: u32) -> Result<ffi::MDB_dbi, Fail> {
        const _: () = assert!(db_flags::CREATE == ffi::MDB_CREATE);
        self.open_db(name, flags).map_err(lm_fail)
    }

    fn stored_flags(&self, db: ffi::MDB_dbi) -> u32 {
        // The low 16 bits are the flags stored in the DB record.
        self.dbi_flags(db) & 0xffff
    }

    fn cursor_ro(&self, db: ffi::MDB_dbi) -> lmdb::Cursor<'_> {
        self.cursor(db)
    }

    fn first_value(&self, db: ffi::MDB_dbi, key: &[u8]) -> Option<Vec<u8>> {
        self.get(db, key)
    }

    fn stat_of(&self, db: ffi::MDB_dbi) -> StatTuple {
        stat_tuple_lm(&self.db_stat(db))
    }
}

impl KvWriteTxn for lmdb::Txn<'_> {
    type WriteCur<'t>
        = lmdb::Cursor<'t>
    where
        Self: 't;

    fn cursor_rw(&mut self, db: ffi::MDB_dbi) -> lmdb::Cursor<'_> {
        self.cursor(db)
    }

    fn put_item(
        &mut self,
        db: ffi::MDB_dbi,
        key: &[u8],
        val: &[u8],
        flags: u32,
    ) -> Result<(), Fail> {
        match self.put(db, key, val, flags) {
            ffi::MDB_SUCCESS => Ok(()),
            rc => Err(lm_fail(rc)),
        }
    }

    fn del_item(&mut self, db: ffi::MDB_dbi, key: &[u8], val: Option<&[u8]>) -> Result<bool, Fail> {
        // The wrapper panics on errors other than MDB_NOTFOUND.
        Ok(self.del(db, key, val))
    }

    fn commit_txn(self) {
        self.commit();
    }
}

impl KvCursor for lmdb::Cursor<'_> {
    const DUP_EDGE_KEY: bool = false;

    fn get(&mut self, op: Op<'_>) -> Result<Option<Pair>, Fail> {
        let (code, key, data) = match op {
            Op::First => (ffi::MDB_FIRST, None, None),
            Op::Last => (ffi::MDB_LAST, None, None),
            Op::Next => (ffi::MDB_NEXT, None, None),
            Op::Prev => (ffi::MDB_PREV, None, None),
            Op::NextDup => (ffi::MDB_NEXT_DUP, None, None),
            Op::PrevDup => (ffi::MDB_PREV_DUP, None, None),
            Op::NextNodup => (ffi::MDB_NEXT_NODUP, None, None),
            Op::PrevNodup => (ffi::MDB_PREV_NODUP, None, None),
            Op::FirstDup => (ffi::MDB_FIRST_DUP, None, None),
            Op::LastDup => (ffi::MDB_LAST_DUP, None, None),
            Op::Current => (ffi::MDB_GET_CURRENT, None, None),
            Op::Set(k) => (ffi::MDB_SET_KEY, Some(k), None),
            Op::SetRange(k) => (ffi::MDB_SET_RANGE, Some(k), None),
            Op::GetBoth(k, v) => (ffi::MDB_GET_BOTH, Some(k), Some(v)),
            Op::GetBothRange(k, v) => (ffi::MDB_GET_BOTH_RANGE, Some(k), Some(v)),
        };
        self.try_get(code, key, data).map_err(lm_fail)
    }

    fn count_values(&mut self) -> Result<u64, Fail> {
        self.try_count().map_err(lm_fail)
    }
}

impl KvWriteCursor for lmdb::Cursor<'_> {
    fn del_current(&mut self, all: bool) -> Result<(), Fail> {
        let flags = if all { ffi::MDB_NODUPDATA } else { 0 };
        match self.del(flags) {
            ffi::MDB_SUCCESS => Ok(()),
            rc => Err(lm_fail(rc)),
        }
    }
}
