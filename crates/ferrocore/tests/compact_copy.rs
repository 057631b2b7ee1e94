//! The compacting copy (`Env::copy_compact_to`, LMDB's `MDB_CP_COMPACT`): no free pages,
//! every DB's content and statistics as in the source, readable by LMDB's tools, the same
//! layout as LMDB's own `mdb_copy -c`, a consistent snapshot while a writer commits, and
//! errors, never panics, on damaged files.

mod common;

use std::fs::File;
use std::path::Path;
use std::process::Command;

use common::{lmdb_utils_available, open_env, Rng, TempEnv};
use ferrocore::raw::PageSource;
use ferrocore::raw::{Meta, MetaCheck};
use ferrocore::{db_flags, Database, Env, EnvOptions, Error, Stat};

const PS: usize = 4096;

/// The named DBs of [`build`], with their flags.
const NAMED: &[(&str, u16)] = &[
    ("plain", 0),
    ("dups", db_flags::DUP_SORT),
    ("fixed", db_flags::DUP_SORT | db_flags::DUP_FIXED),
    (
        "intdup",
        db_flags::DUP_SORT | db_flags::DUP_FIXED | db_flags::INTEGER_DUP,
    ),
    ("intkey", db_flags::INTEGER_KEY),
    ("reverse", db_flags::REVERSE_KEY),
    ("empty", 0),
];

/// Room for [`NAMED`].
fn env_options() -> EnvOptions {
    let mut opts = EnvOptions::new();
    opts.max_dbs(16);
    opts
}

fn open(dir: &Path) -> Env {
    open_env(dir, &env_options())
}

fn open_dbs(env: &Env) -> Vec<(String, Database)> {
    let txn = env.begin_read().unwrap();
    let mut dbs = vec![("(main)".to_string(), Database::MAIN)];
    for (name, _) in NAMED {
        dbs.push((name.to_string(), txn.open_db(Some(name)).unwrap()));
    }
    txn.commit();
    dbs
}

/// An environment with every kind of DB and page — plain and overflow values, named DBs,
/// DUPSORT keys with one value, with a sub-page and with a sub-DB, DUPFIXED (LEAF2) sub-DBs
/// and sub-pages, an empty named DB — changed over several txns (puts, overwrites,
/// deletes), so that its free list is not empty.
fn build(dir: &Path) {
    let env = open(dir);
    let mut rng = Rng(14);
    let mut txn = env.begin_write().unwrap();
    let mut dbs = Vec::new();
    for (name, flags) in NAMED {
        dbs.push(
            txn.open_db(Some(name), *flags as u32 | db_flags::CREATE)
                .unwrap(),
        );
    }
    let [plain, dups, fixed, intdup, intkey, reverse, _empty] = dbs[..] else {
        unreachable!()
    };
    for i in 0..300u32 {
        let v = rng.bytes(50);
        txn.put(Database::MAIN, format!("m{i:05}").as_bytes(), &v, 0)
            .unwrap();
    }
    for i in 0..5u32 {
        let v = rng.bytes(10_000);
        txn.put(Database::MAIN, format!("mbig{i}").as_bytes(), &v, 0)
            .unwrap();
    }
    for i in 0..1500u32 {
        let len = if i % 50 == 0 { 6000 } else { 100 };
        let v = rng.bytes(len);
        txn.put(plain, format!("p{i:06}").as_bytes(), &v, 0)
            .unwrap();
    }
    for i in 0..200u32 {
        let n = if i % 7 == 0 { 400 } else { i % 3 + 1 };
        for j in 0..n {
            let v = format!("value-{j:06}-{:04}", i % 100);
            txn.put(dups, format!("d{i:04}").as_bytes(), v.as_bytes(), 0)
                .unwrap();
        }
    }
    for i in 0..20u32 {
        let n = if i % 4 == 0 { 1500u64 } else { 3 };
        for j in 0..n {
            txn.put(
                fixed,
                format!("f{i:03}").as_bytes(),
                &(j * 7).to_be_bytes(),
                0,
            )
            .unwrap();
            txn.put(
                intdup,
                &i.to_le_bytes(),
                &((j * 13) as u32).to_le_bytes(),
                0,
            )
            .unwrap();
        }
    }
    for i in 0..1000u64 {
        let v = rng.bytes(30);
        txn.put(intkey, &(i * 3).to_le_bytes(), &v, 0).unwrap();
    }
    for i in 0..300u32 {
        txn.put(reverse, format!("{i}-r").as_bytes(), b"rev", 0)
            .unwrap();
    }
    txn.commit().unwrap();
    // Changes over several txns: deleted keys and values, overwrites, dropped overflow runs.
    for round in 0..4u32 {
        let mut txn = env.begin_write().unwrap();
        for i in (round..1500).step_by(4) {
            let key = format!("p{i:06}");
            if i % 50 == 0 && i % 100 != 0 {
                continue; // half of the overflow values stay
            }
            if i % 3 == 0 || i % 50 == 0 {
                txn.delete(plain, key.as_bytes()).unwrap();
            } else {
                let v = rng.bytes(80 + round as usize);
                txn.put(plain, key.as_bytes(), &v, 0).unwrap();
            }
        }
        for i in (0..200u32).step_by(7) {
            for j in (round..400).step_by(5) {
                let v = format!("value-{j:06}-{:04}", i % 100);
                txn.delete_value(dups, format!("d{i:04}").as_bytes(), Some(v.as_bytes()))
                    .unwrap();
            }
        }
        for j in (round as u64..1500).step_by(3) {
            txn.delete_value(fixed, b"f000", Some(&(j * 7).to_be_bytes()))
                .unwrap();
        }
        for i in (round as u64..1000).step_by(5) {
            txn.delete(intkey, &(i * 3).to_le_bytes()).unwrap();
        }
        txn.delete(Database::MAIN, format!("mbig{round}").as_bytes())
            .unwrap();
        for i in (round..300).step_by(6) {
            txn.delete(Database::MAIN, format!("m{i:05}").as_bytes())
                .unwrap();
        }
        txn.commit().unwrap();
    }
}

/// A DB's name, statistics and items.
type Contents = (String, Stat, Vec<(Vec<u8>, Vec<u8>)>);

/// Every item of every DB (all values of DUPSORT keys), and each DB's statistics.
fn contents(env: &Env) -> Vec<Contents> {
    let dbs = open_dbs(env);
    let txn = env.begin_read().unwrap();
    let mut out = Vec::new();
    for (name, db) in dbs {
        let mut items = Vec::new();
        let mut cursor = txn.cursor(db).unwrap();
        while let Some((k, v)) = cursor.next().unwrap() {
            let mut v = v.to_vec();
            if db == Database::MAIN && NAMED.iter().any(|(name, _)| name.as_bytes() == k) {
                // A named DB's record: all of it travels but its root, which is renumbered.
                v[40..48].fill(0);
            }
            items.push((k.to_vec(), v));
        }
        out.push((name, txn.db_stat(db).unwrap(), items));
    }
    out
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// Writes the compact copy of the environment in `src` to `dst/data.mdb`.
fn compact(src: &Env, dst: &Path) {
    let mut f = File::create(dst.join("data.mdb")).unwrap();
    src.copy_compact_to(&mut f).unwrap();
    f.sync_all().unwrap();
}

/// The copy in `dir`: both metas verified by their trailers, meta 1 at txnid 1 naming the
/// last page as the main root, no free page, every page in use once.
fn assert_compact(dir: &Path) {
    let bytes = std::fs::read(dir.join("data.mdb")).unwrap();
    assert_eq!(bytes.len() % PS, 0);
    let pages = (bytes.len() / PS) as u64;
    let (m0, c0) = Meta::decode(&bytes[..PS], 0).unwrap();
    let (m1, c1) = Meta::decode(&bytes[PS..2 * PS], 1).unwrap();
    assert_eq!((c0, c1), (MetaCheck::Verified, MetaCheck::Verified));
    assert_eq!((m0.txnid, m0.last_pgno, m0.main_db.root), (0, 1, u64::MAX));
    assert_eq!((m1.txnid, m1.last_pgno), (1, pages - 1));
    assert_eq!(m1.main_db.root, pages - 1, "the main root is the last page");
    assert_eq!(m1.free_db.root, u64::MAX);
    assert_eq!(m1.free_db.pad as usize, PS);
    let env = open(dir);
    let report = env.check().unwrap();
    assert_eq!(report.free_pages, 0);
    assert_eq!(report.tree_pages, pages - 2);
    assert_eq!(env.info().unwrap().last_pgno, pages - 1);
}

#[test]
fn compact_copy_has_no_free_pages_and_the_same_content() {
    let src_dir = tempfile::tempdir().unwrap();
    let dst_dir = tempfile::tempdir().unwrap();
    build(src_dir.path());
    let env = open(src_dir.path());
    let before = env.check().unwrap();
    assert!(
        before.free_pages > 20,
        "the source has free pages: {before:?}"
    );
    compact(&env, dst_dir.path());
    assert_compact(dst_dir.path());
    let copy = open(dst_dir.path());
    let source = contents(&env);
    let copied = contents(&copy);
    assert_eq!(source.len(), copied.len());
    for (s, c) in source.iter().zip(&copied) {
        assert_eq!(s.0, c.0);
        assert_eq!(s.1, c.1, "{}: the statistics travel unchanged", s.0);
        assert!(s.2 == c.2, "{}: the items differ", s.0);
    }
    // Every kind of page was there to copy.
    let stat = |name: &str| source.iter().find(|s| s.0 == name).unwrap().1;
    assert!(stat("plain").overflow_pages > 0 && stat("(main)").overflow_pages > 0);
    assert!(stat("fixed").entries > 1000 && stat("dups").entries > 1000);
    assert_eq!(stat("empty").entries, 0);
    let (src_len, dst_len) = (
        file_len(&src_dir.path().join("data.mdb")),
        file_len(&dst_dir.path().join("data.mdb")),
    );
    assert_eq!(
        dst_len,
        src_len - before.free_pages * PS as u64 - {
            let fs = env.begin_read().unwrap().db_stat(Database::FREE).unwrap();
            (fs.branch_pages + fs.leaf_pages + fs.overflow_pages) * PS as u64
        },
        "the copy is the source without its free pages and free DB"
    );
    // Compacting the compact copy changes nothing: the walk's order is its page order.
    let mut again = Vec::new();
    copy.copy_compact_to(&mut again).unwrap();
    let bytes = std::fs::read(dst_dir.path().join("data.mdb")).unwrap();
    assert!(
        again == bytes,
        "a compact copy of a compact copy is the same file"
    );
    // The copy takes writes.
    let mut txn = copy.begin_write().unwrap();
    txn.put(Database::MAIN, b"after", b"copy", 0).unwrap();
    txn.commit().unwrap();
    copy.check().unwrap();
}

#[test]
fn compact_copy_of_empty_environments() {
    // A fresh environment: two metas, nothing else.
    let dst = tempfile::tempdir().unwrap();
    let env = TempEnv::new(&env_options());
    compact(&env, dst.path());
    assert_eq!(file_len(&dst.path().join("data.mdb")), 2 * PS as u64);
    let copy = open(dst.path());
    assert_eq!(copy.info().unwrap().last_txnid, 0);
    copy.check().unwrap();
    drop(copy);
    // Emptied after use, with main-DB flags: meta 1 carries them (txnid 1).
    let dst = tempfile::tempdir().unwrap();
    let env = TempEnv::new(&env_options());
    let mut txn = env.begin_write().unwrap();
    txn.open_db(None, db_flags::INTEGER_KEY as u32).unwrap();
    for i in 0..500u64 {
        txn.put(Database::MAIN, &i.to_le_bytes(), &[7; 40], 0)
            .unwrap();
    }
    txn.commit().unwrap();
    let mut txn = env.begin_write().unwrap();
    txn.drop_db(Database::MAIN, false).unwrap();
    txn.commit().unwrap();
    compact(&env, dst.path());
    assert_eq!(file_len(&dst.path().join("data.mdb")), 2 * PS as u64);
    let copy = open(dst.path());
    let txn = copy.begin_read().unwrap();
    assert_eq!(txn.id(), 1);
    assert_eq!(txn.db_flags(Database::MAIN).unwrap(), db_flags::INTEGER_KEY);
    assert_eq!(txn.stat().entries, 0);
    drop(txn);
    copy.check().unwrap();
}

/// `mdb_dump -a` output of the environment in `dir`.
fn mdb_dump(dir: &Path) -> Vec<u8> {
    let out = Command::new("mdb_dump")
        .arg("-a")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mdb_dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Whether LMDB's tools are installed; with CI (or FERROCORE_REQUIRE_LMDB_UTILS) set they
/// must be.
fn lmdb_tools(test: &str) -> bool {
    let copy = Command::new("mdb_copy")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if lmdb_utils_available() && copy {
        return true;
    }
    if std::env::var_os("CI").is_some()
        || std::env::var_os("FERROCORE_REQUIRE_LMDB_UTILS").is_some()
    {
        panic!("{test}: CI or FERROCORE_REQUIRE_LMDB_UTILS is set but mdb_dump/mdb_stat/mdb_copy (lmdb-utils) are not on PATH");
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "{test}: CHECK NOT RUN: mdb_dump/mdb_stat/mdb_copy (Debian lmdb-utils) are not on PATH; set CI or FERROCORE_REQUIRE_LMDB_UTILS to make this fail"
    );
    false
}

#[test]
fn lmdb_reads_the_compact_copy_and_its_own_compact_copy_is_the_same() {
    if !lmdb_tools("lmdb_reads_the_compact_copy_and_its_own_compact_copy_is_the_same") {
        return;
    }
    let src = tempfile::tempdir().unwrap();
    let ours = tempfile::tempdir().unwrap();
    let theirs = tempfile::tempdir().unwrap();
    build(src.path());
    {
        let env = open(src.path());
        compact(&env, ours.path());
    }
    // LMDB opens our copy: the same dump as the source, and no free page.
    let dump = mdb_dump(src.path());
    assert!(dump.len() > 100_000);
    assert!(
        mdb_dump(ours.path()) == dump,
        "mdb_dump -a of the copy differs from the source's"
    );
    let stat = Command::new("mdb_stat")
        .args(["-ef"])
        .arg(ours.path())
        .output()
        .unwrap();
    assert!(stat.status.success());
    let stat = String::from_utf8(stat.stdout).unwrap();
    let pages = file_len(&ours.path().join("data.mdb")) / PS as u64;
    assert!(
        stat.contains(&format!("  Number of pages used: {pages}\n")),
        "{stat}"
    );
    assert!(stat.contains("  Last transaction ID: 1\n"), "{stat}");
    assert!(
        stat.contains("Freelist Status\n  Tree depth: 0\n"),
        "{stat}"
    );
    assert!(stat.contains("  Free pages: 0\n"), "{stat}");

    // LMDB's own compacting copy of the same environment.
    let out = Command::new("mdb_copy")
        .arg("-c")
        .arg(src.path())
        .arg(theirs.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mdb_copy -c: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        mdb_dump(theirs.path()) == dump,
        "mdb_dump -a of mdb_copy -c differs"
    );
    let ours_bytes = std::fs::read(ours.path().join("data.mdb")).unwrap();
    let theirs_bytes = std::fs::read(theirs.path().join("data.mdb")).unwrap();
    assert_eq!(
        ours_bytes.len(),
        theirs_bytes.len(),
        "as many pages as LMDB's copy"
    );
    // The same pages in the same order, except for bytes outside what a page uses (LMDB
    // leaves stale bytes there, ferrocore zeroes them).
    let pages = ours_bytes.len() / PS;
    let mut p = 2;
    while p < pages {
        let (a, b) = (
            &ours_bytes[p * PS..(p + 1) * PS],
            &theirs_bytes[p * PS..(p + 1) * PS],
        );
        let u16_at = |o: usize| u16::from_le_bytes([a[o], a[o + 1]]) as usize;
        let flags = u16_at(10);
        if flags == 0x04 {
            // An overflow run: all of it up to the end of its value (ours zeroes the rest).
            let run = u32::from_le_bytes(a[12..16].try_into().unwrap()) as usize;
            let (a, b) = (
                &ours_bytes[p * PS..(p + run) * PS],
                &theirs_bytes[p * PS..(p + run) * PS],
            );
            let end = a.iter().rposition(|&x| x != 0).map_or(0, |e| e + 1);
            assert!(
                a[..end] == b[..end],
                "overflow run at page {p} differs from LMDB's"
            );
            p += run;
            continue;
        }
        let (lower, upper) = if flags & 0x20 != 0 {
            (16 + (u16_at(12) - 16) / 2 * u16_at(8), PS) // LEAF2: the items
        } else {
            (u16_at(12), u16_at(14))
        };
        assert!(
            a[..lower] == b[..lower] && a[upper..] == b[upper..],
            "page {p} (flags {flags:#x}) differs from LMDB's"
        );
        p += 1;
    }
    // The same holds in canonical form: compacting LMDB's copy again (which renumbers
    // nothing, and zeroes the stale bytes LMDB leaves in pages) gives our copy's pages.
    let lmdb_copy = open(theirs.path());
    let mut normalised = Vec::new();
    lmdb_copy.copy_compact_to(&mut normalised).unwrap();
    assert_eq!(normalised.len(), ours_bytes.len());
    let (ours_meta, _) = Meta::decode(&ours_bytes[PS..2 * PS], 1).unwrap();
    let (their_meta, _) = Meta::decode(&theirs_bytes[PS..2 * PS], 1).unwrap();
    assert_eq!(ours_meta.main_db, their_meta.main_db);
    assert_eq!(ours_meta.last_pgno, their_meta.last_pgno);
    assert_eq!(ours_meta.txnid, their_meta.txnid);
    let first_diff = (2..ours_bytes.len() / PS)
        .find(|&p| ours_bytes[p * PS..(p + 1) * PS] != normalised[p * PS..(p + 1) * PS]);
    assert_eq!(first_diff, None, "page differing from LMDB's compact copy");
}

#[test]
fn compact_copy_while_a_writer_commits_is_one_snapshot() {
    let env = TempEnv::new(&env_options());
    // Every commit sets all keys to the txn's round number and moves pages around, so a
    // snapshot has one number throughout; a mix of two commits would show two.
    const KEYS: u64 = 400;
    let put_round = |env: &Env, round: u64| {
        let mut txn = env.begin_write().unwrap();
        for k in 0..KEYS {
            let len = if k % 40 == 0 {
                5000
            } else {
                20 + (round % 7) as usize
            };
            let mut v = vec![0u8; len];
            v[..8].copy_from_slice(&round.to_le_bytes());
            txn.put(Database::MAIN, &k.to_be_bytes(), &v, 0).unwrap();
        }
        txn.commit().unwrap();
    };
    put_round(&env, 0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut round = 1;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                put_round(&env, round);
                round += 1;
            }
            round
        });
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..12 {
            let copy_dir = tempfile::tempdir().unwrap();
            compact(&env, copy_dir.path());
            let copy = open(copy_dir.path());
            assert_eq!(copy.check().unwrap().free_pages, 0, "copy {i}");
            let txn = copy.begin_read().unwrap();
            let mut cursor = txn.cursor(Database::MAIN).unwrap();
            let mut rounds = std::collections::BTreeSet::new();
            let mut n = 0;
            while let Some((_, v)) = cursor.next().unwrap() {
                rounds.insert(u64::from_le_bytes(v[..8].try_into().unwrap()));
                n += 1;
            }
            assert_eq!(n, KEYS, "copy {i}");
            assert_eq!(rounds.len(), 1, "copy {i} mixes commits {rounds:?}");
            seen.extend(rounds);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rounds = writer.join().unwrap();
        assert!(rounds > 1, "the writer committed meanwhile");
        eprintln!("copies saw rounds {seen:?} of {rounds}");
    });
}

/// A snapshot's pages held in memory, to damage at will.
struct Pages(Vec<u8>);

impl PageSource for Pages {
    fn page_size(&self) -> usize {
        PS
    }

    fn pages(&self, pgno: u64, count: usize) -> ferrocore::Result<&[u8]> {
        let start = (pgno as usize).checked_mul(PS);
        match start.and_then(|s| Some((s, s.checked_add(count.checked_mul(PS)?)?))) {
            Some((s, e)) if pgno >= 2 && e <= self.0.len() => Ok(&self.0[s..e]),
            _ => Err(Error::PageNotFound { pgno }),
        }
    }
}

#[test]
fn damaged_pages_give_errors_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let bytes = std::fs::read(dir.path().join("data.mdb")).unwrap();
    let meta = {
        let (m0, _) = Meta::decode(&bytes[..PS], 0).unwrap();
        let (m1, _) = Meta::decode(&bytes[PS..2 * PS], 1).unwrap();
        if m1.txnid > m0.txnid {
            m1
        } else {
            m0
        }
    };
    let undamaged = Pages(bytes.clone());
    let mut clean = Vec::new();
    ferrocore::raw::copy_snapshot(&undamaged, &meta, &mut clean).unwrap();
    let pages = bytes.len() / PS;
    let mut rng = Rng(4);
    let (mut failed, mut passed) = (0, 0);
    // Most flips land where a copy does not look (free pages, a page's unused middle) or
    // in data it copies as it is: about one round in fifteen damages what a copy checks,
    // which put 1,500 rounds at 101 failures, a hair above the threshold below, and a
    // change of the tree's shape (2026-11-28, leaves merged whenever they fit) at 96.
    for round in 0..3000 {
        let mut damaged = bytes.clone();
        // Headers and slot arrays (where page numbers and offsets live), or anywhere.
        let page = rng.range(2, pages - 1);
        let at = if round % 2 == 0 {
            rng.below(64)
        } else {
            rng.below(PS)
        };
        let byte = &mut damaged[page * PS + at];
        *byte ^= 1 << rng.below(8);
        let mut out = Vec::new();
        match ferrocore::raw::copy_snapshot(&Pages(damaged), &meta, &mut out) {
            Ok(()) => {
                passed += 1;
                assert_eq!(
                    out.len(),
                    clean.len(),
                    "round {round}: page {page} byte {at}"
                );
            }
            Err(Error::Corrupted { .. } | Error::PageNotFound { .. }) => failed += 1,
            Err(e) => panic!("round {round}: page {page} byte {at}: unexpected {e}"),
        }
    }
    eprintln!("damaged copies: {failed} failed, {passed} passed");
    assert!(
        failed > 100 && passed > 100,
        "{failed} failed, {passed} passed"
    );

    // A branch that names one child twice (and loses another): the page count is off.
    let root = meta.main_db.root as usize;
    let mut twice = bytes.clone();
    let root_page = &mut twice[root * PS..(root + 1) * PS];
    assert_eq!(
        u16::from_le_bytes([root_page[10], root_page[11]]),
        1,
        "the root is a branch"
    );
    let slot = |p: &[u8], i: usize| u16::from_le_bytes([p[16 + 2 * i], p[17 + 2 * i]]) as usize;
    let (first, second) = (slot(root_page, 0), slot(root_page, 1));
    let child0: [u8; 6] = root_page[first..first + 6].try_into().unwrap();
    root_page[second..second + 6].copy_from_slice(&child0);
    let mut out = Vec::new();
    let err = ferrocore::raw::copy_snapshot(&Pages(twice), &meta, &mut out).unwrap_err();
    assert!(matches!(err, Error::Corrupted { .. }), "{err}");
}
