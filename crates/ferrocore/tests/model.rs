//! The model test: long random sequences of operations over the main DB and a named DB
//! of each kind (plain, INTEGERKEY, REVERSEKEY, DUPSORT, REVERSEDUP, DUPFIXED,
//! INTEGERDUP), created, emptied and deleted along the way, in write txns nested to any
//! depth, with snapshots and reopens. Each runs against ferrocore and against a model:
//! per DB, a map of key -> sorted set of values (one value in a plain DB), kept in the
//! DB's own key and value order.
//!
//! Every answer is checked. After each change: the key's value and the DB's entry count.
//! When a nested txn ends and after every commit: every DB that changed (or came back) by
//! full cursor scans forward and backward, every key by `get`, and in DUPSORT DBs every
//! DUP move (NEXT/PREV_NODUP walks, SET, count, NEXT/PREV_DUP, FIRST/LAST_DUP and the
//! MULTIPLE moves). Strict mode checks the invariants after every commit. Snapshots taken
//! earlier keep seeing exactly what they saw. The moves right after a cursor delete are
//! checked against what LMDB's documentation says, also where LMDB itself answers
//! otherwise (see [`after_delete`] and [`Approach`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Bound;
use std::path::Path;

use ferrocore::{
    db_flags, env_flags, put_flags, CheckReport, Cursor, Database, Env, EnvOptions, Error, Item,
    ReadTxn, Stat, WriteCursor, WriteTxn,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

mod common;
use common::{hex_prefix, open_env, Rng};

// ---------------------------------------------------------------------------------------
// The DBs, their keys and values.
// ---------------------------------------------------------------------------------------

/// A DB of the test: its name (`None`: the main DB) and its flags, which decide plain or
/// DUPSORT and the orders of keys and values.
struct Kind {
    name: Option<&'static str>,
    flags: u16,
}

const fn kind(name: Option<&'static str>, flags: u16) -> Kind {
    Kind { name, flags }
}

/// The main DB, then one named DB of each kind. A name always comes with the same flags.
const KINDS: [Kind; 8] = {
    use db_flags::{DUP_FIXED, DUP_SORT, INTEGER_DUP, INTEGER_KEY, REVERSE_DUP, REVERSE_KEY};
    [
        kind(None, 0),
        kind(Some("plain"), 0),
        kind(Some("ints"), INTEGER_KEY),
        kind(Some("rev"), REVERSE_KEY),
        kind(Some("dups"), DUP_SORT),
        kind(Some("revdups"), REVERSE_KEY | DUP_SORT | REVERSE_DUP),
        kind(Some("fixed"), DUP_SORT | DUP_FIXED),
        kind(
            Some("intdups"),
            INTEGER_KEY | DUP_SORT | DUP_FIXED | INTEGER_DUP,
        ),
    ]
};
const MAIN: usize = 0;
const DBS: usize = KINDS.len();
/// Handles the environment has room for: more than `DBS`, as handles of DBs created in
/// nested txns that aborted stay open until their write txn ends.
const MAX_DBS: u32 = 12;
/// The longest key (and DUPSORT value) at the default page size.
const MAX_KEY_BYTES: usize = 511;
/// A named DB's record in the main DB (LMDB's `MDB_db`).
const RECORD_BYTES: usize = 48;
/// The model's value for a named DB's record in the main DB (the test only checks its
/// size); no generated value is equal to it.
const RECORD: &[u8] = b"(a named DB's record)";
/// Write txns nest at most this deep (the top txn is depth 0).
const MAX_DEPTH: usize = 8;
/// Values in one DUPSORT node past this many bytes live in a sub-DB (LMDB's `node_max`
/// at 4 KiB pages).
const NODE_MAX_BYTES: usize = 2038;
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

impl Kind {
    fn dup(&self) -> bool {
        self.flags & db_flags::DUP_SORT != 0
    }

    fn fixed(&self) -> bool {
        self.flags & db_flags::DUP_FIXED != 0
    }

    fn int_keys(&self) -> bool {
        self.flags & db_flags::INTEGER_KEY != 0
    }

    fn label(&self) -> &'static str {
        self.name.unwrap_or("main")
    }

    /// A key in model form from the engine's bytes, or back (the map is its own inverse).
    /// The model orders keys by their bytes; where the DB compares from the last byte
    /// (REVERSEKEY, and INTEGERKEY on the little-endian 8-byte keys used here) the model
    /// form is the bytes reversed.
    fn key_form(&self, key: &[u8]) -> Vec<u8> {
        reversed_if(
            key,
            self.flags & (db_flags::REVERSE_KEY | db_flags::INTEGER_KEY) != 0,
        )
    }

    /// A value in model form, or back: as [`Kind::key_form`], for REVERSEDUP and
    /// INTEGERDUP (plain DBs do not order values).
    fn value_form(&self, value: &[u8]) -> Vec<u8> {
        reversed_if(
            value,
            self.flags & (db_flags::REVERSE_DUP | db_flags::INTEGER_DUP) != 0,
        )
    }

    /// The engine's bytes of key number `id`, sorting differently from the numbers.
    fn key(&self, id: u16) -> Vec<u8> {
        if self.int_keys() {
            u64::from(id).wrapping_mul(GOLDEN).to_le_bytes().to_vec()
        } else if self.dup() {
            format!("key{id:03}").into_bytes()
        } else {
            varied_key(id)
        }
    }

    /// The engine's bytes of value number `v`: in plain DBs `len` bytes (up to overflow
    /// pages); DUPSORT values of 1..=460 bytes; DUPFIXED ones of 32 bytes, or 8 with
    /// INTEGERDUP. All sort differently from their numbers.
    fn value(&self, v: u16, len: usize) -> Vec<u8> {
        if !self.dup() {
            (0..len).map(|i| (v as usize * 31 + i * 7) as u8).collect()
        } else if self.flags & db_flags::INTEGER_DUP != 0 {
            u64::from(v).wrapping_mul(GOLDEN).to_le_bytes().to_vec()
        } else if self.fixed() {
            Rng(u64::from(v)).bytes(32)
        } else {
            let len = 1 + (v as usize * 7) % 60 + if v.is_multiple_of(50) { 400 } else { 0 };
            Rng(u64::from(v)).bytes(len)
        }
    }

    /// A model-form key after `last`.
    fn key_after(&self, last: &[u8]) -> Option<Vec<u8>> {
        after(last, self.int_keys())
    }

    /// A model-form value after `last`.
    fn value_after(&self, last: &[u8]) -> Option<Vec<u8>> {
        after(last, self.fixed())
    }
}

fn reversed_if(bytes: &[u8], reverse: bool) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if reverse {
        out.reverse();
    }
    out
}

/// Keys of varied lengths (1..=511 bytes) that sort in a different order than their ids.
fn varied_key(id: u16) -> Vec<u8> {
    let len = match id % 7 {
        0 => 1 + (id as usize % 3),
        1..=4 => 8 + (id as usize % 24),
        5 => 100 + (id as usize % 200),
        _ => 400 + (id as usize % 112),
    };
    Rng(u64::from(id)).bytes(len)
}

/// A form greater than `form` in byte order: for fixed-size forms (integers, DUPFIXED
/// values) the next big-endian number; otherwise `form` and a byte, or at the longest,
/// `form` with its last byte below 255 raised. `None` if there is none.
fn after(form: &[u8], fixed: bool) -> Option<Vec<u8>> {
    let mut out = form.to_vec();
    if fixed {
        for b in out.iter_mut().rev() {
            *b = b.wrapping_add(1);
            if *b != 0 {
                return Some(out);
            }
        }
        return None;
    }
    if out.len() < MAX_KEY_BYTES {
        out.push(1);
        return Some(out);
    }
    while let Some(b) = out.pop() {
        if b < 255 {
            out.push(b + 1);
            return Some(out);
        }
    }
    None
}

/// The sizes of one run: how many keys the main DB, the plain named DBs and the DUPSORT
/// DBs draw from.
#[derive(Clone, Copy, Debug)]
struct Shape {
    main: u16,
    named: u16,
    dups: u16,
}

impl Shape {
    fn key_id(self, db: usize, id: u16) -> u16 {
        let keys = if KINDS[db].dup() {
            self.dups
        } else if db == MAIN {
            self.main
        } else {
            self.named
        };
        id % keys
    }
}

// ---------------------------------------------------------------------------------------
// The model.
// ---------------------------------------------------------------------------------------

/// One DB in the model: key -> its values, both in model form (a plain DB's key has one
/// value), and the number of pairs.
#[derive(Clone, Debug, Default)]
struct Db {
    keys: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
    entries: u64,
}

/// The model: DB (an index into [`KINDS`]) -> its content. The main DB is always there;
/// a named DB while it exists, and then the main DB holds its record under its name.
type Model = BTreeMap<usize, Db>;

fn create_db(model: &mut Model, db: usize) {
    let name = KINDS[db].name.expect("a named DB");
    model.insert(db, Db::default());
    model
        .get_mut(&MAIN)
        .unwrap()
        .put(name.as_bytes().to_vec(), RECORD.to_vec(), false);
}

fn delete_db(model: &mut Model, db: usize) {
    let name = KINDS[db].name.expect("a named DB");
    model.remove(&db);
    model.get_mut(&MAIN).unwrap().remove_key(name.as_bytes());
}

impl Db {
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>, dup: bool) {
        let set = self.keys.entry(key).or_default();
        if !dup {
            self.entries -= set.len() as u64;
            set.clear();
        }
        if set.insert(value) {
            self.entries += 1;
        }
    }

    fn remove_key(&mut self, key: &[u8]) -> bool {
        match self.keys.remove(key) {
            Some(set) => {
                self.entries -= set.len() as u64;
                true
            }
            None => false,
        }
    }

    fn remove_pair(&mut self, key: &[u8], value: &[u8]) -> bool {
        let Some(set) = self.keys.get_mut(key) else {
            return false;
        };
        if !set.remove(value) {
            return false;
        }
        self.entries -= 1;
        if set.is_empty() {
            self.keys.remove(key);
        }
        true
    }

    fn pairs(&self) -> impl Iterator<Item = (&Vec<u8>, &Vec<u8>)> {
        self.keys
            .iter()
            .flat_map(|(k, vs)| vs.iter().map(move |v| (k, v)))
    }

    /// The pair after `key`/`value`.
    fn pair_after(&self, key: &[u8], value: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        let same_key = self.keys.get(key).and_then(|set| {
            set.range::<[u8], _>((Bound::Excluded(value), Bound::Unbounded))
                .next()
        });
        if let Some(v) = same_key {
            return Some((key.to_vec(), v.clone()));
        }
        self.keys
            .range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded))
            .next()
            .map(|(k, set)| (k.clone(), first(set).clone()))
    }

    /// The pair before `key`/`value`.
    fn pair_before(&self, key: &[u8], value: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        let same_key = self.keys.get(key).and_then(|set| {
            set.range::<[u8], _>((Bound::Unbounded, Bound::Excluded(value)))
                .next_back()
        });
        if let Some(v) = same_key {
            return Some((key.to_vec(), v.clone()));
        }
        self.keys
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(key)))
            .next_back()
            .map(|(k, set)| (k.clone(), last(set).clone()))
    }
}

fn first(set: &BTreeSet<Vec<u8>>) -> &Vec<u8> {
    set.first().expect("a key has a value")
}

fn last(set: &BTreeSet<Vec<u8>>) -> &Vec<u8> {
    set.last().expect("a key has a value")
}

/// Value `pick` of `key` in `m`, in model form (`AfterLast` is taken as number 0, and
/// `Existing` as its number when the key has no value).
fn value_of(kind: &Kind, m: &Db, key: &[u8], pick: Pick, len: usize) -> Vec<u8> {
    match (pick, m.keys.get(key)) {
        (Pick::Existing(i), Some(set)) => set
            .iter()
            .nth(usize::from(i) % set.len())
            .expect("a value")
            .clone(),
        (Pick::Id(v) | Pick::Existing(v), _) => kind.value_form(&kind.value(v, len)),
        (Pick::AfterLast, _) => kind.value_form(&kind.value(0, len)),
    }
}

/// True if `key` is a DB's name in the main DB: not a key the test puts, gets or
/// deletes (generated keys are never one).
fn is_name(db: usize, key: &[u8]) -> bool {
    db == MAIN && KINDS.iter().any(|k| k.name.map(str::as_bytes) == Some(key))
}

// ---------------------------------------------------------------------------------------
// Operations.
// ---------------------------------------------------------------------------------------

/// A key or value: number `Id`; one after the DB's last key (the key's last value),
/// which is what APPEND (APPEND_DUP) takes; or (a value) the key's `Existing`-th (mod
/// its count) value, which NO_DUP_DATA refuses.
#[derive(Clone, Copy, Debug)]
enum Pick {
    Id(u16),
    AfterLast,
    Existing(u16),
}

#[derive(Clone, Debug)]
enum Op {
    /// `put` with `flags` (NO_OVERWRITE, NO_DUP_DATA, APPEND, APPEND_DUP; plain DBs
    /// ignore the DUPSORT ones, as LMDB does). A named DB that does not exist is created
    /// first, here and for every change below.
    Put {
        db: usize,
        key: Pick,
        value: Pick,
        len: usize,
        flags: u32,
    },
    /// `delete` of a whole key, or with a value `delete_value` of one pair (plain DBs
    /// ignore the value, as LMDB does).
    Delete {
        db: usize,
        key: u16,
        value: Option<Pick>,
    },
    /// `get` and SET.
    Get {
        db: usize,
        key: u16,
    },
    SeekRange {
        db: usize,
        key: u16,
    },
    /// `get` and SET, then (DUPSORT) GET_BOTH or GET_BOTH_RANGE.
    GetBoth {
        db: usize,
        key: u16,
        value: Pick,
        range: bool,
    },
    /// Every check of a whole DB.
    Verify {
        db: usize,
    },
    /// A write cursor reaches a pair by `approach` and deletes it (with `all`, every
    /// value of its key), then makes each move of `follows`; see [`At`].
    CursorDelete {
        db: usize,
        key: u16,
        value: u16,
        all: bool,
        approach: Approach,
        follows: Vec<Follow>,
    },
    /// `open_db` of a named DB, with CREATE and its flags or with no flags.
    OpenDb {
        db: usize,
        create: bool,
    },
    /// `drop_db` of a named DB: emptied, or with `delete` removed.
    DropDb {
        db: usize,
        delete: bool,
    },
    /// Begins a nested txn (a write txn if none is open).
    Begin,
    /// Commits the innermost txn: a nested one, or the top one.
    Commit,
    /// Aborts the innermost txn.
    Abort,
    /// Keeps a read txn and the committed model it must keep seeing.
    Snapshot,
    /// Checks a snapshot in full and ends it.
    DropSnapshot {
        which: usize,
    },
    /// Aborts the write txn and reopens the environment.
    Reopen,
}

impl Op {
    fn db(&self) -> Option<usize> {
        match *self {
            Op::Put { db, .. }
            | Op::Delete { db, .. }
            | Op::Get { db, .. }
            | Op::SeekRange { db, .. }
            | Op::GetBoth { db, .. }
            | Op::Verify { db }
            | Op::CursorDelete { db, .. }
            | Op::OpenDb { db, .. }
            | Op::DropDb { db, .. } => Some(db),
            _ => None,
        }
    }

    fn reads_only(&self) -> bool {
        matches!(
            self,
            Op::Get { .. } | Op::SeekRange { .. } | Op::GetBoth { .. } | Op::Verify { .. }
        )
    }
}

/// How a cursor reaches the pair it deletes. The way matters to LMDB: a cursor that
/// comes to a key with one value by NEXT_NODUP from a key with several keeps that key's
/// values cursor, and after the delete LMDB reads it against the next key's values (see
/// `lmdb_keeps_a_stale_values_cursor_after_a_key_is_deleted` in `lmdb_interop_dbs.rs`).
/// ferrocore must answer the same whichever way the cursor came.
#[derive(Clone, Copy, Debug)]
enum Approach {
    /// SET_RANGE, then (DUPSORT) GET_BOTH_RANGE.
    Seek,
    /// To the pair before, then NEXT.
    Next,
    /// To the previous key's first value, then NEXT_NODUP (deletes that key's first
    /// value).
    NextNodup,
    /// To the pair after, then PREV.
    Prev,
}

/// A move made right after a cursor delete, checked against [`after_delete`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

impl Follow {
    /// The move made instead in a plain DB, where the DUP moves do not apply.
    fn without_dups(self) -> Follow {
        match self {
            Follow::NextDup => Follow::Next,
            Follow::PrevDup => Follow::Prev,
            Follow::Count | Follow::FirstDup | Follow::LastDup => Follow::Current,
            f => f,
        }
    }
}

fn value_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..=40,
        3 => 41usize..=600,
        2 => 1500usize..=2100,
        1 => 2100usize..=20000,
    ]
}

/// A DB: the main DB for 30%, each named DB for 10%; with a `focus`, that DB for half
/// of the ops and the others for the rest (so that its keys gather many values).
fn db(focus: Option<usize>) -> BoxedStrategy<usize> {
    let any_db = prop_oneof![3 => Just(MAIN), 7 => 1..DBS];
    match focus {
        Some(db) => prop_oneof![Just(db), any_db].boxed(),
        None => any_db.boxed(),
    }
}

/// `flag` with probability `p`, else 0.
fn flag(p: f64, flag: u32) -> impl Strategy<Value = u32> {
    proptest::bool::weighted(p).prop_map(move |on| if on { flag } else { 0 })
}

fn put(focus: Option<usize>) -> impl Strategy<Value = Op> {
    let flags = (
        flag(0.1, put_flags::NO_OVERWRITE),
        flag(0.15, put_flags::NO_DUP_DATA),
        flag(0.06, put_flags::APPEND),
        flag(0.06, put_flags::APPEND_DUP),
    )
        .prop_map(|(a, b, c, d)| a | b | c | d);
    let coins = (
        proptest::bool::weighted(0.8),
        proptest::bool::weighted(0.03),
    );
    (
        db(focus),
        any::<u16>(),
        0u16..2000,
        value_len(),
        flags,
        coins,
    )
        .prop_map(|(db, key, value, len, flags, (fitting, stray))| {
            // Mostly what APPEND (APPEND_DUP, NO_DUP_DATA) takes (refuses), sometimes not.
            let with = |f: u32| flags & f != 0 && fitting;
            let key = if with(put_flags::APPEND) || stray {
                Pick::AfterLast
            } else {
                Pick::Id(key)
            };
            let value = if with(put_flags::APPEND_DUP) || stray {
                Pick::AfterLast
            } else if with(put_flags::NO_DUP_DATA) {
                Pick::Existing(value)
            } else {
                Pick::Id(value)
            };
            Op::Put {
                db,
                key,
                value,
                len,
                flags,
            }
        })
}

/// A value: number `v`, or half of the time the key's `v`-th.
fn value() -> impl Strategy<Value = Pick> {
    (0u16..2000, any::<bool>()).prop_map(|(v, existing)| {
        if existing {
            Pick::Existing(v)
        } else {
            Pick::Id(v)
        }
    })
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

fn op(focus: Option<usize>) -> impl Strategy<Value = Op> {
    let db = || db(focus);
    let key = any::<u16>;
    prop_oneof![
        34 => put(focus),
        15 => (db(), key(), prop_oneof![1 => Just(None), 2 => value().prop_map(Some)])
            .prop_map(|(db, key, value)| Op::Delete { db, key, value }),
        4 => (db(), key()).prop_map(|(db, key)| Op::Get { db, key }),
        3 => (db(), key()).prop_map(|(db, key)| Op::SeekRange { db, key }),
        3 => (db(), key(), value(), any::<bool>())
            .prop_map(|(db, key, value, range)| Op::GetBoth { db, key, value, range }),
        2 => db().prop_map(|db| Op::Verify { db }),
        6 => (db(), key(), 0u16..2000, proptest::bool::weighted(0.2), approach(), proptest::collection::vec(follow(), 1..=4))
            .prop_map(|(db, key, value, all, approach, follows)| Op::CursorDelete { db, key, value, all, approach, follows }),
        2 => (1..DBS, any::<bool>()).prop_map(|(db, create)| Op::OpenDb { db, create }),
        1 => (1..DBS, any::<bool>()).prop_map(|(db, delete)| Op::DropDb { db, delete }),
        4 => Just(Op::Begin),
        4 => Just(Op::Commit),
        2 => Just(Op::Abort),
        1 => Just(Op::Snapshot),
        1 => (0usize..4).prop_map(|which| Op::DropSnapshot { which }),
        1 => Just(Op::Reopen),
    ]
}

// ---------------------------------------------------------------------------------------
// Reading a DB back.
// ---------------------------------------------------------------------------------------

/// What the checks read through: a read txn, or a write txn (nested or not).
trait View {
    fn cur(&self, db: Database) -> Cursor<'_>;
    fn value(&self, db: Database, key: &[u8]) -> Option<Vec<u8>>;
    fn entries(&self, db: Database) -> u64;
}

macro_rules! view {
    ($txn:ty) => {
        impl View for $txn {
            fn cur(&self, db: Database) -> Cursor<'_> {
                self.cursor(db).expect("cursor")
            }

            fn value(&self, db: Database, key: &[u8]) -> Option<Vec<u8>> {
                self.get(db, key).expect("get").map(<[u8]>::to_vec)
            }

            fn entries(&self, db: Database) -> u64 {
                self.db_stat(db).expect("db_stat").entries
            }
        }
    };
}

view!(ReadTxn<'_>);
view!(WriteTxn<'_>);

/// Items in engine bytes, as a cursor hands them out.
type Items = Vec<(Vec<u8>, Vec<u8>)>;

/// A cursor's item, owned.
fn owned_item(item: Option<(&[u8], &[u8])>) -> Option<(Vec<u8>, Vec<u8>)> {
    item.map(|(a, b)| (a.to_vec(), b.to_vec()))
}
/// Items the model expects, in engine bytes; `None` for the value of a named DB's record
/// in the main DB (only its size is known).
type Expected = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// A model-form value in engine bytes, `None` for a named DB's record.
fn expected_value(kind: &Kind, v: &[u8]) -> Option<Vec<u8>> {
    (kind.name.is_some() || v != RECORD).then(|| kind.value_form(v))
}

/// Collects the items a cursor yields from `start` on, moving by `step`.
fn collect<'c>(
    cursor: &mut Cursor<'c>,
    start: fn(&mut Cursor<'c>) -> ferrocore::Result<Option<Item<'c>>>,
    step: fn(&mut Cursor<'c>) -> ferrocore::Result<Option<Item<'c>>>,
) -> Items {
    let mut out = Vec::new();
    let mut item = start(cursor).expect("cursor move");
    while let Some((k, v)) = item {
        out.push((k.to_vec(), v.to_vec()));
        item = step(cursor).expect("cursor move");
    }
    out
}

fn same_items(
    label: &str,
    what: &str,
    got: &[(Vec<u8>, Vec<u8>)],
    want: &[(Vec<u8>, Option<Vec<u8>>)],
) {
    for (i, ((gk, gv), (wk, wv))) in got.iter().zip(want).enumerate() {
        assert!(
            gk == wk,
            "{label}, {what}: item {i} has key {}, the model {}",
            hex_prefix(gk),
            hex_prefix(wk)
        );
        match wv {
            Some(wv) => assert!(
                gv == wv,
                "{label}, {what}: key {} has value {}, the model {}",
                hex_prefix(gk),
                hex_prefix(gv),
                hex_prefix(wv)
            ),
            None => assert_eq!(
                gv.len(),
                RECORD_BYTES,
                "{label}, {what}: the record of named DB {}",
                hex_prefix(gk)
            ),
        }
    }
    assert_eq!(got.len(), want.len(), "{label}, {what}: number of items");
}

/// Checks `key`'s first value and the DB's entry count (after a change).
fn check_key<V: View>(view: &V, h: Database, db: usize, model: &Model, key: &[u8]) {
    let kind = &KINDS[db];
    let got = view
        .value(h, &kind.key_form(key))
        .map(|v| kind.value_form(&v));
    let want = model[&db].keys.get(key).map(first);
    assert!(
        got.as_ref() == want,
        "{}: get {} answers {}, the model {}",
        kind.label(),
        hex_prefix(&kind.key_form(key)),
        got.as_deref().map_or("nothing".into(), hex_prefix),
        want.map_or("nothing".into(), |v| hex_prefix(v)),
    );
    assert_eq!(
        view.entries(h),
        model[&db].entries,
        "{}: entries",
        kind.label()
    );
}

/// Every check of DB `db` (handle `h`): scans forward and backward, `get` of every key,
/// the entry count, and in DUPSORT DBs every DUP move. Returns the largest node a key's
/// values would need as a sub-page (so that a run can tell sub-DBs were exercised).
fn verify_db<V: View>(view: &V, h: Database, db: usize, model: &Model) -> usize {
    let kind = &KINDS[db];
    let label = kind.label();
    let m = &model[&db];
    let want: Expected = m
        .pairs()
        .map(|(k, v)| (kind.key_form(k), expected_value(kind, v)))
        .collect();
    let mut c = view.cur(h);
    let forward = collect(&mut c, Cursor::first, Cursor::next);
    same_items(label, "FIRST/NEXT scan", &forward, &want);
    let mut backward = collect(&mut c, Cursor::last, Cursor::prev);
    backward.reverse();
    same_items(label, "LAST/PREV scan", &backward, &want);
    assert_eq!(view.entries(h), want.len() as u64, "{label}: entries");
    for key in m.keys.keys().filter(|k| !is_name(db, k)) {
        check_key(view, h, db, model, key);
    }
    if !kind.dup() {
        return 0;
    }
    // NEXT_NODUP lands on each key's first value, PREV_NODUP on its last.
    let firsts: Items = m
        .keys
        .iter()
        .map(|(k, set)| (kind.key_form(k), kind.value_form(first(set))))
        .collect();
    let got = collect(&mut c, Cursor::first, Cursor::next_nodup);
    assert!(got == firsts, "{label}: NEXT_NODUP walk");
    let lasts: Items = m
        .keys
        .iter()
        .rev()
        .map(|(k, set)| (kind.key_form(k), kind.value_form(last(set))))
        .collect();
    let got = collect(&mut c, Cursor::last, Cursor::prev_nodup);
    assert!(got == lasts, "{label}: PREV_NODUP walk");
    m.keys
        .iter()
        .map(|(k, set)| walk_dups(&mut c, kind, &kind.key_form(k), set))
        .max()
        .unwrap_or(0)
}

/// The DUP moves over one key's values (`key` in engine bytes); returns the size of the
/// node those values would need as a sub-page, as LMDB lays it out.
fn walk_dups(c: &mut Cursor<'_>, kind: &Kind, key: &[u8], set: &BTreeSet<Vec<u8>>) -> usize {
    let label = kind.label();
    let values: Vec<Vec<u8>> = set.iter().map(|v| kind.value_form(v)).collect();
    let value_of = |r: ferrocore::Result<Option<Item<'_>>>, what: &str| {
        let (k, v) = r
            .unwrap_or_else(|e| panic!("{label}: {what}: {e}"))
            .unwrap_or_else(|| panic!("{label}: {what} found nothing"));
        assert_eq!(k, key, "{label}: {what} stays on the key");
        v.to_vec()
    };
    assert!(
        value_of(c.set(key), "SET") == values[0],
        "{label}: SET lands on the first value"
    );
    assert_eq!(c.count().unwrap(), values.len() as u64, "{label}: count");
    let mut got = vec![value_of(c.current(), "GET_CURRENT")];
    while let Some((k, v)) = c.next_dup().unwrap() {
        assert_eq!(k, key, "{label}: NEXT_DUP stays on the key");
        got.push(v.to_vec());
    }
    assert!(
        got == values,
        "{label}: NEXT_DUP walk: {} values, model {}, first difference at {:?}",
        got.len(),
        values.len(),
        got.iter().zip(&values).position(|(a, b)| a != b)
    );
    assert!(
        value_of(c.last_dup(), "LAST_DUP") == values[values.len() - 1],
        "{label}: LAST_DUP"
    );
    let mut back = vec![value_of(c.current(), "GET_CURRENT")];
    while let Some((k, v)) = c.prev_dup().unwrap() {
        assert_eq!(k, key, "{label}: PREV_DUP stays on the key");
        back.push(v.to_vec());
    }
    back.reverse();
    assert!(back == values, "{label}: PREV_DUP walk");
    assert!(
        value_of(c.first_dup(), "FIRST_DUP") == values[0],
        "{label}: FIRST_DUP"
    );
    c.set(key).unwrap();
    if kind.fixed() {
        let mut packed = c.get_multiple().unwrap().expect("GET_MULTIPLE").to_vec();
        while let Some(more) = c.next_multiple().unwrap() {
            packed.extend_from_slice(more);
        }
        assert!(
            packed == values.concat(),
            "{label}: GET_MULTIPLE + NEXT_MULTIPLE give every value in order"
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
            assert!(rebuilt == packed, "{label}: PREV_MULTIPLE pages");
        }
    } else {
        // Not DUPFIXED: Incompatible, except that a single value stored in the node (not
        // in a sub-page) is handed out as it is.
        match c.get_multiple() {
            Err(Error::Incompatible) => {}
            Ok(Some(v)) => {
                assert_eq!(values.len(), 1, "{label}: GET_MULTIPLE outside DUPFIXED");
                assert!(
                    v == &values[0][..],
                    "{label}: GET_MULTIPLE of a single value"
                );
            }
            r => panic!("{label}: GET_MULTIPLE outside DUPFIXED: {r:?}"),
        }
    }
    // Bytes these values take as a sub-page in their node (LMDB's layout).
    let sub_page = if kind.fixed() {
        16 + values.len() * values[0].len()
    } else {
        16 + values
            .iter()
            .map(|v| 2 + (8 + v.len()).next_multiple_of(2))
            .sum::<usize>()
    };
    8 + key.len() + sub_page
}

/// A read-only op on DB `db` (handle `h`); returns what [`verify_db`] returns (0 for the
/// other ops).
fn read_op<V: View>(
    view: &V,
    h: Database,
    db: usize,
    model: &Model,
    op: &Op,
    shape: Shape,
) -> usize {
    let kind = &KINDS[db];
    let label = kind.label();
    let m = &model[&db];
    let key_of = |id: u16| kind.key_form(&kind.key(shape.key_id(db, id)));
    match *op {
        Op::Get { key, .. } | Op::GetBoth { key, .. } => {
            let k = key_of(key);
            if is_name(db, &k) {
                return 0;
            }
            check_key(view, h, db, model, &k);
            // SET: the key's first value, or nothing.
            let raw = kind.key_form(&k);
            let got: Items = view
                .cur(h)
                .set(&raw)
                .map(owned_item)
                .unwrap()
                .into_iter()
                .collect();
            let want: Expected = m
                .keys
                .get(&k)
                .map(|set| (raw.clone(), expected_value(kind, first(set))))
                .into_iter()
                .collect();
            same_items(label, "SET", &got, &want);
            if !kind.dup() || matches!(op, Op::Get { .. }) {
                return 0;
            }
            let Op::GetBoth { value, range, .. } = *op else {
                unreachable!("a GetBoth op")
            };
            let v = value_of(kind, m, &k, value, 0);
            let mut c = view.cur(h);
            let rv = kind.value_form(&v);
            let got = if range {
                c.get_both_range(&raw, &rv)
            } else {
                c.get_both(&raw, &rv)
            }
            .unwrap()
            .map(|(a, b)| (a.to_vec(), b.to_vec()));
            let found = m.keys.get(&k).and_then(|set| {
                if range {
                    set.range::<[u8], _>((Bound::Included(&v[..]), Bound::Unbounded))
                        .next()
                } else {
                    set.get(&v)
                }
            });
            let want = found.map(|w| (raw.clone(), kind.value_form(w)));
            assert!(
                got == want,
                "{label}: GET_BOTH{} {}/{}",
                if range { "_RANGE" } else { "" },
                hex_prefix(&raw),
                hex_prefix(&rv)
            );
        }
        Op::SeekRange { key, .. } => {
            let k = key_of(key);
            let raw = kind.key_form(&k);
            let mut c = view.cur(h);
            let got: Items = c
                .set_range(&raw)
                .map(owned_item)
                .unwrap()
                .into_iter()
                .collect();
            let want: Expected = m
                .keys
                .range::<[u8], _>((Bound::Included(&k[..]), Bound::Unbounded))
                .next()
                .map(|(mk, set)| (kind.key_form(mk), expected_value(kind, first(set))))
                .into_iter()
                .collect();
            same_items(label, "SET_RANGE", &got, &want);
        }
        Op::Verify { .. } => return verify_db(view, h, db, model),
        _ => unreachable!("not a read-only op: {op:?}"),
    }
    0
}

/// The handle of DB `db` in a read txn, or `None` if it does not exist there (checked
/// against `model`).
fn read_handle(read: &ReadTxn<'_>, db: usize, model: &Model) -> Option<Database> {
    let kind = &KINDS[db];
    match read.open_db(kind.name) {
        Ok(h) => {
            assert!(
                model.contains_key(&db),
                "{} exists, the model has no such DB",
                kind.label()
            );
            Some(h)
        }
        Err(Error::NotFound) => {
            assert!(!model.contains_key(&db), "{} is missing", kind.label());
            None
        }
        Err(e) => panic!("open {}: {e}", kind.label()),
    }
}

// ---------------------------------------------------------------------------------------
// After a cursor delete.
// ---------------------------------------------------------------------------------------

/// What a move answers right after a cursor delete, in model form: a pair, a count,
/// nothing (`NotFound`), or `InvalidArgument` (EINVAL: the cursor is not positioned).
#[derive(Clone, PartialEq, Eq)]
enum Answer {
    Pair(Vec<u8>, Vec<u8>),
    Count(u64),
    Nothing,
    Unpositioned,
}

impl fmt::Debug for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Pair(k, v) => write!(f, "Pair({}, {})", hex_prefix(k), hex_prefix(v)),
            Answer::Count(n) => write!(f, "Count({n})"),
            Answer::Nothing => write!(f, "Nothing"),
            Answer::Unpositioned => write!(f, "Unpositioned"),
        }
    }
}

fn pair_answer(pair: Option<(Vec<u8>, Vec<u8>)>) -> Answer {
    pair.map_or(Answer::Nothing, |(k, v)| Answer::Pair(k, v))
}

/// The answer of `follow` right after the cursor deleted `key`/`value` (or, with `all`,
/// every value of `key`); `m` is the DB after the delete. These are LMDB's answers
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
fn after_delete(m: &Db, key: &[u8], value: &[u8], all: bool, follow: Follow) -> Answer {
    if m.keys.is_empty() {
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
    let next_key_first = m
        .keys
        .range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded))
        .next()
        .map(|(k, s)| pair(k, first(s)));
    let prev_key_last = m
        .keys
        .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(key)))
        .next_back()
        .map(|(k, s)| pair(k, last(s)));
    match m.keys.get(key) {
        Some(set) => {
            assert!(!all, "NO_DUP_DATA removes the key");
            let k = key.to_vec();
            let next_value = set
                .range::<[u8], _>((Bound::Excluded(value), Bound::Unbounded))
                .next();
            let prev_value = set
                .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(value)))
                .next_back();
            match (next_value, follow) {
                (_, Follow::Count) => Answer::Count(set.len() as u64),
                (_, Follow::FirstDup) => pair(&k, first(set)),
                (_, Follow::LastDup) => pair(&k, last(set)),
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
                (None, Follow::Prev | Follow::PrevDup) => pair(&k, last(set)),
                (None, Follow::Current | Follow::NextDup | Follow::Delete) => Answer::Nothing,
            }
        }
        None => match (next_key_first, follow) {
            (Some(Answer::Pair(nk, _)), Follow::Count) => Answer::Count(m.keys[&nk].len() as u64),
            (Some(Answer::Pair(nk, _)), Follow::LastDup) => pair(&nk, last(&m.keys[&nk])),
            (
                Some(next),
                Follow::Current
                | Follow::Next
                | Follow::FirstDup
                | Follow::NextNodup
                | Follow::Delete,
            ) => next,
            (Some(_), Follow::NextDup | Follow::PrevDup) => Answer::Nothing,
            (_, Follow::Prev | Follow::PrevNodup) => or_nothing(prev_key_last),
            (None, Follow::PrevDup) => or_nothing(prev_key_last),
            (None, _) => Answer::Nothing,
            (Some(_), _) => unreachable!("every move is listed"),
        },
    }
}

/// Where the cursor stands during [`Op::CursorDelete`]'s moves.
enum At {
    /// Right after deleting `key`/`value` (with `all`: every value of `key`): the next
    /// move answers as [`after_delete`] says.
    Deleted {
        key: Vec<u8>,
        value: Vec<u8>,
        all: bool,
    },
    /// On a pair a move landed on: it is deleted before the next move.
    On(Vec<u8>, Vec<u8>),
}

/// A cursor answer in model form.
fn answer(kind: &Kind, r: ferrocore::Result<Option<Item<'_>>>) -> Answer {
    match r {
        Ok(Some((k, _))) if kind.name.is_none() && is_name(MAIN, k) => {
            Answer::Pair(k.to_vec(), RECORD.to_vec())
        }
        Ok(Some((k, v))) => Answer::Pair(kind.key_form(k), kind.value_form(v)),
        Ok(None) | Err(Error::NotFound) => Answer::Nothing,
        Err(Error::InvalidArgument(_)) => Answer::Unpositioned,
        Err(e) => panic!("{}: cursor move: {e}", kind.label()),
    }
}

/// Makes move `follow` (not Count or Delete).
fn make_move<'c>(
    c: &'c mut WriteCursor<'_, '_>,
    follow: Follow,
) -> ferrocore::Result<Option<Item<'c>>> {
    match follow {
        Follow::Current => c.current(),
        Follow::Next => c.next(),
        Follow::Prev => c.prev(),
        Follow::NextDup => c.next_dup(),
        Follow::PrevDup => c.prev_dup(),
        Follow::FirstDup => c.first_dup(),
        Follow::LastDup => c.last_dup(),
        Follow::NextNodup => c.next_nodup(),
        Follow::PrevNodup => c.prev_nodup(),
        Follow::Count | Follow::Delete => unreachable!("not a move: {follow:?}"),
    }
}

/// Puts the cursor on `key`/`value` (model form).
fn place(c: &mut WriteCursor<'_, '_>, kind: &Kind, key: &[u8], value: &[u8]) {
    let raw = kind.key_form(key);
    let found = if kind.dup() {
        c.get_both(&raw, &kind.value_form(value)).unwrap().is_some()
    } else {
        c.set(&raw).unwrap().is_some()
    };
    assert!(found, "{}: the pair to start from is there", kind.label());
}

// ---------------------------------------------------------------------------------------
// Running operations.
// ---------------------------------------------------------------------------------------

/// What a run exercised, for the long run to assert on.
#[derive(Debug, Default)]
struct Seen {
    /// Deepest nested txn.
    depth: usize,
    nested_commits: u64,
    nested_aborts: u64,
    /// `drop_db` calls: (emptied, deleted).
    drops: (u64, u64),
    /// Moves checked right after a cursor delete.
    after_delete_moves: u64,
    /// Per DB, the largest node a key's values would need as a sub-page (past
    /// [`NODE_MAX_BYTES`] they live in a sub-DB).
    largest_dup_node: [usize; DBS],
}

impl Seen {
    fn note_node(&mut self, db: usize, bytes: usize) {
        self.largest_dup_node[db] = self.largest_dup_node[db].max(bytes);
    }
}

/// What a run keeps across reopens.
#[derive(Default)]
struct State {
    committed: Model,
    /// The next op.
    pos: usize,
    seen: Seen,
}

/// How a write txn level ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Commit,
    Abort,
    Reopen,
    /// The ops ran out: every open level commits.
    Out,
}

/// The ops between two opens of the environment.
struct Segment<'e, 'o> {
    env: &'e Env,
    ops: &'o [Op],
    shape: Shape,
    state: State,
    snapshots: Vec<(ReadTxn<'e>, Model)>,
    /// Handles of named DBs known to be open.
    handles: BTreeMap<usize, Database>,
    /// Per open write txn level (the top txn first), what it did.
    levels: Vec<LevelLog>,
    /// DBs changed, or changed back by an abort, since their last full check.
    unverified: BTreeSet<usize>,
}

/// What one level of a write txn did.
#[derive(Default)]
struct LevelLog {
    /// The DBs it changed.
    changed: BTreeSet<usize>,
    /// The DBs whose handle it opened (as far as the model knows, first).
    opened: BTreeSet<usize>,
}

fn open(dir: &Path) -> Env {
    // Strict mode: every commit is followed by a full check of the new snapshot.
    open_env(
        dir,
        EnvOptions::new()
            .strict(true)
            .max_dbs(MAX_DBS)
            .flags(env_flags::NO_SYNC),
    )
}

impl<'e, 'o> Segment<'e, 'o> {
    fn new(env: &'e Env, ops: &'o [Op], shape: Shape, state: State) -> Self {
        let mut segment = Segment {
            env,
            ops,
            shape,
            state,
            snapshots: Vec::new(),
            handles: BTreeMap::new(),
            levels: Vec::new(),
            unverified: BTreeSet::new(),
        };
        // The environment as opened holds exactly the committed model.
        let read = env.begin_read().unwrap();
        verify_snapshot(&read, &segment.state.committed, &mut segment.state.seen);
        segment
    }

    /// Runs ops until a `Reopen` (true) or the end (false).
    fn run(&mut self) -> bool {
        while let Some(op) = self.ops.get(self.state.pos) {
            match op {
                // No write txn to end.
                Op::Commit | Op::Abort => self.state.pos += 1,
                Op::Reopen => {
                    self.state.pos += 1;
                    return true;
                }
                Op::Snapshot | Op::DropSnapshot { .. } => {
                    self.state.pos += 1;
                    self.snapshot_op(op);
                }
                op if op.reads_only() => {
                    self.state.pos += 1;
                    let db = op.db().expect("a read op has a DB");
                    let read = self.env.begin_read().unwrap();
                    let committed = &self.state.committed;
                    if let Some(h) = read_handle(&read, db, committed) {
                        let node = read_op(&read, h, db, committed, op, self.shape);
                        self.state.seen.note_node(db, node);
                    }
                }
                _ => {
                    let mut txn = self.env.begin_write().unwrap();
                    let mut model = self.state.committed.clone();
                    self.levels.push(LevelLog::default());
                    let end = self.level(&mut txn, &mut model, 0);
                    let log = self.levels.pop().expect("the top level's log");
                    match end {
                        End::Commit | End::Out => self.commit(txn, model, log.changed),
                        End::Abort | End::Reopen => {
                            txn.abort();
                            self.forget(log);
                        }
                    }
                    match end {
                        End::Reopen => return true,
                        End::Out => return false,
                        End::Commit | End::Abort => {}
                    }
                }
            }
        }
        false
    }

    /// Runs ops in write txn `txn` (at `depth`; `model` is what it holds) until it ends.
    fn level(&mut self, txn: &mut WriteTxn<'e>, model: &mut Model, depth: usize) -> End {
        self.state.seen.depth = self.state.seen.depth.max(depth);
        while let Some(op) = self.ops.get(self.state.pos) {
            self.state.pos += 1;
            match op {
                Op::Commit => return End::Commit,
                Op::Abort => return End::Abort,
                Op::Reopen => return End::Reopen,
                Op::Begin if depth < MAX_DEPTH => {
                    let mut child_model = model.clone();
                    let mut child = txn.begin_nested().unwrap();
                    self.levels.push(LevelLog::default());
                    let end = self.level(&mut child, &mut child_model, depth + 1);
                    let log = self.levels.pop().expect("the child's log");
                    if matches!(end, End::Commit | End::Out) {
                        child.commit().unwrap();
                        *model = child_model;
                        let parent = self.levels.last_mut().expect("the parent level");
                        parent.changed.extend(log.changed);
                        parent.opened.extend(log.opened);
                        self.state.seen.nested_commits += 1;
                    } else {
                        child.abort();
                        self.forget(log);
                        self.state.seen.nested_aborts += 1;
                    }
                    if matches!(end, End::Reopen | End::Out) {
                        return end;
                    }
                    // The parent holds what the child left, or what it held before.
                    for db in std::mem::take(&mut self.unverified) {
                        if let Some(h) = self.find_db(txn, model, db) {
                            let node = verify_db(&*txn, h, db, model);
                            self.state.seen.note_node(db, node);
                        }
                    }
                }
                Op::Begin => {}
                op => self.step(txn, model, op),
            }
        }
        End::Out
    }

    /// Commits the top txn and reads back what it changed.
    fn commit(&mut self, txn: WriteTxn<'e>, model: Model, touched: BTreeSet<usize>) {
        txn.commit().expect("commit");
        // The handles it opened are everyone's now.
        self.state.committed = model;
        let committed = &self.state.committed;
        let report = self.env.check().expect("invariants hold after commit");
        assert_eq!(
            report.named_dbs,
            committed.len() as u64 - 1,
            "named DBs after commit"
        );
        if committed[&MAIN].entries > 0 {
            assert!(report.tree_pages > 0, "a DB with data has pages");
        }
        let mut changed = touched;
        changed.append(&mut self.unverified);
        let read = self.env.begin_read().unwrap();
        for db in 0..DBS {
            let Some(h) = read_handle(&read, db, committed) else {
                continue;
            };
            assert_eq!(
                read.entries(h),
                committed[&db].entries,
                "{}: entries after commit",
                KINDS[db].label()
            );
            if changed.contains(&db) {
                let node = verify_db(&read, h, db, committed);
                self.state.seen.note_node(db, node);
            }
        }
    }

    fn snapshot_op(&mut self, op: &Op) {
        match *op {
            Op::Snapshot => {
                if self.snapshots.len() < 4 {
                    let read = self.env.begin_read().unwrap();
                    self.snapshots.push((read, self.state.committed.clone()));
                }
            }
            Op::DropSnapshot { which } => {
                if !self.snapshots.is_empty() {
                    let (read, model) = self.snapshots.remove(which % self.snapshots.len());
                    verify_snapshot(&read, &model, &mut self.state.seen);
                    read.check().expect("an old snapshot stays consistent");
                }
            }
            _ => unreachable!("not a snapshot op: {op:?}"),
        }
    }

    /// Checks the snapshots still open; the state to carry over to the next open.
    fn finish(mut self) -> State {
        for (read, model) in &self.snapshots {
            verify_snapshot(read, model, &mut self.state.seen);
        }
        self.snapshots.clear();
        self.state
    }

    /// A level ended without committing: what it changed is back as it was, to be checked
    /// again, and the handles it opened are closed (as LMDB closes a child txn's).
    fn forget(&mut self, log: LevelLog) {
        self.unverified.extend(log.changed);
        for db in log.opened {
            self.handles.remove(&db);
        }
    }

    fn touch(&mut self, db: usize) {
        self.levels
            .last_mut()
            .expect("a write txn is open")
            .changed
            .insert(db);
        self.unverified.insert(db);
    }

    fn note_handle(&mut self, db: usize, h: Database) {
        match self.handles.insert(db, h) {
            Some(old) => assert_eq!(
                old,
                h,
                "{}: open_db gives the handle the DB already has",
                KINDS[db].label()
            ),
            None => {
                self.levels
                    .last_mut()
                    .expect("a write txn is open")
                    .opened
                    .insert(db);
            }
        }
    }

    /// The handle of DB `db`, or `None` if it does not exist (checked against `model`).
    fn find_db(&mut self, txn: &mut WriteTxn<'e>, model: &Model, db: usize) -> Option<Database> {
        let Some(name) = KINDS[db].name else {
            return Some(Database::MAIN);
        };
        if !model.contains_key(&db) {
            let r = txn.open_db(Some(name), 0);
            assert!(
                matches!(r, Err(Error::NotFound)),
                "{name} does not exist, open_db answers {r:?}"
            );
            return None;
        }
        if let Some(&h) = self.handles.get(&db) {
            return Some(h);
        }
        let h = txn
            .open_db(Some(name), 0)
            .unwrap_or_else(|e| panic!("open {name}: {e}"));
        self.note_handle(db, h);
        Some(h)
    }

    /// The handle of DB `db`, which is created if it does not exist.
    fn ensure_db(&mut self, txn: &mut WriteTxn<'e>, model: &mut Model, db: usize) -> Database {
        let kind = &KINDS[db];
        if let Some(name) = kind.name {
            if !model.contains_key(&db) {
                let h = txn
                    .open_db(Some(name), db_flags::CREATE | u32::from(kind.flags))
                    .unwrap_or_else(|e| panic!("create {name}: {e}"));
                self.note_handle(db, h);
                create_db(model, db);
                self.touch(db);
                self.touch(MAIN);
                return h;
            }
        }
        self.find_db(txn, model, db).expect("the DB exists")
    }

    fn step(&mut self, txn: &mut WriteTxn<'e>, model: &mut Model, op: &Op) {
        let shape = self.shape;
        match *op {
            Op::Put {
                db,
                key,
                value,
                len,
                flags,
            } => self.put(txn, model, db, (key, value, len), flags),
            Op::Delete { db, key, value } => {
                let kind = &KINDS[db];
                let k = kind.key_form(&kind.key(shape.key_id(db, key)));
                if is_name(db, &k) {
                    return;
                }
                let h = self.ensure_db(txn, model, db);
                self.touch(db);
                let m = model.get_mut(&db).unwrap();
                let raw = kind.key_form(&k);
                let (deleted, existed) = match value {
                    None => (txn.delete(h, &raw), m.remove_key(&k)),
                    Some(pick) => {
                        let v = value_of(kind, m, &k, pick, 8);
                        let existed = if kind.dup() {
                            m.remove_pair(&k, &v)
                        } else {
                            m.remove_key(&k)
                        };
                        (
                            txn.delete_value(h, &raw, Some(&kind.value_form(&v))),
                            existed,
                        )
                    }
                };
                assert_eq!(
                    deleted.unwrap(),
                    existed,
                    "{}: delete of {} ({value:?})",
                    kind.label(),
                    hex_prefix(&raw)
                );
                check_key(&*txn, h, db, model, &k);
            }
            Op::CursorDelete {
                db,
                key,
                value,
                all,
                approach,
                ref follows,
            } => self.cursor_delete(txn, model, db, (key, value, all), approach, follows),
            Op::OpenDb { db, create } => self.open_db(txn, model, db, create),
            Op::DropDb { db, delete } => {
                let kind = &KINDS[db];
                let Some(name) = kind.name else { return };
                let h = self.ensure_db(txn, model, db);
                txn.drop_db(h, delete)
                    .unwrap_or_else(|e| panic!("drop {name}: {e}"));
                self.touch(db);
                if delete {
                    self.state.seen.drops.1 += 1;
                    delete_db(model, db);
                    self.handles.remove(&db);
                    self.touch(MAIN);
                    assert!(
                        matches!(txn.open_db(Some(name), 0), Err(Error::NotFound)),
                        "{name} is gone"
                    );
                    // As in LMDB, its handle is closed.
                    assert!(
                        matches!(txn.db_stat(h), Err(Error::BadDbi)),
                        "{name}'s handle is closed"
                    );
                } else {
                    self.state.seen.drops.0 += 1;
                    model.insert(db, Db::default());
                    assert_eq!(txn.entries(h), 0, "{name} is empty");
                }
            }
            Op::Snapshot | Op::DropSnapshot { .. } => self.snapshot_op(op),
            Op::Get { db, .. }
            | Op::SeekRange { db, .. }
            | Op::GetBoth { db, .. }
            | Op::Verify { db } => {
                let Some(h) = self.find_db(txn, model, db) else {
                    return;
                };
                let node = read_op(&*txn, h, db, model, op, shape);
                self.state.seen.note_node(db, node);
                if matches!(op, Op::Verify { .. }) {
                    self.unverified.remove(&db);
                }
            }
            Op::Begin | Op::Commit | Op::Abort | Op::Reopen => {
                unreachable!("txn ops are run by `level`")
            }
        }
    }

    fn put(
        &mut self,
        txn: &mut WriteTxn<'e>,
        model: &mut Model,
        db: usize,
        (key, value, len): (Pick, Pick, usize),
        flags: u32,
    ) {
        let kind = &KINDS[db];
        let dup = kind.dup();
        let h = self.ensure_db(txn, model, db);
        let m = &model[&db];
        let last_key = m.keys.keys().next_back().cloned();
        let k = match key {
            Pick::Id(id) => kind.key_form(&kind.key(self.shape.key_id(db, id))),
            Pick::AfterLast | Pick::Existing(_) => match &last_key {
                Some(last) => match kind.key_after(last) {
                    Some(k) => k,
                    None => return,
                },
                None => kind.key_form(&kind.key(0)),
            },
        };
        if is_name(db, &k) {
            return;
        }
        let set = m.keys.get(&k);
        let v = match (value, set) {
            (Pick::AfterLast, Some(set)) if dup => match kind.value_after(last(set)) {
                Some(v) => v,
                None => return,
            },
            _ => value_of(kind, m, &k, value, len),
        };
        let in_order =
            flags & put_flags::APPEND == 0 || last_key.as_ref().is_none_or(|last| k > *last);
        let dup_in_order =
            !dup || flags & put_flags::APPEND_DUP == 0 || set.is_none_or(|set| v > *last(set));
        let key_taken = flags & put_flags::NO_OVERWRITE != 0 && set.is_some();
        let pair_taken =
            dup && flags & put_flags::NO_DUP_DATA != 0 && set.is_some_and(|set| set.contains(&v));
        let label = kind.label();
        match txn.put(h, &kind.key_form(&k), &kind.value_form(&v), flags) {
            Ok(()) => {
                assert!(in_order, "{label}: APPEND took a key out of order");
                assert!(
                    dup_in_order,
                    "{label}: APPEND_DUP took a value out of order"
                );
                assert!(!key_taken, "{label}: NO_OVERWRITE changed an existing key");
                assert!(!pair_taken, "{label}: NO_DUP_DATA took an existing pair");
                model.get_mut(&db).unwrap().put(k.clone(), v, dup);
            }
            Err(Error::KeyExist) => assert!(
                !in_order || !dup_in_order || key_taken || pair_taken,
                "{label}: put of {} refused with KeyExist (flags {flags:#x})",
                hex_prefix(&k)
            ),
            Err(e) => panic!("{label}: put: {e}"),
        }
        // Even a refused put may change the tree (APPEND_DUP makes a set of a single
        // value before it finds the order wrong, as LMDB does).
        self.touch(db);
        check_key(&*txn, h, db, model, &k);
    }

    fn open_db(&mut self, txn: &mut WriteTxn<'e>, model: &mut Model, db: usize, create: bool) {
        let kind = &KINDS[db];
        let Some(name) = kind.name else { return };
        let flags = if create {
            db_flags::CREATE | u32::from(kind.flags)
        } else {
            0
        };
        match txn.open_db(Some(name), flags) {
            Ok(h) => {
                if !model.contains_key(&db) {
                    assert!(
                        create,
                        "{name} opened without CREATE, but it does not exist"
                    );
                    create_db(model, db);
                    self.touch(db);
                    self.touch(MAIN);
                }
                self.note_handle(db, h);
                assert_eq!(txn.db_flags(h).unwrap(), kind.flags, "{name}'s flags");
                assert_eq!(txn.entries(h), model[&db].entries, "{name}'s entries");
            }
            Err(Error::NotFound) => assert!(
                !create && !model.contains_key(&db),
                "{name} not found (create: {create})"
            ),
            Err(e) => panic!("open {name}: {e}"),
        }
    }

    /// [`Op::CursorDelete`]: reaches the pair, deletes it, then for each of `follows`
    /// checks the move against [`after_delete`] and, where the move lands on a pair,
    /// deletes that one before the next move.
    fn cursor_delete(
        &mut self,
        txn: &mut WriteTxn<'e>,
        model: &mut Model,
        db: usize,
        (key, value, all): (u16, u16, bool),
        approach: Approach,
        follows: &[Follow],
    ) {
        let kind = &KINDS[db];
        let label = kind.label();
        let dup = kind.dup();
        let all = all && dup;
        let h = self.ensure_db(txn, model, db);
        self.touch(db);
        let m = model.get_mut(&db).unwrap();
        let k = kind.key_form(&kind.key(self.shape.key_id(db, key)));
        let v = kind.value_form(&kind.value(value, 8));
        // The pair to delete: the first value >= v of the first key >= k (not a DB's name).
        let Some((ck, set)) = m
            .keys
            .range::<[u8], _>((Bound::Included(&k[..]), Bound::Unbounded))
            .find(|(k, _)| !is_name(db, k))
        else {
            return;
        };
        let ck = ck.clone();
        let mut cv = set
            .range::<[u8], _>((Bound::Included(&v[..]), Bound::Unbounded))
            .next()
            .unwrap_or_else(|| first(set))
            .clone();
        let before = m.pair_before(&ck, &cv);
        let after = m.pair_after(&ck, &cv);
        let prev_key = m
            .keys
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(&ck[..])))
            .next_back()
            .map(|(pk, set)| (pk.clone(), first(set).clone()));
        let mut c = txn.cursor_mut(h).unwrap();
        let reached = match (approach, before, prev_key, after) {
            (Approach::Next, Some((pk, pv)), _, _) => {
                place(&mut c, kind, &pk, &pv);
                answer(kind, c.next())
            }
            (Approach::NextNodup, _, Some((pk, pv)), _) => {
                cv = first(&m.keys[&ck]).clone();
                place(&mut c, kind, &pk, &pv);
                answer(kind, c.next_nodup())
            }
            (Approach::Prev, _, _, Some((nk, nv))) => {
                place(&mut c, kind, &nk, &nv);
                answer(kind, c.prev())
            }
            _ => {
                let raw = kind.key_form(&ck);
                let found = answer(kind, c.set_range(&raw));
                if dup {
                    answer(kind, c.get_both_range(&raw, &kind.value_form(&cv)))
                } else {
                    found
                }
            }
        };
        assert_eq!(
            reached,
            Answer::Pair(ck.clone(), cv.clone()),
            "{label}: {approach:?} reaches the pair"
        );
        c.delete(if all { put_flags::NO_DUP_DATA } else { 0 })
            .unwrap_or_else(|e| panic!("{label}: cursor delete: {e}"));
        let removed = if all {
            m.remove_key(&ck)
        } else {
            m.remove_pair(&ck, &cv)
        };
        assert!(removed, "the model had the pair");
        // The pairs deleted (`None`: every value of the key), to look for afterwards.
        let mut gone = vec![(ck.clone(), (!all).then(|| cv.clone()))];
        let mut at = At::Deleted {
            key: ck,
            value: cv,
            all,
        };
        for &follow in follows {
            let follow = if dup { follow } else { follow.without_dups() };
            let (key, value, all) = match at {
                At::Deleted { key, value, all } => (key, value, all),
                // The test deletes no DB through the main DB.
                At::On(key, _) if is_name(db, &key) => break,
                At::On(key, value) => {
                    c.delete(0)
                        .unwrap_or_else(|e| panic!("{label}: cursor delete: {e}"));
                    assert!(m.remove_pair(&key, &value), "the model had the pair");
                    gone.push((key.clone(), Some(value.clone())));
                    (key, value, false)
                }
            };
            let want = after_delete(m, &key, &value, all, follow);
            if matches!((follow, &want), (Follow::Delete, Answer::Pair(k, _)) if is_name(db, k)) {
                break;
            }
            let got = match follow {
                Follow::Count => match c.count() {
                    Ok(n) => Answer::Count(n),
                    Err(Error::NotFound) => Answer::Nothing,
                    Err(Error::InvalidArgument(_)) => Answer::Unpositioned,
                    Err(e) => panic!("{label}: count after a delete: {e}"),
                },
                // A second delete removes the pair the cursor stands on; that it removed
                // the model's pair is checked in the DB below.
                Follow::Delete => {
                    match c.delete(0) {
                        Ok(()) => {
                            let Answer::Pair(k2, v2) = &want else {
                                panic!("{label}: a second delete succeeded with nothing under the cursor")
                            };
                            assert!(m.remove_pair(k2, v2), "the model had the pair");
                            gone.push((k2.clone(), Some(v2.clone())));
                            want.clone()
                        }
                        Err(Error::NotFound) => Answer::Nothing,
                        Err(Error::InvalidArgument(_)) => Answer::Unpositioned,
                        Err(e) => panic!("{label}: second delete: {e}"),
                    }
                }
                _ => answer(kind, make_move(&mut c, follow)),
            };
            self.state.seen.after_delete_moves += 1;
            assert_eq!(
                got,
                want,
                "{label}: {follow:?} after deleting {}/{} (all: {all}, reached by {approach:?})",
                hex_prefix(&key),
                hex_prefix(&value)
            );
            at = match (follow, got) {
                // Neither moves the cursor.
                (Follow::Count, Answer::Count(_)) | (_, Answer::Unpositioned) => {
                    At::Deleted { key, value, all }
                }
                // After a delete that removed the key, the cursor stays in that state
                // (as in LMDB): NEXT_DUP finds nothing, NEXT_NODUP lands on the next
                // key's first value. Otherwise it is as after deleting the second pair.
                (Follow::Delete, Answer::Pair(..)) if !m.keys.contains_key(&key) => {
                    At::Deleted { key, value, all }
                }
                (Follow::Delete, Answer::Pair(k2, v2)) => At::Deleted {
                    key: k2,
                    value: v2,
                    all: false,
                },
                // GET_CURRENT takes the cursor off the deleted mark: NEXT moves past the
                // item it answered (as LMDB).
                (Follow::Current, Answer::Pair(k2, v2)) => {
                    let succ = m.pair_after(&k2, &v2);
                    let next = answer(kind, c.next());
                    assert_eq!(
                        next,
                        pair_answer(succ.clone()),
                        "{label}: NEXT after GET_CURRENT"
                    );
                    match succ {
                        Some((k3, v3)) => At::On(k3, v3),
                        None => break,
                    }
                }
                (_, Answer::Pair(k2, v2)) => At::On(k2, v2),
                _ => break,
            };
        }
        drop(c);
        for (k, v) in &gone {
            let raw = kind.key_form(k);
            let still = match v {
                Some(v) if dup => txn
                    .cursor(h)
                    .unwrap()
                    .get_both(&raw, &kind.value_form(v))
                    .unwrap()
                    .is_some(),
                _ => txn.get(h, &raw).unwrap().is_some(),
            };
            assert!(!still, "{label}: the cursor deleted {}", hex_prefix(k));
        }
        assert_eq!(
            txn.entries(h),
            model[&db].entries,
            "{label}: entries after cursor deletes"
        );
    }
}

/// Checks every DB of a snapshot against `model`.
fn verify_snapshot(read: &ReadTxn<'_>, model: &Model, seen: &mut Seen) {
    for db in 0..DBS {
        if let Some(h) = read_handle(read, db, model) {
            seen.note_node(db, verify_db(read, h, db, model));
        }
    }
}

/// What a run ends with: the main DB's figures, the last check, what it exercised.
struct Outcome {
    stat: Stat,
    report: CheckReport,
    seen: Seen,
}

fn run(ops: &[Op], shape: Shape) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let mut state = State::default();
    state.committed.insert(MAIN, Db::default());
    loop {
        let env = open(dir.path());
        let mut segment = Segment::new(&env, ops, shape, state);
        let reopen = segment.run();
        state = segment.finish();
        if !reopen {
            break;
        }
    }
    let env = open(dir.path());
    verify_snapshot(
        &env.begin_read().unwrap(),
        &state.committed,
        &mut state.seen,
    );
    Outcome {
        stat: env.stat().unwrap(),
        report: env.check().unwrap(),
        seen: state.seen,
    }
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        // Few keys per DUPSORT DB: value sets grow from a single value to a sub-page.
        Just(Shape {
            main: 600,
            named: 200,
            dups: 6
        }),
        // Many keys with one to a few values each: keys go from one value to several and
        // back, so cursor deletes often remove a whole key (where LMDB's values cursor
        // can go stale, see `Approach`).
        Just(Shape {
            main: 600,
            named: 200,
            dups: 48
        }),
        // Few keys everywhere: most puts and deletes hit existing keys.
        Just(Shape {
            main: 24,
            named: 8,
            dups: 2
        }),
    ]
}

/// The DB a case puts half of its ops on: a DUPSORT DB for 60% (their cursor moves
/// after a delete have the most cases), the main DB for 20%.
fn focus() -> impl Strategy<Value = usize> {
    prop_oneof![2 => Just(MAIN), 2 => 1usize..4, 6 => 4..DBS]
}

/// Cases per run of the proptest: `FERROCORE_MODEL_CASES`, 256 by default.
fn cases() -> u32 {
    std::env::var("FERROCORE_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 4000,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct("tests/model.proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_operations_match_the_model(
        (sizes, ops) in (shape(), proptest::option::weighted(0.8, focus()))
            .prop_flat_map(|(sizes, focus)| (Just(sizes), proptest::collection::vec(op(focus), 1..600)))
    ) {
        run(&ops, sizes);
    }
}

/// Cases proptest once shrank failures to (the tests they came from had other ops).
#[test]
fn earlier_failures() {
    let shape = Shape {
        main: 600,
        named: 200,
        dups: 6,
    };
    let put = |key, len| Op::Put {
        db: MAIN,
        key: Pick::Id(key),
        value: Pick::Id(key),
        len,
        flags: 0,
    };
    // Overflow values, then three cursor deletes in a row.
    run(
        &[
            put(116, 0),
            put(50, 1500),
            put(166, 1511),
            put(111, 214),
            put(69, 1500),
            Op::CursorDelete {
                db: MAIN,
                key: 15,
                value: 0,
                all: false,
                approach: Approach::Seek,
                follows: vec![Follow::Next, Follow::Current, Follow::Next],
            },
            Op::Commit,
            Op::Delete {
                db: MAIN,
                key: 0,
                value: None,
            },
        ],
        shape,
    );
    // The ops end in a nested txn.
    run(&[Op::Begin], shape);
}

/// One long deterministic run: deep trees, overflow pages, page reuse, value sets in
/// sub-DBs, nested txns several deep, named DBs dropped and created again.
#[test]
fn long_run_matches_the_model() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let ops = proptest::collection::vec(op(None), 30000)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    // Keep whole keys in the DUPSORT DBs, so that their value sets grow past a sub-page.
    let ops: Vec<Op> = ops
        .into_iter()
        .filter(|op| {
            let whole_keys = matches!(
                op,
                Op::DropDb { .. }
                    | Op::Delete { value: None, .. }
                    | Op::CursorDelete { all: true, .. }
            );
            !(whole_keys && op.db().is_some_and(|db| KINDS[db].dup()))
        })
        .collect();
    let shape = Shape {
        main: 8000,
        named: 400,
        dups: 1,
    };
    let out = run(&ops, shape);
    println!("long run: {:?} {:?} {:?}", out.stat, out.report, out.seen);
    assert!(out.stat.depth >= 3, "main DB depth {}", out.stat.depth);
    assert!(out.stat.overflow_pages > 0, "overflow pages");
    assert!(out.report.free_pages > 0, "free pages");
    // (INTEGERDUP's 8-byte values would need more than 250 per key: the random cases
    // keep that DB's sets in sub-pages.)
    for (kind, &largest) in KINDS.iter().zip(&out.seen.largest_dup_node) {
        if kind.dup() && kind.flags & db_flags::INTEGER_DUP == 0 {
            assert!(
                largest > NODE_MAX_BYTES,
                "{}: value sets grew large enough to need sub-DBs ({largest} bytes)",
                kind.label(),
            );
        }
    }
    assert!(out.seen.depth >= 4, "nested depth {}", out.seen.depth);
    assert!(out.seen.nested_commits > 0 && out.seen.nested_aborts > 0);
    assert!(
        out.seen.drops.0 > 0 && out.seen.drops.1 > 0,
        "drops {:?}",
        out.seen.drops
    );
}

/// A DB the write txn changed and a nested txn deleted (closing its handle, as LMDB's
/// mdb_drop does) comes back when the nested txn aborts, with its changes, under the
/// number it is opened with next; another DB taking its old number, before or after the
/// abort, takes nothing of it (`WriteTxn::adopt_named`). Before that fix the DB read as
/// before the txn, or the commit left a damaged file.
#[test]
fn a_db_deleted_in_an_aborted_nested_txn_keeps_its_changes() {
    let dir = tempfile::tempdir().unwrap();
    let env = open(dir.path());
    let ints = db_flags::CREATE | u32::from(db_flags::INTEGER_KEY);
    // Another DB takes the number before the abort.
    let mut txn = env.begin_write().unwrap();
    let a = txn.open_db(Some("plain"), db_flags::CREATE).unwrap();
    txn.put(a, b"k", b"v", 0).unwrap();
    let mut child = txn.begin_nested().unwrap();
    child.drop_db(a, true).unwrap();
    child.open_db(Some("ints"), ints).unwrap();
    child.abort();
    let a = txn.open_db(Some("plain"), 0).unwrap();
    assert_eq!(
        txn.get(a, b"k").unwrap(),
        Some(&b"v"[..]),
        "read in the txn"
    );
    txn.abort();
    // Another DB takes the number after the abort.
    let mut txn = env.begin_write().unwrap();
    let a = txn.open_db(Some("plain"), db_flags::CREATE).unwrap();
    txn.put(a, b"k", b"v", 0).unwrap();
    let mut child = txn.begin_nested().unwrap();
    child.drop_db(a, true).unwrap();
    child.abort();
    txn.open_db(Some("ints"), ints).unwrap();
    txn.commit().unwrap();
    env.check().expect("the commit leaves a sound file");
}

/// As LMDB (`mdb_dbis_update` when a child txn ends), a nested txn that aborts closes the
/// handles it opened, and only those: a handle that outlived its level could name a DB the
/// txn no longer has, and writes through it leaked pages.
#[test]
fn an_aborted_nested_txn_closes_the_handles_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let ints = db_flags::CREATE | u32::from(db_flags::INTEGER_KEY);
    {
        let env = open(dir.path());
        let mut txn = env.begin_write().unwrap();
        let plain = txn.open_db(Some("plain"), db_flags::CREATE).unwrap();
        txn.put(plain, b"k", b"v", 0).unwrap();
        let mut child = txn.begin_nested().unwrap();
        let created = child.open_db(Some("ints"), ints).unwrap();
        child.put(created, &1u32.to_ne_bytes(), b"one", 0).unwrap();
        assert_eq!(child.open_db(Some("plain"), 0).unwrap(), plain);
        child.abort();
        assert!(
            matches!(txn.db_stat(created), Err(Error::BadDbi)),
            "the handle the child opened is closed"
        );
        assert!(matches!(
            txn.put(created, &2u32.to_ne_bytes(), b"two", 0),
            Err(Error::BadDbi)
        ));
        assert!(matches!(txn.open_db(Some("ints"), 0), Err(Error::NotFound)));
        assert_eq!(txn.get(plain, b"k").unwrap(), Some(&b"v"[..]));
        let ints_db = txn.open_db(Some("ints"), ints).unwrap();
        txn.put(ints_db, &3u32.to_ne_bytes(), b"three", 0).unwrap();
        txn.commit().unwrap();
        env.check().expect("a sound file");
    }
    // An existing DB first opened in a child: closed by its abort too; one the parent had
    // opened stays open.
    let env = open(dir.path());
    let mut txn = env.begin_write().unwrap();
    let plain = txn.open_db(Some("plain"), 0).unwrap();
    let mut child = txn.begin_nested().unwrap();
    let existing = child.open_db(Some("ints"), 0).unwrap();
    child
        .put(existing, &4u32.to_ne_bytes(), b"four", 0)
        .unwrap();
    child.abort();
    assert!(matches!(txn.db_stat(existing), Err(Error::BadDbi)));
    assert_eq!(txn.get(plain, b"k").unwrap(), Some(&b"v"[..]));
    let reopened = txn.open_db(Some("ints"), 0).unwrap();
    assert_eq!(txn.db_stat(reopened).unwrap().entries, 1);
    txn.commit().unwrap();
    env.check().expect("a sound file");
}

/// A DB has one state in a write txn, whatever handle number reaches it. Here the txn
/// changed `plain` through a handle a nested txn's drop closed (the abort brings the DB
/// back, not the handle), and a read txn then opened `plain` under another number: writes
/// through that number must see and keep the txn's changes. Before, they started again
/// from the DB's committed record, and the commit wrote both records (a leaked page).
#[test]
fn a_db_keeps_one_state_when_its_handle_number_changes() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = open(dir.path());
        let mut txn = env.begin_write().unwrap();
        let plain = txn.open_db(Some("plain"), db_flags::CREATE).unwrap();
        txn.open_db(Some("other"), db_flags::CREATE).unwrap();
        txn.put(plain, b"committed", b"1", 0).unwrap();
        txn.commit().unwrap();
    }
    // Opened again: no handle is open yet.
    let env = open(dir.path());
    let mut txn = env.begin_write().unwrap();
    let plain = txn.open_db(Some("plain"), 0).unwrap();
    for i in 0..200u32 {
        txn.put(plain, format!("key{i:04}").as_bytes(), &[7; 64], 0)
            .unwrap();
    }
    let mut child = txn.begin_nested().unwrap();
    child.drop_db(plain, true).unwrap();
    child.abort();
    // `plain`'s handle is closed; a read txn opens another DB into its slot, then `plain`.
    let read = env.begin_read().unwrap();
    let taken = read.open_db(Some("other")).unwrap();
    let moved = read.open_db(Some("plain")).unwrap();
    assert_eq!(taken, plain, "the closed slot is reused first");
    assert_ne!(moved, plain);
    drop(read);
    assert_eq!(
        txn.db_stat(moved).unwrap().entries,
        201,
        "the txn's changes, through the new number"
    );
    txn.put(moved, b"last", b"2", 0).unwrap();
    txn.commit().unwrap();
    env.check().expect("one record per DB, no leaked page");
    let read = env.begin_read().unwrap();
    let plain = read.open_db(Some("plain")).unwrap();
    assert_eq!(read.db_stat(plain).unwrap().entries, 202);
}
