//! `ferrocore load` into empty DBs: the bottom-up build for sorted input, the external
//! sort for input out of order, and the same refusals, at the same lines, as puts give.

mod common;

use std::path::Path;

use common::*;
use ferrocore::{db_flags, env_flags, Database, Env, EnvOptions, Stat};

/// Pairs of a plain DB, a DUPSORT DB (single values, sub-pages, sub-DBs) and a DUPFIXED
/// one, each section as (name, flags, pairs).
type Sections = Vec<(&'static str, u16, Vec<(Vec<u8>, Vec<u8>)>)>;

fn sections() -> Sections {
    let mut x = 77u64;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    let plain = (0..20_000)
        .map(|_| {
            let k = (next() % 15_000).to_be_bytes().to_vec(); // some keys repeat
            let len = [3, 100, 2500][next() as usize % 3];
            (k, vec![next() as u8; len])
        })
        .collect();
    let dups = (0..20_000)
        .map(|_| {
            let k = format!("k{}", next() % [3, 40, 2000][next() as usize % 3]).into_bytes();
            let len = 1 + next() as usize % 30;
            (k, vec![next() as u8; len])
        })
        .collect();
    let fixed = (0..10_000)
        .map(|_| {
            let k = (next() % 100).to_le_bytes().to_vec();
            (k, (next() as u32).to_le_bytes().to_vec())
        })
        .collect();
    vec![
        ("plain", 0, plain),
        ("dups", db_flags::DUP_SORT, dups),
        (
            "fixed",
            db_flags::DUP_SORT
                | db_flags::DUP_FIXED
                | db_flags::INTEGER_DUP
                | db_flags::INTEGER_KEY,
            fixed,
        ),
    ]
}

fn open(dir: &Path) -> Env {
    // SAFETY: the test owns the directory.
    unsafe {
        EnvOptions::new()
            .max_dbs(8)
            .flags(env_flags::NO_SYNC)
            .open(dir)
            .unwrap()
    }
}

/// The environment ordinary puts make of `sections`, in `dir`.
fn put_all(dir: &Path, sections: &Sections) {
    let env = open(dir);
    let mut txn = env.begin_write().unwrap();
    for (name, flags, pairs) in sections {
        let db = txn
            .open_db(Some(name), u32::from(*flags) | db_flags::CREATE)
            .unwrap();
        for (k, v) in pairs {
            txn.put(db, k, v, 0).unwrap();
        }
    }
    txn.commit().unwrap();
}

fn stat_of(dir: &Path, name: &str) -> Stat {
    let env = open(dir);
    let txn = env.begin_read().unwrap();
    let db = txn.open_db(Some(name)).unwrap();
    txn.db_stat(db).unwrap()
}

fn dump(args: &[&str], path: &Path) -> Vec<u8> {
    stdout_of(ferrocore().arg("dump").args(args).arg(path))
}

/// `text` (a dump) with each section's data lines in a shuffled order.
fn shuffled(text: &[u8], seed: u64) -> Vec<u8> {
    let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    let mut out = Vec::new();
    let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
    let mut in_data = false;
    let mut x = seed;
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if in_data && l.first() == Some(&b' ') {
            pairs.push((l, lines[i + 1]));
            i += 2;
            continue;
        }
        if in_data {
            // DATA=END: the section's pairs, shuffled, before it.
            for j in (1..pairs.len()).rev() {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                pairs.swap(j, (x >> 33) as usize % (j + 1));
            }
            for (k, v) in pairs.drain(..) {
                out.extend_from_slice(k);
                out.push(b'\n');
                out.extend_from_slice(v);
                out.push(b'\n');
            }
            in_data = false;
        }
        in_data |= l == b"HEADER=END";
        out.extend_from_slice(l);
        if i + 1 < lines.len() {
            out.push(b'\n');
        }
        i += 1;
    }
    out
}

fn load(args: &[&str], path: &Path, text: &[u8]) {
    let out = run_with_input(ferrocore().arg("load").args(args).arg(path), text);
    assert!(out.status.success(), "load {args:?}: {}", stderr_text(&out));
}

#[test]
fn a_dump_loads_bottom_up_and_dumps_back_the_same() {
    let data = sections();
    let source = tempfile::tempdir().unwrap();
    put_all(source.path(), &data);
    let text = dump(&["-a"], source.path());
    let target = tempfile::tempdir().unwrap();
    load(&[], target.path(), &text);
    assert_eq!(dump(&["-a"], target.path()), text);
    open(target.path()).check().expect("check");
    // Built from full pages: fewer leaves than the puts made.
    for name in ["plain", "dups", "fixed"] {
        let (put, bulk) = (stat_of(source.path(), name), stat_of(target.path(), name));
        assert_eq!(put.entries, bulk.entries, "{name}");
        assert!(
            bulk.leaf_pages < put.leaf_pages,
            "{name}: {bulk:?} vs {put:?}"
        );
    }
    if let Some(tools) = LmdbTools::find("a_dump_loads_bottom_up_and_dumps_back_the_same") {
        assert_eq!(tools.dump(&["-a"], target.path()), text, "LMDB's mdb_dump");
    }
}

#[test]
fn input_out_of_order_is_sorted_within_the_memory_budget() {
    let data = sections();
    let source = tempfile::tempdir().unwrap();
    put_all(source.path(), &data);
    let text = dump(&["-a"], source.path());
    let mixed = shuffled(&text, 5);
    assert_ne!(mixed, text);
    for memory in ["64K", "256M"] {
        let target = tempfile::tempdir().unwrap();
        load(&["--memory", memory], target.path(), &mixed);
        assert_eq!(dump(&["-a"], target.path()), text, "--memory {memory}");
        open(target.path()).check().expect("check");
        let (put, bulk) = (
            stat_of(source.path(), "plain"),
            stat_of(target.path(), "plain"),
        );
        assert!(bulk.leaf_pages < put.leaf_pages, "{bulk:?} vs {put:?}");
    }
}

#[test]
fn a_repeated_key_keeps_its_last_value_in_order_or_not() {
    let dir = tempfile::tempdir().unwrap();
    // In order (the streaming path), then out of order (the sort path).
    load(
        &["-T", "-s", "a"],
        dir.path(),
        b"k1\nfirst\nk1\nlast\nk2\nv\n",
    );
    load(
        &["-T", "-s", "b"],
        dir.path(),
        b"k2\nv\nk1\nfirst\nk1\nlast\n",
    );
    for name in ["a", "b"] {
        let text = String::from_utf8(dump(&["-p", "-s", name], dir.path())).unwrap();
        assert!(
            text.contains("\n k1\n last\n k2\n v\nDATA=END\n"),
            "{name}: {text}"
        );
    }
    // A DB with data takes puts; the result is the same.
    load(&["-T", "-s", "a"], dir.path(), b"k0\nzero\nk1\nnewer\n");
    let env = open(dir.path());
    let txn = env.begin_read().unwrap();
    let db = txn.open_db(Some("a")).unwrap();
    assert_eq!(txn.get(db, b"k1").unwrap(), Some(&b"newer"[..]));
    assert_eq!(txn.db_stat(db).unwrap().entries, 3);
    assert_ne!(db, Database::MAIN);
}

#[test]
fn refusals_in_sorted_input_name_the_line_a_put_would() {
    let header = "VERSION=3\nformat=bytevalue\ndatabase=df\ndupsort=1\ndupfixed=1\nHEADER=END\n";
    // Lines 7..: keys and values. Out of order at once, so the sort path decides.
    let cases = [
        // An empty key, after the input turned out of order.
        (
            "VERSION=3\nformat=bytevalue\nHEADER=END\n 6b32\n 00\n 6b31\n 00\n \n 00\nDATA=END\n",
            "line 9: put refused: MDB_BAD_VALSIZE",
        ),
        // DUPFIXED: sizes 4 (line 8), 2 (line 10), 4 (line 12); sorted 0102 first. A put
        // of line 10 is the first refused.
        (
            &*format!("{header} 6b\n 05060708\n 6b\n 0102\n 6b\n 01020304\nDATA=END\n"),
            "line 10: put refused: MDB_BAD_VALSIZE",
        ),
    ];
    for (input, message) in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = run_with_input(
            ferrocore().args(["load", "--memory", "4K"]).arg(dir.path()),
            input.as_bytes(),
        );
        let err = stderr_text(&out);
        assert!(!out.status.success(), "accepted:\n{input}");
        assert!(err.contains(message), "input:\n{input}\nstderr: {err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
    let out = run_with_input(
        ferrocore().args(["load", "--memory", "lots"]).arg("/tmp"),
        b"",
    );
    assert!(!out.status.success());
    assert!(stderr_text(&out).contains("expected a size"));
}
