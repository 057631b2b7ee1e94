//! Two-way compatibility with the real LMDB C library (mdb.master 0.9.70, through the
//! `lmdb-master-sys` dev-dependency) and, when installed, Debian's `lmdb-utils` tools.
//!
//! Every test hands one environment back and forth between the two engines. The linked
//! LMDB keeps a newer lock-file format than LMDB 0.9 (whose layout ferrocore shares), so
//! these two never have the same environment open at the same time: each re-initialises
//! the lock file when it is alone. Debian's LMDB 0.9 tools share a live one.
//!
//! Everything is compared in full against a `BTreeMap` model: cursor scans item by item,
//! point gets of every key, gets of deleted keys, and the DB records (`MDB_stat`) the two
//! engines report for the same file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use ferrocore::{Database, Env, EnvOptions, Stat};

mod common;
use common::engines::{Engine, KvCursor, KvTxn, KvWriteTxn, Op as CursorOp};
use common::{
    decode_hex_line, hex_prefix, lmdb, lmdb_utils_available, open_env, stat_tuple_fc,
    stat_tuple_lm, Rng, LMDB_MAP_SIZE,
};

// ---------------------------------------------------------------------------------------
// Deterministic data.
// ---------------------------------------------------------------------------------------

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys known to be absent (deleted at some point and not put again).
type Gone = BTreeSet<Vec<u8>>;

/// How keys and values are drawn.
#[derive(Clone, Copy)]
struct Shape {
    key: fn(&mut Rng) -> Vec<u8>,
    value: fn(&mut Rng) -> Vec<u8>,
}

/// Keys of 1..=511 random bytes.
fn key_any(rng: &mut Rng) -> Vec<u8> {
    let len = rng.range(1, 511);
    rng.bytes(len)
}

/// Values of 0..=3000 bytes (so some overflow at 4 KiB pages), and now and then 10-100 KB.
fn value_mixed(rng: &mut Rng) -> Vec<u8> {
    let len = if rng.chance(1, 150) {
        rng.range(10_000, 100_000)
    } else {
        rng.range(0, 3000)
    };
    rng.bytes(len)
}

/// Mostly short keys (many items per page), some up to 511 bytes.
fn key_mostly_short(rng: &mut Rng) -> Vec<u8> {
    let len = if rng.chance(1, 20) {
        rng.range(33, 511)
    } else {
        rng.range(4, 32)
    };
    rng.bytes(len)
}

/// Mostly small values, some near and over the overflow limit, a few 10-100 KB.
fn value_mostly_small(rng: &mut Rng) -> Vec<u8> {
    let len = match rng.below(1000) {
        0..=1 => rng.range(10_000, 100_000),
        2..=40 => rng.range(1500, 5000),
        _ => rng.range(0, 120),
    };
    rng.bytes(len)
}

/// Small values only (single-page allocations).
fn value_small(rng: &mut Rng) -> Vec<u8> {
    let len = rng.range(0, 200);
    rng.bytes(len)
}

/// One change, as both engines must apply it.
enum Op {
    Put(Vec<u8>, Vec<u8>),
    /// Delete; the bool says whether the key exists at that point.
    Del(Vec<u8>, bool),
}

/// Draws the changes of one txn and applies them to the model, in order: `new` puts of
/// absent keys, `over` overwrites, `del` deletes of present keys, and a few deletes of
/// absent keys, interleaved at random.
fn gen_ops(
    rng: &mut Rng,
    model: &mut Model,
    gone: &mut Gone,
    shape: Shape,
    mut new: usize,
    mut over: usize,
    mut del: usize,
) -> Vec<Op> {
    let mut keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    let mut ops = Vec::new();
    let mut absent_dels = (new + over + del) / 100 + 1;
    while new + over + del + absent_dels > 0 {
        let pick = rng.below(new + over + del + absent_dels);
        if pick < new {
            new -= 1;
            // Sometimes bring back a deleted key.
            let key = match gone.iter().next() {
                Some(k) if rng.chance(1, 10) => k.clone(),
                _ => loop {
                    let k = (shape.key)(rng);
                    if !model.contains_key(&k) {
                        break k;
                    }
                },
            };
            let value = (shape.value)(rng);
            gone.remove(&key);
            model.insert(key.clone(), value.clone());
            keys.push(key.clone());
            ops.push(Op::Put(key, value));
        } else if pick < new + over {
            over -= 1;
            if keys.is_empty() {
                continue;
            }
            let key = keys[rng.below(keys.len())].clone();
            let value = (shape.value)(rng);
            model.insert(key.clone(), value.clone());
            ops.push(Op::Put(key, value));
        } else if pick < new + over + del {
            del -= 1;
            if keys.is_empty() {
                continue;
            }
            let key = keys.swap_remove(rng.below(keys.len()));
            model.remove(&key).expect("model key");
            gone.insert(key.clone());
            ops.push(Op::Del(key, true));
        } else {
            absent_dels -= 1;
            let key = loop {
                let k = (shape.key)(rng);
                if !model.contains_key(&k) {
                    break k;
                }
            };
            ops.push(Op::Del(key, false));
        }
    }
    ops
}

/// Puts at the size boundaries of `page_size` (applied to the model): for several key
/// lengths, values of 0 bytes, the largest inline value and one byte less and more (LMDB's
/// `nodemax` rule), and overflow runs of exactly 1 and 2 pages and one byte more. `rot`
/// rotates which key gets which size, so that a later call with another `rot` turns
/// inline values into overflow runs and back, and changes run lengths.
fn edge_ops(
    page_size: usize,
    rot: usize,
    rng: &mut Rng,
    model: &mut Model,
    gone: &mut Gone,
) -> Vec<Op> {
    let nodemax = (((page_size - 16) / 2) & !1) - 2;
    let mut ops = Vec::new();
    for klen in [2usize, 8, 100, 511] {
        let inline_max = nodemax - 8 - klen;
        let sizes = [
            0,
            inline_max - 1,
            inline_max,
            inline_max + 1,
            page_size - 16,
            page_size - 15,
            2 * page_size - 16,
            2 * page_size - 15,
        ];
        for i in 0..sizes.len() {
            let mut key = vec![0xEE; klen];
            key[1] = i as u8;
            let value = rng.bytes(sizes[(i + rot) % sizes.len()]);
            gone.remove(&key);
            model.insert(key.clone(), value.clone());
            ops.push(Op::Put(key, value));
        }
    }
    ops
}

/// Keys above every random key (eight 0xFF bytes, then a big-endian counter), so that
/// they can be appended in order; `tail` > 0 gives a key just after `append_key(i, 0)`.
fn append_key(i: u32, tail: u8) -> Vec<u8> {
    let mut k = vec![0xFF; 8];
    k.extend_from_slice(&i.to_be_bytes());
    if tail > 0 {
        k.push(tail);
    }
    k
}

/// Compares a full scan with the model, reporting the first difference readably.
fn assert_scan_matches(ctx: &str, scan: &[(Vec<u8>, Vec<u8>)], model: &Model) {
    for (i, ((k, v), (mk, mv))) in scan.iter().zip(model.iter()).enumerate() {
        assert!(
            k == mk,
            "{ctx}: scan item {i} has key {} but the model has {}",
            hex_prefix(k),
            hex_prefix(mk)
        );
        assert!(
            v == mv,
            "{ctx}: scan item {i} (key {}) has value {} but the model has {}",
            hex_prefix(k),
            hex_prefix(v),
            hex_prefix(mv)
        );
    }
    assert_eq!(
        scan.len(),
        model.len(),
        "{ctx}: scan returned {} items, the model has {}",
        scan.len(),
        model.len()
    );
}

/// Probes at most this many deleted keys per verification.
const GONE_PROBES: usize = 3000;

fn assert_stat_eq(ctx: &str, lm: &lmdb_master_sys::MDB_stat, fc: &Stat) {
    let lm_tuple = stat_tuple_lm(lm);
    let fc_tuple = stat_tuple_fc(fc);
    assert_eq!(
        lm_tuple, fc_tuple,
        "{ctx}: (psize, depth, branch, leaf, overflow, entries) differ: LMDB vs ferrocore"
    );
}

// ----- ferrocore side -----

fn fc_open(path: &Path) -> Env {
    open_env(path, &EnvOptions::new())
}

/// Every item of DB `db` of either engine, in order (MDB_FIRST, then MDB_NEXT).
fn scan<E: Engine>(env: &E, db: E::Dbi) -> Vec<(Vec<u8>, Vec<u8>)> {
    let txn = env.read_txn();
    let mut cur = txn.cursor_ro(db);
    let mut out = Vec::new();
    let mut item = cur.item(CursorOp::First);
    while let Some(kv) = item {
        out.push(kv);
        item = cur.item(CursorOp::Next);
    }
    out
}

/// A free-DB record: the txn id key and the page numbers of its IDL.
type FreeRecord = (u64, Vec<u64>);

/// Decodes free-DB records: an 8-byte txn id key, and an IDL value (a u64 count, then
/// that many page numbers, descending; the value may be longer than that).
fn decode_free(raw: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<FreeRecord> {
    let word = |b: &[u8], i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
    raw.into_iter()
        .map(|(k, v)| {
            assert_eq!(k.len(), 8, "free-DB key length");
            let count = word(&v, 0) as usize;
            assert!(
                8 * (count + 1) <= v.len(),
                "free-DB record count exceeds its value"
            );
            let pages: Vec<u64> = (1..=count).map(|i| word(&v, i)).collect();
            assert!(pages.windows(2).all(|w| w[0] > w[1]), "IDL not descending");
            (word(&k, 0), pages)
        })
        .collect()
}

/// The free DB's records, read through either engine.
fn free_records<E: Engine>(env: &E) -> Vec<FreeRecord> {
    decode_free(scan(env, E::free_db()))
}

/// Asserts that some page listed free in `before` is no longer free in `after`: the
/// writer in between reused it (every page is either in a tree or listed free).
fn assert_reused(ctx: &str, before: &[FreeRecord], after: &[FreeRecord]) {
    let now_free: BTreeSet<u64> = after.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    let was_free: BTreeSet<u64> = before.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    let reused = was_free.difference(&now_free).count();
    assert!(
        reused > 0,
        "{ctx}: none of the {} pages free before were reused",
        was_free.len()
    );
}

/// Applies `ops` to the main DB in one write txn of either engine.
fn apply<E: Engine>(env: &E, ops: &[Op]) {
    let mut txn = env.write_txn();
    let db = txn.open_dbi(None, 0).expect("the main DB");
    for op in ops {
        match op {
            Op::Put(k, v) => txn
                .put_item(db, k, v, 0)
                .unwrap_or_else(|e| panic!("{} put: {e:?}", E::NAME)),
            Op::Del(k, existed) => assert_eq!(
                txn.del_item(db, k, None)
                    .unwrap_or_else(|e| panic!("{} delete: {e:?}", E::NAME)),
                *existed,
                "{} delete of {}",
                E::NAME,
                hex_prefix(k)
            ),
        }
    }
    txn.commit_txn();
}

/// Either engine's main DB holds exactly `model`: a scan, a get of every key, a get of
/// some deleted keys, and the entry count.
fn verify<E: Engine>(ctx: &str, env: &E, model: &Model, gone: &Gone) {
    let main = env.read_txn().open_dbi(None, 0).expect("the main DB");
    assert_scan_matches(ctx, &scan(env, main), model);
    let txn = env.read_txn();
    for (k, v) in model {
        let got = txn.first_value(main, k);
        assert!(
            got.as_ref() == Some(v),
            "{ctx}: {} get({}) = {:?}, model has {}",
            E::NAME,
            hex_prefix(k),
            got.as_deref().map(hex_prefix),
            hex_prefix(v)
        );
    }
    for k in gone.iter().take(GONE_PROBES) {
        assert!(
            txn.first_value(main, k).is_none(),
            "{ctx}: deleted key {} found by {}",
            hex_prefix(k),
            E::NAME
        );
    }
    assert_eq!(txn.stat_of(main).5, model.len() as u64, "{ctx}: entries");
}

fn fc_check(ctx: &str, env: &Env) -> ferrocore::CheckReport {
    match env.check() {
        Ok(r) => r,
        Err(e) => panic!("{ctx}: ferrocore check failed: {e:?}"),
    }
}

// ----- LMDB side -----

/// Checks LMDB's view of the free DB against ferrocore's, both on the same file.
fn assert_free_db_eq(
    ctx: &str,
    lm_free: &lmdb_master_sys::MDB_stat,
    lm_records: &[FreeRecord],
    fc: &Env,
) {
    let txn = fc.begin_read().expect("begin_read");
    let fc_free = txn.db_stat(Database::FREE).expect("free stat");
    assert_stat_eq(&format!("{ctx} (free DB)"), lm_free, &fc_free);
    assert!(
        lm_records == &free_records(fc)[..],
        "{ctx}: the engines decode different free-DB records"
    );
}

// ---------------------------------------------------------------------------------------
// 1. LMDB writes, ferrocore reads and writes, LMDB reads and writes, ferrocore reads.
// ---------------------------------------------------------------------------------------

#[test]
fn lmdb_writes_ferrocore_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    let mut rng = Rng(0x1D8_2024);
    let mut model = Model::new();
    let mut gone = Gone::new();
    let shape = Shape {
        key: key_any,
        value: value_mixed,
    };

    // LMDB builds the file: 4 txns of 1000 puts, then deletes a third over 3 txns.
    let (lm_stat, lm_free, lm_free_before, lm_info) = {
        let lm = lmdb::Env::open(path, LMDB_MAP_SIZE);
        for _ in 0..4 {
            let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 1000, 0, 0);
            apply(&lm, &ops);
        }
        apply(&lm, &edge_ops(4096, 0, &mut rng, &mut model, &mut gone));
        let third = model.len() / 3;
        for _ in 0..3 {
            let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 0, 0, third / 3);
            apply(&lm, &ops);
        }
        // The harness itself: LMDB agrees with the model.
        verify("LMDB after its own writes", &lm, &model, &gone);
        let txn = lm.read();
        let free = txn.db_stat(lmdb::FREE_DBI);
        drop(txn);
        let free_records = free_records(&lm);
        assert!(
            free.ms_entries >= 2,
            "LMDB's free DB should hold records after the deletes"
        );
        assert!(lm.stat().ms_overflow_pages > 0, "some values overflow");
        (lm.stat(), free, free_records, lm.info())
    };
    assert!(model.len() > 2500, "model has {} keys", model.len());

    // ferrocore reads LMDB's file, then changes it over several txns.
    let (fc_stat, fc_info) = {
        let env = fc_open(path);
        assert_eq!(env.page_size(), 4096);
        assert_stat_eq(
            "ferrocore opening LMDB's file",
            &lm_stat,
            &env.stat().unwrap(),
        );
        assert_free_db_eq(
            "ferrocore opening LMDB's file",
            &lm_free,
            &lm_free_before,
            &env,
        );
        let info = env.info().unwrap();
        assert_eq!(
            (info.last_pgno, info.last_txnid),
            (lm_info.me_last_pgno as u64, lm_info.me_last_txnid as u64),
            "last page / last txn of LMDB's file"
        );
        verify("ferrocore reading LMDB's file", &env, &model, &gone);
        fc_check("ferrocore reading LMDB's file", &env);

        for round in 0..5 {
            let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 300, 300, 300);
            apply(&env, &ops);
            fc_check(&format!("ferrocore round {round} on LMDB's file"), &env);
        }
        apply(&env, &edge_ops(4096, 1, &mut rng, &mut model, &mut gone));
        fc_check("ferrocore rewriting LMDB's boundary-size values", &env);
        // Free pages LMDB left were reused: its oldest records were consumed.
        assert_reused(
            "ferrocore writing on LMDB's file",
            &lm_free_before,
            &free_records(&env),
        );
        verify("ferrocore after its writes", &env, &model, &gone);
        (env.stat().unwrap(), env.info().unwrap())
    };

    // LMDB reads ferrocore's changes, then writes more.
    let (lm_stat2, lm_info2) = {
        let lm = lmdb::Env::open(path, LMDB_MAP_SIZE);
        assert_stat_eq("LMDB reopening", &lm.stat(), &fc_stat);
        let info = lm.info();
        assert_eq!(
            (info.me_last_pgno as u64, info.me_last_txnid as u64),
            (fc_info.last_pgno, fc_info.last_txnid),
            "last page / last txn of ferrocore's commits"
        );
        verify("LMDB reading ferrocore's changes", &lm, &model, &gone);
        for _ in 0..3 {
            let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 200, 200, 200);
            apply(&lm, &ops);
        }
        apply(&lm, &edge_ops(4096, 2, &mut rng, &mut model, &mut gone));
        verify("LMDB after writing on ferrocore's file", &lm, &model, &gone);
        (lm.stat(), lm.info())
    };

    // ferrocore reads LMDB's latest writes.
    let env = fc_open(path);
    assert_stat_eq("ferrocore reopening", &lm_stat2, &env.stat().unwrap());
    assert_eq!(
        env.info().unwrap().last_txnid,
        lm_info2.me_last_txnid as u64
    );
    verify(
        "ferrocore reading LMDB's second writes",
        &env,
        &model,
        &gone,
    );
    fc_check("ferrocore reading LMDB's second writes", &env);
}

// ---------------------------------------------------------------------------------------
// 2. ferrocore writes, LMDB reads and writes, ferrocore reads.
// ---------------------------------------------------------------------------------------

#[test]
fn ferrocore_writes_lmdb_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    let mut rng = Rng(0xFE77_0C0E);
    let mut model = Model::new();
    let mut gone = Gone::new();
    let shape = Shape {
        key: key_mostly_short,
        value: value_mostly_small,
    };

    // ferrocore: 50k puts over 5 txns, then mixed changes, then big deletes.
    let (fc_stat, fc_free, fc_free_before, fc_info) = {
        let env = fc_open(path);
        for _ in 0..5 {
            let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 10_000, 0, 0);
            apply(&env, &ops);
        }
        apply(&env, &edge_ops(4096, 0, &mut rng, &mut model, &mut gone));
        // Sorted loads with APPEND pack leaves full; LMDB must later split such pages.
        let mut txn = env.begin_write().unwrap();
        for i in 0..3000u32 {
            let key = append_key(i, 0);
            let len = rng.range(0, 64);
            let value = rng.bytes(len);
            txn.put(Database::MAIN, &key, &value, ferrocore::put_flags::APPEND)
                .expect("append");
            model.insert(key, value);
        }
        txn.commit().unwrap();
        let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 2000, 3000, 3000);
        apply(&env, &ops);
        let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 0, 0, 15_000);
        apply(&env, &ops);
        let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 500, 1000, 5000);
        apply(&env, &ops);
        verify("ferrocore after its own writes", &env, &model, &gone);
        let report = fc_check("ferrocore after its own writes", &env);
        let txn = env.begin_read().unwrap();
        let free = txn.db_stat(Database::FREE).unwrap();
        drop(txn);
        let free_records = free_records(&env);
        assert!(free.entries >= 1, "free DB records: {free:?}");
        assert!(
            free.overflow_pages > 0,
            "a free-DB record large enough for overflow pages: {free:?}"
        );
        assert!(report.free_pages > 500, "{report:?}");
        let stat = env.stat().unwrap();
        assert!(stat.depth >= 3, "{stat:?}");
        assert!(stat.overflow_pages > 0, "{stat:?}");
        (stat, free, free_records, env.info().unwrap())
    };

    // LMDB reads everything, then writes more, reusing ferrocore's free pages.
    let (lm_stat, lm_info) = {
        let lm = lmdb::Env::open(path, LMDB_MAP_SIZE);
        let st = lm.stat();
        assert_stat_eq("LMDB opening ferrocore's file", &st, &fc_stat);
        let txn = lm.read();
        assert_stat_eq(
            "LMDB opening ferrocore's file (free DB)",
            &txn.db_stat(lmdb::FREE_DBI),
            &fc_free,
        );
        drop(txn);
        assert!(
            free_records(&lm) == fc_free_before,
            "LMDB decodes ferrocore's free DB differently"
        );
        let info = lm.info();
        assert_eq!(
            (info.me_last_pgno as u64, info.me_last_txnid as u64),
            (fc_info.last_pgno, fc_info.last_txnid)
        );
        verify("LMDB reading ferrocore's file", &lm, &model, &gone);

        let small = Shape {
            key: key_mostly_short,
            value: value_small,
        };
        // LMDB never reuses the pages freed by the last committed txn (the record keyed
        // by it), so its first txn may grow the file; from its second txn on, ferrocore's
        // record is reclaimable and no more growth is needed for these small changes.
        let mut ops = gen_ops(&mut rng, &mut model, &mut gone, small, 500, 500, 500);
        ops.extend(edge_ops(4096, 1, &mut rng, &mut model, &mut gone));
        // Inserts between the appended keys, into ferrocore's full leaves.
        for i in (0..3000u32).step_by(3) {
            let len = rng.range(0, 300);
            let (key, value) = (append_key(i, 1), rng.bytes(len));
            model.insert(key.clone(), value.clone());
            ops.push(Op::Put(key, value));
        }
        apply(&lm, &ops);
        let info1 = lm.info();
        for _ in 0..2 {
            let ops = gen_ops(&mut rng, &mut model, &mut gone, small, 500, 500, 500);
            apply(&lm, &ops);
        }
        let info2 = lm.info();
        assert!(
            info2.me_last_pgno <= info1.me_last_pgno,
            "LMDB grew the file ({} -> {}) instead of reusing ferrocore's free pages",
            info1.me_last_pgno,
            info2.me_last_pgno
        );
        assert_reused(
            "LMDB writing on ferrocore's file",
            &fc_free_before,
            &free_records(&lm),
        );
        verify("LMDB after writing on ferrocore's file", &lm, &model, &gone);
        (lm.stat(), info2)
    };

    // ferrocore reads LMDB's writes, checks, and writes once more.
    let env = fc_open(path);
    assert_stat_eq("ferrocore reopening", &lm_stat, &env.stat().unwrap());
    assert_eq!(
        env.info().unwrap().last_pgno,
        lm_info.me_last_pgno as u64,
        "last page"
    );
    verify("ferrocore reading LMDB's writes", &env, &model, &gone);
    fc_check("ferrocore reading LMDB's writes", &env);
    let mut ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 1000, 1000, 1000);
    ops.extend(edge_ops(4096, 2, &mut rng, &mut model, &mut gone));
    apply(&env, &ops);
    fc_check("ferrocore writing after LMDB", &env);
    verify("ferrocore writing after LMDB", &env, &model, &gone);
}

// ---------------------------------------------------------------------------------------
// 3. LMDB's command-line tools (Debian lmdb-utils) on a ferrocore-written environment.
// ---------------------------------------------------------------------------------------

/// A data line of `mdb_dump -p`: a space, then printable bytes as themselves and any other
/// byte as `\xx`. Releases after 0.9.24 also double a backslash; 0.9.24 (Debian's
/// lmdb-utils) prints it bare, which makes its output ambiguous, so this gives both forms.
fn print_lines(b: &[u8]) -> [String; 2] {
    let mut bare = String::from(" ");
    let mut doubled = String::from(" ");
    for &c in b {
        if (0x20..0x7f).contains(&c) {
            bare.push(c as char);
            doubled.push(c as char);
            if c == b'\\' {
                doubled.push('\\');
            }
        } else {
            bare.push_str(&format!("\\{c:02x}"));
            doubled.push_str(&format!("\\{c:02x}"));
        }
    }
    [bare, doubled]
}

/// Runs `mdb_dump` with `args` on `path`; returns the header lines and the data lines.
fn run_mdb_dump(ctx: &str, args: &[&str], path: &Path) -> (Vec<String>, Vec<String>) {
    let out = Command::new("mdb_dump")
        .args(args)
        .arg(path)
        .output()
        .expect("run mdb_dump");
    assert!(
        out.status.success(),
        "{ctx}: mdb_dump {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("mdb_dump prints ASCII");
    let mut lines = text.lines().map(str::to_string);
    let header: Vec<String> = lines.by_ref().take_while(|l| l != "HEADER=END").collect();
    let mut data: Vec<String> = lines.collect();
    assert_eq!(
        data.pop().as_deref(),
        Some("DATA=END"),
        "{ctx}: mdb_dump {args:?} output must end with DATA=END"
    );
    assert_eq!(data.len() % 2, 0, "{ctx}: odd number of data lines");
    (header, data)
}

/// Runs `mdb_dump -p` and `mdb_stat -ef` on a closed environment and compares with the
/// model and with ferrocore's own figures.
fn check_with_lmdb_utils(
    ctx: &str,
    path: &Path,
    model: &Model,
    page_size: usize,
    stat: &Stat,
    free_pages: u64,
) {
    // -p (printable): compared line by line with the model, printed the same way.
    let (header, data) = run_mdb_dump(ctx, &["-p"], path);
    let has = |h: &Vec<String>, l: &str| h.iter().any(|x| x == l);
    assert!(has(&header, "format=print"), "{ctx}: header {header:?}");
    assert!(has(&header, "type=btree"), "{ctx}: header {header:?}");
    let psize = format!("db_pagesize={page_size}");
    assert!(has(&header, &psize), "{ctx}: header {header:?}");
    assert_eq!(
        data.len() / 2,
        model.len(),
        "{ctx}: mdb_dump -p printed {} items, the model has {}",
        data.len() / 2,
        model.len()
    );
    for (i, (pair, (k, v))) in data.chunks(2).zip(model).enumerate() {
        for (line, bytes, what) in [(&pair[0], k, "key"), (&pair[1], v, "value")] {
            let forms = print_lines(bytes);
            if !forms.contains(line) {
                // Show both around the first difference.
                let exp = &forms[0];
                let at = line
                    .bytes()
                    .zip(exp.bytes())
                    .position(|(a, b)| a != b)
                    .unwrap_or(line.len().min(exp.len()));
                let win = |t: &str| t[at.saturating_sub(24)..(at + 24).min(t.len())].to_string();
                panic!(
                    "{ctx}: mdb_dump -p item {i}: {what} line does not print model {what} {}: \
                     first difference at char {at} of {} (expected length {}): got {:?}, \
                     expected {:?}",
                    hex_prefix(bytes),
                    line.len(),
                    exp.len(),
                    win(line),
                    win(exp)
                );
            }
        }
    }
    // Default format (hex, unambiguous): decoded and compared exactly.
    let (header, data) = run_mdb_dump(ctx, &[], path);
    assert!(has(&header, "format=bytevalue"), "{ctx}: header {header:?}");
    let dumped: Vec<(Vec<u8>, Vec<u8>)> = data
        .chunks(2)
        .map(|p| (decode_hex_line(&p[0]), decode_hex_line(&p[1])))
        .collect();
    assert_scan_matches(&format!("{ctx}: mdb_dump"), &dumped, model);

    let out = Command::new("mdb_stat")
        .arg("-ef")
        .arg(path)
        .output()
        .expect("run mdb_stat");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{ctx}: mdb_stat -ef exited with {}: {}{}",
        out.status,
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    // The figures of one section, as "name: value" pairs.
    let section = |title: &str| -> BTreeMap<String, String> {
        let mut in_section = false;
        let mut map = BTreeMap::new();
        for line in text.lines() {
            if !line.starts_with(' ') {
                in_section = line == title;
            } else if in_section {
                if let Some((k, v)) = line.trim().split_once(": ") {
                    map.insert(k.to_string(), v.to_string());
                }
            }
        }
        assert!(!map.is_empty(), "{ctx}: no section {title:?} in:\n{text}");
        map
    };
    let env_info = section("Environment Info");
    assert_eq!(env_info["Page size"], page_size.to_string(), "{ctx}");
    let main = section("Status of Main DB");
    let figures = |m: &BTreeMap<String, String>| {
        [
            "Tree depth",
            "Branch pages",
            "Leaf pages",
            "Overflow pages",
            "Entries",
        ]
        .map(|f| m[f].parse::<u64>().expect("number"))
    };
    assert_eq!(
        figures(&main),
        [
            stat.depth as u64,
            stat.branch_pages,
            stat.leaf_pages,
            stat.overflow_pages,
            stat.entries
        ],
        "{ctx}: mdb_stat main DB vs ferrocore"
    );
    assert_eq!(stat.entries, model.len() as u64);
    let free = section("Freelist Status");
    assert_eq!(
        free["Free pages"].parse::<u64>().expect("number"),
        free_pages,
        "{ctx}: mdb_stat free pages vs ferrocore's check"
    );
}

#[test]
fn lmdb_utils_read_ferrocore_env() {
    if !lmdb_utils_available() {
        // CI (which sets CI=true and installs lmdb-utils) must run this check.
        if std::env::var_os("FERROCORE_REQUIRE_LMDB_UTILS").is_some()
            || std::env::var_os("CI").is_some()
        {
            panic!(
                "FERROCORE_REQUIRE_LMDB_UTILS or CI is set but mdb_dump/mdb_stat are not on PATH"
            );
        }
        // Straight to the process's stderr, so that the test harness does not swallow it.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "lmdb_utils_read_ferrocore_env: CHECK NOT RUN: mdb_dump/mdb_stat (Debian \
             lmdb-utils) are not on PATH; set FERROCORE_REQUIRE_LMDB_UTILS (or CI) to make this fail"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng(0x7001);
    let mut model = Model::new();
    let mut gone = Gone::new();
    let shape = Shape {
        key: key_any,
        value: value_mixed,
    };
    let env = fc_open(dir.path());
    for _ in 0..3 {
        let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 1000, 0, 0);
        apply(&env, &ops);
    }
    // Keys full of bytes mdb_dump -p escapes: backslashes, spaces, control bytes.
    let mut tricky = Vec::new();
    for i in 0..50u8 {
        let mut k = vec![b'\\'; (i % 5) as usize + 1];
        k.extend_from_slice(&[b' ', i, b'\\', b'x', 0x7f, 0xff, b'n']);
        let v: Vec<u8> = k
            .iter()
            .rev()
            .copied()
            .chain(b"\\\\ \n".iter().copied())
            .collect();
        tricky.push(Op::Put(k.clone(), v.clone()));
        model.insert(k, v);
    }
    apply(&env, &tricky);
    for _ in 0..2 {
        let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 100, 300, 600);
        apply(&env, &ops);
    }
    verify("ferrocore before the tools", &env, &model, &gone);
    let report = fc_check("ferrocore before the tools", &env);
    assert!(report.free_pages > 0, "{report:?}");
    let stat = env.stat().unwrap();
    drop(env);
    check_with_lmdb_utils(
        "lmdb-utils on ferrocore's env",
        dir.path(),
        &model,
        4096,
        &stat,
        report.free_pages,
    );
    // The tools left the data file as it was.
    let env = fc_open(dir.path());
    verify("ferrocore after the tools", &env, &model, &gone);
}

// ---------------------------------------------------------------------------------------
// 4. A ferrocore environment with 8 KiB pages, read and written by LMDB.
// ---------------------------------------------------------------------------------------

#[test]
fn page_size_8192_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    let mut rng = Rng(0x8192);
    let mut model = Model::new();
    let mut gone = Gone::new();
    // Values up to 6000 bytes: inline at 8 KiB pages up to ~4000, overflow beyond.
    fn value_8k(rng: &mut Rng) -> Vec<u8> {
        let len = if rng.chance(1, 100) {
            rng.range(10_000, 60_000)
        } else {
            rng.range(0, 6000)
        };
        rng.bytes(len)
    }
    let shape = Shape {
        key: key_any,
        value: value_8k,
    };

    let (fc_stat, report) = {
        let env = open_env(path, EnvOptions::new().page_size(8192));
        assert_eq!(env.page_size(), 8192);
        for _ in 0..3 {
            let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 800, 100, 100);
            apply(&env, &ops);
        }
        let mut ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 0, 200, 600);
        ops.extend(edge_ops(8192, 0, &mut rng, &mut model, &mut gone));
        apply(&env, &ops);
        let report = fc_check("ferrocore 8K", &env);
        verify("ferrocore 8K", &env, &model, &gone);
        let stat = env.stat().unwrap();
        assert_eq!(stat.page_size, 8192);
        assert!(stat.overflow_pages > 0 && stat.depth >= 2, "{stat:?}");
        (stat, report)
    };
    // The file's page size is recorded where LMDB reads it.
    let bytes = std::fs::read(path.join("data.mdb")).unwrap();
    assert_eq!(u32::from_le_bytes(bytes[40..44].try_into().unwrap()), 8192);
    assert_eq!(bytes.len() % 8192, 0);

    if lmdb_utils_available() {
        check_with_lmdb_utils(
            "lmdb-utils on ferrocore's 8K env",
            path,
            &model,
            8192,
            &fc_stat,
            report.free_pages,
        );
    }

    let lm_stat = {
        let lm = lmdb::Env::open(path, LMDB_MAP_SIZE);
        let st = lm.stat();
        assert_eq!(st.ms_psize, 8192, "LMDB takes the file's page size");
        assert_stat_eq("LMDB opening ferrocore's 8K file", &st, &fc_stat);
        verify("LMDB reading ferrocore's 8K file", &lm, &model, &gone);
        for _ in 0..2 {
            let ops = gen_ops(&mut rng, &mut model, &mut gone, shape, 300, 300, 300);
            apply(&lm, &ops);
        }
        apply(&lm, &edge_ops(8192, 1, &mut rng, &mut model, &mut gone));
        verify("LMDB after writing the 8K file", &lm, &model, &gone);
        lm.stat()
    };

    let env = fc_open(path);
    assert_eq!(env.page_size(), 8192);
    assert_stat_eq(
        "ferrocore reopening the 8K file",
        &lm_stat,
        &env.stat().unwrap(),
    );
    verify("ferrocore reading LMDB's 8K writes", &env, &model, &gone);
    fc_check("ferrocore reading LMDB's 8K writes", &env);
}

// ---------------------------------------------------------------------------------------
// 5. Where values go: the same puts give the same overflow pages in both engines.
// ---------------------------------------------------------------------------------------

/// LMDB puts a value on overflow pages iff `8 + ksize + dsize > nodemax`, and a run takes
/// `(15 + dsize) / psize + 1` pages. A reader of either engine follows the node flag
/// whatever the rule, so only this comparison catches a writer that decides differently.
#[test]
fn same_puts_same_overflow_pages() {
    for page_size in [4096usize, 8192] {
        let mut rng = Rng(page_size as u64);
        let mut model = Model::new();
        let mut gone = Gone::new();
        let ops = edge_ops(page_size, 0, &mut rng, &mut model, &mut gone);
        let expected_overflow: u64 = model
            .iter()
            .filter(|(k, v)| 8 + k.len() + v.len() > (((page_size - 16) / 2) & !1) - 2)
            .map(|(_, v)| ((15 + v.len()) / page_size + 1) as u64)
            .sum();
        let mut stats = Vec::new();
        for writer in ["ferrocore", "LMDB"] {
            let dir = tempfile::tempdir().expect("tempdir");
            // ferrocore creates the file (LMDB only creates OS-page-size files).
            let env = open_env(dir.path(), EnvOptions::new().page_size(page_size));
            if writer == "ferrocore" {
                apply(&env, &ops);
                drop(env);
            } else {
                drop(env);
                apply(&lmdb::Env::open(dir.path(), LMDB_MAP_SIZE), &ops);
            }
            let lm = lmdb::Env::open(dir.path(), LMDB_MAP_SIZE);
            verify(&format!("{writer} at {page_size}"), &lm, &model, &gone);
            let st = lm.stat();
            stats.push((st.ms_overflow_pages as u64, st.ms_entries as u64));
        }
        assert_eq!(
            stats,
            vec![(expected_overflow, model.len() as u64); 2],
            "(overflow pages, entries) written by [ferrocore, LMDB] at page size {page_size}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// 6. An emptied tree (root P_INVALID, depth 0) handed back and forth.
// ---------------------------------------------------------------------------------------

#[test]
fn emptied_tree_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    let mut rng = Rng(0xE);
    let mut model = Model::new();
    let mut gone = Gone::new();
    let shape = Shape {
        key: key_any,
        value: value_mixed,
    };
    let empty = |ctx: &str, st: Stat| {
        assert_eq!(
            (
                st.depth,
                st.branch_pages,
                st.leaf_pages,
                st.overflow_pages,
                st.entries
            ),
            (0, 0, 0, 0, 0),
            "{ctx}: emptied main DB"
        );
    };
    {
        let env = fc_open(path);
        apply(
            &env,
            &gen_ops(&mut rng, &mut model, &mut gone, shape, 1500, 0, 0),
        );
        let n = model.len();
        apply(
            &env,
            &gen_ops(&mut rng, &mut model, &mut gone, shape, 0, 0, n),
        );
        assert!(model.is_empty());
        empty("ferrocore", env.stat().unwrap());
        let txn = env.begin_read().unwrap();
        assert_eq!(txn.meta().main_db.root, u64::MAX, "root of an empty tree");
        drop(txn);
        fc_check("ferrocore emptied", &env);
    }
    {
        let lm = lmdb::Env::open(path, LMDB_MAP_SIZE);
        verify("LMDB reading ferrocore's empty tree", &lm, &model, &gone);
        assert_eq!(lm.stat().ms_depth, 0);
        apply(
            &lm,
            &gen_ops(&mut rng, &mut model, &mut gone, shape, 800, 0, 0),
        );
        let n = model.len();
        apply(
            &lm,
            &gen_ops(&mut rng, &mut model, &mut gone, shape, 0, 0, n),
        );
        assert!(model.is_empty());
    }
    {
        let env = fc_open(path);
        empty("LMDB", env.stat().unwrap());
        verify("ferrocore reading LMDB's empty tree", &env, &model, &gone);
        fc_check("ferrocore reading LMDB's empty tree", &env);
        apply(
            &env,
            &gen_ops(&mut rng, &mut model, &mut gone, shape, 300, 0, 0),
        );
        fc_check("ferrocore refilling", &env);
    }
    let lm = lmdb::Env::open(path, LMDB_MAP_SIZE);
    verify("LMDB reading the refilled tree", &lm, &model, &gone);
}

/// While ferrocore has an environment open, LMDB 0.9's own tools share it live: the lock
/// file has LMDB 0.9's layout (docs/FORMAT.md §14), so Debian's `mdb_stat` opens it, sees
/// ferrocore's commits and lists ferrocore's live reader with its pid and snapshot.
#[test]
fn a_live_ferrocore_environment_is_shared_with_lmdb_tools() {
    if !lmdb_utils_available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs lmdb-utils (mdb_stat)"
        );
        eprintln!("skipped: mdb_stat is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let stat = |args: &[&str]| {
        let out = Command::new("mdb_stat")
            .args(args)
            .arg(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // LMDB 0.9's `mdb_stat -r` exits 1 even when it succeeds (it returns fputs's
        // count as its status), so only its silence on stderr tells.
        assert!(
            (out.status.success() || args == ["-r"]) && err.is_empty(),
            "mdb_stat {args:?}: {:?} {err}",
            out.status
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let env = fc_open(dir.path());
    for round in 1..=3u8 {
        let mut txn = env.begin_write().unwrap();
        txn.put(Database::MAIN, &[round], b"v", 0).unwrap();
        txn.commit().unwrap();
    }
    let reader = env.begin_read().unwrap();
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"later", b"v", 0).unwrap();
    txn.commit().unwrap();

    let out = stat(&["-e"]);
    assert!(out.contains("Entries: 4"), "{out}");
    assert!(out.contains("Number of readers used: 1"), "{out}");
    // `mdb_stat -r`: "pid thread txnid" per reader; ferrocore's reads snapshot 3.
    let out = stat(&["-r"]);
    let pid = std::process::id().to_string();
    let row = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(pid.as_str()))
        .unwrap_or_else(|| panic!("ferrocore's reader is not listed:\n{out}"));
    assert_eq!(row.split_whitespace().nth(2), Some("3"), "{out}");
    drop(reader);
    let out = stat(&["-r"]);
    assert!(out.contains("(no active readers)"), "{out}");
    // ferrocore is unharmed, and LMDB leaves the lock file as ferrocore uses it.
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.stat().entries, 4);
    drop(txn);
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"after mdb_stat", b"v", 0).unwrap();
    txn.commit().unwrap();
    drop(env);
    assert!(stat(&["-e"]).contains("Entries: 5"));
}

/// The LMDB this test links (mdb.master 0.9.70) keeps a newer lock-file format than LMDB
/// 0.9. While either has the environment open, a process of the other refuses it with
/// MDB_VERSION_MISMATCH, as two LMDB versions refuse each other; once it is closed, the
/// next opener alone re-initialises the lock file and opens it. (Two engines in one
/// process cannot tell each other's fcntl locks from their own: that is not supported,
/// as LMDB does not support it either.)
#[test]
fn lmdb_with_another_lock_format_is_refused_while_live() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = fc_open(dir.path());
        let mut txn = env.begin_write().unwrap();
        txn.put(Database::MAIN, b"k", b"v", 0).unwrap();
        txn.commit().unwrap();
        let out = child(dir.path(), "lmdb_open").output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rc = String::from_utf8_lossy(&out.stdout);
        let expected = format!("rc={}", lmdb_master_sys::MDB_VERSION_MISMATCH);
        assert!(
            rc.contains(&expected),
            "LMDB 0.9.70 opened a live ferrocore env: {rc}"
        );
        let txn = env.begin_read().unwrap();
        assert_eq!(txn.get(Database::MAIN, b"k").unwrap(), Some(&b"v"[..]));
    }
    {
        let mut holder = child(dir.path(), "lmdb_hold").spawn().unwrap();
        let ready = dir.path().join("ready");
        while !ready.exists() {
            assert!(
                holder.try_wait().unwrap().is_none(),
                "the LMDB process ended"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // SAFETY: the open is expected to fail; nothing is read through it.
        match unsafe { Env::open(dir.path()) } {
            Err(ferrocore::Error::VersionMismatch { .. }) => {}
            other => panic!("ferrocore opened a live LMDB 0.9.70 env: {:?}", other.err()),
        }
        std::fs::write(dir.path().join("done"), b"").unwrap();
        assert!(holder.wait().unwrap().success());
    }
    let env = fc_open(dir.path());
    assert_eq!(
        env.begin_read().unwrap().get(Database::MAIN, b"k").unwrap(),
        Some(&b"v"[..])
    );
}

/// This test binary, run again as a child process in `role` on the environment at `dir`.
fn child(dir: &Path, role: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_process_entry",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("FERROCORE_INTEROP_ROLE", role)
    .env("FERROCORE_INTEROP_DIR", dir);
    cmd
}

/// Not a test of its own: the entry point of the child processes of the tests above.
/// Without the role variable (a normal test run) it does nothing.
#[test]
fn child_process_entry() {
    let Some(role) = std::env::var_os("FERROCORE_INTEROP_ROLE") else {
        return;
    };
    let dir = std::path::PathBuf::from(std::env::var_os("FERROCORE_INTEROP_DIR").unwrap());
    match role.to_str().unwrap() {
        "lmdb_open" => match lmdb::Env::try_open(&dir, LMDB_MAP_SIZE) {
            Ok(_) => println!("rc=0"),
            Err(rc) => println!("rc={rc}"),
        },
        "lmdb_hold" => {
            let _env = lmdb::Env::open(&dir, LMDB_MAP_SIZE);
            std::fs::write(dir.join("ready"), b"").unwrap();
            while !dir.join("done").exists() {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        other => panic!("unknown role {other}"),
    }
}
