//! A writer process killed (SIGKILL) at a random moment, mid-put or mid-commit, in every
//! mode: default, `NO_META_SYNC`, `NO_SYNC`, `WRITE_MAP` and `WRITE_MAP|MAP_ASYNC`. A
//! process crash leaves the kernel's page cache intact, so every mode promises the same:
//! every commit the killed process saw succeed is there, nothing of a txn it had not
//! committed is, and the file checks clean. The next writer (here, the next child)
//! takes over the dead one's writer lock.
//!
//! The child writes txn after txn: each puts key `i` (a value of 20 bytes up to three
//! pages, so overflow runs come and go), deletes key `i - 7` (freeing pages for reuse),
//! and sets `last = i`; once `commit` returns it records `i` in a side file. The parent
//! kills it after a random delay, then checks what it finds against that record.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use ferrocore::{env_flags, Database, Env, EnvOptions};

mod common;
use common::{open_env, Rng};

const ROLE: &str = "FERROCORE_KILL_ROLE";
const DIR: &str = "FERROCORE_KILL_DIR";
const FLAGS: &str = "FERROCORE_KILL_FLAGS";

/// The modes, by name and flags.
const MODES: [(&str, u32); 5] = [
    ("default", 0),
    ("NO_META_SYNC", env_flags::NO_META_SYNC),
    ("NO_SYNC", env_flags::NO_SYNC),
    ("WRITE_MAP", env_flags::WRITE_MAP),
    (
        "WRITE_MAP|MAP_ASYNC",
        env_flags::WRITE_MAP | env_flags::MAP_ASYNC,
    ),
];

fn open(dir: &Path, flags: u32) -> Env {
    open_env(dir, EnvOptions::new().flags(flags))
}

/// The value stored under key `i`: its length and bytes follow from `i`.
fn value_of(i: u64) -> Vec<u8> {
    let len = match i % 5 {
        0 => 9_000,
        1 => 4_000,
        _ => 20 + (i % 300) as usize,
    };
    vec![(i % 251) as u8; len]
}

/// The file in which the child records the last commit it saw succeed.
fn acked_path(dir: &Path) -> PathBuf {
    dir.join("acked")
}

/// `None` before the first acknowledged commit: no file yet, or (a child killed just after
/// creating it) an empty one.
fn read_acked(dir: &Path) -> Option<u64> {
    let bytes = std::fs::read(acked_path(dir)).ok()?;
    Some(u64::from_le_bytes(bytes.get(..8)?.try_into().unwrap()))
}

/// Not a test of its own: the killed child's loop. Without the role variable (a normal
/// test run) it does nothing.
#[test]
fn child_process_entry() {
    if std::env::var(ROLE).is_err() {
        return;
    }
    let dir = PathBuf::from(std::env::var(DIR).unwrap());
    let flags: u32 = std::env::var(FLAGS).unwrap().parse().unwrap();
    let env = open(&dir, flags);
    let acked = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(acked_path(&dir))
        .unwrap();
    let start = {
        let txn = env.begin_read().unwrap();
        txn.get(Database::MAIN, b"last")
            .unwrap()
            .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()))
    };
    for i in start + 1.. {
        let mut txn = env.begin_write().unwrap();
        txn.put(Database::MAIN, &i.to_be_bytes(), &value_of(i), 0)
            .unwrap();
        if i > 7 {
            txn.delete(Database::MAIN, &(i - 7).to_be_bytes()).unwrap();
        }
        txn.put(Database::MAIN, b"last", &i.to_le_bytes(), 0)
            .unwrap();
        txn.commit().unwrap();
        // Only now is commit `i` acknowledged.
        acked.write_all_at(&i.to_le_bytes(), 0).unwrap();
    }
}

/// What the parent finds after a kill agrees with what the child acknowledged.
fn verify(dir: &Path, flags: u32, ctx: &str) -> u64 {
    let env = open(dir, flags);
    env.check()
        .unwrap_or_else(|e| panic!("{ctx}: check after the kill: {e}"));
    let txn = env.begin_read().unwrap();
    let last = txn
        .get(Database::MAIN, b"last")
        .unwrap()
        .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
    let acked = read_acked(dir).unwrap_or(0);
    // The commit after the last acknowledged one may have completed before the kill.
    assert!(
        last == acked || last == acked + 1,
        "{ctx}: the file holds commit {last}, the child saw {acked} succeed"
    );
    // Exactly keys last-6 ..= last, each with its value: nothing of an uncommitted txn.
    let mut cursor = txn.cursor(Database::MAIN).unwrap();
    let mut keys = Vec::new();
    let mut item = cursor.first().unwrap();
    while let Some((k, v)) = item {
        if k != b"last" {
            let i = u64::from_be_bytes(k.try_into().unwrap());
            assert_eq!(v, &value_of(i)[..], "{ctx}: value of key {i}");
            keys.push(i);
        }
        item = cursor.next().unwrap();
    }
    let want: Vec<u64> = (last.saturating_sub(6).max(1)..=last).collect();
    assert_eq!(keys, want, "{ctx}: the keys after commit {last}");
    last
}

#[test]
fn a_writer_killed_at_any_moment_loses_no_acknowledged_commit() {
    let rounds: u64 = std::env::var("FERROCORE_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let mut rng = Rng(0x6b69_6c6c);
    for (name, flags) in MODES {
        let dir = tempfile::tempdir().unwrap();
        let mut progress = 0;
        for round in 0..rounds {
            let ctx = format!("{name}, round {round}");
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "child_process_entry",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(ROLE, "writer")
                .env(DIR, dir.path())
                .env(FLAGS, flags.to_string())
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            // Long enough for the child to open and commit some, short enough to land
            // anywhere in a txn.
            std::thread::sleep(Duration::from_micros(20_000 + rng.below(60_000) as u64));
            child.kill().unwrap();
            let status = child.wait().unwrap();
            assert!(!status.success(), "{ctx}: the child was killed, not done");
            progress = verify(dir.path(), flags, &ctx);
        }
        assert!(
            progress > rounds,
            "{name}: the children committed {progress} txns in {rounds} rounds"
        );
    }
}
