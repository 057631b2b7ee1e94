//! Several processes on one environment: one writer at a time across processes, readers
//! keeping their snapshot while another process commits, dead readers and writers
//! cleaned up. Child processes are this test binary run again with a role in the
//! environment (see `child_process_entry`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrocore::{db_flags, env_flags, Database, Env, EnvOptions};

mod common;
use common::{open_env, try_open_env};

const ROLE: &str = "FERROCORE_TEST_ROLE";
const DIR: &str = "FERROCORE_TEST_DIR";

fn open(dir: &Path) -> Env {
    open_env(dir, EnvOptions::new().max_dbs(4).flags(env_flags::NO_SYNC))
}

fn spawn(role: &str, dir: &Path, extra: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_process_entry",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(ROLE, role)
    .env(DIR, dir)
    .stdout(Stdio::null());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "child never wrote {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn read_u64(txn: &ferrocore::ReadTxn<'_>, db: Database, key: &[u8]) -> u64 {
    txn.get(db, key)
        .unwrap()
        .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()))
}

/// Keys of the concurrent-open test, and how many of them the writer stamps per txn.
const OPENS_KEYS: u64 = 20_000;
const SAMPLED: u64 = 100;

fn opens_key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn try_open(dir: &Path) -> ferrocore::Result<Env> {
    try_open_env(dir, EnvOptions::new().flags(env_flags::NO_SYNC))
}

/// Several processes open an environment nobody has open, at the same moment, again and
/// again: readers that open, scan and close, first alone, then with a writer that opens,
/// commits and closes. Every open must succeed and see the whole database: no first
/// opener may publish a table before it is complete (the last txn id included), and
/// nobody may read the table before it is. `FERROCORE_OPEN_ROUNDS` sets the opens per
/// reader and phase (default 300: 2,400 reader opens in all).
#[test]
fn concurrent_first_opens_never_see_a_half_made_table() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = open(dir.path());
        let mut txn = env.begin_write().unwrap();
        for i in 0..OPENS_KEYS {
            txn.put(Database::MAIN, &opens_key(i), &0u64.to_le_bytes(), 0)
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let rounds = std::env::var("FERROCORE_OPEN_ROUNDS").unwrap_or_else(|_| "300".into());
    open_storm(dir.path(), &rounds, false);
    open_storm(dir.path(), &rounds, true);
    let env = open(dir.path());
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.stat().entries, OPENS_KEYS);
    assert_eq!(read_u64(&txn, Database::MAIN, &opens_key(0)), 100);
    txn.check().unwrap();
}

/// Four reader processes (and a writer, with `writer`) that start together on a `go` file
/// and open the environment `rounds` times each; panics with every process's failure.
fn open_storm(dir: &Path, rounds: &str, writer: bool) {
    let go = dir.join("go");
    let _ = std::fs::remove_file(&go);
    let mut children: Vec<Child> = (0..4)
        .map(|_| spawn_logged("open_scan_loop", dir, rounds))
        .collect();
    if writer {
        children.push(spawn_logged("open_write_loop", dir, "100"));
    }
    std::fs::write(&go, b"").unwrap();
    let mut failures = Vec::new();
    let processes = children.len();
    for child in children {
        let out = child.wait_with_output().unwrap();
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            // The panic's location and its message, the line after it.
            let lines: Vec<&str> = err.lines().collect();
            let at = lines.iter().position(|l| l.contains("panicked"));
            let why = at.map_or(err.to_string(), |at| {
                lines[at..lines.len().min(at + 2)].join(" ")
            });
            failures.push(format!("{:?}: {why}", out.status));
        }
    }
    assert!(
        failures.is_empty(),
        "writer {writer}: {} of {processes} processes failed: {failures:#?}",
        failures.len()
    );
}

fn spawn_logged(role: &str, dir: &Path, times: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(DIR, dir)
        .env("TIMES", times)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Not a test of its own: the entry point of the child processes the tests below start.
/// Without the role variable (a normal test run) it does nothing.
#[test]
fn child_process_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let dir = PathBuf::from(std::env::var(DIR).unwrap());
    if role == "read_only_files" {
        // As an unprivileged user (root's permission checks would pass anyway).
        // SAFETY: plain syscalls dropping to nobody/nogroup in this child process.
        unsafe {
            if libc::geteuid() == 0 {
                assert_eq!(libc::setgid(65534), 0);
                assert_eq!(libc::setuid(65534), 0);
            }
        }
        let env = try_open_env(&dir, EnvOptions::new().flags(env_flags::READ_ONLY))
            .expect("a read-only environment on read-only files opens");
        let txn = env.begin_read().unwrap();
        assert_eq!(read_u64(&txn, Database::MAIN, b"counter"), 7);
        assert!(env.begin_write().is_err());
        return;
    }
    let env = open(&dir);
    match role.as_str() {
        "increment" => {
            let times: u64 = std::env::var("TIMES").unwrap().parse().unwrap();
            for _ in 0..times {
                let mut txn = env.begin_write().unwrap();
                let n = txn
                    .get(Database::MAIN, b"counter")
                    .unwrap()
                    .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
                txn.put(Database::MAIN, b"counter", &(n + 1).to_le_bytes(), 0)
                    .unwrap();
                txn.commit().unwrap();
            }
        }
        "write_named" => {
            let mut txn = env.begin_write().unwrap();
            let db = txn.open_db(Some("named"), 0).unwrap();
            txn.put(db, b"k", std::env::var("VALUE").unwrap().as_bytes(), 0)
                .unwrap();
            txn.commit().unwrap();
        }
        "hold_reader" => {
            let txn = env.begin_read().unwrap();
            let before = read_u64(&txn, Database::MAIN, b"counter");
            std::fs::write(dir.join("reader-ready"), before.to_string()).unwrap();
            // Wait for the parent's commits (or for SIGKILL).
            let go = dir.join("reader-go");
            let start = Instant::now();
            while !go.exists() && start.elapsed() < Duration::from_mins(1) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let after = read_u64(&txn, Database::MAIN, b"counter");
            txn.check().unwrap();
            std::process::exit(i32::from(before != after));
        }
        "open_scan_loop" | "open_write_loop" => {
            // Run by `concurrent_first_opens_never_see_a_half_made_table`: wait for the
            // start, then open, use and close the environment in a loop.
            drop(env);
            let go = dir.join("go");
            while !go.exists() {
                std::thread::yield_now();
            }
            let rounds: u64 = std::env::var("TIMES").unwrap().parse().unwrap();
            for round in 0..rounds {
                let env = match try_open(&dir) {
                    Ok(env) => env,
                    Err(e) => panic!("open {round} failed: {e}"),
                };
                if role == "open_write_loop" {
                    let mut txn = env.begin_write().expect("begin_write");
                    let stamp = (round + 1).to_le_bytes();
                    for i in 0..SAMPLED {
                        txn.put(Database::MAIN, &opens_key(i * 97), &stamp, 0)
                            .unwrap();
                    }
                    txn.commit().expect("commit");
                } else {
                    let txn = env.begin_read().expect("begin_read");
                    let stamp = txn.get(Database::MAIN, &opens_key(0)).unwrap();
                    let mut cursor = txn.cursor(Database::MAIN).unwrap();
                    let (mut seen, mut item) = (0, cursor.first().unwrap());
                    while let Some((key, value)) = item {
                        let i = u64::from_be_bytes(key.try_into().unwrap());
                        if i % 97 == 0 && i / 97 < SAMPLED {
                            assert_eq!(Some(value), stamp, "open {round}: a torn snapshot");
                        }
                        seen += 1;
                        item = cursor.next().unwrap();
                    }
                    assert_eq!(seen, OPENS_KEYS, "open {round} scanned {seen} entries");
                }
            }
        }
        "hold_writer" => {
            let mut txn = env.begin_write().unwrap();
            txn.put(Database::MAIN, b"uncommitted", b"x", 0).unwrap();
            std::fs::write(dir.join("writer-ready"), b"").unwrap();
            std::thread::sleep(Duration::from_mins(1));
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn processes_take_turns_as_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let children: Vec<Child> = (0..4)
        .map(|_| spawn("increment", dir.path(), &[("TIMES", "50")]))
        .collect();
    // This process writes too, meanwhile.
    for _ in 0..50 {
        let mut txn = env.begin_write().unwrap();
        let n = txn
            .get(Database::MAIN, b"counter")
            .unwrap()
            .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
        txn.put(Database::MAIN, b"counter", &(n + 1).to_le_bytes(), 0)
            .unwrap();
        txn.commit().unwrap();
    }
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let txn = env.begin_read().unwrap();
    assert_eq!(
        read_u64(&txn, Database::MAIN, b"counter"),
        250,
        "every increment of 5 processes counted once"
    );
    txn.check().unwrap();
}

#[test]
fn a_named_db_changed_by_another_process_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let db = {
        let mut txn = env.begin_write().unwrap();
        let db = txn.open_db(Some("named"), db_flags::CREATE).unwrap();
        txn.put(db, b"k", b"first", 0).unwrap();
        txn.commit().unwrap();
        db
    };
    // Read it here first, so this process has it cached.
    assert_eq!(
        env.begin_read().unwrap().get(db, b"k").unwrap(),
        Some(&b"first"[..])
    );
    let mut child = spawn("write_named", dir.path(), &[("VALUE", "second")]);
    assert!(child.wait().unwrap().success());
    assert_eq!(
        env.begin_read().unwrap().get(db, b"k").unwrap(),
        Some(&b"second"[..])
    );
    // And this process's next commit does not resurrect the old version either.
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"other", b"x", 0).unwrap();
    txn.commit().unwrap();
    assert_eq!(
        env.begin_read().unwrap().get(db, b"k").unwrap(),
        Some(&b"second"[..])
    );
}

#[test]
fn a_reader_in_another_process_keeps_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"counter", &7u64.to_le_bytes(), 0)
        .unwrap();
    for i in 0..2000u32 {
        txn.put(Database::MAIN, &i.to_be_bytes(), &[1u8; 100], 0)
            .unwrap();
    }
    txn.commit().unwrap();
    let mut reader = spawn("hold_reader", dir.path(), &[]);
    wait_for(&dir.path().join("reader-ready"));
    // Hundreds of commits rewriting every page while the other process reads.
    for round in 0..200u64 {
        let mut txn = env.begin_write().unwrap();
        txn.put(Database::MAIN, b"counter", &(100 + round).to_le_bytes(), 0)
            .unwrap();
        for i in (0..2000u32).step_by(10) {
            txn.put(
                Database::MAIN,
                &i.to_be_bytes(),
                &[(round % 250) as u8; 100],
                0,
            )
            .unwrap();
        }
        txn.commit().unwrap();
    }
    std::fs::write(dir.path().join("reader-go"), b"").unwrap();
    assert!(
        reader.wait().unwrap().success(),
        "the reader saw its snapshot change or its pages reused"
    );
    env.check().unwrap();
}

#[test]
fn a_killed_reader_is_cleared_by_reader_check() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let mut reader = spawn("hold_reader", dir.path(), &[]);
    wait_for(&dir.path().join("reader-ready"));
    let pid = reader.id();
    assert!(env
        .readers()
        .iter()
        .any(|&(p, _, snapshot)| p == pid && snapshot.is_some()));
    reader.kill().unwrap();
    reader.wait().unwrap();
    assert_eq!(env.reader_check().unwrap(), 1);
    assert!(!env.readers().iter().any(|&(p, _, _)| p == pid));
    assert_eq!(env.reader_check().unwrap(), 0);
}

/// The writer clears a dead reader's slot itself when that reader pins pages, as LMDB's
/// writer does: its pages become reusable without anyone calling `reader_check`.
#[test]
fn the_writer_clears_a_dead_readers_slot_itself() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let mut reader = spawn("hold_reader", dir.path(), &[]);
    wait_for(&dir.path().join("reader-ready"));
    let pid = reader.id();
    reader.kill().unwrap();
    reader.wait().unwrap();
    // A commit makes the dead reader's snapshot an old one, which pins pages.
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"after", b"kill", 0).unwrap();
    txn.commit().unwrap();
    assert!(env.readers().iter().any(|&(p, _, _)| p == pid));
    assert!(env.info().unwrap().oldest_reader_lag > 0);
    // The next writer finds it and clears it: nothing pins pages any more.
    env.begin_write().unwrap().commit().unwrap();
    assert!(!env.readers().iter().any(|&(p, _, _)| p == pid));
    let info = env.info().unwrap();
    assert_eq!((info.oldest_reader_lag, info.pinned_pages), (0, 0));
}

/// An environment on files and a directory this process may not write opens read-only:
/// its lock file cannot be opened for writing, so it reads without the shared lock table
/// (as LMDB does on a read-only file system). The child drops to an unprivileged user.
#[test]
fn read_only_files_open_read_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    {
        let env = open(dir.path());
        let mut txn = env.begin_write().unwrap();
        txn.put(Database::MAIN, b"counter", &7u64.to_le_bytes(), 0)
            .unwrap();
        txn.commit().unwrap();
    }
    let set = |path: &Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    set(&dir.path().join("data.mdb"), 0o444);
    set(&dir.path().join("lock.mdb"), 0o444);
    set(dir.path(), 0o555);
    let status = spawn("read_only_files", dir.path(), &[]).wait().unwrap();
    set(dir.path(), 0o755);
    assert!(status.success(), "the read-only child failed: {status}");
}

#[test]
fn a_killed_writer_releases_the_writer_lock() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let mut writer = spawn("hold_writer", dir.path(), &[]);
    wait_for(&dir.path().join("writer-ready"));
    writer.kill().unwrap();
    writer.wait().unwrap();
    // The kernel released the dead process's lock: this write txn begins at once.
    let start = Instant::now();
    let mut txn = env.begin_write().unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(
        txn.get(Database::MAIN, b"uncommitted").unwrap(),
        None,
        "its uncommitted work is gone"
    );
    txn.put(Database::MAIN, b"after", b"ok", 0).unwrap();
    txn.commit().unwrap();
    env.check().unwrap();
}

/// A `fork()` child cannot use the parent's environment (its txns fail with `Panic`
/// instead of sharing the parent's reader slots and writer lock), but may open it anew;
/// and the parent's reader slot survives the child dropping its copy of the read txn.
#[test]
fn a_forked_child_must_open_the_environment_again() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"k", b"before fork", 0).unwrap();
    txn.commit().unwrap();
    let reader = env.begin_read().unwrap();
    let readers_before = env.readers().len();
    // SAFETY: the child only calls ferrocore and then _exit (no allocation-unsafe state is
    // shared: the test threads of the parent do not run in the child).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = (|| {
            if !matches!(env.begin_read(), Err(ferrocore::Error::Panic(_))) {
                return 1;
            }
            if !matches!(env.begin_write(), Err(ferrocore::Error::Panic(_))) {
                return 2;
            }
            drop(reader); // must not give back the parent's reader slot
            let Ok(again) = try_open_env(dir.path(), &EnvOptions::new()) else {
                return 3;
            };
            let found = match again.begin_read() {
                Ok(t) => t.get(Database::MAIN, b"k").ok().flatten() == Some(&b"before fork"[..]),
                Err(_) => false,
            };
            if found {
                0
            } else {
                4
            }
        })();
        // SAFETY: leave the child without running the parent's destructors or atexit.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child crashed: {status}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "child check failed");
    // The parent's reader still holds its slot and snapshot.
    assert_eq!(env.readers().len(), readers_before);
    assert_eq!(
        reader.get(Database::MAIN, b"k").unwrap(),
        Some(&b"before fork"[..])
    );
    drop(reader);
    env.begin_write().unwrap().commit().unwrap();
}
