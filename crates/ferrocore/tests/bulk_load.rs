//! The bottom-up bulk loader against ordinary puts, ferrocore's checker and the real LMDB.
//!
//! Each case puts random data into one environment with ordinary puts (the oracle: its
//! scan gives the DB's order), bulk-loads that scan into a second, and requires of the
//! second: `Env::check` passes; a full scan both ways, every lookup and every pair
//! (`get_both`) answer as in the first; each key's values have the same form (plain,
//! sub-page, sub-DB) in both files; LMDB's C library scans the same items; and Debian's
//! `mdb_dump` prints the same text for both (when installed).

use std::cmp::Ordering;
use std::path::Path;
use std::process::Command;

use ferrocore::raw::view;
use ferrocore::raw::DbRecord;
use ferrocore::raw::PageSource;
use ferrocore::raw::{node_flags, P_INVALID};
use ferrocore::KeyCmp;
use ferrocore::{
    db_flags, env_flags, BulkOptions, Database, Duplicates, Env, EnvOptions, Error, ExternalSort,
    SortOptions,
};
use proptest::prelude::*;

mod common;
use common::{lmdb, lmdb_utils_available, Pair, Rng, TempEnv, LMDB_MAP_SIZE};

/// Room for a few named DBs, unsynced commits.
fn env_options() -> EnvOptions {
    let mut opts = EnvOptions::new();
    // Strict mode: every commit is followed by a full check.
    opts.strict(true).max_dbs(8).flags(env_flags::NO_SYNC);
    opts
}

/// A DB to fill: its name (`None`: the main DB) and flags.
#[derive(Clone, Copy, Debug)]
struct Target {
    name: Option<&'static str>,
    flags: u16,
}

fn db_of(env: &Env, t: Target) -> Database {
    let mut txn = env.begin_write().unwrap();
    let db = txn
        .open_db(t.name, u32::from(t.flags) | db_flags::CREATE)
        .unwrap();
    txn.commit().unwrap();
    db
}

/// Puts `pairs` one by one and returns the DB's items in its order.
fn put_all(env: &Env, t: Target, pairs: &[Pair]) -> Vec<Pair> {
    let db = db_of(env, t);
    let mut txn = env.begin_write().unwrap();
    for (k, v) in pairs {
        txn.put(db, k, v, 0).unwrap();
    }
    txn.commit().unwrap();
    scan(env, db)
}

/// Bulk-loads `items` (in the DB's order) into a new DB.
fn bulk_all(env: &Env, t: Target, items: &[Pair], options: BulkOptions) -> Database {
    let db = db_of(env, t);
    let mut txn = env.begin_write().unwrap();
    let summary = bulk_in(&mut txn, db, items, options);
    assert!(summary.bottom_up);
    assert_eq!(summary.stored, items.len() as u64);
    txn.commit().unwrap();
    db
}

/// Bulk-loads `items` into `db` in `txn`.
fn bulk_in(
    txn: &mut ferrocore::WriteTxn<'_>,
    db: Database,
    items: &[Pair],
    options: BulkOptions,
) -> ferrocore::BulkSummary {
    let mut loader = txn.bulk_loader(db, options).unwrap();
    for (k, v) in items {
        loader.push(k, v).unwrap();
    }
    loader.finish().unwrap()
}

/// Every item of `db`, forward.
fn scan(env: &Env, db: Database) -> Vec<Pair> {
    let txn = env.begin_read().unwrap();
    let mut c = txn.cursor(db).unwrap();
    let mut out = Vec::new();
    let mut item = c.first().unwrap();
    while let Some((k, v)) = item {
        out.push((k.to_vec(), v.to_vec()));
        item = c.next().unwrap();
    }
    out
}

/// Every item of `db`, backward.
fn scan_back(env: &Env, db: Database) -> Vec<Pair> {
    let txn = env.begin_read().unwrap();
    let mut c = txn.cursor(db).unwrap();
    let mut out = Vec::new();
    let mut item = c.last().unwrap();
    while let Some((k, v)) = item {
        out.push((k.to_vec(), v.to_vec()));
        item = c.prev().unwrap();
    }
    out
}

/// What `bulk`'s DB must satisfy, with `items` (from `puts`' DB) the expected content.
fn verify(bulk: &Env, db: Database, items: &[Pair]) {
    bulk.check().expect("check of the bulk-loaded environment");
    assert_same(&scan(bulk, db), items, "forward scan");
    let mut back = scan_back(bulk, db);
    back.reverse();
    assert_same(&back, items, "backward scan");
    let txn = bulk.begin_read().unwrap();
    assert_eq!(txn.db_stat(db).unwrap().entries, items.len() as u64);
    let dupsort = txn.db_flags(db).unwrap() & db_flags::DUP_SORT != 0;
    let mut c = txn.cursor(db).unwrap();
    for (i, (k, v)) in items.iter().enumerate() {
        let first_of_key = i == 0 || items[i - 1].0 != *k;
        if first_of_key {
            assert_eq!(txn.get(db, k).unwrap(), Some(&v[..]), "get {k:?}");
        }
        if dupsort {
            let found = c.get_both(k, v).unwrap();
            assert_eq!(found, Some((&k[..], &v[..])), "get_both {k:?} {v:?}");
        }
    }
}

/// A data file's pages, read from disk.
struct FilePages {
    bytes: Vec<u8>,
    page_size: usize,
}

impl PageSource for FilePages {
    fn page_size(&self) -> usize {
        self.page_size
    }

    fn pages(&self, pgno: u64, count: usize) -> ferrocore::Result<&[u8]> {
        let start = pgno as usize * self.page_size;
        self.bytes
            .get(start..start + count * self.page_size)
            .ok_or(Error::PageNotFound { pgno })
    }
}

/// Each key of DB `name` and the form of its values (the DUPDATA/SUBDATA node flags),
/// read from the data file.
fn forms(env: &Env, name: Option<&str>) -> Vec<(Vec<u8>, u16)> {
    let meta = *env.begin_read().unwrap().meta();
    let src = FilePages {
        bytes: std::fs::read(env.path().join("data.mdb")).unwrap(),
        page_size: env.page_size(),
    };
    let rec = match name {
        None => meta.main_db,
        Some(n) => {
            let (_, data) =
                ferrocore::raw::get_node(&src, &meta.main_db, KeyCmp::Lexicographic, n.as_bytes())
                    .unwrap()
                    .expect("named DB record");
            DbRecord::decode(data)
        }
    };
    let mut out = Vec::new();
    if rec.root != P_INVALID {
        walk_leaves(&src, rec.root, &mut out);
    }
    out
}

fn walk_leaves(src: &FilePages, pgno: u64, out: &mut Vec<(Vec<u8>, u16)>) {
    let page = view(src, pgno).unwrap();
    for i in 0..page.num_keys() {
        if page.is_branch() {
            walk_leaves(src, page.child(i).unwrap(), out);
        } else {
            let node = page.node(i).unwrap();
            let kind = node.flags & (node_flags::DUPDATA | node_flags::SUBDATA);
            out.push((node.key.to_vec(), kind));
        }
    }
}

/// Asserts two long lists are equal, showing only where they first differ.
fn assert_same<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
        panic!("{what}: item {i} differs: {:?} vs {:?}", got[i], want[i]);
    }
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
}

/// The real LMDB's scan of DB `name` (flags as created).
fn lmdb_scan(path: &Path, name: Option<&str>, flags: u16) -> Vec<Pair> {
    let env = lmdb::Env::open_with_max_dbs(path, LMDB_MAP_SIZE, 8);
    let mut txn = env.begin(false);
    let dbi = txn
        .open_db(name, u32::from(flags))
        .expect("LMDB opens the DB");
    txn.scan(dbi)
}

/// `mdb_dump`'s text for DB `name`, without the `mapsize=` line (it follows the file's
/// size, which a bulk load makes smaller). `None` if lmdb-utils is not installed.
fn mdb_dump(path: &Path, name: Option<&str>) -> Option<String> {
    if !lmdb_utils_available() {
        return None;
    }
    let mut cmd = Command::new("mdb_dump");
    if let Some(n) = name {
        cmd.args(["-s", n]);
    }
    let out = cmd.arg(path).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        text.lines()
            .filter(|l| !l.starts_with("mapsize="))
            .map(|l| format!("{l}\n"))
            .collect(),
    )
}

/// Puts `pairs` into one environment and bulk-loads the result into another; checks every
/// property of the module docs. Returns both environments and the bulk DB's stat.
fn compare(t: Target, pairs: &[Pair], options: BulkOptions) -> (ferrocore::Stat, ferrocore::Stat) {
    let (puts, bulk) = (TempEnv::new(&env_options()), TempEnv::new(&env_options()));
    let items = put_all(&puts, t, pairs);
    let db = bulk_all(&bulk, t, &items, options);
    verify(&bulk, db, &items);
    assert_same(
        &forms(&bulk, t.name),
        &forms(&puts, t.name),
        "forms of the values",
    );
    let stats = (
        puts.begin_read().unwrap().db_stat(db_of(&puts, t)).unwrap(),
        bulk.begin_read().unwrap().db_stat(db).unwrap(),
    );
    let (dir_a, dir_b) = (puts.close(), bulk.close());
    assert_same(
        &lmdb_scan(dir_b.path(), t.name, t.flags),
        &items,
        "LMDB's scan",
    );
    if let Some(ours) = mdb_dump(dir_b.path(), t.name) {
        assert_eq!(Some(ours), mdb_dump(dir_a.path(), t.name), "mdb_dump");
    }
    stats
}

fn plain(n: usize, seed: u64, key_len: usize, value_len: usize) -> Vec<Pair> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| (rng.bytes(key_len), rng.bytes(value_len)))
        .collect()
}

const MAIN: Target = Target {
    name: None,
    flags: 0,
};

#[test]
fn empty_and_one_entry() {
    compare(MAIN, &[], BulkOptions::default());
    let (_, st) = compare(MAIN, &plain(1, 1, 8, 8), BulkOptions::default());
    assert_eq!((st.depth, st.leaf_pages, st.entries), (1, 1, 1));
    let named = Target {
        name: Some("one"),
        flags: db_flags::DUP_SORT,
    };
    compare(named, &plain(1, 2, 8, 8), BulkOptions::default());
}

#[test]
fn leaves_are_full_and_fill_factor_is_kept() {
    // 16-byte keys, 100-byte values: nodes of 124 bytes + a slot, 32 to a 4 KiB page.
    let data = plain(10_000, 3, 16, 100);
    let (puts, full) = compare(MAIN, &data, BulkOptions::default());
    assert_eq!(full.leaf_pages, 10_000u64.div_ceil(32));
    assert!(full.leaf_pages < puts.leaf_pages, "{full:?} vs {puts:?}");
    assert_eq!(full.depth, 3);
    // Half full: 16 to a page (2,040 of 4,080 bytes).
    let half = BulkOptions {
        fill_percent: 50,
        ..BulkOptions::default()
    };
    let (_, half) = compare(MAIN, &data, half);
    assert_eq!(half.leaf_pages, 10_000u64.div_ceil(16));
    // 1%: one node per leaf, two per branch page: the deepest tree the format allows.
    let tiny = BulkOptions {
        fill_percent: 1,
        ..BulkOptions::default()
    };
    let (_, tiny) = compare(MAIN, &data[..600], tiny);
    assert_eq!(tiny.leaf_pages, 600);
    // Branch levels of 300, 150, 75, 37, 18, 9, 4, 2 and 1 pages (an odd node out joins
    // the page before it).
    assert_eq!(tiny.depth, 10, "{tiny:?}");
}

#[test]
fn many_branch_levels_with_long_keys() {
    // 400-byte keys: 9 leaf nodes and 9 branch nodes to a page.
    let data = plain(20_000, 4, 400, 8);
    let (puts, bulk) = compare(MAIN, &data, BulkOptions::default());
    assert!(bulk.depth >= 5, "{bulk:?}");
    assert!(bulk.depth <= puts.depth);
    assert!(bulk.branch_pages < puts.branch_pages);
}

#[test]
fn values_larger_than_a_page_go_to_overflow_runs() {
    let mut rng = Rng(5);
    let data: Vec<Pair> = (0..300)
        .map(|i| {
            let len = [10, 2_000, 2_030, 4_080, 4_081, 20_000][i % 6];
            (rng.bytes(12), rng.bytes(len))
        })
        .collect();
    let (puts, bulk) = compare(MAIN, &data, BulkOptions::default());
    assert_eq!(bulk.overflow_pages, puts.overflow_pages);
    assert!(bulk.overflow_pages > 0);
}

#[test]
fn named_integerkey_and_reversekey_dbs() {
    let mut rng = Rng(6);
    let u64_keys: Vec<Pair> = (0..5_000)
        .map(|_| (rng.next().to_le_bytes().to_vec(), rng.bytes(30)))
        .collect();
    let t = Target {
        name: Some("int64"),
        flags: db_flags::INTEGER_KEY,
    };
    compare(t, &u64_keys, BulkOptions::default());
    let u32_keys: Vec<Pair> = (0..3_000)
        .map(|_| ((rng.next() as u32).to_le_bytes().to_vec(), rng.bytes(10)))
        .collect();
    let t = Target {
        name: Some("int32"),
        flags: db_flags::INTEGER_KEY,
    };
    compare(t, &u32_keys, BulkOptions::default());
    let t = Target {
        name: Some("reverse"),
        flags: db_flags::REVERSE_KEY,
    };
    compare(t, &plain(5_000, 7, 20, 40), BulkOptions::default());
}

/// Keys with 1, a few, a sub-page's worth and thousands of values.
fn dup_data(seed: u64, value: impl Fn(&mut Rng) -> Vec<u8>) -> Vec<Pair> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for (k, count) in [1usize, 2, 5, 60, 150, 2_000, 1, 3, 8_000, 1]
        .into_iter()
        .enumerate()
    {
        for _ in 0..count {
            out.push((format!("key{k:03}").into_bytes(), value(&mut rng)));
        }
    }
    for _ in 0..3_000 {
        out.push((rng.bytes(6), value(&mut rng)));
    }
    out
}

#[test]
fn dupsort_sub_pages_and_sub_dbs() {
    for (name, flags) in [
        ("dups", db_flags::DUP_SORT),
        ("revdup", db_flags::DUP_SORT | db_flags::REVERSE_DUP),
        ("revkey", db_flags::DUP_SORT | db_flags::REVERSE_KEY),
    ] {
        let data = dup_data(8, |r| {
            let len = 1 + r.below(40);
            r.bytes(len)
        });
        compare(
            Target {
                name: Some(name),
                flags,
            },
            &data,
            BulkOptions::default(),
        );
    }
    let t = Target {
        name: Some("forms"),
        flags: db_flags::DUP_SORT,
    };
    let data = dup_data(9, |r| r.bytes(20));
    compare(t, &data, BulkOptions::default());
    let env = TempEnv::new(&env_options());
    let items = put_all(&env, t, &data);
    drop(env);
    let env2 = TempEnv::new(&env_options());
    bulk_all(&env2, t, &items, BulkOptions::default());
    let kinds: Vec<u16> = forms(&env2, t.name).into_iter().map(|(_, f)| f).collect();
    for kind in [
        0,
        node_flags::DUPDATA,
        node_flags::DUPDATA | node_flags::SUBDATA,
    ] {
        assert!(kinds.contains(&kind), "no key with form {kind:#x}");
    }
}

#[test]
fn dupfixed_with_integerdup() {
    let t = Target {
        name: Some("fixed"),
        flags: db_flags::DUP_SORT | db_flags::DUP_FIXED | db_flags::INTEGER_DUP,
    };
    let data = dup_data(10, |r| (r.next() as u32).to_le_bytes().to_vec());
    compare(t, &data, BulkOptions::default());
    let t = Target {
        name: Some("fixed8"),
        flags: db_flags::DUP_SORT | db_flags::DUP_FIXED | db_flags::INTEGER_KEY,
    };
    let mut rng = Rng(11);
    let data: Vec<Pair> = (0..20_000)
        .map(|_| ((rng.next() % 50).to_le_bytes().to_vec(), rng.bytes(8)))
        .collect();
    compare(t, &data, BulkOptions::default());
}

#[test]
fn out_of_order_input_is_refused_and_leaves_nothing() {
    let env = TempEnv::new(&env_options());
    let t = Target {
        name: Some("t"),
        flags: 0,
    };
    let db = db_of(&env, t);
    let mut txn = env.begin_write().unwrap();
    let mut loader = txn.bulk_loader(db, BulkOptions::default()).unwrap();
    loader.push(b"a", b"1").unwrap();
    loader.push(b"c", b"2").unwrap();
    let e = loader.push(b"b", b"3").unwrap_err();
    assert!(matches!(e, Error::Unsorted { index: 2, .. }), "{e:?}");
    assert!(e.to_string().contains("item 2"), "{e}");
    assert_eq!(e.lmdb_code(), -30799);
    let e = loader.push(b"c", b"again").unwrap_err();
    assert!(matches!(e, Error::Unsorted { index: 3, .. }), "{e:?}");
    assert!(matches!(
        loader.push(b"", b"x"),
        Err(Error::BadValSize { .. })
    ));
    // Refused items change nothing: the loader goes on.
    loader.push(b"d", b"4").unwrap();
    drop(loader);
    // Dropped before finish: nothing of the load stays, and the txn is usable.
    assert_eq!(txn.get(db, b"a").unwrap(), None);
    txn.put(db, b"z", b"26", 0).unwrap();
    txn.commit().unwrap();
    assert_eq!(scan(&env, db), vec![(b"z".to_vec(), b"26".to_vec())]);
    env.check().unwrap();

    // A DUPSORT DB: values of a key out of order, a repeated pair (kept once), a DUPFIXED
    // value of another size.
    let t = Target {
        name: Some("d"),
        flags: db_flags::DUP_SORT | db_flags::DUP_FIXED,
    };
    let db = db_of(&env, t);
    let mut txn = env.begin_write().unwrap();
    let mut loader = txn.bulk_loader(db, BulkOptions::default()).unwrap();
    loader.push(b"k", b"22").unwrap();
    assert!(matches!(
        loader.push(b"k", b"11"),
        Err(Error::Unsorted { index: 1, .. })
    ));
    loader.push(b"k", b"22").unwrap();
    assert!(matches!(
        loader.push(b"k", b"333"),
        Err(Error::BadValSize { .. })
    ));
    loader.push(b"k", b"33").unwrap();
    loader.push(b"l", b"444").unwrap();
    assert_eq!(loader.finish().unwrap().stored, 3);
    txn.commit().unwrap();
    let want: Vec<Pair> = vec![
        (b"k".to_vec(), b"22".to_vec()),
        (b"k".to_vec(), b"33".to_vec()),
        (b"l".to_vec(), b"444".to_vec()),
    ];
    assert_eq!(scan(&env, db), want);
    env.check().unwrap();
}

#[test]
fn keep_last_replaces_a_repeated_key_and_frees_its_overflow_run() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    let options = BulkOptions {
        duplicates: Duplicates::KeepLast,
        ..BulkOptions::default()
    };
    let mut loader = txn.bulk_loader(Database::MAIN, options).unwrap();
    loader.push(b"a", &[1; 9000]).unwrap();
    loader.push(b"a", b"small").unwrap();
    loader.push(b"b", b"x").unwrap();
    loader.push(b"b", &[2; 5000]).unwrap();
    let s = loader.finish().unwrap();
    assert_eq!(s.stored, 2);
    txn.commit().unwrap();
    env.check().unwrap();
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.get(Database::MAIN, b"a").unwrap(), Some(&b"small"[..]));
    assert_eq!(
        txn.get(Database::MAIN, b"b").unwrap(),
        Some(&[2u8; 5000][..])
    );
    assert_eq!(txn.db_stat(Database::MAIN).unwrap().overflow_pages, 2);
}

#[test]
fn a_db_with_data_gets_ordinary_puts() {
    let env = TempEnv::new(&env_options());
    let db = db_of(&env, MAIN);
    let mut txn = env.begin_write().unwrap();
    txn.put(db, b"m", b"old", 0).unwrap();
    txn.commit().unwrap();
    let mut txn = env.begin_write().unwrap();
    let mut loader = txn.bulk_loader(db, BulkOptions::default()).unwrap();
    assert!(!loader.is_bottom_up());
    for k in [b"a", b"m", b"z"] {
        loader.push(k, b"new").unwrap();
    }
    assert!(matches!(
        loader.push(b"b", b"late"),
        Err(Error::Unsorted { index: 3, .. })
    ));
    let s = loader.finish().unwrap();
    assert!(!s.bottom_up);
    txn.commit().unwrap();
    let got: Vec<Vec<u8>> = scan(&env, db).into_iter().map(|(k, _)| k).collect();
    assert_eq!(got, [b"a", b"m", b"z"]);
    assert_eq!(
        env.begin_read().unwrap().get(db, b"m").unwrap(),
        Some(&b"new"[..])
    );
    env.check().unwrap();
}

#[test]
fn pages_come_from_the_free_list() {
    let env = TempEnv::new(&env_options());
    let data = plain(5_000, 12, 16, 100);
    let items = put_all(&env, MAIN, &data);
    let pages_before = env.info().unwrap().last_pgno;
    let mut txn = env.begin_write().unwrap();
    txn.drop_db(Database::MAIN, false).unwrap();
    txn.commit().unwrap();
    // Two commits later no reader can see the old pages: the load reuses them.
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"tmp", b"x", 0).unwrap();
    txn.commit().unwrap();
    let mut txn = env.begin_write().unwrap();
    txn.drop_db(Database::MAIN, false).unwrap();
    bulk_in(&mut txn, Database::MAIN, &items, BulkOptions::default());
    txn.commit().unwrap();
    verify(&env, Database::MAIN, &items);
    assert!(
        env.info().unwrap().last_pgno <= pages_before + 10,
        "the file grew: {} pages after, {pages_before} before",
        env.info().unwrap().last_pgno
    );
}

fn reverse_cmp(a: &[u8], b: &[u8]) -> Ordering {
    b.cmp(a)
}

#[test]
fn a_custom_comparator_orders_the_input() {
    let env = TempEnv::new(&env_options());
    let db = db_of(
        &env,
        Target {
            name: Some("custom"),
            flags: 0,
        },
    );
    env.set_compare(db, reverse_cmp).unwrap();
    let mut keys: Vec<Vec<u8>> = plain(3_000, 13, 10, 0).into_iter().map(|p| p.0).collect();
    keys.sort_by(|a, b| reverse_cmp(a, b));
    keys.dedup();
    let mut txn = env.begin_write().unwrap();
    let mut loader = txn.bulk_loader(db, BulkOptions::default()).unwrap();
    for k in &keys {
        loader.push(k, k).unwrap();
    }
    // Lexicographic order is out of order here.
    let mut lex = keys.clone();
    lex.sort();
    assert!(matches!(
        loader.push(&lex[0], b""),
        Err(Error::Unsorted { .. })
    ));
    loader.finish().unwrap();
    txn.commit().unwrap();
    let items: Vec<Pair> = keys.iter().map(|k| (k.clone(), k.clone())).collect();
    verify(&env, db, &items);
}

#[test]
fn external_sort_with_a_tiny_budget_feeds_the_loader() {
    let t = Target {
        name: Some("sorted"),
        flags: db_flags::DUP_SORT,
    };
    let data = dup_data(14, |r| {
        let len = 1 + r.below(20);
        r.bytes(len)
    });
    let (puts, bulk) = (TempEnv::new(&env_options()), TempEnv::new(&env_options()));
    let items = put_all(&puts, t, &data);
    let db = db_of(&bulk, t);
    let mut txn = bulk.begin_write().unwrap();
    for (memory, fan_in) in [(1 << 30, 64), (4096, 64), (4096, 4)] {
        let options = SortOptions {
            memory_bytes: memory,
            temp_dir: None,
            fan_in,
        };
        let mut sort = ExternalSort::for_db(&txn, db, options).unwrap();
        for (k, v) in &data {
            sort.push(k, v).unwrap();
        }
        assert_eq!(
            sort.runs_written() > 10,
            memory == 4096,
            "{}",
            sort.runs_written()
        );
        let mut sorted = sort.finish().unwrap();
        txn.drop_db(db, false).unwrap();
        let mut loader = txn.bulk_loader(db, BulkOptions::default()).unwrap();
        while let Some(item) = sorted.next().unwrap() {
            loader.push(item.key, item.value).unwrap();
        }
        loader.finish().unwrap();
    }
    txn.commit().unwrap();
    verify(&bulk, db, &items);
}

/// A random DB kind, data and fill factor, against ordinary puts.
fn random_case() -> impl Strategy<Value = (u16, u8, Vec<Pair>)> {
    let flags = prop::sample::select(vec![
        0,
        db_flags::REVERSE_KEY,
        db_flags::INTEGER_KEY,
        db_flags::DUP_SORT,
        db_flags::DUP_SORT | db_flags::REVERSE_DUP,
        db_flags::DUP_SORT | db_flags::DUP_FIXED,
    ]);
    (flags, 1u8..=100, any::<u64>(), 0usize..2_000).prop_map(|(flags, fill, seed, n)| {
        let mut rng = Rng(seed | 1);
        let keys = 1 + rng.below(n.max(1));
        let pairs = (0..n)
            .map(|_| {
                let k = if flags & db_flags::INTEGER_KEY != 0 {
                    (rng.below(keys) as u64).to_le_bytes().to_vec()
                } else {
                    let len = 1 + rng.below(30);
                    let mut k = rng.bytes(len);
                    k[0] = rng.below(keys) as u8;
                    k
                };
                let v = if flags & db_flags::DUP_FIXED != 0 {
                    rng.bytes(4)
                } else if flags & db_flags::DUP_SORT != 0 {
                    let len = 1 + rng.below(60);
                    rng.bytes(len)
                } else {
                    let len = [0, 5, 100, 3000][rng.below(4)];
                    rng.bytes(len)
                };
                (k, v)
            })
            .collect();
        (flags, fill, pairs)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn bulk_load_equals_ordinary_puts((flags, fill, pairs) in random_case()) {
        let t = Target { name: Some("p"), flags };
        let options = BulkOptions { fill_percent: fill, ..BulkOptions::default() };
        compare(t, &pairs, options);
    }
}

/// A large load holds few pages in memory: finished leaves and overflow runs go to the
/// file as it goes (`store::early`), and the txn can still read, change and free them.
#[test]
fn a_large_load_writes_its_pages_as_it_goes() {
    let env = TempEnv::new(&env_options());
    let items: Vec<Pair> = (0..120_000u32)
        .map(|i| {
            let value = if i % 1000 == 7 {
                vec![9; 6000]
            } else {
                vec![i as u8; 40]
            };
            (i.to_be_bytes().to_vec(), value)
        })
        .collect();
    let mut txn = env.begin_write().unwrap();
    bulk_in(&mut txn, Database::MAIN, &items, BulkOptions::default());
    let stat = txn.db_stat(Database::MAIN).unwrap();
    let built = (stat.leaf_pages + stat.branch_pages + stat.overflow_pages) as usize;
    assert!(built > 1000, "{built} pages built");
    assert!(
        txn.dirty_pages() < 300 + stat.branch_pages as usize,
        "{} of {built} pages still in memory",
        txn.dirty_pages()
    );
    // The same txn reads them back, changes some (copy-on-write of a page written early)
    // and frees others (a deleted overflow value).
    assert_eq!(
        txn.get(Database::MAIN, &5u32.to_be_bytes()).unwrap(),
        Some(&[5u8; 40][..])
    );
    txn.put(Database::MAIN, &5u32.to_be_bytes(), b"changed", 0)
        .unwrap();
    assert!(txn.delete(Database::MAIN, &7u32.to_be_bytes()).unwrap());
    assert!(txn.delete(Database::MAIN, &1007u32.to_be_bytes()).unwrap());
    txn.commit().unwrap();
    env.check().expect("a sound file");
    let read = env.begin_read().unwrap();
    assert_eq!(
        read.get(Database::MAIN, &5u32.to_be_bytes()).unwrap(),
        Some(&b"changed"[..])
    );
    assert_eq!(read.get(Database::MAIN, &7u32.to_be_bytes()).unwrap(), None);
    assert_eq!(
        read.get(Database::MAIN, &2007u32.to_be_bytes()).unwrap(),
        Some(&[9u8; 6000][..])
    );
    assert_eq!(
        read.db_stat(Database::MAIN).unwrap().entries,
        items.len() as u64 - 2
    );
}

/// A load given up after its pages went to the file leaves the txn as it was: the pages
/// are free again, and the txn's own changes commit alone.
#[test]
fn a_load_dropped_after_writing_pages_leaves_nothing() {
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"before", b"1", 0).unwrap();
    let named = txn.open_db(Some("loaded"), db_flags::CREATE).unwrap();
    let mut loader = txn.bulk_loader(named, BulkOptions::default()).unwrap();
    for i in 0..50_000u32 {
        loader.push(&i.to_be_bytes(), &[3; 50]).unwrap();
    }
    drop(loader);
    assert!(txn.dirty_pages() < 50, "{} pages", txn.dirty_pages());
    txn.put(Database::MAIN, b"after", b"2", 0).unwrap();
    txn.commit().unwrap();
    env.check().expect("no leaked page");
    let read = env.begin_read().unwrap();
    assert_eq!(read.db_stat(named).unwrap().entries, 0);
    assert_eq!(read.get(Database::MAIN, b"after").unwrap(), Some(&b"2"[..]));
}
