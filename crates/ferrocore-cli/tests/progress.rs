//! Progress on standard error: none on a non-terminal (as here) unless `--progress` asks,
//! none with `--quiet`; and it never changes what a command writes on standard output.

mod common;

use std::path::Path;
use std::process::Output;

use common::*;
use ferrocore::{Database, EnvOptions};

fn make_env(dir: &Path) {
    // SAFETY: the test owns the directory.
    let env = unsafe { EnvOptions::new().open(dir).unwrap() };
    let mut txn = env.begin_write().unwrap();
    for i in 0..5000u32 {
        txn.put(Database::MAIN, &i.to_be_bytes(), &[7u8; 40], 0)
            .unwrap();
    }
    txn.commit().unwrap();
}

/// Runs `ferrocore ARGS... PATH [EXTRA]`.
fn run(args: &[&str], path: &Path, extra: Option<&Path>) -> Output {
    let mut cmd = ferrocore();
    cmd.args(args).arg(path);
    if let Some(extra) = extra {
        cmd.arg(extra);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr_text(&out));
    out
}

#[test]
fn dump_and_check_show_progress_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let plain = run(&["dump"], dir.path(), None);
    assert!(plain.stderr.is_empty(), "{}", stderr_text(&plain));
    let shown = run(&["dump", "--progress"], dir.path(), None);
    let err = stderr_text(&shown);
    assert!(err.contains("dump main DB"), "{err}");
    assert!(err.contains("5,000 entries of 5,000"), "{err}");
    assert_eq!(shown.stdout, plain.stdout, "progress leaves the dump alone");
    let quiet = run(&["dump", "--progress", "--quiet"], dir.path(), None);
    assert!(quiet.stderr.is_empty(), "{}", stderr_text(&quiet));

    let plain = run(&["check"], dir.path(), None);
    assert!(plain.stderr.is_empty(), "{}", stderr_text(&plain));
    let shown = run(&["check", "--progress"], dir.path(), None);
    assert!(
        stderr_text(&shown).contains("check "),
        "{}",
        stderr_text(&shown)
    );
    assert!(stderr_text(&shown).contains(" pages of "));
    assert_eq!(shown.stdout, plain.stdout);
}

#[test]
fn load_and_copy_show_progress_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let dump_file = dir.path().join("dump.txt");
    std::fs::write(&dump_file, run(&["dump"], dir.path(), None).stdout).unwrap();
    let file_arg = dump_file.to_str().unwrap();
    for (args, shows) in [
        (&["load", "-f", file_arg][..], false),
        (&["load", "--progress", "-f", file_arg], true),
        (&["load", "--progress", "--quiet", "-f", file_arg], false),
    ] {
        let target = tempfile::tempdir().unwrap();
        let out = run(args, target.path(), None);
        let err = stderr_text(&out);
        assert_eq!(err.contains("load "), shows, "{args:?}: {err}");
        if shows {
            assert!(err.contains(" KiB"), "{err}");
        }
        let dumped = run(&["dump"], target.path(), None).stdout;
        assert_eq!(dumped, std::fs::read(&dump_file).unwrap(), "{args:?}");
    }
    for (args, shows) in [
        (&["copy", "-c"][..], false),
        (&["copy", "-c", "--progress"], true),
        (&["copy", "--progress", "--quiet"], false),
    ] {
        let target = tempfile::tempdir().unwrap();
        let out = run(args, dir.path(), Some(target.path()));
        let err = stderr_text(&out);
        assert_eq!(err.contains("copy "), shows, "{args:?}: {err}");
    }
}
