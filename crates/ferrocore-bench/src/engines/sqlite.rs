//! SQLite (bundled by `rusqlite`): WAL mode, `synchronous=NORMAL` for unsynced commits
//! (in WAL mode a commit then does not fsync; checkpoints do) and `synchronous=FULL` for
//! synced ones, a 64 MiB page cache, a `WITHOUT ROWID` table with a BLOB primary key,
//! prepared (cached) statements, explicit transactions. For W7 the SQLite way: one table
//! with a column per indexed attribute and a secondary index on each. SQLite has no
//! append mode: sorted loads insert normally.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{params, Connection, OpenFlags};

use super::{Config, Engine};
use crate::data::{IndexedEntry, Keys};

pub fn version() -> &'static str {
    rusqlite::version()
}

pub struct Sqlite {
    path: PathBuf,
    conn: Connection,
    indexes: usize,
    /// One connection per reader thread, opened by `prepare_readers` outside the timing.
    readers: Mutex<Vec<Connection>>,
}

fn pragmas(conn: &Connection, sync: bool) {
    conn.execute_batch(&format!(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous={}; PRAGMA cache_size=-65536; \
         PRAGMA temp_store=MEMORY;",
        if sync { "FULL" } else { "NORMAL" }
    ))
    .unwrap();
}

impl Sqlite {
    pub fn open(dir: &Path, cfg: Config) -> Sqlite {
        let path = dir.join("data.sqlite");
        let conn = Connection::open(&path).unwrap();
        pragmas(&conn, cfg.sync);
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID",
        )
        .unwrap();
        if cfg.indexes > 0 {
            let cols: Vec<String> = (0..cfg.indexes).map(|i| format!(", a{i} BLOB")).collect();
            let mut sql = format!(
                "CREATE TABLE entries (id INTEGER PRIMARY KEY, v BLOB{});",
                cols.concat()
            );
            for i in 0..cfg.indexes {
                sql.push_str(&format!("CREATE INDEX ix{i} ON entries(a{i});"));
            }
            conn.execute_batch(&sql).unwrap();
        }
        Sqlite {
            path,
            conn,
            indexes: cfg.indexes,
            readers: Mutex::new(Vec::new()),
        }
    }

    fn read_with(conn: &Connection, keys: Keys<'_>) -> u64 {
        conn.execute_batch("BEGIN").unwrap();
        let mut found = 0u64;
        {
            let mut st = conn
                .prepare_cached("SELECT v FROM kv WHERE k = ?1")
                .unwrap();
            for k in keys.iter() {
                let mut rows = st.query([k]).unwrap();
                if let Some(row) = rows.next().unwrap() {
                    found += row.get_ref(0).unwrap().as_blob().unwrap().len() as u64;
                }
            }
        }
        conn.execute_batch("COMMIT").unwrap();
        found
    }
}

impl Engine for Sqlite {
    fn put_batch(&mut self, keys: Keys<'_>, value: &[u8], _append: bool) {
        let txn = self.conn.transaction().unwrap();
        {
            let mut st = txn
                .prepare_cached("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)")
                .unwrap();
            for k in keys.iter() {
                st.execute(params![k, value]).unwrap();
            }
        }
        txn.commit().unwrap();
    }

    fn delete_batch(&mut self, keys: Keys<'_>) {
        let txn = self.conn.transaction().unwrap();
        {
            let mut st = txn.prepare_cached("DELETE FROM kv WHERE k = ?1").unwrap();
            for k in keys.iter() {
                st.execute([k]).unwrap();
            }
        }
        txn.commit().unwrap();
    }

    fn get_all(&self, keys: Keys<'_>) -> u64 {
        Self::read_with(&self.conn, keys)
    }

    fn prepare_readers(&mut self, threads: usize) {
        let mut readers = self.readers.lock().unwrap();
        while readers.len() < threads {
            let c = Connection::open_with_flags(
                &self.path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .unwrap();
            c.execute_batch("PRAGMA cache_size=-65536").unwrap();
            readers.push(c);
        }
    }

    fn get_parallel(&self, parts: &[Keys<'_>]) -> u64 {
        let mut conns = std::mem::take(&mut *self.readers.lock().unwrap());
        assert!(conns.len() >= parts.len(), "prepare_readers first");
        let (total, conns) = std::thread::scope(|s| {
            let handles: Vec<_> = parts
                .iter()
                .map(|&part| {
                    let c = conns.pop().unwrap();
                    s.spawn(move || (Self::read_with(&c, part), c))
                })
                .collect();
            let mut total = 0;
            let mut back = Vec::new();
            for h in handles {
                let (n, c) = h.join().unwrap();
                total += n;
                back.push(c);
            }
            (total, back)
        });
        self.readers.lock().unwrap().extend(conns);
        total
    }

    fn scan(&self) -> u64 {
        self.conn.execute_batch("BEGIN").unwrap();
        let mut n = 0;
        {
            let mut st = self
                .conn
                .prepare_cached("SELECT k, v FROM kv ORDER BY k")
                .unwrap();
            let mut rows = st.query([]).unwrap();
            while let Some(row) = rows.next().unwrap() {
                let _ = row.get_ref(1).unwrap();
                n += 1;
            }
        }
        self.conn.execute_batch("COMMIT").unwrap();
        n
    }

    fn range_reads(&self, starts: Keys<'_>, len: usize) -> u64 {
        self.conn.execute_batch("BEGIN").unwrap();
        let mut n = 0;
        {
            let mut st = self
                .conn
                .prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?2")
                .unwrap();
            for k in starts.iter() {
                let mut rows = st.query(params![k, len as i64]).unwrap();
                while let Some(row) = rows.next().unwrap() {
                    let _ = row.get_ref(1).unwrap();
                    n += 1;
                }
            }
        }
        self.conn.execute_batch("COMMIT").unwrap();
        n
    }

    fn indexed_batch(&mut self, entries: &[IndexedEntry], record: &[u8]) {
        let cols: String = (0..self.indexes).map(|i| format!(", a{i}")).collect();
        let marks: String = (0..self.indexes).map(|i| format!(", ?{}", i + 3)).collect();
        let sql = format!("INSERT INTO entries (id, v{cols}) VALUES (?1, ?2{marks})");
        let txn = self.conn.transaction().unwrap();
        {
            let mut st = txn.prepare_cached(&sql).unwrap();
            for e in entries {
                let id = i64::from_be_bytes(e.id);
                let mut args: Vec<&dyn rusqlite::ToSql> = Vec::with_capacity(2 + self.indexes);
                args.push(&id);
                args.push(&record);
                let keys: Vec<&[u8]> = e.index_keys.iter().map(|k| &k[..]).collect();
                for k in &keys {
                    args.push(k);
                }
                st.execute(&args[..]).unwrap();
            }
        }
        txn.commit().unwrap();
    }

    fn sync(&mut self) {
        // In WAL mode with synchronous=NORMAL, a checkpoint syncs the WAL before copying
        // it into the database and syncs the database after.
        self.conn
            .query_row("PRAGMA wal_checkpoint(FULL)", [], |_| Ok(()))
            .unwrap();
    }

    fn set_sync(&mut self, on: bool) {
        self.conn
            .execute_batch(if on {
                "PRAGMA synchronous=FULL"
            } else {
                "PRAGMA synchronous=NORMAL"
            })
            .unwrap();
    }
}
