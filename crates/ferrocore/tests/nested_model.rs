//! Nested write txns against a stack of models: a child's commit merges into its parent,
//! its abort leaves the parent exactly as it was, at any depth, across named and DUPSORT
//! DBs, with page splits, merges, overflow values and sub-DBs along the way.

use std::collections::{BTreeMap, BTreeSet};

use ferrocore::{db_flags, env_flags, Database, EnvOptions, WriteTxn};
use proptest::prelude::*;

mod common;
use common::TempEnv;

/// Model: (db index, key) -> sorted values (one value for plain DBs).
type Model = BTreeMap<(usize, Vec<u8>), BTreeSet<Vec<u8>>>;

#[derive(Clone, Debug)]
enum Op {
    Put { db: usize, key: u16, value: u16 },
    Delete { db: usize, key: u16 },
    Begin,
    Commit,
    Abort,
    Verify,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        40 => (0usize..3, 0u16..300, 0u16..3000).prop_map(|(db, key, value)| Op::Put { db, key, value }),
        12 => (0usize..3, 0u16..300).prop_map(|(db, key)| Op::Delete { db, key }),
        4 => Just(Op::Begin),
        3 => Just(Op::Commit),
        2 => Just(Op::Abort),
        2 => Just(Op::Verify),
    ]
}

fn key_bytes(k: u16) -> Vec<u8> {
    format!("k{:05}", k.wrapping_mul(7919)).into_bytes()
}

fn value_bytes(v: u16, dup: bool) -> Vec<u8> {
    // Plain DBs get some values big enough for overflow pages; DUPSORT values stay small.
    let len = if dup {
        4 + v as usize % 40
    } else if v.is_multiple_of(97) {
        3000 + v as usize
    } else {
        1 + v as usize % 200
    };
    (0..len).map(|i| (v as usize * 31 + i) as u8).collect()
}

fn verify(txn: &WriteTxn<'_>, dbs: &[Database; 3], model: &Model) {
    for (i, db) in dbs.iter().enumerate() {
        let mut c = txn.cursor(*db).unwrap();
        let mut got = Vec::new();
        let mut item = c.first().unwrap();
        while let Some((k, v)) = item {
            // The main DB also holds the named DBs' records.
            if k.starts_with(b"k") {
                got.push((k.to_vec(), v.to_vec()));
            }
            item = c.next().unwrap();
        }
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .range((i, Vec::new())..(i + 1, Vec::new()))
            .flat_map(|((_, k), vs)| vs.iter().map(move |v| (k.clone(), v.clone())))
            .collect();
        assert!(
            got == want,
            "db {i}: {} items, model {}",
            got.len(),
            want.len()
        );
    }
}

/// Runs ops on `txn` until this level ends (Commit/Abort) or ops run out; returns whether
/// the level committed.
fn level(
    txn: &mut WriteTxn<'_>,
    dbs: &[Database; 3],
    model: &mut Model,
    ops: &mut std::slice::Iter<'_, Op>,
    depth: usize,
) -> bool {
    while let Some(op) = ops.next() {
        match op {
            Op::Put { db, key, value } => {
                let dup = *db == 2;
                let (k, v) = (key_bytes(*key), value_bytes(*value, dup));
                txn.put(dbs[*db], &k, &v, 0).unwrap();
                let set = model.entry((*db, k)).or_default();
                if !dup {
                    set.clear();
                }
                set.insert(v);
            }
            Op::Delete { db, key } => {
                let k = key_bytes(*key);
                assert_eq!(
                    txn.delete(dbs[*db], &k).unwrap(),
                    model.remove(&(*db, k)).is_some()
                );
            }
            Op::Verify => verify(txn, dbs, model),
            Op::Begin if depth < 6 => {
                let mut child_model = model.clone();
                let mut child = txn.begin_nested().unwrap();
                let committed = level(&mut child, dbs, &mut child_model, ops, depth + 1);
                if committed {
                    child.commit().unwrap();
                    *model = child_model;
                } else {
                    child.abort();
                }
                verify(txn, dbs, model);
            }
            Op::Begin => {}
            Op::Commit if depth > 0 => return true,
            Op::Abort if depth > 0 => return false,
            Op::Commit | Op::Abort => {}
        }
    }
    depth > 0
}

fn run(ops: &[Op]) {
    let env = TempEnv::new(
        // Strict mode: every commit is followed by a full check.
        EnvOptions::new()
            .strict(true)
            .max_dbs(4)
            .flags(env_flags::NO_SYNC),
    );
    let mut txn = env.begin_write().unwrap();
    let dbs = [
        Database::MAIN,
        txn.open_db(Some("named"), db_flags::CREATE).unwrap(),
        txn.open_db(Some("dups"), db_flags::CREATE | db_flags::DUP_SORT as u32)
            .unwrap(),
    ];
    let mut model = Model::new();
    let mut iter = ops.iter();
    level(&mut txn, &dbs, &mut model, &mut iter, 0);
    verify(&txn, &dbs, &model);
    txn.commit().unwrap();
    env.check()
        .expect("invariants hold after nested commits and aborts");
    let read = env.begin_read().unwrap();
    for (i, db) in dbs.iter().enumerate().skip(1) {
        let entries: usize = model
            .range((i, Vec::new())..(i + 1, Vec::new()))
            .map(|(_, v)| v.len())
            .sum();
        assert_eq!(read.db_stat(*db).unwrap().entries, entries as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 40,
        max_shrink_iters: 4000,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct("tests/nested_model.proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn nested_txns_match_a_stack_of_models(ops in proptest::collection::vec(op(), 1..1500)) {
        run(&ops);
    }
}
