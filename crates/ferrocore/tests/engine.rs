//! Behaviour of the core engine: persistence, limits, space reuse, isolation, failure.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferrocore::{env_flags, put_flags, Database, Env, EnvOptions, Error};

mod common;
use common::{open_env, try_open_env, TempEnv};

const MAIN: Database = Database::MAIN;

/// Unsynced commits.
fn env_options() -> EnvOptions {
    let mut opts = EnvOptions::new();
    opts.flags(env_flags::NO_SYNC);
    opts
}

fn open(dir: &Path) -> Env {
    open_env(dir, &env_options())
}

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// Puts keys `0..count` with `value`, in one txn.
fn load(env: &Env, count: u64, value: &[u8]) {
    let mut txn = env.begin_write().unwrap();
    for i in 0..count {
        txn.put(MAIN, &key(i), value, 0).unwrap();
    }
    txn.commit().unwrap();
}

fn file_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("data.mdb")).unwrap().len()
}

#[test]
fn data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = open(dir.path());
        let mut txn = env.begin_write().unwrap();
        for i in 0..10_000 {
            txn.put(MAIN, &key(i), &i.to_le_bytes(), 0).unwrap();
        }
        txn.commit().unwrap();
        env.sync().unwrap();
    }
    let env = open(dir.path());
    let txn = env.begin_read().unwrap();
    for i in 0..10_000 {
        assert_eq!(txn.get(MAIN, &key(i)).unwrap(), Some(&i.to_le_bytes()[..]));
    }
    assert_eq!(txn.stat().entries, 10_000);
    assert_eq!(txn.id(), 1);
    txn.check().unwrap();
}

#[test]
fn overwrite_workload_reuses_space() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let value = [7u8; 100];
    let mut after_first = 0;
    for pass in 0..50u8 {
        for batch in 0..10 {
            let mut txn = env.begin_write().unwrap();
            for i in batch * 10_000..(batch + 1) * 10_000 {
                let mut v = value;
                v[0] = pass;
                txn.put(MAIN, &key(i), &v, 0).unwrap();
            }
            txn.commit().unwrap();
        }
        if pass == 0 {
            after_first = file_len(dir.path());
        }
    }
    let last = file_len(dir.path());
    println!("file after first pass {after_first} bytes, after 50 passes {last} bytes");
    assert!(
        last <= 2 * after_first,
        "file grew from {after_first} to {last}"
    );
    let report = env.check().unwrap();
    assert!(report.free_pages > 0);
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.get(MAIN, &key(99_999)).unwrap().unwrap()[0], 49);
}

/// The free pages a commit takes and does not use go back in records of at most a page's
/// worth of page numbers (LMDB's `maxfree_1pg`), under the keys they came from: a small
/// commit after a large delete reads and rewrites one such record, not every free page.
#[test]
fn unused_free_pages_go_back_in_records_of_one_page() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let mut txn = env.begin_write().unwrap();
    for i in 0..40_000 {
        txn.put(MAIN, &key(i), &[1; 100], 0).unwrap();
    }
    txn.commit().unwrap();
    // Txn ids, so that the delete's record has keys below it to go back under (LMDB and
    // ferrocore use keys up to the newest record taken).
    for i in 0..20 {
        let mut txn = env.begin_write().unwrap();
        txn.put(MAIN, &key(i), &[3; 100], 0).unwrap();
        txn.commit().unwrap();
    }
    let mut txn = env.begin_write().unwrap();
    for i in 0..39_000 {
        txn.delete(MAIN, &key(i)).unwrap();
    }
    txn.commit().unwrap();
    let cap = (4096 - 16) / 8 - 1;
    let records = |env: &Env| -> Vec<(u64, usize)> {
        let txn = env.begin_read().unwrap();
        let mut cursor = txn.cursor(Database::FREE).unwrap();
        let mut out = Vec::new();
        let mut item = cursor.first().unwrap();
        while let Some((k, v)) = item {
            let count = u64::from_le_bytes(v[..8].try_into().unwrap());
            out.push((u64::from_le_bytes(k.try_into().unwrap()), count as usize));
            item = cursor.next().unwrap();
        }
        out
    };
    let freed: usize = records(&env).iter().map(|r| r.1).sum();
    assert!(freed > 2 * cap, "the delete freed {freed} pages");
    // The delete's record is written whole, as LMDB writes a txn's own frees. The txn
    // after next may take it (the one right after the delete may not: its record belongs
    // to the snapshot before the last commit), and writes back what it does not use in
    // one-page records.
    for i in 0..3 {
        let mut txn = env.begin_write().unwrap();
        txn.put(MAIN, &key(100_000 + i), &[2; 100], 0).unwrap();
        txn.commit().unwrap();
    }
    let now = records(&env);
    let total: usize = now.iter().map(|r| r.1).sum();
    assert!(total + 20 >= freed, "free pages lost: {freed} -> {total}");
    let oversized: Vec<_> = now.iter().filter(|r| r.1 > cap).collect();
    assert!(
        oversized.is_empty(),
        "records over {cap} pages: {oversized:?}"
    );
    assert!(
        now.len() >= freed / cap,
        "{} records for {freed} pages",
        now.len()
    );
    env.check().expect("a sound file");
}

#[test]
fn large_values_round_trip() {
    let env = TempEnv::new(&env_options());
    let sizes = [2022usize, 2023, 4080, 4081, 100_000, 1 << 20, 10 << 20];
    let big = |n: usize, s: u8| {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(s))
            .collect::<Vec<u8>>()
    };
    let mut txn = env.begin_write().unwrap();
    for (i, &n) in sizes.iter().enumerate() {
        txn.put(MAIN, &[b'k', i as u8], &big(n, 3), 0).unwrap();
    }
    txn.commit().unwrap();
    let stat = env.stat().unwrap();
    assert!(stat.overflow_pages > (11 << 20) / 4096);
    {
        let txn = env.begin_read().unwrap();
        for (i, &n) in sizes.iter().enumerate() {
            assert_eq!(
                txn.get(MAIN, &[b'k', i as u8]).unwrap().unwrap(),
                &big(n, 3)[..]
            );
        }
    }
    // Overwrite big with small and small with big, delete one: no page is lost.
    let mut txn = env.begin_write().unwrap();
    txn.put(MAIN, &[b'k', 6], b"small now", 0).unwrap();
    txn.put(MAIN, &[b'k', 0], &big(300_000, 5), 0).unwrap();
    assert!(txn.delete(MAIN, &[b'k', 5]).unwrap());
    txn.commit().unwrap();
    env.check().unwrap();
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.get(MAIN, &[b'k', 6]).unwrap().unwrap(), b"small now");
    assert_eq!(
        txn.get(MAIN, &[b'k', 0]).unwrap().unwrap(),
        &big(300_000, 5)[..]
    );
    assert_eq!(txn.get(MAIN, &[b'k', 5]).unwrap(), None);
}

#[test]
fn key_size_limits_match_lmdb() {
    let env = TempEnv::new(&env_options());
    assert_eq!(env.max_key_size(), 511);
    let mut txn = env.begin_write().unwrap();
    txn.put(MAIN, &[1u8; 511], b"max", 0).unwrap();
    assert!(matches!(
        txn.put(MAIN, &[1u8; 512], b"over", 0),
        Err(Error::BadValSize { size: 512, .. })
    ));
    assert!(matches!(
        txn.put(MAIN, b"", b"empty key", 0),
        Err(Error::BadValSize { size: 0, .. })
    ));
    // A key too long to store is looked up all the same, and not found (LMDB answers
    // MDB_NOTFOUND, not MDB_BAD_VALSIZE); an empty one is refused.
    assert_eq!(txn.get(MAIN, &[1u8; 512]).unwrap(), None);
    assert!(!txn.delete(MAIN, &[1u8; 512]).unwrap());
    assert!(matches!(
        txn.get(MAIN, b""),
        Err(Error::BadValSize { size: 0, .. })
    ));
    assert!(matches!(
        txn.delete(MAIN, b""),
        Err(Error::BadValSize { size: 0, .. })
    ));
    assert_eq!(
        txn.put(MAIN, b"empty value", b"", 0)
            .map_err(|e| e.lmdb_code()),
        Ok(())
    );
    assert_eq!(
        Error::BadValSize {
            what: "key",
            size: 0,
            max: 0
        }
        .lmdb_code(),
        -30781
    );
    // A rejected put does not poison the txn.
    txn.commit().unwrap();
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.get(MAIN, &[1u8; 511]).unwrap(), Some(&b"max"[..]));
    assert_eq!(txn.get(MAIN, b"empty value").unwrap(), Some(&b""[..]));
}

#[test]
fn long_keys_are_opt_in() {
    let dir = tempfile::tempdir().unwrap();
    let env = try_open_env(
        dir.path(),
        EnvOptions::new().long_keys(true).flags(env_flags::NO_SYNC),
    )
    .unwrap();
    let max = ferrocore::long_key_max(4096);
    assert_eq!(env.max_key_size(), max);
    assert!(max > 511);
    let mut txn = env.begin_write().unwrap();
    for i in 0..2000u32 {
        let mut k = vec![b'x'; max];
        k[max - 4..].copy_from_slice(&i.to_be_bytes());
        txn.put(MAIN, &k, &i.to_le_bytes(), 0).unwrap();
    }
    assert!(matches!(
        txn.put(MAIN, &vec![0u8; max + 1], b"", 0),
        Err(Error::BadValSize { .. })
    ));
    txn.commit().unwrap();
    let report = env.check().unwrap();
    assert!(
        env.stat().unwrap().depth >= 3,
        "long keys made a deep tree: {report:?}"
    );
}

#[test]
fn aborted_txn_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let mut txn = env.begin_write().unwrap();
    txn.put(MAIN, b"kept", b"1", 0).unwrap();
    txn.commit().unwrap();
    let before = (env.info().unwrap(), file_len(dir.path()));
    let mut txn = env.begin_write().unwrap();
    for i in 0..5000 {
        txn.put(MAIN, &key(i), &[1u8; 300], 0).unwrap();
    }
    assert!(txn.delete(MAIN, b"kept").unwrap());
    txn.abort();
    let after = (env.info().unwrap(), file_len(dir.path()));
    assert_eq!(before, after, "an aborted txn writes nothing");
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.get(MAIN, b"kept").unwrap(), Some(&b"1"[..]));
    assert_eq!(txn.stat().entries, 1);
    drop(txn);
    // Dropping a write txn without commit aborts it too.
    {
        let mut txn = env.begin_write().unwrap();
        txn.put(MAIN, b"dropped", b"x", 0).unwrap();
    }
    assert_eq!(
        env.begin_read().unwrap().get(MAIN, b"dropped").unwrap(),
        None
    );
    env.check().unwrap();
}

/// One-put commits while a reader pins their pages: each writes its free-DB record at the
/// end of the free DB's one leaf (the commit's quick append) until a record no longer fits
/// there and the leaf splits; with the reader gone, later commits take the records oldest
/// first (deleting them at the left edge) until the free DB is one leaf again. Every step
/// keeps a sound file, and no write is lost.
#[test]
fn the_free_db_grows_past_one_leaf_and_back() {
    let env = TempEnv::new(&env_options());
    load(&env, 2000, b"v0");
    let free_depth = |env: &Env| {
        let txn = env.begin_read().unwrap();
        let stat = txn.db_stat(Database::FREE).unwrap();
        (stat.depth, stat.entries)
    };
    let mut latest = std::collections::HashMap::new();
    let mut commits = 0u64;
    let mut commit_one = |env: &Env| {
        commits += 1;
        let i = commits * 7 % 2000;
        let value = format!("v{commits}");
        let mut txn = env.begin_write().unwrap();
        txn.put(MAIN, &key(i), value.as_bytes(), 0).unwrap();
        txn.commit().unwrap();
        latest.insert(i, value);
        commits
    };
    let reader = env.begin_read().unwrap();
    let split_at = loop {
        let n = commit_one(&env);
        let (depth, _) = free_depth(&env);
        if depth >= 2 {
            break n;
        }
        assert!(n < 5_000, "the free DB is still one leaf after {n} commits");
        if n % 64 == 0 {
            env.check().expect("a sound file while the free DB grows");
        }
    };
    env.check()
        .expect("a sound file after the free DB's leaf split");
    let (_, records) = free_depth(&env);
    assert!(records > 50, "{records} records split the leaf");
    assert_eq!(reader.get(MAIN, &key(7)).unwrap(), Some(&b"v0"[..]));
    drop(reader);
    loop {
        let n = commit_one(&env);
        if free_depth(&env).0 == 1 {
            break;
        }
        assert!(
            n < split_at + 5_000,
            "the free DB kept two levels for {} commits",
            n - split_at
        );
        if n % 64 == 0 {
            env.check().expect("a sound file while records are taken");
        }
    }
    for _ in 0..200 {
        commit_one(&env);
    }
    env.check()
        .expect("a sound file once the free DB is one leaf again");
    let txn = env.begin_read().unwrap();
    for i in 0..2000 {
        let want = latest.get(&i).map_or(&b"v0"[..], |v| v.as_bytes());
        assert_eq!(txn.get(MAIN, &key(i)).unwrap(), Some(want), "key {i}");
    }
}

#[test]
fn readers_keep_their_snapshot_and_pin_its_pages() {
    let env = TempEnv::new(&env_options());
    load(&env, 2000, b"old");
    let reader = env.begin_read().unwrap();
    for round in 0..100 {
        let mut txn = env.begin_write().unwrap();
        for i in 0..2000 {
            txn.put(MAIN, &key(i), format!("new{round}").as_bytes(), 0)
                .unwrap();
        }
        txn.commit().unwrap();
    }
    for i in 0..2000 {
        assert_eq!(reader.get(MAIN, &key(i)).unwrap(), Some(&b"old"[..]));
    }
    // The reader's pages were never reused: its whole snapshot still checks out.
    reader.check().unwrap();
    assert_eq!(reader.id(), 1);
    // reset releases the snapshot; renew takes the latest one.
    let idle = reader.reset();
    let renewed = idle.renew().unwrap();
    assert_eq!(renewed.get(MAIN, &key(5)).unwrap(), Some(&b"new99"[..]));
    assert_eq!(renewed.id(), 101);
}

/// `reset_in_place` and `renew_in_place` (a C handle's `mdb_txn_reset` and `mdb_txn_renew`,
/// which keep the txn where it lies): the reset releases the snapshot (its pages are no
/// longer pinned: commits reuse them) and the txn reads an empty snapshot until renewed;
/// the renewal sees the latest commit, a named DB's new record included (no record of the
/// old snapshot is kept), and the txn keeps its reader slot throughout.
#[test]
fn a_read_txn_resets_and_renews_in_place() {
    let mut opts = env_options();
    opts.max_dbs(2);
    let env = TempEnv::new(&opts);
    let mut txn = env.begin_write().unwrap();
    let named = txn
        .open_db(Some("named"), ferrocore::db_flags::CREATE)
        .unwrap();
    for i in 0..2000 {
        txn.put(MAIN, &key(i), b"old", 0).unwrap();
        txn.put(named, &key(i), b"old", 0).unwrap();
    }
    txn.commit().unwrap();
    let mut reader = env.begin_read().unwrap();
    assert_eq!(reader.get(named, &key(7)).unwrap(), Some(&b"old"[..]));
    let pinned = env.readers();
    assert_eq!(pinned.len(), 1);
    assert_eq!(pinned[0].2, Some(1));

    reader.reset_in_place();
    assert_eq!(env.readers().len(), 1, "the slot is kept");
    assert_eq!(env.readers()[0].2, None, "no snapshot held");
    assert_eq!(reader.id(), 0);
    assert_eq!(reader.get(MAIN, &key(7)).unwrap(), None);
    assert_eq!(reader.get(named, &key(7)).unwrap(), None);
    // Commits may now reuse the old snapshot's pages (its records are taken).
    for round in 0..20 {
        let mut txn = env.begin_write().unwrap();
        for i in 0..2000 {
            let v = format!("new{round}");
            txn.put(MAIN, &key(i), v.as_bytes(), 0).unwrap();
            txn.put(named, &key(i), v.as_bytes(), 0).unwrap();
        }
        txn.commit().unwrap();
    }
    env.check().unwrap();

    reader.renew_in_place().unwrap();
    assert_eq!(reader.id(), 21);
    assert_eq!(env.readers()[0].2, Some(21));
    for i in (0..2000).step_by(97) {
        assert_eq!(reader.get(MAIN, &key(i)).unwrap(), Some(&b"new19"[..]));
        assert_eq!(reader.get(named, &key(i)).unwrap(), Some(&b"new19"[..]));
    }
    reader.check().unwrap();
    // Renewing a txn that holds a snapshot moves it to the latest commit.
    let mut txn = env.begin_write().unwrap();
    txn.put(named, &key(3), b"last", 0).unwrap();
    txn.commit().unwrap();
    assert_eq!(reader.get(named, &key(3)).unwrap(), Some(&b"new19"[..]));
    reader.renew_in_place().unwrap();
    assert_eq!(reader.get(named, &key(3)).unwrap(), Some(&b"last"[..]));
    drop(reader);
    assert!(env.readers().is_empty(), "the slot goes back with the txn");
}

#[test]
fn one_writer_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let env = Arc::new(open(dir.path()));
    let txn = env.begin_write().unwrap();
    let second_started = Arc::new(AtomicBool::new(false));
    let handle = {
        let env = Arc::clone(&env);
        let flag = Arc::clone(&second_started);
        std::thread::spawn(move || {
            let mut txn = env.begin_write().unwrap();
            flag.store(true, Ordering::SeqCst);
            txn.put(MAIN, b"second", b"2", 0).unwrap();
            txn.commit().unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !second_started.load(Ordering::SeqCst),
        "a second writer started while the first was open"
    );
    drop(txn);
    handle.join().unwrap();
    assert!(second_started.load(Ordering::SeqCst));
    assert_eq!(
        env.begin_read().unwrap().get(MAIN, b"second").unwrap(),
        Some(&b"2"[..])
    );
}

#[test]
fn explicit_map_size_is_a_limit() {
    let dir = tempfile::tempdir().unwrap();
    let env = try_open_env(
        dir.path(),
        EnvOptions::new()
            .map_size(1 << 20)
            .flags(env_flags::NO_SYNC),
    )
    .unwrap();
    let mut committed = 0u64;
    let full = 'outer: loop {
        let mut txn = env.begin_write().unwrap();
        for i in committed..committed + 100 {
            if let Err(e) = txn.put(MAIN, &key(i), &[3u8; 200], 0) {
                break 'outer e;
            }
        }
        txn.commit().unwrap();
        committed += 100;
    };
    assert!(matches!(full, Error::MapFull), "{full}");
    assert_eq!(full.lmdb_code(), -30792);
    assert!(file_len(dir.path()) <= 1 << 20);
    // The failed txn was dropped; everything committed is intact.
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.stat().entries, committed);
    txn.check().unwrap();
    drop(txn);
    // A bigger limit lets it grow again.
    env.set_map_size(4 << 20).unwrap();
    let mut txn = env.begin_write().unwrap();
    txn.put(MAIN, &key(committed), &[3u8; 200], 0).unwrap();
    txn.commit().unwrap();
    assert_eq!(env.info().unwrap().map_size, 4 << 20);
}

#[test]
fn map_grows_on_demand_without_a_size() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    for i in 0..40_000 {
        txn.put(MAIN, &key(i), &[9u8; 100], 0).unwrap();
    }
    txn.commit().unwrap();
    let info = env.info().unwrap();
    let used = (info.last_pgno + 1) * 4096;
    assert!(used > 4 << 20, "the data outgrew LMDB's 1 MiB default");
    assert!(
        info.map_size >= used,
        "recorded map size {} covers the data {used}",
        info.map_size
    );
}

#[test]
fn failed_put_poisons_only_on_real_errors() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    txn.put(MAIN, b"a", b"1", 0).unwrap();
    assert!(matches!(
        txn.put(MAIN, b"a", b"2", put_flags::NO_OVERWRITE),
        Err(Error::KeyExist)
    ));
    assert!(matches!(
        txn.put(MAIN, b"0", b"2", put_flags::APPEND),
        Err(Error::KeyExist)
    ));
    assert!(matches!(
        txn.put(Database::FREE, b"x", b"2", 0),
        Err(Error::InvalidArgument(_))
    ));
    txn.commit().unwrap();
    assert_eq!(
        env.begin_read().unwrap().get(MAIN, b"a").unwrap(),
        Some(&b"1"[..])
    );
}

#[test]
fn append_builds_full_pages() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    for i in 0..20_000u64 {
        let mut k = [0u8; 16];
        k[8..].copy_from_slice(&i.to_be_bytes());
        txn.put(MAIN, &k, &[1u8; 100], put_flags::APPEND).unwrap();
    }
    txn.commit().unwrap();
    let stat = env.stat().unwrap();
    // LMDB's MDB_APPEND puts 32 such nodes on a 4 KiB leaf: 625 leaves.
    assert_eq!(stat.leaf_pages, 625, "{stat:?}");
    env.check().unwrap();
}

#[test]
fn cursor_walks_and_positions() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    for i in (0..1000u32).map(|i| i * 2) {
        txn.put(MAIN, &i.to_be_bytes(), &i.to_le_bytes(), 0)
            .unwrap();
    }
    txn.commit().unwrap();
    let txn = env.begin_read().unwrap();
    let mut c = txn.cursor(MAIN).unwrap();
    // Never positioned: no current item to ask for (LMDB's EINVAL), unlike past the end.
    assert!(matches!(c.current(), Err(Error::InvalidArgument(_))));
    assert_eq!(c.first().unwrap().unwrap().0, &0u32.to_be_bytes());
    assert_eq!(c.prev().unwrap(), None);
    assert_eq!(c.last().unwrap().unwrap().0, &1998u32.to_be_bytes());
    assert_eq!(c.next().unwrap(), None);
    assert_eq!(c.set(&7u32.to_be_bytes()).unwrap(), None);
    assert_eq!(
        c.set(&8u32.to_be_bytes()).unwrap().unwrap().1,
        &8u32.to_le_bytes()
    );
    assert_eq!(
        c.set_range(&7u32.to_be_bytes()).unwrap().unwrap().0,
        &8u32.to_be_bytes()
    );
    assert_eq!(c.next().unwrap().unwrap().0, &10u32.to_be_bytes());
    assert_eq!(c.prev().unwrap().unwrap().0, &8u32.to_be_bytes());
    assert_eq!(c.current().unwrap().unwrap().0, &8u32.to_be_bytes());
    assert_eq!(c.set_range(&1999u32.to_be_bytes()).unwrap(), None);
    let mut n = 0;
    let mut item = c.last().unwrap().map(|(k, _)| k.to_vec());
    while let Some(k) = item {
        n += 1;
        item = c.prev().unwrap().map(|(p, _)| {
            assert!(p < &k[..]);
            p.to_vec()
        });
    }
    assert_eq!(n, 1000);
}

/// A read cursor's MDB_NEXT over many leaves, with values in the node and on overflow
/// pages, in a plain and a DUPSORT DB, with a step back now and then: every item in order,
/// each with its own value (the step along a leaf is a shortcut, `Cursor::next`, that must
/// hand the rest to the general move: overflow values, DUPSORT sets, a leaf's end).
#[test]
fn cursor_next_over_leaves_returns_every_value() {
    let mut opts = env_options();
    opts.max_dbs(2);
    let env = TempEnv::new(&opts);
    let value = |i: u32| {
        vec![
            (i % 251) as u8;
            if i.is_multiple_of(97) {
                3000
            } else {
                8 + i as usize % 60
            }
        ]
    };
    let mut txn = env.begin_write().unwrap();
    let plain = txn
        .open_db(Some("plain"), ferrocore::db_flags::CREATE)
        .unwrap();
    let dups = txn
        .open_db(
            Some("dups"),
            ferrocore::db_flags::CREATE | u32::from(ferrocore::db_flags::DUP_SORT),
        )
        .unwrap();
    for i in 0..3000u32 {
        txn.put(plain, &i.to_be_bytes(), &value(i), 0).unwrap();
        for d in 0..=i % 3 {
            txn.put(dups, &i.to_be_bytes(), &[d as u8], 0).unwrap();
        }
    }
    txn.commit().unwrap();
    let txn = env.begin_read().unwrap();
    let mut c = txn.cursor(plain).unwrap();
    let mut item = c.first().unwrap();
    for i in 0..3000u32 {
        let (k, v) = item.unwrap();
        assert_eq!((k, v), (&i.to_be_bytes()[..], &value(i)[..]), "item {i}");
        if i % 37 == 36 {
            assert_eq!(c.prev().unwrap().unwrap().0, &(i - 1).to_be_bytes());
            assert_eq!(c.next().unwrap().unwrap().0, &i.to_be_bytes());
        }
        item = c.next().unwrap();
    }
    assert_eq!(item, None);
    let mut c = txn.cursor(dups).unwrap();
    let mut item = c.first().unwrap();
    for i in 0..3000u32 {
        for d in 0..=i % 3 {
            assert_eq!(
                item.unwrap(),
                (&i.to_be_bytes()[..], &[d as u8][..]),
                "item {i}.{d}"
            );
            item = c.next().unwrap();
        }
    }
    assert_eq!(item, None);
}

#[test]
fn write_cursor_put_and_delete() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    {
        let mut c = txn.cursor_mut(MAIN).unwrap();
        for i in 0..3000u32 {
            c.put(&i.to_be_bytes(), &[5u8; 50], 0).unwrap();
            assert_eq!(c.current().unwrap().unwrap().0, &i.to_be_bytes());
        }
        // Delete every other item walking forward.
        let mut at = c.first().unwrap().map(|(k, _)| k.to_vec());
        while at.is_some() {
            c.delete(0).unwrap();
            at = c.next().unwrap().map(|(k, _)| k.to_vec()); // the successor
            if at.is_some() {
                at = c.next().unwrap().map(|(k, _)| k.to_vec());
            }
        }
        // Deleting the last item leaves prev() on the one before it.
        let last = c.last().unwrap().unwrap().0.to_vec();
        c.delete(0).unwrap();
        assert_eq!(c.current().unwrap(), None);
        assert_eq!(c.next().unwrap(), None);
        assert!(c.prev().unwrap().unwrap().0 < &last[..]);
    }
    assert_eq!(txn.stat().entries, 1499);
    txn.commit().unwrap();
    let txn = env.begin_read().unwrap();
    assert_eq!(
        txn.get(MAIN, &1u32.to_be_bytes()).unwrap(),
        Some(&[5u8; 50][..])
    );
    assert_eq!(txn.get(MAIN, &2u32.to_be_bytes()).unwrap(), None);
    txn.check().unwrap();
}

#[test]
fn nosubdir_and_page_sizes() {
    for ps in [4096usize, 8192, 16384, 32768] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("single.db");
        let opts = EnvOptions::new()
            .flags(env_flags::NO_SUB_DIR | env_flags::NO_SYNC)
            .page_size(ps)
            .clone();
        {
            let env = try_open_env(&file, &opts).unwrap();
            let mut txn = env.begin_write().unwrap();
            for i in 0..3000 {
                txn.put(MAIN, &key(i), &vec![1u8; 700], 0).unwrap();
            }
            txn.commit().unwrap();
        }
        assert!(dir.path().join("single.db-lock").exists());
        // The file's page size wins over the option on reopen.
        let env = try_open_env(
            &file,
            EnvOptions::new()
                .flags(env_flags::NO_SUB_DIR)
                .page_size(4096),
        )
        .unwrap();
        assert_eq!(env.page_size(), ps);
        assert_eq!(env.stat().unwrap().entries, 3000);
        env.check().unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        try_open_env(dir.path(), EnvOptions::new().page_size(65536)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        try_open_env(dir.path(), EnvOptions::new().page_size(5000)),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn read_only_environment() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = open(dir.path());
        let mut txn = env.begin_write().unwrap();
        txn.put(MAIN, b"k", b"v", 0).unwrap();
        txn.commit().unwrap();
    }
    let env = try_open_env(dir.path(), EnvOptions::new().flags(env_flags::READ_ONLY)).unwrap();
    assert_eq!(
        env.begin_read().unwrap().get(MAIN, b"k").unwrap(),
        Some(&b"v"[..])
    );
    let err = env
        .begin_write()
        .err()
        .expect("a read-only env refuses writers");
    assert_eq!(err.lmdb_code(), libc_eacces());
    assert!(matches!(
        try_open_env(dir.path(), EnvOptions::new().flags(0x8000_0000)),
        Err(Error::InvalidArgument(_))
    ));
}

fn libc_eacces() -> i32 {
    13
}

/// Regression: a txn whose highest allocated pages were freed again before commit (here by
/// merges after deletes) never writes them; the file must still cover them, or reopen
/// rejects the newest meta and silently falls back to the older one.
#[test]
fn pages_freed_within_a_txn_still_count_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = open(dir.path());
        let mut txn = env.begin_write().unwrap();
        for i in 0..5u8 {
            txn.put(MAIN, &[b'k', i], &vec![i; 1500], 0).unwrap();
        }
        for i in 1..4u8 {
            assert!(txn.delete(MAIN, &[b'k', i]).unwrap());
        }
        txn.commit().unwrap();
        let info = env.info().unwrap();
        assert!(file_len(dir.path()) >= (info.last_pgno + 1) * 4096);
    }
    let env = open(dir.path());
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.id(), 1);
    assert_eq!(txn.stat().entries, 2);
    txn.check().unwrap();
}

/// The snapshot in the other meta page survives the next commit untouched: a crash under
/// NO_META_SYNC may leave only it on disk (py-lmdb's `test_crash_rollback` models this).
/// Put the metas of commit 1 back after commits 2 and 3: commit 1 must read back whole.
#[test]
fn the_snapshot_before_the_last_commit_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.mdb");
    let value = [b'A'; 20];
    {
        let env = open(dir.path());
        let mut txn = env.begin_write().unwrap();
        for i in 0..2000 {
            txn.put(Database::MAIN, &key(i), &value, 0).unwrap();
        }
        txn.commit().unwrap();
    }
    let page_size = open(dir.path()).page_size();
    let snapshot_metas = std::fs::read(&data).unwrap()[..2 * page_size].to_vec();
    {
        let env = open(dir.path());
        let mut txn = env.begin_write().unwrap();
        for i in (0..2000).step_by(2) {
            assert!(txn.delete(Database::MAIN, &key(i)).unwrap());
        }
        txn.commit().unwrap();
        let mut txn = env.begin_write().unwrap();
        for i in 10_000..13_000 {
            txn.put(Database::MAIN, &key(i), &[b'B'; 30], 0).unwrap();
        }
        txn.commit().unwrap();
    }
    let mut file = std::fs::read(&data).unwrap();
    file[..2 * page_size].copy_from_slice(&snapshot_metas);
    std::fs::write(&data, &file).unwrap();
    let env = open(dir.path());
    env.check().expect("the rolled-back snapshot is consistent");
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.stat().entries, 2000);
    for i in 0..2000 {
        assert_eq!(txn.get(Database::MAIN, &key(i)).unwrap(), Some(&value[..]));
    }
}

/// A long-lived reader is visible in `info`: how many commits behind it is, and how many
/// freed pages its snapshot keeps from being reused.
#[test]
fn info_reports_a_long_lived_reader() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    for i in 0..2000 {
        txn.put(Database::MAIN, &key(i), &[1u8; 100], 0).unwrap();
    }
    txn.commit().unwrap();
    let info = env.info().unwrap();
    assert_eq!((info.oldest_reader_lag, info.pinned_pages), (0, 0));
    let reader = env.begin_read().unwrap();
    for round in 0..5u8 {
        let mut txn = env.begin_write().unwrap();
        for i in 0..2000 {
            txn.put(Database::MAIN, &key(i), &[round; 100], 0).unwrap();
        }
        txn.commit().unwrap();
    }
    let info = env.info().unwrap();
    assert_eq!(info.oldest_reader_lag, 5);
    assert!(info.pinned_pages > 100, "{info:?}");
    // As LMDB counts them: the one live reader (not the look-up `info` made for the
    // pinned pages).
    assert_eq!(info.num_readers, 1, "{info:?}");
    drop(reader);
    let info = env.info().unwrap();
    assert_eq!((info.oldest_reader_lag, info.pinned_pages), (0, 0));
}

/// `Env::begin_write_in` begins the write txn in an empty slot (the same txn as
/// `begin_write`'s: the next id, the latest snapshot, the writer lock held until it ends)
/// and refuses a slot that holds one, leaving it as it was.
#[test]
fn begin_write_in_begins_the_txn_in_an_empty_slot() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"before", b"1", 0).unwrap();
    let first_id = txn.id();
    txn.commit().unwrap();
    let mut slot = None;
    let txn = env.begin_write_in(&mut slot).unwrap();
    assert_eq!(txn.id(), first_id + 1);
    assert_eq!(txn.get(Database::MAIN, b"before").unwrap(), Some(&b"1"[..]));
    txn.put(Database::MAIN, b"in", b"place", 0).unwrap();
    assert!(matches!(
        env.begin_write_in(&mut slot),
        Err(Error::InvalidArgument(_))
    ));
    assert!(slot.is_some(), "a refused begin leaves the slot's txn");
    ferrocore::WriteTxn::commit_in_place(&mut slot).unwrap();
    // The writer lock went with the txn.
    let txn = env.begin_write().unwrap();
    assert_eq!(txn.get(Database::MAIN, b"in").unwrap(), Some(&b"place"[..]));
    assert_eq!(txn.id(), first_id + 2);
}

/// `WriteTxn::commit_in_place` commits a txn kept in an `Option` where it lies: the slot
/// is emptied (the writer lock released: another txn begins), the changes are visible and
/// durable as with `commit`, and an empty slot is `BadTxn`.
#[test]
fn commit_in_place_commits_the_txn_in_its_slot_and_empties_it() {
    let env = TempEnv::new(&env_options());
    let mut slot = Some(env.begin_write().unwrap());
    slot.as_mut()
        .unwrap()
        .put(Database::MAIN, b"kept", b"in a slot", 0)
        .unwrap();
    ferrocore::WriteTxn::commit_in_place(&mut slot).unwrap();
    assert!(slot.is_none());
    assert!(matches!(
        ferrocore::WriteTxn::commit_in_place(&mut slot),
        Err(Error::BadTxn)
    ));
    // The writer lock went with the txn: this would wait forever otherwise.
    let txn = env.begin_write().unwrap();
    assert_eq!(
        txn.get(Database::MAIN, b"kept").unwrap(),
        Some(&b"in a slot"[..])
    );
    drop((txn, slot));
    let dir = env.close();
    let env = open(dir.path());
    let txn = env.begin_read().unwrap();
    assert_eq!(
        txn.get(Database::MAIN, b"kept").unwrap(),
        Some(&b"in a slot"[..])
    );
}

#[test]
fn a_panic_in_a_write_txn_refuses_writes_until_reopened_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let mut txn = env.begin_write().unwrap();
    for i in 0..500 {
        txn.put(MAIN, &key(i), b"committed", 0).unwrap();
    }
    txn.commit().unwrap();
    // The writer lock (and the txn's buffers, locked for its life) are poisoned as the
    // panic unwinds through the txn's drop, which aborts it.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut txn = env.begin_write().unwrap();
        for i in 0..500 {
            txn.put(MAIN, &key(i), b"never committed", 0).unwrap();
        }
        panic!("the application fails mid-txn");
    }));
    assert!(outcome.is_err());
    assert!(matches!(env.begin_write(), Err(Error::Panic(_))));
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.get(MAIN, &key(7)).unwrap(), Some(&b"committed"[..]));
    drop(txn);
    drop(env);
    let env = open(dir.path());
    let mut txn = env.begin_write().unwrap();
    assert_eq!(txn.get(MAIN, &key(7)).unwrap(), Some(&b"committed"[..]));
    for i in 500..1000 {
        txn.put(MAIN, &key(i), b"after the panic", 0).unwrap();
    }
    txn.commit().unwrap();
    env.check().unwrap();
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.get(MAIN, &key(3)).unwrap(), Some(&b"committed"[..]));
    assert_eq!(
        txn.get(MAIN, &key(999)).unwrap(),
        Some(&b"after the panic"[..])
    );
    assert_eq!(txn.stat().entries, 1000);
}
