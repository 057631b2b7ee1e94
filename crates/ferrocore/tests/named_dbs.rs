//! Named databases: a catalog in the main DB, handles valid in every txn, key flags.

use ferrocore::{db_flags, env_flags, Database, Env, EnvOptions, Error};

mod common;
use common::{open_env, TempEnv};

/// Room for `max_dbs` named DBs, unsynced commits.
fn env_options(max_dbs: u32) -> EnvOptions {
    let mut opts = EnvOptions::new();
    // Strict mode: every commit is followed by a full check.
    opts.strict(true).max_dbs(max_dbs).flags(env_flags::NO_SYNC);
    opts
}

fn open(dir: &std::path::Path, max_dbs: u32) -> Env {
    open_env(dir, &env_options(max_dbs))
}

const CREATE: u32 = db_flags::CREATE;

#[test]
fn named_dbs_persist_with_their_key_order() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = open(dir.path(), 10);
        let mut txn = env.begin_write().unwrap();
        let plain = txn.open_db(Some("plain"), CREATE).unwrap();
        let ints = txn
            .open_db(Some("ints"), CREATE | db_flags::INTEGER_KEY as u32)
            .unwrap();
        let rev = txn
            .open_db(Some("rev"), CREATE | db_flags::REVERSE_KEY as u32)
            .unwrap();
        for i in [300u32, 2, 70_000, 1] {
            txn.put(ints, &i.to_le_bytes(), b"i", 0).unwrap();
        }
        for k in [&b"ab"[..], b"ba", b"ca", b"b"] {
            txn.put(rev, k, b"r", 0).unwrap();
        }
        for i in 0..2000u32 {
            txn.put(plain, &i.to_be_bytes(), &[7u8; 40], 0).unwrap();
        }
        txn.put(Database::MAIN, b"just a key", b"in main", 0)
            .unwrap();
        txn.commit().unwrap();
        assert_eq!(env.check().unwrap().named_dbs, 3);
    }
    let env = open(dir.path(), 10);
    let txn = env.begin_read().unwrap();
    let ints = txn.open_db(Some("ints")).unwrap();
    let rev = txn.open_db(Some("rev")).unwrap();
    let plain = txn.open_db(Some("plain")).unwrap();
    let mut c = txn.cursor(ints).unwrap();
    let mut got = Vec::new();
    let mut item = c.first().unwrap();
    while let Some((k, _)) = item {
        got.push(u32::from_le_bytes(k.try_into().unwrap()));
        item = c.next().unwrap();
    }
    assert_eq!(got, [1, 2, 300, 70_000], "INTEGERKEY orders numerically");
    let mut c = txn.cursor(rev).unwrap();
    let mut got = Vec::new();
    let mut item = c.first().unwrap();
    while let Some((k, _)) = item {
        got.push(k.to_vec());
        item = c.next().unwrap();
    }
    assert_eq!(
        got,
        [
            b"ba".to_vec(),
            b"ca".to_vec(),
            b"b".to_vec(),
            b"ab".to_vec()
        ],
        "REVERSEKEY compares from the end"
    );
    assert_eq!(txn.db_stat(plain).unwrap().entries, 2000);
    assert_eq!(
        txn.get(plain, &5u32.to_be_bytes()).unwrap(),
        Some(&[7u8; 40][..])
    );
    assert_eq!(
        txn.get(Database::MAIN, b"just a key").unwrap(),
        Some(&b"in main"[..])
    );
    // The main DB lists the named DBs' records too, as in LMDB (4 keys).
    assert_eq!(txn.stat().entries, 4);
    txn.check().unwrap();
}

#[test]
fn bad_inputs_give_lmdb_errors() {
    let env = TempEnv::new(&env_options(2));
    let mut txn = env.begin_write().unwrap();
    assert!(matches!(
        txn.open_db(Some("missing"), 0),
        Err(Error::NotFound)
    ));
    let a = txn.open_db(Some("a"), CREATE).unwrap();
    txn.open_db(Some("b"), CREATE).unwrap();
    let e = txn.open_db(Some("c"), CREATE).unwrap_err();
    assert!(matches!(e, Error::DbsFull), "{e}");
    assert_eq!(e.lmdb_code(), -30791);
    assert!(matches!(
        // DUPFIXED without DUPSORT: LMDB accepts it and then loses data; refused here.
        txn.open_db(Some("d"), CREATE | db_flags::DUP_FIXED as u32),
        Err(Error::InvalidArgument(_))
    ));
    txn.put(a, b"k", b"v", 0).unwrap();
    // A named DB's record in the main DB is not plain data: a put over it is refused
    // (with NO_OVERWRITE, KeyExist comes first, as in LMDB).
    let e = txn.put(Database::MAIN, b"a", b"overwrite", 0).unwrap_err();
    assert!(matches!(e, Error::Incompatible), "{e}");
    assert!(matches!(
        txn.put(
            Database::MAIN,
            b"a",
            b"x",
            ferrocore::put_flags::NO_OVERWRITE
        ),
        Err(Error::KeyExist)
    ));
    txn.commit().unwrap();
    // A delete of it through the main DB is refused and, as in LMDB, fails the txn.
    let mut txn = env.begin_write().unwrap();
    assert!(matches!(
        txn.delete(Database::MAIN, b"a"),
        Err(Error::Incompatible)
    ));
    assert!(matches!(txn.put(a, b"k2", b"v", 0), Err(Error::BadTxn)));
    assert!(matches!(txn.commit(), Err(Error::BadTxn)));
    // Reopened with other flags, a DB opens with its own, as in LMDB (the flags given
    // serve only to create one).
    let mut txn = env.begin_write().unwrap();
    let again = txn
        .open_db(Some("a"), db_flags::INTEGER_KEY as u32)
        .unwrap();
    assert_eq!(again, a);
    assert_eq!(txn.db_flags(again).unwrap(), 0);
    assert_eq!(txn.get(again, b"k").unwrap(), Some(&b"v"[..]));
    assert_eq!(txn.get(again, b"k2").unwrap(), None);
    // A plain main-DB key cannot be opened as a DB; but with every handle taken, LMDB
    // answers DbsFull before it looks the name up (the C ABI test checks Incompatible with
    // a handle to spare, on both engines).
    txn.put(Database::MAIN, b"plain", b"x", 0).unwrap();
    assert!(matches!(
        txn.open_db(Some("plain"), CREATE),
        Err(Error::DbsFull)
    ));
    assert!(matches!(
        txn.put(Database::from_dbi(99), b"k", b"v", 0),
        Err(Error::BadDbi)
    ));
    txn.commit().unwrap();
}

#[test]
fn handles_are_valid_in_every_txn() {
    let env = TempEnv::new(&env_options(4));
    let old_reader = env.begin_read().unwrap();
    let mut txn = env.begin_write().unwrap();
    let db = txn.open_db(Some("late"), CREATE).unwrap();
    txn.put(db, b"k", b"v", 0).unwrap();
    txn.commit().unwrap();
    // The reader began before the DB existed: the handle works and the DB reads as empty.
    assert_eq!(old_reader.get(db, b"k").unwrap(), None);
    assert_eq!(old_reader.db_stat(db).unwrap().entries, 0);
    assert!(old_reader.cursor(db).unwrap().first().unwrap().is_none());
    let new_reader = env.begin_read().unwrap();
    assert_eq!(new_reader.get(db, b"k").unwrap(), Some(&b"v"[..]));
    // A handle is private to the txn that opened it until that txn commits (LMDB's rule):
    // other txns meanwhile get BadDbi.
    let mut txn = env.begin_write().unwrap();
    let gone = txn.open_db(Some("gone"), CREATE).unwrap();
    txn.put(gone, b"k", b"v", 0).unwrap();
    assert!(matches!(
        env.begin_read().unwrap().get(gone, b"k"),
        Err(Error::BadDbi)
    ));
    // A DB created by a txn that aborted: as in LMDB, its handle closes with the txn.
    txn.abort();
    assert!(matches!(
        env.begin_read().unwrap().get(gone, b"k"),
        Err(Error::BadDbi)
    ));
    let mut txn = env.begin_write().unwrap();
    assert!(matches!(txn.put(gone, b"k", b"v", 0), Err(Error::BadDbi)));
    // It can be created again; the freed slot is reused, as LMDB does: the same handle.
    assert_eq!(txn.open_db(Some("gone"), CREATE).unwrap(), gone);
    txn.put(gone, b"k", b"again", 0).unwrap();
    txn.commit().unwrap();
    assert_eq!(
        env.begin_read().unwrap().get(gone, b"k").unwrap(),
        Some(&b"again"[..])
    );
    env.check().unwrap();
}

#[test]
fn write_cursor_on_a_named_db() {
    let env = TempEnv::new(&env_options(1));
    let mut txn = env.begin_write().unwrap();
    let db = txn
        .open_db(Some("ints"), CREATE | db_flags::INTEGER_KEY as u32)
        .unwrap();
    {
        let mut c = txn.cursor_mut(db).unwrap();
        for i in (0..500u64).rev() {
            c.put(&i.to_le_bytes(), b"v", 0).unwrap();
        }
        assert_eq!(c.first().unwrap().unwrap().0, &0u64.to_le_bytes());
        c.delete(0).unwrap();
        assert_eq!(c.current().unwrap().unwrap().0, &1u64.to_le_bytes());
    }
    txn.commit().unwrap();
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.db_stat(db).unwrap().entries, 499);
    txn.check().unwrap();
}

fn by_length_then_bytes(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

#[test]
fn custom_comparators_order_keys_and_values() {
    let env = TempEnv::new(&env_options(4));
    let mut txn = env.begin_write().unwrap();
    let keys = txn.open_db(Some("bylen"), CREATE).unwrap();
    let dups = txn
        .open_db(Some("dups"), CREATE | db_flags::DUP_SORT as u32)
        .unwrap();
    env.set_compare(keys, by_length_then_bytes).unwrap();
    env.set_dupsort(dups, by_length_then_bytes).unwrap();
    assert!(matches!(
        env.set_dupsort(keys, by_length_then_bytes),
        Err(Error::Incompatible)
    ));
    for k in [&b"ccc"[..], b"a", b"bb", b"zz", b"b"] {
        txn.put(keys, k, b"v", 0).unwrap();
    }
    for v in 0..300u32 {
        // Values of varying length so the order differs from byte order.
        let value = format!("{}", v * 37 % 1000);
        txn.put(dups, b"k", value.as_bytes(), 0).unwrap();
    }
    txn.commit().unwrap();
    let txn = env.begin_read().unwrap();
    let mut c = txn.cursor(keys).unwrap();
    let mut got = Vec::new();
    let mut item = c.first().unwrap();
    while let Some((k, _)) = item {
        got.push(k.to_vec());
        item = c.next().unwrap();
    }
    assert_eq!(
        got,
        [&b"a"[..], b"b", b"bb", b"zz", b"ccc"].map(<[u8]>::to_vec)
    );
    let mut c = txn.cursor(dups).unwrap();
    let mut prev: Option<Vec<u8>> = None;
    let mut n = 0;
    let mut item = c.set(b"k").unwrap();
    while let Some((_, v)) = item {
        if let Some(p) = &prev {
            assert_eq!(by_length_then_bytes(p, v), std::cmp::Ordering::Less);
        }
        prev = Some(v.to_vec());
        n += 1;
        item = c.next_dup().unwrap();
    }
    assert_eq!(n, 300);
    assert!(c.get_both(b"k", b"37").unwrap().is_some());
    // The checker uses the application's orders too.
    txn.check().unwrap();
}

/// Creates a plain DB "a" and a DUPSORT DB "d".
fn create_a_and_d(txn: &mut ferrocore::WriteTxn<'_>) -> (Database, Database) {
    let a = txn.open_db(Some("a"), CREATE).unwrap();
    let d = txn
        .open_db(Some("d"), CREATE | db_flags::DUP_SORT as u32)
        .unwrap();
    (a, d)
}

#[test]
fn drop_empties_or_deletes_and_close_invalidates() {
    let env = TempEnv::new(&env_options(4));
    let mut txn = env.begin_write().unwrap();
    let (a, d) = create_a_and_d(&mut txn);
    for i in 0..3000u32 {
        txn.put(
            a,
            &i.to_be_bytes(),
            &vec![1u8; if i % 100 == 0 { 5000 } else { 50 }],
            0,
        )
        .unwrap();
        txn.put(d, &(i % 3).to_be_bytes(), &i.to_be_bytes(), 0)
            .unwrap();
    }
    txn.commit().unwrap();
    let before = env.check().unwrap();
    let mut txn = env.begin_write().unwrap();
    txn.drop_db(a, false).unwrap();
    txn.drop_db(d, true).unwrap();
    assert_eq!(txn.db_stat(a).unwrap().entries, 0);
    assert!(matches!(txn.put(d, b"k", b"v", 0), Err(Error::BadDbi)));
    txn.put(a, b"again", b"1", 0).unwrap();
    txn.commit().unwrap();
    // Every page of both DBs (overflow runs and sub-DBs included) went back to the free list.
    let after = env.check().unwrap();
    assert!(
        after.free_pages > before.free_pages + 100,
        "{before:?} -> {after:?}"
    );
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.db_stat(a).unwrap().entries, 1);
    assert!(matches!(txn.open_db(Some("d")), Err(Error::NotFound)));
    drop(txn);
    env.close_db(a).unwrap();
    assert!(matches!(
        env.begin_read().unwrap().get(a, b"again"),
        Err(Error::BadDbi)
    ));
    // Reopening by name gives a working handle again.
    let txn = env.begin_read().unwrap();
    let a2 = txn.open_db(Some("a")).unwrap();
    assert_eq!(txn.get(a2, b"again").unwrap(), Some(&b"1"[..]));
}

/// Read txns find named-DB records through a cache shared by the environment; each must
/// still see the version of its own snapshot.
#[test]
fn every_snapshot_sees_its_own_version_of_a_named_db() {
    let dir = tempfile::tempdir().unwrap();
    let check_versions = |env: &Env, db: Database, readers: &[(ferrocore::ReadTxn<'_>, u32)]| {
        for (txn, version) in readers {
            assert_eq!(
                txn.db_stat(db).unwrap().entries,
                *version as u64,
                "snapshot {}",
                txn.id()
            );
            let expected = (*version > 0).then(|| (version - 1).to_be_bytes());
            assert_eq!(
                txn.get(db, b"last").unwrap(),
                expected.as_ref().map(|v| &v[..])
            );
        }
        let _ = env;
    };
    {
        let env = open(dir.path(), 3);
        let db = {
            let mut txn = env.begin_write().unwrap();
            let db = txn.open_db(Some("versions"), CREATE).unwrap();
            txn.commit().unwrap();
            db
        };
        let mut readers = vec![(env.begin_read().unwrap(), 0u32)];
        for version in 1..=5u32 {
            let mut txn = env.begin_write().unwrap();
            txn.put(db, &version.to_be_bytes(), b"x", 0).unwrap();
            txn.put(db, b"last", &(version - 1).to_be_bytes(), 0)
                .unwrap();
            // "last" counts as one of the entries: keep entries == version.
            if version == 1 {
                txn.delete(db, &1u32.to_be_bytes()).unwrap();
            }
            txn.commit().unwrap();
            readers.push((env.begin_read().unwrap(), version));
            // Readers opened earlier are asked again after every commit.
            check_versions(&env, db, &readers);
        }
    }
    // A fresh environment starts with an empty cache: readers fill it.
    let env = open(dir.path(), 3);
    // The handle is opened by a read txn that ends: from then on every txn may use it.
    let db = env.begin_read().unwrap().open_db(Some("versions")).unwrap();
    let r1 = env.begin_read().unwrap();
    assert_eq!(r1.db_stat(db).unwrap().entries, 5);
    let mut txn = env.begin_write().unwrap();
    txn.put(db, b"new", b"y", 0).unwrap();
    txn.commit().unwrap();
    let r2 = env.begin_read().unwrap();
    assert_eq!(r2.db_stat(db).unwrap().entries, 6);
    assert_eq!(r1.db_stat(db).unwrap().entries, 5);
    let r3 = env.begin_read().unwrap();
    assert_eq!(r3.get(db, b"new").unwrap(), Some(&b"y"[..]));
    // Deleting the DB: later snapshots see it empty (the handle is closed by the delete).
    let mut txn = env.begin_write().unwrap();
    txn.drop_db(db, true).unwrap();
    txn.commit().unwrap();
    // As in LMDB, the deleted DB's handle is closed, in every txn.
    assert!(matches!(
        env.begin_read().unwrap().get(db, b"new"),
        Err(Error::BadDbi)
    ));
    assert!(matches!(r3.db_stat(db), Err(Error::BadDbi)));
    // An older snapshot still has the DB, under a new handle.
    let again = r3.open_db(Some("versions")).unwrap();
    assert_eq!(
        r3.db_stat(again).unwrap().entries,
        6,
        "an older snapshot keeps its version"
    );
    assert!(matches!(
        env.begin_read().unwrap().open_db(Some("versions")),
        Err(Error::NotFound)
    ));
}

/// A handle closed and reused for another DB inside one txn (what `mdb_dump -a` and
/// `mdb_stat -a` do: open, read, close, for each DB): the txn must read the DB the handle
/// names now, never the record it cached for the DB it named before.
#[test]
fn a_reused_handle_reads_its_new_db_in_the_same_txn() {
    let env = TempEnv::new(&env_options(4));
    let mut txn = env.begin_write().unwrap();
    let a = txn
        .open_db(Some("a"), CREATE | db_flags::DUP_SORT as u32)
        .unwrap();
    let b = txn.open_db(Some("b"), CREATE).unwrap();
    for v in [&b"v1"[..], b"v2", b"v3"] {
        txn.put(a, b"k", v, 0).unwrap();
    }
    txn.put(b, b"x", b"y", 0).unwrap();
    txn.commit().unwrap();
    env.close_db(a).unwrap();
    env.close_db(b).unwrap();

    // A read txn: open "a", read it, close it, then open "b" under the same number.
    let txn = env.begin_read().unwrap();
    let first = txn.open_db(Some("a")).unwrap();
    assert_eq!(txn.db_stat(first).unwrap().entries, 3);
    assert_eq!(txn.get(first, b"k").unwrap(), Some(&b"v1"[..]));
    env.close_db(first).unwrap();
    let second = txn.open_db(Some("b")).unwrap();
    assert_eq!(second, first, "the handle number is reused");
    assert_eq!(txn.db_stat(second).unwrap().entries, 1);
    assert_eq!(txn.db_flags(second).unwrap() & db_flags::DUP_SORT, 0);
    assert_eq!(txn.get(second, b"x").unwrap(), Some(&b"y"[..]));
    drop(txn);
    env.close_db(second).unwrap();

    // The same in a write txn, whose changes to the reused handle's DB must land in it.
    let mut txn = env.begin_write().unwrap();
    let first = txn.open_db(Some("a"), 0).unwrap();
    assert_eq!(txn.db_stat(first).unwrap().entries, 3);
    env.close_db(first).unwrap();
    let second = txn.open_db(Some("b"), 0).unwrap();
    assert_eq!(second, first);
    assert_eq!(txn.get(second, b"x").unwrap(), Some(&b"y"[..]));
    txn.put(second, b"x2", b"y2", 0).unwrap();
    txn.commit().unwrap();
    let txn = env.begin_read().unwrap();
    let b = txn.open_db(Some("b")).unwrap();
    assert_eq!(txn.db_stat(b).unwrap().entries, 2);
    env.close_db(b).unwrap();
    let a = txn.open_db(Some("a")).unwrap();
    assert_eq!(txn.db_stat(a).unwrap().entries, 3);
    txn.check().unwrap();
    drop(txn);
    env.close_db(a).unwrap();

    // A write txn changes "a", its handle is closed and reused for "b", which it changes
    // too: both changes are committed, each to its own DB.
    let mut txn = env.begin_write().unwrap();
    let first = txn.open_db(Some("a"), 0).unwrap();
    txn.put(first, b"k", b"v4", 0).unwrap();
    env.close_db(first).unwrap();
    let second = txn.open_db(Some("b"), 0).unwrap();
    assert_eq!(second, first);
    txn.put(second, b"x3", b"y3", 0).unwrap();
    assert_eq!(txn.db_stat(second).unwrap().entries, 3);
    txn.commit().unwrap();
    let txn = env.begin_read().unwrap();
    let b = txn.open_db(Some("b")).unwrap();
    assert_eq!(txn.db_stat(b).unwrap().entries, 3);
    env.close_db(b).unwrap();
    let a = txn.open_db(Some("a")).unwrap();
    assert_eq!(txn.db_stat(a).unwrap().entries, 4);
    assert_eq!(
        txn.db_flags(a).unwrap() & db_flags::DUP_SORT,
        db_flags::DUP_SORT
    );
    txn.check().unwrap();
}

/// Dropping the main DB drops the named DBs in it, records and pages: the file then checks
/// clean (strict mode checks every commit: no page leaked), and the names are gone.
#[test]
fn dropping_the_main_db_drops_its_named_dbs() {
    let env = TempEnv::new(&env_options(4));
    let mut txn = env.begin_write().unwrap();
    let (a, d) = create_a_and_d(&mut txn);
    for i in 0..2000u32 {
        txn.put(a, &i.to_be_bytes(), &[7u8; 100], 0).unwrap();
        txn.put(d, b"k", &i.to_be_bytes(), 0).unwrap();
    }
    txn.put(Database::MAIN, b"plain", b"x", 0).unwrap();
    txn.commit().unwrap();
    let mut txn = env.begin_write().unwrap();
    txn.drop_db(Database::MAIN, false).unwrap();
    assert_eq!(txn.stat().entries, 0);
    txn.commit().unwrap();
    // Every page is in a tree or the free list (a leaked one fails the check).
    env.check().unwrap();
    let mut txn = env.begin_write().unwrap();
    assert!(matches!(txn.open_db(Some("a"), 0), Err(Error::NotFound)));
    assert!(matches!(txn.open_db(Some("d"), 0), Err(Error::NotFound)));
}
