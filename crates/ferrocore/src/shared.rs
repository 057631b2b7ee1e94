//! What every transaction of an environment shares: the data file and its map, this
//! process's share of the lock file, the catalog of named DBs, the caches of metas and
//! records, and the poisoned flag. Below `txn` and `env`: txns use it without importing
//! the environment that opened it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::error::{Error, Result};
use crate::format::meta::{self, Meta, META_WRITE_SIZE};
use crate::io::{DataFile, Map};
use crate::lock::fork;
use crate::lock::kept::KeptSlots;
use crate::lock::registry::LockHandle;

/// State shared by every transaction of an environment.
pub struct EnvInner {
    pub path: PathBuf,
    /// The data file: every write, flush and length change goes through it.
    pub data: Box<dyn DataFile>,
    pub map: Map,
    /// This process's share of the lock file (every open of the environment in the
    /// process shares one).
    pub lock: LockHandle,
    pub page_size: usize,
    pub flags: AtomicU32,
    pub max_key_size: usize,
    /// Map size to record in the meta (the limit when `map_size_explicit`).
    pub map_size: AtomicU64,
    pub map_size_explicit: AtomicBool,
    /// Length of the data file as last seen by this process's writer (0: read it again).
    pub file_len: AtomicU64,
    /// Whether commits give free pages at the end of the file back, and shorten it, when
    /// the map grows on demand ([`crate::EnvOptions::shrink_on_commit`]).
    pub shrink_on_commit: bool,
    /// Named DBs opened in this environment.
    pub catalog: std::sync::RwLock<crate::catalog::Catalog>,
    /// Bumped whenever a DB's order changes (application comparators, closed handles), so
    /// txns refresh what they cached; 0 while every order follows the DB flags.
    pub orders_generation: AtomicU64,
    /// The latest txn this process committed (or found at open). A snapshot newer than it
    /// was committed by another process, which cannot update this process's record cache.
    pub local_txnid: AtomicU64,
    /// The meta of the latest snapshot a txn of this process took or committed, so the next
    /// txn of the same snapshot skips decoding and checksumming it. Keyed by txn id: a
    /// snapshot's meta never changes while its id is the published one (the next commit
    /// writes the other meta page, and the one after it publishes a new id first).
    pub meta_cache: crate::seqcache::Slot<16>,
    /// Per named DB (index `dbi - 2`): its latest record, keyed by the txnid from which it
    /// holds, so read txns find it without searching the main DB.
    pub record_cache: Box<[crate::seqcache::Slot<6>]>,
    /// The in-process half of the writer lock, and what it guards: the write txn's
    /// dirty-page table, free lists and page buffers, kept between txns. A write txn holds
    /// it from its start to its end, around the cross-process writer mutex (taken before
    /// [`crate::lock::LockFile::lock_writer`], released after
    /// [`crate::lock::LockFile::unlock_writer`]); `set_map_size` waits on it.
    pub txn_buffers: Mutex<crate::store::TxnBuffers>,
    /// Set when a commit failed at a step that poisons (see [`crate::commit`]) or a panic
    /// was caught at the C ABI: write txns are refused until the environment is reopened.
    pub failed: AtomicBool,
    /// The fork generation the environment was opened in (see [`crate::lock::fork`]).
    pub fork_generation: u64,
    /// Serial numbers of txns (for the handles they open).
    pub txn_serial: AtomicU64,
    /// Strict mode ([`crate::EnvOptions::strict`]): check every commit's snapshot.
    pub strict: bool,
    /// When the writer last looked for dead readers (ms since `process_clock`, +1).
    pub last_stale_check: AtomicU64,
    /// Reader slots kept claimed between read txns ([`crate::EnvOptions::keep_reader_slots`]);
    /// `None`: a read txn's end gives its slot back (LMDB's `MDB_NOTLS`).
    pub kept_slots: Option<Box<KeptSlots>>,
}

impl Drop for EnvInner {
    /// Gives back the reader slots kept for the next read txns (not in a `fork()` child:
    /// they are the parent's).
    fn drop(&mut self) {
        if let Some(kept) = &self.kept_slots {
            if fork::current_generation() == self.fork_generation {
                for slot in kept.drain() {
                    self.lock.release_slot(slot);
                }
            }
        }
    }
}

/// Milliseconds since the first call in this process (a monotonic clock).
fn process_clock_ms() -> u64 {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
}

impl EnvInner {
    /// True at most once a second: time for the writer to look for dead readers.
    pub fn stale_reader_check_due(&self) -> bool {
        let now = process_clock_ms() + 1;
        let last = self.last_stale_check.load(Ordering::Relaxed);
        (last == 0 || now >= last + 1000)
            && self
                .last_stale_check
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// A reader slot for a read txn: the one this thread's last read txn kept, if the
    /// environment keeps them, else a free one claimed under the reader table's lock (or,
    /// the table full, one kept by another thread).
    #[inline]
    pub fn reader_slot(&self) -> Result<usize> {
        let Some(kept) = &self.kept_slots else {
            return self.lock.acquire_slot();
        };
        let slot = match kept.take() {
            Some(slot) => slot,
            None => match self.lock.acquire_slot() {
                Err(Error::ReadersFull) => kept.take_any().ok_or(Error::ReadersFull)?,
                claimed => return claimed,
            },
        };
        self.lock.note_slot_thread(slot);
        Ok(slot)
    }

    /// Gives back reader slot `slot` of a read txn that ended (its snapshot is released
    /// here too): kept for this thread's next read txn if the environment keeps slots and
    /// the thread keeps none yet, else freed in the table.
    #[inline]
    pub fn put_back_reader_slot(&self, slot: usize) {
        if let Some(kept) = &self.kept_slots {
            self.lock.end_snapshot(slot);
            if kept.keep(slot) {
                return;
            }
        }
        self.lock.release_slot(slot);
    }

    /// `Panic` if this process is a `fork()` child of the one that opened the environment.
    #[inline]
    pub fn check_not_forked(&self) -> Result<()> {
        if fork::current_generation() != self.fork_generation {
            return Err(Error::Panic(
                "environment opened before fork(): open it again in the child process",
            ));
        }
        Ok(())
    }

    /// Decodes the meta of committed txn `txnid` from the map.
    pub fn meta_for(&self, txnid: u64) -> Result<Meta> {
        let which = txnid & 1;
        let bytes = self
            .map
            .slice(which as usize * self.page_size, META_WRITE_SIZE);
        let (meta, _) = Meta::decode(bytes, which)?;
        if meta.txnid != txnid {
            return Err(Error::corrupted(
                which,
                "meta page does not hold the published txn",
            ));
        }
        Ok(meta)
    }

    /// After a writer died holding the writer lock (this thread holds it now): publishes
    /// the newest valid meta's txn id, which the dead writer may have written without
    /// publishing, clears dead readers and makes the lock usable again (LMDB's
    /// `mdb_mutex_failed`).
    pub fn recover_from_dead_writer(&self) -> Result<()> {
        let decode = |which: u64| {
            Meta::decode(
                self.map
                    .slice(which as usize * self.page_size, META_WRITE_SIZE),
                which,
            )
        };
        let file_pages = self.data.len()? / self.page_size as u64;
        let newest = meta::choose(decode(0), decode(1), file_pages)?;
        self.lock.txnid_cell().store(newest.txnid, Ordering::SeqCst);
        self.lock.writer_recovered()
    }

    /// Takes the in-process half of the writer lock ([`EnvInner::txn_buffers`]).
    pub fn writer_in_process(&self) -> Result<MutexGuard<'_, crate::store::TxnBuffers>> {
        self.txn_buffers
            .lock()
            .map_err(|_| Error::Panic("writer lock poisoned"))
    }

    /// The latest committed meta: from [`EnvInner::meta_cache`] when it holds the published
    /// txn's (a commit of this process leaves its meta there), else read from its page.
    pub fn latest_meta(&self) -> Result<Meta> {
        loop {
            let t = self.lock.txnid_cell().load(Ordering::Acquire);
            if let Some(words) = self.meta_cache.get(t) {
                return Ok(crate::seqcache::meta_from(words));
            }
            match self.meta_for(t) {
                Ok(m) => {
                    self.meta_cache.try_put(t, crate::seqcache::meta_words(&m));
                    return Ok(m);
                }
                // A commit raced with us: the txnid moved on while we read.
                Err(_) if self.lock.txnid_cell().load(Ordering::Acquire) != t => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Map size to record for a snapshot ending at page `next_pgno`, and the allocation
    /// limit in pages.
    pub fn map_size_for(&self, next_pgno: u64) -> u64 {
        let used = next_pgno * self.page_size as u64;
        let mut size = self.map_size.load(Ordering::Acquire);
        if !self.map_size_explicit.load(Ordering::Acquire) {
            while size < used {
                size += size.min(1 << 30);
            }
            self.map_size.store(size, Ordering::Release);
        }
        size
    }

    /// Called with every snapshot a txn takes: once another process has committed, the
    /// named-DB record cache (which only this process's writers keep current) is no longer
    /// trusted; txns then look records up in the main DB.
    #[inline]
    pub fn note_snapshot(&self, txnid: u64) {
        if txnid > self.local_txnid.load(Ordering::SeqCst)
            && self.orders_generation.load(Ordering::Relaxed) == 0
        {
            self.orders_generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Highest page number + 1 a write txn may allocate.
    pub fn max_pgno(&self) -> u64 {
        let limit = if self.map_size_explicit.load(Ordering::Acquire) {
            self.map_size
                .load(Ordering::Acquire)
                .min(self.map.len() as u64)
        } else {
            self.map.len() as u64
        };
        crate::format::page::pages_in(limit, self.page_size)
    }
}
