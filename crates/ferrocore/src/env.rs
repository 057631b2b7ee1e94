//! The environment: the data file, its map, the lock file, and what every txn shares.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::flags::env_flags;
use crate::format::meta::Stat;
use crate::format::meta::{self, Meta, META_WRITE_SIZE};
use crate::format::page::{MAX_PAGE_SIZE, MIN_PAGE_SIZE};
use crate::io::{DataFile, Map, OsFile, DEFAULT_RESERVATION};
use crate::lock::fork;
use crate::lock::registry::{self, LockHandle};
use crate::shared::EnvInner;
use crate::store::SnapshotPages;
use crate::txn::{ReadTxn, TxnCarry, WriteTxn};

/// LMDB's default map size when the application sets none (what the meta records first).
pub const LMDB_DEFAULT_MAP_SIZE: u64 = 1 << 20;
/// LMDB's default number of reader slots.
pub const DEFAULT_MAX_READERS: u32 = 126;
/// LMDB's maximum key size (`mdb_env_get_maxkeysize`).
pub const LMDB_MAX_KEY_SIZE: usize = 511;

/// How to open an environment.
#[derive(Clone, Debug)]
pub struct EnvOptions {
    map_size: Option<u64>,
    max_readers: u32,
    page_size: Option<usize>,
    flags: u32,
    long_keys: bool,
    strict: bool,
    max_dbs: u32,
    grow_map: bool,
    shrink_on_commit: bool,
    keep_reader_slots: bool,
    file_mode: u32,
    data_file: Option<DataFileWrapper>,
}

/// Puts a [`DataFile`] of the application's around the data file the environment opens.
type WrapFn = dyn Fn(File) -> std::io::Result<Box<dyn DataFile>> + Send + Sync;

/// The wrapper `EnvOptions::data_file` installs.
#[derive(Clone)]
struct DataFileWrapper(std::sync::Arc<WrapFn>);

impl std::fmt::Debug for DataFileWrapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataFileWrapper(..)")
    }
}

impl Default for EnvOptions {
    fn default() -> Self {
        EnvOptions {
            map_size: None,
            max_readers: DEFAULT_MAX_READERS,
            page_size: None,
            flags: 0,
            long_keys: false,
            strict: false,
            max_dbs: 0,
            grow_map: true,
            shrink_on_commit: true,
            keep_reader_slots: false,
            file_mode: 0o644,
            data_file: None,
        }
    }
}

impl EnvOptions {
    /// Default options: LMDB's defaults, with a map that grows on demand.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets an explicit map size: the database may not grow beyond it (`MapFull`), as in
    /// LMDB. Without it the map grows as needed, up to the disk.
    pub fn map_size(&mut self, bytes: u64) -> &mut Self {
        self.map_size = Some(bytes);
        self
    }

    /// Whether the map grows on demand when no map size is set (the default). With `false`
    /// the map size is the one recorded in the file (LMDB's 1 MiB for a new file) and
    /// writes past it fail with `MapFull`, exactly as in LMDB; the C ABI opens this way.
    pub fn grow_map(&mut self, on: bool) -> &mut Self {
        self.grow_map = on;
        self
    }

    /// Whether commits give the free pages at the end of the file back and shorten the
    /// file (default on). Only with a map that grows on demand: with an explicit map size
    /// (or `grow_map(false)`, as the C ABI opens) the file never shrinks, as in LMDB.
    /// Turn it off when an LMDB process may have the file open with `MDB_WRITEMAP`: LMDB
    /// sizes the file to its map once at open and would fault writing past a shorter end.
    /// [`Env::shrink_file`] shrinks the file on request either way.
    pub fn shrink_on_commit(&mut self, on: bool) -> &mut Self {
        self.shrink_on_commit = on;
        self
    }

    /// Whether a read txn that ends leaves its reader slot claimed, holding no snapshot,
    /// for the next read txn of its thread to take without the reader table's lock
    /// (default off: a read txn's end frees its slot, as LMDB's with `MDB_NOTLS`). LMDB
    /// keeps a thread's slot likewise unless `MDB_NOTLS` is set, and the C ABI turns this
    /// on when it is not. A read txn per request on several threads then takes no lock
    /// shared by them. The environment keeps at most 16 such slots, gives them back when it
    /// closes, and [`Env::readers`] lists them, with no snapshot. Read txns stay free to
    /// move between threads, and a thread may hold several at once.
    pub fn keep_reader_slots(&mut self, on: bool) -> &mut Self {
        self.keep_reader_slots = on;
        self
    }

    /// Permissions of the files a new environment creates (default 0644; the process
    /// umask applies), as `mdb_env_open`'s `mode`.
    pub fn file_mode(&mut self, mode: u32) -> &mut Self {
        self.file_mode = mode;
        self
    }

    /// Sends every write, flush and length change of the data file through the
    /// [`DataFile`] that `wrap` makes of it, instead of through [`OsFile`]: for tests
    /// that inject faults or cut the power ([`crate::io::fault::FaultInjector`]), or to
    /// count or trace the I/O. `wrap` gets the file as the environment opened it and must
    /// write through to it (the environment reads through a map of that file).
    pub fn data_file(
        &mut self,
        wrap: impl Fn(File) -> std::io::Result<Box<dyn DataFile>> + Send + Sync + 'static,
    ) -> &mut Self {
        self.data_file = Some(DataFileWrapper(std::sync::Arc::new(wrap)));
        self
    }

    /// Number of named databases that may be opened (default 0, as in LMDB: only the
    /// main DB). Past it, `open_db` fails with `DbsFull`.
    pub fn max_dbs(&mut self, n: u32) -> &mut Self {
        self.max_dbs = n;
        self
    }

    /// Number of reader slots (default 126).
    pub fn max_readers(&mut self, n: u32) -> &mut Self {
        self.max_readers = n;
        self
    }

    /// Page size of a new environment (a power of two, 4096..=32768); default: the OS
    /// page size. An existing file's page size always wins.
    pub fn page_size(&mut self, bytes: usize) -> &mut Self {
        self.page_size = Some(bytes);
        self
    }

    /// LMDB environment flags (`env_flags`).
    pub fn flags(&mut self, flags: u32) -> &mut Self {
        self.flags = flags;
        self
    }

    /// Allows keys longer than LMDB's 511 bytes, up to [`long_key_max`] for the page size.
    /// LMDB can read files holding such keys by scanning, but cannot look them up or write
    /// them (see docs/FORMAT.md).
    pub fn long_keys(&mut self, on: bool) -> &mut Self {
        self.long_keys = on;
        self
    }

    /// Strict mode, for tests (bbolt's `StrictMode`): after every commit of a write txn,
    /// the new snapshot is checked in full (every page reachable exactly once, key order,
    /// DUPSORT sub-trees, overflow runs, the free list, as `Env::check`), and a damaged
    /// snapshot panics with the check's error. Costs a full walk of the file per commit.
    pub fn strict(&mut self, on: bool) -> &mut Self {
        self.strict = on;
        self
    }

    /// Opens (creating if needed) the environment at `path`.
    ///
    /// Other processes, of ferrocore or of LMDB 0.9, may have it open at the same time. So
    /// may this process: a second open shares the first's lock file, and either handle may
    /// be closed first (the other keeps working).
    ///
    /// # Safety
    ///
    /// Reads hand out slices of a shared memory map of the data file. The caller promises
    /// that nothing but ferrocore (or LMDB) modifies or truncates the environment's files
    /// while it is open; otherwise those slices could change or fault under the program.
    pub unsafe fn open(&self, path: impl AsRef<Path>) -> Result<Env> {
        Env::open_with(path.as_ref(), self)
    }
}

/// The longest key allowed with [`EnvOptions::long_keys`] for a page size: a quarter of
/// the page, so branch pages always hold at least four separators.
pub const fn long_key_max(page_size: usize) -> usize {
    (((page_size - 16) / 4) & !1) - 10
}

/// Environment information (`MDB_envinfo`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EnvInfo {
    /// Map size limit in bytes (the recorded size when the map grows on demand).
    pub map_size: u64,
    /// Last used page number.
    pub last_pgno: u64,
    /// Last committed txn id.
    pub last_txnid: u64,
    /// Reader slots.
    pub max_readers: u32,
    /// Reader slots used (high-water mark).
    pub num_readers: u32,
    /// Commits since the oldest snapshot a live reader holds (0 without readers): a long
    /// lag means a long-lived reader.
    pub oldest_reader_lag: u64,
    /// Pages freed since that snapshot, which cannot be reused while it is held: what a
    /// long-lived reader costs in file growth.
    pub pinned_pages: u64,
}

/// What opening the data file found.
struct OpenedData {
    data: Box<dyn DataFile>,
    map: Map,
    page_size: usize,
    /// The newest valid meta.
    current: Meta,
    map_size: u64,
    /// The map size is a limit (as LMDB's), not grown on demand.
    explicit: bool,
}

/// An open environment.
pub struct Env {
    pub(crate) inner: EnvInner,
    /// The plain data of this handle's write txns, kept between them (see [`TxnCarry`]).
    txn_carry: std::sync::Mutex<TxnCarry>,
}

fn os_page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n <= 0 {
        4096
    } else {
        (n as usize).clamp(MIN_PAGE_SIZE, MAX_PAGE_SIZE)
    }
}

fn valid_page_size(ps: usize) -> bool {
    ps.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&ps)
}

/// Reads the first bytes of meta page `which` of a file with pages of `page_size`.
/// The page size and the current meta of a non-empty data file: the newest valid meta
/// whose tree fits the file. The file's length is read after the metas: the file only
/// grows, and a writer writes its pages before its meta, so a meta read whole always fits.
fn read_current_meta(data: &File) -> Result<(usize, Meta)> {
    let m0 = read_meta_at(data, MIN_PAGE_SIZE, 0);
    // Meta 0 tells the page size; if it is unreadable, look for meta 1 at each possible
    // page size.
    let candidates: Vec<usize> = match &m0 {
        Ok((m, _)) => vec![m.page_size()],
        Err(_) => (12..=15).map(|s| 1usize << s).collect(),
    };
    let mut first_err = None;
    for ps in candidates {
        if !valid_page_size(ps) {
            first_err.get_or_insert(Error::Invalid("meta page records an unsupported page size"));
            continue;
        }
        let m1 = read_meta_at(data, ps, 1);
        if matches!(&m1, Ok((m, _)) if m.page_size() != ps) {
            continue;
        }
        let m0_here = match &m0 {
            Ok((m, c)) => Ok((*m, *c)),
            Err(_) => read_meta_at(data, ps, 0),
        };
        let len = data.metadata()?.len();
        match meta::choose(m0_here, m1, len / ps as u64) {
            Ok(m) => return Ok((ps, m)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    // No meta page is usable: to the application this is not an LMDB file it can open
    // (LMDB's MDB_INVALID), whatever the first page's fault was.
    Err(match first_err {
        Some(Error::Io(e)) => Error::Io(e),
        Some(Error::VersionMismatch { found }) => Error::VersionMismatch { found },
        _ => Error::Invalid("no valid meta page"),
    })
}

/// Makes `data`, an empty file, a new environment: writes its two meta pages, for
/// `opts`' page size. Returns the page size and the meta.
///
/// The metas are written, not flushed: the first write txn flushes them before it writes
/// a page, after growing the file to its commit's pages (`WriteTxn::flush_new_metas`;
/// under `NO_SYNC`, the first flush of any kind does). Flushed here, on their own, the
/// file system gave their two blocks a place among small files' blocks (ext4 keeps those
/// apart from a large file's), far from the data written next; on this project's virtual
/// disk every synced commit then paid about 0.2 ms for writing both places (W6 on a 250 MB
/// file: 0.7-0.9 of LMDB's speed with the same system calls). Until they are flushed a
/// crash may leave the file all zeros, which the next open takes for a new file, as it does
/// a file holding no more than parts of those metas ([`holds_no_commit`]).
fn write_new_metas(data: &dyn DataFile, opts: &EnvOptions) -> Result<(usize, Meta)> {
    let ps = opts.page_size.unwrap_or_else(os_page_size);
    if !valid_page_size(ps) {
        return Err(Error::InvalidArgument(
            "page size must be a power of two in 4096..=32768",
        ));
    }
    let fixed = (opts.flags & (env_flags::FIXED_MAP | env_flags::NO_SUB_DIR)) as u16;
    let meta = Meta::new_empty(ps, opts.map_size.unwrap_or(LMDB_DEFAULT_MAP_SIZE), fixed);
    write_metas(data, ps, &meta)?;
    Ok((ps, meta))
}

/// Writes `meta` as both meta pages (pages 0 and 1, of `ps` bytes), unflushed.
fn write_metas(data: &dyn DataFile, ps: usize, meta: &Meta) -> Result<()> {
    let mut pages = vec![0u8; 2 * ps];
    let mut buf = [0u8; META_WRITE_SIZE];
    for which in 0..2 {
        meta.encode(which as u64, &mut buf);
        pages[which * ps..which * ps + META_WRITE_SIZE].copy_from_slice(&buf);
    }
    data.write_at(0, &pages)?;
    Ok(())
}

/// Reads the newest valid meta of an existing data file. A writer in another process may
/// be committing while this process reads: a meta read half-written fails its checksum,
/// and the other meta is then the previous commit's. Reading both torn takes two commits
/// between two reads; a few more tries settle it. Alone (`alone`), nobody writes: no retry.
fn read_meta_retrying(data: &File, alone: bool) -> Result<(usize, Meta)> {
    let tries = if alone { 1 } else { 8 };
    let mut attempt = 1;
    loop {
        match read_current_meta(data) {
            Ok(chosen) => return Ok(chosen),
            Err(e @ (Error::Io(_) | Error::VersionMismatch { .. })) => return Err(e),
            Err(e) if attempt >= tries => return Err(e),
            Err(_) => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}

/// True if the data file of `len` bytes holds nothing but zeros and parts of a new
/// environment's metas: what a power cut leaves of a creation whose metas were never
/// flushed (each 512-byte sector of their write kept or lost, [`write_new_metas`]). The
/// first write txn flushes them before it writes a page, so no commit ever reached such a
/// file. Tried for each page size: every byte is zero except, at pages 0 and 1, a first
/// sector that is zero or holds a valid meta of txn 0 for that page size. A file longer
/// than [`NEW_FILE_MAX`] is not taken for one.
fn holds_no_commit(data: &File, len: u64) -> Result<bool> {
    const SECTOR: usize = 512;
    if len > NEW_FILE_MAX {
        return Ok(false);
    }
    let mut bytes = vec![0u8; len as usize];
    data.read_exact_at(&mut bytes, 0)?;
    let zero = |range: std::ops::Range<usize>| bytes[range].iter().all(|&b| b == 0);
    let within = |start: usize, end: usize| start.min(bytes.len())..end.min(bytes.len());
    for ps in (12..=15).map(|shift| 1usize << shift) {
        let metas = [within(0, SECTOR), within(ps, ps + SECTOR)];
        let new_meta = |which: usize| {
            zero(metas[which].clone())
                || matches!(read_meta_at(data, ps, which as u64),
                    Ok((m, _)) if m.txnid == 0 && m.page_size() == ps)
        };
        let rest_zero = zero(within(SECTOR, ps)) && zero(within(ps + SECTOR, bytes.len()));
        if rest_zero && new_meta(0) && new_meta(1) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The longest data file [`holds_no_commit`] reads through: a first txn grows the file by
/// a few steps at most before it writes (under `WRITE_MAP`, 1, 4, 16 and 64 MiB).
const NEW_FILE_MAX: u64 = 64 << 20;

fn read_meta_at(file: &File, page_size: usize, which: u64) -> Result<(Meta, meta::MetaCheck)> {
    let mut buf = [0u8; META_WRITE_SIZE];
    match file.read_exact_at(&mut buf, which * page_size as u64) {
        Ok(()) => Meta::decode(&buf, which),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            Err(Error::Invalid("file too short"))
        }
        Err(e) => Err(e.into()),
    }
}

impl Env {
    /// Opens with default options. See [`EnvOptions::open`] for the safety contract.
    ///
    /// # Safety
    ///
    /// As [`EnvOptions::open`].
    pub unsafe fn open(path: impl AsRef<Path>) -> Result<Env> {
        Env::open_with(path.as_ref(), &EnvOptions::default())
    }

    fn open_with(path: &Path, opts: &EnvOptions) -> Result<Env> {
        if opts.flags & !env_flags::ALL != 0 {
            return Err(Error::InvalidArgument("unknown environment flag"));
        }
        if opts.max_readers == 0 {
            return Err(Error::InvalidArgument("max_readers must be at least 1"));
        }
        let read_only = opts.flags & env_flags::READ_ONLY != 0;
        let (data_path, lock_path) = if opts.flags & env_flags::NO_SUB_DIR != 0 {
            let mut lock = path.as_os_str().to_owned();
            lock.push("-lock");
            (path.to_path_buf(), PathBuf::from(lock))
        } else {
            (path.join("data.mdb"), path.join("lock.mdb"))
        };
        // Held until the open is complete: this process opens (and closes) one lock file
        // at a time, and a second open of the same environment shares the first's.
        let mut opening = registry::begin_open();
        let mut pending = if opts.flags & env_flags::NO_LOCK != 0 {
            // No lock file: the application serialises, and may open the environment more
            // than once (each open has its own table).
            opening.private(opts.max_readers as usize)?
        } else {
            match opening.open(&lock_path, opts.max_readers as usize, opts.file_mode) {
                Ok(lock) => lock,
                // A read-only environment on files or a file system this process may not
                // write: read without the shared lock table, as LMDB does on a read-only
                // file system. Writers elsewhere cannot see these readers, so (as with
                // NO_LOCK) they must not run meanwhile.
                Err(Error::Io(e))
                    if read_only
                        && matches!(e.raw_os_error(), Some(libc::EACCES | libc::EROFS)) =>
                {
                    opening.private(opts.max_readers as usize)?
                }
                Err(e) => return Err(e),
            }
        };
        // A first opener still holds the lock file exclusively: nobody else reads the data
        // file's metas or the table until it has published the last txn id.
        let alone = pending.lock().is_first_opener();
        let data = Self::open_data(&data_path, opts, read_only, alone)?;
        pending.share(data.current.txnid)?;
        let lock = opening.finish(pending)?;
        drop(opening);
        Ok(Self::from_parts(path, opts, data, lock))
    }

    /// Opens (creating if needed) the data file, picks its current meta and maps it.
    /// `alone`: this process holds the lock file exclusively (no other process has the
    /// environment open), so no writer can be committing meanwhile.
    fn open_data(
        data_path: &Path,
        opts: &EnvOptions,
        read_only: bool,
        alone: bool,
    ) -> Result<OpenedData> {
        let data = OpenOptions::new()
            .read(true)
            .write(!read_only)
            .create(!read_only)
            .mode(opts.file_mode)
            .open(data_path)?;
        let data = match &opts.data_file {
            Some(wrap) => (wrap.0)(data)?,
            None => Box::new(OsFile::new(data)),
        };
        let len = data.len()?;
        let existing = if len == 0 {
            None
        } else {
            match read_meta_retrying(data.file(), alone) {
                // Never committed, and one of its two metas lost with the power (see
                // `write_new_metas`): the other is written over it.
                Ok((ps, meta))
                    if meta.txnid == 0
                        && alone
                        && !read_only
                        && (read_meta_at(data.file(), ps, 0).is_err()
                            || read_meta_at(data.file(), ps, 1).is_err()) =>
                {
                    write_metas(&*data, ps, &meta)?;
                    Some((ps, meta))
                }
                Ok(chosen) => Some(chosen),
                // A creation whose metas never reached the disk (see `write_new_metas`): it
                // holds nothing, and is created again.
                Err(Error::Invalid(_))
                    if alone && !read_only && holds_no_commit(data.file(), len)? =>
                {
                    None
                }
                Err(e) => return Err(e),
            }
        };
        let (page_size, current) = match existing {
            Some(chosen) => chosen,
            None if read_only => {
                return Err(Error::Invalid("empty data file opened read-only"));
            }
            None => write_new_metas(&*data, opts)?,
        };
        let used = (current.last_pgno + 1) * page_size as u64;
        let explicit = opts.map_size.is_some() || !opts.grow_map;
        let map_size = match opts.map_size {
            Some(s) => s.max(used),
            None => current.map_size.max(LMDB_DEFAULT_MAP_SIZE),
        };
        let reservation = (map_size as usize).max(DEFAULT_RESERVATION);
        let write_map = opts.flags & env_flags::WRITE_MAP != 0 && !read_only;
        if write_map && explicit && data.len()? < map_size {
            // As LMDB: under WRITE_MAP with a map size set, the file is the map's size.
            data.set_len(map_size)?;
        }
        let map = Map::new(
            data.file(),
            reservation,
            (map_size as usize).max(used as usize),
            write_map,
        )?;
        if opts.flags & env_flags::NO_READAHEAD != 0 {
            map.advise_random();
        }
        Ok(OpenedData {
            data,
            map,
            page_size,
            current,
            map_size,
            explicit,
        })
    }

    fn from_parts(path: &Path, opts: &EnvOptions, file: OpenedData, lock: LockHandle) -> Env {
        let max_key_size = if opts.long_keys {
            long_key_max(file.page_size)
        } else {
            LMDB_MAX_KEY_SIZE
        };
        Env {
            inner: EnvInner {
                path: path.to_path_buf(),
                data: file.data,
                map: file.map,
                page_size: file.page_size,
                // As LMDB, a read-only environment ignores WRITE_MAP.
                flags: AtomicU32::new(if opts.flags & env_flags::READ_ONLY != 0 {
                    opts.flags & !env_flags::WRITE_MAP
                } else {
                    opts.flags
                }),
                max_key_size,
                map_size: AtomicU64::new(file.map_size),
                file_len: AtomicU64::new(0),
                shrink_on_commit: opts.shrink_on_commit,
                catalog: std::sync::RwLock::new(crate::catalog::Catalog::new(
                    opts.max_dbs as usize,
                )),
                orders_generation: AtomicU64::new(0),
                local_txnid: AtomicU64::new(file.current.txnid),
                meta_cache: Default::default(),
                record_cache: (0..opts.max_dbs).map(|_| Default::default()).collect(),
                map_size_explicit: AtomicBool::new(file.explicit),
                txn_buffers: Mutex::new(crate::store::TxnBuffers::presized()),
                failed: AtomicBool::new(false),
                fork_generation: fork::generation(),
                txn_serial: AtomicU64::new(0),
                last_stale_check: AtomicU64::new(0),
                strict: opts.strict,
                kept_slots: opts.keep_reader_slots.then(Box::default),
                lock,
            },
            txn_carry: Mutex::new(TxnCarry::new(&file.current)),
        }
    }

    /// Begins a read-only transaction on the latest committed snapshot.
    #[inline]
    pub fn begin_read(&self) -> Result<ReadTxn<'_>> {
        ReadTxn::begin(&self.inner)
    }

    /// Begins the write transaction, waiting for any other writer (in any process) to end.
    pub fn begin_write(&self) -> Result<WriteTxn<'_>> {
        WriteTxn::begin(&self.inner, &self.txn_carry)
    }

    /// [`Env::begin_write`] into `slot`, which must be empty (`InvalidArgument` if not):
    /// the txn is built where it lies, where one returned and then moved into a slot on the
    /// heap is copied whole. For a txn kept in a struct or a box, as the C ABI keeps its
    /// write txn; commit it there with [`WriteTxn::commit_in_place`].
    pub fn begin_write_in<'e, 's>(
        &'e self,
        slot: &'s mut Option<WriteTxn<'e>>,
    ) -> Result<&'s mut WriteTxn<'e>> {
        if slot.is_some() {
            return Err(Error::InvalidArgument(
                "begin_write_in: the slot holds a txn",
            ));
        }
        WriteTxn::begin_in(&self.inner, &self.txn_carry, slot)
    }

    /// Statistics of the main DB in the latest snapshot.
    pub fn stat(&self) -> Result<Stat> {
        let txn = self.begin_read()?;
        Ok(txn.stat())
    }

    /// Verifies the latest snapshot: every page, the free list and the tree invariants.
    pub fn check(&self) -> Result<crate::check::CheckReport> {
        self.begin_read()?.check()
    }

    /// Map size, last page, last txn and reader counts.
    pub fn info(&self) -> Result<EnvInfo> {
        let meta = self.inner.latest_meta()?;
        // Before `pages_freed_after` takes a reader slot of its own for its look-up.
        let num_readers = self.inner.lock.num_readers() as u32;
        let oldest = self.inner.lock.oldest_reader();
        let (oldest_reader_lag, pinned_pages) = match oldest {
            Some(snapshot) if snapshot < meta.txnid => {
                (meta.txnid - snapshot, self.pages_freed_after(snapshot)?)
            }
            _ => (0, 0),
        };
        Ok(EnvInfo {
            map_size: self.inner.map_size.load(Ordering::Acquire),
            last_pgno: meta.last_pgno,
            last_txnid: meta.txnid,
            max_readers: self.inner.lock.max_readers() as u32,
            num_readers,
            oldest_reader_lag,
            pinned_pages,
        })
    }

    /// Pages that txns after `snapshot` freed (their free-DB records' counts).
    fn pages_freed_after(&self, snapshot: u64) -> Result<u64> {
        let txn = self.begin_read()?;
        let mut cursor = txn.cursor(crate::Database::FREE)?;
        let mut pinned = 0;
        let mut item = cursor.set_range(&(snapshot + 1).to_le_bytes())?;
        while let Some((_, value)) = item {
            if let Some(count) = value.get(..8) {
                pinned += u64::from_le_bytes(count.try_into().expect("8 bytes"));
            }
            item = cursor.next()?;
        }
        Ok(pinned)
    }

    /// Sets an application key comparator for `db` (LMDB's `mdb_set_compare`). Call it
    /// right after opening the handle, before any txn uses it, and in every process that
    /// opens the environment: the order is not recorded in the file.
    pub fn set_compare(
        &self,
        db: crate::Database,
        cmp: fn(&[u8], &[u8]) -> std::cmp::Ordering,
    ) -> Result<()> {
        self.set_order(db, true, cmp)
    }

    /// Sets an application value comparator for the DUPSORT DB `db` (`mdb_set_dupsort`);
    /// `Incompatible` if `db` is not DUPSORT. Same rules as [`Env::set_compare`].
    pub fn set_dupsort(
        &self,
        db: crate::Database,
        cmp: fn(&[u8], &[u8]) -> std::cmp::Ordering,
    ) -> Result<()> {
        self.set_order(db, false, cmp)
    }

    /// Sets an application comparator that takes a context word (`key`: the key order, else
    /// the value order). For bindings: the C ABI passes the C comparator as `ctx`.
    pub fn set_order_with_context(
        &self,
        db: crate::Database,
        key: bool,
        cmp: fn(usize, &[u8], &[u8]) -> std::cmp::Ordering,
        ctx: usize,
    ) -> Result<()> {
        self.set_key_cmp(db, key, crate::order::KeyCmp::WithContext(cmp, ctx))
    }

    fn set_order(
        &self,
        db: crate::Database,
        key: bool,
        cmp: fn(&[u8], &[u8]) -> std::cmp::Ordering,
    ) -> Result<()> {
        self.set_key_cmp(db, key, crate::order::KeyCmp::Custom(cmp))
    }

    fn set_key_cmp(&self, db: crate::Database, key: bool, cmp: crate::order::KeyCmp) -> Result<()> {
        let main_flags = self.inner.latest_meta()?.main_db.flags;
        let mut catalog = self
            .inner
            .catalog
            .write()
            .map_err(|_| Error::Panic("catalog lock poisoned"))?;
        catalog.set_order(db.dbi(), main_flags, key, cmp)?;
        self.inner.orders_generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Closes a named DB's handle (LMDB's `mdb_dbi_close`); later uses give `BadDbi`. The
    /// DB itself is untouched. Do not close a handle that a live txn is using.
    pub fn close_db(&self, db: crate::Database) -> Result<()> {
        self.inner
            .catalog
            .write()
            .map_err(|_| Error::Panic("catalog lock poisoned"))?
            .close(db.dbi())?;
        self.inner.orders_generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Writes the latest snapshot as a complete data file to `out` (`mdb_env_copyfd`). Readers
    /// and the writer go on meanwhile; the copy holds a read txn while it runs.
    pub fn copy_to(&self, out: &mut dyn std::io::Write) -> Result<()> {
        self.begin_read()?.copy_to(out)
    }

    /// Writes the latest snapshot to `out` as a compacted data file (`mdb_env_copyfd2` with
    /// `MDB_CP_COMPACT`): only the pages its trees reach, renumbered from page 2, and an
    /// empty free DB (docs/FORMAT.md §13). Readers and the writer go on meanwhile; the copy
    /// holds a read txn while it runs. A damaged snapshot gives `Corrupted` (or
    /// `PageNotFound`), and then what was written is not a usable file.
    pub fn copy_compact_to(&self, out: &mut dyn std::io::Write) -> Result<()> {
        crate::compact::copy_txn(&self.begin_read()?, out)
    }

    /// Writes the snapshot before the latest commit, the one the other meta page describes
    /// (`mdb_copy -v`, LMDB's `MDB_PREVSNAPSHOT`), to `out`: compacted, or as a plain copy
    /// (its metas and pages `2..=mm_last_pg` as they are). For when the latest snapshot is
    /// damaged. `NotFound` if there is no earlier snapshot (a new environment).
    ///
    /// Holds the writer lock while it runs: a reader pins only its own snapshot's pages, and
    /// the commit after the latest may reuse the previous snapshot's, so no writer, of this
    /// process or another, may commit meanwhile. The environment must be open for writing.
    pub fn copy_previous(&self, out: &mut dyn std::io::Write, compact: bool) -> Result<()> {
        // Held until the copy is written: no commit can overwrite the previous snapshot.
        let writer = self.begin_write()?;
        let inner = &self.inner;
        let ps = inner.page_size;
        let latest = inner.latest_meta()?;
        let other = 1 - (latest.txnid & 1);
        let (prev, _) = Meta::decode(inner.map.slice(other as usize * ps, META_WRITE_SIZE), other)?;
        if prev.txnid >= latest.txnid {
            return Err(Error::NotFound);
        }
        let file_pages = inner.data.len()? / ps as u64;
        let mapped_pages = (inner.map.len() / ps) as u64;
        if !prev.fits_file(file_pages.min(mapped_pages)) {
            return Err(Error::corrupted(
                other,
                "the previous meta names pages past the end of the file",
            ));
        }
        let pages = SnapshotPages::new(&inner.map, ps, prev.last_pgno);
        if compact {
            crate::compact::copy_snapshot(&pages, &prev, out)?;
        } else {
            crate::compact::copy_plain(&pages, &prev, out)?;
        }
        writer.abort();
        Ok(())
    }

    /// Marks the environment failed: every later write txn gets `Panic` until it is
    /// reopened; read txns keep working (the C ABI does this when a panic is caught at its
    /// boundary, and a commit does it when a flush or the meta write fails).
    pub fn mark_failed(&self) {
        self.inner.failed.store(true, Ordering::Release);
    }

    /// The data file's descriptor (`mdb_env_get_fd`).
    pub fn data_fd(&self) -> std::os::unix::io::RawFd {
        std::os::unix::io::AsRawFd::as_raw_fd(self.inner.data.file())
    }

    /// Flushes the data file to disk (needed after commits under `NO_SYNC`).
    pub fn sync(&self) -> Result<()> {
        if self.inner.flags.load(Ordering::Relaxed) & env_flags::READ_ONLY != 0 {
            return Err(Error::Io(std::io::Error::from_raw_os_error(libc::EACCES)));
        }
        self.inner.data.sync_data()?;
        Ok(())
    }

    /// Gives the free pages at the end of the data file back and shortens the file to the
    /// pages in use. Write txns take every free page no reader needs and give back those
    /// at the end, each committed durably (whatever the sync mode), until three in a row
    /// find none (the pages one frees, such as the old copies of the free DB's pages, are
    /// reusable by the one two commits later); the file is then cut to what both metas
    /// count.
    /// Returns the file's length. Pages in use near the end keep it long (only a
    /// compacting copy, [`Env::copy_compact_to`], moves them), and so does a live reader
    /// of a snapshot older than the last commit: call again once it has ended.
    ///
    /// Works with any map size; a file an LMDB process has open with `MDB_WRITEMAP` must
    /// not be shrunk (see [`EnvOptions::shrink_on_commit`]).
    pub fn shrink_file(&self) -> Result<u64> {
        const MAX_TXNS: usize = 16;
        let mut end = u64::MAX;
        let mut idle = 0;
        for _ in 0..MAX_TXNS {
            let mut txn = self.begin_write()?;
            txn.prepare_shrink()?;
            txn.commit()?;
            let now = self.inner.latest_meta()?.last_pgno;
            idle = if now < end { 0 } else { idle + 1 };
            end = end.min(now);
            if idle == 3 {
                break;
            }
        }
        Ok(self.inner.data.len()?)
    }

    /// Changes the map size limit of an open environment. With no transaction active in
    /// this process, as LMDB requires; `0` keeps the current size. Sizes beyond the address
    /// space reserved at open need a reopen.
    pub fn set_map_size(&self, bytes: u64) -> Result<()> {
        let _writer = self.inner.writer_in_process()?;
        let latest = self.inner.latest_meta()?;
        let used = (latest.last_pgno + 1) * self.inner.page_size as u64;
        // 0: adopt the size the file records (after `MapResized`), as LMDB.
        let adopt = bytes == 0;
        let bytes = if adopt {
            latest.map_size.max(used)
        } else {
            bytes
        };
        if bytes as usize > self.inner.map.len() {
            return Err(Error::InvalidArgument(
                "map size beyond the address space reserved at open; reopen the environment",
            ));
        }
        self.inner
            .map_size
            .store(bytes.max(used), Ordering::Release);
        if !adopt {
            self.inner.map_size_explicit.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// The environment's flags.
    pub fn flags(&self) -> u32 {
        self.inner.flags.load(Ordering::Relaxed)
    }

    /// Sets (`on`) or clears flags among `env_flags::CHANGEABLE`.
    pub fn set_flags(&self, flags: u32, on: bool) -> Result<()> {
        if flags & !env_flags::CHANGEABLE != 0 {
            return Err(Error::InvalidArgument(
                "flag cannot be changed on an open environment",
            ));
        }
        if on {
            self.inner.flags.fetch_or(flags, Ordering::AcqRel);
        } else {
            self.inner.flags.fetch_and(!flags, Ordering::AcqRel);
        }
        Ok(())
    }

    /// The path the environment was opened with.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Page size of the data file.
    pub fn page_size(&self) -> usize {
        self.inner.page_size
    }

    /// Longest key accepted (511 as in LMDB, unless long keys were enabled).
    pub fn max_key_size(&self) -> usize {
        self.inner.max_key_size
    }

    /// Reader slots in use: (pid, thread id, snapshot txnid if one is held).
    pub fn readers(&self) -> Vec<(u32, u64, Option<u64>)> {
        self.inner.lock.readers()
    }

    /// Clears reader slots of processes that died; returns how many.
    pub fn reader_check(&self) -> Result<usize> {
        self.inner.lock.clear_stale_readers()
    }
}

/// A new environment with `opts` in a temporary directory, for the crate's unit tests.
#[cfg(test)]
pub(crate) fn temp_env(opts: &EnvOptions) -> (tempfile::TempDir, Env) {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: a new file in a directory private to the test, mapped by this handle only.
    let env = unsafe { opts.open(dir.path()) }.unwrap();
    (dir, env)
}
