//! DUPSORT model test: random operations on a DUPSORT DB against a map of sorted sets,
//! checking every answer and the invariants (including sub-pages and sub-DBs) after each
//! commit. Few keys and many values per key, so value sets grow from a single value to a
//! sub-page to a sub-DB and shrink again.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use ferrocore::{db_flags, env_flags, put_flags, Database, EnvOptions, Error, WriteTxn};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

type Model = BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>;

#[derive(Clone, Debug)]
enum Op {
    Put {
        key: u8,
        value: u16,
        no_dup_data: bool,
        no_overwrite: bool,
    },
    DeleteKey {
        key: u8,
    },
    DeletePair {
        key: u8,
        value: u16,
    },
    Get {
        key: u8,
    },
    Scan {
        backward: bool,
    },
    WalkDups {
        key: u8,
    },
    GetBoth {
        key: u8,
        value: u16,
        range: bool,
    },
    CursorDelete {
        key: u8,
        value: u16,
        all: bool,
    },
    NoDupWalk {
        backward: bool,
    },
    Multiple {
        key: u8,
    },
    Commit,
    Abort,
}

fn key_bytes(k: u8) -> Vec<u8> {
    format!("key{:03}", k).into_bytes()
}

/// Values: for DUPFIXED 8 bytes each; otherwise of varied length. Either way they sort
/// differently from their numbers.
fn value_bytes(v: u16, fixed: bool) -> Vec<u8> {
    if fixed {
        return (v as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .to_le_bytes()
            .to_vec();
    }
    let len = 1 + (v as usize * 7) % 60 + if v.is_multiple_of(50) { 400 } else { 0 };
    let mut out = Vec::with_capacity(len);
    let mut x = (v as u32).wrapping_mul(2_654_435_761) | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.push((x >> 24) as u8);
    }
    out
}

fn op(keys: u8) -> impl Strategy<Value = Op> {
    let key = 0..keys;
    let value = 0u16..2000;
    prop_oneof![
        40 => (key.clone(), value.clone(), proptest::bool::weighted(0.2), proptest::bool::weighted(0.05))
            .prop_map(|(key, value, no_dup_data, no_overwrite)| Op::Put { key, value, no_dup_data, no_overwrite }),
        2 => key.clone().prop_map(|key| Op::DeleteKey { key }),
        12 => (key.clone(), value.clone()).prop_map(|(key, value)| Op::DeletePair { key, value }),
        4 => key.clone().prop_map(|key| Op::Get { key }),
        2 => any::<bool>().prop_map(|backward| Op::Scan { backward }),
        3 => key.clone().prop_map(|key| Op::WalkDups { key }),
        4 => (key.clone(), value.clone(), any::<bool>()).prop_map(|(key, value, range)| Op::GetBoth { key, value, range }),
        4 => (key.clone(), value, proptest::bool::weighted(0.2)).prop_map(|(key, value, all)| Op::CursorDelete { key, value, all }),
        1 => any::<bool>().prop_map(|backward| Op::NoDupWalk { backward }),
        2 => key.clone().prop_map(|key| Op::Multiple { key }),
        5 => Just(Op::Commit),
        1 => Just(Op::Abort),
    ]
}

fn pairs(model: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .flat_map(|(k, vs)| vs.iter().map(move |v| (k.clone(), v.clone())))
        .collect()
}

fn check_scan(txn: &WriteTxn<'_>, db: Database, model: &Model, backward: bool) {
    let mut c = txn.cursor(db).unwrap();
    let mut got = Vec::new();
    let mut item = if backward { c.last() } else { c.first() }.unwrap();
    while let Some((k, v)) = item {
        got.push((k.to_vec(), v.to_vec()));
        item = if backward { c.prev() } else { c.next() }.unwrap();
    }
    if backward {
        got.reverse();
    }
    assert!(
        got == pairs(model),
        "scan differs from the model ({} vs {} pairs)",
        got.len(),
        pairs(model).len()
    );
    let entries: usize = model.values().map(BTreeSet::len).sum();
    assert_eq!(txn.db_stat(db).unwrap().entries, entries as u64);
}

/// Runs `ops`; returns the largest node a value set seen by `WalkDups` would need as a
/// sub-page (so tests can tell that sub-DBs were exercised).
fn run(ops: &[Op], fixed: bool) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: the test owns the directory.
    let env = unsafe {
        EnvOptions::new()
            .max_dbs(2)
            .flags(env_flags::NO_SYNC)
            .open(dir.path())
            .unwrap()
    };
    let db = {
        let mut txn = env.begin_write().unwrap();
        let flags = if fixed {
            db_flags::DUP_SORT | db_flags::DUP_FIXED
        } else {
            db_flags::DUP_SORT
        };
        let db = txn
            .open_db(Some("dups"), db_flags::CREATE | flags as u32)
            .unwrap();
        txn.commit().unwrap();
        db
    };
    let mut committed = Model::new();
    let mut writer: Option<(WriteTxn<'_>, Model)> = None;
    let mut max_dups = 0;
    for op in ops {
        let (txn, model) =
            writer.get_or_insert_with(|| (env.begin_write().unwrap(), committed.clone()));
        match op {
            Op::Put {
                key,
                value,
                no_dup_data,
                no_overwrite,
            } => {
                let (k, v) = (key_bytes(*key), value_bytes(*value, fixed));
                let mut flags = 0;
                if *no_dup_data {
                    flags |= put_flags::NO_DUP_DATA;
                }
                if *no_overwrite {
                    flags |= put_flags::NO_OVERWRITE;
                }
                let exists_key = model.contains_key(&k);
                let exists_pair = model.get(&k).is_some_and(|s| s.contains(&v));
                match txn.put(db, &k, &v, flags) {
                    Ok(()) => {
                        assert!(
                            !(*no_overwrite && exists_key),
                            "NO_OVERWRITE added to an existing key"
                        );
                        assert!(
                            !(*no_dup_data && exists_pair),
                            "NO_DUP_DATA accepted an existing pair"
                        );
                        model.entry(k).or_default().insert(v);
                    }
                    Err(Error::KeyExist) => {
                        assert!((*no_overwrite && exists_key) || (*no_dup_data && exists_pair))
                    }
                    Err(e) => panic!("put: {e}"),
                }
            }
            Op::DeleteKey { key } => {
                let k = key_bytes(*key);
                assert_eq!(txn.delete(db, &k).unwrap(), model.remove(&k).is_some());
            }
            Op::DeletePair { key, value } => {
                let (k, v) = (key_bytes(*key), value_bytes(*value, fixed));
                let expected = model.get_mut(&k).is_some_and(|s| s.remove(&v));
                if model.get(&k).is_some_and(BTreeSet::is_empty) {
                    model.remove(&k);
                }
                assert_eq!(txn.delete_value(db, &k, Some(&v)).unwrap(), expected);
            }
            Op::Get { key } => {
                let k = key_bytes(*key);
                let want = model
                    .get(&k)
                    .and_then(|s| s.iter().next())
                    .map(Vec::as_slice);
                assert_eq!(txn.get(db, &k).unwrap(), want);
            }
            Op::Scan { backward } => check_scan(txn, db, model, *backward),
            Op::WalkDups { key } => {
                let k = key_bytes(*key);
                let mut c = txn.cursor(db).unwrap();
                let Some(set) = model.get(&k) else {
                    assert!(c.set(&k).unwrap().is_none());
                    continue;
                };
                assert_eq!(
                    c.set(&k).unwrap().map(|(_, v)| v.to_vec()).as_ref(),
                    set.iter().next()
                );
                assert_eq!(c.count().unwrap(), set.len() as u64);
                let mut got = vec![c.current().unwrap().unwrap().1.to_vec()];
                while let Some((kk, v)) = c.next_dup().unwrap() {
                    assert_eq!(kk, &k[..]);
                    got.push(v.to_vec());
                }
                assert!(
                    got.iter().eq(set.iter()),
                    "NEXT_DUP walk: {} values, model {}, first difference at {:?}",
                    got.len(),
                    set.len(),
                    got.iter().zip(set.iter()).position(|(a, b)| a != b)
                );
                assert_eq!(
                    c.last_dup().unwrap().unwrap().1,
                    &set.iter().next_back().unwrap()[..]
                );
                let mut back = vec![c.current().unwrap().unwrap().1.to_vec()];
                while let Some((_, v)) = c.prev_dup().unwrap() {
                    back.push(v.to_vec());
                }
                assert!(back.iter().eq(set.iter().rev()), "PREV_DUP walk");
                assert_eq!(
                    c.first_dup().unwrap().unwrap().1,
                    &set.iter().next().unwrap()[..]
                );
                // Bytes this set would take as a sub-page in its node (LMDB's layout).
                let sub_page: usize = if fixed {
                    16 + set.len() * 8
                } else {
                    16 + set
                        .iter()
                        .map(|v| 2 + (8 + v.len()).next_multiple_of(2))
                        .sum::<usize>()
                };
                max_dups = max_dups.max((8 + k.len() + sub_page) as u64);
            }
            Op::GetBoth { key, value, range } => {
                let (k, v) = (key_bytes(*key), value_bytes(*value, fixed));
                let mut c = txn.cursor(db).unwrap();
                let got = if *range {
                    c.get_both_range(&k, &v)
                } else {
                    c.get_both(&k, &v)
                }
                .unwrap()
                .map(|(a, b)| (a.to_vec(), b.to_vec()));
                let want = model.get(&k).and_then(|s| {
                    if *range {
                        s.range::<Vec<u8>, _>((Bound::Included(&v), Bound::Unbounded))
                            .next()
                            .cloned()
                    } else {
                        s.get(&v).cloned()
                    }
                });
                assert_eq!(got, want.map(|w| (k.clone(), w)));
            }
            Op::CursorDelete { key, value, all } => {
                let (k, v) = (key_bytes(*key), value_bytes(*value, fixed));
                let mut c = txn.cursor_mut(db).unwrap();
                let Some((ck, cv)) = c
                    .set_range(&k)
                    .unwrap()
                    .map(|(a, b)| (a.to_vec(), b.to_vec()))
                else {
                    continue;
                };
                // Move to the first value >= v of that key when there is one.
                let (ck, cv) = match c.get_both_range(&ck, &v).unwrap() {
                    Some((a, b)) => (a.to_vec(), b.to_vec()),
                    None => {
                        c.set(&ck).unwrap();
                        (ck, cv)
                    }
                };
                c.delete(if *all { put_flags::NO_DUP_DATA } else { 0 })
                    .unwrap();
                let set = model.get_mut(&ck).unwrap();
                if *all {
                    set.clear();
                } else {
                    assert!(set.remove(&cv));
                }
                if set.is_empty() {
                    model.remove(&ck);
                }
                // The cursor stands on the pair that followed.
                let succ = pairs(model)
                    .into_iter()
                    .find(|(a, b)| (a, b) > (&ck, &cv) && (!*all || a > &ck));
                assert_eq!(
                    c.next().unwrap().map(|(a, b)| (a.to_vec(), b.to_vec())),
                    succ
                );
            }
            Op::NoDupWalk { backward } => {
                let mut c = txn.cursor(db).unwrap();
                let mut keys = Vec::new();
                let mut item = if *backward { c.last() } else { c.first() }.unwrap();
                while let Some((k, v)) = item {
                    let set = &model[k];
                    let expected = if *backward {
                        set.iter().next_back()
                    } else {
                        set.iter().next()
                    };
                    assert_eq!(
                        Some(&v.to_vec()),
                        expected,
                        "NODUP moves land on the first (last) value"
                    );
                    keys.push(k.to_vec());
                    item = if *backward {
                        c.prev_nodup()
                    } else {
                        c.next_nodup()
                    }
                    .unwrap();
                }
                if *backward {
                    keys.reverse();
                }
                assert!(keys.iter().eq(model.keys()));
            }
            Op::Multiple { key } => {
                let k = key_bytes(*key);
                let mut c = txn.cursor(db).unwrap();
                let Some(set) = model.get(&k) else { continue };
                c.set(&k).unwrap().unwrap();
                if !fixed {
                    assert!(matches!(
                        c.get_multiple(),
                        Err(Error::Incompatible) | Ok(Some(_))
                    ));
                    continue;
                }
                let mut packed = c.get_multiple().unwrap().unwrap().to_vec();
                while let Some(more) = c.next_multiple().unwrap() {
                    packed.extend_from_slice(more);
                }
                let want: Vec<u8> = set.iter().flatten().copied().collect();
                assert!(
                    packed == want,
                    "GET_MULTIPLE + NEXT_MULTIPLE give every value in order"
                );
                // PREV_MULTIPLE walks back over the pages of a sub-DB.
                let mut back = Vec::new();
                while let Some(prev) = c.prev_multiple().unwrap() {
                    back.push(prev.to_vec());
                }
                let mut rebuilt: Vec<u8> = back.into_iter().rev().flatten().collect();
                if !rebuilt.is_empty() {
                    // The pages before the last one, then the last one.
                    let last_page_len = packed.len() - rebuilt.len();
                    rebuilt.extend_from_slice(&packed[packed.len() - last_page_len..]);
                    assert!(rebuilt == packed, "PREV_MULTIPLE pages");
                }
            }
            Op::Commit => {
                let (txn, model) = writer.take().unwrap();
                txn.commit().unwrap();
                committed = model;
                env.check().expect("invariants hold after commit");
                let read = env.begin_read().unwrap();
                let entries: usize = committed.values().map(BTreeSet::len).sum();
                assert_eq!(read.db_stat(db).unwrap().entries, entries as u64);
            }
            Op::Abort => {
                writer = None;
            }
        }
    }
    if let Some((txn, model)) = writer.take() {
        check_scan(&txn, db, &model, false);
        txn.commit().unwrap();
    }
    env.check().unwrap();
    max_dups
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        max_shrink_iters: 4000,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct("tests/dupsort_model.proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn dupsort_operations_match_the_model(ops in proptest::collection::vec(op(6), 1..500)) {
        run(&ops, false);
    }

    #[test]
    fn dupfixed_operations_match_the_model(ops in proptest::collection::vec(op(6), 1..500)) {
        run(&ops, true);
    }
}

/// The same with DUPFIXED: LEAF2 sub-pages and sub-DBs with LEAF2 leaves.
#[test]
fn long_dupfixed_run() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let ops = proptest::collection::vec(op(3), 20000)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    // Keep whole keys alive so their sets grow past a sub-page (about 250 values).
    let ops: Vec<Op> = ops
        .into_iter()
        .filter(|op| {
            !matches!(
                op,
                Op::DeleteKey { .. } | Op::CursorDelete { all: true, .. }
            )
        })
        .collect();
    let largest_node = run(&ops, true);
    assert!(
        largest_node > 2038,
        "sets grew large enough to need sub-DBs ({largest_node} bytes)"
    );
}

/// A long run with many values per key: sets become sub-DBs several levels deep.
#[test]
fn long_dupsort_run() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let ops = proptest::collection::vec(op(4), 20000)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    let largest_node = run(&ops, false);
    // node_max is 2038 at 4 KiB pages: a set larger than that lives in a sub-DB.
    assert!(
        largest_node > 2038,
        "sets grew large enough to need sub-DBs ({largest_node} bytes)"
    );
}
