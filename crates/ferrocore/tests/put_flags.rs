//! Put flags beyond the basics: RESERVE, CURRENT, APPEND/APPENDDUP on DUPSORT, and the
//! errors LMDB gives for the rest.

use ferrocore::{db_flags, env_flags, put_flags, Database, EnvOptions, Error};

mod common;
use common::TempEnv;

/// Room for a few named DBs, unsynced commits.
fn env_options() -> EnvOptions {
    let mut opts = EnvOptions::new();
    opts.max_dbs(4).flags(env_flags::NO_SYNC);
    opts
}

/// An environment of [`env_options`] that checks every commit whole (strict mode).
fn strict_env() -> TempEnv {
    let mut opts = env_options();
    opts.strict(true);
    TempEnv::new(&opts)
}

const MAIN: Database = Database::MAIN;

#[test]
fn reserve_hands_back_the_value_to_fill() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    for (key, len) in [(&b"small"[..], 100usize), (b"big", 50_000), (b"empty", 0)] {
        let slot = txn.put_reserve(MAIN, key, len, 0).unwrap();
        assert_eq!(slot.len(), len);
        assert!(slot.iter().all(|&b| b == 0));
        for (i, b) in slot.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
    }
    // Reserving again over an existing key gives a fresh, zeroed slot.
    let again = txn.put_reserve(MAIN, b"small", 100, 0).unwrap();
    assert!(again.iter().all(|&b| b == 0));
    again[0] = 0xEE;
    assert!(matches!(
        txn.put_reserve(MAIN, b"big", 10, put_flags::NO_OVERWRITE),
        Err(Error::KeyExist)
    ));
    let dups = txn
        .open_db(Some("d"), db_flags::CREATE | db_flags::DUP_SORT as u32)
        .unwrap();
    assert!(matches!(
        txn.put_reserve(dups, b"k", 4, 0),
        Err(Error::Incompatible)
    ));
    txn.commit().unwrap();
    let txn = env.begin_read().unwrap();
    let expect = |len: usize| (0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>();
    let mut small = [0u8; 100];
    small[0] = 0xEE;
    assert_eq!(txn.get(MAIN, b"small").unwrap(), Some(&small[..]));
    assert_eq!(txn.get(MAIN, b"big").unwrap(), Some(&expect(50_000)[..]));
    assert_eq!(txn.get(MAIN, b"empty").unwrap(), Some(&b""[..]));
    txn.check().unwrap();
}

#[test]
fn current_replaces_the_item_at_the_cursor() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    let dups = txn
        .open_db(Some("d"), db_flags::CREATE | db_flags::DUP_SORT as u32)
        .unwrap();
    for v in [&b"b"[..], b"d", b"f"] {
        txn.put(dups, b"k", v, 0).unwrap();
    }
    txn.put(MAIN, b"a", b"1", 0).unwrap();
    {
        let mut c = txn.cursor_mut(MAIN).unwrap();
        c.set(b"a").unwrap();
        c.put(b"a", b"replaced", put_flags::CURRENT).unwrap();
        // As LMDB: the item at the cursor is replaced; the key given is not checked.
        c.put(b"zz", b"replaced", put_flags::CURRENT).unwrap();
        assert_eq!(c.current().unwrap(), Some((&b"a"[..], &b"replaced"[..])));
    }
    {
        let mut c = txn.cursor_mut(dups).unwrap();
        c.get_both(b"k", b"d").unwrap().unwrap();
        c.put(b"k", b"e", put_flags::CURRENT).unwrap();
        assert_eq!(c.current().unwrap().unwrap().1, b"e");
        assert_eq!(c.count().unwrap(), 3);
    }
    assert_eq!(txn.get(MAIN, b"a").unwrap(), Some(&b"replaced"[..]));
    let mut c = txn.cursor(dups).unwrap();
    let mut got = vec![c.set(b"k").unwrap().unwrap().1.to_vec()];
    while let Some((_, v)) = c.next_dup().unwrap() {
        got.push(v.to_vec());
    }
    assert_eq!(got, [b"b".to_vec(), b"e".to_vec(), b"f".to_vec()]);
}

#[test]
fn append_and_appenddup_on_dupsort() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    let dups = txn
        .open_db(Some("d"), db_flags::CREATE | db_flags::DUP_SORT as u32)
        .unwrap();
    for k in 0..50u32 {
        txn.put(dups, &k.to_be_bytes(), b"a", put_flags::APPEND)
            .unwrap();
        for v in 1..20u8 {
            txn.put(dups, &k.to_be_bytes(), &[b'a', v], put_flags::APPEND_DUP)
                .unwrap();
        }
        assert!(matches!(
            txn.put(dups, &k.to_be_bytes(), b"a\x05", put_flags::APPEND_DUP),
            Err(Error::KeyExist)
        ));
    }
    // APPEND with the last key again, or an earlier key: out of order.
    assert!(matches!(
        txn.put(dups, &49u32.to_be_bytes(), b"z", put_flags::APPEND),
        Err(Error::KeyExist)
    ));
    assert!(matches!(
        txn.put(dups, &3u32.to_be_bytes(), b"z", put_flags::APPEND),
        Err(Error::KeyExist)
    ));
    assert_eq!(txn.db_stat(dups).unwrap().entries, 50 * 20);
    txn.commit().unwrap();
    env.check().unwrap();
}

#[test]
fn duplicate_sizes_and_unsupported_flags() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    let dups = txn
        .open_db(Some("d"), db_flags::CREATE | db_flags::DUP_SORT as u32)
        .unwrap();
    txn.put(dups, b"k", &[7u8; 511], 0).unwrap();
    let e = txn.put(dups, b"k", &[7u8; 512], 0).unwrap_err();
    assert!(matches!(e, Error::BadValSize { size: 512, .. }), "{e}");
    assert_eq!(e.lmdb_code(), -30781);
    assert!(matches!(
        txn.put(dups, b"k", b"", 0),
        Err(Error::BadValSize { size: 0, .. })
    ));
    assert!(matches!(
        txn.put(MAIN, b"k", b"v", put_flags::MULTIPLE),
        Err(Error::InvalidArgument(_))
    ));
    // As LMDB: without DUPSORT, NO_DUP_DATA and APPEND_DUP are ignored.
    txn.put(MAIN, b"k", b"v", put_flags::NO_DUP_DATA).unwrap();
    txn.put(MAIN, b"k", b"w", put_flags::APPEND_DUP).unwrap();
    assert_eq!(txn.get(MAIN, b"k").unwrap(), Some(&b"w"[..]));
    assert!(matches!(
        txn.put(MAIN, b"k", b"v", 0x8000_0000),
        Err(Error::InvalidArgument("unknown put flag"))
    ));
    // Each refused flag says what to use instead, alone or with an accepted one.
    for (flags, says) in [
        (put_flags::MULTIPLE, "WriteCursor::put_multiple"),
        (
            put_flags::MULTIPLE | put_flags::NO_OVERWRITE,
            "WriteCursor::put_multiple",
        ),
        (put_flags::CURRENT, "CURRENT is a cursor put flag"),
        (put_flags::RESERVE | put_flags::APPEND, "put_reserve"),
        (0x8000_0000 | put_flags::NO_DUP_DATA, "unknown put flag"),
    ] {
        match txn.put(MAIN, b"k", b"v", flags) {
            Err(Error::InvalidArgument(message)) => {
                assert!(message.contains(says), "flags {flags:#x}: {message}");
            }
            other => panic!("flags {flags:#x}: {other:?}"),
        }
    }
    // None of these poisoned the txn.
    txn.put(MAIN, b"k", b"v", 0).unwrap();
    txn.commit().unwrap();
}

/// A sorted load's APPEND puts go straight into the leaf the last one used while nothing
/// else touched that DB (`AppendHint`). Interleaved with APPEND puts into another DB,
/// plain puts and deletes in the same DB, values that go to overflow pages, keys out of
/// order and nested txns that commit or abort, every txn's result matches a model, and
/// every committed snapshot checks whole (strict mode).
#[test]
fn append_puts_between_other_changes_match_a_model() {
    use std::collections::BTreeMap;
    let env = strict_env();
    let mut rng = common::Rng(0xA99E);
    type Model = [BTreeMap<Vec<u8>, Vec<u8>>; 2];
    let mut model: Model = Default::default();
    let mut next = [0u32; 2];
    let mut txn = env.begin_write().unwrap();
    let named = txn.open_db(Some("sorted"), db_flags::CREATE).unwrap();
    txn.commit().unwrap();
    let dbs = [MAIN, named];
    // After the named DB's record ("sorted") in the main DB.
    let key = |n: u32| format!("z{n:08}").into_bytes();
    let value = |rng: &mut common::Rng| {
        let len = match rng.below(20) {
            0 => 3000 + rng.below(6000), // an overflow run
            1 => 0,
            _ => 1 + rng.below(120),
        };
        vec![rng.below(256) as u8; len]
    };
    for round in 0..40 {
        let mut txn = env.begin_write().unwrap();
        let mut level: Option<(ferrocore::NestedLevel, Model, [u32; 2])> = None;
        for _ in 0..400 {
            let d = usize::from(rng.below(4) == 0);
            match rng.below(40) {
                0 if level.is_none() => {
                    level = Some((txn.begin_nested_level().unwrap(), model.clone(), next));
                }
                1 => {
                    if let Some((l, saved, saved_next)) = level.take() {
                        if rng.below(2) == 0 {
                            txn.commit_nested_level(l).unwrap();
                        } else {
                            txn.abort_nested_level(l);
                            (model, next) = (saved, saved_next);
                        }
                    }
                }
                2..=4 => {
                    // A plain put of an earlier key, anywhere in the tree.
                    let k = key(rng.below(next[d] as usize + 1) as u32);
                    let v = value(&mut rng);
                    txn.put(dbs[d], &k, &v, 0).unwrap();
                    model[d].insert(k, v);
                }
                5..=6 => {
                    // A delete: of the last key, or of any.
                    let k = if rng.below(2) == 0 {
                        model[d].keys().next_back().cloned()
                    } else {
                        Some(key(rng.below(next[d] as usize + 1) as u32))
                    };
                    if let Some(k) = k {
                        let had = model[d].remove(&k).is_some();
                        assert_eq!(txn.delete(dbs[d], &k).unwrap(), had);
                    }
                }
                7 => {
                    // Out of order: the last key again.
                    if let Some(k) = model[d].keys().next_back().cloned() {
                        assert!(matches!(
                            txn.put(dbs[d], &k, b"x", put_flags::APPEND),
                            Err(Error::KeyExist)
                        ));
                    }
                }
                _ => {
                    next[d] += 1 + rng.below(3) as u32;
                    let (k, v) = (key(next[d]), value(&mut rng));
                    txn.put(dbs[d], &k, &v, put_flags::APPEND).unwrap();
                    model[d].insert(k, v);
                }
            }
        }
        if let Some((l, _, _)) = level.take() {
            txn.commit_nested_level(l).unwrap();
        }
        txn.commit().unwrap();
        let read = env.begin_read().unwrap();
        for (d, db) in dbs.iter().enumerate() {
            let mut cursor = read.cursor(*db).unwrap();
            let mut got = BTreeMap::new();
            while let Some((k, v)) = cursor.next().unwrap() {
                if *db == MAIN && k == b"sorted" {
                    continue; // the named DB's record
                }
                got.insert(k.to_vec(), v.to_vec());
            }
            assert!(got == model[d], "round {round}, DB {d}: contents differ");
        }
    }
}

/// A sorted load into the main DB while named DBs are created in the same txn: each new
/// DB's record goes into the main DB after the loaded keys, into the leaf the last APPEND
/// put left its hint on, without a write through that put's path, and sometimes splits
/// that leaf. The next APPEND must then go into the new last leaf (the hint is checked
/// against the DB's record), never after the old leaf's last key: the keys stay in
/// order, and the file checks whole.
#[test]
fn append_after_a_new_named_db_in_the_last_leaf() {
    let mut opts = env_options();
    opts.max_dbs(300).strict(true);
    let env = TempEnv::new(&opts);
    let mut want = Vec::new();
    let mut txn = env.begin_write().unwrap();
    for round in 0..200u32 {
        for i in 0..=round % 37 {
            let key = format!("k{round:04}{i:04}").into_bytes();
            txn.put(MAIN, &key, &[round as u8; 100], put_flags::APPEND)
                .unwrap();
            want.push(key);
        }
        // After this round's keys, before the next round's.
        let name = format!("k{round:04}zz");
        txn.open_db(Some(&name), db_flags::CREATE).unwrap();
        want.push(name.into_bytes());
    }
    txn.commit().unwrap();
    let txn = env.begin_read().unwrap();
    let mut cursor = txn.cursor(MAIN).unwrap();
    let mut got = Vec::new();
    while let Some((key, _)) = cursor.next().unwrap() {
        got.push(key.to_vec());
    }
    assert_eq!(got, want);
    env.check().unwrap();
}

/// DUPSORT and DUPFIXED sets that take their values one put at a time, keys interleaved,
/// so that their sub-pages grow where they are while their leaf has the room and are
/// rebuilt by a split when it has not, until they become sub-DBs: every value is found
/// in order, and the file checks whole (strict mode).
#[test]
fn sets_growing_one_value_at_a_time_match_a_model() {
    use std::collections::{BTreeMap, BTreeSet};
    let env = strict_env();
    // DUPFIXED values of 4 bytes, and of 3 (odd: a sub-page growing by one value leaves a
    // spare byte).
    let cases = [
        (db_flags::DUP_SORT, 4),
        (db_flags::DUP_SORT | db_flags::DUP_FIXED, 4),
        (db_flags::DUP_SORT | db_flags::DUP_FIXED, 3),
    ];
    for (flags, size) in cases {
        let mut model: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>> = BTreeMap::new();
        let mut txn = env.begin_write().unwrap();
        let name = format!("sets{flags}-{size}");
        let db = txn
            .open_db(Some(&name), u32::from(flags) | db_flags::CREATE)
            .unwrap();
        for i in 0..20_000u32 {
            let key = format!("key{:03}", i % 97).into_bytes();
            let value =
                (i.wrapping_mul(2_654_435_761) % 1_000_003).to_be_bytes()[4 - size..].to_vec();
            txn.put(db, &key, &value, 0).unwrap();
            model.entry(key).or_default().insert(value);
        }
        txn.commit().unwrap();
        let txn = env.begin_read().unwrap();
        let mut cursor = txn.cursor(db).unwrap();
        let mut got: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
        while let Some((key, value)) = cursor.next().unwrap() {
            got.entry(key.to_vec()).or_default().push(value.to_vec());
        }
        let want: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = model
            .into_iter()
            .map(|(k, vs)| (k, vs.into_iter().collect()))
            .collect();
        assert_eq!(got, want, "flags {flags:#x}, values of {size} bytes");
    }
    env.check().unwrap();
}
