//! Power cuts at every point of a run of commits, on the fault-injecting data file.
//!
//! A workload of txns (overwrites, deletes that free pages for reuse, values larger than a
//! page, a named DB and a DUPSORT DB) runs on an environment whose data file is a
//! `FaultInjector`. Before every call the commit makes to the file (each vectored write,
//! flush and length change), the test takes power cuts: the file as the disk could hold it
//! if the power failed at that instant, with any subset of the unflushed writes kept and
//! some torn at 512-byte sectors. Each cut is then opened as an environment of its own and
//! must hold, whole, one committed state: at least as new as the last commit acknowledged
//! as durable in the mode under test, at most the one in flight, with `check` clean.
//!
//! Every sixth commit is followed by `Env::shrink_file`, which gives the free end of the
//! file back (in durable commits, whatever the mode) and cuts the file: cuts are taken
//! inside it too.
//!
//! `FERROCORE_POWER_SEEDS=n` runs n workloads per mode instead of the default.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::{open_env, try_open_env, Rng};
use ferrocore::fault::{CallKind, Cut, FaultInjector};
use ferrocore::{db_flags, env_flags, Database, Env, EnvOptions, Result};

/// The content of the three DBs: (DB index, key) -> values in order (one unless DUPSORT).
type State = BTreeMap<(u8, Vec<u8>), Vec<Vec<u8>>>;

const NAMED: &str = "named";
const DUPS: &str = "dups";

/// What a power cut may take from the environment under test.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Guarantee {
    /// Data flushed, then meta flushed: nothing acknowledged is lost.
    Full,
    /// No meta flush: the last acknowledged commit may be lost.
    NoMetaSync,
    /// No flush at all, with `Env::sync` every few commits: what was synced survives a cut
    /// that keeps none of the later writes; any other cut may lose or damage anything
    /// after the sync, and must still give errors, never a crash.
    NoSync,
}

/// How the environment under test commits: its flags, and so its guarantee.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Mode {
    flags: u32,
}

impl Mode {
    fn guarantee(self) -> Guarantee {
        let f = self.flags;
        if f & env_flags::NO_SYNC != 0
            || f & (env_flags::WRITE_MAP | env_flags::MAP_ASYNC)
                == env_flags::WRITE_MAP | env_flags::MAP_ASYNC
        {
            Guarantee::NoSync
        } else if f & env_flags::NO_META_SYNC != 0 {
            Guarantee::NoMetaSync
        } else {
            Guarantee::Full
        }
    }
}

/// A power cut taken before call `call`.
struct Image {
    call: usize,
    cut: Cut,
    bytes: Vec<u8>,
}

/// What the workload recorded: the state after each commit (index 0: before the first),
/// the call count when each commit (and each sync) returned, and the cuts.
struct Run {
    states: Vec<State>,
    acked_at: Vec<usize>,
    /// Per commit: whether it wrote anything (a txn that changed nothing writes no meta,
    /// as in LMDB, so it flushes nothing either).
    wrote: Vec<bool>,
    /// (calls when `Env::sync` returned, commits made by then).
    synced_at: Vec<(usize, usize)>,
    /// `Env::shrink_file` calls: (calls when it began, when it returned, commits by
    /// then). It commits durably whatever the mode, with the content unchanged.
    shrinks: Vec<(usize, usize, usize)>,
    /// How many of them made the file shorter.
    shrank: usize,
    images: Vec<Image>,
}

fn open_with(dir: &std::path::Path, flags: u32, injector: Option<&FaultInjector>) -> Env {
    let mut opts = EnvOptions::new();
    opts.max_dbs(4).flags(flags);
    if let Some(inj) = injector {
        let inj = inj.clone();
        opts.data_file(move |f| inj.wrap(f));
    }
    open_env(dir, &opts)
}

fn value(rng: &mut Rng, big: bool) -> Vec<u8> {
    let len = if big {
        4096 + rng.below(6000)
    } else {
        8 + rng.below(120)
    };
    let fill = rng.next() as u8;
    (0..len).map(|i| fill.wrapping_add(i as u8)).collect()
}

/// Runs `commits` txns from `seed` on an environment with `injector`, taking `cuts_per_call`
/// random cuts (plus the two extremes now and then) before every call to the data file.
fn run_workload(mode: Mode, seed: u64, commits: usize, cuts_per_call: u64) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let injector = FaultInjector::new();
    let env = open_with(dir.path(), mode.flags, Some(&injector));
    let images = Arc::new(Mutex::new(Vec::new()));
    {
        let images = Arc::clone(&images);
        let mut rng = Rng(seed ^ 0xC0FF_EE00);
        injector.before_each_call(move |call, _kind: CallKind, disk| {
            let take = |cut: Cut| {
                images.lock().unwrap().push(Image {
                    call,
                    cut,
                    bytes: disk.cut(cut),
                });
            };
            for _ in 0..cuts_per_call {
                take(Cut::Random(rng.next()));
            }
            match rng.below(8) {
                0 => take(Cut::KeepAll),
                1 => take(Cut::KeepNone),
                _ => {}
            }
        });
    }
    let mut rng = Rng(seed);
    let mut model = State::new();
    let mut run = Run {
        states: vec![model.clone()],
        acked_at: Vec::new(),
        wrote: Vec::new(),
        synced_at: Vec::new(),
        shrinks: Vec::new(),
        shrank: 0,
        images: Vec::new(),
    };
    for c in 0..commits {
        let mut txn = env.begin_write().unwrap();
        let named = txn.open_db(Some(NAMED), db_flags::CREATE).unwrap();
        let dups = txn
            .open_db(Some(DUPS), db_flags::CREATE | db_flags::DUP_SORT as u32)
            .unwrap();
        let dbs = [Database::MAIN, named, dups];
        for _ in 0..=rng.below(12) {
            let d = rng.below(3) as u8;
            let key = format!("k{:03}", rng.below(60)).into_bytes();
            let entry = (d, key.clone());
            match rng.below(10) {
                // Deletes free pages, which later txns reuse.
                0..=2 => {
                    let found = txn.delete(dbs[d as usize], &key).unwrap();
                    assert_eq!(found, model.remove(&entry).is_some());
                }
                _ => {
                    let big = d != 2 && rng.below(6) == 0;
                    let v = value(&mut rng, big);
                    txn.put(dbs[d as usize], &key, &v, 0).unwrap();
                    let values = model.entry(entry).or_default();
                    if d == 2 {
                        if let Err(at) = values.binary_search(&v) {
                            values.insert(at, v);
                        }
                    } else {
                        *values = vec![v];
                    }
                }
            }
        }
        let calls = injector.calls();
        txn.commit().unwrap();
        run.wrote.push(injector.calls() > calls);
        run.acked_at.push(injector.calls());
        run.states.push(model.clone());
        if mode.guarantee() == Guarantee::NoSync && c % 4 == 3 {
            env.sync().unwrap();
            run.synced_at.push((injector.calls(), c + 1));
        }
        if c % 6 == 5 {
            // Give the free end of the file back (the commits may have done some).
            let data = dir.path().join("data.mdb");
            let before = std::fs::metadata(&data).unwrap().len();
            let began = injector.calls();
            let len = env.shrink_file().unwrap();
            assert_eq!(len, std::fs::metadata(&data).unwrap().len());
            run.shrank += usize::from(len < before);
            run.shrinks.push((began, injector.calls(), c + 1));
            run.synced_at.push((injector.calls(), c + 1));
        }
    }
    drop(env);
    run.images = std::mem::take(&mut *images.lock().unwrap());
    run
}

/// Everything in the three DBs of the environment in `dir`.
fn read_state(env: &Env) -> Result<State> {
    let txn = env.begin_read()?;
    let mut state = State::new();
    for (d, name) in [(0u8, None), (1, Some(NAMED)), (2, Some(DUPS))] {
        let db = match name {
            None => Database::MAIN,
            Some(n) => match txn.open_db(Some(n)) {
                Ok(db) => db,
                Err(ferrocore::Error::NotFound) => continue,
                Err(e) => return Err(e),
            },
        };
        let mut cursor = txn.cursor(db)?;
        while let Some((k, v)) = cursor.next()? {
            if d == 0 && (k == NAMED.as_bytes() || k == DUPS.as_bytes()) {
                continue; // the named DBs' records
            }
            state.entry((d, k.to_vec())).or_default().push(v.to_vec());
        }
    }
    Ok(state)
}

/// Opens a cut as an environment; its state and whether `check` passed.
fn open_image(bytes: &[u8]) -> Result<(State, Result<()>)> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.mdb"), bytes).unwrap();
    let mut opts = EnvOptions::new();
    opts.max_dbs(4);
    let env = try_open_env(dir.path(), &opts)?;
    let state = read_state(&env)?;
    let checked = env.check().map(|_| ());
    Ok((state, checked))
}

/// Checks every cut of `run` against what `mode` promises. Returns the number checked.
fn verify(mode: Mode, seed: u64, run: &Run) -> usize {
    for image in &run.images {
        // Commits acknowledged before the call the cut was taken at; the next may be in
        // flight and may or may not have landed.
        let acked = run.acked_at.iter().filter(|&&a| a <= image.call).count();
        let newest = (acked + 1).min(run.states.len() - 1);
        let oldest = match (mode.guarantee(), image.cut) {
            (_, Cut::KeepAll) | (Guarantee::Full, _) => acked,
            // The last commit that wrote may be lost (commits after it wrote nothing).
            (Guarantee::NoMetaSync, _) => (1..=acked)
                .rev()
                .find(|&i| run.wrote[i - 1])
                .map_or(acked, |i| i - 1),
            (Guarantee::NoSync, Cut::KeepNone) => run
                .synced_at
                .iter()
                .filter(|&&(at, _)| at <= image.call)
                .map(|&(_, commits)| commits)
                .max()
                .unwrap_or(0),
            (Guarantee::NoSync, Cut::Random(_)) => {
                // No promise beyond "errors, not crashes": open, read and check it all.
                if let Ok((_, checked)) = open_image(&image.bytes) {
                    let _ = checked;
                }
                continue;
            }
        };
        let context = format!(
            "{mode:?} seed {seed}, cut {:?} before call {} ({} acknowledged)",
            image.cut, image.call, acked
        );
        let (state, checked) = open_image(&image.bytes)
            .unwrap_or_else(|e| panic!("{context}: the cut does not open: {e}"));
        if let Err(e) = checked {
            panic!("{context}: check fails: {e}");
        }
        let candidates = if mode.guarantee() == Guarantee::NoSync && image.cut == Cut::KeepNone {
            // Exactly what was synced; within a shrink, which syncs, what it synced too.
            let shrinking = run
                .shrinks
                .iter()
                .find(|&&(began, returned, _)| began < image.call && image.call <= returned);
            oldest..=shrinking.map_or(oldest, |&(_, _, commits)| commits)
        } else {
            oldest..=newest
        };
        let allowed = |i: usize| {
            *candidates.start() == i
                || *candidates.end() == i
                || (mode.guarantee(), image.cut) != (Guarantee::NoSync, Cut::KeepNone)
        };
        assert!(
            candidates
                .clone()
                .any(|i| allowed(i) && run.states[i] == state),
            "{context}: the file holds none of the committed states {candidates:?} \
             ({} entries)",
            state.len()
        );
    }
    run.images.len()
}

fn seeds() -> u64 {
    std::env::var("FERROCORE_POWER_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4)
}

fn power_cuts(mode: Mode) {
    let (mut checked, mut shrank) = (0, 0);
    for seed in 0..seeds() {
        let run = run_workload(mode, 1000 + seed, 24, 2);
        checked += verify(mode, seed, &run);
        shrank += run.shrank;
    }
    eprintln!("{mode:?}: {checked} power cuts checked, the file shrank {shrank} times");
    assert!(checked >= 800, "only {checked} cuts");
    assert!(shrank > 0, "no shrink_file made the file shorter");
}

#[test]
fn power_cuts_in_full_sync_mode_lose_nothing_acknowledged() {
    power_cuts(Mode { flags: 0 });
}

#[test]
fn power_cuts_with_no_meta_sync_lose_at_most_the_last_commit() {
    power_cuts(Mode {
        flags: env_flags::NO_META_SYNC,
    });
}

#[test]
fn power_cuts_with_no_sync_keep_what_was_synced_and_never_crash_the_reader() {
    power_cuts(Mode {
        flags: env_flags::NO_SYNC,
    });
}

#[test]
fn power_cuts_with_write_map_lose_nothing_acknowledged() {
    power_cuts(Mode {
        flags: env_flags::WRITE_MAP,
    });
}

#[test]
fn power_cuts_with_write_map_and_no_meta_sync_lose_at_most_the_last_commit() {
    power_cuts(Mode {
        flags: env_flags::WRITE_MAP | env_flags::NO_META_SYNC,
    });
}

#[test]
fn power_cuts_with_write_map_and_map_async_keep_what_was_synced() {
    power_cuts(Mode {
        flags: env_flags::WRITE_MAP | env_flags::MAP_ASYNC,
    });
}
