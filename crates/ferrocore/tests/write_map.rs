//! `WRITE_MAP`: write txns build their pages in place in a writable shared map. What a
//! program can observe: the same data as without it, snapshots that hold still while the
//! writer writes in place, aborts that leave nothing, nested txns refused as LMDB refuses
//! them, LMDB's file length with an explicit map size, and files LMDB reads.

mod common;

use common::{open_env, TempEnv};
use ferrocore::{env_flags, Database, Env, EnvOptions, Error};

fn env_options(flags: u32, map_size: Option<u64>) -> EnvOptions {
    let mut opts = EnvOptions::new();
    opts.flags(flags);
    if let Some(size) = map_size {
        opts.map_size(size);
    }
    opts
}

fn open(dir: &std::path::Path, flags: u32, map_size: Option<u64>) -> Env {
    open_env(dir, &env_options(flags, map_size))
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let len = if i.is_multiple_of(97) { 9000 } else { 100 }; // some overflow values
    vec![(i + round) as u8; len]
}

fn fill(env: &Env, round: u32, n: u32) {
    let mut txn = env.begin_write().unwrap();
    for i in 0..n {
        txn.put(Database::MAIN, &key(i), &value(i, round), 0)
            .unwrap();
    }
    for i in (0..n).step_by(5) {
        txn.delete(Database::MAIN, &key(i)).unwrap();
    }
    txn.commit().unwrap();
}

fn file_len(dir: &std::path::Path) -> u64 {
    std::fs::metadata(dir.join("data.mdb")).unwrap().len()
}

#[test]
fn write_map_gives_the_same_data_and_the_same_tree_as_pwrite() {
    let with = TempEnv::new(&env_options(env_flags::WRITE_MAP, None));
    let without = TempEnv::new(&env_options(0, None));
    assert_ne!(with.flags() & env_flags::WRITE_MAP, 0);
    for round in 0..6 {
        fill(&with, round, 3000);
        fill(&without, round, 3000);
    }
    let (tw, to) = (with.begin_read().unwrap(), without.begin_read().unwrap());
    let (mut cw, mut co) = (
        tw.cursor(Database::MAIN).unwrap(),
        to.cursor(Database::MAIN).unwrap(),
    );
    let mut n = 0;
    loop {
        let (x, y) = (cw.next().unwrap(), co.next().unwrap());
        assert_eq!(x, y);
        if x.is_none() {
            break;
        }
        n += 1;
    }
    assert_eq!(n, 2400);
    assert_eq!(tw.stat(), to.stat(), "the same tree, page for page");
    with.check().unwrap();
}

/// A reader's snapshot holds still, bytes and addresses, while the writer rewrites every
/// key in place in the map, commit after commit.
#[test]
fn readers_keep_their_snapshot_while_the_writer_writes_in_the_map() {
    let env = TempEnv::new(&env_options(env_flags::WRITE_MAP, None));
    fill(&env, 0, 2000);
    let reader = env.begin_read().unwrap();
    let before: Vec<(&[u8], &[u8])> = {
        let mut c = reader.cursor(Database::MAIN).unwrap();
        let mut v = Vec::new();
        while let Some(item) = c.next().unwrap() {
            v.push(item);
        }
        v
    };
    let copies: Vec<(Vec<u8>, Vec<u8>)> = before
        .iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    for round in 1..8 {
        fill(&env, round, 2000);
    }
    for ((k, v), (ck, cv)) in before.iter().zip(&copies) {
        assert_eq!((*k, *v), (&ck[..], &cv[..]), "a snapshot's bytes changed");
    }
    let again = reader.get(Database::MAIN, &key(1)).unwrap().unwrap();
    assert_eq!(again, &value(1, 0)[..]);
    drop(reader);
    let now = env.begin_read().unwrap();
    assert_eq!(
        now.get(Database::MAIN, &key(1)).unwrap().unwrap(),
        &value(1, 7)[..]
    );
}

#[test]
fn an_aborted_write_map_txn_leaves_nothing() {
    let env = TempEnv::new(&env_options(env_flags::WRITE_MAP, None));
    fill(&env, 0, 1000);
    let info = env.info().unwrap();
    let mut txn = env.begin_write().unwrap();
    for i in 0..5000 {
        txn.put(Database::MAIN, &key(i), &value(i, 9), 0).unwrap();
    }
    txn.abort();
    assert_eq!(env.info().unwrap(), info);
    let txn = env.begin_read().unwrap();
    assert_eq!(
        txn.get(Database::MAIN, &key(1)).unwrap().unwrap(),
        &value(1, 0)[..]
    );
    assert_eq!(txn.get(Database::MAIN, &key(4000)).unwrap(), None);
    drop(txn);
    env.check().unwrap();
}

/// As LMDB: a nested txn under WRITE_MAP is `MDB_BAD_TXN` (its parent's pages are changed
/// in place, with no copy to go back to).
#[test]
fn nested_txns_are_refused_under_write_map() {
    let env = TempEnv::new(&env_options(env_flags::WRITE_MAP, None));
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"k", b"v", 0).unwrap();
    assert!(matches!(txn.begin_nested(), Err(Error::BadTxn)));
    txn.commit().unwrap();
}

/// With an explicit map size the file is the map's size from the open on, as LMDB makes
/// it; growing on demand, the file grows in steps of four as pages are allocated (a power
/// of four of at least 1 MiB), and synced commits after most of the data went cut it back
/// to the step that holds what is left, but never within a step of what is used (so a
/// file near a step's edge is not cut and grown each commit).
#[test]
fn file_length_follows_lmdb_with_a_map_size_and_the_data_without() {
    const MIB: u64 = 1 << 20;
    let is_step = |len: u64| len.is_power_of_two() && len.trailing_zeros().is_multiple_of(2);
    let size = 64 * MIB;
    let env = TempEnv::new(&env_options(env_flags::WRITE_MAP, Some(size)));
    assert_eq!(file_len(env.dir()), size);
    fill(&env, 0, 1000);
    assert_eq!(file_len(env.dir()), size);
    drop(env);

    let env = TempEnv::new(&env_options(env_flags::WRITE_MAP, None));
    let used = |env: &Env| (env.info().unwrap().last_pgno + 1) * 4096;
    fill(&env, 0, 20_000);
    let (small, len) = (used(&env), file_len(env.dir()));
    assert!(
        is_step(len) && len >= small && len < 4 * small,
        "{len} for {small} used"
    );
    // More data: the file takes the next step that holds it.
    let big = |i: u32| (format!("big{i:04}").into_bytes(), vec![i as u8; 128 << 10]);
    let mut txn = env.begin_write().unwrap();
    for i in 0..200 {
        let (k, v) = big(i);
        txn.put(Database::MAIN, &k, &v, 0).unwrap();
    }
    txn.commit().unwrap();
    let (full, len) = (used(&env), file_len(env.dir()));
    assert!(
        is_step(len) && len >= full && len < 4 * full,
        "{len} for {full} used"
    );
    assert!(len >= 16 * MIB, "{len} for {full} used");
    // Deleting a tenth of the small keys: the file keeps its length.
    let mut txn = env.begin_write().unwrap();
    for i in 0..2_000 {
        let _ = txn.delete(Database::MAIN, &key(i));
    }
    txn.commit().unwrap();
    assert_eq!(file_len(env.dir()), len);
    // Deleting everything: synced commits give the free end back in bounded steps (each
    // 16th looks for free-list records near the end) and cut the file to the step that
    // holds what the metas count.
    let mut txn = env.begin_write().unwrap();
    for i in 0..200 {
        txn.delete(Database::MAIN, &big(i).0).unwrap();
    }
    for i in 2_000..20_000 {
        let _ = txn.delete(Database::MAIN, &key(i));
    }
    txn.commit().unwrap();
    for i in 0..48 {
        let mut txn = env.begin_write().unwrap();
        txn.put(Database::MAIN, &key(i), b"small", 0).unwrap();
        txn.commit().unwrap();
    }
    let (left, cut) = (used(&env), file_len(env.dir()));
    assert!(left < full / 8, "{left} of {full} still used");
    assert!(cut < len / 4, "{cut} of {len}, {left} used");
    assert!(is_step(cut) && cut >= left, "{cut} for {left} used");
    env.check().unwrap();
}

/// As LMDB: a read-only environment ignores WRITE_MAP.
#[test]
fn read_only_ignores_write_map() {
    let dir = tempfile::tempdir().unwrap();
    fill(&open(dir.path(), 0, None), 0, 10);
    let env = open(
        dir.path(),
        env_flags::READ_ONLY | env_flags::WRITE_MAP,
        None,
    );
    assert_eq!(env.flags() & env_flags::WRITE_MAP, 0);
    let txn = env.begin_read().unwrap();
    assert!(txn.get(Database::MAIN, &key(1)).unwrap().is_some());
}

/// LMDB reads what a WRITE_MAP txn wrote, entry for entry.
#[test]
fn lmdb_reads_a_write_map_environment() {
    let env = TempEnv::new(&env_options(env_flags::WRITE_MAP, None));
    for round in 0..3 {
        fill(&env, round, 3000);
    }
    let ours: Vec<(Vec<u8>, Vec<u8>)> = {
        let txn = env.begin_read().unwrap();
        let mut c = txn.cursor(Database::MAIN).unwrap();
        let mut v = Vec::new();
        while let Some((k, d)) = c.next().unwrap() {
            v.push((k.to_vec(), d.to_vec()));
        }
        v
    };
    let dir = env.close();
    let lm = common::lmdb::Env::open(dir.path(), common::LMDB_MAP_SIZE);
    let txn = lm.read();
    assert!(txn.scan(txn.main_dbi()) == ours, "LMDB reads other data");
}

/// A write txn under `WRITE_MAP` takes the file's length from what this process knows
/// (no `fstat` per txn): a txn that grew the file and aborted must leave that length
/// known, or the next txn to write past the old length would set it again (shrinking
/// the file to its own step, then growing it back).
#[test]
fn a_write_map_txn_knows_the_length_an_aborted_txn_left() {
    use ferrocore::fault::{CallKind, FaultInjector};
    let dir = tempfile::tempdir().unwrap();
    let inj = FaultInjector::new();
    let mut opts = env_options(env_flags::WRITE_MAP | env_flags::NO_SYNC, None);
    {
        let inj = inj.clone();
        opts.data_file(move |f| inj.wrap(f));
    }
    let env = open_env(dir.path(), &opts);
    let put_range = |txn: &mut ferrocore::WriteTxn<'_>, range: std::ops::Range<u32>| {
        for i in range {
            txn.put(Database::MAIN, &key(i), &[i as u8; 400], 0)
                .unwrap();
        }
    };
    // About 2.5 MiB of data: the file grows to its 4 MiB step.
    let mut txn = env.begin_write().unwrap();
    put_range(&mut txn, 0..5_000);
    txn.commit().unwrap();
    assert_eq!(file_len(dir.path()), 4 << 20);
    // A large txn grows it to 16 MiB, then aborts: the length stays.
    let mut txn = env.begin_write().unwrap();
    put_range(&mut txn, 5_000..25_000);
    txn.abort();
    assert_eq!(file_len(dir.path()), 16 << 20);
    // The next txn writes past 4 MiB: the file already covers it, no length is set.
    let before = inj.call_log().len();
    let mut txn = env.begin_write().unwrap();
    put_range(&mut txn, 5_000..10_000);
    assert!(txn.dirty_pages() > 0);
    let during: Vec<CallKind> = inj.call_log()[before..].to_vec();
    txn.commit().unwrap();
    assert!(
        !during.contains(&CallKind::SetLen),
        "the txn set the file's length again: {during:?}"
    );
    assert_eq!(file_len(dir.path()), 16 << 20);
    let txn = env.begin_read().unwrap();
    for i in 0..10_000 {
        assert_eq!(
            txn.get(Database::MAIN, &key(i)).unwrap(),
            Some(&[i as u8; 400][..])
        );
    }
    for i in 10_000..25_000 {
        assert_eq!(txn.get(Database::MAIN, &key(i)).unwrap(), None);
    }
    drop(txn);
    env.check().unwrap();
}

/// The `VmFlags` of this process's mappings of `file` (from `/proc/self/smaps`).
fn vm_flags_of(file: &std::path::Path) -> Vec<String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = file.to_str().unwrap();
    let mut flags = Vec::new();
    let mut in_file = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            in_file = line.ends_with(name);
        } else if let Some(rest) = line.strip_prefix("VmFlags:") {
            if in_file {
                flags.push(rest.trim().to_string());
            }
        }
    }
    flags
}

/// `NO_READAHEAD` advises the kernel that the map is read at random, as LMDB's
/// `MDB_NORDAHEAD` does (`madvise(MADV_RANDOM)`: "rr" in the mapping's `VmFlags`), with or
/// without `WRITE_MAP`; without the flag the map keeps the kernel's default.
#[test]
fn no_readahead_advises_random_reads_on_the_map() {
    for write_map in [0, env_flags::WRITE_MAP] {
        for no_readahead in [0, env_flags::NO_READAHEAD] {
            let dir = tempfile::tempdir().unwrap();
            let env = open(dir.path(), write_map | no_readahead, None);
            let mut txn = env.begin_write().unwrap();
            txn.put(Database::MAIN, b"k", b"v", 0).unwrap();
            txn.commit().unwrap();
            let data = dir.path().join("data.mdb").canonicalize().unwrap();
            let flags = vm_flags_of(&data);
            assert_eq!(flags.len(), 1, "one map of the data file: {flags:?}");
            let random = flags[0].split_whitespace().any(|f| f == "rr");
            assert_eq!(
                random,
                no_readahead != 0,
                "WRITE_MAP {write_map:#x}, NO_READAHEAD {no_readahead:#x}: {flags:?}"
            );
            assert_eq!(
                env.begin_read().unwrap().get(Database::MAIN, b"k").unwrap(),
                Some(&b"v"[..])
            );
        }
    }
}
