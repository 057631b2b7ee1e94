//! ferrocore-bench: ferrocore against LMDB, redb and SQLite on the workloads of DESIGN.md
//! ("How we measure", W1-W9), in one run on one machine, with ratios to LMDB.
//!
//! # What runs
//!
//! | workload | what | engines |
//! |---|---|---|
//! | W1 | many DBs: read txn begin/abort and renew/reset with a cursor on DB 0, 10 to 100,000 named DBs (`w1`) | ferrocore, LMDB |
//! | W2 | sorted bulk load, 16-byte keys, 100-byte values, append mode, txns of 100,000, sync at the end | all, with WRITEMAP variants |
//! | W3 | random inserts, txns of 1,000, no sync | ferrocore, LMDB, redb, SQLite |
//! | W4 | random point reads over W3's result, 1 thread and 1 per core | same |
//! | W5 | full cursor scan over W3's result | same |
//! | W6 | 1,000 synced commits of one put, on an empty file and on a prefilled one | all, with WRITEMAP variants |
//! | W7 | indexed load: a main DB plus 10 DUPSORT index DBs per txn (seed 001's slapadd) | all, with WRITEMAP variants |
//! | W8 | instructions per put and per get under callgrind (`w8`) | ferrocore, LMDB, redb, SQLite |
//! | load | 10M unsorted entries as `mdb_dump` text: `ferrocore load` (external sort within `--memory`, bottom-up build) against `mdb_load`, time, peak RSS, file size (`load`; needs the `ferrocore` binary built) | ferrocore, LMDB's tool |
//! | W9 | redb's published set: 24-byte keys, 150-byte values, bulk load, individual and batch synced writes, random and range reads, reads on N threads, removals, file size | ferrocore, LMDB, redb, SQLite |
//!
//! Each engine is used as its documentation recommends for the workload
//! (`engines/*.rs`): LMDB and ferrocore with NOSYNC for unsynced loads and their APPEND
//! put flag for sorted ones; redb with `Durability::None` / `Immediate`; SQLite in WAL
//! mode with `synchronous=NORMAL` / `FULL`, a `WITHOUT ROWID` BLOB-keyed table and
//! prepared statements. Synced comparisons use each engine's fully durable commit. The
//! WRITEMAP variants: LMDB's MDB_WRITEMAP and ferrocore's WRITE_MAP, both writing pages
//! in place in a writable shared map. RocksDB is not included (see README.md).
//!
//! # How it measures
//!
//! The parent runs every (workload group, engine) pair in a child process of this same
//! binary (`cell`, hidden), in a fresh directory, interleaved over repetitions
//! (A B C D A B C D ...), and reports the median of each phase. Each child reports its
//! phases' times, its peak resident set (VmHWM: anonymous memory plus the pages of
//! memory-mapped files it touched, so per engine and per workload) and the disk space of
//! the engine's files after it closed. Ratios are to LMDB in the same run.
//!
//! # Commands
//!
//! - `ferrocore-bench` or `ferrocore-bench run [--full] [-r 3] [--groups w2,w3,...]
//!   [--engines ...] [--json PATH] [--markdown]`: W2-W7 and W9, quick sizes by default
//!   (a few minutes on 2 cores).
//! - `ferrocore-bench report --markdown [--from PATH]`: the README table, with date,
//!   machine and command; `--from` re-renders a JSON file written by `--json`.
//! - `ferrocore-bench w1`: W1 (see `w1.rs`).
//! - `ferrocore-bench w8 [-n 20000]`: W8 (needs valgrind).

mod data;
mod engines;
mod load;
mod machine;
mod runner;
mod w1;
mod w8;
mod workloads;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub(crate) use data::median;
pub(crate) use engines::lmdb::{check, val};

#[derive(Parser)]
#[command(about = "ferrocore vs LMDB, redb, SQLite: the DESIGN.md workloads, one run, ratios")]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// W2-W7 and W9 on every engine (the default command).
    Run(runner::RunArgs),
    /// Like `run`, or re-renders a JSON file (`--from`); `--markdown` for the README.
    Report(ReportArgs),
    /// W1 many DBs: read txn begin/abort and renew/reset with a cursor on DB 0, for 10 to
    /// 100,000 named DBs.
    W1(w1::W1Args),
    /// W8 instructions per operation under valgrind's callgrind.
    W8(w8::W8Args),
    /// The unsorted load: `ferrocore load` against LMDB's `mdb_load` (10M entries).
    Load(load::LoadArgs),
    /// One workload group on one engine (run by `run` in a child process).
    #[command(hide = true)]
    Cell(CellArgs),
    /// One W8 operation on one engine (run by `w8` under callgrind).
    #[command(hide = true)]
    W8Cell(w8::W8CellArgs),
}

#[derive(Args)]
struct ReportArgs {
    /// Render this JSON file (from `run --json`) instead of running.
    #[arg(long)]
    from: Option<PathBuf>,
    #[command(flatten)]
    run: runner::RunArgs,
}

#[derive(Args)]
struct CellArgs {
    #[arg(long, value_enum)]
    group: workloads::Group,
    #[arg(long, value_enum)]
    engine: engines::Kind,
    /// Sizes as JSON.
    #[arg(long)]
    sizes: String,
    #[arg(long)]
    dir: PathBuf,
}

fn run_and_print(args: &runner::RunArgs) {
    let report = runner::run(args);
    if let Some(path) = &args.json {
        runner::write_json(&report, path);
    }
    print!("{}", runner::render(&report, args.markdown));
}

fn main() {
    let cli = Cli::parse();
    let cmd = cli
        .cmd
        .unwrap_or_else(|| match Cli::parse_from(["ferrocore-bench", "run"]).cmd {
            Some(c) => c,
            None => unreachable!(),
        });
    match cmd {
        Cmd::Run(args) => run_and_print(&args),
        Cmd::Report(args) => match &args.from {
            Some(path) => print!(
                "{}",
                runner::render(&runner::read_json(path), args.run.markdown)
            ),
            None => run_and_print(&args.run),
        },
        Cmd::W1(args) => w1::run(&args),
        Cmd::W8(args) => w8::run(&args),
        Cmd::Load(args) => load::run(&args),
        Cmd::Cell(args) => {
            let sizes: workloads::Sizes = serde_json::from_str(&args.sizes).expect("sizes");
            let result = workloads::run(args.group, args.engine, &sizes, &args.dir);
            println!("{}", serde_json::to_string(&result).unwrap());
        }
        Cmd::W8Cell(args) => w8::cell(&args),
    }
}
