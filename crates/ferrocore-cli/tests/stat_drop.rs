//! `ferrocore stat` against LMDB's `mdb_stat`, and `ferrocore drop`.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use ferrocore::EnvOptions;

/// `ferrocore stat`'s output for `args`.
fn stat(args: &[&str], path: &Path) -> String {
    String::from_utf8(stdout_of(ferrocore().arg("stat").args(args).arg(path))).unwrap()
}

/// ferrocore's output without the one line mdb_stat does not print.
fn without_oldest_reader(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("  Oldest reader: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn mdb_stat(tools: &LmdbTools, args: &[&str], path: &Path) -> String {
    String::from_utf8(tools.stat(args, path)).unwrap()
}

#[test]
fn stat_matches_mdb_stat() {
    let Some(tools) = LmdbTools::find("stat_matches_mdb_stat") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    make_named(dir.path(), 0);
    // A reader of this process stays open meanwhile: both tools list it.
    // SAFETY: the test owns the directory.
    let env = unsafe { EnvOptions::new().open(dir.path()).unwrap() };
    let reader = env.begin_read().unwrap();
    // Each tool's own read txn takes the next reader slot; once one has run, the slots'
    // high-water mark ("Number of readers used") is the same for the next ones.
    mdb_stat(&tools, &["-e"], dir.path());
    for args in [
        &["-e"][..],
        &["-e", "-r"],
        &["-r"],
        &["-rr"],
        &["-f"],
        &["-ff"],
        &["-fff"],
        &["-a"],
        &["-s", "dupsort"],
        &["-e", "-ff", "-a"],
    ] {
        let ours = stat(args, dir.path());
        let theirs = mdb_stat(&tools, args, dir.path());
        assert_eq!(without_oldest_reader(&ours), theirs, "stat {args:?}");
        if args.contains(&"-e") {
            assert!(ours.contains("  Oldest reader: 0 txns behind, pinning 0 freed pages\n"));
        }
    }
    let readers = stat(&["-r"], dir.path());
    assert!(
        readers.contains(&format!("{:>10} ", std::process::id())),
        "{readers}"
    );
    assert!(
        readers.contains(&format!(" {}\n", reader.id())),
        "{readers}"
    );
    // Without a section flag: the environment and the main DB, as always.
    assert_eq!(stat(&[], dir.path()), stat(&["-e"], dir.path()));
}

/// Starts `ferrocore dump` of a large DB into a pipe nobody reads, so it blocks with its
/// read txn open, and returns once its reader slot is in the table.
fn blocked_reader(path: &Path) -> std::process::Child {
    let child = ferrocore()
        .args(["dump", "-s", "big"])
        .arg(path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = format!("{:>10} ", child.id());
    let start = Instant::now();
    while !stat(&["-r"], path).contains(&pid) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the dump never read"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

#[test]
fn stat_clears_the_slots_of_dead_readers() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: the test owns the directory.
    let env = unsafe { EnvOptions::new().max_dbs(2).open(dir.path()).unwrap() };
    {
        // (Open throughout: the first process to open an environment starts a fresh
        // reader table, so a dead reader's slot only lasts while someone has it open.)
        let mut txn = env.begin_write().unwrap();
        let db = txn
            .open_db(Some("big"), ferrocore::db_flags::CREATE)
            .unwrap();
        for i in 0..4000u32 {
            txn.put(db, &i.to_be_bytes(), &[0x5a; 100], 0).unwrap();
        }
        txn.commit().unwrap();
    }
    let mut child = blocked_reader(dir.path());
    let pid = format!("{:>10} ", child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    let tools = LmdbTools::find("stat_clears_the_slots_of_dead_readers");
    if let Some(tools) = &tools {
        assert_eq!(
            stat(&["-r"], dir.path()),
            mdb_stat(tools, &["-r"], dir.path())
        );
    }
    let text = stat(&["-rr"], dir.path());
    let (before, after) = text
        .split_once("  1 stale readers cleared.\n")
        .expect(&text);
    assert!(before.contains(&pid), "{text}");
    assert_eq!(after, "(no active readers)\n", "{text}");
    if let Some(tools) = &tools {
        // And mdb_stat clears what ferrocore's readers leave, with the same words.
        let mut child = blocked_reader(dir.path());
        child.kill().unwrap();
        child.wait().unwrap();
        let theirs = mdb_stat(tools, &["-rr"], dir.path());
        assert!(
            theirs.contains("  1 stale readers cleared.\n(no active readers)\n"),
            "{theirs}"
        );
        assert_eq!(
            stat(&["-rr"], dir.path()),
            mdb_stat(tools, &["-rr"], dir.path())
        );
    }
}

#[test]
fn drop_empties_or_deletes() {
    let dir = tempfile::tempdir().unwrap();
    make_named(dir.path(), 0);
    let tools = LmdbTools::find("drop_empties_or_deletes");
    let run_drop = |args: &[&str]| {
        ferrocore()
            .arg("drop")
            .args(args)
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let list =
        || String::from_utf8(stdout_of(ferrocore().args(["dump", "-l"]).arg(dir.path()))).unwrap();
    let check = || {
        assert!(ferrocore()
            .arg("check")
            .arg(dir.path())
            .output()
            .unwrap()
            .status
            .success());
    };

    // Empty a named DB: it stays, with no entries.
    assert!(run_drop(&["-s", "plain"]).status.success());
    assert!(stat(&["-s", "plain"], dir.path()).contains("  Entries: 0\n"));
    assert!(list().lines().any(|l| l == "plain"));
    check();
    // Delete one: it is gone, the others stay.
    assert!(run_drop(&["-d", "-s", "dupsort"]).status.success());
    let names = list();
    assert!(!names.lines().any(|l| l == "dupsort"), "{names}");
    assert_eq!(names.lines().count(), NAMED.len() - 1, "{names}");
    check();
    if let Some(tools) = &tools {
        assert_eq!(
            stat(&["-a"], dir.path()),
            mdb_stat(tools, &["-a"], dir.path())
        );
        assert_eq!(list().into_bytes(), tools.dump(&["-l"], dir.path()));
    }
    // A DB that does not exist.
    let out = run_drop(&["-s", "dupsort"]);
    assert!(!out.status.success());
    assert!(
        stderr_text(&out).contains("database dupsort: MDB_NOTFOUND"),
        "{}",
        stderr_text(&out)
    );
    // The main DB: emptied with every named DB in it; -d does not delete it.
    assert!(run_drop(&["-d"]).status.success());
    assert!(stat(&[], dir.path()).contains("  Entries: 0\n"));
    let out = ferrocore()
        .args(["dump", "-l"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(stderr_text(&out).contains("does not contain multiple databases"));
    check();
    if let Some(tools) = &tools {
        let ours = stat(&["-e", "-ff"], dir.path());
        assert_eq!(
            without_oldest_reader(&ours),
            mdb_stat(tools, &["-e", "-ff"], dir.path())
        );
    }
    // A missing environment.
    let out = ferrocore()
        .arg("drop")
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr_text(&out).contains("no such environment"));
}

/// `stat --json`'s figures written out as `stat`'s text.
fn json_as_text(report: &serde_json::Value) -> String {
    let mut text = String::new();
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("a number: {v}"));
    let figures = |text: &mut String, db: &serde_json::Value| {
        text.push_str(&format!(
            "  Tree depth: {}\n  Branch pages: {}\n  Leaf pages: {}\n  Overflow pages: {}\n  Entries: {}\n",
            n(&db["depth"]),
            n(&db["branch_pages"]),
            n(&db["leaf_pages"]),
            n(&db["overflow_pages"]),
            n(&db["entries"])
        ));
    };
    let e = &report["environment"];
    let address = match e["map_address"].as_u64() {
        None => "(nil)".to_owned(),
        Some(a) => format!("{a:#x}"),
    };
    text.push_str(&format!(
        "Environment Info\n  Map address: {address}\n  Map size: {}\n  Page size: {}\n  Max pages: {}\n  Number of pages used: {}\n  Last transaction ID: {}\n  Max readers: {}\n  Number of readers used: {}\n  Oldest reader: {} txns behind, pinning {} freed pages\n",
        n(&e["map_size"]),
        n(&e["page_size"]),
        n(&e["max_pages"]),
        n(&e["pages_used"]),
        n(&e["last_txnid"]),
        n(&e["max_readers"]),
        n(&e["readers_used"]),
        n(&e["oldest_reader_lag"]),
        n(&e["pinned_pages"])
    ));
    let free = &report["freelist"];
    text.push_str("Freelist Status\n");
    figures(&mut text, free);
    for record in free["records"].as_array().unwrap() {
        let bad = if record["bad_sequence"].as_bool().unwrap() {
            " [bad sequence]"
        } else {
            ""
        };
        text.push_str(&format!(
            "    Transaction {}, {} pages, maxspan {}{bad}\n",
            n(&record["txnid"]),
            n(&record["pages"]),
            n(&record["maxspan"])
        ));
        for run in record["runs"].as_array().unwrap() {
            match n(&run["pages"]) {
                1 => text.push_str(&format!("     {:>9}\n", n(&run["pgno"]))),
                len => text.push_str(&format!("     {:>9}[{len}]\n", n(&run["pgno"]))),
            }
        }
    }
    text.push_str(&format!("  Free pages: {}\n", n(&free["free_pages"])));
    text.push_str("Status of Main DB\n");
    figures(&mut text, &report["db"]);
    for db in report["dbs"].as_array().unwrap() {
        text.push_str(&format!("Status of {}\n", db["name"].as_str().unwrap()));
        figures(&mut text, db);
    }
    text
}

#[test]
fn stat_json_has_the_text_figures() {
    let dir = tempfile::tempdir().unwrap();
    make_named(dir.path(), 0);
    let args = ["-e", "-fff", "-a"];
    // The first run raises the reader slots' high-water mark for both that follow.
    stat(&args, dir.path());
    let text = stat(&args, dir.path());
    let json = stat(&["--json", "-e", "-fff", "-a"], dir.path());
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json_as_text(&report), text);
    assert!(text.contains("    Transaction "), "free-DB records: {text}");
    assert_eq!(report["dbs"].as_array().unwrap().len(), NAMED.len());
    // -r alone: the reader table, and nothing after it.
    let json = stat(&["--json", "-r"], dir.path());
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let keys: Vec<&String> = report.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["readers"], "{json}");
}

/// Named DBs, DUPSORT ones among them with values on sub-pages and in sub-DBs (one key
/// with 3000 values), over three txns that free pages.
fn make_dupsort_heavy(dir: &Path) {
    use ferrocore::{db_flags, Database};
    // SAFETY: the test owns the directory.
    let env = unsafe { EnvOptions::new().max_dbs(8).open(dir).unwrap() };
    let dbs = [
        ("plain", 0),
        ("dups", db_flags::DUP_SORT),
        ("fixed", db_flags::DUP_SORT | db_flags::DUP_FIXED),
    ];
    for round in 0..3u32 {
        let mut txn = env.begin_write().unwrap();
        for (name, flags) in dbs {
            let db = txn
                .open_db(Some(name), u32::from(flags) | db_flags::CREATE)
                .unwrap();
            for i in 0..3000u32 {
                let v = (i * 3 + round).to_be_bytes();
                match name {
                    "plain" => txn.put(db, &v, &[round as u8; 100], 0).unwrap(),
                    // A key with all its values in a sub-DB, keys with a few in sub-pages.
                    _ if i % 2 == 0 => txn.put(db, b"many", &v, 0).unwrap(),
                    _ => txn.put(db, &(i % 97).to_be_bytes(), &v, 0).unwrap(),
                }
            }
            if round == 2 {
                // Deletes free pages of each kind.
                for i in 0..500u32 {
                    let _ = txn.delete(db, &(i * 3).to_be_bytes()).unwrap();
                }
                let _ = txn.delete_value(db, b"many", Some(&3u32.to_be_bytes()));
            }
        }
        txn.put(Database::MAIN, b"plain key", &[round as u8; 3000], 0)
            .unwrap();
        txn.commit().unwrap();
    }
}

#[test]
fn stat_a_e_f_matches_mdb_stat_with_named_and_dupsort_dbs() {
    let Some(tools) = LmdbTools::find("stat_a_e_f_matches_mdb_stat_with_named_and_dupsort_dbs")
    else {
        return;
    };
    let ours = tempfile::tempdir().unwrap();
    make_dupsort_heavy(ours.path());
    // The same data written by LMDB: ferrocore's dump through mdb_load.
    let lmdbs = tempfile::tempdir().unwrap();
    let dump = stdout_of(ferrocore().args(["dump", "-a"]).arg(ours.path()));
    let out = run_with_input(
        std::process::Command::new("mdb_load").arg(lmdbs.path()),
        &dump,
    );
    assert!(out.status.success(), "mdb_load: {}", stderr_text(&out));
    for dir in [ours.path(), lmdbs.path()] {
        // The first run raises the reader slots' high-water mark for both that follow.
        mdb_stat(&tools, &["-e"], dir);
        for args in [&["-a", "-e", "-f"][..], &["-a", "-e", "-ff"]] {
            let theirs = mdb_stat(&tools, args, dir);
            let ours = stat(args, dir);
            assert_eq!(
                without_oldest_reader(&ours),
                theirs,
                "stat {args:?} of {dir:?}"
            );
            assert!(theirs.contains("Status of dups\n"), "{theirs}");
            assert!(theirs.contains("Status of fixed\n"), "{theirs}");
        }
        // And the checker finds both files clean, sub-DBs and all.
        let out = ferrocore().arg("check").arg(dir).output().unwrap();
        let report = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{dir:?}: {report}");
    }
}
