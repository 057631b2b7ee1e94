//! ferrocore and LMDB 0.9 processes on one live environment, in every mix and order.
//!
//! `tests/c/shared.c` is built once against LMDB's header and library; each process runs
//! it either on Debian's `liblmdb.so.0` or, through `LD_LIBRARY_PATH`, on ferrocore's.
//! The two share the lock file (LMDB 0.9's layout, docs/FORMAT.md §14): one writer at a
//! time, readers pinning their snapshots against the other's writer, each listing and
//! clearing the other's readers, a killed writer's robust mutex taken over by the other,
//! and the map size.
//!
//! Needs the real LMDB (`liblmdb-dev`, which `.ci/run` installs); outside CI the tests
//! are skipped without it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{compile, ferrocore_lib_dir, real_lmdb_available};

/// Which library a process runs on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Lib {
    Lmdb,
    Ferrocore,
}

use Lib::{Ferrocore, Lmdb};

/// Both orders of the two libraries.
const PAIRS: [(Lib, Lib); 2] = [(Lmdb, Ferrocore), (Ferrocore, Lmdb)];

/// The built program and ferrocore's library directory, in a temporary directory.
struct Shared {
    _tmp: tempfile::TempDir,
    exe: PathBuf,
    ferrocore_lib: PathBuf,
}

impl Shared {
    /// `None` (the test is skipped) without the real LMDB, outside CI.
    fn build() -> Option<Shared> {
        if !real_lmdb_available() {
            eprintln!("skipped: the real LMDB (liblmdb-dev) is not installed");
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        let exe = compile(
            tmp.path(),
            "shared",
            "shared",
            &["-I/usr/include", "-l:liblmdb.so.0"],
        );
        let ferrocore_lib = ferrocore_lib_dir(tmp.path());
        Some(Shared {
            _tmp: tmp,
            exe,
            ferrocore_lib,
        })
    }

    /// The program on `lib`, in role `args` on the environment `dir`.
    fn cmd(&self, lib: Lib, dir: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.arg(dir).args(args);
        if lib == Ferrocore {
            cmd.env("LD_LIBRARY_PATH", &self.ferrocore_lib);
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    }

    /// Runs a role to its end; its stdout. Panics if it failed.
    fn run(&self, lib: Lib, dir: &Path, args: &[&str]) -> String {
        let out = self.cmd(lib, dir, args).output().unwrap();
        expect_success(&format!("{lib:?} {args:?}"), out)
    }

    /// Starts a role and waits until it has created `ready`.
    fn start(&self, lib: Lib, dir: &Path, args: &[&str], ready: &Path) -> Child {
        let mut child = self.cmd(lib, dir, args).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_mins(1);
        while !ready.exists() {
            if let Some(status) = child.try_wait().unwrap() {
                let out = child.wait_with_output().unwrap();
                panic!(
                    "{lib:?} {args:?} ended before it was ready ({status}): {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            assert!(
                Instant::now() < deadline,
                "{lib:?} {args:?} never got ready"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        child
    }

    /// Starts `resize-wait` with a 1 MiB map and waits until it is ready; it goes on once
    /// the returned file exists.
    fn resize_wait(&self, lib: Lib, dir: &Path) -> (Child, PathBuf) {
        let (ready, go) = (dir.join("ready"), dir.join("go"));
        let args = [
            "resize-wait",
            "1048576",
            ready.to_str().unwrap(),
            go.to_str().unwrap(),
        ];
        (self.start(lib, dir, &args, &ready), go)
    }

    /// Starts one of the roles that take only a ready file (`hold-open`, `hold-read`,
    /// `hold-write`), and waits until it is ready.
    fn hold(&self, lib: Lib, dir: &Path, role: &str) -> Child {
        let ready = dir.join(format!("{role}-{lib:?}.ready"));
        self.start(lib, dir, &[role, ready.to_str().unwrap()], &ready)
    }
}

fn expect_success(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn kill(mut child: Child) {
    child.kill().unwrap(); // SIGKILL: no cleanup of any kind
    child.wait().unwrap();
}

/// Processes of both libraries increment one counter at the same time: every increment
/// counts, so exactly one writer ran at a time across the two libraries.
#[test]
fn writers_of_both_libraries_take_turns() {
    let Some(shared) = Shared::build() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (procs, each) = (4, 150);
    let children: Vec<(Lib, Child)> = (0..procs)
        .map(|i| {
            let lib = if i % 2 == 0 { Lmdb } else { Ferrocore };
            let each = each.to_string();
            (
                lib,
                shared
                    .cmd(lib, dir.path(), &["incr", &each])
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    for (lib, child) in children {
        expect_success(&format!("{lib:?} incr"), child.wait_with_output().unwrap());
    }
    for lib in [Lmdb, Ferrocore] {
        let total = shared.run(lib, dir.path(), &["counter"]);
        assert_eq!(
            total.trim(),
            (procs * each).to_string(),
            "as {lib:?} reads it"
        );
    }
}

/// Processes of both libraries open and close the environment again and again while the
/// others do: whoever finds itself alone re-initialises the lock table, as in LMDB, while
/// the others wait for it. Every open succeeds and every increment counts.
#[test]
fn processes_of_both_libraries_open_and_close_at_the_same_time() {
    let Some(shared) = Shared::build() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (procs, each) = (4, 50);
    let children: Vec<(Lib, Child)> = (0..procs)
        .map(|i| {
            let lib = if i % 2 == 0 { Lmdb } else { Ferrocore };
            let each = each.to_string();
            let child = shared.cmd(lib, dir.path(), &["open-incr", &each]).spawn();
            (lib, child.unwrap())
        })
        .collect();
    for (lib, child) in children {
        let what = format!("{lib:?} open-incr");
        expect_success(&what, child.wait_with_output().unwrap());
    }
    for lib in [Lmdb, Ferrocore] {
        let total = shared.run(lib, dir.path(), &["counter"]);
        assert_eq!(
            total.trim(),
            (procs * each).to_string(),
            "as {lib:?} reads it"
        );
    }
}

/// A read txn of either library keeps its snapshot, at the same addresses, while a
/// writer of the other rewrites every key many times over (and would reuse its pages if
/// the reader were not pinning them); a new txn then sees the writer's commits.
#[test]
fn a_reader_of_either_library_pins_its_snapshot_against_the_other() {
    let Some(shared) = Shared::build() else {
        return;
    };
    for (reader, writer) in PAIRS {
        let dir = tempfile::tempdir().unwrap();
        let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
        shared.run(writer, dir.path(), &["churn", "1"]);
        let snapshot = shared.start(
            reader,
            dir.path(),
            &["snapshot", ready.to_str().unwrap(), go.to_str().unwrap()],
            &ready,
        );
        shared.run(writer, dir.path(), &["churn", "40"]);
        std::fs::write(&go, b"").unwrap();
        let what = format!("{reader:?} reader against a {writer:?} writer");
        expect_success(&what, snapshot.wait_with_output().unwrap());
    }
}

/// A process of either library killed inside its write txn: the robust writer mutex
/// passes to the other library's next writer (EOWNERDEAD, then consistent), the dead
/// txn's put is nowhere, and both libraries write afterwards. (A keeper process holds the
/// environment open throughout, so nobody opens it alone and starts a fresh lock table.)
#[test]
fn a_writer_of_either_library_killed_mid_txn_releases_the_lock_to_the_other() {
    let Some(shared) = Shared::build() else {
        return;
    };
    for (dead, next) in PAIRS {
        let dir = tempfile::tempdir().unwrap();
        shared.run(next, dir.path(), &["put", "before"]);
        let keeper = shared.hold(next, dir.path(), "hold-open");
        let holder = shared.hold(dead, dir.path(), "hold-write");
        kill(holder);
        shared.run(next, dir.path(), &["put", "after"]);
        shared.run(dead, dir.path(), &["put", "again"]);
        for lib in [Lmdb, Ferrocore] {
            shared.run(lib, dir.path(), &["absent", "uncommitted"]);
        }
        kill(keeper);
    }
}

/// A reader of either library is listed by `mdb_reader_list` of the other while it lives,
/// and once it is killed, `mdb_reader_check` of the other clears its slot. (A keeper
/// process holds the environment open throughout: a process that opens it alone starts a
/// fresh reader table, in LMDB as in ferrocore, and would find nothing to clear.)
#[test]
fn readers_of_either_library_are_listed_and_cleared_by_the_other() {
    let Some(shared) = Shared::build() else {
        return;
    };
    for (dead, checker) in PAIRS {
        let dir = tempfile::tempdir().unwrap();
        shared.run(checker, dir.path(), &["put", "k"]);
        let keeper = shared.hold(checker, dir.path(), "hold-open");
        let holder = shared.hold(dead, dir.path(), "hold-read");
        let pid = holder.id().to_string();
        let lists = |list: &str| {
            list.lines()
                .any(|l| l.split_whitespace().next() == Some(pid.as_str()))
        };
        let list = shared.run(checker, dir.path(), &["reader-list"]);
        assert!(
            lists(&list),
            "{checker:?} does not list {dead:?}'s reader {pid}:\n{list}"
        );
        assert_eq!(
            shared.run(checker, dir.path(), &["reader-check"]).trim(),
            "dead=0"
        );
        kill(holder);
        let what = format!("{checker:?} clearing a dead {dead:?} reader");
        let cleared = shared.run(checker, dir.path(), &["reader-check"]);
        assert_eq!(cleared.trim(), "dead=1", "{what}");
        let list = shared.run(dead, dir.path(), &["reader-list"]);
        assert!(!lists(&list), "{what}:\n{list}");
        assert_eq!(
            shared.run(dead, dir.path(), &["reader-check"]).trim(),
            "dead=0"
        );
        kill(keeper);
    }
}

/// Explicit map sizes, as LMDB: a process whose map is smaller than what another process
/// of the other library committed gets MDB_MAP_RESIZED from its next txn, adopts the new
/// size with `mdb_env_set_mapsize(env, 0)`, reads the data and writes.
#[test]
fn a_map_outgrown_by_the_other_library_is_map_resized() {
    let Some(shared) = Shared::build() else {
        return;
    };
    for (waiter, grower) in PAIRS {
        let dir = tempfile::tempdir().unwrap();
        let (waiting, go) = shared.resize_wait(waiter, dir.path());
        shared.run(grower, dir.path(), &["grow", "8388608", "4194304"]);
        std::fs::write(&go, b"").unwrap();
        let what = format!("{waiter:?} after {grower:?} grew the map");
        let out = expect_success(&what, waiting.wait_with_output().unwrap());
        assert_eq!(out.trim(), "mapsize=8388608 big=65536", "{what}");
    }
}

/// ferrocore's own map grows on demand (Rust API, no map size set). A live LMDB process
/// sees what it would see after another LMDB process with a larger map: MDB_MAP_RESIZED
/// once the data outgrows its map, then, after `mdb_env_set_mapsize(env, 0)`, the size
/// ferrocore records in the meta (at least the data, with headroom: docs/FORMAT.md §2.3).
#[test]
fn lmdb_sees_ferrocores_growing_map_as_map_resized() {
    let Some(shared) = Shared::build() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (waiting, go) = shared.resize_wait(Lmdb, dir.path());
    {
        // SAFETY: the only other process is LMDB, which shares the lock file.
        let env = unsafe { ferrocore::Env::open(dir.path()) }.unwrap();
        let mut txn = env.begin_write().unwrap();
        let big: Vec<u8> = (0..65536u32).map(|i| i as u8).collect();
        txn.put(ferrocore::Database::MAIN, b"big", &big, 0).unwrap();
        for i in 0..63 {
            let key = format!("fill{i:06}");
            txn.put(ferrocore::Database::MAIN, key.as_bytes(), &big, 0)
                .unwrap();
        }
        txn.commit().unwrap();
        assert!(env.info().unwrap().map_size > 4 << 20);
    }
    std::fs::write(&go, b"").unwrap();
    let out = expect_success(
        "LMDB after ferrocore grew",
        waiting.wait_with_output().unwrap(),
    );
    // 4 MiB of values and their pages: ferrocore's recorded size has doubled to 8 MiB.
    assert_eq!(out.trim(), "mapsize=8388608 big=65536");
}
