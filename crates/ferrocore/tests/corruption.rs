//! Damaged files give clear errors, never a panic or a crash; a damaged meta page falls
//! back to the other one.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ferrocore::{env_flags, Database, Env, EnvOptions, Error};

mod common;
use common::{open_env, try_open_env, Rng};

const MAIN: Database = Database::MAIN;
const PS: u64 = 4096;

fn open(dir: &Path) -> ferrocore::Result<Env> {
    try_open_env(dir, EnvOptions::new().flags(env_flags::NO_SYNC))
}

/// Room for the named DBs of [`build_dbs`], unsynced commits.
fn dbs_options() -> EnvOptions {
    let mut opts = EnvOptions::new();
    opts.max_dbs(4).flags(env_flags::NO_SYNC);
    opts
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{:08}", i.wrapping_mul(2_654_435_761)).into_bytes()
}

/// An environment with two commits: txn 1 has keys 0..3000, txn 2 adds 3000..4000 and
/// some big values.
fn build(dir: &Path) {
    let env = open(dir).unwrap();
    let mut txn = env.begin_write().unwrap();
    for i in 0..3000 {
        txn.put(MAIN, &key(i), &[i as u8; 60], 0).unwrap();
    }
    txn.commit().unwrap();
    let mut txn = env.begin_write().unwrap();
    for i in 3000..4000 {
        txn.put(MAIN, &key(i), &[i as u8; 60], 0).unwrap();
    }
    for i in 0..5 {
        txn.put(MAIN, format!("big{i}").as_bytes(), &vec![i as u8; 9000], 0)
            .unwrap();
    }
    txn.commit().unwrap();
}

fn poke(dir: &Path, offset: u64, bytes: &[u8]) {
    let f = OpenOptions::new()
        .write(true)
        .open(dir.join("data.mdb"))
        .unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

fn peek(dir: &Path, offset: u64, len: usize) -> Vec<u8> {
    let f = OpenOptions::new()
        .read(true)
        .open(dir.join("data.mdb"))
        .unwrap();
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, offset).unwrap();
    b
}

#[test]
fn zeroed_newest_meta_falls_back_to_the_other() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    // Txn 2 wrote meta 0 (2 & 1 == 0): destroy it.
    poke(dir.path(), 0, &vec![0u8; PS as usize]);
    let env = open(dir.path()).unwrap();
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.id(), 1, "the older meta is used");
    assert_eq!(txn.stat().entries, 3000);
    assert_eq!(txn.get(MAIN, &key(5)).unwrap(), Some(&[5u8; 60][..]));
    txn.check().unwrap();
    drop(txn);
    // And the environment goes on working: the next commit rewrites the damaged meta.
    let mut w = env.begin_write().unwrap();
    w.put(MAIN, b"after", b"repair", 0).unwrap();
    w.commit().unwrap();
    env.check().unwrap();
}

#[test]
fn torn_newest_meta_is_detected_by_its_checksum() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    // Change the main DB's entry count in meta 0 without fixing the checksum.
    let mut entries = peek(dir.path(), 88 + 32, 8);
    entries[0] ^= 0x55;
    poke(dir.path(), 88 + 32, &entries);
    let env = open(dir.path()).unwrap();
    assert_eq!(env.begin_read().unwrap().id(), 1);
}

#[test]
fn zeroed_meta_one_with_meta_zero_intact() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    poke(dir.path(), PS, &vec![0u8; PS as usize]);
    let env = open(dir.path()).unwrap();
    assert_eq!(env.begin_read().unwrap().id(), 2);
    assert_eq!(env.stat().unwrap().entries, 4005);
}

#[test]
fn bad_magic_and_version_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    for meta in [0, PS] {
        poke(dir.path(), meta + 20, &7u32.to_le_bytes());
    }
    let err = open(dir.path()).err().expect("version 7 is refused");
    assert!(matches!(err, Error::VersionMismatch { found: 7 }), "{err}");
    assert_eq!(err.lmdb_code(), -30794);
    for meta in [0, PS] {
        poke(dir.path(), meta + 16, b"XXXX");
    }
    let err = open(dir.path()).err().expect("bad magic is refused");
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    assert_eq!(err.lmdb_code(), -30793);
}

#[test]
fn unusable_page_size_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    // Page size 1000 in meta 0 (the FREE record's pad), checksum trailer cleared so the
    // meta is taken as LMDB-written.
    poke(dir.path(), 40, &1000u32.to_le_bytes());
    poke(dir.path(), 152, &[0u8; 24]);
    poke(dir.path(), PS, &vec![0u8; PS as usize]);
    let err = open(dir.path()).err().expect("page size 1000 is refused");
    assert!(matches!(err, Error::Invalid(_)), "{err}");
}

#[test]
fn truncated_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let f = OpenOptions::new()
        .write(true)
        .open(dir.path().join("data.mdb"))
        .unwrap();
    f.set_len(10 * PS).unwrap();
    drop(f);
    let err = open(dir.path()).err().expect("a truncated file is refused");
    assert!(matches!(err, Error::Invalid(_)), "{err}");
}

#[test]
fn child_pointer_past_the_end_is_page_not_found() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let root = {
        let env = open(dir.path()).unwrap();
        let txn = env.begin_read().unwrap();
        assert!(txn.stat().depth >= 2);
        txn.meta().main_db.root
    };
    // Node 1 of the root branch: point its child at page 0xFFFF_FF00.
    let slot = u16::from_le_bytes(peek(dir.path(), root * PS + 18, 2).try_into().unwrap()) as u64;
    poke(
        dir.path(),
        root * PS + slot,
        &[0x00, 0xFF, 0xFF, 0xFF, 0, 0],
    );
    let env = open(dir.path()).unwrap();
    let txn = env.begin_read().unwrap();
    let mut errors = 0;
    for i in 0..4000 {
        match txn.get(MAIN, &key(i)) {
            Ok(_) => {}
            Err(e) => {
                assert!(
                    matches!(e, Error::PageNotFound { pgno: 0xFFFF_FF00 }),
                    "{e}"
                );
                errors += 1;
            }
        }
    }
    assert!(errors > 0);
    // The checker names the page the pointer leads to.
    let err = txn.check().expect_err("check finds the bad child pointer");
    assert!(
        matches!(
            err,
            Error::Corrupted {
                pgno: 0xFFFF_FF00,
                ..
            }
        ),
        "{err}"
    );
}

/// Overflow runs whose header claims billions of pages (or none): freeing them, by
/// deleting their keys or by emptying the DB, fails the txn with `Corrupted` instead of
/// freeing pages that do not exist (or hanging on billions of them), and the committed
/// state is untouched.
#[test]
fn forged_overflow_run_lengths_are_corrupted_not_freed() {
    for forged in [0u32, 0x7FFF_FFFF, 0xFFFF_FFFF] {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path());
        let pages = std::fs::metadata(dir.path().join("data.mdb"))
            .unwrap()
            .len()
            / PS;
        let mut runs = 0;
        for pgno in 2..pages {
            let flags = u16::from_le_bytes(peek(dir.path(), pgno * PS + 10, 2).try_into().unwrap());
            if flags == 0x04 {
                poke(dir.path(), pgno * PS + 12, &forged.to_le_bytes());
                runs += 1;
            }
        }
        assert!(runs >= 5, "build() made {runs} overflow runs");
        let env = open(dir.path()).unwrap();
        let mut txn = env.begin_write().unwrap();
        let err = txn
            .delete(MAIN, b"big0")
            .expect_err("a forged run was freed");
        assert!(matches!(err, Error::Corrupted { .. }), "{forged:#x}: {err}");
        txn.abort();
        let mut txn = env.begin_write().unwrap();
        let err = txn
            .drop_db(MAIN, false)
            .expect_err("a forged run was freed");
        assert!(matches!(err, Error::Corrupted { .. }), "{forged:#x}: {err}");
        txn.abort();
        let txn = env.begin_read().unwrap();
        assert_eq!(txn.stat().entries, 4005);
        for i in 0..4000 {
            assert_eq!(txn.get(MAIN, &key(i)).unwrap(), Some(&[i as u8; 60][..]));
        }
    }
}

/// The errors the steps of an exercise returned: which step, and the error.
type Errors = Vec<(&'static str, Error)>;

/// Whether `e` reports damage as such: a bounds or consistency check on a page failed
/// (`Corrupted`), or a page number points outside the file or the snapshot
/// (`PageNotFound`, LMDB's MDB_PAGE_NOTFOUND).
fn is_corruption(e: &Error) -> bool {
    matches!(e, Error::Corrupted { .. } | Error::PageNotFound { .. })
}

/// Builds an environment `rounds` times, flips 1 to `max_flips` random bytes of its data
/// pages (mostly headers and slot arrays, where damage matters most), then opens it and
/// runs `exercise`. Every step must return a result, never panic, and every error must
/// report the damage as corruption (`is_corruption`): a damaged file is never reported as
/// a misuse, a missing DB, a full map, an I/O error, ... The same exercise on the
/// undamaged file must return no error at all. Returns how many rounds noticed the
/// damage.
fn damage_rounds(
    seed: u64,
    rounds: u64,
    max_flips: u64,
    build: fn(&Path),
    exercise: fn(&Env) -> Errors,
) -> usize {
    let control = tempfile::tempdir().unwrap();
    build(control.path());
    let errors = exercise(&open_env(control.path(), &dbs_options()));
    assert!(
        errors.is_empty(),
        "the undamaged file gives errors: {errors:?}"
    );

    let mut rng = Rng(seed);
    let mut noticed = 0;
    for round in 0..rounds {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path());
        let pages = std::fs::metadata(dir.path().join("data.mdb"))
            .unwrap()
            .len()
            / PS;
        for _ in 0..=(round % max_flips) {
            let page = 2 + rng.next() % (pages - 2);
            let off = if rng.chance(1, 2) {
                rng.next() % 64
            } else {
                rng.next() % PS
            };
            poke(dir.path(), page * PS + off, &[rng.next() as u8]);
        }
        let errors = match try_open_env(dir.path(), &dbs_options()) {
            Ok(env) => exercise(&env),
            Err(e) => vec![("open", e)],
        };
        for (step, e) in &errors {
            assert!(
                is_corruption(e),
                "round {round}: {step}: the damage is reported as {e:?}, not as corruption \
                 (all errors of the round: {errors:?})"
            );
        }
        if !errors.is_empty() {
            noticed += 1;
        }
    }
    noticed
}

/// Flips bytes all over the data pages of a plain DB, then runs every operation: each
/// error is corruption.
#[test]
fn random_damage_never_panics() {
    assert!(
        damage_rounds(0x1234_5678, 200, 8, build, exercise) > 0,
        "some damage must have been noticed"
    );
}

/// An environment with named, DUPSORT and DUPFIXED DBs (sub-pages, sub-DBs, LEAF2 pages).
fn build_dbs(dir: &Path) {
    let env = open_env(dir, &dbs_options());
    let mut txn = env.begin_write().unwrap();
    let dups = txn
        .open_db(
            Some("dups"),
            ferrocore::db_flags::CREATE | ferrocore::db_flags::DUP_SORT as u32,
        )
        .unwrap();
    let fixed = txn
        .open_db(
            Some("fixed"),
            ferrocore::db_flags::CREATE
                | (ferrocore::db_flags::DUP_SORT | ferrocore::db_flags::DUP_FIXED) as u32,
        )
        .unwrap();
    for k in 0..40u32 {
        let count = if k % 10 == 0 { 600 } else { 1 + k % 7 };
        for v in 0..count {
            txn.put(
                dups,
                &k.to_be_bytes(),
                format!("value-{v:05}").as_bytes(),
                0,
            )
            .unwrap();
            txn.put(fixed, &k.to_be_bytes(), &(v as u64).to_be_bytes(), 0)
                .unwrap();
        }
    }
    txn.commit().unwrap();
}

/// Every read and write path over damaged named, DUPSORT and DUPFIXED DBs.
fn exercise_dbs(env: &Env) -> Errors {
    let mut errors = Errors::new();
    if let Err(e) = read_dbs(env, &mut errors) {
        errors.push(("begin_read or cursor", e));
    }
    if let Err(e) = write_dbs(env, &mut errors) {
        errors.push(("begin_write", e));
    }
    errors
}

/// Scans "dups" and "fixed" with the count and GET_MULTIPLE at every item, then SET,
/// LAST_DUP, PREV_DUP and GET_BOTH_RANGE at every key; `check` of the snapshot.
fn read_dbs(env: &Env, errors: &mut Errors) -> ferrocore::Result<()> {
    let txn = env.begin_read()?;
    for name in ["dups", "fixed"] {
        let db = match txn.open_db(Some(name)) {
            Ok(db) => db,
            Err(e) => {
                errors.push(("open_db", e));
                continue;
            }
        };
        let mut c = txn.cursor(db)?;
        let mut r = c.first().map(|x| x.is_some());
        let mut steps = 0;
        while let Ok(true) = r {
            steps += 1;
            if steps > 50_000 {
                break;
            }
            if let Err(e) = c.count() {
                errors.push(("count", e));
            }
            match (name, c.get_multiple()) {
                // LMDB's answer outside DUPFIXED.
                ("dups", Err(Error::Incompatible)) => {}
                (_, Err(e)) => errors.push(("get_multiple", e)),
                (_, Ok(_)) => {}
            }
            r = c.next().map(|x| x.is_some());
        }
        if let Err(e) = r {
            errors.push(("first/next", e));
        }
        for k in 0..40u32 {
            let key = k.to_be_bytes();
            // LAST_DUP and PREV_DUP where SET found the key (elsewhere the cursor is not
            // positioned, and says so).
            let r = c.set(&key).and_then(|found| match found {
                Some(_) => c.last_dup().and_then(|_| c.prev_dup()).map(|_| ()),
                None => Ok(()),
            });
            if let Err(e) = r {
                errors.push(("set/last_dup/prev_dup", e));
            }
            if let Err(e) = c.get_both_range(&key, b"value-00300") {
                errors.push(("get_both_range", e));
            }
        }
    }
    if let Err(e) = txn.check() {
        errors.push(("check", e));
    }
    Ok(())
}

/// Puts and deletes of pairs of "dups" in one write txn, committed unless one failed.
fn write_dbs(env: &Env, errors: &mut Errors) -> ferrocore::Result<()> {
    let mut w = env.begin_write()?;
    let db = match w.open_db(Some("dups"), 0) {
        Ok(db) => db,
        Err(e) => {
            errors.push(("open_db in the write txn", e));
            return Ok(());
        }
    };
    for k in 0..40u32 {
        let r = if k % 2 == 0 {
            w.put(db, &k.to_be_bytes(), b"value-new", 0)
        } else {
            w.delete_value(db, &k.to_be_bytes(), Some(b"value-00001"))
                .map(|_| ())
        };
        if let Err(e) = r {
            errors.push(("put/delete_value", e));
            // A txn whose change failed can only be aborted.
            return Ok(());
        }
    }
    if let Err(e) = w.commit() {
        errors.push(("commit", e));
    }
    Ok(())
}

/// The same over named, DUPSORT and DUPFIXED DBs: each error is corruption.
#[test]
fn random_damage_to_dupsort_dbs_never_panics() {
    assert!(
        damage_rounds(0x9876_5432, 120, 6, build_dbs, exercise_dbs) > 0,
        "some damage must have been noticed"
    );
}

/// Every read and write path over the damaged plain DB of [`build`].
fn exercise(env: &Env) -> Errors {
    let mut errors = Errors::new();
    if let Err(e) = read_main(env, &mut errors) {
        errors.push(("begin_read or cursor", e));
    }
    if let Err(e) = write_main(env, &mut errors) {
        errors.push(("begin_write", e));
    }
    errors
}

/// `get` of every 7th key, `check`, and scans both ways.
fn read_main(env: &Env, errors: &mut Errors) -> ferrocore::Result<()> {
    let txn = env.begin_read()?;
    for i in (0..4000).step_by(7) {
        if let Err(e) = txn.get(MAIN, &key(i)) {
            errors.push(("get", e));
        }
    }
    if let Err(e) = txn.check() {
        errors.push(("check", e));
    }
    let mut c = txn.cursor(MAIN)?;
    let mut r = c.first().map(|x| x.is_some());
    let mut steps = 0;
    while let Ok(true) = r {
        steps += 1;
        if steps > 10_000 {
            break;
        }
        r = c.next().map(|x| x.is_some());
    }
    if let Err(e) = r {
        errors.push(("first/next", e));
    }
    let mut r = c.last().map(|x| x.is_some());
    while let Ok(true) = r {
        r = c.prev().map(|x| x.is_some());
    }
    if let Err(e) = r {
        errors.push(("last/prev", e));
    }
    Ok(())
}

/// Overwrites and deletes of every 3rd key in one write txn, committed unless one failed.
fn write_main(env: &Env, errors: &mut Errors) -> ferrocore::Result<()> {
    let mut txn = env.begin_write()?;
    for i in (0..4000).step_by(3) {
        let r = if i % 2 == 0 {
            txn.put(MAIN, &key(i), b"rewritten", 0)
        } else {
            txn.delete(MAIN, &key(i)).map(|_| ())
        };
        if let Err(e) = r {
            errors.push(("put/delete", e));
            // A txn whose change failed can only be aborted.
            return Ok(());
        }
    }
    if let Err(e) = txn.commit() {
        errors.push(("commit", e));
    }
    Ok(())
}

/// The page of the main tree whose leaf holds `key`: a descent done by hand on the file.
fn leaf_of(dir: &Path, root: u64, key: &[u8]) -> u64 {
    let mut pgno = root;
    loop {
        let page = peek(dir, pgno * PS, PS as usize);
        let u16_at = |o: usize| u16::from_le_bytes([page[o], page[o + 1]]) as usize;
        if page[10] & 0x02 != 0 {
            return pgno; // LEAF
        }
        assert!(
            page[10] & 0x01 != 0,
            "page {pgno} is neither branch nor leaf"
        );
        let n = (u16_at(12) - 16) / 2;
        // The last node whose key is <= `key` (node 0's key is empty: below all).
        let mut child = 0;
        for i in 0..n {
            let off = u16_at(16 + 2 * i);
            let ksize = u16_at(off + 6);
            if i > 0 && &page[off + 8..off + 8 + ksize] > key {
                break;
            }
            child = u16_at(off) as u64 | (u16_at(off + 2) as u64) << 16;
        }
        pgno = child;
    }
}

/// A writer skips the full check of pages its own handle checked or wrote (see
/// `store/checked.rs`), but only while nobody else committed: after another handle's
/// commit, a page it checked before is checked again when taken over. The damage stands in
/// for what the other writer might have written there; a damaged node the put never
/// reads (a data size running past the page) is caught by the full check alone.
#[test]
fn pages_are_checked_again_after_another_handle_commits() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let env = open(dir.path()).unwrap();
    let other = open(dir.path()).unwrap();
    // This handle rewrites key 0: it checks, then writes, the leaf that holds it.
    let mut txn = env.begin_write().unwrap();
    txn.put(MAIN, &key(0), &[7; 60], 0).unwrap();
    txn.commit().unwrap();
    let root = env.begin_read().unwrap().meta().main_db.root;
    let leaf = leaf_of(dir.path(), root, &key(0));
    // The other handle commits a change to a key in another leaf.
    let far = (1..4000)
        .find(|&i| leaf_of(dir.path(), root, &key(i)) != leaf)
        .unwrap();
    let mut txn = other.begin_write().unwrap();
    txn.put(MAIN, &key(far), &[8; 60], 0).unwrap();
    txn.commit().unwrap();
    let root = env.begin_read().unwrap().meta().main_db.root;
    assert_eq!(
        leaf_of(dir.path(), root, &key(0)),
        leaf,
        "key 0's leaf was rewritten"
    );
    // Damage a node of that leaf other than key 0's, one with its data inline: its data
    // size runs past the page.
    let page = peek(dir.path(), leaf * PS, PS as usize);
    let n = (u16::from_le_bytes([page[12], page[13]]) as usize - 16) / 2;
    let victim = (0..n)
        .map(|i| u16::from_le_bytes([page[16 + 2 * i], page[17 + 2 * i]]) as u64)
        .find(|&off| {
            let off = off as usize;
            let flags = u16::from_le_bytes([page[off + 4], page[off + 5]]);
            let ksize = u16::from_le_bytes([page[off + 6], page[off + 7]]) as usize;
            flags == 0 && page[off + 8..off + 8 + ksize] != key(0)[..]
        })
        .unwrap();
    poke(dir.path(), leaf * PS + victim, &[0xFF, 0xFF, 0x00, 0x00]);
    // This handle takes the leaf over again: the full check runs, and finds it.
    let mut txn = env.begin_write().unwrap();
    let err = txn
        .put(MAIN, &key(0), &[9; 60], 0)
        .expect_err("a page changed by another commit was taken over unchecked");
    assert!(
        matches!(err, Error::Corrupted { pgno, .. } if pgno == leaf),
        "{err}"
    );
}

/// The free DB's records of an environment built by [`build`] and then emptied of half its
/// keys: where each record's IDL (its count, then its page numbers) lies in the file. The
/// free DB of so small a file is one leaf; a large record is on overflow pages.
fn free_records(dir: &Path) -> Vec<u64> {
    let env = open(dir).unwrap();
    let mut txn = env.begin_write().unwrap();
    for i in (0..4000).step_by(2) {
        txn.delete(MAIN, &key(i)).unwrap();
    }
    txn.commit().unwrap();
    // A small commit: the free list now holds the delete's pages under its txn id.
    let mut txn = env.begin_write().unwrap();
    txn.put(MAIN, b"small", b"commit", 0).unwrap();
    txn.commit().unwrap();
    let free_db = env.begin_read().unwrap().meta().free_db;
    drop(env);
    assert_eq!(free_db.depth, 1, "the free DB is one leaf");
    let page = peek(dir, free_db.root * PS, PS as usize);
    let u16_at = |o: usize| u16::from_le_bytes([page[o], page[o + 1]]) as usize;
    let n = (u16_at(12) - 16) / 2;
    (0..n)
        .map(|i| {
            let off = u16_at(16 + 2 * i);
            let data = off + 8 + u16_at(off + 6);
            if u16_at(off + 4) & 0x01 != 0 {
                // F_BIGDATA: the IDL follows the first overflow page's header.
                let run = u64::from_le_bytes(page[data..data + 8].try_into().unwrap());
                run * PS + 16
            } else {
                free_db.root * PS + data as u64
            }
        })
        .collect()
}

/// A free-list record is checked when a write txn takes its pages: one that names a page
/// past the end of the file (its first, the highest), a meta page (its last), or lists
/// its pages out of order is reported as corruption, and none of its pages is handed out.
#[test]
fn free_list_records_that_cannot_be_free_pages_are_corrupted() {
    // Each damage: from the record's count and the file's length in pages, which page
    // number of the record (by index) becomes what (0: one above the first).
    type Damage = fn(usize, u64) -> (usize, u64);
    let damages: [(&str, Damage); 3] = [
        ("past the end", |_, end| (0, end + 5)),
        ("a meta page", |n, _| (n - 1, 1)),
        ("out of order", |n, _| (n / 2, 0)),
    ];
    for (what, damage) in damages {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path());
        let records = free_records(dir.path());
        let file_pages = std::fs::metadata(dir.path().join("data.mdb"))
            .unwrap()
            .len()
            / PS;
        let u64_at = |at: u64| u64::from_le_bytes(peek(dir.path(), at, 8).try_into().unwrap());
        let mut damaged = 0;
        for idl in records {
            let count = u64_at(idl) as usize;
            if count < 3 {
                continue;
            }
            let (i, pgno) = damage(count, file_pages);
            // "Out of order": the middle page becomes higher than the first.
            let pgno = if pgno == 0 { u64_at(idl + 8) + 1 } else { pgno };
            poke(dir.path(), idl + 8 + 8 * i as u64, &pgno.to_le_bytes());
            damaged += 1;
        }
        assert!(damaged > 0, "no record of three pages or more");
        // Writes until the damaged records are taken: every error is corruption.
        let env = open(dir.path()).unwrap();
        let mut seen = None;
        for round in 0..20u32 {
            let mut txn = env.begin_write().unwrap();
            let r = (0..200u32)
                .try_for_each(|i| txn.put(MAIN, &key(10_000 + round * 200 + i), &[1; 60], 0))
                .and_then(|()| txn.commit());
            if let Err(e) = r {
                seen = Some(e);
                break;
            }
        }
        let e = seen.unwrap_or_else(|| panic!("{what}: the damaged records were used"));
        assert!(is_corruption(&e), "{what}: {e:?}");
        if what == "past the end" {
            // Named by the check of the record, not by some later use of the page.
            assert!(
                matches!(e, Error::Corrupted { pgno, .. } if pgno == file_pages + 5),
                "{what}: {e:?}"
            );
        }
    }
}
