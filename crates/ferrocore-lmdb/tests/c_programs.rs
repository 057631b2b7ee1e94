//! C programs compiled against `include/lmdb.h` and run on ferrocore's `liblmdb.so`
//! (and `liblmdb.a`); the same programs also run on the real LMDB (Debian's `liblmdb0`),
//! which is the oracle for every return code they check.
//!
//! Needs a C compiler (`cc`, which Rust's linker needs anyway). The real LMDB library and
//! header are used when installed (`.ci/run` installs `liblmdb-dev`; with `CI` set they are
//! required).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where cargo put `liblmdb.so` and `liblmdb.a` for this test run: `cargo test` leaves
/// them beside the test executable in `target/<profile>/deps` (`cargo build` also copies
/// them up to `target/<profile>`, where an older build's copy may be stale).
fn artifacts_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("target/<profile>/deps/<test>");
    if deps.join("liblmdb.so").exists() {
        return deps.to_path_buf();
    }
    deps.parent().expect("target/<profile>").to_path_buf()
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A directory holding `liblmdb.so.0` -> ferrocore's `liblmdb.so`, for LD_LIBRARY_PATH.
fn ferrocore_lib_dir(tmp: &Path) -> PathBuf {
    let so = artifacts_dir().join("liblmdb.so");
    assert!(so.exists(), "{} not built", so.display());
    let dir = tmp.join("lib");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&so, dir.join("liblmdb.so.0")).unwrap();
    dir
}

/// Compiles `tests/c/<name>.c` with `args` into `tmp/<out>`.
fn compile(tmp: &Path, name: &str, out: &str, args: &[&str]) -> PathBuf {
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
fn run(exe: &Path, vars: &[(&str, &Path)], expect_ferrocore: bool) {
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

fn ours_include() -> String {
    format!("-I{}", crate_dir().join("include").display())
}

/// The real LMDB is installed (library and header), or required under CI.
fn real_lmdb_available() -> bool {
    let header = Path::new("/usr/include/lmdb.h").exists();
    let lib = Command::new("sh")
        .args(["-c", "ldconfig -p | grep -q 'liblmdb.so.0 '"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if std::env::var_os("CI").is_some() {
        assert!(
            header && lib,
            "CI needs the real LMDB (apt-get install liblmdb-dev)"
        );
    }
    header && lib
}

#[test]
fn api_program_passes_on_ferrocore_shared_library() {
    let tmp = tempfile::tempdir().unwrap();
    let lib_dir = ferrocore_lib_dir(tmp.path());
    let link = format!("-L{}", lib_dir.display());
    let exe = compile(
        tmp.path(),
        "api",
        "api",
        &[&ours_include(), &link, "-l:liblmdb.so.0"],
    );
    run(&exe, &[("LD_LIBRARY_PATH", &lib_dir)], true);
}

#[test]
fn api_program_passes_on_ferrocore_static_library() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = artifacts_dir().join("liblmdb.a");
    let archive = archive.to_str().unwrap();
    let exe = compile(
        tmp.path(),
        "api",
        "api-static",
        &[&ours_include(), archive, "-lpthread", "-ldl", "-lm"],
    );
    run(&exe, &[], true);
}

#[test]
fn api_program_passes_on_real_lmdb_and_binary_swaps_to_ferrocore() {
    if !real_lmdb_available() {
        eprintln!("skipped: the real LMDB (liblmdb-dev) is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Built against LMDB's own header and library: the oracle for every checked code.
    let exe = compile(
        tmp.path(),
        "api",
        "api-real",
        &["-I/usr/include", "-l:liblmdb.so.0"],
    );
    run(&exe, &[], false);
    // The same binary, unchanged, on ferrocore's library.
    let lib_dir = ferrocore_lib_dir(tmp.path());
    run(&exe, &[("LD_LIBRARY_PATH", &lib_dir)], true);
}

/// Builds `tests/c/<name>.c` against LMDB's header and library and runs it there (the
/// oracle), then runs the same binary on ferrocore's `liblmdb.so.0`; without the real
/// LMDB (outside CI), only the ferrocore build runs.
fn passes_on_real_lmdb_and_ferrocore(name: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let lib_dir = ferrocore_lib_dir(tmp.path());
    if !real_lmdb_available() {
        eprintln!("the real LMDB (liblmdb-dev) is not installed: {name} runs on ferrocore only");
        let link = format!("-L{}", lib_dir.display());
        let exe = compile(
            tmp.path(),
            name,
            name,
            &[&ours_include(), &link, "-l:liblmdb.so.0"],
        );
        run(&exe, &[("LD_LIBRARY_PATH", &lib_dir)], true);
        return;
    }
    let exe = compile(
        tmp.path(),
        name,
        name,
        &["-I/usr/include", "-l:liblmdb.so.0"],
    );
    run(&exe, &[], false);
    run(&exe, &[("LD_LIBRARY_PATH", &lib_dir)], true);
}

/// `MDB_MULTIPLE`: the count of values stored on every return (up to the value that
/// failed; 0 when refused up front) and where `mv_data` is left.
#[test]
fn multiple_put_reports_values_stored_on_every_return() {
    passes_on_real_lmdb_and_ferrocore("multiple");
}
