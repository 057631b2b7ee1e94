//! C programs compiled against `include/lmdb.h` and run on ferrocore's `liblmdb.so`
//! (and `liblmdb.a`); the same programs also run on the real LMDB (Debian's `liblmdb0`),
//! which is the oracle for every return code they check.
//!
//! Needs a C compiler (`cc`, which Rust's linker needs anyway). The real LMDB library and
//! header are used when installed (`.ci/run` installs `liblmdb-dev`; with `CI` set they are
//! required).

mod common;
use common::{artifacts_dir, compile, ferrocore_lib_dir, ours_include, real_lmdb_available, run};

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

/// `mdb_env_copy2`/`mdb_env_copyfd2` with `MDB_CP_COMPACT`: no free pages, the same data.
#[test]
fn compact_copy_has_no_free_pages() {
    passes_on_real_lmdb_and_ferrocore("compact");
}

/// Write txn handles: one after another (the same handle, LMDB's `me_txn0`), from two
/// threads at once, with read and nested txns, a write txn refused at its begin (no txn
/// left counted), a use after the end, and an environment closed and opened again.
#[test]
fn write_txn_handles_are_reused_as_lmdb_reuses_them() {
    passes_on_real_lmdb_and_ferrocore("write_handles");
}

/// A reset or ended txn, and a parent with a child: the codes each call answers, in
/// LMDB's order of checks (a call naming a DB answers `EINVAL` for a txn that knows no DB,
/// the others `MDB_BAD_TXN`; a write through a read txn `EACCES`).
#[test]
fn finished_txns_answer_as_lmdb_answers() {
    passes_on_real_lmdb_and_ferrocore("finished_txns");
}

/// Calls on DBs where LMDB's checks decide the answer: flags given for an existing DB,
/// INTEGERDUP/REVERSEDUP without DUPSORT, a main DB with DUPSORT, over-long keys looked
/// up, a named DB's record in the main DB, a txn that dirtied a page and freed it, the
/// free DB's handle.
#[test]
fn db_calls_answer_as_lmdb_answers() {
    passes_on_real_lmdb_and_ferrocore("db_calls");
}
