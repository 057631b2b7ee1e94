//! `ferrocore copy`, as `mdb_copy`: plain and compacting copies to a directory, a file
//! (`-n`) and standard output, the previous snapshot (`-v`), and clear failures.

mod common;

use std::path::Path;

use common::*;
use ferrocore::{env_flags, Database, EnvOptions};

/// `ferrocore dump -a` of the environment at `path` (`-n`: a data file).
fn dump_all(path: &Path, no_subdir: bool) -> Vec<u8> {
    let mut cmd = ferrocore();
    cmd.args(["dump", "-a"]);
    if no_subdir {
        cmd.arg("-n");
    }
    stdout_of(cmd.arg(path))
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// `ferrocore check`'s report line for `path`.
fn check(path: &Path, no_subdir: bool) -> String {
    let mut cmd = ferrocore();
    cmd.arg("check");
    if no_subdir {
        cmd.arg("-n");
    }
    String::from_utf8(stdout_of(cmd.arg(path))).unwrap()
}

#[test]
fn plain_and_compact_copies_to_a_directory_and_to_stdout() {
    let src = tempfile::tempdir().unwrap();
    make_named(src.path(), 0);
    let source_dump = dump_all(src.path(), false);
    let source_check = check(src.path(), false);
    assert!(!source_check.contains(" 0 free pages"), "{source_check}");

    let plain = tempfile::tempdir().unwrap();
    stdout_of(ferrocore().arg("copy").arg(src.path()).arg(plain.path()));
    assert!(
        !plain.path().join("lock.mdb").exists(),
        "no lock file is written"
    );
    assert_eq!(dump_all(plain.path(), false), source_dump);
    assert_eq!(
        len(&plain.path().join("data.mdb")),
        len(&src.path().join("data.mdb"))
    );

    let compact = tempfile::tempdir().unwrap();
    stdout_of(
        ferrocore()
            .arg("copy")
            .arg("-c")
            .arg(src.path())
            .arg(compact.path()),
    );
    assert_eq!(dump_all(compact.path(), false), source_dump);
    assert!(check(compact.path(), false).contains(" 0 free pages"));
    let compact_file = std::fs::read(compact.path().join("data.mdb")).unwrap();
    assert!((compact_file.len() as u64) < len(&src.path().join("data.mdb")));

    // To standard output: the same bytes (a compact copy of one snapshot is the same file
    // every time).
    let to_stdout = stdout_of(ferrocore().args(["copy", "-c"]).arg(src.path()));
    assert!(
        to_stdout == compact_file,
        "copy -c to stdout differs from copy -c DIR"
    );
    let plain_stdout = stdout_of(ferrocore().arg("copy").arg(src.path()));
    assert_eq!(plain_stdout.len() as u64, len(&src.path().join("data.mdb")));
}

#[test]
fn no_subdir_copies_are_files() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.mdb");
    make_named(&src, env_flags::NO_SUB_DIR);
    let dump = dump_all(&src, true);
    for (flag, name) in [(None, "plain.mdb"), (Some("-c"), "compact.mdb")] {
        let dst = dir.path().join(name);
        let mut cmd = ferrocore();
        cmd.args(["copy", "-n"]).args(flag).arg(&src).arg(&dst);
        stdout_of(&mut cmd);
        assert_eq!(dump_all(&dst, true), dump, "{name}");
        check(&dst, true);
    }
    assert!(len(&dir.path().join("compact.mdb")) < len(&src));
}

#[test]
fn previous_snapshot_copy() {
    let src = tempfile::tempdir().unwrap();
    {
        // SAFETY: the test owns the directory.
        let env = unsafe { EnvOptions::new().open(src.path()).unwrap() };
        for round in 1..=3u8 {
            let mut txn = env.begin_write().unwrap();
            for i in 0..200u32 {
                txn.put(Database::MAIN, &i.to_be_bytes(), &[round; 100], 0)
                    .unwrap();
            }
            txn.commit().unwrap();
        }
    }
    for flags in [&["-v"][..], &["-v", "-c"]] {
        let dst = tempfile::tempdir().unwrap();
        stdout_of(
            ferrocore()
                .arg("copy")
                .args(flags)
                .arg(src.path())
                .arg(dst.path()),
        );
        // SAFETY: the test owns the directory.
        let env = unsafe { EnvOptions::new().open(dst.path()).unwrap() };
        let txn = env.begin_read().unwrap();
        assert_eq!(
            txn.get(Database::MAIN, &7u32.to_be_bytes()).unwrap(),
            Some(&[2u8; 100][..])
        );
        assert_eq!(txn.stat().entries, 200);
        drop(txn);
        env.check().unwrap();
    }
    // A new environment has no earlier snapshot.
    let fresh = tempfile::tempdir().unwrap();
    // SAFETY: the test owns the directory.
    drop(unsafe { EnvOptions::new().open(fresh.path()).unwrap() });
    let dst = tempfile::tempdir().unwrap();
    let out = ferrocore()
        .args(["copy", "-v"])
        .arg(fresh.path())
        .arg(dst.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr_text(&out).contains("no snapshot before the latest commit"),
        "{}",
        stderr_text(&out)
    );
    assert!(
        !dst.path().join("data.mdb").exists(),
        "a failed copy leaves no file"
    );
}

#[test]
fn copy_failures_are_clear() {
    let src = tempfile::tempdir().unwrap();
    make_main_only(src.path());
    // The destination directory must exist, and hold no data.mdb yet.
    let missing = src.path().join("no-such-dir");
    let out = ferrocore()
        .args(["copy", "-c"])
        .arg(src.path())
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr_text(&out).contains("no-such-dir"),
        "{}",
        stderr_text(&out)
    );
    let dst = tempfile::tempdir().unwrap();
    std::fs::write(dst.path().join("data.mdb"), b"precious").unwrap();
    let out = ferrocore()
        .arg("copy")
        .arg(src.path())
        .arg(dst.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr_text(&out).contains("exists"),
        "{}",
        stderr_text(&out)
    );
    assert_eq!(
        std::fs::read(dst.path().join("data.mdb")).unwrap(),
        b"precious"
    );
    // A source that is not an environment.
    let empty = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let out = ferrocore()
        .arg("copy")
        .arg(empty.path())
        .arg(dst.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr_text(&out).contains("not an environment"),
        "{}",
        stderr_text(&out)
    );
}
