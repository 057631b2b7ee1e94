//! `ferrocore check`: verifies every page of an environment's latest snapshot, the free
//! list and the tree invariants.

use std::path::PathBuf;

use crate::envpath::EnvPath;
use crate::failure::Outcome;

/// Options of `ferrocore check`.
#[derive(clap::Args, Debug)]
#[command(
    display_name = "ferrocore",
    about = "Verify every page, the free list and the tree invariants"
)]
pub struct Args {
    /// PATH is the data file itself, not the environment's directory (MDB_NOSUBDIR).
    #[arg(short = 'n', long = "no-subdir")]
    no_subdir: bool,
    /// The environment's directory (or data file with -n).
    path: PathBuf,
}

/// Runs `ferrocore check`.
pub fn run(args: &Args) -> Outcome {
    let at = EnvPath::new(args.path.clone(), args.no_subdir);
    let env = at.open_existing(true, 0)?;
    let report = env.check().map_err(|e| at.failure(e))?;
    let mut out = crate::output::Output::stdout();
    out.line(format!(
        "ok: {} tree pages, {} free pages, {} named DBs, lowest leaf fill {}‰",
        report.tree_pages, report.free_pages, report.named_dbs, report.min_leaf_fill
    ))?;
    out.finish()
}
