//! The `ferrocore` command: the demo (the README's main job), `stat` and `check`.

use std::os::unix::fs::FileExt;
use std::process::Command;

use ferrocore::{Database, EnvOptions};

fn ferrocore() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferrocore"))
}

fn make_env(dir: &std::path::Path) {
    // SAFETY: the test owns the directory.
    let env = unsafe { EnvOptions::new().open(dir).unwrap() };
    let mut txn = env.begin_write().unwrap();
    for i in 0..3000u32 {
        txn.put(Database::MAIN, &i.to_be_bytes(), &[7u8; 60], 0)
            .unwrap();
    }
    txn.commit().unwrap();
}

#[test]
fn demo_runs_and_checks_its_environment() {
    let out = ferrocore()
        .args(["demo", "-n", "3000", "--batch", "500"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("every page accounted for"), "{text}");
    assert!(text.contains("entries 3000"), "{text}");
}

#[test]
fn stat_and_check_report_on_an_environment() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let out = ferrocore().arg("stat").arg(dir.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Entries: 3000"), "{text}");
    assert!(text.contains("Page size: 4096"), "{text}");
    let out = ferrocore().arg("check").arg(dir.path()).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ok:"));
}

#[test]
fn check_reports_a_damaged_file_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    // Damage the slot array of page 3 (a leaf or branch of the main tree).
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("data.mdb"))
        .unwrap();
    f.write_all_at(&[0xff, 0x0f], 3 * 4096 + 16).unwrap();
    drop(f);
    let out = ferrocore().arg("check").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a damaged file fails the check");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("MDB_CORRUPTED"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("CORRUPTED:"), "{text}");
    assert!(text.contains("page 3, main DB"), "{text}");
    let out = ferrocore()
        .arg("check")
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "check of a missing environment: it cannot be read at all"
    );
    let out = ferrocore()
        .arg("stat")
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "a missing environment is an error, not a crash"
    );
}
