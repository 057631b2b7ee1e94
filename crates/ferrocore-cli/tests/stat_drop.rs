//! `ferrocore stat` against LMDB's `mdb_stat`.

mod common;

use std::path::Path;

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
