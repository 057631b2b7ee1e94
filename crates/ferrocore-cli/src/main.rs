//! The `ferrocore` command: a demo workload, and operator's tools compatible with LMDB's.
//!
//! - `ferrocore demo` (the default): runs a small workload on a fresh environment in a
//!   temporary directory and prints what it measured.
//! - `ferrocore stat [-e] [-f[f[f]]] [-r[r]] [-a|-s NAME] [-n] [--json] PATH`: statistics,
//!   as `mdb_stat`, or the same figures as JSON.
//! - `ferrocore dump [-a|-s NAME] [-l] [-p] [-n] [-f FILE] PATH`: DBs as text, as
//!   `mdb_dump` writes them.
//! - `ferrocore load [-f FILE] [-n] [-s NAME] [-N] [-T] [--memory SIZE] PATH`: that text
//!   back into an environment, as `mdb_load`, in one write txn; an empty DB is built
//!   bottom-up (out-of-order input sorted externally within `--memory`).
//! - `ferrocore copy [-c] [-n] [-v] SRC [DST]`: copies the data file, as `mdb_copy`; `-c`
//!   compacts it (no free pages), `-v` copies the snapshot before the latest.
//! - `ferrocore drop [-d] [-s NAME] [-n] PATH`: empties a DB, or deletes a named one, as
//!   `mdb_drop`.
//! - `ferrocore check [-n] [--json] PATH`: verifies every page, the free list and the
//!   tree invariants, and reports every problem found; exit status 0 when clean, 1 when
//!   it found problems, 2 when the environment cannot be opened or read at all.
//!
//! `load`, `copy`, `check` and `dump` show a progress bar on standard error when it is a
//! terminal (`--progress` shows it anywhere, `--quiet` nowhere).
//!
//! Each command lives in its own module; this file only parses and dispatches. `-V` (or
//! `--version`) prints the version, after any command as well.

mod check;
mod copy;
mod demo;
mod drop;
mod dump;
mod envpath;
mod failure;
mod load;
mod load_pairs;
mod output;
mod progress;
mod stat;
mod text;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::failure::Failure;

#[derive(Parser)]
#[command(
    name = "ferrocore",
    version,
    propagate_version = true,
    about = "ferrocore: LMDB-compatible embedded key-value store"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    Demo(demo::Args),
    Stat(stat::Args),
    Dump(dump::Args),
    Load(load::Args),
    Copy(copy::Args),
    Drop(drop::Args),
    Check(check::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command.unwrap_or(Command::Demo(demo::Args::default())) {
        Command::Demo(args) => demo::run(&args),
        Command::Stat(args) => stat::run(&args),
        Command::Dump(args) => dump::run(&args),
        Command::Load(args) => load::run(&args),
        Command::Copy(args) => copy::run(&args),
        Command::Drop(args) => drop::run(&args),
        Command::Check(args) => check::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::BrokenPipe) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("ferrocore: {e}");
            ExitCode::from(e.exit_status())
        }
    }
}
