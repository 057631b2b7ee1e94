//! The unsorted load (issue 14): N entries in random order, as `mdb_dump` text, loaded by
//! `ferrocore load` (external sort within `--memory`, then the bottom-up build) and by
//! LMDB's `mdb_load` (a put per entry), each in a child process, A/B alternated. Prints
//! wall time, peak resident set (the child's `ru_maxrss`) and file size, with ratios.
//!
//! Needs `mdb_load` on PATH (Debian's lmdb-utils) and the `ferrocore` binary next to this
//! one: `cargo build --release -p ferrocore-cli -p ferrocore-bench`.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Args;

use crate::data::Rng;
use crate::median;

#[derive(Args)]
pub struct LoadArgs {
    /// Entries to load.
    #[arg(short = 'n', long, default_value_t = 10_000_000)]
    n: u64,
    /// Key length in bytes (random bytes, so the input is unsorted).
    #[arg(long, default_value_t = 16)]
    key_len: usize,
    /// Value length in bytes.
    #[arg(long, default_value_t = 16)]
    value_len: usize,
    /// `ferrocore load --memory`: the external sort's budget.
    #[arg(long, default_value = "256M")]
    memory: String,
    /// Runs per tool (alternated); medians are printed.
    #[arg(short, long, default_value_t = 3)]
    repeat: usize,
    /// Runs only ferrocore (to compare memory budgets without waiting for mdb_load).
    #[arg(long)]
    ferrocore_only: bool,
    /// Where the dump and the databases go (a temporary directory by default).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// One load: seconds, peak RSS in KiB, file bytes.
struct Measured {
    secs: f64,
    peak_kib: u64,
    file_bytes: u64,
}

/// Writes `n` random pairs as `mdb_dump` text (bytevalue format) to `path`.
fn write_dump(path: &Path, args: &LoadArgs) {
    let file = std::fs::File::create(path).expect("create the dump");
    let mut out = BufWriter::with_capacity(1 << 20, file);
    writeln!(
        out,
        "VERSION=3\nformat=bytevalue\ntype=btree\nmapsize={}\nmaxreaders=126\nHEADER=END",
        map_size(args)
    )
    .unwrap();
    let mut rng = Rng(0x5EED_10AD);
    let (mut key, mut value) = (vec![0u8; args.key_len], vec![0u8; args.value_len]);
    let mut line = String::new();
    for _ in 0..args.n {
        rng.fill(&mut key);
        rng.fill(&mut value);
        line.clear();
        for part in [&key, &value] {
            line.push(' ');
            for b in part {
                line.push(char::from_digit(u32::from(b >> 4), 16).unwrap());
                line.push(char::from_digit(u32::from(b & 15), 16).unwrap());
            }
            line.push('\n');
        }
        out.write_all(line.as_bytes()).unwrap();
    }
    writeln!(out, "DATA=END").unwrap();
    out.flush().unwrap();
}

/// A map size with room for the data three times over (LMDB's load needs the room its
/// half-full pages take).
fn map_size(args: &LoadArgs) -> u64 {
    let entry = (args.key_len + args.value_len + 8 + 2) as u64;
    (args.n * entry * 3).max(64 << 20).next_multiple_of(1 << 20)
}

/// Runs `cmd` as a child and measures it; `db` is the file it writes.
fn measure(mut cmd: Command, db: &Path) -> Measured {
    let _ = std::fs::remove_file(db);
    let _ = std::fs::remove_file(db.with_extension("mdb-lock"));
    let lock = PathBuf::from(format!("{}-lock", db.display()));
    let _ = std::fs::remove_file(&lock);
    let start = Instant::now();
    #[allow(
        clippy::zombie_processes,
        reason = "reaped by `wait4` below, which also gives its rusage"
    )]
    let child = cmd.spawn().expect("start the loader");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for (`child` is never waited on through
    // std); `status` and `usage` are valid for writes.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed (status {status})"
    );
    Measured {
        secs,
        peak_kib: usage.ru_maxrss as u64,
        file_bytes: std::fs::metadata(db).map_or(0, |m| m.len()),
    }
}

/// The `load` subcommand.
pub fn run(args: &LoadArgs) {
    let tmp = tempfile::tempdir_in(args.dir.as_deref().unwrap_or(&std::env::temp_dir()))
        .expect("a temporary directory");
    let dir = tmp.path();
    let dump = dir.join("input.dump");
    let started = Instant::now();
    write_dump(&dump, args);
    let dump_bytes = std::fs::metadata(&dump).unwrap().len();
    eprintln!(
        "{} entries, {} MiB of dump text, written in {:.1} s",
        args.n,
        dump_bytes >> 20,
        started.elapsed().as_secs_f64()
    );
    let ferrocore = std::env::current_exe()
        .expect("this binary's path")
        .with_file_name("ferrocore");
    assert!(
        ferrocore.exists(),
        "{} is missing: cargo build --release -p ferrocore-cli",
        ferrocore.display()
    );
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 0..args.repeat {
        let ours_db = dir.join("ferrocore.mdb");
        let mut cmd = Command::new(&ferrocore);
        cmd.args(["load", "--quiet", "-n", "--memory", &args.memory, "-f"])
            .arg(&dump)
            .arg(&ours_db);
        let a = measure(cmd, &ours_db);
        if args.ferrocore_only {
            eprintln!(
                "round {}: ferrocore {:.1} s, {} MiB peak, {} MiB file",
                round + 1,
                a.secs,
                a.peak_kib >> 10,
                a.file_bytes >> 20
            );
            continue;
        }
        let lmdb_db = dir.join("lmdb.mdb");
        let mut cmd = Command::new("mdb_load");
        cmd.args(["-n", "-f"]).arg(&dump).arg(&lmdb_db);
        let b = measure(cmd, &lmdb_db);
        eprintln!(
            "round {}: ferrocore {:.1} s, {} MiB peak; mdb_load {:.1} s, {} MiB peak",
            round + 1,
            a.secs,
            a.peak_kib >> 10,
            b.secs,
            b.peak_kib >> 10
        );
        ours.push(a);
        theirs.push(b);
    }
    if args.ferrocore_only {
        return;
    }
    let med = |v: &[Measured], f: fn(&Measured) -> f64| median(v.iter().map(f).collect());
    let secs = (med(&ours, |m| m.secs), med(&theirs, |m| m.secs));
    let rows = [
        ("time, s", secs),
        (
            "entries/s",
            (args.n as f64 / secs.0, args.n as f64 / secs.1),
        ),
        (
            "peak RSS, MiB",
            (
                med(&ours, |m| m.peak_kib as f64 / 1024.0),
                med(&theirs, |m| m.peak_kib as f64 / 1024.0),
            ),
        ),
        (
            "file, MiB",
            (
                med(&ours, |m| m.file_bytes as f64 / 1048576.0),
                med(&theirs, |m| m.file_bytes as f64 / 1048576.0),
            ),
        ),
    ];
    println!(
        "unsorted load of {} entries ({}-byte keys, {}-byte values): ferrocore load --memory {} \
         vs mdb_load, median of {}",
        args.n, args.key_len, args.value_len, args.memory, args.repeat
    );
    println!();
    println!("| | ferrocore load | mdb_load | ferrocore ÷ mdb_load |");
    println!("|---|---|---|---|");
    for (label, (a, b)) in rows {
        println!("| {label} | {a:.1} | {b:.1} | {:.2} |", a / b);
    }
}
