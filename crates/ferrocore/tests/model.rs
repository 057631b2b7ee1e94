//! Model test: long random sequences of operations run against ferrocore and against a
//! `BTreeMap`, checking every answer, the tree invariants after every commit, and that
//! snapshots taken earlier keep seeing exactly what they saw.

use std::collections::BTreeMap;
use std::ops::Bound;

use ferrocore::{put_flags, Database, Env, EnvOptions, Error, ReadTxn, WriteTxn};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

mod common;
use common::{open_env, Rng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Clone, Debug)]
enum Op {
    Put {
        key: u16,
        len: usize,
        no_overwrite: bool,
    },
    Append {
        len: usize,
    },
    Delete {
        key: u16,
    },
    Get {
        key: u16,
    },
    SeekRange {
        key: u16,
    },
    Scan {
        backward: bool,
    },
    CursorDelete {
        key: u16,
        count: usize,
    },
    Commit,
    Abort,
    Snapshot,
    DropSnapshot {
        which: usize,
    },
    Reopen,
}

/// Keys of varied lengths (1..=511 bytes) that sort in a different order than their ids.
fn key_bytes(id: u16) -> Vec<u8> {
    let len = match id % 7 {
        0 => 1 + (id as usize % 3),
        1..=4 => 8 + (id as usize % 24),
        5 => 100 + (id as usize % 200),
        _ => 400 + (id as usize % 112),
    };
    Rng(u64::from(id)).bytes(len)
}

fn value_bytes(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as usize * 31 + i * 7) as u8)
        .collect()
}

fn value_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..=40,
        3 => 41usize..=600,
        2 => 1500usize..=2100,
        1 => 2100usize..=20000,
    ]
}

fn op(keys: u16) -> impl Strategy<Value = Op> {
    let key = 0u16..keys;
    prop_oneof![
        30 => (key.clone(), value_len(), proptest::bool::weighted(0.1)).prop_map(|(key, len, no_overwrite)| Op::Put { key, len, no_overwrite }),
        3 => value_len().prop_map(|len| Op::Append { len }),
        12 => key.clone().prop_map(|key| Op::Delete { key }),
        6 => key.clone().prop_map(|key| Op::Get { key }),
        4 => key.clone().prop_map(|key| Op::SeekRange { key }),
        2 => any::<bool>().prop_map(|backward| Op::Scan { backward }),
        3 => (key, 1usize..20).prop_map(|(key, count)| Op::CursorDelete { key, count }),
        6 => Just(Op::Commit),
        2 => Just(Op::Abort),
        2 => Just(Op::Snapshot),
        1 => (0usize..4).prop_map(|which| Op::DropSnapshot { which }),
        1 => Just(Op::Reopen),
    ]
}

fn open(dir: &std::path::Path) -> Env {
    // Strict mode: every commit is followed by a full check.
    open_env(
        dir,
        EnvOptions::new()
            .strict(true)
            .flags(ferrocore::env_flags::NO_SYNC),
    )
}

fn assert_scan_read(txn: &ReadTxn<'_>, model: &Model) {
    let mut cursor = txn.cursor(Database::MAIN).unwrap();
    let mut expected = model.iter();
    let mut item = cursor
        .first()
        .unwrap()
        .map(|(k, v)| (k.to_vec(), v.to_vec()));
    while let Some((k, v)) = item {
        let (mk, mv) = expected.next().expect("ferrocore has an extra key");
        assert_eq!(&k, mk);
        assert_eq!(&v, mv, "value of key {k:?}");
        item = cursor
            .next()
            .unwrap()
            .map(|(k, v)| (k.to_vec(), v.to_vec()));
    }
    assert!(expected.next().is_none(), "ferrocore lacks a key");
    assert_eq!(txn.stat().entries, model.len() as u64);
}

fn assert_scan_write(txn: &WriteTxn<'_>, model: &Model, backward: bool) {
    let mut cursor = txn.cursor(Database::MAIN).unwrap();
    let mut got = Vec::new();
    let mut item = if backward {
        cursor.last()
    } else {
        cursor.first()
    }
    .unwrap()
    .map(|(k, v)| (k.to_vec(), v.to_vec()));
    while let Some(kv) = item {
        got.push(kv);
        item = if backward {
            cursor.prev()
        } else {
            cursor.next()
        }
        .unwrap()
        .map(|(k, v)| (k.to_vec(), v.to_vec()));
    }
    if backward {
        got.reverse();
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len(), "scan length");
    assert!(got == want, "scan contents differ");
    assert_eq!(txn.stat().entries, model.len() as u64);
}

/// Runs ops until a `Reopen` (returned as the index to continue from) or the end.
fn run_segment(env: &Env, ops: &[Op], committed: &mut Model, seed: &mut u64) -> Option<usize> {
    let mut writer: Option<(WriteTxn<'_>, Model)> = None;
    let mut snapshots: Vec<(ReadTxn<'_>, Model)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        *seed += 1;
        match op {
            Op::Put {
                key,
                len,
                no_overwrite,
            } => {
                let (txn, model) =
                    writer.get_or_insert_with(|| (env.begin_write().unwrap(), committed.clone()));
                let k = key_bytes(*key);
                let v = value_bytes(*seed, *len);
                let flags = if *no_overwrite {
                    put_flags::NO_OVERWRITE
                } else {
                    0
                };
                match txn.put(Database::MAIN, &k, &v, flags) {
                    Ok(()) => {
                        assert!(
                            !(*no_overwrite && model.contains_key(&k)),
                            "NO_OVERWRITE replaced a key"
                        );
                        model.insert(k, v);
                    }
                    Err(Error::KeyExist) => assert!(*no_overwrite && model.contains_key(&k)),
                    Err(e) => panic!("put failed: {e}"),
                }
            }
            Op::Append { len } => {
                let (txn, model) =
                    writer.get_or_insert_with(|| (env.begin_write().unwrap(), committed.clone()));
                // Append a key just above the current maximum, then one that is out of order.
                let mut k = model.keys().next_back().cloned().unwrap_or_else(|| vec![0]);
                if k.len() < 511 {
                    k.push(1);
                } else {
                    while let Some(b) = k.pop() {
                        if b < 255 {
                            k.push(b + 1);
                            break;
                        }
                    }
                }
                if k.is_empty() {
                    continue;
                }
                let v = value_bytes(*seed, *len);
                txn.put(Database::MAIN, &k, &v, put_flags::APPEND).unwrap();
                model.insert(k.clone(), v.clone());
                if let Some(first) = model.keys().next().cloned() {
                    assert!(matches!(
                        txn.put(Database::MAIN, &first, &v, put_flags::APPEND),
                        Err(Error::KeyExist)
                    ));
                }
            }
            Op::Delete { key } => {
                let (txn, model) =
                    writer.get_or_insert_with(|| (env.begin_write().unwrap(), committed.clone()));
                let k = key_bytes(*key);
                assert_eq!(
                    txn.delete(Database::MAIN, &k).unwrap(),
                    model.remove(&k).is_some()
                );
            }
            Op::Get { key } => {
                let k = key_bytes(*key);
                match &writer {
                    Some((txn, model)) => assert_eq!(
                        txn.get(Database::MAIN, &k).unwrap(),
                        model.get(&k).map(|v| &v[..])
                    ),
                    None => {
                        let txn = env.begin_read().unwrap();
                        assert_eq!(
                            txn.get(Database::MAIN, &k).unwrap(),
                            committed.get(&k).map(|v| &v[..])
                        );
                    }
                }
            }
            Op::SeekRange { key } => {
                let k = key_bytes(*key);
                let (model, txn_owned);
                let found = match &writer {
                    Some((txn, m)) => {
                        model = m;
                        let mut c = txn.cursor(Database::MAIN).unwrap();
                        c.set_range(&k)
                            .unwrap()
                            .map(|(a, b)| (a.to_vec(), b.to_vec()))
                    }
                    None => {
                        model = &*committed;
                        txn_owned = env.begin_read().unwrap();
                        let mut c = txn_owned.cursor(Database::MAIN).unwrap();
                        c.set_range(&k)
                            .unwrap()
                            .map(|(a, b)| (a.to_vec(), b.to_vec()))
                    }
                };
                let want = model
                    .range::<Vec<u8>, _>((Bound::Included(&k), Bound::Unbounded))
                    .next()
                    .map(|(a, b)| (a.clone(), b.clone()));
                assert_eq!(found, want);
            }
            Op::Scan { backward } => match &writer {
                Some((txn, model)) => assert_scan_write(txn, model, *backward),
                None => assert_scan_read(&env.begin_read().unwrap(), committed),
            },
            Op::CursorDelete { key, count } => {
                let (txn, model) =
                    writer.get_or_insert_with(|| (env.begin_write().unwrap(), committed.clone()));
                let k = key_bytes(*key);
                let mut cursor = txn.cursor_mut(Database::MAIN).unwrap();
                let mut at = cursor.set_range(&k).unwrap().map(|(a, _)| a.to_vec());
                for i in 0..*count {
                    let Some(cur) = at else { break };
                    cursor.delete(0).unwrap();
                    assert!(model.remove(&cur).is_some());
                    // The cursor now stands on the successor. As in LMDB, `next` yields it; or
                    // `current` yields it, and then `next` moves on past it.
                    let mut after = model
                        .range::<Vec<u8>, _>((Bound::Excluded(&cur), Bound::Unbounded))
                        .map(|(a, _)| a.clone());
                    let succ = after.next();
                    if i % 2 == 0 {
                        at = cursor.next().unwrap().map(|(a, _)| a.to_vec());
                        assert_eq!(at, succ);
                    } else if model.is_empty() {
                        // The DB is empty: the cursor is not positioned (LMDB's EINVAL).
                        assert!(matches!(cursor.current(), Err(Error::InvalidArgument(_))));
                        at = cursor.next().unwrap().map(|(a, _)| a.to_vec());
                        assert_eq!(at, None);
                    } else {
                        assert_eq!(cursor.current().unwrap().map(|(a, _)| a.to_vec()), succ);
                        at = cursor.next().unwrap().map(|(a, _)| a.to_vec());
                        if succ.is_some() {
                            assert_eq!(at, after.next());
                        }
                    }
                }
            }
            Op::Commit => {
                if let Some((txn, model)) = writer.take() {
                    txn.commit().unwrap();
                    *committed = model;
                    let report = env.check().expect("invariants hold after commit");
                    assert!(report.tree_pages > 0 || committed.is_empty());
                }
            }
            Op::Abort => {
                writer = None;
            }
            Op::Snapshot => {
                if writer.is_none() && snapshots.len() < 4 {
                    snapshots.push((env.begin_read().unwrap(), committed.clone()));
                }
            }
            Op::DropSnapshot { which } => {
                if !snapshots.is_empty() {
                    let (txn, model) = snapshots.remove(which % snapshots.len());
                    assert_scan_read(&txn, &model);
                    txn.check().expect("old snapshot still consistent");
                }
            }
            Op::Reopen => {
                drop(writer);
                for (txn, model) in &snapshots {
                    assert_scan_read(txn, model);
                }
                return Some(i + 1);
            }
        }
    }
    if let Some((txn, model)) = writer.take() {
        txn.commit().unwrap();
        *committed = model;
        env.check().expect("invariants hold after the final commit");
    }
    for (txn, model) in &snapshots {
        assert_scan_read(txn, model);
    }
    None
}

fn run(ops: &[Op]) -> (ferrocore::Stat, ferrocore::CheckReport) {
    let dir = tempfile::tempdir().unwrap();
    let mut committed = Model::new();
    let mut seed = 0;
    let mut start = 0;
    loop {
        let env = open(dir.path());
        assert_scan_read(&env.begin_read().unwrap(), &committed);
        match run_segment(&env, &ops[start..], &mut committed, &mut seed) {
            Some(next) => start += next,
            None => break,
        }
    }
    let env = open(dir.path());
    assert_scan_read(&env.begin_read().unwrap(), &committed);
    (env.stat().unwrap(), env.check().unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        max_shrink_iters: 2000,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct("tests/model.proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_operations_match_the_model(ops in proptest::collection::vec(op(600), 1..400)) {
        run(&ops);
    }
}

/// One long deterministic run: many pages, deep trees, many free-list records.
#[test]
fn long_run_matches_the_model() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let ops = proptest::collection::vec(op(8000), 30000)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    let (stat, report) = run(&ops);
    // The run must have exercised deep trees, overflow pages and page reuse.
    assert!(stat.depth >= 3, "depth {}", stat.depth);
    assert!(stat.overflow_pages > 0);
    assert!(report.free_pages > 0);
    println!("long run: {stat:?} {report:?}");
}
