//! Helpers of the CLI's tests: running `ferrocore` and LMDB's tools, and environments
//! written by ferrocore with every kind of DB and awkward bytes in keys and values.

#![allow(dead_code)] // each test file uses a part

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use ferrocore::{db_flags, Database, EnvOptions};

/// The `ferrocore` binary.
pub fn ferrocore() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferrocore"))
}

/// Runs `cmd`, feeding it `input`.
pub fn run_with_input(cmd: &mut Command, input: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    // A writer thread, so a child that fails early (and stops reading) cannot block us.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer");
    out
}

/// Runs `cmd` and returns its stdout, failing the test if it fails.
pub fn stdout_of(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// LMDB's command-line tools (Debian's lmdb-utils), if installed.
pub struct LmdbTools {
    /// `mdb_dump -V`'s version, e.g. (0, 9, 24).
    pub version: (u32, u32, u32),
}

impl LmdbTools {
    /// The tools, or None (with a message on stderr) when they are not on PATH. With CI or
    /// FERROCORE_REQUIRE_LMDB_UTILS set, their absence fails the test.
    pub fn find(test: &str) -> Option<LmdbTools> {
        let found = ["mdb_dump", "mdb_stat", "mdb_load"]
            .iter()
            .all(|tool| Command::new(tool).arg("-V").output().is_ok());
        if !found {
            if std::env::var_os("FERROCORE_REQUIRE_LMDB_UTILS").is_some()
                || std::env::var_os("CI").is_some()
            {
                panic!("{test}: CI or FERROCORE_REQUIRE_LMDB_UTILS is set but mdb_dump, mdb_stat and mdb_load (lmdb-utils) are not on PATH");
            }
            // Straight to the process's stderr, so that the test harness does not swallow it.
            let _ = writeln!(
                std::io::stderr(),
                "{test}: CHECK NOT RUN: mdb_dump/mdb_stat/mdb_load (Debian lmdb-utils) are not on PATH; set CI or FERROCORE_REQUIRE_LMDB_UTILS to make this fail"
            );
            return None;
        }
        let out = Command::new("mdb_dump")
            .arg("-V")
            .output()
            .expect("mdb_dump -V");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // "LMDB 0.9.24: (July 24, 2019)"
        let numbers: Vec<u32> = text
            .trim_start_matches("LMDB ")
            .split(':')
            .next()
            .unwrap_or("")
            .split('.')
            .map(|n| n.parse().unwrap_or(0))
            .collect();
        assert_eq!(numbers.len(), 3, "mdb_dump -V printed {text:?}");
        Some(LmdbTools {
            version: (numbers[0], numbers[1], numbers[2]),
        })
    }

    /// True if this `mdb_dump -p` writes a backslash bare (LMDB before 0.9.25, ITS#9068),
    /// where ferrocore writes `\\`.
    pub fn bare_backslash(&self) -> bool {
        self.version < (0, 9, 25)
    }

    /// `mdb_dump`'s output for `args`.
    pub fn dump(&self, args: &[&str], path: &Path) -> Vec<u8> {
        stdout_of(Command::new("mdb_dump").args(args).arg(path))
    }

    /// `mdb_stat`'s output for `args`.
    pub fn stat(&self, args: &[&str], path: &Path) -> Vec<u8> {
        let mut cmd = Command::new("mdb_stat");
        cmd.args(args).arg(path);
        if !args.iter().any(|a| a.starts_with("-r")) {
            return stdout_of(&mut cmd);
        }
        // mdb_stat -r exits with a failure when it succeeds: it returns what its last
        // fputs returned (a positive count). An error would say something on stderr.
        let out = cmd.output().expect("run mdb_stat");
        assert!(out.stderr.is_empty(), "{cmd:?}: {}", stderr_text(&out));
        out.stdout
    }
}

/// Turns ferrocore's `-p` output into what an LMDB before 0.9.25 writes: the backslash
/// bare. (The reverse is not possible: that output is ambiguous.)
pub fn with_bare_backslashes(dump: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(dump.len());
    for line in dump.split_inclusive(|&c| c == b'\n') {
        if line.first() != Some(&b' ') {
            out.extend_from_slice(line);
            continue;
        }
        let mut i = 0;
        while i < line.len() {
            if line[i] == b'\\' && line.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
            } else if line[i] == b'\\' {
                out.extend_from_slice(&line[i..(i + 3).min(line.len())]);
                i += 3;
            } else {
                out.push(line[i]);
                i += 1;
            }
        }
    }
    out
}

/// Keys with bytes the text format must escape or keep: spaces, backslashes (also before
/// hex digits), control bytes, 0x7f, 0xff, NUL.
pub const TRICKY_KEYS: &[&[u8]] = &[
    b"a key with spaces",
    b" leading space",
    b"back\\slash",
    b"\\41 looks like an escape",
    b"\\\\",
    b"ctl\x01\x02\t\n\r",
    b"del\x7f",
    b"\xff\xfe high",
    b"\x00nul",
    b"tilde~",
];

/// Writes, with ferrocore, an environment holding a value of each tricky key in the main
/// DB and nothing else.
pub fn make_main_only(dir: &Path) {
    // SAFETY: the test owns the directory.
    let env = unsafe { EnvOptions::new().open(dir).expect("open") };
    let mut txn = env.begin_write().expect("txn");
    for (i, key) in TRICKY_KEYS.iter().enumerate() {
        let value: Vec<u8> = key.iter().rev().copied().chain([i as u8]).collect();
        txn.put(Database::MAIN, key, &value, 0).expect("put");
    }
    txn.put(Database::MAIN, b"empty value", b"", 0)
        .expect("put");
    txn.put(Database::MAIN, b"overflow", &[0xab; 9000], 0)
        .expect("put");
    txn.commit().expect("commit");
}

/// The named DBs of [`make_named`], with their flags.
pub const NAMED: &[(&str, u16)] = &[
    ("plain", 0),
    ("name with spaces", 0),
    ("dupsort", db_flags::DUP_SORT),
    ("dupfixed", db_flags::DUP_SORT | db_flags::DUP_FIXED),
    ("integerkey", db_flags::INTEGER_KEY),
    ("reversekey", db_flags::REVERSE_KEY),
    (
        "integerdup",
        db_flags::DUP_SORT | db_flags::DUP_FIXED | db_flags::INTEGER_DUP,
    ),
    ("reversedup", db_flags::DUP_SORT | db_flags::REVERSE_DUP),
];

/// Writes, with ferrocore, an environment with every DB of [`NAMED`] (tricky keys and
/// values in each, as its flags allow), and one plain key in the main DB beside the DBs'
/// records, over two txns (so that the free list is not empty).
pub fn make_named(dir: &Path, flags: u32) {
    // SAFETY: the test owns the directory (or file).
    let env = unsafe {
        EnvOptions::new()
            .max_dbs(16)
            .flags(flags)
            .open(dir)
            .expect("open")
    };
    for round in 0..2u8 {
        let mut txn = env.begin_write().expect("txn");
        for &(name, db_flags) in NAMED {
            let db = txn
                .open_db(Some(name), u32::from(db_flags) | db_flags::CREATE)
                .expect("open_db");
            fill(&mut txn, db, db_flags, round);
        }
        txn.put(Database::MAIN, b"not a db", &[round; 48], 0)
            .expect("put");
        txn.commit().expect("commit");
    }
}

fn fill(txn: &mut ferrocore::WriteTxn<'_>, db: Database, flags: u16, round: u8) {
    let n = 40u32;
    if flags & db_flags::INTEGER_KEY != 0 {
        for i in 0..n {
            let key = (i * 1000 + u32::from(round)).to_ne_bytes();
            txn.put(db, &key, TRICKY_KEYS[i as usize % TRICKY_KEYS.len()], 0)
                .expect("put");
        }
        return;
    }
    if flags & db_flags::DUP_FIXED != 0 {
        for (i, key) in TRICKY_KEYS.iter().enumerate() {
            for v in 0..5u32 {
                let value = (v * 7 + u32::from(round) + i as u32 * 100).to_ne_bytes();
                txn.put(db, key, &value, 0).expect("put");
            }
        }
        return;
    }
    for (i, key) in TRICKY_KEYS.iter().enumerate() {
        let value: Vec<u8> = [round, i as u8, b'\\', 0xff, b' '].to_vec();
        txn.put(db, key, &value, 0).expect("put");
        if flags & db_flags::DUP_SORT != 0 {
            for other in TRICKY_KEYS.iter().take(4) {
                let mut value = other.to_vec();
                value.push(round);
                txn.put(db, key, &value, 0).expect("put");
            }
        }
    }
    if flags & db_flags::DUP_SORT == 0 {
        // A value on overflow pages, replaced in the second round (pages freed).
        txn.put(db, b"big", &vec![round; 6000], 0).expect("put");
    }
}

/// The text of a command's stderr.
pub fn stderr_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
