//! One environment opened twice in one process: the second open shares the first's lock
//! file (one descriptor per process and file), every operation works on both handles, and
//! nothing ever closes a descriptor of `lock.mdb` while the process has the environment
//! open — which would silently drop the process's fcntl locks (POSIX), let the next process
//! re-initialise the table under it, and hand an old snapshot newer data.
//!
//! The kernel's lock table (`/proc/locks`) is read after every operation: this process
//! must still hold its shared presence lock on byte 0 and its liveness lock on byte = pid.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ferrocore::{env_flags, Database, Env, EnvOptions};

mod common;
use common::try_open_env;

const ROLE: &str = "FERROCORE_TEST_ROLE";
const DIR: &str = "FERROCORE_TEST_DIR";

fn open(dir: &Path) -> Env {
    try_open_env(dir, EnvOptions::new().max_dbs(4).flags(env_flags::NO_SYNC)).unwrap()
}

fn put(env: &Env, key: &[u8], value: &[u8]) {
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, key, value, 0).unwrap();
    txn.commit().unwrap();
}

fn get(env: &Env, key: &[u8]) -> Option<Vec<u8>> {
    let txn = env.begin_read().unwrap();
    txn.get(Database::MAIN, key).unwrap().map(<[u8]>::to_vec)
}

/// The byte ranges this process holds fcntl locks on in the file `path`, as
/// (kind, start, end): from `/proc/locks`, which names files by device and inode.
fn held_locks(path: &Path) -> Vec<(String, u64, String)> {
    let ino = std::fs::metadata(path).unwrap().ino();
    let pid = std::process::id().to_string();
    let table = std::fs::read_to_string("/proc/locks").unwrap();
    table
        .lines()
        .filter_map(|line| {
            // "1: POSIX  ADVISORY  READ 1234 fd:01:5678 0 0"
            let f: Vec<&str> = line.split_whitespace().collect();
            let f = if f.get(1) == Some(&"->") {
                &f[1..]
            } else {
                &f[..]
            };
            (f.len() >= 8
                && f[1] == "POSIX"
                && f[4] == pid
                && f[5].rsplit(':').next() == Some(&ino.to_string()))
            .then(|| (f[3].to_string(), f[6].parse().unwrap(), f[7].to_string()))
        })
        .collect()
}

/// Panics unless this process still holds its presence and liveness locks on `lock.mdb`.
fn assert_locks_held(dir: &Path, after: &str) {
    let locks = held_locks(&dir.join("lock.mdb"));
    let pid = u64::from(std::process::id());
    assert!(
        locks
            .iter()
            .any(|(k, s, e)| k == "READ" && *s == 0 && e == "0"),
        "after {after}: the presence lock on byte 0 is gone: {locks:?}"
    );
    assert!(
        locks
            .iter()
            .any(|(k, s, e)| k == "WRITE" && *s == pid && *e == pid.to_string()),
        "after {after}: the liveness lock on byte {pid} is gone: {locks:?}"
    );
}

#[test]
fn a_second_open_shares_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path());
    put(&first, b"k", b"1");
    let second = open(dir.path());
    assert_locks_held(dir.path(), "the second open");
    // Each handle sees what the other commits, and their readers share one table.
    assert_eq!(get(&second, b"k").as_deref(), Some(&b"1"[..]));
    put(&second, b"k", b"2");
    assert_eq!(get(&first, b"k").as_deref(), Some(&b"2"[..]));
    let reader = second.begin_read().unwrap();
    assert_eq!(first.readers().len(), 1);
    assert_eq!(first.info().unwrap().num_readers, 1);
    drop(reader);
    // One writer across both handles.
    let txn = first.begin_write().unwrap();
    let started = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let txn = second.begin_write().unwrap();
            started.store(true, std::sync::atomic::Ordering::SeqCst);
            txn.abort();
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(!started.load(std::sync::atomic::Ordering::SeqCst));
        drop(txn);
        waiter.join().unwrap();
        assert!(started.load(std::sync::atomic::Ordering::SeqCst));
    });
    // Closing either leaves the other working, in both orders.
    drop(second);
    assert_locks_held(dir.path(), "closing the second handle");
    put(&first, b"k", b"3");
    let second = open(dir.path());
    drop(first);
    assert_locks_held(dir.path(), "closing the first handle");
    put(&second, b"k", b"4");
    assert_eq!(get(&second, b"k").as_deref(), Some(&b"4"[..]));
    drop(second);
    assert!(held_locks(&dir.path().join("lock.mdb")).is_empty());
}

/// Every operation of a second handle, and a failed second open, leaves the first
/// handle's locks in place and its open snapshot intact while another process writes.
#[test]
fn no_operation_of_a_second_handle_drops_the_first_handles_locks() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path());
    put(&first, b"k", b"hello");
    let old = first.begin_read().unwrap();

    type Op = Box<dyn Fn(&Env)>;
    let ops: Vec<(&str, Op)> = vec![
        ("open and close", Box::new(|_| {})),
        (
            "stat",
            Box::new(|e| assert_eq!(e.stat().unwrap().entries, 1)),
        ),
        (
            "info",
            Box::new(|e| assert!(e.info().unwrap().last_txnid > 0)),
        ),
        (
            "reader list",
            Box::new(|e| assert_eq!(e.readers().len(), 1)),
        ),
        (
            "reader check",
            Box::new(|e| assert_eq!(e.reader_check().unwrap(), 0)),
        ),
        (
            "check",
            Box::new(|e| assert!(e.check().unwrap().tree_pages > 0)),
        ),
        (
            "copy",
            Box::new(|e| {
                let mut out = Vec::new();
                e.copy_to(&mut out).unwrap();
            }),
        ),
        ("sync", Box::new(|e| e.sync().unwrap())),
        (
            "read txn",
            Box::new(|e| assert!(e.begin_read().unwrap().get(Database::MAIN, b"k").is_ok())),
        ),
        (
            "write txn",
            Box::new(|e| {
                let mut txn = e.begin_write().unwrap();
                txn.put(Database::MAIN, b"other", b"x", 0).unwrap();
                txn.commit().unwrap();
            }),
        ),
    ];
    for (name, op) in &ops {
        let second = open(dir.path());
        op(&second);
        assert_locks_held(dir.path(), name);
        op(&first);
        drop(second);
        assert_locks_held(
            dir.path(),
            &format!("{name}, then closing the second handle"),
        );
    }
    // A second open that fails after finding the lock file (its map cannot be reserved).
    let failed = try_open_env(dir.path(), EnvOptions::new().map_size(1 << 62));
    assert!(failed.is_err(), "a 4 EiB map was reserved");
    assert_locks_held(dir.path(), "a failed second open");
    // Read-only and NO_LOCK opens of the same environment.
    drop(try_open_env(dir.path(), EnvOptions::new().flags(env_flags::READ_ONLY)).unwrap());
    assert_locks_held(dir.path(), "a read-only second open");

    // Another process now opens the environment and commits. Had this process lost its
    // presence lock, that process would re-initialise the table (txn id 0, no readers) and
    // its writer could reuse the pages of the snapshot `old` still reads.
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_process_entry", "--nocapture"])
        .env(ROLE, "overwrite")
        .env(DIR, dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        old.get(Database::MAIN, b"k").unwrap(),
        Some(&b"hello"[..]),
        "an old snapshot changed under its reader"
    );
    assert_eq!(get(&first, b"k").as_deref(), Some(&b"world 99"[..]));
    drop(old);
    first.check().unwrap();
}

/// A second open inherits nothing it should not: its own DB handles and flags, the
/// shared reader table; NO_LOCK opens never share.
#[test]
fn second_open_keeps_its_own_handles_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path());
    let mut txn = first.begin_write().unwrap();
    let db = txn
        .open_db(Some("named"), ferrocore::db_flags::CREATE)
        .unwrap();
    txn.put(db, b"a", b"1", 0).unwrap();
    txn.commit().unwrap();
    let second = try_open_env(dir.path(), EnvOptions::new().max_dbs(4)).unwrap();
    assert_eq!(second.flags() & env_flags::NO_SYNC, 0);
    assert_ne!(first.flags() & env_flags::NO_SYNC, 0);
    let txn = second.begin_read().unwrap();
    let db2 = txn.open_db(Some("named")).unwrap();
    assert_eq!(txn.get(db2, b"a").unwrap(), Some(&b"1"[..]));
    drop(txn);
    let private = try_open_env(dir.path(), EnvOptions::new().flags(env_flags::NO_LOCK)).unwrap();
    assert_eq!(get(&private, b"x"), None);
    drop(private);
    assert_locks_held(dir.path(), "closing a NO_LOCK open");
}

/// A txn of one handle keeps working while the other handle is dropped on another
/// thread.
#[test]
fn handles_close_on_other_threads() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path());
    put(&first, b"k", b"v");
    for _ in 0..20 {
        let second = open(dir.path());
        let reader = first.begin_read().unwrap();
        std::thread::spawn(move || drop(second)).join().unwrap();
        assert_eq!(reader.get(Database::MAIN, b"k").unwrap(), Some(&b"v"[..]));
        assert_locks_held(dir.path(), "a close on another thread");
    }
}

/// Not a test of its own: the child process of the test above.
#[test]
fn child_process_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let dir = PathBuf::from(std::env::var(DIR).unwrap());
    assert_eq!(role, "overwrite");
    let env = open(&dir);
    // Many commits, so pages freed from the snapshot "hello" would be reused if the
    // parent's reader were not seen.
    for i in 0..100 {
        put(&env, b"k", format!("world {i}").as_bytes());
        put(&env, format!("filler {i}").as_bytes(), &[7u8; 2000]);
    }
}
