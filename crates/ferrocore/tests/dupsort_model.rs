//! DUPSORT model test: random operations on a DUPSORT DB against a map of sorted sets,
//! checking every answer and the invariants (including sub-pages and sub-DBs) after each
//! commit. Few keys and many values per key, so value sets grow from a single value to a
//! sub-page to a sub-DB and shrink again.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use ferrocore::{db_flags, env_flags, put_flags, Database, EnvOptions, Error, WriteTxn};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

mod common;
use common::{Rng, TempEnv};

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
        approach: Approach,
        follow: Follow,
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

/// How a cursor reaches the pair it deletes. The way matters to LMDB: a cursor that
/// comes to a key with one value by NEXT_NODUP from a key with several keeps that key's
/// values cursor, and after the delete LMDB reads it against the next key's values (see
/// `lmdb_keeps_a_stale_values_cursor_after_a_key_is_deleted` in `lmdb_interop_dbs.rs`).
/// ferrocore must answer the same whichever way the cursor came.
#[derive(Clone, Copy, Debug)]
enum Approach {
    /// SET_RANGE, then GET_BOTH_RANGE.
    Seek,
    /// GET_BOTH on the pair before, then NEXT.
    Next,
    /// GET_BOTH on the previous key's first value, then NEXT_NODUP (deletes that key's
    /// first value).
    NextNodup,
    /// GET_BOTH on the pair after, then PREV.
    Prev,
}

/// The move made right after a cursor delete, checked against [`after_delete`].
#[derive(Clone, Copy, Debug)]
enum Follow {
    Current,
    Count,
    Next,
    Prev,
    NextDup,
    PrevDup,
    FirstDup,
    LastDup,
    NextNodup,
    PrevNodup,
    Delete,
}

/// What a move answers right after a cursor delete: a pair, a count, nothing
/// (`NotFound`), or `InvalidArgument` (EINVAL: the cursor is not positioned).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    Pair(Vec<u8>, Vec<u8>),
    Count(u64),
    Nothing,
    Unpositioned,
}

/// The answer of `follow` right after the cursor deleted `key`/`value` (or, with `all`,
/// every value of `key`); `model` is the DB after the delete. These are LMDB's answers
/// whenever its values cursor is fresh, as seen on LMDB 0.9.70 (and 0.9.24, which returns
/// a deleted value in the last case below):
/// - the key keeps a value after the deleted one: the cursor stands on it, marked deleted
///   (NEXT and NEXT_DUP return it, PREV returns the item before the deleted one);
/// - the deleted value was the key's last: the values cursor stands past its end (no
///   current item, COUNT still counts the key, NEXT goes to the next key);
/// - the key is gone: the cursor stands on the next key's first value, marked deleted
///   (NEXT_DUP and PREV_DUP find nothing); with no next key it stands past the end, where
///   PREV, PREV_DUP and PREV_NODUP go to the last value of the key before;
/// - the DB is empty: the cursor is not positioned (EINVAL for the moves that need a
///   position, nothing for the others).
fn after_delete(model: &Model, key: &[u8], value: &[u8], all: bool, follow: Follow) -> Answer {
    if model.is_empty() {
        return match follow {
            Follow::Current
            | Follow::Count
            | Follow::FirstDup
            | Follow::LastDup
            | Follow::Delete => Answer::Unpositioned,
            _ => Answer::Nothing,
        };
    }
    let pair = |k: &Vec<u8>, v: &Vec<u8>| Answer::Pair(k.clone(), v.clone());
    let or_nothing = |a: Option<Answer>| a.unwrap_or(Answer::Nothing);
    let next_key_first = model
        .range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded))
        .next()
        .map(|(k, s)| pair(k, s.first().unwrap()));
    let prev_key_last = model
        .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(key)))
        .next_back()
        .map(|(k, s)| pair(k, s.last().unwrap()));
    match model.get(key) {
        Some(set) => {
            assert!(!all, "NO_DUP_DATA removes the key");
            let k = key.to_vec();
            let next_value = set
                .range::<[u8], _>((Bound::Excluded(value), Bound::Unbounded))
                .next();
            let prev_value = set
                .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(value)))
                .next_back();
            let (first, last) = (set.first().unwrap(), set.last().unwrap());
            match (next_value, follow) {
                (_, Follow::Count) => Answer::Count(set.len() as u64),
                (_, Follow::FirstDup) => pair(&k, first),
                (_, Follow::LastDup) => pair(&k, last),
                (_, Follow::NextNodup) => or_nothing(next_key_first),
                (_, Follow::PrevNodup) => or_nothing(prev_key_last),
                (Some(nv), Follow::Current | Follow::Next | Follow::NextDup | Follow::Delete) => {
                    pair(&k, nv)
                }
                (Some(_), Follow::Prev) => {
                    or_nothing(prev_value.map(|pv| pair(&k, pv)).or(prev_key_last))
                }
                (Some(_), Follow::PrevDup) => or_nothing(prev_value.map(|pv| pair(&k, pv))),
                (None, Follow::Next) => or_nothing(next_key_first),
                (None, Follow::Prev | Follow::PrevDup) => pair(&k, last),
                (None, Follow::Current | Follow::NextDup | Follow::Delete) => Answer::Nothing,
            }
        }
        None => match (next_key_first, follow) {
            (Some(Answer::Pair(nk, _)), Follow::Count) => Answer::Count(model[&nk].len() as u64),
            (Some(Answer::Pair(nk, _)), Follow::LastDup) => pair(&nk, model[&nk].last().unwrap()),
            (
                Some(first),
                Follow::Current
                | Follow::Next
                | Follow::FirstDup
                | Follow::NextNodup
                | Follow::Delete,
            ) => first,
            (Some(_), Follow::NextDup | Follow::PrevDup) => Answer::Nothing,
            (_, Follow::Prev | Follow::PrevNodup) => or_nothing(prev_key_last),
            (None, Follow::PrevDup) => or_nothing(prev_key_last),
            (None, _) => Answer::Nothing,
            (Some(_), _) => unreachable!("every move is listed"),
        },
    }
}

fn key_bytes(k: u8) -> Vec<u8> {
    format!("key{k:03}").into_bytes()
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
    Rng(u64::from(v)).bytes(len)
}

fn approach() -> impl Strategy<Value = Approach> {
    use Approach::*;
    proptest::sample::select(vec![Seek, Next, NextNodup, Prev])
}

fn follow() -> impl Strategy<Value = Follow> {
    use Follow::*;
    proptest::sample::select(vec![
        Current, Count, Next, Prev, NextDup, PrevDup, FirstDup, LastDup, NextNodup, PrevNodup,
        Delete,
    ])
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
        6 => (key.clone(), value, proptest::bool::weighted(0.2), approach(), follow())
            .prop_map(|(key, value, all, approach, follow)| Op::CursorDelete { key, value, all, approach, follow }),
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
    let env = TempEnv::new(
        // Strict mode: every commit is followed by a full check.
        EnvOptions::new()
            .strict(true)
            .max_dbs(2)
            .flags(env_flags::NO_SYNC),
    );
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
                        assert!((*no_overwrite && exists_key) || (*no_dup_data && exists_pair));
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
            Op::CursorDelete {
                key,
                value,
                all,
                approach,
                follow,
            } => {
                let (k, v) = (key_bytes(*key), value_bytes(*value, fixed));
                let owned = |p: Option<(&[u8], &[u8])>| p.map(|(a, b)| (a.to_vec(), b.to_vec()));
                // The pair to delete: the first value >= v of the first key >= k.
                let Some((ck, set)) = model
                    .range::<Vec<u8>, _>((Bound::Included(&k), Bound::Unbounded))
                    .next()
                else {
                    continue;
                };
                let (ck, mut cv) = (
                    ck.clone(),
                    set.range::<Vec<u8>, _>((Bound::Included(&v), Bound::Unbounded))
                        .next()
                        .unwrap_or_else(|| set.first().unwrap())
                        .clone(),
                );
                let all_pairs = pairs(model);
                let at = all_pairs
                    .iter()
                    .position(|(a, b)| (a, b) == (&ck, &cv))
                    .unwrap();
                let mut c = txn.cursor_mut(db).unwrap();
                let reached = match approach {
                    Approach::Next if at > 0 => {
                        let (pk, pv) = &all_pairs[at - 1];
                        assert!(c.get_both(pk, pv).unwrap().is_some());
                        owned(c.next().unwrap())
                    }
                    Approach::NextNodup
                        if model.range::<Vec<u8>, _>(..&ck).next_back().is_some() =>
                    {
                        let (pk, pset) = model.range::<Vec<u8>, _>(..&ck).next_back().unwrap();
                        cv = model[&ck].first().unwrap().clone();
                        assert!(c.get_both(pk, pset.first().unwrap()).unwrap().is_some());
                        owned(c.next_nodup().unwrap())
                    }
                    Approach::Prev if at + 1 < all_pairs.len() => {
                        let (nk, nv) = &all_pairs[at + 1];
                        assert!(c.get_both(nk, nv).unwrap().is_some());
                        owned(c.prev().unwrap())
                    }
                    _ => {
                        c.set_range(&ck).unwrap();
                        owned(c.get_both_range(&ck, &cv).unwrap())
                    }
                };
                assert_eq!(
                    reached,
                    Some((ck.clone(), cv.clone())),
                    "{approach:?} reaches the pair"
                );
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
                let want = after_delete(model, &ck, &cv, *all, *follow);
                let item = |r: ferrocore::Result<Option<(&[u8], &[u8])>>| match r {
                    Ok(Some((a, b))) => Answer::Pair(a.to_vec(), b.to_vec()),
                    Ok(None) | Err(Error::NotFound) => Answer::Nothing,
                    Err(Error::InvalidArgument(_)) => Answer::Unpositioned,
                    Err(e) => panic!("{follow:?} after a delete: {e}"),
                };
                let got = match follow {
                    Follow::Current => item(c.current()),
                    Follow::Count => match c.count() {
                        Ok(n) => Answer::Count(n),
                        Err(Error::NotFound) => Answer::Nothing,
                        Err(Error::InvalidArgument(_)) => Answer::Unpositioned,
                        Err(e) => panic!("count after a delete: {e}"),
                    },
                    Follow::Next => item(c.next()),
                    Follow::Prev => item(c.prev()),
                    Follow::NextDup => item(c.next_dup()),
                    Follow::PrevDup => item(c.prev_dup()),
                    Follow::FirstDup => item(c.first_dup()),
                    Follow::LastDup => item(c.last_dup()),
                    Follow::NextNodup => item(c.next_nodup()),
                    Follow::PrevNodup => item(c.prev_nodup()),
                    // A second delete removes the pair the cursor stands on; that it removed
                    // the model's pair is checked in the DB below.
                    Follow::Delete => match c.delete(0) {
                        Ok(()) => {
                            let Answer::Pair(k2, v2) = &want else {
                                panic!("a second delete succeeded with nothing under the cursor")
                            };
                            let set = model.get_mut(k2).unwrap();
                            assert!(set.remove(v2));
                            if set.is_empty() {
                                model.remove(k2);
                            }
                            want.clone()
                        }
                        Err(Error::NotFound) => Answer::Nothing,
                        Err(Error::InvalidArgument(_)) => Answer::Unpositioned,
                        Err(e) => panic!("second delete: {e}"),
                    },
                };
                assert_eq!(
                    got, want,
                    "{follow:?} after deleting {ck:?}/{cv:?} (all: {all}, reached by {approach:?})"
                );
                drop(c);
                if let (Follow::Delete, Answer::Pair(k2, v2)) = (follow, &got) {
                    let mut check = txn.cursor(db).unwrap();
                    assert!(
                        check.get_both(k2, v2).unwrap().is_none(),
                        "the second delete removed {k2:?}/{v2:?}"
                    );
                    assert_eq!(txn.db_stat(db).unwrap().entries, pairs(model).len() as u64);
                }
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

    /// Many keys with one to a few values each: keys go from one value to several and
    /// back, so cursor deletes often remove a whole key (where LMDB's values cursor can go
    /// stale, see `Approach`).
    #[test]
    fn few_values_per_key_match_the_model(ops in proptest::collection::vec(op(48), 1..500)) {
        run(&ops, false);
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
