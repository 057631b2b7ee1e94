//! `ferrocore drop`: empties a DB, or deletes a named one, as LMDB's `mdb_drop`.

use std::path::PathBuf;

use crate::envpath::EnvPath;
use crate::failure::{Failure, Outcome};

/// Options of `ferrocore drop`, those of `mdb_drop`.
#[derive(clap::Args, Debug)]
#[command(
    display_name = "ferrocore",
    about = "Empty a DB, or with -d delete a named DB, as mdb_drop",
    long_about = "Empty a DB, or with -d delete a named DB, as mdb_drop, in one write txn.\n\n\
                  Without -s the main DB is emptied, and with it every named DB (their \
                  records are keys of the main DB); -d does not delete the main DB itself."
)]
pub struct Args {
    /// Delete the DB rather than only emptying it.
    #[arg(short = 'd')]
    delete: bool,
    /// Drop the named DB NAME instead of the main DB.
    #[arg(short = 's', value_name = "NAME")]
    subdb: Option<String>,
    /// PATH is the data file itself, not the environment's directory (MDB_NOSUBDIR).
    #[arg(short = 'n', long = "no-subdir")]
    no_subdir: bool,
    /// The environment's directory (or data file with -n).
    path: PathBuf,
}

/// Runs `ferrocore drop`.
pub fn run(args: &Args) -> Outcome {
    let at = EnvPath::new(args.path.clone(), args.no_subdir);
    let env = at.open_existing(false, 2)?;
    let mut txn = env.begin_write().map_err(|e| at.failure(e))?;
    let db = txn
        .open_db(args.subdb.as_deref(), 0)
        .map_err(|e| match &args.subdb {
            Some(name) => Failure::new(format!("{}: database {name}: {e}", at.path.display())),
            None => at.failure(e),
        })?;
    txn.drop_db(db, args.delete).map_err(|e| at.failure(e))?;
    txn.commit().map_err(|e| at.failure(e))
}
