//! The `ferrocore` command.
//!
//! - `ferrocore demo` (the default): runs a small workload on a fresh environment in a
//!   temporary directory — random inserts in txns of 1,000, random point reads, a full scan,
//!   then an integrity check — and prints what it measured.
//! - `ferrocore stat PATH`: page size, tree shape and entries of an environment.
//! - `ferrocore check PATH`: verifies every page, the free list and the tree invariants.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use ferrocore::{env_flags, Database, Env, EnvOptions};

#[derive(Parser)]
#[command(
    name = "ferrocore",
    version,
    about = "ferrocore: LMDB-compatible embedded key-value store"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the demo workload on a temporary environment (the default command).
    Demo {
        /// Number of entries.
        #[arg(short = 'n', long, default_value_t = 1_000_000)]
        entries: u64,
        /// Entries per write txn.
        #[arg(long, default_value_t = 1000)]
        batch: u64,
    },
    /// Print statistics of an environment (like mdb_stat).
    Stat {
        /// Environment directory (or data file with --no-subdir).
        path: PathBuf,
        /// The path is the data file itself.
        #[arg(long)]
        no_subdir: bool,
    },
    /// Verify every page, the free list and the tree invariants.
    Check {
        /// Environment directory (or data file with --no-subdir).
        path: PathBuf,
        /// The path is the data file itself.
        #[arg(long)]
        no_subdir: bool,
    },
}

/// A small deterministic generator (splitmix64) so runs are repeatable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn key(&mut self) -> [u8; 16] {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&self.next().to_be_bytes());
        k[8..].copy_from_slice(&self.next().to_be_bytes());
        k
    }
}

fn open(path: &PathBuf, no_subdir: bool, read_only: bool) -> ferrocore::Result<Env> {
    let mut flags = if no_subdir { env_flags::NO_SUB_DIR } else { 0 };
    if read_only {
        flags |= env_flags::READ_ONLY;
    }
    // SAFETY: the command only reads/writes the environment through ferrocore; the user
    // is responsible for not truncating the file behind it while it runs.
    unsafe { EnvOptions::new().flags(flags).open(path) }
}

fn rate(n: u64, secs: f64) -> String {
    format!("{:>10.0} ops/s", n as f64 / secs)
}

fn demo(entries: u64, batch: u64) -> ferrocore::Result<()> {
    let dir = tempfile::tempdir()?;
    let env = open(&dir.path().to_path_buf(), false, false)?;
    println!(
        "ferrocore demo: {entries} random 16-byte keys, 100-byte values, txns of {batch}, in {}",
        dir.path().display()
    );
    let value = [0x5Au8; 100];
    let mut rng = Rng(42);
    let t = Instant::now();
    let mut done = 0;
    while done < entries {
        let mut txn = env.begin_write()?;
        for _ in 0..batch.min(entries - done) {
            txn.put(Database::MAIN, &rng.key(), &value, 0)?;
        }
        txn.commit()?;
        done += batch.min(entries - done);
    }
    let load = t.elapsed().as_secs_f64();
    println!(
        "  insert (random, synced commits)  {:>8.3} s  {}",
        load,
        rate(entries, load)
    );

    let mut rng = Rng(42);
    let t = Instant::now();
    let txn = env.begin_read()?;
    let mut found = 0u64;
    for _ in 0..entries {
        if txn.get(Database::MAIN, &rng.key())?.is_some() {
            found += 1;
        }
    }
    let reads = t.elapsed().as_secs_f64();
    println!(
        "  get (random, all hit)             {:>8.3} s  {}",
        reads,
        rate(entries, reads)
    );
    assert_eq!(found, entries, "every inserted key is found");

    let t = Instant::now();
    let mut cursor = txn.cursor(Database::MAIN)?;
    let mut scanned = 0u64;
    let mut bytes = 0usize;
    let mut item = cursor.first()?.map(|(k, v)| k.len() + v.len());
    while let Some(len) = item {
        scanned += 1;
        bytes += len;
        item = cursor.next()?.map(|(k, v)| k.len() + v.len());
    }
    let scan = t.elapsed().as_secs_f64();
    println!(
        "  full cursor scan                  {:>8.3} s  {}  ({} MB)",
        scan,
        rate(scanned, scan),
        bytes >> 20
    );
    let stat = txn.stat();
    drop(txn);
    let t = Instant::now();
    let report = env.check()?;
    println!(
        "  check: every page accounted for   {:>8.3} s  ({} tree pages, {} free)",
        t.elapsed().as_secs_f64(),
        report.tree_pages,
        report.free_pages
    );
    let info = env.info()?;
    println!(
        "  entries {}  depth {}  leaf pages {}  branch pages {}  file {:.1} MB  last txn {}",
        stat.entries,
        stat.depth,
        stat.leaf_pages,
        stat.branch_pages,
        ((info.last_pgno + 1) * env.page_size() as u64) as f64 / 1e6,
        info.last_txnid
    );
    Ok(())
}

fn stat(path: &PathBuf, no_subdir: bool) -> ferrocore::Result<()> {
    let env = open(path, no_subdir, true)?;
    let info = env.info()?;
    let s = env.stat()?;
    println!("Environment Info");
    println!("  Map size: {}", info.map_size);
    println!("  Page size: {}", s.page_size);
    println!("  Number of pages used: {}", info.last_pgno + 1);
    println!("  Last transaction ID: {}", info.last_txnid);
    println!("  Max readers: {}", info.max_readers);
    println!("  Number of readers used: {}", info.num_readers);
    println!(
        "  Oldest reader: {} txns behind, pinning {} freed pages",
        info.oldest_reader_lag, info.pinned_pages
    );
    println!("Status of Main DB");
    println!("  Tree depth: {}", s.depth);
    println!("  Branch pages: {}", s.branch_pages);
    println!("  Leaf pages: {}", s.leaf_pages);
    println!("  Overflow pages: {}", s.overflow_pages);
    println!("  Entries: {}", s.entries);
    Ok(())
}

fn check(path: &PathBuf, no_subdir: bool) -> ferrocore::Result<()> {
    let env = open(path, no_subdir, true)?;
    let report = env.check()?;
    println!(
        "ok: {} tree pages, {} free pages, {} named DBs, lowest leaf fill {}‰",
        report.tree_pages, report.free_pages, report.named_dbs, report.min_leaf_fill
    );
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command.unwrap_or(Command::Demo {
        entries: 1_000_000,
        batch: 1000,
    }) {
        Command::Demo { entries, batch } => demo(entries, batch.max(1)),
        Command::Stat { path, no_subdir } => stat(&path, no_subdir),
        Command::Check { path, no_subdir } => check(&path, no_subdir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferrocore: {e}");
            ExitCode::FAILURE
        }
    }
}
