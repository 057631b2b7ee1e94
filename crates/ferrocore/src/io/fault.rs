//! A data file that fails on demand and forgets on demand: power-loss and failure tests put
//! it in the [`DataFile`] seam (`EnvOptions::data_file`).
//!
//! It writes through to the real file, so the environment that uses it works as usual, and
//! it keeps a model of what the disk holds: the file as of the last successful flush
//! (`durable`) and every change since, in order (`pending`). A power cut keeps any subset
//! of the pending changes and may tear a write at 512-byte sectors, as a disk that reorders
//! and only writes whole sectors atomically may: [`DiskState::cut`] builds the file such a
//! cut leaves, without disturbing the running environment. [`FaultInjector::fail_call`]
//! makes the n-th call fail with `ENOSPC`, `EIO` or a short write.
//!
//! Under `WRITE_MAP` the engine writes pages through the map, which no call here sees; the
//! commit announces them ([`DataFile::wrote_through_map`]) and they become pending then.
//! Before that, the kernel may write such a page back at any moment: a cut therefore also
//! keeps, or not, each sector where the file (the page cache) differs from everything
//! recorded so far ("stray" sectors).
//!
//! A failed flush models Linux after an `fdatasync` error: the kernel marks the dirty pages
//! clean without writing them, so the pending writes are lost to the disk (a later flush
//! does not bring them back) while the page cache, and so the map, still shows them.
//!
//! The flush itself never calls `fdatasync`: durability here is the model's, which keeps
//! these tests fast.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, MutexGuard};

use super::DataFile;

/// The disk's atomic unit: a power cut keeps or loses each 512-byte sector of a write.
pub const SECTOR: usize = 512;

/// What an injected failure does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The call fails with `ENOSPC` having done nothing.
    NoSpace,
    /// The call fails with `EIO` having done nothing; a failed flush loses the pending
    /// writes (see the module doc).
    Io,
    /// A write writes its first half (whole sectors) and then fails with `ENOSPC`, as a
    /// short write whose retry finds the disk full. Other calls fail as [`Fault::Io`].
    ShortWrite,
}

/// The kind of a call to the data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// `write_at` or `write_vectored_at`.
    Write,
    /// `sync_data`.
    Sync,
    /// `set_len`.
    SetLen,
}

/// Which pending changes a power cut keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// What the page cache holds: every pending change and every stray sector, so what a
    /// process crash leaves.
    KeepAll,
    /// None: only what was flushed.
    KeepNone,
    /// A random subset, some writes torn at sector boundaries, drawn from this seed.
    Random(u64),
}

/// A change not yet flushed.
#[derive(Clone, Debug)]
enum Pending {
    Write { offset: u64, bytes: Vec<u8> },
    SetLen(u64),
}

impl Pending {
    /// Applies the change, whole, to `image`.
    fn apply_to(&self, image: &mut Vec<u8>) {
        match self {
            Pending::Write { offset, bytes } => write_into(image, *offset, bytes),
            Pending::SetLen(len) => image.resize(*len as usize, 0),
        }
    }
}

/// What the disk holds, and what it may yet hold: the state a cut is taken from.
pub struct DiskState {
    durable: Vec<u8>,
    pending: Vec<Pending>,
    /// The file as the page cache shows it, read when the state is handed out.
    live: Vec<u8>,
}

impl DiskState {
    /// The bytes of the file a power cut of kind `cut` would leave now.
    pub fn cut(&self, cut: Cut) -> Vec<u8> {
        if cut == Cut::KeepAll {
            return self.live.clone();
        }
        let mut image = self.durable.clone();
        let mut rng = match cut {
            Cut::Random(seed) => seed ^ 0x9E37_79B9_7F4A_7C15,
            _ => 0,
        };
        for change in &self.pending {
            let keep = match cut {
                Cut::KeepAll => Keep::All,
                Cut::KeepNone => Keep::None,
                Cut::Random(_) => match next_random(&mut rng) % 3 {
                    0 => Keep::All,
                    1 => Keep::None,
                    _ => Keep::SomeSectors,
                },
            };
            match (change, keep) {
                (_, Keep::None) => {}
                (Pending::SetLen(_), _) | (Pending::Write { .. }, Keep::All) => {
                    change.apply_to(&mut image);
                }
                (Pending::Write { offset, bytes }, Keep::SomeSectors) => {
                    // Sectors are aligned to the file, not to the write.
                    let mut at = *offset as usize;
                    let end = at + bytes.len();
                    while at < end {
                        let sector_end = ((at / SECTOR) + 1) * SECTOR;
                        let piece_end = sector_end.min(end);
                        if next_random(&mut rng) & 1 == 0 {
                            let from = at - *offset as usize;
                            let to = piece_end - *offset as usize;
                            write_into(&mut image, at as u64, &bytes[from..to]);
                        }
                        at = piece_end;
                    }
                }
            }
        }
        if let Cut::Random(_) = cut {
            // Stray sectors: in the page cache but in no recorded change (pages written
            // through the map and not announced yet, or writes a failed flush dropped).
            let recorded = self.all_recorded();
            let shared = recorded.len().min(self.live.len()).min(image.len());
            for start in (0..shared).step_by(SECTOR) {
                let end = (start + SECTOR).min(shared);
                if self.live[start..end] != recorded[start..end] && next_random(&mut rng) & 1 == 0 {
                    image[start..end].copy_from_slice(&self.live[start..end]);
                }
            }
        }
        image
    }

    /// The durable bytes with every pending change applied.
    fn all_recorded(&self) -> Vec<u8> {
        let mut image = self.durable.clone();
        self.pending.iter().for_each(|c| c.apply_to(&mut image));
        image
    }

    /// Changes since the last flush.
    pub fn pending_changes(&self) -> usize {
        self.pending.len()
    }
}

#[derive(Clone, Copy)]
enum Keep {
    All,
    None,
    SomeSectors,
}

/// splitmix64: a fast deterministic stream for the cuts (and the tree's unit tests).
pub(crate) fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Writes `bytes` at `offset` of `image`, growing it as a file grows.
fn write_into(image: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let start = offset as usize;
    let end = start + bytes.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(bytes);
}

/// Called before every call to the file, with the call's number (from 0), its kind and
/// the disk's state at that instant.
type CallHook = Box<dyn FnMut(usize, CallKind, &DiskState) + Send>;

struct State {
    disk: DiskState,
    /// The wrapped file, to read the page cache's view from.
    file: Option<File>,
    calls: Vec<CallKind>,
    /// (call number, fault): the call to fail.
    planned: Option<(usize, Fault)>,
    before_call: Option<CallHook>,
}

/// The test's handle on a fault-injecting data file: plans failures, and takes power cuts.
/// Clones share one file model.
#[derive(Clone)]
pub struct FaultInjector {
    state: Arc<Mutex<State>>,
}

impl Default for FaultInjector {
    fn default() -> Self {
        FaultInjector::new()
    }
}

impl std::fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultInjector")
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

impl FaultInjector {
    /// An injector with no file yet: [`FaultInjector::wrap`] gives it one.
    pub fn new() -> FaultInjector {
        FaultInjector {
            state: Arc::new(Mutex::new(State {
                disk: DiskState {
                    durable: Vec::new(),
                    pending: Vec::new(),
                    live: Vec::new(),
                },
                file: None,
                calls: Vec::new(),
                planned: None,
                before_call: None,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test hook poisons the mutex; the model is still whole.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The seam over `file`, whose current contents are taken as durable. For
    /// `EnvOptions::data_file`: `opts.data_file(move |f| injector.wrap(f))`.
    pub fn wrap(&self, file: File) -> io::Result<Box<dyn DataFile>> {
        let len = file.metadata()?.len() as usize;
        let mut durable = vec![0u8; len];
        file.read_exact_at(&mut durable, 0)?;
        let mut state = self.lock();
        state.disk = DiskState {
            durable,
            pending: Vec::new(),
            live: Vec::new(),
        };
        state.file = Some(file.try_clone()?);
        drop(state);
        Ok(Box::new(FaultyFile {
            file,
            injector: self.clone(),
        }))
    }

    /// Makes call number `n` (counted from 0 over every call since the file was wrapped)
    /// fail with `fault`.
    pub fn fail_call(&self, n: usize, fault: Fault) {
        self.lock().planned = Some((n, fault));
    }

    /// Calls made so far.
    pub fn calls(&self) -> usize {
        self.lock().calls.len()
    }

    /// The kinds of the calls made so far, in order.
    pub fn call_log(&self) -> Vec<CallKind> {
        self.lock().calls.clone()
    }

    /// Runs `hook` before every later call, with the call's number and kind and the disk's
    /// state: a test takes its power cuts there (it must not call the injector).
    pub fn before_each_call(&self, hook: impl FnMut(usize, CallKind, &DiskState) + Send + 'static) {
        self.lock().before_call = Some(Box::new(hook));
    }

    /// The file a power cut of kind `cut` would leave now.
    pub fn power_cut(&self, cut: Cut) -> Vec<u8> {
        let mut state = self.lock();
        state.read_live();
        state.disk.cut(cut)
    }

    /// Registers a call of `kind`: runs the hook, and returns the fault planned for it.
    fn enter(&self, kind: CallKind) -> (MutexGuard<'_, State>, Option<Fault>) {
        let mut state = self.lock();
        let n = state.calls.len();
        state.calls.push(kind);
        if let Some(mut hook) = state.before_call.take() {
            state.read_live();
            hook(n, kind, &state.disk);
            state.before_call = Some(hook);
        }
        let fault = match state.planned {
            Some((at, fault)) if at == n => {
                state.planned = None;
                Some(fault)
            }
            _ => None,
        };
        (state, fault)
    }
}

impl State {
    /// Reads the file as the page cache shows it into `disk.live`.
    fn read_live(&mut self) {
        let Some(file) = &self.file else { return };
        let len = file.metadata().map_or(0, |m| m.len() as usize);
        self.disk.live.resize(len, 0);
        if file.read_exact_at(&mut self.disk.live, 0).is_err() {
            self.disk.live.clear();
        }
    }
}

/// The [`DataFile`] an injector wraps.
struct FaultyFile {
    file: File,
    injector: FaultInjector,
}

fn error(fault: Fault) -> io::Error {
    io::Error::from_raw_os_error(match fault {
        Fault::NoSpace | Fault::ShortWrite => libc::ENOSPC,
        Fault::Io => libc::EIO,
    })
}

impl FaultyFile {
    /// Writes `bytes` through to the file and records it as pending.
    fn write_through(&self, state: &mut State, offset: u64, bytes: Vec<u8>) -> io::Result<()> {
        self.file.write_all_at(&bytes, offset)?;
        state.disk.pending.push(Pending::Write { offset, bytes });
        Ok(())
    }
}

impl DataFile for FaultyFile {
    fn file(&self) -> &File {
        &self.file
    }

    fn write_vectored_at(
        &self,
        offset: u64,
        bufs: &mut dyn Iterator<Item = &[u8]>,
    ) -> io::Result<()> {
        let (mut state, fault) = self.injector.enter(CallKind::Write);
        let bytes: Vec<u8> = bufs.flat_map(|b| b.iter().copied()).collect();
        match fault {
            None => self.write_through(&mut state, offset, bytes),
            Some(Fault::ShortWrite) => {
                let half = (bytes.len() / 2) / SECTOR * SECTOR;
                self.write_through(&mut state, offset, bytes[..half].to_vec())?;
                Err(error(Fault::ShortWrite))
            }
            Some(f) => Err(error(f)),
        }
    }

    fn wrote_through_map(&self, offset: u64, len: usize) -> io::Result<()> {
        let (mut state, fault) = self.injector.enter(CallKind::Write);
        if let Some(f) = fault {
            return Err(error(f));
        }
        let mut bytes = vec![0u8; len];
        self.file.read_exact_at(&mut bytes, offset)?;
        state.disk.pending.push(Pending::Write { offset, bytes });
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let (mut state, fault) = self.injector.enter(CallKind::Sync);
        let disk = &mut state.disk;
        if let Some(f) = fault {
            // The kernel drops the dirty pages it could not write: the disk never gets them.
            disk.pending.clear();
            return Err(error(f));
        }
        for change in disk.pending.drain(..) {
            change.apply_to(&mut disk.durable);
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let (mut state, fault) = self.injector.enter(CallKind::SetLen);
        if let Some(f) = fault {
            return Err(error(f));
        }
        self.file.set_len(len)?;
        state.disk.pending.push(Pending::SetLen(len));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn injector_with(len: usize) -> (FaultInjector, Box<dyn DataFile>) {
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(&vec![7u8; len], 0).unwrap();
        let inj = FaultInjector::new();
        let data = inj.wrap(file).unwrap();
        (inj, data)
    }

    #[test]
    fn flushed_writes_survive_every_cut_and_pending_ones_only_some() {
        let (inj, data) = injector_with(4096);
        data.write_at(0, &[1u8; 1024]).unwrap();
        data.sync_data().unwrap();
        data.write_at(1024, &[2u8; 2048]).unwrap();
        assert_eq!(inj.power_cut(Cut::KeepNone)[..1024], [1u8; 1024]);
        assert_eq!(inj.power_cut(Cut::KeepNone)[1024..3072], [7u8; 2048]);
        assert_eq!(inj.power_cut(Cut::KeepAll)[1024..3072], [2u8; 2048]);
        let mut file_bytes = vec![0u8; 4096];
        data.file().read_exact_at(&mut file_bytes, 0).unwrap();
        assert_eq!(inj.power_cut(Cut::KeepAll), file_bytes, "page cache = file");
        // Random cuts keep whole sectors of the pending write, each old or new.
        let mut seen_torn = false;
        for seed in 0..64 {
            let image = inj.power_cut(Cut::Random(seed));
            assert_eq!(image[..1024], [1u8; 1024]);
            let sectors: Vec<u8> = image[1024..3072].chunks(SECTOR).map(|s| s[0]).collect();
            for (s, chunk) in sectors.iter().zip(image[1024..3072].chunks(SECTOR)) {
                assert!(chunk.iter().all(|b| b == s), "a sector is never torn");
                assert!(*s == 2 || *s == 7);
            }
            seen_torn |= sectors.contains(&2) && sectors.contains(&7);
        }
        assert!(seen_torn, "64 random cuts never tore the write");
    }

    #[test]
    fn planned_faults_fail_the_numbered_call() {
        let (inj, data) = injector_with(0);
        inj.fail_call(1, Fault::NoSpace);
        data.write_at(0, &[1u8; 4096]).unwrap();
        let e = data.write_at(4096, &[2u8; 4096]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(data.len().unwrap(), 4096, "the failed write wrote nothing");
        inj.fail_call(2, Fault::ShortWrite);
        let e = data.write_at(4096, &[3u8; 4096]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(data.len().unwrap(), 6144, "half of the short write landed");
        assert_eq!(
            inj.call_log(),
            [CallKind::Write, CallKind::Write, CallKind::Write]
        );
    }

    #[test]
    fn a_failed_flush_loses_the_pending_writes_for_good() {
        let (inj, data) = injector_with(4096);
        data.write_at(0, &[1u8; 512]).unwrap();
        inj.fail_call(1, Fault::Io);
        assert_eq!(
            data.sync_data().unwrap_err().raw_os_error(),
            Some(libc::EIO)
        );
        data.sync_data().unwrap();
        assert_eq!(inj.power_cut(Cut::KeepNone)[..512], [7u8; 512]);
        let mut live = [0u8; 512];
        data.file().read_exact_at(&mut live, 0).unwrap();
        assert_eq!(live, [1u8; 512], "the page cache still shows the write");
    }
}
