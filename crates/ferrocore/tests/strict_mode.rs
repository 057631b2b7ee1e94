//! Strict mode (`EnvOptions::strict`): every commit is followed by a full check of the
//! snapshot it made, and a damaged snapshot stops the program there.

use std::os::unix::fs::FileExt;

use ferrocore::{Database, Env, EnvOptions};

fn open(dir: &std::path::Path, strict: bool) -> Env {
    // SAFETY: the test owns the directory; the only other writer of the file is the test
    // itself, which damages a page on purpose.
    unsafe {
        EnvOptions::new()
            .strict(strict)
            .open(dir)
            .expect("open env")
    }
}

/// Fills the main DB over several leaves and returns the depth of its tree.
fn fill(env: &Env) -> u64 {
    let mut txn = env.begin_write().unwrap();
    for i in 0u32..2_000 {
        txn.put(Database::MAIN, &i.to_be_bytes(), &[7u8; 40], 0)
            .unwrap();
    }
    txn.commit().unwrap();
    let info = env.info().unwrap();
    assert!(info.last_pgno > 10, "several pages written");
    env.stat().unwrap().depth as u64
}

/// Overwrites the key bytes of every leaf page of the file with a descending pattern, so
/// that key order is broken everywhere but every page still parses.
fn scramble_leaves(dir: &std::path::Path, page_size: usize) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("data.mdb"))
        .unwrap();
    let len = file.metadata().unwrap().len() as usize;
    let mut page = vec![0u8; page_size];
    for pgno in 2..len / page_size {
        file.read_exact_at(&mut page, (pgno * page_size) as u64)
            .unwrap();
        let flags = u16::from_le_bytes([page[10], page[11]]);
        if flags & 0x02 == 0 {
            continue; // not a leaf
        }
        let lower = u16::from_le_bytes([page[12], page[13]]) as usize;
        let n = (lower - 16) / 2;
        for i in 0..n {
            let off = u16::from_le_bytes([page[16 + 2 * i], page[17 + 2 * i]]) as usize;
            // Node header: lo, hi, flags, ksize (u16 each); the key follows.
            let ksize = u16::from_le_bytes([page[off + 6], page[off + 7]]) as usize;
            if ksize == 4 {
                page[off + 8..off + 12].copy_from_slice(&(u32::MAX - i as u32).to_be_bytes());
            }
        }
        file.write_all_at(&page, (pgno * page_size) as u64).unwrap();
    }
}

#[test]
fn strict_mode_checks_every_commit() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path(), true);
    assert!(fill(&env) >= 2, "a tree with branch pages");
    scramble_leaves(dir.path(), env.page_size());

    // A commit that changes one page leaves the damaged ones as they are: strict mode
    // walks the whole snapshot and stops at them.
    let next_txnid = env.info().unwrap().last_txnid + 1;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut txn = env.begin_write().unwrap();
        txn.put(Database::MAIN, b"\xff\xff\xff\xff\xff", b"x", 0)
            .unwrap();
        txn.commit()
    }));
    let message = match outcome {
        Ok(r) => panic!("strict mode let a damaged snapshot pass: {r:?}"),
        Err(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default(),
    };
    let expected = format!("strict mode: the snapshot of commit {next_txnid} does not check:");
    assert!(message.starts_with(&expected), "{message}");
    assert!(
        message.contains("MDB_CORRUPTED") && message.contains("separator"),
        "names the broken key order: {message}"
    );
}

#[test]
fn without_strict_mode_the_same_commit_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path(), false);
    fill(&env);
    scramble_leaves(dir.path(), env.page_size());
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"\xff\xff\xff\xff\xff", b"x", 0)
        .unwrap();
    txn.commit().unwrap();
    assert!(env.check().is_err(), "the damage is there to be found");
}
