//! The file follows the data: with a map that grows on demand, commits give the free pages
//! at the end of the file back and shorten it; `Env::shrink_file` does it on request; an
//! explicit map size keeps LMDB's behaviour (the file never shrinks); a reader of an
//! older snapshot keeps the file long; and another handle on the file, which saw it
//! longer, still covers every page it commits.

mod common;

use std::path::Path;

use common::{lmdb, open_env, TempEnv};
use ferrocore::{db_flags, env_flags, put_flags, Database, Env, EnvOptions};

const VALUE_LEN: usize = 1000;

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

fn value(i: u32) -> Vec<u8> {
    (0..VALUE_LEN).map(|j| (i as usize + j) as u8).collect()
}

fn file_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("data.mdb")).unwrap().len()
}

/// Opens an environment in a new directory with room for the one named DB ("big").
fn temp_env(mut opts: EnvOptions) -> (TempEnv, EnvOptions) {
    opts.max_dbs(2);
    (TempEnv::new(&opts), opts)
}

/// Puts `keep` keys in the main DB and makes a few commits, fills a DB of 3,000 entries
/// (about 4 MiB, at the end of the file), and drops it: the end of the file is free.
/// Returns the file's length before the drop.
fn fill_then_drop_the_end(env: &Env, keep: u32) -> u64 {
    let mut txn = env.begin_write().unwrap();
    for i in 0..keep {
        txn.put(Database::MAIN, &key(i), &value(i), 0).unwrap();
    }
    txn.commit().unwrap();
    small_commits(env, 4, keep);
    let mut txn = env.begin_write().unwrap();
    let big = txn.open_db(Some("big"), db_flags::CREATE).unwrap();
    for i in 0..3000 {
        txn.put(big, &key(i), &value(i), 0).unwrap();
    }
    txn.commit().unwrap();
    let full = std::fs::metadata(env.path().join("data.mdb"))
        .unwrap()
        .len();
    let mut txn = env.begin_write().unwrap();
    let big = txn.open_db(Some("big"), 0).unwrap();
    txn.drop_db(big, true).unwrap();
    txn.commit().unwrap();
    full
}

/// Small commits that rewrite the last kept key and one other (their pages move to the
/// lowest free pages, and the free list is taken and written back).
fn small_commits(env: &Env, count: u32, keep: u32) {
    for c in 0..count {
        let mut txn = env.begin_write().unwrap();
        for i in [c % keep, keep - 1] {
            txn.put(Database::MAIN, &key(i), &value(i), 0).unwrap();
        }
        txn.commit().unwrap();
    }
}

/// Every kept key holds its value, nothing else is there, and the snapshot checks.
fn assert_holds(env: &Env, keep: u32) {
    env.check().unwrap();
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.stat().entries, u64::from(keep));
    for i in 0..keep {
        assert_eq!(
            txn.get(Database::MAIN, &key(i)).unwrap(),
            Some(&value(i)[..]),
            "key {i}"
        );
    }
}

/// The file covers the latest meta's pages.
fn assert_covers_meta(env: &Env, dir: &Path) {
    let info = env.info().unwrap();
    let ps = u64::from(env.stat().unwrap().page_size);
    assert!(
        file_len(dir) >= (info.last_pgno + 1) * ps,
        "file of {} bytes, meta counts {} pages",
        file_len(dir),
        info.last_pgno + 1
    );
}

#[test]
fn commits_give_the_free_tail_back_and_shorten_the_file() {
    let (env, opts) = temp_env(EnvOptions::new());
    let full = fill_then_drop_the_end(&env, 300);
    // Commits give back the free end they take from the free list, and every 16th looks
    // for the newest records that list pages near the end.
    let mut commits = 0;
    while file_len(env.dir()) > full * 3 / 5 {
        commits += 1;
        assert!(
            commits <= 40,
            "still {} of {full} bytes",
            file_len(env.dir())
        );
        let before = file_len(env.dir());
        small_commits(&env, 1, 300);
        assert_covers_meta(&env, env.dir());
        if file_len(env.dir()) < before {
            // The file still holds the snapshot before the commit that cut it (the other
            // meta, which a crash or `MDB_PREVSNAPSHOT` may fall back to).
            let mut copy = Vec::new();
            env.copy_previous(&mut copy, false).unwrap();
        }
    }
    assert_holds(&env, 300);
    let dir = env.close();
    let env = open_env(dir.path(), &opts);
    assert_holds(&env, 300);
}

#[test]
fn shrink_file_cuts_the_file_to_the_pages_in_use() {
    let mut opts = EnvOptions::new();
    opts.shrink_on_commit(false);
    let (env, _) = temp_env(opts);
    let full = fill_then_drop_the_end(&env, 300);
    small_commits(&env, 4, 300);
    assert!(
        file_len(env.dir()) >= full,
        "shrank with shrink_on_commit off"
    );
    let len = env.shrink_file().unwrap();
    assert_eq!(len, file_len(env.dir()));
    let info = env.info().unwrap();
    let ps = u64::from(env.stat().unwrap().page_size);
    assert_eq!(
        len,
        (info.last_pgno + 1) * ps,
        "cut to the last page in use"
    );
    assert!(len < full / 2, "{len} bytes of {full}");
    assert_holds(&env, 300);
    // It keeps working: the file grows again.
    let mut txn = env.begin_write().unwrap();
    for i in 300..3000 {
        txn.put(Database::MAIN, &key(i), &value(i), 0).unwrap();
    }
    txn.commit().unwrap();
    assert_holds(&env, 3000);
    assert_covers_meta(&env, env.dir());
}

#[test]
fn with_an_explicit_map_size_the_file_keeps_its_length_as_in_lmdb() {
    let mut opts = EnvOptions::new();
    opts.map_size(64 << 20);
    let (env, _) = temp_env(opts);
    let full = fill_then_drop_the_end(&env, 300);
    small_commits(&env, 200, 300);
    assert!(file_len(env.dir()) >= full, "the file shrank");
    assert_holds(&env, 300);
}

#[test]
fn a_reader_of_an_older_snapshot_keeps_the_file_long_until_it_ends() {
    let (env, _) = temp_env(EnvOptions::new());
    let mut txn = env.begin_write().unwrap();
    for i in 0..300 {
        txn.put(Database::MAIN, &key(i), &value(i), 0).unwrap();
    }
    txn.commit().unwrap();
    small_commits(&env, 4, 300);
    let mut txn = env.begin_write().unwrap();
    let big = txn.open_db(Some("big"), db_flags::CREATE).unwrap();
    for i in 0..3000 {
        txn.put(big, &key(i), &value(i), 0).unwrap();
    }
    txn.commit().unwrap();
    let old = env.begin_read().unwrap();
    let old_end = file_len(env.dir());
    let mut txn = env.begin_write().unwrap();
    txn.drop_db(big, true).unwrap();
    txn.commit().unwrap();
    assert!(env.shrink_file().unwrap() >= old_end);
    // The old snapshot still reads every page it had.
    let old_big = old.open_db(Some("big")).unwrap();
    for i in 0..3000 {
        assert_eq!(old.get(old_big, &key(i)).unwrap(), Some(&value(i)[..]));
    }
    drop(old);
    let len = env.shrink_file().unwrap();
    assert!(len < old_end / 2, "{len} bytes of {old_end}");
    assert_holds(&env, 300);
}

/// Two handles on one file (as two processes, each with its own view of the file's
/// length): `b` saw the file long; after `a` shrinks it, a txn of `b` that takes a run of
/// pages past the new end and frees it again must leave a file that covers its meta, and
/// `b` keeps committing through the map or with `pwrite`.
fn another_handle_covers_its_pages_after_a_shrink(flags: u32) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = EnvOptions::new();
    opts.max_dbs(2);
    let a = open_env(dir.path(), &opts);
    opts.flags(flags).shrink_on_commit(false);
    let b = open_env(dir.path(), &opts);
    let full = fill_then_drop_the_end(&b, 300);
    small_commits(&b, 4, 300);
    assert!(file_len(dir.path()) >= full);
    let short = a.shrink_file().unwrap();
    assert!(short < full / 2, "{short} of {full}");
    // A value of 2 MiB takes a run of pages past the new end (the free pages are
    // scattered); deleting it leaves most of them unwritten.
    let mut txn = b.begin_write().unwrap();
    txn.put(Database::MAIN, b"run", &vec![9u8; 2 << 20], 0)
        .unwrap();
    txn.delete(Database::MAIN, b"run").unwrap();
    txn.put(Database::MAIN, &key(7), b"seven", 0).unwrap();
    txn.commit().unwrap();
    assert!(b.info().unwrap().last_pgno * 4096 > short + (1 << 20));
    assert_covers_meta(&b, dir.path());
    drop((a, b));
    let env = open_env(dir.path(), &opts);
    assert_eq!(
        env.begin_read()
            .unwrap()
            .get(Database::MAIN, &key(7))
            .unwrap(),
        Some(&b"seven"[..])
    );
    env.check().unwrap();
}

#[test]
fn another_handle_covers_its_pages_after_a_shrink_with_pwrite() {
    another_handle_covers_its_pages_after_a_shrink(0);
}

#[test]
fn another_handle_covers_its_pages_after_a_shrink_with_write_map() {
    another_handle_covers_its_pages_after_a_shrink(env_flags::WRITE_MAP);
}

#[test]
fn lmdb_reads_a_file_ferrocore_shrank() {
    let (env, _) = temp_env(EnvOptions::new());
    let full = fill_then_drop_the_end(&env, 300);
    assert!(env.shrink_file().unwrap() < full / 2);
    let dir = env.close();
    let lmdb_env = lmdb::Env::open(dir.path(), common::LMDB_MAP_SIZE);
    let txn = lmdb_env.read();
    let pairs = txn.scan(txn.main_dbi());
    assert_eq!(pairs.len(), 300);
    for (i, (k, v)) in pairs.iter().enumerate() {
        assert_eq!((&k[..], &v[..]), (&key(i as u32)[..], &value(i as u32)[..]));
    }
    drop(txn);
    // LMDB writes on after it: the file grows again under its commits.
    lmdb_env.write(|txn| {
        let dbi = txn.main_dbi();
        for i in 300..1000u32 {
            assert_eq!(txn.put(dbi, &key(i), &value(i), 0), 0);
        }
    });
    drop(lmdb_env);
    let env = open_env(dir.path(), &EnvOptions::new());
    assert_holds(&env, 1000);
}

/// Random puts and deletes in small commits, each checked whole (strict mode): commits
/// that give the end back, and every sixteenth, which takes the newest free-list records
/// that list the last page out of order, keep the free list exact and the data whole.
#[test]
fn small_random_commits_keep_the_free_list_exact_while_giving_the_end_back() {
    let mut opts = EnvOptions::new();
    opts.strict(true);
    let env = TempEnv::new(&opts);
    let mut model = std::collections::BTreeMap::new();
    let mut rng = common::Rng(7);
    for _ in 0..600 {
        let mut txn = env.begin_write().unwrap();
        for _ in 0..=rng.below(3) {
            let i = rng.below(2000) as u32;
            if rng.below(3) == 0 {
                let found = txn.delete(Database::MAIN, &key(i)).unwrap();
                assert_eq!(found, model.remove(&i).is_some());
            } else {
                let len = 16 + rng.below(600);
                txn.put(Database::MAIN, &key(i), &value(i)[..len], 0)
                    .unwrap();
                model.insert(i, len);
            }
        }
        txn.commit().unwrap();
        assert_covers_meta(&env, env.dir());
    }
    let txn = env.begin_read().unwrap();
    let mut cursor = txn.cursor(Database::MAIN).unwrap();
    let mut found = Vec::new();
    while let Some((k, v)) = cursor.next().unwrap() {
        found.push((k.to_vec(), v.to_vec()));
    }
    let expected: Vec<_> = model
        .iter()
        .map(|(&i, &len)| (key(i).to_vec(), value(i)[..len].to_vec()))
        .collect();
    assert!(found == expected, "the DB does not hold the model");
}

/// A delete of most of a large file: its free pages go back through the pool, which is
/// written back in several records under consecutive old keys (the highest pages under
/// the highest key). Each look for records near the end follows that chain down while it
/// gives pages back, so a few looks give the whole free end back (with only the newest
/// records looked at, 80 MB of the 86 MB stayed for good).
#[test]
fn a_large_free_end_in_many_records_goes_back_within_a_few_looks() {
    let (env, _) = temp_env(EnvOptions::new());
    let used = |env: &Env| env.info().unwrap().last_pgno + 1;
    let small = |i: u32| format!("key{i:06}").into_bytes();
    let mut txn = env.begin_write().unwrap();
    for i in 0..20_000u32 {
        let len = if i % 97 == 0 { 9000 } else { 100 };
        txn.put(Database::MAIN, &small(i), &vec![1u8; len], 0)
            .unwrap();
    }
    for i in (0..20_000).step_by(5) {
        txn.delete(Database::MAIN, &small(i)).unwrap();
    }
    txn.commit().unwrap();
    let big = |i: u32| format!("big{i:04}").into_bytes();
    let mut txn = env.begin_write().unwrap();
    for i in 0..600 {
        txn.put(Database::MAIN, &big(i), &vec![i as u8; 128 << 10], 0)
            .unwrap();
    }
    txn.commit().unwrap();
    let peak = used(&env);
    let mut txn = env.begin_write().unwrap();
    for i in 0..600 {
        txn.delete(Database::MAIN, &big(i)).unwrap();
    }
    for i in 0..20_000 {
        let _ = txn.delete(Database::MAIN, &small(i));
    }
    txn.commit().unwrap();
    for i in 0..48u32 {
        let mut txn = env.begin_write().unwrap();
        txn.put(Database::MAIN, &key(i), b"small", 0).unwrap();
        txn.commit().unwrap();
    }
    let left = used(&env);
    assert!(left < peak / 50, "{left} of {peak} pages still used");
    let len = file_len(env.dir());
    assert!(
        len < peak * 4096 / 20,
        "a file of {len} bytes, {left} pages used"
    );
    env.check().unwrap();
}

/// One-put commits on a file loaded in order, as W6 on its prefilled file: each copies the
/// tree's path and the free DB's, and must take those pages from what the commits before
/// it freed. The file then grows only by what the tree itself gains (the leaves the puts
/// split), never by the copies.
#[test]
fn one_put_commits_on_a_loaded_file_grow_it_only_by_the_tree_s_growth() {
    let env = TempEnv::new(&EnvOptions::new());
    // Loaded in order in two txns: full leaves, so most puts below split one.
    for chunk in 0..2u32 {
        let mut txn = env.begin_write().unwrap();
        for i in chunk * 50_000..(chunk + 1) * 50_000 {
            let mut k = [0u8; 16];
            k[..4].copy_from_slice(&(i * 40_000).to_be_bytes());
            txn.put(Database::MAIN, &k, &[7u8; 100], put_flags::APPEND)
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let mut rng = common::Rng(11);
    let mut commit_one = || {
        let mut k = [0u8; 16];
        for b in &mut k {
            *b = rng.below(256) as u8;
        }
        let mut txn = env.begin_write().unwrap();
        txn.put(Database::MAIN, &k, &[9u8; 100], 0).unwrap();
        txn.commit().unwrap();
    };
    for _ in 0..20 {
        commit_one();
    }
    let used = |env: &Env| env.info().unwrap().last_pgno + 1;
    let tree_pages = |env: &Env| {
        let s = env.stat().unwrap();
        s.branch_pages + s.leaf_pages
    };
    let (used_before, tree_before) = (used(&env), tree_pages(&env));
    for _ in 0..1000 {
        commit_one();
    }
    let grown = used(&env) - used_before;
    let tree_grown = tree_pages(&env) - tree_before;
    assert!(tree_grown > 500, "the puts split leaves ({tree_grown})");
    // A few pages of slack: the free DB's own pages come and go.
    assert!(
        grown <= tree_grown + 8,
        "1,000 one-put commits grew the file by {grown} pages, the tree by {tree_grown}"
    );
}

/// A key of the one-put-commit workload below: 16 bytes from a simple generator.
fn random_key(state: &mut u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    for half in k.chunks_mut(8) {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        half.copy_from_slice(&(*state >> 1).to_be_bytes());
    }
    k
}

/// With an explicit map size the file never shrinks, so it must not grow either where
/// LMDB's does not: a long run of one-put commits (W6's shape) after a load reuses the
/// pages earlier commits freed. Run against LMDB on the same workload, ferrocore's last
/// page stays within a few pages of LMDB's. (Its free-list save used to stop taking free
/// pages before copying the free DB's own pages, which then came from the end of the
/// file: the file grew by half in 20,000 commits, and kept growing.)
#[test]
fn one_put_commits_reuse_free_pages_as_lmdb_does() {
    const LOAD: usize = 10_000;
    const COMMITS: usize = 5_000;
    let value = [7u8; 100];
    let mut seed = 1;
    let load: Vec<[u8; 16]> = (0..LOAD).map(|_| random_key(&mut seed)).collect();
    let more: Vec<[u8; 16]> = (0..COMMITS).map(|_| random_key(&mut seed)).collect();

    // Neither syncs: the free lists are the same with or without.
    let mut opts = EnvOptions::new();
    opts.map_size(common::LMDB_MAP_SIZE as u64)
        .flags(env_flags::NO_SYNC);
    let env = TempEnv::new(&opts);
    for chunk in load.chunks(1000) {
        let mut txn = env.begin_write().unwrap();
        for k in chunk {
            txn.put(Database::MAIN, k, &value, 0).unwrap();
        }
        txn.commit().unwrap();
    }
    for k in &more {
        let mut txn = env.begin_write().unwrap();
        txn.put(Database::MAIN, k, &value, 0).unwrap();
        txn.commit().unwrap();
    }
    env.check().unwrap();
    let ours = env.info().unwrap().last_pgno;

    let dir = tempfile::tempdir().unwrap();
    let lmdb_env = lmdb::Env::open(dir.path(), common::LMDB_MAP_SIZE);
    lmdb_env.no_sync();
    for chunk in load.chunks(1000) {
        lmdb_env.write(|txn| {
            let dbi = txn.main_dbi();
            for k in chunk {
                assert_eq!(txn.put(dbi, k, &value, 0), 0);
            }
        });
    }
    for k in &more {
        lmdb_env.write(|txn| {
            let dbi = txn.main_dbi();
            assert_eq!(txn.put(dbi, k, &value, 0), 0);
        });
    }
    let lmdbs = lmdb_env.info().me_last_pgno as u64;
    assert!(
        ours <= lmdbs + lmdbs / 50 + 8,
        "after {COMMITS} one-put commits the file ends at page {ours}, LMDB's at {lmdbs}"
    );
}
