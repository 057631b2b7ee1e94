//! Helpers of the tests that build C programs against `lmdb.h` and run them on ferrocore's
//! `liblmdb.so` and on the real LMDB (Debian's `liblmdb0`).
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where cargo put `liblmdb.so` and `liblmdb.a` for this test run: `cargo test` leaves
/// them beside the test executable in `target/<profile>/deps` (`cargo build` also copies
/// them up to `target/<profile>`, where an older build's copy may be stale).
pub fn artifacts_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("target/<profile>/deps/<test>");
    if deps.join("liblmdb.so").exists() {
        return deps.to_path_buf();
    }
    deps.parent().expect("target/<profile>").to_path_buf()
}

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A directory holding `liblmdb.so.0` -> ferrocore's `liblmdb.so`, for LD_LIBRARY_PATH.
pub fn ferrocore_lib_dir(tmp: &Path) -> PathBuf {
    let so = artifacts_dir().join("liblmdb.so");
    assert!(so.exists(), "{} not built", so.display());
    let dir = tmp.join("lib");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&so, dir.join("liblmdb.so.0")).unwrap();
    dir
}

/// Compiles `tests/c/<name>.c` with `args` into `tmp/<out>`.
pub fn compile(tmp: &Path, name: &str, out: &str, args: &[&str]) -> PathBuf {
    let src = crate_dir().join("tests/c").join(format!("{name}.c"));
    let exe = tmp.join(out);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let output = Command::new(&cc)
        .arg("-Wall")
        .arg("-Werror")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(
        output.status.success(),
        "compiling {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

/// Runs `exe` on a fresh directory with extra environment `vars`; asserts it passed.
pub fn run(exe: &Path, vars: &[(&str, &Path)], expect_ferrocore: bool) {
    let work = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(exe);
    cmd.arg(work.path());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    if expect_ferrocore {
        cmd.env("EXPECT_FERROCORE", "1");
    }
    let output = cmd.output().unwrap();
    assert!(
        output.status.success(),
        "{} failed ({}):\n{}{}",
        exe.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

pub fn ours_include() -> String {
    format!("-I{}", crate_dir().join("include").display())
}

/// The real LMDB is installed (library and header), or required under CI.
pub fn real_lmdb_available() -> bool {
    let header = Path::new("/usr/include/lmdb.h").exists();
    let lib = Command::new("sh")
        .args(["-c", "ldconfig -p | grep -q 'liblmdb.so.0 '"])
        .status()
        .is_ok_and(|s| s.success());
    if std::env::var_os("CI").is_some() {
        assert!(
            header && lib,
            "CI needs the real LMDB (apt-get install liblmdb-dev)"
        );
    }
    header && lib
}
