//! redb 2.x: one file, default builder (its default cache), one table of byte-string keys
//! and values, `Durability::Immediate` for synced commits and `Durability::None` for
//! unsynced ones (a later durable commit makes them durable), multimap tables for W7's
//! indexes. redb has no append mode: sorted loads insert normally.

use std::path::Path;

use redb::{
    Database, Durability, MultimapTableDefinition, ReadableTable, TableDefinition, WriteTransaction,
};

use super::{Config, Engine, INDEX_NAMES};
use crate::data::{IndexedEntry, Keys};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");

fn index(i: usize) -> MultimapTableDefinition<'static, &'static [u8], &'static [u8]> {
    MultimapTableDefinition::new(INDEX_NAMES[i])
}

pub struct Redb {
    db: Database,
    sync: bool,
    indexes: usize,
}

impl Redb {
    pub fn open(dir: &Path, cfg: Config) -> Redb {
        let db = Database::builder()
            .create(dir.join("data.redb"))
            .expect("redb create");
        let mut r = Redb {
            db,
            sync: cfg.sync,
            indexes: cfg.indexes,
        };
        // Create the tables, so reads of an empty DB find them.
        let txn = r.begin();
        txn.open_table(TABLE).unwrap();
        for i in 0..cfg.indexes {
            txn.open_multimap_table(index(i)).unwrap();
        }
        txn.commit().unwrap();
        r.sync = cfg.sync;
        r
    }

    fn begin(&self) -> WriteTransaction {
        let mut txn = self.db.begin_write().unwrap();
        txn.set_durability(if self.sync {
            Durability::Immediate
        } else {
            Durability::None
        });
        txn
    }
}

impl Engine for Redb {
    fn put_batch(&mut self, keys: Keys<'_>, value: &[u8], _append: bool) {
        let txn = self.begin();
        {
            let mut t = txn.open_table(TABLE).unwrap();
            for k in keys.iter() {
                t.insert(k, value).unwrap();
            }
        }
        txn.commit().unwrap();
    }

    fn delete_batch(&mut self, keys: Keys<'_>) {
        let txn = self.begin();
        {
            let mut t = txn.open_table(TABLE).unwrap();
            for k in keys.iter() {
                t.remove(k).unwrap();
            }
        }
        txn.commit().unwrap();
    }

    fn get_all(&self, keys: Keys<'_>) -> u64 {
        let txn = self.db.begin_read().unwrap();
        let t = txn.open_table(TABLE).unwrap();
        let mut found = 0u64;
        for k in keys.iter() {
            if let Some(v) = t.get(k).unwrap() {
                found += v.value().len() as u64;
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
        let txn = self.db.begin_read().unwrap();
        let t = txn.open_table(TABLE).unwrap();
        let mut n = 0;
        for item in t.iter().unwrap() {
            item.unwrap();
            n += 1;
        }
        n
    }

    fn range_reads(&self, starts: Keys<'_>, len: usize) -> u64 {
        let txn = self.db.begin_read().unwrap();
        let t = txn.open_table(TABLE).unwrap();
        let mut n = 0;
        for k in starts.iter() {
            for item in t.range(k..).unwrap().take(len) {
                item.unwrap();
                n += 1;
            }
        }
        n
    }

    fn indexed_batch(&mut self, entries: &[IndexedEntry], record: &[u8]) {
        let txn = self.begin();
        {
            let mut main = txn.open_table(TABLE).unwrap();
            let mut idx: Vec<_> = (0..self.indexes)
                .map(|i| txn.open_multimap_table(index(i)).unwrap())
                .collect();
            for e in entries {
                main.insert(&e.id[..], record).unwrap();
                for (t, key) in idx.iter_mut().zip(&e.index_keys) {
                    t.insert(&key[..], &e.id[..]).unwrap();
                }
            }
        }
        txn.commit().unwrap();
    }

    fn sync(&mut self) {
        // A durable commit makes every earlier non-durable commit durable too.
        let mut txn = self.db.begin_write().unwrap();
        txn.set_durability(Durability::Immediate);
        txn.commit().unwrap();
    }

    fn set_sync(&mut self, on: bool) {
        self.sync = on;
    }
}
