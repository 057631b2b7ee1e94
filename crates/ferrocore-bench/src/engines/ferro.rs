//! ferrocore through its Rust API: `EnvOptions` (no explicit map size: the map grows on
//! demand, ferrocore's recommended way), one `WriteTxn` per batch, `put_flags::APPEND`
//! for sorted loads, the bottom-up bulk loader for W2 bulk, `ReadTxn` per read pass,
//! cursors for scans and ranges.

use std::path::Path;

use ferrocore::{db_flags, env_flags, put_flags, BulkOptions, Database, Env, EnvOptions};

use super::{Config, Engine, INDEX_NAMES};
use crate::data::{IndexedEntry, Keys};

pub struct Ferro {
    env: Env,
    /// W7: the entries DB (a named DB, as back-mdb's id2entry: the main DB holds the
    /// named DBs' records, so IDs could not be appended to it) and the index DBs.
    entries: Database,
    indexes: Vec<Database>,
}

impl Ferro {
    pub fn open(dir: &Path, cfg: Config, writemap: bool) -> Ferro {
        let mut flags = if cfg.sync { 0 } else { env_flags::NO_SYNC };
        if writemap {
            flags |= env_flags::WRITE_MAP;
        }
        if super::no_readahead() {
            flags |= env_flags::NO_READAHEAD;
        }
        // SAFETY: the harness owns the directory; nothing else touches its files.
        let env = unsafe {
            EnvOptions::new()
                .flags(flags)
                .max_dbs(16)
                .max_readers(126)
                .open(dir)
                .expect("ferrocore open")
        };
        let mut indexes = Vec::new();
        let mut entries = Database::MAIN;
        if cfg.indexes > 0 {
            let mut txn = env.begin_write().unwrap();
            entries = txn.open_db(Some("id2entry"), db_flags::CREATE).unwrap();
            for name in &INDEX_NAMES[..cfg.indexes] {
                let db = txn
                    .open_db(Some(name), db_flags::DUP_SORT as u32 | db_flags::CREATE)
                    .unwrap();
                indexes.push(db);
            }
            txn.commit().unwrap();
        }
        Ferro {
            env,
            entries,
            indexes,
        }
    }
}

impl Engine for Ferro {
    fn put_batch(&mut self, keys: Keys<'_>, value: &[u8], append: bool) {
        let flags = if append { put_flags::APPEND } else { 0 };
        let mut txn = self.env.begin_write().unwrap();
        for k in keys.iter() {
            txn.put(Database::MAIN, k, value, flags).unwrap();
        }
        txn.commit().unwrap();
    }

    fn bulk_load(&mut self, keys: Keys<'_>, value: &[u8]) {
        let mut txn = self.env.begin_write().unwrap();
        let mut loader = txn
            .bulk_loader(Database::MAIN, BulkOptions::default())
            .unwrap();
        for k in keys.iter() {
            loader.push(k, value).unwrap();
        }
        loader.finish().unwrap();
        txn.commit().unwrap();
    }

    fn delete_batch(&mut self, keys: Keys<'_>) {
        let mut txn = self.env.begin_write().unwrap();
        for k in keys.iter() {
            txn.delete(Database::MAIN, k).unwrap();
        }
        txn.commit().unwrap();
    }

    fn get_all(&self, keys: Keys<'_>) -> u64 {
        let txn = self.env.begin_read().unwrap();
        let mut found = 0u64;
        for k in keys.iter() {
            found += txn
                .get(Database::MAIN, k)
                .unwrap()
                .map_or(0, |v| v.len() as u64);
        }
        found
    }

    fn get_each_in_own_txn(&self, keys: Keys<'_>, renew: bool) -> u64 {
        let value_len = |txn: &ferrocore::ReadTxn<'_>, k: &[u8]| {
            txn.get(Database::MAIN, k)
                .unwrap()
                .map_or(0, |v| v.len() as u64)
        };
        let mut found = 0u64;
        if renew {
            let mut inactive = self.env.begin_read().unwrap().reset();
            for k in keys.iter() {
                let txn = inactive.renew().unwrap();
                found += value_len(&txn, k);
                inactive = txn.reset();
            }
        } else {
            for k in keys.iter() {
                let txn = self.env.begin_read().unwrap();
                found += value_len(&txn, k);
                txn.abort();
            }
        }
        found
    }

    fn get_parallel(&self, parts: &[Keys<'_>]) -> u64 {
        std::thread::scope(|s| {
            let handles: Vec<_> = parts
                .iter()
                .map(|&part| s.spawn(move || self.get_all(part)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        })
    }

    fn scan(&self) -> u64 {
        let txn = self.env.begin_read().unwrap();
        let mut c = txn.cursor(Database::MAIN).unwrap();
        let mut n = 0;
        let mut more = c.first().unwrap().is_some();
        while more {
            n += 1;
            more = c.next().unwrap().is_some();
        }
        n
    }

    fn range_reads(&self, starts: Keys<'_>, len: usize) -> u64 {
        let txn = self.env.begin_read().unwrap();
        let mut c = txn.cursor(Database::MAIN).unwrap();
        let mut n = 0;
        for k in starts.iter() {
            let mut item = c.set_range(k).unwrap();
            let mut i = 0;
            while item.is_some() && i < len {
                n += 1;
                i += 1;
                if i < len {
                    item = c.next().unwrap();
                }
            }
        }
        n
    }

    fn indexed_batch(&mut self, entries: &[IndexedEntry], record: &[u8]) {
        let mut txn = self.env.begin_write().unwrap();
        for e in entries {
            txn.put(self.entries, &e.id, record, put_flags::APPEND)
                .unwrap();
            for (db, key) in self.indexes.iter().zip(&e.index_keys) {
                txn.put(*db, key, &e.id, 0).unwrap();
            }
        }
        txn.commit().unwrap();
    }

    fn sync(&mut self) {
        self.env.sync().unwrap();
    }

    fn set_sync(&mut self, on: bool) {
        self.env.set_flags(env_flags::NO_SYNC, !on).unwrap();
    }
}
